//! fpu_test's peer, in a task of its own: keeps an x87/SSE register image of its own
//! while fpu_test loads another, and says whether it saw anything but its own.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use rt::ipc::{self, Msg, FOREVER, RECV_ANY};
use tests::fpu::{
    self,
    peer::{CHECK, SET},
};

rt::entry!(main);

fn main() -> i32 {
    let mut m = Msg::empty();
    loop {
        if ipc::recv(RECV_ANY, &mut m, FOREVER).is_err() {
            return 1;
        }
        let (label, seed) = (m.label(), m.word(1));
        let answer = match label {
            SET => {
                let was_clean = fpu::is_clean(&fpu::save());
                fpu::load(&fpu::pattern(seed));
                was_clean
            }
            CHECK => fpu::same_state(&fpu::save(), &fpu::pattern(seed)),
            _ => {
                let _ = ipc::reply(&Msg::new(0, &[0]));
                return 0;
            }
        };
        let _ = ipc::reply(&Msg::new(0, &[answer as u64]));
    }
}
