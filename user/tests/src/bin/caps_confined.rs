//! Started by caps_test with nothing but PARENT, PEER and PAGER (its own memory server,
//! for requests about its own memory: every paged program has it): tries to reach every
//! other slot and reports (to PEER) how many sends were refused as they should be.
#![no_std]
#![no_main]

use abi::{cap, Error};
use rt::ipc::{self, timeouts, Msg, POLL};

rt::entry!(main);

fn main() -> i32 {
    let mut refused = 0u64;
    let mut wrong = 0u64;
    for slot in ((cap::PEER + 1)..cap::SLOTS + 8).filter(|&s| s != cap::PAGER) {
        match ipc::send(slot, &Msg::new(1, &[]), timeouts(POLL, POLL)) {
            Err(Error::InvalidCap) => refused += 1,
            _ => wrong += 1,
        }
    }
    // Its own task capability is not a thread.
    let task_ok = ipc::send(cap::SELF_TASK, &Msg::new(1, &[]), timeouts(POLL, POLL)) == Err(Error::WrongType);
    let mut m = Msg::new(2, &[refused, wrong, task_ok as u64]);
    let _ = ipc::call(cap::PEER, &mut m, ipc::FOREVER);
    0
}
