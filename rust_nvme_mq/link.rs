// SPDX-License-Identifier: GPL-2.0

//! A link from the open files of a character device (or the ioctls of a disk) to what they
//! reach in the driver, cut when the device goes; and a gate that lets calls run side by side
//! until something must change under them.

use kernel::{
    prelude::*,
    sync::{new_condvar, new_mutex, Arc, CondVar, Mutex},
};

/// What the open files of a character device reach the driver through: for the controller's
/// device its namespaces (for a rescan, and the Identify strings) and its passthrough ioctls,
/// for a namespace's generic device its disk (`generic.rs`). Cut when the device goes
/// ([`Link::cut`]: at unbind, or when the namespace's disk is removed), so that a file held
/// open keeps neither the controller nor its DMA memory (queues, the bounce buffer) nor the
/// disk past that: its calls then fail with `ENODEV`. Calls run side by side, each counted
/// while it runs ([`Link::with`]); cutting waits for them.
#[pin_data]
pub(crate) struct Link<T: Send + Sync> {
    #[pin]
    state: Mutex<LinkState<T>>,
    /// Signalled when the last running call is done.
    #[pin]
    idle: CondVar,
}

struct LinkState<T> {
    to: Option<Arc<T>>,
    /// Calls (ioctls, attribute reads, io_uring commands being issued) running.
    users: usize,
}

impl<T: Send + Sync> Link<T> {
    pub(crate) fn new(to: Arc<T>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state <- new_mutex!(LinkState { to: Some(to), users: 0 }),
                idle <- new_condvar!(),
            }),
            GFP_KERNEL,
        )
    }

    /// A link that leads nowhere yet ([`Link::set`] connects it).
    pub(crate) fn empty() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state <- new_mutex!(LinkState { to: None, users: 0 }),
                idle <- new_condvar!(),
            }),
            GFP_KERNEL,
        )
    }

    /// Lead the link to `to`; cut when the returned guard is dropped.
    pub(crate) fn set(self: &Arc<Self>, to: Arc<T>) -> CutOnDrop<T> {
        self.state.lock().to = Some(to);
        CutOnDrop(self.clone())
    }

    /// What the link leads to now, if it is not cut. The reference is not counted as a call:
    /// [`Link::cut`] does not wait for it to be dropped.
    pub(crate) fn get(&self) -> Option<Arc<T>> {
        self.state.lock().to.clone()
    }

    /// Call `f` with what the link leads to, unless the link is cut (`ENODEV`).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&T) -> Result<R>) -> Result<R> {
        self.visit(|to| f(to.ok_or(ENODEV)?))
    }

    /// Call `f` with what the link leads to, `None` if the link is cut. Its reference is
    /// dropped before the call counts as done, so the last one is never dropped after
    /// [`Link::cut`] returns.
    pub(crate) fn visit<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        let to = {
            let mut state = self.state.lock();
            let to = state.to.clone();
            if to.is_none() {
                drop(state);
                return f(None);
            }
            state.users += 1;
            to
        };
        let result = f(to.as_deref());
        drop(to);
        let mut state = self.state.lock();
        state.users -= 1;
        if state.users == 0 {
            self.idle.notify_all();
        }
        result
    }

    /// Cut the link, and wait for the calls that still run.
    pub(crate) fn cut(&self) {
        let mut state = self.state.lock();
        state.to = None;
        while state.users > 0 {
            self.idle.wait(&mut state);
        }
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
/// the gate until it opens again.
#[pin_data]
pub(crate) struct Gate {
    #[pin]
    state: Mutex<GateState>,
    /// Signalled when the last call inside leaves, and when the gate opens.
    #[pin]
    changed: CondVar,
}

struct GateState {
    inside: usize,
    closed: bool,
}

impl Gate {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            state <- new_mutex!(GateState { inside: 0, closed: false }),
            changed <- new_condvar!(),
        })
    }

    /// Run `f` inside the gate (once it is open).
    pub(crate) fn pass<R>(&self, f: impl FnOnce() -> R) -> R {
        let mut state = self.state.lock();
        while state.closed {
            self.changed.wait(&mut state);
        }
        state.inside += 1;
        drop(state);
        let result = f();
        let mut state = self.state.lock();
        state.inside -= 1;
        if state.inside == 0 {
            self.changed.notify_all();
        }
        result
    }

    /// Close the gate once it is open, and wait until no call is inside; it opens again when
    /// the returned guard is dropped.
    pub(crate) fn close(&self) -> GateClosed<'_> {
        let mut state = self.state.lock();
        while state.closed {
            self.changed.wait(&mut state);
        }
        state.closed = true;
        while state.inside > 0 {
            self.changed.wait(&mut state);
        }
        GateClosed(self)
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
        self.0.state.lock().closed = false;
        self.0.changed.notify_all();
    }
}
