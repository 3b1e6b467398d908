// SPDX-License-Identifier: GPL-2.0

//! A link from the open files of a character device to what they reach in the driver, cut
//! when the device goes.

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
