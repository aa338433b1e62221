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
use abi::{cap, mem as m, rights, sys, tctl, Error};
use kcore::cspace::{CSpace, Cap};
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
        let f = *k.cur().frame();
        k.cur().frame().rax = 0;
        if let Err(e) = dispatch(k, &f) {
            k.cur().frame().rax = e as u64;
        }
    }
    schedule();
}

fn dispatch(k: &mut Kernel, f: &TrapFrame) -> Result<(), Error> {
    let (a0, a1, a2, a3, a4) = (f.rdi, f.rsi, f.rdx, f.r10, f.r8);
    match f.rax {
        sys::NULL => Ok(()),
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
            k.cur_task().cspace.copy(a0, a1, a2, a3)
        }
        sys::CAP_DELETE => k.cur_task().cspace.delete(a0).map(|_| ()),
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
            let src = k.cap(a1)?;
            let c = CSpace::derive(src, a3, 0)?;
            k.task(target).cspace.insert(a2, c)
        }
        sys::TASK_CREATE => task_create(k, a0, a1),
        sys::THREAD_CREATE => thread_create(k, a0, a1, a2, a3),
        sys::THREAD_CONTROL => thread_control(k, a0, a1, a2, a3, a4),
        sys::MEM_ALLOC => mem_alloc(k, a0, a1, a2, a3),
        sys::MEM_MAP => mem_map(k, a0, a1, a2, a3, a4),
        sys::MEM_UNMAP => mem_unmap(k, a0, a1),
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
                _ => Err(Error::InvalidArg),
            }
        }
        _ => Err(Error::NoSys),
    }
}

fn check_tag(f: &TrapFrame) -> Result<(), Error> {
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
    k.cur_task().cspace.insert(dst, Cap { obj: Obj::Task(r), rights: rights::CONTROL, badge: 0 }).expect("slot checked");
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
    k.cur_task()
        .cspace
        .insert(dst, Cap { obj: Obj::Thread(r), rights: rights::SEND | rights::CONTROL, badge: 0 })
        .expect("slot checked");
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
            if a == u64::MAX {
                k.tm(id).fault_handler = None;
                return Ok(());
            }
            let (h, _) = k.thread_cap(a, rights::SEND)?;
            let r = k.thread_ref(h);
            k.tm(id).fault_handler = Some((r, b));
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

fn mem_alloc(k: &mut Kernel, task_slot: u64, va: u64, n: u64, rights: u64) -> Result<(), Error> {
    let target = k.task_cap(task_slot, rights::CONTROL)?;
    check_pages(va, n)?;
    if rights & !m::RIGHTS_MASK != 0 || rights & m::READ == 0 {
        return Err(Error::InvalidArg);
    }
    let t = k.task(target);
    for i in 0..n {
        if task::lookup(t.pml4, va + i * PAGE_SIZE).is_some() {
            return Err(Error::AlreadyMapped);
        }
    }
    if t.quota.available() < n {
        return Err(Error::NoMemory);
    }
    let flags = task::pte_flags(rights);
    for i in 0..n {
        let res = match mem::alloc_frame() {
            None => Err(Error::NoMemory),
            Some(f) => t.map_frame(va + i * PAGE_SIZE, f, flags).inspect_err(|_| mem::free_frame(f)),
        };
        if let Err(e) = res {
            for j in 0..i {
                let _ = t.unmap_page(va + j * PAGE_SIZE, false);
            }
            return Err(e);
        }
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
    let want = flags & m::RIGHTS_MASK;
    let grant = flags & m::GRANT != 0;
    let me = k.t(k.current).task;
    let spml4 = k.task(me).pml4;
    if me == target && src < dst + n * PAGE_SIZE && dst < src + n * PAGE_SIZE {
        return Err(Error::InvalidArg);
    }
    // Check everything before changing anything.
    for i in 0..n {
        let e = task::lookup(spml4, src + i * PAGE_SIZE).ok_or(Error::NotMapped)?;
        if e & pt::UTCB != 0 {
            return Err(Error::InvalidArg);
        }
        if want & !task::pte_rights(e) != 0 {
            return Err(Error::NoRights);
        }
    }
    let tpml4 = k.task(target).pml4;
    for i in 0..n {
        if task::lookup(tpml4, dst + i * PAGE_SIZE).is_some() {
            return Err(Error::AlreadyMapped);
        }
    }
    let fl = task::pte_flags(want);
    for i in 0..n {
        let e = task::lookup(spml4, src + i * PAGE_SIZE).expect("checked");
        if let Err(err) = k.task(target).map_frame(dst + i * PAGE_SIZE, e & pt::ADDR, fl) {
            for j in 0..i {
                let _ = k.task(target).unmap_page(dst + j * PAGE_SIZE, false);
            }
            return Err(err);
        }
    }
    if grant {
        for i in 0..n {
            let _ = k.task(me).unmap_page(src + i * PAGE_SIZE, false);
        }
    }
    Ok(())
}

fn mem_unmap(k: &mut Kernel, va: u64, n: u64) -> Result<(), Error> {
    check_pages(va, n)?;
    let t = k.cur_task();
    for i in 0..n {
        let e = task::lookup(t.pml4, va + i * PAGE_SIZE).ok_or(Error::NotMapped)?;
        if e & pt::UTCB != 0 {
            return Err(Error::InvalidArg);
        }
    }
    for i in 0..n {
        t.unmap_page(va + i * PAGE_SIZE, false)?;
    }
    Ok(())
}
