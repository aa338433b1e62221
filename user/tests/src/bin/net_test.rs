//! The net server from a program's side: an address from DHCP, a ping of the gateway,
//! a TCP stream echoed by the host (`cat`, which QEMU runs for each connection to
//! 10.0.2.100:7: a guestfwd rule) byte for byte and closed from both ends, UDP, and the protocol misused the way a hostile
//! program would: bad handles, ranges past the shared area, wrong socket kinds, use
//! after close, oversized waits, more sockets than allowed.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::vec::Vec;
use net_api::client::Net;
use net_api::{self as np, ipv4, Ip};
use rt::ipc::Msg;
use rt::println;
use tests::Checks;

rt::entry!(main);

const ECHO: u64 = ipv4(10, 0, 2, 100);
const GATEWAY: u64 = ipv4(10, 0, 2, 2);

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// A stream of `n` bytes to the host's echo server and back.
fn echo(c: &mut Checks, net: &Net, n: usize) {
    let h = match net.connect(ECHO, 7, 10_000_000) {
        Ok(h) => h,
        Err(e) => {
            c.check(false, &alloc::format!("connect to the host's echo server: {}", e.name()));
            return;
        }
    };
    let data = pattern(n);
    let mut back = Vec::with_capacity(n);
    let mut sent = 0;
    let mut buf = alloc::vec![0u8; 32 * 1024];
    // Send and receive together (the echo comes back while we send).
    while back.len() < n {
        if sent < n {
            let k = (n - sent).min(32 * 1024);
            net.area.bytes(0, k as u64).copy_from_slice(&data[sent..sent + k]);
            match net.send_area(h, 0, k as u64) {
                Ok(t) => sent += t as usize,
                Err(Error::WouldBlock) => {}
                Err(e) => {
                    c.check(false, &alloc::format!("send: {}", e.name()));
                    return;
                }
            }
        }
        match net.recv_area(h, 64 * 1024, buf.len() as u64) {
            Ok(0) => break,
            Ok(k) => {
                buf[..k as usize].copy_from_slice(net.area.bytes(64 * 1024, k));
                back.extend_from_slice(&buf[..k as usize]);
            }
            Err(Error::WouldBlock) => {
                let _ = net.wait(&[(h, np::READABLE | if sent < n { np::WRITABLE } else { 0 })], 5_000_000);
            }
            Err(e) => {
                c.check(false, &alloc::format!("recv: {}", e.name()));
                return;
            }
        }
    }
    c.eq(back.len(), n, "every byte came back");
    c.check(back == data, "the bytes came back as sent");
    c.eq(net.shutdown(h), Ok(()), "shutdown");
    let mut one = [0u8; 16];
    c.eq(net.recv(h, &mut one), Ok(0), "the host closes too: end of stream");
    c.eq(net.close(h), Ok(()), "close");
}

fn misuse(c: &mut Checks, net: &Net) {
    let srv = net.srv;
    let call = |label: u64, words: &[u64]| {
        let mut m = Msg::new(label, words);
        rt::server::request(srv, &mut m).map(|_| m.word(2))
    };
    c.eq(call(np::RECV, &[999, 0, 16]), Err(Error::InvalidCap), "a handle never made");
    let (u, _) = net.udp_bind(0).expect("udp bind");
    c.eq(call(np::SEND, &[u, 0, 16]), Err(Error::WrongType), "a TCP call on a UDP socket");
    c.eq(
        call(np::SEND_TO, &[u, GATEWAY, 9, np::AREA_BYTES - 8, 16]),
        Err(Error::InvalidArg),
        "a range past the shared area",
    );
    c.eq(call(np::SEND_TO, &[u, GATEWAY, 9, u64::MAX - 4, 16]), Err(Error::InvalidArg), "a range that wraps around");
    c.eq(call(np::SEND_TO, &[u, GATEWAY, 9, 0, np::MAX_DATAGRAM + 1]), Err(Error::TooLong), "a datagram too long");
    c.eq(call(np::SEND_TO, &[u, 1 << 40, 9, 0, 8]), Err(Error::InvalidArg), "an address that is not IPv4");
    c.eq(call(np::SEND_TO, &[u, GATEWAY, 70000, 0, 8]), Err(Error::InvalidArg), "a port past 65535");
    c.eq(call(np::RECV_FROM, &[u, 0, 64]), Err(Error::WouldBlock), "no datagram yet");
    c.eq(call(np::LISTEN, &[0, 4]), Err(Error::InvalidArg), "listen on port 0");
    c.eq(call(np::LISTEN, &[81, 0]), Err(Error::InvalidArg), "a backlog of 0");
    let l = net.listen(81, 2).expect("listen");
    c.eq(call(np::LISTEN, &[81, 2]), Err(Error::Exists), "a port already listened on");
    c.eq(call(np::ACCEPT, &[l]), Err(Error::WouldBlock), "nobody to accept");
    c.eq(call(np::ACCEPT, &[u]), Err(Error::WrongType), "accept on a UDP socket");
    c.eq(call(np::RECV, &[l, 0, 8]), Err(Error::WrongType), "recv on a listener");
    // A listener holds no buffers, whatever its backlog: they come with connections.
    let before = net.limits();
    let big = net.listen(82, np::MAX_BACKLOG);
    let after = net.limits();
    c.check(big.is_ok(), "listen with the largest backlog");
    c.check(
        matches!((before, after), (Ok(b), Ok(a)) if a[3] == b[3] && a[6] == b[6]),
        &alloc::format!(
            "a listener with a backlog of {} takes no memory (LIMITS before {:?}, after {:?})",
            np::MAX_BACKLOG,
            before,
            after
        ),
    );
    if let Ok(b) = big {
        c.eq(net.close(b), Ok(()), "close the large listener");
    }
    let mut w = alloc::vec![0u64; np::MAX_WAIT + 2];
    w[0] = 0;
    c.eq(call(np::WAIT, &w), Err(Error::Malformed), "a wait on too many sockets");
    c.eq(call(np::WAIT, &[0, 777 | np::READABLE << 32]), Err(Error::InvalidCap), "a wait on a handle never made");
    c.eq(call(np::WAIT, &[50_000, l | np::READABLE << 32]), Ok(0), "a wait that times out answers 0");
    // The readiness wait: WATCH once, WAIT_READY gives (token, events) of the ready.
    c.eq(call(np::WAIT_READY, &[0, 0, 0]), Err(Error::InvalidArg), "WAIT_READY for no pairs");
    c.eq(call(np::WAIT_READY, &[0, 4, 1]), Err(Error::InvalidArg), "WAIT_READY's pairs not aligned");
    c.eq(call(np::WAIT_READY, &[0, 0, np::MAX_EVENTS + 1]), Err(Error::InvalidArg), "WAIT_READY for too many pairs");
    c.eq(call(np::WAIT_READY, &[0, np::AREA_BYTES - 8, 1]), Err(Error::InvalidArg), "WAIT_READY's pairs past the area");
    c.eq(net.watch(777, np::READABLE, 1), Err(Error::InvalidCap), "WATCH of a handle never made");
    c.eq(net.watch(777, np::ENDED, 1), Err(Error::InvalidCap), "WATCH of a transfer never made");
    c.eq(call(np::WATCH, &[l, 8, 1]), Err(Error::InvalidArg), "WATCH of unknown events");
    c.eq(call(np::WATCH, &[l, np::ENDED | np::READABLE, 1]), Err(Error::InvalidArg), "WATCH of ENDED with others");
    let mut got = Vec::new();
    c.eq(net.wait_ready(4096, 8, 0, &mut got), Ok(0), "WAIT_READY with nothing watched");
    c.eq(net.watch(l, np::READABLE, 10), Ok(()), "WATCH the listener");
    c.eq(net.watch(u, np::WRITABLE, 20), Ok(()), "WATCH the UDP socket");
    c.eq(net.wait_ready(4096, 8, 50_000, &mut got), Ok(1), "WAIT_READY: the UDP socket can send");
    c.eq(got.first().copied(), Some((20, np::WRITABLE)), "WAIT_READY gives its token and events");
    c.eq(net.wait_ready(4096, 8, 0, &mut got), Ok(1), "level-triggered: given again while it holds");
    c.eq(net.watch(u, 0, 0), Ok(()), "WATCH with no events stops watching");
    c.eq(net.wait_ready(4096, 8, 50_000, &mut got), Ok(0), "WAIT_READY on a quiet listener times out with 0");
    c.eq(net.close(l), Ok(()), "close the listener");
    c.eq(net.close(u), Ok(()), "close the UDP socket");
    c.eq(call(np::RECV_FROM, &[u, 0, 64]), Err(Error::InvalidCap), "use after close");
    c.eq(net.close(u), Err(Error::InvalidCap), "close twice");
    c.eq(call(0xff, &[]), Err(Error::Unsupported), "an unknown request");
    c.eq(call(np::SEND, &[1]), Err(Error::Malformed), "too few words");
    // Limits: sockets until the server says NoSpace; then all of them closed again.
    let mut open = Vec::new();
    // The budget comes from memory (LIMITS); a UDP socket is charged as a connection.
    let most = net.limits().map_or(1000, |l| l[2] / l[4].max(1) + 16) as usize;
    let last = loop {
        match net.udp_bind(0) {
            Ok((h, _)) => open.push(h),
            Err(e) => break e,
        }
        if open.len() > most {
            break Error::InvalidArg;
        }
    };
    c.eq(last, Error::NoSpace, "more sockets than the limit: NoSpace");
    c.check(open.len() >= 16, "at least 16 sockets before the limit");
    println!("net_test: {} sockets before the limit", open.len());
    c.check(open.iter().all(|h| net.close(*h).is_ok()), "close them all");
    c.check(net.udp_bind(0).map(|(h, _)| net.close(h)).is_ok(), "a socket again after closing");
    // A connection nobody takes: refused or timed out, never a hang.
    let r = net.connect(ipv4(10, 0, 2, 100), 8, 3_000_000);
    c.check(matches!(r, Err(Error::Reset) | Err(Error::Timeout)), "a connection to a port nobody serves fails");
}

fn main() -> i32 {
    let mut c = Checks::new();
    let slot = rt::alloc_slot();
    c.eq(rt::env::lookup("net", slot), Ok(()), "the net server");
    let mut m = Msg::new(np::LISTEN, &[80, 1]);
    c.eq(rt::server::request(slot, &mut m), Err(Error::BadState), "a socket call before ATTACH");
    let net = match Net::attach(slot) {
        Ok(n) => n,
        Err(e) => {
            c.check(false, &alloc::format!("attach: {}", e.name()));
            return c.finish("net_test");
        }
    };
    c.check(Net::attach(slot).is_ok(), "attach twice: the same area again");
    // net_peer's socket: handle 1 in its table, port 90.
    // It sleeps once it listens (root's program list says so).
    let peer_ready = tests::wait_until(1000, || {
        rt::env::ps().is_ok_and(|ps| ps.lines().any(|l| l.contains(" net_peer ") && l.contains("sleeping")))
    });
    c.check(peer_ready, "net_peer is listening");
    c.eq(net.listen(90, 1), Err(Error::Exists), "net_peer holds port 90");
    c.eq(net.try_accept(1).err(), Some(Error::InvalidCap), "another program's handle 1 is not ours");
    c.eq(net.state(1).err(), Some(Error::InvalidCap), "nor can we ask about it");
    c.eq(net.close(1), Err(Error::InvalidCap), "nor close it");
    c.eq(net.listen(90, 1), Err(Error::Exists), "and net_peer's socket lives on");
    let got = tests::wait_until(1000, || net.info().is_ok_and(|i| i.how == 1));
    c.check(got, "an address from DHCP within 10 s");
    let info = net.info().unwrap_or_default();
    println!(
        "net_test: address {}/{} gateway {} ({} packets in, {} out)",
        Ip(info.ip),
        info.prefix,
        Ip(info.gateway),
        info.rx_packets,
        info.tx_packets
    );
    c.eq(info.ip, ipv4(10, 0, 2, 15), "QEMU's user network gives 10.0.2.15");
    match net.ping(GATEWAY, 2_000_000) {
        Ok(us) => println!("net_test: ping {} answered in {} us", Ip(GATEWAY), us),
        Err(e) => {
            c.check(false, &alloc::format!("ping the gateway: {}", e.name()));
        }
    }
    echo(&mut c, &net, 300 * 1024);
    misuse(&mut c, &net);
    c.finish("net_test")
}
