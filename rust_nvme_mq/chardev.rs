// SPDX-License-Identifier: GPL-2.0

//! The character device of a controller, `/dev/rnvme<C>` (a misc device, root only like
//! `/dev/nvme<C>`), for the NVMe passthrough ioctls that nvme-cli uses.

use crate::ioctl::Passthru;
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
    /// An open file holds the controller's passthrough state.
    type Ptr = Arc<Passthru>;
    type RegistrationData = Arc<Passthru>;

    fn open(_file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Arc<Passthru>> {
        Ok(misc.data().clone())
    }

    /// As the C driver's `/sys/class/nvme/nvme<C>/{model,serial,firmware_rev}`.
    const ATTRIBUTES: &'static [&'static CStr] = &[c"model", c"serial", c"firmware_rev"];

    fn show_attribute(pt: &Arc<Passthru>, index: usize, buf: &mut [u8]) -> Result<usize> {
        let id = &pt.identity;
        let field: &[u8] = match index {
            0 => &id.model,
            1 => &id.serial,
            2 => &id.firmware_rev,
            _ => return Err(EINVAL),
        };
        show_id_string(field, buf)
    }

    fn ioctl(pt: ArcBorrow<'_, Passthru>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        Passthru::ioctl(pt, cmd, arg).map(|r| r as isize)
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

/// The registered character device; removed when dropped (open files keep working on the
/// controller until they are closed, and fail once it is gone).
pub(crate) type Chardev = Pin<KBox<MiscDeviceRegistration<CtrlChardev>>>;

/// Register `/dev/rnvme<C>` for the controller of `data`, a child of `dev` (the PCI
/// function) in sysfs, like `/sys/class/nvme/nvme<C>`.
pub(crate) fn register(data: Arc<Passthru>, dev: &Device) -> Result<Chardev> {
    let name = CString::try_from_fmt(fmt!("rnvme{}", data.ctrl.index))?;
    let opts = MiscDeviceOptions { name: c"rnvme" };
    KBox::pin_init(
        MiscDeviceRegistration::register_with_parent(opts, name, dev.into(), data),
        GFP_KERNEL,
    )
}
