//! The Scion microkernel: address spaces, threads, capabilities and IPC.
#![no_std]
#![no_main]

extern crate alloc;

use arch::serial::kprintln;

mod arch {
    pub mod acpi;
    pub mod boot;
    pub mod cpu;
    pub mod fpu;
    pub mod iommu;
    pub mod irqchip;
    pub mod lapic;
    pub mod pci;
    pub mod screen;
    pub mod serial;
    pub mod smp;
    pub mod timer;
}
mod fastpath;
mod ipc;
mod kcell;
mod kernel;
mod klock;
mod loader;
mod mem;
mod sched;
mod syscall;
mod task;
mod thread;
mod trap;
mod vm;

/// Entered from the boot stub in long mode, on the boot stack, with the physical
/// address of the PVH start info.
#[no_mangle]
extern "C" fn kstart(start_info: u64) -> ! {
    arch::serial::Serial::init();
    kprintln!("Scion microkernel (ABI {})", abi::ABI_VERSION);
    arch::cpu::init();
    arch::fpu::init();
    // Held until the first thread leaves for user mode (the other CPUs wait for it).
    kernel::lock();
    let bi = mem::init(start_info);
    if let Err(why) = arch::screen::init(bi.framebuffer) {
        kprintln!("[kernel] the firmware's framebuffer is not used: {}", why);
    }
    let cmdline = core::str::from_utf8(&bi.cmdline[..bi.cmdline_len]).unwrap_or("");
    // SAFETY: the boot entry; nothing else holds kernel state yet.
    let k = unsafe { kernel::enter() };
    kernel::init(k);
    arch::timer::init(cmdline.split(' ').any(|w| w == "timer=pit"));
    arch::irqchip::init(bi.rsdp_phys);
    // Device DMA is not confined yet: a driver that programs its device can reach any
    // frame. Say so, and whether the machine has the IOMMU that could confine it.
    if arch::iommu::init(bi.rsdp_phys) {
        // It says what it confines, and whether interrupts are remapped.
        if arch::iommu::remapping() {
            arch::irqchip::remap_ioapic(arch::lapic::id());
        }
    } else if arch::acpi::has_dmar(bi.rsdp_phys) {
        kprintln!("[kernel] an IOMMU is present (ACPI DMAR) but not used: user-level drivers with DMA are trusted with all memory");
    } else {
        kprintln!("[kernel] no IOMMU (no ACPI DMAR table): user-level drivers with DMA are trusted with all memory");
    }
    if arch::smp::start_aps(bi.rsdp_phys, mem::trampoline_free(), sched::ap_start) > 1 {
        klock::several_cpus();
    }
    for cpu in 0..arch::smp::cpus() {
        thread::create_idle(k, cpu);
    }
    loader::start_boot_tasks(k, &bi);
    sched::start_scheduling(k);
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    x86_64::instructions::interrupts::disable();
    kprintln!("KERNEL PANIC: {}", info);
    // Status (0x7f << 1) | 1: a test harness sees the panic at once.
    arch::cpu::machine_exit(0x7f)
}
