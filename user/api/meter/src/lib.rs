//! The metering program (the Cue paper's "metering process"): a CPU-bound program
//! that counts the units of work it gets done, so that the CPU a transfer leaves to
//! others is measured (`cargo xtask bench cue`). It works only while started; between
//! units it looks for a request without waiting.
#![no_std]
#![forbid(unsafe_code)]

use abi::Error;
use rt::ipc::Msg;

/// Reply MR2 = units done since it began, MR3 = 1 if it is working.
pub const READ: u64 = 0xb0;
/// Start working (counting on from where it stopped).
pub const START: u64 = 0xb1;
/// Stop working: it sleeps in its receive until the next request.
pub const STOP: u64 = 0xb2;

// Its labels lie in its range of the registry (`rt::labels`), checked when it builds.
const _: () = assert!(rt::labels::all_in(rt::labels::METER, &[READ, START, STOP]));

/// One unit of work: `ITERATIONS` steps of xorshift64 (the same loop as the Linux
/// meter's, `bench/linux/net.c`).
pub const ITERATIONS: u32 = 1000;

pub fn unit(mut x: u64) -> u64 {
    for _ in 0..ITERATIONS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// (units so far, working?)
pub fn read(srv: u64) -> Result<(u64, bool), Error> {
    let mut m = Msg::new(READ, &[]);
    rt::server::request(srv, &mut m)?;
    Ok((m.word(2), m.word(3) != 0))
}

pub fn start(srv: u64) -> Result<(), Error> {
    rt::server::request(srv, &mut Msg::new(START, &[]))
}

pub fn stop(srv: u64) -> Result<(), Error> {
    rt::server::request(srv, &mut Msg::new(STOP, &[]))
}
