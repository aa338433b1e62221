//! The `smp` suite: `bench_smp` on a machine with two CPUs, under plain TCG
//! (icount runs one CPU at a time, so it cannot show parallel work). Three boots; the
//! medians of their medians.

use super::plan::Plan;
use super::report::{aggregate, get, panels_svg, parse_bench, Fig, Panel, Results};
use crate::qemu::{self, Options};
use crate::test::scenarios::{run_scenario_log, Scenario};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

type Agg = BTreeMap<(String, String, String), Fig>;

const RUNS: usize = 3;
/// Target: two pairs on two CPUs against both on one.
const PAIRS_TARGET: f64 = 1.7;

/// What the Linux side does not measure (`bench/linux/smp.c`: no kernel lock to hand
/// over, no unmap figures): its "—" in the report.
const LINUX_ABSENT: [(&str, &str); 3] =
    [("linux", "ipc_pairs_handovers_2cpu"), ("linux", "unmap_touch_local"), ("linux", "unmap_touch_shootdown")];

/// The metrics and what they are.
const METRICS: [(&str, &str); 8] = [
    ("ipc_pairs_rps_1cpu", "two IPC pairs, both on CPU 0 (round trips/s)"),
    ("ipc_pairs_rps_2cpu", "two IPC pairs, one per CPU (round trips/s)"),
    ("ipc_pairs_handovers_2cpu", "times the kernel lock passed between the CPUs per 1000 round trips of that run"),
    ("ipc_rtt_same_cpu", "IPC round trip, server on the caller's CPU (cycles)"),
    ("ipc_rtt_cross_cpu", "IPC round trip, server on the other CPU (cycles)"),
    ("unmap_touch_local", "touch a page (pager maps it) and unmap it, no other CPU on the space (cycles)"),
    ("unmap_touch_shootdown", "the same while a thread of the space runs on CPU 1: a shootdown each (cycles)"),
    ("smp_null_syscall", "null system call, big kernel lock taken and released (cycles)"),
];

/// The suite's one mode is plain TCG, in a smoke run too (icount runs one CPU at a time).
pub(super) fn smp_suite(a: &crate::Artifacts, vmlinuz: &Path, initramfs: &Path, plan: &Plan) -> Result<String, String> {
    let modes = vec![("tcg", false, "tcg".to_string())];
    let runs = plan.runs(RUNS);
    let mut results: Results = BTreeMap::new();
    for run in 1..=runs {
        eprintln!("[smp {run}/{runs}] linux, tcg, 2 CPUs");
        let opts = Options {
            cpus: 2,
            ..Options::new(
                "tcg".into(),
                false,
                plan.linux("console=ttyS0 rdinit=/init panic=-1 quiet kbench=smp"),
                None,
            )
        };
        let out = qemu::run_to_end(vmlinuz, initramfs, &opts, Duration::from_secs(600), None)?;
        let path = plan.log("linux", &format!("linux-smp-{run}.log"), &out.log)?;
        if !out.log.contains("kbench: done") {
            return Err(format!("the Linux smp run did not finish; see {}", path.display()));
        }
        for (m, f) in parse_bench(&out.log) {
            results.entry(("linux".into(), "tcg".into())).or_default().entry(m).or_default().push(f);
        }
        eprintln!("[smp {run}/{runs}] scion, tcg, 2 CPUs");
        let sc =
            Scenario { cpus: Some(2), limit_s: 600, ..Scenario::bench("bench-smp", "smp", &[("ARGS", plan.args())])? };
        let (ok, log) = run_scenario_log(a, &sc, "tcg")?;
        let path = plan.log("scion", &format!("scion-smp-{run}.log"), &log)?;
        if !ok || !log.contains("bench_smp: done") {
            return Err(format!("the Scion smp run failed; see {}", path.display()));
        }
        for (m, f) in parse_bench(&log) {
            results.entry(("scion".into(), "tcg".into())).or_default().entry(m).or_default().push(f);
        }
    }
    let agg = aggregate(&results);
    plan.finish("smp", &agg, &modes, runs, &LINUX_ABSENT, || (svg(&agg), report(&agg)))
}

fn g(agg: &Agg, m: &str) -> Option<u64> {
    get(agg, "scion", "tcg", m)
}

fn lx(agg: &Agg, m: &str) -> Option<u64> {
    get(agg, "linux", "tcg", m)
}

fn cell(v: Option<u64>) -> String {
    v.map_or("—".into(), |v| v.to_string())
}

fn ratio(a: Option<u64>, b: Option<u64>) -> Option<f64> {
    a.zip(b).map(|(a, b)| a as f64 / b.max(1) as f64)
}

fn report(agg: &Agg) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Suite `smp` (several CPUs)\n");
    let _ = writeln!(
        s,
        "`bench_smp` on a machine with 2 CPUs under plain TCG (multi-threaded: each virtual CPU a host \
         thread; icount would run them one at a time). Medians of {RUNS} boots; cycles are the guest's TSC.\n"
    );
    let _ = writeln!(s, "| metric | what | Scion | Linux (pipes, `bench/linux/smp.c`) |\n|---|---|---:|---:|");
    for (m, what) in METRICS {
        let _ = writeln!(s, "| `{m}` | {what} | {} | {} |", cell(g(agg, m)), cell(lx(agg, m)));
    }
    let pairs = ratio(g(agg, "ipc_pairs_rps_2cpu"), g(agg, "ipc_pairs_rps_1cpu"));
    let cross = ratio(g(agg, "ipc_rtt_cross_cpu"), g(agg, "ipc_rtt_same_cpu"));
    let shoot = g(agg, "unmap_touch_shootdown").zip(g(agg, "unmap_touch_local")).map(|(a, b)| a as i64 - b as i64);
    let lpairs = ratio(lx(agg, "ipc_pairs_rps_2cpu"), lx(agg, "ipc_pairs_rps_1cpu"));
    let _ = writeln!(s, "\n| ratio | value | target |\n|---|---:|---|");
    let _ = writeln!(
        s,
        "| IPC pairs, 2 CPUs / 1 CPU | {} | ≥ {PAIRS_TARGET}×: {} |",
        pairs.map_or("—".into(), |r| format!("{r:.2}×")),
        match pairs {
            Some(r) if r >= PAIRS_TARGET => "met",
            Some(_) => "**missed**",
            None => "—",
        }
    );
    let _ =
        writeln!(s, "| Linux: IPC pairs, 2 CPUs / 1 CPU | {} | |", lpairs.map_or("—".into(), |r| format!("{r:.2}×")));
    let _ = writeln!(
        s,
        "| IPC round trip across CPUs / within one | {} | |",
        cross.map_or("—".into(), |r| format!("{r:.2}×"))
    );
    let _ = writeln!(
        s,
        "| a shootdown to one CPU (unmap with it − without) | {} cycles | |",
        shoot.map_or("—".into(), |v| v.to_string())
    );
    let _ = writeln!(
        s,
        "\nEvery kernel entry takes the big kernel lock but one: IPC between two threads of one CPU goes \
         through the fastpath without it while nobody holds it (a CPU that takes the lock waits until no \
         other is in that fastpath), so the two pairs run side by side and the lock passes between the \
         CPUs only for the clock and the benchmark's own sleeps (`ipc_pairs_handovers_2cpu`). A round \
         trip across CPUs takes the general path, a reschedule IPI and a halted CPU's wake-up each way.\n"
    );
    s
}

fn svg(agg: &Agg) -> String {
    let panels: Vec<Panel> = vec![
        (
            "IPC pairs: round trips per second".into(),
            vec![
                ("Scion, both pairs on CPU 0".into(), g(agg, "ipc_pairs_rps_1cpu")),
                ("Scion, a pair per CPU".into(), g(agg, "ipc_pairs_rps_2cpu")),
                ("Linux, both pairs on CPU 0".into(), lx(agg, "ipc_pairs_rps_1cpu")),
                ("Linux, a pair per CPU".into(), lx(agg, "ipc_pairs_rps_2cpu")),
            ],
        ),
        (
            "IPC round trip (cycles)".into(),
            vec![
                ("Scion, server on the same CPU".into(), g(agg, "ipc_rtt_same_cpu")),
                ("Scion, server on the other CPU".into(), g(agg, "ipc_rtt_cross_cpu")),
                ("Linux, same CPU".into(), lx(agg, "ipc_rtt_same_cpu")),
                ("Linux, other CPU".into(), lx(agg, "ipc_rtt_cross_cpu")),
            ],
        ),
        (
            "Touch and unmap a page (cycles)".into(),
            vec![
                ("no other CPU on the space".into(), g(agg, "unmap_touch_local")),
                ("shootdown to CPU 1".into(), g(agg, "unmap_touch_shootdown")),
            ],
        ),
    ];
    panels_svg(&panels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_judges_the_pairs_target() {
        let mut agg = Agg::new();
        let mut put = |m: &str, v: u64| {
            agg.insert(("scion".into(), "tcg".into(), m.into()), Fig { median: v, min: v, max: v, samples: 1 });
        };
        put("ipc_pairs_rps_1cpu", 100_000);
        put("ipc_pairs_rps_2cpu", 120_000);
        put("unmap_touch_local", 5000);
        put("unmap_touch_shootdown", 8000);
        let r = report(&agg);
        assert!(r.contains("| IPC pairs, 2 CPUs / 1 CPU | 1.20× | ≥ 1.7×: **missed** |"), "{r}");
        assert!(r.contains("| a shootdown to one CPU (unmap with it − without) | 3000 cycles | |"), "{r}");
        assert!(svg(&agg).contains("a pair per CPU"));
    }
}
