//! The `files` compatibility server's protocol: a baiofs filesystem in one BAIO segment,
//! served by path over IPC to programs that do not link a filesystem themselves.
//! Replies carry MR1 = 0 or an error: `NotFound` (no such file), `Exists`,
//! `InvalidArg` (bad name or path, a directory where a file is wanted, or the reverse),
//! `BadState` (directory not empty, file open), `NoSpace`, `InvalidCap` (unknown
//! handle), `Lost` (a handle of a files server that ended: see below), `Io` (the disk
//! failed: a read, write or flush of it did not succeed — not a usage error; what the
//! request was to change may or may not have changed, and nothing since the last `SYNC`
//! answered `Ok` is promised), `Malformed`, `Unsupported`.
//!
//! **What is promised, and when** (`docs/baiofs.md`, "The files server's promises"):
//! - `WRITE` answered `Ok(n)`: the server has the n bytes; every later call through this
//!   server sees them. Nothing more: small appends of a file only one program has open
//!   are kept back (at most 16 KiB a file, like a page cache) and written with the next
//!   append that does not fit, or at `CLOSE`, `SYNC`, or any call that looks at the
//!   filesystem (open, stat, list, remove, ticket). If the files server ends first
//!   (killed, or a fault: root restarts it), what it kept back is lost, and the next
//!   call on the handle answers `Lost` — never a silent success.
//! - `CLOSE` answered `Ok`: every write through the handle reached the block service (it
//!   survives restarts of `files`, `blk` and the cache), not necessarily the disk's
//!   stable storage. An error writing what was kept back is `CLOSE`'s answer.
//! - `SYNC` answered `Ok`: every write answered before it, through any handle, and every
//!   create, mkdir and remove, is on stable storage (the disk's write cache flushed): it
//!   survives a power cut.
//!   Without a `SYNC`, a power cut may keep any subset of the updates since the last
//!   flush (each create, mkdir or remove whole; a write perhaps in part).
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use abi::Error;

rt::protocol! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Request<'a> in rt::labels::FILES;
    client client via call {
        /// What `stat` answers a path names.
        pub use super::Kind;
        use super::Error;
        use alloc::string::String;
        use alloc::vec::Vec;
        use rt::ipc::{self, Msg};

        /// Every call finds a restarted files server again (`rt::env::request_reconnecting`);
        /// handles opened before the restart are gone with the old instance, and a call on
        /// one answers `Lost` (writes it kept back are gone: write them again). Each call
        /// goes to files' thread on the caller's CPU (`rt::server::request_routed`).
        fn call(srv: u64, m: &mut Msg) -> Result<(), Error> {
            let t = rt::sys::rdtsc();
            let r = rt::env::request_routed_reconnecting("files", srv, m);
            CALL_TICKS.fetch_add(rt::sys::rdtsc().wrapping_sub(t), core::sync::atomic::Ordering::Relaxed);
            r
        }

        /// Ticks this program spent in calls to files so far (the server's work and the
        /// IPC both ways): a program that counts its own busy time takes them out
        /// (httpd's `/.busy`, docs/net-breakdown.md).
        static CALL_TICKS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

        /// Ticks spent in calls to files so far (see `CALL_TICKS`).
        pub fn call_ticks() -> u64 {
            CALL_TICKS.load(core::sync::atomic::Ordering::Relaxed)
        }

        /// The string of a reply (at most `max` bytes) to `send`.
        fn text(max: usize, send: impl FnOnce() -> Result<Msg, Error>) -> Result<Vec<u8>, Error> {
            let mut buf = alloc::vec![0u8; max];
            ipc::set_recv_buffer(&mut buf);
            let m = send()?;
            let n = if m.tag().has_string() { ipc::received_string_len().min(buf.len()) } else { 0 };
            buf.truncate(n);
            Ok(buf)
        }

        /// An open file: (handle, size when opened).
        pub fn open(srv: u64, path: &str, create: bool) -> Result<(u64, u64), Error> {
            let [h, size] = open_raw(srv, if create { super::CREATE } else { 0 }, path)?;
            Ok((h, size))
        }

        pub fn read(srv: u64, h: u64, off: u64, len: u64) -> Result<Vec<u8>, Error> {
            let len = len.min(super::MAX_IO);
            text(len as usize, || read_raw(srv, h, off, len))
        }

        /// Read into `buf` (at most `MAX_IO` bytes): bytes read (0: end of file).
        pub fn read_into(srv: u64, h: u64, off: u64, buf: &mut [u8]) -> Result<usize, Error> {
            let len = (buf.len() as u64).min(super::MAX_IO);
            ipc::set_recv_buffer(&mut buf[..len as usize]);
            let m = read_raw(srv, h, off, len)?;
            Ok(if m.tag().has_string() { ipc::received_string_len().min(len as usize) } else { 0 })
        }

        /// Write `data` at `off` (in pieces of `MAX_IO`): the bytes the server took.
        pub fn write(srv: u64, h: u64, off: u64, data: &[u8]) -> Result<u64, Error> {
            let mut done = 0;
            for chunk in data.chunks(super::MAX_IO as usize) {
                done += write_raw(srv, h, off + done, chunk)?[0];
            }
            Ok(done)
        }

        /// Move `from` to `to` (`RENAME`): "from", NUL, "to" in one string.
        pub fn rename(srv: u64, from: &str, to: &str) -> Result<(), Error> {
            let mut s = String::with_capacity(from.len() + 1 + to.len());
            s.push_str(from);
            s.push('\0');
            s.push_str(to);
            rename_raw(srv, &s)
        }

        /// The whole file.
        pub fn read_all(srv: u64, path: &str) -> Result<Vec<u8>, Error> {
            let (h, size) = open(srv, path, false)?;
            let mut out = Vec::with_capacity(size as usize);
            while (out.len() as u64) < size {
                let chunk = read(srv, h, out.len() as u64, super::MAX_IO)?;
                if chunk.is_empty() {
                    break;
                }
                out.extend_from_slice(&chunk);
            }
            close(srv, h)?;
            Ok(out)
        }

        /// What `path` names and its size, and, for a file of at most `buf.len()` bytes
        /// (and `MAX_IO`), its bytes in `buf` (`FETCH`): (kind, size, bytes in `buf`:
        /// `size` when the file came whole, else 0).
        pub fn fetch(srv: u64, path: &str, buf: &mut [u8]) -> Result<(super::Kind, u64, usize), Error> {
            let max = (buf.len() as u64).min(super::MAX_IO);
            ipc::set_recv_buffer(&mut buf[..max as usize]);
            let m = fetch_raw(srv, max, path)?;
            let kind = super::Kind::from_word(m.word(2)).ok_or(Error::Malformed)?;
            let size = m.word(3);
            let n = if m.tag().has_string() { ipc::received_string_len().min(max as usize) } else { 0 };
            Ok((kind, size, if n as u64 == size { n } else { 0 }))
        }

        /// "d|f size name" lines.
        pub fn list(srv: u64, dir: &str) -> Result<String, Error> {
            text(16 * 1024, || list_raw(srv, dir)).map(|b| String::from_utf8_lossy(&b).into_owned())
        }

        /// (1 file | 2 directory, size)
        pub fn stat(srv: u64, path: &str) -> Result<(super::Kind, u64), Error> {
            let [kind, size, ..] = stat_raw(srv, path)?;
            Ok((super::Kind::from_word(kind).ok_or(Error::Malformed)?, size))
        }

        /// What `files.fcm` knows of `path`: [handles open now, reads, writes, bytes read,
        /// bytes written] (`STAT`).
        pub fn fcm_stat(srv: u64, path: &str) -> Result<[u64; 5], Error> {
            let [_, _, open, reads, writes, bytes_read, bytes_written] = stat_raw(srv, path)?;
            Ok([open, reads, writes, bytes_read, bytes_written])
        }

        /// A ticket for open file `h` (see `TICKET`) in slot `dst`: (size, blocks). (Not
        /// the stub: the receive window is opened again if the call finds a restarted
        /// server.)
        pub fn ticket(srv: u64, h: u64, dst: u64) -> Result<(u64, u64), Error> {
            let mut m = Msg::new(super::TICKET, &[h]);
            let w = [abi::fpage::Fpage(0), abi::fpage::Fpage::caps(dst, 0, abi::rights::ALL), abi::fpage::Fpage(0)];
            rt::env::request_mapping_reconnecting("files", srv, w, &mut m)?;
            if m.items() != 1 {
                return Err(Error::Malformed);
            }
            Ok((m.word(2), m.word(3)))
        }
    };
    requests {
        /// string = path, MR1 = flags (`CREATE`). Reply MR2 = handle, MR3 = size.
        OPEN = 0xa0, fn open_raw(flags; text path) -> [handle, size]
            => Open { path: &'a str, create: bool } = Request::Open { path, create: flags & CREATE != 0 };
        /// MR1 = handle, MR2 = offset, MR3 = most bytes (≤ `MAX_IO`). Reply string = data.
        READ = 0xa1, fn read_raw(handle, offset, len)
            => Read { handle: u64, offset: u64, len: u64 } = Request::Read { handle, offset, len: len.min(MAX_IO) };
        /// MR1 = handle, MR2 = offset, string = data (≤ `MAX_IO`). Reply MR2 = bytes the server
        /// took. Small appends of a file only this program has open may be kept back and written
        /// together (its session): an error writing them is the answer to `CLOSE` or `SYNC`;
        /// a restart of the server loses them, and the handle's next call answers `Lost`. Only
        /// a `CLOSE` or `SYNC` answered `Ok` says they were written.
        WRITE = 0xa2, fn write_raw(handle, offset; bytes data) -> [taken]
            => Write { handle: u64, offset: u64, data: &'a [u8] } = Request::Write { handle, offset, data: at_most_io(data)? };
        /// MR1 = handle. `Ok`: the handle's writes reached the block service (they survive a
        /// restart of `files`, not necessarily a power cut: that is `SYNC`). `Lost`: the handle
        /// was opened at an instance of the server that ended, and writes it kept back are gone.
        CLOSE = 0xa3, fn close(handle) -> [] => Close { handle: u64 };
        /// string = directory. Reply string: one "d|f size name" line per entry.
        LIST = 0xa4, fn list_raw(; text dir) => List { dir: &'a str };
        /// string = path (a file, or an empty directory).
        REMOVE = 0xa5, fn remove(; text path) -> [] => Remove { path: &'a str };
        /// string = path.
        MKDIR = 0xa6, fn mkdir(; text path) -> [] => Mkdir { path: &'a str };
        /// string = path. Reply MR2 = its kind (`Kind`: 1 a file, 2 a directory), MR3 = size;
        /// MR4..MR8 = what the server's per-file state component (`files.fcm`, crate `fcm`)
        /// knows of it: handles open now, reads, writes, bytes read, bytes written (all 0
        /// for a file it has not served since it started).
        STAT = 0xa7, fn stat_raw(; text path) -> [kind, size, open, reads, writes, bytes_read, bytes_written]
            => Stat { path: &'a str };
        /// Make everything answered so far durable: every write (through any handle) and every
        /// create, mkdir and remove is on stable storage once `SYNC` answers `Ok` (the segment's
        /// `SYNC`: blk flushes the disk's write cache).
        SYNC = 0xa8, fn sync() -> [] => Sync;
        /// MR1 = handle of a file open here. Reply: a capability item — read-only access, through
        /// the block service, to exactly the blocks that hold the file (`blk_api::DELEGATE`;
        /// `blk_api::client::attach` maps its area) — MR2 = the file's size, MR3 = blocks. For
        /// a program to give `net`, which sends the file without the program touching a byte
        /// (Cue, `net_api::CUE`). The ticket is the caller's principal's to pay for: the block
        /// service charges it (and its area once attached) to that principal, never to `files`.
        /// The ticket is revoked when the program ends, when the file is removed, or (the
        /// oldest: the program's own, then its principal's) when the program asks for more than
        /// `MAX_TICKETS` or its principal for more than `PRINCIPAL_TICKETS`. `BadState` for an
        /// empty file, `NoRights` for a program without a principal (it owns nothing at the
        /// block service), `NoSpace` when every ticket is taken (`MAX_ALL_TICKETS`: more than
        /// `MAX_ALL_TICKETS / PRINCIPAL_TICKETS` principals hold their whole share) or the
        /// principal's share of the block service's slots is.
        TICKET = 0xa9, fn ticket_raw(handle) -> [size, blocks] => Ticket { handle: u64 };
        /// The caller's tickets. Reply MR2 = the calling program's, MR3 = its principal's,
        /// MR4 = `PRINCIPAL_TICKETS`, MR5 = tickets held in all (tickets whose transfer ended
        /// are not counted).
        TICKETS = 0xaa, fn tickets() -> [program, principal, principal_max, all] => Tickets;
        /// MR1 = handle (fsync). `Ok`: every write through the handle, the file's size and its
        /// name are on stable storage (it survives a power cut). Only this file's kept-back
        /// writes are written first (`SYNC` writes every file's); the disk's flush is one for
        /// the whole disk. `InvalidCap`/`Lost` as for `CLOSE`, `Io` if the disk failed.
        FSYNC = 0xab, fn fsync(handle) -> [] => Fsync { handle: u64 };
        /// string = the path to move, a NUL byte, the new path (see `client::rename`). POSIX
        /// `rename`: within a directory or across; a file replaces a file, a directory an empty
        /// directory, atomically. `Ok`: done and on stable storage; a power cut during it leaves
        /// both paths as before or as after, never both nor neither. `NotFound` (no such path
        /// or parent), `InvalidArg` (a bad name, a directory into itself, a file over a
        /// directory or the reverse), `BadState` (the file replaced is open, the directory
        /// replaced is not empty), `Io`.
        RENAME = 0xac, fn rename_raw(; text paths) -> [] => Rename { from: &'a str, to: &'a str } = {
            let (from, to) = paths.split_once('\0').ok_or(Error::Malformed)?;
            Request::Rename { from, to }
        };
        /// string = path, MR1 = most bytes (≤ `MAX_IO`). Reply MR2 = its kind (as `STAT`),
        /// MR3 = its size, and for a file of at most MR1 bytes, string = the whole file:
        /// `STAT`, `OPEN`, `READ` and `CLOSE` of a small file in one call (one walk of the
        /// path; httpd's small answers). A longer file's bytes are not sent (open it).
        FETCH = 0xad, fn fetch_raw(max; text path)
            => Fetch { path: &'a str, max: u64 } = Request::Fetch { path, max: max.min(MAX_IO) };
        /// Reply MR2 = the server's busy ticks in requests so far (rdtsc from a request's
        /// decoding to its answer: the kernel's IPC is not in it), for a program's `/.busy`
        /// breakdown (docs/net-breakdown.md).
        PROFILE = 0xae, fn profile() -> [busy] => Profile;
        /// MR1 = handle, MR2 = size (ftruncate). `Ok`: the file's size is `size`; bytes past
        /// it are gone (their blocks free for others: tickets to the file are revoked), new
        /// bytes read as zeros. Durable when answered, as a `RENAME` is. `InvalidCap`/`Lost`
        /// as for `CLOSE`, `NoSpace`, `Io`.
        TRUNCATE = 0xaf, fn truncate(handle, size) -> [] => Truncate { handle: u64, size: u64 };
    }
    nested {
        /// A live update (`swap_api::Update`).
        Update(swap_api::Update) if swap_api::is_update_label,
        /// The reconfiguration protocol: component 0 `sessions` (auto, shared), component 1
        /// `fcm` (single, replicated, auto: crate `fcm`).
        Swap(swap_api::Request) if swap_api::is_swap_label,
    }
}

/// `data` if it is at most `MAX_IO` bytes, else `TooLong`.
fn at_most_io(data: &[u8]) -> Result<&[u8], Error> {
    if data.len() as u64 > MAX_IO {
        Err(Error::TooLong)
    } else {
        Ok(data)
    }
}

/// What a path names (`STAT`'s MR2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File = 1,
    Dir = 2,
}

impl Kind {
    pub fn from_word(w: u64) -> Option<Kind> {
        match w {
            1 => Some(Kind::File),
            2 => Some(Kind::Dir),
            _ => None,
        }
    }
}

pub const MAX_TICKETS: usize = 8;
/// Tickets one principal's programs may hold at once.
pub const PRINCIPAL_TICKETS: usize = 16;
/// Tickets the server keeps in all (a slot each; the live update hands them over as
/// one block of 64 capabilities).
pub const MAX_ALL_TICKETS: usize = 64;
/// Open handles the server keeps in all, and one principal's programs at most:
/// `NoSpace` past either.
pub const MAX_HANDLES: usize = 2048;
pub const PRINCIPAL_HANDLES: usize = MAX_HANDLES / 8;
// Live update (root's `UPDATE`): `swap_api::UPDATE_BEGIN`, `UPDATE_STATE` (the state in
// format 0: see the server's `export`), `UPDATE_ABORT`.
pub const CREATE: u64 = 1;
pub const MAX_IO: u64 = 16 * 1024;
