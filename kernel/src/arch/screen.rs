//! The firmware's framebuffer as a text console (UEFI boots; `crates/fbcon` draws it):
//! the kernel's log goes there as well as to COM1, and so does what the console server
//! writes (`DEBUG_PUT` with `abi::DEBUG_PUT_SCREEN`), so a PC without a serial port shows
//! its boot and its shell. One writer (this module, under its own lock: the log is
//! written from any CPU, panics included), one cursor. What the log said before the
//! screen was found (the first lines, before the memory map is read) is kept and shown
//! first.

use crate::arch::boot::{direct_map_end, map_device_gib, phys_to_virt};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// Cells of the grid: up to 320 columns by 320 rows… whichever comes first.
const CELLS: usize = 64 * 1024;
/// Log bytes kept until the screen is up.
const EARLY: usize = 2048;

struct Screen {
    cells: [u8; CELLS],
    console: Option<fbcon::Console<'static>>,
    pixels: Option<&'static mut [u32]>,
    width: usize,
    height: usize,
    stride: usize,
    early: [u8; EARLY],
    early_len: usize,
}

struct Locked(UnsafeCell<Screen>, AtomicBool);

// SAFETY: the screen is reached only through `with`, which holds the flag (a spin lock)
// for the whole access.
unsafe impl Sync for Locked {}

static SCREEN: Locked = Locked(
    UnsafeCell::new(Screen {
        cells: [0; CELLS],
        console: None,
        pixels: None,
        width: 0,
        height: 0,
        stride: 0,
        early: [0; EARLY],
        early_len: 0,
    }),
    AtomicBool::new(false),
);

/// Run `f` on the screen, holding its lock; skipped when the lock stays taken (a panic
/// inside the screen's own code must still reach the serial log).
fn with(f: impl FnOnce(&mut Screen)) {
    let mut spins = 0u32;
    while SCREEN.1.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        spins += 1;
        if spins > 10_000_000 {
            return;
        }
        core::hint::spin_loop();
    }
    // SAFETY: the flag is ours until the store below: no other reference exists.
    f(unsafe { &mut *SCREEN.0.get() });
    SCREEN.1.store(false, Ordering::Release);
}

/// Show `bytes` on the screen (kept for later while there is none yet).
pub fn write(bytes: &[u8]) {
    with(|s| match (&mut s.console, &mut s.pixels) {
        (Some(c), Some(p)) => {
            c.write(bytes);
            c.flush(&mut fbcon::Surface { pixels: p, width: s.width, height: s.height, stride: s.stride });
        }
        _ => {
            let n = bytes.len().min(EARLY - s.early_len);
            s.early[s.early_len..s.early_len + n].copy_from_slice(&bytes[..n]);
            s.early_len += n;
        }
    });
}

/// Take the firmware's framebuffer as the screen (once the direct map covers RAM): it
/// is cleared and shows the log so far. Returns whether there is a screen; false, with a
/// line on the log, when the framebuffer cannot be reached.
pub fn init(fb: Option<bootinfo::Framebuffer>) -> Result<(), &'static str> {
    let Some(fb) = fb else {
        // No screen: nothing is kept any longer.
        with(|s| s.early_len = EARLY);
        return Ok(());
    };
    let end = fb.addr.checked_add(fb.len).ok_or("its address wraps")?;
    if end > direct_map_end() && !map_device_gib(fb.addr, fb.len) {
        with(|s| s.early_len = EARLY);
        return Err("it lies where the kernel cannot map it (above 512 GiB, or without 1 GiB pages)");
    }
    let words = (fb.stride as usize) * (fb.height as usize);
    // SAFETY: the framebuffer's `len` bytes (`words` 32-bit pixels fit in them:
    // `bootinfo::parse` checked it) are device memory mapped in the direct map (checked
    // or mapped above), not RAM: nothing else in the kernel touches them. (A program
    // sigma0 gives them to, from its device window, can only change what is shown.)
    let pixels = unsafe { core::slice::from_raw_parts_mut(phys_to_virt(fb.addr) as *mut u32, words) };
    with(|s| {
        // SAFETY: `cells` lives in a static; the console borrowing it is kept beside it
        // in the same static and reached only under the lock.
        let cells: &'static mut [u8] = unsafe { &mut *core::ptr::addr_of_mut!(s.cells) };
        let mut c = fbcon::Console::new(cells, fb.width as usize, fb.height as usize);
        s.width = fb.width as usize;
        s.height = fb.height as usize;
        s.stride = fb.stride as usize;
        c.write(&s.early[..s.early_len]);
        c.flush(&mut fbcon::Surface { pixels, width: s.width, height: s.height, stride: s.stride });
        s.console = Some(c);
        s.pixels = Some(pixels);
    });
    Ok(())
}
