//! `cargo xtask bench grafts`: the VINO paper's comparison of extension technologies
//! (Tables 1–6 and Figure 1) at Scion's eviction graft point, blk's stream point and
//! blk's logical-disk point. `bench_graft` loads the
//! example grafts into the cache and has the cache run each one (`TEST_RUN`: the graft
//! call as the eviction point makes it, transaction included, no IPC in the figure);
//! the upcall is one IPC call per graft call to a thread of the bench program; a miss is
//! a one-block buffered read that goes to the disk (busy ticks); MD5 of 1 KiB runs in
//! blk the same way, beside the time to read 1 MiB. Linux runs a null eBPF program and
//! the same MD5 (as XDP) through `BPF_PROG_TEST_RUN` (`bench/linux/graft.c`) as
//! today's in-kernel safe extension. One boot of each system per mode: icount (instructions,
//! deterministic: the figures the targets use) and plain TCG (cycles, noisy).

use super::plan::{bench_options, Plan};
use super::report::{aggregate, get, parse_bench, Fig, Results};
use crate::qemu;
use crate::test::scenarios::{run_scenario_log, Scenario};
use graft::format::Tech;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

type Agg = BTreeMap<(String, String, String), Fig>;

/// The paper's counterpart of each technology.
fn paper(t: Tech) -> &'static str {
    match t {
        Tech::Native => "unsafe C in the kernel",
        Tech::SignedRust => "Modula-3: a safe language, a trusted compiler",
        Tech::WasmAot => "SFI: checked machine code (MiSFIT; here wasm2c + clang, signed)",
        Tech::Wasmi => "Java byte code, interpreted",
        Tech::Ebpf => "none: byte code verified at load, then JIT-compiled (rbpf)",
        Tech::Script => "Tcl, interpreted",
        Tech::Upcall => "C in a user-level server",
    }
}

/// The technologies measured (their names are the figures' suffixes) with the paper's
/// counterparts, in `Tech::ALL`'s order; `files`: those a program loads as a file alone
/// (not the upcall).
fn techs(files: bool) -> impl Iterator<Item = (&'static str, &'static str)> {
    Tech::ALL.into_iter().filter(move |t| !files || t.is_file()).map(|t| (t.name(), paper(t)))
}

pub(super) fn grafts_suite(
    a: &crate::Artifacts,
    vmlinuz: &Path,
    initramfs: &Path,
    plan: &Plan,
) -> Result<String, String> {
    let dir = &plan.dir;
    let disk = dir.join("grafts-disk.img");
    crate::image::make(
        &disk.display().to_string(),
        64 << 20,
        &[format!("files:1:2048:fs={}", crate::grafts::dir().display())],
    )?;
    let modes = plan.modes();
    let steps = modes.len() * 2;
    let mut step = 0;
    let mut results: Results = BTreeMap::new();
    for (mode, icount, accel) in &modes {
        step += 1;
        eprintln!("[grafts {step}/{steps}] scion, {mode}");
        let sc = Scenario {
            disk_file: Some(disk.clone()),
            icount: *icount,
            limit_s: 900,
            ..Scenario::bench(&format!("bench-grafts-{mode}"), "grafts", &[("ARGS", plan.args())])?
        };
        let (ok, log) = run_scenario_log(a, &sc, accel)?;
        let path = plan.log("scion", &format!("scion-grafts-{mode}.log"), &log)?;
        if !ok {
            return Err(format!("the Scion grafts run failed; see {}", path.display()));
        }
        for (m, f) in parse_bench(&log) {
            results.entry(("scion".into(), mode.to_string())).or_default().entry(m).or_default().push(f);
        }
        step += 1;
        eprintln!("[grafts {step}/{steps}] linux, {mode}");
        let opts = bench_options(
            accel.clone(),
            *icount,
            plan.linux("console=ttyS0 rdinit=/init panic=-1 quiet kbench=graft"),
            None,
        );
        let out = qemu::run_to_end(vmlinuz, initramfs, &opts, Duration::from_secs(600), None)?;
        let log = plan.log("linux", &format!("linux-grafts-{mode}.log"), &out.log)?;
        if !out.log.contains("kbench: done") {
            return Err(format!("the Linux grafts run did not finish; see {}", log.display()));
        }
        for (m, f) in parse_bench(&out.log) {
            results.entry(("linux".into(), mode.to_string())).or_default().entry(m).or_default().push(f);
        }
    }
    let agg = aggregate(&results);
    plan.finish("grafts", &agg, &modes, 1, &[], || (figure1(&agg), report(&agg, &modes)))
}

fn hot(agg: &Agg, mode: &str, tech: &str) -> Option<u64> {
    get(agg, "scion", mode, &format!("graft_evict_{tech}_hotlist"))
}

fn cell(v: Option<u64>) -> String {
    v.map_or("—".into(), |v| v.to_string())
}

fn report(agg: &Agg, modes: &[(&str, bool, String)]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Suite `grafts` (VINO: a comparison of OS extension technologies)\n");
    let _ = writeln!(
        s,
        "Every figure is one graft call as the cache's eviction point makes it, run by the cache itself \
         (`TEST_RUN`; the transaction's undo copy of the graft's state included, native and signed excepted: \
         code the system trusts), in ticks per call: instructions under `icount`, cycles under `tcg`. \
         The upcall is one IPC call per graft call to a thread of the loading program. \
         Figures: `graft_evict_<technology>_<graft>`; Linux: `ebpf_null` (a null socket-filter \
         program through `BPF_PROG_TEST_RUN`, JIT-compiled by the guest's kernel).\n"
    );
    for (mode, _, _) in modes {
        let native_null = get(agg, "scion", mode, "graft_evict_native_null");
        let native = hot(agg, mode, "native");
        let miss = get(agg, "scion", mode, "graft_evict_miss");
        let _ = writeln!(s, "## `{mode}`\n");
        let _ = writeln!(s, "### Table 1: upcall cost\n");
        let _ = writeln!(s, "| | ticks per call |\n|---|---:|");
        let up = get(agg, "scion", mode, "graft_evict_upcall_null");
        let _ = writeln!(s, "| Scion: null graft by upcall (IPC to the owner's thread and back) | {} |", cell(up));
        let _ = writeln!(s, "| Scion: null graft, native | {} |", cell(native_null));
        let _ = writeln!(
            s,
            "| upcall overhead (the difference) | {} |",
            cell(up.zip(native_null).map(|(u, n)| u.saturating_sub(n)))
        );
        let _ = writeln!(
            s,
            "| Linux: a signal handled less one ignored (the paper's measure of an upcall) | {} |",
            cell(get(agg, "linux", mode, "signal_upcall"))
        );
        let _ = writeln!(
            s,
            "| Linux: null eBPF program (`BPF_PROG_TEST_RUN`) | {} |\n",
            cell(get(agg, "linux", mode, "ebpf_null"))
        );
        let _ = writeln!(s, "### Table 2: hot-list eviction (64-entry hot list, 8 candidates)\n");
        let _ = writeln!(s, "| technology (paper's counterpart) | null graft | hot list | normalized to native | break-even (calls per miss) | load |\n|---|---:|---:|---:|---:|---:|");
        for (tech, paper) in techs(false) {
            let h = hot(agg, mode, tech);
            let norm = h.zip(native).map_or("—".into(), |(h, n)| format!("{:.1}", h as f64 / n.max(1) as f64));
            let be = h.zip(miss).map_or("—".into(), |(h, m)| format!("{:.0}", m as f64 / h.max(1) as f64));
            let load = get(agg, "scion", mode, &format!("graft_load_{tech}"));
            let _ = writeln!(
                s,
                "| {tech} ({paper}) | {} | {} | {norm} | {be} | {} |",
                cell(get(agg, "scion", mode, &format!("graft_evict_{tech}_null"))),
                cell(h),
                cell(load)
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "The same hot list at the memory server's reclaim point (mem0 choosing which of a program's clean pages to take back; candidates and hot list are page addresses), ticks per call:\n");
        let _ = writeln!(s, "| technology | reclaim decision | normalized to native |\n|---|---:|---:|");
        let rn = get(agg, "scion", mode, "graft_reclaim_native_hotlist");
        for (tech, _) in techs(true) {
            let r = get(agg, "scion", mode, &format!("graft_reclaim_{tech}_hotlist"));
            let norm = r.zip(rn).map_or("—".into(), |(r, n)| format!("{:.1}", r as f64 / n.max(1) as f64));
            let _ = writeln!(s, "| {tech} | {} | {norm} |", cell(r));
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "### Table 3: what a miss costs (the page fault's counterpart)\n");
        let _ = writeln!(s, "| | ticks |\n|---|---:|\n| Scion: one-block buffered read that misses the cache (busy: idle time taken out) | {} |\n", cell(miss));
        let _ = writeln!(s, "Break-even (Table 2) is the paper's: how many graft calls fit in one miss, the calls a graft may make for each miss it saves.\n");
        let disk = get(agg, "scion", mode, "graft_disk_1m");
        let _ = writeln!(s, "### Table 4: disk time to read 1 MiB\n");
        let _ = writeln!(s, "| | elapsed ticks | busy ticks |\n|---|---:|---:|");
        let _ = writeln!(
            s,
            "| Scion: 1 MiB from the disk (8 reads of 128 KiB at once, not cached) | {} | {} |\n",
            cell(disk),
            cell(get(agg, "scion", mode, "graft_disk_1m_busy"))
        );
        if mode == &"icount" {
            let _ = writeln!(s, "Under icount an idle guest's clock jumps to its next timer, so the elapsed figure here is not the disk's time; `tcg`'s is.\n");
        }
        let _ = writeln!(s, "### Table 5: MD5 fingerprint of 1 MiB (stream point in blk, 1 KiB per call)\n");
        let _ = writeln!(s, "| technology | ticks per KiB | per MiB | normalized to native | ÷ disk time (≤ 1: hidden by the I/O) |\n|---|---:|---:|---:|---:|");
        let md5_native = get(agg, "scion", mode, "graft_stream_native_md5");
        let row = |s: &mut String, label: &str, k: Option<u64>| {
            let mib = k.map(|k| k * 1024);
            let norm = k.zip(md5_native).map_or("—".into(), |(k, n)| format!("{:.1}", k as f64 / n.max(1) as f64));
            let vs = mib.zip(disk).map_or("—".into(), |(m, d)| format!("{:.2}", m as f64 / d.max(1) as f64));
            let _ = writeln!(s, "| {label} | {} | {} | {norm} | {vs} |", cell(k), cell(mib));
        };
        for (tech, paper) in techs(false) {
            row(&mut s, &format!("{tech} ({paper})"), get(agg, "scion", mode, &format!("graft_stream_{tech}_md5")));
        }
        row(
            &mut s,
            "Linux: the same MD5 as eBPF (XDP, verified and JIT-compiled by the guest's kernel)",
            get(agg, "linux", mode, "ebpf_md5_kib"),
        );
        let _ = writeln!(s);
        let _ = writeln!(s, "### Table 6: logical disk (the black-box point in blk), per block\n");
        let _ = writeln!(s, "A log-structured map of 512 logical blocks, half full, over 1022 physical ones: a read finds where a block is; a write takes the next free block from the log's head and frees the old one.\n");
        let _ = writeln!(s, "| technology | read lookup | write | write normalized to native |\n|---|---:|---:|---:|");
        let ld_native = get(agg, "scion", mode, "graft_ldisk_native_write");
        for (tech, paper) in techs(false) {
            let w = get(agg, "scion", mode, &format!("graft_ldisk_{tech}_write"));
            let norm = w.zip(ld_native).map_or("—".into(), |(w, n)| format!("{:.1}", w as f64 / n.max(1) as f64));
            let _ = writeln!(
                s,
                "| {tech} ({paper}) | {} | {} | {norm} |",
                cell(get(agg, "scion", mode, &format!("graft_ldisk_{tech}_read"))),
                cell(w)
            );
        }
        let _ = writeln!(s, "\n| one block through blk, direct (busy ticks) | plain segment | logical disk (native graft) |\n|---|---:|---:|");
        for what in ["read", "write"] {
            let _ = writeln!(
                s,
                "| {what} | {} | {} |",
                cell(get(agg, "scion", mode, &format!("graft_ldisk_io_plain_{what}"))),
                cell(get(agg, "scion", mode, &format!("graft_ldisk_io_ldisk_{what}")))
            );
        }
        let _ = writeln!(s, "\nA block written through a logical disk is one commit: the data, a flush, then the map (`baio::ldisk`), so it costs two writes and a flush where a plain segment's costs one write; and blk does a logical disk's I/O synchronously, waiting for the device by polling, so that wait counts as busy here where a plain segment's thread sleeps until the interrupt.\n");
        let _ = writeln!(s, "### Figure 1: break-even against upcall time (`grafts.svg`, from the `icount` figures)\n");
        if let (Some(n), Some(m), Some(u)) = (native, miss, up.zip(native_null).map(|(u, n)| u.saturating_sub(n))) {
            let _ = writeln!(s, "An upcall graft breaks even after miss / (upcall + native hot list) calls: {:.0} at the measured upcall of {u} ticks, {:.0} if upcalls were free.\n", m as f64 / (u + n) as f64, m as f64 / n as f64);
        }
        // The work per call at which a technology costs what the upcall does: fixed cost
        // (its null graft) plus MD5 per KiB, against the upcall's (its null graft plus
        // native MD5: the upcall runs native code).
        if let (Some(un), Some(kn)) = (up, get(agg, "scion", mode, "graft_stream_native_md5")) {
            let _ = writeln!(s, "Work per call at which each technology costs what an upcall costs (a call's cost taken as its null graft plus MD5 per KiB of work; the upcall's as {un} plus native MD5):\n");
            let _ = writeln!(s, "| technology | fixed per call | per KiB | break-even work (KiB of MD5 per call) |\n|---|---:|---:|---:|");
            for (tech, _) in techs(true) {
                let (Some(f), Some(k)) = (
                    get(agg, "scion", mode, &format!("graft_evict_{tech}_null")),
                    get(agg, "scion", mode, &format!("graft_stream_{tech}_md5")),
                ) else {
                    continue;
                };
                let be = if k > kn && un > f {
                    format!("{:.2}", (un - f) as f64 / (k - kn) as f64)
                } else if k <= kn {
                    "never: cheaper than an upcall at any work".into()
                } else {
                    "0".into()
                };
                let _ = writeln!(s, "| {tech} | {f} | {k} | {be} |");
            }
            let _ = writeln!(s);
        }
        if *mode == "icount" {
            let _ = writeln!(s, "### Targets (instructions per call against native Rust, hot list)\n");
            // The targets: wasmi within 15×, eBPF (verified, JIT-compiled) within
            // 3×; rhai has none (VINO's Tcl had none: Table 2 gives its break-even).
            for (tech, what, limit) in
                [("wasmi", "interpreter wasmi", 15.0), ("ebpf", "eBPF, verified and JIT-compiled", 3.0)]
            {
                if let (Some(h), Some(n)) = (hot(agg, mode, tech), native) {
                    let r = h as f64 / n.max(1) as f64;
                    let _ =
                        writeln!(s, "- {what}: {r:.1}× ≤ {limit}×: {}", if r <= limit { "met" } else { "**missed**" });
                }
            }
            if let (Some(h), Some(n)) = (hot(agg, mode, "rhai"), native) {
                let _ = writeln!(
                    s,
                    "- script rhai: {:.1}× (no target; its break-even is in Table 2)",
                    h as f64 / n.max(1) as f64
                );
            }
            // The upcall: one IPC call to the owner's thread and back, within twice the
            // register round trip between tasks (`bench kernel`: 328 instructions).
            if let (Some(u), Some(n)) =
                (get(agg, "scion", mode, "graft_evict_upcall_null"), get(agg, "scion", mode, "graft_evict_native_null"))
            {
                let over = u.saturating_sub(n);
                let _ = writeln!(
                    s,
                    "- upcall, null graft's overhead: {over} ≤ 656 instructions (2× the IPC round trip): {}",
                    if over <= 656 { "met" } else { "**missed**" }
                );
            }
            // The baseline must be the fastest code.
            if let (Some(nat), Some(sig), Some(aot)) = (
                get(agg, "scion", mode, "graft_stream_native_md5"),
                get(agg, "scion", mode, "graft_stream_signed_md5"),
                get(agg, "scion", mode, "graft_stream_wasmaot_md5"),
            ) {
                let _ = writeln!(
                    s,
                    "- native MD5 per KiB {nat} ≤ signed {sig} and ≤ compiled Wasm {aot}: {}",
                    if nat <= sig && nat <= aot { "met" } else { "**missed**" }
                );
            }
            if let (Some(h), Some(n)) = (hot(agg, mode, "signed"), native) {
                let r = h as f64 / n.max(1) as f64;
                let _ =
                    writeln!(s, "- signed safe Rust: {r:.2}× ≤ 1.1×: {}", if r <= 1.1 { "met" } else { "**missed**" });
            }
            if let (Some(h), Some(n)) = (hot(agg, mode, "wasmaot"), native) {
                let r = h as f64 / n.max(1) as f64;
                let _ = writeln!(
                    s,
                    "- software fault isolation (WebAssembly by wasm2c and clang), hot list: {r:.2}× ≤ 1.5×: {}",
                    if r <= 1.5 { "met" } else { "**missed**" }
                );
            }
            if let Some(v) = get(agg, "scion", mode, "graft_evict_wasmaot_null") {
                let _ = writeln!(
                    s,
                    "- software fault isolation, null call: {v} ≤ 150 instructions: {}",
                    if v <= 150 { "met" } else { "**missed**" }
                );
            }
            if let (Some(a), Some(l)) =
                (get(agg, "scion", mode, "graft_stream_wasmaot_md5"), get(agg, "linux", mode, "ebpf_md5_kib"))
            {
                let r = a as f64 / l.max(1) as f64;
                let _ = writeln!(s, "- MD5 per KiB, WebAssembly compiled ahead of time against Linux's JIT-compiled eBPF: {r:.2}× ≤ 1.5×: {}", if r <= 1.5 { "met" } else { "**missed**" });
            }
            let _ = writeln!(s);
        }
    }
    s
}

/// Figure 1: break-even (calls per miss, log scale) against the upcall's time, with
/// each technology's break-even as a line and the measured upcall marked.
fn figure1(agg: &Agg) -> String {
    let mode = "icount";
    let (Some(native), Some(miss)) = (hot(agg, mode, "native"), get(agg, "scion", mode, "graft_evict_miss")) else {
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"40\"><text x=\"10\" y=\"25\">no icount figures</text></svg>\n".into();
    };
    let up = get(agg, "scion", mode, "graft_evict_upcall_null")
        .zip(get(agg, "scion", mode, "graft_evict_native_null"))
        .map(|(u, n)| u.saturating_sub(n))
        .unwrap_or(0);
    let xmax = (up.max(1) * 3) as f64;
    let be = |t: f64| miss as f64 / t.max(1.0);
    let (w, h, left, top, bottom, right) = (780.0, 460.0, 80.0, 50.0, 60.0, 210.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let ymax = be(native as f64).max(10.0).log10().ceil();
    // Break-evens below one (a graft costlier than the miss it could save) show too.
    let slowest = ["wasmi", "ebpf", "rhai"].iter().filter_map(|t| hot(agg, mode, t)).max().unwrap_or(native);
    let ymin = be(slowest as f64).log10().floor().clamp(-4.0, 0.0);
    let x = |v: f64| left + v / xmax * pw;
    let y = |v: f64| top + ph - (v.max(10f64.powf(ymin)).log10() - ymin) / (ymax - ymin) * ph;
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    let _ = writeln!(s, "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">Figure 1: break-even (graft calls per miss) against upcall time (instructions, icount)</text>");
    let _ = writeln!(s, "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/><line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"black\"/>", top + ph, left + pw, top + ph, top + ph);
    for k in 0..=4 {
        let v = xmax * k as f64 / 4.0;
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\">{:.0}</text>",
            x(v),
            top + ph + 16.0,
            v
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">upcall time (instructions per call)</text>",
        left + pw / 2.0,
        top + ph + 40.0
    );
    for e in ymin as i32..=ymax as i32 {
        let v = 10f64.powi(e);
        let _ = writeln!(s, "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"10\">{}</text><line x1=\"{left}\" y1=\"{:.1}\" x2=\"{}\" y2=\"{:.1}\" stroke=\"#eee\"/>", left - 6.0, y(v) + 4.0, v, y(v), left + pw, y(v));
    }
    // The upcall's curve: miss / (upcall + native hot list).
    let pts: Vec<String> = (0..=60)
        .map(|k| xmax * k as f64 / 60.0)
        .map(|t| format!("{:.1},{:.1}", x(t), y(be(t + native as f64))))
        .collect();
    let _ = writeln!(s, "<polyline fill=\"none\" stroke=\"#2b7bb9\" stroke-width=\"2\" points=\"{}\"/>", pts.join(" "));
    let _ = writeln!(
        s,
        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"#2b7bb9\"/>",
        x(up as f64),
        y(be((up + native) as f64))
    );
    let mut legend = vec![("upcall (measured: dot)".to_string(), color(Tech::Upcall))];
    for (tech, color) in Tech::ALL.into_iter().filter(|t| t.is_file()).map(|t| (t.name(), color(t))) {
        if let Some(t) = hot(agg, mode, tech) {
            let yy = y(be(t as f64));
            let _ = writeln!(s, "<line x1=\"{left}\" y1=\"{yy:.1}\" x2=\"{}\" y2=\"{yy:.1}\" stroke=\"{color}\" stroke-dasharray=\"6,4\"/>", left + pw);
            legend.push((format!("{tech}: {:.2}", be(t as f64)), color));
        }
    }
    for (i, (label, color)) in legend.iter().enumerate() {
        let ly = top + 14.0 + i as f64 * 18.0;
        let _ = writeln!(s, "<rect x=\"{}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{color}\"/><text x=\"{}\" y=\"{:.1}\">{label}</text>", left + pw + 14.0, ly - 10.0, left + pw + 30.0, ly);
    }
    s.push_str("</svg>\n");
    s
}

/// Each technology's colour in Figure 1.
fn color(t: Tech) -> &'static str {
    match t {
        Tech::Native => "#000000",
        Tech::SignedRust => "#888888",
        Tech::WasmAot => "#d62728",
        Tech::Wasmi => "#31a354",
        Tech::Ebpf => "#e07b39",
        Tech::Script => "#756bb1",
        Tech::Upcall => "#2b7bb9",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(v: u64) -> Fig {
        Fig { median: v, min: v, max: v, samples: 1 }
    }

    #[test]
    fn report_and_figure_from_figures() {
        let mut agg = Agg::new();
        let mut put = |m: &str, v: u64| {
            agg.insert(("scion".into(), "icount".into(), m.into()), fig(v));
        };
        for (t, null, h) in [
            ("native", 90, 450),
            ("wasmi", 700, 14_000),
            ("ebpf", 900, 39_000),
            ("rhai", 3700, 318_000),
            ("upcall", 3100, 3700),
        ] {
            put(&format!("graft_evict_{t}_null"), null);
            put(&format!("graft_evict_{t}_hotlist"), h);
        }
        put("graft_evict_miss", 16_800);
        let r = report(&agg, &[("icount", true, "tcg".into())]);
        assert!(r.contains("| native (unsafe C in the kernel) | 90 | 450 | 1.0 | 37 |"), "{r}");
        assert!(r.contains("script rhai: 706.7× (no target"), "{r}");
        assert!(r.contains("interpreter wasmi: 31.1× ≤ 15×: **missed**"), "{r}");
        assert!(r.contains("eBPF, verified and JIT-compiled: 86.7× ≤ 3×: **missed**"), "{r}");
        assert!(
            r.contains("upcall, null graft's overhead: 3010 ≤ 656 instructions (2× the IPC round trip): **missed**"),
            "{r}"
        );
        assert!(r.contains("| upcall overhead (the difference) | 3010 |"), "{r}");
        let svg = figure1(&agg);
        assert!(svg.contains("<polyline") && svg.contains("rhai: 0.05") && svg.contains("native: 37"), "{svg}");
    }
}
