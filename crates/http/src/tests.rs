//! The HTTP parsing host tests: GET and HEAD, incomplete requests and limits, refusals,
//! conformance, conditions, dates, paths, ranges and the directory page.

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
    let Parse::Done(r) = req("GET /d/ HTTP/1.0\r\nConnection: keep-alive\r\nRange: bytes=1-2\r\n\r\nrest") else {
        panic!()
    };
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
    assert_eq!(
        req("GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"),
        Parse::Refuse(Status::TOO_LARGE)
    );
    assert_eq!(parse(b"GET /\xff HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
}

/// The HTTP conformance points (each failed with the hand-written parser).
#[test]
fn conformance() {
    // RFC 9112 §3.2.2: absolute form MUST be accepted; its authority is the host.
    let Parse::Done(r) = req("GET http://scion:8080/docs/a.md?x HTTP/1.1\r\nHost: other\r\n\r\n") else {
        panic!("absolute form")
    };
    assert_eq!(r.path, "/docs/a.md");
    let Parse::Done(r) = req("GET HTTP://scion HTTP/1.1\r\nHost: scion\r\n\r\n") else {
        panic!("absolute form, no path")
    };
    assert_eq!(r.path, "/");
    assert_eq!(
        req("GET http:///x HTTP/1.1\r\nHost: scion\r\n\r\n"),
        Parse::Refuse(Status::BAD_REQUEST),
        "empty authority"
    );
    assert_eq!(req("GET ftp://scion/x HTTP/1.1\r\nHost: scion\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    assert_eq!(
        req("GET http://u@scion/x HTTP/1.1\r\nHost: scion\r\n\r\n"),
        Parse::Refuse(Status::BAD_REQUEST),
        "userinfo"
    );
    assert_eq!(req("GET * HTTP/1.1\r\nHost: scion\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    // §3.2: two Host fields, or an invalid one, MUST be 400.
    assert_eq!(req("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    assert_eq!(req("GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    assert_eq!(req("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    assert_eq!(req("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    assert_eq!(req("GET / HTTP/1.1\r\nHost: a:x\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    assert!(matches!(req("GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n"), Parse::Done(_)));
    assert!(matches!(req("GET / HTTP/1.1\r\nHost: \r\n\r\n"), Parse::Done(_)), "an empty Host is allowed");
    // §2.2: bare LF line ends are taken.
    let Parse::Done(r) = req("GET /a HTTP/1.1\nHost: x\n\n") else { panic!("bare LF") };
    assert_eq!((r.path.as_str(), r.head_len), ("/a", 25));
    let Parse::Done(r) = req("GET /a HTTP/1.1\r\nHost: x\n\r\nnext") else { panic!("mixed") };
    assert_eq!(r.head_len, 27);
    // §5.5: NUL and other controls in a field value are refused.
    assert_eq!(parse(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    assert_eq!(parse(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    assert_eq!(parse(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x7fb\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    assert_eq!(
        parse(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n"),
        Parse::Refuse(Status::BAD_REQUEST),
        "a lone CR"
    );
    assert!(
        matches!(parse(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\tb \xc3\xa9\r\n\r\n"), Parse::Done(_)),
        "HTAB and obs-text are allowed"
    );
    // §5.1: no whitespace between a field name and its colon; §5.2: no obs-fold.
    assert_eq!(req("GET / HTTP/1.1\r\nHost : x\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    assert_eq!(req("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    // §6.3: Content-Length values must agree; with Transfer-Encoding it is 400.
    assert_eq!(
        req("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 1\r\n\r\n"),
        Parse::Refuse(Status::BAD_REQUEST)
    );
    assert!(matches!(req("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0, 0\r\n\r\n"), Parse::Done(_)));
    assert_eq!(
        req("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n"),
        Parse::Refuse(Status::BAD_REQUEST)
    );
    assert_eq!(req("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: +0\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    assert_eq!(
        req("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
        Parse::Refuse(Status::TOO_LARGE)
    );
    assert_eq!(
        req("GET / HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\nRange: bytes=2-3\r\n\r\n"),
        Parse::Refuse(Status::BAD_REQUEST)
    );
}

#[test]
fn conditions() {
    let with = |f: &str| {
        let Parse::Done(r) = req(&alloc::format!("GET /f HTTP/1.1\r\nHost: x\r\n{f}\r\n")) else { panic!("{f}") };
        r
    };
    // If-Range that cannot match (no validator, a date, a weak tag): the whole 200.
    assert_eq!(condition(&with("Range: bytes=0-9\r\nIf-Range: \"abc\"\r\n"), None), Condition::Whole);
    assert_eq!(
        condition(&with("Range: bytes=0-9\r\nIf-Range: Sun, 06 Nov 1994 08:49:37 GMT\r\n"), Some("\"abc\"")),
        Condition::Whole
    );
    assert_eq!(condition(&with("Range: bytes=0-9\r\nIf-Range: W/\"abc\"\r\n"), Some("W/\"abc\"")), Condition::Whole);
    assert_eq!(condition(&with("Range: bytes=0-9\r\nIf-Range: \"abc\"\r\n"), Some("\"abc\"")), Condition::Go);
    assert_eq!(condition(&with("Range: bytes=0-9\r\n"), None), Condition::Go);
    assert_eq!(condition(&with("If-Range: \"x\"\r\n"), None), Condition::Go, "If-Range without Range is nothing");
    assert_eq!(condition(&with("If-None-Match: \"a\", W/\"b\"\r\n"), Some("\"b\"")), Condition::NotModified);
    assert_eq!(condition(&with("If-None-Match: *\r\n"), None), Condition::Go);
    assert_eq!(condition(&with("If-Match: *\r\n"), None), Condition::Failed);
    assert_eq!(
        condition(&with("If-Match: W/\"a\"\r\n"), Some("W/\"a\"")),
        Condition::Failed,
        "If-Match compares strongly"
    );
    assert_eq!(condition(&with("If-Match: \"a\"\r\n"), Some("\"a\"")), Condition::Go);
}

#[test]
fn dates_and_head_ends() {
    assert_eq!(http_date(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
    assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    assert_eq!(http_date(951782400), "Tue, 29 Feb 2000 00:00:00 GMT");
    assert_eq!(http_date(4107542399), "Sun, 28 Feb 2100 23:59:59 GMT", "2100 is no leap year");
    assert_eq!(days_from_civil(1994, 11, 6) * 86400 + 8 * 3600 + 49 * 60 + 37, 784111777);
    assert_eq!(days_from_civil(2000, 3, 1), 11017);
    for d in [0u64, 59, 60, 365, 10_000, 20_000, 50_000] {
        let s = http_date(d * 86400);
        let parts: Vec<&str> = s.split(' ').collect();
        let m = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
            .iter()
            .position(|x| *x == parts[2])
            .unwrap() as u32
            + 1;
        assert_eq!(days_from_civil(parts[3].parse().unwrap(), m, parts[1].parse().unwrap()), d as i64, "{s}");
    }
    assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\n", 0), Some(18));
    assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r", 0), None);
    // Scanning on from where the last look stopped finds an end split across reads.
    let h = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(head_end(h, h.len() - 1), Some(h.len()));
    assert_eq!(head_end(b"x\n\n", 2), Some(3));
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
    let h = head(Status::NOT_FOUND, "", &[("Content-Type", "text/html")], 5, false);
    assert_eq!(h, "HTTP/1.1 404 Not Found\r\nServer: Scion-httpd\r\nContent-Length: 5\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n");
    let h = head(Status::OK, "Sun, 06 Nov 1994 08:49:37 GMT", &[], 0, true);
    assert!(h.starts_with(
        "HTTP/1.1 200 OK\r\nServer: Scion-httpd\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 0\r\n"
    ));
    // Into a buffer kept between answers: appended, the same bytes; large lengths whole.
    let mut o = b"body of the last".to_vec();
    o.clear();
    head_into(&mut o, Status::PARTIAL, "", &[("Content-Range", "bytes 0-1/18446744073709551615")], u64::MAX, true);
    assert_eq!(
        o,
        b"HTTP/1.1 206 Partial Content\r\nServer: Scion-httpd\r\nContent-Length: 18446744073709551615\r\nContent-Range: bytes 0-1/18446744073709551615\r\nConnection: keep-alive\r\n\r\n"
    );
    head_into(&mut o, Status::OK, "", &[], 0, false);
    assert!(o.ends_with(
        b"\r\n\r\nHTTP/1.1 200 OK\r\nServer: Scion-httpd\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    ));
    assert_eq!(content_type("/A.HTML"), "text/html; charset=utf-8");
    assert_eq!(content_type("/x.Md"), "text/plain; charset=utf-8");
    assert_eq!(content_type("/noext"), "application/octet-stream");
    assert_eq!(content_type("/a.tar.gz"), "application/octet-stream");
}

#[test]
fn a_later_1x_minor_is_answered_as_11() {
    // RFC 9112 §2.3: a 1.x request with a higher minor version is answered as 1.1.
    for v in ["HTTP/1.2", "HTTP/1.9"] {
        let Parse::Done(r) = req(&"GET /a HTTP/1.x\r\nHost: x\r\n\r\nnext".replace("HTTP/1.x", v)) else {
            panic!("{v} refused")
        };
        assert!(r.http11, "{v}");
        assert_eq!(r.path, "/a");
        assert_eq!(r.head_len, "GET /a HTTP/1.2\r\nHost: x\r\n\r\n".len(), "{v}: the head, not what follows");
    }
    assert_eq!(req("GET / HTTP/1.2\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST), "as 1.1: Host required");
    assert_eq!(req("GET / HTTP/2.0\r\nHost: x\r\n\r\n"), Parse::Refuse(Status::VERSION));
    assert_eq!(req("GET / HTTP/3.1\r\nHost: x\r\n\r\n"), Parse::Refuse(Status::VERSION));
    assert_eq!(req("GET / HTTP/1.10\r\nHost: x\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
    assert_eq!(req("GET / HTTP/1.x\r\nHost: x\r\n\r\n"), Parse::Refuse(Status::BAD_REQUEST));
}

#[test]
fn a_trailing_slash_on_a_file_is_404() {
    let Parse::Done(r) = req("GET /README.md/ HTTP/1.1\r\nHost: x\r\n\r\n") else { panic!() };
    assert_eq!(r.path, "/README.md");
    assert_eq!(file_target(&r), Err(Status::NOT_FOUND), "as nginx: /README.md/ does not serve the file");
    let Parse::Done(r) = req("GET /README.md HTTP/1.1\r\nHost: x\r\n\r\n") else { panic!() };
    assert_eq!(file_target(&r), Ok(()));
}
