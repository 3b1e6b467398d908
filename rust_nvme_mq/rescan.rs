// SPDX-License-Identifier: GPL-2.0

//! `NVME_IOCTL_RESCAN`: read the controller's active namespace list again, add a disk for
//! each new namespace and remove the disks of namespaces that went away. The disks of
//! namespaces still there are not touched (open files and I/O go on).
//!
//! Identify data goes to the passthrough bounce buffer, which exists as long as the character
//! device: a rescan needs no DMA allocation, so it does not need the PCI function to be bound
//! for long (a rescan during unbind fails with `ENODEV` or finds the disks already taken).

use crate::{
    cmd::{self, IdNs, NsList},
    ctrl::CtrlInfo,
    ioctl::Passthru,
    ns::{self, DiskLimits, NsDisk, NvmeOps},
};
use kernel::{
    block::mq::TagSet,
    cred::{capable, Capability},
    device::Device,
    io::io_read,
    prelude::*,
    sync::{aref::ARef, Arc, ArcBorrow},
    time::Delta,
};

/// Entries of an active namespace list (one Identify page).
const NS_LIST_ENTRIES: usize = cmd::IDENTIFY_SIZE / size_of::<u32>();

/// What adding a disk later needs: what probe used for the first disks.
pub(crate) struct DiskSetup {
    /// The tag set all disks of the controller share.
    pub(crate) tagset: Arc<TagSet<NvmeOps>>,
    pub(crate) info: CtrlInfo,
    pub(crate) io_timeout: Delta,
    /// The PCI function, the disks' parent in sysfs.
    pub(crate) parent: ARef<Device>,
}

impl DiskSetup {
    pub(crate) fn limits(&self) -> DiskLimits<'_> {
        DiskLimits {
            info: &self.info,
            io_timeout: self.io_timeout,
        }
    }
}

/// The active namespace ids (at most one Identify page of them, like probe reads).
fn active_nsids(pt: &Passthru) -> Result<KVec<u32>> {
    pt.identify::<NsList, _>(0, cmd::CNS_ACTIVE_NS_LIST, |list| {
        let mut ids = KVec::new();
        for i in 0..NS_LIST_ENTRIES {
            let nsid: u32 = io_read!(list, .0[try: i]);
            if nsid == 0 {
                break;
            }
            ids.push(nsid, GFP_KERNEL)?;
        }
        Ok(ids)
    })
}

/// `NVME_IOCTL_RESCAN` (root only, like the C driver). Unlike the C driver, which queues the
/// scan, the rescan is done when the ioctl returns.
pub(crate) fn rescan(pt: ArcBorrow<'_, Passthru>) -> Result<i32> {
    if !capable(Capability::SYS_ADMIN) {
        return Err(EACCES);
    }
    let ctrl = &pt.ctrl;
    // The disks of vanished namespaces. Declared before the lock guard, so dropped (the disks
    // deleted) after it is released: deleting a disk waits for its running ioctls, which may
    // wait for this lock (I/O passthrough looks its disk up in the list).
    let mut gone = KVec::new();
    // Held throughout: one rescan at a time, and no removal of the controller meanwhile.
    let mut disks = ctrl.lock_disks().ok_or(ENODEV)?;
    let active = active_nsids(&pt)?;
    let setup = &pt.disk_setup;
    let parent: &Device = &setup.parent;
    for d in core::mem::take(&mut *disks) {
        if active.contains(&d.nsid) {
            disks.push(d, GFP_KERNEL)?;
        } else {
            dev_info!(
                parent,
                "rnvme{}n{}: namespace gone, removing its disk\n",
                ctrl.index,
                d.nsid
            );
            gone.push(d, GFP_KERNEL)?;
        }
    }
    let passthru: Arc<Passthru> = pt.into();
    for &nsid in active.iter() {
        if disks.iter().any(|d| d.nsid == nsid) {
            continue;
        }
        let format = pt.identify::<IdNs, _>(nsid, cmd::CNS_NAMESPACE, |id| {
            ns::ns_format(parent, nsid, id)
        })?;
        let Some(format) = format else {
            continue;
        };
        let disk: NsDisk = ns::add_disk(
            ctrl,
            parent,
            &setup.tagset,
            &setup.limits(),
            &format,
            &passthru,
        )?;
        ns::announce(parent, ctrl, &setup.info, &format);
        disks.push(disk, GFP_KERNEL)?;
    }
    Ok(0)
}
