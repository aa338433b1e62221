//! The local APIC: found and enabled at boot, then end of interrupt, inter-processor
//! interrupts (the reschedule and shootdown requests, INIT/SIPI to start the other
//! CPUs), each CPU's enable, and the registers of its timer (which `timer` programs).
//! Where the CPU has no local APIC (or `timer=pit`) the 8259 takes its place and
//! `eoi` acknowledges there.

use crate::arch::boot::phys_to_virt;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use x86_64::instructions::port::Port;
use x86_64::registers::model_specific::Msr;

use super::cpu::{VEC_SPURIOUS, VEC_TIMER};

const LAPIC_ID: u64 = 0x20;
const LAPIC_EOI: u64 = 0xB0;
const LAPIC_SVR: u64 = 0xF0;
const LAPIC_ICR_LOW: u64 = 0x300;
const LAPIC_ICR_HIGH: u64 = 0x310;
const LAPIC_LVT_TIMER: u64 = 0x320;
const LAPIC_TIMER_INIT: u64 = 0x380;
const LAPIC_TIMER_CUR: u64 = 0x390;
const LAPIC_TIMER_DIV: u64 = 0x3E0;
/// The ICR's delivery status: the last IPI has not been accepted yet.
const ICR_PENDING: u32 = 1 << 12;

/// The local APIC's physical base (the same on every CPU), set once by `enable`.
static BASE: AtomicU64 = AtomicU64::new(0);
/// Whether interrupts are acknowledged at the local APIC (else at the 8259).
static IN_USE: AtomicBool = AtomicBool::new(false);

fn write(off: u64, v: u32) {
    let base = BASE.load(Ordering::Relaxed);
    // SAFETY: the local APIC page is below 4 GiB, mapped uncached by the direct map;
    // `off` is one of the documented 32-bit registers.
    unsafe { core::ptr::write_volatile(phys_to_virt(base + off) as *mut u32, v) }
}

fn read(off: u64) -> u32 {
    let base = BASE.load(Ordering::Relaxed);
    // SAFETY: as in `write`.
    unsafe { core::ptr::read_volatile(phys_to_virt(base + off) as *const u32) }
}

/// Enable the boot CPU's local APIC (global enable in IA32_APIC_BASE, keeping the
/// default base; software enable with the spurious vector). Call only when CPUID
/// reports one.
pub fn enable() {
    // SAFETY: IA32_APIC_BASE exists when CPUID reports an APIC; setting the global
    // enable bit keeps the default base.
    let base = unsafe {
        let mut msr = Msr::new(0x1B);
        let v = msr.read();
        msr.write(v | (1 << 11));
        v & 0xF_FFFF_F000
    };
    BASE.store(base, Ordering::Relaxed);
    IN_USE.store(true, Ordering::Relaxed);
    write(LAPIC_SVR, 0x100 | VEC_SPURIOUS as u32);
}

/// Whether the local APIC is in use (else the 8259 and the PIT are, on one CPU).
pub fn in_use() -> bool {
    IN_USE.load(Ordering::Relaxed)
}

/// Acknowledge the interrupt being handled: at the local APIC, or at the master 8259.
pub fn eoi() {
    if in_use() {
        write(LAPIC_EOI, 0);
    } else {
        // SAFETY: the master 8259's command port, which the kernel owns.
        unsafe { Port::<u8>::new(0x20).write(0x20) }
    }
}

/// The running CPU's local APIC id.
pub fn id() -> u32 {
    read(LAPIC_ID) >> 24
}

/// Send an inter-processor interrupt (`icr`: vector, delivery mode, level) to the CPU
/// whose local APIC id is `dest`, and wait until its APIC has accepted it.
pub fn send_ipi(dest: u32, icr: u32) {
    write(LAPIC_ICR_HIGH, dest << 24);
    write(LAPIC_ICR_LOW, icr);
    while read(LAPIC_ICR_LOW) & ICR_PENDING != 0 {
        core::hint::spin_loop();
    }
}

/// An application processor's local APIC: software-enabled, spurious vector set.
pub fn enable_ap() {
    write(LAPIC_SVR, 0x100 | VEC_SPURIOUS as u32);
}

/// Start the timer counting down from `u32::MAX` (divide by 16, masked), for
/// calibration; `timer_count` reads how far it went.
pub fn timer_count_down() {
    write(LAPIC_TIMER_DIV, 0x3); // divide by 16
    write(LAPIC_LVT_TIMER, 1 << 16); // masked
    write(LAPIC_TIMER_INIT, u32::MAX);
}

/// How far the timer has counted since `timer_count_down`.
pub fn timer_count() -> u32 {
    u32::MAX - read(LAPIC_TIMER_CUR)
}

/// The timer periodic on the timer vector, every `count` (divide by 16) counts.
pub fn timer_periodic(count: u32) {
    write(LAPIC_TIMER_DIV, 0x3);
    write(LAPIC_LVT_TIMER, VEC_TIMER as u32 | (1 << 17));
    write(LAPIC_TIMER_INIT, count);
}
