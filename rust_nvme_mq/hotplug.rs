// SPDX-License-Identifier: GPL-2.0

//! CPU hotplug: commands lent to a queue are done before the queue's interrupt vector goes.

use crate::ctrl::Ctrl;
use kernel::{
    cpu::{hotplug, CpuId},
    cpumask::Cpumask,
    device::{Core, Device},
    devres::Devres,
    prelude::*,
    sync::Arc,
    time::Delta,
};

/// The CPU hotplug callbacks of a controller.
pub(crate) struct CpuEvents {
    ctrl: Arc<Ctrl>,
    /// How long to wait for lent commands when a vector goes: the I/O timeout, after which
    /// the timeout handler takes over anyway.
    limit: Delta,
}

/// Registers the callbacks of `ctrl` until dropped, or until the device is unbound.
pub(crate) type Hotplug = Devres<hotplug::Registration<CpuEvents>>;

pub(crate) fn register(dev: &Device<Core<'_>>, ctrl: Arc<Ctrl>, limit: Delta) -> Result<Hotplug> {
    hotplug::Registration::new_devres(dev, c"rust_nvme_mq:online", CpuEvents { ctrl, limit })
}

/// Whether a CPU of `cpus` other than `cpu` is online.
fn other_online(cpus: &Cpumask, cpu: CpuId) -> bool {
    let online = Cpumask::online();
    (0..kernel::cpu::nr_cpu_ids())
        .filter_map(CpuId::from_u32)
        .any(|c| c != cpu && cpus.test(c) && online.test(c))
}

impl hotplug::Callbacks for CpuEvents {
    /// The interrupt core shuts a managed vector down after its last CPU is gone. blk-mq
    /// drains the requests of the CPU's own context before that, but requests of other CPUs
    /// lent to the vector's queue would then complete with no interrupt: stop lending and wait
    /// for them now, while the interrupt still works.
    fn offline(&self, cpu: CpuId) {
        let ctrl = &self.ctrl;
        for (queue, cpus) in ctrl.queues.of_cpu(cpu) {
            if other_online(cpus, cpu) {
                continue;
            }
            let left = queue.drain_lent(self.limit);
            if left > 0 {
                pr_warn!(
                    "rnvme{}: queue {}: {} lent commands not done before CPU {} went offline\n",
                    ctrl.index,
                    queue.qid,
                    left,
                    cpu.as_u32()
                );
            }
        }
    }

    fn online(&self, cpu: CpuId) {
        for (queue, _) in self.ctrl.queues.of_cpu(cpu) {
            queue.resume_lending();
        }
    }
}
