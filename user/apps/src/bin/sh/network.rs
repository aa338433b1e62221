//! The network commands through the `net` server (attached once, again after it
//! restarted): `net`, `ping`, `cue` (net's Cue transfers) and `fetch` (an HTTP GET,
//! its head and the start of its body; Ctrl-C ends it).

use crate::help::usage;
use crate::line::Input;
use crate::words;
use abi::Error;
use alloc::string::String;
use alloc::vec::Vec;
use net_api::client::Net;
use net_api::{Ip, Mac};
use rt::{env, print, println};

/// The network commands, through the `net` server (attached once; again after it
/// restarted).
pub(crate) fn network(input: &mut Input, net: &mut Option<Net>, cmd: &str, arg: &str) {
    match cmd {
        "net" | "cue" if !arg.is_empty() => return usage(cmd),
        "fetch" if arg.is_empty() => return usage(cmd),
        _ => {}
    }
    if let Some(n) = net.as_ref() {
        if n.info().is_err() {
            // The server went away (restarted): attach to the new one.
            rt::free_slot(n.srv);
            *net = None;
        }
    }
    if net.is_none() {
        let srv = rt::alloc_slot();
        match env::lookup("net", srv).and_then(|_| Net::attach(srv)) {
            Ok(n) => *net = Some(n),
            Err(e) => {
                match e {
                    Error::NotFound | Error::NoRights => println!(
                        "{}: no network: this shell may not ask the `net` server (not in its manifest entry)",
                        cmd
                    ),
                    e => println!("{}: no network: the `net` server did not answer: {}", cmd, words(e)),
                }
                rt::free_slot(srv);
                return;
            }
        }
    }
    let n = net.as_ref().expect("attached");
    let r = match cmd {
        "net" => n.info().map(|i| {
            let gateway = if i.gateway == 0 { String::from("none") } else { alloc::format!("{}", Ip(i.gateway)) };
            println!(
                "address {}/{} ({}), gateway {}, MAC {}, link {}",
                Ip(i.ip),
                i.prefix,
                ["static", "DHCP", "none yet"][i.how.min(2) as usize],
                gateway,
                Mac(i.mac),
                if i.link_up { "up" } else { "down" }
            );
            println!(
                "in {} packets {} bytes, out {} packets {} bytes, {} sockets open",
                i.rx_packets, i.rx_bytes, i.tx_packets, i.tx_bytes, i.sockets
            );
        }),
        "ping" => {
            let target = if arg.is_empty() {
                n.info().ok().map(|i| i.gateway).filter(|g| *g != 0).unwrap_or(net_api::ipv4(10, 0, 2, 2))
            } else {
                match net_api::parse_ip(arg) {
                    Some(a) => a,
                    None => {
                        usage("ping");
                        println!("(ADDR: four numbers A.B.C.D, e.g. `ping 10.0.2.2`; Scion has no DNS client)");
                        return;
                    }
                }
            };
            match n.ping(target, 2_000_000) {
                Ok(us) => {
                    println!("ping {}: answer in {}.{:03} ms", Ip(target), us / 1000, us % 1000);
                    Ok(())
                }
                Err(Error::Timeout) => {
                    println!("ping {}: no answer within 2 s", Ip(target));
                    Ok(())
                }
                Err(e) => Err(e),
            }
        }
        "cue" => n.cue_list().map(|text| print_transfers(&text)),
        _ => fetch(input, n, arg),
    };
    if let Err(e) = r {
        println!("{}: {}", cmd, words(e));
    }
}

/// `cue`: net's transfers (CUE_LIST lines: id program socket sent total k t µs status).
fn print_transfers(text: &str) {
    if text.trim().is_empty() {
        println!("no Cue transfers");
        return;
    }
    println!("  ID PROG SOCKET       SENT      TOTAL       K     T ms   KiB/s");
    for l in text.lines() {
        let w: alloc::vec::Vec<u64> = l.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        let [id, prog, sock, sent, total, k, t, us, _status] = w[..] else { continue };
        let rate = sent * 1_000_000 / 1024 / us.max(1);
        let k = if k == net_api::MAX_K { alloc::string::String::from("fast") } else { alloc::format!("{}", k) };
        println!("{:4} {:4} {:6} {:10} {:10} {:>7} {:8} {:7}", id, prog, sock, sent, total, k, t, rate);
    }
}

/// How long `fetch` waits for a connection.
const CONNECT_US: u64 = 10_000_000;
/// `fetch` keeps the answer's head up to this, and this much of its body to print.
const MAX_HEAD: usize = 16 * 1024;
const SHOWN: usize = 8192;

/// HTTP GET of `url` (http://A.B.C.D[:PORT]/PATH): the answer's head, then the body
/// (text up to 8 KiB is printed, the rest counted). Ctrl-C ends it.
fn fetch(input: &mut Input, n: &Net, url: &str) -> Result<(), Error> {
    let Some(rest) = url.strip_prefix("http://") else {
        println!("fetch: give http://A.B.C.D[:PORT]/PATH (no names: Scion has no DNS client)");
        return Ok(());
    };
    let (hostport, path) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
    let (host, port) = match hostport.split_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().ok().filter(|p| *p != 0)),
        None => (hostport, Some(80)),
    };
    let (Some(ip), Some(port)) = (net_api::parse_ip(host), port) else {
        println!("fetch: bad address {:?} (give A.B.C.D or A.B.C.D:PORT, PORT 1 to 65535)", hostport);
        return Ok(());
    };
    let own = n.info().map(|i| i.ip).unwrap_or(0);
    if (own != 0 && ip == own) || ip >> 24 == 127 {
        println!("fetch: {} is Scion itself, and its net server does not connect to itself (no loopback); from the host, `curl http://localhost:8080/{}` asks Scion's web server", Ip(ip), path);
        return Ok(());
    }
    let h = n.connect_start(ip, port)?;
    let r = fetch_on(input, n, h, hostport, path);
    let _ = n.close(h);
    match r {
        Err(Error::Timeout) => {
            println!("fetch: {} did not answer within {} s", hostport, CONNECT_US / 1_000_000);
            Ok(())
        }
        Err(Error::Reset) => {
            println!("fetch: {} refused the connection, or reset it", hostport);
            Ok(())
        }
        r => r,
    }
}

fn fetch_on(input: &mut Input, n: &Net, h: u64, hostport: &str, path: &str) -> Result<(), Error> {
    use net_api::state;
    let t0 = rt::sys::now_us();
    loop {
        let st = n.state(h)?.0;
        if st == state::ESTABLISHED || st == state::CLOSE_WAIT {
            break;
        }
        if st != state::SYN_SENT && st != state::SYN_RECEIVED {
            return Err(Error::Reset);
        }
        if input.interrupted() {
            println!("fetch: interrupted while connecting to {}", hostport);
            return Ok(());
        }
        if rt::sys::now_us().saturating_sub(t0) > CONNECT_US {
            return Err(Error::Timeout);
        }
        n.wait(&[(h, net_api::READABLE | net_api::WRITABLE)], 50_000)?;
    }
    let req = alloc::format!(
        "GET /{} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nUser-Agent: scion-fetch\r\n\r\n",
        path,
        hostport
    );
    n.send_all(h, req.as_bytes())?;
    // The head (until a blank line), then the body: its first `SHOWN` bytes kept, the
    // rest counted.
    let mut head: Vec<u8> = Vec::new();
    let mut body: Vec<u8> = Vec::new();
    let mut in_body = false;
    let mut body_len: u64 = 0;
    let max = net_api::AREA_BYTES.min(16 * 1024);
    loop {
        match n.recv_area(h, 0, max) {
            Ok(0) => break,
            Ok(k) => {
                let mut got: &[u8] = n.area.bytes(0, k.min(max));
                if !in_body {
                    let take = got.len().min(MAX_HEAD + 4 - head.len().min(MAX_HEAD + 4));
                    let from = head.len().saturating_sub(3);
                    head.extend_from_slice(&got[..take]);
                    match head[from..].windows(4).position(|w| w == b"\r\n\r\n") {
                        Some(i) => {
                            let end = from + i + 4;
                            // What came after the head is the body's start.
                            let extra = head.len() - end;
                            got = &got[take - extra..];
                            head.truncate(end);
                            in_body = true;
                        }
                        None if head.len() > MAX_HEAD => {
                            println!("fetch: the answer's head is longer than {} bytes: not HTTP?", MAX_HEAD);
                            return Ok(());
                        }
                        None => got = &got[take..],
                    }
                }
                if in_body {
                    body_len += got.len() as u64;
                    let room = SHOWN.saturating_sub(body.len());
                    body.extend_from_slice(&got[..got.len().min(room)]);
                }
            }
            Err(Error::WouldBlock) => {
                if input.interrupted() {
                    println!("fetch: interrupted after {} bytes of body", body_len);
                    return Ok(());
                }
                n.wait(&[(h, net_api::READABLE)], 50_000)?;
            }
            Err(e) => return Err(e),
        }
    }
    if !in_body {
        // The connection ended within the head: show what came.
        body_len = 0;
    }
    print!("{}", String::from_utf8_lossy(&head).replace('\r', ""));
    print!("{}", String::from_utf8_lossy(&body));
    if !body.ends_with(b"\n") && body.len() as u64 == body_len {
        println!();
    }
    println!("fetch: {} bytes of body", body_len);
    Ok(())
}
