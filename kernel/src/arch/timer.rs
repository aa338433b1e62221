//! The preemption timer and the clock: the local APIC timer in periodic mode (its
//! registers in `lapic`), calibrated against PIT channel 2; where the CPU has no local
//! APIC, PIT channel 0 through the 8259. Time is read from the TSC.

use crate::kcell::KCell;
use core::arch::x86_64::{__cpuid, _rdtsc};
use x86_64::instructions::port::Port;

use super::lapic;

pub struct TimerState {
    pub tsc_per_ms: u64,
    /// Local APIC timer counts per millisecond (divide by 16), for the other CPUs.
    pub apic_per_ms: u32,
    /// The TSC when the clock started: the kernel's time is read from the TSC, so a
    /// timer interrupt that comes late (interrupts were off) loses no time.
    pub tsc0: u64,
}

static STATE: KCell<TimerState> = KCell::new(TimerState { tsc_per_ms: 0, apic_per_ms: 0, tsc0: 0 });

fn outb(port: u16, v: u8) {
    // SAFETY: only the legacy PIC/PIT ports are written, which the kernel owns.
    unsafe { Port::<u8>::new(port).write(v) }
}
fn inb(port: u16) -> u8 {
    // SAFETY: reading PIT/PIC status ports has no side effect beyond the read.
    unsafe { Port::<u8>::new(port).read() }
}

pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions in ring 0.
    unsafe { _rdtsc() }
}

/// Remap the 8259s away from the exception vectors and mask them.
fn pic_init(mask_master: u8) {
    outb(0x20, 0x11);
    outb(0xA0, 0x11);
    outb(0x21, 0x20);
    outb(0xA1, 0x28);
    outb(0x21, 4);
    outb(0xA1, 2);
    outb(0x21, 1);
    outb(0xA1, 1);
    outb(0x21, mask_master);
    outb(0xA1, 0xFF);
}

/// Start PIT channel 2 counting down `count` ticks (1.193182 MHz) in mode 0.
fn pit2_start(count: u16) {
    let gate = inb(0x61);
    outb(0x61, (gate & !0x02) & !0x01);
    outb(0x43, 0xB0);
    outb(0x42, count as u8);
    outb(0x42, (count >> 8) as u8);
    outb(0x61, (gate & !0x02) | 0x01);
}

fn pit2_done() -> bool {
    inb(0x61) & 0x20 != 0
}

pub fn init(force_pit: bool) {
    let st = STATE.get();
    // cpuid leaf 1 exists on every x86-64 CPU.
    let has_apic = __cpuid(1).edx & (1 << 9) != 0;
    const CAL_MS: u64 = 10;
    let count = (1_193_182 * CAL_MS / 1000) as u16;
    if has_apic && !force_pit {
        pic_init(0xFF);
        lapic::enable();
        lapic::timer_count_down();
        let t0 = rdtsc();
        pit2_start(count);
        while !pit2_done() {}
        let t1 = rdtsc();
        let elapsed = lapic::timer_count();
        let per_ms = (elapsed as u64 / CAL_MS).max(1);
        st.tsc_per_ms = (t1 - t0) / CAL_MS;
        lapic::timer_periodic(per_ms as u32);
        st.apic_per_ms = per_ms as u32;
        crate::arch::serial::kprintln!("[timer] local APIC, {} ticks/ms, TSC {} kHz", per_ms, st.tsc_per_ms);
    } else {
        pic_init(0xFE); // IRQ0 only
        let t0 = rdtsc();
        pit2_start(count);
        while !pit2_done() {}
        st.tsc_per_ms = (rdtsc() - t0) / CAL_MS;
        let div: u16 = 1193; // ~1000 Hz
        outb(0x43, 0x34);
        outb(0x40, div as u8);
        outb(0x40, (div >> 8) as u8);
        crate::arch::serial::kprintln!("[timer] no local APIC: PIT at 1 kHz, TSC {} kHz", st.tsc_per_ms);
    }
    st.tsc_per_ms = st.tsc_per_ms.max(1);
    st.tsc0 = rdtsc();
}

/// Whole milliseconds since the clock started, from the TSC.
pub fn elapsed_ms() -> u64 {
    let st = STATE.get();
    rdtsc().saturating_sub(st.tsc0) / st.tsc_per_ms
}

/// An application processor's timer: periodic at 1 kHz like the boot CPU's (the
/// local APICs share one clock).
pub fn init_ap() {
    lapic::enable_ap();
    lapic::timer_periodic(STATE.get().apic_per_ms);
}

/// Spin for `us` microseconds (by the TSC, calibrated in `init`).
pub fn delay_us(us: u64) {
    let end = rdtsc() + us * STATE.get().tsc_per_ms / 1000;
    while rdtsc() < end {
        core::hint::spin_loop();
    }
}

pub fn tsc_per_ms() -> u64 {
    STATE.get().tsc_per_ms
}
