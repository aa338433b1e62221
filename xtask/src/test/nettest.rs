//! The host's side of the network scenarios: files for the guest's web server, an echo
//! service for the guest's sockets (a guestfwd rule: QEMU runs `cat` for each
//! connection), and HTTP checks driven through the forwarded port. Everything stays on
//! this machine.
//!
//! Why one file of about 1,200 lines: it is the host's half of many network checks, a
//! function each, over a few shared helpers (the HTTP client, the echo service, the
//! forwarded ports); a check is read on its own.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What httpd prints once it serves (the host's checks start then).
pub const HTTPD_READY: &str = "httpd: serving";
/// What the WASI echo server (user/wasi-programs/src/bin/echo.rs) says when it serves.
pub const WASI_ECHO_READY: &str = "echo: listening";

/// The line after which check set `set` runs.
pub fn ready_marker(set: &str) -> &'static str {
    if set == "wasi_echo" {
        WASI_ECHO_READY
    } else {
        HTTPD_READY
    }
}

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
    for (guest, name, body) in
        [(SINK_GUEST, "sink.sh", "exec cksum"), (CLOSER_GUEST, "closer.sh", "exec head -c 65536 >/dev/null")]
    {
        v.push((guest.to_string(), script(name, body)?.display().to_string()));
    }
    Ok(v)
}

/// A shell script QEMU runs for each connection of a guestfwd rule.
fn script(name: &str, body: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let p = crate::out_dir().join(name);
    std::fs::create_dir_all(crate::out_dir()).map_err(|e| e.to_string())?;
    std::fs::write(&p, format!("#!/bin/sh\n# Made by xtask (nettest.rs).\n{body}\n"))
        .map_err(|e| format!("{}: {e}", p.display()))?;
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
    let mut v = vec![
        ("small.txt".to_string(), 0, 0),
        ("64k.bin".to_string(), 64, 64 << 10),
        ("1m.bin".to_string(), 1, 1 << 20),
        ("16m.bin".to_string(), 16, 16 << 20),
    ];
    for i in 0..8 {
        v.push((format!("f{i}.bin"), 100 + i, (256 << 10) + (i as usize) * 4099));
    }
    v
}

/// `/small.txt`'s bytes (the Linux guest's server makes the same: `bench/linux/net.c`).
pub const SMALL: &[u8] = b"Hello from Scion's httpd.\n";

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

/// As `connect`, given up after `limit` (QEMU's user network drops a SYN past its
/// backlog of one; the host's kernel sends it again a second later).
fn connect_within(port: u16, limit: Duration) -> Result<TcpStream, String> {
    use socket2::{Domain, Socket, Type};
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).map_err(|e| format!("socket: {e}"))?;
    let any: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
    sock.bind(&any.into()).map_err(|e| format!("bind: {e}"))?;
    let to: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    sock.connect_timeout(&to.into(), limit).map_err(|e| format!("connect: {e}"))?;
    let s: TcpStream = sock.into();
    s.set_write_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
    Ok(s)
}

/// A connection to the forwarded host port `port`, from a local port of its own.
///
/// QEMU's user network (libslirp) hands the guest each forwarded connection as coming
/// from 10.0.2.2 and the host client's own port, whatever forwarded port it came
/// through. Linux gives a `connect` without `bind` a local port unique only per
/// destination, so two clients of two forwarded ports may get the same one: the guest
/// then sees a second SYN for a connection it holds open (and drops it, as it must),
/// and slirp mixes the two connections' segments — a request lost or answered to the
/// other client (seen in a packet dump of `http_scale`). Binding first (port 0) takes a
/// port no other socket of this host holds.
pub fn connect(port: u16) -> Result<TcpStream, String> {
    use socket2::{Domain, Socket, Type};
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).map_err(|e| format!("socket: {e}"))?;
    let any: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
    sock.bind(&any.into()).map_err(|e| format!("bind: {e}"))?;
    let to: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    sock.connect(&to.into()).map_err(|e| format!("connect: {e}"))?;
    let s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(120))).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
    Ok(s)
}

/// A connection the guest's server has surely taken: a first small GET is answered on
/// it (tried on up to four connections). QEMU's user network listens on a forwarded
/// port with a backlog of 1: when clients connect at once, the host's kernel may drop
/// a connection whose handshake it finished while that queue was full, after the
/// client thinks it open; the request written on it never reaches the guest (a packet
/// dump shows no SYN for it). (A request eaten by the guest once — two of net's
/// sockets took one connection from a repeated SYN — is fixed in net, `admit_syns`.)
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
    let status =
        status_line.split(' ').nth(1).and_then(|c| c.parse().ok()).ok_or(format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .ok_or("no Content-Length")?;
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
    expect(
        r.body == want,
        format!("GET /{name}: the bytes differ (first at {:?})", r.body.iter().zip(&want).position(|(a, b)| a != b)),
    )
}

/// Five requests on one connection, then two pipelined in one write.
fn keep_alive(p: u16) -> Result<(), String> {
    let mut s = ready(p)?;
    for i in 0..5 {
        write!(s, "GET /small.txt HTTP/1.1\r\nHost: scion\r\n\r\n").map_err(|e| e.to_string())?;
        let r = response(&mut s, false).map_err(|e| format!("request {i}: {e}"))?;
        expect(r.status == 200 && r.body == SMALL, format!("request {i} on one connection"))?;
    }
    write!(s, "GET /small.txt HTTP/1.1\r\nHost: scion\r\n\r\nHEAD /1m.bin HTTP/1.1\r\nHost: scion\r\n\r\n")
        .map_err(|e| e.to_string())?;
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
            Ok(r) => {
                return expect(
                    r.status == 200 && r.body == SMALL,
                    format!("a normal request afterwards: status {}", r.status),
                )
            }
            Err(e) if start.elapsed() > Duration::from_secs(10) => {
                return Err(format!("a normal request afterwards: {e}"))
            }
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

/// HTTP conformance points, end to end (each failed before httparse).
fn conformance(p: u16) -> Result<(), String> {
    // RFC 9112 §3.2.2: a server MUST accept the absolute form.
    let r = request(p, "GET", "http://scion/small.txt", "")?;
    expect(r.status == 200 && r.body == SMALL, format!("absolute-form target: status {}", r.status))?;
    // §3.2: two Host fields MUST be 400.
    let st = raw_status(p, b"GET /small.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")?;
    expect(st == Some(400), format!("two Host fields: {st:?}"))?;
    // RFC 9110 §13.1.5: an If-Range that cannot match gets the whole representation.
    let r = request(p, "GET", "/1m.bin", "Range: bytes=0-99\r\nIf-Range: \"no-such-tag\"\r\n")?;
    expect(
        r.status == 200 && r.body == file("1m.bin"),
        format!("If-Range that cannot match: status {}, {} bytes", r.status, r.body.len()),
    )?;
    // §2.2: a request with bare LF line ends is answered.
    let st = raw_status(p, b"GET /small.txt HTTP/1.1\nHost: scion\nConnection: close\n\n")?;
    expect(st == Some(200), format!("bare LF: {st:?}"))?;
    // §5.5: NUL and other controls in a field value are refused.
    let st = raw_status(p, b"GET /small.txt HTTP/1.1\r\nHost: scion\r\nX-A: a\0b\r\n\r\n")?;
    expect(st == Some(400), format!("NUL in a field value: {st:?}"))?;
    let st = raw_status(p, b"GET /small.txt HTTP/1.1\r\nHost: scion\r\nX-A: a\x01b\r\n\r\n")?;
    expect(st == Some(400), format!("a control byte in a field value: {st:?}"))?;
    // A Date in IMF-fixdate.
    let r = request(p, "GET", "/small.txt", "")?;
    let date = r.header("Date").unwrap_or("");
    let ok = date.len() == 29 && date.ends_with(" GMT") && date.as_bytes()[3] == b',';
    expect(ok, format!("Date: {date:?}"))?;
    // And the host's time (the CMOS clock read at boot, kept by the TSC): a review once
    // found it 9–12 s behind. The clock's second is whole (up to 1 s behind) and the
    // answer took its time: 3 s either way.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_err(|e| e.to_string())?.as_secs();
    expect(
        (now - 3..=now + 3).any(|t| http::http_date(t) == date),
        format!("Date {date:?}, the host's clock {:?}: more than 3 s apart", http::http_date(now)),
    )
}

fn checks() -> Vec<Check> {
    vec![
        ("get-1m", |p| get_file(p, "1m.bin")),
        ("get-16m", |p| get_file(p, "16m.bin")),
        ("head", |p| {
            let r = request(p, "HEAD", "/16m.bin", "")?;
            expect(r.status == 200, format!("status {}", r.status))?;
            expect(
                r.header("Content-Length") == Some("16777216"),
                format!("Content-Length {:?}", r.header("Content-Length")),
            )
        }),
        ("range", |p| {
            let want = file("1m.bin");
            let r = request(p, "GET", "/1m.bin", "Range: bytes=1000-70999\r\n")?;
            expect(r.status == 206, format!("status {}", r.status))?;
            expect(
                r.header("Content-Range") == Some("bytes 1000-70999/1048576"),
                format!("Content-Range {:?}", r.header("Content-Range")),
            )?;
            expect(r.body == want[1000..71000], "the range's bytes differ")?;
            let r = request(p, "GET", "/1m.bin", "Range: bytes=-100\r\n")?;
            expect(r.status == 206 && r.body == want[want.len() - 100..], "a suffix range")?;
            let r = request(p, "GET", "/1m.bin", "Range: bytes=2000000-\r\n")?;
            expect(r.status == 416, format!("a range past the end: status {}", r.status))
        }),
        ("not-found", |p| {
            let r = request(p, "GET", "/no/such/file", "")?;
            expect(r.status == 404, format!("status {}", r.status))?;
            // A file's name with a slash after it names no file.
            let r = request(p, "GET", "/1m.bin/", "")?;
            expect(r.status == 404, format!("/1m.bin/: status {}", r.status))
        }),
        ("listing", |p| {
            let r = request(p, "GET", "/", "")?;
            let page = String::from_utf8_lossy(&r.body);
            expect(
                r.status == 200 && page.contains("href=\"/16m.bin\"") && page.contains("href=\"/sub/\""),
                format!("status {}, page {page:.200}", r.status),
            )?;
            let r = request(p, "GET", "/sub", "")?;
            expect(
                r.status == 301 && r.header("Location") == Some("/sub/"),
                format!("/sub: status {} Location {:?}", r.status, r.header("Location")),
            )?;
            let r = request(p, "GET", "/sub/", "")?;
            expect(r.status == 200 && String::from_utf8_lossy(&r.body).contains("inner.txt"), "/sub/ lists inner.txt")
        }),
        ("keep-alive", keep_alive),
        ("conformance", conformance),
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
            let junk: Vec<u8> =
                pattern(7, 3000).into_iter().map(|b| if b == b'\n' { b'x' } else { b }).chain(*b"\r\n\r\n").collect();
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
/// The WASI echo server (on the guest's port 80): a line comes back as it went, then
/// 200 KiB of a pattern, sent while its echo is read, come back byte for byte.
fn wasi_echo(port: u16) -> Result<(), String> {
    let open = || -> Result<TcpStream, String> {
        let s = connect(port)?;
        s.set_read_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
        Ok(s)
    };
    let mut s = open()?;
    s.write_all(b"hello, wasi\n").map_err(|e| format!("send: {e}"))?;
    let mut line = [0u8; 12];
    s.read_exact(&mut line).map_err(|e| format!("the echo of a line: {e}"))?;
    if &line != b"hello, wasi\n" {
        return Err(format!("the line came back as {:?}", String::from_utf8_lossy(&line)));
    }
    drop(s);
    let data = pattern(7, 200 * 1024);
    let s = open()?;
    let mut r = s.try_clone().map_err(|e| e.to_string())?;
    let sender = {
        let (mut s, data) = (s, data.clone());
        std::thread::spawn(move || {
            let r = s.write_all(&data);
            let _ = s.shutdown(Shutdown::Write);
            r
        })
    };
    let mut back = Vec::new();
    r.read_to_end(&mut back).map_err(|e| format!("the echo of 200 KiB: {e} after {} bytes", back.len()))?;
    sender.join().map_err(|_| "the sender panicked".to_string())?.map_err(|e| format!("send: {e}"))?;
    if back != data {
        return Err(format!(
            "200 KiB sent, {} bytes came back, first difference at {:?}",
            back.len(),
            back.iter().zip(&data).position(|(a, b)| a != b)
        ));
    }
    Ok(())
}

pub fn http_checks(
    ports: &[u16],
    ftp: Option<u16>,
    t: &crate::qemu::Typer,
    set: &str,
) -> Vec<(String, Result<(), String>)> {
    let port = ports[0];
    if set == "wasi_echo" {
        return vec![("wasi-echo".to_string(), wasi_echo(port))];
    }
    if set == "net_kills" {
        let Some(f) = ftp else { return vec![("net-kills".to_string(), Err("no ftpd in the scenario".to_string()))] };
        return vec![("net-kills".to_string(), net_kills(port, f, t))];
    }
    if set == "idle" {
        return vec![("idle-connections".to_string(), idle_cost(ports))];
    }
    if set == "peraddr" {
        return vec![("per-address-shed".to_string(), per_addr_shed(ports))];
    }
    if set == "slowloris" {
        return vec![("slowloris-thousand".to_string(), slowloris_thousand(ports))];
    }
    if set == "scale" || set == "thousand" {
        // "thousand": the thousand connections (on demand: `http_thousand`) and the
        // request after; "scale": the others. SCION_SCALE_ONLY=a,b runs only the checks
        // whose names contain a or b.
        let only = std::env::var("SCION_SCALE_ONLY").ok();
        let thousand = |name: &str| name == "thousand-connections" || name == "after";
        return scale_checks()
            .into_iter()
            .filter(|(name, _)| if set == "thousand" { thousand(name) } else { *name != "thousand-connections" })
            .filter(|(name, _)| only.as_deref().is_none_or(|o| o.split(',').any(|w| name.contains(w))))
            .map(|(name, f)| (name.to_string(), f(ports)))
            .collect();
    }
    let mut v: Vec<(String, Result<(), String>)> =
        checks().into_iter().map(|(name, f)| (name.to_string(), f(port))).collect();
    if let Some(f) = ftp {
        v.extend(ftp_checks(f, t));
    }
    v.push(("net-restart".to_string(), net_restart(port, t)));
    v
}

/// Forwarded ports to the guest's port 80 the scale checks get. QEMU's user network
/// (libslirp) listens on each with a backlog of 1 and takes one connection at a time:
/// the host drops SYNs past that (its client sends them again a second later), and a
/// connection whose handshake ended while the queue was full may be dropped by the
/// host's kernel after the client thinks it open (its request then never reaches the
/// guest). So clients connecting at once go through different ports, at most two a
/// port (`BULK_PORTS` of them), and the last port is kept for a client that must not
/// wait behind the others (`slowloris`'s normal client).
pub const SCALE_PORTS: usize = BULK_PORTS + 1;
const BULK_PORTS: usize = 8;

/// A scale check: its name and what it runs against the forwarded ports.
type ScaleCheck = (&'static str, fn(&[u16]) -> Result<(), String>);

/// The `http_scale` scenario's checks: a thousand connections at once, a
/// slowloris beside a normal client, 5,000 requests at concurrency 100; each gets the
/// `SCALE_PORTS` forwarded ports.
fn scale_checks() -> Vec<ScaleCheck> {
    vec![
        ("thousand-connections", thousand),
        ("slowloris", slowloris),
        ("cut-off-reset", cut_off_reset),
        ("ab-5000x100", ab_style),
        ("after", |p| still_serves(p[BULK_PORTS])),
    ]
}

/// One request written on a fresh connection: (status, body), read with `timeout`.
fn get_on(s: &mut TcpStream, path: &str, timeout: Duration) -> Result<Response, String> {
    s.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: scion\r\n\r\n").as_bytes()).map_err(|e| e.to_string())?;
    response(s, false)
}

/// 1,000 keep-alive connections open at once, each answered byte for byte, then each
/// asked again on the same connection (all still open, all requests sent before any
/// answer is read). QEMU's user network accepts a
/// forwarded connection at a time (libslirp listens with a backlog of 1: the host drops
/// SYNs past it and sends them again a second later), so the connections are opened
/// by 16 threads at once, two a forwarded port, and another thread asks again on the
/// connections opened so far now and then while the rest open (a connection idle for
/// the server's keep-alive time is closed by it, as it should be).
fn thousand(ports: &[u16]) -> Result<(), String> {
    use std::sync::{Arc, Mutex};
    const N: usize = 1000;
    const THREADS: usize = 2 * BULK_PORTS;
    const WARM: Duration = Duration::from_secs(20);
    const LIMIT: Duration = Duration::from_secs(300);
    type Conns = Arc<Mutex<Vec<(usize, TcpStream, Instant)>>>;
    let t0 = Instant::now();
    let all: Vec<Conns> = (0..THREADS).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
    let opening = Arc::new(std::sync::atomic::AtomicBool::new(true));
    // Each opened connection asked again once idle for `WARM`, while the others open
    // (the server closes one idle for its keep-alive time, 60 s).
    let keeper = {
        let (all, opening) = (all.clone(), opening.clone());
        std::thread::spawn(move || -> Result<(), String> {
            while opening.load(std::sync::atomic::Ordering::SeqCst) {
                for mine in &all {
                    let mut mine = mine.lock().map_err(|_| "a lock".to_string())?;
                    // The due ones asked all at once, then their answers read (a sweep
                    // of one at a time falls behind the server's idle time under load).
                    let mut due: Vec<&mut (usize, TcpStream, Instant)> =
                        mine.iter_mut().filter(|c| c.2.elapsed() > WARM).collect();
                    for (n, s, _) in due.iter_mut().map(|c| &mut **c) {
                        s.write_all(b"GET /small.txt HTTP/1.1\r\nHost: scion\r\n\r\n")
                            .map_err(|e| format!("connection {n} kept open: {e}"))?;
                    }
                    for (n, s, at) in due.iter_mut().map(|c| &mut **c) {
                        s.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
                        let r = response(s, false).map_err(|e| format!("connection {n} kept open: {e}"))?;
                        expect(
                            r.status == 200 && r.body == SMALL,
                            format!("connection {n} kept open: status {}", r.status),
                        )?;
                        *at = Instant::now();
                    }
                }
                std::thread::sleep(Duration::from_millis(500));
            }
            Ok(())
        })
    };
    let hs: Vec<_> = (0..THREADS)
        .map(|k| {
            let (p, mine) = (ports[k % BULK_PORTS], all[k].clone());
            std::thread::spawn(move || -> Result<(), String> {
                for n in (k..N).step_by(THREADS) {
                    // The request written at once, before the guest has the connection.
                    let mut s = connect(p).map_err(|e| format!("connection {n}: {e}"))?;
                    let r = get_on(&mut s, "/small.txt", Duration::from_secs(60))
                        .map_err(|e| format!("connection {n}: {e}"))?;
                    expect(
                        r.status == 200 && r.body == SMALL,
                        format!("connection {n}: status {}, {} bytes", r.status, r.body.len()),
                    )?;
                    mine.lock().map_err(|_| "a lock".to_string())?.push((n, s, Instant::now()));
                    expect(
                        t0.elapsed() < LIMIT,
                        format!("{n}: not all {N} connections open in {} s", LIMIT.as_secs()),
                    )?;
                }
                Ok(())
            })
        })
        .collect();
    let mut first = Ok(());
    for h in hs {
        let r = h.join().map_err(|_| "a connecting thread panicked".to_string()).and_then(|r| r);
        first = first.and(r);
    }
    opening.store(false, std::sync::atomic::Ordering::SeqCst);
    keeper.join().map_err(|_| "the keeper panicked".to_string())??;
    first?;
    let opened = t0.elapsed();
    // All open at once: each asked again, all requests written before any answer is
    // read (a thousand requests in flight: a thousand opens of one file at the files
    // server, past its handles for one principal unless httpd shares them), by a
    // thread a port pair.
    let hs: Vec<_> = all
        .into_iter()
        .map(|mine| {
            std::thread::spawn(move || -> Result<(), String> {
                let mut mine = std::mem::take(&mut *mine.lock().map_err(|_| "a lock".to_string())?);
                for (n, s, _) in mine.iter_mut() {
                    s.write_all(b"GET /small.txt HTTP/1.1\r\nHost: scion\r\n\r\n")
                        .map_err(|e| format!("connection {n}, asked again with all {N} open: {e}"))?;
                }
                for (n, mut s, _) in mine {
                    s.set_read_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
                    let r = response(&mut s, false)
                        .map_err(|e| format!("connection {n}, asked again with all {N} open: {e}"))?;
                    expect(
                        r.status == 200 && r.body == SMALL,
                        format!("connection {n}, asked again with all {N} asking: status {}", r.status),
                    )?;
                }
                Ok(())
            })
        })
        .collect();
    for h in hs {
        h.join().map_err(|_| "a thread panicked".to_string())??;
    }
    println!(
        "    | {N} connections: all open and answered by {} ms, each asked again by {} ms",
        opened.as_millis(),
        t0.elapsed().as_millis()
    );
    expect(
        t0.elapsed() < LIMIT + Duration::from_secs(100),
        format!("the second requests took until {} s", t0.elapsed().as_secs()),
    )
}

/// The guest's busy ticks so far (instructions under icount) and net's by part
/// (`PART=TICKS` words), from httpd's `/.busy` asked on `s` (a keep-alive connection).
fn busy_on(s: &mut TcpStream) -> Result<Vec<(String, u64)>, String> {
    let r = get_on(s, "/.busy", Duration::from_secs(60))?;
    let text = String::from_utf8_lossy(&r.body).to_string();
    let busy =
        text.split_whitespace().next().and_then(|w| w.parse().ok()).ok_or(format!("/.busy answered {text:?}"))?;
    let mut v = vec![("busy".to_string(), busy)];
    v.extend(
        text.split_whitespace()
            .filter_map(|w| w.split_once('='))
            .filter_map(|(k, n)| Some((k.to_string(), n.parse().ok()?))),
    );
    Ok(v)
}

/// Busy guest instructions per request of one keep-alive client making `n` small
/// requests in turn on `s` (its `/.busy` requests before and after included), and
/// net's parts of them.
fn cost_per_request(s: &mut TcpStream, n: u64) -> Result<(u64, String), String> {
    let b0 = busy_on(s)?;
    for k in 0..n {
        let r = get_on(s, "/small.txt", Duration::from_secs(60)).map_err(|e| format!("request {k}: {e}"))?;
        expect(r.status == 200 && r.body == SMALL, format!("request {k}: status {}", r.status))?;
    }
    let b1 = busy_on(s)?;
    let parts: Vec<String> =
        b0.iter().zip(&b1).skip(1).map(|((k, a), (_, b))| format!("{k} {}", b.saturating_sub(*a) / n)).collect();
    Ok((b1[0].1.saturating_sub(b0[0].1) / n, parts.join(", ")))
}

/// The wait's cost does not grow with idle connections (`http_idle`, under icount): one
/// keep-alive client's small requests cost (busy guest instructions, `/.busy`) alone,
/// then beside 1,000 idle keep-alive connections (each asked once, then silent), within
/// 1.5× of alone. With a select-shaped wait (every connection handed to net on each
/// wait, net looking at each, httpd walking each) they cost 28×. (The bound was 1.3×
/// while a request cost ~119k instructions; since FETCH and parking it costs ~44k, and
/// what 1,000 idle connections still add — lookups in 1,000-entry maps, net's wake-up,
/// 8–14k, varying between icount runs — measured 1.19–1.33×: docs/net-breakdown.md.)
fn idle_cost(ports: &[u16]) -> Result<(), String> {
    const IDLE: usize = 1000;
    const N: u64 = 200;
    const THREADS: usize = 2 * BULK_PORTS;
    let mut active = ready(ports[BULK_PORTS])?;
    // Warm: the file's handle, the paths taken once.
    cost_per_request(&mut active, 20)?;
    let (alone, alone_parts) = cost_per_request(&mut active, N)?;
    let t0 = Instant::now();
    let hs: Vec<_> = (0..THREADS)
        .map(|k| {
            let p = ports[k % BULK_PORTS];
            std::thread::spawn(move || -> Result<Vec<TcpStream>, String> {
                let mut mine = Vec::new();
                for n in (k..IDLE).step_by(THREADS) {
                    let mut s = connect(p).map_err(|e| format!("idle connection {n}: {e}"))?;
                    let r = get_on(&mut s, "/small.txt", Duration::from_secs(60))
                        .map_err(|e| format!("idle connection {n}: {e}"))?;
                    expect(r.status == 200 && r.body == SMALL, format!("idle connection {n}: status {}", r.status))?;
                    mine.push(s);
                }
                Ok(mine)
            })
        })
        .collect();
    let mut idle = Vec::new();
    for h in hs {
        idle.extend(h.join().map_err(|_| "a connecting thread panicked".to_string())??);
    }
    let opened = t0.elapsed();
    // Keep-alive holds them open for the server's idle time (60 s): well past this.
    expect(opened < Duration::from_secs(40), format!("{IDLE} connections took {} s to open", opened.as_secs()))?;
    cost_per_request(&mut active, 20)?;
    let (beside, beside_parts) = cost_per_request(&mut active, N)?;
    let ratio = beside as f64 / alone.max(1) as f64;
    println!(
        "    | one client's request: {alone} instructions alone, {beside} beside {IDLE} idle connections ({ratio:.2}×; {IDLE} opened in {} ms)\n    | net's part alone: {alone_parts}\n    | net's part beside: {beside_parts}",
        opened.as_millis()
    );
    // Every idle connection still open and served.
    for (n, s) in idle.iter_mut().enumerate().step_by(97) {
        let r =
            get_on(s, "/small.txt", Duration::from_secs(60)).map_err(|e| format!("idle connection {n} after: {e}"))?;
        expect(r.status == 200, format!("idle connection {n} after: status {}", r.status))?;
    }
    expect(
        ratio <= 1.5,
        format!("a request beside {IDLE} idle connections costs {ratio:.2}× one alone ({beside} against {alone})"),
    )
}

/// 150 connections send a request head one byte every 2 s (each opened again when the
/// server cuts it off), from 10 threads, two a forwarded port; once all are open, a
/// normal client asks every 300 ms for 24 s on a new connection through a port of its
/// own and must be served within 1 s every time, connecting included; and every slow
/// connection must have been cut off (408 or closed) at least once.
fn slowloris(ports: &[u16]) -> Result<(), String> {
    let p2 = ports[BULK_PORTS];
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    const SLOW: usize = 150;
    const THREADS: usize = 10;
    let stop = Arc::new(AtomicBool::new(false));
    let (closed, open) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let attack: Vec<_> = (0..THREADS)
        .map(|k| {
            let p = ports[k % (THREADS / 2)];
            let (stop, closed, open) = (stop.clone(), closed.clone(), open.clone());
            std::thread::spawn(move || {
                let head = b"GET /small.txt HTTP/1.1\r\nHost: scion\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
                let mut conns: Vec<(Option<TcpStream>, usize)> = Vec::new();
                while conns.len() < SLOW / THREADS && !stop.load(Ordering::SeqCst) {
                    let c = connect(p).ok();
                    if c.is_some() {
                        open.fetch_add(1, Ordering::SeqCst);
                    }
                    conns.push((c, 0));
                }
                while !stop.load(Ordering::SeqCst) {
                    for (c, at) in conns.iter_mut() {
                        // The server's answer (408) or close ends this one: a new one begins.
                        let answered = c.as_mut().is_none_or(|s| {
                            let _ = s.set_nonblocking(true);
                            let r = s.peek(&mut [0u8; 1]);
                            let _ = s.set_nonblocking(false);
                            !matches!(r, Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock)
                        });
                        if !answered && c.as_mut().is_some_and(|s| s.write_all(&head[*at % head.len()..*at % head.len() + 1]).is_ok()) {
                            *at += 1;
                        } else {
                            closed.fetch_add(1, Ordering::SeqCst);
                            *c = connect(p).ok();
                            *at = 0;
                        }
                    }
                    for _ in 0..20 {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            })
        })
        .collect();
    let t0 = Instant::now();
    while open.load(Ordering::SeqCst) < SLOW && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let opened = t0.elapsed();
    let all_open = open.load(Ordering::SeqCst) >= SLOW;
    let t0 = Instant::now();
    let mut worst = Duration::ZERO;
    let mut n = 0;
    let mut failed = None;
    while all_open && t0.elapsed() < Duration::from_secs(24) {
        let t = Instant::now();
        let r = connect(p2).and_then(|mut s| get_on(&mut s, "/small.txt", Duration::from_secs(5)));
        let took = t.elapsed();
        n += 1;
        worst = worst.max(took);
        match r {
            Ok(r) if r.status == 200 && r.body == SMALL && took <= Duration::from_secs(1) => {}
            Ok(r) => {
                failed.get_or_insert(format!("request {n}: status {} after {} ms", r.status, took.as_millis()));
            }
            Err(e) => {
                failed.get_or_insert(format!("request {n}: {e} after {} ms", took.as_millis()));
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    stop.store(true, Ordering::SeqCst);
    for a in attack {
        let _ = a.join();
    }
    let closed = closed.load(Ordering::SeqCst);
    println!("    | slowloris: {SLOW} slow connections open in {} ms, cut off {closed} times (408 or closed) and opened again; {n} normal requests, the slowest {} ms", opened.as_millis(), worst.as_millis());
    expect(all_open, format!("only {} of {SLOW} slow connections opened in 60 s", open.load(Ordering::SeqCst)))?;
    if let Some(f) = failed {
        return Err(format!("a normal client beside the slowloris: {f}"));
    }
    // Each slow connection is cut off (a head's rate and deadline): in 24 s, every one
    // at least once.
    expect(closed >= SLOW, format!("the slow connections were cut off only {closed} times in 24 s"))
}

/// What a slow connection's server said when it became readable: `Some(true)` a 408,
/// `Some(false)` anything else or a close, None: nothing yet.
fn slow_answer(s: &mut TcpStream) -> Option<bool> {
    let _ = s.set_nonblocking(true);
    let mut b = [0u8; 64];
    let r = s.read(&mut b);
    let _ = s.set_nonblocking(false);
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
        Ok(n) if n >= 12 => Some(b.starts_with(b"HTTP/1.1 408")),
        _ => Some(false),
    }
}

/// Slowloris at a thousand connections (`http_slowloris`): 1,000 connections from the
/// host hold request heads open, half sending a byte every 3 s, half a 35-byte header
/// line every 0.5 s (70 B/s: over httpd's rate floor, so only the head's deadline cuts
/// them), each opened again when the server cuts it off; through the 8 bulk ports, two
/// threads a port. Once all are open, a normal client makes `NORMAL` requests, each on a
/// new connection through a port of its own, one every 500 ms. What must hold, counted:
/// every normal request answered 200 byte for byte (the target is within 1 s; the check
/// bounds it at a generous 15 s, a host timer, and prints the slowest and the median),
/// and the slow connections cut off with 408s on time — within `HEAD_US` + 3 s of the
/// head's first byte — at least `SLOW` of them in the run, and 3 in 4 of all 408s.
fn slowloris_thousand(ports: &[u16]) -> Result<(), String> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    const SLOW: usize = 1000;
    const THREADS: usize = 2 * BULK_PORTS;
    const NORMAL: usize = 40;
    // A normal request's bound on the host's clock: generous (the target is 1 s; on a
    // host running the suite's other machines at once a guest can stall for seconds).
    // What the check is for is counted: a request refused, or never answered.
    const NORMAL_LIMIT: Duration = Duration::from_secs(15);
    // httpd's head deadline (HEAD_US, 10 s) and 3 s of leeway for a loaded host.
    const ON_TIME: Duration = Duration::from_secs(13);
    let normal_port = ports[BULK_PORTS];
    let stop = Arc::new(AtomicBool::new(false));
    // Opened; cut off with a 408 on time; with a 408 late; closed without one; cut off
    // before any byte of the head went (a connection slirp lost or net refused).
    let counts: Arc<[AtomicUsize; 5]> = Arc::new(Default::default());
    let attack: Vec<_> = (0..THREADS)
        .map(|k| {
            let p = ports[k % BULK_PORTS];
            let (stop, counts) = (stop.clone(), counts.clone());
            std::thread::spawn(move || {
                // Even threads send a byte every 3 s, odd ones a 35-byte line every 0.5 s.
                let lines = k % 2 == 1;
                let mut head = b"GET /small.txt HTTP/1.1\r\nHost: scion\r\n".to_vec();
                for i in 0..1000 {
                    head.extend_from_slice(format!("X-Slow-{i:04}: {}\r\n", "a".repeat(21)).as_bytes());
                }
                let (step, every) = if lines { (35, Duration::from_millis(500)) } else { (1, Duration::from_secs(3)) };
                let mine = (k..SLOW).step_by(THREADS).count();
                // Each: its socket (None: to open again), bytes sent, its head's first
                // byte's time, when it writes next.
                let mut conns: Vec<(Option<TcpStream>, usize, Option<Instant>, Instant)> =
                    (0..mine).map(|_| (None, 0, None, Instant::now())).collect();
                let mut opened = 0;
                // A tick of 100 ms: every connection looked at (a 408 seen within a
                // tick of its coming), the due ones written to, and the closed ones
                // opened again for at most 300 ms a tick (QEMU's user network takes a
                // forwarded connection at a time: a connect may wait a second).
                while !stop.load(Ordering::SeqCst) {
                    let tick = Instant::now();
                    for (c, at, first, due) in conns.iter_mut() {
                        let Some(s) = c.as_mut() else { continue };
                        let said = slow_answer(s);
                        if said.is_none() && *due <= tick {
                            if s.write_all(&head[*at..*at + step]).is_ok() {
                                first.get_or_insert(tick);
                                *at += step;
                                *due += every;
                                continue;
                            }
                        } else if said.is_none() {
                            continue;
                        }
                        match (said, *first) {
                            (_, None) => counts[4].fetch_add(1, Ordering::SeqCst),
                            (Some(true), Some(t)) if t.elapsed() <= ON_TIME => counts[1].fetch_add(1, Ordering::SeqCst),
                            (Some(true), Some(_)) => counts[2].fetch_add(1, Ordering::SeqCst),
                            (_, Some(_)) => counts[3].fetch_add(1, Ordering::SeqCst),
                        };
                        *c = None;
                    }
                    for (c, at, first, due) in conns.iter_mut().filter(|c| c.0.is_none()) {
                        if tick.elapsed() > Duration::from_millis(300) || stop.load(Ordering::SeqCst) {
                            break;
                        }
                        if let Ok(s) = connect_within(p, Duration::from_millis(300)) {
                            if opened < mine {
                                opened += 1;
                                counts[0].fetch_add(1, Ordering::SeqCst);
                            }
                            (*c, *at, *first, *due) = (Some(s), 0, None, Instant::now());
                        }
                    }
                    if let Some(rest) = Duration::from_millis(100).checked_sub(tick.elapsed()) {
                        std::thread::sleep(rest);
                    }
                }
            })
        })
        .collect();
    let t0 = Instant::now();
    while counts[0].load(Ordering::SeqCst) < SLOW && t0.elapsed() < Duration::from_secs(90) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let opened = t0.elapsed();
    let all_open = counts[0].load(Ordering::SeqCst) >= SLOW;
    let mut took = Vec::new();
    let mut failed = Vec::new();
    for n in 0..NORMAL {
        if !all_open {
            break;
        }
        let t = Instant::now();
        let r = connect(normal_port).and_then(|mut s| get_on(&mut s, "/small.txt", NORMAL_LIMIT));
        let d = t.elapsed();
        took.push(d);
        match r {
            Ok(r) if r.status == 200 && r.body == SMALL && d <= NORMAL_LIMIT => {}
            Ok(r) => failed.push(format!("request {n}: status {} after {} ms", r.status, d.as_millis())),
            Err(e) => failed.push(format!("request {n}: {e} after {} ms", d.as_millis())),
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::SeqCst);
    for a in attack {
        let _ = a.join();
    }
    took.sort();
    let ms = |d: Option<&Duration>| d.map_or(0, |d| d.as_millis());
    let c: Vec<usize> = counts.iter().map(|a| a.load(Ordering::SeqCst)).collect();
    println!(
        "    | slowloris: {SLOW} slow connections open in {} ms; normal requests {} of {} answered, median {} ms, slowest {} ms; slow ones cut off: {} by a 408 on time, {} by a late 408, {} closed without one, {} before their head began",
        opened.as_millis(),
        took.len() - failed.len(),
        took.len(),
        ms(took.get(took.len() / 2)),
        ms(took.last()),
        c[1],
        c[2],
        c[3],
        c[4]
    );
    expect(all_open, format!("only {} of {SLOW} slow connections opened in 90 s", c[0]))?;
    if let Some(f) = failed.first() {
        return Err(format!(
            "{} of {NORMAL} normal requests beside the slowloris failed; the first: {f}",
            failed.len()
        ));
    }
    expect(c[1] >= SLOW, format!("only {} slow connections were cut off by a 408 on time (want {SLOW})", c[1]))?;
    // Late is judged on the host (a 408 seen in a tick of the client's, against its
    // head's first byte): a loaded host stretches the ticks, so 3 in 4 on time is the bar
    // (all on a quiet host; 70% on the old httpd). A slow head closed without a 408 is
    // not counted against the server: a byte the client wrote as the 408 came is reset
    // by net (a cut-off connection written on), and the reset loses the unread 408.
    expect(c[1] * 4 >= (c[1] + c[2]) * 3, format!("of {} 408s only {} came on time ({} late)", c[1] + c[2], c[1], c[2]))
}

/// httpd's per-address limit behind a NAT (`http_peraddr`: `per_addr=16`; every host
/// client is 10.0.2.2 to the guest): 16 idle keep-alive connections hold the address's
/// share, and a newcomer from the same address is still served — the connection idle
/// longest is closed for it (before, the newcomer was refused until an idle one timed
/// out, 60 s) — while the others stay open and answer.
fn per_addr_shed(ports: &[u16]) -> Result<(), String> {
    const LIMIT: usize = 16;
    let mut idle = Vec::new();
    for n in 0..LIMIT {
        let mut s = connect(ports[n % BULK_PORTS])?;
        let r = get_on(&mut s, "/small.txt", Duration::from_secs(30)).map_err(|e| format!("connection {n}: {e}"))?;
        expect(r.status == 200 && r.body == SMALL, format!("connection {n}: status {}", r.status))?;
        idle.push(s);
        // Each idle a little longer than the next: the first is the one to go.
        std::thread::sleep(Duration::from_millis(50));
    }
    // Idle for over a second (one just answered is not shed).
    std::thread::sleep(Duration::from_millis(1500));
    for k in 0..3 {
        let mut s = connect(ports[BULK_PORTS])?;
        let r = get_on(&mut s, "/small.txt", Duration::from_secs(10))
            .map_err(|e| format!("newcomer {k} with the address's {LIMIT} connections idle: {e}"))?;
        expect(r.status == 200 && r.body == SMALL, format!("newcomer {k}: status {}", r.status))?;
        // The oldest idle ones went for the newcomers (the server's FIN: end of stream).
        let mut b = [0u8; 1];
        idle[k].set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
        let n = idle[k].read(&mut b).unwrap_or(0);
        expect(n == 0, format!("idle connection {k} was not the one closed for newcomer {k}"))?;
        idle.push(s);
        std::thread::sleep(Duration::from_millis(1100));
    }
    // The rest still open and served.
    for (n, s) in idle.iter_mut().enumerate().skip(3) {
        let r =
            get_on(s, "/small.txt", Duration::from_secs(30)).map_err(|e| format!("connection {n} afterwards: {e}"))?;
        expect(r.status == 200 && r.body == SMALL, format!("connection {n} afterwards: status {}", r.status))?;
    }
    Ok(())
}

/// A slow connection cut off (its 408, then the server's close) whose client writes on
/// is reset within a few seconds, as Linux resets a closed socket given data: net does
/// not keep it as a lingering orphan for 30 s, its buffers charged to httpd and its
/// socket in every run of the stack (a 1,000-connection slowloris that wrote on into
/// its cut-off connections kept 994 of them so, 80 MiB of httpd's budget). Ten at
/// once, through two ports.
fn cut_off_reset(ports: &[u16]) -> Result<(), String> {
    let hs: Vec<_> = (0..10)
        .map(|k| {
            let p = ports[k % 2];
            std::thread::spawn(move || -> Result<Duration, String> {
                let mut s = connect(p)?;
                s.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
                s.write_all(b"G").map_err(|e| e.to_string())?;
                // The 408 (a head under 64 B/s after 2 s), then the server's FIN.
                let r = response(&mut s, false)?;
                expect(r.status == 408, format!("a slow head answered {}, not 408", r.status))?;
                let t = Instant::now();
                while t.elapsed() < Duration::from_secs(20) {
                    if s.write_all(b"X").is_err() {
                        return Ok(t.elapsed());
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err("a connection cut off with 408 still took bytes 20 s later (not reset)".to_string())
            })
        })
        .collect();
    let mut worst = Duration::ZERO;
    for h in hs {
        worst = worst.max(h.join().map_err(|_| "a thread panicked".to_string())??);
    }
    println!(
        "    | 10 connections cut off with 408 and written on: all reset, the last after {} ms",
        worst.as_millis()
    );
    expect(
        worst < Duration::from_secs(5),
        format!("a cut-off connection was reset only {} ms after", worst.as_millis()),
    )
}

/// 5,000 requests from 100 clients at once (50 each on a keep-alive connection, as
/// `ab -k -c 100 -n 5000`): every one answered byte for byte.
fn ab_style(ports: &[u16]) -> Result<(), String> {
    let t0 = Instant::now();
    let hs: Vec<_> = (0..100)
        .map(|i| {
            let p = ports[(i / 2) % BULK_PORTS];
            std::thread::spawn(move || -> Result<(), String> {
                let name = format!("f{}.bin", i % 8);
                let small = i % 2 == 0;
                let want = if small { SMALL.to_vec() } else { file(&name) };
                let path = if small { "/small.txt".to_string() } else { format!("/{name}") };
                // Two clients a port connect at a time (`SCALE_PORTS`).
                std::thread::sleep(Duration::from_millis(300 * (i as u64 / (2 * BULK_PORTS as u64))));
                let mut s = ready(p)?;
                for k in 0..50 {
                    let r = get_on(&mut s, &path, Duration::from_secs(60))
                        .map_err(|e| format!("client {i}, request {k}: {e}"))?;
                    expect(
                        r.status == 200 && r.body == want,
                        format!("client {i}, request {k}: status {}, {} bytes", r.status, r.body.len()),
                    )?;
                }
                Ok(())
            })
        })
        .collect();
    let mut failures = Vec::new();
    for h in hs {
        if let Err(e) = h.join().map_err(|_| "a client thread panicked".to_string()).and_then(|r| r) {
            failures.push(e);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "    | 5000 requests at concurrency 100: {:.1} s, {:.0} requests/s, {} clients failed",
        secs,
        5000.0 / secs,
        failures.len()
    );
    match failures.first() {
        Some(f) => Err(format!("{} of 100 clients failed; the first: {f}", failures.len())),
        None => Ok(()),
    }
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
            Err(e) if start.elapsed() > Duration::from_secs(120) => {
                return Err(format!("no download within 120 s of the restart: {e}"))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// Supervision that knows dependencies (`manifest::restart`): `kill net` typed 11 times,
/// 2.5 s apart (the report's case: each kill ends httpd and ftpd, their server gone, once
/// they have attached to the net started after the kill before). Before, root counted
/// those ends as their own failures, and the tenth within 30 s left them down for good;
/// now none is counted, and after the last kill both answer.
fn net_kills(port: u16, ftp: u16, t: &crate::qemu::Typer) -> Result<(), String> {
    let both_answer = |after: &str| -> Result<(), String> {
        let start = Instant::now();
        let mut last;
        loop {
            let web = request(port, "GET", "/small.txt", "")
                .and_then(|r| expect(r.status == 200 && r.body == SMALL, format!("GET /small.txt: {}", r.status)));
            let ftp = web.clone().and_then(|_| {
                ftp_fetch(ftp, "/small.txt").and_then(|b| expect(b == SMALL, "RETR /small.txt: other bytes"))
            });
            match ftp {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
            if start.elapsed() > Duration::from_secs(90) {
                return Err(format!("httpd and ftpd did not both answer within 90 s {after}: {last}"));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    both_answer("at first")?;
    for _ in 1..=11 {
        t.type_text("kill net\n");
        std::thread::sleep(Duration::from_millis(2500));
    }
    both_answer("after 11 kills of net")?;
    println!("    | net-kills: both answer after 11 kills of net");
    Ok(())
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
    /// One client at a time connects, until its greeting came: QEMU's user network
    /// listens on a forwarded port with a backlog of 1, and a connection the host's
    /// kernel completed while that queue was full may never reach the guest (see
    /// `SCALE_PORTS`); clients that connect at once through one port would lose some.
    fn connect(port: u16) -> Result<Ftp, String> {
        let start = Instant::now();
        loop {
            let r = Ftp::connect_once(port);
            match r {
                Ok(f) => return Ok(f),
                Err(e) if start.elapsed() > Duration::from_secs(60) => return Err(format!("no FTP greeting: {e}")),
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        }
    }

    /// Connect once and read the greeting (220, else an error naming the reply).
    fn connect_once(port: u16) -> Result<Ftp, String> {
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _gate = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let s = connect(port)?;
        s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
        let w = s.try_clone().map_err(|e| e.to_string())?;
        let mut f = Ftp { r: std::io::BufReader::new(s), w };
        let (code, text) = f.reply()?;
        expect(code == 220, format!("greeting {code} {text}"))?;
        f.w.set_read_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
        Ok(f)
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

    /// As `data`, with `REST at` between the EPSV and the command.
    fn data_at(&mut self, line: &str, at: u64) -> Result<Vec<u8>, String> {
        self.data_from(line, Some(at), |_| {})
    }

    /// As `data`, calling `midway` with the bytes received so far after each read.
    fn data_with(&mut self, line: &str, midway: impl FnMut(usize)) -> Result<Vec<u8>, String> {
        self.data_from(line, None, midway)
    }

    /// EPSV: the data port it names.
    fn epsv(&mut self) -> Result<u16, String> {
        let text = self.want("EPSV", 229)?;
        text.split("|||")
            .nth(1)
            .and_then(|r| r.split('|').next())
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("EPSV reply {text:?}"))
    }

    fn data_from(&mut self, line: &str, rest: Option<u64>, mut midway: impl FnMut(usize)) -> Result<Vec<u8>, String> {
        let port = self.epsv()?;
        let mut d = connect(port)?;
        if let Some(at) = rest {
            self.want(&format!("REST {at}"), 350)?;
        }
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
    v.push((
        "ftp-commands".into(),
        (|| {
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
        })(),
    ));
    v.push((
        "ftp-retr-16m".into(),
        (|| {
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
        })(),
    ));
    v.push((
        "ftp-list-cwd".into(),
        (|| {
            let mut f = Ftp::login(port)?;
            let list = String::from_utf8_lossy(&f.data("LIST")?).into_owned();
            expect(
                list.lines().any(|l| l.ends_with(" 16m.bin") && l.contains(" 16777216 ") && l.starts_with('-')),
                format!("LIST: {list:?}"),
            )?;
            expect(
                list.lines().any(|l| l.ends_with(" sub") && l.starts_with('d')),
                format!("LIST lacks the directory: {list:?}"),
            )?;
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
        })(),
    ));
    v.push(("ftp-idle-crowd".into(), ftp_idle_crowd(port)));
    v.push(("ftp-slow-reader".into(), ftp_slow_reader(port)));
    v.push((
        "ftp-sixteen-at-once".into(),
        (|| {
            let handles: Vec<_> = (0..16)
                .map(|i| {
                    std::thread::spawn(move || -> Result<(), String> {
                        let name = format!("f{}.bin", i % 4);
                        let mut f = Ftp::login(port)?;
                        let got = f.data(&format!("RETR {name}"))?;
                        expect(got == file(&name), format!("{name}: {} bytes, differing from the file", got.len()))?;
                        f.want("QUIT", 221).map(|_| ())
                    })
                })
                .collect();
            for (i, h) in handles.into_iter().enumerate() {
                h.join()
                    .map_err(|_| "a download thread panicked".to_string())?
                    .map_err(|e| format!("download {i}: {e}"))?;
            }
            Ok(())
        })(),
    ));
    v.push(("ftp-abandoned-pasv".into(), ftp_abandoned(port)));
    v.push((
        "ftp-rest".into(),
        (|| {
            let mut f = Ftp::login(port)?;
            let want = file("1m.bin");
            // REST just before the RETR it restarts (RFC 3659 §5): after EPSV.
            let got = f.data_at("RETR 1m.bin", 1000)?;
            expect(
                got == want[1000..],
                format!("REST 1000 then RETR: {} bytes, want the file's last {}", got.len(), want.len() - 1000),
            )?;
            let got = f.data("RETR 1m.bin")?;
            expect(got == want, "a RETR after a resumed one starts at 0 again")?;
            f.want("EPSV", 229)?;
            f.want("REST 2000000", 350)?;
            f.want("RETR 1m.bin", 554)?;
            f.want("REST x", 501)?;
            // Any other command clears a restart point.
            f.want("REST 1000", 350)?;
            f.want("NOOP", 200)?;
            let got = f.data("RETR 1m.bin")?;
            expect(got == want, "REST, NOOP, then RETR: the whole file (the NOOP cleared the restart point)")?;
            // EPSV ALL (RFC 2428): 200, and PASV refused from then on.
            f.want("EPSV ALL", 200)?;
            f.want("PASV", 503)?;
            let got = f.data("RETR 1m.bin")?;
            expect(got == want, "RETR by EPSV after EPSV ALL")?;
            f.want("QUIT", 221).map(|_| ())
        })(),
    ));
    let curl = std::process::Command::new("curl").arg("--version").output().is_ok_and(|o| o.status.success());
    if curl {
        v.push((
            "ftp-curl".into(),
            (|| {
                let out = std::process::Command::new("curl")
                    .args(["--silent", "--show-error", "--max-time", "300"])
                    .arg(format!("ftp://127.0.0.1:{port}/16m.bin"))
                    .output()
                    .map_err(|e| format!("curl: {e}"))?;
                expect(out.status.success(), format!("curl failed: {}", String::from_utf8_lossy(&out.stderr).trim()))?;
                expect(
                    out.stdout == file("16m.bin"),
                    format!("curl got {} bytes, differing from 16m.bin", out.stdout.len()),
                )
            })(),
        ));
    } else {
        println!("    | (no curl on this machine: the FTP checks use xtask's own client only)");
    }
    v
}

/// Twenty idle control connections from one address (every host client is one address
/// behind QEMU's user network), more than the scenario's per-address limit (ftpd
/// `sessions=24`: 18 an address): a download beside them is still served, and the
/// oldest idle ones were shed with 421 to make room.
fn ftp_idle_crowd(port: u16) -> Result<(), String> {
    let mut idle = Vec::new();
    for i in 0..20 {
        match Ftp::connect_once(port) {
            Ok(mut f) => {
                f.want("USER anonymous", 331)?;
                f.want("PASS idle@example.com", 230)?;
                idle.push(f);
            }
            // ftpd sheds only sessions idle for 2 s: one that came too soon after
            // the others may be refused (421) while none is.
            Err(e) if e.contains("421") && i >= 16 => {}
            Err(e) => return Err(format!("idle session {i}: {e}")),
        }
    }
    std::thread::sleep(Duration::from_secs(3));
    // At once: a first try, not one of `Ftp::connect`'s for a minute.
    let t0 = Instant::now();
    let mut f = Ftp::connect_once(port).map_err(|e| format!("a client beside {} idle sessions: {e}", idle.len()))?;
    f.want("USER anonymous", 331)?;
    f.want("PASS x", 230)?;
    f.want("TYPE I", 200)?;
    let got = f.data("RETR f3.bin")?;
    expect(got == file("f3.bin"), "the download beside the idle sessions differs")?;
    let _ = f.cmd("QUIT");
    println!(
        "    | ftp: a download beside {} idle sessions of its address took {} ms",
        idle.len(),
        t0.elapsed().as_millis()
    );
    // The oldest were told why they went.
    let first = &mut idle[0];
    first.r.get_ref().set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    let (c, text) = first.reply().map_err(|e| format!("the oldest idle session: {e}"))?;
    expect(c == 421, format!("the oldest idle session was told {}", text.trim()))?;
    Ok(())
}

/// A client that reads its download at 1 byte a second: ftpd aborts the transfer
/// (426) once a 20 s window moves under 16 KiB, and the session goes on (its next
/// download works: the data port was given back).
fn ftp_slow_reader(port: u16) -> Result<(), String> {
    let mut f = Ftp::login(port)?;
    let p = f.epsv()?;
    let mut d = connect(p)?;
    d.set_read_timeout(Some(Duration::from_secs(2))).map_err(|e| e.to_string())?;
    f.want("RETR 16m.bin", 150)?;
    f.r.get_ref().set_read_timeout(Some(Duration::from_millis(100))).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let mut one = [0u8; 1];
    loop {
        // One byte a second.
        let _ = d.read(&mut one);
        match f.reply() {
            Ok((c, text)) => {
                expect(c == 426, format!("the slow download ended with {}", text.trim()))?;
                break;
            }
            Err(_) if t0.elapsed() < Duration::from_secs(90) => std::thread::sleep(Duration::from_millis(900)),
            Err(e) => return Err(format!("a reader at 1 byte a second held its transfer for 90 s: {e}")),
        }
    }
    println!("    | ftp: a reader at 1 byte/s aborted after {} s", t0.elapsed().as_secs());
    drop(d);
    f.r.get_ref().set_read_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
    let got = f.data("RETR small.txt")?;
    expect(got == SMALL, "the download after the aborted one differs")?;
    f.want("QUIT", 221).map(|_| ())
}

/// Sessions that reserve a data port and ask for a file but never connect to it: four
/// that then QUIT (answered at once: 221 within 5 s), four that just close their
/// control connection, four that leave their PASV unused and go quiet; a normal
/// download after each group (every data port must have come back), the last one once
/// the silent sessions' reservations have run out.
fn ftp_abandoned(port: u16) -> Result<(), String> {
    for round in 0..2 {
        let mut quitters = Vec::new();
        for _ in 0..4 {
            let mut f = Ftp::login(port)?;
            f.want("EPSV", 229)?;
            f.want("RETR 1m.bin", 150)?;
            quitters.push(f);
        }
        for (i, mut f) in quitters.into_iter().enumerate() {
            if round == 0 {
                f.r.get_ref().set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
                let t0 = Instant::now();
                let (c, text) = f.cmd("QUIT").map_err(|e| format!("session {i}: QUIT after an abandoned RETR: {e}"))?;
                expect(c == 221, format!("session {i}: QUIT after an abandoned RETR → {}", text.trim()))?;
                println!("    | ftp: QUIT after an abandoned RETR answered in {} ms", t0.elapsed().as_millis());
            } else {
                let _ = f.w.shutdown(Shutdown::Both);
            }
        }
        let got = ftp_fetch(port, "f1.bin").map_err(|e| {
            format!("a download after four abandoned sessions ({}): {e}", if round == 0 { "QUIT" } else { "closed" })
        })?;
        expect(got == file("f1.bin"), "the download after the abandoned sessions differs")?;
    }
    let mut idle = Vec::new();
    for _ in 0..4 {
        let mut f = Ftp::login(port)?;
        f.want("PASV", 227)?;
        idle.push(f);
    }
    // Their reservations run out (ftpd's DATA_WAIT_US, 20 s); a new client then gets a
    // port.
    let start = Instant::now();
    loop {
        let mut f = Ftp::login(port)?;
        let (c, text) = f.cmd("EPSV")?;
        if c == 229 {
            let _ = f.cmd("QUIT");
            break;
        }
        expect(c == 425, format!("EPSV while the ports are reserved → {}", text.trim()))?;
        let _ = f.cmd("QUIT");
        expect(start.elapsed() < Duration::from_secs(40), "the unused PASV reservations were never given back (40 s)")?;
        std::thread::sleep(Duration::from_secs(2));
    }
    drop(idle);
    let got = ftp_fetch(port, "f2.bin")?;
    expect(got == file("f2.bin"), "the download after the idle reservations differs")?;
    // Every data port comes back (ftpd sees the idle sessions' control connections
    // close when it next looks at them): four sessions then reserve one each at once.
    let start = Instant::now();
    loop {
        let mut four = Vec::new();
        let mut got = 0;
        for _ in 0..4 {
            let mut f = Ftp::login(port)?;
            if f.cmd("EPSV")?.0 == 229 {
                got += 1;
            }
            four.push(f);
        }
        for mut f in four {
            let _ = f.cmd("QUIT");
        }
        if got == 4 {
            return Ok(());
        }
        expect(
            start.elapsed() < Duration::from_secs(30),
            format!("only {got} of the 4 data ports came back after the abandoned sessions ended (30 s)"),
        )?;
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Download `path` from the FTP server on `port` (anonymous, EPSV): its bytes.
pub fn ftp_fetch(port: u16, path: &str) -> Result<Vec<u8>, String> {
    let mut f = Ftp::login(port)?;
    let got = f.data(&format!("RETR {path}"))?;
    let _ = f.cmd("QUIT");
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::connect;
    use std::net::TcpListener;

    /// Clients of different forwarded ports never share a local port (QEMU's user
    /// network would show the guest one connection for two): 600 connections open at
    /// once, to three listeners in turn, all from different ports.
    #[test]
    fn clients_of_different_ports_have_ports_of_their_own() {
        let ls: Vec<TcpListener> = (0..3).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
        let ports: Vec<u16> = ls.iter().map(|l| l.local_addr().unwrap().port()).collect();
        let mut open = Vec::new();
        let mut mine = std::collections::BTreeSet::new();
        for i in 0..600 {
            let s = connect(ports[i % 3]).unwrap();
            let (_, _) = ls[i % 3].accept().unwrap();
            let p = s.local_addr().unwrap().port();
            assert!(mine.insert(p), "connection {i} got local port {p} again");
            open.push(s);
        }
    }
}
