//! `cargo xtask`: build Scion, make boot images, run it in QEMU, test it, measure it.

mod bench;
mod image;
mod qemu;
mod scenarios;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

pub const TARGET: &str = "x86_64-unknown-none";

/// What `cargo xtask run` boots.
const RUN_MANIFEST: &str = include_str!("../run.manifest");

fn usage() -> ExitCode {
    eprintln!(
        "usage: cargo xtask <command>\n\
         \n\
         commands:\n\
         \x20 build            build the kernel and all user programs\n\
         \x20 run              build and boot Scion in QEMU, serial console on this terminal\n\
         \x20 test [FILTER]    host unit tests, then every QEMU scenario (or those matching FILTER)\n\
         \x20 bench [SUITE…]   measure Scion and a Linux guest side by side (icount and TCG);\n\
         \x20                  writes target/bench/SUITE.json, report.md and plots (--list: suites)\n\
         \x20 mkimage OUT --size SIZE [--segment NAME:OWNER:BLOCKS[:FILE]]...  make a BAIO device image\n\
         \x20 fsck IMAGE       check a BAIO device image and list every inconsistency\n\
         \n\
         environment: SCION_ACCEL=tcg|kvm forces the accelerator; SCION_FUZZ_SEED fixes the fuzz seed"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = project_root();
    std::env::set_current_dir(&root).expect("cd to project root");
    let r = match args.first().map(String::as_str) {
        Some("build") => build().map(|_| ExitCode::SUCCESS),
        Some("run") => run(),
        Some("test") => scenarios::test(args.get(1).map(String::as_str)),
        Some("bench") => bench::bench(&args[1..]),
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

pub fn out_dir() -> PathBuf {
    project_root().join("target/scion")
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
fn ensure_target() -> Result<(), String> {
    let out = Command::new("rustup").args(["target", "list", "--installed"]).output();
    match out {
        Ok(o) if String::from_utf8_lossy(&o.stdout).lines().any(|l| l.trim() == TARGET) => Ok(()),
        Ok(_) => {
            eprintln!("xtask: adding the Rust target {TARGET}");
            sh(Command::new("rustup").args(["target", "add", TARGET]))
        }
        Err(_) => Err(format!("rustup not found; install the target {TARGET} for your toolchain")),
    }
}

pub struct Artifacts {
    pub kernel: PathBuf,
    pub programs: Vec<(String, PathBuf)>,
}

/// Build kernel and user programs (release: TCG makes every instruction count).
pub fn build() -> Result<Artifacts, String> {
    ensure_target()?;
    sh(Command::new(env!("CARGO")).args(["build", "--release", "--target", TARGET, "-p", "kernel", "-p", "progs"]))?;
    let dir = project_root().join("target").join(TARGET).join("release");
    let mut programs = Vec::new();
    let bins = project_root().join("user/progs/src/bin");
    let mut names: Vec<String> = std::fs::read_dir(&bins)
        .map_err(|e| format!("{}: {e}", bins.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.path().file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    for n in names {
        programs.push((n.clone(), dir.join(&n)));
    }
    Ok(Artifacts { kernel: dir.join("kernel"), programs })
}

/// Pack root, every program and a `manifest` into a boot image.
pub fn make_image(a: &Artifacts, manifest: &str, name: &str) -> Result<PathBuf, String> {
    let mut b = bootfs::Builder::new();
    for (n, p) in &a.programs {
        let data = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
        b.add(n, &data).map_err(|e| format!("boot image: {n}: {e:?}"))?;
    }
    b.add("manifest", manifest.as_bytes()).map_err(|e| format!("boot image: manifest: {e:?}"))?;
    let dir = out_dir();
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let path = dir.join(format!("{name}.img"));
    std::fs::write(&path, b.build()).map_err(|e| e.to_string())?;
    Ok(path)
}

fn run() -> Result<ExitCode, String> {
    let a = build()?;
    let img = make_image(&a, RUN_MANIFEST, "run")?;
    qemu::ensure_qemu()?;
    // The disk persists across runs; it is made (with sample segments and a `files`
    // filesystem holding the docs) when missing or when made by an older xtask.
    let disk = out_dir().join("run-disk.img");
    if !image::has_filesystem(&disk, "files") {
        let root = project_root();
        let p = |f: &str| root.join(f).display().to_string();
        let fs = format!("files:1:4096:fs={}+{}+{}+{}", p("xtask/disk/hello.txt"), p("README.md"), p("ARCHITECTURE.md"), p("docs"));
        image::make(&disk.display().to_string(), 64 << 20, &[fs, format!("readme:1:256:{}", p("README.md")), "scratch:1:1024".into(), "others:2:512".into()])?;
        eprintln!("xtask: made the BAIO disk {}", disk.display());
    }
    let accel = qemu::accel();
    eprintln!("xtask: booting Scion ({accel}); quit with Ctrl-A X or `halt`");
    let mut cmd = qemu::command(&a.kernel, &img, &qemu::Options { accel, icount: false, append: String::new(), disk: Some(disk) });
    cmd.args(["-serial", "mon:stdio"]);
    let st = cmd.status().map_err(|e| e.to_string())?;
    Ok(if st.success() || st.code() == Some(1) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
