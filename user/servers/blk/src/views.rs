//! Views and who pays: `DELEGATE` (a view of some of a handle's blocks, for a
//! principal), `ATTACH` (its holder maps it), `REVOKE`; the slots, shared areas and
//! views charged to each principal against its share (`USAGE`), and who may charge
//! whom (agents).

use crate::area::MAX_OPEN_PER_PRINCIPAL;
use crate::segments::Handle;
use crate::{err, Blk, HOLDER, IRQ_BADGE};
use abi::fpage::Fpage;
use abi::{cap, rights, Error};
use alloc::vec::Vec;
use baio::BLOCK;
use blk_api as p;
use rt::ipc::Msg;
use rt::server::Badge;

impl Blk {
    /// Shared areas charged to `principal`: its handles' (opened, or views attached for
    /// it), and parked ones of its views not yet taken back.
    pub(crate) fn areas_of(&self, principal: u32) -> usize {
        self.handles.values().filter(|h| h.payer == principal && h.area != 0).count()
            + self.parked.iter().filter(|a| a.3 == principal).count()
    }

    /// Capability slots held here for `principal`: its handles' and views' capabilities,
    /// their holders', and the replies of its sleeping waits.
    pub(crate) fn slots_of(&self, principal: u32) -> u64 {
        let caps: u64 = self
            .handles
            .values()
            .filter(|h| h.payer == principal)
            .map(|h| (h.slot != 0) as u64 + (h.holder != 0) as u64)
            .sum();
        caps + self.waiters.iter().filter(|w| self.handles.get(&w.hid).is_some_and(|h| h.payer == principal)).count()
            as u64
    }

    /// Views charged to `principal`.
    fn views_of(&self, principal: u32) -> u64 {
        self.handles.values().filter(|h| h.payer == principal && h.parent.is_some()).count() as u64
    }

    /// May `principal` be charged `n` more slots? `NoSpace` past its share, or when only
    /// the slots this service keeps for itself are left.
    fn room_for(&self, principal: u32, n: u64) -> Result<(), Error> {
        if principal == 0 {
            return Err(Error::NoRights);
        }
        if self.slots_of(principal) + n > p::PRINCIPAL_SLOTS || rt::free_slots() < p::RESERVED_SLOTS + n {
            return Err(Error::NoSpace);
        }
        Ok(())
    }

    /// An empty slot to hold something for `principal` (see `room_for`): never a panic,
    /// a client's request must not end the service.
    pub(crate) fn slot_for(&self, principal: u32) -> Result<u64, Error> {
        self.room_for(principal, 1)?;
        rt::try_alloc_slot().ok_or(Error::NoSpace)
    }

    /// The view a capability the request brought names: it must be one of this
    /// service's (its object this thread) with a badge minted for a view's ticket.
    fn ticket_of(&self, slot: u64) -> Option<u64> {
        let (_, _, badge) = rt::sys::cap_info(slot).ok()?;
        if rt::sys::cap_object(slot).ok()? != rt::sys::cap_object(cap::SELF_THREAD).ok()? {
            return None;
        }
        let v = Badge(badge).minted_value()?;
        (v & (HOLDER | IRQ_BADGE) == 0).then_some(v)
    }

    /// May a program of `principal` charge `other`? Itself; others only if it is an
    /// agent (a principal in `agents=`, or a program without a principal: a server of
    /// the system such as `net`).
    fn may_charge(&self, principal: u32, other: u32) -> bool {
        other != 0 && (other == principal || principal == 0 || self.agents.contains(&principal))
    }

    /// `DELEGATE` through handle `hid`: a new handle on `extents` of its blocks, for
    /// principal `payer` (0: the handle's own).
    pub(crate) fn delegate(&mut self, hid: u64, rights: u64, bytes: u64, payer: u64, extents: &[u64]) -> Msg {
        let h = &self.handles[&hid];
        // A view is not handed on further: its holder is not its delegator.
        if h.parent.is_some() {
            return err(Error::BadState);
        }
        if rights == 0 || rights & !(h.rights as u64) != 0 {
            return err(Error::NoRights);
        }
        let payer = match payer {
            0 => h.payer,
            p if p > Badge::MAX_PRINCIPAL => return err(Error::InvalidArg),
            p => p as u32,
        };
        // Only an agent's capability may make views others pay for.
        if payer != h.payer && !h.agent {
            return err(Error::NoRights);
        }
        if self.handles.values().filter(|c| c.parent == Some(hid)).count() >= p::MAX_DELEGATED {
            return err(Error::NoSpace);
        }
        // Each pair, through the parent's own view, becomes runs of the segment.
        let mut view: Vec<(u64, u64)> = Vec::new();
        let mut len = 0u64;
        for pair in extents.chunks_exact(2) {
            let (first, n) = (pair[0], pair[1]);
            if n == 0 || first.checked_add(n).is_none_or(|e| e > h.len) {
                return err(Error::InvalidArg);
            }
            for (s, take) in self.pieces(hid, first, n) {
                match view.last_mut() {
                    Some(last) if last.0 + last.1 == s => last.1 += take,
                    _ => view.push((s, take)),
                }
            }
            len += n;
        }
        let bytes = if bytes == 0 { len * BLOCK as u64 } else { bytes };
        if bytes > len * BLOCK as u64 {
            return err(Error::InvalidArg);
        }
        let slot = match self.slot_for(payer) {
            Ok(s) => s,
            Err(e) => return err(e),
        };
        let h = &self.handles[&hid];
        let child = Handle {
            name: h.name.clone(),
            written: h.written,
            start: h.start,
            len,
            view,
            bytes,
            parent: Some(hid),
            rights: rights as u8,
            slot,
            holder: 0,
            area: 0,
            mapped: 0,
            client: h.client,
            payer,
            agent: false,
            holder_prog: 0,
            owner: h.owner,
            completed: 0,
            head: 0,
        };
        let cid = self.next;
        self.next += 1;
        let _ = rt::sys::cap_copy(cap::SELF_THREAD, slot, rights::SEND, Badge::minted(cid).0);
        self.handles.insert(cid, child);
        let mut r = Msg::new(0, &[0, len, cid]);
        r.push_item(Fpage::caps(slot, 0, rights::SEND), 0);
        r
    }

    /// `ATTACH` from `principal`'s program `client` of the view whose ticket the request
    /// brought, for principal `payer` (0: the caller's): the first `2^log2` bytes of its
    /// shared area, mapped read-only, and the holder's capability. The view is the
    /// payer's from now on, and the caller its holder.
    pub(crate) fn attach(&mut self, principal: u32, client: u64, log2: u64, payer: u64) -> Msg {
        let Some(ticket) = self.received.take() else { return err(Error::InvalidCap) };
        let hid = self.ticket_of(ticket);
        rt::free_slot(ticket);
        let Some(h) = hid.and_then(|hid| self.handles.get(&hid)) else { return err(Error::InvalidCap) };
        let hid = hid.unwrap_or(0);
        if h.area != 0 || h.parent.is_none() {
            return err(Error::BadState);
        }
        if !(12..=12 + p::AREA_LOG2).contains(&log2) {
            return err(Error::InvalidArg);
        }
        let payer = match payer {
            0 => principal,
            p if p > Badge::MAX_PRINCIPAL => return err(Error::InvalidArg),
            p => p as u32,
        };
        if !self.may_charge(principal, payer) {
            return err(Error::NoRights);
        }
        // The view's own slot moves to the payer too, and its holder's is new.
        let moving = (h.payer != payer) as u64;
        if self.areas_of(payer) >= MAX_OPEN_PER_PRINCIPAL {
            return err(Error::NoMemory);
        }
        if let Err(e) = self.room_for(payer, 1 + moving) {
            return err(e);
        }
        let Some(holder) = rt::try_alloc_slot() else { return err(Error::NoSpace) };
        let Some(area) = self.area() else {
            rt::free_slot(holder);
            return err(Error::NoMemory);
        };
        let _ = rt::sys::cap_copy(cap::SELF_THREAD, holder, rights::SEND, Badge::minted(HOLDER | hid).0);
        let h = self.handles.get_mut(&hid).unwrap();
        h.area = area;
        h.mapped = 1 << log2;
        h.holder = holder;
        h.payer = payer;
        h.holder_prog = client;
        let mut r = Msg::new(0, &[0, h.len, h.bytes]);
        r.push_item(Fpage::mem(area, log2, abi::mem::READ), 0);
        r.push_item(Fpage::caps(holder, 0, rights::SEND), 0);
        r
    }

    /// `REVOKE` of `view` through handle `hid`.
    pub(crate) fn revoke(&mut self, hid: u64, view: u64) -> Msg {
        // Only the delegator revokes: through the capability the view was
        // delegated from (never through a view: every view's parent is some
        // opened handle, and a holder is not its delegator), or through another
        // opened one the same program holds (one it took over in a live update:
        // `succeeded`).
        let me = &self.handles[&hid];
        if me.parent.is_some() {
            return err(Error::NoRights);
        }
        let parent = self.handles.get(&view).and_then(|v| v.parent);
        let mine =
            |p: u64| p == hid || self.handles.get(&p).is_some_and(|ph| ph.parent.is_none() && ph.client == me.client);
        if !parent.is_some_and(mine) {
            return err(Error::InvalidArg);
        }
        self.close(view, true);
        Msg::new(0, &[0])
    }

    /// `USAGE` from `principal`: what it holds here, of its shares.
    pub(crate) fn usage(&self, principal: u32) -> Msg {
        Msg::new(
            0,
            &[
                0,
                self.slots_of(principal),
                p::PRINCIPAL_SLOTS,
                self.areas_of(principal) as u64,
                MAX_OPEN_PER_PRINCIPAL as u64,
                self.views_of(principal),
            ],
        )
    }
}
