//! The `files` compatibility server: one baiofs filesystem (a library filesystem in a
//! BAIO segment, `crates/baiofs`) served by path over IPC, so that ordinary programs
//! can open, read, write, close, list and remove files without linking a filesystem.
//! As an application of BAIO it makes its own caching choices: a library cache of
//! `cache=N` blocks (default 256) and read-ahead — opening a file prefetches its first
//! blocks, and each read prefetches the next ones — through asynchronous BAIO reads.
//! Arguments: `segment=NAME` (default `files`), `cache=N`.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::collections::BTreeMap;
use alloc::string::String;
use baiofs::{Fs, Kind};
use core::fmt::Write as _;
use progs::segdev::SegDev;
use rt::ipc::{self, Msg};
use rt::proto::files as p;
use rt::{env, println};

rt::entry!(main);

const AREA: u64 = 0x0000_5b00_0000_0000;
/// Bytes read ahead of a reader.
const READ_AHEAD: u64 = 64 * 1024;

fn err(e: Error) -> Msg {
    Msg::new(0, &[e as u64])
}

fn fs_err(e: baiofs::Error) -> Error {
    match e {
        baiofs::Error::NotFound => Error::NoPartner,
        baiofs::Error::Exists => Error::SlotInUse,
        baiofs::Error::NotDir | baiofs::Error::IsDir | baiofs::Error::BadName => Error::InvalidArg,
        baiofs::Error::NotEmpty => Error::BadState,
        baiofs::Error::NoSpace | baiofs::Error::NoInode | baiofs::Error::TooFragmented => Error::NoMemory,
        baiofs::Error::Io | baiofs::Error::Corrupt(_) => Error::BadState,
    }
}

fn arg<'a>(key: &str) -> Option<&'a str> {
    rt::args().split(' ').find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

fn main() -> i32 {
    let name = arg("segment").unwrap_or("files");
    let cache = arg("cache").and_then(|c| c.parse().ok()).unwrap_or(256);
    let blk = rt::alloc_slot();
    if env::lookup("blk", blk).is_err() {
        println!("files: the manifest must grant blk");
        return 1;
    }
    let seg = match rt::baio::open(blk, name, 3, AREA) {
        Ok(s) => s,
        Err(e) => {
            println!("files: cannot open segment `{}`: {:?}", name, e);
            ipc::refuse_all(Error::BadState);
        }
    };
    let mut fs = match Fs::mount(SegDev::new(seg)) {
        Ok(fs) => fs,
        Err(e) => {
            println!("files: refusing segment `{}`: {:?}", name, e);
            ipc::refuse_all(Error::BadState);
        }
    };
    fs.set_cache_blocks(cache);
    let n = fs.list("/").map(|l| l.len()).unwrap_or(0);
    println!("files: baiofs on segment `{}`: {} entries in /, {} blocks free", name, n, fs.free_blocks());
    // handle → (client, inode)
    let mut handles: BTreeMap<u64, (u64, u32)> = BTreeMap::new();
    let mut next = 1u64;
    let mut buf = alloc::vec![0u8; p::MAX_IO as usize + 256];
    let mut out = alloc::vec![0u8; p::MAX_IO as usize];
    let mut text = String::new();
    let mut reply: Option<Msg> = None;
    loop {
        let Ok((badge, m)) = ipc::serve(reply.take(), &mut buf) else { continue };
        let string = if m.tag().has_string() { &buf[..ipc::received_string_len().min(buf.len())] } else { &[][..] };
        if badge == 0 && m.label() == rt::proto::GONE {
            let gone = m.word(1) & 0xffff_ffff;
            handles.retain(|_, (c, _)| *c != gone);
            reply = Some(Msg::new(0, &[0]));
            continue;
        }
        let client = badge & 0xffff_ffff;
        let path = core::str::from_utf8(string).unwrap_or("\u{0}");
        let mine = |handles: &BTreeMap<u64, (u64, u32)>, h: u64| handles.get(&h).filter(|(c, _)| *c == client).map(|(_, i)| *i);
        reply = Some(match m.label() {
            p::OPEN => {
                let r = match fs.lookup(path) {
                    Err(baiofs::Error::NotFound) if m.word(1) & p::CREATE != 0 => fs.create(path, Kind::File),
                    r => r,
                };
                match r.and_then(|ino| fs.stat(path).map(|s| (ino, s))) {
                    Ok((_, (Kind::Dir, _))) => err(Error::InvalidArg),
                    Ok((ino, (_, size))) => {
                        let _ = fs.prefetch(path, 0, READ_AHEAD);
                        let h = next;
                        next += 1;
                        handles.insert(h, (client, ino));
                        Msg::new(0, &[0, h, size])
                    }
                    Err(e) => err(fs_err(e)),
                }
            }
            p::READ => match mine(&handles, m.word(1)) {
                None => err(Error::InvalidCap),
                Some(ino) => {
                    let len = m.word(3).min(p::MAX_IO) as usize;
                    match fs.read_ino(ino, m.word(2), &mut out[..len]) {
                        Ok(n) => {
                            // Read ahead of this reader (asynchronous BAIO reads).
                            let _ = fs.prefetch_ino(ino, m.word(2) + n as u64, READ_AHEAD);
                            ipc::set_send_string(&out[..n]);
                            Msg::new(0, &[0, n as u64]).with_string()
                        }
                        Err(e) => err(fs_err(e)),
                    }
                }
            },
            p::WRITE => match mine(&handles, m.word(1)) {
                None => err(Error::InvalidCap),
                Some(ino) => match fs.write_ino(ino, m.word(2), string) {
                    Ok(n) => Msg::new(0, &[0, n as u64]),
                    Err(e) => err(fs_err(e)),
                },
            },
            p::CLOSE => match handles.get(&m.word(1)) {
                Some((c, _)) if *c == client => {
                    handles.remove(&m.word(1));
                    Msg::new(0, &[0])
                }
                _ => err(Error::InvalidCap),
            },
            p::LIST => match fs.list(path) {
                Ok(l) => {
                    text.clear();
                    for e in l {
                        let _ = writeln!(text, "{} {} {}", if e.kind == Kind::Dir { 'd' } else { 'f' }, e.size, e.name);
                    }
                    ipc::set_send_string(text.as_bytes());
                    Msg::new(0, &[0]).with_string()
                }
                Err(e) => err(fs_err(e)),
            },
            p::REMOVE => match fs.lookup(path) {
                Ok(ino) if handles.values().any(|(_, i)| *i == ino) => err(Error::BadState),
                Ok(_) => fs.remove(path).map_or_else(|e| err(fs_err(e)), |_| Msg::new(0, &[0])),
                Err(e) => err(fs_err(e)),
            },
            p::MKDIR => fs.create(path, Kind::Dir).map_or_else(|e| err(fs_err(e)), |_| Msg::new(0, &[0])),
            p::STAT => match fs.stat(path) {
                Ok((k, size)) => Msg::new(0, &[0, k as u64, size]),
                Err(e) => err(fs_err(e)),
            },
            p::SYNC => fs.sync().map_or_else(|e| err(fs_err(e)), |_| Msg::new(0, &[0])),
            _ => err(Error::NoSys),
        });
    }
}
