// SPDX-License-Identifier: GPL-2.0

//! An I/O submission/completion queue pair: its rings, its command slots (which request holds
//! which command id, with its DMA mappings and list area), putting a command on the ring,
//! and reaping completions (from the interrupt handler, polling, a hotplug drain or a reset).
//! Which queue a request goes to is decided by the queue set (`queueset.rs`); what command a
//! request becomes, by `request.rs`.

use crate::{
    cmd::{self, Sqe},
    regs::{Doorbells, Regs},
    request::{self, NsAddr, NvmeOps, SlotDma},
    transfer::{SlotLists, Transfer},
};
use kernel::{
    block::mq::{CompletionBatch, DmaDevice, DmaMapping, Request},
    cpumask::Cpumask,
    device::{self, Bound},
    dma::Coherent,
    interrupt::LocalInterruptDisabled,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Atomic, Full, Relaxed},
        new_spinlock_irq, Arc, SpinLockIrq, SpinLockIrqGuard,
    },
    time::{delay::fsleep, Delta, Instant, Monotonic},
};

/// Completions handled per lock hold. Each reap sets up and drops an array of this many
/// entries, so a larger batch costs every interrupt (which finds ~1 completion at a queue
/// depth of a few per CPU) more than it saves under deep load: 16 cost 34 instructions per
/// I/O more than 4 (run-bench.sh --insn-profile).
const COMPLETION_BATCH: usize = 4;

/// Whose request a submission is, which decides how many of the queue's free slots it may
/// take (the queue set's lending rule, see `queueset::origin`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Origin {
    /// From one of the queue's own CPUs (it is their home queue): any free slot.
    Own,
    /// From a CPU whose home queue is another one (overflow): a slot only while more than
    /// `reserve` slots stay free, and only while the queue lends.
    Borrowed { reserve: usize },
}

impl Origin {
    /// Whether a request of this origin may take one of `free` free slots.
    pub(crate) fn admits(self, free: usize) -> bool {
        match self {
            Self::Own => free > 0,
            Self::Borrowed { reserve } => free > reserve,
        }
    }
}

/// How many queues of a set hold commands on their ring whose doorbell was not written yet
/// (submitted with `is_last` false: blk-mq has more requests for this dispatch). Whoever
/// submits the last request of a dispatch, or blk-mq's `commit_rqs`, rings them all; a queue
/// counts itself in and out under its lock, so the count is exact, and 0 (the unbatched case)
/// costs one load.
pub(crate) struct Unrung(Atomic<usize>);

impl Unrung {
    pub(crate) fn new() -> Self {
        Self(Atomic::new(0))
    }

    /// Whether some queue waits for its doorbell.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.0.load(Relaxed) != 0
    }
}

/// How a request is submitted: for which namespace, whether the controller gets it, and
/// whether its doorbell is written now.
#[derive(Clone, Copy)]
pub(crate) struct Submission<'a> {
    pub(crate) ns: NsAddr,
    /// A passthrough command (driver-private request) whose failure is logged: its
    /// namespace's `passthru_err_log_enabled` is on.
    pub(crate) log_failure: bool,
    pub(crate) delivery: Delivery,
    /// blk-mq has no more requests for this dispatch (`is_last`, C's `bd->last`): the doorbell
    /// is written. Otherwise the queue counts itself in `unrung` and waits.
    pub(crate) last: bool,
    pub(crate) unrung: &'a Unrung,
}

/// Whether the controller gets a submitted command.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Delivery {
    /// On the ring, doorbell rung.
    Give,
    /// Kept in its slot but never given to the controller, as if it lost it (fault injection,
    /// debugfs `lose_commands`).
    Lose,
}

/// Why a queue turned a submission away before it took a slot.
enum Refusal {
    /// The controller is being reset (or shut down).
    Stopped,
    /// No CPU of the queue's vector is online, or the queue does not lend now.
    Offline,
    /// No free slot this request may take.
    Full,
}

impl Refusal {
    /// The request comes back with the reason.
    fn give_back(self, rq: ARef<Request<NvmeOps>>) -> SubmitError {
        match self {
            // Retried by blk-mq a few milliseconds later (the reset requeues or fails it).
            Self::Stopped => SubmitError::Failed(rq, ENOMEM),
            Self::Offline => SubmitError::Offline(rq),
            Self::Full => SubmitError::Full(rq),
        }
    }
}

/// What one reap did.
#[derive(Default, Clone, Copy)]
struct Reaped {
    /// Requests ended.
    ended: usize,
    /// Whether any completion queue entry was consumed.
    consumed: bool,
}

/// The slot of a command, found by its request's address.
pub(crate) struct Found {
    pub(crate) cid: u16,
    /// An Abort had been sent for it before.
    pub(crate) aborted_before: bool,
}

/// How full a queue is.
pub(crate) struct Occupancy {
    /// Commands in flight.
    pub(crate) in_flight: usize,
    /// Slots held by requests of foreign CPUs, now and at most so far.
    pub(crate) lent: usize,
    pub(crate) lent_max: usize,
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
    /// Commands sent again after an error the controller lets be retried.
    pub(crate) retried: Atomic<u64>,
    /// Commands whose data was described by an SGL (the others: PRPs or none).
    pub(crate) sgl: Atomic<u64>,
    /// Commands put on the ring without a doorbell write because blk-mq had more requests
    /// for the same dispatch (`is_last` false): the doorbell of a later command, or of the
    /// dispatch's end, tells the controller of them. Counted only then, so the unbatched path
    /// pays nothing for it.
    pub(crate) unrung: Atomic<u64>,
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
            retried: Atomic::new(0),
            sgl: Atomic::new(0),
            unrung: Atomic::new(0),
        }
    }
}

/// How many times an I/O command that failed with a status that lets it be retried is sent
/// again (module parameter `max_retries`; C's default).
static MAX_RETRIES: Atomic<u32> = Atomic::new(5);

/// Set the number of retries of I/O commands (module load).
pub(crate) fn set_max_retries(n: u32) {
    MAX_RETRIES.store(n, Relaxed);
}

/// Fault injection for tests: the next `count` successful completions of the queue get
/// `status` instead (an NVMe status field, as C's `NVME_SC_*` with the DNR bit if wanted).
pub(crate) struct Inject {
    status: Atomic<u32>,
    count: Atomic<u32>,
}

impl Inject {
    fn new() -> Self {
        Self {
            status: Atomic::new(0),
            count: Atomic::new(0),
        }
    }

    /// Give the next `count` successful completions `status`.
    pub(crate) fn set(&self, status: u16, count: u32) {
        self.count.store(0, Relaxed);
        self.status.store(status.into(), Relaxed);
        self.count.store(count, Relaxed);
    }

    /// The completions still to be given another status, and that status.
    pub(crate) fn get(&self) -> (u32, u32) {
        (self.count.load(Relaxed), self.status.load(Relaxed))
    }

    /// `cqe`, with the injected status if one is due and `cqe` succeeded.
    fn apply(&self, cqe: cmd::CqEntry) -> cmd::CqEntry {
        let mut count = self.count.load(Relaxed);
        while count > 0 && cqe.done.status & cmd::STATUS_SCT_SC_MASK == cmd::SC_SUCCESS {
            match self.count.cmpxchg(count, count - 1, Relaxed) {
                Ok(_) => {
                    let status = self.status.load(Relaxed) as u16;
                    let done = cmd::Completion { status, ..cqe.done };
                    return cmd::CqEntry { done, ..cqe };
                }
                Err(now) => count = now,
            }
        }
        cqe
    }
}

/// Error lines a queue prints at most per interval (as C's default `printk_ratelimit`).
const ERROR_LINES_BURST: u32 = 10;
const ERROR_LINES_INTERVAL: Delta = Delta::from_secs(5);

/// A limit on how many lines something prints per interval.
struct RateLimit {
    epoch: Instant<Monotonic>,
    /// Start of the current interval, in nanoseconds since `epoch` (0: none yet).
    start_ns: Atomic<i64>,
    printed: Atomic<u32>,
}

impl RateLimit {
    fn new() -> Self {
        Self {
            epoch: Instant::now(),
            start_ns: Atomic::new(0),
            printed: Atomic::new(0),
        }
    }

    /// Whether one more line may be printed now. Racing callers may together print a line or
    /// two more than the burst.
    fn allow(&self) -> bool {
        let now = self.epoch.elapsed().as_nanos().max(1);
        let start = self.start_ns.load(Relaxed);
        if start == 0 || now - start > ERROR_LINES_INTERVAL.as_nanos() {
            self.start_ns.store(now, Relaxed);
            self.printed.store(0, Relaxed);
        }
        self.printed.fetch_add(1, Relaxed) < ERROR_LINES_BURST
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
    /// The command as it was sent, to send it again after an error that may be retried.
    sqe: Sqe,
    /// How many times it was sent again.
    retries: u32,
    /// A failure of the command is logged (see [`Submission::log_failure`]).
    log_failure: bool,
}

impl Slot {
    /// A free slot, with room for the mappings of a request of `max_segments` segments.
    fn new(dev: &device::Device<Bound>, max_segments: usize) -> Result<Self> {
        Ok(Self {
            rq: None,
            maps: DmaMapping::new(dev, max_segments)?,
            aborted: false,
            lent: false,
            sqe: Sqe::default(),
            retries: 0,
            log_failure: false,
        })
    }

    /// Undo the data mapping and forget an Abort: the slot's command is gone.
    fn clear(&mut self) {
        self.maps.unmap();
        self.aborted = false;
    }

    /// Hold `rq`, sent as the command built into `sqe` (kept to send it again after an
    /// error that may be retried).
    fn hold(&mut self, rq: ARef<Request<NvmeOps>>) {
        self.rq = Some(rq);
        self.retries = 0;
    }

    /// Whether the slot holds the request at `rq` (compared by address only).
    fn holds(&self, rq: *const Request<NvmeOps>) -> bool {
        self.rq.as_ref().is_some_and(|r| core::ptr::eq(&**r, rq))
    }
}

/// The mutable state of an I/O queue pair.
struct QueueState {
    sq_tail: u16,
    /// Commands up to `sq_tail` are on the ring, but the doorbell was not written for them
    /// (counted in the set's [`Unrung`]).
    unrung: bool,
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
    /// data mappings are for `dev`, with room for `max_segments` segments.
    fn new(dev: &device::Device<Bound>, depth: u16, max_segments: usize) -> Result<Self> {
        let n = usize::from(depth);
        let mut free = KVec::with_capacity(n - 1, GFP_KERNEL)?;
        // Pop order: low command ids first.
        for cid in (0..depth - 1).rev() {
            free.push(cid, GFP_KERNEL)?;
        }
        let mut slots = KVec::with_capacity(n - 1, GFP_KERNEL)?;
        for _ in 0..n - 1 {
            slots.push(Slot::new(dev, max_segments)?, GFP_KERNEL)?;
        }
        Ok(Self {
            sq_tail: 0,
            unrung: false,
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
        let _ = self.free.push_within_capacity(cid);
    }

    /// Take the request out of slot `cid` and give the slot back.
    #[inline]
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

    /// The command of slot `cid`, counted as retried, if it completed with `status` and is to
    /// be sent again: the status lets it be retried, the queue is not being reset, the command
    /// was neither a passthrough command (its caller decides) nor aborted for a timeout, and
    /// it was retried fewer than `max_retries` times (C's `nvme_decide_disposition`).
    fn retry(&mut self, cid: u16, status: u16) -> Option<Sqe> {
        if !cmd::status_is_retryable(status) || !self.accepting {
            return None;
        }
        let slot = self.slots.get_mut(usize::from(cid))?;
        let rq = slot.rq.as_ref()?;
        if slot.aborted || rq.is_driver_private() || slot.retries >= MAX_RETRIES.load(Relaxed) {
            return None;
        }
        slot.retries += 1;
        Some(slot.sqe)
    }

    /// Advance the submission queue tail of a queue of `depth` entries.
    fn advance_sq(&mut self, depth: u16) {
        self.sq_tail += 1;
        if self.sq_tail == depth {
            self.sq_tail = 0;
        }
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

/// A queue with its lock held, for submissions in a row ([`IoQueue::hold`]). Nothing that takes
/// the lock again (a reap, another queue's overflow search, `ring_unrung`) may run while it
/// exists: drop it first.
pub(crate) struct HeldQueue<'a> {
    queue: &'a IoQueue,
    st: SpinLockIrqGuard<'a, QueueState>,
}

impl HeldQueue<'_> {
    /// [`IoQueue::submit`] under the held lock.
    #[inline]
    pub(crate) fn submit(
        &mut self,
        rq: ARef<Request<NvmeOps>>,
        origin: Origin,
        cpus: Option<&Cpumask>,
        how: Submission<'_>,
    ) -> Result<(), SubmitError> {
        self.queue
            .submit_locked(&mut self.st, rq, origin, cpus, how)
    }

    /// Write the doorbell if commands wait for it (counted in `unrung`).
    pub(crate) fn ring_unrung(&mut self, unrung: &Unrung) {
        if self.st.unrung {
            self.queue.ring(&mut self.st, unrung);
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
    /// The index of the controller (`rnvme<index>`), for the log.
    ctrl_index: u32,
    pub(crate) qid: u16,
    pub(crate) depth: u16,
    regs: Arc<Regs>,
    /// The queue pair's doorbells in `regs`.
    doorbells: Doorbells,
    dev: DmaDevice,
    sq: Coherent<[u8]>,
    cq: Coherent<[cmd::CqeDwords]>,
    /// The list area of each slot.
    lists: SlotLists,
    /// How the controller takes data.
    transfer: Transfer,
    #[pin]
    state: SpinLockIrq<QueueState>,
    pub(crate) stats: QueueStats,
    /// Fault injection: completions to be given another status (debugfs, tests only).
    pub(crate) inject: Inject,
    error_lines: RateLimit,
    /// How many requests `state.deferred` holds, readable without the lock: every reap
    /// checks it, and it is almost always 0.
    deferred: Atomic<usize>,
}

impl IoQueue {
    pub(crate) fn new(
        dev: &device::Device<Bound>,
        regs: Arc<Regs>,
        ctrl_index: u32,
        qid: u16,
        depth: u16,
        transfer: Transfer,
    ) -> Result<Arc<Self>> {
        let n = usize::from(depth);
        let state = QueueState::new(dev, depth, transfer.max_segments())?;
        let sq = Coherent::<u8>::zeroed_slice(dev, n * size_of::<Sqe>(), GFP_KERNEL)?;
        let cq = Coherent::<cmd::CqeDwords>::zeroed_slice(dev, n, GFP_KERNEL)?;
        let lists = SlotLists::new(dev, n - 1)?;
        let dev = DmaDevice::new(dev)?;
        let doorbells = regs.doorbells(qid);
        Arc::pin_init(
            try_pin_init!(Self {
                ctrl_index,
                qid,
                depth,
                regs,
                doorbells,
                dev,
                sq,
                cq,
                lists,
                transfer,
                state <- new_spinlock_irq!(state),
                stats: QueueStats::new(),
                inject: Inject::new(),
                error_lines: RateLimit::new(),
                deferred: Atomic::new(0),
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

    /// Whether the queue may be used: its interrupt vector has an online CPU. `cpus`: the
    /// CPUs of the vector, if it has managed affinity.
    fn online(&self, cpus: Option<&Cpumask>) -> bool {
        cpus.is_none_or(|cpus| cpus.intersects(Cpumask::online()))
    }

    /// A free slot for a request of `origin`, taken off the free list, or why there is none
    /// (counted).
    fn claim(
        &self,
        st: &mut QueueState,
        origin: Origin,
        cpus: Option<&Cpumask>,
    ) -> Result<u16, Refusal> {
        if !st.accepting {
            return Err(Refusal::Stopped);
        }
        let borrowed = origin != Origin::Own;
        // The interrupt core shuts a managed vector down when the last CPU of its mask goes
        // offline. Checked with the lock held, so with interrupts off on this CPU: a CPU
        // cannot leave the online mask (that happens in stop_machine) until the command is
        // on the queue, where a later reap finds it (see `NvmeOps::queue_rq` and `timeout`).
        if !self.online(cpus) || (borrowed && !st.lending) {
            self.stats.offline.add(1, Relaxed);
            return Err(Refusal::Offline);
        }
        if !origin.admits(st.free.len()) {
            let counter = if borrowed {
                &self.stats.refused
            } else {
                &self.stats.full
            };
            counter.add(1, Relaxed);
            return Err(Refusal::Full);
        }
        st.free.pop().ok_or(Refusal::Full)
    }

    /// Submit `rq` (as `how` says) to this queue if a request of `origin` may have one of its
    /// free slots. `cpus`: the CPUs of the queue's interrupt vector, if it has managed
    /// affinity; the queue is only used while one of them is online.
    #[inline]
    pub(crate) fn submit(
        &self,
        rq: ARef<Request<NvmeOps>>,
        origin: Origin,
        cpus: Option<&Cpumask>,
        how: Submission<'_>,
    ) -> Result<(), SubmitError> {
        self.hold().submit(rq, origin, cpus, how)
    }

    /// Take the queue's lock for a run of submissions (the requests of a `queue_rqs` batch
    /// that go to this queue in a row), as C's `nvme_submit_cmds` takes its SQ lock once.
    #[inline]
    pub(crate) fn hold(&self) -> HeldQueue<'_> {
        HeldQueue {
            queue: self,
            st: self.state.lock(),
        }
    }

    /// [`IoQueue::submit`] with the lock held. Always inlined, into `submit` and the batch's
    /// `HeldQueue::submit`: out of line it cost the unbatched submission a call.
    #[inline(always)]
    fn submit_locked(
        &self,
        st: &mut QueueState,
        rq: ARef<Request<NvmeOps>>,
        origin: Origin,
        cpus: Option<&Cpumask>,
        how: Submission<'_>,
    ) -> Result<(), SubmitError> {
        let cid = match self.claim(st, origin, cpus) {
            Ok(cid) => cid,
            Err(refusal) => return Err(refusal.give_back(rq)),
        };
        let borrowed = origin != Origin::Own;
        // The slot is looked up once for the whole submission.
        let Some(slot) = st.slots.get_mut(usize::from(cid)) else {
            return Err(SubmitError::Failed(rq, EIO));
        };
        if let Err((rq, e)) = self.prepare(slot, cid, &how, rq) {
            // Undoes a mapping made before the failure: the mapping's reference to the
            // request goes, so `queue_rq` can hand it back to the block layer.
            st.release(cid);
            return Err(SubmitError::Failed(rq, e));
        }
        slot.lent = borrowed;
        let give = how.delivery == Delivery::Give;
        if give {
            // The command as the slot keeps it (for a retry): built there, copied once, to
            // the ring. Cannot fail: `sq_tail` < `depth`, the queue's size.
            let _ = cmd::write_sqe(&self.sq, st.sq_tail, &slot.sqe);
        }
        if borrowed {
            st.lent += 1;
            st.lent_max = st.lent_max.max(st.lent);
        }
        self.stats.submitted.add(1, Relaxed);
        if !give {
            pr_warn!(
                "queue {}: losing command {} (fault injection)\n",
                self.qid,
                cid
            );
            return Ok(());
        }
        self.publish(st, &how);
        Ok(())
    }

    /// Move the tail past the command just written there, and write the doorbell if `how`
    /// ends a batch; otherwise the queue waits for it, counted in `how.unrung`.
    #[inline(always)]
    fn publish(&self, st: &mut QueueState, how: &Submission<'_>) {
        st.advance_sq(self.depth);
        if how.last {
            self.ring(st, how.unrung);
        } else {
            self.stats.unrung.add(1, Relaxed);
            if !st.unrung {
                st.unrung = true;
                how.unrung.0.add(1, Relaxed);
            }
        }
    }

    /// Write the doorbell if commands wait for it (counted in `unrung`).
    pub(crate) fn ring_unrung(&self, unrung: &Unrung) {
        self.hold().ring_unrung(unrung);
    }

    /// Build the command of `rq` (for the namespace of `how`) into `slot`, of id `cid`,
    /// claimed by [`IoQueue::submit`], and hold the request there. On failure the request is
    /// handed back, and the caller gives the slot back (undoing a mapping made meanwhile).
    #[inline(always)]
    fn prepare(
        &self,
        slot: &mut Slot,
        cid: u16,
        how: &Submission<'_>,
        rq: ARef<Request<NvmeOps>>,
    ) -> Result<(), (ARef<Request<NvmeOps>>, Error)> {
        let dma = SlotDma {
            dev: &self.dev,
            maps: &mut slot.maps,
            lists: &self.lists,
            cid,
            transfer: &self.transfer,
        };
        if let Err(e) = request::command(how.ns, &rq, dma, &mut slot.sqe) {
            return Err((rq, e));
        }
        slot.sqe.set_cid(cid);
        slot.log_failure = how.log_failure;
        if slot.sqe.uses_sgl() {
            self.stats.sgl.add(1, Relaxed);
        }
        slot.hold(rq);
        Ok(())
    }

    /// Put `sqe` at the tail of the submission queue and ring the doorbell (a retry: the
    /// queue's `unrung` mark, if any, stays for its owner to clear).
    fn push(&self, st: &mut QueueState, sqe: Sqe) {
        self.write(st, sqe);
        self.regs.ring(self.doorbells.sq, st.sq_tail);
    }

    /// Put `sqe` at the tail of the submission queue, without telling the controller.
    #[inline]
    fn write(&self, st: &mut QueueState, sqe: Sqe) {
        // Cannot fail: `sq_tail` < `depth`, the queue's size.
        let _ = cmd::write_sqe(&self.sq, st.sq_tail, &sqe);
        st.advance_sq(self.depth);
    }

    /// Tell the controller of every command up to the tail, and count the queue out of
    /// `unrung` if it was in.
    #[inline]
    fn ring(&self, st: &mut QueueState, unrung: &Unrung) {
        self.regs.ring(self.doorbells.sq, st.sq_tail);
        if st.unrung {
            st.unrung = false;
            unrung.0.fetch_sub(1, Relaxed);
        }
    }

    /// Take up to `COMPLETION_BATCH` completions off the completion queue into `done`, with
    /// the lock held.
    fn reap_batch(&self, done: &mut [Done; COMPLETION_BATCH]) -> Reaped {
        // In the interrupt handler interrupts are off already, so the lock need not turn them
        // off and back on: 15 instructions per I/O less (run-bench.sh --insn-profile).
        LocalInterruptDisabled::with_current(|irqs_off| match irqs_off {
            Some(token) => self.reap_locked(&mut self.state.lock_with(token), done),
            None => self.reap_locked(&mut self.state.lock(), done),
        })
    }

    /// [`IoQueue::reap_batch`] with the lock held. Inlined into both arms: called, it costs
    /// more than the lock saves.
    #[inline(always)]
    fn reap_locked(&self, st: &mut QueueState, done: &mut [Done; COMPLETION_BATCH]) -> Reaped {
        let mut reaped = Reaped::default();
        while reaped.ended < COMPLETION_BATCH {
            let Ok(Some(cqe)) = cmd::read_cqe(&self.cq, st.cq_head, st.phase) else {
                break;
            };
            reaped.consumed = true;
            st.advance_cq(self.depth);
            let cqe = self.inject.apply(cqe);
            if !st.accepting && aborted_by_sq_deletion(cqe.done.status) {
                // The queues are being deleted before the controller is disabled: the request
                // stays in its slot and is requeued (reset) or failed (shutdown) from there.
                continue;
            }
            if let Some(sqe) = st.retry(cqe.cid, cqe.done.status) {
                self.stats.retried.add(1, Relaxed);
                self.push(st, sqe);
                continue;
            }
            if let (Some(rq), Some(entry)) = (st.take(cqe.cid), done.get_mut(reaped.ended)) {
                let status = request::end_status(&rq, &cqe.done);
                // The slot keeps the command and its retry count after `take` (until the next
                // submission into it, which this lock holds off).
                if status.is_err() || cqe.done.status != 0 {
                    self.log_failure(st, &rq, cqe.cid, cqe.done.status, status);
                }
                *entry = Some((rq, status));
                reaped.ended += 1;
            }
        }
        if reaped.consumed {
            self.regs.ring(self.doorbells.cq, st.cq_head);
        }
        reaped
    }

    /// Log the failure of the command in slot `cid`, of request `rq`, which completed with
    /// `status` and ends with `ended`: a block request's (rate limited), or a passthrough
    /// command's if its namespace logs them (`passthru_err_log_enabled`, as C's
    /// `nvme_log_err_passthru()`: whichever way it came, ioctl or io_uring).
    fn log_failure(
        &self,
        st: &QueueState,
        rq: &Request<NvmeOps>,
        cid: u16,
        status: u16,
        ended: Result,
    ) {
        let Some(slot) = st.slots.get(usize::from(cid)) else {
            return;
        };
        match (ended, rq.is_driver_private()) {
            (Err(e), false) => self.log_error(&slot.sqe, status, slot.retries, e),
            (_, true) if slot.log_failure && status != 0 => {
                let name = fmt!("rnvme{}n{}", self.ctrl_index, slot.sqe.nsid());
                cmd::log_failed_passthrough(name, "I/O", &slot.sqe, status);
            }
            _ => {}
        }
    }

    /// Say which command failed and how (C's `nvme_log_error`), at most `ERROR_LINES_BURST`
    /// lines per `ERROR_LINES_INTERVAL` and queue.
    fn log_error(&self, sqe: &Sqe, status: u16, retries: u32, e: Error) {
        if !self.error_lines.allow() {
            return;
        }
        pr_err!(
            "queue {}: {} failed: {}, error {}, {} retries\n",
            self.qid,
            sqe.describe(),
            cmd::StatusText(status),
            e.to_errno(),
            retries
        );
    }

    /// Reap the completion queue; returns whether there was anything.
    pub(crate) fn process_completions(&self) -> bool {
        self.reap().consumed
    }

    /// Reap the completion queue of a poll queue (no interrupt); returns how many requests
    /// were ended.
    pub(crate) fn poll(&self) -> usize {
        let ended = self.reap().ended;
        self.stats.polled.add(ended as u64, Relaxed);
        ended
    }

    /// Reap the completion queue and end what completed: the requests that succeeded together,
    /// when the reap is done (C's `io_comp_batch`), the others one by one.
    fn reap(&self) -> Reaped {
        self.finish_deferred();
        CompletionBatch::run(|ended_together| {
            let mut total = Reaped::default();
            loop {
                let mut done: [Done; COMPLETION_BATCH] = [const { None }; COMPLETION_BATCH];
                let batch = self.reap_batch(&mut done);
                total.consumed |= batch.consumed;
                total.ended += batch.ended;
                // Entries past `ended` were never filled.
                for (rq, status) in done.iter_mut().take(batch.ended).filter_map(Option::take) {
                    self.stats.completed.add(1, Relaxed);
                    // The slot held the only reference, so ending fails only while a timeout
                    // handler holds one too, for an instant (see `NvmeOps::timeout`).
                    let ended = match status {
                        Ok(()) => Request::end_ok_batched(rq, ended_together),
                        Err(_) => Request::end(rq, status),
                    };
                    if let Err(rq) = ended {
                        self.defer(rq, Deferred::End(status));
                    }
                }
                if batch.ended < COMPLETION_BATCH {
                    return total;
                }
            }
        })
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

    /// Stop taking submissions (a reset, removal or shutdown): they fail with `ENOMEM`, and
    /// completions of commands aborted by the deletion of the queues stay in their slots.
    pub(crate) fn stop_accepting(&self) {
        self.state.lock().accepting = false;
    }

    /// Take submissions again, after a reset.
    pub(crate) fn accept(&self) {
        self.state.lock().accepting = true;
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
        self.push_deferred(rq, what);
        // The timeout handler may have let it go meanwhile, before it looked at the list.
        // Otherwise the next reap of this queue (or the request's next timeout) finishes it.
        self.finish_deferred();
    }

    /// End or requeue the deferred requests whose timeout handler let them go. Called by every
    /// reap, and by the timeout handler after it dropped its reference. The test is inlined
    /// (every reap makes it); the list is worked off out of line.
    #[inline]
    pub(crate) fn finish_deferred(&self) {
        // Read with a fully ordered operation, as `push_deferred` counts: a timeout handler
        // drops its reference, then calls this. If it reads 0, the CPU that defers the
        // request counts it later, and then (ordered after that count) retries the end
        // itself, which sees the dropped reference.
        if self.deferred.fetch_add(0, Full) != 0 {
            self.finish_each_deferred();
        }
    }

    /// [`IoQueue::finish_deferred`] when requests are deferred.
    #[inline(never)]
    fn finish_each_deferred(&self) {
        loop {
            let Some((rq, what)) = self.take_deferred() else {
                return;
            };
            let back = match what {
                Deferred::End(status) => Request::end(rq, status),
                Deferred::Requeue => Request::requeue(rq, true),
            };
            if let Err(rq) = back {
                // Still held: the timeout handler that holds it calls this again.
                self.push_deferred(rq, what);
                return;
            }
        }
    }

    /// Keep `rq` on the deferred list, counted (see [`IoQueue::finish_deferred`]).
    fn push_deferred(&self, rq: ARef<Request<NvmeOps>>, what: Deferred) {
        let mut st = self.state.lock();
        // Cannot fail: there is room for every slot.
        if st.deferred.push_within_capacity((rq, what)).is_ok() {
            self.deferred.fetch_add(1, Full);
        }
    }

    /// One deferred request, taken off the list.
    fn take_deferred(&self) -> Option<(ARef<Request<NvmeOps>>, Deferred)> {
        let mut st = self.state.lock();
        let entry = st.deferred.pop()?;
        self.deferred.fetch_sub(1, Relaxed);
        Some(entry)
    }

    /// The slot of the request at `rq` if it is on this queue (compared by address only).
    pub(crate) fn find(&self, rq: *const Request<NvmeOps>) -> Option<Found> {
        self.find_and(rq, |_| {})
    }

    /// The slot of the request at `rq` if it is on this queue, noted as aborted (an Abort is
    /// being sent for its command).
    pub(crate) fn mark_aborted(&self, rq: *const Request<NvmeOps>) -> Option<Found> {
        self.find_and(rq, |slot| slot.aborted = true)
    }

    /// The slot of the request at `rq`, as it was before `f` changed it.
    fn find_and(&self, rq: *const Request<NvmeOps>, f: impl FnOnce(&mut Slot)) -> Option<Found> {
        let mut st = self.state.lock();
        let (cid, slot) = st.slots.iter_mut().enumerate().find(|(_, s)| s.holds(rq))?;
        let aborted_before = slot.aborted;
        f(slot);
        Some(Found {
            cid: u16::try_from(cid).ok()?,
            aborted_before,
        })
    }

    /// How full the queue is.
    pub(crate) fn occupancy(&self) -> Occupancy {
        let st = self.state.lock();
        Occupancy {
            in_flight: self.slots() - st.free.len(),
            lent: st.lent,
            lent_max: st.lent_max,
        }
    }
}

/// Whether a completion's status field says "Command Aborted due to SQ Deletion" (generic
/// command status 0x08): the command did not run, and may be issued again.
fn aborted_by_sq_deletion(status: u16) -> bool {
    status & 0x7ff == 0x08
}
