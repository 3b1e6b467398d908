// SPDX-License-Identifier: GPL-2.0

//! The controller's device, `/sys/class/rnvme/rnvme<C>` (C's `/sys/class/nvme/nvme<C>`), and
//! its character device `/dev/rnvme<C>` (root only like `/dev/nvme<C>`), for the NVMe
//! passthrough ioctls that nvme-cli uses.

use crate::{ctrlattr, ioctl::NVME_IOCTL_RESCAN, link::Link, ns::Namespaces, rescan::rescan};
use kernel::{
    class::{self, Class},
    device::Device,
    fs::File,
    miscdevice::{MiscDevice, MiscDeviceRegistration},
    prelude::*,
    str::CString,
    sync::{Arc, ArcBorrow},
};

/// The class of the controllers' devices, with a device number per controller index.
static CLASS: Class = Class::new(c"rnvme", u32::BITS);

/// Register the class for as long as the module is loaded (C's `nvme_class`).
pub(crate) fn register_class(module: &'static ThisModule) -> Result<class::Registration> {
    CLASS.register(module)
}

/// The file operations and attributes of controller devices.
pub(crate) struct CtrlChardev;

#[vtable]
impl MiscDevice for CtrlChardev {
    /// An open file holds the link to the controller's passthrough state.
    type Ptr = Arc<Link<Namespaces>>;
    type RegistrationData = Arc<Link<Namespaces>>;

    fn open(_file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Arc<Link<Namespaces>>> {
        Ok(misc.data().clone())
    }

    /// The C driver's controller attributes (`/sys/class/nvme/nvme<C>/`), see
    /// [`ctrlattr`](crate::ctrlattr).
    const ATTRIBUTES: &'static [&'static CStr] = ctrlattr::ATTRIBUTES;

    fn show_attribute(link: &Arc<Link<Namespaces>>, index: usize, buf: &mut [u8]) -> Result<usize> {
        link.with(|ns| ctrlattr::show(ns, index, buf))
    }

    /// C's `reset_controller`, `rescan_controller` and `passthru_err_log_enabled`, see
    /// [`ctrlattr`](crate::ctrlattr).
    const WRITE_ATTRIBUTES: &'static [&'static CStr] = ctrlattr::WRITE_ATTRIBUTES;

    fn store_attribute(link: &Arc<Link<Namespaces>>, index: usize, buf: &[u8]) -> Result {
        link.with(|ns| ctrlattr::store(ns, index, buf))
    }

    fn ioctl(
        link: ArcBorrow<'_, Link<Namespaces>>,
        _file: &File,
        cmd: u32,
        arg: usize,
    ) -> Result<isize> {
        link.with(|ns| match cmd {
            NVME_IOCTL_RESCAN => rescan(ns),
            _ => ns.passthru.ioctl(cmd, arg),
        })
        .map(|r| r as isize)
    }
}

/// The registered character device; removed when dropped (open files stay, and their ioctls
/// fail once the [`Link`] is cut).
pub(crate) type Chardev = Pin<KBox<MiscDeviceRegistration<CtrlChardev>>>;

/// Register `/sys/class/rnvme/rnvme<C>` and its `/dev/rnvme<C>` for controller `index`, a
/// child of `dev` (the PCI function) in sysfs, like `/sys/class/nvme/nvme<C>`, and the parent
/// of the controller's disks and generic devices. Its link leads nowhere until [`Link::set`]
/// connects it to the controller's namespaces: until then its ioctls and attributes fail with
/// `ENODEV`.
pub(crate) fn register(index: u32, dev: &Device) -> Result<Chardev> {
    let name = CString::try_from_fmt(fmt!("rnvme{index}"))?;
    let link = Link::empty()?;
    KBox::pin_init(
        MiscDeviceRegistration::register_in_class(&CLASS, index, name, Some(dev.into()), link),
        GFP_KERNEL,
    )
}
