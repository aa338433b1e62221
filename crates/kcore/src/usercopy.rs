//! Copies between two user address spaces, planned once: a range is resolved to its
//! page frames (`pagetable::frames`: the access check, made for both
//! ranges before a byte moves), and the copy then runs over those frames in pieces
//! that end at the nearer page boundary of either side — no page table is walked
//! twice. The kernel does the walking and the moving; this is the arithmetic.

/// Pages a range of at most `max_len` bytes can touch (it may start mid-page).
pub const fn pages_for(max_len: u64) -> usize {
    (max_len.div_ceil(PAGE) + 1) as usize
}

const PAGE: u64 = 4096;

/// One piece of a copy: from offset `src_off` of the source range's page `src_page`
/// to offset `dst_off` of the destination range's page `dst_page`, `len` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub src_page: usize,
    pub src_off: u64,
    pub dst_page: usize,
    pub dst_off: u64,
    pub len: u64,
}

/// The pieces of a copy of `len` bytes from `sva` to `dva` (page indices count from
/// each range's first page).
pub fn pieces(sva: u64, dva: u64, len: u64) -> impl Iterator<Item = Piece> {
    let (s0, d0) = (sva & !(PAGE - 1), dva & !(PAGE - 1));
    let mut done = 0u64;
    core::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let (s, d) = (sva + done, dva + done);
        let n = (PAGE - s % PAGE).min(PAGE - d % PAGE).min(len - done);
        let p = Piece {
            src_page: ((s & !(PAGE - 1)) - s0) as usize / PAGE as usize,
            src_off: s % PAGE,
            dst_page: ((d & !(PAGE - 1)) - d0) as usize / PAGE as usize,
            dst_off: d % PAGE,
            len: n,
        };
        done += n;
        Some(p)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    /// Page-aligned addresses of the pages `[va, va + len)` touches, in order (none for
    /// an empty range): what `pagetable::frames` resolves, page by page.
    fn pages(va: u64, len: u64) -> impl Iterator<Item = u64> {
        let first = va & !(PAGE - 1);
        let n = if len == 0 { 0 } else { ((va + len - 1) & !(PAGE - 1)).wrapping_sub(first) / PAGE + 1 };
        (0..n).map(move |i| first + i * PAGE)
    }

    /// Every byte of the source lands at the same offset of the destination, once, and
    /// each piece stays within one page on either side — against a byte-by-byte model,
    /// for many alignments and lengths.
    #[test]
    fn pieces_cover_the_copy_exactly() {
        for sva in [0x1000u64, 0x1001, 0x1ff8, 0x1fff, 0x2800] {
            for dva in [0x7000u64, 0x7001, 0x7ff0, 0x7fff, 0x7400] {
                for len in [0u64, 1, 7, 8, 4095, 4096, 4097, 8191, 12_000, 65_536] {
                    let sp: Vec<u64> = pages(sva, len).collect();
                    let dp: Vec<u64> = pages(dva, len).collect();
                    assert!(sp.len() <= pages_for(65_536) && dp.len() <= pages_for(65_536));
                    let mut next = 0u64;
                    for p in pieces(sva, dva, len) {
                        assert!(p.len > 0 && p.src_off + p.len <= PAGE && p.dst_off + p.len <= PAGE, "{p:?}");
                        assert_eq!(sp[p.src_page] + p.src_off, sva + next, "source of byte {next}");
                        assert_eq!(dp[p.dst_page] + p.dst_off, dva + next, "destination of byte {next}");
                        next += p.len;
                    }
                    assert_eq!(next, len);
                    // Every page of each range is used (the walk resolved no page for nothing).
                    let used: std::collections::BTreeSet<usize> = pieces(sva, dva, len).map(|p| p.src_page).collect();
                    assert_eq!(used.len(), sp.len());
                }
            }
        }
    }

    #[test]
    fn page_lists() {
        assert_eq!(pages(0x1000, 0).count(), 0);
        assert_eq!(pages(0x1fff, 1).collect::<Vec<_>>(), [0x1000]);
        assert_eq!(pages(0x1fff, 2).collect::<Vec<_>>(), [0x1000, 0x2000]);
        assert_eq!(pages(0x1000, 4096).collect::<Vec<_>>(), [0x1000]);
        assert_eq!(pages_for(65_536), 17);
    }
}
