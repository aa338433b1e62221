//! Waiting: WAIT and WAIT_MANY (a client sleeps until one of its sockets or transfers
//! is ready, or its time is up), and the sleeping calls of a client (WAITs and PINGs:
//! saved replies, at most `MAX_SLEEPERS`).

use crate::sockets::{connected, Sock};
use crate::{now, ok, Net, Reply};
use abi::Error;
use alloc::vec::Vec;
use net_api as p;
use rt::ipc::{self, Msg};
use rt::server;
use smoltcp::socket::{tcp, udp};
use smoltcp::time::{Duration, Instant};

/// Sleeping `WAIT`s and `PING`s per client.
const MAX_SLEEPERS: usize = 8;

/// A client asleep in WAIT (or WAIT_MANY: `out` is where its bitmap goes in its area).
pub struct Waiter {
    pub client: u64,
    pub slot: u64,
    entries: Vec<(u64, u64)>,
    pub deadline: Option<Instant>,
    out: Option<u64>,
}

impl Net {
    /// WAIT: which of `entries` (handle | interest << 32) are ready, as a bitmap; none
    /// yet, the client sleeps until one is or `timeout_us` passes.
    pub fn wait(&mut self, id: u64, timeout_us: u64, entries: &[u64]) -> Reply {
        let entries: Vec<(u64, u64)> = entries.iter().map(|e| (e & 0xffff_ffff, e >> 32)).collect();
        let map = self.ready_map(id, &entries)?;
        if map != 0 || timeout_us == 0 {
            return ok(&[map]);
        }
        let slot = self.sleep(id)?;
        let deadline = (timeout_us != u64::MAX).then(|| now() + Duration::from_micros(timeout_us.min(1 << 40)));
        self.waiters.push(Waiter { client: id, slot, entries, deadline, out: None });
        Ok(None)
    }

    /// WAIT_MANY: as WAIT over `count` entries at `off` in the client's area, the
    /// bitmap written at `out` there; how many are ready.
    pub fn wait_many(&mut self, id: u64, timeout_us: u64, off: u64, count: u64, out: u64) -> Reply {
        let c = self.clients.get(&id).ok_or(Error::BadState)?;
        let words = count.div_ceil(64);
        Self::range(c, off, 8 * count)?;
        Self::range(c, out, 8 * words)?;
        let entries: Vec<(u64, u64)> =
            (0..count).map(|i| c.area.read(off + 8 * i)).map(|e| (e & 0xffff_ffff, e >> 32)).collect();
        let n = self.ready_bits(id, &entries, out)?;
        if n != 0 || timeout_us == 0 {
            return ok(&[n]);
        }
        let slot = self.sleep(id)?;
        let deadline = (timeout_us != u64::MAX).then(|| now() + Duration::from_micros(timeout_us.min(1 << 40)));
        self.waiters.push(Waiter { client: id, slot, entries, deadline, out: Some(out) });
        Ok(None)
    }

    /// Is entry (handle, interest) of client `id` ready? Err: no such handle.
    fn ready(&self, id: u64, handle: u64, interest: u64) -> Result<bool, Error> {
        if interest == p::ENDED {
            let t = self.transfers.iter().find(|t| t.client == id && t.id == handle).ok_or(Error::InvalidCap)?;
            return Ok(!t.running());
        }
        let c = self.clients.get(&id).ok_or(Error::BadState)?;
        let (r, w) = match c.sockets.get(&handle).ok_or(Error::InvalidCap)? {
            Sock::Tcp { h, .. } => {
                let t = self.sockets.get::<tcp::Socket>(*h);
                let closed = t.state() == tcp::State::Closed;
                let pending = matches!(t.state(), tcp::State::SynSent | tcp::State::SynReceived);
                (
                    t.can_recv() || (!t.may_recv() && !pending) || closed,
                    t.can_send() || closed || (!pending && !t.may_send()),
                )
            }
            Sock::Listen { pool, .. } => (pool.iter().any(|h| connected(self.sockets.get::<tcp::Socket>(*h))), false),
            Sock::Udp { h, .. } => {
                let u = self.sockets.get::<udp::Socket>(*h);
                (u.can_recv(), u.can_send())
            }
        };
        Ok((interest & p::READABLE != 0 && r) || (interest & p::WRITABLE != 0 && w))
    }

    fn ready_map(&self, id: u64, entries: &[(u64, u64)]) -> Result<u64, Error> {
        let mut map = 0;
        for (i, (h, interest)) in entries.iter().enumerate() {
            if self.ready(id, *h, *interest)? {
                map |= 1 << i;
            }
        }
        Ok(map)
    }

    /// Is any of client `id`'s entries ready? (Stops at the first.) Err: no such handle.
    fn ready_any(&self, id: u64, entries: &[(u64, u64)]) -> Result<bool, Error> {
        for (h, interest) in entries {
            if self.ready(id, *h, *interest)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Write the bitmap of client `id`'s ready entries at `out` in its area (checked
    /// to fit): how many are ready.
    fn ready_bits(&self, id: u64, entries: &[(u64, u64)], out: u64) -> Result<u64, Error> {
        let c = self.clients.get(&id).ok_or(Error::BadState)?;
        let mut n = 0;
        for (w, chunk) in entries.chunks(64).enumerate() {
            let mut bits = 0u64;
            for (i, (h, interest)) in chunk.iter().enumerate() {
                if self.ready(id, *h, *interest)? {
                    bits |= 1 << i;
                    n += 1;
                }
            }
            c.area.write(out + 8 * w as u64, bits);
        }
        Ok(n)
    }

    /// Answer WAITs whose sockets are ready or whose time is up.
    pub fn wake(&mut self) {
        let t = now();
        let mut i = 0;
        while i < self.waiters.len() {
            let w = &self.waiters[i];
            let map = match w.out {
                None => self.ready_map(w.client, &w.entries),
                // Many entries: look for one ready (stopping there) before writing them all.
                Some(out) => match self.ready_any(w.client, &w.entries) {
                    Ok(false) if w.deadline.is_none_or(|d| t < d) => Ok(0),
                    Ok(_) => self.ready_bits(w.client, &w.entries, out),
                    Err(e) => Err(e),
                },
            };
            let answer = match map {
                Ok(0) if w.deadline.is_none_or(|d| t < d) => None,
                Ok(m) => Some(server::ok_msg(&[m])),
                Err(e) => Some(Msg::new(0, &[e as u64])),
            };
            if let Some(m) = answer {
                // Keeps insertion order: the first of a client's waiters is its oldest.
                let w = self.waiters.remove(i);
                self.answer_sleeper(w.client, w.slot, &m);
            } else {
                i += 1;
            }
        }
    }

    /// Answer a sleeping call (a saved reply in `slot`) of client `client` with `m`,
    /// and give its place back.
    pub fn answer_sleeper(&mut self, client: u64, slot: u64, m: &Msg) {
        let _ = ipc::send(slot, m, 0);
        // A reply capability is used up by a send; one whose caller gave up is still
        // there.
        let _ = rt::sys::cap_delete(slot);
        rt::free_slot(slot);
        if let Some(c) = self.clients.get_mut(&client) {
            c.sleepers -= 1;
        }
    }

    pub fn sleep(&mut self, id: u64) -> Result<u64, Error> {
        if self.client(id)?.sleepers >= MAX_SLEEPERS {
            // The client's oldest WAIT is answered now with nothing ready (as if its
            // time were up), or else its oldest PING with Timeout: a caller that gave up
            // long ago, or a program with more waits than it may keep, cannot lock
            // itself out of sleeping.
            let (slot, answer) = if let Some(i) = self.waiters.iter().position(|w| w.client == id) {
                (self.waiters.remove(i).slot, server::ok_msg(&[0]))
            } else {
                let next = self.next_seq;
                let oldest = self
                    .pings
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.client == id)
                    .max_by_key(|(_, p)| next.wrapping_sub(p.seq));
                let Some((i, _)) = oldest else { return Err(Error::NoSpace) };
                (self.pings.swap_remove(i).slot, Msg::new(0, &[Error::Timeout as u64]))
            };
            self.answer_sleeper(id, slot, &answer);
        }
        let slot = rt::alloc_slot();
        if ipc::save_reply(slot).is_err() {
            rt::free_slot(slot);
            return Err(Error::NoPartner);
        }
        self.client(id)?.sleepers += 1;
        Ok(slot)
    }
}
