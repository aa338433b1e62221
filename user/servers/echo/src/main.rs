//! A test server. `echo` serves the labels in `echo_api`; `echo fast` runs the
//! register-only reply-and-wait loop used for measuring IPC, `echo strings` the string
//! echo loop.
#![no_std]
#![no_main]

use echo_api::{self as echo, Request};
use rt::ipc::{self, Msg};
use rt::server::{self, Answer, Badge, Server};

rt::entry!(main);

struct Echo {
    out: [u8; 4096],
}

impl Server for Echo {
    type Request<'a> = Request<'a>;

    #[inline(always)]
    fn handle(&mut self, from: Badge, req: Request<'_>) -> Answer {
        Answer::Reply(match req {
            Request::Echo(words) => {
                let mut w = [0u64; 63];
                let n = words.len().min(62);
                w[..n].copy_from_slice(&words[..n]);
                w[n] = from.0;
                Msg::new(echo::ECHO, &w[..n + 1])
            }
            Request::Reverse(s) => {
                let n = s.len().min(self.out.len());
                for i in 0..n {
                    self.out[i] = s[n - 1 - i];
                }
                ipc::set_send_string(&self.out[..n]);
                Msg::new(echo::REVERSE, &[n as u64]).with_string()
            }
            Request::Forward { slot, word } => {
                let mut f = Msg::new(echo::ECHO, &[word.wrapping_add(1)]);
                match ipc::call(slot, &mut f, ipc::FOREVER) {
                    Ok(()) => Msg::new(echo::FORWARD, &[f.word(1).wrapping_add(1)]),
                    Err(e) => Msg::new(0, &[e as u64]),
                }
            }
            Request::String(s) => {
                // Straight back from the receive buffer: the kernel copies it out before
                // the next message lands there.
                ipc::set_send_string(s);
                Msg::new(echo::STRING, &[s.len() as u64]).with_string()
            }
            Request::Slow { us } => {
                rt::sys::sleep_us(us);
                Msg::new(echo::SLOW, &[])
            }
            Request::Crash => {
                // SAFETY: deliberately invalid: the test of supervision needs a crash.
                unsafe { core::ptr::write_volatile(core::ptr::without_provenance_mut::<u64>(16), 1) };
                Msg::new(0, &[])
            }
            Request::Quit => {
                let _ = ipc::reply(&Msg::new(echo::QUIT, &[]));
                rt::exit(0)
            }
        })
    }
}

fn main() -> i32 {
    match rt::args().split(' ').nth(1) {
        Some("fast") => echo::fast_loop(),
        Some("strings") => echo::string_loop(),
        _ => {}
    }
    let mut buf = [0u8; 4096];
    server::run(&mut Echo { out: [0; 4096] }, &mut buf)
}
