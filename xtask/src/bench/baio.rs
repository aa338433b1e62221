//! The `baio` suite: BAIO Figures 3-5, Scion's BAIO beside Linux's pread and io_uring.

use super::plan::{bench_options, Plan, RUNS};
use super::report::{aggregate, get, parse_bench, Agg, Results};
use crate::qemu::{self, Options};
use crate::test::scenarios::{run_scenario_log, Scenario};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// Working sets in MiB (the last is the headline one: larger than Scion's first 4 MiB
/// block of cache), requests per run, queue depth. Both guests get `BAIO_MEMORY`: room
/// for the 1 GiB working set in Linux's page cache and in Scion's shared cache, which
/// grows into free memory.
const BAIO_MEMORY: &str = "2G";
const BAIO_WS: [u64; 3] = [4, 64, 1024];
const BAIO_N: u64 = 2000;
const BAIO_DEPTH: u64 = 8;

/// Headline metrics: (Scion name, what it is).
const BAIO_SCION: [(&str, &str); 12] = [
    ("baio_direct_random_read", "BAIO direct, 8 in flight"),
    ("baio_buffered_random_read", "BAIO buffered (shared cache server), 8 in flight"),
    ("sync_random_read", "one synchronous request at a time (raw)"),
    ("threadpool_random_read", "8 threads, synchronous requests (KAIO emulation)"),
    ("baio_direct_seq_read", "BAIO direct, sequential"),
    ("sync_seq_read", "synchronous, sequential"),
    ("baio_direct_random_write", "BAIO direct writes"),
    ("baio_buffered_random_write", "BAIO buffered writes (write-through)"),
    ("sync_random_write", "synchronous writes"),
    ("threadpool_random_write", "8 threads, synchronous writes"),
    ("baio_direct_seq_write", "BAIO direct, sequential writes"),
    ("sync_seq_write", "synchronous sequential writes"),
];
const BAIO_LINUX: [(&str, &str); 9] = [
    ("pread_direct_random_read", "pread, O_DIRECT"),
    ("pread_buffered_random_read", "pread through the page cache"),
    ("io_uring_direct_random_read", "io_uring, O_DIRECT, 8 in flight"),
    ("pread_direct_seq_read", "pread, O_DIRECT, sequential"),
    ("io_uring_direct_seq_read", "io_uring, O_DIRECT, sequential"),
    ("pwrite_direct_random_write", "pwrite, O_DIRECT"),
    ("pwrite_buffered_random_write", "pwrite into the page cache (no flush)"),
    ("io_uring_direct_random_write", "io_uring writes, O_DIRECT"),
    ("io_uring_direct_seq_write", "io_uring writes, O_DIRECT, sequential"),
];

/// The smoke's working sets (MiB; the last the headline), requests per run.
const BAIO_SMOKE_WS: [u64; 2] = [1, 2];
const BAIO_SMOKE_N: u64 = 16;

/// The machines (`-m`, MiB) on which the largest allocation one program gets is measured
/// (`system/bench/memory.toml`), and the smoke's.
const MEMORY_MIB: [u64; 3] = [512, 3072, 6144];
const MEMORY_SMOKE_MIB: [u64; 1] = [512];

pub(super) fn baio_suite(
    a: &crate::Artifacts,
    vmlinuz: &Path,
    initramfs: &Path,
    plan: &Plan,
) -> Result<String, String> {
    let dir = &plan.dir;
    let (ws_list, n): (&[u64], u64) = plan.count((&BAIO_WS[..], BAIO_N), (&BAIO_SMOKE_WS[..], BAIO_SMOKE_N));
    // One image for both systems: a BAIO device with segment `bench`; Linux reads and
    // writes the same blocks through /dev/vda.
    let seg_blocks = ws_list.iter().max().unwrap_or(&1) * 256;
    let disk = dir.join("baio-disk.img");
    let size = (seg_blocks + 4096) * baio::BLOCK as u64;
    let v = crate::image::make(&disk.display().to_string(), size, &[format!("bench:1:{seg_blocks}")])?;
    let start = v.lookup("bench").ok_or("no bench segment")?.start;
    let ws: Vec<String> = ws_list.iter().map(|w| w.to_string()).collect();
    let args = format!("ws={} n={n} depth={BAIO_DEPTH}", ws.join(","));
    let modes = plan.modes();
    // icount is deterministic: one run; TCG figures are noisy: the median of three.
    let runs = |icount: bool| if icount { 1 } else { plan.runs(RUNS) };
    let steps: usize = modes.iter().map(|m| 2 * runs(m.1)).sum();
    let mut step = 0;
    let mut results: Results = BTreeMap::new();
    for (mode, icount, accel) in &modes {
        for run in 1..=runs(*icount) {
            step += 1;
            eprintln!("[baio {step}/{steps}] scion, {mode}, run {run}");
            let sc = Scenario {
                disk_file: Some(disk.clone()),
                icount: *icount,
                limit_s: plan.count(1800, 300),
                memory: BAIO_MEMORY.into(),
                ..Scenario::bench(
                    if *icount { "bench-baio-icount" } else { "bench-baio-tcg" },
                    "baio",
                    &[("ARGS", format!("{} {n} {BAIO_DEPTH}", ws.join(",")))],
                )?
            };
            let (ok, log) = run_scenario_log(a, &sc, accel)?;
            let path = plan.log("scion", &format!("scion-baio-{mode}.log"), &log)?;
            if !ok {
                return Err(format!("the Scion baio run failed; see {}", path.display()));
            }
            for (m, f) in parse_bench(&log) {
                results.entry(("scion".into(), mode.to_string())).or_default().entry(m).or_default().push(f);
            }
            step += 1;
            eprintln!("[baio {step}/{steps}] linux, {mode}, run {run}");
            let append =
                format!("console=ttyS0 rdinit=/init panic=-1 quiet kbench=baio seg={start}:{seg_blocks} {args}");
            let opts = Options {
                memory: BAIO_MEMORY.into(),
                ..bench_options(accel.clone(), *icount, plan.linux(&append), Some(disk.clone()))
            };
            let out = qemu::run_to_end(vmlinuz, initramfs, &opts, Duration::from_secs(1800), None)?;
            let log = plan.log("linux", &format!("linux-baio-{mode}.log"), &out.log)?;
            if !out.log.contains("kbench: baio done") {
                return Err(format!("the Linux baio run did not finish; see {}", log.display()));
            }
            for (m, f) in parse_bench(&out.log) {
                results.entry(("linux".into(), mode.to_string())).or_default().entry(m).or_default().push(f);
            }
        }
    }
    // The largest allocation one program gets at each `-m` (one boot each: it is a count
    // of pages, not a time), in the smoke's one mode or under plain TCG.
    let mem_list: &[u64] = plan.count(&MEMORY_MIB[..], &MEMORY_SMOKE_MIB[..]);
    let (mode, icount) = if plan.smoke { ("icount", true) } else { ("tcg", false) };
    for &mib in mem_list {
        eprintln!("[baio memory] scion, {mode}, -m {mib}M");
        let sc = Scenario {
            icount,
            limit_s: 1800,
            memory: format!("{mib}M"),
            ..Scenario::bench(&format!("bench-memory-{mib}m"), "memory", &[("PAGES", (mib * 256).to_string())])?
        };
        let (ok, log) = run_scenario_log(a, &sc, "tcg")?;
        let path = plan.log("scion", &format!("scion-memory-{mib}m.log"), &log)?;
        if !ok {
            return Err(format!("the Scion memory run at -m {mib}M failed; see {}", path.display()));
        }
        for (m, f) in parse_bench(&log) {
            let m = format!("{m}_{mib}m");
            results.entry(("scion".into(), mode.to_string())).or_default().entry(m).or_default().push(f);
        }
    }
    let agg = aggregate(&results);
    plan.finish("baio", &agg, &modes, plan.runs(RUNS), &[], || {
        (baio_svg(&agg, ws_list), baio_report(&agg, ws_list, n, mem_list))
    })
}

/// The report of working sets `ws_list` (MiB; the last the headline), `n` requests each,
/// and of the largest allocation on machines of `mem_list` MiB.
fn baio_report(agg: &Agg, ws_list: &[u64], n: u64, mem_list: &[u64]) -> String {
    let mut s = String::new();
    let head = ws_list.last().unwrap_or(&0);
    let _ = writeln!(s, "# Suite `baio`\n");
    let _ = writeln!(s, "Pipelined 8 KiB requests (read or write, then a checksum of the 8 KiB), {n} per figure after {} of warm-up (buffered variants also read the working set once in order, up to 128 MiB, so a cache it fits in is warm), {BAIO_DEPTH} in flight for the asynchronous variants, on one virtio-blk image (the BAIO segment `bench` on Scion, the same blocks of /dev/vda on Linux). **rps** = requests per second of guest time under plain TCG (median of three runs; noisy: the host's disk cache and load show through); **ipr** = busy guest instructions per request under icount (total minus the CPU's idle time: Scion's kernel counts it; Linux's from /proc/timer_list). Headline working set: {head} MiB (larger than Scion's first 4 MiB block of cache; both guests have {BAIO_MEMORY} of memory, and Scion's cache grows into what is free); other working sets carry `_ws<MiB>`.\n", n / 4);
    let fmt = |v: Option<u64>| v.map_or("—".to_string(), |v| v.to_string());
    for &w in ws_list {
        let suffix = if w == *head { String::new() } else { format!("_ws{w}") };
        let _ = writeln!(s, "## Working set {w} MiB\n");
        let _ = writeln!(s, "| system | metric | rps (tcg) | ipr (icount) | what |");
        let _ = writeln!(s, "|---|---|---:|---:|---|");
        for (sys, list) in [("scion", &BAIO_SCION[..]), ("linux", &BAIO_LINUX[..])] {
            for (m, what) in list {
                let name = format!("{m}{suffix}");
                let rps = get(agg, sys, "tcg", &format!("{name}_rps"));
                let ipr = get(agg, sys, "icount", &format!("{name}_ipr"));
                let _ = writeln!(s, "| {sys} | `{name}_rps` | {} | {} | {what} |", fmt(rps), fmt(ipr));
            }
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## What the disk's cache flushes cost\n");
    let _ = writeln!(s, "QEMU's disk has a write cache (`cache=writeback`); blk flushes it at every ordering point of a metadata update and at `SYNC` (`docs/baio-format.md`). Per operation, {} of each (a write: one 4 KiB block, direct): ops/s under TCG (the host's `fdatasync` included), busy instructions under icount (the guest's side only: its waits are idle), and the flushes blk sent. The mark move's cost is `mark_write` less `write`.\n", 8);
    let _ = writeln!(s, "| operation | ops/s (tcg) | instructions/op (icount) | flushes/op |");
    let _ = writeln!(s, "|---|---:|---:|---:|");
    for (m, what) in [
        ("create_delete", "a CREATE and a DELETE of a 256-block segment"),
        ("mark_write", "a write 256 blocks past the written mark (256 blocks of zeros, the mark)"),
        ("write", "the same write under the mark"),
        ("sync", "a SYNC with nothing to write"),
    ] {
        let rps = get(agg, "scion", "tcg", &format!("baio_meta_{m}_rps"));
        let ipr = get(agg, "scion", "icount", &format!("baio_meta_{m}_ipr"));
        let fl = get(agg, "scion", "icount", &format!("baio_meta_{m}_flushes"))
            .or_else(|| get(agg, "scion", "tcg", &format!("baio_meta_{m}_flushes")));
        let _ = writeln!(
            s,
            "| {what} | {} | {} | {} |",
            fmt(rps),
            fmt(ipr),
            fl.map_or("—".into(), |f| format!("{:.2}", f as f64 / 100.0))
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "## The largest allocation one program gets\n");
    let _ = writeln!(
        s,
        "`ram_test most` alone on a machine of each size, its page limit all of the RAM: it sets pages \
         aside until its memory server refuses, then touches and checks every one (`system/bench/memory.toml`; \
         the storage stack is not started). The rest is the kernel's, the boot image's and the servers'.\n"
    );
    let _ = writeln!(s, "| `-m` | largest allocation (MiB) | of the RAM |\n|---:|---:|---:|");
    for &mib in mem_list {
        let m = format!("largest_alloc_mib_{mib}m");
        let got = get(agg, "scion", "tcg", &m).or_else(|| get(agg, "scion", "icount", &m));
        let share = got.map_or("—".into(), |g| format!("{}%", g * 100 / mib.max(1)));
        let _ = writeln!(s, "| {mib} MiB | {} | {share} |", fmt(got));
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "## Targets (headline working set unless named)\n");
    let verdict = |ok: bool| if ok { "**met**" } else { "**missed**" };
    // (target, faster system and metric, slower system and metric, least ratio)
    let targets = [
        (
            "BAIO direct ≥ 1.5× synchronous on random reads",
            ("scion", "baio_direct_random_read"),
            ("scion", "sync_random_read"),
            1.5,
        ),
        (
            "BAIO direct ≥ Linux io_uring O_DIRECT on random reads",
            ("scion", "baio_direct_random_read"),
            ("linux", "io_uring_direct_random_read"),
            1.0,
        ),
        (
            "Sequential BAIO direct within 5% of synchronous",
            ("scion", "baio_direct_seq_read"),
            ("scion", "sync_seq_read"),
            0.95,
        ),
        // The shared cache against Linux's page cache where both hold the working set.
        (
            "BAIO buffered ≥ Linux's page cache on random reads, 64 MiB working set",
            ("scion", "baio_buffered_random_read_ws64"),
            ("linux", "pread_buffered_random_read_ws64"),
            1.0,
        ),
    ];
    for (mode, suffix, unit) in [
        ("tcg", "_rps", "requests/s under TCG"),
        ("icount", "_ipr", "busy instructions per request under icount (lower is better; ratio inverted)"),
    ] {
        let _ = writeln!(s, "Judged on {unit}:\n");
        for (what, (sa, ma), (sb, mb), least) in targets {
            // A working set the run did not measure (the smoke's are smaller).
            if ma.rsplit_once("_ws").is_some_and(|(_, w)| !ws_list.iter().any(|x| x.to_string() == w)) {
                continue;
            }
            let (Some(a), Some(b)) =
                (get(agg, sa, mode, &format!("{ma}{suffix}")), get(agg, sb, mode, &format!("{mb}{suffix}")))
            else {
                continue;
            };
            if a == 0 || b == 0 {
                continue;
            }
            // Throughput: higher is better; instructions per request: lower is better.
            let x = if suffix == "_rps" { a as f64 / b as f64 } else { b as f64 / a as f64 };
            let _ = writeln!(s, "- {what}: {x:.2}× — {}.", verdict(x >= least));
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "![baio suite](baio.svg)\n");
    s
}

/// Random-read throughput against working-set size (log x), one line per variant,
/// like the paper's figures.
fn baio_svg(agg: &Agg, ws_list: &[u64]) -> String {
    let head = *ws_list.last().unwrap_or(&1);
    let lines: [(&str, &str, &str, &str); 7] = [
        ("scion", "baio_direct_random_read", "#2b7bb9", "Scion BAIO direct"),
        ("scion", "baio_buffered_random_read", "#6baed6", "Scion BAIO buffered"),
        ("scion", "sync_random_read", "#08306b", "Scion synchronous"),
        ("scion", "threadpool_random_read", "#9e9ac8", "Scion thread pool"),
        ("linux", "io_uring_direct_random_read", "#e07b39", "Linux io_uring O_DIRECT"),
        ("linux", "pread_direct_random_read", "#a63603", "Linux pread O_DIRECT"),
        ("linux", "pread_buffered_random_read", "#fdae6b", "Linux pread buffered"),
    ];
    let pts = |sys: &str, m: &str| -> Vec<(u64, u64)> {
        ws_list
            .iter()
            .filter_map(|w| {
                let name = if *w == head { format!("{m}_rps") } else { format!("{m}_ws{w}_rps") };
                get(agg, sys, "tcg", &name).map(|v| (*w, v))
            })
            .collect()
    };
    let maxv = lines.iter().flat_map(|l| pts(l.0, l.1)).map(|p| p.1).max().unwrap_or(1).max(1) as f64;
    let (w, h, left, top, right, bottom) = (820.0, 460.0, 80.0, 50.0, 230.0, 50.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let lx = |ws: u64| {
        let (a, b) = ((ws_list.first().copied().unwrap_or(1) as f64).log2(), (head as f64).log2());
        left + ((ws as f64).log2() - a) / (b - a).max(1.0) * pw
    };
    let ly = |v: u64| top + ph - v as f64 / maxv * ph;
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    let _ = writeln!(
        s,
        "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">Suite baio: random 8 KiB reads per second (TCG) against working-set size</text>"
    );
    let _ = writeln!(
        s,
        "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/><line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"black\"/>",
        top + ph,
        left + pw,
        top + ph,
        top + ph
    );
    for &ws in ws_list {
        let _ =
            writeln!(s, "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{ws} MiB</text>", lx(ws), top + ph + 18.0);
    }
    for k in 0..=4 {
        let v = (maxv * k as f64 / 4.0) as u64;
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v}</text><line x1=\"{left}\" y1=\"{:.1}\" x2=\"{}\" y2=\"{:.1}\" stroke=\"#eee\"/>",
            left - 6.0,
            ly(v) + 4.0,
            ly(v),
            left + pw,
            ly(v)
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">working set (log scale)</text>",
        left + pw / 2.0,
        h - 10.0
    );
    for (i, (sys, m, color, label)) in lines.iter().enumerate() {
        let p = pts(sys, m);
        let path: Vec<String> = p.iter().map(|(ws, v)| format!("{:.1},{:.1}", lx(*ws), ly(*v))).collect();
        let dash = if *sys == "linux" { " stroke-dasharray=\"6,3\"" } else { "" };
        if !path.is_empty() {
            let _ = writeln!(
                s,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{dash}/>",
                path.join(" ")
            );
            for (ws, v) in &p {
                let _ = writeln!(s, "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"/>", lx(*ws), ly(*v));
            }
        }
        let y = top + 18.0 * i as f64;
        let _ = writeln!(
            s,
            "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{color}\" stroke-width=\"2\"{dash}/><text x=\"{}\" y=\"{}\">{label}</text>",
            w - right + 15.0,
            w - right + 40.0,
            w - right + 45.0,
            y + 4.0
        );
    }
    s.push_str("</svg>\n");
    s
}
