// SPDX-License-Identifier: GPL-2.0

//! Asynchronous events: one Asynchronous Event Request kept outstanding on the admin queue, as
//! the C driver does, so that the controller reports a namespace attached, detached or
//! changed (the disks are rescanned), SMART/health critical warnings and temperature (logged
//! once each kind) and errors.
//!
//! The admin queue's completions interrupt on vector 0, whose handler queues [`Aen`]'s work;
//! the work takes the admin lock, finds whether the request completed, re-arms it, and handles
//! the event after it released the lock: it reads the event's log page without Retain
//! Asynchronous Event (so the controller reports that kind again), then rescans or logs. A
//! reset loses the request; the controller kicks the work when it is live again, which enables
//! the events (Set Features, Asynchronous Event Configuration) and re-arms.

use crate::{
    admin::{AdminEvents, AdminWork, Outcome, Ticket},
    cmd::{self, Completion, Sqe},
    ctrl::Ctrl,
};
use kernel::{
    io::Io,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        new_mutex, Arc, Mutex,
    },
};

/// The asynchronous event handling of a controller, run by its [`AdminWork`].
#[pin_data]
pub(crate) struct Aen {
    ctrl: Arc<Ctrl>,
    /// To look again after an event (another may wait behind it).
    work: Arc<AdminWork>,
    /// The outstanding request, if any, and whether the events are enabled on the controller.
    #[pin]
    state: Mutex<State>,
    /// The kinds of SMART/health and error events already logged, one bit each.
    logged: Atomic<u32>,
}

struct State {
    request: Option<Ticket>,
    enabled: bool,
    /// The controller refused the request (its limit): not re-armed.
    refused: bool,
}

impl AdminEvents for Aen {
    fn run(&self) {
        if let Some(result) = self.poll_and_arm() {
            self.handle(result);
            self.work.kick();
        }
    }
}

impl Aen {
    /// Handle the asynchronous events of `ctrl` from `work` (queued by the admin queue's
    /// interrupt and by resets), starting now. [`AdminWork::stop`] ends it.
    pub(crate) fn start(ctrl: Arc<Ctrl>, work: &Arc<AdminWork>) -> Result {
        let aen = Arc::pin_init(
            pin_init!(Self {
                ctrl,
                work: work.clone(),
                state <- new_mutex!(State {
                    request: None,
                    enabled: false,
                    refused: false,
                }),
                logged: Atomic::new(0),
            }),
            GFP_KERNEL,
        )?;
        work.start(aen);
        Ok(())
    }

    /// With the admin lock: take the outcome of the outstanding request; arm a new one
    /// (enabling the events first after a reset). Returns the event reported, if any.
    fn poll_and_arm(&self) -> Option<u32> {
        let ctrl = &self.ctrl;
        let mut admin = ctrl.live_admin().ok()?;
        let mut state = self.state.lock();
        let mut event = None;
        if let Some(ticket) = state.request.take() {
            match admin.poll(&ctrl.regs, &ticket) {
                Ok(Some(Outcome::Done(Completion { status: 0, result }))) => event = Some(result),
                Ok(Some(Outcome::Done(Completion { status, .. }))) => {
                    pr_warn!(
                        "rnvme{}: Asynchronous Event Request failed (status {:#x})\n",
                        ctrl.index,
                        status
                    );
                    state.refused = status & cmd::STATUS_SCT_SC_MASK == cmd::SC_AER_LIMIT;
                }
                // Lost in a reset: the controller forgot the configuration too.
                Ok(Some(Outcome::Lost)) => state.enabled = false,
                Ok(None) | Err(_) => state.request = Some(ticket),
            }
        }
        if state.request.is_some() || state.refused {
            return event;
        }
        if !state.enabled {
            let enable = Sqe::async_event_config(cmd::AEC_SMART_AND_NS_ATTR);
            if let Err(e) = admin.run(&ctrl.regs, enable) {
                pr_warn!(
                    "rnvme{}: enabling asynchronous events failed ({:?})\n",
                    ctrl.index,
                    e
                );
            }
            state.enabled = true;
        }
        match admin.submit_async(&ctrl.regs, Sqe::async_event()) {
            Ok(ticket) => state.request = Some(ticket),
            Err(e) => pr_warn!(
                "rnvme{}: no Asynchronous Event Request ({:?})\n",
                ctrl.index,
                e
            ),
        }
        event
    }

    /// Handle event `result` (dword 0 of the request's completion), without the admin lock:
    /// read its log page to clear it, then rescan or log.
    fn handle(&self, result: u32) {
        let ctrl = &self.ctrl;
        let cmd::AsyncEvent { kind, info, lid } = result.into();
        if kind == cmd::AER_TYPE_SMART {
            self.smart_event(info, lid);
            return;
        }
        // Reading the page (for a notice of a changed namespace, the Changed Namespace List)
        // clears the event.
        let cleared = ctrl
            .live_admin()
            .and_then(|mut a| a.get_log_page::<cmd::AnyLog, _>(&ctrl.regs, lid, false, |_| Ok(())));
        match (kind, info) {
            (cmd::AER_TYPE_NOTICE, cmd::AER_NOTICE_NS_CHANGED) => {
                pr_info!(
                    "rnvme{}: namespace attributes changed, rescanning\n",
                    ctrl.index
                );
                if let Err(e) = cleared.and_then(|()| ctrl.namespaces_changed()) {
                    pr_warn!(
                        "rnvme{}: rescan after an event failed ({:?})\n",
                        ctrl.index,
                        e
                    );
                }
            }
            (cmd::AER_TYPE_ERROR, _) if self.first(kind, info) => {
                pr_err!("rnvme{}: controller error event {:#x}\n", ctrl.index, info);
            }
            _ => pr_info!("rnvme{}: asynchronous event {:#x}\n", ctrl.index, result),
        }
    }

    /// A SMART/health event (`info`): read its log page `lid` (which clears it) for the
    /// temperature, and log the first of each kind.
    fn smart_event(&self, info: u32, lid: u8) {
        let ctrl = &self.ctrl;
        let temperature = ctrl.live_admin().and_then(|mut a| {
            a.get_log_page::<cmd::SmartLog, _>(&ctrl.regs, lid, false, |log| {
                let t: [u8; 2] = kernel::io::io_project!(log, .temperature).copy_read();
                Ok(u16::from_le_bytes(t))
            })
        });
        if !self.first(cmd::AER_TYPE_SMART, info) {
            return;
        }
        let what = match info {
            0 => "reliability degraded",
            1 => "temperature beyond a threshold",
            2 => "spare capacity below its threshold",
            _ => "health event",
        };
        match temperature {
            Ok(k) => pr_crit!(
                "rnvme{}: SMART/health critical warning: {} (composite temperature {} K)\n",
                ctrl.index,
                what,
                k
            ),
            Err(e) => pr_crit!(
                "rnvme{}: SMART/health critical warning: {} (log not read: {:?})\n",
                ctrl.index,
                what,
                e
            ),
        }
    }

    /// Whether event `kind`/`info` is reported for the first time.
    fn first(&self, kind: u32, info: u32) -> bool {
        let bit = 1u32 << ((kind * 8 + info.min(7)) % 32);
        let mut now = self.logged.load(Relaxed);
        loop {
            if now & bit != 0 {
                return false;
            }
            match self.logged.cmpxchg(now, now | bit, Relaxed) {
                Ok(_) => return true,
                Err(then) => now = then,
            }
        }
    }
}
