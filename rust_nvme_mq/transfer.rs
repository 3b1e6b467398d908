// SPDX-License-Identifier: GPL-2.0

//! How the data of a read or write is described to the controller: the transfer limits the
//! controller reports, the list area each command slot lends its command, and the choice between
//! PRPs (`prp.rs`) and an SGL (`sgl.rs`) for each request.
//!
//! Like the C driver, a controller that takes SGLs for I/O commands gets disks without a
//! virtual boundary: a request whose segments do not meet at page boundaries (a direct I/O
//! buffer at a dword offset, vectors of odd lengths) goes out as one command described by an
//! SGL instead of being split. Requests whose segments average `sgl_threshold` bytes or more
//! use an SGL too (fewer descriptors than PRP entries); the others use PRPs.

use crate::{
    cmd::{SglDesc, SGL_DESC_WORDS},
    le::Le64,
    prp::PRP_LIST_ENTRIES,
};
use kernel::{
    device::{Bound, Device},
    dma::Coherent,
    io::io_write,
    page::PAGE_SIZE,
    prelude::*,
};

/// 64-bit words of list space per command slot: one page, which holds a PRP list that never
/// crosses a page (the controller would take its last entry for a pointer to the next list),
/// or an SGL segment of [`MAX_SEGMENTS`] descriptors.
pub(crate) const SLOT_LIST_WORDS: usize = PAGE_SIZE / size_of::<u64>();

/// Most data segments of a request: an SGL segment fills the slot's list area.
pub(crate) const MAX_SEGMENTS: usize = SLOT_LIST_WORDS / SGL_DESC_WORDS;

// A full PRP list fits the slot's list area (`ListArea::write` refuses what does not).
const _: () = assert!(PRP_LIST_ENTRIES <= SLOT_LIST_WORDS);

/// Largest transfer the driver describes whatever MDTS says: PRP1 and a full PRP list reach
/// this many bytes from any dword offset.
const MAX_TRANSFER: usize = PRP_LIST_ENTRIES * PAGE_SIZE;

/// Identify Controller SGLS, bits 1:0: SGLs are supported for I/O commands (1: any
/// alignment, 2: data blocks dword aligned).
const SGLS_SUPPORTED: u32 = 0b11;

/// The transfer limits of a controller, and when its requests use an SGL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Transfer {
    /// Largest transfer in bytes: MDTS, at most [`MAX_TRANSFER`].
    pub(crate) max_bytes: usize,
    /// The controller takes SGLs for I/O commands.
    pub(crate) sgl: bool,
    /// Requests whose segments average this many bytes or more use an SGL (0: only those
    /// PRPs cannot describe).
    sgl_threshold: u32,
}

impl Transfer {
    /// The limits for Identify Controller's MDTS (in 4 KiB pages, as a power of two; 0: no
    /// limit) and SGLS; `sgl_threshold` is the module parameter.
    pub(crate) fn new(mdts: u8, sgls: u32, sgl_threshold: u32) -> Self {
        let mut max_bytes = MAX_TRANSFER;
        if mdts != 0 && u32::from(mdts) + 12 < usize::BITS {
            max_bytes = max_bytes.min(1usize << (12 + u32::from(mdts)));
        }
        Self {
            max_bytes,
            sgl: sgls & SGLS_SUPPORTED != 0,
            sgl_threshold,
        }
    }

    /// Most data segments of a request, as the C driver counts them: one per page of the
    /// largest transfer plus one for a first page entered at an offset, at most what one SGL
    /// segment holds.
    pub(crate) fn max_segments(&self) -> usize {
        (self.max_bytes / PAGE_SIZE + 1).min(MAX_SEGMENTS)
    }

    /// The queue's virtual boundary: none with SGLs (they describe segments of any length at
    /// any address), otherwise a page, which is what PRPs can describe.
    pub(crate) fn virt_boundary_mask(&self) -> usize {
        if self.sgl {
            0
        } else {
            PAGE_SIZE - 1
        }
    }

    /// Whether a request of `bytes` in `segments` segments uses an SGL rather than PRPs,
    /// before PRPs are tried (the C driver's average segment size rule).
    pub(crate) fn prefers_sgl(&self, bytes: usize, segments: usize) -> bool {
        // One segment (most requests) needs no division.
        let average = if segments <= 1 {
            bytes
        } else {
            bytes.div_ceil(segments)
        };
        self.sgl && self.sgl_threshold != 0 && average >= self.sgl_threshold as usize
    }
}

/// The list areas of a queue's command slots, a page each, allocated in chunks of
/// [`SLOTS_PER_CHUNK`] slots so that no allocation is larger than 256 KiB whatever the depth.
pub(crate) struct SlotLists {
    chunks: KVec<Coherent<[u64]>>,
}

/// Slots per coherent allocation.
const SLOTS_PER_CHUNK: usize = 64;

impl SlotLists {
    /// List areas for `slots` command slots.
    pub(crate) fn new(dev: &Device<Bound>, slots: usize) -> Result<Self> {
        let mut chunks = KVec::new();
        let mut left = slots;
        while left > 0 {
            let n = left.min(SLOTS_PER_CHUNK);
            let chunk = Coherent::<u64>::zeroed_slice(dev, n * SLOT_LIST_WORDS, GFP_KERNEL)?;
            chunks.push(chunk, GFP_KERNEL)?;
            left -= n;
        }
        Ok(Self { chunks })
    }

    /// The list area of slot `cid`.
    pub(crate) fn area(&self, cid: u16) -> Result<ListArea<'_>> {
        let cid = usize::from(cid);
        let words = self.chunks.get(cid / SLOTS_PER_CHUNK).ok_or(EINVAL)?;
        let index = (cid % SLOTS_PER_CHUNK) * SLOT_LIST_WORDS;
        Ok(ListArea {
            words,
            index,
            addr: words.dma_address() + (index * size_of::<u64>()) as u64,
        })
    }
}

/// The list area of one command slot: what a command's PRP list, SGL segment or Dataset
/// Management range is written into.
pub(crate) struct ListArea<'a> {
    /// Words of memory the controller reads: each written as an [`Le64`].
    words: &'a Coherent<[u64]>,
    /// The area's first word in `words`.
    index: usize,
    /// Bus address of the area.
    pub(crate) addr: u64,
}

impl ListArea<'_> {
    /// Write word `i` of the area.
    pub(crate) fn write(&self, i: usize, value: u64) -> Result {
        if i >= SLOT_LIST_WORDS {
            return Err(EINVAL);
        }
        io_write!(self.words, [try: self.index + i], Le64::new(value).raw());
        Ok(())
    }

    /// Write SGL descriptor `i` of the area.
    pub(crate) fn write_desc(&self, i: usize, desc: SglDesc) -> Result {
        let [low, high] = desc.words();
        self.write(i * SGL_DESC_WORDS, low)?;
        self.write(i * SGL_DESC_WORDS + 1, high)
    }
}

#[kunit_tests(rust_nvme_mq_transfer)]
mod tests {
    use super::*;

    #[test]
    fn limits_like_c_for_qemu() {
        // QEMU's controller: MDTS 7 (512 KiB), SGLs without alignment needs. The C driver
        // gives 512 KiB, 129 segments, no virtual boundary.
        let t = Transfer::new(7, 1, 32 * 1024);
        assert_eq!(t.max_bytes, 512 * 1024);
        assert_eq!(t.max_segments(), 129);
        assert_eq!(t.virt_boundary_mask(), 0);
        // Without SGLs: PRPs only, with a page boundary.
        let t = Transfer::new(7, 0, 32 * 1024);
        assert_eq!(t.virt_boundary_mask(), PAGE_SIZE - 1);
        assert!(!t.prefers_sgl(512 * 1024, 1));
    }

    #[test]
    fn limits_capped() {
        // No MDTS: the driver's own cap, and as many segments as an SGL segment holds.
        let t = Transfer::new(0, 1, 0);
        assert_eq!(t.max_bytes, MAX_TRANSFER);
        assert_eq!(t.max_segments(), MAX_SEGMENTS);
        // A silly MDTS does not overflow.
        assert_eq!(Transfer::new(255, 1, 0).max_bytes, MAX_TRANSFER);
    }

    #[test]
    fn sgl_threshold() {
        let t = Transfer::new(7, 1, 32 * 1024);
        assert!(t.prefers_sgl(64 * 1024, 2));
        assert!(!t.prefers_sgl(64 * 1024, 3));
        assert!(!t.prefers_sgl(4096, 1));
        // 0 turns the rule off.
        assert!(!Transfer::new(7, 1, 0).prefers_sgl(512 * 1024, 1));
    }
}
