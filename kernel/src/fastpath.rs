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
//!   the general path) is left behind, and the caller does not build one: its kernel
//!   context is the return of the stub's call into the fastpath, just below its frame
//!   (`FAST_RETURNED`, which sends a thread resumed there to `ipc_resume`, which
//!   leaves through the frame). Nothing is written for it: the thread's count of
//!   fastpath blocks tells the general path's `switch_to` that this is the context to
//!   resume (`Tcb::resume_sp`).
//!
//! The entry stub calls the fastpath for the two calls first, without the kernel lock
//! while no CPU holds it (so that IPC between threads of one CPU goes on on every CPU
//! at once: `klock` says how the lock's takers wait for it): `ipc_fast_call_shared` or
//! `ipc_fast_reply_wait_shared` (or their `_string_` forms), each written for its one
//! case, which hand what they do not carry themselves (a capability not kept, a string
//! to resolve or in pieces) to `ipc_fastpath_shared`; all of them decline what would
//! touch more than their own CPU's threads and state (a partner's timeout, I/O ports).
//! Then, holding the lock, `ipc_fastpath` (the same checks and transfer, all of it),
//! then `syscall_dispatch`.
//! Anything else takes the general path in `ipc`, which has the same semantics; every
//! check is made before anything is changed, so a call that fails one has lost nothing.
//! `MachineOp::Fastpath` turns the fastpath off and on and counts its calls (tests
//! compare the two paths).

use crate::arch::cpu::{self, TrapFrame, MAX_CPUS};
use crate::kernel::{CpuView, KeptCap, Kernel, State, Tcb, MAX_TASKS, MAX_THREADS};
use crate::task::{self, Obj, ObjRef, Task};
use abi::ipc::{self, FOREVER, RECV_ANY};
use abi::{rights, sched, sys};
use kcore::runqueue::RunQueue;
use kcore::timerheap::TimerHeap;

/// Called by the entry stub for `IPC_CALL` and `IPC_REPLY_WAIT` (`n`) with the kernel
/// lock held, after the fastpath without it declined. Returns the partner's kernel
/// stack top (its frame, to leave through, ends there), or 0 when the general path
/// (`syscall_dispatch`, called next) is to do the call.
#[no_mangle]
extern "C" fn ipc_fastpath(frame: *mut TrapFrame, n: u64) -> u64 {
    // SAFETY: this is the start of a kernel entry; no reference into kernel state is
    // live (the general path, if it runs, takes its own after this one has died).
    let k = unsafe { crate::kernel::enter() };
    // SAFETY: the entry stub passes the current thread's frame, on its kernel stack;
    // nothing else refers to it during this entry.
    let f = unsafe { &*frame };
    ipc(k, f, n)
}

/// Called by the entry stub first, without the kernel lock: this CPU is marked in the
/// fastpath (`PerCpu::fast`) and saw the lock free after that, so no CPU takes the lock
/// until it returns and its exit stub has left the kernel (`klock`). Other CPUs may be
/// here at once; each reaches only what is its own:
/// - its current thread and the partner, both threads of this CPU (`thread_cpu`, which
///   only a lock holder changes), reached as slots of `Kernel::tcbs`;
/// - its per-CPU state (`kernel::this_view`) and its own per-CPU tables;
/// - the rest only read (capabilities, generations, `moved`, its ready queue, the
///   timers), and nothing else writes them while no CPU holds the lock.
///
/// What would touch more — a partner with a timeout to cancel (the timer heap), I/O
/// ports to switch (the task table's bitmaps) — is declined, for the fastpath under the
/// lock.
#[no_mangle]
extern "C" fn ipc_fastpath_shared(frame: *mut TrapFrame, n: u64) -> u64 {
    let k = crate::kernel::shared();
    let me = cpu::cpu_index();
    // SAFETY: the entry stub passes the current thread's frame, on its kernel stack;
    // nothing else refers to it during this entry.
    let f = unsafe { &*frame };
    // SAFETY: as said above: this CPU is marked and the lock was free after, so only
    // other CPUs' fastpaths run beside this one, each on its own threads and view.
    unsafe { ipc_shared(k, me, f, n) }
}

/// The register-only call without the lock (the entry stub's choice for `IPC_CALL`
/// without the string flag): the same checks and changes as `ipc_shared` → `lookup`,
/// `transfer`, `switch_shared` for a call, written for this one case so that the
/// compiler keeps it in few registers (no tests of which call it is, nothing called). A
/// capability not kept from the last call goes to `ipc_fastpath_shared`, which looks it
/// up and keeps it.
#[no_mangle]
extern "C" fn ipc_fast_call_shared(frame: *mut TrapFrame) -> u64 {
    // SAFETY: the entry stub passes the current thread's frame, on its kernel stack
    // (nothing else refers to it during this entry), with this CPU marked in the
    // fastpath and the lock seen free after that, as for `ipc_fastpath_shared`.
    unsafe { fast_call::<false>(&*frame, frame as u64) }
}

/// `ipc_fast_call_shared` with a string (the stub's choice when the tag says so): the
/// same code with the copy in it, in a function of its own (the copy needs registers).
#[no_mangle]
extern "C" fn ipc_fast_call_string_shared(frame: *mut TrapFrame) -> u64 {
    // SAFETY: as for `ipc_fast_call_shared`.
    unsafe { fast_call::<true>(&*frame, frame as u64) }
}

/// The register-only reply-and-wait without the lock (as `ipc_fast_call_shared`).
#[no_mangle]
extern "C" fn ipc_fast_reply_wait_shared(frame: *mut TrapFrame) -> u64 {
    // SAFETY: as for `ipc_fast_call_shared`.
    unsafe { fast_reply_wait::<false>(&*frame, frame as u64) }
}

/// `ipc_fast_reply_wait_shared` with a string.
#[no_mangle]
extern "C" fn ipc_fast_reply_wait_string_shared(frame: *mut TrapFrame) -> u64 {
    // SAFETY: as for `ipc_fast_call_shared`.
    unsafe { fast_reply_wait::<true>(&*frame, frame as u64) }
}

/// The table index of a thread the kernel refers to — the current thread, a kept call
/// capability's thread, a reply reference: below `MAX_THREADS` (threads are made only
/// in the table's slots, and only the kernel writes these), so the lean functions
/// index with it without a mask or a bounds test.
#[inline(always)]
fn slot(id: u32) -> usize {
    debug_assert!((id as usize) < MAX_THREADS);
    // SAFETY: every id given here names a slot of the thread table (see above): the
    // view's current thread, or a reference the kernel made to a thread it created.
    unsafe { core::hint::assert_unchecked((id as usize) < MAX_THREADS) };
    id as usize
}

/// The message's shape (`tag`): register words only, or (`STRING`) register words and
/// a string — what the stub chose by the string flag, checked again here.
#[inline(always)]
fn shape_is<const STRING: bool>(tag: u64) -> bool {
    let tag = ipc::Tag(tag);
    if STRING {
        tag.is_short_or_string() && tag.has_string()
    } else {
        tag.is_short()
    }
}

// ------------------------------------------------------------------ the checks
//
// The fastpath's conditions, written once and used by all three of its forms
// (`fast_call`, `fast_reply_wait` and the general fastpath's `lookup`): each is
// `#[inline(always)]`, so every form compiles to the tests it wrote out before.

/// A call's timeouts: the fastpath carries only a send that waits for ever.
#[inline(always)]
fn call_timeouts_fit(rdx: u64) -> bool {
    rdx == FOREVER
}

/// A reply-and-wait's receive: from anyone, waiting for ever.
#[inline(always)]
fn reply_wait_receive_fits(rsi: u64, rdx: u64) -> bool {
    rsi == RECV_ANY && ipc::recv_timeout(rdx) == ipc::INFINITE
}

/// Thread `id` runs on this CPU (`me`). Checked before its slot is looked at: another
/// CPU's fastpath may be changing the slot of a thread that is not. (A thread whose CPU
/// changed while it ran moves at the general path's `schedule`.)
#[inline(always)]
fn on_this_cpu(thread_cpu: &[u8; MAX_THREADS], id: usize, me: u8) -> bool {
    thread_cpu[id] == me
}

/// The caller is running (not stopped or destroyed from another CPU while it waited
/// for the lock).
#[inline(always)]
fn caller_runs(c: &Tcb) -> bool {
    c.state == State::Running
}

/// A caller's reply-and-wait: nobody waits to send to it and no interrupt waits for
/// it (either would be received first, by the general path; an interrupt that fired
/// while its driver ran is only looked for there, and a driver blocked past it would
/// not hear of it until some other message came).
#[inline(always)]
fn nobody_queued(c: &Tcb) -> bool {
    c.sendq.is_empty() && c.irq_pending == 0
}

/// A call's destination `r` (at slot `id`): still the thread the capability named, its
/// endpoint not moved away (`SUCCEED`), and this CPU's.
#[inline(always)]
fn call_dest_here(
    gens: &[u32; MAX_THREADS],
    moved: &[bool; MAX_THREADS],
    thread_cpu: &[u8; MAX_THREADS],
    id: usize,
    r: ObjRef,
    me: u8,
) -> bool {
    gens[id] == r.gen && !moved[id] && on_this_cpu(thread_cpu, id, me)
}

/// A reply's destination `r` (at slot `id`): still the thread that called, and this
/// CPU's.
#[inline(always)]
fn reply_dest_here(gens: &[u32; MAX_THREADS], thread_cpu: &[u8; MAX_THREADS], id: usize, r: ObjRef, me: u8) -> bool {
    gens[id] == r.gen && on_this_cpu(thread_cpu, id, me)
}

/// The call's partner `d` waits to receive, with no fault to report, from anyone or
/// from the caller (`cur`, of generation `cur_gen`).
#[inline(always)]
fn receives_from(d: &Tcb, cur: usize, cur_gen: u32) -> bool {
    if d.state != State::RecvBlocked || d.fault.is_some() {
        return false;
    }
    match d.recv_from {
        Some(from) => from.id as usize == cur && from.gen == cur_gen,
        None => true,
    }
}

/// The reply's partner `d` waits for the answer of the caller `cur` (its partner), with
/// no fault to report.
#[inline(always)]
fn awaits_reply_from(d: &Tcb, cur: usize) -> bool {
    matches!(d.partner, Some(p) if p.id as usize == cur && d.state == State::ReplyBlocked && d.fault.is_none())
}

/// Nobody more important than the partner `d` is ready on this CPU (`rq`): it may run
/// at once.
#[inline(always)]
fn partner_runs_next(rq: &RunQueue<MAX_THREADS>, d: &Tcb) -> bool {
    !rq.any_above(d.prio)
}

/// Without the lock, what would touch more than this CPU's threads is declined: a
/// partner (`id`, `d`) with a timeout to cancel (the timer heap) or whose task has I/O
/// ports (the task table's bitmaps). (So is a switch while a task's I/O bitmap is in
/// this CPU's TSS: `CpuView::io_owner`, tested after this.)
#[inline(always)]
fn lockless_partner_fits(timers: &TimerHeap<MAX_THREADS>, id: usize, d: &Tcb) -> bool {
    !timers.contains(id as u32) && !d.task_io
}

/// # Safety
/// As `ipc_fastpath_shared` says: no CPU holds the lock and this one is marked in the
/// fastpath; `f` is the current thread's frame at `c_frame`.
#[inline(always)]
unsafe fn fast_call<const STRING: bool>(f: &TrapFrame, c_frame: u64) -> u64 {
    // SAFETY: (for the whole function) as `ipc_fastpath_shared`: the fields read are
    // written only by a lock holder, and there is none; this CPU's view and threads are
    // its own. Both threads are this CPU's (`thread_cpu`, checked before a slot is
    // looked at), so their slots hold threads (`Kernel::thread_cpu` names a CPU only for
    // a full slot: `kernel::tcb_in`), and different (`id != cur`). The view's `rq` is
    // this CPU's ready queue.
    unsafe {
        let k = crate::kernel::shared();
        // (The fastpath turned off stops the stub before this: `klock::set_fast_shut`.)
        if !shape_is::<STRING>(f.r10) || !call_timeouts_fit(f.rdx) {
            return 0;
        }
        let v = crate::kernel::this_view();
        let me = cpu::cpu_index() as u8;
        let cur = slot((*v).current);
        if !on_this_cpu(&(*k).thread_cpu, cur, me) {
            return 0;
        }
        let tcbs = (*k).tcbs;
        // (A slot whose `thread_cpu` names a CPU holds a thread: `Kernel::thread_cpu`.)
        let c = crate::kernel::tcb_in(tcbs.add(cur));
        if !caller_runs(c) {
            return 0;
        }
        // The capability as kept from the last call through the same slot (`KeptCap`);
        // any other goes the general fastpath's way, which looks it up (and keeps it).
        let kept = c.call_cap;
        if kept.slot != f.rdi || kept.at != kcore::cspace::reductions() {
            return ipc_fastpath_shared(c_frame as *mut TrapFrame, sys::IPC_CALL);
        }
        let id = slot(kept.dest.id);
        if id == cur || !call_dest_here(&(*k).thread_gen, &(*k).moved, &(*k).thread_cpu, id, kept.dest, me) {
            return 0;
        }
        let d = crate::kernel::tcb_in(tcbs.add(id));
        if !receives_from(d, cur, (*k).thread_gen[cur]) {
            return 0;
        }
        if !partner_runs_next(&*(*v).rq, d) || !lockless_partner_fits(&(*k).timers, id, d) || (*v).io_owner.is_some() {
            return 0;
        }
        // A string: both buffers on one page each (else, or if anything is wrong with
        // them, the general fastpath's way, which copies in pieces or declines), its copy
        // made once everything else is done (nothing can fail then).
        let (from, to, slen) = if STRING {
            match one_page_string(c, d) {
                Some(x) => x,
                None => return ipc_fastpath_shared(c_frame as *mut TrapFrame, sys::IPC_CALL),
            }
        } else {
            (0, 0, 0)
        };
        // Every check passed: the changes (as `transfer` makes them for a call).
        // (The kept capability's thread and badge are read again here, volatile so that
        // the compiler does not keep them in registers across the checks — fewer
        // registers to save — and only those two fields.)
        let (dest, badge) = (core::ptr::read_volatile(&c.call_cap.dest), core::ptr::read_volatile(&c.call_cap.badge));
        c.state = State::ReplyBlocked;
        c.partner = Some(dest);
        c.fast_blocks += 1;
        d.reply_to = Some(ObjRef { id: cur as u32, gen: (*k).thread_gen[cur] });
        d.recv_from = None;
        let frame = to_partner(&mut *v, d, id, badge, slen);
        if STRING {
            // SAFETY: both lie within single user frames (as long as `slen`), resolved
            // (and checked for the access) earlier and kept since with no mapping
            // reduced, in the direct map; they do not overlap forwards (checked).
            task::copy_forward(to as *mut u8, from as *const u8, slen);
        }
        frame
    }
}

/// # Safety
/// As for `fast_call`.
#[inline(always)]
unsafe fn fast_reply_wait<const STRING: bool>(f: &TrapFrame, c_frame: u64) -> u64 {
    // SAFETY: as in `fast_call`.
    unsafe {
        let k = crate::kernel::shared();
        if !shape_is::<STRING>(f.r10) || !reply_wait_receive_fits(f.rsi, f.rdx) {
            return 0;
        }
        let v = crate::kernel::this_view();
        let me = cpu::cpu_index() as u8;
        let cur = slot((*v).current);
        if !on_this_cpu(&(*k).thread_cpu, cur, me) {
            return 0;
        }
        let tcbs = (*k).tcbs;
        // (A slot whose `thread_cpu` names a CPU holds a thread: `Kernel::thread_cpu`.)
        let c = crate::kernel::tcb_in(tcbs.add(cur));
        if !caller_runs(c) || !nobody_queued(c) {
            return 0;
        }
        let Some(r) = c.reply_to else { return 0 };
        let id = slot(r.id);
        if id == cur || !reply_dest_here(&(*k).thread_gen, &(*k).thread_cpu, id, r, me) {
            return 0;
        }
        let d = crate::kernel::tcb_in(tcbs.add(id));
        if !awaits_reply_from(d, cur) {
            return 0;
        }
        if !partner_runs_next(&*(*v).rq, d) || !lockless_partner_fits(&(*k).timers, id, d) || (*v).io_owner.is_some() {
            return 0;
        }
        // A string: both buffers on one page each (else, or if anything is wrong with
        // them, the general fastpath's way, which copies in pieces or declines), its copy
        // made once everything else is done (nothing can fail then).
        let (from, to, slen) = if STRING {
            match one_page_string(c, d) {
                Some(x) => x,
                None => return ipc_fastpath_shared(c_frame as *mut TrapFrame, sys::IPC_REPLY_WAIT),
            }
        } else {
            (0, 0, 0)
        };
        // Every check passed: the changes (as `transfer` makes them for a reply).
        c.state = State::RecvBlocked;
        c.reply_to = None;
        c.recv_from = None;
        c.fast_blocks += 1;
        d.partner = None;
        d.recv_from = None;
        let frame = to_partner(&mut *v, d, id, 0, slen);
        if STRING {
            // SAFETY: both lie within single user frames (as long as `slen`), resolved
            // (and checked for the access) earlier and kept since with no mapping
            // reduced, in the direct map; they do not overlap forwards (checked).
            task::copy_forward(to as *mut u8, from as *const u8, slen);
        }
        frame
    }
}

/// The rest of a fastpath IPC without the lock, once the caller's side is changed: the
/// partner runs (the string's length `slen` in its UTCB, `badge` in its rdi), this CPU
/// switches to it (`switch_shared`). Returns the partner's kernel stack top.
#[inline(always)]
fn to_partner(v: &mut CpuView, d: &mut Tcb, id: usize, badge: u64, slen: u64) -> u64 {
    d.utcb().recv_str_len = slen;
    d.state = State::Running;
    if d.slice == 0 {
        d.slice = sched::SLICE_TICKS;
    }
    let top = d.kstack_top();
    // SAFETY: every user thread's kernel stack ends with its frame; the partner is
    // blocked, so nothing else refers to it.
    unsafe { (*cpu::frame_at(top)).rdi = badge };
    cpu::count_fast_ipc(true);
    switch_shared(v, id, To { top, pml4: d.pml4, utcb: d.utcb_va, io: d.task_io, task: d.task })
}

/// The fastpath under the lock: everything, the caller's own CPU's state in
/// `Kernel::view`.
#[inline(always)]
fn ipc(k: &mut Kernel, f: &TrapFrame, n: u64) -> u64 {
    // A dead thread is freed right after the switch away from it (`reap`), so none
    // waits at a system call; the fastpath's switch does not reap.
    debug_assert!(k.view.zombie.is_none());
    if !k.fastpath {
        return 0;
    }
    let Ok(tasks) = <&[Option<Task>; MAX_TASKS]>::try_from(k.tasks.as_slice()) else { return 0 };
    let cur = k.view.current as usize % MAX_THREADS;
    let me = k.view_cpu % MAX_CPUS;
    let e = Env {
        tcbs: k.tcbs,
        gens: &k.thread_gen,
        tasks,
        moved: &k.moved,
        thread_cpu: &k.thread_cpu,
        me: me as u8,
        rq: &k.rqs[me],
        shared: None,
    };
    // SAFETY: the lock holder has all of the kernel state; `tcbs` are `threads`' slots.
    let Some((dest, badge, c, d, slen)) = (unsafe { lookup(&e, f, cur, n == sys::IPC_CALL) }) else { return 0 };
    cpu::count_fast_ipc(false);
    let to = transfer(&k.thread_gen, Some(&mut k.timers), cur, dest, badge, c, d, slen, n == sys::IPC_CALL);
    switch(k, dest, to)
}

/// The fastpath without the lock (`ipc_fastpath_shared`).
///
/// # Safety
/// As `ipc_fastpath_shared` says: `k` is the kernel state, no CPU holds the lock, this
/// CPU (`me`) is marked in the fastpath.
#[inline(always)]
unsafe fn ipc_shared(k: *mut Kernel, me: usize, f: &TrapFrame, n: u64) -> u64 {
    // SAFETY: (for the whole function) the caller's promise: the fields read here are
    // written only by a lock holder, and there is none; `me`'s view and its threads are
    // this CPU's alone.
    unsafe {
        if !(*k).fastpath {
            return 0;
        }
        let me = me % MAX_CPUS;
        let v = crate::kernel::this_view();
        let Ok(tasks) = <&[Option<Task>; MAX_TASKS]>::try_from((*k).tasks.as_slice()) else { return 0 };
        let cur = (*v).current as usize % MAX_THREADS;
        let e = Env {
            tcbs: (*k).tcbs,
            gens: &(*k).thread_gen,
            tasks,
            moved: &(*k).moved,
            thread_cpu: &(*k).thread_cpu,
            me: me as u8,
            rq: &(*k).rqs[me],
            shared: Some((&(*k).timers, (*v).io_owner.is_some())),
        };
        let Some((dest, badge, c, d, slen)) = lookup(&e, f, cur, n == sys::IPC_CALL) else { return 0 };
        cpu::count_fast_ipc(true);
        let to = transfer(&(*k).thread_gen, None, cur, dest, badge, c, d, slen, n == sys::IPC_CALL);
        switch_shared(&mut *v, dest, to)
    }
}

/// What the fastpath's checks read.
struct Env<'a> {
    /// `Kernel::tcbs`: the thread slots.
    tcbs: *mut Option<Tcb>,
    gens: &'a [u32; MAX_THREADS],
    tasks: &'a [Option<Task>; MAX_TASKS],
    moved: &'a [bool; MAX_THREADS],
    thread_cpu: &'a [u8; MAX_THREADS],
    /// The running CPU and its ready queue.
    me: u8,
    rq: &'a RunQueue<MAX_THREADS>,
    /// Without the lock: the timers (a partner with one is declined) and whether this
    /// CPU's TSS holds a task's I/O bitmap (then any switch is declined).
    shared: Option<(&'a TimerHeap<MAX_THREADS>, bool)>,
}

/// Strings the fastpath carries: at most this long, on at most two pages each side
/// (longer ones take the general path, which walks more pages).
const FAST_STRING: u64 = 4096;

/// Every check, without changing anything: the partner (waiting for this message),
/// the badge it receives, both threads (each of this CPU); then a string's copy
/// (`copy_string`: checks first, then the only change made here) and its length.
///
/// # Safety
/// `e.tcbs` are the thread slots, and the slots of this CPU's threads are this caller's
/// alone for the call (under the lock, or as `ipc_fastpath_shared` says).
#[inline(always)]
unsafe fn lookup<'a>(
    e: &Env<'a>,
    f: &TrapFrame,
    cur: usize,
    call: bool,
) -> Option<(usize, u64, &'a mut Tcb, &'a mut Tcb, u64)> {
    // Register words (at most REG_MRS - 1), perhaps a string; no other flag, no items.
    let tag = ipc::Tag(f.r10);
    if !tag.is_short_or_string() {
        return None;
    }
    if !on_this_cpu(e.thread_cpu, cur, e.me) {
        return None;
    }
    // SAFETY: the current thread is this CPU's (checked just above).
    let ct = unsafe { (*e.tcbs.add(cur)).as_ref()? };
    let mut keep = None;
    if !caller_runs(ct) {
        return None;
    }
    // The partner runs on this CPU (a thread of another is woken there, by the general
    // path): checked before its slot is looked at, which another CPU's fastpath may be
    // changing if it is not.
    let (dest, badge) = if call {
        if !call_timeouts_fit(f.rdx) {
            return None;
        }
        // The capability: kept from the last call through the same slot while no
        // capability was removed or reduced anywhere (`KeptCap`), else looked up (and
        // kept by `transfer`).
        let kept = ct.call_cap;
        let at = kcore::cspace::reductions();
        let (r, badge) = if kept.slot == f.rdi && kept.at == at {
            (kept.dest, kept.badge)
        } else {
            let task = e.tasks[ct.task as usize % MAX_TASKS].as_ref()?;
            let c = task.cspace.get(f.rdi).ok()?;
            let Obj::Thread(r) = c.obj else { return None };
            if c.rights & rights::SEND == 0 {
                return None;
            }
            keep = Some(KeptCap { slot: f.rdi, at, dest: r, badge: c.badge });
            (r, c.badge)
        };
        let id = r.id as usize % MAX_THREADS;
        if !call_dest_here(e.gens, e.moved, e.thread_cpu, id, r, e.me) {
            return None;
        }
        // SAFETY: a thread of this CPU.
        let d = unsafe { (*e.tcbs.add(id)).as_ref()? };
        if !receives_from(d, cur, e.gens[cur]) {
            return None;
        }
        (id, badge)
    } else {
        if !reply_wait_receive_fits(f.rsi, f.rdx) || !nobody_queued(ct) {
            return None;
        }
        let r = ct.reply_to?;
        let id = r.id as usize % MAX_THREADS;
        if !reply_dest_here(e.gens, e.thread_cpu, id, r, e.me) {
            return None;
        }
        // SAFETY: a thread of this CPU.
        let d = unsafe { (*e.tcbs.add(id)).as_ref()? };
        if !awaits_reply_from(d, cur) {
            return None;
        }
        (id, 0)
    };
    // (The partner is not running, the caller is: never the same thread.)
    if dest == cur {
        return None;
    }
    // SAFETY: two different threads of this CPU; the shared references above are dead.
    let (Some(c), Some(d)) = (unsafe { (*e.tcbs.add(cur)).as_mut() }, unsafe { (*e.tcbs.add(dest)).as_mut() }) else {
        return None;
    };
    if let Some(k) = keep {
        c.call_cap = k;
    }
    if !partner_runs_next(e.rq, d) {
        return None;
    }
    if let Some((timers, io_loaded)) = e.shared {
        if !lockless_partner_fits(timers, dest, d) || io_loaded {
            return None;
        }
    }
    // Every other check has passed: a string is the last, and its copy the point of no
    // return.
    let slen = if tag.has_string() { copy_string(c, d)? } else { 0 };
    Some((dest, badge, c, d, slen))
}

/// A string: the sender's buffer readable, the receiver's writable and long enough (or
/// `None`, nothing changed, and the general path says what is wrong: `TooLong`,
/// `CopyFault`); then the copy. Returns its length. Out of line: `lookup`'s register
/// messages do not pay for the registers it needs.
#[inline(never)]
fn copy_string(c: &mut Tcb, d: &mut Tcb) -> Option<u64> {
    let (su, du) = (c.utcb(), d.utcb());
    let (saddr, len, daddr, dlen) = (su.send_buf_addr, su.send_buf_len, du.recv_buf_addr, du.recv_buf_len);
    if len > FAST_STRING || len > dlen {
        return None;
    }
    // (Each thread's last buffers, kept while no mapping was reduced: an IPC loop's
    // buffers are walked once.)
    let from = c.send_range.resolve(c.pml4, saddr, len)?;
    let to = d.recv_range.resolve(d.pml4, daddr, len)?;
    if from.one_page != 0 && to.one_page != 0 {
        // SAFETY: both lie within single user frames (as long as `len`), resolved (and
        // checked for the access) in this entry or kept since with no mapping reduced,
        // in the direct map.
        unsafe { task::copy_bytes(to.one_page as *mut u8, from.one_page as *const u8, len) };
    } else {
        task::copy_range(&from.range, &to.range);
    }
    Some(len)
}

/// A string between buffers on one page each whose translations are kept (an IPC loop's
/// buffers, after its first call): where it is and where it goes in the direct map, and
/// its length — the sender's buffer readable, the receiver's writable and long enough,
/// not overlapping forwards — or `None`: then the general fastpath, which resolves
/// (and keeps) buffers, copies longer strings in pieces, or declines and leaves the
/// error to the general path. Changes nothing.
#[inline(always)]
fn one_page_string(c: &mut Tcb, d: &mut Tcb) -> Option<(u64, u64, u64)> {
    let (su, du) = (c.utcb(), d.utcb());
    let (saddr, len, daddr, dlen) = (su.send_buf_addr, su.send_buf_len, du.recv_buf_addr, du.recv_buf_len);
    // (A kept range on one page is at most a page long: no `FAST_STRING` test.)
    if len > dlen {
        return None;
    }
    let from = c.send_range.kept_one_page(saddr, len)?;
    let to = d.recv_range.kept_one_page(daddr, len)?;
    if to.wrapping_sub(from) < len {
        return None;
    }
    Some((from, to, len))
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
    timers: Option<&mut TimerHeap<MAX_THREADS>>,
    cur: usize,
    dest: usize,
    badge: u64,
    c: &mut Tcb,
    d: &mut Tcb,
    slen: u64,
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
    // (Without the lock there is none: a partner with a timer was declined.)
    if let Some(t) = timers {
        t.remove(dest as u32);
    }
    d.utcb().recv_str_len = slen;
    // The caller's kernel context is now the fastpath call's return (`Tcb::resume_sp`).
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
/// leaves through the partner's frame): the I/O bitmap if either task has ports, then
/// what `switch_shared` does. Returns the partner's kernel stack top.
#[inline(always)]
fn switch(k: &mut Kernel, dest: usize, to: To) -> u64 {
    if to.io || k.view.io_owner.is_some() {
        crate::sched::switch_iomap(k, to.task);
    }
    switch_shared(&mut k.view, dest, to)
}

/// The switch on this CPU's state `v`: kernel stack, CR3, FS base, CR0.TS (the partner
/// is a user thread). The whole switch for the fastpath without the lock, which declines
/// partners whose switch would touch an I/O bitmap. Returns the partner's kernel stack
/// top (the exit stub finds the frame below it).
#[inline(always)]
fn switch_shared(v: &mut CpuView, dest: usize, to: To) -> u64 {
    v.current = dest as u32;
    cpu::set_kernel_stack(to.top);
    v.load_space(to.pml4);
    v.load_fs(to.utcb);
    // As `sched::fpu_switch`: TS clear exactly when the partner's x87 state is in this
    // CPU's registers.
    let mine = v.fpu_owner == dest as u32;
    if mine != v.fpu_ts_clear {
        if mine {
            crate::arch::fpu::clear_ts();
        } else {
            crate::arch::fpu::set_ts();
        }
        v.fpu_ts_clear = mine;
    }
    to.top
}
