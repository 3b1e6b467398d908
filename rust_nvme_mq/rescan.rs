// SPDX-License-Identifier: GPL-2.0

//! `NVME_IOCTL_RESCAN`: the namespace scan of probe ([`Namespaces::scan`]) run again, which
//! adds a disk for each new namespace and removes the disks of namespaces that went away. The
//! disks of namespaces still there are revalidated: a new block size or capacity is set with
//! the disk frozen (open files and I/O go on), a format the driver cannot serve removes it.
//!
//! Identify data goes to the admin queue's Identify buffer, which exists as long as the
//! controller: a rescan needs no DMA allocation, so it does not need the PCI function to be
//! bound for long (a rescan during unbind fails with `ENODEV` or finds the disks already
//! taken).

use crate::ns::Namespaces;
use kernel::{
    cred::{capable, Capability},
    prelude::*,
};

/// `NVME_IOCTL_RESCAN` (root only, like the C driver). Unlike the C driver, which queues the
/// scan, the rescan is done when the ioctl returns.
pub(crate) fn rescan(namespaces: &Namespaces) -> Result<i32> {
    if !capable(Capability::SYS_ADMIN) {
        return Err(EACCES);
    }
    scan(namespaces)?;
    Ok(0)
}

/// The rescan itself (also after an asynchronous event that says namespaces changed).
pub(crate) fn scan(namespaces: &Namespaces) -> Result {
    // The disks of vanished namespaces. Declared before the lock guard, so dropped (the disks
    // deleted) after it is released: deleting a disk waits for its running ioctls, which may
    // wait for this lock (I/O passthrough looks its disk up in the list).
    let mut gone = KVec::new();
    // Held throughout: one rescan at a time, and no removal of the controller meanwhile.
    let mut disks = namespaces.ctrl.lock_disks().ok_or(ENODEV)?;
    namespaces.scan(&mut disks, &mut gone)
}
