// SPDX-License-Identifier: GPL-2.0

//! The character device of a controller, `/dev/rnvme<C>` (a misc device, root only like
//! `/dev/nvme<C>`), for the NVMe passthrough ioctls that nvme-cli uses.

use crate::{ioctl::NVME_IOCTL_RESCAN, link::Link, ns::Namespaces, rescan::rescan};
use kernel::{
    device::Device,
    fs::File,
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    prelude::*,
    str::CString,
    sync::{Arc, ArcBorrow},
};

/// The misc device type of controller character devices.
pub(crate) struct CtrlChardev;

#[vtable]
impl MiscDevice for CtrlChardev {
    /// An open file holds the link to the controller's passthrough state.
    type Ptr = Arc<Link<Namespaces>>;
    type RegistrationData = Arc<Link<Namespaces>>;

    fn open(_file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Arc<Link<Namespaces>>> {
        Ok(misc.data().clone())
    }

    /// As the C driver's `/sys/class/nvme/nvme<C>/{model,serial,firmware_rev}`.
    const ATTRIBUTES: &'static [&'static CStr] = &[c"model", c"serial", c"firmware_rev"];

    fn show_attribute(link: &Arc<Link<Namespaces>>, index: usize, buf: &mut [u8]) -> Result<usize> {
        link.with(|ns| {
            let id = &ns.info;
            let field: &[u8] = match index {
                0 => &id.model,
                1 => &id.serial,
                2 => &id.firmware_rev,
                _ => return Err(EINVAL),
            };
            show_id_string(field, buf)
        })
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

/// Write an Identify string as the C driver shows it: every byte up to the first NUL (the
/// padding spaces too), then a newline.
fn show_id_string(field: &[u8], buf: &mut [u8]) -> Result<usize> {
    let len = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    let out = buf.get_mut(..=len).ok_or(EINVAL)?;
    out[..len].copy_from_slice(&field[..len]);
    out[len] = b'\n';
    Ok(len + 1)
}

/// The registered character device; removed when dropped (open files stay, and their ioctls
/// fail once the [`Link`] is cut).
pub(crate) type Chardev = Pin<KBox<MiscDeviceRegistration<CtrlChardev>>>;

/// Register `/dev/rnvme<C>` for the controller of `data`, a child of `dev` (the PCI
/// function) in sysfs, like `/sys/class/nvme/nvme<C>`.
pub(crate) fn register(data: Arc<Namespaces>, dev: &Device) -> Result<Chardev> {
    let name = CString::try_from_fmt(fmt!("rnvme{}", data.ctrl.index))?;
    let opts = MiscDeviceOptions { name: c"rnvme" };
    let link = Link::new(data)?;
    KBox::pin_init(
        MiscDeviceRegistration::register_with_parent(opts, name, dev.into(), link),
        GFP_KERNEL,
    )
}
