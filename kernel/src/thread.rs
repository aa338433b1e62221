//! The life cycle of threads and tasks: creation (charged to the task's kernel-memory
//! quota), destruction (with everything that waited on them), and teardown of a task
//! tree in slices.

use crate::arch::cpu;
use crate::kernel::{
    KeptCap, Kernel, State, Tcb, KSTACK_PAGES, KSTACK_SIZE, MAX_TASKS, MAX_THREADS, NO_THREAD, THREAD_PAGES,
};
use crate::mem::{self, phys_to_virt};
use crate::task::{self, Obj, ObjRef, Task};
use abi::{ipc, sched as s, Error};
use alloc::vec::Vec;
use kcore::idlist::List;

impl Kernel {
    /// Move thread `from`'s endpoint to thread `to` (`SUCCEED`), charged to `payer`.
    pub fn succeed(&mut self, from: u32, to: u32, payer: u32) -> Result<(), Error> {
        if from == to || self.t(to).kernel_thread || self.t(from).kernel_thread {
            return Err(Error::InvalidArg);
        }
        let (fr, tr, pr) = (self.thread_ref(from), self.thread_ref(to), self.task_ref(payer));
        if !self.task(payer).quota.charge(1) {
            return Err(Error::NoMemory);
        }
        // A move of `from` made before is replaced (and its page given back).
        if let Some((_, old_payer)) = self.successors.remove(&fr) {
            self.uncharge_successor(old_payer);
        }
        // Earlier moves to `from` now lead to `to`: one hop at most.
        for v in self.successors.values_mut() {
            if v.0 == fr {
                v.0 = tr;
            }
        }
        self.successors.insert(fr, (tr, pr));
        self.moved[from as usize] = true;
        // Its queued senders wait for `to` now, in their order — but `to` itself, had it
        // been sending to `from`, would now wait for itself: its send fails instead.
        let mut q = self.t(from).sendq;
        let mut dq = self.t(to).sendq;
        let mut itself = false;
        while let Some(s) = self.sendq.pop_front(&mut q) {
            if s == to {
                itself = true;
                continue;
            }
            self.tm(s).partner = Some(tr);
            self.sendq.push_back(&mut dq, s);
        }
        self.tm(from).sendq = q;
        self.tm(to).sendq = dq;
        if itself {
            self.unlink(to);
            self.wake(to, Error::Deadlock as u64);
        }
        Ok(())
    }

    pub fn create_thread(&mut self, task_id: u32, utcb_va: u64, prio: u8, kernel_thread: bool) -> Result<u32, Error> {
        let id = self.threads.iter().position(|t| t.is_none()).ok_or(Error::NoMemory)? as u32;
        let mut utcb_frame = 0;
        if !kernel_thread {
            let task = self.task(task_id);
            if !task.quota.charge(THREAD_PAGES) {
                return Err(Error::NoMemory);
            }
            let Some(f) = mem::alloc_frame() else {
                task.quota.uncharge(THREAD_PAGES);
                return Err(Error::NoMemory);
            };
            if let Err(e) =
                task.map_frame(utcb_va, f, task::pte_flags(abi::mem::READ | abi::mem::WRITE) | kcore::pagetable::UTCB)
            {
                mem::free_frame(f);
                task.quota.uncharge(THREAD_PAGES);
                return Err(e);
            }
            utcb_frame = f;
        }
        let Some(kstack) = mem::alloc_contiguous(KSTACK_PAGES) else {
            if !kernel_thread {
                let task = self.task(task_id);
                let _ = task.unmap_page(utcb_va, true);
                mem::free_frame(utcb_frame);
                task.quota.uncharge(THREAD_PAGES);
            }
            return Err(Error::NoMemory);
        };
        // Threads of a task share its memory manager: a new thread starts with the pager
        // of the task's oldest thread (the first thread's is set by whoever made the task).
        let pager = if kernel_thread {
            None
        } else {
            self.threads
                .iter()
                .flatten()
                .find(|x| x.task == task_id && !x.kernel_thread && x.state != State::Dead)
                .and_then(|x| x.pager)
        };
        let (pml4, task_io) = if kernel_thread {
            (0, false)
        } else {
            let t = self.task(task_id);
            (t.pml4, t.io.is_some())
        };
        self.unmap_resume[id as usize] = None;
        // New threads run on the boot CPU (an idle thread is moved to its own).
        self.thread_cpu[id as usize] = 0;
        let mut t = Tcb {
            pml4,
            task_io,
            task: task_id,
            state: State::Stopped,
            prio,
            slice: s::SLICE_TICKS,
            kstack,
            top: phys_to_virt(kstack) as u64 + KSTACK_SIZE,
            utcb_kva: phys_to_virt(utcb_frame) as u64,
            saved_rsp: 0,
            deep_at: 0,
            utcb_va,
            utcb_frame,
            sendq: List::new(),
            partner: None,
            recv_from: None,
            send_badge: 0,
            call: false,
            call_timeout: ipc::INFINITE,
            reply_to: None,
            saved_calls: 0,
            fault_handler: None,
            pager,
            fault: None,
            fault_to_pager: false,
            irq_pending: 0,
            kernel_thread,
            fpu_used: false,
            fast_blocks: 0,
            send_range: task::CachedRange::EMPTY,
            call_cap: KeptCap::EMPTY,
            recv_range: task::CachedRange::EMPTY,
        };
        if !kernel_thread {
            // SAFETY: the stack was just allocated for this thread and is KSTACK_SIZE long.
            t.saved_rsp = unsafe { cpu::prepare_stack(t.kstack_top(), cpu::new_user_frame(0, 0, 0)) };
            t.utcb().user[0] = utcb_va;
            self.task(task_id).nthreads += 1;
        }
        self.threads[id as usize] = Some(t);
        // (`tcb_in`'s layout: the thread lies at the start of its slot.)
        assert!(core::ptr::eq(
            self.threads[id as usize].as_ref().map_or(core::ptr::null(), |t| t as *const Tcb),
            &raw const self.threads[id as usize] as *const Tcb
        ));
        Ok(id)
    }

    /// Destroy a thread: wake everybody waiting on it with `NoPartner`, release its
    /// memory. The current thread becomes a zombie whose stack goes after the switch.
    pub fn destroy_thread(&mut self, id: u32) {
        if self.threads[id as usize].as_ref().is_none_or(|t| t.state == State::Dead) {
            return;
        }
        self.unlink(id);
        let me = self.thread_ref(id);
        // Senders queued on it.
        let mut q = self.t(id).sendq;
        while let Some(s) = self.sendq.pop_front(&mut q) {
            self.tm(s).partner = None;
            self.wake(s, Error::NoPartner as u64);
        }
        self.tm(id).sendq = q;
        // Callers waiting for its reply, receivers waiting only for it.
        for other in 0..MAX_THREADS as u32 {
            if other == id {
                continue;
            }
            let Some(t) = self.threads[other as usize].as_ref() else { continue };
            let waits = (t.state == State::ReplyBlocked && t.partner == Some(me))
                || (t.state == State::RecvBlocked && t.recv_from == Some(me));
            if waits {
                self.unlink(other);
                self.wake(other, Error::NoPartner as u64);
            }
        }
        for line in 0..self.irqs.len() {
            if self.irqs[line].is_some_and(|(t, _)| t == me) {
                self.irq_detach(line as u8);
            }
        }
        // Endpoints moved to it lead nowhere now.
        if !self.successors.is_empty() {
            let dead: Vec<ObjRef> = self.successors.iter().filter(|(_, v)| v.0 == me).map(|(k, _)| *k).collect();
            for key in dead {
                if let Some((_, payer)) = self.successors.remove(&key) {
                    self.uncharge_successor(payer);
                }
            }
        }
        self.thread_gen[id as usize] = self.thread_gen[id as usize].wrapping_add(1);
        // Running on another CPU: that CPU leaves it (and its address space) first and
        // frees it after its next switch.
        let remote = self.stall_remote(id);
        if self.view.fpu_owner == id {
            // Its registers die with it: the next user must not find them.
            self.view.fpu_owner = NO_THREAD;
        }
        for v in self.parked.iter_mut().filter(|v| v.fpu_owner == id) {
            v.fpu_owner = NO_THREAD;
        }
        let t = self.tm(id);
        t.state = State::Dead;
        let (task_id, utcb_va, utcb_frame, kernel_thread, fast_blocks) =
            (t.task, t.utcb_va, t.utcb_frame, t.kernel_thread, t.fast_blocks);
        if !kernel_thread {
            let task = self.task(task_id);
            task.switches[0] += fast_blocks;
            let _ = task.unmap_page(utcb_va, true);
            mem::free_frame(utcb_frame);
            task.quota.uncharge(THREAD_PAGES);
            task.nthreads -= 1;
        }
        if id == self.view.current {
            self.view.zombie = Some(id);
            self.view.need_resched = true;
        } else if let Some(r) = remote {
            // Its CPU is on its kernel stack (waiting for the lock): freed there, after
            // the switch away from it.
            if let Some(z) = self.parked[r].zombie.replace(id) {
                self.free_thread(z);
            }
        } else {
            self.free_thread(id);
        }
    }

    pub fn create_task(&mut self, quota: u64, parent: Option<u32>) -> Result<u32, Error> {
        let id = self.tasks.iter().position(|t| t.is_none()).ok_or(Error::NoMemory)? as u32;
        let parent_ref = parent.map(|p| self.task_ref(p));
        if let Some(p) = parent {
            if !self.task(p).quota.charge(quota) {
                return Err(Error::NoMemory);
            }
        }
        match Task::new(quota, parent_ref) {
            Ok(t) => {
                self.tasks[id as usize] = Some(t);
                Ok(id)
            }
            Err(e) => {
                if let Some(p) = parent {
                    self.task(p).quota.uncharge(quota);
                }
                Err(e)
            }
        }
    }

    /// Destroy a task, the tasks it created (transitively), and all their threads.
    /// Iterative: a hostile chain of nested tasks cannot deepen the kernel stack.
    /// A task and the tasks it created, breadth-first (parents before children).
    fn subtree(&self, id: u32) -> ([ObjRef; MAX_TASKS], usize) {
        let mut order = [ObjRef { id: 0, gen: 0 }; MAX_TASKS];
        order[0] = self.task_ref(id);
        let (mut len, mut i) = (1, 0);
        while i < len {
            let parent = order[i];
            for child in 0..MAX_TASKS as u32 {
                if len < MAX_TASKS && self.tasks[child as usize].as_ref().is_some_and(|t| t.parent == Some(parent)) {
                    order[len] = self.task_ref(child);
                    len += 1;
                }
            }
            i += 1;
        }
        (order, len)
    }

    /// The long part of destroying a task, in slices: mark it and its subtree dying
    /// (no capability reaches them any more, except to finish the destruction), end
    /// their threads (but the caller), and take their memory away page by page until
    /// the TSC passes `budget_end`. True when nothing is left, so that `destroy_task`
    /// is short; false when the caller should come back for more.
    pub fn teardown_slice(&mut self, id: u32, budget_end: u64) -> bool {
        let (order, len) = self.subtree(id);
        let cur = self.view.current;
        for r in &order[..len] {
            if self.task(r.id).dying {
                continue;
            }
            self.task(r.id).dying = true;
            for t in 0..MAX_THREADS as u32 {
                if t != cur
                    && self.threads[t as usize]
                        .as_ref()
                        .is_some_and(|x| x.task == r.id && !x.kernel_thread && x.state != State::Dead)
                {
                    self.destroy_thread(t);
                }
            }
        }
        order[..len].iter().all(|r| self.strip_memory(r.id, budget_end))
    }

    pub fn destroy_task(&mut self, id: u32) {
        if self.tasks[id as usize].is_none() {
            return;
        }
        // The subtree is found before any generation changes.
        let (order, len) = self.subtree(id);
        for r in order[..len].iter().rev() {
            self.destroy_one_task(r.id);
        }
    }

    fn destroy_one_task(&mut self, id: u32) {
        self.task_gen[id as usize] = self.task_gen[id as usize].wrapping_add(1);
        for t in 0..MAX_THREADS as u32 {
            if self.threads[t as usize]
                .as_ref()
                .is_some_and(|x| x.task == id && !x.kernel_thread && x.state != State::Dead)
            {
                self.destroy_thread(t);
            }
        }
        if self.tasks[id as usize].is_none() {
            return;
        }
        // Callers waiting for an answer through a saved reply this task held get
        // NoPartner: nobody is left to answer them.
        for slot in 0..abi::cap::SLOTS {
            if let Ok(c) = self.task(id).cspace.get(slot) {
                if let Obj::Reply(r, n) = c.obj {
                    if self.awaits_saved_reply(r, n) {
                        self.wake(r.id, Error::NoPartner as u64);
                    }
                }
            }
        }
        self.release_task_resources(id);
        let Some(mut task) = self.tasks[id as usize].take() else { return };
        if self.view.io_owner == Some(id) {
            crate::arch::cpu::clear_iomap(task.io_max);
            self.view.io_owner = None;
        }
        let freed = task.pml4;
        task.destroy_space();
        // destroy_space may have moved CR3 to the kernel's own table, and every other
        // CPU that had the space loaded has left it for that table (`klock::mark_freed`):
        // their views must say so, or a task whose page tables come to lie in the freed
        // frame would be taken for loaded there and run on the kernel's table.
        self.view.loaded_pml4 = cpu::current_cr3();
        let boot = crate::arch::boot::boot_pml4_phys();
        for v in self.parked.iter_mut().filter(|v| v.loaded_pml4 == freed) {
            v.loaded_pml4 = boot;
        }
        if let Some(p) = task.parent {
            if self.task_alive(p) {
                self.task(p.id).quota.uncharge(task.quota.limit);
            }
        }
    }
}

/// The running CPU's idle thread.
/// CPU `cpu`'s idle thread (made by the boot CPU for every CPU before the first thread
/// runs, so that a CPU's view names its idle thread as soon as threads can move there).
pub fn create_idle(k: &mut Kernel, cpu: usize) {
    let id = k.create_thread(0, 0, 0, true).expect("idle thread");
    k.thread_cpu[id as usize] = cpu as u8;
    let t = k.tm(id);
    let top = t.kstack_top();
    // SAFETY: the fresh kernel stack is ours; switch_context pops six registers and
    // returns into idle_loop with the stack aligned as the ABI requires.
    unsafe {
        let sp = top - 8 * 8;
        let w = sp as *mut u64;
        for i in 0..6 {
            w.add(i).write(0);
        }
        w.add(6).write(crate::sched::idle_loop as *const () as usize as u64);
        t.saved_rsp = sp;
    }
    t.state = State::Ready;
    if cpu == k.view_cpu {
        k.view.idle = id;
    } else {
        // Its CPU starts in it (`start_scheduling`).
        k.parked[cpu].idle = id;
        k.parked[cpu].current = id;
    }
}
