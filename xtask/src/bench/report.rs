//! What every suite shares: a figure (`Fig`) parsed from a guest's `BENCH` lines,
//! the aggregate over runs (`Agg`), the figures a report reads (`get`, `reads`,
//! `missing`), a suite's `SUITE.json` and `SUITE.svg`, and the panels plot.

use crate::qemu;
use serde_json::json;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

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

pub(super) fn host_cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default()
}

pub(super) fn qemu_version() -> String {
    Command::new(qemu::QEMU)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or("").to_string())
        .unwrap_or_default()
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
pub(super) fn write_suite(
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

/// An aggregate of the given (system, mode, metric) figures, each 1 (the tests' reports).
#[cfg(test)]
pub(crate) fn agg_of(figs: &[(&str, &str, &str)]) -> Agg {
    figs.iter()
        .map(|(s, mo, m)| {
            ((s.to_string(), mo.to_string(), m.to_string()), Fig { median: 1, min: 1, max: 1, samples: 1 })
        })
        .collect()
}
