// SPDX-License-Identifier: GPL-2.0

//! Command, completion and Identify layouts (NVMe base and NVM command set specifications),
//! and the mapping of completion status codes to errors.
//!
//! Queue and Identify memory is DMA coherent memory of bytes; entries are views of it cast to
//! these `#[repr(C)]` types and read or written field by field, with checked indexes.

use crate::le::{Le16, Le32, Le64};
use core::mem::size_of;
use kernel::{
    dma::{Coherent, CoherentView},
    fmt,
    io::{io_project, Io},
    prelude::*,
};
use zerocopy_derive::Immutable;

/// Admin command opcodes.
#[repr(u8)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum AdminOpcode {
    DeleteSq = 0x00,
    CreateSq = 0x01,
    GetLogPage = 0x02,
    DeleteCq = 0x04,
    CreateCq = 0x05,
    Identify = 0x06,
    Abort = 0x08,
    SetFeatures = 0x09,
    AsyncEvent = 0x0c,
    FormatNvm = 0x80,
    Sanitize = 0x84,
}

/// NVM command set opcodes.
#[repr(u8)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum NvmOpcode {
    Flush = 0x00,
    Write = 0x01,
    Read = 0x02,
    Compare = 0x05,
    WriteZeroes = 0x08,
    Dsm = 0x09,
}

// The opcodes as the bytes a command holds, to match a command's opcode against.
pub(crate) const ADMIN_DELETE_SQ: u8 = AdminOpcode::DeleteSq as u8;
pub(crate) const ADMIN_CREATE_SQ: u8 = AdminOpcode::CreateSq as u8;
pub(crate) const ADMIN_DELETE_CQ: u8 = AdminOpcode::DeleteCq as u8;
pub(crate) const ADMIN_CREATE_CQ: u8 = AdminOpcode::CreateCq as u8;
pub(crate) const ADMIN_IDENTIFY: u8 = AdminOpcode::Identify as u8;
pub(crate) const ADMIN_SET_FEATURES: u8 = AdminOpcode::SetFeatures as u8;
pub(crate) const ADMIN_FORMAT_NVM: u8 = AdminOpcode::FormatNvm as u8;
pub(crate) const ADMIN_SANITIZE: u8 = AdminOpcode::Sanitize as u8;
/// Admin opcodes from here on are vendor specific.
pub(crate) const ADMIN_VENDOR_START: u8 = 0xc0;
pub(crate) const NVM_FLUSH: u8 = NvmOpcode::Flush as u8;
pub(crate) const NVM_WRITE: u8 = NvmOpcode::Write as u8;
pub(crate) const NVM_READ: u8 = NvmOpcode::Read as u8;
pub(crate) const NVM_COMPARE: u8 = NvmOpcode::Compare as u8;
pub(crate) const NVM_WRITE_ZEROES: u8 = NvmOpcode::WriteZeroes as u8;
pub(crate) const NVM_DSM: u8 = NvmOpcode::Dsm as u8;

/// Identify CNS values.
pub(crate) const CNS_NAMESPACE: u32 = 0x00;
pub(crate) const CNS_CONTROLLER: u32 = 0x01;
pub(crate) const CNS_ACTIVE_NS_LIST: u32 = 0x02;
pub(crate) const CNS_NS_DESC_LIST: u32 = 0x03;
pub(crate) const CNS_CS_NS: u32 = 0x05;
pub(crate) const CNS_CS_CTRL: u32 = 0x06;
pub(crate) const CNS_NS_CS_INDEP: u32 = 0x08;

/// Feature: Number of Queues.
pub(crate) const FEAT_NUM_QUEUES: u32 = 0x07;
/// Feature: Asynchronous Event Configuration.
const FEAT_ASYNC_EVENT_CONFIG: u32 = 0x0b;
// Features the driver or the kernel manages.
pub(crate) const FEAT_APST: u32 = 0x0c;
pub(crate) const FEAT_HOST_MEM_BUF: u32 = 0x0d;
pub(crate) const FEAT_KATO: u32 = 0x0f;
pub(crate) const FEAT_HOST_BEHAVIOR: u32 = 0x16;
/// Asynchronous Event Configuration: every SMART/health critical warning (bits 7:0) and
/// Namespace Attribute Notices (bit 8).
pub(crate) const AEC_SMART_AND_NS_ATTR: u32 = 0xff | (1 << 8);

/// Create I/O CQ/SQ cdw11: physically contiguous.
pub(crate) const QUEUE_PHYS_CONTIG: u32 = 1 << 0;
/// Create I/O CQ cdw11: interrupts enabled.
pub(crate) const CQ_IRQ_ENABLED: u32 = 1 << 1;

/// Read/write cdw12: forced unit access.
pub(crate) const RW_FUA: u32 = 1 << 30;
/// Dataset Management cdw11: deallocate.
pub(crate) const DSM_DEALLOCATE: u32 = 1 << 2;

/// Command dword 0, PRP or SGL for Data Transfer (bits 15:14, bits 7:6 of the flags byte):
/// 01b, an SGL for the data, metadata in one buffer.
const PSDT_SGL: u8 = 0b01 << 6;
const PSDT_MASK: u8 = 0b11 << 6;

/// 64-bit words of an SGL descriptor.
pub(crate) const SGL_DESC_WORDS: usize = 2;

/// SGL descriptor type (bits 7:4 of byte 15) and subtype (bits 3:0, 0: address).
const SGL_DATA_BLOCK: u8 = 0x0 << 4;
const SGL_LAST_SEGMENT: u8 = 0x3 << 4;

/// An SGL descriptor (16 bytes): address, length in bytes, type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SglDesc {
    pub(crate) addr: u64,
    pub(crate) len: u32,
    kind: u8,
}

impl SglDesc {
    /// A Data Block descriptor: `len` bytes at bus address `addr`.
    pub(crate) const fn data_block(addr: u64, len: u32) -> Self {
        Self {
            addr,
            len,
            kind: SGL_DATA_BLOCK,
        }
    }

    /// A Last Segment descriptor: a list of descriptors, `len` bytes at bus address `addr`.
    pub(crate) const fn last_segment(addr: u64, len: u32) -> Self {
        Self {
            addr,
            len,
            kind: SGL_LAST_SEGMENT,
        }
    }

    /// The descriptor as two words, each written little-endian: the address, then the length
    /// in bytes 8 to 11 and the type in byte 15.
    pub(crate) fn words(&self) -> [u64; 2] {
        [self.addr, u64::from(self.len) | u64::from(self.kind) << 56]
    }
}

/// A submission queue entry (64 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default, FromBytes, IntoBytes, Immutable)]
pub(crate) struct Sqe {
    opcode: u8,
    flags: u8,
    cid: Le16,
    nsid: Le32,
    cdw2: Le32,
    cdw3: Le32,
    mptr: Le64,
    prp1: Le64,
    prp2: Le64,
    cdw10: Le32,
    cdw11: Le32,
    cdw12: Le32,
    cdw13: Le32,
    cdw14: Le32,
    cdw15: Le32,
}

impl Sqe {
    /// Admin command `opcode` for namespace `nsid`.
    fn admin(opcode: AdminOpcode, nsid: u32) -> Self {
        Self::new(opcode as u8, nsid)
    }

    /// A command with `opcode` for namespace `nsid`.
    pub(crate) fn new(opcode: u8, nsid: u32) -> Self {
        Self {
            opcode,
            nsid: nsid.into(),
            ..Self::default()
        }
    }

    pub(crate) fn opcode(&self) -> u8 {
        self.opcode
    }

    /// The namespace the command is for.
    pub(crate) fn nsid(&self) -> u32 {
        self.nsid.get()
    }

    /// Set the command identifier.
    pub(crate) fn set_cid(&mut self, cid: u16) {
        self.cid = cid.into();
    }

    /// Set the data pointer.
    pub(crate) fn prps(mut self, prp1: u64, prp2: u64) -> Self {
        self.set_prps(prp1, prp2);
        self
    }

    /// Set the data pointer in place.
    pub(crate) fn set_prps(&mut self, prp1: u64, prp2: u64) {
        self.prp1 = prp1.into();
        self.prp2 = prp2.into();
    }

    /// Set the data pointer to an SGL descriptor, in place.
    pub(crate) fn set_sgl(&mut self, desc: SglDesc) {
        let [prp1, prp2] = desc.words();
        self.flags |= PSDT_SGL;
        self.prp1 = prp1.into();
        self.prp2 = prp2.into();
    }

    /// Whether the data pointer is an SGL descriptor.
    pub(crate) fn uses_sgl(&self) -> bool {
        self.flags & PSDT_MASK != 0
    }

    pub(crate) fn cdw10(self, cdw10: u32) -> Self {
        Self {
            cdw10: cdw10.into(),
            ..self
        }
    }

    pub(crate) fn cdw11(self, cdw11: u32) -> Self {
        Self {
            cdw11: cdw11.into(),
            ..self
        }
    }

    pub(crate) fn cdw12(self, cdw12: u32) -> Self {
        Self {
            cdw12: cdw12.into(),
            ..self
        }
    }

    /// Set the command specific dwords 2, 3 and 10 to 15 (passthrough from user space).
    pub(crate) fn dwords(self, cdw2: u32, cdw3: u32, cdw10_15: [u32; 6]) -> Self {
        let [cdw10, cdw11, cdw12, cdw13, cdw14, cdw15] = cdw10_15;
        Self {
            cdw2: cdw2.into(),
            cdw3: cdw3.into(),
            cdw10: cdw10.into(),
            cdw11: cdw11.into(),
            cdw12: cdw12.into(),
            cdw13: cdw13.into(),
            cdw14: cdw14.into(),
            cdw15: cdw15.into(),
            ..self
        }
    }

    /// Set the starting LBA (cdw10-11).
    pub(crate) fn slba(self, lba: u64) -> Self {
        self.cdw10(lba as u32).cdw11((lba >> 32) as u32)
    }

    /// Identify `cns` of namespace `nsid` (data pointer to be set).
    pub(crate) fn identify(nsid: u32, cns: u32) -> Self {
        Self::admin(AdminOpcode::Identify, nsid).cdw10(cns)
    }

    /// Get Log Page `lid`, `dwords` dwords of it (for every namespace; data pointer to be
    /// set); `rae`: Retain Asynchronous Event.
    pub(crate) fn get_log_page(lid: u8, rae: bool, dwords: u32) -> Self {
        let numdl = (dwords - 1) & 0xffff;
        Self::admin(AdminOpcode::GetLogPage, 0xffff_ffff)
            .cdw10(u32::from(lid) | (u32::from(rae) << 15) | (numdl << 16))
    }

    /// Set Features `fid` to `value` (dword 11).
    pub(crate) fn set_features(fid: u32, value: u32) -> Self {
        Self::admin(AdminOpcode::SetFeatures, 0)
            .cdw10(fid)
            .cdw11(value)
    }

    /// Set Features, Number of Queues: `want` submission and completion queues (1..=65535).
    pub(crate) fn set_queue_count(want: u32) -> Self {
        let n = want - 1;
        Self::set_features(FEAT_NUM_QUEUES, n | (n << 16))
    }

    /// Set Features, Asynchronous Event Configuration: the events `events` reported.
    pub(crate) fn async_event_config(events: u32) -> Self {
        Self::set_features(FEAT_ASYNC_EVENT_CONFIG, events)
    }

    /// Asynchronous Event Request.
    pub(crate) fn async_event() -> Self {
        Self::admin(AdminOpcode::AsyncEvent, 0)
    }

    /// Create I/O Completion Queue `qid` of `depth` entries at `addr` (physically contiguous),
    /// interrupting on `vector`, or without interrupts (`None`).
    pub(crate) fn create_cq(qid: u16, depth: u16, addr: u64, vector: Option<u32>) -> Self {
        let irq = vector.map_or(0, |v| CQ_IRQ_ENABLED | (v << 16));
        Self::admin(AdminOpcode::CreateCq, 0)
            .prps(addr, 0)
            .cdw10(queue_id_size(qid, depth))
            .cdw11(QUEUE_PHYS_CONTIG | irq)
    }

    /// Create I/O Submission Queue `qid` of `depth` entries at `addr` (physically
    /// contiguous), completing on completion queue `qid`.
    pub(crate) fn create_sq(qid: u16, depth: u16, addr: u64) -> Self {
        Self::admin(AdminOpcode::CreateSq, 0)
            .prps(addr, 0)
            .cdw10(queue_id_size(qid, depth))
            .cdw11(QUEUE_PHYS_CONTIG | (u32::from(qid) << 16))
    }

    /// Delete I/O Submission Queue `qid`.
    pub(crate) fn delete_sq(qid: u16) -> Self {
        Self::admin(AdminOpcode::DeleteSq, 0).cdw10(qid.into())
    }

    /// Delete I/O Completion Queue `qid`.
    pub(crate) fn delete_cq(qid: u16) -> Self {
        Self::admin(AdminOpcode::DeleteCq, 0).cdw10(qid.into())
    }

    /// Abort command `cid` of submission queue `qid`.
    pub(crate) fn abort(qid: u16, cid: u16) -> Self {
        Self::admin(AdminOpcode::Abort, 0).cdw10(u32::from(qid) | (u32::from(cid) << 16))
    }

    /// A read, write or compare (`opcode`) of namespace `nsid` as `struct nvme_user_io`
    /// describes it: `nlb0` blocks (0's based) from `slba`, with its control, dataset
    /// management and protection fields; data pointer to be set.
    pub(crate) fn user_io(
        opcode: u8,
        nsid: u32,
        slba: u64,
        nlb0: u16,
        fields: UserIoFields,
    ) -> Self {
        let cdw12 = u32::from(nlb0) | (u32::from(fields.control) << 16);
        let cdw15 = u32::from(fields.apptag) | (u32::from(fields.appmask) << 16);
        Self::new(opcode, nsid).dwords(
            0,
            0,
            [
                slba as u32,
                (slba >> 32) as u32,
                cdw12,
                fields.dsmgmt,
                fields.reftag,
                cdw15,
            ],
        )
    }

    /// Command dwords 10 to 15.
    pub(crate) fn cdw10_15(&self) -> [u32; 6] {
        [
            self.cdw10.get(),
            self.cdw11.get(),
            self.cdw12.get(),
            self.cdw13.get(),
            self.cdw14.get(),
            self.cdw15.get(),
        ]
    }

    /// What an error line says of the command: its opcode, and the starting LBA and the
    /// number of blocks of a read, write or write zeroes (0 for other commands).
    pub(crate) fn describe(&self) -> Described {
        let (lba, blocks) = match self.opcode {
            NVM_READ | NVM_WRITE | NVM_WRITE_ZEROES => (
                u64::from(self.cdw10.get()) | (u64::from(self.cdw11.get()) << 32),
                (self.cdw12.get() & 0xffff) + 1,
            ),
            _ => (0, 0),
        };
        Described {
            opcode: self.opcode,
            lba,
            blocks,
        }
    }
}

/// The fields of a read, write or compare beyond its range ([`Sqe::user_io`]).
pub(crate) struct UserIoFields {
    pub(crate) control: u16,
    pub(crate) dsmgmt: u32,
    pub(crate) reftag: u32,
    pub(crate) apptag: u16,
    pub(crate) appmask: u16,
}

/// Create I/O CQ/SQ dword 10: queue identifier and size (0's based).
fn queue_id_size(qid: u16, depth: u16) -> u32 {
    u32::from(qid) | (u32::from(depth - 1) << 16)
}

/// How many I/O queue pairs a Number of Queues feature `result` (dword 0) grants, at most
/// `want`.
pub(crate) fn granted_queues(result: u32, want: u32) -> u32 {
    want.min((result & 0xffff) + 1).min((result >> 16) + 1)
}

/// The range of a Dataset Management command (context attributes 0, `blocks` blocks from
/// `lba`), as the two little-endian quadwords written to its data.
pub(crate) fn dsm_range(lba: u64, blocks: u32) -> [u64; 2] {
    [u64::from(blocks) << 32, lba]
}

/// Asynchronous event types (bits 2:0 of the completion's dword 0).
pub(crate) const AER_TYPE_ERROR: u32 = 0;
pub(crate) const AER_TYPE_SMART: u32 = 1;
pub(crate) const AER_TYPE_NOTICE: u32 = 2;
/// Notice: namespace attribute changed (a namespace attached, detached, resized, formatted).
pub(crate) const AER_NOTICE_NS_CHANGED: u32 = 0;
/// Status code of an Asynchronous Event Request beyond the controller's limit (AERL).
pub(crate) const SC_AER_LIMIT: u16 = 0x105;

/// SMART / Health Information log (the fields read here).
#[repr(C)]
#[derive(FromBytes, IntoBytes)]
pub(crate) struct SmartLog {
    pub(crate) critical_warning: u8,
    /// Composite temperature, in Kelvin: a little-endian 16-bit value at an odd offset.
    pub(crate) temperature: [u8; 2],
    rest: [u8; 4093],
}

/// A log page read only to clear its event.
#[repr(C)]
#[derive(FromBytes, IntoBytes)]
pub(crate) struct AnyLog([u8; 4096]);

/// An asynchronous event, as dword 0 of an Asynchronous Event Request's completion says it.
pub(crate) struct AsyncEvent {
    /// Event type (bits 2:0).
    pub(crate) kind: u32,
    /// Event information (bits 15:8).
    pub(crate) info: u32,
    /// The log page to read (bits 23:16).
    pub(crate) lid: u8,
}

impl From<u32> for AsyncEvent {
    fn from(result: u32) -> Self {
        Self {
            kind: result & 7,
            info: (result >> 8) & 0xff,
            lid: (result >> 16) as u8,
        }
    }
}

/// An I/O command as an error line names it (see [`Sqe::describe`]).
#[derive(Clone, Copy)]
pub(crate) struct Described {
    opcode: u8,
    lba: u64,
    blocks: u32,
}

impl kernel::fmt::Display for Described {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let name = match self.opcode {
            NVM_FLUSH => "Flush",
            NVM_WRITE => "Write",
            NVM_READ => "Read",
            NVM_WRITE_ZEROES => "Write Zeroes",
            NVM_DSM => "Dataset Management",
            _ => "I/O command",
        };
        write!(f, "{name}({:#04x})", self.opcode)?;
        if self.blocks > 0 {
            write!(f, " @ LBA {}, {} blocks", self.lba, self.blocks)?;
        }
        Ok(())
    }
}

/// Log a passthrough command `sqe` that failed with `status`, with what C's
/// `nvme_log_err_passthru()` logs (the command's opcode, status and dwords 10 to 15): `name` is
/// the disk's or the controller's, `kind` "Admin" or "I/O". Only when the user enabled it
/// (`passthru_err_log_enabled`), so not rate limited.
pub(crate) fn log_failed_passthrough(name: fmt::Arguments<'_>, kind: &str, sqe: &Sqe, status: u16) {
    let [cdw10, cdw11, cdw12, cdw13, cdw14, cdw15] = sqe.cdw10_15();
    pr_err!(
        "{}: {} Cmd({:#x}), error ({}) cdw10={:#x} cdw11={:#x} cdw12={:#x} cdw13={:#x} cdw14={:#x} cdw15={:#x}\n",
        name,
        kind,
        sqe.opcode(),
        StatusText(status),
        cdw10,
        cdw11,
        cdw12,
        cdw13,
        cdw14,
        cdw15
    );
}

/// A completion status as an error line shows it: its type and code, and the More and Do Not
/// Retry bits.
pub(crate) struct StatusText(pub(crate) u16);

impl kernel::fmt::Display for StatusText {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let s = self.0;
        write!(f, "sct {:#x} / sc {:#04x}", (s >> 8) & 0x7, s & 0xff)?;
        if s & STATUS_MORE != 0 {
            write!(f, " MORE")?;
        }
        if s & STATUS_DNR != 0 {
            write!(f, " DNR")?;
        }
        Ok(())
    }
}

/// A completion queue entry (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default, FromBytes, IntoBytes)]
pub(crate) struct Cqe {
    /// Command specific result (dword 0).
    result: Le32,
    rsvd: Le32,
    sq_head: Le16,
    sq_id: Le16,
    cid: Le16,
    /// Bit 0: phase tag; bits 15:1: status field.
    status: Le16,
}

/// How a command completed: its status field (0: success) and dword 0 of its completion
/// entry (the command specific result).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Completion {
    /// The status field, without the phase bit.
    pub(crate) status: u16,
    pub(crate) result: u32,
}

/// A completion read off a completion queue: the command it is for, and how it completed.
#[derive(Clone, Copy)]
pub(crate) struct CqEntry {
    pub(crate) cid: u16,
    pub(crate) done: Completion,
}

/// A view of entry `index` of a queue of `T` in `ring`.
#[inline]
pub(crate) fn entry<T: FromBytes + IntoBytes>(
    ring: &Coherent<[u8]>,
    index: usize,
) -> Result<CoherentView<'_, T>> {
    let start = index * size_of::<T>();
    io_project!(ring, [try: start..start + size_of::<T>()]).try_cast::<T>()
}

/// Write `sqe` as entry `index` of the submission queue `ring`: copied from where it is, with
/// no copy on the stack in between (a by-value write costs 16 more instructions per command).
#[inline]
pub(crate) fn write_sqe(ring: &Coherent<[u8]>, index: u16, sqe: &Sqe) -> Result {
    let start = usize::from(index) * size_of::<Sqe>();
    io_project!(ring, [try: start..start + size_of::<Sqe>()]).copy_from_slice(sqe.as_bytes());
    Ok(())
}

/// A completion queue entry as the rings hold it: its four dwords (a [`Cqe`], read a dword
/// at a time, little-endian as the controller writes them). A ring of these is indexed with
/// one bounds check per access; a ring of bytes needs a range, size and alignment check per
/// entry.
pub(crate) type CqeDwords = [u32; 4];

/// Which dword of a [`CqeDwords`] holds `result`.
const CQE_RESULT_DW: usize = core::mem::offset_of!(Cqe, result) / 4;
/// Which dword holds the command id (bits 15:0) and the status word (bits 31:16, phase tag
/// in bit 16).
const CQE_CID_STATUS_DW: usize = core::mem::offset_of!(Cqe, cid) / 4;
const _: () = assert!(
    core::mem::offset_of!(Cqe, cid) % 4 == 0
        && core::mem::offset_of!(Cqe, status) == core::mem::offset_of!(Cqe, cid) + 2
        && core::mem::offset_of!(Cqe, result) % 4 == 0
        && size_of::<Cqe>() == size_of::<CqeDwords>()
);

/// The completion at entry `index` of `ring`, if its phase tag is `phase` (it is new).
#[inline]
pub(crate) fn read_cqe(
    ring: &Coherent<[CqeDwords]>,
    index: u16,
    phase: bool,
) -> Result<Option<CqEntry>> {
    // The dword with the status word first: the rest is only valid once its phase tag has
    // flipped. The command id is in the same dword, written with the status.
    let cid_status = u32::from_le(
        io_project!(ring, [try: usize::from(index)][build: CQE_CID_STATUS_DW]).copy_read(),
    );
    let status = (cid_status >> 16) as u16;
    if (status & 1 != 0) != phase {
        return Ok(None);
    }
    Ok(Some(CqEntry {
        cid: cid_status as u16,
        done: Completion {
            status: status >> 1,
            result: u32::from_le(
                io_project!(ring, [try: usize::from(index)][build: CQE_RESULT_DW]).copy_read(),
            ),
        },
    }))
}

/// Zero `buf`.
pub(crate) fn zero(buf: &Coherent<[u8]>) -> Result {
    const ZEROES: [u8; 512] = [0; 512];
    for start in (0..buf.len()).step_by(ZEROES.len()) {
        io_project!(buf, [try: start..start + ZEROES.len()]).copy_from_slice(&ZEROES);
    }
    Ok(())
}

/// Empty a completion queue of `entries` entries (all phase tags 0).
pub(crate) fn clear_cq(ring: &Coherent<[CqeDwords]>, entries: u16) -> Result {
    for i in 0..usize::from(entries) {
        io_project!(ring, [try: i]).copy_write(CqeDwords::default());
    }
    Ok(())
}

/// Size of an Identify data structure.
pub(crate) const IDENTIFY_SIZE: usize = 4096;

/// Identify Controller data structure (the fields the driver uses).
#[repr(C)]
#[derive(FromBytes, IntoBytes)]
pub(crate) struct IdCtrl {
    /// PCI Vendor ID.
    pub(crate) vid: Le16,
    /// PCI Subsystem Vendor ID.
    pub(crate) ssvid: Le16,
    /// Serial number, ASCII padded with spaces.
    pub(crate) sn: [u8; 20],
    /// Model number, ASCII padded with spaces.
    pub(crate) mn: [u8; 40],
    /// Firmware revision, ASCII padded with spaces.
    pub(crate) fr: [u8; 8],
    rab: u8,
    ieee: [u8; 3],
    cmic: u8,
    /// Maximum Data Transfer Size, in minimum pages as a power of two (0: no limit).
    pub(crate) mdts: u8,
    /// Controller ID.
    pub(crate) cntlid: Le16,
    rsvd80: [u8; 31],
    /// Controller Type (`CNTRLTYPE_*`; 0: not reported).
    pub(crate) cntrltype: u8,
    rsvd112: [u8; 408],
    /// Optional NVM Command Support.
    pub(crate) oncs: Le16,
    fuses: Le16,
    fna: u8,
    /// Volatile Write Cache.
    pub(crate) vwc: u8,
    rsvd526: [u8; 10],
    /// SGL Support.
    pub(crate) sgls: Le32,
    rsvd540: [u8; 228],
    /// NVM Subsystem NVMe Qualified Name, NUL-terminated (empty before NVMe 1.2.1).
    pub(crate) subnqn: [u8; 256],
    rsvd1024: [u8; 782],
    /// Discovery Controller Type (`DCTYPE_*`).
    pub(crate) dctype: u8,
    rsvd1807: [u8; 2289],
}

/// ONCS: Dataset Management.
pub(crate) const ONCS_DSM: u16 = 1 << 2;
/// ONCS: Write Zeroes.
pub(crate) const ONCS_WRITE_ZEROES: u16 = 1 << 3;
/// VWC: a volatile write cache is present.
pub(crate) const VWC_PRESENT: u8 = 1 << 0;

/// LBA Format Data Structure.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes)]
pub(crate) struct LbaFormat {
    /// Metadata Size in bytes.
    pub(crate) ms: Le16,
    /// LBA Data Size, as a power of two.
    pub(crate) lbads: u8,
    rp: u8,
}

/// Identify Namespace data structure (the fields the driver uses).
#[repr(C)]
#[derive(FromBytes, IntoBytes)]
pub(crate) struct IdNs {
    /// Namespace Size, in logical blocks.
    pub(crate) nsze: Le64,
    ncap: Le64,
    nuse: Le64,
    nsfeat: u8,
    nlbaf: u8,
    /// Formatted LBA Size: bits 3:0 select the LBA format.
    pub(crate) flbas: u8,
    rsvd27: [u8; 77],
    /// Namespace Globally Unique Identifier (zero: none).
    pub(crate) nguid: [u8; 16],
    /// IEEE Extended Unique Identifier (zero: none).
    pub(crate) eui64: [u8; 8],
    /// LBA formats.
    pub(crate) lbaf: [LbaFormat; 64],
    rsvd384: [u8; 3712],
}

/// Identify Active Namespace ID list: namespace ids in increasing order, 0 ends the list.
#[repr(C)]
#[derive(FromBytes, IntoBytes)]
pub(crate) struct NsList(pub(crate) [Le32; 1024]);

/// Identify Namespace Identification Descriptor list: descriptors of a 4-byte header (type,
/// length, two reserved bytes) and their identifier, until one of length 0.
#[repr(C)]
#[derive(FromBytes, IntoBytes)]
pub(crate) struct NsDescList(pub(crate) [u8; 4096]);

const _: () = assert!(size_of::<Sqe>() == 64);
const _: () = assert!(size_of::<Cqe>() == 16);
const _: () = assert!(size_of::<IdCtrl>() == IDENTIFY_SIZE);
const _: () = assert!(core::mem::offset_of!(IdCtrl, sgls) == 536);
const _: () = assert!(core::mem::offset_of!(IdCtrl, cntlid) == 78);
const _: () = assert!(core::mem::offset_of!(IdCtrl, cntrltype) == 111);
const _: () = assert!(core::mem::offset_of!(IdCtrl, subnqn) == 768);
const _: () = assert!(core::mem::offset_of!(IdCtrl, dctype) == 1806);
const _: () = assert!(size_of::<IdNs>() == IDENTIFY_SIZE);
const _: () = assert!(size_of::<NsList>() == IDENTIFY_SIZE);
const _: () = assert!(size_of::<NsDescList>() == IDENTIFY_SIZE);
const _: () = assert!(core::mem::offset_of!(IdNs, nguid) == 104);

/// Status field bits of a completion (without the phase tag), as C's `NVME_STATUS_*`.
pub(crate) const STATUS_SCT_SC_MASK: u16 = 0x07ff;
/// More status information in the Error Information log.
pub(crate) const STATUS_MORE: u16 = 0x2000;
/// Do Not Retry: the same command would fail again.
pub(crate) const STATUS_DNR: u16 = 0x4000;

/// Whether a command that completed with `status` may be sent again: an error without Do Not
/// Retry (C's `nvme_decide_disposition`, before its limit on retries).
pub(crate) fn status_is_retryable(status: u16) -> bool {
    status & STATUS_SCT_SC_MASK != SC_SUCCESS && status & STATUS_DNR == 0
}

// Status codes as C's `NVME_SC_*`: the status code type in bits 10:8, the code in bits 7:0.
pub(crate) const SC_SUCCESS: u16 = 0x000;
pub(crate) const SC_INVALID_OPCODE: u16 = 0x001;
pub(crate) const SC_INVALID_FIELD: u16 = 0x002;
pub(crate) const SC_INVALID_NS: u16 = 0x00b;
pub(crate) const SC_CMD_INTERRUPTED: u16 = 0x021;
pub(crate) const SC_LBA_RANGE: u16 = 0x080;
pub(crate) const SC_CAP_EXCEEDED: u16 = 0x081;
pub(crate) const SC_NS_NOT_READY: u16 = 0x082;
pub(crate) const SC_RESERVATION_CONFLICT: u16 = 0x083;
pub(crate) const SC_BAD_ATTRIBUTES: u16 = 0x180;
pub(crate) const SC_INVALID_PI: u16 = 0x181;
pub(crate) const SC_READ_ONLY: u16 = 0x182;
pub(crate) const SC_ZONE_TOO_MANY_ACTIVE: u16 = 0x1bd;
pub(crate) const SC_ZONE_TOO_MANY_OPEN: u16 = 0x1be;
pub(crate) const SC_WRITE_FAULT: u16 = 0x280;
pub(crate) const SC_READ_ERROR: u16 = 0x281;
pub(crate) const SC_GUARD_CHECK: u16 = 0x282;
pub(crate) const SC_APPTAG_CHECK: u16 = 0x283;
pub(crate) const SC_REFTAG_CHECK: u16 = 0x284;
pub(crate) const SC_COMPARE_FAILED: u16 = 0x285;
pub(crate) const SC_ACCESS_DENIED: u16 = 0x286;
pub(crate) const SC_UNWRITTEN_BLOCK: u16 = 0x287;
pub(crate) const SC_HOST_PATH_ERROR: u16 = 0x370;

/// Map an NVMe completion status field (without the phase tag) to the error the block layer
/// reports, the way C's `nvme_error_status` (7.3) does: the errno of the `BLK_STS_*` C picks
/// (`blk_status_to_errno`). The retry bits (DNR, More, CRD) do not change the mapping.
/// Success is tested inline, on every completion; the errors are matched out of line.
#[inline]
pub(crate) fn status_to_result(status: u16) -> Result {
    if status & STATUS_SCT_SC_MASK == SC_SUCCESS {
        return Ok(());
    }
    Err(status_error(status))
}

/// The error of a failed completion's status field (see [`status_to_result`]).
#[cold]
fn status_error(status: u16) -> Error {
    match status & STATUS_SCT_SC_MASK {
        // BLK_STS_NOSPC
        SC_CAP_EXCEEDED => ENOSPC,
        // BLK_STS_TARGET
        SC_LBA_RANGE | SC_CMD_INTERRUPTED | SC_NS_NOT_READY => EREMOTEIO,
        // BLK_STS_NOTSUPP
        SC_BAD_ATTRIBUTES | SC_INVALID_OPCODE | SC_INVALID_FIELD | SC_INVALID_NS => EOPNOTSUPP,
        // BLK_STS_MEDIUM
        SC_WRITE_FAULT | SC_READ_ERROR | SC_UNWRITTEN_BLOCK | SC_ACCESS_DENIED | SC_READ_ONLY
        | SC_COMPARE_FAILED => ENODATA,
        // BLK_STS_PROTECTION
        SC_GUARD_CHECK | SC_APPTAG_CHECK | SC_REFTAG_CHECK | SC_INVALID_PI => EILSEQ,
        // BLK_STS_RESV_CONFLICT
        SC_RESERVATION_CONFLICT => EBADE,
        // BLK_STS_TRANSPORT
        SC_HOST_PATH_ERROR => ENOLINK,
        // BLK_STS_ZONE_ACTIVE_RESOURCE, BLK_STS_ZONE_OPEN_RESOURCE
        SC_ZONE_TOO_MANY_ACTIVE => EOVERFLOW,
        SC_ZONE_TOO_MANY_OPEN => ETOOMANYREFS,
        // BLK_STS_IOERR
        _ => EIO,
    }
}

/// The size and format of a namespace, from its Identify Namespace data.
pub(crate) struct NsFormat {
    pub(crate) nsid: u32,
    /// Size in logical blocks.
    pub(crate) nsze: u64,
    /// Logical block size, as a shift.
    pub(crate) lba_shift: u32,
    /// The identifiers Identify Namespace gives (zero: none).
    pub(crate) nguid: [u8; 16],
    pub(crate) eui64: [u8; 8],
}

impl NsFormat {
    /// Capacity in 512-byte sectors.
    pub(crate) fn sectors(&self) -> u64 {
        self.nsze << (self.lba_shift - kernel::block::SECTOR_SHIFT)
    }
}

/// The format of namespace `nsid` from its Identify Namespace data; `None` if it is empty or
/// its format is not supported (said on `dev`).
pub(crate) fn ns_format(
    dev: &kernel::device::Device,
    nsid: u32,
    id: CoherentView<'_, IdNs>,
) -> Result<Option<NsFormat>> {
    let nsze = io_project!(id, .nsze).copy_read().get();
    let flbas: u8 = kernel::io::io_read!(id, .flbas);
    let format = usize::from(flbas & 0xf);
    let lba_shift = u32::from(kernel::io::io_read!(id, .lbaf[try: format].lbads));
    let metadata = io_project!(id, .lbaf[try: format].ms).copy_read().get();
    if nsze == 0 {
        return Ok(None);
    }
    let page_shift = kernel::page::PAGE_SIZE.trailing_zeros();
    if !(kernel::block::SECTOR_SHIFT..=page_shift).contains(&lba_shift) || metadata != 0 {
        dev_warn!(
            dev,
            "namespace {}: LBA format {} (2^{} bytes, {} metadata bytes) not supported\n",
            nsid,
            format,
            lba_shift,
            metadata
        );
        return Ok(None);
    }
    Ok(Some(NsFormat {
        nsid,
        nsze,
        lba_shift,
        nguid: kernel::io::io_project!(id, .nguid).copy_read(),
        eui64: kernel::io::io_project!(id, .eui64).copy_read(),
    }))
}

/// An identify string (serial, model): ASCII padded with spaces.
pub(crate) struct IdString<'a>(pub(crate) &'a [u8]);

impl kernel::fmt::Display for IdString<'_> {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let end = self
            .0
            .iter()
            .rposition(|&c| c != b' ' && c != 0)
            .map_or(0, |p| p + 1);
        for &c in self.0.iter().take(end) {
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

#[kunit_tests(rust_nvme_mq_status)]
mod tests {
    use super::*;

    /// Every status C 7.3's `nvme_error_status` names, with the errno of the block status it
    /// returns, and a few it does not name (`BLK_STS_IOERR`).
    const C_MAPPING: &[(u16, Option<Error>)] = &[
        (SC_SUCCESS, None),
        (SC_CAP_EXCEEDED, Some(ENOSPC)),
        (SC_LBA_RANGE, Some(EREMOTEIO)),
        (SC_CMD_INTERRUPTED, Some(EREMOTEIO)),
        (SC_NS_NOT_READY, Some(EREMOTEIO)),
        (SC_BAD_ATTRIBUTES, Some(EOPNOTSUPP)),
        (SC_INVALID_OPCODE, Some(EOPNOTSUPP)),
        (SC_INVALID_FIELD, Some(EOPNOTSUPP)),
        (SC_INVALID_NS, Some(EOPNOTSUPP)),
        (SC_WRITE_FAULT, Some(ENODATA)),
        (SC_READ_ERROR, Some(ENODATA)),
        (SC_UNWRITTEN_BLOCK, Some(ENODATA)),
        (SC_ACCESS_DENIED, Some(ENODATA)),
        (SC_READ_ONLY, Some(ENODATA)),
        (SC_COMPARE_FAILED, Some(ENODATA)),
        (SC_GUARD_CHECK, Some(EILSEQ)),
        (SC_APPTAG_CHECK, Some(EILSEQ)),
        (SC_REFTAG_CHECK, Some(EILSEQ)),
        (SC_INVALID_PI, Some(EILSEQ)),
        (SC_RESERVATION_CONFLICT, Some(EBADE)),
        (SC_HOST_PATH_ERROR, Some(ENOLINK)),
        (SC_ZONE_TOO_MANY_ACTIVE, Some(EOVERFLOW)),
        (SC_ZONE_TOO_MANY_OPEN, Some(ETOOMANYREFS)),
        // Not named by C: BLK_STS_IOERR. 0x10d (Feature Not Saveable) is not "ONCS not
        // supported"; path errors other than Host Path Error are not transport errors.
        (0x006, Some(EIO)),
        (0x10d, Some(EIO)),
        (0x371, Some(EIO)),
        (0x300, Some(EIO)),
    ];

    #[test]
    fn status_mapping_as_c() {
        for &(status, want) in C_MAPPING {
            let want = want.map_or(Ok(()), Err);
            assert_eq!(status_to_result(status), want);
        }
    }

    #[test]
    fn retry_bits_do_not_change_the_mapping() {
        for &(status, want) in C_MAPPING {
            let want = want.map_or(Ok(()), Err);
            // DNR, More and CRD = 3 set.
            assert_eq!(status_to_result(status | STATUS_DNR | 0x3800), want);
        }
    }

    #[test]
    fn retryable() {
        assert!(!status_is_retryable(SC_SUCCESS));
        assert!(!status_is_retryable(STATUS_MORE));
        assert!(status_is_retryable(SC_CMD_INTERRUPTED));
        assert!(status_is_retryable(SC_READ_ERROR | STATUS_MORE));
        assert!(!status_is_retryable(SC_READ_ERROR | STATUS_DNR));
    }
}

/// The commands' dwords as the NVMe base specification lays them out, for those a constructor
/// packs from several fields.
#[kunit_tests(rust_nvme_mq_cmd)]
mod command_tests {
    use super::*;

    #[test]
    fn queue_commands() {
        // Create I/O CQ: QSIZE (0's based) 31:16, QID 15:0; IV 31:16, IEN bit 1, PC bit 0.
        let cq = Sqe::create_cq(3, 1024, 0x1000, Some(2));
        assert_eq!(
            (cq.opcode, cq.cdw10.get(), cq.cdw11.get()),
            (0x05, 0x03ff_0003, 0x0002_0003)
        );
        assert_eq!(cq.prp1.get(), 0x1000);
        assert_eq!(
            Sqe::create_cq(3, 1024, 0x1000, None).cdw11.get(),
            0x0000_0001
        );
        // Create I/O SQ: as the CQ; CQID 31:16, PC bit 0.
        let sq = Sqe::create_sq(3, 1024, 0x2000);
        assert_eq!(
            (sq.opcode, sq.cdw10.get(), sq.cdw11.get()),
            (0x01, 0x03ff_0003, 0x0003_0001)
        );
        assert_eq!(sq.prp1.get(), 0x2000);
        let (dsq, dcq) = (Sqe::delete_sq(3), Sqe::delete_cq(3));
        assert_eq!(
            (dsq.opcode, dsq.cdw10.get(), dcq.opcode, dcq.cdw10.get()),
            (0x00, 3, 0x04, 3)
        );
        // Abort: CID 31:16, SQID 15:0.
        let abort = Sqe::abort(5, 7);
        assert_eq!((abort.opcode, abort.cdw10.get()), (0x08, 0x0007_0005));
    }

    #[test]
    fn feature_and_log_commands() {
        // Number of Queues: NCQR 31:16, NSQR 15:0, both 0's based; answered the same way.
        let nq = Sqe::set_queue_count(4);
        assert_eq!(
            (nq.opcode, nq.cdw10.get(), nq.cdw11.get()),
            (0x09, 0x07, 0x0003_0003)
        );
        assert_eq!(granted_queues(0x0001_0003, 8), 2);
        assert_eq!(granted_queues(0x0007_0007, 4), 4);
        // Get Log Page: NUMDL (0's based) 31:16, RAE bit 15, LID 7:0; every namespace.
        let log = Sqe::get_log_page(0x02, true, 1024);
        assert_eq!(
            (log.opcode, log.nsid.get(), log.cdw10.get()),
            (0x02, 0xffff_ffff, 0x03ff_8002)
        );
        let aec = Sqe::async_event_config(AEC_SMART_AND_NS_ATTR);
        assert_eq!((aec.cdw10.get(), aec.cdw11.get()), (0x0b, 0x1ff));
        assert_eq!(Sqe::async_event().opcode, 0x0c);
        let id = Sqe::identify(1, CNS_NS_DESC_LIST);
        assert_eq!((id.opcode, id.nsid.get(), id.cdw10.get()), (0x06, 1, 3));
    }

    #[test]
    fn io_fields() {
        // Read: SLBA in 10-11; NLB (0's based) 15:0 and the control bits 31:16 of CDW12;
        // ELBAT 13:0 and ELBATM 31:16 of CDW15.
        let fields = UserIoFields {
            control: 0x4000,
            dsmgmt: 0x11,
            reftag: 0x22,
            apptag: 0x33,
            appmask: 0x44,
        };
        let rw = Sqe::user_io(NVM_READ, 1, 0x1_0000_0002, 7, fields);
        assert_eq!(
            (rw.opcode, rw.nsid.get(), rw.cdw10.get(), rw.cdw11.get()),
            (0x02, 1, 2, 1)
        );
        assert_eq!(
            (rw.cdw12.get(), rw.cdw13.get(), rw.cdw14.get()),
            (0x4000_0007, 0x11, 0x22)
        );
        assert_eq!(rw.cdw15.get(), 0x0044_0033);
        // Dataset Management range: context attributes 31:0, length 63:32, then the LBA.
        assert_eq!(dsm_range(0x1234, 16), [16 << 32, 0x1234]);
        // Asynchronous event: type 2:0, information 15:8, log page 23:16 (a namespace
        // attribute notice, Changed Namespace List).
        let e = AsyncEvent::from(0x0004_0002);
        assert_eq!((e.kind, e.info, e.lid), (2, 0, 4));
    }
}
