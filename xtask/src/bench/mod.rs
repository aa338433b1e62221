//! `cargo xtask bench [SUITE…] [--list] [--smoke]`: boot Scion's measurement program and
//! the Linux baseline (Debian's kernel with an initramfs of static benchmark programs) in
//! the same QEMU machine, in each mode (icount: rdtsc = guest instructions; tcg: guest
//! cycles; kvm where the host really has it), several runs each; write
//! `target/bench/SUITE.json`, `target/bench/report.md` and an SVG plot per suite.
//!
//! `--smoke` (also the `bench_smoke` entry of `cargo xtask test`): every suite end to end
//! once, in one mode, with a few of each count (`smoke` to the bench programs), into
//! `target/bench-smoke/`; it fails when a side does not yield a figure its suite's report
//! reads (`Plan::finish`) or a guest's answer does not parse, so a suite that rots fails
//! the test suite rather than the next real run.

use crate::qemu::{self, Options};
use crate::scenarios::{run_scenario_log, Scenario};
use crate::{build, project_root, sh};
use serde_json::json;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

pub const SUITES: [(&str, &str); 7] = [
    ("kernel", "microkernel costs: syscall, IPC, switches, page faults, map/demap, IRQ; Linux side by side"),
    (
        "baio",
        "BAIO Figures 3-5: pipelined 8 KiB requests over working sets; BAIO direct/buffered, sync, thread pool; Linux pread O_DIRECT/buffered and io_uring",
    ),
    ("net", "HTTP downloads (64 KiB, 1 MiB, 16 MiB) and 64-byte TCP round trips from the host; Scion's net+httpd beside a Linux read/write server"),
    ("cue", "Cue Tables 1-8: one transfer by Cue with (k, t) schedules or a read/write loop beside a metering program, 1-4 in parallel, ftpd; Linux sendfile and read/write beside"),
    ("k42", "K42 Table 1, Figures 4-5 and 7: a call through the translation table and interposed against a plain call; swap time with 0-16 clients and a null swap against an IPC round trip; streaming with fixed LRU, fixed MRU and adaptive policies"),
    ("smp", "two CPUs (plain TCG): IPC pairs on one CPU and one per CPU, IPC round trip within and across CPUs, unmap with and without a TLB shootdown, the null system call under the big kernel lock; Linux's pipes pairs beside"),
    ("grafts", "VINO Tables 1-5, Figure 1: per-call cost of each extension technology at the cache's eviction point (null, 64-entry hot list) and blk's stream point (MD5 per KiB), upcall, load, miss, disk time, break-even; Linux's null and MD5 eBPF beside"),
];
const RUNS: usize = 3;

/// Metrics of the `kernel` suite, in report order, with what each side measures.
const KERNEL_METRICS: [(&str, &str, &str); 12] = [
    ("null_syscall", "cheapest system call", "getpid via syscall()"),
    ("ipc_rtt_8b_cross", "call + reply, 8 bytes, two tasks", "pipe ping-pong of 8 bytes, two processes"),
    ("ipc_rtt_512b_cross", "call + reply, 512-byte strings both ways (echo strings)", "pipe ping-pong of 512 bytes"),
    ("ipc_rtt_8b_same", "call + reply, two threads of one task", "futex wake/wait round trip, two threads"),
    ("thread_switch", "yield between two threads (half a pair)", "sched_yield between two processes (half a pair)"),
    ("page_fault_user_pager", "fault → user pager IPC → map → resume", "first write to an anonymous page"),
    ("page_fault_uffd", "—", "userfaultfd fault → handler → UFFDIO_COPY"),
    ("map_page_ipc", "map one page by IPC (call with a map item)", "mmap + touch + munmap of one page"),
    ("demap_fanout_1", "demap a page mapped into 1 space", "—"),
    ("demap_fanout_64", "demap a page mapped into 64 spaces", "mmap + touch + munmap of one page"),
    ("irq_to_driver", "interrupt → user-level driver IPC", "—"),
    ("cr3_switch_floor", "2 × null syscall + 2 × address-space switch", "—"),
];

#[derive(Clone, Debug, Default)]
pub(crate) struct Fig {
    pub(crate) median: u64,
    pub(crate) min: u64,
    pub(crate) max: u64,
    pub(crate) samples: u64,
}

/// (system, mode) → metric → per-run figures.
pub(crate) type Results = BTreeMap<(String, String), BTreeMap<String, Vec<Fig>>>;

pub(crate) fn parse_bench(log: &str) -> Vec<(String, Fig)> {
    let mut out = Vec::new();
    for l in log.lines() {
        let Some(rest) = l.trim().strip_prefix("BENCH ") else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let Some(name) = it.next() else { continue };
        let mut f = Fig::default();
        let mut has = false;
        for kv in it {
            let Some((k, v)) = kv.split_once('=') else {
                continue;
            };
            let n = v.parse().ok();
            match (k, n) {
                ("median", Some(n)) => {
                    f.median = n;
                    has = true;
                }
                ("min", Some(n)) => f.min = n,
                ("max", Some(n)) => f.max = n,
                ("samples", Some(n)) => f.samples = n,
                _ => {}
            }
        }
        if has {
            if f.max == 0 {
                f.min = f.median;
                f.max = f.median;
            }
            out.push((name.to_string(), f));
        }
    }
    out
}

pub(crate) fn modes() -> Vec<(&'static str, bool, String)> {
    let accel = qemu::accel();
    let mut m = vec![("icount", true, "tcg".to_string()), ("tcg", false, "tcg".to_string())];
    if accel == "kvm" {
        m.push(("kvm", false, "kvm".to_string()));
    }
    m
}

/// A bench run: the real one (`target/bench/`: every mode, several runs, the programs'
/// own counts) or the smoke (`--smoke`, `target/bench-smoke/`: icount alone, one run,
/// `smoke` to the programs: a few of each count).
pub(crate) struct Plan {
    pub(crate) smoke: bool,
    pub(crate) dir: PathBuf,
    /// The serial logs of the suite under way, by system (their tails show when it fails).
    logs: RefCell<BTreeMap<String, PathBuf>>,
}

impl Plan {
    pub(crate) fn new(smoke: bool) -> Plan {
        let dir = crate::target_dir().join(if smoke { "bench-smoke" } else { "bench" });
        Plan { smoke, dir, logs: RefCell::new(BTreeMap::new()) }
    }

    /// The modes to measure in: all (`modes()`), icount alone in a smoke run.
    pub(crate) fn modes(&self) -> Vec<(&'static str, bool, String)> {
        modes().into_iter().filter(|m| !self.smoke || m.0 == "icount").collect()
    }

    /// Runs per figure: `real`, one in a smoke run.
    pub(crate) fn runs(&self, real: usize) -> usize {
        if self.smoke {
            1
        } else {
            real
        }
    }

    /// `real`, or `small` in a smoke run.
    pub(crate) fn count<T>(&self, real: T, small: T) -> T {
        if self.smoke {
            small
        } else {
            real
        }
    }

    /// A bench program's `${ARGS}` (`smoke` or nothing).
    pub(crate) fn args(&self) -> String {
        self.count("", "smoke").to_string()
    }

    /// The Linux baseline's kernel command line: `append`, and `smoke` (init's argument)
    /// in a smoke run.
    pub(crate) fn linux(&self, append: &str) -> String {
        format!("{append}{}", self.count("", " smoke"))
    }

    /// Write a system's serial log `name` into the plan's directory and remember it.
    pub(crate) fn log(&self, sys: &str, name: &str, text: &str) -> Result<PathBuf, String> {
        let path = self.dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        self.logs.borrow_mut().insert(sys.to_string(), path.clone());
        Ok(path)
    }

    /// `e`, with the last lines of the suite's serial logs.
    pub(crate) fn fail(&self, e: &str) -> String {
        let mut out = e.to_string();
        for (sys, path) in self.logs.borrow().iter() {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let _ = write!(out, "\n  {sys}'s serial log, {} (its last lines):", path.display());
            for l in &lines[lines.len().saturating_sub(30)..] {
                let _ = write!(out, "\n    | {l}");
            }
        }
        out
    }

    /// A suite's end: its plot and report (`make`, which reads the figures with `get`),
    /// `SUITE.json` and `SUITE.svg` written; in a smoke run, an error naming each figure
    /// the report or plot read in a mode measured that no side yielded, but for those
    /// `absent` names ((system, metric): a side that has no such measurement).
    pub(crate) fn finish<R>(
        &self,
        suite: &str,
        agg: &Agg,
        modes: &[(&str, bool, String)],
        runs: usize,
        absent: &[(&str, &str)],
        make: impl FnOnce() -> (String, R),
    ) -> Result<R, String> {
        let ((svg, report), read) = reads(make);
        write_suite(&self.dir, suite, agg, modes, runs, svg)?;
        self.logs.borrow_mut().clear();
        if self.smoke {
            let measured: Vec<&str> = modes.iter().map(|m| m.0).collect();
            let lost = missing(&read, agg, &measured, absent);
            if !lost.is_empty() {
                return Err(format!(
                    "suite `{suite}`: its report reads {} figure(s) no side yielded: {}",
                    lost.len(),
                    lost.join(", ")
                ));
            }
            eprintln!(
                "xtask: suite `{suite}`: each of the {} figures its report reads was yielded",
                read.iter().filter(|k| measured.contains(&k.1.as_str())).count()
            );
        }
        Ok(report)
    }
}

/// A benchmark machine's options: one CPU whatever the default (`cargo xtask test`
/// gives its machines two: a Linux guest with two CPUs under icount stalls).
pub(crate) fn bench_options(accel: String, icount: bool, append: String, disk: Option<PathBuf>) -> Options {
    Options { cpus: 1, ..Options::new(accel, icount, append, disk) }
}

/// (system, mode, metric) → the aggregated figure.
pub(crate) type Agg = BTreeMap<(String, String, String), Fig>;

thread_local! {
    /// The figures `get` was asked for while `reads` runs.
    static READ: RefCell<Option<BTreeSet<(String, String, String)>>> = const { RefCell::new(None) };
}

/// Run `f` (a report or plot) and note each figure it reads with `get`.
pub(crate) fn reads<T>(f: impl FnOnce() -> T) -> (T, BTreeSet<(String, String, String)>) {
    READ.with(|r| *r.borrow_mut() = Some(BTreeSet::new()));
    let v = f();
    (v, READ.with(|r| r.borrow_mut().take()).unwrap_or_default())
}

/// The figures in `read` of a mode in `modes` that `agg` lacks, as `system/mode/metric`,
/// but for the `absent` ones (system, metric).
pub(crate) fn missing(
    read: &BTreeSet<(String, String, String)>,
    agg: &Agg,
    modes: &[&str],
    absent: &[(&str, &str)],
) -> Vec<String> {
    read.iter()
        .filter(|(sys, mode, m)| {
            modes.contains(&mode.as_str())
                && !absent.iter().any(|(s, a)| s == sys && a == m)
                && !agg.contains_key(&(sys.clone(), mode.clone(), m.clone()))
        })
        .map(|(sys, mode, m)| format!("{sys}/{mode}/{m}"))
        .collect()
}

/// The Debian kernel to boot as the baseline (installed when missing, as root).
fn linux_kernel() -> Result<PathBuf, String> {
    let find = || {
        let mut v: Vec<PathBuf> = std::fs::read_dir("/boot")
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-")))
            .collect();
        v.sort();
        v.pop()
    };
    if let Some(k) = find() {
        return Ok(k);
    }
    let install = "apt-get install -y --no-install-recommends linux-image-amd64";
    let is_root = Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0")).unwrap_or(false);
    if !is_root {
        return Err(format!("no Linux kernel in /boot for the baseline; install one with: sudo {install}"));
    }
    eprintln!("xtask: installing Debian's kernel package for the Linux baseline");
    sh(Command::new("sh")
        .args(["-c", &format!("apt-get update -qq && DEBIAN_FRONTEND=noninteractive {install} >/dev/null")]))?;
    find().ok_or_else(|| "the kernel package installed no /boot/vmlinuz-*".into())
}

fn ensure_cc() -> Result<(), String> {
    if Command::new("cc").arg("--version").output().is_ok() && Path::new("/usr/lib/x86_64-linux-gnu/libc.a").exists() {
        return Ok(());
    }
    eprintln!("xtask: installing a C compiler and static libc for the Linux baseline");
    sh(Command::new("sh").args([
        "-c",
        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y gcc libc6-dev >/dev/null",
    ]))
}

/// One entry of a cpio "newc" archive.
fn cpio_entry(out: &mut Vec<u8>, name: &str, mode: u32, rdev: (u32, u32), data: &[u8], ino: u32) {
    let hdr = format!(
        "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
        ino,
        mode,
        0,
        0,
        1,
        0,
        data.len(),
        0,
        0,
        rdev.0,
        rdev.1,
        name.len() + 1,
        0
    );
    out.extend_from_slice(hdr.as_bytes());
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
    out.extend_from_slice(data);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// The virtio-blk and virtio-net drivers' modules of the baseline kernel, in load order
/// (the `baio` suite loads 1–6, the `net` suite 1–5 and 7–9).
const VIRTIO_MODULES: [&str; 9] = [
    "drivers/virtio/virtio_ring.ko",
    "drivers/virtio/virtio.ko",
    "drivers/virtio/virtio_pci_legacy_dev.ko",
    "drivers/virtio/virtio_pci_modern_dev.ko",
    "drivers/virtio/virtio_pci.ko",
    "drivers/block/virtio_blk.ko",
    "net/core/failover.ko",
    "drivers/net/net_failover.ko",
    "drivers/net/virtio_net.ko",
];

/// Build the baseline's initramfs: /dev/console, the static benchmark as /init, and
/// the virtio modules of `vmlinuz` as /m/1.ko … /m/9.ko.
fn linux_initramfs(dir: &Path, vmlinuz: &Path) -> Result<PathBuf, String> {
    ensure_cc()?;
    let src = project_root().join("bench/linux");
    let bin = dir.join("kbench");
    sh(Command::new("cc")
        .args(["-static", "-O2", "-pthread", "-o"])
        .arg(&bin)
        .arg(src.join("kbench.c"))
        .arg(src.join("baio.c"))
        .arg(src.join("net.c"))
        .arg(src.join("graft.c"))
        .arg(src.join("smp.c")))?;
    let init = std::fs::read(&bin).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    cpio_entry(&mut out, "dev", 0o040755, (0, 0), &[], 1);
    cpio_entry(&mut out, "dev/console", 0o020600, (5, 1), &[], 2);
    cpio_entry(&mut out, "init", 0o100755, (0, 0), &init, 3);
    // The grafts suite's MD5 as an XDP program (instructions; `cargo xtask build` made it).
    match std::fs::read(crate::grafts::xdp_md5()) {
        Ok(data) => cpio_entry(&mut out, "md5.bpf", 0o100644, (0, 0), &data, 1000),
        Err(e) => eprintln!(
            "xtask: {}: {e} (the Linux side of the grafts suite needs it)",
            crate::grafts::xdp_md5().display()
        ),
    }
    // nginx, its libraries and configuration (the net suite's second Linux server).
    match crate::nginx::files(dir) {
        Ok(files) => {
            for (i, (name, mode, data)) in files.iter().enumerate() {
                cpio_entry(&mut out, name, *mode, (0, 0), data, 2000 + i as u32);
            }
        }
        Err(e) => eprintln!("xtask: nginx for the Linux guest: {e} (the net suite needs it)"),
    }
    let version =
        vmlinuz.file_name().map(|n| n.to_string_lossy().trim_start_matches("vmlinuz-").to_string()).unwrap_or_default();
    let mods = Path::new("/lib/modules").join(&version).join("kernel");
    cpio_entry(&mut out, "m", 0o040755, (0, 0), &[], 4);
    for (i, m) in VIRTIO_MODULES.iter().enumerate() {
        match std::fs::read(mods.join(m)) {
            Ok(data) => cpio_entry(&mut out, &format!("m/{}.ko", i + 1), 0o100644, (0, 0), &data, 5 + i as u32),
            Err(e) => {
                eprintln!("xtask: {}: {e} (the Linux side of the baio and net suites needs it)", mods.join(m).display())
            }
        }
    }
    cpio_entry(&mut out, "TRAILER!!!", 0, (0, 0), &[], 0);
    let path = dir.join("linux-initramfs.cpio");
    std::fs::write(&path, out).map_err(|e| e.to_string())?;
    Ok(path)
}

fn host_cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default()
}

fn qemu_version() -> String {
    Command::new(qemu::QEMU)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or("").to_string())
        .unwrap_or_default()
}

pub fn bench(args: &[String]) -> Result<ExitCode, String> {
    if args.iter().any(|a| a == "--list") {
        for (s, what) in SUITES {
            println!("{s}: {what}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let wanted: Vec<&str> = args.iter().map(String::as_str).filter(|a| !a.starts_with('-')).collect();
    for w in &wanted {
        if !SUITES.iter().any(|(s, _)| s == w) {
            return Err(format!("no suite `{w}` (cargo xtask bench --list)"));
        }
    }
    let wanted: Vec<&str> = if wanted.is_empty() { SUITES.iter().map(|(s, _)| *s).collect() } else { wanted };
    let plan = Plan::new(args.iter().any(|a| a == "--smoke"));
    qemu::ensure_qemu()?;
    let dir = plan.dir.clone();
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let a = build()?;
    if args.iter().any(|a| a == "--probe") {
        // The kernel suite's instruction breakdowns alone (a few minutes, no figures).
        let b = breakdowns(&a, &dir);
        std::fs::write(dir.join("probe.md"), &b).map_err(|e| e.to_string())?;
        println!("{b}");
        return Ok(ExitCode::SUCCESS);
    }
    run_suites(&a, &wanted, &plan)
}

/// Run the `wanted` suites as `plan` says with this build; write the report.
fn run_suites(a: &crate::Artifacts, wanted: &[&str], plan: &Plan) -> Result<ExitCode, String> {
    let dir = &plan.dir;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let vmlinuz = linux_kernel()?;
    let initramfs = linux_initramfs(dir, &vmlinuz)?;
    let mut report = String::new();
    let (t0, mut failed) = (std::time::Instant::now(), Vec::new());
    for suite in wanted {
        let t = std::time::Instant::now();
        let r = match *suite {
            "kernel" => kernel_suite(a, &vmlinuz, &initramfs, plan),
            "net" => net_suite(a, &vmlinuz, &initramfs, plan),
            "cue" => crate::cuebench::cue_suite(a, &vmlinuz, &initramfs, plan),
            "grafts" => crate::graftbench::grafts_suite(a, &vmlinuz, &initramfs, plan),
            "k42" => crate::k42bench::k42_suite(a, plan),
            "smp" => crate::smpbench::smp_suite(a, &vmlinuz, &initramfs, plan),
            _ => baio_suite(a, &vmlinuz, &initramfs, plan),
        };
        match r {
            Ok(r) => {
                report += &r;
                if plan.smoke {
                    eprintln!("xtask: smoke of suite `{suite}`: ok in {} s", t.elapsed().as_secs());
                }
            }
            // The smoke goes on to the next suite: it names every broken one.
            Err(e) if plan.smoke => {
                let why =
                    format!("smoke of suite `{suite}` FAILED after {} s: {}", t.elapsed().as_secs(), plan.fail(&e));
                eprintln!("xtask: {why}");
                plan.logs.borrow_mut().clear();
                failed.push((*suite, why));
            }
            Err(e) => return Err(e),
        }
    }
    std::fs::write(dir.join("report.md"), &report).map_err(|e| e.to_string())?;
    if !plan.smoke {
        println!("{report}");
    }
    eprintln!("xtask: wrote {}/report.md", dir.display());
    if plan.smoke {
        eprintln!("xtask: the smoke of {} suite(s) took {} s", wanted.len(), t0.elapsed().as_secs());
        if !failed.is_empty() {
            let names: Vec<&str> = failed.iter().map(|f| f.0).collect();
            let whys: Vec<&str> = failed.iter().map(|f| f.1.as_str()).collect();
            return Err(format!("the smoke failed for suite(s) {}\n{}", names.join(", "), whys.join("\n")));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cargo xtask test`'s `bench_smoke`: `cargo xtask bench --smoke` (every suite) with
/// this build; why it failed, if it did.
pub fn smoke_test(a: &crate::Artifacts) -> Result<(), String> {
    let all: Vec<&str> = SUITES.iter().map(|(s, _)| *s).collect();
    run_suites(a, &all, &Plan::new(true)).map(|_| ())
}

/// What a side of the `kernel` suite does not measure (its "—" in `KERNEL_METRICS`).
const KERNEL_ABSENT: [(&str, &str); 4] = [
    ("scion", "page_fault_uffd"),
    ("linux", "demap_fanout_1"),
    ("linux", "irq_to_driver"),
    ("linux", "cr3_switch_floor"),
];

fn kernel_suite(a: &crate::Artifacts, vmlinuz: &Path, initramfs: &Path, plan: &Plan) -> Result<String, String> {
    let dir = &plan.dir;
    let modes = plan.modes();
    let runs = plan.runs(RUNS);
    let steps = modes.len() * runs * 2;
    let mut step = 0;
    let mut results: Results = BTreeMap::new();
    for (mode, icount, accel) in &modes {
        for run in 1..=runs {
            step += 1;
            eprintln!("[kernel {step}/{steps}] scion, {mode}, run {run}/{runs}");
            let sc = Scenario {
                icount: *icount,
                limit_s: 300,
                ..Scenario::bench(
                    if *icount { "bench-icount" } else { "bench-tcg" },
                    "kernel",
                    &[("ARGS", plan.args())],
                )?
            };
            let (ok, log) = run_scenario_log(a, &sc, accel)?;
            let path = plan.log("scion", &format!("scion-{mode}-{run}.log"), &log)?;
            if !ok {
                return Err(format!("the Scion measurement boot failed; see {}", path.display()));
            }
            for (m, f) in parse_bench(&log) {
                results.entry(("scion".into(), mode.to_string())).or_default().entry(m).or_default().push(f);
            }
            step += 1;
            eprintln!("[kernel {step}/{steps}] linux, {mode}, run {run}/{runs}");
            let opts =
                bench_options(accel.clone(), *icount, plan.linux("console=ttyS0 rdinit=/init panic=-1 quiet"), None);
            let out = qemu::run_to_end(vmlinuz, initramfs, &opts, Duration::from_secs(600), None)?;
            let path = plan.log("linux", &format!("linux-{mode}-{run}.log"), &out.log)?;
            if !out.log.contains("kbench: done") {
                return Err(format!("the Linux baseline did not finish; see {}", path.display()));
            }
            for (m, f) in parse_bench(&out.log) {
                results.entry(("linux".into(), mode.to_string())).or_default().entry(m).or_default().push(f);
            }
        }
    }
    let agg = aggregate(&results);
    let (report, fig3) = plan.finish("kernel", &agg, &modes, runs, &KERNEL_ABSENT, || {
        let (svg, fig3) = (svg(&agg), figure3_svg(&agg));
        (svg, (report_md(&agg, &modes), fig3))
    })?;
    std::fs::write(dir.join("kernel-fig3.svg"), fig3).map_err(|e| e.to_string())?;
    // The instruction breakdowns (gdb steps through a round trip; minutes): not in a smoke run.
    let breakdown = if plan.smoke {
        "The instruction breakdowns are not traced in a smoke run.\n".to_string()
    } else {
        breakdowns(a, dir)
    };
    Ok(format!("{report}\n{breakdown}"))
}

/// The instruction breakdowns of the probed round trips (`ipcprobe`), as report sections.
fn breakdowns(a: &crate::Artifacts, dir: &Path) -> String {
    let mut out = String::new();
    for p in &crate::ipcprobe::PROBES {
        eprintln!("[kernel] the instruction breakdown of one round trip, {} (gdb steps through it)", p.func);
        out += &match crate::ipcprobe::trace(a, dir, p) {
            Ok(steps) => crate::ipcprobe::report(p, &steps),
            Err(e) => format!("## Where the instructions of one round trip go: `{}`\n\nNot measured: {e}\n", p.func),
        };
        out.push('\n');
    }
    out
}

/// Median of the runs' medians, min of mins, max of maxes.
pub(crate) fn aggregate(r: &Results) -> BTreeMap<(String, String, String), Fig> {
    let mut out = BTreeMap::new();
    for ((sys, mode), metrics) in r {
        for (m, runs) in metrics {
            let mut meds: Vec<u64> = runs.iter().map(|f| f.median).collect();
            meds.sort_unstable();
            let f = Fig {
                median: meds[meds.len() / 2],
                min: runs.iter().map(|f| f.min).min().unwrap_or(0),
                max: runs.iter().map(|f| f.max).max().unwrap_or(0),
                samples: runs.iter().map(|f| f.samples).sum(),
            };
            out.insert((sys.clone(), mode.clone(), m.clone()), f);
        }
    }
    out
}

fn to_json(suite: &str, agg: &Agg, modes: &[(&str, bool, String)], runs: usize) -> serde_json::Value {
    let results: Vec<serde_json::Value> = agg
        .iter()
        .map(|((sys, mode, m), f)| {
            json!({
                "metric": m, "system": sys, "mode": mode, "value": f.median,
                "unit": if m.ends_with("_rps") { "requests/s" } else if m.contains("_kbps_") { "KiB/s (host clock)" } else if m.ends_with("_us") { "microseconds (host clock)" } else if m.contains("_ipk_") { "busy instructions per KiB" } else if mode == "icount" { "instructions" } else { "cycles" },
                "samples": f.samples, "min": f.min, "median": f.median, "max": f.max
            })
        })
        .collect();
    json!({
        "suite": suite,
        "host": {
            "qemu": qemu_version(),
            "cpu": host_cpu(),
            "modes": modes.iter().map(|m| json!({"mode": m.0, "accelerator": m.2, "icount": m.1})).collect::<Vec<_>>(),
            "runs_per_figure": runs,
            "machine": "q35, -cpu max, 512 MiB, 1 CPU"
        },
        "results": results
    })
}

/// A suite's figures as `SUITE.json` and its plot as `SUITE.svg` in `dir`.
fn write_suite(
    dir: &Path,
    suite: &str,
    agg: &Agg,
    modes: &[(&str, bool, String)],
    runs: usize,
    svg: String,
) -> Result<(), String> {
    let json = to_json(suite, agg, modes, runs);
    std::fs::write(dir.join(format!("{suite}.json")), serde_json::to_string_pretty(&json).unwrap())
        .map_err(|e| e.to_string())?;
    std::fs::write(dir.join(format!("{suite}.svg")), svg).map_err(|e| e.to_string())?;
    eprintln!("xtask: wrote {0}/{suite}.json, {0}/{suite}.svg", dir.display());
    Ok(())
}

/// A figure's median (noted if `reads` runs).
pub(crate) fn get(agg: &Agg, sys: &str, mode: &str, m: &str) -> Option<u64> {
    fig(agg, sys, mode, m).map(|f| f.median)
}

/// A figure (noted if `reads` runs).
pub(crate) fn fig<'a>(agg: &'a Agg, sys: &str, mode: &str, m: &str) -> Option<&'a Fig> {
    let key = (sys.to_string(), mode.to_string(), m.to_string());
    READ.with(|r| {
        if let Some(set) = r.borrow_mut().as_mut() {
            set.insert(key.clone());
        }
    });
    agg.get(&key)
}

fn report_md(agg: &BTreeMap<(String, String, String), Fig>, modes: &[(&str, bool, String)]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Suite `kernel`\n");
    let accels: Vec<String> = modes.iter().map(|(m, _, a)| format!("`{m}` on {a}")).collect();
    let _ = writeln!(
        s,
        "QEMU: {} · accelerators: {} · host CPU: {} · machine: q35, `-cpu max`, 512 MiB, 1 CPU · {} runs per figure (median of the runs' medians; min and max over all samples).\n",
        qemu_version(),
        accels.join(", "),
        host_cpu(),
        RUNS
    );
    let _ = writeln!(s, "Units: rdtsc ticks per operation — guest **instructions** under `icount` (`-icount shift=0,align=off,sleep=off`, deterministic), guest **cycles** under plain `tcg` (noisy; min–max shown).\n");
    for (mode, _, _) in modes {
        let _ = writeln!(s, "## Mode `{mode}`\n");
        let _ =
            writeln!(s, "| metric | Scion | Scion min–max | Linux | Linux / Scion | Scion measures | Linux measures |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---|---|");
        for (m, sw, lw) in KERNEL_METRICS {
            let sc = fig(agg, "scion", mode, m);
            let li = get(agg, "linux", mode, m);
            let fmt = |v: Option<u64>| v.map_or("—".to_string(), |v| v.to_string());
            let ratio = match (sc.map(|f| f.median), li) {
                (Some(a), Some(b)) if a > 0 => format!("{:.2}×", b as f64 / a as f64),
                _ => "—".into(),
            };
            let range = sc.map_or("—".to_string(), |f| format!("{}–{}", f.min, f.max));
            let _ = writeln!(
                s,
                "| `{m}` | {} | {range} | {} | {ratio} | {sw} | {lw} |",
                fmt(sc.map(|f| f.median)),
                fmt(li)
            );
        }
        if let (Some(ipc), Some(floor)) =
            (get(agg, "scion", mode, "ipc_rtt_8b_cross"), get(agg, "scion", mode, "cr3_switch_floor"))
        {
            let _ = writeln!(
                s,
                "\n`ipc_rtt_8b_cross / cr3_switch_floor` = {ipc} / {floor} = **{:.2}×**\n",
                ipc as f64 / floor as f64
            );
        }
    }
    // Targets, judged on instructions (icount).
    let _ = writeln!(s, "## Targets (judged in `icount`)\n");
    let g = |sys, m| get(agg, sys, "icount", m);
    let verdict = |ok: bool| if ok { "**met**" } else { "**missed**" };
    if let (Some(ipc), Some(floor)) = (g("scion", "ipc_rtt_8b_cross"), g("scion", "cr3_switch_floor")) {
        let r = ipc as f64 / floor as f64;
        let _ = writeln!(s, "- IPC round trip within 1.3× of the floor: {:.2}× — {}.", r, verdict(r <= 1.3));
    }
    if let (Some(ipc), Some(lin)) = (g("scion", "ipc_rtt_8b_cross"), g("linux", "ipc_rtt_8b_cross")) {
        let r = lin as f64 / ipc as f64;
        let _ = writeln!(
            s,
            "- At least 10× fewer instructions than the Linux pipe round trip: {:.1}× fewer — {}.",
            r,
            verdict(r >= 10.0)
        );
    }
    if let Some(ipc) = g("scion", "ipc_rtt_8b_cross") {
        let one_way = ipc / 2;
        let _ = writeln!(
            s,
            "- One-way IPC at most 250 instructions in the kernel: half a round trip is {one_way} instructions, an upper bound that includes the user-level call wrapper and loop — {}.",
            verdict(one_way <= 250)
        );
    }
    if let (Some(same), Some(null)) = (g("scion", "ipc_rtt_8b_same"), g("scion", "null_syscall")) {
        let bound = 2.4 * null as f64 + 20.0;
        let _ = writeln!(
            s,
            "- Round trip between two threads of one task at most 1.2 × two null system calls + 20: {same} against {bound:.0} — {}.",
            verdict(same as f64 <= bound)
        );
    }
    if let (Some(s512), Some(s8)) = (g("scion", "ipc_rtt_512b_cross"), g("scion", "ipc_rtt_8b_cross")) {
        let r = s512 as f64 / s8 as f64;
        let _ = writeln!(
            s,
            "- 512-byte strings each way at most 2× the 8-byte round trip: {r:.2}× — {}.",
            verdict(r <= 2.0)
        );
    }
    if let (Some(pf), Some(lin)) = (g("scion", "page_fault_user_pager"), g("linux", "page_fault_user_pager")) {
        let r = pf as f64 / lin as f64;
        let _ = writeln!(
            s,
            "- Page fault through a user-level pager at most 1.5× Linux's in-kernel anonymous fault: {:.2}× — {}.",
            r,
            verdict(r <= 1.5)
        );
    }
    let _ = writeln!(s, "\nA missed target is reported as such; the closing notes of the issues say why.\n\n![kernel suite](kernel.svg)\n");
    s += &figure3_md(agg, modes);
    s
}

/// The sizes of the Figure 3 curve that were measured (`rpc_str_N`), in order.
fn string_sizes(agg: &BTreeMap<(String, String, String), Fig>) -> Vec<u64> {
    let mut v: Vec<u64> = agg.keys().filter_map(|(_, _, m)| m.strip_prefix("rpc_str_")?.parse().ok()).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The L4 paper's Figure 3: round-trip time of an RPC against its message size, Scion
/// beside Linux pipes and Unix sockets.
fn figure3_md(agg: &BTreeMap<(String, String, String), Fig>, modes: &[(&str, bool, String)]) -> String {
    let sizes = string_sizes(agg);
    let mut s = String::new();
    if sizes.is_empty() {
        return s;
    }
    let _ = writeln!(s, "## Figure 3 (L4): round trip against message size\n");
    let _ = writeln!(
        s,
        "A call and its reply, each carrying a string of the size (the kernel copies it between the two \
         address spaces: each page of both ranges walked once — or not at all when the thread names the \
         buffer it named before and no mapping was taken away since, the fastpath's kept translations — \
         then one copy per piece within a page of either side, `rep movsq` for the words and `rep movsb` for \
         the rest: the CPU's string move is as fast as a vector loop at these sizes on current CPUs and \
         needs no SSE registers in a kernel that saves none; `icount` counts one instruction per 8 bytes it \
         moves), against a ping-pong of the \
         same bytes through two pipes and through a Unix stream socket pair between two Linux processes. \
         Both sides' user code is register-only (`rt::ipc::call_regs_string`, \
         `reply_wait_regs_string` in `echo strings`), as for `ipc_rtt_8b_cross`. `Δ/KiB`: the extra cost \
         of a KiB over the 8-byte string, from the 4 KiB point.\n"
    );
    for (mode, _, _) in modes {
        let unit = if *mode == "icount" { "instructions" } else { "cycles" };
        let _ = writeln!(s, "### Mode `{mode}` ({unit})\n");
        let _ = writeln!(
            s,
            "| bytes each way | Scion | Linux pipes | Linux Unix socket | pipes / Scion | socket / Scion |"
        );
        let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|");
        for n in &sizes {
            let sc = get(agg, "scion", mode, &format!("rpc_str_{n}"));
            let pi = get(agg, "linux", mode, &format!("rpc_str_{n}"));
            let un = get(agg, "linux", mode, &format!("unix_str_{n}"));
            let f = |v: Option<u64>| v.map_or("—".into(), |v| v.to_string());
            let r = |a: Option<u64>| match (a, sc) {
                (Some(a), Some(b)) if b > 0 => format!("{:.1}×", a as f64 / b as f64),
                _ => "—".into(),
            };
            let _ = writeln!(s, "| {n} | {} | {} | {} | {} | {} |", f(sc), f(pi), f(un), r(pi), r(un));
        }
        let per_kib = |sys: &str, m: &str| -> Option<f64> {
            let (lo, hi) = (sizes.first()?, sizes.last()?);
            let a = get(agg, sys, mode, &format!("{m}_{lo}"))? as f64;
            let b = get(agg, sys, mode, &format!("{m}_{hi}"))? as f64;
            (hi > lo).then(|| (b - a) / ((hi - lo) as f64 / 1024.0))
        };
        let f1 = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.0}"));
        let _ = writeln!(
            s,
            "\nΔ/KiB: Scion {}, Linux pipes {}, Linux Unix socket {}.\n",
            f1(per_kib("scion", "rpc_str")),
            f1(per_kib("linux", "rpc_str")),
            f1(per_kib("linux", "unix_str"))
        );
    }
    let _ = writeln!(s, "![Figure 3](kernel-fig3.svg)\n");
    s
}

/// Figure 3 as lines (log–log): instructions per round trip against bytes each way.
pub(crate) fn figure3_svg(agg: &BTreeMap<(String, String, String), Fig>) -> String {
    let sizes = string_sizes(agg);
    let series: [(&str, &str, &str, &str); 3] = [
        ("Scion", "scion", "rpc_str", "#2b7bb9"),
        ("Linux pipes", "linux", "rpc_str", "#e07b39"),
        ("Linux Unix socket", "linux", "unix_str", "#6a9f3a"),
    ];
    let pts = |sys: &str, m: &str| -> Vec<(u64, u64)> {
        sizes.iter().filter_map(|n| Some((*n, get(agg, sys, "icount", &format!("{m}_{n}"))?))).collect()
    };
    let all: Vec<u64> = series.iter().flat_map(|(_, sys, m, _)| pts(sys, m)).map(|p| p.1).collect();
    let (w, h, left, top, right, bottom) = (760.0, 460.0, 80.0, 50.0, 180.0, 50.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let (ymin, ymax) = (
        all.iter().copied().min().unwrap_or(1).max(1) as f64 / 1.5,
        all.iter().copied().max().unwrap_or(10).max(10) as f64 * 1.5,
    );
    let (xmin, xmax) =
        (sizes.first().copied().unwrap_or(8).max(1) as f64, sizes.last().copied().unwrap_or(4096).max(16) as f64);
    let x = |n: u64| left + ((n as f64).ln() - xmin.ln()) / (xmax.ln() - xmin.ln()).max(1e-9) * pw;
    let y = |v: u64| top + ph - ((v.max(1) as f64).ln() - ymin.ln()) / (ymax.ln() - ymin.ln()) * ph;
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n");
    let _ = writeln!(s, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    let _ = writeln!(s, "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">Figure 3 (L4): round trip against message size (icount: instructions, log–log)</text>");
    let _ =
        writeln!(s, "<rect x=\"{left}\" y=\"{top}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#999\"/>");
    for n in &sizes {
        let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{n}</text>", x(*n), top + ph + 16.0);
    }
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">bytes each way</text>",
        left + pw / 2.0,
        h - 10.0
    );
    let mut tick = 10u64;
    while (tick as f64) < ymax {
        if tick as f64 >= ymin {
            let _ = writeln!(s, "<line x1=\"{left}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{tick}</text>", left + pw, y(tick), y(tick), left - 6.0, y(tick) + 4.0);
        }
        tick *= 10;
    }
    for (i, (name, sys, m, color)) in series.iter().enumerate() {
        let p = pts(sys, m);
        let line: Vec<String> = p.iter().map(|(n, v)| format!("{:.1},{:.1}", x(*n), y(*v))).collect();
        let _ = writeln!(
            s,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>",
            line.join(" ")
        );
        for (n, v) in &p {
            let _ = writeln!(s, "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"/>", x(*n), y(*v));
        }
        let ly = top + 10.0 + 18.0 * i as f64;
        let _ = writeln!(s, "<rect x=\"{}\" y=\"{ly}\" width=\"12\" height=\"10\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\">{name}</text>", left + pw + 12.0, left + pw + 28.0, ly + 9.0);
    }
    s.push_str("</svg>\n");
    s
}

/// Grouped bars (log scale) of instructions per operation, Scion against Linux.
fn svg(agg: &BTreeMap<(String, String, String), Fig>) -> String {
    let rows: Vec<(&str, Option<u64>, Option<u64>)> = KERNEL_METRICS
        .iter()
        .map(|(m, _, _)| (*m, get(agg, "scion", "icount", m), get(agg, "linux", "icount", m)))
        .collect();
    let (w, row_h, left, top) = (900.0, 34.0, 190.0, 50.0);
    let h = top + row_h * rows.len() as f64 + 40.0;
    let maxv = rows.iter().flat_map(|r| [r.1, r.2]).flatten().max().unwrap_or(10).max(10) as f64;
    let scale = |v: u64| ((v.max(1) as f64).log10() / maxv.log10()) * (w - left - 120.0);
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n");
    let _ = writeln!(s, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    let _ =
        writeln!(s, "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">Suite kernel: guest instructions per operation (icount, log scale)</text>");
    let _ = writeln!(
        s,
        "<rect x=\"{left}\" y=\"30\" width=\"12\" height=\"10\" fill=\"#2b7bb9\"/><text x=\"{}\" y=\"39\">Scion</text>",
        left + 16.0
    );
    let _ = writeln!(
        s,
        "<rect x=\"{}\" y=\"30\" width=\"12\" height=\"10\" fill=\"#e07b39\"/><text x=\"{}\" y=\"39\">Linux</text>",
        left + 70.0,
        left + 86.0
    );
    for (i, (m, sc, li)) in rows.iter().enumerate() {
        let y = top + row_h * i as f64;
        let _ = writeln!(s, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{m}</text>", left - 8.0, y + 18.0);
        for (j, (v, color)) in [(sc, "#2b7bb9"), (li, "#e07b39")].iter().enumerate() {
            let yy = y + 4.0 + 13.0 * j as f64;
            match v {
                Some(v) => {
                    let bw = scale(*v).max(1.0);
                    let _ = writeln!(
                        s,
                        "<rect x=\"{left}\" y=\"{yy}\" width=\"{bw:.1}\" height=\"11\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{}\">{v}</text>",
                        left + bw + 4.0,
                        yy + 10.0
                    );
                }
                None => {
                    let _ = writeln!(s, "<text x=\"{left}\" y=\"{}\" fill=\"#999\">—</text>", yy + 10.0);
                }
            }
        }
    }
    s.push_str("</svg>\n");
    s
}

// ---- the `baio` suite ----

/// Working sets in MiB (the last is the headline one: larger than Scion's first 4 MiB
/// block of cache), requests per run, queue depth. Both guests get `BAIO_MEMORY`: room
/// for the 1 GiB working set in Linux's page cache and in Scion's shared cache, which
/// grows into free memory (issue 35 item 5).
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

fn baio_suite(a: &crate::Artifacts, vmlinuz: &Path, initramfs: &Path, plan: &Plan) -> Result<String, String> {
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
    let agg = aggregate(&results);
    plan.finish("baio", &agg, &modes, plan.runs(RUNS), &[], || (baio_svg(&agg, ws_list), baio_report(&agg, ws_list, n)))
}

/// The report of working sets `ws_list` (MiB; the last the headline), `n` requests each.
fn baio_report(agg: &Agg, ws_list: &[u64], n: u64) -> String {
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

/// The `net` suite's downloads: (name, file, fetches per figure).
const NET_SIZES: [(&str, &str, u64); 3] = [("64k", "64k.bin", 64), ("1m", "1m.bin", 8), ("16m", "16m.bin", 2)];
/// Figures the net report reads that a side has no measurement for: nginx serves no
/// echo (the round trip is the C echo server's).
const NET_ABSENT: &[(&str, &str)] = &[("nginx", "tcp_rr_64b"), ("nginx", "tcp_rr_64b_us")];
/// 64-byte round trips per figure.
const NET_RR: u64 = 1000;
/// A smoke run's 64-byte round trips (and one fetch of each file).
const NET_SMOKE_RR: u64 = 20;

/// The guest's busy ticks so far (GET /.busy on a new connection).
fn guest_busy(port: u16) -> Result<u64, String> {
    Ok(guest_busy_parts(port)?.0)
}

/// The guest's busy ticks so far and the `PART=TICKS` words of the answer (Scion's net's
/// busy ticks by part: `net_api::PROFILE_PARTS`).
fn guest_busy_parts(port: u16) -> Result<(u64, Vec<(String, u64)>), String> {
    use std::io::Write;
    let mut s = crate::nettest::ready(port)?;
    write!(s, "GET /.busy HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n").map_err(|e| e.to_string())?;
    let r = crate::nettest::response(&mut s, false)?;
    let busy = busy_of(&r.body)
        .ok_or_else(|| format!("GET /.busy answered {} {:?}", r.status, String::from_utf8_lossy(&r.body)))?;
    Ok((busy, parts_of(&r.body)))
}

/// The `PART=TICKS` words of a `/.busy` answer.
fn parts_of(body: &[u8]) -> Vec<(String, u64)> {
    String::from_utf8_lossy(body)
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

/// The busy ticks in a `/.busy` answer: its first number (Scion's httpd answers "busy tsc
/// meter voluntary involuntary", Linux's server the busy ticks alone).
fn busy_of(body: &[u8]) -> Option<u64> {
    String::from_utf8_lossy(body).split_whitespace().next()?.parse().ok()
}

/// Measure one booted guest through its forwarded ports: per size, KiB/s (host clock)
/// and busy guest ticks per KiB; 64-byte round trips: µs and busy ticks per round trip.
/// `smoke`: one fetch of each file, `NET_SMOKE_RR` round trips.
fn measure_net(http: u16, echo: u16, smoke: bool) -> Result<Vec<(String, u64)>, String> {
    let mut out = downloads(http, http, smoke)?;
    out.extend(round_trips(http, echo, if smoke { NET_SMOKE_RR } else { NET_RR })?);
    Ok(out)
}

/// Downloads of each size from the web server on `http`, the guest's busy ticks read
/// through `busy` (the server answering GET /.busy): KiB/s and busy ticks per KiB.
/// `smoke`: one fetch of each file.
fn downloads(http: u16, busy: u16, smoke: bool) -> Result<Vec<(String, u64)>, String> {
    use std::io::Write;
    let mut out = Vec::new();
    for (tag, file, k) in NET_SIZES {
        let k = if smoke { 1 } else { k };
        let (_, _, size) = crate::nettest::www_files().into_iter().find(|f| f.0 == file).ok_or("no such file")?;
        let fetch_all = |n: u64| -> Result<(), String> {
            let mut s = crate::nettest::ready(http)?;
            for _ in 0..n {
                // One write (see nettest::request).
                s.write_all(format!("GET /{file} HTTP/1.1\r\nHost: bench\r\n\r\n").as_bytes())
                    .map_err(|e| e.to_string())?;
                let r = crate::nettest::response(&mut s, false)?;
                if r.status != 200 || r.body.len() != size {
                    return Err(format!("GET /{file}: status {}, {} bytes", r.status, r.body.len()));
                }
            }
            Ok(())
        };
        fetch_all(1)?;
        let b0 = guest_busy(busy)?;
        let t0 = std::time::Instant::now();
        fetch_all(k)?;
        let secs = t0.elapsed().as_secs_f64();
        let b1 = guest_busy(busy)?;
        let kib = k * size as u64 / 1024;
        out.push((format!("http_download_kbps_{tag}"), (kib as f64 / secs) as u64));
        out.push((format!("http_download_ipk_{tag}"), b1.saturating_sub(b0) / kib.max(1)));
        eprintln!(
            "    | {file} × {k}: {:.0} KiB/s, {} busy ticks per KiB",
            kib as f64 / secs,
            b1.saturating_sub(b0) / kib.max(1)
        );
    }
    Ok(out)
}

/// 64-byte round trips with the echo server on `echo`: busy ticks (through the web
/// server on `http`) and µs per round trip.
fn round_trips(http: u16, echo: u16, rr: u64) -> Result<Vec<(String, u64)>, String> {
    use std::io::{Read, Write};
    let mut out = Vec::new();
    let (b0, p0) = guest_busy_parts(http)?;
    let msg = [0x5au8; 64];
    let mut back = [0u8; 64];
    // A connection whose first message comes back (see nettest::ready).
    let mut s = (0..4)
        .find_map(|_| {
            let mut s = crate::nettest::connect(echo).ok()?;
            s.set_nodelay(true).ok()?;
            s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
            s.write_all(&msg).ok()?;
            s.read_exact(&mut back).ok()?;
            s.set_read_timeout(Some(Duration::from_secs(120))).ok()?;
            Some(s)
        })
        .ok_or("the echo server answered on none of four connections")?;
    let t0 = std::time::Instant::now();
    for _ in 0..rr {
        s.write_all(&msg).map_err(|e| format!("echo: {e}"))?;
        s.read_exact(&mut back).map_err(|e| format!("echo: {e}"))?;
    }
    let us = t0.elapsed().as_micros() as u64 / rr;
    drop(s);
    let (b1, p1) = guest_busy_parts(http)?;
    // Where net's share went (Scion), part by part.
    for (name, v1) in &p1 {
        if let Some((_, v0)) = p0.iter().find(|(n, _)| n == name) {
            out.push((format!("tcp_rr_64b_net_{name}"), v1.saturating_sub(*v0) / rr));
        }
    }
    out.push(("tcp_rr_64b".into(), b1.saturating_sub(b0) / rr));
    out.push(("tcp_rr_64b_us".into(), us));
    eprintln!("    | 64-byte round trips: {us} µs, {} busy ticks each", b1.saturating_sub(b0) / rr);
    Ok(out)
}

/// Forwarded ports to each web server for the concurrency levels (QEMU's user network
/// takes one forwarded connection at a time: `netload::at`).
const LOAD_PORTS: usize = 8;

/// Requests of the small file at each concurrency level (`netload::levels`) from the
/// web server behind `ports`, the busy ticks read through `busy`: `http_c{c}_rps`
/// (requests a second) and `http_c{c}_ipr` (busy ticks per request), each `prefix`ed.
fn levels(ports: &[u16], busy: u16, prefix: &str, smoke: bool) -> Result<Vec<(String, u64)>, String> {
    let mut out = Vec::new();
    for &(c, n) in crate::netload::levels(smoke) {
        let (rps, ipr) =
            crate::netload::at(ports, c, n, "/small.txt", crate::nettest::SMALL.len(), &|| guest_busy(busy))
                .map_err(|e| format!("{prefix}{c} clients: {e}"))?;
        eprintln!("    | {prefix}{c} clients × {n} requests: {rps} requests/s, {ipr} busy ticks each");
        out.push((format!("{prefix}http_c{c}_rps"), rps));
        out.push((format!("{prefix}http_c{c}_ipr"), ipr));
    }
    Ok(out)
}

/// Boot `kernel` + `image` with ports 80 and 7 forwarded (and, with `nginx`, nginx's);
/// once `ready` shows on the serial port, measure. Returns the figures (nginx's named
/// `nginx:…`; or why not) and the serial log.
type Measured = (Result<Vec<(String, u64)>, String>, String);

fn net_boot(
    kernel: &Path,
    image: &Path,
    opts: Options,
    ready: &str,
    nginx: bool,
    smoke: bool,
) -> Result<Measured, String> {
    let ports = qemu::free_ports(2 + LOAD_PORTS + if nginx { 1 + LOAD_PORTS } else { 0 })?;
    let (http, echo) = (ports[0], ports[1]);
    let load = ports[2..2 + LOAD_PORTS].to_vec();
    let ngx = ports[2 + LOAD_PORTS..].to_vec();
    let mut forward = vec![(http, 80), (echo, 7)];
    forward.extend(load.iter().map(|p| (*p, 80)));
    forward.extend(ngx.iter().map(|p| (*p, crate::nginx::PORT)));
    let opts = Options { net: Some(qemu::NetOptions { forward, ..Default::default() }), ..opts };
    let mut figs = Err("the guest never said it serves".to_string());
    let mut go = |_: &qemu::Typer| {
        // The echo server may come up a little after the web server.
        for _ in 0..100 {
            if crate::nettest::connect(echo).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        figs = (|| {
            let mut v = measure_net(http, echo, smoke)?;
            v.extend(levels(&load, http, "", smoke)?);
            if let Some((first, rest)) = ngx.split_first() {
                v.extend(downloads(*first, http, smoke)?.into_iter().map(|(m, x)| (format!("nginx:{m}"), x)));
                v.extend(levels(rest, http, "nginx:", smoke)?);
            }
            Ok(v)
        })();
    };
    let out = qemu::run_at(kernel, image, &opts, Duration::from_secs(3600), None, Some((ready, &mut go)))?;
    Ok((figs, out.log))
}

fn net_suite(a: &crate::Artifacts, vmlinuz: &Path, initramfs: &Path, plan: &Plan) -> Result<String, String> {
    let dir = &plan.dir;
    let www = crate::nettest::make_www()?;
    let disk = dir.join("net-disk.img");
    crate::image::make(&disk.display().to_string(), 64 << 20, &[format!("files:1:6144:fs={}/", www.display())])?;
    let sc = Scenario::bench("bench-net", "net", &[])?;
    let img = crate::make_image(a, &sc.manifest, &sc.name)?;
    let modes = plan.modes();
    let runs = |icount: bool| if icount { 1 } else { plan.runs(RUNS) };
    let steps: usize = modes.iter().map(|m| 2 * runs(m.1)).sum();
    let mut step = 0;
    let mut results: Results = BTreeMap::new();
    for (mode, icount, accel) in &modes {
        for run in 1..=runs(*icount) {
            for sys in ["scion", "linux"] {
                step += 1;
                eprintln!("[net {step}/{steps}] {sys}, {mode}, run {run}");
                let (figs, log) = if sys == "scion" {
                    net_boot(
                        &a.kernel,
                        &img,
                        bench_options(accel.clone(), *icount, String::new(), Some(disk.clone())),
                        crate::nettest::HTTPD_READY,
                        false,
                        plan.smoke,
                    )
                } else {
                    let append = plan.linux("console=ttyS0 rdinit=/init panic=-1 quiet kbench=net nginx=1");
                    net_boot(
                        vmlinuz,
                        initramfs,
                        bench_options(accel.clone(), *icount, append, None),
                        "lhttpd: serving",
                        true,
                        plan.smoke,
                    )
                }
                .map_err(|e| format!("the {sys} net run ({mode}) failed: {e}"))?;
                plan.log(sys, &format!("{sys}-net-{mode}.log"), &log)?;
                let figs = figs.map_err(|e| format!("the {sys} net run ({mode}) failed: {e}"))?;
                for (m, v) in figs {
                    // The host clock's figures mean something under TCG only; the busy
                    // ticks under icount only (instructions).
                    let clock = m.contains("_kbps_") || m.ends_with("_us") || m.ends_with("_rps");
                    let (who, m) = match m.strip_prefix("nginx:") {
                        Some(m) => ("nginx", m.to_string()),
                        None => (sys, m),
                    };
                    if clock != *icount {
                        results.entry((who.into(), mode.to_string())).or_default().entry(m).or_default().push(Fig {
                            median: v,
                            min: v,
                            max: v,
                            samples: 1,
                        });
                    }
                }
            }
        }
    }
    let agg = aggregate(&results);
    plan.finish("net", &agg, &modes, plan.runs(RUNS), NET_ABSENT, || {
        (
            net_svg(&agg, crate::netload::levels(plan.smoke)),
            net_report(&agg, plan.count(NET_RR, NET_SMOKE_RR), crate::netload::levels(plan.smoke)),
        )
    })
}

/// The report; `rr`: the round trips per figure; `levels`: the concurrency levels run.
fn net_report(agg: &Agg, rr: u64, levels: &[(usize, usize)]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Suite `net`\n");
    let _ = writeln!(s, "The host fetches files over HTTP/1.1 (one keep-alive connection per size: {}) and makes {rr} round trips of 64 bytes over one TCP connection, through QEMU's user network (hostfwd) and the same virtio-net device, from Scion (net: virtio-net driver + smoltcp; httpd over the files server, the files on the virtio disk) and from Linux (Debian's kernel; a read/write HTTP server and an echo server in C, `bench/linux/net.c`, the files in its page cache). **kbps** = KiB/s on the host's clock under plain TCG (median of three runs; noisy); **ipk** = busy guest instructions per KiB delivered under icount (rdtsc minus idle time, read from the guest before and after through GET /.busy); `tcp_rr_64b` = busy instructions per round trip (icount), `tcp_rr_64b_us` = µs per round trip (TCG).\n", NET_SIZES.iter().map(|(t, _, k)| format!("{t} × {k}")).collect::<Vec<_>>().join(", "));
    let _ = writeln!(s, "Beside the C server, **nginx** (Debian's package, `sendfile on`, one worker; `xtask/src/nginx.rs`) serves the same files in the same Linux guest: what a user would run instead. `http_c{{c}}_*`: {{c}} keep-alive connections at once (through {LOAD_PORTS} forwarded ports, since QEMU's user network takes one forwarded connection at a time), each making requests for the 26-byte `/small.txt` one after another ({}): **rps** = requests a second on the host's clock (TCG), **ipr** = busy guest instructions per request (icount).\n", levels.iter().map(|(c, n)| format!("{c} × {n}")).collect::<Vec<_>>().join(", "));
    let fmt = |v: Option<u64>| v.map_or("—".to_string(), |v| v.to_string());
    let ratio = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) if b > 0 => format!("{:.2}", a as f64 / b as f64),
        _ => "—".into(),
    };
    let _ = writeln!(s, "| metric | Scion | Linux (C) | nginx | Scion / C | Scion / nginx |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
    let mut rows: Vec<(String, &str)> = Vec::new();
    for (tag, _, _) in NET_SIZES {
        rows.push((format!("http_download_kbps_{tag}"), "tcg"));
        rows.push((format!("http_download_ipk_{tag}"), "icount"));
    }
    rows.push(("tcp_rr_64b_us".into(), "tcg"));
    rows.push(("tcp_rr_64b".into(), "icount"));
    for (c, _) in levels {
        rows.push((format!("http_c{c}_rps"), "tcg"));
        rows.push((format!("http_c{c}_ipr"), "icount"));
    }
    for (m, mode) in &rows {
        let (a, b, n) = (get(agg, "scion", mode, m), get(agg, "linux", mode, m), get(agg, "nginx", mode, m));
        let _ = writeln!(
            s,
            "| `{m}` ({mode}) | {} | {} | {} | {} | {} |",
            fmt(a),
            fmt(b),
            fmt(n),
            ratio(a, b),
            ratio(a, n)
        );
    }
    // Where Scion's round trip goes: net's parts (its own clock ticks, `net_api::PROFILE`),
    // the rest (the kernel's IPC, interrupts and switches, the echo program) by difference.
    let parts: Vec<(String, u64)> = agg
        .iter()
        .filter(|((sys, mode, m), _)| sys == "scion" && mode == "icount" && m.starts_with("tcp_rr_64b_net_"))
        .map(|((_, _, m), f)| (m.trim_start_matches("tcp_rr_64b_net_").to_string(), f.median))
        .collect();
    if let (Some(total), false) = (get(agg, "scion", "icount", "tcp_rr_64b"), parts.is_empty()) {
        let _ = writeln!(s, "\n### Where a 64-byte round trip's instructions go (Scion, icount)\n");
        let _ = writeln!(s, "net counts its own busy ticks by part (`net_api::PROFILE`, read through `/.busy` before and after the {NET_RR} round trips); the rest is the total less net's: the kernel (the IPC between the echo program and net, the device's interrupt, the switches) and the echo program (`bench_net`).\n");
        let _ = writeln!(s, "| part | instructions per round trip | share |");
        let _ = writeln!(s, "|---|---:|---:|");
        let order = ["requests", "device", "stack", "checksums", "cue", "after"];
        let mut sorted = parts.clone();
        sorted.sort_by_key(|(n, _)| order.iter().position(|o| o == n).unwrap_or(order.len()));
        let net: u64 = sorted.iter().map(|(_, v)| v).sum();
        for (n, v) in &sorted {
            let what = match n.as_str() {
                "requests" => "net: the echo program's requests (RECV, SEND, WAIT), the stack's run after each aside",
                "device" => "net: the virtio-net device (taking received frames, refilling, handing frames over, the interrupt's acknowledgement)",
                "stack" => "net: smoltcp's poll (TCP/IP in and out), checksums and the device aside",
                "checksums" => "net: summing the sent frames' TCP checksums (`crates/inet`)",
                "cue" => "net: Cue's transfers (none run here)",
                "after" => "net: after each run (DHCP, listeners' pools, lingering sockets, waking waiters)",
                _ => "net",
            };
            let _ = writeln!(s, "| {what} | {v} | {:.0}% |", 100.0 * *v as f64 / total.max(1) as f64);
        }
        let _ = writeln!(s, "| **net in all** | {net} | {:.0}% |", 100.0 * net as f64 / total.max(1) as f64);
        let rest = total.saturating_sub(net);
        let _ = writeln!(
            s,
            "| the kernel (IPC, interrupt, switches) and the echo program | {rest} | {:.0}% |",
            100.0 * rest as f64 / total.max(1) as f64
        );
        let _ =
            writeln!(s, "| **total** (Linux: {}) | {total} | 100% |", fmt(get(agg, "linux", "icount", "tcp_rr_64b")));
    }
    let _ = writeln!(s, "\n## Target\n");
    for (tag, _, _) in NET_SIZES {
        let m = format!("http_download_ipk_{tag}");
        if let (Some(a), Some(b)) = (get(agg, "scion", "icount", &m), get(agg, "linux", "icount", &m)) {
            let x = a as f64 / b.max(1) as f64;
            let _ = writeln!(
                s,
                "- Scion's instructions per KiB ≤ 1.0× Linux's ({tag}): {x:.2}× — {}.",
                if x <= 1.0 { "**met**" } else { "**missed**" }
            );
        }
    }
    if let (Some(a), Some(b)) = (get(agg, "scion", "icount", "tcp_rr_64b"), get(agg, "linux", "icount", "tcp_rr_64b")) {
        let x = a as f64 / b.max(1) as f64;
        let _ = writeln!(
            s,
            "- A 64-byte TCP round trip ≤ 1.0× Linux's instructions (issue 38): {x:.2}× — {}.",
            if x <= 1.0 { "**met**" } else { "**missed**" }
        );
    }
    let _ = writeln!(s, "\n![net suite](net.svg)\n");
    s
}

/// The systems of the `net` suite, their colours and labels.
const NET_SYSTEMS: [(&str, &str, &str); 3] = [
    ("scion", "#2b7bb9", "Scion (httpd, Cue)"),
    ("linux", "#e07b39", "Linux, C server"),
    ("nginx", "#3a9a4a", "Linux, nginx (sendfile)"),
];

/// Busy instructions per KiB for each download size and per 64-byte round trip (top),
/// and per small request at each concurrency level (bottom), each system beside the
/// others (bars; icount).
fn net_svg(agg: &BTreeMap<(String, String, String), Fig>, levels: &[(usize, usize)]) -> String {
    let of = |m: &str, div: u64| {
        NET_SYSTEMS.iter().map(|(sys, _, _)| get(agg, sys, "icount", m).map(|v| v / div)).collect::<Vec<_>>()
    };
    let top: Vec<(String, Vec<Option<u64>>)> = NET_SIZES
        .iter()
        .map(|(t, _, _)| (format!("download {t}"), of(&format!("http_download_ipk_{t}"), 1)))
        .chain(std::iter::once(("64 B round trip / 10".to_string(), of("tcp_rr_64b", 10))))
        .collect();
    let bottom: Vec<(String, Vec<Option<u64>>)> =
        levels.iter().map(|(c, _)| (format!("{c} clients"), of(&format!("http_c{c}_ipr"), 1))).collect();
    let (w, h) = (760.0, 380.0);
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", 2.0 * h);
    s.push_str(&bars(
        "Suite net: busy guest instructions per KiB delivered (icount; lower is better)",
        &top,
        0.0,
        w,
        h,
    ));
    s.push_str(&bars(
        "Busy guest instructions per small request at each concurrency (icount; lower is better)",
        &bottom,
        h,
        w,
        h,
    ));
    s.push_str("</svg>\n");
    s
}

/// One grouped bar chart (a bar per system of `NET_SYSTEMS` in each group) at `y0`.
fn bars(title: &str, groups: &[(String, Vec<Option<u64>>)], y0: f64, w: f64, h: f64) -> String {
    let maxv = groups.iter().flat_map(|g| g.1.iter()).flatten().max().copied().unwrap_or(1).max(1) as f64;
    let (left, top, bottom) = (80.0, 60.0, 50.0);
    let ph = h - top - bottom;
    let gw = (w - left - 20.0) / groups.len().max(1) as f64;
    let mut s = String::new();
    let _ = writeln!(s, "<text x=\"10\" y=\"{}\" font-size=\"15\" font-weight=\"bold\">{title}</text>", y0 + 22.0);
    for (i, (_, color, label)) in NET_SYSTEMS.iter().enumerate() {
        let x = left + 200.0 * i as f64;
        let _ = writeln!(s, "<rect x=\"{x}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\">{label}</text>", y0 + 32.0, x + 16.0, y0 + 42.0);
    }
    let base = y0 + top + ph;
    let _ = writeln!(s, "<line x1=\"{left}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"black\"/>", w - 20.0);
    for (i, (label, vals)) in groups.iter().enumerate() {
        let bw = gw * 0.8 / vals.len().max(1) as f64;
        let x0 = left + gw * i as f64 + gw * 0.1;
        for (j, v) in vals.iter().enumerate() {
            if let Some(v) = v {
                let bh = *v as f64 / maxv * ph;
                let x = x0 + j as f64 * bw;
                let _ = writeln!(s, "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{bh:.1}\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\">{v}</text>", base - bh, NET_SYSTEMS[j % NET_SYSTEMS.len()].1, x + bw / 2.0, base - bh - 3.0);
            }
        }
        let _ =
            writeln!(s, "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{label}</text>", x0 + gw * 0.4, base + 18.0);
    }
    s
}

/// A panel of a bar chart: its title and its rows (label, value).
pub(crate) type Panel = (String, Vec<(String, Option<u64>)>);

/// Panels of horizontal bars, each scaled to its own largest value (the `k42` and `smp`
/// suites' plots).
pub(crate) fn panels_svg(panels: &[Panel]) -> String {
    let (w, row_h, left) = (900.0, 22.0, 260.0);
    let h: f64 = 20.0 + panels.iter().map(|(_, r)| 40.0 + row_h * r.len() as f64).sum::<f64>();
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    let mut y = 10.0;
    for (title, rows) in panels {
        let _ =
            writeln!(s, "<text x=\"10\" y=\"{:.1}\" font-size=\"14\" font-weight=\"bold\">{title}</text>", y + 18.0);
        y += 30.0;
        let maxv = rows.iter().filter_map(|r| r.1).max().unwrap_or(1).max(1) as f64;
        for (label, v) in rows {
            let _ = writeln!(s, "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>", left - 8.0, y + 14.0);
            match v {
                Some(v) => {
                    let bw = (*v as f64 / maxv * (w - left - 100.0)).max(1.0);
                    let _ = writeln!(s, "<rect x=\"{left}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"15\" fill=\"#2b7bb9\"/><text x=\"{:.1}\" y=\"{:.1}\">{v}</text>", y + 2.0, left + bw + 4.0, y + 14.0);
                }
                None => {
                    let _ = writeln!(s, "<text x=\"{left}\" y=\"{:.1}\" fill=\"#999\">—</text>", y + 14.0);
                }
            }
            y += row_h;
        }
        y += 10.0;
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod busy_tests {
    #[test]
    fn busy_parts_are_named_words() {
        let p = super::parts_of(b"10 20 0 1 2 requests=5 device=7 bad=x stack=9\n");
        assert_eq!(p, vec![("requests".to_string(), 5), ("device".to_string(), 7), ("stack".to_string(), 9)]);
        assert!(super::parts_of(b"176220186 2239599184 0 2592 1").is_empty());
    }

    #[test]
    fn busy_is_the_first_number() {
        assert_eq!(super::busy_of(b"176220186 2239599184 0 2592 1"), Some(176220186));
        assert_eq!(super::busy_of(b"42\n"), Some(42));
        assert_eq!(super::busy_of(b""), None);
        assert_eq!(super::busy_of(b"x 1"), None);
    }
}

#[cfg(test)]
mod bench_smoke {
    use super::*;

    fn agg_of(figs: &[(&str, &str, &str)]) -> Agg {
        figs.iter()
            .map(|(s, mo, m)| {
                ((s.to_string(), mo.to_string(), m.to_string()), Fig { median: 1, min: 1, max: 1, samples: 1 })
            })
            .collect()
    }

    /// The net suite's figures in icount, both sides, as the guests' answers give them.
    fn net_icount() -> Vec<(&'static str, &'static str, &'static str)> {
        let mut v = Vec::new();
        for sys in ["scion", "linux", "nginx"] {
            for m in [
                "http_download_ipk_64k",
                "http_download_ipk_1m",
                "http_download_ipk_16m",
                "tcp_rr_64b",
                "http_c1_ipr",
                "http_c10_ipr",
            ] {
                if !(sys == "nginx" && m == "tcp_rr_64b") {
                    v.push((sys, "icount", m));
                }
            }
        }
        v
    }

    /// The check reads what the report reads: all of the net report's icount figures
    /// there, it passes; one side's figure gone (a guest stops printing it, a parser no
    /// longer matches), it names that figure; the tcg figures, not measured, are not asked.
    #[test]
    fn smoke_check_names_each_figure_a_report_lacks() {
        let full = agg_of(&net_icount());
        let (_, read) = reads(|| net_report(&full, 20, crate::netload::levels(true)));
        assert!(
            read.contains(&("linux".into(), "tcg".into(), "tcp_rr_64b_us".into())),
            "the report reads the tcg figures too"
        );
        assert_eq!(missing(&read, &full, &["icount"], NET_ABSENT), Vec::<String>::new());
        let mut broken = net_icount();
        broken.retain(|f| *f != ("linux", "icount", "tcp_rr_64b"));
        let agg = agg_of(&broken);
        let (_, read) = reads(|| net_report(&agg, 20, crate::netload::levels(true)));
        assert_eq!(missing(&read, &agg, &["icount"], NET_ABSENT), vec!["linux/icount/tcp_rr_64b".to_string()]);
        // Both modes measured: the tcg figures are wanted as well (downloads, the
        // round trip but nginx's, each concurrency level's requests a second).
        let tcg = 3 + 1 + crate::netload::levels(true).len();
        assert_eq!(missing(&read, &agg, &["icount", "tcg"], NET_ABSENT).len(), 1 + 3 * tcg - 1);
        // A figure a side does not have by design is not asked of it.
        assert_eq!(
            missing(&read, &agg, &["icount"], &[("linux", "tcp_rr_64b"), ("nginx", "tcp_rr_64b")]),
            Vec::<String>::new()
        );
    }

    /// A whole side silent (its guest printed no BENCH line the parser took): every
    /// figure of that side is named.
    #[test]
    fn smoke_check_names_a_silent_side() {
        let log = "BENCH null_syscall median=70 min=69 max=75 samples=3 unit=ticks/op\nBENCH ipc_rtt_8b_cross median=328 samples=3\n";
        let mut results: Results = BTreeMap::new();
        for (m, f) in parse_bench(log) {
            results.entry(("scion".into(), "icount".into())).or_default().entry(m).or_default().push(f);
        }
        let agg = aggregate(&results);
        let modes = [("icount", true, "tcg".to_string())];
        let (_, read) = reads(|| (svg(&agg), report_md(&agg, &modes)));
        let lost = missing(&read, &agg, &["icount"], &KERNEL_ABSENT);
        assert!(!lost.iter().any(|m| m.ends_with("/null_syscall") && m.starts_with("scion")), "{lost:?}");
        assert!(lost.contains(&"linux/icount/null_syscall".to_string()), "{lost:?}");
        assert!(lost.contains(&"scion/icount/thread_switch".to_string()), "{lost:?}");
        assert!(!lost.contains(&"scion/icount/page_fault_uffd".to_string()), "absent by design: {lost:?}");
        // Outside `reads`, `get` notes nothing.
        let (_, none) = reads(|| ());
        let _ = get(&agg, "scion", "icount", "null_syscall");
        assert!(none.is_empty());
    }

    #[test]
    fn smoke_plan_is_one_mode_one_run_elsewhere() {
        let p = Plan::new(true);
        assert!(p.dir.ends_with("bench-smoke"));
        assert_eq!(p.modes().iter().map(|m| m.0).collect::<Vec<_>>(), vec!["icount"]);
        assert_eq!((p.runs(3), p.args(), p.linux("quiet")), (1, "smoke".to_string(), "quiet smoke".to_string()));
        let r = Plan::new(false);
        assert!(r.dir.ends_with("bench") && r.modes().len() >= 2);
        assert_eq!((r.runs(3), r.args(), r.linux("quiet")), (3, String::new(), "quiet".to_string()));
    }
}
