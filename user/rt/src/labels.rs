//! Where each protocol's message labels lie: one range per protocol, disjoint, so that a
//! server that speaks several (the cache: its own, grafts' and reconfiguration's; any
//! server: root's notices) can never take one protocol's request for another's. Each
//! protocol is declared with `rt::protocol!`, which checks at compile time that its
//! labels lie in the range its declaration names (`pub enum Request<'a> in
//! rt::labels::CACHE`), and the ranges are checked against each other here. A new protocol takes a free range below.
//! Labels declared outside a protocol (root's notices, `proto::RESERVE`, `proto::update`)
//! are checked against their range where they are declared: this module names none of
//! the modules above it.

use core::ops::Range;

/// Root's protocol (`rt::proto`: EXIT, SPAWN, LOOKUP, ... UPDATE_DONE).
pub const ROOT: Range<u64> = 0x01..0x20;
/// The echo test server (`echo_api`).
pub const ECHO: Range<u64> = 0x20..0x30;
/// Root's notices to servers (`rt::server::GONE`, `SUCCEEDED`).
pub const NOTICES: Range<u64> = 0x40..0x48;
/// sigma0 (`sigma0_api`).
pub const SIGMA0: Range<u64> = 0x50..0x60;
/// The memory servers (`mem_api`, and `rt::proto::RESERVE`, `RELEASE`).
pub const MEM: Range<u64> = 0x60..0x70;
/// The console driver (`rt::proto::console`).
pub const CONSOLE: Range<u64> = 0x70..0x78;
/// The block service (`blk_api`).
pub const BLK: Range<u64> = 0x80..0x90;
/// The shared cache (`cache_api`).
pub const CACHE: Range<u64> = 0x90..0xa0;
/// The files server (`files_api`).
pub const FILES: Range<u64> = 0xa0..0xb0;
/// The metering program (`meter_api`).
pub const METER: Range<u64> = 0xb0..0xb8;
/// The network (`net_api`).
pub const NET: Range<u64> = 0xc0..0xe0;
/// Grafts, at every server with a graft point (`graft_api`).
pub const GRAFT: Range<u64> = 0xe0..0xf0;
/// Online reconfiguration and live update, at every swappable server (`swap_api`, and
/// `rt::proto::update`).
pub const SWAP: Range<u64> = 0xf0..0x100;
/// The kernel's own messages: faults, page faults, interrupts (`abi::ipc::label`).
pub const KERNEL: Range<u64> = 0xfff0..0x10000;

/// Every range, for the check below and for tools.
pub const ALL: [(&str, Range<u64>); 14] = [
    ("root", ROOT),
    ("echo", ECHO),
    ("notices", NOTICES),
    ("sigma0", SIGMA0),
    ("mem", MEM),
    ("console", CONSOLE),
    ("blk", BLK),
    ("cache", CACHE),
    ("files", FILES),
    ("meter", METER),
    ("net", NET),
    ("graft", GRAFT),
    ("swap", SWAP),
    ("kernel", KERNEL),
];

/// Whether every label in `labels` lies in `range`.
pub const fn all_in(range: Range<u64>, labels: &[u64]) -> bool {
    let mut i = 0;
    while i < labels.len() {
        if labels[i] < range.start || labels[i] >= range.end {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether no two of `labels` are the same.
pub const fn distinct(labels: &[u64]) -> bool {
    let mut i = 0;
    while i < labels.len() {
        let mut j = i + 1;
        while j < labels.len() {
            if labels[i] == labels[j] {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

/// Whether no two of `ranges` share a label (and none is empty or holds label 0, which
/// is a reply's).
pub const fn disjoint(ranges: &[(&str, Range<u64>)]) -> bool {
    let mut i = 0;
    while i < ranges.len() {
        let a = &ranges[i].1;
        if a.start == 0 || a.start >= a.end {
            return false;
        }
        let mut j = i + 1;
        while j < ranges.len() {
            let b = &ranges[j].1;
            if a.start < b.end && b.start < a.end {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

const _: () = assert!(disjoint(&ALL), "two protocols' label ranges overlap");
const _: () = assert!(all_in(KERNEL, &[abi::ipc::label::FAULT, abi::ipc::label::PAGE_FAULT, abi::ipc::label::IRQ]));
