//! The interface: the stack's run over the device (`pump`), its address (DHCP or the
//! static one), the admission of new connections to listening ports ahead of the stack,
//! the upkeep of listeners' pools and closed connections after it, and the requests
//! that report on it (INFO, PROFILE).

use crate::clients::Client;
use crate::sockets::{add_tcp, connected, remove_sock, Sock, SOCK_BYTES};
use crate::{ip_word, mac_word, now, ok, Net, Reply};
use alloc::vec::Vec;
use net_api as p;
use rt::println;
use smoltcp::socket::{dhcpv4, tcp};
use smoltcp::time::Duration;
use smoltcp::wire::{IpAddress, IpCidr, Ipv4Address, Ipv4Cidr};

/// How long DHCP may take before a static address from the arguments is used.
pub const FALLBACK: Duration = Duration::from_secs(5);

/// An established connection parks after each run whatever it has queued or owes
/// (`park`: its own timer wakes it — a retransmission, or smoltcp's 10 ms delayed ACK
/// for what it received and has not answered yet). It used to stay awake while it owed
/// an acknowledgement, until it had sent or nothing had touched it for 20 ms: with a
/// thousand clients at once, every request not yet answered was walked by every run.
const PARK_IDLE_US: u64 = 0;
/// The awake connections are looked at this often (0: after every run).
const PARK_EVERY_US: u64 = 0;

/// Rounds of the stack a pump runs for Cue alone before it looks for requests again:
/// a fast transfer keeps finding room as ACKs come, and must not keep the server from
/// its clients (a new connection's answer waited for a whole other transfer).
const CUE_BURST: usize = 16;

/// (source address, source port, destination port) of `frame` if it is an IPv4 TCP
/// SYN without ACK: a new connection.
fn syn_of(frame: &[u8]) -> Option<(IpAddress, u16, u16)> {
    use smoltcp::wire::{EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, TcpPacket};
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    if ip.next_header() != IpProtocol::Tcp {
        return None;
    }
    let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
    (tcp.syn() && !tcp.ack()).then(|| (IpAddress::Ipv4(ip.src_addr()), tcp.src_port(), tcp.dst_port()))
}

/// (source address, source port, destination port) of `frame` if it is IPv4 TCP or
/// UDP: whose it is; and whether it is a TCP segment the receiver must acknowledge
/// (data, SYN or FIN).
fn flow_of(frame: &[u8]) -> Option<((u32, u16, u16), bool)> {
    use smoltcp::wire::{EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, TcpPacket, UdpPacket};
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    let src = u32::from(ip.src_addr());
    match ip.next_header() {
        IpProtocol::Tcp => TcpPacket::new_checked(ip.payload())
            .ok()
            .map(|t| ((src, t.src_port(), t.dst_port()), t.syn() || t.fin() || !t.payload().is_empty())),
        IpProtocol::Udp => {
            UdpPacket::new_checked(ip.payload()).ok().map(|u| ((src, u.src_port(), u.dst_port()), false))
        }
        _ => None,
    }
}

/// Does a socket hold the connection from `from`:`port` to local port `to` already?
fn holds(sockets: &sockpark::Sockets, (from, port, to): (IpAddress, u16, u16)) -> bool {
    sockets.iter().any(|(_, s)| match s {
        smoltcp::socket::Socket::Tcp(t) => {
            t.state() != tcp::State::Closed
                && t.remote_endpoint().is_some_and(|r| r.addr == from && r.port == port)
                && t.local_endpoint().is_some_and(|l| l.port == to)
        }
        _ => false,
    })
}

impl Net {
    /// INFO: the interface's address, gateway, MAC, counters, open sockets and how the
    /// address came.
    pub fn info(&mut self) -> Reply {
        let (ip, prefix) = self.iface.ipv4_addr().map_or((0, 0), |a| {
            let cidr = self.iface.ip_addrs().first().map(|IpCidr::Ipv4(c)| c.prefix_len());
            (ip_word(a), cidr.unwrap_or(0) as u64)
        });
        let mut gw = 0;
        self.iface.routes_mut().update(|r| {
            if let Some(d) = r.iter().find(|r| r.cidr.prefix_len() == 0) {
                let IpAddress::Ipv4(g) = d.via_router;
                gw = ip_word(g);
            }
        });
        let mac = mac_word(self.nic.mac());
        let c = self.nic.counters;
        let open = self.clients.values().map(|c| c.sockets.len() as u64).sum::<u64>();
        ok(&[
            ip,
            prefix,
            gw,
            mac,
            u64::from(self.nic.link_up()),
            c.rx_packets,
            c.rx_bytes,
            c.tx_packets,
            c.tx_bytes,
            open,
            self.how,
        ])
    }

    /// PROFILE: busy ticks by part (`net_api::PROFILE`).
    pub fn profile(&self) -> Reply {
        let [requests, device, stack, _, cue, after] = self.prof;
        let c = self.nic.counters;
        // The stack's run includes the checksums and the handing of frames to the
        // device: they are told apart.
        let stack = stack.saturating_sub(c.checksum_ticks + c.tx_device_ticks);
        ok(&[requests, device + c.tx_device_ticks, stack, c.checksum_ticks, cue, after])
    }

    /// Run the stack until it has nothing more to do now; then wake whoever can go on.
    pub fn pump(&mut self) {
        self.cue_busy = false;
        self.pump_owed = None;
        let t = rt::sys::now_us();
        self.sockets.touch_time(t);
        // Parked connections whose own timer is due run with this one.
        self.sockets.wake_due(t);
        for round in 0..256 {
            let t0 = rt::sys::rdtsc();
            self.nic.poll_rx();
            let t1 = rt::sys::rdtsc();
            if self.nic.has_rx() {
                self.admit_syns();
                self.mark_rx();
            }
            let t = now();
            let changed = self.iface.poll(t, &mut self.nic, self.sockets.set());
            let t2 = rt::sys::rdtsc();
            self.nic.refill();
            let t3 = rt::sys::rdtsc();
            let moved = self.cue_run();
            let t4 = rt::sys::rdtsc();
            self.prof[1] += t1.wrapping_sub(t0) + t3.wrapping_sub(t2);
            self.prof[2] += t2.wrapping_sub(t1);
            self.prof[4] += t4.wrapping_sub(t3);
            if !self.nic.has_rx() && changed == smoltcp::iface::PollResult::None {
                if !moved {
                    break;
                }
                if round >= CUE_BURST {
                    self.cue_busy = true;
                    break;
                }
            }
        }
        let t0 = rt::sys::rdtsc();
        self.dhcp_events();
        self.pools();
        self.reap();
        self.pings_in();
        self.park();
        self.poll_at = self.iface.poll_at(now(), self.sockets.set());
        if let Some(d) = self.sockets.next_due() {
            let d = smoltcp::time::Instant::from_micros(d as i64);
            self.poll_at = Some(self.poll_at.map_or(d, |p| p.min(d)));
        }
        self.wake();
        self.prof[5] += rt::sys::rdtsc().wrapping_sub(t0);
    }

    fn set_static(&mut self, a: Ipv4Cidr, gw: Option<Ipv4Address>) {
        self.iface.update_ip_addrs(|v| {
            v.clear();
            let _ = v.push(IpCidr::Ipv4(a));
        });
        if let Some(g) = gw {
            let _ = self.iface.routes_mut().add_default_ipv4_route(g);
        }
        self.how = 0;
    }

    fn dhcp_events(&mut self) {
        if let Some((a, gw, at)) = self.fallback {
            if self.how == 2 && now() >= at {
                self.set_static(a, gw);
                if self.dhcp.is_some() {
                    println!("net: no DHCP answer: address {} (static)", a);
                }
            }
        }
        let Some(h) = self.dhcp else { return };
        let event = self.sockets.get_mut::<dhcpv4::Socket>(h).poll();
        match event {
            Some(dhcpv4::Event::Configured(cfg)) => {
                let (addr, router) = (cfg.address, cfg.router);
                self.iface.update_ip_addrs(|a| {
                    a.clear();
                    let _ = a.push(IpCidr::Ipv4(addr));
                });
                if let Some(r) = router {
                    let _ = self.iface.routes_mut().add_default_ipv4_route(r);
                } else {
                    self.iface.routes_mut().remove_default_ipv4_route();
                }
                self.how = 1;
                println!(
                    "net: address {} from DHCP, gateway {}",
                    addr,
                    router
                        .map(ip_word)
                        .map(p::Ip)
                        .map_or(alloc::string::String::from("none"), |g| alloc::format!("{}", g))
                );
            }
            Some(dhcpv4::Event::Deconfigured) => {
                self.iface.update_ip_addrs(|a| a.clear());
                self.iface.routes_mut().remove_default_ipv4_route();
                if self.how == 1 {
                    println!("net: DHCP lease lost");
                }
                self.how = 2;
            }
            None => {}
        }
    }

    /// Give each new connection to a listening port a socket of its own, made now (a
    /// listener holds no buffers until a connection comes: its backlog is a bound, not
    /// memory set aside), charged to the listener's client; drop copies of a SYN whose
    /// connection a socket holds already; and hold back a SYN that finds its
    /// listener's backlog full or its client's budget spent (smoltcp would reset it:
    /// the peer sends it again, so the connection waits). Runs on each batch of
    /// received frames before the stack sees them.
    fn admit_syns(&mut self) {
        let mut held = self.held();
        let (sockets, clients, syn_held, budget, share) =
            (&mut self.sockets, &mut self.clients, &mut self.syn_held, self.budget, self.share);
        let (bufs, slots) = (&mut self.bufs, &mut self.buf_slots);
        // The listening ports and whose they are (few: a walk of the tables; the list
        // is kept between batches, so a batch allocates nothing here).
        let mut ports = core::mem::take(&mut self.syn_ports);
        ports.clear();
        for (id, c) in clients.iter().filter(|(_, c)| !c.listeners.is_empty()) {
            for h in &c.listeners {
                if let Some(Sock::Listen { port, .. }) = c.sockets.get(h) {
                    ports.push((*port, *id, *h));
                }
            }
        }
        if ports.is_empty() {
            self.syn_ports = ports;
            return;
        }
        // Connections whose SYN this batch gave a socket: a copy later in the batch
        // (the peer sent it again while the first waited here) must not get another,
        // or two sockets would hold one connection, and smoltcp would hand its
        // segments to whichever comes first in its table.
        let mut admitted: Vec<(IpAddress, u16, u16)> = Vec::new();
        self.nic.retain_rx(|f| {
            let Some(syn) = syn_of(f) else { return true };
            let Some(&(_, id, lh)) = ports.iter().find(|(p, _, _)| *p == syn.2) else { return true };
            if admitted.contains(&syn) || holds(sockets, syn) {
                return false;
            }
            let Some(c) = clients.get_mut(&id) else { return true };
            let Some(Sock::Listen { port, backlog, pool: listening }) = c.sockets.get_mut(&lh) else { return true };
            if listening.len() >= *backlog || c.bytes + SOCK_BYTES > budget || held + SOCK_BYTES > share {
                *syn_held += 1;
                return false;
            }
            let Some(h) = add_tcp(sockets, bufs, slots) else {
                *syn_held += 1;
                return false;
            };
            if sockets.get_mut::<tcp::Socket>(h).listen(*port).is_err() {
                remove_sock(sockets, bufs, slots, h);
                return false;
            }
            listening.push(h);
            c.bytes += SOCK_BYTES;
            held += SOCK_BYTES;
            admitted.push(syn);
            true
        });
        self.syn_ports = ports;
    }

    /// Mark, for the readiness wait, the socket each received frame is for (its
    /// connection's, else its port's listener or UDP socket): a lookup a frame, not a
    /// walk of the sockets.
    fn mark_rx(&mut self) {
        let (owners, clients, sockets) = (&self.owners, &mut self.clients, &mut self.sockets);
        self.nic.retain_rx(|f| {
            let Some((flow, owed)) = flow_of(f) else { return true };
            if let Some((id, h)) = owners.of(flow) {
                if let Some(c) = clients.get_mut(&id) {
                    c.watch.mark(&(crate::sockets::SOCKET, h));
                    // A parked connection goes back to the stack before it runs (else
                    // smoltcp, finding no socket, would reset the peer); one given
                    // something to acknowledge stays awake until it has sent since.
                    if let Some(Sock::Tcp { h: sh, .. }) = c.sockets.get(&h) {
                        sockets.wake(*sh);
                        if owed {
                            sockets.owe(*sh);
                        }
                    }
                }
            }
            true
        });
    }

    /// Park the connections that have nothing to do (established, nothing queued to
    /// send, so no timer runs) and that nothing touched for `PARK_IDLE_US`, outside the
    /// stack's runs (`sockpark`): a run walks every socket it is given. A frame for
    /// one wakes it (`mark_rx`, by its flow: only connections `owners` knows park),
    /// as does a request on it. A walk of the awake sockets every `PARK_EVERY_US`.
    fn park(&mut self) {
        let t = rt::sys::now_us();
        if t < self.park_at {
            return;
        }
        self.park_at = t + PARK_EVERY_US;
        let (owners, iface) = (&self.owners, &mut self.iface);
        // A connection with bytes in flight (or queued behind the peer's window) parks
        // too, with its own timer (retransmission, zero-window probe, a delayed ACK),
        // asked of smoltcp through a set holding it alone: it wakes when that is due
        // (`wake_due`, before each run), or at a frame or a request for it as before.
        self.sockets.park_timed(
            t,
            PARK_IDLE_US,
            |h, s| match s {
                smoltcp::socket::Socket::Tcp(s) => connected(s) && owners.has(h),
                _ => false,
            },
            |one| match iface.poll_at(now(), one) {
                None => Some(sockpark::NO_TIMER),
                Some(d) if d.total_micros() as u64 > t => Some(d.total_micros() as u64),
                Some(_) => None,
            },
        );
    }

    /// Drop the sockets of listeners' pools that hold no connection (still listening
    /// after the stack has seen their SYN — it was not taken — or whose handshake
    /// failed), and give their memory back.
    fn pools(&mut self) {
        let (sockets, clients, bufs, slots) =
            (&mut self.sockets, &mut self.clients, &mut self.bufs, &mut self.buf_slots);
        for c in clients.values_mut().filter(|c| !c.listeners.is_empty()) {
            let Client { sockets: table, bytes, listeners, .. } = c;
            for lh in listeners.iter() {
                let Some(Sock::Listen { pool, .. }) = table.get_mut(lh) else { continue };
                pool.retain(|h| {
                    let dead = matches!(
                        sockets.get::<tcp::Socket>(*h).state(),
                        tcp::State::Listen | tcp::State::Closed | tcp::State::TimeWait
                    );
                    if dead {
                        remove_sock(sockets, bufs, slots, *h);
                        *bytes -= SOCK_BYTES;
                    }
                    !dead
                });
            }
        }
    }

    /// Forget closed connections whose last bytes are out (or that lingered too long);
    /// reset one whose peer sends on after everything of ours was acknowledged (FIN-WAIT-2,
    /// bytes received that nobody will read, as Linux resets an orphan given data): a
    /// client cut off (a slowloris's 408) that writes on would otherwise keep its
    /// socket, its buffers charged to the server and a place in every run of the stack,
    /// for `LINGER`.
    fn reap(&mut self) {
        let t = now();
        let (sockets, clients, bufs, slots) =
            (&mut self.sockets, &mut self.clients, &mut self.bufs, &mut self.buf_slots);
        self.orphans.retain(|o| {
            let s = sockets.get_mut::<tcp::Socket>(o.h);
            if matches!(s.state(), tcp::State::Closed | tcp::State::TimeWait) {
                remove_sock(sockets, bufs, slots, o.h);
                if let Some(c) = clients.get_mut(&o.client) {
                    c.bytes = c.bytes.saturating_sub(o.bytes);
                }
                return false;
            }
            if t >= o.until || (s.state() == tcp::State::FinWait2 && s.recv_queue() > 0) {
                s.abort();
            }
            true
        });
    }
}
