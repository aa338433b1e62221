//! `cargo xtask test`: host unit tests, then QEMU scenarios. A scenario is one boot
//! with an `init` that names test programs; root prints `TEST <name> PASS|FAIL` for
//! each and ends the machine when all are done.

use super::nettest;
use crate::qemu::{self, Options};
use crate::{make_image, out_dir, project_root, uefi_disk, Artifacts};
use std::path::{Path, PathBuf};
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
    /// segments' blocks stay used in the bitmap), `!ragged` adds half a block at the end,
    /// `!failing-flush` attaches it so that every flush fails (`qemu::Options::disk_flush_fails`),
    /// `!nvme` as an NVMe controller's namespace rather than a virtio-blk device,
    /// `!plus-nvme` a virtio-blk device and beside it an NVMe controller with a blank
    /// 64 MiB namespace of its own (a machine with virtio and NVMe devices at once).
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
    /// Which of them (`nettest::http_checks`): "web" (the default), "scale", "thousand",
    /// "idle", "peraddr" or "slowloris".
    pub checks: String,
    /// The network device: `virtio` (virtio-net, the default) or `e1000e` (an Intel 82574).
    pub nic: String,
    /// An Intel IOMMU on the machine (`-device intel-iommu`).
    pub iommu: bool,
    /// Whether the IOMMU offers interrupt remapping (`intremap=on|off`; either implies
    /// `iommu`); unset, QEMU's default (on under TCG).
    pub intremap: Option<bool>,
    /// Boot by UEFI: the boot image on `cargo xtask image`'s disk (Scion's loader on an
    /// EFI system partition) under OVMF, rather than by PVH.
    pub uefi: bool,
    /// Typed on the PS/2 keyboard (QEMU's `sendkey`) once the input's marker appears,
    /// before the input: (text, what the serial log must then show).
    pub keys: Option<(String, String)>,
    /// Lines the screen (the firmware's framebuffer, QEMU's `screendump`) must show as
    /// the kernel's console draws them, after the keys and before the input.
    pub screen: Vec<String>,
    /// Commands to QEMU's monitor while the machine runs, each once its text has
    /// appeared on the serial port: (text, command), in order (a device misbehaving on
    /// cue: `set_link net0 off` takes the network's cable out).
    pub monitor: Vec<(String, String)>,
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
    nic: Option<String>,
    iommu: Option<bool>,
    intremap: Option<bool>,
    uefi: Option<bool>,
    keys: Option<Keys>,
    screen: Option<Vec<String>>,
    monitor: Option<Vec<Step>>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    at: String,
    command: String,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Keys {
    text: String,
    until: String,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    marker: String,
    text: String,
    /// Type `text` this many times (a flood of typing); once if not given.
    repeat: Option<usize>,
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
                nic: h.nic.unwrap_or(sc.nic.clone()),
                iommu: h.iommu.unwrap_or(sc.iommu) || h.intremap.or(sc.intremap).is_some(),
                intremap: h.intremap.or(sc.intremap),
                monitor: h.monitor.map_or(sc.monitor.clone(), steps),
                ..sc
            });
        }
        let manifest = crate::compose::compose(&parts(&h.include.unwrap_or_default(), vars)?, body);
        let sc = Scenario::from_manifest(name, manifest)?;
        Ok(Scenario {
            input: h.input.map(|i| (i.marker, i.text.repeat(i.repeat.unwrap_or(1)))),
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
            nic: h.nic.unwrap_or_else(|| "virtio".into()),
            iommu: h.iommu.unwrap_or(false) || h.intremap.is_some(),
            intremap: h.intremap,
            uefi: h.uefi.unwrap_or(false),
            keys: h.keys.map(|k| (k.text, k.until)),
            screen: h.screen.unwrap_or_default(),
            monitor: h.monitor.map_or(Vec::new(), steps),
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
            nic: "virtio".into(),
            iommu: false,
            intremap: None,
            uefi: false,
            keys: None,
            screen: Vec::new(),
            monitor: Vec::new(),
        })
    }
}

fn steps(v: Vec<Step>) -> Vec<(String, String)> {
    v.into_iter().map(|s| (s.at, s.command)).collect()
}

pub(super) fn fuzz_seed() -> u64 {
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
    let wasi = crate::wasi::dir().display().to_string();
    names
        .iter()
        .map(|n| {
            Scenario::load(
                n,
                &[("SEED", seed.to_string()), ("WWW", www.clone()), ("GRAFTS", grafts.clone()), ("WASI", wasi.clone())],
            )
        })
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
                        "failing-flush" | "nvme" | "plus-nvme" => {}
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
    // `${AOT:STEM}` in the manifest, the input and the expected lines: the name of the
    // WASI program compiled ahead of time from `STEM.wasm` (known once built).
    let mut sc_aot = sc.clone();
    sc_aot.manifest = crate::wasi::expand_aot(&sc.manifest, &a.wasi_aot);
    sc_aot.input = sc.input.as_ref().map(|(m, t)| (m.clone(), crate::wasi::expand_aot(t, &a.wasi_aot)));
    sc_aot.expect = sc.expect.iter().map(|e| crate::wasi::expand_aot(e, &a.wasi_aot)).collect();
    let sc = &sc_aot;
    // An ftpd in the scenario gets its control port and `FTP_DATA_PORTS` passive data
    // ports forwarded from free ports of the host, the data ports to the same numbers on the
    // guest (so its EPSV and PASV replies name ports the host can reach).
    let ftp = sc.http && sc.manifest.contains("${FTP_PASV}");
    // The scale checks get more ports to the guest's port 80 (`nettest::SCALE_PORTS`):
    // QEMU's user network listens on each forwarded port with a backlog of 1, so
    // clients connecting at once are spread over them (and one is kept for a client
    // that must not wait behind the others on the host). Every host port at once, so
    // that no two are the same.
    let web = sc.net && sc.http;
    let n_ftp = usize::from(ftp);
    let n_more = if web && matches!(sc.checks.as_str(), "scale" | "thousand" | "idle" | "peraddr" | "slowloris") {
        nettest::SCALE_PORTS - 1
    } else {
        0
    };
    // The data ports: a range (ftpd's argument stays short), held while the others are
    // picked.
    let data = if ftp { Some(qemu::free_port_range(qemu::FTP_DATA_PORTS)?) } else { None };
    let ports = qemu::free_ports(n_ftp + usize::from(web) + n_more)?;
    let data_ports: Vec<u16> = data.map(|(p, _)| (p..p + qemu::FTP_DATA_PORTS).collect()).unwrap_or_default();
    let ftp_ports: Vec<u16> = [&ports[..n_ftp], &data_ports[..]].concat();
    let more_ports: Vec<u16> = ports[n_ftp + usize::from(web)..].to_vec();
    let pasv = match (data_ports.first(), data_ports.last()) {
        (Some(a), Some(b)) => format!("{a}-{b}"),
        _ => String::new(),
    };
    let img = make_image(a, &sc.manifest.replace("${FTP_PASV}", &pasv), &sc.name)?;
    if sc.http || sc.net {
        nettest::make_www()?;
    }
    let disk = make_disk(sc)?;
    let nvme_extra = if sc.disk.iter().flatten().any(|s| s == "!plus-nvme") {
        let path = out_dir().join(format!("{}-nvme.img", sc.name));
        let f = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        f.set_len(64 << 20).map_err(|e| format!("{}: {e}", path.display()))?;
        Some(path)
    } else {
        None
    };
    let mut net = None;
    let mut http_port = 0;
    if sc.net {
        let mut n = qemu::NetOptions {
            e1000e: match sc.nic.as_str() {
                "virtio" => false,
                "e1000e" => true,
                other => return Err(format!("scenario {}: unknown nic `{other}` (virtio, e1000e)", sc.name)),
            },
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
    let uefi = if sc.uefi {
        let esp = out_dir().join(format!("{}-esp.img", sc.name));
        uefi_disk(a, &img, &sc.append, &esp)?;
        Some((esp, qemu::vars_copy(&sc.name)?))
    } else {
        None
    };
    let opts = Options {
        uefi,
        machine: sc.machine.clone(),
        memory: sc.memory.clone(),
        net,
        cpus: sc.cpus.unwrap_or(qemu::default_cpus()),
        disk_flush_fails: sc.disk.iter().flatten().any(|s| s == "!failing-flush"),
        disk_nvme: sc.disk.iter().flatten().any(|s| s == "!nvme"),
        iommu: sc.iommu,
        intremap: sc.intremap,
        nvme_extra,
        ..Options::new(accel.to_string(), sc.icount, sc.append.to_string(), disk)
    };
    let input = sc.input.as_ref().map(|(m, t)| (m.as_str(), t.as_str()));
    let mut http_results = Vec::new();
    let mut script_results = Vec::new();
    let scripted = sc.keys.is_some() || !sc.screen.is_empty();
    let mut monitor_result = None;
    let out = if scripted {
        let (marker, text) = input.ok_or_else(|| format!("scenario {}: keys and screen need an input", sc.name))?;
        let mut script = |t: &qemu::Typer| script_results = keys_and_screen(sc, t, text);
        qemu::run_script(&a.kernel, &img, &opts, Duration::from_secs(sc.limit_s), (marker, &mut script))?
    } else if sc.http {
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
            Some((nettest::ready_marker(&sc.checks), &mut checks)),
        )?
    } else if let Some((first, _)) = sc.monitor.first() {
        let mut steps = |t: &qemu::Typer| monitor_result = Some(monitor_steps(&sc.monitor, t));
        qemu::run_script(&a.kernel, &img, &opts, Duration::from_secs(sc.limit_s), (first, &mut steps))?
    } else {
        qemu::run_to_end(&a.kernel, &img, &opts, Duration::from_secs(sc.limit_s), input)?
    };
    let logs = out_dir().join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let log_path = logs.join(format!("{}.log", sc.name));
    std::fs::write(&log_path, &out.log).map_err(|e| e.to_string())?;
    let mut results = Vec::new();
    if scripted && script_results.is_empty() {
        let detail = format!("the input's marker never came (qemu exit status {:?})", out.status);
        results.push(Result1 { name: format!("{}/keys-and-screen", sc.name), ok: false, detail });
    }
    for (name, r) in script_results {
        results.push(Result1 {
            name: format!("{}/{}", sc.name, name),
            ok: r.is_ok(),
            detail: r.err().unwrap_or_default(),
        });
    }
    if !sc.monitor.is_empty() {
        let r = monitor_result.unwrap_or_else(|| Err(format!("{:?} never came", sc.monitor[0].0)));
        results.push(Result1 {
            name: format!("{}/monitor", sc.name),
            ok: r.is_ok(),
            detail: r.err().unwrap_or_default(),
        });
    }
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
        if ftp && sc.checks == "web" {
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

/// A scenario's monitor commands, each once its text is on the serial port (the first's
/// is, when this runs).
fn monitor_steps(steps: &[(String, String)], t: &qemu::Typer) -> Result<(), String> {
    for (at, command) in steps {
        if !t.wait_for(at, Duration::from_secs(120)) {
            return Err(format!("{at:?} never came on the serial port (for `{command}`)"));
        }
        t.monitor(command)?;
    }
    Ok(())
}

/// A UEFI scenario's checks while it runs: the keys typed on the PS/2 keyboard reach
/// the shell, the screen shows the lines it should; then the input is typed (on the
/// serial port). One result each.
fn keys_and_screen(sc: &Scenario, t: &qemu::Typer, input: &str) -> Vec<(String, Result<(), String>)> {
    let mut res = Vec::new();
    if let Some((text, until)) = &sc.keys {
        let r = t.send_keys(text).and_then(|_| {
            if t.wait_for(until, Duration::from_secs(60)) {
                Ok(())
            } else {
                Err(format!("typed {text:?} on the PS/2 keyboard; the serial log never showed {until:?}"))
            }
        });
        res.push(("keyboard".to_string(), r));
    }
    if !sc.screen.is_empty() {
        let logs = out_dir().join("logs");
        let _ = std::fs::create_dir_all(&logs);
        let ppm = logs.join(format!("{}-screen.ppm", sc.name));
        let _ = std::fs::remove_file(&ppm);
        let shot = t
            .monitor(&format!("screendump {}", ppm.display()))
            .and_then(|_| std::fs::read(&ppm).map_err(|e| format!("no screendump ({}): {e}", ppm.display())))
            .and_then(|b| crate::screen::parse_ppm(&b));
        for line in &sc.screen {
            let r = match &shot {
                Ok(p) if p.find(line).is_some() => Ok(()),
                Ok(p) => {
                    Err(format!("the screen ({}x{}, {}) does not show {line:?}", p.width, p.height, ppm.display()))
                }
                Err(e) => Err(e.clone()),
            };
            res.push((format!("screen:{line}"), r));
        }
    }
    t.type_text(input);
    res
}

/// Boot a scenario with a given accelerator; returns whether its tests passed and its log.
pub fn run_scenario_log(a: &Artifacts, sc: &Scenario, accel: &str) -> Result<(bool, String), String> {
    let (res, log) = run_scenario_with(a, sc, accel)?;
    let text = std::fs::read_to_string(&log).map_err(|e| e.to_string())?;
    Ok((res.iter().all(|r| r.ok), text))
}
