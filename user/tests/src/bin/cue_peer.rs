//! cue_test's other program: a Cue transfer of its own for cue_test to try to reach
//! (slow, so that it runs a while), checked at the host; then a second one, still
//! running when this program ends — `net` must cancel it and give its blocks back.
#![no_std]
#![no_main]

extern crate alloc;

use files_api::client as files;
use net_api::client::{cue_file, Net, Schedule};
use net_api::{self as np, ipv4};
use rt::println;
use tests::{Checks, Cksum};

rt::entry!(main);

const SINK: u64 = ipv4(10, 0, 2, 102);

fn main() -> i32 {
    let mut c = Checks::new();
    let (ns, fs) = (rt::alloc_slot(), rt::alloc_slot());
    if rt::env::lookup("net", ns).is_err() || rt::env::lookup("files", fs).is_err() {
        println!("cue_peer: the manifest must grant net and files");
        return 1;
    }
    let Ok(net) = Net::attach(ns) else {
        println!("cue_peer: cannot attach to net");
        return 1;
    };
    tests::wait_until(3000, || net.info().is_ok_and(|i| i.how != 2));
    let (Ok(h), Ok((fh, _))) = (net.connect(SINK, 9, 20_000_000), files::open(fs, "/1m.bin", false)) else {
        println!("cue_peer: cannot connect to the host or open /1m.bin");
        return 1;
    };
    let r = cue_file(&net, fs, fh, h, Schedule { k: 1, t_ms: 10 }, np::CUE_SHUTDOWN, np::NO_STATUS);
    c.check(r.is_ok(), "a slow transfer of /1m.bin starts");
    if let Ok((t, size)) = r {
        let st = net.cue_wait(t, 300_000_000);
        c.eq(st.map(|s| (s.status, s.sent)), Ok((np::CUE_DONE, size)), "it ends done");
        let mut want = Cksum::new();
        want.update(&files::read_all(fs, "/1m.bin").unwrap_or_default());
        let mut got = alloc::vec::Vec::new();
        let mut buf = [0u8; 128];
        while let Ok(n) = net.recv(h, &mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        let text = alloc::string::String::from_utf8_lossy(&got).into_owned();
        let (crc, len) = want.finish();
        c.eq(text.trim(), alloc::format!("{} {}", crc, len).as_str(), "the host's cksum of what arrived");
    }
    let _ = net.close(h);
    // The second one is left running: this program ends under it.
    if let Ok(h2) = net.connect(SINK, 9, 20_000_000) {
        c.check(
            cue_file(&net, fs, fh, h2, Schedule { k: 1, t_ms: 50 }, np::CUE_SHUTDOWN, np::NO_STATUS).is_ok(),
            "a second transfer, left running",
        );
    }
    c.finish("cue_peer")
}
