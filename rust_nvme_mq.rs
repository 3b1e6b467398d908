// SPDX-License-Identifier: GPL-2.0

//! Multi-queue PCI NVMe driver (work in progress).
//!
//! This first version only declares and validates the module parameters; the PCI driver,
//! controller bring-up and the per-CPU queues with overflow are being written.

use kernel::prelude::*;

module! {
    type: RustNvmeMq,
    name: "rust_nvme_mq",
    authors: ["rust-blk developers"],
    description: "Rust multi-queue NVMe driver",
    license: "GPL v2",
    params: {
        overflow: bool {
            default: true,
            description: "Send a request to another queue with free slots when its CPU's queue is full",
            perm: 0o444,
        },
        io_queue_depth: u32 {
            default: 1024,
            description: "Entries per I/O submission/completion queue (2..=65536, capped by CAP.MQES)",
            perm: 0o444,
        },
        nr_io_queues: u32 {
            default: 0,
            description: "Number of I/O queue pairs (0: one per CPU)",
            perm: 0o444,
        },
    },
}

/// Smallest usable queue: one slot always stays empty to tell full from empty.
const MIN_QUEUE_DEPTH: u32 = 2;
/// Largest queue the NVMe specification allows (CAP.MQES is a 0's based 16-bit field).
const MAX_QUEUE_DEPTH: u32 = 1 << 16;

struct RustNvmeMq;

impl kernel::Module for RustNvmeMq {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let depth = module_parameters::io_queue_depth.value();
        if !(MIN_QUEUE_DEPTH..=MAX_QUEUE_DEPTH).contains(&depth) {
            pr_err!(
                "io_queue_depth={depth} is out of range ({MIN_QUEUE_DEPTH}..={MAX_QUEUE_DEPTH})\n"
            );
            return Err(EINVAL);
        }
        pr_info!(
            "loaded: overflow={} io_queue_depth={} nr_io_queues={}\n",
            module_parameters::overflow.value(),
            depth,
            module_parameters::nr_io_queues.value()
        );
        Ok(RustNvmeMq)
    }
}
