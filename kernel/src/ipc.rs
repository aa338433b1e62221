//! Synchronous IPC: send, receive (from one or any), call, reply, reply-and-wait,
//! with timeouts; message registers MR0..MR6 in CPU registers, the rest in the
//! UTCB; strings copied between address spaces into a buffer the receiver named.
//!
//! A message moves straight from the sender's saved registers into the receiver's
//! saved registers when the two meet, so the same code serves a receiver that was
//! waiting and a sender that was queued.

use crate::kernel::{Kernel, State};
use crate::task;
use abi::ipc::{self, Tag};
use abi::{rights, Error};

/// Whose fault a failed transfer is.
pub enum Fail {
    Sender(Error),
    Receiver(Error),
}

fn accepts(k: &Kernel, receiver: u32, sender: u32) -> bool {
    match k.t(receiver).recv_from {
        None => true,
        Some(r) => r == k.thread_ref(sender),
    }
}

/// Copy the message of `src` (its saved registers and UTCB) to `dst`.
pub fn transfer(k: &mut Kernel, src: u32, dst: u32, badge: u64) -> Result<(), Fail> {
    // A fault report synthesised by the kernel.
    if let Some(w) = k.t(src).fault {
        let df = k.t(dst).frame();
        df.r10 = Tag::new(ipc::label::FAULT, 4).0 | ipc::TAG_FAULT;
        df.r8 = w[0];
        df.r9 = w[1];
        df.r12 = w[2];
        df.r13 = w[3];
        df.rdi = badge;
        k.t(dst).utcb().recv_str_len = 0;
        return Ok(());
    }
    // A reply to a faulted thread: resume it (at MR1 if given), registers untouched.
    if k.t(dst).fault.is_some() {
        let sf = k.t(src).frame();
        let tag = Tag(sf.r10);
        if tag.words() >= 1 && sf.r8 != 0 {
            if !abi::layout::is_user_range(sf.r8, 1) {
                return Err(Fail::Sender(Error::InvalidArg));
            }
            k.t(dst).frame().rip = sf.r8;
        }
        k.tm(dst).fault = None;
        return Ok(());
    }
    let sf = *k.t(src).frame();
    let tag = Tag(sf.r10);
    let words = tag.words() as usize;
    let mut slen = 0;
    if tag.has_string() {
        let su = k.t(src).utcb();
        let (saddr, len) = (su.send_buf_addr, su.send_buf_len);
        let du = k.t(dst).utcb();
        let (daddr, dlen) = (du.recv_buf_addr, du.recv_buf_len);
        if len > ipc::MAX_STRING || len > dlen {
            return Err(Fail::Sender(Error::TooLong));
        }
        let (stask, dtask) = (k.t(src).task, k.t(dst).task);
        let spml4 = k.task(stask).pml4;
        let dpml4 = k.task(dtask).pml4;
        task::check_user(spml4, saddr, len, false).map_err(|_| Fail::Sender(Error::CopyFault))?;
        task::check_user(dpml4, daddr, len, true).map_err(|_| Fail::Receiver(Error::CopyFault))?;
        task::copy_user_to_user(spml4, saddr, dpml4, daddr, len).map_err(|_| Fail::Sender(Error::CopyFault))?;
        slen = len;
    }
    let df = k.t(dst).frame();
    df.r10 = sf.r10 & !ipc::TAG_FAULT;
    df.r8 = sf.r8;
    df.r9 = sf.r9;
    df.r12 = sf.r12;
    df.r13 = sf.r13;
    df.r14 = sf.r14;
    df.r15 = sf.r15;
    df.rdi = badge;
    if words >= ipc::REG_MRS {
        let s = &k.t(src).utcb().mr;
        let d = &mut k.t(dst).utcb().mr;
        d[ipc::REG_MRS..=words].copy_from_slice(&s[ipc::REG_MRS..=words]);
    }
    k.t(dst).utcb().recv_str_len = slen;
    Ok(())
}

/// The send phase of send and call, from the current thread.
pub fn send(k: &mut Kernel, dest_slot: u64, call: bool, timeouts: u64) -> Result<(), Error> {
    let cur = k.current;
    let (dest, cap) = k.thread_cap(dest_slot, rights::SEND)?;
    if dest == cur {
        return Err(Error::Deadlock);
    }
    deliver(k, cur, dest, cap.badge, call, ipc::send_timeout(timeouts), ipc::recv_timeout(timeouts))
}

/// Deliver a message (or a fault report) from `src` to `dest`, or queue `src`.
pub fn deliver(k: &mut Kernel, src: u32, dest: u32, badge: u64, call: bool, send_to: u32, recv_to: u32) -> Result<(), Error> {
    if k.t(dest).state == State::RecvBlocked && accepts(k, dest, src) {
        match transfer(k, src, dest, badge) {
            Ok(()) => {}
            Err(Fail::Sender(e)) => return Err(e),
            Err(Fail::Receiver(e)) => {
                k.unlink(dest);
                k.wake(dest, e as u64);
                return Err(e);
            }
        }
        k.unlink(dest);
        k.wake(dest, 0);
        if call {
            k.tm(dest).reply_to = Some(k.thread_ref(src));
            k.block(src, State::ReplyBlocked, recv_to);
            k.tm(src).partner = Some(k.thread_ref(dest));
            k.hint = Some(dest);
        }
        return Ok(());
    }
    if send_to == ipc::POLL {
        return Err(Error::Timeout);
    }
    let t = k.tm(src);
    t.send_badge = badge;
    t.call = call;
    t.call_timeout = recv_to;
    let dref = k.thread_ref(dest);
    k.tm(src).partner = Some(dref);
    let mut q = k.t(dest).sendq;
    k.sendq.push_back(&mut q, src);
    k.tm(dest).sendq = q;
    k.block(src, State::SendBlocked, send_to);
    // `block` does not touch partner; keep it set for the queue bookkeeping.
    Ok(())
}

/// Receive into the current thread: take a queued sender or wait.
pub fn receive(k: &mut Kernel, src_slot: u64, timeout: u32) -> Result<(), Error> {
    let cur = k.current;
    let from = if src_slot == ipc::RECV_ANY {
        None
    } else {
        let (id, _) = k.thread_cap(src_slot, 0)?;
        if id == cur {
            return Err(Error::Deadlock);
        }
        Some(k.thread_ref(id))
    };
    loop {
        let q = k.t(cur).sendq;
        let sender = match from {
            None => q.front(),
            Some(r) => k.sendq.iter(&q).find(|s| *s == r.id),
        };
        let Some(s) = sender else { break };
        let badge = k.t(s).send_badge;
        match transfer(k, s, cur, badge) {
            Ok(()) => {
                k.unlink(s);
                if k.t(s).call {
                    k.tm(s).state = State::ReplyBlocked;
                    k.tm(s).partner = Some(k.thread_ref(cur));
                    let to = k.t(s).call_timeout;
                    if to != ipc::INFINITE {
                        let at = k.ticks + crate::kernel::ticks_for_us(to as u64);
                        k.timers.insert(s, at);
                    }
                    k.tm(cur).reply_to = Some(k.thread_ref(s));
                } else {
                    k.wake(s, 0);
                }
                return Ok(());
            }
            Err(Fail::Sender(e)) => {
                k.unlink(s);
                k.wake(s, e as u64);
            }
            Err(Fail::Receiver(e)) => return Err(e),
        }
    }
    if timeout == ipc::POLL {
        return Err(Error::Timeout);
    }
    k.tm(cur).recv_from = from;
    k.block(cur, State::RecvBlocked, timeout);
    Ok(())
}

/// Reply to the thread whose call the current thread received last.
pub fn reply(k: &mut Kernel) -> Result<(), Error> {
    let cur = k.current;
    let Some(r) = k.tm(cur).reply_to.take() else { return Err(Error::NoPartner) };
    let me = k.thread_ref(cur);
    if !k.thread_alive(r) || k.t(r.id).state != State::ReplyBlocked || k.t(r.id).partner != Some(me) {
        return Err(Error::NoPartner);
    }
    let resumes_fault = k.t(r.id).fault.is_some();
    match transfer(k, cur, r.id, 0) {
        Ok(()) if resumes_fault => {
            // The faulted thread continues with its registers as they were.
            k.timers.remove(r.id);
            k.tm(r.id).partner = None;
            k.make_ready(r.id);
            Ok(())
        }
        Ok(()) => {
            k.wake(r.id, 0);
            Ok(())
        }
        Err(Fail::Sender(e)) => {
            k.tm(cur).reply_to = Some(r);
            Err(e)
        }
        Err(Fail::Receiver(e)) => {
            k.wake(r.id, e as u64);
            Err(e)
        }
    }
}

/// Report a fault of the current thread to its handler as a call; without a handler
/// (or with a dead one) the thread is stopped. Returns whether a handler took it.
pub fn report_fault(k: &mut Kernel, words: [u64; 4]) -> bool {
    let cur = k.current;
    let Some((h, badge)) = k.t(cur).fault_handler else {
        k.block(cur, State::Stopped, ipc::INFINITE);
        return false;
    };
    if !k.thread_alive(h) || h.id == cur {
        k.block(cur, State::Stopped, ipc::INFINITE);
        return false;
    }
    k.tm(cur).fault = Some(words);
    if deliver(k, cur, h.id, badge, true, ipc::INFINITE, ipc::INFINITE).is_err() {
        k.tm(cur).fault = None;
        k.block(cur, State::Stopped, ipc::INFINITE);
        return false;
    }
    true
}
