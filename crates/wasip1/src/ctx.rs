//! The descriptor table and every preview-1 call.
//!
//! Each call takes the program's memory ([`Mem`]) and its arguments as the engine got
//! them, and answers an errno; results go into the program's memory at the pointers it
//! gave, each checked. Nothing a program passes can make a call panic: every pointer is
//! checked by [`Mem`], every count is bounded before anything is allocated for it, every
//! descriptor is looked up. Calls Scion cannot do answer `ENOTSUP` (hard and symbolic
//! links, file times: baiofs keeps none) or `ENOSYS` (signals); [`Ctx::unknown`] is for an
//! import the runner does not know.

use crate::errno::*;
use crate::host::{Entry, Handle, Host, Kind, Sock};
use crate::mem::Mem;
use crate::path::{self, Resolved};
use alloc::string::String;
use alloc::vec::Vec;

/// The most descriptors a program holds at once (past it: `EMFILE`).
pub const MAX_FDS: usize = 1024;
/// The most bytes one call moves through files or sockets (a bigger request is served
/// in part, as POSIX allows).
pub const MAX_IO: usize = 1 << 20;
/// The most subscriptions one `poll_oneoff` takes.
pub const MAX_SUBSCRIPTIONS: u32 = 4096;

// Layouts (`wasi_snapshot_preview1`'s witx, little-endian).
const FILETYPE_CHAR: u8 = 2;
const FILETYPE_DIR: u8 = 3;
const FILETYPE_FILE: u8 = 4;
const FILETYPE_SOCKET_STREAM: u8 = 6;
const OFLAG_CREAT: u32 = 1;
const OFLAG_DIRECTORY: u32 = 2;
const OFLAG_EXCL: u32 = 4;
const OFLAG_TRUNC: u32 = 8;
const FDFLAG_APPEND: u32 = 1;
const FDFLAG_NONBLOCK: u32 = 4;
const RIGHT_FD_READ: u64 = 1 << 1;
const RIGHT_FD_WRITE: u64 = 1 << 6;
/// Every right preview 1 names: Scion checks what a descriptor may do by what it is
/// (and the files server by the program's principal), not by rights bits.
const RIGHTS_ALL: u64 = (1 << 30) - 1;
const WHENCE_SET: u32 = 0;
const WHENCE_CUR: u32 = 1;
const WHENCE_END: u32 = 2;
const CLOCK_REALTIME: u32 = 0;
const CLOCK_MONOTONIC: u32 = 1;
const CLOCK_PROCESS: u32 = 2;
const CLOCK_THREAD: u32 = 3;
const EVENT_CLOCK: u8 = 0;
const EVENT_FD_READ: u8 = 1;
const EVENT_FD_WRITE: u8 = 2;
const SUBCLOCK_ABSTIME: u16 = 1;
const SDFLAG_RD: u32 = 1;
const SDFLAG_WR: u32 = 2;
const DIRENT: usize = 24;

/// What a descriptor stands for.
#[derive(Debug)]
pub enum Fd {
    Stdin,
    Stdout,
    Stderr,
    /// A directory: its Scion path, and the name the program sees for a preopened one.
    Dir {
        path: String,
        preopen: Option<String>,
    },
    File {
        path: String,
        h: Handle,
        pos: u64,
        append: bool,
        read: bool,
        write: bool,
    },
    Listener {
        s: Sock,
        nonblock: bool,
    },
    Conn {
        s: Sock,
        nonblock: bool,
    },
}

/// Why a program stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// `proc_exit(code)`.
    Code(u32),
}

/// One program's WASI state.
pub struct Ctx<H: Host> {
    pub host: H,
    fds: Vec<Option<Fd>>,
    args: Vec<String>,
    env: Vec<String>,
    /// Set by `proc_exit`: the engine stops the program.
    pub exit: Option<Exit>,
}

type R<T = ()> = Result<T, Errno>;

fn done(r: R) -> Errno {
    match r {
        Ok(()) => SUCCESS,
        Err(e) => e,
    }
}

fn fs(e: abi::Error) -> Errno {
    from_error(e)
}

/// A stable inode number for a Scion path (baiofs does not show its own).
fn ino(path: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in path.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h | 1
}

fn filestat(m: &mut Mem, p: u32, path: &str, ft: u8, size: u64) -> R {
    let mut b = [0u8; 64];
    b[0..8].copy_from_slice(&1u64.to_le_bytes());
    b[8..16].copy_from_slice(&ino(path).to_le_bytes());
    b[16] = ft;
    b[24..32].copy_from_slice(&1u64.to_le_bytes());
    b[32..40].copy_from_slice(&size.to_le_bytes());
    m.put(p, &b)
}

fn filetype(k: Kind) -> u8 {
    match k {
        Kind::File => FILETYPE_FILE,
        Kind::Dir => FILETYPE_DIR,
    }
}

impl<H: Host> Ctx<H> {
    /// A program with `args` (its name first), `env` (`NAME=value`) and `preopens`
    /// ((name the program sees, Scion directory)), as descriptors 3, 4, … .
    pub fn new(host: H, args: Vec<String>, env: Vec<String>, preopens: &[(String, String)]) -> Self {
        let mut fds = alloc::vec![Some(Fd::Stdin), Some(Fd::Stdout), Some(Fd::Stderr)];
        for (name, dir) in preopens {
            fds.push(Some(Fd::Dir { path: dir.clone(), preopen: Some(name.clone()) }));
        }
        Ctx { host, fds, args, env, exit: None }
    }

    /// Give the program a listening socket as the next descriptor (as wasmtime's
    /// `--tcplisten` does): its number.
    pub fn preopen_listener(&mut self, s: Sock) -> u32 {
        self.fds.push(Some(Fd::Listener { s, nonblock: false }));
        (self.fds.len() - 1) as u32
    }

    fn fd(&mut self, fd: u32) -> R<&mut Fd> {
        self.fds.get_mut(fd as usize).and_then(Option::as_mut).ok_or(BADF)
    }

    fn insert(&mut self, f: Fd) -> R<u32> {
        if let Some(i) = self.fds.iter().position(Option::is_none) {
            self.fds[i] = Some(f);
            return Ok(i as u32);
        }
        if self.fds.len() >= MAX_FDS {
            return Err(MFILE);
        }
        self.fds.push(Some(f));
        Ok((self.fds.len() - 1) as u32)
    }

    /// The Scion directory of descriptor `fd` (`ENOTDIR` for another kind).
    fn dir(&mut self, fd: u32) -> R<String> {
        match self.fd(fd)? {
            Fd::Dir { path, .. } => Ok(path.clone()),
            _ => Err(NOTDIR),
        }
    }

    fn resolve(&mut self, m: &Mem, fd: u32, p: u32, len: u32) -> R<Resolved> {
        let base = self.dir(fd)?;
        if len as usize > path::PATH_MAX {
            return Err(NAMETOOLONG);
        }
        let rel = m.str(p, len)?;
        path::resolve(&base, rel, self.host.name_max())
    }

    fn stat(&mut self, path: &str) -> R<Option<(Kind, u64)>> {
        match self.host.stat(path) {
            Ok(s) => Ok(Some(s)),
            Err(abi::Error::NotFound) => Ok(None),
            Err(e) => Err(fs(e)),
        }
    }

    // Arguments and environment.

    fn strings_sizes(v: &[String], m: &mut Mem, count: u32, size: u32) -> R {
        let total: usize = v.iter().map(|s| s.len() + 1).sum();
        m.put_u32(count, v.len() as u32)?;
        m.put_u32(size, u32::try_from(total).map_err(|_| OVERFLOW)?)
    }

    fn strings_get(v: &[String], m: &mut Mem, ptrs: u32, buf: u32) -> R {
        // Both arrays must be wholly there before anything is written.
        let total: u64 = v.iter().map(|s| s.len() as u64 + 1).sum();
        m.bytes(ptrs, u32::try_from(v.len() as u64 * 4).map_err(|_| FAULT)?)?;
        m.bytes(buf, u32::try_from(total).map_err(|_| FAULT)?)?;
        let mut at = buf;
        for (i, s) in v.iter().enumerate() {
            m.put_u32(ptrs + 4 * i as u32, at)?;
            m.put(at, s.as_bytes())?;
            m.put(at + s.len() as u32, &[0])?;
            at += s.len() as u32 + 1;
        }
        Ok(())
    }

    pub fn args_sizes_get(&mut self, m: &mut Mem, count: u32, size: u32) -> Errno {
        done(Self::strings_sizes(&self.args, m, count, size))
    }
    pub fn args_get(&mut self, m: &mut Mem, ptrs: u32, buf: u32) -> Errno {
        done(Self::strings_get(&self.args, m, ptrs, buf))
    }
    pub fn environ_sizes_get(&mut self, m: &mut Mem, count: u32, size: u32) -> Errno {
        done(Self::strings_sizes(&self.env, m, count, size))
    }
    pub fn environ_get(&mut self, m: &mut Mem, ptrs: u32, buf: u32) -> Errno {
        done(Self::strings_get(&self.env, m, ptrs, buf))
    }

    // Clocks, randomness, the process.

    fn now(&self, id: u32) -> R<u64> {
        match id {
            CLOCK_REALTIME => Ok(self.host.realtime_ns()),
            // The CPU-time clocks count real time since boot: a program's own CPU time
            // is not kept apart from its threads' waits (documented in docs/wasi.md).
            CLOCK_MONOTONIC | CLOCK_PROCESS | CLOCK_THREAD => Ok(self.host.monotonic_ns()),
            _ => Err(INVAL),
        }
    }

    pub fn clock_res_get(&mut self, m: &mut Mem, id: u32, out: u32) -> Errno {
        done(self.now(id).and_then(|_| m.put_u64(out, if id == CLOCK_REALTIME { 1_000 } else { 1 })))
    }

    pub fn clock_time_get(&mut self, m: &mut Mem, id: u32, _precision: u64, out: u32) -> Errno {
        done(self.now(id).and_then(|t| m.put_u64(out, t)))
    }

    pub fn random_get(&mut self, m: &mut Mem, buf: u32, len: u32) -> Errno {
        done(m.bytes_mut(buf, len).map(|b| self.host.random(b)))
    }

    /// `proc_exit`: the engine must stop the program when this returns.
    pub fn proc_exit(&mut self, code: u32) {
        self.exit = Some(Exit::Code(code));
    }

    pub fn proc_raise(&mut self, _sig: u32) -> Errno {
        NOSYS
    }

    pub fn sched_yield(&mut self) -> Errno {
        SUCCESS
    }

    /// An import of `wasi_snapshot_preview1` the runner does not know.
    pub fn unknown(&mut self) -> Errno {
        NOSYS
    }

    // Descriptors.

    pub fn fd_close(&mut self, fd: u32) -> Errno {
        let Some(slot) = self.fds.get_mut(fd as usize) else { return BADF };
        match slot.take() {
            None => BADF,
            Some(Fd::File { h, .. }) => {
                self.host.close(h);
                SUCCESS
            }
            Some(Fd::Listener { s, .. } | Fd::Conn { s, .. }) => {
                self.host.sock_close(s);
                SUCCESS
            }
            Some(_) => SUCCESS,
        }
    }

    pub fn fd_renumber(&mut self, from: u32, to: u32) -> Errno {
        if self.fd(from).is_err() || self.fd(to).is_err() {
            return BADF;
        }
        if from == to {
            return SUCCESS;
        }
        let f = self.fds[from as usize].take();
        let _ = self.fd_close(to);
        self.fds[to as usize] = f;
        SUCCESS
    }

    pub fn fd_fdstat_get(&mut self, m: &mut Mem, fd: u32, out: u32) -> Errno {
        let (ft, flags) = match self.fd(fd) {
            Err(e) => return e,
            Ok(Fd::Stdin | Fd::Stdout | Fd::Stderr) => (FILETYPE_CHAR, 0u16),
            Ok(Fd::Dir { .. }) => (FILETYPE_DIR, 0),
            Ok(Fd::File { append, .. }) => (FILETYPE_FILE, if *append { FDFLAG_APPEND as u16 } else { 0 }),
            Ok(Fd::Listener { nonblock, .. } | Fd::Conn { nonblock, .. }) => {
                (FILETYPE_SOCKET_STREAM, if *nonblock { FDFLAG_NONBLOCK as u16 } else { 0 })
            }
        };
        let mut b = [0u8; 24];
        b[0] = ft;
        b[2..4].copy_from_slice(&flags.to_le_bytes());
        b[8..16].copy_from_slice(&RIGHTS_ALL.to_le_bytes());
        b[16..24].copy_from_slice(&RIGHTS_ALL.to_le_bytes());
        done(m.put(out, &b))
    }

    pub fn fd_fdstat_set_flags(&mut self, fd: u32, flags: u32) -> Errno {
        match self.fd(fd) {
            Err(e) => e,
            Ok(Fd::File { append, .. }) if flags & !FDFLAG_APPEND == 0 => {
                *append = flags & FDFLAG_APPEND != 0;
                SUCCESS
            }
            Ok(Fd::Listener { nonblock, .. } | Fd::Conn { nonblock, .. }) if flags & !FDFLAG_NONBLOCK == 0 => {
                *nonblock = flags & FDFLAG_NONBLOCK != 0;
                SUCCESS
            }
            Ok(_) => NOTSUP,
        }
    }

    pub fn fd_fdstat_set_rights(&mut self, fd: u32, _base: u64, _inheriting: u64) -> Errno {
        match self.fd(fd) {
            Err(e) => e,
            // Rights are not kept as bits (see RIGHTS_ALL): narrowing them is refused
            // rather than pretended.
            Ok(_) => NOTSUP,
        }
    }

    pub fn fd_filestat_get(&mut self, m: &mut Mem, fd: u32, out: u32) -> Errno {
        let r = match self.fd(fd) {
            Err(e) => Err(e),
            Ok(Fd::Stdin | Fd::Stdout | Fd::Stderr) => Ok(("/dev/console".into(), FILETYPE_CHAR, 0)),
            Ok(Fd::Listener { .. } | Fd::Conn { .. }) => Ok((String::new(), FILETYPE_SOCKET_STREAM, 0)),
            Ok(Fd::Dir { path, .. }) => Ok((path.clone(), FILETYPE_DIR, 0)),
            Ok(Fd::File { path, .. }) => {
                let path = path.clone();
                self.host.stat(&path).map(|(_, size)| (path, FILETYPE_FILE, size)).map_err(fs)
            }
        };
        done(r.and_then(|(p, ft, size)| filestat(m, out, &p, ft, size)))
    }

    pub fn fd_filestat_set_size(&mut self, fd: u32, size: u64) -> Errno {
        match self.fd(fd) {
            Err(e) => e,
            Ok(Fd::File { path, h, write, .. }) => {
                if !*write {
                    return BADF;
                }
                let (path, h) = (path.clone(), *h);
                done(self.host.truncate(&path, h, size).map_err(fs))
            }
            Ok(Fd::Dir { .. }) => ISDIR,
            Ok(_) => INVAL,
        }
    }

    pub fn fd_filestat_set_times(&mut self, fd: u32, _atim: u64, _mtim: u64, _flags: u32) -> Errno {
        match self.fd(fd) {
            Err(e) => e,
            Ok(_) => NOTSUP,
        }
    }

    pub fn fd_advise(&mut self, fd: u32, _off: u64, _len: u64, advice: u32) -> Errno {
        match self.fd(fd) {
            Err(e) => e,
            Ok(Fd::File { .. }) if advice <= 5 => SUCCESS,
            Ok(Fd::File { .. }) => INVAL,
            Ok(Fd::Dir { .. }) => BADF,
            Ok(_) => SPIPE,
        }
    }

    pub fn fd_allocate(&mut self, fd: u32, off: u64, len: u64) -> Errno {
        let (path, h) = match self.fd(fd) {
            Err(e) => return e,
            Ok(Fd::File { path, h, write: true, .. }) => (path.clone(), *h),
            Ok(Fd::File { .. }) => return BADF,
            Ok(Fd::Dir { .. }) => return ISDIR,
            Ok(_) => return SPIPE,
        };
        let Some(end) = off.checked_add(len) else { return FBIG };
        match self.host.stat(&path) {
            Err(e) => fs(e),
            Ok((_, size)) if size >= end => SUCCESS,
            Ok(_) => done(self.host.truncate(&path, h, end).map_err(fs)),
        }
    }

    pub fn fd_sync(&mut self, fd: u32) -> Errno {
        match self.fd(fd) {
            Err(e) => e,
            Ok(Fd::File { h, .. }) => {
                let h = *h;
                done(self.host.fsync(h).map_err(fs))
            }
            // A directory's changes are durable when files answers them.
            Ok(Fd::Dir { .. }) => SUCCESS,
            Ok(_) => INVAL,
        }
    }

    pub fn fd_datasync(&mut self, fd: u32) -> Errno {
        self.fd_sync(fd)
    }

    pub fn fd_prestat_get(&mut self, m: &mut Mem, fd: u32, out: u32) -> Errno {
        match self.fd(fd) {
            Ok(Fd::Dir { preopen: Some(name), .. }) => {
                let n = name.len() as u32;
                let mut b = [0u8; 8];
                b[4..8].copy_from_slice(&n.to_le_bytes());
                done(m.put(out, &b))
            }
            _ => BADF,
        }
    }

    pub fn fd_prestat_dir_name(&mut self, m: &mut Mem, fd: u32, p: u32, len: u32) -> Errno {
        match self.fd(fd) {
            Ok(Fd::Dir { preopen: Some(name), .. }) => {
                if (len as usize) < name.len() {
                    return NAMETOOLONG;
                }
                let name = name.clone();
                done(m.put(p, name.as_bytes()))
            }
            _ => BADF,
        }
    }

    /// Read into the iovecs from `fd` (at `at`, or the descriptor's position).
    fn read(&mut self, m: &mut Mem, fd: u32, iovs: u32, n: u32, at: Option<u64>) -> R<u32> {
        Self::vectored(self, m, iovs, n, |me, m, p, want, total| {
            let buf = m.bytes_mut(p, want as u32)?;
            Ok(match me.fd(fd)? {
                Fd::Stdin if at.is_none() => me.host.console_read(buf).map_err(fs)?,
                Fd::File { h, pos, read: true, .. } => {
                    let (h, off) = (*h, at.unwrap_or(*pos));
                    let got = me.host.read(h, off, buf).map_err(fs)?;
                    if at.is_none() {
                        if let Ok(Fd::File { pos, .. }) = me.fd(fd) {
                            *pos += got as u64;
                        }
                    }
                    got
                }
                Fd::Conn { s, nonblock } if at.is_none() => {
                    let (s, wait) = (*s, !*nonblock && total == 0);
                    match me.host.recv(s, buf, wait) {
                        Err(abi::Error::WouldBlock) if total > 0 => 0,
                        r => r.map_err(fs)?,
                    }
                }
                Fd::Stdin | Fd::Conn { .. } => return Err(SPIPE),
                Fd::Dir { .. } => return Err(ISDIR),
                _ => return Err(BADF),
            })
        })
    }

    /// Write the iovecs to `fd` (at `at`, or the descriptor's position, or its end when
    /// it appends).
    fn write(&mut self, m: &mut Mem, fd: u32, iovs: u32, n: u32, at: Option<u64>) -> R<u32> {
        Self::vectored(self, m, iovs, n, |me, m, p, want, total| {
            let data = m.bytes(p, want as u32)?;
            Ok(match me.fd(fd)? {
                Fd::Stdout | Fd::Stderr if at.is_none() => {
                    me.host.console_write(data);
                    want
                }
                Fd::File { path, h, pos, append, write: true, .. } => {
                    let (h, path, append) = (*h, path.clone(), *append);
                    let off = match at {
                        Some(o) => o,
                        None if append => me.host.stat(&path).map_err(fs)?.1,
                        None => *pos,
                    };
                    let mut put = 0;
                    while put < want {
                        let k = me.host.write(h, off + put as u64, &data[put..]).map_err(fs)?;
                        if k == 0 {
                            break;
                        }
                        put += k;
                    }
                    if at.is_none() {
                        if let Ok(Fd::File { pos, .. }) = me.fd(fd) {
                            *pos = off + put as u64;
                        }
                    }
                    put
                }
                Fd::Conn { s, nonblock } if at.is_none() => {
                    let (s, wait) = (*s, !*nonblock);
                    match me.host.send(s, data, wait) {
                        Err(abi::Error::WouldBlock) if total > 0 => 0,
                        r => r.map_err(fs)?,
                    }
                }
                Fd::Stdout | Fd::Stderr | Fd::Conn { .. } => return Err(SPIPE),
                Fd::Dir { .. } => return Err(ISDIR),
                _ => return Err(BADF),
            })
        })
    }

    /// Walk the iovecs at `iovs`, `MAX_IO` bytes in all at most: `one(self, memory,
    /// pointer, length, bytes so far)` moves one iovec's bytes and says how many; a short
    /// one ends the walk (as POSIX's readv/writev). The bytes moved.
    fn vectored(
        &mut self,
        m: &mut Mem,
        iovs: u32,
        n: u32,
        mut one: impl FnMut(&mut Self, &mut Mem, u32, usize, usize) -> R<usize>,
    ) -> R<u32> {
        let mut total = 0usize;
        for (p, l) in m.iovecs(iovs, n)? {
            let want = (l as usize).min(MAX_IO - total);
            if want == 0 {
                if total >= MAX_IO {
                    break;
                }
                continue;
            }
            let k = one(self, m, p, want, total)?;
            total += k;
            if k < want {
                break;
            }
        }
        Ok(total as u32)
    }

    pub fn fd_read(&mut self, m: &mut Mem, fd: u32, iovs: u32, n: u32, out: u32) -> Errno {
        done(m.bytes(out, 4).map(|_| ()).and_then(|_| self.read(m, fd, iovs, n, None)).and_then(|k| m.put_u32(out, k)))
    }
    pub fn fd_pread(&mut self, m: &mut Mem, fd: u32, iovs: u32, n: u32, off: u64, out: u32) -> Errno {
        done(
            m.bytes(out, 4)
                .map(|_| ())
                .and_then(|_| self.read(m, fd, iovs, n, Some(off)))
                .and_then(|k| m.put_u32(out, k)),
        )
    }
    pub fn fd_write(&mut self, m: &mut Mem, fd: u32, iovs: u32, n: u32, out: u32) -> Errno {
        done(m.bytes(out, 4).map(|_| ()).and_then(|_| self.write(m, fd, iovs, n, None)).and_then(|k| m.put_u32(out, k)))
    }
    pub fn fd_pwrite(&mut self, m: &mut Mem, fd: u32, iovs: u32, n: u32, off: u64, out: u32) -> Errno {
        done(
            m.bytes(out, 4)
                .map(|_| ())
                .and_then(|_| self.write(m, fd, iovs, n, Some(off)))
                .and_then(|k| m.put_u32(out, k)),
        )
    }

    pub fn fd_seek(&mut self, m: &mut Mem, fd: u32, off: i64, whence: u32, out: u32) -> Errno {
        let r = (|| {
            m.bytes(out, 8)?;
            let (path, cur) = match self.fd(fd)? {
                Fd::File { path, pos, .. } => (path.clone(), *pos),
                Fd::Dir { .. } => return Err(BADF),
                _ => return Err(SPIPE),
            };
            let base = match whence {
                WHENCE_SET => 0,
                WHENCE_CUR => cur,
                WHENCE_END => self.host.stat(&path).map_err(fs)?.1,
                _ => return Err(INVAL),
            };
            let new = base.checked_add_signed(off).ok_or(INVAL)?;
            if new > i64::MAX as u64 {
                return Err(INVAL);
            }
            if let Fd::File { pos, .. } = self.fd(fd)? {
                *pos = new;
            }
            m.put_u64(out, new)
        })();
        done(r)
    }

    pub fn fd_tell(&mut self, m: &mut Mem, fd: u32, out: u32) -> Errno {
        match self.fd(fd) {
            Ok(Fd::File { pos, .. }) => {
                let p = *pos;
                done(m.put_u64(out, p))
            }
            Ok(Fd::Dir { .. }) => BADF,
            Ok(_) => SPIPE,
            Err(e) => e,
        }
    }

    pub fn fd_readdir(&mut self, m: &mut Mem, fd: u32, buf: u32, len: u32, cookie: u64, out: u32) -> Errno {
        let r = (|| {
            m.bytes(out, 4)?;
            m.bytes(buf, len)?;
            let dir = match self.fd(fd)? {
                Fd::Dir { path, .. } => path.clone(),
                _ => return Err(NOTDIR),
            };
            let mut entries: Vec<Entry> = alloc::vec![
                Entry { name: ".".into(), kind: Kind::Dir, size: 0 },
                Entry { name: "..".into(), kind: Kind::Dir, size: 0 },
            ];
            entries.extend(self.host.list(&dir).map_err(fs)?);
            let mut used = 0u32;
            for (i, e) in entries.iter().enumerate().skip(usize::try_from(cookie).unwrap_or(usize::MAX)) {
                let full = if e.name.starts_with('.') && e.name.len() <= 2 {
                    dir.clone()
                } else if dir == "/" {
                    alloc::format!("/{}", e.name)
                } else {
                    alloc::format!("{dir}/{}", e.name)
                };
                let mut rec = Vec::with_capacity(DIRENT + e.name.len());
                rec.extend_from_slice(&(i as u64 + 1).to_le_bytes());
                rec.extend_from_slice(&ino(&full).to_le_bytes());
                rec.extend_from_slice(&(e.name.len() as u32).to_le_bytes());
                rec.extend_from_slice(&[filetype(e.kind), 0, 0, 0]);
                rec.extend_from_slice(e.name.as_bytes());
                // The last record is cut at the buffer's end: the program sees a full
                // buffer and asks again with a bigger one or the next cookie.
                let room = (len - used) as usize;
                let k = rec.len().min(room);
                m.put(buf + used, &rec[..k])?;
                used += k as u32;
                if k < rec.len() {
                    break;
                }
            }
            m.put_u32(out, used)
        })();
        done(r)
    }

    // Paths.

    pub fn path_create_directory(&mut self, m: &mut Mem, fd: u32, p: u32, len: u32) -> Errno {
        let r = (|| {
            let r = self.resolve(m, fd, p, len)?;
            if r.is_base || self.stat(&r.path)?.is_some() {
                return Err(EXIST);
            }
            self.host.mkdir(&r.path).map_err(fs)
        })();
        done(r)
    }

    pub fn path_filestat_get(&mut self, m: &mut Mem, fd: u32, _flags: u32, p: u32, len: u32, out: u32) -> Errno {
        let r = (|| {
            m.bytes(out, 64)?;
            let r = self.resolve(m, fd, p, len)?;
            match self.stat(&r.path)? {
                None => Err(NOENT),
                Some((Kind::File, _)) if r.dir_only => Err(NOTDIR),
                Some((k, size)) => filestat(m, out, &r.path, filetype(k), size),
            }
        })();
        done(r)
    }

    pub fn path_filestat_set_times(&mut self, m: &mut Mem, fd: u32, p: u32, len: u32) -> Errno {
        let r = (|| {
            let r = self.resolve(m, fd, p, len)?;
            self.stat(&r.path)?.ok_or(NOENT)?;
            Err(NOTSUP)
        })();
        done(r)
    }

    /// `path_open`. `rights` is the base rights the program asks for.
    #[allow(clippy::too_many_arguments)]
    pub fn path_open(
        &mut self,
        m: &mut Mem,
        fd: u32,
        p: u32,
        len: u32,
        oflags: u32,
        rights: u64,
        fdflags: u32,
        out: u32,
    ) -> Errno {
        let r = (|| {
            m.bytes(out, 4)?;
            if oflags & !(OFLAG_CREAT | OFLAG_DIRECTORY | OFLAG_EXCL | OFLAG_TRUNC) != 0 {
                return Err(INVAL);
            }
            let r = self.resolve(m, fd, p, len)?;
            let want_dir = oflags & OFLAG_DIRECTORY != 0 || r.dir_only;
            let (read, write) = (rights & RIGHT_FD_READ != 0, rights & RIGHT_FD_WRITE != 0);
            let append = fdflags & FDFLAG_APPEND != 0;
            let f = match self.stat(&r.path)? {
                Some(_) if oflags & OFLAG_CREAT != 0 && oflags & OFLAG_EXCL != 0 => return Err(EXIST),
                Some((Kind::Dir, _)) => {
                    if oflags & OFLAG_TRUNC != 0 || write || append {
                        return Err(ISDIR);
                    }
                    Fd::Dir { path: r.path, preopen: None }
                }
                Some((Kind::File, _)) if want_dir => return Err(NOTDIR),
                Some((Kind::File, size)) => {
                    if oflags & OFLAG_TRUNC != 0 && !write {
                        return Err(INVAL);
                    }
                    let (h, _) = self.host.open(&r.path, false).map_err(fs)?;
                    if oflags & OFLAG_TRUNC != 0 && size > 0 {
                        if let Err(e) = self.host.truncate(&r.path, h, 0) {
                            self.host.close(h);
                            return Err(fs(e));
                        }
                    }
                    Fd::File { path: r.path, h, pos: 0, append, read, write }
                }
                None if oflags & OFLAG_CREAT == 0 => return Err(NOENT),
                None if want_dir || r.is_base => return Err(ISDIR),
                None => {
                    let (h, _) = self.host.open(&r.path, true).map_err(fs)?;
                    Fd::File { path: r.path, h, pos: 0, append, read, write }
                }
            };
            let h = match &f {
                Fd::File { h, .. } => Some(*h),
                _ => None,
            };
            match self.insert(f) {
                Ok(n) => m.put_u32(out, n),
                Err(e) => {
                    if let Some(h) = h {
                        self.host.close(h);
                    }
                    Err(e)
                }
            }
        })();
        done(r)
    }

    pub fn path_readlink(&mut self, m: &mut Mem, fd: u32, p: u32, len: u32) -> Errno {
        let r = (|| {
            let r = self.resolve(m, fd, p, len)?;
            self.stat(&r.path)?.ok_or(NOENT)?;
            // Scion's filesystems have no symbolic links: nothing is one.
            Err(INVAL)
        })();
        done(r)
    }

    pub fn path_remove_directory(&mut self, m: &mut Mem, fd: u32, p: u32, len: u32) -> Errno {
        let r = (|| {
            let r = self.resolve(m, fd, p, len)?;
            if r.is_base {
                return Err(INVAL);
            }
            match self.stat(&r.path)? {
                None => Err(NOENT),
                Some((Kind::File, _)) => Err(NOTDIR),
                Some((Kind::Dir, _)) => {
                    if !self.host.list(&r.path).map_err(fs)?.is_empty() {
                        return Err(NOTEMPTY);
                    }
                    self.host.remove(&r.path).map_err(fs)
                }
            }
        })();
        done(r)
    }

    pub fn path_unlink_file(&mut self, m: &mut Mem, fd: u32, p: u32, len: u32) -> Errno {
        let r = (|| {
            let r = self.resolve(m, fd, p, len)?;
            match self.stat(&r.path)? {
                None => Err(NOENT),
                Some((Kind::Dir, _)) => Err(ISDIR),
                Some((Kind::File, _)) if r.dir_only => Err(NOTDIR),
                Some((Kind::File, _)) => self.host.remove(&r.path).map_err(fs),
            }
        })();
        done(r)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn path_rename(&mut self, m: &mut Mem, fd: u32, p: u32, len: u32, new_fd: u32, np: u32, nlen: u32) -> Errno {
        let r = (|| {
            let from = self.resolve(m, fd, p, len)?;
            let to = self.resolve(m, new_fd, np, nlen)?;
            if from.is_base || to.is_base {
                return Err(BUSY);
            }
            let Some((fk, _)) = self.stat(&from.path)? else { return Err(NOENT) };
            if fk == Kind::File && (from.dir_only || to.dir_only) {
                return Err(NOTDIR);
            }
            match (fk, self.stat(&to.path)?) {
                (Kind::Dir, Some((Kind::File, _))) => return Err(NOTDIR),
                (Kind::File, Some((Kind::Dir, _))) => return Err(ISDIR),
                (Kind::Dir, Some((Kind::Dir, _)))
                    if from.path != to.path && !self.host.list(&to.path).map_err(fs)?.is_empty() =>
                {
                    return Err(NOTEMPTY)
                }
                _ => {}
            }
            if fk == Kind::Dir && to.path.starts_with(&from.path) && to.path[from.path.len()..].starts_with('/') {
                return Err(INVAL);
            }
            self.host.rename(&from.path, &to.path).map_err(fs)
        })();
        done(r)
    }

    pub fn path_link(&mut self, m: &mut Mem, fd: u32, p: u32, len: u32) -> Errno {
        done(self.resolve(m, fd, p, len).and(Err(NOTSUP)))
    }

    pub fn path_symlink(&mut self, m: &mut Mem, fd: u32, p: u32, len: u32) -> Errno {
        done(self.resolve(m, fd, p, len).and(Err(NOTSUP)))
    }

    // Waiting.

    pub fn poll_oneoff(&mut self, m: &mut Mem, subs: u32, events: u32, n: u32, out: u32) -> Errno {
        let r = (|| {
            if n == 0 {
                return Err(INVAL);
            }
            if n > MAX_SUBSCRIPTIONS {
                return Err(NOTSUP);
            }
            m.bytes(subs, n * 48)?;
            m.bytes(events, n * 32)?;
            m.bytes(out, 4)?;
            // (userdata, kind, fd or deadline, socket to wait on)
            let now = self.host.monotonic_ns();
            let mut ready: Vec<(u64, u8, Errno)> = Vec::new();
            let mut deadline = u64::MAX;
            let mut clock_userdata = Vec::new();
            let mut sockets: Vec<(u64, u8, Sock)> = Vec::new();
            for i in 0..n {
                let s = subs + i * 48;
                let ud = m.u64(s)?;
                let tag = m.bytes(s + 8, 1)?[0];
                match tag {
                    EVENT_CLOCK => {
                        let id = m.u32(s + 16)?;
                        let timeout = m.u64(s + 24)?;
                        let flags = m.bytes(s + 40, 2)?;
                        let abs = u16::from_le_bytes([flags[0], flags[1]]) & SUBCLOCK_ABSTIME != 0;
                        let at = match (abs, self.now(id)) {
                            (_, Err(e)) => {
                                ready.push((ud, EVENT_CLOCK, e));
                                continue;
                            }
                            (false, Ok(_)) => now.saturating_add(timeout),
                            (true, Ok(t)) => now.saturating_add(timeout.saturating_sub(t)),
                        };
                        if at <= now {
                            ready.push((ud, EVENT_CLOCK, SUCCESS));
                        } else {
                            deadline = deadline.min(at);
                            clock_userdata.push((ud, at));
                        }
                    }
                    EVENT_FD_READ | EVENT_FD_WRITE => {
                        let fd = m.u32(s + 16)?;
                        match self.fd(fd) {
                            Err(e) => ready.push((ud, tag, e)),
                            Ok(Fd::Conn { s, .. } | Fd::Listener { s, .. }) if tag == EVENT_FD_READ => {
                                sockets.push((ud, tag, *s))
                            }
                            // Files, directories, the console and a socket's sending side
                            // are always ready (a write waits in the call itself).
                            Ok(_) => ready.push((ud, tag, SUCCESS)),
                        }
                    }
                    _ => ready.push((ud, tag, INVAL)),
                }
            }
            // Sockets ready now?
            let mut waiting = Vec::new();
            for (ud, tag, s) in sockets {
                if self.host.wait_readable(s, 0) {
                    ready.push((ud, tag, SUCCESS));
                } else {
                    waiting.push((ud, tag, s));
                }
            }
            if ready.is_empty() {
                // Nothing yet: wait for the first socket or the deadline.
                loop {
                    let now = self.host.monotonic_ns();
                    if now >= deadline {
                        for &(ud, at) in &clock_userdata {
                            if at <= now {
                                ready.push((ud, EVENT_CLOCK, SUCCESS));
                            }
                        }
                        break;
                    }
                    let left = deadline - now;
                    match waiting.as_slice() {
                        [] => self.host.sleep_ns(left),
                        [(ud, tag, s)] => {
                            if self.host.wait_readable(*s, left) {
                                ready.push((*ud, *tag, SUCCESS));
                                break;
                            }
                        }
                        many => {
                            // Several sockets: look at each in turn, 1 ms apart.
                            for (ud, tag, s) in many {
                                if self.host.wait_readable(*s, 0) {
                                    ready.push((*ud, *tag, SUCCESS));
                                }
                            }
                            if !ready.is_empty() {
                                break;
                            }
                            self.host.sleep_ns(left.min(1_000_000));
                        }
                    }
                }
            }
            for (i, (ud, tag, err)) in ready.iter().enumerate() {
                let mut e = [0u8; 32];
                e[0..8].copy_from_slice(&ud.to_le_bytes());
                e[8..10].copy_from_slice(&err.to_le_bytes());
                e[10] = *tag;
                m.put(events + i as u32 * 32, &e)?;
            }
            m.put_u32(out, ready.len() as u32)
        })();
        done(r)
    }

    // Sockets.

    pub fn sock_accept(&mut self, m: &mut Mem, fd: u32, flags: u32, out: u32) -> Errno {
        let r = (|| {
            m.bytes(out, 4)?;
            if flags & !FDFLAG_NONBLOCK != 0 {
                return Err(INVAL);
            }
            let (s, nonblock) = match self.fd(fd)? {
                Fd::Listener { s, nonblock } => (*s, *nonblock),
                _ => return Err(NOTSOCK),
            };
            let c = self.host.accept(s, !nonblock).map_err(fs)?;
            match self.insert(Fd::Conn { s: c, nonblock: flags & FDFLAG_NONBLOCK != 0 }) {
                Ok(n) => m.put_u32(out, n),
                Err(e) => {
                    self.host.sock_close(c);
                    Err(e)
                }
            }
        })();
        done(r)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn sock_recv(
        &mut self,
        m: &mut Mem,
        fd: u32,
        iovs: u32,
        n: u32,
        flags: u32,
        out: u32,
        out_flags: u32,
    ) -> Errno {
        let r = (|| {
            m.bytes(out, 4)?;
            m.bytes(out_flags, 2)?;
            if flags != 0 {
                return Err(NOTSUP);
            }
            if !matches!(self.fd(fd)?, Fd::Conn { .. }) {
                return Err(NOTSOCK);
            }
            let k = self.read(m, fd, iovs, n, None)?;
            m.put_u32(out, k)?;
            m.put(out_flags, &[0, 0])
        })();
        done(r)
    }

    pub fn sock_send(&mut self, m: &mut Mem, fd: u32, iovs: u32, n: u32, _flags: u32, out: u32) -> Errno {
        let r = (|| {
            m.bytes(out, 4)?;
            if !matches!(self.fd(fd)?, Fd::Conn { .. }) {
                return Err(NOTSOCK);
            }
            let k = self.write(m, fd, iovs, n, None)?;
            m.put_u32(out, k)
        })();
        done(r)
    }

    pub fn sock_shutdown(&mut self, fd: u32, how: u32) -> Errno {
        let s = match self.fd(fd) {
            Ok(Fd::Conn { s, .. }) => *s,
            Ok(_) => return NOTSOCK,
            Err(e) => return e,
        };
        if how == 0 || how & !(SDFLAG_RD | SDFLAG_WR) != 0 {
            return INVAL;
        }
        match self.host.shutdown(s, how as u8) {
            Ok(()) => SUCCESS,
            Err(abi::Error::Reset) => NOTCONN,
            Err(e) => fs(e),
        }
    }
}
