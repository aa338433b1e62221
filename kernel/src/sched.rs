//! The scheduler: ready queues and waits (make ready, block, sleep, wake, time out),
//! the timer tick, which CPU a thread runs on, the switch between threads (with the
//! x87 registers and I/O permissions), and each CPU's idle loop.

use crate::arch::cpu::{self, MAX_CPUS};
use crate::arch::fpu;
use crate::kernel::{enter, Kernel, State, KSTACK_PAGES, NO_CPU, NO_THREAD};
use crate::mem;
use abi::{ipc, sched as s, Error};
use core::sync::atomic::{AtomicU64, Ordering};

pub fn ticks_for_us(us: u64) -> u64 {
    us.div_ceil(s::TICK_US).max(1)
}

impl Kernel {
    // ---------------------------------------------------------------- scheduling

    pub fn make_ready(&mut self, id: u32) {
        let t = self.tm(id);
        t.state = State::Ready;
        let p = t.prio;
        self.rq_of(id).enqueue(id, p);
        let c = self.thread_cpu[id as usize] as usize % MAX_CPUS;
        if c == self.view_cpu {
            if p > self.t(self.view.current).prio || self.view.current == self.view.idle {
                self.view.need_resched = true;
            }
        } else {
            // Another CPU's thread: that CPU reschedules when it takes the interrupt.
            let v = self.parked[c];
            if p > self.t(v.current).prio || v.current == v.idle {
                self.parked[c].need_resched = true;
                crate::klock::wake_cpu(c);
            }
        }
    }

    /// End a wait: cancel the timeout, set the system call's result, make it ready.
    pub fn wake(&mut self, id: u32, result: u64) {
        self.timers.remove(id);
        let t = self.tm(id);
        t.frame().rax = result;
        t.partner = None;
        t.recv_from = None;
        self.make_ready(id);
    }

    /// Block `id` in `state` with a timeout in microseconds (`ipc::INFINITE` = none).
    pub fn block(&mut self, id: u32, state: State, timeout_us: u32) {
        self.rq_of(id).remove(id);
        self.tm(id).state = state;
        if timeout_us != ipc::INFINITE {
            let at = self.ticks + ticks_for_us(timeout_us as u64);
            self.timers.insert(id, at);
        }
        if id == self.view.current {
            self.view.need_resched = true;
        }
    }

    pub fn sleep(&mut self, id: u32, us: u64) {
        self.rq_of(id).remove(id);
        self.tm(id).state = State::Sleeping;
        let at = self.ticks.saturating_add(ticks_for_us(us));
        self.timers.insert(id, at);
        self.view.need_resched = true;
    }

    /// Take a thread out of whatever it waits in, without waking it.
    pub fn unlink(&mut self, id: u32) {
        self.timers.remove(id);
        self.rq_of(id).remove(id);
        let t = self.t(id);
        if t.state == State::SendBlocked {
            if let Some(p) = t.partner {
                if self.thread_alive(p) {
                    let mut q = self.t(p.id).sendq;
                    self.sendq.remove(&mut q, id);
                    self.tm(p.id).sendq = q;
                }
            }
        }
        let t = self.tm(id);
        t.partner = None;
        t.recv_from = None;
    }

    pub fn timeout(&mut self, id: u32) {
        match self.t(id).state {
            State::Sleeping => self.wake(id, 0),
            State::SendBlocked | State::RecvBlocked | State::ReplyBlocked => {
                self.unlink(id);
                self.wake(id, Error::Timeout as u64);
            }
            _ => {}
        }
    }

    /// A timer interrupt: the clock moves to the TSC's time (at least one tick), so
    /// ticks missed while interrupts were off are not lost, only late.
    pub fn tick(&mut self) {
        let passed = if self.view_cpu == 0 {
            // The boot CPU keeps the clock and the timeouts.
            let now = crate::arch::timer::elapsed_ms().max(self.ticks + 1);
            let passed = now - self.ticks;
            self.ticks = now;
            while let Some(id) = self.timers.pop_expired(self.ticks) {
                self.timeout(id);
            }
            passed
        } else {
            AP_TICKS.fetch_add(1, Ordering::Relaxed);
            1
        };
        let cur = self.view.current;
        if cur != self.view.idle {
            let t = self.tm(cur);
            t.slice = t.slice.saturating_sub(passed);
            if t.slice == 0 {
                t.slice = s::SLICE_TICKS;
                self.view.rotate = true;
                self.view.need_resched = true;
            }
        }
    }

    // ------------------------------------------------ CPUs: placement, stalls, reaping

    /// The CPU (other than this one) that runs thread `id` now, if any.
    fn running_elsewhere(&self, id: u32) -> Option<usize> {
        (0..crate::arch::smp::cpus()).find(|&c| c != self.view_cpu && self.parked[c].current == id)
    }

    /// If thread `id` runs on another CPU, make that CPU enter the kernel (its user
    /// registers saved in the frame, its CR3 on the kernel's own page tables) and wait
    /// until it has; it then waits for the lock and switches away once the thread is
    /// no longer running. Returns that CPU.
    pub fn stall_remote(&mut self, id: u32) -> Option<usize> {
        let r = self.running_elsewhere(id)?;
        crate::klock::stall(r);
        let v = &mut self.parked[r];
        v.loaded_pml4 = crate::arch::boot::boot_pml4_phys();
        v.need_resched = true;
        Some(r)
    }

    /// Save the registers of this CPU's x87 owner into its save area and make the next
    /// use trap: the state leaves this CPU.
    fn fpu_save_own(&mut self) {
        let o = self.view.fpu_owner;
        if !self.view.fpu_ts_clear {
            fpu::clear_ts();
        }
        let t = self.tm(o);
        fpu::save(t.fpu_area());
        t.fpu_used = true;
        fpu::set_ts();
        self.view.fpu_ts_clear = false;
        self.view.fpu_owner = NO_THREAD;
    }

    /// `THREAD_CONTROL SET_CPU`: run thread `id` on CPU `c` from its next switch on. Its
    /// x87 state, if the registers of some CPU hold it, is saved first (by that CPU).
    pub fn set_cpu(&mut self, id: u32, c: u64) -> Result<(), Error> {
        if c >= crate::arch::smp::cpus() as u64 || self.t(id).kernel_thread {
            return Err(Error::InvalidArg);
        }
        let (c, old) = (c as usize, self.thread_cpu[id as usize] as usize);
        if c == old {
            return Ok(());
        }
        let remote = self.running_elsewhere(id);
        if id != self.view.current && remote.is_none() {
            // Not running anywhere: its registers may still sit in a CPU's x87 unit.
            if self.view.fpu_owner == id {
                self.fpu_save_own();
            }
            if let Some(r) = (0..MAX_CPUS).find(|&r| r != self.view_cpu && self.parked[r].fpu_owner == id) {
                let area = self.tm(id).fpu_area() as *mut fpu::FxArea as u64;
                crate::klock::save_fpu(r, area);
                self.tm(id).fpu_used = true;
                self.parked[r].fpu_owner = NO_THREAD;
                self.parked[r].fpu_ts_clear = false;
            }
        }
        let queued = self.t(id).state == State::Ready && self.rqs[old].contains(id);
        if queued {
            self.rqs[old].remove(id);
        }
        self.thread_cpu[id as usize] = c as u8;
        // Its interrupt lines now arrive at its new CPU.
        let me = self.thread_ref(id);
        for line in 0..self.irqs.len() {
            if self.irqs[line].is_some_and(|(t, _)| t == me) {
                crate::arch::irqchip::route(line as u8, crate::arch::smp::apic_id(c));
            }
        }
        if queued {
            self.make_ready(id);
        }
        if id == self.view.current {
            self.view.need_resched = true; // `schedule` moves it
        } else if let Some(r) = remote {
            self.parked[r].need_resched = true;
            crate::klock::wake_cpu(r);
        }
        Ok(())
    }

    /// Free a dead thread's slot and kernel stack (once no CPU runs on that stack).
    pub(crate) fn free_thread(&mut self, id: u32) {
        if let Some(t) = self.threads[id as usize].take() {
            mem::free_contiguous(t.kstack, KSTACK_PAGES);
        }
        self.thread_cpu[id as usize] = NO_CPU;
    }

    /// After a switch: free the thread that died running here, now that this CPU has
    /// left its kernel stack.
    pub fn reap(&mut self) {
        if let Some(z) = self.view.zombie {
            if z != self.view.current {
                self.view.zombie = None;
                self.free_thread(z);
            }
        }
    }
}

// -------------------------------------------------------------------- switching

impl Kernel {
    /// The current thread used x87/SSE while the registers held another thread's state
    /// (#NM under CR0.TS): save the owner's, load the current thread's (clean on its
    /// first use), and let it run on.
    pub fn fpu_trap(&mut self) {
        let cur = self.view.current;
        fpu::clear_ts();
        self.view.fpu_ts_clear = true;
        if self.view.fpu_owner == cur {
            return;
        }
        if self.view.fpu_owner != NO_THREAD {
            // A dead owner clears `fpu_owner`, so this is a live thread.
            let o = self.tm(self.view.fpu_owner);
            fpu::save(o.fpu_area());
            o.fpu_used = true;
        }
        let c = self.t(cur);
        if c.fpu_used {
            fpu::restore(c.fpu_area());
        } else {
            fpu::load_clean();
        }
        self.view.fpu_owner = cur;
    }
}

/// Set CR0.TS for `next` unless it owns the x87/SSE registers (then clear it). Called
/// by `switch_to` only when the registers' owner or TS's state may have to change.
#[cold]
pub(crate) fn fpu_switch(k: &mut Kernel, next: u32) {
    let mine = k.view.fpu_owner == next && k.t(next).is_user();
    if mine && !k.view.fpu_ts_clear {
        fpu::clear_ts();
        k.view.fpu_ts_clear = true;
    } else if !mine && k.view.fpu_ts_clear {
        fpu::set_ts();
        k.view.fpu_ts_clear = false;
    }
}

/// Pick the next thread and switch to it if it is not the current one. Called at the
/// end of every kernel entry, after all references into kernel state are dropped.
/// When it returns, the thread that called it has been resumed.
pub fn schedule(k: &'static mut Kernel) {
    crate::klock::settle();
    if !k.view.need_resched {
        return;
    }
    k.view.need_resched = false;
    let rotate = core::mem::take(&mut k.view.rotate);
    let cur = k.view.current;
    let mut cur_state = k.t(cur).state;
    let cur_prio = k.t(cur).prio;
    if cur_state == State::Running && cur != k.view.idle && k.thread_cpu[cur as usize] as usize != k.view_cpu {
        // Moved to another CPU (`set_cpu`): its x87 state leaves these registers, and it
        // is queued there.
        if k.view.fpu_owner == cur {
            k.fpu_save_own();
        }
        k.make_ready(cur);
        cur_state = State::Ready;
    }
    if cur_state == State::Running && cur != k.view.idle {
        match k.rq().highest() {
            Some(best) if best > cur_prio || (best == cur_prio && rotate) => {
                k.tm(cur).state = State::Ready;
                k.rq().enqueue(cur, cur_prio);
            }
            _ => {
                k.view.hint = None;
                return;
            }
        }
    }
    let next = match k.view.hint.take() {
        Some(h) if k.rq().contains(h) && Some(k.t(h).prio) >= k.rq().highest() => {
            k.rq().remove(h);
            h
        }
        _ => k.rq().pop_highest().unwrap_or(k.view.idle),
    };
    if next == cur {
        k.tm(cur).state = State::Running;
        // Stopped from another CPU (which took this one off its page tables) and started
        // again before this CPU got to switch away: back onto them.
        let (user, pml4) = (k.t(cur).is_user(), k.t(cur).pml4);
        if user {
            k.view.load_space(pml4);
        }
        return;
    }
    switch_to(k, next);
}

/// Switch to `next`; the current thread's state must already say why it stops
/// (or it must be queued as ready). Takes the entry's reference to kernel state: the
/// caller has nothing left to do with it.
pub fn switch_to(k: &'static mut Kernel, next: u32) {
    let prev = k.view.current;
    k.view.current = next;
    if prev != k.view.idle {
        // By cause (the Cue paper's Tables 1–5 count both): preempted threads were put
        // back as ready; every other state means the thread blocked.
        let p = k.t(prev);
        let (task, preempted) = (p.task, p.state == State::Ready);
        // (A thread destroyed from another CPU may have taken its task with it.)
        if let Some(t) = k.tasks[task as usize].as_mut() {
            t.switches[preempted as usize] += 1;
        }
    }
    if k.view.fpu_owner == next || k.view.fpu_ts_clear {
        fpu_switch(k, next);
    }
    let n = k.tm(next);
    n.state = State::Running;
    if n.slice == 0 {
        n.slice = s::SLICE_TICKS;
    }
    cpu::set_kernel_stack(n.kstack_top());
    let load = n.resume_sp();
    if n.is_user() {
        let (utcb, pml4, task, io) = (n.utcb_va, n.pml4, n.task, n.task_io);
        k.view.load_space(pml4);
        k.view.load_fs(utcb);
        if io || k.view.io_owner.is_some() {
            switch_iomap(k, task);
        }
    }
    let p = k.tm(prev);
    p.deep_at = p.fast_blocks;
    let save = &mut p.saved_rsp as *mut u64;
    // SAFETY: `load` was saved by switch_context or prepared by prepare_stack on the
    // next thread's live kernel stack; `save` points into the previous thread's TCB,
    // which stays allocated until reaped after this switch. `k` was moved into this
    // function and is not used after the call returns.
    unsafe { cpu::switch(save, load) };
    // SAFETY: a switch has just returned to this thread; the reference it was given died
    // with it.
    unsafe { enter() }.reap();
}

/// Put `task`'s I/O permissions into the TSS if another task's are there (most tasks
/// have none, and then nothing is copied).
pub(crate) fn switch_iomap(k: &mut Kernel, task: u32) {
    if k.view.io_owner == Some(task) {
        return;
    }
    if let Some(prev) = k.view.io_owner.take() {
        let max = k.tasks[prev as usize].as_ref().map_or(u16::MAX, |t| t.io_max);
        cpu::clear_iomap(max);
    }
    let t = k.task(task);
    if let Some(map) = t.io.as_ref() {
        cpu::load_iomap(&map[..], t.io_max);
        k.view.io_owner = Some(task);
    }
}

/// Enter the first thread from the boot stack (which is abandoned).
pub fn start_scheduling(k: &'static mut Kernel) -> ! {
    let next = k.rq().pop_highest().unwrap_or(k.view.idle);
    let mut dummy = 0u64;
    k.view.current = next;
    let n = k.tm(next);
    n.state = State::Running;
    cpu::set_kernel_stack(n.kstack_top());
    let load = n.resume_sp();
    if n.is_user() {
        let (pml4, utcb) = (n.pml4, n.utcb_va);
        cpu::load_cr3(pml4);
        cpu::set_fs_base(utcb);
        k.view.loaded_pml4 = pml4;
        k.view.loaded_fs = utcb;
    }
    // SAFETY: `load` is a prepared stack of a live thread; the boot context saved into
    // `dummy` is never resumed.
    unsafe { cpu::switch(&mut dummy, load) };
    unreachable!("boot context resumed");
}

/// Called by `thread_trampoline` on a new thread's first run.
#[no_mangle]
extern "C" fn thread_first_run() {
    // SAFETY: a new thread's first run is a kernel entry (from `switch`).
    unsafe { enter() }.reap();
}

/// TSC ticks each CPU spent halted in its idle thread (`KERNEL_INFO(1)` reports the
/// boot CPU's): a halt ends when an interrupt arrives (`idle_end`, first thing in the
/// trap path), so the work the interrupt wakes is not counted as idle.
pub static IDLE_TSC: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
/// Timer ticks taken by the CPUs other than the boot CPU (`KERNEL_INFO_SMP`).
pub static AP_TICKS: AtomicU64 = AtomicU64::new(0);
/// When each CPU's current halt began (0: not halted).
static IDLE_SINCE: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];

fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no side effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// End the idle period, if one is under way.
pub fn idle_end() {
    let me = cpu::cpu_index();
    let since = IDLE_SINCE[me].swap(0, Ordering::Relaxed);
    if since != 0 {
        IDLE_TSC[me].fetch_add(rdtsc().wrapping_sub(since), Ordering::Relaxed);
    }
}

/// A CPU's idle thread: halts with interrupts on (and without the kernel lock) until
/// something is ready. It runs holding the lock, as every thread in the kernel does.
pub(crate) extern "C" fn idle_loop() -> ! {
    loop {
        // SAFETY: each turn of the idle loop is entered from a switch (or the last turn's
        // `schedule`, which consumed its reference), holding the lock.
        unsafe { enter() }.reap();
        if crate::arch::smp::cpus() > 1 {
            // Off the last thread's page tables: a CPU that idles is sent no shootdown
            // for them (and a thread that comes next loads its own anyway).
            // SAFETY: the lock is held; nothing else refers to kernel state here.
            let k = unsafe { enter() };
            k.view.load_space(crate::arch::boot::boot_pml4_phys());
        }
        IDLE_SINCE[cpu::cpu_index()].store(rdtsc(), Ordering::Relaxed);
        crate::klock::unlock();
        // With other CPUs, poll a while for a thread they make ready here; then halt.
        // (An interrupt's entry takes the lock, and gives it back on its way out.)
        if crate::arch::smp::cpus() == 1 || !crate::klock::poll_wake() {
            x86_64::instructions::interrupts::enable_and_hlt();
            x86_64::instructions::interrupts::disable();
        }
        crate::kernel::lock();
        idle_end();
        // SAFETY: the lock is held again; `k` was not used while it was not.
        schedule(unsafe { enter() });
    }
}

/// The request IPI's entry (`trap_common`, without the lock: its sender holds it and
/// waits). It answers the request (`klock::answer`); asked to enter the kernel, it
/// takes the lock (once the sender lets it go) and schedules, and returns 1: the stub
/// then leaves through `trap_return`, which gives the lock back.
#[no_mangle]
extern "C" fn shootdown_ipi() -> u64 {
    let asked = crate::klock::answer();
    crate::arch::lapic::eoi();
    if !asked {
        return 0;
    }
    crate::kernel::lock();
    // SAFETY: a kernel entry holding the lock, with no reference into kernel state.
    schedule(unsafe { enter() });
    1
}

/// An application processor's side of the kernel (`arch::smp::start_aps` runs it once
/// the CPU's tables are loaded): holding the kernel lock, its timer, then its scheduler
/// (the boot CPU made its idle thread).
pub fn ap_start(_index: usize) -> ! {
    // The boot CPU gives the lock up when it enters the first thread.
    crate::kernel::lock();
    crate::arch::timer::init_ap();
    // SAFETY: this CPU holds the lock; nothing else refers to kernel state here.
    let k = unsafe { enter() };
    start_scheduling(k)
}
