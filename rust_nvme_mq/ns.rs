// SPDX-License-Identifier: GPL-2.0

//! Namespaces as disks: the blk-mq operations of the disks (submission goes to the
//! controller's queue set; timeouts), their tag set, and the one namespace scan that adds a
//! disk for every active namespace without one, revalidates the others and removes the disks
//! of vanished namespaces, at probe and for a rescan.

use crate::{
    cmd::{self, NsDescList, NsFormat, NsList},
    ctrl::{Ctrl, CtrlEvents, CtrlInfo, CtrlState},
    generic,
    ident::{self, on_off, Identity, NsIds},
    ioctl::Passthru,
    nsdisk::{Ns, NsDisk, NsSet, Revalidated},
    request::{NsShape, NvmeOps},
};
use kernel::{
    block::{
        mq::{
            gen_disk::{GenDisk, GenDiskBuilder},
            Operations, QueueError, QueueMaps, Quiesced, Request, RequestList, TagSet, TagSetFlag,
            TimeoutReturn,
        },
        SECTOR_SHIFT,
    },
    device::Device,
    fmt::{self, Write},
    io::{io_project, Io},
    new_mutex,
    prelude::*,
    str::{kstrtobool_bytes, Formatter},
    sync::{aref::ARef, atomic::Relaxed, Arc, ArcBorrow, Mutex},
    time::Delta,
};

/// PRP entries and SGL data blocks need dword alignment only, so direct I/O buffers may start
/// at any dword (like the C driver, which sets the same).
const DMA_ALIGNMENT_MASK: u32 = 3;
/// blk-mq's limit on the tags of a tag set (`BLK_MQ_MAX_DEPTH`).
const MAX_TAGS: u32 = 10240;
/// Largest discard or write-zeroes request, in 512-byte sectors: the NLB of Write Zeroes is 16
/// bit, and a format with 512-byte blocks must not exceed it. The same for every format, so
/// the limit holds when a format changes the block size of a live disk.
const MAX_ZERO_SECTORS: u32 = 1 << 16;
/// Entries of an active namespace list (one Identify page): the scan reads one page, so it
/// sees the first 1024 active namespaces.
const NS_LIST_ENTRIES: usize = cmd::IDENTIFY_SIZE / size_of::<u32>();

#[vtable]
impl Operations for NvmeOps {
    /// The namespace object.
    type QueueData = Arc<Ns>;

    /// Turned away while the controller is not live; otherwise the queue set picks the queue.
    fn queue_rq(
        ns: ArcBorrow<'_, Ns>,
        rq: ARef<Request<Self>>,
        is_last: bool,
    ) -> Result<(), QueueError<Self>> {
        let ctrl = &ns.ctrl;
        match ctrl.state() {
            CtrlState::Live | CtrlState::Deleting => {}
            // Retried by blk-mq a few milliseconds later.
            CtrlState::Resetting | CtrlState::Suspended => return Err(QueueError::new(rq, ENOMEM)),
            CtrlState::Dead => return Err(QueueError::new(rq, EIO)),
        }
        // A failed passthrough command is logged if the namespace's attribute says so.
        let log_failure = rq.is_driver_private() && ns.passthru_err_log.load(Relaxed);
        ctrl.queues.submit(
            ns.shape.addr(),
            rq,
            log_failure,
            ctrl.faults.delivery(),
            is_last,
        )
    }

    /// A task's plugged requests for this disk at once: each goes where `queue_rq` would send
    /// it, a queue's lock is taken once for the requests in a row that go to it, and the
    /// doorbells are written after the last one.
    fn queue_rqs(ns: ArcBorrow<'_, Ns>, list: &mut RequestList<'_, Self>) {
        let ctrl = &ns.ctrl;
        if !matches!(ctrl.state(), CtrlState::Live | CtrlState::Deleting) {
            // Left on the list: blk-mq hands them to `queue_rq`, which turns them away.
            return;
        }
        let log = ns.passthru_err_log.load(Relaxed);
        let (requests, refused) = ctrl.queues.submit_batch(list, ns.shape.addr(), |rq| {
            (rq.is_driver_private() && log, ctrl.faults.delivery())
        });
        ctrl.queues.batched.count(requests, refused);
    }

    /// The dispatch ended before a request with `is_last`: write the doorbells that wait.
    fn commit_rqs(ns: ArcBorrow<'_, Ns>) {
        ns.ctrl.queues.ring_unrung();
    }

    /// Reap the poll queue of poll context `hw_queue` and, with `overflow`, the other poll
    /// queues too (its requests may have been lent to them), in the order they were tried.
    fn poll(ns: ArcBorrow<'_, Ns>, hw_queue: u32) -> u32 {
        u32::try_from(ns.ctrl.queues.poll(hw_queue)).unwrap_or(u32::MAX)
    }

    /// A command timed out: send an Abort for it (it then completes with an error, or
    /// normally if it was only slow), and give it one more timeout. If it times out again, or
    /// the Abort itself fails, a controller reset is queued, which requeues every request the
    /// controller held (this one too). While a reset runs, timeouts wait for it.
    ///
    /// First the command's completion queue is reaped: a command that completed while the
    /// queue's interrupt vector was shut down (its CPUs went offline) raised no interrupt and
    /// is found there.
    ///
    /// Only the request's address is needed, to find its slot: the reference is dropped at
    /// once, so that the interrupt handler can end the request meanwhile (while a timeout
    /// handler holds a reference, ending fails and the handler defers it; those deferred
    /// requests are ended right after the drop). blk-mq keeps the request from being reused
    /// until this returns, so the address stays its own.
    fn timeout(ns: ArcBorrow<'_, Ns>, rq: ARef<Request<Self>>) -> TimeoutReturn {
        let ctrl = &ns.ctrl;
        let id: *const Request<Self> = &*rq;
        drop(rq);
        let rq = id;
        ctrl.queues.finish_deferred();
        if matches!(ctrl.state(), CtrlState::Resetting | CtrlState::Suspended) {
            // The reset (or the suspend) requeues the request if the controller still holds
            // it.
            return TimeoutReturn::ResetTimer;
        }
        if found_by_polling(ctrl, rq) {
            return TimeoutReturn::Done;
        }
        let Some(at) = ctrl.queues.mark_aborted(rq) else {
            // Ended meanwhile (or being ended by whoever took it off its slot).
            return TimeoutReturn::Done;
        };
        let (qid, cid) = (at.queue.qid, at.cid);
        if !at.aborted_before {
            pr_warn!(
                "rnvme{}: command {} on queue {} timed out, aborting\n",
                ctrl.index,
                cid,
                qid
            );
            match ctrl.admin().abort(&ctrl.regs, qid, cid) {
                Ok(()) => return TimeoutReturn::ResetTimer,
                Err(e) => pr_err!("rnvme{}: abort failed: {:?}\n", ctrl.index, e),
            }
        }
        pr_err!(
            "rnvme{}: command {} on queue {} not completed after an abort: resetting the controller\n",
            ctrl.index,
            cid,
            qid
        );
        // The reset work requeues the request: it is not ended here.
        let _ = ctrl.schedule_reset();
        TimeoutReturn::Done
    }

    /// The identity attributes of the C driver's disks (`ident.rs`).
    const DISK_ATTRIBUTES: &'static [&'static CStr] = ident::DISK_ATTRIBUTES;

    fn disk_attribute_visible(ns: ArcBorrow<'_, Ns>, index: usize) -> bool {
        ns.ident.visible(index)
    }

    fn show_disk_attribute(ns: ArcBorrow<'_, Ns>, index: usize, buf: &mut [u8]) -> Result<usize> {
        if index != ident::PASSTHRU_ERR_LOG {
            return ns.ident.show(index, buf);
        }
        let mut f = Formatter::new(buf);
        writeln!(f, "{}", on_off(ns.passthru_err_log.load(Relaxed))).map_err(|_| EINVAL)?;
        Ok(f.bytes_written())
    }

    /// C's `passthru_err_log_enabled` of the disk: whether failed I/O passthrough commands on
    /// the namespace are logged; a boolean as C's `kstrtobool()` reads it.
    const WRITABLE_DISK_ATTRIBUTES: &'static [&'static CStr] = &[c"passthru_err_log_enabled"];

    fn store_disk_attribute(ns: ArcBorrow<'_, Ns>, index: usize, buf: &[u8]) -> Result {
        if index != ident::PASSTHRU_ERR_LOG {
            return Err(EINVAL);
        }
        ns.passthru_err_log.store(kstrtobool_bytes(buf)?, Relaxed);
        Ok(())
    }

    /// An ioctl on the disk: the namespace's passthrough ioctls (`ioctl.rs`).
    fn ioctl(ns: ArcBorrow<'_, Ns>, _write: bool, cmd: u32, arg: usize) -> Result<i32> {
        ns.passthru.ioctl(&ns, cmd, arg)
    }

    fn complete(rq: ARef<Request<Self>>) {
        // Requests are ended from the interrupt handler; nothing is completed through here.
        let _ = Request::end(rq, Ok(()));
    }
}

/// Whether request `rq`, timed out, completed without an interrupt: reaping its completion
/// queue ended it.
fn found_by_polling(ctrl: &Ctrl, rq: *const Request<NvmeOps>) -> bool {
    let Some(queue) = ctrl.queues.find(rq).map(|at| at.queue) else {
        return false;
    };
    if !queue.process_completions() || ctrl.queues.find(rq).is_some() {
        return false;
    }
    pr_info!(
        "rnvme{}: queue {}: request completed without an interrupt, found by polling\n",
        ctrl.index,
        queue.qid
    );
    true
}

/// The tag set of a controller's disks: one blk-mq context per CPU, all drawing from one set
/// of tags and requests as large as all queues' slots together (what the controller can hold,
/// not that much per CPU). blk-mq divides shared tags fairly between the disks (namespaces)
/// of the controller, never between the contexts of one disk. With shared tags blk-mq would
/// give the disks mq-deadline; like other multi-queue disks they keep "none".
///
/// With poll queues, polled requests get contexts of their own (the poll map, one context per
/// poll queue), so the disks support polled I/O.
fn tag_set(ctrl: &Ctrl) -> Result<Arc<TagSet<NvmeOps>>> {
    let slots = u32::try_from(ctrl.queues.total_slots())?;
    let maps = QueueMaps {
        default: kernel::cpu::nr_cpu_ids(),
        read: 0,
    };
    Arc::pin_init(
        TagSet::new_with_poll_maps(
            maps,
            u32::try_from(ctrl.queues.nr_poll())?,
            slots.min(MAX_TAGS),
            TagSetFlag::TagHctxShared | TagSetFlag::NoSchedByDefault,
        ),
        GFP_KERNEL,
    )
}

/// Builds a disk whose block device operations hold the module (`GenDiskBuilder::build_owned`
/// with the module's type, which only the crate root names).
pub(crate) type BuildDisk = fn(
    GenDiskBuilder,
    fmt::Arguments<'_>,
    Arc<TagSet<NvmeOps>>,
    Arc<Ns>,
) -> Result<GenDisk<NvmeOps>>;

/// What the disks of a controller's namespaces are made of, kept for rescans.
pub(crate) struct Namespaces {
    pub(crate) ctrl: Arc<Ctrl>,
    /// The disks.
    pub(crate) list: Arc<NsSet>,
    /// Given to every disk, for its ioctls.
    pub(crate) passthru: Arc<Passthru>,
    /// The tag set all disks of the controller share.
    tagset: Arc<TagSet<NvmeOps>>,
    /// While the controller is down for a system sleep: the quiesce of the tag set, undone
    /// when dropped.
    quiesced: Pin<KBox<Mutex<Option<Quiesced<NvmeOps>>>>>,
    /// Identify Controller: the disks' limits and features (and the sysfs identity).
    pub(crate) info: CtrlInfo,
    io_timeout: Delta,
    /// The PCI function (the DMA device of the Identify commands).
    parent: ARef<Device>,
    /// The controller's device (`/sys/class/rnvme/rnvme<C>`), the parent of the disks and the
    /// generic devices in sysfs, as C's controller device is.
    ctrl_dev: ARef<Device>,
    build: BuildDisk,
}

impl Namespaces {
    pub(crate) fn new(
        list: Arc<NsSet>,
        passthru: Arc<Passthru>,
        info: CtrlInfo,
        io_timeout: Delta,
        parent: &Device,
        ctrl_dev: &Device,
        build: BuildDisk,
    ) -> Result<Self> {
        let ctrl = passthru.ctrl.clone();
        Ok(Self {
            tagset: tag_set(&ctrl)?,
            quiesced: KBox::pin_init(new_mutex!(None), GFP_KERNEL)?,
            ctrl,
            list,
            passthru,
            info,
            io_timeout,
            parent: parent.into(),
            ctrl_dev: ctrl_dev.into(),
            build,
        })
    }

    /// The PCI function of the controller.
    pub(crate) fn pci(&self) -> &Device {
        &self.parent
    }

    /// The namespace scan, at probe, for a rescan and for an asynchronous event that says
    /// namespaces changed: read the active namespace list, remove the namespaces no longer
    /// active, or whose new format the driver cannot serve, give the others their format now
    /// (see [`NsSet::revalidate`]), and add one for every active namespace without one (if its
    /// format is supported). One scan at a time; the list is locked only to add or remove.
    pub(crate) fn scan(&self) -> Result {
        let mut gone = KVec::new();
        let scanned = self.scan_locked(&mut gone);
        // Removed once the scan lock is released: a removal waits for the calls on the
        // namespace's generic device, and one may wait for that lock (a Format NVM).
        for (nsid, why) in gone {
            self.list.retire(nsid, why);
        }
        scanned
    }

    /// The scan, under the scan lock; the namespaces to remove, and why, go to `gone`.
    fn scan_locked(&self, gone: &mut KVec<(u32, &'static str)>) -> Result {
        let _scan = self.list.scan_lock();
        let active = self.active_nsids()?;
        for ns in self.list.namespaces()? {
            let nsid = ns.shape.nsid;
            if !active.contains(&nsid) {
                gone.push((nsid, "namespace gone"), GFP_KERNEL)?;
            } else if self.list.revalidate(&ns, None) == Revalidated::Unusable {
                gone.push((nsid, "namespace not usable"), GFP_KERNEL)?;
            }
        }
        for &nsid in active.iter() {
            if self.list.contains(nsid) || gone.iter().any(|&(n, _)| n == nsid) {
                continue;
            }
            let Some(format) = self.ctrl.identify_ns(&self.parent, nsid)? else {
                continue;
            };
            let ids = self.identify_ids(&format);
            let disk = self.add_disk(&format, ids)?;
            self.announce(&format);
            self.list.add(disk)?;
        }
        Ok(())
    }

    /// The active namespace ids (at most one Identify page of them).
    fn active_nsids(&self) -> Result<KVec<u32>> {
        let ctrl = &self.ctrl;
        ctrl.live_admin()?
            .identify::<NsList, _>(&ctrl.regs, 0, cmd::CNS_ACTIVE_NS_LIST, |list| {
                let mut ids = KVec::new();
                for i in 0..NS_LIST_ENTRIES {
                    let nsid = io_project!(list, .0[try: i]).copy_read().get();
                    if nsid == 0 {
                        break;
                    }
                    ids.push(nsid, GFP_KERNEL)?;
                }
                Ok(ids)
            })
    }

    /// The identifiers of namespace `f`: its descriptor list, then Identify Namespace. A
    /// controller that refuses the list (before NVMe 1.3) gives those of Identify Namespace
    /// only. With the bogus-NID quirk only the command set is kept, as in C.
    fn identify_ids(&self, f: &NsFormat) -> NsIds {
        let ctrl = &self.ctrl;
        let mut ids = ctrl
            .live_admin()
            .and_then(|mut admin| {
                admin.identify::<NsDescList, _>(
                    &ctrl.regs,
                    f.nsid,
                    cmd::CNS_NS_DESC_LIST,
                    NsIds::from_descriptors,
                )
            })
            .unwrap_or_else(|e| {
                dev_warn!(
                    self.parent,
                    "rnvme{}n{}: Identify Descriptors failed ({:?})\n",
                    ctrl.index,
                    f.nsid,
                    e
                );
                NsIds::default()
            });
        if self.info.bogus_nid {
            dev_info!(
                self.parent,
                "rnvme{}n{}: Ignoring bogus Namespace Identifiers\n",
                ctrl.index,
                f.nsid
            );
            return NsIds {
                csi: ids.csi,
                ..NsIds::default()
            };
        }
        ids.fill(f.eui64, f.nguid);
        ids
    }

    /// Namespace `f` with identifiers `ids`: its disk, a child of the PCI function in sysfs,
    /// and its generic device.
    fn add_disk(&self, f: &NsFormat, ids: NsIds) -> Result<NsDisk> {
        let info = &self.info;
        let builder = self.disk_builder(f)?;
        let ident = Identity {
            ids,
            nsid: f.nsid,
            vid: info.vid,
            serial: info.serial,
            model: info.model,
        };
        let shape = NsShape::new(f.nsid, f.lba_shift, f.sectors());
        let ns = Ns::new(self.ctrl.clone(), shape, ident, self.passthru.clone())?;
        let name = fmt!("rnvme{}n{}", self.ctrl.index, f.nsid);
        let disk = (self.build)(builder, name, self.tagset.clone(), ns.clone())?;
        NsDisk::new(ns, disk, |ns, disk| {
            generic::register(ns, disk, &self.ctrl_dev)
        })
    }

    /// The disk of namespace `f`, to be: its format, the controller's limits and features.
    fn disk_builder(&self, f: &NsFormat) -> Result<GenDiskBuilder> {
        let info = &self.info;
        let block = 1u32 << f.lba_shift;
        let transfer = &info.transfer;
        let max_sectors = u32::try_from(transfer.max_bytes >> SECTOR_SHIFT)?;
        let mut builder = GenDiskBuilder::new()
            .capacity_sectors(f.sectors())
            .logical_block_size(block)?
            .physical_block_size(block)?
            .max_hw_sectors(max_sectors)
            .max_segments(u16::try_from(transfer.max_segments())?)
            .max_segment_size(u32::MAX)?
            .virt_boundary_mask(transfer.virt_boundary_mask())?
            .dma_alignment(DMA_ALIGNMENT_MASK)?
            .rq_timeout(self.io_timeout)
            .parent(&self.ctrl_dev);
        if info.vwc {
            builder = builder.write_cache(true);
        }
        if info.oncs & cmd::ONCS_DSM != 0 {
            builder = builder.max_discard_sectors(MAX_ZERO_SECTORS);
        }
        if info.oncs & cmd::ONCS_WRITE_ZEROES != 0 {
            builder = builder.max_write_zeroes_sectors(MAX_ZERO_SECTORS);
        }
        Ok(builder)
    }

    /// Log a new disk.
    fn announce(&self, f: &NsFormat) {
        let info = &self.info;
        let flag = |on: bool, name: &'static str| if on { name } else { "" };
        dev_info!(
            self.parent,
            "rnvme{}n{}: {} blocks of {} bytes ({} MiB){}{}{}\n",
            self.ctrl.index,
            f.nsid,
            f.nsze,
            1u32 << f.lba_shift,
            (f.nsze << f.lba_shift) >> 20,
            flag(info.vwc, ", write cache"),
            flag(info.oncs & cmd::ONCS_DSM != 0, ", discard"),
            flag(info.oncs & cmd::ONCS_WRITE_ZEROES != 0, ", write zeroes")
        );
    }
}

impl CtrlEvents for Namespaces {
    fn gone(&self) {
        self.list.remove_all();
    }

    fn namespaces_changed(&self) -> Result {
        self.scan()
    }

    fn quiesce(&self) {
        // A guard already there (a suspend without resume) is replaced: one quiesce is held.
        let quiesced = self.tagset.quiesce();
        *self.quiesced.lock() = Some(quiesced);
    }

    fn unquiesce(&self) {
        let quiesced = self.quiesced.lock().take();
        drop(quiesced);
    }
}
