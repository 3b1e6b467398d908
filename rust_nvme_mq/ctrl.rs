// SPDX-License-Identifier: GPL-2.0

//! The controller: its state, its admin queue, its I/O queues (a [`QueueSet`]), the steps of
//! bringing it up, reset, removal and shutdown. It knows nothing of disks: what is built on its
//! namespaces learns through [`CtrlEvents`] that it must go.

use crate::{
    admin::{AdminQueue, AdminWork, Ticket, POLL_INTERVAL},
    cmd::{self, Completion, IdCtrl, Sqe},
    queue::Delivery,
    queueset::{QueueSet, COUNTER_COLUMNS},
    regs::{Regs, PCI_COMMAND},
    transfer::Transfer,
};
use kernel::{
    block::mq::DmaDevice,
    device::{Bound, Core, Device},
    io::{io_project, io_read, poll::read_poll_timeout, Io},
    pci,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        new_mutex, Arc, Mutex, MutexGuard,
    },
    time::{delay::fsleep, Delta},
    workqueue::{self, impl_has_work, new_work, Work, WorkItem},
};

/// How many times a reset tries to bring the controller back before it gives up.
const RESET_ATTEMPTS: u32 = 3;
/// The pause between two attempts of a reset.
const RESET_RETRY_DELAY: Delta = Delta::from_secs(1);
/// How often a reset tries the device lock, 10 ms apart, before the attempt fails.
const PCI_LOCK_TRIES: u32 = 100;

/// How the log names the resets of the PCI core: of the function, and of the link in the AER
/// core's error recovery.
pub(crate) const FUNCTION_RESET: &str = "PCI function reset";
pub(crate) const AER_RESET: &str = "PCI error recovery";

/// How long a shutdown waits for the commands in flight to complete before it deletes the
/// queues (as long as the C driver's `nvme_wait_freeze_timeout()` at shutdown).
const SHUTDOWN_DRAIN: Delta = Delta::from_secs(30);

/// How long a timed-out user admin command waits, beyond one `admin_timeout`, for the reset
/// to note it as lost.
const LOST_WAIT: Delta = Delta::from_secs(10);

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

/// The state of a controller. It changes only by the transitions [`CtrlState::may_become`]
/// allows ([`Ctrl::change`], like C's `nvme_change_ctrl_state()`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(i32)]
pub(crate) enum CtrlState {
    /// Commands are submitted.
    Live = 0,
    /// Being reset: submissions are retried later.
    Resetting = 1,
    /// Disabled after a reset that failed every attempt, or by a removal or shutdown:
    /// submissions fail, and the disks are removed.
    Dead = 2,
    /// Shut down for a system sleep ([`Ctrl::suspend`]): the disks' queues are quiesced, and
    /// a submission that comes anyway is retried later.
    Suspended = 3,
    /// Being removed or shut down: commands are still submitted (the disks drain), but no
    /// reset starts (a command that times out disables the controller instead) and no
    /// suspend; the controller ends `Dead` or goes.
    Deleting = 4,
}

impl CtrlState {
    /// The state stored as `raw`, which only [`Ctrl::change`] writes.
    fn from_raw(raw: i32) -> Self {
        match raw {
            0 => Self::Live,
            1 => Self::Resetting,
            3 => Self::Suspended,
            4 => Self::Deleting,
            // 2; nothing else is ever stored.
            _ => Self::Dead,
        }
    }

    /// Whether a controller in this state may change to `to`.
    fn may_become(self, to: Self) -> bool {
        use CtrlState::*;
        matches!(
            (self, to),
            (Resetting, Live)
                | (Live | Suspended, Resetting)
                | (Live, Suspended)
                | (Live | Resetting | Suspended, Deleting)
                | (Resetting | Deleting, Dead)
        )
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
    /// PCI vendor id.
    pub(crate) vid: u16,
    /// PCI subsystem vendor id.
    pub(crate) ssvid: u16,
    pub(crate) model: [u8; 40],
    pub(crate) serial: [u8; 20],
    pub(crate) firmware_rev: [u8; 8],
    /// Optional NVM commands (`cmd::ONCS_*`).
    pub(crate) oncs: u16,
    /// A volatile write cache is present.
    pub(crate) vwc: bool,
    /// Largest transfer and how data is described (MDTS, SGL support).
    pub(crate) transfer: Transfer,
    /// Namespace identifiers are ignored (the C driver's `NVME_QUIRK_BOGUS_NID`).
    pub(crate) bogus_nid: bool,
    /// Controller ID.
    pub(crate) cntlid: u16,
    /// Controller Type (0: not reported).
    pub(crate) cntrltype: u8,
    /// Discovery Controller Type.
    pub(crate) dctype: u8,
    /// NVM Subsystem NQN, NUL-terminated (empty if not reported).
    pub(crate) subnqn: [u8; 256],
}

impl CtrlInfo {
    /// Identify the controller; `sgl_threshold` is the module parameter.
    pub(crate) fn identify(
        admin: &mut EnabledAdmin,
        regs: &Regs,
        sgl_threshold: u32,
    ) -> Result<Self> {
        admin
            .queue
            .identify::<IdCtrl, _>(regs, 0, cmd::CNS_CONTROLLER, |id| {
                let mdts: u8 = io_read!(id, .mdts);
                let vwc: u8 = io_read!(id, .vwc);
                // MDTS is in minimum pages (4 KiB, checked at probe).
                let sgls = io_project!(id, .sgls).copy_read().get();
                let transfer = Transfer::new(mdts, sgls, sgl_threshold);
                Ok(Self {
                    vid: io_project!(id, .vid).copy_read().get(),
                    ssvid: io_project!(id, .ssvid).copy_read().get(),
                    model: kernel::io::io_project!(id, .mn).copy_read(),
                    serial: kernel::io::io_project!(id, .sn).copy_read(),
                    firmware_rev: kernel::io::io_project!(id, .fr).copy_read(),
                    oncs: io_project!(id, .oncs).copy_read().get(),
                    vwc: vwc & cmd::VWC_PRESENT != 0,
                    transfer,
                    bogus_nid: false,
                    cntlid: io_project!(id, .cntlid).copy_read().get(),
                    cntrltype: io_read!(id, .cntrltype),
                    dctype: io_read!(id, .dctype),
                    subnqn: kernel::io::io_project!(id, .subnqn).copy_read(),
                })
            })
    }
}

/// What the controller reports to the layer above it (the namespaces), whose disks it knows
/// nothing of.
pub(crate) trait CtrlEvents: Send + Sync {
    /// The controller is dead (a reset failed every attempt) or being removed: what is built
    /// on its namespaces must go now. Its requests fail, or were waited for, so removing the
    /// disks does not wait for the controller.
    fn gone(&self);
    /// The controller reported that namespaces were attached, detached or changed: scan
    /// them again.
    fn namespaces_changed(&self) -> Result;
    /// The controller is about to stop for a system sleep: hold new requests in the block
    /// layer.
    fn quiesce(&self);
    /// The controller is coming back (its reset is queued): dispatch requests again.
    fn unquiesce(&self);
}

/// Fault injection for tests, set through debugfs.
pub(crate) struct Faults {
    /// `lose_commands`: this many next commands are kept in their slot but never given to the
    /// controller, as if the device lost them.
    pub(crate) lose: Atomic<u32>,
    /// `fail_resets`: this many next reset attempts fail with the controller left disabled,
    /// as if it did not come back.
    pub(crate) fail_resets: Atomic<u32>,
}

impl Faults {
    /// How the next command is delivered: [`Delivery::Lose`] while `lose` counts down.
    pub(crate) fn delivery(&self) -> Delivery {
        if take_one(&self.lose) {
            Delivery::Lose
        } else {
            Delivery::Give
        }
    }
}

/// A controller, shared by its disks (their queue data), the passthrough ioctls, the
/// interrupt-less paths (hotplug, debugfs) and the reset work. The first field shuts the
/// controller down when the last reference goes, before the queue memory is freed.
#[pin_data(PinnedDrop)]
pub(crate) struct Ctrl {
    _enabled: Enabled,
    /// `rnvme<C>`.
    pub(crate) index: u32,
    pub(crate) regs: Arc<Regs>,
    /// The I/O queues: what the data path submits to.
    pub(crate) queues: QueueSet,
    /// The admin queue: Identify, Abort on timeouts, resets, passthrough. See
    /// [`Ctrl::admin`] and [`Ctrl::live_admin`].
    #[pin]
    admin: Mutex<AdminQueue>,
    /// A [`CtrlState`], changed by [`Ctrl::change`] only.
    state: Atomic<i32>,
    /// A reset of the PCI function is under way ([`Ctrl::function_reset_prepare`] to
    /// [`Ctrl::function_reset_done`]): a reset work item leaves the controller to it.
    function_reset: Atomic<bool>,
    /// Written by debugfs, read by submission and reset.
    pub(crate) faults: Faults,
    /// Admin passthrough commands that fail are logged (C's controller attribute
    /// `passthru_err_log_enabled`, off by default as in C).
    pub(crate) passthru_err_log: Atomic<bool>,
    /// The PCI function, while the driver is bound: a reset turns bus mastering on again.
    pci: DmaDevice,
    /// Runs a reset, queued by [`Ctrl::schedule_reset`].
    #[pin]
    reset_work: Work<Ctrl>,
    /// Handles the admin queue's asynchronous events; kicked when a reset is done.
    admin_work: Arc<AdminWork>,
    /// Told when the controller is dead or removed ([`Ctrl::set_events`]). (What it refers
    /// to refers to the controller: [`Ctrl::remove`] breaks that cycle.)
    #[pin]
    events: Mutex<Option<Arc<dyn CtrlEvents>>>,
}

impl_has_work! {
    impl HasWork<Self> for Ctrl { self.reset_work }
}

impl WorkItem for Ctrl {
    type Pointer = Arc<Ctrl>;

    fn run(this: Arc<Ctrl>) {
        this.reset();
    }
}

impl Ctrl {
    /// The controller with `admin` and `queues`, then the I/O queues created on it.
    pub(crate) fn new(
        dev: &Device<Bound>,
        index: u32,
        regs: Arc<Regs>,
        admin: EnabledAdmin,
        queues: QueueSet,
        admin_work: Arc<AdminWork>,
    ) -> Result<Arc<Self>> {
        let EnabledAdmin { enabled, queue } = admin;
        let ctrl = Arc::pin_init(
            try_pin_init!(Self {
                _enabled: enabled,
                index,
                regs,
                queues,
                admin <- new_mutex!(queue),
                state: Atomic::new(CtrlState::Live as i32),
                function_reset: Atomic::new(false),
                faults: Faults {
                    lose: Atomic::new(0),
                    fail_resets: Atomic::new(0),
                },
                passthru_err_log: Atomic::new(false),
                pci: DmaDevice::new(dev)?,
                reset_work <- new_work!("rust_nvme_mq::reset"),
                admin_work,
                events <- new_mutex!(None),
            }? Error),
            GFP_KERNEL,
        )?;
        ctrl.queues.create(&mut ctrl.admin.lock(), &ctrl.regs)?;
        Ok(ctrl)
    }

    pub(crate) fn state(&self) -> CtrlState {
        CtrlState::from_raw(self.state.load(Relaxed))
    }

    /// Change the state from `from` to `to`, if that transition is allowed; whether this call
    /// did it (of callers racing for it, only one does).
    fn change(&self, from: CtrlState, to: CtrlState) -> bool {
        from.may_become(to) && self.state.cmpxchg(from as i32, to as i32, Relaxed).is_ok()
    }

    /// Change the state to `to` from whatever it is, if that transition is allowed: the
    /// state it was (`Ok`), or the state that may not become `to` (`Err`).
    fn change_any(&self, to: CtrlState) -> Result<CtrlState, CtrlState> {
        let mut now = self.state();
        loop {
            if !now.may_become(to) {
                return Err(now);
            }
            match self.state.cmpxchg(now as i32, to as i32, Relaxed) {
                Ok(_) => return Ok(now),
                Err(raw) => now = CtrlState::from_raw(raw),
            }
        }
    }

    /// The admin queue, locked.
    pub(crate) fn admin(&self) -> MutexGuard<'_, AdminQueue> {
        self.admin.lock()
    }

    /// The admin queue, locked, for a command from outside the driver's own bring-up (an
    /// ioctl, a rescan): `ENODEV` unless the controller is live (or, being removed, still
    /// takes commands) and its registers answer.
    pub(crate) fn live_admin(&self) -> Result<MutexGuard<'_, AdminQueue>> {
        let admin = self.admin.lock();
        let live = matches!(self.state(), CtrlState::Live | CtrlState::Deleting);
        if !live || self.regs.csts().is_none() {
            return Err(ENODEV);
        }
        Ok(admin)
    }

    /// Run a user's admin command `sqe` (the passthrough ioctls) on a live controller and
    /// wait for it, for `timeout` (`None`: `admin_timeout`), without holding the admin lock:
    /// Aborts, resets and the driver's other commands go on meanwhile. Returns how it
    /// completed. A command that does not complete in time resets the controller,
    /// like the C driver's `nvme_timeout()` for admin commands, and fails with `EINTR` (as a
    /// cancelled command does in C) once the controller no longer holds it, so that its data
    /// buffer can be reused. `EINTR` too if a reset or removal loses it meanwhile.
    pub(crate) fn run_user_admin(
        self: &Arc<Self>,
        sqe: Sqe,
        timeout: Option<Delta>,
    ) -> Result<Completion> {
        let opcode = sqe.opcode();
        let (ticket, admin_timeout) = {
            let mut admin = self.live_admin()?;
            (admin.submit_user(&self.regs, sqe)?, admin.timeout())
        };
        let timeout = timeout.unwrap_or(admin_timeout);
        // Reap only when nobody else holds the lock: whoever does reaps for everybody.
        let waited = read_poll_timeout(
            || match self.admin.try_lock() {
                Some(mut admin) => admin.poll(&self.regs, &ticket),
                None => Ok(None),
            },
            |outcome| outcome.is_some(),
            POLL_INTERVAL,
            timeout,
        );
        let why = match waited {
            Ok(Some(outcome)) => return outcome.into_result(),
            Err(e) if e == EIO => "outstanding on a failed controller (CSTS.CFS)",
            _ => "timed out",
        };
        if let Some(outcome) = self.admin.lock().take(&ticket) {
            return outcome.into_result();
        }
        pr_warn!(
            "rnvme{}: admin command {:#04x} {} after {} ms: resetting the controller\n",
            self.index,
            opcode,
            why,
            timeout.as_millis()
        );
        self.lose_in_reset(ticket, opcode, admin_timeout)
    }

    /// Reset the controller for user command `ticket` (opcode `opcode`), which did not
    /// complete, and wait until the reset has disabled the controller and noted the command
    /// lost (`EINTR`); `EIO` if that does not happen within `admin_timeout` and a bit.
    fn lose_in_reset(
        self: &Arc<Self>,
        ticket: Ticket,
        opcode: u8,
        admin_timeout: Delta,
    ) -> Result<Completion> {
        let _ = self.schedule_reset();
        // The reset (or, during removal, the disable) notes the command as lost once the
        // controller is disabled; that takes at most one driver command (Delete I/O queue)
        // beyond what the controller needs.
        let lost = read_poll_timeout(
            || Ok(self.admin.lock().take(&ticket)),
            |outcome| outcome.is_some(),
            POLL_INTERVAL,
            admin_timeout + LOST_WAIT,
        );
        match lost {
            Ok(Some(outcome)) => outcome.into_result(),
            _ => {
                // Not seen to happen: the controller may still hold the command, whose data
                // buffer the next command then shares.
                pr_err!(
                    "rnvme{}: admin command {:#04x} still outstanding after a reset\n",
                    self.index,
                    opcode
                );
                self.admin.lock().abandon(ticket);
                Err(EIO)
            }
        }
    }

    /// Identify Namespace `nsid` on a live controller: its format, `None` if it is empty or
    /// its format is not supported (said on `dev`).
    pub(crate) fn identify_ns(&self, dev: &Device, nsid: u32) -> Result<Option<cmd::NsFormat>> {
        self.live_admin()?
            .identify::<cmd::IdNs, _>(&self.regs, nsid, cmd::CNS_NAMESPACE, |id| {
                cmd::ns_format(dev, nsid, id)
            })
    }

    /// Tell `events` when the controller is dead or removed.
    pub(crate) fn set_events(&self, events: Arc<dyn CtrlEvents>) {
        *self.events.lock() = Some(events);
    }

    /// What [`Ctrl::set_events`] set, if it is not taken back yet (removal).
    fn events(&self) -> Option<Arc<dyn CtrlEvents>> {
        self.events.lock().clone()
    }

    /// Tell the layer above that namespaces changed ([`CtrlEvents::namespaces_changed`]);
    /// `ENODEV` once the controller is being removed.
    pub(crate) fn namespaces_changed(&self) -> Result {
        self.events().ok_or(ENODEV)?.namespaces_changed()
    }

    /// Whether the controller is dead or being removed (or shut down).
    pub(crate) fn stopped(&self) -> bool {
        matches!(self.state(), CtrlState::Deleting | CtrlState::Dead)
    }

    /// Start a reset, unless one is already running or the controller is dead or being
    /// removed. From now on submissions are turned away with `BLK_STS_RESOURCE` (blk-mq
    /// retries them) until the reset is over. The reset runs from a work item, see
    /// [`Ctrl::reset`]. Returns whether this call started it.
    pub(crate) fn schedule_reset(self: &Arc<Self>) -> bool {
        loop {
            match self.state() {
                CtrlState::Deleting => {
                    self.give_up();
                    return false;
                }
                CtrlState::Live => {
                    if self.change(CtrlState::Live, CtrlState::Resetting) {
                        // Cannot be queued already: only a change to `Resetting` queues it.
                        let _ = workqueue::system_unbound().enqueue(self.clone());
                        return true;
                    }
                    // Changed meanwhile: look again.
                }
                // A reset runs (it requeues), the controller is suspended or dead.
                CtrlState::Resetting | CtrlState::Suspended | CtrlState::Dead => return false,
            }
        }
    }

    /// Reset the controller now and wait for the reset to finish (`NVME_IOCTL_RESET`), with
    /// the C driver's `nvme_reset_ctrl_sync()` answers: `EBUSY` if no reset could start (one
    /// runs already, a PCI function reset holds the controller, or it is suspended, dead or
    /// being removed), `ENETRESET` if the controller is not live once the reset is over.
    pub(crate) fn reset_sync(self: &Arc<Self>) -> Result {
        if !self.schedule_reset() {
            return Err(EBUSY);
        }
        self.reset_work.flush();
        match self.state() {
            CtrlState::Live => Ok(()),
            _ => Err(ENETRESET),
        }
    }

    /// Instead of a reset while the controller is being removed: disable it and requeue what
    /// it held, which then fails (the state is `Dead`), so that the removal of the disks does
    /// not wait for a command the controller lost. Nothing to do if a reset runs (it requeues)
    /// or the controller is dead already.
    fn give_up(&self) {
        if !self.change(CtrlState::Deleting, CtrlState::Dead) {
            return;
        }
        let failed = self.stop_and_requeue_all(&mut self.admin.lock());
        pr_err!(
            "rnvme{}: a command timed out while the controller is removed: disabled it, {} requests fail\n",
            self.index,
            failed
        );
    }

    /// At removal, before the controller goes: stop resets (waiting for one that runs), then
    /// have what is built on the namespaces removed ([`CtrlEvents::gone`]: the disks, which
    /// waits for their requests).
    pub(crate) fn remove(&self) {
        // A dead controller stays dead.
        let _ = self.change_any(CtrlState::Deleting);
        self.admin_work.stop();
        self.reset_work.flush();
        let events = self.events.lock().take();
        if let Some(events) = events {
            events.gone();
        }
        // No request is left: delete the I/O queues before the controller is shut down (when
        // the last reference to it goes).
        let mut admin = self.admin.lock();
        self.queues.stop_accepting();
        self.delete_io_queues(&mut admin);
        // Shut down now rather than with the last reference: an ioctl waiting for a user's
        // admin command holds one. Its command is lost, and it returns.
        self.regs.shutdown();
        let _ = admin.clear();
    }

    /// System suspend (and the freeze and poweroff phases of hibernation), like the C
    /// driver's simple suspend (`nvme_dev_disable(dev, true)`): with resets over and none to
    /// come (`Suspended`), and the asynchronous event work done, stop dispatch (the disks'
    /// queues are quiesced: new requests wait in the block layer), wait (at most
    /// [`SHUTDOWN_DRAIN`]) for the commands in flight, delete the I/O queues and shut the
    /// controller down (CC.SHN: it flushes its cache before power goes), then disable it.
    /// Commands that did not complete are given back to the block layer and go out after
    /// [`Ctrl::resume`]. A controller that is dead or being removed is left as it is, and so
    /// is one being reset: the reset needs the device lock, which the PM core holds while
    /// this runs, so waiting for it here would only make it fail; it finishes once this
    /// returns.
    pub(crate) fn suspend(&self) {
        if !self.change(CtrlState::Live, CtrlState::Suspended) {
            if self.state() == CtrlState::Resetting {
                pr_warn!("rnvme{}: not suspended: a reset is running\n", self.index);
            }
            return;
        }
        self.admin_work.flush();
        if let Some(events) = self.events() {
            events.quiesce();
        }
        self.drain();
        let mut admin = self.admin.lock();
        self.delete_io_queues(&mut admin);
        self.regs.shutdown();
        let _ = self.regs.disable();
        let requeued = self.queues.requeue_all_and_clear();
        let _ = admin.clear();
        pr_info!(
            "rnvme{}: suspended, {} requests wait for resume\n",
            self.index,
            requeued
        );
    }

    /// System resume (and thaw and restore), like the C driver's simple resume: a reset
    /// brings the controller back (see [`Ctrl::reset`]; from a work item, as the reset needs
    /// the device lock, which the PM core holds now), and the disks' queues dispatch again:
    /// their requests are retried until the reset is done.
    pub(crate) fn resume(self: &Arc<Self>) {
        if !self.change(CtrlState::Suspended, CtrlState::Resetting) {
            return;
        }
        pr_info!("rnvme{}: resuming\n", self.index);
        // Cannot be queued already: only a change to `Resetting` queues it.
        let _ = workqueue::system_unbound().enqueue(self.clone());
        if let Some(events) = self.events() {
            events.unquiesce();
        }
    }

    /// Before a reset of the PCI function (the `reset` attribute in sysfs, another driver,
    /// a bus reset), with the device lock held, like the C driver's `nvme_reset_prepare()`:
    /// take the controller out of service as the first half of a reset does (submissions
    /// turned away and retried by blk-mq, the I/O queues deleted, the controller disabled, the
    /// requests it held given back to the block layer), so that the function reset loses
    /// nothing; the state is `Resetting` until [`Ctrl::function_reset_done`]. `cause` names
    /// the reset in the log. Returns whether the controller is held for the reset (false: it
    /// was dead, suspended or being removed, and is left as it is).
    ///
    /// Decided under the admin lock, which a reset work item holds for a whole attempt, up to
    /// its return to `Live`: a reset that is over shows `Live` here (taken out of service
    /// again), one that is not shows `Resetting` (joined: its next attempts need the device
    /// lock, so none can succeed before the function reset is done). A controller that is
    /// dead, suspended or being removed is left as it is.
    pub(crate) fn function_reset_prepare(&self, cause: &str) -> bool {
        // Before the admin lock: a reset attempt that holds it and waits for the device lock
        // (which the PCI core holds now) gives up at once.
        self.function_reset.store(true, Relaxed);
        let mut admin = self.admin.lock();
        let joined = loop {
            match self.state() {
                CtrlState::Live if self.change(CtrlState::Live, CtrlState::Resetting) => {
                    break false;
                }
                // A reset was scheduled meanwhile (without the admin lock): join it.
                CtrlState::Live => continue,
                CtrlState::Resetting => break true,
                _ => {
                    self.function_reset.store(false, Relaxed);
                    return false;
                }
            }
        };
        let requeued = self.stop_and_requeue_all(&mut admin);
        pr_info!(
            "rnvme{}: {}: controller disabled, {} requests requeued{}\n",
            self.index,
            cause,
            requeued,
            if joined { " (a reset was running)" } else { "" }
        );
        true
    }

    /// After the function reset [`Ctrl::function_reset_prepare`] prepared for, under the same
    /// holding of the device lock (`dev`, with the configuration space restored): bring the
    /// controller back as the second half of a reset does, at once (a reset work item would
    /// need the device lock). If that fails, the reset work item retries, as after any failed
    /// attempt. Nothing to do if the preparation left the controller alone (dead, suspended,
    /// being removed) or a reset work item gave up meanwhile (dead).
    pub(crate) fn function_reset_done(self: &Arc<Self>, dev: &Device<Core<'_>>, cause: &str) {
        let result = {
            let mut admin = self.admin.lock();
            // A reset work item queued from now on (the one below included) does its work.
            if !self.function_reset.xchg(false, Relaxed) || self.state() != CtrlState::Resetting {
                return;
            }
            self.cycle(&mut admin, Some(dev)).1
        };
        match result {
            Ok(()) => pr_info!("rnvme{}: {}: controller back\n", self.index, cause),
            Err(e) => {
                pr_warn!(
                    "rnvme{}: {}: controller not back ({:?}), resetting it\n",
                    self.index,
                    cause,
                    e
                );
                // Queued at most once: a queued work item is not queued again.
                let _ = workqueue::system_unbound().enqueue(self.clone());
            }
        }
    }

    /// AER: an uncorrectable error was reported for the controller or the link above it
    /// (device lock held), as the C driver's `nvme_error_detected()` answers it. A non-fatal
    /// error leaves the link working: nothing to recover. After a fatal one the AER core
    /// resets the link: the controller is taken out of service first, as for a function reset
    /// (its requests requeued; the registers of a frozen link read all ones, so no command is
    /// sent), and [`Ctrl::slot_reset`] brings it back. When the recovery failed the device
    /// cannot be reached: the reset work item tries it, and gives the controller up (its
    /// requests fail, its disks go) if it does not come back.
    pub(crate) fn error_detected(self: &Arc<Self>, state: pci::ChannelState) -> pci::Recovery {
        match state {
            pci::ChannelState::Normal => {
                pr_info!("rnvme{}: non-fatal PCI error reported\n", self.index);
                pci::Recovery::CanRecover
            }
            pci::ChannelState::Frozen => {
                if self.function_reset_prepare(AER_RESET) {
                    pci::Recovery::NeedReset
                } else {
                    pci::Recovery::Disconnect
                }
            }
            pci::ChannelState::PermanentFailure => {
                pr_err!("rnvme{}: PCI error recovery failed\n", self.index);
                self.function_reset.store(false, Relaxed);
                match self.state() {
                    CtrlState::Live => {
                        self.schedule_reset();
                    }
                    // Held for the link reset that did not come: the work item takes it on.
                    CtrlState::Resetting => {
                        let _ = workqueue::system_unbound().enqueue(self.clone());
                    }
                    _ => {}
                }
                pci::Recovery::Disconnect
            }
        }
    }

    /// AER: the link was reset after the fatal error [`Ctrl::error_detected`] took the
    /// controller out of service for (device lock held), as the C driver's `nvme_slot_reset()`:
    /// the configuration space the reset cleared (base address, command register, MSI-X) is
    /// written back, and the controller comes back as after a function reset.
    pub(crate) fn slot_reset(self: &Arc<Self>, pdev: &pci::Device<Core<'_>>) -> pci::Recovery {
        pdev.restore_state();
        self.function_reset_done(pdev.as_ref(), AER_RESET);
        pci::Recovery::Recovered
    }

    /// Wait (at most [`SHUTDOWN_DRAIN`]) until no command is in flight; submissions are turned
    /// away already.
    fn drain(&self) {
        self.queues.stop_accepting();
        // Without the admin lock: a command that times out meanwhile gets its Abort.
        let start = kernel::time::Instant::<kernel::time::Monotonic>::now();
        while self.queues.busy() && start.elapsed() < SHUTDOWN_DRAIN {
            // Poll queues have no interrupt; the others are reaped by theirs too.
            self.queues.process_completions();
            fsleep(Delta::from_millis(1));
        }
    }

    /// System shutdown (reboot, power-off, kexec) with the driver still bound, like the C
    /// driver's `nvme_shutdown()`: stop resets, stop taking commands and wait (at most
    /// [`SHUTDOWN_DRAIN`]) for those in flight, delete the I/O queues, then shut the
    /// controller down (CC.SHN) so that it knows power goes away. The controller stays
    /// disabled (`Dead`): requests still held, and any submitted later, fail; a later unbind
    /// finds nothing left to shut down.
    pub(crate) fn shutdown(&self) {
        let before = self.change_any(CtrlState::Deleting);
        self.admin_work.stop();
        self.reset_work.flush();
        // A suspended controller is shut down already; a dead one is disabled.
        if before != Ok(CtrlState::Live) && before != Ok(CtrlState::Resetting) {
            return;
        }
        if self.state() == CtrlState::Dead {
            return;
        }
        // A command that times out meanwhile gets its Abort (or, as resets are off now,
        // `give_up` disables the controller).
        self.drain();
        let mut admin = self.admin.lock();
        if !self.change(CtrlState::Deleting, CtrlState::Dead) {
            // `give_up` disabled the controller and failed what it held.
            return;
        }
        self.delete_io_queues(&mut admin);
        self.regs.shutdown();
        let failed = self.queues.requeue_all_and_clear();
        let _ = admin.clear();
        if failed > 0 {
            pr_warn!(
                "rnvme{}: shut down with {} commands not completed\n",
                self.index,
                failed
            );
        }
    }

    /// Delete the I/O queues on the controller before it is disabled or shut down, as the C
    /// driver does (a controller disabled with commands on its queues may not cope well; QEMU
    /// 7.2 has crashed then). Only while the controller runs (ready, no fatal status); a
    /// failure is logged and the controller is disabled anyway.
    fn delete_io_queues(&self, admin: &mut AdminQueue) {
        if self.regs.csts().is_some_and(|c| c.rdy() && !c.cfs()) {
            let _ = self.queues.delete(admin, &self.regs);
        }
    }

    /// Reset the controller (the work item of [`Ctrl::schedule_reset`]): disable it (it then
    /// no longer touches memory), give every request it held back to the block layer, redo
    /// the PCI setup (bus mastering), then enable the controller again and recreate the I/O
    /// queues. While this runs, submissions (the requeued requests too) are turned away with
    /// `BLK_STS_RESOURCE` and retried by blk-mq, so they complete once the controller is back.
    ///
    /// A failed attempt is retried, [`RESET_ATTEMPTS`] in all, [`RESET_RETRY_DELAY`] apart.
    /// A controller that does not come back is left disabled: every request fails at once and
    /// its disks are removed.
    fn reset(&self) {
        let mut attempt = 1;
        let err = loop {
            let (requeued, result) = match self.reset_attempt() {
                Some(outcome) => outcome,
                None => return self.left_to_function_reset(),
            };
            let e = match result {
                Ok(()) => {
                    pr_info!(
                        "rnvme{}: controller reset done, {} requests requeued (attempt {})\n",
                        self.index,
                        requeued,
                        attempt
                    );
                    return;
                }
                // It waited for the device lock, which the PCI core holds for it.
                Err(_) if self.function_reset.load(Relaxed) => {
                    return self.left_to_function_reset()
                }
                Err(e) => e,
            };
            pr_warn!(
                "rnvme{}: controller reset attempt {} of {} failed ({:?})\n",
                self.index,
                attempt,
                RESET_ATTEMPTS,
                e
            );
            if attempt == RESET_ATTEMPTS || self.state() == CtrlState::Deleting {
                break e;
            }
            attempt += 1;
            fsleep(RESET_RETRY_DELAY);
        };
        self.die(attempt, err);
    }

    /// One attempt of [`Ctrl::reset`], under the admin lock: how many requests it requeued
    /// and whether the controller is back (`Live` again, still under the lock: a function
    /// reset that takes it next sees `Live`, not a reset that is over). `None`, without
    /// touching the controller, while the PCI function is being reset.
    fn reset_attempt(&self) -> Option<(usize, Result)> {
        let mut admin = self.admin.lock();
        if self.function_reset.load(Relaxed) {
            return None;
        }
        Some(self.cycle(&mut admin, None))
    }

    /// Both halves of a reset with the admin lock held ([`Ctrl::stop_and_requeue_all`], then
    /// [`Ctrl::restart`] with `locked`) and, if the controller is back, [`Ctrl::live_again`]
    /// before the lock goes: how many requests were requeued, and whether it is back.
    fn cycle(&self, admin: &mut AdminQueue, locked: Option<&Device<Core<'_>>>) -> (usize, Result) {
        let requeued = self.stop_and_requeue_all(admin);
        let result = self.restart(admin, locked);
        if result.is_ok() {
            self.live_again();
        }
        (requeued, result)
    }

    /// A reset work item that finds the PCI function being reset stops: the end of the
    /// function reset brings the controller back (`function_reset_done`, which queues the
    /// work item again if that fails).
    fn left_to_function_reset(&self) {
        pr_info!(
            "rnvme{}: controller reset left to the PCI function reset\n",
            self.index
        );
    }

    /// The end of a reset that failed `attempts` times, the last with `err`: the controller
    /// stays disabled, its requests fail, and its disks go ([`CtrlEvents::gone`]).
    fn die(&self, attempts: u32, err: Error) {
        // From `Resetting`, or from `Deleting` (a removal waits for this reset); `Dead`
        // already if a command timed out meanwhile.
        let before = self.change_any(CtrlState::Dead);
        let _ = self.regs.disable();
        pr_err!(
            "rnvme{}: controller did not come back after {} reset attempts ({:?}): removing its disks\n",
            self.index,
            attempts,
            err
        );
        // Requests requeued by the last attempt now fail in `queue_rq`, which lets the removal
        // of the disks finish. At unbind, `remove` has them removed instead.
        if before == Ok(CtrlState::Resetting) {
            if let Some(events) = self.events() {
                events.gone();
            }
        }
    }

    /// The end of a successful reset: take submissions again, and arm the Asynchronous Event
    /// Request again (the reset lost it).
    fn live_again(&self) {
        self.queues.accept();
        // Unless a removal began meanwhile: commands go on then too, in `Deleting`.
        let _ = self.change(CtrlState::Resetting, CtrlState::Live);
        self.admin_work.kick();
    }

    /// Redo the PCI setup a reset needs, which the function loses when it is reset or when it
    /// is turned off behind the driver's back (a DMA fault handler, a write to the command
    /// register): memory decoding (what `pci_enable_device_mem()` turned on at probe; calling
    /// it again would only count up) and bus mastering. Fails with `ENODEV` once the driver
    /// has started to unbind, with `EBUSY` if the device lock stays taken.
    fn enable_pci(&self) -> Result {
        // The device lock is only tried: an unbind holds it while `remove` waits for this
        // reset. Someone else (a sysfs operation) holds it only briefly.
        let mut tries = 0;
        loop {
            match self.pci.try_with_locked(|dev| self.enable_pci_locked(dev)) {
                Err(e)
                    if e == EBUSY
                        && tries < PCI_LOCK_TRIES
                        && self.state() != CtrlState::Deleting
                        && !self.function_reset.load(Relaxed) =>
                {
                    tries += 1;
                    fsleep(Delta::from_millis(10));
                }
                Err(e) => return Err(e),
                Ok(result) => return result,
            }
        }
    }

    /// [`Ctrl::enable_pci`] with the device lock held, the driver bound (`Core`, which
    /// `set_master` needs).
    fn enable_pci_locked(&self, dev: &Device<Core<'_>>) -> Result {
        let pdev: &pci::Device<Core<'_>> = dev.try_into()?;
        let config = pdev.config_space();
        let command = config.read(PCI_COMMAND);
        if !command.memory() {
            dev_warn!(dev, "rnvme{}: memory decoding was off\n", self.index);
            config.write_reg(command.with_memory(true));
        }
        if !command.bus_master() {
            dev_warn!(dev, "rnvme{}: bus mastering was off\n", self.index);
        }
        pdev.set_master();
        // What a link reset's recovery writes back (`slot_reset`).
        pdev.save_state()
    }

    /// First half of a reset: stop submissions, disable the controller, requeue what it held
    /// and empty every queue. Returns how many requests were requeued.
    fn stop_and_requeue_all(&self, admin: &mut AdminQueue) -> usize {
        self.queues.stop_accepting();
        self.delete_io_queues(admin);
        let _ = self.regs.disable();
        let requeued = self.queues.requeue_all_and_clear();
        // Cannot fail: the admin queue has `ADMIN_DEPTH` entries.
        let _ = admin.clear();
        requeued
    }

    /// Second half of a reset: redo the PCI setup (with `locked`, the device whose lock the
    /// caller holds; else the lock is taken here), enable the controller and recreate the I/O
    /// queues.
    fn restart(&self, admin: &mut AdminQueue, locked: Option<&Device<Core<'_>>>) -> Result {
        if take_one(&self.faults.fail_resets) {
            return Err(ENODEV);
        }
        match locked {
            Some(dev) => self.enable_pci_locked(dev)?,
            None => self.enable_pci()?,
        }
        // With memory decoding off, the first half could not disable the controller (its
        // registers did not answer): it would still run on the old queues, with the admin
        // queue out of step (QEMU then executes stale admin entries). Disable it now.
        self.regs.disable()?;
        admin.enable(&self.regs)?;
        self.queues.set_count(admin, &self.regs)?;
        self.queues.create(admin, &self.regs)
    }
}

/// Count `n` down by one if it is not 0; whether it was.
fn take_one(n: &Atomic<u32>) -> bool {
    let mut now = n.load(Relaxed);
    while now > 0 {
        match n.cmpxchg(now, now - 1, Relaxed) {
            Ok(_) => return true,
            Err(then) => now = then,
        }
    }
    false
}

#[pinned_drop]
impl PinnedDrop for Ctrl {
    fn drop(self: Pin<&mut Self>) {
        pr_info!(
            "rnvme{} queues at removal: {}\n",
            self.index,
            COUNTER_COLUMNS
        );
        for line in self.queues.counters() {
            pr_info!("rnvme{} {}\n", self.index, line);
        }
    }
}

#[kunit_tests(rust_nvme_mq_ctrl_state)]
mod tests {
    use super::*;

    const ALL: [CtrlState; 5] = [
        CtrlState::Live,
        CtrlState::Resetting,
        CtrlState::Dead,
        CtrlState::Suspended,
        CtrlState::Deleting,
    ];

    #[test]
    fn stored_state_reads_back() {
        for s in ALL {
            assert_eq!(CtrlState::from_raw(s as i32), s);
        }
    }

    /// The rules the driver relies on: `Dead` is final; a controller being removed is only
    /// disabled, never reset, suspended or live again; only a reset makes it live; a sleep
    /// starts from live only and ends in a reset; nothing changes to what it is.
    #[test]
    fn transitions() {
        use CtrlState::*;
        for s in ALL {
            assert!(!Dead.may_become(s));
            assert!(!s.may_become(s));
            assert_eq!(Deleting.may_become(s), s == Dead);
            assert_eq!(s.may_become(Live), s == Resetting);
            assert_eq!(s.may_become(Suspended), s == Live);
            assert_eq!(Suspended.may_become(s), matches!(s, Resetting | Deleting));
        }
        assert!(Live.may_become(Resetting) && Live.may_become(Deleting));
        assert!(Resetting.may_become(Dead) && Resetting.may_become(Deleting));
        assert!(!Live.may_become(Dead));
    }
}
