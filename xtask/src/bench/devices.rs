//! The `devices` suite: BAIO on NVMe and the network on an Intel 82574 (e1000e) beside
//! the virtio figures, each with QEMU's intel-iommu off and on, Scion beside the Linux
//! guest on the same emulated device; and what mapping a buffer for DMA costs.

use super::net::{net_boot, Load};
use super::plan::{bench_options, Plan};
use super::report::{aggregate, get, panels_svg, parse_bench, Agg, Fig, Panel, Results};
use crate::qemu::{self, Options};
use crate::test::nettest;
use crate::test::scenarios::{run_scenario_log, Scenario};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// A machine of the suite: its name in the figures (`metric@name`), what the report
/// calls it, whether its device is the Intel one (NVMe for storage, e1000e for the
/// network) rather than virtio, and whether it has an IOMMU.
#[derive(Clone, Copy)]
struct Machine {
    name: &'static str,
    what: &'static str,
    intel: bool,
    iommu: bool,
}

const fn m(name: &'static str, what: &'static str, intel: bool, iommu: bool) -> Machine {
    Machine { name, what, intel, iommu }
}

/// Storage machines. (QEMU's virtio devices bypass its IOMMU unless `iommu_platform` is
/// set, and Scion's virtio drivers do not hold their devices by capability: virtio with
/// the IOMMU on would measure nothing more.)
const STORAGE: [Machine; 3] = [
    m("virtio", "virtio-blk", false, false),
    m("nvme", "NVMe", true, false),
    m("nvme_iommu", "NVMe, IOMMU on", true, true),
];
const NETWORK: [Machine; 3] = [
    m("virtio", "virtio-net", false, false),
    m("e1000e", "e1000e", true, false),
    m("e1000e_iommu", "e1000e, IOMMU on", true, true),
];
/// The DMA mapping cost: a driver holding an NVMe controller, without and with the IOMMU.
const DMA: [Machine; 2] = [m("nvme", "no IOMMU (trusted)", true, false), m("nvme_iommu", "IOMMU on", true, true)];

/// The smoke's machines: the new devices under the IOMMU (every new code path: the
/// Linux guest's nvme and e1000e modules, `intel_iommu=on`, `bench_dma`).
const STORAGE_SMOKE: [Machine; 1] = [STORAGE[2]];
const NETWORK_SMOKE: [Machine; 1] = [NETWORK[2]];

/// The storage figures: working set (MiB: one both caches hold), requests, depth.
const WS: u64 = 64;
const N: u64 = 2000;
const DEPTH: u64 = 8;
const SMOKE_WS: u64 = 2;
const SMOKE_N: u64 = 16;

/// (Scion's figure, Linux's figure it stands beside, what they are).
const BAIO_PAIRS: [(&str, &str, &str); 2] = [
    (
        "baio_direct_random_read_ipr",
        "io_uring_direct_random_read_ipr",
        "direct random 8 KiB reads, 8 in flight (Scion BAIO direct; Linux io_uring O_DIRECT)",
    ),
    (
        "baio_buffered_random_read_ipr",
        "pread_buffered_random_read_ipr",
        "buffered random 8 KiB reads, the working set cached (Scion BAIO buffered; Linux pread through the page cache)",
    ),
];
/// The network figures (the same name on both sides) and what they are.
const NET_FIGS: [(&str, &str); 4] = [
    ("http_download_ipk_64k", "HTTP download of 64 KiB, instructions per KiB"),
    ("http_download_ipk_1m", "HTTP download of 1 MiB, instructions per KiB"),
    ("http_download_ipk_16m", "HTTP download of 16 MiB, instructions per KiB"),
    ("tcp_rr_64b", "64-byte TCP round trip, instructions per round trip"),
];
/// Pages mapped at once by `bench_dma`.
const DMA_PAGES: [u64; 3] = [1, 2, 16];

fn push(results: &mut Results, sys: &str, mode: &str, m: String, f: Fig) {
    results.entry((sys.into(), mode.into())).or_default().entry(m).or_default().push(f);
}

pub(super) fn devices_suite(
    a: &crate::Artifacts,
    vmlinuz: &Path,
    initramfs: &Path,
    plan: &Plan,
) -> Result<String, String> {
    let dir = &plan.dir;
    let (ws, n) = plan.count((WS, N), (SMOKE_WS, SMOKE_N));
    let storage: &[Machine] = plan.count(&STORAGE[..], &STORAGE_SMOKE[..]);
    let network: &[Machine] = plan.count(&NETWORK[..], &NETWORK_SMOKE[..]);
    // Instructions are the figures (icount: one run each is exact); the mapping cost
    // also in guest cycles under plain TCG.
    let modes = plan.modes();
    let icount = ("icount", true, "tcg".to_string());
    let mut results: Results = BTreeMap::new();
    let steps = 2 * storage.len() + 2 * network.len() + DMA.len() * modes.len();
    let mut step = 0;
    let mut next = |what: &str| {
        step += 1;
        eprintln!("[devices {step}/{steps}] {what}");
    };

    // Storage: one image for both systems, as the baio suite has it.
    let seg_blocks = ws * 256;
    let disk = dir.join("devices-disk.img");
    let size = (seg_blocks + 4096) * baio::BLOCK as u64;
    let v = crate::image::make(&disk.display().to_string(), size, &[format!("bench:1:{seg_blocks}")])?;
    let start = v.lookup("bench").ok_or("no bench segment")?.start;
    for mach in storage {
        next(&format!("scion, baio on {}", mach.what));
        let sc = Scenario {
            disk_file: Some(disk.clone()),
            // `!nvme`: the image as an NVMe namespace (`disk_file` is the image itself).
            disk: mach.intel.then(|| vec!["!nvme".to_string()]),
            iommu: mach.iommu,
            icount: true,
            limit_s: plan.count(1800, 300),
            memory: "2G".into(),
            ..Scenario::bench(
                &format!("bench-devices-baio-{}", mach.name),
                "baio",
                &[("ARGS", format!("{ws} {n} {DEPTH} reads"))],
            )?
        };
        let (ok, log) = run_scenario_log(a, &sc, "tcg")?;
        let path = plan.log("scion", &format!("scion-devices-baio-{}.log", mach.name), &log)?;
        if !ok {
            return Err(format!("the Scion baio run on {} failed; see {}", mach.what, path.display()));
        }
        for (m, f) in parse_bench(&log) {
            push(&mut results, "scion", "icount", format!("{m}@{}", mach.name), f);
        }
        next(&format!("linux, baio on {}", mach.what));
        let append = format!(
            "console=ttyS0 rdinit=/init panic=-1 quiet kbench=baio seg={start}:{seg_blocks} ws={ws} n={n} depth={DEPTH}{}{} reads",
            if mach.intel { " disk=nvme" } else { "" },
            if mach.iommu { " intel_iommu=on" } else { "" },
        );
        let opts = Options {
            memory: "2G".into(),
            disk_nvme: mach.intel,
            iommu: mach.iommu,
            ..bench_options(icount.2.clone(), true, plan.linux(&append), Some(disk.clone()))
        };
        let out = qemu::run_to_end(vmlinuz, initramfs, &opts, Duration::from_secs(1800), None)?;
        let log = plan.log("linux", &format!("linux-devices-baio-{}.log", mach.name), &out.log)?;
        if !out.log.contains("kbench: baio done") {
            return Err(format!("the Linux baio run on {} did not finish; see {}", mach.what, log.display()));
        }
        for (m, f) in parse_bench(&out.log) {
            push(&mut results, "linux", "icount", format!("{m}@{}", mach.name), f);
        }
    }

    // The network: the net suite's boots, downloads and round trips alone.
    let www = nettest::make_www()?;
    let ndisk = dir.join("devices-net-disk.img");
    crate::image::make(&ndisk.display().to_string(), 64 << 20, &[format!("files:1:6144:fs={}/", www.display())])?;
    let sc = Scenario::bench("bench-devices-net", "net", &[])?;
    let img = crate::make_image(a, &sc.manifest, &sc.name)?;
    for mach in network {
        let net = Some(qemu::NetOptions { e1000e: mach.intel, ..Default::default() });
        for sys in ["scion", "linux"] {
            next(&format!("{sys}, net on {}", mach.what));
            let (figs, log) = if sys == "scion" {
                let opts = Options {
                    net: net.clone(),
                    iommu: mach.iommu,
                    ..bench_options(icount.2.clone(), true, String::new(), Some(ndisk.clone()))
                };
                net_boot(
                    &a.kernel,
                    &img,
                    opts,
                    nettest::HTTPD_READY,
                    Load { nginx: false, levels: &[], transfers: true },
                    plan.smoke,
                )
            } else {
                let append = plan.linux(&format!(
                    "console=ttyS0 rdinit=/init panic=-1 quiet kbench=net{}{}",
                    if mach.intel { " nic=e1000e" } else { "" },
                    if mach.iommu { " intel_iommu=on" } else { "" },
                ));
                let opts = Options {
                    net: net.clone(),
                    iommu: mach.iommu,
                    ..bench_options(icount.2.clone(), true, append, None)
                };
                net_boot(
                    vmlinuz,
                    initramfs,
                    opts,
                    "lhttpd: serving",
                    Load { nginx: false, levels: &[], transfers: true },
                    plan.smoke,
                )
            }
            .map_err(|e| format!("the {sys} net run on {} failed: {e}", mach.what))?;
            plan.log(sys, &format!("{sys}-devices-net-{}.log", mach.name), &log)?;
            let figs = figs.map_err(|e| format!("the {sys} net run on {} failed: {e}", mach.what))?;
            for (m, v) in figs {
                // Busy ticks alone: under icount the host's clock means nothing.
                if !(m.contains("_kbps_") || m.ends_with("_us")) {
                    push(
                        &mut results,
                        sys,
                        "icount",
                        format!("{m}@{}", mach.name),
                        Fig { median: v, min: v, max: v, samples: 1 },
                    );
                }
            }
        }
    }

    // Mapping for DMA: bench_dma on an NVMe controller, in each mode.
    for (mode, ic, accel) in &modes {
        for mach in DMA {
            next(&format!("scion, DMA mapping, {}, {mode}", mach.what));
            let sc = Scenario {
                disk_file: Some(disk.clone()),
                disk: Some(vec!["!nvme".to_string()]),
                iommu: mach.iommu,
                icount: *ic,
                limit_s: 600,
                ..Scenario::bench(&format!("bench-devices-dma-{}", mach.name), "dma", &[("ARGS", plan.args())])?
            };
            let (ok, log) = run_scenario_log(a, &sc, accel)?;
            let path = plan.log("scion", &format!("scion-devices-dma-{}-{mode}.log", mach.name), &log)?;
            let confined = log.contains("bench_dma: confined=1");
            if !ok || confined != mach.iommu {
                return Err(format!(
                    "the DMA mapping run ({}, {mode}) failed or the kernel said confined={confined}; see {}",
                    mach.what,
                    path.display()
                ));
            }
            for (m, f) in parse_bench(&log) {
                push(&mut results, "scion", mode, format!("{m}@{}", mach.name), f);
            }
        }
    }

    let agg = aggregate(&results);
    let measured = (storage, network);
    plan.finish("devices", &agg, &modes, 1, &[], || {
        (devices_svg(&agg, measured), devices_report(&agg, measured, (ws, n), &modes))
    })
}

fn fmt(v: Option<u64>) -> String {
    v.map_or("—".to_string(), |v| v.to_string())
}

/// `a / b` as a ratio, when both are there.
fn ratio(a: Option<u64>, b: Option<u64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0 => format!("{:.2}×", a as f64 / b as f64),
        _ => "—".into(),
    }
}

/// The IOMMU's cost: `on − off` (and its share of `off`).
fn delta(on: Option<u64>, off: Option<u64>) -> String {
    match (on, off) {
        (Some(on), Some(off)) if off > 0 => {
            let d = on as i64 - off as i64;
            format!("{d:+} ({:+.1}%)", 100.0 * d as f64 / off as f64)
        }
        _ => "—".into(),
    }
}

/// A device without and with the IOMMU, and its figures: (Scion's, Linux's, what).
type Pair<'a> = (&'a str, &'a str, Vec<(String, String, String)>);

/// The report: a table per figure (a row a machine: Scion, Linux, the ratio), the
/// IOMMU's cost per request, the DMA mapping cost.
fn devices_report(
    agg: &Agg,
    (storage, network): (&[Machine], &[Machine]),
    (ws, n): (u64, u64),
    modes: &[(&str, bool, String)],
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Suite `devices`\n");
    let _ = writeln!(s, "Scion's drivers for the devices of a PC beside virtio's, in the same QEMU machine (q35, one CPU) as the Linux guest (Debian's kernel, its nvme and e1000e modules from the initramfs, `intel_iommu=on` where the machine has QEMU's `intel-iommu`). Figures are busy guest instructions under icount (rdtsc minus the CPU's idle time; one run each: icount is deterministic); lower is better, and **Scion/Linux** below 1 is Scion ahead. Storage: {n} random 8 KiB reads over a {ws} MiB working set of one image (the BAIO segment `bench`; Linux's `/dev/vda` or `/dev/nvme0n1`), `bench_baio … reads` and `bench/linux/baio.c … reads`. Network: the `net` suite's downloads and 64-byte round trips from the host (Scion's httpd and echo; Linux's C server and echo, `bench/linux/net.c`). icount makes a guest's instructions repeat only for input that repeats: the storage and mapping figures do (within 2% between runs), but the network's depend on when the host's packets come (interrupts, timers, the e1000e's interrupt moderation), and the 64-byte round trip moved by up to a quarter (Scion) and twice (Linux) between two runs.\n");
    for (sm, lm, what) in BAIO_PAIRS {
        let _ = writeln!(s, "## Storage: {what}\n");
        let _ = writeln!(s, "| machine | Scion | Linux | Scion/Linux |\n|---|---:|---:|---:|");
        for mach in storage {
            let a = get(agg, "scion", "icount", &format!("{sm}@{}", mach.name));
            let b = get(agg, "linux", "icount", &format!("{lm}@{}", mach.name));
            let _ = writeln!(s, "| {} | {} | {} | {} |", mach.what, fmt(a), fmt(b), ratio(a, b));
        }
        let _ = writeln!(s);
    }
    for (m, what) in NET_FIGS {
        let _ = writeln!(s, "## Network: {what}\n");
        let _ = writeln!(s, "| machine | Scion | Linux | Scion/Linux |\n|---|---:|---:|---:|");
        for mach in network {
            let a = get(agg, "scion", "icount", &format!("{m}@{}", mach.name));
            let b = get(agg, "linux", "icount", &format!("{m}@{}", mach.name));
            let _ = writeln!(s, "| {} | {} | {} | {} |", mach.what, fmt(a), fmt(b), ratio(a, b));
        }
        let _ = writeln!(s);
    }
    // The IOMMU's cost where both machines were measured.
    let pairs: Vec<Pair> = [
        (
            "nvme",
            "nvme_iommu",
            BAIO_PAIRS.iter().map(|(a, b, w)| (a.to_string(), b.to_string(), w.to_string())).collect(),
        ),
        (
            "e1000e",
            "e1000e_iommu",
            NET_FIGS.iter().map(|(a, w)| (a.to_string(), a.to_string(), w.to_string())).collect(),
        ),
    ]
    .into_iter()
    .filter(|(off, on, _)| {
        [storage, network].iter().any(|l| l.iter().any(|x| x.name == *off))
            && [storage, network].iter().any(|l| l.iter().any(|x| x.name == *on))
    })
    .collect();
    if !pairs.is_empty() {
        let _ = writeln!(s, "## The IOMMU's cost per request\n");
        let _ = writeln!(s, "Instructions with `intel-iommu` on less those without, on the same device (icount).\n");
        let _ = writeln!(s, "| figure | device | Scion on − off | Linux on − off |\n|---|---|---:|---:|");
        for (off, on, figs) in &pairs {
            for (sm, lm, what) in figs {
                let sa = get(agg, "scion", "icount", &format!("{sm}@{on}"));
                let sb = get(agg, "scion", "icount", &format!("{sm}@{off}"));
                let la = get(agg, "linux", "icount", &format!("{lm}@{on}"));
                let lb = get(agg, "linux", "icount", &format!("{lm}@{off}"));
                let _ = writeln!(s, "| {what} | {off} | {} | {} |", delta(sa, sb), delta(la, lb));
            }
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## Mapping a buffer for DMA\n");
    let _ = writeln!(s, "`bench_dma` holds an NVMe controller by capability and maps its own pages for the controller's DMA (`PCI_DMA_MAP`) and unmaps them (`PCI_DMA_UNMAP`; with the IOMMU the IOTLB is invalidated before the call returns), 2,000 times each (20 in the smoke); medians of ticks per call, the system call included: instructions under icount, guest cycles under plain TCG (QEMU's clock, not a real CPU's).\n");
    let head: Vec<String> =
        modes.iter().flat_map(|m| DMA.iter().map(move |d| format!("{} ({})", d.what, m.0))).collect();
    let _ = writeln!(s, "| call | {} |\n|---|{}", head.join(" | "), "---:|".repeat(head.len()));
    for op in ["map", "unmap"] {
        for p in DMA_PAGES {
            let cells: Vec<String> = modes
                .iter()
                .flat_map(|m| DMA.iter().map(move |d| (m.0, d.name)))
                .map(|(mode, name)| fmt(get(agg, "scion", mode, &format!("dma_{op}_{p}p@{name}"))))
                .collect();
            let _ = writeln!(s, "| {op} {p} page(s) | {} |", cells.join(" | "));
        }
    }
    let _ = writeln!(s, "\n![devices suite](devices.svg)\n");
    s
}

/// A panel per figure: Scion's and Linux's bars on each machine; then the mapping cost.
fn devices_svg(agg: &Agg, (storage, network): (&[Machine], &[Machine])) -> String {
    let mut panels: Vec<Panel> = Vec::new();
    let side = |sm: &str, lm: &str, machs: &[Machine]| -> Vec<(String, Option<u64>)> {
        machs
            .iter()
            .flat_map(|mach| {
                [
                    (format!("Scion, {}", mach.what), get(agg, "scion", "icount", &format!("{sm}@{}", mach.name))),
                    (format!("Linux, {}", mach.what), get(agg, "linux", "icount", &format!("{lm}@{}", mach.name))),
                ]
            })
            .collect()
    };
    for (sm, lm, what) in BAIO_PAIRS {
        let short = what.split(" (").next().unwrap_or(what);
        panels.push((format!("{short}: instructions per request (icount)"), side(sm, lm, storage)));
    }
    for (m, what) in NET_FIGS {
        panels.push((format!("{what} (icount)"), side(m, m, network)));
    }
    let rows = DMA_PAGES
        .iter()
        .flat_map(|p| {
            DMA.iter().map(move |d| {
                let v = |op: &str| get(agg, "scion", "icount", &format!("dma_{op}_{p}p@{}", d.name));
                (format!("map + unmap {p} page(s), {}", d.what), v("map").zip(v("unmap")).map(|(a, b)| a + b))
            })
        })
        .collect();
    panels.push(("Mapping a buffer for DMA and unmapping it: instructions (icount)".into(), rows));
    panels_svg(&panels)
}

#[cfg(test)]
mod tests {
    use super::super::report::{agg_of, missing, reads};
    use super::*;

    /// Every figure the smoke's machines yield, as the guests print them.
    fn smoke_figs() -> Vec<(&'static str, &'static str, String)> {
        let mut v = Vec::new();
        for (sm, lm, _) in BAIO_PAIRS {
            v.push(("scion", "icount", format!("{sm}@nvme_iommu")));
            v.push(("linux", "icount", format!("{lm}@nvme_iommu")));
        }
        for (m, _) in NET_FIGS {
            v.push(("scion", "icount", format!("{m}@e1000e_iommu")));
            v.push(("linux", "icount", format!("{m}@e1000e_iommu")));
        }
        for d in DMA {
            for p in DMA_PAGES {
                for op in ["map", "unmap"] {
                    v.push(("scion", "icount", format!("dma_{op}_{p}p@{}", d.name)));
                }
            }
        }
        v
    }

    /// The smoke's machines give every figure the report reads; one gone is named.
    #[test]
    fn the_report_reads_what_the_smoke_measures() {
        let figs = smoke_figs();
        let list: Vec<(&str, &str, &str)> = figs.iter().map(|(a, b, c)| (*a, *b, c.as_str())).collect();
        let agg = agg_of(&list);
        let modes = [("icount", true, "tcg".to_string())];
        let m = (&STORAGE_SMOKE[..], &NETWORK_SMOKE[..]);
        let (_, read) = reads(|| (devices_report(&agg, m, (2, 16), &modes), devices_svg(&agg, m)));
        assert_eq!(missing(&read, &agg, &["icount"], &[]), Vec::<String>::new());
        let agg = agg_of(&list[1..]);
        let (_, read) = reads(|| devices_report(&agg, m, (2, 16), &modes));
        assert_eq!(missing(&read, &agg, &["icount"], &[]).len(), 1);
    }

    /// The full run's report has a row a machine in each figure's table, and the IOMMU's
    /// cost where both machines of a device were measured.
    #[test]
    fn every_machine_has_its_row() {
        let agg =
            agg_of(&[("scion", "icount", "tcp_rr_64b@e1000e_iommu"), ("linux", "icount", "tcp_rr_64b@e1000e_iommu")]);
        let modes = [("icount", true, "tcg".to_string())];
        let r = devices_report(&agg, (&STORAGE[..], &NETWORK[..]), (64, 2000), &modes);
        assert!(r.contains("| e1000e, IOMMU on | 1 | 1 | 1.00× |"), "{r}");
        assert!(r.contains("| NVMe | — | — | — |"));
        assert!(r.contains("The IOMMU's cost per request"));
        let r = devices_report(&agg, (&STORAGE_SMOKE[..], &NETWORK_SMOKE[..]), (2, 16), &modes);
        assert!(!r.contains("The IOMMU's cost per request"));
        assert_eq!(delta(Some(110), Some(100)), "+10 (+10.0%)");
        assert_eq!(ratio(Some(1), None), "—");
    }
}
