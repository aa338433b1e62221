//! SPAWN: a program starting another (`spawn`), within what it may (`may_spawn`: no
//! more memory than its own, its `spawns` and those of every program above it, the
//! slots and kernel memory root keeps for the manifest's programs), and who may act on
//! the whole machine (`may_operate`).

use crate::start::Requester;
use crate::{badge_of, Root};
use abi::{cap, Error};
use alloc::string::ToString;
use manifest::Program;
use rt::server::Answer;
use rt::{println, sys};

impl Root<'_> {
    pub(crate) fn spawn(&mut self, idx: usize, cmdline: &str, dst: u64) -> Answer {
        let mut cmd = cmdline;
        let mut pager = None;
        if let Some(rest) = cmd.strip_prefix("pager=") {
            let (p, r) = rest.split_once(' ').unwrap_or((rest, ""));
            pager = Some(p.to_string());
            cmd = r.trim();
        }
        let (name, args) = cmd.split_once(' ').unwrap_or((cmd, ""));
        if crate::MEM_SERVERS.contains(&name) {
            return Answer::err(Error::NoRights);
        }
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
    pub(crate) fn descendants(&self, a: usize) -> u64 {
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
    pub(crate) fn may_spawn(&self, idx: usize, entry: &Program) -> Result<(), &'static str> {
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

    /// Whether a program may act on the whole machine (HALT, KILL of any program):
    /// its entry lists `machine`, which would give it the machine's capability too.
    pub(crate) fn may_operate(&self, idx: usize) -> bool {
        self.progs[idx].entry.caps.iter().any(|c| c == "machine")
    }
}
