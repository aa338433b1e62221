//! Root: started by the kernel next to sigma0 (which pages it). It starts the memory
//! servers (paged by sigma0), then the programs `init` names, each paged by a memory
//! server; serves their requests (exit, spawn, the boot image for memory servers),
//! handles their faults, and — when the image names tests — reports each test and
//! ends the machine when all are done.
#![no_std]
#![no_main]

extern crate alloc;

use abi::fpage::Fpage;
use abi::{cap, mem, rights, Error};
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bootfs::BootFs;
use rt::ipc::{self, Msg};
use rt::loader::{self, Child};
use rt::{println, proto, sys};

rt::entry!(main);

/// Kernel memory (page tables, threads, capabilities) each program may use, in pages.
const KERNEL_QUOTA: u64 = 1024;
/// Kernel memory for a memory server (its page tables cover its whole pool).
const MEM_KERNEL_QUOTA: u64 = 4096;
/// Pages of user memory a program may have from its memory server.
const PAGE_LIMIT: u64 = 16384;
/// The memory servers root starts; programs name theirs with `pager=NAME`.
const MEM_SERVERS: [&str; 2] = ["mem0", "mem1"];

struct Prog {
    name: String,
    child: Child,
    test: bool,
    done: bool,
    /// Index of the memory server that pages it (None: paged by sigma0).
    pager: Option<usize>,
}

struct Root<'a> {
    fs: BootFs<'a>,
    fs_len: usize,
    progs: Vec<Prog>,
    /// Program indices of the memory servers.
    mems: Vec<usize>,
    /// sigma0, badged as root (badge 1).
    sigma0: u64,
    passed: u32,
    failed: u32,
}

impl Root<'_> {
    /// Load and start `cmdline` ("name args"). `requester`: the program that asked,
    /// which gets a capability to the new one (and the new one a capability back).
    fn spawn(&mut self, cmdline: &str, test: bool, requester: Option<(usize, u64)>) -> Result<usize, Error> {
        let mut cmdline = cmdline.trim();
        let mut pager = 0;
        if let Some(rest) = cmdline.strip_prefix("pager=") {
            let (p, r) = rest.split_once(' ').unwrap_or((rest, ""));
            pager = MEM_SERVERS.iter().position(|m| *m == p).ok_or(Error::InvalidArg)?;
            cmdline = r.trim();
        }
        let name = cmdline.split(' ').next().unwrap_or("");
        let Some(file) = self.fs.find(name) else {
            println!("[root] no program `{}` in the boot image", name);
            return Err(Error::InvalidArg);
        };
        let idx = self.progs.len();
        let badge = idx as u64 + 1;
        let mem_idx = self.mems[pager];
        let mem_slot = self.progs[mem_idx].child.thread;
        let child = loader::spawn_paged(file.data, cmdline, KERNEL_QUOTA, abi::sched::DEFAULT_PRIORITY, mem_slot, badge, PAGE_LIMIT)
            .map_err(|e| {
                println!("[root] cannot load `{}`: {:?}", name, e);
                match e {
                    loader::LoadError::Sys(e) => e,
                    _ => Error::InvalidArg,
                }
            })?;
        self.adopt(child, name, test, Some(mem_idx), requester)
    }

    /// Start a memory server, paged by sigma0, and hand it the boot image.
    fn start_mem(&mut self, name: &str) -> Result<usize, Error> {
        let file = self.fs.find("mem").ok_or(Error::InvalidArg)?;
        let cmdline = alloc::format!("mem {}", name);
        let child = loader::load_granted(file.data, &cmdline, MEM_KERNEL_QUOTA, abi::sched::DEFAULT_PRIORITY + 50)
            .map_err(|_| Error::InvalidArg)?;
        let idx = self.progs.len();
        let badge = idx as u64 + 1;
        // Its page faults go to sigma0; its own requests to sigma0 carry its badge.
        sys::thread_set_pager(child.thread, cap::SIGMA0_SLOT, badge)?;
        let tmp = rt::alloc_slot();
        sys::cap_copy(cap::SIGMA0_SLOT, tmp, rights::SEND, badge)?;
        sys::cap_give(child.task, tmp, cap::SIGMA0_SLOT, rights::SEND)?;
        sys::cap_delete(tmp)?;
        let thread = child.thread;
        let i = self.adopt(child, name, false, None, None)?;
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
    fn adopt(&mut self, child: Child, name: &str, test: bool, pager: Option<usize>, requester: Option<(usize, u64)>) -> Result<usize, Error> {
        let idx = self.progs.len();
        let badge = idx as u64 + 1;
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
        child.start()?;
        self.progs.push(Prog { name: name.to_string(), child, test, done: false, pager });
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
                let mut u = Msg::new(proto::mem::UNREGISTER, &[idx as u64 + 1]);
                let _ = ipc::call(self.progs[m].child.thread, &mut u, ipc::FOREVER);
            }
            None => {
                // Paged by sigma0 (a memory server): sigma0 takes its frames back.
                let mut r = Msg::new(proto::sigma0::RECLAIM, &[idx as u64 + 1]);
                let _ = ipc::call(self.sigma0, &mut r, ipc::FOREVER);
            }
        }
        let p = &self.progs[idx];
        match outcome {
            Ok(code) => println!("[root] {} exited with {}", p.name, code),
            Err(why) => println!("[root] {} killed: {}", p.name, why),
        }
        if p.test {
            if outcome == Ok(0) {
                self.passed += 1;
                println!("TEST {} PASS", p.name);
            } else {
                self.failed += 1;
                println!("TEST {} FAIL", p.name);
            }
        }
    }

    fn tests_pending(&self) -> bool {
        self.progs.iter().any(|p| p.test && !p.done)
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
    let sigma0 = rt::alloc_slot();
    if sys::cap_copy(cap::SIGMA0_SLOT, sigma0, rights::SEND, 1).is_err() {
        println!("[root] no capability to sigma0");
        return 1;
    }
    let mut root = Root { fs, fs_len: image.len(), progs: Vec::new(), mems: Vec::new(), sigma0, passed: 0, failed: 0 };
    for name in MEM_SERVERS {
        match root.start_mem(name) {
            Ok(i) => root.mems.push(i),
            Err(e) => {
                println!("[root] cannot start memory server {}: {:?}", name, e);
                return 1;
            }
        }
    }
    let init = root.fs.find("init").and_then(|f| core::str::from_utf8(f.data).ok()).unwrap_or("");
    let mut any_test = false;
    for line in init.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (cmd, rest) = line.split_once(' ').unwrap_or((line, ""));
        match cmd {
            "run" | "test" => {
                let test = cmd == "test";
                any_test |= test;
                if root.spawn(rest.trim(), test, None).is_err() && test {
                    root.failed += 1;
                    println!("TEST {} FAIL (not started)", rest.trim());
                }
            }
            _ => println!("[root] init: unknown command `{}`", cmd),
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
            println!(
                "[root] {} faulted: kind {} addr {:#x} ip {:#x} error {:#x}",
                root.progs[idx].name, w[0], w[1], w[2], w[3]
            );
            root.finish(idx, Err("fault"));
            continue;
        }
        match m.label() {
            proto::EXIT => {
                let code = m.word(1) as i32;
                root.finish(idx, Ok(code));
            }
            proto::SPAWN => {
                let n = ipc::received_string_len().min(buf.len());
                let cmdline = core::str::from_utf8(&buf[..n]).unwrap_or("").to_string();
                let dst = m.word(1);
                let r = root.spawn(&cmdline, false, Some((idx, dst)));
                let reply = match r {
                    Ok(i) => Msg::new(proto::SPAWN, &[0, i as u64 + 1]),
                    Err(e) => Msg::new(proto::SPAWN, &[e as u64, 0]),
                };
                let _ = ipc::reply(&reply);
            }
            other => {
                println!("[root] {} sent unknown request {}", root.progs[idx].name, other);
                let _ = ipc::reply(&Msg::new(0, &[Error::NoSys as u64]));
            }
        }
    }
}
