//! The BAIO block service: it alone talks to the disk (a user-level virtio-blk driver)
//! and multiplexes the BAIO device on it among programs as disk segments with owners
//! and rights (BAIO paper §3–4). Principals come from root's manifest, in the badges
//! root mints. Opening a segment gives a real capability — a badged SEND capability to
//! this service, revoked on close — and a shared buffer of DMA memory; a batch of reads
//! and writes through the capability returns at once, and each operation completes
//! by writing its status word in the shared buffer. Direct operations move data by DMA
//! straight into or out of that buffer, several requests in flight on the device, sent
//! in block order, completed when the device's interrupt arrives as IPC; buffered ones
//! go through the service's block cache. A device that fails the mount checks is
//! refused.
#![no_std]
#![no_main]

extern crate alloc;

use abi::fpage::{Fpage, UNMAP_SELF};
use abi::{cap, rights, Error};
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use baio::{BlockDev, Volume, BLOCK, READ, WRITE};
use core::fmt::Write as _;
use progs::virtio::{self, Disk};
use rt::ipc::{self, Msg};
use rt::proto::blk as p;
use rt::proto::sigma0 as s0;
use rt::{env, pci, println};
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use virtio_drivers::device::blk::{BlkReq, BlkResp};

rt::entry!(main);

/// Badges of segment capabilities carry this bit and the handle number.
const HANDLE: u64 = 1 << 62;
/// Shared buffers, one per open segment, mapped here and in the client.
const BUF_VA: u64 = 0x0000_5a00_0000_0000;
const CACHE_BLOCKS: usize = 256;
const IRQ_BADGE: u64 = 1 << 61;

/// A direct operation: waiting to go to the device, or on it.
struct Io {
    write: bool,
    sector: u64,
    buf: u64,
    len: usize,
    status: u64,
    req: Box<BlkReq>,
    resp: Box<BlkResp>,
}

struct Handle {
    start: u64,
    len: u64,
    rights: u8,
    /// Slot of the badged capability the client's copy derives from.
    slot: u64,
    buf: u64,
    log2: u64,
}

struct Blk {
    disk: Disk,
    vol: Volume,
    quota: u64,
    handles: BTreeMap<u64, Handle>,
    next: u64,
    /// Shared buffers of closed handles, for reuse: (address, log2 pages).
    spare: Vec<(u64, u64)>,
    buf_next: u64,
    /// Buffered operations' block cache: block → data, with use order.
    cache: BTreeMap<u64, alloc::boxed::Box<[u8; BLOCK]>>,
    order: Vec<u64>,
    sigma0: u64,
    /// Direct operations not yet on the device (sent in block order) and on it.
    waiting: VecDeque<Io>,
    in_flight: Vec<(u16, Io)>,
    /// The device's interrupt line and its capability (None: completions are polled).
    irq: Option<(u8, u64)>,
}

fn err(e: Error) -> Msg {
    Msg::new(0, &[e as u64])
}

fn vol_err(e: baio::Error) -> Error {
    match e {
        baio::Error::NameTaken => Error::SlotInUse,
        baio::Error::NoSpace | baio::Error::NoInode | baio::Error::OverQuota => Error::NoMemory,
        baio::Error::NotFound => Error::NoPartner,
        baio::Error::BadName => Error::InvalidArg,
        _ => Error::BadState,
    }
}

impl Blk {
    fn buffer(&mut self) -> Option<(u64, u64)> {
        if let Some(b) = self.spare.pop() {
            // SAFETY: a spare buffer is mapped here and shared with nobody any more.
            unsafe { core::ptr::write_bytes(b.0 as *mut u8, 0, (4096u64 << b.1) as usize) };
            return Some(b);
        }
        let log2 = 64 - (p::BUF_PAGES - 1).leading_zeros() as u64;
        let size = 4096u64 << log2;
        let va = self.buf_next.div_ceil(size) * size;
        ipc::set_windows(Fpage::mem(va, 12 + log2, 7), Fpage(0), Fpage(0));
        let mut m = Msg::new(s0::ALLOC, &[log2, va]);
        let ok = ipc::call(self.sigma0, &mut m, ipc::FOREVER).is_ok() && m.word(1) == 0 && m.items() == 1;
        ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
        if !ok {
            return None;
        }
        virtio::register_dma(va, m.word(2), 1 << log2);
        self.buf_next = va + size;
        Some((va, log2))
    }

    fn cached(&mut self, block: u64) -> Result<&mut [u8; BLOCK], baio::Error> {
        if !self.cache.contains_key(&block) {
            if self.cache.len() >= CACHE_BLOCKS {
                let victim = self.order.remove(0);
                self.cache.remove(&victim);
            }
            let mut b = alloc::boxed::Box::new([0u8; BLOCK]);
            self.disk.read(block, &mut b)?;
            self.cache.insert(block, b);
        }
        self.order.retain(|b| *b != block);
        self.order.push(block);
        Ok(self.cache.get_mut(&block).unwrap())
    }

    /// Send waiting operations to the device, lowest block first, while it has room.
    fn submit(&mut self) {
        self.waiting.make_contiguous().sort_by_key(|io| io.sector);
        while let Some(mut io) = self.waiting.pop_front() {
            // SAFETY: the buffer is a slot of a shared buffer (DMA memory mapped here) and
            // `req`/`resp` are boxed; all stay put and untouched until the completion.
            let r = unsafe {
                let buf = core::slice::from_raw_parts_mut(io.buf as *mut u8, io.len);
                if io.write {
                    self.disk.0.write_blocks_nb(io.sector as usize, &mut io.req, buf, &mut io.resp)
                } else {
                    self.disk.0.read_blocks_nb(io.sector as usize, &mut io.req, buf, &mut io.resp)
                }
            };
            match r {
                Ok(token) => self.in_flight.push((token, io)),
                Err(virtio_drivers::Error::QueueFull) => {
                    self.waiting.push_front(io);
                    break;
                }
                Err(_) => finish(&io, p::FAILED | p::E_IO),
            }
        }
    }

    /// Collect what the device has finished; write those status words.
    fn complete(&mut self) {
        while let Some(token) = self.disk.0.peek_used() {
            let Some(i) = self.in_flight.iter().position(|(t, _)| *t == token) else { break };
            let (_, mut io) = self.in_flight.swap_remove(i);
            // SAFETY: the same request, buffer and response that went with this token.
            let r = unsafe {
                let buf = core::slice::from_raw_parts_mut(io.buf as *mut u8, io.len);
                if io.write {
                    self.disk.0.complete_write_blocks(token, &io.req, buf, &mut io.resp)
                } else {
                    self.disk.0.complete_read_blocks(token, &io.req, buf, &mut io.resp)
                }
            };
            finish(&io, if r.is_ok() { p::DONE } else { p::FAILED | p::E_IO });
        }
        self.submit();
    }

    /// Finish everything in flight (before a blocking request shares the queue).
    fn drain(&mut self) {
        while !self.in_flight.is_empty() || !self.waiting.is_empty() {
            self.complete();
            core::hint::spin_loop();
        }
    }

    /// Check one operation; direct ones are queued, buffered ones done now. Returns
    /// its status word, or 0 while it is queued.
    fn op(&mut self, h: &Handle, i: u64, kind: u64, first: u64, count: u64, status: u64) -> u64 {
        let buffered = kind & p::BUFFERED != 0;
        let kind = kind & !p::BUFFERED;
        if count == 0 || count * BLOCK as u64 > p::OP_BYTES || kind > p::WRITE_OP {
            return p::FAILED | p::E_BAD;
        }
        if first.checked_add(count).is_none_or(|e| e > h.len) {
            return p::FAILED | p::E_RANGE;
        }
        let need = if kind == p::READ_OP { READ } else { WRITE };
        if h.rights & need == 0 {
            return p::FAILED | p::E_RIGHTS;
        }
        let data = h.buf + i * p::OP_BYTES;
        if !buffered {
            for k in 0..count {
                self.cache.remove(&(h.start + first + k));
            }
            self.waiting.push_back(Io {
                write: kind == p::WRITE_OP,
                sector: (h.start + first) * 8,
                buf: data,
                len: (count * BLOCK as u64) as usize,
                status,
                req: Box::default(),
                resp: Box::default(),
            });
            return 0;
        }
        self.drain();
        for k in 0..count {
            let blk = h.start + first + k;
            // SAFETY: the slot lies within this handle's shared buffer, mapped here.
            let buf: &mut [u8; BLOCK] = unsafe { &mut *((data + k * BLOCK as u64) as *mut [u8; BLOCK]) };
            let r = if kind == p::READ_OP {
                self.cached(blk).map(|c| buf.copy_from_slice(c))
            } else {
                self.cached(blk).map(|c| c.copy_from_slice(buf)).and_then(|_| self.disk.write(blk, buf))
            };
            if r.is_err() {
                return p::FAILED | p::E_IO;
            }
        }
        p::DONE
    }
}

fn finish(io: &Io, status: u64) {
    // SAFETY: the status word lies in the shared buffer's status page, mapped here.
    unsafe { core::ptr::write_volatile(io.status as *mut u64, status) };
}

/// Find the device's interrupt line: attach to every PCI line the manifest grants, make
/// one request, keep the line that fired (as drivers probe legacy interrupts).
fn probe_irq(disk: &mut Disk) -> Option<(u8, u64)> {
    let mut slots = Vec::new();
    for line in 16..24u64 {
        let s = rt::alloc_slot();
        if env::irq(line, s).is_ok() && rt::sys::irq_attach(s, IRQ_BADGE | line).is_ok() {
            slots.push((line as u8, s));
        }
    }
    disk.0.enable_interrupts();
    let mut b = [0u8; BLOCK];
    let _ = disk.read(0, &mut b);
    let mut m = Msg::empty();
    let found = match ipc::recv(ipc::RECV_ANY, &mut m, ipc::timeouts(ipc::POLL, 200_000)) {
        Ok(badge) if badge & IRQ_BADGE != 0 => Some((badge & 0xff) as u8),
        _ => None,
    };
    disk.0.ack_interrupt();
    let mut chosen = None;
    for (line, s) in slots {
        if Some(line) == found {
            let _ = rt::sys::irq_ack(s);
            chosen = Some((line, s));
        } else {
            let _ = rt::sys::irq_detach(s);
        }
    }
    if chosen.is_none() {
        disk.0.disable_interrupts();
    }
    chosen
}

fn name_of(buf: &[u8], m: &Msg) -> String {
    let n = if m.tag().has_string() { ipc::received_string_len().min(buf.len()) } else { 0 };
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn main() -> i32 {
    let quota = rt::args().split(' ').find_map(|w| w.strip_prefix("quota=")).and_then(|q| q.parse().ok()).unwrap_or(u64::MAX);
    let s0slot = rt::alloc_slot();
    if pci::init().is_err() || env::lookup("sigma0", s0slot).is_err() {
        println!("blk: the manifest must grant the PCI ports and sigma0");
        return 1;
    }
    virtio::init(s0slot);
    let mut disk = match virtio::open_disk() {
        Ok((_, disk)) => disk,
        Err(why) => {
            println!("blk: {}", why);
            return 1;
        }
    };
    let vol = match Volume::mount(&mut disk) {
        Ok(v) => v,
        Err(e) => {
            println!("blk: refusing the device: {:?}", e);
            // Serve every request with an error rather than vanish: clients learn why.
            let mut reply = None;
            let mut buf = [0u8; 256];
            loop {
                ipc::set_recv_buffer(&mut buf);
                let mut m = Msg::empty();
                if ipc::serve_next(reply.take(), &mut m).is_ok() {
                    reply = Some(err(Error::BadState));
                }
            }
        }
    };
    let irq = probe_irq(&mut disk);
    match irq {
        Some((line, _)) => println!("blk: mounted: {} blocks, {} segments, {} free; interrupts on line {}", vol.layout.total_blocks, vol.list().count(), vol.free_blocks(), line),
        None => println!("blk: mounted: {} blocks, {} segments, {} free; no interrupt line: polling", vol.layout.total_blocks, vol.list().count(), vol.free_blocks()),
    }
    let mut b = Blk {
        disk,
        vol,
        quota,
        handles: BTreeMap::new(),
        next: 1,
        spare: Vec::new(),
        buf_next: BUF_VA,
        cache: BTreeMap::new(),
        order: Vec::new(),
        sigma0: s0slot,
        waiting: VecDeque::new(),
        in_flight: Vec::new(),
        irq,
    };
    let mut buf = [0u8; 256];
    let mut text = String::new();
    let mut reply: Option<Msg> = None;
    loop {
        ipc::set_recv_buffer(&mut buf);
        let mut m = Msg::empty();
        let Ok(badge) = ipc::serve_next(reply.take(), &mut m) else { continue };
        if badge & IRQ_BADGE != 0 && m.label() == abi::ipc::label::IRQ {
            b.disk.0.ack_interrupt();
            b.complete();
            if let Some((_, s)) = b.irq {
                let _ = rt::sys::irq_ack(s);
            }
            continue;
        }
        if badge & HANDLE != 0 {
            let hid = badge & 0xffff_ffff;
            let Some(h) = b.handles.get(&hid) else {
                reply = Some(err(Error::InvalidCap));
                continue;
            };
            match m.label() {
                p::BATCH => {
                    let n = m.word(1);
                    if n > p::MAX_OPS || m.words().len() < 1 + 3 * n as usize {
                        reply = Some(err(Error::InvalidArg));
                        continue;
                    }
                    let ops: Vec<(u64, u64, u64)> = (0..n as usize).map(|i| (m.word(2 + 3 * i), m.word(3 + 3 * i), m.word(4 + 3 * i))).collect();
                    let status = h.buf + p::MAX_OPS * p::OP_BYTES;
                    // The batch is accepted: statuses to pending, answer at once, then work.
                    for i in 0..n {
                        // SAFETY: the status page is the last page of the shared buffer.
                        unsafe { core::ptr::write_volatile((status + 8 * i) as *mut u64, 0) };
                    }
                    let _ = ipc::reply(&Msg::new(0, &[0]));
                    let h = b.handles.remove(&hid).unwrap();
                    for (i, (kind, first, count)) in ops.into_iter().enumerate() {
                        let word = status + 8 * i as u64;
                        let s = b.op(&h, i as u64, kind, first, count, word);
                        if s != 0 {
                            // SAFETY: as above.
                            unsafe { core::ptr::write_volatile(word as *mut u64, s) };
                        }
                    }
                    b.handles.insert(hid, h);
                    b.submit();
                    if b.irq.is_none() {
                        b.drain();
                    }
                }
                p::SYNC => {
                    b.drain();
                    let r = b.disk.0.flush();
                    reply = Some(Msg::new(0, &[if r.is_ok() { 0 } else { Error::BadState as u64 }]));
                }
                p::CLOSE => {
                    // Its operations finish before its buffer can be reused.
                    b.drain();
                    let h = b.handles.remove(&hid).unwrap();
                    let _ = ipc::reply(&Msg::new(0, &[0]));
                    // Revoke the client's capability and buffer mapping; keep the buffer.
                    // SAFETY: only the client's derived copies and this slot are affected.
                    let _ = unsafe { rt::sys::unmap(Fpage::caps(h.slot, 0, 0), UNMAP_SELF) };
                    // SAFETY: the buffer stays mapped here; only the client loses it.
                    let _ = unsafe { rt::sys::unmap(Fpage::mem(h.buf, 12 + h.log2, 0), 0) };
                    b.spare.push((h.buf, h.log2));
                }
                _ => reply = Some(err(Error::InvalidArg)),
            }
            continue;
        }
        let principal = (badge >> 32) as u32;
        if principal == 0 {
            reply = Some(err(Error::NoRights));
            continue;
        }
        let name = name_of(&buf, &m);
        // Metadata goes to the device with blocking requests: nothing may be in flight.
        b.drain();
        reply = Some(match m.label() {
            p::CREATE => {
                let (len, other) = (m.word(1), m.word(2));
                if other & !((READ | WRITE) as u64) != 0 {
                    err(Error::InvalidArg)
                } else {
                    match b.vol.create(&name, principal, READ | WRITE, other as u8, len, b.quota, 0) {
                        Ok(_) => match b.vol.sync(&mut b.disk) {
                            Ok(()) => Msg::new(0, &[0]),
                            Err(_) => err(Error::BadState),
                        },
                        Err(e) => err(vol_err(e)),
                    }
                }
            }
            p::OPEN => match b.vol.lookup(&name).cloned() {
                None => err(Error::NoPartner),
                Some(ino) => {
                    let want = m.word(1) as u8;
                    if want == 0 || want & !ino.rights_for(principal) != 0 {
                        err(Error::NoRights)
                    } else if let Some((va, log2)) = b.buffer() {
                        let hid = b.next;
                        b.next += 1;
                        let slot = rt::alloc_slot();
                        let _ = rt::sys::cap_copy(cap::SELF_THREAD, slot, rights::SEND, HANDLE | hid);
                        b.handles.insert(hid, Handle { start: ino.start, len: ino.length, rights: want, slot, buf: va, log2 });
                        let mut r = Msg::new(0, &[0, ino.length]);
                        r.push_item(Fpage::caps(slot, 0, rights::SEND), 0);
                        r.push_item(Fpage::mem(va, 12 + log2, abi::mem::READ | abi::mem::WRITE), 0);
                        r
                    } else {
                        err(Error::NoMemory)
                    }
                }
            },
            p::STAT => match b.vol.lookup(&name) {
                None => err(Error::NoPartner),
                Some(i) => Msg::new(0, &[0, i.length, i.owner as u64, i.rights_owner as u64, i.rights_other as u64]),
            },
            p::LIST => {
                text.clear();
                for i in b.vol.list().filter(|i| i.rights_for(principal) != 0) {
                    let _ = writeln!(text, "{} {} {}", i.name, i.length, i.owner);
                }
                ipc::set_send_string(text.as_bytes());
                Msg::new(0, &[0]).with_string()
            }
            p::DELETE => match b.vol.lookup(&name) {
                None => err(Error::NoPartner),
                Some(i) if i.owner != principal => err(Error::NoRights),
                Some(i) => {
                    let (s, l) = (i.start, i.length);
                    if b.handles.values().any(|h| h.start == s && h.len == l) {
                        err(Error::BadState)
                    } else {
                        let _ = b.vol.delete(&name);
                        match b.vol.sync(&mut b.disk) {
                            Ok(()) => Msg::new(0, &[0]),
                            Err(_) => err(Error::BadState),
                        }
                    }
                }
            },
            _ => err(Error::NoSys),
        });
    }
}
