//! x87 and SSE state belongs to each thread: a new thread starts clean, SSE runs in
//! user mode, and two tasks that fill every x87 and XMM register (and MXCSR) with
//! patterns of their own, switching hundreds of times, never see each other's.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU64, Ordering};
use rt::env::spawn;
use rt::ipc::{self, Msg, FOREVER};
use rt::{sys, thread};
use tests::fpu::{
    self,
    peer::{CHECK, QUIT, SET},
};
use tests::Checks;

rt::entry!(main);

const MINE: u64 = 0xA11CE;
const PEERS: u64 = 0xB0B;

/// 1: the new thread saw clean registers; 2: it did not.
static FRESH: AtomicU64 = AtomicU64::new(0);

fn fresh_thread(_: u64) {
    let clean = fpu::is_clean(&fpu::save());
    FRESH.store(if clean { 1 } else { 2 }, Ordering::SeqCst);
    // Leave a pattern behind for the next thread to (not) find.
    fpu::load(&fpu::pattern(0xDEAD));
}

/// Start `fresh_thread` and wait (yielding) until it has looked: what it saw.
fn fresh_thread_sees() -> u64 {
    FRESH.store(0, Ordering::SeqCst);
    if thread::spawn(fresh_thread, 0, thread::my_priority()).is_err() {
        return 0;
    }
    tests::wait_until(200, || FRESH.load(Ordering::SeqCst) != 0);
    FRESH.load(Ordering::SeqCst)
}

const MOVER: u64 = 0x5157;

/// Loads its pattern, then answers each call with whether its registers still hold it
/// (wherever it runs by then).
fn mover(_: u64) {
    // Each call carries a round number: the registers must hold the pattern of the last
    // round (loaded before the move), then take this round's.
    fpu::load(&fpu::pattern(MOVER));
    let mut m = Msg::empty();
    let _ = ipc::recv(ipc::RECV_ANY, &mut m, FOREVER);
    let mut last = MOVER;
    loop {
        let ok = fpu::same_state(&fpu::save(), &fpu::pattern(last));
        last = MOVER + 1 + m.word(1);
        fpu::load(&fpu::pattern(last));
        m = Msg::new(1, &[ok as u64]);
        let _ = ipc::reply_wait(ipc::RECV_ANY, &mut m, FOREVER);
    }
}

/// With two CPUs: the registers follow a thread that moves between them, whether it
/// moves itself while running (its CPU saves them as it leaves) or is moved while it
/// waits with its state still in the other CPU's registers (that CPU saves them when
/// asked).
fn across_cpus(c: &mut Checks, mine: &fpu::Fx) {
    let mut kept = 0;
    for i in 0..20u64 {
        // A new pattern each time: a stale copy of an older one must not pass.
        let p = fpu::pattern(MINE + 1 + i);
        fpu::load(&p);
        c.eq(sys::thread_set_cpu(abi::cap::SELF_THREAD, (i + 1) % 2), Ok(()), "move this thread");
        sys::yield_now();
        if fpu::same_state(&fpu::save(), &p) && sys::thread_cpu(abi::cap::SELF_THREAD) == Ok((i + 1) % 2) {
            kept += 1;
        }
    }
    fpu::load(mine);
    c.eq(kept, 20, "this thread's registers follow it across 20 moves between the CPUs");
    let Ok(t) = thread::spawn(mover, 0, thread::my_priority()) else {
        c.check(false, "start the mover thread");
        return;
    };
    let mut ok = 0;
    for i in 0..10u64 {
        c.eq(sys::thread_set_cpu(t.slot, (i + 1) % 2), Ok(()), "move the waiting thread");
        if ask(t.slot, 1, i) == Some(true) && sys::thread_cpu(t.slot) == Ok((i + 1) % 2) {
            ok += 1;
        }
        // Use the registers here meanwhile (this thread is on CPU 0 again at the end).
        fpu::load(mine);
    }
    c.eq(ok, 10, "a waiting thread moved to the other CPU finds its registers there, 10 times");
}

fn ask(peer: u64, label: u64, seed: u64) -> Option<bool> {
    let mut m = Msg::new(label, &[seed]);
    ipc::call(peer, &mut m, FOREVER).ok()?;
    Some(m.word(1) == 1)
}

fn main() -> i32 {
    let mut c = Checks::new();
    c.check(fpu::is_clean(&fpu::save()), "the first thread starts with clean x87/SSE registers");
    c.eq(fpu::sse_add(1.5, 2.25), [3.75; 4], "SSE arithmetic runs in user mode");
    let before = fpu::save();

    let peer = rt::alloc_slot_pair();
    c.check(spawn("fpu_peer", peer).is_ok(), "spawn fpu_peer (another task)");
    c.eq(ask(peer, SET, PEERS), Some(true), "the peer starts clean although this task used SSE");
    let now = fpu::save();
    c.check(fpu::same_state(&now, &before), "this task's registers are as it left them");
    c.check(!fpu::same_state(&now, &fpu::pattern(PEERS)), "not the peer's");

    let mine = fpu::pattern(MINE);
    fpu::load(&mine);
    let (mut peer_ok, mut mine_ok) = (0, 0);
    const ROUNDS: u32 = 300;
    for i in 0..ROUNDS {
        if ask(peer, CHECK, PEERS) == Some(true) {
            peer_ok += 1;
        }
        if i % 3 == 0 {
            sys::yield_now();
        }
        if fpu::same_state(&fpu::save(), &mine) {
            mine_ok += 1;
        }
    }
    c.eq(peer_ok, ROUNDS, "the peer kept its registers across every switch");
    c.eq(mine_ok, ROUNDS, "this task kept its registers across every switch");

    // A new thread in this task while the registers hold this thread's pattern.
    c.eq(fresh_thread_sees(), 1, "a new thread starts clean");
    c.check(fpu::same_state(&fpu::save(), &mine), "and leaves this thread's registers alone");
    // The dead thread's registers are not handed to the next thread that starts.
    c.eq(fresh_thread_sees(), 1, "a thread started after one died with a pattern loaded starts clean");
    c.eq(ask(peer, CHECK, PEERS), Some(true), "the peer still has its own");
    let _ = ask(peer, QUIT, 0);
    if sys::smp_info().cpus >= 2 {
        across_cpus(&mut c, &mine);
        c.eq(sys::thread_set_cpu(abi::cap::SELF_THREAD, 0), Ok(()), "back to CPU 0");
    }
    c.finish("fpu_test")
}
