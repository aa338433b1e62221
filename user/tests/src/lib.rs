//! Helpers shared by Scion's test programs.
#![no_std]

extern crate alloc;

pub mod fpu;

use core::fmt::Debug;
use rt::println;

/// Call `server` with a memory receive window `window` (see `rt::server::request_mapping`).
pub fn call_with_window(server: u64, window: abi::fpage::Fpage, m: &mut rt::ipc::Msg) -> Result<(), abi::Error> {
    use abi::fpage::Fpage;
    rt::server::request_mapping(server, [window, Fpage(0), Fpage(0)], m)
}

/// Counts checks; prints each one; the program's exit code says whether all passed.
pub struct Checks {
    pub passed: u32,
    pub failed: u32,
}

impl Checks {
    pub fn new() -> Self {
        Checks { passed: 0, failed: 0 }
    }

    pub fn check(&mut self, ok: bool, what: &str) -> bool {
        if ok {
            self.passed += 1;
            println!("  ok   {}", what);
        } else {
            self.failed += 1;
            println!("  FAIL {}", what);
        }
        ok
    }

    pub fn eq<T: PartialEq + Debug>(&mut self, got: T, want: T, what: &str) -> bool {
        if got == want {
            self.check(true, what)
        } else {
            self.failed += 1;
            println!("  FAIL {}: got {:?}, want {:?}", what, got, want);
            false
        }
    }

    pub fn finish(&self, name: &str) -> i32 {
        println!("{}: {} checks passed, {} failed", name, self.passed, self.failed);
        if self.failed == 0 {
            0
        } else {
            1
        }
    }
}

impl Default for Checks {
    fn default() -> Self {
        Self::new()
    }
}

/// Ask `done` up to `tries` times, 10 ms apart, until it says yes: whether it did.
/// For tests that wait on another program or thread.
pub fn wait_until(tries: u32, mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..tries {
        if done() {
            return true;
        }
        rt::sys::sleep_us(10_000);
    }
    done()
}

/// Call `srv` with a hand-made request (`label`, `words`, and a string if given) and
/// return the error code the server answered with (Ok for 0): for tests that send what
/// no client stub would.
pub fn raw_request(srv: u64, label: u64, words: &[u64], string: Option<&[u8]>) -> Result<(), abi::Error> {
    use rt::ipc::{self, Msg};
    let mut m = Msg::new(label, words);
    if let Some(s) = string {
        ipc::set_send_string(s);
        m = m.with_string();
    }
    rt::server::request(srv, &mut m)
}

/// The test programs' random numbers: xorshift64, seeded (never 0) so a run repeats.
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The id of the live program called `name`, from root's `ps`.
pub fn id_of(name: &str) -> Option<u64> {
    ps_column(name, 0)
}

/// POSIX `cksum` (CRC-32, polynomial 0x04C11DB7, the length folded in), kept as
/// bytes stream by: what the host's `cksum` prints for the same bytes, so a test can
/// check what reached the host.
pub struct Cksum {
    crc: u32,
    len: u64,
    table: [u32; 256],
}

impl Cksum {
    pub fn new() -> Cksum {
        let mut table = [0u32; 256];
        for (i, t) in table.iter_mut().enumerate() {
            let mut c = (i as u32) << 24;
            for _ in 0..8 {
                c = if c & 0x8000_0000 != 0 { (c << 1) ^ 0x04C1_1DB7 } else { c << 1 };
            }
            *t = c;
        }
        Cksum { crc: 0, len: 0, table }
    }

    fn byte(&mut self, b: u8) {
        self.crc = (self.crc << 8) ^ self.table[((self.crc >> 24) as u8 ^ b) as usize];
    }

    pub fn update(&mut self, data: &[u8]) {
        for &b in data {
            self.byte(b);
        }
        self.len += data.len() as u64;
    }

    /// (checksum, length), as `cksum` prints them.
    pub fn finish(mut self) -> (u32, u64) {
        let mut n = self.len;
        while n != 0 {
            self.byte(n as u8);
            n >>= 8;
        }
        (!self.crc, self.len)
    }
}

impl Default for Cksum {
    fn default() -> Self {
        Self::new()
    }
}

/// Column `col` (0: the id) of live program `name`'s line in root's `ps`.
pub fn ps_column(name: &str, col: usize) -> Option<u64> {
    rt::env::ps().ok()?.lines().skip(1).find_map(|l| {
        let w: alloc::vec::Vec<&str> = l.split_whitespace().collect();
        (w.get(1) == Some(&name)).then(|| w.get(col)?.parse().ok())?
    })
}

/// What logical block `l` of a logical-disk test holds after its write number `v`: its
/// first word says which (`l << 32 | v`), the rest a byte of both (the host's check of
/// the map reads the first word).
pub fn ldisk_block(l: u64, v: u64) -> alloc::vec::Vec<u8> {
    let mut b = alloc::vec![(l * 7 + v * 13) as u8; 4096];
    b[..8].copy_from_slice(&(l << 32 | v).to_le_bytes());
    b
}

/// Blocks tagged with their numbers, written and read through a BAIO segment.
pub mod blocks {
    use alloc::vec::Vec;
    use blk_api as p;
    use blk_api::client::Segment;

    /// Blocks in one operation.
    const PER_OP: u64 = 32;

    /// The first word of each block: which block of the segment it is.
    pub fn tag(b: u64) -> u64 {
        b ^ 0x5eed_0000_0000
    }

    /// Run `n` blocks from `first` through the segment, 15 operations of 32 blocks a batch.
    pub fn io(seg: &Segment, kind: u64, first: u64, n: u64, check: bool) -> bool {
        let mut b = first;
        let mut ok = true;
        while b < first + n {
            let mut ops = Vec::new();
            while ops.len() < p::MAX_REG_OPS && b < first + n {
                let k = (first + n - b).min(PER_OP);
                let off = p::DATA + ops.len() as u64 * PER_OP * 4096;
                if kind & 0xff == p::WRITE_OP {
                    for j in 0..k {
                        seg.bytes(off + j * 4096, 8).copy_from_slice(&tag(b + j).to_le_bytes());
                    }
                }
                ops.push(p::op(kind, b, k, ops.len() as u64, off));
                b += k;
            }
            if seg.batch_ops(&ops, p::WAIT_ALL).is_err() {
                return false;
            }
            for (i, o) in ops.iter().enumerate() {
                ok &= seg.status(i as u64) == p::DONE;
                if check && kind & 0xff == p::READ_OP {
                    for j in 0..(o[2] & 0xffff_ffff) {
                        let got = u64::from_le_bytes(seg.bytes(o[3] + j * 4096, 8).try_into().unwrap_or_default());
                        ok &= got == tag(o[1] + j);
                    }
                }
            }
        }
        ok
    }
}

/// Chunk `k` of an update test's file: 1 KiB of `tag`, the chunk number and a pattern.
pub fn update_chunk(tag: u8, k: u64) -> [u8; 1024] {
    let mut b = [0u8; 1024];
    for (i, x) in b.iter_mut().enumerate() {
        *x = tag ^ (k as u8).wrapping_mul(31) ^ (i as u8).wrapping_mul(7) ^ (k >> 8) as u8;
    }
    b
}

/// Chunks an update test's file holds: chunk `k` lies at `(k % UPDATE_SLOTS) * 1024`
/// (the file is written whole first, so that baiofs gives it one extent).
pub const UPDATE_SLOTS: u64 = 256;

/// Write chunk after chunk of `path` (made anew) through the files server `srv`, each
/// read back and compared at once (`each(ok)`), until `stop()`: the handle opened at the
/// start is used throughout. Returns how it ended and the chunks written.
pub fn update_writer(
    srv: u64,
    path: &str,
    tag: u8,
    mut stop: impl FnMut() -> bool,
    mut each: impl FnMut(bool),
) -> (Result<(), abi::Error>, u64) {
    use files_api::client as f;
    let _ = f::remove(srv, path);
    let h = match f::open(srv, path, true) {
        Ok((h, _)) => h,
        Err(e) => return (Err(e), 0),
    };
    // Its last KiB first: baiofs gives the whole file one run of blocks at once.
    if let Err(e) = f::write(srv, h, (UPDATE_SLOTS - 1) * 1024, &[0u8; 1024]) {
        return (Err(e), 0);
    }
    let mut k = 0;
    while !stop() {
        let want = update_chunk(tag, k);
        let at = (k % UPDATE_SLOTS) * 1024;
        let w = f::write(srv, h, at, &want);
        let r = f::read(srv, h, at, 1024);
        let ok = w.is_ok_and(|n| n == 1024) && r.as_ref().is_ok_and(|got| got[..] == want[..]);
        each(ok);
        if !ok {
            rt::println!("{}: chunk {}: write {:?}, read {:?}", path, k, w, r.map(|g| g.len()));
            return (Err(abi::Error::BadState), k);
        }
        k += 1;
    }
    let r = f::sync(srv).and_then(|_| f::close(srv, h));
    (r, k)
}

/// After chunks `0..n` were written, each place of `path` holds the last chunk written
/// there.
pub fn update_check(srv: u64, path: &str, tag: u8, n: u64) -> bool {
    use files_api::client as f;
    let Ok((h, size)) = f::open(srv, path, false) else { return false };
    let last = |j: u64| j + UPDATE_SLOTS * ((n - 1 - j) / UPDATE_SLOTS);
    let mut ok = size >= UPDATE_SLOTS * 1024;
    for j in 0..n.min(UPDATE_SLOTS) {
        let got = f::read(srv, h, j * 1024, 1024);
        if got.as_ref().is_ok_and(|g| g[..] == update_chunk(tag, last(j))[..]) {
            continue;
        }
        ok = false;
        // Say what is there instead: an older chunk of this place, zeros, or other bytes.
        let what = match &got {
            Err(e) => alloc::format!("{e:?}"),
            Ok(g) if g.len() != 1024 => alloc::format!("{} bytes", g.len()),
            Ok(g) if g.iter().all(|x| *x == 0) => "zeros".into(),
            Ok(g) => match (0..=last(j) / UPDATE_SLOTS)
                .map(|m| j + m * UPDATE_SLOTS)
                .find(|k| g[..] == update_chunk(tag, *k)[..])
            {
                Some(k) => alloc::format!("chunk {k}"),
                None => alloc::format!("other bytes {:?}", &g[..8]),
            },
        };
        rt::println!("{path}: place {j} should hold chunk {} and holds {what} (size {size})", last(j));
    }
    let _ = f::close(srv, h);
    ok
}

/// A server thread's body: answers each call with its first word plus one, forever.
pub fn echo_plus_one(_: u64) {
    use rt::ipc::{self, Msg};
    let mut m = Msg::empty();
    let _ = ipc::recv(ipc::RECV_ANY, &mut m, ipc::FOREVER);
    loop {
        let w = m.word(1);
        m = Msg::new(1, &[w + 1]);
        let _ = ipc::reply_wait(ipc::RECV_ANY, &mut m, ipc::FOREVER);
    }
}

/// Load a graft file into `srv` as a patient client does: a refusal that says "not
/// now" (`WouldBlock`: this principal's share of the server's graft time is spent, or a
/// back-off after a graft of its was stopped there, `graft::share`) is asked again,
/// 50 ms apart, for up to a minute. Any other answer is the answer.
pub fn load_graft(srv: u64, file: &[u8]) -> Result<u32, graft_api::Refusal> {
    patiently(|| graft_api::load(srv, file))
}

/// Hot-swap graft `id` in `srv` for `file`, as patiently as `load_graft`.
pub fn replace_graft(srv: u64, id: u32, file: &[u8]) -> Result<(), graft_api::Refusal> {
    patiently(|| graft_api::replace(srv, id, file))
}

fn patiently<T>(mut f: impl FnMut() -> Result<T, graft_api::Refusal>) -> Result<T, graft_api::Refusal> {
    let mut r = f();
    for _ in 0..1200 {
        match &r {
            Err(e) if e.error == abi::Error::WouldBlock => rt::sys::sleep_us(50_000),
            _ => break,
        }
        r = f();
    }
    r
}

/// `N` pages of read-only data, so clean: a program's memory server may take them back
/// past its resident limit, and a read of one that was taken back is a page fault it
/// fills again from the image. Each page's first word names it (`page_tag`).
/// Page-aligned: a hot list names pages by their first address, which `addr(p)` is only
/// so (a byte array lies wherever the linker puts it; a change elsewhere once moved
/// one 0x38 past a page's start, and no hot page was kept). A program keeps one in a
/// `static` (`static T: CleanPages<192> = CleanPages::new();`).
#[repr(C, align(4096))]
pub struct CleanPages<const N: usize>([[u8; 4096]; N]);

/// The first word of page `p` of a `CleanPages`.
pub const fn page_tag(p: usize) -> u64 {
    0x7_ab1e_0000 + p as u64
}

impl<const N: usize> CleanPages<N> {
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        let mut t = [[0u8; 4096]; N];
        let mut p = 0;
        while p < N {
            let tag = page_tag(p).to_le_bytes();
            let mut k = 0;
            while k < 8 {
                t[p][k] = tag[k];
                k += 1;
            }
            p += 1;
        }
        CleanPages(t)
    }

    /// Page `p` as the program reads it (an opaque reference: the compiler may not fold
    /// the constant, nor drop the read): does its first word name it?
    pub fn read(&self, p: usize) -> bool {
        let t: &[[u8; 4096]; N] = core::hint::black_box(&self.0);
        u64::from_le_bytes(t[p][..8].try_into().unwrap_or_default()) == page_tag(p)
    }

    /// The first address of page `p`.
    pub fn addr(&self, p: usize) -> u64 {
        self.0[p].as_ptr() as u64
    }
}

/// One eBPF instruction's 8 bytes (opcode, registers, offset, immediate).
pub fn bpf_ins(op: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = op;
    b[1] = dst | src << 4;
    b[2..4].copy_from_slice(&off.to_le_bytes());
    b[4..8].copy_from_slice(&imm.to_le_bytes());
    b
}

/// An honest counted loop the eBPF verifier must follow round by round:
/// r0 = 0; r2 = 0; do { r0 += r2; r2 += 1 } while (r2 < rounds); r0 = 0; exit.
pub fn bpf_counted_loop(rounds: i32) -> alloc::vec::Vec<u8> {
    [
        bpf_ins(0xb7, 0, 0, 0, 0),
        bpf_ins(0xb7, 2, 0, 0, 0),
        bpf_ins(0x0f, 0, 2, 0, 0),
        bpf_ins(0x07, 2, 0, 0, 1),
        bpf_ins(0xa5, 2, 0, -3, rounds),
        bpf_ins(0xb7, 0, 0, 0, 0),
        bpf_ins(0x95, 0, 0, 0, 0),
    ]
    .concat()
}
