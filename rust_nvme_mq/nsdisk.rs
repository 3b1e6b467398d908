// SPDX-License-Identifier: GPL-2.0

//! The namespace objects. [`Ns`], one per namespace with a disk (C's `struct nvme_ns`): its
//! format, identity, disk and passthrough, refcounted: the disk's queue data, and what the
//! files of its generic device reach, so that an ioctl or io_uring command finds its namespace
//! from the disk or file it came through. [`NsSet`], the namespaces of a controller, with the
//! one revalidation (probe's scan, rescans, asynchronous events, Format NVM and Sanitize) and
//! the one way a namespace leaves the list; its lock is held only to add or remove one (or to
//! take a snapshot), never across a command. The controller below knows nothing of them: it
//! reports through [`CtrlEvents`](crate::ctrl::CtrlEvents) that they must go.

use crate::{
    cmd::NsFormat,
    ctrl::Ctrl,
    ident::Identity,
    link::{CutOnDrop, Gate, GateClosed, Link},
    request::{NsAddr, NsShape, NvmeOps},
};
use kernel::{
    block::mq::gen_disk::GenDisk,
    device::Device,
    io_uring::{Answer, IssueFlags, SqeCmd, UringCmd},
    prelude::*,
    sync::{aref::ARef, atomic::Atomic, new_mutex, Arc, Mutex, MutexGuard},
};

/// The passthrough ioctls and io_uring commands of a namespace: the controller's passthrough
/// (`ioctl.rs`, the layer above, which names the namespaces).
pub(crate) trait NsPassthru: Send + Sync {
    /// An ioctl on the namespace's disk or generic device.
    fn ioctl(&self, ns: &Ns, cmd: u32, arg: usize) -> Result<i32>;
    /// An io_uring command on the namespace's generic device, for `disk`, the namespace's
    /// disk (the generic device is there only while the disk is).
    fn uring_cmd(
        &self,
        ns: &Ns,
        disk: &GenDisk<NvmeOps>,
        cmd: UringCmd,
        sqe: &SqeCmd,
        flags: IssueFlags,
    ) -> Answer;
}

/// One namespace with a disk.
#[pin_data]
pub(crate) struct Ns {
    pub(crate) ctrl: Arc<Ctrl>,
    /// The format the disk serves: what its requests become commands with.
    pub(crate) shape: NsShape,
    /// What the disk's sysfs attributes show.
    pub(crate) ident: Identity,
    /// Its ioctls and io_uring commands.
    pub(crate) passthru: Arc<dyn NsPassthru>,
    /// I/O passthrough commands on the namespace that fail are logged (C's disk attribute
    /// `passthru_err_log_enabled`, off by default as in C).
    pub(crate) passthru_err_log: Atomic<bool>,
    /// The disk, for the commands that come through it or the generic device's ioctls (its
    /// io_uring commands reach the disk through the device's own link): connected once the
    /// disk is built, cut by the removal (waiting for those commands) before the disk goes.
    disk: Arc<Link<GenDisk<NvmeOps>>>,
    /// Passed by a passthrough command from reading the format to its end, closed while the
    /// format changes: a command is never built with one format and run with another.
    #[pin]
    format: Gate,
}

/// What revalidating a disk found.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Revalidated {
    /// The namespace still has the format the disk has.
    Same,
    /// The disk took the namespace's new format.
    Changed,
    /// The namespace is empty now, or has a format the driver cannot serve: its disk must go.
    Unusable,
    /// Identify Namespace or the new format failed (said on the log): the disk is as it was.
    Failed,
}

impl Ns {
    pub(crate) fn new(
        ctrl: Arc<Ctrl>,
        shape: NsShape,
        ident: Identity,
        passthru: Arc<dyn NsPassthru>,
    ) -> Result<Arc<Self>> {
        let disk = Link::empty()?;
        Arc::pin_init(
            try_pin_init!(Self {
                ctrl,
                shape,
                ident,
                passthru,
                passthru_err_log: Atomic::new(false),
                disk,
                format <- Gate::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// The disk, unless it is being removed. Not counted as a command that uses it: its
    /// removal does not wait for the reference to be dropped.
    pub(crate) fn disk(&self) -> Option<Arc<GenDisk<NvmeOps>>> {
        self.disk.get()
    }

    /// Call `f` with the disk, unless it is being removed (`ENODEV`).
    pub(crate) fn with_disk<R>(&self, f: impl FnOnce(&GenDisk<NvmeOps>) -> Result<R>) -> Result<R> {
        self.disk.with(f)
    }

    /// Run `f`, a command built for the namespace's format now (given to it), to its end; the
    /// format does not change meanwhile.
    pub(crate) fn with_format<R>(&self, f: impl FnOnce(NsAddr) -> R) -> R {
        self.format.pass(|| f(self.shape.addr()))
    }

    /// Keep the format as it is for the caller, who may change it ([`Ns::reformat`]), once the
    /// commands built for it ended.
    pub(crate) fn hold_format(&self) -> GateClosed<'_> {
        self.format.close()
    }

    /// Give the disk (frozen here; freezes nest) the logical and physical block size
    /// `1 << lba_shift` and `sectors`, and its requests the same; `held`: this namespace's
    /// format, held ([`Ns::hold_format`]).
    fn reformat(&self, held: &GateClosed<'_>, lba_shift: u32, sectors: u64) -> Result {
        if !held.closes(&self.format) {
            return Err(EINVAL);
        }
        let block = 1u32 << lba_shift;
        self.with_disk(|disk| {
            let frozen = disk.freeze();
            frozen.set_format(block, block, sectors)?;
            self.shape.set(lba_shift, sectors);
            Ok(())
        })
    }

    /// Bring the disk in line with `format`, what Identify Namespace says now (`None`: empty
    /// or not supported); `held`: the format, if the caller holds it already. `index`: the
    /// controller's, for messages on `dev`.
    fn take_format(
        &self,
        dev: &Device,
        format: Option<NsFormat>,
        held: Option<&GateClosed<'_>>,
    ) -> Result<Revalidated> {
        let (index, nsid) = (self.ctrl.index, self.shape.nsid);
        let Some(f) = format else {
            dev_warn!(
                dev,
                "rnvme{}n{}: the namespace is empty or has a format the driver cannot serve now\n",
                index,
                nsid
            );
            return Ok(Revalidated::Unusable);
        };
        let sectors = f.sectors();
        if f.lba_shift == self.shape.addr().lba_shift && sectors == self.shape.sectors() {
            return Ok(Revalidated::Same);
        }
        match held {
            Some(held) => self.reformat(held, f.lba_shift, sectors)?,
            None => self.reformat(&self.hold_format(), f.lba_shift, sectors)?,
        }
        dev_info!(
            dev,
            "rnvme{}n{}: new format: {} blocks of {} bytes ({} MiB)\n",
            index,
            nsid,
            f.nsze,
            1u32 << f.lba_shift,
            sectors >> 11
        );
        Ok(Revalidated::Changed)
    }

    /// Give the disk capacity 0, so that no read or write reaches its namespace, whose format
    /// is unknown or not served; for a disk that cannot be removed now. A rescan revalidates
    /// it (and removes it, or gives it the namespace's format back).
    pub(crate) fn empty(&self, dev: &Device, held: &GateClosed<'_>) {
        let now = self.shape.addr();
        let _ = self.reformat(held, now.lba_shift, 0);
        dev_warn!(
            dev,
            "rnvme{}n{}: disk emptied; `nvme ns-rescan` on the controller revalidates it\n",
            self.ctrl.index,
            now.nsid
        );
    }
}

/// A namespace in the controller's [`NsSet`], with what it owns; dropping it removes the
/// namespace from the system, in the order of the fields.
pub(crate) struct NsDisk {
    pub(crate) ns: Arc<Ns>,
    /// The namespace's generic character device (`generic.rs`, which the list does not name:
    /// its files reach the passthrough above); removed first, its link to the namespace cut.
    _generic: KBox<dyn Send + Sync>,
    /// The namespace's link to its disk: cut (waiting for the commands that use it) before the
    /// disk goes.
    _disk_link: CutOnDrop<GenDisk<NvmeOps>>,
    /// Removed from the system when dropped (waiting for its requests), once the link is cut.
    _disk: Arc<GenDisk<NvmeOps>>,
    /// The generic device's polling, which the removal of the disk may wait for; cut last.
    _poll: CutOnDrop<Ctrl>,
}

impl NsDisk {
    /// Namespace `ns` with its `disk`, built with `ns` as its queue data, and the generic
    /// device that `generic` registers for it and its disk (which returns it and its files'
    /// poll link).
    pub(crate) fn new<G: Send + Sync + 'static>(
        ns: Arc<Ns>,
        disk: GenDisk<NvmeOps>,
        generic: impl FnOnce(&Arc<Ns>, &Arc<GenDisk<NvmeOps>>) -> Result<(G, CutOnDrop<Ctrl>)>,
    ) -> Result<Self> {
        let disk = Arc::new(disk, GFP_KERNEL)?;
        // Dropped before `disk` if what follows fails: the link no longer holds the disk.
        let link = ns.disk.set(disk.clone());
        let (g, poll) = generic(&ns, &disk)?;
        let g: KBox<dyn Send + Sync> = KBox::new(g, GFP_KERNEL)?;
        Ok(Self {
            ns,
            _generic: g,
            _disk_link: link,
            _disk: disk,
            _poll: poll,
        })
    }
}

/// The namespaces of a controller. Removed, all of them, when the controller is dead or being
/// removed ([`NsSet::remove_all`]); nothing is added from then on.
#[pin_data]
pub(crate) struct NsSet {
    pub(crate) ctrl: Arc<Ctrl>,
    /// The PCI function, for messages.
    parent: ARef<Device>,
    /// Held by a namespace scan and by a command that changes namespaces (C's `scan_lock`):
    /// one at a time.
    #[pin]
    scan: Mutex<()>,
    /// Held only to add, remove or list namespaces.
    #[pin]
    disks: Mutex<KVec<NsDisk>>,
}

impl NsSet {
    pub(crate) fn new(ctrl: Arc<Ctrl>, parent: &Device) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                ctrl,
                parent: parent.into(),
                scan <- new_mutex!(()),
                disks <- new_mutex!(KVec::new()),
            }),
            GFP_KERNEL,
        )
    }

    /// One scan (or namespace-changing command) at a time.
    pub(crate) fn scan_lock(&self) -> MutexGuard<'_, ()> {
        self.scan.lock()
    }

    /// The namespaces now; `ENODEV` once the controller is dead or being removed.
    pub(crate) fn namespaces(&self) -> Result<KVec<Arc<Ns>>> {
        let disks = self.disks.lock();
        if self.ctrl.stopped() {
            return Err(ENODEV);
        }
        let mut all = KVec::with_capacity(disks.len(), GFP_KERNEL)?;
        for d in disks.iter() {
            all.push(d.ns.clone(), GFP_KERNEL)?;
        }
        Ok(all)
    }

    /// Whether namespace `nsid` is in the list.
    pub(crate) fn contains(&self, nsid: u32) -> bool {
        self.disks.lock().iter().any(|d| d.ns.shape.nsid == nsid)
    }

    /// Add `d` to the list: `ENODEV` (and `d` removed) once the controller is dead or being
    /// removed.
    pub(crate) fn add(&self, d: NsDisk) -> Result {
        let mut disks = self.disks.lock();
        if self.ctrl.stopped() {
            drop(disks);
            drop(d);
            return Err(ENODEV);
        }
        disks.push(d, GFP_KERNEL)?;
        Ok(())
    }

    /// Revalidate namespace `ns`, still active: Identify Namespace, and the disk brought in
    /// line with what it says now; `held`: its format, if the caller holds it. A disk that
    /// cannot be revalidated stays as it was, with a message (`Failed`).
    pub(crate) fn revalidate(&self, ns: &Ns, held: Option<&GateClosed<'_>>) -> Revalidated {
        let (index, nsid) = (self.ctrl.index, ns.shape.nsid);
        let format = self.ctrl.identify_ns(&self.parent, nsid);
        match format.and_then(|f| ns.take_format(&self.parent, f, held)) {
            Ok(verdict) => verdict,
            Err(e) => {
                dev_err!(
                    self.parent,
                    "rnvme{}n{}: revalidating the namespace failed ({:?})\n",
                    index,
                    nsid,
                    e
                );
                Revalidated::Failed
            }
        }
    }

    /// The one way a namespace leaves the list: say why, take it out, and remove it (waiting
    /// for its commands and requests) once the lock of the list is released.
    pub(crate) fn retire(&self, nsid: u32, why: &str) {
        let gone = {
            let mut disks = self.disks.lock();
            match disks.iter().position(|d| d.ns.shape.nsid == nsid) {
                Some(i) => disks.remove(i).ok(),
                None => None,
            }
        };
        if gone.is_some() {
            dev_info!(
                self.parent,
                "rnvme{}n{}: {}, removing its disk\n",
                self.ctrl.index,
                nsid,
                why
            );
        }
        drop(gone);
    }

    /// Give namespace `ns` capacity 0 (see [`Ns::empty`]).
    pub(crate) fn empty(&self, ns: &Ns, held: &GateClosed<'_>) {
        ns.empty(&self.parent, held);
    }

    /// Remove every namespace, which waits for their requests: once the controller is dead or
    /// being removed (they fail, or were waited for).
    pub(crate) fn remove_all(&self) {
        let disks = core::mem::take(&mut *self.disks.lock());
        drop(disks);
    }
}
