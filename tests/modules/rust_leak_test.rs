// SPDX-License-Identifier: GPL-2.0

//! Test module: leaks a disk, a misc device, a device class and a device of that class from safe
//! code, then unloads or fails its init.
//!
//! Loaded by suite-main's `leaked_registrations_undone_at_unload`. Safe code may leak a value
//! that registers the module's code (`core::mem::forget`); when the module goes, the kernel
//! (kernel/module/rust_leftovers.c) must unregister what it left, so that nothing calls into
//! the freed module afterwards.

use kernel::{
    block::mq::{self, gen_disk::GenDiskBuilder, Operations, TagSet},
    class::Class,
    fs::File,
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    prelude::*,
    str::CString,
    sync::{aref::ARef, Arc},
};

module! {
    type: LeakTest,
    name: "rust_leak_test",
    authors: ["rust-blk developers"],
    description: "Leaks a disk, a misc device, a class and a class device (a test of their unregistration at unload)",
    license: "GPL v2",
    params: {
        fail_init: bool {
            default: false,
            description: "Leak both, then fail the init",
        },
        drop_fail: bool {
            default: false,
            description: "Add a disk, delete it (no leak), then fail the init",
        },
    },
}

struct LeakTest;

/// The class whose registration and one device the module leaks.
static CLASS: Class = Class::new(c"rleak", 1);

struct Disk;

#[vtable]
impl Operations for Disk {
    type QueueData = ();

    fn queue_rq(
        _queue_data: (),
        rq: ARef<mq::Request<Self>>,
        _is_last: bool,
    ) -> Result<(), mq::QueueError<Self>> {
        // Reads return whatever the pages held: nothing here checks data.
        let _ = mq::Request::end_ok(rq);
        Ok(())
    }

    fn commit_rqs(_queue_data: ()) {}

    fn complete(rq: ARef<mq::Request<Self>>) {
        let _ = mq::Request::end_ok(rq);
    }
}

struct Misc;

#[vtable]
impl MiscDevice for Misc {
    type Ptr = ();
    type RegistrationData = ();

    fn open(_file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<()> {
        Ok(())
    }
}

fn add_disk(name: &str) -> Result<mq::gen_disk::GenDisk<Disk>> {
    let tagset = Arc::pin_init(TagSet::<Disk>::new(1, 64, 1), GFP_KERNEL)?;
    GenDiskBuilder::new()
        .capacity_sectors(2048)
        .build_owned::<LeakTest, _>(fmt!("{name}"), tagset, ())
}

impl kernel::Module for LeakTest {
    fn init(module: &'static ThisModule) -> Result<Self> {
        if module_parameters::drop_fail.value() {
            drop(add_disk("rleak1")?);
            return Err(ENODEV);
        }
        core::mem::forget(add_disk("rleak0")?);
        let misc = KBox::pin_init(
            MiscDeviceRegistration::<Misc>::register(
                MiscDeviceOptions {
                    name: c"rleak_misc",
                },
                (),
            ),
            GFP_KERNEL,
        )?;
        core::mem::forget(misc);
        core::mem::forget(CLASS.register(module)?);
        let class_dev = KBox::pin_init(
            MiscDeviceRegistration::<Misc>::register_in_class(
                &CLASS,
                0,
                CString::try_from_fmt(fmt!("rleak_class0"))?,
                None,
                (),
            ),
            GFP_KERNEL,
        )?;
        core::mem::forget(class_dev);
        pr_info!("leaked disk rleak0, misc device rleak_misc, class rleak and its rleak_class0\n");
        if module_parameters::fail_init.value() {
            return Err(ENODEV);
        }
        Ok(LeakTest)
    }
}
