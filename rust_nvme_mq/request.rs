// SPDX-License-Identifier: GPL-2.0

//! The driver's block requests: the blk-mq operations type, the namespace a request is for,
//! the one place where a request becomes an NVMe command, and how a request ends for its
//! completion (a passthrough request keeps the controller's status and result in its own
//! driver-private data).

use crate::{
    cmd::{self, SglDesc, Sqe},
    prp::{build_prps, two_page_prps, PRP_LIST_ENTRIES},
    sgl::{self, build_sgl},
    transfer::{ListArea, SlotLists, Transfer, MAX_SEGMENTS},
};
use kernel::{
    block::{
        mq::{Command, DmaDevice, DmaMapping, Request},
        SECTOR_SHIFT,
    },
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// blk-mq operations of the NVMe disks. The callbacks are in `ns.rs`; the type is declared
/// here so that the queues, which hold its requests, do not depend on the disks.
pub(crate) struct NvmeOps;

/// What a command names of its namespace.
#[derive(Clone, Copy)]
pub(crate) struct NsAddr {
    pub(crate) nsid: u32,
    /// Logical block size, as a shift.
    pub(crate) lba_shift: u32,
}

/// The format of a namespace as its disk serves it: what its requests become commands with.
/// Changed only while the disk is frozen (a format, a rescan that found a new format), so a
/// request in flight was always built with the values read now.
pub(crate) struct NsShape {
    pub(crate) nsid: u32,
    lba_shift: Atomic<u32>,
    /// Capacity in 512-byte sectors.
    sectors: Atomic<u64>,
}

impl NsShape {
    pub(crate) fn new(nsid: u32, lba_shift: u32, sectors: u64) -> Self {
        Self {
            nsid,
            lba_shift: Atomic::new(lba_shift),
            sectors: Atomic::new(sectors),
        }
    }

    /// What a command names of the namespace now.
    pub(crate) fn addr(&self) -> NsAddr {
        NsAddr {
            nsid: self.nsid,
            lba_shift: self.lba_shift.load(Relaxed),
        }
    }

    /// Capacity in 512-byte sectors.
    pub(crate) fn sectors(&self) -> u64 {
        self.sectors.load(Relaxed)
    }

    /// The disk took a new format (its queue frozen).
    pub(crate) fn set(&self, lba_shift: u32, sectors: u64) {
        self.lba_shift.store(lba_shift, Relaxed);
        self.sectors.store(sectors, Relaxed);
    }
}

/// What a command slot lends the command built into it: the slot's data mappings and its
/// list area (a PRP list, an SGL segment or the range of a Dataset Management).
pub(crate) struct SlotDma<'a> {
    /// The device the data is mapped for.
    pub(crate) dev: &'a DmaDevice,
    pub(crate) maps: &'a mut DmaMapping<NvmeOps>,
    /// The list areas of the queue's slots, and the slot's command id.
    pub(crate) lists: &'a SlotLists,
    pub(crate) cid: u16,
    /// How the controller takes data.
    pub(crate) transfer: &'a Transfer,
}

impl SlotDma<'_> {
    /// The slot's list area, looked up only by the commands that use one (a read or write of
    /// at most two pages needs none).
    fn list(&self) -> Result<ListArea<'_>> {
        self.lists.area(self.cid)
    }
}

/// Build the command for `rq` on namespace `ns` into `sqe`, mapping its data into the slot's
/// mappings (undone by the slot when the command is gone, or when this fails). Written in
/// place, where the slot keeps it, as C builds into the request's `iod->cmd`: returned by
/// value it was built on the stack and copied (22 instructions per I/O). The data of a read,
/// a write or a passthrough command is mapped at one place, inlined into the submission.
#[inline(always)]
pub(crate) fn command(
    ns: NsAddr,
    rq: &Request<NvmeOps>,
    slot: SlotDma<'_>,
    sqe: &mut Sqe,
) -> Result {
    // `lba_shift` is within SECTOR_SHIFT..=PAGE_SHIFT (checked when the namespace is
    // identified), so neither form wraps: they only spare every request the overflow checks.
    let lba = rq
        .sector()
        .wrapping_shr(ns.lba_shift.wrapping_sub(SECTOR_SHIFT));
    let blocks = rq.bytes().wrapping_shr(ns.lba_shift);
    let command = rq.command();
    if blocks == 0 && !matches!(command, Command::Flush | Command::Other(_)) {
        return Err(EINVAL);
    }
    let user = match command {
        Command::Read | Command::Write => {
            let (opcode, fua) = if command == Command::Write {
                (cmd::NVM_WRITE, rq.is_fua())
            } else {
                (cmd::NVM_READ, false)
            };
            let cdw12 = if fua {
                (blocks - 1) | cmd::RW_FUA
            } else {
                blocks - 1
            };
            *sqe = Sqe::new(opcode, ns.nsid).slba(lba).cdw12(cdw12);
            false
        }
        Command::Flush | Command::Discard | Command::WriteZeroes => {
            *sqe = without_data(ns.nsid, &slot, command, lba, blocks)?;
            return Ok(());
        }
        // A passthrough command (the I/O passthrough ioctls), built by `ioctl.rs`.
        Command::Other(_) => {
            passthrough(rq, sqe)?;
            if rq.bytes() == 0 {
                return Ok(());
            }
            true
        }
    };
    map_data(rq, slot, user)?.set(sqe);
    Ok(())
}

/// The command of a request that carries no data of its own: a flush, a discard (its range
/// written into the slot's list area) or a write of zeroes.
fn without_data(
    nsid: u32,
    slot: &SlotDma<'_>,
    command: Command,
    lba: u64,
    blocks: u32,
) -> Result<Sqe> {
    match command {
        Command::Flush => Ok(Sqe::new(cmd::NVM_FLUSH, nsid)),
        Command::Discard => discard(nsid, slot, lba, blocks),
        Command::WriteZeroes => Ok(Sqe::new(cmd::NVM_WRITE_ZEROES, nsid)
            .slba(lba)
            .cdw12(blocks - 1)),
        _ => Err(EOPNOTSUPP),
    }
}

/// A Dataset Management (deallocate) of `blocks` blocks from `lba`: one range, written into
/// the slot's list area.
fn discard(nsid: u32, slot: &SlotDma<'_>, lba: u64, blocks: u32) -> Result<Sqe> {
    // Context attributes and length in blocks, then the starting LBA.
    let [attributes_and_length, start] = cmd::dsm_range(lba, blocks);
    let list = slot.list()?;
    list.write(0, attributes_and_length)?;
    list.write(1, start)?;
    Ok(Sqe::new(cmd::NVM_DSM, nsid)
        .prps(list.addr, 0)
        .cdw10(0)
        .cdw11(cmd::DSM_DEALLOCATE))
}

/// Where a command finds its data: two PRP entries (the second possibly a PRP list) or an SGL
/// descriptor. What [`map_data`] returns, so that the 64-byte command is built once, in place
/// by its caller, and not passed through and back.
enum DataPtr {
    Prps(u64, u64),
    Sgl(SglDesc),
}

impl DataPtr {
    /// Set this data pointer in `sqe`.
    #[inline]
    fn set(self, sqe: &mut Sqe) {
        match self {
            Self::Prps(prp1, prp2) => sqe.set_prps(prp1, prp2),
            Self::Sgl(desc) => sqe.set_sgl(desc),
        }
    }
}

/// The data of `rq` mapped for DMA and described by PRPs or an SGL (see `transfer.rs`); an
/// SGL whenever the controller takes them if `user` (user memory of a passthrough command).
/// The block layer maps physically contiguous pieces together (behind an IOMMU, the whole
/// request as one range). The mapping fails once the controller has started to unbind.
#[inline(always)]
fn map_data(rq: &Request<NvmeOps>, slot: SlotDma<'_>, user: bool) -> Result<DataPtr> {
    slot.dev.map(slot.maps, rq).map_err(|_| EIO)?;
    let maps = &*slot.maps;
    let transfer = slot.transfer;
    let mut segs = maps.segments();
    let one = match (segs.next(), segs.next()) {
        (Some(seg), None) => Some(seg),
        _ => None,
    };
    let count = if one.is_some() {
        1
    } else {
        maps.segments().count()
    };
    let sgl = (user && transfer.sgl) || transfer.prefers_sgl(rq.bytes() as usize, count);
    if !sgl {
        if let Some((prp1, prp2)) = one.and_then(|(addr, len)| two_page_prps(addr, len)) {
            return Ok(DataPtr::Prps(prp1, prp2));
        }
        let list = slot.list()?;
        let put = |i, entry| list.write(i, entry);
        match build_prps(maps.segments(), put, PRP_LIST_ENTRIES, list.addr) {
            Ok(prps) => return Ok(DataPtr::Prps(prps.prp1, prps.prp2)),
            // Segments that do not meet at page boundaries: only an SGL describes them.
            Err(_) if slot.transfer.sgl => {}
            Err(e) => return Err(e),
        }
    } else if let Some(seg) = one {
        // One segment needs no list: its descriptor goes into the command, without looking
        // up the slot's list area. (Data that PRPs could not describe falls through to
        // `build_sgl`, which does the same for one segment.)
        return Ok(DataPtr::Sgl(sgl::data_block(seg)?));
    }
    let list = slot.list()?;
    let put = |i, desc| list.write_desc(i, desc);
    Ok(DataPtr::Sgl(build_sgl(
        maps.segments(),
        put,
        MAX_SEGMENTS,
        list.addr,
    )?))
}

/// The command of a passthrough I/O request (a driver-private request made by an I/O
/// passthrough ioctl), as the ioctl wrote it into the request, into `sqe`. Without data in the
/// request, its data pointer is the ioctl's (the passthrough bounce buffer, or none); with
/// data (user memory the block layer mapped into the request), [`command`] describes the data,
/// by an SGL where the controller takes them, like the C driver does for user commands: the
/// controller then checks the command's transfer length against it. The queue sets the
/// command id. Other requests it does not know fail with `EOPNOTSUPP`.
fn passthrough(rq: &Request<NvmeOps>, sqe: &mut Sqe) -> Result {
    let bytes = rq.driver_cmd().ok_or(EOPNOTSUPP)?;
    *sqe = Sqe::read_from_bytes(&bytes).map_err(|_| EINVAL)?;
    Ok(())
}

/// How `rq` ends for its completion `cqe`: a passthrough request successfully, with the
/// controller's status and result kept in the request for the caller of the ioctl; any other
/// with the error the status stands for.
pub(crate) fn end_status(rq: &Request<NvmeOps>, cqe: &cmd::Completion) -> Result {
    if rq.is_driver_private() {
        rq.set_driver_result(cqe.status.into(), cqe.result.into());
        return Ok(());
    }
    cmd::status_to_result(cqe.status)
}
