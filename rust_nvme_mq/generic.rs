// SPDX-License-Identifier: GPL-2.0

//! The generic character device of a namespace, `/dev/rng<C>n<N>` (a misc device, root only,
//! like the C driver's `/dev/ng<C>n<N>`): the namespace's passthrough ioctls, and io_uring
//! passthrough (`NVME_URING_CMD_IO`, `NVME_URING_CMD_IO_VEC`), interrupt-driven or polled
//! (`IORING_SETUP_IOPOLL`, on the poll queues), for tools that drive the namespace without
//! the block layer's bios: fio's `io_uring_cmd` engine, xNVMe. Its files reach the namespace
//! object ([`Ns`]), whose passthrough runs their commands. The device lives as long as the
//! namespace's disk ([`NsDisk`](crate::nsdisk::NsDisk)): it goes first, its files' polling
//! last.

use crate::{
    ctrl::Ctrl,
    link::{CutOnDrop, Link},
    nsdisk::Ns,
    request::NvmeOps,
};
use kernel::{
    block::mq::gen_disk::GenDisk,
    device::Device,
    fs::File,
    io_uring::{Answer, IssueFlags, SqeCmd, UringCmd},
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    prelude::*,
    str::CString,
    sync::{Arc, ArcBorrow},
};

/// The two links of a generic device's open files: to submit (ioctls, io_uring commands),
/// cut before the disk is removed, and to poll, cut after it: removing the disk waits for the
/// polled commands in flight, which only polling completes.
pub(crate) struct Links {
    submit: Arc<Link<Target>>,
    poll: Arc<Link<Ctrl>>,
}

/// What the submit link leads to: the namespace, and its disk for io_uring commands. The
/// generic device goes before the namespace's own link to the disk is cut
/// ([`NsDisk`](crate::nsdisk::NsDisk)), so while this link leads anywhere the disk is there:
/// an io_uring command passes this one link, not this one and then the namespace's.
struct Target {
    ns: Arc<Ns>,
    disk: Arc<GenDisk<NvmeOps>>,
}

/// The misc device type of generic namespace devices.
pub(crate) struct NsChardev;

#[vtable]
impl MiscDevice for NsChardev {
    /// An open file holds the links to the namespace.
    type Ptr = Arc<Links>;
    type RegistrationData = Arc<Links>;

    fn open(_file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Self::Ptr> {
        Ok(misc.data().clone())
    }

    /// The ioctls of the namespace's disk.
    fn ioctl(links: ArcBorrow<'_, Links>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        links
            .submit
            .with(|to| to.ns.passthru.ioctl(&to.ns, cmd, arg))
            .map(|r| r as isize)
    }

    fn uring_cmd(
        links: ArcBorrow<'_, Links>,
        _file: &File,
        cmd: UringCmd,
        sqe: &SqeCmd,
        flags: IssueFlags,
    ) -> Answer {
        links.submit.visit(|to| match to {
            Some(to) => to.ns.passthru.uring_cmd(&to.ns, &to.disk, cmd, sqe, flags),
            None => Answer::Refused(cmd, ENODEV),
        })
    }

    /// Reap the poll queues (all of them: a command may have been lent to any).
    fn uring_cmd_iopoll(links: ArcBorrow<'_, Links>, _file: &File) -> u32 {
        links.poll.visit(|ctrl| {
            ctrl.map_or(0, |c| {
                u32::try_from(c.queues.poll_all()).unwrap_or(u32::MAX)
            })
        })
    }
}

/// The registered generic device of a namespace: when dropped, the submit link is cut
/// (waiting for the calls that run), then the device removed; files still open fail with
/// `ENODEV`, but still poll until the [`PollLink`] is dropped.
pub(crate) struct Generic {
    _submit: CutOnDrop<Target>,
    _reg: Pin<KBox<MiscDeviceRegistration<NsChardev>>>,
}

/// The poll link of a generic device's files; cut when dropped, after the disk is removed.
pub(crate) type PollLink = CutOnDrop<Ctrl>;

/// Register `/dev/rng<C>n<N>` for `ns`, whose disk is `disk`, a child of `dev` (the PCI
/// function).
pub(crate) fn register(
    ns: &Arc<Ns>,
    disk: &Arc<GenDisk<NvmeOps>>,
    dev: &Device,
) -> Result<(Generic, PollLink)> {
    let name = CString::try_from_fmt(fmt!("rng{}n{}", ns.ctrl.index, ns.shape.nsid))?;
    let opts = MiscDeviceOptions { name: c"rng" };
    let poll = Link::new(ns.ctrl.clone())?;
    let submit = Link::new(Arc::new(
        Target {
            ns: ns.clone(),
            disk: disk.clone(),
        },
        GFP_KERNEL,
    )?)?;
    let links = Arc::new(
        Links {
            submit: submit.clone(),
            poll: poll.clone(),
        },
        GFP_KERNEL,
    )?;
    let reg = KBox::pin_init(
        MiscDeviceRegistration::register_with_parent(opts, name, dev.into(), links),
        GFP_KERNEL,
    )?;
    Ok((
        Generic {
            _submit: CutOnDrop(submit),
            _reg: reg,
        },
        CutOnDrop(poll),
    ))
}
