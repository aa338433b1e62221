//! The driver against a model of an NVMe controller: registers, doorbells, queues read
//! and written in (host) memory whose addresses are the "physical" ones, a namespace in
//! a byte vector. The model checks what the driver hands it (PRP lists, queue sizes) as
//! a controller would, and misbehaves on request.

use super::*;
use alloc::boxed::Box;
use alloc::vec;

/// Host memory as DMA memory: pages leaked, the address is both virtual and physical.
struct HostDma {
    pages: usize,
}

impl Dma for HostDma {
    fn alloc(&mut self, pages: usize) -> Option<(u64, u64)> {
        let v: Box<[u8]> = vec![0u8; (pages + 1) * PAGE].into_boxed_slice();
        let a = Box::leak(v).as_mut_ptr() as u64;
        let a = (a + PAGE as u64 - 1) & !(PAGE as u64 - 1);
        self.pages += pages;
        Some((a, a))
    }
}

fn rd32(a: u64) -> u32 {
    // SAFETY: the model reads only memory the driver gave it by address: pages from
    // `HostDma` (leaked, never freed) or test buffers alive for the test.
    unsafe { core::ptr::read_volatile(a as *const u32) }
}
fn wr32(a: u64, v: u32) {
    // SAFETY: as in rd32.
    unsafe { core::ptr::write_volatile(a as *mut u32, v) }
}
fn copy_in(a: u64, buf: &[u8]) {
    // SAFETY: as in rd32; `buf.len()` bytes at `a` are a test buffer or DMA page.
    unsafe { core::ptr::copy_nonoverlapping(buf.as_ptr(), a as *mut u8, buf.len()) }
}
fn copy_out(a: u64, buf: &mut [u8]) {
    // SAFETY: as in copy_in.
    unsafe { core::ptr::copy_nonoverlapping(a as *const u8, buf.as_mut_ptr(), buf.len()) }
}

#[derive(Default, Clone, Copy)]
struct Q {
    sq: u64,
    cq: u64,
    depth: u16,
    head: u16,
    cq_tail: u16,
    phase: bool,
}

#[derive(Default)]
struct Model {
    cc: u32,
    csts: u32,
    aqa: u32,
    asq: u64,
    acq: u64,
    mqes: u16,
    dstrd: u64,
    /// Queue 0 (admin) and the I/O queues 1..=`max_queues`.
    queues: Vec<Q>,
    /// I/O queue pairs the controller grants at most.
    max_queues: u16,
    /// Granted by Set Features (1 until asked).
    granted: u16,
    /// The interrupt vector of each I/O completion queue (by queue id).
    vectors: Vec<Option<u16>>,
    /// Dword 0 of the next completion.
    dw0: u32,
    disk: Vec<u8>,
    lba_shift: u32,
    mdts: u8,
    vwc: bool,
    flushes: u32,
    /// Commands seen: (queue, command).
    seen: Vec<(u16, Command)>,
    never_ready: bool,
    /// Post this many completions with a command id nobody sent, before the real one.
    stray: u32,
    /// Fail commands touching this LBA.
    bad_lba: Option<u64>,
    /// The most pages a command moved.
    most_pages: usize,
}

impl Model {
    fn new(blocks: u64, lba_shift: u32) -> Model {
        Model {
            mqes: 1023,
            disk: vec![0u8; (blocks << lba_shift) as usize],
            lba_shift,
            mdts: 2,
            vwc: true,
            queues: vec![Q::default(); 5],
            max_queues: 4,
            granted: 1,
            vectors: vec![None; 5],
            ..Model::default()
        }
    }

    fn post(&mut self, q: usize, cid: u16, status: u16) {
        let qq = &mut self.queues[q];
        let at = qq.cq + qq.cq_tail as u64 * 16;
        let dw0 = core::mem::take(&mut self.dw0);
        let c = Completion { dw0, sq_head: qq.head, cid, phase: !qq.phase, status };
        // The phase starts at 1: `phase` false means 1 in this model's first pass.
        let w = c.to_words();
        for (i, x) in w.iter().enumerate() {
            wr32(at + 4 * i as u64, *x);
        }
        qq.cq_tail += 1;
        if qq.cq_tail == qq.depth {
            qq.cq_tail = 0;
            qq.phase = !qq.phase;
        }
    }

    /// The pages a command's PRPs name, checked as a controller checks them.
    fn pages(&self, c: &Command, len: usize) -> Result<Vec<(u64, usize)>, u16> {
        let mut out = Vec::new();
        let first = (PAGE - (c.prp1 as usize % PAGE)).min(len);
        out.push((c.prp1, first));
        let mut left = len - first;
        if left == 0 {
            return Ok(out);
        }
        if left <= PAGE {
            if !c.prp2.is_multiple_of(PAGE as u64) {
                return Err(0x13); // PRP offset invalid
            }
            out.push((c.prp2, left));
            return Ok(out);
        }
        if c.prp2 == 0 || !c.prp2.is_multiple_of(8) {
            return Err(0x13);
        }
        let mut i = 0;
        while left > 0 {
            let e = rd32(c.prp2 + 8 * i) as u64 | (rd32(c.prp2 + 8 * i + 4) as u64) << 32;
            if !e.is_multiple_of(PAGE as u64) {
                return Err(0x13);
            }
            let k = left.min(PAGE);
            out.push((e, k));
            left -= k;
            i += 1;
        }
        Ok(out)
    }

    fn run(&mut self, q: usize, c: Command) -> u16 {
        self.seen.push((q as u16, c));
        if q == 0 {
            return match c.opcode {
                IDENTIFY => {
                    let mut page = vec![0u8; PAGE];
                    if c.cdw10 == 1 {
                        page[77] = self.mdts;
                        page[525] = self.vwc as u8;
                        page[516] = 1;
                    } else if c.nsid == 1 {
                        let blocks = (self.disk.len() >> self.lba_shift) as u64;
                        page[0..8].copy_from_slice(&blocks.to_le_bytes());
                        page[26] = 1; // format 1
                        page[128 + 4..128 + 8].copy_from_slice(&(self.lba_shift << 16).to_le_bytes());
                    } else {
                        return 0x0b; // invalid namespace
                    }
                    copy_in(c.prp1, &page);
                    0
                }
                SET_FEATURES if c.cdw10 & 0xff == FEATURE_QUEUES => {
                    let ask = (c.cdw11 & 0xffff).max(c.cdw11 >> 16) as u16 + 1;
                    self.granted = ask.min(self.max_queues);
                    let g = self.granted as u32 - 1;
                    self.dw0 = g | g << 16;
                    0
                }
                CREATE_CQ | CREATE_SQ => {
                    let (qid, size) = ((c.cdw10 & 0xffff) as u16, (c.cdw10 >> 16) as u16 + 1);
                    if qid == 0 || qid > self.granted || size > self.mqes + 1 || c.cdw11 & 1 == 0 {
                        return 0x102; // invalid queue
                    }
                    let qq = &mut self.queues[qid as usize];
                    qq.depth = size;
                    if c.opcode == CREATE_CQ {
                        qq.cq = c.prp1;
                        self.vectors[qid as usize] = Some((c.cdw11 >> 16) as u16);
                    } else {
                        if c.cdw11 >> 16 != qid as u32 {
                            return 0x100; // completion queue invalid
                        }
                        qq.sq = c.prp1;
                    }
                    0
                }
                _ => 0x01, // invalid opcode
            };
        }
        match c.opcode {
            FLUSH => {
                self.flushes += 1;
                0
            }
            READ | WRITE => {
                let lba = c.cdw10 as u64 | (c.cdw11 as u64) << 32;
                let n = (c.cdw12 & 0xffff) as u64 + 1;
                let bytes = (n << self.lba_shift) as usize;
                if (lba + n) << self.lba_shift > self.disk.len() as u64 {
                    return 0x80; // LBA out of range
                }
                if self.bad_lba.is_some_and(|b| (lba..lba + n).contains(&b)) {
                    return 0x281; // unrecovered read error
                }
                if bytes > PAGE << self.mdts {
                    return 0x02; // invalid field
                }
                let pages = match self.pages(&c, bytes) {
                    Ok(p) => p,
                    Err(s) => return s,
                };
                self.most_pages = self.most_pages.max(pages.len());
                let mut at = (lba << self.lba_shift) as usize;
                for (a, k) in pages {
                    if c.opcode == WRITE {
                        copy_out(a, &mut self.disk[at..at + k]);
                    } else {
                        copy_in(a, &self.disk[at..at + k]);
                    }
                    at += k;
                }
                0
            }
            _ => 0x01,
        }
    }

    fn doorbell(&mut self, q: usize, tail: u16) {
        let (sq, depth) =
            if q == 0 { (self.asq, (self.aqa & 0xfff) as u16 + 1) } else { (self.queues[q].sq, self.queues[q].depth) };
        while self.queues[q].head != tail {
            let at = sq + self.queues[q].head as u64 * 64;
            let mut w = [0u32; 16];
            for (i, x) in w.iter_mut().enumerate() {
                *x = rd32(at + 4 * i as u64);
            }
            self.queues[q].head = (self.queues[q].head + 1) % depth;
            let c = Command::from_words(&w);
            let status = self.run(q, c);
            for _ in 0..self.stray {
                self.post(q, 0x7777, 0);
            }
            self.stray = 0;
            self.post(q, c.cid, status);
        }
    }
}

impl Regs for Model {
    fn read32(&self, off: usize) -> u32 {
        match off {
            0x00 => self.mqes as u32 | 1 << 16,   // MQES, contiguous queues required
            0x04 => (self.dstrd as u32) | 1 << 5, // DSTRD; CSS bit 37: NVM
            0x14 => self.cc,
            0x1c => self.csts,
            _ => 0,
        }
    }

    fn write32(&mut self, off: usize, v: u32) {
        match off {
            0x14 => {
                self.cc = v;
                if v & 1 != 0 {
                    let depth = (self.aqa & 0xfff) as u16 + 1;
                    self.queues[0] = Q { sq: self.asq, cq: self.acq, depth, head: 0, cq_tail: 0, phase: false };
                    if !self.never_ready {
                        self.csts |= 1;
                    }
                } else {
                    self.csts &= !1;
                }
            }
            0x24 => self.aqa = v,
            0x28 => self.asq = self.asq & !0xffff_ffff | v as u64,
            0x2c => self.asq = self.asq & 0xffff_ffff | (v as u64) << 32,
            0x30 => self.acq = self.acq & !0xffff_ffff | v as u64,
            0x34 => self.acq = self.acq & 0xffff_ffff | (v as u64) << 32,
            o if o >= 0x1000 => {
                let stride = 4usize << self.dstrd;
                let k = (o - 0x1000) / stride;
                let (q, completion) = (k / 2, k % 2 == 1);
                assert!(q <= self.granted as usize, "a doorbell of a queue never made: {q}");
                if !completion {
                    self.doorbell(q, v as u16);
                }
            }
            _ => {}
        }
    }
}

fn up(m: Model) -> (Controller<Model>, HostDma) {
    let mut dma = HostDma { pages: 0 };
    let c = Controller::new(m, &mut dma, 10_000).unwrap_or_else(|e| panic!("bring-up: {e:?}"));
    (c, dma)
}

fn buffer(pages: usize) -> (Vec<u8>, u64) {
    let mut dma = HostDma { pages: 0 };
    let (a, _) = dma.alloc(pages).unwrap();
    (Vec::new(), a)
}

#[test]
fn bring_up_identifies_the_namespace_and_makes_one_io_queue_pair() {
    let (c, _) = up(Model::new(2048, 9));
    assert_eq!(c.id.block_size, 512);
    assert_eq!(c.id.blocks, 2048);
    assert!(c.id.volatile_cache);
    assert_eq!(c.id.max_bytes, PAGE << 2, "MDTS 2: four pages");
    assert_eq!(c.id.queue_depth, IO_DEPTH);
    let ops: Vec<u8> = c.regs.seen.iter().map(|(_, k)| k.opcode).collect();
    assert_eq!(ops, vec![IDENTIFY, IDENTIFY, CREATE_CQ, CREATE_SQ], "the completion queue before the submission queue");
    assert_eq!(c.regs.cc & 1, 1);
    assert_eq!(c.regs.cc >> 16 & 0xf, 6, "64-byte submission entries");
}

#[test]
fn reads_and_writes_of_every_length_go_through_prp_lists_and_split_at_mdts() {
    let (mut c, _) = up(Model::new(4096, 9));
    let (_, buf) = buffer(16);
    // 16 pages: four commands of four pages (MDTS), each with a PRP list.
    let data: Vec<u8> = (0..16 * PAGE).map(|i| (i * 7 + i / 4096) as u8).collect();
    copy_in(buf, &data);
    let t = c.submit(true, 8, buf, 16 * PAGE).unwrap();
    assert_eq!(c.wait(t), Ok(()));
    assert_eq!(&c.regs.disk[8 * 512..8 * 512 + 16 * PAGE], &data[..]);
    assert_eq!(c.regs.most_pages, 4);
    assert_eq!(c.regs.seen.iter().filter(|(q, k)| *q == 1 && k.opcode == WRITE).count(), 4);
    // One page, two pages, an odd start inside a page (PRP1 with an offset), 512 bytes.
    for (off, len) in [(0usize, PAGE), (0, 2 * PAGE), (512, 3 * PAGE), (1024, 512), (0, 3 * PAGE + 512)] {
        let zero = vec![0u8; len];
        copy_in(buf + off as u64, &zero);
        let t = c.submit(false, 8, buf + off as u64, len).unwrap();
        assert_eq!(c.wait(t), Ok(()), "{off} {len}");
        let mut got = vec![0u8; len];
        copy_out(buf + off as u64, &mut got);
        assert_eq!(&got[..], &data[..len], "read of {len} bytes at offset {off}");
    }
    assert_eq!(c.in_flight(), 0);
}

#[test]
fn the_phase_turns_over_and_many_requests_finish_out_of_order_of_asking() {
    let (mut c, _) = up(Model::new(1 << 14, 12));
    let (_, buf) = buffer(1);
    // More requests than the queue has entries, in rounds: the completion queue wraps
    // and its phase flips several times.
    for round in 0..10u64 {
        let mut tokens = Vec::new();
        for k in 0..40u64 {
            copy_in(buf, &[(round * 40 + k) as u8; 8]);
            tokens.push(c.submit(true, round * 40 + k, buf, PAGE).unwrap());
        }
        let mut finished = Vec::new();
        while let Some((t, r)) = c.poll() {
            assert_eq!(r, Ok(()));
            finished.push(t);
        }
        finished.sort();
        tokens.sort();
        assert_eq!(finished, tokens, "round {round}");
    }
    for b in 0..400usize {
        assert_eq!(c.regs.disk[b * PAGE], b as u8);
    }
}

#[test]
fn a_full_queue_refuses_a_request_whole_and_takes_it_once_room_is_made() {
    let mut m = Model::new(1 << 14, 12);
    m.mqes = 7; // eight entries: seven commands at once
    let (mut c, _) = up(m);
    let (_, buf) = buffer(12);
    assert_eq!(c.free_slots(), 7);
    // A request of two commands (MDTS 2: 4 pages each) and more: 5 + 2 = 7.
    let mut tokens = Vec::new();
    for _ in 0..5 {
        tokens.push(c.submit(false, 0, buf, PAGE).unwrap());
    }
    // The model completes at once, but nothing is collected yet: the slots stay taken.
    assert_eq!(c.submit(false, 0, buf, 12 * PAGE), Err(Error::Full), "three commands, two slots");
    assert!(c.submit(false, 0, buf, 8 * PAGE).is_ok());
    assert_eq!(c.submit(false, 0, buf, PAGE), Err(Error::Full));
    while c.poll().is_some() {}
    assert_eq!(c.free_slots(), 7);
    assert!(c.submit(false, 0, buf, 12 * PAGE).is_ok());
}

#[test]
fn flush_goes_to_a_volatile_cache_only() {
    let (mut c, _) = up(Model::new(64, 12));
    let t = c.submit_flush().unwrap();
    assert_eq!(c.wait(t), Ok(()));
    assert_eq!((c.regs.flushes, c.flushes), (1, 1));
    let mut m = Model::new(64, 12);
    m.vwc = false;
    let (mut c, _) = up(m);
    let t = c.submit_flush().unwrap();
    assert_eq!(c.wait(t), Ok(()));
    assert_eq!(c.regs.flushes, 0, "no volatile cache: nothing to flush");
}

#[test]
fn bad_input_and_a_misbehaving_controller_get_errors_not_panics() {
    let (mut c, _) = up(Model::new(64, 12));
    let (_, buf) = buffer(1);
    assert_eq!(c.submit(false, 0, buf, 100), Err(Error::BadRequest), "not whole blocks");
    assert_eq!(c.submit(false, 0, buf, 0), Err(Error::BadRequest));
    assert_eq!(c.submit(false, 64, buf, PAGE), Err(Error::BadRequest), "past the end");
    assert_eq!(c.submit(false, u64::MAX, buf, PAGE), Err(Error::BadRequest), "overflow");
    // A failing block: the request's first failure is its answer; the split request's
    // other commands still free their slots.
    c.regs.bad_lba = Some(5);
    let (_, big) = buffer(8);
    let t = c.submit(false, 0, big, 8 * PAGE).unwrap();
    assert_eq!(c.wait(t), Err(Error::Status(0x281)));
    assert_eq!(c.in_flight(), 0);
    // Completions naming commands nobody sent are counted and skipped.
    c.regs.bad_lba = None;
    c.regs.stray = 3;
    let t = c.submit(false, 0, buf, PAGE).unwrap();
    assert_eq!(c.wait(t), Ok(()));
    assert_eq!(c.bad_completions, 3);
    // A controller that never becomes ready.
    let mut m = Model::new(64, 12);
    m.never_ready = true;
    let mut dma = HostDma { pages: 0 };
    assert_eq!(Controller::new(m, &mut dma, 1000).err(), Some(Error::NotReady));
    // A namespace of metadata-carrying or odd blocks is refused.
    let m = Model::new(64, 13);
    assert!(matches!(Controller::new(m, &mut dma, 1000).err(), Some(Error::Unsupported(_))));
    let m = Model::new(0, 12);
    assert_eq!(Controller::new(m, &mut dma, 1000).err(), Some(Error::NoNamespace));
}

#[test]
fn prps_name_each_page_once() {
    assert_eq!(prps(0x1000, 4096), (0x1000, None, vec![]));
    assert_eq!(prps(0x1200, 512), (0x1200, None, vec![]));
    assert_eq!(prps(0x1200, 4096), (0x1200, Some(0x2000), vec![]));
    assert_eq!(prps(0x1000, 8192), (0x1000, Some(0x2000), vec![]));
    assert_eq!(prps(0x1000, 3 * 4096), (0x1000, None, vec![0x2000, 0x3000]));
    assert_eq!(prps(0x1800, 3 * 4096), (0x1800, None, vec![0x2000, 0x3000, 0x4000]));
}

#[test]
fn commands_and_completions_round_trip_through_their_words() {
    let c = Command { opcode: 2, cid: 77, nsid: 1, prp1: 1 << 40 | 5, prp2: 9, cdw10: 3, cdw11: 4, cdw12: 7 };
    assert_eq!(Command::from_words(&c.to_words()), c);
    let e = Completion { dw0: 1, sq_head: 3, cid: 0xfffe, phase: true, status: 0x281 };
    assert_eq!(Completion::from_words(e.to_words()), e);
}

#[test]
fn one_queue_pair_per_cpu_each_on_its_own_vector() {
    let mut dma = HostDma { pages: 0 };
    let mut c = Controller::with_queues(Model::new(2048, 9), &mut dma, 10_000, 2).unwrap();
    assert_eq!(c.queues(), 2);
    assert_eq!(c.regs.vectors[1..3], [Some(0), Some(1)], "queue q completes on vector q");
    let ops: Vec<u8> = c.regs.seen.iter().map(|(_, k)| k.opcode).collect();
    assert_eq!(ops, vec![IDENTIFY, IDENTIFY, SET_FEATURES, CREATE_CQ, CREATE_SQ, CREATE_CQ, CREATE_SQ]);
    // A write on queue 1 is read back on queue 0; each queue counts its own.
    let (_, buf) = buffer(2);
    copy_in(buf, &[0x5a; 1024]);
    let t = c.submit_on(1, true, 8, buf, 1024).unwrap();
    assert_eq!(c.wait(t), Ok(()));
    copy_in(buf, &[0; 1024]);
    let t = c.submit_on(0, false, 8, buf, 1024).unwrap();
    assert_eq!(c.wait(t), Ok(()));
    let mut back = [0u8; 1024];
    copy_out(buf, &mut back);
    assert_eq!(back, [0x5a; 1024]);
    assert_eq!(c.completed, vec![1, 1]);
    assert_eq!(c.regs.seen.iter().filter(|(q, k)| *q == 2 && k.opcode == WRITE).count(), 1);
    // Each queue fills on its own: queue 0 full still leaves queue 1 its room.
    let depth = c.id.queue_depth as usize;
    let mut held = Vec::new();
    for _ in 0..depth - 1 {
        held.push(c.submit_on(0, false, 0, buf, 512).unwrap());
    }
    assert_eq!(c.submit_on(0, false, 0, buf, 512), Err(Error::Full));
    assert_eq!(c.free_on(1), depth - 1);
    assert!(c.submit_on(1, false, 0, buf, 512).is_ok());
    assert_eq!(c.submit_on(2, false, 0, buf, 512), Err(Error::BadRequest), "no third queue");
    // Completions come back per queue.
    let mut n = 0;
    while c.poll_queue(1).is_some() {
        n += 1;
    }
    assert_eq!(n, 1, "queue 1's own completion only");
    while c.poll().is_some() {}
    assert_eq!(c.in_flight(), 0);
}

#[test]
fn a_controller_that_grants_fewer_queues_gets_that_many() {
    let mut m = Model::new(64, 12);
    m.max_queues = 1;
    let mut dma = HostDma { pages: 0 };
    let c = Controller::with_queues(m, &mut dma, 10_000, 8).unwrap();
    assert_eq!(c.queues(), 1);
}

#[test]
fn a_completion_on_the_wrong_queue_is_not_believed() {
    let mut dma = HostDma { pages: 0 };
    let mut c = Controller::with_queues(Model::new(2048, 9), &mut dma, 10_000, 2).unwrap();
    let (_, buf) = buffer(1);
    // A command on queue 0 holds slot 0; a completion for cid 0 posted on queue 1 (a
    // controller that confuses its queues) is counted, and the request stays.
    let t = c.submit_on(0, false, 0, buf, 512).unwrap();
    c.regs.post(2, 0, 0);
    assert!(c.poll_queue(1).is_none());
    assert_eq!(c.bad_completions, 1);
    assert_eq!(c.wait(t), Ok(()));
}
