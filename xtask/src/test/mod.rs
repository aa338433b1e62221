//! `cargo xtask test [FILTER]`: the host crates' unit tests, the lint, and the QEMU
//! scenarios (`scenarios`), the power-cut rounds (`crash`), the two-boot tests and the
//! bench smoke, two machines at a time.

pub mod crash;
#[cfg(test)]
mod imports;
pub mod nettest;
pub mod scenarios;
pub mod sqlcrash;

use crate::qemu::{self, Options};
use crate::{build, make_image, out_dir, Artifacts};
use scenarios::{fuzz_seed, make_disk, run_scenario, scenarios, Result1, Scenario};
use std::process::{Command, ExitCode};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Crates whose logic is tested on the host: the workspace's default members
/// (`default-members` in the root Cargo.toml, the one list), as `cargo metadata` names
/// them.
pub fn host_crates() -> Result<Vec<String>, String> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(crate::project_root())
        .output()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    default_members(&out.stdout)
}

/// The names of the packages among the workspace's default members in `cargo metadata`'s
/// JSON.
fn default_members(json: &[u8]) -> Result<Vec<String>, String> {
    let m: serde_json::Value = serde_json::from_slice(json).map_err(|e| format!("cargo metadata: {e}"))?;
    let ids: Vec<&str> = m["workspace_default_members"]
        .as_array()
        .ok_or("cargo metadata names no workspace_default_members")?
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    let names: Vec<String> = m["packages"]
        .as_array()
        .ok_or("cargo metadata names no packages")?
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| ids.contains(&id)))
        .filter_map(|p| p["name"].as_str().map(String::from))
        .collect();
    if names.is_empty() {
        return Err("the workspace has no default members (host crates)".into());
    }
    Ok(names)
}

/// Host unit tests of the portable crates; returns (name, ok) per test.
fn host_tests(filter: Option<&str>) -> Result<Vec<(String, bool)>, String> {
    let mut res = Vec::new();
    for krate in host_crates()? {
        let krate = krate.as_str();
        let out = Command::new(env!("CARGO")).args(["test", "-p", krate]).output().map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut seen = 0;
        for l in text.lines() {
            if let Some((name, verdict)) = l.strip_prefix("test ").and_then(|r| r.rsplit_once(" ... ")) {
                seen += 1;
                let full = format!("host/{krate}::{name}");
                if filter.is_none_or(|f| full.contains(f)) {
                    res.push((full, verdict.trim() == "ok"));
                }
            }
        }
        if !out.status.success() && seen == 0 {
            eprintln!("{}", String::from_utf8_lossy(&out.stderr));
            res.push((format!("host/{krate} (build)"), false));
        }
    }
    Ok(res)
}

/// The unsafe rules (`[workspace.lints]`: every `unsafe` block documented, no unsafe
/// operation unmarked inside an `unsafe fn`) are clippy lints: run clippy over the kernel
/// and every user crate (bare target) and over the host crates with their tests. And
/// the workspace is formatted as `rustfmt.toml` says (`cargo fmt --check`).
fn lint_tests(filter: Option<&str>) -> Vec<(String, bool)> {
    // The host crates with their tests: the same list as the host tests' (`swap` was left
    // out of a list written here by hand).
    let mut host: Vec<String> = vec!["clippy".into(), "--tests".into()];
    match host_crates() {
        Ok(v) => host.extend(v.into_iter().flat_map(|k| ["-p".to_string(), k])),
        Err(e) => {
            eprintln!("    | {e}");
            return vec![("lint/clippy-host".to_string(), false)];
        }
    }
    host.extend(["--", "-D", "warnings"].map(String::from));
    let kernel: Vec<String> = [
        "clippy",
        "--release",
        "--target",
        crate::TARGET,
        "--workspace",
        "--exclude",
        "xtask",
        "--exclude",
        "testalloc",
        "--exclude",
        "scion-uefi",
        "--",
        "-D",
        "warnings",
    ]
    .map(String::from)
    .to_vec();
    // The UEFI loader, for its own target.
    let loader: Vec<String> =
        ["clippy", "--release", "--target", crate::esp::UEFI_TARGET, "-p", "scion-uefi", "--", "-D", "warnings"]
            .map(String::from)
            .to_vec();
    let format: Vec<String> = ["fmt", "--all", "--", "--check"].map(String::from).to_vec();
    // The WASI programs are a workspace of their own (another target): formatted as the
    // rest, by the same rustfmt.toml.
    let wasi_manifest = crate::project_root().join("user/wasi-programs/Cargo.toml").display().to_string();
    let format_wasi: Vec<String> =
        vec!["fmt".into(), "--manifest-path".into(), wasi_manifest, "--".into(), "--check".into()];
    let runs: [(&str, Vec<String>); 5] = [
        ("lint/clippy-kernel-and-user", kernel),
        ("lint/clippy-uefi-loader", loader),
        ("lint/clippy-host", host),
        ("lint/format", format),
        ("lint/format-wasi-programs", format_wasi),
    ];
    let mut res = Vec::new();
    for (name, args) in runs {
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let tools = if name.starts_with("lint/format") {
            crate::ensure_rustfmt()
        } else if name == "lint/clippy-uefi-loader" {
            crate::ensure_target_named(crate::esp::UEFI_TARGET).and_then(|_| crate::ensure_clippy())
        } else {
            crate::ensure_target().and_then(|_| crate::ensure_clippy())
        };
        if let Err(e) = tools {
            eprintln!("    | {e}");
            res.push((name.to_string(), false));
            continue;
        }
        let ok = match Command::new(env!("CARGO")).args(args).output() {
            Ok(out) if out.status.success() => true,
            Ok(out) => {
                // clippy speaks on stderr; rustfmt's check prints its diff on stdout.
                let text = format!("{}{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
                for l in text
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("Compiling") && !l.trim_start().starts_with("Checking"))
                    .take(60)
                {
                    eprintln!("    | {l}");
                }
                if name == "lint/format" {
                    eprintln!("    | (`cargo fmt --all` formats the workspace as rustfmt.toml says)");
                } else if name == "lint/format-wasi-programs" {
                    eprintln!("    | (`cargo fmt --manifest-path user/wasi-programs/Cargo.toml` formats them)");
                }
                false
            }
            Err(e) => {
                eprintln!("    | cargo clippy: {e} (rustup component add clippy)");
                false
            }
        };
        res.push((name.to_string(), ok));
    }
    res
}

/// The queue's name for the power-cut rounds.
const CRASH: &str = "crash";
const SQLCRASH: &str = "sqlcrash";
/// `cargo xtask bench --smoke` as one entry of the suite (`bench::smoke_test`).
const BENCH_SMOKE: &str = "bench_smoke";

/// How the first of two boots ends.
#[derive(Clone, Copy)]
enum FirstEnd<'a> {
    /// Killed the moment it prints this (an acknowledged sync): a power cut.
    KilledAt(&'a str),
    /// It prints this and halts the machine itself (root ends it with status 0).
    Halts(&'a str),
}

/// Two boots on one disk: scenario `name` with `PHASE` = write, ended as `end` says,
/// then with `PHASE` = read, whose program `program` must pass. Results
/// `<name>/<first>` and `<name>/<second>`, and the disk.
fn two_boots(
    a: &Artifacts,
    name: &str,
    program: &str,
    end: FirstEnd,
    first: &str,
    second: &str,
) -> Result<(Vec<Result1>, Option<std::path::PathBuf>), String> {
    let phase = |p: &str| {
        Scenario::load(name, &[("PHASE", p.to_string()), ("GRAFTS", crate::grafts::dir().display().to_string())])
            .map(|s| Scenario { name: format!("{name}-{p}"), ..s })
    };
    let write = phase("write")?;
    let disk = make_disk(&write)?.expect("a disk");
    let img = make_image(a, &write.manifest, &write.name)?;
    let opts = Options::new(qemu::accel(), false, String::new(), Some(disk.clone()));
    let (out, synced) = match end {
        FirstEnd::KilledAt(marker) => {
            let out = qemu::run_until(&a.kernel, &img, &opts, Duration::from_secs(180), None, Some(marker))?;
            let synced = out.log.contains(marker) && out.status.is_none();
            (out, synced)
        }
        FirstEnd::Halts(marker) => {
            let out = qemu::run_to_end(&a.kernel, &img, &opts, Duration::from_secs(180), None)?;
            let synced = out.log.contains(marker) && out.status == Some(1);
            (out, synced)
        }
    };
    let logs = out_dir().join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let log = |p: &str| logs.join(format!("{name}-{p}.log"));
    std::fs::write(log("write"), &out.log).map_err(|e| e.to_string())?;
    // The first boot is killed, so its program never reports: its failed checks are
    // read from the log.
    let failed: Vec<&str> = out.log.lines().map(str::trim).filter(|l| l.starts_with("FAIL ")).collect();
    let mut res = vec![Result1 {
        name: format!("{name}/{first}"),
        ok: synced && failed.is_empty(),
        detail: if !synced {
            match end {
                FirstEnd::KilledAt(_) => {
                    format!("no acknowledged sync before the kill; see {}", log("write").display())
                }
                FirstEnd::Halts(_) => format!("the first boot did not write and halt; see {}", log("write").display()),
            }
        } else if !failed.is_empty() {
            format!("{}; see {}", failed.join("; "), log("write").display())
        } else {
            String::new()
        },
    }];
    if !synced {
        return Ok((res, None));
    }
    let read = phase("read")?;
    let img = make_image(a, &read.manifest, &read.name)?;
    let opts = Options::new(qemu::accel(), false, String::new(), Some(disk.clone()));
    let out = qemu::run_to_end(&a.kernel, &img, &opts, Duration::from_secs(180), None)?;
    std::fs::write(log("read"), &out.log).map_err(|e| e.to_string())?;
    let ok = out.log.contains(&format!("TEST {program} PASS")) && out.status == Some(1);
    res.push(Result1 {
        name: format!("{name}/{second}"),
        ok,
        detail: if ok { String::new() } else { format!("see {}", log("read").display()) },
    });
    Ok((res, Some(disk)))
}

/// Durability: boot 1 writes, syncs and is killed the moment the sync is acknowledged;
/// boot 2 (same disk) reads the data back.
fn durability(a: &Artifacts) -> Result<Vec<Result1>, String> {
    let end = FirstEnd::KilledAt("DURABLE synced");
    Ok(two_boots(a, "durable", "durable_test", end, "write-sync-kill", "read-after-kill")?.0)
}

/// `halt` syncs: boot 1 creates and writes a file (kept back by files, neither synced
/// nor closed) and halts at once; boot 2 (same disk) finds its bytes.
fn halt_syncs(a: &Artifacts) -> Result<Vec<Result1>, String> {
    Ok(two_boots(a, "halt", "halt_test", FirstEnd::Halts("HALT_TEST wrote"), "write-halt", "read-after-halt")?.0)
}

/// A logical disk across two boots (VINO §3.3): written through the Wasm graft and
/// killed at the sync, read through the eBPF one; then the image passes `fsck` and the
/// host reads the map from it: every block it names holds that logical block's data.
fn logical_disk(a: &Artifacts) -> Result<Vec<Result1>, String> {
    let end = FirstEnd::KilledAt("LDISK synced");
    let (mut res, disk) = two_boots(a, "ldisk", "ldisk_test", end, "write-sync-kill", "remount-read")?;
    let Some(disk) = disk else { return Ok(res) };
    let fsck = crate::image::fsck(&[disk.display().to_string()])?;
    res.push(Result1 {
        name: "ldisk/fsck".into(),
        ok: fsck == ExitCode::SUCCESS,
        detail: format!("cargo xtask fsck {}", disk.display()),
    });
    let host = host_reads_ldisk(&disk);
    res.push(Result1 {
        name: "ldisk/host-reads-the-map".into(),
        ok: host.is_ok(),
        detail: host.err().unwrap_or_default(),
    });
    Ok(res)
}

/// The logical disk `ldisk` of the image at `path`, read on the host with the same
/// map format and graft: the map is whole, and each logical block it names holds that
/// block's data (its first word's high half is the logical block).
fn host_reads_ldisk(path: &std::path::Path) -> Result<(), String> {
    use baio::ldisk::{MapLog, MAP_BLOCKS};
    use baio::{BlockDev, MemDev, Volume, BLOCK};
    let mut dev = MemDev(std::fs::read(path).map_err(|e| e.to_string())?);
    let v = Volume::mount(&mut dev).map_err(|e| format!("{e:?}"))?;
    let i = v.lookup("ldisk").ok_or("no segment ldisk on the image")?.clone();
    let data = i.length - MAP_BLOCKS;
    let (_, state) = MapLog::open(&mut dev, i.start + data, graft_examples::LD_STATE).map_err(|e| format!("{e:?}"))?;
    let mut state = state.ok_or("no whole copy of the map")?;
    let mut named = 0;
    for l in 0..data {
        let mut input = [0u8; 24];
        input[..8].copy_from_slice(&l.to_le_bytes());
        input[8..16].copy_from_slice(&data.to_le_bytes());
        let p = graft_examples::ldisk(&input, &mut state);
        if p >= data {
            continue;
        }
        let mut b = [0u8; BLOCK];
        dev.read(i.start + p, &mut b).map_err(|e| format!("{e:?}"))?;
        let first = u64::from_le_bytes(b[..8].try_into().unwrap_or_default());
        if first >> 32 != l {
            return Err(format!("logical block {l} maps to physical {p}, which holds {first:#x}"));
        }
        named += 1;
    }
    if named == 0 {
        return Err("the map names no block".into());
    }
    Ok(())
}

/// The bench smoke, given by the caller (`bench::smoke_test`): the bench suites boot
/// scenarios of this module, so this one does not name them back.
pub type Smoke = fn(&Artifacts) -> Result<(), String>;

/// Run the tests whose name contains `filter` (all without one); `smoke` is the bench
/// smoke's entry.
pub fn test(filter: Option<&str>, smoke: Smoke) -> Result<ExitCode, String> {
    let (mut passed, mut failed) = (0u32, 0u32);
    // A filter that is a scenario's whole name asks for that scenario: the host tests
    // (every crate built and run before any name is known) are skipped.
    let scenario_named =
        filter.is_some_and(|f| crate::project_root().join("system/scenarios").join(format!("{f}.toml")).is_file());
    let host = if scenario_named { Vec::new() } else { host_tests(filter)? };
    for (name, ok) in host.into_iter().chain(lint_tests(filter)) {
        println!("test {name} ... {}", if ok { "ok" } else { "FAILED" });
        if ok {
            passed += 1
        } else {
            failed += 1
        }
    }
    let seed = fuzz_seed();
    let selected: Vec<Scenario> = scenarios(seed)?
        .into_iter()
        .filter(|s| {
            !s.manual
                && (!s.on_demand || filter == Some(s.name.as_str()))
                && filter.is_none_or(|f| s.name.contains(f) || s.tests.iter().any(|t| t.contains(f)))
        })
        .collect();
    let run_durability = filter.is_none_or(|f| "durable".contains(f) || f.contains("durab"));
    let run_ldisk = filter.is_none_or(|f| "ldisk".contains(f) || f.contains("ldisk"));
    let run_halt = filter.is_none_or(|f| "halt".contains(f) || f.contains("halt"));
    // The power-cut rounds (crash.rs) take a worker of their own, first (the longest).
    let mut selected = selected;
    if filter.is_none_or(|f| "crash".contains(f) || (f.contains("crash") && !f.contains(SQLCRASH))) {
        selected.push(Scenario {
            name: CRASH.into(),
            ..Scenario::load("crash", &[("BOOT", "1".into()), ("SEED", seed.to_string())])?
        });
    }
    // SQLite's power cuts (sqlcrash.rs) likewise.
    if filter.is_none_or(|f| SQLCRASH.contains(f) || f.contains(SQLCRASH)) {
        selected.push(Scenario {
            name: SQLCRASH.into(),
            ..Scenario::load("sqlcrash", &[("BOOT", "1".into()), ("WASI", crate::wasi::dir().display().to_string())])?
        });
    }
    // The bench smoke (one QEMU at a time, a few minutes) takes a worker too, first.
    if filter.is_none_or(|f| BENCH_SMOKE.contains(f)) {
        selected.push(Scenario { name: BENCH_SMOKE.into(), ..Scenario::bench(BENCH_SMOKE, "smp", &[])? });
    }
    let artifacts = if !selected.is_empty() || run_durability || run_ldisk || run_halt {
        qemu::ensure_qemu()?;
        Some(Arc::new(build()?))
    } else {
        None
    };
    if let (false, Some(a)) = (selected.is_empty(), artifacts.clone()) {
        if selected.iter().any(|s| s.name.contains("fuzz")) {
            println!("fuzz seed: {seed} (set SCION_FUZZ_SEED to repeat)");
        }
        // Two boots at a time: the machines here have two cores.
        let queue = Arc::new(Mutex::new(selected));
        let results = Arc::new(Mutex::new((0u32, 0u32)));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (q, a, r) = (queue.clone(), a.clone(), results.clone());
                std::thread::spawn(move || loop {
                    let Some(sc) = q.lock().unwrap().pop() else { break };
                    let run = match sc.name.as_str() {
                        CRASH => crash::run(&a, seed),
                        SQLCRASH => sqlcrash::run(&a, seed),
                        BENCH_SMOKE => Ok(bench_smoke(&a, smoke)),
                        _ => run_scenario(&a, &sc),
                    };
                    match run {
                        Ok((res, log)) => {
                            for t in res {
                                let mut g = r.lock().unwrap();
                                if t.ok {
                                    g.0 += 1;
                                    println!("test qemu/{} ... ok", t.name);
                                } else {
                                    g.1 += 1;
                                    println!("test qemu/{} ... FAILED ({}); serial log: {}", t.name, t.detail, log);
                                    if let Ok(text) = std::fs::read_to_string(&log) {
                                        let lines: Vec<&str> = text.lines().collect();
                                        for l in &lines[lines.len().saturating_sub(30)..] {
                                            println!("    | {l}");
                                        }
                                    }
                                }
                            }
                        }
                        Err(e) => {
                            r.lock().unwrap().1 += 1;
                            println!("test qemu/{} ... FAILED ({e})", sc.name);
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            let _ = w.join();
        }
        let g = results.lock().unwrap();
        passed += g.0;
        failed += g.1;
    }
    let mut two_boot: Vec<Result1> = Vec::new();
    if let (true, Some(a)) = (run_durability, &artifacts) {
        two_boot.extend(durability(a)?);
    }
    if let (true, Some(a)) = (run_ldisk, &artifacts) {
        two_boot.extend(logical_disk(a)?);
    }
    if let (true, Some(a)) = (run_halt, &artifacts) {
        two_boot.extend(halt_syncs(a)?);
    }
    for t in two_boot {
        println!("test qemu/{} ... {}", t.name, if t.ok { "ok".to_string() } else { format!("FAILED ({})", t.detail) });
        if t.ok {
            passed += 1
        } else {
            failed += 1
        }
    }
    println!("{passed} passed, {failed} failed");
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The bench smoke's result; its log (the error and the serial logs' tails) in
/// `target/bench-smoke/smoke.log`.
fn bench_smoke(a: &Artifacts, smoke: Smoke) -> (Vec<Result1>, String) {
    let log = crate::target_dir().join("bench-smoke").join("smoke.log");
    let r = smoke(a);
    let _ = std::fs::create_dir_all(crate::target_dir().join("bench-smoke"));
    let _ = std::fs::write(&log, r.as_ref().err().map_or("the bench smoke passed\n", |e| e.as_str()));
    let detail = r.as_ref().err().map_or(String::new(), |e| e.lines().next().unwrap_or("").to_string());
    (vec![Result1 { name: BENCH_SMOKE.into(), ok: r.is_ok(), detail }], log.display().to_string())
}

#[cfg(test)]
mod tests {
    /// The host crates are the workspace's default members, by name, from cargo
    /// metadata's JSON; none is an error, not an empty test run.
    #[test]
    fn host_crates_are_the_default_members() {
        let json = br#"{"packages": [{"name": "abi", "id": "path+file:///w/crates/abi#0.1.0"}, {"name": "kernel", "id": "path+file:///w/kernel#0.1.0"}, {"name": "swap", "id": "path+file:///w/crates/swap#0.1.0"}],
            "workspace_default_members": ["path+file:///w/crates/abi#0.1.0", "path+file:///w/crates/swap#0.1.0"]}"#;
        assert_eq!(super::default_members(json).unwrap(), vec!["abi".to_string(), "swap".to_string()]);
        assert!(super::default_members(br#"{"packages": [], "workspace_default_members": []}"#).is_err());
        assert!(super::default_members(b"{}").is_err());
    }

    /// This workspace's: every crate the root Cargo.toml lists, `swap` among them.
    #[test]
    fn this_workspace_has_its_host_crates() {
        let v = super::host_crates().unwrap();
        for k in ["abi", "kcore", "swap", "xtask"] {
            assert!(v.iter().any(|n| n == k), "{k} missing from {v:?}");
        }
        assert!(!v.iter().any(|n| n == "kernel"), "the kernel is no host crate: {v:?}");
    }

    /// xtask's modules in layers, imports pointing down only (ARCHITECTURE.md): what each
    /// file outside its tests may name of its neighbours (`super::`) and that `test/` names
    /// nothing of `bench/` (which boots `test::scenarios`: a name back would close a circle).
    /// And in every crate of the workspace, no two modules name each other, directly or
    /// around a circle (`imports`).
    #[test]
    fn imports_point_down() {
        let src = crate::project_root().join("xtask/src");
        let suite = ["plan", "report", "ipcprobe", "netload", "nginx"];
        let rules: [(&str, &[&str]); 22] = [
            ("bench/report.rs", &[]),
            ("bench/plan.rs", &["report"]),
            ("bench/linux.rs", &["nginx"]),
            ("bench/ipcprobe.rs", &[]),
            ("bench/netload.rs", &[]),
            ("bench/nginx.rs", &[]),
            ("bench/kernel.rs", &suite),
            ("bench/baio.rs", &suite),
            ("bench/net.rs", &suite),
            ("bench/cue.rs", &suite),
            ("bench/grafts.rs", &suite),
            ("bench/k42.rs", &suite),
            ("bench/smp.rs", &suite),
            ("test/mod.rs", &[]),
            ("test/scenarios.rs", &["nettest"]),
            ("test/crash.rs", &["scenarios"]),
            ("test/sqlcrash.rs", &["scenarios", "crash"]),
            ("test/nettest.rs", &[]),
            ("grafts/common.rs", &[]),
            ("grafts/sfi.rs", &["common"]),
            ("grafts/signed.rs", &["common"]),
            ("grafts/command.rs", &["common", "sfi", "signed"]),
        ];
        for (file, allowed) in rules {
            let text = std::fs::read_to_string(src.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            let code = text.split("\n#[cfg(test)]\nmod ").next().unwrap_or("");
            for (at, _) in code.match_indices("super::") {
                let rest = &code[at + 7..];
                // `super::{a, b}` names a and b; `super::a::…` names a.
                let names = match rest.strip_prefix('{') {
                    Some(list) => list.split('}').next().unwrap_or("").to_string(),
                    None => rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect(),
                };
                for name in names.split(',').map(str::trim) {
                    assert!(allowed.contains(&name), "{file} names super::{name}; it may name {allowed:?}");
                }
            }
            if file.starts_with("test/") {
                assert!(!code.contains("crate::bench"), "{file} names crate::bench");
            }
        }
        // And no import circle in any crate of the workspace (`imports`).
        let roots = super::imports::crate_roots().unwrap();
        assert!(roots.len() > 40, "cargo metadata names only {} crate roots", roots.len());
        let circles: Vec<String> = roots.iter().flat_map(|r| super::imports::circles(r)).collect();
        assert!(circles.is_empty(), "import circles:\n{}", circles.join("\n"));
    }
}
