//! `cargo xtask mkimage` and `cargo xtask fsck`: make and check BAIO device images on
//! the host with the same code (`crates/baio`) the block service mounts them with.

use baio::{BlockDev, MemDev, Volume, BLOCK, READ, WRITE};
use std::process::ExitCode;

fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mul) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1u64 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1u64 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().map(|n| n * mul).map_err(|_| format!("cannot read the size `{s}`"))
}

const USAGE: &str = "usage: cargo xtask mkimage OUT --size SIZE [--segment NAME:OWNER:BLOCKS[:FILE | :fs=PATH+PATH...]]...\n\
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
    println!("{out}: {} blocks of {BLOCK} bytes, {} segments, {} blocks free", v.layout.total_blocks, segs.len(), v.free_blocks());
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
            Some(f) if f.starts_with("fs=") => filesystem(blocks, &f[3..]).map_err(|e| format!("segment `{}`: {e}", parts[0]))?,
            Some(f) => std::fs::read(f).map_err(|e| format!("{f}: {e}"))?,
            None => Vec::new(),
        };
        if data.len() as u64 > blocks * BLOCK as u64 {
            return Err(format!("segment `{}`: the file has {} bytes, the segment only {}", parts[0], data.len(), blocks * BLOCK as u64));
        }
        let start = v.create(parts[0], owner, READ | WRITE, READ, blocks, u64::MAX, 0).map_err(|e| format!("segment `{}`: {e:?}", parts[0]))?.start;
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
            let mut kids: Vec<_> = std::fs::read_dir(host).map_err(|e| format!("{}: {e}", host.display()))?.filter_map(|e| e.ok()).map(|e| e.path()).collect();
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
            let mut kids: Vec<_> = std::fs::read_dir(p).map_err(|e| format!("{p}: {e}"))?.filter_map(|e| e.ok()).map(|e| e.path()).collect();
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
/// filesystem that mounts?
pub fn has_filesystem(path: &std::path::Path, name: &str) -> bool {
    let Ok(data) = std::fs::read(path) else { return false };
    let mut dev = MemDev(data);
    let Ok(v) = Volume::mount(&mut dev) else { return false };
    let Some(i) = v.lookup(name) else { return false };
    let at = i.start as usize * BLOCK;
    baiofs::Fs::mount(MemDev(dev.0[at..at + i.length as usize * BLOCK].to_vec())).is_ok()
}

pub fn fsck(args: &[String]) -> Result<ExitCode, String> {
    let path = args.first().ok_or("usage: cargo xtask fsck IMAGE")?;
    let data = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let mut dev = MemDev(data);
    let problems = Volume::check(&mut dev);
    if problems.is_empty() {
        let v = Volume::mount(&mut dev).map_err(|e| format!("{e:?}"))?;
        println!("{path}: clean: {} blocks, {} segments, {} blocks free", v.layout.total_blocks, v.list().count(), v.free_blocks());
        let mut bad = false;
        for i in v.list() {
            println!("  {:24} owner {:5} blocks {:8}+{:<8} rights {}/{} written {}", i.name, i.owner, i.start, i.length, i.rights_owner, i.rights_other, i.written);
            // A segment holding a baiofs filesystem is checked too.
            let at = i.start as usize * BLOCK;
            let seg = dev.0[at..at + i.length as usize * BLOCK].to_vec();
            if seg.len() >= 8 && seg[..8] == baiofs::MAGIC.to_le_bytes() {
                match baiofs::Fs::mount(MemDev(seg)) {
                    Ok(mut fs) => {
                        let files = fs.list("/").map(|l| l.len()).unwrap_or(0);
                        println!("    baiofs: clean, {files} entries in its root, {} blocks free", fs.free_blocks());
                    }
                    Err(e) => {
                        bad = true;
                        println!("    baiofs: {e:?}");
                    }
                }
            }
        }
        Ok(if bad { ExitCode::FAILURE } else { ExitCode::SUCCESS })
    } else {
        println!("{path}: {} problems", problems.len());
        for p in &problems {
            println!("  {p}");
        }
        Ok(ExitCode::FAILURE)
    }
}
