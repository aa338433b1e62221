//! The HTTP/1.1 logic of Scion's `httpd` (RFC 9110/9112 subset: GET and HEAD of files
//! and directory listings), kept apart from sockets so that the host tests it: request
//! heads parsed by `httparse` (the fuzzed parser the Rust ecosystem uses) inside
//! Scion's own limits and refusals (every refusal an HTTP status), the request target
//! in origin or absolute form, one byte range and its `If-Range`, paths decoded and
//! normalised, HTML escaped, and the `Date` field's IMF-fixdate.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;

/// The longest request line, and the longest head (request line and headers).
pub const MAX_LINE: usize = 8 * 1024;
pub const MAX_HEAD: usize = 16 * 1024;
/// At most this many header fields.
pub const MAX_FIELDS: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    /// Decoded, normalised: starts with '/', no "." or ".." segments, no empty ones.
    pub path: String,
    /// The target ended in '/'.
    pub slash: bool,
    /// HTTP/1.1 (else 1.0).
    pub http11: bool,
    pub keep_alive: bool,
    pub range: Option<String>,
    /// `If-Range` (a Range applies only when it matches the representation).
    pub if_range: Option<String>,
    /// `If-None-Match` and `If-Match` (entity-tag lists, or `*`).
    pub if_none_match: Option<String>,
    pub if_match: Option<String>,
    /// Bytes of the head, including the blank line.
    pub head_len: usize,
}

/// A status the server answers with, and its reason phrase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status(pub u16);

impl Status {
    pub const OK: Status = Status(200);
    pub const PARTIAL: Status = Status(206);
    pub const MOVED: Status = Status(301);
    pub const NOT_MODIFIED: Status = Status(304);
    pub const BAD_REQUEST: Status = Status(400);
    pub const NOT_FOUND: Status = Status(404);
    pub const METHOD_NOT_ALLOWED: Status = Status(405);
    pub const TIMEOUT: Status = Status(408);
    pub const PRECONDITION_FAILED: Status = Status(412);
    pub const TOO_LARGE: Status = Status(413);
    pub const URI_TOO_LONG: Status = Status(414);
    pub const RANGE_NOT_SATISFIABLE: Status = Status(416);
    pub const HEADERS_TOO_LARGE: Status = Status(431);
    pub const SERVER_ERROR: Status = Status(500);
    pub const NOT_IMPLEMENTED: Status = Status(501);
    pub const UNAVAILABLE: Status = Status(503);
    pub const VERSION: Status = Status(505);

    pub fn reason(self) -> &'static str {
        match self.0 {
            200 => "OK",
            206 => "Partial Content",
            301 => "Moved Permanently",
            304 => "Not Modified",
            400 => "Bad Request",
            404 => "Not Found",
            405 => "Method Not Allowed",
            408 => "Request Timeout",
            412 => "Precondition Failed",
            413 => "Content Too Large",
            414 => "URI Too Long",
            416 => "Range Not Satisfiable",
            431 => "Request Header Fields Too Large",
            500 => "Internal Server Error",
            501 => "Not Implemented",
            503 => "Service Unavailable",
            505 => "HTTP Version Not Supported",
            _ => "Unknown",
        }
    }
}

/// What the bytes received so far say.
#[derive(Debug, PartialEq, Eq)]
pub enum Parse {
    /// The head is not complete yet (and within the limits).
    More,
    Done(Request),
    /// Refuse with this status (and close the connection).
    Refuse(Status),
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Percent-decode and normalise a request target's path: None when it is not a path,
/// decodes to something other than UTF-8, contains NUL, or climbs above the root.
pub fn normalise(target: &str) -> Option<(String, bool)> {
    let path = target.split(['?', '#']).next()?;
    if !path.starts_with('/') {
        return None;
    }
    let b = path.as_bytes();
    let mut raw = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let v = (hex(*b.get(i + 1)?)? << 4) | hex(*b.get(i + 2)?)?;
            raw.push(v);
            i += 3;
        } else {
            raw.push(b[i]);
            i += 1;
        }
    }
    if raw.contains(&0) {
        return None;
    }
    let s = String::from_utf8(raw).ok()?;
    let slash = s.ends_with('/');
    Some((pathnorm::normalise(s.split('/'))?, slash))
}

/// Where the head in `buf` ends (just past its blank line: CR LF CR LF, or bare LFs,
/// which RFC 9112 §2.2 lets a recipient take as line ends), looking from `from` on
/// (bytes before it were looked at already: a head that comes a byte at a time is
/// scanned once, not once per byte).
pub fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let start = from.saturating_sub(3).min(buf.len());
    let mut i = start;
    while i < buf.len() {
        if buf[i] == b'\n' {
            if buf.get(i + 1) == Some(&b'\n') {
                return Some(i + 2);
            }
            if buf.get(i + 1) == Some(&b'\r') && buf.get(i + 2) == Some(&b'\n') {
                return Some(i + 3);
            }
        }
        i += 1;
    }
    None
}

/// Is `v` a Host field's value (RFC 9110 §7.2: uri-host [":" port]; empty allowed)?
fn valid_host(v: &[u8]) -> bool {
    let (host, port) = if v.first() == Some(&b'[') {
        let Some(close) = v.iter().position(|b| *b == b']') else { return false };
        let inner = &v[1..close];
        if inner.is_empty() || !inner.iter().all(|b| b.is_ascii_hexdigit() || b":.vV".contains(b)) {
            return false;
        }
        match &v[close + 1..] {
            [] => (&v[..0], None),
            [b':', p @ ..] => (&v[..0], Some(p)),
            _ => return false,
        }
    } else {
        match v.iter().rposition(|b| *b == b':') {
            Some(i) => (&v[..i], Some(&v[i + 1..])),
            None => (v, None),
        }
    };
    // reg-name: unreserved / pct-encoded / sub-delims.
    let reg = host.iter().all(|b| b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=".contains(b));
    reg && port.is_none_or(|p| p.iter().all(u8::is_ascii_digit))
}

/// The request target as a path: origin form as it is; absolute form
/// (`http://host[:port]/path?q`, RFC 9112 §3.2.2: a server MUST accept it) by its
/// path (and its authority, which then stands for Host). None: neither.
fn target_path(target: &str) -> Option<(&str, Option<&str>)> {
    if target.starts_with('/') {
        return Some((target, None));
    }
    let scheme_end = target.find("://")?;
    let scheme = &target[..scheme_end];
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    let rest = &target[scheme_end + 3..];
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(auth_end);
    if authority.contains('@') {
        // userinfo is deprecated for http(s) and not accepted (RFC 9110 §4.2.4).
        return None;
    }
    let path = if path.starts_with('/') { path } else { "/" };
    Some((path, Some(authority)))
}

/// Parse the request head at the start of `buf` (bytes received so far).
pub fn parse(buf: &[u8]) -> Parse {
    let Some(end) = head_end(buf, 0) else {
        return if !buf[..buf.len().min(MAX_LINE + 1)].contains(&b'\n') && buf.len() > MAX_LINE {
            Parse::Refuse(Status::URI_TOO_LONG)
        } else if buf.len() > MAX_HEAD {
            Parse::Refuse(Status::HEADERS_TOO_LARGE)
        } else {
            Parse::More
        };
    };
    if end > MAX_HEAD {
        return Parse::Refuse(Status::HEADERS_TOO_LARGE);
    }
    let head = &buf[..end];
    let line_len = head.iter().position(|b| *b == b'\n').unwrap_or(head.len());
    if line_len > MAX_LINE {
        return Parse::Refuse(Status::URI_TOO_LONG);
    }
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut req = httparse::Request::new(&mut fields);
    match req.parse(head) {
        Ok(httparse::Status::Complete(n)) if n == end => {}
        Ok(_) => return Parse::Refuse(Status::BAD_REQUEST),
        Err(httparse::Error::TooManyHeaders) => return Parse::Refuse(Status::HEADERS_TOO_LARGE),
        Err(httparse::Error::Version) => {
            // "HTTP/x.y" of another version: 505; anything else is not HTTP.
            let line = &head[..line_len];
            let tok = line.rsplit(|b| *b == b' ').next().unwrap_or(b"");
            let v = tok.strip_suffix(b"\r").unwrap_or(tok);
            let other = v.len() == 8
                && v.starts_with(b"HTTP/")
                && v[5].is_ascii_digit()
                && v[6] == b'.'
                && v[7].is_ascii_digit();
            if other && v[5] == b'1' {
                // HTTP/1.2 … 1.9: a later minor version of 1.x is answered as 1.1, the
                // highest this server speaks (RFC 9112 §2.3, RFC 9110 §2.5); the
                // request is read as 1.1 (Host required).
                let at = line_len - tok.len();
                let mut as11 = head.to_vec();
                as11[at..at + 8].copy_from_slice(b"HTTP/1.1");
                return parse(&as11);
            }
            return Parse::Refuse(if other { Status::VERSION } else { Status::BAD_REQUEST });
        }
        Err(_) => return Parse::Refuse(Status::BAD_REQUEST),
    }
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Parse::Refuse(Status::BAD_REQUEST);
    };
    let http11 = version == 1;
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" | "PUT" | "DELETE" | "PATCH" | "OPTIONS" | "CONNECT" | "TRACE" => {
            return Parse::Refuse(Status::METHOD_NOT_ALLOWED)
        }
        _ => return Parse::Refuse(Status::NOT_IMPLEMENTED),
    };
    let Some((path, authority)) = target_path(target) else { return Parse::Refuse(Status::BAD_REQUEST) };
    let mut keep_alive = http11;
    let (mut range, mut if_range, mut if_none_match, mut if_match) = (None, None, None, None);
    let mut hosts = 0;
    let mut length: Option<u64> = None;
    for f in req.headers.iter() {
        let (name, value) = (f.name, f.value);
        let text = || core::str::from_utf8(value).ok().map(|v| String::from(v.trim_matches([' ', '\t'])));
        if name.eq_ignore_ascii_case("host") {
            hosts += 1;
            if !valid_host(value) {
                return Parse::Refuse(Status::BAD_REQUEST);
            }
        } else if name.eq_ignore_ascii_case("connection") {
            let Some(v) = text() else { return Parse::Refuse(Status::BAD_REQUEST) };
            for t in v.split(',').map(str::trim) {
                if t.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if t.eq_ignore_ascii_case("keep-alive") {
                    keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case("range") {
            if range.is_some() {
                // Two Range fields: not one range this server can honour.
                return Parse::Refuse(Status::BAD_REQUEST);
            }
            range = text();
        } else if name.eq_ignore_ascii_case("if-range") {
            if_range = text();
        } else if name.eq_ignore_ascii_case("if-none-match") {
            if_none_match = text();
        } else if name.eq_ignore_ascii_case("if-match") {
            if_match = text();
        } else if name.eq_ignore_ascii_case("content-length") {
            // RFC 9112 §6.3: several values must agree (a list or repeated fields).
            let Some(v) = text() else { return Parse::Refuse(Status::BAD_REQUEST) };
            for n in v.split(',').map(str::trim) {
                if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                    return Parse::Refuse(Status::BAD_REQUEST);
                }
                let Ok(n) = n.parse::<u64>() else { return Parse::Refuse(Status::TOO_LARGE) };
                if length.is_some_and(|l| l != n) {
                    return Parse::Refuse(Status::BAD_REQUEST);
                }
                length = Some(n);
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // A body this server would not read (with Content-Length too: a request
            // smuggling attempt, RFC 9112 §6.1).
            return Parse::Refuse(
                if length.is_some() || req.headers.iter().any(|h| h.name.eq_ignore_ascii_case("content-length")) {
                    Status::BAD_REQUEST
                } else {
                    Status::TOO_LARGE
                },
            );
        }
    }
    if length.is_some_and(|l| l > 0) {
        return Parse::Refuse(Status::TOO_LARGE);
    }
    // RFC 9112 §3.2: no Host in HTTP/1.1, or more than one, is 400. In absolute form the
    // target's authority is the host (and must be one).
    if hosts > 1 || (http11 && hosts == 0) || authority.is_some_and(|a| a.is_empty() || !valid_host(a.as_bytes())) {
        return Parse::Refuse(Status::BAD_REQUEST);
    }
    let Some((path, slash)) = normalise(path) else { return Parse::Refuse(Status::BAD_REQUEST) };
    Parse::Done(Request {
        method,
        path,
        slash,
        http11,
        keep_alive,
        range,
        if_range,
        if_none_match,
        if_match,
        head_len: end,
    })
}

/// Whether a file may answer `req`: a target that ends in '/' names a directory, so a
/// file there is 404, as nginx answers (`/README.md/` does not serve `/README.md`).
/// Directories are the caller's (a listing, or 301 to the name with a slash).
pub fn file_target(req: &Request) -> Result<(), Status> {
    if req.slash {
        Err(Status::NOT_FOUND)
    } else {
        Ok(())
    }
}

/// What the conditional fields ask of a representation whose entity tag is `etag`
/// (None: this server has no validator for it, as for files today: baiofs keeps no
/// modification stamp), RFC 9110 §13.2.2's order.
#[derive(Debug, PartialEq, Eq)]
pub enum Condition {
    /// Answer as asked (with the Range, if any, still to apply).
    Go,
    /// Answer the whole representation: a Range is ignored (its If-Range does not match).
    Whole,
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

/// Does an entity-tag list (or `*`) name `etag`? Weak comparison for If-None-Match,
/// strong for If-Match.
fn tag_in(list: &str, etag: Option<&str>, weak: bool) -> bool {
    if list.trim() == "*" {
        return etag.is_some();
    }
    let Some(etag) = etag else { return false };
    let strip = |t: &str| -> Option<(bool, String)> {
        let t = t.trim();
        let (w, t) = match t.strip_prefix("W/") {
            Some(r) => (true, r),
            None => (false, t),
        };
        Some((w, String::from(t)))
    };
    let Some((ew, e)) = strip(etag) else { return false };
    list.split(',').filter_map(strip).any(|(w, t)| t == e && (weak || (!w && !ew)))
}

/// The conditional fields of `req` against a representation with entity tag `etag`.
pub fn condition(req: &Request, etag: Option<&str>) -> Condition {
    if let Some(m) = &req.if_match {
        if !tag_in(m, etag, false) {
            return Condition::Failed;
        }
    }
    if let Some(m) = &req.if_none_match {
        if tag_in(m, etag, true) {
            return Condition::NotModified;
        }
    }
    if req.range.is_some() {
        if let Some(ir) = &req.if_range {
            // An entity tag must match strongly; a date can only match a
            // Last-Modified, which this server does not send: the Range is ignored.
            let ir = ir.trim();
            let matches = ir.starts_with('"') && etag.is_some_and(|e| !e.starts_with("W/") && e == ir);
            if !matches {
                return Condition::Whole;
            }
        }
    }
    Condition::Go
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// An IMF-fixdate (RFC 9110 §5.6.7), the form of `Date`: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn http_date(unix: u64) -> String {
    let days = (unix / 86400) as i64;
    let secs = unix % 86400;
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    alloc::format!(
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
        DAYS[days.rem_euclid(7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// What a Range header asks of a file of `size` bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Range {
    /// The whole file (no header, or one this server ignores: several ranges, other units).
    Whole,
    /// Bytes first..=last.
    Part(u64, u64),
    Unsatisfiable,
}

/// RFC 9110 §14.1.2, one range: `bytes=a-b`, `bytes=a-`, `bytes=-n`.
pub fn range(header: Option<&str>, size: u64) -> Range {
    let Some(h) = header else { return Range::Whole };
    let Some(spec) = h.trim().strip_prefix("bytes=") else { return Range::Whole };
    if spec.contains(',') {
        return Range::Whole;
    }
    let Some((a, b)) = spec.trim().split_once('-') else { return Range::Whole };
    let num =
        |s: &str| if !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()) { s.parse::<u64>().ok() } else { None };
    match (a.is_empty(), b.is_empty()) {
        (true, true) => Range::Whole,
        (true, false) => match num(b) {
            Some(0) => Range::Unsatisfiable,
            Some(n) if size > 0 => Range::Part(size.saturating_sub(n), size - 1),
            Some(_) => Range::Unsatisfiable,
            None => Range::Whole,
        },
        (false, _) => {
            let Some(first) = num(a) else { return Range::Whole };
            let last = if b.is_empty() {
                u64::MAX
            } else {
                match num(b) {
                    Some(l) if l >= first => l,
                    _ => return Range::Whole,
                }
            };
            if first >= size {
                Range::Unsatisfiable
            } else {
                Range::Part(first, last.min(size - 1))
            }
        }
    }
}

/// `s` with &, <, >, " and ' escaped for HTML.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// `s` percent-encoded for a URL path segment.
pub fn encode(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            o.push(b as char);
        } else {
            let _ = write!(o, "%{:02X}", b);
        }
    }
    o
}

/// A path percent-encoded segment by segment (the slashes stay).
pub fn encode_path(path: &str) -> String {
    let segs: Vec<String> = path.split('/').map(encode).collect();
    segs.join("/")
}

/// An HTML page listing directory `path`; `entries` are (is directory, size, name).
pub fn listing(path: &str, entries: &[(bool, u64, &str)]) -> String {
    let mut o = String::new();
    let title = escape(path);
    let _ = write!(o, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of {title}</title></head>\n<body><h1>Index of {title}</h1>\n<ul>\n");
    let base = if path == "/" { String::new() } else { String::from(path) };
    if path != "/" {
        let parent = path.rsplit_once('/').map_or("/", |(p, _)| if p.is_empty() { "/" } else { p });
        let _ = writeln!(o, "<li><a href=\"{}\">..</a></li>", escape(parent));
    }
    for (dir, size, name) in entries {
        let href = alloc::format!("{}/{}{}", base, encode(name), if *dir { "/" } else { "" });
        let _ = writeln!(
            o,
            "<li><a href=\"{}\">{}{}</a>{}</li>",
            escape(&href),
            escape(name),
            if *dir { "/" } else { "" },
            if *dir { String::new() } else { alloc::format!(" ({size} bytes)") }
        );
    }
    o.push_str("</ul>\n</body></html>\n");
    o
}

/// A response head (`date`: the `Date` field's value, `http_date`; empty: none, for a
/// server without a clock, RFC 9110 §6.6.1).
pub fn head(status: Status, date: &str, fields: &[(&str, &str)], length: u64, keep_alive: bool) -> String {
    let mut o = Vec::new();
    head_into(&mut o, status, date, fields, length, keep_alive);
    String::from_utf8(o).unwrap_or_default()
}

/// `head`, appended to `o` (a buffer kept between answers: no allocation once it has
/// grown to an answer's size).
pub fn head_into(o: &mut Vec<u8>, status: Status, date: &str, fields: &[(&str, &str)], length: u64, keep_alive: bool) {
    let mut num = [0u8; 20];
    o.extend_from_slice(b"HTTP/1.1 ");
    o.extend_from_slice(decimal(status.0 as u64, &mut num));
    o.push(b' ');
    o.extend_from_slice(status.reason().as_bytes());
    o.extend_from_slice(b"\r\nServer: Scion-httpd\r\n");
    if !date.is_empty() {
        o.extend_from_slice(b"Date: ");
        o.extend_from_slice(date.as_bytes());
        o.extend_from_slice(b"\r\n");
    }
    o.extend_from_slice(b"Content-Length: ");
    o.extend_from_slice(decimal(length, &mut num));
    o.extend_from_slice(b"\r\n");
    for (k, v) in fields {
        o.extend_from_slice(k.as_bytes());
        o.extend_from_slice(b": ");
        o.extend_from_slice(v.as_bytes());
        o.extend_from_slice(b"\r\n");
    }
    o.extend_from_slice(if keep_alive { b"Connection: keep-alive\r\n\r\n" } else { b"Connection: close\r\n\r\n" });
}

/// `n` in decimal, in `buf`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// The Content-Type for a file name.
pub fn content_type(name: &str) -> &'static str {
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    // (No lowercase copy: a request's answer allocates as little as it can.)
    let types: [(&[&str], &'static str); 7] = [
        (&["html", "htm"], "text/html; charset=utf-8"),
        (&["txt", "md", "toml", "rs", "c", "h"], "text/plain; charset=utf-8"),
        (&["css"], "text/css"),
        (&["js"], "text/javascript"),
        (&["json"], "application/json"),
        (&["svg"], "image/svg+xml"),
        (&["png"], "image/png"),
    ];
    types
        .iter()
        .find(|(exts, _)| exts.iter().any(|e| e.eq_ignore_ascii_case(ext)))
        .map_or("application/octet-stream", |(_, t)| t)
}

#[cfg(test)]
mod tests;
