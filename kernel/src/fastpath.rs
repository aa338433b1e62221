//! The IPC fastpath: `IPC_CALL` and `IPC_REPLY_WAIT` with a register-only message
//! (at most 6 words, no string), infinite timeouts, a partner that is already
//! waiting, and nobody more important ready to run. The message goes register to
//! register and the CPU goes straight to the partner, bypassing the run queue
//! (L4's direct process switch). Anything else takes the general path in `ipc`,
//! which has the same semantics.

use crate::kernel::{Kernel, State};
use crate::task::Obj;
use abi::ipc::{self, FOREVER, RECV_ANY};
use abi::{rights, sys};

/// Decide and do the message transfer; returns the thread to switch to, or `None`
/// to leave the call to the general path (nothing has been changed then: every check
/// is in `plan`, which only reads; `commit` cannot fail, so nothing can bail out half
/// way).
#[inline(always)]
pub fn ipc(k: &mut Kernel, n: u64) -> Option<u32> {
    let p = plan(k, n)?;
    Some(commit(k, n, p))
}

/// What `plan` established: the partner and the badge it receives.
struct Plan {
    dest: u32,
    badge: u64,
}

/// Every check of the fastpath, without changing anything.
#[inline(always)]
fn plan(k: &Kernel, n: u64) -> Option<Plan> {
    let cur = k.current;
    let ct = k.threads[cur as usize].as_ref()?;
    let f = ct.frame();
    // Register-only message: no flags, no typed items, at most REG_MRS - 1 words.
    if !abi::ipc::Tag(f.r10).is_short() {
        return None;
    }
    let (dest, badge) = if n == sys::IPC_CALL {
        if f.rdx != FOREVER {
            return None;
        }
        let task = k.tasks[ct.task as usize].as_ref()?;
        let c = task.cspace.get(f.rdi).ok()?;
        let Obj::Thread(r) = c.obj else { return None };
        if c.rights & rights::SEND == 0 || k.thread_gen[r.id as usize] != r.gen || r.id == cur || k.moved[r.id as usize] {
            return None;
        }
        let d = k.threads[r.id as usize].as_ref()?;
        if d.state != State::RecvBlocked || d.fault.is_some() {
            return None;
        }
        if let Some(from) = d.recv_from {
            if from.id != cur || from.gen != k.thread_gen[cur as usize] {
                return None;
            }
        }
        (r.id, c.badge)
    } else {
        if f.rsi != RECV_ANY || ipc::recv_timeout(f.rdx) != ipc::INFINITE || !ct.sendq.is_empty() {
            return None;
        }
        let r = ct.reply_to?;
        if k.thread_gen[r.id as usize] != r.gen {
            return None;
        }
        let d = k.threads[r.id as usize].as_ref()?;
        match d.partner {
            Some(p) if p.id == cur && d.state == State::ReplyBlocked && d.fault.is_none() => {}
            _ => return None,
        }
        (r.id, 0)
    };
    let d = k.threads[dest as usize].as_ref()?;
    if k.rq.highest().is_some_and(|h| h > d.prio) {
        return None;
    }
    Some(Plan { dest, badge })
}

/// Registers across, states changed; returns the thread to switch to. Both threads
/// exist: `plan` found them, and nothing ran in between.
#[inline(always)]
fn commit(k: &mut Kernel, n: u64, p: Plan) -> u32 {
    let (cur, dest, badge) = (k.current, p.dest, p.badge);
    let f = k.threads[cur as usize].as_ref().expect("fastpath: the caller exists").frame();
    let d = k.threads[dest as usize].as_ref().expect("fastpath: plan found the partner");
    let df = d.frame();
    df.r10 = f.r10;
    df.r8 = f.r8;
    df.r9 = f.r9;
    df.r12 = f.r12;
    df.r13 = f.r13;
    df.r14 = f.r14;
    df.r15 = f.r15;
    df.rdi = badge;
    df.rax = 0;
    d.utcb().recv_str_len = 0;
    k.timers.remove(dest);
    let me = k.thread_ref(cur);
    let dref = k.thread_ref(dest);
    let d = k.threads[dest as usize].as_mut().expect("fastpath: plan found the partner");
    d.recv_from = None;
    if n == sys::IPC_CALL {
        d.reply_to = Some(me);
    } else {
        d.partner = None;
    }
    let c = k.threads[cur as usize].as_mut().expect("fastpath: the caller exists");
    if n == sys::IPC_CALL {
        c.state = State::ReplyBlocked;
        c.partner = Some(dref);
    } else {
        c.reply_to = None;
        c.state = State::RecvBlocked;
        c.recv_from = None;
    }
    dest
}
