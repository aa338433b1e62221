//! What the benchmark programs share: the `BENCH` line xtask reads.
#![no_std]

extern crate alloc;

use alloc::vec::Vec;
use rt::println;

/// Print `name`'s samples as one `BENCH` line (median, min, max; xtask parses it).
/// Nothing for no samples.
pub fn report(name: &str, unit: &str, mut v: Vec<u64>) {
    if v.is_empty() {
        return;
    }
    v.sort_unstable();
    println!(
        "BENCH {} median={} min={} max={} samples={} unit={}",
        name,
        v[v.len() / 2],
        v[0],
        v[v.len() - 1],
        v.len(),
        unit
    );
}
