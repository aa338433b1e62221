//! The UEFI disk image (`cargo xtask image OUT`, `run --uefi`, the `uefi` scenarios): a
//! GPT disk with one EFI system partition (FAT32) holding Scion's loader as the
//! removable-media boot file `\EFI\BOOT\BOOTX64.EFI`, the kernel (`\scion\kernel`), the
//! boot image (`\scion\boot.img`) and the kernel command line (`\scion\cmdline`); and
//! how the loader is built. (OVMF, the firmware QEMU boots it with, is `qemu`'s.)

use std::io::{Cursor, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The loader's Rust target.
pub const UEFI_TARGET: &str = "x86_64-unknown-uefi";
/// Build the loader (`boot/uefi`); the path of its `.efi` file.
pub fn build_loader() -> Result<PathBuf, String> {
    crate::ensure_target_named(UEFI_TARGET)?;
    crate::sh(Command::new(env!("CARGO")).args(["build", "--release", "--target", UEFI_TARGET, "-p", "scion-uefi"]))?;
    Ok(crate::target_dir().join(UEFI_TARGET).join("release").join("scion-uefi.efi"))
}

/// The files of the EFI system partition: (path, bytes).
pub fn esp_files(loader: &[u8], kernel: &[u8], boot_image: &[u8], cmdline: &str) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("EFI/BOOT/BOOTX64.EFI", loader.to_vec()),
        ("scion/kernel", kernel.to_vec()),
        ("scion/boot.img", boot_image.to_vec()),
        ("scion/cmdline", format!("{cmdline}\n").into_bytes()),
    ]
}

const SECTOR: u64 = 512;
/// Where the partition starts (1 MiB, as partitioning tools align it).
const ESP_START: u64 = 1 << 20;

/// Write a GPT disk image to `out`: one EFI system partition, FAT32, with `files`.
pub fn write_disk(out: &Path, files: &[(&str, Vec<u8>)]) -> Result<(), String> {
    let payload: u64 = files.iter().map(|(_, d)| d.len() as u64).sum();
    // FAT32 wants at least 65525 clusters (32 MiB and more with 512-byte clusters);
    // room for the files and their tables beside them.
    let esp_len = ((payload + payload / 8 + (8 << 20)).max(64 << 20)).next_multiple_of(1 << 20);
    let mut fat = Cursor::new(vec![0u8; esp_len as usize]);
    fatfs::format_volume(
        &mut fat,
        fatfs::FormatVolumeOptions::new().fat_type(fatfs::FatType::Fat32).volume_label(*b"SCION      "),
    )
    .map_err(|e| format!("formatting the EFI system partition: {e}"))?;
    fat.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
    {
        let fs = fatfs::FileSystem::new(&mut fat, fatfs::FsOptions::new()).map_err(|e| e.to_string())?;
        for (path, data) in files {
            let mut dir = fs.root_dir();
            let parts: Vec<&str> = path.split('/').collect();
            for d in &parts[..parts.len() - 1] {
                dir = match dir.open_dir(d) {
                    Ok(x) => x,
                    Err(_) => dir.create_dir(d).map_err(|e| format!("ESP: {d}: {e}"))?,
                };
            }
            let mut f = dir.create_file(parts[parts.len() - 1]).map_err(|e| format!("ESP: {path}: {e}"))?;
            f.truncate().map_err(|e| e.to_string())?;
            f.write_all(data).map_err(|e| format!("ESP: {path}: {e}"))?;
        }
        fs.unmount().map_err(|e| e.to_string())?;
    }
    // The disk: the partition, and room for the GPT at both ends.
    let total = ESP_START + esp_len + (1 << 20);
    let mut disk = Cursor::new(vec![0u8; total as usize]);
    let mbr = gpt::mbr::ProtectiveMBR::with_lb_size(u32::try_from(total / SECTOR - 1).unwrap_or(u32::MAX));
    mbr.overwrite_lba0(&mut disk).map_err(|e| format!("protective MBR: {e}"))?;
    let mut g = gpt::GptConfig::new()
        .writable(true)
        .logical_block_size(gpt::disk::LogicalBlockSize::Lb512)
        .create_from_device(disk, None)
        .map_err(|e| format!("GPT: {e}"))?;
    let id = g
        .add_partition("EFI system partition", esp_len, gpt::partition_types::EFI, 0, Some(ESP_START / SECTOR))
        .map_err(|e| format!("GPT: {e}"))?;
    let first = g.partitions().get(&id).map(|p| p.first_lba).ok_or("GPT: the partition is missing")?;
    let mut disk = g.write().map_err(|e| format!("GPT: {e}"))?.into_inner();
    let at = (first * SECTOR) as usize;
    let fat = fat.into_inner();
    if at + fat.len() > disk.len() {
        return Err(format!("GPT: the partition at sector {first} does not fit the disk"));
    }
    disk[at..at + fat.len()].copy_from_slice(&fat);
    std::fs::write(out, &disk).map_err(|e| format!("{}: {e}", out.display()))
}

/// Read a file back from the EFI system partition of a disk written by `write_disk`.
#[cfg(test)]
pub fn read_file(disk: &Path, path: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let bytes = std::fs::read(disk).map_err(|e| format!("{}: {e}", disk.display()))?;
    let g = gpt::GptConfig::new()
        .writable(false)
        .logical_block_size(gpt::disk::LogicalBlockSize::Lb512)
        .open_from_device(Cursor::new(bytes.clone()))
        .map_err(|e| format!("{}: no GPT: {e}", disk.display()))?;
    let p = g
        .partitions()
        .values()
        .find(|p| p.part_type_guid == gpt::partition_types::EFI)
        .ok_or_else(|| format!("{}: no EFI system partition", disk.display()))?;
    let (a, b) = ((p.first_lba * SECTOR) as usize, ((p.last_lba + 1) * SECTOR) as usize);
    let part = bytes.get(a..b).ok_or("the partition lies outside the disk")?;
    let fs = fatfs::FileSystem::new(Cursor::new(part.to_vec()), fatfs::FsOptions::new()).map_err(|e| e.to_string())?;
    let mut f = fs.root_dir().open_file(path).map_err(|e| format!("{path}: {e}"))?;
    let mut out = Vec::new();
    f.read_to_end(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_disk_holds_a_gpt_and_the_files() {
        let dir = std::env::temp_dir().join(format!("scion-esp-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let img = dir.join("esp.img");
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 4096) as u8).collect();
        let files = super::esp_files(b"MZ loader", b"\x7fELF kernel", &big, "timer=pit");
        super::write_disk(&img, &files).unwrap();
        assert_eq!(super::read_file(&img, "EFI/BOOT/BOOTX64.EFI").unwrap(), b"MZ loader");
        assert_eq!(super::read_file(&img, "scion/boot.img").unwrap(), big);
        assert_eq!(super::read_file(&img, "scion/cmdline").unwrap(), b"timer=pit\n");
        let bytes = std::fs::read(&img).unwrap();
        // The protective MBR's signature and partition type, the GPT header at LBA 1,
        // and the backup header in the last sector.
        assert_eq!(&bytes[510..512], &[0x55, 0xaa]);
        assert_eq!(bytes[446 + 4], 0xee);
        assert_eq!(&bytes[512..520], b"EFI PART");
        assert_eq!(&bytes[bytes.len() - 512..bytes.len() - 504], b"EFI PART");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
