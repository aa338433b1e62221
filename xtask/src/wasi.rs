//! The WASI programs (`user/wasi-programs`): Rust `std` programs built for WASI preview 1
//! (`wasm32-wasip1`), copied to `target/wasi/` for a disk's files filesystem (a
//! scenario's `${WASI}`); Scion runs them with its `wasi` runner.

use std::path::PathBuf;
use std::process::Command;

use crate::{ensure_rust_target, project_root, sh, target_dir};

pub const TARGET: &str = "wasm32-wasip1";

/// Debian's wasi-libc: the C library SQLite's C is compiled against (its headers under
/// `/usr/include/wasm32-wasi`, found by clang from sysroot `/usr`).
const WASI_LIBC: &str = "/usr/include/wasm32-wasi/stdio.h";

/// Where the built programs are.
pub fn dir() -> PathBuf {
    target_dir().join("wasi")
}

/// Build every program of `user/wasi-programs`; returns the files written.
pub fn build() -> Result<Vec<PathBuf>, String> {
    ensure_rust_target(TARGET)?;
    if !std::path::Path::new(WASI_LIBC).exists() {
        crate::qemu::ensure_package("wasi-libc", "wasi-libc (for SQLite)")?;
    }
    let (clang, _) = crate::grafts::clang()?;
    let src = project_root().join("user/wasi-programs");
    let build = target_dir().join("wasi-build");
    sh(Command::new(env!("CARGO"))
        .current_dir(&src)
        .env("CARGO_TARGET_DIR", &build)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        // The C (SQLite) by clang for WASI, against Debian's wasi-libc (clang 14 knows
        // the triple as wasm32-wasi; the later --target wins over the cc crate's).
        .env("CC_wasm32_wasip1", &clang)
        .env("CFLAGS_wasm32_wasip1", "--target=wasm32-wasi --sysroot=/usr")
        .args(["build", "-q", "--release", "--target", TARGET, "--bins"]))?;
    let out = dir();
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    let mut files = Vec::new();
    let built = build.join(TARGET).join("release");
    for e in std::fs::read_dir(&built).map_err(|e| format!("{}: {e}", built.display()))? {
        let p = e.map_err(|e| e.to_string())?.path();
        if p.extension().is_some_and(|x| x == "wasm") {
            let to = out.join(p.file_name().unwrap_or_default());
            std::fs::copy(&p, &to).map_err(|e| format!("{}: {e}", p.display()))?;
            files.push(to);
        }
    }
    if files.is_empty() {
        return Err(format!("{}: no program was built", built.display()));
    }
    Ok(files)
}
