//! Helpers shared by Scion's test and benchmark programs.
#![no_std]

extern crate alloc;

pub mod segdev;
pub mod virtio;

use abi::Error;
use core::fmt::Debug;
use rt::ipc::{self, Msg};
use rt::{println, proto};

/// Counts checks; prints each one; the program's exit code says whether all passed.
pub struct Checks {
    pub passed: u32,
    pub failed: u32,
}

impl Checks {
    pub fn new() -> Self {
        Checks { passed: 0, failed: 0 }
    }

    pub fn check(&mut self, ok: bool, what: &str) -> bool {
        if ok {
            self.passed += 1;
            println!("  ok   {}", what);
        } else {
            self.failed += 1;
            println!("  FAIL {}", what);
        }
        ok
    }

    pub fn eq<T: PartialEq + Debug>(&mut self, got: T, want: T, what: &str) -> bool {
        if got == want {
            self.check(true, what)
        } else {
            self.failed += 1;
            println!("  FAIL {}: got {:?}, want {:?}", what, got, want);
            false
        }
    }

    pub fn finish(&self, name: &str) -> i32 {
        println!("{}: {} checks passed, {} failed", name, self.passed, self.failed);
        if self.failed == 0 {
            0
        } else {
            1
        }
    }
}

impl Default for Checks {
    fn default() -> Self {
        Self::new()
    }
}

/// Ask root to start `cmdline`; the new program's thread capability lands in `slot`
/// (SEND) and its task capability in `slot + 1` (CONTROL), so take `slot` from
/// `rt::alloc_slot_pair`. Returns its id.
pub fn spawn(cmdline: &str, slot: u64) -> Result<u64, Error> {
    ipc::set_send_string(cmdline.as_bytes());
    let mut m = Msg::new(proto::SPAWN, &[slot]).with_string();
    ipc::call(abi::cap::PARENT, &mut m, ipc::FOREVER)?;
    abi::check(m.word(1))?;
    Ok(m.word(2))
}

/// Labels the `echo` server understands.
pub mod echo {
    /// Reply with the same words followed by the badge the server saw.
    pub const ECHO: u64 = 1;
    /// Reply with the received string reversed (as a string); MR1 = its length.
    pub const REVERSE: u64 = 2;
    /// Call the thread in slot MR1 with ECHO(MR2 + 1); reply with its first word + 1.
    pub const FORWARD: u64 = 3;
    /// Sleep MR1 microseconds, then reply.
    pub const SLOW: u64 = 4;
    /// Reply, then stop serving.
    pub const QUIT: u64 = 5;
    /// Crash (write through a null pointer) without replying.
    pub const CRASH: u64 = 6;
    /// Reply with the received string as it came (the kernel copies it both ways).
    pub const STRING: u64 = 7;

    /// The register-only echo loop used to measure IPC: wait for the first call, then
    /// answer each with its own tag and first word.
    pub fn fast_loop() -> ! {
        use rt::ipc::{self, Msg};
        let mut m = Msg::empty();
        let _ = ipc::recv(ipc::RECV_ANY, &mut m, ipc::FOREVER);
        let (mut tag, mut w) = (m.mr[0], m.mr[1]);
        loop {
            let (e, _, t, w1) = ipc::reply_wait_regs(tag, w);
            if e == 0 {
                tag = t;
                w = w1;
            }
        }
    }
}
