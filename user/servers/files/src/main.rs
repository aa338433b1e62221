//! The `files` compatibility server: one baiofs filesystem (a library filesystem in a
//! BAIO segment, `crates/baiofs`) served by path over IPC, so that ordinary programs
//! can open, read, write, close, list and remove files without linking a filesystem.
//! As an application of BAIO it makes its own caching choices: a library cache of
//! `cache=N` blocks (default 256) and read-ahead — opening a file prefetches its first
//! blocks, and each read prefetches the next ones — through asynchronous BAIO reads.
//! Arguments: `segment=NAME` (default `files`), `cache=N`.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

extern crate alloc;

use abi::Error;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use baiofs::{Fs, Kind};
use core::fmt::Write as _;
use files_api::{Request, MAX_IO};
use rt::ipc;
use rt::server::{self, Answer, Badge, Server};
use rt::{env, println};
use segdev::SegDev;

rt::entry!(main);

/// Bytes read ahead of a reader.
const READ_AHEAD: u64 = 64 * 1024;

fn fs_err(e: baiofs::Error) -> Error {
    match e {
        baiofs::Error::NotFound => Error::NotFound,
        baiofs::Error::Exists => Error::Exists,
        baiofs::Error::NotDir | baiofs::Error::IsDir | baiofs::Error::BadName => Error::InvalidArg,
        baiofs::Error::NotEmpty => Error::BadState,
        baiofs::Error::NoSpace | baiofs::Error::NoInode | baiofs::Error::TooFragmented => Error::NoSpace,
        baiofs::Error::Io | baiofs::Error::Corrupt(_) => Error::BadState,
    }
}

fn arg<'a>(key: &str) -> Option<&'a str> {
    rt::args().split(' ').find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

struct Files {
    fs: Fs<SegDev>,
    /// handle → (client program, inode)
    handles: BTreeMap<u64, (u32, u32)>,
    next: u64,
    /// Reply strings live here until the kernel has copied them.
    out: Vec<u8>,
    text: String,
    /// Tickets handed out (Cue): (client program, inode, slot of our copy, the view's
    /// id at blk), oldest first. Our copy tells whether the view is still open.
    tickets: Vec<(u32, u32, u64, u64)>,
}

impl Files {
    /// Take ticket `i` back (blk `REVOKE` through our segment: every copy of it goes, and
    /// the area its holder mapped soon after).
    fn revoke(&mut self, i: usize) {
        let (_, _, slot, id) = self.tickets.remove(i);
        let _ = self.fs.dev.seg.revoke(id);
        rt::free_slot(slot);
    }

    /// Revoke the tickets `which` picks.
    fn revoke_where(&mut self, which: impl Fn(u32, u32) -> bool) {
        let mut i = 0;
        while i < self.tickets.len() {
            let (c, ino, _, _) = self.tickets[i];
            if which(c, ino) {
                self.revoke(i);
            } else {
                i += 1;
            }
        }
    }

    fn ticket(&mut self, client: u32, handle: u64) -> Answer {
        let Some(ino) = self.mine(client, handle) else { return Answer::err(Error::InvalidCap) };
        // Tickets `net` closed (the transfer ended) are gone from our slots too.
        self.tickets.retain(|t| rt::sys::cap_info(t.2).is_ok() || { rt::free_slot(t.2); false });
        let (size, runs) = match self.fs.extents_of(ino) {
            Ok(e) => e,
            Err(e) => return Answer::err(fs_err(e)),
        };
        if runs.is_empty() {
            return Answer::err(Error::BadState);
        }
        if let Some(i) = self.tickets.iter().position(|t| t.0 == client) {
            if self.tickets.iter().filter(|t| t.0 == client).count() >= files_api::MAX_TICKETS {
                self.revoke(i);
            }
        }
        let slot = rt::alloc_slot();
        match self.fs.dev.seg.delegate(baio::READ, &runs, size, slot) {
            Ok((blocks, id)) => {
                self.tickets.push((client, ino, slot, id));
                let mut r = server::ok_msg(&[size, blocks]);
                r.push_item(abi::fpage::Fpage::caps(slot, 0, abi::rights::SEND), 0);
                Answer::Reply(r)
            }
            Err(e) => {
                rt::free_slot(slot);
                Answer::err(e)
            }
        }
    }

    fn mine(&self, client: u32, h: u64) -> Option<u32> {
        self.handles.get(&h).filter(|(c, _)| *c == client).map(|(_, i)| *i)
    }
}

fn done(r: Result<(), baiofs::Error>) -> Answer {
    Answer::result(r.map_err(fs_err))
}

impl Server for Files {
    type Request<'a> = Request<'a>;

    fn gone(&mut self, client: Badge) {
        self.handles.retain(|_, (c, _)| *c != client.program());
        self.revoke_where(|c, _| c == client.program());
    }

    fn handle(&mut self, from: Badge, req: Request<'_>) -> Answer {
        let client = from.program();
        let fs = &mut self.fs;
        match req {
            Request::Open { path, create } => {
                let r = match fs.lookup(path) {
                    Err(baiofs::Error::NotFound) if create => fs.create(path, Kind::File),
                    r => r,
                };
                match r.and_then(|ino| fs.stat(path).map(|s| (ino, s))) {
                    Ok((_, (Kind::Dir, _))) => Answer::err(Error::InvalidArg),
                    Ok((ino, (_, size))) => {
                        let _ = fs.prefetch(path, 0, READ_AHEAD);
                        let h = self.next;
                        self.next += 1;
                        self.handles.insert(h, (client, ino));
                        Answer::ok(&[h, size])
                    }
                    Err(e) => Answer::err(fs_err(e)),
                }
            }
            Request::Read { handle, offset, len } => match self.mine(client, handle) {
                None => Answer::err(Error::InvalidCap),
                Some(ino) => match self.fs.read_ino(ino, offset, &mut self.out[..len as usize]) {
                    Ok(n) => {
                        // Read ahead of this reader (asynchronous BAIO reads).
                        let _ = self.fs.prefetch_ino(ino, offset + n as u64, READ_AHEAD);
                        ipc::set_send_string(&self.out[..n]);
                        Answer::Reply(server::ok_msg(&[n as u64]).with_string())
                    }
                    Err(e) => Answer::err(fs_err(e)),
                },
            },
            Request::Write { handle, offset, data } => match self.mine(client, handle) {
                None => Answer::err(Error::InvalidCap),
                Some(ino) => match self.fs.write_ino(ino, offset, data) {
                    Ok(n) => Answer::ok(&[n as u64]),
                    Err(e) => Answer::err(fs_err(e)),
                },
            },
            Request::Close { handle } => match self.mine(client, handle) {
                Some(_) => {
                    self.handles.remove(&handle);
                    Answer::ok(&[])
                }
                None => Answer::err(Error::InvalidCap),
            },
            Request::List { dir } => match fs.list(dir) {
                Ok(l) => {
                    self.text.clear();
                    for e in l {
                        let _ = writeln!(self.text, "{} {} {}", if e.kind == Kind::Dir { 'd' } else { 'f' }, e.size, e.name);
                    }
                    ipc::set_send_string(self.text.as_bytes());
                    Answer::Reply(server::ok_msg(&[]).with_string())
                }
                Err(e) => Answer::err(fs_err(e)),
            },
            Request::Remove { path } => match fs.lookup(path) {
                Ok(ino) if self.handles.values().any(|(_, i)| *i == ino) => Answer::err(Error::BadState),
                Ok(ino) => {
                    // Its blocks are about to be free for others: no ticket reads them.
                    self.revoke_where(|_, i| i == ino);
                    done(self.fs.remove(path).map(|_| ()))
                }
                Err(e) => Answer::err(fs_err(e)),
            },
            Request::Mkdir { path } => done(fs.create(path, Kind::Dir).map(|_| ())),
            Request::Stat { path } => match fs.stat(path) {
                Ok((k, size)) => Answer::ok(&[k as u64, size]),
                Err(e) => Answer::err(fs_err(e)),
            },
            Request::Sync => done(fs.sync()),
            Request::Ticket { handle } => self.ticket(client, handle),
        }
    }
}

fn main() -> i32 {
    let name = arg("segment").unwrap_or("files");
    let cache = arg("cache").and_then(|c| c.parse().ok()).unwrap_or(256);
    let blk = rt::alloc_slot();
    if env::lookup("blk", blk).is_err() {
        println!("files: the manifest must grant blk");
        return 1;
    }
    let seg = match blk_api::client::open(blk, name, 3, rt::layout::SEGMENT_AREA) {
        Ok(s) => s,
        Err(e) => {
            println!("files: cannot open segment `{}`: {:?}", name, e);
            server::refuse_all(Error::BadState);
        }
    };
    let mut fs = match Fs::mount(SegDev::new(seg, blk)) {
        Ok(fs) => fs,
        Err(e) => {
            println!("files: refusing segment `{}`: {:?}", name, e);
            server::refuse_all(Error::BadState);
        }
    };
    for f in &fs.finished {
        println!("files: an interrupted update, finished: {}", f);
    }
    fs.set_cache_blocks(cache);
    let n = fs.list("/").map(|l| l.len()).unwrap_or(0);
    println!("files: baiofs on segment `{}`: {} entries in /, {} blocks free", name, n, fs.free_blocks());
    let mut files = Files { fs, handles: BTreeMap::new(), next: 1, out: alloc::vec![0u8; MAX_IO as usize], text: String::new(), tickets: Vec::new() };
    let mut buf = alloc::vec![0u8; MAX_IO as usize + 256];
    server::run(&mut files, &mut buf)
}
