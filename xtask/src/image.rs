//! `cargo xtask mkimage` and `cargo xtask fsck`: make and check BAIO device images on
//! the host with the same code (`crates/baio`) the block service mounts them with.

use baio::{BlockDev, MemDev, Volume, BLOCK, READ, WRITE};
use std::process::ExitCode;

pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mul) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1u64 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1u64 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().map(|n| n * mul).map_err(|_| format!("cannot read the size `{s}`"))
}

const USAGE: &str =
    "usage: cargo xtask mkimage OUT --size SIZE [--segment NAME:OWNER:BLOCKS[:FILE | :fs=PATH+PATH...]]...\n\
                     SIZE like 64M; a segment is owned by principal OWNER (read-write for it, read for others)\n\
                     and, with FILE, filled with the file's bytes; with fs=, it holds a baiofs filesystem\n\
                     with those files and directories (recursively) in its root\n\
                     (PATH/ puts a directory's contents there)";

pub fn mkimage(args: &[String]) -> Result<ExitCode, String> {
    let mut out = None;
    let mut size = None;
    let mut segs = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--size" => size = Some(parse_size(it.next().ok_or(USAGE)?)?),
            "--segment" => segs.push(it.next().ok_or(USAGE)?.clone()),
            s if out.is_none() && !s.starts_with('-') => out = Some(s.to_string()),
            _ => return Err(USAGE.into()),
        }
    }
    let (out, size) = (out.ok_or(USAGE)?, size.ok_or(USAGE)?);
    let v = make(&out, size, &segs)?;
    println!(
        "{out}: {} blocks of {BLOCK} bytes, {} segments, {} blocks free",
        v.layout.total_blocks,
        segs.len(),
        v.free_blocks()
    );
    Ok(ExitCode::SUCCESS)
}

/// Write a BAIO image of `size` bytes to `out` with segments `NAME:OWNER:BLOCKS[:FILE]`.
pub fn make(out: &str, size: u64, segs: &[String]) -> Result<Volume, String> {
    if !size.is_multiple_of(BLOCK as u64) {
        return Err(format!("the size must be a multiple of {BLOCK} bytes"));
    }
    let mut dev = MemDev(vec![0u8; size as usize]);
    let mut v = Volume::format(&mut dev).map_err(|e| format!("cannot format: {e:?}"))?;
    for s in segs {
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() < 3 || parts.len() > 4 {
            return Err(format!("segment `{s}`: want NAME:OWNER:BLOCKS[:FILE]"));
        }
        let owner: u32 = parts[1].parse().map_err(|_| format!("segment `{s}`: bad owner"))?;
        let blocks: u64 = parts[2].parse().map_err(|_| format!("segment `{s}`: bad block count"))?;
        let data = match parts.get(3) {
            Some(f) if f.starts_with("fs=") => {
                filesystem(blocks, &f[3..]).map_err(|e| format!("segment `{}`: {e}", parts[0]))?
            }
            Some(f) => std::fs::read(f).map_err(|e| format!("{f}: {e}"))?,
            None => Vec::new(),
        };
        if data.len() as u64 > blocks * BLOCK as u64 {
            return Err(format!(
                "segment `{}`: the file has {} bytes, the segment only {}",
                parts[0],
                data.len(),
                blocks * BLOCK as u64
            ));
        }
        let start = v
            .create(parts[0], owner, READ | WRITE, READ, blocks, u64::MAX, 0)
            .map_err(|e| format!("segment `{}`: {e:?}", parts[0]))?
            .start;
        // The image is made from zeros: every block of the segment holds its own bytes
        // (the file's, or zeros), so all of it counts as written.
        v.set_written(parts[0], blocks).map_err(|e| format!("{e:?}"))?;
        for (i, chunk) in data.chunks(BLOCK).enumerate() {
            let mut b = [0u8; BLOCK];
            b[..chunk.len()].copy_from_slice(chunk);
            dev.write(start + i as u64, &b).map_err(|e| format!("{e:?}"))?;
        }
    }
    v.sync(&mut dev).map_err(|e| format!("{e:?}"))?;
    write_sparse(out, &dev.0).map_err(|e| format!("{out}: {e}"))?;
    Ok(v)
}

/// Write `data` to `path`, leaving holes where whole MiBs are zero (large images stay
/// cheap on the host's disk).
fn write_sparse(path: &str, data: &[u8]) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::File::create(path)?;
    for (i, chunk) in data.chunks(1 << 20).enumerate() {
        if chunk.iter().any(|b| *b != 0) {
            f.seek(SeekFrom::Start((i as u64) << 20))?;
            f.write_all(chunk)?;
        }
    }
    f.set_len(data.len() as u64)
}

/// A baiofs filesystem of `blocks` blocks holding `paths` ('+'-separated files and
/// directories, copied recursively into its root): the segment's bytes.
fn filesystem(blocks: u64, paths: &str) -> Result<Vec<u8>, String> {
    let mut fs = baiofs::Fs::format(MemDev(vec![0u8; blocks as usize * BLOCK])).map_err(|e| format!("{e:?}"))?;
    fn copy(fs: &mut baiofs::Fs<MemDev>, host: &std::path::Path, at: &str) -> Result<(), String> {
        let name = host.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let path = format!("{at}/{name}");
        if host.is_dir() {
            fs.create(&path, baiofs::Kind::Dir).map_err(|e| format!("{path}: {e:?}"))?;
            let mut kids: Vec<_> = std::fs::read_dir(host)
                .map_err(|e| format!("{}: {e}", host.display()))?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .collect();
            kids.sort();
            for k in kids {
                copy(fs, &k, &path)?;
            }
        } else {
            let data = std::fs::read(host).map_err(|e| format!("{}: {e}", host.display()))?;
            fs.create(&path, baiofs::Kind::File).map_err(|e| format!("{path}: {e:?}"))?;
            fs.write(&path, 0, &data).map_err(|e| format!("{path}: {e:?}"))?;
        }
        Ok(())
    }
    for p in paths.split('+').filter(|p| !p.is_empty()) {
        if p.ends_with('/') {
            // A directory's contents, not the directory, go into the root.
            let mut kids: Vec<_> = std::fs::read_dir(p)
                .map_err(|e| format!("{p}: {e}"))?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .collect();
            kids.sort();
            for k in kids {
                copy(&mut fs, &k, "")?;
            }
        } else {
            copy(&mut fs, std::path::Path::new(p), "")?;
        }
    }
    Ok(fs.dev.0)
}

/// Does the BAIO image at `path` mount, with a segment `name` holding a baiofs
/// filesystem that mounts and has `file` (a path; "/" for any)?
pub fn has_path(path: &std::path::Path, name: &str, file: &str) -> bool {
    let Ok(data) = std::fs::read(path) else { return false };
    let mut dev = MemDev(data);
    let Ok(v) = Volume::mount(&mut dev) else { return false };
    let Some(i) = v.lookup(name) else { return false };
    let at = i.start as usize * BLOCK;
    baiofs::Fs::mount(MemDev(dev.0[at..at + i.length as usize * BLOCK].to_vec()))
        .is_ok_and(|mut fs| fs.stat(file).is_ok())
}

const FSCK_USAGE: &str = "usage: cargo xtask fsck [--repair] [--fs NAME]... IMAGE\n\
                          checks a BAIO image, and the baiofs filesystem in every segment that has one\n\
                          and in the segments named by --fs (default: files); --repair makes it mountable";

pub fn fsck(args: &[String]) -> Result<ExitCode, String> {
    let (mut path, mut repair, mut named) = (None, false, Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--repair" => repair = true,
            "--fs" => named.push(it.next().ok_or(FSCK_USAGE)?.clone()),
            s if path.is_none() && !s.starts_with('-') => path = Some(s.to_string()),
            _ => return Err(FSCK_USAGE.into()),
        }
    }
    let path = path.ok_or(FSCK_USAGE)?;
    if named.is_empty() {
        named.push("files".into());
    }
    let data = std::fs::read(&path).map_err(|e| format!("{path}: {e}"))?;
    if !(data.len() as u64).is_multiple_of(BLOCK as u64) {
        println!("{path}: {} bytes is not a whole number of {BLOCK}-byte blocks", data.len());
        return Ok(ExitCode::FAILURE);
    }
    let mut dev = MemDev(data);
    let (ok, v) = if repair { repair_baio(&path, &mut dev)? } else { check_baio(&path, &mut dev) };
    let Some(v) = v else { return Ok(ExitCode::FAILURE) };
    let mut bad = !ok;
    for i in v.list() {
        println!(
            "  {:24} owner {:5} blocks {:8}+{:<8} rights {}/{} written {}",
            i.name, i.owner, i.start, i.length, i.rights_owner, i.rights_other, i.written
        );
        // A segment holding a baiofs filesystem (by its magic, or named) is checked too.
        let at = i.start as usize * BLOCK;
        let seg = &mut dev.0[at..at + i.length as usize * BLOCK];
        if seg[..8] != baiofs::MAGIC.to_le_bytes() && !named.contains(&i.name) {
            continue;
        }
        let mut fsdata = seg.to_vec();
        let r = if repair {
            baiofs::Fs::repair(MemDev(fsdata.clone())).map(|(fs, changes)| {
                for c in &changes {
                    println!("    baiofs: repaired: {c}");
                }
                fsdata = fs.dev.0;
            })
        } else {
            Ok(())
        };
        match r.and_then(|_| baiofs::Fs::examine(MemDev(fsdata.clone()))) {
            Ok(e) if e.problems.is_empty() => {
                for u in &e.unfinished {
                    println!("    baiofs: an interrupted update (a mount finishes it): {u}");
                }
                let mut fs = baiofs::Fs::mount(MemDev(fsdata.clone())).map_err(|e| format!("{e:?}"))?;
                let files = fs.list("/").map(|l| l.len()).unwrap_or(0);
                println!("    baiofs: clean, {files} entries in its root, {} blocks free", fs.free_blocks());
            }
            Ok(e) => {
                bad = true;
                println!("    baiofs: {} problems", e.problems.len());
                for p in &e.problems {
                    println!("      {p}");
                }
            }
            Err(e) => {
                bad = true;
                println!("    baiofs: {e:?}");
            }
        }
        seg.copy_from_slice(&fsdata);
    }
    if repair {
        std::fs::write(&path, &dev.0).map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(if bad { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Check without writing: (clean, the volume as a mount would see it).
fn check_baio(path: &str, dev: &mut MemDev) -> (bool, Option<Volume>) {
    let e = Volume::examine(dev);
    if !e.problems.is_empty() {
        println!("{path}: {} problems", e.problems.len());
        for p in &e.problems {
            println!("  {p}");
        }
        return (false, None);
    }
    for u in &e.unfinished {
        println!("{path}: an interrupted update (a mount finishes it): {u}");
    }
    // Mount a copy: the check writes nothing.
    let v = Volume::mount(&mut MemDev(dev.0.clone())).expect("a device without problems mounts");
    println!(
        "{path}: clean: {} blocks, {} segments, {} blocks free",
        v.layout.total_blocks,
        v.list().count(),
        v.free_blocks()
    );
    (true, Some(v))
}

fn repair_baio(path: &str, dev: &mut MemDev) -> Result<(bool, Option<Volume>), String> {
    match Volume::repair(dev) {
        Ok((v, changes)) => {
            for c in &changes {
                println!("{path}: repaired: {c}");
            }
            println!(
                "{path}: {}: {} blocks, {} segments, {} blocks free",
                if changes.is_empty() {
                    "the BAIO device is clean, nothing to repair there"
                } else {
                    "the BAIO device repaired"
                },
                v.layout.total_blocks,
                v.list().count(),
                v.free_blocks()
            );
            Ok((true, Some(v)))
        }
        Err(e) => {
            println!("{path}: cannot be repaired: {e:?}");
            Ok((false, None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test's image in a scratch directory of its own, removed with it (each image is
    /// 12 MiB, and the suite runs these tests on every CI run).
    struct Image(std::path::PathBuf);

    impl std::ops::Deref for Image {
        type Target = std::path::Path;
        fn deref(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl AsRef<std::path::Path> for Image {
        fn as_ref(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for Image {
        fn drop(&mut self) {
            if let Some(dir) = self.0.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }

    /// An image with a baiofs segment `files` and a raw one.
    fn image(name: &str) -> Image {
        let dir = std::env::temp_dir().join(format!("scion-fsck-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("hello.txt");
        std::fs::write(&src, "hello").unwrap();
        let out = dir.join("disk.img");
        make(&out.display().to_string(), 12 << 20, &[format!("files:1:256:fs={}", src.display()), "raw:2:64".into()])
            .unwrap();
        Image(out)
    }

    #[test]
    fn a_test_image_leaves_nothing_behind() {
        let p = image("scratch");
        let dir = p.parent().unwrap().to_path_buf();
        assert!(dir.join("disk.img").exists());
        drop(p);
        assert!(!dir.exists(), "{} is left in the temporary directory", dir.display());
    }

    fn fsck_of(path: &std::path::Path, extra: &[&str]) -> ExitCode {
        let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        args.push(path.display().to_string());
        fsck(&args).unwrap()
    }

    #[test]
    fn a_files_segment_with_a_damaged_magic_is_not_skipped() {
        let p = image("magic");
        assert_eq!(fsck_of(&p, &[]), ExitCode::SUCCESS);
        let mut d = std::fs::read(&p).unwrap();
        let v = Volume::mount(&mut MemDev(d.clone())).unwrap();
        let at = v.lookup("files").unwrap().start as usize * BLOCK;
        d[at] ^= 1;
        std::fs::write(&p, &d).unwrap();
        // files refuses it, so fsck must not call the image clean.
        assert_eq!(fsck_of(&p, &[]), ExitCode::FAILURE);
        // Unless the segment is not meant to hold a filesystem.
        assert_eq!(fsck_of(&p, &["--fs", "other"]), ExitCode::SUCCESS);
    }

    /// A `files` segment whose baiofs superblock has a damaged magic, is zeroed, or says
    /// another version: `--repair` rewrites it (as the docs say) and the filesystem mounts
    /// with its files again; it is not "clean, nothing to repair".
    #[test]
    fn repair_rewrites_a_files_superblock_with_a_bad_magic_or_version() {
        for (what, damage) in [
            ("a flipped magic", (|b: &mut [u8]| b[0] ^= 1) as fn(&mut [u8])),
            ("a zeroed superblock", |b: &mut [u8]| b[..BLOCK].fill(0)),
            ("another version", |b: &mut [u8]| b[8] = 1),
        ] {
            let p = image(&format!("superblock-{}", what.len()));
            let mut d = std::fs::read(&p).unwrap();
            let v = Volume::mount(&mut MemDev(d.clone())).unwrap();
            let at = v.lookup("files").unwrap().start as usize * BLOCK;
            damage(&mut d[at..at + BLOCK]);
            std::fs::write(&p, &d).unwrap();
            assert!(!has_path(&p, "files", "/hello.txt"), "{what}: refused before");
            assert_eq!(fsck_of(&p, &[]), ExitCode::FAILURE, "{what}");
            assert_eq!(fsck_of(&p, &["--repair"]), ExitCode::SUCCESS, "{what}: repaired");
            assert_eq!(fsck_of(&p, &[]), ExitCode::SUCCESS, "{what}: clean after the repair");
            assert!(has_path(&p, "files", "/hello.txt"), "{what}: the files are there again");
        }
    }

    /// QEMU rounds an image up to whole 512-byte sectors, so an image 100 bytes short of
    /// a whole block would look whole to the guest's block service: the launcher refuses
    /// it, as fsck does. One of whole sectors goes to the guest, whose blk refuses it.
    #[test]
    fn an_image_ending_inside_a_sector_is_refused_by_fsck_and_the_launcher() {
        let p = image("short");
        let d = std::fs::read(&p).unwrap();
        let short = p.with_extension("short");
        std::fs::write(&short, &d[..d.len() - 100]).unwrap();
        assert_eq!(fsck_of(&short, &[]), ExitCode::FAILURE);
        let o = crate::qemu::Options::new("tcg".into(), false, String::new(), Some(short.clone()));
        let e = crate::qemu::command(&p, &p, &o).expect_err("refused");
        assert!(e.contains("not a whole number of 4096-byte blocks"), "{e}");
        let o = crate::qemu::Options::new("tcg".into(), false, String::new(), Some(p.to_path_buf()));
        assert!(crate::qemu::command(&p, &p, &o).is_ok(), "a whole image is taken");
    }

    #[test]
    fn repair_makes_a_damaged_image_clean() {
        let p = image("repair");
        let mut d = std::fs::read(&p).unwrap();
        let v = Volume::mount(&mut MemDev(d.clone())).unwrap();
        d[v.layout.inode_start as usize * BLOCK + baio::INODE_SIZE + 4] ^= 1; // raw's owner
        d[v.layout.bitmap_start as usize * BLOCK] = 0;
        std::fs::write(&p, &d).unwrap();
        assert_eq!(fsck_of(&p, &[]), ExitCode::FAILURE);
        assert_eq!(fsck_of(&p, &["--repair"]), ExitCode::SUCCESS);
        assert_eq!(fsck_of(&p, &[]), ExitCode::SUCCESS);
        assert!(has_path(&p, "files", "/"), "the intact segment and its filesystem are kept");
        let ragged = p.with_extension("ragged");
        d.extend_from_slice(&[0u8; 512]);
        std::fs::write(&ragged, &d).unwrap();
        assert_eq!(fsck_of(&ragged, &[]), ExitCode::FAILURE, "not a whole number of blocks");
    }
}
