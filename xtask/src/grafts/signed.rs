//! Signed grafts: the build's key, signed graft files, and the example grafts in signed
//! safe Rust.

use std::path::{Path, PathBuf};
use std::process::Command;

use graft::format::{GraftFile, Tech};
use graft::Point;

use super::common::{file_name, rust_lld, SOURCES};
use crate::{project_root, sh, target_dir};

/// A graft file signed with the build's key.
pub(crate) fn write_signed(
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
pub(crate) fn signing_seed() -> Result<[u8; 32], String> {
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
pub(crate) fn public_key_hex() -> Result<String, String> {
    Ok(graft::signed::public_key(&signing_seed()?).iter().map(|b| format!("{b:02x}")).collect())
}

/// The grafts of `crates/graft-examples/src` as signed safe Rust: `signed/` there (Scion's harness
/// around them) compiled for x86_64-unknown-none into a static library, each entry linked
/// alone into a position-independent image at 0 with rust-lld (so a graft with a path to
/// a panic fails to link: the harness's panic handler calls a function that does not
/// exist), checked — no writable data, no relocations but relative ones (the server
/// adds its load address) — and signed.
pub(crate) fn build_signed(out: &Path, obj: &Path, natives: &[(&str, Point, usize)]) -> Result<Vec<PathBuf>, String> {
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
    for (name, point, state) in natives.iter().chain(&[("spin", Point::Evict, 8)]) {
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
pub(crate) const SIGNED_ALLOWED: [(&str, &str); 1] = [("graft-examples", "crates/graft-examples/src/lib.rs")];

pub(crate) fn signed_sources_allowed(root: &Path) -> Result<(), String> {
    let path = root.join(SOURCES).join("signed/Cargo.lock");
    let lock = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    for name in lock.lines().filter_map(|l| l.strip_prefix("name = \"")).map(|n| n.trim_end_matches('"')) {
        if name != "scion-signed-grafts" && !SIGNED_ALLOWED.iter().any(|(a, _)| *a == name) {
            return Err(format!(
                "signed grafts: crate `{name}` is not on the allowed list (xtask/src/grafts/signed.rs SIGNED_ALLOWED)"
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
pub(crate) fn flat_image(elf: &[u8]) -> Result<(usize, Vec<usize>, Vec<u8>), String> {
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
