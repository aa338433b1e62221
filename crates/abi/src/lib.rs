//! Scion kernel ABI: the one home of system call numbers, register conventions,
//! message layout, capability types, rights and error codes.
//!
//! Used by the kernel and by every user program (through `rt`). Everything here
//! is plain data; `docs/syscalls.md` is the prose form of this file.
#![forbid(unsafe_code)]
#![no_std]

/// `KERNEL_INFO(KERNEL_INFO_SMP)`: the CPUs running, timer ticks the CPUs other than
/// the boot CPU have taken, times the kernel lock passed from one CPU to another, TLB
/// shootdowns (one per CPU flushed), times a CPU was made to leave a thread's user mode
/// (to stop or destroy it), IPCs the fastpath carried without the kernel lock.
pub const KERNEL_INFO_SMP: u64 = 2;

/// `KERNEL_INFO(KERNEL_INFO_CPU, cpu)`: one CPU's counts — device interrupts it took,
/// IPCs the fastpath carried on it and of them those without the kernel lock, TSC ticks
/// it spent halted. `InvalidArg` for a CPU that is not running.
pub const KERNEL_INFO_CPU: u64 = 3;

/// `KERNEL_INFO(KERNEL_INFO_TABLES)`: the kernel's fixed tables — free task slots, free
/// thread slots, and the slots of each kept for tasks without a parent (root, sigma0):
/// `tables::ROOT_TASKS`, `tables::ROOT_THREADS`.
pub const KERNEL_INFO_TABLES: u64 = 4;

/// The MSR the kernel sets on each CPU to that CPU's index (0 = the boot CPU), where the
/// CPU has it (CPUID 0x8000_0001 EDX bit 27, `RDTSCP`): user code reads the CPU it runs
/// on with `RDTSCP` (ECX) without a system call, as Linux's `getcpu` does — a hint, since
/// the thread may be moved right after (`rt::sys::cpu`).
pub const MSR_TSC_AUX: u32 = 0xC000_0103;

/// `KERNEL_INFO(KERNEL_INFO_MEMORY)`: where the machine's frames are, from the kernel's
/// side — `rdi` = frames of RAM the kernel manages (the machine), `rsi` = of them kept at
/// boot and never handed out (the first MiB, the kernel's image, the boot image, the frame
/// tables), `rdx` = the kernel heap's (its pages and their tables; it never shrinks),
/// `r10` = given to sigma0 at boot (every frame user memory is made of), `r8` = the
/// kernel's objects outside the heap (page tables, kernel stacks, UTCBs, the boot tasks'
/// images), `r9` = free. Each is counted where the frame is taken or given back, so the
/// five after the first sum to it unless a count is wrong (`memacct` shows the difference).
pub const KERNEL_INFO_MEMORY: u64 = 5;

/// The kernel's fixed tables (a task or thread made takes a slot until it is destroyed).
/// The last `ROOT_TASKS` task slots and `ROOT_THREADS` thread slots are made only by a
/// task without a parent (root, which starts the manifest's programs): for any other,
/// `TASK_CREATE` and `THREAD_CREATE` answer `NoMemory` when no more are free, so no
/// program's tasks or threads can keep root from starting (or restarting) one.
pub mod tables {
    pub const MAX_TASKS: usize = 128;
    pub const MAX_THREADS: usize = 1024;
    pub const ROOT_TASKS: usize = 16;
    pub const ROOT_THREADS: usize = 32;
}

/// `DEBUG_PUT(ptr, len, DEBUG_PUT_SCREEN)`: the bytes go to the firmware's screen only
/// (the kernel's text console on a UEFI framebuffer; nothing without one), not to the
/// serial log: the console server writes COM1 itself and shows the same bytes there.
/// Without the flag (`rdx` = 0) they go to both, as the kernel's own log does; any other
/// `rdx` is `InvalidArg`.
pub const DEBUG_PUT_SCREEN: u64 = 1;

/// ABI version reported by `KERNEL_INFO`.
pub const ABI_VERSION: u64 = 2;

/// System call numbers (in `rax`).
///
/// Register convention for every call: arguments in `rdi, rsi, rdx, r10, r8, r9`
/// (`r10` replaces `rcx`, which `syscall` clobbers together with `r11`); the result
/// code comes back in `rax` (0 = success, otherwise an [`Error`]), results in
/// `rdi, rsi, rdx`. IPC calls use more registers, see [`ipc`].
pub mod sys {
    pub const NULL: u64 = 0;
    pub const KERNEL_INFO: u64 = 1;
    pub const DEBUG_PUT: u64 = 2;
    pub const IPC_SEND: u64 = 3;
    pub const IPC_RECV: u64 = 4;
    pub const IPC_CALL: u64 = 5;
    pub const IPC_REPLY: u64 = 6;
    pub const IPC_REPLY_WAIT: u64 = 7;
    pub const YIELD: u64 = 8;
    pub const SLEEP: u64 = 9;
    pub const CAP_COPY: u64 = 10;
    pub const CAP_DELETE: u64 = 11;
    pub const CAP_INFO: u64 = 12;
    pub const CAP_GIVE: u64 = 13;
    pub const TASK_CREATE: u64 = 14;
    pub const THREAD_CREATE: u64 = 15;
    pub const THREAD_CONTROL: u64 = 16;
    /// 17: retired (memory comes from sigma0 through pagers); answers `NoSys`.
    pub const MEM_MAP: u64 = 18;
    /// Demap a flexpage (memory, I/O ports or capabilities) recursively.
    pub const UNMAP: u64 = 19;
    pub const THREAD_EXIT: u64 = 20;
    pub const TASK_DESTROY: u64 = 21;
    pub const MACHINE: u64 = 22;
    pub const IRQ_CONTROL: u64 = 23;
    pub const TASK_INFO: u64 = 24;
    pub const SAVE_REPLY: u64 = 25;
    /// One past the highest valid number.
    pub const COUNT: u64 = 26;
}

/// Error codes returned in `rax`. Zero is success.
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Unknown system call number.
    NoSys = 1,
    /// The slot is out of range, empty, or names an object that no longer exists.
    InvalidCap = 2,
    /// The capability is valid but of the wrong type for this call.
    WrongType = 3,
    /// The capability lacks a right the call needs.
    NoRights = 4,
    /// An argument is out of range or malformed (bad flags, bad tag, non-canonical address…).
    InvalidArg = 5,
    /// A user pointer does not point to mapped user memory with the needed access.
    BadAddress = 6,
    /// An address or length is not aligned as required (e.g. UTCB not page-aligned).
    Misaligned = 7,
    /// A length exceeds a limit (string copy bigger than the receive buffer or `MAX_STRING`).
    TooLong = 8,
    /// The timeout expired before the partner was ready (also: timeout 0 and no partner waiting).
    Timeout = 9,
    /// The partner no longer exists, or there is no caller to reply to.
    NoPartner = 10,
    /// The destination slot is already occupied.
    SlotInUse = 11,
    /// The task's memory quota (or a kernel table) is exhausted.
    NoMemory = 12,
    /// The target virtual range is already mapped (or is a UTCB).
    AlreadyMapped = 13,
    /// The source virtual range is not mapped.
    NotMapped = 14,
    /// The thread is not in a state that allows the operation (e.g. starting a running thread).
    BadState = 15,
    /// A fault happened inside a string copy (the sender's buffer was not readable or the
    /// receiver's buffer not writable); the message was not delivered.
    CopyFault = 16,
    /// The call would make a thread wait on itself.
    Deadlock = 17,
    /// The receiver opened no receive window for a typed item of this kind, or the
    /// item is larger than the window.
    NoWindow = 18,
    // Errors only servers answer (the kernel never returns them); one numbering for
    // the whole system, so any program can print any error by name.
    /// (servers) No such name: file, segment, program or server.
    NotFound = 19,
    /// (servers) The name is taken.
    Exists = 20,
    /// (servers) The request's words or string do not fit its label.
    Malformed = 21,
    /// (servers) The server has no request with this label.
    Unsupported = 22,
    /// (servers) No room left: disk blocks, quota, table entries.
    NoSpace = 23,
    /// (servers) Nothing to do yet and the caller asked not to wait (a socket with no
    /// data, no connection to accept, a full send buffer): try again later.
    WouldBlock = 24,
    /// (servers) The connection is gone: reset by the peer, refused, or closed.
    Reset = 25,
    /// (servers) The handle belonged to an instance of the server that ended (it was
    /// restarted): what the old instance held for it is gone — for a file, the writes
    /// through it that no `SYNC` or `CLOSE` had answered. Open again.
    Lost = 26,
    /// (servers) The device failed: a read, write or flush of the disk did not succeed
    /// (or read back bytes that fail their checksums). Not the caller's doing: the
    /// request may be tried again, but what it was to change may not have changed.
    Io = 27,
    /// (servers) This endpoint of the server does not serve now (a per-CPU thread of a
    /// server that is handing itself over in a live update): the request was not done;
    /// call the server's main endpoint (`rt::server::request_routed` does).
    Moved = 28,
}

impl Error {
    pub const ALL: [Error; 28] = [
        Error::NoSys,
        Error::InvalidCap,
        Error::WrongType,
        Error::NoRights,
        Error::InvalidArg,
        Error::BadAddress,
        Error::Misaligned,
        Error::TooLong,
        Error::Timeout,
        Error::NoPartner,
        Error::SlotInUse,
        Error::NoMemory,
        Error::AlreadyMapped,
        Error::NotMapped,
        Error::BadState,
        Error::CopyFault,
        Error::Deadlock,
        Error::NoWindow,
        Error::NotFound,
        Error::Exists,
        Error::Malformed,
        Error::Unsupported,
        Error::NoSpace,
        Error::WouldBlock,
        Error::Reset,
        Error::Lost,
        Error::Io,
        Error::Moved,
    ];

    pub fn from_code(code: u64) -> Option<Error> {
        Error::ALL.iter().copied().find(|e| *e as u64 == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            Error::NoSys => "NoSys",
            Error::InvalidCap => "InvalidCap",
            Error::WrongType => "WrongType",
            Error::NoRights => "NoRights",
            Error::InvalidArg => "InvalidArg",
            Error::BadAddress => "BadAddress",
            Error::Misaligned => "Misaligned",
            Error::TooLong => "TooLong",
            Error::Timeout => "Timeout",
            Error::NoPartner => "NoPartner",
            Error::SlotInUse => "SlotInUse",
            Error::NoMemory => "NoMemory",
            Error::AlreadyMapped => "AlreadyMapped",
            Error::NotMapped => "NotMapped",
            Error::BadState => "BadState",
            Error::CopyFault => "CopyFault",
            Error::Deadlock => "Deadlock",
            Error::NoWindow => "NoWindow",
            Error::NotFound => "NotFound",
            Error::Exists => "Exists",
            Error::Malformed => "Malformed",
            Error::Unsupported => "Unsupported",
            Error::NoSpace => "NoSpace",
            Error::WouldBlock => "WouldBlock",
            Error::Reset => "Reset",
            Error::Lost => "Lost",
            Error::Io => "Io",
            Error::Moved => "Moved",
        }
    }
}

/// Convert a raw `rax` into a `Result`.
pub fn check(code: u64) -> Result<(), Error> {
    if code == 0 {
        Ok(())
    } else {
        Err(Error::from_code(code).unwrap_or(Error::InvalidArg))
    }
}

/// Virtual memory layout shared by kernel and user.
pub mod layout {
    pub const PAGE_SIZE: u64 = 4096;
    /// First user address that may be mapped (page 0 stays unmapped to catch null pointers).
    pub const USER_MIN: u64 = 0x1000;
    /// One past the last user address (lower canonical half).
    pub const USER_END: u64 = 0x0000_8000_0000_0000;
    /// One past the last page that may be mapped for user mode: the half's last page
    /// stays empty, so no user code sits there and a `syscall` never returns (by
    /// `sysretq`) to 0x8000_0000_0000, which is not canonical — on Intel CPUs that
    /// `sysretq` faults in kernel mode, on the user's stack (Linux keeps the page empty
    /// too). Ranges (windows, unmaps) may still name it.
    pub const USER_MAP_END: u64 = USER_END - PAGE_SIZE;
    /// Where the kernel maps the boot image (read-only) into the root task.
    pub const BOOTFS_VADDR: u64 = 0x0000_1000_0000_0000;
    /// sigma0 sees physical address `pa` at `SIGMA0_PHYS + pa` (RAM it owns, and the
    /// device-memory window).
    pub const SIGMA0_PHYS: u64 = 0x0000_4000_0000_0000;
    /// The device-memory (PCI MMIO) window sigma0 holds: 3 GiB up to the IOAPIC.
    pub const MMIO_START: u64 = 0xC000_0000;
    pub const MMIO_END: u64 = 0xFEC0_0000;
    /// Top of the first thread's stack in every program (root's is set up by the kernel,
    /// the others' by root's loader). The `StartInfo` sits at the very top.
    pub const MAIN_STACK_TOP: u64 = 0x0000_7fff_ffff_0000;
    pub const MAIN_STACK_PAGES: u64 = 16;
    /// UTCB of every program's first thread.
    pub const MAIN_UTCB: u64 = 0x0000_7fff_ffff_e000;

    pub const fn is_user_range(addr: u64, len: u64) -> bool {
        match addr.checked_add(len) {
            Some(end) => addr >= USER_MIN && end <= USER_END,
            None => false,
        }
    }

    /// Whether `[addr, addr + len)` lies where user pages may be mapped (`USER_MIN` up
    /// to `USER_MAP_END`): what a pager may answer a fault with. A fault outside it can
    /// be resolved by nobody (the half's last page is user range but never mapped).
    pub const fn is_mappable(addr: u64, len: u64) -> bool {
        match addr.checked_add(len) {
            Some(end) => addr >= USER_MIN && end <= USER_MAP_END,
            None => false,
        }
    }
}

/// Capability types (as reported by `CAP_INFO`).
pub mod cap {
    pub const NULL: u64 = 0;
    pub const THREAD: u64 = 1;
    pub const TASK: u64 = 2;
    pub const MACHINE: u64 = 3;
    pub const IRQ: u64 = 4;
    pub const IRQ_CONTROL: u64 = 5;
    /// A one-shot right to answer one caller (`SAVE_REPLY`); `IPC_SEND` through it
    /// delivers the reply and empties the slot.
    pub const REPLY: u64 = 6;
    /// One PCI function (`irq::PCI_CREATE`): its configuration space, BARs and
    /// message-signalled interrupts.
    pub const PCI_DEVICE: u64 = 7;

    /// Number of slots in every task's capability space.
    pub const SLOTS: u64 = 1024;

    /// Slots the kernel fills in the root task; `rt` keeps the same convention for
    /// every program (the loader fills them likewise).
    pub const SELF_TASK: u64 = 1;
    pub const SELF_THREAD: u64 = 2;
    /// Root only: the machine capability (shutdown through isa-debug-exit).
    pub const MACHINE_SLOT: u64 = 3;
    /// Root only: the IRQ control capability (makes IRQ capabilities).
    pub const IRQ_CONTROL_SLOT: u64 = 4;
    /// Root (and memory servers): SEND to sigma0's thread. Root's is unbadged so that
    /// it can mint one per client.
    pub const SIGMA0_SLOT: u64 = 5;
    /// Programs started by root: a SEND capability to root's service thread.
    pub const PARENT: u64 = 3;
    /// Programs started on request of another program: a SEND capability to the requester.
    pub const PEER: u64 = 4;
    /// Programs whose manifest entry lists "console": SEND to the console server.
    pub const CONSOLE: u64 = 6;
    /// Programs paged by a memory server: SEND to it, for requests about their own
    /// memory (`rt::proto::RESERVE`, which `rt::heap` asks before it grows; `mem_api`).
    pub const PAGER: u64 = 7;
    /// First slot free for the program's own use.
    pub const FIRST_FREE: u64 = 16;
}

/// What a task's kernel-memory quota (`TASK_CREATE`'s quota, a manifest entry's
/// `kpages`) pays for, in pages: the kernel charges these, and `manifest::kpages_for`
/// derives a program's default quota from them.
pub mod kquota {
    /// A task: its top-level page table.
    pub const TASK_PAGES: u64 = 1;
    /// Its capability space (`cap::SLOTS` slots of 40 bytes).
    pub const CSPACE_PAGES: u64 = (super::cap::SLOTS * 40).div_ceil(4096);
    /// A thread: its kernel stack (4 pages) and its UTCB.
    pub const THREAD_PAGES: u64 = 5;
    /// The I/O permission bitmap, made when the task is first given a port.
    pub const IO_BITMAP_PAGES: u64 = 2;
    /// Mapping-database nodes one quota page pays for: every page mapped into a task has
    /// one (48 bytes of kernel heap with its share of the frame's tree), charged to the
    /// task it is mapped into.
    pub const NODES_PER_PAGE: u64 = 4096 / 48;
    /// A page table maps this many pages (each level above it 512 times as many).
    pub const PAGES_PER_TABLE: u64 = 512;
}

/// Rights bits. Which bits mean something depends on the capability type.
pub mod rights {
    /// Thread: may send IPC to it (also: call).
    pub const SEND: u64 = 1 << 0;
    /// Thread: may control it (start, stop, set priority, set fault handler).
    /// Task: may create threads in it, map memory into it, give capabilities to it, destroy it.
    pub const CONTROL: u64 = 1 << 1;
    /// Machine: may shut the machine down.
    pub const SHUTDOWN: u64 = 1 << 2;
    /// IRQ: may attach to it and acknowledge it (also: IRQ control may create IRQs).
    pub const ALL: u64 = SEND | CONTROL | SHUTDOWN;
}

/// Page mapping rights for `MEM_ALLOC` / `MEM_MAP`.
pub mod mem {
    pub const READ: u64 = 1 << 0;
    pub const WRITE: u64 = 1 << 1;
    pub const EXEC: u64 = 1 << 2;
    pub const RIGHTS_MASK: u64 = READ | WRITE | EXEC;
    /// `MEM_MAP`: grant (the source loses the pages) instead of map (shared).
    pub const GRANT: u64 = 1 << 8;
    /// Largest number of pages one `MEM_MAP` may cover (as many as one message's
    /// items, `ipc::MAX_ITEM_PAGES`: a bounded piece of kernel work).
    pub const MAX_PAGES_PER_CALL: u64 = 1024;
}

/// `THREAD_CONTROL` operations (in `rsi`).
pub mod tctl {
    /// Start a stopped (new) thread: `rdx` = instruction pointer, `r10` = stack pointer,
    /// `r8` = first argument (arrives in `rdi`).
    pub const START: u64 = 1;
    /// Stop the thread: it leaves any IPC or sleep it is blocked in (which then returns
    /// `BadState` once it is started again) and runs no more until `START`.
    pub const STOP: u64 = 2;
    /// `rdx` = new priority; may not exceed the caller's own priority.
    pub const SET_PRIORITY: u64 = 3;
    /// `rdx` = slot of a thread capability (with SEND) that receives fault messages,
    /// `r10` = badge those messages carry; `rdx = u64::MAX` clears it.
    pub const SET_FAULT_HANDLER: u64 = 4;
    /// Returns in `rdi` the thread state (see [`state`]), in `rsi` the priority, in `rdx`
    /// the CPU it runs on.
    pub const READ_STATE: u64 = 5;
    /// Destroy the thread.
    pub const DESTROY: u64 = 6;
    /// `rdx` = slot of a thread capability (with SEND) that receives its page faults
    /// (as `label::PAGE_FAULT` messages), `r10` = their badge; `rdx = u64::MAX` clears.
    pub const SET_PAGER: u64 = 7;
    /// Move the thread's endpoint: `rdx` = slot of another thread (with `CONTROL`).
    /// From now on an IPC send through any capability naming this thread goes to that
    /// one (badges as they were), also after this thread is gone; senders queued on it
    /// move to that one's queue. Only sends are redirected: `CONTROL` and receives still
    /// name this thread. A server's live update.
    pub const SUCCEED: u64 = 8;
    /// Run the thread on CPU `rdx` (0 = the boot CPU, below the CPUs running): from its
    /// next switch on (a running thread moves at once).
    pub const SET_CPU: u64 = 9;

    pub mod state {
        pub const STOPPED: u64 = 0;
        pub const READY: u64 = 1;
        pub const BLOCKED_SEND: u64 = 2;
        pub const BLOCKED_RECV: u64 = 3;
        pub const BLOCKED_REPLY: u64 = 4;
        pub const SLEEPING: u64 = 5;
        pub const FAULTED: u64 = 6;
    }
}

/// `IRQ_CONTROL` operations (`rdi` = capability, `rsi` = operation).
pub mod irq {
    /// With the IRQ control capability: `rdx` = IRQ line (0..24), `r10` = destination
    /// slot for a new IRQ capability.
    pub const CREATE: u64 = 1;
    /// With an IRQ capability: attach the calling thread; its interrupts arrive as
    /// messages (`ipc::label::IRQ`, MR1 = line) with badge `rdx`. Unmasks the line.
    pub const ATTACH: u64 = 2;
    /// Unmask the line after handling an interrupt (it is masked on delivery).
    pub const ACK: u64 = 3;
    pub const DETACH: u64 = 4;
    /// With the IRQ control capability: a capability for PCI function `rdx` (its
    /// routing id, bus << 8 | device << 3 | function) in slot `r10` — the function's
    /// configuration space, BARs and message-signalled interrupts, nothing else of the
    /// bus. `NotFound` when no function answers there.
    pub const PCI_CREATE: u64 = 5;
    /// With a PCI device (or the IRQ control capability, `rdx` = offset | id << 16):
    /// the 32 bits at offset `rdx` (4-aligned, below 4096) of its configuration space
    /// in `rdi`.
    pub const PCI_READ: u64 = 6;
    /// With a PCI device: write `r10` at offset `rdx`. The kernel keeps the BARs, the
    /// rest of the header and the MSI/MSI-X capabilities (`NoRights`); of the command
    /// register only memory and I/O decoding, bus mastering and INTx-disable change.
    pub const PCI_WRITE: u64 = 7;
    /// With a PCI device: BAR `rdx` (0..6) decoded and sized: `rdi` = base, `rsi` =
    /// size in bytes (0: none), `rdx` = 1 for I/O ports, 0 for memory.
    pub const PCI_BAR: u64 = 8;
    /// With a PCI device: a message-signalled interrupt for MSI-X table entry `rdx`,
    /// as an IRQ capability in slot `r10`; `rdi` = its interrupt number (`MSI_FIRST`
    /// and up). The kernel programs the entry (message to the CPU of the thread that
    /// attaches), turns MSI-X on and INTx off; the entry is masked until a thread
    /// attaches. The same entry asked again gets the same number. Errors: `NoMemory`
    /// when every message-signalled interrupt is taken, `InvalidArg` for an entry past
    /// the table, `Unsupported` for a function without MSI-X or whose
    /// table does not fit its BAR (said on the console).
    pub const PCI_MSIX: u64 = 9;
    /// With an IRQ capability: how many times its interrupt was taken, in `rdi`.
    pub const COUNT: u64 = 10;
    /// With a PCI device: let the device reach the caller's pages `rdx ..` (`r10`
    /// pages, at most `mem::MAX_PAGES_PER_CALL`), each at its physical address, for
    /// reading and, where the caller may write, writing. With an IOMMU the device's
    /// DMA reaches nothing else; a page the caller loses leaves the device's reach
    /// too. `rdi` = 1 when DMA is confined, 0 when the machine has no IOMMU (every
    /// frame is reachable: the driver is trusted). `NotMapped` for a page not mapped.
    pub const PCI_DMA_MAP: u64 = 11;
    /// With a PCI device: take physical pages `rdx ..` (`r10` pages) out of its reach.
    pub const PCI_DMA_UNMAP: u64 = 12;
    /// With a PCI device: its MSI capability (one message) as a message-signalled
    /// interrupt, its IRQ capability in slot `r10`; `rdi` = its number. The kernel
    /// programs the message (to the attached thread's CPU), turns MSI on and INTx off.
    /// `Unsupported` without MSI, `BadState` while MSI-X is on.
    pub const PCI_MSI: u64 = 13;
    /// Number of IOAPIC interrupt lines (0..24).
    pub const LINES: u64 = 24;
    /// Message-signalled interrupts are numbered from here, `MSI_LINES` of them, after
    /// the IOAPIC's lines (one number space: an IRQ capability names either).
    pub const MSI_FIRST: u64 = 24;
    pub const MSI_LINES: u64 = 32;
    /// Every interrupt number (IOAPIC lines and message-signalled ones).
    pub const ALL: u64 = MSI_FIRST + MSI_LINES;
}

/// `MACHINE` operations.
pub mod machine {
    /// Exit QEMU through isa-debug-exit with status `(code << 1) | 1`.
    pub const EXIT: u64 = 1;
    /// Measurement: switch address spaces `rdx` times there and back (2 × `rdx` CR3
    /// loads); returns the rdtsc ticks they took in `rdi`. The hardware floor for IPC.
    pub const MEASURE_CR3: u64 = 2;
    /// Turn the kernel's IPC fastpath off (`rdx` = 0) or on (1); returns in `rdi` how
    /// many IPCs it has carried since boot. Tests run the same IPCs both ways.
    pub const FASTPATH: u64 = 3;
}

/// Scheduling.
pub mod sched {
    pub const MAX_PRIORITY: u64 = 255;
    pub const ROOT_PRIORITY: u64 = 200;
    pub const DEFAULT_PRIORITY: u64 = 100;
    /// Time slice length in timer ticks.
    pub const SLICE_TICKS: u64 = 10;
    /// Timer tick in microseconds.
    pub const TICK_US: u64 = 1000;
}

/// IPC: registers, tags, timeouts and the UTCB.
///
/// Registers of the five IPC calls (`IPC_SEND`, `IPC_RECV`, `IPC_CALL`, `IPC_REPLY`,
/// `IPC_REPLY_WAIT`):
///
/// | reg | in | out (after a receive) |
/// |---|---|---|
/// | rax | syscall number | error code |
/// | rdi | destination capability slot | badge of the sender's capability (0 for a reply) |
/// | rsi | receive source: slot of a thread capability, or [`RECV_ANY`] | — |
/// | rdx | timeouts, see [`timeouts`] | — |
/// | r10 | MR0 = message tag | MR0 |
/// | r8, r9, r12, r13, r14, r15 | MR1..MR6 | MR1..MR6 |
///
/// MR7..MR63 live in the UTCB.
pub mod ipc {
    /// Message registers passed in CPU registers (MR0..MR6).
    pub const REG_MRS: usize = 7;
    /// Total message registers (MR0 is the tag).
    pub const MAX_MRS: usize = 64;
    /// Memory pages the typed items of one message may cover together (4 MiB): more is
    /// `TooLong`. Bounds the kernel's work per message (pass more in several).
    pub const MAX_ITEM_PAGES: u64 = 1024;
    /// Receive from any sender.
    pub const RECV_ANY: u64 = u64::MAX;
    /// Largest string one IPC may copy.
    pub const MAX_STRING: u64 = 64 * 1024;

    /// Timeout value meaning "never expire".
    pub const INFINITE: u32 = u32::MAX;
    /// Timeout value meaning "do not wait at all".
    pub const POLL: u32 = 0;

    /// Pack a send timeout and a receive timeout (microseconds; 0 = poll, `INFINITE`).
    pub const fn timeouts(send_us: u32, recv_us: u32) -> u64 {
        (send_us as u64) | ((recv_us as u64) << 32)
    }
    pub const fn send_timeout(t: u64) -> u32 {
        t as u32
    }
    pub const fn recv_timeout(t: u64) -> u32 {
        (t >> 32) as u32
    }
    pub const FOREVER: u64 = timeouts(INFINITE, INFINITE);

    /// MR0: `label` (bits 63..24), typed-item word count (bits 22..16), flags
    /// (bits 15..8), untyped word count (bits 6..0). Untyped words come first
    /// (MR1..MRu), then typed items, two words each (see [`super::fpage`]).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Tag(pub u64);

    /// Tag flag: the message carries a string (see `Utcb::send_buf_*`).
    pub const TAG_STRING: u64 = 1 << 8;
    /// Tag flag (set by the kernel on receive): this message is a fault report.
    pub const TAG_FAULT: u64 = 1 << 9;
    const TAG_KNOWN_FLAGS: u64 = TAG_STRING | TAG_FAULT;

    impl Tag {
        pub const fn new(label: u64, words: u64) -> Tag {
            Tag((label << 24) | (words & 0x7f))
        }
        /// With `items` typed items (2 words each) after the untyped words.
        pub const fn with_items(self, items: u64) -> Tag {
            Tag((self.0 & !(0x7f << 16)) | (((items * 2) & 0x7f) << 16))
        }
        /// Words taken by typed items.
        pub const fn typed(self) -> u64 {
            (self.0 >> 16) & 0x7f
        }
        pub const fn with_string(self) -> Tag {
            Tag(self.0 | TAG_STRING)
        }
        pub const fn label(self) -> u64 {
            self.0 >> 24
        }
        pub const fn words(self) -> u64 {
            self.0 & 0x7f
        }
        pub const fn has_string(self) -> bool {
            self.0 & TAG_STRING != 0
        }
        pub const fn is_fault(self) -> bool {
            self.0 & TAG_FAULT != 0
        }
        /// A tag is valid when its words fit the message registers, typed items come in
        /// pairs, and no unknown flag or reserved bit is set.
        pub const fn is_valid(self) -> bool {
            self.words() + self.typed() < MAX_MRS as u64
                && self.typed().is_multiple_of(2)
                && (self.0 & 0x80_0080) == 0
                && (self.0 & 0xff00 & !TAG_KNOWN_FLAGS) == 0
        }
        /// Register-only: no flags, no typed items, at most 6 words (the fastpath's shape).
        /// (No flag, no typed word and no reserved bit is set, and the word count is below
        /// `REG_MRS`: all that is one compare of the low 24 bits.)
        #[inline(always)]
        pub const fn is_short(self) -> bool {
            (self.0 & 0xff_ffff) < REG_MRS as u64
        }
        /// Register words and perhaps a string, nothing else: the IPC fastpath's shape.
        #[inline(always)]
        pub const fn is_short_or_string(self) -> bool {
            (self.0 & 0xff_ffff & !TAG_STRING) < REG_MRS as u64
        }
    }

    /// Labels of messages the kernel synthesises.
    pub mod label {
        /// A user thread faulted. MR1 = fault kind (see [`super::fault`]), MR2 = faulting
        /// address (CR2 for page faults), MR3 = instruction pointer, MR4 = error code.
        /// The message arrives with the badge given to `SET_FAULT_HANDLER`, so the handler
        /// knows which thread faulted. Replying resumes the thread (at MR1 if nonzero,
        /// else where it faulted); not replying leaves it stopped.
        pub const FAULT: u64 = 0xFFF0;
        /// A page fault for the thread's pager: MR1 = address, MR2 = access
        /// (`mem::READ/WRITE/EXEC`, plus `PRESENT` when the page was there and the
        /// access broke its rights), MR3 = instruction pointer. The pager answers with a
        /// map item (the faulting thread's receive window is its whole address space);
        /// the thread retries the access. An answer without a map item hands the fault to
        /// the thread's fault handler (or stops the thread).
        pub const PAGE_FAULT: u64 = 0xFFF2;
        /// An interrupt: MR1 = line. The line stays masked until `irq::ACK`.
        pub const IRQ: u64 = 0xFFF1;
        /// Bit in a page fault's access word: a protection fault on a present page.
        pub const PRESENT: u64 = 1 << 8;
    }

    /// Fault kinds (MR1 of a fault message).
    pub mod fault {
        pub const PAGE_FAULT: u64 = 14;
        pub const GENERAL_PROTECTION: u64 = 13;
        pub const INVALID_OPCODE: u64 = 6;
        pub const DIVIDE_ERROR: u64 = 0;
        pub const OTHER: u64 = 0xFF;
    }
}

/// Flexpages: a power-of-two, aligned range of memory, I/O ports or capability slots,
/// with rights, in one word; and typed message items that map or grant them.
///
/// ```text
/// bits 63..12  base: memory address (page aligned) | first port | first slot
/// bits 10..5   log2 of the size: bytes (>= 12) | ports | slots
/// bits  4..2   rights: memory READ/WRITE/EXEC; capabilities: the rights mask
/// bits  1..0   kind: 0 memory, 1 I/O ports, 2 capabilities
/// ```
///
/// A typed item is two message words: the flexpage (in the sender's space), then a
/// control word: bit 0 = grant (the sender loses it) instead of map; bits 63..12 =
/// hot spot, which picks where in a larger receive window the flexpage lands
/// (`window.base + (hotspot mod window.size)`, aligned down to the flexpage's size).
/// The receiver finds each item rewritten to the flexpage where it landed.
pub mod fpage {
    pub const MEM: u64 = 0;
    pub const IO: u64 = 1;
    pub const CAP: u64 = 2;
    /// Control word bit: grant instead of map.
    pub const GRANT: u64 = 1;
    /// `UNMAP` flag: also take the rights from the caller's own mappings.
    pub const UNMAP_SELF: u64 = 1;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Fpage(pub u64);

    impl Fpage {
        pub const fn new(kind: u64, base: u64, log2: u64, rights: u64) -> Fpage {
            Fpage((base << 12) | ((log2 & 0x3f) << 5) | ((rights & 7) << 2) | (kind & 3))
        }
        /// Memory at `addr` (page aligned), 2^log2 bytes.
        pub const fn mem(addr: u64, log2: u64, rights: u64) -> Fpage {
            Fpage((addr & !0xfff) | ((log2 & 0x3f) << 5) | ((rights & 7) << 2) | MEM)
        }
        pub const fn io(port: u64, log2: u64) -> Fpage {
            Fpage::new(IO, port, log2, 7)
        }
        pub const fn caps(slot: u64, log2: u64, rights: u64) -> Fpage {
            Fpage::new(CAP, slot, log2, rights)
        }
        /// The whole user address space (a receive window).
        pub const fn all_mem() -> Fpage {
            Fpage::mem(0, 47, crate::mem::RIGHTS_MASK)
        }
        pub const fn kind(self) -> u64 {
            self.0 & 3
        }
        pub const fn rights(self) -> u64 {
            (self.0 >> 2) & 7
        }
        pub const fn log2(self) -> u64 {
            (self.0 >> 5) & 0x3f
        }
        /// Memory: the address; I/O: the first port; capabilities: the first slot.
        pub const fn base(self) -> u64 {
            if self.kind() == MEM {
                self.0 & !0xfff
            } else {
                self.0 >> 12
            }
        }
        /// Bytes, ports or slots covered (0 for a malformed size).
        pub const fn size(self) -> u64 {
            if self.log2() >= 64 {
                0
            } else {
                1 << self.log2()
            }
        }
        /// Well formed: a known kind, aligned base, sane size for the kind.
        pub const fn is_valid(self) -> bool {
            let (k, l) = (self.kind(), self.log2());
            match k {
                MEM => l >= 12 && l <= 47 && self.base().is_multiple_of(1 << l),
                IO => l <= 16 && self.base().is_multiple_of(1 << l) && self.base() + (1 << l) <= 65536,
                CAP => l <= 10 && self.base().is_multiple_of(1 << l),
                _ => false,
            }
        }
        pub const fn with_rights(self, rights: u64) -> Fpage {
            Fpage((self.0 & !(7 << 2)) | ((rights & 7) << 2))
        }
    }
}

/// What a program finds at the pointer in `rdi` when its first thread starts (the
/// kernel writes it for root; root's loader writes it for every other program).
#[repr(C)]
pub struct StartInfo {
    pub magic: u64,
    /// The UTCB of the first thread.
    pub utcb: u64,
    /// The boot image mapped read-only (root only; 0 elsewhere).
    pub bootfs_addr: u64,
    pub bootfs_len: u64,
    /// Command line (program name and arguments, separated by spaces).
    pub args_len: u64,
    pub args: [u8; START_ARGS_MAX],
}

pub const START_MAGIC: u64 = u64::from_le_bytes(*b"SCIONST1");
pub const START_ARGS_MAX: usize = 472;
const _: () = assert!(core::mem::size_of::<StartInfo>() == 512);

/// User Thread Control Block: one page per thread, mapped in the thread's task at the
/// address given to `THREAD_CREATE`. The kernel reads and writes it directly.
#[repr(C)]
pub struct Utcb {
    /// Message registers. MR0..MR6 travel in CPU registers; the kernel uses `mr[7..]`.
    pub mr: [u64; ipc::MAX_MRS],
    /// Receive buffer for strings (the receiver's consent): address and length.
    pub recv_buf_addr: u64,
    pub recv_buf_len: u64,
    /// String to send with a message whose tag has `TAG_STRING`.
    pub send_buf_addr: u64,
    pub send_buf_len: u64,
    /// Set by the kernel on receive: length of the string received (0 if none).
    pub recv_str_len: u64,
    /// Receive windows for typed items: a memory flexpage (where mapped pages may land),
    /// a capability flexpage (which slots may be filled), an I/O flexpage (which ports
    /// may be received). 0 = no window: items of that kind are refused (`NoWindow`).
    pub recv_mem: u64,
    pub recv_caps: u64,
    pub recv_io: u64,
    /// Free for the user runtime (thread-local pointer and such).
    pub user: [u64; 8],
}

const _: () = assert!(core::mem::size_of::<Utcb>() <= layout::PAGE_SIZE as usize);

/// Offsets of UTCB fields, for the kernel's direct access.
pub mod utcb_off {
    pub const MR: usize = 0;
    pub const RECV_BUF_ADDR: usize = 64 * 8;
    pub const RECV_BUF_LEN: usize = RECV_BUF_ADDR + 8;
    pub const SEND_BUF_ADDR: usize = RECV_BUF_ADDR + 16;
    pub const SEND_BUF_LEN: usize = RECV_BUF_ADDR + 24;
    pub const RECV_STR_LEN: usize = RECV_BUF_ADDR + 32;
    /// `user[0]`: the kernel stores the UTCB's own address here; with FS based at the
    /// UTCB, `fs:[USER]` finds it.
    pub const RECV_MEM: usize = RECV_BUF_ADDR + 40;
    pub const RECV_CAPS: usize = RECV_BUF_ADDR + 48;
    pub const RECV_IO: usize = RECV_BUF_ADDR + 56;
    pub const USER: usize = RECV_BUF_ADDR + 64;
}

#[cfg(test)]
mod tests;
