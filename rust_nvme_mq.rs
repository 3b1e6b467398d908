// SPDX-License-Identifier: GPL-2.0

//! Multi-queue NVMe driver (stub, being written).

use kernel::prelude::*;

module! {
    type: RustNvmeMq,
    name: "rust_nvme_mq",
    authors: ["rust-blk developers"],
    description: "Rust multi-queue NVMe driver",
    license: "GPL v2",
    params: {
        nowait: bool {
            default: false,
            description: "Set the queue's NOWAIT feature (io_uring submits inline)",
        },
    },
}

struct RustNvmeMq;

impl kernel::Module for RustNvmeMq {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!("loaded, nowait={}\n", *module_parameters::nowait.value());
        Ok(RustNvmeMq)
    }
}
