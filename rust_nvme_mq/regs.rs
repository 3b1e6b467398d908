// SPDX-License-Identifier: GPL-2.0

//! Controller registers (NVMe base specification, "Controller Registers") and doorbells.

use kernel::{
    io::{poll::read_poll_timeout, register, register::Array, Io},
    pci,
    prelude::*,
    time::Delta,
};

/// Size of the register block mapped from BAR0 before the doorbells.
pub(crate) const SIZE: usize = 0x1000;

/// First doorbell; queue `y`'s SQ tail is at `DOORBELLS + 2y * stride`, its CQ head at
/// `DOORBELLS + (2y + 1) * stride`.
const DOORBELLS: usize = 0x1000;
/// What a register reads as when the device is gone.
const GONE: u32 = !0;
/// How often to look at CSTS while waiting for it to change.
const POLL_INTERVAL: Delta = Delta::from_millis(1);
/// How long to wait for a shutdown to complete.
const SHUTDOWN_TIMEOUT: Delta = Delta::from_secs(5);

register! {
    /// Controller Capabilities (read as two 32-bit halves, like the C driver does).
    pub(crate) CAP(u64) @ 0x00 {
        /// Memory Page Size Minimum: 2 ^ (12 + MPSMIN) bytes.
        51:48 mpsmin;
        /// Command Sets Supported: the NVM command set.
        37:37 css_nvm => bool;
        /// Doorbell Stride: 2 ^ (2 + DSTRD) bytes.
        35:32 dstrd;
        /// Timeout: worst case time for CSTS.RDY to change, in 500 ms units.
        31:24 to;
        /// Maximum Queue Entries Supported (0's based).
        15:0 mqes;
    }

    /// Version.
    pub(crate) VS(u32) @ 0x08 {
        31:16 major;
        15:8 minor;
    }

    /// Controller Configuration.
    pub(crate) CC(u32) @ 0x14 {
        /// I/O Completion Queue Entry Size, 2 ^ IOCQES bytes.
        23:20 iocqes;
        /// I/O Submission Queue Entry Size, 2 ^ IOSQES bytes.
        19:16 iosqes;
        /// Shutdown Notification (0 none, [`SHN_NORMAL`]).
        15:14 shn;
        /// Arbitration Mechanism Selected (0 round robin).
        13:11 ams;
        /// Memory Page Size, 2 ^ (12 + MPS) bytes.
        10:7 mps;
        /// I/O Command Set Selected (0 NVM).
        6:4 css;
        /// Enable.
        0:0 en => bool;
    }

    /// Controller Status.
    pub(crate) CSTS(u32) @ 0x1c {
        /// Shutdown Status, see [`CSTS::shutdown_status`].
        3:2 shst;
        /// Controller Fatal Status.
        1:1 cfs => bool;
        /// Ready.
        0:0 rdy => bool;
    }

    /// Admin Queue Attributes.
    pub(crate) AQA(u32) @ 0x24 {
        /// Admin Completion Queue Size (0's based).
        27:16 acqs;
        /// Admin Submission Queue Size (0's based).
        11:0 asqs;
    }
}

register! {
    /// Admin Submission Queue Base Address (64 bit, page aligned), as its two 32-bit halves,
    /// low first: written in that order, as the C driver's `lo_hi_writeq()` does.
    pub(crate) ASQ(u32)[2] @ 0x28 {
        31:0 half;
    }

    /// Admin Completion Queue Base Address, as [`ASQ`].
    pub(crate) ACQ(u32)[2] @ 0x30 {
        31:0 half;
    }
}

register! {
    /// PCI Command register, in the configuration space of the function (not in BAR0).
    pub(crate) PCI_COMMAND(u16) @ 0x04 {
        /// Bus Master Enable.
        2:2 bus_master => bool;
        /// Memory Space Enable: BAR0 (the registers) answers.
        1:1 memory => bool;
    }
}

impl CAP {
    /// The largest queue the controller supports, in entries.
    pub(crate) fn max_queue_entries(self) -> u32 {
        self.mqes().get() as u32 + 1
    }

    /// Worst case time for CSTS.RDY to change.
    pub(crate) fn ready_timeout(self) -> Delta {
        Delta::from_millis(self.to().get().max(1) as i64 * 500)
    }

    /// Doorbell stride in bytes.
    pub(crate) fn doorbell_stride(self) -> usize {
        4 << self.dstrd().get()
    }

    /// Smallest memory page size, as a shift.
    pub(crate) fn min_page_shift(self) -> u32 {
        12 + self.mpsmin().get() as u32
    }
}

/// CC.SHN: normal shutdown.
const SHN_NORMAL: u32 = 1;

/// CSTS.SHST, the progress of a shutdown (CC.SHN).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ShutdownStatus {
    /// Normal operation, no shutdown requested.
    Normal,
    /// Shutdown processing occurring.
    Occurring,
    /// Shutdown processing complete.
    Complete,
}

impl CSTS {
    /// The Shutdown Status field; its reserved value (3) is an error (`EIO`).
    pub(crate) fn shutdown_status(self) -> Result<ShutdownStatus> {
        match self.shst().get() {
            0 => Ok(ShutdownStatus::Normal),
            1 => Ok(ShutdownStatus::Occurring),
            2 => Ok(ShutdownStatus::Complete),
            _ => Err(EIO),
        }
    }
}

/// A doorbell register: its offset in BAR0.
#[derive(Clone, Copy)]
pub(crate) struct Doorbell(usize);

/// The doorbells of a queue pair: the submission queue's tail, the completion queue's head.
#[derive(Clone, Copy)]
pub(crate) struct Doorbells {
    pub(crate) sq: Doorbell,
    pub(crate) cq: Doorbell,
}

/// Access to the controller's registers and doorbells, shared with the queues.
pub(crate) struct Regs {
    bar: pci::DevresBar<SIZE>,
    cap: CAP,
}

impl Regs {
    /// Map BAR0 and read CAP.
    pub(crate) fn map(pdev: &pci::Device<kernel::device::Core<'_>>) -> Result<Self> {
        let bar = pdev.iomap_region_sized::<SIZE>(0, c"rust_nvme_mq")?;
        let lo = bar.read32(0);
        let hi = bar.read32(4);
        let cap = CAP::from(u64::from(lo) | (u64::from(hi) << 32));
        Ok(Self {
            bar: bar.into_devres()?,
            cap,
        })
    }

    /// Controller Capabilities, as read at probe.
    pub(crate) fn cap(&self) -> CAP {
        self.cap
    }

    /// The version, `None` if the device is gone.
    pub(crate) fn version(&self) -> Option<VS> {
        self.bar.try_access().map(|bar| bar.read(VS))
    }

    /// Controller Status, `None` if the device is gone.
    pub(crate) fn csts(&self) -> Option<CSTS> {
        let csts = self.bar.try_access().map(|bar| bar.read(CSTS))?;
        (u32::from(csts) != GONE).then_some(csts)
    }

    /// Controller Configuration, `None` if the device is gone.
    pub(crate) fn cc(&self) -> Option<CC> {
        let cc = self.bar.try_access().map(|bar| bar.read(CC))?;
        (u32::from(cc) != GONE).then_some(cc)
    }

    pub(crate) fn set_cc(&self, cc: CC) {
        if let Some(bar) = self.bar.try_access() {
            bar.write_reg(cc);
        }
    }

    /// Program the admin queue pair: `depth` entries each, at `sq` and `cq`.
    pub(crate) fn set_admin_queues(&self, depth: u16, sq: u64, cq: u64) -> Result {
        let size = u32::from(depth) - 1;
        let aqa = AQA::zeroed().try_with_asqs(size)?.try_with_acqs(size)?;
        let bar = self.bar.try_access().ok_or(ENODEV)?;
        bar.write_reg(aqa);
        bar.write(ASQ::at(0), ASQ::from(sq as u32));
        bar.write(ASQ::at(1), ASQ::from((sq >> 32) as u32));
        bar.write(ACQ::at(0), ACQ::from(cq as u32));
        bar.write(ACQ::at(1), ACQ::from((cq >> 32) as u32));
        Ok(())
    }

    /// The two doorbells of queue `qid`, their offsets computed once (for the queue's life).
    pub(crate) fn doorbells(&self, qid: u16) -> Doorbells {
        let at = |index: usize| Doorbell(DOORBELLS + index * self.cap.doorbell_stride());
        Doorbells {
            sq: at(2 * usize::from(qid)),
            cq: at(2 * usize::from(qid) + 1),
        }
    }

    /// Write `value` to `doorbell` (a submission queue's tail or a completion queue's head).
    /// Always inlined: called out of line (as LLVM chose once the submission path changed) it
    /// costs 6 instructions per write more.
    #[inline(always)]
    pub(crate) fn ring(&self, doorbell: Doorbell, value: u16) {
        if let Some(bar) = self.bar.try_access() {
            let _ = bar.try_write32(u32::from(value), doorbell.0);
        }
    }

    /// Wait until CSTS.RDY is `ready`, at most CAP.TO. `EIO`: CSTS.CFS while waiting for
    /// ready; `ENODEV`: the device is gone; `ETIMEDOUT`: the timeout.
    pub(crate) fn wait_ready(&self, ready: bool) -> Result {
        read_poll_timeout(
            || {
                let csts = self.csts().ok_or(ENODEV)?;
                if ready && csts.cfs() {
                    return Err(EIO);
                }
                Ok(csts)
            },
            |csts| csts.rdy() == ready,
            POLL_INTERVAL,
            self.cap.ready_timeout(),
        )
        .map(|_| ())
    }

    /// Clear CC.EN and wait for CSTS.RDY to clear.
    pub(crate) fn disable(&self) -> Result {
        if let Some(cc) = self.cc() {
            if cc.en() {
                self.set_cc(cc.with_en(false));
            }
        }
        self.wait_ready(false)
    }

    /// Enable the controller (NVM command set, 4 KiB pages, 64/16 byte entries, round robin)
    /// and wait for CSTS.RDY.
    pub(crate) fn enable(&self) -> Result {
        self.set_cc(
            CC::zeroed()
                .with_const_iosqes::<6>()
                .with_const_iocqes::<4>()
                .with_en(true),
        );
        self.wait_ready(true)
    }

    /// Normal shutdown (CC.SHN), then disable. A controller that is gone or already disabled
    /// (after a failed reset) is left alone.
    pub(crate) fn shutdown(&self) {
        let Some(cc) = self.cc().filter(|cc| cc.en()) else {
            return;
        };
        self.set_cc(cc.with_const_shn::<SHN_NORMAL>());
        // Until the controller says it is done, or is gone.
        let done = read_poll_timeout(
            || self.csts().map(CSTS::shutdown_status).transpose(),
            |shst| shst.is_none_or(|s| s == ShutdownStatus::Complete),
            POLL_INTERVAL,
            SHUTDOWN_TIMEOUT,
        );
        match done {
            Ok(_) => {}
            Err(e) if e == ETIMEDOUT => pr_warn!("controller shutdown timed out\n"),
            Err(e) => pr_warn!("controller shutdown status invalid ({:?})\n", e),
        }
        self.set_cc(CC::zeroed());
        let _ = self.wait_ready(false);
    }
}
