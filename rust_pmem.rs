// SPDX-License-Identifier: GPL-2.0

//! Persistent memory block driver (stub, being written).

use kernel::prelude::*;

module! {
    type: RustPmem,
    name: "rust_pmem",
    authors: ["rust-blk developers"],
    description: "Rust persistent memory block driver",
    license: "GPL v2",
    params: {
        nowait: bool {
            default: false,
            description: "Set the queue's NOWAIT feature (io_uring submits inline)",
        },
    },
}

struct RustPmem;

impl kernel::Module for RustPmem {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!("loaded, nowait={}\n", *module_parameters::nowait.value());
        Ok(RustPmem)
    }
}
