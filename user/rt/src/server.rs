//! One server loop for every Scion server, and the badge layout root mints.
//!
//! A server implements [`Server`]: its `Request` type (from its `user/api/<service>`
//! crate) decodes a message, checking the word count and the string, and `handle`
//! answers it. [`run`] receives, decodes, answers malformed messages (`Malformed`) and
//! unknown labels (`Unsupported`) the same way in every server, passes root's `GONE`
//! notices to `gone`, and kernel messages (interrupts, faults) to `event`.

use crate::ipc::{self, Msg};
use abi::fpage::Fpage;
use abi::Error;

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
const _: () = assert!(crate::labels::all_in(crate::labels::NOTICES, &[GONE, SUCCEEDED]));

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
