//! The HTTP/1.1 logic of Scion's `httpd` (RFC 9110/9112 subset: GET and HEAD of files
//! and directory listings), kept apart from sockets so that the host tests it: request
//! heads parsed with limits and every refusal an HTTP status, one byte range, paths
//! decoded and normalised, HTML escaped.
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
    pub const BAD_REQUEST: Status = Status(400);
    pub const NOT_FOUND: Status = Status(404);
    pub const METHOD_NOT_ALLOWED: Status = Status(405);
    pub const TIMEOUT: Status = Status(408);
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
            400 => "Bad Request",
            404 => "Not Found",
            405 => "Method Not Allowed",
            408 => "Request Timeout",
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

fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
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
    let mut parts: Vec<&str> = Vec::new();
    for seg in s.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    let mut out = String::new();
    for p in &parts {
        out.push('/');
        out.push_str(p);
    }
    if out.is_empty() {
        out.push('/');
    }
    Some((out, slash))
}

/// Parse the request head at the start of `buf` (bytes received so far).
pub fn parse(buf: &[u8]) -> Parse {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n");
    let Some(end) = end else {
        // Where does the request line end, if it does?
        let line_end = buf.windows(2).position(|w| w == b"\r\n");
        return match line_end {
            None if buf.len() > MAX_LINE => Parse::Refuse(Status::URI_TOO_LONG),
            _ if buf.len() > MAX_HEAD => Parse::Refuse(Status::HEADERS_TOO_LARGE),
            _ => Parse::More,
        };
    };
    let head_len = end + 4;
    if head_len > MAX_HEAD {
        return Parse::Refuse(Status::HEADERS_TOO_LARGE);
    }
    let Ok(head) = core::str::from_utf8(&buf[..end]) else { return Parse::Refuse(Status::BAD_REQUEST) };
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or("");
    if line.len() > MAX_LINE {
        return Parse::Refuse(Status::URI_TOO_LONG);
    }
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (words.next(), words.next(), words.next(), words.next()) else {
        return Parse::Refuse(Status::BAD_REQUEST);
    };
    if method.is_empty() || !method.bytes().all(is_tchar) || target.is_empty() {
        return Parse::Refuse(Status::BAD_REQUEST);
    }
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        v if v.starts_with("HTTP/") && v.len() == 8 => return Parse::Refuse(Status::VERSION),
        _ => return Parse::Refuse(Status::BAD_REQUEST),
    };
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" | "PUT" | "DELETE" | "PATCH" | "OPTIONS" | "CONNECT" | "TRACE" => return Parse::Refuse(Status::METHOD_NOT_ALLOWED),
        _ => return Parse::Refuse(Status::NOT_IMPLEMENTED),
    };
    let mut keep_alive = http11;
    let mut range = None;
    let mut host = false;
    let mut fields = 0;
    for l in lines {
        fields += 1;
        if fields > MAX_FIELDS {
            return Parse::Refuse(Status::HEADERS_TOO_LARGE);
        }
        let Some((name, value)) = l.split_once(':') else { return Parse::Refuse(Status::BAD_REQUEST) };
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Parse::Refuse(Status::BAD_REQUEST);
        }
        let value = value.trim_matches([' ', '\t']);
        if name.eq_ignore_ascii_case("host") {
            host = true;
        } else if name.eq_ignore_ascii_case("connection") {
            for t in value.split(',').map(str::trim) {
                if t.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if t.eq_ignore_ascii_case("keep-alive") {
                    keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case("range") {
            range = Some(String::from(value));
        } else if name.eq_ignore_ascii_case("content-length") {
            match value.parse::<u64>() {
                Ok(0) => {}
                Ok(_) => return Parse::Refuse(Status::TOO_LARGE),
                Err(_) => return Parse::Refuse(Status::BAD_REQUEST),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // A body this server would not read.
            return Parse::Refuse(Status::TOO_LARGE);
        }
    }
    if http11 && !host {
        return Parse::Refuse(Status::BAD_REQUEST);
    }
    let Some((path, slash)) = normalise(target) else { return Parse::Refuse(Status::BAD_REQUEST) };
    Parse::Done(Request { method, path, slash, http11, keep_alive, range, head_len })
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
    let num = |s: &str| if !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()) { s.parse::<u64>().ok() } else { None };
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
        let _ = writeln!(o, "<li><a href=\"{}\">{}{}</a>{}</li>", escape(&href), escape(name), if *dir { "/" } else { "" }, if *dir { String::new() } else { alloc::format!(" ({size} bytes)") });
    }
    o.push_str("</ul>\n</body></html>\n");
    o
}

/// A response head.
pub fn head(status: Status, fields: &[(&str, &str)], length: u64, keep_alive: bool) -> String {
    let mut o = String::new();
    let _ = write!(o, "HTTP/1.1 {} {}\r\nServer: Scion-httpd\r\nContent-Length: {}\r\n", status.0, status.reason(), length);
    for (k, v) in fields {
        let _ = write!(o, "{k}: {v}\r\n");
    }
    o.push_str(if keep_alive { "Connection: keep-alive\r\n\r\n" } else { "Connection: close\r\n\r\n" });
    o
}

/// The Content-Type for a file name.
pub fn content_type(name: &str) -> &'static str {
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    match ext.to_ascii_lowercase().as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "txt" | "md" | "toml" | "rs" | "c" | "h" => "text/plain; charset=utf-8",
        "css" => "text/css",
        "js" => "text/javascript",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(s: &str) -> Parse {
        parse(s.as_bytes())
    }

    #[test]
    fn get_and_head() {
        let Parse::Done(r) = req("GET /docs/a%20b.md?x=1 HTTP/1.1\r\nHost: x\r\n\r\n") else { panic!() };
        assert_eq!((r.method, r.path.as_str(), r.keep_alive, r.http11), (Method::Get, "/docs/a b.md", true, true));
        let Parse::Done(r) = req("HEAD / HTTP/1.0\r\n\r\n") else { panic!() };
        assert_eq!((r.method, r.path.as_str(), r.keep_alive), (Method::Head, "/", false));
        let Parse::Done(r) = req("GET /d/ HTTP/1.0\r\nConnection: keep-alive\r\nRange: bytes=1-2\r\n\r\nrest") else { panic!() };
        assert!(r.keep_alive && r.slash);
        assert_eq!(r.range.as_deref(), Some("bytes=1-2"));
        assert_eq!(r.head_len, "GET /d/ HTTP/1.0\r\nConnection: keep-alive\r\nRange: bytes=1-2\r\n\r\n".len());
        let Parse::Done(r) = req("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") else { panic!() };
        assert!(!r.keep_alive);
    }

    #[test]
    fn incomplete_and_limits() {
        assert_eq!(req("GET / HTTP/1.1\r\nHost: x\r\n"), Parse::More);
        assert_eq!(req(""), Parse::More);
        let long = alloc::format!("GET /{} HTTP/1.1", "a".repeat(MAX_LINE + 10));
        assert_eq!(req(&long), Parse::Refuse(Status::URI_TOO_LONG));
        let endless = alloc::format!("GET / HTTP/1.1\r\n{}", "X-A: b\r\n".repeat(MAX_HEAD / 8 + 1));
        assert_eq!(req(&endless), Parse::Refuse(Status::HEADERS_TOO_LARGE));
        let many = alloc::format!("GET / HTTP/1.1\r\nHost: x\r\n{}\r\n", "A: b\r\n".repeat(MAX_FIELDS + 1));
        assert_eq!(req(&many), Parse::Refuse(Status::HEADERS_TOO_LARGE));
    }

    #[test]
    fn refusals() {
        assert_eq!(req("POST / HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Refuse(Status::METHOD_NOT_ALLOWED));
        assert_eq!(req("BREW / HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Refuse(Status::NOT_IMPLEMENTED));
        assert_eq!(req("GET / HTTP/2.0\r\nHost: x\r\n\r\n"), Parse::Refuse(Status::VERSION));
        assert_eq!(req("GET / HTTP/1.1\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST), "HTTP/1.1 without Host");
        assert_eq!(req("GET /\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
        assert_eq!(req("GET  / HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
        assert_eq!(req("GET x HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
        assert_eq!(req("GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
        assert_eq!(req("GET /%00 HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
        assert_eq!(req("GET /../etc HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
        assert_eq!(req("GET / HTTP/1.1\r\nHost x\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
        assert_eq!(req("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"), Parse::Refuse(Status::TOO_LARGE));
        assert_eq!(req("GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"), Parse::Refuse(Status::TOO_LARGE));
        assert_eq!(parse(b"GET /\xff HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    }

    #[test]
    fn paths() {
        assert_eq!(normalise("/a/./b//c/../d"), Some(("/a/b/d".into(), false)));
        assert_eq!(normalise("/"), Some(("/".into(), true)));
        assert_eq!(normalise("/a/.."), Some(("/".into(), false)));
        assert_eq!(normalise("/.."), None);
        assert_eq!(normalise("http://x/"), None);
        assert_eq!(normalise("/%2e%2e/x"), None);
    }

    #[test]
    fn ranges() {
        assert_eq!(range(None, 100), Range::Whole);
        assert_eq!(range(Some("bytes=0-9"), 100), Range::Part(0, 9));
        assert_eq!(range(Some("bytes=90-"), 100), Range::Part(90, 99));
        assert_eq!(range(Some("bytes=90-200"), 100), Range::Part(90, 99));
        assert_eq!(range(Some("bytes=-10"), 100), Range::Part(90, 99));
        assert_eq!(range(Some("bytes=-1000"), 100), Range::Part(0, 99));
        assert_eq!(range(Some("bytes=100-"), 100), Range::Unsatisfiable);
        assert_eq!(range(Some("bytes=-0"), 100), Range::Unsatisfiable);
        assert_eq!(range(Some("bytes=0-0"), 0), Range::Unsatisfiable);
        assert_eq!(range(Some("bytes=5-1"), 100), Range::Whole);
        assert_eq!(range(Some("bytes=0-1,5-6"), 100), Range::Whole);
        assert_eq!(range(Some("items=0-1"), 100), Range::Whole);
        assert_eq!(range(Some("bytes=x-1"), 100), Range::Whole);
        assert_eq!(range(Some("bytes=99999999999999999999-"), 100), Range::Whole);
    }

    #[test]
    fn html() {
        let l = listing("/d<", &[(true, 0, "sub"), (false, 12, "a&b.txt")]);
        assert!(l.contains("Index of /d&lt;"));
        assert!(l.contains("<a href=\"/d&lt;/sub/\">sub/</a>"));
        assert!(l.contains("<a href=\"/d&lt;/a%26b.txt\">a&amp;b.txt</a> (12 bytes)"));
        assert!(l.contains("<a href=\"/\">..</a>"));
        assert_eq!(encode_path("/a b/c&d"), "/a%20b/c%26d");
        let h = head(Status::NOT_FOUND, &[("Content-Type", "text/html")], 5, false);
        assert_eq!(h, "HTTP/1.1 404 Not Found\r\nServer: Scion-httpd\r\nContent-Length: 5\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n");
    }
}
