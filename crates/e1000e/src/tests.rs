//! The driver against a model of the controller: registers, the two rings read and
//! written in (host) memory whose addresses are the "physical" ones, frames delivered
//! into the receive ring and taken off the transmit ring as the hardware does.

use super::*;
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

struct HostDma;

impl Dma for HostDma {
    fn alloc(&mut self, pages: usize) -> Option<(u64, u64)> {
        let v: Box<[u8]> = vec![0u8; (pages + 1) * 4096].into_boxed_slice();
        let a = Box::leak(v).as_mut_ptr() as u64;
        let a = (a + 4095) & !4095;
        Some((a, a))
    }
}

fn peek(a: u64, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    // SAFETY: the model reads memory the driver named by address: ring pages from
    // `HostDma` (leaked) or test buffers alive for the test.
    unsafe { core::ptr::copy_nonoverlapping(a as *const u8, v.as_mut_ptr(), n) };
    v
}
fn poke(a: u64, b: &[u8]) {
    // SAFETY: as in peek.
    unsafe { core::ptr::copy_nonoverlapping(b.as_ptr(), a as *mut u8, b.len()) };
}

#[derive(Default)]
struct Model {
    r: BTreeMap<usize, u32>,
    stuck_in_reset: bool,
    /// The EEPROM's first words (when RAH is not loaded).
    eeprom: Option<[u16; 3]>,
    sent: Vec<Vec<u8>>,
    resets: u32,
}

impl Model {
    fn new() -> Model {
        let mut m = Model::default();
        m.r.insert(RAL, u32::from_le_bytes([0x52, 0x54, 0, 0x12]));
        m.r.insert(RAH, 0x5634 | 1 << 31);
        m.r.insert(STATUS, 2);
        m
    }
    fn get(&self, off: usize) -> u32 {
        self.r.get(&off).copied().unwrap_or(0)
    }
    fn ring(&self, lo: usize, hi: usize) -> u64 {
        self.get(lo) as u64 | (self.get(hi) as u64) << 32
    }

    /// The wire brings a frame: into the descriptor at RDH if the driver gave one.
    fn deliver(&mut self, frame: &[u8], errors: u8) -> bool {
        let (head, tail) = (self.get(RDH) as usize, self.get(RDT) as usize);
        if head == tail {
            return false;
        }
        let d = self.ring(RDBAL, RDBAH) + 16 * head as u64;
        let addr = u64::from_le_bytes(peek(d, 8).try_into().unwrap());
        poke(addr, frame);
        let mut w = [0u8; 8];
        w[0..2].copy_from_slice(&(frame.len() as u16).to_le_bytes());
        w[4] = DD | EOP;
        w[5] = errors;
        poke(d + 8, &w);
        self.r.insert(RDH, ((head + 1) % RING) as u32);
        self.r.insert(ICR, self.get(ICR) | 1 << 7);
        true
    }
}

impl Regs for Model {
    fn read32(&self, off: usize) -> u32 {
        self.get(off)
    }
    fn write32(&mut self, off: usize, v: u32) {
        match off {
            CTRL if v & CTRL_RST != 0 => {
                self.resets += 1;
                let keep = if self.stuck_in_reset { v } else { v & !CTRL_RST };
                self.r.insert(CTRL, keep);
            }
            EERD => {
                let w = (v >> 2) as usize & 0x3fff;
                let data = self.eeprom.map_or(0xffff, |e| e.get(w).copied().unwrap_or(0xffff));
                self.r.insert(EERD, 2 | (data as u32) << 16);
            }
            TDT => {
                self.r.insert(TDT, v);
                let base = self.ring(TDBAL, TDBAH);
                let mut head = self.get(TDH) as usize;
                while head != v as usize {
                    let d = base + 16 * head as u64;
                    let addr = u64::from_le_bytes(peek(d, 8).try_into().unwrap());
                    let w = peek(d + 8, 4);
                    let len = u16::from_le_bytes([w[0], w[1]]) as usize;
                    assert_eq!(w[3] & (CMD_EOP | CMD_RS), CMD_EOP | CMD_RS, "a whole frame, status asked for");
                    self.sent.push(peek(addr, len));
                    poke(d + 12, &[DD]);
                    head = (head + 1) % RING;
                }
                self.r.insert(TDH, head as u32);
            }
            // Write 1 to clear.
            ICR => {
                let left = self.get(ICR) & !v;
                self.r.insert(ICR, left);
            }
            _ => {
                self.r.insert(off, v);
            }
        }
    }
}

fn up(m: Model) -> Nic<Model> {
    Nic::new(m, &mut HostDma, 1000).unwrap_or_else(|e| panic!("bring-up: {e:?}"))
}

#[test]
fn bring_up_resets_reads_the_mac_and_turns_both_rings_on() {
    let n = up(Model::new());
    assert_eq!(n.mac_address(), [0x52, 0x54, 0, 0x12, 0x34, 0x56]);
    assert_eq!(n.regs.resets, 1);
    assert_eq!(n.regs.get(RDLEN), (RING * 16) as u32);
    assert_ne!(n.regs.get(RCTL) & RCTL_EN, 0);
    assert_ne!(n.regs.get(TCTL) & TCTL_EN, 0);
    assert_ne!(n.regs.get(CTRL) & CTRL_SLU, 0, "link set up");
    assert!(n.link_up());
    assert_eq!(n.regs.get(IMC), u32::MAX, "interrupts off until asked for");
}

#[test]
fn the_mac_comes_from_the_eeprom_when_the_receive_address_is_not_loaded() {
    let mut m = Model::new();
    m.r.insert(RAH, 0);
    m.eeprom = Some([0x5452, 0x1200, 0x5634]);
    let n = up(m);
    assert_eq!(n.mac_address(), [0x52, 0x54, 0, 0x12, 0x34, 0x56]);
    assert_ne!(n.regs.get(RAH) & 1 << 31, 0, "receive address 0 made valid");
    let mut m = Model::new();
    m.r.insert(RAH, 0);
    assert_eq!(Nic::new(m, &mut HostDma, 1000).err(), Some(Error::NoMac), "an EEPROM of all ones");
}

#[test]
fn frames_are_received_in_order_through_the_ring_and_it_wraps() {
    let mut n = up(Model::new());
    let (bufs, _) = HostDma.alloc(RING * RX_BUF / 4096).unwrap();
    // Which buffer each descriptor (token) holds.
    let mut of = [0u64; RING];
    for i in 0..RING {
        let b = bufs + (i * RX_BUF) as u64;
        match n.receive_begin(b, RX_BUF) {
            Ok(t) => of[t as usize] = b,
            Err(e) => {
                assert_eq!(e, Error::Full);
                assert_eq!(i, RING - 1, "one descriptor stays empty");
                break;
            }
        }
    }
    let mut received = 0u32;
    for round in 0..5u32 {
        for k in 0..40u32 {
            let frame = vec![(round * 40 + k) as u8; 60 + k as usize];
            assert!(n.regs.deliver(&frame, 0), "round {round}: a descriptor for frame {k}");
        }
        while let Some(t) = n.poll_receive() {
            let len = n.receive_complete(t).unwrap();
            let buf = of[t as usize];
            assert_eq!(peek(buf, len), vec![(received % 256) as u8; 60 + (received % 40) as usize]);
            received += 1;
            // The buffer goes back to the device, in the descriptor before this one.
            let again = n.receive_begin(buf, RX_BUF).unwrap();
            assert_eq!(again as usize, (t as usize + RING - 1) % RING);
            of[again as usize] = buf;
        }
    }
    assert_eq!(received, 200);
}

#[test]
fn frames_are_sent_and_their_descriptors_taken_back_and_a_full_ring_refuses() {
    let mut n = up(Model::new());
    let (buf, _) = HostDma.alloc(1).unwrap();
    for i in 0..200usize {
        poke(buf, &[i as u8; 64]);
        let t = n.transmit_begin(buf, 64).unwrap();
        assert_eq!(n.poll_transmit(), Some(t));
        n.transmit_complete(t).unwrap();
    }
    assert_eq!(n.regs.sent.len(), 200);
    assert_eq!(n.regs.sent[199], vec![199u8; 64]);
    // Nothing taken back: the ring fills and refuses.
    let mut sent = 0;
    while n.transmit_begin(buf, 64).is_ok() {
        sent += 1;
    }
    assert_eq!(sent, RING - 1);
    assert_eq!(n.transmit_begin(buf, 64), Err(Error::Full));
    assert_eq!(n.transmit_in_use(), RING - 1);
}

#[test]
fn bad_frames_tokens_and_a_stuck_reset_get_errors_not_panics() {
    let mut n = up(Model::new());
    let (bufs, _) = HostDma.alloc(2).unwrap();
    assert_eq!(n.receive_begin(bufs, 100), Err(Error::BadToken), "a buffer smaller than a frame");
    let t = n.receive_begin(bufs, RX_BUF).unwrap();
    assert_eq!(n.receive_complete(t), Err(Error::BadToken), "not written back yet");
    n.regs.deliver(&[1u8; 64], 0x01);
    assert_eq!(n.receive_complete(t), Err(Error::BadFrame), "a CRC error");
    assert_eq!(n.counts.bad_frames, 1);
    // A length past the buffer the driver gave.
    let t = n.receive_begin(bufs, RX_BUF).unwrap();
    n.regs.deliver(&vec![2u8; RX_BUF], 0);
    let d = n.rx.desc(t as usize);
    poke(d + 8, &4000u16.to_le_bytes());
    assert_eq!(n.receive_complete(t), Err(Error::BadFrame));
    assert_eq!(n.transmit_complete(5), Err(Error::BadToken));
    assert_eq!(n.transmit_begin(bufs, 0), Err(Error::BadToken));
    let mut m = Model::new();
    m.stuck_in_reset = true;
    assert_eq!(Nic::new(m, &mut HostDma, 100).err(), Some(Error::ResetTimeout));
}

#[test]
fn msix_sends_every_cause_to_one_entry_and_causes_clear_by_writing_back() {
    let mut n = up(Model::new());
    n.use_msix(0);
    assert_eq!(n.regs.get(IVAR), 0x8008_0008, "RxQ0, TxQ0 and other on entry 0, each valid");
    assert_ne!(n.regs.get(CTRL_EXT) & CTRL_EXT_PBA_SUPPORT, 0);
    n.enable_interrupts();
    assert_eq!(n.regs.get(IMS), INTS | MSIX_INTS, "the queue and other causes MSI-X signals by");
    n.use_msix(3);
    assert_eq!(n.regs.get(IVAR), 0xb00b_000b);
    // Under MSI-X reading ICR does not clear it: the acknowledgement writes back what it
    // read, and a cause that was not read stays.
    n.regs.r.insert(ICR, 1 << 7 | 1 << 2);
    assert_eq!(n.ack_interrupt(), 1 << 7 | 1 << 2);
    assert_eq!(n.regs.get(ICR), 0);
    assert_eq!(n.counts.link_changes, 1);
}

#[test]
fn a_nic_with_no_link_comes_up_and_says_when_the_link_comes_and_goes() {
    // No cable: bring-up still succeeds, frames wait, nothing to tell yet.
    let mut m = Model::new();
    m.r.insert(STATUS, 0);
    let mut n = up(m);
    assert!(!n.link_up());
    assert_eq!(n.take_link_change(), None);
    let (bufs, _) = HostDma.alloc(1).unwrap();
    assert!(n.transmit_begin(bufs, 60).is_ok(), "a frame is queued, not refused");
    // The cable goes in: a link-change interrupt, the new state once.
    n.regs.r.insert(STATUS, STATUS_LU);
    n.regs.r.insert(ICR, 1 << 2);
    n.ack_interrupt();
    assert_eq!(n.take_link_change(), Some(true));
    assert_eq!(n.take_link_change(), None);
    // An interrupt with no change of state tells nothing; the cable out tells down.
    n.regs.r.insert(ICR, 1 << 2);
    n.ack_interrupt();
    assert_eq!(n.take_link_change(), None);
    n.regs.r.insert(STATUS, 0);
    n.regs.r.insert(ICR, 1 << 2);
    n.ack_interrupt();
    assert_eq!(n.take_link_change(), Some(false));
    assert_eq!(n.counts.link_changes, 3);
}
