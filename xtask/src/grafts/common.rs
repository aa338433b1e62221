//! What every graft build needs: the toolchains (installed here when missing, as QEMU
//! is), where the sources are, and graft files written.

use std::path::{Path, PathBuf};
use std::process::Command;

use graft::format::{GraftFile, Tech};
use graft::Point;

use crate::sh;

pub(crate) const WASM_TARGET: &str = "wasm32-unknown-unknown";

pub(crate) fn file_name(point: Point, tech: Tech, name: &str) -> String {
    format!("{}_{}_{}.graft", point.name(), tech.name(), name)
}

pub(crate) fn which(names: &[&str]) -> Option<String> {
    names
        .iter()
        .find(|n| Command::new(n).arg("--version").output().is_ok_and(|o| o.status.success()))
        .map(|n| n.to_string())
}

/// clang (for `-target bpf`) and llvm-objcopy, installed from Debian's packages if
/// missing. Returns their names.
pub(crate) fn ensure_clang() -> Result<(String, String), String> {
    let find = || (which(&["clang-14", "clang"]), which(&["llvm-objcopy-14", "llvm-objcopy"]));
    if let (Some(c), Some(o)) = find() {
        return Ok((c, o));
    }
    let install = "apt-get update && apt-get install -y clang llvm";
    let is_root = Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0")).unwrap_or(false);
    if !is_root {
        return Err(format!(
            "clang and LLVM (for the example eBPF grafts) are missing; install them with: sudo sh -c '{install}'"
        ));
    }
    eprintln!("xtask: installing clang and llvm from Debian's packages (for the eBPF grafts)");
    sh(Command::new("sh").args(["-c", &format!("DEBIAN_FRONTEND=noninteractive {install} >/dev/null")]))?;
    match find() {
        (Some(c), Some(o)) => Ok((c, o)),
        _ => Err("clang or llvm-objcopy still missing after installing clang and llvm".into()),
    }
}

pub(crate) fn ensure_wasm_target() -> Result<(), String> {
    crate::ensure_rust_target(WASM_TARGET)
}

pub(crate) fn write(
    out: &Path,
    point: Point,
    tech: Tech,
    name: &str,
    state_len: usize,
    code: &[u8],
) -> Result<PathBuf, String> {
    let bytes = GraftFile { point, tech, state_len, name, code, sig: &[] }.to_bytes();
    GraftFile::parse(&bytes).map_err(|e| format!("graft {name}: {}", e.what()))?;
    let p = out.join(file_name(point, tech, name));
    std::fs::write(&p, bytes).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(p)
}

/// Where the example grafts' sources are, from the project's root: every technology's
/// (`src/` the safe Rust of native, signed and WebAssembly; `wasm/`, `signed/`, `sfi/` the
/// harnesses that build it; `bpf/`, `rhai/`).
pub(crate) const SOURCES: &str = "crates/graft-examples";

/// wasm2c (WABT), installed from Debian's `wabt` package if missing. Returns its name.
pub(crate) fn ensure_wasm2c() -> Result<String, String> {
    if let Some(w) = which(&["wasm2c"]) {
        return Ok(w);
    }
    let install = "apt-get update && apt-get install -y wabt";
    let is_root = Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0")).unwrap_or(false);
    if !is_root {
        return Err(format!(
            "wasm2c (WABT, for the compiled WebAssembly grafts) is missing; install it with: sudo sh -c '{install}'"
        ));
    }
    eprintln!("xtask: installing wabt from Debian's packages (wasm2c, for the compiled WebAssembly grafts)");
    sh(Command::new("sh").args(["-c", &format!("DEBIAN_FRONTEND=noninteractive {install} >/dev/null")]))?;
    which(&["wasm2c"]).ok_or_else(|| "wasm2c still missing after installing wabt".into())
}

/// The toolchain's rust-lld (it links the SFI and signed images), asked of rustc once.
pub(crate) fn rust_lld() -> Result<PathBuf, String> {
    static LLD: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    LLD.get_or_init(|| {
        let sysroot = Command::new("rustc").args(["--print", "sysroot"]).output().map_err(|e| format!("rustc: {e}"))?;
        Ok(PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim())
            .join("lib/rustlib/x86_64-unknown-linux-gnu/bin/rust-lld"))
    })
    .clone()
}

/// C compiled to eBPF by clang (`-target bpf`, Scion's `graft.h` on the include path):
/// the instructions of its `scion_graft` section, refused if it has relocations (a
/// global or a map would be a hole in the code that nothing fills). `obj`: a directory
/// for the intermediate files.
pub(crate) fn ebpf_from_c(c: &Path, obj: &Path, name: &str) -> Result<Vec<u8>, String> {
    let (clang, objcopy) = ensure_clang()?;
    let (o, bin) = (obj.join(format!("{name}.o")), obj.join(format!("{name}.bin")));
    let include = crate::project_root().join(SOURCES).join("bpf");
    sh(Command::new(&clang)
        .args(["-O2", "-fno-builtin", "-target", "bpf", "-I"])
        .arg(&include)
        .arg("-c")
        .arg(c)
        .arg("-o")
        .arg(&o))?;
    sh(Command::new(&objcopy).args(["-O", "binary", "--only-section=scion_graft"]).arg(&o).arg(&bin))?;
    let rel = Command::new(&objcopy)
        .args(["--dump-section", ".relscion_graft=/dev/null"])
        .arg(&o)
        .arg(obj.join("rel.tmp"))
        .output()
        .map_err(|e| e.to_string())?;
    if rel.status.success() {
        return Err(format!("{}: the eBPF graft has relocations (globals or maps are not allowed)", c.display()));
    }
    let code = std::fs::read(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;
    if code.is_empty() {
        return Err(format!(
            "{}: no code in section scion_graft (declare the graft's function with GRAFT from graft.h)",
            c.display()
        ));
    }
    Ok(code)
}
