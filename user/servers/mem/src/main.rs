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
use rt::ipc::{self, Msg, FOREVER};
use mem_api::Request;
use rt::println;
use rt::proto;
use rt::server::{self, Answer, Badge, Server};
use sigma0_api as s0;

rt::entry!(main);

const POOL: u64 = rt::layout::POOL;
const GROW_LOG2: u64 = 8; // 256 pages from sigma0 at a time
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
    pool_pages: u64,
    free: Vec<u32>,
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
    /// One zeroed pool page, growing the pool from sigma0 when it is empty.
    fn page(&mut self) -> Option<u32> {
        if self.free.is_empty() {
            let at = POOL + self.pool_pages * PAGE_SIZE;
            let mut req = Msg::new(s0::ALLOC, &[GROW_LOG2, at]);
            if rt::server::request_mapping(cap::SIGMA0_SLOT, [Fpage::mem(at, 12 + GROW_LOG2, 7), Fpage(0), Fpage(0)], &mut req).is_err() || req.items() != 1 {
                return None;
            }
            let n = 1u64 << GROW_LOG2;
            self.free.extend((self.pool_pages..self.pool_pages + n).rev().map(|i| i as u32));
            self.pool_pages += n;
            return self.free.pop(); // fresh from sigma0: already zero
        }
        let i = self.free.pop()?;
        // SAFETY: pool page i is mapped read-write in this server and belongs to no client.
        unsafe { core::ptr::write_bytes((POOL + i as u64 * PAGE_SIZE) as *mut u8, 0, PAGE_SIZE as usize) };
        Some(i)
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
        if c.pages.len() as u64 >= c.limit {
            println!("{}: client {} is over its limit of {} pages", self.name, badge, c.limit);
            return None;
        }
        let idx = self.page()?;
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
            let bytes = unsafe { core::slice::from_raw_parts(&si as *const StartInfo as *const u8, core::mem::size_of::<StartInfo>()) };
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
            Some((b, l, v)) if *b == badge && *l == len && v.len() as u64 == offset && offset + bytes.len() as u64 <= len => {
                v.extend_from_slice(bytes);
                Ok(())
            }
            _ => {
                self.upload = None;
                Err(Error::InvalidArg)
            }
        }
    }

    fn register(&mut self, badge: u64, limit: u64, resident: u64, cmdline: &str) -> Result<(), Error> {
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
        self.unregister(badge);
        self.clients.insert(badge, Client { elf: e, image, args: String::from(cmdline), limit, pages: BTreeMap::new(), resident: if resident == 0 { 0 } else { resident.clamp(mem_api::MIN_RESIDENT, limit.max(mem_api::MIN_RESIDENT)) }, clean: VecDeque::new(), dropped: BTreeSet::new(), taken_back: 0, refaults: 0, grafted: 0 });
        Ok(())
    }

    fn unregister(&mut self, badge: u64) {
        self.grafts.forget(badge);
        if let Some(c) = self.clients.remove(&badge) {
            for (_, idx) in c.pages {
                // Revoke the client's mapping (if its task still exists) and reuse the page.
                // SAFETY: only mappings derived from our pool page are affected.
                let _ = unsafe { rt::sys::unmap(Fpage::mem(POOL + idx as u64 * PAGE_SIZE, 12, 0), 0) };
                self.free.push(idx);
            }
        }
    }
}

fn main() -> i32 {
    let name = String::from(rt::args().split(' ').nth(1).unwrap_or("mem"));
    // The boot image, read-only, from root.
    ipc::set_windows(Fpage::all_mem(), Fpage(0), Fpage(0));
    let (mut offset, mut len) = (0, 1);
    while offset < len {
        let mut req = Msg::new(proto::GET_BOOTFS, &[offset]);
        if ipc::call(cap::PARENT, &mut req, FOREVER).is_err() || req.items() != 1 {
            println!("{}: no boot image", name);
            return 1;
        }
        len = req.word(1);
        offset += proto::BOOTFS_PIECE;
    }
    ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
    // SAFETY: root mapped the boot image read-only at BOOTFS_VADDR for our whole life.
    let bootfs = unsafe { core::slice::from_raw_parts(abi::layout::BOOTFS_VADDR as *const u8, len as usize) };
    let base = if name == "mem1" { graft_api::MEM_IDS + 1000 } else { graft_api::MEM_IDS };
    let mut srv = Mem { name, pool_pages: 0, free: Vec::new(), clients: BTreeMap::new(), bootfs, grafts: graft::Table::new(&EVICT, base, graftcode::host()), text: String::new(), inbox: graft_api::upcall::Inbox::new(), upload: None };
    let mut buf = alloc::vec![0u8; graft_api::RECV_BYTES.max(mem_api::IMAGE_PIECE)];
    server::run(&mut srv, &mut buf)
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
            Request::Register { .. } | Request::Unregister { .. } | Request::Image { .. } if !from.is_root() => Answer::err(Error::NoRights),
            Request::Image { client, offset, len, bytes } => Answer::result(self.image_piece(client, offset, len, bytes)),
            Request::Register { client, limit, resident, cmdline } => Answer::result(self.register(client, limit, resident, cmdline)),
            Request::Unregister { client } => {
                self.unregister(client);
                Answer::ok(&[])
            }
            // A program's own requests: the program id on its badge is its pager badge.
            Request::Usage { .. } | Request::Resident { .. } | Request::Graft(_) if !self.clients.contains_key(&(from.program() as u64)) || from.program() == 0 => {
                Answer::err(Error::NotFound)
            }
            Request::Usage { resident } => {
                let Some(c) = self.clients.get_mut(&(from.program() as u64)) else { return Answer::err(Error::NotFound) };
                if resident != u64::MAX {
                    if resident > c.limit || (resident != 0 && resident < mem_api::MIN_RESIDENT) {
                        return Answer::err(Error::InvalidArg);
                    }
                    c.resident = resident;
                }
                Answer::ok(&[c.pages.len() as u64, c.limit, c.resident, c.taken_back, c.refaults, c.grafted])
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
                let upcall = |f: &graft::GraftFile<'_>| (f.tech == graft::Tech::Upcall).then_some(Err(graft::LoadError::Refused("a memory server takes no upcall graft: its thread's page faults would wait for the call waiting for them")));
                let a = graft_api::serve(&mut self.grafts, id, id as u64, g, &mut self.text, &mut |f| graftcode::engine(f, cap::SIGMA0_SLOT).or_else(|| upcall(f)));
                self.inbox.done();
                a
            }
            Request::Stats => {
                let mut w = alloc::vec![self.pool_pages, self.free.len() as u64, self.clients.len() as u64];
                for (b, c) in self.clients.iter().take(18) {
                    w.extend_from_slice(&[*b, c.pages.len() as u64, c.limit]);
                }
                Answer::ok(&w)
            }
        }
    }
}
