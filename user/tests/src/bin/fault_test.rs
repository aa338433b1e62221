//! Faults: a user thread's page fault, invalid opcode, divide error, general
//! protection and write to read-only memory reach its fault handler as messages;
//! the handler resumes it past the instruction with its registers intact; a thread
//! without a handler is stopped; a faulting program is removed by root — also one
//! whose main thread faults on the last user page, which no pager can map; the system
//! goes on.
#![no_std]
#![no_main]

use abi::ipc::fault;
use abi::{cap, rights, tctl, Error};
use core::arch::asm;
use core::sync::atomic::{AtomicU64, Ordering};
use echo_api as echo;
use rt::env::spawn;
use rt::ipc::{self, timeouts, Msg, FOREVER, POLL};
use rt::{sys, thread};
use tests::Checks;

rt::entry!(main);

const MARK: u64 = 0x5C10_0000_0000_0042;
static DONE: AtomicU64 = AtomicU64::new(0);
static REGS_OK: AtomicU64 = AtomicU64::new(0);

/// Each block faults once; the handler resumes after the faulting instruction.
/// r12 carries a mark through every fault to show registers survive.
extern "C" fn faulty(_: u64) -> ! {
    let mut ok = 0u64;
    let code = 0x40_0000u64;
    // SAFETY: every instruction below faults on purpose; the fault handler resumes the
    // thread after it. Registers named are declared as operands or clobbers.
    unsafe {
        let mut r: u64;
        // page fault: read from address 0x10 (3 bytes: mov rax, [rcx])
        asm!("mov r12, {m}", "mov rcx, 0x10", ".byte 0x48, 0x8b, 0x01", "mov {r}, r12",
             m = in(reg) MARK, r = out(reg) r, out("rcx") _, out("rax") _, out("r12") _);
        ok += (r == MARK) as u64;
        // invalid opcode: ud2 (2 bytes)
        asm!("mov r12, {m}", "ud2", "mov {r}, r12", m = in(reg) MARK, r = out(reg) r, out("r12") _);
        ok += (r == MARK) as u64;
        // divide error: div rcx with rcx = 0 (3 bytes)
        asm!("mov r12, {m}", "xor ecx, ecx", "xor edx, edx", "mov eax, 1", ".byte 0x48, 0xf7, 0xf1", "mov {r}, r12",
             m = in(reg) MARK, r = out(reg) r, out("rcx") _, out("rdx") _, out("rax") _, out("r12") _);
        ok += (r == MARK) as u64;
        // general protection: hlt in user mode (1 byte)
        asm!("mov r12, {m}", "hlt", "mov {r}, r12", m = in(reg) MARK, r = out(reg) r, out("r12") _);
        ok += (r == MARK) as u64;
        // write to read-only code (3 bytes: mov [rcx], rax)
        asm!("mov r12, {m}", "mov rcx, {c}", ".byte 0x48, 0x89, 0x01", "mov {r}, r12",
             m = in(reg) MARK, c = in(reg) code, r = out(reg) r, out("rcx") _, out("r12") _);
        ok += (r == MARK) as u64;
    }
    REGS_OK.store(ok, Ordering::SeqCst);
    DONE.store(1, Ordering::SeqCst);
    sys::thread_exit()
}

/// Faults with no handler: it is stopped.
fn orphan(_: u64) {
    // SAFETY: deliberately invalid.
    unsafe { core::ptr::read_volatile(0x20 as *const u64) };
    DONE.store(99, Ordering::SeqCst);
}

fn main() -> i32 {
    let mut c = Checks::new();
    let me = rt::alloc_slot();
    sys::cap_copy(cap::SELF_THREAD, me, rights::SEND, 0).unwrap();

    // Create the faulting thread stopped, name us its handler, then start it.
    let t = rt::alloc_slot();
    sys::thread_create(cap::SELF_TASK, t, thread::alloc_utcb(), thread::my_priority()).unwrap();
    c.eq(sys::thread_set_fault_handler(t, me, 0xFA17), Ok(()), "set a fault handler");
    let stack = alloc_stack();
    sys::thread_start(t, faulty as *const () as u64, stack, 0).unwrap();
    sys::sleep_us(20_000); // let the first fault queue while we are not receiving

    let expect = [
        (fault::PAGE_FAULT, 3, "page fault"),
        (fault::INVALID_OPCODE, 2, "invalid opcode"),
        (fault::DIVIDE_ERROR, 3, "divide error"),
        (fault::GENERAL_PROTECTION, 1, "general protection"),
        (fault::PAGE_FAULT, 3, "write to read-only memory"),
    ];
    for (i, (kind, len, what)) in expect.iter().enumerate() {
        let mut m = Msg::empty();
        let r = ipc::recv(ipc::RECV_ANY, &mut m, timeouts(POLL, 2_000_000));
        c.eq(r, Ok(0xFA17), "fault message with the handler's badge");
        c.check(m.tag().is_fault() && m.label() == abi::ipc::label::FAULT, "message is a fault report");
        c.eq(m.word(1), *kind, what);
        if i == 0 {
            c.eq(m.word(2), 0x10, "page fault address");
            c.eq(m.word(4) & 0x6, 0x4, "user read of a missing page");
        }
        if i == 4 {
            c.eq(m.word(2), 0x40_0000, "faulting write address");
            c.eq(m.word(4) & 0x7, 0x7, "user write to a present page");
        }
        c.eq(sys::thread_read_state(t).map(|s| s.0), Ok(tctl::state::FAULTED), "thread shows as faulted");
        let _ = ipc::reply(&Msg::new(0, &[m.word(3) + len]));
    }
    sys::sleep_us(10_000);
    c.eq(DONE.load(Ordering::SeqCst), 1, "faulting thread ran to its end");
    c.eq(REGS_OK.load(Ordering::SeqCst), 5, "registers intact across every fault");

    // No handler: stopped, and the rest goes on.
    let o = thread::spawn(orphan, 0, thread::my_priority()).unwrap();
    sys::sleep_us(20_000);
    c.eq(sys::thread_read_state(o.slot).map(|s| s.0), Ok(tctl::state::STOPPED), "thread without handler is stopped");
    c.eq(DONE.load(Ordering::SeqCst), 1, "and did not continue");

    // A faulting program is removed by root (its fault handler); others go on.
    let e = rt::alloc_slot_pair();
    let crash = rt::alloc_slot_pair();
    c.check(spawn("echo", e).is_ok(), "spawn echo");
    c.check(spawn("fault_crasher", crash).is_ok(), "spawn a program that faults");
    let gone = tests::wait_until(200, || sys::cap_info(crash) == Err(Error::InvalidCap));
    c.check(gone, "root removed the faulting program");
    // Its main thread reads the user half's last page, which no pager may map: the
    // fault cannot be resolved, and the program must end as well (it waited for ever).
    let last = rt::alloc_slot_pair();
    c.check(spawn("fault_crasher last", last).is_ok(), "spawn a program whose main thread reads the last user page");
    let gone = tests::wait_until(300, || sys::cap_info(last) == Err(Error::InvalidCap));
    c.check(gone, "root removed it (an unresolvable fault ends the program)");
    let mut m = Msg::new(echo::ECHO, &[3]);
    c.eq(ipc::call(e, &mut m, FOREVER), Ok(()), "other programs still run");
    c.finish("fault_test")
}

fn alloc_stack() -> u64 {
    let s = alloc::vec![0u8; 64 * 1024].leak();
    ((s.as_ptr() as u64 + s.len() as u64) & !15) - 8
}

extern crate alloc;
