// SPDX-License-Identifier: GPL-2.0

//! The I/O queues of a controller as one set: which queue each CPU submits to (the
//! CPU-to-queue map, from the affinity of the interrupt vectors), which queues a request may
//! use (interrupt-driven or poll queues) and in which order, how many slots a queue lends to
//! other CPUs (overflow), the interrupt handlers, and what concerns all queues at once
//! (creating and deleting them on the controller, a reset, the counters).
//!
//! The data path runs one way: `ns.rs` (blk-mq `queue_rq`) → [`QueueSet::submit`] (which
//! queue) → [`IoQueue::submit`] (which slot; the ring) → `request.rs` (which command).

use crate::{
    admin::{AdminQueue, AdminWork},
    queue::{
        Delivery, Found, HeldQueue, IoQueue, Occupancy, Origin, Submission, SubmitError, Unrung,
    },
    regs::Regs,
    request::{NsAddr, NvmeOps},
};
use kernel::{
    block::mq::{QueueError, Request, RequestList},
    cpu::CpuId,
    cpumask::{Cpumask, CpumaskVar},
    irq::{self, IrqReturn},
    pci,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Atomic, Relaxed},
        Arc,
    },
};

// The policy's pure functions, shared with the host model (`tools/overflow-model`).
#[path = "policy.rs"]
mod policy;

use policy::{lend_reserve, lenders, queue_order};

/// The lending rule, for a request tried on queue `qi` (of `slots` slots) whose home queue is
/// `home`. A request of one of the queue's own CPUs may take any free slot; a request of a
/// foreign CPU (overflowing from its full home queue) only while more than [`lend_reserve`]
/// slots are free, so lending never leaves fewer than the reserve free.
///
/// A CPU that keeps at most the reserve in flight on its queue therefore never finds it full,
/// however much other CPUs borrow, while a CPU with more load than its queue holds still gets
/// every slot the others do not need beyond their reserve.
fn origin(qi: usize, home: usize, slots: usize) -> Origin {
    if qi == home {
        Origin::Own
    } else {
        Origin::Borrowed {
            reserve: lend_reserve(slots),
        }
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

/// Which queue each CPU submits to, and which CPUs each queue's interrupt goes to.
struct QueueMap {
    /// The home queue of each CPU: the one whose interrupt is delivered to that CPU.
    home: KVec<u16>,
    /// The CPUs of each queue's interrupt vector (managed affinity), by queue index; `None`
    /// when the queues share vector 0, which is not managed.
    vector_cpus: KVec<Option<CpumaskVar>>,
}

impl QueueMap {
    /// Each CPU's home queue is the queue whose vector is affine to the CPU (the vectors are
    /// spread over the CPUs), or round robin where the affinity says nothing.
    fn new(irqs: &pci::IrqHandlers<CqIrq>, nr_queues: usize) -> Result<Self> {
        let nr_vectors = irqs.len();
        let affinity = |i| {
            irqs.affinity(queue_vector(i, nr_vectors))
                .filter(|_| nr_vectors > 1)
        };
        let nr_cpus = kernel::cpu::nr_cpu_ids();
        let mut home = KVec::with_capacity(nr_cpus as usize, GFP_KERNEL)?;
        for cpu in 0..nr_cpus {
            let own = CpuId::from_u32(cpu).and_then(|id| {
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

/// The queues a request may use, `first..first + count`, and its home queue among them.
#[derive(Clone, Copy)]
struct Choice {
    first: usize,
    count: usize,
    home: usize,
}

/// Where a request's command is, found by the request's address.
pub(crate) struct Located<'a> {
    pub(crate) queue: &'a IoQueue,
    pub(crate) cid: u16,
    /// An Abort had been sent for it before.
    pub(crate) aborted_before: bool,
}

/// The I/O queues of a controller: the interrupt-driven ones, then the poll queues.
pub(crate) struct QueueSet {
    queues: KVec<Arc<IoQueue>>,
    /// How many of `queues` (the last ones) are poll queues.
    nr_poll: usize,
    /// How many of `queues` (the first ones) are interrupt-driven: `queues.len() - nr_poll`,
    /// kept so that a submission does not compute it (with its overflow check) again.
    nr_irq: usize,
    /// Whether a request may go to another queue when its home queue is full.
    overflow: bool,
    /// Overflow tries every queue in turn (the linear scan, `overflow_scan`, for comparison)
    /// instead of the bounded search.
    scan: bool,
    map: QueueMap,
    /// MSI-X vectors granted (vector 0 is the admin queue's).
    nr_vectors: usize,
    /// Queue pairs asked for at probe: asked for again by a reset.
    want: u32,
    /// Queues whose doorbell waits for the end of a dispatch.
    unrung: Unrung,
    /// Requests taken in batches (`Operations::queue_rqs`), counted once per batch.
    pub(crate) batched: BatchCounts,
}

/// How many requests blk-mq handed over in batches (`Operations::queue_rqs`), and how many of
/// them no queue took (requeued, or ended with an error). Shown in debugfs.
pub(crate) struct BatchCounts {
    pub(crate) requests: Atomic<u64>,
    pub(crate) refused: Atomic<u64>,
}

impl BatchCounts {
    fn new() -> Self {
        Self {
            requests: Atomic::new(0),
            refused: Atomic::new(0),
        }
    }

    /// Count a batch of `requests`, `refused` of them not taken.
    pub(crate) fn count(&self, requests: u64, refused: u64) {
        self.requests.add(requests, Relaxed);
        if refused > 0 {
            self.refused.add(refused, Relaxed);
        }
    }
}

impl QueueSet {
    /// The set of `queues`, the last `nr_poll` of them poll queues, the others reaped by the
    /// handlers of `irqs`; `want`: how many queue pairs were asked for; with `overflow`, a
    /// request may go to another queue, chosen by the bounded search, or with `scan` by trying
    /// every queue in turn.
    pub(crate) fn new(
        queues: KVec<Arc<IoQueue>>,
        nr_poll: usize,
        irqs: &pci::IrqHandlers<CqIrq>,
        want: u32,
        overflow: bool,
        scan: bool,
    ) -> Result<Self> {
        let nr_irq = queues.len().checked_sub(nr_poll).ok_or(EINVAL)?;
        let map = QueueMap::new(irqs, nr_irq)?;
        Ok(Self {
            nr_vectors: irqs.len(),
            queues,
            nr_poll,
            nr_irq,
            overflow,
            scan,
            map,
            want,
            unrung: Unrung::new(),
            batched: BatchCounts::new(),
        })
    }

    /// How many I/O queues there are.
    pub(crate) fn len(&self) -> usize {
        self.queues.len()
    }

    /// How many queues are interrupt-driven: the first ones.
    pub(crate) fn nr_irq(&self) -> usize {
        self.nr_irq
    }

    pub(crate) fn nr_poll(&self) -> usize {
        self.nr_poll
    }

    pub(crate) fn nr_vectors(&self) -> usize {
        self.nr_vectors
    }

    pub(crate) fn overflow(&self) -> bool {
        self.overflow
    }

    /// Entries per queue.
    pub(crate) fn depth(&self) -> u16 {
        self.queues.first().map_or(0, |q| q.depth)
    }

    /// Command slots of all queues together: what the controller can hold.
    pub(crate) fn total_slots(&self) -> usize {
        self.queues.iter().map(|q| q.slots()).sum()
    }

    /// The home queue of the current CPU.
    fn home_queue(&self) -> usize {
        let cpu = CpuId::current().as_u32() as usize;
        // `map_or_else`: the fallback (a division) only for a CPU the map does not know.
        self.map
            .home
            .get(cpu)
            .map_or_else(|| cpu % self.nr_irq().max(1), |&q| usize::from(q))
    }

    /// The CPUs of the interrupt vector of queue `qi`, if it has managed affinity.
    fn cpus(&self, qi: usize) -> Option<&Cpumask> {
        self.map.vector_cpus.get(qi).and_then(|c| c.as_deref())
    }

    /// The poll queue (0-based among the poll queues) of poll context `hw_queue`: the tag set
    /// has one default context per CPU, then one poll context per poll queue.
    fn poll_home(&self, hw_queue: u32) -> Option<usize> {
        let i = hw_queue.checked_sub(kernel::cpu::nr_cpu_ids())?;
        Some(i as usize).filter(|&i| i < self.nr_poll)
    }

    /// The queues `rq` may use: the poll queues for a polled request (whose completion raises
    /// no interrupt and is found by `poll` for its context), the interrupt-driven queues for
    /// any other. Requests never overflow from one kind to the other. Always inlined: the
    /// unbatched submission would otherwise pay a call for it (32 instructions per I/O).
    #[inline(always)]
    fn choice(&self, rq: &Request<NvmeOps>) -> Choice {
        let nr_irq = self.nr_irq();
        match self.poll_home(rq.hw_queue()).filter(|_| rq.is_polled()) {
            Some(p) => Choice {
                first: nr_irq,
                count: self.nr_poll,
                home: nr_irq + p,
            },
            None => Choice {
                first: 0,
                count: nr_irq,
                home: self.home_queue(),
            },
        }
    }

    /// How many slots queue `qi` would lend, by its counters read without its lock
    /// ([`policy::spare`]). None while its vector has no online CPU: it refuses borrowers then
    /// (`IoQueue::submit`), while its counters look idle.
    fn spare(&self, qi: usize) -> usize {
        let Some(q) = self.queues.get(qi) else {
            return 0;
        };
        if !self
            .cpus(qi)
            .is_none_or(|c| c.intersects(Cpumask::online()))
        {
            return 0;
        }
        let (submitted, completed) = (&q.stats.submitted, &q.stats.completed);
        policy::spare(q.slots(), submitted.load(Relaxed), completed.load(Relaxed))
    }

    /// Submit `rq` for namespace `ns`: to its home queue, or with `overflow`, when that is
    /// full, to one of at most [`policy::TRIES`] other queues that lends it a slot, chosen by
    /// the bounded search ([`policy::lenders`]): of at most [`policy::PEEKS`] queues, those
    /// whose counters, read without their locks, say they have most slots to spare (with
    /// `overflow_scan`, to the first other queue in turn that lends it one). `ENOMEM` (blk-mq
    /// retries later) when no queue tried takes it.
    ///
    /// `last`: blk-mq has no more requests for this dispatch (`is_last`). Before that the
    /// doorbells wait; with it, or when the request is not taken, every queue with a waiting
    /// doorbell is rung.
    #[inline]
    pub(crate) fn submit(
        &self,
        ns: NsAddr,
        rq: ARef<Request<NvmeOps>>,
        log_failure: bool,
        delivery: Delivery,
        last: bool,
    ) -> Result<(), QueueError<NvmeOps>> {
        let how = Submission {
            ns,
            log_failure,
            delivery,
            last,
            unrung: &self.unrung,
        };
        let outcome = self.place(rq, how);
        if last || outcome.is_err() {
            self.ring_unrung();
        }
        outcome
    }

    /// Write the doorbell of every queue with commands waiting for it (blk-mq's
    /// `commit_rqs`: the dispatch ended before a request with `is_last`).
    #[inline]
    pub(crate) fn ring_unrung(&self) {
        if self.unrung.any() {
            self.ring_each_unrung();
        }
    }

    /// [`QueueSet::ring_unrung`] when some queue waits: out of line, off the unbatched path.
    #[inline(never)]
    fn ring_each_unrung(&self) {
        for q in self.queues.iter() {
            q.ring_unrung(&self.unrung);
        }
    }

    /// [`QueueSet::submit`] but for the doorbells of other queues.
    fn place(
        &self,
        rq: ARef<Request<NvmeOps>>,
        how: Submission<'_>,
    ) -> Result<(), QueueError<NvmeOps>> {
        let choice = self.choice(&rq);
        // The home queue first, without building the search: the common case, on the hot path.
        let rq = match self.try_queue(rq, choice.home, choice.home, how) {
            Ok(outcome) => return outcome,
            Err(back) => back,
        };
        self.place_elsewhere(rq, choice, how)
    }

    /// Submit the requests of a `queue_rqs` batch for namespace `ns`, each as
    /// [`QueueSet::submit`] would (`each` gives its failure logging and delivery), but a home
    /// queue's lock is kept for the next request when that has the same home (as C's
    /// `nvme_submit_cmds` takes its SQ lock once per batch), and the doorbells are written
    /// after the last request. Returns how many requests there were and how many no queue took
    /// (refused: requeued, or failed).
    pub(crate) fn submit_batch(
        &self,
        list: &mut RequestList<'_, NvmeOps>,
        ns: NsAddr,
        mut each: impl FnMut(&Request<NvmeOps>) -> (bool, Delivery),
    ) -> (u64, u64) {
        let (mut requests, mut refused) = (0, 0);
        let mut held = None;
        while let Some(rq) = list.pop() {
            requests += 1;
            let (log_failure, delivery) = each(&rq);
            let how = Submission {
                ns,
                log_failure,
                delivery,
                last: false,
                unrung: &self.unrung,
            };
            if let Err(refusal) = self.place_held(&mut held, rq, how) {
                refused += 1;
                drop(held.take());
                list.refuse(refusal);
            }
        }
        if let Some((_, mut queue)) = held.take() {
            queue.ring_unrung(&self.unrung);
        }
        // The queues requests overflowed to.
        self.ring_unrung();
        (requests, refused)
    }

    /// One request of a batch: to its home queue, whose lock `held` holds (taken now if it
    /// held another queue's, whose doorbell is written first); if that queue does not take it,
    /// with no lock held, to the other queues as [`QueueSet::place`] tries them.
    fn place_held<'a>(
        &'a self,
        held: &mut Option<(usize, HeldQueue<'a>)>,
        rq: ARef<Request<NvmeOps>>,
        how: Submission<'_>,
    ) -> Result<(), QueueError<NvmeOps>> {
        let choice = self.choice(&rq);
        let home = choice.home;
        if held.as_ref().map(|(qi, _)| *qi) != Some(home) {
            if let Some((_, mut queue)) = held.take() {
                queue.ring_unrung(&self.unrung);
            }
            *held = self.queues.get(home).map(|q| (home, q.hold()));
        }
        let Some((_, queue)) = held.as_mut() else {
            return Err(QueueError::new(rq, ENOMEM));
        };
        let (rq, offline) = match queue.submit(rq, Origin::Own, self.cpus(home), how) {
            Ok(()) => return Ok(()),
            Err(SubmitError::Failed(rq, e)) => return Err(QueueError::new(rq, e)),
            Err(SubmitError::Full(rq)) => (rq, false),
            Err(SubmitError::Offline(rq)) => (rq, true),
        };
        // The overflow search and a reap take queue locks: not with this one held.
        drop(held.take());
        if let Some(q) = self.queues.get(home).filter(|_| offline) {
            // As in `try_queue`: commands submitted just before the vector went down.
            q.process_completions();
        }
        self.place_elsewhere(rq, choice, how)
    }

    /// [`QueueSet::place`] after the home queue refused `rq`: with `overflow`, the other queues
    /// of `choice`; `ENOMEM` (blk-mq retries later) if none takes it.
    fn place_elsewhere(
        &self,
        mut rq: ARef<Request<NvmeOps>>,
        choice: Choice,
        how: Submission<'_>,
    ) -> Result<(), QueueError<NvmeOps>> {
        let Choice { first, count, home } = choice;
        if self.overflow {
            let (at, n) = (home - first, count);
            let tried = if self.scan {
                // `queue_order` yields the home queue first: tried above.
                let others = queue_order(at, n, true).skip(1);
                self.try_each(rq, others, first, home, how)
            } else {
                // Each search starts elsewhere: the home queue's count of own requests it
                // refused (just counted one more), a counter only the home queue's CPUs move.
                let seed = self
                    .queues
                    .get(home)
                    .map_or(0, |q| q.stats.full.load(Relaxed));
                let lenders = lenders(at, n, seed, |i| self.spare(first + i));
                self.try_each(rq, lenders, first, home, how)
            };
            rq = match tried {
                Ok(outcome) => return outcome,
                Err(back) => back,
            };
        }
        // Every queue we may use is full or keeps its reserve: BLK_STS_RESOURCE, blk-mq
        // retries later.
        Err(QueueError::new(rq, ENOMEM))
    }

    /// Try the queues `others` (offsets from `first`) in turn for `rq`, a request of home
    /// queue `home`, until one takes or fails it: `Err` with the request if all refused.
    fn try_each(
        &self,
        mut rq: ARef<Request<NvmeOps>>,
        others: impl Iterator<Item = usize>,
        first: usize,
        home: usize,
        how: Submission<'_>,
    ) -> Result<Result<(), QueueError<NvmeOps>>, ARef<Request<NvmeOps>>> {
        for qi in others {
            rq = match self.try_queue(rq, first + qi, home, how) {
                Ok(outcome) => return Ok(outcome),
                Err(back) => back,
            };
        }
        Err(rq)
    }

    /// Try queue `qi` for `rq`, a request of home queue `home`: `Ok` with the outcome if the
    /// queue took the request or failed it, `Err` with the request if it refused (full, keeps
    /// its reserve, or its vector has no online CPU).
    fn try_queue(
        &self,
        rq: ARef<Request<NvmeOps>>,
        qi: usize,
        home: usize,
        how: Submission<'_>,
    ) -> Result<Result<(), QueueError<NvmeOps>>, ARef<Request<NvmeOps>>> {
        let Some(queue) = self.queues.get(qi) else {
            return Err(rq);
        };
        match queue.submit(rq, origin(qi, home, queue.slots()), self.cpus(qi), how) {
            Ok(()) => {
                if let Some(home_queue) = self.queues.get(home).filter(|_| qi != home) {
                    home_queue.stats.overflow_out.add(1, Relaxed);
                    queue.stats.overflow_in.add(1, Relaxed);
                }
                Ok(Ok(()))
            }
            Err(SubmitError::Full(back)) => Err(back),
            Err(SubmitError::Offline(back)) => {
                // Commands submitted just before the vector went down complete without an
                // interrupt: reap them here (and in `timeout`).
                queue.process_completions();
                Err(back)
            }
            Err(SubmitError::Failed(back, e)) => Ok(Err(QueueError::new(back, e))),
        }
    }

    /// Reap the poll queue of poll context `hw_queue` and, with `overflow`, the other poll
    /// queues too (its requests may have been lent to them), in the order they were tried.
    /// Returns how many requests were ended.
    pub(crate) fn poll(&self, hw_queue: u32) -> usize {
        let Some(home) = self.poll_home(hw_queue) else {
            return 0;
        };
        queue_order(home, self.nr_poll, self.overflow)
            .filter_map(|i| self.queues.get(self.nr_irq() + i))
            .map(|q| q.poll())
            .sum()
    }

    /// Reap every poll queue (for io_uring polling, which does not say which queue its
    /// command went to). Returns how many requests were ended.
    pub(crate) fn poll_all(&self) -> usize {
        self.queues[self.nr_irq()..].iter().map(|q| q.poll()).sum()
    }

    /// Where the command of the request at `rq` is (compared by address only).
    pub(crate) fn find(&self, rq: *const Request<NvmeOps>) -> Option<Located<'_>> {
        self.locate(|q| q.find(rq))
    }

    /// Where the command of the request at `rq` is, noted as aborted now.
    pub(crate) fn mark_aborted(&self, rq: *const Request<NvmeOps>) -> Option<Located<'_>> {
        self.locate(|q| q.mark_aborted(rq))
    }

    /// The first queue where `look` finds the command, and where it is.
    fn locate(&self, look: impl Fn(&IoQueue) -> Option<Found>) -> Option<Located<'_>> {
        self.queues.iter().find_map(|q| {
            let found = look(q)?;
            Some(Located {
                queue: q,
                cid: found.cid,
                aborted_before: found.aborted_before,
            })
        })
    }

    /// End or requeue what the queues deferred while a timeout handler held a request.
    pub(crate) fn finish_deferred(&self) {
        self.queues.iter().for_each(|q| q.finish_deferred());
    }

    /// The interrupt-driven queues whose vector has managed affinity including `cpu`, with
    /// the CPUs of the vector.
    pub(crate) fn of_cpu(&self, cpu: CpuId) -> impl Iterator<Item = (&IoQueue, &Cpumask)> {
        self.queues
            .iter()
            .take(self.nr_irq())
            .enumerate()
            .filter_map(move |(qi, q)| Some((&**q, self.cpus(qi).filter(|c| c.test(cpu))?)))
    }

    /// Stop taking submissions on every queue ([`IoQueue::stop_accepting`]).
    pub(crate) fn stop_accepting(&self) {
        self.queues.iter().for_each(|q| q.stop_accepting());
    }

    /// Take submissions again on every queue, after a reset.
    pub(crate) fn accept(&self) {
        self.queues.iter().for_each(|q| q.accept());
    }

    /// Whether any queue has a command in flight.
    pub(crate) fn busy(&self) -> bool {
        self.queues.iter().any(|q| q.occupancy().in_flight > 0)
    }

    /// Reap every queue (poll queues have no interrupt; the others are reaped by theirs too).
    pub(crate) fn process_completions(&self) {
        self.queues.iter().for_each(|q| {
            q.process_completions();
        });
    }

    /// With the controller disabled: give every request back to the block layer and empty
    /// every queue. Returns how many requests were requeued.
    pub(crate) fn requeue_all_and_clear(&self) -> usize {
        self.queues.iter().map(|q| q.requeue_all_and_clear()).sum()
    }

    /// Ask the controller for the queue pairs asked for at probe; `ENODEV` if it grants fewer
    /// than there are.
    pub(crate) fn set_count(&self, admin: &mut AdminQueue, regs: &Regs) -> Result {
        let granted = admin.set_queue_count(regs, self.want)?;
        if (granted as usize) < self.queues.len() {
            return Err(ENODEV);
        }
        Ok(())
    }

    /// Create every queue pair on the controller: the interrupt-driven ones interrupting on
    /// their vectors, the poll queues with interrupts disabled.
    pub(crate) fn create(&self, admin: &mut AdminQueue, regs: &Regs) -> Result {
        for (i, q) in self.queues.iter().enumerate() {
            let vector = if i < self.nr_irq() {
                Some(u32::try_from(queue_vector(i, self.nr_vectors))?)
            } else {
                None
            };
            admin.create_io_queue(regs, q, vector)?;
        }
        Ok(())
    }

    /// Delete every queue pair on the controller (see [`AdminQueue::delete_io_queues`]).
    pub(crate) fn delete(&self, admin: &mut AdminQueue, regs: &Regs) -> Result {
        admin.delete_io_queues(regs, &self.queues)
    }

    /// Fault injection (debugfs, tests only): the next `count` successful completions of each
    /// queue get `status`.
    pub(crate) fn inject(&self, status: u16, count: u32) {
        self.queues.iter().for_each(|q| q.inject.set(status, count));
    }

    /// What each queue still injects: completions left and status.
    pub(crate) fn injecting(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.queues.iter().map(|q| q.inject.get())
    }

    /// The counters of every queue, one [`Counters`] line each.
    pub(crate) fn counters(&self) -> impl Iterator<Item = Counters<'_>> {
        let nr_irq = self.nr_irq();
        self.queues.iter().enumerate().map(move |(i, q)| Counters {
            queue: q,
            poll: i >= nr_irq,
        })
    }
}

/// The column names of [`Counters`].
pub(crate) const COUNTER_COLUMNS: &str = "queue submitted completed overflow_out overflow_in full_events in_flight lent lent_max refused reserve offline_skips requeued poll polled hotplug_drained retried sgl unrung";

/// The counters of a queue as one line of numbers (debugfs, and the kernel log at removal),
/// in the order of [`COUNTER_COLUMNS`].
pub(crate) struct Counters<'a> {
    queue: &'a IoQueue,
    /// It is a poll queue.
    poll: bool,
}

impl kernel::fmt::Display for Counters<'_> {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let q = self.queue;
        let s = &q.stats;
        let Occupancy {
            in_flight,
            lent,
            lent_max,
        } = q.occupancy();
        write!(
            f,
            "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
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
            u8::from(self.poll),
            s.polled.load(Relaxed),
            s.hotplug_drained.load(Relaxed),
            s.retried.load(Relaxed),
            s.sgl.load(Relaxed),
            s.unrung.load(Relaxed)
        )
    }
}

/// The interrupt handler of one vector: reaps the completion queues assigned to it.
pub(crate) struct CqIrq {
    queues: KVec<Arc<IoQueue>>,
    /// Vector 0's: the admin queue's completions interrupt on it (asynchronous events).
    admin: Option<Arc<AdminWork>>,
}

impl CqIrq {
    /// The handler of `vector` out of `nr_vectors`: the queues whose completions interrupt
    /// on it, and for vector 0 the admin queue's `admin` work.
    pub(crate) fn new(
        queues: &[Arc<IoQueue>],
        admin: &Arc<AdminWork>,
        vector: usize,
        nr_vectors: usize,
    ) -> Result<Self> {
        let mut mine = KVec::new();
        for (i, q) in queues.iter().enumerate() {
            if queue_vector(i, nr_vectors) == vector {
                mine.push(q.clone(), GFP_KERNEL)?;
            }
        }
        Ok(Self {
            queues: mine,
            admin: (vector == 0).then(|| admin.clone()),
        })
    }
}

impl irq::Handler for CqIrq {
    fn handle(&self) -> IrqReturn {
        let mut any = false;
        if let Some(admin) = &self.admin {
            any |= admin.kick();
        }
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

    /// The lending rule for a request tried on a queue of `slots` slots, from one of its own
    /// CPUs or (`foreign`) from another.
    fn may_take(free: usize, slots: usize, foreign: bool) -> bool {
        origin(usize::from(foreign), 0, slots).admits(free)
    }

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

    /// The queues `it` yields, at most 8.
    fn collect(it: impl Iterator<Item = usize>) -> KVec<usize> {
        let mut v = KVec::new();
        for q in it.take(8) {
            v.push(q, GFP_KERNEL).unwrap();
        }
        v
    }

    #[test]
    fn spare_is_free_beyond_the_reserve_by_the_counters() {
        // 15 slots, reserve 4: 10 - 2 = 8 in flight leaves 7 free, 3 to spare.
        assert_eq!(policy::spare(15, 10, 2), 3);
        assert_eq!(policy::spare(15, 11, 0), 0);
        assert_eq!(policy::spare(15, 0, 0), 11);
        // Counters read apart: completions ahead of submissions read as an idle queue.
        assert_eq!(policy::spare(15, 5, 7), 11);
        assert_eq!(policy::spare(1, 0, 0), 0);
    }

    #[test]
    fn peeks_are_bounded_distinct_and_never_home() {
        for seed in 0..64 {
            let p = collect(policy::peeks(5, 256, seed));
            assert_eq!(p.len(), policy::PEEKS);
            for (i, &q) in p.iter().enumerate() {
                assert!(q < 256 && q != 5);
                assert!(!p[..i].contains(&q));
            }
        }
        // With at most PEEKS others, every other queue is looked at.
        let p = collect(policy::peeks(2, 4, 7));
        assert_eq!(p.len(), 3);
        assert!(p.contains(&0) && p.contains(&1) && p.contains(&3));
        assert_eq!(policy::peeks(0, 1, 3).count(), 0);
    }

    #[test]
    fn peeks_move_with_the_seed() {
        let first = collect(policy::peeks(0, 256, 0));
        assert!((1..16).any(|seed| collect(policy::peeks(0, 256, seed)) != first));
    }

    #[test]
    fn lenders_are_the_most_spare_and_at_most_tries() {
        // 4 queues, home 0: queue 3 spares most, then 1; 2 spares nothing.
        let spare = |q: usize| [9, 2, 0, 5][q];
        assert_eq!(&collect(policy::lenders(0, 4, 1, spare))[..], &[3, 1]);
        // Nothing to spare anywhere: no lock at all.
        assert_eq!(policy::lenders(0, 4, 1, |_| 0).count(), 0);
        // Equal spares: at most TRIES, in the order looked at.
        let all = collect(policy::lenders(0, 256, 9, |_| 3));
        assert_eq!(all.len(), policy::TRIES);
        let looked = collect(policy::peeks(0, 256, 9));
        assert_eq!(&all[..], &looked[..policy::TRIES]);
        // Spares 0, 1, 1, 3 in the order looked at: the last, then the first of the equals.
        let looked = collect(policy::peeks(1, 5, 1));
        let rank = |q: usize| looked.iter().position(|&l| l == q).unwrap();
        let spare = |q: usize| [0, 1, 1, 3][rank(q)];
        let got = collect(policy::lenders(1, 5, 1, spare));
        assert_eq!(&got[..], &[looked[3], looked[1]]);
    }

    #[test]
    fn lenders_wrap_around_and_need_another_queue() {
        // Home 3 of 4: the others are 0, 1 and 2, whatever the seed.
        for seed in 0..8 {
            let got = collect(policy::lenders(3, 4, seed, |_| 1));
            assert_eq!(got.len(), policy::TRIES);
            assert!(got[0] != got[1] && got.iter().all(|&q| q < 3));
            let looked = collect(policy::peeks(3, 4, seed));
            assert_eq!(looked.len(), 3);
            assert!((0..3).all(|q| looked.contains(&q)));
        }
        // A single queue lends to nobody, and its counters are not read.
        let read = core::cell::Cell::new(false);
        let spare = |_| {
            read.set(true);
            1
        };
        assert_eq!(policy::lenders(0, 1, 5, spare).count(), 0);
        assert!(!read.get());
    }

    #[test]
    fn vectors_shared_round_robin() {
        assert_eq!(queue_vector(0, 5), 1);
        assert_eq!(queue_vector(3, 5), 4);
        assert_eq!(queue_vector(3, 3), 2);
        assert_eq!(queue_vector(2, 1), 0);
    }
}
