//! Synchronous IPC: send, receive (from one or any), call, reply, reply-and-wait,
//! with timeouts; message registers MR0..MR6 in CPU registers, the rest in the
//! UTCB; strings copied between address spaces into a buffer the receiver named.
//!
//! A message moves straight from the sender's saved registers into the receiver's
//! saved registers when the two meet, so the same code serves a receiver that was
//! waiting and a sender that was queued.

use crate::kernel::{Kernel, State};
use crate::task;
use abi::fpage::{self, Fpage};
use abi::ipc::{self, Tag};
use abi::layout::PAGE_SIZE;
use abi::Error;

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

/// The words of `t`'s outgoing message: MR0..MR6 from its saved registers, the rest
/// from its UTCB (only the first `1 + words + typed` are meaningful).
fn message_of(k: &Kernel, t: u32) -> [u64; ipc::MAX_MRS] {
    let f = k.t(t).frame();
    let mut mrs = [0u64; ipc::MAX_MRS];
    mrs[..ipc::REG_MRS].copy_from_slice(&[f.r10, f.r8, f.r9, f.r12, f.r13, f.r14, f.r15]);
    let tag = Tag(f.r10);
    let n = (tag.words() + tag.typed()) as usize;
    if n >= ipc::REG_MRS {
        mrs[ipc::REG_MRS..=n].copy_from_slice(&k.t(t).utcb().mr[ipc::REG_MRS..=n]);
    }
    mrs
}

fn put_message(k: &Kernel, t: u32, mrs: &[u64; ipc::MAX_MRS], badge: u64) {
    let f = k.t(t).frame();
    f.r10 = mrs[0];
    f.r8 = mrs[1];
    f.r9 = mrs[2];
    f.r12 = mrs[3];
    f.r13 = mrs[4];
    f.r14 = mrs[5];
    f.r15 = mrs[6];
    f.rdi = badge;
    let tag = Tag(mrs[0]);
    let n = (tag.words() + tag.typed()) as usize;
    if n >= ipc::REG_MRS {
        k.t(t).utcb().mr[ipc::REG_MRS..=n].copy_from_slice(&mrs[ipc::REG_MRS..=n]);
    }
}

/// Carry out the typed items in `mrs` (the sender's message) from `src` to `dst`,
/// rewriting each item to where it landed. `mem_window` overrides the receiver's
/// memory window (a pager's answer lands anywhere in the faulting space). Returns
/// how many items were carried out.
fn transfer_items(
    k: &mut Kernel,
    src: u32,
    dst: u32,
    mrs: &mut [u64; ipc::MAX_MRS],
    mem_window: Option<Fpage>,
) -> Result<u64, Fail> {
    let tag = Tag(mrs[0]);
    let (u, t) = (tag.words() as usize, tag.typed() as usize);
    if t == 0 {
        return Ok(0);
    }
    let du = k.t(dst).utcb();
    let windows = [mem_window.unwrap_or(Fpage(du.recv_mem)), Fpage(du.recv_io), Fpage(du.recv_caps)];
    let (stask, dtask) = (k.t(src).task, k.t(dst).task);
    // Check every item before doing any: after these checks an item fails only when
    // kernel memory runs out (page tables, quota, a full frame count).
    let mut dest = [0u64; ipc::MAX_MRS / 2];
    // Memory pages the items cover together: bounded, so that one message is a bounded
    // piece of kernel work with interrupts off.
    let mut pages = 0u64;
    for (j, d) in dest.iter_mut().enumerate().take(t / 2) {
        let fp = Fpage(mrs[u + 1 + 2 * j]);
        let ctl = mrs[u + 2 + 2 * j];
        if !fp.is_valid() || ctl & 0xffe != 0 {
            return Err(Fail::Sender(Error::InvalidArg));
        }
        if fp.kind() == fpage::MEM {
            pages += fp.size() / PAGE_SIZE;
            if pages > ipc::MAX_ITEM_PAGES {
                return Err(Fail::Sender(Error::TooLong));
            }
        }
        let w = windows[fp.kind() as usize];
        if w.0 == 0 || !w.is_valid() || w.kind() != fp.kind() || fp.size() > w.size() {
            return Err(Fail::Sender(Error::NoWindow));
        }
        *d = match fp.kind() {
            fpage::MEM => {
                let at = w.base() + (((ctl & !0xfff) % w.size()) & !(fp.size() - 1));
                // Where pages may be mapped: not the half's last page (`USER_MAP_END`),
                // refused here, before any item is carried out.
                if !abi::layout::is_mappable(at, fp.size()) {
                    return Err(Fail::Sender(Error::InvalidArg));
                }
                // UTCBs are neither sent nor mapped over (what map_mem would refuse). A
                // lone item needs no look-ahead: map_mem checks all its pages first.
                if t > 2 {
                    if k.task(stask).has_utcb_in(fp.base(), fp.base().saturating_add(fp.size())) {
                        return Err(Fail::Sender(Error::InvalidArg));
                    }
                    if k.task(dtask).has_utcb_in(at, at + fp.size()) {
                        return Err(Fail::Sender(Error::AlreadyMapped));
                    }
                }
                at
            }
            fpage::CAP => {
                // A saved reply is granted or kept, never copied (see `cap_derive`).
                let copies_reply = ctl & fpage::GRANT == 0
                    && (fp.base()..fp.base() + fp.size())
                        .any(|s| k.task(stask).cspace.get(s).is_ok_and(|c| matches!(c.obj, task::Obj::Reply(..))));
                if copies_reply {
                    return Err(Fail::Sender(Error::WrongType));
                }
                let at = w.base() + (((ctl >> 12) % w.size()) & !(fp.size() - 1));
                // A window past the capability space is no window.
                if at + fp.size() > abi::cap::SLOTS {
                    return Err(Fail::Sender(Error::NoWindow));
                }
                at
            }
            _ => {
                if fp.base() < w.base() || fp.base() + fp.size() > w.base() + w.size() {
                    return Err(Fail::Sender(Error::NoWindow));
                }
                fp.base()
            }
        };
    }
    for (j, &at) in dest.iter().enumerate().take(t / 2) {
        let fp = Fpage(mrs[u + 1 + 2 * j]);
        let grant = mrs[u + 2 + 2 * j] & fpage::GRANT != 0;
        let r = match fp.kind() {
            fpage::MEM => k.map_mem(stask, fp.base(), dtask, at, fp.size() / PAGE_SIZE, fp.rights(), grant, false),
            fpage::CAP => {
                let mut r = Ok(());
                for i in 0..fp.size() {
                    if k.task(stask).cspace.get(fp.base() + i).is_ok() {
                        r = r.and(k.cap_derive(stask, fp.base() + i, dtask, at + i, fp.rights(), 0, grant, true));
                    }
                }
                r
            }
            _ => {
                let mut r = Ok(());
                for p in fp.base()..fp.base() + fp.size() {
                    r = r.and(k.map_port(stask, dtask, p as u16, grant));
                }
                r
            }
        };
        // Out of memory in the receiving task (its kernel quota cannot pay for the page
        // tables or mapping nodes, or a frame is mapped too often) is the receiver's
        // failure: the sender did nothing wrong.
        r.map_err(|e| if e == Error::NoMemory { Fail::Receiver(e) } else { Fail::Sender(e) })?;
        mrs[u + 1 + 2 * j] =
            Fpage::new(fp.kind(), if fp.kind() == fpage::MEM { at >> 12 } else { at }, fp.log2(), fp.rights()).0;
    }
    Ok((t / 2) as u64)
}

/// Copy the message of `src` (registers, UTCB words, string, typed items) to `dst`.
/// Returns the number of typed items carried out.
pub fn transfer(k: &mut Kernel, src: u32, dst: u32, badge: u64) -> Result<u64, Fail> {
    // A fault report synthesised by the kernel.
    if let Some(w) = k.t(src).fault {
        let mut mrs = [0u64; ipc::MAX_MRS];
        if k.t(src).fault_to_pager {
            let access = if w[3] & 0x10 != 0 {
                abi::mem::EXEC
            } else if w[3] & 0x2 != 0 {
                abi::mem::WRITE
            } else {
                abi::mem::READ
            };
            let present = if w[3] & 1 != 0 { ipc::label::PRESENT } else { 0 };
            mrs[..4].copy_from_slice(&[
                Tag::new(ipc::label::PAGE_FAULT, 3).0 | ipc::TAG_FAULT,
                w[1],
                access | present,
                w[2],
            ]);
        } else {
            mrs[..5].copy_from_slice(&[Tag::new(ipc::label::FAULT, 4).0 | ipc::TAG_FAULT, w[0], w[1], w[2], w[3]]);
        }
        put_message(k, dst, &mrs, badge);
        k.t(dst).utcb().recv_str_len = 0;
        return Ok(0);
    }
    let mut mrs = message_of(k, src);
    // The answer to a fault.
    if k.t(dst).fault.is_some() {
        if k.t(dst).fault_to_pager {
            let n = transfer_items(k, src, dst, &mut mrs, Some(Fpage::all_mem()))?;
            k.tm(dst).fault = None;
            k.tm(dst).fault_to_pager = false;
            return Ok(n);
        }
        let tag = Tag(mrs[0]);
        if tag.words() >= 1 && mrs[1] != 0 {
            if !abi::layout::is_user_range(mrs[1], 1) {
                return Err(Fail::Sender(Error::InvalidArg));
            }
            k.t(dst).frame().rip = mrs[1];
        }
        k.tm(dst).fault = None;
        return Ok(0);
    }
    let tag = Tag(mrs[0]);
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
        // Both ranges resolved (and checked) before a byte moves; each page walked once.
        let from = task::UserRange::<{ task::STRING_PAGES }>::resolve(spml4, saddr, len, false)
            .map_err(|_| Fail::Sender(Error::CopyFault))?;
        let to = task::UserRange::<{ task::STRING_PAGES }>::resolve(dpml4, daddr, len, true)
            .map_err(|_| Fail::Receiver(Error::CopyFault))?;
        task::copy_range(&from, &to);
        slen = len;
    }
    let n = transfer_items(k, src, dst, &mut mrs, None)?;
    mrs[0] &= !ipc::TAG_FAULT;
    put_message(k, dst, &mrs, badge);
    k.t(dst).utcb().recv_str_len = slen;
    Ok(n)
}

/// The send phase of send and call, from the current thread.
pub fn send(k: &mut Kernel, dest_slot: u64, call: bool, timeouts: u64) -> Result<(), Error> {
    let cur = k.view.current;
    if let Ok(c) = k.cur_task().cspace.get(dest_slot) {
        if let crate::task::Obj::Reply(r, n) = c.obj {
            return send_saved_reply(k, dest_slot, r, n, call);
        }
    }
    let (dest, cap) = k.send_dest(dest_slot)?;
    if dest == cur {
        return Err(Error::Deadlock);
    }
    deliver(k, cur, dest, cap.badge, call, ipc::send_timeout(timeouts), ipc::recv_timeout(timeouts))
}

/// Answer the caller `r` through the saved reply capability in `slot`, from any thread
/// of the task that holds it. The capability is used up when the caller gets the
/// answer (or an error of its own); when the answer fails for the sender (a bad item,
/// a string it cannot read) the capability stays and the caller goes on waiting.
fn send_saved_reply(k: &mut Kernel, slot: u64, r: task::ObjRef, n: u32, call: bool) -> Result<(), Error> {
    if call {
        return Err(Error::InvalidArg);
    }
    let cur = k.view.current;
    let me = k.t(cur).task;
    if !k.awaits_saved_reply(r, n) {
        // The call it answered is over (the caller died, timed out or was answered).
        let _ = k.cap_delete(me, slot);
        return Err(Error::NoPartner);
    }
    // Use the reply path with this caller, keeping any other pending reply right.
    let pending = k.tm(cur).reply_to.replace(r);
    let res = reply(k);
    k.tm(cur).reply_to = pending;
    if !k.awaits_saved_reply(r, n) {
        let _ = k.cap_delete(me, slot);
    }
    res
}

/// Deliver a message (or a fault report) from `src` to `dest`, or queue `src`.
pub fn deliver(
    k: &mut Kernel,
    src: u32,
    dest: u32,
    badge: u64,
    call: bool,
    send_to: u32,
    recv_to: u32,
) -> Result<(), Error> {
    if k.t(dest).state == State::RecvBlocked && accepts(k, dest, src) {
        match transfer(k, src, dest, badge) {
            Ok(_) => {}
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
            k.view.hint = Some(dest);
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
    let cur = k.view.current;
    let from = if src_slot == ipc::RECV_ANY {
        None
    } else {
        let (id, _) = k.thread_cap(src_slot, 0)?;
        if id == cur {
            return Err(Error::Deadlock);
        }
        Some(k.thread_ref(id))
    };
    if from.is_none() && k.t(cur).irq_pending != 0 {
        let line = k.t(cur).irq_pending.trailing_zeros();
        k.tm(cur).irq_pending &= !(1u64 << line);
        deliver_irq(k, cur, line as u8);
        return Ok(());
    }
    if take_queued(k, cur, from)? {
        return Ok(());
    }
    if timeout == ipc::POLL {
        return Err(Error::Timeout);
    }
    k.tm(cur).recv_from = from;
    k.block(cur, State::RecvBlocked, timeout);
    Ok(())
}

/// Give receiver `recv` the first queued sender it accepts (`from`: only that one):
/// true if a message moved. Senders whose message fails are woken with the error.
pub fn take_queued(k: &mut Kernel, recv: u32, from: Option<task::ObjRef>) -> Result<bool, Error> {
    loop {
        let q = k.t(recv).sendq;
        let sender = match from {
            None => q.front(),
            Some(r) => k.sendq.iter(&q).find(|s| *s == r.id),
        };
        let Some(s) = sender else { break };
        let badge = k.t(s).send_badge;
        match transfer(k, s, recv, badge) {
            Ok(_) => {
                k.unlink(s);
                if k.t(s).call {
                    k.tm(s).state = State::ReplyBlocked;
                    k.tm(s).partner = Some(k.thread_ref(recv));
                    let to = k.t(s).call_timeout;
                    if to != ipc::INFINITE {
                        let at = k.ticks + crate::sched::ticks_for_us(to as u64);
                        k.timers.insert(s, at);
                    }
                    k.tm(recv).reply_to = Some(k.thread_ref(s));
                } else {
                    k.wake(s, 0);
                }
                return Ok(true);
            }
            Err(Fail::Sender(e)) => {
                k.unlink(s);
                debug_assert!(k.t(recv).sendq.front() != Some(s), "a sender stays queued after unlink");
                k.wake(s, e as u64);
            }
            Err(Fail::Receiver(e)) => {
                // The receiver cannot take this message (its buffer is not writable, its
                // quota cannot pay for the items): the message is dropped and both are
                // told, as when the receiver was waiting (`deliver`). Left queued, the
                // sender would wait for a receive that fails the same way each time —
                // a server loop receiving into the same buffer would spin on it for ever.
                k.unlink(s);
                k.wake(s, e as u64);
                return Err(e);
            }
        }
    }
    Ok(false)
}

/// After senders were queued on `t` by someone else (an endpoint moved to it): if it
/// waits in a receive, it takes the first of them now.
pub fn wake_receiver(k: &mut Kernel, t: u32) {
    if k.t(t).state != State::RecvBlocked {
        return;
    }
    let from = k.t(t).recv_from;
    match take_queued(k, t, from) {
        Ok(true) => {
            k.unlink(t);
            k.wake(t, 0);
        }
        Ok(false) => {}
        Err(e) => {
            k.unlink(t);
            k.wake(t, e as u64);
        }
    }
}

/// Reply to the thread whose call the current thread received last.
pub fn reply(k: &mut Kernel) -> Result<(), Error> {
    let cur = k.view.current;
    let Some(r) = k.tm(cur).reply_to.take() else { return Err(Error::NoPartner) };
    let me = k.thread_ref(cur);
    // The caller waits for this thread, or (a saved reply being used) for whoever holds
    // the capability.
    if !k.thread_alive(r)
        || k.t(r.id).state != State::ReplyBlocked
        || (k.t(r.id).partner != Some(me) && k.t(r.id).partner != Some(r))
    {
        return Err(Error::NoPartner);
    }
    let resumes_fault = k.t(r.id).fault;
    let pager_answer = resumes_fault.is_some() && k.t(r.id).fault_to_pager;
    // A string the caller offered no room for: the caller waits for this reply and
    // nothing else, so it is told (TooLong) rather than left waiting for good.
    if resumes_fault.is_none() && Tag(k.t(cur).frame().r10).has_string() {
        let len = k.t(cur).utcb().send_buf_len;
        if len <= ipc::MAX_STRING && len > k.t(r.id).utcb().recv_buf_len {
            k.wake(r.id, Error::TooLong as u64);
            return Err(Error::TooLong);
        }
    }
    match transfer(k, cur, r.id, 0) {
        Ok(0) if pager_answer => {
            // The pager mapped nothing: the fault goes to the fault handler.
            k.tm(r.id).fault_to_pager = false;
            k.tm(r.id).partner = None;
            k.timers.remove(r.id);
            let words = resumes_fault.unwrap_or_default();
            if !report_fault(k, r.id, words, false) {
                crate::arch::serial::kprintln!("[kernel] thread {}: its pager mapped nothing for the fault at {:#x} and it has no fault handler -> stopped", r.id, words[1]);
            }
            Ok(())
        }
        Ok(_) if resumes_fault.is_some() => {
            // The faulted thread continues with its registers as they were.
            k.timers.remove(r.id);
            k.tm(r.id).partner = None;
            k.make_ready(r.id);
            Ok(())
        }
        Ok(_) => {
            k.wake(r.id, 0);
            Ok(())
        }
        Err(Fail::Sender(e)) if pager_answer => {
            // The pager's answer cannot be carried out (an item the kernel refuses, such
            // as a page that may not be mapped): the pager is told, and the fault goes to
            // the fault handler as when it maps nothing — else the thread would wait for
            // an answer no pager sends (pagers do not answer one fault twice).
            k.tm(r.id).fault_to_pager = false;
            k.tm(r.id).partner = None;
            k.timers.remove(r.id);
            let words = resumes_fault.unwrap_or_default();
            if !report_fault(k, r.id, words, false) {
                crate::arch::serial::kprintln!("[kernel] thread {}: its pager's answer to the fault at {:#x} was refused ({}) and it has no fault handler -> stopped", r.id, words[1], e.name());
            }
            Err(e)
        }
        Err(Fail::Sender(e)) => {
            k.tm(cur).reply_to = Some(r);
            Err(e)
        }
        Err(Fail::Receiver(e)) if resumes_fault.is_some() => {
            // The page could not be mapped into the faulting task (its kernel quota is
            // spent): resuming it would only fault again, so the fault goes to its fault
            // handler, as when the pager maps nothing.
            k.tm(r.id).fault_to_pager = false;
            k.tm(r.id).partner = None;
            k.timers.remove(r.id);
            let words = resumes_fault.unwrap_or_default();
            if !report_fault(k, r.id, words, false) {
                crate::arch::serial::kprintln!("[kernel] thread {}: the page for its fault at {:#x} could not be mapped ({}) and it has no fault handler -> stopped", r.id, words[1], e.name());
            }
            Err(e)
        }
        Err(Fail::Receiver(e)) => {
            k.wake(r.id, e as u64);
            Err(e)
        }
    }
}

/// Write an interrupt message for `line` into `t`'s registers.
pub fn deliver_irq(k: &mut Kernel, t: u32, line: u8) {
    let badge = k.irqs[line as usize].map_or(0, |(_, b)| b);
    let mut mrs = [0u64; ipc::MAX_MRS];
    mrs[0] = Tag::new(ipc::label::IRQ, 1).0;
    mrs[1] = line as u64;
    put_message(k, t, &mrs, badge);
    k.t(t).utcb().recv_str_len = 0;
}

/// Hand an interrupt on `line` to the attached thread, at once if it waits for any
/// message, else when it next receives. A line whose driver is gone is detached.
pub fn irq_fired(k: &mut Kernel, line: u8) {
    let attached = k.irqs[line as usize].filter(|(t, _)| k.thread_alive(*t));
    let Some((t, _)) = attached else {
        k.irq_detach(line);
        return;
    };
    let th = k.t(t.id);
    if th.state == State::RecvBlocked && th.recv_from.is_none() {
        deliver_irq(k, t.id, line);
        k.unlink(t.id);
        k.wake(t.id, 0);
    } else {
        k.tm(t.id).irq_pending |= 1u64 << line;
    }
}

/// Report a fault of thread `t` as a call: a page fault to its pager if it has one
/// (`page_fault`), otherwise to its fault handler. Without either the thread is
/// stopped. Returns whether somebody took it.
pub fn report_fault(k: &mut Kernel, t: u32, words: [u64; 4], page_fault: bool) -> bool {
    let alive = |k: &Kernel, h: Option<(task::ObjRef, u64)>| h.filter(|(r, _)| k.thread_alive(*r) && r.id != t);
    let pager = if page_fault { alive(k, k.t(t).pager) } else { None };
    let target = pager.map(|p| (p, true)).or_else(|| alive(k, k.t(t).fault_handler).map(|h| (h, false)));
    let Some(((h, badge), to_pager)) = target else {
        k.block(t, State::Stopped, ipc::INFINITE);
        return false;
    };
    k.tm(t).fault = Some(words);
    k.tm(t).fault_to_pager = to_pager;
    if deliver(k, t, h.id, badge, true, ipc::INFINITE, ipc::INFINITE).is_err() {
        k.tm(t).fault = None;
        k.block(t, State::Stopped, ipc::INFINITE);
        return false;
    }
    true
}
