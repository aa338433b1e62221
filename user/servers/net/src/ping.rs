//! Ping: ICMP echo requests sent for clients (PING), and their replies.

use crate::{ipv4, now, Net, Reply};
use abi::Error;
use alloc::vec;
use alloc::vec::Vec;
use rt::ipc::Msg;
use rt::server;
use smoltcp::socket::icmp;
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{Icmpv4Packet, Icmpv4Repr, IpAddress, Ipv4Address};

/// How long an echo request may wait for its neighbor's ARP answer.
pub const ARP_GIVE_UP: Duration = Duration::from_secs(3);
/// Bytes of one echo request in the ICMP socket's queue (`PING_DATA` and the header).
const ECHO_LEN: usize = 8 + PING_DATA.len();
const PING_DATA: &[u8] = b"scion ping";
/// The ICMP identifier of this server's pings.
const PING_IDENT: u16 = 0x5c10;

/// A PING waiting for its echo.
pub struct Ping {
    pub client: u64,
    pub slot: u64,
    pub seq: u16,
    ip: Ipv4Address,
    sent: Instant,
    pub deadline: Instant,
}

/// The socket PINGs go through.
pub fn icmp_socket() -> icmp::Socket<'static> {
    let mk = || icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 8], vec![0u8; 2048]);
    let mut s = icmp::Socket::new(mk(), mk());
    let _ = s.bind(icmp::Endpoint::Ident(PING_IDENT));
    s
}

impl Net {
    /// PING: send an echo request to `ip`; the client sleeps until its reply comes
    /// (or `timeout_us` passes).
    pub fn ping(&mut self, id: u64, ip: u32, timeout_us: u64) -> Reply {
        self.client(id)?;
        if ip == 0 {
            return Err(Error::InvalidArg);
        }
        let ip = ipv4(ip);
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        let repr = Icmpv4Repr::EchoRequest { ident: PING_IDENT, seq_no: seq, data: PING_DATA };
        let caps = self.iface_checksums();
        let s = self.sockets.get_mut::<icmp::Socket>(self.icmp);
        let buf = s.send(repr.buffer_len(), IpAddress::Ipv4(ip)).map_err(|_| Error::WouldBlock)?;
        repr.emit(&mut Icmpv4Packet::new_unchecked(buf), &caps);
        let slot = self.sleep(id)?;
        let t = now();
        self.pings.push(Ping {
            client: id,
            slot,
            seq,
            ip,
            sent: t,
            deadline: t + Duration::from_micros(timeout_us.min(60_000_000)),
        });
        Ok(None)
    }

    fn iface_checksums(&self) -> smoltcp::phy::ChecksumCapabilities {
        smoltcp::phy::ChecksumCapabilities::default()
    }

    /// Echo replies in, pings out of time.
    pub fn pings_in(&mut self) {
        let t = now();
        let caps = self.iface_checksums();
        let mut answered: Vec<(u16, Ipv4Address)> = Vec::new();
        let s = self.sockets.get_mut::<icmp::Socket>(self.icmp);
        while let Ok((payload, from)) = s.recv() {
            let IpAddress::Ipv4(from) = from;
            if let Ok(pkt) = Icmpv4Packet::new_checked(payload) {
                if let Ok(Icmpv4Repr::EchoReply { ident: PING_IDENT, seq_no, .. }) = Icmpv4Repr::parse(&pkt, &caps) {
                    answered.push((seq_no, from));
                }
            }
        }
        let mut i = 0;
        while i < self.pings.len() {
            let pg = &self.pings[i];
            let reply = if answered.contains(&(pg.seq, pg.ip)) {
                Some(server::ok_msg(&[(t - pg.sent).total_micros()]))
            } else if t >= pg.deadline {
                Some(Msg::new(0, &[Error::Timeout as u64]))
            } else {
                None
            };
            match reply {
                Some(m) => {
                    let pg = self.pings.swap_remove(i);
                    self.answer_sleeper(pg.client, pg.slot, &m);
                }
                None => i += 1,
            }
        }
        // An echo request that cannot leave (its neighbor never answers ARP) holds up
        // those queued behind it, and smoltcp asks for one neighbor a second, for the
        // first socket that wants one: left for its ping's deadline (up to a minute), it
        // kept every other socket from reaching a new neighbor (net_fuzz, seeds 470807
        // and 648028: a new connection timed out). So echoes that have not left after
        // `ARP_GIVE_UP` (or that no ping waits for) go with a fresh socket, and their
        // pings fail now, as an unanswered ARP fails on Linux after three tries.
        let queued = self.sockets.get::<icmp::Socket>(self.icmp).send_queue();
        if queued == 0 {
            self.icmp_stuck = None;
            return;
        }
        let since = *self.icmp_stuck.get_or_insert(t);
        if !self.pings.is_empty() && t < since + ARP_GIVE_UP {
            return;
        }
        // The queue holds the most recent echoes (it sends in order): `queued / ECHO_LEN`
        // of them (the ring's padding at its end is shorter than one).
        let stuck = (queued / ECHO_LEN) as u16;
        let next = self.next_seq;
        let mut i = 0;
        while i < self.pings.len() {
            let age = next.wrapping_sub(self.pings[i].seq);
            if age == 0 || age > stuck {
                i += 1;
                continue;
            }
            let pg = self.pings.swap_remove(i);
            self.answer_sleeper(pg.client, pg.slot, &Msg::new(0, &[Error::Timeout as u64]));
        }
        self.sockets.remove(self.icmp);
        self.icmp = self.sockets.add(icmp_socket());
        self.icmp_stuck = None;
    }
}
