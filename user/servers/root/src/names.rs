//! Names: the live program called NAME (`find`), the capabilities a program may look up
//! by name (`lookup`: a server, its memory server, sigma0, the machine), and the badge
//! servers see on its calls (its principal above its id).

use crate::{badge_of, s0_client, with_tmp, Root};
use abi::{cap, rights, Error};
use manifest::Program;
use rt::server::Badge;
use rt::{proto, sys};

impl Root<'_> {
    /// The live instance of a program called `name`.
    pub(crate) fn find(&self, name: &str) -> Option<usize> {
        self.progs.iter().rev().find(|(_, p)| !p.done && p.name == name && p.successor_of.is_none()).map(|(i, _)| i)
    }

    pub(crate) fn lookup(&mut self, idx: usize, name: &str, dst: u64) -> Result<(), Error> {
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

    /// The badge servers see on a program's calls: its principal above its id.
    pub(crate) fn client_badge(&self, idx: usize) -> Badge {
        self.badge_for(&self.progs[idx].entry, idx)
    }

    /// The badge of program `idx` run from `entry` (before it has a record).
    pub(crate) fn badge_for(&self, entry: &Program, idx: usize) -> Badge {
        Badge::client(entry.principal as u64, badge_of(idx) as u32).unwrap_or(Badge(badge_of(idx)))
    }
}
