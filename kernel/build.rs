use std::path::Path;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    println!("cargo:rustc-link-arg-bins=-T{dir}/linker.ld");
    println!("cargo:rerun-if-changed=linker.ld");
    // The module order (docs/kernel.md, "Module order"): no kernel modules import each other round a
    // circle, or the build fails saying which and through what.
    let src = Path::new(&dir).join("src");
    println!("cargo:rerun-if-changed=src");
    let mut files = Vec::new();
    read_sources(&src, &src, &mut files);
    if let Err(e) = kcore::modorder::check(&files) {
        eprintln!("{e}");
        panic!("{e}");
    }
}

/// Every `.rs` file under `dir`, by its path under `root` (`/`-separated).
fn read_sources(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).expect("kernel/src").map(|e| e.expect("kernel/src entry").path()).collect();
    entries.sort();
    for p in entries {
        println!("cargo:rerun-if-changed={}", p.display());
        if p.is_dir() {
            read_sources(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p
                .strip_prefix(root)
                .expect("under src")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            out.push((rel, std::fs::read_to_string(&p).expect("kernel source")));
        }
    }
}
