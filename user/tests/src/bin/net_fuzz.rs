//! `net_fuzz SEED COUNT`: a hostile client of the net server. COUNT random and mutated
//! requests — the protocol's labels with random word counts and values biased to live
//! handles, ports, the edges of the shared area and extremes, and labels it does not
//! have — each with a short receive timeout (a WAIT or PING the server keeps is given
//! up, as a hostile client would); then the server must still serve: its counters
//! answer, sockets open and close, and a TCP stream through it comes back byte-exact.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::vec::Vec;
use net_api::client::Net;
use net_api::{self as np, ipv4};
use rt::ipc::{self, timeouts, Msg, INFINITE};
use rt::println;
use tests::{Checks, Rng};

rt::entry!(main);

/// A word a hostile client might send.
fn word(r: &mut Rng) -> u64 {
    match r.below(12) {
        0..=3 => r.below(70),                                       // a handle, live or not
        4 => [80, 81, 7, 0, 65535, 65536, 90][r.below(7) as usize], // ports
        5 => np::AREA_BYTES - r.below(64),                          // the area's edge
        6 => r.below(np::AREA_BYTES * 2),                           // in and past the area
        7 => [u64::MAX, u64::MAX - 1, 1 << 32, 1 << 63][r.below(4) as usize],
        8 => ipv4(10, 0, 2, r.below(256) as u8), // addresses nearby
        9 => r.below(70) | (r.below(8) << 32),   // WAIT entries (ENDED too)
        10 => r.below(2_000_000),                // timeouts
        _ => r.next(),
    }
}

fn main() -> i32 {
    let mut c = Checks::new();
    let mut args = rt::args().split(' ').skip(1);
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let count: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    println!("net_fuzz: seed {} ({} hostile requests)", seed, count);
    let slot = rt::alloc_slot();
    c.eq(rt::env::lookup("net", slot), Ok(()), "the net server");
    let net = match Net::attach(slot) {
        Ok(n) => n,
        Err(e) => {
            c.check(false, &alloc::format!("attach: {}", e.name()));
            return c.finish("net_fuzz");
        }
    };
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let (mut answered, mut ok) = (0u64, 0u64);
    for i in 0..count {
        // Every label of the protocol, Cue's (0xcf ..= 0xd3) and the graft protocol's
        // (0xe0 ..= 0xe8) too.
        let label = match r.below(10) {
            0..=6 => 0xc0 + r.below(20),
            7 => 0xe0 + r.below(9),
            _ => r.next() >> 40,
        };
        let n = if r.below(20) == 0 { r.below(63) } else { r.below(7) };
        let words: Vec<u64> = (0..n).map(|_| word(&mut r)).collect();
        let mut m = Msg::new(label, &words);
        // A short wait for the answer: the server may keep a WAIT or PING for longer.
        match ipc::call(slot, &mut m, timeouts(INFINITE, 20_000)) {
            Ok(()) => {
                answered += 1;
                if m.word(1) == 0 {
                    ok += 1;
                }
            }
            Err(Error::Timeout) => {}
            // An answer with a string the call offered no buffer for: answered (the
            // kernel tells the caller instead of leaving it waiting).
            Err(Error::TooLong) => answered += 1,
            Err(e) => {
                c.check(
                    false,
                    &alloc::format!("request {} (label {:#x}): the call itself failed: {}", i, label, e.name()),
                );
                break;
            }
        }
        if i % 5000 == 4999 {
            // Let go of whatever the noise opened, as a program would.
            for h in 1..(i + 100) {
                let _ = net.close(h);
            }
        }
    }
    println!("net_fuzz: {} answered, {} of them successes", answered, ok);
    c.check(answered * 10 >= count * 9, "the server answered (nearly) every request");
    c.check(ok > 0, "some requests did something");
    // It still serves.
    let info = net.info();
    c.check(info.is_ok(), "INFO answers");
    // WAITs the client gave up on (a listening socket that never gets a connection, no
    // deadline, the caller's patience 5 ms): more than the server keeps per client.
    // They must not lock the client out of sleeping (the stream below waits).
    if let Ok(h) = net.listen(4321, 1) {
        for _ in 0..20 {
            let mut m = Msg::new(np::WAIT, &[u64::MAX, h | np::READABLE << 32]);
            let _ = ipc::call(slot, &mut m, timeouts(INFINITE, 5_000));
        }
        let mut m = Msg::new(np::WAIT, &[100_000, h | np::READABLE << 32]);
        let r = ipc::call(slot, &mut m, timeouts(INFINITE, 5_000_000)).and_then(|_| abi::check(m.word(1)));
        c.eq(r, Ok(()), "a WAIT after 20 abandoned ones sleeps and answers");
        let _ = net.close(h);
    }
    // Connections the noise closed may still be finishing (charged to this client
    // until they are gone, at most `LINGER`, 30 s, for a peer that stopped answering):
    // a new connection may have to wait for them.
    let t0 = rt::sys::now_us();
    let mut conn = Err(Error::NoSpace);
    tests::wait_until(4000, || {
        conn = net.connect(ipv4(10, 0, 2, 100), 7, 10_000_000);
        conn != Err(Error::NoSpace)
    });
    println!(
        "net_fuzz: a new connection after {} ms: {:?}",
        (rt::sys::now_us() - t0) / 1000,
        conn.map_err(|e| e.name())
    );
    if conn.is_err() {
        let i = net.info().map(|m| (m.sockets, m.rx_packets, m.tx_packets));
        println!("net_fuzz: net's sockets, packets in, packets out: {:?}", i);
    }
    c.check(conn.is_ok(), "the client's budget comes back within 40 s");
    let data: Vec<u8> = (0..65536u32).map(|i| (i * 13 + 7) as u8).collect();
    let r = conn.and_then(|h| {
        net.send_all(h, &data)?;
        let mut back = Vec::new();
        let mut buf = alloc::vec![0u8; 16384];
        while back.len() < data.len() {
            let k = net.recv(h, &mut buf)?;
            if k == 0 {
                break;
            }
            back.extend_from_slice(&buf[..k]);
        }
        let _ = net.close(h);
        Ok(back)
    });
    match &r {
        Ok(b) if *b != data => println!(
            "net_fuzz: {} bytes came back, first difference at {:?}",
            b.len(),
            b.iter().zip(&data).position(|(x, y)| x != y)
        ),
        Err(e) => println!("net_fuzz: the stream failed: {}", e.name()),
        _ => {}
    }
    c.check(r.as_ref().is_ok_and(|b| *b == data), "a 64 KiB TCP stream through net comes back byte-exact");
    c.finish("net_fuzz")
}
