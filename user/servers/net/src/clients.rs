//! Clients: each program attached (its shared area, its socket table, the buffer
//! memory it holds within its budget), and the requests about them (ATTACH, LIMITS).

use crate::sockets::{Sock, NOBODY, SOCK_BYTES};
use crate::{ok, Net, Reply};
use abi::fpage::Fpage;
use abi::Error;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use net_api as p;
use rt::ipc::Msg;
use rt::server;
use sigma0_api as s0;

/// An attached program: its shared area and its sockets (`next`: the next handle).
pub struct Client {
    pub area: rt::shared::Area,
    pub sockets: BTreeMap<u64, Sock>,
    pub next: u64,
    /// Buffer memory its sockets hold (bytes).
    pub bytes: usize,
    /// Its WAITs and PINGs asleep (at most `MAX_SLEEPERS`: `wait`).
    pub sleepers: usize,
    /// The handles of its listening sockets among `sockets`: what the walks on each
    /// batch of frames (`admit_syns`, `pools`) visit, not its every connection (a
    /// thousand connections made each walk cost a thousand steps).
    pub listeners: Vec<u64>,
    /// Its interest set and ready list (`WATCH`, `WAIT_READY`: `wait`).
    pub watch: readyset::Set<crate::sockets::Key>,
}

/// A client area this server mapped at `va` (from sigma0, `AREA_BYTES` long).
fn area_at(va: u64) -> rt::shared::Area {
    // SAFETY: sigma0 mapped AREA_BYTES of fresh memory read-write at `va` (the window of
    // the ALLOC request was exactly that range); it stays mapped for the server's life
    // and no Rust object lives there.
    unsafe { rt::shared::Area::new(va, p::AREA_BYTES) }
}

impl Net {
    pub fn client(&mut self, id: u64) -> Result<&mut Client, Error> {
        self.clients.get_mut(&id).ok_or(Error::BadState)
    }

    /// Buffer memory every socket holds now (clients' and orphans nobody pays for).
    pub fn held(&self) -> usize {
        self.clients.values().map(|c| c.bytes).sum::<usize>()
            + self.orphans.iter().filter(|o| o.client == NOBODY).map(|o| o.bytes).sum::<usize>()
    }

    /// Add a socket to a client's table within its limits.
    pub fn install(&mut self, id: u64, s: Sock, bytes: usize) -> Result<u64, Error> {
        let (budget, max, room) = (self.budget, self.max_sockets, self.share.saturating_sub(self.held()));
        let c = self.client(id)?;
        if c.sockets.len() >= max || c.bytes + bytes > budget || bytes > room {
            return Err(Error::NoSpace);
        }
        let h = c.next;
        c.next += 1;
        c.bytes += bytes;
        c.sockets.insert(h, s);
        Ok(h)
    }

    /// ATTACH: the client's shared area (made at its first ATTACH), mapped to it.
    pub fn attach(&mut self, id: u64) -> Reply {
        let area = match self.clients.get(&id) {
            Some(c) => c.area,
            None => {
                let area = self.new_area()?;
                let watch = crate::sockets::interest_set(self.max_sockets);
                self.clients.insert(
                    id,
                    Client {
                        area,
                        sockets: BTreeMap::new(),
                        next: 1,
                        bytes: 0,
                        sleepers: 0,
                        listeners: Vec::new(),
                        watch,
                    },
                );
                area
            }
        };
        let mut m = server::ok_msg(&[p::AREA_BYTES]);
        m.push_item(Fpage::mem(area.base(), 12 + p::AREA_LOG2, abi::mem::RIGHTS_MASK), 0);
        Ok(Some(m))
    }

    fn new_area(&mut self) -> Result<rt::shared::Area, Error> {
        if let Some(a) = self.spare_areas.pop() {
            a.zero(0, a.len());
            return Ok(a);
        }
        let va = self.area_next;
        let mut m = Msg::new(s0::ALLOC, &[p::AREA_LOG2, va]);
        server::request_mapping(
            self.sigma0,
            [Fpage::mem(va, 12 + p::AREA_LOG2, abi::mem::RIGHTS_MASK), Fpage(0), Fpage(0)],
            &mut m,
        )
        .map_err(|_| Error::NoMemory)?;
        self.area_next += p::AREA_BYTES;
        Ok(area_at(va))
    }

    /// The area's `off .. off + len`, or InvalidArg.
    pub fn range(c: &Client, off: u64, len: u64) -> Result<&mut [u8], Error> {
        match off.checked_add(len) {
            Some(end) if end <= c.area.len() => Ok(c.area.bytes(off, len)),
            _ => Err(Error::InvalidArg),
        }
    }

    /// LIMITS: the socket memory: the share, what is held, the budget, the client's
    /// part, a connection's, SYNs held back, and the buffer pool's mapped bytes.
    pub fn limits(&self, id: u64) -> Reply {
        let held = self.held() as u64;
        let mine = self.clients.get(&id).ok_or(Error::BadState)?.bytes as u64;
        ok(&[self.share as u64, held, self.budget as u64, mine, SOCK_BYTES as u64, self.syn_held, self.bufs.mapped()])
    }
}
