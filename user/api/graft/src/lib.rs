//! The graft protocol (VINO's graft loading, Scion's form): the same requests at every
//! server that hosts graft points (`cache` for eviction; more as they come). A graft
//! belongs to the principal that loads it (the badge root minted names it) and acts on
//! that principal's data alone; holding the server's capability is what allows a load.
//!
//! A graft file goes up in pieces (`PUT`, each one IPC string), then `LOAD` checks and
//! loads it as a whole. Refusals carry the reason as the reply's string, so the shell
//! can say why ("eBPF: a loop", "not a valid WebAssembly module").
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod upcall;

use alloc::string::String;
use core::fmt::Write;

use abi::Error;
use graft::table::Progress;
use graft::{LoadError, Table};
use rt::ipc::{self, Msg};
use rt::server::Answer;

/// Where each server's graft ids start (ids are `base + 1 ..= base + 999`), so that
/// an id names its server: the shell's `graft unload ID` finds it by the id alone.
pub const CACHE_IDS: u32 = 1000;
pub const BLK_IDS: u32 = 2000;
pub const NET_IDS: u32 = 3000;
/// The memory servers' (mem0's; mem1's are the next thousand): which of a program's
/// pages to take back (`mem_api::USAGE`).
pub const MEM_IDS: u32 = 4000;

/// The graft servers: (the name programs look them up by, its id base, its points).
/// The stream point is in two servers: blk (BAIO reads) and net (Cue's bytes); the
/// shell's `graft load stream` means blk's. The evict point too: the cache (blocks)
/// and the memory servers (a program's pages); `graft load evict` means the cache's.
pub const SERVERS: [(&str, u32, &[graft::Point]); 5] = [
    ("cache", CACHE_IDS, &[graft::Point::Evict]),
    ("blk", BLK_IDS, &[graft::Point::Stream, graft::Point::Ldisk]),
    ("net", NET_IDS, &[graft::Point::Stream]),
    ("mem0", MEM_IDS, &[graft::Point::Evict]),
    ("mem1", MEM_IDS + 1000, &[graft::Point::Evict]),
];

/// The places a program names to load a graft: (the word, the server to ask — a name
/// `LOOKUP` answers; a program's own memory server is `rt::proto::PAGER`, whichever it
/// is —, the point in the graft file's header, what the graft decides there).
pub const PLACES: [(&str, &str, graft::Point, &str); 5] = [
    ("evict", "cache", graft::Point::Evict, "the shared cache's eviction victim"),
    ("reclaim", rt::proto::PAGER, graft::Point::Evict, "which of this program's pages its memory server takes back"),
    ("stream", "blk", graft::Point::Stream, "sees the bytes of blk's reads flagged STREAM"),
    ("cue", "net", graft::Point::Stream, "sees the bytes of Cue transfers flagged CUE_STREAM"),
    ("ldisk", "blk", graft::Point::Ldisk, "lays a segment out as a logical disk"),
];

/// The place called `word`: (the server to ask, the point).
pub fn place(word: &str) -> Option<(&'static str, graft::Point)> {
    PLACES.iter().find(|p| p.0 == word).map(|p| (p.1, p.2))
}

/// The words of every place, for a message: "evict, reclaim, …".
pub fn place_words() -> String {
    let mut s = String::new();
    for (k, p) in PLACES.iter().enumerate() {
        let _ = write!(s, "{}{}", if k > 0 { ", " } else { "" }, p.0);
    }
    s
}

/// The server (its name) that hosts `point` (for the eviction point, the cache's).
pub fn server_of(point: graft::Point) -> Option<&'static str> {
    SERVERS.iter().find(|s| s.2.contains(&point)).map(|s| s.0)
}

/// The server (its name, as a program looks it up) whose id range holds `id`: a memory
/// server's ids are asked of the program's own (`PAGER`), which answers for its grafts.
pub fn server_of_id(id: u32) -> Option<&'static str> {
    let s = SERVERS.iter().find(|s| id > s.1 && id <= s.1 + graft::table::IDS)?;
    Some(if s.1 >= MEM_IDS { rt::proto::PAGER } else { s.0 })
}

/// The servers a program asks for its grafts, each once (`LIST`): the cache, blk, net
/// and its own memory server.
pub const ASKED: [&str; 4] = ["cache", "blk", "net", rt::proto::PAGER];

pub const MAX_REPEAT: u64 = 100_000;

/// The bytes of one `PUT`.
pub const PIECE: usize = 2048;
/// The receive buffer a server with graft points needs (a `PUT`'s or `STATE`'s string).
pub const RECV_BYTES: usize = PIECE;

/// Is `label` one of this protocol's?
pub fn is_graft_label(label: u64) -> bool {
    (PUT..=MORE).contains(&label)
}

rt::protocol! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Request<'a> in rt::labels::GRAFT;
    client client via super::call, error super::Refusal;
    requests {
        /// MR1 = byte offset in the caller's staging buffer; string = the bytes (≤ `PIECE`).
        PUT = 0xe0, fn put(at; string piece) -> []
            => Put { at: usize, bytes: &'a [u8] } = Request::Put { bytes: piece_of(piece)?, at: small(at)? };
        /// MR1 = the file's length: load what was put. Reply MR2 = the graft's id; or 0 while
        /// its verification goes on (eBPF, a slice of it a request: the server answers
        /// others in between), then MR3 = ms to wait before `MORE` (its share of the
        /// server's time spent: more than 0). `WouldBlock` (with the reason): not now — the
        /// principal's share of the server's time is spent, or a graft of its was stopped at
        /// this point (a back-off).
        LOAD = 0xe1, fn load_raw(len; items thread) -> [id, wait] => Load { len: usize } = Request::Load { len: small(len)? };
        /// MR1 = id.
        UNLOAD = 0xe2, fn unload_raw(graft_id) -> [] => Unload { id: u32 } = Request::Unload { id: id(graft_id)? };
        /// Reply string: the caller's grafts, one a line: "id owner point technology calls
        /// aborts cycles name".
        LIST = 0xe3, fn list_raw() => List;
        /// MR1 = id, MR2 = offset; string = bytes written into the graft's state (a hot list).
        STATE = 0xe4, fn state(graft_id, at; string bytes) -> []
            => State { id: u32, at: usize, bytes: &'a [u8] }
            = Request::State { bytes: bytes.ok_or(Error::Malformed)?, id: id(graft_id)?, at: small(at)? };
        /// MR1 = id, MR2 = offset, MR3 = bytes ≤ 64: reply MR2.. = that much of the state
        /// (a fingerprint a stream graft computed), little-endian words.
        READ = 0xe5, fn read(graft_id, at, n)
            => Read { id: u32, at: usize, n: usize }
            = Request::Read { n: at_most(n, 64)? as usize, id: id(graft_id)?, at: small(at)? };
        /// MR1 = id, MR2 = budget per call (fuel, operations), 1 ..= `graft::table::MAX_BUDGET`.
        BUDGET = 0xe6, fn budget(graft_id, budget) -> []
            => Budget { id: u32, budget: u64 }
            = Request::Budget { budget: budget_of(budget)?, id: id(graft_id)? };
        /// MR1 = id: reply MR2 = calls, MR3 = aborts, MR4 = cycles, MR5 = last abort (0 none,
        /// else `Abort` + 1), MR6 = point, MR7 = technology, MR8 = bytes it holds in the server,
        /// MR9 = calls skipped (the request's graft time spent); `NotFound` once it was unloaded.
        STATS = 0xe7, fn stats_raw(graft_id) -> [calls, aborts, cycles, last_abort, point, tech, memory, skipped]
            => Stats { id: u32 } = Request::Stats { id: id(graft_id)? };
        /// MR1 = id, MR2 = repeat (1 ..= `MAX_REPEAT`); string = the input (at most the
        /// point's): run the graft up to that many times on it as its point would (Linux's
        /// `BPF_PROG_TEST_RUN`). Reply MR2 = the last answer (`u64::MAX` if that call was
        /// aborted), MR3 = cycles of all the calls (rdtsc), MR4 = calls aborted, MR5 = calls
        /// made. It stops early if the graft is unloaded for failing, and once the request has
        /// had `graft::table::TURN_MS` of the server's time (ask again for more); it makes no
        /// call while the principal's share of the server's time is spent (`graft::share`).
        TEST_RUN = 0xe8, fn test_run_raw(graft_id, repeat; string input) -> [last, cycles, aborts, calls]
            => TestRun { id: u32, repeat: u32, input: &'a [u8] }
            = Request::TestRun { repeat: repeats(repeat, input.is_some())?, id: id(graft_id)?, input: input.unwrap_or(&[]) };
        /// MR1 = id, MR2 = the file's length: hot-swap graft `id` for what was put (any
        /// technology, the same point; K42's swap of a component): the id, budget and counters
        /// stay, the state moves to the new graft (its bytes: it must lay them out alike, the
        /// same length). Refused with the reason; the old graft stays.
        /// Reply as `LOAD`'s: MR2 = the id, or 0 while the new graft's verification goes on.
        REPLACE = 0xe9, fn replace_raw(graft_id, len) -> [id, wait] => Replace { id: u32, len: usize } = Request::Replace { id: id(graft_id)?, len: small(len)? };
        /// The next slice of the caller's `LOAD` or `REPLACE` whose verification goes on:
        /// reply as theirs (MR2 = the id when done, else 0 and MR3 = ms to wait).
        MORE = 0xea, fn more_raw() -> [id, wait] => More = Request::More;
    }
}

fn id(w: u64) -> Result<u32, Error> {
    u32::try_from(w).map_err(|_| Error::InvalidArg)
}

fn small(w: u64) -> Result<usize, Error> {
    usize::try_from(w).ok().filter(|v| *v <= graft::format::MAX_FILE).ok_or(Error::InvalidArg)
}

fn at_most(n: u64, max: u64) -> Result<u64, Error> {
    if n <= max {
        Ok(n)
    } else {
        Err(Error::InvalidArg)
    }
}

/// A `PUT`'s piece: a string of at most `PIECE` bytes, else `Malformed`.
fn piece_of(s: Option<&[u8]>) -> Result<&[u8], Error> {
    s.filter(|b| b.len() <= PIECE).ok_or(Error::Malformed)
}

/// A budget per call: 1 ..= `graft::table::MAX_BUDGET`, else `InvalidArg`.
fn budget_of(b: u64) -> Result<u64, Error> {
    if b == 0 || b > graft::table::MAX_BUDGET {
        Err(Error::InvalidArg)
    } else {
        Ok(b)
    }
}

/// A `TEST_RUN`'s repeat: 1 ..= `MAX_REPEAT`, with an input string; else `InvalidArg`.
fn repeats(r: u64, input: bool) -> Result<u32, Error> {
    if r == 0 || r > MAX_REPEAT || !input {
        Err(Error::InvalidArg)
    } else {
        Ok(r as u32)
    }
}

fn refuse(e: LoadError) -> Answer {
    let code = match e {
        LoadError::Format(_) => Error::Malformed,
        LoadError::Refused(_) => Error::InvalidArg,
        LoadError::Unsupported => Error::Unsupported,
        LoadError::Limit(_) => Error::NoSpace,
        LoadError::Busy => Error::Exists,
        LoadError::Later(_) => Error::WouldBlock,
    };
    // The reason is static text: it outlives the reply.
    ipc::set_send_string(e.what().as_bytes());
    Answer::Reply(Msg::new(0, &[code as u64]).with_string())
}

/// A `LOAD`'s, `REPLACE`'s or `MORE`'s answer.
fn progress(r: Result<Progress, LoadError>) -> Answer {
    match r {
        Ok(Progress::Loaded(id)) => Answer::ok(&[id as u64, 0]),
        Ok(Progress::Verifying(ms)) => Answer::ok(&[0, ms]),
        Err(e) => refuse(e),
    }
}

/// The server side: one request from program `program` of principal `owner` (a turn
/// of its own: `Table::new_turn`). `text` holds a `LIST` reply until the kernel has
/// copied it; `extra` builds engines the server supplies itself. Call `Table::forget`
/// when a program ends.
pub fn serve(
    t: &mut Table,
    owner: u32,
    program: u64,
    req: Request<'_>,
    text: &mut String,
    extra: graft::table::Extra<'_>,
) -> Answer {
    t.new_turn();
    match req {
        Request::Put { at, bytes } => match t.may_send(owner).and_then(|()| t.put(program, at, bytes)) {
            Ok(()) => Answer::ok(&[]),
            Err(e) => refuse(e),
        },
        Request::Load { len } => progress(t.start_load(owner, program, len, extra)),
        Request::Replace { id, len } => progress(t.start_replace(owner, program, id, len, extra)),
        Request::More => progress(t.go_on(owner, program, extra)),
        Request::Unload { id } => match t.unload(owner, id) {
            Ok(()) => Answer::ok(&[]),
            Err(_) => Answer::err(Error::NotFound),
        },
        Request::List => {
            text.clear();
            let _ = write!(text, "{}", t.list(if owner == 0 { None } else { Some(owner) }));
            ipc::set_send_string(text.as_bytes());
            Answer::Reply(Msg::new(0, &[0]).with_string())
        }
        Request::State { id, at, bytes } => match t.get(owner, id) {
            None => Answer::err(Error::NotFound),
            Some(g) => match g.write_state(at, bytes) {
                Ok(()) => Answer::ok(&[]),
                Err(e) => refuse(e),
            },
        },
        Request::Read { id, at, n } => match t.get(owner, id) {
            None => Answer::err(Error::NotFound),
            Some(g) => {
                let mut b = [0u8; 64];
                let got = g.read_state(at, &mut b[..n]);
                let mut w = [0u64; 8];
                for (k, c) in b[..got].chunks(8).enumerate() {
                    let mut x = [0u8; 8];
                    x[..c.len()].copy_from_slice(c);
                    w[k] = u64::from_le_bytes(x);
                }
                Answer::ok(&w[..got.div_ceil(8)])
            }
        },
        Request::Budget { id, budget } => match t.get(owner, id) {
            None => Answer::err(Error::NotFound),
            Some(g) => {
                g.budget = budget;
                Answer::ok(&[])
            }
        },
        Request::Stats { id } => match t.get(owner, id) {
            None => Answer::err(Error::NotFound),
            Some(g) => {
                let s = g.stats;
                let last = s.last_abort.map_or(0, |a| a as u64 + 1);
                Answer::ok(&[
                    s.calls,
                    s.aborts,
                    s.cycles,
                    last,
                    g.point as u64,
                    g.tech as u64,
                    g.memory() as u64,
                    s.skipped,
                ])
            }
        },
        Request::TestRun { id, repeat, input } => {
            let Some(g) = t.get(owner, id) else { return Answer::err(Error::NotFound) };
            if input.len() > g.point.max_input() {
                return Answer::err(Error::TooLong);
            }
            match t.test_run(owner, id, input, repeat) {
                Some(r) => Answer::ok(&[r.last.unwrap_or(u64::MAX), r.cycles, r.aborts, r.calls]),
                None => Answer::err(Error::NotFound),
            }
        }
    }
}

/// A refusal as the client sees it: the error and the server's reason.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub error: Error,
    pub reason: String,
}

impl From<Error> for Refusal {
    fn from(error: Error) -> Refusal {
        Refusal { error, reason: String::new() }
    }
}

fn call(srv: u64, m: &mut Msg) -> Result<(), Refusal> {
    let mut buf = [0u8; 256];
    ipc::set_recv_buffer(&mut buf);
    ipc::call(srv, m, ipc::FOREVER)?;
    match abi::check(m.word(1)) {
        Ok(()) => Ok(()),
        Err(error) => {
            let n = if m.tag().has_string() { ipc::received_string_len().min(buf.len()) } else { 0 };
            Err(Refusal { error, reason: String::from_utf8_lossy(&buf[..n]).into_owned() })
        }
    }
}

/// Load an upcall graft (VINO's user-level server) named `name` at `point` into
/// server `srv`: every call of it becomes an IPC call to the thread whose capability
/// is in slot `thread` (which runs `upcall::serve`). Its id there.
pub fn load_upcall(srv: u64, name: &str, point: graft::Point, thread: u64) -> Result<u32, Refusal> {
    let bytes =
        graft::GraftFile { point, tech: graft::Tech::Upcall, state_len: 0, name, code: name.as_bytes(), sig: &[] }
            .to_bytes();
    put_file(srv, &bytes)?;
    let item = [(abi::fpage::Fpage::caps(thread, 0, abi::rights::SEND), 0)];
    until_loaded(srv, client::load_raw(srv, bytes.len() as u64, &item)?)
}

/// A `LOAD`'s or `REPLACE`'s answer followed to its end: `MORE` while the verification
/// goes on (after the wait the server asks for), then the id.
fn until_loaded(srv: u64, mut r: [u64; 2]) -> Result<u32, Refusal> {
    while r[0] == 0 {
        if r[1] > 0 {
            rt::sys::sleep_us(r[1].min(60_000) * 1000);
        }
        r = client::more_raw(srv)?;
    }
    Ok(r[0] as u32)
}

/// Send a graft file to server `srv` in `PUT` pieces.
fn put_file(srv: u64, bytes: &[u8]) -> Result<(), Refusal> {
    for (k, piece) in bytes.chunks(PIECE).enumerate() {
        client::put(srv, (k * PIECE) as u64, piece)?;
    }
    Ok(())
}

/// Load the graft file `bytes` into server `srv`: its id there.
pub fn load(srv: u64, bytes: &[u8]) -> Result<u32, Refusal> {
    put_file(srv, bytes)?;
    until_loaded(srv, client::load_raw(srv, bytes.len() as u64, &[])?)
}

/// Hot-swap graft `id` for the graft file `bytes` (`REPLACE`).
pub fn replace(srv: u64, id: u32, bytes: &[u8]) -> Result<(), Refusal> {
    put_file(srv, bytes)?;
    until_loaded(srv, client::replace_raw(srv, id as u64, bytes.len() as u64)?).map(drop)
}

pub fn unload(srv: u64, id: u32) -> Result<(), Refusal> {
    client::unload_raw(srv, id as u64)
}

/// Write `bytes` into graft `id`'s state at `at`.
pub fn set_state(srv: u64, id: u32, at: usize, bytes: &[u8]) -> Result<(), Refusal> {
    client::state(srv, id as u64, at as u64, bytes)
}

/// Up to 64 bytes of graft `id`'s state from `at`, as words.
pub fn read_state(srv: u64, id: u32, at: usize, n: usize) -> Result<[u64; 8], Refusal> {
    let m = client::read(srv, id as u64, at as u64, n as u64)?;
    let mut w = [0u64; 8];
    for (k, x) in w.iter_mut().enumerate().take(n.div_ceil(8)) {
        *x = m.word(2 + k);
    }
    Ok(w)
}

pub fn set_budget(srv: u64, id: u32, budget: u64) -> Result<(), Refusal> {
    client::budget(srv, id as u64, budget)
}

/// Counters of graft `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub calls: u64,
    pub aborts: u64,
    pub cycles: u64,
    /// 0: none; else the `graft::Abort` + 1.
    pub last_abort: u64,
    /// Bytes it holds in the server.
    pub memory: u64,
    /// Calls skipped: the request's graft time was spent.
    pub skipped: u64,
}

pub fn stats(srv: u64, id: u32) -> Result<Stats, Refusal> {
    let [calls, aborts, cycles, last_abort, _point, _tech, memory, skipped] = client::stats_raw(srv, id as u64)?;
    Ok(Stats { calls, aborts, cycles, last_abort, memory, skipped })
}

/// What a `TEST_RUN` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestRun {
    /// The last answer, `u64::MAX` if that call was aborted.
    pub last: u64,
    /// Cycles of all the calls.
    pub cycles: u64,
    pub aborts: u64,
    /// Calls made: fewer than asked when the request's time ran out or the graft was
    /// unloaded.
    pub calls: u64,
}

/// Run graft `id` up to `repeat` times on `input` at `srv`.
pub fn test_run(srv: u64, id: u32, input: &[u8], repeat: u32) -> Result<TestRun, Refusal> {
    let [last, cycles, aborts, calls] = client::test_run_raw(srv, id as u64, repeat as u64, input)?;
    Ok(TestRun { last, cycles, aborts, calls })
}

/// The caller's grafts at `srv` (every graft for principal 0), as `LIST` words them.
pub fn list(srv: u64) -> Result<String, Refusal> {
    let mut buf = alloc::vec![0u8; 4096];
    ipc::set_recv_buffer(&mut buf);
    // Not through `call`, whose buffer for a refusal's reason would take this one's place.
    let mut m = Msg::new(LIST, &[]);
    ipc::call(srv, &mut m, ipc::FOREVER)?;
    abi::check(m.word(1))?;
    let n = ipc::received_string_len().min(buf.len());
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}
