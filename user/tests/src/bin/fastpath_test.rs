//! The kernel's IPC fastpath against its general path (`MACHINE FASTPATH` turns it off
//! and on and counts the IPCs it carried):
//!
//! - each condition that must send a call to the general path — the partner not
//!   waiting, a more important thread ready, a deleted capability, one without the
//!   right to send, a thread that died, a pending fault, timeouts, a long message, a
//!   string too long for the receiver or from unmapped memory, a receiver waiting for
//!   someone else, a caller that died before the reply —
//!   does not take the fastpath (the count says so) and gets the general path's result;
//! - a random sequence of IPCs between threads of several priorities (calls through
//!   badged, deleted and send-less capabilities, short and long messages, strings,
//!   sends that poll, pokes that make a more important thread ready, priority changes)
//!   leaves the same log of events, in the same order, with the fastpath on and off;
//! - a capability the fastpath keeps (each thread's last call capability) is never
//!   used once its slot was emptied, refilled or reduced;
//! - the buffers the fastpath keeps resolved (each thread's last string buffers) are
//!   never used once their mapping has changed: a page mapped anew at the same address
//!   is what is read and written, an unmapped one is a `CopyFault`.
#![no_std]
#![no_main]

extern crate alloc;

use abi::{cap, rights, Error};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use rt::ipc::{self, timeouts, Msg, FOREVER, INFINITE, POLL, RECV_ANY};
use rt::{println, sys, thread};
use tests::Checks;

rt::entry!(main);

static MACHINE: AtomicU64 = AtomicU64::new(0);
static ON: AtomicU64 = AtomicU64::new(1);

/// Turn the fastpath on or off; returns how many IPCs it has carried.
fn set_fastpath(on: bool) -> u64 {
    ON.store(on as u64, Ordering::SeqCst);
    sys::machine_fastpath(MACHINE.load(Ordering::SeqCst), on).expect("the machine capability")
}

/// IPCs the fastpath has carried (a system call, not an IPC).
fn count() -> u64 {
    set_fastpath(ON.load(Ordering::SeqCst) == 1)
}

// ------------------------------------------------------------------ the event log

const LOG_LEN: usize = 8192;
static LOG: [AtomicU64; LOG_LEN] = [const { AtomicU64::new(0) }; LOG_LEN];
static LOG_AT: AtomicU64 = AtomicU64::new(0);

/// Append an event (who, what, a value): one word.
fn log(who: u64, what: u64, value: u64) {
    let i = LOG_AT.fetch_add(1, Ordering::SeqCst) as usize;
    if i < LOG_LEN {
        LOG[i].store((who << 56) | (what << 48) | (value & 0xffff_ffff_ffff), Ordering::SeqCst);
    }
}

fn take_log() -> Vec<u64> {
    let n = (LOG_AT.swap(0, Ordering::SeqCst) as usize).min(LOG_LEN);
    LOG[..n].iter().map(|w| w.load(Ordering::SeqCst)).collect()
}

fn err(r: Result<(), Error>) -> u64 {
    match r {
        Ok(()) => 0,
        Err(e) => e as u64,
    }
}

// ------------------------------------------------------------------ threads

/// A server thread: answers every message (label + 1; its first word + 1, the badge,
/// its word count, the length of its string), logging what it got. `id` names it in
/// the log.
fn server(id: u64) {
    let mut buf = [0u8; 512];
    let mut m = Msg::empty();
    ipc::set_recv_buffer(&mut buf);
    let mut r = ipc::recv(RECV_ANY, &mut m, FOREVER);
    loop {
        let reply = match r {
            Ok(badge) => {
                let s = if m.tag().has_string() { ipc::received_string_len() as u64 } else { 0 };
                let sum = buf[..s as usize].iter().map(|b| *b as u64).sum::<u64>();
                log(id, 1, (m.label() << 32) | (m.words().len() as u64) << 16 | (badge & 0xffff));
                log(id, 2, m.word(1) ^ sum);
                Msg::new(m.label() + 1, &[m.word(1) + 1, badge, m.words().len() as u64, s])
            }
            Err(e) => {
                log(id, 3, e as u64);
                Msg::new(0xE, &[e as u64])
            }
        };
        m = reply;
        ipc::set_recv_buffer(&mut buf);
        r = ipc::reply_wait(RECV_ANY, &mut m, FOREVER);
    }
}

/// Length of the overlapping string (`overlap_server`).
const OVERLAP_LEN: usize = 512;

/// A position-weighted sum: tells a string from a shifted or repeated one.
fn overlap_sum(b: &[u8]) -> u64 {
    b.iter().enumerate().map(|(i, &x)| (i as u64 + 1) * x as u64).sum()
}

/// A server whose receive buffer starts 8 bytes into the area at `at` (where its caller
/// sends from): answers the length and `overlap_sum` of each string it gets.
fn overlap_server(at: u64) {
    // SAFETY: the test's leaked area (1024 bytes); the caller writes it only while this
    // thread waits.
    let buf = unsafe { core::slice::from_raw_parts_mut((at + 8) as *mut u8, OVERLAP_LEN) };
    let mut m = Msg::empty();
    ipc::set_recv_buffer(buf);
    let mut r = ipc::recv(RECV_ANY, &mut m, FOREVER);
    loop {
        let n = if r.is_ok() && m.tag().has_string() { ipc::received_string_len() } else { 0 };
        m = Msg::new(1, &[n as u64, overlap_sum(&buf[..n.min(OVERLAP_LEN)])]);
        ipc::set_recv_buffer(buf);
        r = ipc::reply_wait(RECV_ANY, &mut m, FOREVER);
    }
}

/// A thread that logs each message it receives (no reply): made ready by a send, it
/// runs when the more important threads block.
fn listener(id: u64) {
    let mut m = Msg::empty();
    loop {
        let r = ipc::recv(RECV_ANY, &mut m, FOREVER);
        log(id, 4, r.map_or_else(|e| 0x100 + e as u64, |_| m.word(1)));
    }
}

static TARGET: AtomicU64 = AtomicU64::new(0);
static ANSWER: AtomicU64 = AtomicU64::new(0);

/// Call the thread in TARGET once with word 5; record 1 + its answer's first word.
fn caller(_: u64) {
    let mut m = Msg::new(3, &[5]);
    let r = ipc::call(TARGET.load(Ordering::SeqCst), &mut m, FOREVER);
    ANSWER.store(
        match r {
            Ok(()) => 1 + m.word(1),
            Err(e) => 0x8000 + e as u64,
        },
        Ordering::SeqCst,
    );
}

/// Send (not call) word 9 to the thread in TARGET, then end.
extern "C" fn sender_entry(_: u64) -> ! {
    let _ = ipc::send(TARGET.load(Ordering::SeqCst), &Msg::new(4, &[9]), FOREVER);
    sys::thread_exit()
}

static FAULTED_ON: AtomicU64 = AtomicU64::new(0);

/// Fault once (a read of address 0x10, 3 bytes), then call the thread in TARGET.
extern "C" fn faulter(_: u64) -> ! {
    // SAFETY: the read faults on purpose; the fault handler resumes the thread after
    // the 3-byte instruction. The registers used are declared.
    unsafe { core::arch::asm!("mov rcx, 0x10", ".byte 0x48, 0x8b, 0x01", out("rcx") _, out("rax") _) };
    FAULTED_ON.store(1, Ordering::SeqCst);
    caller(0);
    sys::thread_exit()
}

fn stack() -> u64 {
    let s = alloc::vec![0u8; 64 * 1024].leak();
    ((s.as_ptr() as u64 + s.len() as u64) & !15) - 8
}

// ------------------------------------------------------------------ conditions

/// Run `f` and return how many IPCs the fastpath carried meanwhile.
fn fast_during<T>(f: impl FnOnce() -> T) -> u64 {
    let before = count();
    f();
    count() - before
}

fn conditions(c: &mut Checks, p: u64) {
    // A server thread below us, waiting.
    let s = thread::spawn(server, 1, p - 20).unwrap();
    sys::sleep_us(2_000);
    take_log();

    // The fastpath itself: both directions. (A thread that a timer makes ready in
    // between, more important than the server or than us, rightly sends one direction
    // to the general path: up to five tries for a round trip with nobody in the way.)
    let mut n = 0;
    for _ in 0..5 {
        let mut m = Msg::new(7, &[41]);
        n = fast_during(|| c.eq(ipc::call(s.slot, &mut m, FOREVER), Ok(()), "a short call to a waiting server"));
        c.eq((m.label(), m.word(1)), (8, 42), "answered");
        if n == 2 {
            break;
        }
    }
    c.eq(n, 2, "fastpath: the call and the reply-and-wait");

    // The partner is not waiting: a new thread, ready but not yet at its receive.
    let s2 = thread::spawn(server, 2, p - 20).unwrap();
    let mut m = Msg::new(7, &[1]);
    let n = fast_during(|| c.eq(ipc::call(s2.slot, &mut m, FOREVER), Ok(()), "a call to a server not yet waiting"));
    c.eq(m.word(1), 2, "answered once it waits");
    c.eq(n, 1, "general path for the call (the reply takes the fastpath)");

    // A more important thread is ready: it runs before the server (the fastpath would
    // switch straight to the server).
    // Sent without waiting once it is in its receive: on a loaded host its first turn may
    // come later than any fixed sleep, so ask again (a polling send that times out leaves
    // nothing behind) for up to a second.
    let l = thread::spawn(listener, 3, p - 10).unwrap();
    take_log();
    let t = sys::now_us();
    let sent = loop {
        sys::sleep_us(2_000);
        match ipc::send(l.slot, &Msg::new(1, &[77]), timeouts(POLL, INFINITE)) {
            Err(Error::Timeout) if sys::now_us() - t < 1_000_000 => {}
            r => break r,
        }
    };
    c.eq(sent, Ok(()), "make a more important thread ready");
    let mut m = Msg::new(7, &[2]);
    let n =
        fast_during(|| c.eq(ipc::call(s.slot, &mut m, FOREVER), Ok(()), "a call with a more important thread ready"));
    c.eq(m.word(1), 3, "answered");
    c.eq(n, 1, "general path for the call");
    let order: Vec<u64> = take_log().iter().map(|e| e >> 56).collect();
    c.eq(order, alloc::vec![3, 1, 1], "the ready thread ran before the server");

    // A deleted capability, one without the right to send, a thread that died.
    let copy = rt::alloc_slot();
    sys::cap_copy(s.slot, copy, rights::SEND, 0).unwrap();
    sys::cap_delete(copy).unwrap();
    let mut m = Msg::new(7, &[3]);
    let n = fast_during(|| {
        c.eq(ipc::call(copy, &mut m, FOREVER), Err(Error::InvalidCap), "a call through a deleted capability")
    });
    c.eq(n, 0, "general path");
    let nosend = rt::alloc_slot();
    sys::cap_copy(s.slot, nosend, rights::CONTROL, 0).unwrap();
    let n = fast_during(|| {
        c.eq(ipc::call(nosend, &mut m, FOREVER), Err(Error::NoRights), "a call without the right to send")
    });
    c.eq(n, 0, "general path");
    // A kept capability: the fastpath keeps a thread's last call capability while no
    // capability anywhere is removed or reduced. Called through twice (kept), then the
    // slot emptied, refilled with another badge, its send right taken.
    let kept = rt::alloc_slot();
    sys::cap_copy(s.slot, kept, rights::SEND | rights::CONTROL, 0x51).unwrap();
    let mut fast = 0;
    for _ in 0..3 {
        let mut m = Msg::new(7, &[3]);
        fast += fast_during(|| c.eq(ipc::call(kept, &mut m, FOREVER), Ok(()), "a call through a badged copy"));
        c.eq(m.word(2), 0x51, "its badge");
    }
    c.check(fast >= 2, "the fastpath carried calls through it");
    sys::cap_delete(kept).unwrap();
    let mut m = Msg::new(7, &[3]);
    c.eq(ipc::call(kept, &mut m, FOREVER), Err(Error::InvalidCap), "a call through the kept slot, emptied");
    sys::cap_copy(s.slot, kept, rights::SEND | rights::CONTROL, 0x52).unwrap();
    for _ in 0..2 {
        let mut m = Msg::new(7, &[3]);
        c.eq(ipc::call(kept, &mut m, FOREVER), Ok(()), "a call through the slot refilled");
        c.eq(m.word(2), 0x52, "the new capability's badge, not the kept one's");
    }
    // SAFETY: capabilities, not memory: nothing refers to the right taken.
    c.eq(
        unsafe { sys::unmap(abi::fpage::Fpage::caps(kept, 0, rights::SEND), abi::fpage::UNMAP_SELF) },
        Ok(()),
        "take the kept slot's send right",
    );
    let mut m = Msg::new(7, &[3]);
    let r = ipc::call(kept, &mut m, FOREVER);
    c.check(
        r == Err(Error::NoRights) || r == Err(Error::InvalidCap),
        "a call through the kept slot without its send right fails",
    );
    let gone = thread::spawn(server, 4, p - 20).unwrap();
    sys::sleep_us(2_000);
    // SAFETY: the thread is ours and holds nothing.
    c.eq(unsafe { sys::thread_destroy(gone.slot) }, Ok(()), "a waiting server thread destroyed");
    let n = fast_during(|| {
        c.eq(ipc::call(gone.slot, &mut m, FOREVER), Err(Error::InvalidCap), "a call to a destroyed thread")
    });
    c.eq(n, 0, "general path");

    // Timeouts: a bounded call; a bounded reply-and-wait.
    let mut m = Msg::new(7, &[4]);
    let n = fast_during(|| {
        c.eq(ipc::call(s.slot, &mut m, timeouts(INFINITE, 1_000_000)), Ok(()), "a call with a receive timeout")
    });
    c.eq(m.word(1), 5, "answered");
    c.eq(n, 1, "general path for the call");
    let mut m = Msg::new(7, &[4]);
    let n = fast_during(|| {
        c.eq(ipc::call(s.slot, &mut m, timeouts(1_000_000, INFINITE)), Ok(()), "a call with a send timeout")
    });
    c.eq(n, 1, "general path for the call");
    let me = rt::alloc_slot();
    sys::cap_copy(cap::SELF_THREAD, me, rights::SEND, 0).unwrap();
    TARGET.store(me, Ordering::SeqCst);
    ANSWER.store(0, Ordering::SeqCst);
    let _t = thread::spawn(caller, 0, p - 30).unwrap();
    let mut m = Msg::empty();
    c.eq(ipc::recv(RECV_ANY, &mut m, FOREVER), Ok(0), "receive a call");
    let mut r = Msg::new(1, &[m.word(1) + 10]);
    let n = fast_during(|| {
        c.eq(ipc::reply_wait(RECV_ANY, &mut r, timeouts(POLL, 5_000)), Err(Error::Timeout), "a bounded reply-and-wait")
    });
    c.eq(n, 0, "general path");
    sys::sleep_us(2_000);
    c.eq(ANSWER.load(Ordering::SeqCst), 16, "the caller got the reply");

    // A long message: seven words (one in the UTCB).
    let mut m = Msg::new(7, &[5, 1, 1, 1, 1, 1, 1]);
    let n = fast_during(|| c.eq(ipc::call(s.slot, &mut m, FOREVER), Ok(()), "a call with seven words"));
    c.eq((m.word(1), m.word(3)), (6, 7), "answered");
    c.eq(n, 1, "general path for the call");
    // Strings: one that fits takes the fastpath; one longer than the receiver's buffer
    // (512 bytes) or from a buffer that is not mapped gets the general path's error,
    // and the server goes on waiting.
    let text = [3u8; 100];
    ipc::set_send_string(&text);
    let mut m = Msg::new(7, &[6]).with_string();
    let n = fast_during(|| c.eq(ipc::call(s.slot, &mut m, FOREVER), Ok(()), "a call with a string"));
    c.eq((m.word(1), m.word(2) & 0xffff, m.word(4)), (7, 0, 100), "answered, the string received");
    c.eq(n, 2, "fastpath both ways");
    let long = [4u8; 600];
    ipc::set_send_string(&long);
    let mut m = Msg::new(7, &[6]).with_string();
    let n = fast_during(|| {
        c.eq(ipc::call(s.slot, &mut m, FOREVER), Err(Error::TooLong), "a string longer than the receiver's buffer")
    });
    c.eq(n, 0, "general path");
    ipc::utcb().send_buf_addr = 0x10;
    ipc::utcb().send_buf_len = 8;
    let mut m = Msg::new(7, &[6]).with_string();
    let n = fast_during(|| {
        c.eq(ipc::call(s.slot, &mut m, FOREVER), Err(Error::CopyFault), "a string from memory that is not mapped")
    });
    c.eq(n, 0, "general path");
    let mut m = Msg::new(7, &[7]);
    c.eq(ipc::call(s.slot, &mut m, FOREVER), Ok(()), "the server still waits");
    c.eq(m.word(1), 8, "and answers");

    // Two threads of one task whose buffers overlap (the receiver's starts 8 bytes into
    // the sender's string): the string arrives whole, as a copy that allows overlap makes
    // it, on the first call (buffers resolved) and on the later ones (kept).
    let area: &'static mut [u8] = alloc::vec![0u8; 1024].leak();
    let at = area.as_mut_ptr() as u64;
    let o = thread::spawn(overlap_server, at, p - 20).unwrap();
    sys::sleep_us(2_000);
    let mut fast = 0;
    for round in 0..3u64 {
        // SAFETY: the area is leaked (lives for the run); the server thread touches its
        // part only while this thread waits in the call.
        let send = unsafe { core::slice::from_raw_parts_mut(at as *mut u8, OVERLAP_LEN) };
        for (i, b) in send.iter_mut().enumerate() {
            *b = (i as u64 * 7 + 3 + round) as u8;
        }
        let want = overlap_sum(send);
        ipc::set_send_string(send);
        let mut m = Msg::new(7, &[round]).with_string();
        fast += fast_during(|| c.eq(ipc::call(o.slot, &mut m, FOREVER), Ok(()), "a string into an overlapping buffer"));
        c.eq((m.word(1), m.word(2)), (OVERLAP_LEN as u64, want), "the string arrived whole");
    }
    c.check(fast >= 2, "the calls took the fastpath");

    // The server waits for another thread only: the call waits for its turn.
    let x = rt::alloc_slot();
    sys::thread_create(cap::SELF_TASK, x, thread::alloc_utcb(), p - 25).unwrap();
    sys::cap_copy(x, ONE_SENDER_SLOT.load(Ordering::SeqCst), rights::SEND, 0).unwrap();
    let s3 = thread::spawn(recv_from_one, 0, p - 20).unwrap();
    sys::sleep_us(2_000);
    take_log();
    TARGET.store(s3.slot, Ordering::SeqCst);
    sys::thread_start(x, sender_entry as *const () as u64, stack(), 0).unwrap();
    let mut m = Msg::new(7, &[8]);
    let n = fast_during(|| {
        c.eq(ipc::call(s3.slot, &mut m, FOREVER), Ok(()), "a call to a server waiting for someone else")
    });
    c.eq(m.word(1), 9, "answered after the other sender");
    c.eq(n, 1, "general path for the call");
    let ev: Vec<u64> = take_log().iter().map(|e| (e >> 48) & 0xff).collect();
    c.eq(ev, alloc::vec![5, 1, 2], "the other sender's message came first");

    // A pending fault: the handler's reply resumes the thread (general path).
    TARGET.store(me, Ordering::SeqCst);
    let f = rt::alloc_slot();
    sys::thread_create(cap::SELF_TASK, f, thread::alloc_utcb(), p - 30).unwrap();
    sys::thread_set_fault_handler(f, me, 0xFA).unwrap();
    sys::thread_start(f, faulter as *const () as u64, stack(), 0).unwrap();
    ANSWER.store(0, Ordering::SeqCst);
    let mut m = Msg::empty();
    c.eq(ipc::recv(RECV_ANY, &mut m, FOREVER), Ok(0xFA), "the fault message");
    let mut r = Msg::new(0, &[m.word(3) + 3]);
    let n = fast_during(|| {
        c.eq(
            ipc::reply_wait(RECV_ANY, &mut r, FOREVER),
            Ok(0),
            "answer the fault and wait: the thread resumes and calls",
        );
    });
    c.eq(FAULTED_ON.load(Ordering::SeqCst), 1, "the thread went on after the fault");
    c.eq(n, 1, "general path for the fault's answer (the thread's call takes the fastpath)");
    c.eq(ipc::reply(&Msg::new(1, &[r.word(1) + 100])), Ok(()), "answer its call");
    sys::sleep_us(2_000);
    c.eq(ANSWER.load(Ordering::SeqCst), 106, "it got the answer");

    // The caller died before the reply: the reply part fails, the wait goes on.
    ANSWER.store(0, Ordering::SeqCst);
    TARGET.store(me, Ordering::SeqCst);
    let t = thread::spawn(caller, 0, p - 30).unwrap();
    let mut m = Msg::empty();
    c.eq(ipc::recv(RECV_ANY, &mut m, FOREVER), Ok(0), "receive a call");
    // SAFETY: the thread is ours and waits for our reply.
    c.eq(unsafe { sys::thread_destroy(t.slot) }, Ok(()), "the caller destroyed");
    let _u = thread::spawn(caller, 0, p - 30).unwrap();
    let mut r = Msg::new(1, &[0]);
    let n = fast_during(|| {
        c.eq(
            ipc::reply_wait(RECV_ANY, &mut r, FOREVER),
            Ok(0),
            "reply to the dead caller and wait: the next call comes",
        )
    });
    c.eq(n, 1, "general path for the reply (the next call takes the fastpath)");
    c.eq(ipc::reply(&Msg::new(1, &[20])), Ok(()), "answer it");
    sys::sleep_us(2_000);
    c.eq(ANSWER.load(Ordering::SeqCst), 21, "the second caller got its answer");
}

/// Slot (in this task) of the capability `recv_from_one` receives from.
static ONE_SENDER_SLOT: AtomicU64 = AtomicU64::new(0);

/// Receive from the `sender` thread only, then serve anyone.
fn recv_from_one(_: u64) {
    let mut m = Msg::empty();
    let r = ipc::recv(ONE_SENDER_SLOT.load(Ordering::SeqCst), &mut m, FOREVER);
    log(6, 5, r.map_or(0xEE, |_| m.word(1)));
    server(6);
}

// ------------------------------------------------------------------ differential

/// 64-bit xorshift.
fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// One run of `ops` random IPCs from `seed`; returns the event log.
fn random_run(seed: u64, ops: usize, servers: &[u64; 3], listener: u64, targets: &[u64], prios: &[u64; 3]) -> Vec<u64> {
    let mut prio = *prios;
    // (The third server keeps its priority, above ours.)
    for (s, p) in servers.iter().zip(prios).take(2) {
        sys::thread_set_priority(*s, *p).unwrap();
    }
    // Every thread waits in its receive, as at the start of the other run.
    sys::sleep_us(10_000);
    take_log();
    let mut st = seed;
    let data: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    for i in 0..ops as u64 {
        let r = next(&mut st);
        match r % 16 {
            // Calls, most of them short (the fastpath's shape).
            0..=9 => {
                let to = targets[(r >> 8) as usize % targets.len()];
                let words = if (r >> 16).is_multiple_of(4) { 7 + (r >> 20) % 4 } else { (r >> 20) % 7 };
                let w: Vec<u64> = (0..words).map(|k| i * 100 + k).collect();
                let mut m = Msg::new(10 + (r >> 24) % 5, &w);
                if (r >> 28).is_multiple_of(8) {
                    ipc::set_send_string(&data[..((r >> 32) % 300) as usize]);
                    m = m.with_string();
                }
                let res = ipc::call(to, &mut m, FOREVER);
                log(0, 6, err(res));
                if res.is_ok() {
                    log(0, 7, m.label() << 40 | m.word(1) << 8 | m.words().len() as u64);
                    log(0, 8, m.word(2) << 16 | m.word(3) << 8 | m.word(4));
                }
            }
            // Sends that poll (the server may be busy: then Timeout).
            10 | 11 => {
                let to = servers[(r >> 8) as usize % 3];
                log(0, 9, err(ipc::send(to, &Msg::new(30, &[i]), timeouts(POLL, INFINITE))));
            }
            // Make the listener ready (it runs when everything more important blocks).
            12 | 13 => log(0, 10, err(ipc::send(listener, &Msg::new(31, &[i]), timeouts(POLL, INFINITE)))),
            // Swap the two lower servers' priorities (they stay distinct: no round robin,
            // whose turns depend on the clock; the third, above us, stays there).
            _ => {
                let (a, b) = (0, 1);
                prio.swap(a, b);
                log(
                    0,
                    11,
                    err(sys::thread_set_priority(servers[a], prio[a])) << 8
                        | err(sys::thread_set_priority(servers[b], prio[b])),
                );
            }
        }
    }
    // What the last operations made ready runs now, into this run's log.
    sys::sleep_us(10_000);
    take_log()
}

fn differential(c: &mut Checks, p: u64) {
    // One server above us: made before we lower our priority (a thread may not give
    // another more than its own).
    let servers = [
        thread::spawn(server, 11, p - 25).unwrap().slot,
        thread::spawn(server, 12, p - 35).unwrap().slot,
        thread::spawn(server, 13, p - 15).unwrap().slot,
    ];
    c.eq(sys::thread_set_priority(cap::SELF_THREAD, p - 20), Ok(()), "lower our priority below one server");
    let p = p - 20;
    let l = thread::spawn(listener, 14, p - 10).unwrap().slot;
    sys::sleep_us(5_000);
    // Capabilities: plain, badged, deleted, without SEND.
    let mut targets = servers.to_vec();
    for (i, s) in servers.iter().enumerate() {
        let b = rt::alloc_slot();
        sys::cap_copy(*s, b, rights::SEND, 0x100 + i as u64).unwrap();
        targets.push(b);
    }
    let dead = rt::alloc_slot();
    sys::cap_copy(servers[0], dead, rights::SEND, 0).unwrap();
    sys::cap_delete(dead).unwrap();
    targets.push(dead);
    let nosend = rt::alloc_slot();
    sys::cap_copy(servers[1], nosend, rights::CONTROL, 0).unwrap();
    targets.push(nosend);
    let prios = [p - 5, p - 15, p + 5];

    for seed in [0x9E37_79B9_7F4A_7C15u64, 0xD1B5_4A32_D192_ED03, 0x2545_F491_4F6C_DD1D] {
        let on0 = set_fastpath(true);
        let with = random_run(seed, 600, &servers, l, &targets, &prios);
        let on1 = set_fastpath(false);
        let without = random_run(seed, 600, &servers, l, &targets, &prios);
        let off = set_fastpath(true) - on1;
        println!(
            "  seed {seed:#x}: {} events, {} IPCs by the fastpath with it on, {} with it off",
            with.len(),
            on1 - on0,
            off
        );
        c.check(on1 - on0 >= 300, "the fastpath carried many of the run's IPCs");
        c.eq(off, 0, "none with it off");
        c.check(with.len() > 1000, "the run logged its events");
        let first = with.iter().zip(&without).position(|(a, b)| a != b);
        if let Some(i) = first {
            println!("  first difference at event {i}: {:#x} (on) vs {:#x} (off)", with[i], without[i]);
        }
        c.eq(with.len(), without.len(), "as many events with the fastpath as without");
        c.eq(first, None, "the same events in the same order with the fastpath on and off");
    }
}

fn echo_strings(_: u64) {
    echo_api::string_loop()
}

/// Two pages of our heap, page-aligned, the first filled with `0xAA`, the second with
/// `0xBB`; returns their addresses.
fn two_pages() -> (u64, u64) {
    let layout = core::alloc::Layout::from_size_align(8192, 4096).expect("layout");
    // SAFETY: a layout of non-zero size; the pages are never freed (the test ends).
    let p = unsafe { alloc::alloc::alloc_zeroed(layout) };
    // SAFETY: the allocation is ours, 8192 bytes.
    unsafe {
        core::ptr::write_bytes(p, 0xAA, 4096);
        core::ptr::write_bytes(p.add(4096), 0xBB, 4096);
    }
    (p as u64, p as u64 + 4096)
}

/// `len` bytes at `va` (our own memory, which nothing else refers to meanwhile).
fn bytes(va: u64, len: usize) -> &'static mut [u8] {
    // SAFETY: the callers name pages of this test's own that are mapped and that no
    // other reference points into while the slice is used.
    unsafe { core::slice::from_raw_parts_mut(va as *mut u8, len) }
}

/// Map our page `src` at `at` (read and write), after taking away what was there.
fn remap(c: &mut Checks, src: u64, at: u64) {
    // SAFETY: `at` is in the scratch area, used by this test only, and nothing refers
    // to it while it changes.
    c.eq(
        unsafe { sys::unmap(abi::fpage::Fpage::mem(at, 12, 0), abi::fpage::UNMAP_SELF) },
        Ok(()),
        "unmap the scratch page",
    );
    // SAFETY: as above; `src` stays mapped too.
    c.eq(
        unsafe { sys::mem_map(cap::SELF_TASK, src, at, 1, abi::mem::READ | abi::mem::WRITE) },
        Ok(()),
        "map a page at the scratch address",
    );
}

/// The fastpath keeps each thread's last resolved string buffers (the kernel's
/// `task::CachedRange`), to be walked again only after a mapping was taken away: here a
/// string goes to a string echo from a scratch address and comes back into another,
/// and between the calls other pages are mapped there, or none.
fn kept_translations(c: &mut Checks, p: u64) {
    const LEN: usize = 200;
    let echo = thread::spawn(echo_strings, 0, p - 20).unwrap().slot;
    sys::sleep_us(2_000);
    let tag = abi::ipc::Tag::new(echo_api::STRING, 0).0;
    let (a, b) = two_pages();
    let (from, to) = (rt::layout::SCRATCH, rt::layout::SCRATCH + 0x10_000);
    let mut back = [0u8; LEN];
    // `from` shows A: the string is A's, twice (the second time the kept buffers).
    remap(c, a, from);
    for round in 0..2 {
        let mut r = (0, 0, 0, 0);
        let n = fast_during(|| r = ipc::call_regs_string(echo, tag, 0, bytes(from, LEN), &mut back));
        c.eq((r.0, r.2, r.3), (0, LEN as u64, LEN), "a string from the scratch page, echoed");
        c.check(back.iter().all(|x| *x == 0xAA), "it is page A's");
        c.eq(n, 2, if round == 0 { "the fastpath both ways" } else { "the fastpath both ways, the buffers kept" });
    }
    // B mapped where A was: the same call must read B.
    remap(c, b, from);
    let mut r = (0, 0, 0, 0);
    let n = fast_during(|| r = ipc::call_regs_string(echo, tag, 0, bytes(from, LEN), &mut back));
    c.eq((r.0, r.3), (0, LEN), "the same call after the page under it changed");
    c.check(back.iter().all(|x| *x == 0xBB), "the string is the new page's (B), not the kept frame's (A)");
    c.eq(n, 2, "the fastpath both ways");
    // The answer lands in a scratch page: A, then B mapped there instead.
    remap(c, a, to);
    let n = fast_during(|| r = ipc::call_regs_string(echo, tag, 0, &[0x11; LEN], bytes(to, LEN)));
    c.eq((r.0, r.3), (0, LEN), "an answer into the scratch page");
    c.check(bytes(a, LEN).iter().all(|x| *x == 0x11), "it landed in page A");
    remap(c, b, to);
    let n2 = fast_during(|| r = ipc::call_regs_string(echo, tag, 0, &[0x22; LEN], bytes(to, LEN)));
    c.eq((r.0, r.3), (0, LEN), "the same call after the page under the buffer changed");
    c.check(bytes(b, LEN).iter().all(|x| *x == 0x22), "the answer landed in the new page (B)");
    c.check(bytes(a, LEN).iter().all(|x| *x == 0x11), "and not in the kept frame (A)");
    c.eq((n, n2), (2, 2), "the fastpath both ways");
    // Nothing mapped at the send buffer (not touched first, as `ipc` would): the
    // general path's CopyFault, not the kept frame. (Sent from just before, so kept.)
    remap(c, a, from);
    let n = fast_during(|| r = ipc::call_regs_string(echo, tag, 0, bytes(from, LEN), &mut back));
    c.check(r.0 == 0 && back.iter().all(|x| *x == 0x11), "page A at the send address again");
    c.eq(n, 2, "the fastpath both ways");
    // SAFETY: as in `remap`.
    c.eq(
        unsafe { sys::unmap(abi::fpage::Fpage::mem(from, 12, 0), abi::fpage::UNMAP_SELF) },
        Ok(()),
        "unmap the send page",
    );
    let u = ipc::utcb();
    u.send_buf_addr = from;
    u.send_buf_len = LEN as u64;
    let mut regs = [abi::ipc::Tag(tag).with_string().0, 0, 0, 0, 0, 0, 0];
    let mut e = 0;
    let n = fast_during(|| e = ipc::raw_ipc(abi::sys::IPC_CALL, echo, 0, FOREVER, &mut regs).0);
    c.eq(e, Error::CopyFault as u64, "a string from the unmapped page: CopyFault");
    c.eq(n, 0, "the general path");
    let n = fast_during(|| r = ipc::call_regs_string(echo, tag, 0, &[0x33; LEN], &mut back));
    c.check(r.0 == 0 && back.iter().all(|x| *x == 0x33), "the echo still answers");
    c.eq(n, 2, "the fastpath both ways");
    // A kept receive buffer whose page loses its write right: the answer must not be
    // written there (nor may the fastpath carry it).
    remap(c, a, to);
    let n = fast_during(|| r = ipc::call_regs_string(echo, tag, 0, &[0x44; LEN], bytes(to, LEN)));
    c.check(
        r.0 == 0 && bytes(a, LEN).iter().all(|x| *x == 0x44),
        "an answer into page A at the receive address (kept)",
    );
    c.eq(n, 2, "the fastpath both ways");
    // SAFETY: as in `remap`; the page stays mapped, read-only.
    c.eq(
        unsafe { sys::unmap(abi::fpage::Fpage::mem(to, 12, abi::mem::WRITE), abi::fpage::UNMAP_SELF) },
        Ok(()),
        "take our write right to it",
    );
    let out = [0x55u8; LEN];
    ipc::set_send_string(&out);
    let u = ipc::utcb();
    u.recv_buf_addr = to;
    u.recv_buf_len = LEN as u64;
    let mut regs = [abi::ipc::Tag(tag).with_string().0, 0, 0, 0, 0, 0, 0];
    let n = fast_during(|| e = ipc::raw_ipc(abi::sys::IPC_CALL, echo, 0, FOREVER, &mut regs).0);
    c.eq(e, Error::CopyFault as u64, "an answer into the read-only page: CopyFault");
    c.check(bytes(a, LEN).iter().all(|x| *x == 0x44), "and nothing written into it");
    c.eq(n, 1, "the fastpath carried the call, not the answer");
    let mut last = 0;
    for (k, fill) in [0x66u8, 0x77].into_iter().enumerate() {
        last = fast_during(|| r = ipc::call_regs_string(echo, tag, 0, &[fill; LEN], &mut back));
        c.check(r.0 == 0 && back.iter().all(|x| *x == fill), "the echo still answers");
        rt::println!("  after the refused answer, call {k}: {last} IPCs by the fastpath");
    }
    c.eq(last, 2, "then the fastpath both ways again");
    // A string across a page boundary, answered into another range across one, three
    // times: translations kept over two pages, which the lean fastpath (buffers within
    // one page, `task::CachedRange::kept_one_page`) must not take for its own; the
    // general fastpath copies them in pieces.
    let want: [u8; LEN] = core::array::from_fn(|i| i as u8 ^ 0x5A);
    let (send_at, land_at) = (a + 4096 - 100, two_pages().0 + 4096 - 60);
    bytes(send_at, LEN).copy_from_slice(&want);
    let mut fast = 0;
    for _ in 0..3 {
        bytes(land_at, LEN).fill(0);
        fast += fast_during(|| r = ipc::call_regs_string(echo, tag, 0, bytes(send_at, LEN), bytes(land_at, LEN)));
        c.eq((r.0, r.3), (0, LEN), "a string across two pages, answered into two pages");
        c.check(bytes(land_at, LEN) == &want[..], "it arrives whole, both ways");
    }
    // (At least 4 of the 6 IPCs: a timer tick that readies a more important thread
    // in between sends one the general path's way.)
    c.check(fast >= 4, &alloc::format!("the fastpath carried them, the two-page buffers kept ({fast} of 6)"));
}

fn main() -> i32 {
    let mut c = Checks::new();
    let machine = rt::alloc_slot();
    c.eq(rt::env::lookup("machine", machine), Ok(()), "the machine capability");
    MACHINE.store(machine, Ordering::SeqCst);
    c.eq(sys::machine_fastpath(machine, true).map(|_| ()), Ok(()), "the fastpath is on");
    let one = rt::alloc_slot();
    ONE_SENDER_SLOT.store(one, Ordering::SeqCst);
    let p = thread::my_priority();
    c.check(p >= 40, "room for threads below us");
    conditions(&mut c, p);
    kept_translations(&mut c, p);
    differential(&mut c, p);
    c.finish("fastpath_test")
}
