//! An Intel 82574 Ethernet controller (QEMU's `e1000e`; its programming model — the
//! legacy descriptors, RCTL/TCTL, RAL/RAH, ICR/IMS — is the one the 8254x/82571-82574
//! family shares), driven at user level: registers through [`Regs`] (BAR 0), the
//! descriptor rings in DMA memory from [`Dma`]. What a network stack needs: reset, the
//! MAC address, link up, one receive and one transmit ring of legacy descriptors, and
//! frames handed over by token the way `virtio-drivers`' raw net device does
//! (`receive_begin` / `poll_receive` / `receive_complete`, `transmit_begin` /
//! `poll_transmit` / `transmit_complete`), so a driver can put either under one stack.
//! Every value the device writes back (a length, a ring head) is checked: a
//! misbehaving device gets an [`Error`] or a dropped frame, never a panic.
//!
//! Interrupts: receive timer, transmit written back and link change, on INTx (or MSI);
//! [`Nic::ack_interrupt`] reads ICR, which clears them.
#![no_std]

extern crate alloc;

use core::sync::atomic::{fence, Ordering};

#[cfg(test)]
mod tests;

/// The controller's registers (offsets in bytes into BAR 0).
pub trait Regs {
    fn read32(&self, off: usize) -> u32;
    fn write32(&mut self, off: usize, v: u32);
}

/// DMA memory: `pages` physically contiguous, zeroed 4 KiB pages, mapped here at the
/// first address and seen by the device at the second.
pub trait Dma {
    fn alloc(&mut self, pages: usize) -> Option<(u64, u64)>;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The reset did not finish within the spin bound.
    ResetTimeout,
    /// No MAC address in RAL/RAH, nor from the EEPROM.
    NoMac,
    NoMemory,
    /// The ring has no free descriptor.
    Full,
    /// A token that is not the next one finished, or a buffer too large.
    BadToken,
    /// The device marked the frame bad (its error bits) or wrote a length past the buffer.
    BadFrame,
}

pub const CTRL: usize = 0x0000;
pub const STATUS: usize = 0x0008;
/// STATUS: link up.
pub const STATUS_LU: u32 = 1 << 1;
pub const EERD: usize = 0x0014;
pub const CTRL_EXT: usize = 0x0018;
/// Interrupt vector allocation (MSI-X): which MSI-X entry each cause goes to.
pub const IVAR: usize = 0x00e4;
/// CTRL_EXT: the pending-bit array is in use (set with MSI-X).
pub const CTRL_EXT_PBA_SUPPORT: u32 = 1 << 31;
/// The causes MSI-X signals by (receive queue 0, transmit queue 0, other), which IVAR
/// routes: they must be enabled in IMS beside the ordinary ones.
pub const MSIX_INTS: u32 = 1 << 20 | 1 << 22 | 1 << 24;
pub const ICR: usize = 0x00c0;
pub const IMS: usize = 0x00d0;
/// Interrupt cause set: causes written here are raised as if the device had.
pub const ICS: usize = 0x00c8;
pub const IMC: usize = 0x00d8;
pub const RCTL: usize = 0x0100;
pub const TCTL: usize = 0x0400;
pub const TIPG: usize = 0x0410;
pub const RDBAL: usize = 0x2800;
pub const RDBAH: usize = 0x2804;
pub const RDLEN: usize = 0x2808;
pub const RDH: usize = 0x2810;
pub const RDT: usize = 0x2818;
pub const TDBAL: usize = 0x3800;
pub const TDBAH: usize = 0x3804;
pub const TDLEN: usize = 0x3808;
pub const TDH: usize = 0x3810;
pub const TDT: usize = 0x3818;
pub const MTA: usize = 0x5200;
pub const RAL: usize = 0x5400;
pub const RAH: usize = 0x5404;

pub const CTRL_RST: u32 = 1 << 26;
pub const CTRL_SLU: u32 = 1 << 6;
pub const CTRL_ASDE: u32 = 1 << 5;
pub const RCTL_EN: u32 = 1 << 1;
pub const RCTL_BAM: u32 = 1 << 15;
pub const RCTL_SECRC: u32 = 1 << 26;
pub const TCTL_EN: u32 = 1 << 1;
pub const TCTL_PSP: u32 = 1 << 3;
/// Interrupt causes: transmit descriptor written back, link status change, receive
/// overrun, receive timer.
pub const INTS: u32 = 1 | 1 << 2 | 1 << 6 | 1 << 7;

/// Descriptor status: done, end of packet.
const DD: u8 = 1;
const EOP: u8 = 2;
/// Transmit command: end of packet, insert FCS, report status.
const CMD_EOP: u8 = 1;
const CMD_IFCS: u8 = 2;
const CMD_RS: u8 = 8;

/// Descriptors per ring (each 16 bytes: one page holds 256).
pub const RING: usize = 64;
/// Receive buffers are 2048 bytes (RCTL.BSIZE 0).
pub const RX_BUF: usize = 2048;

struct Ring {
    va: u64,
    /// The next descriptor the driver fills (its tail).
    tail: usize,
    /// The oldest descriptor handed to the device and not taken back.
    next: usize,
}

impl Ring {
    fn desc(&self, i: usize) -> u64 {
        self.va + 16 * (i % RING) as u64
    }

    fn write(&self, i: usize, addr: u64, w2: u32, w3: u32) {
        let d = self.desc(i);
        // SAFETY: the ring is RING descriptors of 16 bytes in DMA memory of ours (from
        // `Dma::alloc`, never freed); `desc` keeps the index in the ring.
        unsafe {
            core::ptr::write_volatile(d as *mut u64, addr);
            core::ptr::write_volatile((d + 8) as *mut u32, w2);
            core::ptr::write_volatile((d + 12) as *mut u32, w3);
        }
    }

    fn words(&self, i: usize) -> (u32, u32) {
        let d = self.desc(i);
        // SAFETY: as in write.
        unsafe { (core::ptr::read_volatile((d + 8) as *const u32), core::ptr::read_volatile((d + 12) as *const u32)) }
    }

    fn in_use(&self) -> usize {
        (self.tail + RING - self.next) % RING
    }
}

/// Frames counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub bad_frames: u64,
    pub link_changes: u64,
}

pub struct Nic<R: Regs> {
    pub regs: R,
    rx: Ring,
    tx: Ring,
    /// Each receive descriptor's buffer length (what the device may write).
    rx_len: [u16; RING],
    mac: [u8; 6],
    pub counts: Counts,
    /// Interrupts by MSI-X (`use_msix`).
    msix: bool,
    /// The link as last seen (STATUS.LU), and a change not yet taken (`take_link_change`).
    link: bool,
    link_news: Option<bool>,
}

impl<R: Regs> Nic<R> {
    /// Reset the controller and bring it up: interrupts off, the MAC address, link up,
    /// both rings (empty), receive and transmit on. `spins` bounds the wait for reset.
    pub fn new(mut regs: R, dma: &mut dyn Dma, spins: u64) -> Result<Nic<R>, Error> {
        regs.write32(IMC, u32::MAX);
        regs.write32(CTRL, regs.read32(CTRL) | CTRL_RST);
        let mut done = false;
        for _ in 0..spins {
            if regs.read32(CTRL) & CTRL_RST == 0 {
                done = true;
                break;
            }
            core::hint::spin_loop();
        }
        if !done {
            return Err(Error::ResetTimeout);
        }
        regs.write32(IMC, u32::MAX);
        let _ = regs.read32(ICR);
        let mac = read_mac(&mut regs, spins).ok_or(Error::NoMac)?;
        regs.write32(CTRL, (regs.read32(CTRL) | CTRL_SLU | CTRL_ASDE) & !CTRL_RST);
        for k in 0..128 {
            regs.write32(MTA + 4 * k, 0);
        }
        let (rx_va, rx_pa) = dma.alloc(1).ok_or(Error::NoMemory)?;
        let (tx_va, tx_pa) = dma.alloc(1).ok_or(Error::NoMemory)?;
        regs.write32(RDBAL, rx_pa as u32);
        regs.write32(RDBAH, (rx_pa >> 32) as u32);
        regs.write32(RDLEN, (RING * 16) as u32);
        regs.write32(RDH, 0);
        regs.write32(RDT, 0);
        regs.write32(TDBAL, tx_pa as u32);
        regs.write32(TDBAH, (tx_pa >> 32) as u32);
        regs.write32(TDLEN, (RING * 16) as u32);
        regs.write32(TDH, 0);
        regs.write32(TDT, 0);
        // Broadcasts accepted, 2048-byte buffers, the CRC stripped.
        regs.write32(RCTL, RCTL_EN | RCTL_BAM | RCTL_SECRC);
        // Pad short frames, collision threshold 15, collision distance 63 (full duplex).
        regs.write32(TCTL, TCTL_EN | TCTL_PSP | 0x0f << 4 | 0x3f << 12);
        regs.write32(TIPG, 10 | 8 << 10 | 6 << 20);
        // No link (a cable out, the peer off) is no failure: frames wait for it, and its
        // coming is a link-change interrupt.
        let link = regs.read32(STATUS) & STATUS_LU != 0;
        Ok(Nic {
            regs,
            rx: Ring { va: rx_va, tail: 0, next: 0 },
            tx: Ring { va: tx_va, tail: 0, next: 0 },
            rx_len: [0; RING],
            mac,
            counts: Counts::default(),
            msix: false,
            link,
            link_news: None,
        })
    }

    pub fn mac_address(&self) -> [u8; 6] {
        self.mac
    }

    /// Whether the link is up (STATUS.LU).
    pub fn link_up(&self) -> bool {
        self.regs.read32(STATUS) & STATUS_LU != 0
    }

    /// The link's new state if it changed since bring-up or the last call (read at each
    /// link-change interrupt: a driver says it on the console).
    pub fn take_link_change(&mut self) -> Option<bool> {
        self.link_news.take()
    }

    pub fn enable_interrupts(&mut self) {
        self.regs.write32(IMS, if self.msix { INTS | MSIX_INTS } else { INTS });
    }

    /// Raise interrupt `causes` by hand (ICS), as the device would; an interrupt follows
    /// if they are enabled (a test of where the device's messages go).
    pub fn raise(&mut self, causes: u32) {
        self.regs.write32(ICS, causes);
    }

    /// Send every interrupt cause — receive queue 0, transmit queue 0 and the others
    /// (link) — to MSI-X entry `entry` (0..5): IVAR's three fields with their valid
    /// bits, and the pending-bit array on (82574 datasheet, 10.2.4.9).
    pub fn use_msix(&mut self, entry: u8) {
        let v = (entry as u32 & 7) | 8;
        self.regs.write32(IVAR, v | v << 16 | v << 28);
        let ext = self.regs.read32(CTRL_EXT);
        self.regs.write32(CTRL_EXT, ext | CTRL_EXT_PBA_SUPPORT);
        self.msix = true;
    }

    /// Read the interrupt causes and clear them (a read clears them under INTx; under
    /// MSI-X it does not, so they are written back, which clears what was read and
    /// nothing that came since); a link change is counted.
    pub fn ack_interrupt(&mut self) -> u32 {
        let icr = self.regs.read32(ICR);
        if icr != 0 {
            self.regs.write32(ICR, icr);
        }
        if icr & 1 << 2 != 0 {
            self.counts.link_changes += 1;
            let up = self.link_up();
            if up != self.link {
                self.link = up;
                self.link_news = Some(up);
            }
        }
        icr
    }

    /// Hand the device a receive buffer at physical `pa`, `len` bytes (at least
    /// [`RX_BUF`]); its token.
    pub fn receive_begin(&mut self, pa: u64, len: usize) -> Result<u16, Error> {
        if len < RX_BUF {
            return Err(Error::BadToken);
        }
        // One descriptor stays empty: a full ring's tail would meet its head.
        if self.rx.in_use() >= RING - 1 {
            return Err(Error::Full);
        }
        let i = self.rx.tail;
        self.rx.write(i, pa, 0, 0);
        self.rx_len[i] = len.min(u16::MAX as usize) as u16;
        self.rx.tail = (i + 1) % RING;
        fence(Ordering::Release);
        self.regs.write32(RDT, self.rx.tail as u32);
        Ok(i as u16)
    }

    /// The token of the oldest received frame, if the device has written it back.
    pub fn poll_receive(&self) -> Option<u16> {
        if self.rx.in_use() == 0 {
            return None;
        }
        let (_, w3) = self.rx.words(self.rx.next);
        (w3 as u8 & DD != 0).then_some(self.rx.next as u16)
    }

    /// Take received frame `token` back: its length (the bytes at the start of its
    /// buffer). A frame the device marked bad, or in pieces, is an error (the buffer is
    /// free again all the same).
    pub fn receive_complete(&mut self, token: u16) -> Result<usize, Error> {
        if token as usize != self.rx.next || self.poll_receive() != Some(token) {
            return Err(Error::BadToken);
        }
        fence(Ordering::Acquire);
        let (w2, w3) = self.rx.words(self.rx.next);
        let len = (w2 & 0xffff) as usize;
        let (status, errors) = (w3 as u8, (w3 >> 8) as u8);
        let limit = self.rx_len[self.rx.next] as usize;
        self.rx.next = (self.rx.next + 1) % RING;
        if status & EOP == 0 || errors != 0 || len == 0 || len > limit {
            self.counts.bad_frames += 1;
            return Err(Error::BadFrame);
        }
        Ok(len)
    }

    /// Send the `len`-byte frame at physical `pa`; its token.
    pub fn transmit_begin(&mut self, pa: u64, len: usize) -> Result<u16, Error> {
        if len == 0 || len > 16 * 1024 {
            return Err(Error::BadToken);
        }
        if self.tx.in_use() >= RING - 1 {
            return Err(Error::Full);
        }
        let i = self.tx.tail;
        let cmd = (CMD_EOP | CMD_IFCS | CMD_RS) as u32;
        self.tx.write(i, pa, len as u32 | cmd << 24, 0);
        self.tx.tail = (i + 1) % RING;
        fence(Ordering::Release);
        self.regs.write32(TDT, self.tx.tail as u32);
        Ok(i as u16)
    }

    /// The token of the oldest sent frame the device is done with, if any.
    pub fn poll_transmit(&self) -> Option<u16> {
        if self.tx.in_use() == 0 {
            return None;
        }
        let (_, w3) = self.tx.words(self.tx.next);
        (w3 as u8 & DD != 0).then_some(self.tx.next as u16)
    }

    /// Take sent frame `token` back (its buffer is free).
    pub fn transmit_complete(&mut self, token: u16) -> Result<(), Error> {
        if token as usize != self.tx.next || self.poll_transmit() != Some(token) {
            return Err(Error::BadToken);
        }
        self.tx.next = (self.tx.next + 1) % RING;
        Ok(())
    }

    /// Frames on the transmit ring.
    pub fn transmit_in_use(&self) -> usize {
        self.tx.in_use()
    }
}

/// The MAC address: receive address 0 if the controller loaded it (RAH.AV), else words
/// 0..3 of the EEPROM through EERD.
fn read_mac<R: Regs>(regs: &mut R, spins: u64) -> Option<[u8; 6]> {
    let (lo, hi) = (regs.read32(RAL), regs.read32(RAH));
    let mac = if hi & 1 << 31 != 0 {
        let [a, b, c, d] = lo.to_le_bytes();
        let [e, f, ..] = hi.to_le_bytes();
        [a, b, c, d, e, f]
    } else {
        let mut m = [0u8; 6];
        for w in 0..3 {
            regs.write32(EERD, 1 | (w as u32) << 2);
            let mut v = None;
            for _ in 0..spins {
                let r = regs.read32(EERD);
                if r & 2 != 0 {
                    v = Some((r >> 16) as u16);
                    break;
                }
            }
            m[2 * w..2 * w + 2].copy_from_slice(&v?.to_le_bytes());
        }
        // Receive address 0 takes it, valid.
        regs.write32(RAL, u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
        regs.write32(RAH, u16::from_le_bytes([m[4], m[5]]) as u32 | 1 << 31);
        m
    };
    (mac != [0; 6] && mac != [0xff; 6] && mac[0] & 1 == 0).then_some(mac)
}
