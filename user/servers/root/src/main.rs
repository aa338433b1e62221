//! Root: started by the kernel next to sigma0 (which pages it). It starts the memory
//! servers (paged by sigma0), then the programs the `manifest` names, each paged by a
//! memory server, with the resources its entry grants and nothing else. It serves
//! their requests (exit, spawn, name lookup, I/O ports, IRQs, the boot image for the
//! memory servers, ps/mem/kill/halt for the shell), is the fault handler of every
//! program, restarts those marked `restart`, and — when the manifest names tests —
//! reports each and ends the machine when all are done. It runs live updates of
//! servers (`proto::UPDATE`): the new program takes the old one's state, root moves
//! the old one's endpoint to it (`THREAD_CONTROL SUCCEED`) and ends the old one.
//!
//! Restarts follow `manifest::restart`: a program's own deaths (faults, exits) are
//! restarted with a growing back-off and, past a budget, it is left down (reported, in
//! `ps`; `run NAME` starts it again); a `KILL` is restarted at once. A restart starts the
//! program's plain entry — after a live update, the program that now serves, without
//! the update's arguments — and a program read from the files filesystem from the image
//! root kept (the files server may be the program itself).
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

extern crate alloc;

use abi::fpage::Fpage;
use abi::{cap, mem, rights, Error};
use alloc::rc::Rc;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bootfs::BootFs;
use core::fmt::Write;
use manifest::restart::{self, Deaths, Verdict};
use manifest::Program;
use progs::Progs;
use rt::ipc::{self, Msg};
use rt::loader::{self, Child};
use rt::proto::Request;
use rt::server::{self, Answer, Badge, Server};
use rt::{layout, println, proto, sys};
use sigma0_api as s0;

mod progs;

rt::entry!(main);

/// Kernel pages a memory server gets beyond those of the pages it may map
/// (`mem_quota`): the upper page tables of its graft arenas (64 regions of their own).
const MEM_KERNEL_EXTRA: u64 = 96;
/// The memory servers root starts; programs name theirs with `pager`.
const MEM_SERVERS: [&str; 2] = ["mem0", "mem1"];

struct Prog {
    name: String,
    /// The manifest entry it was started from (programs started by SPAWN without one
    /// get the defaults and no resources).
    entry: Program,
    child: Child,
    done: bool,
    /// Id of the memory server that pages it (None: paged by sigma0).
    pager: Option<usize>,
    restarts: u32,
    /// Its counted deaths (`manifest::restart`), carried from instance to instance.
    deaths: Deaths,
    /// The image of a program read from the files filesystem, kept for its restart (the
    /// files server may be this program, or the file may have changed since).
    image: Option<Rc<[u8]>>,
    /// Programs marked `clients` it was given a capability to: told when it ends.
    uses: Vec<usize>,
    /// The program that asked for it (SPAWN): it may KILL it. When that one ends, its
    /// spawner (`Root::forget`).
    spawner: Option<usize>,
    /// The new program of a live update of this one, not serving yet: `find` skips it.
    successor_of: Option<usize>,
}

/// A program marked `restart` with no instance running: waiting out its back-off, or
/// left down (its restart budget spent).
struct Down {
    entry: Program,
    image: Option<Rc<[u8]>>,
    restarts: u32,
    deaths: Deaths,
    /// When to start it (`sys::now_us`); None: left down, until a manual start.
    due: Option<u64>,
}

/// `finish`'s outcome for a program ended by a `KILL` (the one death not counted against
/// its restart budget).
const KILLED: &str = "killed";

/// A live update under way.
#[derive(Clone, Copy)]
struct Update {
    old: usize,
    new: usize,
    /// The saved reply to the program that asked.
    reply: u64,
}

struct Root<'a> {
    fs: BootFs<'a>,
    fs_len: usize,
    manifest: Vec<Program>,
    progs: Progs,
    mems: Vec<usize>,
    /// sigma0, badged as root (badge 1).
    sigma0: u64,
    passed: u32,
    failed: u32,
    /// The text of the last PS/MEMINFO reply (it must live until the kernel copies it).
    text: String,
    /// The manifest names tests: root ends the machine when they have all ended.
    any_test: bool,
    update: Option<Update>,
    /// While starting an update's new program: the old one, which it gets as `PEER`.
    peer_of_next: Option<usize>,
    /// Where the capabilities an old server hands over wait for the new one (a block of
    /// `2^RELAY_LOG2` aligned slots, made at the first update; its memory waits at
    /// `layout::UPDATE_RELAY`), and what it holds now.
    relay: Option<u64>,
    holding: Holding,
    /// Clients of the old server of an update that ended while it ran.
    gone_in_update: Vec<u64>,
    /// Programs to restart later, or left down.
    down: Vec<Down>,
}

/// What an old server handed over to root in a live update (`COMMIT`): root grants it
/// on to the new server, or back to the old one when the update fails.
#[derive(Clone, Copy, Default)]
struct Holding {
    caps: bool,
    mem: bool,
}

impl Holding {
    /// The items that carry it on, from `block` and the memory relay.
    fn items(&self, block: u64, m: &mut Msg) {
        if self.mem {
            m.push_item(Fpage::mem(layout::UPDATE_RELAY, layout::UPDATE_RELAY_LOG2, abi::mem::RIGHTS_MASK), 1);
        }
        if self.caps {
            m.push_item(Fpage::caps(block, RELAY_LOG2, abi::rights::ALL), 1);
        }
    }
}

/// Capabilities a server hands over in a live update, at most (`files`: its tickets).
const RELAY_LOG2: u64 = 6;

/// Who asked for a program (SPAWN): its index, the slot pair for its capabilities, and
/// whether it gets control of the new task.
#[derive(Clone, Copy)]
struct Requester {
    idx: usize,
    slot: u64,
    control: bool,
}

/// A program's id (its badge on root's endpoint): its index in `progs` (its record's
/// key: indices are given once, `progs::Progs`), plus one.
fn badge_of(idx: usize) -> u64 {
    idx as u64 + 1
}

/// A program's client number at sigma0 (the badge of the capability it or root uses
/// there for it): above root's own, 1. (Numbered as the ids were, the first memory
/// server was client 1 too: it could take back any client's frames, and root, ending
/// it, took back its own heap.)
fn s0_client(idx: usize) -> u64 {
    idx as u64 + 2
}

/// Run `f` with a fresh temporary capability slot, which is emptied and given back
/// afterwards whatever `f` did with it.
fn with_tmp<T>(f: impl FnOnce(u64) -> T) -> T {
    let tmp = rt::alloc_slot();
    let r = f(tmp);
    rt::free_slot(tmp);
    r
}

impl Root<'_> {
    /// Start a program from a manifest entry. `requester`: the program that asked
    /// (SPAWN), which gets capabilities to it and gives it one back (PEER).
    /// A program whose file is a path (starting with `/`) is read from the files
    /// filesystem (`read_program`), unless its `image` is given (a restart), and its
    /// image sent to its memory server.
    fn start(&mut self, entry: Program, requester: Option<Requester>, image: Option<Rc<[u8]>>) -> Result<usize, Error> {
        let read: Option<Rc<[u8]>> = match image {
            _ if !entry.file.starts_with('/') => None,
            Some(i) => Some(i),
            None => Some(
                self.read_program(&entry.file)
                    .inspect_err(|e| {
                        println!("[root] cannot read `{}` from the files filesystem: {:?}", entry.file, e)
                    })?
                    .into(),
            ),
        };
        let data: &[u8] = match &read {
            Some(r) => r,
            None => match self.fs.find(&entry.file) {
                Some(file) => file.data,
                None => {
                    println!("[root] no program `{}` in the boot image", entry.file);
                    return Err(Error::InvalidArg);
                }
            },
        };
        let pager = MEM_SERVERS.iter().position(|m| *m == entry.pager).ok_or_else(|| {
            println!("[root] {}: no memory server `{}`", entry.name, entry.pager);
            Error::InvalidArg
        })?;
        let idx = self.progs.next_id().ok_or(Error::NoMemory)?;
        let mem_idx = self.mems[pager];
        let mem_slot = self.progs[mem_idx].child.thread;
        let cmdline = entry.cmdline();
        let child = loader::spawn_paged(data, &cmdline, entry.kpages, entry.priority as u64, mem_slot, badge_of(idx))
            .map_err(|e| {
            println!("[root] cannot load `{}`: {:?}", entry.name, e);
            match e {
                loader::LoadError::Sys(e) => e,
                _ => Error::InvalidArg,
            }
        })?;
        let sent = if entry.file.starts_with('/') {
            mem_api::client::image(mem_slot, badge_of(idx), data, ipc::timeouts(1_000_000, 5_000_000))
        } else {
            Ok(())
        };
        let flags = if entry.caps.iter().any(|c| c == proto::PAGER) { mem_api::MAY_GRAFT } else { 0 };
        // Its own memory server, for its requests about its own memory (`cap::PAGER`:
        // `rt::heap` reserves pages there before it grows).
        let pager_cap = with_tmp(|tmp| {
            sys::cap_copy(mem_slot, tmp, rights::SEND, self.badge_for(&entry, idx).0)
                .and_then(|_| sys::cap_give(child.task, tmp, cap::PAGER, rights::SEND))
        });
        if let Err(e) = pager_cap.and(sent).and_then(|_| {
            mem_api::client::register(mem_slot, badge_of(idx), entry.pages, entry.resident, flags, &cmdline)
        }) {
            child.discard();
            return Err(e);
        }
        if let Err(e) = self.adopt(&child, &entry, requester) {
            let _ = mem_api::client::unregister(mem_slot, badge_of(idx), 0);
            child.discard();
            return Err(e);
        }
        // Kept for a restart: a program the manifest restarts, or an update's new one.
        let keep = entry.file.starts_with('/') && (entry.restart || self.peer_of_next.is_some());
        let i = self.record(child, entry, Some(mem_idx));
        self.progs[i].spawner = requester.map(|r| r.idx);
        if keep {
            self.progs[i].image = read;
        }
        Ok(i)
    }

    /// A memory server's kernel quota: the page tables and mapping nodes of every page it
    /// may map — each of sigma0's frames at most once (its pool, its heap, graft code)
    /// and the boot image — as `manifest::kpages_for` derives them for any program, and
    /// `MEM_KERNEL_EXTRA`. So no client's demand can exhaust it: the server maps nothing
    /// else. (Fixed at 256 pages before, it paid for about 15,000 frames, 60 MiB, whatever
    /// the RAM: past that a client within its limit was killed, then the server itself.)
    /// The cost is this much of root's quota set aside for each of the two servers:
    /// about 1.4% of the frames (of the eighth of RAM the kernel keeps).
    fn mem_quota(&self) -> u64 {
        manifest::kpages_for(self.frames() + (self.fs_len as u64).div_ceil(abi::layout::PAGE_SIZE)) + MEM_KERNEL_EXTRA
    }

    /// The machine's frames, as sigma0 counts them.
    fn frames(&self) -> u64 {
        s0::client::stats(self.sigma0).map_or(0, |[_, all, ..]| all)
    }

    /// Give the manifest's `lent` servers (the cache and blk, which map frames lent from
    /// all of RAM) the kernel quota for the machine's frames, from what root can spare
    /// after every program its manifest names (`manifest::lent_kpages`): the cache's
    /// reach follows the RAM. Before the first of them starts; a restart keeps it.
    fn size_lent(&mut self) {
        let lent = self.manifest.iter().filter(|p| p.lent).count() as u64;
        if lent == 0 {
            return;
        }
        let (_, limit, used) = sys::task_info(cap::SELF_TASK).unwrap_or((0, 0, 0));
        // Every entry's quota stays: those started now, and those started later by
        // name (the shell's commands).
        let all: u64 = self.manifest.iter().map(|p| p.kpages).sum();
        let add = manifest::lent_kpages(self.frames(), limit.saturating_sub(used).saturating_sub(all), lent);
        for p in self.manifest.iter_mut().filter(|p| p.lent) {
            p.kpages = p.kpages.saturating_add(add);
            println!("[root] {}: {} kernel pages ({} for the frames it may map)", p.name, p.kpages, add);
        }
    }

    /// Start a memory server, paged by sigma0, and hand it the boot image.
    fn start_mem(&mut self, name: &str) -> Result<usize, Error> {
        let file = self.fs.find("mem").ok_or(Error::InvalidArg)?;
        let entry = Program { args: name.to_string(), priority: 150, ..Program::new("mem") };
        let quota = self.mem_quota();
        let child = loader::load_granted(file.data, &entry.cmdline(), quota, entry.priority as u64)
            .map_err(|_| Error::InvalidArg)?;
        let badge = s0_client(self.progs.next_id().ok_or(Error::NoMemory)?);
        // Its page faults go to sigma0; its own requests to sigma0 carry its badge.
        let given = sys::thread_set_pager(child.thread, cap::SIGMA0_SLOT, badge).and_then(|_| {
            with_tmp(|tmp| {
                sys::cap_copy(cap::SIGMA0_SLOT, tmp, rights::SEND, badge)
                    .and_then(|_| sys::cap_give(child.task, tmp, cap::SIGMA0_SLOT, rights::SEND))
            })
        });
        if let Err(e) = given.and_then(|_| self.adopt(&child, &entry, None)) {
            child.discard();
            return Err(e);
        }
        let thread = child.thread;
        let i = self.record(child, entry, None);
        self.progs[i].name = name.to_string();
        // It asks for the boot image first, piece by piece; answer before anything
        // else needs it.
        let len = self.fs_len as u64;
        let mut offset = 0;
        while offset < len {
            let mut m = Msg::empty();
            ipc::recv(thread, &mut m, ipc::FOREVER)?;
            if m.label() != proto::GET_BOOTFS || m.word(1) != offset {
                return Err(Error::InvalidArg);
            }
            let piece = (len - offset).min(proto::BOOTFS_PIECE);
            let log2 = 64 - (piece.next_power_of_two() - 1).leading_zeros() as u64;
            let at = abi::layout::BOOTFS_VADDR + offset;
            let mut r = Msg::new(0, &[len]);
            r.push_item(Fpage::mem(at, log2.max(12), mem::READ), at);
            ipc::reply(&r)?;
            offset += proto::BOOTFS_PIECE;
        }
        Ok(i)
    }

    /// Give a loaded child (to become program `progs.next_id()`) its capabilities, make
    /// root its fault handler, start it.
    fn adopt(&mut self, child: &Child, entry: &Program, requester: Option<Requester>) -> Result<(), Error> {
        let idx = self.progs.next_id().ok_or(Error::NoMemory)?;
        let badge = badge_of(idx);
        with_tmp(|tmp| {
            sys::cap_copy(cap::SELF_THREAD, tmp, rights::SEND, badge)
                .and_then(|_| sys::cap_give(child.task, tmp, cap::PARENT, rights::SEND))
        })?;
        sys::thread_set_fault_handler(child.thread, cap::SELF_THREAD, Badge::fault(badge as u32).0)?;
        if let Some(old) = self.peer_of_next {
            let b = Badge::client(entry.principal as u64, badge as u32).map_or(badge, |b| b.0);
            let srv = self.progs[old].child.thread;
            with_tmp(|tmp| {
                sys::cap_copy(srv, tmp, rights::SEND, b)
                    .and_then(|_| sys::cap_give(child.task, tmp, cap::PEER, rights::SEND))
            })?;
        }
        if let Some(Requester { idx: r, slot: dst, control }) = requester {
            let req = &self.progs[r].child;
            with_tmp(|tmp| {
                sys::cap_copy(req.thread, tmp, rights::SEND, badge)
                    .and_then(|_| sys::cap_give(child.task, tmp, cap::PEER, rights::SEND))
            })?;
            sys::cap_give(req.task, child.thread, dst, rights::SEND)?;
            // Without control, a task capability with no rights: the spawner sees the
            // program end (the capability goes with the task) and nothing more.
            sys::cap_give(req.task, child.task, dst + 1, if control { rights::CONTROL } else { 0 })?;
        }
        // The console, for programs whose entry names it, is there from the start.
        if entry.caps.iter().any(|c| c == "console") {
            if let Some(c) = self.find("console") {
                let con = self.progs[c].child.thread;
                let _ = with_tmp(|tmp| {
                    sys::cap_copy(con, tmp, rights::SEND, badge)
                        .and_then(|_| sys::cap_give(child.task, tmp, cap::CONSOLE, rights::SEND))
                });
            }
        }
        // Its CPU, before it runs (a CPU that is not running leaves it on the boot CPU).
        if entry.cpu != 0 {
            if let Err(e) = sys::thread_set_cpu(child.thread, entry.cpu as u64) {
                println!("[root] {}: no CPU {} ({:?}): it runs on CPU 0", entry.name, entry.cpu, e);
            }
        }
        child.start()
    }

    /// Keep the record of a started program; returns its index.
    fn record(&mut self, child: Child, entry: Program, pager: Option<usize>) -> usize {
        self.progs.push(Prog {
            name: entry.name.clone(),
            entry,
            child,
            done: false,
            pager,
            restarts: 0,
            deaths: Deaths::default(),
            image: None,
            uses: Vec::new(),
            spawner: None,
            successor_of: None,
        })
    }

    fn finish(&mut self, idx: usize, outcome: Result<i32, &str>) {
        let Some(p) = self.progs.get_mut(idx) else { return };
        if p.done {
            return;
        }
        p.done = true;
        let pager = p.pager;
        // The task goes, and with it root's slots for its task and thread.
        p.child.discard();
        if let Some(m) = pager {
            let _ = mem_api::client::unregister(self.progs[m].child.thread, badge_of(idx), 1);
        }
        // sigma0 takes back the frames it gave the program: all of a program paged by
        // sigma0 (a memory server), and the DMA memory a driver asked for (a restarted
        // driver would otherwise leak its buffers each time).
        let _ = s0::client::reclaim(self.sigma0, s0_client(idx));
        // Services that keep state per client drop this one's (bounded waits: a busy or
        // stuck service is not root's problem).
        for s in core::mem::take(&mut self.progs[idx].uses) {
            // The old server of an update may have handed its state on already: the
            // new one is told too once it serves.
            if self.update.is_some_and(|u| u.old == s) {
                self.gone_in_update.push(self.client_badge(idx).0);
            }
            if self.progs.live(s).is_some() {
                let mut g = Msg::new(server::GONE, &[self.client_badge(idx).0]);
                let _ = ipc::call(self.progs[s].child.thread, &mut g, ipc::timeouts(100_000, 1_000_000));
            }
        }
        let p = &self.progs[idx];
        match outcome {
            Ok(code) => println!("[root] {} exited with {}", p.name, code),
            Err(why) => println!("[root] {} killed: {}", p.name, why),
        }
        if p.entry.test {
            if outcome == Ok(0) {
                self.passed += 1;
                println!("TEST {} PASS", p.name);
            } else {
                self.failed += 1;
                println!("TEST {} FAIL", p.name);
            }
        }
        // An update whose old or new program ended is over.
        if self.update.is_some_and(|u| u.new == idx || u.old == idx) {
            let why = if self.update.is_some_and(|u| u.new == idx) {
                "the new program ended before it took the state"
            } else {
                "the old program ended"
            };
            self.abort_update(why);
        }
        let p = &mut self.progs[idx];
        let image = p.image.take();
        if p.entry.restart && pager.is_some() {
            let down = Down { entry: p.entry.clone(), image, restarts: p.restarts, deaths: p.deaths, due: None };
            self.died(down, outcome != Err(KILLED));
        }
        self.forget(idx);
    }

    /// Drop the record of ended program `idx`, unless it is a memory server's (`mems`)
    /// or an update's old or new program. The programs it spawned are its spawner's
    /// now: they count against the `spawns` of every live program above them as before
    /// (`descendants`, `may_spawn`), and that one may end them. So root keeps a record
    /// per program alive, not per program ever started — nor per ended ancestor of one
    /// (a chain of programs that each spawn the next and end kept them all, and every
    /// SPAWN walked the chain).
    fn forget(&mut self, idx: usize) {
        let Some(p) = self.progs.get(idx) else { return };
        if !p.done
            || self.mems.contains(&idx)
            || self.update.is_some_and(|u| u.old == idx || u.new == idx)
            || self.peer_of_next == Some(idx)
        {
            return;
        }
        let up = p.spawner;
        for (_, r) in self.progs.iter_mut() {
            if r.spawner == Some(idx) {
                r.spawner = up;
            }
        }
        self.progs.remove(idx);
    }

    /// A program marked `restart` died (`counted`: by its own doing, not a `KILL`):
    /// restart it now or after its back-off, or leave it down (`manifest::restart`).
    /// A restart that fails is a counted death too.
    fn died(&mut self, mut down: Down, mut counted: bool) {
        loop {
            let now = sys::now_us();
            let name = down.entry.name.clone();
            match down.deaths.died(now, counted, &restart::POLICY) {
                Verdict::LeaveDown { deaths } => {
                    println!(
                        "[root] {} died {} times within {} s: left down (`run {}` starts it again)",
                        name,
                        deaths,
                        restart::POLICY.interval_us / 1_000_000,
                        name
                    );
                    self.down.push(down);
                    return;
                }
                Verdict::Restart { after_us } if after_us > 0 => {
                    println!(
                        "[root] {} died {} times within {} s: restarting it in {} ms",
                        name,
                        down.deaths.count(),
                        restart::POLICY.interval_us / 1_000_000,
                        after_us / 1000
                    );
                    down.due = Some(now.saturating_add(after_us));
                    self.down.push(down);
                    return;
                }
                Verdict::Restart { .. } => match self.revive(&down) {
                    Ok(_) => return,
                    Err(e) => {
                        println!("[root] cannot restart {}: {:?}", name, e);
                        counted = true;
                    }
                },
            }
        }
    }

    /// Start a program marked `restart` again from its record.
    fn revive(&mut self, down: &Down) -> Result<usize, Error> {
        let n = self.start(down.entry.clone(), None, down.image.clone())?;
        let p = &mut self.progs[n];
        p.restarts = down.restarts + 1;
        p.deaths = down.deaths;
        println!("[root] restarted {} (restart {})", p.name, p.restarts);
        Ok(n)
    }

    /// Start the programs whose back-off has passed.
    fn restart_due(&mut self) {
        let now = sys::now_us();
        while let Some(i) = self.down.iter().position(|d| d.due.is_some_and(|t| t <= now)) {
            let down = self.down.swap_remove(i);
            if let Err(e) = self.revive(&down) {
                println!("[root] cannot restart {}: {:?}", down.entry.name, e);
                self.died(down, true);
            }
        }
    }

    /// A manual start (`run NAME` by a program that may operate the machine) of a
    /// program marked `restart` that is down: it starts now, its count of deaths
    /// cleared, as root's own (restarted when it dies) — not as the asker's child.
    fn start_again(&mut self, name: &str) -> Option<Answer> {
        let i = self.down.iter().position(|d| d.entry.name == name)?;
        let mut down = self.down.swap_remove(i);
        down.deaths = Deaths::default();
        down.due = None;
        println!("[root] starting {} again (by hand)", name);
        Some(match self.revive(&down) {
            Ok(n) => Answer::ok(&[badge_of(n)]),
            Err(e) => {
                println!("[root] cannot start {}: {:?}", name, e);
                self.down.push(down);
                Answer::err(e)
            }
        })
    }

    /// A live update: start the new program (see `proto::UPDATE`); the answer to the
    /// asker goes through the saved reply `reply` when the update is over.
    fn start_update(&mut self, text: &str, reply: u64) -> Result<(), (Error, &'static str)> {
        if self.update.is_some() {
            return Err((Error::Exists, "an update is under way"));
        }
        let mut words = text.split(' ').filter(|w| !w.is_empty());
        let (Some(name), Some(program)) = (words.next(), words.next()) else {
            return Err((Error::InvalidArg, "give NAME PROGRAM [ARGS]"));
        };
        let rest: Vec<&str> = words.collect();
        let Some(old) = self.find(name) else { return Err((Error::NotFound, "no such program running")) };
        if self.progs[old].pager.is_none() || self.progs[old].entry.test {
            return Err((Error::InvalidArg, "memory servers and tests are not updated"));
        }
        if !program.starts_with('/') && self.fs.find(program).is_none() {
            return Err((Error::InvalidArg, "no such program in the boot image"));
        }
        let mut entry = self.progs[old].entry.clone();
        entry.file = program.to_string();
        entry.test = false;
        entry.restart = false;
        // What the new program's record keeps (a restart starts it, once it serves): the
        // new program as the manifest configures the old one — without `update` and its
        // arguments, which name an old server that will be gone by then.
        let plain = entry.clone();
        entry.args = alloc::format!("{} update {}", entry.args, rest.join(" ")).trim().to_string();
        // The old one learns who may take its state (the id the new program will get)
        // before that program starts: a server that does not take part is left alone,
        // and no second instance of it (a driver of the same device) ever runs.
        let Some(next) = self.progs.next_id() else { return Err((Error::NoMemory, "no program ids are left")) };
        let mut m = Msg::new(proto::update::BEGIN, &[badge_of(next)]);
        if ipc::call(self.progs[old].child.thread, &mut m, ipc::timeouts(100_000, 1_000_000)).is_err() || m.word(1) != 0
        {
            return Err((Error::Unsupported, "the server does not take part in live updates"));
        }
        self.peer_of_next = Some(old);
        let started = self.start(entry, None, None);
        self.peer_of_next = None;
        let new = match started {
            Ok(new) => new,
            Err(e) => {
                let mut m = Msg::new(proto::update::ABORT, &[]);
                let _ = ipc::call(self.progs[old].child.thread, &mut m, ipc::timeouts(100_000, 1_000_000));
                return Err((e, "the new program did not start"));
            }
        };
        self.progs[new].successor_of = Some(old);
        self.progs[new].entry = plain;
        println!("[root] updating {}: program {} takes over from {}", name, badge_of(new), badge_of(old));
        self.update = Some(Update { old, new, reply });
        self.gone_in_update.clear();
        Ok(())
    }

    /// The new program took the state: take the old one's capabilities, move the
    /// endpoint, end the old one; the answer to the new one grants it the capabilities.
    fn commit_update(&mut self, u: Update) -> Result<Msg, Error> {
        let block = *self.relay.get_or_insert_with(|| rt::alloc_slot_block(RELAY_LOG2 as u32));
        let mut m = Msg::new(proto::update::COMMIT, &[]);
        ipc::set_windows(
            Fpage::mem(layout::UPDATE_RELAY, layout::UPDATE_RELAY_LOG2, 0),
            Fpage::caps(block, RELAY_LOG2, 0),
            Fpage(0),
        );
        let r = ipc::call(self.progs[u.old].child.thread, &mut m, ipc::timeouts(100_000, 1_000_000));
        ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
        r?;
        // What it granted (each kind at most once: the windows take one each).
        let mut mem_pages = None;
        for j in 0..m.items() {
            match m.item(j).kind() {
                abi::fpage::MEM => {
                    self.holding.mem = true;
                    mem_pages = Some(m.item(j).log2().saturating_sub(12));
                }
                abi::fpage::CAP => self.holding.caps = true,
                _ => {}
            }
        }
        abi::check(m.word(1))?;
        sys::thread_succeed(self.progs[u.old].child.thread, self.progs[u.new].child.thread)?;
        // Frames it had from sigma0 and granted are the new program's there now: ending
        // the old one below must not take them back (that would revoke the new
        // program's mapping and every one derived from it, its clients' too).
        if let Some(log2) = mem_pages {
            if let Err(e) = s0::client::move_frames(self.sigma0, m.word(2), log2, s0_client(u.old), s0_client(u.new)) {
                println!(
                    "[root] the memory {} handed over is not its own frames at {:#x} ({:?}): it goes when {} ends",
                    self.progs[u.old].name,
                    m.word(2),
                    e,
                    badge_of(u.old)
                );
            }
        }
        self.update = None;
        // Its clients' departures are told to the new one now.
        for (_, p) in self.progs.iter_mut() {
            for s in p.uses.iter_mut() {
                if *s == u.old {
                    *s = u.new;
                }
            }
        }
        let (restart, restarts, deaths) =
            (self.progs[u.old].entry.restart, self.progs[u.old].restarts, self.progs[u.old].deaths);
        let n = &mut self.progs[u.new];
        n.successor_of = None;
        n.entry.restart = restart;
        n.restarts = restarts;
        n.deaths = deaths;
        if !restart {
            n.image = None;
        }
        self.progs[u.old].entry.restart = false;
        // The services the old one used keep for the new one what others depend on
        // (blk: the handles its tickets were delegated from).
        let (ob, nb) = (self.client_badge(u.old).0, self.client_badge(u.new).0);
        for s in core::mem::take(&mut self.progs[u.old].uses) {
            if self.progs.live(s).is_some() {
                let mut g = Msg::new(server::SUCCEEDED, &[ob, nb]);
                let _ = ipc::call(self.progs[s].child.thread, &mut g, ipc::timeouts(100_000, 1_000_000));
                if !self.progs[u.new].uses.contains(&s) {
                    self.progs[u.new].uses.push(s);
                }
            }
        }
        println!(
            "[root] {}: program {} serves in place of {}",
            self.progs[u.new].name,
            badge_of(u.new),
            badge_of(u.old)
        );
        self.finish(u.old, Ok(0));
        answer_saved(u.reply, Ok(()));
        let mut r = server::ok_msg(&[]);
        core::mem::take(&mut self.holding).items(block, &mut r);
        Ok(r)
    }

    /// The new program refused the state.
    fn update_refused(&mut self) {
        self.abort_update("the new program refused the state");
    }

    /// The update failed: the old program carries on, the new one ends.
    fn abort_update(&mut self, why: &'static str) {
        let Some(u) = self.update.take() else { return };
        println!("[root] update of {} abandoned: {}", self.progs[u.old].name, why);
        if !self.progs[u.old].done {
            let mut m = Msg::new(proto::update::ABORT, &[]);
            // What it handed over goes back.
            if let Some(block) = self.relay {
                self.holding.items(block, &mut m);
            }
            let _ = ipc::call(self.progs[u.old].child.thread, &mut m, ipc::timeouts(100_000, 1_000_000));
        }
        // Whatever did not go back (the old one is gone, or would not take it) leaves
        // root: capabilities and memory of nobody's.
        if let Some(block) = self.relay {
            for s in block..block + (1 << RELAY_LOG2) {
                let _ = sys::cap_delete(s);
            }
        }
        sys::unmap_update_relay();
        self.holding = Holding::default();
        if !self.progs[u.new].done {
            self.finish(u.new, Err("update abandoned"));
        }
        answer_saved(u.reply, Err((Error::BadState, why)));
    }

    fn tests_pending(&self) -> bool {
        self.progs.iter().any(|(_, p)| p.entry.test && !p.done)
    }

    /// A program's file from the files filesystem, through the running `files` server
    /// (bounded: `mem_api::MAX_IMAGE` bytes, and each call in time — a stuck server
    /// must not stop root).
    fn read_program(&self, path: &str) -> Result<Vec<u8>, Error> {
        let srv = self.progs[self.find("files").ok_or(Error::NotFound)?].child.thread;
        let t = ipc::timeouts(1_000_000, 5_000_000);
        let call = |m: &mut Msg| ipc::call(srv, m, t).and_then(|_| abi::check(m.word(1)));
        ipc::set_send_string(path.as_bytes());
        let mut m = Msg::new(files_api::OPEN, &[0]).with_string();
        call(&mut m)?;
        let (h, size) = (m.word(2), m.word(3));
        let read = || {
            if size > mem_api::MAX_IMAGE {
                return Err(Error::TooLong);
            }
            let mut out = alloc::vec![0u8; size as usize];
            let mut off = 0;
            while off < out.len() {
                let len = (out.len() - off).min(files_api::MAX_IO as usize);
                ipc::set_recv_buffer(&mut out[off..off + len]);
                let mut m = Msg::new(files_api::READ, &[h, off as u64, len as u64]);
                call(&mut m)?;
                let n = if m.tag().has_string() { ipc::received_string_len().min(len) } else { 0 };
                if n == 0 {
                    break;
                }
                off += n;
            }
            out.truncate(off);
            Ok(out)
        };
        let r = read();
        let _ = call(&mut Msg::new(files_api::CLOSE, &[h]));
        r
    }

    /// The live instance of a program called `name`.
    fn find(&self, name: &str) -> Option<usize> {
        self.progs.iter().rev().find(|(_, p)| !p.done && p.name == name && p.successor_of.is_none()).map(|(i, _)| i)
    }

    fn ps(&self) -> String {
        let mut s =
            String::from("  ID NAME         STATE     PRIO THREADS PAGER  KPAGES  RESTARTS    VOLSW    INVSW\n");
        for (i, p) in self.progs.iter() {
            if p.done {
                continue;
            }
            let (st, prio) = sys::thread_read_state(p.child.thread).unwrap_or((99, 0));
            let state = match st {
                0 => "stopped",
                1 => "ready",
                2 => "sending",
                3 => "waiting",
                4 => "calling",
                5 => "sleeping",
                6 => "faulted",
                _ => "gone",
            };
            let (threads, _, kused) = sys::task_info(p.child.task).unwrap_or((0, 0, 0));
            let pager = match p.pager {
                Some(m) => self.progs[m].name.as_str(),
                None => "sigma0",
            };
            let (vol, inv) = sys::task_switches(p.child.task).unwrap_or((0, 0));
            let _ = writeln!(
                s,
                "{:4} {:12} {:9} {:4} {:7} {:6} {:6} {:9} {:8} {:8}",
                badge_of(i),
                p.name,
                state,
                prio,
                threads,
                pager,
                kused,
                p.restarts,
                vol,
                inv
            );
        }
        // Programs marked `restart` with no instance: waiting out their back-off
        // (`backoff`), or left down after their budget (`down`).
        for d in &self.down {
            let state = if d.due.is_some() { "backoff" } else { "down" };
            let _ = writeln!(
                s,
                "{:>4} {:12} {:9} {:>4} {:>7} {:6} {:>6} {:9} {:>8} {:>8}",
                "-", d.entry.name, state, d.entry.priority, "-", d.entry.pager, "-", d.restarts, "-", "-"
            );
        }
        s
    }

    fn meminfo(&self) -> String {
        let mut s = String::new();
        if let Ok([free, all, ..]) = s0::client::stats(self.sigma0) {
            let _ = writeln!(s, "sigma0: {} of {} frames free ({} MiB of {} MiB)", free, all, free >> 8, all >> 8);
        }
        for &mi in &self.mems {
            let Ok(m) = mem_api::client::stats(self.progs[mi].child.thread) else {
                continue;
            };
            let _ = writeln!(
                s,
                "{}: pool {} pages, {} free, {} clients",
                self.progs[mi].name,
                m.word(2),
                m.word(3),
                m.word(4)
            );
            let w = m.words();
            for c in w[4..].chunks(3) {
                if let [b, pages, limit] = c {
                    let name =
                        (*b as usize).checked_sub(1).and_then(|i| self.progs.get(i)).map_or("?", |p| p.name.as_str());
                    let _ = writeln!(s, "    {:4} {:12} {:6} pages of {}", b, name, pages, limit);
                }
            }
        }
        s
    }

    /// The badge servers see on a program's calls: its principal above its id.
    fn client_badge(&self, idx: usize) -> Badge {
        self.badge_for(&self.progs[idx].entry, idx)
    }

    /// The badge of program `idx` run from `entry` (before it has a record).
    fn badge_for(&self, entry: &Program, idx: usize) -> Badge {
        Badge::client(entry.principal as u64, badge_of(idx) as u32).unwrap_or(Badge(badge_of(idx)))
    }

    /// Once every test has ended, report and end the machine.
    fn maybe_end(&self) {
        if self.any_test && !self.tests_pending() {
            println!("ROOT: {} passed, {} failed", self.passed, self.failed);
            let _ = sys::machine_exit(cap::MACHINE_SLOT, if self.failed == 0 { 0 } else { 1 });
        }
    }

    /// Whether a program may act on the whole machine (HALT, KILL of any program):
    /// its entry lists `machine`, which would give it the machine's capability too.
    fn may_operate(&self, idx: usize) -> bool {
        self.progs[idx].entry.caps.iter().any(|c| c == "machine")
    }

    fn spawn(&mut self, idx: usize, cmdline: &str, dst: u64) -> Answer {
        let mut cmd = cmdline;
        let mut pager = None;
        if let Some(rest) = cmd.strip_prefix("pager=") {
            let (p, r) = rest.split_once(' ').unwrap_or((rest, ""));
            pager = Some(p.to_string());
            cmd = r.trim();
        }
        let (name, args) = cmd.split_once(' ').unwrap_or((cmd, ""));
        if args.is_empty() && pager.is_none() && self.may_operate(idx) {
            if let Some(a) = self.start_again(name) {
                return a;
            }
        }
        let mut entry = self.manifest.iter().find(|p| p.name == name).cloned().unwrap_or_else(|| Program::new(name));
        // A program the spawner could not be (its entry grants more than the
        // spawner's) starts only as the manifest configures it, and the spawner does
        // not get control of it: that would be the whole of its authority.
        let control = entry.within(&self.progs[idx].entry);
        if !control && ((!args.is_empty() && args != entry.args) || pager.as_ref().is_some_and(|p| *p != entry.pager)) {
            return Answer::err(Error::NoRights);
        }
        if !args.is_empty() {
            entry.args = args.to_string();
        }
        if let Some(p) = pager {
            entry.pager = p;
        }
        entry.test = false;
        entry.restart = false;
        if let Err(why) = self.may_spawn(idx, &entry) {
            println!("[root] {} may not start {}: {}", self.progs[idx].name, entry.name, why);
            return Answer::err(Error::NoMemory);
        }
        match self.start(entry, Some(Requester { idx, slot: dst, control }), None) {
            Ok(i) => Answer::ok(&[badge_of(i)]),
            Err(e) => Answer::err(e),
        }
    }

    /// Live programs that `a` started with SPAWN, or that they started, and so on.
    fn descendants(&self, a: usize) -> u64 {
        let mut n = 0;
        for (i, p) in self.progs.iter() {
            if p.done || i == a {
                continue;
            }
            let mut s = p.spawner;
            // (A chain is at most as long as the records: no cycle is possible, as a
            // spawner is always an older record.)
            while let Some(x) = s {
                if x == a {
                    n += 1;
                    break;
                }
                s = self.progs[x].spawner;
            }
        }
        n
    }

    /// Whether program `idx` may start a program from `entry` (SPAWN): the rule that
    /// SPAWN counts against the spawner (docs/storage.md, "Who pays"). The new program
    /// asks for no more memory than its spawner has (`pages`, `kpages`); the spawner and
    /// every program above it stays within its `spawns` (live programs started below
    /// it); and root keeps task and thread slots (`abi::tables`) and kernel quota for
    /// the manifest's programs that are down (their restarts).
    fn may_spawn(&self, idx: usize, entry: &Program) -> Result<(), &'static str> {
        let me = &self.progs[idx].entry;
        if entry.pages > me.pages || entry.kpages > me.kpages {
            return Err("it asks for more memory than its spawner has (pages, kpages)");
        }
        let mut a = Some(idx);
        while let Some(x) = a {
            if self.descendants(x) >= self.progs[x].entry.spawns {
                return Err(if x == idx {
                    "the spawner runs as many programs as its `spawns` allows"
                } else {
                    "a program above the spawner runs as many programs as its `spawns` allows"
                });
            }
            a = self.progs[x].spawner;
        }
        let (tasks, threads) = sys::kernel_tables();
        if tasks <= abi::tables::ROOT_TASKS as u64 + 1 || threads <= abi::tables::ROOT_THREADS as u64 + 1 {
            return Err("the last task and thread slots are kept for the manifest's programs");
        }
        let (_, limit, used) = sys::task_info(cap::SELF_TASK).unwrap_or((0, 0, 0));
        let kept: u64 = self.down.iter().map(|d| d.entry.kpages).sum();
        if limit.saturating_sub(used) < entry.kpages.saturating_add(kept) {
            return Err("root keeps its kernel memory for the manifest's programs");
        }
        Ok(())
    }

    fn lookup(&mut self, idx: usize, name: &str, dst: u64) -> Result<(), Error> {
        if !self.progs[idx].entry.caps.iter().any(|c| c == name) {
            return Err(Error::NoRights);
        }
        // The program's own memory server, whichever it is (`proto::PAGER`): it takes the
        // program's requests about its own pages (usage, a reclaim graft).
        if name == proto::PAGER {
            let s = self.progs[idx].pager.ok_or(Error::NotFound)?;
            let (req, badge, srv) = (self.progs[idx].child.task, self.client_badge(idx).0, self.progs[s].child.thread);
            return with_tmp(|tmp| {
                sys::cap_copy(srv, tmp, rights::SEND, badge).and_then(|_| sys::cap_give(req, tmp, dst, rights::SEND))
            });
        }
        let req = self.progs[idx].child.task;
        if name == "machine" {
            return sys::cap_give(req, cap::MACHINE_SLOT, dst, rights::SHUTDOWN);
        }
        if name == "sigma0" {
            let badge = s0_client(idx);
            return with_tmp(|tmp| {
                sys::cap_copy(cap::SIGMA0_SLOT, tmp, rights::SEND, badge)
                    .and_then(|_| sys::cap_give(req, tmp, dst, rights::SEND))
            });
        }
        let s = self.find(name).ok_or(Error::NotFound)?;
        // Servers tell clients apart by badge: the client's principal above its id.
        let badge = self.client_badge(idx).0;
        let srv = self.progs[s].child.thread;
        with_tmp(|tmp| {
            sys::cap_copy(srv, tmp, rights::SEND, badge).and_then(|_| sys::cap_give(req, tmp, dst, rights::SEND))
        })?;
        if self.progs[s].entry.clients && !self.progs[idx].uses.contains(&s) {
            self.progs[idx].uses.push(s);
        }
        Ok(())
    }
}

impl Server for Root<'_> {
    type Request<'a> = Request<'a>;

    /// A program faulted (root is every program's fault handler): it ends.
    fn event(&mut self, from: Badge, m: &Msg) -> Option<Answer> {
        // Restarts whose back-off has passed, also while messages keep coming (the
        // receive timeout alone would wait for a quiet moment).
        self.restart_due();
        if !from.is_fault() {
            return None;
        }
        let idx = (from.0 as u32) as usize;
        if idx.checked_sub(1).and_then(|i| self.progs.live(i)).is_none() {
            return Some(Answer::Later);
        }
        let w = m.words();
        let word = |i: usize| w.get(i).copied().unwrap_or(0);
        println!(
            "[root] {} faulted: kind {} addr {:#x} ip {:#x} error {:#x}",
            self.progs[idx - 1].name,
            word(0),
            word(1),
            word(2),
            word(3)
        );
        self.finish(idx - 1, Err("fault"));
        self.maybe_end();
        Some(Answer::Later)
    }

    fn next_tick_us(&mut self) -> Option<u64> {
        let now = sys::now_us();
        self.down.iter().filter_map(|d| d.due).min().map(|t| t.saturating_sub(now))
    }

    fn tick(&mut self) {
        self.restart_due();
    }

    fn handle(&mut self, from: Badge, req: Request<'_>) -> Answer {
        let Some(idx) = (from.0 as usize).checked_sub(1).filter(|&i| i < self.progs.started()) else {
            println!("[root] message with unknown badge {:#x}", from.0);
            return Answer::Later;
        };
        // A capability of a program that has ended (passed on before it did) acts for
        // nobody.
        if self.progs.live(idx).is_none() {
            return Answer::err(Error::NoRights);
        }
        match req {
            Request::Exit { code } => {
                self.finish(idx, Ok(code as i32));
                self.maybe_end();
                Answer::Later
            }
            Request::Spawn { cmdline, slot } => self.spawn(idx, cmdline, slot),
            Request::Lookup { name, slot } => Answer::result(self.lookup(idx, name, slot)),
            Request::GetIo { first, log2 } => {
                let f = Fpage::io(first, log2);
                let e = &self.progs[idx].entry;
                if !f.is_valid() || !(f.base()..f.base() + f.size()).all(|p| e.allows_port(p as u16)) {
                    return Answer::err(Error::NoRights);
                }
                let mut r = server::ok_msg(&[]);
                r.push_item(f, 0);
                Answer::Reply(r)
            }
            Request::GetIrq { line, slot } => {
                if line > 23 || !self.progs[idx].entry.irq.contains(&(line as u8)) {
                    return Answer::err(Error::NoRights);
                }
                let task = self.progs[idx].child.task;
                Answer::result(with_tmp(|tmp| {
                    sys::irq_create(cap::IRQ_CONTROL_SLOT, line, tmp)
                        .and_then(|_| sys::cap_give(task, tmp, slot, rights::CONTROL))
                }))
            }
            Request::Ps | Request::Meminfo => {
                self.text = if matches!(req, Request::Ps) { self.ps() } else { self.meminfo() };
                self.text.truncate(4096);
                ipc::set_send_string(self.text.as_bytes());
                Answer::Reply(server::ok_msg(&[]).with_string())
            }
            Request::Kill { id } => {
                let target = id as usize;
                if target == 0 || self.progs.live(target - 1).is_none() || self.mems.contains(&(target - 1)) {
                    return Answer::err(Error::InvalidArg);
                }
                // A program may end itself and those it spawned; ending others takes
                // `machine` in its entry (the shell's).
                if target - 1 != idx && self.progs[target - 1].spawner != Some(idx) && !self.may_operate(idx) {
                    return Answer::err(Error::NoRights);
                }
                self.finish(target - 1, Err(KILLED));
                self.maybe_end();
                if target - 1 == idx {
                    Answer::Later
                } else {
                    Answer::ok(&[])
                }
            }
            Request::Halt => {
                if !self.may_operate(idx) {
                    return Answer::err(Error::NoRights);
                }
                println!("[root] halting");
                let _ = sys::machine_exit(cap::MACHINE_SLOT, 0);
                Answer::err(Error::BadState)
            }
            Request::Slots => Answer::ok(&[rt::free_slots(), self.progs.len() as u64, self.progs.started() as u64]),
            Request::Update { text } => {
                if !self.may_operate(idx) {
                    return Answer::err(Error::NoRights);
                }
                let slot = rt::alloc_slot();
                if ipc::save_reply(slot).is_err() {
                    rt::free_slot(slot);
                    return Answer::err(Error::NoMemory);
                }
                if let Err(e) = self.start_update(text, slot) {
                    answer_saved(slot, Err(e));
                }
                Answer::Later
            }
            Request::UpdateDone { ok } => {
                let Some(u) = self.update.filter(|u| u.new == idx) else { return Answer::err(Error::NoRights) };
                if ok {
                    match self.commit_update(u) {
                        Ok(r) => {
                            // Answered first (it serves once answered), it is then told of
                            // clients that ended during the update: they may be in the
                            // state it took.
                            let slot = rt::alloc_slot();
                            if ipc::save_reply(slot).is_err() {
                                rt::free_slot(slot);
                                return Answer::Reply(r);
                            }
                            let _ = ipc::send(slot, &r, ipc::timeouts(ipc::POLL, ipc::POLL));
                            rt::free_slot(slot);
                            for b in core::mem::take(&mut self.gone_in_update) {
                                let mut g = Msg::new(server::GONE, &[b]);
                                let _ = ipc::call(
                                    self.progs[u.new].child.thread,
                                    &mut g,
                                    ipc::timeouts(100_000, 1_000_000),
                                );
                            }
                            return Answer::Later;
                        }
                        Err(e) => {
                            println!("[root] cannot complete the update: {:?}", e);
                            self.abort_update("the old server did not hand over (or the endpoint could not move)");
                        }
                    }
                } else {
                    self.update_refused();
                }
                self.maybe_end();
                Answer::Later
            }
            // Only memory servers ask for the boot image, once, while root starts them.
            Request::GetBootfs { .. } => Answer::err(Error::BadState),
        }
    }
}

/// Answer an `UPDATE` through its saved reply: ok, or the error and why.
fn answer_saved(slot: u64, r: Result<(), (Error, &str)>) {
    let m = match r {
        Ok(()) => server::ok_msg(&[]),
        Err((e, why)) => {
            ipc::set_send_string(why.as_bytes());
            Msg::new(0, &[e as u64]).with_string()
        }
    };
    let _ = ipc::send(slot, &m, ipc::timeouts(ipc::POLL, ipc::POLL));
    rt::free_slot(slot);
}

fn main() -> i32 {
    let image = rt::bootfs().expect("root runs with the boot image");
    let fs = match BootFs::parse(image) {
        Ok(fs) => fs,
        Err(e) => {
            println!("[root] boot image is malformed: {:?}", e);
            return 1;
        }
    };
    println!("[root] boot image: {} files", fs.len());
    let text = fs.find("manifest").and_then(|f| core::str::from_utf8(f.data).ok()).unwrap_or("");
    let manifest = match manifest::parse(text) {
        Ok(m) => m,
        Err(e) => {
            println!("[root] {}", e);
            let _ = sys::machine_exit(cap::MACHINE_SLOT, 1);
            return 1;
        }
    };
    // Badges carry the principal in 30 bits (`rt::server::Badge`): refuse what does not fit.
    if let Some(p) = manifest.iter().find(|p| Badge::client(p.principal as u64, 1).is_none()) {
        println!(
            "[root] manifest: program `{}`: principal {} does not fit in a badge (at most {})",
            p.name,
            p.principal,
            Badge::MAX_PRINCIPAL
        );
        let _ = sys::machine_exit(cap::MACHINE_SLOT, 1);
        return 1;
    }
    let sigma0 = rt::alloc_slot();
    if sys::cap_copy(cap::SIGMA0_SLOT, sigma0, rights::SEND, 1).is_err() {
        println!("[root] no capability to sigma0");
        return 1;
    }
    // Root holds the I/O ports its manifest grants (from sigma0), to pass on as it
    // says; only those, in aligned power-of-two pieces (every port the kernel tracks
    // costs it memory).
    let mut got_io = true;
    for &(a, b) in manifest.iter().flat_map(|p| p.io.iter()) {
        let mut first = a as u64;
        while first <= b as u64 {
            // The largest aligned piece that starts at `first` and ends by `b`.
            let mut log2 = first.trailing_zeros().min(16) as u64;
            while first + (1 << log2) - 1 > b as u64 {
                log2 -= 1;
            }
            ipc::set_windows(Fpage(0), Fpage(0), Fpage::io(0, 16));
            got_io &= s0::client::io(sigma0, first, log2).is_ok_and(|m| m.items() == 1);
            ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
            first += 1 << log2;
        }
    }
    if !got_io {
        println!("[root] sigma0 did not give the I/O ports the manifest grants");
    }
    let any_test = manifest.iter().any(|p| p.test && p.start);
    let mut root = Root {
        fs,
        fs_len: image.len(),
        manifest,
        progs: Progs::new(),
        mems: Vec::new(),
        sigma0,
        passed: 0,
        failed: 0,
        text: String::new(),
        any_test,
        update: None,
        peer_of_next: None,
        relay: None,
        holding: Holding::default(),
        gone_in_update: Vec::new(),
        down: Vec::new(),
    };
    for name in MEM_SERVERS {
        match root.start_mem(name) {
            Ok(i) => root.mems.push(i),
            Err(e) => {
                println!("[root] cannot start memory server {}: {:?}", name, e);
                return 1;
            }
        }
    }
    root.size_lent();
    for entry in root.manifest.clone() {
        if !entry.start {
            continue;
        }
        if root.start(entry.clone(), None, None).is_err() && entry.test {
            root.failed += 1;
            println!("TEST {} FAIL (not started)", entry.name);
        }
    }

    root.maybe_end();
    let mut buf = [0u8; 512];
    server::run(&mut root, &mut buf)
}
