//! An HTTP/1.1 server over the `files` server: GET and HEAD of files (one byte range,
//! 206) and directories (HTML listings), keep-alive, and refusals with their status
//! (`crates/http` parses and decides; this program moves the bytes). One thread, many
//! connections: each waits in `net`'s WAIT for what it needs next (a request, or room
//! to send), and a connection idle too long is closed.
//!
//! File bodies go by Cue: httpd gets a ticket for the file from `files` and has `net`
//! send the bytes (`net_api::CUE`), never reading them itself; the connection waits
//! in WAIT for the transfer's end. `rwloop` sends them the old way instead — read from
//! `files`, written to the socket — for comparison (the Cue paper's user-level loop);
//! so does a body Cue cannot take (net's transfers all busy).
//!
//! Arguments: `port=N` (default 80); `rwloop`; `cue=K:T` (the transfers' schedule:
//! K blocks, then T ms of rest; default as fast as the connection takes them);
//! `busy` (the `net` and `cue` benchmarks' boots) adds GET `/.busy`, GET `/.meter/on`
//! and `/.meter/off` (start and stop the metering program, if the manifest grants
//! `meter`), and per-request sending: `/.rw/PATH` by the read/write loop,
//! `/.cue/K:T/PATH` by Cue with that schedule. `/.busy` answers "busy tsc meter
//! voluntary involuntary": the CPU's busy ticks since boot (rdtsc minus the kernel's
//! idle count: guest instructions under icount), the TSC, the metering program's units
//! so far, and every program's switches by cause (from root's ps), for the host to
//! measure the cost of what it fetches.
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

/// Connections served at once (each takes a WAIT entry, the listener one more). With
/// the backlog's listening sockets (`BACKLOG`) and room for closed connections still
/// finishing, their buffers stay within net's budget for one client (8 MiB at 128 KiB a
/// connection): past it net could not keep a socket listening, and new connections
/// would be refused until some close.
const MAX_CONNS: usize = 32;
const BACKLOG: u64 = 16;
/// A connection that sends no complete request (or takes nothing) for this long is closed.
const IDLE_US: u64 = 10_000_000;
/// Where received bytes land in the shared area, and where bytes to send are put.
const RECV_OFF: u64 = 0;
const RECV_MAX: u64 = 16 * 1024;
const SEND_OFF: u64 = 64 * 1024;
const SEND_MAX: u64 = 64 * 1024;

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
    inbuf: Vec<u8>,
    phase: Phase,
    out: Vec<u8>,
    pos: usize,
    file: Option<u64>,
    file_off: u64,
    file_end: u64,
    keep_alive: bool,
    last: u64,
    /// This answer's body was offered to Cue already (it fell back to the loop).
    cue_tried: bool,
    /// How this answer's body goes: by Cue with this schedule, or by the loop (None).
    sched: Option<Schedule>,
}

struct Httpd {
    net: Net,
    files: u64,
    conns: Vec<Conn>,
    served: u64,
    busy: bool,
    /// Bodies by Cue with this schedule (None: the read/write loop).
    cue: Option<Schedule>,
    /// The metering program (bench boots).
    meter: Option<u64>,
}

/// Every program's (voluntary, involuntary) switches, from root's ps.
fn switches() -> (u64, u64) {
    let text = rt::env::ps().unwrap_or_default();
    let head: Vec<&str> = text.lines().next().unwrap_or("").split_whitespace().collect();
    let (Some(vi), Some(ii)) = (head.iter().position(|w| *w == "VOLSW"), head.iter().position(|w| *w == "INVSW")) else { return (0, 0) };
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
        let mut path = req.path.as_str();
        if self.busy {
            if path == "/.busy" {
                let t = rt::sys::rdtsc();
                let units = self.meter.and_then(|m| meter_api::read(m).ok()).map_or(0, |r| r.0);
                let (vol, inv) = switches();
                let body = alloc::format!("{} {} {} {} {}\n", t.saturating_sub(rt::sys::idle_tsc()), t, units, vol, inv);
                self.small(c, Status::OK, &[("Content-Type", "text/plain")], &body, head_only);
                return;
            }
            if let Some(on) = path.strip_prefix("/.meter/") {
                let r = match (self.meter, on) {
                    (Some(m), "on") => meter_api::start(m),
                    (Some(m), "off") => meter_api::stop(m),
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
                let parsed = rest.split_once('/').and_then(|(s, _)| s.split_once(':')).and_then(|(k, t)| Some((k.parse().ok()?, t.parse().ok()?)));
                match parsed {
                    Some((k, t)) if np::schedule_ok(k, t) => c.sched = Some(Schedule { k, t_ms: t }),
                    _ => {
                        self.small(c, Status::BAD_REQUEST, &[], "want /.cue/K:T/PATH\n", head_only);
                        return;
                    }
                }
                path = &rest[rest.find('/').unwrap_or(0)..];
            }
        }
        let req = &http::Request { path: alloc::string::String::from(path), ..req.clone() };
        let st = files::stat(self.files, &req.path);
        match st {
            Ok((2, _)) if !req.slash && req.path != "/" => {
                let loc = alloc::format!("{}/", http::encode_path(&req.path));
                self.small(c, Status::MOVED, &[("Location", &loc)], "moved\n", head_only);
            }
            Ok((2, _)) => match files::list(self.files, &req.path) {
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
            Ok((1, size)) => {
                let (status, first, last) = match http::range(req.range.as_deref(), size) {
                    Range::Whole => (Status::OK, 0, size),
                    Range::Part(a, b) => (Status::PARTIAL, a, b + 1),
                    Range::Unsatisfiable => {
                        let cr = alloc::format!("bytes */{size}");
                        self.small(c, Status::RANGE_NOT_SATISFIABLE, &[("Content-Range", &cr)], "", head_only);
                        return;
                    }
                };
                let file = if head_only || first == last {
                    None
                } else {
                    match files::open(self.files, &req.path, false) {
                        Ok((h, _)) => Some(h),
                        Err(_) => {
                            self.small(c, Status::NOT_FOUND, &[], "not found\n", head_only);
                            return;
                        }
                    }
                };
                let cr = alloc::format!("bytes {}-{}/{}", first, last.saturating_sub(1), size);
                let mut fields = alloc::vec![("Content-Type", http::content_type(&req.path)), ("Accept-Ranges", "bytes")];
                if status == Status::PARTIAL {
                    fields.push(("Content-Range", &cr));
                }
                c.out = http::head(status, &fields, last - first, c.keep_alive).into_bytes();
                c.pos = 0;
                c.file = file;
                c.file_off = first;
                c.file_end = if file.is_some() { last } else { first };
                c.cue_tried = false;
                c.phase = Phase::Sending;
            }
            _ => self.small(c, Status::NOT_FOUND, &[("Content-Type", "text/plain")], "not found\n", head_only),
        }
    }

    fn small(&mut self, c: &mut Conn, status: Status, fields: &[(&str, &str)], body: &str, head_only: bool) {
        let mut out = http::head(status, fields, body.len() as u64, c.keep_alive).into_bytes();
        if !head_only {
            out.extend_from_slice(body.as_bytes());
        }
        c.out = out;
        c.pos = 0;
        c.file = None;
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
                    c.inbuf.extend_from_slice(self.net.area.bytes(RECV_OFF, n));
                    c.last = rt::sys::now_us();
                    if c.inbuf.len() > http::MAX_HEAD + RECV_MAX as usize {
                        break;
                    }
                }
                Err(Error::WouldBlock) => break,
                Err(e) => return Err(e),
            }
        }
        if let Phase::Request = c.phase {
            match http::parse(&c.inbuf) {
                Parse::More => {}
                Parse::Done(req) => {
                    c.inbuf.drain(..req.head_len);
                    self.served += 1;
                    self.answer(c, &req);
                }
                Parse::Refuse(st) => {
                    log_refusal(c, st);
                    c.inbuf.clear();
                    self.refuse(c, st);
                }
            }
        }
        Ok(true)
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
                    let _ = files::close(self.files, f);
                    c.file = None;
                }
                // The answer is out.
                if !c.keep_alive {
                    let _ = self.net.shutdown(c.h);
                    return Ok(false);
                }
                c.phase = Phase::Request;
                // A pipelined request may be waiting already.
                if !c.inbuf.is_empty() {
                    match http::parse(&c.inbuf) {
                        Parse::Done(req) => {
                            c.inbuf.drain(..req.head_len);
                            self.served += 1;
                            self.answer(c, &req);
                            continue;
                        }
                        Parse::Refuse(st) => {
                            log_refusal(c, st);
                            c.inbuf.clear();
                            self.refuse(c, st);
                            continue;
                        }
                        Parse::More => {}
                    }
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
        let r = files::ticket(self.files, f, slot).and_then(|(size, _)| self.net.cue(slot, c.h, c.file_off, c.file_end - c.file_off, size, sched, 0, np::NO_STATUS));
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

    fn drop_conn(&mut self, c: Conn) {
        if let Some(f) = c.file {
            let _ = files::close(self.files, f);
        }
        let _ = self.net.close(c.h);
    }

    /// Serve until the net server goes away (it restarted): then end, to be restarted
    /// and attach to the new one.
    fn serve(&mut self, listener: u64) -> i32 {
        loop {
            let mut entries: Vec<(u64, u64)> = self
                .conns
                .iter()
                .map(|c| match c.phase {
                    Phase::Request => (c.h, np::READABLE),
                    Phase::Sending => (c.h, np::WRITABLE | np::READABLE),
                    Phase::Cueing(t) => (t, np::ENDED),
                })
                .collect();
            let listening = self.conns.len() < MAX_CONNS;
            if listening {
                entries.push((listener, np::READABLE));
            }
            let ready = match self.net.wait(&entries, 1_000_000) {
                Ok(r) => r,
                Err(e) => {
                    println!("httpd: the net server answers {}: ending", e.name());
                    return 1;
                }
            };
            let now = rt::sys::now_us();
            let conns = core::mem::take(&mut self.conns);
            let mut keep = Vec::with_capacity(conns.len());
            for (i, mut c) in conns.into_iter().enumerate() {
                let mut alive = true;
                if ready & (1 << i) != 0 {
                    alive = match c.phase {
                        Phase::Request => self.read(&mut c),
                        Phase::Sending => self.write(&mut c),
                        Phase::Cueing(t) => self.cue_ended(&mut c, t),
                    }
                    .unwrap_or(false);
                    // A request read may have produced an answer to start sending.
                    if alive && matches!(c.phase, Phase::Sending) {
                        alive = self.write(&mut c).unwrap_or(false);
                    }
                } else if !matches!(c.phase, Phase::Cueing(_)) && now.saturating_sub(c.last) > IDLE_US {
                    println!("httpd: closing a connection idle for {} s ({} bytes of a request came)", IDLE_US / 1_000_000, c.inbuf.len());
                    alive = false;
                }
                if alive {
                    keep.push(c);
                } else {
                    self.drop_conn(c);
                }
            }
            self.conns = keep;
            if listening && ready & (1 << entries.len().saturating_sub(1)) != 0 {
                while self.conns.len() < MAX_CONNS {
                    match self.net.try_accept(listener) {
                        Ok((h, _, _)) => self.conns.push(Conn {
                            h,
                            inbuf: Vec::new(),
                            phase: Phase::Request,
                            out: Vec::new(),
                            pos: 0,
                            file: None,
                            file_off: 0,
                            file_end: 0,
                            keep_alive: false,
                            last: rt::sys::now_us(),
                            cue_tried: false,
                            sched: None,
                        }),
                        Err(_) => break,
                    }
                }
            }
        }
    }
}

/// A refused request, on the log: its status and how it began (printable bytes only).
fn log_refusal(c: &Conn, st: Status) {
    let shown: alloc::string::String = c.inbuf.iter().take(60).map(|b| if (0x20..0x7f).contains(b) { *b as char } else { '.' }).collect();
    println!("httpd: {} {} for {:?} ({} bytes)", st.0, st.reason(), shown, c.inbuf.len());
}

fn main() -> i32 {
    let (mut port, mut busy, mut cue) = (80u16, false, Some(Schedule::FAST));
    for w in rt::args().split(' ') {
        if let Some(p) = w.strip_prefix("port=").and_then(|p| p.parse().ok()) {
            port = p;
        } else if w == "rwloop" {
            cue = None;
        } else if let Some((k, t)) = w.strip_prefix("cue=").and_then(|v| v.split_once(':')) {
            match (k.parse(), t.parse()) {
                (Ok(k), Ok(t_ms)) if np::schedule_ok(k, t_ms) => cue = Some(Schedule { k, t_ms }),
                _ => {
                    println!("httpd: bad schedule {:?} (want cue=K:T, K in 1..={}, T ≤ {})", w, np::MAX_K, np::MAX_T_MS);
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
        let r = rt::env::lookup("net", ns).and_then(|_| Net::attach(ns)).and_then(|n| n.listen(port, BACKLOG).map(|l| (n, l)));
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
    let mut h = Httpd { net, files: fs, conns: Vec::new(), served: 0, busy, cue, meter };
    h.serve(listener)
}
