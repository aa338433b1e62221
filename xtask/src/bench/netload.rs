//! Many clients at once for the `net` suite: `c` keep-alive connections, each
//! making requests one after another, all at the same time; requests a second on the
//! host's clock (meaningful under plain TCG) and busy guest ticks per request
//! (instructions under icount, read from the guest before and after).

use crate::test::nettest;
use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Concurrency levels and requests per connection at each (about a thousand requests a
/// level; a thousand connections make two each).
pub const LEVELS: [(usize, usize); 4] = [(1, 500), (10, 100), (100, 10), (1000, 2)];
/// A smoke run's (`cargo xtask bench --smoke`): the path end to end, a few requests.
pub const SMOKE_LEVELS: [(usize, usize); 2] = [(1, 2), (10, 1)];

/// The levels a run measures.
pub fn levels(smoke: bool) -> &'static [(usize, usize)] {
    if smoke {
        &SMOKE_LEVELS
    } else {
        &LEVELS
    }
}

/// One GET of `path` on `s`, checked to answer 200 with `len` bytes.
fn get(s: &mut TcpStream, path: &str, len: usize) -> Result<(), String> {
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n").as_bytes()).map_err(|e| e.to_string())?;
    let r = nettest::response(s, false)?;
    if r.status != 200 || r.body.len() != len {
        return Err(format!("GET {path}: status {}, {} bytes", r.status, r.body.len()));
    }
    Ok(())
}

/// `c` connections through the forwarded `ports` (QEMU's user network takes one
/// forwarded connection at a time, so each port's connections open one after another,
/// the ports in parallel), each asked once; then all make `n` requests at once. Returns
/// (requests a second, busy ticks per request), `busy` read just before and after (the
/// connections closed only after it).
pub fn at(
    ports: &[u16],
    c: usize,
    n: usize,
    path: &str,
    len: usize,
    busy: &dyn Fn() -> Result<u64, String>,
) -> Result<(u64, u64), String> {
    let path = Arc::new(path.to_string());
    let start = Arc::new(Barrier::new(c + 1));
    let done = Arc::new(Barrier::new(c + 1));
    let mut clients = Vec::new();
    // Open them: a thread per port, connecting its share in turn.
    let per_port: Vec<Vec<usize>> = (0..ports.len()).map(|p| (p..c).step_by(ports.len()).collect()).collect();
    let openers: Vec<_> = per_port
        .into_iter()
        .enumerate()
        .map(|(p, ids)| {
            let (port, path) = (ports[p], path.clone());
            std::thread::spawn(move || -> Result<Vec<TcpStream>, String> {
                let mut v = Vec::new();
                for i in ids {
                    let mut s = nettest::ready(port).map_err(|e| format!("connection {i}: {e}"))?;
                    s.set_nodelay(true).map_err(|e| e.to_string())?;
                    s.set_read_timeout(Some(Duration::from_secs(120))).map_err(|e| e.to_string())?;
                    get(&mut s, &path, len).map_err(|e| format!("connection {i}: {e}"))?;
                    v.push(s);
                }
                Ok(v)
            })
        })
        .collect();
    let mut conns = Vec::new();
    for o in openers {
        conns.extend(o.join().map_err(|_| "an opening thread panicked".to_string())??);
    }
    for (i, mut s) in conns.into_iter().enumerate() {
        let (path, start, done) = (path.clone(), start.clone(), done.clone());
        let h = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || -> Result<TcpStream, String> {
                start.wait();
                let mut r = Ok(());
                for k in 0..n {
                    if let Err(e) = get(&mut s, &path, len) {
                        r = Err(format!("client {i}, request {k}: {e}"));
                        break;
                    }
                }
                done.wait();
                // The connection stays open until the busy ticks are read: a thousand
                // closes (FINs, net's and httpd's work on them) are not the requests'.
                r.map(|()| s)
            })
            .map_err(|e| format!("a client thread: {e}"))?;
        clients.push(h);
    }
    let b0 = busy()?;
    start.wait();
    let t0 = Instant::now();
    done.wait();
    let secs = t0.elapsed().as_secs_f64();
    let b1 = busy()?;
    let mut open = Vec::new();
    for h in clients {
        open.push(h.join().map_err(|_| "a client thread panicked".to_string())??);
    }
    drop(open);
    let total = (c * n) as u64;
    Ok(((total as f64 / secs) as u64, b1.saturating_sub(b0) / total))
}
