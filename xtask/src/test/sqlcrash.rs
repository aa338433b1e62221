//! SQLite across power cuts: the WASI program `sqlcrash` (SQLite built for WASI, run by
//! Scion's `wasi` runner on `files` over BAIO) commits transactions with
//! `synchronous=FULL` and says each commit once it has returned; the host kills QEMU at
//! a random moment, and the cut keeps a random part of the disk's unflushed writes (as
//! `crash.rs`, on `cachedisk`). The next boot's `sqlcrash` checks the database first:
//! `PRAGMA integrity_check` must say `ok`, every row's bytes must match their checksum,
//! and the last transaction must be the last one acknowledged before the cut or the one
//! under way then — SQLite's journal, `fd_sync` → `FSYNC`, the files server's and
//! baiofs's flush ordering (truncation and removal of the journal among them) all hold,
//! or this fails. `SCION_SQL_KILLS` sets the number of kills (5).

use super::crash::{drive, kill_boot, xorshift};
use super::scenarios::{make_disk, Result1, Scenario};
use crate::{out_dir, Artifacts};
use std::time::Duration;

/// (integrity, have, rows, bad) from boot `boot`'s first line, if it said it.
fn found(log: &str, boot: u64) -> Option<(String, u64, u64, u64)> {
    let l = log.lines().find_map(|l| l.strip_prefix(&format!("SQLCRASH boot {boot} integrity ")))?;
    let w: Vec<&str> = l.split_whitespace().collect();
    match w.as_slice() {
        [integrity, "have", have, "rows", rows, "bad", bad] => {
            Some((integrity.to_string(), have.parse().ok()?, rows.parse().ok()?, bad.parse().ok()?))
        }
        _ => None,
    }
}

/// The last commit a boot acknowledged: only whole lines count (the kill may cut one).
fn acknowledged(log: &str) -> Option<u64> {
    let whole = &log[..log.rfind('\n').map_or(0, |i| i + 1)];
    whole.lines().filter_map(|l| l.strip_prefix("SQLCRASH committed ")?.trim().parse().ok()).max()
}

pub fn run(a: &Artifacts, seed: u64) -> Result<(Vec<Result1>, String), String> {
    let kills: u64 = std::env::var("SCION_SQL_KILLS").ok().and_then(|k| k.parse().ok()).unwrap_or(5);
    let logs = out_dir().join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let wasi = crate::wasi::dir().display().to_string();
    let load = |boot: u64| {
        Scenario::load("sqlcrash", &[("BOOT", boot.to_string()), ("WASI", wasi.clone())])
            .map(|s| Scenario { name: format!("sqlcrash-{boot}"), ..s })
    };
    let disk = make_disk(&load(1)?)?.ok_or("the sqlcrash scenario has no disk")?;
    let mut next = xorshift(seed.wrapping_mul(0x2545_f491_4f6c_dd1d));
    let (mut res, mut all_logs) = (Vec::new(), String::new());
    let log_path = logs.join("sqlcrash.log");
    // (the last commit acknowledged before the previous cut)
    let mut acked = 0u64;
    // The last boot only checks what the last cut left.
    for boot in 1..=kills + 1 {
        let last = boot == kills + 1;
        let (marker, delay) = if last {
            (format!("SQLCRASH boot {boot} "), 0)
        } else {
            // A few commits in, then a random moment.
            (format!("SQLCRASH committed {}", acked + 2 + next() % 4), next() % 300)
        };
        let (out, cut, _) =
            kill_boot(a, &load(boot)?, &disk, boot, (&marker, delay), Duration::from_secs(180), &mut next)?;
        all_logs.push_str(&format!(
            "===== boot {boot}: killed at `{marker}` + {delay} ms; the cut lost {} of {} unflushed sectors\n{}\n",
            cut.lost, cut.unflushed, out.log
        ));
        let name = format!("sqlcrash/boot {boot} ({})", drive(boot));
        let detail = match found(&out.log, boot) {
            None => Err(format!("sqlcrash did not say what it found (timed out: {})", out.timed_out)),
            Some((integrity, ..)) if integrity != "ok" => Err(format!("integrity_check: {integrity}")),
            Some((_, _, _, bad)) if bad > 0 => Err(format!("{bad} rows whose bytes do not match their checksum")),
            Some((_, have, ..)) if have < acked => {
                Err(format!("commit {acked} was acknowledged before the cut, the database ends at {have}"))
            }
            Some((_, have, ..)) if boot > 1 && have > acked + 1 => {
                Err(format!("the database ends at {have}, past {acked} acknowledged and the one under way"))
            }
            Some((_, have, rows, _)) if !last && out.timed_out => {
                Err(format!("found {have} ({rows} rows) but never got to `{marker}`"))
            }
            Some((_, have, rows, _)) => {
                let now = acknowledged(&out.log).unwrap_or(have);
                let d = format!(
                    "integrity ok, {rows} rows, last commit {have} (acknowledged before the cut: {acked}); {} commits acknowledged this boot; the cut lost {} of {} unflushed sectors",
                    now.saturating_sub(have), cut.lost, cut.unflushed
                );
                acked = now;
                Ok(d)
            }
        };
        let ok = detail.is_ok();
        if let Ok(d) = &detail {
            println!("    {name}: {d}");
        }
        res.push(Result1 { name, ok, detail: detail.err().unwrap_or_default() });
        if !ok {
            break;
        }
    }
    std::fs::write(&log_path, all_logs).map_err(|e| e.to_string())?;
    Ok((res, log_path.display().to_string()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_commit_counts_only_on_a_whole_line() {
        assert_eq!(super::acknowledged("SQLCRASH committed 4\nSQLCRASH committed 5\nSQLCRASH committed 6"), Some(5));
        assert_eq!(super::acknowledged("x\n"), None);
        assert_eq!(
            super::found("SQLCRASH boot 3 integrity ok have 12 rows 9 bad 0\n", 3),
            Some(("ok".into(), 12, 9, 0))
        );
        assert_eq!(super::found("SQLCRASH boot 3 integrity ok have 12 rows 9 bad 0\n", 2), None);
    }
}
