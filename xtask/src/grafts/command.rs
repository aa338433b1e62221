//! `cargo xtask graft build IN.wasm|IN.c|IN.rhai --point P [-o OUT] [--state N]
//! [--name NAME]`: a user's source as a loadable graft file — WebAssembly compiled ahead
//! of time (wasm2c, clang, Scion's harness) and signed with the build's key, as the
//! example grafts are; C compiled to eBPF by clang; a rhai script — then loaded on the
//! host through the very table and engines the servers use (their limits, Scion's eBPF
//! verifier, the signature check), so that what a server would refuse is refused here,
//! with its reason.

use std::path::{Path, PathBuf};

use graft::format::{GraftFile, Tech};
use graft::{LoadError, Point, Table};

use super::common::{ebpf_from_c, ensure_clang, ensure_wasm2c};
use super::sfi::sfi_image;
use super::signed::signing_seed;
use crate::target_dir;

pub(crate) const USAGE: &str =
    "usage: cargo xtask graft build IN.wasm|IN.c|IN.rhai --point evict|stream|ldisk [-o OUT] [--state BYTES] [--name NAME]";

/// What to build.
pub(crate) struct Request {
    pub input: PathBuf,
    pub point: Point,
    pub out: PathBuf,
    pub state: usize,
    pub name: String,
}

/// `cargo xtask graft …` (`cwd`: where it was typed, for relative paths).
pub fn graft_command(args: &[String], cwd: &Path) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("build") => {
            let r = parse(&args[1..], cwd)?;
            let out = build_one(&r)?;
            eprintln!(
                "xtask: wrote {} ({} graft at the {} point)",
                out.display(),
                tech_of(&r.input)?.name(),
                r.point.name()
            );
            Ok(())
        }
        _ => Err(USAGE.into()),
    }
}

pub(crate) fn parse(args: &[String], cwd: &Path) -> Result<Request, String> {
    let (mut input, mut point, mut out, mut state, mut name) = (None, None, None, 0usize, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value\n{USAGE}"));
        match a.as_str() {
            "--point" => {
                let p = value()?;
                point = Some(Point::from_name(p).ok_or_else(|| {
                    let names: Vec<_> = Point::ALL.iter().map(|p| p.name()).collect();
                    format!("no graft point {p:?} (the points: {})", names.join(", "))
                })?);
            }
            "-o" => out = Some(cwd.join(value()?)),
            "--state" => {
                let v = value()?;
                state = v.parse().map_err(|_| format!("--state {v:?}: not a number of bytes"))?;
            }
            "--name" => name = Some(value()?.clone()),
            _ if a.starts_with('-') => return Err(format!("unknown option {a}\n{USAGE}")),
            _ if input.is_none() => input = Some(cwd.join(a)),
            _ => return Err(format!("one input only\n{USAGE}")),
        }
    }
    let input = input.ok_or_else(|| USAGE.to_string())?;
    let point = point.ok_or_else(|| format!("--point is needed\n{USAGE}"))?;
    let name = match name {
        Some(n) => n,
        None => input.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
    };
    let out = out.unwrap_or_else(|| input.with_extension("graft"));
    Ok(Request { input, point, out, state, name })
}

fn tech_of(input: &Path) -> Result<Tech, String> {
    match input.extension().and_then(|e| e.to_str()) {
        Some("wasm") => Ok(Tech::WasmAot),
        Some("c") => Ok(Tech::Ebpf),
        Some("rhai") => Ok(Tech::Script),
        _ => Err(format!("{}: a graft is built from .wasm, .c (eBPF) or .rhai", input.display())),
    }
}

/// Build `r` into its graft file, refusing what a server would refuse; the file written.
pub(crate) fn build_one(r: &Request) -> Result<PathBuf, String> {
    let tech = tech_of(&r.input)?;
    let shown = r.input.display();
    let source = std::fs::read(&r.input).map_err(|e| format!("{shown}: {e}"))?;
    let obj = target_dir().join("grafts-obj").join(format!("user_{}_{}", tech.name(), r.name));
    std::fs::create_dir_all(&obj).map_err(|e| e.to_string())?;
    let code = match tech {
        Tech::WasmAot => {
            sfi_image(&ensure_wasm2c()?, &ensure_clang()?.0, &r.input, &obj).map_err(|e| format!("{shown}: {e}"))?
        }
        Tech::Ebpf => {
            let code = ebpf_from_c(&r.input, &obj, &r.name)?;
            let mem = graft::engine::bpf::INPUT + r.point.max_input() + r.state;
            if let Err((at, e)) = graft::engine::bpf::verify::check(&code, mem) {
                return Err(format!("{shown}: instruction {at}: {}", e.what()));
            }
            code
        }
        _ => source,
    };
    let f = GraftFile { point: r.point, tech, state_len: r.state, name: &r.name, code: &code, sig: &[] };
    let bytes = if tech == Tech::WasmAot {
        let sig = graft::signed::sign(&f, &signing_seed()?);
        GraftFile { sig: &sig, ..f }.to_bytes()
    } else {
        f.to_bytes()
    };
    loads(&bytes).map_err(|e| format!("{shown}: a server would refuse it: {}", e.what()))?;
    std::fs::write(&r.out, &bytes).map_err(|e| format!("{}: {e}", r.out.display()))?;
    Ok(r.out.clone())
}

/// Load `bytes` as a server does (a table hosting every point, with the build's key for
/// compiled WebAssembly), and unload it.
pub(crate) fn loads(bytes: &[u8]) -> Result<(), LoadError> {
    graft::engine::warm_up();
    let host = Box::new(graft::host::counting::CountingHost { clock: || 0 });
    let mut t = Table::new(&Point::ALL, 0, host);
    for (k, piece) in bytes.chunks(2048).enumerate() {
        t.put(1, k * 2048, piece)?;
    }
    let key =
        signing_seed().map(|s| graft::signed::public_key(&s)).map_err(|_| LoadError::Refused("no signing key"))?;
    let mut compiled = |f: &GraftFile<'_>| {
        (f.tech == Tech::WasmAot).then(|| graft::sfi::host::load(f, &key, graft::engine::Limits::default()))
    };
    t.load(1, 1, bytes.len(), &mut compiled).map(|_| ())
}
