//! The supervisor: what happens when a program ends (`finish`: its memory, its clients'
//! services told, its test reported, its record dropped by `forget`), the restarts that
//! follow `manifest::restart` (`died`, `revive`, `restart_due`: back-off, then left
//! down past the budget until the entry's `retry_after`; an end the program's
//! dependencies caused is not counted, and it starts once they run: `deps`,
//! `start_held`; `start_again`: a manual `run NAME`), and the end of the machine once
//! every test has ended (`maybe_end`), synced first as at `halt` (`sync_all`).

use crate::{badge_of, s0_client, Root};
use abi::{cap, Error};
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec::Vec;
use manifest::restart::{self, Deaths, Dep, End, Policy, Verdict};
use manifest::Program;
use rt::ipc::{self, Msg};
use rt::server::{self, Answer};
use rt::{println, sys};
use sigma0_api as s0;

/// A program marked `restart` with no instance running: waiting out its back-off, held
/// until its dependencies run, or left down (its restart budget spent) until its retry.
pub(crate) struct Down {
    pub(crate) entry: Program,
    pub(crate) image: Option<Rc<[u8]>>,
    pub(crate) restarts: u32,
    pub(crate) deaths: Deaths,
    /// When to start it (`sys::now_us`): its back-off's end, its retry, or the longest
    /// it waits for its dependencies. None: only by hand (a start that failed at a
    /// retry is tried again at the next: never None now, kept for clarity).
    pub(crate) due: Option<u64>,
    pub(crate) why: Held,
}

/// Why a program marked `restart` is down (`ps`'s state).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// Its back-off (`backoff`).
    Backoff,
    /// Its dependencies: it starts once they all run (`awaiting`).
    Deps,
    /// Its budget spent (`down`), since this time: tried again at `due`.
    Down(u64),
}

/// How long root waits for each files server's `SYNC` and each block service's flush
/// before the machine stops (µs): a server that does not answer within it is named on
/// the console, and the machine stops anyway.
const SYNC_WAIT_US: u32 = 5_000_000;

/// `finish`'s outcome for a program ended by a `KILL` (the one death not counted against
/// its restart budget).
pub(crate) const KILLED: &str = "killed";

impl Root<'_> {
    pub(crate) fn finish(&mut self, idx: usize, outcome: Result<i32, &str>) {
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
            let now = sys::now_us();
            let (name, started_us) = (p.name.clone(), p.started_us);
            let down = Down {
                entry: p.entry.clone(),
                image,
                restarts: p.restarts,
                deaths: p.deaths,
                due: None,
                why: Held::Backoff,
            };
            match self.ended_at.iter_mut().find(|(n, _)| *n == name) {
                Some(e) => e.1 = now,
                None => self.ended_at.push((name, now)),
            }
            let deps = self.deps(&down.entry);
            let end = End { now_us: now, started_us, killed: outcome == Err(KILLED), deps: &deps };
            self.died(down, Some(end));
        }
        self.forget(idx);
    }

    /// What root knows of the dependencies of a program run from `entry`
    /// (`manifest::restart::dependencies`: the servers in its `caps` the manifest
    /// restarts): whether each runs, and when it last ended.
    pub(crate) fn deps(&self, entry: &Program) -> Vec<Dep> {
        restart::dependencies(entry, &self.manifest)
            .map(|d| Dep {
                up: self.find(d).is_some(),
                died_us: self.ended_at.iter().find(|(n, _)| n == d).map(|e| e.1),
            })
            .collect()
    }

    /// The first dependency of `entry` with no instance running, if any.
    pub(crate) fn dep_down<'e>(&self, entry: &'e Program) -> Option<&'e str> {
        let all = &self.manifest;
        entry
            .caps
            .iter()
            .map(String::as_str)
            .find(|c| all.iter().any(|q| q.name == *c && q.restart) && *c != entry.name && self.find(c).is_none())
    }

    /// Drop the record of ended program `idx`, unless it is a memory server's (`mems`)
    /// or an update's old or new program. The programs it spawned are its spawner's
    /// now: they count against the `spawns` of every live program above them as before
    /// (`descendants`, `may_spawn`), and that one may end them. So root keeps a record
    /// per program alive, not per program ever started — nor per ended ancestor of one
    /// (a chain of programs that each spawn the next and end kept them all, and every
    /// SPAWN walked the chain).
    pub(crate) fn forget(&mut self, idx: usize) {
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

    /// A program marked `restart` ended (`end`: how; None: a restart of it failed, a
    /// counted death): restart it now or after its back-off, hold it until its
    /// dependencies run, or leave it down until its retry (`manifest::restart`).
    pub(crate) fn died(&mut self, mut down: Down, mut end: Option<End>) {
        loop {
            let now = sys::now_us();
            let name = down.entry.name.clone();
            let policy = Policy::with_retry(down.entry.retry_after);
            let v = match &end {
                Some(e) => down.deaths.ended(e, &policy),
                None => down.deaths.died(now, true, &policy),
            };
            match v {
                Verdict::LeaveDown { deaths, retry_us } => {
                    println!(
                        "[root] {} died {} times within {} s: left down, tried again in {} s (`run {}` starts it now)",
                        name,
                        deaths,
                        policy.interval_us / 1_000_000,
                        retry_us / 1_000_000,
                        name
                    );
                    down.due = Some(now.saturating_add(retry_us));
                    down.why = Held::Down(now);
                    self.down.push(down);
                    return;
                }
                Verdict::AwaitDeps { at_most_us } => {
                    let dep = self.dep_down(&down.entry).unwrap_or("?");
                    println!("[root] {} ended with {} down (not counted): it starts when {} runs", name, dep, dep);
                    down.due = Some(now.saturating_add(at_most_us));
                    down.why = Held::Deps;
                    self.down.push(down);
                    return;
                }
                Verdict::Restart { after_us } if after_us > 0 => {
                    println!(
                        "[root] {} died {} times within {} s: restarting it in {} ms",
                        name,
                        down.deaths.count(),
                        policy.interval_us / 1_000_000,
                        after_us / 1000
                    );
                    down.due = Some(now.saturating_add(after_us));
                    down.why = Held::Backoff;
                    self.down.push(down);
                    return;
                }
                Verdict::Restart { .. } => {
                    if end.as_ref().is_some_and(|e| !e.killed && restart::blamed_on_dependency(e, &policy)) {
                        println!("[root] {} ended after a server it uses did (not counted)", name);
                    }
                    match self.revive(&down) {
                        Ok(_) => return,
                        Err(e) => {
                            println!("[root] cannot restart {}: {:?}", name, e);
                            end = None;
                        }
                    }
                }
            }
        }
    }

    /// Start a program marked `restart` again from its record; then those held for
    /// their dependencies that all run now.
    pub(crate) fn revive(&mut self, down: &Down) -> Result<usize, Error> {
        let n = self.start(down.entry.clone(), None, down.image.clone())?;
        let p = &mut self.progs[n];
        p.restarts = down.restarts + 1;
        p.deaths = down.deaths;
        println!("[root] restarted {} (restart {})", p.name, p.restarts);
        self.start_held();
        Ok(n)
    }

    /// Start the programs held for their dependencies that all run now.
    pub(crate) fn start_held(&mut self) {
        while let Some(i) = self.down.iter().position(|d| d.why == Held::Deps && restart::deps_up(&self.deps(&d.entry)))
        {
            let down = self.down.swap_remove(i);
            println!("[root] starting {}: the servers it uses run again", down.entry.name);
            if let Err(e) = self.revive(&down) {
                println!("[root] cannot restart {}: {:?}", down.entry.name, e);
                self.died(down, None);
            }
        }
    }

    /// Start the programs whose back-off, retry or wait for dependencies has passed.
    pub(crate) fn restart_due(&mut self) {
        let now = sys::now_us();
        while let Some(i) = self.down.iter().position(|d| d.due.is_some_and(|t| t <= now)) {
            let down = self.down.swap_remove(i);
            if let Held::Down(since) = down.why {
                println!(
                    "[root] trying {} again after {} s down",
                    down.entry.name,
                    now.saturating_sub(since).div_ceil(1_000_000).min(down.entry.retry_after)
                );
            }
            if let Err(e) = self.revive(&down) {
                println!("[root] cannot restart {}: {:?}", down.entry.name, e);
                self.died(down, None);
            }
        }
    }

    /// A manual start (`run NAME` by a program that may operate the machine) of a
    /// program marked `restart` that is down: it starts now, its count of deaths
    /// cleared, as root's own (restarted when it dies) — not as the asker's child.
    pub(crate) fn start_again(&mut self, name: &str) -> Option<Answer> {
        let i = self.down.iter().position(|d| d.entry.name == name)?;
        let mut down = self.down.swap_remove(i);
        down.deaths = Deaths::default();
        down.due = None;
        down.why = Held::Backoff;
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

    pub(crate) fn tests_pending(&self) -> bool {
        self.progs.iter().any(|(_, p)| p.entry.test && !p.done)
    }

    /// Once every test has ended, report and end the machine (synced first).
    pub(crate) fn maybe_end(&self) {
        if self.any_test && !self.tests_pending() {
            println!("ROOT: {} passed, {} failed", self.passed, self.failed);
            self.sync_all();
            let _ = sys::machine_exit(cap::MACHINE_SLOT, if self.failed == 0 { 0 } else { 1 });
        }
    }

    /// Before the machine stops (`halt`, the tests' end), as every OS does: each files
    /// server syncs (`files_api::SYNC`: the writes it keeps back go to blk, and blk
    /// flushes), then each block service flushes its disk (`blk_api::SYNC` to the
    /// service: every write to any segment). The programs are those named or run from
    /// `files` and `blk`; each gets at most `SYNC_WAIT_US`, and one that does not
    /// answer (or fails) is named on the console.
    pub(crate) fn sync_all(&self) {
        let t = ipc::timeouts(100_000, SYNC_WAIT_US);
        let (mut synced, mut flushed) = (0, 0);
        for (label, kind) in [(files_api::SYNC, "files"), (blk_api::SYNC, "blk")] {
            for (_, p) in self.progs.iter() {
                if p.done || p.successor_of.is_some() || (p.name != kind && p.entry.file != kind) {
                    continue;
                }
                let mut m = Msg::new(label, &[]);
                match ipc::call(p.child.thread, &mut m, t).and_then(|_| abi::check(m.word(1))) {
                    Ok(()) if kind == "files" => synced += 1,
                    Ok(()) => flushed += 1,
                    Err(e) => println!(
                        "[root] {} did not {} before the machine stops ({}): what it held may be lost",
                        p.name,
                        if kind == "files" { "sync" } else { "flush its disk" },
                        e.name()
                    ),
                }
            }
        }
        println!("[root] synced {} files server(s) and flushed {} disk(s) before stopping", synced, flushed);
    }
}
