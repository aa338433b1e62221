//! The CMOS real-time clock (ports 0x70–0x71, granted by the manifest): the wall-clock
//! date and time, for a program that must say what time it is (httpd's `Date`).

use core::arch::asm;

fn outb(port: u16, v: u8) {
    // SAFETY: called only after root granted the ports (`init`); the access touches
    // nothing of this program's memory.
    unsafe { asm!("out dx, al", in("dx") port, in("al") v, options(nostack, nomem)) };
}

fn inb(port: u16) -> u8 {
    let v: u8;
    // SAFETY: as for outb.
    unsafe { asm!("in al, dx", in("dx") port, out("al") v, options(nostack, nomem)) };
    v
}

fn reg(r: u8) -> u8 {
    // Bit 7 of the index port keeps NMIs enabled as they were (0: enabled).
    outb(0x70, r & 0x7f);
    inb(0x71)
}

/// Ask root for the clock's ports (Err: the manifest grants none; do not call `read`).
pub fn init() -> Result<(), abi::Error> {
    crate::env::io(0x70, 1)
}

/// (year, month, day, hour, minute, second) in UTC as the clock keeps it (QEMU's is
/// UTC), read twice until two reads agree (an update may run between the registers).
pub fn read() -> Option<(i64, u32, u32, u32, u32, u32)> {
    let raw = || {
        let mut spins = 0;
        while reg(0x0a) & 0x80 != 0 {
            spins += 1;
            if spins > 100_000 {
                return None;
            }
        }
        Some([reg(0x00), reg(0x02), reg(0x04), reg(0x07), reg(0x08), reg(0x09), reg(0x32)])
    };
    let mut a = raw()?;
    for _ in 0..8 {
        let b = raw()?;
        if a == b {
            break;
        }
        a = b;
    }
    let status_b = reg(0x0b);
    let bin = |v: u8| if status_b & 0x04 != 0 { v as u32 } else { (v as u32 & 0x0f) + (v as u32 >> 4) * 10 };
    let (sec, min) = (bin(a[0]), bin(a[1]));
    let pm = a[2] & 0x80 != 0;
    let mut hour = bin(a[2] & 0x7f);
    if status_b & 0x02 == 0 {
        // A 12-hour clock.
        hour = (hour % 12) + if pm { 12 } else { 0 };
    }
    let (day, month, year) = (bin(a[3]), bin(a[4]), bin(a[5]));
    let century = match bin(a[6]) {
        c @ 19..=99 => c,
        _ => 20,
    };
    let ok = sec < 60 && min < 60 && hour < 24 && (1..=31).contains(&day) && (1..=12).contains(&month);
    ok.then_some((century as i64 * 100 + year as i64, month, day, hour, min, sec))
}
