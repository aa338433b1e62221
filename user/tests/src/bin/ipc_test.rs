//! IPC correctness: values in registers and the UTCB, badges, string copy, every
//! kind of timeout, receive from any and from one, call chains across three tasks,
//! and call/reply between threads of one task.
#![no_std]
#![no_main]

extern crate alloc;

use abi::{cap, rights, Error};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use echo_api as echo;
use rt::env::spawn;
use rt::ipc::{self, timeouts, Msg, FOREVER, INFINITE, POLL};
use rt::{sys, thread};
use tests::Checks;

rt::entry!(main);

/// Helper: send one ECHO-labelled message with word = badge-identifying value to `slot`.
fn sender(slot: u64) {
    let _ = ipc::send(slot, &Msg::new(7, &[slot]), FOREVER);
}

/// Helper: call echo's SLOW(100 ms) to keep it busy.
fn slow_caller(slot: u64) {
    let mut m = Msg::new(echo::SLOW, &[100_000]);
    let _ = ipc::call(slot, &mut m, FOREVER);
}

static SERVED: AtomicU64 = AtomicU64::new(0);

/// Helper: a server thread in this task: answers calls with word + 1000.
fn local_server(_: u64) {
    let mut m = Msg::empty();
    let mut r = ipc::recv(ipc::RECV_ANY, &mut m, FOREVER);
    while r.is_ok() {
        SERVED.fetch_add(1, Ordering::Relaxed);
        let mut rep = Msg::new(9, &[m.word(1) + 1000]);
        r = ipc::reply_wait(ipc::RECV_ANY, &mut rep, FOREVER);
        m = rep;
    }
}

/// Slot the saving server thread keeps its saved reply in.
static SAVED_SLOT: AtomicU64 = AtomicU64::new(0);
/// 1 once the saver has saved its reply (and is about to exit).
static SAVED: AtomicU64 = AtomicU64::new(0);
/// What the caller of the saver got: 1 + the answer's word, or 0x8000 + an error.
static SAVED_ANSWER: AtomicU64 = AtomicU64::new(0);

/// Helper: receive one call, keep the right to answer it in a capability, and exit.
fn saver(_: u64) {
    let mut m = Msg::empty();
    if ipc::recv(ipc::RECV_ANY, &mut m, FOREVER).is_ok() && ipc::save_reply(SAVED_SLOT.load(Ordering::SeqCst)).is_ok() {
        SAVED.store(1, Ordering::SeqCst);
    }
}

/// Helper: call `slot` and record the answer.
fn saved_caller(slot: u64) {
    let mut m = Msg::new(1, &[0]);
    let got = match ipc::call(slot, &mut m, FOREVER) {
        Ok(()) => 1 + m.word(1),
        Err(e) => 0x8000 + e as u64,
    };
    SAVED_ANSWER.store(got, Ordering::SeqCst);
}

/// `a` once it is not zero (waiting up to two seconds).
fn wait_nonzero(a: &AtomicU64) -> u64 {
    tests::wait_until(200, || a.load(Ordering::SeqCst) != 0);
    a.load(Ordering::SeqCst)
}

/// A saved reply belongs to the task: another thread answers with it after the thread
/// that saved it has exited, and a use that fails for the sender keeps it.
fn saved_replies(c: &mut Checks) {
    let slot = rt::alloc_slot();
    SAVED_SLOT.store(slot, Ordering::SeqCst);
    let Ok(srv) = thread::spawn(saver, 0, thread::my_priority()) else {
        c.check(false, "start the saving server thread");
        return;
    };
    sys::sleep_us(2_000);
    c.check(thread::spawn(saved_caller, srv.slot, thread::my_priority()).is_ok(), "start a caller");
    c.eq(wait_nonzero(&SAVED), 1, "the server thread saved its reply");
    sys::sleep_us(10_000); // the saver has exited by now
    c.eq(SAVED_ANSWER.load(Ordering::SeqCst), 0, "the caller still waits after the saving thread exited");
    // An answer with a malformed typed item fails for us, the sender.
    let mut bad = Msg::new(9, &[]);
    bad.push_item(abi::fpage::Fpage(0), 0);
    c.eq(ipc::send(slot, &bad, FOREVER), Err(Error::InvalidArg), "a malformed answer is refused");
    c.check(sys::cap_info(slot).is_ok(), "and the saved reply is kept");
    let copy = rt::alloc_slot();
    c.eq(
        sys::cap_copy(slot, copy, rights::SEND, 0),
        Err(Error::WrongType),
        "a saved reply cannot be copied (one call, one answer)",
    );
    c.eq(SAVED_ANSWER.load(Ordering::SeqCst), 0, "the caller still waits");
    c.eq(ipc::send(slot, &Msg::new(9, &[4242]), FOREVER), Ok(()), "another thread answers through the saved reply");
    c.eq(wait_nonzero(&SAVED_ANSWER), 4243, "the caller gets that answer");
    c.eq(ipc::send(slot, &Msg::new(9, &[1]), FOREVER).err(), Some(Error::InvalidCap), "a saved reply answers once");
}

/// Helper: call `slot` with a 10 ms receive timeout (nobody answers), then send to it.
fn late_sender(slot: u64) {
    let mut m = Msg::new(1, &[5]);
    let first = ipc::call(slot, &mut m, timeouts(INFINITE, 10_000));
    let _ = ipc::send(slot, &Msg::new(2, &[if first == Err(Error::Timeout) { 6 } else { 0 }]), FOREVER);
}

/// A reply right whose caller gave up is gone: saving it later fails, and the caller's
/// next message (queued meanwhile) is delivered once. (A kernel that saved it anyway
/// re-pointed the caller's queue link, delivered its send twice, and could spin.)
fn stale_reply(c: &mut Checks) {
    let me = rt::alloc_slot();
    sys::cap_copy(cap::SELF_THREAD, me, rights::SEND, 303).unwrap();
    c.check(thread::spawn(late_sender, me, thread::my_priority()).is_ok(), "start a caller that gives up after 10 ms");
    let mut m = Msg::empty();
    c.eq(ipc::recv(ipc::RECV_ANY, &mut m, FOREVER), Ok(303), "its call arrives");
    sys::sleep_us(40_000); // it times out and sends again (queued: we are not receiving)
    let slot = rt::alloc_slot();
    c.eq(ipc::save_reply(slot), Err(Error::NoPartner), "saving the reply of a call that timed out fails");
    c.eq(ipc::recv(ipc::RECV_ANY, &mut m, FOREVER), Ok(303), "its next message arrives");
    c.eq(m.word(1), 6, "and it is the send after the time-out");
    c.eq(ipc::recv(ipc::RECV_ANY, &mut m, timeouts(POLL, POLL)), Err(Error::Timeout), "once");
}

/// What the twice-calling helper got from its second call: 1 + the answer's word, or
/// 0x8000 + an error.
static SECOND_ANSWER: AtomicU64 = AtomicU64::new(0);

/// Helper: call `slot` with a 10 ms receive timeout (the answer comes later), then call
/// it again and wait for the answer.
fn twice_caller(slot: u64) {
    let mut m = Msg::new(1, &[1]);
    let _ = ipc::call(slot, &mut m, timeouts(INFINITE, 10_000));
    let mut m = Msg::new(1, &[2]);
    let got = match ipc::call(slot, &mut m, FOREVER) {
        Ok(()) => 1 + m.word(1),
        Err(e) => 0x8000 + e as u64,
    };
    SECOND_ANSWER.store(got, Ordering::SeqCst);
}

/// A saved reply answers the call it was saved from, never a later call of the same
/// caller (one that gave up and called again, its new call saved too): the old one
/// is `NoPartner`. (A kernel that knew only the caller answered its new call with the
/// old answer, and a server that woke an abandoned waiter ended another of its calls.)
fn saved_reply_is_one_call(c: &mut Checks) {
    let me = rt::alloc_slot();
    sys::cap_copy(cap::SELF_THREAD, me, rights::SEND, 304).unwrap();
    c.check(
        thread::spawn(twice_caller, me, thread::my_priority()).is_ok(),
        "start a caller that gives up once and calls again",
    );
    let (old, new) = (rt::alloc_slot(), rt::alloc_slot());
    let mut m = Msg::empty();
    c.eq(ipc::recv(ipc::RECV_ANY, &mut m, FOREVER), Ok(304), "its first call arrives");
    c.eq(ipc::save_reply(old), Ok(()), "save the reply to the first call");
    c.eq(ipc::recv(ipc::RECV_ANY, &mut m, FOREVER), Ok(304), "the second call arrives (the first gave up)");
    c.eq(m.word(1), 2, "and it is the second");
    c.eq(ipc::save_reply(new), Ok(()), "save the reply to the second call");
    c.eq(
        ipc::send(old, &Msg::new(9, &[111]), FOREVER),
        Err(Error::NoPartner),
        "the first call's reply answers nothing",
    );
    c.eq(SECOND_ANSWER.load(Ordering::SeqCst), 0, "the second call still waits");
    c.eq(ipc::send(new, &Msg::new(9, &[222]), FOREVER), Ok(()), "answer the second call");
    c.eq(wait_nonzero(&SECOND_ANSWER), 223, "the caller gets the second call's answer");
}

/// A server thread that answers each call with its word plus `n`, and the badge.
fn adder(n: u64) {
    let mut m = Msg::empty();
    loop {
        let Ok(badge) = ipc::recv(ipc::RECV_ANY, &mut m, FOREVER) else { continue };
        let _ = ipc::reply(&Msg::new(0, &[m.word(1) + n, badge]));
    }
}

static QUEUED: AtomicU64 = AtomicU64::new(0);

fn queued_caller(slot: u64) {
    let mut m = Msg::new(1, &[100]);
    let r = ipc::call(slot, &mut m, FOREVER);
    QUEUED.store(r.map_or_else(|e| 1 << 40 | e as u64, |_| m.word(1)), Ordering::SeqCst);
}

/// `THREAD_CONTROL SUCCEED` (a server's live update): sends through capabilities naming
/// the old thread reach the new one, badges kept, queued callers moved, also after the
/// old thread is gone; `CONTROL` still names the old thread.
fn succeed(c: &mut Checks) {
    let prio = thread::my_priority();
    let (Ok(s1), Ok(s2)) = (thread::spawn(adder, 1, prio), thread::spawn(adder, 2, prio)) else {
        c.check(false, "start two server threads");
        return;
    };
    let b = rt::alloc_slot();
    c.eq(sys::cap_copy(s1.slot, b, rights::SEND, 0x5EED), Ok(()), "a badged send capability to the first");
    let mut m = Msg::new(1, &[10]);
    c.eq(ipc::call(b, &mut m, FOREVER).map(|_| (m.word(1), m.word(2))), Ok((11, 0x5EED)), "the first answers");
    // SAFETY: the adder holds no lock and nothing waits on it but this test's calls.
    c.eq(unsafe { sys::thread_stop(s1.slot) }, Ok(()), "stop the first");
    c.check(thread::spawn(queued_caller, b, prio).is_ok(), "a caller queues on it");
    sys::sleep_us(10_000);
    c.eq(sys::thread_succeed(s1.slot, b), Err(Error::NoRights), "the successor must be under the caller's control");
    c.eq(sys::thread_succeed(s1.slot, s1.slot), Err(Error::InvalidArg), "a thread does not succeed itself");
    c.eq(sys::thread_succeed(b, s2.slot), Err(Error::NoRights), "nor is a thread moved without control of it");
    c.eq(sys::thread_succeed(s1.slot, s2.slot), Ok(()), "move the first's endpoint to the second");
    c.check(tests::wait_until(1000, || QUEUED.load(Ordering::SeqCst) != 0), "the queued caller is answered");
    c.eq(QUEUED.load(Ordering::SeqCst), 102, "by the second");
    let mut m = Msg::new(1, &[10]);
    c.eq(
        ipc::call(b, &mut m, FOREVER).map(|_| (m.word(1), m.word(2))),
        Ok((12, 0x5EED)),
        "the old capability reaches the second, its badge kept",
    );
    c.eq(sys::thread_read_state(s1.slot).map(|s| s.0), Ok(0), "control still names the first (stopped)");
    // SAFETY: as above; the thread's stack is leaked, not reused.
    c.eq(unsafe { sys::thread_destroy(s1.slot) }, Ok(()), "destroy the first");
    let mut m = Msg::new(1, &[20]);
    c.eq(ipc::call(b, &mut m, FOREVER).map(|_| m.word(1)), Ok(22), "still the second after the first is gone");
    c.check(sys::cap_info(b).is_ok(), "and CAP_INFO reports the capability alive (it leads to a live thread)");
    // SAFETY: as above.
    c.eq(unsafe { sys::thread_destroy(s2.slot) }, Ok(()), "destroy the second");
    // A successor that was itself queued on the thread it succeeds would wait for
    // itself: its call fails with Deadlock instead.
    let Ok(s3) = thread::spawn(adder, 3, prio) else {
        c.check(false, "start a third server thread");
        return;
    };
    // SAFETY: as above.
    c.eq(unsafe { sys::thread_stop(s3.slot) }, Ok(()), "stop the third");
    let Ok(q) = thread::spawn(queued_caller, s3.slot, prio) else {
        c.check(false, "start a caller of the third");
        return;
    };
    sys::sleep_us(10_000);
    QUEUED.store(0, Ordering::SeqCst);
    c.eq(sys::thread_succeed(s3.slot, q.slot), Ok(()), "move the third's endpoint to its own queued caller");
    c.check(
        tests::wait_until(1000, || QUEUED.load(Ordering::SeqCst) != 0),
        "the caller is not left waiting for itself",
    );
    c.eq(QUEUED.load(Ordering::SeqCst), 1 << 40 | Error::Deadlock as u64, "its call failed with Deadlock");
    // SAFETY: as above.
    c.eq(unsafe { sys::thread_destroy(s3.slot) }, Ok(()), "destroy the third");
    let mut m = Msg::new(1, &[20]);
    c.eq(ipc::call(b, &mut m, FOREVER), Err(Error::InvalidCap), "with both gone the capability is dead");
    c.eq(sys::cap_info(b).err(), Some(Error::InvalidCap), "and CAP_INFO says so");
}

fn main() -> i32 {
    let mut c = Checks::new();
    let echo_slot = rt::alloc_slot_pair();
    let echo_task = echo_slot + 1;
    c.check(spawn("echo", echo_slot).is_ok(), "spawn echo server");

    // Register words and the badge of an unbadged capability.
    let mut m = Msg::new(echo::ECHO, &[1, 2, 3, 4, 5, 6]);
    c.eq(ipc::call(echo_slot, &mut m, FOREVER), Ok(()), "call echo (6 words, all in registers)");
    c.eq(m.words(), &[1, 2, 3, 4, 5, 6, 0][..], "6 register words echoed, badge 0");

    // All 62 words plus the badge: most travel in the UTCB.
    let w: Vec<u64> = (0..62u64).map(|i| i * 7 + 1).collect();
    let mut m = Msg::new(echo::ECHO, &w);
    c.eq(ipc::call(echo_slot, &mut m, FOREVER), Ok(()), "call echo (62 words)");
    c.eq(&m.words()[..62], &w[..], "62 words echoed through the UTCB");

    // Badges are set by whoever mints the capability and cannot be forged.
    let badged = rt::alloc_slot();
    c.eq(sys::cap_copy(echo_slot, badged, rights::SEND, 0xBAD6E), Ok(()), "mint a badged copy");
    let mut m = Msg::new(echo::ECHO, &[5]);
    c.eq(ipc::call(badged, &mut m, FOREVER), Ok(()), "call through the badged copy");
    c.eq(m.words(), &[5, 0xBAD6E][..], "receiver sees the badge");
    let rebadge = rt::alloc_slot();
    c.eq(sys::cap_copy(badged, rebadge, rights::SEND, 0x1), Err(Error::InvalidArg), "a badge cannot be changed");

    // Strings: copied into the receiver's buffer, reversed, copied back.
    let text = b"hello, scion";
    let mut back = [0u8; 64];
    ipc::set_send_string(text);
    ipc::set_recv_buffer(&mut back);
    let mut m = Msg::new(echo::REVERSE, &[]).with_string();
    c.eq(ipc::call(echo_slot, &mut m, FOREVER), Ok(()), "string call");
    c.eq(m.word(1), 12, "server received 12 bytes");
    c.eq(ipc::received_string_len(), 12, "12 bytes came back");
    c.eq(&back[..12], b"noics ,olleh", "string reversed by the server");
    let big: Vec<u8> = (0..4000u32).map(|i| (i * 31 % 251) as u8).collect();
    let mut back = alloc::vec![0u8; 4096];
    ipc::set_send_string(&big);
    ipc::set_recv_buffer(&mut back);
    let mut m = Msg::new(echo::REVERSE, &[]).with_string();
    c.eq(ipc::call(echo_slot, &mut m, FOREVER), Ok(()), "4000-byte string across pages");
    let rev: Vec<u8> = big.iter().rev().copied().collect();
    c.check(back[..4000] == rev[..], "4000 bytes intact both ways");
    c.eq(
        (ipc::utcb().recv_buf_addr, ipc::utcb().recv_buf_len),
        (0, 0),
        "the call took the buffer's offer back (nothing can write into it later)",
    );
    // A reply longer than the caller's buffer: the caller is told, not left waiting.
    let mut small = [0u8; 4];
    ipc::set_send_string(b"hello, scion");
    ipc::set_recv_buffer(&mut small);
    let mut m = Msg::new(echo::REVERSE, &[]).with_string();
    c.eq(
        ipc::call(echo_slot, &mut m, timeouts(INFINITE, 2_000_000)),
        Err(Error::TooLong),
        "a reply over the caller's buffer fails the call with TooLong",
    );
    c.eq(small, [0u8; 4], "and nothing was written into the buffer");
    let mut m = Msg::new(echo::ECHO, &[5]);
    c.eq(ipc::call(echo_slot, &mut m, FOREVER).map(|_| m.word(1)), Ok(5), "the server serves on");

    // Timeouts.
    let mut m = Msg::empty();
    c.eq(
        ipc::recv(echo_slot, &mut m, timeouts(POLL, POLL)),
        Err(Error::Timeout),
        "receive with timeout 0 and no sender",
    );
    let t0 = sys::kernel_info().ticks;
    c.eq(ipc::recv(ipc::RECV_ANY, &mut m, timeouts(POLL, 30_000)), Err(Error::Timeout), "bounded receive times out");
    let dt = sys::kernel_info().ticks - t0;
    c.check(dt >= 30, "bounded receive waited at least 30 ms");
    c.check(dt < 1000, "bounded receive did not wait much longer");
    let helper = thread::spawn(slow_caller, echo_slot, thread::my_priority());
    c.check(helper.is_ok(), "start a thread that keeps echo busy");
    sys::sleep_us(10_000);
    c.eq(
        ipc::send(echo_slot, &Msg::new(echo::ECHO, &[]), timeouts(POLL, POLL)),
        Err(Error::Timeout),
        "send with timeout 0 to a busy server",
    );
    c.eq(
        ipc::send(echo_slot, &Msg::new(echo::ECHO, &[]), timeouts(20_000, INFINITE)),
        Err(Error::Timeout),
        "bounded send to a busy server times out",
    );
    let mut m = Msg::new(echo::ECHO, &[77]);
    c.eq(ipc::call(echo_slot, &mut m, FOREVER), Ok(()), "infinite call waits for the busy server");
    c.eq(m.word(1), 77, "and gets its answer");
    let mut m = Msg::new(echo::SLOW, &[50_000]);
    c.eq(
        ipc::call(echo_slot, &mut m, timeouts(INFINITE, 10_000)),
        Err(Error::Timeout),
        "call whose reply takes too long times out",
    );
    sys::sleep_us(60_000);

    // Receive from any (FIFO) and from one.
    let me_a = rt::alloc_slot();
    let me_b = rt::alloc_slot();
    sys::cap_copy(cap::SELF_THREAD, me_a, rights::SEND, 101).unwrap();
    sys::cap_copy(cap::SELF_THREAD, me_b, rights::SEND, 102).unwrap();
    let _ = thread::spawn(sender, me_a, thread::my_priority());
    sys::sleep_us(5_000);
    let _ = thread::spawn(sender, me_b, thread::my_priority());
    sys::sleep_us(5_000);
    let mut m = Msg::empty();
    let b1 = ipc::recv(ipc::RECV_ANY, &mut m, FOREVER);
    let b2 = ipc::recv(ipc::RECV_ANY, &mut m, FOREVER);
    c.eq((b1, b2), (Ok(101), Ok(102)), "receive from any takes queued senders in order");
    let ta = thread::spawn(sender, me_a, thread::my_priority()).unwrap();
    sys::sleep_us(5_000);
    let tb = thread::spawn(sender, me_b, thread::my_priority()).unwrap();
    sys::sleep_us(5_000);
    let first = ipc::recv(tb.slot, &mut m, FOREVER);
    c.eq(first, Ok(102), "receive from one thread skips others queued earlier");
    c.eq(ipc::recv(ta.slot, &mut m, FOREVER), Ok(101), "then the other");

    // A call chain across three tasks: us -> echo -> echo2 -> echo -> us.
    let echo2 = rt::alloc_slot_pair();
    c.check(spawn("echo", echo2).is_ok(), "spawn a second echo");
    c.eq(sys::cap_give(echo_task, echo2, 20, rights::SEND), Ok(()), "give echo a capability to echo2");
    let mut m = Msg::new(echo::FORWARD, &[20, 5]);
    c.eq(ipc::call(echo_slot, &mut m, FOREVER), Ok(()), "call through a chain of three tasks");
    c.eq(m.word(1), 7, "each hop added one");

    stale_reply(&mut c);

    // Call and reply between two threads of one task.
    let srv = thread::spawn(local_server, 0, thread::my_priority()).unwrap();
    sys::sleep_us(2_000);
    let mut ok = true;
    for i in 0..100 {
        let mut m = Msg::new(1, &[i]);
        ok &= ipc::call(srv.slot, &mut m, FOREVER).is_ok() && m.word(1) == i + 1000;
    }
    c.check(ok, "100 call/reply round trips between threads of one task");
    c.eq(SERVED.load(Ordering::Relaxed), 100, "server thread saw every call");

    // A send to a thread that is gone fails instead of hanging.
    let mut m = Msg::new(echo::QUIT, &[]);
    c.eq(ipc::call(echo2, &mut m, FOREVER), Ok(()), "echo2 quits");
    sys::sleep_us(20_000);
    let mut m = Msg::new(echo::ECHO, &[1]);
    c.eq(ipc::call(echo2, &mut m, FOREVER), Err(Error::InvalidCap), "a capability to a dead thread is dead");

    saved_replies(&mut c);
    saved_reply_is_one_call(&mut c);
    succeed(&mut c);
    c.finish("ipc_test")
}
