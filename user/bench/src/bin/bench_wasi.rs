//! The `wasi` suite's Scion side: the WASI workloads (`user/wasi-programs`: `wasibench
//! cpu`, and `sql` on `/speedtest.sql`, `bench/wasi/speedtest.sql`) run as whole
//! programs, compiled ahead of time (the boot image's programs named by the arguments,
//! `${AOT:wasibench} ${AOT:sql}`) and interpreted by the `wasi` runner (wasmi), each
//! started with SPAWN and waited for; the ticks (instructions under icount) from the
//! request to the program's end, start-up included as the Linux side's fork and exec
//! are.
//!
//! For each workload: `BENCH wasi_<workload>_<aot|wasmi> median=… min=… max=…
//! samples=…` (elapsed ticks), and where they went: `…_busy` (the CPU's, idle taken
//! out: `KERNEL_INFO`'s idle count) and `…_files` (the files server's busy ticks in its
//! requests, `files_api::PROFILE`). Workloads: `start` (`cpu 0`: start-up and end
//! alone), `cpu` (sort, hash, matrix product),
//! `sqlmem` (the SQLite script on a database in memory) and `sqlfile` (on a new file
//! of the files server each run: baiofs on the disk, each commit's `fsync`).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use rt::{env, println, sys};

rt::entry!(main);

fn report(name: &str, mut v: Vec<u64>) {
    if v.is_empty() {
        return;
    }
    v.sort_unstable();
    println!(
        "BENCH {} median={} min={} max={} samples={} unit=ticks/run",
        name,
        v[v.len() / 2],
        v[0],
        v[v.len() - 1],
        v.len()
    );
}

/// One run of `cmd`: (elapsed, busy, files' busy) ticks, or why it did not run.
fn run(cmd: &str, slot: u64, files: u64) -> Result<(u64, u64, u64), String> {
    let task = slot + 1;
    let f0 = files_api::client::profile(files).map_or(0, |[b]| b);
    let (i0, t0) = (sys::idle_tsc(), sys::rdtsc());
    env::spawn(cmd, slot).map_err(|e| format!("{e:?}"))?;
    while sys::cap_info(task).is_ok() {
        sys::sleep_us(500);
    }
    let (t1, i1) = (sys::rdtsc(), sys::idle_tsc());
    let f1 = files_api::client::profile(files).map_or(0, |[b]| b);
    let _ = sys::cap_delete(slot);
    let _ = sys::cap_delete(task);
    Ok((t1 - t0, (t1 - t0).saturating_sub(i1 - i0), f1.saturating_sub(f0)))
}

fn main() -> i32 {
    let words: Vec<&str> = rt::args().split(' ').skip(1).filter(|w| !w.is_empty()).collect();
    let smoke = words.contains(&"smoke");
    let names: Vec<&str> = words.iter().copied().filter(|w| *w != "smoke").collect();
    let [cpu_aot, sql_aot] = names[..] else {
        println!("bench_wasi: usage: bench_wasi [smoke] WASIBENCH-AOT SQL-AOT");
        return 1;
    };
    let files = rt::alloc_slot();
    if env::lookup("files", files).is_err() {
        println!("bench_wasi: needs files");
        return 1;
    }
    let slot = rt::alloc_slot_pair();
    let samples = if smoke { 1 } else { 3 };
    // (workload, the program compiled ahead of time, the module and its arguments; `{}`:
    // a database new for each run)
    let workloads = [
        ("start", cpu_aot, "/wasi/wasibench.wasm cpu 0"),
        ("cpu", cpu_aot, "/wasi/wasibench.wasm cpu 1"),
        ("sqlmem", sql_aot, "/wasi/sql.wasm :memory: /speedtest.sql"),
        ("sqlfile", sql_aot, "/wasi/sql.wasm /bench-{}.db /speedtest.sql"),
    ];
    let mut failed = false;
    for (w, aot, args) in workloads {
        for (engine, runner) in [("aot", aot), ("wasmi", "wasi")] {
            let (mut el, mut busy, mut fs) = (Vec::new(), Vec::new(), Vec::new());
            for i in 0..samples {
                let cmd = format!("{runner} --dir=/ {}", args.replace("{}", &format!("{engine}-{i}")));
                match run(&cmd, slot, files) {
                    Ok((e, b, f)) => {
                        el.push(e);
                        busy.push(b);
                        fs.push(f);
                    }
                    Err(e) => {
                        println!("bench_wasi: `{cmd}`: {e}");
                        failed = true;
                    }
                }
            }
            report(&format!("wasi_{w}_{engine}"), el);
            report(&format!("wasi_{w}_{engine}_busy"), busy);
            report(&format!("wasi_{w}_{engine}_files"), fs);
        }
    }
    println!("bench_wasi: done");
    i32::from(failed)
}
