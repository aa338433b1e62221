//! The Linux baseline: Debian's kernel and an initramfs of the static benchmark programs.

use super::nginx;
use crate::{project_root, sh};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Debian kernel to boot as the baseline (installed when missing, as root).
pub(super) fn linux_kernel() -> Result<PathBuf, String> {
    let find = || {
        let mut v: Vec<PathBuf> = std::fs::read_dir("/boot")
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-")))
            .collect();
        v.sort();
        v.pop()
    };
    if let Some(k) = find() {
        return Ok(k);
    }
    let install = "apt-get install -y --no-install-recommends linux-image-amd64";
    let is_root = Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0")).unwrap_or(false);
    if !is_root {
        return Err(format!("no Linux kernel in /boot for the baseline; install one with: sudo {install}"));
    }
    eprintln!("xtask: installing Debian's kernel package for the Linux baseline");
    sh(Command::new("sh")
        .args(["-c", &format!("apt-get update -qq && DEBIAN_FRONTEND=noninteractive {install} >/dev/null")]))?;
    find().ok_or_else(|| "the kernel package installed no /boot/vmlinuz-*".into())
}

fn ensure_cc() -> Result<(), String> {
    if Command::new("cc").arg("--version").output().is_ok() && Path::new("/usr/lib/x86_64-linux-gnu/libc.a").exists() {
        return Ok(());
    }
    eprintln!("xtask: installing a C compiler and static libc for the Linux baseline");
    sh(Command::new("sh").args([
        "-c",
        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y gcc libc6-dev >/dev/null",
    ]))
}

/// One entry of a cpio "newc" archive.
fn cpio_entry(out: &mut Vec<u8>, name: &str, mode: u32, rdev: (u32, u32), data: &[u8], ino: u32) {
    let hdr = format!(
        "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
        ino,
        mode,
        0,
        0,
        1,
        0,
        data.len(),
        0,
        0,
        rdev.0,
        rdev.1,
        name.len() + 1,
        0
    );
    out.extend_from_slice(hdr.as_bytes());
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
    out.extend_from_slice(data);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// The drivers' modules of the baseline kernel, in load order: virtio-blk and
/// virtio-net (the `baio` suite loads 1–6, the `net` suite 1–5 and 7–9), then NVMe with
/// what it needs (10–16: `bench/linux/baio.c` with `disk=nvme`) and the 82574's e1000e
/// (17: `bench/linux/net.c` with `nic=e1000e`), for the `devices` suite.
const MODULES: [&str; 17] = [
    "drivers/virtio/virtio_ring.ko",
    "drivers/virtio/virtio.ko",
    "drivers/virtio/virtio_pci_legacy_dev.ko",
    "drivers/virtio/virtio_pci_modern_dev.ko",
    "drivers/virtio/virtio_pci.ko",
    "drivers/block/virtio_blk.ko",
    "net/core/failover.ko",
    "drivers/net/net_failover.ko",
    "drivers/net/virtio_net.ko",
    "crypto/crct10dif_common.ko",
    "lib/crc-t10dif.ko",
    "lib/crc64.ko",
    "lib/crc64-rocksoft.ko",
    "block/t10-pi.ko",
    "drivers/nvme/host/nvme-core.ko",
    "drivers/nvme/host/nvme.ko",
    "drivers/net/ethernet/intel/e1000e/e1000e.ko",
];

/// Build the baseline's initramfs: /dev/console, the static benchmark as /init, and
/// the drivers' modules of `vmlinuz` (`MODULES`) as /m/1.ko … /m/17.ko.
pub(super) fn linux_initramfs(dir: &Path, vmlinuz: &Path) -> Result<PathBuf, String> {
    ensure_cc()?;
    let src = project_root().join("bench/linux");
    let bin = dir.join("kbench");
    sh(Command::new("cc")
        .args(["-static", "-O2", "-pthread", "-o"])
        .arg(&bin)
        .arg(src.join("kbench.c"))
        .arg(src.join("baio.c"))
        .arg(src.join("net.c"))
        .arg(src.join("graft.c"))
        .arg(src.join("smp.c"))
        .arg(src.join("wasi.c")))?;
    let init = std::fs::read(&bin).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    cpio_entry(&mut out, "dev", 0o040755, (0, 0), &[], 1);
    cpio_entry(&mut out, "dev/console", 0o020600, (5, 1), &[], 2);
    cpio_entry(&mut out, "init", 0o100755, (0, 0), &init, 3);
    // The grafts suite's MD5 as an XDP program (instructions; `cargo xtask build` made it).
    match std::fs::read(crate::grafts::xdp_md5()) {
        Ok(data) => cpio_entry(&mut out, "md5.bpf", 0o100644, (0, 0), &data, 1000),
        Err(e) => eprintln!(
            "xtask: {}: {e} (the Linux side of the grafts suite needs it)",
            crate::grafts::xdp_md5().display()
        ),
    }
    // The wasi suite's workloads built natively (the same sources as the WASI programs)
    // and its SQL script.
    let read = |p: PathBuf| std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()));
    let wasi = crate::wasi::native_bench().and_then(|d| {
        Ok([
            ("wasibench", 0o100755, read(d.join("wasibench"))?),
            ("sql", 0o100755, read(d.join("sql"))?),
            ("speedtest.sql", 0o100644, read(project_root().join("bench/wasi/speedtest.sql"))?),
        ])
    });
    match wasi {
        Ok(files) => {
            for (i, (name, mode, data)) in files.iter().enumerate() {
                cpio_entry(&mut out, name, *mode, (0, 0), data, 1001 + i as u32);
            }
        }
        Err(e) => eprintln!("xtask: the wasi suite's programs for the Linux guest: {e} (the wasi suite needs them)"),
    }
    // nginx, its libraries and configuration (the net suite's second Linux server).
    match nginx::files(dir) {
        Ok(files) => {
            for (i, (name, mode, data)) in files.iter().enumerate() {
                cpio_entry(&mut out, name, *mode, (0, 0), data, 2000 + i as u32);
            }
        }
        Err(e) => eprintln!("xtask: nginx for the Linux guest: {e} (the net suite needs it)"),
    }
    let version =
        vmlinuz.file_name().map(|n| n.to_string_lossy().trim_start_matches("vmlinuz-").to_string()).unwrap_or_default();
    let mods = Path::new("/lib/modules").join(&version).join("kernel");
    cpio_entry(&mut out, "m", 0o040755, (0, 0), &[], 4);
    for (i, m) in MODULES.iter().enumerate() {
        match std::fs::read(mods.join(m)) {
            Ok(data) => cpio_entry(&mut out, &format!("m/{}.ko", i + 1), 0o100644, (0, 0), &data, 5 + i as u32),
            Err(e) => {
                eprintln!(
                    "xtask: {}: {e} (the Linux side of the baio, net and devices suites needs it)",
                    mods.join(m).display()
                )
            }
        }
    }
    cpio_entry(&mut out, "TRAILER!!!", 0, (0, 0), &[], 0);
    let path = dir.join("linux-initramfs.cpio");
    std::fs::write(&path, out).map_err(|e| e.to_string())?;
    Ok(path)
}
