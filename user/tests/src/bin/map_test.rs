//! Map, grant and demap through IPC, A → B → C, checked by touching the pages.
//!
//! `map_test` is A; `map_test peer` is B and C: they open receive windows, accept map
//! items, and forward pages when asked. Because all three run the same binary, A can
//! plant probe threads in B's and C's tasks (it holds their task capabilities), make
//! itself their fault handler, and see each touch either succeed or fault.
#![no_std]
#![no_main]

use abi::fpage::{Fpage, GRANT};
use abi::{cap, mem, rights, Error};
use core::sync::atomic::{AtomicU64, Ordering};
use rt::env::spawn;
use rt::ipc::{self, timeouts, Msg, FOREVER, POLL};
use rt::{sys, thread};
use tests::Checks;

rt::entry!(main);

const WINDOW: u64 = rt::layout::SCRATCH;
const PROBE_UTCB: u64 = 0x0000_7e00_0000_0000;
const PROBE_STACK: u64 = 0x0000_7d00_0000_0000;
/// Slot in each peer (and in A) holding a SEND capability to A for probe reports.
const REPORT: u64 = 62;
/// Slot in B holding a SEND capability to C.
const TO_C: u64 = 61;
const PROBE_BADGE: u64 = 0xF00D;
/// A receive window (16 MiB) at the top of user space: it holds the receiver's UTCB.
const UTCB_WINDOW: u64 = abi::layout::USER_END - (1 << 24);

mod label {
    pub const FORWARD: u64 = 10;
    pub const CAPINFO: u64 = 11;
    pub const PREFAULT: u64 = 12;
    pub const FORWARD_CAP: u64 = 13;
}

// ---------------------------------------------------------------- the peer (B, C)

fn peer(window: u64) -> i32 {
    ipc::set_windows(Fpage::mem(window, 24, abi::mem::RIGHTS_MASK), Fpage::caps(96, 4, abi::rights::ALL), Fpage(0));
    let mut reply: Option<Msg> = None;
    loop {
        let mut m = Msg::empty();
        let r = ipc::serve_next(reply.take(), &mut m);
        if r.is_err() {
            continue;
        }
        reply = Some(if m.items() > 0 {
            Msg::new(1, &[m.item(0).0])
        } else {
            match m.label() {
                label::FORWARD => {
                    // MR1 = address, MR2 = rights, MR3 = grant?, MR4 = destination slot
                    let mut f = Msg::new(1, &[]);
                    f.push_item(
                        Fpage::mem(m.word(1), 12, m.word(2)),
                        m.word(1) | if m.word(3) != 0 { GRANT } else { 0 },
                    );
                    let r = ipc::call(m.word(4), &mut f, FOREVER);
                    Msg::new(1, &[r.err().map_or(0, |e| e as u64), f.word(1)])
                }
                label::FORWARD_CAP => {
                    // MR1 = slot, MR2 = grant?, MR3 = destination slot: to the same slot there.
                    let mut f = Msg::new(1, &[]);
                    f.push_item(
                        Fpage::caps(m.word(1), 0, abi::rights::ALL),
                        (m.word(1) << 12) | if m.word(2) != 0 { GRANT } else { 0 },
                    );
                    let r = ipc::call(m.word(3), &mut f, FOREVER);
                    Msg::new(1, &[r.err().map_or(0, |e| e as u64)])
                }
                label::PREFAULT => {
                    sys::prefault(m.word(1), m.word(2));
                    Msg::new(1, &[0])
                }
                label::CAPINFO => {
                    let r = sys::cap_info(m.word(1));
                    Msg::new(1, &[r.map_or_else(|e| e as u64, |_| 0)])
                }
                _ => Msg::new(1, &[Error::NoSys as u64]),
            }
        });
    }
}

// ---------------------------------------------------------------- probes

static PROBES: AtomicU64 = AtomicU64::new(0);

/// Runs in a peer's (or A's own) task: touch the page, report the value to A.
extern "C" fn probe_entry(arg: u64) -> ! {
    let addr = arg & !0xfff;
    // SAFETY: the probe exists to touch this address; a fault is reported to A,
    // which destroys the probe.
    unsafe {
        if arg & 1 != 0 {
            core::ptr::write_volatile(addr as *mut u64, 0x5EED);
        }
        let v = core::ptr::read_volatile(addr as *const u64);
        let _ = ipc::send(REPORT, &Msg::new(2, &[v]), FOREVER);
    }
    sys::thread_exit()
}

#[derive(Debug, PartialEq, Eq)]
enum Touch {
    Value(u64),
    /// Page fault: (address, write?)
    Fault(u64, bool),
}

/// Touch `addr` from inside the task in `task_slot` (whose thread is in `peer`, or
/// None for our own task). The probe has no pager, so every fault comes to us.
fn touch(task_slot: u64, addr: u64, write: bool) -> Touch {
    touch_in(task_slot, None, addr, write)
}

fn touch_in(task_slot: u64, peer: Option<u64>, addr: u64, write: bool) -> Touch {
    let n = PROBES.fetch_add(1, Ordering::Relaxed);
    let t = rt::alloc_slot();
    let stack = PROBE_STACK + n * 0x10000;
    // The probe's stack must be present: its task's own pager provides it.
    match peer {
        Some(p) => {
            ask(p, &mut Msg::new(label::PREFAULT, &[stack, 4]));
        }
        None => sys::prefault(stack, 4),
    }
    sys::thread_create(task_slot, t, PROBE_UTCB + n * 4096, thread::my_priority()).expect("probe thread");
    sys::thread_set_pager(t, u64::MAX, 0).unwrap();
    let me = rt::alloc_slot();
    sys::cap_copy(cap::SELF_THREAD, me, rights::SEND, 0).unwrap();
    sys::thread_set_fault_handler(t, me, PROBE_BADGE).unwrap();
    sys::thread_start(t, probe_entry as *const () as u64, stack + 4 * 4096 - 8, addr | write as u64).unwrap();
    let mut m = Msg::empty();
    let r = ipc::recv(ipc::RECV_ANY, &mut m, timeouts(POLL, 2_000_000));
    // SAFETY: the probe thread belongs to this test and is done or stopped.
    let _ = unsafe { sys::thread_destroy(t) };
    rt::free_slot(t);
    rt::free_slot(me);
    match r {
        Ok(_) if m.tag().is_fault() => Touch::Fault(m.word(2), m.word(4) & 2 != 0),
        Ok(_) => Touch::Value(m.word(1)),
        Err(e) => panic!("probe did not report: {:?}", e),
    }
}

fn ask(peer: u64, m: &mut Msg) -> u64 {
    ipc::call(peer, m, FOREVER).expect("peer answers");
    m.word(1)
}

fn main() -> i32 {
    match rt::args().split(' ').nth(1) {
        Some("peer") => return peer(WINDOW),
        Some("utcb-peer") => return peer(UTCB_WINDOW),
        _ => {}
    }
    let mut c = Checks::new();
    let (b, cc) = (rt::alloc_slot_pair(), rt::alloc_slot_pair());
    let (b_task, c_task) = (b + 1, cc + 1);
    c.check(spawn("map_test peer", b).is_ok() && spawn("map_test peer", cc).is_ok(), "spawn B and C");
    let report = rt::alloc_slot();
    sys::cap_copy(cap::SELF_THREAD, report, rights::SEND, PROBE_BADGE).unwrap();
    for task in [b_task, c_task, cap::SELF_TASK] {
        sys::cap_give(task, report, REPORT, rights::SEND).unwrap();
    }
    sys::cap_give(b_task, cc, TO_C, rights::SEND).unwrap();

    // A's page P, mapped read-write to B.
    let p = rt::layout::POOL;
    sys::prefault(p, 1); // from our pager, read-write
                         // SAFETY: P was just mapped read-write for this program.
    unsafe { core::ptr::write_volatile(p as *mut u64, 0xA11CE) };
    let mut m = Msg::new(1, &[]);
    m.push_item(Fpage::mem(p, 12, mem::READ | mem::WRITE), p);
    let landed = Fpage(ask(b, &mut m));
    c.eq(landed.base(), WINDOW, "B's window received the page where the hot spot says");
    c.eq(touch_in(b_task, Some(b), WINDOW, false), Touch::Value(0xA11CE), "B reads A's value");
    c.eq(touch_in(b_task, Some(b), WINDOW, true), Touch::Value(0x5EED), "B writes through its read-write mapping");
    // SAFETY: P is ours; B's write is visible because the frame is shared.
    c.eq(unsafe { core::ptr::read_volatile(p as *const u64) }, 0x5EED, "A sees B's write: the frame is shared");

    // B maps it on to C read-only: rights shrink along the chain.
    let mut f = Msg::new(label::FORWARD, &[WINDOW, mem::READ, 0, TO_C]);
    c.eq(ask(b, &mut f), 0, "B maps the page to C, read-only");
    c.eq(touch_in(c_task, Some(cc), WINDOW, false), Touch::Value(0x5EED), "C reads it");
    c.eq(touch_in(c_task, Some(cc), WINDOW, true), Touch::Fault(WINDOW, true), "C cannot write a read-only mapping");

    // Demap write rights from everything derived from P: B becomes read-only.
    // SAFETY: A keeps its own mapping (no UNMAP_SELF).
    c.eq(unsafe { sys::unmap(Fpage::mem(p, 12, mem::WRITE), 0) }, Ok(()), "A takes write rights back");
    c.eq(touch_in(b_task, Some(b), WINDOW, true), Touch::Fault(WINDOW, true), "B can no longer write");
    c.eq(touch_in(b_task, Some(b), WINDOW, false), Touch::Value(0x5EED), "but still read");
    // Rights never grow: B (read-only now) asks to map read-write to C at another address.
    let mut f = Msg::new(label::FORWARD, &[WINDOW, mem::READ | mem::WRITE, 0, TO_C]);
    c.eq(ask(b, &mut f), 0, "B maps its read-only page to C asking for write");
    c.eq(touch_in(c_task, Some(cc), WINDOW, true), Touch::Fault(WINDOW, true), "C still cannot write");

    // Full demap: recursive through B to C; A keeps its own.
    // SAFETY: as above.
    c.eq(unsafe { sys::unmap(Fpage::mem(p, 12, 0), 0) }, Ok(()), "A demaps P from everyone it gave it to");
    c.eq(touch_in(b_task, Some(b), WINDOW, false), Touch::Fault(WINDOW, false), "B lost the page");
    c.eq(touch_in(c_task, Some(cc), WINDOW, false), Touch::Fault(WINDOW, false), "C lost it too (derived from B)");
    c.eq(touch(cap::SELF_TASK, p, false), Touch::Value(0x5EED), "A keeps its own mapping");

    // Grant: A gives page Q to B and loses it.
    let q = 0x0000_6000_0010_0000u64;
    sys::prefault(q, 1);
    // SAFETY: Q was just mapped for this program; it is not used after the grant.
    unsafe { core::ptr::write_volatile(q as *mut u64, 0xBEEF) };
    let mut m = Msg::new(1, &[]);
    m.push_item(Fpage::mem(q, 12, mem::READ | mem::WRITE), (WINDOW + 0x10000) | GRANT);
    let landed = Fpage(ask(b, &mut m));
    c.eq(landed.base(), WINDOW + 0x10000, "granted page landed at the hot spot");
    c.eq(touch_in(b_task, Some(b), WINDOW + 0x10000, false), Touch::Value(0xBEEF), "B has the granted page");
    c.eq(touch(cap::SELF_TASK, q, false), Touch::Fault(q, false), "A lost it");
    // SAFETY: demapping what A no longer holds changes nothing of A's.
    c.eq(unsafe { sys::unmap(Fpage::mem(q, 12, 0), 0) }, Ok(()), "A cannot demap what it granted away");
    c.eq(touch_in(b_task, Some(b), WINDOW + 0x10000, false), Touch::Value(0xBEEF), "B keeps it");

    // Mapping what one does not hold maps nothing.
    let mut m = Msg::new(1, &[]);
    m.push_item(Fpage::mem(0x0000_6100_0000_0000, 12, mem::READ), WINDOW + 0x20000);
    ask(b, &mut m);
    c.eq(
        touch_in(b_task, Some(b), WINDOW + 0x20000, false),
        Touch::Fault(WINDOW + 0x20000, false),
        "nothing arrives from an unmapped source",
    );

    // A receiver without a window refuses items.
    let e = rt::alloc_slot_pair();
    spawn("echo", e).unwrap();
    let mut m = Msg::new(echo_api::ECHO, &[]);
    m.push_item(Fpage::mem(p, 12, mem::READ), 0);
    c.eq(ipc::call(e, &mut m, FOREVER), Err(Error::NoWindow), "no receive window: refused");
    let mut m = Msg::new(1, &[]);
    m.push_item(Fpage::mem(p + 0x1000, 16, mem::READ), 0);
    c.eq(ipc::call(b, &mut m, FOREVER), Err(Error::InvalidArg), "malformed flexpage refused");

    // Capabilities travel the same way and are revoked recursively.
    let mut m = Msg::new(1, &[]);
    m.push_item(Fpage::caps(e, 0, rights::SEND), 100 << 12);
    let landed = Fpage(ask(b, &mut m));
    c.eq(landed.base(), 100, "capability landed in B's slot 100");
    c.eq(ask(b, &mut Msg::new(label::CAPINFO, &[100])), 0, "B holds it");
    // SAFETY: only derived capabilities are affected.
    c.eq(unsafe { sys::unmap(Fpage::caps(e, 0, 0), 0) }, Ok(()), "A revokes what it gave");
    c.eq(ask(b, &mut Msg::new(label::CAPINFO, &[100])), Error::InvalidCap as u64, "B's copy is gone");
    c.eq(sys::cap_info(e).map(|i| i.0), Ok(cap::THREAD), "A's own stays");

    // A message whose second item would land on the receiver's UTCB is refused whole:
    // the first item is not applied either.
    let d = rt::alloc_slot_pair();
    c.check(spawn("map_test utcb-peer", d).is_ok(), "spawn D, whose window holds its UTCB");
    sys::cap_give(d + 1, report, REPORT, rights::SEND).unwrap();
    let first = UTCB_WINDOW + 0x10_0000;
    let mut m = Msg::new(1, &[]);
    m.push_item(Fpage::mem(p, 12, mem::READ), first);
    m.push_item(Fpage::mem(p, 12, mem::READ), abi::layout::MAIN_UTCB);
    c.eq(ipc::call(d, &mut m, FOREVER), Err(Error::AlreadyMapped), "an item onto the receiver's UTCB is refused");
    c.eq(touch_in(d + 1, Some(d), first, false), Touch::Fault(first, false), "and the item before it was not applied");
    let mut m = Msg::new(1, &[]);
    m.push_item(Fpage::mem(p, 12, mem::READ), first);
    c.eq(Fpage(ask(d, &mut m)).base(), first, "the same first item alone is applied");
    c.eq(touch_in(d + 1, Some(d), first, false), Touch::Value(0x5EED), "D reads the page");
    cycles(&mut c, report, b, cc);
    c.finish("map_test")
}

/// Slot in C and D holding a SEND capability to B; in C, one to D.
const TO_B: u64 = 60;
const TO_D: u64 = 59;

/// Pages sent back onto the mappings they came from, across two
/// tasks (B → C → B) and three (B → C → D → B), on a frame from sigma0: nothing may
/// change, and sigma0's FREE must still revoke every copy, so that the next owner of
/// the frame is alone with it.
fn cycles(c: &mut Checks, report: u64, b: u64, cc: u64) {
    let s0 = rt::alloc_slot();
    c.eq(rt::env::lookup("sigma0", s0), Ok(()), "sigma0, as the manifest grants");
    let d = rt::alloc_slot_pair();
    c.check(spawn("map_test peer", d).is_ok(), "spawn D");
    sys::cap_give(d + 1, report, REPORT, rights::SEND).unwrap();
    sys::cap_give(cc + 1, b, TO_B, rights::SEND).unwrap();
    sys::cap_give(cc + 1, d, TO_D, rights::SEND).unwrap();
    sys::cap_give(d + 1, b, TO_B, rights::SEND).unwrap();
    let (b_task, c_task, d_task) = (b + 1, cc + 1, d + 1);

    let s = 0x0000_6000_0020_0000u64;
    let mut m = Msg::new(sigma0_api::ALLOC, &[0, s]);
    c.eq(tests::call_with_window(s0, Fpage::mem(s, 12, abi::mem::RIGHTS_MASK), &mut m), Ok(()), "a frame from sigma0");
    let pa = m.word(2);
    // Only root moves frames from one program to another (a live update's successor).
    for (from, to) in [(2, 3), (3, 2), (0, 0)] {
        let mut m = Msg::new(sigma0_api::MOVE, &[pa, 0, from, to]);
        c.eq(
            tests::call_with_window(s0, Fpage(0), &mut m).and_then(|_| abi::check(m.word(1))),
            Err(Error::NoRights),
            "a program cannot move frames at sigma0",
        );
    }
    // SAFETY: the page was just mapped read-write from sigma0.
    unsafe { core::ptr::write_volatile(s as *mut u64, 0xC1C1E) };
    let at = WINDOW + 0x30000;
    let mut m = Msg::new(1, &[]);
    m.push_item(Fpage::mem(s, 12, mem::READ | mem::WRITE), at);
    c.eq(Fpage(ask(b, &mut m)).base(), at, "A maps it to B");
    c.eq(ask(b, &mut Msg::new(label::FORWARD, &[at, mem::READ | mem::WRITE, 0, TO_C])), 0, "B maps it to C");
    c.eq(
        ask(cc, &mut Msg::new(label::FORWARD, &[at, mem::READ | mem::WRITE, 0, TO_B])),
        0,
        "C sends it back onto B's mapping",
    );
    c.eq(touch_in(c_task, Some(cc), at, false), Touch::Value(0xC1C1E), "C keeps the page: a map keeps its source");
    c.eq(touch_in(b_task, Some(b), at, false), Touch::Value(0xC1C1E), "B keeps it");
    c.eq(
        ask(cc, &mut Msg::new(label::FORWARD, &[at, mem::READ | mem::WRITE, 1, TO_B])),
        0,
        "C grants it back onto B's mapping",
    );
    c.eq(
        touch_in(c_task, Some(cc), at, false),
        Touch::Value(0xC1C1E),
        "a grant onto an ancestor changes nothing either",
    );
    c.eq(ask(cc, &mut Msg::new(label::FORWARD, &[at, mem::READ | mem::WRITE, 0, TO_D])), 0, "C maps it to D");
    c.eq(
        ask(d, &mut Msg::new(label::FORWARD, &[at, mem::READ | mem::WRITE, 0, TO_B])),
        0,
        "D sends it back onto B's mapping",
    );
    for (name, task, peer) in [("B", b_task, b), ("C", c_task, cc), ("D", d_task, d)] {
        c.eq(touch_in(task, Some(peer), at, false), Touch::Value(0xC1C1E), name);
    }

    // The same with a capability: B → C → B, then A revokes.
    let e = rt::alloc_slot_pair();
    spawn("echo", e).unwrap();
    let mut m = Msg::new(1, &[]);
    m.push_item(Fpage::caps(e, 0, rights::SEND), 100 << 12);
    c.eq(Fpage(ask(b, &mut m)).base(), 100, "A gives B a capability (slot 100)");
    c.eq(ask(b, &mut Msg::new(label::FORWARD_CAP, &[100, 0, TO_C])), 0, "B gives it to C");
    c.eq(ask(cc, &mut Msg::new(label::FORWARD_CAP, &[100, 0, TO_B])), 0, "C sends it back onto B's");
    c.eq(ask(cc, &mut Msg::new(label::CAPINFO, &[100])), 0, "C keeps it");
    c.eq(ask(b, &mut Msg::new(label::CAPINFO, &[100])), 0, "B keeps it");
    // SAFETY: only derived capabilities are affected.
    c.eq(unsafe { sys::unmap(Fpage::caps(e, 0, 0), 0) }, Ok(()), "A revokes what it gave");
    c.eq(ask(b, &mut Msg::new(label::CAPINFO, &[100])), Error::InvalidCap as u64, "B's copy is gone");
    c.eq(ask(cc, &mut Msg::new(label::CAPINFO, &[100])), Error::InvalidCap as u64, "C's copy is gone");

    // Every copy is still below sigma0's: FREE takes them all.
    let mut m = Msg::new(sigma0_api::FREE, &[pa, 0]);
    c.eq(tests::call_with_window(s0, Fpage(0), &mut m), Ok(()), "A gives the frame back to sigma0");
    for (name, task, peer) in [("B", b_task, b), ("C", c_task, cc), ("D", d_task, d)] {
        c.eq(touch_in(task, Some(peer), at, false), Touch::Fault(at, false), name);
    }
    // The frame's next owner (asking for these very frames) writes a secret nobody sees.
    let v = 0x0000_6000_0030_0000u64;
    let mut m = Msg::new(sigma0_api::PHYS, &[pa, 0, v]);
    c.eq(
        tests::call_with_window(s0, Fpage::mem(v, 12, abi::mem::RIGHTS_MASK), &mut m),
        Ok(()),
        "the freed frame, allocated again",
    );
    // SAFETY: the page was just mapped read-write from sigma0.
    unsafe { core::ptr::write_volatile(v as *mut u64, 0x5EC2E7) };
    for (name, task, peer) in [("B", b_task, b), ("C", c_task, cc), ("D", d_task, d)] {
        c.eq(touch_in(task, Some(peer), at, false), Touch::Fault(at, false), name);
    }
}
