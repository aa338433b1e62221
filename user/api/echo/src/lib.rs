//! The `echo` test server's protocol, and the register-only loop used to measure IPC.
#![no_std]
#![forbid(unsafe_code)]

use abi::Error;
use rt::server::{Args, Decode};

/// Reply with the same words followed by the badge the server saw.
pub const ECHO: u64 = 0x21;
/// Reply with the received string reversed (as a string); MR1 = its length.
pub const REVERSE: u64 = 0x22;
/// Call the thread in slot MR1 with ECHO(MR2 + 1); reply with its first word + 1.
pub const FORWARD: u64 = 0x23;
/// Sleep MR1 microseconds, then reply.
pub const SLOW: u64 = 0x24;
/// Reply, then stop serving.
pub const QUIT: u64 = 0x25;
/// Crash (write through a null pointer) without replying.
pub const CRASH: u64 = 0x26;
/// Reply with the received string as it came (the kernel copies it both ways).
pub const STRING: u64 = 0x27;

// Its labels lie in its range of the registry (`rt::labels`), checked when it builds.
const _: () = assert!(rt::labels::all_in(rt::labels::ECHO, &[ECHO, REVERSE, FORWARD, SLOW, QUIT, CRASH, STRING]));

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    Echo(&'a [u64]),
    Reverse(&'a [u8]),
    Forward { slot: u64, word: u64 },
    Slow { us: u64 },
    Quit,
    Crash,
    String(&'a [u8]),
}

impl<'a> Decode<'a> for Request<'a> {
    fn decode(a: &Args<'a>) -> Result<Self, Error> {
        Ok(match a.msg.label() {
            ECHO => Request::Echo(a.all()),
            REVERSE => Request::Reverse(a.bytes()),
            FORWARD => {
                let [slot, word] = a.words()?;
                Request::Forward { slot, word }
            }
            SLOW => {
                let [us] = a.words()?;
                Request::Slow { us }
            }
            QUIT => Request::Quit,
            CRASH => Request::Crash,
            STRING => Request::String(a.bytes()),
            _ => return Err(Error::Unsupported),
        })
    }
}

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

/// The string echo loop used to measure string IPC against its size (the L4 paper's
/// Figure 3): wait for the first call, then answer each with the string it carried and
/// MR1 = its length, register-only as `fast_loop` (`reply_wait_regs_string`). Two
/// buffers take turns: the answer goes from the one the request landed in while the next
/// request lands in the other.
pub fn string_loop() -> ! {
    use rt::ipc::{self, Msg};
    // Page-aligned: each buffer is one page (touched once before each receive).
    #[repr(C, align(4096))]
    struct Page([u8; 4096]);
    let mut pages = [Page([0; 4096]), Page([0; 4096])];
    let [Page(a), Page(b)] = &mut pages;
    let mut bufs = [a, b];
    let mut m = Msg::empty();
    ipc::set_recv_buffer(bufs[0]);
    let _ = ipc::recv(ipc::RECV_ANY, &mut m, ipc::FOREVER);
    let mut n = ipc::received_string_len().min(4096);
    let mut cur = 0;
    loop {
        let [a, b] = &mut bufs;
        let (full, free) = if cur == 0 { (a, b) } else { (b, a) };
        let (e, _, _, _, got) =
            ipc::reply_wait_regs_string(abi::ipc::Tag::new(STRING, 1).0, n as u64, &full[..n], &mut free[..]);
        cur ^= 1;
        n = if e == 0 { got.min(4096) } else { 0 };
    }
}
