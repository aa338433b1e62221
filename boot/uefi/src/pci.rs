//! 64-bit memory BARs the firmware placed above 4 GiB, moved into the 32-bit window
//! Scion's drivers reach (sigma0's device window, `abi::layout::MMIO_START` up to the
//! IOAPIC): OVMF, and PCs with "above 4G decoding", put them high, where no driver of
//! Scion's can map them yet. Only devices on bus 0 (their window is the host bridge's);
//! a BAR that finds no free, aligned room in the window stays where it is. Sized and
//! planned while boot services still run (the firmware's console can say what moves),
//! written after they end, when the devices are the operating system's.

use alloc::vec::Vec;
use core::arch::asm;

/// The window: sigma0's device window.
const WINDOW: (u64, u64) = (0xc000_0000, 0xfec0_0000);

fn outl(port: u16, v: u32) {
    // SAFETY: the PCI configuration ports (0xcf8/0xcfc), which the firmware leaves
    // usable; writing an address selects a register and has no other effect.
    unsafe { asm!("out dx, eax", in("dx") port, in("eax") v, options(nostack, nomem)) };
}

fn inl(port: u16) -> u32 {
    let v: u32;
    // SAFETY: as for outl; reading the data port reads the selected register.
    unsafe { asm!("in eax, dx", in("dx") port, out("eax") v, options(nostack, nomem)) };
    v
}

fn addr(dev: u8, func: u8, off: u8) -> u32 {
    0x8000_0000 | (dev as u32) << 11 | (func as u32) << 8 | (off as u32 & 0xfc)
}

fn read(dev: u8, func: u8, off: u8) -> u32 {
    outl(0xcf8, addr(dev, func, off));
    inl(0xcfc)
}

fn write(dev: u8, func: u8, off: u8, v: u32) {
    outl(0xcf8, addr(dev, func, off));
    outl(0xcfc, v);
}

/// One BAR to move: device, function, BAR index, its size and its new address.
#[derive(Clone, Copy)]
pub struct Move {
    pub dev: u8,
    pub func: u8,
    pub bar: u8,
    pub size: u64,
    pub from: u64,
    pub to: u64,
}

/// Every memory BAR of bus 0's functions with a type-0 header: (dev, func, bar, address,
/// is 64-bit).
fn bars() -> Vec<(u8, u8, u8, u64, bool)> {
    let mut out = Vec::new();
    for dev in 0..32u8 {
        let funcs = if read(dev, 0, 0x0c) >> 16 & 0x80 != 0 { 8 } else { 1 };
        for func in 0..funcs {
            if read(dev, func, 0) & 0xffff == 0xffff || read(dev, func, 0x0c) >> 16 & 0x7f != 0 {
                continue;
            }
            let mut i = 0u8;
            while i < 6 {
                let lo = read(dev, func, 0x10 + 4 * i);
                let wide = lo & 0x7 == 0x4;
                if lo & 1 == 0 {
                    let hi = if wide && i < 5 { read(dev, func, 0x14 + 4 * i) } else { 0 };
                    let a = (lo as u64 & !0xf) | (hi as u64) << 32;
                    if a != 0 {
                        out.push((dev, func, i, a, wide));
                    }
                }
                i += if wide { 2 } else { 1 };
            }
        }
    }
    out
}

/// The size of a 64-bit BAR (its decoding off while it is sized).
fn size64(dev: u8, func: u8, bar: u8) -> u64 {
    let cmd = read(dev, func, 0x04);
    write(dev, func, 0x04, cmd & !0x2);
    let (lo, hi) = (read(dev, func, 0x10 + 4 * bar), read(dev, func, 0x14 + 4 * bar));
    write(dev, func, 0x10 + 4 * bar, 0xffff_ffff);
    write(dev, func, 0x14 + 4 * bar, 0xffff_ffff);
    let mask = (read(dev, func, 0x10 + 4 * bar) as u64 & !0xf) | (read(dev, func, 0x14 + 4 * bar) as u64) << 32;
    write(dev, func, 0x10 + 4 * bar, lo);
    write(dev, func, 0x14 + 4 * bar, hi);
    write(dev, func, 0x04, cmd);
    (!mask).wrapping_add(1)
}

/// The memory windows of bus 0's bridges (type-1 headers): (start, end).
fn bridge_windows() -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for dev in 0..32u8 {
        let funcs = if read(dev, 0, 0x0c) >> 16 & 0x80 != 0 { 8 } else { 1 };
        for func in 0..funcs {
            if read(dev, func, 0) & 0xffff == 0xffff || read(dev, func, 0x0c) >> 16 & 0x7f != 1 {
                continue;
            }
            let m = read(dev, func, 0x20);
            let (base, limit) = (((m & 0xfff0) as u64) << 16, (((m >> 16) & 0xfff0) as u64) << 16 | 0xf_ffff);
            if base <= limit {
                out.push((base, limit + 1));
            }
            let p = read(dev, func, 0x24);
            let (hb, hl) = if p & 0xf == 1 { (read(dev, func, 0x28), read(dev, func, 0x2c)) } else { (0, 0) };
            let base = ((p & 0xfff0) as u64) << 16 | (hb as u64) << 32;
            let limit = (((p >> 16) & 0xfff0) as u64) << 16 | 0xf_ffff | (hl as u64) << 32;
            if base <= limit {
                out.push((base, limit + 1));
            }
        }
    }
    out
}

/// The moves that bring bus 0's 64-bit BARs above 4 GiB into the window, clear of what
/// `reserved` (the firmware's reserved and memory-mapped I/O ranges) holds.
pub fn plan(reserved: &[(u64, u64)]) -> Vec<Move> {
    let all = bars();
    // What the window already holds: every memory BAR below 4 GiB, sized; the bridges'
    // windows; the firmware's reservations.
    let mut used: Vec<(u64, u64)> = all
        .iter()
        .filter(|b| b.3 < 1 << 32)
        .map(|b| {
            let size = if b.4 { size64(b.0, b.1, b.2) } else { size32(b.0, b.1, b.2) };
            (b.3, b.3.saturating_add(size.max(0x1000)))
        })
        .collect();
    used.extend(bridge_windows());
    used.extend_from_slice(reserved);
    let mut moves = Vec::new();
    for &(dev, func, bar, a, _) in all.iter().filter(|b| b.4 && b.3 >= 1 << 32) {
        let size = size64(dev, func, bar);
        let Some(at) = bootinfo::place_bar(&used, size, WINDOW) else { continue };
        used.push((at, at + size));
        moves.push(Move { dev, func, bar, size, from: a, to: at });
    }
    moves
}

/// The size of a 32-bit memory BAR (its decoding off while it is sized).
fn size32(dev: u8, func: u8, bar: u8) -> u64 {
    let cmd = read(dev, func, 0x04);
    write(dev, func, 0x04, cmd & !0x2);
    let lo = read(dev, func, 0x10 + 4 * bar);
    write(dev, func, 0x10 + 4 * bar, 0xffff_ffff);
    let mask = read(dev, func, 0x10 + 4 * bar) & !0xf;
    write(dev, func, 0x10 + 4 * bar, lo);
    write(dev, func, 0x04, cmd);
    (!mask).wrapping_add(1) as u64
}

/// Write the moves (after boot services: the devices are ours).
pub fn apply(moves: &[Move]) {
    for m in moves {
        let cmd = read(m.dev, m.func, 0x04);
        write(m.dev, m.func, 0x04, cmd & !0x2);
        write(m.dev, m.func, 0x10 + 4 * m.bar, (m.to as u32) | (read(m.dev, m.func, 0x10 + 4 * m.bar) & 0xf));
        write(m.dev, m.func, 0x14 + 4 * m.bar, (m.to >> 32) as u32);
        write(m.dev, m.func, 0x04, cmd);
    }
}
