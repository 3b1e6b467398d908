// SPDX-License-Identifier: GPL-2.0

//! The admin queue pair and the admin commands: Identify, Set Features (Number of Queues),
//! Create and Delete I/O Completion/Submission Queue, Abort.
//!
//! Admin commands are polled. The driver's own (at probe, for resets, removal and shutdown,
//! an Abort on a timeout, Identify for a rescan) run one at a time under the controller's admin
//! lock, each for at most `admin_timeout`. A user's command (the admin passthrough ioctls) is
//! submitted under the lock and then waited for without it, for its own timeout: an Abort or a
//! reset never waits for it, only for the driver command that holds the lock. Whoever holds
//! the lock reaps every completion and notes it in the slot of its command identifier, where
//! the issuer finds it. A reset or disable notes every command still outstanding as lost.
//!
//! Identify data goes to one buffer of the admin queue, allocated with it: every Identify
//! (probe, rescan) takes this one path and needs no DMA allocation.

use crate::{
    cmd::{self, Completion, Sqe},
    queue::IoQueue,
    regs::Regs,
};
use kernel::{
    device::{Bound, Device},
    dma::{Coherent, CoherentView},
    io::{io_project, poll::read_poll_timeout, Io},
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        new_mutex, Arc, Mutex,
    },
    time::Delta,
    workqueue::{self, impl_has_work, new_work, Work, WorkItem},
};

/// Entries of the admin queues.
pub(crate) const ADMIN_DEPTH: u16 = 32;
/// How often to look for the completion of an admin command.
pub(crate) const POLL_INTERVAL: Delta = Delta::from_millis(1);
/// How many user commands may be outstanding at once: one slot stays for the driver's own
/// command, one for its Asynchronous Event Request, and one ring entry stays empty (so neither
/// ring can overflow).
const USER_SLOTS: usize = ADMIN_DEPTH as usize - 3;
/// Slots the Asynchronous Event Request may take: all but the driver command's.
const ASYNC_SLOTS: usize = ADMIN_DEPTH as usize - 2;

/// What became of the command with a given command identifier (its slot).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Slot {
    /// No command has this identifier.
    Free,
    /// Submitted, its issuer waits for it.
    Waiting,
    /// Submitted, its issuer stopped waiting (a driver command that timed out): freed when it
    /// completes or is lost.
    Abandoned,
    /// Completed so, for its issuer to take.
    Done(Completion),
    /// Lost in a reset or disable: it will never complete.
    Lost,
}

/// A command submitted to the admin queue, to wait for (see [`AdminQueue::take`]).
#[must_use]
pub(crate) struct Ticket {
    cid: u16,
}

/// The outcome of a user command taken by [`AdminQueue::take`].
pub(crate) enum Outcome {
    /// Completed so.
    Done(Completion),
    /// Lost in a reset or disable of the controller.
    Lost,
}

impl Outcome {
    /// How the command completed; `EINTR` for a lost command (as C's cancelled commands).
    pub(crate) fn into_result(self) -> Result<Completion> {
        match self {
            Self::Done(done) => Ok(done),
            Self::Lost => Err(EINTR),
        }
    }
}

/// The admin queue pair, used synchronously.
pub(crate) struct AdminQueue {
    sq: Coherent<[u8]>,
    cq: Coherent<[cmd::CqeDwords]>,
    tail: u16,
    head: u16,
    phase: bool,
    /// By command identifier.
    slots: [Slot; ADMIN_DEPTH as usize],
    /// How long a command may take (`admin_timeout`).
    timeout: Delta,
    /// Where Identify commands put their data structure.
    identify: Coherent<[u8]>,
}

impl AdminQueue {
    pub(crate) fn new(dev: &Device<Bound>, timeout: Delta) -> Result<Self> {
        let entries = usize::from(ADMIN_DEPTH);
        Ok(Self {
            sq: Coherent::<u8>::zeroed_slice(dev, entries * size_of::<Sqe>(), GFP_KERNEL)?,
            cq: Coherent::<cmd::CqeDwords>::zeroed_slice(dev, entries, GFP_KERNEL)?,
            tail: 0,
            head: 0,
            phase: true,
            slots: [Slot::Free; ADMIN_DEPTH as usize],
            timeout,
            identify: Coherent::<u8>::zeroed_slice(dev, cmd::IDENTIFY_SIZE, GFP_KERNEL)?,
        })
    }

    /// Program the admin queue into the controller and enable it; wait for CSTS.RDY.
    pub(crate) fn enable(&self, regs: &Regs) -> Result {
        regs.set_admin_queues(ADMIN_DEPTH, self.sq.dma_address(), self.cq.dma_address())?;
        regs.enable()
    }

    /// How long a driver command may take (`admin_timeout`).
    pub(crate) fn timeout(&self) -> Delta {
        self.timeout
    }

    /// Start afresh after the controller was disabled: empty queues, phase 1. Commands still
    /// outstanding are lost (their issuers learn it from [`AdminQueue::take`]).
    pub(crate) fn clear(&mut self) -> Result {
        for slot in &mut self.slots {
            *slot = match *slot {
                Slot::Waiting => Slot::Lost,
                Slot::Abandoned => Slot::Free,
                other => other,
            };
        }
        cmd::clear_cq(&self.cq, ADMIN_DEPTH)?;
        self.tail = 0;
        self.head = 0;
        self.phase = true;
        Ok(())
    }

    /// Reap every completion there is, noting each in the slot of its command. `EIO` if the
    /// controller reports a fatal status (CSTS.CFS).
    fn reap(&mut self, regs: &Regs) -> Result {
        while let Some(cqe) = cmd::read_cqe(&self.cq, self.head, self.phase)? {
            self.head = (self.head + 1) % ADMIN_DEPTH;
            if self.head == 0 {
                self.phase = !self.phase;
            }
            regs.ring(regs.doorbells(0).cq, self.head);
            match self.slots.get_mut(usize::from(cqe.cid)) {
                Some(slot @ Slot::Waiting) => *slot = Slot::Done(cqe.done),
                Some(slot @ Slot::Abandoned) => *slot = Slot::Free,
                _ => pr_warn!("admin completion for unknown command {}\n", cqe.cid),
            }
        }
        if regs.csts().is_some_and(|csts| csts.cfs()) {
            return Err(EIO);
        }
        Ok(())
    }

    /// Submit `sqe` in a free slot among the first `slots`; `EBUSY` if there is none.
    fn submit_in(&mut self, regs: &Regs, mut sqe: Sqe, slots: usize) -> Result<Ticket> {
        let free = self.slots[..slots].iter().position(|s| *s == Slot::Free);
        let cid = u16::try_from(free.ok_or(EBUSY)?)?;
        sqe.set_cid(cid);
        cmd::write_sqe(&self.sq, self.tail, &sqe)?;
        self.slots[usize::from(cid)] = Slot::Waiting;
        self.tail = (self.tail + 1) % ADMIN_DEPTH;
        regs.ring(regs.doorbells(0).sq, self.tail);
        Ok(Ticket { cid })
    }

    /// Submit a user's command (`EBUSY` if as many as the queue takes are outstanding); wait
    /// for it without the lock, with [`AdminQueue::poll`].
    pub(crate) fn submit_user(&mut self, regs: &Regs, sqe: Sqe) -> Result<Ticket> {
        self.submit_in(regs, sqe, USER_SLOTS)
    }

    /// Submit a command that completes when the controller decides (an Asynchronous Event
    /// Request): taken like a user's, by whoever wants its outcome.
    pub(crate) fn submit_async(&mut self, regs: &Regs, sqe: Sqe) -> Result<Ticket> {
        self.submit_in(regs, sqe, ASYNC_SLOTS)
    }

    /// Reap, then take the outcome of `ticket` if there is one (its slot is then free).
    /// `EIO`: the controller reports a fatal status.
    pub(crate) fn poll(&mut self, regs: &Regs, ticket: &Ticket) -> Result<Option<Outcome>> {
        self.reap(regs)?;
        Ok(self.take(ticket))
    }

    /// The outcome of `ticket` if there is one (its slot is then free), without reaping.
    pub(crate) fn take(&mut self, ticket: &Ticket) -> Option<Outcome> {
        let slot = &mut self.slots[usize::from(ticket.cid)];
        let outcome = match *slot {
            Slot::Done(done) => Outcome::Done(done),
            Slot::Lost => Outcome::Lost,
            _ => return None,
        };
        *slot = Slot::Free;
        Some(outcome)
    }

    /// Stop waiting for `ticket`: its slot is freed once the command completes or is lost.
    pub(crate) fn abandon(&mut self, ticket: Ticket) {
        let slot = &mut self.slots[usize::from(ticket.cid)];
        *slot = match *slot {
            Slot::Waiting => Slot::Abandoned,
            _ => Slot::Free,
        };
    }

    /// Run `sqe` and wait for its completion; returns dword 0 of the completion.
    pub(crate) fn run(&mut self, regs: &Regs, sqe: Sqe) -> Result<u32> {
        let done = self.run_status(regs, sqe)?;
        cmd::status_to_result(done.status).map(|()| done.result)
    }

    /// Run a driver command `sqe`, holding the lock, and wait for its completion (at most
    /// `admin_timeout`); returns how it completed, whatever the status.
    pub(crate) fn run_status(&mut self, regs: &Regs, sqe: Sqe) -> Result<Completion> {
        let ticket = self.submit_in(regs, sqe, usize::from(ADMIN_DEPTH) - 1)?;
        let timeout = self.timeout;
        let waited = read_poll_timeout(
            || self.poll(regs, &ticket),
            |outcome| outcome.is_some(),
            POLL_INTERVAL,
            timeout,
        );
        match waited {
            Ok(Some(Outcome::Done(done))) => Ok(done),
            Ok(_) => Err(EINTR),
            Err(e) => {
                self.abandon(ticket);
                Err(e)
            }
        }
    }

    /// Run Identify `cns` for `nsid` and call `f` with the data structure (zeroed first:
    /// what the controller does not write reads as zeroes).
    pub(crate) fn identify<T: FromBytes + IntoBytes, R>(
        &mut self,
        regs: &Regs,
        nsid: u32,
        cns: u32,
        f: impl FnOnce(CoherentView<'_, T>) -> Result<R>,
    ) -> Result<R> {
        self.read_data(regs, Sqe::identify(nsid, cns), f)
    }

    /// Read log page `lid` (its first 4 KiB) and call `f` with it; `rae`: keep the
    /// asynchronous event of the page pending (Retain Asynchronous Event), else reading it
    /// clears the event and lets the controller report that kind again.
    pub(crate) fn get_log_page<T: FromBytes + IntoBytes, R>(
        &mut self,
        regs: &Regs,
        lid: u8,
        rae: bool,
        f: impl FnOnce(CoherentView<'_, T>) -> Result<R>,
    ) -> Result<R> {
        let dwords = (cmd::IDENTIFY_SIZE / 4) as u32;
        self.read_data(regs, Sqe::get_log_page(lid, rae, dwords), f)
    }

    /// Run `sqe` with the admin queue's data buffer (zeroed first: what the controller does not
    /// write reads as zeroes) as its data, and call `f` with the buffer as a `T`.
    fn read_data<T: FromBytes + IntoBytes, R>(
        &mut self,
        regs: &Regs,
        sqe: Sqe,
        f: impl FnOnce(CoherentView<'_, T>) -> Result<R>,
    ) -> Result<R> {
        cmd::zero(&self.identify)?;
        self.run(regs, sqe.prps(self.identify.dma_address(), 0))?;
        f(io_project!(&self.identify, [try: ..]).try_cast::<T>()?)
    }

    /// Ask for `want` I/O queue pairs; returns how many the controller grants (at most
    /// `want`).
    pub(crate) fn set_queue_count(&mut self, regs: &Regs, want: u32) -> Result<u32> {
        let granted = self.run(regs, Sqe::set_queue_count(want))?;
        Ok(cmd::granted_queues(granted, want))
    }

    /// Create the queue pair of `q`, its completions interrupting on `vector`, or raising no
    /// interrupt (IEN=0) without one.
    pub(crate) fn create_io_queue(
        &mut self,
        regs: &Regs,
        q: &IoQueue,
        vector: Option<u32>,
    ) -> Result {
        let (qid, depth) = (q.qid, q.depth);
        let (sq, cq) = q.ring_addresses();
        self.run(regs, Sqe::create_cq(qid, depth, cq, vector))
            .inspect_err(|e| pr_err!("creating I/O CQ {} failed: {:?}\n", qid, e))?;
        self.run(regs, Sqe::create_sq(qid, depth, sq))
            .inspect_err(|e| pr_err!("creating I/O SQ {} failed: {:?}\n", qid, e))?;
        Ok(())
    }

    /// Delete the I/O queues of `queues` on the controller, as the C driver does before it
    /// disables or shuts down the controller: every submission queue first (the controller
    /// aborts what they still hold and completes it on their completion queues), then every
    /// completion queue. Stops at the first command that fails or times out (a controller
    /// that does not answer is disabled anyway), so this takes at most one `admin_timeout`
    /// beyond what the controller needs.
    pub(crate) fn delete_io_queues(&mut self, regs: &Regs, queues: &[Arc<IoQueue>]) -> Result {
        for sq in [true, false] {
            let what = if sq { "SQ" } else { "CQ" };
            for q in queues.iter().rev() {
                let qid = q.qid;
                let delete = if sq { Sqe::delete_sq } else { Sqe::delete_cq };
                self.run(regs, delete(qid))
                    .inspect_err(|e| pr_warn!("deleting I/O {} {} failed: {:?}\n", what, qid, e))?;
            }
        }
        Ok(())
    }

    /// Abort command `cid` of submission queue `qid`.
    pub(crate) fn abort(&mut self, regs: &Regs, qid: u16, cid: u16) -> Result {
        self.run(regs, Sqe::abort(qid, cid)).map(|_| ())
    }
}

/// What handles the admin queue's news outside of commands (asynchronous events), run from
/// [`AdminWork`].
pub(crate) trait AdminEvents: Send + Sync {
    fn run(&self);
}

/// The work item that the admin queue's interrupt, and the end of a reset, queue: it runs the
/// [`AdminEvents`] handler set with [`AdminWork::start`], if any.
#[pin_data]
pub(crate) struct AdminWork {
    #[pin]
    handler: Mutex<Option<Arc<dyn AdminEvents>>>,
    /// Whether [`AdminWork::kick`] queues the work.
    running: Atomic<bool>,
    #[pin]
    work: Work<AdminWork>,
}

impl_has_work! {
    impl HasWork<Self> for AdminWork { self.work }
}

impl WorkItem for AdminWork {
    type Pointer = Arc<AdminWork>;

    fn run(this: Arc<AdminWork>) {
        let handler = this.handler.lock().clone();
        if let Some(h) = handler {
            h.run();
        }
    }
}

impl AdminWork {
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                handler <- new_mutex!(None),
                running: Atomic::new(false),
                work <- new_work!("rust_nvme_mq::admin_events"),
            }),
            GFP_KERNEL,
        )
    }

    /// Run `handler` from now on, once now.
    pub(crate) fn start(self: &Arc<Self>, handler: Arc<dyn AdminEvents>) {
        *self.handler.lock() = Some(handler);
        self.running.store(true, Relaxed);
        self.kick();
    }

    /// Stop: no more runs are queued, a running one is waited for, and the handler is dropped
    /// (it may refer to the controller, which refers to this).
    pub(crate) fn stop(&self) {
        self.running.store(false, Relaxed);
        self.work.flush();
        drop(self.handler.lock().take());
    }

    /// Wait for a run that is queued or running; later kicks still queue runs.
    pub(crate) fn flush(&self) {
        self.work.flush();
    }

    /// Queue a run, unless one is queued already, if a handler is set; returns whether one
    /// is (the admin queue's interrupt then counts as handled). Does not sleep (called from
    /// the interrupt).
    pub(crate) fn kick(self: &Arc<Self>) -> bool {
        let running = self.running.load(Relaxed);
        if running {
            let _ = workqueue::system().enqueue(self.clone());
        }
        running
    }
}
