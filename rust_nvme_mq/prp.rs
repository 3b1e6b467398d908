// SPDX-License-Identifier: GPL-2.0

//! Describing a transfer with Physical Region Page entries (PRP1, PRP2, PRP lists).

use kernel::{page::PAGE_SIZE, prelude::*};

/// PRP list entries per command slot: a list of one page, in the slot's list area.
pub(crate) const PRP_LIST_ENTRIES: usize = PAGE_SIZE / size_of::<u64>();

/// How a transfer is described to the device.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Prps {
    pub(crate) prp1: u64,
    /// Entries after PRP1: 0 (PRP2 unused), 1 (PRP2 is the entry) or more (PRP2 points to a
    /// list of that many entries).
    pub(crate) nr_entries: usize,
    pub(crate) prp2: u64,
}

/// Build the PRPs of a transfer made of `segs` (bus address, length), writing list entries
/// with `put` (index, entry); there is room for `max` of them, at bus address `list_addr`.
///
/// Pieces that continue each other physically (the block layer merges such bio vectors into
/// one segment) are joined; otherwise a piece must start on a page and the previous one end on
/// one (`EINVAL` if not: the queue's virtual boundary, when it has one, guarantees it; without
/// one the transfer needs an SGL).
pub(crate) fn build_prps(
    segs: impl Iterator<Item = (u64, usize)>,
    put: impl FnMut(usize, u64) -> Result,
    max: usize,
    list_addr: u64,
) -> Result<Prps> {
    let page = PAGE_SIZE as u64;
    let mut prp1 = None;
    let mut entries = Entries {
        put,
        max,
        nr: 0,
        second: 0,
    };
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
                entries.add(next)?;
            }
            next += page;
        }
        end = addr + len;
    }
    let prp1 = prp1.ok_or(EINVAL)?;
    let prp2 = match entries.nr {
        0 => 0,
        1 => entries.second,
        _ => list_addr,
    };
    Ok(Prps {
        prp1,
        nr_entries: entries.nr,
        prp2,
    })
}

/// The entries after PRP1 of a transfer being described, written with `put` (index, entry),
/// at most `max`.
/// PRP1 and PRP2 of one piece of data at `addr`, `len` bytes, that touches at most two pages:
/// what [`build_prps`] gives for it, without a list or a walk (the common 4 KiB request, as
/// C's simple path maps it). `None` for anything else, or an empty piece.
#[inline(always)]
pub(crate) fn two_page_prps(addr: u64, len: usize) -> Option<(u64, u64)> {
    let page = PAGE_SIZE as u64;
    let len = len as u64;
    let offset = addr % page;
    if len == 0 || offset + len > 2 * page {
        return None;
    }
    let prp2 = if offset + len > page {
        addr - offset + page
    } else {
        0
    };
    Some((addr, prp2))
}

struct Entries<F> {
    put: F,
    max: usize,
    /// How many there are.
    nr: usize,
    /// The first one, written to the list only once a second one shows there is a list.
    second: u64,
}

impl<F: FnMut(usize, u64) -> Result> Entries<F> {
    /// Add `entry`; `EINVAL` if there are `max` already.
    #[inline]
    fn add(&mut self, entry: u64) -> Result {
        if self.nr == self.max {
            return Err(EINVAL);
        }
        // A single entry goes into PRP2 itself: the list is written once a second entry
        // shows there is one.
        match self.nr {
            0 => self.second = entry,
            1 => {
                (self.put)(0, self.second)?;
                (self.put)(1, entry)?;
            }
            _ => (self.put)(self.nr, entry)?,
        }
        self.nr += 1;
        Ok(())
    }
}

#[kunit_tests(rust_nvme_mq_prp)]
mod tests {
    use super::*;

    /// `build_prps` with the list entries written into `list`.
    fn build_prps(
        segs: impl Iterator<Item = (u64, usize)>,
        list: &mut [u64],
        list_addr: u64,
    ) -> Result<Prps> {
        let max = list.len();
        super::build_prps(
            segs,
            |i, entry| {
                *list.get_mut(i).ok_or(ENOSPC)? = entry;
                Ok(())
            },
            max,
            list_addr,
        )
    }

    const PAGE: u64 = PAGE_SIZE as u64;
    const PG: usize = PAGE_SIZE;

    #[test]
    fn two_page_prps_as_build_prps() {
        let mut list = [0u64; 4];
        for (addr, len) in [
            (0x1000_0000, PG),
            (0x1000_0200, 512),
            (0x1000_0004, 512),
            (0x1000_0ffc, 512),
            (0x1000_0800, PG),
            (0x1000_0000, 2 * PG),
            (0x1000_0001, 2 * PG - 1),
        ] {
            let p = build_prps([(addr, len)].into_iter(), &mut list, 0x9000).unwrap();
            assert_eq!(super::two_page_prps(addr, len), Some((p.prp1, p.prp2)));
        }
        // Three pages need a list; an empty piece has no PRPs.
        assert_eq!(super::two_page_prps(0x1000_0001, 2 * PG), None);
        assert_eq!(super::two_page_prps(0x1000_0000, 2 * PG + 1), None);
        assert_eq!(super::two_page_prps(0x1000_0000, 0), None);
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
    fn prp_first_piece_at_any_dword() {
        let mut list = [0u64; 4];
        // 512 bytes at page offset 4 (dma_alignment 3): PRP1 carries the offset.
        let p = build_prps([(0x1000_0004, 512)].into_iter(), &mut list, 0x9000).unwrap();
        assert_eq!(
            p,
            Prps {
                prp1: 0x1000_0004,
                nr_entries: 0,
                prp2: 0
            }
        );
        // 512 bytes at page offset 4092: the rest is in the next page, the one entry.
        let p = build_prps([(0x1000_0ffc, 512)].into_iter(), &mut list, 0x9000).unwrap();
        assert_eq!(
            p,
            Prps {
                prp1: 0x1000_0ffc,
                nr_entries: 1,
                prp2: 0x1000_1000
            }
        );
        // Offset 4 to the page end, then whole pages, then a piece not ending on a page.
        let segs = [
            (0x1000_0004, 0xffc),
            (0x2000_0000, 0x1000),
            (0x3000_0000, 0x204),
        ];
        let p = build_prps(segs.into_iter(), &mut list, 0x9000).unwrap();
        assert_eq!(
            p,
            Prps {
                prp1: 0x1000_0004,
                nr_entries: 2,
                prp2: 0x9000
            }
        );
        assert_eq!(&list[..2], &[0x2000_0000, 0x3000_0000]);
        // A later piece at a dword offset is a gap PRPs cannot describe.
        let segs = [(0x1000_0000, 0x1000), (0x2000_0004, 0x200)];
        assert!(build_prps(segs.into_iter(), &mut list, 0x9000).is_err());
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
}
