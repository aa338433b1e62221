//! Host tests: confinement, the errno mapping, the calls over a model of Scion's
//! filesystem (a map of paths), and every call fed hostile pointers and lengths.

extern crate std;

use crate::ctx::Ctx;
use crate::errno::*;
use crate::host::{Entry, Handle, Host, Kind, Sock};
use crate::mem::Mem;
use crate::path::resolve;
use abi::Error;
use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

/// A model of `files`: paths to files' bytes or directories (the Ctx under test talks to
/// it exactly as the runner talks to the files server).
#[derive(Default)]
struct Model {
    names: BTreeMap<String, Option<Vec<u8>>>,
    open: BTreeMap<Handle, String>,
    next: Handle,
    out: Vec<u8>,
    syncs: u32,
}

fn parent(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) => "/",
        Some(i) => &p[..i],
        None => "/",
    }
}

impl Model {
    fn new() -> Model {
        let mut m = Model::default();
        m.names.insert("/".into(), None);
        m.names.insert("/sandbox".into(), None);
        m.names.insert("/secret".into(), Some(b"key".to_vec()));
        m
    }
}

impl Host for Model {
    fn name_max(&self) -> usize {
        48
    }
    fn console_write(&mut self, data: &[u8]) {
        self.out.extend_from_slice(data);
    }
    fn console_read(&mut self, _buf: &mut [u8]) -> Result<usize, Error> {
        Ok(0)
    }
    fn realtime_ns(&self) -> u64 {
        1_700_000_000_000_000_000
    }
    fn monotonic_ns(&self) -> u64 {
        5_000
    }
    fn sleep_ns(&mut self, _ns: u64) {}
    fn random(&mut self, buf: &mut [u8]) {
        buf.fill(7)
    }
    fn stat(&mut self, path: &str) -> Result<(Kind, u64), Error> {
        match self.names.get(path) {
            None => Err(Error::NotFound),
            Some(None) => Ok((Kind::Dir, 0)),
            Some(Some(b)) => Ok((Kind::File, b.len() as u64)),
        }
    }
    fn open(&mut self, path: &str, create: bool) -> Result<(Handle, u64), Error> {
        let size = match self.names.get(path) {
            Some(Some(b)) => b.len() as u64,
            Some(None) => return Err(Error::BadState),
            None if create && matches!(self.names.get(parent(path)), Some(None)) => {
                self.names.insert(path.into(), Some(Vec::new()));
                0
            }
            None => return Err(Error::NotFound),
        };
        self.next += 1;
        self.open.insert(self.next, path.into());
        Ok((self.next, size))
    }
    fn close(&mut self, h: Handle) {
        self.open.remove(&h);
    }
    fn read(&mut self, h: Handle, off: u64, buf: &mut [u8]) -> Result<usize, Error> {
        let p = self.open.get(&h).ok_or(Error::InvalidArg)?;
        let b = self.names.get(p).cloned().flatten().ok_or(Error::NotFound)?;
        let off = (off as usize).min(b.len());
        let k = buf.len().min(b.len() - off);
        buf[..k].copy_from_slice(&b[off..off + k]);
        Ok(k)
    }
    fn write(&mut self, h: Handle, off: u64, data: &[u8]) -> Result<usize, Error> {
        let p = self.open.get(&h).ok_or(Error::InvalidArg)?.clone();
        let Some(Some(b)) = self.names.get_mut(&p) else { return Err(Error::NotFound) };
        let end = off as usize + data.len();
        if b.len() < end {
            b.resize(end, 0);
        }
        b[off as usize..end].copy_from_slice(data);
        Ok(data.len())
    }
    fn truncate(&mut self, path: &str, _h: Handle, size: u64) -> Result<(), Error> {
        let Some(Some(b)) = self.names.get_mut(path) else { return Err(Error::NotFound) };
        b.resize(size as usize, 0);
        Ok(())
    }
    fn fsync(&mut self, _h: Handle) -> Result<(), Error> {
        self.syncs += 1;
        Ok(())
    }
    fn list(&mut self, dir: &str) -> Result<Vec<Entry>, Error> {
        let pre = if dir == "/" { "/".to_string() } else { alloc::format!("{dir}/") };
        Ok(self
            .names
            .iter()
            .filter(|(k, _)| k.len() > pre.len() && k.starts_with(&pre) && !k[pre.len()..].contains('/'))
            .map(|(k, v)| Entry {
                name: k[pre.len()..].to_string(),
                kind: if v.is_some() { Kind::File } else { Kind::Dir },
                size: v.as_ref().map_or(0, |b| b.len() as u64),
            })
            .collect())
    }
    fn mkdir(&mut self, path: &str) -> Result<(), Error> {
        if !matches!(self.names.get(parent(path)), Some(None)) {
            return Err(Error::NotFound);
        }
        self.names.insert(path.into(), None);
        Ok(())
    }
    fn remove(&mut self, path: &str) -> Result<(), Error> {
        self.names.remove(path).map(|_| ()).ok_or(Error::NotFound)
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), Error> {
        let v = self.names.remove(from).ok_or(Error::NotFound)?;
        self.names.insert(to.into(), v);
        Ok(())
    }
    fn accept(&mut self, _s: Sock, _wait: bool) -> Result<Sock, Error> {
        Err(Error::WouldBlock)
    }
    fn recv(&mut self, _s: Sock, _buf: &mut [u8], _wait: bool) -> Result<usize, Error> {
        Ok(0)
    }
    fn send(&mut self, _s: Sock, data: &[u8], _wait: bool) -> Result<usize, Error> {
        Ok(data.len())
    }
    fn shutdown(&mut self, _s: Sock, _how: u8) -> Result<(), Error> {
        Ok(())
    }
    fn sock_close(&mut self, _s: Sock) {}
    fn wait_readable(&mut self, _s: Sock, _ns: u64) -> bool {
        false
    }
}

fn ctx() -> Ctx<Model> {
    Ctx::new(
        Model::new(),
        vec!["prog.wasm".into(), "a1".into()],
        vec!["HOME=/".into()],
        &[("/".into(), "/sandbox".into())],
    )
}

/// Put `s` at `at` in `mem`: (pointer, length).
fn s(mem: &mut [u8], at: u32, s: &str) -> (u32, u32) {
    mem[at as usize..at as usize + s.len()].copy_from_slice(s.as_bytes());
    (at, s.len() as u32)
}

fn u32_at(mem: &[u8], at: u32) -> u32 {
    u32::from_le_bytes(mem[at as usize..at as usize + 4].try_into().unwrap())
}

const RW: u64 = (1 << 1) | (1 << 6);

fn open(c: &mut Ctx<Model>, mem: &mut [u8], path: &str, oflags: u32) -> Result<u32, Errno> {
    let (p, l) = s(mem, 1000, path);
    match c.path_open(&mut Mem(mem), 3, p, l, oflags, RW, 0, 2000) {
        SUCCESS => Ok(u32_at(mem, 2000)),
        e => Err(e),
    }
}

#[test]
fn confinement_refuses_every_way_out() {
    let r = |p: &str| resolve("/sandbox", p, 48);
    assert_eq!(r("a/b").unwrap().path, "/sandbox/a/b");
    assert_eq!(r("a/../b").unwrap().path, "/sandbox/b");
    assert_eq!(r("./a//b/").unwrap().path, "/sandbox/a/b");
    assert!(r("./a//b/").unwrap().dir_only);
    assert!(r(".").unwrap().is_base && r("a/..").unwrap().is_base);
    assert_eq!(r(".").unwrap().path, "/sandbox");
    assert_eq!(r(".."), Err(NOTCAPABLE));
    assert_eq!(r("a/../.."), Err(NOTCAPABLE));
    assert_eq!(r("../sandbox/x"), Err(NOTCAPABLE), "climbing out and back in is refused too");
    assert_eq!(r("/secret"), Err(NOTCAPABLE));
    assert_eq!(r("a\0b"), Err(ILSEQ));
    assert_eq!(r(&"x".repeat(49)), Err(NAMETOOLONG));
    assert!(r(&"x".repeat(48)).is_ok());
    assert_eq!(r(&"a/".repeat(2049)), Err(NAMETOOLONG));
    assert_eq!(resolve("/", "x", 48).unwrap().path, "/x");
    assert_eq!(resolve("/", ".", 48).unwrap().path, "/");
}

#[test]
fn every_scion_error_is_an_errno() {
    for e in Error::ALL {
        assert_ne!(from_error(e), SUCCESS, "{e:?}");
    }
    assert_eq!(from_error(Error::NotFound), NOENT);
    assert_eq!(from_error(Error::Exists), EXIST);
    assert_eq!(from_error(Error::NoSpace), NOSPC);
    assert_eq!(from_error(Error::Io), IO);
}

#[test]
fn the_descriptors_and_strings_a_program_starts_with() {
    let mut c = ctx();
    let mut mem = vec![0u8; 4096];
    assert_eq!(c.args_sizes_get(&mut Mem(&mut mem), 0, 4), SUCCESS);
    assert_eq!((u32_at(&mem, 0), u32_at(&mem, 4)), (2, 13));
    assert_eq!(c.args_get(&mut Mem(&mut mem), 100, 200), SUCCESS);
    assert_eq!(u32_at(&mem, 100), 200);
    assert_eq!(u32_at(&mem, 104), 210);
    assert_eq!(&mem[200..213], b"prog.wasm\0a1\0");
    assert_eq!(c.environ_sizes_get(&mut Mem(&mut mem), 0, 4), SUCCESS);
    assert_eq!((u32_at(&mem, 0), u32_at(&mem, 4)), (1, 7));
    assert_eq!(c.fd_prestat_get(&mut Mem(&mut mem), 3, 300), SUCCESS);
    assert_eq!((mem[300], u32_at(&mem, 304)), (0, 1));
    assert_eq!(c.fd_prestat_dir_name(&mut Mem(&mut mem), 3, 400, 0), NAMETOOLONG);
    assert_eq!(c.fd_prestat_dir_name(&mut Mem(&mut mem), 3, 400, 1), SUCCESS);
    assert_eq!(mem[400], b'/');
    assert_eq!(c.fd_prestat_get(&mut Mem(&mut mem), 4, 300), BADF, "no more preopens");
    assert_eq!(c.fd_prestat_get(&mut Mem(&mut mem), 1, 300), BADF);
    // Standard output goes to the console.
    let (p, l) = s(&mut mem, 500, "hi\n");
    mem[600..604].copy_from_slice(&p.to_le_bytes());
    mem[604..608].copy_from_slice(&l.to_le_bytes());
    assert_eq!(c.fd_write(&mut Mem(&mut mem), 1, 600, 1, 700), SUCCESS);
    assert_eq!(u32_at(&mem, 700), 3);
    assert_eq!(c.host.out, b"hi\n");
    assert_eq!(c.clock_time_get(&mut Mem(&mut mem), 0, 0, 800), SUCCESS);
    assert_eq!(c.clock_time_get(&mut Mem(&mut mem), 9, 0, 800), INVAL);
    assert_eq!(c.random_get(&mut Mem(&mut mem), 900, 16), SUCCESS);
    assert!(mem[900..916].iter().all(|&b| b == 7));
}

#[test]
fn files_and_directories_through_the_calls() {
    let mut c = ctx();
    let mut mem = vec![0u8; 8192];
    assert_eq!(open(&mut c, &mut mem, "f.txt", 0), Err(NOENT));
    let fd = open(&mut c, &mut mem, "f.txt", 1).unwrap();
    assert_eq!(fd, 4);
    // write "hello world" through two iovecs
    let (a, al) = s(&mut mem, 3000, "hello ");
    let (b, bl) = s(&mut mem, 3100, "world");
    for (i, w) in [a, al, b, bl].iter().enumerate() {
        mem[3200 + i * 4..3204 + i * 4].copy_from_slice(&w.to_le_bytes());
    }
    assert_eq!(c.fd_write(&mut Mem(&mut mem), fd, 3200, 2, 3300), SUCCESS);
    assert_eq!(u32_at(&mem, 3300), 11);
    assert_eq!(c.host.names["/sandbox/f.txt"].as_deref(), Some(&b"hello world"[..]));
    // seek back 5 and read
    assert_eq!(c.fd_seek(&mut Mem(&mut mem), fd, -5, 1, 3400), SUCCESS);
    assert_eq!(u32_at(&mem, 3400), 6);
    assert_eq!(c.fd_seek(&mut Mem(&mut mem), fd, -7, 0, 3400), INVAL);
    mem[3500..3504].copy_from_slice(&4000u32.to_le_bytes());
    mem[3504..3508].copy_from_slice(&100u32.to_le_bytes());
    assert_eq!(c.fd_read(&mut Mem(&mut mem), fd, 3500, 1, 3600), SUCCESS);
    assert_eq!(u32_at(&mem, 3600), 5);
    assert_eq!(&mem[4000..4005], b"world");
    assert_eq!(c.fd_pread(&mut Mem(&mut mem), fd, 3500, 1, 0, 3600), SUCCESS);
    assert_eq!(&mem[4000..4011], b"hello world");
    assert_eq!(c.fd_filestat_get(&mut Mem(&mut mem), fd, 3700), SUCCESS);
    assert_eq!(mem[3716], 4);
    assert_eq!(u64::from_le_bytes(mem[3732..3740].try_into().unwrap()), 11);
    assert_eq!(c.fd_filestat_set_size(fd, 5), SUCCESS);
    assert_eq!(c.host.names["/sandbox/f.txt"].as_deref(), Some(&b"hello"[..]));
    assert_eq!(c.fd_sync(fd), SUCCESS);
    assert_eq!(c.host.syncs, 1);
    // O_TRUNC empties it; O_CREAT|O_EXCL refuses it
    assert_eq!(open(&mut c, &mut mem, "f.txt", 1 | 4), Err(EXIST));
    let fd2 = open(&mut c, &mut mem, "f.txt", 8).unwrap();
    assert_eq!(c.host.names["/sandbox/f.txt"].as_deref(), Some(&b""[..]));
    assert_eq!(c.fd_close(fd2), SUCCESS);
    assert_eq!(c.fd_close(fd2), BADF);
    // directories
    let (p, l) = s(&mut mem, 5000, "d");
    assert_eq!(c.path_create_directory(&mut Mem(&mut mem), 3, p, l), SUCCESS);
    assert_eq!(c.path_create_directory(&mut Mem(&mut mem), 3, p, l), EXIST);
    assert_eq!(open(&mut c, &mut mem, "d/g", 1).map(|_| ()), Ok(()));
    assert_eq!(c.path_remove_directory(&mut Mem(&mut mem), 3, p, l), NOTEMPTY);
    assert_eq!(c.path_unlink_file(&mut Mem(&mut mem), 3, p, l), ISDIR);
    let (g, gl) = s(&mut mem, 5100, "d/g");
    let (h, hl) = s(&mut mem, 5200, "h");
    assert_eq!(c.path_remove_directory(&mut Mem(&mut mem), 3, g, gl), NOTDIR);
    assert_eq!(c.path_rename(&mut Mem(&mut mem), 3, g, gl, 3, h, hl), SUCCESS);
    assert!(c.host.names.contains_key("/sandbox/h"));
    assert_eq!(c.path_rename(&mut Mem(&mut mem), 3, h, hl, 3, p, l), ISDIR);
    assert_eq!(c.path_rename(&mut Mem(&mut mem), 3, p, l, 3, h, hl), NOTDIR);
    let (dx, dxl) = s(&mut mem, 5300, "d/x");
    assert_eq!(c.path_rename(&mut Mem(&mut mem), 3, p, l, 3, dx, dxl), INVAL, "a directory into itself");
    assert_eq!(c.path_remove_directory(&mut Mem(&mut mem), 3, p, l), SUCCESS);
    assert_eq!(c.path_unlink_file(&mut Mem(&mut mem), 3, h, hl), SUCCESS);
    // readdir: ".", "..", f.txt
    assert_eq!(c.fd_readdir(&mut Mem(&mut mem), 3, 6000, 1000, 0, 7000), SUCCESS);
    let used = u32_at(&mem, 7000);
    assert_eq!(used, 3 * 24 + 1 + 2 + 5);
    assert_eq!(&mem[6000 + 24 * 3 + 3..6000 + 24 * 3 + 3 + 5], b"f.txt");
    // a small buffer: the record is cut, and the next cookie goes on
    assert_eq!(c.fd_readdir(&mut Mem(&mut mem), 3, 6000, 30, 0, 7000), SUCCESS);
    assert_eq!(u32_at(&mem, 7000), 30);
    assert_eq!(c.fd_readdir(&mut Mem(&mut mem), 3, 6000, 1000, 2, 7000), SUCCESS);
    assert_eq!(u32_at(&mem, 7000), 24 + 5);
    // nothing outside the preopen
    assert_eq!(open(&mut c, &mut mem, "../secret", 0), Err(NOTCAPABLE));
    assert_eq!(open(&mut c, &mut mem, "/secret", 0), Err(NOTCAPABLE));
    // A directory opened for writing is refused, as POSIX's open does.
    assert_eq!(open(&mut c, &mut mem, ".", 2), Err(ISDIR));
}

#[test]
fn a_directory_opened_below_a_preopen_confines_as_it_does() {
    let mut c = ctx();
    let mut mem = vec![0u8; 8192];
    let (p, l) = s(&mut mem, 5000, "d");
    assert_eq!(c.path_create_directory(&mut Mem(&mut mem), 3, p, l), SUCCESS);
    let (p, l) = s(&mut mem, 1000, "d");
    assert_eq!(c.path_open(&mut Mem(&mut mem), 3, p, l, 2, 1 << 1, 0, 2000), SUCCESS);
    let d = u32_at(&mem, 2000);
    let (p, l) = s(&mut mem, 1000, "../f");
    assert_eq!(c.path_open(&mut Mem(&mut mem), d, p, l, 1, RW, 0, 2000), NOTCAPABLE);
    let (p, l) = s(&mut mem, 1000, "f");
    assert_eq!(c.path_open(&mut Mem(&mut mem), d, p, l, 1, RW, 0, 2000), SUCCESS);
    assert!(c.host.names.contains_key("/sandbox/d/f"));
    // A file is not a directory to resolve from.
    let f = u32_at(&mem, 2000);
    assert_eq!(c.path_open(&mut Mem(&mut mem), f, p, l, 1, RW, 0, 2000), NOTDIR);
}

#[test]
fn read_only_descriptors_do_not_write() {
    let mut c = ctx();
    let mut mem = vec![0u8; 8192];
    let (p, l) = s(&mut mem, 1000, "ro");
    assert_eq!(c.path_open(&mut Mem(&mut mem), 3, p, l, 1, 1 << 1, 0, 2000), SUCCESS);
    let fd = u32_at(&mem, 2000);
    let (a, al) = s(&mut mem, 3000, "x");
    mem[3200..3204].copy_from_slice(&a.to_le_bytes());
    mem[3204..3208].copy_from_slice(&al.to_le_bytes());
    assert_eq!(c.fd_write(&mut Mem(&mut mem), fd, 3200, 1, 3300), BADF);
    assert_eq!(c.fd_filestat_set_size(fd, 9), BADF);
}

/// Every call, fed pointers and lengths that lie: past the end, wrapping, huge counts,
/// descriptors that do not exist. Each answers an errno; none panics, none writes past
/// the memory, and a normal call works after.
#[test]
fn lying_pointers_and_lengths_get_errnos_for_every_call() {
    let mut c = ctx();
    let fd = {
        let mut mem = vec![0u8; 8192];
        open(&mut c, &mut mem, "f", 1).unwrap()
    };
    let bad = [u32::MAX, u32::MAX - 3, 65_536, 65_533, 0x8000_0000];
    let fds = [0, 1, 2, 3, fd, 99, u32::MAX];
    let mut calls = 0u32;
    for &p in &bad {
        for &q in &[0u32, 8, u32::MAX, 4096] {
            for &f in &fds {
                let mut mem = vec![0u8; 65_536];
                // an iovec at 32 that points past the end
                mem[32..36].copy_from_slice(&65_530u32.to_le_bytes());
                mem[36..40].copy_from_slice(&100u32.to_le_bytes());
                let m = &mut Mem(&mut mem);
                let e = [
                    c.args_get(m, p, q),
                    c.args_sizes_get(m, p, q),
                    c.environ_get(m, q, p),
                    c.environ_sizes_get(m, q, p),
                    c.clock_res_get(m, 0, p),
                    c.clock_time_get(m, 1, 0, p),
                    c.random_get(m, p, q.max(1)),
                    c.fd_fdstat_get(m, f, p),
                    c.fd_filestat_get(m, f, p),
                    c.fd_prestat_get(m, f, p),
                    c.fd_prestat_dir_name(m, f, p, q),
                    c.fd_read(m, f, p, q, 8),
                    c.fd_read(m, f, 32, 1, 8),
                    c.fd_pread(m, f, p, q, 0, 8),
                    c.fd_write(m, f, p, q, 8),
                    c.fd_write(m, f, 32, 1, p),
                    c.fd_pwrite(m, f, 32, 1, u64::MAX, 8),
                    c.fd_seek(m, f, i64::MIN, 1, p),
                    c.fd_tell(m, f, p),
                    c.fd_readdir(m, f, p, q, u64::MAX, 8),
                    c.fd_readdir(m, 3, 100, q, 0, p),
                    c.path_create_directory(m, f, p, q),
                    c.path_filestat_get(m, f, 0, p, q, 8),
                    c.path_filestat_set_times(m, f, p, q),
                    c.path_open(m, f, p, q, 1, RW, 0, 8),
                    c.path_open(m, 3, 100, 1, 1, RW, 0, p),
                    c.path_readlink(m, f, p, q),
                    c.path_remove_directory(m, f, p, q),
                    c.path_rename(m, f, p, q, f, q, p),
                    c.path_unlink_file(m, f, p, q),
                    c.path_link(m, f, p, q),
                    c.path_symlink(m, f, p, q),
                    c.poll_oneoff(m, p, q, 1, 8),
                    c.poll_oneoff(m, 0, 100, q, p),
                    c.sock_accept(m, f, 0, p),
                    c.sock_recv(m, f, p, q, 0, 8, 16),
                    c.sock_send(m, f, p, q, 0, 8),
                ];
                // (With q = 0 a count of nothing at the memory's end is a fair call, and
                // 65,533 leaves room for a short answer: for those only that it answers
                // counts.)
                for (i, e) in e.into_iter().enumerate().filter(|_| q != 0 && p != 65_533) {
                    assert_ne!(e, SUCCESS, "lying call {i} with p={p:#x} q={q:#x} fd={f} succeeded");
                    calls += 1;
                }
                let _ = (c.fd_advise(f, u64::MAX, u64::MAX, q), c.fd_allocate(f, u64::MAX, u64::MAX));
                let _ = (c.fd_fdstat_set_flags(f, q), c.fd_fdstat_set_rights(f, 0, 0));
                let _ = (c.fd_filestat_set_times(f, 0, 0, q), c.sock_shutdown(f, q), c.proc_raise(q));
            }
        }
    }
    assert!(calls > 2000, "{calls}");
    // Still serving.
    let mut mem = vec![0u8; 8192];
    assert!(open(&mut c, &mut mem, "after", 1).is_ok());
}

#[test]
fn a_program_cannot_hold_more_than_max_fds() {
    let mut c = ctx();
    let mut mem = vec![0u8; 8192];
    let mut last = Ok(0);
    for _ in 0..crate::ctx::MAX_FDS + 10 {
        last = open(&mut c, &mut mem, "many", 1);
        if last.is_err() {
            break;
        }
    }
    assert_eq!(last, Err(MFILE));
}

#[test]
fn poll_oneoff_sleeps_on_a_clock_and_answers_it() {
    let mut c = ctx();
    let mut mem = vec![0u8; 8192];
    // one relative clock subscription of 1 ms, userdata 0x55
    mem[100..108].copy_from_slice(&0x55u64.to_le_bytes());
    mem[108] = 0;
    mem[116..120].copy_from_slice(&1u32.to_le_bytes());
    mem[124..132].copy_from_slice(&0u64.to_le_bytes());
    assert_eq!(c.poll_oneoff(&mut Mem(&mut mem), 100, 400, 1, 800), SUCCESS);
    assert_eq!(u32_at(&mem, 800), 1);
    assert_eq!(u64::from_le_bytes(mem[400..408].try_into().unwrap()), 0x55);
    assert_eq!(c.poll_oneoff(&mut Mem(&mut mem), 100, 400, 0, 800), INVAL);
}

#[test]
fn aot_names() {
    let mut h = crate::ModuleHash::default();
    h.update(b"");
    assert_eq!(h.0, 0xcbf2_9ce4_8422_2325);
    // FNV-1a's published value for "a", fed whole and in pieces alike.
    h.update(b"a");
    assert_eq!(h.0, 0xaf63_dc4c_8601_ec8c);
    let (mut one, mut two) = (crate::ModuleHash::default(), crate::ModuleHash::default());
    one.update(b"hello world");
    two.update(b"hello ");
    two.update(b"world");
    assert_eq!(one.0, two.0);
    assert_eq!(crate::aot_name("/wasi/demo.wasm", h), "demo-af63dc4c8601ec8c");
    assert_eq!(crate::aot_name("x", h), "x-af63dc4c8601ec8c");
    let long = crate::aot_name("/a/ééééééééééééééé.wasm", h);
    assert!(long.starts_with("éééééééééééé-"), "{long}");
}
