//! WASI preview 1 on Scion, shared by the two ways a program runs: the `wasi` runner
//! (wasmi's interpreter, `user/apps/src/bin/wasi.rs`) and a program compiled ahead of
//! time (`user/lib/wasi-aot`: wasm2c and clang). What is here:
//!
//! - [`Scion`]: `wasip1`'s [`Host`] over Scion's `files`, the console, the RTC and TSC
//!   clocks, RDRAND and `net`.
//! - [`options`]: the runner's options (`--dir`, `--env`, `--listen`, `--mem`, `--trace`)
//!   and [`start`]: the servers looked up, the sockets opened, the descriptor table made.
//! - [`preview1_calls!`]: every preview-1 import but `proc_exit`, as the engine hands it
//!   to [`wasip1::ctx::Ctx`]: one list for both engines.
#![no_std]

extern crate alloc;

use abi::Error;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use net_api::client::Net;
use rt::println;
use wasip1::ctx::Ctx;
use wasip1::host::{Entry, Handle, Host, Kind, Sock};

/// The usage line of both engines.
pub const USAGE: &str = "[--dir=SCION[:NAME]] [--env=K=V] [--listen=PORT] [--mem=MIB] [--trace] PROGRAM.wasm [ARGS]";

/// The largest program file the runner reads.
pub const MAX_MODULE: u64 = 64 << 20;

/// Scion as WASI sees it: the files server, the console, the clocks, the network.
pub struct Scion {
    files: u64,
    net: Option<Net>,
    /// Nanoseconds since 1970 at `start_us` (0: no clock).
    epoch_ns: u64,
    start_us: u64,
    listeners: Vec<u64>,
}

fn kind(k: files_api::Kind) -> Kind {
    match k {
        files_api::Kind::Dir => Kind::Dir,
        _ => Kind::File,
    }
}

impl Scion {
    pub fn net(&self) -> Result<&Net, Error> {
        self.net.as_ref().ok_or(Error::InvalidCap)
    }
}

impl Host for Scion {
    fn name_max(&self) -> usize {
        baiofs::NAME_MAX
    }
    fn console_write(&mut self, data: &[u8]) {
        if rt::console::write(data).is_err() {
            let _ = rt::sys::debug_put(data);
        }
    }
    fn console_read(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        if buf.is_empty() || !rt::console::available() {
            return Ok(0);
        }
        rt::console::read(buf)
    }
    fn realtime_ns(&self) -> u64 {
        self.epoch_ns + self.monotonic_ns()
    }
    fn monotonic_ns(&self) -> u64 {
        (rt::sys::now_us() - self.start_us).saturating_mul(1000)
    }
    fn sleep_ns(&mut self, ns: u64) {
        rt::sys::sleep_us(ns.div_ceil(1000).max(1));
    }
    fn random(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            // (A CPU without RDRAND: the TSC, which no one should call random; QEMU's
            // `-cpu max` and every x86_64 CPU since 2012 have it.)
            let r = rt::sys::rdrand().unwrap_or_else(rt::sys::rdtsc).to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }
    fn stat(&mut self, path: &str) -> Result<(Kind, u64), Error> {
        files_api::client::stat(self.files, path).map(|(k, s)| (kind(k), s))
    }
    fn open(&mut self, path: &str, create: bool) -> Result<(Handle, u64), Error> {
        files_api::client::open(self.files, path, create)
    }
    fn close(&mut self, h: Handle) {
        let _ = files_api::client::close(self.files, h);
    }
    fn read(&mut self, h: Handle, off: u64, buf: &mut [u8]) -> Result<usize, Error> {
        let mut got = 0;
        while got < buf.len() {
            let k = files_api::client::read_into(self.files, h, off + got as u64, &mut buf[got..])?;
            if k == 0 {
                break;
            }
            got += k;
        }
        Ok(got)
    }
    fn write(&mut self, h: Handle, off: u64, data: &[u8]) -> Result<usize, Error> {
        files_api::client::write(self.files, h, off, data).map(|k| k as usize)
    }
    fn truncate(&mut self, _path: &str, h: Handle, size: u64) -> Result<(), Error> {
        files_api::client::truncate(self.files, h, size)
    }
    fn fsync(&mut self, h: Handle) -> Result<(), Error> {
        files_api::client::fsync(self.files, h)
    }
    fn list(&mut self, dir: &str) -> Result<Vec<Entry>, Error> {
        let text = files_api::client::list(self.files, dir)?;
        let mut out = Vec::new();
        for line in text.lines() {
            // "d|f size name" (a name may hold spaces: it is the rest of the line)
            let mut it = line.splitn(3, ' ');
            let (Some(k), Some(size), Some(name)) = (it.next(), it.next(), it.next()) else { continue };
            let kind = if k == "d" { Kind::Dir } else { Kind::File };
            out.push(Entry { name: name.to_string(), kind, size: size.parse().unwrap_or(0) });
        }
        Ok(out)
    }
    fn mkdir(&mut self, path: &str) -> Result<(), Error> {
        files_api::client::mkdir(self.files, path)
    }
    fn remove(&mut self, path: &str) -> Result<(), Error> {
        files_api::client::remove(self.files, path)
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), Error> {
        files_api::client::rename(self.files, from, to)
    }
    fn accept(&mut self, s: Sock, wait: bool) -> Result<Sock, Error> {
        let net = self.net()?;
        if wait { net.accept(s) } else { net.try_accept(s) }.map(|(h, _, _)| h)
    }
    fn recv(&mut self, s: Sock, buf: &mut [u8], wait: bool) -> Result<usize, Error> {
        let net = self.net()?;
        if wait {
            return net.recv(s, buf);
        }
        let n = net.recv_area(s, 0, (buf.len() as u64).min(net_api::AREA_BYTES))? as usize;
        buf[..n].copy_from_slice(net.area.bytes(0, n as u64));
        Ok(n)
    }
    fn send(&mut self, s: Sock, data: &[u8], wait: bool) -> Result<usize, Error> {
        let net = self.net()?;
        let data = &data[..data.len().min(net_api::AREA_BYTES as usize)];
        if wait {
            net.send_all(s, data).map(|_| data.len())
        } else {
            net.area.bytes(0, data.len() as u64).copy_from_slice(data);
            net.send_area(s, 0, data.len() as u64).map(|k| k as usize)
        }
    }
    fn shutdown(&mut self, s: Sock, _how: u8) -> Result<(), Error> {
        // net shuts a connection's sending side; a program's "no more reading" needs
        // nothing of the peer.
        self.net()?.shutdown(s)
    }
    fn sock_close(&mut self, s: Sock) {
        if let Ok(net) = self.net() {
            let _ = net.close(s);
        }
        self.listeners.retain(|&l| l != s);
    }
    fn wait_readable(&mut self, s: Sock, ns: u64) -> bool {
        let Ok(net) = self.net() else { return false };
        let us = if ns == u64::MAX { u64::MAX } else { ns / 1000 };
        net.wait(&[(s, net_api::READABLE)], us).is_ok_and(|r| r != 0)
    }
}

/// Nanoseconds since 1970 by the CMOS clock, if this program may read it.
pub fn epoch_ns() -> u64 {
    if rt::rtc::init().is_err() {
        return 0;
    }
    let Some((y, mo, d, h, mi, s)) = rt::rtc::read() else { return 0 };
    let days = http::days_from_civil(y, mo, d).max(0) as u64;
    (days * 86_400 + (h * 3600 + mi * 60 + s) as u64) * 1_000_000_000
}

/// The runner's options and the program's arguments (its file first).
pub struct Options {
    pub dirs: Vec<(String, String)>,
    pub env: Vec<String>,
    pub listen: Vec<u16>,
    pub mem_mib: usize,
    pub trace: bool,
    pub args: Vec<String>,
}

/// The options on command line `line` (its first word, the runner's name, skipped).
pub fn options(line: &str) -> Result<Options, String> {
    let mut o =
        Options { dirs: Vec::new(), env: Vec::new(), listen: Vec::new(), mem_mib: 64, trace: false, args: Vec::new() };
    let mut words = line.split_whitespace().skip(1).peekable();
    while let Some(w) = words.next_if(|w| w.starts_with("--")) {
        if let Some(d) = w.strip_prefix("--dir=") {
            let (scion, name) = d.split_once(':').unwrap_or((d, d));
            if !scion.starts_with('/') || name.is_empty() {
                return Err(alloc::format!("--dir={d}: the directory must be absolute, the name not empty"));
            }
            let scion =
                pathnorm::normalise(scion.split('/')).ok_or_else(|| alloc::format!("--dir={d}: `..` above /"))?;
            o.dirs.push((name.to_string(), scion));
        } else if let Some(e) = w.strip_prefix("--env=") {
            if !e.contains('=') {
                return Err(alloc::format!("--env={e}: NAME=VALUE"));
            }
            o.env.push(e.to_string());
        } else if let Some(p) = w.strip_prefix("--listen=") {
            o.listen.push(p.parse().map_err(|_| alloc::format!("--listen={p}: a port number"))?);
        } else if w == "--trace" {
            o.trace = true;
        } else if let Some(m) = w.strip_prefix("--mem=") {
            o.mem_mib = m.parse().ok().filter(|&m| (1..=4096).contains(&m)).ok_or("--mem: 1 to 4096 (MiB)")?;
        } else {
            return Err(alloc::format!("{w}: unknown option"));
        }
    }
    o.args = words.map(String::from).collect();
    if o.args.is_empty() {
        return Err("no program".into());
    }
    Ok(o)
}

/// The ABI's unsigned view of a WebAssembly integer.
pub trait Unsigned {
    type U;
    fn u(self) -> Self::U;
}
impl Unsigned for i32 {
    type U = u32;
    fn u(self) -> u32 {
        self as u32
    }
}
impl Unsigned for i64 {
    type U = u64;
    fn u(self) -> u64 {
        self as u64
    }
}

/// The program's descriptor table over Scion, as options `o` say: the files server
/// looked up, the `--listen` sockets opened and preopened after the directories. On an
/// error the line is said and the exit status answered (2).
pub fn start(o: &Options, who: &str) -> Result<Ctx<Scion>, i32> {
    let files = rt::alloc_slot();
    if let Err(e) = rt::env::lookup("files", files) {
        println!("{who}: no files server: {e:?}");
        return Err(2);
    }
    let net = if o.listen.is_empty() {
        None
    } else {
        let slot = rt::alloc_slot();
        match rt::env::lookup("net", slot).and_then(|_| Net::attach(slot)) {
            Ok(n) => Some(n),
            Err(e) => {
                println!("{who}: --listen needs the network server: {e:?}");
                return Err(2);
            }
        }
    };
    let mut host = Scion { files, net, epoch_ns: epoch_ns(), start_us: rt::sys::now_us(), listeners: Vec::new() };
    for &port in &o.listen {
        match host.net().and_then(|n| n.listen(port, 16)) {
            Ok(l) => host.listeners.push(l),
            Err(e) => {
                println!("{who}: cannot listen on port {port}: {e:?}");
                return Err(2);
            }
        }
    }
    let listeners = host.listeners.clone();
    let mut ctx = Ctx::new(host, o.args.clone(), o.env.clone(), &o.dirs);
    for l in listeners {
        ctx.preopen_listener(l);
    }
    Ok(ctx)
}

impl Scion {
    /// The files server's capability slot.
    pub fn files(&self) -> u64 {
        self.files
    }
}

/// Every preview-1 import but `proc_exit` (which ends the program, as each engine
/// does its own way): `$m!(NAME, |ctx, mem, ARG: TYPE, …| CALL)` for each, the
/// arguments in WebAssembly's types (i32, i64) as the engine receives them; the macro
/// makes them the ABI's unsigned types ([`Unsigned`]) before the call.
#[macro_export]
macro_rules! preview1_calls {
    ($m:ident) => {
        $m!("args_get", |c, m, a: i32, b: i32| c.args_get(m, a, b));
        $m!("args_sizes_get", |c, m, a: i32, b: i32| c.args_sizes_get(m, a, b));
        $m!("environ_get", |c, m, a: i32, b: i32| c.environ_get(m, a, b));
        $m!("environ_sizes_get", |c, m, a: i32, b: i32| c.environ_sizes_get(m, a, b));
        $m!("clock_res_get", |c, m, id: i32, out: i32| c.clock_res_get(m, id, out));
        $m!("clock_time_get", |c, m, id: i32, p: i64, out: i32| c.clock_time_get(m, id, p, out));
        $m!("fd_advise", |c, _m, fd: i32, o: i64, n: i64, a: i32| c.fd_advise(fd, o, n, a));
        $m!("fd_allocate", |c, _m, fd: i32, o: i64, n: i64| c.fd_allocate(fd, o, n));
        $m!("fd_close", |c, _m, fd: i32| c.fd_close(fd));
        $m!("fd_datasync", |c, _m, fd: i32| c.fd_datasync(fd));
        $m!("fd_fdstat_get", |c, m, fd: i32, out: i32| c.fd_fdstat_get(m, fd, out));
        $m!("fd_fdstat_set_flags", |c, _m, fd: i32, f: i32| c.fd_fdstat_set_flags(fd, f));
        $m!("fd_fdstat_set_rights", |c, _m, fd: i32, b: i64, i: i64| c.fd_fdstat_set_rights(fd, b, i));
        $m!("fd_filestat_get", |c, m, fd: i32, out: i32| c.fd_filestat_get(m, fd, out));
        $m!("fd_filestat_set_size", |c, _m, fd: i32, s: i64| c.fd_filestat_set_size(fd, s));
        $m!("fd_filestat_set_times", |c, _m, fd: i32, a: i64, b: i64, f: i32| c.fd_filestat_set_times(fd, a, b, f));
        $m!("fd_pread", |c, m, fd: i32, v: i32, n: i32, o: i64, out: i32| c.fd_pread(m, fd, v, n, o, out));
        $m!("fd_prestat_get", |c, m, fd: i32, out: i32| c.fd_prestat_get(m, fd, out));
        $m!("fd_prestat_dir_name", |c, m, fd: i32, p: i32, n: i32| c.fd_prestat_dir_name(m, fd, p, n));
        $m!("fd_pwrite", |c, m, fd: i32, v: i32, n: i32, o: i64, out: i32| c.fd_pwrite(m, fd, v, n, o, out));
        $m!("fd_read", |c, m, fd: i32, v: i32, n: i32, out: i32| c.fd_read(m, fd, v, n, out));
        $m!("fd_readdir", |c, m, fd: i32, b: i32, n: i32, k: i64, out: i32| c.fd_readdir(m, fd, b, n, k, out));
        $m!("fd_renumber", |c, _m, a: i32, b: i32| c.fd_renumber(a, b));
        $m!("fd_seek", |c, m, fd: i32, o: i64, w: i32, out: i32| c.fd_seek(m, fd, o as i64, w, out));
        $m!("fd_sync", |c, _m, fd: i32| c.fd_sync(fd));
        $m!("fd_tell", |c, m, fd: i32, out: i32| c.fd_tell(m, fd, out));
        $m!("fd_write", |c, m, fd: i32, v: i32, n: i32, out: i32| c.fd_write(m, fd, v, n, out));
        $m!("path_create_directory", |c, m, fd: i32, p: i32, n: i32| c.path_create_directory(m, fd, p, n));
        $m!("path_filestat_get", |c, m, fd: i32, f: i32, p: i32, n: i32, out: i32| c
            .path_filestat_get(m, fd, f, p, n, out));
        $m!("path_filestat_set_times", |c, m, fd: i32, _f: i32, p: i32, n: i32, _a: i64, _b: i64, _g: i32| c
            .path_filestat_set_times(m, fd, p, n));
        $m!("path_link", |c, m, fd: i32, _f: i32, p: i32, n: i32, _g: i32, _q: i32, _k: i32| c.path_link(m, fd, p, n));
        $m!("path_open", |c, m, fd: i32, _df: i32, p: i32, n: i32, of: i32, rb: i64, _ri: i64, ff: i32, out: i32| c
            .path_open(m, fd, p, n, of, rb, ff, out));
        $m!("path_readlink", |c, m, fd: i32, p: i32, n: i32, _b: i32, _k: i32, _o: i32| c.path_readlink(m, fd, p, n));
        $m!("path_remove_directory", |c, m, fd: i32, p: i32, n: i32| c.path_remove_directory(m, fd, p, n));
        $m!("path_rename", |c, m, fd: i32, p: i32, n: i32, g: i32, q: i32, k: i32| c.path_rename(m, fd, p, n, g, q, k));
        $m!("path_symlink", |c, m, _p: i32, _n: i32, fd: i32, q: i32, k: i32| c.path_symlink(m, fd, q, k));
        $m!("path_unlink_file", |c, m, fd: i32, p: i32, n: i32| c.path_unlink_file(m, fd, p, n));
        $m!("poll_oneoff", |c, m, i: i32, o: i32, n: i32, out: i32| c.poll_oneoff(m, i, o, n, out));
        $m!("proc_raise", |c, _m, s: i32| c.proc_raise(s));
        $m!("sched_yield", |c, _m| c.sched_yield());
        $m!("random_get", |c, m, b: i32, n: i32| c.random_get(m, b, n));
        $m!("sock_accept", |c, m, fd: i32, f: i32, out: i32| c.sock_accept(m, fd, f, out));
        $m!("sock_recv", |c, m, fd: i32, v: i32, n: i32, f: i32, o: i32, of: i32| c.sock_recv(m, fd, v, n, f, o, of));
        $m!("sock_send", |c, m, fd: i32, v: i32, n: i32, f: i32, out: i32| c.sock_send(m, fd, v, n, f, out));
        $m!("sock_shutdown", |c, _m, fd: i32, how: i32| c.sock_shutdown(fd, how));
    };
}

/// Say a call that answered an errno (`--trace`): its name and arguments.
pub fn trace(name: &str, args: &[u64], e: u16) {
    let args: Vec<String> = args.iter().map(|a| alloc::format!("{a:#x}")).collect();
    println!("wasi: {}({}) = errno {}", name, args.join(", "), e);
}
