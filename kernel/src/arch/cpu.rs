//! GDT, TSS (with separate interrupt stacks), per-CPU data in GS, SYSCALL MSRs,
//! the IDT and every kernel entry/exit path (`global_asm!`, as stable Rust has no
//! interrupt ABI).
//!
//! All entries from user mode build the same [`TrapFrame`] at the top of the
//! current thread's kernel stack, so IPC can write a blocked thread's registers
//! wherever it entered, and any thread can leave through either exit path.
//!
//! Why one file of about 950 lines: some 420 of them are the entry and exit paths (two
//! `global_asm!` blocks), which name the `TrapFrame` layout and the per-CPU offsets
//! (`RSP0_FROM_GS`, the `CpuTables` fields) defined beside them and asserted here.

use core::arch::global_asm;
use core::ptr::addr_of;
use x86_64::instructions::tables::load_tss;
use x86_64::registers::model_specific::{Efer, EferFlags, GsBase, KernelGsBase, LStar, SFMask, Star};
use x86_64::registers::rflags::RFlags;
use x86_64::structures::gdt::{Descriptor, GlobalDescriptorTable, SegmentSelector};
use x86_64::structures::idt::InterruptDescriptorTable;
use x86_64::structures::tss::TaskStateSegment;
use x86_64::{PrivilegeLevel, VirtAddr};

use crate::kcell::KCell;

/// User register state saved on kernel entry. Field order is the push order reversed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TrapFrame {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rbp: u64,
    pub rdi: u64,
    pub rsi: u64,
    pub rdx: u64,
    pub rcx: u64,
    pub rbx: u64,
    pub rax: u64,
    pub vector: u64,
    pub error: u64,
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

pub const TRAP_FRAME_SIZE: usize = core::mem::size_of::<TrapFrame>();
const _: () = assert!(TRAP_FRAME_SIZE.is_multiple_of(16));

pub const KERNEL_CS: u16 = 0x08;
pub const KERNEL_DS: u16 = 0x10;
pub const USER_DS: u16 = 0x18 | 3;
pub const USER_CS: u16 = 0x20 | 3;

/// Vector numbers.
pub const VEC_TIMER: u8 = 32;
pub const VEC_SPURIOUS: u8 = 0xFF;
/// Inter-processor interrupts: run the scheduler (a thread of this CPU became ready);
/// flush the TLB (`klock::shootdown`).
pub const VEC_RESCHED: u8 = 0xF0;
pub const VEC_SHOOTDOWN: u8 = 0xF1;

/// CPUs the kernel can run on (their tables below are static).
pub const MAX_CPUS: usize = 8;

/// Per-CPU data, reached through GS in the kernel. Offsets are used by the asm.
#[repr(C)]
pub struct PerCpu {
    /// Scratch for the user RSP during SYSCALL entry (which takes the kernel stack's
    /// top from the TSS's `rsp0`, reached through GS too: `set_kernel_stack`).
    pub user_rsp: u64,
    /// This structure's own address (`this_cpu` reads it through GS).
    this: u64,
    /// This CPU's TSS (its `rsp0` follows the running thread; its I/O bitmap the
    /// running task's ports).
    tss: *mut TssIo,
    /// 0 for the boot CPU, then in the order the CPUs came up.
    pub index: usize,
    /// The page tables this CPU's CR3 holds (`klock`'s shootdown reads the others').
    pub cr3: core::sync::atomic::AtomicU64,
    /// 1 while this CPU runs the IPC fastpath without the kernel lock (set and cleared
    /// by the entry and exit stubs; `klock::klock_readers` waits for it to clear).
    pub fast: core::sync::atomic::AtomicU64,
    /// IPCs the fastpath carried on this CPU with the kernel lock held (written by this
    /// CPU only).
    pub fast_ipcs: core::sync::atomic::AtomicU64,
    /// IPCs it carried without the kernel lock.
    pub fast_shared: core::sync::atomic::AtomicU64,
    /// Device interrupts this CPU took (written by this CPU only).
    pub irqs: core::sync::atomic::AtomicU64,
    /// Where this CPU's `kernel::CpuView` is now (`Kernel::view` or its parked slot):
    /// written by the lock holder when it moves views (`kernel::switch_view`), read by
    /// this CPU's fastpath without the lock (while no CPU holds it).
    pub view: core::sync::atomic::AtomicU64,
}

/// The TSS followed by its I/O permission bitmap (8192 bytes + the terminating 0xFF).
#[repr(C)]
struct TssIo {
    tss: TaskStateSegment,
    iomap: [u8; 8193],
}

// `set_kernel_stack` writes `rsp0` at offset 4 of the TSS, which starts `TssIo`.
const _: () = assert!(
    core::mem::offset_of!(TaskStateSegment, privilege_stack_table) == 4 && core::mem::offset_of!(TssIo, tss) == 0
);

/// One CPU's tables: GS points at `percpu`; the GDT holds its TSS descriptor. In this
/// order, so that the TSS is reached through GS too (`set_kernel_stack`).
#[repr(C)]
struct CpuTables {
    percpu: PerCpu,
    tss_io: TssIo,
    gdt: GlobalDescriptorTable,
}

static CPUS: [KCell<CpuTables>; MAX_CPUS] = [const {
    KCell::new(CpuTables {
        percpu: PerCpu {
            user_rsp: 0,
            this: 0,
            tss: core::ptr::null_mut(),
            index: 0,
            cr3: core::sync::atomic::AtomicU64::new(0),
            fast: core::sync::atomic::AtomicU64::new(0),
            fast_ipcs: core::sync::atomic::AtomicU64::new(0),
            fast_shared: core::sync::atomic::AtomicU64::new(0),
            irqs: core::sync::atomic::AtomicU64::new(0),
            view: core::sync::atomic::AtomicU64::new(0),
        },
        tss_io: TssIo { tss: TaskStateSegment::new(), iomap: [0xff; 8193] },
        gdt: GlobalDescriptorTable::new(),
    })
}; MAX_CPUS];
static IDT: KCell<InterruptDescriptorTable> = KCell::new(InterruptDescriptorTable::new());

const IST_STACK_SIZE: usize = 16 * 1024;
#[repr(C, align(16))]
struct IstStack([u8; IST_STACK_SIZE]);
/// Each CPU's double-fault, NMI and machine-check stacks.
static IST_STACKS: [KCell<[IstStack; 3]>; MAX_CPUS] =
    [const { KCell::new([const { IstStack([0; IST_STACK_SIZE]) }; 3]) }; MAX_CPUS];

/// The running CPU's data (through GS, which `init_cpu` set).
#[inline(always)]
pub fn this_cpu() -> &'static mut PerCpu {
    let p: u64;
    // SAFETY: in the kernel GS is based at this CPU's `PerCpu` (set by `init_cpu`,
    // swapped on every entry from user mode), whose `this` is its own address.
    unsafe {
        core::arch::asm!("mov {}, gs:[{off}]", out(reg) p, off = const core::mem::offset_of!(PerCpu, this), options(nostack, readonly, preserves_flags))
    };
    // SAFETY: a static that lives for the whole run; only this CPU uses its own.
    unsafe { &mut *(p as *mut PerCpu) }
}

/// The running CPU's index (one load through GS).
#[inline(always)]
pub fn cpu_index() -> usize {
    let i: usize;
    // SAFETY: as in `this_cpu`: GS is based at this CPU's `PerCpu`.
    unsafe {
        core::arch::asm!("mov {}, gs:[{off}]", out(reg) i, off = const core::mem::offset_of!(PerCpu, index), options(nostack, readonly, preserves_flags))
    };
    i
}

/// Say where CPU `index`'s per-CPU kernel state is now (`PerCpu::view`).
pub fn set_view_of(index: usize, view: u64) {
    CPUS[index % MAX_CPUS].get().percpu.view.store(view, core::sync::atomic::Ordering::Relaxed);
}

/// Where this CPU's per-CPU kernel state is (one load through GS).
#[inline(always)]
pub fn view_addr() -> u64 {
    let v: u64;
    // SAFETY: as in `this_cpu`: GS is based at this CPU's `PerCpu`.
    unsafe {
        core::arch::asm!("mov {}, gs:[{off}]", out(reg) v, off = const core::mem::offset_of!(PerCpu, view), options(nostack, readonly, preserves_flags))
    };
    v
}

/// Whether CPU `index` is in the IPC fastpath without the kernel lock.
pub fn in_fastpath(index: usize) -> bool {
    CPUS[index % MAX_CPUS].get().percpu.fast.load(core::sync::atomic::Ordering::Acquire) != 0
}

/// One more IPC carried by the fastpath on this CPU (`shared`: without the lock).
pub fn count_fast_ipc(shared: bool) {
    // SAFETY: GS is based at this CPU's `PerCpu`; its counters are written by this CPU
    // only (others read them atomically), so a plain increment loses nothing.
    unsafe {
        if shared {
            core::arch::asm!("inc qword ptr gs:[{off}]", off = const core::mem::offset_of!(PerCpu, fast_shared), options(nostack));
        } else {
            core::arch::asm!("inc qword ptr gs:[{off}]", off = const core::mem::offset_of!(PerCpu, fast_ipcs), options(nostack));
        }
    }
}

/// One more device interrupt taken on this CPU.
pub fn count_irq() {
    // SAFETY: as in `count_fast_ipc`: this CPU's own counter.
    unsafe {
        core::arch::asm!("inc qword ptr gs:[{off}]", off = const core::mem::offset_of!(PerCpu, irqs), options(nostack))
    };
}

/// CPU `c`'s device interrupts, fastpath IPCs and those without the lock.
pub fn counts_of(c: usize) -> (u64, u64, u64) {
    use core::sync::atomic::Ordering::Relaxed;
    let p = &CPUS[c % MAX_CPUS].get().percpu;
    let shared = p.fast_shared.load(Relaxed);
    (p.irqs.load(Relaxed), p.fast_ipcs.load(Relaxed) + shared, shared)
}

/// IPCs the fastpath carried on every CPU since boot, and of them those without the
/// kernel lock.
pub fn fast_ipcs() -> (u64, u64) {
    (0..MAX_CPUS).map(counts_of).fold((0, 0), |(a, b), (_, f, u)| (a + f, b + u))
}

/// What CPU `index`'s CR3 holds (as it recorded it).
pub fn cr3_of(index: usize) -> u64 {
    CPUS[index % MAX_CPUS].get().percpu.cr3.load(core::sync::atomic::Ordering::Relaxed)
}

fn this_tss() -> &'static mut TssIo {
    // SAFETY: `tss` points at this CPU's TSS (set by `init_cpu`), used by this CPU only.
    unsafe { &mut *this_cpu().tss }
}

extern "C" {
    fn syscall_entry();
}

/// The boot CPU's tables and the shared IDT (`init_cpu(0)`, then the IDT).
pub fn init() {
    init_cpu(0);
    // IDT: every vector goes to its asm stub; the stubs share one dispatcher.
    let idt = IDT.get();
    for v in 0..256usize {
        let addr = VirtAddr::new(stub_addr(v));
        // SAFETY: each stub saves a TrapFrame, calls `trap_dispatch` and returns with iretq,
        // which is a valid handler for its vector (with or without an error code).
        let Some(opts) = (unsafe { set_handler(idt, v, addr) }) else { continue };
        match v {
            8 => {
                // SAFETY: IST index 0 is the double-fault stack set up above.
                unsafe { opts.set_stack_index(0) };
            }
            2 => {
                // SAFETY: IST index 1 is the NMI stack.
                unsafe { opts.set_stack_index(1) };
            }
            18 => {
                // SAFETY: IST index 2 is the machine-check stack.
                unsafe { opts.set_stack_index(2) };
            }
            // int3 may be used from user mode (it is reported as a fault).
            3 => {
                opts.set_privilege_level(PrivilegeLevel::Ring3);
            }
            _ => {}
        }
    }
    load_idt();
}

fn load_idt() {
    // SAFETY: the IDT is a static that lives forever; the boot CPU filled it in before
    // any other CPU started.
    unsafe { (*(IDT.get() as *const InterruptDescriptorTable)).load_unsafe() };
}

/// An application processor's tables (`index` > 0), and the IDT the boot CPU built.
pub fn init_ap(index: usize) {
    init_cpu(index);
    load_idt();
}

/// CPU `index`'s GDT, TSS (with its interrupt stacks), per-CPU data in GS and the
/// SYSCALL MSRs, loaded on the running CPU.
fn init_cpu(index: usize) {
    let t = CPUS[index].get();
    let tio = &mut t.tss_io;
    tio.tss.iomap_base = core::mem::size_of::<TaskStateSegment>() as u16;
    let ist = IST_STACKS[index].get();
    for (i, st) in ist.iter().enumerate() {
        tio.tss.interrupt_stack_table[i] = VirtAddr::new(st.0.as_ptr() as u64 + IST_STACK_SIZE as u64);
    }
    let gdt = &mut t.gdt;
    let kcs = gdt.append(Descriptor::kernel_code_segment());
    let kds = gdt.append(Descriptor::kernel_data_segment());
    let uds = gdt.append(Descriptor::user_data_segment());
    let ucs = gdt.append(Descriptor::user_code_segment());
    // SAFETY: the TSS and its bitmap are one static that lives for the whole run.
    let (tss_ref, iomap_ref) =
        unsafe { (&*(&tio.tss as *const TaskStateSegment), &*(&tio.iomap as *const [u8; 8193])) };
    let tss_sel = gdt.append(Descriptor::tss_segment_with_iomap(tss_ref, iomap_ref).expect("TSS I/O bitmap layout"));
    assert_eq!((kcs.0, kds.0, uds.0, ucs.0), (KERNEL_CS, KERNEL_DS, USER_DS, USER_CS));
    // SAFETY: the GDT is a static and never modified after this point.
    unsafe { (*(gdt as *const GlobalDescriptorTable)).load_unsafe() };
    // SAFETY: the selectors name the descriptors just appended to the loaded GDT.
    unsafe {
        use x86_64::instructions::segmentation::{Segment, CS, DS, ES, SS};
        CS::set_reg(kcs);
        SS::set_reg(kds);
        DS::set_reg(SegmentSelector::new(0, PrivilegeLevel::Ring0));
        ES::set_reg(SegmentSelector::new(0, PrivilegeLevel::Ring0));
        load_tss(tss_sel);
    }

    // Per-CPU data in GS (kernel), user GS in KernelGsBase, swapped on entry/exit.
    let pc = &mut t.percpu;
    pc.this = pc as *mut PerCpu as u64;
    pc.tss = tio as *mut TssIo;
    pc.index = index;
    GsBase::write(VirtAddr::new(pc.this));
    KernelGsBase::write(VirtAddr::new(0));
    // The CPU's index in TSC_AUX, for user code's `RDTSCP` (`abi::MSR_TSC_AUX`): where a
    // server's per-CPU endpoints are, a client finds by it without a system call.
    let rdtscp = core::arch::x86_64::__cpuid(0x8000_0001).edx & (1 << 27) != 0;
    if rdtscp {
        // SAFETY: the CPU has TSC_AUX (RDTSCP, checked above); it only changes what RDTSCP
        // and RDPID read.
        unsafe { x86_64::registers::model_specific::Msr::new(abi::MSR_TSC_AUX).write(index as u64) };
    }

    // SYSCALL/SYSRET.
    // SAFETY: enabling SCE and NXE (the latter already on if supported) does not change
    // the meaning of any existing mapping.
    unsafe { Efer::update(|f| f.insert(EferFlags::SYSTEM_CALL_EXTENSIONS)) };
    Star::write(
        SegmentSelector(USER_CS),
        SegmentSelector(USER_DS),
        SegmentSelector(KERNEL_CS),
        SegmentSelector(KERNEL_DS),
    )
    .expect("STAR selectors");
    LStar::write(VirtAddr::new(syscall_entry as *const () as usize as u64));
    // Interrupts, direction, trap, alignment check and nested task off on entry.
    SFMask::write(
        RFlags::INTERRUPT_FLAG
            | RFlags::DIRECTION_FLAG
            | RFlags::TRAP_FLAG
            | RFlags::ALIGNMENT_CHECK
            | RFlags::NESTED_TASK
            | RFlags::IOPL_HIGH
            | RFlags::IOPL_LOW,
    );
}

/// Set vector `v`'s handler address, returning its options (`None` for reserved vectors).
///
/// # Safety
/// `addr` must be a valid handler for vector `v`.
unsafe fn set_handler(
    idt: &mut InterruptDescriptorTable,
    v: usize,
    addr: VirtAddr,
) -> Option<&mut x86_64::structures::idt::EntryOptions> {
    // SAFETY: forwarded from the caller.
    unsafe {
        Some(match v {
            0 => idt.divide_error.set_handler_addr(addr),
            1 => idt.debug.set_handler_addr(addr),
            2 => idt.non_maskable_interrupt.set_handler_addr(addr),
            3 => idt.breakpoint.set_handler_addr(addr),
            4 => idt.overflow.set_handler_addr(addr),
            5 => idt.bound_range_exceeded.set_handler_addr(addr),
            6 => idt.invalid_opcode.set_handler_addr(addr),
            7 => idt.device_not_available.set_handler_addr(addr),
            8 => idt.double_fault.set_handler_addr(addr),
            10 => idt.invalid_tss.set_handler_addr(addr),
            11 => idt.segment_not_present.set_handler_addr(addr),
            12 => idt.stack_segment_fault.set_handler_addr(addr),
            13 => idt.general_protection_fault.set_handler_addr(addr),
            14 => idt.page_fault.set_handler_addr(addr),
            16 => idt.x87_floating_point.set_handler_addr(addr),
            17 => idt.alignment_check.set_handler_addr(addr),
            18 => idt.machine_check.set_handler_addr(addr),
            19 => idt.simd_floating_point.set_handler_addr(addr),
            20 => idt.virtualization.set_handler_addr(addr),
            21 => idt.cp_protection_exception.set_handler_addr(addr),
            28 => idt.hv_injection_exception.set_handler_addr(addr),
            29 => idt.vmm_communication_exception.set_handler_addr(addr),
            30 => idt.security_exception.set_handler_addr(addr),
            32..=255 => idt[v as u8].set_handler_addr(addr),
            _ => return None,
        })
    }
}

/// Where the TSS's `rsp0` lies from GS's base: `PerCpu` starts this CPU's `CpuTables`
/// (`repr(C)`), whose TSS follows at a fixed offset, with `rsp0` at its offset 4.
const RSP0_FROM_GS: usize = core::mem::offset_of!(CpuTables, tss_io) + 4 - core::mem::offset_of!(CpuTables, percpu);

/// Point the TSS at a thread's kernel stack: interrupts from user mode take it from
/// there, and so does the SYSCALL entry (through GS: one store serves both).
#[inline]
pub fn set_kernel_stack(top: u64) {
    // A kernel stack's top is a canonical kernel address (the direct map): no check.
    // SAFETY: GS is based at this CPU's `PerCpu` (as in `this_cpu`); the store is the
    // TSS's `rsp0` (`RSP0_FROM_GS`), this CPU's alone.
    unsafe {
        core::arch::asm!(
            "mov gs:[{rsp0_off}], {top}",
            top = in(reg) top,
            rsp0_off = const RSP0_FROM_GS,
            options(nostack, preserves_flags),
        )
    };
}

/// Record what this CPU's CR3 holds (`PerCpu::cr3`).
#[inline(always)]
pub fn record_cr3(pml4: u64) {
    // SAFETY: GS is based at this CPU's `PerCpu`; its `cr3` is written by this CPU only
    // (other CPUs read it atomically).
    unsafe {
        core::arch::asm!("mov gs:[{off}], {v}", v = in(reg) pml4, off = const core::mem::offset_of!(PerCpu, cr3), options(nostack, preserves_flags))
    };
}

/// Point FS at a thread's UTCB (user mode reads it through FS).
#[inline]
pub fn set_fs_base(utcb: u64) {
    // A UTCB address was checked (user range, canonical) when the thread was made: no
    // truncation on every switch.
    debug_assert!(utcb < abi::layout::USER_END);
    let mut msr = x86_64::registers::model_specific::FsBase::MSR;
    // SAFETY: IA32_FS_BASE takes any canonical address; a user-range address is one, and
    // only user mode uses FS.
    unsafe { msr.write(utcb) };
}

/// Allow user mode the ports whose bits are clear in `map`, up to port `max`.
pub fn load_iomap(map: &[u8], max: u16) {
    let n = max as usize / 8 + 1;
    this_tss().iomap[..n].copy_from_slice(&map[..n]);
}

/// Deny again every port up to `max`.
pub fn clear_iomap(max: u16) {
    let n = max as usize / 8 + 1;
    this_tss().iomap[..n].fill(0xff);
}

// Stubs: 256 of them, 16 bytes apart. A stub pushes a zero error code where the CPU
// pushes none, then calls `trap_common`; the return address tells which stub it was,
// and `trap_common` replaces it with the vector number.
global_asm!(
    r#"
    .section .text.trap_stubs, "ax"
    .p2align 4
    .global trap_stubs
trap_stubs:
    .set scion_vec, 0
    .rept 256
    .p2align 4
    .if (scion_vec == 8) || ((scion_vec >= 10) && (scion_vec <= 14)) || (scion_vec == 17) || (scion_vec == 21) || (scion_vec == 29) || (scion_vec == 30)
    .else
    push 0
    .endif
    call trap_common
    .set scion_vec, scion_vec + 1
    .endr
    .text
"#
);

extern "C" {
    static trap_stubs: u8;
}

/// Address of the stub for vector `v`.
fn stub_addr(v: usize) -> u64 {
    addr_of!(trap_stubs) as u64 + 16 * v as u64
}

global_asm!(
    r#"
    .text
    .macro PUSH_GPRS
    push rax
    push rbx
    push rcx
    push rdx
    push rsi
    push rdi
    push rbp
    push r8
    push r9
    push r10
    push r11
    push r12
    push r13
    push r14
    push r15
    .endm

    /* The big kernel lock (`klock`): taken after the registers are saved on every
       entry, with this CPU's index + 1; clobbers the caller-saved registers. Held
       already by this CPU only when the kernel itself faulted (a bug: the entry
       panics). While it waits, the CPU answers the holder's requests (`klock_wait`). */
    .macro KLOCK
.Lklock_try\@:
    /* ecx = this CPU's index + 1, the lock word's value for it and the
       KERNEL_VIEW compare's below: worked out again after each wait, as klock_wait
       (Rust code) clobbers it — with what it left there, the lock word named no CPU
       and a CPU whose view Kernel did not hold could skip take_view and run on
       another CPU's view. */
    mov ecx, dword ptr gs:[{pc_index}]
    inc ecx
    xor eax, eax
    lock cmpxchg dword ptr [rip + KERNEL_LOCK], ecx
    je .Lklock_done\@
    cmp eax, ecx
    je .Lklock_done\@
    call klock_wait
    jmp .Lklock_try\@
.Lklock_readers\@:
    call klock_readers
    mov ecx, dword ptr gs:[{pc_index}]
    inc ecx
    jmp .Lklock_read\@
.Lklock_view\@:
    call take_view
    jmp .Lklock_end\@
.Lklock_done\@:
    /* With several CPUs, others may be in the fastpath without the lock: wait until
       they are out (klock_readers). */
    cmp byte ptr [rip + KLOCK_READERS], 0
    jne .Lklock_readers\@
.Lklock_read\@:
    /* The kernel's per-CPU part must be this CPU's (kernel::take_view). */
    cmp dword ptr [rip + KERNEL_VIEW], ecx
    jne .Lklock_view\@
.Lklock_end\@:
    .endm

    .macro KUNLOCK
    mov dword ptr [rip + KERNEL_LOCK], 0
    .endm

    .macro POP_GPRS
    pop r15
    pop r14
    pop r13
    pop r12
    pop r11
    pop r10
    pop r9
    pop r8
    pop rbp
    pop rdi
    pop rsi
    pop rdx
    pop rcx
    pop rbx
    pop rax
    .endm

    /* The fastpath's entry (after swapgs and the switch to the kernel stack) saves
       what the fastpath or its partner's exit reads: the user rip, rflags and rsp, the
       arguments and message registers the Rust code may clobber (rdi, rsi, rdx, r8, r9,
       r10) and the rbx and rbp the caller gets back when it is resumed (the number,
       known from the entry taken, only when the general path is to run).
       r12..r15 (MR3..MR6) stay in their registers (callee-saved for the Rust code) and
       go to the partner from there; the frame's other slots are filled (at 6:) only
       when the general path is to run. A blocked thread's frame is read for nothing
       else: only a sender's message registers are read from a frame
       (ipc::message_of), and the fastpath leaves no thread waiting to send. */
    .macro FAST_SAVE
    sub rsp, {frame_size}
    mov [rsp + {f_rip}], rcx
    mov [rsp + {f_rflags}], r11
    mov rcx, gs:[{pc_user_rsp}]
    mov [rsp + {f_rsp}], rcx
    mov [rsp + {f_rdi}], rdi
    mov [rsp + {f_rsi}], rsi
    mov [rsp + {f_rdx}], rdx
    mov [rsp + {f_r10}], r10
    mov [rsp + {f_r8}], r8
    mov [rsp + {f_r9}], r9
    mov [rsp + {f_rbx}], rbx
    mov [rsp + {f_rbp}], rbp
    xor ebp, ebp
    .endm

    /* Where a fastpath function (called with rsp at the caller's frame) returns to:
       with its partner's kernel stack top in rax (a kernel address: negative), the
       partner is left through its frame (exit); with 0 it declined (the code that
       follows). The same place is where the caller, blocked by that IPC, is resumed
       when a general path switches back to it (switch_context's ret, rax = 1): the
       call left its return address just below the frame, where switch_context's
       context ends, 7 words below the frame (Tcb::resume_sp). */
    .macro FAST_RETURNED exit
    test rax, rax
    js \exit
    jnz ipc_resume
    .endm

    /* Then the fastpath without the kernel lock while nobody holds it: this CPU says it
       is in the fastpath, then looks at the lock word and the fastpath's shutter beside
       it, in one compare (a CPU that takes the lock waits until no other is in the
       fastpath: klock_readers). \reg(frame) for a register message,
       \str(frame) for one with a string, returns the partner's kernel stack top, or
       0: then the lock, and the fastpath under it (ipc_fastpath, which can do what the
       shared one declines), then the general path (6:). If the lock is taken, it waits until it
       is free (answering its holder's requests) and tries again, rather than take it
       too (two CPUs doing IPC would otherwise hand it back and forth from then on,
       each finding the other holding it). */
    .macro FAST_TRY num, reg, str
.Lfast_try\@:
    mov qword ptr gs:[{pc_fast}], 1
    mfence
    cmp qword ptr [rip + KERNEL_LOCK], 0
    jne .Lfast_wait\@
    mov rdi, rsp
    test dword ptr [rsp + {f_r10}], {tag_string}
    jnz .Lfast_str\@
    call \reg
    FAST_RETURNED ipc_fast_exit_shared
    jmp .Lfast_no\@
.Lfast_str\@:
    call \str
    FAST_RETURNED ipc_fast_exit_shared
.Lfast_no\@:
    mov qword ptr [rsp + {f_rax}], \num
    jmp 6f
.Lfast_wait\@:
    /* The lock word is free: the fastpath is shut (MACHINE FASTPATH). */
    cmp dword ptr [rip + KERNEL_LOCK], 0
    je .Lfast_no\@
    mov qword ptr gs:[{pc_fast}], 0
    call klock_wait
    jmp .Lfast_try\@
    .endm

    /* Interrupts and exceptions: [rsp] = return address into the stub, error, rip, cs, ... */
    .global trap_common
trap_common:
    push rax
    mov rax, [rsp + 8]
    sub rax, offset trap_stubs
    shr rax, 4
    mov [rsp + 8], rax
    pop rax
    test qword ptr [rsp + 24], 3
    jz 1f
    swapgs
1:
    PUSH_GPRS
    xor ebp, ebp
    cld
    /* NMI and machine check (which may arrive while this CPU holds the lock; they only
       report) and the TLB shootdown IPI (whose sender holds the lock and waits for
       this CPU) do not take the lock. */
    mov rax, [rsp + {f_vector}]
    cmp rax, 2
    je 3f
    cmp rax, 18
    je 3f
    cmp rax, {vec_shootdown}
    je 4f
    KLOCK
    mov rdi, rsp
    call trap_dispatch
    .global trap_return
trap_return:
    KUNLOCK
5:
    POP_GPRS
    add rsp, 16
    test qword ptr [rsp + 8], 3
    jz 2f
    swapgs
2:
    iretq
3:
    mov rdi, rsp
    call trap_dispatch
    jmp 5b
4:
    call shootdown_ipi
    test rax, rax
    jnz trap_return
    jmp 5b

    /* SYSCALL: rcx = user rip, r11 = user rflags, rsp = user rsp. */
    .global syscall_entry
syscall_entry:
    swapgs
    mov gs:[{pc_user_rsp}], rsp
    mov rsp, gs:[{pc_rsp0}]
    /* IPC_CALL (2:) and IPC_REPLY_WAIT (3:) go to the fastpath, everything else
       builds its whole frame and takes the general path (1:). */
    cmp rax, {ipc_call}
    je 2f
    cmp rax, {ipc_reply_wait}
    je 3f
    push {user_ds}
    push qword ptr gs:[{pc_user_rsp}]
    push r11
    push {user_cs}
    push rcx
    push 0
    push 0x80
    PUSH_GPRS
    xor ebp, ebp
    jmp 1f
2:
    FAST_SAVE
    FAST_TRY {ipc_call}, ipc_fast_call_shared, ipc_fast_call_string_shared
3:
    FAST_SAVE
    FAST_TRY {ipc_reply_wait}, ipc_fast_reply_wait_shared, ipc_fast_reply_wait_string_shared
6:
    mov qword ptr gs:[{pc_fast}], 0
    /* The rest of the frame, as the pushes of the general path would have made it
       (rcx and r11 are the user rip and rflags, as syscall left them). */
    mov qword ptr [rsp + {f_ss}], {user_ds}
    mov qword ptr [rsp + {f_cs}], {user_cs}
    mov qword ptr [rsp + {f_error}], 0
    mov qword ptr [rsp + {f_vector}], 0x80
    mov rcx, [rsp + {f_rip}]
    mov [rsp + {f_rcx}], rcx
    mov r11, [rsp + {f_rflags}]
    mov [rsp + {f_r11}], r11
    mov [rsp + {f_r12}], r12
    mov [rsp + {f_r13}], r13
    mov [rsp + {f_r14}], r14
    mov [rsp + {f_r15}], r15
    KLOCK
    mov rax, [rsp + {f_rax}]
    mov rdi, rsp
    mov rsi, rax
    call ipc_fastpath
    FAST_RETURNED ipc_fast_exit
    mov rdi, rsp
    call syscall_dispatch
    jmp syscall_exit
1:
    KLOCK
    mov rdi, rsp
    call syscall_dispatch
syscall_exit:
    KUNLOCK
    POP_GPRS
    /* rsp -> vector; rip at +16, rflags at +32, rsp at +40 */
    mov rcx, [rsp + 16]
    mov r11, [rsp + 32]
    mov rsp, [rsp + 40]
    swapgs
    sysretq

    /* The IPC fastpath switched to the partner whose kernel stack top is in rax (its
       frame ends there); rsp is the caller's frame (it now blocks: its kernel context
       is the fastpath call's return, FAST_RETURNED). The message registers come from
       the caller's frame, everything else from the partner's (rdi: the badge);
       r12..r15 (MR3..MR6) are still the caller's, which the fastpath (Rust code, for
       which they are callee-saved) has not changed. */
    .macro FAST_EXIT shared
    mov r10, [rsp + {f_r10}]
    mov r8, [rsp + {f_r8}]
    mov r9, [rsp + {f_r9}]
    mov rbx, [rax + {f_rbx} - {frame_size}]
    mov rbp, [rax + {f_rbp} - {frame_size}]
    mov rdi, [rax + {f_rdi} - {frame_size}]
    mov rsi, [rax + {f_rsi} - {frame_size}]
    mov rdx, [rax + {f_rdx} - {frame_size}]
    mov rcx, [rax + {f_rip} - {frame_size}]
    mov r11, [rax + {f_rflags} - {frame_size}]
    mov rsp, [rax + {f_rsp} - {frame_size}]
    xor eax, eax
    /* The last touch of kernel memory: after it a lock holder may change anything. */
    .if \shared
    mov qword ptr gs:[{pc_fast}], 0
    .else
    KUNLOCK
    .endif
    swapgs
    sysretq
    .endm
ipc_fast_exit:
    FAST_EXIT 0
    /* The same, from the fastpath that ran without the lock. */
ipc_fast_exit_shared:
    FAST_EXIT 1

    /* A thread that blocked in the IPC fastpath, resumed by switch_context (at
       FAST_RETURNED): reap, then leave through its frame (built by syscall_entry, so
       sysret is right). */
ipc_resume:
    call thread_first_run
    jmp syscall_exit

    /* switch_context(save: *mut u64, load: u64); returns 1 in rax, which tells a
       thread resumed where its fastpath call returns (FAST_RETURNED) from that call's
       own results (0, or a kernel address). */
    .global switch_context
switch_context:
    push rbp
    push rbx
    push r12
    push r13
    push r14
    push r15
    mov [rdi], rsp
    mov rsp, rsi
    pop r15
    pop r14
    pop r13
    pop r12
    pop rbx
    pop rbp
    mov eax, 1
    ret

    /* First run of a new thread: reap, then leave through the iret path. */
    .global thread_trampoline
thread_trampoline:
    call thread_first_run
    jmp trap_return
"#,
    user_ds = const USER_DS as u64,
    user_cs = const USER_CS as u64,
    f_r10 = const core::mem::offset_of!(TrapFrame, r10),
    f_r8 = const core::mem::offset_of!(TrapFrame, r8),
    f_r9 = const core::mem::offset_of!(TrapFrame, r9),
    f_rbx = const core::mem::offset_of!(TrapFrame, rbx),
    f_rbp = const core::mem::offset_of!(TrapFrame, rbp),
    f_rdi = const core::mem::offset_of!(TrapFrame, rdi),
    f_rsi = const core::mem::offset_of!(TrapFrame, rsi),
    f_rdx = const core::mem::offset_of!(TrapFrame, rdx),
    f_rip = const core::mem::offset_of!(TrapFrame, rip),
    f_rflags = const core::mem::offset_of!(TrapFrame, rflags),
    f_rsp = const core::mem::offset_of!(TrapFrame, rsp),
    f_rax = const core::mem::offset_of!(TrapFrame, rax),
    f_rcx = const core::mem::offset_of!(TrapFrame, rcx),
    f_r11 = const core::mem::offset_of!(TrapFrame, r11),
    f_r12 = const core::mem::offset_of!(TrapFrame, r12),
    f_r13 = const core::mem::offset_of!(TrapFrame, r13),
    f_r14 = const core::mem::offset_of!(TrapFrame, r14),
    f_r15 = const core::mem::offset_of!(TrapFrame, r15),
    f_ss = const core::mem::offset_of!(TrapFrame, ss),
    f_cs = const core::mem::offset_of!(TrapFrame, cs),
    f_error = const core::mem::offset_of!(TrapFrame, error),
    frame_size = const TRAP_FRAME_SIZE,
    ipc_call = const abi::sys::IPC_CALL,
    ipc_reply_wait = const abi::sys::IPC_REPLY_WAIT,
    tag_string = const abi::ipc::TAG_STRING,
    f_vector = const core::mem::offset_of!(TrapFrame, vector),
    pc_index = const core::mem::offset_of!(PerCpu, index),
    pc_user_rsp = const core::mem::offset_of!(PerCpu, user_rsp),
    pc_rsp0 = const RSP0_FROM_GS,
    pc_fast = const core::mem::offset_of!(PerCpu, fast),
    vec_shootdown = const VEC_SHOOTDOWN as u64,
);

extern "C" {
    fn switch_context(save: *mut u64, load: u64);
    fn thread_trampoline();
}

pub fn trampoline_addr() -> u64 {
    thread_trampoline as *const () as usize as u64
}

/// Save the current kernel context into `*save` and resume the one at `load`.
///
/// # Safety
/// `load` must be a stack pointer saved by `switch_context` (or prepared by
/// `prepare_stack`) on a live kernel stack, and no Rust reference into kernel state
/// may be held across this call by the caller's frames in a way the callee could
/// invalidate.
pub unsafe fn switch(save: *mut u64, load: u64) {
    // SAFETY: forwarded from the caller.
    unsafe { switch_context(save, load) }
}

/// Lay out a new thread's kernel stack so that `switch` to the returned stack pointer
/// enters `thread_trampoline`, which leaves through `trap_return` with `frame`.
///
/// # Safety
/// `top` must be the top of a writable, 16-byte aligned kernel stack of at least one page.
pub unsafe fn prepare_stack(top: u64, frame: TrapFrame) -> u64 {
    // SAFETY: the caller guarantees the stack is writable; the frame and the 7 words
    // below it lie within its first page from the top.
    unsafe {
        frame_at(top).write(frame);
        let sp = top_context(top);
        let words = sp as *mut u64;
        for i in 0..6 {
            words.add(i).write(0); // r15 r14 r13 r12 rbx rbp
        }
        words.add(6).write(trampoline_addr());
        sp
    }
}

/// The user-mode frame of a thread whose kernel stack top is `top`.
pub fn frame_at(top: u64) -> *mut TrapFrame {
    (top - TRAP_FRAME_SIZE as u64) as *mut TrapFrame
}

/// Words of a `switch_context` context: six callee-saved registers, then the return.
const CONTEXT_WORDS: u64 = 7;

/// A kernel context right below the frame of the kernel stack whose top is `top`: what
/// `switch_context` resumes for a new thread (returning into `thread_trampoline`) and
/// for one blocked in the IPC fastpath (returning where the fastpath was called).
pub fn top_context(top: u64) -> u64 {
    frame_at(top) as u64 - CONTEXT_WORDS * 8
}

// The stub tells a partner's kernel stack top from 0 and from `switch_context`'s 1 by
// its sign (`FAST_RETURNED`): kernel stacks lie in the direct map, in the upper half.
const _: () = assert!((crate::arch::boot::DIRECT_MAP as i64) < 0);

pub fn new_user_frame(rip: u64, rsp: u64, arg: u64) -> TrapFrame {
    TrapFrame {
        rip,
        rsp,
        rdi: arg,
        cs: USER_CS as u64,
        ss: USER_DS as u64,
        rflags: RFlags::INTERRUPT_FLAG.bits() | 0x2,
        ..TrapFrame::default()
    }
}

/// End the emulation through QEMU's isa-debug-exit device (port 0xf4): QEMU exits with
/// status `(code << 1) | 1`. Without the device the write does nothing.
pub fn debug_exit(code: u32) {
    // SAFETY: port 0xf4 is the isa-debug-exit device every Scion machine has (or
    // nothing); writing it touches no memory.
    unsafe { x86_64::instructions::port::Port::<u32>::new(0xf4).write(code) };
}

/// `debug_exit`, then halt for good (when there is no such device).
pub fn machine_exit(code: u32) -> ! {
    x86_64::instructions::interrupts::disable();
    debug_exit(code);
    loop {
        x86_64::instructions::hlt();
    }
}

/// The loaded address space's PML4 (physical).
pub fn current_cr3() -> u64 {
    let (f, _) = x86_64::registers::control::Cr3::read_raw();
    f.start_address().as_u64()
}

/// Load the address space whose PML4 is the frame `pml4`.
#[inline]
pub fn load_cr3(pml4: u64) {
    use x86_64::registers::control::{Cr3, Cr3Flags};
    use x86_64::structures::paging::PhysFrame;
    // A task's PML4 is a frame from the frame allocator: page-aligned, in physical
    // memory (no checks on every switch).
    let frame = PhysFrame::containing_address(x86_64::PhysAddr::new_truncate(pml4));
    // SAFETY: `pml4` is a PML4 frame whose kernel half is the boot PML4's, so the
    // kernel (code, stacks, direct map) stays mapped across the switch.
    unsafe { Cr3::write(frame, Cr3Flags::empty()) };
    record_cr3(pml4);
}
