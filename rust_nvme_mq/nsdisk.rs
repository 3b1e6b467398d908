// SPDX-License-Identifier: GPL-2.0

//! The namespace objects: one per namespace with a disk ([`NsDisk`]: its format, its disk, its
//! generic device), and the list of a controller's ([`NsSet`]), with the one revalidation
//! (probe's scan, rescans, asynchronous events, Format NVM and Sanitize) and the one way a disk
//! leaves the list. The controller below knows nothing of them: it reports through
//! [`CtrlEvents`](crate::ctrl::CtrlEvents) that they must go.

use crate::{
    cmd::NsFormat,
    ctrl::Ctrl,
    link::CutOnDrop,
    request::{NsShape, NvmeOps},
};
use kernel::{
    block::mq::gen_disk::GenDisk,
    device::Device,
    prelude::*,
    sync::{aref::ARef, new_mutex, Arc, Mutex, MutexGuard},
};

/// The disk of a namespace, in the controller's [`NsSet`].
pub(crate) struct NsDisk {
    /// The namespace's generic character device (`generic.rs`, which the list does not name:
    /// its files reach the passthrough ioctls above); removed first, its link to the disk cut.
    pub(crate) _generic: KBox<dyn Send + Sync>,
    /// The format the disk serves (shared with the disk's queue data).
    pub(crate) shape: Arc<NsShape>,
    /// Removed from the system when dropped, after the generic device (which holds the only
    /// other reference, and only while a call on it runs).
    pub(crate) disk: Arc<GenDisk<NvmeOps>>,
    /// The generic device's polling, which the removal of the disk may wait for; cut last.
    pub(crate) _poll: CutOnDrop<Ctrl>,
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

impl NsDisk {
    /// Bring the disk in line with `format`, what Identify Namespace says now (`None`: empty
    /// or not supported): a new block size or capacity is set with the disk frozen (frozen
    /// here; callers that changed the namespace froze it already, which nests). `index`: the
    /// controller's, for messages on `dev`.
    fn take_format(
        &self,
        dev: &Device,
        index: u32,
        format: Option<NsFormat>,
    ) -> Result<Revalidated> {
        let nsid = self.shape.nsid;
        let Some(f) = format else {
            dev_warn!(
                dev,
                "rnvme{}n{}: the namespace is empty or has a format the driver cannot serve now\n",
                index,
                nsid
            );
            return Ok(Revalidated::Unusable);
        };
        let (now, sectors) = (self.shape.addr(), f.sectors());
        if f.lba_shift == now.lba_shift && sectors == self.shape.sectors() {
            return Ok(Revalidated::Same);
        }
        self.reformat(f.lba_shift, sectors)?;
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

    /// Give the frozen disk (frozen here; freezes nest) the logical and physical block size
    /// `1 << lba_shift` and `sectors`, and its requests the same.
    fn reformat(&self, lba_shift: u32, sectors: u64) -> Result {
        let block = 1u32 << lba_shift;
        let frozen = self.disk.freeze();
        frozen.set_format(block, block, sectors)?;
        self.shape.set(lba_shift, sectors);
        Ok(())
    }

    /// Give the disk capacity 0, so that no read or write reaches its namespace, whose format
    /// is unknown or not served; for a disk that cannot be removed now. A rescan revalidates
    /// it (and removes it, or gives it the namespace's format back).
    pub(crate) fn empty(&self, dev: &Device, index: u32) {
        let now = self.shape.addr();
        let _ = self.reformat(now.lba_shift, 0);
        dev_warn!(
            dev,
            "rnvme{}n{}: disk emptied; `nvme ns-rescan` on the controller revalidates it\n",
            index,
            now.nsid
        );
    }
}

/// The disks of a controller's namespaces. Removed, all of them, when the controller is dead
/// or being removed ([`NsSet::remove_all`]); [`NsSet::lock`] fails from then on.
#[pin_data]
pub(crate) struct NsSet {
    pub(crate) ctrl: Arc<Ctrl>,
    /// The PCI function, for messages.
    parent: ARef<Device>,
    #[pin]
    disks: Mutex<KVec<NsDisk>>,
}

impl NsSet {
    pub(crate) fn new(ctrl: Arc<Ctrl>, parent: &Device) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                ctrl,
                parent: parent.into(),
                disks <- new_mutex!(KVec::new()),
            }),
            GFP_KERNEL,
        )
    }

    /// The disks found by probe's scan.
    pub(crate) fn set(&self, disks: KVec<NsDisk>) {
        *self.disks.lock() = disks;
    }

    /// The disks, locked, to add or remove some (a rescan, a format); `None` once the
    /// controller is dead or being removed, which then removes the disks.
    pub(crate) fn lock(&self) -> Option<MutexGuard<'_, KVec<NsDisk>>> {
        let disks = self.disks.lock();
        if self.ctrl.stopped() {
            return None;
        }
        Some(disks)
    }

    /// Revalidate disk `d`, whose namespace is still active: Identify Namespace, and the disk
    /// brought in line with what it says now. A disk that cannot be revalidated stays as it
    /// was, with a message (`Failed`).
    pub(crate) fn revalidate(&self, d: &NsDisk) -> Revalidated {
        let (index, nsid) = (self.ctrl.index, d.shape.nsid);
        let format = self.ctrl.identify_ns(&self.parent, nsid);
        match format.and_then(|f| d.take_format(&self.parent, index, f)) {
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

    /// The one way a disk leaves the list: say why, and move it to `gone`, the caller's, to
    /// drop (which removes the disk) once it no longer holds the lock of the list: removing a
    /// disk waits for its ioctls, which may wait for that lock.
    pub(crate) fn retire(&self, d: NsDisk, why: &str, gone: &mut KVec<NsDisk>) -> Result {
        dev_info!(
            self.parent,
            "rnvme{}n{}: {}, removing its disk\n",
            self.ctrl.index,
            d.shape.nsid,
            why
        );
        Ok(gone.push(d, GFP_KERNEL)?)
    }

    /// Give disk `d` capacity 0 (see [`NsDisk::empty`]).
    pub(crate) fn empty(&self, d: &NsDisk) {
        d.empty(&self.parent, self.ctrl.index);
    }

    /// Remove every disk, which waits for their requests: once the controller is dead or being
    /// removed (they fail, or were waited for).
    pub(crate) fn remove_all(&self) {
        let disks = core::mem::take(&mut *self.disks.lock());
        drop(disks);
    }
}
