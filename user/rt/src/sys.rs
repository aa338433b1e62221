//! System call wrappers. The register convention is in `abi`; each wrapper that
//! cannot break the caller's memory safety is a safe function.

use abi::{check, sys, tctl, Error};
use core::arch::asm;

/// Raw system call with up to six arguments; returns rax, rdi, rsi, rdx, r10, r8, r9.
///
/// # Safety
/// Some calls change the caller's own address space or threads (unmap, grant, stop,
/// destroy); the caller must know that no live Rust reference is affected.
#[inline(always)]
pub unsafe fn syscall(n: u64, a0: u64, a1: u64, a2: u64, a3: u64, a4: u64, a5: u64) -> [u64; 7] {
    let (rax, rdi, rsi, rdx, r10, r8, r9);
    // SAFETY: `syscall` clobbers rcx and r11 (declared); the kernel restores every other
    // register except those it returns results in, all declared as outputs here.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") n => rax,
            inlateout("rdi") a0 => rdi,
            inlateout("rsi") a1 => rsi,
            inlateout("rdx") a2 => rdx,
            inlateout("r10") a3 => r10,
            inlateout("r8") a4 => r8,
            inlateout("r9") a5 => r9,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    [rax, rdi, rsi, rdx, r10, r8, r9]
}

/// A system call that only reads its arguments and touches nothing of the caller's
/// memory except what it is told to write (checked by the kernel).
#[inline(always)]
fn safe_call(n: u64, a0: u64, a1: u64, a2: u64, a3: u64, a4: u64) -> [u64; 7] {
    // SAFETY: used only for calls that cannot unmap or alter the caller's memory or
    // threads behind its back (see each caller).
    unsafe { syscall(n, a0, a1, a2, a3, a4, 0) }
}

pub fn null() -> u64 {
    safe_call(sys::NULL, 0, 0, 0, 0, 0)[0]
}

pub struct KernelInfo {
    pub abi_version: u64,
    pub ticks: u64,
    pub tsc_per_ms: u64,
    pub quota_limit: u64,
    pub quota_used: u64,
    pub free_frames: u64,
}

pub fn kernel_info() -> KernelInfo {
    let r = safe_call(sys::KERNEL_INFO, 0, 0, 0, 0, 0);
    KernelInfo {
        abi_version: r[1],
        ticks: r[2],
        tsc_per_ms: r[3],
        quota_limit: r[4],
        quota_used: r[5],
        free_frames: r[6],
    }
}

/// `KERNEL_INFO(KERNEL_INFO_TABLES)`: free task slots, free thread slots (of which the
/// last `abi::tables::ROOT_TASKS` and `ROOT_THREADS` are root's alone).
pub fn kernel_tables() -> (u64, u64) {
    let r = safe_call(sys::KERNEL_INFO, abi::KERNEL_INFO_TABLES, 0, 0, 0, 0);
    (r[1], r[2])
}

/// `KERNEL_INFO(KERNEL_INFO_MEMORY)`: where the machine's frames are, from the kernel's
/// side — [RAM, kept at boot, kernel heap, given to sigma0, kernel objects, free].
pub fn kernel_memory() -> [u64; 6] {
    let r = safe_call(sys::KERNEL_INFO, abi::KERNEL_INFO_MEMORY, 0, 0, 0, 0);
    [r[1], r[2], r[3], r[4], r[5], r[6]]
}

static TSC_PER_MS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Microseconds since boot, from the TSC (the kernel's calibration, asked once).
pub fn now_us() -> u64 {
    use core::sync::atomic::Ordering;
    let mut per_ms = TSC_PER_MS.load(Ordering::Relaxed);
    if per_ms == 0 {
        per_ms = kernel_info().tsc_per_ms.max(1);
        TSC_PER_MS.store(per_ms, Ordering::Relaxed);
    }
    (rdtsc() as u128 * 1000 / per_ms as u128) as u64
}

/// What `KERNEL_INFO(KERNEL_INFO_SMP)` tells of the CPUs.
#[derive(Clone, Copy, Debug)]
pub struct SmpInfo {
    pub cpus: u64,
    /// Timer ticks the CPUs other than the boot CPU have taken.
    pub ap_ticks: u64,
    /// Times the kernel lock passed from one CPU to another.
    pub handovers: u64,
    pub shootdowns: u64,
    /// Times a CPU was made to leave a thread's user mode (to stop or destroy it).
    pub stalls: u64,
    /// IPCs the fastpath carried without the kernel lock (same-CPU IPC beside other
    /// CPUs).
    pub fast_unlocked: u64,
}

/// What `KERNEL_INFO(KERNEL_INFO_CPU, cpu)` tells of one CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuInfo {
    /// Device interrupts it took.
    pub irqs: u64,
    /// IPCs the fastpath carried on it, and of them those without the kernel lock.
    pub fast_ipcs: u64,
    pub fast_unlocked: u64,
    /// TSC ticks it spent halted.
    pub idle_tsc: u64,
}

/// One CPU's counts (`InvalidArg`: no such CPU running).
pub fn cpu_info(cpu: u64) -> Result<CpuInfo, Error> {
    let r = safe_call(sys::KERNEL_INFO, abi::KERNEL_INFO_CPU, cpu, 0, 0, 0);
    abi::check(r[0])?;
    Ok(CpuInfo { irqs: r[1], fast_ipcs: r[2], fast_unlocked: r[3], idle_tsc: r[4] })
}

pub fn smp_info() -> SmpInfo {
    let r = safe_call(sys::KERNEL_INFO, abi::KERNEL_INFO_SMP, 0, 0, 0, 0);
    SmpInfo { cpus: r[1], ap_ticks: r[2], handovers: r[3], shootdowns: r[4], stalls: r[5], fast_unlocked: r[6] }
}

/// TSC ticks the CPU has spent idle since boot (`KERNEL_INFO(1)`).
pub fn idle_tsc() -> u64 {
    safe_call(sys::KERNEL_INFO, 1, 0, 0, 0, 0)[1]
}

pub fn debug_put(bytes: &[u8]) -> Result<(), Error> {
    check(safe_call(sys::DEBUG_PUT, bytes.as_ptr() as u64, bytes.len() as u64, 0, 0, 0)[0])
}

/// Show `bytes` on the firmware's screen only (the kernel's text console on a UEFI
/// framebuffer; nothing happens without one): the console server's copy of what it
/// writes to COM1.
pub fn debug_put_screen(bytes: &[u8]) -> Result<(), Error> {
    check(safe_call(sys::DEBUG_PUT, bytes.as_ptr() as u64, bytes.len() as u64, abi::DEBUG_PUT_SCREEN, 0, 0)[0])
}

pub fn yield_now() {
    safe_call(sys::YIELD, 0, 0, 0, 0, 0);
}

pub fn sleep_us(us: u64) {
    safe_call(sys::SLEEP, us, 0, 0, 0, 0);
}

pub fn cap_copy(src: u64, dst: u64, rights: u64, badge: u64) -> Result<(), Error> {
    check(safe_call(sys::CAP_COPY, src, dst, rights, badge, 0)[0])
}

pub fn cap_delete(slot: u64) -> Result<(), Error> {
    check(safe_call(sys::CAP_DELETE, slot, 0, 0, 0, 0)[0])
}

/// (type, rights, badge)
pub fn cap_info(slot: u64) -> Result<(u64, u64, u64), Error> {
    let r = safe_call(sys::CAP_INFO, slot, 0, 0, 0, 0);
    check(r[0]).map(|_| (r[1], r[2], r[3]))
}

/// Which object the capability in `slot` names: equal for two capabilities exactly
/// when they name the same object (see `CAP_INFO`).
pub fn cap_object(slot: u64) -> Result<u64, Error> {
    let r = safe_call(sys::CAP_INFO, slot, 0, 0, 0, 0);
    check(r[0]).map(|_| r[4])
}

pub fn cap_give(task: u64, src: u64, dst: u64, rights: u64) -> Result<(), Error> {
    check(safe_call(sys::CAP_GIVE, task, src, dst, rights, 0)[0])
}

pub fn task_create(dst: u64, quota_pages: u64) -> Result<(), Error> {
    check(safe_call(sys::TASK_CREATE, dst, quota_pages, 0, 0, 0)[0])
}

/// Destroy a task. Destroying one's own task ends the program.
pub fn task_destroy(task: u64) -> Result<(), Error> {
    check(safe_call(sys::TASK_DESTROY, task, 0, 0, 0, 0)[0])
}

pub fn thread_create(task: u64, dst: u64, utcb: u64, prio: u64) -> Result<(), Error> {
    check(safe_call(sys::THREAD_CREATE, task, dst, utcb, prio, 0)[0])
}

/// Start a stopped thread at `ip` with stack `sp` and `arg` in rdi (ip = 0: resume).
pub fn thread_start(thread: u64, ip: u64, sp: u64, arg: u64) -> Result<(), Error> {
    check(safe_call(sys::THREAD_CONTROL, thread, tctl::START, ip, sp, arg)[0])
}

/// # Safety
/// Stopping a thread of one's own task that holds a lock or a reference others
/// wait on is the caller's responsibility.
pub unsafe fn thread_stop(thread: u64) -> Result<(), Error> {
    check(safe_call(sys::THREAD_CONTROL, thread, tctl::STOP, 0, 0, 0)[0])
}

pub fn thread_set_priority(thread: u64, prio: u64) -> Result<(), Error> {
    check(safe_call(sys::THREAD_CONTROL, thread, tctl::SET_PRIORITY, prio, 0, 0)[0])
}

pub fn thread_set_fault_handler(thread: u64, handler: u64, badge: u64) -> Result<(), Error> {
    check(safe_call(sys::THREAD_CONTROL, thread, tctl::SET_FAULT_HANDLER, handler, badge, 0)[0])
}

/// (state, priority)
pub fn thread_read_state(thread: u64) -> Result<(u64, u64), Error> {
    let r = safe_call(sys::THREAD_CONTROL, thread, tctl::READ_STATE, 0, 0, 0);
    check(r[0]).map(|_| (r[1], r[2]))
}

/// Run `thread` on CPU `cpu` (`THREAD_CONTROL SET_CPU`).
pub fn thread_set_cpu(thread: u64, cpu: u64) -> Result<(), Error> {
    check(safe_call(sys::THREAD_CONTROL, thread, tctl::SET_CPU, cpu, 0, 0)[0])
}

/// The CPU `thread` runs on (`READ_STATE`'s third word).
pub fn thread_cpu(thread: u64) -> Result<u64, Error> {
    let r = safe_call(sys::THREAD_CONTROL, thread, tctl::READ_STATE, 0, 0, 0);
    check(r[0]).map(|_| r[3])
}

/// # Safety
/// As for `thread_stop`.
pub unsafe fn thread_destroy(thread: u64) -> Result<(), Error> {
    check(safe_call(sys::THREAD_CONTROL, thread, tctl::DESTROY, 0, 0, 0)[0])
}

/// Ask for `pages` pages at `va` of one's own space to be present: touching each
/// page (reading is enough for demand-zero memory) makes the pager supply it.
pub fn prefault(va: u64, pages: u64) {
    for i in 0..pages {
        // SAFETY: a volatile read of an address in one's own space; a page not yet
        // present is supplied by the pager (or the program faults, as any access would).
        unsafe { core::ptr::read_volatile((va + i * 4096) as *const u8) };
    }
}

/// Touch every page of this program's image (code and constants read, data and bss
/// written: a page first read may be mapped read-only, and the first write fault again),
/// so that none of it faults later: for threads whose pager is their own program, which
/// serves only the region it manages, and for tests whose threads must not be reordered
/// by a first touch.
pub fn prefault_image() {
    extern "C" {
        /// Defined by `user/link/user.ld`: where the writable sections start, and the
        /// image's end.
        static __scion_data_start: u8;
        static __scion_image_end: u8;
    }
    const IMAGE_START: u64 = 0x40_0000;
    // Only the symbols' addresses are taken: nothing is read through them.
    let (data, end) = ((&raw const __scion_data_start) as u64, (&raw const __scion_image_end) as u64);
    prefault(IMAGE_START, data.saturating_sub(IMAGE_START).div_ceil(4096));
    let mut p = data;
    while p < end {
        // SAFETY: a page of this program's own data or bss: the byte is written back
        // with the value just read, by the only thread that runs (the caller starts its
        // threads after this), so nothing changes but the mapping's right.
        unsafe {
            let b = p as *mut u8;
            b.write_volatile(b.read_volatile());
        }
        p += 4096;
    }
}

/// Map (or with `abi::mem::GRANT`, move) one's own pages into a task.
///
/// # Safety
/// With GRANT the source range disappears from the caller's space: nothing may still
/// refer to it.
pub unsafe fn mem_map(task: u64, src: u64, dst: u64, pages: u64, flags: u64) -> Result<(), Error> {
    check(safe_call(sys::MEM_MAP, task, src, dst, pages, flags)[0])
}

/// Demap a flexpage: take its rights (all, if it names none) from everything others
/// derived from it, and with `abi::fpage::UNMAP_SELF` from the caller too.
///
/// # Safety
/// With UNMAP_SELF on memory, nothing may still refer to the range.
pub unsafe fn unmap(fpage: abi::fpage::Fpage, flags: u64) -> Result<(), Error> {
    check(safe_call(sys::UNMAP, fpage.0, flags, 0, 0, 0)[0])
}

/// Take back everything others derived from a flexpage of ours (pages, ports or
/// capabilities), keeping our own: safe, since nothing of the caller's changes.
pub fn revoke(fpage: abi::fpage::Fpage) -> Result<(), Error> {
    check(safe_call(sys::UNMAP, fpage.0, 0, 0, 0, 0)[0])
}

/// Root: let go of the memory left in the live update relay (`layout::UPDATE_RELAY`)
/// when it cannot go back to the server that handed it over.
pub fn unmap_update_relay() {
    let fp = abi::fpage::Fpage::mem(crate::layout::UPDATE_RELAY, crate::layout::UPDATE_RELAY_LOG2, 0);
    // SAFETY: the relay is only a receive window and a source of grants: no program
    // makes a reference into it (nothing in rt hands out a pointer there).
    let _ = unsafe { unmap(fp, abi::fpage::UNMAP_SELF) };
}

/// Unmap `pages` pages of one's own at `va` (page by page).
///
/// # Safety
/// Nothing may still refer to the range.
pub unsafe fn unmap_pages(va: u64, pages: u64) -> Result<(), Error> {
    for i in 0..pages {
        // SAFETY: forwarded from the caller.
        unsafe { unmap(abi::fpage::Fpage::mem(va + i * 4096, 12, 0), abi::fpage::UNMAP_SELF)? };
    }
    Ok(())
}

pub fn thread_set_pager(thread: u64, pager: u64, badge: u64) -> Result<(), Error> {
    check(safe_call(sys::THREAD_CONTROL, thread, tctl::SET_PAGER, pager, badge, 0)[0])
}

/// Move `thread`'s endpoint to `to` (both with `CONTROL`): sends through capabilities
/// naming `thread` reach `to` from now on (`THREAD_CONTROL SUCCEED`).
pub fn thread_succeed(thread: u64, to: u64) -> Result<(), Error> {
    check(safe_call(sys::THREAD_CONTROL, thread, tctl::SUCCEED, to, 0, 0)[0])
}

/// Make a capability for interrupt line `line` in slot `dst` (needs IRQ control).
pub fn irq_create(control: u64, line: u64, dst: u64) -> Result<(), Error> {
    check(safe_call(sys::IRQ_CONTROL, control, abi::irq::CREATE, line, dst, 0)[0])
}

/// Attach the calling thread to an interrupt line; its messages carry `badge`.
pub fn irq_attach(irq: u64, badge: u64) -> Result<(), Error> {
    check(safe_call(sys::IRQ_CONTROL, irq, abi::irq::ATTACH, badge, 0, 0)[0])
}

pub fn irq_ack(irq: u64) -> Result<(), Error> {
    check(safe_call(sys::IRQ_CONTROL, irq, abi::irq::ACK, 0, 0, 0)[0])
}

pub fn irq_detach(irq: u64) -> Result<(), Error> {
    check(safe_call(sys::IRQ_CONTROL, irq, abi::irq::DETACH, 0, 0, 0)[0])
}

/// How many times the interrupt behind `irq` was taken.
pub fn irq_count(irq: u64) -> Result<u64, Error> {
    let r = safe_call(sys::IRQ_CONTROL, irq, abi::irq::COUNT, 0, 0, 0);
    check(r[0]).map(|_| r[1])
}

/// With the IRQ control capability: a capability for PCI function `id` in `dst`.
pub fn pci_create(control: u64, id: u16, dst: u64) -> Result<(), Error> {
    check(safe_call(sys::IRQ_CONTROL, control, abi::irq::PCI_CREATE, id as u64, dst, 0)[0])
}

/// 32 bits of configuration space: of the device `cap` names at `off`, or, with the
/// IRQ control capability, of function `id`.
pub fn pci_read(cap: u64, id: u16, off: u16) -> Result<u32, Error> {
    let r = safe_call(sys::IRQ_CONTROL, cap, abi::irq::PCI_READ, (id as u64) << 16 | off as u64, 0, 0);
    check(r[0]).map(|_| r[1] as u32)
}

pub fn pci_write(dev: u64, off: u16, v: u32) -> Result<(), Error> {
    check(safe_call(sys::IRQ_CONTROL, dev, abi::irq::PCI_WRITE, off as u64, v as u64, 0)[0])
}

/// Let device `dev` reach `pages` of the caller's pages from `va` for DMA: true when
/// the IOMMU confines it to them, false when there is none (the driver is trusted).
pub fn pci_dma_map(dev: u64, va: u64, pages: u64) -> Result<bool, Error> {
    let r = safe_call(sys::IRQ_CONTROL, dev, abi::irq::PCI_DMA_MAP, va, pages, 0);
    check(r[0]).map(|_| r[1] == 1)
}

/// Take `pages` physical pages from `pa` out of device `dev`'s reach.
pub fn pci_dma_unmap(dev: u64, pa: u64, pages: u64) -> Result<(), Error> {
    check(safe_call(sys::IRQ_CONTROL, dev, abi::irq::PCI_DMA_UNMAP, pa, pages, 0)[0])
}

/// A device's MSI (one message) as an IRQ capability in `dst`; its interrupt number.
pub fn pci_msi(dev: u64, dst: u64) -> Result<u64, Error> {
    let r = safe_call(sys::IRQ_CONTROL, dev, abi::irq::PCI_MSI, 0, dst, 0);
    check(r[0]).map(|_| r[1])
}

/// BAR `i` of a device: (base, size, I/O ports).
pub fn pci_bar(dev: u64, i: u8) -> Result<(u64, u64, bool), Error> {
    let r = safe_call(sys::IRQ_CONTROL, dev, abi::irq::PCI_BAR, i as u64, 0, 0);
    check(r[0]).map(|_| (r[1], r[2], r[3] == 1))
}

/// A message-signalled interrupt for MSI-X entry `entry` of a device, as an IRQ
/// capability in `dst`; its interrupt number.
pub fn pci_msix(dev: u64, entry: u16, dst: u64) -> Result<u64, Error> {
    let r = safe_call(sys::IRQ_CONTROL, dev, abi::irq::PCI_MSIX, entry as u64, dst, 0);
    check(r[0]).map(|_| r[1])
}

/// (voluntary, involuntary) switches away from a task's threads: they blocked, or
/// were preempted.
pub fn task_switches(task: u64) -> Result<(u64, u64), Error> {
    let r = safe_call(sys::TASK_INFO, task, 0, 0, 0, 0);
    check(r[0]).map(|_| (r[4], r[5]))
}

/// (threads, quota limit, quota used) of a task.
pub fn task_info(task: u64) -> Result<(u64, u64, u64), Error> {
    let r = safe_call(sys::TASK_INFO, task, 0, 0, 0, 0);
    check(r[0]).map(|_| (r[1], r[2], r[3]))
}

pub fn thread_exit() -> ! {
    safe_call(sys::THREAD_EXIT, 0, 0, 0, 0, 0);
    unreachable!("thread_exit returned")
}

pub fn machine_exit(machine: u64, code: u32) -> Result<(), Error> {
    check(safe_call(sys::MACHINE, machine, abi::machine::EXIT, code as u64, 0, 0)[0])
}

/// Turn the kernel's IPC fastpath on or off; returns how many IPCs it has carried.
pub fn machine_fastpath(machine: u64, on: bool) -> Result<u64, Error> {
    let r = safe_call(sys::MACHINE, machine, abi::machine::FASTPATH, on as u64, 0, 0);
    check(r[0]).map(|_| r[1])
}

#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc is allowed in user mode (CR4.TSD is clear) and has no side effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The CPU this thread runs on, without a system call: `RDTSCP`'s ECX, which the kernel
/// sets to each CPU's index (`abi::MSR_TSC_AUX`). A hint — the thread may be moved right
/// after — and 0 on a CPU without `RDTSCP`.
#[inline]
pub fn cpu() -> u64 {
    use core::sync::atomic::{AtomicU8, Ordering};
    // 0: not asked yet, 1: the CPU has RDTSCP, 2: it has not.
    static HAS: AtomicU8 = AtomicU8::new(0);
    let has = match HAS.load(Ordering::Relaxed) {
        0 => {
            let yes = core::arch::x86_64::__cpuid(0x8000_0001).edx & (1 << 27) != 0;
            HAS.store(if yes { 1 } else { 2 }, Ordering::Relaxed);
            yes
        }
        h => h == 1,
    };
    if !has {
        return 0;
    }
    let aux: u32;
    // SAFETY: the CPU has RDTSCP (checked above), allowed in user mode (CR4.TSD is
    // clear); it reads the TSC and TSC_AUX and writes only the named registers.
    unsafe { asm!("rdtscp", out("eax") _, out("edx") _, out("ecx") aux, options(nostack, nomem, preserves_flags)) };
    aux as u64
}

/// 64 random bits from the CPU's generator (RDRAND, retried as Intel advises), or
/// None when the CPU has none (CPUID.1:ECX bit 30) or it failed ten times in a row.
pub fn rdrand() -> Option<u64> {
    let ecx = core::arch::x86_64::__cpuid(1).ecx;
    if ecx & (1 << 30) == 0 {
        return None;
    }
    for _ in 0..10 {
        let mut v = 0u64;
        // SAFETY: the CPU has RDRAND (checked above); the intrinsic writes only `v`.
        if unsafe { rdrand_step(&mut v) } == 1 {
            return Some(v);
        }
    }
    None
}

#[target_feature(enable = "rdrand")]
fn rdrand_step(v: &mut u64) -> i32 {
    core::arch::x86_64::_rdrand64_step(v)
}

/// rdtsc ordered after earlier instructions (lfence; rdtsc), for measurements.
#[inline(always)]
pub fn rdtsc_ordered() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: lfence and rdtsc have no effect beyond ordering and reading the TSC.
    unsafe { asm!("lfence", "rdtsc", out("eax") lo, out("edx") hi, options(nostack, nomem)) };
    ((hi as u64) << 32) | lo as u64
}
