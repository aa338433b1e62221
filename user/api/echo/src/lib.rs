//! The `echo` test server's protocol, and the register-only loop used to measure IPC.
#![no_std]
#![forbid(unsafe_code)]

rt::protocol! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Request<'a> in rt::labels::ECHO;
    client client via super::call;
    requests {
        /// Reply with the same words followed by the badge the server saw.
        ECHO = 0x21, fn echo(; rest words) => Echo(&'a [u64]);
        /// Reply with the received string reversed (as a string); MR1 = its length.
        REVERSE = 0x22, fn reverse(; bytes s) => Reverse(&'a [u8]);
        /// Call the thread in slot MR1 with ECHO(MR2 + 1); reply with its first word + 1.
        FORWARD = 0x23, fn forward(slot, word) => Forward { slot: u64, word: u64 };
        /// Sleep MR1 microseconds, then reply.
        SLOW = 0x24, fn slow(us) => Slow { us: u64 };
        /// Reply, then stop serving.
        QUIT = 0x25, fn quit() => Quit;
        /// Crash (write through a null pointer) without replying.
        CRASH = 0x26, fn crash() => Crash;
        /// Reply with the received string as it came (the kernel copies it both ways).
        STRING = 0x27, fn string(; bytes s) => String(&'a [u8]);
    }
}

/// How the stubs call: echo's replies do not follow the MR1 = 0 convention (ECHO answers
/// the words it was sent), so a stub answers the reply as it came.
fn call(srv: u64, m: &mut rt::ipc::Msg) -> Result<(), abi::Error> {
    rt::ipc::call(srv, m, rt::ipc::FOREVER)
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
