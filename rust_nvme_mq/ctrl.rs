// SPDX-License-Identifier: GPL-2.0

//! The controller: what its namespaces share, its state, the steps of bringing it up, and
//! reset.

use crate::{
    admin::AdminQueue,
    cmd::{self, IdCtrl},
    ns::NvmeOps,
    queue::{queue_vector, CqIrq, IoQueue},
    regs::Regs,
};
use kernel::{
    block::mq::Request,
    cpumask::{Cpumask, CpumaskVar},
    device::{Bound, Device},
    io::{io_read, Io},
    page::PAGE_SIZE,
    pci,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        new_mutex, Arc, Mutex,
    },
};

/// Controller indices (`rnvme<C>`) in use, one bit each.
static CTRL_INDICES: Atomic<u32> = Atomic::new(0);

/// A controller index (`rnvme<C>`), the lowest free one, so a rebound controller gets its
/// name back. Given back when dropped.
pub(crate) struct CtrlIndex(pub(crate) u32);

impl CtrlIndex {
    pub(crate) fn take() -> Result<Self> {
        let mut used = CTRL_INDICES.load(Relaxed);
        loop {
            let index = used.trailing_ones();
            if index >= u32::BITS {
                return Err(EBUSY);
            }
            match CTRL_INDICES.cmpxchg(used, used | (1 << index), Relaxed) {
                Ok(_) => return Ok(Self(index)),
                Err(now) => used = now,
            }
        }
    }
}

impl Drop for CtrlIndex {
    fn drop(&mut self) {
        let mut used = CTRL_INDICES.load(Relaxed);
        while let Err(now) = CTRL_INDICES.cmpxchg(used, used & !(1 << self.0), Relaxed) {
            used = now;
        }
    }
}

/// The state of a controller, as seen by submission.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(i32)]
pub(crate) enum CtrlState {
    /// Commands are submitted.
    Live = 0,
    /// Being reset: submissions are retried later.
    Resetting = 1,
    /// Disabled after a failed reset: submissions fail.
    Dead = 2,
}

impl CtrlState {
    fn from_raw(raw: i32) -> Self {
        match raw {
            0 => Self::Live,
            1 => Self::Resetting,
            _ => Self::Dead,
        }
    }
}

/// The controller is enabled: shuts it down (CC.SHN) when dropped, so it no longer writes to
/// memory, before what owns this frees the queue memory.
pub(crate) struct Enabled(Arc<Regs>);

impl Drop for Enabled {
    fn drop(&mut self) {
        self.0.shutdown();
    }
}

/// The admin queue of an enabled controller. Fields drop in order: the controller is shut
/// down before the admin queue memory is freed.
pub(crate) struct EnabledAdmin {
    enabled: Enabled,
    pub(crate) queue: AdminQueue,
}

impl EnabledAdmin {
    /// Program `admin` and enable the controller. `EIO`: CSTS.CFS, `ETIMEDOUT`: CSTS.RDY not
    /// set within CAP.TO.
    pub(crate) fn enable(regs: &Arc<Regs>, admin: AdminQueue) -> Result<Self> {
        // From here on, dropping `enabled` shuts the controller down.
        let enabled = Enabled(regs.clone());
        admin.enable(regs)?;
        Ok(Self {
            enabled,
            queue: admin,
        })
    }
}

/// What Identify Controller says that the driver uses.
pub(crate) struct CtrlInfo {
    pub(crate) model: [u8; 40],
    pub(crate) serial: [u8; 20],
    /// Optional NVM commands (`cmd::ONCS_*`).
    pub(crate) oncs: u16,
    /// A volatile write cache is present.
    pub(crate) vwc: bool,
    /// Largest transfer in bytes: MDTS and the PRP list of a command slot.
    pub(crate) max_bytes: usize,
}

impl CtrlInfo {
    pub(crate) fn identify(
        admin: &mut EnabledAdmin,
        regs: &Regs,
        dev: &Device<Bound>,
    ) -> Result<Self> {
        let id = admin
            .queue
            .identify::<IdCtrl>(regs, dev, 0, cmd::CNS_CONTROLLER)?;
        let id = id.view()?;
        let mdts: u8 = io_read!(id, .mdts);
        let vwc: u8 = io_read!(id, .vwc);
        // MDTS is in minimum pages (4 KiB, checked at probe), 0 = no limit.
        let mut max_bytes = crate::queue::PRP_LIST_ENTRIES * PAGE_SIZE;
        if mdts != 0 && u32::from(mdts) + 12 < usize::BITS {
            max_bytes = max_bytes.min(1usize << (12 + u32::from(mdts)));
        }
        Ok(Self {
            model: kernel::io::io_project!(id, .mn).copy_read(),
            serial: kernel::io::io_project!(id, .sn).copy_read(),
            oncs: io_read!(id, .oncs),
            vwc: vwc & cmd::VWC_PRESENT != 0,
            max_bytes,
        })
    }
}

/// Which queue each CPU submits to, and which CPUs each queue's interrupt goes to.
pub(crate) struct QueueMap {
    /// The home queue of each CPU: the one whose interrupt is delivered to that CPU.
    home: KVec<u16>,
    /// The CPUs of each queue's interrupt vector (managed affinity), by queue index; `None`
    /// when the queues share vector 0, which is not managed.
    vector_cpus: KVec<Option<CpumaskVar>>,
}

impl QueueMap {
    /// Each CPU's home queue is the queue whose vector is affine to the CPU (the vectors are
    /// spread over the CPUs), or round robin where the affinity says nothing.
    pub(crate) fn new(irqs: &pci::IrqHandlers<CqIrq>, nr_queues: usize) -> Result<Self> {
        let nr_vectors = irqs.len();
        let affinity = |i| {
            irqs.affinity(queue_vector(i, nr_vectors))
                .filter(|_| nr_vectors > 1)
        };
        let nr_cpus = kernel::cpu::nr_cpu_ids();
        let mut home = KVec::with_capacity(nr_cpus as usize, GFP_KERNEL)?;
        for cpu in 0..nr_cpus {
            let own = kernel::cpu::CpuId::from_u32(cpu).and_then(|id| {
                (0..nr_queues).find(|&i| affinity(i).is_some_and(|mask| mask.test(id)))
            });
            let q = own.unwrap_or(cpu as usize % nr_queues.max(1));
            home.push(u16::try_from(q)?, GFP_KERNEL)?;
        }
        let mut vector_cpus = KVec::with_capacity(nr_queues, GFP_KERNEL)?;
        for i in 0..nr_queues {
            let cpus = affinity(i).map(CpumaskVar::try_clone).transpose()?;
            vector_cpus.push(cpus, GFP_KERNEL)?;
        }
        Ok(Self { home, vector_cpus })
    }
}

/// What all namespaces of a controller share. The first field shuts the controller down when
/// the last reference goes, before the queue memory is freed.
#[pin_data(PinnedDrop)]
pub(crate) struct Ctrl {
    _enabled: Enabled,
    pub(crate) index: u32,
    /// The interrupt-driven queues, then `nr_poll` poll queues.
    pub(crate) queues: KVec<Arc<IoQueue>>,
    pub(crate) nr_poll: usize,
    pub(crate) overflow: bool,
    map: QueueMap,
    pub(crate) regs: Arc<Regs>,
    /// The admin queue, for Abort on timeouts and for resets.
    #[pin]
    admin: Mutex<AdminQueue>,
    /// A `CtrlState`.
    state: Atomic<i32>,
    /// Queue pairs asked for at probe, and MSI-X vectors granted: needed again by a reset.
    want_queues: u32,
    nr_vectors: usize,
    /// Fault injection (debugfs `lose_commands`): this many next commands are kept in their
    /// slot but never given to the controller, as if the device lost them.
    pub(crate) lose: Atomic<u32>,
}

/// How the I/O queues of a controller were set up.
pub(crate) struct QueueSetup {
    pub(crate) queues: KVec<Arc<IoQueue>>,
    /// How many of `queues` (the last ones) are poll queues.
    pub(crate) nr_poll: usize,
    pub(crate) map: QueueMap,
    pub(crate) want_queues: u32,
    pub(crate) nr_vectors: usize,
    pub(crate) overflow: bool,
}

impl Ctrl {
    /// The controller with `admin` and the queues of `setup`, then the I/O queues created on
    /// it.
    pub(crate) fn new(
        index: u32,
        regs: Arc<Regs>,
        admin: EnabledAdmin,
        setup: QueueSetup,
    ) -> Result<Arc<Self>> {
        let EnabledAdmin { enabled, queue } = admin;
        let ctrl = Arc::pin_init(
            try_pin_init!(Self {
                _enabled: enabled,
                index,
                queues: setup.queues,
                nr_poll: setup.nr_poll,
                overflow: setup.overflow,
                map: setup.map,
                regs,
                admin <- new_mutex!(queue),
                state: Atomic::new(CtrlState::Live as i32),
                want_queues: setup.want_queues,
                nr_vectors: setup.nr_vectors,
                lose: Atomic::new(0),
            }? Error),
            GFP_KERNEL,
        )?;
        ctrl.admin.lock().create_io_queues(
            &ctrl.regs,
            &ctrl.queues,
            ctrl.nr_vectors,
            ctrl.nr_irq(),
        )?;
        Ok(ctrl)
    }

    /// How many queues are interrupt-driven: the first ones of `queues`.
    pub(crate) fn nr_irq(&self) -> usize {
        self.queues.len() - self.nr_poll
    }

    /// MSI-X vectors granted.
    pub(crate) fn nr_vectors(&self) -> usize {
        self.nr_vectors
    }

    pub(crate) fn state(&self) -> CtrlState {
        CtrlState::from_raw(self.state.load(Relaxed))
    }

    fn set_state(&self, state: CtrlState) {
        self.state.store(state as i32, Relaxed);
    }

    /// The admin queue, locked.
    pub(crate) fn admin(&self) -> kernel::sync::MutexGuard<'_, AdminQueue> {
        self.admin.lock()
    }

    /// The home queue of the current CPU.
    pub(crate) fn home_queue(&self) -> usize {
        let cpu = kernel::cpu::CpuId::current().as_u32() as usize;
        self.map
            .home
            .get(cpu)
            .map_or(cpu % self.nr_irq().max(1), |&q| usize::from(q))
    }

    /// The CPUs of the interrupt vector of queue `qi`, if it has managed affinity.
    pub(crate) fn cpus(&self, qi: usize) -> Option<&Cpumask> {
        self.map.vector_cpus.get(qi).and_then(|c| c.as_deref())
    }

    /// Whether to lose the next command (fault injection).
    pub(crate) fn take_lose(&self) -> bool {
        let mut n = self.lose.load(Relaxed);
        while n > 0 {
            match self.lose.cmpxchg(n, n - 1, Relaxed) {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
        false
    }

    /// The queue of the command of `rq`, its command id, and whether it had already been
    /// aborted; `mark`: note that it is being aborted now.
    pub(crate) fn find(&self, rq: &Request<NvmeOps>, mark: bool) -> Option<(&IoQueue, u16, bool)> {
        self.queues
            .iter()
            .find_map(|q| q.find(rq, mark).map(|(cid, was)| (&**q, cid, was)))
    }

    /// Reset the controller: disable it (it then no longer touches memory), give every request
    /// it held back to the block layer, then enable it again and recreate the I/O queues.
    /// While this runs, submissions (the requeued requests too) are turned away with
    /// `BLK_STS_RESOURCE` and retried by blk-mq, so they complete once the controller is back.
    /// If it does not come back, it is left disabled and they, and every later request, fail.
    ///
    /// Runs in process context with no submission in progress on the queues (they refuse new
    /// ones first), so it can run from a work item once the queues are quiesced.
    pub(crate) fn reset(&self) {
        let mut admin = self.admin.lock();
        let from = CtrlState::Live as i32;
        if self
            .state
            .cmpxchg(from, CtrlState::Resetting as i32, Relaxed)
            .is_err()
        {
            return;
        }
        let requeued = self.stop_and_requeue_all(&mut admin);
        match self.restart(&mut admin) {
            Ok(()) => {
                self.queues.iter().for_each(|q| q.set_accepting(true));
                self.set_state(CtrlState::Live);
                pr_info!(
                    "rnvme{}: controller reset done, {} requests requeued\n",
                    self.index,
                    requeued
                );
            }
            Err(e) => {
                self.set_state(CtrlState::Dead);
                let _ = self.regs.disable();
                pr_err!(
                    "rnvme{}: controller reset failed ({:?}): disabled, all I/O fails\n",
                    self.index,
                    e
                );
            }
        }
    }

    /// First half of a reset: stop submissions, disable the controller, requeue what it held
    /// and empty every queue. Returns how many requests were requeued.
    fn stop_and_requeue_all(&self, admin: &mut AdminQueue) -> usize {
        self.queues.iter().for_each(|q| q.set_accepting(false));
        let _ = self.regs.disable();
        let requeued = self.queues.iter().map(|q| q.requeue_all_and_clear()).sum();
        // Cannot fail: the admin queue has `ADMIN_DEPTH` entries.
        let _ = admin.clear();
        requeued
    }

    /// Second half of a reset: enable the controller and recreate the I/O queues.
    fn restart(&self, admin: &mut AdminQueue) -> Result {
        admin.enable(&self.regs)?;
        let granted = admin.set_queue_count(&self.regs, self.want_queues)?;
        if (granted as usize) < self.queues.len() {
            return Err(ENODEV);
        }
        admin.create_io_queues(&self.regs, &self.queues, self.nr_vectors, self.nr_irq())
    }
}

#[pinned_drop]
impl PinnedDrop for Ctrl {
    fn drop(self: Pin<&mut Self>) {
        for q in self.queues.iter() {
            let s = &q.stats;
            pr_info!(
                "rnvme{} queue {}: submitted {} completed {} overflow_out {} overflow_in {} full_events {} lent_max {} refused {}\n",
                self.index,
                q.qid,
                s.submitted.load(Relaxed),
                s.completed.load(Relaxed),
                s.overflow_out.load(Relaxed),
                s.overflow_in.load(Relaxed),
                s.full.load(Relaxed),
                q.occupancy().2,
                s.refused.load(Relaxed)
            );
        }
    }
}
