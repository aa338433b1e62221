//! x87 and SSE state: the hardware side of lazy switching.
//!
//! The kernel itself is built without x87/SSE (the target is soft-float), so the
//! registers hold user state only. `CR0.TS` makes the first x87/SSE instruction after
//! a switch trap (#NM, vector 7); the kernel then saves the previous owner's registers
//! and loads the current thread's (or a clean state on its first use). The kernel
//! keeps who owns the registers and whether TS is set (`Kernel::fpu_owner`,
//! `fpu_ts_clear`); a switch between threads that do not own them costs two
//! comparisons and no CR0 write.

use x86_64::registers::control::{Cr0, Cr0Flags, Cr4, Cr4Flags};

/// The FXSAVE image (x87, MMX, SSE and MXCSR): 512 bytes, 16-byte aligned.
#[repr(C, align(16))]
pub struct FxArea(pub [u8; 512]);

/// The state every thread starts with: what FNINIT leaves (control word 0x037f, every
/// register empty) with MXCSR at its reset value 0x1f80 (all exceptions masked) and
/// every data register zero.
static CLEAN: FxArea = {
    let mut a = [0u8; 512];
    a[0] = 0x7f; // FCW = 0x037f
    a[1] = 0x03;
    a[24] = 0x80; // MXCSR = 0x1f80
    a[25] = 0x1f;
    a[28] = 0xff; // MXCSR_MASK as FXSAVE reports it (ignored by FXRSTOR)
    a[29] = 0xff;
    FxArea(a)
};

/// Enable SSE for user mode (CR4.OSFXSR, OSXMMEXCPT), x87 errors as exceptions
/// (CR0.NE) with WAIT trapping under TS (CR0.MP), no emulation (CR0.EM clear); then
/// set TS so that the first use traps.
pub fn init() {
    // SAFETY: enabling FXSAVE/SSE support and native x87 error reporting changes only
    // how user x87/SSE instructions behave; the kernel uses none.
    unsafe {
        Cr4::update(|f| *f |= Cr4Flags::OSFXSR | Cr4Flags::OSXMMEXCPT_ENABLE);
        Cr0::update(|f| {
            f.remove(Cr0Flags::EMULATE_COPROCESSOR);
            f.insert(Cr0Flags::MONITOR_COPROCESSOR | Cr0Flags::NUMERIC_ERROR | Cr0Flags::TASK_SWITCHED);
        });
    }
}

/// Make the next x87/SSE instruction trap (set CR0.TS: the registers belong to
/// another thread).
pub fn set_ts() {
    // SAFETY: setting TS only makes x87/SSE instructions trap to #NM; the kernel uses none.
    unsafe { Cr0::update(|f| f.insert(Cr0Flags::TASK_SWITCHED)) };
}

/// Let x87/SSE instructions run (clear CR0.TS: the registers hold the running
/// thread's state).
pub fn clear_ts() {
    // SAFETY: CLTS clears CR0.TS and has no other effect.
    unsafe { core::arch::asm!("clts", options(nomem, nostack, preserves_flags)) };
}

/// Save the registers into `a` (TS must be clear).
pub fn save(a: &mut FxArea) {
    // SAFETY: `a` is 512 writable bytes, 16-byte aligned (FxArea's layout); FXSAVE64
    // writes exactly that.
    unsafe { core::arch::asm!("fxsave64 [{}]", in(reg) a.0.as_mut_ptr(), options(nostack, preserves_flags)) };
}

/// Load the registers from `a`, an image FXSAVE wrote or [`CLEAN`] (TS must be clear).
pub fn restore(a: &FxArea) {
    // SAFETY: `a` is 512 readable bytes, 16-byte aligned, written by FXSAVE64 (or the
    // clean image, whose MXCSR has no reserved bit set), so FXRSTOR64 cannot fault.
    unsafe { core::arch::asm!("fxrstor64 [{}]", in(reg) a.0.as_ptr(), options(nostack, preserves_flags, readonly)) };
}

/// Load the clean state.
pub fn load_clean() {
    restore(&CLEAN);
}
