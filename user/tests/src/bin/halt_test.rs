//! `halt` syncs (issue 47, item 8): boot 1 (`write`) creates a file, writes a few bytes
//! to it (both answered, neither synced nor closed: files keeps small writes back) and
//! asks root to halt at once; boot 2 (`read`, the same disk) finds the file with those
//! bytes. Root makes every files server sync and every disk flush before it stops the
//! machine (before, the bytes were gone and nothing said so).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use files_api::client as files;
use rt::{env, println};
use tests::Checks;

rt::entry!(main);

const PATH: &str = "/halt.txt";

/// The file's bytes: a pattern no other file has.
fn bytes() -> [u8; 300] {
    let mut b = [0u8; 300];
    for (i, x) in b.iter_mut().enumerate() {
        *x = (i as u8).wrapping_mul(13) ^ 0x5a;
    }
    b
}

fn main() -> i32 {
    let mut c = Checks::new();
    let fs = rt::alloc_slot();
    c.eq(env::lookup("files", fs), Ok(()), "find the files server");
    match rt::args().split_whitespace().last().unwrap_or("") {
        "write" => {
            let h = files::open(fs, PATH, true);
            c.check(h.is_ok(), &format!("create {PATH} ({:?})", h.as_ref().err()));
            if let Ok((h, _)) = h {
                let w = files::write(fs, h, 0, &bytes());
                c.eq(w, Ok(300), "write 300 bytes (answered, kept back by files)");
            }
            println!("HALT_TEST wrote: halting");
            let r = env::halt();
            c.check(false, &format!("the machine halts ({r:?})"));
        }
        "read" => {
            let got = files::read_all(fs, PATH);
            c.eq(got.as_deref().ok(), Some(&bytes()[..]), "the file written before halt is there, its bytes whole");
        }
        a => {
            c.check(false, &format!("halt_test: write or read, not {a:?}"));
        }
    }
    c.finish("halt_test")
}
