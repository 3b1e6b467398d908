// SPDX-License-Identifier: GPL-2.0

//! Namespaces: their disks and the blk-mq operations, which pick the submission queue and
//! handle timeouts.

use crate::{
    cmd::{self, IdNs, NsList},
    ctrl::{Ctrl, CtrlInfo, CtrlState},
    ioctl::Passthru,
    queue::{queue_order, SubmitError, MAX_SEGMENTS},
    RustNvmeMq,
};
use kernel::{
    block::{
        mq::{
            gen_disk::{GenDisk, GenDiskBuilder},
            Operations, QueueError, QueueMaps, Request, TagSet, TagSetFlag, TimeoutReturn,
        },
        SECTOR_SHIFT,
    },
    device::{Bound, Device},
    dma::CoherentView,
    io::io_read,
    page::PAGE_SIZE,
    prelude::*,
    sync::{aref::ARef, atomic::Relaxed, Arc, ArcBorrow},
    time::Delta,
};

/// PRP entries need dword alignment only, so direct I/O buffers may start at any dword (like
/// the C driver, which sets the same).
const DMA_ALIGNMENT_MASK: u32 = 3;
/// blk-mq's limit on the tags of a tag set (`BLK_MQ_MAX_DEPTH`).
const MAX_TAGS: u32 = 10240;
/// Largest discard or write-zeroes request, in logical blocks (NLB of Write Zeroes is 16 bit).
const MAX_ZERO_BLOCKS: u32 = 1 << 16;

/// One namespace: the queue data of its disk.
pub(crate) struct Namespace {
    ctrl: Arc<Ctrl>,
    /// For the passthrough ioctls on the disk.
    passthru: Arc<Passthru>,
    pub(crate) nsid: u32,
    /// Logical block size, as a shift.
    pub(crate) lba_shift: u32,
}

/// blk-mq operations of the NVMe disks.
pub(crate) struct NvmeOps;

#[vtable]
impl Operations for NvmeOps {
    type QueueData = Arc<Namespace>;

    fn queue_rq(
        ns: ArcBorrow<'_, Namespace>,
        rq: ARef<Request<Self>>,
        _is_last: bool,
    ) -> Result<(), QueueError<Self>> {
        let ctrl = &ns.ctrl;
        match ctrl.state() {
            CtrlState::Live => {}
            // Retried by blk-mq a few milliseconds later.
            CtrlState::Resetting => return Err(QueueError::new(rq, ENOMEM)),
            CtrlState::Dead => return Err(QueueError::new(rq, EIO)),
        }
        let (first, count, home) = queue_choice(ctrl, &rq);
        let mut rq = rq;
        let lose = ctrl.take_lose();
        for (qi, queue) in queue_order(home - first, count, ctrl.overflow)
            .filter_map(|i| Some((first + i, ctrl.queues.get(first + i)?)))
        {
            match queue.submit(&ns, rq, qi != home, lose, ctrl.cpus(qi)) {
                Ok(()) => {
                    if let Some(home_queue) = ctrl.queues.get(home).filter(|_| qi != home) {
                        home_queue.stats.overflow_out.add(1, Relaxed);
                        queue.stats.overflow_in.add(1, Relaxed);
                    }
                    return Ok(());
                }
                Err(SubmitError::Full(back)) => rq = back,
                Err(SubmitError::Offline(back)) => {
                    rq = back;
                    // Commands submitted just before the vector went down complete without
                    // an interrupt: reap them here (and in `timeout`).
                    queue.process_completions();
                }
                Err(SubmitError::Failed(back, e)) => return Err(QueueError::new(back, e)),
            }
        }
        // Every queue we may use is full or keeps its reserve: BLK_STS_RESOURCE, blk-mq
        // retries later.
        Err(QueueError::new(rq, ENOMEM))
    }

    fn commit_rqs(_ns: ArcBorrow<'_, Namespace>) {}

    /// Reap the poll queue of poll context `hw_queue` and, with `overflow`, the other poll
    /// queues too (its requests may have been lent to them), in the order they were tried.
    fn poll(ns: ArcBorrow<'_, Namespace>, hw_queue: u32) -> u32 {
        let ctrl = &ns.ctrl;
        let Some(home) = poll_home(ctrl, hw_queue) else {
            return 0;
        };
        let found: usize = queue_order(home, ctrl.nr_poll, ctrl.overflow)
            .filter_map(|i| ctrl.queues.get(ctrl.nr_irq() + i))
            .map(|q| q.poll())
            .sum();
        u32::try_from(found).unwrap_or(u32::MAX)
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
    fn timeout(ns: ArcBorrow<'_, Namespace>, rq: ARef<Request<Self>>) -> TimeoutReturn {
        let ctrl = &ns.ctrl;
        let id: *const Request<Self> = &*rq;
        drop(rq);
        let rq = id;
        ctrl.finish_deferred();
        if ctrl.state() == CtrlState::Resetting {
            // The reset requeues the request if the controller still holds it.
            return TimeoutReturn::ResetTimer;
        }
        if let Some((queue, _, _)) = ctrl.find(rq, false) {
            if queue.process_completions() && ctrl.find(rq, false).is_none() {
                pr_info!(
                    "rnvme{}: queue {}: request completed without an interrupt, found by polling\n",
                    ctrl.index,
                    queue.qid
                );
                return TimeoutReturn::Done;
            }
        }
        let Some((queue, cid, aborted_before)) = ctrl.find(rq, true) else {
            // Ended meanwhile (or being ended by whoever took it off its slot).
            return TimeoutReturn::Done;
        };
        let qid = queue.qid;
        if !aborted_before {
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
        ctrl.schedule_reset();
        TimeoutReturn::Done
    }

    fn ioctl(ns: ArcBorrow<'_, Namespace>, _write: bool, cmd: u32, arg: usize) -> Result<i32> {
        ns.passthru.ns_ioctl(ns.nsid, cmd, arg)
    }

    fn complete(rq: ARef<Request<Self>>) {
        // Requests are ended from the interrupt handler; nothing is completed through here.
        let _ = Request::end(rq, Ok(()));
    }
}

/// The poll queue (0-based among the poll queues) of poll context `hw_queue`: the tag set has
/// one default context per CPU, then one poll context per poll queue.
fn poll_home(ctrl: &Ctrl, hw_queue: u32) -> Option<usize> {
    let i = hw_queue.checked_sub(kernel::cpu::nr_cpu_ids())?;
    Some(i as usize).filter(|&i| i < ctrl.nr_poll)
}

/// The queues a request may use, `first..first + count`, and its home queue among them: the
/// poll queues for a polled request (whose completion raises no interrupt and is found by
/// `poll` for its context), the interrupt-driven queues for any other. Requests never overflow
/// from one kind to the other.
fn queue_choice(ctrl: &Ctrl, rq: &Request<NvmeOps>) -> (usize, usize, usize) {
    let nr_irq = ctrl.nr_irq();
    match poll_home(ctrl, rq.hw_queue()).filter(|_| rq.is_polled()) {
        Some(p) => (nr_irq, ctrl.nr_poll, nr_irq + p),
        None => (0, nr_irq, ctrl.home_queue()),
    }
}

/// The tag set of a controller's disks: one blk-mq context per CPU, all drawing from one set
/// of tags and requests as large as all queues' slots together (what the controller can hold,
/// not that much per CPU). blk-mq divides shared tags fairly between the disks (namespaces)
/// of the controller, never between the contexts of one disk. With shared tags blk-mq would
/// give the disks mq-deadline; like other multi-queue disks they keep "none".
///
/// With poll queues, polled requests get contexts of their own (the poll map, one context per
/// poll queue), so the disks support polled I/O.
pub(crate) fn tag_set(ctrl: &Ctrl) -> Result<Arc<TagSet<NvmeOps>>> {
    let slots: usize = ctrl.queues.iter().map(|q| q.slots()).sum();
    let slots = u32::try_from(slots)?;
    let maps = QueueMaps {
        default: kernel::cpu::nr_cpu_ids(),
        read: 0,
    };
    Arc::pin_init(
        TagSet::new_with_poll_maps(
            maps,
            u32::try_from(ctrl.nr_poll)?,
            slots.min(MAX_TAGS),
            TagSetFlag::TagHctxShared | TagSetFlag::NoSchedByDefault,
        ),
        GFP_KERNEL,
    )
}

/// The size and format of a namespace.
pub(crate) struct NsFormat {
    nsid: u32,
    /// Size in logical blocks.
    nsze: u64,
    lba_shift: u32,
}

/// Identify namespace `nsid`; `None` if it is empty or its format is not supported.
fn identify_ns(ctrl: &Ctrl, dev: &Device<Bound>, nsid: u32) -> Result<Option<NsFormat>> {
    let id = ctrl
        .admin()
        .identify::<IdNs>(&ctrl.regs, dev, nsid, cmd::CNS_NAMESPACE)?;
    ns_format(dev, nsid, id.view()?)
}

/// The format of namespace `nsid` from its Identify Namespace data; `None` if it is empty or
/// its format is not supported.
pub(crate) fn ns_format(
    dev: &Device,
    nsid: u32,
    id: CoherentView<'_, IdNs>,
) -> Result<Option<NsFormat>> {
    let nsze: u64 = io_read!(id, .nsze);
    let flbas: u8 = io_read!(id, .flbas);
    let format = usize::from(flbas & 0xf);
    let lba_shift = u32::from(io_read!(id, .lbaf[try: format].lbads));
    let metadata: u16 = io_read!(id, .lbaf[try: format].ms);
    if nsze == 0 {
        return Ok(None);
    }
    if !(SECTOR_SHIFT..=PAGE_SIZE.trailing_zeros()).contains(&lba_shift) || metadata != 0 {
        dev_warn!(
            dev,
            "namespace {}: LBA format {} (2^{} bytes, {} metadata bytes) not supported\n",
            nsid,
            format,
            lba_shift,
            metadata
        );
        return Ok(None);
    }
    Ok(Some(NsFormat {
        nsid,
        nsze,
        lba_shift,
    }))
}

/// Limits and features of a disk, the same for all namespaces of a controller.
pub(crate) struct DiskLimits<'a> {
    pub(crate) info: &'a CtrlInfo,
    pub(crate) io_timeout: Delta,
}

/// The disk of a namespace, for the controller's list of disks.
pub(crate) struct NsDisk {
    pub(crate) nsid: u32,
    /// Logical block size, as a shift.
    pub(crate) lba_shift: u32,
    /// Removed from the system when dropped.
    pub(crate) disk: GenDisk<NvmeOps>,
}

/// The disk of namespace `f`, a child of `dev` (the PCI function) in sysfs.
pub(crate) fn add_disk(
    ctrl: &Arc<Ctrl>,
    dev: &Device,
    tagset: &Arc<TagSet<NvmeOps>>,
    limits: &DiskLimits<'_>,
    f: &NsFormat,
    passthru: &Arc<Passthru>,
) -> Result<NsDisk> {
    let info = limits.info;
    let block = 1u32 << f.lba_shift;
    let sectors_per_block = f.lba_shift - SECTOR_SHIFT;
    let zero_sectors = (MAX_ZERO_BLOCKS << sectors_per_block).min(u32::MAX >> 1);
    let max_sectors = u32::try_from(info.max_bytes >> SECTOR_SHIFT)?;
    let mut builder = GenDiskBuilder::new()
        .capacity_sectors(f.nsze << sectors_per_block)
        .logical_block_size(block)?
        .physical_block_size(block)?
        .max_hw_sectors(max_sectors)
        .max_segments(MAX_SEGMENTS as u16)
        .virt_boundary_mask(PAGE_SIZE - 1)?
        .dma_alignment(DMA_ALIGNMENT_MASK)?
        .rq_timeout(limits.io_timeout)
        .parent(dev);
    if info.vwc {
        builder = builder.write_cache(true);
    }
    if info.oncs & cmd::ONCS_DSM != 0 {
        builder = builder.max_discard_sectors(zero_sectors);
    }
    if info.oncs & cmd::ONCS_WRITE_ZEROES != 0 {
        builder = builder.max_write_zeroes_sectors(zero_sectors);
    }
    let (nsid, lba_shift) = (f.nsid, f.lba_shift);
    let ns = Arc::new(
        Namespace {
            ctrl: ctrl.clone(),
            passthru: passthru.clone(),
            nsid,
            lba_shift,
        },
        GFP_KERNEL,
    )?;
    let name = fmt!("rnvme{}n{}", ctrl.index, nsid);
    let disk = builder.build_owned::<RustNvmeMq, _>(name, tagset.clone(), ns)?;
    Ok(NsDisk {
        nsid,
        lba_shift,
        disk,
    })
}

/// Log a new disk.
pub(crate) fn announce(dev: &Device, ctrl: &Ctrl, info: &CtrlInfo, f: &NsFormat) {
    let flag = |on: bool, name: &'static str| if on { name } else { "" };
    dev_info!(
        dev,
        "rnvme{}n{}: {} blocks of {} bytes ({} MiB){}{}{}\n",
        ctrl.index,
        f.nsid,
        f.nsze,
        1u32 << f.lba_shift,
        (f.nsze << f.lba_shift) >> 20,
        flag(info.vwc, ", write cache"),
        flag(info.oncs & cmd::ONCS_DSM != 0, ", discard"),
        flag(info.oncs & cmd::ONCS_WRITE_ZEROES != 0, ", write zeroes")
    );
}

/// A disk for every active namespace with a supported format.
pub(crate) fn add_disks(
    ctrl: &Arc<Ctrl>,
    dev: &Device<Bound>,
    tagset: &Arc<TagSet<NvmeOps>>,
    limits: &DiskLimits<'_>,
    passthru: &Arc<Passthru>,
) -> Result<KVec<NsDisk>> {
    let list = ctrl
        .admin()
        .identify::<NsList>(&ctrl.regs, dev, 0, cmd::CNS_ACTIVE_NS_LIST)?;
    let list = list.view()?;
    let mut disks = KVec::new();
    for i in 0..1024 {
        let nsid: u32 = io_read!(list, .0[try: i]);
        if nsid == 0 {
            break;
        }
        let Some(format) = identify_ns(ctrl, dev, nsid)? else {
            continue;
        };
        let disk = add_disk(ctrl, dev, tagset, limits, &format, passthru)?;
        announce(dev, ctrl, limits.info, &format);
        disks.push(disk, GFP_KERNEL)?;
    }
    Ok(disks)
}
