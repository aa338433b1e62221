//! An HTTP/1.1 server over the `files` server: GET and HEAD of files (one byte range,
//! 206) and directories (HTML listings), keep-alive, and refusals with their status
//! (`crates/http` parses and decides; this program moves the bytes). One thread, many
//! connections: each says once to `net` what it waits for next (`WATCH`: a request,
//! room to send, its Cue transfer's end), and one `WAIT_READY` gives back only the ready
//! ones, by token: the connection's place in a slab, found in O(1). Nothing walks every
//! connection per event or per timer: the deadlines below are kept in order
//! (`deadlines`), and a wait sleeps until the first. As many connections as net's memory gives this program (no constant
//! of its own: docs/network.md, "Connections and memory"). Slow and abusive clients
//! cost only themselves: a request head must come whole within `HEAD_US` of its first
//! byte and at `MIN_RATE` bytes/s after `RATE_GRACE_US` (else 408 and close), a
//! connection waiting for its next request is closed after `IDLE_US` (or sooner, the
//! longest idle first, when this program's connections near what net allows it), one
//! that takes nothing of its answer for `SEND_IDLE_US` is closed, and one address holds
//! at most `per_addr` connections. A newcomer that finds its address at its limit, or
//! connections near net's allowance, sheds a slow head under way (408) before an idle
//! connection (`sheddable`): a slowloris cannot hold the place of a fresh client.
//!
//! File bodies go by Cue: httpd gets a ticket for the file from `files` and has `net`
//! send the bytes (`net_api::CUE`), never reading them itself; the connection waits
//! for the transfer's end (watched: `ENDED`). `rwloop` sends them the old way instead — read from
//! `files`, written to the socket — for comparison (the Cue paper's user-level loop);
//! so does a body Cue cannot take (net's transfers all busy). A body of at most
//! `INLINE_MAX` bytes is read when the request is answered and goes with the head:
//! Cue's setup costs more than it saves there. Connections sending one file share one
//! handle on it (`open`), so a thousand clients of one file hold one of the principal's
//! handles at `files`; a file `files` cannot open now (its handles spent) is answered
//! 503 with `Retry-After`, not 404.
//!
//! `Date` comes from the CMOS clock when the manifest grants its ports (0x70–0x71);
//! files have no modification stamp (baiofs keeps none), so no `Last-Modified` or
//! `ETag`: `If-Range` never matches (the whole file, 200), `If-Match` fails (412).
//!
//! Arguments: `port=N` (default 80); `per_addr=N` (connections one peer address may
//! hold; default `PER_ADDR`); `rwloop`; `cue=K:T` (the transfers' schedule:
//! K blocks, then T ms of rest; default as fast as the connection takes them);
//! `busy` (the `net` and `cue` benchmarks' boots) adds GET `/.busy`, GET `/.meter/on`
//! and `/.meter/off` (start and stop the metering program, if the manifest grants
//! `meter`), and per-request sending: `/.rw/PATH` by the read/write loop,
//! `/.cue/K:T/PATH` by Cue with that schedule. `/.busy` answers "busy tsc meter
//! voluntary involuntary" and net's busy ticks by part (`PART=TICKS` words, the parts
//! of `net_api::PROFILE_PARTS`): the CPU's busy ticks since boot (rdtsc minus the
//! kernel's idle count: guest instructions under icount), the TSC, the metering
//! program's units so far, every program's switches by cause (from root's ps), and
//! where net's share went, for the host to measure the cost of what it fetches.
//!
//! Why one file of about 900 lines: parsing and every decision already live in
//! `crates/http`; what is left is one connection state machine (`Conn`, `Phase`) and
//! the loop that moves each connection from one phase to the next, which read best
//! together. Split it by phase (answer, Cue bodies, the loop) if it grows.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

extern crate alloc;

use abi::Error;
use alloc::vec::Vec;
use files_api::client as files;
use http::{Method, Parse, Range, Status};
use net_api::client::{Net, Schedule};
use net_api::{self as np};
use rt::println;

rt::entry!(main);

/// Connections net may hold for this program before it accepts them (a bound: net sets
/// no memory aside for them; a burst beyond waits, net holding its SYNs back).
const BACKLOG: u64 = 1024;
/// A connection waiting for its next request is closed after this long (or sooner, the
/// longest idle first, when connections run short: `shed`).
const IDLE_US: u64 = 60_000_000;
/// A request head must be whole this long after its first byte came (408 otherwise) ...
const HEAD_US: u64 = 10_000_000;
/// ... and, after the first `RATE_GRACE_US`, come at `MIN_RATE` bytes a second at least.
const RATE_GRACE_US: u64 = 2_000_000;
const MIN_RATE: u64 = 64;
/// An answer of which the client takes nothing for this long is given up.
const SEND_IDLE_US: u64 = 60_000_000;
/// A request head not whole this long after its first byte may be shed for room (a
/// client that means it sends its head in one or two segments, an RTT apart). Not a
/// second: 1,000 slowloris connections behind one NAT address opened again as fast as
/// they are cut off turned an address's 512 places over in under a second, and a
/// newcomer found none to shed (`http_slowloris`).
const SLOW_HEAD_US: u64 = 250_000;
/// Connections one peer address may hold (every host client behind QEMU's user
/// network is one address, 10.0.2.2: wide by default; `per_addr=N`).
const PER_ADDR: usize = 1024;
/// Deadlines looked through for an idle connection of an address at its limit.
const ADDR_SHED_LOOK: usize = 4096;
/// The most connections served at once: a bound of the slab (net's budget for this
/// program, `max_conns`, is the one that counts).
const MAX_CONNS: usize = 1 << 20;
/// Where WAIT_READY's (token, events) pairs go in the shared area, and how many at most.
const WAIT_OFF: u64 = 128 * 1024;
const WAIT_MAX: u64 = 1024;
/// The listener's token (a connection's is its place in the slab).
const LISTENER: u64 = u64::MAX;
/// The longest sleep in one wait (with no deadline sooner), and the longest while
/// connections run short (idle ones are shed a second after their last request).
const SLEEP_US: u64 = 60_000_000;
const SHED_SLEEP_US: u64 = 1_000_000;
/// Where received bytes land in the shared area, and where bytes to send are put.
const RECV_OFF: u64 = 0;
const RECV_MAX: u64 = 16 * 1024;
const SEND_OFF: u64 = 64 * 1024;
const SEND_MAX: u64 = 64 * 1024;
/// Bodies up to this size are read whole when the request is answered and sent with
/// the head (one read of the files server: `files_api::MAX_IO`), not by Cue.
const INLINE_MAX: u64 = files_api::MAX_IO;

/// What a connection does.
enum Phase {
    /// Reading a request head (`inbuf` holds what came so far).
    Request,
    /// Sending: `out[pos..]`, then file bytes `file_off..file_end` of `file`.
    Sending,
    /// `net` sends the file bytes (Cue transfer with this id).
    Cueing(u64),
}

struct Conn {
    h: u64,
    /// The peer's address.
    peer: u64,
    inbuf: Vec<u8>,
    /// How far `inbuf` was looked through for the head's end.
    scanned: usize,
    /// When this request's first byte came (0: none yet).
    head_at: u64,
    phase: Phase,
    out: Vec<u8>,
    pos: usize,
    /// The body's file: a handle shared with every connection sending the same path
    /// (`Httpd::open`), released when the answer is out.
    file: Option<u64>,
    file_path: alloc::string::String,
    file_off: u64,
    file_end: u64,
    keep_alive: bool,
    last: u64,
    /// This answer's body was offered to Cue already (it fell back to the loop).
    cue_tried: bool,
    /// How this answer's body goes: by Cue with this schedule, or by the loop (None).
    sched: Option<Schedule>,
    /// What net watches for this connection now: socket events, and the transfer whose
    /// end it waits for (`Httpd::rewatch`).
    watched: u64,
    watched_cue: Option<u64>,
    /// Its entry in `Httpd::deadlines` (0: none).
    dl: u64,
}

struct Httpd {
    net: Net,
    files: u64,
    /// The connections, by token (their place); free places; how many there are.
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    live: usize,
    /// (when, token) of each connection's next deadline, in order: a timer costs the
    /// deadlines due, not a walk of the connections.
    deadlines: alloc::collections::BTreeSet<(u64, u64)>,
    /// Connections by peer address.
    per_addr: alloc::collections::BTreeMap<u64, usize>,
    /// Connections net's budget allows this program (LIMITS), past which new ones wait.
    max_conns: usize,
    max_per_addr: usize,
    served: u64,
    /// The wall clock at `clock.1` µs of uptime (seconds since 1970), if the CMOS clock
    /// could be read; the `Date` text of the second last made.
    clock: Option<(u64, u64)>,
    date: (u64, alloc::string::String),
    /// Connections closed by each deadline since the last log line (idle, head not
    /// whole, head too slow, answer not taken), and heads cut off with 408 for room
    /// (`shed_one`); when that was said.
    closed: [u64; 5],
    logged: u64,
    /// Connections ended by a failure since the last line that said so, and when it was.
    failed: u64,
    failed_logged: u64,
    busy: bool,
    /// Bodies by Cue with this schedule (None: the read/write loop).
    cue: Option<Schedule>,
    /// The metering program (bench boots).
    meter: Option<u64>,
    /// Files open for bodies being sent: path → (handle, connections using it). One
    /// handle per file however many connections send it (files' reads take an offset),
    /// so a thousand clients fetching one file hold one of the principal's handles.
    open: alloc::collections::BTreeMap<alloc::string::String, (u64, u32)>,
    /// A small file's bytes, as `files::fetch` gives them (`INLINE_MAX`).
    small_buf: Vec<u8>,
    /// httpd's own busy ticks (`/.busy`): its loop between waits, less its calls to net
    /// and files.
    own: u64,
}

/// The answer to a request whose file the files server cannot give now, by its error.
fn status_of(e: Error) -> Status {
    match e {
        Error::NotFound | Error::InvalidArg => Status::NOT_FOUND,
        // Its handles (or memory) are spent for now: the client may try again.
        Error::NoSpace | Error::NoMemory | Error::WouldBlock => Status::UNAVAILABLE,
        _ => Status::SERVER_ERROR,
    }
}

/// Every program's (voluntary, involuntary) switches, from root's ps.
fn switches() -> (u64, u64) {
    let text = rt::env::ps().unwrap_or_default();
    let head: Vec<&str> = text.lines().next().unwrap_or("").split_whitespace().collect();
    let (Some(vi), Some(ii)) = (head.iter().position(|w| *w == "VOLSW"), head.iter().position(|w| *w == "INVSW"))
    else {
        return (0, 0);
    };
    text.lines().skip(1).fold((0, 0), |(v, i), l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        let n = |k: usize| w.get(k).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        (v + n(vi), i + n(ii))
    })
}

impl Httpd {
    /// Start the answer to `req`: the head (and a small body) in `out`, the file range after it.
    fn answer(&mut self, c: &mut Conn, req: &http::Request) {
        c.keep_alive = req.keep_alive;
        let head_only = req.method == Method::Head;
        c.sched = self.cue;
        let mut cue_asked = false;
        let mut path = req.path.as_str();
        if self.busy {
            if path == "/.busy" {
                let t = rt::sys::rdtsc();
                let units = self.meter.and_then(|m| meter_api::client::read(m).ok()).map_or(0, |[units, _]| units);
                let (vol, inv) = switches();
                let mut body =
                    alloc::format!("{} {} {} {} {}", t.saturating_sub(rt::sys::idle_tsc()), t, units, vol, inv);
                // Then net's busy ticks by part (`net_api::PROFILE`), if it tells them, as
                // `part=ticks` words; httpd's own and files' (`files_api::PROFILE`).
                if let Ok(prof) = self.net.profile() {
                    for (name, p) in np::PROFILE_PARTS.iter().zip(prof) {
                        body.push_str(&alloc::format!(" {name}={p}"));
                    }
                }
                body.push_str(&alloc::format!(" httpd={}", self.own));
                if let Ok([f]) = files::profile(self.files) {
                    body.push_str(&alloc::format!(" files={f}"));
                }
                body.push('\n');
                self.small(c, Status::OK, &[("Content-Type", "text/plain")], &body, head_only);
                return;
            }
            if let Some(on) = path.strip_prefix("/.meter/") {
                let r = match (self.meter, on) {
                    (Some(m), "on") => meter_api::client::start(m),
                    (Some(m), "off") => meter_api::client::stop(m),
                    _ => Err(Error::NotFound),
                };
                let st = if r.is_ok() { Status::OK } else { Status::NOT_FOUND };
                self.small(c, st, &[("Content-Type", "text/plain")], "meter\n", head_only);
                return;
            }
            if let Some(rest) = path.strip_prefix("/.rw/") {
                c.sched = None;
                path = &req.path[req.path.len() - rest.len() - 1..];
            } else if let Some(rest) = path.strip_prefix("/.cue/") {
                let parsed = rest
                    .split_once('/')
                    .and_then(|(s, _)| s.split_once(':'))
                    .and_then(|(k, t)| Some((k.parse().ok()?, t.parse().ok()?)));
                match parsed {
                    Some((k, t)) if np::schedule_ok(k, t) => {
                        c.sched = Some(Schedule { k, t_ms: t });
                        cue_asked = true;
                    }
                    _ => {
                        self.small(c, Status::BAD_REQUEST, &[], "want /.cue/K:T/PATH\n", head_only);
                        return;
                    }
                }
                path = &rest[rest.find('/').unwrap_or(0)..];
            }
        }
        // (A copy of the request only when a prefix was taken off its path.)
        let renamed;
        let req = if path.len() == req.path.len() {
            req
        } else {
            renamed = http::Request { path: alloc::string::String::from(path), ..req.clone() };
            &renamed
        };
        // A body to come: what the path names, and a small file's bytes, in one call
        // (`FETCH`); else what it names alone.
        let mut fetched = 0;
        let st = if head_only || cue_asked {
            files::stat(self.files, &req.path)
        } else {
            let mut buf = core::mem::take(&mut self.small_buf);
            buf.resize(INLINE_MAX as usize, 0);
            let r = files::fetch(self.files, &req.path, &mut buf).map(|(k, size, n)| {
                fetched = n;
                (k, size)
            });
            self.small_buf = buf;
            r
        };
        match st {
            Ok((files::Kind::Dir, _)) if !req.slash && req.path != "/" => {
                let loc = alloc::format!("{}/", http::encode_path(&req.path));
                self.small(c, Status::MOVED, &[("Location", &loc)], "moved\n", head_only);
            }
            Ok((files::Kind::Dir, _)) => match files::list(self.files, &req.path) {
                Ok(text) => {
                    let mut entries: Vec<(bool, u64, &str)> = text
                        .lines()
                        .filter_map(|l| {
                            let (kind, rest) = l.split_once(' ')?;
                            let (size, name) = rest.split_once(' ')?;
                            Some((kind == "d", size.parse().unwrap_or(0), name))
                        })
                        .collect();
                    entries.sort_by(|a, b| a.2.cmp(b.2));
                    let page = http::listing(&req.path, &entries);
                    self.small(c, Status::OK, &[("Content-Type", "text/html; charset=utf-8")], &page, head_only);
                }
                Err(_) => self.small(c, Status::SERVER_ERROR, &[], "cannot list\n", head_only),
            },
            // A file's name with a slash after it names no file (as nginx answers).
            Ok((files::Kind::File, _)) if http::file_target(req).is_err() => {
                self.small(c, Status::NOT_FOUND, &[("Content-Type", "text/plain")], "not found\n", head_only)
            }
            Ok((files::Kind::File, size)) => {
                let range = match http::condition(req, None) {
                    http::Condition::Failed => {
                        self.small(
                            c,
                            Status::PRECONDITION_FAILED,
                            &[("Content-Type", "text/plain")],
                            "precondition failed\n",
                            head_only,
                        );
                        return;
                    }
                    http::Condition::NotModified => {
                        self.small(c, Status::NOT_MODIFIED, &[], "", true);
                        return;
                    }
                    http::Condition::Whole => None,
                    http::Condition::Go => req.range.as_deref(),
                };
                let (status, first, last) = match http::range(range, size) {
                    Range::Whole => (Status::OK, 0, size),
                    Range::Part(a, b) => (Status::PARTIAL, a, b + 1),
                    Range::Unsatisfiable => {
                        let cr = alloc::format!("bytes */{size}");
                        self.small(c, Status::RANGE_NOT_SATISFIABLE, &[("Content-Range", &cr)], "", head_only);
                        return;
                    }
                };
                let whole = fetched as u64 == size && size > 0;
                let file = if head_only || first == last || whole {
                    None
                } else {
                    match self.open_shared(&req.path) {
                        Ok(h) => Some(h),
                        Err(e) => {
                            self.unavailable(c, e, head_only);
                            return;
                        }
                    }
                };
                // A small body goes with the head, read now (the handle given back at
                // once); Cue's setup (a ticket, a transfer) costs more than it saves
                // below `INLINE_MAX`, unless the client asked for Cue (`/.cue/`).
                let mut inline = None;
                if let Some(h) = file.filter(|_| last - first <= INLINE_MAX && !cue_asked) {
                    let mut body = alloc::vec![0u8; (last - first) as usize];
                    let r = files::read_into(self.files, h, first, &mut body);
                    self.unshare(&req.path);
                    match r {
                        Ok(n) if n == body.len() => inline = Some(body),
                        // The file shrank since its size was read: it is changing.
                        Ok(_) => return self.unavailable(c, Error::WouldBlock, false),
                        Err(e) => return self.unavailable(c, e, false),
                    }
                }
                let file = if inline.is_some() || whole { None } else { file };
                let cr;
                let mut fields =
                    [("Content-Type", http::content_type(&req.path)), ("Accept-Ranges", "bytes"), ("", "")];
                let mut nf = 2;
                if status == Status::PARTIAL {
                    cr = alloc::format!("bytes {}-{}/{}", first, last.saturating_sub(1), size);
                    fields[2] = ("Content-Range", &cr);
                    nf = 3;
                }
                // The head into the connection's buffer (kept between answers), the body
                // after it: from the bytes `FETCH` gave, or those just read.
                c.out.clear();
                http::head_into(&mut c.out, status, self.date(), &fields[..nf], last - first, c.keep_alive);
                if let Some(body) = inline {
                    c.out.extend_from_slice(&body);
                } else if whole {
                    c.out.extend_from_slice(&self.small_buf[first as usize..last as usize]);
                }
                c.pos = 0;
                c.file = file;
                if file.is_some() {
                    c.file_path = req.path.clone();
                }
                c.file_off = first;
                c.file_end = if file.is_some() { last } else { first };
                c.cue_tried = false;
                c.phase = Phase::Sending;
            }
            Err(e) if status_of(e) != Status::NOT_FOUND => self.unavailable(c, e, head_only),
            _ => self.small(c, Status::NOT_FOUND, &[("Content-Type", "text/plain")], "not found\n", head_only),
        }
    }

    /// The file the files server could not give (`e`): 404, or 503 (try again in a
    /// second) when its handles are spent for now, or 500.
    fn unavailable(&mut self, c: &mut Conn, e: Error, head_only: bool) {
        match status_of(e) {
            Status::UNAVAILABLE => self.small(
                c,
                Status::UNAVAILABLE,
                &[("Content-Type", "text/plain"), ("Retry-After", "1")],
                "busy: try again\n",
                head_only,
            ),
            Status::NOT_FOUND => {
                self.small(c, Status::NOT_FOUND, &[("Content-Type", "text/plain")], "not found\n", head_only)
            }
            st => self.small(c, st, &[("Content-Type", "text/plain")], "cannot read the file\n", head_only),
        }
    }

    /// A handle on `path` for a body: the one open already for another connection, or
    /// a new one.
    fn open_shared(&mut self, path: &str) -> Result<u64, Error> {
        if let Some((h, refs)) = self.open.get_mut(path) {
            *refs += 1;
            return Ok(*h);
        }
        let (h, _) = files::open(self.files, path, false)?;
        self.open.insert(alloc::string::String::from(path), (h, 1));
        Ok(h)
    }

    /// Connection `c` is done with its body's file.
    fn release(&mut self, c: &mut Conn) {
        if c.file.take().is_some() {
            let path = core::mem::take(&mut c.file_path);
            self.unshare(&path);
        }
    }

    /// One user less of the handle on `path` (`open_shared`): it closes with its last.
    fn unshare(&mut self, path: &str) {
        if let Some((h, refs)) = self.open.get_mut(path) {
            *refs -= 1;
            if *refs == 0 {
                let h = *h;
                self.open.remove(path);
                let _ = files::close(self.files, h);
            }
        }
    }

    /// `Date`'s value now (empty without a clock).
    fn date(&mut self) -> &str {
        let Some((at_boot, since)) = self.clock else { return "" };
        let now = at_boot + rt::sys::now_us().saturating_sub(since) / 1_000_000;
        if self.date.0 != now || self.date.1.is_empty() {
            self.date = (now, http::http_date(now));
        }
        &self.date.1
    }

    fn small(&mut self, c: &mut Conn, status: Status, fields: &[(&str, &str)], body: &str, head_only: bool) {
        self.release(c);
        c.out.clear();
        http::head_into(&mut c.out, status, self.date(), fields, body.len() as u64, c.keep_alive);
        if !head_only {
            c.out.extend_from_slice(body.as_bytes());
        }
        c.pos = 0;
        c.phase = Phase::Sending;
    }

    fn refuse(&mut self, c: &mut Conn, status: Status) {
        c.keep_alive = false;
        let mut fields: Vec<(&str, &str)> = alloc::vec![("Content-Type", "text/plain")];
        if status == Status::METHOD_NOT_ALLOWED {
            fields.push(("Allow", "GET, HEAD"));
        }
        let body = alloc::format!("{} {}\n", status.0, status.reason());
        self.small(c, status, &fields, &body, false);
    }

    /// Take what has arrived; Ok(false): the connection is over.
    fn read(&mut self, c: &mut Conn) -> Result<bool, Error> {
        loop {
            match self.net.recv_area(c.h, RECV_OFF, RECV_MAX) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    if c.inbuf.is_empty() && matches!(c.phase, Phase::Request) {
                        c.head_at = rt::sys::now_us();
                    }
                    c.inbuf.extend_from_slice(self.net.area.bytes(RECV_OFF, n));
                    c.last = rt::sys::now_us();
                    // Less than asked: that was all for now (what comes later is
                    // given by the next wait: net's readiness is level-triggered).
                    if n < RECV_MAX || c.inbuf.len() > http::MAX_HEAD + RECV_MAX as usize {
                        break;
                    }
                }
                Err(Error::WouldBlock) => break,
                Err(e) => return Err(e),
            }
        }
        if let Phase::Request = c.phase {
            self.next_request(c);
        }
        Ok(true)
    }

    /// Take the next request from `inbuf` if its head is whole (or refuse it). The head
    /// is parsed once whole: a head that comes a byte at a time is scanned once.
    fn next_request(&mut self, c: &mut Conn) -> bool {
        let parsed = match http::head_end(&c.inbuf, c.scanned) {
            Some(_) => http::parse(&c.inbuf),
            None => {
                c.scanned = c.inbuf.len();
                match http::parse(&c.inbuf[..c.inbuf.len().min(http::MAX_HEAD + 1)]) {
                    // Without its end only the limits can be judged.
                    Parse::Done(_) => Parse::More,
                    p => p,
                }
            }
        };
        match parsed {
            Parse::More => false,
            Parse::Done(req) => {
                c.inbuf.drain(..req.head_len);
                c.scanned = 0;
                c.head_at = if c.inbuf.is_empty() { 0 } else { rt::sys::now_us() };
                self.served += 1;
                self.answer(c, &req);
                true
            }
            Parse::Refuse(st) => {
                log_refusal(c, st);
                c.inbuf.clear();
                c.scanned = 0;
                self.refuse(c, st);
                true
            }
        }
    }

    /// Send what can go now; Ok(false): the connection is over.
    fn write(&mut self, c: &mut Conn) -> Result<bool, Error> {
        loop {
            if c.pos == c.out.len() {
                c.out.clear();
                c.pos = 0;
                // Refill from the file.
                if let Some(f) = c.file {
                    if c.file_off < c.file_end && !c.cue_tried {
                        if let Some(sched) = c.sched {
                            c.cue_tried = true;
                            if self.start_cue(c, f, sched) {
                                return Ok(true);
                            }
                        }
                    }
                    if c.file_off < c.file_end {
                        let want = (c.file_end - c.file_off).min(files_api::MAX_IO).min(SEND_MAX);
                        let mut buf = alloc::vec![0u8; want as usize];
                        let n = files::read_into(self.files, f, c.file_off, &mut buf)?;
                        if n == 0 {
                            // The file shrank under us: the promised length cannot be kept.
                            return Ok(false);
                        }
                        buf.truncate(n);
                        c.file_off += n as u64;
                        c.out = buf;
                        continue;
                    }
                    self.release(c);
                }
                // The answer is out.
                if !c.keep_alive {
                    let _ = self.net.shutdown(c.h);
                    return Ok(false);
                }
                c.phase = Phase::Request;
                c.last = rt::sys::now_us();
                // A pipelined request may be waiting already.
                if !c.inbuf.is_empty() && self.next_request(c) {
                    continue;
                }
                return Ok(true);
            }
            let n = (c.out.len() - c.pos).min(SEND_MAX as usize);
            self.net.area.bytes(SEND_OFF, n as u64).copy_from_slice(&c.out[c.pos..c.pos + n]);
            match self.net.send_area(c.h, SEND_OFF, n as u64) {
                Ok(k) => {
                    c.pos += k as usize;
                    c.last = rt::sys::now_us();
                }
                Err(Error::WouldBlock) => return Ok(true),
                Err(e) => return Err(e),
            }
        }
    }

    /// Have `net` send the rest of the body; false: it cannot (the loop sends it).
    fn start_cue(&mut self, c: &mut Conn, f: u64, sched: Schedule) -> bool {
        let slot = rt::alloc_slot();
        let r = files::ticket(self.files, f, slot).and_then(|(size, _)| {
            self.net.cue(slot, c.h, c.file_off, c.file_end - c.file_off, size, sched, 0, np::NO_STATUS)
        });
        rt::free_slot(slot);
        match r {
            Ok(t) => {
                c.phase = Phase::Cueing(t);
                true
            }
            Err(Error::NoSpace) => false,
            Err(e) => {
                println!("httpd: Cue refused the body ({}): sending it ourselves", e.name());
                false
            }
        }
    }

    /// A connection's transfer has ended; Ok(false): the connection is over.
    fn cue_ended(&mut self, c: &mut Conn, t: u64) -> Result<bool, Error> {
        let st = self.net.cue_state(t)?;
        st.result()?;
        c.file_off = c.file_end;
        c.last = rt::sys::now_us();
        c.phase = Phase::Sending;
        self.write(c)
    }

    fn drop_conn(&mut self, mut c: Conn) {
        self.release(&mut c);
        let _ = self.net.close(c.h);
        if let Some(n) = self.per_addr.get_mut(&c.peer) {
            *n -= 1;
            if *n == 0 {
                self.per_addr.remove(&c.peer);
            }
        }
    }

    /// Is the connection to go on after a step that answered `r`? A failure other than
    /// the peer's reset (one of files, of Cue, of net) is said on the log, a few lines a
    /// second at most.
    fn fine(&mut self, r: Result<bool, Error>) -> bool {
        match r {
            Ok(go) => go,
            Err(Error::Reset) => false,
            Err(e) => {
                self.failed += 1;
                let now = rt::sys::now_us();
                if now.saturating_sub(self.failed_logged) >= 1_000_000 {
                    println!("httpd: {} connections ended by a failure, the last: {}", self.failed, e.name());
                    self.failed = 0;
                    self.failed_logged = now;
                }
                false
            }
        }
    }

    /// Has connection `c` run past a deadline (at `now`)? Which one (an index of
    /// `closed`): 0 idle between requests, 1 a head not whole in time, 2 a head too
    /// slow, 3 an answer nobody takes.
    fn overdue(c: &Conn, now: u64) -> Option<usize> {
        match c.phase {
            Phase::Request if c.inbuf.is_empty() => (now.saturating_sub(c.last) > IDLE_US).then_some(0),
            Phase::Request => {
                let took = now.saturating_sub(c.head_at);
                if took > HEAD_US {
                    Some(1)
                } else if took > RATE_GRACE_US && (c.inbuf.len() as u64) < MIN_RATE * took / 1_000_000 {
                    Some(2)
                } else {
                    None
                }
            }
            Phase::Sending => (now.saturating_sub(c.last) > SEND_IDLE_US).then_some(3),
            Phase::Cueing(_) => None,
        }
    }

    /// Connections near what net allows this program: close slow heads under way and
    /// idle ones (waiting for a next request; RFC 9112 §9.8 lets a server close those at
    /// any time) — `sheddable`, the heads first, then the longest idle — so that new
    /// connections, which wait in net's backlog meanwhile, come in. (Called by the sweep.)
    fn shed(&mut self, now: u64) {
        let margin = self.max_conns / 64 + 1;
        if self.live + margin <= self.max_conns {
            return;
        }
        // The idle ones in the order of their deadlines (an idle connection's is its
        // last use and `IDLE_US`: the longest idle first), looked for among the first
        // deadlines only — not a walk of every connection on each sweep, which with a
        // thousand connections near the budget cost each request a thousand steps.
        let n = self.live + margin - self.max_conns;
        let mut idle: Vec<usize> = Vec::new();
        for &(_, tok) in self.deadlines.iter().take(4 * n + 64) {
            let i = tok as usize;
            let Some(c) = self.conns.get(i).and_then(|c| c.as_ref()) else { continue };
            if Self::sheddable(c, now) {
                idle.push(i);
                if idle.len() == n {
                    break;
                }
            }
        }
        for i in idle {
            self.shed_one(i);
        }
    }

    /// May connection `c` be closed to make room (at `now`)? One reading a request head
    /// begun over `SLOW_HEAD_US` ago and not whole (a slowloris's: a head comes whole in
    /// one or two segments from a client that means it), or one waiting for a next
    /// request, idle for over a second (a client that has just been answered keeps it). Looked
    /// for in the order of the deadlines, the heads under way come first: theirs are
    /// at most `HEAD_US` after their first byte, an idle connection's `IDLE_US` after
    /// its last use.
    fn sheddable(c: &Conn, now: u64) -> bool {
        matches!(c.phase, Phase::Request)
            && if c.inbuf.is_empty() {
                now.saturating_sub(c.last) > 1_000_000
            } else {
                now.saturating_sub(c.head_at) > SLOW_HEAD_US
            }
    }

    /// Close connection `i` (`sheddable`) for room: a head under way is answered 408
    /// first (its client learns why), an idle connection just closed (RFC 9112 §9.8).
    fn shed_one(&mut self, i: usize) {
        let Some(mut c) = self.take(i) else { return };
        self.deadlines.remove(&(c.dl, i as u64));
        if c.inbuf.is_empty() {
            self.closed[0] += 1;
        } else {
            self.closed[4] += 1;
            c.keep_alive = false;
            self.refuse(&mut c, Status::TIMEOUT);
            let _ = self.write(&mut c);
        }
        self.drop_conn(c);
    }

    /// Make room for a newcomer from `peer`, an address at its limit: close that
    /// address's slow head under way, else its connection idle longest (RFC 9112 §9.8
    /// lets a server close an idle one at any time; `sheddable`), looked for among the first `ADDR_SHED_LOOK` deadlines (an
    /// idle connection's is its last use and `IDLE_US`, so in order of idleness after
    /// the heads under way). Behind a NAT every client is one address (QEMU's user
    /// network shows every host client as 10.0.2.2): without this, idle keep-alive
    /// connections at the limit shut everyone out until they time out. false: none
    /// may go (the newcomer is refused).
    fn shed_addr(&mut self, peer: u64, now: u64) -> bool {
        let found = self.deadlines.iter().take(ADDR_SHED_LOOK).map(|&(_, tok)| tok as usize).find(|&i| {
            self.conns.get(i).and_then(|c| c.as_ref()).is_some_and(|c| c.peer == peer && Self::sheddable(c, now))
        });
        let Some(i) = found else { return false };
        self.shed_one(i);
        true
    }

    /// Take connection `i` out of its place (given back by `put`, or freed).
    fn take(&mut self, i: usize) -> Option<Conn> {
        let c = self.conns.get_mut(i)?.take()?;
        self.live -= 1;
        self.free.push(i);
        Some(c)
    }

    /// Put connection `c` in a place: its token.
    fn put(&mut self, c: Conn) -> usize {
        self.live += 1;
        match self.free.pop() {
            Some(i) => {
                self.conns[i] = Some(c);
                i
            }
            None => {
                self.conns.push(Some(c));
                self.conns.len() - 1
            }
        }
    }

    /// Tell net what connection `c` (token `tok`) waits for now, if that changed: a
    /// request (readable), room to send (writable), or its transfer's end (the socket
    /// not watched meanwhile: level-triggered, a pipelined request would be given on
    /// every wait).
    fn rewatch(&mut self, c: &mut Conn, tok: u64) -> Result<(), Error> {
        let (want, cue) = match c.phase {
            Phase::Request => (np::READABLE, None),
            Phase::Sending => (np::WRITABLE, None),
            Phase::Cueing(t) => (0, Some(t)),
        };
        if cue != c.watched_cue {
            if let Some(t) = cue {
                self.net.watch(t, np::ENDED, tok)?;
            }
            // A transfer ended is forgotten by net with its watch (CUE_STATE).
            c.watched_cue = cue;
        }
        if want != c.watched {
            self.net.watch(c.h, want, tok)?;
            c.watched = want;
        }
        Ok(())
    }

    /// When connection `c` runs past its deadline as it stands (see `overdue`; 0: it
    /// has none, its transfer running).
    fn deadline(c: &Conn) -> u64 {
        match c.phase {
            Phase::Request if c.inbuf.is_empty() => c.last + IDLE_US + 1,
            Phase::Request => {
                // The rate check fails once `took` reaches (len + 1) s / MIN_RATE.
                let slow = (c.inbuf.len() as u64 + 1).saturating_mul(1_000_000).div_ceil(MIN_RATE);
                c.head_at + HEAD_US.min(RATE_GRACE_US.max(slow)) + 1
            }
            Phase::Sending => c.last + SEND_IDLE_US + 1,
            Phase::Cueing(_) => 0,
        }
    }

    /// Keep connection `c`'s (token `tok`) entry in `deadlines` as its state says, no
    /// sooner than `after`.
    fn set_deadline(&mut self, c: &mut Conn, tok: u64, after: u64) {
        let d = match Self::deadline(c) {
            0 => 0,
            d => d.max(after),
        };
        if d != c.dl {
            if c.dl != 0 {
                self.deadlines.remove(&(c.dl, tok));
            }
            if d != 0 {
                self.deadlines.insert((d, tok));
            }
            c.dl = d;
        }
    }

    /// The deadlines due at `now`: overdue connections closed (a slow head gets its
    /// 408), the others' deadlines moved on; idle ones shed when connections run short.
    fn sweep(&mut self, now: u64) {
        while let Some(&(when, tok)) = self.deadlines.first() {
            if when > now {
                break;
            }
            self.deadlines.pop_first();
            let i = tok as usize;
            let Some(c) = self.conns.get_mut(i).and_then(|c| c.as_mut()) else { continue };
            if c.dl != when {
                continue;
            }
            c.dl = 0;
            let Some(why) = Self::overdue(c, now) else {
                if let Some(mut c) = self.take(i) {
                    self.set_deadline(&mut c, tok, now + 1);
                    self.put(c);
                }
                continue;
            };
            let Some(mut c) = self.take(i) else { continue };
            self.closed[why] += 1;
            if why == 1 || why == 2 {
                // 408, sent as it goes (the connection closes either way).
                c.keep_alive = false;
                self.refuse(&mut c, Status::TIMEOUT);
                let _ = self.write(&mut c);
            }
            self.drop_conn(c);
        }
        self.shed(now);
    }

    /// A line now and then on what the deadlines closed (not one per connection: a
    /// thousand slow clients would flood the console).
    fn log_closed(&mut self, now: u64) {
        if self.closed.iter().all(|n| *n == 0) || now.saturating_sub(self.logged) < 5_000_000 {
            return;
        }
        let [idle, head, slow, send, shed] = self.closed;
        println!("httpd: closed {} idle for {} s or for room, {} heads not whole in {} s (408), {} heads under {} B/s (408), {} heads under way for room (408), {} answers not taken for {} s", idle, IDLE_US / 1_000_000, head, HEAD_US / 1_000_000, slow, MIN_RATE, shed, send, SEND_IDLE_US / 1_000_000);
        self.closed = [0; 5];
        self.logged = now;
    }

    /// Serve until the net server goes away (it restarted): then end, to be restarted
    /// and attach to the new one.
    fn serve(&mut self, listener: u64) -> i32 {
        let mut ready: Vec<(u64, u64)> = Vec::new();
        let mut listening = false;
        loop {
            let want = self.live < MAX_CONNS;
            if want != listening {
                let r = self.net.watch(listener, if want { np::READABLE } else { 0 }, LISTENER);
                if let Err(e) = r {
                    println!("httpd: net does not take the listener's watch ({}): ending", e.name());
                    return 1;
                }
                listening = want;
            }
            let now = rt::sys::now_us();
            // The first deadline bounds the sleep.
            let most = if self.live + self.max_conns / 64 + 1 > self.max_conns { SHED_SLEEP_US } else { SLEEP_US };
            let sleep = self.deadlines.first().map_or(most, |(d, _)| d.saturating_sub(now)).clamp(1, most);
            if let Err(e) = self.net.wait_ready(WAIT_OFF, WAIT_MAX, sleep, &mut ready) {
                println!("httpd: the net server answers {}: ending", e.name());
                return 1;
            }
            let woke = (rt::sys::rdtsc(), np::client::call_ticks() + files::call_ticks());
            let mut accept = false;
            for &(tok, _) in &ready {
                if tok == LISTENER {
                    accept = true;
                    continue;
                }
                let Some(mut c) = self.take(tok as usize) else { continue };
                let r = match c.phase {
                    Phase::Request => self.read(&mut c),
                    Phase::Sending => self.write(&mut c),
                    Phase::Cueing(t) => self.cue_ended(&mut c, t),
                };
                let mut alive = self.fine(r);
                // A request read may have produced an answer to start sending.
                if alive && matches!(c.phase, Phase::Sending) {
                    let r = self.write(&mut c);
                    alive = self.fine(r);
                }
                if alive {
                    let r = self.rewatch(&mut c, tok);
                    alive = self.fine(r.map(|_| true));
                }
                if alive {
                    self.set_deadline(&mut c, tok, 0);
                    let at = self.put(c);
                    debug_assert_eq!(at as u64, tok);
                } else {
                    self.deadlines.remove(&(c.dl, tok));
                    self.drop_conn(c);
                }
            }
            let now = rt::sys::now_us();
            self.sweep(now);
            self.log_closed(now);
            while accept && self.live < MAX_CONNS {
                let Ok((h, peer, _)) = self.net.try_accept(listener) else { break };
                if self.per_addr.get(&peer).is_some_and(|n| *n >= self.max_per_addr) && !self.shed_addr(peer, now) {
                    // This address holds its share, none of it idle: the connection
                    // is refused at once.
                    let _ = self.net.close(h);
                    continue;
                }
                *self.per_addr.entry(peer).or_insert(0) += 1;
                let mut c = Conn {
                    h,
                    peer,
                    inbuf: Vec::new(),
                    scanned: 0,
                    head_at: 0,
                    phase: Phase::Request,
                    out: Vec::new(),
                    pos: 0,
                    file: None,
                    file_path: alloc::string::String::new(),
                    file_off: 0,
                    file_end: 0,
                    keep_alive: false,
                    last: rt::sys::now_us(),
                    cue_tried: false,
                    sched: None,
                    watched: 0,
                    watched_cue: None,
                    dl: 0,
                };
                let tok = self.free.last().copied().unwrap_or(self.conns.len()) as u64;
                match self.rewatch(&mut c, tok) {
                    Ok(()) => {
                        self.set_deadline(&mut c, tok, 0);
                        self.put(c);
                    }
                    Err(e) => {
                        let _ = self.fine(Err(e));
                        self.drop_conn(c);
                    }
                }
            }
            let calls = np::client::call_ticks() + files::call_ticks() - woke.1;
            self.own += rt::sys::rdtsc().wrapping_sub(woke.0).saturating_sub(calls);
        }
    }
}

/// A refused request, on the log: its status and how it began (printable bytes only).
fn log_refusal(c: &Conn, st: Status) {
    let shown: alloc::string::String =
        c.inbuf.iter().take(60).map(|b| if (0x20..0x7f).contains(b) { *b as char } else { '.' }).collect();
    println!("httpd: {} {} for {:?} ({} bytes)", st.0, st.reason(), shown, c.inbuf.len());
}

fn main() -> i32 {
    let (mut port, mut busy, mut cue, mut per_addr) = (80u16, false, Some(Schedule::FAST), PER_ADDR);
    for w in rt::args().split(' ') {
        if let Some(p) = w.strip_prefix("port=").and_then(|p| p.parse().ok()) {
            port = p;
        } else if let Some(n) = w.strip_prefix("per_addr=").and_then(|p| p.parse().ok()) {
            per_addr = n;
        } else if w == "rwloop" {
            cue = None;
        } else if let Some((k, t)) = w.strip_prefix("cue=").and_then(|v| v.split_once(':')) {
            match (k.parse(), t.parse()) {
                (Ok(k), Ok(t_ms)) if np::schedule_ok(k, t_ms) => cue = Some(Schedule { k, t_ms }),
                _ => {
                    println!(
                        "httpd: bad schedule {:?} (want cue=K:T, K in 1..={}, T ≤ {})",
                        w,
                        np::MAX_K,
                        np::MAX_T_MS
                    );
                    return 1;
                }
            }
        }
        busy |= w == "busy";
    }
    let (ns, fs) = (rt::alloc_slot(), rt::alloc_slot());
    if rt::env::lookup("files", fs).is_err() {
        println!("httpd: the manifest must grant net and files");
        return 1;
    }
    // The net server may be (re)starting: try for 30 s.
    let mut last = Error::NotFound;
    let mut got = None;
    for _ in 0..300 {
        let r = rt::env::lookup("net", ns)
            .and_then(|_| Net::attach(ns))
            .and_then(|n| n.listen(port, BACKLOG).map(|l| (n, l)));
        match r {
            Ok(x) => {
                got = Some(x);
                break;
            }
            Err(e) => last = e,
        }
        let _ = rt::sys::cap_delete(ns);
        rt::sys::sleep_us(100_000);
    }
    let Some((net, listener)) = got else {
        println!("httpd: cannot listen on port {}: {}", port, last.name());
        return 1;
    };
    println!("httpd: serving the files server on port {}", port);
    let meter = rt::alloc_slot();
    let meter = if busy && rt::env::lookup("meter", meter).is_ok() { Some(meter) } else { None };
    // The wall clock, if the manifest grants the CMOS clock's ports.
    let clock = rt::rtc::init().ok().and_then(|_| rt::rtc::read()).map(|(y, mo, d, h, mi, s)| {
        let unix = http::days_from_civil(y, mo, d).max(0) as u64 * 86400 + (h * 3600 + mi * 60 + s) as u64;
        (unix, rt::sys::now_us())
    });
    if clock.is_none() {
        println!("httpd: no clock (the CMOS clock's ports are not granted): no Date field");
    }
    // As many connections as net's budget for this program holds.
    let max_conns = net.limits().map_or(MAX_CONNS, |l| (l[2] / l[4].max(1)) as usize).clamp(1, MAX_CONNS);
    let mut h = Httpd {
        max_conns,
        net,
        files: fs,
        conns: Vec::new(),
        free: Vec::new(),
        live: 0,
        deadlines: alloc::collections::BTreeSet::new(),
        per_addr: alloc::collections::BTreeMap::new(),
        max_per_addr: per_addr,
        served: 0,
        clock,
        date: (0, alloc::string::String::new()),
        closed: [0; 5],
        logged: 0,
        failed: 0,
        failed_logged: 0,
        busy,
        cue,
        meter,
        open: alloc::collections::BTreeMap::new(),
        small_buf: Vec::new(),
        own: 0,
    };
    h.serve(listener)
}
