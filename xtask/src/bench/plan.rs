//! A bench run's plan: the real one or the smoke, its modes, runs and directory, and
//! a suite's end (`Plan::finish`: its files written, the smoke's check of its figures).

use super::report::{missing, reads, write_suite, Agg};
use crate::qemu::{self, Options};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Runs per figure in a real run.
pub(crate) const RUNS: usize = 3;

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
    pub(super) logs: RefCell<BTreeMap<String, PathBuf>>,
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

#[cfg(test)]
mod tests {
    use super::*;

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
