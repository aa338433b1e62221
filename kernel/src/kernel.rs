//! The kernel's object tables (threads, tasks), capability lookup, thread and task
//! life cycle, and the scheduler.

use core::sync::atomic::{AtomicU64, Ordering};
use crate::arch::cpu::{self, TrapFrame, MAX_CPUS};
use crate::arch::fpu;
use crate::kcell::KCell;
use crate::mem::{self, phys_to_virt};
use crate::task::{self, Obj, ObjRef, Task};
use abi::layout::PAGE_SIZE;
use abi::{ipc, sched as s, Error, Utcb};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use kcore::cspace::Cap;
use kcore::idlist::{Links, List};
use kcore::framedb::FrameDb;
use kcore::mapdb::MapDb;
use kcore::runqueue::RunQueue;
use kcore::timerheap::TimerHeap;

pub const MAX_THREADS: usize = abi::tables::MAX_THREADS;
/// `Kernel::thread_cpu` of an empty thread slot.
pub const NO_CPU: u8 = u8::MAX;
pub const MAX_TASKS: usize = abi::tables::MAX_TASKS;
/// No thread (for thread-id fields that may be empty).
pub const NO_THREAD: u32 = u32::MAX;
pub const KSTACK_PAGES: u64 = 4;
pub const KSTACK_SIZE: u64 = KSTACK_PAGES * PAGE_SIZE;
/// Quota pages a thread costs: its kernel stack and its UTCB.
pub const THREAD_PAGES: u64 = abi::kquota::THREAD_PAGES;
const _: () = assert!(THREAD_PAGES == KSTACK_PAGES + 1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Created or stopped: runs only after `START`.
    Stopped,
    /// The current thread.
    Running,
    /// In the run queue.
    Ready,
    /// Waiting for `partner` to receive (in its send queue).
    SendBlocked,
    /// Waiting for a message (`recv_from`: any, or one thread).
    RecvBlocked,
    /// Waiting for `partner`'s reply to a call.
    ReplyBlocked,
    Sleeping,
    /// Destroyed; its kernel stack is freed after the next switch.
    Dead,
}

/// A thread. Cache-line aligned: threads of different CPUs are changed by their CPUs'
/// fastpaths at once (`fastpath`), so no two share a line.
#[repr(align(64))]
pub struct Tcb {
    pub task: u32,
    pub state: State,
    pub prio: u8,
    pub slice: u64,
    /// Physical address of the kernel stack (KSTACK_PAGES contiguous frames).
    pub kstack: u64,
    /// Its top in the direct map (`kstack_top`), and the UTCB's (`utcb`): worked out
    /// once, read on every IPC.
    top: u64,
    utcb_kva: u64,
    /// Where `switch_context` last saved this thread's kernel context — its context
    /// while `fast_blocks` is still `deep_at` (`resume_sp`).
    pub saved_rsp: u64,
    /// `fast_blocks` when `switch_context` last saved the context.
    deep_at: u64,
    pub utcb_va: u64,
    pub utcb_frame: u64,
    /// Threads waiting to send to this one.
    pub sendq: List,
    pub partner: Option<ObjRef>,
    pub recv_from: Option<ObjRef>,
    pub send_badge: u64,
    pub call: bool,
    pub call_timeout: u32,
    pub reply_to: Option<ObjRef>,
    /// Calls of this thread saved so far (`SAVE_REPLY`): a saved reply answers only the
    /// call it was saved from, the one whose number it holds.
    pub saved_calls: u32,
    pub fault_handler: Option<(ObjRef, u64)>,
    /// Receives this thread's page faults.
    pub pager: Option<(ObjRef, u64)>,
    /// Pending fault message (kind, address, ip, error code) while the handler has it.
    pub fault: Option<[u64; 4]>,
    /// The pending fault went to the pager (a page fault) rather than the fault handler.
    pub fault_to_pager: bool,
    /// Interrupt lines attached to this thread that fired and wait to be received.
    pub irq_pending: u32,
    pub kernel_thread: bool,
    /// The task's page-table root (fixed for the task's life), kept here so that a
    /// switch needs no task lookup.
    pub pml4: u64,
    /// The task holds I/O ports (its bitmap must be in the TSS when it runs).
    pub task_io: bool,
    /// The thread has x87/SSE state of its own (saved in `fpu_area` while another
    /// thread owns the registers); a thread that never used them starts clean.
    pub fpu_used: bool,
    /// Times the thread blocked in the IPC fastpath (which does not look up its task);
    /// added to the task's switch count when the thread is destroyed. Its kernel
    /// context then is the fastpath call's return, at the top of its kernel stack
    /// (`resume_sp`): the fastpath does not write `saved_rsp`.
    pub fast_blocks: u64,
    /// The fastpath's last resolved send string and receive buffer of this thread.
    pub send_range: task::CachedRange<false>,
    pub recv_range: task::CachedRange<true>,
    /// The fastpath's last looked-up call capability of this thread.
    pub call_cap: KeptCap,
}

/// A thread's last call capability as the fastpath found it: a thread, with the send
/// right, and its badge, at the count of capability removals and reductions
/// (`kcore::cspace::reductions`) it was looked up at. While the count stands still the
/// slot holds the same capability (a TLB entry's rule: what takes it away or reduces it
/// advances the count), so the fastpath's next call through the slot needs neither the
/// task nor its capability space.
#[derive(Clone, Copy)]
pub struct KeptCap {
    pub slot: u64,
    /// 0: nothing kept (the count starts at 1).
    pub at: u64,
    pub dest: ObjRef,
    pub badge: u64,
}

impl KeptCap {
    pub const EMPTY: KeptCap = KeptCap { slot: 0, at: 0, dest: ObjRef { id: 0, gen: 0 }, badge: 0 };
}

impl Tcb {
    /// Where `switch_context` resumes this (not running) thread: the context it saved
    /// last, unless the thread has blocked in the IPC fastpath since (which counts in
    /// `fast_blocks`, not changed by `switch_context`): then the return of that
    /// fastpath call, just below the thread's frame (`cpu::top_context`; the stub's
    /// `FAST_RETURNED`). A context left behind when the fastpath resumed the thread is
    /// never resumed.
    #[inline]
    pub fn resume_sp(&self) -> u64 {
        if self.fast_blocks != self.deep_at {
            cpu::top_context(self.top)
        } else {
            self.saved_rsp
        }
    }

    #[inline(always)]
    pub fn kstack_top(&self) -> u64 {
        self.top
    }

    /// The saved user registers.
    #[allow(clippy::mut_from_ref)]
    pub fn frame(&self) -> &mut TrapFrame {
        // SAFETY: every user thread's kernel stack ends with its TrapFrame (written at
        // creation, rewritten on every entry); the stack is owned by this thread and
        // the kernel is single-threaded (see `kcell`).
        unsafe { &mut *cpu::frame_at(self.kstack_top()) }
    }

    #[allow(clippy::mut_from_ref)]
    pub fn utcb(&self) -> &mut Utcb {
        // SAFETY: the UTCB frame belongs to this thread for its whole life and lies in the
        // direct map; user writes to it cannot break the kernel's use of plain integers.
        unsafe { &mut *(self.utcb_kva as *mut Utcb) }
    }

    pub fn is_user(&self) -> bool {
        !self.kernel_thread
    }

    /// Where the thread's x87/SSE registers are kept while another thread owns them:
    /// the lowest 512 bytes of its kernel stack (charged with the stack; kernel entries
    /// use far less than the other 15.5 KiB).
    #[allow(clippy::mut_from_ref)]
    pub fn fpu_area(&self) -> &mut fpu::FxArea {
        const _: () = assert!(core::mem::size_of::<fpu::FxArea>() as u64 * 8 <= KSTACK_SIZE);
        // SAFETY: the stack's frames belong to this thread for its whole life, lie in the
        // direct map and are page-aligned (so 16-byte aligned); the kernel never runs deep
        // enough on a thread's stack to reach its lowest 512 bytes, and is single-threaded
        // (see `kcell`), so nothing else refers to them.
        unsafe { &mut *(phys_to_virt(self.kstack) as *mut fpu::FxArea) }
    }
}

pub struct Kernel {
    pub threads: Vec<Option<Tcb>>,
    pub thread_gen: [u32; MAX_THREADS],
    /// Per thread: where an `UNMAP` that was cut short (to let the clock and other
    /// threads run) goes on when the thread issues the same call again (the call's
    /// range, rights and flag, the next address). Kept beside the TCBs, not in them:
    /// a larger `Tcb` cost the IPC fastpath 20 instructions.
    pub unmap_resume: Vec<Option<(kcore::syscall::UnmapRange, bool, u64)>>,
    pub tasks: Vec<Option<Task>>,
    pub task_gen: Vec<u32>,
    /// Endpoints moved (`THREAD_CONTROL SUCCEED`): sends to the key go to the thread in
    /// the value, whose entry is charged to the task in it (one page of its quota).
    pub successors: BTreeMap<ObjRef, (ObjRef, ObjRef)>,
    /// Per thread id: some key of `successors` has it (checked before the map, so that
    /// ordinary sends and the fastpath pay one load).
    pub moved: [bool; MAX_THREADS],
    /// Each CPU's ready threads (a thread is queued on its own CPU's, `thread_cpu`).
    pub rqs: [RunQueue<MAX_THREADS>; MAX_CPUS],
    /// The CPU each thread runs on; `NO_CPU` while the slot is empty. A slot whose entry
    /// names a CPU holds a thread (set before the slot is filled, reset when it is
    /// emptied, both under the lock): the fastpath without the lock relies on it.
    pub thread_cpu: [u8; MAX_THREADS],
    /// The lock holder's per-CPU state (what it runs, what its registers hold): the
    /// kernel reads `k.view.current` as on one CPU. `take_view` switches it.
    pub view: CpuView,
    /// The CPU whose state `view` holds.
    pub view_cpu: usize,
    /// The other CPUs' per-CPU state while another CPU holds the lock.
    pub parked: [CpuView; MAX_CPUS],
    /// Times the lock passed from one CPU to another (`switch_view`).
    pub handovers: u64,
    pub sendq: Links<MAX_THREADS>,
    pub timers: TimerHeap<MAX_THREADS>,
    pub ticks: u64,
    /// Mapping databases: frames (by frame address; stable slots kept in the page
    /// tables, `kcore::framedb`), I/O ports, capabilities (by object).
    pub framedb: FrameDb,
    pub mapdb_io: MapDb<u16, u32>,
    pub mapdb_cap: MapDb<Obj, u32>,
    /// The task that holds every I/O port from boot (sigma0).
    pub io_root: u32,
    /// Interrupt lines: the attached thread and its badge.
    pub irqs: [Option<(ObjRef, u64)>; abi::irq::LINES as usize],
    /// The IPC fastpath is on (`MachineOp::Fastpath` turns it off to compare paths).
    pub fastpath: bool,
    /// `threads`' slots (made once by `init`, never moved): the fastpath without the
    /// lock reaches its two threads through this, not through the vector.
    pub tcbs: *mut Option<Tcb>,
}

static KERNEL: KCell<Kernel> = KCell::new(Kernel {
    threads: Vec::new(),
    thread_gen: [1; MAX_THREADS],
    unmap_resume: Vec::new(),
    successors: BTreeMap::new(),
    moved: [false; MAX_THREADS],
    tasks: Vec::new(),
    task_gen: Vec::new(),
    rqs: [const { RunQueue::new() }; MAX_CPUS],
    thread_cpu: [NO_CPU; MAX_THREADS],
    view: CpuView::EMPTY,
    view_cpu: 0,
    parked: [CpuView::EMPTY; MAX_CPUS],
    handovers: 0,
    sendq: Links::new(),
    timers: TimerHeap::new(),
    ticks: 0,
    framedb: FrameDb::empty(),
    mapdb_io: MapDb::new(),
    mapdb_cap: MapDb::new(),
    io_root: u32::MAX,
    irqs: [None; abi::irq::LINES as usize],
    fastpath: true,
    tcbs: core::ptr::null_mut(),
});

/// One CPU's part of the kernel state: what it runs and what its registers hold. The
/// lock holder's is `Kernel::view` (so that the code reads `k.view.current` as on one
/// CPU); the others' wait in `Kernel::parked`. A cache line (or two) of its own: the
/// fastpath without the lock writes its CPU's on every call, beside other CPUs doing
/// the same with theirs.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct CpuView {
    pub current: u32,
    /// This CPU's ready queue (`Kernel::rqs`, which never moves), for the fastpath.
    pub rq: *const RunQueue<MAX_THREADS>,
    pub idle: u32,
    pub need_resched: bool,
    /// The current thread gives up the rest of its slice to its equals.
    pub rotate: bool,
    /// Run this thread next if it is ready and as important as any other (IPC handoff).
    pub hint: Option<u32>,
    pub zombie: Option<u32>,
    /// The task whose I/O bitmap is in the TSS.
    pub io_owner: Option<u32>,
    /// What CR3 and FS base hold now (so that a switch writes them only on change).
    pub loaded_pml4: u64,
    pub loaded_fs: u64,
    /// The thread whose x87/SSE state is in the registers (`NO_THREAD`: nobody's).
    pub fpu_owner: u32,
    /// CR0.TS is clear (the running thread owns the registers).
    pub fpu_ts_clear: bool,
}

impl CpuView {
    const EMPTY: CpuView = CpuView {
        current: 0,
        rq: core::ptr::null(),
        idle: 0,
        need_resched: false,
        rotate: false,
        hint: None,
        zombie: None,
        io_owner: None,
        loaded_pml4: 0,
        loaded_fs: 0,
        fpu_owner: NO_THREAD,
        fpu_ts_clear: false,
    };

    /// Have CR3 hold `pml4` (unless it does already, as this view records).
    #[inline(always)]
    pub fn load_space(&mut self, pml4: u64) {
        if self.loaded_pml4 != pml4 {
            cpu::load_cr3(pml4);
            self.loaded_pml4 = pml4;
        }
    }

    /// Have the FS base hold `utcb` (unless it does already, as this view records).
    #[inline(always)]
    pub fn load_fs(&mut self, utcb: u64) {
        if self.loaded_fs != utcb {
            cpu::set_fs_base(utcb);
            self.loaded_fs = utcb;
        }
    }
}

impl Kernel {
    /// Park the view of the CPU that held the lock last and take up `me`'s.
    #[cold]
    fn switch_view(&mut self, me: usize) {
        let old = self.view_cpu;
        self.parked[old] = self.view;
        self.view = self.parked[me % MAX_CPUS];
        self.view_cpu = me % MAX_CPUS;
        self.handovers += 1;
        cpu::set_view_of(old, &raw const self.parked[old] as u64);
        cpu::set_view_of(self.view_cpu, &raw const self.view as u64);
    }

    /// The running CPU's ready queue.
    pub fn rq(&mut self) -> &mut RunQueue<MAX_THREADS> {
        &mut self.rqs[self.view_cpu]
    }

    /// The ready queue thread `id` is (or would be) in.
    pub fn rq_of(&mut self, id: u32) -> &mut RunQueue<MAX_THREADS> {
        let c = self.thread_cpu[id as usize % MAX_THREADS] as usize % MAX_CPUS;
        &mut self.rqs[c]
    }
}

/// The running CPU's per-CPU state, wherever it is now (`Kernel::view` if this CPU
/// held the lock last, else its parked slot), for the fastpath without the lock: one
/// load through GS (`PerCpu::view`, kept by `switch_view`).
///
/// # Safety
/// No CPU holds the lock, and this one is marked in the fastpath (so the views do not
/// move and nobody else touches this CPU's).
pub(crate) unsafe fn this_view() -> *mut CpuView {
    cpu::view_addr() as *mut CpuView
}

// A thread is 512 bytes (its cache lines, a power of two): the fastpath and `cur` find
// a slot with a shift, not a multiply.
const _: () = assert!(core::mem::size_of::<Tcb>() == 512);

// A slot is no bigger than its thread (`None` is a value no thread field takes), so the
// thread lies at the start of its slot (`tcb_in`; checked again for each thread made).
const _: () = assert!(core::mem::size_of::<Option<Tcb>>() == core::mem::size_of::<Tcb>());

/// The thread in a slot known to hold one, without looking at the slot's `None` value
/// (the fastpath knows it from `Kernel::thread_cpu`).
///
/// # Safety
/// `slot` points at a `Kernel::threads` slot that holds a thread, which nothing else
/// refers to for the returned lifetime.
#[inline(always)]
pub unsafe fn tcb_in<'a>(slot: *mut Option<Tcb>) -> &'a mut Tcb {
    // SAFETY: the slot is valid to read, as the caller promises.
    debug_assert!(unsafe { (*slot).is_some() });
    // SAFETY: as the caller promises the slot holds a thread, which lies at its start
    // (the size assertion above; `create_thread` checks the address for each thread).
    unsafe { &mut *(slot as *mut Tcb) }
}

/// The kernel state as a raw pointer, for the IPC fastpath without the lock (which
/// reaches through it only what `fastpath` says it may).
pub fn shared() -> *mut Kernel {
    KERNEL.as_ptr()
}

/// Print what every thread waits for, each CPU's state and the interrupt lines: asked
/// for by an NMI (`trap_dispatch`; the test runner sends one through QEMU's monitor when
/// a scenario runs out of time), so that a machine that stopped making progress says
/// why. It reads without the lock — the CPU holding it may be the stuck one — so a
/// line may show a state caught in the middle of a change.
pub fn dump_state() {
    // SAFETY: reads only, for a report; see above.
    let k = unsafe { &*KERNEL.as_ptr() };
    let cpus = crate::arch::smp::cpus();
    crate::arch::serial::kprintln!("[dump] ticks {} lock {} view of CPU {} fast ipcs {:?}", k.ticks, crate::klock::holder(), k.view_cpu, cpu::fast_ipcs());
    for c in 0..cpus {
        let (cur, idle, resched) = if c == k.view_cpu { (k.view.current, k.view.idle, k.view.need_resched) } else { (k.parked[c].current, k.parked[c].idle, k.parked[c].need_resched) };
        let (wake, polling, flush, enter, fpu_save) = crate::klock::flags_of(c);
        crate::arch::serial::kprintln!(
            "[dump] CPU {}: current {} idle {} resched {} top ready prio {:?} wake {} polling {} flush {} enter {} fpu_save {:#x} fastpath {}",
            c,
            cur,
            idle,
            resched,
            k.rqs[c].highest(),
            wake,
            polling,
            flush,
            enter,
            fpu_save,
            cpu::in_fastpath(c)
        );
    }
    for (id, t) in k.threads.iter().enumerate() {
        let Some(t) = t else { continue };
        if t.kernel_thread {
            continue;
        }
        crate::arch::serial::kprintln!(
            "[dump] t{} task {} {:?} cpu {} prio {} partner {:?} from {:?} reply_to {:?} fault {} irqs {:#x} timer {} queued {}",
            id,
            t.task,
            t.state,
            k.thread_cpu[id],
            t.prio,
            t.partner.map(|r| r.id),
            t.recv_from.map(|r| r.id),
            t.reply_to.map(|r| r.id),
            t.fault.is_some(),
            t.irq_pending,
            k.timers.contains(id as u32),
            k.rqs[k.thread_cpu[id] as usize % MAX_CPUS].contains(id as u32),
        );
    }
    for (line, a) in k.irqs.iter().enumerate() {
        if let Some((r, _)) = a {
            crate::arch::serial::kprintln!("[dump] irq line {} -> t{}", line, r.id);
        }
    }
}

/// The kernel state, for one kernel entry.
///
/// # Safety
/// Call only where a kernel entry begins (system call, interrupt, a thread's first run,
/// the idle loop's turn, `kstart`) or where a switch has just returned, with no other
/// reference into kernel state live. Everything below an entry receives the reference
/// as a parameter; `schedule` and `switch_to` take it by value, so no code can use
/// state it held from before a switch.
pub unsafe fn enter() -> &'static mut Kernel {
    // The caller holds the kernel lock (`klock`), whose taking made the per-CPU part
    // this CPU's (`take_view`).
    debug_assert_eq!(KERNEL.get().view_cpu, cpu::cpu_index());
    KERNEL.get()
}

/// The CPU whose view `Kernel` holds, plus one (the kernel lock's word for that CPU), so
/// that the entry stub tests it in one compare after taking the lock.
#[no_mangle]
static KERNEL_VIEW: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(1);

/// Called with the lock just taken by a CPU whose view `Kernel` does not hold (by the
/// entry stub, `KLOCK`, and by `klock::lock`).
#[no_mangle]
pub extern "C" fn take_view() {
    let me = cpu::cpu_index();
    let k = KERNEL.get();
    if k.view_cpu != me {
        k.switch_view(me);
    }
    KERNEL_VIEW.store(me as u32 + 1, Ordering::Relaxed);
}

pub fn init(k: &mut Kernel) {
    k.threads = (0..MAX_THREADS).map(|_| None).collect();
    k.tcbs = k.threads.as_mut_ptr();
    k.unmap_resume = alloc::vec![None; MAX_THREADS];
    k.tasks = (0..MAX_TASKS).map(|_| None).collect();
    k.task_gen = alloc::vec![1; MAX_TASKS];
    // The memory mapping database's table: a tree pointer per frame of RAM.
    k.framedb = FrameDb::new(crate::mem::frame_count() as usize).expect("kernel heap for the mapping database's table");
    for c in 0..MAX_CPUS {
        let rq = &raw const k.rqs[c];
        let v = if c == k.view_cpu {
            k.view.rq = rq;
            &raw const k.view
        } else {
            k.parked[c].rq = rq;
            &raw const k.parked[c]
        };
        cpu::set_view_of(c, v as u64);
    }
}

pub fn ticks_for_us(us: u64) -> u64 {
    us.div_ceil(s::TICK_US).max(1)
}

impl Kernel {
    pub fn t(&self, id: u32) -> &Tcb {
        self.threads[id as usize].as_ref().expect("live thread")
    }
    pub fn tm(&mut self, id: u32) -> &mut Tcb {
        self.threads[id as usize].as_mut().expect("live thread")
    }
    pub fn task(&mut self, id: u32) -> &mut Task {
        self.tasks[id as usize].as_mut().expect("live task")
    }
    pub fn cur(&mut self) -> &mut Tcb {
        let c = self.view.current;
        self.tm(c)
    }
    pub fn cur_task(&mut self) -> &mut Task {
        let t = self.t(self.view.current).task;
        self.task(t)
    }
    pub fn thread_ref(&self, id: u32) -> ObjRef {
        ObjRef { id, gen: self.thread_gen[id as usize] }
    }
    pub fn task_ref(&self, id: u32) -> ObjRef {
        ObjRef { id, gen: self.task_gen[id as usize] }
    }
    pub fn thread_alive(&self, r: ObjRef) -> bool {
        (r.id as usize) < MAX_THREADS
            && self.thread_gen[r.id as usize] == r.gen
            && self.threads[r.id as usize].as_ref().is_some_and(|t| t.state != State::Dead)
    }
    /// Whether `r` waits for an answer to its saved call number `n` (SAVE_REPLY marks
    /// such a caller as its own partner; any new call of its replaces the mark, and
    /// saving that one too gives it a new number).
    pub fn awaits_saved_reply(&self, r: ObjRef, n: u32) -> bool {
        self.thread_alive(r) && self.t(r.id).state == State::ReplyBlocked && self.t(r.id).partner == Some(r) && self.t(r.id).saved_calls == n
    }

    pub fn task_alive(&self, r: ObjRef) -> bool {
        (r.id as usize) < MAX_TASKS && self.task_gen[r.id as usize] == r.gen && self.tasks[r.id as usize].is_some()
    }

    /// Look up a capability of the current task and check that its object still lives.
    pub fn cap(&mut self, slot: u64) -> Result<Cap<Obj>, Error> {
        let c = self.cur_task().cspace.get(slot)?;
        let alive = match c.obj {
            Obj::Thread(r) => self.thread_alive(r),
            Obj::Task(r) => self.task_alive(r),
            Obj::Machine | Obj::Irq(_) | Obj::IrqControl => true,
            Obj::Reply(r, _) => self.thread_alive(r),
        };
        if alive {
            Ok(c)
        } else {
            Err(Error::InvalidCap)
        }
    }

    /// A capability naming a thread whose endpoint moved (`SUCCEED`) to a thread that
    /// lives: it still works for sending, so `CAP_INFO` reports it alive after the old
    /// thread is gone.
    pub fn moved_cap(&mut self, slot: u64) -> Result<Cap<Obj>, Error> {
        let c = self.cur_task().cspace.get(slot)?;
        match c.obj {
            Obj::Thread(r) if self.moved[r.id as usize] && self.successors.get(&r).is_some_and(|&(to, _)| self.thread_alive(to)) => Ok(c),
            _ => Err(Error::InvalidCap),
        }
    }

    /// The destination of an IPC send through `slot`: the thread it names, or the one
    /// its endpoint moved to (`SUCCEED`), with `SEND`.
    pub fn send_dest(&mut self, slot: u64) -> Result<(u32, Cap<Obj>), Error> {
        let c = self.cur_task().cspace.get(slot)?;
        if let Obj::Thread(r) = c.obj {
            if self.moved[r.id as usize] {
                if let Some(&(to, _)) = self.successors.get(&r) {
                    if c.rights & abi::rights::SEND == 0 {
                        return Err(Error::NoRights);
                    }
                    if !self.thread_alive(to) {
                        return Err(Error::InvalidCap);
                    }
                    return Ok((to.id, c));
                }
            }
        }
        self.thread_cap(slot, abi::rights::SEND)
    }

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

    fn uncharge_successor(&mut self, payer: ObjRef) {
        if self.task_alive(payer) {
            self.task(payer.id).quota.uncharge(1);
        }
    }

    /// A thread capability with `need` rights: returns the thread id and the capability.
    pub fn thread_cap(&mut self, slot: u64, need: u64) -> Result<(u32, Cap<Obj>), Error> {
        let c = self.cap(slot)?;
        match c.obj {
            Obj::Thread(r) if c.rights & need == need => Ok((r.id, c)),
            Obj::Thread(_) => Err(Error::NoRights),
            _ => Err(Error::WrongType),
        }
    }

    /// A task capability with the `need`ed rights, naming a task that is not being
    /// destroyed (`InvalidCap` then, as once it is gone).
    pub fn task_cap(&mut self, slot: u64, need: u64) -> Result<u32, Error> {
        let id = self.task_cap_even_dying(slot, need)?;
        if self.task(id).dying {
            return Err(Error::InvalidCap);
        }
        Ok(id)
    }

    /// As `task_cap`, also for a task whose destruction is under way (to go on with it).
    pub fn task_cap_even_dying(&mut self, slot: u64, need: u64) -> Result<u32, Error> {
        let c = self.cap(slot)?;
        match c.obj {
            Obj::Task(r) if c.rights & need == need => Ok(r.id),
            Obj::Task(_) => Err(Error::NoRights),
            _ => Err(Error::WrongType),
        }
    }

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

    // ---------------------------------------------------------------- life cycle

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
            if let Err(e) = task.map_frame(utcb_va, f, task::pte_flags(abi::mem::READ | abi::mem::WRITE) | kcore::pagetable::UTCB) {
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
            self.threads.iter().flatten().find(|x| x.task == task_id && !x.kernel_thread && x.state != State::Dead).and_then(|x| x.pager)
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
        assert!(core::ptr::eq(self.threads[id as usize].as_ref().map_or(core::ptr::null(), |t| t as *const Tcb), &raw const self.threads[id as usize] as *const Tcb));
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
                self.irqs[line] = None;
                crate::arch::irqchip::mask(line as u8);
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
        let (task_id, utcb_va, utcb_frame, kernel_thread, fast_blocks) = (t.task, t.utcb_va, t.utcb_frame, t.kernel_thread, t.fast_blocks);
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

    fn free_thread(&mut self, id: u32) {
        if let Some(t) = self.threads[id as usize].take() {
            mem::free_contiguous(t.kstack, KSTACK_PAGES);
        }
        self.thread_cpu[id as usize] = NO_CPU;
    }

    pub fn reap(&mut self) {
        if let Some(z) = self.view.zombie {
            if z != self.view.current {
                self.view.zombie = None;
                self.free_thread(z);
            }
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
                if t != cur && self.threads[t as usize].as_ref().is_some_and(|x| x.task == r.id && !x.kernel_thread && x.state != State::Dead) {
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
            if self.threads[t as usize].as_ref().is_some_and(|x| x.task == id && !x.kernel_thread && x.state != State::Dead) {
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
extern "C" fn idle_loop() -> ! {
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
        crate::klock::lock();
        idle_end();
        // SAFETY: the lock is held again; `k` was not used while it was not.
        schedule(unsafe { enter() });
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
        w.add(6).write(idle_loop as *const () as usize as u64);
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
