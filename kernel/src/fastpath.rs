//! The IPC fastpath: `IPC_CALL` and `IPC_REPLY_WAIT` with a register message (at most
//! 6 words, perhaps a string of up to 4 KiB), infinite timeouts, a partner that is already
//! waiting, and nobody more important ready to run. The CPU goes straight to the
//! partner, bypassing the run queue (L4's direct process switch), and the partner
//! leaves the kernel straight from its saved user frame, as seL4's fastpath does:
//!
//! - The message does not pass through the partner's frame: the exit stub
//!   (`ipc_fast_exit` in `arch::cpu`) loads the message registers from the caller's
//!   frame and everything else the partner gets back (rbx, rbp, rsp, rip, rflags, and
//!   its own rsi and rdx, which the ABI leaves undefined) from the partner's.
//! - A thread blocked in IPC keeps nothing on its kernel stack that it needs: its
//!   results go into its frame. So the partner's kernel call chain (if it blocked in
//!   the general path) is left behind, and the caller does not build one: its saved
//!   kernel context becomes a return into `ipc_resume` (which leaves through the frame),
//!   written by the exit stub below the caller's frame once `syscall_dispatch` has
//!   returned. The general path's `switch_to` resumes such a thread like any other.
//!
//! The entry stub calls `ipc_fastpath` for the two calls before `syscall_dispatch`.
//! Anything else takes the general path in `ipc`, which has the same semantics; every
//! check is made before anything is changed, so a call that fails one has lost nothing.
//! `MachineOp::Fastpath` turns the fastpath off and on and counts its calls (tests
//! compare the two paths).

use crate::arch::cpu::{self, TrapFrame, MAX_CPUS};
use crate::kernel::{Kernel, State, Tcb, MAX_TASKS, MAX_THREADS};
use crate::task::{self, Obj, ObjRef, Task, UserRange};
use kcore::runqueue::RunQueue;
use kcore::timerheap::TimerHeap;
use abi::ipc::{self, FOREVER, RECV_ANY};
use abi::{rights, sched, sys};

/// Words `switch_context` pops (six callee-saved registers) before its `ret`.
const CONTEXT_WORDS: u64 = 6;

/// Const check of the entry stub's test: `n | 2 == 7` holds for these two numbers only.
const _: () = assert!(sys::IPC_CALL | 2 == 7 && sys::IPC_REPLY_WAIT | 2 == 7 && sys::IPC_CALL != sys::IPC_REPLY_WAIT);

/// Called by the entry stub for `IPC_CALL` and `IPC_REPLY_WAIT` (`n`), with the
/// caller's frame. Returns the partner's frame to leave through, or 0 when the general
/// path (`syscall_dispatch`, called next) is to do the call.
#[no_mangle]
extern "C" fn ipc_fastpath(frame: *mut TrapFrame, n: u64) -> u64 {
    // SAFETY: this is the start of a kernel entry; no reference into kernel state is
    // live (the general path, if it runs, takes its own after this one has died).
    let k = unsafe { crate::kernel::enter() };
    // SAFETY: the entry stub passes the current thread's frame, on its kernel stack;
    // nothing else refers to it during this entry.
    let f = unsafe { &*frame };
    ipc(k, f, frame as u64, n)
}

/// The fastpath's checks, then (when all pass) the transfer and the switch.
#[inline(always)]
fn ipc(k: &mut Kernel, f: &TrapFrame, c_frame: u64, n: u64) -> u64 {
    // A dead thread is freed right after the switch away from it (`reap`), so none
    // waits at a system call; the fastpath's switch does not reap.
    debug_assert!(k.zombie.is_none());
    if !k.fastpath {
        return 0;
    }
    let Ok(threads) = <&mut [Option<Tcb>; MAX_THREADS]>::try_from(k.threads.as_mut_slice()) else { return 0 };
    let Ok(tasks) = <&[Option<Task>; MAX_TASKS]>::try_from(k.tasks.as_slice()) else { return 0 };
    let cur = k.current as usize % MAX_THREADS;
    let call = n == sys::IPC_CALL;
    let me = k.view_cpu % MAX_CPUS;
    let Some((dest, badge, c, d, slen)) = lookup(threads, &k.thread_gen, tasks, &k.moved, &k.thread_cpu, me as u8, &k.rqs[me], f, cur, call) else { return 0 };
    k.fast_ipcs += 1;
    let to = transfer(&k.thread_gen, &mut k.timers, cur, dest, badge, c, d, slen, c_frame, call);
    switch(k, dest, to)
}

/// Strings the fastpath carries: at most this long, on at most two pages each side
/// (longer ones take the general path, which walks more pages).
const FAST_STRING: u64 = 4096;
type FastRange = UserRange<2>;

/// Every check, without changing anything: the partner (waiting for this message),
/// the badge it receives, both threads; then a string's copy (`copy_string`: checks
/// first, then the only change made here) and its length.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn lookup<'a>(
    threads: &'a mut [Option<Tcb>; MAX_THREADS],
    gens: &[u32; MAX_THREADS],
    tasks: &[Option<Task>; MAX_TASKS],
    moved: &[bool; MAX_THREADS],
    thread_cpu: &[u8; MAX_THREADS],
    me: u8,
    rq: &RunQueue<MAX_THREADS>,
    f: &TrapFrame,
    cur: usize,
    call: bool,
) -> Option<(usize, u64, &'a mut Tcb, &'a mut Tcb, u64)> {
    // Register words (at most REG_MRS - 1), perhaps a string; no other flag, no items.
    let tag = ipc::Tag(f.r10);
    if !tag.is_short_or_string() {
        return None;
    }
    let ct = threads[cur].as_ref()?;
    // (Not running: stopped or destroyed from another CPU while it waited for the lock.)
    if ct.state != State::Running {
        return None;
    }
    let (dest, badge) = if call {
        if f.rdx != FOREVER {
            return None;
        }
        let task = tasks[ct.task as usize % MAX_TASKS].as_ref()?;
        let c = task.cspace.get(f.rdi).ok()?;
        let Obj::Thread(r) = c.obj else { return None };
        let id = r.id as usize % MAX_THREADS;
        // (A call to itself fails the state check: the caller is running.)
        if c.rights & rights::SEND == 0 || gens[id] != r.gen || moved[id] {
            return None;
        }
        let d = threads[id].as_ref()?;
        if d.state != State::RecvBlocked || d.fault.is_some() {
            return None;
        }
        if let Some(from) = d.recv_from {
            if from.id as usize != cur || from.gen != gens[cur] {
                return None;
            }
        }
        (id, c.badge)
    } else {
        if f.rsi != RECV_ANY || ipc::recv_timeout(f.rdx) != ipc::INFINITE || !ct.sendq.is_empty() {
            return None;
        }
        let r = ct.reply_to?;
        let id = r.id as usize % MAX_THREADS;
        if gens[id] != r.gen {
            return None;
        }
        let d = threads[id].as_ref()?;
        match d.partner {
            Some(p) if p.id as usize == cur && d.state == State::ReplyBlocked && d.fault.is_none() => {}
            _ => return None,
        }
        (id, 0)
    };
    // The partner runs on this CPU (a thread of another is woken there, by the general
    // path), and nobody more important is ready here.
    if thread_cpu[dest] != me {
        return None;
    }
    let Ok([Some(c), Some(d)]) = threads.get_disjoint_mut([cur, dest]) else { return None };
    if rq.any_above(d.prio) {
        return None;
    }
    // Every other check has passed: a string is the last, and its copy the point of no
    // return.
    let slen = if tag.has_string() { copy_string(c, d)? } else { 0 };
    Some((dest, badge, c, d, slen))
}

/// A string: the sender's buffer readable, the receiver's writable and long enough (or
/// `None`, nothing changed, and the general path says what is wrong: `TooLong`,
/// `CopyFault`); then the copy. Returns its length. Out of line: register messages do
/// not pay for its frame.
#[inline(never)]
fn copy_string(c: &Tcb, d: &Tcb) -> Option<u64> {
    let (su, du) = (c.utcb(), d.utcb());
    let (saddr, len, daddr, dlen) = (su.send_buf_addr, su.send_buf_len, du.recv_buf_addr, du.recv_buf_len);
    if len > FAST_STRING || len > dlen {
        return None;
    }
    let from = FastRange::resolve(c.pml4, saddr, len, false).ok()?;
    let to = FastRange::resolve(d.pml4, daddr, len, true).ok()?;
    task::copy_range(&from, &to);
    Some(len)
}

/// What the switch needs of the partner: its kernel stack's top, page tables, UTCB,
/// whether its task has I/O ports, its task.
struct To {
    top: u64,
    pml4: u64,
    utcb: u64,
    io: bool,
    task: u32,
}

/// Committed (nothing here can fail): both threads' states, the partner's timer, the
/// string's length, its badge, the caller's kernel context.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn transfer(
    gens: &[u32; MAX_THREADS],
    timers: &mut TimerHeap<MAX_THREADS>,
    cur: usize,
    dest: usize,
    badge: u64,
    c: &mut Tcb,
    d: &mut Tcb,
    slen: u64,
    c_frame: u64,
    call: bool,
) -> To {
    let me = ObjRef { id: cur as u32, gen: gens[cur] };
    if call {
        c.state = State::ReplyBlocked;
        c.partner = Some(ObjRef { id: dest as u32, gen: gens[dest] });
        d.reply_to = Some(me);
    } else {
        c.state = State::RecvBlocked;
        c.reply_to = None;
        c.recv_from = None;
        d.partner = None;
    }
    d.recv_from = None;
    timers.remove(dest as u32);
    d.utcb().recv_str_len = slen;
    // The caller's kernel context: `ipc_fast_exit` writes the return address into
    // `ipc_resume` just below its frame; `switch_context` pops six words first.
    c.saved_rsp = c_frame - (CONTEXT_WORDS + 1) * 8;
    c.fast_blocks += 1;
    d.state = State::Running;
    if d.slice == 0 {
        d.slice = sched::SLICE_TICKS;
    }
    let top = d.kstack_top();
    // SAFETY: every user thread's kernel stack ends with its frame; the partner is
    // blocked, so nothing else refers to it.
    unsafe { (*cpu::frame_at(top)).rdi = badge };
    To { top, pml4: d.pml4, utcb: d.utcb_va, io: d.task_io, task: d.task }
}

/// To the partner (as `switch_to`, without changing kernel stacks: the exit stub
/// leaves through the partner's frame). Returns that frame.
#[inline(always)]
fn switch(k: &mut Kernel, dest: usize, to: To) -> u64 {
    k.current = dest as u32;
    cpu::set_kernel_stack(to.top);
    if k.loaded_pml4 != to.pml4 {
        task::load_cr3(to.pml4);
        k.loaded_pml4 = to.pml4;
    }
    if k.loaded_fs != to.utcb {
        cpu::set_fs_base(to.utcb);
        k.loaded_fs = to.utcb;
    }
    if k.fpu_owner == dest as u32 || k.fpu_ts_clear {
        crate::kernel::fpu_switch(k, dest as u32);
    }
    if to.io || k.io_owner.is_some() {
        crate::kernel::switch_iomap(k, to.task);
    }
    cpu::frame_at(to.top) as u64
}
