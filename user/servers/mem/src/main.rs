//! A memory server stacked on sigma0 (L4's recursive address spaces): it pages the
//! programs root registers with it. Page faults arrive as IPC with the client's
//! badge; it answers with a map item of a page from its pool — filled from the
//! program's ELF image (the boot image is mapped to it read-only; a program from the
//! files filesystem comes as an image root sends, `mem_api::IMAGE`, kept in this
//! server's heap for the program's life), holding the
//! program's start information, or zeroed (demand-zero anonymous memory) — within
//! the client's page limit. Pool pages come from sigma0 a megabyte at a time and
//! go back to the pool when a client is unregistered.
//!
//! **Reservations** (`mem_api::RESERVE`, asked by `rt::heap` before it grows): a
//! program sets pages aside before it touches them (its image and main stack are set
//! aside when root registers it: without room for them it does not start). The server takes them into its pool
//! at once (from sigma0) and keeps them for that program, so a page it reserved is
//! always there when it faults; a reservation past the program's limit (beside the
//! pages it holds and has set aside) or beyond the memory there is, is refused whole
//! with `NoMemory` — the program hears it and carries on. A page faulted in without a
//! reservation comes from the pool if it holds more than the pages set aside, else from
//! sigma0; when neither can give one (or the program is at its limit) the fault is
//! declined and the program ends (root, its fault handler, removes it), as any access
//! nobody can answer. The server's own kernel quota is derived by root from all of
//! sigma0's frames: it maps each at most once, so no client's demand exhausts it.
//!
//! **Reclaim** (the memory servers' graft point, VINO's prioritization): a program past
//! its resident limit (manifest `resident`, or its own `USAGE`) gives a page back for
//! each new one it faults in. Only clean pages are taken — those of its image's
//! read-only segments, filled again from the image on the next fault — so nothing is
//! lost (there is no swap device for written pages). Which one: the program's eviction
//! graft chooses among its eight oldest clean pages (input: their addresses), as the
//! cache's graft chooses among blocks; without one, or when the call is aborted, the
//! oldest goes.
#![no_std]
#![no_main]

extern crate alloc;

use abi::fpage::Fpage;
use abi::ipc::label;
use abi::layout::{MAIN_STACK_TOP, MAIN_UTCB, PAGE_SIZE};
use abi::{cap, mem as m, Error, StartInfo};
use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;
use kcore::elf;
use mem_api::Request;
use rt::ipc::{self, Msg};
use rt::println;
use rt::proto;
use rt::server::{self, Answer, Badge, Server};
use sigma0_api as s0;

rt::entry!(main);

const POOL: u64 = rt::layout::POOL;
const GROW_LOG2: u64 = 8; // 256 pages from sigma0 at a time
const BLOCK: u64 = 1 << GROW_LOG2;
/// Free pool pages kept when clients go (beyond those set aside); whole blocks past
/// them go back to sigma0, for the other memory server and sigma0's other clients.
const KEEP_POOL: u64 = 4 * BLOCK;
/// How long a refused request for pool frames waits for lent frames to come back, and
/// how often it asks again meanwhile.
const LENT_WAIT_US: u64 = 2_000_000;
const LENT_STEP_US: u64 = 2_000;
/// Pages one page fault may map at once in a region the program set aside (the
/// faulting page and those after it): a program touching its memory in order faults
/// once per 64 KiB.
const AHEAD: u64 = 16;
/// Regions a program may name in its reservations (more are set aside all the same,
/// without a region: its faults there map one page each).
const MAX_REGIONS: usize = 64;
/// Lowest address a client may fault in (catches null pointers).
const LOWEST: u64 = 0x10000;
/// A program's newest clean pages never taken back: one instruction may need several
/// at once (its code, the data it reads), and with only one clean page left two such
/// pages would take each other back for ever.
const KEEP_CLEAN: usize = 8;
/// The graft point this server hosts: which of a program's pages to take back.
const EVICT: [graft::Point; 1] = [graft::Point::Evict];

/// A program's ELF image: in the boot image, or sent by root (`mem_api::IMAGE`: a
/// program from the files filesystem), kept for the program's life.
enum Image {
    Boot(&'static [u8]),
    Sent(Vec<u8>),
}

impl core::ops::Deref for Image {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Image::Boot(b) => b,
            Image::Sent(v) => v,
        }
    }
}

struct Client {
    elf: elf::Elf,
    image: Image,
    args: String,
    limit: u64,
    /// Pages set aside for it (`RESERVE`), in the pool, not yet faulted in.
    reserved: u64,
    /// The regions it named in its reservations (start → end): its own anonymous
    /// memory, where a fault may map the pages after the faulting one too.
    regions: BTreeMap<u64, u64>,
    /// Its manifest entry lets it load an eviction graft here (`caps` has "pager").
    grafts: bool,
    /// Client page address → pool page index.
    pages: BTreeMap<u64, u32>,
    /// Resident limit (0: none): past it, each new page takes a clean one back.
    resident: u64,
    /// Its clean resident pages (of read-only segments), oldest first.
    clean: VecDeque<u64>,
    /// Clean pages taken back and not faulted in again since.
    dropped: BTreeSet<u64>,
    taken_back: u64,
    refaults: u64,
    /// Victims its graft chose.
    grafted: u64,
}

struct Mem {
    name: String,
    /// The pool's blocks (of `BLOCK` pages at `POOL + index * BLOCK` pages): the
    /// physical address of each, None for one given back to sigma0 (its index is
    /// taken again first).
    blocks: Vec<Option<u64>>,
    spare_blocks: Vec<u32>,
    pool_pages: u64,
    /// Pool pages given back by clients (to be zeroed before they go out again).
    free: Vec<u32>,
    /// Pool pages as sigma0 gave them (zero).
    zeroed: Vec<u32>,
    /// Pages set aside for all clients: the pool keeps at least this many.
    reserved: u64,
    /// Pages of blocks given back still in the lists (`give_back`, while it runs).
    free_pending: u64,
    clients: BTreeMap<u64, Client>,
    bootfs: &'static [u8],
    /// Eviction grafts of the programs paged here, by program id (a program's pages are
    /// its own: only it may choose among them).
    grafts: graft::Table,
    /// The text of the last graft LIST reply (it must live until the kernel copies it).
    text: String,
    /// A capability a graft `LOAD` brings (an upcall graft's thread).
    inbox: graft_api::upcall::Inbox,
    /// An image root is sending (`IMAGE`): for this badge, this long, the bytes so far.
    upload: Option<(u64, u64, Vec<u8>)>,
}

impl Mem {
    /// Pool pages free (some of them set aside for reservations).
    fn available(&self) -> u64 {
        (self.free.len() + self.zeroed.len()) as u64 - self.free_pending
    }

    /// Take a block (256 pages) from sigma0 into the pool: false when it has none. Before
    /// giving up: while sigma0 has frames lent (the shared cache's grown blocks), wait for
    /// them — sigma0's refusal is what tells the cache to give them back — up to
    /// `LENT_WAIT_US`, asking again every `LENT_STEP_US`.
    fn grow(&mut self) -> bool {
        if self.grow_once() {
            return true;
        }
        let until = rt::sys::now_us() + LENT_WAIT_US;
        while rt::sys::now_us() < until {
            if !matches!(s0::client::stats(cap::SIGMA0_SLOT), Ok([_, _, lent, ..]) if lent != 0) {
                return false;
            }
            rt::sys::sleep_us(LENT_STEP_US);
            if self.grow_once() {
                return true;
            }
        }
        println!("{}: sigma0 has frames lent but gave none back in {} ms", self.name, LENT_WAIT_US / 1000);
        false
    }

    fn grow_once(&mut self) -> bool {
        let b = self.spare_blocks.last().map_or(self.blocks.len() as u64, |&b| b as u64);
        // Page indices are u32: 16 TiB of pool.
        if b >= u32::MAX as u64 / BLOCK {
            return false;
        }
        let at = POOL + b * BLOCK * PAGE_SIZE;
        let mut req = Msg::new(s0::ALLOC, &[GROW_LOG2, at]);
        if rt::server::request_mapping(
            cap::SIGMA0_SLOT,
            [Fpage::mem(at, 12 + GROW_LOG2, abi::mem::RIGHTS_MASK), Fpage(0), Fpage(0)],
            &mut req,
        )
        .is_err()
            || req.items() != 1
        {
            return false;
        }
        if self.spare_blocks.pop().is_none() {
            self.blocks.push(None);
        }
        self.blocks[b as usize] = Some(req.word(2));
        self.zeroed.extend((b * BLOCK..(b + 1) * BLOCK).rev().map(|i| i as u32));
        self.pool_pages += BLOCK;
        true
    }

    /// Give whole free blocks back to sigma0, keeping `KEEP_POOL` free pages beyond
    /// those set aside (after a client went: its pages would otherwise stay in this
    /// pool, out of the other memory server's reach).
    fn give_back(&mut self) {
        let mut free_in = alloc::vec![0u32; self.blocks.len()];
        for &i in self.free.iter().chain(self.zeroed.iter()) {
            free_in[(i as u64 / BLOCK) as usize] += 1;
        }
        let mut gone = alloc::vec![false; self.blocks.len()];
        for (b, n) in free_in.iter().enumerate() {
            if self.available() < self.reserved + KEEP_POOL + BLOCK {
                break;
            }
            let Some(pa) = self.blocks[b] else { continue };
            if *n as u64 != BLOCK {
                continue;
            }
            if s0::client::free(cap::SIGMA0_SLOT, pa, GROW_LOG2).is_err() {
                break;
            }
            self.blocks[b] = None;
            self.spare_blocks.push(b as u32);
            self.pool_pages -= BLOCK;
            gone[b] = true;
            // Counted out of `available` at once; the lists are filtered below.
            self.free_pending += BLOCK;
        }
        if self.free_pending > 0 {
            self.free.retain(|&i| !gone[(i as u64 / BLOCK) as usize]);
            self.zeroed.retain(|&i| !gone[(i as u64 / BLOCK) as usize]);
            self.free_pending = 0;
        }
    }

    /// One zeroed pool page: one set aside for the client (`reserved`), or one the
    /// reservations leave, growing the pool from sigma0 when there is none.
    fn page(&mut self, reserved: bool) -> Option<u32> {
        if !reserved && self.available() <= self.reserved && !self.grow() {
            return None;
        }
        if let Some(i) = self.zeroed.pop() {
            return Some(i); // fresh from sigma0: already zero
        }
        let i = self.free.pop()?;
        // SAFETY: pool page i is mapped read-write in this server and belongs to no client.
        unsafe { core::ptr::write_bytes((POOL + i as u64 * PAGE_SIZE) as *mut u8, 0, PAGE_SIZE as usize) };
        Some(i)
    }

    /// Set `n` more pages aside for client `badge` (at most `RESERVE_STEP` now: the
    /// answer says how many), for the region of `n` pages at `at` if it names one (0:
    /// none). Refused whole (`NoMemory`) past its limit, or when sigma0 has no memory
    /// for them (what the pool took meanwhile stays in it).
    fn reserve(&mut self, badge: u64, n: u64, at: u64) -> Result<u64, Error> {
        let region = match at {
            0 => None,
            a if a % PAGE_SIZE == 0
                && a >= LOWEST
                && n > 0
                && n <= u64::MAX / PAGE_SIZE
                && abi::layout::is_mappable(a, n * PAGE_SIZE) =>
            {
                Some((a, a + n * PAGE_SIZE))
            }
            _ => return Err(Error::InvalidArg),
        };
        let c = self.clients.get(&badge).ok_or(Error::NotFound)?;
        let (held, limit, had) = (c.pages.len() as u64, c.limit, c.reserved);
        if held.saturating_add(had).saturating_add(n) > limit {
            println!(
                "{}: client {} asked for {} pages past its limit ({} held, {} set aside, limit {}): refused",
                self.name, badge, n, held, had, limit
            );
            return Err(Error::NoMemory);
        }
        let step = n.min(rt::proto::RESERVE_STEP);
        while self.available() < self.reserved + step {
            if !self.grow() {
                println!(
                    "{}: no memory for {} pages client {} asked for (pool {} pages, {} free, {} set aside): refused",
                    self.name,
                    step,
                    badge,
                    self.pool_pages,
                    self.available(),
                    self.reserved
                );
                return Err(Error::NoMemory);
            }
        }
        self.reserved += step;
        if let Some(c) = self.clients.get_mut(&badge) {
            c.reserved += step;
            if let Some((a, b)) = region {
                add_region(&mut c.regions, a, b);
            }
        }
        Ok(step)
    }

    /// Client `badge` gives back `n` pages of its memory at `at` (`RELEASE`): those it
    /// holds there are revoked and freed, and as many of its reservations as the range
    /// has pages it did not hold end. Answers (pages freed, reservations ended).
    fn release(&mut self, badge: u64, at: u64, n: u64) -> Result<(u64, u64), Error> {
        if !at.is_multiple_of(PAGE_SIZE)
            || at < LOWEST
            || n == 0
            || n > rt::proto::RESERVE_STEP
            || !abi::layout::is_mappable(at, n * PAGE_SIZE)
        {
            return Err(Error::InvalidArg);
        }
        let end = at + n * PAGE_SIZE;
        let Mem { clients, free, .. } = self;
        let c = clients.get_mut(&badge).ok_or(Error::NotFound)?;
        let held: Vec<(u64, u32)> = c.pages.range(at..end).map(|(&p, &i)| (p, i)).collect();
        for &(page, idx) in &held {
            c.pages.remove(&page);
            // SAFETY: only mappings derived from our pool page are affected.
            let _ = unsafe { rt::sys::unmap(Fpage::mem(POOL + idx as u64 * PAGE_SIZE, 12, 0), 0) };
            free.push(idx);
        }
        // Clean pages are the image's, never in an anonymous range; a taken-back one
        // here is forgotten with the rest.
        c.clean.retain(|p| !(at..end).contains(p));
        c.dropped.retain(|p| !(at..end).contains(p));
        cut_region(&mut c.regions, at, end);
        let freed = held.len() as u64;
        let unreserved = (n - freed).min(c.reserved);
        c.reserved -= unreserved;
        self.reserved -= unreserved;
        if freed + unreserved > 0 {
            self.give_back();
        }
        Ok((freed, unreserved))
    }

    /// Answer a page fault: the map item, or None to decline.
    fn fault(&mut self, badge: u64, addr: u64, access: u64) -> Option<Msg> {
        let page = addr & !(PAGE_SIZE - 1);
        let c = self.clients.get(&badge)?;
        // A page no pager may map (the half's last page): declined, so the kernel hands
        // the fault to the fault handler (root ends the program). An item for it would be
        // refused by the kernel, and the thread would wait for ever.
        if page < LOWEST || !abi::layout::is_mappable(page, PAGE_SIZE) {
            return None;
        }
        if access & label::PRESENT != 0 {
            // A protection fault (the page is there, the access breaks its rights).
            return None;
        }
        let seg = c.elf.segments().iter().copied().find(|s| {
            let (a, b) = s.page_range();
            (a..b).contains(&page)
        });
        let rights = match seg {
            Some(s) => m::READ | if s.write { m::WRITE } else { 0 } | if s.exec { m::EXEC } else { 0 },
            None => m::READ | m::WRITE,
        };
        if access & m::RIGHTS_MASK & !rights != 0 {
            return None;
        }
        if let Some(&idx) = c.pages.get(&page) {
            // The client's page, no longer mapped in it (something else was mapped over
            // it and then taken away, such as a server's shared area when the server
            // died): the same page again.
            let mut a = Msg::new(0, &[]);
            a.push_item(Fpage::mem(POOL + idx as u64 * PAGE_SIZE, 12, rights), page);
            return Some(a);
        }
        if c.resident > 0 && c.pages.len() as u64 >= c.resident {
            self.reclaim(badge);
        }
        let c = self.clients.get(&badge)?;
        // A page it set aside, or one more within its limit beside those set aside.
        let reserved = c.reserved > 0;
        if !reserved && c.pages.len() as u64 >= c.limit.saturating_sub(c.reserved) {
            println!("{}: client {} is over its limit of {} pages", self.name, badge, c.limit);
            return None;
        }
        // In a region it set aside, the pages after this one that it has not touched
        // yet come too (as many as its reservation and `AHEAD` allow).
        let ahead = if reserved && seg.is_none() { c.region_after(page, c.reserved.min(AHEAD)) } else { 0 };
        let idx = self.page(reserved)?;
        if reserved {
            self.reserved -= 1;
            if let Some(c) = self.clients.get_mut(&badge) {
                c.reserved -= 1;
            }
        }
        let dst = POOL + idx as u64 * PAGE_SIZE;
        let c = self.clients.get_mut(&badge)?;
        // SAFETY: pool page `idx` is mapped read-write here and not yet given out.
        let buf = unsafe { core::slice::from_raw_parts_mut(dst as *mut u8, PAGE_SIZE as usize) };
        if let Some(s) = seg {
            let lo = page.max(s.vaddr);
            let hi = (page + PAGE_SIZE).min(s.vaddr + s.filesz);
            if hi > lo {
                let src = &c.image[(s.offset + (lo - s.vaddr)) as usize..(s.offset + (hi - s.vaddr)) as usize];
                buf[(lo - page) as usize..(hi - page) as usize].copy_from_slice(src);
            }
        } else if page == MAIN_STACK_TOP - PAGE_SIZE {
            let mut si = StartInfo {
                magic: abi::START_MAGIC,
                utcb: MAIN_UTCB,
                bootfs_addr: 0,
                bootfs_len: 0,
                args_len: c.args.len() as u64,
                args: [0; abi::START_ARGS_MAX],
            };
            si.args[..c.args.len()].copy_from_slice(c.args.as_bytes());
            let off = PAGE_SIZE as usize - core::mem::size_of::<StartInfo>();
            // SAFETY: StartInfo is plain old data.
            let bytes = unsafe {
                core::slice::from_raw_parts(&si as *const StartInfo as *const u8, core::mem::size_of::<StartInfo>())
            };
            buf[off..].copy_from_slice(bytes);
        }
        c.pages.insert(page, idx);
        if seg.is_some_and(|s| !s.write) {
            c.clean.push_back(page);
        }
        if c.dropped.remove(&page) {
            c.refaults += 1;
        }
        let mut a = Msg::new(0, &[]);
        a.push_item(Fpage::mem(dst, 12, rights), page);
        for k in 1..ahead {
            let p = page + k * PAGE_SIZE;
            if p == MAIN_STACK_TOP - PAGE_SIZE {
                break;
            }
            let Some(idx) = self.page(true) else { break };
            self.reserved -= 1;
            let c = self.clients.get_mut(&badge)?;
            c.reserved -= 1;
            c.pages.insert(p, idx);
            a.push_item(Fpage::mem(POOL + idx as u64 * PAGE_SIZE, 12, rights), p);
        }
        Some(a)
    }

    /// Take one of client `badge`'s clean pages back: the one its graft chooses among the
    /// oldest `MAX_CANDIDATES`, or the oldest; never one of the newest `KEEP_CLEAN`.
    fn reclaim(&mut self, badge: u64) {
        let Mem { clients, grafts, free, .. } = self;
        let Some(c) = clients.get_mut(&badge) else { return };
        let n = c.clean.len().saturating_sub(KEEP_CLEAN).min(graft::point::MAX_CANDIDATES);
        if n == 0 {
            return;
        }
        let input: Vec<u8> = c.clean.iter().take(n).flat_map(|p| p.to_le_bytes()).collect();
        // `Point::Evict` took the answer only below n.
        let pick = match grafts.call(graft::Point::Evict, badge as u32, &input) {
            Some(i) => {
                c.grafted += 1;
                i as usize
            }
            None => 0,
        };
        let Some(page) = c.clean.remove(pick) else { return };
        let Some(idx) = c.pages.remove(&page) else { return };
        // Revoke the client's mapping; the page is filled again from the image when the
        // client touches it next.
        // SAFETY: only mappings derived from our pool page are affected.
        let _ = unsafe { rt::sys::unmap(Fpage::mem(POOL + idx as u64 * PAGE_SIZE, 12, 0), 0) };
        free.push(idx);
        c.dropped.insert(page);
        c.taken_back += 1;
    }

    /// A piece of an image root sends.
    fn image_piece(&mut self, badge: u64, offset: u64, len: u64, bytes: &[u8]) -> Result<(), Error> {
        if len > mem_api::MAX_IMAGE {
            return Err(Error::TooLong);
        }
        if offset == 0 {
            self.upload = Some((badge, len, Vec::with_capacity(len as usize)));
        }
        match &mut self.upload {
            Some((b, l, v))
                if *b == badge && *l == len && v.len() as u64 == offset && offset + bytes.len() as u64 <= len =>
            {
                v.extend_from_slice(bytes);
                Ok(())
            }
            _ => {
                self.upload = None;
                Err(Error::InvalidArg)
            }
        }
    }

    fn register(&mut self, badge: u64, limit: u64, resident: u64, flags: u64, cmdline: &str) -> Result<(), Error> {
        let name = cmdline.split(' ').next().unwrap_or("");
        if cmdline.len() > abi::START_ARGS_MAX {
            return Err(Error::TooLong);
        }
        let image = if name.starts_with('/') {
            // A program root read from the files filesystem: the image it sent.
            match self.upload.take() {
                Some((b, l, v)) if b == badge && v.len() as u64 == l => Image::Sent(v),
                _ => return Err(Error::InvalidArg),
            }
        } else {
            let fs = bootfs::BootFs::parse(self.bootfs).map_err(|_| Error::InvalidArg)?;
            let file = fs.find(name).ok_or(Error::InvalidArg)?;
            // SAFETY: the boot image stays mapped read-only for this server's life.
            Image::Boot(unsafe { core::slice::from_raw_parts(file.data.as_ptr(), file.data.len()) })
        };
        let e = elf::parse(&image).map_err(|_| Error::InvalidArg)?;
        // Its image and main stack are set aside now: the pages every program touches
        // before it can ask for any (and that it cannot do without), so that only what
        // it asks for later (`RESERVE`: its heap) can be refused. No room: not started.
        let own = e.segments().iter().map(|s| (s.page_range().1 - s.page_range().0) / PAGE_SIZE).sum::<u64>()
            + abi::layout::MAIN_STACK_PAGES;
        self.unregister(badge, false);
        self.clients.insert(
            badge,
            Client {
                elf: e,
                image,
                args: String::from(cmdline),
                limit,
                reserved: 0,
                grafts: flags & mem_api::MAY_GRAFT != 0,
                regions: BTreeMap::new(),
                pages: BTreeMap::new(),
                resident: if resident == 0 {
                    0
                } else {
                    resident.clamp(mem_api::MIN_RESIDENT, limit.max(mem_api::MIN_RESIDENT))
                },
                clean: VecDeque::new(),
                dropped: BTreeSet::new(),
                taken_back: 0,
                refaults: 0,
                grafted: 0,
            },
        );
        let mut left = own;
        while left > 0 {
            match self.reserve(badge, left, 0) {
                Ok(n) => left -= n,
                Err(e) => {
                    self.unregister(badge, false);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Client `badge` is gone; `task_gone`: its task was destroyed, and with it every
    /// mapping derived from its pages (the kernel strips a dying task's memory and what
    /// others derived from it), so nothing is left to revoke.
    fn unregister(&mut self, badge: u64, task_gone: bool) {
        self.grafts.forget(badge);
        if let Some(c) = self.clients.remove(&badge) {
            self.reserved -= c.reserved;
            for (_, idx) in c.pages {
                if !task_gone {
                    // Revoke the client's mapping and reuse the page.
                    // SAFETY: only mappings derived from our pool page are affected.
                    let _ = unsafe { rt::sys::unmap(Fpage::mem(POOL + idx as u64 * PAGE_SIZE, 12, 0), 0) };
                }
                self.free.push(idx);
            }
            self.give_back();
        }
    }
}

/// Add region `[a, b)` to `regions` (start → end), merged with those it touches; past
/// `MAX_REGIONS` it is not kept (its pages are set aside all the same).
fn add_region(regions: &mut BTreeMap<u64, u64>, mut a: u64, mut b: u64) {
    // Regions that overlap or touch [a, b): the one starting at or before `a`, and
    // those starting within.
    if let Some((&s, &e)) = regions.range(..=a).next_back() {
        if e >= a {
            a = s;
            b = b.max(e);
            regions.remove(&s);
        }
    }
    while let Some((&s, &e)) = regions.range(a..=b).next() {
        b = b.max(e);
        regions.remove(&s);
    }
    if regions.len() < MAX_REGIONS {
        regions.insert(a, b);
    }
}

/// Take `[a, b)` out of `regions` (start → end): a region overlapping it keeps what
/// lies outside.
fn cut_region(regions: &mut BTreeMap<u64, u64>, a: u64, b: u64) {
    let mut keep = Vec::new();
    let over: Vec<u64> = regions.range(..b).filter(|(_, &e)| e > a).map(|(&s, _)| s).collect();
    for s in over {
        if let Some(e) = regions.remove(&s) {
            if s < a {
                keep.push((s, a));
            }
            if e > b {
                keep.push((b, e));
            }
        }
    }
    for (s, e) in keep {
        regions.insert(s, e);
    }
}

impl Client {
    /// How many pages from `page` on (at most `most`) lie in one of its regions and are
    /// not its yet: `page` itself counts (0 if it lies in none).
    fn region_after(&self, page: u64, most: u64) -> u64 {
        let Some((_, &end)) = self.regions.range(..=page).next_back() else { return 0 };
        let mut n = 0;
        while n < most && page + n * PAGE_SIZE < end && (n == 0 || !self.pages.contains_key(&(page + n * PAGE_SIZE))) {
            n += 1;
        }
        n
    }
}

fn main() -> i32 {
    let name = String::from(rt::args().split(' ').nth(1).unwrap_or("mem"));
    // The boot image, read-only, from root.
    ipc::set_windows(Fpage::all_mem(), Fpage(0), Fpage(0));
    let (mut offset, mut len) = (0, 1);
    while offset < len {
        let req = match proto::client::get_bootfs(cap::PARENT, offset) {
            Ok(m) if m.items() == 1 => m,
            _ => {
                println!("{}: no boot image", name);
                return 1;
            }
        };
        len = req.word(1);
        offset += proto::BOOTFS_PIECE;
    }
    ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
    // SAFETY: root mapped the boot image read-only at BOOTFS_VADDR for our whole life.
    let bootfs = unsafe { core::slice::from_raw_parts(abi::layout::BOOTFS_VADDR as *const u8, len as usize) };
    let base = if name == "mem1" { graft_api::MEM_IDS + 1000 } else { graft_api::MEM_IDS };
    let srv = Mem {
        name,
        blocks: Vec::new(),
        spare_blocks: Vec::new(),
        pool_pages: 0,
        free: Vec::new(),
        zeroed: Vec::new(),
        reserved: 0,
        free_pending: 0,
        clients: BTreeMap::new(),
        bootfs,
        grafts: graft::Table::new(&EVICT, base, graft_host::host()),
        text: String::new(),
        inbox: graft_api::upcall::Inbox::new(),
        upload: None,
    };
    // A thread on every CPU for programs' requests (`rt::server::run_shared`: the state
    // under one lock); page faults come to this, the pager thread, only.
    server::run_shared(srv, graft_api::RECV_BYTES.max(mem_api::IMAGE_PIECE))
}

impl Server for Mem {
    type Request<'a> = Request<'a>;

    fn windows(&self) -> Option<[Fpage; 3]> {
        Some([Fpage(0), self.inbox.window(), Fpage(0)])
    }

    /// Page faults of the programs this server pages (badged with their pager badge).
    fn event(&mut self, from: Badge, m: &Msg) -> Option<Answer> {
        // Only a graft LOAD may bring a capability (an upcall's thread); any other goes.
        if let Some(slot) = self.inbox.arrived(m) {
            rt::free_slot(slot);
        }
        if m.label() != label::PAGE_FAULT || from.is_root() {
            return None;
        }
        self.grafts.new_turn();
        Some(match self.fault(from.0, m.word(1), m.word(2)) {
            Some(a) => Answer::Reply(a),
            None => Answer::err(Error::NoMemory),
        })
    }

    fn handle(&mut self, from: Badge, req: Request<'_>) -> Answer {
        match req {
            // Registration comes from root only (its capability to us is unbadged).
            Request::Register { .. } | Request::Unregister { .. } | Request::Image { .. } if !from.is_root() => {
                Answer::err(Error::NoRights)
            }
            Request::Image { client, offset, len, bytes } => {
                Answer::result(self.image_piece(client, offset, len, bytes))
            }
            Request::Register { client, limit, resident, flags, cmdline } => {
                Answer::result(self.register(client, limit, resident, flags, cmdline))
            }
            Request::Unregister { client, gone } => {
                self.unregister(client, gone);
                Answer::ok(&[])
            }
            // A program's own requests: the program id on its badge is its pager badge.
            Request::Usage { .. }
            | Request::Resident { .. }
            | Request::Reserve { .. }
            | Request::Release { .. }
            | Request::Graft(_)
                if !self.clients.contains_key(&(from.program() as u64)) || from.program() == 0 =>
            {
                Answer::err(Error::NotFound)
            }
            Request::Reserve { pages, at } => match self.reserve(from.program() as u64, pages, at) {
                Ok(n) => Answer::ok(&[n]),
                Err(e) => Answer::err(e),
            },
            Request::Release { at, pages } => match self.release(from.program() as u64, at, pages) {
                Ok((freed, unreserved)) => Answer::ok(&[freed, unreserved]),
                Err(e) => Answer::err(e),
            },
            // Loading a graft here takes this server's memory: the manifest must grant it.
            Request::Graft(_) if !self.clients.get(&(from.program() as u64)).is_some_and(|c| c.grafts) => {
                Answer::err(Error::NoRights)
            }
            Request::Usage { resident } => {
                let Some(c) = self.clients.get_mut(&(from.program() as u64)) else {
                    return Answer::err(Error::NotFound);
                };
                if resident != u64::MAX {
                    if resident > c.limit || (resident != 0 && resident < mem_api::MIN_RESIDENT) {
                        return Answer::err(Error::InvalidArg);
                    }
                    c.resident = resident;
                }
                Answer::ok(&[
                    c.pages.len() as u64,
                    c.limit,
                    c.resident,
                    c.taken_back,
                    c.refaults,
                    c.grafted,
                    c.reserved,
                ])
            }
            Request::Resident { addr } => {
                let page = addr & !(PAGE_SIZE - 1);
                let here = self.clients.get(&(from.program() as u64)).is_some_and(|c| c.pages.contains_key(&page));
                Answer::ok(&[here as u64])
            }
            Request::Graft(g) => {
                let id = from.program();
                // No upcall grafts here: the graft's thread would fault into this server
                // while it waits for that thread (a page taken back, a heap page), and
                // the call could only end by its timeout.
                let upcall = |f: &graft::GraftFile<'_>| {
                    (f.tech == graft::Tech::Upcall).then_some(Err(graft::LoadError::Refused("a memory server takes no upcall graft: its thread's page faults would wait for the call waiting for them")))
                };
                let a = graft_api::serve(&mut self.grafts, id, id as u64, g, &mut self.text, &mut |f| {
                    graft_host::engine(f, cap::SIGMA0_SLOT).or_else(|| upcall(f))
                });
                self.inbox.done();
                a
            }
            Request::Stats => {
                let held = self.clients.values().map(|c| c.pages.len() as u64).sum::<u64>();
                let mut w =
                    alloc::vec![self.pool_pages, self.available(), self.clients.len() as u64, held, self.reserved];
                for (b, c) in self.clients.iter().take(mem_api::STATS_CLIENTS) {
                    w.extend_from_slice(&[*b, c.pages.len() as u64, c.limit]);
                }
                Answer::ok(&w)
            }
        }
    }
}
