extern crate std;
use super::*;
use std::vec;
use std::vec::Vec;

fn fb() -> Framebuffer {
    Framebuffer {
        addr: 0x8000_0000,
        len: 1280 * 800 * 4,
        width: 1280,
        height: 800,
        stride: 1280,
        format: PixelFormat::Bgrx,
    }
}

fn block() -> Vec<u8> {
    let regions = [
        Region { addr: 0, len: 0xa0000, kind: RAM },
        Region { addr: 0x100000, len: 0x7f00000, kind: RAM },
        Region { addr: 0x7ff0000, len: 0x10000, kind: ACPI_RECLAIM },
    ];
    let info = Info {
        rsdp: 0x7fbfa014,
        bootfs_addr: 0x200_0000,
        bootfs_len: 12345,
        cmdline: b"timer=pit",
        memmap: &[],
        framebuffer: Some(fb()),
    };
    let mut out = vec![0u8; 1024];
    let n = write(&mut out, &info, &regions).unwrap();
    assert_eq!(n, len_for(3, 9));
    out.truncate(n);
    out
}

#[test]
fn a_written_block_reads_back() {
    let b = block();
    assert!(is_bootinfo(&b));
    assert_eq!(block_len(&b[..HEADER_LEN]), Ok(b.len()));
    let i = parse(&b).unwrap();
    assert_eq!(i.rsdp, 0x7fbfa014);
    assert_eq!((i.bootfs_addr, i.bootfs_len), (0x200_0000, 12345));
    assert_eq!(i.cmdline, b"timer=pit");
    assert_eq!(i.framebuffer, Some(fb()));
    let r: Vec<Region> = i.regions().collect();
    assert_eq!(r.len(), 3);
    assert_eq!(r[1], Region { addr: 0x100000, len: 0x7f00000, kind: RAM });
    assert_eq!(r[2].kind, ACPI_RECLAIM);
}

#[test]
fn no_framebuffer_and_no_tables() {
    let info = Info { rsdp: 0, bootfs_addr: 0, bootfs_len: 0, cmdline: b"", memmap: &[], framebuffer: None };
    let mut out = [0u8; HEADER_LEN];
    assert_eq!(write(&mut out, &info, &[]), Ok(HEADER_LEN));
    let i = parse(&out).unwrap();
    assert_eq!(i.framebuffer, None);
    assert_eq!(i.regions().count(), 0);
    assert!(i.cmdline.is_empty());
    // One byte short of what it needs.
    assert_eq!(write(&mut out[..HEADER_LEN - 1], &info, &[]), Err(Error::TooShort));
}

#[test]
fn damaged_blocks_are_refused() {
    let good = block();
    let set = |at: usize, v: &[u8]| {
        let mut b = good.clone();
        b[at..at + v.len()].copy_from_slice(v);
        b
    };
    assert_eq!(parse(&good[..10]), Err(Error::TooShort));
    assert_eq!(parse(&good[..good.len() - 1]), Err(Error::TooShort));
    assert_eq!(parse(&set(0, b"SCIONBI2")), Err(Error::BadMagic));
    assert_eq!(parse(&set(8, &2u32.to_le_bytes())), Err(Error::BadVersion));
    assert_eq!(parse(&set(12, &10u32.to_le_bytes())), Err(Error::TooShort));
    // Tables outside the block, or pointing into the header.
    assert_eq!(parse(&set(52, &4u32.to_le_bytes())), Err(Error::TableOutside));
    assert_eq!(parse(&set(48, &8u32.to_le_bytes())), Err(Error::TableOutside));
    assert_eq!(parse(&set(40, &u32::MAX.to_le_bytes())), Err(Error::TableOutside));
    assert_eq!(parse(&set(52, &u32::MAX.to_le_bytes())), Err(Error::TooMany));
    assert_eq!(parse(&set(44, &(MAX_CMDLINE as u32 + 1).to_le_bytes())), Err(Error::TooMany));
    // Framebuffers that do not add up.
    assert_eq!(parse(&set(84, &7u32.to_le_bytes())), Err(Error::BadFramebuffer));
    assert_eq!(parse(&set(80, &100u32.to_le_bytes())), Err(Error::BadFramebuffer));
    assert_eq!(parse(&set(76, &801u32.to_le_bytes())), Err(Error::BadFramebuffer));
    assert_eq!(parse(&set(72, &0u32.to_le_bytes())), Err(Error::BadFramebuffer));
    assert_eq!(parse(&set(56, &u64::MAX.to_le_bytes())), Err(Error::BadFramebuffer));
}

#[test]
fn random_bytes_never_panic() {
    let mut x = 0x1234_5678_9abc_def0u64;
    let good = block();
    for _ in 0..20_000 {
        let mut b = good.clone();
        for _ in 0..4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = (x as usize) % b.len();
            b[at] = (x >> 32) as u8;
        }
        if let Ok(i) = parse(&b) {
            let _ = i.regions().count();
        }
        let _ = kernel_image(&b);
    }
}

#[test]
fn regions_merge_when_they_touch() {
    let mut map = [Region { addr: 0, len: 0, kind: 0 }; 4];
    let mut n = 0;
    for r in [
        Region { addr: 0, len: 0x1000, kind: RAM },
        Region { addr: 0x1000, len: 0x1000, kind: RAM },
        Region { addr: 0x2000, len: 0, kind: RESERVED },
        Region { addr: 0x2000, len: 0x1000, kind: RESERVED },
        Region { addr: 0x4000, len: 0x1000, kind: RESERVED },
        Region { addr: 0x5000, len: 0x1000, kind: RAM },
    ] {
        n = push_region(&mut map, n, r).unwrap();
    }
    assert_eq!(n, 4);
    assert_eq!(map[1], Region { addr: 0x2000, len: 0x1000, kind: RESERVED });
    assert_eq!(map[0], Region { addr: 0, len: 0x2000, kind: RAM });
    assert_eq!(push_region(&mut map, n, Region { addr: 0x9000, len: 1, kind: ACPI_NVS }), None);
}

/// A kernel-like ELF: two loadable segments and a note segment with the Xen note
/// and then (or not) the Scion entry note.
fn elf(with_entry: bool) -> Vec<u8> {
    let mut notes = Vec::new();
    let note = |v: &mut Vec<u8>, name: &[u8], kind: u32, desc: &[u8]| {
        v.extend_from_slice(&(name.len() as u32).to_le_bytes());
        v.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        v.extend_from_slice(&kind.to_le_bytes());
        v.extend_from_slice(name);
        while !v.len().is_multiple_of(4) {
            v.push(0);
        }
        v.extend_from_slice(desc);
        while !v.len().is_multiple_of(4) {
            v.push(0);
        }
    };
    note(&mut notes, b"Xen\0", 18, &0x100000u64.to_le_bytes());
    if with_entry {
        note(&mut notes, NOTE_NAME, NOTE_ENTRY64, &0x100040u64.to_le_bytes());
    }
    let phoff = 64u64;
    let data_at = phoff + 3 * 56;
    let mut b = vec![0u8; data_at as usize];
    b[0..4].copy_from_slice(b"\x7fELF");
    b[4] = 2;
    b[5] = 1;
    b[16..18].copy_from_slice(&2u16.to_le_bytes());
    b[18..20].copy_from_slice(&62u16.to_le_bytes());
    b[32..40].copy_from_slice(&phoff.to_le_bytes());
    b[54..56].copy_from_slice(&56u16.to_le_bytes());
    b[56..58].copy_from_slice(&3u16.to_le_bytes());
    let ph = |b: &mut Vec<u8>, i: usize, kind: u32, off: u64, paddr: u64, filesz: u64, memsz: u64| {
        let o = 64 + i * 56;
        b[o..o + 4].copy_from_slice(&kind.to_le_bytes());
        b[o + 8..o + 16].copy_from_slice(&off.to_le_bytes());
        b[o + 16..o + 24].copy_from_slice(&(paddr | 0xffff_ffff_8000_0000).to_le_bytes());
        b[o + 24..o + 32].copy_from_slice(&paddr.to_le_bytes());
        b[o + 32..o + 40].copy_from_slice(&filesz.to_le_bytes());
        b[o + 40..o + 48].copy_from_slice(&memsz.to_le_bytes());
    };
    ph(&mut b, 0, 1, data_at, 0x100000, 16, 0x2000);
    ph(&mut b, 1, 4, data_at + 16, 0, notes.len() as u64, notes.len() as u64);
    ph(&mut b, 2, 1, data_at, 0x200000, 0, 0x1000);
    b.extend_from_slice(&[0xcc; 16]);
    b.extend_from_slice(&notes);
    b
}

#[test]
fn the_kernel_image_names_its_segments_and_entry() {
    let k = kernel_image(&elf(true)).unwrap();
    assert_eq!(k.entry64, 0x100040);
    assert_eq!(k.loads().len(), 2);
    assert_eq!(k.loads()[0], Load { paddr: 0x100000, offset: 64 + 3 * 56, filesz: 16, memsz: 0x2000 });
    assert_eq!(k.loads()[1].paddr, 0x200000);
    assert_eq!(kernel_image(&elf(false)), Err(Error::NoEntry64));
    let mut cut = elf(true);
    cut.truncate(100);
    assert_eq!(kernel_image(&cut), Err(Error::BadElf));
    let mut big = elf(true);
    big[64 + 32..64 + 40].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(kernel_image(&big), Err(Error::BadElf));
}

#[test]
fn bars_are_placed_clear_of_the_others() {
    let w = (0xc000_0000, 0xfec0_0000);
    assert_eq!(place_bar(&[], 0x4000, w), Some(0xc000_0000));
    // The framebuffer (16 MiB) and a 4 KiB BAR after it: the next 16 KiB boundary.
    let used = [(0xc000_0000, 0xc100_0000), (0xc101_2000, 0xc101_3000), (0xc100_0000, 0xc100_1000)];
    assert_eq!(place_bar(&used, 0x4000, w), Some(0xc100_4000));
    assert_eq!(place_bar(&used, 0x100_0000, w), Some(0xc200_0000));
    // Too big for what is left, not a power of two, nothing.
    assert_eq!(place_bar(&used, 0x4000_0000, w), None);
    assert_eq!(place_bar(&used, 0x3000, w), None);
    assert_eq!(place_bar(&used, 0, w), None);
    assert_eq!(place_bar(&[(0, u64::MAX)], 0x1000, w), None);
    assert_eq!(place_bar(&[], 0x1000, (u64::MAX - 0x800, u64::MAX)), None);
}
