use super::*;

/// A function's configuration space: 4 KiB, with BARs that answer a sizing write as a
/// device does (the bits below the size read back as zero).
struct Model {
    space: [u32; 1024],
    /// Size of each BAR (0 = not implemented); BAR i's low flag bits in `space`.
    sizes: [u64; 6],
}

impl Model {
    fn new() -> Model {
        let mut m = Model { space: [0; 1024], sizes: [0; 6] };
        m.space[0] = 0x0010_1b36; // vendor, device
        m
    }
    fn set(&mut self, off: u16, v: u32) {
        self.space[off as usize / 4] = v;
    }
    /// Add a capability `id` at `at` with its next pointer `next`, body words after.
    fn cap(&mut self, at: u16, id: u8, next: u16, body: u32, more: &[u32]) {
        self.set(at, body << 16 | (next as u32) << 8 | id as u32);
        for (i, w) in more.iter().enumerate() {
            self.set(at + 4 + 4 * i as u16, *w);
        }
        self.space[1] |= 1 << 20; // status: capability list
    }
    fn first(&mut self, at: u16) {
        self.set(0x34, at as u32);
        self.space[1] |= 1 << 20;
    }
}

impl Config for Model {
    fn read32(&self, off: u16) -> u32 {
        self.space[off as usize / 4]
    }
    fn write32(&mut self, off: u16, v: u32) {
        let i = off as usize / 4;
        if (0x10..0x28).contains(&off) {
            let b = (off as usize - 0x10) / 4;
            // The upper half of a 64-bit BAR sizes with the one below it.
            let (size, upper) = if self.sizes[b] == 0 && b > 0 && (self.space[i - 1] >> 1) & 3 == 2 {
                (self.sizes[b - 1], true)
            } else {
                (self.sizes[b], false)
            };
            if size == 0 {
                return;
            }
            let flags = if upper { 0 } else { self.space[i] & if self.space[i] & 1 == 1 { 0x3 } else { 0xf } };
            let mask = !(size - 1);
            let m = if upper { (mask >> 32) as u32 } else { mask as u32 };
            self.space[i] = (v & m & if upper { !0 } else { !0xf }) | flags;
            return;
        }
        if off == 0x04 {
            // Status bits are cleared by writing ones (none here); a zero changes nothing.
            self.space[i] = (self.space[i] & 0xffff_0000 & !(v & 0xffff_0000)) | (v & 0xffff);
            return;
        }
        self.space[i] = v;
    }
}

#[test]
fn mcfg_regions_and_addresses() {
    let mut t = [0u8; 60];
    t[..4].copy_from_slice(b"MCFG");
    t[4..8].copy_from_slice(&60u32.to_le_bytes());
    t[44..52].copy_from_slice(&0xb000_0000u64.to_le_bytes());
    t[54] = 0;
    t[55] = 0xff;
    let r: alloc_free::Vec1 = mcfg::regions(&t).unwrap().collect();
    let r = r.0.unwrap();
    assert_eq!(r, mcfg::Region { base: 0xb000_0000, segment: 0, bus_start: 0, bus_end: 255 });
    assert_eq!(r.address(0, 3, 0), Some(0xb000_0000 + (3 << 15)));
    assert_eq!(r.address(1, 0, 2), Some(0xb000_0000 + (1 << 20) + (2 << 12)));
    assert_eq!(r.address(0, 32, 0), None);
    assert_eq!(r.bytes(), 256 << 20);
    // A region of another segment is not reached.
    let other = mcfg::Region { segment: 1, ..r };
    assert_eq!(other.address(0, 0, 0), None);
    // A region for buses 0x10..=0x1f starts at bus 0x10.
    let high = mcfg::Region { bus_start: 0x10, bus_end: 0x1f, ..r };
    assert_eq!(high.address(0x11, 0, 0), Some(0xb000_0000 + (1 << 20)));
    assert_eq!(high.address(0x0f, 0, 0), None);
}

/// A tiny collector so the test needs no allocator: the one region of a table.
mod alloc_free {
    pub struct Vec1(pub Option<super::mcfg::Region>);
    impl FromIterator<super::mcfg::Region> for Vec1 {
        fn from_iter<I: IntoIterator<Item = super::mcfg::Region>>(it: I) -> Self {
            let mut i = it.into_iter();
            let first = i.next();
            assert!(i.next().is_none());
            Vec1(first)
        }
    }
}

#[test]
fn mcfg_bad_tables_are_errors() {
    let mut t = [0u8; 60];
    assert!(mcfg::regions(&t).is_err()); // no signature
    t[..4].copy_from_slice(b"MCFG");
    t[4..8].copy_from_slice(&100u32.to_le_bytes()); // longer than the bytes
    assert_eq!(mcfg::regions(&t).err(), Some(mcfg::Error::BadHeader));
    t[4..8].copy_from_slice(&50u32.to_le_bytes()); // a broken entry
    assert_eq!(mcfg::regions(&t).err(), Some(mcfg::Error::BadLength));
    t[4..8].copy_from_slice(&44u32.to_le_bytes()); // no entries at all
    assert_eq!(mcfg::regions(&t).unwrap().count(), 0);
    assert!(mcfg::regions(&t[..20]).is_err());
}

#[test]
fn capability_walk() {
    let mut m = Model::new();
    assert_eq!(capabilities(&m).count(), 0); // no list
    m.first(0x40);
    m.cap(0x40, cap_id::PCIE, 0x70, 0, &[]);
    m.cap(0x70, cap_id::MSIX, 0x50, 0, &[]);
    m.cap(0x50, cap_id::MSI, 0, 0, &[]);
    let caps: [(u8, u16); 3] = {
        let mut c = capabilities(&m);
        [c.next().unwrap(), c.next().unwrap(), c.next().unwrap()]
    };
    assert_eq!(caps, [(cap_id::PCIE, 0x40), (cap_id::MSIX, 0x70), (cap_id::MSI, 0x50)]);
    assert_eq!(find(&m, cap_id::MSI), Ok(Some(0x50)));
    assert_eq!(find(&m, 0x09), Ok(None));
}

#[test]
fn a_looping_or_stray_list_ends() {
    let mut m = Model::new();
    m.first(0x40);
    m.cap(0x40, 0x01, 0x44, 0, &[]);
    m.cap(0x44, 0x01, 0x40, 0, &[]); // a loop
    assert_eq!(capabilities(&m).count(), 48);
    assert_eq!(find(&m, cap_id::MSIX), Err(Error::BadCapabilityList));
    let mut m = Model::new();
    m.first(0x40);
    m.cap(0x40, 0x01, 0x10, 0, &[]); // into the header
    let mut c = capabilities(&m);
    assert_eq!(c.next(), Some((0x01, 0x40)));
    assert_eq!(c.next(), None);
    assert!(c.broken());
}

#[test]
fn bars_are_decoded_and_sized() {
    let mut m = Model::new();
    m.space[1] |= 7;
    m.set(0x10, 0xfebf_0000 | 0x4 | 0x8); // 64-bit prefetchable memory, 16 KiB
    m.set(0x14, 0x0000_0001);
    m.sizes[0] = 16 << 10;
    m.set(0x18, 0xc001); // I/O, 32 ports
    m.sizes[2] = 32;
    m.set(0x1c, 0xfeb0_0000); // 32-bit memory, 4 KiB
    m.sizes[3] = 4096;
    assert_eq!(bar(&mut m, 0), Bar::Mem { base: 0x1_febf_0000, size: 16 << 10, wide: true, prefetchable: true });
    assert_eq!(bar(&mut m, 2), Bar::Io { base: 0xc000, size: 32 });
    assert_eq!(bar(&mut m, 3), Bar::Mem { base: 0xfeb0_0000, size: 4096, wide: false, prefetchable: false });
    assert_eq!(bar(&mut m, 4), Bar::None);
    assert_eq!(bar(&mut m, 9), Bar::None);
    // The registers hold what they held, decoding is back on.
    assert_eq!(m.read32(0x10), 0xfebf_000c);
    assert_eq!(m.read32(0x14), 1);
    assert_eq!(m.read32(0x04) & 7, 7);
}

fn msix_model(entries: u16, table: u32, pba: u32) -> Model {
    let mut m = Model::new();
    m.first(0x40);
    m.cap(0x40, cap_id::MSIX, 0, (entries - 1) as u32, &[table, pba]);
    m
}

#[test]
fn msix_capability_and_table_layout() {
    let m = msix_model(65, 0x2000, 0x3000);
    let x = Msix::of(&m).unwrap().unwrap();
    assert_eq!(x, Msix { at: 0x40, entries: 65, table_bar: 0, table_offset: 0x2000, pba_bar: 0, pba_offset: 0x3000 });
    let bar = Bar::Mem { base: 0xfe00_0000, size: 0x4000, wide: false, prefetchable: false };
    let bars = [bar, Bar::None, Bar::None, Bar::None, Bar::None, Bar::None];
    assert_eq!(x.check(&bars), Ok(0x2000));
    assert_eq!(x.entry_offset(0), Ok(0x2000));
    assert_eq!(x.entry_offset(64), Ok(0x2000 + 64 * 16));
    assert_eq!(x.entry_offset(65), Err(Error::NoSuchEntry));
}

#[test]
fn an_msix_table_in_a_too_small_bar_is_an_error() {
    // 64 entries (1 KiB) at 0x800 in a 2 KiB BAR: 1 KiB past its end.
    let m = msix_model(64, 0x800, 0x400);
    let x = Msix::of(&m).unwrap().unwrap();
    let small = Bar::Mem { base: 0xfe00_0000, size: 0x800, wide: false, prefetchable: false };
    let bars = [small, Bar::None, Bar::None, Bar::None, Bar::None, Bar::None];
    assert_eq!(x.check(&bars), Err(Error::MsixTableOutsideBar));
    // The table in an I/O BAR, or in none.
    let m = msix_model(4, 0x1, 0x1);
    let x = Msix::of(&m).unwrap().unwrap();
    let io = [Bar::None, Bar::Io { base: 0xc000, size: 64 }, Bar::None, Bar::None, Bar::None, Bar::None];
    assert_eq!(x.check(&io), Err(Error::MsixBadBar));
    // The pending bits past the end.
    let m = msix_model(65, 0x0, 0xff8);
    let x = Msix::of(&m).unwrap().unwrap();
    let page = Bar::Mem { base: 0, size: 0x1000, wide: false, prefetchable: false };
    assert_eq!(
        x.check(&[page, Bar::None, Bar::None, Bar::None, Bar::None, Bar::None]),
        Err(Error::MsixTableOutsideBar)
    );
}

#[test]
fn msix_enable_turns_intx_off() {
    let mut m = msix_model(4, 0, 0x800);
    m.space[1] |= 0x0006;
    m.space[0x40 / 4] |= MSIX_FUNCTION_MASK;
    let x = Msix::of(&m).unwrap().unwrap();
    assert!(!x.enabled(&m));
    x.enable(&mut m);
    assert!(x.enabled(&m));
    assert_eq!(m.read32(0x40) & MSIX_FUNCTION_MASK, 0);
    assert_eq!(m.read32(0x04) as u16, 0x0006 | COMMAND_INTX_DISABLE);
    assert_ne!(m.read32(0x04) & 1 << 20, 0, "status untouched");
}

#[test]
fn msi_is_programmed_with_one_message() {
    // 64-bit, maskable.
    let mut m = Model::new();
    m.first(0x50);
    m.cap(0x50, cap_id::MSI, 0, 1 << 7 | 1 << 8 | 3 << 1, &[0, 0, 0, 1, 0]);
    let x = Msi::of(&m).unwrap().unwrap();
    assert_eq!(x, Msi { at: 0x50, wide: true, maskable: true });
    assert_eq!(x.bytes(), 24);
    let (addr, data) = message(1, 0x51);
    assert_eq!((addr, data), (0xFEE0_1000, 0x51));
    x.program(&mut m, addr, data);
    assert_eq!(m.read32(0x54), 0xFEE0_1000);
    assert_eq!(m.read32(0x58), 0);
    assert_eq!(m.read32(0x5c) & 0xffff, 0x51);
    assert_eq!(m.read32(0x60), 0, "unmasked");
    assert_ne!(m.read32(0x50) & MSI_ENABLE, 0);
    assert_eq!((m.read32(0x50) >> 20) & 7, 0, "one message");
    assert!(x.set_masked(&mut m, true));
    assert_eq!(m.read32(0x60), 1);
    // 32-bit, not maskable: data right after the address.
    let mut m = Model::new();
    m.first(0x50);
    m.cap(0x50, cap_id::MSI, 0, 0, &[0, 0]);
    let x = Msi::of(&m).unwrap().unwrap();
    assert_eq!(x.bytes(), 12);
    x.program(&mut m, 0xFEE0_0000, 0x60);
    assert_eq!(m.read32(0x58) & 0xffff, 0x60);
    assert!(!x.set_masked(&mut m, true));
}

#[test]
fn what_a_driver_may_write() {
    let protected = [(0x40, 12), (0x70, 24)];
    // Command: only the driver's bits change; the rest stay, status is written as 0.
    assert_eq!(may_write(0x04, 0xffff_ffff, 0x0010_0100, &protected), Some(0x0100 | 0x0407));
    assert_eq!(may_write(0x04, 0x0000_0000, 0x0010_0107, &protected), Some(0x0100));
    // BARs, the ROM, the interrupt line, the capability pointer: never.
    for off in [0x00, 0x08, 0x0c, 0x10, 0x14, 0x24, 0x30, 0x34, 0x3c] {
        assert_eq!(may_write(off, 0, 0, &protected), None, "{off:#x}");
    }
    // Inside MSI or MSI-X: never; beside them: yes.
    for off in [0x40, 0x44, 0x48, 0x70, 0x84] {
        assert_eq!(may_write(off, 1, 0, &protected), None, "{off:#x}");
    }
    for off in [0x4c, 0x60, 0x88, 0x100, 0xffc] {
        assert_eq!(may_write(off, 1, 0, &protected), Some(1), "{off:#x}");
    }
    // Unaligned or outside the 4 KiB.
    assert_eq!(may_write(0x42, 1, 0, &[]), None);
    assert_eq!(may_write(0x1000, 1, 0, &[]), None);
}

#[test]
fn vectors_are_kept_per_device_entry() {
    let mut v = Vectors::<3>::new();
    let a = v.get(0x0018, 0).unwrap();
    let b = v.get(0x0018, 1).unwrap();
    assert_ne!(a, b);
    assert_eq!(v.get(0x0018, 0), Some(a), "the same entry again: the same number");
    let c = v.get(0x0020, 0).unwrap();
    assert_eq!(v.in_use(), 3);
    assert_eq!(v.get(0x0028, 0), None, "none left");
    assert_eq!(v.owner(c), Some((0x0020, 0)));
    assert_eq!(v.owner(7), None);
}

#[test]
fn bdf_ids() {
    let b = Bdf { bus: 2, dev: 3, func: 4 };
    assert_eq!(b.id(), 0x021c);
    assert_eq!(Bdf::from_id(0x021c), b);
}

mod vtd_tests {
    use crate::vtd::*;
    use std::collections::HashMap;

    /// Tables in a map: table address → its 512 entries.
    #[derive(Default)]
    struct Mem {
        tables: HashMap<u64, [u64; 512]>,
        next: u64,
        limit: usize,
    }

    impl Tables for Mem {
        fn alloc(&mut self) -> Option<u64> {
            if self.tables.len() >= self.limit {
                return None;
            }
            self.next += 0x1000;
            self.tables.insert(self.next, [0; 512]);
            Some(self.next)
        }
        fn read(&self, table: u64, i: usize) -> u64 {
            self.tables[&table][i]
        }
        fn write(&mut self, table: u64, i: usize, v: u64) {
            self.tables.get_mut(&table).unwrap()[i] = v;
        }
    }

    #[test]
    fn dmar_units() {
        let mut t = vec![0u8; 48 + 16 + 8 + 24];
        t[..4].copy_from_slice(b"DMAR");
        let len = t.len() as u32;
        t[4..8].copy_from_slice(&len.to_le_bytes());
        // A reserved-memory structure first (type 1), then a DRHD with one device scope.
        t[48..50].copy_from_slice(&1u16.to_le_bytes());
        t[50..52].copy_from_slice(&16u16.to_le_bytes());
        t[64..66].copy_from_slice(&0u16.to_le_bytes());
        t[66..68].copy_from_slice(&32u16.to_le_bytes());
        t[68] = 1;
        t[72..80].copy_from_slice(&0xfed9_0000u64.to_le_bytes());
        let us: Vec<Unit> = units(&t).unwrap().collect();
        assert_eq!(us, vec![Unit { base: 0xfed9_0000, segment: 0, include_all: true, scope: &t[80..96] }]);
        assert_eq!(us[0].scopes().count(), 0, "a zeroed scope entry ends the list");
        // Broken lengths end the walk; a wrong signature is no table.
        t[66..68].copy_from_slice(&200u16.to_le_bytes());
        assert_eq!(units(&t).unwrap().count(), 0);
        t[50..52].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(units(&t).unwrap().count(), 0);
        assert!(units(b"APIC").is_none());
    }

    /// A device scope: kind, enumeration id, start bus, path.
    type ScopeSpec<'a> = (u8, u8, u8, &'a [(u8, u8)]);

    /// A DRHD structure: flags, segment, base and scopes.
    fn drhd(flags: u8, segment: u16, base: u64, scopes: &[ScopeSpec]) -> Vec<u8> {
        let mut s = Vec::new();
        for (kind, id, bus, path) in scopes {
            s.extend_from_slice(&[*kind, 6 + 2 * path.len() as u8, 0, 0, *id, *bus]);
            for (d, f) in path.iter() {
                s.extend_from_slice(&[*d, *f]);
            }
        }
        let mut b = vec![0u8; 16];
        b[2..4].copy_from_slice(&(16 + s.len() as u16).to_le_bytes());
        b[4] = flags;
        b[6..8].copy_from_slice(&segment.to_le_bytes());
        b[8..16].copy_from_slice(&base.to_le_bytes());
        b.extend(s);
        b
    }

    fn dmar(structures: &[Vec<u8>]) -> Vec<u8> {
        let mut t = vec![0u8; 48];
        t[..4].copy_from_slice(b"DMAR");
        for s in structures {
            t.extend_from_slice(s);
        }
        let len = t.len() as u32;
        t[4..8].copy_from_slice(&len.to_le_bytes());
        t
    }

    #[test]
    fn several_units_each_for_the_devices_in_its_scope() {
        use crate::Bdf;
        let d = |bus, dev, func| Bdf { bus, dev, func };
        // A machine of four units: one for 00:02.0 and the device behind the bridge
        // 00:1d.0; one for the bridge 00:1c.0 and all below it; segment 0's
        // include-all unit (with the IOAPIC); segment 1's.
        let t = dmar(&[
            drhd(0, 0, 0xfed9_0000, &[(SCOPE_ENDPOINT, 0, 0, &[(2, 0)]), (SCOPE_ENDPOINT, 0, 0, &[(0x1d, 0), (0, 0)])]),
            drhd(0, 0, 0xfed9_1000, &[(SCOPE_BRIDGE, 0, 0, &[(0x1c, 0)])]),
            drhd(1, 0, 0xfed9_2000, &[(SCOPE_IOAPIC, 2, 0xf0, &[(0x1f, 0)])]),
            drhd(1, 1, 0xfed9_3000, &[]),
        ]);
        let us: Vec<Unit> = units(&t).unwrap().collect();
        assert_eq!(us.iter().map(|u| u.base).collect::<Vec<_>>(), [0xfed9_0000, 0xfed9_1000, 0xfed9_2000, 0xfed9_3000]);
        let scopes: Vec<Vec<Scope>> = us.iter().map(|u| u.scopes().collect()).collect();
        assert_eq!(scopes.iter().map(Vec::len).collect::<Vec<_>>(), [2, 1, 1, 0]);
        let io = scopes[2][0];
        assert_eq!(
            (io.kind, io.enumeration_id, io.start_bus, io.hops, io.path[0]),
            (SCOPE_IOAPIC, 2, 0xf0, 1, (0x1f, 0))
        );
        let buses = |b: Bdf| match (b.bus, b.dev, b.func) {
            (0, 0x1c, 0) => Some((2, 3)),
            (0, 0x1d, 0) => Some((5, 5)),
            _ => None,
        };
        let table: Vec<(u16, bool, &[Scope])> =
            us.iter().zip(&scopes).map(|(u, s)| (u.segment, u.include_all, s.as_slice())).collect();
        let of = |seg, b| unit_of(table.iter().copied(), seg, b, &buses);
        assert_eq!(of(0, d(0, 2, 0)), Some(0), "an endpoint listed");
        assert_eq!(of(0, d(5, 0, 0)), Some(0), "an endpoint behind a bridge");
        assert_eq!(of(0, d(5, 0, 1)), Some(2), "its neighbour is not listed: include-all");
        assert_eq!(of(0, d(0, 0x1c, 0)), Some(1), "the bridge itself");
        assert_eq!(of(0, d(2, 0, 0)), Some(1), "below the bridge");
        assert_eq!(of(0, d(3, 4, 0)), Some(1), "its subordinate bus");
        assert_eq!(of(0, d(4, 0, 0)), Some(2), "past it: include-all");
        assert_eq!(of(0, d(0, 0x1f, 0)), Some(2), "an IOAPIC scope names no PCI device");
        assert_eq!(of(1, d(0, 2, 0)), Some(3), "another segment's unit");
        assert_eq!(of(2, d(0, 2, 0)), None, "a segment with no unit");
        // Without an include-all unit, a device no scope lists is not remapped.
        let no_all: Vec<_> = table.iter().map(|&(s, _, sc)| (s, false, sc)).collect();
        assert_eq!(unit_of(no_all.iter().copied(), 0, d(4, 0, 0), &buses), None);
        assert_eq!(unit_of(no_all.iter().copied(), 0, d(2, 0, 0), &buses), Some(1));
        // A path through something that is not a bridge leads nowhere.
        assert_eq!(unit_of(table.iter().copied(), 0, d(5, 0, 0), &|_| None), Some(2));
    }

    #[test]
    fn broken_scopes_end_the_list() {
        let mut u = drhd(1, 0, 0xfed9_0000, &[(SCOPE_ENDPOINT, 0, 0, &[(2, 0)]), (SCOPE_BRIDGE, 0, 0, &[(3, 0)])]);
        let t = dmar(&[u.clone()]);
        assert_eq!(units(&t).unwrap().next().unwrap().scopes().count(), 2);
        // The second entry's length runs past the structure, then is odd, then too short.
        for bad in [40u8, 7, 4] {
            u[16 + 8 + 1] = bad;
            let t = dmar(&[u.clone()]);
            let s: Vec<Scope> = units(&t).unwrap().next().unwrap().scopes().collect();
            assert_eq!(s.len(), 1, "length {bad}");
        }
        // A path longer than SCOPE_PATH hops ends the list too.
        let long = [(1u8, 0u8); SCOPE_PATH + 1];
        let t = dmar(&[drhd(0, 0, 0x1000, &[(SCOPE_ENDPOINT, 0, 0, &long)])]);
        assert_eq!(units(&t).unwrap().next().unwrap().scopes().count(), 0);
    }

    #[test]
    fn interrupt_remapping_entries_and_messages() {
        // VT-d 9.10: P bit 0, TM bit 4, vector 23:16, xAPIC destination 47:40; SID 79:64,
        // SQ 81:80, SVT 83:82.
        let e = Irte { vector: 0x51, apic_id: 3, level: false, source: 0x0018 };
        assert_eq!(e.encode(), [1 | 0x51 << 16 | 3 << 40, 0x18 | 1 << 18]);
        assert_eq!(Irte::decode(e.encode()), Some(e));
        let l = Irte { level: true, ..e };
        assert_eq!(l.encode()[0] & 1 << 4, 1 << 4);
        assert_eq!(Irte::decode([0, 0]), None, "not present");
        assert_eq!(Irte::decode([1, 0x18]), None, "no source verification");
        // Remappable-format messages: format bit 4, handle 14:0 at 19:5, 15 at bit 2.
        assert_eq!(remappable_message(5), (0xFEE0_00B0, 0));
        assert_eq!(remappable_message(0x8001), (0xFEE0_0034, 0));
        for h in [0u16, 1, 24, 55, 255, 0x7fff, 0x8000, 0xffff] {
            let (a, d) = remappable_message(h);
            assert_eq!(message_handle(a, d), Some(h));
        }
        assert_eq!(message_handle(0xFEE0_0000 | 1 << 4 | 1 << 3 | 2 << 5, 3), Some(5), "a subhandle adds");
        let (a, d) = crate::message(1, 0x51);
        assert_eq!(message_handle(a, d), None, "the compatibility format names no entry");
        // IOAPIC redirection entries: format bit 48, handle at 63:49.
        assert_eq!(ioapic_remappable_high(4), 1 << 16 | 4 << 17);
        assert_eq!((((ioapic_remappable_high(0x7fff) as u64) << 32) >> 49) & 0x7fff, 0x7fff);
        // The table's register: 256 entries, S = 7; xAPIC mode (EIME, bit 11, clear).
        assert_eq!(irta(0x12_3000), 0x12_3007);
        assert_eq!(iqa(0x45_6000), 0x45_6000);
        assert!(interrupt_remapping(1 << 1 | 1 << 3));
        assert!(!interrupt_remapping(1 << 3), "no queue: the entry cache cannot be invalidated");
        let mut t = vec![0u8; 48];
        t[..4].copy_from_slice(b"DMAR");
        assert!(!dmar_intr_remap(&t));
        t[37] = 1;
        assert!(dmar_intr_remap(&t));
    }

    #[test]
    fn invalidation_descriptors() {
        assert_eq!(inv::CONTEXT_GLOBAL[0] & 0xf, 1);
        assert_eq!((inv::CONTEXT_GLOBAL[0] >> 4) & 3, 1, "global");
        assert_eq!(inv::IOTLB_GLOBAL[0] & 0xf, 2);
        assert_eq!((inv::IOTLB_GLOBAL[0] >> 4) & 3, 1, "global");
        assert_eq!(inv::IOTLB_GLOBAL[0] & 0xc0, 0xc0, "drain reads and writes");
        assert_eq!(inv::IEC_GLOBAL, [4, 0]);
        // Wait: type 5, status write (bit 5), data 63:32, address in the high word.
        assert_eq!(inv::wait(0x1234_5678, 7), [5 | 1 << 5 | 7 << 32, 0x1234_5678]);
        assert_eq!(inv::wait(0x1003, 1)[1], 0x1000);
    }

    #[test]
    fn registers_and_levels_from_the_capabilities() {
        // QEMU's: SAGAW 39-bit only, fault records at 0x220, IOTLB at 0xf0.
        let cap = 0x2 << 8 | 0x22 << 24 | 7 << 40;
        assert_eq!(levels(cap), Some(3));
        assert_eq!(levels(0x6 << 8), Some(4));
        assert_eq!(levels(0), None);
        assert_eq!(fault_records(cap), (0x220, 8));
        assert_eq!(iotlb_invalidate_offset(0xf << 8), 0xf0 + 8);
        assert!(passthrough(1 << 6));
        assert!(!passthrough(0));
    }

    #[test]
    fn entries() {
        assert_eq!(root_entry(0x5000), [0x5001, 0]);
        assert_eq!(context_entry(0x7000, 3, 4), [0x7001, 1 | 4 << 8]);
        assert_eq!(context_entry(0x7000, 4, 4)[1] & 7, 2);
        assert_eq!(context_passthrough(3, 1), [0b1001, 1 | 1 << 8]);
    }

    #[test]
    fn map_translate_unmap() {
        let mut m = Mem { limit: 16, ..Mem::default() };
        let root = m.alloc().unwrap();
        assert_eq!(map(&mut m, root, 3, 0x1234_5000, 0x1234_5000, READ | WRITE), Ok(()));
        assert_eq!(map(&mut m, root, 3, 0x1234_6000, 0x9000, READ), Ok(()));
        assert_eq!(m.tables.len(), 3, "one table per level, shared by neighbours");
        assert_eq!(translate(&m, root, 3, 0x1234_5000), Some((0x1234_5000, READ | WRITE)));
        assert_eq!(translate(&m, root, 3, 0x1234_6000), Some((0x9000, READ)));
        assert_eq!(translate(&m, root, 3, 0x1234_7000), None, "never mapped");
        assert_eq!(unmap(&mut m, root, 3, 0x1234_5000), Some(0x1234_5000));
        assert_eq!(translate(&m, root, 3, 0x1234_5000), None, "gone");
        assert_eq!(unmap(&mut m, root, 3, 0x1234_5000), None, "twice: nothing");
        assert_eq!(unmap(&mut m, root, 3, 0x7000_0000), None, "a path never made");
        let mut below = Vec::new();
        tables_below(&m, root, 3, &mut |t| below.push(t));
        assert_eq!(below.len(), 2);
    }

    #[test]
    fn bad_addresses_and_no_memory_are_errors() {
        let mut m = Mem { limit: 2, ..Mem::default() };
        let root = m.alloc().unwrap();
        assert_eq!(map(&mut m, root, 3, 1 << 39, 0, READ), Err(MapError::BadAddress), "past 39 bits");
        assert_eq!(map(&mut m, root, 3, 0x1001, 0x1000, READ), Err(MapError::BadAddress));
        assert_eq!(map(&mut m, root, 3, 0x1000, 0x1000, READ), Err(MapError::NoMemory));
        assert_eq!(map(&mut m, root, 4, 1 << 39, 0x1000, READ), Err(MapError::NoMemory), "48 bits with 4 levels");
    }

    #[test]
    fn fault_records_decode() {
        let lo = 0x0010_0000u64 | 0x123;
        let hi = 1u64 << 63 | 0x06u64 << 32 | 0x0008;
        assert_eq!(Fault::decode(lo, hi), Some(Fault { page: 0x10_0000, source: 0x0008, reason: 6, write: true }));
        let read = hi | 1 << 62;
        assert!(!Fault::decode(lo, read).unwrap().write);
        assert_eq!(Fault::decode(lo, 0), None, "no fault recorded");
        assert!(!Fault::decode(lo, hi).unwrap().is_interrupt());
        // An interrupt remapping fault: entry 24 not the requester's (reason 0x26).
        let ir = Fault::decode(24 << 48, 1 << 63 | 0x26 << 32 | 0x18).unwrap();
        assert!(ir.is_interrupt());
        assert_eq!((ir.entry(), ir.source), (24, 0x18));
    }
}
