//! Hostile caller: bad numbers, bad capabilities, bad and kernel pointers, oversized
//! lengths, malformed tags, misaligned UTCBs, faults inside string copies. Each must
//! come back as its documented error, and the kernel must go on serving.
#![no_std]
#![no_main]

extern crate alloc;

use abi::ipc::{self as aipc, Tag};
use abi::layout::MAIN_UTCB;
use abi::{cap, mem, rights, sys as nr, tctl, Error};
use core::sync::atomic::{AtomicU64, Ordering};
use echo_api as echo;
use rt::env::spawn;
use rt::ipc::{self, timeouts, Msg, FOREVER, POLL};
use rt::{sys, thread};
use tests::Checks;

rt::entry!(main);

const KERNEL_PTR: u64 = 0xffff_8000_0000_0000;
const NONCANONICAL: u64 = 0x0000_8000_0000_0000;
const UNMAPPED: u64 = 0x0000_5555_0000_0000;
const CODE: u64 = 0x40_0000;

fn raw(n: u64, a: [u64; 6]) -> Result<(), Error> {
    // SAFETY: the calls made here name no memory of this program that Rust uses,
    // except where the test expects (and checks) a refusal.
    abi::check(unsafe { sys::syscall(n, a[0], a[1], a[2], a[3], a[4], a[5]) }[0])
}

/// Line 7 (no device on q35), granted by the manifest.
const IRQ_LINE: u64 = 7;
static IRQ_SLOT: AtomicU64 = AtomicU64::new(0);
/// What another thread's ATTACH, ACK and DETACH answered (0 = Ok, else the error).
static IRQ_OTHER: [AtomicU64; 3] = [AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)];

fn code(r: Result<(), Error>) -> u64 {
    r.err().map_or(0, |e| e as u64)
}

fn irq_intruder(_: u64) {
    let s = IRQ_SLOT.load(Ordering::SeqCst);
    IRQ_OTHER[1].store(code(sys::irq_ack(s)), Ordering::SeqCst);
    IRQ_OTHER[2].store(code(sys::irq_detach(s)), Ordering::SeqCst);
    IRQ_OTHER[0].store(code(sys::irq_attach(s, 2)), Ordering::SeqCst);
}

/// One thread per interrupt line: another thread holding the same capability can
/// neither take the line over nor end or acknowledge the attachment.
fn irq_ownership(c: &mut Checks) {
    let s = rt::alloc_slot();
    IRQ_SLOT.store(s, Ordering::SeqCst);
    c.eq(rt::env::irq(IRQ_LINE, s), Ok(()), "an IRQ capability for line 7");
    c.eq(sys::irq_ack(s), Err(Error::BadState), "ACK before anyone attached");
    c.eq(sys::irq_attach(s, 1), Ok(()), "ATTACH");
    c.eq(sys::irq_attach(s, 3), Ok(()), "ATTACH again by the same thread (a new badge)");
    let t = thread::spawn(irq_intruder, 0, thread::my_priority());
    c.check(
        t.is_ok() && tests::wait_until(100, || IRQ_OTHER[0].load(Ordering::SeqCst) != u64::MAX),
        "another thread of the task tries the line",
    );
    let bs = Error::BadState as u64;
    c.eq(
        IRQ_OTHER.iter().map(|a| a.load(Ordering::SeqCst)).collect::<alloc::vec::Vec<_>>(),
        [bs, bs, bs].into(),
        "its ATTACH, ACK and DETACH are refused",
    );
    c.eq(sys::irq_ack(s), Ok(()), "the attached thread still ACKs");
    c.eq(sys::irq_detach(s), Ok(()), "and DETACHes");
    IRQ_OTHER[0].store(u64::MAX, Ordering::SeqCst);
    let t = thread::spawn(irq_intruder, 0, thread::my_priority());
    c.check(
        t.is_ok() && tests::wait_until(100, || IRQ_OTHER[0].load(Ordering::SeqCst) != u64::MAX),
        "another thread tries again",
    );
    c.eq(IRQ_OTHER[0].load(Ordering::SeqCst), 0, "a free line: its ATTACH succeeds");
    c.eq(sys::irq_attach(s, 1), Ok(()), "the line of a thread that has ended is free to take");
    c.eq(sys::irq_detach(s), Ok(()), "DETACH");
}

static BAD_RECV: AtomicU64 = AtomicU64::new(0);

/// Receives into an unmapped buffer, `delay` µs after it starts (a sender that came
/// first is queued by then).
fn bad_receiver(delay: u64) {
    sys::sleep_us(delay);
    let u = ipc::utcb();
    u.recv_buf_addr = UNMAPPED;
    u.recv_buf_len = 100;
    let mut m = Msg::empty();
    let r = ipc::recv(ipc::RECV_ANY, &mut m, timeouts(POLL, 2_000_000));
    BAD_RECV.store(
        match r {
            Ok(_) => 1,
            Err(e) => e as u64,
        },
        Ordering::SeqCst,
    );
}

fn main() -> i32 {
    let mut c = Checks::new();
    let echo_slot = rt::alloc_slot_pair();
    c.check(spawn("echo", echo_slot).is_ok(), "spawn echo");

    // Unknown system calls.
    for n in [nr::COUNT, 1000, u64::MAX] {
        c.eq(raw(n, [0; 6]), Err(Error::NoSys), "unknown system call number");
    }

    // KERNEL_INFO: a `what` it does not know is refused (not answered as what = 0).
    c.eq(raw(nr::KERNEL_INFO, [0; 6]), Ok(()), "KERNEL_INFO(0)");
    for what in [abi::KERNEL_INFO_MEMORY + 1, 99, u64::MAX] {
        c.eq(raw(nr::KERNEL_INFO, [what, 0, 0, 0, 0, 0]), Err(Error::InvalidArg), "KERNEL_INFO with an unknown what");
    }

    // DEBUG_PUT pointer and length checks.
    c.eq(raw(nr::DEBUG_PUT, [KERNEL_PTR, 10, 0, 0, 0, 0]), Err(Error::BadAddress), "print from a kernel pointer");
    c.eq(raw(nr::DEBUG_PUT, [0, 10, 0, 0, 0, 0]), Err(Error::BadAddress), "print from a null pointer");
    c.eq(
        raw(nr::DEBUG_PUT, [NONCANONICAL - 5, 10, 0, 0, 0, 0]),
        Err(Error::BadAddress),
        "print across the end of user space",
    );
    c.eq(raw(nr::DEBUG_PUT, [u64::MAX - 3, 10, 0, 0, 0, 0]), Err(Error::BadAddress), "print with a wrapping range");
    c.eq(raw(nr::DEBUG_PUT, [UNMAPPED, 10, 0, 0, 0, 0]), Err(Error::BadAddress), "print from unmapped memory");
    c.eq(raw(nr::DEBUG_PUT, [CODE, 5000, 0, 0, 0, 0]), Err(Error::TooLong), "print too long");
    c.eq(raw(nr::DEBUG_PUT, [CODE, 0, 0, 0, 0, 0]), Ok(()), "print nothing");

    // Malformed tags and self-IPC.
    for tag in [Tag::new(1, 64).0, (1 << 12) | 1, 0x80] {
        let mut regs = [tag, 0, 0, 0, 0, 0, 0];
        let (e, _) = ipc::raw_ipc(nr::IPC_CALL, echo_slot, 0, FOREVER, &mut regs);
        c.eq(abi::check(e), Err(Error::InvalidArg), "malformed tag refused");
    }
    c.eq(ipc::call(cap::SELF_THREAD, &mut Msg::new(1, &[]), FOREVER), Err(Error::Deadlock), "call to oneself");
    c.eq(ipc::recv(cap::SELF_THREAD, &mut Msg::empty(), FOREVER), Err(Error::Deadlock), "receive from oneself");
    c.eq(ipc::reply(&Msg::new(1, &[])), Err(Error::NoPartner), "reply with nobody to reply to");

    // Strings: faults inside the copy, oversized lengths.
    let mut back = [0u8; 64];
    let back_at = back.as_mut_ptr() as u64;
    let string_call = |addr: u64, len: u64| {
        let u = ipc::utcb();
        u.recv_buf_addr = back_at;
        u.recv_buf_len = 64;
        u.send_buf_addr = addr;
        u.send_buf_len = len;
        let mut m = Msg::new(echo::REVERSE, &[]).with_string();
        ipc::call(echo_slot, &mut m, FOREVER)
    };
    c.eq(string_call(KERNEL_PTR, 16), Err(Error::CopyFault), "string from kernel memory");
    c.eq(string_call(UNMAPPED, 16), Err(Error::CopyFault), "string from unmapped memory");
    let stack_page = (&back as *const _ as u64) & !0xfff;
    let stack_end = abi::layout::MAIN_STACK_TOP;
    c.eq(string_call(stack_end - 8, 16), Err(Error::CopyFault), "string running off the end of the stack");
    c.eq(string_call(stack_page, aipc::MAX_STRING + 1), Err(Error::TooLong), "string over MAX_STRING");
    c.eq(string_call(CODE, 5000), Err(Error::TooLong), "string longer than the receiver's buffer");
    // The receiver's buffer is bad: both sides learn.
    let bad = thread::spawn(bad_receiver, 0, thread::my_priority()).unwrap();
    sys::sleep_us(5_000);
    ipc::set_send_string(b"0123456789");
    let r = ipc::send(bad.slot, &Msg::new(1, &[]).with_string(), FOREVER);
    c.eq(r, Err(Error::CopyFault), "send into a receiver's unmapped buffer");
    sys::sleep_us(5_000);
    c.eq(BAD_RECV.load(Ordering::SeqCst), Error::CopyFault as u64, "receiver told of the fault");
    // The same with the sender queued first: both learn too (the message is dropped, so a
    // receive loop whose buffer stays bad cannot spin on it, and the sender does not wait
    // until its timeout).
    BAD_RECV.store(0, Ordering::SeqCst);
    let bad = thread::spawn(bad_receiver, 20_000, thread::my_priority()).unwrap();
    ipc::set_send_string(b"0123456789");
    let r = ipc::send(bad.slot, &Msg::new(1, &[]).with_string(), timeouts(2_000_000, aipc::INFINITE));
    c.eq(r, Err(Error::CopyFault), "a queued sender whose receiver's buffer is unmapped");
    c.check(tests::wait_until(100, || BAD_RECV.load(Ordering::SeqCst) != 0), "the receiver ends its receive");
    c.eq(BAD_RECV.load(Ordering::SeqCst), Error::CopyFault as u64, "receiver told of the fault");
    // Our own receive buffer is bad when the reply comes.
    {
        let u = ipc::utcb();
        u.recv_buf_addr = UNMAPPED;
        u.recv_buf_len = 64;
        u.send_buf_addr = CODE;
        u.send_buf_len = 8;
        let mut m = Msg::new(echo::REVERSE, &[]).with_string();
        c.eq(ipc::call(echo_slot, &mut m, FOREVER), Err(Error::CopyFault), "reply into our unmapped buffer");
    }

    // Thread creation.
    let t = rt::alloc_slot();
    c.eq(sys::thread_create(cap::SELF_TASK, t, 0x7000_0000_0010, 50), Err(Error::Misaligned), "misaligned UTCB");
    c.eq(sys::thread_create(cap::SELF_TASK, t, KERNEL_PTR, 50), Err(Error::BadAddress), "UTCB in kernel space");
    c.eq(sys::thread_create(cap::SELF_TASK, t, NONCANONICAL, 50), Err(Error::BadAddress), "non-canonical UTCB");
    c.eq(sys::thread_create(cap::SELF_TASK, t, CODE, 50), Err(Error::AlreadyMapped), "UTCB over our code");
    c.eq(sys::thread_create(cap::SELF_TASK, t, MAIN_UTCB, 50), Err(Error::AlreadyMapped), "UTCB over another UTCB");
    c.eq(
        sys::thread_create(cap::SELF_TASK, t, thread::alloc_utcb(), 255),
        Err(Error::InvalidArg),
        "priority above our own",
    );
    c.eq(
        sys::thread_create(echo_slot, t, thread::alloc_utcb(), 50),
        Err(Error::WrongType),
        "thread capability as a task",
    );
    c.eq(
        sys::thread_create(cap::SELF_TASK, echo_slot, thread::alloc_utcb(), 50),
        Err(Error::SlotInUse),
        "occupied destination slot",
    );
    c.eq(
        sys::thread_create(cap::SELF_TASK, cap::SLOTS, thread::alloc_utcb(), 50),
        Err(Error::InvalidCap),
        "destination slot out of range",
    );
    c.eq(sys::thread_create(cap::SELF_TASK, t, thread::alloc_utcb(), 50), Ok(()), "a good thread (stopped)");
    c.eq(sys::thread_start(t, KERNEL_PTR, 0x1000, 0), Err(Error::InvalidArg), "start at a kernel address");
    c.eq(sys::thread_start(t, 0, 0, 0), Err(Error::InvalidArg), "start a fresh thread without an address");
    c.eq(sys::thread_start(cap::SELF_THREAD, CODE, 0x2000, 0), Err(Error::BadState), "start a running thread");
    c.eq(
        sys::thread_start(cap::SELF_THREAD, CODE, 0x1000, 0),
        Err(Error::InvalidArg),
        "a stack below the first user page is refused before the state is looked at",
    );
    c.eq(raw(nr::THREAD_CONTROL, [t, 99, 0, 0, 0, 0]), Err(Error::InvalidArg), "unknown thread operation");
    c.eq(
        raw(nr::THREAD_CONTROL, [t, tctl::SET_FAULT_HANDLER, cap::SELF_TASK, 0, 0, 0]),
        Err(Error::WrongType),
        "fault handler that is no thread",
    );
    // SAFETY: the thread never ran and holds nothing.
    c.eq(unsafe { sys::thread_destroy(t) }, Ok(()), "destroy it");
    c.eq(sys::thread_read_state(t), Err(Error::InvalidCap), "destroyed thread's capability is dead");

    // Memory.
    let heap_probe = 0x0000_4000_0000_0000;
    c.eq(raw(17, [cap::SELF_TASK, heap_probe, 1, mem::READ, 0, 0]), Err(Error::NoSys), "the retired MEM_ALLOC number");
    sys::prefault(heap_probe, 2);
    let small = rt::alloc_slot();
    c.eq(sys::task_create(small, 12), Ok(()), "a task with a 12-page kernel quota");
    c.eq(
        sys::thread_create(small, rt::alloc_slot(), 0x10_0000, 50),
        Err(Error::NoMemory),
        "a thread beyond its kernel quota",
    );
    c.eq(sys::task_create(rt::alloc_slot(), u64::MAX), Err(Error::NoMemory), "child quota beyond ours");
    c.eq(sys::task_create(small, 10), Err(Error::SlotInUse), "task into an occupied slot");
    c.eq(sys::task_info(small), Ok((0, 12, 11)), "its kernel memory: page-table root and capability space");
    // SAFETY: every call below is expected to be refused before it changes anything,
    // except the last map, which maps a page of ours into another task.
    unsafe {
        c.eq(
            sys::mem_map(small, UNMAPPED, heap_probe + 0x100000, 1, mem::READ),
            Err(Error::NotMapped),
            "map from unmapped memory",
        );
        c.eq(
            sys::mem_map(small, CODE, 0x1000_0000, 1, mem::READ | mem::WRITE),
            Err(Error::NoRights),
            "map code writable",
        );
        c.eq(sys::mem_map(small, MAIN_UTCB, 0x1000_0000, 1, mem::READ), Err(Error::InvalidArg), "map a UTCB");
        c.eq(
            sys::mem_map(cap::SELF_TASK, heap_probe, MAIN_UTCB, 1, mem::READ),
            Err(Error::AlreadyMapped),
            "map over a UTCB",
        );
        c.eq(
            sys::mem_map(cap::SELF_TASK, heap_probe, heap_probe + 4096, 2, mem::READ),
            Err(Error::InvalidArg),
            "overlapping map within one space",
        );
        c.eq(
            sys::mem_map(small, heap_probe, 0x1000_0000, 1, mem::READ | (1 << 12)),
            Err(Error::InvalidArg),
            "unknown map flags",
        );
        c.eq(
            sys::mem_map(small, heap_probe, KERNEL_PTR, 1, mem::READ),
            Err(Error::BadAddress),
            "map into kernel space",
        );
        use abi::fpage::{Fpage, UNMAP_SELF};
        c.eq(sys::unmap(Fpage::mem(MAIN_UTCB, 12, 0), UNMAP_SELF), Err(Error::InvalidArg), "unmap our UTCB");
        c.eq(sys::unmap(Fpage::mem(UNMAPPED, 12, 0), UNMAP_SELF), Ok(()), "unmap nothing is no error");
        c.eq(sys::unmap(Fpage::mem(KERNEL_PTR, 12, 0), UNMAP_SELF), Err(Error::BadAddress), "unmap kernel memory");
        c.eq(sys::unmap(Fpage::mem(UNMAPPED + 4096, 13, 0), UNMAP_SELF), Err(Error::InvalidArg), "misaligned flexpage");
        c.eq(sys::unmap(Fpage(3), 0), Err(Error::InvalidArg), "flexpage of no kind");
        c.eq(sys::unmap(Fpage::mem(UNMAPPED, 12, 0), 2), Err(Error::InvalidArg), "unknown unmap flags");
        c.eq(
            sys::mem_map(small, heap_probe, 0x1000_0000, 1, mem::READ),
            Err(Error::NoMemory),
            "no kernel quota left for its page tables",
        );
        c.eq(
            sys::mem_map(small, heap_probe, KERNEL_PTR, 1, mem::READ | mem::GRANT),
            Err(Error::BadAddress),
            "grant into kernel space",
        );
    }
    c.eq(sys::task_destroy(small), Ok(()), "destroy the small task");

    // Capabilities and the machine.
    c.eq(sys::machine_exit(cap::PARENT, 0), Err(Error::WrongType), "machine call with a thread capability");
    c.eq(sys::machine_exit(rt::alloc_slot(), 0), Err(Error::InvalidCap), "machine call with an empty slot");
    c.eq(
        sys::machine_fastpath(cap::PARENT, false),
        Err(Error::WrongType),
        "only the machine capability turns the IPC fastpath off",
    );
    c.eq(
        sys::cap_copy(rt::alloc_slot(), rt::alloc_slot(), rights::ALL, 0),
        Err(Error::InvalidCap),
        "copy from an empty slot",
    );
    c.eq(
        sys::cap_copy(echo_slot, cap::SLOTS + 5, rights::ALL, 0),
        Err(Error::InvalidCap),
        "copy to a slot out of range",
    );
    c.eq(sys::cap_give(cap::SELF_TASK, u64::MAX, 50, rights::ALL), Err(Error::InvalidCap), "give from a bad slot");

    irq_ownership(&mut c);
    // A call must wait for its reply: a receive timeout of 0 is refused, not a tick's wait.
    let mut m = Msg::new(echo::ECHO, &[1]);
    c.eq(
        ipc::call(echo_slot, &mut m, timeouts(aipc::INFINITE, POLL)),
        Err(Error::InvalidArg),
        "a call that may not wait for its reply",
    );

    // After all that, the kernel still serves.
    let mut m = Msg::new(echo::ECHO, &[99]);
    c.eq(ipc::call(echo_slot, &mut m, FOREVER), Ok(()), "echo still answers");
    c.eq(m.word(1), 99, "with the right value");
    c.finish("hostile_test")
}
