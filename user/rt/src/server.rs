//! One server loop for every Scion server, and the badge layout root mints.
//!
//! A server implements [`Server`]: its `Request` type (from its `user/api/<service>`
//! crate) decodes a message, checking the word count and the string, and `handle`
//! answers it. [`run`] receives, decodes, answers malformed messages (`Malformed`) and
//! unknown labels (`Unsupported`) the same way in every server, passes root's `GONE`
//! notices to `gone`, and kernel messages (interrupts, faults) to `event`.
//!
//! [`run_shared`] serves from every CPU: a thread per CPU, each receiving on its own
//! endpoint, all of them stepping the one server state under one lock; a client finds
//! the thread on its own CPU ([`request_routed`]: the server's endpoints, asked once
//! with [`ENDPOINTS`]), so that its call stays on its CPU — the kernel's lock-free
//! fastpath runs only between two threads of one CPU (docs/user.md, "Servers on every
//! CPU").

use crate::ipc::{self, Msg};
use crate::sync::Fair;
use abi::fpage::Fpage;
use abi::{cap, Error};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The client's half of the convention every server answers by (MR1 = 0 or an error
/// code): call `srv` and turn the code into a `Result`.
pub fn request(srv: u64, m: &mut Msg) -> Result<(), Error> {
    ipc::call(srv, m, ipc::FOREVER)?;
    abi::check(m.word(1))
}

/// `request` with receive windows open for what the answer maps (memory, capability
/// slots, I/O ports); they are closed again whatever the answer.
pub fn request_mapping(srv: u64, windows: [Fpage; 3], m: &mut Msg) -> Result<(), Error> {
    ipc::set_windows(windows[0], windows[1], windows[2]);
    let r = request(srv, m);
    ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
    r
}

/// The badge on a message, as root mints them for clients (and servers mint for
/// capabilities they hand out themselves):
///
/// | bits | meaning |
/// |---|---|
/// | 0..32 | the client program's id (root's numbering, never 0) |
/// | 32..62 | the client's principal (manifest `principal`, < 2^30) |
/// | 62 | minted by the server itself (segment handles, interrupt lines): bits 0..62 are the server's |
/// | 63 | (root's own endpoint) a fault message of program `id` |
///
/// Badge 0 is root's own capability to a server (its `GONE` notices come with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Badge(pub u64);

impl Badge {
    pub const ROOT: Badge = Badge(0);
    /// Principals are 30 bits: root refuses a manifest that names a larger one.
    pub const PRINCIPAL_BITS: u32 = 30;
    pub const MAX_PRINCIPAL: u64 = (1 << Self::PRINCIPAL_BITS) - 1;
    const MINTED: u64 = 1 << 62;
    const FAULT: u64 = 1 << 63;

    /// A client's badge: None if the principal does not fit.
    pub const fn client(principal: u64, id: u32) -> Option<Badge> {
        if principal > Self::MAX_PRINCIPAL {
            None
        } else {
            Some(Badge(principal << 32 | id as u64))
        }
    }
    /// The badge on fault messages of program `id` (root's endpoint only).
    pub const fn fault(id: u32) -> Badge {
        Badge(Self::FAULT | id as u64)
    }
    /// A badge a server mints for a capability of its own; `value` < 2^62.
    pub const fn minted(value: u64) -> Badge {
        Badge(Self::MINTED | (value & (Self::MINTED - 1)))
    }
    pub const fn is_root(self) -> bool {
        self.0 == 0
    }
    pub const fn is_fault(self) -> bool {
        self.0 & Self::FAULT != 0
    }
    /// The server's own value, if the server minted this badge.
    pub const fn minted_value(self) -> Option<u64> {
        if self.0 & (Self::MINTED | Self::FAULT) == Self::MINTED {
            Some(self.0 & (Self::MINTED - 1))
        } else {
            None
        }
    }
    /// A client's program id (0 for root and for minted badges).
    pub const fn program(self) -> u32 {
        if self.0 & Self::MINTED != 0 {
            0
        } else {
            self.0 as u32
        }
    }
    /// A client's principal (0 for minted badges).
    pub const fn principal(self) -> u32 {
        if self.0 & (Self::MINTED | Self::FAULT) != 0 {
            0
        } else {
            ((self.0 >> 32) & Self::MAX_PRINCIPAL) as u32
        }
    }
}

/// A request as it arrived: its words and the string it carried (empty if none).
pub struct Args<'a> {
    pub msg: &'a Msg,
    pub string: &'a [u8],
}

impl<'a> Args<'a> {
    /// The first `N` words after the tag; `Malformed` if fewer came.
    pub fn words<const N: usize>(&self) -> Result<[u64; N], Error> {
        let w = self.msg.words();
        if w.len() < N {
            return Err(Error::Malformed);
        }
        let mut out = [0u64; N];
        out.copy_from_slice(&w[..N]);
        Ok(out)
    }
    /// All the words (for requests whose length varies).
    pub fn all(&self) -> &'a [u64] {
        self.msg.words()
    }
    /// The words after the first `n` (empty if no more came).
    pub fn rest(&self, n: usize) -> &'a [u64] {
        self.msg.words().get(n..).unwrap_or(&[])
    }
    /// The string as UTF-8 text; `Malformed` if it is missing or not UTF-8.
    pub fn text(&self) -> Result<&'a str, Error> {
        if !self.msg.tag().has_string() {
            return Err(Error::Malformed);
        }
        core::str::from_utf8(self.string).map_err(|_| Error::Malformed)
    }
    /// The string's bytes (empty if none came).
    pub fn bytes(&self) -> &'a [u8] {
        self.string
    }
}

/// A service's requests, decoded from a message.
pub trait Decode<'a>: Sized {
    /// `Unsupported` for a label the service does not have, `Malformed` when the words
    /// or string do not fit the label.
    fn decode(a: &Args<'a>) -> Result<Self, Error>;
}

/// What a server does with a request. (A reply is a whole `Msg`, kept inline: no heap
/// allocation per request.)
#[allow(clippy::large_enum_variant)]
pub enum Answer {
    /// Reply now.
    Reply(Msg),
    /// No reply now: the server saved the reply capability (to answer later) or the
    /// caller is not owed one.
    Later,
}

impl Answer {
    /// Success: MR1 = 0, then `words`.
    pub fn ok(words: &[u64]) -> Answer {
        Answer::Reply(ok_msg(words))
    }
    pub fn err(e: Error) -> Answer {
        Answer::Reply(Msg::new(0, &[e as u64]))
    }
    pub fn result(r: Result<(), Error>) -> Answer {
        match r {
            Ok(()) => Answer::ok(&[]),
            Err(e) => Answer::err(e),
        }
    }
}

/// A success reply: MR1 = 0, then `words` (at most 62).
pub fn ok_msg(words: &[u64]) -> Msg {
    let mut m = Msg::new(0, &[0]);
    let n = words.len().min(abi::ipc::MAX_MRS - 2);
    m.mr[2..2 + n].copy_from_slice(&words[..n]);
    m.mr[0] = abi::ipc::Tag::new(0, 1 + n as u64).0;
    m
}

/// The label of root's notice that a client is gone (MR1 = its badge).
pub const GONE: u64 = 0x40;
/// Root's notice that a client was replaced by a new program in a live update (MR1 =
/// the old one's badge, MR2 = the new one's): what it held is the new one's now.
pub const SUCCEEDED: u64 = 0x41;
/// The server loop's own request (any client but root, through the server's
/// capability): the caller's endpoints on every CPU. Reply MR2 = the CPUs, and one item
/// granted: a block of `2^⌈log2 CPUs⌉` capability slots, slot `c` a `SEND` capability
/// to the server's thread on CPU `c`, minted with the caller's badge (the badge root
/// gave it: the caller's authority is unchanged). A server on one thread answers
/// `Unsupported`, as to any label it does not know.
pub const ENDPOINTS: u64 = 0x42;
const _: () = assert!(crate::labels::all_in(crate::labels::NOTICES, &[GONE, SUCCEEDED, ENDPOINTS]));

pub trait Server {
    type Request<'a>: Decode<'a>;
    /// Answer one decoded request from `from`.
    fn handle(&mut self, from: Badge, req: Self::Request<'_>) -> Answer;
    /// Root says the client with this badge has ended: drop what it held.
    fn gone(&mut self, _client: Badge) {}
    /// Root says client `old` was replaced by `new` (a live update of `old`): keep for
    /// `new` what `old` held that others depend on. By default: `old` is gone.
    fn succeeded(&mut self, old: Badge, _new: Badge) {
        self.gone(old)
    }
    /// A message that is not a request: an interrupt, a fault, or anything the server
    /// handles before decoding. Return None to decode it as a request.
    fn event(&mut self, _from: Badge, _m: &Msg) -> Option<Answer> {
        None
    }
    /// Microseconds until the server wants `tick` even if no message comes (protocol
    /// timers, deadlines of sleeping clients); None: only messages wake it.
    fn next_tick_us(&mut self) -> Option<u64> {
        None
    }
    /// The time `next_tick_us` asked for has come (or passed) with no message. (Only
    /// then: a server whose messages keep coming does its timed work while handling
    /// them too, as net runs its stack after every request.)
    fn tick(&mut self) {}
    /// Receive windows to open before each receive, for a server whose requests carry
    /// capabilities or mappings (None: none; calls the server makes close them).
    fn windows(&self) -> Option<[Fpage; 3]> {
        None
    }
    /// Whom the next receive takes messages from: any sender (`ipc::RECV_ANY`), or the
    /// thread in this capability slot only (a server handing itself over in a live
    /// update hears only root: its clients' requests wait in its queue for its
    /// successor).
    fn receive_from(&self) -> u64 {
        ipc::RECV_ANY
    }
}

/// The receive timeout for a wait of `us` microseconds (None: forever).
fn recv_timeout(us: Option<u64>) -> u64 {
    match us {
        None => ipc::FOREVER,
        Some(us) => ipc::timeouts(ipc::INFINITE, us.min(ipc::INFINITE as u64 - 1) as u32),
    }
}

/// Serve forever: strings land in `buf` (its length is the largest string taken).
/// One `Msg` holds each request and then its reply (a message is 520 bytes: every copy
/// of it costs, so the loop makes none it can avoid).
pub fn run<S: Server>(s: &mut S, buf: &mut [u8]) -> ! {
    let mut m = Msg::empty();
    let mut replying = false;
    loop {
        ipc::set_recv_buffer(buf);
        if let Some(w) = s.windows() {
            ipc::set_windows(w[0], w[1], w[2]);
        }
        let to = recv_timeout(s.next_tick_us());
        let src = s.receive_from();
        let r = if replying { ipc::reply_wait(src, &mut m, to) } else { ipc::recv(src, &mut m, to) };
        let badge = match r {
            Ok(b) => b,
            Err(e) => {
                replying = false;
                if e == Error::Timeout {
                    s.tick();
                }
                continue;
            }
        };
        replying = match step(s, Badge(badge), &m, buf) {
            Answer::Reply(r) => {
                m = r;
                true
            }
            Answer::Later => false,
        };
    }
}

/// One request: what `run` does with each message.
#[inline(always)]
fn step<S: Server>(s: &mut S, from: Badge, m: &Msg, buf: &[u8]) -> Answer {
    if from.is_root() && m.label() == GONE && !m.tag().is_fault() {
        if let Some(&b) = m.words().first() {
            s.gone(Badge(b));
        }
        return Answer::ok(&[]);
    }
    if from.is_root() && m.label() == SUCCEEDED && !m.tag().is_fault() {
        if let [old, new, ..] = m.words() {
            s.succeeded(Badge(*old), Badge(*new));
        }
        return Answer::ok(&[]);
    }
    if let Some(a) = s.event(from, m) {
        return a;
    }
    if m.tag().is_fault() {
        // A fault message to a server that takes none: the faulting thread stays stopped.
        return Answer::Later;
    }
    let n = if m.tag().has_string() { ipc::received_string_len().min(buf.len()) } else { 0 };
    let args = Args { msg: m, string: &buf[..n] };
    match S::Request::decode(&args) {
        Ok(req) => s.handle(from, req),
        Err(e) => Answer::err(e),
    }
}

/// A server that cannot work (its device or filesystem was refused) answers every
/// request with `e` from now on rather than vanish: its clients learn why.
pub fn refuse_all(e: Error) -> ! {
    struct Refuse(Error);
    impl Server for Refuse {
        type Request<'a> = Any;
        fn handle(&mut self, _: Badge, _: Any) -> Answer {
            Answer::err(self.0)
        }
    }
    /// Every message, whatever it says.
    struct Any;
    impl Decode<'_> for Any {
        fn decode(_: &Args<'_>) -> Result<Self, Error> {
            Ok(Any)
        }
    }
    run(&mut Refuse(e), &mut [0u8; 256])
}

/// CPUs a server serves from at most (the kernel's `MAX_CPUS`).
pub const MAX_CPUS: usize = 8;
const MAX_CPUS_LOG2: u32 = 3;

/// A server's state and threads when it serves from every CPU (`run_shared`).
///
/// **What the threads share and how**: the whole `Server` value, behind `state`, a fair
/// lock (requests from every CPU are served in the order their threads asked) — each
/// thread takes it once a request: to step it (decode, handle, the reply built) and to
/// read what its next receive needs (windows, source, timeout); a reply's string, which lies in the state
/// (`files`' read buffer), is copied into the thread's own buffer before the lock is
/// given back, so the next request on another CPU cannot change it before the kernel
/// copies it. Everything a single-threaded server assumed (one request at a time: the
/// quiescent point of a swap between two requests, `Generations` counted inside one
/// step) holds as before, on every CPU. What runs in parallel is the IPC — receive,
/// reply, the kernel's work — on each CPU's own fastpath.
struct Shared<S> {
    state: Fair<S>,
    /// The capability (ours, unbadged) of our thread on each CPU.
    threads: [AtomicU64; MAX_CPUS],
    cpus: u64,
    log2: u32,
    buf_len: usize,
    /// Every thread is placed: the workers wait for it before they serve.
    ready: AtomicBool,
}

/// Serve from every CPU (up to `MAX_CPUS`): this thread on its own CPU, a thread of the
/// same priority placed on each other one (`THREAD_CONTROL SET_CPU`). On one CPU, or if
/// no second thread can be made, this is `run`. `Server::tick` and kernel messages
/// (interrupts, faults, root's notices) come to this thread only: the others serve the
/// requests sent to their endpoints (`ENDPOINTS`). While the server hears only one
/// sender (`receive_from`: handing itself over in a live update) the others answer
/// `Moved` without doing the request, and the client calls this thread instead — where
/// its call waits for the successor. Receive windows (`Server::windows`: requests that
/// bring capabilities or memory) are open on this thread only: such requests go to the
/// server's main capability.
pub fn run_shared<S: Server + 'static>(s: S, buf_len: usize) -> ! {
    let cpus = (crate::sys::smp_info().cpus as usize).clamp(1, MAX_CPUS);
    let here = crate::sys::thread_cpu(cap::SELF_THREAD).unwrap_or(0) as usize;
    if cpus == 1 || here >= cpus {
        let mut s = s;
        run(&mut s, &mut alloc::vec![0u8; buf_len])
    }
    let log2 = (cpus as u64).next_power_of_two().trailing_zeros();
    let sh: &'static Shared<S> = alloc::boxed::Box::leak(alloc::boxed::Box::new(Shared {
        state: Fair::new(s),
        threads: [const { AtomicU64::new(0) }; MAX_CPUS],
        cpus: cpus as u64,
        log2,
        buf_len,
        ready: AtomicBool::new(false),
    }));
    sh.threads[here].store(cap::SELF_THREAD, Ordering::Relaxed);
    let prio = crate::thread::my_priority();
    for c in (0..cpus).filter(|&c| c != here) {
        let t = match crate::thread::spawn(worker::<S>, sh as *const Shared<S> as u64, prio) {
            Ok(t) if crate::sys::thread_set_cpu(t.slot, c as u64).is_ok() => t.slot,
            // (A thread that could not be placed serves where it is: still correct.)
            Ok(t) => t.slot,
            // No thread for CPU `c`: this one is its endpoint too.
            Err(_) => cap::SELF_THREAD,
        };
        sh.threads[c].store(t, Ordering::Relaxed);
    }
    sh.ready.store(true, Ordering::Release);
    serve(sh, true)
}

fn worker<S: Server + 'static>(arg: u64) {
    // SAFETY: `run_shared` passed a pointer to a `Shared<S>` it leaked: it lives for
    // the program's life and is only shared. Its state is touched only under its lock
    // (acquire/release: each holder sees the last one's writes), so no two threads touch
    // it at once. `S` need not be `Send`: what it holds that is not (`Rc` clones: files'
    // one interposer behind every session) is aliased only within `S` itself — or in
    // the frames of `run_shared`'s caller, which never run again (it does not return),
    // never in statics (they are `Sync`) or thread-locals (`rt` has none) — so every
    // access to it is under the same lock too.
    let sh = unsafe { &*(arg as *const Shared<S>) };
    while !sh.ready.load(Ordering::Acquire) {
        crate::sys::yield_now();
    }
    serve(sh, false)
}

/// One thread's loop of `run_shared` (`main`: the program's first thread, which takes
/// the ticks and hears the one sender a handing-over server listens to).
fn serve<S: Server>(sh: &Shared<S>, main: bool) -> ! {
    let mut buf = alloc::vec![0u8; sh.buf_len];
    let mut out: Vec<u8> = Vec::new();
    let minted = crate::alloc_slot_block(sh.log2);
    let mut m = Msg::empty();
    let mut replying = false;
    // What the next receive needs of the state (windows, source, timeout), read under
    // the lock of the step before it: one lock a request.
    let read = |s: &mut S| {
        if main {
            (s.windows(), s.receive_from(), recv_timeout(s.next_tick_us()))
        } else {
            // Receive windows on the main thread only: they name slots and memory of
            // the one task, which two threads' receives would fill at once.
            (None, ipc::RECV_ANY, ipc::FOREVER)
        }
    };
    let mut next = read(&mut sh.state.lock());
    loop {
        ipc::set_recv_buffer(&mut buf);
        let (w, src, to) = next;
        if let Some(w) = w {
            ipc::set_windows(w[0], w[1], w[2]);
        }
        let r = if replying { ipc::reply_wait(src, &mut m, to) } else { ipc::recv(src, &mut m, to) };
        let badge = match r {
            Ok(b) => b,
            Err(e) => {
                replying = false;
                let mut s = sh.state.lock();
                if main && e == Error::Timeout {
                    s.tick();
                }
                next = read(&mut s);
                continue;
            }
        };
        let from = Badge(badge);
        let a = if m.label() == ENDPOINTS && !m.tag().is_fault() {
            endpoints(sh, from, minted)
        } else {
            let mut s = sh.state.lock();
            let a = if !main && s.receive_from() != ipc::RECV_ANY {
                Answer::err(Error::Moved)
            } else {
                let a = step(&mut *s, from, &m, &buf);
                if let Answer::Reply(r) = &a {
                    if r.tag().has_string() {
                        own_string(&mut out);
                    }
                }
                a
            };
            next = read(&mut s);
            a
        };
        replying = match a {
            Answer::Reply(r) => {
                m = r;
                true
            }
            Answer::Later => false,
        };
    }
}

/// Copy the string the reply carries (set by the server, in its shared state) into this
/// thread's `out`, and send that instead.
fn own_string(out: &mut Vec<u8>) {
    let u = ipc::utcb();
    let (addr, len) = (u.send_buf_addr, u.send_buf_len as usize);
    if addr == out.as_ptr() as u64 {
        // Still this thread's own copy from a reply before (a handler that flagged a
        // string without setting one): nothing new to copy, and no aliasing of `out`.
        return;
    }
    out.clear();
    if len > 0 && addr != 0 {
        // SAFETY: the server set this string (`set_send_string`) from a slice it holds
        // for the reply — in its state, which this thread holds locked — so `len` bytes
        // at `addr` are readable now; it is not `out`'s buffer (checked above), so
        // reading it while `out` grows aliases nothing.
        out.extend_from_slice(unsafe { core::slice::from_raw_parts(addr as *const u8, len) });
    }
    ipc::set_send_string(out);
}

/// `ENDPOINTS`: this caller's endpoint on every CPU, minted into this thread's
/// `minted` block and granted.
fn endpoints<S>(sh: &Shared<S>, from: Badge, minted: u64) -> Answer {
    if from.is_root() || from.is_fault() {
        return Answer::err(Error::Unsupported);
    }
    for c in 0..sh.cpus {
        // (A slot whose grant failed last time — the caller was gone — still holds one.)
        let _ = crate::sys::cap_delete(minted + c);
        let t = sh.threads[c as usize].load(Ordering::Relaxed);
        if let Err(e) = crate::sys::cap_copy(t, minted + c, abi::rights::SEND, from.0) {
            return Answer::err(e);
        }
    }
    let mut r = ok_msg(&[sh.cpus]);
    r.push_item(Fpage::caps(minted, sh.log2 as u64, abi::rights::SEND), abi::fpage::GRANT);
    Answer::Reply(r)
}

/// What a client knows of a server's endpoints, one word (`route`): the state in bits
/// 0..4 — not asked yet or forgotten (`UNKNOWN`), another thread of ours asking
/// (`ASKING`), it serves from one thread (`ONE`), its endpoints known (`CPUS`) — the
/// CPUs in bits 4..12, and the slot of its block of `MAX_CPUS` endpoints from bit 12 (0:
/// none taken yet). Read without a lock on every call: no word two CPUs' calls write.
const UNKNOWN: u64 = 0;
const ASKING: u64 = 1;
const ONE: u64 = 2;
const CPUS: u64 = 3;

const fn route(state: u64, cpus: u64, base: u64) -> u64 {
    state | cpus << 4 | base << 12
}

/// The servers this program calls through `request_routed` (their slot; `u64::MAX`:
/// free) and what it knows of each (`route`).
static ROUTE_SRV: [AtomicU64; 8] = [const { AtomicU64::new(u64::MAX) }; 8];
static ROUTE: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];

/// The endpoint for a call to `srv` from this CPU: the server's thread on it if the
/// server said where (asking it first, once, when `ask`), else `srv`.
fn endpoint(srv: u64, ask: bool) -> u64 {
    let cpu = crate::sys::cpu();
    let i = match ROUTE_SRV.iter().position(|r| r.load(Ordering::Acquire) == srv) {
        Some(i) => i,
        None if !ask => return srv,
        // Take a free entry (another thread may take it first: then look again).
        None => match ROUTE_SRV
            .iter()
            .position(|r| r.compare_exchange(u64::MAX, srv, Ordering::AcqRel, Ordering::Acquire).is_ok())
        {
            Some(i) => i,
            None => return srv,
        },
    };
    let r = ROUTE[i].load(Ordering::Acquire);
    let (state, n, base) = (r & 0xf, (r >> 4) & 0xff, r >> 12);
    match state {
        CPUS if cpu < n => return base + cpu,
        UNKNOWN if ask => {}
        _ => return srv,
    }
    if ROUTE[i].compare_exchange(r, route(ASKING, 0, base), Ordering::AcqRel, Ordering::Acquire).is_err() {
        return srv;
    }
    // (Taking slots may grow the heap, whose reservation calls through here: the entry
    // says `ASKING` meanwhile, so that call goes to `srv`.)
    let base = if base != 0 { base } else { crate::alloc_slot_block(MAX_CPUS_LOG2) };
    let known = ask_endpoints(srv, base);
    ROUTE[i].store(known, Ordering::Release);
    match known & 0xf {
        CPUS if cpu < (known >> 4) & 0xff => base + cpu,
        _ => srv,
    }
}

/// Ask `srv` for its endpoints into the block at `base` (what this thread's IPC state
/// held — the buffer and windows a caller set for its own call — is put back).
fn ask_endpoints(srv: u64, base: u64) -> u64 {
    let u = ipc::utcb();
    let kept = (u.recv_buf_addr, u.recv_buf_len, u.recv_mem, u.recv_caps, u.recv_io, u.recv_str_len);
    for c in 0..MAX_CPUS as u64 {
        let _ = crate::sys::cap_delete(base + c);
    }
    let mut m = Msg::new(ENDPOINTS, &[]);
    let r = request_mapping(srv, [Fpage(0), Fpage::caps(base, MAX_CPUS_LOG2 as u64, 0), Fpage(0)], &mut m);
    let u = ipc::utcb();
    (u.recv_buf_addr, u.recv_buf_len, u.recv_mem, u.recv_caps, u.recv_io, u.recv_str_len) = kept;
    match r {
        Ok(()) if m.items() == 1 && (1..=MAX_CPUS as u64).contains(&m.word(2)) => route(CPUS, m.word(2), base),
        // Any answer but endpoints (`Unsupported`: one thread) is the server's word.
        Ok(()) | Err(Error::Unsupported | Error::Malformed) => route(ONE, 0, base),
        // The server did not answer (gone, restarting): ask again next time.
        Err(_) => route(UNKNOWN, 0, base),
    }
}

/// Forget `srv`'s endpoints (one failed, or said `Moved`): the next call asks again.
fn forget(srv: u64) {
    if let Some(i) = ROUTE_SRV.iter().position(|r| r.load(Ordering::Acquire) == srv) {
        let r = ROUTE[i].load(Ordering::Acquire);
        if r & 0xf == CPUS {
            let _ = ROUTE[i].compare_exchange(r, route(UNKNOWN, 0, r >> 12), Ordering::AcqRel, Ordering::Acquire);
        }
    }
}

/// `request`, to the server's thread on the caller's CPU: the endpoints are asked for
/// once (`ENDPOINTS`; a server on one thread is called as before). An endpoint that
/// fails (its thread is gone: the server ended, or was replaced in a live update) or
/// answers `Moved` (the server is handing itself over) is forgotten and the call goes
/// to `srv`, the server's main endpoint, with the message and receive buffer as they
/// were — a request answered `Moved` was not done, so none is done twice.
pub fn request_routed(srv: u64, m: &mut Msg) -> Result<(), Error> {
    routed(srv, m, true)
}

/// `request_routed` that never asks: the endpoints already known, else `srv` (for calls
/// that may not make another, as `rt::heap`'s reservations while it holds its lock).
pub fn request_known_route(srv: u64, m: &mut Msg) -> Result<(), Error> {
    routed(srv, m, false)
}

fn routed(srv: u64, m: &mut Msg, ask: bool) -> Result<(), Error> {
    let ep = endpoint(srv, ask);
    if ep == srv {
        return request(srv, m);
    }
    let u = ipc::utcb();
    let kept = (u.recv_buf_addr, u.recv_buf_len);
    let again = m.clone();
    match ipc::call(ep, m, ipc::FOREVER) {
        Ok(()) if m.word(1) != Error::Moved as u64 => abi::check(m.word(1)),
        // Any other failure of the IPC itself (`TooLong`, `CopyFault`: the reply did not
        // fit) may come after the server did the request: the caller's, not sent again.
        Err(e) if !matches!(e, Error::InvalidCap | Error::WrongType | Error::NoPartner) => Err(e),
        // `Moved` (not done), or the endpoint's thread is gone: the main capability.
        _ => {
            forget(srv);
            let u = ipc::utcb();
            (u.recv_buf_addr, u.recv_buf_len) = kept;
            *m = again;
            request(srv, m)
        }
    }
}
