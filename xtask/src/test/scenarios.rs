//! `cargo xtask test`: host unit tests, then QEMU scenarios. A scenario is one boot
//! with an `init` that names test programs; root prints `TEST <name> PASS|FAIL` for
//! each and ends the machine when all are done.

use crate::nettest;
use crate::qemu::{self, Options};
use crate::{build, make_image, out_dir, project_root, Artifacts};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A scenario: one boot, described by a file in `system/scenarios/` — a `[scenario]`
/// table (how to boot and what to check) followed by root's manifest for the boot, whose
/// entries marked `test = true` are the tests. Root prints `TEST <name> PASS|FAIL` for
/// each and ends the machine when all are done.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    /// Root's manifest: the included parts, then the file's own entries.
    pub manifest: String,
    /// The entries marked `test = true`.
    pub tests: Vec<String>,
    /// Type `text` into the serial port once `marker` appears.
    pub input: Option<(String, String)>,
    /// With input: strings the serial log must show (the scenario is one test).
    pub expect: Vec<String>,
    /// A 64 MiB BAIO disk with these segments (`NAME:OWNER:BLOCKS[:FILE | :fs=PATH+…]`,
    /// paths relative to the project; a PATH `program=NAME` is a program of this build
    /// as the boot image holds it). Damage after making it: `!corrupt` flips a byte
    /// of the first inode's owner, `!stale-bitmap` clears the bitmap's first byte (what
    /// a crash between an inode's write and the bitmap's leaves), `!zeroed-inodes`
    /// zeroes the first inode-table block (damage no interrupted update leaves: the
    /// segments' blocks stay used in the bitmap), `!ragged` adds half a block at the end.
    pub disk: Option<Vec<String>>,
    /// Or a disk image made elsewhere (the benchmarks'), attached as it is.
    pub disk_file: Option<PathBuf>,
    /// Kernel command line.
    pub append: String,
    pub icount: bool,
    /// QEMU's machine (`q35`, or `pc`: i440fx) and memory (`512M`).
    pub machine: String,
    pub memory: String,
    /// Virtual CPUs when the scenario says (else `--cpus`).
    pub cpus: Option<u32>,
    pub limit_s: u64,
    /// Run only by the code that needs it (the durability test), not on its own.
    pub manual: bool,
    /// Left out of the full suite; run when the filter names it exactly.
    pub on_demand: bool,
    /// QEMU's exit status when the scenario passes (1: root ended the machine with 0).
    pub status: i32,
    /// A network device (restricted user network; the host's echo server at
    /// `nettest::ECHO_GUEST`).
    pub net: bool,
    /// The host's HTTP checks (`nettest`) through a forwarded port once the guest's
    /// httpd serves; then the machine is stopped.
    pub http: bool,
    /// Which of them (`nettest::http_checks`): "web" (the default), "scale" or "thousand".
    pub checks: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Header {
    limit: Option<u64>,
    append: Option<String>,
    icount: Option<bool>,
    /// Another scenario run as it is but for this header's machine, memory, limit and
    /// further `expect` strings.
    base: Option<String>,
    machine: Option<String>,
    memory: Option<String>,
    /// Virtual CPUs (else `--cpus`, else 1).
    cpus: Option<u32>,
    include: Option<Vec<String>>,
    disk: Option<Vec<String>>,
    input: Option<Input>,
    expect: Option<Vec<String>>,
    manual: Option<bool>,
    on_demand: Option<bool>,
    status: Option<i32>,
    net: Option<bool>,
    http: Option<bool>,
    checks: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    marker: String,
    text: String,
}

fn system_dir() -> PathBuf {
    project_root().join("system")
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The parts `names` (`system/parts/NAME.toml`), `vars` substituted.
fn parts(names: &[String], vars: &[(&str, String)]) -> Result<Vec<String>, String> {
    names
        .iter()
        .map(|n| read(&system_dir().join("parts").join(format!("{n}.toml"))).map(|t| substitute(&t, vars)))
        .collect()
}

/// A manifest file (`run.toml`, `system/bench/*.toml`) with the parts its `include`
/// line names put in (`compose`).
pub fn with_parts(text: &str, vars: &[(&str, String)]) -> Result<String, String> {
    let (names, own) = crate::compose::take_include(text)?;
    Ok(crate::compose::compose(&parts(&names, vars)?, &own))
}

/// `${NAME}` replaced by its value.
fn substitute(text: &str, vars: &[(&str, String)]) -> String {
    let mut t = text.to_string();
    for (k, v) in vars {
        t = t.replace(&format!("${{{k}}}"), v);
    }
    t
}

impl Scenario {
    /// Load `system/scenarios/NAME.toml` with `vars` substituted.
    pub fn load(name: &str, vars: &[(&str, String)]) -> Result<Scenario, String> {
        let path = system_dir().join("scenarios").join(format!("{name}.toml"));
        let text = substitute(&read(&path)?, vars);
        // The header is everything before the first manifest entry.
        let at =
            if text.starts_with("[[program]]") { 0 } else { text.find("\n[[program]]").map_or(text.len(), |i| i + 1) };
        let (head, body) = text.split_at(at);
        let h: Header = if head.contains("[scenario]") {
            let v: toml::Table = toml::from_str(head).map_err(|e| format!("{}: {e}", path.display()))?;
            match v.get("scenario") {
                Some(t) => t.clone().try_into().map_err(|e| format!("{}: [scenario]: {e}", path.display()))?,
                None => Header::default(),
            }
        } else {
            Header::default()
        };
        if let Some(b) = &h.base {
            let sc = Scenario::load(b, vars)?;
            let mut expect = sc.expect.clone();
            expect.extend(h.expect.unwrap_or_default());
            return Ok(Scenario {
                name: name.to_string(),
                expect,
                machine: h.machine.unwrap_or(sc.machine.clone()),
                memory: h.memory.unwrap_or(sc.memory.clone()),
                cpus: h.cpus.or(sc.cpus),
                limit_s: h.limit.unwrap_or(sc.limit_s),
                ..sc
            });
        }
        let manifest = crate::compose::compose(&parts(&h.include.unwrap_or_default(), vars)?, body);
        let sc = Scenario::from_manifest(name, manifest)?;
        Ok(Scenario {
            input: h.input.map(|i| (i.marker, i.text)),
            expect: h.expect.unwrap_or_default(),
            disk: h.disk,
            append: h.append.unwrap_or_default(),
            icount: h.icount.unwrap_or(false),
            machine: h.machine.unwrap_or_else(|| "q35".into()),
            memory: h.memory.unwrap_or_else(|| "512M".into()),
            cpus: h.cpus,
            limit_s: h.limit.unwrap_or(180),
            manual: h.manual.unwrap_or(false),
            on_demand: h.on_demand.unwrap_or(false),
            status: h.status.unwrap_or(1),
            net: h.net.unwrap_or(false) || h.http.unwrap_or(false),
            http: h.http.unwrap_or(false),
            checks: h.checks.unwrap_or_else(|| "web".into()),
            ..sc
        })
    }

    /// A boot of a manifest file (`system/bench/NAME.toml`) with `vars` substituted.
    /// `${ARGS}` not among `vars` is empty (a real run's bench program without arguments);
    /// the machine has one CPU (the `smp` suite sets two).
    pub fn bench(name: &str, file: &str, vars: &[(&str, String)]) -> Result<Scenario, String> {
        let path = system_dir().join("bench").join(format!("{file}.toml"));
        let text = substitute(&read(&path)?, vars);
        let text = substitute(&text, &[("ARGS", String::new())]);
        let text = with_parts(&text, vars).map_err(|e| format!("{}: {e}", path.display()))?;
        // One CPU whatever the default (`cargo xtask test` gives its machines two).
        Ok(Scenario { cpus: Some(1), ..Scenario::from_manifest(name, text)? })
    }

    fn from_manifest(name: &str, manifest: String) -> Result<Scenario, String> {
        let progs =
            manifest::parse(&manifest).map_err(|e| format!("scenario {name}: manifest line {}: {}", e.line, e.msg))?;
        let tests = progs.iter().filter(|p| p.test && p.start).map(|p| p.name.clone()).collect();
        Ok(Scenario {
            name: name.to_string(),
            manifest,
            tests,
            input: None,
            expect: Vec::new(),
            disk: None,
            disk_file: None,
            append: String::new(),
            icount: false,
            machine: "q35".into(),
            memory: "512M".into(),
            cpus: None,
            limit_s: 180,
            manual: false,
            on_demand: false,
            status: 1,
            net: false,
            http: false,
            checks: "web".into(),
        })
    }
}

fn fuzz_seed() -> u64 {
    std::env::var("SCION_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(1) % 1_000_000
    })
}

/// Every scenario file in `system/scenarios/`, loaded (`${SEED}`: the fuzz seed).
pub fn scenarios(seed: u64) -> Result<Vec<Scenario>, String> {
    let dir = system_dir().join("scenarios");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.path().file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".toml")).map(String::from)
        })
        .collect();
    names.sort();
    let www = out_dir().join("www").display().to_string();
    let grafts = crate::grafts::dir().display().to_string();
    names
        .iter()
        .map(|n| Scenario::load(n, &[("SEED", seed.to_string()), ("WWW", www.clone()), ("GRAFTS", grafts.clone())]))
        .collect()
}

/// The scenario's disk image (made fresh), if it has one.
pub fn make_disk(sc: &Scenario) -> Result<Option<std::path::PathBuf>, String> {
    if sc.disk_file.is_some() {
        return Ok(sc.disk_file.clone());
    }
    let disk = match &sc.disk {
        Some(segs) => {
            let path = out_dir().join(format!("{}-disk.img", sc.name));
            let root = crate::project_root();
            let damage: Vec<&str> = segs.iter().filter_map(|s| s.strip_prefix('!')).collect();
            // A path in an `fs=` list is relative to the project, or `program=NAME`: a
            // program of this build, as the boot image holds it.
            let host_path = |q: &str| match q.strip_prefix("program=") {
                Some(name) => crate::program_file(name).map(|p| p.display().to_string()),
                None => Ok(root.join(q).display().to_string()),
            };
            let segs: Vec<String> = segs
                .iter()
                .filter(|s| !s.starts_with('!'))
                .map(|s| {
                    let mut p: Vec<String> = s.split(':').map(String::from).collect();
                    if p.len() == 4 {
                        p[3] = match p[3].strip_prefix("fs=") {
                            Some(paths) => format!(
                                "fs={}",
                                paths.split('+').map(host_path).collect::<Result<Vec<_>, _>>()?.join("+")
                            ),
                            None => root.join(&p[3]).display().to_string(),
                        };
                    }
                    Ok(p.join(":"))
                })
                .collect::<Result<_, String>>()?;
            let v = crate::image::make(&path.display().to_string(), 64 << 20, &segs)?;
            if !damage.is_empty() {
                let mut img = std::fs::read(&path).map_err(|e| e.to_string())?;
                for d in damage {
                    match d {
                        "corrupt" => img[(v.layout.inode_start as usize) * baio::BLOCK + 4] ^= 0x40,
                        "stale-bitmap" => img[(v.layout.bitmap_start as usize) * baio::BLOCK] = 0,
                        "zeroed-inodes" => {
                            let at = v.layout.inode_start as usize * baio::BLOCK;
                            img[at..at + baio::BLOCK].fill(0);
                        }
                        "ragged" => img.extend_from_slice(&[0u8; 512]),
                        _ => return Err(format!("scenario {}: unknown disk damage `!{d}`", sc.name)),
                    }
                }
                std::fs::write(&path, img).map_err(|e| e.to_string())?;
            }
            Some(path)
        }
        None => None,
    };
    Ok(disk)
}

pub struct Result1 {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

/// Boot one scenario; returns one result per test program.
pub fn run_scenario(a: &Artifacts, sc: &Scenario) -> Result<(Vec<Result1>, String), String> {
    run_scenario_with(a, sc, &qemu::accel())
}

fn run_scenario_with(a: &Artifacts, sc: &Scenario, accel: &str) -> Result<(Vec<Result1>, String), String> {
    // An ftpd in the scenario gets its control port and four passive data ports
    // forwarded from free ports of the host, the data ports to the same numbers on the
    // guest (so its EPSV and PASV replies name ports the host can reach).
    let ftp = sc.http && sc.manifest.contains("${FTP_PASV}");
    // The scale checks get more ports to the guest's port 80 (`nettest::SCALE_PORTS`):
    // QEMU's user network listens on each forwarded port with a backlog of 1, so
    // clients connecting at once are spread over them (and one is kept for a client
    // that must not wait behind the others on the host). Every host port at once, so
    // that no two are the same.
    let web = sc.net && sc.http;
    let n_ftp = if ftp { 5 } else { 0 };
    let n_more = if web && matches!(sc.checks.as_str(), "scale" | "thousand") { nettest::SCALE_PORTS - 1 } else { 0 };
    let ports = qemu::free_ports(n_ftp + usize::from(web) + n_more)?;
    let ftp_ports: Vec<u16> = ports[..n_ftp].to_vec();
    let more_ports: Vec<u16> = ports[n_ftp + usize::from(web)..].to_vec();
    let pasv = ftp_ports.iter().skip(1).map(|p| format!("{p}:{p}")).collect::<Vec<_>>().join(",");
    let img = make_image(a, &sc.manifest.replace("${FTP_PASV}", &pasv), &sc.name)?;
    if sc.http || sc.net {
        nettest::make_www()?;
    }
    let disk = make_disk(sc)?;
    let mut net = None;
    let mut http_port = 0;
    if sc.net {
        let mut n = qemu::NetOptions {
            guest_forward: vec![
                (nettest::ECHO_GUEST.to_string(), "cat".to_string()),
                (nettest::WEB_GUEST.to_string(), nettest::responder()?.display().to_string()),
            ],
            ..Default::default()
        };
        n.guest_forward.extend(nettest::sinks()?);
        if web {
            http_port = ports[n_ftp];
            n.forward.push((http_port, 80));
            n.forward.extend(more_ports.iter().map(|p| (*p, 80)));
        }
        if let Some((ctrl, data)) = ftp_ports.split_first() {
            n.forward.push((*ctrl, 21));
            n.forward.extend(data.iter().map(|p| (*p, *p)));
        }
        net = Some(n);
    }
    let opts = Options {
        machine: sc.machine.clone(),
        memory: sc.memory.clone(),
        net,
        cpus: sc.cpus.unwrap_or(qemu::default_cpus()),
        ..Options::new(accel.to_string(), sc.icount, sc.append.to_string(), disk)
    };
    let input = sc.input.as_ref().map(|(m, t)| (m.as_str(), t.as_str()));
    let mut http_results = Vec::new();
    let out = if sc.http {
        let ftp_port = ftp_ports.first().copied();
        let mut checks = |t: &qemu::Typer| {
            http_results = nettest::http_checks(&[&[http_port][..], &more_ports].concat(), ftp_port, t, &sc.checks)
        };
        qemu::run_at(
            &a.kernel,
            &img,
            &opts,
            Duration::from_secs(sc.limit_s),
            input,
            Some((nettest::HTTPD_READY, &mut checks)),
        )?
    } else {
        qemu::run_to_end(&a.kernel, &img, &opts, Duration::from_secs(sc.limit_s), input)?
    };
    let logs = out_dir().join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let log_path = logs.join(format!("{}.log", sc.name));
    std::fs::write(&log_path, &out.log).map_err(|e| e.to_string())?;
    let mut results = Vec::new();
    if sc.http {
        if http_results.is_empty() {
            let detail = if out.timed_out {
                format!("httpd never said it serves ({} s)", sc.limit_s)
            } else {
                format!("httpd never said it serves; qemu exit status {:?}", out.status)
            };
            results.push(Result1 { name: format!("{}/http", sc.name), ok: false, detail });
        }
        for (name, r) in http_results {
            results.push(Result1 {
                name: format!("{}/http:{}", sc.name, name),
                ok: r.is_ok(),
                detail: r.err().unwrap_or_default(),
            });
        }
        if ftp {
            for (name, needle) in nettest::LOG_CHECKS {
                let ok = out.log.lines().any(|l| l.contains(needle));
                results.push(Result1 {
                    name: format!("{}/log:{}", sc.name, name),
                    ok,
                    detail: if ok { String::new() } else { format!("the serial log lacks a line with {needle:?}") },
                });
            }
        }
    }
    if sc.input.is_some() || !sc.expect.is_empty() {
        let missing: Vec<&str> = sc.expect.iter().map(String::as_str).filter(|e| !out.log.contains(e)).collect();
        let ok = missing.is_empty() && out.status == Some(sc.status);
        let detail = if out.timed_out {
            format!("timed out after {} s", sc.limit_s)
        } else if !missing.is_empty() {
            format!("the serial log lacks {:?}", missing)
        } else {
            format!("qemu exit status {:?}", out.status)
        };
        results.push(Result1 {
            name: format!("{}/session", sc.name),
            ok,
            detail: if ok { String::new() } else { detail },
        });
    }
    for prog in &sc.tests {
        let pass = out.log.lines().any(|l| l.trim() == format!("TEST {prog} PASS"));
        let fail = out.log.lines().any(|l| l.trim().starts_with(&format!("TEST {prog} FAIL")));
        let ok = pass && !fail && out.status == Some(1);
        let detail = if ok {
            String::new()
        } else if out.timed_out {
            format!("timed out after {} s", sc.limit_s)
        } else if out.log.contains("KERNEL PANIC") {
            "kernel panic".into()
        } else {
            format!("qemu exit status {:?}", out.status)
        };
        results.push(Result1 { name: format!("{}/{}", sc.name, prog), ok, detail });
    }
    Ok((results, log_path.display().to_string()))
}

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
        "--",
        "-D",
        "warnings",
    ]
    .map(String::from)
    .to_vec();
    let format: Vec<String> = ["fmt", "--all", "--", "--check"].map(String::from).to_vec();
    let runs: [(&str, Vec<String>); 3] =
        [("lint/clippy-kernel-and-user", kernel), ("lint/clippy-host", host), ("lint/format", format)];
    let mut res = Vec::new();
    for (name, args) in runs {
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let tools = if name == "lint/format" {
            crate::ensure_rustfmt()
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
/// `cargo xtask bench --smoke` as one entry of the suite (`bench::smoke_test`).
const BENCH_SMOKE: &str = "bench_smoke";

/// Two boots on one disk: scenario `name` with `PHASE` = write, killed the moment it
/// prints `marker` (an acknowledged sync), then with `PHASE` = read, whose program
/// `program` must pass. Results `<name>/<first>` and `<name>/<second>`, and the disk.
fn two_boots(
    a: &Artifacts,
    name: &str,
    program: &str,
    marker: &str,
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
    let out = qemu::run_until(&a.kernel, &img, &opts, Duration::from_secs(180), None, Some(marker))?;
    let logs = out_dir().join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let log = |p: &str| logs.join(format!("{name}-{p}.log"));
    std::fs::write(log("write"), &out.log).map_err(|e| e.to_string())?;
    let synced = out.log.contains(marker) && out.status.is_none();
    // The first boot is killed, so its program never reports: its failed checks are
    // read from the log.
    let failed: Vec<&str> = out.log.lines().map(str::trim).filter(|l| l.starts_with("FAIL ")).collect();
    let mut res = vec![Result1 {
        name: format!("{name}/{first}"),
        ok: synced && failed.is_empty(),
        detail: if !synced {
            format!("no acknowledged sync before the kill; see {}", log("write").display())
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
    Ok(two_boots(a, "durable", "durable_test", "DURABLE synced", "write-sync-kill", "read-after-kill")?.0)
}

/// A logical disk across two boots (VINO §3.3): written through the Wasm graft and
/// killed at the sync, read through the eBPF one; then the image passes `fsck` and the
/// host reads the map from it: every block it names holds that logical block's data.
fn logical_disk(a: &Artifacts) -> Result<Vec<Result1>, String> {
    let (mut res, disk) = two_boots(a, "ldisk", "ldisk_test", "LDISK synced", "write-sync-kill", "remount-read")?;
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
    let (_, state) = MapLog::open(&mut dev, i.start + data, grafts::LD_STATE).map_err(|e| format!("{e:?}"))?;
    let mut state = state.ok_or("no whole copy of the map")?;
    let mut named = 0;
    for l in 0..data {
        let mut input = [0u8; 24];
        input[..8].copy_from_slice(&l.to_le_bytes());
        input[8..16].copy_from_slice(&data.to_le_bytes());
        let p = grafts::ldisk(&input, &mut state);
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

pub fn test(filter: Option<&str>) -> Result<ExitCode, String> {
    let (mut passed, mut failed) = (0u32, 0u32);
    for (name, ok) in host_tests(filter)?.into_iter().chain(lint_tests(filter)) {
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
    // The power-cut rounds (crash.rs) take a worker of their own, first (the longest).
    let mut selected = selected;
    if filter.is_none_or(|f| "crash".contains(f) || f.contains("crash")) {
        selected.push(Scenario {
            name: CRASH.into(),
            ..Scenario::load("crash", &[("BOOT", "1".into()), ("SEED", seed.to_string())])?
        });
    }
    // The bench smoke (one QEMU at a time, a few minutes) takes a worker too, first.
    if filter.is_none_or(|f| BENCH_SMOKE.contains(f)) {
        selected.push(Scenario { name: BENCH_SMOKE.into(), ..Scenario::bench(BENCH_SMOKE, "smp", &[])? });
    }
    let artifacts = if !selected.is_empty() || run_durability || run_ldisk {
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
                        CRASH => crate::crash::run(&a, seed),
                        BENCH_SMOKE => Ok(bench_smoke(&a)),
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
fn bench_smoke(a: &Artifacts) -> (Vec<Result1>, String) {
    let log = crate::target_dir().join("bench-smoke").join("smoke.log");
    let r = crate::bench::smoke_test(a);
    let _ = std::fs::create_dir_all(crate::target_dir().join("bench-smoke"));
    let _ = std::fs::write(&log, r.as_ref().err().map_or("the bench smoke passed\n", |e| e.as_str()));
    let detail = r.as_ref().err().map_or(String::new(), |e| e.lines().next().unwrap_or("").to_string());
    (vec![Result1 { name: BENCH_SMOKE.into(), ok: r.is_ok(), detail }], log.display().to_string())
}

/// Boot a scenario with a given accelerator; returns whether its tests passed and its log.
pub fn run_scenario_log(a: &Artifacts, sc: &Scenario, accel: &str) -> Result<(bool, String), String> {
    let (res, log) = run_scenario_with(a, sc, accel)?;
    let text = std::fs::read_to_string(&log).map_err(|e| e.to_string())?;
    Ok((res.iter().all(|r| r.ok), text))
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
}
