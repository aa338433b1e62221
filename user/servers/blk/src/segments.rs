//! Segments and their handles: `CREATE`, `OPEN`, `STAT`, `LIST`, `DELETE`, `MOUNT` on
//! the volume, and through a handle `SYNC` and `CLOSE`; a segment's written mark
//! (`extend`), and closing a handle (with the views delegated from it).

use crate::area::{MAX_OPEN_PER_PRINCIPAL, PARK_US};
use crate::{err, Blk};
use abi::fpage::{Fpage, UNMAP_SELF};
use abi::{cap, rights, Error};
use alloc::string::String;
use alloc::vec::Vec;
use baio::{BlockDev as _, BLOCK, READ, WRITE};
use blk_api as p;
use core::fmt::Write as _;
use rt::ipc::{self, Msg};
use rt::server::Badge;

/// A write past a segment's written mark zeroes at least this many blocks ahead of the
/// mark (one metadata write per MiB of a segment filled in order).
const ZERO_AHEAD: u64 = 256;

pub(crate) struct Handle {
    /// The segment's name, and its written mark (a copy of the inode's, kept equal by
    /// `extend` for every handle of the segment).
    pub(crate) name: String,
    pub(crate) written: u64,
    pub(crate) start: u64,
    /// Blocks seen through this handle, and where they lie in the segment: runs of
    /// (first, blocks), in order — the whole segment, or what a `DELEGATE` named.
    pub(crate) len: u64,
    pub(crate) view: Vec<(u64, u64)>,
    /// Bytes readable through it (`len` blocks' worth, or less for a delegated view).
    pub(crate) bytes: u64,
    /// The handle this one was delegated from (closed with it).
    pub(crate) parent: Option<u64>,
    pub(crate) rights: u8,
    /// Slot of the badged capability the client's copy derives from, and (a view,
    /// once attached) of its holder's.
    pub(crate) slot: u64,
    pub(crate) holder: u64,
    /// The shared area (0: a delegated handle not yet attached), and how much of it
    /// the client has mapped (all of it, or what a view's holder asked for).
    pub(crate) area: u64,
    pub(crate) mapped: u64,
    /// The program that opened it (its id, from the badge root minted; a view: the
    /// program that delegated it).
    pub(crate) client: u64,
    /// Who pays for it (its slots and area count against this principal's share): the
    /// principal that opened it; a view's, the one it was delegated for, then the one
    /// its holder attached it for.
    pub(crate) payer: u32,
    /// Opened by an agent (a principal in `agents=`): its views may be for others.
    pub(crate) agent: bool,
    /// A view's holder (the program that attached it; 0: not attached): it closes when
    /// that program ends.
    pub(crate) holder_prog: u64,
    /// The segment's owner: whose blocks these are in the cache (its eviction graft
    /// may choose among them).
    pub(crate) owner: u32,
    pub(crate) completed: u64,
    /// The next submission-ring entry to take (the service's own copy).
    pub(crate) head: u64,
}

fn vol_err(e: baio::Error) -> Error {
    match e {
        baio::Error::NameTaken => Error::Exists,
        baio::Error::NoSpace | baio::Error::NoInode | baio::Error::OverQuota => Error::NoSpace,
        baio::Error::NotFound => Error::NotFound,
        baio::Error::BadName => Error::InvalidArg,
        baio::Error::Io => Error::Io,
        _ => Error::BadState,
    }
}

impl Blk {
    fn quota_of(&self, principal: u32) -> u64 {
        self.quotas.get(&principal).copied().unwrap_or(self.quota)
    }

    /// Move the written mark of handle `hid`'s segment to at least `end`
    /// (`Volume::extend_written`: zeros first, then the mark), for every handle of it.
    pub(crate) fn extend(&mut self, hid: u64, end: u64) -> Result<(), baio::Error> {
        let h = &self.handles[&hid];
        let (name, start, written) = (h.name.clone(), h.start, h.written);
        // The zeroing shares the device queue: what is in flight finishes first.
        self.drain();
        let to = self.vol.extend_written(&mut self.disk, &name, end, ZERO_AHEAD)?;
        self.cache_invalidate(start + written, to - written);
        for h in self.handles.values_mut().filter(|h| h.start == start) {
            h.written = to;
        }
        Ok(())
    }

    /// Give a handle back: its operations finish, sleepers are told, the client's
    /// capability and area mapping are revoked (the area is kept for reuse). `park`: a
    /// view closed by someone other than its holder keeps its area mapped in the holder
    /// for `PARK_US` (see `parked`).
    pub(crate) fn close(&mut self, hid: u64, park: bool) {
        self.drain();
        // What was delegated from it goes first (its holders did not ask).
        let children: Vec<u64> = self.handles.iter().filter(|(_, h)| h.parent == Some(hid)).map(|(k, _)| *k).collect();
        for c in children {
            self.close(c, true);
        }
        let Some(h) = self.handles.remove(&hid) else { return };
        if !self.handles.values().any(|o| o.start == h.start) {
            self.ldisks.remove(&h.start);
        }
        let mut i = 0;
        while i < self.waiters.len() {
            if self.waiters[i].hid == hid {
                let w = self.waiters.swap_remove(i);
                let _ = ipc::send(w.slot, &err(Error::NoPartner), 0);
                rt::free_slot(w.slot);
            } else {
                i += 1;
            }
        }
        for slot in [h.slot, h.holder].into_iter().filter(|s| *s != 0) {
            // SAFETY: only the client's derived copies and this slot are affected.
            let _ = unsafe { rt::sys::unmap(Fpage::caps(slot, 0, 0), UNMAP_SELF) };
            rt::free_slot(slot);
        }
        if h.area != 0 && park {
            self.parked.push((h.area, h.mapped, rt::sys::now_us() + PARK_US, h.payer));
        } else if h.area != 0 {
            // SAFETY: the area stays mapped here; only the client loses it.
            let _ = unsafe { rt::sys::unmap(Fpage::mem(h.area, h.mapped.trailing_zeros() as u64, 0), 0) };
            self.spare.push((h.area, h.mapped));
        }
    }

    /// `SYNC` through a handle: what is in flight finishes, then the disk's write cache
    /// is flushed.
    pub(crate) fn sync(&mut self) -> Msg {
        self.drain();
        let r = self.disk.flush();
        Msg::new(0, &[if r.is_ok() { 0 } else { Error::Io as u64 }])
    }

    /// `CLOSE` through handle `hid`.
    pub(crate) fn close_asked(&mut self, hid: u64) -> Option<Msg> {
        // Answer first: the close revokes the very capability the client called.
        let _ = ipc::reply(&Msg::new(0, &[0]));
        self.close(hid, false);
        None
    }

    /// `CREATE` from `principal`: a segment of `blocks` blocks it owns, with rights
    /// `others` for other principals.
    pub(crate) fn create(&mut self, principal: u32, name: &str, blocks: u64, others: u64) -> Msg {
        if others & !((READ | WRITE) as u64) != 0 {
            return err(Error::InvalidArg);
        }
        let quota = self.quota_of(principal);
        match self.vol.create(name, principal, READ | WRITE, others as u8, blocks, quota, 0) {
            Ok(_) => match self.vol.sync(&mut self.disk) {
                Ok(()) => Msg::new(0, &[0]),
                Err(e) => err(vol_err(e)),
            },
            Err(e) => err(vol_err(e)),
        }
    }

    /// `OPEN` from `principal`'s program `client`: a handle on segment `name`, its
    /// capability and its shared area.
    pub(crate) fn open(&mut self, principal: u32, client: u64, name: &str, rights: u64) -> Msg {
        let Some(ino) = self.vol.lookup(name).cloned() else { return err(Error::NotFound) };
        let want = rights as u8;
        if rights > 0xff || want == 0 || want & !ino.rights_for(principal) != 0 {
            return err(Error::NoRights);
        }
        // Each open holds 2 MiB of DMA memory here: one principal may not take
        // it all from the others.
        if self.areas_of(principal) >= MAX_OPEN_PER_PRINCIPAL {
            return err(Error::NoMemory);
        }
        // And its capability a slot here, of the principal's share.
        let slot = match self.slot_for(principal) {
            Ok(s) => s,
            Err(e) => return err(e),
        };
        let Some(area) = self.area() else {
            rt::free_slot(slot);
            return err(Error::NoMemory);
        };
        let hid = self.next;
        self.next += 1;
        let _ = rt::sys::cap_copy(cap::SELF_THREAD, slot, rights::SEND, Badge::minted(hid).0);
        let agent = self.agents.contains(&principal);
        self.handles.insert(
            hid,
            Handle {
                name: ino.name.clone(),
                written: ino.written,
                start: ino.start,
                len: ino.length,
                view: alloc::vec![(0, ino.length)],
                bytes: ino.length * BLOCK as u64,
                parent: None,
                rights: want,
                slot,
                holder: 0,
                area,
                mapped: p::AREA_BYTES,
                client,
                payer: principal,
                agent,
                holder_prog: 0,
                owner: ino.owner,
                completed: 0,
                head: 0,
            },
        );
        let mut r = Msg::new(0, &[0, ino.length]);
        r.push_item(Fpage::caps(slot, 0, rights::SEND), 0);
        r.push_item(Fpage::mem(area, 12 + p::AREA_LOG2, abi::mem::READ | abi::mem::WRITE), 0);
        r
    }

    /// `MOUNT`: the volume's size and state, and the device's flushes.
    pub(crate) fn mount(&self) -> Msg {
        Msg::new(
            0,
            &[
                0,
                self.vol.layout.total_blocks,
                self.vol.free_blocks(),
                self.vol.list().count() as u64,
                BLOCK as u64,
                self.disk.flushes().sent,
                self.disk.flushes().offered as u64,
            ],
        )
    }

    /// `STAT` of segment `name` from `principal`.
    pub(crate) fn stat(&self, principal: u32, name: &str) -> Msg {
        match self.vol.lookup(name) {
            None => err(Error::NotFound),
            // As LIST hides it: a segment the caller has no rights to tells nothing
            // about itself (as OPEN and DELETE, it answers NoRights).
            Some(i) if i.rights_for(principal) == 0 => err(Error::NoRights),
            Some(i) => {
                Msg::new(0, &[0, i.length, i.owner as u64, i.rights_owner as u64, i.rights_other as u64, i.start])
            }
        }
    }

    /// `LIST` from `principal`: the segments it has rights to, as text.
    pub(crate) fn list(&mut self, principal: u32) -> Msg {
        self.text.clear();
        for i in self.vol.list().filter(|i| i.rights_for(principal) != 0) {
            let _ = writeln!(self.text, "{} {} {}", i.name, i.length, i.owner);
        }
        ipc::set_send_string(self.text.as_bytes());
        Msg::new(0, &[0]).with_string()
    }

    /// `DELETE` of segment `name` from `principal` (its owner; no handle of it open).
    pub(crate) fn delete(&mut self, principal: u32, name: &str) -> Msg {
        match self.vol.lookup(name) {
            None => err(Error::NotFound),
            Some(i) if i.owner != principal => err(Error::NoRights),
            Some(i) => {
                let (s, l) = (i.start, i.length);
                if self.handles.values().any(|h| h.start == s) {
                    return err(Error::BadState);
                }
                let _ = self.vol.delete(name);
                self.cache_invalidate(s, l);
                match self.vol.sync(&mut self.disk) {
                    Ok(()) => Msg::new(0, &[0]),
                    Err(e) => err(vol_err(e)),
                }
            }
        }
    }
}
