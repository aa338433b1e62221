//! An NVMe controller (NVM Express Base 2.0, NVM command set), driven at user level:
//! the registers through [`Regs`] (a BAR mapped by the driver's program), the queues in
//! DMA memory from [`Dma`]. What a block service needs and no more: bring-up (disable,
//! admin queues, enable), Identify of the controller and of namespace 1, I/O queue
//! pairs — one, or one per CPU ([`Controller::with_queues`]), queue `q`'s completions
//! on interrupt vector `q` (INTx for one queue, or MSI-X entry `q`) — and reads, writes and
//! flushes of any length, split into commands the controller takes (MDTS) with PRP
//! lists, completed by the phase tag. Every value the controller hands back is checked
//! (a completion's command id, its status, an identify's sizes): a controller that
//! misbehaves gets an [`Error`], never a panic.
//!
//! Requests are asynchronous: [`Controller::submit`] returns a token, [`Controller::poll`]
//! hands back finished tokens (in the order they finish), [`Controller::wait`] spins
//! for one. Host tests drive a model of a controller (`tests.rs`).
#![no_std]

extern crate alloc;

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::sync::atomic::{fence, Ordering};

#[cfg(test)]
mod tests;

pub const PAGE: usize = 4096;

/// The controller's registers (offsets in bytes into BAR 0).
pub trait Regs {
    fn read32(&self, off: usize) -> u32;
    fn write32(&mut self, off: usize, v: u32);
    fn read64(&self, off: usize) -> u64 {
        self.read32(off) as u64 | (self.read32(off + 4) as u64) << 32
    }
    fn write64(&mut self, off: usize, v: u64) {
        self.write32(off, v as u32);
        self.write32(off + 4, (v >> 32) as u32);
    }
}

/// DMA memory: `pages` physically contiguous, zeroed pages, mapped here at the first
/// address and seen by the device at the second. Never taken back while the controller
/// lives.
pub trait Dma {
    fn alloc(&mut self, pages: usize) -> Option<(u64, u64)>;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The controller did not become ready (or stop) within the time its CAP.TO gives.
    NotReady,
    /// The controller reports a fatal status (CSTS.CFS).
    Fatal,
    /// What this driver does not do: memory pages other than 4 KiB, no NVM command set,
    /// namespaces with metadata or a block size not a power of two from 512 to 4096.
    Unsupported(&'static str),
    NoMemory,
    /// Namespace 1 does not exist or is empty.
    NoNamespace,
    /// A command failed: its status field (status code type << 8 | status code).
    Status(u16),
    /// No room on the I/O queue for the request now (nothing was sent).
    Full,
    /// A length that is not a whole number of logical blocks, or past the namespace.
    BadRequest,
    /// A command did not complete within the spin bound.
    Timeout,
}

// Registers.
const CAP: usize = 0x00;
const INTMC: usize = 0x10;
const CC: usize = 0x14;
const CSTS: usize = 0x1c;
const AQA: usize = 0x24;
const ASQ: usize = 0x28;
const ACQ: usize = 0x30;
const DOORBELLS: usize = 0x1000;

// Admin opcodes.
const CREATE_SQ: u8 = 0x01;
const CREATE_CQ: u8 = 0x05;
const IDENTIFY: u8 = 0x06;
const SET_FEATURES: u8 = 0x09;
/// Set Features: Number of Queues.
const FEATURE_QUEUES: u32 = 0x07;
// NVM opcodes.
const FLUSH: u8 = 0x00;
const WRITE: u8 = 0x01;
const READ: u8 = 0x02;

const ADMIN_DEPTH: u16 = 32;
/// I/O queue entries at most (the controller's MQES may lower it).
pub const IO_DEPTH: u16 = 64;
/// Entries in one PRP list page.
const PRP_PER_PAGE: usize = PAGE / 8;

/// A submission entry (64 bytes).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Command {
    pub opcode: u8,
    pub cid: u16,
    pub nsid: u32,
    pub prp1: u64,
    pub prp2: u64,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
}

impl Command {
    pub fn to_words(&self) -> [u32; 16] {
        let mut w = [0u32; 16];
        w[0] = self.opcode as u32 | (self.cid as u32) << 16;
        w[1] = self.nsid;
        w[6] = self.prp1 as u32;
        w[7] = (self.prp1 >> 32) as u32;
        w[8] = self.prp2 as u32;
        w[9] = (self.prp2 >> 32) as u32;
        w[10] = self.cdw10;
        w[11] = self.cdw11;
        w[12] = self.cdw12;
        w
    }

    pub fn from_words(w: &[u32; 16]) -> Command {
        Command {
            opcode: w[0] as u8,
            cid: (w[0] >> 16) as u16,
            nsid: w[1],
            prp1: w[6] as u64 | (w[7] as u64) << 32,
            prp2: w[8] as u64 | (w[9] as u64) << 32,
            cdw10: w[10],
            cdw11: w[11],
            cdw12: w[12],
        }
    }
}

/// A completion entry (16 bytes), as words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub dw0: u32,
    pub sq_head: u16,
    pub cid: u16,
    pub phase: bool,
    /// Status code type << 8 | status code (0: success).
    pub status: u16,
}

impl Completion {
    pub fn from_words(w: [u32; 4]) -> Completion {
        Completion {
            dw0: w[0],
            sq_head: w[2] as u16,
            cid: w[3] as u16,
            phase: w[3] & 1 << 16 != 0,
            status: ((w[3] >> 17) & 0x7ff) as u16,
        }
    }

    pub fn to_words(&self) -> [u32; 4] {
        [self.dw0, 0, self.sq_head as u32, self.cid as u32 | (self.phase as u32) << 16 | (self.status as u32) << 17]
    }
}

/// The PRP entries of a physically contiguous buffer of `len` bytes at `pa`: the first
/// (which may start inside a page), the second (none, the next page, or the list), and
/// the list's entries when there are more than two pages.
pub fn prps(pa: u64, len: usize) -> (u64, Option<u64>, Vec<u64>) {
    let first_end = (pa & !(PAGE as u64 - 1)) + PAGE as u64;
    let rest = (pa + len as u64).saturating_sub(first_end);
    let pages = (rest as usize).div_ceil(PAGE);
    match pages {
        0 => (pa, None, Vec::new()),
        1 => (pa, Some(first_end), Vec::new()),
        n => (pa, None, (0..n as u64).map(|k| first_end + k * PAGE as u64).collect()),
    }
}

struct Queue {
    /// Commands on the device from this queue (at most `depth - 1`).
    busy: u16,
    sq: u64,
    cq: u64,
    sq_pa: u64,
    cq_pa: u64,
    depth: u16,
    tail: u16,
    head: u16,
    phase: bool,
}

impl Queue {
    fn new(dma: &mut dyn Dma, depth: u16) -> Result<Queue, Error> {
        let (sq, sq_pa) = dma.alloc((depth as usize * 64).div_ceil(PAGE)).ok_or(Error::NoMemory)?;
        let (cq, cq_pa) = dma.alloc((depth as usize * 16).div_ceil(PAGE)).ok_or(Error::NoMemory)?;
        Ok(Queue { busy: 0, sq, cq, sq_pa, cq_pa, depth, tail: 0, head: 0, phase: true })
    }

    /// Put `c` at the tail; the new tail (for the doorbell).
    fn push(&mut self, c: &Command) -> u16 {
        let at = self.sq + self.tail as u64 * 64;
        for (i, w) in c.to_words().iter().enumerate() {
            // SAFETY: `sq` is this queue's DMA memory (`depth` entries of 64 bytes, from
            // `Dma::alloc`, never freed) and `tail < depth`, so the word is inside it.
            unsafe { core::ptr::write_volatile((at + 4 * i as u64) as *mut u32, *w) };
        }
        self.tail = (self.tail + 1) % self.depth;
        self.tail
    }

    /// The entry at the head if the controller has posted it (its phase is ours).
    fn peek(&self) -> Option<Completion> {
        let at = self.cq + self.head as u64 * 16;
        // SAFETY: `cq` is this queue's DMA memory (`depth` entries of 16 bytes) and
        // `head < depth`.
        let w3 = unsafe { core::ptr::read_volatile((at + 12) as *const u32) };
        if (w3 & 1 << 16 != 0) != self.phase {
            return None;
        }
        // The rest of the entry is read after its phase says it is whole.
        fence(Ordering::Acquire);
        let mut w = [0u32; 4];
        for (i, x) in w.iter_mut().enumerate() {
            // SAFETY: as above.
            *x = unsafe { core::ptr::read_volatile((at + 4 * i as u64) as *const u32) };
        }
        Some(Completion::from_words(w))
    }

    fn advance(&mut self) {
        self.head += 1;
        if self.head == self.depth {
            self.head = 0;
            self.phase = !self.phase;
        }
    }
}

/// One I/O command slot (its command id is its index): the request it belongs to and
/// its PRP list page.
#[derive(Clone, Copy)]
struct Slot {
    request: Option<u16>,
    /// The I/O queue (0-based) its command went on.
    queue: u16,
    list: u64,
    list_pa: u64,
}

/// A request's commands still on the device, and its first failure.
#[derive(Clone, Copy)]
struct Request {
    left: u16,
    result: Result<(), Error>,
}

/// What the controller said of itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// Namespace 1's logical block size (bytes) and size (blocks of that size).
    pub block_size: u32,
    pub blocks: u64,
    /// A volatile write cache (flushes matter).
    pub volatile_cache: bool,
    /// Bytes one command moves at most.
    pub max_bytes: usize,
    pub queue_depth: u16,
}

pub struct Controller<R: Regs> {
    pub regs: R,
    stride: usize,
    /// Spins a wait gives a controller (CAP.TO's time is not known here: spins).
    spins: u64,
    admin: Queue,
    /// The I/O queues: queue `q` has id `q + 1` and interrupt vector `q`.
    io: Vec<Queue>,
    /// Commands completed on each I/O queue.
    pub completed: Vec<u64>,
    slots: Vec<Slot>,
    requests: Vec<Option<Request>>,
    done: VecDeque<(u16, Result<(), Error>)>,
    pub id: Identity,
    /// Completions that named no command on the device (counted, then ignored).
    pub bad_completions: u64,
    /// Flushes sent.
    pub flushes: u64,
}

impl<R: Regs> Controller<R> {
    /// Bring the controller up: disable, admin queues, enable, identify, one I/O queue
    /// pair with interrupts on vector 0. `spins` bounds every wait (polls of a register
    /// or a completion queue).
    pub fn new(regs: R, dma: &mut dyn Dma, spins: u64) -> Result<Controller<R>, Error> {
        Self::with_queues(regs, dma, spins, 1)
    }

    /// The same with up to `queues` I/O queue pairs (as many as the controller grants
    /// through Set Features, at least one): queue `q` completes on interrupt vector `q`.
    pub fn with_queues(mut regs: R, dma: &mut dyn Dma, spins: u64, queues: u16) -> Result<Controller<R>, Error> {
        let cap = regs.read64(CAP);
        if (cap >> 48) & 0xf != 0 {
            return Err(Error::Unsupported("the controller's smallest memory page is not 4 KiB"));
        }
        if (cap >> 37) & 1 == 0 {
            return Err(Error::Unsupported("the controller has no NVM command set"));
        }
        let mqes = (cap & 0xffff) as u16;
        let stride = 4usize << ((cap >> 32) & 0xf);
        if regs.read32(CC) & 1 != 0 {
            regs.write32(CC, 0);
        }
        wait_ready(&regs, false, spins)?;
        let admin_depth = ADMIN_DEPTH.min(mqes.saturating_add(1)).max(2);
        let admin = Queue::new(dma, admin_depth)?;
        regs.write32(AQA, (admin_depth as u32 - 1) | (admin_depth as u32 - 1) << 16);
        regs.write64(ASQ, admin.sq_pa);
        regs.write64(ACQ, admin.cq_pa);
        // Enable: NVM command set, 4 KiB pages, round robin, entries of 64 and 16 bytes.
        regs.write32(CC, 1 | 6 << 16 | 4 << 20);
        wait_ready(&regs, true, spins)?;
        let io_depth = IO_DEPTH.min(mqes.saturating_add(1)).max(2);
        let id = Identity { block_size: 0, blocks: 0, volatile_cache: false, max_bytes: 0, queue_depth: io_depth };
        let mut c = Controller {
            regs,
            stride,
            spins,
            admin,
            io: Vec::new(),
            completed: Vec::new(),
            slots: Vec::new(),
            requests: Vec::new(),
            done: VecDeque::new(),
            id,
            bad_completions: 0,
            flushes: 0,
        };
        let (page, page_pa) = dma.alloc(1).ok_or(Error::NoMemory)?;
        let byte = |at: u64| -> u8 {
            // SAFETY: `page` is a DMA page of ours (4096 bytes) and `at < 4096`.
            unsafe { core::ptr::read_volatile((page + at) as *const u8) }
        };
        let word = |at: u64| -> u32 { u32::from_le_bytes([byte(at), byte(at + 1), byte(at + 2), byte(at + 3)]) };
        // Identify the controller: its write cache and largest transfer.
        c.admin_cmd(Command { opcode: IDENTIFY, prp1: page_pa, cdw10: 1, ..Command::default() })?;
        c.id.volatile_cache = byte(525) & 1 != 0;
        let mdts = byte(77) as u32;
        let by_list = PRP_PER_PAGE * PAGE;
        c.id.max_bytes = if mdts == 0 || mdts > 20 { by_list } else { (PAGE << mdts).min(by_list) };
        // Identify namespace 1: its size and block format.
        c.admin_cmd(Command { opcode: IDENTIFY, nsid: 1, prp1: page_pa, cdw10: 0, ..Command::default() })
            .map_err(|_| Error::NoNamespace)?;
        let blocks = word(0) as u64 | (word(4) as u64) << 32;
        let format = word(128 + 4 * (byte(26) as u64 & 0xf));
        let shift = (format >> 16) & 0xff;
        if format & 0xffff != 0 {
            return Err(Error::Unsupported("namespace 1 has metadata"));
        }
        if !(9..=12).contains(&shift) {
            return Err(Error::Unsupported("namespace 1's block size is not 512 to 4096 bytes"));
        }
        if blocks == 0 {
            return Err(Error::NoNamespace);
        }
        c.id.block_size = 1 << shift;
        c.id.blocks = blocks;
        // How many I/O queue pairs: as many as asked and granted (0-based counts in the
        // answer's dword 0; a controller that refuses the feature gets one).
        let want = queues.clamp(1, 64);
        let n = if want == 1 {
            1
        } else {
            let ask = (want as u32 - 1) | (want as u32 - 1) << 16;
            match c.admin_cmd(Command { opcode: SET_FEATURES, cdw10: FEATURE_QUEUES, cdw11: ask, ..Command::default() })
            {
                Ok(e) => want.min((e.dw0 & 0xffff) as u16 + 1).min((e.dw0 >> 16) as u16 + 1),
                Err(_) => 1,
            }
        };
        // Each I/O queue pair: completions first, with interrupts on vector q.
        for q in 0..n {
            let io = Queue::new(dma, io_depth)?;
            let size = (io_depth as u32 - 1) << 16;
            let qid = q as u32 + 1;
            c.admin_cmd(Command {
                opcode: CREATE_CQ,
                prp1: io.cq_pa,
                cdw10: qid | size,
                cdw11: 0b11 | (q as u32) << 16,
                ..Command::default()
            })?;
            c.admin_cmd(Command {
                opcode: CREATE_SQ,
                prp1: io.sq_pa,
                cdw10: qid | size,
                cdw11: 1 | qid << 16,
                ..Command::default()
            })?;
            c.io.push(io);
            c.completed.push(0);
        }
        let total = io_depth as u64 * n as u64;
        let (lists, lists_pa) = dma.alloc(total as usize).ok_or(Error::NoMemory)?;
        c.slots = (0..total)
            .map(|k| Slot {
                request: None,
                queue: 0,
                list: lists + k * PAGE as u64,
                list_pa: lists_pa + k * PAGE as u64,
            })
            .collect();
        c.requests = alloc::vec![None; total as usize];
        c.regs.write32(INTMC, 1);
        Ok(c)
    }

    fn doorbell(&mut self, q: u16, completion: bool, v: u16) {
        let at = DOORBELLS + (2 * q as usize + completion as usize) * self.stride;
        // The entries written before are visible to the device before it hears of them.
        fence(Ordering::Release);
        self.regs.write32(at, v as u32);
    }

    /// An admin command, waited for.
    fn admin_cmd(&mut self, mut c: Command) -> Result<Completion, Error> {
        c.cid = self.admin.tail;
        let tail = self.admin.push(&c);
        self.doorbell(0, false, tail);
        for _ in 0..self.spins {
            if let Some(e) = self.admin.peek() {
                self.admin.advance();
                let head = self.admin.head;
                self.doorbell(0, true, head);
                if e.cid != c.cid {
                    self.bad_completions += 1;
                    continue;
                }
                return if e.status == 0 { Ok(e) } else { Err(Error::Status(e.status)) };
            }
            core::hint::spin_loop();
        }
        Err(Error::Timeout)
    }

    /// I/O queue pairs.
    pub fn queues(&self) -> usize {
        self.io.len()
    }

    /// Slots free on I/O queue 0.
    pub fn free_slots(&self) -> usize {
        self.free_on(0)
    }

    /// Slots free on I/O queue `q`.
    pub fn free_on(&self, q: usize) -> usize {
        // One entry stays empty: a full queue's tail would meet its head.
        self.io.get(q).map_or(0, |io| (io.depth - 1).saturating_sub(io.busy) as usize)
    }

    /// Commands a transfer of `len` bytes takes.
    pub fn commands_for(&self, len: usize) -> usize {
        len.div_ceil(self.id.max_bytes).max(1)
    }

    /// Start a read (`write` false) or write of `len` bytes at logical block `lba` from
    /// or to the physically contiguous buffer at `pa`. Returns the request's token.
    pub fn submit(&mut self, write: bool, lba: u64, pa: u64, len: usize) -> Result<u16, Error> {
        self.submit_on(0, write, lba, pa, len)
    }

    /// The same on I/O queue `q` (`BadRequest` past the queues there are).
    pub fn submit_on(&mut self, q: usize, write: bool, lba: u64, pa: u64, len: usize) -> Result<u16, Error> {
        if q >= self.io.len() {
            return Err(Error::BadRequest);
        }
        let bs = self.id.block_size as usize;
        if len == 0 || !len.is_multiple_of(bs) || lba.checked_add((len / bs) as u64).is_none_or(|e| e > self.id.blocks)
        {
            return Err(Error::BadRequest);
        }
        let n = self.commands_for(len);
        let token = self.take_request(q, n)?;
        let (mut at, mut lba) = (0usize, lba);
        while at < len {
            let k = (len - at).min(self.id.max_bytes);
            let slot = self.take_slot(q, token);
            let (prp1, second, list) = prps(pa + at as u64, k);
            let prp2 = match second {
                Some(p) => p,
                None if list.is_empty() => 0,
                None => {
                    let s = self.slots[slot as usize];
                    for (i, e) in list.iter().enumerate() {
                        // SAFETY: the slot's list page is our DMA memory (4096 bytes) and
                        // `list` has at most 512 entries (`max_bytes` ≤ 512 pages).
                        unsafe { core::ptr::write_volatile((s.list + 8 * i as u64) as *mut u64, *e) };
                    }
                    s.list_pa
                }
            };
            let blocks = (k / bs) as u32;
            let c = Command {
                opcode: if write { WRITE } else { READ },
                cid: slot,
                nsid: 1,
                prp1,
                prp2,
                cdw10: lba as u32,
                cdw11: (lba >> 32) as u32,
                cdw12: blocks - 1,
            };
            self.io[q].push(&c);
            at += k;
            lba += blocks as u64;
        }
        let tail = self.io[q].tail;
        self.doorbell(q as u16 + 1, false, tail);
        Ok(token)
    }

    /// Start a flush of the volatile write cache (a request whose token comes back like
    /// a write's; with no volatile cache it completes at once).
    pub fn submit_flush(&mut self) -> Result<u16, Error> {
        self.submit_flush_on(0)
    }

    /// The same on I/O queue `q`.
    pub fn submit_flush_on(&mut self, q: usize) -> Result<u16, Error> {
        if q >= self.io.len() {
            return Err(Error::BadRequest);
        }
        let token = self.take_request(q, 1)?;
        if !self.id.volatile_cache {
            self.requests[token as usize] = None;
            self.done.push_back((token, Ok(())));
            return Ok(token);
        }
        let slot = self.take_slot(q, token);
        self.io[q].push(&Command { opcode: FLUSH, cid: slot, nsid: 1, ..Command::default() });
        let tail = self.io[q].tail;
        self.doorbell(q as u16 + 1, false, tail);
        self.flushes += 1;
        Ok(token)
    }

    fn take_request(&mut self, q: usize, commands: usize) -> Result<u16, Error> {
        if commands > self.free_on(q) {
            return Err(Error::Full);
        }
        let t = self.requests.iter().position(|r| r.is_none()).ok_or(Error::Full)?;
        self.requests[t] = Some(Request { left: commands as u16, result: Ok(()) });
        Ok(t as u16)
    }

    fn take_slot(&mut self, q: usize, token: u16) -> u16 {
        // The slots outnumber what the queues hold together (depth × queues, each
        // queue at most depth - 1): a queue with room always finds a free slot.
        let s = self.slots.iter().position(|s| s.request.is_none()).expect("counted free by take_request");
        self.slots[s].request = Some(token);
        self.slots[s].queue = q as u16;
        self.io[q].busy += 1;
        s as u16
    }

    /// Collect what the controller finished on every queue; a finished request
    /// (token, result), if any. Interrupts: call until None, then acknowledge the line.
    pub fn poll(&mut self) -> Option<(u16, Result<(), Error>)> {
        for q in 0..self.io.len() {
            self.reap(q);
        }
        self.done.pop_front()
    }

    /// The same for queue `q` alone (after its own interrupt).
    pub fn poll_queue(&mut self, q: usize) -> Option<(u16, Result<(), Error>)> {
        if q < self.io.len() {
            self.reap(q);
        }
        self.done.pop_front()
    }

    /// Take queue `q`'s completions. A completion is believed only when its command id
    /// names a slot in use on this very queue; any other is counted and skipped.
    fn reap(&mut self, q: usize) {
        let mut moved = false;
        while let Some(e) = self.io[q].peek() {
            self.io[q].advance();
            moved = true;
            let slot = self.slots.get_mut(e.cid as usize).filter(|s| s.queue as usize == q);
            let Some(token) = slot.as_ref().and_then(|s| s.request) else {
                self.bad_completions += 1;
                continue;
            };
            slot.unwrap().request = None;
            self.io[q].busy -= 1;
            self.completed[q] += 1;
            let r = self.requests[token as usize].as_mut().expect("a slot's request is live");
            if e.status != 0 && r.result.is_ok() {
                r.result = Err(Error::Status(e.status));
            }
            r.left -= 1;
            if r.left == 0 {
                let result = r.result;
                self.requests[token as usize] = None;
                self.done.push_back((token, result));
            }
        }
        if moved {
            let head = self.io[q].head;
            self.doorbell(q as u16 + 1, true, head);
        }
    }

    /// Spin until request `token` finishes (others that finish meanwhile are kept for
    /// `poll`).
    pub fn wait(&mut self, token: u16) -> Result<(), Error> {
        let mut kept = VecDeque::new();
        let mut r = Err(Error::Timeout);
        for _ in 0..self.spins {
            match self.poll() {
                Some((t, x)) if t == token => {
                    r = x;
                    break;
                }
                Some(other) => kept.push_back(other),
                None => core::hint::spin_loop(),
            }
        }
        kept.extend(self.done.drain(..));
        self.done = kept;
        r
    }

    /// Requests on the device.
    pub fn in_flight(&self) -> usize {
        self.requests.iter().filter(|r| r.is_some()).count()
    }
}

fn wait_ready<R: Regs>(regs: &R, ready: bool, spins: u64) -> Result<(), Error> {
    for _ in 0..spins {
        let s = regs.read32(CSTS);
        if s & 2 != 0 {
            return Err(Error::Fatal);
        }
        if (s & 1 != 0) == ready {
            return Ok(());
        }
        core::hint::spin_loop();
    }
    Err(Error::NotReady)
}
