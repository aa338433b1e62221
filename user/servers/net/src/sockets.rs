//! Sockets: a client's TCP connections, listeners and UDP sockets (its table, their
//! buffers from `bufs`, ports), the requests on them, one method each, and what is
//! left of a connection its client has closed (an `Orphan`).

use crate::{bufs, ip_word, ipv4, now, ok, Net, Reply};
use abi::Error;
use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;
use net_api as p;
use smoltcp::socket::{tcp, udp};
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{IpAddress, IpEndpoint};
use sockpark::{Handle as SocketHandle, Sockets as SocketSet};

/// A watched entry: a socket (kind `SOCKET`) or a transfer (`TRANSFER`, for `ENDED`).
pub type Key = (u8, u64);
pub const SOCKET: u8 = 0;
pub const TRANSFER: u8 = 1;

/// A client's interest set (`WATCH`): its entries at most twice its sockets' limit and
/// `WATCH_SLACK` (transfers).
pub fn interest_set(max_sockets: usize) -> readyset::Set<Key> {
    readyset::Set::new(max_sockets.saturating_mul(2).saturating_add(p::WATCH_SLACK))
}

/// One TCP connection's buffer memory, as charged: receiving (a request head fits; the
/// window it offers) and sending (what Cue and writers queue ahead of the ACKs), a
/// slot of `bufs`.
pub const SOCK_BYTES: usize = bufs::RX + bufs::TX;

/// A UDP socket's buffers, each way: packets and bytes (of a `bufs` slot, charged as
/// a connection's).
const UDP_PACKETS: usize = 16;
const UDP_BUF: usize = bufs::RX;

/// A closed connection still sending its last bytes is reset after this long.
const LINGER: Duration = Duration::from_secs(30);

/// Whose a received frame is, for the readiness wait (`Net::mark_rx`): a connection's
/// (peer address, peer port, local port), and a listener's or UDP socket's (0, 0,
/// port), → (client, handle); and the key each connection has, to forget it when it
/// goes. A lookup per frame, no walk.
#[derive(Default)]
pub struct Owners {
    by_flow: BTreeMap<(u32, u16, u16), (u64, u64)>,
    flow_of: BTreeMap<SocketHandle, (u32, u16, u16)>,
}

impl Owners {
    /// Whose a frame from `addr`:`port` to local port `to` is.
    pub fn of(&self, (addr, port, to): (u32, u16, u16)) -> Option<(u64, u64)> {
        self.by_flow.get(&(addr, port, to)).or_else(|| self.by_flow.get(&(0, 0, to))).copied()
    }

    /// Client `id`'s connection `handle` is smoltcp's socket `sh`, to `peer` from local
    /// port `to`.
    pub fn connection(&mut self, sh: SocketHandle, peer: IpEndpoint, to: u16, id: u64, handle: u64) {
        let IpAddress::Ipv4(a) = peer.addr;
        let flow = (u32::from(a), peer.port, to);
        self.by_flow.insert(flow, (id, handle));
        if let Some(old) = self.flow_of.insert(sh, flow) {
            if old != flow {
                self.by_flow.remove(&old);
            }
        }
    }

    /// Client `id`'s listener or UDP socket `handle` on `port`.
    pub fn port(&mut self, port: u16, id: u64, handle: u64) {
        self.by_flow.insert((0, 0, port), (id, handle));
    }

    pub fn forget_port(&mut self, port: u16) {
        self.by_flow.remove(&(0, 0, port));
    }

    /// Whose connection smoltcp's socket `sh` is: (client, handle).
    pub fn owner(&self, sh: SocketHandle) -> Option<(u64, u64)> {
        self.by_flow.get(self.flow_of.get(&sh)?).copied()
    }

    /// Is smoltcp's socket `sh` a connection a client holds (a frame for it is found)?
    pub fn has(&self, sh: SocketHandle) -> bool {
        self.flow_of.contains_key(&sh)
    }

    pub fn forget(&mut self, sh: SocketHandle) {
        if let Some(flow) = self.flow_of.remove(&sh) {
            self.by_flow.remove(&flow);
        }
    }
}

/// A socket in a client's table.
pub enum Sock {
    Tcp {
        h: SocketHandle,
        bytes: usize,
    },
    /// Listening on `port`: the connections that have come and are not accepted yet,
    /// at most `backlog` (a socket each, made when its SYN came: `admit_syns`); ACCEPT
    /// hands out one that is established.
    Listen {
        port: u16,
        backlog: usize,
        pool: Vec<SocketHandle>,
    },
    Udp {
        h: SocketHandle,
        port: u16,
    },
}

/// A connection its client has closed, still sending its last bytes; its buffers stay
/// charged to the client (if it lives) until they go, so that closing is no way around
/// the budget.
pub struct Orphan {
    pub h: SocketHandle,
    /// Reset then if not finished.
    pub until: Instant,
    /// The client charged (`NOBODY` once it is gone).
    pub client: u64,
    pub bytes: usize,
}

/// The client of an orphan nobody pays for (its client is gone).
pub const NOBODY: u64 = u64::MAX;

fn tcp_state(s: tcp::State) -> u64 {
    use tcp::State::*;
    match s {
        Closed => p::state::CLOSED,
        Listen => p::state::LISTEN,
        SynSent => p::state::SYN_SENT,
        SynReceived => p::state::SYN_RECEIVED,
        Established => p::state::ESTABLISHED,
        FinWait1 => p::state::FIN_WAIT_1,
        FinWait2 => p::state::FIN_WAIT_2,
        CloseWait => p::state::CLOSE_WAIT,
        Closing => p::state::CLOSING,
        LastAck => p::state::LAST_ACK,
        TimeWait => p::state::TIME_WAIT,
    }
}

/// A TCP socket with its buffers (a slot of `pool`, recorded in `slots`), added to
/// `sockets`: segments sent at once (no Nagle: the clients batch through the shared
/// area), dead peers given up after 2 min. None: no frames for its buffers.
pub fn add_tcp(
    sockets: &mut SocketSet,
    pool: &mut bufs::Pool,
    slots: &mut BTreeMap<SocketHandle, u32>,
) -> Option<SocketHandle> {
    let (i, rx, tx) = pool.take()?;
    let mut s = tcp::Socket::new(tcp::SocketBuffer::new(rx), tcp::SocketBuffer::new(tx));
    s.set_nagle_enabled(false);
    s.set_timeout(Some(Duration::from_secs(120)));
    let h = sockets.add(s);
    slots.insert(h, i);
    Some(h)
}

/// A UDP socket bound to `port` with its buffers (a slot of `pool`, recorded in
/// `slots`), added to `sockets`. None: no frames for its buffers.
fn add_udp(
    sockets: &mut SocketSet,
    pool: &mut bufs::Pool,
    slots: &mut BTreeMap<SocketHandle, u32>,
    port: u16,
) -> Result<SocketHandle, Error> {
    let (i, rx, tx) = pool.take().ok_or(Error::NoSpace)?;
    let mk =
        |b: &'static mut [u8]| udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; UDP_PACKETS], &mut b[..UDP_BUF]);
    let mut s = udp::Socket::new(mk(rx), mk(tx));
    if s.bind(port).is_err() {
        drop(s);
        pool.give(i);
        return Err(Error::InvalidArg);
    }
    let h = sockets.add(s);
    slots.insert(h, i);
    Ok(h)
}

/// Remove socket `h` (TCP or UDP) from `sockets` and give its buffers back to `pool`.
pub fn remove_sock(
    sockets: &mut SocketSet,
    pool: &mut bufs::Pool,
    slots: &mut BTreeMap<SocketHandle, u32>,
    h: SocketHandle,
) {
    // The socket (holding the slot's slices) is dropped here, before its slot is free.
    drop(sockets.remove(h));
    if let Some(i) = slots.remove(&h) {
        pool.give(i);
    }
}

/// A pool socket that has a connection for ACCEPT.
pub fn connected(s: &tcp::Socket) -> bool {
    matches!(s.state(), tcp::State::Established | tcp::State::CloseWait)
}

impl Net {
    /// LISTEN: listen on `port`, at most `backlog` connections waiting to be accepted.
    pub fn listen(&mut self, id: u64, port: u16, backlog: u64) -> Reply {
        self.client(id)?;
        if port == 0 {
            return Err(Error::InvalidArg);
        }
        if self.port_in_use(port) {
            return Err(Error::Exists);
        }
        // A listener holds no buffers: each connection gets its own when its
        // SYN comes (`admit_syns`). One must fit the budget at least.
        let (budget, room) = (self.budget, self.share.saturating_sub(self.held()));
        if self.client(id)?.bytes + SOCK_BYTES > budget || SOCK_BYTES > room {
            return Err(Error::NoSpace);
        }
        let h = self.install(id, Sock::Listen { port, backlog: backlog as usize, pool: Vec::new() }, 0)?;
        self.client(id)?.listeners.push(h);
        self.owners.port(port, id, h);
        ok(&[h])
    }

    /// ACCEPT: a connection that came to listener `handle`: its handle and the peer.
    pub fn accept(&mut self, id: u64, handle: u64) -> Reply {
        let max = self.max_sockets;
        let c = self.clients.get_mut(&id).ok_or(Error::BadState)?;
        let pool = match c.sockets.get_mut(&handle) {
            Some(Sock::Listen { pool, .. }) => pool,
            Some(_) => return Err(Error::WrongType),
            None => return Err(Error::InvalidCap),
        };
        let sockets = &self.sockets;
        let Some(i) = pool.iter().position(|h| connected(sockets.get::<tcp::Socket>(*h))) else {
            return Err(Error::WouldBlock);
        };
        // The listener may hold more: the next wait looks at it again.
        c.watch.mark(&(SOCKET, handle));
        let sh = pool.remove(i);
        // The connection's buffers were charged to the listener's pool; they move
        // to the new handle.
        let c = self.client(id)?;
        let h = c.next;
        c.next += 1;
        c.sockets.insert(h, Sock::Tcp { h: sh, bytes: SOCK_BYTES });
        if c.sockets.len() > max {
            c.sockets.remove(&h);
            c.bytes -= SOCK_BYTES;
            self.sockets.get_mut::<tcp::Socket>(sh).abort();
            self.orphans.push(Orphan { h: sh, until: now(), client: NOBODY, bytes: 0 });
            return Err(Error::NoSpace);
        }
        let t = self.sockets.get::<tcp::Socket>(sh);
        if let (Some(r), Some(l)) = (t.remote_endpoint(), t.local_endpoint()) {
            self.owners.connection(sh, r, l.port, id, h);
        }
        let (ip, port) = match t.remote_endpoint() {
            Some(IpEndpoint { addr: IpAddress::Ipv4(a), port }) => (ip_word(a), port as u64),
            None => (0, 0),
        };
        ok(&[h, ip, port])
    }

    /// CONNECT: a connection to `ip`:`port` (from an ephemeral port), its handle.
    pub fn connect(&mut self, id: u64, ip: u32, port: u16) -> Reply {
        self.client(id)?;
        if port == 0 || ip == 0 {
            return Err(Error::InvalidArg);
        }
        let local = self.ephemeral();
        let sh = self.new_tcp().ok_or(Error::NoSpace)?;
        let r = self.sockets.get_mut::<tcp::Socket>(sh).connect(
            self.iface.context(),
            (IpAddress::Ipv4(ipv4(ip)), port),
            local,
        );
        if r.is_err() {
            self.remove_sock(sh);
            return Err(Error::InvalidArg);
        }
        match self.install(id, Sock::Tcp { h: sh, bytes: SOCK_BYTES }, SOCK_BYTES) {
            Ok(h) => {
                self.owners.connection(sh, IpEndpoint::new(IpAddress::Ipv4(ipv4(ip)), port), local, id, h);
                ok(&[h])
            }
            Err(e) => {
                self.remove_sock(sh);
                Err(e)
            }
        }
    }

    /// SEND: queue `len` bytes at `off` in the client's area on connection `handle`; how many went.
    pub fn send(&mut self, id: u64, handle: u64, off: u64, len: u64) -> Reply {
        let sh = self.tcp_of(id, handle)?;
        if self.cueing(id, handle) {
            return Err(Error::BadState);
        }
        self.mark(id, (SOCKET, handle));
        let c = &self.clients[&id];
        let data = Self::range(c, off, len)?;
        let s = self.sockets.get_mut::<tcp::Socket>(sh);
        if s.state() == tcp::State::Closed {
            return Err(Error::Reset);
        }
        if !s.may_send() && !matches!(s.state(), tcp::State::SynSent | tcp::State::SynReceived) {
            return Err(Error::BadState);
        }
        match s.send_slice(data) {
            Ok(0) if len > 0 => Err(Error::WouldBlock),
            Ok(n) => {
                // Its segment, sent by the stack's run after this request, carries the
                // ACK of what it received.
                self.sockets.paid(sh);
                ok(&[n as u64])
            }
            Err(_) => Err(Error::Reset),
        }
    }

    /// RECV: up to `max` bytes from connection `handle` to `off` in the client's area; how many.
    pub fn recv(&mut self, id: u64, handle: u64, off: u64, max: u64) -> Reply {
        let sh = self.tcp_of(id, handle)?;
        self.mark(id, (SOCKET, handle));
        let c = &self.clients[&id];
        let buf = Self::range(c, off, max)?;
        let s = self.sockets.get_mut::<tcp::Socket>(sh);
        // Bytes taken from a buffer more than half full open the window: the stack runs
        // after this RECV to say so (`window_tight`); else it need not.
        self.window_tight = 2 * s.recv_queue() > s.recv_capacity();
        match s.recv_slice(buf) {
            Ok(0) if max > 0 => Err(Error::WouldBlock),
            Ok(n) => ok(&[n as u64]),
            Err(tcp::RecvError::Finished) => ok(&[0]),
            Err(tcp::RecvError::InvalidState) => {
                if matches!(s.state(), tcp::State::SynSent | tcp::State::SynReceived) {
                    Err(Error::WouldBlock)
                } else {
                    Err(Error::Reset)
                }
            }
        }
    }

    /// SHUTDOWN: close the sending half of connection `handle` (a FIN after its data).
    pub fn shutdown(&mut self, id: u64, handle: u64) -> Reply {
        let sh = self.tcp_of(id, handle)?;
        self.sockets.get_mut::<tcp::Socket>(sh).close();
        self.mark(id, (SOCKET, handle));
        ok(&[])
    }

    /// CLOSE: let go of socket `handle` (and cancel its transfers).
    pub fn close(&mut self, id: u64, handle: u64) -> Reply {
        self.client(id)?.sockets.get(&handle).ok_or(Error::InvalidCap)?;
        self.cue_cancel_socket(id, handle);
        let c = self.client(id)?;
        let s = c.sockets.remove(&handle).ok_or(Error::InvalidCap)?;
        c.watch.remove(&(SOCKET, handle));
        if matches!(s, Sock::Listen { .. }) {
            c.listeners.retain(|l| *l != handle);
        }
        self.release(id, s, false);
        ok(&[])
    }

    /// UDP_BIND: a UDP socket on `port` (0: an ephemeral one); its handle and port.
    pub fn udp_bind(&mut self, id: u64, port: u16) -> Reply {
        self.client(id)?;
        let port = if port == 0 { self.ephemeral() } else { port };
        if port == 0 || self.port_in_use(port) {
            return Err(Error::Exists);
        }
        let sh = add_udp(&mut self.sockets, &mut self.bufs, &mut self.buf_slots, port)?;
        match self.install(id, Sock::Udp { h: sh, port }, SOCK_BYTES) {
            Ok(h) => {
                self.owners.port(port, id, h);
                ok(&[h, port as u64])
            }
            Err(e) => {
                self.remove_sock(sh);
                Err(e)
            }
        }
    }

    /// SEND_TO: a datagram of `len` bytes at `off` in the client's area to `ip`:`port`.
    pub fn send_to(&mut self, id: u64, handle: u64, ip: u32, port: u16, off: u64, len: u64) -> Reply {
        let sh = self.udp_of(id, handle)?;
        if len > p::MAX_DATAGRAM {
            return Err(Error::TooLong);
        }
        if port == 0 || ip == 0 {
            return Err(Error::InvalidArg);
        }
        let data = Self::range(&self.clients[&id], off, len)?;
        let to = IpEndpoint::new(IpAddress::Ipv4(ipv4(ip)), port);
        match self.sockets.get_mut::<udp::Socket>(sh).send_slice(data, to) {
            Ok(()) => ok(&[]),
            Err(udp::SendError::BufferFull) => Err(Error::WouldBlock),
            Err(_) => Err(Error::InvalidArg),
        }
    }

    /// RECV_FROM: the next datagram to `off` in the client's area (cut to `max`): its length and sender.
    pub fn recv_from(&mut self, id: u64, handle: u64, off: u64, max: u64) -> Reply {
        let sh = self.udp_of(id, handle)?;
        let buf = Self::range(&self.clients[&id], off, max)?;
        match self.sockets.get_mut::<udp::Socket>(sh).recv() {
            Ok((data, meta)) => {
                let n = data.len().min(buf.len());
                buf[..n].copy_from_slice(&data[..n]);
                let IpAddress::Ipv4(a) = meta.endpoint.addr;
                ok(&[n as u64, ip_word(a), meta.endpoint.port as u64])
            }
            Err(_) => Err(Error::WouldBlock),
        }
    }

    /// STATE: socket `handle`'s state and its queues.
    pub fn state(&self, id: u64, handle: u64) -> Reply {
        let c = self.clients.get(&id).ok_or(Error::BadState)?;
        match c.sockets.get(&handle).ok_or(Error::InvalidCap)? {
            Sock::Tcp { h, .. } => {
                let t = self.sockets.get::<tcp::Socket>(*h);
                ok(&[tcp_state(t.state()), t.send_queue() as u64, t.recv_queue() as u64])
            }
            Sock::Listen { .. } => ok(&[p::state::LISTEN, 0, 0]),
            Sock::Udp { .. } => ok(&[p::state::UDP, 0, 0]),
        }
    }

    fn new_tcp(&mut self) -> Option<SocketHandle> {
        add_tcp(&mut self.sockets, &mut self.bufs, &mut self.buf_slots)
    }

    fn remove_sock(&mut self, h: SocketHandle) {
        remove_sock(&mut self.sockets, &mut self.bufs, &mut self.buf_slots, h);
    }

    fn port_in_use(&self, port: u16) -> bool {
        self.clients.values().flat_map(|c| c.sockets.values()).any(|s| match s {
            Sock::Listen { port: q, .. } | Sock::Udp { port: q, .. } => *q == port,
            Sock::Tcp { .. } => false,
        }) || self.sockets.iter().any(|(_, s)| match s {
            smoltcp::socket::Socket::Tcp(t) => t.local_endpoint().is_some_and(|e| e.port == port),
            _ => false,
        })
    }

    fn ephemeral(&mut self) -> u16 {
        for _ in 0..16384 {
            let p = self.next_port;
            self.next_port = if p == u16::MAX { 49152 } else { p + 1 };
            if !self.port_in_use(p) {
                return p;
            }
        }
        0
    }

    /// Let go of a socket of client `id` (its buffers stay charged to it until they are
    /// freed): connections finish sending (or are reset with `abort`), the rest goes at
    /// once.
    pub fn release(&mut self, id: u64, s: Sock, abort: bool) {
        match s {
            Sock::Tcp { h, bytes } => {
                self.owners.forget(h);
                let t = self.sockets.get_mut::<tcp::Socket>(h);
                if abort {
                    t.abort();
                } else {
                    t.close();
                }
                self.orphans.push(Orphan { h, until: now() + LINGER, client: id, bytes });
            }
            Sock::Listen { pool, port, .. } => {
                self.owners.forget_port(port);
                for h in pool {
                    self.sockets.get_mut::<tcp::Socket>(h).abort();
                    self.orphans.push(Orphan { h, until: now(), client: id, bytes: SOCK_BYTES });
                }
            }
            Sock::Udp { h, port } => {
                self.owners.forget_port(port);
                self.remove_sock(h);
                if let Some(c) = self.clients.get_mut(&id) {
                    c.bytes = c.bytes.saturating_sub(SOCK_BYTES);
                }
            }
        }
    }

    pub fn tcp_of(&mut self, id: u64, handle: u64) -> Result<SocketHandle, Error> {
        match self.client(id)?.sockets.get(&handle) {
            Some(Sock::Tcp { h, .. }) => Ok(*h),
            Some(_) => Err(Error::WrongType),
            None => Err(Error::InvalidCap),
        }
    }

    fn udp_of(&mut self, id: u64, handle: u64) -> Result<SocketHandle, Error> {
        match self.client(id)?.sockets.get(&handle) {
            Some(Sock::Udp { h, .. }) => Ok(*h),
            Some(_) => Err(Error::WrongType),
            None => Err(Error::InvalidCap),
        }
    }
}
