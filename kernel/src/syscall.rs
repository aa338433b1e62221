//! System call dispatch. Every argument is checked here or in the code it calls;
//! every failure is an error code in `rax`. `docs/syscalls.md` describes each call.

use crate::arch::cpu::TrapFrame;
use crate::arch::timer;
use crate::ipc;
use crate::kernel::{kernel, schedule, Kernel, State};
use crate::mem;
use crate::task::{self, Obj};
use abi::ipc::Tag;
use abi::layout::{is_user_range, PAGE_SIZE};
use abi::fpage::Fpage;
use abi::{cap, irq, mem as m, rights, sys, tctl, Error};
use kcore::cspace::Cap;
use kcore::pagetable as pt;

#[no_mangle]
extern "C" fn syscall_dispatch(frame: *mut TrapFrame) {
    // SAFETY: the entry stub passes the current thread's TrapFrame.
    let n = unsafe { (*frame).rax };
    if n == sys::IPC_CALL || n == sys::IPC_REPLY_WAIT {
        if let Some(next) = crate::fastpath::ipc(kernel(), n) {
            crate::kernel::switch_to(next);
            return;
        }
    }
    {
        let k = kernel();
        let fr = k.cur().frame();
        // The arguments only; handlers write results into the frame.
        let f = Args { rax: fr.rax, rdi: fr.rdi, rsi: fr.rsi, rdx: fr.rdx, r10: fr.r10, r8: fr.r8 };
        fr.rax = 0;
        if let Err(e) = dispatch(k, &f) {
            k.cur().frame().rax = e as u64;
        }
    }
    schedule();
}

/// The argument registers of a system call.
struct Args {
    rax: u64,
    rdi: u64,
    rsi: u64,
    rdx: u64,
    r10: u64,
    r8: u64,
}

fn dispatch(k: &mut Kernel, f: &Args) -> Result<(), Error> {
    let (a0, a1, a2, a3, a4) = (f.rdi, f.rsi, f.rdx, f.r10, f.r8);
    match f.rax {
        sys::NULL => Ok(()),
        sys::KERNEL_INFO if a0 == 1 => {
            k.cur().frame().rdi = crate::kernel::IDLE_TSC.load(core::sync::atomic::Ordering::Relaxed);
            Ok(())
        }
        sys::KERNEL_INFO => {
            let ticks = k.ticks;
            let q = k.cur_task().quota;
            let out = k.cur().frame();
            out.rdi = abi::ABI_VERSION;
            out.rsi = ticks;
            out.rdx = timer::tsc_per_ms();
            out.r10 = q.limit;
            out.r8 = q.used;
            out.r9 = mem::free_frames();
            Ok(())
        }
        sys::DEBUG_PUT => debug_put(k, a0, a1),
        sys::IPC_SEND | sys::IPC_CALL => {
            check_tag(f)?;
            ipc::send(k, a0, f.rax == sys::IPC_CALL, a2)
        }
        sys::IPC_RECV => ipc::receive(k, a1, abi::ipc::recv_timeout(a2)),
        sys::IPC_REPLY => {
            check_tag(f)?;
            ipc::reply(k)
        }
        sys::IPC_REPLY_WAIT => {
            check_tag(f)?;
            match ipc::reply(k) {
                Ok(()) | Err(Error::NoPartner) => {}
                Err(e) => return Err(e),
            }
            ipc::receive(k, a1, abi::ipc::recv_timeout(a2))
        }
        sys::YIELD => {
            k.rotate = true;
            k.need_resched = true;
            Ok(())
        }
        sys::SLEEP => {
            let cur = k.current;
            if a0 == 0 {
                k.rotate = true;
                k.need_resched = true;
            } else {
                k.sleep(cur, a0);
            }
            Ok(())
        }
        sys::CAP_COPY => {
            k.cap(a0)?; // the source must name a live object
            let me = k.t(k.current).task;
            k.cap_derive(me, a0, me, a1, a2, a3, false, false)
        }
        sys::CAP_DELETE => {
            let me = k.t(k.current).task;
            k.cap_delete(me, a0)
        }
        sys::CAP_INFO => {
            let c = k.cap(a0)?;
            let (ty, _) = describe(&c);
            let out = k.cur().frame();
            out.rdi = ty;
            out.rsi = c.rights;
            out.rdx = c.badge;
            Ok(())
        }
        sys::CAP_GIVE => {
            let target = k.task_cap(a0, rights::CONTROL)?;
            k.cap(a1)?;
            let me = k.t(k.current).task;
            k.cap_derive(me, a1, target, a2, a3, 0, false, false)
        }
        sys::TASK_CREATE => task_create(k, a0, a1),
        sys::THREAD_CREATE => thread_create(k, a0, a1, a2, a3),
        sys::THREAD_CONTROL => thread_control(k, a0, a1, a2, a3, a4),
        sys::MEM_MAP => mem_map(k, a0, a1, a2, a3, a4),
        sys::UNMAP => unmap(k, a0, a1),
        sys::IRQ_CONTROL => irq_control(k, a0, a1, a2, a3),
        sys::SAVE_REPLY => {
            // Move the pending reply right into a capability, freeing the thread to
            // receive other calls and answer this one later.
            let cur = k.current;
            let me = k.t(cur).task;
            match k.cur_task().cspace.get(a0) {
                Err(Error::InvalidCap) if a0 < cap::SLOTS => {}
                Ok(_) => return Err(Error::SlotInUse),
                Err(e) => return Err(e),
            }
            let r = k.tm(cur).reply_to.ok_or(Error::NoPartner)?;
            if !k.thread_alive(r) {
                k.tm(cur).reply_to = None;
                return Err(Error::NoPartner);
            }
            k.cap_install(me, a0, Cap { obj: Obj::Reply(r), rights: rights::SEND, badge: 0 })?;
            k.tm(cur).reply_to = None;
            Ok(())
        }
        sys::TASK_INFO => {
            let c = k.cap(a0)?;
            let Obj::Task(r) = c.obj else { return Err(Error::WrongType) };
            let t = k.task(r.id);
            let (n, q) = (t.nthreads as u64, t.quota);
            let out = k.cur().frame();
            out.rdi = n;
            out.rsi = q.limit;
            out.rdx = q.used;
            Ok(())
        }
        sys::THREAD_EXIT => {
            let cur = k.current;
            k.destroy_thread(cur);
            Ok(())
        }
        sys::TASK_DESTROY => {
            let t = k.task_cap(a0, rights::CONTROL)?;
            k.destroy_task(t);
            Ok(())
        }
        sys::MACHINE => {
            let c = k.cap(a0)?;
            if c.obj != Obj::Machine {
                return Err(Error::WrongType);
            }
            if c.rights & rights::SHUTDOWN == 0 {
                return Err(Error::NoRights);
            }
            match a1 {
                abi::machine::EXIT => {
                    crate::kprintln!("[kernel] machine exit {}", a2 as u32);
                    // SAFETY: port 0xf4 is QEMU's isa-debug-exit device; writing it ends
                    // the emulation. Without the device the write is ignored.
                    unsafe { x86_64::instructions::port::Port::<u32>::new(0xf4).write(a2 as u32) };
                    Ok(())
                }
                abi::machine::MEASURE_CR3 => {
                    let n = a2.min(1_000_000);
                    let own = k.cur_task().pml4;
                    let other = crate::arch::boot::boot_pml4_phys();
                    let t0 = crate::arch::timer::rdtsc();
                    for _ in 0..n {
                        task::load_cr3(other);
                        task::load_cr3(own);
                    }
                    let dt = crate::arch::timer::rdtsc() - t0;
                    k.cur().frame().rdi = dt;
                    Ok(())
                }
                _ => Err(Error::InvalidArg),
            }
        }
        _ => Err(Error::NoSys),
    }
}

fn check_tag(f: &Args) -> Result<(), Error> {
    if Tag(f.r10).is_valid() {
        Ok(())
    } else {
        Err(Error::InvalidArg)
    }
}

fn describe(c: &Cap<Obj>) -> (u64, u32) {
    match c.obj {
        Obj::Thread(r) => (cap::THREAD, r.id),
        Obj::Task(r) => (cap::TASK, r.id),
        Obj::Machine => (cap::MACHINE, 0),
        Obj::Irq(l) => (cap::IRQ, l as u32),
        Obj::IrqControl => (cap::IRQ_CONTROL, 0),
        Obj::Reply(r) => (cap::REPLY, r.id),
    }
}

pub const DEBUG_PUT_MAX: u64 = 4096;

fn debug_put(k: &mut Kernel, ptr: u64, len: u64) -> Result<(), Error> {
    if len > DEBUG_PUT_MAX {
        return Err(Error::TooLong);
    }
    let mut buf = [0u8; DEBUG_PUT_MAX as usize];
    let pml4 = k.cur_task().pml4;
    task::copy_from_user(pml4, ptr, &mut buf[..len as usize])?;
    crate::serial::Serial::write_bytes(&buf[..len as usize]);
    Ok(())
}

fn task_create(k: &mut Kernel, dst: u64, quota: u64) -> Result<(), Error> {
    // Check the slot first so that a failure leaves nothing behind.
    match k.cur_task().cspace.get(dst) {
        Err(Error::InvalidCap) if dst < cap::SLOTS => {}
        Ok(_) => return Err(Error::SlotInUse),
        Err(e) => return Err(e),
    }
    let me = k.t(k.current).task;
    let id = k.create_task(quota, Some(me))?;
    let r = k.task_ref(id);
    k.cap_install(me, dst, Cap { obj: Obj::Task(r), rights: rights::CONTROL, badge: 0 }).expect("slot checked");
    Ok(())
}

fn thread_create(k: &mut Kernel, task_slot: u64, dst: u64, utcb: u64, prio: u64) -> Result<(), Error> {
    let target = k.task_cap(task_slot, rights::CONTROL)?;
    match k.cur_task().cspace.get(dst) {
        Err(Error::InvalidCap) if dst < cap::SLOTS => {}
        Ok(_) => return Err(Error::SlotInUse),
        Err(e) => return Err(e),
    }
    if !utcb.is_multiple_of(PAGE_SIZE) {
        return Err(Error::Misaligned);
    }
    if !is_user_range(utcb, PAGE_SIZE) {
        return Err(Error::BadAddress);
    }
    if prio > k.cur().prio as u64 {
        return Err(Error::InvalidArg);
    }
    let id = k.create_thread(target, utcb, prio as u8, false)?;
    let r = k.thread_ref(id);
    let me = k.t(k.current).task;
    k.cap_install(me, dst, Cap { obj: Obj::Thread(r), rights: rights::SEND | rights::CONTROL, badge: 0 }).expect("slot checked");
    Ok(())
}

fn thread_control(k: &mut Kernel, slot: u64, op: u64, a: u64, b: u64, c: u64) -> Result<(), Error> {
    let (id, _) = k.thread_cap(slot, rights::CONTROL)?;
    match op {
        tctl::START => {
            if k.t(id).state != State::Stopped {
                return Err(Error::BadState);
            }
            if (a != 0 && !is_user_range(a, 1)) || (b != 0 && !is_user_range(b - 1, 1)) {
                return Err(Error::InvalidArg);
            }
            let fr = k.t(id).frame();
            if a != 0 {
                fr.rip = a;
                fr.rsp = b;
                fr.rdi = c;
            }
            if fr.rip == 0 {
                return Err(Error::InvalidArg);
            }
            k.tm(id).fault = None;
            k.make_ready(id);
            Ok(())
        }
        tctl::STOP => {
            let st = k.t(id).state;
            if st == State::Stopped {
                return Ok(());
            }
            let was_blocked = matches!(st, State::SendBlocked | State::RecvBlocked | State::ReplyBlocked | State::Sleeping);
            k.unlink(id);
            k.tm(id).state = State::Stopped;
            if was_blocked {
                k.t(id).frame().rax = Error::BadState as u64;
            }
            if id == k.current {
                k.need_resched = true;
            }
            Ok(())
        }
        tctl::SET_PRIORITY => {
            if a > k.cur().prio as u64 {
                return Err(Error::InvalidArg);
            }
            let in_rq = k.rq.contains(id);
            k.rq.remove(id);
            k.tm(id).prio = a as u8;
            if in_rq {
                k.rq.enqueue(id, a as u8);
            }
            k.need_resched = true;
            Ok(())
        }
        tctl::SET_FAULT_HANDLER => {
            let h = handler(k, a, b)?;
            k.tm(id).fault_handler = h;
            Ok(())
        }
        tctl::SET_PAGER => {
            let h = handler(k, a, b)?;
            k.tm(id).pager = h;
            Ok(())
        }
        tctl::READ_STATE => {
            let t = k.t(id);
            let st = match t.state {
                State::Stopped | State::Dead => tctl::state::STOPPED,
                State::Running | State::Ready => tctl::state::READY,
                State::SendBlocked if t.fault.is_some() => tctl::state::FAULTED,
                State::ReplyBlocked if t.fault.is_some() => tctl::state::FAULTED,
                State::SendBlocked => tctl::state::BLOCKED_SEND,
                State::RecvBlocked => tctl::state::BLOCKED_RECV,
                State::ReplyBlocked => tctl::state::BLOCKED_REPLY,
                State::Sleeping => tctl::state::SLEEPING,
            };
            let prio = t.prio as u64;
            let out = k.cur().frame();
            out.rdi = st;
            out.rsi = prio;
            Ok(())
        }
        tctl::DESTROY => {
            k.destroy_thread(id);
            Ok(())
        }
        _ => Err(Error::InvalidArg),
    }
}

/// A fault handler or pager named by `slot` (a thread capability with SEND; `u64::MAX`
/// = none) and the badge its messages carry.
fn handler(k: &mut Kernel, slot: u64, badge: u64) -> Result<Option<(task::ObjRef, u64)>, Error> {
    if slot == u64::MAX {
        return Ok(None);
    }
    let (h, _) = k.thread_cap(slot, rights::SEND)?;
    Ok(Some((k.thread_ref(h), badge)))
}

fn check_pages(va: u64, n: u64) -> Result<(), Error> {
    if n == 0 || n > m::MAX_PAGES_PER_CALL {
        return Err(Error::InvalidArg);
    }
    if !va.is_multiple_of(PAGE_SIZE) {
        return Err(Error::Misaligned);
    }
    if !is_user_range(va, n * PAGE_SIZE) {
        return Err(Error::BadAddress);
    }
    Ok(())
}

fn mem_map(k: &mut Kernel, task_slot: u64, src: u64, dst: u64, n: u64, flags: u64) -> Result<(), Error> {
    let target = k.task_cap(task_slot, rights::CONTROL)?;
    check_pages(src, n)?;
    check_pages(dst, n)?;
    if flags & !(m::RIGHTS_MASK | m::GRANT) != 0 || flags & m::READ == 0 {
        return Err(Error::InvalidArg);
    }
    let me = k.t(k.current).task;
    k.map_mem(me, src, target, dst, n, flags & m::RIGHTS_MASK, flags & m::GRANT != 0, true)
}

/// `UNMAP(fpage, flags)`: take the flexpage's rights (all if none are given) from
/// everything derived from the caller's part of it; with `SELF` also from the
/// caller's own mappings.
fn unmap(k: &mut Kernel, fp: u64, flags: u64) -> Result<(), Error> {
    let fp = Fpage(fp);
    if !fp.is_valid() || flags & !abi::fpage::UNMAP_SELF != 0 {
        return Err(Error::InvalidArg);
    }
    let include_self = flags & abi::fpage::UNMAP_SELF != 0;
    let me = k.t(k.current).task;
    match fp.kind() {
        abi::fpage::MEM => {
            if fp.base().checked_add(fp.size()).is_none_or(|e| e > abi::layout::USER_END) {
                return Err(Error::BadAddress);
            }
            let remove = if fp.rights() == 0 { m::RIGHTS_MASK } else { fp.rights() };
            let (lo, hi) = (fp.base(), fp.base() + fp.size());
            let pages: alloc::vec::Vec<u64> = k.task(me).leaves_in(lo, hi).into_iter().map(|(va, e)| {
                if e & pt::UTCB != 0 { u64::MAX } else { va }
            }).collect();
            if include_self && pages.contains(&u64::MAX) {
                return Err(Error::InvalidArg);
            }
            for va in pages.into_iter().filter(|v| *v != u64::MAX) {
                k.demap_mem(me, va, remove, include_self);
            }
            Ok(())
        }
        abi::fpage::IO => {
            for port in fp.base()..fp.base() + fp.size() {
                k.demap_port(me, port as u16, include_self);
            }
            Ok(())
        }
        _ => {
            let remove = if fp.rights() == 0 { u8::MAX as u64 } else { fp.rights() };
            for slot in fp.base()..(fp.base() + fp.size()).min(cap::SLOTS) {
                k.cap_reduce(me, slot, remove, include_self);
            }
            Ok(())
        }
    }
}

fn irq_control(k: &mut Kernel, slot: u64, op: u64, a: u64, b: u64) -> Result<(), Error> {
    let c = k.cap(slot)?;
    let me = k.t(k.current).task;
    match (op, c.obj) {
        (irq::CREATE, Obj::IrqControl) => {
            if a >= crate::arch::irqchip::lines() as u64 {
                return Err(Error::InvalidArg);
            }
            k.cap_install(me, b, Cap { obj: Obj::Irq(a as u8), rights: rights::CONTROL, badge: 0 })
        }
        (irq::CREATE, _) => Err(Error::WrongType),
        (_, Obj::Irq(line)) => {
            if c.rights & rights::CONTROL == 0 {
                return Err(Error::NoRights);
            }
            let l = line as usize;
            match op {
                irq::ATTACH => {
                    let cur = k.current;
                    k.irqs[l] = Some((k.thread_ref(cur), a));
                    crate::arch::irqchip::unmask(line);
                    Ok(())
                }
                irq::ACK => {
                    if k.irqs[l].is_none() {
                        return Err(Error::BadState);
                    }
                    crate::arch::irqchip::unmask(line);
                    Ok(())
                }
                irq::DETACH => {
                    k.irqs[l] = None;
                    crate::arch::irqchip::mask(line);
                    Ok(())
                }
                _ => Err(Error::InvalidArg),
            }
        }
        _ => Err(Error::WrongType),
    }
}
