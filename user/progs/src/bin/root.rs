//! Root: the first task. Reads `init` from the boot image, starts the programs it
//! names, serves their requests (exit, spawn), handles their faults, and — when the
//! image names tests — reports each test and ends the machine when all are done.
#![no_std]
#![no_main]

extern crate alloc;

use abi::{cap, rights, Error};
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bootfs::BootFs;
use rt::ipc::{self, Msg};
use rt::loader::{self, Child};
use rt::{println, proto, sys};

rt::entry!(main);

/// Pages of memory each program may use.
const PROGRAM_QUOTA: u64 = 16384;

struct Prog {
    name: String,
    child: Child,
    test: bool,
    done: bool,
}

struct Root<'a> {
    fs: BootFs<'a>,
    progs: Vec<Prog>,
    passed: u32,
    failed: u32,
}

impl Root<'_> {
    /// Load and start `cmdline` ("name args"). `requester`: the program that asked,
    /// which gets a capability to the new one (and the new one a capability back).
    fn spawn(&mut self, cmdline: &str, test: bool, requester: Option<(usize, u64)>) -> Result<usize, Error> {
        let name = cmdline.split(' ').next().unwrap_or("");
        let Some(file) = self.fs.find(name) else {
            println!("[root] no program `{}` in the boot image", name);
            return Err(Error::InvalidArg);
        };
        let child = loader::load(file.data, cmdline, PROGRAM_QUOTA, abi::sched::DEFAULT_PRIORITY).map_err(|e| {
            println!("[root] cannot load `{}`: {:?}", name, e);
            match e {
                loader::LoadError::Sys(e) => e,
                _ => Error::InvalidArg,
            }
        })?;
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
        self.progs.push(Prog { name: name.to_string(), child, test, done: false });
        Ok(idx)
    }

    fn finish(&mut self, idx: usize, outcome: Result<i32, &str>) {
        let p = &mut self.progs[idx];
        if p.done {
            return;
        }
        p.done = true;
        let _ = sys::task_destroy(p.child.task);
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
    let mut root = Root { fs, progs: Vec::new(), passed: 0, failed: 0 };
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
