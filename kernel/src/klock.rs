//! The big kernel lock, and the TLB shootdown that must not wait for it.
//!
//! Every entry into the kernel (system call, interrupt, exception; `KLOCK` in
//! `arch::cpu`) takes the lock after saving the user's registers, and every exit to
//! user mode (`KUNLOCK`) gives it back, as seL4 does on SMP: the kernel's state is
//! touched by one CPU at a time, so the single-CPU argument of `kcell` holds for whoever
//! holds the lock. The idle loop halts without it. The lock word holds the holder's CPU
//! index + 1 (0: free), so an entry that finds its own CPU holding it — the kernel
//! faulted inside itself, a bug — goes on to report it instead of spinning forever.
//!
//! One exception runs beside it: the IPC fastpath between two threads of one CPU
//! (`fastpath`), when no CPU holds the lock. The entry stub marks its CPU as in the
//! fastpath (`PerCpu::fast`), fences, and goes on without the lock only if the lock is
//! free; a CPU that takes the lock waits, before it touches anything, until no other
//! CPU is marked (`klock_readers`). Each side writes its flag before it reads the
//! other's, so either the fastpath sees the lock taken (then it waits until the lock is
//! free and tries again; it takes the lock only for what it declines) or the taker sees
//! the fastpath under way and waits for it. Fastpaths on different CPUs
//! run at once: each changes only its own CPU's threads and per-CPU state (below).
//!
//! The kernel's per-CPU state (which thread runs, what CR3 and FS hold, the x87 owner:
//! `kernel::CpuView`) is switched when the lock passes to another CPU: `KLOCK` compares
//! `KERNEL_VIEW` and calls `kernel::take_view` when it is another CPU's.
//!
//! Requests that cannot wait for the lock, because their sender holds it and waits for
//! the answer: a CPU waiting for the lock has interrupts off, so it answers while it
//! spins (`klock_wait`), an idle CPU while it polls, any other on `VEC_SHOOTDOWN`, whose
//! entry takes no lock (`shootdown_ipi`). They are:
//! - TLB shootdown: a page unmapped or write-protected (`task::flush_page`) may still
//!   sit in the TLB of another CPU that has the address space loaded. Such a change
//!   marks those CPUs; before a frame is handed out again and before the entry ends
//!   (`settle`, in the frame allocator and in `schedule`), the holder has them flush and
//!   waits. A freed address space (`mark_freed`) is left by the CPUs that have it loaded
//!   before its frames are freed.
//! - `save_fpu`: save the x87 registers of a thread that moves to another CPU.
//! - `stall`: leave the user mode of a thread that is to be stopped or destroyed, and
//!   its page tables; then enter the kernel (the lock) and switch away from it.

use crate::arch::cpu::{cpu_index, MAX_CPUS};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// The lock word (0: free; else the holder's CPU index + 1: taken and released by the
/// entry and exit stubs, `KLOCK` and `KUNLOCK`, and by `lock`/`unlock`), then the
/// fastpath's shutter (1 while `MACHINE FASTPATH` has it off), so that the entry stub
/// tests both in one compare before the fastpath without the lock.
#[no_mangle]
static KERNEL_LOCK: Line<LockWord> = Line(LockWord { word: AtomicU32::new(0), shut: AtomicU32::new(0) });

#[repr(C)]
pub struct LockWord {
    word: AtomicU32,
    shut: AtomicU32,
}

impl core::ops::Deref for LockWord {
    type Target = AtomicU32;
    fn deref(&self) -> &AtomicU32 {
        &self.word
    }
}

/// Open or shut the fastpath without the lock (`MACHINE FASTPATH`; under the lock, so no
/// CPU is in it meanwhile).
pub fn set_fast_shut(shut: bool) {
    KERNEL_LOCK.0.shut.store(shut as u32, Ordering::Relaxed);
}

/// A value alone in its cache line: the lock word, read by every CPU's fastpath, must
/// not share one with words other CPUs write.
#[repr(C, align(64))]
pub struct Line<T>(pub T);

impl<T> core::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Set once a second CPU runs: a CPU that takes the lock then waits for the others'
/// lock-free fastpaths (`KLOCK` tests it in one compare).
#[no_mangle]
static KLOCK_READERS: AtomicBool = AtomicBool::new(false);

/// A second CPU is about to run kernel code.
pub fn several_cpus() {
    KLOCK_READERS.store(true, Ordering::SeqCst);
}

/// Just after taking the lock: wait until no other CPU is in the fastpath without it
/// (it finishes within its one call; it waits for nothing).
#[no_mangle]
extern "C" fn klock_readers() {
    let me = cpu_index();
    for c in (0..crate::arch::smp::cpus()).filter(|&c| c != me) {
        while crate::arch::cpu::in_fastpath(c) {
            core::hint::spin_loop();
        }
    }
}

/// Per CPU: flush your TLB (set by the lock holder, cleared by the CPU when done).
static FLUSH: [AtomicBool; MAX_CPUS] = [const { AtomicBool::new(false) }; MAX_CPUS];
/// Per CPU: an address space that was freed; leave it if it is loaded (0: none).
static LEAVE: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
/// Per CPU: leave user mode and enter the kernel (`stall`; cleared when it has).
static ENTER: [AtomicBool; MAX_CPUS] = [const { AtomicBool::new(false) }; MAX_CPUS];
/// Per CPU: save the x87/SSE registers to this address (`save_fpu`; 0 when done).
static FPU_SAVE: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
/// CPUs whose TLBs may be stale since the last shootdown (a bit each).
static PENDING: AtomicU32 = AtomicU32::new(0);
/// Times another CPU was made to leave user mode (`stall`), for `KERNEL_INFO`.
pub static STALLS: AtomicU64 = AtomicU64::new(0);
/// Shootdowns done (each to one other CPU), for `KERNEL_INFO`.
pub static SHOOTDOWNS: AtomicU64 = AtomicU64::new(0);

/// Per CPU: its idle loop polls for `WAKE` before it halts.
static POLLING: [AtomicBool; MAX_CPUS] = [const { AtomicBool::new(false) }; MAX_CPUS];
/// Per CPU: a thread of its became ready (set by the lock holder).
static WAKE: [AtomicBool; MAX_CPUS] = [const { AtomicBool::new(false) }; MAX_CPUS];
/// How long an idle CPU polls before it halts (microseconds): a halted CPU takes an IPI
/// and, under a hypervisor (or TCG), its virtual CPU's wake-up — tens of microseconds —
/// where a poll sees the flag at once (as Linux's haltpoll does for guests).
const POLL_US: u64 = 50;

/// Have CPU `c` run its scheduler: a thread of its became ready. A CPU that polls in
/// its idle loop sees the flag; any other gets `VEC_RESCHED`. (Each side sets its flag
/// before it reads the other's, so one of them sees the other.)
pub fn wake_cpu(c: usize) {
    WAKE[c].store(true, Ordering::SeqCst);
    if !POLLING[c].load(Ordering::SeqCst) {
        crate::arch::lapic::send_ipi(crate::arch::smp::apic_id(c), crate::arch::cpu::VEC_RESCHED as u32);
    }
}

/// The idle loop, without the lock, interrupts off: poll for a wake-up for `POLL_US`,
/// answering requests meanwhile. Whether one came (else the CPU may halt: a wake-up
/// from now on comes by IPI).
pub fn poll_wake() -> bool {
    let me = cpu_index();
    POLLING[me].store(true, Ordering::SeqCst);
    let end = crate::arch::timer::rdtsc() + POLL_US * crate::arch::timer::tsc_per_ms() / 1000;
    while crate::arch::timer::rdtsc() < end {
        if WAKE[me].swap(false, Ordering::SeqCst) {
            POLLING[me].store(false, Ordering::SeqCst);
            return true;
        }
        let _ = answer();
        core::hint::spin_loop();
    }
    POLLING[me].store(false, Ordering::SeqCst);
    WAKE[me].swap(false, Ordering::SeqCst)
}

/// The lock word (0: free, else holder + 1), for `kernel::dump_state`.
pub fn holder() -> u32 {
    KERNEL_LOCK.load(Ordering::Relaxed)
}

/// CPU `c`'s wake-up and request flags (wake, polling, flush, enter, x87 save area),
/// for `kernel::dump_state`.
pub fn flags_of(c: usize) -> (bool, bool, bool, bool, u64) {
    (
        WAKE[c].load(Ordering::Relaxed),
        POLLING[c].load(Ordering::Relaxed),
        FLUSH[c].load(Ordering::Relaxed),
        ENTER[c].load(Ordering::Relaxed),
        FPU_SAVE[c].load(Ordering::Relaxed),
    )
}

/// Take the lock from Rust. Callers use `kernel::lock`, which then makes the kernel's
/// per-CPU part this CPU's (`take_view`).
pub fn lock() {
    let me = cpu_index() as u32 + 1;
    while KERNEL_LOCK.compare_exchange(0, me, Ordering::SeqCst, Ordering::Relaxed).is_err() {
        klock_wait();
    }
    if KLOCK_READERS.load(Ordering::Relaxed) {
        klock_readers();
    }
}

/// Give the lock back (the idle loop, before it halts).
pub fn unlock() {
    KERNEL_LOCK.store(0, Ordering::Release);
}

/// Wait until the lock looks free, answering shootdown requests meanwhile. Called by
/// `KLOCK` (registers saved) and `lock`.
#[no_mangle]
extern "C" fn klock_wait() {
    while KERNEL_LOCK.load(Ordering::Relaxed) != 0 {
        // (Asked to enter the kernel: it is entering already, and its entry finds its
        // thread no longer running.)
        let _ = answer();
        core::hint::spin_loop();
    }
}

/// Do what the lock holder asked of this CPU: flush its TLB (or leave a freed address
/// space), save its x87 registers for a thread that moves, leave user mode. Returns
/// whether it was asked to enter the kernel (`sched::shootdown_ipi`).
pub fn answer() -> bool {
    let me = cpu_index();
    let area = FPU_SAVE[me].load(Ordering::Acquire);
    if area != 0 {
        // The registers hold a thread that runs here no more (the running one does not
        // own them, so TS is set again after).
        crate::arch::fpu::clear_ts();
        // SAFETY: the holder passed the moving thread's save area (its kernel stack's
        // lowest 512 bytes, 16-byte aligned), which nothing uses while it waits.
        crate::arch::fpu::save(unsafe { &mut *(area as *mut crate::arch::fpu::FxArea) });
        crate::arch::fpu::set_ts();
        FPU_SAVE[me].store(0, Ordering::Release);
    }
    let enter = ENTER[me].load(Ordering::Acquire);
    if enter {
        // The thread it ran is stopped or destroyed (perhaps its whole task): off its
        // page tables at once; `switch_to` loads the next thread's.
        crate::arch::cpu::load_cr3(crate::arch::boot::boot_pml4_phys());
        ENTER[me].store(false, Ordering::Release);
    }
    if FLUSH[me].load(Ordering::Acquire) {
        let leave = LEAVE[me].swap(0, Ordering::Relaxed);
        if leave != 0 && crate::arch::cpu::current_cr3() == leave {
            // Only a kernel thread (idle) can have a dead task's space loaded. (The lock
            // holder sets this CPU's view to match: `Kernel::destroy_one_task`.)
            crate::arch::cpu::load_cr3(crate::arch::boot::boot_pml4_phys());
        } else {
            flush_tlb();
        }
        FLUSH[me].store(false, Ordering::Release);
    }
    enter
}

fn flush_tlb() {
    // Reloading CR3 drops every non-global translation (user mappings are never global).
    let (frame, flags) = x86_64::registers::control::Cr3::read();
    // SAFETY: the same page tables are loaded again; nothing changes but the TLB.
    unsafe { x86_64::registers::control::Cr3::write(frame, flags) };
}

/// The other CPUs that have `pml4` loaded. Without PCIDs a CR3 write drops every user
/// translation, so only a CPU that has the changed space loaded can hold stale ones.
fn holders(pml4: u64) -> u32 {
    let me = cpu_index();
    (0..crate::arch::smp::cpus()).filter(|&c| c != me && crate::arch::cpu::cr3_of(c) == pml4).fold(0, |m, c| m | 1 << c)
}

/// Make CPU `c` leave user mode (its registers saved in its thread's frame) and wait
/// for the lock, and wait until it has. The caller holds the lock.
pub fn stall(c: usize) {
    STALLS.fetch_add(1, Ordering::Relaxed);
    request(c, || ENTER[c].store(true, Ordering::Release), || ENTER[c].load(Ordering::Acquire));
}

/// Have CPU `c` save its x87/SSE registers to `area` (a thread that owns them there
/// moves to another CPU), and wait until it has. The caller holds the lock.
pub fn save_fpu(c: usize, area: u64) {
    request(c, || FPU_SAVE[c].store(area, Ordering::Release), || FPU_SAVE[c].load(Ordering::Acquire) != 0);
}

/// Post a request to CPU `c`, interrupt it, wait until it is done.
fn request(c: usize, post: impl Fn(), pending: impl Fn() -> bool) {
    post();
    crate::arch::lapic::send_ipi(crate::arch::smp::apic_id(c), crate::arch::cpu::VEC_SHOOTDOWN as u32);
    while pending() {
        core::hint::spin_loop();
    }
}

/// A mapping of `pml4` was removed or reduced: other CPUs' TLBs may still hold it.
pub fn mark_stale(pml4: u64) {
    if crate::arch::smp::cpus() > 1 {
        PENDING.fetch_or(holders(pml4), Ordering::Relaxed);
    }
}

/// `pml4` is being freed: a CPU that has it loaded must leave it.
pub fn mark_freed(pml4: u64) {
    if crate::arch::smp::cpus() > 1 {
        let m = holders(pml4);
        for c in (0..MAX_CPUS).filter(|c| m & 1 << c != 0) {
            LEAVE[c].store(pml4, Ordering::Relaxed);
        }
        PENDING.fetch_or(m, Ordering::Relaxed);
        settle();
    }
}

/// If mappings changed since the last shootdown, have every CPU that may hold them
/// flush its TLB, and wait until each has. The caller holds the lock.
pub fn settle() {
    let m = PENDING.swap(0, Ordering::Relaxed);
    if m == 0 {
        return;
    }
    let targets = (0..MAX_CPUS).filter(|c| m & 1 << c != 0);
    for c in targets.clone() {
        FLUSH[c].store(true, Ordering::Release);
        crate::arch::lapic::send_ipi(crate::arch::smp::apic_id(c), crate::arch::cpu::VEC_SHOOTDOWN as u32);
    }
    for c in targets {
        while FLUSH[c].load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
        SHOOTDOWNS.fetch_add(1, Ordering::Relaxed);
    }
}
