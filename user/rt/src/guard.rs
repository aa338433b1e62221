//! Guarded calls: code a program cannot trust to come back — a graft — run so that it
//! can be made to leave. `run(deadline, f)` notes where it began (the callee-saved
//! registers, the stack pointer and the return address, as `setjmp` does) and calls
//! `f`; if `f` is still running at `deadline`, the program's watchdog thread stops the
//! program's main thread and starts it again at the landing, which goes back to where
//! the call began with the call marked stopped; if `f` panics, the panic handler goes
//! there itself. Either way `run` answers `Err` and whatever `f` left behind is the
//! caller's to forget: the frames it had are gone without being dropped, so `f` must
//! own nothing outside memory its caller forgets with it (a graft's engine lives in an
//! arena of its own, `heap::ArenaHeap`, reset — its pages given back — after such an
//! exit, and an allocation past the arena's limit fails, a panic that lands here; a signed graft's
//! machine code owns nothing at all).
//!
//! One guarded call at a time, on the main thread (servers run their grafts there). A
//! thread that holds the heap's lock is never made to leave: the watchdog lets it run
//! on and looks again at its next round.

use crate::sys;
use abi::cap;
use abi::layout::{MAIN_STACK_PAGES, MAIN_STACK_TOP, PAGE_SIZE};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Where a guarded call began: rbx, rbp, r12–r15, the stack pointer after it returns,
/// the return address, and why it ended (0: it returned; else a `Stop` + 1).
#[repr(C)]
struct JmpBuf {
    regs: [u64; 6],
    rsp: u64,
    rip: u64,
    code: u64,
}

struct Shared(UnsafeCell<JmpBuf>);

// SAFETY: written by `scion_guard_call` on the main thread when a call begins, and by the
// watchdog (`code`) only while the main thread is stopped; read by the landing on the
// main thread after that.
unsafe impl Sync for Shared {}

static BUF: Shared = Shared(UnsafeCell::new(JmpBuf { regs: [0; 6], rsp: 0, rip: 0, code: 0 }));
/// A guarded call is under way (1) or not (0): written by the entry routines once the
/// buffer holds where the call began, cleared when it returns.
static ACTIVE: AtomicU64 = AtomicU64::new(0);
/// The clock (rdtsc) at which the call under way is stopped.
static DEADLINE: AtomicU64 = AtomicU64::new(u64::MAX);
static WATCHING: AtomicBool = AtomicBool::new(false);
/// Calls stopped by the watchdog, calls left by a panic.
static STOPPED: AtomicU64 = AtomicU64::new(0);
static PANICKED: AtomicU64 = AtomicU64::new(0);

/// Why a guarded call did not return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// It ran past its deadline.
    Time,
    /// It panicked.
    Panic,
}

core::arch::global_asm!(
    r#"
    .section .text.scion_guard, "ax"
    .global scion_guard_call
    .global scion_guard_landing
    .global scion_watched_call
    .global scion_watched_exit
// The registers a caller keeps (rbx, rbp, r12–r15): noted at r11, taken back from
// `base` (the first six words of `JmpBuf` and of `WATCHED` alike).
.macro scion_note_regs
    mov [r11], rbx
    mov [r11 + 8], rbp
    mov [r11 + 16], r12
    mov [r11 + 24], r13
    mov [r11 + 32], r14
    mov [r11 + 40], r15
.endm
.macro scion_take_regs base
    mov rbx, [\base]
    mov rbp, [\base + 8]
    mov r12, [\base + 16]
    mov r13, [\base + 24]
    mov r14, [\base + 32]
    mov r15, [\base + 40]
.endm
// rdi = f (extern "C" fn(ctx)), rsi = ctx, rdx = deadline. Returns rax = 0 when f
// returned, else why it was left.
scion_guard_call:
    lea r11, [rip + {buf}]
    scion_note_regs
    lea rax, [rsp + 8]
    mov [r11 + 48], rax
    mov rax, [rsp]
    mov [r11 + 56], rax
    mov qword ptr [r11 + 64], 0
    mov [rip + {deadline}], rdx
    mov qword ptr [rip + {active}], 1
    push rbx
    mov rbx, rdi
    mov rdi, rsi
    call rbx
    mov qword ptr [rip + {active}], 0
    pop rbx
    xor eax, eax
    ret
// rdi = buffer: back to where the call began (the return of `scion_guard_call`),
// answering the buffer's code in rax and rdx.
scion_guard_landing:
    scion_take_regs rdi
    mov rax, [rdi + 64]
    mov rdx, rax
    mov rsp, [rdi + 48]
    cld
    jmp qword ptr [rdi + 56]
// Machine code called under the image watch, as a compiled image's entry is (its
// contract: `graft::engine::Direct`): rdi = the input's length, rsi = the input, rdx =
// the call's block [f, state, state's length]; calls f(input, length, state, state's
// length). Returns rax = f's answer and rdx = 0, or (from `scion_watched_exit`) rax = 0
// and rdx = the trap's code.
scion_watched_call:
    lea r11, [rip + {regs}]
    scion_note_regs
    mov [r11 + 48], rsp
    lea r11, [rip + {image}]
    lea rax, [rip + scion_watched_exit]
    mov [r11 + 16], rax
    mov [r11 + 24], rsp
    add qword ptr [r11 + 8], 1
    mov qword ptr [r11], 1
    mov r11, rdx
    mov rax, rdi
    mov rdi, rsi
    mov rsi, rax
    mov rdx, [r11 + 8]
    mov rcx, [r11 + 16]
    sub rsp, 8
    call qword ptr [r11]
    add rsp, 8
    mov qword ptr [rip + {image}], 0
    xor edx, edx
    ret
// rdi = the trap's code (the watchdog's `IMAGE_STOPPED`): back to the caller of the
// call under way, its registers as they were.
scion_watched_exit:
    lea r11, [rip + {regs}]
    mov rsp, [r11 + 48]
    mov qword ptr [rip + {image}], 0
    scion_take_regs r11
    mov rdx, rdi
    xor eax, eax
    cld
    ret
"#,
    buf = sym BUF,
    deadline = sym DEADLINE,
    active = sym ACTIVE,
    regs = sym WATCHED,
    image = sym IMAGE,
);

extern "C" {
    fn scion_guard_call(f: extern "C" fn(*mut u8), ctx: *mut u8, deadline: u64) -> u64;
    fn scion_guard_landing(buf: *mut JmpBuf) -> !;
}

extern "C" fn trampoline<F: FnMut()>(ctx: *mut u8) {
    // SAFETY: `run` passes a pointer to its own `F`, alive for the whole call.
    let f = unsafe { &mut *(ctx as *mut F) };
    f()
}

/// # Safety
/// As `scion_guard_call`'s: one guarded call at a time, `call` alive until it returns.
unsafe fn guard_call<F: FnMut()>(call: &mut F, deadline: u64) -> u64 {
    // SAFETY: the caller's promise; the trampoline is instantiated for `F` itself.
    unsafe { scion_guard_call(trampoline::<F>, call as *mut F as *mut u8, deadline) }
}

fn why(code: u64) -> Stop {
    if code == 2 {
        Stop::Panic
    } else {
        Stop::Time
    }
}

/// A compiled graft's call (SFI's image, or signed code through `watched_entry`),
/// watched without arming anything per call: the graft's image itself (or
/// `scion_watched_call` for it) writes this block — at its entry where a stopped call
/// goes (its exit, which takes back the registers the entry noted and answers the trap
/// code in `rdi`), its stack pointer, a new call's number and then `active` = 1, after
/// the registers are noted; `active` = 0 as it returns. The watchdog stops a call it
/// sees active with the same number for `IMAGE_LIMIT` ticks, if it runs on the main
/// thread (its stack pointer in the main stack: a call on another thread is not
/// watched; the servers run their grafts on the main thread), and starts the main
/// thread again at that exit. A static: the block outlives every image that writes it.
#[repr(C)]
pub struct ImageWatch {
    pub active: AtomicU64,
    pub seq: AtomicU64,
    pub exit: AtomicU64,
    pub sp: AtomicU64,
}

static IMAGE: ImageWatch =
    ImageWatch { active: AtomicU64::new(0), seq: AtomicU64::new(0), exit: AtomicU64::new(0), sp: AtomicU64::new(0) };

/// Where `scion_watched_call` keeps the registers its caller keeps (rbx, rbp, r12–r15)
/// and its stack pointer: written when a call begins, read by `scion_watched_exit`, both
/// on the thread making the call (one watched call at a time: a graft calls no other).
/// Only the assembly routines use it.
static WATCHED: [AtomicU64; 7] = [const { AtomicU64::new(0) }; 7];

extern "C" {
    fn scion_watched_call();
}

/// The entry that calls machine code under the image watch (as a compiled image's own
/// entry does), for calls of at most `ticks`: `entry(len, input, block, _)` calls
/// `f(input, len, state, state_len)` for the block `[f, state, state_len]` (three u64s
/// that live as long as the call), and answers (f's answer, 0), or (0, `IMAGE_STOPPED`)
/// when the watchdog stopped it. Its address; the caller makes it its entry's type.
pub fn watched_entry(ticks: u64) -> u64 {
    IMAGE_LIMIT.store(ticks, Ordering::Relaxed);
    scion_watched_call as *const () as usize as u64
}

static IMAGE_LIMIT: AtomicU64 = AtomicU64::new(u64::MAX);
/// The trap code a stopped image call answers (harness.c's `WASM_RT_TRAP_SCION_STOPPED`).
pub const IMAGE_STOPPED: u64 = 9;

/// The block compiled grafts' images write (`ImageWatch`), for calls of at most `ticks`
/// of the clock: its address, for the images' control blocks.
pub fn image_watch(ticks: u64) -> *mut u64 {
    IMAGE_LIMIT.store(ticks, Ordering::Relaxed);
    &IMAGE as *const ImageWatch as *mut u64
}

/// Has an image's call run past its limit? `seen`: the call the watchdog saw last
/// (its number, the clock when first seen).
fn image_overdue(seen: &mut Option<(u64, u64)>) -> bool {
    if IMAGE.active.load(Ordering::Acquire) == 0 {
        *seen = None;
        return false;
    }
    let (seq, now) = (IMAGE.seq.load(Ordering::Acquire), sys::rdtsc());
    match *seen {
        Some((s, since)) if s == seq => now.wrapping_sub(since) >= IMAGE_LIMIT.load(Ordering::Relaxed),
        _ => {
            *seen = Some((seq, now));
            false
        }
    }
}

/// Stop the image's call the watchdog saw overdue, if the main thread is still in it:
/// start it again at the image's exit, answering `IMAGE_STOPPED`.
fn stop_image(seen: &mut Option<(u64, u64)>) {
    // SAFETY: the main thread is started again below, either where it was or at the
    // exit of the image's call it is in (which holds no lock).
    if unsafe { sys::thread_stop(cap::SELF_THREAD) }.is_err() {
        return;
    }
    // Stopped: still in the same call (it may have returned and begun another)? Then
    // the image's registers are this call's (`active` is set after they are noted).
    let same =
        IMAGE.active.load(Ordering::Acquire) != 0 && seen.is_some_and(|(s, _)| s == IMAGE.seq.load(Ordering::Acquire));
    let main =
        (MAIN_STACK_TOP - MAIN_STACK_PAGES * PAGE_SIZE..MAIN_STACK_TOP).contains(&IMAGE.sp.load(Ordering::Acquire));
    if same && main && !crate::heap::busy() {
        *seen = None;
        STOPPED.fetch_add(1, Ordering::Relaxed);
        // The exit sets its own stack pointer (the call's, noted at its entry).
        if sys::thread_start(cap::SELF_THREAD, IMAGE.exit.load(Ordering::Acquire), 0, IMAGE_STOPPED).is_ok() {
            return;
        }
    }
    let _ = sys::thread_start(cap::SELF_THREAD, 0, 0, 0);
}

/// Is this the main thread (the one guarded calls run on)?
fn on_main_thread() -> bool {
    crate::ipc::utcb_addr() == abi::layout::MAIN_UTCB
}

/// Run `f`, stopped when the clock (rdtsc) passes `deadline` or when it panics. Only
/// on the main thread and not nested (`f` runs unguarded otherwise). The watchdog must
/// have been started (`watch`) for the deadline to be kept.
pub fn run<R>(deadline: u64, f: impl FnOnce() -> R) -> Result<R, Stop> {
    if !on_main_thread() || ACTIVE.load(Ordering::Relaxed) != 0 {
        return Ok(f());
    }
    let mut out: Option<R> = None;
    let mut f = Some(f);
    let mut call = || {
        if let Some(f) = f.take() {
            out = Some(f());
        }
    };
    // SAFETY: the buffer is this module's, used by one guarded call at a time (checked
    // above); `call` lives until the call returns; the landing comes back here only
    // while this frame is alive (the watchdog checks a call is under way and past its
    // deadline, and the panic handler runs on this thread inside it).
    let code = unsafe { guard_call(&mut call, deadline) };
    if code == 0 {
        return out.ok_or(Stop::Panic);
    }
    ACTIVE.store(0, Ordering::Release);
    Err(why(code))
}

/// `run`, for at most `ticks` of the clock from now.
pub fn run_for<R>(ticks: u64, f: impl FnOnce() -> R) -> Result<R, Stop> {
    run(sys::rdtsc().saturating_add(ticks), f)
}

/// Is a guarded call under way on this thread? (The panic handler asks.)
pub fn in_call() -> bool {
    ACTIVE.load(Ordering::Acquire) != 0 && on_main_thread()
}

/// From the panic handler, inside a guarded call: leave it (`run` answers
/// `Stop::Panic`). Does not come back unless the heap's lock is held, which a panic
/// inside the allocator would leave so.
pub fn leave_on_panic() {
    if !in_call() || crate::heap::busy() {
        return;
    }
    PANICKED.fetch_add(1, Ordering::Relaxed);
    let buf = BUF.0.get();
    // SAFETY: this thread is inside the guarded call that wrote the buffer (in_call);
    // the landing restores that call's registers and stack and returns from it.
    unsafe {
        (*buf).code = 2;
        scion_guard_landing(buf)
    }
}

/// Start the watchdog (once): a thread of this program, at its main thread's priority,
/// that looks every `period_us` whether a guarded call has passed its deadline.
pub fn watch(period_us: u64) {
    if WATCHING.swap(true, Ordering::AcqRel) {
        return;
    }
    match crate::thread::spawn(watchdog, period_us, crate::thread::my_priority()) {
        Ok(t) => WATCHDOG.store(t.slot, Ordering::Release),
        Err(_) => WATCHING.store(false, Ordering::Release),
    }
}

/// Code that may need the watchdog is loaded (`true`) or no longer (`false`), counted:
/// while nothing is armed the watchdog sleeps in a receive and wakes nobody (a program's
/// other threads see no periodic wake-ups of it), at most every `IDLE_US` to look again.
pub fn arm(on: bool) {
    let before = if on { ARMED.fetch_add(1, Ordering::AcqRel) } else { ARMED.fetch_sub(1, Ordering::AcqRel) };
    if on && before == 0 {
        let w = WATCHDOG.load(Ordering::Acquire);
        if w != 0 {
            // Wake it if it waits (a short send timeout: when it is not waiting it is
            // looking already, or it looks again within `IDLE_US`).
            let _ = crate::ipc::send(w, &crate::ipc::Msg::new(0, &[]), crate::ipc::timeouts(1_000, 1_000));
        }
    }
}

/// The watchdog's thread (its capability slot; 0 until it runs) and the count of armings.
static WATCHDOG: AtomicU64 = AtomicU64::new(0);
static ARMED: AtomicU64 = AtomicU64::new(0);
/// How long a disarmed watchdog waits before it looks again anyway.
const IDLE_US: u32 = 5_000_000;

fn watchdog(period_us: u64) {
    let mut m = crate::ipc::Msg::empty();
    let mut seen = None;
    loop {
        if ARMED.load(Ordering::Acquire) == 0 {
            let _ = crate::ipc::recv(crate::ipc::RECV_ANY, &mut m, crate::ipc::timeouts(IDLE_US, IDLE_US));
            continue;
        }
        sys::sleep_us(period_us);
        if image_overdue(&mut seen) {
            stop_image(&mut seen);
            continue;
        }
        let past = || ACTIVE.load(Ordering::Acquire) != 0 && sys::rdtsc() >= DEADLINE.load(Ordering::Acquire);
        if !past() {
            continue;
        }
        // SAFETY: the main thread is started again below, either where it was or at
        // the landing of the call it is in; it holds no lock then (checked).
        if unsafe { sys::thread_stop(cap::SELF_THREAD) }.is_err() {
            continue;
        }
        // Stopped: is it still in a call past its deadline (it may have left meanwhile,
        // and begun another), and free of the locks others would wait on for ever?
        let buf = BUF.0.get();
        if past() && !crate::heap::busy() {
            // SAFETY: the main thread is stopped inside the call whose buffer this is.
            let rsp = unsafe {
                (*buf).code = 1;
                (*buf).rsp
            };
            STOPPED.fetch_add(1, Ordering::Relaxed);
            // An image's call under way inside the guarded run is left with it.
            IMAGE.active.store(0, Ordering::Release);
            let landing = scion_guard_landing as *const () as usize as u64;
            if sys::thread_start(cap::SELF_THREAD, landing, rsp, buf as u64).is_ok() {
                continue;
            }
        }
        let _ = sys::thread_start(cap::SELF_THREAD, 0, 0, 0);
    }
}

/// Calls stopped by the watchdog and calls left by a panic, since the program started.
pub fn stops() -> (u64, u64) {
    (STOPPED.load(Ordering::Relaxed), PANICKED.load(Ordering::Relaxed))
}
