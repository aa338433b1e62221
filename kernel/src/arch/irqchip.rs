//! Interrupt lines for user-level drivers. With the local APIC: the IOAPIC, lines
//! 0..24 at vectors 0x30+line (ISA lines edge/active-high, PCI lines 16..23
//! level/active-low). Without it: the 8259 pair, lines 1..16 at 0x20+line (line 0
//! is the kernel's timer), edge or level as the firmware set the ELCR. Every line
//! starts masked and is unmasked when a driver attaches; whether it is masked while
//! its driver serves it, `kcore::irqline` says (a level line always, an edge line
//! only if it fires twice).
//!
//! Message-signalled interrupts (MSI-X entries or MSI capabilities the kernel programmed
//! for a driver, `arch::pci`) share the numbering: `irq::MSI_FIRST..irq::ALL`, at
//! vectors 0x50 and up, edge-triggered, masked and unmasked through their table entry's
//! vector control bit (a message sent while masked waits in the pending bits) or MSI's
//! mask bit where the function has one.
//!
//! With interrupt remapping (`arch::iommu::remapping`), every line's message goes through
//! the remapping table entry of its number: IOAPIC redirection entries and MSI/MSI-X
//! messages are written in the remappable format (a handle, no vector, no destination),
//! and routing a line to a CPU rewrites its table entry, which names the one requester
//! allowed to use it (the device, or the IOAPIC).

use crate::arch::boot::phys_to_virt;
use crate::kcell::KCell;
use x86_64::instructions::port::Port;

const IOAPIC_BASE: u64 = 0xFEC0_0000;
pub const IOAPIC_VECTOR_BASE: u8 = 0x30;
pub const PIC_VECTOR_BASE: u8 = 0x20;
pub const MSI_VECTOR_BASE: u8 = 0x50;
const MSI_FIRST: u8 = abi::irq::MSI_FIRST as u8;
const MSI_LINES: usize = abi::irq::MSI_LINES as usize;

/// The MSI-X table entry behind each message-signalled interrupt.
static MSI: KCell<[Option<super::pci::Message>; MSI_LINES]> = KCell::new([None; MSI_LINES]);

fn msi(line: u8) -> Option<super::pci::Message> {
    line.checked_sub(MSI_FIRST).and_then(|i| MSI.get().get(i as usize).copied().flatten())
}

/// Whether message-signalled interrupts can be delivered (they need the local APIC).
pub fn msi_available() -> bool {
    apic()
}

/// Bind message-signalled interrupt `line` to an MSI-X entry: masked, its message to
/// the boot CPU until a driver attaches (`route`, `unmask`).
pub fn msi_bind(line: u8, entry: super::pci::Message) {
    let Some(slot) = line.checked_sub(MSI_FIRST).and_then(|i| MSI.get().get_mut(i as usize)) else { return };
    entry.set_masked(true);
    send_msi(line, entry, super::smp::apic_id(0));
    *slot = Some(entry);
}

/// Point message-signalled `line`'s message at local APIC `apic_id`: through its
/// remapping table entry when interrupts are remapped, else in compatibility format.
fn send_msi(line: u8, entry: super::pci::Message, apic_id: u32) {
    let vector = MSI_VECTOR_BASE + (line - MSI_FIRST);
    if super::iommu::remapping() {
        let source = entry.source().id();
        super::iommu::set_irte(line as u16, pcie::vtd::Irte { vector, apic_id: apic_id as u8, level: false, source });
        let (addr, data) = pcie::vtd::remappable_message(line as u16);
        entry.write(addr, data);
    } else {
        entry.program(apic_id, vector);
    }
}

/// Interrupt remapping was just turned on: every IOAPIC line's entry (to the boot CPU,
/// as `init` set them) and its redirection entry in remappable format. Every line is
/// still masked (no driver attached yet).
pub fn remap_ioapic(apic_id: u32) {
    if !apic() {
        return;
    }
    let source = super::iommu::ioapic_source();
    for line in 0..abi::irq::LINES as u8 {
        let level = MODES.get()[line as usize] & LEVEL != 0;
        let vector = IOAPIC_VECTOR_BASE + line;
        super::iommu::set_irte(line as u16, pcie::vtd::Irte { vector, apic_id: apic_id as u8, level, source });
        ioapic_write(0x10 + 2 * line as u32 + 1, pcie::vtd::ioapic_remappable_high(line as u16));
        ioapic_write(0x10 + 2 * line as u32, redirection(line, true));
    }
}

fn ioapic_write(reg: u32, val: u32) {
    // SAFETY: the IOAPIC's index/data registers at its default address, mapped uncached
    // by the direct map; the kernel is their only user.
    unsafe {
        core::ptr::write_volatile(phys_to_virt(IOAPIC_BASE) as *mut u32, reg);
        core::ptr::write_volatile(phys_to_virt(IOAPIC_BASE + 0x10) as *mut u32, val);
    }
}

fn apic() -> bool {
    super::lapic::in_use()
}

/// Lines a driver may attach to.
pub fn lines() -> u8 {
    if apic() {
        abi::irq::LINES as u8
    } else {
        16
    }
}

const ACTIVE_LOW: u32 = 1 << 13;
const LEVEL: u32 = 1 << 15;

/// Each line's polarity and trigger bits: ISA lines edge/active-high and PCI lines
/// 16..23 level/active-low, unless the machine's ACPI tables override a line (as they
/// do for the ISA lines that PCI interrupts are routed to on i440fx: level). With the
/// 8259s, the trigger bit only, from the ELCR.
static MODES: KCell<[u32; abi::irq::LINES as usize]> = KCell::new([0; abi::irq::LINES as usize]);

fn redirection(line: u8, masked: bool) -> u32 {
    let mut low = (IOAPIC_VECTOR_BASE + line) as u32 | MODES.get()[line as usize];
    if masked {
        low |= 1 << 16;
    }
    low
}

pub fn init(rsdp_phys: u64) {
    super::pci::init(rsdp_phys);
    if apic() {
        let modes = MODES.get();
        for (line, m) in modes.iter_mut().enumerate() {
            *m = if line >= 16 { ACTIVE_LOW | LEVEL } else { 0 };
        }
        for o in super::acpi::interrupt_overrides(rsdp_phys) {
            crate::arch::serial::kprintln!(
                "[acpi] ISA IRQ {} on line {} ({}, active {})",
                o.isa,
                o.gsi,
                if o.level { "level" } else { "edge" },
                if o.active_low { "low" } else { "high" }
            );
            if let Some(m) = modes.get_mut(o.gsi as usize) {
                *m = if o.active_low { ACTIVE_LOW } else { 0 } | if o.level { LEVEL } else { 0 };
            }
        }
        for line in 0..abi::irq::LINES as u8 {
            ioapic_write(0x10 + 2 * line as u32 + 1, 0); // destination: CPU 0
            ioapic_write(0x10 + 2 * line as u32, redirection(line, true));
        }
    } else {
        // The 8259s' edge/level control registers (the firmware set them: PCI lines
        // routed to ISA lines are level). Lines 0, 1, 2, 8 and 13 are always edge: a
        // chipset without an ELCR reads 0xFF there, and every line is taken as edge.
        // SAFETY: reading the ELCR ports, which the kernel owns, changes nothing.
        let mut elcr = unsafe { Port::<u8>::new(0x4D0).read() as u16 | (Port::<u8>::new(0x4D1).read() as u16) << 8 };
        if elcr & (1 << 0 | 1 << 1 | 1 << 2 | 1 << 8 | 1 << 13) != 0 {
            elcr = 0;
        }
        for (line, m) in MODES.get().iter_mut().enumerate().take(16) {
            *m = if elcr & (1 << line) != 0 { LEVEL } else { 0 };
        }
    }
}

/// Whether `line` is edge- or level-triggered, as the controller was set up.
pub fn trigger(line: u8) -> kcore::irqline::Trigger {
    if line >= MSI_FIRST {
        return kcore::irqline::Trigger::Edge;
    }
    if MODES.get()[line as usize % abi::irq::LINES as usize] & LEVEL != 0 {
        kcore::irqline::Trigger::Level
    } else {
        kcore::irqline::Trigger::Edge
    }
}

/// Mask (`true`) or unmask `line`, if an action says to.
pub fn set_masked(line: u8, masked: Option<bool>) {
    match masked {
        Some(true) => mask(line),
        Some(false) => unmask(line),
        None => {}
    }
}

fn pic_mask_bit(line: u8, masked: bool) {
    let port = if line < 8 { 0x21 } else { 0xA1 };
    let bit = line % 8;
    // SAFETY: the 8259 mask registers, owned by the kernel.
    unsafe {
        let mut p = Port::<u8>::new(port);
        let v = p.read();
        p.write(if masked { v | (1 << bit) } else { v & !(1 << bit) });
        if line >= 8 && !masked {
            let mut m = Port::<u8>::new(0x21);
            let v = m.read();
            m.write(v & !(1 << 2)); // cascade
        }
    }
}

/// Deliver `line` to the CPU whose local APIC id is `apic` (the CPU its driver thread
/// runs on). Without the IOAPIC every line goes to the boot CPU.
pub fn route(line: u8, apic_id: u32) {
    if let Some(e) = msi(line) {
        send_msi(line, e, apic_id);
        return;
    }
    if apic() && line < lines() {
        if super::iommu::remapping() {
            let level = MODES.get()[line as usize] & LEVEL != 0;
            let (vector, source) = (IOAPIC_VECTOR_BASE + line, super::iommu::ioapic_source());
            super::iommu::set_irte(line as u16, pcie::vtd::Irte { vector, apic_id: apic_id as u8, level, source });
        } else {
            ioapic_write(0x10 + 2 * line as u32 + 1, apic_id << 24);
        }
    }
}

pub fn mask(line: u8) {
    if let Some(e) = msi(line) {
        e.set_masked(true);
        return;
    }
    if line >= lines() {
        return;
    }
    if apic() {
        ioapic_write(0x10 + 2 * line as u32, redirection(line, true));
    } else if line != 0 {
        pic_mask_bit(line, true);
    }
}

pub fn unmask(line: u8) {
    if let Some(e) = msi(line) {
        e.set_masked(false);
        return;
    }
    if line >= lines() {
        return;
    }
    if apic() {
        ioapic_write(0x10 + 2 * line as u32, redirection(line, false));
    } else if line != 0 {
        pic_mask_bit(line, false);
    }
}

/// The line behind an interrupt vector, if it is a device line.
pub fn line_of(vector: u8) -> Option<u8> {
    if let Some(i) = vector.checked_sub(MSI_VECTOR_BASE).filter(|i| (*i as usize) < MSI_LINES) {
        return apic().then_some(MSI_FIRST + i);
    }
    if apic() {
        vector.checked_sub(IOAPIC_VECTOR_BASE).filter(|l| *l < abi::irq::LINES as u8)
    } else {
        vector.checked_sub(PIC_VECTOR_BASE).filter(|l| *l > 0 && *l < 16)
    }
}

/// End of interrupt at the controller that delivered `line`.
pub fn eoi(line: u8) {
    if apic() {
        super::lapic::eoi();
    } else {
        // SAFETY: non-specific EOI to the 8259s.
        unsafe {
            if line >= 8 {
                Port::<u8>::new(0xA0).write(0x20);
            }
            Port::<u8>::new(0x20).write(0x20);
        }
    }
}
