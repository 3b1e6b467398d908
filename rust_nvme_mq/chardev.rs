// SPDX-License-Identifier: GPL-2.0

//! The character device of a controller, `/dev/rnvme<C>` (a misc device, root only like
//! `/dev/nvme<C>`), for the NVMe passthrough ioctls that nvme-cli uses.

use crate::{ioctl::NVME_IOCTL_RESCAN, ns::Namespaces, rescan::rescan};
use kernel::{
    device::Device,
    fs::File,
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    prelude::*,
    str::CString,
    sync::{new_condvar, new_mutex, Arc, ArcBorrow, CondVar, Mutex},
};

/// What the open files of a character device reach the driver through: for the controller's
/// device its namespaces (for a rescan, and the Identify strings) and its passthrough ioctls,
/// for a namespace's generic device its disk (`generic.rs`). Cut when the device goes
/// ([`Link::cut`]: at unbind, or when the namespace's disk is removed), so that a file held
/// open keeps neither the controller nor its DMA memory (queues, the bounce buffer) nor the
/// disk past that: its calls then fail with `ENODEV`. Calls run side by side, each counted
/// while it runs ([`Link::with`]); cutting waits for them.
#[pin_data]
pub(crate) struct Link<T: Send + Sync> {
    #[pin]
    state: Mutex<LinkState<T>>,
    /// Signalled when the last running call is done.
    #[pin]
    idle: CondVar,
}

struct LinkState<T> {
    to: Option<Arc<T>>,
    /// Calls (ioctls, attribute reads, io_uring commands being issued) running.
    users: usize,
}

impl<T: Send + Sync> Link<T> {
    pub(crate) fn new(to: Arc<T>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state <- new_mutex!(LinkState { to: Some(to), users: 0 }),
                idle <- new_condvar!(),
            }),
            GFP_KERNEL,
        )
    }

    /// Call `f` with what the link leads to, unless the link is cut (`ENODEV`).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&T) -> Result<R>) -> Result<R> {
        self.visit(|to| f(to.ok_or(ENODEV)?))
    }

    /// Call `f` with what the link leads to, `None` if the link is cut. Its reference is
    /// dropped before the call counts as done, so the last one is never dropped after
    /// [`Link::cut`] returns.
    pub(crate) fn visit<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        let to = {
            let mut state = self.state.lock();
            let to = state.to.clone();
            if to.is_none() {
                drop(state);
                return f(None);
            }
            state.users += 1;
            to
        };
        let result = f(to.as_deref());
        drop(to);
        let mut state = self.state.lock();
        state.users -= 1;
        if state.users == 0 {
            self.idle.notify_all();
        }
        result
    }

    /// Cut the link, and wait for the calls that still run.
    pub(crate) fn cut(&self) {
        let mut state = self.state.lock();
        state.to = None;
        while state.users > 0 {
            self.idle.wait(&mut state);
        }
    }
}

/// A link cut when this is dropped ([`Link::cut`]).
pub(crate) struct CutOnDrop<T: Send + Sync>(pub(crate) Arc<Link<T>>);

impl<T: Send + Sync> Drop for CutOnDrop<T> {
    fn drop(&mut self) {
        self.0.cut();
    }
}

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
