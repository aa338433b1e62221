//! x86-64 four-level page tables for user address spaces, written against a
//! `PhysMem` trait so that the same code walks real tables in the kernel and
//! simulated ones in host tests. Only 4 KiB leaves in the user half are managed
//! here; the kernel half is shared and never touched.

pub const P: u64 = 1 << 0;
pub const W: u64 = 1 << 1;
pub const U: u64 = 1 << 2;
pub const PS: u64 = 1 << 7;
/// Software bit: the page is a UTCB (kernel-owned; users may not unmap or map over it).
pub const UTCB: u64 = 1 << 9;
pub const NX: u64 = 1 << 63;
pub const ADDR: u64 = 0x000f_ffff_ffff_f000;
/// Software bits of a leaf (ignored by the MMU: 10, 11 and 52..=62) that hold the slot
/// of the mapping's node in its frame's mapping database (`framedb`): 13 bits.
pub const SLOT_BITS: u64 = (3 << 10) | (0x7ff << 52);

/// The mapping-database slot a leaf keeps (0: none).
pub fn slot(pte: u64) -> u16 {
    (((pte >> 10) & 3) | (((pte >> 52) & 0x7ff) << 2)) as u16
}

/// `pte` keeping `slot` (its low 13 bits) in `SLOT_BITS`.
pub fn with_slot(pte: u64, slot: u16) -> u64 {
    let s = slot as u64 & 0x1fff;
    (pte & !SLOT_BITS) | (s & 3) << 10 | (s >> 2) << 52
}

/// First PML4 slot of the kernel half.
pub const KERNEL_PML4_FIRST: usize = 256;

pub trait PhysMem {
    /// The page-table page at physical address `phys`.
    fn table(&mut self, phys: u64) -> &mut [u64; 512];
    /// A zeroed page for a new table, or `None` when out of memory or quota.
    fn alloc_table(&mut self) -> Option<u64>;
    fn free_table(&mut self, phys: u64);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapError {
    NoMemory,
    AlreadyMapped,
    NotUser,
}

fn index(va: u64, level: u32) -> usize {
    ((va >> (12 + 9 * level)) & 0x1ff) as usize
}

/// A page that may be mapped for user mode (`USER_MAP_END`: not the canonical half's
/// last page, see there).
fn is_user_page(va: u64) -> bool {
    va & 0xfff == 0 && abi::layout::is_mappable(va, 0x1000)
}

/// The last-level table covering `va`, if the tables down to it exist.
fn leaf_table(mem: &mut impl PhysMem, root: u64, va: u64) -> Option<u64> {
    let mut table = root;
    for level in (1..4).rev() {
        let e = mem.table(table)[index(va, level)];
        if e & P == 0 || e & PS != 0 {
            return None;
        }
        table = e & ADDR;
    }
    Some(table)
}

/// The leaf entry for `va`, if present.
pub fn lookup(mem: &mut impl PhysMem, root: u64, va: u64) -> Option<u64> {
    let table = leaf_table(mem, root, va)?;
    let e = mem.table(table)[index(va, 0)];
    if e & P != 0 {
        Some(e)
    } else {
        None
    }
}

/// The frames behind the pages of `[va, va + len)` (`len > 0`) into `out`, every leaf
/// having all the bits of `need` (`P`, and `U`, `W` as the access asks); the tables
/// down to a leaf table are walked once for all the pages it covers. The number of
/// pages, or `None` when one is not mapped so, there are more than `out` holds, or the
/// range is empty or wraps.
#[inline]
pub fn frames(mem: &mut impl PhysMem, root: u64, va: u64, len: u64, need: u64, out: &mut [u64]) -> Option<usize> {
    let first = va >> 12;
    let last = va.checked_add(len.checked_sub(1)?)? >> 12;
    let n = (last - first + 1) as usize;
    let out = out.get_mut(..n)?;
    let mut table = leaf_table(mem, root, va)?;
    for (i, slot) in out.iter_mut().enumerate() {
        let page = (first + i as u64) << 12;
        if i != 0 && index(page, 0) == 0 {
            table = leaf_table(mem, root, page)?;
        }
        let e = mem.table(table)[index(page, 0)];
        if e & need != need {
            return None;
        }
        *slot = e & ADDR;
    }
    Some(n)
}

/// The last-level table covering `va`, creating the tables down to it.
fn leaf_table_create(mem: &mut impl PhysMem, root: u64, va: u64) -> Result<u64, MapError> {
    let mut table = root;
    for level in (1..4).rev() {
        let i = index(va, level);
        let e = mem.table(table)[i];
        if e & P == 0 {
            let new = mem.alloc_table().ok_or(MapError::NoMemory)?;
            mem.table(table)[i] = new | P | W | U;
            table = new;
        } else {
            table = e & ADDR;
        }
    }
    Ok(table)
}

/// Install leaf `pte` for the user page `va`, creating intermediate tables.
pub fn map(mem: &mut impl PhysMem, root: u64, va: u64, pte: u64) -> Result<(), MapError> {
    if !is_user_page(va) {
        return Err(MapError::NotUser);
    }
    let table = leaf_table_create(mem, root, va)?;
    let slot = &mut mem.table(table)[index(va, 0)];
    if *slot & P != 0 {
        return Err(MapError::AlreadyMapped);
    }
    *slot = pte | P;
    Ok(())
}

/// Map `n` pages of contiguous physical memory at `pa` to contiguous user addresses
/// at `va`, filling each last-level table in one go (the boot-time hand-out of all
/// memory to sigma0). Pages already mapped are left alone; returns how many were
/// mapped.
pub fn map_range(mem: &mut impl PhysMem, root: u64, va: u64, pa: u64, n: u64, flags: u64) -> Result<u64, MapError> {
    if !is_user_page(va)
        || pa & 0xfff != 0
        || n.checked_mul(4096).and_then(|b| b.checked_add(va)).is_none_or(|e| e > abi::layout::USER_MAP_END)
    {
        return Err(MapError::NotUser);
    }
    let mut done = 0;
    let mut mapped = 0;
    while done < n {
        let at = va + done * 4096;
        let table = leaf_table_create(mem, root, at)?;
        let first = index(at, 0);
        let count = (512 - first as u64).min(n - done);
        let t = mem.table(table);
        for k in 0..count as usize {
            if t[first + k] & P == 0 {
                t[first + k] = (pa + (done + k as u64) * 4096) | flags | P;
                mapped += 1;
            }
        }
        done += count;
    }
    Ok(mapped)
}

/// Change the leaf entry for a mapped page (same frame, new flags).
pub fn update(mem: &mut impl PhysMem, root: u64, va: u64, f: impl FnOnce(u64) -> u64) -> bool {
    let Some(table) = leaf_table(mem, root, va) else { return false };
    let slot = &mut mem.table(table)[index(va, 0)];
    if *slot & P == 0 {
        return false;
    }
    *slot = f(*slot) | P;
    true
}

/// Remove the leaf for `va` and return it. Empty intermediate tables stay (they are
/// freed with the address space).
pub fn unmap(mem: &mut impl PhysMem, root: u64, va: u64) -> Option<u64> {
    if !is_user_page(va) {
        return None;
    }
    let table = leaf_table(mem, root, va)?;
    let slot = &mut mem.table(table)[index(va, 0)];
    let old = *slot;
    if old & P == 0 {
        return None;
    }
    *slot = 0;
    Some(old)
}

/// Call `leaf(va, pte)` for every mapped user page, changing nothing.
pub fn for_each_leaf(mem: &mut impl PhysMem, root: u64, leaf: impl FnMut(u64, u64)) {
    for_each_leaf_in(mem, root, 0, abi::layout::USER_END, leaf)
}

/// Call `leaf(va, pte)` for every mapped page in `[lo, hi)`, skipping whole tables
/// outside the range.
pub fn for_each_leaf_in(mem: &mut impl PhysMem, root: u64, lo: u64, hi: u64, mut leaf: impl FnMut(u64, u64)) {
    walk_leaves_in(mem, root, lo, hi, |va, e| {
        leaf(va, e);
        true
    });
}

/// The first mapped page in `[lo, hi)` and its entry. A caller that changes the
/// tables between calls walks a range without holding a list of its pages.
pub fn next_leaf_in(mem: &mut impl PhysMem, root: u64, lo: u64, hi: u64) -> Option<(u64, u64)> {
    walk_leaves_in(mem, root, lo, hi, |_, _| false)
}

/// Visit the mapped pages of `[lo, hi)` in address order while `leaf` says to go on;
/// the page at which it stopped.
fn walk_leaves_in(
    mem: &mut impl PhysMem,
    root: u64,
    lo: u64,
    hi: u64,
    mut leaf: impl FnMut(u64, u64) -> bool,
) -> Option<(u64, u64)> {
    let hi = hi.min(abi::layout::USER_END);
    if lo >= hi {
        return None;
    }
    // Index range at a level for the part of [lo, hi) inside the table at `base`.
    let span = |base: u64, level: u32| -> (usize, usize) {
        let size = 1u64 << (12 + 9 * level);
        let first = if lo > base { ((lo - base) / size) as usize } else { 0 };
        let last = if hi < base + 512 * size { (hi - 1 - base) / size } else { 511 } as usize;
        (first, last.min(511))
    };
    let (a4, b4) = span(0, 3);
    for i4 in a4..=b4.min(KERNEL_PML4_FIRST - 1) {
        let e4 = mem.table(root)[i4];
        if e4 & P == 0 {
            continue;
        }
        let base3 = (i4 as u64) << 39;
        let (a3, b3) = span(base3, 2);
        for i3 in a3..=b3 {
            let e3 = mem.table(e4 & ADDR)[i3];
            if e3 & P == 0 || e3 & PS != 0 {
                continue;
            }
            let base2 = base3 | ((i3 as u64) << 30);
            let (a2, b2) = span(base2, 1);
            for i2 in a2..=b2 {
                let e2 = mem.table(e3 & ADDR)[i2];
                if e2 & P == 0 || e2 & PS != 0 {
                    continue;
                }
                let base1 = base2 | ((i2 as u64) << 21);
                let (a1, b1) = span(base1, 0);
                for i1 in a1..=b1 {
                    let e1 = mem.table(e2 & ADDR)[i1];
                    let va = base1 | ((i1 as u64) << 12);
                    if e1 & P != 0 && !leaf(va, e1) {
                        return Some((va, e1));
                    }
                }
            }
        }
    }
    None
}

/// Tear down the user half: call `leaf(va, pte)` for every mapped page, free every
/// intermediate table, and clear the root's user entries (the root itself stays).
pub fn destroy_user(mem: &mut impl PhysMem, root: u64, mut leaf: impl FnMut(u64, u64)) {
    for i4 in 0..KERNEL_PML4_FIRST {
        let e4 = mem.table(root)[i4];
        if e4 & P == 0 {
            continue;
        }
        let pdpt = e4 & ADDR;
        for i3 in 0..512 {
            let e3 = mem.table(pdpt)[i3];
            if e3 & P == 0 || e3 & PS != 0 {
                continue;
            }
            let pd = e3 & ADDR;
            for i2 in 0..512 {
                let e2 = mem.table(pd)[i2];
                if e2 & P == 0 || e2 & PS != 0 {
                    continue;
                }
                let pt = e2 & ADDR;
                for i1 in 0..512 {
                    let e1 = mem.table(pt)[i1];
                    if e1 & P != 0 {
                        let va = ((i4 as u64) << 39) | ((i3 as u64) << 30) | ((i2 as u64) << 21) | ((i1 as u64) << 12);
                        leaf(va, e1);
                    }
                }
                mem.free_table(pt);
            }
            mem.free_table(pd);
        }
        mem.free_table(pdpt);
        mem.table(root)[i4] = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::boxed::Box;
    use std::collections::{HashMap, HashSet};

    struct SimMem {
        pages: HashMap<u64, Box<[u64; 512]>>,
        next: u64,
        budget: usize,
    }

    impl SimMem {
        fn new(budget: usize) -> Self {
            let mut m = SimMem { pages: HashMap::new(), next: 0x1000, budget };
            m.pages.insert(0x1000, Box::new([0; 512]));
            m.next = 0x2000;
            m
        }
    }

    impl PhysMem for SimMem {
        fn table(&mut self, phys: u64) -> &mut [u64; 512] {
            self.pages.get_mut(&phys).expect("table exists")
        }
        fn alloc_table(&mut self) -> Option<u64> {
            if self.budget == 0 {
                return None;
            }
            self.budget -= 1;
            let p = self.next;
            self.next += 0x1000;
            self.pages.insert(p, Box::new([0; 512]));
            Some(p)
        }
        fn free_table(&mut self, phys: u64) {
            assert!(self.pages.remove(&phys).is_some(), "double free of table {phys:#x}");
        }
    }

    #[test]
    fn slots_live_in_ignored_bits() {
        for s in [0u16, 1, 2, 3, 4, 0x1000, 0x1fff] {
            let pte = 0x0000_0012_3456_7000 | P | W | U | UTCB | NX | (1 << 3) | (1 << 4);
            let e = with_slot(pte, s);
            assert_eq!(slot(e), s);
            assert_eq!(e & !SLOT_BITS, pte, "nothing else changes");
            assert_eq!(e & ADDR, pte & ADDR);
            assert_eq!(with_slot(e, 0), pte);
        }
        // Neither the address, nor the MMU's bits, nor the UTCB mark.
        assert_eq!(SLOT_BITS & (ADDR | P | W | U | PS | UTCB | NX | 0x1f8), 0);
    }

    #[test]
    fn map_lookup_unmap() {
        let mut m = SimMem::new(100);
        let root = 0x1000;
        map(&mut m, root, 0x40_0000, 0xabc000 | U | W).unwrap();
        assert_eq!(map(&mut m, root, 0x40_0000, 0xdef000 | U), Err(MapError::AlreadyMapped));
        assert_eq!(lookup(&mut m, root, 0x40_0000), Some(0xabc000 | U | W | P));
        assert_eq!(lookup(&mut m, root, 0x40_1000), None);
        assert!(update(&mut m, root, 0x40_0000, |e| e & !W));
        assert_eq!(lookup(&mut m, root, 0x40_0000).unwrap() & W, 0);
        assert_eq!(unmap(&mut m, root, 0x40_0000).map(|e| e & ADDR), Some(0xabc000));
        assert_eq!(unmap(&mut m, root, 0x40_0000), None);
    }

    /// `frames` agrees with a `lookup` of every page, across a leaf table's end (a 2 MiB
    /// boundary: the next table is walked), and refuses a missing page, a leaf without
    /// a needed bit, and more pages than it may hold.
    #[test]
    fn frames_agree_with_lookup() {
        let mut m = SimMem::new(100);
        let root = 0x1000;
        let base = 0x5F_E000; // two pages below the 2 MiB boundary at 0x60_0000
        for i in 0..4u64 {
            let w = if i == 2 { 0 } else { W };
            map(&mut m, root, base + i * 4096, (0x70_0000 + i * 0x3000) | U | w).unwrap();
        }
        let mut out = [0u64; 4];
        for (va, len) in
            [(base, 1u64), (base + 0xfff, 2), (base + 0x800, 0x1000), (base + 1, 4 * 4096 - 1), (base + 0x1fff, 2)]
        {
            let n = frames(&mut m, root, va, len, P | U, &mut out).unwrap();
            let want: std::vec::Vec<u64> =
                ((va >> 12)..=((va + len - 1) >> 12)).map(|p| lookup(&mut m, root, p << 12).unwrap() & ADDR).collect();
            assert_eq!(&out[..n], &want[..], "{va:#x}+{len}");
        }
        assert_eq!(frames(&mut m, root, base + 0x1000, 0x1000, P | U | W, &mut out), Some(1));
        assert_eq!(frames(&mut m, root, base + 0x1000, 0x1001, P | U | W, &mut out), None, "page 2 is read-only");
        assert_eq!(frames(&mut m, root, base + 0x3000, 0x1001, P | U, &mut out), None, "page 4 is not mapped");
        assert_eq!(frames(&mut m, root, base + 0x20_0000, 1, P | U, &mut out), None, "no tables there");
        assert_eq!(frames(&mut m, root, base, 0x2001, P | U, &mut out[..2]), None, "three pages, room for two");
        assert_eq!(frames(&mut m, root, base, 0, P | U, &mut out), None, "empty");
        assert_eq!(frames(&mut m, root, u64::MAX - 10, 20, P | U, &mut out), None, "wraps");
        map(&mut m, root, 0x80_0000, 0x90_0000 | W).unwrap();
        assert_eq!(frames(&mut m, root, 0x80_0000, 8, P | U, &mut out), None, "not a user page");
    }

    #[test]
    fn map_range_fills_tables() {
        let mut m = SimMem::new(100);
        let root = 0x1000;
        map(&mut m, root, 0x40_1000, 0x999000 | U).unwrap();
        let n = map_range(&mut m, root, 0x3F_F000, 0x100_0000, 1030, U | W).unwrap();
        assert_eq!(n, 1029, "the already mapped page is kept");
        assert_eq!(lookup(&mut m, root, 0x3F_F000).map(|e| e & ADDR), Some(0x100_0000));
        assert_eq!(lookup(&mut m, root, 0x40_1000).map(|e| e & ADDR), Some(0x999000));
        assert_eq!(lookup(&mut m, root, 0x40_2000).map(|e| e & ADDR), Some(0x100_3000));
        let last = 0x3F_F000 + 1029 * 4096;
        assert_eq!(lookup(&mut m, root, last).map(|e| e & ADDR), Some(0x100_0000 + 1029 * 4096));
        assert_eq!(lookup(&mut m, root, last + 4096), None);
        assert_eq!(map_range(&mut m, root, abi::layout::USER_END - 4096, 0, 2, U), Err(MapError::NotUser));
    }

    #[test]
    fn refuses_kernel_and_unaligned() {
        let mut m = SimMem::new(100);
        assert_eq!(map(&mut m, 0x1000, 0xffff_8000_0000_0000, 0x5000), Err(MapError::NotUser));
        assert_eq!(map(&mut m, 0x1000, 0x0, 0x5000), Err(MapError::NotUser));
        assert_eq!(map(&mut m, 0x1000, 0x40_0001, 0x5000), Err(MapError::NotUser));
        assert_eq!(map(&mut m, 0x1000, abi::layout::USER_END, 0x5000), Err(MapError::NotUser));
        // The canonical half's last page stays empty (a `syscall` there would return by
        // `sysretq` to a non-canonical address).
        assert_eq!(map(&mut m, 0x1000, abi::layout::USER_END - 4096, 0x5000), Err(MapError::NotUser));
        assert_eq!(map_range(&mut m, 0x1000, abi::layout::USER_END - 8192, 0, 2, U), Err(MapError::NotUser));
        assert_eq!(map(&mut m, 0x1000, abi::layout::USER_END - 8192, 0x5000), Ok(()));
    }

    #[test]
    fn out_of_memory_is_an_error() {
        let mut m = SimMem::new(2);
        assert_eq!(map(&mut m, 0x1000, 0x40_0000, 0x5000), Err(MapError::NoMemory));
    }

    #[test]
    fn destroy_visits_every_leaf_and_frees_every_table() {
        let mut m = SimMem::new(10_000);
        let root = 0x1000;
        let mut want = HashSet::new();
        let mut seed = 5u64;
        for _ in 0..500 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(3);
            let va = ((seed >> 16) % (abi::layout::USER_END / 4096 - 1) + 1) * 4096;
            if map(&mut m, root, va, 0x7000 | U).is_ok() {
                want.insert(va);
            }
        }
        let mut walked = HashSet::new();
        for_each_leaf(&mut m, root, |va, _| {
            walked.insert(va);
        });
        assert_eq!(walked, want);
        // Range walks see exactly the pages inside the range.
        for (lo, hi) in [
            (0x1000u64, 0x2000u64),
            (1 << 39, 3 << 39),
            (0x7f00_0000_0000, 0x7fff_ffff_f000),
            (12345 << 12, 99999 << 30),
        ] {
            let mut got = HashSet::new();
            for_each_leaf_in(&mut m, root, lo, hi, |va, _| {
                got.insert(va);
            });
            let expect: HashSet<u64> = want.iter().copied().filter(|v| *v >= lo && *v < hi).collect();
            assert_eq!(got, expect, "range {lo:#x}..{hi:#x}");
            // A cursor over the range, removing as it goes, sees the same pages in order.
            let mut sorted: std::vec::Vec<u64> = expect.iter().copied().collect();
            sorted.sort();
            let mut cursor = std::vec::Vec::new();
            let mut at = lo;
            while let Some((va, _)) = next_leaf_in(&mut m, root, at, hi) {
                assert!(va >= at && va < hi);
                cursor.push(va);
                at = va + 4096;
            }
            assert_eq!(cursor, sorted, "cursor over {lo:#x}..{hi:#x}");
        }
        assert_eq!(next_leaf_in(&mut m, root, 5 << 12, 5 << 12), None, "an empty range");
        let mut seen = HashSet::new();
        destroy_user(&mut m, root, |va, _| {
            assert!(seen.insert(va));
        });
        assert_eq!(seen, want);
        assert_eq!(m.pages.len(), 1, "only the root is left");
    }
}
