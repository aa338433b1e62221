//! `update_test`'s second program: writes and reads `/u_b` through `files` until
//! `/u_done` appears (the updates are over), then reads every byte back.
#![no_std]
#![no_main]

extern crate alloc;

use files_api::client as f;
use rt::{env, println};
use tests::Checks;

rt::entry!(main);

fn main() -> i32 {
    let mut c = Checks::new();
    let srv = rt::alloc_slot();
    c.eq(env::lookup("files", srv), Ok(()), "find files");
    // A file update_test opens too: its session is shared while both have it open.
    let _ = f::remove(srv, "/u_s");
    let shared = f::open(srv, "/u_s", true);
    c.check(shared.is_ok(), "open /u_s for update_test to share");
    let mut bad = 0u64;
    let mut k = 0u64;
    let (r, n) = tests::update_writer(
        srv,
        "/u_b",
        b'b',
        || {
            k += 1;
            // Every tenth chunk, see whether update_test is done.
            k.is_multiple_of(10) && f::stat(srv, "/u_done").is_ok()
        },
        |ok| bad += !ok as u64,
    );
    c.check(r.is_ok(), &alloc::format!("update_peer's file stayed open and usable ({r:?})"));
    c.eq(bad, 0, "every write and read through the updates succeeded and read back right");
    c.check(
        n >= 20 && tests::update_check(srv, "/u_b", b'b', n),
        &alloc::format!("all {n} chunks read back byte for byte"),
    );
    if let Ok((h, _)) = shared {
        let got = f::read(srv, h, 0, 64);
        c.check(
            got.as_ref().is_ok_and(|g| g.starts_with(b"written by update_test")),
            &alloc::format!("update_peer reads what update_test wrote into the shared file ({got:?})"),
        );
        let _ = f::close(srv, h);
    }
    println!("update_peer: {} chunks", n);
    c.finish("update_peer")
}
