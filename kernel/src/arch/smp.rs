//! Application processors: found in the ACPI MADT, started with INIT-SIPI-SIPI through
//! a real-mode trampoline copied to `TRAMPOLINE` (16-bit → 32-bit protected mode →
//! long mode on the boot page tables, which map the first 4 GiB one to one and the
//! kernel in the higher half), then `ap_main` on the CPU's own boot stack, which loads
//! the CPU's own GDT, TSS, per-CPU data (GS), the shared IDT and the SYSCALL MSRs.
//!
//! Each then takes the big kernel lock (`klock`), makes its idle thread and starts its
//! local APIC timer and its scheduler. Threads run on the boot CPU unless moved
//! (`Kernel::thread_cpu`); the others idle and tick.

use crate::arch::boot::{boot_pml4_phys, nx_enabled, phys_to_virt};
use crate::arch::cpu::MAX_CPUS;
use crate::arch::serial::kprintln;
use crate::arch::{lapic, timer};
use crate::kcell::KCell;
use core::arch::global_asm;
use core::ptr::addr_of;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

/// Physical page the trampoline runs in (the SIPI's vector is its page number). In the
/// first MiB, which the frame allocator never hands out.
pub const TRAMPOLINE: u64 = 0x8000;
const _: () = assert!(TRAMPOLINE < 0x10_0000 && TRAMPOLINE.is_multiple_of(4096));

global_asm!(
    r#"
    .section .rodata.ap_trampoline, "a"
    .global ap_tramp_start
    .global ap_tramp_end
    .global ap_tramp_cr3
    .global ap_tramp_efer
    .global ap_tramp_stack
    .global ap_tramp_entry
    .global ap_tramp_index
    .code16
ap_tramp_start:
    cli
    cld
    xor ax, ax
    mov ds, ax
    lgdt [AP_GDTR]
    mov eax, cr0
    or eax, 1
    mov cr0, eax
    /* jmp far 0x08:ap_pm32 (ptr16:32 from 16-bit code), spelled out */
    .byte 0x66, 0xEA
    .long ap_pm32 - ap_tramp_start + {base}
    .word 0x08

    .code32
ap_pm32:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
    mov eax, cr4
    or eax, 0x20
    mov cr4, eax
    mov eax, [AP_CR3]
    mov cr3, eax
    mov ecx, 0xC0000080
    rdmsr
    or eax, [AP_EFER]
    wrmsr
    mov eax, cr0
    or eax, 0x80010001
    mov cr0, eax
    /* jmp far 0x18:ap_lm64 */
    .byte 0xEA
    .long ap_lm64 - ap_tramp_start + {base}
    .word 0x18

    .code64
ap_lm64:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
    xor eax, eax
    mov fs, ax
    mov gs, ax
    mov rsp, [rip + ap_tramp_stack]
    mov rdi, [rip + ap_tramp_index]
    mov rax, [rip + ap_tramp_entry]
    call rax
2:
    hlt
    jmp 2b

    .p2align 3
ap_gdt:
    .quad 0
    .quad 0x00CF9A000000FFFF
    .quad 0x00CF92000000FFFF
    .quad 0x00AF9A000000FFFF
ap_gdtr:
    .word 31
    .long ap_gdt - ap_tramp_start + {base}
    .p2align 3
ap_tramp_cr3: .quad 0
ap_tramp_efer: .quad 0
ap_tramp_stack: .quad 0
ap_tramp_entry: .quad 0
ap_tramp_index: .quad 0
ap_tramp_end:
    /* Where the trampoline's data lies once copied (32-bit and 16-bit code cannot
       address it relative to rip). */
    .set AP_GDTR, ap_gdtr - ap_tramp_start + {base}
    .set AP_CR3, ap_tramp_cr3 - ap_tramp_start + {base}
    .set AP_EFER, ap_tramp_efer - ap_tramp_start + {base}
    .text
"#,
    base = const TRAMPOLINE,
);

extern "C" {
    static ap_tramp_start: u8;
    static ap_tramp_end: u8;
    static ap_tramp_cr3: u8;
    static ap_tramp_efer: u8;
    static ap_tramp_stack: u8;
    static ap_tramp_entry: u8;
    static ap_tramp_index: u8;
}

const AP_STACK_SIZE: usize = 16 * 1024;
#[repr(C, align(16))]
struct ApStack([u8; AP_STACK_SIZE]);
/// Each application processor's boot stack (its `ap_main` runs on it).
static AP_STACKS: [KCell<ApStack>; MAX_CPUS] = [const { KCell::new(ApStack([0; AP_STACK_SIZE])) }; MAX_CPUS];
/// Set by each application processor when it has loaded its tables.
static ONLINE: [AtomicBool; MAX_CPUS] = [const { AtomicBool::new(false) }; MAX_CPUS];
/// Who has a start slot: the processor that reached `ap_main` with it (`CLAIMED`), or the
/// boot CPU, which gave up waiting (`ABANDONED`). One compare-and-swap each decides it,
/// so a processor that comes late never runs as a CPU the kernel does not count, and
/// the boot CPU never resets one that is already running kernel code.
static CLAIM: [AtomicU8; MAX_CPUS] = [const { AtomicU8::new(UNCLAIMED) }; MAX_CPUS];
const UNCLAIMED: u8 = 0;
const CLAIMED: u8 = 1;
const ABANDONED: u8 = 2;
/// How long the boot CPU waits for a processor to reach `ap_main`: under TCG on a busy
/// host a virtual CPU's thread can wait for the host's scheduler far longer than Intel's
/// 100 µs (Linux waits 10 s). Paid only for a processor that never comes.
const START_WAIT_US: u64 = 2_000_000;
/// Once claimed, how long its tables may take (a few µs on hardware).
const INIT_WAIT_US: u64 = 10_000_000;
static CPUS_ONLINE: AtomicUsize = AtomicUsize::new(1);
/// The local APIC id of each CPU that came up, by index (0: the boot CPU).
static APIC_IDS: KCell<[u32; MAX_CPUS]> = KCell::new([0; MAX_CPUS]);

/// The local APIC id of CPU `index` (one that is up).
pub fn apic_id(index: usize) -> u32 {
    APIC_IDS.get()[index % MAX_CPUS]
}

/// How many CPUs are up (the boot CPU included).
pub fn cpus() -> usize {
    CPUS_ONLINE.load(Ordering::Acquire)
}

/// Write the trampoline's word at `field` (one of its data symbols).
fn set(field: *const u8, v: u64) {
    let off = field as u64 - addr_of!(ap_tramp_start) as u64;
    // SAFETY: `field` is one of the trampoline's 8-byte data words, so `off` lies in the
    // copy at TRAMPOLINE, in the first MiB (direct-mapped, reserved from the allocator).
    unsafe { core::ptr::write_volatile(phys_to_virt(TRAMPOLINE + off) as *mut u64, v) };
}

/// INIT IPI (assert), SIPI with the trampoline's page number.
const ICR_INIT: u32 = 0x4500;
const ICR_STARTUP: u32 = 0x4600 | (TRAMPOLINE >> 12) as u32;

/// What an application processor runs once its tables are loaded (`start_aps` sets it
/// before it starts any): the kernel's side of its start, which takes the kernel lock
/// and never returns. Passed down so that `arch` imports nothing above it.
static AP_ENTRY: KCell<Option<fn(usize) -> !>> = KCell::new(None);

/// Start every enabled processor the MADT lists (up to `MAX_CPUS`), one at a time,
/// waiting for each to load its tables; each then runs `entry` with its index.
/// `trampoline_free`: the start page holds no boot data (else only this CPU runs).
/// Returns how many CPUs are up.
pub fn start_aps(rsdp_phys: u64, trampoline_free: bool, entry: fn(usize) -> !) -> usize {
    *AP_ENTRY.get() = Some(entry);
    if !lapic::in_use() {
        return cpus();
    }
    APIC_IDS.get()[0] = lapic::id();
    let ids = super::acpi::processors(rsdp_phys);
    if ids.len() <= 1 {
        return cpus();
    }
    if !trampoline_free {
        kprintln!("[smp] the start page {:#x} holds boot data: running on one CPU", TRAMPOLINE);
        return cpus();
    }
    let me = APIC_IDS.get()[0];
    let len = addr_of!(ap_tramp_end) as usize - addr_of!(ap_tramp_start) as usize;
    // SAFETY: the trampoline's bytes (a static in .rodata) copied to the start page in
    // the first MiB (reserved from the allocator, checked free of boot data above);
    // `len` is far below a page.
    unsafe { core::ptr::copy_nonoverlapping(addr_of!(ap_tramp_start), phys_to_virt(TRAMPOLINE), len) };
    set(addr_of!(ap_tramp_cr3), boot_pml4_phys());
    // EFER: LME | SCE, and NXE as on the boot CPU (the page tables use NX).
    set(addr_of!(ap_tramp_efer), 0x101 | if nx_enabled() { 0x800 } else { 0 });
    set(addr_of!(ap_tramp_entry), ap_main as *const () as usize as u64);
    let mut n = 1;
    for &id in ids.iter().filter(|&&id| id != me) {
        if n == MAX_CPUS {
            kprintln!("[smp] {} processors listed; the kernel uses {}", ids.len(), MAX_CPUS);
            break;
        }
        if id > 0xff {
            kprintln!("[smp] local APIC {} needs x2APIC mode: not started", id);
            continue;
        }
        let top = AP_STACKS[n].get().0.as_ptr() as u64 + AP_STACK_SIZE as u64;
        set(addr_of!(ap_tramp_stack), top);
        set(addr_of!(ap_tramp_index), n as u64);
        core::sync::atomic::fence(Ordering::SeqCst);
        // Intel's sequence: INIT, 10 ms, SIPI, 200 µs, a second SIPI if it has not
        // come up; then wait for it to claim its slot (`START_WAIT_US`) and load its
        // tables.
        lapic::send_ipi(id, ICR_INIT);
        timer::delay_us(10_000);
        for _ in 0..2 {
            if CLAIM[n].load(Ordering::Acquire) == CLAIMED {
                break;
            }
            lapic::send_ipi(id, ICR_STARTUP);
            timer::delay_us(200);
        }
        let came = wait(|| CLAIM[n].load(Ordering::Acquire) == CLAIMED, START_WAIT_US)
            || CLAIM[n].compare_exchange(UNCLAIMED, ABANDONED, Ordering::AcqRel, Ordering::Acquire).is_err();
        if came && wait(|| ONLINE[n].load(Ordering::Acquire), INIT_WAIT_US) {
            APIC_IDS.get()[n] = id;
            kprintln!("[smp] CPU {} (local APIC {}) online", n, id);
            n += 1;
            CPUS_ONLINE.store(n, Ordering::Release);
        } else {
            // INIT again: it waits for a SIPI that never comes, rather than starting
            // late. A late one that reached `ap_main` first found its slot abandoned and
            // stopped there; give the INIT time to land before the slot's stack and
            // index are handed to the next processor.
            lapic::send_ipi(id, ICR_INIT);
            timer::delay_us(10_000);
            if came {
                kprintln!("[smp] the processor with local APIC {} started but did not load its tables", id);
            } else {
                kprintln!("[smp] the processor with local APIC {} did not start", id);
            }
            CLAIM[n].store(UNCLAIMED, Ordering::Release);
        }
    }
    kprintln!("[smp] {} CPUs", n);
    n
}

/// Poll `done` every 100 µs for up to `us` µs; whether it came true.
fn wait(done: impl Fn() -> bool, us: u64) -> bool {
    for _ in 0..us / 100 {
        if done() {
            return true;
        }
        timer::delay_us(100);
    }
    done()
}

/// An application processor, in long mode on the boot page tables and its own stack:
/// its claim on the slot, its tables, then the kernel's entry (`AP_ENTRY`).
extern "C" fn ap_main(index: u64) -> ! {
    let index = index as usize;
    if CLAIM[index].compare_exchange(UNCLAIMED, CLAIMED, Ordering::AcqRel, Ordering::Acquire).is_err() {
        // The boot CPU gave up on this processor before it came: it is not a CPU of the
        // kernel's, so it touches nothing of CPU `index`'s and waits for the INIT.
        loop {
            x86_64::instructions::interrupts::disable();
            x86_64::instructions::hlt();
        }
    }
    super::cpu::init_ap(index);
    super::fpu::init();
    // Read before this CPU says it is up: the next processor starts only after that, so
    // one processor at a time reads the cell (written before the first started).
    let entry = (*AP_ENTRY.get()).expect("start_aps sets the entry before any AP starts");
    ONLINE[index].store(true, Ordering::Release);
    entry(index)
}
