//! The `wasi` bench suite's CPU-bound workload (`cargo xtask bench wasi`; its SQLite
//! one is `sql` on `bench/wasi/speedtest.sql`): one source, built for WASI (Scion runs
//! it compiled ahead of time and interpreted) and natively for the Linux guest.
//! `wasibench cpu [ROUNDS]`: 200,000 pseudo-random numbers sorted, their bytes hashed
//! (FNV-1a), and a 96×96 matrix product in `f64`, ROUNDS times (1); prints a checksum
//! the suite compares across the three.
use std::hint::black_box;

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn cpu_round(seed: u64) -> u64 {
    let mut s = seed;
    let mut v: Vec<u64> = (0..200_000).map(|_| xorshift(&mut s)).collect();
    v.sort_unstable();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for x in &v {
        for b in x.to_le_bytes() {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    const M: usize = 96;
    let a: Vec<f64> = (0..M * M).map(|i| ((i * 7 % 13) as f64) * 0.5 + (xorshift(&mut s) % 8) as f64).collect();
    let b: Vec<f64> = (0..M * M).map(|i| ((i * 5 % 11) as f64) - 3.0).collect();
    let mut c = vec![0f64; M * M];
    for i in 0..M {
        for k in 0..M {
            let aik = a[i * M + k];
            for j in 0..M {
                c[i * M + j] += aik * b[k * M + j];
            }
        }
    }
    let trace: f64 = (0..M).map(|i| c[i * M + i]).sum();
    h ^ trace.to_bits()
}

fn cpu(rounds: u64) -> u64 {
    (0..rounds).fold(0, |acc, r| acc ^ black_box(cpu_round(0x9e37_79b9_7f4a_7c15 + r)))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    match args.get(1).map(String::as_str) {
        // (No rounds: start-up and end alone, the suite's `start`.)
        Some("cpu") if num(2, 1) == 0 => println!("wasibench: no rounds"),
        Some("cpu") => println!("wasibench: cpu checksum={:016x}", cpu(num(2, 1))),
        _ => {
            println!("usage: wasibench cpu [ROUNDS]");
            std::process::exit(2);
        }
    }
}
