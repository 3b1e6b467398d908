// SPDX-License-Identifier: GPL-2.0

//! NVMe passthrough ioctls (`include/uapi/linux/nvme_ioctl.h`) of the controller character
//! device, with the checks and results of the C driver (`drivers/nvme/host/ioctl.c`).
//!
//! Admin commands run on the driver's admin queue, I/O commands as driver-private requests on
//! the queue of the disk they are for (`request.rs` reads the command as built here, and keeps
//! the completion's status and result in the request for the ioctl). The data of admin
//! commands and of `NVME_IOCTL_IO_CMD`/`NVME_IOCTL_IO64_CMD` goes through a bounce buffer
//! allocated at probe (DMA coherent, described by PRP1/PRP2 or a PRP list): zeroed before
//! every command, so what the controller did not write comes back as zeroes; one such command
//! runs at a time per controller. `NVME_IOCTL_SUBMIT_IO` and `NVME_IOCTL_IO64_CMD_VEC` map
//! the user's memory into the request instead (`GenDisk::execute_driver_cmd_user`: pinned, or
//! copied by the block layer where it does not meet the queue's limits), described by an SGL
//! where the controller takes them, and run side by side. `NVME_IOCTL_RESCAN` is the
//! character device's (`chardev.rs`, `rescan.rs`).

use crate::{
    cmd::{self, Completion, Sqe},
    ctrl::Ctrl,
    le::Le64,
    link::GateClosed,
    nsdisk::{Ns, NsPassthru, NsSet, Revalidated},
    request::NvmeOps,
};
use kernel::{
    block::mq::{
        gen_disk::{GenDisk, UserData},
        DRIVER_CMD_SIZE,
    },
    cred::{capable, Capability},
    device::{Bound, Device},
    dma::Coherent,
    io::{io_project, Io},
    io_uring::{Answer, IssueFlags, SqeCmd, UringCmd},
    ioctl::{_IO, _IOW, _IOWR},
    page::PAGE_SIZE,
    prelude::*,
    sync::{atomic::Relaxed, new_mutex, Arc, Mutex},
    time::Delta,
    uaccess::{UserPtr, UserSlice},
};
use zerocopy_derive::{Immutable, KnownLayout};

/// `struct nvme_passthru_cmd` (`NVME_IOCTL_ADMIN_CMD`, `NVME_IOCTL_IO_CMD`).
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
struct PassthruCmd {
    opcode: u8,
    flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    metadata: u64,
    addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10_15: [u32; 6],
    timeout_ms: u32,
    result: u32,
}

/// `struct nvme_passthru_cmd64` (`NVME_IOCTL_ADMIN64_CMD`): the same with a 64-bit result.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes)]
struct PassthruCmd64 {
    cmd: [u8; size_of::<PassthruCmd>() - 4],
    rsvd2: u32,
    result: u64,
}

impl PassthruCmd {
    /// Whether the command has flags or metadata, which no passthrough here takes.
    fn has_flags_or_metadata(&self) -> bool {
        self.flags != 0 || self.metadata_len != 0 || self.metadata != 0
    }

    /// The command to send: opcode, namespace and the command dwords, no data pointer.
    fn sqe(&self) -> Sqe {
        Sqe::new(self.opcode, self.nsid).dwords(self.cdw2, self.cdw3, self.cdw10_15)
    }

    /// The caller's timeout (0: the driver's).
    fn timeout(&self) -> Option<Delta> {
        (self.timeout_ms != 0).then(|| Delta::from_millis(self.timeout_ms.into()))
    }

    /// Whether the command moves data to the controller (bit 0 of the opcode, as C's
    /// `nvme_is_write()`).
    fn is_write(&self) -> bool {
        is_write(self.opcode)
    }

    /// The user memory the command names, to map into its request: `data_len` bytes at
    /// `addr`, or, `vectored`, the buffers of `data_len` `struct iovec` at `addr`.
    fn user_data(&self, vectored: bool) -> Result<UserData> {
        let addr = UserPtr::from_addr(usize::try_from(self.addr)?);
        let len = usize::try_from(self.data_len)?;
        if vectored {
            UserData::vectors(addr, len)
        } else {
            UserData::buffer(addr, len)
        }
    }
}

/// Whether a command with `opcode` moves data to the controller (C's `nvme_is_write()`).
fn is_write(opcode: u8) -> bool {
    opcode & 1 != 0
}

/// `sqe` as the command of a driver-private request.
fn driver_cmd(sqe: &mut Sqe) -> Result<&[u8; DRIVER_CMD_SIZE]> {
    <&[u8; DRIVER_CMD_SIZE]>::try_from(&*sqe.as_mut_bytes()).map_err(|_| EINVAL)
}

/// `struct nvme_user_io` (`NVME_IOCTL_SUBMIT_IO`): a read, write or compare of the namespace.
#[repr(C)]
#[derive(Clone, Copy, FromBytes)]
struct UserIo {
    opcode: u8,
    flags: u8,
    control: u16,
    /// Blocks, less one.
    nblocks: u16,
    rsvd: u16,
    metadata: u64,
    addr: u64,
    slba: u64,
    dsmgmt: u32,
    reftag: u32,
    apptag: u16,
    appmask: u16,
}

const IOCTL_TYPE: u32 = b'N' as u32;
const NVME_IOCTL_ID: u32 = _IO(IOCTL_TYPE, 0x40);
const NVME_IOCTL_ADMIN_CMD: u32 = _IOWR::<PassthruCmd>(IOCTL_TYPE, 0x41);
const NVME_IOCTL_SUBMIT_IO: u32 = _IOW::<UserIo>(IOCTL_TYPE, 0x42);
const NVME_IOCTL_IO_CMD: u32 = _IOWR::<PassthruCmd>(IOCTL_TYPE, 0x43);
const NVME_IOCTL_RESET: u32 = _IO(IOCTL_TYPE, 0x44);
pub(crate) const NVME_IOCTL_RESCAN: u32 = _IO(IOCTL_TYPE, 0x46);
const NVME_IOCTL_ADMIN64_CMD: u32 = _IOWR::<PassthruCmd64>(IOCTL_TYPE, 0x47);
const NVME_IOCTL_IO64_CMD: u32 = _IOWR::<PassthruCmd64>(IOCTL_TYPE, 0x48);
const NVME_IOCTL_IO64_CMD_VEC: u32 = _IOWR::<PassthruCmd64>(IOCTL_TYPE, 0x49);

/// io_uring commands of the generic device (`struct nvme_uring_cmd`: `struct
/// nvme_passthru_cmd` with `result` reserved).
const NVME_URING_CMD_IO: u32 = _IOWR::<PassthruCmd>(IOCTL_TYPE, 0x80);
const NVME_URING_CMD_IO_VEC: u32 = _IOWR::<PassthruCmd>(IOCTL_TYPE, 0x81);

/// Which of the two passthrough structures an ioctl passes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// `struct nvme_passthru_cmd`: a 32-bit result.
    Cmd,
    /// `struct nvme_passthru_cmd64`: a 64-bit result.
    Cmd64,
}

/// Largest data transfer of a passthrough command.
pub(crate) const MAX_DATA: usize = 256 * 1024;
const MAX_PAGES: usize = MAX_DATA / PAGE_SIZE;
const ZEROES: [u8; PAGE_SIZE] = [0; PAGE_SIZE];

/// The data buffer of passthrough commands and its PRP list.
struct Bounce {
    data: Coherent<[u8]>,
    prp_list: Coherent<[u8]>,
}

impl Bounce {
    fn new(dev: &Device<Bound>) -> Result<Self> {
        let data = Coherent::<u8>::zeroed_slice(dev, MAX_DATA, GFP_KERNEL)?;
        let prp_list = Coherent::<u8>::zeroed_slice(dev, PAGE_SIZE, GFP_KERNEL)?;
        // Entry i of the list: page i + 1 of the buffer (page 0 is PRP1).
        for i in 0..MAX_PAGES - 1 {
            let addr = data.dma_address() + ((i + 1) * PAGE_SIZE) as u64;
            cmd::entry::<Le64>(&prp_list, i)?.copy_write(Le64::new(addr));
        }
        Ok(Self { data, prp_list })
    }

    /// Zero the first `len` bytes (rounded up to pages): what the controller transfers for a
    /// command of that length.
    fn zero(&self, len: usize) -> Result {
        for start in (0..len).step_by(PAGE_SIZE) {
            io_project!(&self.data, [try: start..start + PAGE_SIZE]).copy_from_slice(&ZEROES);
        }
        Ok(())
    }

    /// PRP1 and PRP2 for a transfer of `len` bytes.
    fn prps(&self, len: usize) -> (u64, u64) {
        let base = self.data.dma_address();
        match len.div_ceil(PAGE_SIZE) {
            0 => (0, 0),
            1 => (base, 0),
            2 => (base, base + PAGE_SIZE as u64),
            _ => (base, self.prp_list.dma_address()),
        }
    }
}

/// The passthrough ioctls of a controller: of its character device and of its namespaces.
#[pin_data]
pub(crate) struct Passthru {
    pub(crate) ctrl: Arc<Ctrl>,
    /// The disks, which the I/O commands go through and a format revalidates.
    list: Arc<NsSet>,
    /// The controller takes SGLs for I/O commands.
    sgl: bool,
    #[pin]
    bounce: Mutex<Bounce>,
}

impl NsPassthru for Passthru {
    fn ioctl(&self, ns: &Ns, cmd: u32, arg: usize) -> Result<i32> {
        self.ns_ioctl(ns, cmd, arg)
    }

    /// An io_uring command on the generic device of namespace `ns`:
    /// `NVME_URING_CMD_IO` (data in one buffer) or `NVME_URING_CMD_IO_VEC` (in the buffers of
    /// `data_len` `struct iovec`), issued as a driver-private request of the disk with the
    /// user memory mapped into it, completed when the request ends: the CQE's result is the
    /// NVMe status (or a negative errno), its second result dword 0-1 of the completion.
    /// The same checks as `NVME_IOCTL_IO64_CMD_VEC` (root only, no flags or metadata, the
    /// device's namespace, data only with SGLs), and, like the C driver, 128-byte SQEs and
    /// 32-byte CQEs (`EOPNOTSUPP` otherwise). Not allowed, where C allows it: a command that
    /// transfers data (bits 1:0 of the opcode) without data (`EINVAL`): it would name no
    /// buffer, and the controller would move the data from or to bus address 0.
    fn uring_cmd(
        &self,
        ns: &Ns,
        disk: &GenDisk<NvmeOps>,
        cmd: UringCmd,
        sqe: &SqeCmd,
        flags: IssueFlags,
    ) -> Answer {
        let (c, data) = match self.check_uring(ns.shape.nsid, cmd.cmd_op(), sqe, flags) {
            Ok(checked) => checked,
            Err(e) => return Answer::Refused(cmd, e),
        };
        let mut nvme = c.sqe();
        let bytes = match driver_cmd(&mut nvme) {
            Ok(bytes) => bytes,
            Err(e) => return Answer::Refused(cmd, e),
        };
        disk.submit_driver_cmd_uring(cmd, c.is_write(), bytes, c.timeout(), data)
    }
}

impl Passthru {
    /// The passthrough of the controller of `list`; `sgl`: the controller takes SGLs for I/O
    /// commands.
    pub(crate) fn new(list: Arc<NsSet>, sgl: bool, dev: &Device<Bound>) -> Result<Arc<Self>> {
        let bounce = Bounce::new(dev)?;
        Arc::pin_init(
            pin_init!(Self {
                ctrl: list.ctrl.clone(),
                list,
                sgl,
                bounce <- new_mutex!(bounce),
            }),
            GFP_KERNEL,
        )
    }

    /// An ioctl on the character device (but `NVME_IOCTL_RESCAN`, see `chardev.rs`).
    pub(crate) fn ioctl(&self, cmd: u32, arg: usize) -> Result<i32> {
        match cmd {
            // Like the C driver: on the controller, the (deprecated) I/O command goes to the
            // only namespace.
            NVME_IOCTL_IO_CMD => self.io_cmd(None, arg, Layout::Cmd),
            _ => self.ctrl_ioctl(cmd, arg),
        }
    }

    /// The controller ioctls that the disks answer too.
    fn ctrl_ioctl(&self, cmd: u32, arg: usize) -> Result<i32> {
        self.ctrl_ioctl_on(None, cmd, arg)
    }

    /// The controller ioctls, on the disk of namespace `on_ns` or on the controller (`None`).
    fn ctrl_ioctl_on(&self, on_ns: Option<u32>, cmd: u32, arg: usize) -> Result<i32> {
        match cmd {
            NVME_IOCTL_ADMIN_CMD => self.admin_cmd(on_ns, arg, Layout::Cmd),
            NVME_IOCTL_ADMIN64_CMD => self.admin_cmd(on_ns, arg, Layout::Cmd64),
            NVME_IOCTL_RESET => self.reset(),
            // Like the C driver's controller device: NVME_IOCTL_ID is a namespace ioctl.
            // SUBSYS_RESET is not implemented.
            NVME_IOCTL_ID => Err(ENOTTY),
            _ => Err(ENOTTY),
        }
    }

    /// An ioctl on the block device (or generic device) of namespace `ns`: its id, I/O
    /// passthrough, and the controller's admin passthrough (as the C driver's namespace devices
    /// do; reset and rescan are controller ioctls there too: a rescan may remove the disk it is
    /// called on).
    fn ns_ioctl(&self, ns: &Ns, cmd: u32, arg: usize) -> Result<i32> {
        let nsid = ns.shape.nsid;
        match cmd {
            NVME_IOCTL_ID => Ok(i32::try_from(nsid)?),
            NVME_IOCTL_IO_CMD => self.io_cmd(Some(ns), arg, Layout::Cmd),
            NVME_IOCTL_IO64_CMD => self.io_cmd(Some(ns), arg, Layout::Cmd64),
            NVME_IOCTL_SUBMIT_IO => self.submit_io(ns, arg),
            NVME_IOCTL_IO64_CMD_VEC => self.io_cmd_vec(ns, arg),
            // Only the admin commands of the controller's ioctls, as in C. Not RESET: it
            // waits for the reset work, which may delete this disk, which waits for this
            // ioctl.
            NVME_IOCTL_ADMIN_CMD | NVME_IOCTL_ADMIN64_CMD => {
                self.ctrl_ioctl_on(Some(nsid), cmd, arg)
            }
            _ => Err(ENOTTY),
        }
    }

    fn reset(&self) -> Result<i32> {
        if !capable(Capability::SYS_ADMIN) {
            return Err(EACCES);
        }
        if self.ctrl.regs.csts().is_none() {
            // The controller is gone (unbound): a file opened before stays, uselessly.
            return Err(ENODEV);
        }
        pr_warn!("rnvme{}: resetting controller\n", self.ctrl.index);
        self.ctrl.reset_sync().map(|()| 0)
    }

    /// `NVME_IOCTL_ADMIN_CMD` (`Cmd64`: `NVME_IOCTL_ADMIN64_CMD`) on the disk of namespace
    /// `on_ns` or on the controller: run the command on the admin queue; returns the NVMe
    /// status (0 on success, positive: the controller's status field) and writes dword 0 of
    /// the completion back to `result`.
    fn admin_cmd(&self, on_ns: Option<u32>, arg: usize, layout: Layout) -> Result<i32> {
        let c = read_cmd(arg, layout)?;
        let sqe = check_admin(&c)?;
        let len = usize::try_from(c.data_len)?;
        let to_ctrl = c.is_write();
        let timeout = c.timeout();
        let done = if changes_namespaces(c.opcode) {
            self.admin_cmd_frozen(on_ns, sqe, to_ctrl, c.addr, len, timeout)?
        } else {
            self.run_with_data(sqe, to_ctrl, c.addr, len, |sqe| {
                self.ctrl.run_user_admin(sqe, timeout)
            })?
        };
        if done.status != 0 && self.ctrl.passthru_err_log.load(Relaxed) {
            cmd::log_failed_passthrough(
                fmt!("rnvme{}", self.ctrl.index),
                "Admin",
                &sqe,
                done.status,
            );
        }
        write_result(arg, layout, done.result)?;
        Ok(done.status.into())
    }

    /// An admin command that changes the format or content of namespaces, like the C driver's
    /// `nvme_passthru_start()`/`nvme_passthru_end()`: every disk is frozen once the user's data
    /// is copied in (no request in flight, new ones wait), the command runs, then each disk is
    /// revalidated before it runs again: a new block size or capacity is set, a namespace the
    /// driver cannot serve any more loses its disk. Revalidated whatever the command returned
    /// (a failed format may have changed the namespace too), unless it was not sent. A disk
    /// that cannot be revalidated gets capacity 0 (no I/O reaches its namespace, whose format
    /// is unknown) until a rescan; so does an unusable one when the ioctl runs on its own disk
    /// (`on_ns`), which cannot be removed from inside its ioctl.
    fn admin_cmd_frozen(
        &self,
        on_ns: Option<u32>,
        sqe: Sqe,
        to_ctrl: bool,
        addr: u64,
        len: usize,
        timeout: Option<Delta>,
    ) -> Result<Completion> {
        // No scan meanwhile (C's `scan_lock`).
        let scan = self.list.scan_lock();
        let all = self.list.namespaces()?;
        let (mut held, mut disks) = (KVec::new(), KVec::new());
        for ns in all.iter() {
            // Their formats held: every passthrough command built for one is done.
            held.push(ns.hold_format(), GFP_KERNEL)?;
            disks.push(ns.disk(), GFP_KERNEL)?;
        }
        // Allocated before the disks are frozen: reclaim may write to them.
        let mut frozen = KVec::with_capacity(disks.len(), GFP_KERNEL)?;
        let mut sent = false;
        let outcome = self.run_with_data(sqe, to_ctrl, addr, len, |sqe| {
            for d in disks.iter().flatten() {
                // Cannot fail: room for every disk was allocated before.
                let _ = frozen.push_within_capacity(d.freeze());
            }
            let outcome = self.ctrl.run_user_admin(sqe, timeout);
            // Not sent: the controller is not live, or the admin queue is full.
            sent = outcome
                .as_ref()
                .err()
                .is_none_or(|e| *e != ENODEV && *e != EBUSY);
            outcome
        });
        if !sent {
            return outcome;
        }
        let unusable = self.revalidate_all(&all, &held, on_ns);
        // Thawed, their formats released, then the unusable ones removed, once the scan lock
        // is released: a removal waits for the calls on the namespace's generic device, and
        // one may wait for that lock.
        drop(frozen);
        drop(disks);
        drop(held);
        drop(scan);
        for nsid in unusable? {
            self.list.retire(nsid, "namespace not usable");
        }
        outcome
    }

    /// Revalidate namespaces `all` (their formats `held`) after a command that changed them;
    /// returns those that must go (see [`Passthru::keeps`]).
    fn revalidate_all(
        &self,
        all: &[Arc<Ns>],
        held: &[GateClosed<'_>],
        on_ns: Option<u32>,
    ) -> Result<KVec<u32>> {
        let mut unusable = KVec::new();
        for (ns, held) in all.iter().zip(held.iter()) {
            if !self.keeps(ns, self.list.revalidate(ns, Some(held)), on_ns, held) {
                unusable.push(ns.shape.nsid, GFP_KERNEL)?;
            }
        }
        Ok(unusable)
    }

    /// Whether namespace `ns`, revalidated after a command (`verdict`), stays: an unusable one
    /// goes, unless the command came through its own ioctl (`on_ns`); that one and one that
    /// could not be revalidated stay with capacity 0 (`held`: its format).
    fn keeps(
        &self,
        ns: &Ns,
        verdict: Revalidated,
        on_ns: Option<u32>,
        held: &GateClosed<'_>,
    ) -> bool {
        match verdict {
            Revalidated::Unusable if Some(ns.shape.nsid) != on_ns => return false,
            Revalidated::Unusable | Revalidated::Failed => self.list.empty(ns, held),
            Revalidated::Same | Revalidated::Changed => {}
        }
        true
    }

    /// `NVME_IOCTL_IO_CMD` (`Cmd64`: `NVME_IOCTL_IO64_CMD`) on the disk of namespace `on_ns`,
    /// or on the controller (`None`): then on its only disk. The command runs as a
    /// driver-private request on the disk's queue (ordered and accounted with the disk's other
    /// requests, timed out and requeued by a reset like them), its data in the bounce buffer.
    fn io_cmd(&self, on_ns: Option<&Ns>, arg: usize, layout: Layout) -> Result<i32> {
        let c = read_cmd(arg, layout)?;
        if c.has_flags_or_metadata() {
            return Err(EINVAL);
        }
        // The C driver lets unprivileged callers run I/O commands that the controller's
        // Commands Supported and Effects log declares harmless; that log is not read here.
        if !capable(Capability::SYS_ADMIN) {
            return Err(EACCES);
        }
        let only;
        let ns = match on_ns {
            Some(ns) => ns,
            None => {
                only = self.only_ns()?;
                &*only
            }
        };
        let len = usize::try_from(c.data_len)?;
        let to_ctrl = c.is_write();
        let timeout = c.timeout();
        let done = ns.with_format(|addr| {
            check_io(&c, addr.nsid, addr.lba_shift, len)?;
            self.run_with_data(c.sqe(), to_ctrl, c.addr, len, |mut sqe| {
                let bytes = driver_cmd(&mut sqe)?;
                let (status, result) =
                    ns.with_disk(|disk| disk.execute_driver_cmd(to_ctrl, bytes, timeout))?;
                completion(status, result)
            })
        })?;
        write_result(arg, layout, done.result)?;
        Ok(done.status.into())
    }

    /// The only namespace, for `NVME_IOCTL_IO_CMD` on the controller (as in C).
    fn only_ns(&self) -> Result<Arc<Ns>> {
        let mut all = self.list.namespaces()?;
        match all.len() {
            0 => Err(ENOTTY),
            1 => {
                pr_warn!(
                    "rnvme{}: using deprecated NVME_IOCTL_IO_CMD ioctl on the char device!\n",
                    self.ctrl.index
                );
                all.pop().ok_or(ENOTTY)
            }
            _ => Err(EINVAL),
        }
    }
}

impl Passthru {
    /// Run the command `build` makes for namespace `ns` (from its logical block size, as a
    /// shift), with the user memory it names mapped into its request: to the controller if
    /// `to_ctrl`. The namespace's format does not change until the command is done.
    fn run_mapped(
        &self,
        ns: &Ns,
        to_ctrl: bool,
        timeout: Option<Delta>,
        build: impl FnOnce(u32) -> Result<(Sqe, UserData)>,
    ) -> Result<Completion> {
        let (status, result) = ns.with_format(|addr| {
            let (mut sqe, data) = build(addr.lba_shift)?;
            let bytes = driver_cmd(&mut sqe)?;
            ns.with_disk(|disk| disk.execute_driver_cmd_user(to_ctrl, bytes, timeout, data))
        })?;
        completion(status, result)
    }

    /// `NVME_IOCTL_SUBMIT_IO` on the disk of namespace `nsid`, like the C driver's
    /// `nvme_submit_io()`: a read, write or compare of `nblocks + 1` blocks from `slba`, with
    /// the user's buffer mapped into the request; returns the NVMe status. No metadata (the
    /// driver serves no format with metadata, so `metadata` is ignored, as in C). Root only,
    /// like the other passthrough commands here.
    fn submit_io(&self, ns: &Ns, arg: usize) -> Result<i32> {
        let mut raw = [0u8; size_of::<UserIo>()];
        UserSlice::new(UserPtr::from_addr(arg), raw.len())
            .reader()
            .read_slice(&mut raw)?;
        let io = UserIo::read_from_bytes(&raw).map_err(|_| EINVAL)?;
        if io.flags != 0 || !matches!(io.opcode, cmd::NVM_READ | cmd::NVM_WRITE | cmd::NVM_COMPARE)
        {
            return Err(EINVAL);
        }
        if !capable(Capability::SYS_ADMIN) {
            return Err(EACCES);
        }
        let fields = cmd::UserIoFields {
            control: io.control,
            dsmgmt: io.dsmgmt,
            reftag: io.reftag,
            apptag: io.apptag,
            appmask: io.appmask,
        };
        let sqe = Sqe::user_io(io.opcode, ns.shape.nsid, io.slba, io.nblocks, fields);
        let addr = UserPtr::from_addr(usize::try_from(io.addr)?);
        let done = self.run_mapped(ns, is_write(io.opcode), None, |lba_shift| {
            let len = (usize::from(io.nblocks) + 1) << lba_shift;
            Ok((sqe, UserData::buffer(addr, len)?))
        })?;
        Ok(done.status.into())
    }

    /// `NVME_IOCTL_IO64_CMD_VEC` on the disk of namespace `nsid`: an I/O command whose data is
    /// the buffers of `data_len` `struct iovec` at `addr`, mapped into the request. Only on a
    /// controller that takes SGLs (`EOPNOTSUPP` otherwise): the SGL is what keeps the
    /// controller to the buffers whatever transfer length the command names (with PRPs the
    /// length must be checked against the buffers first, which is not done here).
    fn io_cmd_vec(&self, ns: &Ns, arg: usize) -> Result<i32> {
        let c = read_cmd(arg, Layout::Cmd64)?;
        check_mapped(&c, ns.shape.nsid)?;
        self.require_sgl()?;
        let data = c.user_data(true)?;
        let sqe = c.sqe();
        let done = self.run_mapped(ns, c.is_write(), c.timeout(), |_| Ok((sqe, data)))?;
        write_result(arg, Layout::Cmd64, done.result)?;
        Ok(done.status.into())
    }
}

impl Passthru {
    /// Check an io_uring command for the generic device of namespace `nsid`; returns the
    /// command (read in place in the copy of the submission entry's command area, which is
    /// word-aligned) and its data.
    fn check_uring<'a>(
        &self,
        nsid: u32,
        op: u32,
        sqe: &'a SqeCmd,
        flags: IssueFlags,
    ) -> Result<(&'a PassthruCmd, Option<UserData>)> {
        let vectored = match op {
            NVME_URING_CMD_IO => false,
            NVME_URING_CMD_IO_VEC => true,
            _ => return Err(ENOTTY),
        };
        if !flags.sqe128() || !flags.cqe32() {
            return Err(EOPNOTSUPP);
        }
        let (c, _) = PassthruCmd::ref_from_prefix(sqe.as_bytes()).map_err(|_| EINVAL)?;
        check_mapped(c, nsid)?;
        if c.data_len == 0 {
            return if c.opcode & 3 != 0 {
                Err(EINVAL)
            } else {
                Ok((c, None))
            };
        }
        self.require_sgl()?;
        let data = c.user_data(vectored)?;
        Ok((c, Some(data)))
    }

    /// Passthrough with the user's memory mapped needs a controller that takes SGLs
    /// (`EOPNOTSUPP` otherwise): the SGL is what keeps the controller to the buffers.
    fn require_sgl(&self) -> Result {
        if self.sgl {
            Ok(())
        } else {
            Err(EOPNOTSUPP)
        }
    }
}

/// The checks of an I/O command for namespace `nsid` whose data is mapped into its request
/// (the vectored ioctl, io_uring): no flags or metadata, and the namespace's nsid (`EINVAL`);
/// root only (`EACCES`).
fn check_mapped(c: &PassthruCmd, nsid: u32) -> Result {
    if c.has_flags_or_metadata() || c.nsid != nsid {
        return Err(EINVAL);
    }
    if !capable(Capability::SYS_ADMIN) {
        return Err(EACCES);
    }
    Ok(())
}

/// Read a `struct nvme_passthru_cmd` (or `struct nvme_passthru_cmd64`) from user address
/// `arg`.
fn read_cmd(arg: usize, layout: Layout) -> Result<PassthruCmd> {
    let size = match layout {
        Layout::Cmd64 => size_of::<PassthruCmd64>(),
        Layout::Cmd => size_of::<PassthruCmd>(),
    };
    let mut raw = [0u8; size_of::<PassthruCmd64>()];
    UserSlice::new(UserPtr::from_addr(arg), size)
        .reader()
        .read_slice(&mut raw[..size])?;
    // The two layouts agree up to `timeout_ms`; `result` is read from neither.
    PassthruCmd::read_from_bytes(&raw[..size_of::<PassthruCmd>()]).map_err(|_| EINVAL)
}

/// Write dword 0 of the completion to the `result` field of the command at user address
/// `arg`.
fn write_result(arg: usize, layout: Layout, result: u32) -> Result {
    let (offset, bytes): (usize, &[u8]) = match layout {
        Layout::Cmd64 => (
            core::mem::offset_of!(PassthruCmd64, result),
            &u64::from(result).to_ne_bytes(),
        ),
        Layout::Cmd => (
            core::mem::offset_of!(PassthruCmd, result),
            &result.to_ne_bytes(),
        ),
    };
    UserSlice::new(
        UserPtr::from_addr(arg).wrapping_byte_add(offset),
        bytes.len(),
    )
    .writer()
    .write_slice(bytes)
}

/// Check a passthrough I/O command for the disk of namespace `nsid` with `len` bytes of data.
/// The command must name the disk's namespace (the block size below is that namespace's),
/// and a read, write or compare must move exactly `len` bytes, at most what the bounce buffer
/// holds: the controller then stays inside the buffer (the C driver trusts the caller here).
fn check_io(c: &PassthruCmd, nsid: u32, lba_shift: u32, len: usize) -> Result {
    if c.nsid != nsid || len > MAX_DATA {
        return Err(EINVAL);
    }
    if matches!(c.opcode, cmd::NVM_READ | cmd::NVM_WRITE | cmd::NVM_COMPARE) {
        let blocks = (c.cdw10_15[2] & 0xffff) as usize + 1;
        if blocks << lba_shift != len {
            return Err(EINVAL);
        }
    }
    Ok(())
}

impl Passthru {
    /// Run `sqe` with `run` and `len` bytes of data at user address `addr`: to the controller
    /// if `to_ctrl` (bit 0 of the opcode, as `nvme_is_write()`), else from it.
    fn run_with_data(
        &self,
        sqe: Sqe,
        to_ctrl: bool,
        addr: u64,
        len: usize,
        run: impl FnOnce(Sqe) -> Result<Completion>,
    ) -> Result<Completion> {
        if len > MAX_DATA {
            return Err(EINVAL);
        }
        let user = UserSlice::new(UserPtr::from_addr(usize::try_from(addr)?), len);
        let (reader, mut writer) = user.reader_writer();
        let bounce = self.bounce.lock();
        bounce.zero(len)?;
        if to_ctrl && len > 0 {
            let mut data = KVec::new();
            reader.read_all(&mut data, GFP_KERNEL)?;
            io_project!(&bounce.data, [try: 0..len]).copy_from_slice(&data);
        }
        let (prp1, prp2) = bounce.prps(len);
        let done = run(sqe.prps(prp1, prp2))?;
        if !to_ctrl && len > 0 {
            writer.write_dma(&bounce.data, 0, len)?;
        }
        Ok(done)
    }
}

/// The completion of a driver-private request: its status field and result (dword 0 of the
/// completion, `request.rs`).
fn completion(status: impl TryInto<u16>, result: impl TryInto<u32>) -> Result<Completion> {
    Ok(Completion {
        status: status.try_into().map_err(|_| EINVAL)?,
        result: result.try_into().map_err(|_| EINVAL)?,
    })
}

/// Whether an admin command changes the format or content of namespaces, so that their disks
/// are frozen around it and revalidated after (the C driver's `nvme_known_admin_effects()`:
/// LBCC and CSE for Format NVM and Sanitize).
fn changes_namespaces(opcode: u8) -> bool {
    matches!(opcode, cmd::ADMIN_FORMAT_NVM | cmd::ADMIN_SANITIZE)
}

/// Check a passthrough admin command as the C driver does, and build it.
fn check_admin(c: &PassthruCmd) -> Result<Sqe> {
    if c.has_flags_or_metadata() {
        return Err(EINVAL);
    }
    if matches!(
        c.opcode,
        cmd::ADMIN_DELETE_SQ | cmd::ADMIN_CREATE_SQ | cmd::ADMIN_DELETE_CQ | cmd::ADMIN_CREATE_CQ
    ) {
        // The driver owns the I/O queues: creating or deleting one behind its back would
        // break it.
        return Err(EACCES);
    }
    if !admin_allowed(c) {
        return Err(EACCES);
    }
    Ok(c.sqe())
}

/// `nvme_cmd_allowed()` for admin commands: some Identify commands for everybody, some
/// features for nobody, the rest for CAP_SYS_ADMIN.
fn admin_allowed(c: &PassthruCmd) -> bool {
    let cdw10 = c.cdw10_15[0];
    if c.opcode < cmd::ADMIN_VENDOR_START {
        match c.opcode {
            cmd::ADMIN_IDENTIFY => {
                if matches!(
                    cdw10 & 0xff,
                    cmd::CNS_NAMESPACE
                        | cmd::CNS_CONTROLLER
                        | cmd::CNS_CS_NS
                        | cmd::CNS_CS_CTRL
                        | cmd::CNS_NS_CS_INDEP
                ) {
                    return true;
                }
            }
            cmd::ADMIN_SET_FEATURES => {
                if matches!(
                    cdw10 & 0xff,
                    cmd::FEAT_NUM_QUEUES
                        | cmd::FEAT_APST
                        | cmd::FEAT_HOST_MEM_BUF
                        | cmd::FEAT_KATO
                        | cmd::FEAT_HOST_BEHAVIOR
                ) {
                    return false;
                }
            }
            _ => {}
        }
    }
    capable(Capability::SYS_ADMIN)
}
