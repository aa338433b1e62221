//! The metering program (the Cue paper's "metering process"): a CPU-bound program
//! that counts the units of work it gets done, so that the CPU a transfer leaves to
//! others is measured (`cargo xtask bench cue`). It works only while started; between
//! units it looks for a request without waiting.
#![no_std]
#![forbid(unsafe_code)]

rt::protocol! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Request in rt::labels::METER;
    client client;
    requests {
        /// Reply MR2 = units done since it began, MR3 = 1 if it is working.
        READ = 0xb0, fn read() -> [units, working] => Read;
        /// Start working (counting on from where it stopped).
        START = 0xb1, fn start() -> [] => Start;
        /// Stop working: it sleeps in its receive until the next request.
        STOP = 0xb2, fn stop() -> [] => Stop;
    }
}

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
