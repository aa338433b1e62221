//! IPC for programs: messages of up to 64 words (MR0 = tag), strings, timeouts.

use abi::ipc::{self as aipc, Tag};
use abi::{check, sys, utcb_off, Error, Utcb};
use core::arch::asm;

pub use abi::ipc::{timeouts, FOREVER, INFINITE, POLL, RECV_ANY};

/// A message: `mr[0]` is the tag, `mr[1..=words]` the words.
#[derive(Clone)]
pub struct Msg {
    pub mr: [u64; aipc::MAX_MRS],
}

impl Msg {
    pub fn new(label: u64, words: &[u64]) -> Msg {
        let mut m = Msg { mr: [0; aipc::MAX_MRS] };
        m.mr[0] = Tag::new(label, words.len() as u64).0;
        m.mr[1..=words.len()].copy_from_slice(words);
        m
    }
    pub fn empty() -> Msg {
        Msg { mr: [0; aipc::MAX_MRS] }
    }
    pub fn tag(&self) -> Tag {
        Tag(self.mr[0])
    }
    pub fn label(&self) -> u64 {
        self.tag().label()
    }
    pub fn words(&self) -> &[u64] {
        let n = (self.tag().words() as usize).min(aipc::MAX_MRS - 1);
        &self.mr[1..=n]
    }
    /// Number of message registers used after the tag (words and typed items).
    fn used(&self) -> usize {
        ((self.tag().words() + self.tag().typed()) as usize).min(aipc::MAX_MRS - 1)
    }
    pub fn word(&self, i: usize) -> u64 {
        self.mr[i]
    }
    /// Append a typed item (map, or grant with `abi::fpage::GRANT` in `control`) after the
    /// words; `control` bits 63..12 are the hot spot. Returns the item's index.
    pub fn push_item(&mut self, fp: abi::fpage::Fpage, control: u64) -> usize {
        let tag = self.tag();
        let (u, t) = (tag.words() as usize, tag.typed() as usize);
        self.mr[u + t + 1] = fp.0;
        self.mr[u + t + 2] = control;
        self.mr[0] = tag.with_items((t / 2 + 1) as u64).0;
        t / 2
    }
    /// Typed item `i` as received: the flexpage where it landed.
    pub fn item(&self, i: usize) -> abi::fpage::Fpage {
        let u = self.tag().words() as usize;
        abi::fpage::Fpage(self.mr[u + 1 + 2 * i])
    }
    pub fn items(&self) -> usize {
        self.tag().typed() as usize / 2
    }
    /// Mark the message as carrying the string set with `set_send_string`.
    pub fn with_string(mut self) -> Msg {
        self.mr[0] = self.tag().with_string().0;
        self
    }
}

/// The address of this thread's UTCB: one load, and unique to the thread.
pub fn utcb_addr() -> u64 {
    let addr: u64;
    // SAFETY: the kernel bases FS at the current thread's UTCB and stores the UTCB's
    // address in `user[0]`; reading it has no side effect.
    unsafe {
        asm!("mov {}, fs:[{off}]", out(reg) addr, off = const utcb_off::USER, options(nostack, readonly, preserves_flags))
    };
    addr
}

/// This thread's UTCB (FS is based at it; its `user[0]` holds its own address).
#[allow(clippy::mut_from_ref)]
pub fn utcb() -> &'static mut Utcb {
    let addr: u64;
    // SAFETY: the kernel bases FS at the current thread's UTCB and stores the UTCB's
    // address in `user[0]`; reading it has no side effect.
    unsafe { asm!("mov {}, fs:[{off}]", out(reg) addr, off = const utcb_off::USER, options(nostack, readonly)) };
    // SAFETY: the UTCB is a page mapped for this thread alone for its whole life.
    unsafe { &mut *(addr as *mut Utcb) }
}

/// The kernel copies strings only between present pages (it does not page-fault on a
/// thread's behalf in the middle of an IPC), so buffers are touched first: the pager
/// maps any page that is not there yet.
#[inline(always)]
fn touch(buf: &[u8], write: bool) {
    if buf.is_empty() {
        return; // nothing to make present (and the pointer of an empty slice may dangle)
    }
    // One byte of each page: the first byte, then (out of line: a buffer within one
    // page is the usual case) the start of each further page up to the last byte's.
    let (first, last) = (buf.as_ptr() as usize, buf.as_ptr() as usize + (buf.len() - 1));
    touch_byte(first, write);
    if first ^ last > 0xfff {
        touch_pages(first, last, write);
    }
}

/// `touch` for the pages after the first: each page's first byte, up to `last`'s page.
#[inline(never)]
#[cold]
fn touch_pages(first: usize, last: usize, write: bool) {
    let mut at = (first | 0xfff) + 1;
    while at <= last {
        touch_byte(at, write);
        at += 0x1000;
    }
}

/// Read the byte at `at` (and write it back for a buffer we own mutably: `write`).
#[inline(always)]
fn touch_byte(at: usize, write: bool) {
    let p = at as *mut u8;
    // SAFETY: `touch`'s callers pass addresses within the buffer it was given; reading
    // (and writing back what was read) changes nothing but makes the page present.
    unsafe {
        let v = core::ptr::read_volatile(p);
        if write {
            core::ptr::write_volatile(p, v);
        }
    }
}

/// Offer a receive buffer for strings (the receiver's consent to a copy) to the next
/// IPC that receives; that IPC takes the offer back, so offer it before each.
#[inline]
pub fn set_recv_buffer(buf: &mut [u8]) {
    touch(buf, true);
    let u = utcb();
    u.recv_buf_addr = buf.as_mut_ptr() as u64;
    u.recv_buf_len = buf.len() as u64;
}

/// Open receive windows for typed items (0 closes one): where mapped memory may land,
/// which capability slots may be filled, which I/O ports may be received.
pub fn set_windows(mem: abi::fpage::Fpage, caps: abi::fpage::Fpage, io: abi::fpage::Fpage) {
    let u = utcb();
    u.recv_mem = mem.0;
    u.recv_caps = caps.0;
    u.recv_io = io.0;
}

/// Set the string the next message with a string flag carries.
#[inline]
pub fn set_send_string(s: &[u8]) {
    touch(s, false);
    let u = utcb();
    u.send_buf_addr = s.as_ptr() as u64;
    u.send_buf_len = s.len() as u64;
}

/// Length of the string received with the last message.
pub fn received_string_len() -> usize {
    utcb().recv_str_len as usize
}

/// Low-level IPC: registers in, registers out. Returns (error, badge).
#[inline(always)]
fn raw(n: u64, dest: u64, src: u64, to: u64, m: &mut [u64; 7]) -> (u64, u64) {
    let (err, badge);
    // SAFETY: the kernel reads and writes only the declared registers (rcx and r11
    // are clobbered by syscall); memory it touches is the UTCB and buffers the caller
    // named, which the kernel checks.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") n => err,
            inlateout("rdi") dest => badge,
            inlateout("rsi") src => _,
            inlateout("rdx") to => _,
            inlateout("r10") m[0],
            inlateout("r8") m[1],
            inlateout("r9") m[2],
            inlateout("r12") m[3],
            inlateout("r13") m[4],
            inlateout("r14") m[5],
            inlateout("r15") m[6],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    // The receive buffer was offered for this IPC only: a buffer left offered would
    // outlive what it points into (a local, a freed vector), and a later message with
    // a string — a hostile server's answer to a call that expects none — would be
    // written there.
    if n != sys::IPC_SEND && n != sys::IPC_REPLY {
        let u = utcb();
        u.recv_buf_addr = 0;
        u.recv_buf_len = 0;
    }
    (err, badge)
}

fn put(msg: &Msg) -> [u64; 7] {
    let top = msg.used();
    if top >= aipc::REG_MRS {
        let u = utcb();
        u.mr[aipc::REG_MRS..=top].copy_from_slice(&msg.mr[aipc::REG_MRS..=top]);
    }
    let mut r = [0u64; 7];
    r.copy_from_slice(&msg.mr[..7]);
    r
}

fn get(msg: &mut Msg, r: &[u64; 7]) {
    msg.mr[..7].copy_from_slice(r);
    let top = msg.used();
    if top >= aipc::REG_MRS {
        let u = utcb();
        msg.mr[aipc::REG_MRS..=top].copy_from_slice(&u.mr[aipc::REG_MRS..=top]);
    }
}

/// Send `msg` to the thread in `dest`.
pub fn send(dest: u64, msg: &Msg, to: u64) -> Result<(), Error> {
    let mut r = put(msg);
    check(raw(sys::IPC_SEND, dest, 0, to, &mut r).0)
}

/// Receive from `src` (a thread slot or `RECV_ANY`): returns the sender's badge.
pub fn recv(src: u64, msg: &mut Msg, to: u64) -> Result<u64, Error> {
    let mut r = [0u64; 7];
    let (e, badge) = raw(sys::IPC_RECV, 0, src, to, &mut r);
    check(e)?;
    get(msg, &r);
    Ok(badge)
}

/// Send `msg` to `dest` and wait for its reply, which replaces `msg`.
pub fn call(dest: u64, msg: &mut Msg, to: u64) -> Result<(), Error> {
    let mut r = put(msg);
    let (e, _) = raw(sys::IPC_CALL, dest, 0, to, &mut r);
    check(e)?;
    get(msg, &r);
    Ok(())
}

/// Reply to the last caller.
pub fn reply(msg: &Msg) -> Result<(), Error> {
    let mut r = put(msg);
    check(raw(sys::IPC_REPLY, 0, 0, 0, &mut r).0)
}

/// Keep the right to answer the last caller in capability slot `slot`, to answer it
/// later with `send(slot, …)` (one shot) while serving others meanwhile.
pub fn save_reply(slot: u64) -> Result<(), Error> {
    // SAFETY: SAVE_REPLY only writes a capability slot.
    check(unsafe { crate::sys::syscall(sys::SAVE_REPLY, slot, 0, 0, 0, 0, 0) }[0])
}

/// Reply to the last caller (if any is still waiting) and receive the next message.
pub fn reply_wait(src: u64, msg: &mut Msg, to: u64) -> Result<u64, Error> {
    let mut r = put(msg);
    let (e, badge) = raw(sys::IPC_REPLY_WAIT, 0, src, to, &mut r);
    check(e)?;
    get(msg, &r);
    Ok(badge)
}

/// A server's step: answer the previous request (`reply`, if any) and wait for the next
/// one from anybody, which lands in `msg`. Returns the sender's badge.
pub fn serve_next(reply: Option<Msg>, msg: &mut Msg) -> Result<u64, Error> {
    match reply {
        Some(r) => {
            *msg = r;
            reply_wait(RECV_ANY, msg, FOREVER)
        }
        None => recv(RECV_ANY, msg, FOREVER),
    }
}

/// The cheapest call round trip: register-only words, for measurements and servers
/// that want to avoid the `Msg` copy. Returns (error, tag, first word).
#[inline(always)]
pub fn call_regs(dest: u64, tag: u64, w1: u64) -> (u64, u64, u64) {
    let mut r = [tag, w1, 0, 0, 0, 0, 0];
    let (e, _) = raw(sys::IPC_CALL, dest, 0, FOREVER, &mut r);
    (e, r[0], r[1])
}

/// Register-only reply-and-wait. Returns (error, badge, tag, first word).
#[inline(always)]
pub fn reply_wait_regs(tag: u64, w1: u64) -> (u64, u64, u64, u64) {
    let mut r = [tag, w1, 0, 0, 0, 0, 0];
    let (e, badge) = raw(sys::IPC_REPLY_WAIT, 0, RECV_ANY, FOREVER, &mut r);
    (e, badge, r[0], r[1])
}

/// A register-only call carrying a string each way, as lean as `call_regs` (no `Msg`):
/// `send` goes with the call (the tag's string flag is set here), the reply's string
/// lands in `recv`. Returns (error, tag, first word, length of the string received).
#[inline(always)]
pub fn call_regs_string(dest: u64, tag: u64, w1: u64, send: &[u8], recv: &mut [u8]) -> (u64, u64, u64, usize) {
    set_send_string(send);
    set_recv_buffer(recv);
    let mut r = [Tag(tag).with_string().0, w1, 0, 0, 0, 0, 0];
    let (e, _) = raw(sys::IPC_CALL, dest, 0, FOREVER, &mut r);
    (e, r[0], r[1], received_string_len())
}

/// Register-only reply-and-wait with a string each way: the answer carries `send`, the
/// next request's string lands in `recv`. Returns (error, badge, tag, first word,
/// length of the string received).
#[inline(always)]
pub fn reply_wait_regs_string(tag: u64, w1: u64, send: &[u8], recv: &mut [u8]) -> (u64, u64, u64, u64, usize) {
    set_send_string(send);
    set_recv_buffer(recv);
    let mut r = [Tag(tag).with_string().0, w1, 0, 0, 0, 0, 0];
    let (e, badge) = raw(sys::IPC_REPLY_WAIT, 0, RECV_ANY, FOREVER, &mut r);
    (e, badge, r[0], r[1], received_string_len())
}

/// Register-only receive from anybody, the message's string (if any) landing in `recv`.
/// Returns (error, badge, tag, first word, length of the string received).
#[inline(always)]
pub fn recv_regs_string(recv: &mut [u8]) -> (u64, u64, u64, u64, usize) {
    set_recv_buffer(recv);
    let mut r = [0u64; 7];
    let (e, badge) = raw(sys::IPC_RECV, 0, RECV_ANY, FOREVER, &mut r);
    (e, badge, r[0], r[1], received_string_len())
}

/// Register-only reply (`tag` and one word, no string) and wait for the next message from
/// anybody, its string (if any) landing in `recv`. Returns (error, badge, tag, first
/// word, length of the string received).
#[inline(always)]
pub fn reply_regs_wait_string(tag: u64, w1: u64, recv: &mut [u8]) -> (u64, u64, u64, u64, usize) {
    set_recv_buffer(recv);
    let mut r = [tag, w1, 0, 0, 0, 0, 0];
    let (e, badge) = raw(sys::IPC_REPLY_WAIT, 0, RECV_ANY, FOREVER, &mut r);
    (e, badge, r[0], r[1], received_string_len())
}

/// Raw IPC for tests that must pass malformed values (bad tags, bad slots).
pub fn raw_ipc(n: u64, dest: u64, src: u64, to: u64, regs: &mut [u64; 7]) -> (u64, u64) {
    raw(n, dest, src, to, regs)
}
