// SPDX-License-Identifier: GPL-2.0

//! Multi-queue PCI NVMe driver.
//!
//! Binds to PCI class 01:08:02 (NVM Express) and exposes every active namespace as a blk-mq
//! disk `/dev/rnvme<C>n<N>`. The C `nvme` module must not be loaded (it would get the device
//! first).
//!
//! # Controller bring-up
//!
//! BAR0 is mapped, CAP and VS are read, the controller is disabled (waiting for CSTS.RDY to
//! clear within CAP.TO), the admin queue pair is allocated in DMA coherent memory and the
//! controller enabled (CSTS.RDY within CAP.TO; CSTS.CFS or the timeout fail the probe with a
//! message). Admin commands are polled (they only run at probe, reset and for an Abort), each
//! for at most `admin_timeout` seconds. Identify
//! Controller gives MDTS, the optional commands (ONCS) and the volatile write cache (VWC);
//! Set Features (Number of Queues) asks for one I/O queue pair per CPU (or `nr_io_queues`),
//! and one completion queue plus one submission queue is created per granted pair, each
//! completion queue with its own MSI-X vector (queues share vectors round robin when fewer
//! vectors are granted; vector 0 is the admin queue's). Removal waits for the disks to
//! drain, then shuts the controller down with CC.SHN and waits for CSTS.SHST. Each disk's
//! parent device is the PCI function.
//!
//! # Queue selection and overflow
//!
//! blk-mq gets one hardware context per CPU, all sharing one set of tags as large as all
//! submission queues together (what the controller can hold), so a context can hold more
//! requests than its own queue. The driver, not blk-mq, picks the submission queue:
//! `queue_rq` tries the queue of the submitting CPU first; when that one is full and
//! `overflow` is set, it tries the other queues round robin from the home queue, and each of
//! them lends a slot only while it keeps a reserve free for its own CPUs (a quarter of its
//! slots, see [`may_take`]), so a CPU with more load than its queue holds borrows the others'
//! spare slots without starving them. Only when no queue takes the request does it return
//! `BLK_STS_RESOURCE`, and blk-mq retries the request when one of the context's requests
//! completes (or after a few milliseconds). A completion is routed by the queue it was
//! submitted to, whatever the context, through the command id, which indexes a per-queue slot
//! table holding the request and its DMA mappings. A queue of `io_queue_depth` entries holds
//! at most `io_queue_depth - 1` commands (one entry stays empty to tell full from empty), so
//! neither the submission nor the completion queue can overrun.
//!
//! # CPU hotplug
//!
//! The interrupt core shuts a managed vector down when the last CPU of its mask goes offline,
//! so no request is submitted (home or lent) to a queue whose vector has no online CPU.
//! Commands already on such a queue complete without an interrupt: they are reaped when a
//! submission passes the queue by, when the vector starts again, or by the timeout handler,
//! which reaps a command's completion queue before it aborts the command.
//!
//! Per-queue counters (submitted, completed, overflowed out of / into the queue, own
//! requests that found it full, in flight, slots lent now and at most, borrow attempts
//! refused, the reserve) are in debugfs, `/sys/kernel/debug/rust_nvme_mq/rnvme<C>/queues`,
//! and are printed when the controller is removed.
//!
//! # Data path
//!
//! Read and write map every page of the request for DMA and describe it with PRP1, PRP2 or a
//! PRP list (one list page area per command slot; the queue limits, with a page-sized virtual
//! boundary, keep requests within one list). Flush, FUA, discard (Dataset Management,
//! deallocate) and write-zeroes are passed to the device when it supports them. Completion
//! status codes are mapped to block errors like the C driver does.
//!
//! # Timeouts
//!
//! A command that exceeds the queue's `io_timeout` (the module parameter, in seconds, sets it
//! at probe) and is not found on its completion queue gets an Abort and one more timeout; if it
//! is still not done, the controller is reset: submissions are retried later meanwhile, the
//! controller is disabled, every request it held fails with an I/O error, then the admin
//! queue, the queue count and the I/O queue pairs are set up again. A controller that does
//! not come back stays disabled and requests fail at once. `lose_commands` in debugfs injects
//! lost commands to test this.
//!
//! Not implemented: metadata/protection information, namespaces with LBA formats that carry
//! metadata, requeueing the requests a reset failed, reset on CSTS.CFS outside a timeout,
//! polled queues.

use kernel::{
    block::mq::{
        gen_disk::{GenDisk, GenDiskBuilder},
        Command, DmaDevice, DmaMapping, Operations, Request, TagSet, TagSetFlag, TimeoutReturn,
    },
    cpu::CpuId,
    cpumask::{Cpumask, CpumaskVar},
    debugfs,
    device::{self, Core},
    devres::Devres,
    dma::Coherent,
    driver,
    io::{io_read, io_write, Io},
    irq::{self, IrqReturn},
    page::PAGE_SIZE,
    pci,
    prelude::*,
    str::CString,
    sync::{
        aref::ARef,
        atomic::{Atomic, Relaxed},
        new_mutex, new_spinlock_irq, Arc, ArcBorrow, Mutex, SpinLockIrq,
    },
    time::{delay::fsleep, Delta, Instant, Monotonic},
};

module! {
    type: RustNvmeMq,
    name: "rust_nvme_mq",
    authors: ["rust-blk developers"],
    description: "Rust multi-queue NVMe driver",
    license: "GPL v2",
    params: {
        overflow: bool {
            default: true,
            description: "Send a request to another queue with free slots when its CPU's queue is full",
            perm: 0o444,
        },
        io_queue_depth: u32 {
            default: 1024,
            description: "Entries per I/O submission/completion queue (2..=65536, capped by CAP.MQES)",
            perm: 0o444,
        },
        nr_io_queues: u32 {
            default: 0,
            description: "Number of I/O queue pairs (0: one per CPU)",
            perm: 0o444,
        },
        io_timeout: u32 {
            default: 30,
            description: "Timeout of I/O commands in seconds (1..=3600)",
            perm: 0o444,
        },
        admin_timeout: u32 {
            default: 60,
            description: "Timeout of admin commands in seconds (1..=3600)",
            perm: 0o444,
        },
    },
}

/// Smallest usable queue: one slot always stays empty to tell full from empty.
const MIN_QUEUE_DEPTH: u32 = 2;
/// Largest queue the NVMe specification allows (CAP.MQES is a 0's based 16-bit field).
const MAX_QUEUE_DEPTH: u32 = 1 << 16;
/// Range of `io_timeout` and `admin_timeout`, in seconds.
const TIMEOUT_RANGE_S: core::ops::RangeInclusive<u32> = 1..=3600;

/// Controller registers (NVMe base specification, "Controller Registers").
mod regs {
    /// Size of the register block mapped from BAR0 before the doorbells.
    pub(crate) const SIZE: usize = 0x1000;

    /// Controller Capabilities (64 bit).
    pub(crate) const CAP: usize = 0x00;
    /// Version.
    pub(crate) const VS: usize = 0x08;
    /// Controller Configuration.
    pub(crate) const CC: usize = 0x14;
    /// Controller Status.
    pub(crate) const CSTS: usize = 0x1c;
    /// Admin Queue Attributes.
    pub(crate) const AQA: usize = 0x24;
    /// Admin Submission Queue base address (64 bit).
    pub(crate) const ASQ: usize = 0x28;
    /// Admin Completion Queue base address (64 bit).
    pub(crate) const ACQ: usize = 0x30;
    /// First doorbell; queue `y`'s SQ tail is at `DOORBELLS + 2y * stride`, its CQ head at
    /// `DOORBELLS + (2y + 1) * stride`.
    pub(crate) const DOORBELLS: usize = 0x1000;

    /// CAP: Maximum Queue Entries Supported (0's based).
    pub(crate) fn cap_mqes(cap: u64) -> u32 {
        (cap & 0xffff) as u32
    }
    /// CAP: worst case time for CSTS.RDY to change, in 500 ms units.
    pub(crate) fn cap_timeout_ms(cap: u64) -> u32 {
        (((cap >> 24) & 0xff) as u32).max(1) * 500
    }
    /// CAP: doorbell stride in bytes.
    pub(crate) fn cap_stride(cap: u64) -> usize {
        4 << ((cap >> 32) & 0xf)
    }
    /// CAP: the NVM command set is supported.
    pub(crate) fn cap_css_nvm(cap: u64) -> bool {
        (cap >> 37) & 1 != 0
    }
    /// CAP: smallest memory page size, as a shift.
    pub(crate) fn cap_mps_min_shift(cap: u64) -> u32 {
        12 + ((cap >> 48) & 0xf) as u32
    }

    /// CC: enable.
    pub(crate) const CC_EN: u32 = 1 << 0;
    /// CC: memory page size 2 ^ (12 + MPS); 0 = 4 KiB.
    pub(crate) const CC_MPS_4K: u32 = 0 << 7;
    /// CC: NVM command set.
    pub(crate) const CC_CSS_NVM: u32 = 0 << 4;
    /// CC: round robin arbitration.
    pub(crate) const CC_AMS_RR: u32 = 0 << 11;
    /// CC: shutdown notification field.
    pub(crate) const CC_SHN_MASK: u32 = 3 << 14;
    /// CC: normal shutdown notification.
    pub(crate) const CC_SHN_NORMAL: u32 = 1 << 14;
    /// CC: I/O submission queue entry size, 2^6 = 64 bytes.
    pub(crate) const CC_IOSQES: u32 = 6 << 16;
    /// CC: I/O completion queue entry size, 2^4 = 16 bytes.
    pub(crate) const CC_IOCQES: u32 = 4 << 20;

    /// CSTS: ready.
    pub(crate) const CSTS_RDY: u32 = 1 << 0;
    /// CSTS: controller fatal status.
    pub(crate) const CSTS_CFS: u32 = 1 << 1;
    /// CSTS: shutdown status field.
    pub(crate) const CSTS_SHST_MASK: u32 = 3 << 2;
    /// CSTS: shutdown processing complete.
    pub(crate) const CSTS_SHST_CMPLT: u32 = 2 << 2;
    /// CSTS as read from a device that is gone.
    pub(crate) const CSTS_GONE: u32 = !0;
}

/// Command formats (NVMe base and NVM command set specifications).
mod cmd {
    /// Dwords in a submission queue entry (64 bytes).
    pub(crate) const SQE_DWORDS: usize = 16;
    /// Dwords in a completion queue entry (16 bytes).
    pub(crate) const CQE_DWORDS: usize = 4;

    // Admin opcodes.
    pub(crate) const ADMIN_CREATE_SQ: u8 = 0x01;
    pub(crate) const ADMIN_ABORT: u8 = 0x08;
    pub(crate) const ADMIN_CREATE_CQ: u8 = 0x05;
    pub(crate) const ADMIN_IDENTIFY: u8 = 0x06;
    pub(crate) const ADMIN_SET_FEATURES: u8 = 0x09;

    // NVM opcodes.
    pub(crate) const NVM_FLUSH: u8 = 0x00;
    pub(crate) const NVM_WRITE: u8 = 0x01;
    pub(crate) const NVM_READ: u8 = 0x02;
    pub(crate) const NVM_WRITE_ZEROES: u8 = 0x08;
    pub(crate) const NVM_DSM: u8 = 0x09;

    /// Identify CNS values.
    pub(crate) const CNS_NAMESPACE: u32 = 0x00;
    pub(crate) const CNS_CONTROLLER: u32 = 0x01;
    pub(crate) const CNS_ACTIVE_NS_LIST: u32 = 0x02;
    /// Size of an Identify data structure.
    pub(crate) const IDENTIFY_SIZE: usize = 4096;

    /// Identify Controller byte offsets.
    pub(crate) const ID_CTRL_SN: usize = 4;
    pub(crate) const ID_CTRL_MN: usize = 24;
    pub(crate) const ID_CTRL_MDTS: usize = 77;
    pub(crate) const ID_CTRL_ONCS: usize = 520;
    pub(crate) const ID_CTRL_VWC: usize = 525;
    /// ONCS bits.
    pub(crate) const ONCS_DSM: u16 = 1 << 2;
    pub(crate) const ONCS_WRITE_ZEROES: u16 = 1 << 3;
    /// VWC: a volatile write cache is present.
    pub(crate) const VWC_PRESENT: u8 = 1 << 0;

    /// Identify Namespace byte offsets.
    pub(crate) const ID_NS_NSZE: usize = 0;
    pub(crate) const ID_NS_FLBAS: usize = 26;
    pub(crate) const ID_NS_LBAF: usize = 128;

    /// Feature: Number of Queues.
    pub(crate) const FEAT_NUM_QUEUES: u32 = 0x07;

    /// Create I/O CQ/SQ cdw11: physically contiguous.
    pub(crate) const QUEUE_PHYS_CONTIG: u32 = 1 << 0;
    /// Create I/O CQ cdw11: interrupts enabled.
    pub(crate) const CQ_IRQ_ENABLED: u32 = 1 << 1;

    /// Read/write cdw12: forced unit access.
    pub(crate) const RW_FUA: u32 = 1 << 30;
    /// Dataset Management cdw11: deallocate.
    pub(crate) const DSM_DEALLOCATE: u32 = 1 << 2;

    /// Completion dword 3: phase tag.
    pub(crate) const CQE_PHASE: u32 = 1 << 16;
    /// Completion dword 3: the status field starts here.
    pub(crate) const CQE_STATUS_SHIFT: u32 = 17;

    /// A submission queue entry.
    #[derive(Clone, Copy, Default)]
    pub(crate) struct Sqe(pub(crate) [u32; SQE_DWORDS]);

    impl Sqe {
        /// A command with `opcode` for namespace `nsid`.
        pub(crate) fn new(opcode: u8, nsid: u32) -> Self {
            let mut sqe = Self::default();
            sqe.0[0] = u32::from(opcode);
            sqe.0[1] = nsid;
            sqe
        }
        /// Set the command identifier.
        pub(crate) fn set_cid(&mut self, cid: u16) {
            self.0[0] = (self.0[0] & 0xffff) | (u32::from(cid) << 16);
        }
        /// Set the data pointer.
        pub(crate) fn prps(mut self, prp1: u64, prp2: u64) -> Self {
            self.0[6] = prp1 as u32;
            self.0[7] = (prp1 >> 32) as u32;
            self.0[8] = prp2 as u32;
            self.0[9] = (prp2 >> 32) as u32;
            self
        }
        /// Set command dword `n` (10..=15).
        pub(crate) fn cdw(mut self, n: usize, value: u32) -> Self {
            self.0[n] = value;
            self
        }
        /// Set the starting LBA (cdw10-11).
        pub(crate) fn slba(self, lba: u64) -> Self {
            self.cdw(10, lba as u32).cdw(11, (lba >> 32) as u32)
        }
    }

    /// Status code types.
    pub(crate) const SCT_GENERIC: u32 = 0;
    pub(crate) const SCT_CMD_SPECIFIC: u32 = 1;
    pub(crate) const SCT_MEDIA: u32 = 2;
    pub(crate) const SCT_PATH: u32 = 3;
    // Generic status codes.
    pub(crate) const SC_INVALID_OPCODE: u32 = 0x01;
    pub(crate) const SC_INVALID_FIELD: u32 = 0x02;
    pub(crate) const SC_INVALID_NS: u32 = 0x0b;
    pub(crate) const SC_RESERVATION_CONFLICT: u32 = 0x83;
    pub(crate) const SC_LBA_RANGE: u32 = 0x80;
    pub(crate) const SC_CAP_EXCEEDED: u32 = 0x81;
    // Command specific status codes.
    pub(crate) const SC_ONCS_NOT_SUPPORTED: u32 = 0x0d;
    pub(crate) const SC_READ_ONLY: u32 = 0x82;
    // Media status codes.
    pub(crate) const SC_WRITE_FAULT: u32 = 0x80;
    pub(crate) const SC_READ_ERROR: u32 = 0x81;
    pub(crate) const SC_GUARD_CHECK: u32 = 0x82;
    pub(crate) const SC_APPTAG_CHECK: u32 = 0x83;
    pub(crate) const SC_REFTAG_CHECK: u32 = 0x84;
    pub(crate) const SC_COMPARE_FAILED: u32 = 0x85;
    pub(crate) const SC_ACCESS_DENIED: u32 = 0x86;
    pub(crate) const SC_UNWRITTEN_BLOCK: u32 = 0x87;
}

use cmd::Sqe;

/// Entries of the admin queues (only used at probe and removal).
const ADMIN_DEPTH: u16 = 32;
/// How long to wait for a shutdown to complete.
const SHUTDOWN_TIMEOUT_MS: u32 = 5_000;
/// PRP list entries per command slot: the largest request is this many pages.
const PRP_LIST_ENTRIES: usize = 64;
/// Largest number of single-page segments in a request: one for PRP1, the rest in the list.
const MAX_SEGMENTS: usize = PRP_LIST_ENTRIES + 1;
/// Largest discard or write-zeroes request, in logical blocks (NLB of Write Zeroes is 16 bit).
const MAX_ZERO_BLOCKS: u32 = 1 << 16;
/// Completions handled per lock hold.
const COMPLETION_BATCH: usize = 16;
/// Bytes per sector, the unit of request positions.
const SECTOR_SHIFT: u32 = 9;
/// blk-mq's limit on the tags of a tag set (`BLK_MQ_MAX_DEPTH`).
const MAX_TAGS: u32 = 10240;

/// Set by a probe that failed because of a module parameter, so that insmod fails.
static PARAM_ERROR: Atomic<i32> = Atomic::new(0);
/// Controller indices (`rnvme<C>`) in use, one bit each.
static CTRL_INDICES: Atomic<u32> = Atomic::new(0);

/// Take the lowest free controller index, so a rebound controller gets its name back.
fn take_ctrl_index() -> Result<u32> {
    let mut used = CTRL_INDICES.load(Relaxed);
    loop {
        let index = used.trailing_ones();
        if index >= u32::BITS {
            return Err(EBUSY);
        }
        match CTRL_INDICES.cmpxchg(used, used | (1 << index), Relaxed) {
            Ok(_) => return Ok(index),
            Err(now) => used = now,
        }
    }
}

/// A controller index, given back when dropped.
struct CtrlIndex(u32);

impl Drop for CtrlIndex {
    fn drop(&mut self) {
        let mut used = CTRL_INDICES.load(Relaxed);
        while let Err(now) = CTRL_INDICES.cmpxchg(used, used & !(1 << self.0), Relaxed) {
            used = now;
        }
    }
}

/// Map an NVMe completion status field (without the phase bit) to a block error.
fn status_to_result(status: u32) -> Result {
    use cmd::*;
    let sc = status & 0xff;
    let sct = (status >> 8) & 0x7;
    if sc == 0 && sct == 0 {
        return Ok(());
    }
    Err(match (sct, sc) {
        (SCT_GENERIC, SC_INVALID_OPCODE | SC_INVALID_FIELD | SC_INVALID_NS)
        | (SCT_CMD_SPECIFIC, SC_ONCS_NOT_SUPPORTED) => EOPNOTSUPP,
        (SCT_GENERIC, SC_CAP_EXCEEDED) => ENOSPC,
        (SCT_GENERIC, SC_LBA_RANGE) => EREMOTEIO,
        (SCT_GENERIC, SC_RESERVATION_CONFLICT) => EBADE,
        (SCT_CMD_SPECIFIC, SC_READ_ONLY)
        | (
            SCT_MEDIA,
            SC_WRITE_FAULT | SC_READ_ERROR | SC_UNWRITTEN_BLOCK | SC_ACCESS_DENIED
            | SC_COMPARE_FAILED,
        ) => ENODATA,
        (SCT_MEDIA, SC_GUARD_CHECK | SC_APPTAG_CHECK | SC_REFTAG_CHECK) => EILSEQ,
        (SCT_PATH, _) => ENOLINK,
        _ => EIO,
    })
}

/// The order in which queues are tried for a request from `home`: the home queue, then,
/// with `overflow`, the others round robin (each of which may refuse, see [`may_take`]).
fn queue_order(home: usize, nr_queues: usize, overflow: bool) -> impl Iterator<Item = usize> {
    let tries = if overflow { nr_queues } else { 1 };
    (0..tries).map(move |i| (home + i) % nr_queues)
}

/// How many of a queue's `slots` it keeps for requests of its own CPUs (those whose home it
/// is): a quarter, rounded up.
fn lend_reserve(slots: usize) -> usize {
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
fn may_take(free: usize, slots: usize, foreign: bool) -> bool {
    if foreign {
        free > lend_reserve(slots)
    } else {
        free > 0
    }
}

/// How a transfer is described to the device.
#[derive(Debug, PartialEq, Eq)]
struct Prps {
    prp1: u64,
    /// Entries after PRP1: 0 (PRP2 unused), 1 (PRP2 is the entry) or more (PRP2 points to a
    /// list of that many entries).
    nr_entries: usize,
    prp2: u64,
}

/// Build the PRPs of a transfer made of `segs` (bus address, length), writing list entries
/// into `list`. `list_addr` is the bus address of `list`.
///
/// Pieces that continue each other physically (the block layer merges such bio vectors into
/// one segment) are joined; otherwise a piece must start on a page and the previous one end on
/// one, which the queue's virtual boundary limit guarantees.
fn build_prps(
    segs: impl Iterator<Item = (u64, usize)>,
    list: &mut [u64],
    list_addr: u64,
) -> Result<Prps> {
    let page = PAGE_SIZE as u64;
    let mut prp1 = None;
    let mut nr_entries = 0;
    let mut end = 0u64;
    for (addr, len) in segs {
        let len = len as u64;
        if len == 0 {
            return Err(EINVAL);
        }
        match prp1 {
            None => prp1 = Some(addr),
            Some(_) if addr == end => {}
            Some(_) if end % page == 0 && addr % page == 0 => {}
            Some(_) => return Err(EINVAL),
        }
        // Every page that starts inside this piece, except PRP1's, is a list entry.
        let mut next = addr.next_multiple_of(page);
        while next < addr + len {
            if Some(next) != prp1 {
                *list.get_mut(nr_entries).ok_or(EINVAL)? = next;
                nr_entries += 1;
            }
            next += page;
        }
        end = addr + len;
    }
    let prp1 = prp1.ok_or(EINVAL)?;
    let prp2 = match nr_entries {
        0 => 0,
        1 => list[0],
        _ => list_addr,
    };
    Ok(Prps {
        prp1,
        nr_entries,
        prp2,
    })
}

/// Program the admin queue and enable the controller (NVM command set, 4 KiB pages, 64/16 byte
/// entries); wait for CSTS.RDY within CAP.TO. `EIO` means CSTS.CFS, `ETIMEDOUT` the timeout.
fn enable_controller(regs: &Regs, admin: &AdminQueue, cap: u64) -> Result {
    let aqa = u32::from(ADMIN_DEPTH - 1) | (u32::from(ADMIN_DEPTH - 1) << 16);
    regs.write32(regs::AQA, aqa);
    regs.write64(regs::ASQ, admin.sq.dma_address());
    regs.write64(regs::ACQ, admin.cq.dma_address());
    regs.write32(
        regs::CC,
        regs::CC_EN
            | regs::CC_CSS_NVM
            | regs::CC_MPS_4K
            | regs::CC_AMS_RR
            | regs::CC_IOSQES
            | regs::CC_IOCQES,
    );
    regs.wait_ready(true, regs::cap_timeout_ms(cap))
}

/// Ask for `want` I/O queue pairs; returns how many the controller grants (at most `want`).
fn set_queue_count(admin: &mut AdminQueue, regs: &Regs, want: u32) -> Result<u32> {
    let granted = admin.run(
        regs,
        Sqe::new(cmd::ADMIN_SET_FEATURES, 0)
            .cdw(10, cmd::FEAT_NUM_QUEUES)
            .cdw(11, (want - 1) | ((want - 1) << 16)),
    )?;
    Ok(want.min((granted & 0xffff) + 1).min((granted >> 16) + 1))
}

/// Create the completion and submission queue of every I/O queue on the controller.
fn create_io_queues(
    admin: &mut AdminQueue,
    regs: &Regs,
    queues: &[Arc<IoQueue>],
    nr_vectors: usize,
) -> Result {
    for (i, q) in queues.iter().enumerate() {
        let size = u32::from(q.depth - 1) << 16;
        let vector = u32::try_from(queue_vector(i, nr_vectors))?;
        admin
            .run(
                regs,
                Sqe::new(cmd::ADMIN_CREATE_CQ, 0)
                    .prps(q.cq.dma_address(), 0)
                    .cdw(10, u32::from(q.qid) | size)
                    .cdw(
                        11,
                        cmd::QUEUE_PHYS_CONTIG | cmd::CQ_IRQ_ENABLED | (vector << 16),
                    ),
            )
            .inspect_err(|e| pr_err!("creating I/O CQ {} failed: {:?}\n", q.qid, e))?;
        admin
            .run(
                regs,
                Sqe::new(cmd::ADMIN_CREATE_SQ, 0)
                    .prps(q.sq.dma_address(), 0)
                    .cdw(10, u32::from(q.qid) | size)
                    .cdw(11, cmd::QUEUE_PHYS_CONTIG | (u32::from(q.qid) << 16)),
            )
            .inspect_err(|e| pr_err!("creating I/O SQ {} failed: {:?}\n", q.qid, e))?;
    }
    Ok(())
}

/// Access to the controller's registers and doorbells, shared with the queues.
struct Regs {
    bar: pci::DevresBar<{ regs::SIZE }>,
    stride: usize,
}

impl Regs {
    fn read32(&self, offset: usize) -> u32 {
        self.bar
            .try_access()
            .and_then(|bar| bar.try_read32(offset).ok())
            .unwrap_or(regs::CSTS_GONE)
    }

    fn write32(&self, offset: usize, value: u32) {
        if let Some(bar) = self.bar.try_access() {
            let _ = bar.try_write32(value, offset);
        }
    }

    fn write64(&self, offset: usize, value: u64) {
        self.write32(offset, value as u32);
        self.write32(offset + 4, (value >> 32) as u32);
    }

    fn sq_doorbell(&self, qid: u16, tail: u16) {
        self.write32(
            regs::DOORBELLS + 2 * usize::from(qid) * self.stride,
            u32::from(tail),
        );
    }

    fn cq_doorbell(&self, qid: u16, head: u16) {
        self.write32(
            regs::DOORBELLS + (2 * usize::from(qid) + 1) * self.stride,
            u32::from(head),
        );
    }

    /// Wait until CSTS.RDY is `ready`, at most `timeout_ms`.
    fn wait_ready(&self, ready: bool, timeout_ms: u32) -> Result {
        for _ in 0..timeout_ms {
            let csts = self.read32(regs::CSTS);
            if csts == regs::CSTS_GONE {
                return Err(ENODEV);
            }
            if ready && csts & regs::CSTS_CFS != 0 {
                return Err(EIO);
            }
            if (csts & regs::CSTS_RDY != 0) == ready {
                return Ok(());
            }
            fsleep(Delta::from_millis(1));
        }
        Err(ETIMEDOUT)
    }
}

/// The admin queue pair, used synchronously by probe and removal.
struct AdminQueue {
    sq: Coherent<[u32]>,
    cq: Coherent<[u32]>,
    tail: u16,
    head: u16,
    phase: bool,
    next_cid: u16,
    /// How long a command may take (`admin_timeout`).
    timeout: Delta,
}

impl AdminQueue {
    fn new(dev: &device::Device<device::Bound>, timeout: Delta) -> Result<Self> {
        Ok(Self {
            sq: Coherent::<u32>::zeroed_slice(
                dev,
                usize::from(ADMIN_DEPTH) * cmd::SQE_DWORDS,
                GFP_KERNEL,
            )?,
            cq: Coherent::<u32>::zeroed_slice(
                dev,
                usize::from(ADMIN_DEPTH) * cmd::CQE_DWORDS,
                GFP_KERNEL,
            )?,
            tail: 0,
            head: 0,
            phase: true,
            next_cid: 0,
            timeout,
        })
    }

    /// Start afresh after a controller reset: empty queues, phase 1.
    fn clear(&mut self) {
        for i in 0..usize::from(ADMIN_DEPTH) * cmd::CQE_DWORDS {
            io_write!(self.cq, [panic: i], 0u32);
        }
        self.tail = 0;
        self.head = 0;
        self.phase = true;
    }

    /// Run `sqe` and wait for its completion; returns dword 0 of the completion.
    fn run(&mut self, regs: &Regs, mut sqe: Sqe) -> Result<u32> {
        let cid = self.next_cid;
        self.next_cid = self.next_cid.wrapping_add(1);
        sqe.set_cid(cid);
        let base = usize::from(self.tail) * cmd::SQE_DWORDS;
        for (i, dw) in sqe.0.iter().enumerate() {
            io_write!(self.sq, [panic: base + i], *dw);
        }
        self.tail = (self.tail + 1) % ADMIN_DEPTH;
        regs.sq_doorbell(0, self.tail);
        let start = Instant::<Monotonic>::now();
        loop {
            loop {
                let base = usize::from(self.head) * cmd::CQE_DWORDS;
                let dw3: u32 = io_read!(self.cq, [panic: base + 3]);
                if (dw3 & cmd::CQE_PHASE != 0) != self.phase {
                    break;
                }
                let dw0: u32 = io_read!(self.cq, [panic: base]);
                self.head = (self.head + 1) % ADMIN_DEPTH;
                if self.head == 0 {
                    self.phase = !self.phase;
                }
                regs.cq_doorbell(0, self.head);
                if dw3 & 0xffff == u32::from(cid) {
                    return status_to_result(dw3 >> cmd::CQE_STATUS_SHIFT).map(|()| dw0);
                }
            }
            if regs.read32(regs::CSTS) & regs::CSTS_CFS != 0 {
                return Err(EIO);
            }
            if start.elapsed() > self.timeout {
                return Err(ETIMEDOUT);
            }
            fsleep(Delta::from_millis(1));
        }
    }

    /// Run an Identify command and return the 4 KiB data structure.
    fn identify(
        &mut self,
        regs: &Regs,
        dev: &device::Device<device::Bound>,
        nsid: u32,
        cns: u32,
    ) -> Result<KVec<u8>> {
        let buf = Coherent::<u8>::zeroed_slice(dev, cmd::IDENTIFY_SIZE, GFP_KERNEL)?;
        let addr = buf.dma_address();
        self.run(
            regs,
            Sqe::new(cmd::ADMIN_IDENTIFY, nsid)
                .prps(addr, addr + PAGE_SIZE as u64)
                .cdw(10, cns),
        )?;
        let mut data = KVec::from_elem(0u8, cmd::IDENTIFY_SIZE, GFP_KERNEL)?;
        (&buf).copy_to_slice(&mut data);
        Ok(data)
    }
}

fn le16(data: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes([data[offset], data[offset + 1]])
}

fn le32(data: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes([
        data[offset],
        data[offset + 1],
        data[offset + 2],
        data[offset + 3],
    ])
}

fn le64(data: &[u8], offset: usize) -> u64 {
    u64::from(le32(data, offset)) | (u64::from(le32(data, offset + 4)) << 32)
}

/// An identify string (serial, model): ASCII padded with spaces.
struct IdString<'a>(&'a [u8]);

impl kernel::fmt::Display for IdString<'_> {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let s = self.0;
        let end = s
            .iter()
            .rposition(|&c| c != b' ' && c != 0)
            .map_or(0, |p| p + 1);
        for &c in &s[..end] {
            let c = if c.is_ascii_graphic() || c == b' ' {
                c
            } else {
                b'?'
            };
            write!(f, "{}", c as char)?;
        }
        Ok(())
    }
}

/// Counters of one I/O queue.
struct QueueStats {
    submitted: Atomic<u64>,
    completed: Atomic<u64>,
    overflow_out: Atomic<u64>,
    overflow_in: Atomic<u64>,
    /// Submissions of the queue's own CPUs that found it full.
    full: Atomic<u64>,
    /// Submissions of foreign CPUs turned away by the lending rule (reserve or full).
    refused: Atomic<u64>,
    /// Submissions that passed this queue by because no CPU of its vector was online.
    offline: Atomic<u64>,
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
        }
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
    /// Slots held by requests of foreign CPUs, now and at most so far.
    lent: usize,
    lent_max: usize,
}

impl QueueState {
    /// Give back slot `cid`, whose request is gone (ended, or never submitted).
    fn release(&mut self, cid: u16) {
        if let Some(slot) = self.slots.get_mut(usize::from(cid)) {
            slot.maps.unmap();
            slot.aborted = false;
            if slot.lent {
                slot.lent = false;
                self.lent -= 1;
            }
        }
        // Cannot fail: `free` was allocated for every command id.
        let _ = self.free.push(cid, GFP_ATOMIC);
    }
}

/// Why a submission did not happen.
enum SubmitError {
    /// The queue has no free slot (or none it may lend); the request comes back for another
    /// queue.
    Full(ARef<Request<NvmeOps>>),
    /// No CPU of the queue's interrupt vector is online, so its completions would raise no
    /// interrupt; the request comes back for another queue.
    Offline(ARef<Request<NvmeOps>>),
    /// The request cannot be carried out.
    Failed(Error),
}

/// An I/O submission/completion queue pair.
#[pin_data]
struct IoQueue {
    qid: u16,
    depth: u16,
    regs: Arc<Regs>,
    dev: DmaDevice,
    sq: Coherent<[u32]>,
    cq: Coherent<[u32]>,
    /// `PRP_LIST_ENTRIES` per slot: the PRP list, or the range of a Dataset Management.
    prps: Coherent<[u64]>,
    #[pin]
    state: SpinLockIrq<QueueState>,
    stats: QueueStats,
}

impl IoQueue {
    fn new(
        dev: &device::Device<device::Bound>,
        regs: Arc<Regs>,
        qid: u16,
        depth: u16,
    ) -> Result<Arc<Self>> {
        let n = usize::from(depth);
        let mut free = KVec::with_capacity(n - 1, GFP_KERNEL)?;
        // Pop order: low command ids first.
        for cid in (0..depth - 1).rev() {
            free.push(cid, GFP_KERNEL)?;
        }
        let mut slots = KVec::with_capacity(n - 1, GFP_KERNEL)?;
        for _ in 0..n - 1 {
            slots.push(
                Slot {
                    rq: None,
                    maps: DmaMapping::new(dev, MAX_SEGMENTS)?,
                    aborted: false,
                    lent: false,
                },
                GFP_KERNEL,
            )?;
        }
        let sq = Coherent::<u32>::zeroed_slice(dev, n * cmd::SQE_DWORDS, GFP_KERNEL)?;
        let cq = Coherent::<u32>::zeroed_slice(dev, n * cmd::CQE_DWORDS, GFP_KERNEL)?;
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
                state <- new_spinlock_irq!(QueueState {
                    sq_tail: 0,
                    cq_head: 0,
                    phase: true,
                    free,
                    slots,
                    accepting: true,
                    lent: 0,
                    lent_max: 0,
                }),
                stats: QueueStats::new(),
            }? Error),
            GFP_KERNEL,
        )
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
        let list_index = usize::from(cid) * PRP_LIST_ENTRIES;
        let list_addr = self.prps.dma_address() + (list_index * 8) as u64;
        let opcode = match rq.command() {
            Command::Read => cmd::NVM_READ,
            Command::Write => cmd::NVM_WRITE,
            Command::Flush => return Ok(Sqe::new(cmd::NVM_FLUSH, ns.nsid)),
            Command::Discard => {
                if blocks == 0 {
                    return Err(EINVAL);
                }
                // One range: context attributes, length in blocks, starting LBA.
                io_write!(self.prps, [panic: list_index], u64::from(blocks) << 32);
                io_write!(self.prps, [panic: list_index + 1], lba);
                return Ok(Sqe::new(cmd::NVM_DSM, ns.nsid)
                    .prps(list_addr, 0)
                    .cdw(10, 0)
                    .cdw(11, cmd::DSM_DEALLOCATE));
            }
            Command::WriteZeroes => {
                if blocks == 0 {
                    return Err(EINVAL);
                }
                return Ok(Sqe::new(cmd::NVM_WRITE_ZEROES, ns.nsid)
                    .slba(lba)
                    .cdw(12, blocks - 1));
            }
            Command::Other(_) => return Err(EOPNOTSUPP),
        };
        if blocks == 0 {
            return Err(EINVAL);
        }
        // The block layer maps physically contiguous pieces together (behind an IOMMU, the
        // whole request as one range), as PRPs need.
        self.dev
            .with_bound(|dev| maps.map(dev, rq))
            .map_err(|_| EIO)?;
        let mut list = [0u64; PRP_LIST_ENTRIES];
        let prps = build_prps(maps.segments(), &mut list, list_addr)?;
        if prps.nr_entries > 1 {
            for (i, entry) in list[..prps.nr_entries].iter().enumerate() {
                io_write!(self.prps, [panic: list_index + i], *entry);
            }
        }
        let mut cdw12 = blocks - 1;
        if rq.is_fua() && rq.command() == Command::Write {
            cdw12 |= cmd::RW_FUA;
        }
        Ok(Sqe::new(opcode, ns.nsid)
            .prps(prps.prp1, prps.prp2)
            .slba(lba)
            .cdw(12, cdw12))
    }

    /// The number of command slots.
    fn slots(&self) -> usize {
        usize::from(self.depth) - 1
    }

    /// Submit `rq` to this queue if the lending rule lets it have a free slot; `foreign`: the
    /// request comes from a CPU whose home queue is another one. `cpus`: the CPUs of the
    /// queue's interrupt vector, if it has managed affinity; the queue is only used while one
    /// of them is online.
    fn submit(
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
            return Err(SubmitError::Failed(ENOMEM));
        }
        // The interrupt core shuts a managed vector down when the last CPU of its mask goes
        // offline. Checked with the lock held, so with interrupts off on this CPU: a CPU
        // cannot leave the online mask (that happens in stop_machine) until the command is
        // on the queue, where a later reap finds it (see `NvmeOps::queue_rq` and `timeout`).
        if cpus.is_some_and(|cpus| !cpus.intersects(Cpumask::online())) {
            self.stats.offline.add(1, Relaxed);
            return Err(SubmitError::Offline(rq));
        }
        if !may_take(st.free.len(), self.slots(), foreign) {
            if foreign {
                self.stats.refused.add(1, Relaxed);
            } else {
                self.stats.full.add(1, Relaxed);
            }
            return Err(SubmitError::Full(rq));
        }
        let Some(cid) = st.free.pop() else {
            return Err(SubmitError::Full(rq));
        };
        let slot = &mut st.slots[usize::from(cid)];
        let mut sqe = match self.prepare(ns, &rq, cid, &mut slot.maps) {
            Ok(sqe) => sqe,
            Err(e) => {
                st.release(cid);
                return Err(SubmitError::Failed(e));
            }
        };
        slot.rq = Some(rq);
        if foreign {
            slot.lent = true;
            st.lent += 1;
            st.lent_max = st.lent_max.max(st.lent);
        }
        if lose {
            pr_warn!(
                "queue {}: losing command {} (fault injection)\n",
                self.qid,
                cid
            );
            self.stats.submitted.add(1, Relaxed);
            return Ok(());
        }
        sqe.set_cid(cid);
        let base = usize::from(st.sq_tail) * cmd::SQE_DWORDS;
        for (i, dw) in sqe.0.iter().enumerate() {
            io_write!(self.sq, [panic: base + i], *dw);
        }
        st.sq_tail = (st.sq_tail + 1) % self.depth;
        self.regs.sq_doorbell(self.qid, st.sq_tail);
        self.stats.submitted.add(1, Relaxed);
        Ok(())
    }

    /// Reap the completion queue; returns whether there was anything.
    fn process_completions(&self) -> bool {
        let mut any = false;
        loop {
            let mut done: [Option<(ARef<Request<NvmeOps>>, Result)>; COMPLETION_BATCH] =
                [const { None }; COMPLETION_BATCH];
            let mut n = 0;
            let mut consumed = false;
            {
                let mut guard = self.state.lock();
                let st = &mut *guard;
                while n < COMPLETION_BATCH {
                    let base = usize::from(st.cq_head) * cmd::CQE_DWORDS;
                    let dw3: u32 = io_read!(self.cq, [panic: base + 3]);
                    if (dw3 & cmd::CQE_PHASE != 0) != st.phase {
                        break;
                    }
                    consumed = true;
                    st.cq_head += 1;
                    if st.cq_head == self.depth {
                        st.cq_head = 0;
                        st.phase = !st.phase;
                    }
                    let cid = (dw3 & 0xffff) as u16;
                    let Some(slot) = st.slots.get_mut(usize::from(cid)) else {
                        continue;
                    };
                    if let Some(rq) = slot.rq.take() {
                        done[n] = Some((rq, status_to_result(dw3 >> cmd::CQE_STATUS_SHIFT)));
                        n += 1;
                        // Unmaps before the request ends and the block layer may free the
                        // pages.
                        st.release(cid);
                    } else {
                        slot.maps.unmap();
                        slot.aborted = false;
                    }
                }
                if consumed {
                    self.regs.cq_doorbell(self.qid, st.cq_head);
                }
            }
            any |= consumed;
            for entry in done.iter_mut() {
                if let Some((rq, status)) = entry.take() {
                    self.stats.completed.add(1, Relaxed);
                    // The slot held the only reference, so ending cannot fail.
                    let _ = Request::end(rq, status);
                }
            }
            if n < COMPLETION_BATCH {
                return any;
            }
        }
    }

    /// With the controller disabled: end every request in the queue with an I/O error and
    /// start the queue pair afresh (empty, tail and head 0, phase 1). Returns how many
    /// requests were failed.
    fn fail_all_and_clear(&self) -> usize {
        let mut failed = 0;
        for cid in 0..usize::from(self.depth - 1) {
            let rq = {
                let mut guard = self.state.lock();
                let st = &mut *guard;
                let Some(slot) = st.slots.get_mut(cid) else {
                    break;
                };
                let rq = slot.rq.take();
                if rq.is_some() {
                    st.release(cid as u16);
                }
                rq
            };
            if let Some(rq) = rq {
                failed += 1;
                self.stats.completed.add(1, Relaxed);
                let _ = Request::end(rq, Err(EIO));
            }
        }
        let mut st = self.state.lock();
        for i in 0..usize::from(self.depth) * cmd::CQE_DWORDS {
            io_write!(self.cq, [panic: i], 0u32);
        }
        st.sq_tail = 0;
        st.cq_head = 0;
        st.phase = true;
        failed
    }

    /// Commands in flight, lent slots now and at most so far.
    fn occupancy(&self) -> (usize, usize, usize) {
        let st = self.state.lock();
        (self.slots() - st.free.len(), st.lent, st.lent_max)
    }
}

/// The interrupt handler of one vector: reaps the completion queues assigned to it.
struct CqIrq {
    queues: KVec<Arc<IoQueue>>,
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

/// The MSI-X vector of I/O queue `index` when `nr_vectors` were granted: vector 0 belongs to
/// the admin queue, the others are shared round robin.
fn queue_vector(index: usize, nr_vectors: usize) -> usize {
    if nr_vectors > 1 {
        1 + index % (nr_vectors - 1)
    } else {
        0
    }
}

/// Controller states, in `Ctrl::dead`.
const LIVE: i32 = 0;
const RESETTING: i32 = 1;
const DEAD: i32 = 2;

/// What all namespaces of a controller share.
#[pin_data]
struct Ctrl {
    index: u32,
    queues: KVec<Arc<IoQueue>>,
    overflow: bool,
    /// The home queue of each CPU: the one whose interrupt is delivered to that CPU.
    home: KVec<u16>,
    /// The CPUs of each queue's interrupt vector (managed affinity), by queue index; `None`
    /// when the queues share vector 0, which is not managed.
    vector_cpus: KVec<Option<CpumaskVar>>,
    regs: Arc<Regs>,
    cap: u64,
    /// The admin queue, for Identify at probe and Abort on timeouts.
    #[pin]
    admin: Mutex<AdminQueue>,
    /// `LIVE`, `RESETTING` (submissions are retried later) or `DEAD` (they fail).
    dead: Atomic<i32>,
    /// Queue pairs asked for at probe, and MSI-X vectors granted: needed again by a reset.
    want_queues: u32,
    nr_vectors: usize,
    /// Fault injection (debugfs `lose_commands`): this many next commands are kept in their
    /// slot but never given to the controller, as if the device lost them.
    lose: Atomic<u32>,
}

impl Ctrl {
    /// Whether to lose the next command (fault injection).
    fn take_lose(&self) -> bool {
        let mut n = self.lose.load(Relaxed);
        while n > 0 {
            match self.lose.cmpxchg(n, n - 1, Relaxed) {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
        false
    }

    /// The queue index of the command of `rq`, if it is on a queue.
    fn find(&self, rq: &Request<NvmeOps>) -> Option<usize> {
        self.queues.iter().position(|q| {
            q.state
                .lock()
                .slots
                .iter()
                .any(|slot| slot.rq.as_ref().is_some_and(|r| core::ptr::eq(&**r, rq)))
        })
    }

    /// The CPUs of the interrupt vector of queue `qi`, if it has managed affinity.
    fn cpus(&self, qi: usize) -> Option<&Cpumask> {
        self.vector_cpus.get(qi).and_then(|c| c.as_deref())
    }

    /// Find the command of `rq`: its queue index and command id, and whether it had already
    /// been aborted (the flag is set now).
    fn find_and_mark(&self, rq: &Request<NvmeOps>) -> Option<(usize, u16, bool)> {
        for (qi, q) in self.queues.iter().enumerate() {
            let mut st = q.state.lock();
            for (cid, slot) in st.slots.iter_mut().enumerate() {
                if slot.rq.as_ref().is_some_and(|r| core::ptr::eq(&**r, rq)) {
                    let was = slot.aborted;
                    slot.aborted = true;
                    return Some((qi, cid as u16, was));
                }
            }
        }
        None
    }

    /// Reset the controller: disable it (it then no longer touches memory), end every request
    /// it held with an I/O error, then enable it again and recreate the I/O queues. While this
    /// runs, submissions are turned away with `BLK_STS_RESOURCE` and retried by blk-mq. If the
    /// controller does not come back, it is left disabled and every later request fails.
    fn reset(&self) {
        let mut admin = self.admin.lock();
        if self.dead.cmpxchg(LIVE, RESETTING, Relaxed).is_err() {
            return;
        }
        for q in self.queues.iter() {
            q.state.lock().accepting = false;
        }
        let cc = self.regs.read32(regs::CC);
        self.regs.write32(regs::CC, cc & !regs::CC_EN);
        let _ = self.regs.wait_ready(false, regs::cap_timeout_ms(self.cap));
        let mut failed = 0;
        for q in self.queues.iter() {
            failed += q.fail_all_and_clear();
        }
        admin.clear();
        let result = enable_controller(&self.regs, &admin, self.cap)
            .and_then(|()| set_queue_count(&mut admin, &self.regs, self.want_queues))
            .and_then(|granted| {
                if (granted as usize) < self.queues.len() {
                    return Err(ENODEV);
                }
                create_io_queues(&mut admin, &self.regs, &self.queues, self.nr_vectors)
            });
        match result {
            Ok(()) => {
                for q in self.queues.iter() {
                    q.state.lock().accepting = true;
                }
                self.dead.store(LIVE, Relaxed);
                pr_info!(
                    "rnvme{}: controller reset done, {} requests failed\n",
                    self.index,
                    failed
                );
            }
            Err(e) => {
                self.dead.store(DEAD, Relaxed);
                let cc = self.regs.read32(regs::CC);
                self.regs.write32(regs::CC, cc & !regs::CC_EN);
                pr_err!(
                    "rnvme{}: controller reset failed ({:?}): disabled, all I/O fails\n",
                    self.index,
                    e
                );
            }
        }
    }
}

/// One namespace: the queue data of its disk.
struct Namespace {
    ctrl: Arc<Ctrl>,
    nsid: u32,
    lba_shift: u32,
}

/// blk-mq operations of the NVMe disks.
struct NvmeOps;

#[vtable]
impl Operations for NvmeOps {
    type QueueData = Arc<Namespace>;

    fn queue_rq(ns: ArcBorrow<'_, Namespace>, rq: ARef<Request<Self>>, _is_last: bool) -> Result {
        let ctrl = &ns.ctrl;
        match ctrl.dead.load(Relaxed) {
            LIVE => {}
            // Retried by blk-mq a few milliseconds later.
            RESETTING => return Err(ENOMEM),
            _ => return Err(EIO),
        }
        let nr_queues = ctrl.queues.len();
        let cpu = CpuId::current().as_u32() as usize;
        let home = ctrl
            .home
            .get(cpu)
            .map_or(cpu % nr_queues, |&q| usize::from(q));
        let mut rq = rq;
        let lose = ctrl.take_lose();
        for qi in queue_order(home, nr_queues, ctrl.overflow) {
            let queue = &ctrl.queues[qi];
            match queue.submit(&ns, rq, qi != home, lose, ctrl.cpus(qi)) {
                Ok(()) => {
                    if qi != home {
                        ctrl.queues[home].stats.overflow_out.add(1, Relaxed);
                        queue.stats.overflow_in.add(1, Relaxed);
                    }
                    return Ok(());
                }
                Err(SubmitError::Full(back)) => rq = back,
                Err(SubmitError::Offline(back)) => {
                    rq = back;
                    // Commands submitted just before the vector went down complete without
                    // an interrupt: reap them here (and in `timeout`).
                    queue.process_completions();
                }
                Err(SubmitError::Failed(e)) => return Err(e),
            }
        }
        // Every queue we may use is full or keeps its reserve: BLK_STS_RESOURCE, blk-mq
        // retries later.
        Err(ENOMEM)
    }

    fn commit_rqs(_ns: ArcBorrow<'_, Namespace>) {}

    /// A command timed out: send an Abort for it (it then completes with an error, or
    /// normally if it was only slow), and give it one more timeout. If it times out again, or
    /// the Abort itself fails, the controller is disabled and every request failed.
    ///
    /// First the command's completion queue is reaped: a command that completed while the
    /// queue's interrupt vector was shut down (its CPUs went offline) raised no interrupt and
    /// is found there.
    fn timeout(ns: ArcBorrow<'_, Namespace>, rq: &Request<Self>) -> TimeoutReturn {
        let ctrl = &ns.ctrl;
        if let Some(qi) = ctrl.find(rq) {
            let queue = &ctrl.queues[qi];
            if queue.process_completions() && ctrl.find(rq).is_none() {
                pr_info!(
                    "rnvme{}: queue {}: request completed without an interrupt, found by polling\n",
                    ctrl.index,
                    queue.qid
                );
                return TimeoutReturn::Done;
            }
        }
        let Some((qi, cid, aborted_before)) = ctrl.find_and_mark(rq) else {
            // Ended meanwhile (or being ended by whoever took it off its slot).
            return TimeoutReturn::Done;
        };
        let qid = ctrl.queues[qi].qid;
        if !aborted_before {
            pr_warn!(
                "rnvme{}: command {} on queue {} timed out, aborting\n",
                ctrl.index,
                cid,
                qid
            );
            let abort =
                Sqe::new(cmd::ADMIN_ABORT, 0).cdw(10, u32::from(qid) | (u32::from(cid) << 16));
            match ctrl.admin.lock().run(&ctrl.regs, abort) {
                Ok(_) => return TimeoutReturn::ResetTimer,
                Err(e) => pr_err!("rnvme{}: abort failed: {:?}\n", ctrl.index, e),
            }
        }
        pr_err!(
            "rnvme{}: command {} on queue {} not completed after an abort: resetting the controller\n",
            ctrl.index,
            cid,
            qid
        );
        ctrl.reset();
        TimeoutReturn::Done
    }

    fn complete(rq: ARef<Request<Self>>) {
        // Requests are ended from the interrupt handler; nothing is completed through here.
        let _ = Request::end(rq, Ok(()));
    }
}

/// The counters of every queue, as a debugfs file.
struct StatsFile(Arc<Ctrl>);

impl core::fmt::Debug for StatsFile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        writeln!(
            f,
            "queue submitted completed overflow_out overflow_in full_events in_flight lent lent_max refused reserve offline_skips"
        )?;
        for q in self.0.queues.iter() {
            let s = &q.stats;
            let (in_flight, lent, lent_max) = q.occupancy();
            writeln!(
                f,
                "{} {} {} {} {} {} {} {} {} {} {} {}",
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
                s.offline.load(Relaxed)
            )?;
        }
        Ok(())
    }
}

/// The fault injection knob, as a debugfs file.
struct LoseFile(Arc<Ctrl>);

impl core::fmt::Debug for LoseFile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        writeln!(f, "{}", self.0.lose.load(Relaxed))
    }
}

impl debugfs::Reader for LoseFile {
    fn read_from_slice(&self, reader: &mut kernel::uaccess::UserSliceReader) -> Result {
        self.0.lose.read_from_slice(reader)
    }
}

/// Shuts the controller down when dropped (probe failure or removal), before the queue
/// memory it may write to is freed.
struct Enabled {
    regs: Arc<Regs>,
    cap: u64,
}

impl Drop for Enabled {
    fn drop(&mut self) {
        let regs = &self.regs;
        let cc = regs.read32(regs::CC);
        if cc == regs::CSTS_GONE || cc & regs::CC_EN == 0 {
            // Gone, or already disabled after a failed abort.
            return;
        }
        regs.write32(regs::CC, (cc & !regs::CC_SHN_MASK) | regs::CC_SHN_NORMAL);
        let mut done = false;
        for _ in 0..SHUTDOWN_TIMEOUT_MS {
            let csts = regs.read32(regs::CSTS);
            if csts == regs::CSTS_GONE || csts & regs::CSTS_SHST_MASK == regs::CSTS_SHST_CMPLT {
                done = true;
                break;
            }
            fsleep(Delta::from_millis(1));
        }
        if !done {
            pr_warn!("controller shutdown timed out\n");
        }
        regs.write32(regs::CC, 0);
        let _ = regs.wait_ready(false, regs::cap_timeout_ms(self.cap));
    }
}

/// A bound NVMe controller. Fields are dropped in order: disks first (which waits for their
/// requests), then the controller is shut down, then interrupts and queue memory go.
struct NvmeDevice {
    disks: KVec<GenDisk<NvmeOps>>,
    _stats_file: Option<Pin<KBox<debugfs::File<StatsFile>>>>,
    _lose_file: Option<Pin<KBox<debugfs::File<LoseFile>>>>,
    _debugfs: debugfs::Dir,
    enabled: Option<Enabled>,
    _irqs: Devres<pci::IrqHandlers<CqIrq>>,
    ctrl: Arc<Ctrl>,
    _index: CtrlIndex,
}

impl Drop for NvmeDevice {
    fn drop(&mut self) {
        // Removing the disks waits for every request to end.
        self.disks.clear();
        // Shut down while the interrupts are still there.
        drop(self.enabled.take());
        for q in self.ctrl.queues.iter() {
            let s = &q.stats;
            pr_info!(
                "rnvme{} queue {}: submitted {} completed {} overflow_out {} overflow_in {} full_events {} lent_max {} refused {}\n",
                self.ctrl.index,
                q.qid,
                s.submitted.load(Relaxed),
                s.completed.load(Relaxed),
                s.overflow_out.load(Relaxed),
                s.overflow_in.load(Relaxed),
                s.full.load(Relaxed),
                q.occupancy().2,
                s.refused.load(Relaxed)
            );
        }
    }
}

impl NvmeDevice {
    fn probe(pdev: &pci::Device<Core<'_>>) -> Result<Self> {
        let depth = module_parameters::io_queue_depth.value();
        let overflow = module_parameters::overflow.value();
        let io_timeout = Delta::from_secs(module_parameters::io_timeout.value().into());
        let admin_timeout = Delta::from_secs(module_parameters::admin_timeout.value().into());
        let dev: &device::Device<device::Bound> = pdev.as_ref();

        pdev.enable_device_mem()?;
        pdev.set_master();
        let bar = pdev.iomap_region_sized::<{ regs::SIZE }>(0, c"rust_nvme_mq")?;
        let cap = u64::from(bar.read32(regs::CAP)) | (u64::from(bar.read32(regs::CAP + 4)) << 32);
        let vs = bar.read32(regs::VS);
        let regs = Arc::new(
            Regs {
                bar: bar.into_devres()?,
                stride: regs::cap_stride(cap),
            },
            GFP_KERNEL,
        )?;

        let max_depth = regs::cap_mqes(cap) + 1;
        if depth > max_depth {
            dev_err!(
                pdev,
                "io_queue_depth={} is larger than the controller's queues (CAP.MQES+1 = {})\n",
                depth,
                max_depth
            );
            PARAM_ERROR.store(1, Relaxed);
            return Err(EINVAL);
        }
        // Checked at module load: 2..=65536, and now <= MQES + 1 <= 65536.
        let depth = u16::try_from(depth.min(u32::from(u16::MAX))).map_err(|_| EINVAL)?;
        if !regs::cap_css_nvm(cap) || regs::cap_mps_min_shift(cap) > PAGE_SIZE.trailing_zeros() {
            dev_err!(
                pdev,
                "controller does not support the NVM command set with 4 KiB pages\n"
            );
            return Err(ENODEV);
        }
        let timeout_ms = regs::cap_timeout_ms(cap);

        // Disable.
        let cc = regs.read32(regs::CC);
        if cc & regs::CC_EN != 0 {
            regs.write32(regs::CC, cc & !regs::CC_EN);
        }
        regs.wait_ready(false, timeout_ms).inspect_err(|e| {
            dev_err!(
                pdev,
                "controller did not become disabled within {} ms ({:?})\n",
                timeout_ms,
                e
            )
        })?;

        // Admin queue, enable.
        let mut admin = AdminQueue::new(dev, admin_timeout)?;
        let enable = enable_controller(&regs, &admin, cap);
        // From here on, dropping `enabled` shuts the controller down before the queue memory
        // declared earlier is freed.
        let enabled = Enabled {
            regs: regs.clone(),
            cap,
        };
        if let Err(e) = enable {
            let csts = regs.read32(regs::CSTS);
            if e == EIO {
                dev_err!(
                    pdev,
                    "controller fatal status (CSTS.CFS) while enabling, CSTS={:#x}\n",
                    csts
                );
            } else {
                dev_err!(
                    pdev,
                    "controller not ready within {} ms (CAP.TO), CSTS={:#x}\n",
                    timeout_ms,
                    csts
                );
            }
            drop(enabled);
            return Err(e);
        }

        // Identify the controller.
        let id = admin.identify(&regs, dev, 0, cmd::CNS_CONTROLLER)?;
        let mdts = id[cmd::ID_CTRL_MDTS];
        let oncs = le16(&id, cmd::ID_CTRL_ONCS);
        let vwc = id[cmd::ID_CTRL_VWC] & cmd::VWC_PRESENT != 0;
        // Largest transfer: MDTS (in minimum pages, 0 = no limit) and our PRP list.
        let mut max_bytes = PRP_LIST_ENTRIES * PAGE_SIZE;
        if mdts != 0 && u32::from(mdts) + 12 < usize::BITS {
            max_bytes = max_bytes.min(1usize << (12 + u32::from(mdts)));
        }
        let max_sectors = u32::try_from(max_bytes >> SECTOR_SHIFT)?;

        // Queues.
        let want = match module_parameters::nr_io_queues.value() {
            0 => kernel::cpu::nr_cpu_ids(),
            n => n,
        }
        .clamp(1, 65535);
        let nr_queues = set_queue_count(&mut admin, &regs, want)? as usize;
        let mut queues = KVec::with_capacity(nr_queues, GFP_KERNEL)?;
        for i in 0..nr_queues {
            let qid = u16::try_from(i + 1)?;
            queues.push(IoQueue::new(dev, regs.clone(), qid, depth)?, GFP_KERNEL)?;
        }

        // One handler per vector, each reaping the completion queues assigned to it.
        let irqs = pdev.request_irq_handlers(
            1,
            u32::try_from(nr_queues + 1)?,
            pci::IrqTypes::default().with(pci::IrqType::MsiX),
            // Vector 0 (admin queue) is not spread; the I/O queues' vectors follow the CPUs.
            Some(1),
            irq::Flags::TRIGGER_NONE,
            c"rust_nvme_mq",
            |vector, nr_vectors| {
                let mut mine = KVec::new();
                for (i, q) in queues.iter().enumerate() {
                    if queue_vector(i, nr_vectors) == vector {
                        mine.push(q.clone(), GFP_KERNEL)?;
                    }
                }
                Ok(CqIrq { queues: mine })
            },
        )?;
        let irqs_now = irqs.access(dev)?;
        let nr_vectors = irqs_now.len();

        create_io_queues(&mut admin, &regs, &queues, nr_vectors)?;

        let ctrl_index = CtrlIndex(take_ctrl_index()?);
        let index = ctrl_index.0;
        dev_info!(
            pdev,
            "rnvme{}: {} ({}), NVMe {}.{}, {} I/O queues of {} entries, {} MSI-X vectors, max transfer {} KiB, overflow={}\n",
            index,
            IdString(&id[cmd::ID_CTRL_MN..cmd::ID_CTRL_MN + 40]),
            IdString(&id[cmd::ID_CTRL_SN..cmd::ID_CTRL_SN + 20]),
            vs >> 16,
            (vs >> 8) & 0xff,
            nr_queues,
            depth,
            nr_vectors,
            max_bytes / 1024,
            overflow
        );

        // Each CPU's home queue: the queue whose vector is affine to the CPU (the vectors are
        // spread over the CPUs), or round robin where the affinity says nothing.
        let nr_cpus = kernel::cpu::nr_cpu_ids();
        let mut home = KVec::with_capacity(nr_cpus as usize, GFP_KERNEL)?;
        for cpu in 0..nr_cpus {
            let own = CpuId::from_u32(cpu).and_then(|id| {
                (0..nr_queues).find(|&i| {
                    irqs_now
                        .affinity(queue_vector(i, nr_vectors))
                        .is_some_and(|mask| nr_vectors > 1 && mask.test(id))
                })
            });
            let q = own.unwrap_or(cpu as usize % nr_queues);
            home.push(u16::try_from(q)?, GFP_KERNEL)?;
        }

        // The CPUs of each queue's vector, to skip queues whose vector has no online CPU.
        let mut vector_cpus = KVec::with_capacity(nr_queues, GFP_KERNEL)?;
        for i in 0..nr_queues {
            let cpus = match irqs_now.affinity(queue_vector(i, nr_vectors)) {
                Some(mask) if nr_vectors > 1 => Some(CpumaskVar::try_clone(mask)?),
                _ => None,
            };
            vector_cpus.push(cpus, GFP_KERNEL)?;
        }

        let ctrl_regs = regs.clone();
        let ctrl: Arc<Ctrl> = Arc::pin_init(
            try_pin_init!(Ctrl {
                index,
                queues,
                overflow,
                home,
                vector_cpus,
                regs: ctrl_regs,
                cap,
                admin <- new_mutex!(admin),
                dead: Atomic::new(LIVE),
                want_queues: want,
                nr_vectors,
                lose: Atomic::new(0),
            }? Error),
            GFP_KERNEL,
        )?;

        // One blk-mq context per CPU, all drawing from one set of tags and requests as large
        // as all queues' slots together: what the controller can hold, not that much per
        // CPU. blk-mq divides shared tags fairly between the disks (namespaces) of the
        // controller, never between the contexts of one disk. With shared tags blk-mq would
        // give the disks mq-deadline; like other multi-queue disks they keep "none".
        let slots = u32::try_from(nr_queues)? * u32::from(depth - 1);
        let tagset = Arc::pin_init(
            TagSet::new_with_flags(
                kernel::cpu::nr_cpu_ids(),
                slots.min(MAX_TAGS),
                1,
                TagSetFlag::TagHctxShared | TagSetFlag::NoSchedByDefault,
            ),
            GFP_KERNEL,
        )?;

        // Namespaces.
        let list = ctrl
            .admin
            .lock()
            .identify(&regs, dev, 0, cmd::CNS_ACTIVE_NS_LIST)?;
        let mut disks = KVec::new();
        for nsid in list
            .chunks_exact(4)
            .map(|c| le32(c, 0))
            .take_while(|&n| n != 0)
        {
            let idns = ctrl
                .admin
                .lock()
                .identify(&regs, dev, nsid, cmd::CNS_NAMESPACE)?;
            let nsze = le64(&idns, cmd::ID_NS_NSZE);
            let format = usize::from(idns[cmd::ID_NS_FLBAS] & 0xf);
            let lbaf = le32(&idns, cmd::ID_NS_LBAF + 4 * format);
            let lba_shift = (lbaf >> 16) & 0xff;
            let metadata = lbaf & 0xffff;
            if nsze == 0 {
                continue;
            }
            if !(SECTOR_SHIFT..=PAGE_SIZE.trailing_zeros()).contains(&lba_shift) || metadata != 0 {
                dev_warn!(
                    pdev,
                    "namespace {}: LBA format {} (2^{} bytes, {} metadata bytes) not supported\n",
                    nsid,
                    format,
                    lba_shift,
                    metadata
                );
                continue;
            }
            let block = 1u32 << lba_shift;
            let zero_sectors = (MAX_ZERO_BLOCKS << (lba_shift - SECTOR_SHIFT)).min(u32::MAX >> 1);
            let mut builder = GenDiskBuilder::new()
                .capacity_sectors(nsze << (lba_shift - SECTOR_SHIFT))
                .logical_block_size(block)?
                .physical_block_size(block)?
                .max_hw_sectors(max_sectors)
                .max_segments(MAX_SEGMENTS as u16)
                .virt_boundary_mask(PAGE_SIZE - 1)?
                .rq_timeout(io_timeout)
                .parent(dev);
            if vwc {
                builder = builder.write_cache(true);
            }
            if oncs & cmd::ONCS_DSM != 0 {
                builder = builder.max_discard_sectors(zero_sectors);
            }
            if oncs & cmd::ONCS_WRITE_ZEROES != 0 {
                builder = builder.max_write_zeroes_sectors(zero_sectors);
            }
            let ns = Arc::new(
                Namespace {
                    ctrl: ctrl.clone(),
                    nsid,
                    lba_shift,
                },
                GFP_KERNEL,
            )?;
            let disk = builder.build_owned::<RustNvmeMq, _>(
                fmt!("rnvme{}n{}", index, nsid),
                tagset.clone(),
                ns,
            )?;
            let cache = if vwc { ", write cache" } else { "" };
            let discard = if oncs & cmd::ONCS_DSM != 0 {
                ", discard"
            } else {
                ""
            };
            let zeroes = if oncs & cmd::ONCS_WRITE_ZEROES != 0 {
                ", write zeroes"
            } else {
                ""
            };
            dev_info!(
                pdev,
                "rnvme{}n{}: {} blocks of {} bytes ({} MiB){}{}{}\n",
                index,
                nsid,
                nsze,
                block,
                (nsze << lba_shift) >> 20,
                cache,
                discard,
                zeroes
            );
            disks.push(disk, GFP_KERNEL)?;
        }

        let debugfs = debugfs::Dir::new(c"rust_nvme_mq");
        let name = CString::try_from_fmt(fmt!("rnvme{}", index))?;
        let sub = debugfs.subdir(&name);
        let stats_file = KBox::pin_init(
            sub.read_only_file(c"queues", Ok::<_, Error>(StatsFile(ctrl.clone()))),
            GFP_KERNEL,
        )
        .ok();

        let lose_file = KBox::pin_init(
            sub.read_write_file(c"lose_commands", Ok::<_, Error>(LoseFile(ctrl.clone()))),
            GFP_KERNEL,
        )
        .ok();

        Ok(Self {
            disks,
            _stats_file: stats_file,
            _lose_file: lose_file,
            _debugfs: sub,
            enabled: Some(enabled),
            _irqs: irqs,
            ctrl,
            _index: ctrl_index,
        })
    }
}

/// The PCI driver.
struct NvmeDriver;

/// PCI class code of NVM Express controllers: mass storage, non-volatile memory, NVMe.
const PCI_CLASS_STORAGE_EXPRESS: u32 = 0x01_08_02;

kernel::pci_device_table!(
    PCI_TABLE,
    <NvmeDriver as pci::Driver>::IdInfo,
    [(
        pci::DeviceId::from_class(PCI_CLASS_STORAGE_EXPRESS, 0xff_ff_ff),
        ()
    )]
);

impl pci::Driver for NvmeDriver {
    type IdInfo = ();
    type Data<'bound> = NvmeDevice;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        NvmeDevice::probe(pdev)
    }
}

/// The module: the PCI driver, registered after the parameters are checked.
#[pin_data]
struct RustNvmeMq {
    #[pin]
    _driver: driver::Registration<pci::Adapter<NvmeDriver>>,
}

fn check_params() -> Result {
    let depth = module_parameters::io_queue_depth.value();
    if !(MIN_QUEUE_DEPTH..=MAX_QUEUE_DEPTH).contains(&depth) {
        pr_err!("io_queue_depth={depth} is out of range ({MIN_QUEUE_DEPTH}..={MAX_QUEUE_DEPTH})\n");
        return Err(EINVAL);
    }
    for (name, value) in [
        ("io_timeout", module_parameters::io_timeout.value()),
        ("admin_timeout", module_parameters::admin_timeout.value()),
    ] {
        if !TIMEOUT_RANGE_S.contains(&value) {
            pr_err!(
                "{name}={value} is out of range ({}..={} seconds)\n",
                TIMEOUT_RANGE_S.start(),
                TIMEOUT_RANGE_S.end()
            );
            return Err(EINVAL);
        }
    }
    Ok(())
}

fn check_probe() -> Result {
    if PARAM_ERROR.load(Relaxed) != 0 {
        return Err(EINVAL);
    }
    Ok(())
}

impl kernel::InPlaceModule for RustNvmeMq {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        pin_init::pin_init_scope(move || {
            check_params()?;
            PARAM_ERROR.store(0, Relaxed);
            pr_info!(
                "loaded: overflow={} io_queue_depth={} nr_io_queues={} io_timeout={} admin_timeout={}\n",
                module_parameters::overflow.value(),
                module_parameters::io_queue_depth.value(),
                module_parameters::nr_io_queues.value(),
                module_parameters::io_timeout.value(),
                module_parameters::admin_timeout.value()
            );
            Ok(try_pin_init!(Self {
                _driver <- driver::Registration::new(c"rust_nvme_mq", module),
                // Probing is synchronous: a device refused because of a parameter fails insmod.
                _: { check_probe()?; },
            }? Error))
        })
    }
}

#[kunit_tests(rust_nvme_mq)]
mod tests {
    use super::*;

    const PAGE: u64 = PAGE_SIZE as u64;
    const PG: usize = PAGE_SIZE;

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

    #[test]
    fn prp_single_page() {
        let mut list = [0u64; 4];
        let p = build_prps([(0x1000_0200, 512)].into_iter(), &mut list, 0x9000).unwrap();
        assert_eq!(
            p,
            Prps {
                prp1: 0x1000_0200,
                nr_entries: 0,
                prp2: 0
            }
        );
    }

    #[test]
    fn prp_two_pages_uses_prp2() {
        let mut list = [0u64; 4];
        let segs = [(0x1000_0800, 0x800), (0x5000_0000, 0x800)];
        let p = build_prps(segs.into_iter(), &mut list, 0x9000).unwrap();
        assert_eq!(
            p,
            Prps {
                prp1: 0x1000_0800,
                nr_entries: 1,
                prp2: 0x5000_0000
            }
        );
    }

    #[test]
    fn prp_list() {
        let mut list = [0u64; 4];
        let segs = [
            (0x1000_0000, 0x1000),
            (0x2000_0000, 0x1000),
            (0x3000_0000, 0x200),
        ];
        let p = build_prps(segs.into_iter(), &mut list, 0x9000).unwrap();
        assert_eq!(
            p,
            Prps {
                prp1: 0x1000_0000,
                nr_entries: 2,
                prp2: 0x9000
            }
        );
        assert_eq!(&list[..2], &[0x2000_0000, 0x3000_0000]);
    }

    #[test]
    fn prp_rejects_gaps_and_overlong() {
        let mut list = [0u64; 1];
        // Second piece not page aligned.
        assert!(build_prps([(0, PG), (PAGE + 8, 8)].into_iter(), &mut list, 0).is_err());
        // First piece does not end on a page and the next does not continue it.
        assert!(build_prps([(0, 512), (PAGE, 8)].into_iter(), &mut list, 0).is_err());
        // More entries than the list holds.
        let segs = [(0, PG), (PAGE, PG), (2 * PAGE, PG)];
        assert!(build_prps(segs.into_iter(), &mut list, 0).is_err());
    }

    #[test]
    fn prp_joins_contiguous_pieces() {
        let mut list = [0u64; 4];
        // Two 1 KiB pieces of one page: one PRP.
        let segs = [(0x1000_0000, 1024), (0x1000_0400, 1024)];
        let p = build_prps(segs.into_iter(), &mut list, 0x9000).unwrap();
        assert_eq!(
            p,
            Prps {
                prp1: 0x1000_0000,
                nr_entries: 0,
                prp2: 0
            }
        );
        // A piece running into the next page.
        let p = build_prps([(PAGE - 8, 16)].into_iter(), &mut list, 0x9000).unwrap();
        assert_eq!(
            p,
            Prps {
                prp1: PAGE - 8,
                nr_entries: 1,
                prp2: PAGE
            }
        );
        // Contiguous pieces across a page boundary.
        let segs = [
            (0x1000_0800, 0x800),
            (0x1000_1000, 0x1000),
            (0x1000_2000, 0x10),
        ];
        let p = build_prps(segs.into_iter(), &mut list, 0x9000).unwrap();
        assert_eq!(
            p,
            Prps {
                prp1: 0x1000_0800,
                nr_entries: 2,
                prp2: 0x9000
            }
        );
        assert_eq!(&list[..2], &[0x1000_1000, 0x1000_2000]);
    }

    #[test]
    fn status_mapping() {
        assert_eq!(status_to_result(0), Ok(()));
        assert_eq!(status_to_result(cmd::SC_INVALID_OPCODE), Err(EOPNOTSUPP));
        assert_eq!(status_to_result(cmd::SC_LBA_RANGE), Err(EREMOTEIO));
        assert_eq!(
            status_to_result((cmd::SCT_MEDIA << 8) | cmd::SC_READ_ERROR),
            Err(ENODATA)
        );
        assert_eq!(
            status_to_result((cmd::SCT_MEDIA << 8) | cmd::SC_GUARD_CHECK),
            Err(EILSEQ)
        );
        assert_eq!(status_to_result(0x06), Err(EIO));
    }
}
