//! The BAIO block service: it alone talks to the disk (a user-level virtio-blk driver)
//! and multiplexes the BAIO device on it among programs as disk segments with owners
//! and rights (BAIO paper §3–4). Principals come from root's manifest, in the badges
//! root mints; each principal's quota comes from this service's arguments
//! (`quota=N` for everyone, `quota.P=N` for principal P).
//!
//! Opening a segment gives a real capability — a badged SEND capability to this
//! service, revoked on close or when the client dies (root says `GONE`) — and a
//! shared area of DMA memory: a control page (submission ring, completion counter,
//! status words) and the data. A batch — in one message, or as many operations as the
//! ring holds behind one doorbell — returns at once; each operation completes by
//! writing its status word; a client may sleep until then (`WAIT`, or `WAIT_ALL` on
//! the batch) instead of polling.
//!
//! Direct operations move data by DMA straight into or out of the shared area,
//! several requests in flight on the device, sent in block order, completed when the
//! device's interrupt arrives as IPC. Buffered ones go through the shared `cache`
//! server: it decides what stays; this service DMAs misses into the cache's frames,
//! which it maps, and copies between them and the client's area. A device that fails
//! the mount checks is refused.
//!
//! What it holds for a client — shared areas, capability slots — is charged to a
//! principal, each with a share (`blk_api::PRINCIPAL_SLOTS`, `MAX_OPEN_PER_PRINCIPAL`):
//! the opener of a segment, the principal a view was delegated or attached for. An
//! agent (`agents=P,Q…`, default 1: `files`) may delegate for another principal, and a
//! program without a principal (`net`) may attach for one (docs/storage.md, "Who
//! pays").
//!
//! This file holds the state and the dispatch, one method per request, each in the
//! module of its concern: `segments` (the volume's requests, handles, the written
//! mark), `views` (delegation, attaching, who pays), `ring` (batches, completions,
//! sleepers), `ops` (one operation: direct and buffered runs), `cached` (every call
//! to the cache server), `device` (virtio-blk requests, the bounce pool), `area`
//! (shared areas and the code that touches them), `ldisk` (logical disks).
#![no_std]
#![no_main]

extern crate alloc;

mod area;
mod cached;
mod device;
mod ldisk;
mod ops;
mod ring;
mod segments;
mod views;

use abi::fpage::Fpage;
use abi::Error;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;
use area::AREA_VA;
use baio::{Volume, BLOCK};
use blk_api::{self as p, Request};
use cache_api as pc;
use cached::{attach_cache, CACHE_SYNC_US};
use device::{attach_irqs, Io};
use ldisk::Ldisk;
use ring::{Op, Waiter};
use rt::ipc::Msg;
use rt::server::{self, Answer, Badge, Server};
use rt::{env, pci, println};
use segments::Handle;
use virtio_hal::{self as virtio, Disk};

rt::entry!(main);

/// Badges this service mints: a segment capability's is `Badge::minted(handle)`, an
/// interrupt line's `Badge::minted(IRQ_BADGE | line)` (handles stay below it).
const IRQ_BADGE: u64 = 1 << 61;
/// A view's holder's capability (`ATTACH` hands it out): `Badge::minted(HOLDER | handle)`.
/// The ticket a view was delegated as may have been copied; only this one, which the
/// attach gave the holder alone, works on the view once it is attached.
const HOLDER: u64 = 1 << 60;
/// The graft points this service hosts.
const POINTS: [graft::Point; 2] = [graft::Point::Stream, graft::Point::Ldisk];

struct Blk {
    /// The text of the last LIST reply (it must live until the kernel copies it).
    text: String,
    /// Stream grafts (VINO §3.2) by the principal that reads: `STREAM` reads go
    /// through them.
    grafts: graft::Table,
    /// Logical disks by their segment's first block.
    ldisks: BTreeMap<u64, Ldisk>,
    /// A capability a graft `LOAD` brings (an upcall graft's thread).
    inbox: graft_api::upcall::Inbox,
    disk: Disk,
    vol: Volume,
    quota: u64,
    quotas: BTreeMap<u32, u64>,
    handles: BTreeMap<u64, Handle>,
    next: u64,
    /// Shared areas of closed handles, for reuse, with how many of their first bytes
    /// may have been written (to zero before reuse).
    spare: Vec<(u64, u64)>,
    /// Areas of closed delegated handles, still mapped in their holders until the time
    /// given (µs): a delegated view is closed by whoever delegated it (a file removed)
    /// while its holder (`net`) may be reading the area; the holder's capability goes at
    /// once, and the holder checks it before it touches the area, so the area may go
    /// only after any such check has had time to finish its reading. Each is still
    /// charged to the view's payer (the last field) until then.
    parked: Vec<(u64, u64, u64, u32)>,
    /// Principals whose programs may charge others (`agents=P,Q…`; default 1, the
    /// system's servers: `files` delegates tickets for its clients). Programs without a
    /// principal (`net`) may attach for others too.
    agents: Vec<u32>,
    /// The capability the request being handled brought (ATTACH's ticket).
    received: Option<u64>,
    /// Free blocks of the bounce pool (`BOUNCE_BLOCKS`), and whether it was made.
    bounce: Vec<u64>,
    bounce_made: bool,
    area_next: u64,
    sigma0: u64,
    cache: u64,
    /// Pages per block of the cache's frames (its first block's, from `ATTACH`).
    cache_block: u64,
    /// The cache holds grown blocks it may give back: say `SYNC` now and then, even
    /// when idle, so that it can (it gives a block back only once it has seen this
    /// service between operations).
    cache_grown: bool,
    /// The cache server is gone and no new one is attached yet: buffered operations go
    /// around the cache (`cached::lose_cache`); the next try at `cache_retry_at` (µs).
    cache_lost: bool,
    cache_retry_at: u64,
    /// Caches attached since blk started, less one (what a copy out of the cache's
    /// frames is checked against: `cache_alive`).
    attached: u64,
    /// The cache's answers for the buffered reads of the batch under way, asked in one
    /// `LOOKUPS` (`prefetch`): per run (first block, blocks, owner) its words, taken in
    /// order by `lookup`. Good only until the next call to the cache (its `HIT` slots
    /// may go after it), so any call drops what is left, answering its `FILL`s.
    looked: VecDeque<(u64, u64, u32, [u64; pc::MAX_LOOKUP as usize])>,
    /// Where blk last saw each block in the cache, for hits without a call (`direct`).
    hints: cached::Hints,
    /// Direct requests not yet on the device (sent in block order) and on it.
    waiting: VecDeque<Io>,
    in_flight: Vec<(u16, Io)>,
    ops: BTreeMap<u64, Op>,
    next_op: u64,
    batches: BTreeMap<u64, u32>,
    next_batch: u64,
    waiters: Vec<Waiter>,
    /// The device's interrupts (IOAPIC line or MSI-X vectors) and their capabilities
    /// (none: completions are polled).
    irqs: Vec<(u8, u64)>,
}

fn err(e: Error) -> Msg {
    Msg::new(0, &[e as u64])
}

impl Blk {
    /// A request through a segment capability.
    fn segment(&mut self, hid: u64, req: Request<'_>, holder: bool) -> Option<Msg> {
        let Some(h) = self.handles.get(&hid) else { return Some(err(Error::InvalidCap)) };
        // A delegated handle does nothing but close until it is attached (`ATTACH`, to
        // the service); then only its holder's capability works on it (so no other
        // copy of the ticket can close it under the holder's reads).
        if h.area == 0 && !matches!(req, Request::Close) {
            return Some(err(Error::BadState));
        }
        if h.parent.is_some() && h.area != 0 && !holder {
            return Some(err(Error::BadState));
        }
        let payer = h.payer;
        match req {
            Request::Delegate { rights, bytes, payer, extents } => {
                Some(self.delegate(hid, rights, bytes, payer, extents))
            }
            Request::Batch { flags, ops } => self.batch_in_msg(hid, payer, flags, ops),
            Request::Submit { flags } => self.batch_in_ring(hid, payer, flags),
            Request::Wait { n } => self.wait(hid, payer, n),
            Request::Sync => Some(self.sync()),
            Request::Close => self.close_asked(hid),
            Request::Ldisk { graft } => Some(self.ldisk_attach(hid, graft)),
            Request::Revoke { view } => Some(self.revoke(hid, view)),
            // Requests to the service itself are not for a segment capability.
            _ => Some(err(Error::Unsupported)),
        }
    }

    /// A request to the service itself, from `principal`'s program `client`.
    fn service(&mut self, principal: u32, client: u64, req: Request<'_>) -> Msg {
        // Metadata goes to the device with blocking requests: nothing may be in flight.
        if !matches!(req, Request::Attach { .. } | Request::Usage) {
            self.drain();
        }
        match req {
            Request::Create { name, blocks, others } => self.create(principal, name, blocks, others),
            Request::Open { name, rights } => self.open(principal, client, name, rights),
            Request::Attach { log2, payer } => self.attach(principal, client, log2, payer),
            Request::Usage => self.usage(principal),
            Request::Mount => self.mount(),
            Request::Stat { name } => self.stat(principal, name),
            Request::List => self.list(principal),
            Request::Delete { name } => self.delete(principal, name),
            // Segment requests need a segment capability.
            _ => err(Error::InvalidCap),
        }
    }
}

impl Server for Blk {
    type Request<'a> = Request<'a>;

    fn windows(&self) -> Option<[Fpage; 3]> {
        Some([Fpage(0), self.inbox.window(), Fpage(0)])
    }

    fn event(&mut self, from: Badge, m: &Msg) -> Option<Answer> {
        // Only a graft LOAD (an upcall's thread) and an ATTACH (its ticket) may bring a
        // capability; any other goes.
        if let Some(old) = self.received.take() {
            rt::free_slot(old);
        }
        if let Some(slot) = self.inbox.arrived(m) {
            if m.label() == p::ATTACH && from.minted_value().is_none() {
                self.received = Some(slot);
            } else {
                rt::free_slot(slot);
            }
        }
        let v = from.minted_value()?;
        if v & IRQ_BADGE == 0 || m.label() != abi::ipc::label::IRQ {
            return None;
        }
        self.disk.ack_interrupt();
        self.complete();
        let line = m.mr[1] as u8;
        if let Some(&(_, s)) = self.irqs.iter().find(|(l, _)| *l == line) {
            let _ = rt::sys::irq_ack(s);
        }
        Some(Answer::Later)
    }

    fn next_tick_us(&mut self) -> Option<u64> {
        let now = rt::sys::now_us();
        let parked = self.parked.iter().map(|(_, _, t, _)| t.saturating_sub(now)).min();
        // Without a cache: a look for the new one now and then, also when idle.
        let every =
            if self.cache_lost { Some(cached::CACHE_RETRY_US) } else { self.cache_grown.then_some(CACHE_SYNC_US) };
        match (parked, every) {
            (Some(p), Some(e)) => Some(p.min(e)),
            (p, e) => p.or(e),
        }
    }

    fn tick(&mut self) {
        self.unpark();
        if self.cache_lost {
            self.cache_retry();
        } else if self.cache_grown {
            self.cache_sync();
        }
    }

    fn gone(&mut self, client: Badge) {
        // Root (its own, unbadged capability): a program died; its handles close.
        let gone = client.program() as u64;
        self.grafts.forget(gone);
        self.ldisk_sweep();
        // Its handles, and the views it held (attached): nobody reads those areas now.
        let hids: Vec<u64> =
            self.handles.iter().filter(|(_, h)| h.client == gone || h.holder_prog == gone).map(|(k, _)| *k).collect();
        for hid in hids {
            self.close(hid, false);
        }
    }

    /// A client was replaced by a new program (a live update): handles others depend on
    /// — those views were delegated from, and views — are the new program's now (the
    /// views close when it ends); its other handles close.
    fn succeeded(&mut self, old: Badge, new: Badge) {
        let (old, new) = (old.program() as u64, new.program() as u64);
        self.grafts.forget(old);
        self.ldisk_sweep();
        let hids: Vec<u64> = self.handles.iter().filter(|(_, h)| h.client == old).map(|(k, _)| *k).collect();
        for hid in hids {
            let kept = self.handles.get(&hid).is_some_and(|h| h.parent.is_some())
                || self.handles.values().any(|h| h.parent == Some(hid));
            match self.handles.get_mut(&hid) {
                Some(h) if kept => h.client = new,
                _ => self.close(hid, false),
            }
        }
    }

    fn handle(&mut self, from: Badge, req: Request<'_>) -> Answer {
        if let (Request::Graft(g), None, true) = (req, from.minted_value(), from.principal() != 0) {
            let (inbox, sigma0) = (&mut self.inbox, self.sigma0);
            let a = graft_api::serve(
                &mut self.grafts,
                from.principal(),
                from.program() as u64,
                g,
                &mut self.text,
                &mut |f| graft_host::engine(f, sigma0).or_else(|| inbox.engine(f)),
            );
            self.inbox.done();
            self.ldisk_sweep();
            return a;
        }
        let r = if let Some(v) = from.minted_value() {
            self.segment(v & !HOLDER, req, v & HOLDER != 0)
        } else if matches!(req, Request::Sync) {
            // To the service: root, as the machine stops (the whole disk).
            Some(if from.is_root() { self.sync() } else { err(Error::NoRights) })
        } else if from.principal() == 0 && (from.is_root() || !matches!(req, Request::Attach { .. })) {
            // Root, and programs without a principal (they own nothing here): those may
            // only attach views, for a principal they name (`net`, for its clients).
            Some(err(Error::NoRights))
        } else {
            Some(self.service(from.principal(), from.program() as u64, req))
        };
        match r {
            Some(m) => Answer::Reply(m),
            None => Answer::Later,
        }
    }
}

fn main() -> i32 {
    let mut quota = u64::MAX;
    let mut quotas = BTreeMap::new();
    let mut agents = alloc::vec![1u32];
    for w in rt::args().split(' ') {
        if let Some(a) = w.strip_prefix("agents=") {
            agents = a.split(',').filter_map(|p| p.parse().ok()).filter(|p| *p != 0).collect();
        } else if let Some(q) = w.strip_prefix("quota=").and_then(|q| q.parse().ok()) {
            quota = q;
        } else if let Some((pr, q)) = w.strip_prefix("quota.").and_then(|r| r.split_once('=')) {
            if let (Ok(pr), Ok(q)) = (pr.parse::<u32>(), q.parse::<u64>()) {
                quotas.insert(pr, q);
            }
        }
    }
    let s0slot = rt::alloc_slot();
    // The device comes by capability (the manifest's `pci`); the configuration ports
    // only under an older manifest that still grants them.
    let _ = pci::init();
    if env::lookup("sigma0", s0slot).is_err() {
        println!("blk: the manifest must grant sigma0");
        return 1;
    }
    virtio::init(s0slot);
    let (cache, cache_block) = match attach_cache() {
        Ok(c) => c,
        Err(why) => {
            println!("blk: {}", why);
            return 1;
        }
    };
    let (dev, mut disk) = match virtio::open_disk_with(&|line| Badge::minted(IRQ_BADGE | line).0) {
        Ok(d) => d,
        Err(why) => {
            println!("blk: {}", why);
            return 1;
        }
    };
    // A device that is not a whole number of blocks is not one mkimage made (and the
    // host's fsck refuses it): refuse it here too rather than ignore its tail.
    let sectors = disk.sectors();
    if sectors % (BLOCK as u64 / 512) != 0 {
        println!(
            "blk: refusing the device: {} sectors of 512 bytes is not a whole number of {}-byte blocks",
            sectors, BLOCK
        );
        server::refuse_all(Error::BadState);
    }
    let vol = match Volume::mount(&mut disk) {
        Ok(v) => v,
        Err(e) => {
            println!("blk: refusing the device: {:?}", e);
            server::refuse_all(Error::BadState);
        }
    };
    for f in &vol.finished {
        println!("blk: an interrupted update, finished: {}", f);
    }
    // Every metadata update's ordering point is a flush of the disk's write cache.
    println!("blk: the disk: {}, {} sectors of 512 bytes", disk.kind(), sectors);
    virtio::say_ports("blk", &dev);
    if disk.flushes().offered {
        println!("blk: the device caches writes: a flush at every ordering point");
    } else {
        println!("blk: the device offers no cache flush: its writes are taken as durable when done");
    }
    if virtio::dma_confined() {
        println!("blk: the IOMMU confines the controller's DMA to the memory blk maps for it");
    }
    let irqs = attach_irqs(&dev, &mut disk);
    match irqs.as_slice() {
        [(line, _)] if (*line as u64) < abi::irq::LINES => println!(
            "blk: mounted: {} blocks, {} segments, {} free; interrupts on line {}",
            vol.layout.total_blocks,
            vol.list().count(),
            vol.free_blocks(),
            line
        ),
        [_, ..] => println!(
            "blk: mounted: {} blocks, {} segments, {} free; MSI-X: {} queue(s), interrupts {:?}",
            vol.layout.total_blocks,
            vol.list().count(),
            vol.free_blocks(),
            irqs.len(),
            irqs.iter().map(|i| i.0).collect::<Vec<_>>()
        ),
        [] => println!(
            "blk: mounted: {} blocks, {} segments, {} free; no interrupt line: polling",
            vol.layout.total_blocks,
            vol.list().count(),
            vol.free_blocks()
        ),
    }
    let mut b = Blk {
        disk,
        vol,
        quota,
        quotas,
        handles: BTreeMap::new(),
        next: 1,
        spare: Vec::new(),
        parked: Vec::new(),
        area_next: AREA_VA,
        sigma0: s0slot,
        cache,
        cache_block,
        cache_grown: false,
        cache_lost: false,
        cache_retry_at: 0,
        attached: 0,
        looked: VecDeque::new(),
        hints: cached::Hints::new(cache_block),
        waiting: VecDeque::new(),
        in_flight: Vec::new(),
        ops: BTreeMap::new(),
        next_op: 1,
        batches: BTreeMap::new(),
        next_batch: 1,
        waiters: Vec::new(),
        irqs,
        text: String::new(),
        grafts: graft::Table::new(&POINTS, graft_api::BLK_IDS, graft_host::host()),
        ldisks: BTreeMap::new(),
        inbox: graft_api::upcall::Inbox::new(),
        agents,
        received: None,
        bounce: Vec::new(),
        bounce_made: false,
    };
    let mut buf = [0u8; graft_api::RECV_BYTES];
    server::run(&mut b, &mut buf)
}
