//! `cargo xtask test`: host unit tests, then QEMU scenarios. A scenario is one boot
//! with an `init` that names test programs; root prints `TEST <name> PASS|FAIL` for
//! each and ends the machine when all are done.

use crate::qemu::{self, Options};
use crate::{build, make_image, out_dir, Artifacts};
use std::process::{Command, ExitCode};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The measurement program with what it needs: COM1 and its IRQ (the transmitter's
/// interrupt is the event it times), and kernel memory for 64 spaces.
/// The block service's manifest entry.
/// The shared cache and the block service, for the `baio` benchmark.
pub const BENCH_BLK: &str = "[[program]]\nname = \"cache\"\npriority = 125\ncaps = [\"sigma0\"]\n\n[[program]]\nname = \"blk\"\npriority = 120\nio = [\"0xcf8-0xcff\"]\nirq = [16, 17, 18, 19, 20, 21, 22, 23]\ncaps = [\"sigma0\", \"cache\"]\nclients = true\n";

/// The block service and the files server on segment `files`.
const FILES_SERVER: &str = concat!("[[program]]\nname = \"cache\"\npriority = 125\ncaps = [\"sigma0\"]\n\n[[program]]\nname = \"blk\"\nargs = \"quota=4096\"\npriority = 120\nio = [\"0xcf8-0xcff\"]\nirq = [16, 17, 18, 19, 20, 21, 22, 23]\ncaps = [\"sigma0\", \"cache\"]\nclients = true\n", "\n[[program]]\nname = \"files\"\nprincipal = 1\npriority = 110\ncaps = [\"blk\"]\nclients = true\n");
const BLK_SERVER: &str = "[[program]]\nname = \"cache\"\npriority = 125\ncaps = [\"sigma0\"]\n\n[[program]]\nname = \"blk\"\nargs = \"quota=4096 quota.2=24\"\npriority = 120\nio = [\"0xcf8-0xcff\"]\nirq = [16, 17, 18, 19, 20, 21, 22, 23]\ncaps = [\"sigma0\", \"cache\"]\nclients = true\n";

pub const BENCH_KERNEL: &str = "io=0x3f8-0x3ff irq=4 kpages=4096 caps=machine bench_kernel";

pub struct Scenario {
    pub name: &'static str,
    /// Test programs (with arguments) started by root; `pager=NAME` may come first.
    pub tests: Vec<String>,
    /// More manifest entries (servers the tests use), started before the tests.
    pub extra: &'static str,
    /// Type this into the serial port once the marker appears: (marker, text).
    pub input: Option<(&'static str, &'static str)>,
    /// With input: strings the serial log must show (the scenario is one test).
    pub expect: &'static [&'static str],
    /// A 64 MiB BAIO disk with these segments (`NAME:OWNER:BLOCKS[:FILE | :fs=PATH+…]`,
    /// paths relative to the project), attached as virtio-blk.
    pub disk: Option<&'static [&'static str]>,
    /// Or a disk image made elsewhere (the benchmarks'), attached as it is.
    pub disk_file: Option<std::path::PathBuf>,
    /// Kernel command line.
    pub append: &'static str,
    pub icount: bool,
    pub limit_s: u64,
}

fn fuzz_seed() -> u64 {
    std::env::var("SCION_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(1) % 1_000_000
    })
}

pub fn scenarios() -> Vec<Scenario> {
    let seed = fuzz_seed();
    let s = |name, tests: &[&str], append, limit_s| Scenario {
        tests: tests.iter().map(|t| t.to_string()).collect(),
        append,
        limit_s,
        ..Scenario::base(name)
    };
    vec![
        s("boot", &["hello"], "", 60),
        s("ipc", &["ipc_test"], "", 120),
        s("caps", &["caps_test"], "", 120),
        s("hostile", &["hostile_test"], "", 120),
        Scenario {
            tests: vec![format!("fuzz_test {seed} 100000")],
            limit_s: 600,
            ..Scenario::base("fuzz")
        },
        s("faults", &["fault_test"], "", 120),
        s("map", &["map_test"], "", 120),
        Scenario {
            tests: vec!["io=0xcf8-0xcff caps=sigma0 blk_test".into()],
            disk: Some(&["files:1:2048:xtask/disk/hello.txt", "scratch:2:1000"]),
            ..Scenario::base("disk")
        },
        Scenario {
            tests: vec!["caps=blk principal=1 seg_refused".into()],
            extra: BLK_SERVER,
            // The bitmap's first byte cleared: a segment's blocks look free.
            disk: Some(&["files:1:2048:xtask/disk/hello.txt", "!corrupt"]),
            ..Scenario::base("baio_corrupt")
        },
        Scenario {
            tests: vec!["caps=blk principal=1 seg_test".into(), "caps=blk principal=2 seg_peer".into()],
            extra: BLK_SERVER,
            disk: Some(&["files:1:2048:xtask/disk/hello.txt"]),
            ..Scenario::base("baio")
        },
        Scenario {
            tests: vec!["caps=blk,files principal=1 files_test".into()],
            extra: FILES_SERVER,
            disk: Some(&["files:1:2048:fs=xtask/disk", "junk:1:64"]),
            ..Scenario::base("files")
        },
        Scenario {
            tests: vec!["caps=echo svc_test".into(), "io=0xcf8-0xcff caps=sigma0 pci_test".into(), "limit_test".into()],
            extra: "[[program]]\nname = \"echo\"\nrestart = true\n\n[[program]]\nname = \"hog\"\npages = 64\nstart = false\n",
            ..Scenario::base("services")
        },
        s("pager", &["pager_test"], "", 180),
        // Two memory servers side by side; pager_test runs three levels down
        // (sigma0 → mem1 → pager_test → its worker).
        s("stacked", &["pager=mem1 pager_test", "hello"], "", 180),
        s("sched", &["sched_test"], "", 180),
        s("sched_pit", &["sched_test"], "timer=pit", 180),
        Scenario::measure("measure", true),
        Scenario {
            tests: vec![],
            extra: include_str!("../console.manifest"),
            // Typed at the shell's first prompt: a backspace edit, every command, a
            // mistake, and halt (which ends the machine).
            input: Some(("scion> ", "help\nps\nmem\nlspci\nbogus\necno\x7f\x7fho edited\x15echo hello scion\nkill 999\nls\ncat hello.txt\nput notes/a.txt no such dir\nput note.txt typed at the shell\ncat note.txt\nls\nrm note.txt\ncat note.txt\nhalt\n")),
            expect: &[
                "console: ready",
                "commands:",
                "  ID NAME",
                " console ",
                "sigma0: ",
                "mem0: pool",
                "8086:29c0",
                "sh: unknown command `bogus` (try `help`)",
                "\nhello scion\n",
                "kill: 999: InvalidArg",
                "f 12 hello.txt",
                "\nhello scion\n",
                "put: notes/a.txt no such dir: NoPartner",
                "\ntyped at the shell\n",
                "f 19 note.txt",
                "cat: note.txt: NoPartner",
                "[root] halting",
            ],
            disk: Some(&["files:1:2048:fs=xtask/disk/hello.txt"]),
            ..Scenario::base("console")
        },
    ]
}

/// The program a test line starts (options like `pager=mem1` come first).
pub fn program_of(t: &str) -> &str {
    t.split(' ').find(|w| !w.contains('=')).unwrap_or("")
}

/// The manifest of a scenario: one test entry per test line, then the extras.
fn manifest_for(sc: &Scenario) -> String {
    // Servers first: root starts entries in order, and tests look servers up at once.
    let mut m = String::from(sc.extra);
    m.push('\n');
    for t in &sc.tests {
        let prog = program_of(t);
        let opt = |k: &str| t.split(' ').find_map(|w| w.strip_prefix(k)).map(|v| v.to_string());
        let list = |v: Option<String>, quote: bool| {
            v.map(|v| v.split(',').map(|x| if quote { format!("\"{x}\"") } else { x.to_string() }).collect::<Vec<_>>().join(", ")).unwrap_or_default()
        };
        let args: Vec<&str> = t.split(' ').filter(|w| !w.contains('=')).skip(1).collect();
        m.push_str(&format!(
            "[[program]]\nname = \"{prog}\"\nargs = \"{}\"\npager = \"{}\"\ncaps = [{}]\nio = [{}]\nirq = [{}]\nkpages = {}\nprincipal = {}\ntest = true\n\n",
            args.join(" "),
            opt("pager=").unwrap_or_else(|| "mem0".into()),
            list(opt("caps="), true),
            list(opt("io="), true),
            list(opt("irq="), false),
            opt("kpages=").unwrap_or_else(|| "1024".into()),
            opt("principal=").unwrap_or_else(|| "0".into()),
        ));
    }
    m
}

/// The scenario's disk image (made fresh), if it has one.
fn make_disk(sc: &Scenario) -> Result<Option<std::path::PathBuf>, String> {
    if sc.disk_file.is_some() {
        return Ok(sc.disk_file.clone());
    }
    let disk = match sc.disk {
        Some(segs) => {
            let path = out_dir().join(format!("{}-disk.img", sc.name));
            let root = crate::project_root();
            let corrupt = segs.contains(&"!corrupt");
            let segs: Vec<String> = segs
                .iter()
                .filter(|s| !s.starts_with('!'))
                .map(|s| {
                    let mut p: Vec<String> = s.split(':').map(String::from).collect();
                    if p.len() == 4 {
                        p[3] = match p[3].strip_prefix("fs=") {
                            Some(paths) => format!("fs={}", paths.split('+').map(|q| root.join(q).display().to_string()).collect::<Vec<_>>().join("+")),
                            None => root.join(&p[3]).display().to_string(),
                        };
                    }
                    p.join(":")
                })
                .collect();
            let v = crate::image::make(&path.display().to_string(), 64 << 20, &segs)?;
            if corrupt {
                let mut img = std::fs::read(&path).map_err(|e| e.to_string())?;
                img[(v.layout.bitmap_start as usize) * baio::BLOCK] = 0;
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
    let img = make_image(a, &manifest_for(sc), sc.name)?;
    let disk = make_disk(sc)?;
    let opts = Options { accel: accel.to_string(), icount: sc.icount, append: sc.append.to_string(), disk };
    let out = qemu::run_to_end(&a.kernel, &img, &opts, Duration::from_secs(sc.limit_s), sc.input)?;
    let logs = out_dir().join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let log_path = logs.join(format!("{}.log", sc.name));
    std::fs::write(&log_path, &out.log).map_err(|e| e.to_string())?;
    let mut results = Vec::new();
    if sc.input.is_some() {
        let missing: Vec<&str> = sc.expect.iter().copied().filter(|e| !out.log.contains(e)).collect();
        let ok = missing.is_empty() && out.status == Some(1);
        let detail = if out.timed_out {
            format!("timed out after {} s", sc.limit_s)
        } else if !missing.is_empty() {
            format!("the serial log lacks {:?}", missing)
        } else {
            format!("qemu exit status {:?}", out.status)
        };
        results.push(Result1 { name: format!("{}/session", sc.name), ok, detail: if ok { String::new() } else { detail } });
    }
    for t in &sc.tests {
        let prog = program_of(t);
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

/// Crates whose logic is tested on the host.
pub const HOST_CRATES: [&str; 6] = ["abi", "kcore", "bootfs", "manifest", "baio", "baiofs"];

/// Host unit tests of the portable crates; returns (name, ok) per test.
fn host_tests(filter: Option<&str>) -> Result<Vec<(String, bool)>, String> {
    let mut res = Vec::new();
    for krate in HOST_CRATES {
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

/// Durability: boot 1 writes, syncs and is killed the moment the sync is acknowledged;
/// boot 2 (same disk) reads the data back.
fn durability(a: &Artifacts) -> Result<Vec<Result1>, String> {
    let phase = |name: &'static str, args: &str| Scenario {
        tests: vec![format!("caps=blk principal=1 durable {args}")],
        extra: BLK_SERVER,
        disk: Some(&["files:1:2048:xtask/disk/hello.txt"]),
        ..Scenario::base(name)
    };
    let write = phase("durable-write", "write");
    let disk = make_disk(&write)?.expect("a disk");
    let img = make_image(a, &manifest_for(&write), write.name)?;
    let opts = Options { accel: qemu::accel(), icount: false, append: String::new(), disk: Some(disk.clone()) };
    let out = qemu::run_until(&a.kernel, &img, &opts, Duration::from_secs(180), None, Some("DURABLE synced"))?;
    let logs = out_dir().join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    std::fs::write(logs.join("durable-write.log"), &out.log).map_err(|e| e.to_string())?;
    let synced = out.log.contains("DURABLE synced") && out.status.is_none();
    let mut res = vec![Result1 {
        name: "durable/write-sync-kill".into(),
        ok: synced,
        detail: if synced { String::new() } else { format!("no acknowledged sync before the kill; see {}", logs.join("durable-write.log").display()) },
    }];
    let read = phase("durable-read", "read");
    let img = make_image(a, &manifest_for(&read), read.name)?;
    let opts = Options { accel: qemu::accel(), icount: false, append: String::new(), disk: Some(disk) };
    let out = qemu::run_to_end(&a.kernel, &img, &opts, Duration::from_secs(180), None)?;
    std::fs::write(logs.join("durable-read.log"), &out.log).map_err(|e| e.to_string())?;
    let ok = out.log.contains("TEST durable PASS") && out.status == Some(1);
    res.push(Result1 {
        name: "durable/read-after-kill".into(),
        ok,
        detail: if ok { String::new() } else { format!("see {}", logs.join("durable-read.log").display()) },
    });
    Ok(res)
}

pub fn test(filter: Option<&str>) -> Result<ExitCode, String> {
    let (mut passed, mut failed) = (0u32, 0u32);
    for (name, ok) in host_tests(filter)? {
        println!("test {name} ... {}", if ok { "ok" } else { "FAILED" });
        if ok {
            passed += 1
        } else {
            failed += 1
        }
    }
    let selected: Vec<Scenario> = scenarios()
        .into_iter()
        .filter(|s| filter.is_none_or(|f| s.name.contains(f) || s.tests.iter().any(|t| t.contains(f))))
        .collect();
    let run_durability = filter.is_none_or(|f| "durable".contains(f) || f.contains("durab"));
    let artifacts = if !selected.is_empty() || run_durability {
        qemu::ensure_qemu()?;
        Some(Arc::new(build()?))
    } else {
        None
    };
    if let (false, Some(a)) = (selected.is_empty(), artifacts.clone()) {
        for s in &selected {
            if s.name == "fuzz" {
                println!("fuzz seed: {} (set SCION_FUZZ_SEED to repeat)", s.tests[0].split(' ').nth(1).unwrap_or("?"));
            }
        }
        // Two boots at a time: the machines here have two cores.
        let queue = Arc::new(Mutex::new(selected));
        let results = Arc::new(Mutex::new((0u32, 0u32)));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (q, a, r) = (queue.clone(), a.clone(), results.clone());
                std::thread::spawn(move || loop {
                    let Some(sc) = q.lock().unwrap().pop() else { break };
                    match run_scenario(&a, &sc) {
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
    if let (true, Some(a)) = (run_durability, artifacts) {
        for t in durability(&a)? {
            println!("test qemu/{} ... {}", t.name, if t.ok { "ok".to_string() } else { format!("FAILED ({})", t.detail) });
            if t.ok {
                passed += 1
            } else {
                failed += 1
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

impl Scenario {
    /// A boot with no tests, extras, input, disk or kernel arguments, under plain TCG.
    pub fn base(name: &'static str) -> Scenario {
        Scenario { name, tests: Vec::new(), extra: "", input: None, expect: &[], disk: None, disk_file: None, append: "", icount: false, limit_s: 180 }
    }

    /// The measurement boot of the `kernel` suite.
    pub fn measure(name: &'static str, icount: bool) -> Scenario {
        Scenario { tests: vec![BENCH_KERNEL.into()], icount, limit_s: 300, ..Scenario::base(name) }
    }
}

/// Boot a scenario with a given accelerator; returns whether its tests passed and its log.
pub fn run_scenario_log(a: &Artifacts, sc: &Scenario, accel: &str) -> Result<(bool, String), String> {
    let (res, log) = run_scenario_with(a, sc, accel)?;
    let text = std::fs::read_to_string(&log).map_err(|e| e.to_string())?;
    Ok((res.iter().all(|r| r.ok), text))
}
