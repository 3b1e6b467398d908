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
    namespaces.scan()?;
    Ok(0)
}
