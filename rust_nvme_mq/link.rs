// SPDX-License-Identifier: GPL-2.0

//! A link from the open files of a character device (or the ioctls of a disk) to what they
//! reach in the driver, cut when the device goes; and a gate that lets calls run side by side
//! until something must change under them.

use kernel::{
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Full, Relaxed},
        new_condvar, new_mutex, new_spinlock, Arc, CondVar, Mutex, SpinLock,
    },
};

/// What the open files of a character device reach the driver through: for the controller's
/// device its namespaces (for a rescan, and the Identify strings) and its passthrough ioctls,
/// for a namespace's generic device its namespace and disk together (`generic.rs`). Cut when
/// the device goes ([`Link::cut`]: at unbind, or when the namespace's disk is removed), so
/// that a file held open keeps neither the controller nor its DMA memory (queues, the bounce
/// buffer) nor the disk past that: its calls then fail with `ENODEV`. Calls run side by side,
/// each counted while it runs ([`Link::with`]); cutting waits for them.
#[pin_data]
pub(crate) struct Link<T: Send + Sync> {
    /// A spinlock, not a mutex: held only to read or swap the reference and count a call in
    /// (every io_uring passthrough command passes one; a mutex cost 40 instructions per pass
    /// more). What it leads to is dropped with the lock released: the last reference to
    /// a disk removes it, which sleeps.
    #[pin]
    state: SpinLock<Option<Arc<T>>>,
    /// Calls (ioctls, attribute reads, io_uring commands being issued) running: counted in
    /// with the lock held (so a cut link counts no new call), counted out without it.
    users: Atomic<usize>,
    /// A cut waits for the running calls: the last one to leave signals `idle`.
    cutting: Atomic<bool>,
    /// Signalled when the last running call is done while the link is being cut.
    #[pin]
    idle: CondVar,
}

impl<T: Send + Sync> Link<T> {
    pub(crate) fn new(to: Arc<T>) -> Result<Arc<Self>> {
        Self::leading_to(Some(to))
    }

    /// A link that leads nowhere yet ([`Link::set`] connects it).
    pub(crate) fn empty() -> Result<Arc<Self>> {
        Self::leading_to(None)
    }

    fn leading_to(to: Option<Arc<T>>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state <- new_spinlock!(to),
                users: Atomic::new(0),
                cutting: Atomic::new(false),
                idle <- new_condvar!(),
            }),
            GFP_KERNEL,
        )
    }

    /// Lead the link to `to`; cut when the returned guard is dropped.
    pub(crate) fn set(self: &Arc<Self>, to: Arc<T>) -> CutOnDrop<T> {
        let mut state = self.state.lock();
        let before = state.replace(to);
        self.cutting.store(false, Relaxed);
        drop(state);
        drop(before);
        CutOnDrop(self.clone())
    }

    /// What the link leads to now, if it is not cut. The reference is not counted as a call:
    /// [`Link::cut`] does not wait for it to be dropped.
    pub(crate) fn get(&self) -> Option<Arc<T>> {
        self.state.lock().clone()
    }

    /// Call `f` with what the link leads to, unless the link is cut (`ENODEV`).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&T) -> Result<R>) -> Result<R> {
        self.visit(|to| f(to.ok_or(ENODEV)?))
    }

    /// Call `f` with what the link leads to, `None` if the link is cut. Its reference is
    /// dropped before the call counts as done, so the last one is never dropped after
    /// [`Link::cut`] returns. One lock per call: the call is counted out without it.
    pub(crate) fn visit<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        let to = {
            let state = self.state.lock();
            let to = state.clone();
            if to.is_some() {
                self.users.fetch_add(1, Full);
            }
            to
        };
        let Some(to) = to else {
            return f(None);
        };
        let result = f(Some(&to));
        drop(to);
        // Fully ordered, as the cutter's `cutting` store: either this sees it, or the cutter
        // sees this call gone (a store-buffering pair of fully ordered operations).
        if self.users.fetch_sub(1, Full) == 1 && self.cutting.load(Relaxed) {
            let _state = self.state.lock();
            self.idle.notify_all();
        }
        result
    }

    /// Cut the link, and wait for the calls that still run.
    pub(crate) fn cut(&self) {
        let mut state = self.state.lock();
        // With the lock held no call is counted in from here on: they find no target.
        let to = state.take();
        self.cutting.xchg(true, Full);
        while self.users.load(Acquire) > 0 {
            self.idle.wait(&mut state);
        }
        drop(state);
        drop(to);
    }
}

/// A link cut when this is dropped ([`Link::cut`]).
pub(crate) struct CutOnDrop<T: Send + Sync>(pub(crate) Arc<Link<T>>);

impl<T: Send + Sync> Drop for CutOnDrop<T> {
    fn drop(&mut self) {
        self.0.cut();
    }
}

/// Calls that run side by side ([`Gate::pass`]), and changes that must not happen while one of
/// them runs ([`Gate::close`]): a closed gate waits for the calls inside, and new ones wait at
/// the gate until it opens again. Passing an open gate takes no lock (every passthrough command
/// passes one): the count of calls inside and the closed mark are one atomic word.
#[pin_data]
pub(crate) struct Gate {
    /// Calls inside, plus [`CLOSED`] while the gate is closed. Calls enter an open gate and
    /// leave without the lock; the gate is closed and opened, and calls wait for it to open,
    /// with the lock held.
    count: Atomic<usize>,
    #[pin]
    lock: Mutex<()>,
    /// Signalled when the last call inside a closed gate leaves, and when the gate opens.
    #[pin]
    changed: CondVar,
}

/// The closed mark in [`Gate::count`].
const CLOSED: usize = 1 << (usize::BITS - 1);

impl Gate {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            count: Atomic::new(0),
            lock <- new_mutex!(()),
            changed <- new_condvar!(),
        })
    }

    /// Run `f` inside the gate (once it is open).
    pub(crate) fn pass<R>(&self, f: impl FnOnce() -> R) -> R {
        if !self.enter_open() {
            self.enter_once_open();
        }
        let result = f();
        // The last call inside a closed gate: its closer waits for this, with the lock held
        // while it looks, so it cannot miss the signal.
        if self.count.fetch_sub(1, Full) == CLOSED + 1 {
            let _lock = self.lock.lock();
            self.changed.notify_all();
        }
        result
    }

    /// Enter the gate if it is open, without the lock; false if it is closed.
    fn enter_open(&self) -> bool {
        let mut count = self.count.load(Relaxed);
        while count & CLOSED == 0 {
            match self.count.cmpxchg(count, count + 1, Full) {
                Ok(_) => return true,
                Err(now) => count = now,
            }
        }
        false
    }

    /// Wait until the gate is open, and enter it.
    fn enter_once_open(&self) {
        let mut lock = self.lock.lock();
        while self.count.load(Acquire) & CLOSED != 0 {
            self.changed.wait(&mut lock);
        }
        // The gate is only closed with the lock held: it is open until this enters.
        self.count.fetch_add(1, Full);
    }

    /// Close the gate once it is open, and wait until no call is inside; it opens again when
    /// the returned guard is dropped.
    pub(crate) fn close(&self) -> GateClosed<'_> {
        let mut lock = self.lock.lock();
        while self.count.load(Acquire) & CLOSED != 0 {
            self.changed.wait(&mut lock);
        }
        self.count.fetch_add(CLOSED, Full);
        while self.count.load(Acquire) != CLOSED {
            self.changed.wait(&mut lock);
        }
        GateClosed(self)
    }

    fn open(&self) {
        let _lock = self.lock.lock();
        self.count.fetch_sub(CLOSED, Full);
        self.changed.notify_all();
    }
}

/// A closed [`Gate`], opened when dropped.
pub(crate) struct GateClosed<'a>(&'a Gate);

impl GateClosed<'_> {
    /// Whether this closes `gate`.
    pub(crate) fn closes(&self, gate: &Gate) -> bool {
        core::ptr::eq(self.0, gate)
    }
}

impl Drop for GateClosed<'_> {
    fn drop(&mut self) {
        self.0.open();
    }
}
