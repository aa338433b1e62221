//! An anonymous, read-only FTP server over the `files` server, in passive mode only
//! (no PORT/EPRT): USER, PASS, PWD, CWD, CDUP, TYPE, SIZE, PASV, EPSV (and EPSV ALL),
//! REST, RETR, ABOR, LIST, NLST, SYST, FEAT, NOOP, QUIT (`crates/ftp` parses, words the
//! replies and decides who keeps a session; this program moves the bytes).
//! RETR sends the file by Cue — a ticket from `files`, `net` sends it on the data
//! connection, not a byte through this program — as the Cue paper's Table 8 did with
//! wuftpd; `rwloop` sends it by reading and writing instead, for comparison (and so
//! does a transfer Cue cannot take: net's transfers for this program all busy). One
//! thread, many sessions, all waiting in one `net` WAIT_READY for what each needs next (each
//! loop tells net what changed with `WATCH`);
//! replies go out without blocking (a client that reads none of them costs only its
//! own session).
//!
//! Sessions and their limits (docs/network.md, "ftpd"): as many sessions as net's
//! memory for this program holds (two connections each: control and data), or
//! `sessions=N` if fewer; one address holds at most `per_addr` of them (default: all
//! but a quarter, room for other addresses), and past either limit the session idle
//! longest (of that address, or of anyone) is shed with 421 to make room
//! (`ftp::limits::admit`). A session that sends no command but NOOP for
//! `limits::IDLE_US` is closed with 421. A data port reserved by PASV/EPSV goes back
//! when no data connection came within `DATA_WAIT_US` (425), a transfer that moves
//! less than `limits::MIN_BYTES` in a `limits::WINDOW_US` is aborted (426) and its port
//! freed, and a port given back is drained of connections nobody will take.
//!
//! Arguments: `port=N` (control port, default 21); `pasv=…` the data ports to listen
//! on and the ports to announce for them (where a client reaches them through a NAT's
//! forwarded ports): `G:A`, `G1-G2` or `G1-G2:A1`, separated by commas (default
//! 2122–2185 as they are, 64 ports); `ip=A.B.C.D` the address PASV announces (default
//! ours; clients such as curl use the control connection's address anyway);
//! `sessions=N`, `per_addr=N`; `rwloop`; `cue=K:T` the transfers' schedule.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

extern crate alloc;

use abi::Error;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use files_api::client as files;
use ftp::{limits, Command};
use net_api::client::{Net, Schedule};
use net_api::{self as np};
use rt::println;

rt::entry!(main);

/// A data port reserved by PASV/EPSV, or a RETR/LIST waiting for its data connection,
/// is given up after this long (425): clients that never connect must not hold the
/// data ports.
const DATA_WAIT_US: u64 = 20_000_000;
/// Bytes of commands kept unread (past it the control connection is not read until
/// they are taken: TCP holds the rest back). While a transfer runs, or replies wait to
/// go out, commands wait here.
const BUSY_INBUF: usize = 4096;
/// Replies owed to a client are not worked on past this (its next commands wait) ...
const OUT_HIGH: usize = 8 * 1024;
/// ... and a client that lets this much of them pile up is closed.
const OUT_MAX: usize = 64 * 1024;
/// The deadlines are looked at this often (and the loop's sleep bounded by it).
const SWEEP_US: u64 = 500_000;
const RECV_OFF: u64 = 0;
const RECV_MAX: u64 = 4096;
/// Control replies and, for `rwloop`, file bytes go out from here in the shared area.
const SEND_OFF: u64 = 64 * 1024;
const SEND_MAX: usize = 32 * 1024;
/// Where `WAIT_READY`'s (token, events) pairs go in the shared area.
const WAIT_OFF: u64 = 96 * 1024;
/// The most pairs one `WAIT_READY` gives.
const WAIT_MAX: u64 = {
    let room = (np::AREA_BYTES - WAIT_OFF) / 16;
    if room < np::MAX_EVENTS {
        room
    } else {
        np::MAX_EVENTS
    }
};
/// The most sessions: two watched sockets each, and the listener (memory bounds them
/// first: `limits`).
const MAX_SESSIONS: usize = 8192;
const LOOP_CHUNK: u64 = files_api::MAX_IO;

/// What a session's data connection is for, once it comes.
enum Data {
    /// Bytes `first..size` of open file `fh`.
    Retr {
        fh: u64,
        first: u64,
        size: u64,
    },
    List(Vec<u8>),
}

enum Job {
    /// Reading commands.
    Idle,
    /// A RETR or LIST waits for the client to connect to the passive port.
    Await(Data),
    /// `net` sends the file (Cue transfer `tid`) on `data`.
    Cue {
        tid: u64,
        data: u64,
        fh: u64,
    },
    /// This program sends `fh` (rwloop: read from `files`, written to the socket) or
    /// `text` itself on `data`; `buf[pos..]` was read and is not yet taken; `sent`
    /// bytes went in all.
    Loop {
        data: u64,
        fh: u64,
        off: u64,
        size: u64,
        buf: Vec<u8>,
        pos: usize,
        sent: u64,
    },
    Text {
        data: u64,
        text: Vec<u8>,
        pos: usize,
    },
}

struct Session {
    ctrl: u64,
    /// The peer's address.
    peer: u64,
    cwd: String,
    inbuf: Vec<u8>,
    /// Replies not yet taken by the connection.
    out: Vec<u8>,
    user_ok: bool,
    logged_in: bool,
    /// EPSV ALL came: only EPSV sets up data connections now.
    epsv_all: bool,
    port: Option<usize>,
    /// When the data port was reserved, or the data connection began to be awaited.
    port_at: u64,
    /// Where the next RETR starts (REST).
    rest: u64,
    job: Job,
    /// The transfer's progress (its stall deadline), while one runs.
    pace: Option<limits::Pace>,
    /// When the last command but NOOP came, or the last transfer ended.
    last: u64,
    open: bool,
}

impl Session {
    fn new(ctrl: u64, peer: u64, now: u64) -> Session {
        Session {
            ctrl,
            peer,
            cwd: String::from("/"),
            inbuf: Vec::new(),
            out: Vec::new(),
            user_ok: false,
            logged_in: false,
            epsv_all: false,
            port: None,
            port_at: 0,
            rest: 0,
            job: Job::Idle,
            pace: None,
            last: now,
            open: true,
        }
    }

    /// Since when it has been idle (for `limits::admit`): None while it works.
    fn idle_since(&self) -> Option<u64> {
        (self.open && matches!(self.job, Job::Idle) && self.out.is_empty()).then_some(self.last)
    }
}

/// What stands in a session's place while it is being worked on.
fn placeholder() -> Session {
    let mut s = Session::new(0, 0, 0);
    s.open = false;
    s
}

struct Port {
    announced: u16,
    listener: u64,
    taken: bool,
}

struct Ftpd {
    net: Net,
    files: u64,
    ports: Vec<Port>,
    /// Data ports not taken (indexes into `ports`), the next one given last.
    free: Vec<usize>,
    ip: u32,
    cue: Option<Schedule>,
    max_sessions: usize,
    per_addr: usize,
    /// What was closed since the last line on the log: idle (421), shed for a newcomer
    /// (421), refused (421), stalled transfers (426), unused data ports (425).
    counts: [u64; 5],
    logged: u64,
    /// What net watches for us (`WATCH`; the set lives in net): (handle, a transfer id
    /// rather than a socket) → (events, token). Kept as net has it: a closed socket's
    /// entry goes with it.
    watched: BTreeMap<(u64, bool), (u64, u64)>,
}

/// What a watched socket is for; its token is `Why::token`.
#[derive(Clone, Copy)]
enum Why {
    Listener,
    Ctrl(usize),
    Job(usize),
}

impl Why {
    fn token(self) -> u64 {
        match self {
            Why::Listener => 0,
            Why::Ctrl(i) => 2 * i as u64 + 1,
            Why::Job(i) => 2 * i as u64 + 2,
        }
    }

    fn of(token: u64) -> Why {
        match token {
            0 => Why::Listener,
            t if t % 2 == 1 => Why::Ctrl((t / 2) as usize),
            t => Why::Job((t / 2 - 1) as usize),
        }
    }
}

impl Ftpd {
    /// Queue `text` for the control connection and send what it takes now.
    fn reply(&self, s: &mut Session, text: &str) {
        s.out.extend_from_slice(text.as_bytes());
        self.flush(s);
    }

    /// Send queued replies as far as the connection takes them (never waiting).
    fn flush(&self, s: &mut Session) {
        while s.open && !s.out.is_empty() {
            let n = s.out.len().min(SEND_MAX);
            self.net.area.bytes(SEND_OFF, n as u64).copy_from_slice(&s.out[..n]);
            match self.net.send_area(s.ctrl, SEND_OFF, n as u64) {
                Ok(0) | Err(Error::WouldBlock) => break,
                Ok(k) => {
                    s.out.drain(..k as usize);
                }
                Err(_) => s.open = false,
            }
        }
        if s.out.len() > OUT_MAX {
            // It reads none of its replies: it costs only its own session.
            s.open = false;
        }
    }

    /// A last word before closing (421): sent if the connection takes it now.
    fn farewell(&self, s: &mut Session, text: &str) {
        s.out.clear();
        self.reply(s, text);
        s.open = false;
    }

    fn take_port(&mut self) -> Option<usize> {
        let p = self.free.pop()?;
        self.ports[p].taken = true;
        Some(p)
    }

    fn give_port(&mut self, p: usize) {
        self.drain(p);
        if self.ports[p].taken {
            self.ports[p].taken = false;
            // Given out last again: a client's late connection to it finds it quiet.
            self.free.insert(0, p);
        }
    }

    /// Give the data port back and close the data connection.
    fn end_data(&mut self, s: &mut Session, data: Option<u64>) {
        if let Some(d) = data {
            self.close_socket(d);
        }
        if let Some(p) = s.port.take() {
            self.give_port(p);
        }
    }

    /// Close connections waiting on data port `p` that no session will take (one that
    /// came late, or for a session that is gone): the next session's data connection
    /// must be its own.
    fn drain(&mut self, p: usize) {
        while let Ok((h, _, _)) = self.net.try_accept(self.ports[p].listener) {
            self.close_socket(h);
        }
    }

    fn end_job(&mut self, s: &mut Session) {
        s.pace = None;
        match core::mem::replace(&mut s.job, Job::Idle) {
            Job::Idle => {}
            Job::Await(Data::Retr { fh, .. }) => {
                let _ = files::close(self.files, fh);
                self.end_data(s, None);
            }
            Job::Await(Data::List(_)) => self.end_data(s, None),
            Job::Cue { data, fh, tid, .. } => {
                // Closing the socket cancels a transfer still running on it; its id may
                // be another's later.
                self.watched.remove(&(tid, true));
                let _ = files::close(self.files, fh);
                self.end_data(s, Some(data));
            }
            Job::Loop { data, fh, .. } => {
                // Closing the socket cancels a transfer still running on it.
                let _ = files::close(self.files, fh);
                self.end_data(s, Some(data));
            }
            Job::Text { data, .. } => self.end_data(s, Some(data)),
        }
    }

    /// Bytes the transfer has moved so far (None: no transfer runs, or it has just
    /// ended: a Cue transfer's end, which net reports once, is taken here).
    fn moved(&mut self, s: &mut Session) -> Option<u64> {
        match &s.job {
            Job::Cue { tid, .. } => match self.net.cue_state(*tid) {
                Ok(st) if !st.ended() => Some(st.sent),
                r => {
                    self.finish(s, r.is_ok_and(|st| st.result().is_ok()));
                    None
                }
            },
            Job::Loop { sent, .. } => Some(*sent),
            Job::Text { pos, .. } => Some(*pos as u64),
            Job::Idle | Job::Await(_) => None,
        }
    }

    /// The transfer has ended (`ok`: whole): 226 or 426, and the commands that came
    /// during it.
    fn finish(&mut self, s: &mut Session, ok: bool) {
        self.end_job(s);
        self.reply(s, if ok { "226 Transfer complete\r\n" } else { "426 Connection closed; transfer aborted\r\n" });
        s.last = rt::sys::now_us();
        self.commands(s);
    }

    fn command(&mut self, s: &mut Session, line: &[u8]) {
        let cmd = ftp::parse(line);
        if !matches!(cmd, Command::Noop) {
            // NOOP keeps a connection open through NATs but is not work: the idle
            // deadline and shedding do not count it (`ftp::limits`).
            s.last = rt::sys::now_us();
        }
        if !ftp::keeps_rest(&cmd) {
            s.rest = 0;
        }
        if s.epsv_all && ftp::not_after_epsv_all(&cmd) {
            return self.reply(s, "503 EPSV ALL was sent: only EPSV here\r\n");
        }
        let needs_login = !matches!(
            cmd,
            Command::User(_)
                | Command::Pass
                | Command::Quit
                | Command::Syst
                | Command::Feat
                | Command::Noop
                | Command::Bad
        );
        if needs_login && !s.logged_in {
            return self.reply(s, "530 Log in first (USER anonymous)\r\n");
        }
        match cmd {
            Command::User(u) => {
                s.user_ok = u.eq_ignore_ascii_case("anonymous") || u.eq_ignore_ascii_case("ftp");
                s.logged_in = false;
                if s.user_ok {
                    self.reply(s, "331 Anonymous login ok, any password will do\r\n");
                } else {
                    self.reply(s, "530 Only anonymous login here\r\n");
                }
            }
            Command::Pass => {
                if s.user_ok {
                    s.logged_in = true;
                    self.reply(s, "230 Logged in, read-only\r\n");
                } else {
                    self.reply(s, "503 Log in with USER first\r\n");
                }
            }
            Command::Pwd => {
                let r = ftp::pwd_reply(&s.cwd);
                self.reply(s, &r);
            }
            Command::Cwd(p) => match ftp::resolve(&s.cwd, p) {
                Some(dir) if files::stat(self.files, &dir).is_ok_and(|(k, _)| k == files::Kind::Dir) => {
                    s.cwd = dir;
                    self.reply(s, "250 Directory changed\r\n");
                }
                _ => self.reply(s, "550 No such directory\r\n"),
            },
            Command::Cdup => {
                s.cwd = ftp::parent(&s.cwd);
                self.reply(s, "250 Directory changed\r\n");
            }
            Command::Type(t) => match t.to_ascii_uppercase().as_str() {
                "I" | "A" | "A N" | "L 8" => self.reply(s, "200 Type set (bytes go as they are)\r\n"),
                _ => self.reply(s, "504 Only TYPE I and A\r\n"),
            },
            Command::Size(p) => match ftp::resolve(&s.cwd, p).map(|f| files::stat(self.files, &f)) {
                Some(Ok((files::Kind::File, size))) => self.reply(s, &alloc::format!("213 {}\r\n", size)),
                _ => self.reply(s, "550 No such file\r\n"),
            },
            Command::Epsv(ftp::Epsv::All) => {
                s.epsv_all = true;
                self.reply(s, "200 EPSV ALL ok: only EPSV from now on\r\n");
            }
            Command::Epsv(ftp::Epsv::Protocol) => self.reply(s, "522 Network protocol not supported, use (1)\r\n"),
            Command::Epsv(ftp::Epsv::Bad) => self.reply(s, "501 EPSV wants 1, ALL or nothing\r\n"),
            Command::Pasv | Command::Epsv(ftp::Epsv::Port) => {
                let port = match s.port {
                    Some(p) => Some(p),
                    None => self.take_port().inspect(|p| self.drain(*p)),
                };
                match port {
                    Some(i) => {
                        s.port = Some(i);
                        s.port_at = rt::sys::now_us();
                        let a = self.ports[i].announced;
                        let r =
                            if matches!(cmd, Command::Pasv) { ftp::pasv_reply(self.ip, a) } else { ftp::epsv_reply(a) };
                        self.reply(s, &r);
                    }
                    None => self.reply(s, "425 No data port free; try again later\r\n"),
                }
            }
            Command::Retr(p) => {
                if s.port.is_none() {
                    return self.reply(s, "425 Use PASV or EPSV first\r\n");
                }
                let path = ftp::resolve(&s.cwd, p);
                let rest = core::mem::take(&mut s.rest);
                match path.as_deref().map(|f| (f, files::stat(self.files, f))) {
                    Some((_, Ok((files::Kind::File, size)))) if rest > size => self
                        .reply(s, &alloc::format!("554 Restart point {} is past the end ({} bytes)\r\n", rest, size)),
                    Some((f, Ok((files::Kind::File, _)))) => {
                        match files::open(self.files, f, false) {
                            Ok((fh, size)) => {
                                let rest = rest.min(size);
                                if rest > 0 {
                                    self.reply(s, &alloc::format!("150 Opening BINARY mode data connection for {} ({} bytes from byte {})\r\n", p, size - rest, rest));
                                } else {
                                    self.reply(
                                        s,
                                        &alloc::format!(
                                            "150 Opening BINARY mode data connection for {} ({} bytes)\r\n",
                                            p,
                                            size
                                        ),
                                    );
                                }
                                s.port_at = rt::sys::now_us();
                                s.job = Job::Await(Data::Retr { fh, first: rest, size });
                            }
                            // It is there (stat said so): the handles are spent for now.
                            Err(_) => self.reply(s, "450 Cannot open the file now; try again later\r\n"),
                        }
                    }
                    _ => self.reply(s, "550 No such file\r\n"),
                }
            }
            Command::List { path, names_only } => {
                if s.port.is_none() {
                    return self.reply(s, "425 Use PASV or EPSV first\r\n");
                }
                let dir = ftp::resolve(&s.cwd, path);
                match dir.as_deref().map(|d| files::list(self.files, d)) {
                    Some(Ok(text)) => {
                        let mut out = String::new();
                        for l in text.lines() {
                            let mut w = l.splitn(3, ' ');
                            let (Some(kind), Some(size), Some(name)) = (w.next(), w.next(), w.next()) else { continue };
                            if names_only {
                                out.push_str(name);
                                out.push_str("\r\n");
                            } else {
                                out.push_str(&ftp::list_line(kind == "d", size.parse().unwrap_or(0), name));
                            }
                        }
                        self.reply(s, "150 Here comes the listing\r\n");
                        s.port_at = rt::sys::now_us();
                        s.job = Job::Await(Data::List(out.into_bytes()));
                    }
                    _ => self.reply(s, "550 No such directory\r\n"),
                }
            }
            Command::Syst => self.reply(s, "215 UNIX Type: L8\r\n"),
            Command::Feat => self.reply(s, "211-Features:\r\n SIZE\r\n EPSV\r\n PASV\r\n REST STREAM\r\n211 End\r\n"),
            Command::Rest(Some(n)) => {
                s.rest = n;
                self.reply(s, &alloc::format!("350 Restarting at {}; send RETR\r\n", n));
            }
            Command::Rest(None) => self.reply(s, "501 REST wants a byte offset\r\n"),
            Command::Abor => self.reply(s, "225 No transfer to abort\r\n"),
            Command::Noop => self.reply(s, "200 Nothing done\r\n"),
            Command::Quit => {
                self.reply(s, "221 Goodbye\r\n");
                s.open = false;
            }
            Command::Other(v) => self.reply(s, &alloc::format!("502 {} is not implemented here\r\n", v)),
            Command::Bad => self.reply(s, "500 Syntax error\r\n"),
        }
    }

    /// Read what came on the control connection (up to `BUSY_INBUF` kept), then take
    /// the commands that can be taken now.
    fn read_ctrl(&mut self, s: &mut Session) {
        while s.open && s.inbuf.len() < BUSY_INBUF {
            match self.net.recv_area(s.ctrl, RECV_OFF, RECV_MAX) {
                Ok(0) => s.open = false,
                Ok(n) => s.inbuf.extend_from_slice(self.net.area.bytes(RECV_OFF, n)),
                Err(Error::WouldBlock) => break,
                Err(_) => s.open = false,
            }
        }
        self.commands(s);
    }

    /// The commands in `inbuf`, in order, while replies do not pile up. While a
    /// transfer runs, only QUIT, ABOR and NOOP are taken at once (the rest wait for its
    /// end).
    fn commands(&mut self, s: &mut Session) {
        while s.open && s.out.len() < OUT_HIGH {
            let Some(i) = s.inbuf.iter().position(|b| *b == b'\n') else {
                if s.inbuf.len() > ftp::MAX_LINE {
                    self.farewell(s, "500 Line too long\r\n");
                }
                return;
            };
            if i >= ftp::MAX_LINE {
                s.inbuf.drain(..=i);
                self.reply(s, "500 Line too long\r\n");
                continue;
            }
            if !matches!(s.job, Job::Idle) {
                match ftp::parse(&s.inbuf[..=i]) {
                    Command::Quit => {
                        self.end_job(s);
                        self.farewell(s, "221 Goodbye (transfer abandoned)\r\n");
                        return;
                    }
                    Command::Abor => {
                        s.inbuf.drain(..=i);
                        self.end_job(s);
                        self.reply(s, "426 Transfer aborted\r\n226 ABOR done\r\n");
                        continue;
                    }
                    Command::Noop => {
                        s.inbuf.drain(..=i);
                        self.reply(s, "200 Nothing done\r\n");
                        continue;
                    }
                    _ => return,
                }
            }
            let line: Vec<u8> = s.inbuf.drain(..=i).collect();
            self.command(s, &line);
        }
    }

    /// The deadlines of session `s` at `now`: the idle one (421), a data port or data
    /// connection awaited too long (425), a stalled transfer (426).
    fn deadlines(&mut self, s: &mut Session, now: u64) {
        if matches!(s.job, Job::Idle) && now.saturating_sub(s.last) > limits::IDLE_US {
            self.counts[0] += 1;
            self.end_data(s, None);
            return self.farewell(s, "421 Idle too long; closing the control connection\r\n");
        }
        if s.port.is_some() && now.saturating_sub(s.port_at) > DATA_WAIT_US {
            match s.job {
                Job::Idle => {
                    self.counts[4] += 1;
                    self.end_data(s, None);
                }
                Job::Await(_) => {
                    self.counts[4] += 1;
                    self.end_job(s);
                    self.reply(
                        s,
                        &alloc::format!("425 No data connection came within {} s\r\n", DATA_WAIT_US / 1_000_000),
                    );
                    s.last = now;
                    self.commands(s);
                }
                _ => {}
            }
        }
        let Some(moved) = self.moved(s) else { return };
        let stalled = match &mut s.pace {
            Some(p) => p.stalled(now, moved),
            None => {
                s.pace = Some(limits::Pace::new(now, moved));
                false
            }
        };
        if stalled {
            self.counts[3] += 1;
            self.end_job(s);
            self.reply(
                s,
                &alloc::format!(
                    "426 Transfer too slow (under {} bytes in {} s); aborted\r\n",
                    limits::MIN_BYTES,
                    limits::WINDOW_US / 1_000_000
                ),
            );
            s.last = now;
            self.commands(s);
        }
    }

    /// The client has connected to the passive port: start sending.
    fn data_came(&mut self, s: &mut Session) {
        let Some(p) = s.port else { return };
        let Ok((data, _, _)) = self.net.try_accept(self.ports[p].listener) else { return };
        s.job = match core::mem::replace(&mut s.job, Job::Idle) {
            Job::Await(Data::List(text)) => Job::Text { data, text, pos: 0 },
            Job::Await(Data::Retr { fh, first, size }) => {
                let mut job = Job::Loop { data, fh, off: first, size, buf: Vec::new(), pos: 0, sent: 0 };
                if let (Some(sched), true) = (self.cue, size > first) {
                    let slot = rt::alloc_slot();
                    let r = files::ticket(self.files, fh, slot).and_then(|(sz, _)| {
                        self.net.cue(slot, data, first, 0, sz, sched, np::CUE_SHUTDOWN, np::NO_STATUS)
                    });
                    rt::free_slot(slot);
                    match r {
                        Ok(tid) => job = Job::Cue { tid, data, fh },
                        // net's transfers for this program are all busy: this one by the loop.
                        Err(Error::NoSpace) => {}
                        Err(e) => println!("ftpd: Cue refused the file ({}): sending it ourselves", e.name()),
                    }
                }
                job
            }
            other => other,
        };
        s.pace = Some(limits::Pace::new(rt::sys::now_us(), 0));
        self.step(s);
    }

    /// Move a data job on as far as it goes now.
    fn step(&mut self, s: &mut Session) {
        let done = match &mut s.job {
            Job::Cue { tid, .. } => match self.net.cue_state(*tid) {
                Ok(st) if !st.ended() => return,
                Ok(st) => Some(st.result().is_ok()),
                Err(_) => Some(false),
            },
            Job::Text { data, text, pos } => loop {
                if *pos == text.len() {
                    let _ = self.net.shutdown(*data);
                    break Some(true);
                }
                let n = (text.len() - *pos).min(SEND_MAX);
                self.net.area.bytes(SEND_OFF, n as u64).copy_from_slice(&text[*pos..*pos + n]);
                match self.net.send_area(*data, SEND_OFF, n as u64) {
                    Ok(0) | Err(Error::WouldBlock) => return,
                    Ok(k) => *pos += k as usize,
                    Err(_) => break Some(false),
                }
            },
            Job::Loop { data, fh, off, size, buf, pos, sent } => loop {
                if *pos == buf.len() {
                    if *off == *size {
                        let _ = self.net.shutdown(*data);
                        break Some(true);
                    }
                    buf.resize((*size - *off).min(LOOP_CHUNK) as usize, 0);
                    match files::read_into(self.files, *fh, *off, buf) {
                        Ok(0) | Err(_) => break Some(false),
                        Ok(n) => {
                            buf.truncate(n);
                            *off += n as u64;
                            *pos = 0;
                        }
                    }
                }
                let n = (buf.len() - *pos).min(SEND_MAX);
                self.net.area.bytes(SEND_OFF, n as u64).copy_from_slice(&buf[*pos..*pos + n]);
                match self.net.send_area(*data, SEND_OFF, n as u64) {
                    Ok(0) | Err(Error::WouldBlock) => return,
                    Ok(k) => {
                        *pos += k as usize;
                        *sent += k;
                    }
                    Err(_) => break Some(false),
                }
            },
            Job::Idle | Job::Await(_) => return,
        };
        if let Some(ok) = done {
            self.finish(s, ok);
        }
    }

    /// A connection has come: a session for it, if `limits::admit` finds room (shedding
    /// the session idle longest, when an address or the table is full), else 421.
    fn arrive(&mut self, sessions: &mut Vec<Session>, h: u64, peer: u64, now: u64) {
        let seats: Vec<limits::Seat> =
            sessions.iter().map(|s| limits::Seat { peer: s.peer, idle_since: s.idle_since() }).collect();
        let mut s = Session::new(h, peer, now);
        match limits::admit(&seats, peer, self.max_sessions, self.per_addr, now) {
            limits::Admit::Take => {}
            limits::Admit::Shed(i) => {
                self.counts[1] += 1;
                let mut old = core::mem::replace(&mut sessions[i], placeholder());
                self.farewell(&mut old, "421 Closing this idle session: others are waiting\r\n");
                self.close(old);
                sessions.swap_remove(i);
            }
            limits::Admit::Refuse => {
                self.counts[2] += 1;
                self.farewell(&mut s, "421 Too many sessions; try again later\r\n");
                self.close_socket(h);
                return;
            }
        }
        self.reply(&mut s, "220 Scion ftpd (anonymous, read-only)\r\n");
        sessions.push(s);
    }

    /// End a session: its job, its data port and its control connection.
    fn close(&mut self, mut s: Session) {
        self.end_job(&mut s);
        // A port reserved by PASV/EPSV and never used (the session had no job) comes
        // back too.
        self.end_data(&mut s, None);
        self.close_socket(s.ctrl);
    }

    /// Close a socket of ours; net forgets what it watched on it, and so do we (a new
    /// socket may get its handle).
    fn close_socket(&mut self, h: u64) {
        self.watched.remove(&(h, false));
        let _ = self.net.close(h);
    }

    /// Tell net what to watch now: `want` against what it watches (`WATCH` for each
    /// change only).
    fn rewatch(&mut self, want: BTreeMap<(u64, bool), (u64, u64)>) {
        for (k, v) in &want {
            if self.watched.get(k) != Some(v) {
                let _ = self.net.watch(k.0, v.0, v.1);
            }
        }
        for k in self.watched.keys() {
            if !want.contains_key(k) {
                // Gone already (a closed socket, a forgotten transfer) answers InvalidCap.
                let _ = self.net.watch(k.0, 0, 0);
            }
        }
        self.watched = want;
    }

    /// A line now and then on what the limits closed (not one per session).
    fn log_counts(&mut self, now: u64) {
        if self.counts.iter().all(|n| *n == 0) || now.saturating_sub(self.logged) < 5_000_000 {
            return;
        }
        let [idle, shed, refused, stalled, unused] = self.counts;
        println!(
            "ftpd: closed {} sessions idle for {} s, shed {} idle for newcomers, refused {} (full), aborted {} stalled transfers, gave back {} unused data ports",
            idle,
            limits::IDLE_US / 1_000_000,
            shed,
            refused,
            stalled,
            unused
        );
        self.counts = [0; 5];
        self.logged = now;
    }

    fn serve(&mut self, listener: u64) -> i32 {
        let mut sessions: Vec<Session> = Vec::new();
        let mut ready: Vec<(u64, u64)> = Vec::new();
        let mut swept = 0;
        loop {
            let mut want = BTreeMap::new();
            want.insert((listener, false), (np::READABLE, Why::Listener.token()));
            for (i, s) in sessions.iter().enumerate() {
                // The control connection is watched whatever the session does (QUIT,
                // ABOR, a closed connection), unless commands already wait to be taken;
                // and for room while replies wait to go out.
                let mut interest = 0;
                if s.inbuf.len() < BUSY_INBUF {
                    interest |= np::READABLE;
                }
                if !s.out.is_empty() {
                    interest |= np::WRITABLE;
                }
                if interest != 0 {
                    want.insert((s.ctrl, false), (interest, Why::Ctrl(i).token()));
                }
                let (h, transfer, events) = match &s.job {
                    Job::Idle => continue,
                    Job::Await(_) => match s.port {
                        Some(p) => (self.ports[p].listener, false, np::READABLE),
                        None => continue,
                    },
                    Job::Cue { tid, .. } => (*tid, true, np::ENDED),
                    Job::Loop { data, .. } | Job::Text { data, .. } => (*data, false, np::WRITABLE),
                };
                want.insert((h, transfer), (events, Why::Job(i).token()));
            }
            self.rewatch(want);
            match self.net.wait_ready(WAIT_OFF, WAIT_MAX, SWEEP_US, &mut ready) {
                Ok(_) => {}
                Err(e) => {
                    println!("ftpd: the net server answers {}: ending", e.name());
                    return 1;
                }
            }
            let now = rt::sys::now_us();
            let mut listener_ready = false;
            for &(token, _) in &ready {
                match Why::of(token) {
                    Why::Listener => listener_ready = true,
                    Why::Ctrl(i) if i < sessions.len() => {
                        let mut s = core::mem::replace(&mut sessions[i], placeholder());
                        self.flush(&mut s);
                        self.read_ctrl(&mut s);
                        sessions[i] = s;
                    }
                    // A session the control connection's bit ended (QUIT, ABOR) has no
                    // job now for this bit.
                    Why::Job(i) if i < sessions.len() && sessions[i].open && !matches!(sessions[i].job, Job::Idle) => {
                        let mut s = core::mem::replace(&mut sessions[i], placeholder());
                        if matches!(s.job, Job::Await(_)) {
                            self.data_came(&mut s);
                        } else {
                            self.step(&mut s);
                        }
                        sessions[i] = s;
                    }
                    Why::Ctrl(_) | Why::Job(_) => {}
                }
            }
            if now.saturating_sub(swept) >= SWEEP_US {
                swept = now;
                for s in sessions.iter_mut().filter(|s| s.open) {
                    let mut t = core::mem::replace(s, placeholder());
                    self.deadlines(&mut t, now);
                    *s = t;
                }
                self.log_counts(now);
            }
            let mut i = 0;
            while i < sessions.len() {
                if sessions[i].open {
                    i += 1;
                } else {
                    let s = sessions.swap_remove(i);
                    self.close(s);
                }
            }
            if listener_ready {
                while let Ok((h, peer, _)) = self.net.try_accept(listener) {
                    self.arrive(&mut sessions, h, peer, now);
                }
            }
        }
    }
}

fn main() -> i32 {
    let mut port = 21u16;
    let mut pasv: Vec<(u16, u16)> = (2122..2186).map(|p| (p, p)).collect();
    let mut ip = None;
    let mut cue = Some(Schedule::FAST);
    let (mut want_sessions, mut per_addr) = (MAX_SESSIONS, None);
    for w in rt::args().split(' ') {
        if let Some(p) = w.strip_prefix("port=").and_then(|p| p.parse().ok()) {
            port = p;
        } else if let Some(v) = w.strip_prefix("pasv=") {
            match ftp::parse_ports(v) {
                Some(p) => pasv = p,
                None => {
                    println!("ftpd: bad data ports {:?} (want pasv=G:A, G1-G2 or G1-G2:A1, separated by commas)", v);
                    return 1;
                }
            }
        } else if let Some(v) = w.strip_prefix("sessions=") {
            match v.parse::<usize>() {
                Ok(n) if n >= 1 => want_sessions = n.min(MAX_SESSIONS),
                _ => {
                    println!("ftpd: bad {:?} (want sessions=N, N at least 1)", w);
                    return 1;
                }
            }
        } else if let Some(v) = w.strip_prefix("per_addr=") {
            match v.parse::<usize>() {
                Ok(n) if n >= 1 => per_addr = Some(n),
                _ => {
                    println!("ftpd: bad {:?} (want per_addr=N, N at least 1)", w);
                    return 1;
                }
            }
        } else if let Some(v) = w.strip_prefix("ip=") {
            ip = np::parse_ip(v).map(|a| a as u32);
        } else if w == "rwloop" {
            cue = None;
        } else if let Some((k, t)) = w.strip_prefix("cue=").and_then(|v| v.split_once(':')) {
            match (k.parse(), t.parse()) {
                (Ok(k), Ok(t_ms)) if np::schedule_ok(k, t_ms) => cue = Some(Schedule { k, t_ms }),
                _ => {
                    println!("ftpd: bad schedule {:?}", w);
                    return 1;
                }
            }
        }
    }
    let (ns, fs) = (rt::alloc_slot(), rt::alloc_slot());
    if rt::env::lookup("files", fs).is_err() {
        println!("ftpd: the manifest must grant net and files");
        return 1;
    }
    // The net server may be (re)starting: try for 30 s. As many sessions as net's
    // budget for this program holds: two connections each (control and data), and a
    // listening socket for each data port.
    let mut got = None;
    let mut last = Error::NotFound;
    let data_ports = pasv.len();
    for _ in 0..300 {
        let r = rt::env::lookup("net", ns).and_then(|_| Net::attach(ns)).and_then(|n| {
            let conns = n.limits().map_or(2 * MAX_SESSIONS, |l| (l[2] / l[4].max(1)) as usize);
            let max = (conns.saturating_sub(data_ports) / 2).clamp(1, want_sessions);
            let l = n.listen(port, (max as u64).min(np::MAX_BACKLOG))?;
            Ok((n, l, max))
        });
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
    let Some((net, listener, max_sessions)) = got else {
        println!("ftpd: cannot listen on port {}: {}", port, last.name());
        return 1;
    };
    let mut ports = Vec::new();
    for (g, a) in pasv {
        match net.listen(g, 1) {
            Ok(l) => ports.push(Port { announced: a, listener: l, taken: false }),
            Err(e) => println!("ftpd: data port {}: {}", g, e.name()),
        }
    }
    let ip = ip.or_else(|| net.info().ok().map(|i| i.ip as u32)).unwrap_or(0);
    let per_addr = per_addr.unwrap_or(limits::per_addr_default(max_sessions)).min(max_sessions);
    println!(
        "ftpd: serving the files server on port {} ({} sessions, {} per address; {} data ports; {})",
        port,
        max_sessions,
        per_addr,
        ports.len(),
        if cue.is_some() { "files by Cue" } else { "files by read/write" }
    );
    let free = (0..ports.len()).rev().collect();
    let mut f = Ftpd {
        net,
        files: fs,
        ports,
        free,
        ip,
        cue,
        max_sessions,
        per_addr,
        counts: [0; 5],
        logged: 0,
        watched: BTreeMap::new(),
    };
    f.serve(listener)
}
