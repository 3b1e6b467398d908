// SPDX-License-Identifier: GPL-2.0

//! Describing a transfer with a Scatter Gather List: one Data Block descriptor in the command
//! for a single segment, otherwise a Last Segment descriptor in the command pointing to a list
//! of Data Block descriptors, one per segment.

use crate::cmd::{SglDesc, SGL_DESC_WORDS};
use kernel::prelude::*;

/// The Data Block descriptor of one segment (bus address, length): `EINVAL` for an empty
/// segment or one of 4 GiB or more, which a descriptor cannot describe.
#[inline(always)]
pub(crate) fn data_block((addr, len): (u64, usize)) -> Result<SglDesc> {
    let len = u32::try_from(len).map_err(|_| EINVAL)?;
    if len == 0 {
        return Err(EINVAL);
    }
    Ok(SglDesc::data_block(addr, len))
}

/// Build the SGL of a transfer made of `segs` (bus address, length): the descriptor for the
/// command's data pointer. Descriptors of a list are written with `put` (index, descriptor);
/// there is room for `max` of them, at bus address `list_addr`.
pub(crate) fn build_sgl(
    segs: impl Iterator<Item = (u64, usize)>,
    mut put: impl FnMut(usize, SglDesc) -> Result,
    max: usize,
    list_addr: u64,
) -> Result<SglDesc> {
    let mut first = None;
    let mut n = 0;
    for seg in segs {
        let desc = data_block(seg)?;
        if n == max {
            return Err(EINVAL);
        }
        match first {
            // One segment needs no list: its descriptor goes into the command.
            None => first = Some(desc),
            Some(first) => {
                if n == 1 {
                    put(0, first)?;
                }
                put(n, desc)?;
            }
        }
        n += 1;
    }
    let first = first.ok_or(EINVAL)?;
    if n == 1 {
        return Ok(first);
    }
    Ok(SglDesc::last_segment(
        list_addr,
        u32::try_from(n * SGL_DESC_WORDS * size_of::<u64>())?,
    ))
}

#[kunit_tests(rust_nvme_mq_sgl)]
mod tests {
    use super::*;

    fn build(segs: &[(u64, usize)], list: &mut [SglDesc]) -> Result<SglDesc> {
        let max = list.len();
        build_sgl(
            segs.iter().copied(),
            |i, d| {
                *list.get_mut(i).ok_or(ENOSPC)? = d;
                Ok(())
            },
            max,
            0x9000,
        )
    }

    const NONE: SglDesc = SglDesc::last_segment(0xdead, 0);

    #[test]
    fn sgl_one_segment_in_command() {
        let mut list = [NONE; 4];
        // Any address and length, here at a dword offset and not a whole page.
        let d = build(&[(0x1000_0004, 0x1_0004)], &mut list).unwrap();
        assert_eq!(d.words(), [0x1000_0004, 0x1_0004]);
        assert_eq!(list[0], NONE);
    }

    #[test]
    fn sgl_list() {
        let mut list = [NONE; 4];
        let segs = [
            (0x1000_0004, 512),
            (0x2000_0204, 512),
            (0x3000_0000, 0x3000),
        ];
        let d = build(&segs, &mut list).unwrap();
        // Last Segment descriptor: the list's address, 3 descriptors of 16 bytes, type 3.
        assert_eq!(d.words(), [0x9000, 48 | 0x30 << 56]);
        assert_eq!(list[0].words(), [0x1000_0004, 512]);
        assert_eq!(list[1].words(), [0x2000_0204, 512]);
        assert_eq!(list[2].words(), [0x3000_0000, 0x3000]);
        assert_eq!(list[3], NONE);
    }

    #[test]
    fn sgl_rejects_bad_segments() {
        let mut list = [NONE; 2];
        // More segments than the list holds.
        assert!(build(&[(0, 512), (4096, 512), (8192, 512)], &mut list).is_err());
        // An empty segment, an empty transfer, a segment over 4 GiB.
        assert!(build(&[(0, 512), (4096, 0)], &mut list).is_err());
        assert!(build(&[], &mut list).is_err());
        assert!(build(&[(0, 1 << 32)], &mut list).is_err());
    }
}
