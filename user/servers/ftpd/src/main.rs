//! An anonymous, read-only FTP server over the `files` server, in passive mode only
//! (no PORT/EPRT): USER, PASS, PWD, CWD, CDUP, TYPE, SIZE, PASV, EPSV, REST, RETR, ABOR,
//! LIST, NLST, SYST, FEAT, NOOP, QUIT (`crates/ftp` parses and words the replies; this
//! program moves the bytes).
//! RETR sends the file by Cue — a ticket from `files`, `net` sends it on the data
//! connection, not a byte through this program — as the Cue paper's Table 8 did with
//! wuftpd; `rwloop` sends it by reading and writing instead, for comparison. One
//! thread, many sessions, each waiting in `net`'s WAIT for what it needs next.
//!
//! Every per-session resource goes with its session or sooner: the control connection
//! is watched during a transfer too (QUIT and ABOR are answered at once, a closed
//! control connection ends the session), a data port reserved by PASV/EPSV goes back
//! when no data connection came within `DATA_WAIT_US`, and a port given back is
//! drained of connections nobody will take.
//!
//! Arguments: `port=N` (control port, default 21); `pasv=G:A,…` the data ports to
//! listen on (G) and the ports to announce for them (A: where a client reaches them
//! through a NAT's forwarded ports; default 2122–2125 as they are); `ip=A.B.C.D` the
//! address PASV announces (default ours; clients such as curl use the control
//! connection's address anyway); `rwloop`; `cue=K:T` the transfers' schedule.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

extern crate alloc;

use abi::Error;
use alloc::string::String;
use alloc::vec::Vec;
use files_api::client as files;
use ftp::Command;
use net_api::client::{Net, Schedule};
use net_api::{self as np};
use rt::println;

rt::entry!(main);

const MAX_SESSIONS: usize = 16;
/// A session that sends no command for this long is closed.
const IDLE_US: u64 = 300_000_000;
/// A data port reserved by PASV/EPSV, or a RETR/LIST waiting for its data connection,
/// is given up after this long (425): four clients that never connect must not hold
/// every data port.
const DATA_WAIT_US: u64 = 20_000_000;
/// Bytes of commands kept while a transfer runs (past it the control connection is not
/// read until the transfer ends: TCP holds the rest back).
const BUSY_INBUF: usize = 4096;
const RECV_OFF: u64 = 0;
const RECV_MAX: u64 = 4096;
/// Control replies and, for `rwloop`, file bytes go out from here in the shared area.
const SEND_OFF: u64 = 64 * 1024;
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
    /// `text` itself on `data`; `buf[pos..]` was read and is not yet taken.
    Loop {
        data: u64,
        fh: u64,
        off: u64,
        size: u64,
        buf: Vec<u8>,
        pos: usize,
    },
    Text {
        data: u64,
        text: Vec<u8>,
        pos: usize,
    },
}

struct Session {
    ctrl: u64,
    cwd: String,
    inbuf: Vec<u8>,
    user_ok: bool,
    logged_in: bool,
    port: Option<usize>,
    /// When the data port was reserved, or the data connection began to be awaited.
    port_at: u64,
    /// Where the next RETR starts (REST).
    rest: u64,
    job: Job,
    last: u64,
    open: bool,
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
    ip: u32,
    cue: Option<Schedule>,
}

/// What one WAIT entry is for.
#[derive(Clone, Copy)]
enum Why {
    Listener,
    Ctrl(usize),
    Job(usize),
}

impl Ftpd {
    fn reply(&self, s: &mut Session, text: &str) {
        for chunk in text.as_bytes().chunks(4096) {
            self.net.area.bytes(SEND_OFF, chunk.len() as u64).copy_from_slice(chunk);
            if self.net.send_area_all(s.ctrl, SEND_OFF, chunk.len() as u64).is_err() {
                s.open = false;
                return;
            }
        }
    }

    /// Give the data port back and close the data connection.
    fn end_data(&mut self, s: &mut Session, data: Option<u64>) {
        if let Some(d) = data {
            let _ = self.net.close(d);
        }
        if let Some(p) = s.port.take() {
            self.drain(p);
            self.ports[p].taken = false;
        }
    }

    /// Close connections waiting on data port `p` that no session will take (one that
    /// came late, or for a session that is gone): the next session's data connection
    /// must be its own.
    fn drain(&mut self, p: usize) {
        while let Ok((h, _, _)) = self.net.try_accept(self.ports[p].listener) {
            let _ = self.net.close(h);
        }
    }

    fn end_job(&mut self, s: &mut Session) {
        match core::mem::replace(&mut s.job, Job::Idle) {
            Job::Idle => {}
            Job::Await(Data::Retr { fh, .. }) => {
                let _ = files::close(self.files, fh);
                self.end_data(s, None);
            }
            Job::Await(Data::List(_)) => self.end_data(s, None),
            Job::Cue { data, fh, .. } | Job::Loop { data, fh, .. } => {
                // Closing the socket cancels a transfer still running on it.
                let _ = files::close(self.files, fh);
                self.end_data(s, Some(data));
            }
            Job::Text { data, .. } => self.end_data(s, Some(data)),
        }
    }

    fn command(&mut self, s: &mut Session, line: &[u8]) {
        let cmd = ftp::parse(line);
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
            Command::Pasv | Command::Epsv => {
                let port = s.port.or_else(|| self.ports.iter().position(|p| !p.taken));
                match port {
                    Some(i) => {
                        if s.port.is_none() {
                            self.drain(i);
                        }
                        self.ports[i].taken = true;
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
                            Err(_) => self.reply(s, "550 Cannot open the file\r\n"),
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

    /// Commands that have come on the control connection. While a transfer runs, only
    /// QUIT, ABOR and NOOP are taken at once (the rest wait for its end, in order).
    fn read_ctrl(&mut self, s: &mut Session) {
        loop {
            if !matches!(s.job, Job::Idle) && s.inbuf.len() >= BUSY_INBUF {
                break;
            }
            match self.net.recv_area(s.ctrl, RECV_OFF, RECV_MAX) {
                Ok(0) => {
                    s.open = false;
                    return;
                }
                Ok(n) => {
                    s.inbuf.extend_from_slice(self.net.area.bytes(RECV_OFF, n));
                    s.last = rt::sys::now_us();
                }
                Err(Error::WouldBlock) => break,
                Err(_) => {
                    s.open = false;
                    return;
                }
            }
        }
        while s.open {
            let Some(i) = s.inbuf.iter().position(|b| *b == b'\n') else {
                if s.inbuf.len() > ftp::MAX_LINE {
                    self.reply(s, "500 Line too long\r\n");
                    s.open = false;
                }
                return;
            };
            if !matches!(s.job, Job::Idle) {
                match ftp::parse(&s.inbuf[..=i]) {
                    Command::Quit => {
                        self.end_job(s);
                        self.reply(s, "221 Goodbye (transfer abandoned)\r\n");
                        s.open = false;
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
            if line.len() > ftp::MAX_LINE {
                self.reply(s, "500 Line too long\r\n");
                continue;
            }
            self.command(s, &line);
        }
    }

    /// Give up what waited too long for a data connection: a port reserved by
    /// PASV/EPSV, and a RETR or LIST whose client never connected (425).
    fn expire(&mut self, s: &mut Session, now: u64) {
        if s.port.is_none() || now.saturating_sub(s.port_at) <= DATA_WAIT_US {
            return;
        }
        match s.job {
            Job::Idle => self.end_data(s, None),
            Job::Await(_) => {
                self.end_job(s);
                self.reply(s, &alloc::format!("425 No data connection came within {} s\r\n", DATA_WAIT_US / 1_000_000));
                s.last = now;
                self.read_ctrl(s);
            }
            _ => {}
        }
    }

    /// The client has connected to the passive port: start sending.
    fn data_came(&mut self, s: &mut Session) {
        let Some(p) = s.port else { return };
        let Ok((data, _, _)) = self.net.try_accept(self.ports[p].listener) else { return };
        s.job = match core::mem::replace(&mut s.job, Job::Idle) {
            Job::Await(Data::List(text)) => Job::Text { data, text, pos: 0 },
            Job::Await(Data::Retr { fh, first, size }) => {
                let mut job = Job::Loop { data, fh, off: first, size, buf: Vec::new(), pos: 0 };
                if let (Some(sched), true) = (self.cue, size > first) {
                    let slot = rt::alloc_slot();
                    let r = files::ticket(self.files, fh, slot).and_then(|(sz, _)| {
                        self.net.cue(slot, data, first, 0, sz, sched, np::CUE_SHUTDOWN, np::NO_STATUS)
                    });
                    rt::free_slot(slot);
                    match r {
                        Ok(tid) => job = Job::Cue { tid, data, fh },
                        Err(Error::NoSpace) => {}
                        Err(e) => println!("ftpd: Cue refused the file ({}): sending it ourselves", e.name()),
                    }
                }
                job
            }
            other => other,
        };
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
                let n = (text.len() - *pos).min(32 * 1024);
                self.net.area.bytes(SEND_OFF, n as u64).copy_from_slice(&text[*pos..*pos + n]);
                match self.net.send_area(*data, SEND_OFF, n as u64) {
                    Ok(k) => *pos += k as usize,
                    Err(Error::WouldBlock) => return,
                    Err(_) => break Some(false),
                }
            },
            Job::Loop { data, fh, off, size, buf, pos } => loop {
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
                let n = buf.len() - *pos;
                self.net.area.bytes(SEND_OFF, n as u64).copy_from_slice(&buf[*pos..]);
                match self.net.send_area(*data, SEND_OFF, n as u64) {
                    Ok(k) => *pos += k as usize,
                    Err(Error::WouldBlock) => return,
                    Err(_) => break Some(false),
                }
            },
            Job::Idle | Job::Await(_) => return,
        };
        if let Some(ok) = done {
            self.end_job(s);
            self.reply(s, if ok { "226 Transfer complete\r\n" } else { "426 Connection closed; transfer aborted\r\n" });
            s.last = rt::sys::now_us();
            // Commands that came during the transfer.
            self.read_ctrl(s);
        }
    }

    fn serve(&mut self, listener: u64) -> i32 {
        let mut sessions: Vec<Session> = Vec::new();
        loop {
            let mut entries: Vec<(u64, u64)> = Vec::new();
            let mut why: Vec<Why> = Vec::new();
            entries.push((listener, np::READABLE));
            why.push(Why::Listener);
            for (i, s) in sessions.iter().enumerate() {
                // The control connection is watched whatever the session does (QUIT,
                // ABOR, a closed connection), unless commands already wait for a
                // transfer's end.
                if matches!(s.job, Job::Idle) || s.inbuf.len() < BUSY_INBUF {
                    entries.push((s.ctrl, np::READABLE));
                    why.push(Why::Ctrl(i));
                }
                let e = match &s.job {
                    Job::Idle => continue,
                    Job::Await(_) => (self.ports[s.port.unwrap_or(0)].listener, np::READABLE),
                    Job::Cue { tid, .. } => (*tid, np::ENDED),
                    Job::Loop { data, .. } | Job::Text { data, .. } => (*data, np::WRITABLE),
                };
                entries.push(e);
                why.push(Why::Job(i));
            }
            let ready = match self.net.wait(&entries, 1_000_000) {
                Ok(r) => r,
                Err(e) => {
                    println!("ftpd: the net server answers {}: ending", e.name());
                    return 1;
                }
            };
            let now = rt::sys::now_us();
            for (bit, w) in why.iter().enumerate() {
                match *w {
                    Why::Listener if ready & (1 << bit) != 0 => {
                        while let Ok((h, _, _)) = self.net.try_accept(listener) {
                            let mut s = Session {
                                ctrl: h,
                                cwd: String::from("/"),
                                inbuf: Vec::new(),
                                user_ok: false,
                                logged_in: false,
                                port: None,
                                port_at: 0,
                                rest: 0,
                                job: Job::Idle,
                                last: now,
                                open: true,
                            };
                            if sessions.len() >= MAX_SESSIONS {
                                self.reply(&mut s, "421 Too many sessions; try again later\r\n");
                                let _ = self.net.close(h);
                                continue;
                            }
                            self.reply(&mut s, "220 Scion ftpd (anonymous, read-only)\r\n");
                            sessions.push(s);
                        }
                    }
                    Why::Ctrl(i) if ready & (1 << bit) != 0 => {
                        let mut s = core::mem::replace(&mut sessions[i], placeholder());
                        self.read_ctrl(&mut s);
                        sessions[i] = s;
                    }
                    // A session the control connection's bit ended (QUIT, ABOR) has no
                    // job now for this bit.
                    Why::Job(i)
                        if ready & (1 << bit) != 0 && sessions[i].open && !matches!(sessions[i].job, Job::Idle) =>
                    {
                        let mut s = core::mem::replace(&mut sessions[i], placeholder());
                        if matches!(s.job, Job::Await(_)) {
                            self.data_came(&mut s);
                        } else {
                            self.step(&mut s);
                        }
                        sessions[i] = s;
                    }
                    Why::Ctrl(i)
                        if matches!(sessions[i].job, Job::Idle) && now.saturating_sub(sessions[i].last) > IDLE_US =>
                    {
                        let mut s = core::mem::replace(&mut sessions[i], placeholder());
                        self.reply(&mut s, "421 Idle too long; closing\r\n");
                        s.open = false;
                        sessions[i] = s;
                    }
                    _ => {}
                }
            }
            for s in sessions.iter_mut() {
                if s.open {
                    let mut t = core::mem::replace(s, placeholder());
                    self.expire(&mut t, now);
                    *s = t;
                }
            }
            let mut i = 0;
            while i < sessions.len() {
                if sessions[i].open {
                    i += 1;
                    continue;
                }
                let mut s = sessions.swap_remove(i);
                self.end_job(&mut s);
                // A port reserved by PASV/EPSV and never used (the session had no job)
                // comes back too.
                self.end_data(&mut s, None);
                let _ = self.net.close(s.ctrl);
            }
        }
    }
}

/// What stands in a session's place while it is being worked on.
fn placeholder() -> Session {
    Session {
        ctrl: 0,
        cwd: String::new(),
        inbuf: Vec::new(),
        user_ok: false,
        logged_in: false,
        port: None,
        port_at: 0,
        rest: 0,
        job: Job::Idle,
        last: 0,
        open: false,
    }
}

fn main() -> i32 {
    let mut port = 21u16;
    let mut pasv: Vec<(u16, u16)> = (2122..2126).map(|p| (p, p)).collect();
    let mut ip = None;
    let mut cue = Some(Schedule::FAST);
    for w in rt::args().split(' ') {
        if let Some(p) = w.strip_prefix("port=").and_then(|p| p.parse().ok()) {
            port = p;
        } else if let Some(v) = w.strip_prefix("pasv=") {
            match ftp::parse_ports(v) {
                Some(p) => pasv = p,
                None => {
                    println!("ftpd: bad data ports {:?} (want pasv=G:A,…)", v);
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
    // The net server may be (re)starting: try for 30 s.
    let mut got = None;
    let mut last = Error::NotFound;
    for _ in 0..300 {
        match rt::env::lookup("net", ns).and_then(|_| Net::attach(ns)).and_then(|n| n.listen(port, 8).map(|l| (n, l))) {
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
    println!(
        "ftpd: serving the files server on port {} ({} data ports; {})",
        port,
        ports.len(),
        if cue.is_some() { "files by Cue" } else { "files by read/write" }
    );
    let mut f = Ftpd { net, files: fs, ports, ip, cue };
    f.serve(listener)
}
