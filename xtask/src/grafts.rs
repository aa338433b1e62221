//! The example grafts (`crates/graft-examples`), built for every technology into graft
//! files in `target/grafts/` (`<point>_<technology>_<name>.graft`): safe Rust compiled to
//! WebAssembly (`wasm/`, the same source, `src/`, as the native built-ins), C compiled to
//! eBPF by clang (`bpf/`), rhai scripts (`rhai/`), and the native built-ins by name. The
//! toolchains the builds need (the `wasm32-unknown-unknown` Rust target, clang and LLVM's
//! objcopy) are installed here when missing, as QEMU is.

use std::path::{Path, PathBuf};
use std::process::Command;

use graft::format::{GraftFile, Tech};
use graft::Point;

use crate::{project_root, sh, target_dir};

const WASM_TARGET: &str = "wasm32-unknown-unknown";

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

pub fn file_name(point: Point, tech: Tech, name: &str) -> String {
    format!("{}_{}_{}.graft", point.name(), tech.name(), name)
}

fn which(names: &[&str]) -> Option<String> {
    names
        .iter()
        .find(|n| Command::new(n).arg("--version").output().is_ok_and(|o| o.status.success()))
        .map(|n| n.to_string())
}

/// clang (for `-target bpf`) and llvm-objcopy, installed from Debian's packages if
/// missing. Returns their names.
fn ensure_clang() -> Result<(String, String), String> {
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

fn ensure_wasm_target() -> Result<(), String> {
    let out =
        Command::new("rustup").args(["target", "list", "--installed"]).output().map_err(|e| format!("rustup: {e}"))?;
    if String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == WASM_TARGET) {
        return Ok(());
    }
    eprintln!("xtask: adding the Rust target {WASM_TARGET}");
    sh(Command::new("rustup").args(["target", "add", WASM_TARGET]))
}

fn write(out: &Path, point: Point, tech: Tech, name: &str, state_len: usize, code: &[u8]) -> Result<PathBuf, String> {
    let bytes = GraftFile { point, tech, state_len, name, code, sig: &[] }.to_bytes();
    GraftFile::parse(&bytes).map_err(|e| format!("graft {name}: {}", e.what()))?;
    let p = out.join(file_name(point, tech, name));
    std::fs::write(&p, bytes).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(p)
}

/// Where the example grafts' sources are, from the project's root: every technology's
/// (`src/` the safe Rust of native, signed and WebAssembly; `wasm/`, `signed/`, `sfi/` the
/// harnesses that build it; `bpf/`, `rhai/`).
const SOURCES: &str = "crates/graft-examples";

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
            let (o, bin) = (obj.join(format!("{name}.o")), obj.join(format!("{name}.bin")));
            sh(Command::new(&clang).args(["-O2", "-fno-builtin", "-target", "bpf", "-c"]).arg(&c).arg("-o").arg(&o))?;
            sh(Command::new(&objcopy).args(["-O", "binary", "--only-section=scion_graft"]).arg(&o).arg(&bin))?;
            // A graft is one function and no data: a relocation (a global, a map)
            // would be a hole in the code that nothing fills.
            let rel = Command::new(&objcopy)
                .args(["--dump-section", ".relscion_graft=/dev/null"])
                .arg(&o)
                .arg(obj.join("rel.tmp"))
                .output()
                .map_err(|e| e.to_string())?;
            if rel.status.success() {
                return Err(format!(
                    "{}: the eBPF graft has relocations (globals or maps are not allowed)",
                    c.display()
                ));
            }
            let code = std::fs::read(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;
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
    files.extend(build_signed(&out, &obj)?);
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

/// wasm2c (WABT), installed from Debian's `wabt` package if missing. Returns its name.
fn ensure_wasm2c() -> Result<String, String> {
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

/// The compiler's settings for a compiled WebAssembly graft: freestanding x86-64, general
/// registers only (the servers are soft-float: a module with a float does not compile),
/// position-independent with hidden symbols (no GOT: every reference relative), no red
/// zone, no stack protector or unwind tables, each frame at most 256 bytes (with the
/// harness's call-depth limit, `crates/graft-examples/sfi/include/wasm-rt.h`, that bounds the server
/// stack a graft may take: 64 frames, 16 KiB).
const SFI_CFLAGS: [&str; 18] = [
    "--target=x86_64-unknown-none-elf",
    "-O2",
    "-ffreestanding",
    "-nostdlibinc",
    "-fpie",
    "-fvisibility=hidden",
    "-mgeneral-regs-only",
    "-mno-red-zone",
    "-fomit-frame-pointer",
    "-fno-stack-protector",
    "-fno-asynchronous-unwind-tables",
    "-fno-unwind-tables",
    "-ffunction-sections",
    "-fdata-sections",
    "-Wframe-larger-than=256",
    "-Werror=frame-larger-than",
    "-Werror=implicit-function-declaration",
    "-Wno-unused-function",
];

/// A WebAssembly module as a compiled graft's code field (`graft::sfi`): translated to C
/// by wasm2c, compiled by clang with Scion's harness (`crates/graft-examples/sfi`) as one translation
/// unit, linked by rust-lld into one position-independent image at 0 — code and
/// read-only data first, the harness's writable data from the next page — and checked:
/// no relocation but relative ones, nothing undefined (a float or a table has nothing to
/// link to: refused).
fn sfi_image(wasm2c: &str, clang: &str, wasm: &Path, dir: &Path) -> Result<Vec<u8>, String> {
    let root = project_root();
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let c = dir.join("graft.c");
    sh(Command::new(wasm2c).args(["--no-debug-names", "-n", "graft"]).arg(wasm).arg("-o").arg(&c))?;
    // The generated loads end with an empty `asm` that takes the loaded value in a
    // register, which keeps the compiler from hoisting the memory's place and size out of
    // a loop; with no floating point it guards nothing here.
    let src = std::fs::read_to_string(&c).map_err(|e| e.to_string())?;
    let barrier = "wasm_asm(\"\" ::\"r\"(result));";
    if !src.contains(barrier) {
        return Err("wasm2c's output is not the expected 1.0.32 form".into());
    }
    std::fs::write(&c, sfi_patch(&src.replace(barrier, ""))?).map_err(|e| e.to_string())?;
    let sfi = root.join(SOURCES).join("sfi");
    let o = dir.join("image.o");
    let out = Command::new(clang)
        .args(SFI_CFLAGS)
        .arg("-I")
        .arg(sfi.join("include"))
        .arg("-I")
        .arg(dir)
        .arg("-c")
        .arg(sfi.join("harness.c"))
        .arg("-o")
        .arg(&o)
        .output()
        .map_err(|e| format!("{clang}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "clang refused it (a float, or what the harness lacks): {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let lld = rust_lld()?;
    let elf = dir.join("image.elf");
    let link = Command::new(&lld)
        .args([
            "-flavor",
            "gnu",
            "-pie",
            "--no-dynamic-linker",
            "--gc-sections",
            "-z",
            "norelro",
            "-z",
            "max-page-size=4096",
            "-e",
            "scion_sfi_run",
            "-T",
        ])
        .arg(sfi.join("image.ld"))
        .arg(&o)
        .arg("-o")
        .arg(&elf)
        .output()
        .map_err(|e| format!("{}: {e}", lld.display()))?;
    if !link.status.success() {
        return Err(format!(
            "it does not link (a float or a table has nothing to link to): {}",
            String::from_utf8_lossy(&link.stderr)
        ));
    }
    sfi_code(&std::fs::read(&elf).map_err(|e| e.to_string())?)
}

/// Scion's changes to wasm2c's output (1.0.32's form, checked): every store to linear
/// memory, and the bulk memory operations, mark the call as one that wrote
/// (`scion_sfi_wrote`: a call that did not leaves the state as it was, and the server
/// keeps its undo copy); and the bounds check of a load or store is written as
/// `address > size - width` in signed 64-bit arithmetic — the same test as wasm2c's
/// `address + width > size` (an address is below 2^33, a size below 2^63; a memory
/// smaller than the width makes the right side negative: every access traps), in the
/// form the compiler hoists the subtraction of out of a loop.
fn sfi_patch(src: &str) -> Result<String, String> {
    let mut src = src.to_string();
    for (old, new) in [
        ("wasm_rt_memcpy(&mem->data[addr], &wrapped, sizeof(t1));", "SCION_SFI_WROTE(); wasm_rt_memcpy(&mem->data[addr], &wrapped, sizeof(t1));"),
        ("  memset(mem->data + d, val, n);", "  SCION_SFI_WROTE();\n  memset(mem->data + d, val, n);"),
        ("  memmove(dest->data + dest_addr, src->data + src_addr, n);", "  SCION_SFI_WROTE();\n  memmove(dest->data + dest_addr, src->data + src_addr, n);"),
        ("  LOAD_DATA((*dest), dest_addr, src + src_addr, n);", "  SCION_SFI_WROTE();\n  LOAD_DATA((*dest), dest_addr, src + src_addr, n);"),
        ("#define MEMCHECK(mem, a, t) RANGE_CHECK(mem, a, sizeof(t))", "#define MEMCHECK(mem, a, t) \\\n  if (UNLIKELY((int64_t)(a) > (int64_t)((mem)->size - sizeof(t)))) TRAP(OOB);"),
    ] {
        if src.matches(old).count() != 1 {
            return Err(format!("wasm2c's output is not the expected 1.0.32 form ({old})"));
        }
        src = src.replace(old, new);
    }
    Ok(src)
}

/// A linked compiled graft as its code field: every loaded segment laid out from address
/// 0, the read-only ones below the first writable one (which starts a page), the entries
/// by name, relative relocations only.
fn sfi_code(elf: &[u8]) -> Result<Vec<u8>, String> {
    use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, Rela, SectionHeader, Sym};
    use object::{elf, Endianness};
    let f = ElfFile64::<Endianness>::parse(elf).map_err(|e| e.to_string())?;
    let (hdr, end) = (f.elf_header(), f.endian());
    let (mut image, mut size, mut text, mut ro_end) = (Vec::new(), 0usize, usize::MAX, 0usize);
    for ph in hdr.program_headers(end, elf).map_err(|e| e.to_string())? {
        if ph.p_type(end) != elf::PT_LOAD {
            continue;
        }
        let (va, filesz, memsz) = (ph.p_vaddr(end) as usize, ph.p_filesz(end) as usize, ph.p_memsz(end) as usize);
        if ph.p_flags(end) & elf::PF_W != 0 {
            text = text.min(va);
        } else {
            ro_end = ro_end.max(va + memsz);
        }
        let data = ph.data(end, elf).map_err(|_| "a segment past the file")?;
        if image.len() < va + filesz {
            image.resize(va + filesz, 0);
        }
        image[va..va + filesz].copy_from_slice(&data[..filesz]);
        size = size.max(va + memsz);
    }
    let text = if text == usize::MAX { size.div_ceil(4096) * 4096 } else { text };
    if !text.is_multiple_of(4096) || ro_end > text {
        return Err(format!(
            "its writable data (from {text:#x}) does not start a page after the code (to {ro_end:#x})"
        ));
    }
    let mut relocs = Vec::new();
    let mut entries = [None, None];
    let sections = hdr.sections(end, elf).map_err(|e| e.to_string())?;
    for s in sections.iter() {
        if let Some((rels, _)) = s.rela(end, elf).map_err(|e| e.to_string())? {
            for r in rels {
                if r.r_type(end, false) != elf::R_X86_64_RELATIVE {
                    return Err(format!(
                        "a relocation of type {} (only relative ones are applied)",
                        r.r_type(end, false)
                    ));
                }
                let at = r.r_offset(end) as usize;
                if !at.is_multiple_of(8) || at + 8 > image.len() {
                    return Err(format!("a relocation at {at:#x} outside the image"));
                }
                image[at..at + 8].copy_from_slice(&(r.r_addend(end) as u64).to_le_bytes());
                relocs.push(at);
            }
        }
    }
    let symbols = sections.symbols(end, elf, elf::SHT_SYMTAB).map_err(|e| e.to_string())?;
    for sym in symbols.iter() {
        let name = symbols.symbol_name(end, sym).unwrap_or(b"");
        for (k, want) in [&b"scion_sfi_init"[..], b"scion_sfi_run"].into_iter().enumerate() {
            if name == want {
                entries[k] = Some(sym.st_value(end) as usize);
            }
        }
    }
    let (Some(init), Some(run)) = (entries[0], entries[1]) else { return Err("an entry is missing".into()) };
    let code = graft::sfi::code(init, run, text, size, &relocs, &image);
    graft::sfi::parse(&code).map_err(|e| e.what().to_string())?;
    Ok(code)
}

/// A graft file signed with the build's key.
fn write_signed(
    out: &Path,
    point: Point,
    tech: Tech,
    name: &str,
    state_len: usize,
    code: &[u8],
    seed: &[u8; 32],
) -> Result<PathBuf, String> {
    let f = GraftFile { point, tech, state_len, name, code, sig: &[] };
    let sig = graft::signed::sign(&f, seed);
    let bytes = GraftFile { sig: &sig, ..f }.to_bytes();
    GraftFile::parse(&bytes).map_err(|e| format!("graft {name}: {}", e.what()))?;
    let path = out.join(file_name(point, tech, name));
    std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// The build's signing key for signed grafts: a seed of 32 random bytes in
/// `target/graft-signing-key`, made on the first build. Servers built by xtask check
/// signatures against its public key (`SCION_GRAFT_KEY`, hex, baked in at build time).
pub fn signing_seed() -> Result<[u8; 32], String> {
    let path = target_dir().join("graft-signing-key");
    if let Ok(b) = std::fs::read(&path) {
        if let Ok(seed) = <[u8; 32]>::try_from(&b[..]) {
            return Ok(seed);
        }
    }
    let mut seed = [0u8; 32];
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut seed))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    std::fs::create_dir_all(target_dir()).map_err(|e| e.to_string())?;
    std::fs::write(&path, seed).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(seed)
}

/// The public key servers are built with (hex).
pub fn public_key_hex() -> Result<String, String> {
    Ok(graft::signed::public_key(&signing_seed()?).iter().map(|b| format!("{b:02x}")).collect())
}

/// The grafts of `crates/graft-examples/src` as signed safe Rust: `signed/` there (Scion's harness
/// around them) compiled for x86_64-unknown-none into a static library, each entry linked
/// alone into a position-independent image at 0 with rust-lld (so a graft with a path to
/// a panic fails to link: the harness's panic handler calls a function that does not
/// exist), checked — no writable data, no relocations but relative ones (the server
/// adds its load address) — and signed.
fn build_signed(out: &Path, obj: &Path) -> Result<Vec<PathBuf>, String> {
    let root = project_root();
    let lib_dir = target_dir().join("grafts-signed");
    sh(Command::new(env!("CARGO"))
        .current_dir(root.join(SOURCES).join("signed"))
        .env("CARGO_TARGET_DIR", &lib_dir)
        .env("RUSTFLAGS", "-C relocation-model=pie")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .args(["build", "-q", "--release", "--target", "x86_64-unknown-none"]))?;
    signed_sources_allowed(&root)?;
    let lib = lib_dir.join("x86_64-unknown-none/release/libscion_signed_grafts.a");
    let lld = rust_lld()?;
    let script = obj.join("signed.ld");
    std::fs::write(&script, "SECTIONS {\n  . = 0;\n  .text : { *(.text .text.*) }\n  .rodata : { *(.rodata .rodata.*) }\n  .data : { *(.data .data.*) }\n  .bss : { *(.bss .bss.*) }\n  /DISCARD/ : { *(.comment) *(.eh_frame*) *(.note*) }\n}\n").map_err(|e| e.to_string())?;
    let seed = signing_seed()?;
    let mut files = Vec::new();
    // The built-ins, and one hostile signed graft: `spin`, which never returns.
    for (name, point, state) in EXAMPLES.iter().filter(|e| NATIVE.contains(&e.0)).chain(&[("spin", Point::Evict, 8)]) {
        let elf = obj.join(format!("signed_{name}.elf"));
        let link = Command::new(&lld)
            .args([
                "-flavor",
                "gnu",
                "-pie",
                "--no-dynamic-linker",
                "--gc-sections",
                "-e",
                &format!("scion_graft_{name}"),
                "-T",
            ])
            .arg(&script)
            .arg(&lib)
            .arg("-o")
            .arg(&elf)
            .output()
            .map_err(|e| format!("{}: {e}", lld.display()))?;
        if !link.status.success() {
            let why = String::from_utf8_lossy(&link.stderr);
            if why.contains("scion_signed_graft_can_panic") {
                return Err(format!(
                    "signed graft {name}: it can panic (a path to a panic is left), so it is not signed"
                ));
            }
            return Err(format!("signed graft {name}: rust-lld: {why}"));
        }
        let bytes = std::fs::read(&elf).map_err(|e| e.to_string())?;
        let (entry, relocs, image) = flat_image(&bytes).map_err(|e| format!("signed graft {name}: {e}"))?;
        let code = graft::signed::code(entry, &relocs, &image);
        files.push(write_signed(out, *point, Tech::SignedRust, name, *state, &code, &seed)?);
    }
    Ok(files)
}

/// What a signed graft may be built from: the harness and crates on `SIGNED_ALLOWED`,
/// each graft crate `forbid(unsafe_code)` (the harness is Scion's and holds the one
/// `unsafe` that makes the slices). The build refuses to sign anything else.
const SIGNED_ALLOWED: [(&str, &str); 1] = [("graft-examples", "crates/graft-examples/src/lib.rs")];

fn signed_sources_allowed(root: &Path) -> Result<(), String> {
    let path = root.join(SOURCES).join("signed/Cargo.lock");
    let lock = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    for name in lock.lines().filter_map(|l| l.strip_prefix("name = \"")).map(|n| n.trim_end_matches('"')) {
        if name != "scion-signed-grafts" && !SIGNED_ALLOWED.iter().any(|(a, _)| *a == name) {
            return Err(format!(
                "signed grafts: crate `{name}` is not on the allowed list (xtask/src/grafts.rs SIGNED_ALLOWED)"
            ));
        }
    }
    for (name, lib) in SIGNED_ALLOWED {
        let src = std::fs::read_to_string(root.join(lib)).map_err(|e| format!("{lib}: {e}"))?;
        if !src.lines().any(|l| l.trim() == "#![forbid(unsafe_code)]") {
            return Err(format!("signed grafts: crate `{name}` ({lib}) does not forbid unsafe code"));
        }
    }
    Ok(())
}

/// A linked signed graft as the server loads it: (entry, relocations, the image from
/// address 0) — each relocation the offset of a u64 of the image to which the load
/// address is added (R_X86_64_RELATIVE, its addend put there). Refuses writable data and
/// any other relocation.
fn flat_image(elf: &[u8]) -> Result<(usize, Vec<usize>, Vec<u8>), String> {
    use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, Rela, SectionHeader};
    use object::{elf, Endianness};
    let f = ElfFile64::<Endianness>::parse(elf).map_err(|e| e.to_string())?;
    let (hdr, end) = (f.elf_header(), f.endian());
    let mut image: Vec<u8> = Vec::new();
    for ph in hdr.program_headers(end, elf).map_err(|e| e.to_string())? {
        if ph.p_type(end) != elf::PT_LOAD {
            continue;
        }
        let (va, filesz, memsz) = (ph.p_vaddr(end) as usize, ph.p_filesz(end) as usize, ph.p_memsz(end) as usize);
        let data = ph.data(end, elf).map_err(|_| "a segment past the file")?;
        if image.len() < va + memsz {
            image.resize(va + memsz, 0);
        }
        image[va..va + filesz].copy_from_slice(&data[..filesz]);
    }
    let mut relocs: Vec<usize> = Vec::new();
    let sections = hdr.sections(end, elf).map_err(|e| e.to_string())?;
    for s in sections.iter() {
        let name = String::from_utf8_lossy(sections.section_name(end, s).unwrap_or(b"")).to_string();
        if (name.starts_with(".data") || name.starts_with(".bss")) && s.sh_size(end) > 0 {
            return Err(format!("it has writable data ({name}): a graft may keep nothing but its state"));
        }
        if let Some((rels, _)) = s.rela(end, elf).map_err(|e| e.to_string())? {
            for r in rels {
                if r.r_type(end, false) != elf::R_X86_64_RELATIVE {
                    return Err(format!(
                        "a relocation of type {} (only relative ones are applied)",
                        r.r_type(end, false)
                    ));
                }
                let at = r.r_offset(end) as usize;
                let addend = r.r_addend(end) as u64;
                if !at.is_multiple_of(8) || at + 8 > image.len() {
                    return Err(format!("a relocation at {at:#x} outside the image"));
                }
                image[at..at + 8].copy_from_slice(&addend.to_le_bytes());
                relocs.push(at);
            }
        }
    }
    let entry = hdr.e_entry(end) as usize;
    if entry >= image.len() {
        return Err("the entry lies outside the image".into());
    }
    Ok((entry, relocs, image))
}

/// The instructions of the MD5 XDP program the Linux guest runs (`bench/linux/graft.c`).
pub fn xdp_md5() -> PathBuf {
    target_dir().join("grafts-obj").join("md5_xdp.bin")
}

/// The toolchain's rust-lld (it links the SFI and signed images), asked of rustc once.
fn rust_lld() -> Result<PathBuf, String> {
    static LLD: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    LLD.get_or_init(|| {
        let sysroot = Command::new("rustc").args(["--print", "sysroot"]).output().map_err(|e| format!("rustc: {e}"))?;
        Ok(PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim())
            .join("lib/rustlib/x86_64-unknown-linux-gnu/bin/rust-lld"))
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use graft::engine::Abort;
    use graft::{LoadError, Table};
    use std::sync::OnceLock;

    fn built() -> &'static Vec<PathBuf> {
        static B: OnceLock<Vec<PathBuf>> = OnceLock::new();
        B.get_or_init(|| build().expect("building the example grafts"))
    }

    fn file(tech: Tech, name: &str) -> Vec<u8> {
        file_at(Point::Evict, tech, name)
    }

    fn file_at(point: Point, tech: Tech, name: &str) -> Vec<u8> {
        let _ = built();
        std::fs::read(dir().join(file_name(point, tech, name))).unwrap_or_else(|e| panic!("{tech:?} {name}: {e}"))
    }

    fn load(t: &mut Table, owner: u32, bytes: &[u8]) -> Result<u32, LoadError> {
        for (k, piece) in bytes.chunks(2048).enumerate() {
            t.put(owner as u64, k * 2048, piece)?;
        }
        t.load(owner, owner as u64, bytes.len(), &mut compiled)
    }

    /// The engines the servers build with their key: compiled WebAssembly, the very image a
    /// server runs, here in the host's memory (`graft::sfi::host`).
    fn compiled(f: &GraftFile<'_>) -> Option<Result<Box<dyn graft::Engine>, LoadError>> {
        let key = graft::signed::public_key(&signing_seed().ok()?);
        (f.tech == Tech::WasmAot).then(|| graft::sfi::host::load(f, &key, graft::engine::Limits::default()))
    }

    fn hot_state(hot: &[u64]) -> Vec<u8> {
        let mut s = vec![0u8; graft_examples::HOT_STATE];
        s[..8].copy_from_slice(&(hot.len() as u64).to_le_bytes());
        for (k, b) in hot.iter().enumerate() {
            s[8 + 8 * k..16 + 8 * k].copy_from_slice(&b.to_le_bytes());
        }
        s
    }

    /// Each server with graft points (those that link graft-host) names graft's one
    /// feature set, `server`, and nothing else; and `server` holds every technology's
    /// feature (each engine and each check of a compiled file).
    #[test]
    fn servers_name_the_server_feature_alone() {
        let root = project_root();
        let toml_at = |p: &Path| -> toml::Table {
            toml::from_str(&std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        };
        let mut hosts = Vec::new();
        for e in std::fs::read_dir(root.join("user/servers")).unwrap() {
            let path = e.unwrap().path().join("Cargo.toml");
            let t = toml_at(&path);
            let deps = t["dependencies"].as_table().unwrap();
            if !deps.contains_key("graft-host") {
                continue;
            }
            let features = deps.get("graft").and_then(|g| g.get("features")).and_then(|f| f.as_array());
            let names: Vec<&str> = features.into_iter().flatten().filter_map(|f| f.as_str()).collect();
            assert_eq!(names, ["server"], "{}: graft's features", path.display());
            hosts.push(path);
        }
        assert!(hosts.len() >= 4, "cache, blk, net and mem have graft points: {hosts:?}");
        let graft = toml_at(&root.join("crates/graft/Cargo.toml"));
        let server: Vec<&str> =
            graft["features"]["server"].as_array().unwrap().iter().filter_map(|f| f.as_str()).collect();
        for f in ["wasmi", "ebpf", "jit", "script", "signed", "sfi"] {
            assert!(server.contains(&f), "feature `server` lacks `{f}`: {server:?}");
        }
    }

    /// Every technology the host runs: `Tech::ALL` but signed Rust (its blobs run in a
    /// server's code pages alone) and the upcall (a thread of the loader's).
    fn host_techs() -> impl Iterator<Item = Tech> {
        Tech::ALL.into_iter().filter(|t| !matches!(t, Tech::SignedRust | Tech::Upcall))
    }

    /// Graft `name` at `point` in every technology the host runs, owner k + 1 for the
    /// k-th: (technology, owner, id).
    fn load_every(t: &mut Table, point: Point, name: &str) -> Vec<(Tech, u32, u32)> {
        host_techs()
            .enumerate()
            .map(|(k, tech)| {
                (
                    tech,
                    k as u32 + 1,
                    load(t, k as u32 + 1, &file_at(point, tech, name)).unwrap_or_else(|e| panic!("{tech:?}: {e:?}")),
                )
            })
            .collect()
    }

    /// The host the tests run grafts with: each graft's memory counted (the servers'
    /// arenas' part), panics caught.
    fn host() -> Box<dyn graft::Host> {
        graft::engine::warm_up();
        Box::new(graft::host::counting::CountingHost { clock: || 0 })
    }

    /// Every technology gives the native graft's answer on the same inputs.
    #[test]
    fn every_technology_answers_as_native_does() {
        let mut x = 0x2545f4914f6cdd1du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut t = Table::new(&[Point::Evict], 0, host());
        let ids = load_every(&mut t, Point::Evict, "hotlist");
        for round in 0..400 {
            let hot: Vec<u64> = (0..rnd() % 65).map(|_| rnd() % 96).collect();
            let cands: Vec<u64> = (0..1 + rnd() % 8).map(|_| rnd() % 96).collect();
            let input: Vec<u8> = cands.iter().flat_map(|b| b.to_le_bytes()).collect();
            let mut st = hot_state(&hot);
            let want = graft_examples::hotlist(&input, &mut st);
            for (tech, owner, id) in &ids {
                t.get(*owner, *id).unwrap().write_state(0, &hot_state(&hot)).unwrap();
                assert_eq!(
                    t.call(Point::Evict, *owner, &input),
                    Some(want),
                    "{tech:?}, round {round}: hot {hot:?} candidates {cands:?}"
                );
            }
        }
        for (tech, owner, id) in &ids {
            let g = t.get(*owner, *id).unwrap();
            assert_eq!((g.stats.calls, g.stats.aborts), (400, 0), "{tech:?}");
        }
    }

    /// MD5 in every technology, over random streams of whole blocks in pieces of up to
    /// 1 KiB and a ragged tail: the native graft's digest (itself checked against
    /// RFC 1321's test suite in `graft-examples`).
    #[test]
    fn every_technology_fingerprints_as_native_does() {
        let mut t = Table::new(&[Point::Stream], 0, host());
        let ids = load_every(&mut t, Point::Stream, "md5");
        let mut x = 0x9e3779b97f4a7c15u64;
        for round in 0..12 {
            let blocks = (round * 7) % 40;
            let tail = (round * 13) % 64;
            let data: Vec<u8> = (0..blocks * 64 + tail)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let mut want = [0u8; graft_examples::MD5_STATE];
            let whole = blocks * 64;
            let pieces: Vec<&[u8]> = data[..whole].chunks(1024).chain([&data[whole..]]).collect();
            for p in &pieces {
                assert_eq!(graft_examples::md5(p, &mut want), 0);
            }
            for (tech, owner, id) in &ids {
                t.get(*owner, *id).unwrap().write_state(0, &[0u8; graft_examples::MD5_STATE]).unwrap();
                for p in &pieces {
                    assert_eq!(t.call(Point::Stream, *owner, p), Some(0), "{tech:?} round {round}");
                }
                let mut got = [0u8; 16];
                t.get(*owner, *id).unwrap().read_state(0, &mut got);
                assert_eq!(got, want[..16], "{tech:?}: digest of {} bytes", data.len());
            }
        }
    }

    /// The logical disk in every technology: on random reads and writes over a
    /// random-sized segment, the same physical blocks as native, and the same state.
    #[test]
    fn every_technology_maps_blocks_as_native_does() {
        let mut t = Table::new(&[Point::Ldisk], 0, host());
        let ids = load_every(&mut t, Point::Ldisk, "ldisk");
        let mut want = vec![0u8; graft_examples::LD_STATE];
        let mut x = 0x51_7cc1_b727_220au64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let blocks = 300u64;
        for round in 0..600 {
            let (l, write) = (rnd() % 200, rnd() % 3 != 0);
            let mut input = [0u8; 24];
            input[..8].copy_from_slice(&l.to_le_bytes());
            input[8..16].copy_from_slice(&blocks.to_le_bytes());
            input[16] = write as u8;
            let expect = graft_examples::ldisk(&input, &mut want);
            for (tech, owner, _) in &ids {
                assert_eq!(
                    t.call(Point::Ldisk, *owner, &input),
                    Some(expect),
                    "{tech:?}, round {round}: block {l}, write {write}"
                );
            }
        }
        for (tech, owner, id) in &ids {
            let mut got = vec![0u8; graft_examples::LD_STATE];
            t.get(*owner, *id).unwrap().read_state(0, &mut got);
            assert!(got == want, "{tech:?}: the same map and bitmap");
        }
    }

    /// Hostile grafts are refused at load or aborted per call; an aborted call leaves
    /// the state as it was; three in a row unload the graft; another owner's graft
    /// keeps answering.
    #[test]
    fn hostile_grafts_are_refused_or_aborted() {
        let expect: [(Tech, &str, Result<Abort, &str>); 12] = [
            (Tech::Wasmi, "spin", Ok(Abort::Budget)),
            (Tech::Wasmi, "oob", Ok(Abort::Memory)),
            (Tech::Wasmi, "hog", Ok(Abort::Memory)),
            (Tech::Wasmi, "liar", Ok(Abort::BadAnswer)),
            (Tech::Wasmi, "trap", Ok(Abort::Trap)),
            (Tech::Ebpf, "spin", Err("a loop")),
            (Tech::Ebpf, "helper", Err("helper")),
            (Tech::Ebpf, "oob", Err("unbounded")),
            (Tech::Ebpf, "liar", Ok(Abort::BadAnswer)),
            (Tech::Script, "spin", Ok(Abort::Budget)),
            (Tech::Script, "oob", Ok(Abort::Trap)),
            (Tech::Script, "hog", Ok(Abort::Memory)),
        ];
        // Compiled WebAssembly's `spin` is stopped by the servers' watchdog (graft_test);
        // the host has none.
        let more: [(Tech, &str, Result<Abort, &str>); 11] = [
            (Tech::WasmAot, "oob", Ok(Abort::Memory)),
            (Tech::WasmAot, "hog", Ok(Abort::Memory)),
            (Tech::WasmAot, "liar", Ok(Abort::BadAnswer)),
            (Tech::WasmAot, "trap", Ok(Abort::Trap)),
            (Tech::Script, "liar", Ok(Abort::BadAnswer)),
            (Tech::Script, "trap", Ok(Abort::Trap)),
            (Tech::Script, "shrink", Ok(Abort::Trap)),
            (Tech::Ebpf, "negx", Err("does not implement")),
            (Tech::Ebpf, "leak", Err("only in the stack")),
            (Tech::Script, "keys", Ok(Abort::Memory)),
            (Tech::Script, "curry", Ok(Abort::Memory)),
        ];
        let input: Vec<u8> = [3u64, 4, 5].iter().flat_map(|b| b.to_le_bytes()).collect();
        for (tech, name, want) in expect.into_iter().chain(more) {
            let mut t = Table::new(&[Point::Evict], 0, host());
            let good = load(&mut t, 9, &file(Tech::Wasmi, "hotlist")).unwrap();
            t.get(9, good).unwrap().write_state(0, &hot_state(&[3])).unwrap();
            match (load(&mut t, 1, &file(tech, name)), want) {
                (Err(LoadError::Refused(why)), Err(w)) => {
                    assert!(why.contains(w), "{tech:?} {name}: refused for {why:?}, want {w:?}")
                }
                (Ok(id), Ok(abort)) => {
                    let g = t.get(1, id).unwrap();
                    let n = g.read_state(0, &mut [0u8; 0]);
                    assert_eq!(n, 0);
                    let marker: Vec<u8> = (0..8u8).map(|k| k + 1).collect();
                    g.write_state(0, &marker).unwrap();
                    for k in 0..3 {
                        let g = t.get(1, id).unwrap_or_else(|| panic!("{tech:?} {name}: unloaded after {k} aborts"));
                        let r = g.call(&input, &mut graft::host::counting::CountingHost { clock: || 0 });
                        assert_eq!(r, Err(abort), "{tech:?} {name}, call {k}");
                        let mut s = [0u8; 8];
                        g.read_state(0, &mut s);
                        assert_eq!(&s[..], &marker[..], "{tech:?} {name}: the aborted call's changes are undone");
                        // The other owner's graft is untouched.
                        assert_eq!(t.call(Point::Evict, 9, &input), Some(1), "{tech:?} {name}");
                    }
                    assert!(t.get(1, id).unwrap().dead(), "{tech:?} {name}: dead after three aborts");
                    assert_eq!(t.call(Point::Evict, 1, &input), None);
                    assert!(t.get(1, id).is_none(), "{tech:?} {name}: unloaded");
                }
                (got, want) => panic!("{tech:?} {name}: got {got:?}, want {want:?}"),
            }
        }
    }

    /// A WebAssembly module written as text, compiled as the build compiles the examples:
    /// its signed graft file, or why the build refused it.
    fn compile_wat(name: &str, wat: &str) -> Result<Vec<u8>, String> {
        let _ = built();
        let dir = target_dir().join("grafts-obj").join(format!("test_{name}"));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let (src, wasm) = (dir.join("m.wat"), dir.join("m.wasm"));
        std::fs::write(&src, wat).map_err(|e| e.to_string())?;
        sh(Command::new("wat2wasm").arg(&src).arg("-o").arg(&wasm))?;
        let code = sfi_image(&ensure_wasm2c()?, &ensure_clang()?.0, &wasm, &dir)?;
        let f = GraftFile { point: Point::Evict, tech: Tech::WasmAot, state_len: 8, name, code: &code, sig: &[] };
        let sig = graft::signed::sign(&f, &signing_seed()?);
        Ok(GraftFile { sig: &sig, ..f }.to_bytes())
    }

    /// The exports every graft module has, around a `graft_run` of its own.
    fn module(run: &str) -> String {
        format!("(module (memory (export \"memory\") 1) (func (export \"graft_input\") (result i32) i32.const 1024) (func (export \"graft_state\") (result i32) i32.const 0) {run})")
    }

    /// Which interpreted modules store nothing (`graft::engine::wasm::writes_memory`, which
    /// lets the table keep its undo copy across their calls), against what wasmi does:
    /// each way of writing memory, run so that it writes the state, must be found, and a
    /// module found to store nothing never changes its state. The example hot list and
    /// null graft store nothing; MD5 and the logical disk do.
    #[test]
    fn interpreted_wasm_that_stores_nothing_is_found_exactly() {
        use graft::engine::wasm::writes_memory;
        let wasm = |name: &str, wat: &str| -> Vec<u8> {
            let dir = target_dir().join("grafts-obj").join(format!("test_wasmi_{name}"));
            std::fs::create_dir_all(&dir).unwrap();
            let (src, out) = (dir.join("m.wat"), dir.join("m.wasm"));
            std::fs::write(&src, wat).unwrap();
            sh(Command::new("wat2wasm").arg(&src).arg("-o").arg(&out)).unwrap();
            std::fs::read(&out).unwrap()
        };
        let stores = [
            ("i32_store", "i32.const 0 i32.const 7 i32.store"),
            ("i64_store", "i32.const 0 i64.const 7 i64.store"),
            ("f32_store", "i32.const 0 f32.const 7 f32.store"),
            ("f64_store", "i32.const 0 f64.const 7 f64.store"),
            ("i32_store8", "i32.const 0 i32.const 7 i32.store8"),
            ("i32_store16", "i32.const 0 i32.const 7 i32.store16"),
            ("i64_store8", "i32.const 0 i64.const 7 i64.store8"),
            ("i64_store16", "i32.const 0 i64.const 7 i64.store16"),
            ("i64_store32", "i32.const 0 i64.const 7 i64.store32"),
            ("memory_fill", "i32.const 0 i32.const 7 i32.const 8 memory.fill"),
            ("memory_copy", "i32.const 0 i32.const 1024 i32.const 8 memory.copy"),
            ("memory_init", "i32.const 0 i32.const 0 i32.const 8 memory.init $d"),
        ];
        let reads = [
            ("loads", "i32.const 0 i64.load i32.const 1024 i32.load8_u drop drop"),
            ("grow", "i32.const 1 memory.grow memory.size drop drop"),
            ("data_drop", "data.drop $d"),
        ];
        let all = stores.iter().map(|s| (s, true)).chain(reads.iter().map(|r| (r, false)));
        for ((name, body), writes) in all {
            let m = wasm(
                name,
                &format!("(module (memory (export \"memory\") 1) (data $d \"\\07\\07\\07\\07\\07\\07\\07\\07\") (func (export \"graft_input\") (result i32) i32.const 1024) (func (export \"graft_state\") (result i32) i32.const 0) (func (export \"graft_run\") (param i32) (result i64) {body} i64.const 0))"),
            );
            assert_eq!(writes_memory(&m), writes, "{name}");
            let f = GraftFile { point: Point::Evict, tech: Tech::Wasmi, state_len: 8, name, code: &m, sig: &[] };
            let mut e = graft::engine::build(&f, graft::engine::Limits::default()).unwrap_or_else(|_| panic!("{name}"));
            assert_eq!(e.notes_writes(), !writes, "{name}");
            assert_eq!(e.call(&[1; 8], 1 << 20), Ok(0), "{name}");
            assert_eq!(e.state() != [0u8; 8], writes, "{name}: the state changed exactly when it may");
        }
        for (name, writes) in [("hotlist", false), ("null", false)] {
            assert_eq!(writes_memory(GraftFile::parse(&file(Tech::Wasmi, name)).unwrap().code), writes, "{name}");
        }
        for (point, name) in [(Point::Stream, "md5"), (Point::Ldisk, "ldisk")] {
            assert!(writes_memory(GraftFile::parse(&file_at(point, Tech::Wasmi, name)).unwrap().code), "{name}");
        }
        assert!(writes_memory(b"not a module"), "what does not parse may write");
    }

    /// The servers are soft-float: a module with a float is refused by the build, and so
    /// is one with a table (the harness has none).
    #[test]
    fn compiled_wasm_with_a_float_or_a_table_is_refused() {
        let float = module("(func (export \"graft_run\") (param i32) (result i64) local.get 0 f32.convert_i32_u f32.const 1.5 f32.mul i64.trunc_f32_u)");
        let e = compile_wat("float", &float).expect_err("a float compiled");
        assert!(e.contains("clang refused") || e.contains("does not link"), "{e}");
        let table = module("(table 1 funcref) (type $t (func (result i64))) (func $z (result i64) i64.const 0) (elem (i32.const 0) $z) (func (export \"graft_run\") (param i32) (result i64) i32.const 0 call_indirect (type $t))");
        let e = compile_wat("table", &table).expect_err("a table compiled");
        assert!(e.contains("does not link"), "{e}");
        // The same module with integers only compiles.
        compile_wat(
            "int",
            &module("(func (export \"graft_run\") (param i32) (result i64) local.get 0 i64.extend_i32_u)"),
        )
        .unwrap();
    }

    /// The bounds check at every width is exact (Scion's form of it, `sfi_patch`): the
    /// last bytes of the memory load and store, one byte further traps as out of bounds
    /// (`Memory`), an offset past 4 GiB too, and a grown memory's new end is the bound;
    /// and a call says whether it stored (`wrote_state`: only a store did).
    #[test]
    fn compiled_wasm_bounds_are_exact_and_stores_noted() {
        let ops = module(
            "(func (export \"graft_run\") (param i32) (result i64) (local $a i32) (local $op i32)
             i32.const 1024 i32.load local.set $a i32.const 1028 i32.load local.set $op
             local.get $op i32.const 0 i32.eq if local.get $a i64.load drop end
             local.get $op i32.const 1 i32.eq if local.get $a i32.load drop end
             local.get $op i32.const 2 i32.eq if local.get $a i32.load8_u drop end
             local.get $op i32.const 3 i32.eq if local.get $a i64.const 5 i64.store end
             local.get $op i32.const 4 i32.eq if local.get $a i64.load offset=8 drop end
             local.get $op i32.const 5 i32.eq if i32.const 1 memory.grow drop end
             i64.const 0)",
        );
        let bytes = compile_wat("bounds", &ops).unwrap();
        let f = GraftFile::parse(&bytes).unwrap();
        let mut e = compiled(&f).unwrap().unwrap();
        let mut run = |a: u32, op: u32| {
            let mut input = [0u8; 16];
            input[..4].copy_from_slice(&a.to_le_bytes());
            input[4..8].copy_from_slice(&op.to_le_bytes());
            let (r, wrote) = e.call_noting(&input, 0);
            if r.is_err() {
                e.reset().unwrap();
            }
            (r, wrote)
        };
        const END: u32 = 65536;
        for (op, width) in [(0, 8), (1, 4), (2, 1), (3, 8)] {
            assert_eq!(run(END - width, op).0, Ok(0), "op {op}: the last {width} bytes");
            assert_eq!(run(END - width + 1, op).0, Err(Abort::Memory), "op {op}: one byte past the end");
            assert_eq!(run(u32::MAX, op).0, Err(Abort::Memory), "op {op}: at 4 GiB");
        }
        assert_eq!(run(END - 16, 4).0, Ok(0), "an offset to the last word");
        assert_eq!(run(END - 15, 4).0, Err(Abort::Memory), "an offset one byte past");
        assert_eq!(run(u32::MAX - 7, 4).0, Err(Abort::Memory), "an offset past 4 GiB");
        assert_eq!(run(0, 0), (Ok(0), false), "a load stores nothing");
        assert_eq!(run(0, 3), (Ok(0), true), "a store is noted");
        assert_eq!(run(0, 5).0, Ok(0), "grown by a page");
        assert_eq!(run(2 * END - 8, 3).0, Ok(0), "the grown memory's last word");
        assert_eq!(run(2 * END - 7, 0).0, Err(Abort::Memory), "past the grown memory");
    }

    /// A compiled graft that recurses without end traps at the harness's call depth (the
    /// server's stack is not its to take); one that grows its memory within its limit
    /// finds the new pages zeroed, past the limit the growth is refused.
    #[test]
    fn compiled_wasm_depth_and_growth_are_bounded() {
        let deep = module("(func $f (param i32) (result i64) local.get 0 i32.const 1 i32.add call $f) (func (export \"graft_run\") (param i32) (result i64) local.get 0 call $f)");
        let grow = module("(func (export \"graft_run\") (param i32) (result i64) (local $old i32) local.get 0 i32.const 3 i32.shr_u memory.grow local.set $old local.get $old i32.const -1 i32.eq if (result i64) i64.const 7 else memory.size i32.const 65536 i32.mul i32.const 8 i32.sub i64.load i64.const 0 i64.ne i64.extend_i32_u end)");
        let mut t = Table::new(&[Point::Evict], 0, host());
        let id = load(&mut t, 1, &compile_wat("deep", &deep).unwrap()).unwrap();
        t.get(1, id)
            .unwrap()
            .call(&[0; 8], &mut graft::host::counting::CountingHost { clock: || 0 })
            .expect_err("recursion without end");
        assert_eq!(t.get(1, id).unwrap().stats.last_abort, Some(Abort::Trap));
        let id = load(&mut t, 2, &compile_wat("grow", &grow).unwrap()).unwrap();
        // Candidates = pages to grow by; 1 MiB is the limit, 16 pages, one taken.
        let g = t.get(2, id).unwrap();
        let mut h = graft::host::counting::CountingHost { clock: || 0 };
        assert_eq!(g.call(&[0; 64], &mut h), Ok(0), "grown by 8 pages, the last word zero");
        assert_eq!(g.call(&[0; 56], &mut h), Ok(0), "grown by 7 more: 16 pages");
        assert_eq!(g.call(&[0; 8], &mut h), Err(Abort::BadAnswer), "a 17th page is refused (7: no candidate)");
    }
}
