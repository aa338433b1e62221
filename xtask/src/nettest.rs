//! The host's side of the network scenarios: files for the guest's web server, an echo
//! service for the guest's sockets (a guestfwd rule: QEMU runs `cat` for each
//! connection), and HTTP checks driven through the forwarded port. Everything stays on
//! this machine.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What httpd prints once it serves (the host's checks start then).
pub const HTTPD_READY: &str = "httpd: serving";

/// Where the guest reaches a small web server of the host's (a guestfwd rule running
/// `responder` for each connection), for the shell's `fetch`.
pub const WEB_GUEST: &str = "10.0.2.101:80";

/// What the host's small web server answers, whatever is asked.
pub const WEB_BODY: &str = "Hello from the host, through the user network of QEMU.";

/// The script QEMU runs for each connection to `WEB_GUEST`: it reads a request head
/// and answers 200 with `WEB_BODY`.
pub fn responder() -> Result<PathBuf, String> {
    script(
        "responder.sh",
        &format!("cr=$(printf '\\r')\nwhile IFS= read -r line; do line=${{line%\"$cr\"}}; [ -z \"$line\" ] && break; done\nbody='{WEB_BODY}'\nprintf 'HTTP/1.0 200 OK\\r\\nContent-Type: text/plain\\r\\nContent-Length: %s\\r\\n\\r\\n%s\\n' $((${{#body}} + 1)) \"$body\""),
    )
}

/// Where the guest sends bytes to be checked (Cue's tests): the host's `cksum` answers
/// with their checksum and length once the guest ends its sending; and a peer that
/// reads 64 KiB and then closes.
pub const SINK_GUEST: &str = "10.0.2.102:9";
pub const CLOSER_GUEST: &str = "10.0.2.103:9";

/// The guestfwd rules of the two (scripts QEMU runs for each connection).
pub fn sinks() -> Result<Vec<(String, String)>, String> {
    let mut v = Vec::new();
    for (guest, name, body) in [(SINK_GUEST, "sink.sh", "exec cksum"), (CLOSER_GUEST, "closer.sh", "exec head -c 65536 >/dev/null")] {
        v.push((guest.to_string(), script(name, body)?.display().to_string()));
    }
    Ok(v)
}

/// A shell script QEMU runs for each connection of a guestfwd rule.
fn script(name: &str, body: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let p = crate::out_dir().join(name);
    std::fs::create_dir_all(crate::out_dir()).map_err(|e| e.to_string())?;
    std::fs::write(&p, format!("#!/bin/sh\n# Made by xtask (nettest.rs).\n{body}\n")).map_err(|e| format!("{}: {e}", p.display()))?;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    Ok(p)
}

/// Where the guest reaches the echo service (a guestfwd rule).
pub const ECHO_GUEST: &str = "10.0.2.100:7";

/// Deterministic bytes for file `seed` (the guest serves them, the host checks them).
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// (name, seed, size) of the files in the web scenario's filesystem.
pub fn www_files() -> Vec<(String, u64, usize)> {
    let mut v = vec![("small.txt".to_string(), 0, 0), ("64k.bin".to_string(), 64, 64 << 10), ("1m.bin".to_string(), 1, 1 << 20), ("16m.bin".to_string(), 16, 16 << 20)];
    for i in 0..8 {
        v.push((format!("f{i}.bin"), 100 + i, (256 << 10) + (i as usize) * 4099));
    }
    v
}

const SMALL: &[u8] = b"Hello from Scion's httpd.\n";

/// Write the web scenario's files under `target/scion/www` (a directory `fs=` takes).
pub fn make_www() -> Result<PathBuf, String> {
    let dir = crate::out_dir().join("www");
    std::fs::create_dir_all(dir.join("sub")).map_err(|e| e.to_string())?;
    for (name, seed, size) in www_files() {
        let data = if name == "small.txt" { SMALL.to_vec() } else { pattern(seed, size) };
        let p = dir.join(&name);
        if std::fs::read(&p).ok().as_deref() != Some(&data[..]) {
            std::fs::write(&p, &data).map_err(|e| format!("{}: {e}", p.display()))?;
        }
    }
    std::fs::write(dir.join("sub/inner.txt"), b"inner\n").map_err(|e| e.to_string())?;
    Ok(dir)
}

pub struct Response {
    pub status: u16,
    headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

pub fn connect(port: u16) -> Result<TcpStream, String> {
    let s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(120))).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
    Ok(s)
}

/// A connection the guest's server has surely taken: a first small GET is answered on
/// it (tried on up to four connections). QEMU's user network (libslirp) sometimes loses
/// what a host client writes before the guest has answered the connection (seen in a
/// packet dump: the guest's first data was the client's second write), so a request
/// written right after connecting can vanish, and then nothing answers it.
pub fn ready(port: u16) -> Result<TcpStream, String> {
    let mut last = String::new();
    for _ in 0..4 {
        let mut s = connect(port)?;
        s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
        if let Err(e) = s.write_all(b"GET /small.txt HTTP/1.1\r\nHost: scion\r\n\r\n") {
            last = e.to_string();
            continue;
        }
        match response(&mut s, false) {
            Ok(r) if r.status == 200 => {
                s.set_read_timeout(Some(Duration::from_secs(120))).map_err(|e| e.to_string())?;
                return Ok(s);
            }
            Ok(r) => last = format!("status {}", r.status),
            Err(e) => last = e,
        }
    }
    Err(format!("no connection answered a first request: {last}"))
}

/// Read one response from `s` (a HEAD's has no body).
pub fn response(s: &mut TcpStream, head_only: bool) -> Result<Response, String> {
    response_after(s, head_only, &mut Vec::new())
}

/// One response, read from `buf` (bytes already received) and then from `s`; what
/// follows it (the start of a pipelined request's response) stays in `buf`.
fn response_after(s: &mut TcpStream, head_only: bool, buf: &mut Vec<u8>) -> Result<Response, String> {
    let mut b = [0u8; 65536];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut b).map_err(|e| format!("reading the head: {e}"))?;
        if n == 0 {
            return Err(format!("connection closed before a complete head ({} bytes)", buf.len()));
        }
        buf.extend_from_slice(&b[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line.split(' ').nth(1).and_then(|c| c.parse().ok()).ok_or(format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
    let len: usize = headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("content-length")).and_then(|(_, v)| v.parse().ok()).ok_or("no Content-Length")?;
    buf.drain(..end);
    if head_only {
        return Ok(Response { status, headers, body: Vec::new() });
    }
    while buf.len() < len {
        let n = s.read(&mut b).map_err(|e| format!("reading the body ({} of {len} bytes): {e}", buf.len()))?;
        if n == 0 {
            return Err(format!("connection closed after {} of {len} body bytes", buf.len()));
        }
        buf.extend_from_slice(&b[..n]);
    }
    let body = buf.drain(..len).collect();
    Ok(Response { status, headers, body })
}

/// One request on a connection made `ready`, sent in one write.
fn request(port: u16, method: &str, path: &str, extra: &str) -> Result<Response, String> {
    let mut s = ready(port)?;
    let req = format!("{method} {path} HTTP/1.1\r\nHost: scion\r\nConnection: close\r\n{extra}\r\n");
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    response(&mut s, method == "HEAD")
}

fn expect(cond: bool, what: impl Into<String>) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what.into())
    }
}

fn file(name: &str) -> Vec<u8> {
    let (_, seed, size) = www_files().into_iter().find(|f| f.0 == name).expect("a www file");
    if name == "small.txt" {
        SMALL.to_vec()
    } else {
        pattern(seed, size)
    }
}

fn get_file(port: u16, name: &str) -> Result<(), String> {
    let want = file(name);
    let r = request(port, "GET", &format!("/{name}"), "")?;
    expect(r.status == 200, format!("GET /{name}: status {}", r.status))?;
    expect(r.body.len() == want.len(), format!("GET /{name}: {} bytes, want {}", r.body.len(), want.len()))?;
    expect(r.body == want, format!("GET /{name}: the bytes differ (first at {:?})", r.body.iter().zip(&want).position(|(a, b)| a != b)))
}

/// Five requests on one connection, then two pipelined in one write.
fn keep_alive(p: u16) -> Result<(), String> {
    let mut s = ready(p)?;
    for i in 0..5 {
        write!(s, "GET /small.txt HTTP/1.1\r\nHost: scion\r\n\r\n").map_err(|e| e.to_string())?;
        let r = response(&mut s, false).map_err(|e| format!("request {i}: {e}"))?;
        expect(r.status == 200 && r.body == SMALL, format!("request {i} on one connection"))?;
    }
    write!(s, "GET /small.txt HTTP/1.1\r\nHost: scion\r\n\r\nHEAD /1m.bin HTTP/1.1\r\nHost: scion\r\n\r\n").map_err(|e| e.to_string())?;
    // The two answers may come in one read: what follows the first is the second's.
    let mut buf = Vec::new();
    let a = response_after(&mut s, false, &mut buf).map_err(|e| format!("pipelined GET: {e}"))?;
    let b = response_after(&mut s, true, &mut buf).map_err(|e| format!("pipelined HEAD: {e}"))?;
    expect(a.body == SMALL && b.status == 200 && b.header("Content-Length") == Some("1048576"), "pipelined requests")
}

/// After a misbehaving client: a normal request is served (within 10 s: connections
/// refused while the server sheds an overload are tried again).
fn still_serves(port: u16) -> Result<(), String> {
    let start = Instant::now();
    loop {
        match request(port, "GET", "/small.txt", "") {
            Ok(r) => return expect(r.status == 200 && r.body == SMALL, format!("a normal request afterwards: status {}", r.status)),
            Err(e) if start.elapsed() > Duration::from_secs(10) => return Err(format!("a normal request afterwards: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// Send `bytes`; the answer's status, or None if the server closed without one.
fn raw_status(port: u16, bytes: &[u8]) -> Result<Option<u16>, String> {
    let mut s = ready(port)?;
    s.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
    // The server may answer and close before taking it all: a failed write is fine.
    let _ = s.write_all(bytes);
    Ok(response(&mut s, false).ok().map(|r| r.status))
}

type Check = (&'static str, fn(u16) -> Result<(), String>);

fn checks() -> Vec<Check> {
    vec![
        ("get-1m", |p| get_file(p, "1m.bin")),
        ("get-16m", |p| get_file(p, "16m.bin")),
        ("head", |p| {
            let r = request(p, "HEAD", "/16m.bin", "")?;
            expect(r.status == 200, format!("status {}", r.status))?;
            expect(r.header("Content-Length") == Some("16777216"), format!("Content-Length {:?}", r.header("Content-Length")))
        }),
        ("range", |p| {
            let want = file("1m.bin");
            let r = request(p, "GET", "/1m.bin", "Range: bytes=1000-70999\r\n")?;
            expect(r.status == 206, format!("status {}", r.status))?;
            expect(r.header("Content-Range") == Some("bytes 1000-70999/1048576"), format!("Content-Range {:?}", r.header("Content-Range")))?;
            expect(r.body == want[1000..71000], "the range's bytes differ")?;
            let r = request(p, "GET", "/1m.bin", "Range: bytes=-100\r\n")?;
            expect(r.status == 206 && r.body == want[want.len() - 100..], "a suffix range")?;
            let r = request(p, "GET", "/1m.bin", "Range: bytes=2000000-\r\n")?;
            expect(r.status == 416, format!("a range past the end: status {}", r.status))
        }),
        ("not-found", |p| {
            let r = request(p, "GET", "/no/such/file", "")?;
            expect(r.status == 404, format!("status {}", r.status))
        }),
        ("listing", |p| {
            let r = request(p, "GET", "/", "")?;
            let page = String::from_utf8_lossy(&r.body);
            expect(r.status == 200 && page.contains("href=\"/16m.bin\"") && page.contains("href=\"/sub/\""), format!("status {}, page {page:.200}", r.status))?;
            let r = request(p, "GET", "/sub", "")?;
            expect(r.status == 301 && r.header("Location") == Some("/sub/"), format!("/sub: status {} Location {:?}", r.status, r.header("Location")))?;
            let r = request(p, "GET", "/sub/", "")?;
            expect(r.status == 200 && String::from_utf8_lossy(&r.body).contains("inner.txt"), "/sub/ lists inner.txt")
        }),
        ("keep-alive", keep_alive),
        ("methods", |p| {
            let r = request(p, "POST", "/small.txt", "Content-Length: 0\r\n")?;
            expect(r.status == 405 && r.header("Allow") == Some("GET, HEAD"), format!("POST: status {}", r.status))?;
            let r = request(p, "BREW", "/pot", "")?;
            expect(r.status == 501, format!("BREW: status {}", r.status))
        }),
        ("eight-clients", |p| {
            let hs: Vec<_> = (0..8).map(|i| std::thread::spawn(move || get_file(p, &format!("f{i}.bin")))).collect();
            for h in hs {
                h.join().map_err(|_| "a client thread panicked".to_string())??;
            }
            Ok(())
        }),
        ("garbage", |p| {
            let junk: Vec<u8> = pattern(7, 3000).into_iter().map(|b| if b == b'\n' { b'x' } else { b }).chain(*b"\r\n\r\n").collect();
            let st = raw_status(p, &junk)?;
            expect(st.is_none() || st == Some(400), format!("garbage: {st:?}"))?;
            still_serves(p)
        }),
        ("long-line", |p| {
            let line = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(64 * 1024));
            let st = raw_status(p, line.as_bytes())?;
            expect(st.is_none() || st == Some(414), format!("a 64 KiB request line: {st:?}"))?;
            still_serves(p)
        }),
        ("endless-headers", |p| {
            let mut h = String::from("GET / HTTP/1.1\r\nHost: x\r\n");
            while h.len() < 40 * 1024 {
                h.push_str("X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
            }
            let st = raw_status(p, h.as_bytes())?;
            expect(st.is_none() || st == Some(431), format!("headers that never end: {st:?}"))?;
            still_serves(p)
        }),
        ("silent-client", |p| {
            let _idle = connect(p)?;
            still_serves(p)
        }),
        ("close-mid-response", |p| {
            let mut s = ready(p)?;
            write!(s, "GET /16m.bin HTTP/1.1\r\nHost: x\r\n\r\n").map_err(|e| e.to_string())?;
            let mut got = 0;
            let mut b = [0u8; 65536];
            while got < 200_000 {
                let n = s.read(&mut b).map_err(|e| e.to_string())?;
                if n == 0 {
                    break;
                }
                got += n;
            }
            let _ = s.shutdown(Shutdown::Both);
            drop(s);
            still_serves(p)
        }),
        ("many-connections", |p| {
            let mut v = Vec::new();
            for _ in 0..200 {
                if let Ok(mut s) = connect(p) {
                    let _ = write!(s, "GET /small.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                    v.push(s);
                }
            }
            let start = Instant::now();
            let mut answered = 0;
            for mut s in v {
                let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
                if start.elapsed() < Duration::from_secs(90) {
                    if let Ok(r) = response(&mut s, false) {
                        if r.status == 200 && r.body == SMALL {
                            answered += 1;
                        }
                    }
                }
            }
            println!("    | many-connections: {answered} of 200 answered, the rest dropped");
            expect(answered >= 16, format!("only {answered} of 200 connections answered"))?;
            still_serves(p)
        }),
    ]
}

/// Run the HTTP checks against the guest's port 80 forwarded to `port`; the last kills
/// the net server from the guest's shell (typed by `t`) in the middle of a download.
pub fn http_checks(port: u16, ftp: Option<u16>, t: &crate::qemu::Typer) -> Vec<(String, Result<(), String>)> {
    let mut v: Vec<(String, Result<(), String>)> = checks().into_iter().map(|(name, f)| (name.to_string(), f(port))).collect();
    if let Some(f) = ftp {
        v.extend(ftp_checks(f, t));
    }
    v.push(("net-restart".to_string(), net_restart(port, t)));
    v
}

/// Kill `net` while a download runs: the download ends (an error, not a hang), and once
/// root has restarted net (and httpd has attached to it again) a new download succeeds.
fn net_restart(port: u16, t: &crate::qemu::Typer) -> Result<(), String> {
    let mut s = ready(port)?;
    s.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
    write!(s, "GET /16m.bin HTTP/1.1\r\nHost: x\r\n\r\n").map_err(|e| e.to_string())?;
    let mut got = 0;
    let mut b = [0u8; 65536];
    while got < 1 << 20 {
        match s.read(&mut b) {
            Ok(0) => return Err("the download ended before net was killed".into()),
            Ok(n) => got += n,
            Err(e) => return Err(format!("the download failed before net was killed: {e}")),
        }
    }
    t.type_text("kill net\n");
    let start = Instant::now();
    let ended = loop {
        match s.read(&mut b) {
            Ok(0) | Err(_) => break true,
            Ok(n) => got += n,
        }
        if start.elapsed() > Duration::from_secs(60) {
            break false;
        }
    };
    expect(ended && got < (16 << 20) + 1000, format!("the download went on after net was killed ({got} bytes)"))?;
    drop(s);
    let start = Instant::now();
    loop {
        match get_file(port, "1m.bin") {
            Ok(()) => return Ok(()),
            Err(e) if start.elapsed() > Duration::from_secs(120) => return Err(format!("no download within 120 s of the restart: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// Checks of the serial log after the web scenario: (name, a line that must be there).
/// `cue` typed at the shell during ftpd's 16 MiB transfer lists it (`sh`'s
/// `print_transfers`: the schedule as fast as allowed, 16777216 bytes in all).
pub const LOG_CHECKS: [(&str, &str); 1] = [("shell-cue", " 16777216    fast ")];

/// An FTP control connection from the host (to Scion's ftpd through a forwarded port).
/// Passive data ports are forwarded to the same port numbers on the guest, so the port
/// a 229 reply names is the one to connect to here.
struct Ftp {
    r: std::io::BufReader<TcpStream>,
    w: TcpStream,
}

impl Ftp {
    /// Connect and read the greeting (tried for up to 60 s: ftpd may still be starting).
    fn connect(port: u16) -> Result<Ftp, String> {
        let start = Instant::now();
        loop {
            let r = connect(port).and_then(|s| {
                s.set_read_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
                let w = s.try_clone().map_err(|e| e.to_string())?;
                let mut f = Ftp { r: std::io::BufReader::new(s), w };
                let (code, text) = f.reply()?;
                expect(code == 220, format!("greeting {code} {text}"))?;
                Ok(f)
            });
            match r {
                Ok(f) => return Ok(f),
                Err(e) if start.elapsed() > Duration::from_secs(60) => return Err(format!("no FTP greeting: {e}")),
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        }
    }

    /// One reply (a multi-line one whole): code and text.
    fn reply(&mut self) -> Result<(u16, String), String> {
        use std::io::BufRead;
        let mut all = String::new();
        let mut first: Option<String> = None;
        loop {
            let mut line = String::new();
            if self.r.read_line(&mut line).map_err(|e| format!("reading a reply: {e}"))? == 0 {
                return Err(format!("the control connection closed (after {all:?})"));
            }
            all.push_str(&line);
            let code = line.get(..3).ok_or_else(|| format!("a reply line too short: {line:?}"))?.to_string();
            let more = line.as_bytes().get(3) == Some(&b'-');
            match &first {
                None if more => first = Some(code),
                None => return Ok((code.parse().map_err(|_| format!("bad reply {line:?}"))?, all)),
                Some(c) if *c == code && !more => return Ok((code.parse().unwrap_or(0), all)),
                Some(_) => {}
            }
        }
    }

    fn cmd(&mut self, line: &str) -> Result<(u16, String), String> {
        write!(self.w, "{line}\r\n").map_err(|e| format!("sending {line}: {e}"))?;
        self.reply()
    }

    fn want(&mut self, line: &str, code: u16) -> Result<String, String> {
        let (c, text) = self.cmd(line)?;
        expect(c == code, format!("{line} → {}", text.trim()))?;
        Ok(text)
    }

    fn login(port: u16) -> Result<Ftp, String> {
        let mut f = Ftp::connect(port)?;
        f.want("USER anonymous", 331)?;
        f.want("PASS scion@example.com", 230)?;
        f.want("TYPE I", 200)?;
        Ok(f)
    }

    /// The data of a RETR or LIST over a passive connection.
    fn data(&mut self, line: &str) -> Result<Vec<u8>, String> {
        self.data_with(line, |_| {})
    }

    /// As `data`, calling `midway` with the bytes received so far after each read.
    fn data_with(&mut self, line: &str, mut midway: impl FnMut(usize)) -> Result<Vec<u8>, String> {
        let text = self.want("EPSV", 229)?;
        let port: u16 = text.split("|||").nth(1).and_then(|r| r.split('|').next()).and_then(|p| p.parse().ok()).ok_or_else(|| format!("EPSV reply {text:?}"))?;
        let mut d = connect(port)?;
        self.want(line, 150)?;
        let mut out = Vec::new();
        let mut b = vec![0u8; 65536];
        loop {
            let n = d.read(&mut b).map_err(|e| format!("{line}: reading the data: {e}"))?;
            if n == 0 {
                break;
            }
            out.extend_from_slice(&b[..n]);
            midway(out.len());
        }
        self.want_reply(226, line)?;
        Ok(out)
    }

    fn want_reply(&mut self, code: u16, what: &str) -> Result<(), String> {
        let (c, text) = self.reply()?;
        expect(c == code, format!("after {what}: {}", text.trim()))
    }
}

/// The host's checks of ftpd (control port `port`): the commands, a 16 MiB download
/// byte for byte (sent by Cue), listings and directories, four downloads at once, and
/// curl's client if this machine has curl.
pub fn ftp_checks(port: u16, t: &crate::qemu::Typer) -> Vec<(String, Result<(), String>)> {
    let mut v: Vec<(String, Result<(), String>)> = Vec::new();
    v.push(("ftp-commands".into(), (|| {
        let mut f = Ftp::connect(port)?;
        f.want("PWD", 530)?;
        f.want("USER someone", 530)?;
        f.want("PASS x", 503)?;
        f.want("USER anonymous", 331)?;
        f.want("PASS x", 230)?;
        let pwd = f.want("PWD", 257)?;
        expect(pwd.contains("\"/\""), format!("PWD: {pwd:?}"))?;
        f.want("SYST", 215)?;
        f.want("FEAT", 211)?;
        f.want("TYPE I", 200)?;
        f.want("TYPE X", 504)?;
        let size = f.want("SIZE 16m.bin", 213)?;
        expect(size.trim() == "213 16777216", format!("SIZE: {size:?}"))?;
        f.want("SIZE nope.bin", 550)?;
        f.want("RETR 1m.bin", 425)?;
        f.want("CWD nope", 550)?;
        f.want("CWD ../..", 550)?;
        f.want("PORT 127,0,0,1,4,1", 502)?;
        f.want("STOR x", 502)?;
        f.want("NOOP", 200)?;
        f.want("QUIT", 221)?;
        Ok(())
    })()));
    v.push(("ftp-retr-16m".into(), (|| {
        let mut f = Ftp::login(port)?;
        // Midway, the shell's `cue` lists the transfer (checked in the log: LOG_CHECKS).
        let mut typed = false;
        let got = f.data_with("RETR /16m.bin", |n| {
            if n >= 4 << 20 && !typed {
                t.type_text("cue\n");
                typed = true;
                // Stop reading a while: TCP's window holds the transfer open until the
                // shell (below net and the storage servers in priority, busy with the
                // transfer) has had its turn to ask.
                std::thread::sleep(std::time::Duration::from_secs(3));
            }
        })?;
        expect(got == file("16m.bin"), format!("16m.bin: {} bytes, differing from the file", got.len()))?;
        f.want("QUIT", 221).map(|_| ())
    })()));
    v.push(("ftp-list-cwd".into(), (|| {
        let mut f = Ftp::login(port)?;
        let list = String::from_utf8_lossy(&f.data("LIST")?).into_owned();
        expect(list.lines().any(|l| l.ends_with(" 16m.bin") && l.contains(" 16777216 ") && l.starts_with('-')), format!("LIST: {list:?}"))?;
        expect(list.lines().any(|l| l.ends_with(" sub") && l.starts_with('d')), format!("LIST lacks the directory: {list:?}"))?;
        let names = String::from_utf8_lossy(&f.data("NLST")?).into_owned();
        expect(names.lines().any(|l| l == "1m.bin"), format!("NLST: {names:?}"))?;
        f.want("CWD sub", 250)?;
        let pwd = f.want("PWD", 257)?;
        expect(pwd.contains("\"/sub\""), format!("PWD in sub: {pwd:?}"))?;
        let inner = f.data("RETR inner.txt")?;
        expect(inner == b"inner\n", format!("inner.txt: {inner:?}"))?;
        f.want("CDUP", 250)?;
        let pwd = f.want("PWD", 257)?;
        expect(pwd.contains("\"/\""), format!("PWD after CDUP: {pwd:?}"))?;
        f.want("QUIT", 221).map(|_| ())
    })()));
    v.push(("ftp-four-at-once".into(), (|| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                std::thread::spawn(move || -> Result<(), String> {
                    let name = format!("f{i}.bin");
                    let mut f = Ftp::login(port)?;
                    let got = f.data(&format!("RETR {name}"))?;
                    expect(got == file(&name), format!("{name}: {} bytes, differing from the file", got.len()))
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "a download thread panicked".to_string())??;
        }
        Ok(())
    })()));
    let curl = std::process::Command::new("curl").arg("--version").output().is_ok_and(|o| o.status.success());
    if curl {
        v.push(("ftp-curl".into(), (|| {
            let out = std::process::Command::new("curl")
                .args(["--silent", "--show-error", "--max-time", "300"])
                .arg(format!("ftp://127.0.0.1:{port}/16m.bin"))
                .output()
                .map_err(|e| format!("curl: {e}"))?;
            expect(out.status.success(), format!("curl failed: {}", String::from_utf8_lossy(&out.stderr).trim()))?;
            expect(out.stdout == file("16m.bin"), format!("curl got {} bytes, differing from 16m.bin", out.stdout.len()))
        })()));
    } else {
        println!("    | (no curl on this machine: the FTP checks use xtask's own client only)");
    }
    v
}

/// Download `path` from the FTP server on `port` (anonymous, EPSV): its bytes.
pub fn ftp_fetch(port: u16, path: &str) -> Result<Vec<u8>, String> {
    let mut f = Ftp::login(port)?;
    let got = f.data(&format!("RETR {path}"))?;
    let _ = f.cmd("QUIT");
    Ok(got)
}
