//! The kernel's object tables (threads, tasks, per-CPU views), the entry to them
//! (`enter`) and capability lookup. The scheduler is `sched`; the life cycle of
//! threads and tasks is `thread`.

use crate::arch::cpu::{self, TrapFrame, MAX_CPUS};
use crate::arch::fpu;
use crate::kcell::KCell;
use crate::mem::phys_to_virt;
use crate::task::{self, Obj, ObjRef, Task};
use abi::layout::PAGE_SIZE;
use abi::{Error, Utcb};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use kcore::cspace::Cap;
use kcore::framedb::FrameDb;
use kcore::idlist::{Links, List};
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
    pub(crate) top: u64,
    pub(crate) utcb_kva: u64,
    /// Where `switch_context` last saved this thread's kernel context — its context
    /// while `fast_blocks` is still `deep_at` (`resume_sp`).
    pub saved_rsp: u64,
    /// `fast_blocks` when `switch_context` last saved the context.
    pub(crate) deep_at: u64,
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
    pub irq_pending: u64,
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
    pub irqs: [Option<(ObjRef, u64)>; abi::irq::ALL as usize],
    /// Each line's delivery state: in service, fired again meanwhile
    /// (`kcore::irqline` says when a line is masked).
    pub irq_lines: [kcore::irqline::Line; abi::irq::ALL as usize],
    /// How many times each interrupt was taken (`irq::COUNT`).
    pub irq_counts: [u64; abi::irq::ALL as usize],
    /// Which (PCI function, MSI-X entry) holds each message-signalled interrupt.
    pub msi_vectors: pcie::Vectors<{ abi::irq::MSI_LINES as usize }>,
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
    irqs: [None; abi::irq::ALL as usize],
    irq_lines: [kcore::irqline::Line::new(); abi::irq::ALL as usize],
    irq_counts: [0; abi::irq::ALL as usize],
    msi_vectors: pcie::Vectors::new(),
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
    crate::arch::serial::kprintln!(
        "[dump] ticks {} lock {} view of CPU {} fast ipcs {:?}",
        k.ticks,
        crate::klock::holder(),
        k.view_cpu,
        cpu::fast_ipcs()
    );
    for c in 0..cpus {
        let (cur, idle, resched) = if c == k.view_cpu {
            (k.view.current, k.view.idle, k.view.need_resched)
        } else {
            (k.parked[c].current, k.parked[c].idle, k.parked[c].need_resched)
        };
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
            crate::arch::serial::kprintln!(
                "[dump] irq line {} -> t{}{}",
                line,
                r.id,
                if k.irq_lines[line].in_service() { " (in service)" } else { "" }
            );
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
/// entry stub, `KLOCK`, and by `lock`).
#[no_mangle]
pub extern "C" fn take_view() {
    let me = cpu::cpu_index();
    let k = KERNEL.get();
    if k.view_cpu != me {
        k.switch_view(me);
    }
    KERNEL_VIEW.store(me as u32 + 1, Ordering::Relaxed);
}

/// Take the kernel lock from Rust (boot, an application processor's start, the idle
/// loop, the request IPI) and make the kernel's per-CPU part this CPU's.
pub fn lock() {
    crate::klock::lock();
    take_view();
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

impl Kernel {
    /// Nobody serves interrupt `line` now (its driver detached or is gone): it is
    /// masked and forgets what it owed.
    pub fn irq_detach(&mut self, line: u8) {
        self.irqs[line as usize] = None;
        let a = self.irq_lines[line as usize].detach();
        crate::arch::irqchip::set_masked(line, a.mask);
    }

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
        self.thread_alive(r)
            && self.t(r.id).state == State::ReplyBlocked
            && self.t(r.id).partner == Some(r)
            && self.t(r.id).saved_calls == n
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
            Obj::Machine | Obj::Irq(_) | Obj::IrqControl | Obj::PciDevice(_) => true,
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
            Obj::Thread(r)
                if self.moved[r.id as usize]
                    && self.successors.get(&r).is_some_and(|&(to, _)| self.thread_alive(to)) =>
            {
                Ok(c)
            }
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

    pub(crate) fn uncharge_successor(&mut self, payer: ObjRef) {
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
}
