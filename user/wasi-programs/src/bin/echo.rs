//! A TCP echo server in Rust `std`: it serves on the listening socket the runner
//! preopens as descriptor 3 (`wasi --listen=PORT`, as wasmtime's `--tcplisten`), echoes
//! each connection's bytes back until the peer closes, and ends after `N` connections
//! (its argument; default 2).
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::wasi::io::FromRawFd;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2);
    // SAFETY: descriptor 3 is the listening socket the runner preopened, owned by
    // nothing else in this program.
    let l = unsafe { TcpListener::from_raw_fd(3) };
    println!("echo: listening");
    for i in 0..n {
        let (mut s, _) = match l.accept() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("echo: accept: {e}");
                std::process::exit(1);
            }
        };
        let mut buf = vec![0u8; 16 * 1024];
        let mut total = 0usize;
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => {
                    if let Err(e) = s.write_all(&buf[..k]) {
                        eprintln!("echo: write: {e}");
                        break;
                    }
                    total += k;
                }
                Err(e) => {
                    eprintln!("echo: read: {e}");
                    break;
                }
            }
        }
        println!("echo: connection {} echoed {total} bytes", i + 1);
    }
}
