// SPDX-License-Identifier: GPL-2.0

//! I/O submission/completion queue pairs: command slots, the lending rule between queues,
//! building commands from requests, submission, and completion from the interrupt handler.

use crate::{
    cmd::{self, Sqe},
    ns::{Namespace, NvmeOps},
    prp::build_prps,
    regs::Regs,
};
use kernel::{
    block::{
        mq::{Command, DmaDevice, DmaMapping, Request},
        SECTOR_SHIFT,
    },
    cpumask::Cpumask,
    device::{self, Bound},
    dma::Coherent,
    io::io_write,
    irq::{self, IrqReturn},
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Atomic, Relaxed},
        new_spinlock_irq, Arc, SpinLockIrq,
    },
    time::{delay::fsleep, Delta, Instant, Monotonic},
};

/// PRP list entries per command slot: the largest request is this many pages.
pub(crate) const PRP_LIST_ENTRIES: usize = 64;
/// Largest number of single-page segments in a request: one for PRP1, the rest in the list.
pub(crate) const MAX_SEGMENTS: usize = PRP_LIST_ENTRIES + 1;
/// Completions handled per lock hold.
const COMPLETION_BATCH: usize = 16;

/// The order in which queues are tried for a request from `home`: the home queue, then,
/// with `overflow`, the others round robin (each of which may refuse, see [`may_take`]).
pub(crate) fn queue_order(
    home: usize,
    nr_queues: usize,
    overflow: bool,
) -> impl Iterator<Item = usize> {
    let tries = if overflow { nr_queues } else { 1 };
    (0..tries).map(move |i| (home + i) % nr_queues.max(1))
}

/// How many of a queue's `slots` it keeps for requests of its own CPUs (those whose home it
/// is): a quarter, rounded up.
pub(crate) fn lend_reserve(slots: usize) -> usize {
    slots.div_ceil(4)
}

/// The lending rule: whether a request may take one of a queue's `free` slots (out of
/// `slots`). A request of one of the queue's own CPUs may take any free slot; a request of a
/// foreign CPU (overflowing from its full home queue) only while more than
/// [`lend_reserve`] slots are free, so lending never leaves fewer than the reserve free.
///
/// A CPU that keeps at most the reserve in flight on its queue therefore never finds it full,
/// however much other CPUs borrow, while a CPU with more load than its queue holds still gets
/// every slot the others do not need beyond their reserve.
pub(crate) fn may_take(free: usize, slots: usize, foreign: bool) -> bool {
    if foreign {
        free > lend_reserve(slots)
    } else {
        free > 0
    }
}

/// The MSI-X vector of I/O queue `index` when `nr_vectors` were granted: vector 0 belongs to
/// the admin queue, the others are shared round robin.
pub(crate) fn queue_vector(index: usize, nr_vectors: usize) -> usize {
    if nr_vectors > 1 {
        1 + index % (nr_vectors - 1)
    } else {
        0
    }
}

/// Counters of one I/O queue.
pub(crate) struct QueueStats {
    pub(crate) submitted: Atomic<u64>,
    pub(crate) completed: Atomic<u64>,
    pub(crate) overflow_out: Atomic<u64>,
    pub(crate) overflow_in: Atomic<u64>,
    /// Submissions of the queue's own CPUs that found it full.
    pub(crate) full: Atomic<u64>,
    /// Submissions of foreign CPUs turned away by the lending rule (reserve or full).
    pub(crate) refused: Atomic<u64>,
    /// Submissions that passed this queue by because no CPU of its vector was online, or
    /// (foreign ones) because its last online CPU was going offline.
    pub(crate) offline: Atomic<u64>,
    /// Commands the controller held when it was reset, given back to the block layer (also
    /// counted as completed: they are submitted again).
    pub(crate) requeued: Atomic<u64>,
    /// Requests ended by polling (`Operations::poll`), only on poll queues.
    pub(crate) polled: Atomic<u64>,
    /// Lent commands waited for while the last online CPU of the queue's vector went offline.
    pub(crate) hotplug_drained: Atomic<u64>,
}

impl QueueStats {
    fn new() -> Self {
        Self {
            submitted: Atomic::new(0),
            completed: Atomic::new(0),
            overflow_out: Atomic::new(0),
            overflow_in: Atomic::new(0),
            full: Atomic::new(0),
            refused: Atomic::new(0),
            offline: Atomic::new(0),
            requeued: Atomic::new(0),
            polled: Atomic::new(0),
            hotplug_drained: Atomic::new(0),
        }
    }
}

/// The column names of [`Counters`].
pub(crate) const COUNTER_COLUMNS: &str = "queue submitted completed overflow_out overflow_in full_events in_flight lent lent_max refused reserve offline_skips requeued poll polled hotplug_drained";

/// The counters of a queue as one line of numbers (debugfs, and the kernel log at removal),
/// in the order of [`COUNTER_COLUMNS`]; `poll`: whether it is a poll queue.
pub(crate) struct Counters<'a>(pub(crate) &'a IoQueue, pub(crate) bool);

impl kernel::fmt::Display for Counters<'_> {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let Self(q, poll) = *self;
        let s = &q.stats;
        let (in_flight, lent, lent_max) = q.occupancy();
        write!(
            f,
            "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
            q.qid,
            s.submitted.load(Relaxed),
            s.completed.load(Relaxed),
            s.overflow_out.load(Relaxed),
            s.overflow_in.load(Relaxed),
            s.full.load(Relaxed),
            in_flight,
            lent,
            lent_max,
            s.refused.load(Relaxed),
            lend_reserve(q.slots()),
            s.offline.load(Relaxed),
            s.requeued.load(Relaxed),
            u8::from(poll),
            s.polled.load(Relaxed),
            s.hotplug_drained.load(Relaxed)
        )
    }
}

/// A command slot of an I/O queue, indexed by command id.
struct Slot {
    rq: Option<ARef<Request<NvmeOps>>>,
    maps: DmaMapping<NvmeOps>,
    /// The command timed out and an Abort was sent for it.
    aborted: bool,
    /// The request came from a foreign CPU (the slot is lent).
    lent: bool,
}

impl Slot {
    /// A free slot, with room for the mappings of the largest request.
    fn new(dev: &device::Device<Bound>) -> Result<Self> {
        Ok(Self {
            rq: None,
            maps: DmaMapping::new(dev, MAX_SEGMENTS)?,
            aborted: false,
            lent: false,
        })
    }

    /// Undo the data mapping and forget an Abort: the slot's command is gone.
    fn clear(&mut self) {
        self.maps.unmap();
        self.aborted = false;
    }

    /// Whether the slot holds the request at `rq` (compared by address only).
    fn holds(&self, rq: *const Request<NvmeOps>) -> bool {
        self.rq.as_ref().is_some_and(|r| core::ptr::eq(&**r, rq))
    }
}

/// The mutable state of an I/O queue pair.
struct QueueState {
    sq_tail: u16,
    cq_head: u16,
    phase: bool,
    /// Command ids not in flight; at most `depth - 1`, so the queues never overrun.
    free: KVec<u16>,
    slots: KVec<Slot>,
    /// False while the controller is being reset.
    accepting: bool,
    /// False while the last online CPU of the queue's vector goes offline and until a CPU of
    /// it is back: requests of other CPUs do not get slots then (see [`IoQueue::drain_lent`]).
    lending: bool,
    /// Slots held by requests of foreign CPUs, now and at most so far.
    lent: usize,
    lent_max: usize,
    /// Requests taken off their slots that could not be ended or requeued yet because a
    /// timeout handler held a reference to them at that moment; see [`IoQueue::defer`].
    /// Room for every slot, so pushing never allocates.
    deferred: KVec<(ARef<Request<NvmeOps>>, Deferred)>,
}

/// What to do with a request whose ending or requeueing was deferred.
#[derive(Clone, Copy)]
enum Deferred {
    End(Result),
    Requeue,
}

impl QueueState {
    /// The state of an empty queue pair of `depth` entries: `depth - 1` free slots, whose
    /// data mappings are for `dev`.
    fn new(dev: &device::Device<Bound>, depth: u16) -> Result<Self> {
        let n = usize::from(depth);
        let mut free = KVec::with_capacity(n - 1, GFP_KERNEL)?;
        // Pop order: low command ids first.
        for cid in (0..depth - 1).rev() {
            free.push(cid, GFP_KERNEL)?;
        }
        let mut slots = KVec::with_capacity(n - 1, GFP_KERNEL)?;
        for _ in 0..n - 1 {
            slots.push(Slot::new(dev)?, GFP_KERNEL)?;
        }
        Ok(Self {
            sq_tail: 0,
            cq_head: 0,
            phase: true,
            free,
            slots,
            accepting: true,
            lending: true,
            lent: 0,
            lent_max: 0,
            deferred: KVec::with_capacity(n - 1, GFP_KERNEL)?,
        })
    }

    /// Give back slot `cid`, whose request is gone (ended, or never submitted).
    fn release(&mut self, cid: u16) {
        if let Some(slot) = self.slots.get_mut(usize::from(cid)) {
            slot.clear();
            if slot.lent {
                slot.lent = false;
                self.lent -= 1;
            }
        }
        // Cannot fail: `free` was allocated for every command id.
        let _ = self.free.push(cid, GFP_ATOMIC);
    }

    /// Take the request out of slot `cid` and give the slot back.
    fn take(&mut self, cid: u16) -> Option<ARef<Request<NvmeOps>>> {
        let slot = self.slots.get_mut(usize::from(cid))?;
        let rq = slot.rq.take();
        if rq.is_some() {
            // Unmaps before the request ends and the block layer may free the pages.
            self.release(cid);
        } else {
            slot.clear();
        }
        rq
    }

    /// Advance the completion queue head of a queue of `depth` entries.
    fn advance_cq(&mut self, depth: u16) {
        self.cq_head += 1;
        if self.cq_head == depth {
            self.cq_head = 0;
            self.phase = !self.phase;
        }
    }
}

/// Why a submission did not happen.
pub(crate) enum SubmitError {
    /// The queue has no free slot (or none it may lend); the request comes back for another
    /// queue.
    Full(ARef<Request<NvmeOps>>),
    /// No CPU of the queue's interrupt vector is online, so its completions would raise no
    /// interrupt; the request comes back for another queue.
    Offline(ARef<Request<NvmeOps>>),
    /// The request cannot be carried out; it comes back (unmapped) with the error, for
    /// `queue_rq` to refuse it.
    Failed(ARef<Request<NvmeOps>>, Error),
}

/// A completion taken off the queue, ended outside the lock.
type Done = Option<(ARef<Request<NvmeOps>>, Result)>;

/// An I/O submission/completion queue pair.
#[pin_data]
pub(crate) struct IoQueue {
    pub(crate) qid: u16,
    pub(crate) depth: u16,
    regs: Arc<Regs>,
    dev: DmaDevice,
    sq: Coherent<[u8]>,
    cq: Coherent<[u8]>,
    /// `PRP_LIST_ENTRIES` per slot: the PRP list, or the range of a Dataset Management.
    prps: Coherent<[u64]>,
    #[pin]
    state: SpinLockIrq<QueueState>,
    pub(crate) stats: QueueStats,
}

impl IoQueue {
    pub(crate) fn new(
        dev: &device::Device<Bound>,
        regs: Arc<Regs>,
        qid: u16,
        depth: u16,
    ) -> Result<Arc<Self>> {
        let n = usize::from(depth);
        let state = QueueState::new(dev, depth)?;
        let sq = Coherent::<u8>::zeroed_slice(dev, n * size_of::<Sqe>(), GFP_KERNEL)?;
        let cq = Coherent::<u8>::zeroed_slice(dev, n * size_of::<cmd::Cqe>(), GFP_KERNEL)?;
        let prps = Coherent::<u64>::zeroed_slice(dev, (n - 1) * PRP_LIST_ENTRIES, GFP_KERNEL)?;
        let dev = DmaDevice::new(dev)?;
        Arc::pin_init(
            try_pin_init!(Self {
                qid,
                depth,
                regs,
                dev,
                sq,
                cq,
                prps,
                state <- new_spinlock_irq!(state),
                stats: QueueStats::new(),
            }? Error),
            GFP_KERNEL,
        )
    }

    /// Bus addresses of the submission and completion queue.
    pub(crate) fn ring_addresses(&self) -> (u64, u64) {
        (self.sq.dma_address(), self.cq.dma_address())
    }

    /// The number of command slots.
    pub(crate) fn slots(&self) -> usize {
        usize::from(self.depth) - 1
    }

    /// Map the data of `rq` for DMA into `maps`. The block layer maps physically contiguous
    /// pieces together (behind an IOMMU, the whole request as one range), as PRPs need. Fails
    /// once the controller has started to unbind.
    fn map_data(&self, rq: &Request<NvmeOps>, maps: &mut DmaMapping<NvmeOps>) -> Result {
        self.dev.map(maps, rq).map_err(|_| EIO)
    }

    /// The first PRP list entry of slot `cid` and its bus address.
    fn list_of(&self, cid: u16) -> (usize, u64) {
        let index = usize::from(cid) * PRP_LIST_ENTRIES;
        let addr = self.prps.dma_address() + (index * size_of::<u64>()) as u64;
        (index, addr)
    }

    /// A Dataset Management (deallocate) of `blocks` blocks from `lba`: one range, written
    /// into the list area of slot `cid`.
    fn discard(&self, nsid: u32, cid: u16, lba: u64, blocks: u32) -> Result<Sqe> {
        let (index, addr) = self.list_of(cid);
        // Context attributes and length in blocks, then the starting LBA.
        io_write!(self.prps, [try: index], u64::from(blocks) << 32);
        io_write!(self.prps, [try: index + 1], lba);
        Ok(Sqe::new(cmd::NVM_DSM, nsid)
            .prps(addr, 0)
            .cdw10(0)
            .cdw11(cmd::DSM_DEALLOCATE))
    }

    /// A read or write of `rq` in slot `cid`, mapping its data into `maps`.
    fn read_write(
        &self,
        rq: &Request<NvmeOps>,
        (opcode, nsid): (u8, u32),
        cid: u16,
        maps: &mut DmaMapping<NvmeOps>,
    ) -> Result<Sqe> {
        self.map_data(rq, maps)?;
        let (index, addr) = self.list_of(cid);
        let mut list = [0u64; PRP_LIST_ENTRIES];
        let prps = build_prps(maps.segments(), &mut list, addr)?;
        if prps.nr_entries > 1 {
            for (i, entry) in list.iter().take(prps.nr_entries).enumerate() {
                io_write!(self.prps, [try: index + i], *entry);
            }
        }
        Ok(Sqe::new(opcode, nsid).prps(prps.prp1, prps.prp2))
    }

    /// Build the command for `rq` in slot `cid`, mapping its data into `maps`.
    fn prepare(
        &self,
        ns: &Namespace,
        rq: &Request<NvmeOps>,
        cid: u16,
        maps: &mut DmaMapping<NvmeOps>,
    ) -> Result<Sqe> {
        let lba = rq.sector() >> (ns.lba_shift - SECTOR_SHIFT);
        let blocks = rq.bytes() >> ns.lba_shift;
        let command = rq.command();
        if blocks == 0 && !matches!(command, Command::Flush | Command::Other(_)) {
            return Err(EINVAL);
        }
        let opcode = match command {
            Command::Read => cmd::NVM_READ,
            Command::Write => cmd::NVM_WRITE,
            Command::Flush => return Ok(Sqe::new(cmd::NVM_FLUSH, ns.nsid)),
            Command::Discard => return self.discard(ns.nsid, cid, lba, blocks),
            Command::WriteZeroes => {
                return Ok(Sqe::new(cmd::NVM_WRITE_ZEROES, ns.nsid)
                    .slba(lba)
                    .cdw12(blocks - 1))
            }
            // A passthrough command (`NVME_IOCTL_IO_CMD`), built by `ioctl.rs`.
            Command::Other(_) => return crate::ioctl::driver_sqe(rq),
        };
        let mut cdw12 = blocks - 1;
        if rq.is_fua() && command == Command::Write {
            cdw12 |= cmd::RW_FUA;
        }
        let sqe = self.read_write(rq, (opcode, ns.nsid), cid, maps)?;
        Ok(sqe.slba(lba).cdw12(cdw12))
    }

    /// Whether the queue may be used: its interrupt vector has an online CPU. `cpus`: the
    /// CPUs of the vector, if it has managed affinity.
    fn online(&self, cpus: Option<&Cpumask>) -> bool {
        cpus.is_none_or(|cpus| cpus.intersects(Cpumask::online()))
    }

    /// Whether the lending rule lets a (`foreign`) request have a slot now.
    fn admits(&self, st: &QueueState, foreign: bool) -> bool {
        if may_take(st.free.len(), self.slots(), foreign) {
            return true;
        }
        if foreign {
            self.stats.refused.add(1, Relaxed);
        } else {
            self.stats.full.add(1, Relaxed);
        }
        false
    }

    /// Submit `rq` to this queue if the lending rule lets it have a free slot; `foreign`: the
    /// request comes from a CPU whose home queue is another one. `cpus`: the CPUs of the
    /// queue's interrupt vector, if it has managed affinity; the queue is only used while one
    /// of them is online. `lose`: keep the command in its slot but do not give it to the
    /// controller (fault injection).
    pub(crate) fn submit(
        &self,
        ns: &Namespace,
        rq: ARef<Request<NvmeOps>>,
        foreign: bool,
        lose: bool,
        cpus: Option<&Cpumask>,
    ) -> Result<(), SubmitError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        if !st.accepting {
            return Err(SubmitError::Failed(rq, ENOMEM));
        }
        // The interrupt core shuts a managed vector down when the last CPU of its mask goes
        // offline. Checked with the lock held, so with interrupts off on this CPU: a CPU
        // cannot leave the online mask (that happens in stop_machine) until the command is
        // on the queue, where a later reap finds it (see `NvmeOps::queue_rq` and `timeout`).
        if !self.online(cpus) || (foreign && !st.lending) {
            self.stats.offline.add(1, Relaxed);
            return Err(SubmitError::Offline(rq));
        }
        if !self.admits(st, foreign) {
            return Err(SubmitError::Full(rq));
        }
        let Some(cid) = st.free.pop() else {
            return Err(SubmitError::Full(rq));
        };
        let Some(slot) = st.slots.get_mut(usize::from(cid)) else {
            return Err(SubmitError::Failed(rq, EIO));
        };
        let mut sqe = match self.prepare(ns, &rq, cid, &mut slot.maps) {
            Ok(sqe) => sqe,
            Err(e) => {
                // Undoes a mapping made before the failure: the mapping's reference to the
                // request goes, so `queue_rq` can hand it back to the block layer.
                st.release(cid);
                return Err(SubmitError::Failed(rq, e));
            }
        };
        slot.rq = Some(rq);
        slot.lent = foreign;
        if foreign {
            st.lent += 1;
            st.lent_max = st.lent_max.max(st.lent);
        }
        self.stats.submitted.add(1, Relaxed);
        if lose {
            pr_warn!(
                "queue {}: losing command {} (fault injection)\n",
                self.qid,
                cid
            );
            return Ok(());
        }
        sqe.set_cid(cid);
        self.push(st, sqe);
        Ok(())
    }

    /// Put `sqe` at the tail of the submission queue and ring the doorbell.
    fn push(&self, st: &mut QueueState, sqe: Sqe) {
        // Cannot fail: `sq_tail` < `depth`, the queue's size.
        let _ = cmd::write_sqe(&self.sq, st.sq_tail, sqe);
        st.sq_tail += 1;
        if st.sq_tail == self.depth {
            st.sq_tail = 0;
        }
        self.regs.sq_doorbell(self.qid, st.sq_tail);
    }

    /// Take up to `COMPLETION_BATCH` completions off the completion queue into `done`, with
    /// the lock held; returns how many requests were taken and whether any entry was.
    fn reap_batch(&self, done: &mut [Done; COMPLETION_BATCH]) -> (usize, bool) {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let mut n = 0;
        let mut consumed = false;
        while n < COMPLETION_BATCH {
            let Ok(Some(cqe)) = cmd::read_cqe(&self.cq, st.cq_head, st.phase) else {
                break;
            };
            consumed = true;
            st.advance_cq(self.depth);
            if !st.accepting && aborted_by_sq_deletion(cqe.status) {
                // The queues are being deleted before the controller is disabled: the request
                // stays in its slot and is requeued (reset) or failed (shutdown) from there.
                continue;
            }
            if let (Some(rq), Some(entry)) = (st.take(cqe.cid), done.get_mut(n)) {
                let status = crate::ioctl::io_status(&rq, &cqe);
                *entry = Some((rq, status));
                n += 1;
            }
        }
        if consumed {
            self.regs.cq_doorbell(self.qid, st.cq_head);
        }
        (n, consumed)
    }

    /// Reap the completion queue; returns whether there was anything.
    pub(crate) fn process_completions(&self) -> bool {
        self.reap().1
    }

    /// Reap the completion queue of a poll queue (no interrupt); returns how many requests
    /// were ended.
    pub(crate) fn poll(&self) -> usize {
        let ended = self.reap().0;
        self.stats.polled.add(ended as u64, Relaxed);
        ended
    }

    /// Reap the completion queue; returns how many requests were ended and whether any
    /// entry was consumed.
    fn reap(&self) -> (usize, bool) {
        self.finish_deferred();
        let mut any = false;
        let mut ended = 0;
        loop {
            let mut done: [Done; COMPLETION_BATCH] = [const { None }; COMPLETION_BATCH];
            let (n, consumed) = self.reap_batch(&mut done);
            any |= consumed;
            ended += n;
            for (rq, status) in done.iter_mut().filter_map(Option::take) {
                self.stats.completed.add(1, Relaxed);
                // The slot held the only reference, so ending fails only while a timeout
                // handler holds one too, for an instant (see `NvmeOps::timeout`).
                if let Err(rq) = Request::end(rq, status) {
                    self.defer(rq, Deferred::End(status));
                }
            }
            if n < COMPLETION_BATCH {
                return (ended, any);
            }
        }
    }

    /// The last online CPU of the queue's vector is going offline (its interrupt still works):
    /// stop lending slots to other CPUs and wait until the commands lent to the queue are
    /// done, reaping the completion queue meanwhile, for at most `limit`. blk-mq waits for the
    /// requests of the CPU's own context itself, but not for those of other CPUs' contexts,
    /// which would otherwise complete with no interrupt once the vector is shut down. Returns
    /// how many lent commands are left (a controller that does not complete them is left to
    /// the timeout handler, which reaps the queue first).
    pub(crate) fn drain_lent(&self, limit: Delta) -> usize {
        let lent = {
            let mut st = self.state.lock();
            st.lending = false;
            st.lent
        };
        self.stats.hotplug_drained.add(lent as u64, Relaxed);
        let start = Instant::<Monotonic>::now();
        loop {
            self.process_completions();
            let lent = self.state.lock().lent;
            if lent == 0 || start.elapsed() >= limit {
                return lent;
            }
            fsleep(Delta::from_millis(1));
        }
    }

    /// A CPU of the queue's vector is online again (and the vector with it): lend slots again,
    /// and reap what may have completed while the vector was down.
    pub(crate) fn resume_lending(&self) {
        self.state.lock().lending = true;
        self.process_completions();
    }

    /// Stop (`false`) or resume (`true`) taking submissions, around a controller reset.
    pub(crate) fn set_accepting(&self, accepting: bool) {
        self.state.lock().accepting = accepting;
    }

    /// With the controller disabled: give every request in the queue back to the block
    /// layer to be issued again (the controller no longer touches their memory, and their
    /// data mappings are undone first), and start the queue pair afresh (empty, tail and head
    /// 0, phase 1). Returns how many requests were requeued.
    pub(crate) fn requeue_all_and_clear(&self) -> usize {
        let mut requeued = 0;
        for cid in 0..self.depth - 1 {
            let rq = self.state.lock().take(cid);
            if let Some(rq) = rq {
                requeued += 1;
                self.stats.completed.add(1, Relaxed);
                self.stats.requeued.add(1, Relaxed);
                // They come back through `queue_rq`, which turns them away while the reset
                // runs and fails them if the controller does not come back.
                if let Err(rq) = Request::requeue(rq, true) {
                    self.defer(rq, Deferred::Requeue);
                }
            }
        }
        let mut st = self.state.lock();
        // Cannot fail: the queue has `depth` entries.
        let _ = cmd::clear_cq(&self.cq, self.depth);
        st.sq_tail = 0;
        st.cq_head = 0;
        st.phase = true;
        requeued
    }

    /// Keep `rq`, taken off its slot, to be ended or requeued by [`IoQueue::finish_deferred`]:
    /// a timeout handler holds a reference to it, so it cannot be handed back now.
    fn defer(&self, rq: ARef<Request<NvmeOps>>, what: Deferred) {
        // Cannot fail: a request is in at most one slot or deferred entry, and there is room
        // for every slot.
        let _ = self.state.lock().deferred.push_within_capacity((rq, what));
        // The timeout handler may have let it go meanwhile, before it looked at the list.
        // Otherwise the next reap of this queue (or the request's next timeout) finishes it.
        self.finish_deferred();
    }

    /// End or requeue the deferred requests whose timeout handler let them go. Called by every
    /// reap, and by the timeout handler after it dropped its reference.
    pub(crate) fn finish_deferred(&self) {
        loop {
            let Some((rq, what)) = self.state.lock().deferred.pop() else {
                return;
            };
            let back = match what {
                Deferred::End(status) => Request::end(rq, status),
                Deferred::Requeue => Request::requeue(rq, true),
            };
            if let Err(rq) = back {
                // Still held: the timeout handler that holds it calls this again.
                let _ = self.state.lock().deferred.push_within_capacity((rq, what));
                return;
            }
        }
    }

    /// The command id of the request at `rq` if it is on this queue (compared by address
    /// only); `mark`: note that it was aborted, and return whether it already had been.
    pub(crate) fn find(&self, rq: *const Request<NvmeOps>, mark: bool) -> Option<(u16, bool)> {
        let mut st = self.state.lock();
        let (cid, slot) = st.slots.iter_mut().enumerate().find(|(_, s)| s.holds(rq))?;
        let was = slot.aborted;
        slot.aborted |= mark;
        Some((u16::try_from(cid).ok()?, was))
    }

    /// Commands in flight, lent slots now and at most so far.
    pub(crate) fn occupancy(&self) -> (usize, usize, usize) {
        let st = self.state.lock();
        (self.slots() - st.free.len(), st.lent, st.lent_max)
    }
}

/// Whether a completion's status field says "Command Aborted due to SQ Deletion" (generic
/// command status 0x08): the command did not run, and may be issued again.
fn aborted_by_sq_deletion(status: u16) -> bool {
    status & 0x7ff == 0x08
}

/// The interrupt handler of one vector: reaps the completion queues assigned to it.
pub(crate) struct CqIrq {
    queues: KVec<Arc<IoQueue>>,
}

impl CqIrq {
    /// The handler of `vector` out of `nr_vectors`: the queues whose completions interrupt
    /// on it.
    pub(crate) fn new(queues: &[Arc<IoQueue>], vector: usize, nr_vectors: usize) -> Result<Self> {
        let mut mine = KVec::new();
        for (i, q) in queues.iter().enumerate() {
            if queue_vector(i, nr_vectors) == vector {
                mine.push(q.clone(), GFP_KERNEL)?;
            }
        }
        Ok(Self { queues: mine })
    }
}

impl irq::Handler for CqIrq {
    fn handle(&self) -> IrqReturn {
        let mut any = false;
        for q in self.queues.iter() {
            any |= q.process_completions();
        }
        if any {
            IrqReturn::Handled
        } else {
            IrqReturn::None
        }
    }
}

#[kunit_tests(rust_nvme_mq)]
mod tests {
    use super::*;

    #[test]
    fn order_home_first_then_round_robin() {
        let mut order = KVec::new();
        for q in queue_order(2, 4, true) {
            order.push(q, GFP_KERNEL).unwrap();
        }
        assert_eq!(&order[..], &[2, 3, 0, 1]);
    }

    #[test]
    fn order_without_overflow_is_home_only() {
        assert_eq!(queue_order(3, 4, false).count(), 1);
        assert_eq!(queue_order(3, 4, false).next(), Some(3));
    }

    #[test]
    fn reserve_is_a_quarter_rounded_up() {
        assert_eq!(lend_reserve(1), 1);
        assert_eq!(lend_reserve(3), 1);
        assert_eq!(lend_reserve(15), 4);
        assert_eq!(lend_reserve(16), 4);
        assert_eq!(lend_reserve(1023), 256);
    }

    #[test]
    fn own_cpus_take_any_free_slot() {
        assert!(may_take(1, 15, false));
        assert!(may_take(15, 15, false));
        assert!(!may_take(0, 15, false));
    }

    #[test]
    fn foreign_cpus_leave_the_reserve() {
        assert!(may_take(15, 15, true));
        assert!(may_take(5, 15, true));
        assert!(!may_take(4, 15, true));
        assert!(!may_take(0, 15, true));
        // A queue of one slot never lends it; one of three lends two.
        assert!(!may_take(1, 1, true));
        assert!(may_take(2, 3, true));
        assert!(!may_take(1, 3, true));
    }

    /// A greedy borrower against a queue whose own CPU keeps `own` requests in flight (taken
    /// first or after the borrower): how many slots are lent, and whether the own CPU got all
    /// its slots.
    fn borrow_all(slots: usize, own: usize, own_first: bool) -> (usize, bool) {
        let mut free = slots;
        let mut own_ok = true;
        let mut take_own = |free: &mut usize| {
            for _ in 0..own {
                if may_take(*free, slots, false) {
                    *free -= 1;
                } else {
                    own_ok = false;
                }
            }
        };
        if own_first {
            take_own(&mut free);
        }
        let mut lent = 0;
        while may_take(free, slots, true) {
            free -= 1;
            lent += 1;
        }
        if !own_first {
            take_own(&mut free);
        }
        (lent, own_ok)
    }

    #[test]
    fn lending_keeps_own_cpus_served() {
        // 15 slots, a shallow reader (4) on the lender: lent 7, or 11 while it is idle, and
        // the reader always gets its 4.
        assert_eq!(borrow_all(15, 4, true), (7, true));
        assert_eq!(borrow_all(15, 4, false), (11, true));
        // Three readers of 8 crowd one CPU, one reader of 8 on each other: each lender gives
        // 3, so the crowded CPU gets 15 + 3 * 3 = 24.
        assert_eq!(borrow_all(15, 8, true), (3, true));
        // An idle lender still keeps its reserve.
        assert_eq!(borrow_all(15, 0, true), (11, true));
    }

    #[test]
    fn vectors_shared_round_robin() {
        assert_eq!(queue_vector(0, 5), 1);
        assert_eq!(queue_vector(3, 5), 4);
        assert_eq!(queue_vector(3, 3), 2);
        assert_eq!(queue_vector(2, 1), 0);
    }
}
