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

mod baio;
mod cue;
mod devices;
mod grafts;
mod ipcprobe;
mod k42;
mod kernel;
mod linux;
mod net;
mod netload;
mod nginx;
mod plan;
mod report;
mod smp;
mod wasi;

use crate::build;
use crate::qemu;
use plan::Plan;
use std::process::ExitCode;

pub const SUITES: [(&str, &str); 9] = [
    ("kernel", "microkernel costs: syscall, IPC, switches, page faults, map/demap, IRQ; Linux side by side"),
    (
        "baio",
        "BAIO Figures 3-5: pipelined 8 KiB requests over working sets; BAIO direct/buffered, sync, thread pool; Linux pread O_DIRECT/buffered and io_uring",
    ),
    ("net", "HTTP downloads (64 KiB, 1 MiB, 16 MiB) and 64-byte TCP round trips from the host; Scion's net+httpd beside a Linux read/write server"),
    ("cue", "Cue Tables 1-8: one transfer by Cue with (k, t) schedules or a read/write loop beside a metering program, 1-4 in parallel, ftpd; Linux sendfile and read/write beside"),
    ("k42", "K42 Table 1, Figures 4, 6 and 7: a call through the translation table and interposed against a plain call; swap time with 0-16 clients and a null swap against an IPC round trip; Postmark-style files with fixed and adaptive sessions; streaming with fixed LRU, fixed MRU and adaptive policies"),
    ("smp", "two CPUs (plain TCG): IPC pairs on one CPU and one per CPU, IPC round trip within and across CPUs, unmap with and without a TLB shootdown, the null system call under the big kernel lock; Linux's pipes pairs beside"),
    ("devices", "issue 49's devices: BAIO random reads on NVMe and downloads and 64-byte round trips on an e1000e beside virtio, IOMMU off and on, Linux on the same devices beside; the cost of mapping a buffer for DMA"),
    ("wasi", "WASI programs people already have: a CPU-bound Rust program and a reduced SQLite speedtest (in memory, on a file), compiled ahead of time (wasm2c) and interpreted (wasmi) on Scion; the same source native on Linux"),
    ("grafts", "VINO Tables 1-6, Figure 1: per-call cost of each extension technology at the cache's eviction point (null, 64-entry hot list) and blk's stream point (MD5 per KiB) and logical-disk point (a block's lookup), upcall, load, miss, disk time, break-even; Linux's null and MD5 eBPF beside"),
];

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
        let b = kernel::breakdowns(&a, &dir);
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
    let vmlinuz = linux::linux_kernel()?;
    let initramfs = linux::linux_initramfs(dir, &vmlinuz)?;
    let mut report = String::new();
    let (t0, mut failed) = (std::time::Instant::now(), Vec::new());
    for suite in wanted {
        let t = std::time::Instant::now();
        let r = match *suite {
            "kernel" => kernel::kernel_suite(a, &vmlinuz, &initramfs, plan),
            "net" => net::net_suite(a, &vmlinuz, &initramfs, plan),
            "cue" => cue::cue_suite(a, &vmlinuz, &initramfs, plan),
            "grafts" => grafts::grafts_suite(a, &vmlinuz, &initramfs, plan),
            "k42" => k42::k42_suite(a, plan),
            "smp" => smp::smp_suite(a, &vmlinuz, &initramfs, plan),
            "devices" => devices::devices_suite(a, &vmlinuz, &initramfs, plan),
            "wasi" => wasi::wasi_suite(a, &vmlinuz, &initramfs, plan),
            _ => baio::baio_suite(a, &vmlinuz, &initramfs, plan),
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
