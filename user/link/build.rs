//! The build script of every user program package (each names it with
//! `build = ".../link/build.rs"`): every program links at 4 MiB with `link/user.ld`.
fn main() {
    let dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let script = dir
        .ancestors()
        .map(|d| d.join("user/link/user.ld"))
        .find(|p| p.exists())
        .expect("user/link/user.ld above the package");
    println!("cargo:rustc-link-arg-bins=-T{}", script.display());
    println!("cargo:rerun-if-changed={}", script.display());
}
