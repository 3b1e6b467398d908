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
//! message). Admin commands are polled. The driver's own run one at a time, each for at most
//! `admin_timeout` seconds (at probe, for resets, removal and shutdown, for an Abort, for a
//! rescan); a user's (the admin passthrough ioctls) is waited for without the admin lock, for
//! the caller's `timeout_ms` (or `admin_timeout`), and resets the controller if it does not
//! complete in time (`rust_nvme_mq/admin.rs`). Identify Controller gives MDTS, the optional commands (ONCS) and the volatile write cache (VWC);
//! Set Features (Number of Queues) asks for one I/O queue pair per CPU (or `nr_io_queues`),
//! and one completion queue plus one submission queue is created per granted pair, each
//! completion queue with its own MSI-X vector (queues share vectors round robin when fewer
//! vectors are granted; vector 0 is the admin queue's). Removal waits for the disks to
//! drain, deletes the I/O queues (Delete SQ, Delete CQ), then shuts the controller down with
//! CC.SHN and waits for CSTS.SHST. System shutdown (reboot, power-off) with the driver bound
//! does the same through the PCI `shutdown` callback, after waiting (at most 30 s) for the
//! commands in flight; the controller then stays disabled. A reset deletes the I/O queues
//! too before it disables the controller. Each disk's parent device is the controller's device
//! (`/sys/class/rnvme/rnvme<C>`, a child of the PCI function), as C's `nvme<C>` is.
//!
//! # Queue selection and overflow
//!
//! blk-mq gets one hardware context per CPU, all sharing one set of tags as large as all
//! submission queues together (what the controller can hold), so a context can hold more
//! requests than its own queue. The driver, not blk-mq, picks the submission queue:
//! `queue_rq` tries the queue of the submitting CPU first; when that one is full and
//! `overflow` is set, it tries at most two other queues: of at most four looked at, spread
//! over the queues from a point that moves with every search, those whose counters of
//! commands submitted and completed (read without their locks) say they have most slots to
//! spare (a bounded search, `rust_nvme_mq/policy.rs`, which the host model
//! `tools/overflow-model` runs for 16 to 256 queues, see docs/overflow-model.md). Each of them
//! lends a slot only while it keeps a reserve free for its own CPUs (a quarter of its slots,
//! see `queueset::origin`), so a CPU with more load than its queue holds borrows the others'
//! spare slots without starving them, and a submission takes at most three queue locks
//! however many queues there are. When no queue tried takes the request it returns
//! `BLK_STS_RESOURCE`, and blk-mq retries the request when one of the context's requests
//! completes (or after a few milliseconds). A completion is routed by the queue it was
//! submitted to, whatever the context, through the command id, which indexes a per-queue slot
//! table holding the request and its DMA mappings. A queue of `io_queue_depth` entries holds
//! at most `io_queue_depth - 1` commands (one entry stays empty to tell full from empty), so
//! neither the submission nor the completion queue can overrun.
//!
//! # Poll queues
//!
//! With `poll_queues=N`, the last N of the granted queue pairs (asked for on top of the
//! interrupt-driven ones; at least one of those must remain, or the load fails) are created
//! with interrupts disabled (IEN=0) and get no vector. The tag set then has a poll map of N
//! contexts after the per-CPU ones, so the disks support polled I/O (`io_poll` is 1): a polled
//! request (io_uring IOPOLL, `RWF_HIPRI`) goes to the poll queue of its context and is reaped
//! by the blk-mq `poll` callback for that context. Overflow among the poll queues follows the
//! rule above (the callback then reaps the other poll queues too); polled and interrupt-driven
//! requests never use each other's queues. A reset recreates the poll queues without
//! interrupts. The `poll` and `polled` columns of the debugfs counters show which queues are
//! poll queues and how many requests polling ended.
//!
//! # CPU hotplug
//!
//! The interrupt core shuts a managed vector down when the last CPU of its mask goes offline,
//! so no request is submitted (home or lent) to a queue whose vector has no online CPU.
//! blk-mq waits for the requests of a CPU's own context before the CPU goes, but not for
//! requests of other CPUs lent to the CPU's queue: a CPU hotplug callback (patch "rust: cpu:
//! add CPU hotplug callbacks"), called while the going CPU still takes interrupts, stops
//! lending the queue's slots once its vector's last online CPU is going and waits until the
//! commands lent to it are done (at most `io_timeout`); lending resumes when a CPU of the
//! vector is back. Should a command still complete without an interrupt, it is reaped when a
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
//! PRP list, or, on a controller that takes them, with an SGL (`transfer.rs`): like the C
//! driver, such a controller's disks have no virtual boundary, and a request uses an SGL when
//! its segments average `sgl_threshold` bytes or more (default 32 KiB) or do not meet at page
//! boundaries. Every command slot has a list page (a PRP list or an SGL segment); transfers go
//! up to MDTS (at most 2 MiB). PRP1 and SGL data blocks may start at any dword, so direct I/O
//! buffers need dword alignment only (dma_alignment 3, like the C driver). Flush, FUA,
//! discard (Dataset Management, deallocate) and write-zeroes are passed to the device when it
//! supports them. Completion status codes are mapped to block errors like the C driver does.
//!
//! # Timeouts
//!
//! A command that exceeds the queue's `io_timeout` (the module parameter, in seconds, sets it
//! at probe) and is not found on its completion queue gets an Abort and one more timeout; if it
//! is still not done, a controller reset is queued on a work item (one at a time): submissions
//! are retried later meanwhile, the controller is disabled, every request it held is requeued,
//! memory decoding and bus mastering are turned on again (they may be what failed), then the
//! admin queue, the queue count and the I/O queue pairs are set up again, and the requeued
//! requests run. A failed attempt is retried (3 attempts, 1 s apart); a controller that does
//! not come back stays disabled, its requests fail and its disks are removed. In debugfs,
//! `lose_commands` injects lost commands and `fail_resets` failed reset attempts, for tests.
//!
//! # System sleep
//!
//! Suspend (and the freeze and poweroff phases of hibernation), like the C driver's simple
//! suspend: resets are waited for and no new one starts, the disks' queues are quiesced (new
//! requests wait in the block layer), the commands in flight are waited for (at most 30 s),
//! the I/O queues are deleted and the controller is shut down (CC.SHN) and disabled; commands
//! it did not complete are requeued. Resume (thaw, restore) queues a reset, which brings the
//! controller and its queues back, and unquiesces the queues; their requests are retried
//! until the reset is done.
//!
//! # Passthrough (nvme-cli)
//!
//! Each controller has a character device `/dev/rnvme<C>` (root only) with the admin
//! passthrough ioctls (`NVME_IOCTL_ADMIN_CMD`, `NVME_IOCTL_ADMIN64_CMD`),
//! `NVME_IOCTL_RESET` and `NVME_IOCTL_RESCAN`; the disks answer `NVME_IOCTL_ID` and the same
//! controller ioctls except the rescan (as in C). Each namespace also has a generic character
//! device `/dev/rng<C>n<N>` (root only, like C's `/dev/ng<C>n<N>`) with the disk's ioctls and
//! io_uring passthrough (`NVME_URING_CMD_IO`, `_VEC`: a driver-private request with the user's
//! memory mapped, completed from the ring's task work; polled on the poll queues for an
//! `IORING_SETUP_IOPOLL` ring), `rust_nvme_mq/generic.rs`. Admin commands from user space run on the
//! admin queue with their data in a bounce buffer (at most 256 KiB), with the C driver's
//! permission checks; see `rust_nvme_mq/ioctl.rs`. A rescan (`nvme ns-rescan`) runs probe's
//! namespace scan again: it reads the active namespace list, adds disks for new namespaces,
//! removes those of vanished ones and revalidates the others (`rust_nvme_mq/rescan.rs`,
//! `ns.rs`); the same scan runs by itself when the controller reports a namespace attribute
//! change through an asynchronous event (`rust_nvme_mq/aen.rs`). Admin commands that change
//! what a namespace is (Format NVM, Sanitize) run with every disk frozen (`GenDisk::freeze`:
//! no request in flight, new ones wait), and each disk is revalidated before it runs again: a
//! new logical block size or capacity is set on the frozen disk (`Frozen::set_format`), and a
//! namespace whose new format the driver cannot serve (metadata) loses its disk, or, when the
//! command came through that disk's own ioctl, gets capacity 0 until the next rescan (C:
//! `nvme_passthru_start/end`).
//!
//! # Errors
//!
//! A completion's status maps to the errno C's `nvme_error_status` gives (KUnit
//! `rust_nvme_mq_status`). An I/O command that fails without Do Not Retry is sent again from
//! its slot, up to `max_retries` (5) times, as C retries it (the Command Retry Delay is not
//! honoured); a final error prints one line naming the command, its LBA range and the status
//! (at most 10 lines per 5 s per queue). Passthrough commands are never retried. debugfs
//! `inject_status` gives the next completions a chosen status, for tests.
//!
//! I/O commands (`NVME_IOCTL_IO_CMD`, `NVME_IOCTL_IO64_CMD` on a disk; `NVME_IOCTL_IO_CMD` on
//! the controller goes to its only namespace, as in C: `nvme read`, `write`, `flush`,
//! `io-passthru`) run as driver-private requests on the disk's queue, so they take a tag and
//! are ordered, timed out and requeued by a reset like the disk's other requests; their data
//! goes through the same bounce buffer, which also bounds what a controller can reach for a
//! command whose transfer does not match `data_len`: reads, writes and compares must move
//! exactly `data_len` bytes and name the disk's namespace. `NVME_IOCTL_SUBMIT_IO` (a read,
//! write or compare of `nblocks + 1` blocks) and `NVME_IOCTL_IO64_CMD_VEC` (any I/O command,
//! its data in an array of `struct iovec`) map the user's memory into the request instead
//! (`GenDisk::execute_driver_cmd_user`), described by an SGL where the controller takes
//! them (so the controller checks the transfer length against the buffers; the vectored ioctl
//! is refused without SGL support), and run side by side. Root only (the C driver lets other
//! users run commands that the controller's effects log calls harmless; that log is not read
//! here); no metadata.
//!
//! The controller's device, whose `dev` is the character device, is a child of the PCI function
//! in sysfs and has the C driver's controller attributes (`/sys/class/rnvme/rnvme<C>/`).
//!
//! # Structure
//!
//! The modules, in three layers, each using only those listed before it (no module uses one
//! after it, nor the crate root; `tests/host/structure.sh` checks this table against the
//! imports):
//!
//! | module | what it holds |
//! |---|---|
//! | **hardware** | |
//! | `le` | little-endian field types of what the controller reads and writes in memory |
//! | `regs` | controller registers, typed with `register!` (CAP, CC, CSTS with its shutdown status, AQA, ASQ, ACQ, ...) and doorbells (CAP.DSTRD's stride) |
//! | `prp` | PRP entries and lists of a transfer |
//! | `cmd` | the NVMe specification as types: opcodes, command (with per-command constructors, the only place a command's fields are packed), completion, SGL descriptor, Identify and log page layouts, asynchronous events, status codes; completion status to errno |
//! | `sgl` | the SGL of a transfer (its descriptors from `cmd`) |
//! | `transfer` | how a controller's transfers are described (MDTS, PRPs or SGLs) and each slot's list page |
//! | `request` | `NvmeOps` (the request type), request to command (the only place), completion to result (a passthrough request keeps status and result in its own data) |
//! | `queue` | `IoQueue`: one queue pair's rings, command slots, submission into a slot, reaping |
//! | `admin` | the admin queue and its commands, the one Identify path (the queue's buffer); `AdminEvents` |
//! | `policy` | the overflow policy's pure functions (queue order, reserve, the bounded lender search), a child module of `queueset` that `tools/overflow-model` compiles too |
//! | `queueset` | `QueueSet`: the I/O queues, CPU-to-queue map, vectors, queue selection and lending, IRQ handlers, counters |
//! | **controller** | |
//! | `ctrl` | `Ctrl`: state, admin queue, queue set; bring-up, reset, removal, shutdown, sleep; `CtrlEvents`, what it reports to the namespaces (gone, namespaces changed, quiesce, unquiesce) |
//! | `aen` | asynchronous events: the outstanding request, SMART warnings; namespace changes reported through `CtrlEvents` |
//! | `hotplug`, `debugfs` | the CPU hotplug callbacks, the debugfs files |
//! | **namespaces** | |
//! | `ident` | namespace identifiers and the disk attributes that show them |
//! | `link` | `Link`: what a character device's open files (or a namespace's commands) reach, cut when it goes; `Gate`: calls side by side until something must change under them |
//! | `nsdisk` | `Ns`, the refcounted namespace object (C's `nvme_ns`: format, identity, its disk's link, its passthrough; the disk's queue data, what its generic device's files reach), `NsDisk` (what the list owns of it: disk, generic device) and `NsSet`, the namespaces of a controller: the one revalidation, the one removal, locked only to add or remove |
//! | `ioctl` | `Passthru`: the admin and I/O passthrough ioctls and their bounce buffer, io_uring passthrough commands; the namespaces' `NsPassthru` |
//! | `generic` | `/dev/rng<C>n<N>`: a namespace's generic device (its ioctls, io_uring commands and polling) |
//! | `ns` | blk-mq callbacks of the disks (queue data: `Ns`), their tag set, `Namespaces`: the one namespace scan (probe, rescan, events; one at a time), the controller's `CtrlEvents` |
//! | `rescan` | `NVME_IOCTL_RESCAN` |
//! | `ctrlattr` | the controller device's sysfs attributes, C's controller attributes and formats |
//! | `chardev` | `/dev/rnvme<C>`: the controller's character device, also its device in sysfs (the disks' parent) |
//!
//! The crate root checks the parameters, brings the controller up step by step in `probe`
//! and owns what a bound controller holds (`NvmeDevice`, whose drop is the one teardown, of
//! an unbind and of a probe that fails after its disks were added).
//!
//! A block request goes one way: `NvmeOps::queue_rq` (`ns`) checks the controller's state and
//! hands it to `QueueSet::submit`, which picks the queue (home, then lending ones) and calls
//! `IoQueue::submit`, which takes a slot, has `request::command` build the command into it
//! and rings the doorbell. A completion goes the other way without leaving `queue`: the
//! interrupt handler (`queueset::CqIrq`) or `poll` reaps the queue, `request::end_status`
//! tells how the request ends, and the queue ends it. I/O passthrough requests take the same
//! path; only the ioctl that made one (`ioctl`) reads its result afterwards.
//!
//! # Namespace identity
//!
//! Each disk shows its namespace's identity in sysfs as the C driver's do (`rust_nvme_mq/ident.rs`,
//! patch "rust: block: mq: gen_disk: add read-only sysfs attributes to disks"): `wwid`, `uuid`,
//! `nguid`, `eui`, `csi`, `nsid`, `metadata_bytes`, from the Namespace Identification Descriptor
//! list and Identify Namespace, read when the disk is added. QEMU's controllers get C's
//! `NVME_QUIRK_BOGUS_NID` (identifiers ignored, `wwid` made of vendor, serial, model and nsid)
//! unless `bogus_nid_quirk=0`.
//!
//! Not implemented: `NVME_IOCTL_SUBSYS_RESET`, admin commands over io_uring,
//! metadata/protection information,
//! namespaces with LBA formats that carry metadata, reset on CSTS.CFS outside a timeout, the
//! `nuse` disk attribute, noticing on a rescan that a namespace was replaced under the same
//! nsid.

#[path = "rust_nvme_mq/admin.rs"]
mod admin;
#[path = "rust_nvme_mq/aen.rs"]
mod aen;
#[path = "rust_nvme_mq/chardev.rs"]
mod chardev;
#[path = "rust_nvme_mq/cmd.rs"]
mod cmd;
#[path = "rust_nvme_mq/ctrl.rs"]
mod ctrl;
#[path = "rust_nvme_mq/ctrlattr.rs"]
mod ctrlattr;
#[path = "rust_nvme_mq/debugfs.rs"]
mod debugfs;
#[path = "rust_nvme_mq/generic.rs"]
mod generic;
#[path = "rust_nvme_mq/hotplug.rs"]
mod hotplug;
#[path = "rust_nvme_mq/ident.rs"]
mod ident;
#[path = "rust_nvme_mq/ioctl.rs"]
mod ioctl;
#[path = "rust_nvme_mq/le.rs"]
mod le;
#[path = "rust_nvme_mq/link.rs"]
mod link;
#[path = "rust_nvme_mq/ns.rs"]
mod ns;
#[path = "rust_nvme_mq/nsdisk.rs"]
mod nsdisk;
#[path = "rust_nvme_mq/prp.rs"]
mod prp;
#[path = "rust_nvme_mq/queue.rs"]
mod queue;
#[path = "rust_nvme_mq/queueset.rs"]
mod queueset;
#[path = "rust_nvme_mq/regs.rs"]
mod regs;
#[path = "rust_nvme_mq/request.rs"]
mod request;
#[path = "rust_nvme_mq/rescan.rs"]
mod rescan;
#[path = "rust_nvme_mq/sgl.rs"]
mod sgl;
#[path = "rust_nvme_mq/transfer.rs"]
mod transfer;

use admin::{AdminQueue, AdminWork};
use ctrl::{Ctrl, CtrlIndex, CtrlInfo, EnabledAdmin};
use kernel::{
    block::mq::{
        gen_disk::{GenDisk, GenDiskBuilder},
        TagSet,
    },
    device::{self, Core},
    devres::Devres,
    dma::{self, DmaMask},
    driver, fmt, irq,
    page::PAGE_SIZE,
    pci,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
    time::Delta,
};
use link::CutOnDrop;
use ns::Namespaces;
use nsdisk::NsSet;
use queue::IoQueue;
use queueset::{CqIrq, QueueSet};
use regs::Regs;
use request::NvmeOps;
use transfer::Transfer;

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
        overflow_scan: bool {
            default: false,
            description: "With overflow, try every other queue in turn when a CPU's queue is full (the linear scan, for comparison) instead of at most two chosen by their counters",
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
        poll_queues: u32 {
            default: 0,
            description: "Number of queue pairs for polled I/O, without interrupts (taken from the controller's queues; at least one stays interrupt-driven)",
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
        bogus_nid_quirk: bool {
            default: true,
            description: "Ignore the namespace identifiers (UUID, NGUID, EUI-64) of QEMU's emulated controllers, as the C driver's NVME_QUIRK_BOGUS_NID does (0: use them, like nvme.quirks=1b36:0010:^bogus_nid)",
            perm: 0o444,
        },
        max_retries: u32 {
            default: 5,
            description: "How many times an I/O command that failed without Do Not Retry is sent again (0..=255)",
            perm: 0o444,
        },
        fail_probe_late: bool {
            default: false,
            description: "For tests: fail the probe once its disks are added and its asynchronous events started (what it set up must be taken down again)",
            perm: 0o444,
        },
        sgl_threshold: u32 {
            default: 32768,
            description: "Use SGLs when the average segment size of a request is this many bytes or more (0: only for requests PRPs cannot describe), on controllers that support them",
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
/// Largest `max_retries` (C's parameter is a byte).
const MAX_RETRIES: u32 = 255;

/// Set by a probe that failed because of a module parameter, so that insmod fails.
static PARAM_ERROR: Atomic<i32> = Atomic::new(0);

/// A bound NVMe controller (see docs/design.md, "Ownership and teardown order"). When dropped
/// (at an unbind, or when the probe fails once it exists), the controller stops resets and
/// has the namespace layer remove its disks first (which waits for their requests); then the
/// fields are dropped in order: the character device's link (cut: files of `/dev/rnvme<C>`
/// held open must not keep the controller past the unbind), the CPU hotplug callbacks, the
/// character device, the debugfs files, then the controller (the last reference
/// to it unless a file of the character device is still open: it is shut down before its queue
/// memory goes), then the interrupts and the I/O queue memory they reap.
struct NvmeDevice {
    _chardev_link: CutOnDrop<Namespaces>,
    _hotplug: hotplug::Hotplug,
    _chardev: chardev::Chardev,
    _debugfs: Option<debugfs::CtrlDebugfs>,
    ctrl: Arc<Ctrl>,
    _irqs: Devres<pci::IrqHandlers<CqIrq>>,
    _index: CtrlIndex,
}

/// The module parameters a probe uses.
struct Params {
    depth: u32,
    overflow: bool,
    overflow_scan: bool,
    nr_io_queues: u32,
    poll_queues: u32,
    io_timeout: Delta,
    admin_timeout: Delta,
    sgl_threshold: u32,
}

impl Params {
    fn get() -> Self {
        Self {
            depth: module_parameters::io_queue_depth.value(),
            overflow: module_parameters::overflow.value(),
            overflow_scan: module_parameters::overflow_scan.value(),
            nr_io_queues: module_parameters::nr_io_queues.value(),
            poll_queues: module_parameters::poll_queues.value(),
            io_timeout: Delta::from_secs(module_parameters::io_timeout.value().into()),
            admin_timeout: Delta::from_secs(module_parameters::admin_timeout.value().into()),
            sgl_threshold: module_parameters::sgl_threshold.value(),
        }
    }
}

/// Whether the controller is one whose namespace identifiers the C driver ignores
/// (`NVME_QUIRK_BOGUS_NID` in its PCI id table): QEMU's emulated controllers.
fn reports_bogus_nids(pdev: &pci::Device<Core<'_>>) -> bool {
    matches!(
        (pdev.vendor_id(), pdev.device_id()),
        (pci::Vendor::REDHAT, 0x0010) | (pci::Vendor::INTEL, 0x5845)
    )
}

/// Enable the PCI function for memory access and bus mastering with 64-bit DMA, and map the
/// controller registers.
fn map_controller(pdev: &pci::Device<Core<'_>>) -> Result<Arc<Regs>> {
    pdev.enable_device_mem()?;
    pdev.set_master();
    // What a link reset's recovery writes back (see `Ctrl::slot_reset`).
    pdev.save_state()?;
    // SAFETY: `dma_set_mask_and_coherent` must not run concurrently with a DMA allocation or
    // mapping for this device. This is probe (device lock held), before this binding made any.
    // What this driver allocated or mapped in an earlier binding is gone too, by the teardown
    // order of `NvmeDevice`, and only by it: the coherent rings (with the admin queue's
    // Identify buffer), PRP lists and request mappings (`DmaMapping`) all live in the `Ctrl`'s
    // queues, which only `NvmeDevice` and what it owns reach: the disks (queue data
    // `Ns`), the character device's `Namespaces` and `Passthru`, the IRQ handlers
    // (`CqIrq`), the hotplug and debugfs entries and the reset/rescan work.
    // `NvmeDevice::drop` runs at unbind, before the driver core releases the binding: it
    // stops resets, removes the disks (waiting for their requests) and cuts the character
    // device's link from open files; dropping its fields then frees the IRQ handlers, hotplug
    // and debugfs entries and the last `Ctrl`, with its DMA memory, before the unbind returns.
    // Nothing else maps for a device this driver is bound to.
    unsafe { dma::Device::dma_set_mask_and_coherent(pdev, DmaMask::new::<64>())? };
    Ok(Arc::new(Regs::map(pdev)?, GFP_KERNEL)?)
}

/// Check that the controller supports what the driver needs; returns the I/O queue depth.
fn check_capabilities(pdev: &pci::Device<Core<'_>>, regs: &Regs, depth: u32) -> Result<u16> {
    let cap = regs.cap();
    let max_depth = cap.max_queue_entries();
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
    if !cap.css_nvm() || cap.min_page_shift() > PAGE_SIZE.trailing_zeros() {
        dev_err!(
            pdev,
            "controller does not support the NVM command set with 4 KiB pages\n"
        );
        return Err(ENODEV);
    }
    // Checked at module load: 2..=65536, and now <= MQES + 1 <= 65536.
    u16::try_from(depth.min(u32::from(u16::MAX))).map_err(|_| EINVAL)
}

/// Disable the controller, then set up the admin queue and enable it.
fn enable_controller(
    pdev: &pci::Device<Core<'_>>,
    regs: &Arc<Regs>,
    admin_timeout: Delta,
) -> Result<EnabledAdmin> {
    let timeout_ms = regs.cap().ready_timeout().as_millis();
    regs.disable().inspect_err(|e| {
        dev_err!(
            pdev,
            "controller did not become disabled within {} ms ({:?})\n",
            timeout_ms,
            e
        )
    })?;
    let admin = AdminQueue::new(pdev.as_ref(), admin_timeout)?;
    EnabledAdmin::enable(regs, admin).inspect_err(|&e| {
        let csts = regs.csts().map_or(!0, u32::from);
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
    })
}

/// The I/O queue pairs allocated at probe.
struct Allocated {
    /// Not yet created on the controller; the poll queues last.
    queues: KVec<Arc<IoQueue>>,
    /// How many queue pairs were asked for.
    want: u32,
}

/// Ask for the I/O queue pairs (`poll_queues` on top of the interrupt-driven ones) and
/// allocate those granted (not yet created on the controller), the poll queues last.
fn alloc_io_queues(
    pdev: &pci::Device<Core<'_>>,
    regs: &Arc<Regs>,
    admin: &mut EnabledAdmin,
    params: &Params,
    ctrl_index: u32,
    depth: u16,
    transfer: Transfer,
) -> Result<Allocated> {
    let want = match params.nr_io_queues {
        0 => kernel::cpu::nr_cpu_ids(),
        n => n,
    }
    .saturating_add(params.poll_queues)
    .clamp(1, 65535);
    let nr_queues = admin.queue.set_queue_count(regs, want)? as usize;
    if params.poll_queues as usize >= nr_queues {
        dev_err!(
            pdev,
            "poll_queues={} needs at least {} I/O queue pairs (one interrupt-driven), the controller grants {}\n",
            params.poll_queues,
            params.poll_queues as usize + 1,
            nr_queues
        );
        PARAM_ERROR.store(1, Relaxed);
        return Err(EINVAL);
    }
    let mut queues = KVec::with_capacity(nr_queues, GFP_KERNEL)?;
    for i in 0..nr_queues {
        let qid = u16::try_from(i + 1)?;
        queues.push(
            IoQueue::new(
                pdev.as_ref(),
                regs.clone(),
                ctrl_index,
                qid,
                depth,
                transfer,
            )?,
            GFP_KERNEL,
        )?;
    }
    Ok(Allocated { queues, want })
}

/// One MSI-X vector, the admin queue's, before the controller is enabled (it is replaced by
/// [`request_irqs`] once the number of queues is known), as the C driver's `nvme_pci_enable()`
/// does: QEMU's controller signals the admin queue's vector 0 only if MSI-X was on when the
/// controller was enabled, and asynchronous events need that interrupt.
fn request_admin_irq(
    pdev: &pci::Device<Core<'_>>,
    admin_work: &Arc<AdminWork>,
) -> Result<Devres<pci::IrqHandlers<CqIrq>>> {
    pdev.request_irq_handlers(
        1,
        1,
        pci::IrqTypes::default().with(pci::IrqType::MsiX),
        None,
        irq::Flags::TRIGGER_NONE,
        c"rust_nvme_mq",
        |vector, nr_vectors| CqIrq::new(&[], admin_work, vector, nr_vectors),
    )
}

/// Trade the admin queue's lone vector for one per interrupt-driven queue, then gather the
/// allocated queues into the set the block layer maps CPUs onto.
fn queue_set(
    pdev: &pci::Device<Core<'_>>,
    admin_irq: Devres<pci::IrqHandlers<CqIrq>>,
    Allocated { queues, want }: Allocated,
    params: &Params,
    admin_work: &Arc<AdminWork>,
) -> Result<(QueueSet, Devres<pci::IrqHandlers<CqIrq>>)> {
    let nr_poll = params.poll_queues as usize;
    pdev.free_irq_handlers(admin_irq)?;
    let irqs = request_irqs(pdev, &queues[..queues.len() - nr_poll], admin_work)?;
    let set = QueueSet::new(
        queues,
        nr_poll,
        irqs.access(pdev.as_ref())?,
        want,
        params.overflow,
        params.overflow_scan,
    )?;
    Ok((set, irqs))
}

/// One interrupt handler per MSI-X vector, each reaping the completion queues assigned to it.
/// Vector 0 (admin queue) is not spread; the I/O queues' vectors follow the CPUs.
fn request_irqs(
    pdev: &pci::Device<Core<'_>>,
    queues: &[Arc<IoQueue>],
    admin_work: &Arc<AdminWork>,
) -> Result<Devres<pci::IrqHandlers<CqIrq>>> {
    pdev.request_irq_handlers(
        1,
        u32::try_from(queues.len() + 1)?,
        pci::IrqTypes::default().with(pci::IrqType::MsiX),
        Some(1),
        irq::Flags::TRIGGER_NONE,
        c"rust_nvme_mq",
        |vector, nr_vectors| CqIrq::new(queues, admin_work, vector, nr_vectors),
    )
}

fn announce(pdev: &pci::Device<Core<'_>>, regs: &Regs, ctrl: &Ctrl, info: &CtrlInfo) {
    let vs = regs
        .version()
        .map_or((0, 0), |vs| (vs.major().get(), vs.minor().get()));
    let queues = &ctrl.queues;
    dev_info!(
        pdev,
        "rnvme{}: {} ({}), NVMe {}.{}, {} I/O queues of {} entries, {} MSI-X vectors, max transfer {} KiB, SGLs {}, overflow={}\n",
        ctrl.index,
        cmd::IdString(&info.model),
        cmd::IdString(&info.serial),
        vs.0,
        vs.1,
        queues.len(),
        queues.depth(),
        queues.nr_vectors(),
        info.transfer.max_bytes / 1024,
        if info.transfer.sgl { "on" } else { "off" },
        queues.overflow()
    );
    if queues.nr_poll() > 0 {
        dev_info!(
            pdev,
            "rnvme{}: {} of the I/O queues are poll queues (no interrupts)\n",
            ctrl.index,
            queues.nr_poll()
        );
    }
}

/// Build a disk owned by this module ([`ns::BuildDisk`]): only the crate root names the
/// module's type.
fn build_disk(
    builder: GenDiskBuilder,
    name: fmt::Arguments<'_>,
    tagset: Arc<TagSet<NvmeOps>>,
    ns: Arc<nsdisk::Ns>,
) -> Result<GenDisk<NvmeOps>> {
    builder.build_owned::<RustNvmeMq, _>(name, tagset, ns)
}

/// The namespace layer of controller `ctrl` (no disk yet): its list, passthrough and what
/// its disks are made of.
fn namespace_layer(
    ctrl: &Arc<Ctrl>,
    info: CtrlInfo,
    io_timeout: Delta,
    dev: &device::Device<device::Bound>,
    ctrl_dev: &device::Device,
) -> Result<Arc<Namespaces>> {
    let list = NsSet::new(ctrl.clone(), dev)?;
    let passthru = ioctl::Passthru::new(list.clone(), info.transfer.sgl, dev)?;
    let namespaces = Namespaces::new(list, passthru, info, io_timeout, dev, ctrl_dev, build_disk)?;
    Ok(Arc::new(namespaces, GFP_KERNEL)?)
}

/// `fail_probe_late`: fail here (`EIO`), for tests.
fn fail_late() -> Result {
    if module_parameters::fail_probe_late.value() {
        pr_warn!("fail_probe_late: failing the probe\n");
        return Err(EIO);
    }
    Ok(())
}

impl NvmeDevice {
    /// Bring the controller up step by step; each step returns what owns what it set up, so
    /// a failed step undoes the earlier ones in reverse order.
    fn probe(pdev: &pci::Device<Core<'_>>) -> Result<Self> {
        let params = Params::get();
        let dev: &device::Device<device::Bound> = pdev.as_ref();
        let regs = map_controller(pdev)?;
        let depth = check_capabilities(pdev, &regs, params.depth)?;
        let admin_work = AdminWork::new()?;
        let admin_irq = request_admin_irq(pdev, &admin_work)?;
        let mut admin = enable_controller(pdev, &regs, params.admin_timeout)?;
        let mut info = CtrlInfo::identify(&mut admin, &regs, params.sgl_threshold)?;
        info.bogus_nid = module_parameters::bogus_nid_quirk.value() && reports_bogus_nids(pdev);
        let index = CtrlIndex::take()?;
        let allocated = alloc_io_queues(
            pdev,
            &regs,
            &mut admin,
            &params,
            index.0,
            depth,
            info.transfer,
        )?;
        let (queues, irqs) = queue_set(pdev, admin_irq, allocated, &params, &admin_work)?;
        let ctrl = Ctrl::new(
            dev,
            index.0,
            regs.clone(),
            admin,
            queues,
            admin_work.clone(),
        )?;
        announce(pdev, &regs, &ctrl, &info);
        // The controller's device first: the disks and generic devices are its children.
        let chardev = chardev::register(ctrl.index, dev)?;
        let namespaces = namespace_layer(&ctrl, info, params.io_timeout, dev, chardev.device())?;
        let chardev_link = chardev.data().set(namespaces.clone());
        let hotplug = hotplug::register(pdev.as_ref(), ctrl.clone(), params.io_timeout)?;
        Self {
            _chardev_link: chardev_link,
            _hotplug: hotplug,
            _chardev: chardev,
            _debugfs: None,
            ctrl,
            _irqs: irqs,
            _index: index,
        }
        .start(&namespaces, &admin_work)
    }

    /// Add the disks (the namespace scan), start the asynchronous events and add the debugfs
    /// files. A failure drops `self`, which removes the controller as an unbind does: its
    /// events, set before the first disk is added, have the disks removed first.
    fn start(mut self, namespaces: &Arc<Namespaces>, admin_work: &Arc<AdminWork>) -> Result<Self> {
        self.ctrl.set_events(namespaces.clone());
        namespaces.scan()?;
        aen::Aen::start(self.ctrl.clone(), admin_work)?;
        fail_late()?;
        self._debugfs = debugfs::CtrlDebugfs::new(&self.ctrl).ok();
        Ok(self)
    }
}

impl Drop for NvmeDevice {
    fn drop(&mut self) {
        self.ctrl.remove();
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

    fn shutdown<'bound>(_pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        this.ctrl.shutdown();
    }

    const SYSTEM_SLEEP: bool = true;

    fn suspend<'bound>(
        _pdev: &'bound pci::Device<Core<'_>>,
        this: Pin<&Self::Data<'bound>>,
    ) -> Result {
        this.ctrl.suspend();
        Ok(())
    }

    fn resume<'bound>(
        _pdev: &'bound pci::Device<Core<'_>>,
        this: Pin<&Self::Data<'bound>>,
    ) -> Result {
        this.ctrl.resume();
        Ok(())
    }

    const RESET_HANDLERS: bool = true;

    fn reset_prepare<'bound>(_pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        this.ctrl.function_reset_prepare(ctrl::FUNCTION_RESET);
    }

    fn reset_done<'bound>(pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        this.ctrl
            .function_reset_done(pdev.as_ref(), ctrl::FUNCTION_RESET);
    }

    const AER_HANDLERS: bool = true;

    fn error_detected<'bound>(
        _pdev: &'bound pci::Device<Core<'_>>,
        this: Pin<&Self::Data<'bound>>,
        state: pci::ChannelState,
    ) -> pci::Recovery {
        this.ctrl.error_detected(state)
    }

    fn mmio_enabled<'bound>(
        _pdev: &'bound pci::Device<Core<'_>>,
        _this: Pin<&Self::Data<'bound>>,
    ) -> pci::Recovery {
        // Only after a non-fatal error, which left the controller running.
        pci::Recovery::Recovered
    }

    fn slot_reset<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        this: Pin<&Self::Data<'bound>>,
    ) -> pci::Recovery {
        this.ctrl.slot_reset(pdev)
    }
}

/// The module: the PCI driver, registered after the parameters are checked.
#[pin_data]
struct RustNvmeMq {
    #[pin]
    _driver: driver::Registration<pci::Adapter<NvmeDriver>>,
    /// Dropped after the driver: the controllers' devices are gone by then.
    _class: kernel::class::Registration,
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
    let retries = module_parameters::max_retries.value();
    if retries > MAX_RETRIES {
        pr_err!("max_retries={retries} is out of range (0..={MAX_RETRIES})\n");
        return Err(EINVAL);
    }
    queue::set_max_retries(retries);
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
                "loaded: overflow={} io_queue_depth={} nr_io_queues={} poll_queues={} io_timeout={} admin_timeout={} max_retries={}\n",
                module_parameters::overflow.value(),
                module_parameters::io_queue_depth.value(),
                module_parameters::nr_io_queues.value(),
                module_parameters::poll_queues.value(),
                module_parameters::io_timeout.value(),
                module_parameters::admin_timeout.value(),
                module_parameters::max_retries.value()
            );
            Ok(try_pin_init!(Self {
                // Before the driver: a probe adds the controller's device to the class.
                _class: chardev::register_class(module)?,
                _driver <- driver::Registration::new(c"rust_nvme_mq", module),
                // Probing is synchronous: a device refused because of a parameter fails insmod.
                _: { check_probe()?; },
            }? Error))
        })
    }
}
