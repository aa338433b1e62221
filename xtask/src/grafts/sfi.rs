//! WebAssembly compiled ahead of time: wasm2c, clang with Scion's harness, rust-lld, and
//! the image checked (`graft::sfi`).

use std::path::Path;
use std::process::Command;

use super::common::{rust_lld, SOURCES};
use crate::{project_root, sh};

/// The compiler's settings for a compiled WebAssembly graft: freestanding x86-64, general
/// registers only (the servers are soft-float: a module with a float does not compile),
/// position-independent with hidden symbols (no GOT: every reference relative), no red
/// zone, no stack protector or unwind tables, each frame at most 256 bytes (with the
/// harness's call-depth limit, `crates/graft-examples/sfi/include/wasm-rt.h`, that bounds the server
/// stack a graft may take: 64 frames, 16 KiB).
pub(crate) const SFI_CFLAGS: [&str; 18] = [
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
pub(crate) fn sfi_image(wasm2c: &str, clang: &str, wasm: &Path, dir: &Path) -> Result<Vec<u8>, String> {
    let root = project_root();
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    wasm_features(&std::fs::read(wasm).map_err(|e| e.to_string())?)?;
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
pub(crate) fn sfi_patch(src: &str) -> Result<String, String> {
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
pub(crate) fn sfi_code(elf: &[u8]) -> Result<Vec<u8>, String> {
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

/// What wasm2c 1.0.32 cannot compile into what Scion runs: it aborts (SIGABRT) on SIMD,
/// and threads, exceptions, tail calls, 64-bit or several memories, GC and the rest have
/// nothing in Scion's harnesses (the grafts' and the WASI programs', `crate::wasi`).
pub(crate) fn wasm2c_unsupported() -> wasmparser::WasmFeatures {
    use wasmparser::WasmFeatures as F;
    F::SIMD
        | F::RELAXED_SIMD
        | F::THREADS
        | F::SHARED_EVERYTHING_THREADS
        | F::TAIL_CALL
        | F::MULTI_MEMORY
        | F::EXCEPTIONS
        | F::LEGACY_EXCEPTIONS
        | F::MEMORY64
        | F::COMPONENT_MODEL
        | F::FUNCTION_REFERENCES
        | F::MEMORY_CONTROL
        | F::GC
        | F::CUSTOM_PAGE_SIZES
        | F::STACK_SWITCHING
        | F::WIDE_ARITHMETIC
}

/// Refuse, before wasm2c sees it, a module using what the pipeline cannot take
/// (`wasm2c_unsupported`, and extended constant expressions, which the graft harness
/// lacks). Floats pass here (clang refuses them later: the servers are soft-float).
pub(crate) fn wasm_features(module: &[u8]) -> Result<(), String> {
    use wasmparser::{Validator, WasmFeatures as F};
    let unsupported = wasm2c_unsupported() | F::EXTENDED_CONST;
    Validator::new_with_features(F::default() - unsupported).validate_all(module).map(|_| ()).map_err(|e| {
        format!(
            "the module uses what compiled grafts cannot (SIMD, threads, exceptions, tail calls, 64-bit or several memories, GC), or is not valid WebAssembly: {e}"
        )
    })
}
