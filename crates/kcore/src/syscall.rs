//! System calls as values: [`Call::decode`] turns the argument registers of a system
//! call into a [`Call`], making every check that needs no kernel state (numbers,
//! operation codes, flags, alignment, address ranges, slot ranges, IPC tags). The
//! kernel then looks up capabilities and partner state for the decoded call and
//! invokes it; nothing in the kernel reads a raw argument register again.
//!
//! Register use (`docs/syscalls.md`): `rax` = number, then `rdi`, `rsi`, `rdx`, `r10`,
//! `r8` = arguments 0..4.

use abi::fpage::{self, Fpage};
use abi::ipc::Tag;
use abi::layout::{is_user_range, PAGE_SIZE, USER_END};
use abi::{cap, irq, machine, mem as m, sys, tctl, Error};

/// A capability slot number as the caller gave it (looked up by the kernel).
pub type Slot = u64;

/// The argument registers of one system call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Regs {
    pub rax: u64,
    pub rdi: u64,
    pub rsi: u64,
    pub rdx: u64,
    pub r10: u64,
    pub r8: u64,
}

/// One decoded system call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Null,
    /// `KERNEL_INFO(what)`: 0 version, ticks, TSC rate, quota, free frames; 1 the TSC
    /// ticks spent halted; 2 the CPUs (`abi::KERNEL_INFO_SMP`); 4 the kernel's tables
    /// (`abi::KERNEL_INFO_TABLES`); 5 where the frames are (`abi::KERNEL_INFO_MEMORY`). Any other `what` (but `KERNEL_INFO_CPU`, `CpuInfo`)
    /// is `InvalidArg`.
    KernelInfo {
        what: u64,
    },
    /// `KERNEL_INFO(abi::KERNEL_INFO_CPU, cpu)`: one CPU's counts.
    CpuInfo {
        cpu: u64,
    },
    DebugPut {
        ptr: u64,
        len: usize,
        /// `abi::DEBUG_PUT_SCREEN`: to the screen only.
        screen_only: bool,
    },
    /// `IPC_SEND` / `IPC_CALL` (the tag is valid; the message is read from the
    /// caller's registers and UTCB by the IPC path).
    Send {
        dest: Slot,
        call: bool,
        timeouts: u64,
    },
    Recv {
        from: Slot,
        timeout: u32,
    },
    Reply,
    ReplyWait {
        from: Slot,
        timeout: u32,
    },
    /// `YIELD`, and `SLEEP(0)`.
    Yield,
    Sleep {
        us: u64,
    },
    CapCopy {
        src: Slot,
        dst: Slot,
        rights: u64,
        badge: u64,
    },
    CapDelete {
        slot: Slot,
    },
    CapInfo {
        slot: Slot,
    },
    CapGive {
        task: Slot,
        src: Slot,
        dst: Slot,
        rights: u64,
    },
    /// `dst` is a slot number in range.
    TaskCreate {
        dst: Slot,
        quota: u64,
    },
    /// `dst` in range; `utcb` a page-aligned user page; `prio` at most 255 (the
    /// kernel checks it against the caller's).
    ThreadCreate {
        task: Slot,
        dst: Slot,
        utcb: u64,
        prio: u8,
    },
    ThreadControl {
        thread: Slot,
        op: ThreadOp,
    },
    /// Both ranges are page-aligned user ranges of `pages` (1..=MAX) pages; `rights`
    /// include READ.
    MemMap {
        task: Slot,
        src: u64,
        dst: u64,
        pages: u64,
        rights: u64,
        grant: bool,
    },
    Unmap {
        what: UnmapRange,
        include_self: bool,
    },
    IrqControl {
        cap: Slot,
        op: IrqOp,
    },
    TaskInfo {
        task: Slot,
    },
    /// `dst` is a slot number in range.
    SaveReply {
        dst: Slot,
    },
    ThreadExit,
    TaskDestroy {
        task: Slot,
    },
    Machine {
        cap: Slot,
        op: MachineOp,
    },
}

/// `THREAD_CONTROL` operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadOp {
    /// Start a stopped thread, at a new entry point if one is given (user addresses;
    /// `rsp` may be the end of the user range).
    Start {
        entry: Option<Entry>,
    },
    Stop,
    SetPriority(u8),
    /// A thread capability (with SEND) and the badge of the messages; `None` clears.
    SetFaultHandler(Option<(Slot, u64)>),
    SetPager(Option<(Slot, u64)>),
    ReadState,
    Destroy,
    /// The slot of the thread that takes over this one's endpoint.
    Succeed(Slot),
    /// The CPU to run on (the kernel checks it is running).
    SetCpu(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub rip: u64,
    pub rsp: u64,
    pub arg: u64,
}

/// What `UNMAP` covers, with the rights to take away (never empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnmapRange {
    /// User pages `[lo, hi)`, both page-aligned, `hi <= USER_END`.
    Mem { lo: u64, hi: u64, rights: u64 },
    /// Ports `[lo, hi)`, `hi <= 65536`.
    Io { lo: u32, hi: u32 },
    /// Capability slots `[lo, hi)`, `hi <= SLOTS`.
    Caps { lo: u64, hi: u64, rights: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrqOp {
    /// With the IRQ control capability: a capability for `line` (below
    /// `irq::LINES`; the kernel checks the lines the machine has) in slot `dst`.
    Create {
        line: u8,
        dst: Slot,
    },
    Attach {
        badge: u64,
    },
    Ack,
    Detach,
    /// With the IRQ control capability: a capability for PCI function `id` in `dst`.
    PciCreate {
        id: u16,
        dst: Slot,
    },
    /// Configuration space: read at `off` (of function `id` when through the IRQ
    /// control capability), write `value` at `off`.
    PciRead {
        off: u16,
        id: u16,
    },
    PciWrite {
        off: u16,
        value: u32,
    },
    PciBar(u8),
    /// A message-signalled interrupt for MSI-X table entry `entry`, its capability in `dst`.
    PciMsix {
        entry: u16,
        dst: Slot,
    },
    /// How many times the interrupt was taken.
    Count,
    /// The MSI capability as an interrupt, its capability in `dst`.
    PciMsi {
        dst: Slot,
    },
    /// Map (the caller's pages at `addr`) or unmap (physical pages at `addr`) for the
    /// device's DMA.
    PciDma {
        map: bool,
        addr: u64,
        pages: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MachineOp {
    Exit(u32),
    /// Round trips of two CR3 loads, at most a million.
    MeasureCr3(u64),
    /// Turn the IPC fastpath on or off; returns how many IPCs it has carried.
    Fastpath(bool),
}

/// Largest `MEASURE_CR3` count.
pub const MEASURE_CR3_MAX: u64 = 1_000_000;
/// Largest `DEBUG_PUT`.
pub const DEBUG_PUT_MAX: u64 = 4096;

fn slot(s: u64) -> Result<Slot, Error> {
    if s < cap::SLOTS {
        Ok(s)
    } else {
        Err(Error::InvalidCap)
    }
}

fn tag(r: &Regs) -> Result<(), Error> {
    if Tag(r.r10).is_valid() {
        Ok(())
    } else {
        Err(Error::InvalidArg)
    }
}

/// `n` pages from `va`: a count in range, page-aligned, all user addresses.
fn pages(va: u64, n: u64) -> Result<(), Error> {
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

/// A fault handler or pager argument: `u64::MAX` clears.
fn handler(slot: u64, badge: u64) -> Option<(Slot, u64)> {
    (slot != u64::MAX).then_some((slot, badge))
}

impl Call {
    /// Decode and check a system call's registers. Errors are the ones the call
    /// answers, in the order `docs/syscalls.md` gives.
    #[inline(always)]
    pub fn decode(r: &Regs) -> Result<Call, Error> {
        let (a0, a1, a2, a3, a4) = (r.rdi, r.rsi, r.rdx, r.r10, r.r8);
        Ok(match r.rax {
            sys::NULL => Call::Null,
            sys::KERNEL_INFO if a0 == abi::KERNEL_INFO_CPU => Call::CpuInfo { cpu: a1 },
            sys::KERNEL_INFO
                if a0 <= abi::KERNEL_INFO_SMP || a0 == abi::KERNEL_INFO_TABLES || a0 == abi::KERNEL_INFO_MEMORY =>
            {
                Call::KernelInfo { what: a0 }
            }
            sys::KERNEL_INFO => return Err(Error::InvalidArg),
            sys::DEBUG_PUT => {
                if a1 > DEBUG_PUT_MAX {
                    return Err(Error::TooLong);
                }
                if a2 > abi::DEBUG_PUT_SCREEN {
                    return Err(Error::InvalidArg);
                }
                Call::DebugPut { ptr: a0, len: a1 as usize, screen_only: a2 == abi::DEBUG_PUT_SCREEN }
            }
            sys::IPC_SEND | sys::IPC_CALL => {
                tag(r)?;
                // A call must wait for its reply: 0 ("do not wait") cannot succeed.
                if r.rax == sys::IPC_CALL && abi::ipc::recv_timeout(a2) == abi::ipc::POLL {
                    return Err(Error::InvalidArg);
                }
                Call::Send { dest: a0, call: r.rax == sys::IPC_CALL, timeouts: a2 }
            }
            sys::IPC_RECV => Call::Recv { from: a1, timeout: abi::ipc::recv_timeout(a2) },
            sys::IPC_REPLY => {
                tag(r)?;
                Call::Reply
            }
            sys::IPC_REPLY_WAIT => {
                tag(r)?;
                Call::ReplyWait { from: a1, timeout: abi::ipc::recv_timeout(a2) }
            }
            sys::YIELD => Call::Yield,
            sys::SLEEP if a0 == 0 => Call::Yield,
            sys::SLEEP => Call::Sleep { us: a0 },
            sys::CAP_COPY => Call::CapCopy { src: a0, dst: a1, rights: a2, badge: a3 },
            sys::CAP_DELETE => Call::CapDelete { slot: a0 },
            sys::CAP_INFO => Call::CapInfo { slot: a0 },
            sys::CAP_GIVE => Call::CapGive { task: a0, src: a1, dst: a2, rights: a3 },
            sys::TASK_CREATE => Call::TaskCreate { dst: slot(a0)?, quota: a1 },
            sys::THREAD_CREATE => {
                let dst = slot(a1)?;
                if !a2.is_multiple_of(PAGE_SIZE) {
                    return Err(Error::Misaligned);
                }
                if !is_user_range(a2, PAGE_SIZE) {
                    return Err(Error::BadAddress);
                }
                let prio = u8::try_from(a3).map_err(|_| Error::InvalidArg)?;
                Call::ThreadCreate { task: a0, dst, utcb: a2, prio }
            }
            sys::THREAD_CONTROL => Call::ThreadControl { thread: a0, op: ThreadOp::decode(a1, a2, a3, a4)? },
            sys::MEM_MAP => {
                pages(a1, a3)?;
                pages(a2, a3)?;
                if a4 & !(m::RIGHTS_MASK | m::GRANT) != 0 || a4 & m::READ == 0 {
                    return Err(Error::InvalidArg);
                }
                Call::MemMap {
                    task: a0,
                    src: a1,
                    dst: a2,
                    pages: a3,
                    rights: a4 & m::RIGHTS_MASK,
                    grant: a4 & m::GRANT != 0,
                }
            }
            sys::UNMAP => {
                let fp = Fpage(a0);
                if !fp.is_valid() || a1 & !fpage::UNMAP_SELF != 0 {
                    return Err(Error::InvalidArg);
                }
                Call::Unmap { what: UnmapRange::decode(fp)?, include_self: a1 & fpage::UNMAP_SELF != 0 }
            }
            sys::IRQ_CONTROL => Call::IrqControl { cap: a0, op: IrqOp::decode(a1, a2, a3)? },
            sys::TASK_INFO => Call::TaskInfo { task: a0 },
            sys::SAVE_REPLY => Call::SaveReply { dst: slot(a0)? },
            sys::THREAD_EXIT => Call::ThreadExit,
            sys::TASK_DESTROY => Call::TaskDestroy { task: a0 },
            sys::MACHINE => Call::Machine {
                cap: a0,
                op: match a1 {
                    machine::EXIT => MachineOp::Exit(a2 as u32),
                    machine::MEASURE_CR3 => MachineOp::MeasureCr3(a2.min(MEASURE_CR3_MAX)),
                    machine::FASTPATH if a2 <= 1 => MachineOp::Fastpath(a2 == 1),
                    _ => return Err(Error::InvalidArg),
                },
            },
            _ => return Err(Error::NoSys),
        })
    }
}

impl ThreadOp {
    fn decode(op: u64, a: u64, b: u64, c: u64) -> Result<ThreadOp, Error> {
        Ok(match op {
            tctl::START => {
                if (a != 0 && !is_user_range(a, 1)) || (b != 0 && !is_user_range(b - 1, 1)) {
                    return Err(Error::InvalidArg);
                }
                ThreadOp::Start { entry: (a != 0).then_some(Entry { rip: a, rsp: b, arg: c }) }
            }
            tctl::STOP => ThreadOp::Stop,
            tctl::SET_PRIORITY => ThreadOp::SetPriority(u8::try_from(a).map_err(|_| Error::InvalidArg)?),
            tctl::SET_FAULT_HANDLER => ThreadOp::SetFaultHandler(handler(a, b)),
            tctl::SET_PAGER => ThreadOp::SetPager(handler(a, b)),
            tctl::READ_STATE => ThreadOp::ReadState,
            tctl::DESTROY => ThreadOp::Destroy,
            tctl::SUCCEED => ThreadOp::Succeed(a),
            tctl::SET_CPU => ThreadOp::SetCpu(a),
            _ => return Err(Error::InvalidArg),
        })
    }
}

impl UnmapRange {
    fn decode(fp: Fpage) -> Result<UnmapRange, Error> {
        let (base, size) = (fp.base(), fp.size());
        Ok(match fp.kind() {
            fpage::MEM => {
                let hi = base.checked_add(size).filter(|e| *e <= USER_END).ok_or(Error::BadAddress)?;
                let rights = if fp.rights() == 0 { m::RIGHTS_MASK } else { fp.rights() };
                UnmapRange::Mem { lo: base, hi, rights }
            }
            fpage::IO => {
                // A valid I/O flexpage lies within the 64 Ki ports.
                let hi = base.saturating_add(size).min(1 << 16);
                UnmapRange::Io { lo: base.min(1 << 16) as u32, hi: hi as u32 }
            }
            _ => {
                let rights = if fp.rights() == 0 { u8::MAX as u64 } else { fp.rights() };
                let hi = base.saturating_add(size).min(cap::SLOTS);
                UnmapRange::Caps { lo: base.min(hi), hi, rights }
            }
        })
    }
}

impl IrqOp {
    fn decode(op: u64, a: u64, b: u64) -> Result<IrqOp, Error> {
        Ok(match op {
            irq::CREATE => {
                if a >= irq::LINES {
                    return Err(Error::InvalidArg);
                }
                IrqOp::Create { line: a as u8, dst: b }
            }
            irq::ATTACH => IrqOp::Attach { badge: a },
            irq::ACK => IrqOp::Ack,
            irq::DETACH => IrqOp::Detach,
            irq::PCI_CREATE if a <= u16::MAX as u64 => IrqOp::PciCreate { id: a as u16, dst: b },
            irq::PCI_READ if a & 3 == 0 && a & 0xffff < 4096 && a >> 32 == 0 => {
                IrqOp::PciRead { off: a as u16, id: (a >> 16) as u16 }
            }
            irq::PCI_WRITE if a & 3 == 0 && a < 4096 && b <= u32::MAX as u64 => {
                IrqOp::PciWrite { off: a as u16, value: b as u32 }
            }
            irq::PCI_BAR if a < 6 => IrqOp::PciBar(a as u8),
            irq::PCI_MSIX if a < 2048 => IrqOp::PciMsix { entry: a as u16, dst: b },
            irq::COUNT => IrqOp::Count,
            irq::PCI_MSI => IrqOp::PciMsi { dst: b },
            irq::PCI_DMA_MAP | irq::PCI_DMA_UNMAP
                if a & 0xfff == 0 && (1..=abi::mem::MAX_PAGES_PER_CALL).contains(&b) && a < 1 << 47 =>
            {
                IrqOp::PciDma { map: op == irq::PCI_DMA_MAP, addr: a, pages: b }
            }
            _ => return Err(Error::InvalidArg),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi::layout::USER_MIN;

    fn regs(rax: u64, a: [u64; 5]) -> Regs {
        Regs { rax, rdi: a[0], rsi: a[1], rdx: a[2], r10: a[3], r8: a[4] }
    }
    fn dec(rax: u64, a: [u64; 5]) -> Result<Call, Error> {
        Call::decode(&regs(rax, a))
    }

    #[test]
    fn numbers() {
        assert_eq!(dec(sys::NULL, [0; 5]), Ok(Call::Null));
        assert_eq!(dec(17, [0; 5]), Err(Error::NoSys), "retired number");
        assert_eq!(dec(sys::COUNT, [0; 5]), Err(Error::NoSys));
        assert_eq!(dec(u64::MAX, [0; 5]), Err(Error::NoSys));
        assert_eq!(dec(sys::SLEEP, [0; 5]), Ok(Call::Yield));
        assert_eq!(dec(sys::SLEEP, [7, 0, 0, 0, 0]), Ok(Call::Sleep { us: 7 }));
        assert_eq!(dec(sys::KERNEL_INFO, [1, 0, 0, 0, 0]), Ok(Call::KernelInfo { what: 1 }));
        assert_eq!(dec(sys::KERNEL_INFO, [2, 0, 0, 0, 0]), Ok(Call::KernelInfo { what: 2 }));
        assert_eq!(dec(sys::KERNEL_INFO, [3, 5, 0, 0, 0]), Ok(Call::CpuInfo { cpu: 5 }));
        assert_eq!(dec(sys::KERNEL_INFO, [0, 0, 0, 0, 0]), Ok(Call::KernelInfo { what: 0 }));
        assert_eq!(dec(sys::KERNEL_INFO, [4, 0, 0, 0, 0]), Ok(Call::KernelInfo { what: 4 }));
        assert_eq!(dec(sys::KERNEL_INFO, [5, 0, 0, 0, 0]), Ok(Call::KernelInfo { what: 5 }));
    }

    #[test]
    fn kernel_info_unknown_what() {
        // A `what` the kernel does not know is refused, not answered with what=0's data.
        for what in [6, 0x100, 1 << 32, u64::MAX] {
            assert_eq!(dec(sys::KERNEL_INFO, [what, 0, 0, 0, 0]), Err(Error::InvalidArg), "what = {what:#x}");
        }
    }

    #[test]
    fn every_number_decodes_or_says_nosys() {
        // All-zero arguments: each number either decodes or gives a specific error,
        // never a panic; numbers past COUNT are NoSys.
        for n in 0..sys::COUNT + 4 {
            for a in [[0u64; 5], [u64::MAX; 5], [1, 2, 3, 4, 5]] {
                let r = dec(n, a);
                if n >= sys::COUNT || n == 17 {
                    assert_eq!(r, Err(Error::NoSys));
                }
            }
        }
    }

    #[test]
    fn ipc_tags() {
        let bad = Tag(1 << 7).0; // untyped count over 64 words
        assert!(!Tag(bad).is_valid());
        for n in [sys::IPC_SEND, sys::IPC_CALL, sys::IPC_REPLY, sys::IPC_REPLY_WAIT] {
            assert_eq!(dec(n, [0, 0, 0, bad, 0]), Err(Error::InvalidArg), "number {n}");
        }
        // A receive carries no tag.
        assert!(dec(sys::IPC_RECV, [0, 3, 5 << 32, bad, 0]).is_ok());
        assert_eq!(dec(sys::IPC_RECV, [0, 3, 5 << 32, 0, 0]), Ok(Call::Recv { from: 3, timeout: 5 }));
        assert_eq!(
            dec(sys::IPC_CALL, [4, 0, 9 | (1 << 32), 0, 0]),
            Ok(Call::Send { dest: 4, call: true, timeouts: 9 | (1 << 32) })
        );
        // A call whose reply may not be waited for is refused; a send may poll.
        assert_eq!(dec(sys::IPC_CALL, [4, 0, 0xFFFF_FFFF, 0, 0]), Err(Error::InvalidArg));
        assert!(dec(sys::IPC_SEND, [4, 0, 0, 0, 0]).is_ok());
    }

    #[test]
    fn debug_put_limit() {
        assert_eq!(
            dec(sys::DEBUG_PUT, [0x1000, DEBUG_PUT_MAX, 0, 0, 0]),
            Ok(Call::DebugPut { ptr: 0x1000, len: 4096, screen_only: false })
        );
        assert_eq!(dec(sys::DEBUG_PUT, [0x1000, DEBUG_PUT_MAX + 1, 0, 0, 0]), Err(Error::TooLong));
        assert_eq!(dec(sys::DEBUG_PUT, [0x1000, u64::MAX, 0, 0, 0]), Err(Error::TooLong));
        assert_eq!(
            dec(sys::DEBUG_PUT, [0x1000, 5, abi::DEBUG_PUT_SCREEN, 0, 0]),
            Ok(Call::DebugPut { ptr: 0x1000, len: 5, screen_only: true })
        );
        assert_eq!(dec(sys::DEBUG_PUT, [0x1000, 5, 2, 0, 0]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::DEBUG_PUT, [0x1000, 5, u64::MAX, 0, 0]), Err(Error::InvalidArg));
    }

    #[test]
    fn thread_create_checks() {
        let u = USER_MIN + 0x10_0000;
        assert_eq!(
            dec(sys::THREAD_CREATE, [1, 2, u, 100, 0]),
            Ok(Call::ThreadCreate { task: 1, dst: 2, utcb: u, prio: 100 })
        );
        assert_eq!(dec(sys::THREAD_CREATE, [1, cap::SLOTS, u, 100, 0]), Err(Error::InvalidCap));
        assert_eq!(dec(sys::THREAD_CREATE, [1, 2, u + 8, 100, 0]), Err(Error::Misaligned));
        assert_eq!(dec(sys::THREAD_CREATE, [1, 2, USER_END, 100, 0]), Err(Error::BadAddress));
        assert_eq!(dec(sys::THREAD_CREATE, [1, 2, 0, 100, 0]), Err(Error::BadAddress));
        assert_eq!(dec(sys::THREAD_CREATE, [1, 2, u, 256, 0]), Err(Error::InvalidArg));
    }

    #[test]
    fn thread_control_ops() {
        let u = USER_MIN + 0x1000;
        assert_eq!(
            dec(sys::THREAD_CONTROL, [3, tctl::START, u, USER_END, 9]),
            Ok(Call::ThreadControl {
                thread: 3,
                op: ThreadOp::Start { entry: Some(Entry { rip: u, rsp: USER_END, arg: 9 }) }
            })
        );
        assert_eq!(
            dec(sys::THREAD_CONTROL, [3, tctl::START, 0, 0, 0]),
            Ok(Call::ThreadControl { thread: 3, op: ThreadOp::Start { entry: None } })
        );
        assert_eq!(dec(sys::THREAD_CONTROL, [3, tctl::START, 0xffff_8000_0000_0000, u, 0]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::THREAD_CONTROL, [3, tctl::START, u, USER_END + 1, 0]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::THREAD_CONTROL, [3, tctl::SET_PRIORITY, 300, 0, 0]), Err(Error::InvalidArg));
        assert_eq!(
            dec(sys::THREAD_CONTROL, [3, tctl::SET_PAGER, u64::MAX, 5, 0]),
            Ok(Call::ThreadControl { thread: 3, op: ThreadOp::SetPager(None) })
        );
        assert_eq!(
            dec(sys::THREAD_CONTROL, [3, tctl::SET_FAULT_HANDLER, 7, 5, 0]),
            Ok(Call::ThreadControl { thread: 3, op: ThreadOp::SetFaultHandler(Some((7, 5))) })
        );
        assert_eq!(dec(sys::THREAD_CONTROL, [3, 0, 0, 0, 0]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::THREAD_CONTROL, [3, 99, 0, 0, 0]), Err(Error::InvalidArg));
        assert_eq!(
            dec(sys::THREAD_CONTROL, [3, tctl::SUCCEED, 9, 0, 0]),
            Ok(Call::ThreadControl { thread: 3, op: ThreadOp::Succeed(9) })
        );
        assert_eq!(
            dec(sys::THREAD_CONTROL, [3, tctl::SET_CPU, 1, 0, 0]),
            Ok(Call::ThreadControl { thread: 3, op: ThreadOp::SetCpu(1) })
        );
    }

    #[test]
    fn mem_map_checks() {
        let (s, d) = (USER_MIN + 0x10_0000, USER_MIN + 0x20_0000);
        assert_eq!(
            dec(sys::MEM_MAP, [1, s, d, 2, m::READ | m::WRITE | m::GRANT]),
            Ok(Call::MemMap { task: 1, src: s, dst: d, pages: 2, rights: m::READ | m::WRITE, grant: true })
        );
        assert_eq!(dec(sys::MEM_MAP, [1, s, d, 0, m::READ]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::MEM_MAP, [1, s, d, m::MAX_PAGES_PER_CALL + 1, m::READ]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::MEM_MAP, [1, s + 1, d, 1, m::READ]), Err(Error::Misaligned));
        assert_eq!(dec(sys::MEM_MAP, [1, s, d + 1, 1, m::READ]), Err(Error::Misaligned));
        assert_eq!(dec(sys::MEM_MAP, [1, USER_END - PAGE_SIZE, d, 2, m::READ]), Err(Error::BadAddress));
        assert_eq!(dec(sys::MEM_MAP, [1, s, d, 1, m::WRITE]), Err(Error::InvalidArg), "no READ");
        assert_eq!(dec(sys::MEM_MAP, [1, s, d, 1, m::READ | 1 << 12]), Err(Error::InvalidArg));
    }

    #[test]
    fn unmap_ranges() {
        let base = 0x10_0000;
        let fp = Fpage::mem(base, 16, m::WRITE);
        assert_eq!(
            dec(sys::UNMAP, [fp.0, 0, 0, 0, 0]),
            Ok(Call::Unmap {
                what: UnmapRange::Mem { lo: base, hi: base + (1 << 16), rights: m::WRITE },
                include_self: false
            })
        );
        let all = Fpage::mem(base, 12, 0);
        assert!(matches!(
            dec(sys::UNMAP, [all.0, fpage::UNMAP_SELF, 0, 0, 0]),
            Ok(Call::Unmap { what: UnmapRange::Mem { rights: m::RIGHTS_MASK, .. }, include_self: true })
        ));
        assert_eq!(dec(sys::UNMAP, [fp.0, 2, 0, 0, 0]), Err(Error::InvalidArg), "unknown flag");
        let top = Fpage::mem(0, 63, 0);
        if top.is_valid() {
            assert_eq!(dec(sys::UNMAP, [top.0, 0, 0, 0, 0]), Err(Error::BadAddress));
        }
        let io = Fpage::io(0x3f8, 3);
        assert_eq!(
            dec(sys::UNMAP, [io.0, 0, 0, 0, 0]),
            Ok(Call::Unmap { what: UnmapRange::Io { lo: 0x3f8, hi: 0x400 }, include_self: false })
        );
        let caps = Fpage::caps(cap::SLOTS - 2, 4, 0);
        if caps.is_valid() {
            assert!(
                matches!(dec(sys::UNMAP, [caps.0, 0, 0, 0, 0]), Ok(Call::Unmap { what: UnmapRange::Caps { hi, .. }, .. }) if hi == cap::SLOTS)
            );
        }
    }

    #[test]
    fn irq_and_machine_ops() {
        assert_eq!(
            dec(sys::IRQ_CONTROL, [5, irq::CREATE, 4, 9, 0]),
            Ok(Call::IrqControl { cap: 5, op: IrqOp::Create { line: 4, dst: 9 } })
        );
        assert_eq!(dec(sys::IRQ_CONTROL, [5, irq::CREATE, irq::LINES, 9, 0]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::IRQ_CONTROL, [5, 77, 0, 0, 0]), Err(Error::InvalidArg));
        // PCI: ids fit 16 bits, offsets are 4-aligned in 4 KiB, values 32 bits, BARs 0..6,
        // MSI-X entries below 2048 (the table's largest).
        assert_eq!(
            dec(sys::IRQ_CONTROL, [4, irq::PCI_CREATE, 0x18, 9, 0]),
            Ok(Call::IrqControl { cap: 4, op: IrqOp::PciCreate { id: 0x18, dst: 9 } })
        );
        assert_eq!(dec(sys::IRQ_CONTROL, [4, irq::PCI_CREATE, 0x1_0000, 9, 0]), Err(Error::InvalidArg));
        assert_eq!(
            dec(sys::IRQ_CONTROL, [4, irq::PCI_READ, 0x18 << 16 | 0x40, 0, 0]),
            Ok(Call::IrqControl { cap: 4, op: IrqOp::PciRead { off: 0x40, id: 0x18 } })
        );
        assert_eq!(dec(sys::IRQ_CONTROL, [4, irq::PCI_READ, 0x42, 0, 0]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::IRQ_CONTROL, [4, irq::PCI_READ, 0x1000, 0, 0]), Err(Error::InvalidArg));
        assert_eq!(
            dec(sys::IRQ_CONTROL, [4, irq::PCI_WRITE, 0x04, 6, 0]),
            Ok(Call::IrqControl { cap: 4, op: IrqOp::PciWrite { off: 4, value: 6 } })
        );
        assert_eq!(dec(sys::IRQ_CONTROL, [4, irq::PCI_WRITE, 0x04, 1 << 32, 0]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::IRQ_CONTROL, [4, irq::PCI_WRITE, 0x1000, 0, 0]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::IRQ_CONTROL, [4, irq::PCI_BAR, 6, 0, 0]), Err(Error::InvalidArg));
        assert_eq!(
            dec(sys::IRQ_CONTROL, [4, irq::PCI_MSIX, 3, 9, 0]),
            Ok(Call::IrqControl { cap: 4, op: IrqOp::PciMsix { entry: 3, dst: 9 } })
        );
        assert_eq!(dec(sys::IRQ_CONTROL, [4, irq::PCI_MSIX, 2048, 9, 0]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::IRQ_CONTROL, [4, irq::COUNT, 0, 0, 0]), Ok(Call::IrqControl { cap: 4, op: IrqOp::Count }));
        assert_eq!(
            dec(sys::IRQ_CONTROL, [4, irq::PCI_MSI, 0, 9, 0]),
            Ok(Call::IrqControl { cap: 4, op: IrqOp::PciMsi { dst: 9 } })
        );
        // DMA: page-aligned, 1..=1024 pages, below the canonical hole.
        assert_eq!(
            dec(sys::IRQ_CONTROL, [4, irq::PCI_DMA_MAP, 0x1000, 3, 0]),
            Ok(Call::IrqControl { cap: 4, op: IrqOp::PciDma { map: true, addr: 0x1000, pages: 3 } })
        );
        assert_eq!(
            dec(sys::IRQ_CONTROL, [4, irq::PCI_DMA_UNMAP, 0x1000, 1, 0]),
            Ok(Call::IrqControl { cap: 4, op: IrqOp::PciDma { map: false, addr: 0x1000, pages: 1 } })
        );
        assert_eq!(dec(sys::IRQ_CONTROL, [4, irq::PCI_DMA_MAP, 0x1001, 1, 0]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::IRQ_CONTROL, [4, irq::PCI_DMA_MAP, 0x1000, 0, 0]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::IRQ_CONTROL, [4, irq::PCI_DMA_MAP, 0x1000, 1025, 0]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::IRQ_CONTROL, [4, irq::PCI_DMA_MAP, 1 << 47, 1, 0]), Err(Error::InvalidArg));
        assert_eq!(
            dec(sys::MACHINE, [1, machine::MEASURE_CR3, u64::MAX, 0, 0]),
            Ok(Call::Machine { cap: 1, op: MachineOp::MeasureCr3(MEASURE_CR3_MAX) })
        );
        assert_eq!(dec(sys::MACHINE, [1, 0, 0, 0, 0]), Err(Error::InvalidArg));
        assert_eq!(
            dec(sys::MACHINE, [1, machine::FASTPATH, 0, 0, 0]),
            Ok(Call::Machine { cap: 1, op: MachineOp::Fastpath(false) })
        );
        assert_eq!(
            dec(sys::MACHINE, [1, machine::FASTPATH, 1, 0, 0]),
            Ok(Call::Machine { cap: 1, op: MachineOp::Fastpath(true) })
        );
        assert_eq!(dec(sys::MACHINE, [1, machine::FASTPATH, 2, 0, 0]), Err(Error::InvalidArg));
        assert_eq!(dec(sys::SAVE_REPLY, [cap::SLOTS, 0, 0, 0, 0]), Err(Error::InvalidCap));
        assert_eq!(dec(sys::TASK_CREATE, [cap::SLOTS, 0, 0, 0, 0]), Err(Error::InvalidCap));
    }

    #[test]
    fn random_registers_never_panic() {
        // xorshift over every number with wild arguments.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..200_000 {
            let n = next() % (sys::COUNT + 2);
            let a = [next(), next() % 16, next(), next(), next()];
            let _ = dec(n, a);
        }
    }
}
