//! Root: started by the kernel next to sigma0 (which pages it). It starts the memory
//! servers (paged by sigma0), then the programs the `manifest` names, each paged by a
//! memory server, with the resources its entry grants and nothing else. It serves
//! their requests (exit, spawn, name lookup, I/O ports, IRQs, the boot image for the
//! memory servers, ps/mem/kill/halt for the shell), is the fault handler of every
//! program, restarts those marked `restart`, and — when the manifest names tests —
//! reports each and ends the machine when all are done.
#![no_std]
#![no_main]

extern crate alloc;

use abi::fpage::Fpage;
use abi::{cap, mem, rights, Error};
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bootfs::BootFs;
use core::fmt::Write;
use manifest::Program;
use rt::ipc::{self, Msg};
use rt::loader::{self, Child};
use rt::{println, proto, sys};

rt::entry!(main);

/// Kernel memory for a memory server (its page tables cover its whole pool).
const MEM_KERNEL_QUOTA: u64 = 1024;
/// The memory servers root starts; programs name theirs with `pager`.
const MEM_SERVERS: [&str; 2] = ["mem0", "mem1"];

struct Prog {
    name: String,
    /// The manifest entry it was started from (programs started by SPAWN without one
    /// get the defaults and no resources).
    entry: Program,
    child: Child,
    done: bool,
    /// Index of the memory server that pages it (None: paged by sigma0).
    pager: Option<usize>,
    restarts: u32,
    /// Programs marked `clients` it was given a capability to: told when it ends.
    uses: Vec<usize>,
}

struct Root<'a> {
    fs: BootFs<'a>,
    fs_len: usize,
    manifest: Vec<Program>,
    progs: Vec<Prog>,
    mems: Vec<usize>,
    /// sigma0, badged as root (badge 1).
    sigma0: u64,
    passed: u32,
    failed: u32,
    /// The text of the last PS/MEMINFO reply (it must live until the kernel copies it).
    text: String,
}

fn badge_of(idx: usize) -> u64 {
    idx as u64 + 1
}

impl Root<'_> {
    /// Start a program from a manifest entry. `requester`: the program that asked
    /// (SPAWN), which gets capabilities to it and gives it one back (PEER).
    fn start(&mut self, entry: Program, requester: Option<(usize, u64)>) -> Result<usize, Error> {
        let Some(file) = self.fs.find(&entry.file) else {
            println!("[root] no program `{}` in the boot image", entry.file);
            return Err(Error::InvalidArg);
        };
        let pager = MEM_SERVERS.iter().position(|m| *m == entry.pager).ok_or_else(|| {
            println!("[root] {}: no memory server `{}`", entry.name, entry.pager);
            Error::InvalidArg
        })?;
        let idx = self.progs.len();
        let mem_idx = self.mems[pager];
        let mem_slot = self.progs[mem_idx].child.thread;
        let child = loader::spawn_paged(file.data, &entry.cmdline(), entry.kpages, entry.priority as u64, mem_slot, badge_of(idx), entry.pages)
            .map_err(|e| {
                println!("[root] cannot load `{}`: {:?}", entry.name, e);
                match e {
                    loader::LoadError::Sys(e) => e,
                    _ => Error::InvalidArg,
                }
            })?;
        self.adopt(child, entry, Some(mem_idx), requester)
    }

    /// Start a memory server, paged by sigma0, and hand it the boot image.
    fn start_mem(&mut self, name: &str) -> Result<usize, Error> {
        let file = self.fs.find("mem").ok_or(Error::InvalidArg)?;
        let entry = Program { args: name.to_string(), priority: 150, ..Program::new("mem") };
        let child = loader::load_granted(file.data, &entry.cmdline(), MEM_KERNEL_QUOTA, entry.priority as u64).map_err(|_| Error::InvalidArg)?;
        let badge = badge_of(self.progs.len());
        // Its page faults go to sigma0; its own requests to sigma0 carry its badge.
        sys::thread_set_pager(child.thread, cap::SIGMA0_SLOT, badge)?;
        let tmp = rt::alloc_slot();
        sys::cap_copy(cap::SIGMA0_SLOT, tmp, rights::SEND, badge)?;
        sys::cap_give(child.task, tmp, cap::SIGMA0_SLOT, rights::SEND)?;
        sys::cap_delete(tmp)?;
        let thread = child.thread;
        let i = self.adopt(child, entry, None, None)?;
        self.progs[i].name = name.to_string();
        // It asks for the boot image first; answer before anything else needs it.
        let mut m = Msg::empty();
        ipc::recv(thread, &mut m, ipc::FOREVER)?;
        if m.label() != proto::GET_BOOTFS {
            return Err(Error::InvalidArg);
        }
        let len = self.fs_len as u64;
        let log2 = 64 - (len.next_power_of_two() - 1).leading_zeros() as u64;
        let mut r = Msg::new(0, &[len]);
        r.push_item(Fpage::mem(abi::layout::BOOTFS_VADDR, log2.max(12), mem::READ), abi::layout::BOOTFS_VADDR);
        ipc::reply(&r)?;
        Ok(i)
    }

    /// Give a loaded child its capabilities, make root its fault handler, start it.
    fn adopt(&mut self, child: Child, entry: Program, pager: Option<usize>, requester: Option<(usize, u64)>) -> Result<usize, Error> {
        let idx = self.progs.len();
        let badge = badge_of(idx);
        let tmp = rt::alloc_slot();
        sys::cap_copy(cap::SELF_THREAD, tmp, rights::SEND, badge)?;
        sys::cap_give(child.task, tmp, cap::PARENT, rights::SEND)?;
        sys::cap_delete(tmp)?;
        sys::thread_set_fault_handler(child.thread, cap::SELF_THREAD, proto::FAULT_BADGE | badge)?;
        if let Some((r, dst)) = requester {
            let req = &self.progs[r].child;
            let tmp = rt::alloc_slot();
            sys::cap_copy(req.thread, tmp, rights::SEND, badge)?;
            sys::cap_give(child.task, tmp, cap::PEER, rights::SEND)?;
            sys::cap_delete(tmp)?;
            sys::cap_give(req.task, child.thread, dst, rights::SEND)?;
            sys::cap_give(req.task, child.task, dst + 1, rights::CONTROL)?;
        }
        // The console, for programs whose entry names it, is there from the start.
        if entry.caps.iter().any(|c| c == "console") {
            if let Some(c) = self.find("console") {
                let tmp = rt::alloc_slot();
                let _ = sys::cap_copy(self.progs[c].child.thread, tmp, rights::SEND, badge)
                    .and_then(|_| sys::cap_give(child.task, tmp, cap::CONSOLE, rights::SEND));
                let _ = sys::cap_delete(tmp);
            }
        }
        child.start()?;
        self.progs.push(Prog { name: entry.name.clone(), entry, child, done: false, pager, restarts: 0, uses: Vec::new() });
        Ok(idx)
    }

    fn finish(&mut self, idx: usize, outcome: Result<i32, &str>) {
        let p = &mut self.progs[idx];
        if p.done {
            return;
        }
        p.done = true;
        let (task, pager) = (p.child.task, p.pager);
        let _ = sys::task_destroy(task);
        match pager {
            Some(m) => {
                let mut u = Msg::new(proto::mem::UNREGISTER, &[badge_of(idx)]);
                let _ = ipc::call(self.progs[m].child.thread, &mut u, ipc::FOREVER);
            }
            None => {
                // Paged by sigma0 (a memory server): sigma0 takes its frames back.
                let mut r = Msg::new(proto::sigma0::RECLAIM, &[badge_of(idx)]);
                let _ = ipc::call(self.sigma0, &mut r, ipc::FOREVER);
            }
        }
        // Services that keep state per client drop this one's (bounded waits: a busy or
        // stuck service is not root's problem).
        for s in core::mem::take(&mut self.progs[idx].uses) {
            if !self.progs[s].done {
                let mut g = Msg::new(proto::GONE, &[badge_of(idx)]);
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
        if p.entry.restart && pager.is_some() {
            let (entry, restarts) = (p.entry.clone(), p.restarts);
            match self.start(entry, None) {
                Ok(n) => {
                    self.progs[n].restarts = restarts + 1;
                    println!("[root] restarted {} (restart {})", self.progs[n].name, restarts + 1);
                }
                Err(e) => println!("[root] cannot restart {}: {:?}", self.progs[idx].name, e),
            }
        }
    }

    fn tests_pending(&self) -> bool {
        self.progs.iter().any(|p| p.entry.test && !p.done)
    }

    /// The live instance of a program called `name`.
    fn find(&self, name: &str) -> Option<usize> {
        self.progs.iter().rposition(|p| !p.done && p.name == name)
    }

    fn ps(&self) -> String {
        let mut s = String::from("  ID NAME         STATE     PRIO THREADS PAGER  KPAGES  RESTARTS\n");
        for (i, p) in self.progs.iter().enumerate() {
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
            let _ = writeln!(s, "{:4} {:12} {:9} {:4} {:7} {:6} {:6} {:9}", badge_of(i), p.name, state, prio, threads, pager, kused, p.restarts);
        }
        s
    }

    fn meminfo(&self) -> String {
        let mut s = String::new();
        let mut m = Msg::new(proto::sigma0::STATS, &[]);
        if ipc::call(self.sigma0, &mut m, ipc::FOREVER).is_ok() {
            let _ = writeln!(s, "sigma0: {} of {} frames free ({} MiB of {} MiB)", m.word(2), m.word(3), m.word(2) >> 8, m.word(3) >> 8);
        }
        for &mi in &self.mems {
            let mut m = Msg::new(proto::mem::STATS, &[]);
            if ipc::call(self.progs[mi].child.thread, &mut m, ipc::FOREVER).is_err() {
                continue;
            }
            let _ = writeln!(s, "{}: pool {} pages, {} free, {} clients", self.progs[mi].name, m.word(2), m.word(3), m.word(4));
            let w = m.words();
            for c in w[4..].chunks(3) {
                if let [b, pages, limit] = c {
                    let name = self.progs.get(*b as usize - 1).map_or("?", |p| p.name.as_str());
                    let _ = writeln!(s, "    {:4} {:12} {:6} pages of {}", b, name, pages, limit);
                }
            }
        }
        s
    }

    /// Answer one request; None when the answer is "no reply" (the caller is gone).
    fn request(&mut self, idx: usize, m: &Msg, string: &str) -> Option<Msg> {
        let err = |e: Error| Some(Msg::new(0, &[e as u64]));
        let ok = |w: &[u64]| {
            let mut v = alloc::vec![0u64];
            v.extend_from_slice(w);
            Some(Msg::new(0, &v))
        };
        match m.label() {
            proto::EXIT => {
                self.finish(idx, Ok(m.word(1) as i32));
                None
            }
            proto::SPAWN => {
                let mut cmd = string.trim();
                let mut pager = None;
                if let Some(rest) = cmd.strip_prefix("pager=") {
                    let (p, r) = rest.split_once(' ').unwrap_or((rest, ""));
                    pager = Some(p.to_string());
                    cmd = r.trim();
                }
                let (name, args) = cmd.split_once(' ').unwrap_or((cmd, ""));
                let mut entry = self.manifest.iter().find(|p| p.name == name).cloned().unwrap_or_else(|| Program::new(name));
                if !args.is_empty() {
                    entry.args = args.to_string();
                }
                if let Some(p) = pager {
                    entry.pager = p;
                }
                entry.test = false;
                entry.restart = false;
                match self.start(entry, Some((idx, m.word(1)))) {
                    Ok(i) => ok(&[badge_of(i)]),
                    Err(e) => err(e),
                }
            }
            proto::LOOKUP => {
                let allowed = self.progs[idx].entry.caps.iter().any(|c| c == string);
                if !allowed {
                    return err(Error::NoRights);
                }
                let req = self.progs[idx].child.task;
                let r = if string == "machine" {
                    sys::cap_give(req, cap::MACHINE_SLOT, m.word(1), rights::SHUTDOWN)
                } else if string == "sigma0" {
                    let tmp = rt::alloc_slot();
                    let r = sys::cap_copy(cap::SIGMA0_SLOT, tmp, rights::SEND, badge_of(idx))
                        .and_then(|_| sys::cap_give(req, tmp, m.word(1), rights::SEND));
                    let _ = sys::cap_delete(tmp);
                    r
                } else {
                    match self.find(string) {
                        None => Err(Error::NoPartner),
                        Some(s) => {
                            // Servers tell clients apart by badge: the client's principal
                            // (from the manifest) above its id.
                            let badge = ((self.progs[idx].entry.principal as u64) << 32) | badge_of(idx);
                            let tmp = rt::alloc_slot();
                            let r = sys::cap_copy(self.progs[s].child.thread, tmp, rights::SEND, badge)
                                .and_then(|_| sys::cap_give(req, tmp, m.word(1), rights::SEND));
                            let _ = sys::cap_delete(tmp);
                            if r.is_ok() && self.progs[s].entry.clients && !self.progs[idx].uses.contains(&s) {
                                self.progs[idx].uses.push(s);
                            }
                            r
                        }
                    }
                };
                match r {
                    Ok(()) => ok(&[]),
                    Err(e) => err(e),
                }
            }
            proto::GET_IO => {
                let f = Fpage::io(m.word(1), m.word(2));
                let e = &self.progs[idx].entry;
                if !f.is_valid() || !(f.base()..f.base() + f.size()).all(|p| e.allows_port(p as u16)) {
                    return err(Error::NoRights);
                }
                let mut r = Msg::new(0, &[0]);
                r.push_item(f, 0);
                Some(r)
            }
            proto::GET_IRQ => {
                let line = m.word(1);
                if line > 23 || !self.progs[idx].entry.irq.contains(&(line as u8)) {
                    return err(Error::NoRights);
                }
                let tmp = rt::alloc_slot();
                let r = sys::irq_create(cap::IRQ_CONTROL_SLOT, line, tmp)
                    .and_then(|_| sys::cap_give(self.progs[idx].child.task, tmp, m.word(2), rights::CONTROL));
                let _ = sys::cap_delete(tmp);
                match r {
                    Ok(()) => ok(&[]),
                    Err(e) => err(e),
                }
            }
            proto::PS | proto::MEMINFO => {
                self.text = if m.label() == proto::PS { self.ps() } else { self.meminfo() };
                self.text.truncate(4096);
                ipc::set_send_string(self.text.as_bytes());
                Some(Msg::new(0, &[0]).with_string())
            }
            proto::KILL => {
                let target = m.word(1) as usize;
                if target == 0 || target > self.progs.len() || self.progs[target - 1].done || self.mems.contains(&(target - 1)) {
                    return err(Error::InvalidArg);
                }
                self.finish(target - 1, Err("killed"));
                if target - 1 == idx {
                    None
                } else {
                    ok(&[])
                }
            }
            proto::HALT => {
                println!("[root] halting");
                let _ = sys::machine_exit(cap::MACHINE_SLOT, 0);
                err(Error::BadState)
            }
            other => {
                println!("[root] {} sent unknown request {}", self.progs[idx].name, other);
                err(Error::NoSys)
            }
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
    let sigma0 = rt::alloc_slot();
    if sys::cap_copy(cap::SIGMA0_SLOT, sigma0, rights::SEND, 1).is_err() {
        println!("[root] no capability to sigma0");
        return 1;
    }
    // Root holds every I/O port (from sigma0) to pass on as the manifest says.
    ipc::set_windows(Fpage(0), Fpage(0), Fpage::io(0, 16));
    let mut m = Msg::new(proto::sigma0::IO, &[0, 16]);
    let got_io = ipc::call(sigma0, &mut m, ipc::FOREVER).is_ok() && m.items() == 1;
    ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
    if !got_io {
        println!("[root] sigma0 gave no I/O ports");
    }
    let mut root = Root { fs, fs_len: image.len(), manifest, progs: Vec::new(), mems: Vec::new(), sigma0, passed: 0, failed: 0, text: String::new() };
    for name in MEM_SERVERS {
        match root.start_mem(name) {
            Ok(i) => root.mems.push(i),
            Err(e) => {
                println!("[root] cannot start memory server {}: {:?}", name, e);
                return 1;
            }
        }
    }
    let any_test = root.manifest.iter().any(|p| p.test && p.start);
    for entry in root.manifest.clone() {
        if !entry.start {
            continue;
        }
        if root.start(entry.clone(), None).is_err() && entry.test {
            root.failed += 1;
            println!("TEST {} FAIL (not started)", entry.name);
        }
    }

    let mut buf = [0u8; 512];
    loop {
        if any_test && !root.tests_pending() {
            println!("ROOT: {} passed, {} failed", root.passed, root.failed);
            let _ = sys::machine_exit(cap::MACHINE_SLOT, if root.failed == 0 { 0 } else { 1 });
            return 0;
        }
        ipc::set_recv_buffer(&mut buf);
        let mut m = Msg::empty();
        let badge = match ipc::recv(ipc::RECV_ANY, &mut m, ipc::FOREVER) {
            Ok(b) => b,
            Err(e) => {
                println!("[root] receive failed: {:?}", e);
                continue;
            }
        };
        let idx = (badge & 0xffff_ffff) as usize;
        if idx == 0 || idx > root.progs.len() {
            println!("[root] message with unknown badge {:#x}", badge);
            continue;
        }
        let idx = idx - 1;
        if m.tag().is_fault() {
            let w = m.words();
            println!("[root] {} faulted: kind {} addr {:#x} ip {:#x} error {:#x}", root.progs[idx].name, w[0], w[1], w[2], w[3]);
            root.finish(idx, Err("fault"));
            continue;
        }
        let n = if m.tag().has_string() { ipc::received_string_len().min(buf.len()) } else { 0 };
        let string = String::from(core::str::from_utf8(&buf[..n]).unwrap_or(""));
        if let Some(r) = root.request(idx, &m, &string) {
            let _ = ipc::reply(&r);
        }
    }
}
