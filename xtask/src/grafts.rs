//! The example grafts (`crates/graft-examples`), built for every technology into graft
//! files in `target/grafts/` (`<point>_<technology>_<name>.graft`): safe Rust compiled to
//! WebAssembly (`wasm/`, the same source, `src/`, as the native built-ins), C compiled to
//! eBPF by clang (`bpf/`), rhai scripts (`rhai/`), and the native built-ins by name. The
//! toolchains the builds need (the `wasm32-unknown-unknown` Rust target, clang and LLVM's
//! objcopy) are installed here when missing, as QEMU is.

mod command;
mod common;
mod sfi;
mod signed;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::process::Command;

use graft::format::Tech;
use graft::Point;

pub(crate) use command::graft_command;
pub(crate) use common::rust_lld;
use common::{ebpf_from_c, ensure_clang, ensure_wasm2c, ensure_wasm_target, write, SOURCES, WASM_TARGET};
use sfi::sfi_image;
pub(crate) use sfi::wasm2c_unsupported;

/// wasm2c (Debian's WABT, installed if missing).
pub(crate) fn wasm2c() -> Result<String, String> {
    ensure_wasm2c()
}

/// clang and llvm-objcopy (installed if missing), for what else xtask compiles.
pub fn clang() -> Result<(String, String), String> {
    ensure_clang()
}
use signed::{build_signed, write_signed};
pub(crate) use signed::{public_key_hex, signing_seed};

use crate::{project_root, sh, target_dir};

/// (name, point, state bytes): the example grafts, each in every technology that has it.
pub const EXAMPLES: [(&str, Point, usize); 13] = [
    ("null", Point::Evict, 0),
    ("hotlist", Point::Evict, graft_examples::HOT_STATE),
    ("md5", Point::Stream, graft_examples::MD5_STATE),
    ("ldisk", Point::Ldisk, graft_examples::LD_STATE),
    ("spin", Point::Evict, 8),
    ("oob", Point::Evict, 8),
    ("hog", Point::Evict, 8),
    ("liar", Point::Evict, graft_examples::HOT_STATE),
    ("trap", Point::Evict, graft_examples::HOT_STATE),
    ("helper", Point::Evict, 8),
    ("shrink", Point::Evict, 8),
    ("keys", Point::Evict, 8),
    ("curry", Point::Evict, 8),
];

/// Hostile eBPF programs written as instructions: `negx` uses NEG with the source bit
/// (an opcode rbpf 0.4.1 lacks: it used to pass the verifier and panic the server), `leak`
/// stores `r1` (the address of its memory) into its state.
pub const RAW_BPF: [(&str, [[u8; 8]; 3]); 2] = [
    ("negx", [[0xb7, 0, 0, 0, 0, 0, 0, 0], [0x8c, 0, 0, 0, 0, 0, 0, 0], [0x95, 0, 0, 0, 0, 0, 0, 0]]),
    ("leak", [[0x7b, 0x11, 80, 0, 0, 0, 0, 0], [0xb7, 0, 0, 0, 0, 0, 0, 0], [0x95, 0, 0, 0, 0, 0, 0, 0]]),
];

/// The native built-ins (the hostile examples exist only in the sandboxed technologies).
const NATIVE: [&str; 4] = ["null", "hotlist", "md5", "ldisk"];

pub fn dir() -> PathBuf {
    target_dir().join("grafts")
}

/// Build every example graft; returns the files written.
pub fn build() -> Result<Vec<PathBuf>, String> {
    let root = project_root();
    let out = dir();
    let obj = target_dir().join("grafts-obj");
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&obj).map_err(|e| e.to_string())?;
    let mut files = Vec::new();
    let src = |sub: &str, name: &str, ext: &str| root.join(SOURCES).join(sub).join(format!("{name}.{ext}"));

    // WebAssembly: every example of wasm/, in one cargo build (cwd there, so
    // that its .cargo/config.toml applies).
    ensure_wasm_target()?;
    let wasm_target = target_dir().join("grafts-wasm");
    sh(Command::new(env!("CARGO"))
        .current_dir(root.join(SOURCES).join("wasm"))
        .env("CARGO_TARGET_DIR", &wasm_target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .args(["build", "-q", "--release", "--target", WASM_TARGET, "--examples"]))?;
    let (clang, objcopy) = ensure_clang()?;
    let wasm2c = ensure_wasm2c()?;
    let seed = signing_seed()?;
    for (name, point, state) in EXAMPLES {
        if NATIVE.contains(&name) {
            files.push(write(&out, point, Tech::Native, name, state, name.as_bytes())?);
        }
        let wasm = wasm_target.join(WASM_TARGET).join("release/examples").join(format!("{name}.wasm"));
        if let Ok(code) = std::fs::read(&wasm) {
            files.push(write(&out, point, Tech::Wasmi, name, state, &code)?);
            let compiled = sfi_image(&wasm2c, &clang, &wasm, &obj.join(format!("sfi_{name}")))
                .map_err(|e| format!("{}: {e}", wasm.display()))?;
            files.push(write_signed(&out, point, Tech::WasmAot, name, state, &compiled, &seed)?);
        }
        let c = src("bpf", name, "c");
        if c.exists() {
            let code = ebpf_from_c(&c, &obj, name)?;
            // An example that Scion's verifier refuses is a build error, with the
            // instruction (`llvm-objdump -d` numbers them alike); the hostile ones are
            // meant to be refused or aborted.
            if NATIVE.contains(&name) {
                let mem = graft::engine::bpf::INPUT + point.max_input() + state;
                if let Err((at, e)) = graft::engine::bpf::verify::check(&code, mem) {
                    return Err(format!("{}: instruction {at}: {}", c.display(), e.what()));
                }
            }
            files.push(write(&out, point, Tech::Ebpf, name, state, &code)?);
        }
        let r = src("rhai", name, "rhai");
        if let Ok(code) = std::fs::read(&r) {
            files.push(write(&out, point, Tech::Script, name, state, &code)?);
        }
    }
    // Hostile eBPF clang does not write (as a hand-made program would come).
    for (name, code) in RAW_BPF {
        files.push(write(&out, Point::Evict, Tech::Ebpf, name, 8, &code.concat())?);
    }
    let natives: Vec<_> = EXAMPLES.iter().copied().filter(|e| NATIVE.contains(&e.0)).collect();
    files.extend(build_signed(&out, &obj, &natives)?);
    // Linux's side of the benchmark: MD5 as an XDP program (instructions only).
    let (o, bin) = (obj.join("md5_xdp.o"), xdp_md5());
    sh(Command::new(&clang)
        .args(["-O2", "-fno-builtin", "-target", "bpf", "-c"])
        .arg(src("bpf", "md5_xdp", "c"))
        .arg("-o")
        .arg(&o))?;
    sh(Command::new(&objcopy).args(["-O", "binary", "--only-section=scion_graft"]).arg(&o).arg(&bin))?;
    Ok(files)
}

/// The instructions of the MD5 XDP program the Linux guest runs (`bench/linux/graft.c`).
pub fn xdp_md5() -> PathBuf {
    target_dir().join("grafts-obj").join("md5_xdp.bin")
}
