//! A logical disk survives the machine (VINO §3.3). `ldisk_test write`:
//! make a segment a logical disk through the WebAssembly log-structured graft, write
//! blocks (some twice, so the log moves them), sync, and say so — the harness kills the
//! machine at that moment. `ldisk_test read`, after the next boot: attach the eBPF
//! build of the same graft (its state is the map read back from the segment) and every
//! block reads its last write. The harness then checks the image with `fsck` and reads
//! the map itself.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use blk_api as p;
use blk_api::client::{self as baio, Segment};
use rt::{env, println};
use tests::Checks;

rt::entry!(main);

const BUF: u64 = rt::layout::SEGMENT_AREA;
/// The segment: 62 blocks the graft maps onto, the map's two.
const SEG: &str = "ldisk";
const LEN: u64 = 64;
/// The writes: (first logical block, blocks, version).
const WRITES: [(u64, u64, u64); 5] = [(0, 16, 1), (4, 4, 2), (30, 20, 3), (10, 2, 4), (61, 1, 5)];

fn attach(c: &mut Checks, blk: u64, files: u64, seg: &Segment, tech: &str) -> bool {
    let path = format!("/grafts/ldisk_{tech}_ldisk.graft");
    let Ok(file) = files_api::client::read_all(files, &path) else {
        return c.check(false, &format!("{path} is in the files filesystem"));
    };
    let Ok(id) = tests::load_graft(blk, &file) else {
        return c.check(false, &format!("load {path} into blk"));
    };
    c.eq(seg.ldisk(id), Ok(LEN - p::MAP_BLOCKS), &format!("the segment is a logical disk through the {tech} graft"))
}

fn main() -> i32 {
    let mut c = Checks::new();
    let write = rt::args().split(' ').nth(1) == Some("write");
    let (blk, files) = (rt::alloc_slot(), rt::alloc_slot());
    c.eq(env::lookup("blk", blk), Ok(()), "find the block service");
    c.eq(env::lookup("files", files), Ok(()), "find the files server");
    if write {
        c.eq(baio::create(blk, SEG, LEN, 0), Ok(()), "create a segment of 64 blocks");
    }
    let Ok(seg) = baio::open(blk, SEG, 3, BUF) else {
        c.check(false, "open it");
        return c.finish("ldisk_test");
    };
    if !attach(&mut c, blk, files, &seg, if write { "wasmi" } else { "ebpf" }) {
        return c.finish("ldisk_test");
    }
    if write {
        for (first, n, v) in WRITES {
            for k in 0..n {
                seg.bytes(p::DATA + k * 4096, 4096).copy_from_slice(&tests::ldisk_block(first + k, v));
            }
            let r = seg.batch_ops(&[p::op(p::WRITE_OP, first, n, 0, p::DATA)], p::WAIT_ALL);
            c.check(
                r.is_ok() && seg.status(0) == p::DONE,
                &format!("write blocks {first}..{} (version {v})", first + n),
            );
        }
        c.eq(seg.sync(), Ok(()), "sync acknowledged");
        println!("LDISK synced");
        // The harness kills the machine now.
        loop {
            rt::sys::sleep_us(1_000_000);
        }
    }
    let mut want = [0u64; 62];
    for (first, n, v) in WRITES {
        want[first as usize..(first + n) as usize].fill(v);
    }
    let mut good = true;
    for first in [0u64, 31] {
        let r = seg.batch_ops(&[p::op(p::READ_OP, first, 31, 0, p::DATA)], p::WAIT_ALL);
        good &= r.is_ok() && seg.status(0) == p::DONE;
        let got = seg.bytes(p::DATA, 31 * 4096);
        for k in 0..31u64 {
            let l = first + k;
            let b = &got[k as usize * 4096..][..4096];
            let ok = if want[l as usize] == 0 {
                b.iter().all(|x| *x == 0)
            } else {
                *b == tests::ldisk_block(l, want[l as usize])[..]
            };
            if !ok {
                println!(
                    "ldisk_test: logical block {l} is wrong (first word {:#x})",
                    u64::from_le_bytes(b[..8].try_into().unwrap_or_default())
                );
            }
            good &= ok;
        }
    }
    c.check(
        good,
        "after the kill and a new boot, every logical block reads its last write through the map on the disk",
    );
    c.finish("ldisk_test")
}
