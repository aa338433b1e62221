//! The WASI programs (`user/wasi-programs`): Rust `std` programs built for WASI preview 1
//! (`wasm32-wasip1`), copied to `target/wasi/` for a disk's files filesystem (a
//! scenario's `${WASI}`); Scion runs them with its `wasi` runner.

use std::path::{Path, PathBuf};
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

/// Where the programs compiled ahead of time are: `NAME-HASH` (`wasip1::aot_name`), ELF.
pub fn aot_dir() -> PathBuf {
    target_dir().join("wasi-aot")
}

/// The C side of a compiled WASI program: Scion's harness and headers.
const AOT_C: &str = "user/lib/wasi-aot/c";

/// clang's settings for a WASI program compiled ahead of time: freestanding x86-64 with
/// SSE4.1 (floats are the module's own: the kernel saves each thread's SSE registers
/// with FXSAVE; wasm2c's `floor`, `nearbyint`, `sqrt` are then instructions), static
/// at Scion's user address (the program is linked as every user program is, with
/// `user/link/user.ld`), frame pointers kept as Rust's are, no frame above 64 KiB (the
/// harness's stack check keeps a margin below the last frame checked).
const AOT_CFLAGS: [&str; 19] = [
    "--target=x86_64-unknown-none-elf",
    "-O2",
    "-ffreestanding",
    "-nostdlibinc",
    "-fno-pic",
    "-fno-pie",
    "-msse4.1",
    "-mno-red-zone",
    "-fno-omit-frame-pointer",
    "-fno-stack-protector",
    "-fno-asynchronous-unwind-tables",
    "-fno-unwind-tables",
    "-ffunction-sections",
    "-fdata-sections",
    "-Wframe-larger-than=65536",
    "-Werror=frame-larger-than",
    "-Werror=implicit-function-declaration",
    "-Wno-unused-function",
    "-Wno-unused-variable",
];

/// The Rust side of every compiled WASI program (`user/lib/wasi-aot`), built for Scion's
/// target: its path.
pub fn aot_lib() -> Result<PathBuf, String> {
    sh(Command::new(env!("CARGO")).args(["build", "-q", "--release", "--target", crate::TARGET, "-p", "wasi-aot"]))?;
    Ok(aot_lib_path())
}

fn aot_lib_path() -> PathBuf {
    target_dir().join(crate::TARGET).join("release").join("libwasi_aot.a")
}

/// Refuse, before wasm2c sees it, what a compiled WASI program cannot be: SIMD (wasm2c
/// 1.0.32 aborts on it), threads, exceptions, tail calls, 64-bit or several memories,
/// GC; a module that imports anything but preview-1 calls, or exports no `_start` or
/// no `memory`. Returns the module's hash.
pub fn aot_check(module: &[u8]) -> Result<wasip1::ModuleHash, String> {
    use wasmparser::{ExternalKind, Parser, Payload, TypeRef, Validator};
    let unsupported = crate::grafts::wasm2c_unsupported();
    if let Err(e) = Validator::new_with_features(wasmparser::WasmFeatures::default() - unsupported).validate_all(module)
    {
        if Validator::new().validate_all(module).is_ok() {
            return Err(format!(
                "it uses what wasm2c 1.0.32 cannot compile (SIMD, threads, exceptions, tail calls, 64-bit or several memories, GC): {e}; run it with the interpreter (`run wasi …`)"
            ));
        }
        return Err(format!("not a valid WebAssembly module: {e}"));
    }
    let calls = preview1_names();
    let (mut start, mut memory) = (false, false);
    for p in Parser::new(0).parse_all(module) {
        match p.map_err(|e| e.to_string())? {
            Payload::ImportSection(r) => {
                for i in r {
                    let i = i.map_err(|e| e.to_string())?;
                    let func = matches!(i.ty, TypeRef::Func(_));
                    if i.module != "wasi_snapshot_preview1" || !func || !calls.contains(&i.name) {
                        return Err(format!("it imports {}::{}, which is not a WASI preview-1 call", i.module, i.name));
                    }
                }
            }
            Payload::ExportSection(r) => {
                for e in r {
                    let e = e.map_err(|e| e.to_string())?;
                    start |= e.name == "_start" && e.kind == ExternalKind::Func;
                    memory |= e.name == "memory" && e.kind == ExternalKind::Memory;
                }
            }
            _ => {}
        }
    }
    if !start || !memory {
        return Err("it exports no `_start` and `memory` (not a WASI command)".into());
    }
    let mut h = wasip1::ModuleHash::default();
    h.update(module);
    Ok(h)
}

/// The names of the preview-1 calls (`wasi_host::preview1_calls!`, and `proc_exit`).
fn preview1_names() -> Vec<&'static str> {
    let text = include_str!("../../user/lib/wasi-host/src/lib.rs");
    let mut names: Vec<&str> =
        text.lines().filter_map(|l| l.trim().strip_prefix("$m!(\"")?.split('"').next()).collect();
    names.push("proc_exit");
    names
}

/// Scion's changes to wasm2c's output (1.0.32's form, checked): the empty `asm` after
/// each load goes (with SSE it guards nothing, and it keeps the memory's place and size
/// from being hoisted out of loops); the bounds check is written as `address > size −
/// width` in signed 64-bit arithmetic, as the SFI grafts' (`grafts::sfi::sfi_patch`); and
/// each function checks the stack pointer on entry (`SCION_STACK_CHECK`, wasm-rt.h).
pub fn aot_patch(src: &str) -> Result<String, String> {
    let mut src = src.to_string();
    let barrier = "wasm_asm(\"\" ::\"r\"(result));";
    if !src.contains(barrier) {
        return Err("wasm2c's output is not the expected 1.0.32 form (the load barrier)".into());
    }
    src = src.replace(barrier, "");
    for (old, new) in [
        (
            "#define MEMCHECK(mem, a, t) RANGE_CHECK(mem, a, sizeof(t))",
            "#define MEMCHECK(mem, a, t) \\\n  if (UNLIKELY((int64_t)(a) > (int64_t)((mem)->size - sizeof(t)))) TRAP(OOB);",
        ),
        (
            "#else\n#define FUNC_PROLOGUE\n\n#define FUNC_EPILOGUE\n#endif",
            "#else\n#define FUNC_PROLOGUE SCION_STACK_CHECK();\n\n#define FUNC_EPILOGUE\n#endif",
        ),
    ] {
        if src.matches(old).count() != 1 {
            return Err(format!("wasm2c's output is not the expected 1.0.32 form ({old})"));
        }
        src = src.replace(old, new);
    }
    memory_in_locals(&src)
}

/// wasm2c's loads and stores (1.0.32's helpers), which `memory_in_locals` points at a
/// function's own copy of the memory's place and size.
const MEMORY_ACCESSES: [&str; 23] = [
    "i32_load",
    "i64_load",
    "f32_load",
    "f64_load",
    "i32_load8_s",
    "i64_load8_s",
    "i32_load8_u",
    "i64_load8_u",
    "i32_load16_s",
    "i64_load16_s",
    "i32_load16_u",
    "i64_load16_u",
    "i64_load32_s",
    "i64_load32_u",
    "i32_store",
    "i64_store",
    "f32_store",
    "f64_store",
    "i32_store8",
    "i32_store16",
    "i64_store8",
    "i64_store16",
    "i64_store32",
];

/// Each generated function reads the memory's place and size (`mem_`, a copy of the
/// instance's `wasm_rt_memory_t`) once on entry and again after every statement that
/// calls anything — only a call can move or grow the memory (`memory.grow` is the
/// runtime's `wasm_rt_grow_memory`) — and its loads and stores use the copy. wasm2c's
/// own form reads both from the instance at every access, and a store to linear memory
/// (a byte copy, which may alias anything) makes the compiler read them again after it:
/// two loads more per access, and no check hoisted out of a loop (the CPU-bound bench
/// program: 113.0 M instructions to 79.8 M on the host). Refused, so that no call can
/// be missed, unless every line of a function body that calls anything is a statement
/// of its own (`[w2c_x = ]f(…);`) with no load or store in it, the form 1.0.32 writes.
fn memory_in_locals(src: &str) -> Result<String, String> {
    let is_fn = |l: &str| {
        ["static void ", "static u32 ", "static u64 ", "static f32 ", "static f64 "].iter().any(|t| {
            l.strip_prefix(t).is_some_and(|r| r.starts_with("w2c_") && r.contains("(Z_wasi_instance_t* instance"))
        }) && l.ends_with(") {")
    };
    let calls = |l: &str| {
        ["(instance,", "(instance)", "CALL_INDIRECT(", "wasm_rt_grow_memory(", "Z_wasi_snapshot_preview1Z_"]
            .iter()
            .any(|c| l.contains(c))
    };
    // `[w2c_x = ]callee(…);` alone on its line, the callee a name or `(*name)`.
    let statement = |l: &str| {
        let t = l.trim_start();
        let t = match t.split_once(" = ") {
            Some((lhs, rest))
                if lhs.starts_with("w2c_") && lhs.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                rest
            }
            _ => t,
        };
        let callee = t.split('(').next().unwrap_or("");
        let callee_ok = !callee.is_empty() && callee.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            || t.starts_with("(*")
                && t[2..].split(')').next().is_some_and(|n| n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        l.starts_with("  ") && callee_ok && t.ends_with(");") && t.matches(';').count() == 1
    };
    let mut out = String::with_capacity(src.len() + src.len() / 8);
    let (mut body, mut functions) = (false, 0);
    for l in src.lines() {
        if is_fn(l) {
            body = true;
            functions += 1;
            out += l;
            out += "\n  wasm_rt_memory_t mem_ = instance->w2c_memory;\n";
            continue;
        }
        if body && l == "}" {
            body = false;
        }
        if !body {
            out += l;
            out += "\n";
            continue;
        }
        let mut l = l.to_string();
        for a in MEMORY_ACCESSES {
            l = l.replace(&format!("{a}(&instance->w2c_memory,"), &format!("{a}(&mem_,"));
        }
        if calls(&l) {
            if !statement(&l) || l.contains("(&mem_,") {
                return Err(format!(
                    "wasm2c's output is not the expected 1.0.32 form (a call not a statement of its own: `{}`)",
                    l.trim()
                ));
            }
            l += " mem_ = instance->w2c_memory;";
        }
        out += &l;
        out += "\n";
    }
    if functions == 0 {
        return Err(
            "wasm2c's output is not the expected 1.0.32 form (no function `w2c_…(Z_wasi_instance_t* instance…) {`)"
                .into(),
        );
    }
    Ok(out)
}

/// What `aot_patch` does to wasm2c's output, in the object's stamp: a change to it
/// compiles every module again.
const AOT_PATCH_FORM: &str = "patch 2: no load barrier, signed bounds check, stack check, memory in locals";

/// Compile WASI module `wasm` ahead of time into a Scion program: wasm2c, Scion's
/// changes, clang with the harness, linked with the Rust side `lib` by rust-lld as a
/// user program. Written to `out` (by default `aot_dir()/NAME-HASH`); returns the
/// program's name in a boot image and where it is. The C object is kept in
/// `target/wasi-aot-build/NAME-HASH/` and made again only when the harness changed.
pub fn aot(wasm: &Path, out: Option<&Path>, lib: &Path) -> Result<(String, PathBuf), String> {
    let module = std::fs::read(wasm).map_err(|e| format!("{}: {e}", wasm.display()))?;
    let hash = aot_check(&module).map_err(|e| format!("{}: {e}", wasm.display()))?;
    let name = wasip1::aot_name(&wasm.to_string_lossy(), hash);
    let root = project_root();
    let c = root.join(AOT_C);
    let work = target_dir().join("wasi-aot-build").join(&name);
    std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
    let o = work.join("harness.o");
    // What the object is made from besides the module (named by its hash): the
    // harness, its headers, the flags.
    let mut stamp = format!("{AOT_CFLAGS:?}\n{AOT_PATCH_FORM}\n");
    for f in
        ["harness.c", "include/wasm-rt.h", "include/math.h", "include/string.h", "include/assert.h", "include/alloca.h"]
    {
        stamp += &std::fs::read_to_string(c.join(f)).map_err(|e| format!("{f}: {e}"))?;
    }
    let stamp_file = work.join("stamp");
    if !o.exists() || std::fs::read_to_string(&stamp_file).ok().as_deref() != Some(stamp.as_str()) {
        let wasm2c = crate::grafts::wasm2c()?;
        let (clang, _) = crate::grafts::clang()?;
        let gen = work.join("wasi.c");
        sh(Command::new(&wasm2c).args(["--no-debug-names", "-n", "wasi"]).arg(wasm).arg("-o").arg(&gen))?;
        let src = std::fs::read_to_string(&gen).map_err(|e| e.to_string())?;
        std::fs::write(&gen, aot_patch(&src)?).map_err(|e| e.to_string())?;
        let cc = Command::new(&clang)
            .args(AOT_CFLAGS)
            .arg("-I")
            .arg(c.join("include"))
            .arg("-I")
            .arg(&work)
            .arg("-c")
            .arg(c.join("harness.c"))
            .arg("-o")
            .arg(&o)
            .output()
            .map_err(|e| format!("{clang}: {e}"))?;
        if !cc.status.success() {
            return Err(format!("{}: clang refused it: {}", wasm.display(), String::from_utf8_lossy(&cc.stderr)));
        }
        std::fs::write(&stamp_file, &stamp).map_err(|e| e.to_string())?;
    }
    let out = match out {
        Some(p) => p.to_path_buf(),
        None => {
            std::fs::create_dir_all(aot_dir()).map_err(|e| e.to_string())?;
            aot_dir().join(&name)
        }
    };
    let lld = crate::grafts::rust_lld()?;
    let link = Command::new(&lld)
        .args([
            "-flavor",
            "gnu",
            "--no-pie",
            "-static",
            "--gc-sections",
            "-z",
            "max-page-size=4096",
            "-u",
            "_start",
            "-T",
        ])
        .arg(root.join("user/link/user.ld"))
        .arg(&o)
        .arg(lib)
        .arg("-o")
        .arg(&out)
        .output()
        .map_err(|e| format!("{}: {e}", lld.display()))?;
    if !link.status.success() {
        return Err(format!("{}: it does not link: {}", wasm.display(), String::from_utf8_lossy(&link.stderr)));
    }
    crate::loadable(&std::fs::read(&out).map_err(|e| e.to_string())?).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok((name, out))
}

/// The built WASI programs left to the interpreter: `sqlcrash` (its power-cut rounds start
/// the `wasi` runner by name; its 22 MB of C would be many more minutes of clang's).
const INTERPRETED_ONLY: [&str; 1] = ["sqlcrash.wasm"];

/// Compile the built WASI programs (`dir()`) ahead of time but `INTERPRETED_ONLY`, one
/// per core at a time (SQLite's 22 MB of C is minutes of clang's; kept until the module
/// changes): (name, ELF) of each.
pub fn aot_all(wasm: &[PathBuf]) -> Result<Vec<(String, PathBuf)>, String> {
    let lib = aot_lib_path();
    let wasm: Vec<&PathBuf> =
        wasm.iter().filter(|w| !w.file_name().is_some_and(|n| INTERPRETED_ONLY.iter().any(|o| n == *o))).collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..cores.min(wasm.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(w) = wasm.get(i).copied() else { break };
                let r = aot(w, None, &lib);
                done.lock().unwrap_or_else(|e| e.into_inner()).push((i, r));
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// `cargo xtask wasm IN.wasm [-o OUT]`: IN compiled ahead of time into a Scion program
/// (by default `target/wasi-aot/NAME-HASH`, the name the shell looks for).
pub fn wasm_command(args: &[String], cwd: &Path) -> Result<(), String> {
    let mut input = None;
    let mut out = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-o" {
            out = Some(cwd.join(it.next().ok_or("-o needs a file")?));
        } else {
            input = Some(cwd.join(a));
        }
    }
    let input = input.ok_or("wasm needs a module (IN.wasm)")?;
    let lib = aot_lib()?;
    let (name, path) = aot(&input, out.as_deref(), &lib)?;
    eprintln!(
        "xtask: {} compiled ahead of time: {} (its name in a boot image: {name})",
        input.display(),
        path.display()
    );
    Ok(())
}

/// A manifest with an entry for each program compiled ahead of time, `aot`, when it has
/// one for the `wasi` runner: the runner's entry (servers, ports, pages, principal,
/// priority, pager) under the program's name, not started at boot. So `run PROGRAM.wasm`
/// starts the compiled program exactly as it would have started the runner. A program
/// the manifest names itself keeps its own entry.
pub fn with_aot_entries(manifest_text: &str, aot: &[(String, PathBuf)]) -> Result<String, String> {
    let progs = manifest::parse(manifest_text).map_err(|e| format!("manifest line {}: {}", e.line, e.msg))?;
    let Some(w) = progs.iter().find(|p| p.name == "wasi") else { return Ok(manifest_text.to_string()) };
    let mut out = manifest_text.to_string();
    let list = |v: Vec<String>| v.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ");
    for (name, _) in aot.iter().filter(|(n, _)| !progs.iter().any(|p| p.name == *n)) {
        out += &format!(
            "\n# `run` of the module {name} was compiled from (cargo xtask build): the `wasi` entry's.\n[[program]]\nname = \"{name}\"\ncaps = [{}]\nio = [{}]\npages = {}\npriority = {}\nprincipal = {}\npager = \"{}\"\nstart = false\n",
            list(w.caps.clone()),
            list(w.io.iter().map(|(a, b)| if a == b { format!("{a:#x}") } else { format!("{a:#x}-{b:#x}") }).collect()),
            w.pages,
            w.priority,
            w.principal,
            w.pager,
        );
    }
    let check = manifest::parse(&out)
        .map_err(|e| format!("manifest with the compiled WASI programs, line {}: {}", e.line, e.msg))?;
    let added = aot.iter().filter(|(n, _)| !progs.iter().any(|p| p.name == *n)).count();
    if check.len() != progs.len() + added {
        return Err("the compiled WASI programs' entries did not all parse".into());
    }
    Ok(out)
}

/// `text` with each `${AOT:STEM}` replaced by the name of the compiled program among
/// `names` whose module was `STEM.wasm` (a scenario's lines: the names hold the
/// module's hash).
pub fn expand_aot(text: &str, names: &[String]) -> String {
    let mut out = text.to_string();
    for n in names {
        if let Some((stem, _)) = n.rsplit_once('-') {
            out = out.replace(&format!("${{AOT:{stem}}}"), n);
        }
    }
    out
}

/// The `wasi` bench suite's programs (`wasibench` and `sql`, the same sources as the
/// WASI programs) built natively for the Linux guest: static (glibc's), x86-64's
/// baseline (SSE2), `opt-level` as the WASI build's. Their directory.
pub fn native_bench() -> Result<PathBuf, String> {
    let build = target_dir().join("wasi-native");
    let host = "x86_64-unknown-linux-gnu";
    sh(Command::new(env!("CARGO"))
        .current_dir(project_root().join("user/wasi-programs"))
        .env("CARGO_TARGET_DIR", &build)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .args(["build", "-q", "--release", "--target", host, "--bin", "wasibench", "--bin", "sql"]))?;
    Ok(build.join(host).join("release"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module: its type, function and code sections after the header, `extra`
    /// (import or export sections) in their place.
    fn module(types: &[u8], imports: &[u8], funcs: &[u8], exports: &[u8], code: &[u8]) -> Vec<u8> {
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        for (id, body) in [(1u8, types), (2, imports), (3, funcs), (5, &[1, 0, 1][..]), (7, exports), (10, code)] {
            if !body.is_empty() {
                m.push(id);
                m.push(body.len() as u8);
                m.extend_from_slice(body);
            }
        }
        m
    }

    const START_AND_MEMORY: &[u8] =
        &[2, 6, b'_', b's', b't', b'a', b'r', b't', 0, 0, 6, b'm', b'e', b'm', b'o', b'r', b'y', 2, 0];

    #[test]
    fn a_command_passes_and_each_refusal_says_why() {
        // () -> (), empty body.
        let ok = module(&[1, 0x60, 0, 0], &[], &[1, 0], START_AND_MEMORY, &[1, 2, 0, 0x0b]);
        assert!(aot_check(&ok).is_ok(), "{:?}", aot_check(&ok));
        // The same hash as the shell computes.
        let mut h = wasip1::ModuleHash::default();
        h.update(&ok);
        assert_eq!(aot_check(&ok).unwrap().0, h.0);
        // () -> v128: v128.const 0.
        let mut body = vec![1, 20, 0, 0xfd, 0x0c];
        body.extend([0; 16]);
        body.push(0x0b);
        let simd = module(&[1, 0x60, 0, 1, 0x7b], &[], &[1, 0], START_AND_MEMORY, &body);
        let e = aot_check(&simd).unwrap_err();
        assert!(e.contains("SIMD") && e.contains("run wasi"), "{e}");
        let none = module(&[1, 0x60, 0, 0], &[], &[1, 0], &[0], &[1, 2, 0, 0x0b]);
        assert!(aot_check(&none).unwrap_err().contains("_start"));
        // An import from `env`.
        let imp = module(
            &[1, 0x60, 0, 0],
            &[1, 3, b'e', b'n', b'v', 1, b'f', 0, 0],
            &[1, 0],
            START_AND_MEMORY,
            &[1, 2, 0, 0x0b],
        );
        assert!(aot_check(&imp).unwrap_err().contains("env::f"), "{:?}", aot_check(&imp));
        assert!(aot_check(b"not wasm").unwrap_err().contains("not a valid"));
    }

    #[test]
    fn every_preview1_call_is_listed() {
        let names = preview1_names();
        assert_eq!(names.len(), 46);
        for n in ["args_get", "fd_write", "path_open", "poll_oneoff", "sock_shutdown", "proc_exit"] {
            assert!(names.contains(&n), "{n}");
        }
    }

    #[test]
    fn patch_needs_the_expected_form() {
        assert!(aot_patch("int x;").is_err());
        let head = "wasm_asm(\"\" ::\"r\"(result));\n#define MEMCHECK(mem, a, t) RANGE_CHECK(mem, a, sizeof(t))\n#else\n#define FUNC_PROLOGUE\n\n#define FUNC_EPILOGUE\n#endif\n";
        let func = "static void w2c_f1(Z_wasi_instance_t* instance) {\n  FUNC_PROLOGUE;\n}\n";
        assert!(aot_patch(head).unwrap_err().contains("no function"), "no function: nothing to change is refused too");
        let out = aot_patch(&format!("{head}{func}")).unwrap();
        assert!(out.contains("SCION_STACK_CHECK()") && out.contains("(int64_t)(a) >") && !out.contains("wasm_asm"));
    }

    /// wasm2c 1.0.32's form of a function (from `hostile.wasm`'s C): memory accesses
    /// and every kind of call.
    const BODY: &str = "static u32 w2c_f9(Z_wasi_instance_t* instance, u32 w2c_p0) {
  u32 w2c_l1 = 0;
  FUNC_PROLOGUE;
  u32 w2c_i0, w2c_i1;
  w2c_i0 = i32_load(&instance->w2c_memory, (u64)(w2c_p0) + 8u);
  i64_store8(&instance->w2c_memory, (u64)(w2c_i0), w2c_j1);
  w2c_i0 = w2c_f12(instance, w2c_i0);
  w2c_f13(instance);
  w2c_i0 = (*Z_wasi_snapshot_preview1Z_fd_write)(instance->Z_wasi_snapshot_preview1_instance, w2c_i0, w2c_i1, w2c_i0, w2c_i1);
  w2c_i0 = wasm_rt_grow_memory(&instance->w2c_memory, w2c_i0);
  if (w2c_i0) {
    CALL_INDIRECT(instance->w2c_T0, void (*)(void*, u32), 1, w2c_i1, instance->w2c_T0.data[w2c_i1].module_instance, w2c_i0);
  }
  memory_fill(&instance->w2c_memory, w2c_i0, w2c_i1, w2c_i0);
  w2c_i0 = f64_load(&instance->w2c_memory, (u64)(w2c_i0));
  FUNC_EPILOGUE;
  return w2c_i0;
}
u32 Z_wasiZ_f(Z_wasi_instance_t* instance) {
  return w2c_f9(instance, 0);
}
";

    #[test]
    fn each_function_keeps_the_memory_in_a_local_read_again_after_every_call() {
        let out = memory_in_locals(BODY).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[1], "  wasm_rt_memory_t mem_ = instance->w2c_memory;");
        // Loads and stores use the copy; the bulk operations and growth the instance's.
        for a in ["i32_load(&mem_,", "i64_store8(&mem_,", "f64_load(&mem_,", "memory_fill(&instance->w2c_memory,"] {
            assert!(out.contains(a), "{a}");
        }
        assert!(!out.contains("load(&instance->w2c_memory") && !out.contains("store8(&instance->w2c_memory"));
        // Every call, of whatever kind, is followed by the copy read again, and only calls.
        let reread = " mem_ = instance->w2c_memory;";
        let calls = ["w2c_f12(", "w2c_f13(", "fd_write)(", "wasm_rt_grow_memory(", "CALL_INDIRECT("];
        for l in &lines[2..] {
            let call = calls.iter().any(|c| l.contains(c));
            assert_eq!(l.ends_with(reread), call, "{l}");
        }
        // Outside the generated functions (an export's wrapper) nothing changes.
        assert!(out.contains("  return w2c_f9(instance, 0);\n}"));
        // A call that is not a statement of its own could hide where the memory moved:
        // refused.
        for bad in [
            "  if (w2c_f12(instance, w2c_i0)) {",
            "  return w2c_f12(instance, w2c_i0);",
            "  w2c_i0 = w2c_f12(instance, w2c_i0); w2c_i1 = 1;",
            "  w2c_i0 = 1 + w2c_f12(instance, w2c_i0);",
            "  w2c_i0 = i32_load(&instance->w2c_memory, w2c_f12(instance, w2c_i0));",
        ] {
            let src = BODY.replace("  w2c_f13(instance);", bad);
            let e = memory_in_locals(&src).unwrap_err();
            assert!(e.contains("not a statement of its own"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_runner_entry_is_copied_for_each_compiled_program() {
        let m = "[[program]]\nname = \"sh\"\n\n[[program]]\nname = \"wasi\"\ncaps = [\"console\", \"files\"]\nio = [\"0x70-0x71\"]\npages = 32768\nprincipal = 2\nstart = false\n";
        let aot = [("demo-0123".to_string(), PathBuf::new()), ("sh".to_string(), PathBuf::new())];
        let out = with_aot_entries(m, &aot).unwrap();
        let progs = manifest::parse(&out).unwrap();
        assert_eq!(progs.len(), 3, "one added; `sh` keeps its own entry");
        let d = progs.iter().find(|p| p.name == "demo-0123").unwrap();
        let w = progs.iter().find(|p| p.name == "wasi").unwrap();
        assert_eq!((&d.caps, &d.io, d.pages, d.principal, d.start), (&w.caps, &w.io, w.pages, w.principal, false));
        // No `wasi` entry: nothing added.
        assert_eq!(with_aot_entries("[[program]]\nname = \"sh\"\n", &aot).unwrap(), "[[program]]\nname = \"sh\"\n");
        assert_eq!(expand_aot("run ${AOT:demo} x ${AOT:sql}", &["demo-0123".into()]), "run demo-0123 x ${AOT:sql}");
    }
}
