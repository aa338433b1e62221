use super::common::*;
use super::sfi::*;
use super::signed::*;
use super::*;
use graft::engine::Abort;
use graft::format::GraftFile;
use graft::{LoadError, Table};
use std::path::Path;
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
    let server: Vec<&str> = graft["features"]["server"].as_array().unwrap().iter().filter_map(|f| f.as_str()).collect();
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
    compile_wat("int", &module("(func (export \"graft_run\") (param i32) (result i64) local.get 0 i64.extend_i32_u)"))
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

/// `cargo xtask graft build`: a small source in each technology becomes a graft file a
/// server loads (the compiled WebAssembly signed with the build's key); a SIMD module
/// is refused before wasm2c (which aborts on it), and so are a point that does not
/// exist, an eBPF program the verifier refuses, and a script that does not compile.
#[test]
fn graft_build_makes_loadable_files_and_refuses_the_rest() {
    use super::command::{build_one, loads, parse};
    let dir = target_dir().join("grafts-obj").join("test_command");
    std::fs::create_dir_all(&dir).unwrap();
    let put = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).unwrap();
        name.to_string()
    };
    let wat = |name: &str, text: &str| -> String {
        let src = dir.join(format!("{name}.wat"));
        std::fs::write(&src, text).unwrap();
        sh(Command::new("wat2wasm").arg(&src).arg("-o").arg(dir.join(format!("{name}.wasm")))).unwrap();
        format!("{name}.wasm")
    };
    let build = |args: &[&str]| -> Result<Vec<u8>, String> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let r = parse(&args, &dir)?;
        let out = build_one(&r)?;
        Ok(std::fs::read(out).unwrap())
    };
    let sources = [
        (
            wat("ok", &module("(func (export \"graft_run\") (param i32) (result i64) local.get 0 i64.extend_i32_u)")),
            Tech::WasmAot,
        ),
        (put("ok.c", "#include \"graft.h\"\nGRAFT u64 graft(struct evict_ctx *c) { return 7; }\n"), Tech::Ebpf),
        (put("ok.rhai", "fn graft(input) { 7 }\n"), Tech::Script),
    ];
    for (src, tech) in &sources {
        let bytes = build(&[src, "--point", "evict", "--state", "8"]).unwrap_or_else(|e| panic!("{src}: {e}"));
        let f = GraftFile::parse(&bytes).unwrap();
        assert_eq!((f.tech, f.point, f.state_len, f.name), (*tech, Point::Evict, 8, "ok"));
        assert_eq!(!f.sig.is_empty(), *tech == Tech::WasmAot, "{src}: signed where the technology is");
        loads(&bytes).unwrap_or_else(|e| panic!("{src}: {}", e.what()));
    }
    let simd = wat(
        "simd",
        &module("(func (export \"graft_run\") (param i32) (result i64) v128.const i64x2 1 2 i64x2.extract_lane 0)"),
    );
    let e = build(&[&simd, "--point", "evict"]).expect_err("a SIMD module built");
    assert!(e.contains("SIMD"), "{e}");
    let e = build(&[&sources[2].0, "--point", "nowhere"]).expect_err("a point that does not exist");
    assert!(e.contains("no graft point"), "{e}");
    let oob = put(
        "oob.c",
        "#include \"graft.h\"\nGRAFT u64 graft(struct evict_ctx *c) { return ((volatile u64 *)c)[4096]; }\n",
    );
    let e = build(&[&oob, "--point", "evict"]).expect_err("an access past the memory built");
    assert!(e.contains("instruction") && e.contains("eBPF"), "{e}");
    let bad = put("bad.rhai", "fn graft(input) { 7 +\n");
    let e = build(&[&bad, "--point", "evict"]).expect_err("a script that does not compile");
    assert!(e.contains("would refuse"), "{e}");
    let e = build(&[&put("x.py", ""), "--point", "evict"]).expect_err("a .py");
    assert!(e.contains(".wasm, .c"), "{e}");
}

/// wasm2c aborts on a SIMD module: the build refuses it first, with the reason.
#[test]
fn compiled_wasm_with_simd_is_refused_before_wasm2c() {
    let simd =
        module("(func (export \"graft_run\") (param i32) (result i64) v128.const i64x2 1 2 i64x2.extract_lane 0)");
    let e = compile_wat("simd", &simd).expect_err("a SIMD module compiled");
    assert!(e.contains("SIMD"), "{e}");
}
