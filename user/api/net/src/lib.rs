//! The `net` server's protocol: TCP and UDP sockets for programs.
//!
//! Each client program first `ATTACH`es: the server maps it a shared area of
//! `AREA_BYTES`; every byte a socket sends or receives moves through it (the request
//! names an offset and a length in the area), never through message registers. Sockets
//! are handles in the client's own table inside the server — a handle means nothing to
//! another client — and die with the client (root's `GONE`).
//!
//! Calls do not block: one with nothing to do answers `WouldBlock`, and `WAIT` sleeps
//! in the server until one of up to `MAX_WAIT` sockets is ready (or a timeout). A
//! server of many connections waits in epoll's shape instead: it says once what it
//! waits for on each socket (`WATCH`: add, change, remove; the set lives in net), and
//! `WAIT_READY` gives it only the sockets that are ready, as (token, events) pairs in
//! the shared area — net marks a socket when a frame, a request or a timer touches it,
//! and a wait looks only at those, so its cost is the ready, not the watched
//! (level-triggered: a socket given stays given while its events hold). The client
//! stubs in [`client`] build blocking calls from them.
//!
//! Limits: a client's sockets and their buffers are charged to it, within a budget
//! derived from net's memory (docs/network.md, "Connections and memory"); past it a
//! listener's new connections wait in the backlog (their SYNs are not answered, and the
//! peer sends them again) instead of being accepted and left silent.
//!
//! Cue (`CUE`): a program has the server send a file's bytes — or a range of a BAIO
//! segment — to one of its TCP sockets without reading them itself. It hands over a
//! read-only capability to the blocks (`files_api::TICKET`, or its own
//! `blk_api::client::Segment::delegate`); the server maps their area, reads ahead
//! into it with batched BAIO reads and sends from there. A schedule (k, t) paces each
//! transfer: k blocks, then t ms of rest; transfers take turns by slice.
//!
//! Replies carry MR1 = 0 or an error: `InvalidCap` (unknown handle), `InvalidArg` (a
//! range outside the area, a bad port or address), `WrongType` (a TCP call on a UDP
//! socket or the reverse), `NoSpace` (the client's socket or buffer limit), `Exists`
//! (port in use), `WouldBlock`, `Reset` (connection refused, reset or closed),
//! `BadState` (not attached; sending after `SHUTDOWN`), `Timeout` (`PING`).
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use abi::Error;

/// The parts of `PROFILE`'s answer.
pub const PROFILE_PARTS: [&str; 6] = ["requests", "device", "stack", "checksums", "cue", "after"];

/// Cue flags: read through the shared cache (else straight from the disk); end the
/// socket's sending (FIN) once every byte is taken.
pub const CUE_BUFFERED: u64 = 1;
pub const CUE_SHUTDOWN: u64 = 2;
/// Cue flag: the bytes sent also go through the caller's stream graft loaded into net
/// (`graft_api`, point `stream`; VINO §3.2), in order, and the stream is ended with the
/// transfer (its result — an MD5 digest — stays in the graft's state for
/// `graft_api::read_state`). A transfer whose graft was missing or aborted ends with
/// `CUE_STREAM_ABORTED` beside its status.
pub const CUE_STREAM: u64 = 4;
pub const CUE_STREAM_ABORTED: u64 = 1 << 62;
/// Cue status words.
pub const CUE_RUNNING: u64 = 0;
pub const CUE_DONE: u64 = 1;
pub const CUE_CANCELLED: u64 = 2;
pub const CUE_FAILED: u64 = 1 << 63;
pub const NO_STATUS: u64 = u64::MAX;
/// Transfers net runs at once (each maps up to 1 MiB of its view's area: a window of
/// `blk_api::AREA_BYTES` of net's address space and net's kernel memory for the pages).
pub const MAX_TRANSFERS: usize = 32;
/// Transfers one program may have running at once.
pub const MAX_TRANSFERS_PER_CLIENT: usize = 4;
/// Transfers the programs of one principal may have running at once: a share such that
/// eight principals (blk's `EXPECTED_PRINCIPALS`) can hold theirs together, so no
/// principal's programs can make net refuse another principal's.
pub const MAX_TRANSFERS_PER_PRINCIPAL: usize = MAX_TRANSFERS / 8;
pub const MAX_K: u64 = 1 << 20;
pub const MAX_T_MS: u64 = 60_000;

/// `WAIT` interests. `ENDED`: the entry's handle is a transfer id; ready once the
/// transfer has ended.
pub const READABLE: u64 = 1;
pub const WRITABLE: u64 = 2;
pub const ENDED: u64 = 4;

pub const AREA_LOG2: u64 = 6;
pub const AREA_BYTES: u64 = 4096 << AREA_LOG2;
pub const MAX_WAIT: usize = 48;
/// The most (token, events) pairs one `WAIT_READY` gives (64 KiB of the area).
pub const MAX_EVENTS: u64 = 4096;
/// A client's `WATCH` entries: at most its sockets (`LIMITS`: its budget over a
/// connection's buffers) twice over and this many more (its transfers).
pub const WATCH_SLACK: usize = 64;
/// A backlog is listening sockets kept ready, each charged as a connection: the
/// client's budget bounds it (QEMU's user network loses what a host client wrote
/// before the guest answered its SYN, so a burst of connections wants them ready).
pub const MAX_BACKLOG: u64 = 4096;
pub const MAX_DATAGRAM: u64 = 1472;

/// TCP states as `STATE` reports them.
pub mod state {
    pub const CLOSED: u64 = 0;
    pub const LISTEN: u64 = 1;
    pub const SYN_SENT: u64 = 2;
    pub const SYN_RECEIVED: u64 = 3;
    pub const ESTABLISHED: u64 = 4;
    pub const FIN_WAIT_1: u64 = 5;
    pub const FIN_WAIT_2: u64 = 6;
    pub const CLOSE_WAIT: u64 = 7;
    pub const CLOSING: u64 = 8;
    pub const LAST_ACK: u64 = 9;
    pub const TIME_WAIT: u64 = 10;
    pub const UDP: u64 = 11;
    pub const NAMES: [&str; 12] = [
        "closed",
        "listen",
        "syn-sent",
        "syn-received",
        "established",
        "fin-wait-1",
        "fin-wait-2",
        "close-wait",
        "closing",
        "last-ack",
        "time-wait",
        "udp",
    ];
}

/// a.b.c.d as one word.
pub const fn ipv4(a: u8, b: u8, c: u8, d: u8) -> u64 {
    ((a as u64) << 24) | ((b as u64) << 16) | ((c as u64) << 8) | d as u64
}

/// Print an address word as a.b.c.d.
pub struct Ip(pub u64);

impl core::fmt::Display for Ip {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let a = self.0 as u32;
        write!(f, "{}.{}.{}.{}", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255)
    }
}

/// Print a MAC address word (as `INFO` gives it) as aa:bb:cc:dd:ee:ff.
pub struct Mac(pub u64);

impl core::fmt::Display for Mac {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for k in 0..6 {
            write!(f, "{}{:02x}", if k == 0 { "" } else { ":" }, (self.0 >> (40 - 8 * k)) & 0xff)?;
        }
        Ok(())
    }
}

/// Parse a.b.c.d.
pub fn parse_ip(s: &str) -> Option<u64> {
    let mut out = 0u64;
    let mut n = 0;
    for part in s.split('.') {
        let v: u8 = part.parse().ok()?;
        out = (out << 8) | v as u64;
        n += 1;
    }
    (n == 4).then_some(out)
}

/// A schedule is valid: k in 1..=MAX_K, t ≤ MAX_T_MS.
pub fn schedule_ok(k: u64, t_ms: u64) -> bool {
    (1..=MAX_K).contains(&k) && t_ms <= MAX_T_MS
}

fn port_of(w: u64) -> Result<u16, Error> {
    u16::try_from(w).map_err(|_| Error::InvalidArg)
}

fn addr(w: u64) -> Result<u32, Error> {
    u32::try_from(w).map_err(|_| Error::InvalidArg)
}

rt::protocol! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Request<'a> in rt::labels::NET;
    client client via counted {
    use super::*;
    use rt::ipc::Msg;

    /// Ticks this program spent in calls to net so far (the server's work and the IPC
    /// both ways; a sleeping `WAIT`'s sleep too): a program that counts its own busy time
    /// takes them out (httpd's `/.busy`, docs/net-breakdown.md).
    static CALL_TICKS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

    /// `rt::server::request`, its ticks added to `CALL_TICKS`.
    fn counted(srv: u64, m: &mut Msg) -> Result<(), Error> {
        let t = rt::sys::rdtsc();
        let r = rt::server::request(srv, m);
        CALL_TICKS.fetch_add(rt::sys::rdtsc().wrapping_sub(t), core::sync::atomic::Ordering::Relaxed);
        r
    }

    /// Ticks spent in calls to net so far (see `CALL_TICKS`).
    pub fn call_ticks() -> u64 {
        CALL_TICKS.load(core::sync::atomic::Ordering::Relaxed)
    }

    /// What `INFO` says.
    #[derive(Debug, Clone, Copy, Default)]
    pub struct Info {
        pub ip: u64,
        pub prefix: u64,
        pub gateway: u64,
        pub mac: u64,
        pub link_up: bool,
        pub rx_packets: u64,
        pub rx_bytes: u64,
        pub tx_packets: u64,
        pub tx_bytes: u64,
        pub sockets: u64,
        /// 1 DHCP, 0 static, 2 none yet.
        pub how: u64,
    }

    /// A Cue schedule: k blocks per slice, then t ms of rest.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Schedule {
        pub k: u64,
        pub t_ms: u64,
    }

    impl Schedule {
        /// As fast as the connection takes it.
        pub const FAST: Schedule = Schedule { k: MAX_K, t_ms: 0 };
    }

    /// What `CUE_STATE` says.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct CueState {
        pub status: u64,
        pub sent: u64,
        pub total: u64,
        pub schedule: Schedule,
        pub elapsed_us: u64,
    }

    impl CueState {
        pub fn ended(&self) -> bool {
            self.status != CUE_RUNNING
        }

        /// Ok once done; the error it failed with; `Timeout` if cancelled.
        pub fn result(&self) -> Result<(), Error> {
            match self.status {
                CUE_DONE => Ok(()),
                CUE_CANCELLED => Err(Error::Timeout),
                s if s & CUE_FAILED != 0 => Err(abi::check(s & !CUE_FAILED).err().unwrap_or(Error::BadState)),
                _ => Err(Error::WouldBlock),
            }
        }
    }

    /// Have `net` send open file `fh` of the files server `files` to TCP socket `h`
    /// (all of it, with `sched` and `flags`): the program gets a ticket for the file
    /// and grants it to `net`; not a byte of the file passes through the program.
    /// Returns (transfer id, bytes it sends).
    pub fn cue_file(
        net: &Net,
        files: u64,
        fh: u64,
        h: u64,
        sched: Schedule,
        flags: u64,
        status_off: u64,
    ) -> Result<(u64, u64), Error> {
        let slot = rt::alloc_slot();
        let r = files_api::client::ticket(files, fh, slot)
            .and_then(|(size, _)| net.cue(slot, h, 0, 0, size, sched, flags, status_off).map(|id| (id, size)));
        // Granted to net (or refused): nothing stays in our slot.
        rt::free_slot(slot);
        r
    }

    /// A program's connection to the net server and its shared area.
    pub struct Net {
        pub srv: u64,
        pub area: rt::shared::Area,
    }

    /// The shared area the server has just mapped at `va` (the one unsafe block here).
    #[allow(unsafe_code)]
    fn mapped_area(va: u64) -> rt::shared::Area {
        // SAFETY: the server mapped `AREA_BYTES` of its memory read-write at `va` by the
        // ATTACH reply's map item (the window was exactly that range); it stays mapped
        // while this program lives; nothing Rust-owned lives there.
        unsafe { rt::shared::Area::new(va, AREA_BYTES) }
    }

    impl Net {
        /// Attach to the server in slot `srv` (its area lands at `rt::layout::NET_AREA`).
        pub fn attach(srv: u64) -> Result<Net, Error> {
            let va = rt::layout::NET_AREA;
            let mut m = Msg::new(ATTACH, &[]);
            rt::server::request_mapping(
                srv,
                [
                    abi::fpage::Fpage::mem(va, 12 + AREA_LOG2, abi::mem::RIGHTS_MASK),
                    abi::fpage::Fpage(0),
                    abi::fpage::Fpage(0),
                ],
                &mut m,
            )?;
            Ok(Net { srv, area: mapped_area(va) })
        }

        pub fn info(&self) -> Result<Info, Error> {
            let [ip, prefix, gateway, mac, link_up, rx_packets, rx_bytes, tx_packets, tx_bytes, sockets, how] =
                info(self.srv)?;
            Ok(Info {
                ip,
                prefix,
                gateway,
                mac,
                link_up: link_up != 0,
                rx_packets,
                rx_bytes,
                tx_packets,
                tx_bytes,
                sockets,
                how,
            })
        }

        pub fn listen(&self, port: u16, backlog: u64) -> Result<u64, Error> {
            Ok(listen(self.srv, port as u64, backlog)?[0])
        }

        /// (handle, peer address, peer port), or `WouldBlock`.
        pub fn try_accept(&self, l: u64) -> Result<(u64, u64, u16), Error> {
            let [h, peer, peer_port] = accept(self.srv, l)?;
            Ok((h, peer, peer_port as u16))
        }

        /// Wait for a connection.
        pub fn accept(&self, l: u64) -> Result<(u64, u64, u16), Error> {
            loop {
                match self.try_accept(l) {
                    Err(Error::WouldBlock) => {
                        self.wait(&[(l, READABLE)], u64::MAX)?;
                    }
                    r => return r,
                }
            }
        }

        /// Start a connection; `connect` waits until it is up.
        pub fn connect_start(&self, ip: u64, port: u16) -> Result<u64, Error> {
            Ok(connect(self.srv, ip, port as u64)?[0])
        }

        pub fn connect(&self, ip: u64, port: u16, timeout_us: u64) -> Result<u64, Error> {
            let h = self.connect_start(ip, port)?;
            loop {
                let st = self.state(h)?.0;
                if st == state::ESTABLISHED || st == state::CLOSE_WAIT {
                    return Ok(h);
                }
                if st != state::SYN_SENT && st != state::SYN_RECEIVED {
                    let _ = self.close(h);
                    return Err(Error::Reset);
                }
                if self.wait(&[(h, READABLE | WRITABLE)], timeout_us)? == 0 {
                    let _ = self.close(h);
                    return Err(Error::Timeout);
                }
            }
        }

        /// (state, bytes waiting to go out, bytes received not yet taken)
        pub fn state(&self, h: u64) -> Result<(u64, u64, u64), Error> {
            let [st, unsent, unread] = state(self.srv, h)?;
            Ok((st, unsent, unread))
        }

        /// Send the area's bytes `off .. off + len`: bytes taken, or `WouldBlock`.
        pub fn send_area(&self, h: u64, off: u64, len: u64) -> Result<u64, Error> {
            Ok(send(self.srv, h, off, len)?[0])
        }

        /// Receive into the area at `off`: bytes placed (0: end of stream), or `WouldBlock`.
        pub fn recv_area(&self, h: u64, off: u64, max: u64) -> Result<u64, Error> {
            Ok(recv(self.srv, h, off, max)?[0])
        }

        /// Send all of `data` (copied into the area, then taken by the server), waiting
        /// for room as needed.
        pub fn send_all(&self, h: u64, data: &[u8]) -> Result<(), Error> {
            for chunk in data.chunks(AREA_BYTES as usize) {
                self.area.bytes(0, chunk.len() as u64).copy_from_slice(chunk);
                self.send_area_all(h, 0, chunk.len() as u64)?;
            }
            Ok(())
        }

        /// Send all of the area's `off .. off + len`, waiting for room as needed.
        pub fn send_area_all(&self, h: u64, off: u64, len: u64) -> Result<(), Error> {
            let mut done = 0;
            while done < len {
                match self.send_area(h, off + done, len - done) {
                    Ok(n) => done += n,
                    Err(Error::WouldBlock) => {
                        self.wait(&[(h, WRITABLE)], u64::MAX)?;
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }

        /// Receive up to `buf.len()` bytes, waiting until some come: bytes (0: end of
        /// stream).
        pub fn recv(&self, h: u64, buf: &mut [u8]) -> Result<usize, Error> {
            let max = (buf.len() as u64).min(AREA_BYTES);
            loop {
                match self.recv_area(h, 0, max) {
                    Ok(n) => {
                        buf[..n as usize].copy_from_slice(self.area.bytes(0, n));
                        return Ok(n as usize);
                    }
                    Err(Error::WouldBlock) => {
                        self.wait(&[(h, READABLE)], u64::MAX)?;
                    }
                    Err(e) => return Err(e),
                }
            }
        }

        pub fn shutdown(&self, h: u64) -> Result<(), Error> {
            shutdown(self.srv, h)
        }

        pub fn close(&self, h: u64) -> Result<(), Error> {
            close(self.srv, h)
        }

        /// (handle, port)
        pub fn udp_bind(&self, port: u16) -> Result<(u64, u16), Error> {
            let [h, port] = udp_bind(self.srv, port as u64)?;
            Ok((h, port as u16))
        }

        pub fn send_to(&self, h: u64, ip: u64, port: u16, data: &[u8]) -> Result<(), Error> {
            if data.len() as u64 > MAX_DATAGRAM {
                return Err(Error::TooLong);
            }
            self.area.bytes(0, data.len() as u64).copy_from_slice(data);
            send_to(self.srv, h, ip, port as u64, 0, data.len() as u64)
        }

        /// (length, sender address, sender port), or `WouldBlock`.
        pub fn try_recv_from(&self, h: u64, buf: &mut [u8]) -> Result<(usize, u64, u16), Error> {
            let max = (buf.len() as u64).min(AREA_BYTES);
            let [n, from, from_port] = recv_from(self.srv, h, 0, max)?;
            let n = n.min(max);
            buf[..n as usize].copy_from_slice(self.area.bytes(0, n));
            Ok((n as usize, from, from_port as u16))
        }

        /// Sleep until one of `entries` (handle, interest) is ready or `timeout_us` passes:
        /// the bitmap of ready entries (0: time ran out).
        pub fn wait(&self, entries: &[(u64, u64)], timeout_us: u64) -> Result<u64, Error> {
            if entries.len() > MAX_WAIT {
                return Err(Error::TooLong);
            }
            let mut w = [0u64; MAX_WAIT];
            for (i, (h, interest)) in entries.iter().enumerate() {
                w[i] = h | interest << 32;
            }
            Ok(wait(self.srv, timeout_us, &w[..entries.len()])?[0])
        }

        /// Watch `events` (`READABLE | WRITABLE`, or `ENDED` of a transfer id) of `h`,
        /// given back by `wait_ready` with `token`; events 0 stops watching it.
        pub fn watch(&self, h: u64, events: u64, token: u64) -> Result<(), Error> {
            watch(self.srv, h, events, token)
        }

        /// Sleep until a watched socket or transfer is ready or `timeout_us` passes;
        /// `ready` gets up to `max` (token, events) pairs, through the area at `at`
        /// (8-byte aligned, `16 * max` bytes). Returns how many (0: the time ran out).
        pub fn wait_ready(
            &self,
            at: u64,
            max: u64,
            timeout_us: u64,
            ready: &mut alloc::vec::Vec<(u64, u64)>,
        ) -> Result<usize, Error> {
            ready.clear();
            let [n] = wait_ready(self.srv, timeout_us, at, max)?;
            let n = n.min(max);
            ready.extend((0..n).map(|i| (self.area.read(at + 16 * i), self.area.read(at + 16 * i + 8))));
            Ok(n as usize)
        }

        /// (socket memory net may hold in all, held now, the caller's budget, held by
        /// the caller, one TCP connection's buffers, SYNs held back so far, frames
        /// mapped for socket buffers)
        /// Net's busy ticks by part (`PROFILE`), in `PROFILE_PARTS` order.
        pub fn profile(&self) -> Result<[u64; 6], Error> {
            profile(self.srv)
        }

        pub fn limits(&self) -> Result<[u64; 7], Error> {
            limits(self.srv)
        }

        /// Start a Cue transfer (see `CUE`) of the blocks in capability slot `ticket`
        /// (granted to the server: the slot is empty afterwards): bytes `first ..
        /// first + len` (len 0: to `size`) to TCP socket `h`. Returns the transfer id.
        #[allow(clippy::too_many_arguments)]
        pub fn cue(
            &self,
            ticket: u64,
            h: u64,
            first: u64,
            len: u64,
            size: u64,
            sched: Schedule,
            flags: u64,
            status_off: u64,
        ) -> Result<u64, Error> {
            let item = [(abi::fpage::Fpage::caps(ticket, 0, abi::rights::SEND), abi::fpage::GRANT)];
            Ok(cue(self.srv, h, first, len, sched.k, sched.t_ms, flags, size, status_off, &item)?[0])
        }

        pub fn cue_state(&self, id: u64) -> Result<CueState, Error> {
            let [status, sent, total, k, t_ms, elapsed_us] = cue_state(self.srv, id)?;
            Ok(CueState { status, sent, total, schedule: Schedule { k, t_ms }, elapsed_us })
        }

        /// Sleep until transfer `id` ends (or `timeout_us` passes: `Timeout`); its final
        /// state (it is forgotten).
        pub fn cue_wait(&self, id: u64, timeout_us: u64) -> Result<CueState, Error> {
            if self.wait(&[(id, ENDED)], timeout_us)? == 0 {
                return Err(Error::Timeout);
            }
            self.cue_state(id)
        }

        pub fn cue_set(&self, id: u64, sched: Schedule) -> Result<(), Error> {
            cue_set(self.srv, id, sched.k, sched.t_ms)
        }

        pub fn cue_cancel(&self, id: u64) -> Result<(), Error> {
            cue_cancel(self.srv, id)
        }

        /// Every running transfer, one line each (see `CUE_LIST`).
        pub fn cue_list(&self) -> Result<alloc::string::String, Error> {
            let mut buf = alloc::vec![0u8; 4096];
            rt::ipc::set_recv_buffer(&mut buf);
            let m = cue_list(self.srv)?;
            let n = if m.tag().has_string() { rt::ipc::received_string_len().min(buf.len()) } else { 0 };
            Ok(alloc::string::String::from_utf8_lossy(&buf[..n]).into_owned())
        }

        /// Round trip of an ICMP echo to `ip`, in µs.
        pub fn ping(&self, ip: u64, timeout_us: u64) -> Result<u64, Error> {
            Ok(ping(self.srv, ip, timeout_us)?[0])
        }
    }
    };
    requests {
        /// Map the client's shared area (one memory item; the client opens a window of
        /// `AREA_LOG2` pages at `rt::layout::NET_AREA`). Reply MR2 = its size in bytes. Again:
        /// the same area once more.
        ATTACH = 0xc0, fn attach() => Attach;
        /// MR1 = port, MR2 = backlog (1..=`MAX_BACKLOG`). Reply MR2 = handle.
        LISTEN = 0xc1, fn listen(port, backlog) -> [handle]
            => Listen { port: u16, backlog: u64 } = Request::Listen { backlog: backlog_ok(backlog)?, port: port_of(port)? };
        /// MR1 = listening handle. Reply MR2 = new handle, MR3 = peer address, MR4 = peer port.
        ACCEPT = 0xc2, fn accept(handle) -> [handle, peer, peer_port] => Accept { handle: u64 };
        /// MR1 = IPv4 address (a.b.c.d as 0xaabbccdd), MR2 = port. Reply MR2 = handle; the
        /// connection is being made: `WAIT` for `WRITABLE` (up) or `READABLE` (refused: the next
        /// call answers `Reset`).
        CONNECT = 0xc3, fn connect(ip, port) -> [handle] => Connect { ip: u32, port: u16 } = Request::Connect { ip: addr(ip)?, port: port_of(port)? };
        /// MR1 = handle, MR2 = area offset, MR3 = length. Reply MR2 = bytes taken (≥ 1), or
        /// `WouldBlock` (send buffer full).
        SEND = 0xc4, fn send(handle, off, len) -> [taken] => Send { handle: u64, off: u64, len: u64 };
        /// MR1 = handle, MR2 = area offset, MR3 = most bytes. Reply MR2 = bytes placed there;
        /// 0 = the peer has closed (end of stream); `WouldBlock` (nothing yet).
        RECV = 0xc5, fn recv(handle, off, max) -> [placed] => Recv { handle: u64, off: u64, max: u64 };
        /// MR1 = handle: no more sending (the peer sees end of stream once all is sent).
        SHUTDOWN = 0xc6, fn shutdown(handle) -> [] => Shutdown { handle: u64 };
        /// MR1 = handle: close (bytes already taken are still sent) and forget it.
        CLOSE = 0xc7, fn close(handle) -> [] => Close { handle: u64 };
        /// MR1 = port (0: any free one). Reply MR2 = handle, MR3 = the port.
        UDP_BIND = 0xc8, fn udp_bind(port) -> [handle, port] => UdpBind { port: u16 } = Request::UdpBind { port: port_of(port)? };
        /// MR1 = handle, MR2 = address, MR3 = port, MR4 = area offset, MR5 = length (≤ `MAX_DATAGRAM`).
        SEND_TO = 0xc9, fn send_to(handle, ip, port, off, len) -> []
            => SendTo { handle: u64, ip: u32, port: u16, off: u64, len: u64 }
            = Request::SendTo { handle, ip: addr(ip)?, port: port_of(port)?, off, len };
        /// MR1 = handle, MR2 = area offset, MR3 = most bytes. Reply MR2 = length (a longer
        /// datagram is cut), MR3 = sender's address, MR4 = its port; `WouldBlock`.
        RECV_FROM = 0xca, fn recv_from(handle, off, max) -> [len, from, from_port] => RecvFrom { handle: u64, off: u64, max: u64 };
        /// MR1 = timeout in µs (0: just look; `u64::MAX`: none), MR2.. = up to `MAX_WAIT`
        /// entries `handle | interest << 32`. Reply MR2 = a bitmap: bit i set when entry i is
        /// ready (0: the time ran out). An unknown handle is `InvalidCap`.
        WAIT = 0xcb, fn wait(timeout_us; rest entries) -> [ready]
            => /// Timeout in µs and the raw entries.
            Wait { timeout_us: u64, entries: &'a [u64] } = Request::Wait { timeout_us, entries: wait_entries(entries)? };
        /// Reply MR2 = address, MR3 = prefix length, MR4 = gateway, MR5 = MAC address, MR6 =
        /// 1 link up / 0 down, MR7.. = packets in, bytes in, packets out, bytes out, sockets open
        /// (everybody's), MR12 = 1 address from DHCP / 0 static / 2 none yet.
        INFO = 0xcc, fn info() -> [ip, prefix, gateway, mac, link_up, rx_packets, rx_bytes, tx_packets, tx_bytes, sockets, how] => Info;
        /// MR1 = address, MR2 = timeout µs: an ICMP echo. Reply MR2 = round trip in µs;
        /// `Timeout`.
        PING = 0xcd, fn ping(ip, timeout_us) -> [rtt_us] => Ping { ip: u32, timeout_us: u64 } = Request::Ping { ip: addr(ip)?, timeout_us };
        /// MR1 = handle. Reply MR2 = TCP state (`state::*`), MR3 = bytes waiting to be sent,
        /// MR4 = bytes received and not yet taken.
        STATE = 0xce, fn state(handle) -> [state, unsent, unread] => State { handle: u64 };
        /// A capability item (the blocks: a delegated BAIO capability, granted or mapped), MR1 =
        /// TCP handle, MR2 = first byte, MR3 = bytes (0: to the end), MR4 = k (blocks per
        /// slice, 1..=`MAX_K`), MR5 = t (ms of rest after each slice, ≤ `MAX_T_MS`), MR6 =
        /// flags (`CUE_BUFFERED`, `CUE_SHUTDOWN`), MR7 = the data's size in bytes (a file's
        /// size; at most the capability's blocks × 4096), MR8 = offset in the shared area of two
        /// words the server keeps current, [status, bytes sent] (`NO_STATUS`: none). Reply
        /// MR2 = transfer id. The call returns at once; the transfer ends `CUE_DONE` once the
        /// peer has acknowledged every byte, or `CUE_FAILED | error`: `Reset` (the peer reset
        /// or closed), `InvalidCap` (the blocks were taken back: the file was removed),
        /// `BadState` (the device failed). `SEND` on the socket is `BadState` while a transfer
        /// runs on it; `CLOSE` cancels it and forgets it. Errors: `Malformed` (no capability), `InvalidCap`
        /// (unknown socket, or a capability that is not the block service's), `WrongType`,
        /// `InvalidArg` (a range past the size or the blocks, a bad schedule or status offset),
        /// `BadState` (a transfer runs on the socket), `NoSpace` (`MAX_TRANSFERS` run, or
        /// the caller's `MAX_TRANSFERS_PER_CLIENT`, or its principal's
        /// `MAX_TRANSFERS_PER_PRINCIPAL`).
        CUE = 0xcf, fn cue(handle, first, len, k, t_ms, flags, size, status_off; items ticket) -> [id]
            => Cue { handle: u64, first: u64, len: u64, k: u64, t_ms: u64, flags: u64, size: u64, status_off: u64 }
            = {
                cue_ok(ticket, k, t_ms, flags)?;
                Request::Cue { handle, first, len, k, t_ms, flags, size, status_off }
            };
        /// MR1 = transfer id. Reply MR2 = status, MR3 = bytes sent (taken by TCP), MR4 = bytes
        /// in all, MR5 = k, MR6 = t, MR7 = µs since it started (until it ended). A transfer that
        /// has ended is forgotten once this has reported it. `InvalidCap`: not the caller's.
        CUE_STATE = 0xd0, fn cue_state(id) -> [status, sent, total, k, t_ms, elapsed_us] => CueState { id: u64 };
        /// MR1 = transfer id, MR2 = k, MR3 = t: a new schedule, from the next slice on.
        CUE_SET = 0xd1, fn cue_set(id, k, t_ms) -> []
            => CueSet { id: u64, k: u64, t_ms: u64 } = {
                schedule_checked(k, t_ms)?;
                Request::CueSet { id, k, t_ms }
            };
        /// MR1 = transfer id: stop it (bytes already taken by TCP still go); it is forgotten.
        CUE_CANCEL = 0xd2, fn cue_cancel(id) -> [] => CueCancel { id: u64 };
        /// Reply string: every running transfer (everybody's), one line each:
        /// "id program socket sent total k t µs status".
        CUE_LIST = 0xd3, fn cue_list() => CueList;
        /// The readiness wait: MR1 = timeout in µs (as `WAIT`), MR2 = area offset (8-byte
        /// aligned), MR3 = the most pairs wanted (1..=`MAX_EVENTS`). Net writes (token, events)
        /// pairs there for the watched (`WATCH`) sockets and transfers ready now, looking only
        /// at those a frame, a request or a timer touched since (and those it gave last time:
        /// level-triggered), and answers MR2 = how many (0: the time ran out). A client sleeps
        /// in one WAIT_READY at a time (a second answers the first with 0).
        WAIT_READY = 0xd4, fn wait_ready(timeout_us, off, max) -> [ready]
            => WaitReady { timeout_us: u64, off: u64, max: u64 } = {
                wait_ready_ok(off, max)?;
                Request::WaitReady { timeout_us, off, max }
            };
        /// Reply MR2 = bytes of socket buffers net may hold in all (its share of memory), MR3 =
        /// bytes held now, MR4 = the caller's budget, MR5 = bytes it holds, MR6 = one TCP
        /// connection's buffers, MR7 = SYNs held back (new connections kept waiting in a full
        /// backlog) since net started, MR8 = bytes of frames net has mapped for socket buffers
        /// (taken as connections come, never up front: a listener holds none).
        LIMITS = 0xd5, fn limits() -> [all, held, budget, held_by_caller, connection, syns_held_back, frames] => Limits;
        /// Where net's busy time went since it started, in clock ticks (rdtsc: instructions
        /// under icount), one word each, MR2.. in `Phase` order: the clients' requests (but the
        /// stack's run after each), the device (taking received frames, giving buffers back),
        /// the TCP/IP stack (smoltcp's poll, the frames it sends included), the checksums of
        /// the frames sent (inside the stack's part), Cue's transfers, the work after each run
        /// (DHCP, pools, lingering sockets, pings, waking waiters). For the `net` benchmark's
        /// breakdown of a round trip.
        PROFILE = 0xd6, fn profile() -> [requests, device, stack, checksums, cue, after] => Profile;
        /// MR1 = handle (a socket's, or a transfer id with `ENDED`), MR2 = events (`READABLE |
        /// WRITABLE`, or `ENDED` alone; 0: stop watching), MR3 = a token the client chooses,
        /// given back by `WAIT_READY`. The entry stays in net until changed, removed, or its
        /// socket closed (its transfer forgotten). `InvalidCap`: unknown handle; `InvalidArg`:
        /// unknown events, or `ENDED` with others; `NoSpace`: past the client's entries
        /// (twice its sockets' limit and `WATCH_SLACK`).
        WATCH = 0xd7, fn watch(handle, events, token) -> []
            => Watch { handle: u64, events: u64, token: u64 } = {
                watch_ok(events)?;
                Request::Watch { handle, events, token }
            };
    }
    nested {
        /// The graft protocol (point `stream`, over Cue's bytes).
        Graft(graft_api::Request<'a>) if graft_api::is_graft_label,
    }
}

/// A listener's backlog: 1 ..= `MAX_BACKLOG`, else `InvalidArg`.
fn backlog_ok(b: u64) -> Result<u64, Error> {
    if b == 0 || b > MAX_BACKLOG {
        Err(Error::InvalidArg)
    } else {
        Ok(b)
    }
}

/// `WAIT`'s entries: at most `MAX_WAIT`, else `Malformed`.
fn wait_entries(e: &[u64]) -> Result<&[u64], Error> {
    if e.len() > MAX_WAIT {
        Err(Error::Malformed)
    } else {
        Ok(e)
    }
}

/// A valid schedule, else `InvalidArg`.
fn schedule_checked(k: u64, t_ms: u64) -> Result<(), Error> {
    if schedule_ok(k, t_ms) {
        Ok(())
    } else {
        Err(Error::InvalidArg)
    }
}

/// `CUE`: one capability item (else `Malformed`), a valid schedule and known flags
/// (else `InvalidArg`).
fn cue_ok(items: usize, k: u64, t_ms: u64, flags: u64) -> Result<(), Error> {
    if items != 1 {
        return Err(Error::Malformed);
    }
    if flags & !(CUE_BUFFERED | CUE_SHUTDOWN | CUE_STREAM) != 0 {
        return Err(Error::InvalidArg);
    }
    schedule_checked(k, t_ms)
}

/// `WAIT_READY`: 1 ..= `MAX_EVENTS` pairs at an 8-byte aligned offset, inside the area;
/// else `InvalidArg`.
fn wait_ready_ok(off: u64, max: u64) -> Result<(), Error> {
    if max == 0
        || max > MAX_EVENTS
        || !off.is_multiple_of(8)
        || off.checked_add(16 * max).is_none_or(|e| e > AREA_BYTES)
    {
        Err(Error::InvalidArg)
    } else {
        Ok(())
    }
}

/// `WATCH`'s events: `READABLE | WRITABLE`, or `ENDED` alone (0: remove); else `InvalidArg`.
fn watch_ok(events: u64) -> Result<(), Error> {
    if events & !(READABLE | WRITABLE | ENDED) != 0 || (events & ENDED != 0 && events != ENDED) {
        Err(Error::InvalidArg)
    } else {
        Ok(())
    }
}
