//! Live updates (`proto::UPDATE`): the new program starts with the old one as its
//! `PEER` (`start_update`); when it has taken the state, root takes what the old one
//! hands over, moves the endpoint to the new one and ends the old one
//! (`commit_update`); when it fails, what was handed over goes back and the old one
//! carries on (`abort_update`). The asker's answer goes through a saved reply
//! (`answer_saved`).

use crate::{badge_of, s0_client, Root};
use abi::fpage::Fpage;
use abi::Error;
use alloc::string::ToString;
use alloc::vec::Vec;
use rt::ipc::{self, Msg};
use rt::server;
use rt::{layout, println, proto, sys};
use sigma0_api as s0;

/// A live update under way.
#[derive(Clone, Copy)]
pub(crate) struct Update {
    pub(crate) old: usize,
    pub(crate) new: usize,
    /// The saved reply to the program that asked.
    pub(crate) reply: u64,
}

/// What an old server handed over to root in a live update (`COMMIT`): root grants it
/// on to the new server, or back to the old one when the update fails.
#[derive(Clone, Copy, Default)]
pub(crate) struct Holding {
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

impl Root<'_> {
    /// A live update: start the new program (see `proto::UPDATE`); the answer to the
    /// asker goes through the saved reply `reply` when the update is over.
    pub(crate) fn start_update(&mut self, text: &str, reply: u64) -> Result<(), (Error, &'static str)> {
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
    pub(crate) fn commit_update(&mut self, u: Update) -> Result<Msg, Error> {
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
    pub(crate) fn update_refused(&mut self) {
        self.abort_update("the new program refused the state");
    }

    /// The update failed: the old program carries on, the new one ends.
    pub(crate) fn abort_update(&mut self, why: &'static str) {
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
}

/// Answer an `UPDATE` through its saved reply: ok, or the error and why.
pub(crate) fn answer_saved(slot: u64, r: Result<(), (Error, &str)>) {
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
