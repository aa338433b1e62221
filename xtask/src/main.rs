//! `cargo xtask`: build Scion, make boot images, run it in QEMU, test it, measure it.
#![forbid(unsafe_code)]

mod bench;
mod cachedisk;
mod compose;
mod esp;
mod grafts;
mod image;
mod qemu;
mod screen;
mod test;
mod wasi;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

pub const TARGET: &str = "x86_64-unknown-none";

/// The tests run grafts' engines with each graft's memory counted (`graft::host::counting`).
#[cfg(test)]
#[global_allocator]
static COUNTING: testalloc::Counting = testalloc::Counting;

/// What `cargo xtask run` boots (root's manifest: `system/run.toml` with its parts).
fn run_manifest() -> Result<String, String> {
    let p = project_root().join("system/run.toml");
    let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    test::scenarios::with_parts(&text, &[]).map_err(|e| format!("{}: {e}", p.display()))
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: cargo xtask <command>\n\
         \n\
         commands:\n\
         \x20 build            build the kernel, all user programs and the example grafts\n\
         \x20 run [--port N] [--ftp-port F]\n\
         \x20                  build and boot Scion in QEMU, serial console on this terminal;\n\
         \x20                  host port N (8080; or SCION_HTTP_PORT) reaches Scion's web server,\n\
         \x20                  F (2121; or SCION_FTP_PORT) its FTP server, F+1…F+64 its data ports\n\
         \x20 test [FILTER]    host unit tests, then every QEMU scenario (or those matching FILTER)\n\
         \x20 run, test: --cpus N gives the machines N virtual CPUs (1 to 8; default 2 where\n\
         \x20                  the host has two cores or more, else 1; benchmarks use 1)\n\
         \x20 bench [SUITE…]   measure Scion and a Linux guest side by side (icount and TCG);\n\
         \x20                  writes target/bench/SUITE.json, report.md and plots (--list: suites);\n\
         \x20                  --smoke: each suite once, one mode, a few of each count, into\n\
         \x20                  target/bench-smoke/; fails if a figure its report reads is missing\n\
         \x20 graft build IN.wasm|IN.c|IN.rhai --point P [-o OUT] [--state BYTES] [--name NAME]\n\
         \x20                  a loadable graft file (WebAssembly compiled and signed, eBPF, rhai),\n\
         \x20                  refused with the reason a server would give\n\
         \x20 wasm IN.wasm [-o OUT]\n\
         \x20                  a WASI preview-1 module compiled ahead of time (wasm2c, clang) into a\n\
         \x20                  Scion program (default target/wasi-aot/NAME-HASH, as `run` finds it)\n\
         \x20 mkimage OUT --size SIZE [--segment NAME:OWNER:BLOCKS[:FILE]]...  make a BAIO device image\n\
         \x20 fsck [--repair] [--fs NAME] IMAGE\n\
         \x20                  check a BAIO device image (and its baiofs filesystems) and list\n\
         \x20                  every inconsistency; --repair makes it mountable and says how\n\
         \n\
         environment: SCION_ACCEL=tcg|kvm forces the accelerator; SCION_FUZZ_SEED fixes the fuzz seed; SCION_GDB opens a gdb stub on tcp::1234; SCION_PCAP=FILE dumps the guest's network"
    );
    ExitCode::from(2)
}

/// A command's flags (each with whether a value follows it) and how many operands it
/// takes, at least and at most.
type Shape = (&'static [(&'static str, bool)], usize, usize);

/// The shape of each command (`usage`), by name.
fn shape(cmd: &str) -> Option<Shape> {
    Some(match cmd {
        "build" => (&[], 0, 0),
        "run" => (&[("--port", true), ("--ftp-port", true), ("--uefi", false)], 0, 0),
        "image" => (&[], 1, 1),
        "test" => (&[], 0, 1),
        "bench" => (&[("--list", false), ("--smoke", false), ("--probe", false)], 0, bench::SUITES.len()),
        "mkimage" => (&[("--size", true), ("--segment", true)], 1, 1),
        "wasm" => (&[("-o", true)], 1, 1),
        "graft" => (&[("--point", true), ("-o", true), ("--state", true), ("--name", true)], 2, 2),
        "fsck" => (&[("--repair", false), ("--fs", true)], 1, 1),
        _ => return None,
    })
}

/// Check a command line (the arguments after `cargo xtask`) before anything runs: the
/// command, its flags and their values, its operands; `--cpus N` goes with any command.
/// Each command reads its values itself after. The README's commands are checked
/// against it (`readme_commands_parse`).
fn check_args(args: &[String]) -> Result<(), String> {
    let cmd = args.first().ok_or("no command")?;
    let (flags, min, max) = shape(cmd).ok_or_else(|| format!("no command `{cmd}`"))?;
    let mut operands = Vec::new();
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        if a == "--cpus" {
            let v = it.next().ok_or("--cpus needs a number")?;
            if !matches!(v.parse::<u32>(), Ok(1..=8)) {
                return Err(format!("--cpus {v}: a number from 1 to 8"));
            }
        } else if a.starts_with('-') {
            let (_, takes) =
                flags.iter().find(|(f, _)| f == a).ok_or_else(|| format!("`{cmd}` has no flag `{a}` (see usage)"))?;
            if *takes && it.next().is_none_or(|v| v.starts_with("--")) {
                return Err(format!("{a} needs a value"));
            }
        } else {
            operands.push(a.as_str());
        }
    }
    if operands.len() < min || operands.len() > max {
        return Err(format!("`{cmd}` takes {min} to {max} operands, not {}", operands.len()));
    }
    match cmd.as_str() {
        "run" => {
            let (port, ftp) = (http_port(args)?, ftp_port(args)?);
            let last = ftp + qemu::FTP_DATA_PORTS;
            if (ftp..=last).contains(&port) {
                return Err(format!("--port {port} falls among the FTP ports {ftp}–{last}"));
            }
        }
        "bench" => {
            if let Some(w) = operands.iter().find(|w| !bench::SUITES.iter().any(|(s, _)| s == *w)) {
                return Err(format!("no suite `{w}` (cargo xtask bench --list)"));
            }
        }
        "mkimage" => {
            let i = args.iter().position(|a| a == "--size").ok_or("mkimage needs --size SIZE")?;
            image::parse_size(&args[i + 1])?;
        }
        _ => {}
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = project_root();
    // Where the command was typed: `graft build` reads and writes paths from there.
    let cwd = std::env::current_dir().unwrap_or_else(|_| root.clone());
    std::env::set_current_dir(&root).expect("cd to project root");
    if args.is_empty() {
        return usage();
    }
    if let Err(e) = check_args(&args) {
        eprintln!("xtask: {e}");
        return usage();
    }
    if matches!(args.first().map(String::as_str), Some("run" | "test")) {
        qemu::set_default_cpus(qemu::host_default_cpus());
    }
    let args = match qemu::cpus_arg(&args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("xtask: {e}");
            return ExitCode::from(2);
        }
    };
    let r = match args.first().map(String::as_str) {
        Some("build") => build().map(|_| ExitCode::SUCCESS),
        Some("run") => run(&args[1..]),
        Some("test") => test::test(args.get(1).map(String::as_str), bench::smoke_test),
        Some("bench") => bench::bench(&args[1..]),
        Some("graft") => grafts::graft_command(&args[1..], &cwd).map(|_| ExitCode::SUCCESS),
        Some("wasm") => wasi::wasm_command(&args[1..], &cwd).map(|_| ExitCode::SUCCESS),
        Some("image") => uefi_image(&args[1]).map(|_| ExitCode::SUCCESS),
        Some("mkimage") => image::mkimage(&args[1..]),
        Some("fsck") => image::fsck(&args[1..]),
        _ => return usage(),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Cargo's target directory: `CARGO_TARGET_DIR` (relative to the project if relative)
/// or `target/`. Boot images, disks, logs and benchmark results go under it too.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) if !d.is_empty() => project_root().join(d),
        _ => project_root().join("target"),
    }
}

pub fn out_dir() -> PathBuf {
    target_dir().join("scion")
}

/// Add Rust target `target` to the toolchain (rustup) unless it is there.
pub fn ensure_rust_target(target: &str) -> Result<(), String> {
    let out =
        Command::new("rustup").args(["target", "list", "--installed"]).output().map_err(|e| format!("rustup: {e}"))?;
    if String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == target) {
        return Ok(());
    }
    eprintln!("xtask: adding the Rust target {target}");
    sh(Command::new("rustup").args(["target", "add", target]))
}

pub fn sh(cmd: &mut Command) -> Result<(), String> {
    let st = cmd.status().map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("{:?} failed with {st}", cmd))
    }
}

/// Make sure the bare-metal Rust target is installed.
pub fn ensure_target() -> Result<(), String> {
    ensure_target_named(TARGET)
}

/// Make sure the Rust target `target` is installed.
pub fn ensure_target_named(target: &str) -> Result<(), String> {
    let out = Command::new("rustup").args(["target", "list", "--installed"]).output();
    match out {
        Ok(o) if String::from_utf8_lossy(&o.stdout).lines().any(|l| l.trim() == target) => Ok(()),
        Ok(_) => {
            eprintln!("xtask: adding the Rust target {target}");
            sh(Command::new("rustup").args(["target", "add", target]))
        }
        Err(_) => Err(format!("rustup not found; install the target {target} for your toolchain")),
    }
}

/// rustfmt, for the format check (`cargo xtask test lint`).
pub fn ensure_rustfmt() -> Result<(), String> {
    if Command::new(env!("CARGO")).args(["fmt", "--version"]).output().is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    eprintln!("xtask: adding the rustup component rustfmt");
    sh(Command::new("rustup").args(["component", "add", "rustfmt"]))
}

/// clippy, for the unsafe rules (`cargo xtask test` runs it).
pub fn ensure_clippy() -> Result<(), String> {
    if Command::new(env!("CARGO")).args(["clippy", "--version"]).output().is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    eprintln!("xtask: adding the rustup component clippy");
    sh(Command::new("rustup").args(["component", "add", "clippy"]))
}

pub struct Artifacts {
    pub kernel: PathBuf,
    pub programs: Vec<(String, PathBuf)>,
    /// The example graft files (`target/grafts/`).
    pub grafts: Vec<PathBuf>,
    /// The WASI programs compiled ahead of time (`wasi::aot_all`), also in `programs`:
    /// a manifest with a `wasi` entry gets one for each (`wasi::with_aot_entries`).
    pub wasi_aot: Vec<String>,
}

/// The user program packages (members under `user/` with binaries) and their binaries.
fn user_programs() -> Result<Vec<(String, Vec<String>)>, String> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
    let user = project_root().join("user");
    let mut pkgs = Vec::new();
    for p in v["packages"].as_array().into_iter().flatten() {
        let in_user = p["manifest_path"].as_str().is_some_and(|m| Path::new(m).starts_with(&user));
        let bins: Vec<String> = p["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "bin")))
            .filter_map(|t| t["name"].as_str().map(String::from))
            .collect();
        if in_user && !bins.is_empty() {
            pkgs.push((p["name"].as_str().unwrap_or_default().to_string(), bins));
        }
    }
    pkgs.sort();
    Ok(pkgs)
}

/// Build kernel and user programs (release: TCG makes every instruction count).
pub fn build() -> Result<Artifacts, String> {
    ensure_target()?;
    let pkgs = user_programs()?;
    // (`wasi-aot`: the Rust side of the WASI programs compiled ahead of time, a static
    // library xtask links each with.)
    let mut args: Vec<String> = ["build", "--release", "--target", TARGET, "-p", "kernel", "-p", "wasi-aot"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for (p, _) in &pkgs {
        args.push("-p".into());
        args.push(p.clone());
    }
    // Long steps say what they do and how long they took (a first build on a fresh
    // machine compiles for many minutes).
    let t0 = std::time::Instant::now();
    eprintln!(
        "xtask: building the kernel and {} user packages (release; the first build takes many minutes)",
        pkgs.len()
    );
    // Servers check signed grafts against this build's key.
    sh(Command::new(env!("CARGO")).args(&args).env("SCION_GRAFT_KEY", grafts::public_key_hex()?))?;
    let dir = target_dir().join(TARGET).join("release");
    let mut programs: Vec<(String, PathBuf)> =
        pkgs.iter().flat_map(|(_, bins)| bins.iter().map(|b| (b.clone(), dir.join(b)))).collect();
    programs.sort();
    let t1 = std::time::Instant::now();
    eprintln!("xtask: built the kernel and programs in {} s; building the example grafts (WebAssembly, eBPF, signed Rust, SFI)", (t1 - t0).as_secs());
    let grafts = grafts::build()?;
    eprintln!("xtask: built {} example grafts in {} s", grafts.len(), t1.elapsed().as_secs());
    let t2 = std::time::Instant::now();
    let wasi = wasi::build()?;
    eprintln!("xtask: built {} WASI programs in {} s", wasi.len(), t2.elapsed().as_secs());
    let t3 = std::time::Instant::now();
    let aot = wasi::aot_all(&wasi)?;
    eprintln!("xtask: compiled {} WASI programs ahead of time in {} s", aot.len(), t3.elapsed().as_secs());
    let wasi_aot = aot.iter().map(|(n, _)| n.clone()).collect();
    programs.extend(aot);
    Ok(Artifacts { kernel: dir.join("kernel"), programs, grafts, wasi_aot })
}

/// The programs the kernel and root start whatever the manifest says.
const ALWAYS: [&str; 3] = ["sigma0", "root", "mem"];

/// Pack the programs `manifest` names (and sigma0, root and the memory servers) and the
/// `manifest` into a boot image.
pub fn make_image(a: &Artifacts, manifest: &str, name: &str) -> Result<PathBuf, String> {
    let aot: Vec<(String, PathBuf)> = a.programs.iter().filter(|(n, _)| a.wasi_aot.contains(n)).cloned().collect();
    let manifest = &wasi::with_aot_entries(manifest, &aot).map_err(|e| format!("{name}: {e}"))?;
    let progs = manifest::parse(manifest).map_err(|e| format!("{name}: manifest line {}: {}", e.line, e.msg))?;
    let mut wanted: Vec<&str> = ALWAYS.to_vec();
    for p in &progs {
        if !wanted.contains(&p.file.as_str()) {
            wanted.push(&p.file);
        }
    }
    let mut b = bootfs::Builder::new();
    for w in wanted {
        let Some((n, p)) = a.programs.iter().find(|(n, _)| n == w) else {
            return Err(format!("{name}: the manifest names `{w}`, which no package under user/ builds"));
        };
        let data = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let data = loadable(&data).map_err(|e| format!("{}: {e}", p.display()))?;
        b.add(n, &data).map_err(|e| format!("boot image: {n}: {e:?}"))?;
    }
    b.add("manifest", manifest.as_bytes()).map_err(|e| format!("boot image: manifest: {e:?}"))?;
    let dir = out_dir();
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let path = dir.join(format!("{name}.img"));
    std::fs::write(&path, b.build()).map_err(|e| e.to_string())?;
    Ok(path)
}

/// Program `name` of this build as the boot image holds it (`loadable`), written to
/// `target/scion/programs/NAME` for a disk's filesystem (`fs=program:NAME`).
pub fn program_file(name: &str) -> Result<PathBuf, String> {
    let built = target_dir().join(TARGET).join("release").join(name);
    let data =
        std::fs::read(&built).map_err(|e| format!("{}: {e} (is `{name}` a program under user/?)", built.display()))?;
    let dir = out_dir().join("programs");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let out = dir.join(name);
    std::fs::write(&out, loadable(&data).map_err(|e| format!("{}: {e}", built.display()))?)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// What a loader needs of an ELF executable: the file up to the end of its headers
/// and segments, without section headers (debug info stays in `target/` for the
/// host's tools; a boot image need not carry megabytes of it).
pub fn loadable(elf: &[u8]) -> Result<Vec<u8>, String> {
    let e = kcore::elf::parse(elf).map_err(|e| format!("not a loadable ELF: {e:?}"))?;
    let phoff = u64::from_le_bytes(elf[32..40].try_into().unwrap_or_default());
    let phentsize = u16::from_le_bytes([elf[54], elf[55]]) as u64;
    let phnum = u16::from_le_bytes([elf[56], elf[57]]) as u64;
    let end =
        e.segments().iter().map(|s| s.offset + s.filesz).chain([phoff + phentsize * phnum]).max().unwrap_or(0) as usize;
    let mut out = elf[..end.min(elf.len())].to_vec();
    out[40..48].fill(0); // e_shoff
    out[58..64].fill(0); // e_shentsize, e_shnum, e_shstrndx
    kcore::elf::parse(&out).map_err(|e| format!("cut ELF does not parse: {e:?}"))?;
    Ok(out)
}

/// The host port forwarded to Scion's port 80: `--port N`, else `SCION_HTTP_PORT`, else 8080.
fn http_port(args: &[String]) -> Result<u16, String> {
    host_port(args, "--port", "SCION_HTTP_PORT", 8080)
}

/// The host port forwarded to Scion's FTP port 21: `--ftp-port N`, else `SCION_FTP_PORT`,
/// else 2121; its `FTP_DATA_PORTS` data ports follow it (N+1 … N+64).
fn ftp_port(args: &[String]) -> Result<u16, String> {
    let p = host_port(args, "--ftp-port", "SCION_FTP_PORT", 2121)?;
    let n = qemu::FTP_DATA_PORTS;
    if p == 0 || p > u16::MAX - n {
        return Err(format!("--ftp-port {p}: its {n} data ports follow it, so at most {}", u16::MAX - n));
    }
    Ok(p)
}

fn host_port(args: &[String], flag: &str, var: &str, default: u16) -> Result<u16, String> {
    let bad = |v: &str| format!("bad port {v:?} ({flag} N or {var}=N: 1 to 65535)");
    let v = match args.iter().position(|a| a == flag) {
        Some(i) => args.get(i + 1).ok_or(format!("{flag} needs a number"))?.clone(),
        None => match std::env::var(var) {
            Ok(v) => v,
            Err(_) => return Ok(default),
        },
    };
    v.parse().ok().filter(|p| *p != 0).ok_or_else(|| bad(&v))
}

/// The run manifest's ftpd told to listen on data ports 2122 … 2122+63 and announce
/// host ports `ftp+1 … ftp+64` for them (QEMU forwards each host port to its data port).
fn with_ftp_ports(manifest: &str, ftp: u16) -> Result<String, String> {
    const ARGS: &str = "name = \"ftpd\"\nargs = \"ip=127.0.0.1\"";
    if !manifest.contains(ARGS) {
        return Err("system/run.toml: ftpd's entry is not `name = \"ftpd\"` then `args = \"ip=127.0.0.1\"`".into());
    }
    let pasv = format!("{}-{}:{}", RUN_DATA_PORT, RUN_DATA_PORT + qemu::FTP_DATA_PORTS - 1, ftp + 1);
    Ok(manifest.replacen(ARGS, &format!("name = \"ftpd\"\nargs = \"ip=127.0.0.1 pasv={pasv}\"",), 1))
}

/// Write the UEFI disk image (`esp`) for `boot_image` with this build's kernel and loader.
pub fn uefi_disk(a: &Artifacts, boot_image: &Path, cmdline: &str, out: &Path) -> Result<(), String> {
    let loader = esp::build_loader()?;
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let files = esp::esp_files(&read(&loader)?, &read(&a.kernel)?, &read(boot_image)?, cmdline);
    esp::write_disk(out, &files)
}

/// `cargo xtask image OUT`: `run`'s system (its boot image, manifest and shell; the
/// FTP server's default ports) on a disk that boots by UEFI.
fn uefi_image(out: &str) -> Result<(), String> {
    let a = build()?;
    let img = make_image(&a, &with_ftp_ports(&run_manifest()?, 2121)?, "run")?;
    uefi_disk(&a, &img, "", Path::new(out))?;
    let len = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "xtask: wrote {out} ({} MiB): a GPT disk whose EFI system partition boots Scion (README: \"Boot a PC from a USB stick\")",
        len >> 20
    );
    Ok(())
}

/// The first of ftpd's data ports on the guest in `run`.
const RUN_DATA_PORT: u16 = 2122;

fn run(args: &[String]) -> Result<ExitCode, String> {
    let port = http_port(args)?;
    let ftp = ftp_port(args)?;
    let last = ftp + qemu::FTP_DATA_PORTS;
    if (ftp..=last).contains(&port) {
        return Err(format!("--port {port} falls among the FTP ports {ftp}–{last} (--ftp-port moves them)"));
    }
    let a = build()?;
    let img = make_image(&a, &with_ftp_ports(&run_manifest()?, ftp)?, "run")?;
    qemu::ensure_qemu()?;
    let uefi = if args.iter().any(|a| a == "--uefi") {
        let disk = out_dir().join("run-uefi.img");
        uefi_disk(&a, &img, "", &disk)?;
        Some((disk, qemu::vars_copy("run")?))
    } else {
        None
    };
    // The disk persists across runs; it is made (with sample segments and a `files`
    // filesystem holding the docs, the example grafts and the WASI programs) when
    // missing. One that lacks the grafts or the programs is kept (it may hold the user's
    // files): xtask says how to get them.
    let disk = out_dir().join("run-disk.img");
    if image::has_path(&disk, "files", "/") && !image::has_path(&disk, "files", "/wasi") {
        eprintln!(
            "xtask: {} predates the example grafts (/grafts) or the WASI programs (/wasi); remove it to have it made again with them",
            disk.display()
        );
    }
    if !image::has_path(&disk, "files", "/") {
        let root = project_root();
        let p = |f: &str| root.join(f).display().to_string();
        let fs = format!(
            "files:1:4096:fs={}+{}+{}+{}+{}+{}",
            p("xtask/disk/hello.txt"),
            p("README.md"),
            p("ARCHITECTURE.md"),
            p("docs"),
            grafts::dir().display(),
            wasi::dir().display()
        );
        image::make(
            &disk.display().to_string(),
            64 << 20,
            &[fs, format!("readme:1:256:{}", p("README.md")), "scratch:1:1024".into(), "others:2:512".into()],
        )?;
        eprintln!("xtask: made the BAIO disk {}", disk.display());
    }
    let accel = qemu::accel();
    let how = if uefi.is_some() { "by UEFI (OVMF)" } else { "by PVH" };
    eprintln!("xtask: booting Scion {how} ({accel}); quit with Ctrl-A X or `halt`");
    eprintln!("xtask: Scion's port 80 is http://localhost:{port}/ (try `curl http://localhost:{port}/README.md` from another terminal)");
    eprintln!(
        "xtask: Scion's FTP server is ftp://localhost:{ftp}/ (passive mode; its data ports {}–{last} are forwarded too)",
        ftp + 1,
    );
    let mut forward = vec![(port, 80), (ftp, 21)];
    forward.extend((0..qemu::FTP_DATA_PORTS).map(|k| (ftp + 1 + k, RUN_DATA_PORT + k)));
    let net = qemu::NetOptions { forward, ..Default::default() };
    let mut cmd = qemu::command(
        &a.kernel,
        &img,
        &qemu::Options { net: Some(net), uefi, ..qemu::Options::new(accel, false, String::new(), Some(disk)) },
    )?;
    cmd.args(["-serial", "mon:stdio"]);
    let st = cmd.status().map_err(|e| e.to_string())?;
    Ok(if st.success() || st.code() == Some(1) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

#[cfg(test)]
mod tests {
    #[test]
    fn ftp_ports_move_with_the_flag() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(super::ftp_port(&args(&["run", "--ftp-port", "3000"])), Ok(3000));
        assert!(super::ftp_port(&args(&["run", "--ftp-port", "65534"])).is_err());
        assert!(super::ftp_port(&args(&["run", "--ftp-port", "65471"])).is_ok());
        assert!(super::ftp_port(&args(&["run", "--ftp-port", "65472"])).is_err(), "its 64 data ports pass 65535");
        assert!(super::ftp_port(&args(&["run", "--ftp-port", "0"])).is_err());
        assert!(super::ftp_port(&args(&["run", "--ftp-port"])).is_err());
        assert!(super::http_port(&args(&["run", "--port", "x"])).is_err());
        let m = super::with_ftp_ports(&super::run_manifest().unwrap(), 3000).unwrap();
        assert!(m.contains("args = \"ip=127.0.0.1 pasv=2122-2185:3001\""), "{m}");
    }

    /// A boot image carries a program up to its last segment: the section headers and
    /// what lies behind (debug info) go, and what is left still loads the same.
    #[test]
    fn loadable_cuts_what_a_loader_does_not_read() {
        let (vaddr, code) = (0x40_0000u64, [0x90u8; 16]);
        let mut elf = vec![0u8; 4096];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[6] = 1;
        elf[16..18].copy_from_slice(&2u16.to_le_bytes());
        elf[18..20].copy_from_slice(&62u16.to_le_bytes());
        elf[24..32].copy_from_slice(&vaddr.to_le_bytes());
        elf[32..40].copy_from_slice(&64u64.to_le_bytes());
        elf[54..56].copy_from_slice(&56u16.to_le_bytes());
        elf[56..58].copy_from_slice(&1u16.to_le_bytes());
        let ph = &mut elf[64..120];
        ph[..4].copy_from_slice(&1u32.to_le_bytes());
        ph[4..8].copy_from_slice(&5u32.to_le_bytes());
        ph[8..16].copy_from_slice(&4096u64.to_le_bytes());
        ph[16..24].copy_from_slice(&vaddr.to_le_bytes());
        ph[32..40].copy_from_slice(&16u64.to_le_bytes());
        ph[40..48].copy_from_slice(&16u64.to_le_bytes());
        ph[48..56].copy_from_slice(&4096u64.to_le_bytes());
        elf.extend_from_slice(&code);
        // Debug sections and their headers behind the code.
        let shoff = elf.len() as u64 + 1000;
        elf.extend_from_slice(&[0xdb; 1000 + 64 * 3]);
        elf[40..48].copy_from_slice(&shoff.to_le_bytes());
        elf[58..64].copy_from_slice(&[64, 0, 3, 0, 2, 0]);
        let before = kcore::elf::parse(&elf).expect("the test ELF parses");
        let cut = super::loadable(&elf).expect("cut");
        assert_eq!(cut.len(), 4096 + 16, "up to the end of the segment");
        assert_eq!(&cut[40..48], &[0; 8], "no section headers");
        let after = kcore::elf::parse(&cut).expect("the cut ELF parses");
        assert_eq!(before.segments(), after.segments());
        assert_eq!(&cut[4096..], &code);
    }

    /// Everything xtask makes (disk images, boot images, logs) goes under the target
    /// directory cargo uses, also when CARGO_TARGET_DIR moves it (the tests
    /// looked for disk images under ./target).
    #[test]
    fn outputs_follow_cargo_target_dir() {
        let old = std::env::var_os("CARGO_TARGET_DIR");
        std::env::set_var("CARGO_TARGET_DIR", "/tmp/elsewhere");
        assert_eq!(super::out_dir(), std::path::Path::new("/tmp/elsewhere/scion"));
        std::env::set_var("CARGO_TARGET_DIR", "relative/t");
        assert_eq!(super::out_dir(), super::project_root().join("relative/t/scion"));
        std::env::remove_var("CARGO_TARGET_DIR");
        assert_eq!(super::out_dir(), super::project_root().join("target/scion"));
        if let Some(v) = old {
            std::env::set_var("CARGO_TARGET_DIR", v);
        }
    }

    /// The `cargo xtask …` lines of a Markdown text's code blocks (fenced, or indented by
    /// four spaces after a blank line), each as its arguments (a `# comment` left out).
    fn readme_commands(text: &str) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let (mut fenced, mut indented, mut blank) = (false, false, true);
        for l in text.lines() {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            indented = l.starts_with("    ") && (indented || blank) && !fenced;
            blank = l.trim().is_empty();
            if !(fenced || indented) {
                continue;
            }
            if let Some((_, rest)) = l.split_once("cargo xtask") {
                let rest = rest.split(" # ").next().unwrap_or("");
                out.push(rest.split_whitespace().map(String::from).collect());
            }
        }
        out
    }

    /// Every `cargo xtask` command the README shows in a code block is one xtask takes
    /// (`check_args`, the parser `main` runs first): a README that drifts from xtask
    /// fails here.
    #[test]
    fn readme_commands_parse() {
        let text = std::fs::read_to_string(super::project_root().join("README.md")).unwrap();
        let cmds = readme_commands(&text);
        assert!(cmds.len() >= 5, "the README shows only {} xtask commands in code blocks", cmds.len());
        for c in &cmds {
            assert_eq!(super::check_args(c), Ok(()), "README: cargo xtask {}", c.join(" "));
        }
        // It bites: a made-up flag, a suite or a command that is not there.
        let bad = "Run:\n\n    cargo xtask run --made-up\n\n```\ncargo xtask bench kernl\ncargo xtask serve\n```\n";
        let cmds = readme_commands(bad);
        assert_eq!(cmds.len(), 3);
        assert!(cmds.iter().all(|c| super::check_args(c).is_err()), "{cmds:?}");
        let ok = |v: &[&str]| super::check_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(ok(&["test", "--cpus", "1", "fuzz"]), Ok(()));
        assert_eq!(ok(&["mkimage", "d.img", "--size", "64M", "--segment", "a:1:8"]), Ok(()));
        assert!(ok(&["mkimage", "d.img"]).is_err());
        assert!(ok(&["test", "a", "b"]).is_err());
        assert!(ok(&["run", "--port"]).is_err());
        assert!(ok(&["fsck", "--repair"]).is_err());
        // Every command `main` runs has a shape (`graft` had none: refused before it ran).
        assert_eq!(ok(&["graft", "build", "g.rhai", "--point", "evict", "-o", "g.graft"]), Ok(()));
        assert_eq!(ok(&["wasm", "p.wasm", "-o", "p"]), Ok(()));
        assert!(ok(&["graft", "build"]).is_err());
    }
}
