//! A test server. `echo` serves the labels in `progs::echo`; `echo fast` runs the
//! register-only reply-and-wait loop used for measuring IPC.
#![no_std]
#![no_main]

use progs::echo;
use rt::ipc::{self, Msg};

rt::entry!(main);

fn main() -> i32 {
    if rt::args().split(' ').nth(1) == Some("fast") {
        progs::echo::fast_loop();
    }
    let mut buf = [0u8; 4096];
    let mut out = [0u8; 4096];
    let mut reply: Option<Msg> = None;
    loop {
        let Ok((badge, m)) = ipc::serve(reply.take(), &mut buf) else { continue };
        let words = m.words().len();
        reply = Some(match m.label() {
            echo::ECHO => {
                let mut w = [0u64; 63];
                w[..words].copy_from_slice(m.words());
                let n = words.min(62);
                w[n] = badge;
                Msg::new(echo::ECHO, &w[..n + 1])
            }
            echo::REVERSE => {
                let n = ipc::received_string_len();
                for i in 0..n {
                    out[i] = buf[n - 1 - i];
                }
                ipc::set_send_string(&out[..n]);
                Msg::new(echo::REVERSE, &[n as u64]).with_string()
            }
            echo::FORWARD => {
                let mut f = Msg::new(echo::ECHO, &[m.word(2) + 1]);
                match ipc::call(m.word(1), &mut f, ipc::FOREVER) {
                    Ok(()) => Msg::new(echo::FORWARD, &[f.word(1) + 1]),
                    Err(e) => Msg::new(0, &[e as u64]),
                }
            }
            echo::STRING => {
                let n = ipc::received_string_len();
                ipc::set_send_string(&buf[..n]);
                Msg::new(echo::STRING, &[n as u64]).with_string()
            }
            echo::SLOW => {
                rt::sys::sleep_us(m.word(1));
                Msg::new(echo::SLOW, &[])
            }
            echo::CRASH => {
                // SAFETY: deliberately invalid: the test of supervision needs a crash.
                unsafe { core::ptr::write_volatile(core::ptr::without_provenance_mut::<u64>(16), 1) };
                Msg::new(0, &[])
            }
            echo::QUIT => {
                let _ = ipc::reply(&Msg::new(echo::QUIT, &[]));
                return 0;
            }
            _ => Msg::new(0, &[abi::Error::NoSys as u64]),
        });
    }
}
