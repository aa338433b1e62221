//! sigma0: the first user task. The kernel hands it every usable frame (mapped at
//! `SIGMA0_PHYS + physical address`), the device-memory window and every I/O port.
//! It gives each frame to one client — idempotently to the same one — pages its
//! direct clients (root, memory servers) with anonymous frames, hands out physically
//! contiguous runs for DMA, device memory and I/O ports, and takes frames back.
//!
//! sigma0 has no pager, so it never allocates: its bookkeeping (one owner word per
//! frame) lives in frames it keeps for itself.
//!
//! **Kept for page faults.** Requests for frames (`ALLOC`, `PHYS`: memory servers'
//! pools, DMA buffers) are refused once only `keep` frames are left — 1/128 of the
//! frames, about twice what the memory servers' own bookkeeping takes per page they
//! serve, and 4 MiB more (a sixteenth of the frames on a machine under 64 MiB) — so that the page faults of sigma0's direct clients (root and the
//! memory servers: their heaps) are still answered when programs have taken the rest:
//! no client's demand leaves a memory server unable to grow its heap and die.
//!
//! **Lent frames** (`LEND`): frames given as `ALLOC` gives them, but counted as lent until
//! their borrower — the shared cache, growing into free memory — frees them. sigma0 counts
//! the frames it refuses (`STATS`): the borrower watches that count and gives frames back
//! when it moves, and a memory server refused while frames are lent waits for them.
#![no_std]
#![no_main]

use abi::fpage::Fpage;
use abi::ipc::label;
use abi::layout::{PAGE_SIZE, SIGMA0_PHYS};
use abi::{mem, Error};
use rt::ipc::Msg;
use rt::server::{self, Answer, Badge, Server};
use rt::{println, sys};
use sigma0_api::{self as s0, Request};

rt::entry!(main);

const MAX_RUNS: usize = 32;
/// A client's number: the badge root gives it (`s0_client`: a program's id plus one,
/// never given twice). As wide as root's ids (a badge's 32 bits): with 16, the
/// 65,534th program started was numbered as sigma0 itself, and the next as root, and
/// ending it took back root's own frames.
type Client = u32;
const FREE: Client = 0;
const SELF: Client = Client::MAX;

struct Sigma0 {
    runs: [(u64, u64); MAX_RUNS],
    nruns: usize,
    mmio: (u64, u64),
    /// owner[frame]: FREE, SELF, or the client's badge.
    owner: &'static mut [Client],
    free: u64,
    total: u64,
    /// Frames only page faults may take (see the module comment).
    keep: u64,
    /// Where the search for runs of free frames starts (next fit: where the last one
    /// ended), as (run, address). From the start of RAM every time, each request
    /// walked past every frame given out before it.
    rotor: (usize, u64),
    /// Where the search for a single frame (a page fault) starts, going down from the
    /// top of RAM: single frames taken between runs would each spoil an aligned run.
    down: u64,
    /// Frames lent (`LEND`) per borrower, not yet given back (client, frames).
    lent: [(Client, u64); s0::MAX_LENDERS],
    /// Frames `ALLOC` refused for want of memory, so far.
    refused: u64,
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

fn range(s: &str) -> Option<(u64, u64)> {
    let (a, b) = s.split_once('-')?;
    Some((hex(a)?, hex(b)?))
}

impl Sigma0 {
    fn is_ram(&self, pa: u64) -> bool {
        self.runs[..self.nruns].iter().any(|(a, b)| (*a..*b).contains(&pa))
    }

    fn zero(pa: u64, pages: u64) {
        // SAFETY: sigma0 sees all its RAM at SIGMA0_PHYS + pa, read-write; the frames
        // are being handed out and hold nothing of sigma0's.
        unsafe { core::ptr::write_bytes((SIGMA0_PHYS + pa) as *mut u8, 0, (pages * PAGE_SIZE) as usize) };
    }

    /// One free frame for `client`, searching down from `down` (round RAM once).
    fn alloc_one(&mut self, client: Client) -> Option<u64> {
        if self.free == 0 {
            return None;
        }
        let frames = self.owner.len();
        let mut f = ((self.down / PAGE_SIZE) as usize).min(frames);
        for _ in 0..frames {
            f = if f == 0 { frames - 1 } else { f - 1 };
            // (Frames that are not RAM are marked SELF, never FREE.)
            if self.owner[f] == FREE {
                self.owner[f] = client;
                self.free -= 1;
                let pa = f as u64 * PAGE_SIZE;
                Self::zero(pa, 1);
                self.down = pa;
                return Some(pa);
            }
        }
        None
    }

    /// Find `pages` free frames (aligned to their count) and give them to `client`:
    /// from the rotor on, round the runs once. (One frame: `alloc_one`.)
    fn alloc(&mut self, pages: u64, client: Client) -> Option<u64> {
        if pages == 1 {
            return self.alloc_one(client);
        }
        if self.free < pages || self.nruns == 0 {
            return None;
        }
        let (r0, at0) = self.rotor;
        let r0 = r0.min(self.nruns - 1);
        // The rotor's run from the rotor, the other runs whole, the rotor's run up to it.
        for step in 0..=self.nruns {
            let i = (r0 + step) % self.nruns;
            let (a, b) = self.runs[i];
            let (lo, hi) = match step {
                0 => (at0.clamp(a, b), b),
                n if n == self.nruns => (a, at0.clamp(a, b).saturating_add(pages * PAGE_SIZE).min(b)),
                _ => (a, b),
            };
            let mut pa = lo.div_ceil(pages * PAGE_SIZE) * pages * PAGE_SIZE;
            while pa + pages * PAGE_SIZE <= hi {
                let f = (pa / PAGE_SIZE) as usize;
                match (0..pages as usize).find(|k| self.owner[f + k] != FREE) {
                    None => {
                        self.owner[f..f + pages as usize].fill(client);
                        self.free -= pages;
                        Self::zero(pa, pages);
                        self.rotor = (i, pa + pages * PAGE_SIZE);
                        return Some(pa);
                    }
                    Some(k) => pa = (((f + k + 1) as u64 * PAGE_SIZE).div_ceil(pages * PAGE_SIZE)) * pages * PAGE_SIZE,
                }
            }
        }
        None
    }

    /// These frames for `client`, if free or already its own.
    fn take(&mut self, pa: u64, pages: u64, client: Client) -> bool {
        let f = (pa / PAGE_SIZE) as usize;
        let ok = (0..pages).all(|k| {
            self.is_ram(pa + k * PAGE_SIZE) && matches!(self.owner[f + k as usize], o if o == FREE || o == client)
        });
        // Free frames taken count against those kept for page faults, as `ALLOC`'s do.
        if ok && self.free < (0..pages).filter(|&k| self.owner[f + k as usize] == FREE).count() as u64 + self.keep {
            return false;
        }
        if ok {
            for k in 0..pages as usize {
                if self.owner[f + k] == FREE {
                    self.owner[f + k] = client;
                    self.free -= 1;
                    Self::zero(pa + k as u64 * PAGE_SIZE, 1);
                }
            }
        }
        ok
    }

    /// Take frames back: revoke every mapping derived from them.
    fn release(&mut self, pa: u64, pages: u64, client: Option<Client>) -> u64 {
        // All of them the client's, an aligned run (a memory server's block): one UNMAP.
        let f0 = (pa / PAGE_SIZE) as usize;
        let whole = pages.is_power_of_two() && pa.is_multiple_of(pages * PAGE_SIZE) && (0..pages).all(|k| {
            self.is_ram(pa + k * PAGE_SIZE)
                && matches!(self.owner[f0 + k as usize], o if o != FREE && o != SELF && client.is_none_or(|c| c == o))
        });
        if whole && pages > 1 {
            // SAFETY: only mappings derived from sigma0's own window are revoked.
            let _ = unsafe { sys::unmap(Fpage::mem(SIGMA0_PHYS + pa, 12 + pages.trailing_zeros() as u64, 0), 0) };
            self.owner[f0..f0 + pages as usize].fill(FREE);
            self.free += pages;
            return pages;
        }
        let mut n = 0;
        for k in 0..pages {
            // (A client names the address: past the owner table it holds nothing.)
            let Some(p) = pa.checked_add(k * PAGE_SIZE) else { break };
            let f = (p / PAGE_SIZE) as usize;
            let Some(&o) = self.owner.get(f) else { break };
            if o != FREE && o != SELF && client.is_none_or(|c| c == o) {
                // SAFETY: only mappings derived from sigma0's own window are revoked.
                let _ = unsafe { sys::unmap(Fpage::mem(SIGMA0_PHYS + p, 12, 0), 0) };
                self.owner[f] = FREE;
                self.free += 1;
                n += 1;
            }
        }
        n
    }

    /// Frames `pa ..` (`pages`), all `from`'s, become `to`'s (nothing moves otherwise).
    fn move_frames(&mut self, pa: u64, pages: u64, from: Client, to: Client) -> Option<u64> {
        let f = (pa / PAGE_SIZE) as usize;
        let all = pa.is_multiple_of(PAGE_SIZE)
            && pa.checked_add(pages * PAGE_SIZE).is_some()
            && (0..pages).all(|k| self.is_ram(pa + k * PAGE_SIZE) && self.owner[f + k as usize] == from);
        if !all {
            return None;
        }
        self.owner[f..f + pages as usize].fill(to);
        Some(pages)
    }

    /// The frames of the first `HOLDERS_MAX` clients numbered `from` or above that hold
    /// any, by number (client, frames), and the next number to ask from (0: none).
    /// One walk of the owner table: the smallest numbers seen are kept in a small sorted
    /// table; a client pushed out of it (or never let in) is above every number kept,
    /// and no number above the largest kept is ever let in again, so each count kept is
    /// a whole one.
    fn holders(&self, from: Client) -> ([(Client, u64); s0::HOLDERS_MAX], usize, Client) {
        let mut t = [(0 as Client, 0u64); s0::HOLDERS_MAX];
        let (mut n, mut next) = (0usize, 0 as Client);
        let mut last: Option<usize> = None;
        for &o in self.owner.iter() {
            if o == FREE || o == SELF || o < from {
                continue;
            }
            // Runs of one owner are the rule: the last entry first.
            if let Some(i) = last.filter(|&i| i < n && t[i].0 == o) {
                t[i].1 += 1;
                continue;
            }
            match t[..n].binary_search_by_key(&o, |e| e.0) {
                Ok(i) => {
                    t[i].1 += 1;
                    last = Some(i);
                }
                Err(i) if n < t.len() => {
                    t.copy_within(i..n, i + 1);
                    t[i] = (o, 1);
                    n += 1;
                    last = Some(i);
                }
                Err(i) if i < n => {
                    // Full, and `o` is below the largest kept: that one goes.
                    let gone = t[n - 1].0;
                    next = if next == 0 { gone } else { next.min(gone) };
                    t.copy_within(i..n - 1, i + 1);
                    t[i] = (o, 1);
                    last = Some(i);
                }
                Err(_) => next = if next == 0 { o } else { next.min(o) },
            }
        }
        (t, n, next)
    }

    fn reclaim(&mut self, client: Client) -> u64 {
        let mut n = 0;
        for i in 0..self.nruns {
            let (a, b) = self.runs[i];
            let mut pa = a;
            while pa < b {
                if self.owner[(pa / PAGE_SIZE) as usize] == client {
                    n += self.release(pa, 1, Some(client));
                }
                pa += PAGE_SIZE;
            }
        }
        n
    }
}

fn item(m: &mut Msg, pa: u64, log2_pages: u64, rights: u64, hotspot: u64) {
    m.push_item(Fpage::mem(SIGMA0_PHYS + pa, 12 + log2_pages, rights), hotspot & !0xfff);
}

fn main() -> i32 {
    let mut runs = [(0u64, 0u64); MAX_RUNS];
    let mut nruns = 0;
    let mut mmio = (0, 0);
    for w in rt::args().split(' ') {
        if let Some(r) = w.strip_prefix("ram=").and_then(range) {
            if nruns < MAX_RUNS {
                runs[nruns] = r;
                nruns += 1;
            }
        } else if let Some(r) = w.strip_prefix("mmio=").and_then(range) {
            mmio = r;
        }
    }
    let top = runs[..nruns].iter().map(|r| r.1).max().unwrap_or(0);
    let frames = top / PAGE_SIZE;
    let table_pages = (frames * core::mem::size_of::<Client>() as u64).div_ceil(PAGE_SIZE);
    // The owner table goes in the first run big enough for it.
    let Some(t) = runs[..nruns].iter().position(|(a, b)| b - a >= table_pages * PAGE_SIZE) else {
        println!("sigma0: no memory for the owner table");
        return 1;
    };
    let table_pa = runs[t].0;
    // SAFETY: the table's frames are sigma0's own (mapped read-write at SIGMA0_PHYS),
    // marked SELF below so that they are never handed out.
    let owner = unsafe { core::slice::from_raw_parts_mut((SIGMA0_PHYS + table_pa) as *mut Client, frames as usize) };
    owner.fill(SELF);
    let mut s = Sigma0 {
        runs,
        nruns,
        mmio,
        owner,
        free: 0,
        total: 0,
        keep: 0,
        rotor: (0, 0),
        down: 0,
        lent: [(0, 0); s0::MAX_LENDERS],
        refused: 0,
    };
    for i in 0..nruns {
        let (a, b) = s.runs[i];
        for f in a / PAGE_SIZE..b / PAGE_SIZE {
            s.owner[f as usize] = FREE;
            s.free += 1;
        }
    }
    for f in 0..table_pages {
        s.owner[(table_pa / PAGE_SIZE + f) as usize] = SELF;
        s.free -= 1;
    }
    s.total = s.free;
    s.keep = s.total / 128 + 1024.min(s.total / 16);
    s.down = top;
    println!("sigma0: {} MiB in {} runs, device window {:#x}-{:#x}", s.free >> 8, nruns, s.mmio.0, s.mmio.1);

    let mut buf = [0u8; 64];
    server::run(&mut s, &mut buf)
}

/// sigma0's clients are numbered by the badges root gives them (root's own is 1).
fn client_of(from: Badge) -> Option<Client> {
    let c = from.0;
    if c == 0 || c >= SELF as u64 {
        None
    } else {
        Some(c as Client)
    }
}

impl Server for Sigma0 {
    type Request<'a> = Request;

    /// Page faults of root and the memory servers, whose pager sigma0 is.
    fn event(&mut self, from: Badge, m: &Msg) -> Option<Answer> {
        if m.label() != label::PAGE_FAULT {
            return None;
        }
        let Some(client) = client_of(from) else { return Some(Answer::err(Error::NoRights)) };
        let mut out = Msg::new(0, &[0, 0]);
        Some(match self.alloc(1, client) {
            Some(pa) => {
                item(&mut out, pa, 0, mem::RIGHTS_MASK, m.word(1));
                Answer::Reply(out)
            }
            None => Answer::err(Error::NoMemory),
        })
    }

    fn handle(&mut self, from: Badge, req: Request) -> Answer {
        let Some(client) = client_of(from) else { return Answer::err(Error::NoRights) };
        let mut out = Msg::new(0, &[0, 0]);
        match req {
            Request::Alloc { log2, hot } | Request::Lend { log2, hot } => {
                let lend = matches!(req, Request::Lend { .. });
                // A borrower's entry first: none free, nothing is lent.
                let entry = match lend {
                    false => None,
                    true => match self
                        .lent
                        .iter()
                        .position(|l| l.0 == client && l.1 > 0)
                        .or_else(|| self.lent.iter().position(|l| l.1 == 0))
                    {
                        Some(e) => Some(e),
                        None => return Answer::err(Error::NoSpace),
                    },
                };
                let got = if self.free < (1u64 << log2) + self.keep { None } else { self.alloc(1 << log2, client) };
                match got {
                    Some(pa) => {
                        if let Some(e) = entry {
                            self.lent[e] = (client, self.lent[e].1 + (1 << log2));
                        }
                        out.mr[2] = pa;
                        item(&mut out, pa, log2, mem::RIGHTS_MASK, hot);
                        Answer::Reply(out)
                    }
                    None => {
                        // A borrower refused is not memory wanted: it just lends no more.
                        if !lend {
                            self.refused += 1 << log2;
                        }
                        Answer::err(Error::NoMemory)
                    }
                }
            }
            Request::Phys { pa, log2, hot } => {
                if pa.is_multiple_of(PAGE_SIZE << log2) && self.take(pa, 1 << log2, client) {
                    item(&mut out, pa, log2, mem::RIGHTS_MASK, hot);
                    Answer::Reply(out)
                } else {
                    Answer::err(Error::NoRights)
                }
            }
            Request::Mmio { pa, log2, hot } => {
                let len = PAGE_SIZE << log2;
                if !pa.is_multiple_of(len) {
                    Answer::err(Error::Misaligned)
                } else if pa >= self.mmio.0 && pa.saturating_add(len) <= self.mmio.1 {
                    item(&mut out, pa, log2, mem::READ | mem::WRITE, hot);
                    Answer::Reply(out)
                } else {
                    Answer::err(Error::BadAddress)
                }
            }
            // Ports go to root alone, which passes them on as the manifest says.
            Request::Io { .. } if client != 1 => Answer::err(Error::NoRights),
            Request::Io { first, log2 } => {
                let f = Fpage::io(first, log2);
                if f.is_valid() {
                    out.push_item(f, 0);
                    Answer::Reply(out)
                } else {
                    Answer::err(Error::InvalidArg)
                }
            }
            Request::Free { pa, log2 } => {
                let n = self.release(pa, 1 << log2, Some(client));
                // A borrower's frames back: lent no more (at most what it borrowed).
                if let Some(l) = self.lent.iter_mut().find(|l| l.0 == client && l.1 > 0) {
                    l.1 = l.1.saturating_sub(n);
                }
                Answer::ok(&[n])
            }
            Request::Stats => {
                Answer::ok(&[self.free, self.total, self.lent.iter().map(|l| l.1).sum(), self.refused, self.keep])
            }
            // A walk of the whole owner table: root's alone (it asks for `mem`, at most a
            // few times a second), not every client's to ask in a loop.
            Request::Holders { .. } if client != 1 => Answer::err(Error::NoRights),
            Request::Holders { from } => {
                let own = self.owner.iter().filter(|&&o| o == SELF).count() as u64;
                // (Frames that are not RAM are marked SELF too: only RAM's are sigma0's.)
                let holes = self.owner.len() as u64
                    - self.runs[..self.nruns].iter().map(|(a, b)| (b - a) / PAGE_SIZE).sum::<u64>();
                let from = from.clamp(1, SELF as u64 - 1) as Client;
                let (t, n, next) = self.holders(from);
                let mut w = [0u64; 2 + 3 * s0::HOLDERS_MAX];
                w[0] = own.saturating_sub(holes);
                w[1] = next as u64;
                for (k, &(c, frames)) in t[..n].iter().enumerate() {
                    let lent = self.lent.iter().filter(|l| l.0 == c).map(|l| l.1).sum();
                    w[2 + 3 * k..5 + 3 * k].copy_from_slice(&[c as u64, frames, lent]);
                }
                Answer::ok(&w[..2 + 3 * n])
            }
            Request::Reclaim { client: c } if client == 1 => {
                // Never root's own frames (client 1), nor a number no client has.
                let Some(c) = client_of(Badge(c)).filter(|&c| c != 1) else {
                    return Answer::err(Error::InvalidArg);
                };
                if let Some(l) = self.lent.iter_mut().find(|l| l.0 == c) {
                    l.1 = 0;
                }
                let n = self.reclaim(c);
                Answer::ok(&[n])
            }
            Request::Reclaim { .. } => Answer::err(Error::NoRights),
            Request::Move { pa, log2, from, to } if client == 1 => {
                let (Some(from), Some(to)) = (client_of(Badge(from)), client_of(Badge(to))) else {
                    return Answer::err(Error::InvalidArg);
                };
                match self.move_frames(pa, 1 << log2, from, to) {
                    Some(n) => Answer::ok(&[n]),
                    None => Answer::err(Error::NoRights),
                }
            }
            Request::Move { .. } => Answer::err(Error::NoRights),
        }
    }
}
