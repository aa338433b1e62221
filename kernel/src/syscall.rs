//! System call dispatch: `kcore::syscall::Call::decode` checks the registers (host-tested),
//! `invoke` looks up capabilities and partner state and then does the work. Every
//! failure is an error code in `rax`. `docs/syscalls.md` describes each call.

use crate::arch::cpu::{self, TrapFrame};
use crate::arch::timer;
use crate::ipc;
use crate::kernel::{Kernel, State};
use crate::mem;
use crate::sched::schedule;
use crate::task::{self, Obj};
use abi::{cap, rights, sys, tctl, Error};
use kcore::cspace::Cap;
use kcore::pagetable as pt;
use kcore::syscall::{Call, IrqOp, MachineOp, Regs, Slot, ThreadOp, UnmapRange, DEBUG_PUT_MAX};

/// The general path of every system call (`IPC_CALL` and `IPC_REPLY_WAIT` come here
/// when `fastpath::ipc_fastpath` declines them).
#[no_mangle]
extern "C" fn syscall_dispatch(_frame: *mut TrapFrame) {
    // SAFETY: this is the start of a kernel entry; no reference into kernel state is live.
    let k = unsafe { crate::kernel::enter() };
    if k.t(k.view.current).state != State::Running {
        // Stopped or destroyed from another CPU while it waited for the kernel lock: the
        // call is not made (a stopped thread finds `BadState` when started again).
        k.cur().frame().rax = Error::BadState as u64;
        schedule(k);
        return;
    }
    let fr = k.cur().frame();
    // The arguments only; handlers write results into the frame.
    let r = Regs { rax: fr.rax, rdi: fr.rdi, rsi: fr.rsi, rdx: fr.rdx, r10: fr.r10, r8: fr.r8 };
    fr.rax = 0;
    if let Err(e) = Call::decode(&r).and_then(|c| invoke(k, c)) {
        k.cur().frame().rax = e as u64;
    }
    schedule(k);
}

/// Carry out a decoded call: capability and state checks first, then the effects.
#[inline(always)]
fn invoke(k: &mut Kernel, call: Call) -> Result<(), Error> {
    match call {
        Call::Null => Ok(()),
        Call::KernelInfo { what: 1 } => {
            k.cur().frame().rdi = crate::sched::IDLE_TSC[0].load(core::sync::atomic::Ordering::Relaxed);
            Ok(())
        }
        Call::KernelInfo { what: abi::KERNEL_INFO_TABLES } => {
            let (tasks, threads) = free_slots(k);
            let out = k.cur().frame();
            out.rdi = tasks as u64;
            out.rsi = threads as u64;
            out.rdx = abi::tables::ROOT_TASKS as u64;
            out.r10 = abi::tables::ROOT_THREADS as u64;
            Ok(())
        }
        Call::KernelInfo { what: abi::KERNEL_INFO_MEMORY } => {
            let (c, free) = mem::frame_counts();
            let out = k.cur().frame();
            out.rdi = c.ram;
            out.rsi = c.boot;
            out.rdx = c.heap;
            out.r10 = c.sigma0;
            out.r8 = c.objects;
            out.r9 = free;
            Ok(())
        }
        Call::KernelInfo { what: abi::KERNEL_INFO_SMP } => {
            use core::sync::atomic::Ordering::Relaxed;
            let handovers = k.handovers;
            let out = k.cur().frame();
            out.rdi = crate::arch::smp::cpus() as u64;
            out.rsi = crate::sched::AP_TICKS.load(Relaxed);
            out.rdx = handovers;
            out.r10 = crate::klock::SHOOTDOWNS.load(Relaxed);
            out.r8 = crate::klock::STALLS.load(Relaxed);
            out.r9 = crate::arch::cpu::fast_ipcs().1;
            Ok(())
        }
        Call::CpuInfo { cpu } => {
            use core::sync::atomic::Ordering::Relaxed;
            if cpu >= crate::arch::smp::cpus() as u64 {
                return Err(Error::InvalidArg);
            }
            let c = cpu as usize;
            let (irqs, fast, unlocked) = crate::arch::cpu::counts_of(c);
            let out = k.cur().frame();
            out.rdi = irqs;
            out.rsi = fast;
            out.rdx = unlocked;
            out.r10 = crate::sched::IDLE_TSC[c].load(Relaxed);
            Ok(())
        }
        Call::KernelInfo { .. } => {
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
        Call::DebugPut { ptr, len, screen_only } => debug_put(k, ptr, len, screen_only),
        Call::Send { dest, call, timeouts } => ipc::send(k, dest, call, timeouts),
        Call::Recv { from, timeout } => ipc::receive(k, from, timeout),
        Call::Reply => ipc::reply(k),
        Call::ReplyWait { from, timeout } => {
            match ipc::reply(k) {
                Ok(()) | Err(Error::NoPartner) => {}
                Err(e) => return Err(e),
            }
            ipc::receive(k, from, timeout)
        }
        Call::Yield => {
            k.view.rotate = true;
            k.view.need_resched = true;
            Ok(())
        }
        Call::Sleep { us } => {
            let cur = k.view.current;
            k.sleep(cur, us);
            Ok(())
        }
        Call::CapCopy { src, dst, rights, badge } => {
            k.cap(src)?; // the source must name a live object
            let me = k.t(k.view.current).task;
            k.cap_derive(me, src, me, dst, rights, badge, false, false)
        }
        Call::CapDelete { slot } => {
            let me = k.t(k.view.current).task;
            k.cap_delete(me, slot)
        }
        Call::CapInfo { slot } => {
            let c = match k.cap(slot) {
                Err(Error::InvalidCap) => k.moved_cap(slot)?,
                c => c?,
            };
            let (ty, _) = describe(&c);
            let out = k.cur().frame();
            out.rdi = ty;
            out.rsi = c.rights;
            out.rdx = c.badge;
            out.r10 = identity(&c);
            Ok(())
        }
        Call::CapGive { task, src, dst, rights } => {
            let target = k.task_cap(task, rights::CONTROL)?;
            k.cap(src)?;
            let me = k.t(k.view.current).task;
            k.cap_derive(me, src, target, dst, rights, 0, false, false)
        }
        Call::TaskCreate { dst, quota } => task_create(k, dst, quota),
        Call::ThreadCreate { task, dst, utcb, prio } => thread_create(k, task, dst, utcb, prio),
        Call::ThreadControl { thread, op } => thread_control(k, thread, op),
        Call::MemMap { task, src, dst, pages, rights, grant } => {
            let target = k.task_cap(task, rights::CONTROL)?;
            let me = k.t(k.view.current).task;
            k.map_mem(me, src, target, dst, pages, rights, grant, true)
        }
        Call::Unmap { what, include_self } => unmap(k, what, include_self),
        Call::IrqControl { cap, op } => irq_control(k, cap, op),
        Call::SaveReply { dst } => {
            // Move the pending reply right into a capability, freeing the thread to
            // receive other calls and answer this one later.
            let cur = k.view.current;
            let me = k.t(cur).task;
            free_slot(k, dst)?;
            let r = k.tm(cur).reply_to.ok_or(Error::NoPartner)?;
            // The caller must still wait for this thread: one that timed out (or was
            // stopped) may be queued on another thread by now, and its link there
            // must not be re-pointed.
            let me_ref = k.thread_ref(cur);
            if !k.thread_alive(r) || k.t(r.id).state != State::ReplyBlocked || k.t(r.id).partner != Some(me_ref) {
                k.tm(cur).reply_to = None;
                return Err(Error::NoPartner);
            }
            let n = k.t(r.id).saved_calls.wrapping_add(1);
            k.cap_install(me, dst, Cap { obj: Obj::Reply(r, n), rights: rights::SEND, badge: 0 })?;
            k.tm(r.id).saved_calls = n;
            k.tm(cur).reply_to = None;
            // From now on the caller waits for the capability, not for this thread: any
            // thread holding it may answer, and this thread's death does not end the call.
            k.tm(r.id).partner = Some(r);
            Ok(())
        }
        Call::TaskInfo { task } => {
            let c = k.cap(task)?;
            let Obj::Task(r) = c.obj else { return Err(Error::WrongType) };
            let t = k.task(r.id);
            let (n, q, mut sw) = (t.nthreads as u64, t.quota, t.switches);
            // Blocks in the fastpath are counted per thread (it does not look up tasks).
            sw[0] += k
                .threads
                .iter()
                .flatten()
                .filter(|t| t.task == r.id && t.state != State::Dead)
                .map(|t| t.fast_blocks)
                .sum::<u64>();
            let out = k.cur().frame();
            out.rdi = n;
            out.rsi = q.limit;
            out.rdx = q.used;
            out.r10 = sw[0];
            out.r8 = sw[1];
            Ok(())
        }
        Call::ThreadExit => {
            let cur = k.view.current;
            k.destroy_thread(cur);
            Ok(())
        }
        Call::TaskDestroy { task } => {
            let t = k.task_cap_even_dying(task, rights::CONTROL)?;
            // Memory goes in slices of half a millisecond, the call restarted between
            // them; the rest is short.
            if !k.teardown_slice(t, timer::rdtsc() + timer::tsc_per_ms() / 2) {
                restart(k, sys::TASK_DESTROY);
                return Ok(());
            }
            k.destroy_task(t);
            Ok(())
        }
        Call::Machine { cap, op } => {
            let c = k.cap(cap)?;
            if c.obj != Obj::Machine {
                return Err(Error::WrongType);
            }
            if c.rights & rights::SHUTDOWN == 0 {
                return Err(Error::NoRights);
            }
            match op {
                MachineOp::Exit(code) => {
                    crate::arch::serial::kprintln!("[kernel] machine exit {}", code);
                    crate::arch::cpu::debug_exit(code);
                    Ok(())
                }
                MachineOp::Fastpath(on) => {
                    k.fastpath = on;
                    crate::klock::set_fast_shut(!on);
                    let n = crate::arch::cpu::counts_of(crate::arch::cpu::cpu_index()).1;
                    k.cur().frame().rdi = n;
                    Ok(())
                }
                MachineOp::MeasureCr3(n) => {
                    let own = k.cur_task().pml4;
                    let other = crate::arch::boot::boot_pml4_phys();
                    let t0 = crate::arch::timer::rdtsc();
                    for _ in 0..n {
                        cpu::load_cr3(other);
                        cpu::load_cr3(own);
                    }
                    let dt = crate::arch::timer::rdtsc() - t0;
                    k.cur().frame().rdi = dt;
                    Ok(())
                }
            }
        }
    }
}

/// `slot` (in range, checked by decode) must be empty in the caller's space.
fn free_slot(k: &mut Kernel, slot: u64) -> Result<(), Error> {
    match k.cur_task().cspace.get(slot) {
        Err(Error::InvalidCap) => Ok(()),
        Ok(_) => Err(Error::SlotInUse),
        Err(e) => Err(e),
    }
}

fn describe(c: &Cap<Obj>) -> (u64, u32) {
    match c.obj {
        Obj::Thread(r) => (cap::THREAD, r.id),
        Obj::Task(r) => (cap::TASK, r.id),
        Obj::Machine => (cap::MACHINE, 0),
        Obj::Irq(l) => (cap::IRQ, l as u32),
        Obj::IrqControl => (cap::IRQ_CONTROL, 0),
        Obj::PciDevice(id) => (cap::PCI_DEVICE, id as u32),
        Obj::Reply(r, _) => (cap::REPLY, r.id),
    }
}

/// Which object a capability names, the same number for every capability to it (and
/// a different one for an object that later takes its table entry): `gen << 32 |
/// type << 24 | id`. Lets a server check that a capability a client handed it names
/// the server it expects before it calls through it.
fn identity(c: &Cap<Obj>) -> u64 {
    let (ty, id) = describe(c);
    let gen = match c.obj {
        Obj::Thread(r) | Obj::Task(r) | Obj::Reply(r, _) => r.gen,
        _ => 0,
    };
    (gen as u64) << 32 | ty << 24 | (id as u64 & 0xff_ffff)
}

#[inline(never)]
fn debug_put(k: &mut Kernel, ptr: u64, len: usize, screen_only: bool) -> Result<(), Error> {
    let mut buf = [0u8; DEBUG_PUT_MAX as usize];
    let buf = &mut buf[..len];
    let pml4 = k.cur_task().pml4;
    task::copy_from_user(pml4, ptr, buf)?;
    if !screen_only {
        crate::arch::serial::Serial::write_bytes(buf);
    }
    crate::arch::screen::write(buf);
    Ok(())
}

/// Free task and thread slots.
fn free_slots(k: &Kernel) -> (usize, usize) {
    (k.tasks.iter().filter(|t| t.is_none()).count(), k.threads.iter().filter(|t| t.is_none()).count())
}

/// The calling task has a parent: the slots kept for parentless tasks (root) are not
/// its to take (`abi::tables`).
fn may_take_kept_slots(k: &mut Kernel) -> bool {
    let me = k.t(k.view.current).task;
    k.task(me).parent.is_none()
}

fn task_create(k: &mut Kernel, dst: Slot, quota: u64) -> Result<(), Error> {
    // Check the slot first so that a failure leaves nothing behind.
    free_slot(k, dst)?;
    if free_slots(k).0 <= abi::tables::ROOT_TASKS && !may_take_kept_slots(k) {
        return Err(Error::NoMemory);
    }
    let me = k.t(k.view.current).task;
    let id = k.create_task(quota, Some(me))?;
    let r = k.task_ref(id);
    k.cap_install(me, dst, Cap { obj: Obj::Task(r), rights: rights::CONTROL, badge: 0 }).expect("slot checked");
    Ok(())
}

fn thread_create(k: &mut Kernel, task_slot: Slot, dst: Slot, utcb: u64, prio: u8) -> Result<(), Error> {
    let target = k.task_cap(task_slot, rights::CONTROL)?;
    free_slot(k, dst)?;
    if prio > k.cur().prio {
        return Err(Error::InvalidArg);
    }
    if free_slots(k).1 <= abi::tables::ROOT_THREADS && !may_take_kept_slots(k) {
        return Err(Error::NoMemory);
    }
    let id = k.create_thread(target, utcb, prio, false)?;
    let r = k.thread_ref(id);
    let me = k.t(k.view.current).task;
    k.cap_install(me, dst, Cap { obj: Obj::Thread(r), rights: rights::SEND | rights::CONTROL, badge: 0 })
        .expect("slot checked");
    Ok(())
}

fn thread_control(k: &mut Kernel, slot: Slot, op: ThreadOp) -> Result<(), Error> {
    let (id, _) = k.thread_cap(slot, rights::CONTROL)?;
    match op {
        ThreadOp::Start { entry } => {
            if k.t(id).state != State::Stopped {
                return Err(Error::BadState);
            }
            let fr = k.t(id).frame();
            if let Some(e) = entry {
                fr.rip = e.rip;
                fr.rsp = e.rsp;
                fr.rdi = e.arg;
            }
            if fr.rip == 0 {
                return Err(Error::InvalidArg);
            }
            k.tm(id).fault = None;
            k.make_ready(id);
            Ok(())
        }
        ThreadOp::Stop => {
            let st = k.t(id).state;
            if st == State::Stopped {
                return Ok(());
            }
            let was_blocked =
                matches!(st, State::SendBlocked | State::RecvBlocked | State::ReplyBlocked | State::Sleeping);
            // Running on another CPU: that CPU leaves its user mode first (its registers
            // are in its frame then).
            k.stall_remote(id);
            k.unlink(id);
            k.tm(id).state = State::Stopped;
            if was_blocked {
                k.t(id).frame().rax = Error::BadState as u64;
            }
            if id == k.view.current {
                k.view.need_resched = true;
            }
            Ok(())
        }
        ThreadOp::SetPriority(p) => {
            if p > k.cur().prio {
                return Err(Error::InvalidArg);
            }
            let in_rq = k.rq_of(id).contains(id);
            k.rq_of(id).remove(id);
            k.tm(id).prio = p;
            if in_rq {
                k.rq_of(id).enqueue(id, p);
            }
            k.view.need_resched = true;
            Ok(())
        }
        ThreadOp::SetFaultHandler(h) => {
            let h = handler(k, h)?;
            k.tm(id).fault_handler = h;
            Ok(())
        }
        ThreadOp::SetPager(h) => {
            let h = handler(k, h)?;
            k.tm(id).pager = h;
            Ok(())
        }
        ThreadOp::Succeed(to) => {
            let (to, _) = k.thread_cap(to, rights::CONTROL)?;
            let payer = k.t(k.view.current).task;
            k.succeed(id, to, payer)?;
            crate::ipc::wake_receiver(k, to);
            Ok(())
        }
        ThreadOp::ReadState => {
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
            let cpu = k.thread_cpu[id as usize] as u64;
            let out = k.cur().frame();
            out.rdi = st;
            out.rsi = prio;
            out.rdx = cpu;
            Ok(())
        }
        ThreadOp::SetCpu(c) => k.set_cpu(id, c),
        ThreadOp::Destroy => {
            k.destroy_thread(id);
            Ok(())
        }
    }
}

/// A fault handler or pager: a thread capability with SEND, and the badge its
/// messages carry (`None` clears).
fn handler(k: &mut Kernel, h: Option<(Slot, u64)>) -> Result<Option<(task::ObjRef, u64)>, Error> {
    let Some((slot, badge)) = h else { return Ok(None) };
    let (h, _) = k.thread_cap(slot, rights::SEND)?;
    Ok(Some((k.thread_ref(h), badge)))
}

/// `UNMAP`: take the rights from everything derived from the caller's part of the
/// range; with `include_self` also from the caller's own mappings.
#[inline(never)]
fn unmap(k: &mut Kernel, what: UnmapRange, include_self: bool) -> Result<(), Error> {
    let me = k.t(k.view.current).task;
    match what {
        UnmapRange::Mem { lo, hi, rights } => {
            if include_self && k.task(me).has_utcb_in(lo, hi) {
                return Err(Error::InvalidArg);
            }
            // A cursor through the range (the tables change under it), so no list of
            // pages is ever allocated. After half a millisecond of work the call stops
            // and is issued again (its syscall instruction re-run, registers as they
            // were), going on where it stopped: interrupts are taken and higher
            // priorities run in between, so a large range holds the CPU for no longer.
            let cur = k.view.current as usize;
            let mut at = match k.unmap_resume[cur].take() {
                Some((r, s, next)) if r == what && s == include_self => next,
                _ => lo,
            };
            let budget_end = timer::rdtsc() + timer::tsc_per_ms() / 2;
            // Mappings visited since the clock was last read: one page's tree may be
            // thousands (`framedb::MAX_NODES`), most pages have one or two.
            let mut work = 0usize;
            while let Some((va, e)) = k.task(me).next_leaf_in(at, hi) {
                if e & pt::UTCB == 0 {
                    work += k.demap_mem(me, va, rights, include_self);
                }
                at = va + abi::layout::PAGE_SIZE;
                work += 1;
                if work >= 16 && at < hi && core::mem::take(&mut work) > 0 && timer::rdtsc() > budget_end {
                    k.unmap_resume[cur] = Some((what, include_self, at));
                    restart(k, sys::UNMAP);
                    return Ok(());
                }
            }
            Ok(())
        }
        UnmapRange::Io { lo, hi } => {
            for port in lo..hi {
                k.demap_port(me, port as u16, include_self);
            }
            Ok(())
        }
        UnmapRange::Caps { lo, hi, rights } => {
            for slot in lo..hi {
                k.cap_reduce(me, slot, rights, include_self);
            }
            Ok(())
        }
    }
}

/// Make the current thread issue call `nr` again on its return to user mode, with the
/// registers it passed (a long call's next slice; interrupts and other threads run in
/// between).
fn restart(k: &mut Kernel, nr: u64) {
    let fr = k.cur().frame();
    fr.rip -= 2; // `syscall` is two bytes
    fr.rax = nr;
}

fn irq_control(k: &mut Kernel, slot: Slot, op: IrqOp) -> Result<(), Error> {
    let c = k.cap(slot)?;
    let me = k.t(k.view.current).task;
    match (op, c.obj) {
        (IrqOp::Create { line, dst }, Obj::IrqControl) => {
            if line >= crate::arch::irqchip::lines() {
                return Err(Error::InvalidArg);
            }
            k.cap_install(me, dst, Cap { obj: Obj::Irq(line), rights: rights::CONTROL, badge: 0 })
        }
        (IrqOp::Create { .. }, _) => Err(Error::WrongType),
        (IrqOp::PciCreate { id, dst }, Obj::IrqControl) => {
            if !crate::arch::pci::Func(pcie::Bdf::from_id(id)).present() {
                return Err(Error::NotFound);
            }
            // Given to a driver: its DMA reaches only what that driver maps.
            crate::arch::iommu::confine(id)?;
            k.cap_install(me, dst, Cap { obj: Obj::PciDevice(id), rights: rights::CONTROL, badge: 0 })
        }
        (IrqOp::PciRead { off, id }, Obj::IrqControl) => {
            k.cur().frame().rdi = pcie::Config::read32(&crate::arch::pci::Func(pcie::Bdf::from_id(id)), off) as u64;
            Ok(())
        }
        (op, Obj::PciDevice(id)) => {
            if c.rights & rights::CONTROL == 0 {
                return Err(Error::NoRights);
            }
            pci_device(k, me, pcie::Bdf::from_id(id), op)
        }
        (op, Obj::Irq(line)) => {
            if c.rights & rights::CONTROL == 0 {
                return Err(Error::NoRights);
            }
            let l = line as usize;
            // One thread per line: another live thread's attachment is neither
            // replaced nor ended by this call (a dead thread's is free to take).
            let cur = k.view.current;
            let holder = k.irqs[l].map(|(r, _)| r).filter(|r| k.thread_alive(*r));
            let mine = holder.is_some_and(|r| r.id == cur);
            match op {
                IrqOp::Attach { badge } => {
                    if holder.is_some() && !mine {
                        return Err(Error::BadState);
                    }
                    k.irqs[l] = Some((k.thread_ref(cur), badge));
                    // To the CPU the driver runs on (`SET_CPU` moves it along).
                    crate::arch::irqchip::route(line, crate::arch::smp::apic_id(k.thread_cpu[cur as usize] as usize));
                    let a = k.irq_lines[l].attach();
                    crate::arch::irqchip::set_masked(line, a.mask);
                    Ok(())
                }
                IrqOp::Ack => {
                    if !mine {
                        return Err(Error::BadState);
                    }
                    // An edge line that fired while its driver was at work is
                    // delivered once more: the driver looks at the device again.
                    let a = k.irq_lines[l].ack();
                    crate::arch::irqchip::set_masked(line, a.mask);
                    if a.deliver {
                        ipc::irq_fired(k, line);
                    }
                    Ok(())
                }
                IrqOp::Detach => {
                    if holder.is_some() && !mine {
                        return Err(Error::BadState);
                    }
                    k.irq_detach(line);
                    Ok(())
                }
                IrqOp::Count => {
                    k.cur().frame().rdi = k.irq_counts[l];
                    Ok(())
                }
                _ => Err(Error::WrongType),
            }
        }
        _ => Err(Error::WrongType),
    }
}

/// The operations on one PCI function: its configuration space as `pcie::may_write`
/// allows, its BARs, and MSI-X entries bound to message-signalled interrupts.
fn pci_device(k: &mut Kernel, me: u32, bdf: pcie::Bdf, op: IrqOp) -> Result<(), Error> {
    use crate::arch::pci::{Func, Message};
    use pcie::Config;
    let mut f = Func(bdf);
    match op {
        IrqOp::PciRead { off, .. } => {
            k.cur().frame().rdi = f.read32(off) as u64;
            Ok(())
        }
        IrqOp::PciWrite { off, value } => {
            // The capabilities the kernel programs are not the driver's to write.
            let msix = pcie::Msix::of(&f).ok().flatten().map(|x| (x.at, 12));
            let msi = pcie::Msi::of(&f).ok().flatten().map(|m| (m.at, m.bytes()));
            let protected: [(u16, u16); 2] = [msix.unwrap_or((0, 0)), msi.unwrap_or((0, 0))];
            let v = pcie::may_write(off, value, f.read32(off), &protected).ok_or(Error::NoRights)?;
            f.write32(off, v);
            Ok(())
        }
        IrqOp::PciDma { map: true, addr, pages } => {
            // The caller's own pages (never its UTCB, the kernel's), each at its
            // physical address; the device may write only where the caller may.
            let pml4 = k.task(me).pml4;
            let mut confined = false;
            for i in 0..pages {
                let e = task::lookup(pml4, addr + i * abi::layout::PAGE_SIZE).ok_or(Error::NotMapped)?;
                if e & pt::UTCB != 0 || e & pt::U == 0 {
                    return Err(Error::InvalidArg);
                }
                confined = crate::arch::iommu::map(bdf.id(), me, e & pt::ADDR, e & pt::W != 0)?;
            }
            if confined {
                k.task(me).dma = Some(me);
            }
            k.cur().frame().rdi = crate::arch::iommu::confines(bdf.id()) as u64;
            Ok(())
        }
        IrqOp::PciDma { map: false, addr, pages } => {
            // By physical address: the page may be gone from the caller already.
            for i in 0..pages {
                crate::arch::iommu::unmap(bdf.id(), (addr & !0xfff) + i * abi::layout::PAGE_SIZE)?;
            }
            Ok(())
        }
        IrqOp::PciMsi { dst } => {
            if !crate::arch::irqchip::msi_available() {
                return Err(Error::Unsupported);
            }
            let Ok(Some(m)) = pcie::Msi::of(&f) else { return Err(Error::Unsupported) };
            // Not both at once: a function with MSI-X on keeps it.
            if pcie::Msix::of(&f).ok().flatten().is_some_and(|x| x.enabled(&f)) {
                return Err(Error::BadState);
            }
            free_slot(k, dst)?;
            // MSI's one message is "entry" 0xffff of the function.
            let n = k.msi_vectors.get(bdf.id(), 0xffff).ok_or(Error::NoMemory)?;
            let line = (abi::irq::MSI_FIRST as usize + n) as u8;
            crate::arch::irqchip::msi_bind(line, Message::Msi(bdf, m));
            if let Some((t, _)) = k.irqs[line as usize].filter(|(t, _)| k.thread_alive(*t)) {
                let cpu = k.thread_cpu[t.id as usize] as usize;
                crate::arch::irqchip::route(line, crate::arch::smp::apic_id(cpu));
                crate::arch::irqchip::unmask(line);
            }
            k.cap_install(me, dst, Cap { obj: Obj::Irq(line), rights: rights::CONTROL, badge: 0 })?;
            k.cur().frame().rdi = line as u64;
            Ok(())
        }
        IrqOp::PciBar(i) => {
            let (base, size, io) = match pcie::bar(&mut f, i) {
                pcie::Bar::Mem { base, size, .. } => (base, size, 0),
                pcie::Bar::Io { base, size } => (base as u64, size as u64, 1),
                pcie::Bar::None => (0, 0, 0),
            };
            let out = k.cur().frame();
            out.rdi = base;
            out.rsi = size;
            out.rdx = io;
            Ok(())
        }
        IrqOp::PciMsix { entry, dst } => {
            if !crate::arch::irqchip::msi_available() {
                return Err(Error::Unsupported);
            }
            let say = |why: &str| {
                crate::arch::serial::kprintln!(
                    "[pci] {:02x}:{:02x}.{}: no MSI-X for its driver: {}",
                    bdf.bus,
                    bdf.dev,
                    bdf.func,
                    why
                )
            };
            let x = match pcie::Msix::of(&f) {
                Ok(Some(x)) => x,
                Ok(None) => return Err(Error::Unsupported),
                Err(_) => {
                    say("its capability list is broken");
                    return Err(Error::Unsupported);
                }
            };
            let off = x.entry_offset(entry).map_err(|_| Error::InvalidArg)?;
            let mut bars = [pcie::Bar::None; 6];
            for (i, b) in bars.iter_mut().enumerate() {
                *b = pcie::bar(&mut f, i as u8);
            }
            if let Err(e) = x.check(&bars) {
                say(match e {
                    pcie::Error::MsixTableOutsideBar => "its MSI-X table does not fit in its BAR",
                    _ => "its MSI-X table is not in a memory BAR",
                });
                return Err(Error::Unsupported);
            }
            let pcie::Bar::Mem { base, .. } = bars[x.table_bar as usize] else { return Err(Error::Unsupported) };
            let pa = base + off;
            if !Message::reachable(pa) {
                say("its MSI-X table lies outside the direct map");
                return Err(Error::Unsupported);
            }
            free_slot(k, dst)?;
            let n = k.msi_vectors.get(bdf.id(), entry).ok_or(Error::NoMemory)?;
            let line = (abi::irq::MSI_FIRST as usize + n) as u8;
            // A line a dead driver left attached is free again (`irq_fired` detaches it
            // too); a live one keeps it, and the new capability names the same line.
            crate::arch::irqchip::msi_bind(line, Message::Msix(bdf, pa));
            if let Some((t, _)) = k.irqs[line as usize].filter(|(t, _)| k.thread_alive(*t)) {
                let cpu = k.thread_cpu[t.id as usize] as usize;
                crate::arch::irqchip::route(line, crate::arch::smp::apic_id(cpu));
                crate::arch::irqchip::unmask(line);
            }
            x.enable(&mut f);
            k.cap_install(me, dst, Cap { obj: Obj::Irq(line), rights: rights::CONTROL, badge: 0 })?;
            k.cur().frame().rdi = line as u64;
            Ok(())
        }
        _ => Err(Error::WrongType),
    }
}
