//! The preemption timer: the local APIC timer in periodic mode, calibrated against
//! PIT channel 2; where the CPU has no local APIC, PIT channel 0 through the 8259.

use crate::kcell::KCell;
use crate::arch::boot::phys_to_virt;
use core::arch::x86_64::{__cpuid, _rdtsc};
use x86_64::instructions::port::Port;
use x86_64::registers::model_specific::Msr;

use super::cpu::{VEC_SPURIOUS, VEC_TIMER};

const LAPIC_SVR: u64 = 0xF0;
const LAPIC_EOI: u64 = 0xB0;
const LAPIC_LVT_TIMER: u64 = 0x320;
const LAPIC_TIMER_INIT: u64 = 0x380;
const LAPIC_TIMER_CUR: u64 = 0x390;
const LAPIC_TIMER_DIV: u64 = 0x3E0;

pub struct TimerState {
    pub apic_base: u64,
    pub use_apic: bool,
    pub tsc_per_ms: u64,
    /// Local APIC timer counts per millisecond (divide by 16), for the other CPUs.
    pub apic_per_ms: u32,
    /// The TSC when the clock started: the kernel's time is read from the TSC, so a
    /// timer interrupt that comes late (interrupts were off) loses no time.
    pub tsc0: u64,
}

static STATE: KCell<TimerState> = KCell::new(TimerState { apic_base: 0, use_apic: false, tsc_per_ms: 0, apic_per_ms: 0, tsc0: 0 });

fn outb(port: u16, v: u8) {
    // SAFETY: only the legacy PIC/PIT ports are written, which the kernel owns.
    unsafe { Port::<u8>::new(port).write(v) }
}
fn inb(port: u16) -> u8 {
    // SAFETY: reading PIT/PIC status ports has no side effect beyond the read.
    unsafe { Port::<u8>::new(port).read() }
}

fn lapic_write(off: u64, v: u32) {
    let base = STATE.get().apic_base;
    // SAFETY: the local APIC page is below 4 GiB, mapped uncached by the direct map;
    // `off` is one of the documented 32-bit registers.
    unsafe { core::ptr::write_volatile(phys_to_virt(base + off) as *mut u32, v) }
}
fn lapic_read(off: u64) -> u32 {
    let base = STATE.get().apic_base;
    // SAFETY: as in `lapic_write`.
    unsafe { core::ptr::read_volatile(phys_to_virt(base + off) as *const u32) }
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
    st.use_apic = has_apic && !force_pit;
    const CAL_MS: u64 = 10;
    let count = (1_193_182 * CAL_MS / 1000) as u16;
    if st.use_apic {
        pic_init(0xFF);
        // SAFETY: IA32_APIC_BASE exists when CPUID reports an APIC; setting the global
        // enable bit keeps the default base.
        let base = unsafe {
            let mut msr = Msr::new(0x1B);
            let v = msr.read();
            msr.write(v | (1 << 11));
            v & 0xF_FFFF_F000
        };
        st.apic_base = base;
        lapic_write(LAPIC_SVR, 0x100 | VEC_SPURIOUS as u32);
        lapic_write(LAPIC_TIMER_DIV, 0x3); // divide by 16
        lapic_write(LAPIC_LVT_TIMER, 1 << 16); // masked
        lapic_write(LAPIC_TIMER_INIT, u32::MAX);
        let t0 = rdtsc();
        pit2_start(count);
        while !pit2_done() {}
        let t1 = rdtsc();
        let elapsed = u32::MAX - lapic_read(LAPIC_TIMER_CUR);
        let per_ms = (elapsed as u64 / CAL_MS).max(1);
        st.tsc_per_ms = (t1 - t0) / CAL_MS;
        lapic_write(LAPIC_LVT_TIMER, VEC_TIMER as u32 | (1 << 17));
        lapic_write(LAPIC_TIMER_INIT, per_ms as u32);
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

pub fn eoi() {
    if STATE.get().use_apic {
        lapic_write(LAPIC_EOI, 0);
    } else {
        outb(0x20, 0x20);
    }
}

const LAPIC_ID: u64 = 0x20;
const LAPIC_ICR_LOW: u64 = 0x300;
const LAPIC_ICR_HIGH: u64 = 0x310;
/// The ICR's delivery status: the last IPI has not been accepted yet.
const ICR_PENDING: u32 = 1 << 12;

/// The running CPU's local APIC id.
pub fn lapic_id() -> u32 {
    lapic_read(LAPIC_ID) >> 24
}

/// Send an inter-processor interrupt (`icr`: vector, delivery mode, level) to the CPU
/// whose local APIC id is `dest`, and wait until its APIC has accepted it.
pub fn send_ipi(dest: u32, icr: u32) {
    lapic_write(LAPIC_ICR_HIGH, dest << 24);
    lapic_write(LAPIC_ICR_LOW, icr);
    while lapic_read(LAPIC_ICR_LOW) & ICR_PENDING != 0 {
        core::hint::spin_loop();
    }
}

/// An application processor's local APIC: software-enabled, spurious vector set; its
/// timer periodic at 1 kHz like the boot CPU's (the local APICs share one clock).
pub fn init_ap() {
    lapic_write(LAPIC_SVR, 0x100 | VEC_SPURIOUS as u32);
    lapic_write(LAPIC_TIMER_DIV, 0x3);
    lapic_write(LAPIC_LVT_TIMER, VEC_TIMER as u32 | (1 << 17));
    lapic_write(LAPIC_TIMER_INIT, STATE.get().apic_per_ms);
}

/// Spin for `us` microseconds (by the TSC, calibrated in `init`).
pub fn delay_us(us: u64) {
    let end = rdtsc() + us * STATE.get().tsc_per_ms / 1000;
    while rdtsc() < end {
        core::hint::spin_loop();
    }
}

pub fn uses_apic() -> bool {
    STATE.get().use_apic
}

pub fn tsc_per_ms() -> u64 {
    STATE.get().tsc_per_ms
}
