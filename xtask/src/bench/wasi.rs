//! `cargo xtask bench wasi`: programs people already have, on Scion and natively. One
//! source (`user/wasi-programs/src/bin/wasibench.rs`) built for WASI — which Scion runs
//! compiled ahead of time (wasm2c and clang, `user/lib/wasi-aot`) and interpreted by the
//! `wasi` runner (wasmi) — and natively for the Linux guest (static, glibc). Workloads:
//! `cpu` (`wasibench`: sort, hash and a matrix product: the target, ≤ 1.5× native),
//! `sqlmem` (`sql` on `bench/wasi/speedtest.sql`, a reduced speedtest-like SQLite mix,
//! on a database in memory: SQLite's own work) and
//! `sqlfile` (the same on a file: on Scion baiofs on the disk through `files`, each
//! commit's `fsync`; on Linux the initramfs's root, in RAM). Each figure is a whole
//! program from its start request to its end, start-up included (SPAWN on Scion, fork
//! and exec on Linux), in ticks: instructions under icount. Scion's side also says
//! where the ticks went: the CPU's busy part (idle taken out) and the files server's.
//! Every run prints its checksum; all must agree.

use super::plan::{bench_options, Plan};
use super::report::{aggregate, get, panels_svg, parse_bench, Agg, Panel, Results};
use crate::qemu;
use crate::test::scenarios::{run_scenario_log, Scenario};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

const WORKLOADS: [(&str, &str); 4] = [
    ("start", "start-up and end alone (`wasibench cpu 0`)"),
    ("cpu", "CPU-bound: 200,000 numbers sorted, their bytes hashed, a 96×96 f64 matrix product"),
    ("sqlmem", "SQLite (`sql` on `bench/wasi/speedtest.sql`), database in memory: 2,000 rows inserted in 20 transactions, 30 queries, an update, a delete"),
    ("sqlfile", "SQLite, the same on a new file (Scion: baiofs on the disk, a journal and fsyncs at each commit; Linux: the initramfs, RAM)"),
];

/// The checksums the runs printed (`wasibench: WORKLOAD checksum=…`), by workload.
fn checksums(log: &str, into: &mut BTreeMap<String, BTreeSet<String>>) {
    for l in log.lines() {
        let Some(rest) = l.trim().strip_prefix("wasibench: ") else { continue };
        if let Some((w, sum)) = rest.split_once(" checksum=") {
            into.entry(w.to_string()).or_default().insert(sum.trim().to_string());
        }
    }
}

pub(super) fn wasi_suite(
    a: &crate::Artifacts,
    vmlinuz: &Path,
    initramfs: &Path,
    plan: &Plan,
) -> Result<String, String> {
    let dir = &plan.dir;
    let disk = dir.join("wasi-disk.img");
    let script = crate::project_root().join("bench/wasi/speedtest.sql");
    let modes = plan.modes();
    let steps = modes.len() * 2;
    let mut step = 0;
    let mut results: Results = BTreeMap::new();
    let mut sums = BTreeMap::new();
    for (mode, icount, accel) in &modes {
        step += 1;
        eprintln!("[wasi {step}/{steps}] scion, {mode}");
        // A new disk for each mode: the `sqlfile` runs leave their databases on it, and
        // a second mode's would find them (its inserts refused, another checksum).
        crate::image::make(
            &disk.display().to_string(),
            64 << 20,
            &[format!("files:1:2048:fs={}+{}", crate::wasi::dir().display(), script.display())],
        )?;
        let sc = Scenario {
            disk_file: Some(disk.clone()),
            icount: *icount,
            limit_s: 3600,
            memory: "1G".into(),
            ..Scenario::bench(&format!("bench-wasi-{mode}"), "wasi", &[("ARGS", plan.args())])?
        };
        let (ok, log) = run_scenario_log(a, &sc, accel)?;
        let path = plan.log("scion", &format!("scion-wasi-{mode}.log"), &log)?;
        if !ok {
            return Err(format!("the Scion wasi run failed; see {}", path.display()));
        }
        checksums(&log, &mut sums);
        for (m, f) in parse_bench(&log) {
            results.entry(("scion".into(), mode.to_string())).or_default().entry(m).or_default().push(f);
        }
        step += 1;
        eprintln!("[wasi {step}/{steps}] linux, {mode}");
        let opts = bench_options(
            accel.clone(),
            *icount,
            plan.linux("console=ttyS0 rdinit=/init panic=-1 quiet kbench=wasi"),
            None,
        );
        let out = qemu::run_to_end(vmlinuz, initramfs, &opts, Duration::from_secs(1800), None)?;
        let log = plan.log("linux", &format!("linux-wasi-{mode}.log"), &out.log)?;
        if !out.log.contains("kbench: done") {
            return Err(format!("the Linux wasi run did not finish; see {}", log.display()));
        }
        checksums(&out.log, &mut sums);
        for (m, f) in parse_bench(&out.log) {
            results.entry(("linux".into(), mode.to_string())).or_default().entry(m).or_default().push(f);
        }
    }
    // sqlmem and sqlfile run the same statements: one checksum for both.
    let mut by_workload: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (w, s) in sums {
        by_workload.entry(w).or_default().extend(s);
    }
    for (w, s) in &by_workload {
        if s.len() != 1 {
            return Err(format!("wasibench {w}: the runs disagree: checksums {s:?}"));
        }
    }
    let agg = aggregate(&results);
    plan.finish("wasi", &agg, &modes, 1, &[], || (plot(&agg), report(&agg, &modes, &by_workload)))
}

fn cell(v: Option<u64>) -> String {
    v.map_or("—".into(), |v| v.to_string())
}

fn ratio(a: Option<u64>, b: Option<u64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0 => format!("{:.2}×", a as f64 / b as f64),
        _ => "—".into(),
    }
}

fn report(agg: &Agg, modes: &[(&str, bool, String)], sums: &BTreeMap<String, BTreeSet<String>>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Suite `wasi` (programs people already have: WASI on Scion against native Linux)\n");
    let _ = writeln!(
        s,
        "One source (`user/wasi-programs/src/bin/wasibench.rs`) built for WASI preview 1 and natively for the \
         Linux guest. Scion runs the WASI build compiled ahead of time (wasm2c + clang, every linear-memory access \
         checked: `aot`) and interpreted (wasmi: `wasmi`); Linux runs the native build. Each figure is a whole \
         program, from the request that starts it to its end (start-up included: SPAWN on Scion, fork and exec \
         on Linux), in ticks: instructions under `icount`, cycles under `tcg`; the median of the runs. \
         Checksums (all runs agree): {}.\n",
        sums.iter()
            .map(|(w, s)| format!("{w} {}", s.iter().next().map_or("—", String::as_str)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (w, what) in WORKLOADS {
        let _ = writeln!(s, "- `{w}`: {what}");
    }
    for (mode, _, _) in modes {
        let _ = writeln!(s, "\n## {mode}\n");
        let _ = writeln!(
            s,
            "| workload | Linux native | Scion AOT | AOT / native | Scion wasmi | wasmi / native | wasmi / AOT |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
        let part = |sys: &str, m: &str| {
            get(agg, sys, mode, &format!("wasi_cpu_{m}"))
                .zip(get(agg, sys, mode, &format!("wasi_start_{m}")))
                .map(|(c, s)| c.saturating_sub(s))
        };
        let (n, aot, wi) = (part("linux", "native"), part("scion", "aot"), part("scion", "wasmi"));
        let _ = writeln!(
            s,
            "| cpu less start | {} | {} | {} | {} | {} | {} |",
            cell(n),
            cell(aot),
            ratio(aot, n),
            cell(wi),
            ratio(wi, n),
            ratio(wi, aot)
        );
        for (w, _) in WORKLOADS {
            let n = get(agg, "linux", mode, &format!("wasi_{w}_native"));
            let aot = get(agg, "scion", mode, &format!("wasi_{w}_aot"));
            let wi = get(agg, "scion", mode, &format!("wasi_{w}_wasmi"));
            let _ = writeln!(
                s,
                "| {w} | {} | {} | {} | {} | {} | {} |",
                cell(n),
                cell(aot),
                ratio(aot, n),
                cell(wi),
                ratio(wi, n),
                ratio(wi, aot)
            );
        }
        let _ = writeln!(
            s,
            "\nWhere Scion's ticks went (each run: elapsed = busy + idle; the files server's busy part of it):\n"
        );
        let _ = writeln!(s, "| workload, engine | elapsed | busy | idle (waiting for the disk) | files server |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|");
        for (w, _) in WORKLOADS {
            for e in ["aot", "wasmi"] {
                let el = get(agg, "scion", mode, &format!("wasi_{w}_{e}"));
                let busy = get(agg, "scion", mode, &format!("wasi_{w}_{e}_busy"));
                let files = get(agg, "scion", mode, &format!("wasi_{w}_{e}_files"));
                let idle = el.zip(busy).map(|(a, b)| a.saturating_sub(b));
                let _ = writeln!(s, "| {w}, {e} | {} | {} | {} | {} |", cell(el), cell(busy), cell(idle), cell(files));
            }
        }
    }
    s
}

fn plot(agg: &Agg) -> String {
    let mode = "icount";
    let panels: Vec<Panel> = WORKLOADS
        .iter()
        .map(|(w, _)| {
            (
                format!("{w}: instructions per run (icount)"),
                vec![
                    ("Linux, native".to_string(), get(agg, "linux", mode, &format!("wasi_{w}_native"))),
                    ("Scion, WASI compiled (wasm2c)".to_string(), get(agg, "scion", mode, &format!("wasi_{w}_aot"))),
                    (
                        "Scion, WASI interpreted (wasmi)".to_string(),
                        get(agg, "scion", mode, &format!("wasi_{w}_wasmi")),
                    ),
                ],
            )
        })
        .collect();
    panels_svg(&panels)
}
