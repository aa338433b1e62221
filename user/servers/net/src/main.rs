//! The network server: a user-level virtio-net driver (`nic`) under a real TCP/IP stack
//! (smoltcp: ARP, IPv4, ICMP, TCP, UDP, DHCP), and sockets for programs over IPC
//! (`net_api`). The device's interrupt arrives as IPC; the stack's timers (TCP
//! retransmission, DHCP) come from the receive timeout of the server loop
//! (`Server::next_tick_us`): nothing polls while the network is idle.
//!
//! Each client is a program (its id from the badge root minted). It attaches once and
//! gets a shared area; its sockets are entries in its own table here, their buffers
//! charged to it within a budget, closed (reset) when root says the program is gone.
//! How much socket memory there is comes from the machine's memory and net's kernel
//! memory (`share`: docs/network.md, "Connections and memory"): the number of
//! connections follows from it, not from a constant. The buffers are frames from
//! sigma0 (`bufs`), taken when a connection comes.
//!
//! Cue (`cue`): a client hands over a read-only BAIO capability to a file's blocks and
//! a socket; this server reads the blocks into an area mapped here and sends them,
//! transfers taking turns by slice (their (k, t) schedules), the client touching no
//! byte. The loop runs here, beside the TCP stack it feeds (docs/network.md, "Path of a Cue transfer").
//!
//! The requests are methods of `Net`, one each, in the module of their concern
//! (`clients`, `sockets`, `wait`, `ping`, `iface`, `cue`); `Net::request` only
//! dispatches. This file keeps the state, the server loop's callbacks and `main`.
//!
//! Arguments: `ip=A.B.C.D/N gw=A.B.C.D`: a static address, used when DHCP has given
//! none within `FALLBACK` (or at once with `dhcp=off`); `budget=KiB` for each
//! client's buffer memory (default `CLIENT_NUM / CLIENT_DEN` of the share).
#![no_std]
#![no_main]

extern crate alloc;

mod bufs;
mod clients;
mod cue;
mod iface;
mod nic;
mod ping;
mod sockets;
mod wait;

use abi::fpage::Fpage;
use abi::Error;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use clients::Client;
use cue::Transfer;
use iface::FALLBACK;
use net_api::{self as p, Request};
use nic::Nic;
use ping::{icmp_socket, Ping, ARP_GIVE_UP};
use rt::ipc::Msg;
use rt::server::{self, Answer, Badge, Server};
use rt::{env, pci, println};
use sigma0_api as s0;
use smoltcp::iface::{Config, Interface};
use smoltcp::socket::dhcpv4;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, Ipv4Address, Ipv4Cidr};
use sockets::{Orphan, NOBODY, SOCK_BYTES};
use sockpark::Handle as SocketHandle;
use wait::Waiter;

rt::entry!(main);

/// Badge of the device's interrupt line (the server mints it).
const IRQ_BADGE: u64 = 1 << 61;
/// The graft point net hosts (over the bytes of Cue transfers).
const STREAM_POINT: [graft::Point; 1] = [graft::Point::Stream];
/// Socket buffers may take a quarter of the machine's memory (`sigma0_api::STATS`), so
/// that a small machine's net does not promise memory that is not there ...
const RAM_DEN: usize = 4;
/// ... and what this share of net's free kernel memory can map (each page mapped
/// costs a mapping-database node, 85 to a quota page, `kcore::quota::Objects`, and a
/// page table per 512 pages: 72 pages a quota page, rounded down); the rest is for
/// the heap, the clients' areas and Cue's views.
const KERNEL_NUM: usize = 3;
const KERNEL_DEN: usize = 4;
const PAGES_PER_QUOTA_PAGE: usize = 72;
/// One client may hold this part of the share: the rest stays for the others (the
/// shell's fetch, ftpd beside a busy httpd).
const CLIENT_NUM: usize = 7;
const CLIENT_DEN: usize = 8;
/// How often a transfer waiting for the disk looks at its status words (the block
/// service does not call this server when a read completes).
const DISK_POLL_US: u64 = 500;
/// How long a request's changes may wait for the stack's run when no wait, frame or
/// other request comes (µs; see `handle`).
const PUMP_DEFER_US: u64 = 200;

/// A request's answer: a reply now, none yet (`Answer::Later`: the caller sleeps), or
/// an error.
type Reply = Result<Option<Msg>, Error>;

/// A reply of `words` now.
fn ok(words: &[u64]) -> Reply {
    Ok(Some(server::ok_msg(words)))
}

fn now() -> Instant {
    Instant::from_micros(rt::sys::now_us() as i64)
}

fn ip_word(a: Ipv4Address) -> u64 {
    u32::from(a) as u64
}

fn mac_word(m: [u8; 6]) -> u64 {
    m.iter().fold(0, |a, b| (a << 8) | *b as u64)
}

fn ipv4(w: u32) -> Ipv4Address {
    Ipv4Address::from(w)
}

struct Net {
    nic: Nic,
    iface: Interface,
    /// smoltcp's sockets, the idle connections parked outside the stack's runs
    /// (`sockpark`; `Net::park`).
    sockets: sockpark::Sockets,
    dhcp: Option<SocketHandle>,
    icmp: SocketHandle,
    /// 0 static, 1 DHCP, 2 none yet.
    how: u64,
    /// The static address (and gateway) to use if DHCP gives none by the time given.
    fallback: Option<(Ipv4Cidr, Option<Ipv4Address>, Instant)>,
    clients: BTreeMap<u64, Client>,
    /// The principal of the request being handled (a Cue transfer's stream graft is
    /// its client's).
    caller_principal: u32,
    /// Stream grafts over Cue's bytes (VINO §3.2), by principal.
    grafts: graft::Table,
    /// The last graft LIST reply (it must live until the kernel copies it).
    graft_text: String,
    waiters: Vec<Waiter>,
    pings: Vec<Ping>,
    /// Since when the ICMP socket's send queue has not emptied.
    icmp_stuck: Option<Instant>,
    next_seq: u16,
    /// Connections a client closed (or left behind when it died), still finishing.
    orphans: Vec<Orphan>,
    next_port: u16,
    /// Each client's budget of buffer memory, and the most sockets it may have.
    budget: usize,
    max_sockets: usize,
    /// Buffer memory all sockets together may hold (`1 / RAM_DEN` of the machine's,
    /// at most what `KERNEL_NUM / KERNEL_DEN` of net's kernel memory can map).
    share: usize,
    /// The sockets' buffers, and which slot each socket has.
    bufs: bufs::Pool,
    buf_slots: BTreeMap<SocketHandle, u32>,
    /// SYNs not answered because their listener's backlog was full (they wait: the
    /// peer sends them again).
    syn_held: u64,
    sigma0: u64,
    area_next: u64,
    spare_areas: Vec<rt::shared::Area>,
    irq: Option<u64>,
    /// Cue transfers: running ones, and ended ones until their client has seen the end.
    transfers: Vec<Transfer>,
    next_transfer: u64,
    /// Whose turn is first in the next round.
    rr: usize,
    /// Which of the `MAX_TRANSFERS` windows for the transfers' areas are in use.
    cue_windows: [bool; p::MAX_TRANSFERS],
    /// Our capability to the block service (to recognize clients' tickets by).
    blk: u64,
    /// Where a capability in a request lands (`Inbox`: an upcall graft's thread with a
    /// graft LOAD), and one that landed with a CUE.
    inbox: graft_api::upcall::Inbox,
    received: Option<u64>,
    /// The last CUE_LIST text (it must live until the kernel copies it).
    cue_text: String,
    /// The last pump stopped with transfers still moving: go on once requests are seen.
    cue_busy: bool,
    /// Busy ticks by part (`net_api::PROFILE`): requests, device, stack, (checksums:
    /// the device's counter), Cue, after each run.
    prof: [u64; 6],
    /// Whose a received frame is, to mark it for the readiness wait: (peer address,
    /// peer port, local port) of each connection a client holds, and (0, 0, port) of
    /// each listener and UDP socket → (client, handle); and each connection's key
    /// there, to forget it (`sockets::Owners`).
    owners: sockets::Owners,
    /// When idle connections are parked next (`Net::park`).
    park_at: u64,
    /// When the stack wants to run next, as the last run left it (`Interface::poll_at`
    /// walks every socket: once a run, not once a message).
    poll_at: Option<Instant>,
    /// A request changed what the stack sends since its last run (when): it runs at the
    /// client's next wait, a frame, or `PUMP_DEFER_US` later.
    pump_owed: Option<u64>,
    /// `admit_syns`'s list of listening ports, kept between batches.
    syn_ports: Vec<(u16, u64, u64)>,
    /// The last RECV took bytes from a nearly full receive buffer: the stack runs after
    /// it (a window update to send); else a RECV needs no run.
    window_tight: bool,
}

impl Net {
    /// One arm per request, each a method in the module of its concern.
    fn request(&mut self, id: u64, req: Request<'_>) -> Reply {
        match req {
            // Answered in `handle` before this.
            Request::Graft(_) => Err(Error::Unsupported),
            Request::Attach => self.attach(id),
            Request::Info => self.info(),
            Request::Listen { port, backlog } => self.listen(id, port, backlog),
            Request::Accept { handle } => self.accept(id, handle),
            Request::Connect { ip, port } => self.connect(id, ip, port),
            Request::Send { handle, off, len } => self.send(id, handle, off, len),
            Request::Recv { handle, off, max } => self.recv(id, handle, off, max),
            Request::Shutdown { handle } => self.shutdown(id, handle),
            Request::Close { handle } => self.close(id, handle),
            Request::UdpBind { port } => self.udp_bind(id, port),
            Request::SendTo { handle, ip, port, off, len } => self.send_to(id, handle, ip, port, off, len),
            Request::RecvFrom { handle, off, max } => self.recv_from(id, handle, off, max),
            Request::Wait { timeout_us, entries } => self.wait(id, timeout_us, entries),
            Request::WaitReady { timeout_us, off, max } => self.wait_ready(id, timeout_us, off, max),
            Request::Watch { handle, events, token } => self.watch(id, handle, events, token),
            Request::Profile => self.profile(),
            Request::Limits => self.limits(id),
            Request::Ping { ip, timeout_us } => self.ping(id, ip, timeout_us),
            Request::Cue { handle, first, len, k, t_ms, flags, size, status_off } => {
                self.cue(id, handle, first, len, k, t_ms, flags, size, status_off)
            }
            Request::CueState { id: tid } => self.cue_state(id, tid),
            Request::CueSet { id: tid, k, t_ms } => self.cue_set(id, tid, k, t_ms),
            Request::CueCancel { id: tid } => self.cue_cancel(id, tid),
            Request::CueList => self.cue_list(),
            Request::State { handle } => self.state(id, handle),
        }
    }
}

impl Server for Net {
    type Request<'a> = Request<'a>;

    fn event(&mut self, from: Badge, m: &Msg) -> Option<Answer> {
        // Only a CUE (its ticket: handle takes it) or a graft LOAD (an upcall's thread)
        // may bring a capability; any other is dropped.
        if let Some(got) = self.inbox.arrived(m) {
            if m.label() == p::CUE {
                if let Some(old) = self.received.replace(got) {
                    rt::free_slot(old);
                }
            } else {
                rt::free_slot(got);
            }
        }
        let v = from.minted_value()?;
        if v & IRQ_BADGE == 0 || m.label() != abi::ipc::label::IRQ {
            return None;
        }
        let t0 = rt::sys::rdtsc();
        self.nic.ack_interrupt();
        self.prof[1] += rt::sys::rdtsc().wrapping_sub(t0);
        self.pump();
        if let Some(s) = self.irq {
            let _ = rt::sys::irq_ack(s);
        }
        Some(Answer::Later)
    }

    fn gone(&mut self, client: Badge) {
        let id = client.program() as u64;
        self.grafts.forget(id);
        // Its transfers are cancelled and forgotten, their blocks given back.
        let mut i = 0;
        while i < self.transfers.len() {
            if self.transfers[i].client == id {
                self.cue_end(i, p::CUE_CANCELLED);
                self.transfers.remove(i);
            } else {
                i += 1;
            }
        }
        let Some(c) = self.clients.remove(&id) else { return };
        for (_, s) in c.sockets {
            self.release(NOBODY, s, true);
        }
        // A later client with the same id must not be charged for these.
        for o in self.orphans.iter_mut().filter(|o| o.client == id) {
            o.client = NOBODY;
        }
        let mine: Vec<u64> = self.waiters.iter().filter(|w| w.client == id).map(|w| w.slot).collect();
        self.waiters.retain(|w| w.client != id);
        let pings: Vec<u64> = self.pings.iter().filter(|p| p.client == id).map(|p| p.slot).collect();
        self.pings.retain(|p| p.client != id);
        for slot in mine.into_iter().chain(pings) {
            let _ = rt::sys::cap_delete(slot);
            rt::free_slot(slot);
        }
        // The client is gone with its mapping of the area; it is zeroed before reuse.
        self.spare_areas.push(c.area);
        self.pump();
    }

    fn handle(&mut self, from: Badge, req: Request<'_>) -> Answer {
        if from.minted_value().is_some() {
            return Answer::err(Error::InvalidCap);
        }
        let id = from.program() as u64;
        if let Request::Graft(g) = req {
            let (inbox, sigma0) = (&mut self.inbox, self.sigma0);
            let a = graft_api::serve(&mut self.grafts, from.principal(), id, g, &mut self.graft_text, &mut |f| {
                graft_host::engine(f, sigma0).or_else(|| inbox.engine(f))
            });
            self.inbox.done();
            return a;
        }
        self.caller_principal = from.principal();
        self.sockets.touch_time(rt::sys::now_us());
        let t0 = rt::sys::rdtsc();
        // Requests that change nothing the stack sends need no run of it after them
        // (a run walks every socket in smoltcp: not once per look).
        let quiet = matches!(
            req,
            Request::Wait { .. }
                | Request::WaitReady { .. }
                | Request::Watch { .. }
                | Request::State { .. }
                | Request::Limits
                | Request::Profile
                | Request::Info
                | Request::CueState { .. }
                | Request::CueList
                | Request::Recv { .. }
        );
        // A call that may sleep sees the stack run first: what earlier requests changed
        // has gone out, and what it waits for is as the run left it.
        if self.pump_owed.is_some() && matches!(req, Request::Wait { .. } | Request::WaitReady { .. }) {
            self.prof[0] += rt::sys::rdtsc().wrapping_sub(t0);
            self.pump();
        }
        let t0 = rt::sys::rdtsc();
        self.window_tight = false;
        let r = self.request(id, req);
        let quiet = quiet && !self.window_tight;
        if let Some(s) = self.received.take() {
            // A capability that came with a request that did not take it.
            rt::free_slot(s);
        }
        self.prof[0] += rt::sys::rdtsc().wrapping_sub(t0);
        // Whatever the request changed goes out with the next run of the stack (data,
        // FIN, SYN, window updates): at the client's next wait, a frame, or `PUMP_DEFER_US`
        // from now if no other request comes first — not after each request. A server
        // answering a hundred ready connections sends a hundred times between its waits,
        // and each run walks every connection awake in smoltcp's set (those given a
        // request and not yet answered, in a burst): one run for them all.
        if !quiet && self.pump_owed.is_none() {
            self.pump_owed = Some(rt::sys::now_us());
        }
        match r {
            Ok(Some(m)) => Answer::Reply(m),
            Ok(None) => Answer::Later,
            Err(e) => Answer::err(e),
        }
    }

    fn next_tick_us(&mut self) -> Option<u64> {
        self.next_due(true)
    }

    fn tick(&mut self) {
        // The time that came was the stack's (or Cue's, DHCP's, a lingering
        // connection's) unless a sleeping call's deadline is sooner than all of those.
        let (timed, all) = (self.next_due(false), self.next_due(true));
        if timed.is_some_and(|t| t == 0 || all.is_none_or(|a| t <= a)) {
            self.pump();
            self.mark_timed();
            self.wake();
        } else {
            // Only sleeping calls' deadlines: no run of the stack (it walks its sockets).
            self.wake();
        }
    }

    fn windows(&self) -> Option<[Fpage; 3]> {
        Some([Fpage(0), self.inbox.window(), Fpage(0)])
    }
}

impl Net {
    /// Microseconds until the server has timed work: the stack's, lingering
    /// connections', DHCP's, Cue's, and (`waiters`) sleeping calls' deadlines.
    fn next_due(&self, waiters: bool) -> Option<u64> {
        if self.cue_busy {
            // Transfers are moving: only look for requests (a receive that does not wait).
            return Some(0);
        }
        if let Some(at) = self.pump_owed {
            return Some((at + PUMP_DEFER_US).saturating_sub(rt::sys::now_us()));
        }
        let t = now();
        let mut next = self.poll_at.map(|d| if d > t { (d - t).total_micros() } else { 0 });
        let mut at = |d: Instant| {
            let us = if d > t { (d - t).total_micros() } else { 0 };
            next = Some(next.map_or(us, |n| n.min(us)));
        };
        for w in self.waiters.iter().filter(|_| waiters) {
            if let Some(d) = w.deadline {
                at(d);
            }
        }
        for pg in &self.pings {
            at(pg.deadline);
        }
        if let Some(since) = self.icmp_stuck {
            at(since + ARP_GIVE_UP);
        }
        for o in &self.orphans {
            at(o.until);
        }
        if let Some((_, _, when)) = self.fallback.filter(|_| self.how == 2) {
            at(when);
        }
        for t in self.transfers.iter().filter(|t| t.running()) {
            if t.rest_until > 0 {
                let now_us = rt::sys::now_us();
                let us = t.rest_until.saturating_sub(now_us);
                next = Some(next.map_or(us, |n| n.min(us)));
            }
            if t.waiting_disk {
                next = Some(next.map_or(DISK_POLL_US, |n| n.min(DISK_POLL_US)));
            }
        }
        if self.irq.is_none() {
            // No interrupt line: look at the device every millisecond.
            next = Some(next.map_or(1000, |n| n.min(1000)));
        }
        next
    }
}

/// MSI-X entry 0 for every cause of a controller held by capability.
fn attach_msix(dev: &rt::pci::DeviceCap, nic: &mut Nic) -> Option<(u8, u64)> {
    let (s, n) = dev.msix(0).ok()?;
    if rt::sys::irq_attach(s, Badge::minted(IRQ_BADGE | n).0).is_err() {
        rt::free_slot(s);
        return None;
    }
    nic.use_msix(0);
    Some((n as u8, s))
}

/// The device's interrupt line, if the manifest grants it.
fn attach_irq(dev: &rt::pci::Device) -> Option<(u8, u64)> {
    let line = rt::pci::interrupt_line(dev)?;
    let s = rt::alloc_slot();
    if env::irq(line as u64, s).is_err() || rt::sys::irq_attach(s, Badge::minted(IRQ_BADGE | line as u64).0).is_err() {
        rt::free_slot(s);
        return None;
    }
    Some((line, s))
}

/// `A.B.C.D/N`.
fn parse_cidr(s: &str) -> Option<Ipv4Cidr> {
    let (a, n) = s.split_once('/')?;
    let a = p::parse_ip(a)?;
    let n: u8 = n.parse().ok().filter(|n| *n <= 32)?;
    Some(Ipv4Cidr::new(ipv4(a as u32), n))
}

fn main() -> i32 {
    let (mut addr, mut gw, mut budget, mut dhcp_on) = (None, None, None, true);
    for w in rt::args().split(' ') {
        if let Some(v) = w.strip_prefix("ip=") {
            addr = parse_cidr(v);
            if addr.is_none() {
                println!("net: bad address {:?} (want A.B.C.D/N)", v);
                return 1;
            }
        } else if let Some(v) = w.strip_prefix("gw=") {
            gw = p::parse_ip(v).map(|g| ipv4(g as u32));
            if gw.is_none() {
                println!("net: bad gateway {:?} (want A.B.C.D)", v);
                return 1;
            }
        } else if let Some(v) = w.strip_prefix("budget=").and_then(|v| v.parse::<usize>().ok()) {
            budget = Some(v.saturating_mul(1024));
        } else if w == "dhcp=off" {
            dhcp_on = false;
        }
    }
    if !dhcp_on && addr.is_none() {
        println!("net: dhcp=off needs ip=A.B.C.D/N");
        return 1;
    }
    let (s0slot, blk) = (rt::alloc_slot(), rt::alloc_slot());
    // The device comes by capability (the manifest's `pci`); the configuration ports
    // only under an older manifest that still grants them.
    let _ = pci::init();
    if env::lookup("sigma0", s0slot).is_err() {
        println!("net: the manifest must grant sigma0");
        return 1;
    }
    // Socket memory: a quarter of the machine's, at most what net's kernel memory maps.
    let ram = s0::client::stats(s0slot).map_or(0, |[_, all, ..]| (all as usize).saturating_mul(4096));
    let (_, quota, kused) = rt::sys::task_info(abi::cap::SELF_TASK).unwrap_or((0, 0, 0));
    let mappable =
        (quota.saturating_sub(kused) as usize).saturating_mul(PAGES_PER_QUOTA_PAGE * 4096) / KERNEL_DEN * KERNEL_NUM;
    let share = if ram > 0 { mappable.min(ram / RAM_DEN) } else { mappable };
    let budget = budget.unwrap_or(share / CLIENT_DEN * CLIENT_NUM).min(share);
    let max_sockets = (budget / SOCK_BYTES).max(1);
    println!("net: socket memory {} MiB ({} MiB of RAM, kernel memory {} of {} pages used): {} connections, {} for one client", share >> 20, ram >> 20, kused, quota, share / SOCK_BYTES, budget / SOCK_BYTES);
    // The block service, to recognize Cue tickets by (`is_blk` looks again if it is
    // not there yet, or was started again).
    let _ = env::lookup("blk", blk);
    virtio_hal::init(s0slot);
    let (dev, nic, cap) = match nic::open().and_then(|(d, r, c)| Nic::new(r).map(|n| (d, n, c))) {
        Ok(x) => x,
        Err(why) => {
            println!("net: {}", why);
            server::refuse_all(Error::NotFound);
        }
    };
    let mut nic = nic;
    virtio_hal::say_ports("net", &dev);
    if virtio_hal::dma_confined() {
        println!("net: the IOMMU confines the controller's DMA to the memory net maps for it");
    }
    let irq = match cap.and_then(|c| attach_msix(&c, &mut nic)) {
        Some(x) => Some(x),
        None => attach_irq(&dev),
    };
    if irq.is_some() {
        nic.enable_interrupts();
    }
    if !nic.link_up() {
        // Not a failure: net serves, and frames wait for the link (said when it comes).
        println!("net: {}: no link yet (a cable out, or the peer off); waiting for it", nic.kind());
    }
    let mac = nic.mac();
    let mut config = Config::new(EthernetAddress(mac).into());
    config.random_seed = rt::sys::rdtsc();
    let iface = Interface::new(config, &mut nic, now());
    let mut sockets = sockpark::Sockets::new();
    let icmp = sockets.add(icmp_socket());
    let dhcp = dhcp_on.then(|| sockets.add(dhcpv4::Socket::new()));
    println!(
        "net: {} {}; {}; {}",
        nic.kind(),
        p::Mac(mac_word(mac)),
        match irq {
            Some((l, _)) if l as u64 >= abi::irq::MSI_FIRST => alloc::format!("MSI-X: interrupt {}", l),
            Some((l, _)) => alloc::format!("interrupts on line {}", l),
            None => alloc::string::String::from("no interrupt line: polling"),
        },
        match (dhcp_on, addr) {
            (false, Some(a)) => alloc::format!("address {} (static)", a),
            (true, Some(a)) => alloc::format!("asking DHCP for an address ({} if none comes)", a),
            _ => alloc::string::String::from("asking DHCP for an address"),
        }
    );
    let mut n = Net {
        nic,
        iface,
        sockets,
        dhcp,
        icmp,
        how: 2,
        fallback: addr.map(|a| (a, gw, if dhcp_on { now() + FALLBACK } else { now() })),
        clients: BTreeMap::new(),
        caller_principal: 0,
        grafts: graft::Table::new(&STREAM_POINT, graft_api::NET_IDS, graft_host::host()),
        graft_text: String::new(),
        waiters: Vec::new(),
        pings: Vec::new(),
        icmp_stuck: None,
        next_seq: 1,
        orphans: Vec::new(),
        next_port: 49152 + (rt::sys::rdtsc() % 8192) as u16,
        budget,
        max_sockets,
        share,
        bufs: bufs::Pool::new(s0slot),
        buf_slots: BTreeMap::new(),
        syn_held: 0,
        sigma0: s0slot,
        area_next: rt::layout::NET_AREAS,
        spare_areas: Vec::new(),
        irq: irq.map(|(_, s)| s),
        transfers: Vec::new(),
        next_transfer: 1,
        rr: 0,
        cue_windows: [false; p::MAX_TRANSFERS],
        blk,
        inbox: graft_api::upcall::Inbox::new(),
        received: None,
        cue_text: String::new(),
        cue_busy: false,
        prof: [0; 6],
        owners: sockets::Owners::default(),
        poll_at: None,
        syn_ports: Vec::new(),
        pump_owed: None,
        park_at: 0,
        window_tight: false,
    };
    n.pump();
    let mut buf = [0u8; graft_api::RECV_BYTES];
    server::run(&mut n, &mut buf)
}
