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

/// TSC ticks while PIT channel 2 counts `count` ticks: from just after it starts to
/// just after its end is seen.
fn tsc_over(count: u16) -> u64 {
    pit2_start(count);
    let t0 = rdtsc();
    while !pit2_done() {}
    rdtsc().wrapping_sub(t0)
}

/// TSC ticks a millisecond, measured against the PIT as the difference of a long and a
/// short count: what starting the channel and seeing its end cost (port accesses that
/// under QEMU's TCG take tens of µs each; they made one 10 ms count read 1–1.4% long,
/// and the wall clock programs keep from the TSC lose half a minute an hour) is in both
/// and cancels. Each count is taken three times and the least kept: a pause of the
/// machine in the middle of one (its host thread preempted) only adds.
fn measure_tsc_per_ms() -> u64 {
    const SHORT_MS: u64 = 2;
    const LONG_MS: u64 = 12;
    let least = |ms: u64| (0..3).map(|_| tsc_over((1_193_182 * ms / 1000) as u16)).min().unwrap_or(0);
    let (short, long) = (least(SHORT_MS), least(LONG_MS));
    long.saturating_sub(short) / (LONG_MS - SHORT_MS)
}

/// The measured rate, unless it is far from the one 10 ms count gave (`rough`): then
/// that one.
fn refined(rough: u64) -> u64 {
    let fine = measure_tsc_per_ms();
    if fine > rough / 2 && fine < rough.saturating_mul(2) {
        fine
    } else {
        rough
    }
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
        let rough = (t1 - t0) / CAL_MS;
        st.tsc_per_ms = refined(rough);
        lapic::timer_periodic(per_ms as u32);
        st.apic_per_ms = per_ms as u32;
        crate::arch::serial::kprintln!(
            "[timer] local APIC, {} ticks/ms, TSC {} kHz (one {} ms count: {})",
            per_ms,
            st.tsc_per_ms,
            CAL_MS,
            rough
        );
    } else {
        pic_init(0xFE); // IRQ0 only
        let t0 = rdtsc();
        pit2_start(count);
        while !pit2_done() {}
        let rough = (rdtsc() - t0) / CAL_MS;
        st.tsc_per_ms = refined(rough);
        let div: u16 = 1193; // ~1000 Hz
        outb(0x43, 0x34);
        outb(0x40, div as u8);
        outb(0x40, (div >> 8) as u8);
        crate::arch::serial::kprintln!(
            "[timer] no local APIC: PIT at 1 kHz, TSC {} kHz (one {} ms count: {})",
            st.tsc_per_ms,
            CAL_MS,
            rough
        );
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
