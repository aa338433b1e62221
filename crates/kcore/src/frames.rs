//! Physical frame allocator: one bit per 4 KiB frame (1 = used), a search hint,
//! and a count of free frames. Storage is given by the caller (the kernel places
//! it in physical memory found in the boot memory map).

pub struct FrameBitmap<'a> {
    bits: &'a mut [u64],
    frames: u64,
    free: u64,
    hint: usize,
}

impl<'a> FrameBitmap<'a> {
    /// Words needed for `frames` frames.
    pub const fn words_for(frames: u64) -> usize {
        frames.div_ceil(64) as usize
    }

    /// All frames start used; the caller frees the usable ranges.
    pub fn new(bits: &'a mut [u64], frames: u64) -> Self {
        assert!(bits.len() >= Self::words_for(frames));
        for w in bits.iter_mut() {
            *w = u64::MAX;
        }
        FrameBitmap { bits, frames, free: 0, hint: 0 }
    }

    pub fn total(&self) -> u64 {
        self.frames
    }
    pub fn free_count(&self) -> u64 {
        self.free
    }

    pub fn is_used(&self, f: u64) -> bool {
        f >= self.frames || self.bits[(f / 64) as usize] & (1 << (f % 64)) != 0
    }

    /// Mark `[first, first+count)` free (frames past the end are ignored).
    pub fn free_range(&mut self, first: u64, count: u64) {
        for f in first..first.saturating_add(count).min(self.frames) {
            self.free(f);
        }
    }

    /// Mark `[first, first+count)` used.
    pub fn reserve_range(&mut self, first: u64, count: u64) {
        for f in first..first.saturating_add(count).min(self.frames) {
            let (w, b) = ((f / 64) as usize, f % 64);
            if self.bits[w] & (1 << b) == 0 {
                self.bits[w] |= 1 << b;
                self.free -= 1;
            }
        }
    }

    /// Free one frame. Freeing a free frame or one past the end is ignored.
    pub fn free(&mut self, f: u64) {
        if f >= self.frames {
            return;
        }
        let (w, b) = ((f / 64) as usize, f % 64);
        if self.bits[w] & (1 << b) != 0 {
            self.bits[w] &= !(1 << b);
            self.free += 1;
            if w < self.hint {
                self.hint = w;
            }
        }
    }

    /// Allocate one frame, searching from the hint.
    pub fn alloc(&mut self) -> Option<u64> {
        if self.free == 0 {
            return None;
        }
        let words = Self::words_for(self.frames);
        for i in 0..words {
            let w = (self.hint + i) % words;
            if self.bits[w] != u64::MAX {
                let b = (!self.bits[w]).trailing_zeros() as u64;
                let f = w as u64 * 64 + b;
                if f >= self.frames {
                    continue;
                }
                self.bits[w] |= 1 << b;
                self.free -= 1;
                self.hint = w;
                return Some(f);
            }
        }
        None
    }

    /// Allocate `count` contiguous frames whose first frame is a multiple of `align`.
    pub fn alloc_contiguous(&mut self, count: u64, align: u64) -> Option<u64> {
        if count == 0 || count > self.free {
            return None;
        }
        let align = align.max(1);
        let mut start = 0;
        while start + count <= self.frames {
            match (start..start + count).find(|f| self.is_used(*f)) {
                None => {
                    self.reserve_range(start, count);
                    return Some(start);
                }
                Some(used) => start = (used + 1).div_ceil(align) * align,
            }
        }
        None
    }
}

/// A place for `bytes` (page-aligned, the highest that fits) in RAM below `below`:
/// inside one of `ram` (start, end) and overlapping none of `reserved` (start, end).
/// The kernel puts its frame tables there, before any allocator exists.
pub fn place(ram: &[(u64, u64)], reserved: &[(u64, u64)], bytes: u64, below: u64) -> Option<u64> {
    const PAGE: u64 = 4096;
    let bytes = bytes.checked_next_multiple_of(PAGE)?;
    let mut best: Option<u64> = None;
    for &(start, end) in ram {
        let start = start.checked_next_multiple_of(PAGE)?;
        let mut at = match end.min(below).checked_sub(bytes) {
            Some(a) => a & !(PAGE - 1),
            None => continue,
        };
        // Step down below whatever reserved range the candidate overlaps.
        while at >= start {
            match reserved.iter().filter(|&&(a, b)| a < at + bytes && at < b).map(|&(a, _)| a).min() {
                None => {
                    best = best.max(Some(at));
                    break;
                }
                Some(a) => match a.checked_sub(bytes) {
                    Some(n) => at = n & !(PAGE - 1),
                    None => break,
                },
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::vec;

    #[test]
    fn alloc_free_cycle() {
        let mut store = vec![0u64; FrameBitmap::words_for(200)];
        let mut fb = FrameBitmap::new(&mut store, 200);
        assert_eq!(fb.alloc(), None);
        fb.free_range(10, 100);
        assert_eq!(fb.free_count(), 100);
        let mut got = HashSet::new();
        while let Some(f) = fb.alloc() {
            assert!((10..110).contains(&f));
            assert!(got.insert(f), "no frame handed out twice");
        }
        assert_eq!(got.len(), 100);
        fb.free(50);
        fb.free(50);
        assert_eq!(fb.free_count(), 1);
        assert_eq!(fb.alloc(), Some(50));
        fb.free(999); // past the end: ignored
    }

    #[test]
    fn contiguous_and_aligned() {
        let mut store = vec![0u64; FrameBitmap::words_for(1000)];
        let mut fb = FrameBitmap::new(&mut store, 1000);
        fb.free_range(0, 1000);
        fb.reserve_range(5, 1);
        let a = fb.alloc_contiguous(16, 16).unwrap();
        assert_eq!(a % 16, 0);
        assert!(a >= 16);
        for f in a..a + 16 {
            assert!(fb.is_used(f));
        }
        assert_eq!(fb.alloc_contiguous(2000, 1), None);
        assert_eq!(fb.free_count(), 1000 - 1 - 16);
    }

    #[test]
    fn place_finds_the_highest_free_room() {
        let ram = [(0, 0x9f000), (0x10_0000, 0x2000_0000), (0x1_0000_0000, 0x1_4000_0000)];
        // Below 4 GiB only: the top of the big region, under the boot image there.
        let reserved = [(0, 0x10_0000), (0x10_0000, 0x40_0000), (0x1f00_0000, 0x1fff_0000)];
        assert_eq!(place(&ram, &reserved, 0x1_0000, 0x1_0000_0000), Some(0x1fff_0000), "the room above the module");
        assert_eq!(
            place(&ram, &reserved, 0x2_0000, 0x1_0000_0000),
            Some(0x1efe_0000),
            "too big for it: below the module"
        );
        assert_eq!(
            place(&ram, &reserved, 0x10_0000, 0x1_0000_0000),
            Some(0x1ef0_0000),
            "too big for the gap: below the module"
        );
        // With RAM above 4 GiB in reach: its top.
        assert_eq!(place(&ram, &reserved, 5000, 0x2_0000_0000), Some(0x1_4000_0000 - 0x2000));
        assert_eq!(place(&ram, &reserved, 1 << 40, 0x2_0000_0000), None, "nothing that big");
        let all = [(0, u64::MAX)];
        assert_eq!(place(&ram, &all, 4096, u64::MAX), None, "everything reserved");
        assert_eq!(place(&[(0, u64::MAX)], &[], u64::MAX, u64::MAX), None, "no overflow");
    }
}
