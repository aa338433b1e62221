//! Waiting: WAIT (a client sleeps until one of a few sockets or transfers is ready, or
//! its time is up), the readiness wait in epoll's shape (WATCH, WAIT_READY: each
//! client's interest set lives here, `readyset`, and a wait looks only at what a frame,
//! a request or a stack timer marked), and the sleeping calls of a client (WAITs and
//! PINGs: saved replies, at most `MAX_SLEEPERS`).

use crate::sockets::{connected, Sock};
use crate::sockets::{Key, SOCKET, TRANSFER};
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

/// A client asleep in WAIT (or WAIT_READY: `out` is where its pairs go in its area,
/// and how many at most).
pub struct Waiter {
    pub client: u64,
    pub slot: u64,
    entries: Vec<(u64, u64)>,
    pub deadline: Option<Instant>,
    out: Option<(u64, u64)>,
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

    /// WATCH: watch `events` of socket (or, `ENDED`, transfer) `handle`, given back
    /// with `token`; 0 stops watching the socket.
    pub fn watch(&mut self, id: u64, handle: u64, events: u64, token: u64) -> Reply {
        let key = if events == p::ENDED { (TRANSFER, handle) } else { (SOCKET, handle) };
        let known = if key.0 == TRANSFER {
            self.transfers.iter().any(|t| t.client == id && t.id == handle)
        } else {
            self.clients.get(&id).ok_or(Error::BadState)?.sockets.contains_key(&handle)
        };
        let c = self.client(id)?;
        if events == 0 {
            c.watch.remove(&key);
            return ok(&[]);
        }
        if !known {
            return Err(Error::InvalidCap);
        }
        c.watch.watch(key, events, token).map_err(|_| Error::NoSpace)?;
        ok(&[])
    }

    /// WAIT_READY: up to `max` (token, events) pairs of the watched entries ready now,
    /// written at `off` in the client's area (checked by the protocol); none yet, the
    /// client sleeps until one is or `timeout_us` passes (one such sleep a client: an
    /// older one is answered with none).
    pub fn wait_ready(&mut self, id: u64, timeout_us: u64, off: u64, max: u64) -> Reply {
        let n = self.collect(id, off, max)?;
        if n != 0 || timeout_us == 0 {
            return ok(&[n]);
        }
        if let Some(i) = self.waiters.iter().position(|w| w.client == id && w.out.is_some()) {
            let w = self.waiters.remove(i);
            self.answer_sleeper(id, w.slot, &server::ok_msg(&[0]));
        }
        let slot = self.sleep(id)?;
        let deadline = (timeout_us != u64::MAX).then(|| now() + Duration::from_micros(timeout_us.min(1 << 40)));
        self.waiters.push(Waiter { client: id, slot, entries: Vec::new(), deadline, out: Some((off, max)) });
        Ok(None)
    }

    /// Something touched client `id`'s `key`: its next wait looks at it.
    pub fn mark(&mut self, id: u64, key: Key) {
        if let Some(c) = self.clients.get_mut(&id) {
            c.watch.mark(&key);
        }
    }

    /// The stack ran for a timer (no frame, no request): mark the awake connections
    /// (a timer changes only those: a parked one has none running), e.g. one the stack
    /// gave up on. O(awake), on timers only.
    pub fn mark_timed(&mut self) {
        let (sockets, owners, clients) = (&self.sockets, &self.owners, &mut self.clients);
        for sh in sockets.awake_handles() {
            if let Some((id, h)) = owners.owner(sh) {
                if let Some(c) = clients.get_mut(&id) {
                    c.watch.mark(&(SOCKET, h));
                }
            }
        }
    }

    /// The ready pairs of client `id`'s marked entries, written at `off` (room for
    /// `max` checked by the protocol): how many.
    fn collect(&mut self, id: u64, off: u64, max: u64) -> Result<u64, Error> {
        let c = self.clients.get_mut(&id).ok_or(Error::BadState)?;
        if !c.watch.pending() {
            return Ok(0);
        }
        let area = c.area;
        let mut set = core::mem::replace(&mut c.watch, readyset::Set::new(0));
        let mut i = 0;
        let n = set.collect(
            max as usize,
            |k, _| self.events(id, k),
            |token, ev| {
                area.write(off + 16 * i, token);
                area.write(off + 16 * i + 8, ev);
                i += 1;
            },
        );
        if let Some(c) = self.clients.get_mut(&id) {
            c.watch = set;
        }
        Ok(n as u64)
    }

    /// The events that hold now for client `id`'s `key` (None: no such socket or
    /// transfer any more).
    fn events(&self, id: u64, (kind, handle): Key) -> Option<u64> {
        if kind == TRANSFER {
            let t = self.transfers.iter().find(|t| t.client == id && t.id == handle)?;
            return Some(if t.running() { 0 } else { p::ENDED });
        }
        let (r, w) = self.readiness(id, handle).ok()?;
        Some((if r { p::READABLE } else { 0 }) | (if w { p::WRITABLE } else { 0 }))
    }

    /// Is entry (handle, interest) of client `id` ready? Err: no such handle.
    fn ready(&self, id: u64, handle: u64, interest: u64) -> Result<bool, Error> {
        if interest == p::ENDED {
            let t = self.transfers.iter().find(|t| t.client == id && t.id == handle).ok_or(Error::InvalidCap)?;
            return Ok(!t.running());
        }
        let (r, w) = self.readiness(id, handle)?;
        Ok((interest & p::READABLE != 0 && r) || (interest & p::WRITABLE != 0 && w))
    }

    /// (readable, writable) of client `id`'s socket `handle`. Err: no such handle.
    fn readiness(&self, id: u64, handle: u64) -> Result<(bool, bool), Error> {
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
        Ok((r, w))
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

    /// Answer WAITs whose sockets are ready or whose time is up.
    pub fn wake(&mut self) {
        let t = now();
        let mut i = 0;
        while i < self.waiters.len() {
            let w = &self.waiters[i];
            let map = match w.out {
                None => self.ready_map(w.client, &w.entries),
                // The readiness wait: only if something of the client's was marked.
                Some((off, max)) => {
                    let (client, marked) = (w.client, self.clients.get(&w.client).is_some_and(|c| c.watch.pending()));
                    if marked {
                        self.collect(client, off, max)
                    } else {
                        Ok(0)
                    }
                }
            };
            let w = &self.waiters[i];
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
