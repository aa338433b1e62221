//! The example grafts (`grafts/`), built for every technology into graft files in
//! `target/grafts/` (`<point>_<technology>_<name>.graft`): safe Rust compiled to
//! WebAssembly (`grafts/wasm`, the same source as the native built-ins in
//! `crates/grafts`), C compiled to eBPF by clang (`grafts/bpf`), rhai scripts
//! (`grafts/rhai`), and the native built-ins by name. The toolchains the builds need
//! (the `wasm32-unknown-unknown` Rust target, clang and LLVM's objcopy) are installed
//! here when missing, as QEMU is.

use std::path::{Path, PathBuf};
use std::process::Command;

use graft::format::{GraftFile, Tech};
use graft::Point;

use crate::{project_root, sh, target_dir};

const WASM_TARGET: &str = "wasm32-unknown-unknown";

/// (name, point, state bytes): the example grafts, each in every technology that has it.
pub const EXAMPLES: [(&str, Point, usize); 13] = [
    ("null", Point::Evict, 0),
    ("hotlist", Point::Evict, grafts::HOT_STATE),
    ("md5", Point::Stream, grafts::MD5_STATE),
    ("ldisk", Point::Ldisk, grafts::LD_STATE),
    ("spin", Point::Evict, 8),
    ("oob", Point::Evict, 8),
    ("hog", Point::Evict, 8),
    ("liar", Point::Evict, grafts::HOT_STATE),
    ("trap", Point::Evict, grafts::HOT_STATE),
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
    names.iter().find(|n| Command::new(n).arg("--version").output().is_ok_and(|o| o.status.success())).map(|n| n.to_string())
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
        return Err(format!("clang and LLVM (for the example eBPF grafts) are missing; install them with: sudo sh -c '{install}'"));
    }
    eprintln!("xtask: installing clang and llvm from Debian's packages (for the eBPF grafts)");
    sh(Command::new("sh").args(["-c", &format!("DEBIAN_FRONTEND=noninteractive {install} >/dev/null")]))?;
    match find() {
        (Some(c), Some(o)) => Ok((c, o)),
        _ => Err("clang or llvm-objcopy still missing after installing clang and llvm".into()),
    }
}

fn ensure_wasm_target() -> Result<(), String> {
    let out = Command::new("rustup").args(["target", "list", "--installed"]).output().map_err(|e| format!("rustup: {e}"))?;
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

/// Build every example graft; returns the files written.
pub fn build() -> Result<Vec<PathBuf>, String> {
    let root = project_root();
    let out = dir();
    let obj = target_dir().join("grafts-obj");
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&obj).map_err(|e| e.to_string())?;
    let mut files = Vec::new();
    let src = |sub: &str, name: &str, ext: &str| root.join("grafts").join(sub).join(format!("{name}.{ext}"));

    // WebAssembly: every example of grafts/wasm, in one cargo build (cwd there, so
    // that its .cargo/config.toml applies).
    ensure_wasm_target()?;
    let wasm_target = target_dir().join("grafts-wasm");
    sh(Command::new(env!("CARGO"))
        .current_dir(root.join("grafts/wasm"))
        .env("CARGO_TARGET_DIR", &wasm_target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .args(["build", "-q", "--release", "--target", WASM_TARGET, "--examples"]))?;
    let (clang, objcopy) = ensure_clang()?;
    let seed = signing_seed()?;
    // WebAssembly compiled ahead of time: Cranelift, with the settings the servers' runtime
    // uses (`graft::aot::config`), for x86_64-unknown-none; signed, as the runtime trusts
    // the machine code it is given.
    let mut aot_config = graft::aot::config();
    aot_config.target(graft::aot::TARGET).map_err(|e| format!("wasmtime: {e}"))?;
    let aot = wasmtime::Engine::new(&aot_config).map_err(|e| format!("wasmtime: {e}"))?;
    for (name, point, state) in EXAMPLES {
        if NATIVE.contains(&name) {
            files.push(write(&out, point, Tech::Native, name, state, name.as_bytes())?);
        }
        let wasm = wasm_target.join(WASM_TARGET).join("release/examples").join(format!("{name}.wasm"));
        if let Ok(code) = std::fs::read(&wasm) {
            files.push(write(&out, point, Tech::Wasmi, name, state, &code)?);
            let compiled = aot.precompile_module(&code).map_err(|e| format!("{}: wasmtime: {e}", wasm.display()))?;
            files.push(write_signed(&out, point, Tech::WasmAot, name, state, &compiled, &seed)?);
        }
        let c = src("bpf", name, "c");
        if c.exists() {
            let (o, bin) = (obj.join(format!("{name}.o")), obj.join(format!("{name}.bin")));
            sh(Command::new(&clang).args(["-O2", "-fno-builtin", "-target", "bpf", "-c"]).arg(&c).arg("-o").arg(&o))?;
            sh(Command::new(&objcopy).args(["-O", "binary", "--only-section=scion_graft"]).arg(&o).arg(&bin))?;
            // A graft is one function and no data: a relocation (a global, a map)
            // would be a hole in the code that nothing fills.
            let rel = Command::new(&objcopy).args(["--dump-section", ".relscion_graft=/dev/null"]).arg(&o).arg(obj.join("rel.tmp")).output().map_err(|e| e.to_string())?;
            if rel.status.success() {
                return Err(format!("{}: the eBPF graft has relocations (globals or maps are not allowed)", c.display()));
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
    sh(Command::new(&clang).args(["-O2", "-fno-builtin", "-target", "bpf", "-c"]).arg(src("bpf", "md5_xdp", "c")).arg("-o").arg(&o))?;
    sh(Command::new(&objcopy).args(["-O", "binary", "--only-section=scion_graft"]).arg(&o).arg(&bin))?;
    Ok(files)
}

/// A graft file signed with the build's key.
fn write_signed(out: &Path, point: Point, tech: Tech, name: &str, state_len: usize, code: &[u8], seed: &[u8; 32]) -> Result<PathBuf, String> {
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
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut seed)).map_err(|e| format!("/dev/urandom: {e}"))?;
    std::fs::create_dir_all(target_dir()).map_err(|e| e.to_string())?;
    std::fs::write(&path, seed).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(seed)
}

/// The public key servers are built with (hex).
pub fn public_key_hex() -> Result<String, String> {
    Ok(graft::signed::public_key(&signing_seed()?).iter().map(|b| format!("{b:02x}")).collect())
}

/// The grafts of `crates/grafts` as signed safe Rust: `grafts/signed` (Scion's harness
/// around them) compiled for x86_64-unknown-none into a static library, each entry linked
/// alone into a position-independent image at 0 with rust-lld (so a graft with a path to
/// a panic fails to link: the harness's panic handler calls a function that does not
/// exist), checked — no writable data, no relocations but relative ones (the server
/// adds its load address) — and signed.
fn build_signed(out: &Path, obj: &Path) -> Result<Vec<PathBuf>, String> {
    let root = project_root();
    let lib_dir = target_dir().join("grafts-signed");
    sh(Command::new(env!("CARGO"))
        .current_dir(root.join("grafts/signed"))
        .env("CARGO_TARGET_DIR", &lib_dir)
        .env("RUSTFLAGS", "-C relocation-model=pie")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .args(["build", "-q", "--release", "--target", "x86_64-unknown-none"]))?;
    signed_sources_allowed(&root)?;
    let lib = lib_dir.join("x86_64-unknown-none/release/libscion_signed_grafts.a");
    let sysroot = Command::new("rustc").args(["--print", "sysroot"]).output().map_err(|e| format!("rustc: {e}"))?;
    let lld = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim()).join("lib/rustlib/x86_64-unknown-linux-gnu/bin/rust-lld");
    let script = obj.join("signed.ld");
    std::fs::write(&script, "SECTIONS {\n  . = 0;\n  .text : { *(.text .text.*) }\n  .rodata : { *(.rodata .rodata.*) }\n  .data : { *(.data .data.*) }\n  .bss : { *(.bss .bss.*) }\n  /DISCARD/ : { *(.comment) *(.eh_frame*) *(.note*) }\n}\n").map_err(|e| e.to_string())?;
    let seed = signing_seed()?;
    let mut files = Vec::new();
    // The built-ins, and one hostile signed graft: `spin`, which never returns.
    for (name, point, state) in EXAMPLES.iter().filter(|e| NATIVE.contains(&e.0)).chain(&[("spin", Point::Evict, 8)]) {
        let elf = obj.join(format!("signed_{name}.elf"));
        let link = Command::new(&lld)
            .args(["-flavor", "gnu", "-pie", "--no-dynamic-linker", "--gc-sections", "-e", &format!("scion_graft_{name}"), "-T"])
            .arg(&script)
            .arg(&lib)
            .arg("-o")
            .arg(&elf)
            .output()
            .map_err(|e| format!("{}: {e}", lld.display()))?;
        if !link.status.success() {
            let why = String::from_utf8_lossy(&link.stderr);
            if why.contains("scion_signed_graft_can_panic") {
                return Err(format!("signed graft {name}: it can panic (a path to a panic is left), so it is not signed"));
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
const SIGNED_ALLOWED: [(&str, &str); 1] = [("grafts", "crates/grafts/src/lib.rs")];

fn signed_sources_allowed(root: &Path) -> Result<(), String> {
    let lock = std::fs::read_to_string(root.join("grafts/signed/Cargo.lock")).map_err(|e| format!("grafts/signed/Cargo.lock: {e}"))?;
    for name in lock.lines().filter_map(|l| l.strip_prefix("name = \"")).map(|n| n.trim_end_matches('"')) {
        if name != "scion-signed-grafts" && !SIGNED_ALLOWED.iter().any(|(a, _)| *a == name) {
            return Err(format!("signed grafts: crate `{name}` is not on the allowed list (xtask/src/grafts.rs SIGNED_ALLOWED)"));
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
                    return Err(format!("a relocation of type {} (only relative ones are applied)", r.r_type(end, false)));
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
        t.load(owner, owner as u64, bytes.len(), &mut |_| None)
    }

    fn hot_state(hot: &[u64]) -> Vec<u8> {
        let mut s = vec![0u8; grafts::HOT_STATE];
        s[..8].copy_from_slice(&(hot.len() as u64).to_le_bytes());
        for (k, b) in hot.iter().enumerate() {
            s[8 + 8 * k..16 + 8 * k].copy_from_slice(&b.to_le_bytes());
        }
        s
    }

    const TECHS: [Tech; 4] = [Tech::Native, Tech::Wasmi, Tech::Ebpf, Tech::Script];

    /// Graft `name` at `point` in every technology, owner k + 1 for the k-th:
    /// (technology, owner, id).
    fn load_every(t: &mut Table, point: Point, name: &str) -> Vec<(Tech, u32, u32)> {
        TECHS
            .iter()
            .enumerate()
            .map(|(k, tech)| (*tech, k as u32 + 1, load(t, k as u32 + 1, &file_at(point, *tech, name)).unwrap_or_else(|e| panic!("{tech:?}: {e:?}"))))
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
            let want = grafts::hotlist(&input, &mut st);
            for (tech, owner, id) in &ids {
                t.get(*owner, *id).unwrap().write_state(0, &hot_state(&hot)).unwrap();
                assert_eq!(t.call(Point::Evict, *owner, &input), Some(want), "{tech:?}, round {round}: hot {hot:?} candidates {cands:?}");
            }
        }
        for (tech, owner, id) in &ids {
            let g = t.get(*owner, *id).unwrap();
            assert_eq!((g.stats.calls, g.stats.aborts), (400, 0), "{tech:?}");
        }
    }

    /// MD5 in every technology, over random streams of whole blocks in pieces of up to
    /// 1 KiB and a ragged tail: the native graft's digest (itself checked against
    /// RFC 1321's test suite in `grafts`).
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
            let mut want = [0u8; grafts::MD5_STATE];
            let whole = blocks * 64;
            let pieces: Vec<&[u8]> = data[..whole].chunks(1024).chain([&data[whole..]]).collect();
            for p in &pieces {
                assert_eq!(grafts::md5(p, &mut want), 0);
            }
            for (tech, owner, id) in &ids {
                t.get(*owner, *id).unwrap().write_state(0, &[0u8; grafts::MD5_STATE]).unwrap();
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
        let mut want = vec![0u8; grafts::LD_STATE];
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
            let expect = grafts::ldisk(&input, &mut want);
            for (tech, owner, _) in &ids {
                assert_eq!(t.call(Point::Ldisk, *owner, &input), Some(expect), "{tech:?}, round {round}: block {l}, write {write}");
            }
        }
        for (tech, owner, id) in &ids {
            let mut got = vec![0u8; grafts::LD_STATE];
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
        let more: [(Tech, &str, Result<Abort, &str>); 7] = [
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
                (Err(LoadError::Refused(why)), Err(w)) => assert!(why.contains(w), "{tech:?} {name}: refused for {why:?}, want {w:?}"),
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
}
