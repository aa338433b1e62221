//! Confinement and rights: a task reaches only what its capabilities name; copies
//! can only lose rights; deleted capabilities and dead objects are gone.
#![no_std]
#![no_main]

use abi::{cap, rights, Error};
use echo_api as echo;
use rt::env::spawn;
use rt::ipc::{self, timeouts, Msg, FOREVER, POLL};
use rt::sys;
use tests::Checks;

rt::entry!(main);

fn main() -> i32 {
    let mut c = Checks::new();
    let echo_slot = rt::alloc_slot_pair();
    let echo_task = echo_slot + 1;
    c.check(spawn("echo", echo_slot).is_ok(), "spawn echo");
    let mut m = Msg::new(echo::ECHO, &[1]);
    c.eq(ipc::call(echo_slot, &mut m, FOREVER), Ok(()), "call with a SEND capability");

    // Empty and out-of-range slots.
    let empty = rt::alloc_slot();
    c.eq(ipc::call(empty, &mut Msg::new(1, &[]), FOREVER), Err(Error::InvalidCap), "empty slot");
    c.eq(ipc::call(cap::SLOTS, &mut Msg::new(1, &[]), FOREVER), Err(Error::InvalidCap), "slot past the end");
    c.eq(ipc::call(u64::MAX - 1, &mut Msg::new(1, &[]), FOREVER), Err(Error::InvalidCap), "huge slot");

    // Rights reduction.
    let no_send = rt::alloc_slot();
    c.eq(sys::cap_copy(echo_slot, no_send, 0, 0), Ok(()), "copy without rights");
    c.eq(ipc::call(no_send, &mut Msg::new(echo::ECHO, &[]), FOREVER), Err(Error::NoRights), "no SEND right: refused");
    let regrow = rt::alloc_slot();
    c.eq(sys::cap_copy(no_send, regrow, rights::ALL, 0), Ok(()), "copy with a wider mask");
    c.eq(sys::cap_info(regrow).map(|i| i.1), Ok(0), "rights did not grow");
    c.eq(sys::cap_info(echo_slot).map(|i| (i.0, i.1)), Ok((cap::THREAD, rights::SEND)), "info: a thread, SEND only");
    c.eq(sys::thread_set_priority(echo_slot, 10), Err(Error::NoRights), "no CONTROL right on someone else's thread");
    c.eq(
        sys::cap_info(echo_task).map(|i| (i.0, i.1)),
        Ok((cap::TASK, rights::CONTROL)),
        "task capability with CONTROL",
    );
    let weak_task = rt::alloc_slot();
    sys::cap_copy(echo_task, weak_task, 0, 0).unwrap();
    c.eq(
        sys::cap_give(weak_task, echo_slot, 30, rights::SEND),
        Err(Error::NoRights),
        "give through a task capability without CONTROL",
    );
    c.eq(
        sys::cap_give(echo_slot, echo_slot, 30, rights::SEND),
        Err(Error::WrongType),
        "give through a thread capability",
    );
    c.eq(sys::cap_copy(echo_slot, echo_slot, rights::SEND, 0), Err(Error::SlotInUse), "copy onto an occupied slot");

    // Delete.
    let tmp = rt::alloc_slot();
    sys::cap_copy(echo_slot, tmp, rights::SEND, 0).unwrap();
    c.eq(sys::cap_delete(tmp), Ok(()), "delete a capability");
    c.eq(ipc::call(tmp, &mut Msg::new(echo::ECHO, &[]), FOREVER), Err(Error::InvalidCap), "deleted capability is gone");
    c.eq(sys::cap_delete(tmp), Err(Error::InvalidCap), "delete twice");

    // A program with no capabilities beyond PARENT, PEER and PAGER can reach nobody else.
    let conf = rt::alloc_slot_pair();
    c.check(spawn("caps_confined", conf).is_ok(), "spawn a confined program");
    let mut m = Msg::empty();
    let r = ipc::recv(ipc::RECV_ANY, &mut m, FOREVER);
    c.check(r.is_ok(), "confined program reports");
    // Every slot past PEER but its own memory server's (PAGER).
    let total = cap::SLOTS + 8 - (cap::PEER + 1) - 1;
    c.eq(
        (m.word(1), m.word(2), m.word(3)),
        (total, 0, 1),
        "every other slot refused, its task capability is no thread",
    );
    let _ = ipc::reply(&Msg::new(0, &[]));

    // Destroying the task kills the capability.
    c.eq(sys::task_destroy(echo_task), Ok(()), "destroy echo's task through our CONTROL capability");
    c.eq(
        ipc::send(echo_slot, &Msg::new(echo::ECHO, &[]), timeouts(POLL, POLL)),
        Err(Error::InvalidCap),
        "thread of a destroyed task is unreachable",
    );
    c.eq(sys::cap_info(echo_task), Err(Error::InvalidCap), "and its task capability is dead");
    c.finish("caps_test")
}
