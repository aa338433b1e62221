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
//! `ps`; tried again after its `retry_after`; `run NAME` starts it at once); a `KILL` is
//! restarted at once; an end its dependencies caused (a server in its `caps` that died
//! or is down) is not counted, and it starts once they all run. A restart starts the
//! program's plain entry — after a live update, the program that now serves, without
//! the update's arguments — and a program read from the files filesystem from the image
//! root kept (the files server may be the program itself).
//!
//! Each concern is a module of methods on `Root`: `start` (loading programs and the
//! memory servers), `names` (lookups by name, badges), `spawn` (SPAWN and who may do
//! what), `supervise` (ends, restarts, the tests' end), `update` (live updates) and
//! `status` (ps, meminfo); `progs` keeps the records. This file keeps the state, the
//! server loop's callbacks (`handle` only dispatches) and `main`.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

extern crate alloc;

use abi::fpage::Fpage;
use abi::{cap, rights, Error};
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec::Vec;
use bootfs::BootFs;
use manifest::restart::Deaths;
use manifest::Program;
use progs::Progs;
use rt::ipc::{self, Msg};
use rt::loader::Child;
use rt::proto::Request;
use rt::server::{self, Answer, Badge, Server};
use rt::{println, sys};
use sigma0_api as s0;
use supervise::{Down, KILLED};
use update::{answer_saved, Holding, Update};

mod names;
mod progs;
mod spawn;
mod start;
mod status;
mod supervise;
mod update;

rt::entry!(main);

/// The memory servers root starts; programs name theirs with `pager`. A manifest entry
/// of one's name (`name = "mem0"`, `file = "mem"`) only gives it `args` (`start_mem`):
/// root starts no other program by that name, and none may SPAWN one.
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
    /// When this instance started (`sys::now_us`): a dependency's death before it did
    /// not end it.
    started_us: u64,
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
    /// The last `MEMINFO` report and when it was made (µs): one asked again within
    /// `status::MEMINFO_FRESH_US` gets it, so no caller makes sigma0 walk its owner table
    /// more than a few times a second.
    meminfo_last: (u64, String),
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
    /// When each program marked `restart` last ended (by name): what its dependents'
    /// ends are laid at (`manifest::restart::blamed_on_dependency`).
    ended_at: Vec<(String, u64)>,
    /// The PCI functions (routing id, class), listed once on the first `GET_PCI`.
    pci: Option<Vec<(u16, u32)>>,
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
            Request::GetPci { class, index, slot } => {
                if !self.progs[idx].entry.pci.contains(&(class as u32)) {
                    return Answer::err(Error::NoRights);
                }
                // The bus, read once through the IRQ control capability.
                let funcs = self.pci.get_or_insert_with(|| {
                    rt::pci::devices_by(|a, off| {
                        rt::sys::pci_read(cap::IRQ_CONTROL_SLOT, a.id(), off as u16).unwrap_or(!0)
                    })
                    .iter()
                    .map(|d| (d.addr.id(), (d.class as u32) << 16 | (d.subclass as u32) << 8 | d.prog_if as u32))
                    .collect()
                });
                let Some(&(id, _)) = funcs.iter().filter(|f| f.1 == class as u32).nth(index as usize) else {
                    return Answer::err(Error::NotFound);
                };
                let task = self.progs[idx].child.task;
                match with_tmp(|tmp| {
                    sys::pci_create(cap::IRQ_CONTROL_SLOT, id, tmp)
                        .and_then(|_| sys::cap_give(task, tmp, slot, rights::CONTROL))
                }) {
                    Ok(()) => {
                        // Where its pin is routed, read as drivers would through the ports.
                        let read = |a: rt::pci::Addr, off: u8| {
                            rt::sys::pci_read(cap::IRQ_CONTROL_SLOT, a.id(), off as u16).unwrap_or(!0)
                        };
                        let d = rt::pci::Device {
                            addr: rt::pci::addr_of(id),
                            vendor: 0,
                            device: 0,
                            class: 0,
                            subclass: 0,
                            prog_if: 0,
                        };
                        let line = rt::pci::interrupt_line_by(&d, read).map_or(rt::pci::NO_LINE, |l| l as u64);
                        Answer::ok(&[id as u64, line])
                    }
                    Err(e) => Answer::err(e),
                }
            }
            Request::Ps | Request::Meminfo => {
                self.text = if matches!(req, Request::Ps) { self.ps() } else { self.meminfo_now() };
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
                println!("[root] halting: syncing files and flushing disks first");
                self.sync_all();
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
        meminfo_last: (0, String::new()),
        any_test,
        update: None,
        peer_of_next: None,
        relay: None,
        holding: Holding::default(),
        gone_in_update: Vec::new(),
        down: Vec::new(),
        ended_at: Vec::new(),
        pci: None,
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
        if !entry.start || MEM_SERVERS.contains(&entry.name.as_str()) {
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
