//! The network device as a smoltcp `Device` — a virtio-net device, or an Intel 82574
//! (`e1000e`) when there is none: fixed receive and transmit buffers in DMA memory
//! (handed to the device as they are: the frame the stack writes is the one the device
//! reads, and a received frame is read where the device wrote it). Both drivers hand
//! frames over by token; [`Raw`] puts them under one set of calls.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use smoltcp::phy::{Device, DeviceCapabilities, Medium, RxToken, TxToken};
use smoltcp::time::Instant;
use virtio_drivers::device::net::VirtIONetRaw;
use virtio_drivers::transport::pci::PciTransport;
use virtio_hal::ScionHal;

/// Descriptors per queue, and buffers per direction.
pub const QUEUE: usize = 64;
/// One buffer: the virtio-net header and a whole Ethernet frame fit.
const BUF: usize = 2048;
/// The largest Ethernet frame (without FCS) the stack may send.
const MTU: usize = 1514;

/// The driver: virtio-net's raw device, or the 82574's.
// One lives as long as net, in place: the size between the variants costs nothing, a
// box would cost an indirection on every frame.
#[allow(clippy::large_enum_variant)]
pub enum Raw {
    Virtio(VirtIONetRaw<ScionHal, PciTransport, QUEUE>),
    E1000(e1000e::Nic<virtio_hal::Mmio>),
}

/// Find the network device (virtio-net first, else an 82574) and bring it up.
/// An 82574 held by capability comes with it (for its MSI-X).
pub fn open() -> Result<(rt::pci::Device, Raw, Option<rt::pci::DeviceCap>), &'static str> {
    match virtio_hal::open_pci(&[0x1000, 0x1041], 0x02_00_00, "no virtio-net device on the PCI bus") {
        Ok((d, t)) => {
            VirtIONetRaw::new(t).map(|r| (d, Raw::Virtio(r), None)).map_err(|_| "the virtio-net driver failed")
        }
        Err(_) => virtio_hal::open_e1000e().map(|(d, n, c)| (d, Raw::E1000(n), c)),
    }
}

/// The physical address of a buffer of ours (DMA memory registered by `dma_buffer`).
fn phys(buf: &[u8]) -> Result<u64, ()> {
    virtio_hal::phys_of(buf.as_ptr() as u64, buf.len() as u64).ok_or(())
}

impl Raw {
    pub fn kind(&self) -> &'static str {
        match self {
            Raw::Virtio(_) => "virtio-net",
            Raw::E1000(_) => "e1000e",
        }
    }
    fn mac_address(&self) -> [u8; 6] {
        match self {
            Raw::Virtio(r) => r.mac_address(),
            Raw::E1000(n) => n.mac_address(),
        }
    }
    fn enable_interrupts(&mut self) {
        match self {
            Raw::Virtio(r) => r.enable_interrupts(),
            Raw::E1000(n) => n.enable_interrupts(),
        }
    }
    fn ack_interrupt(&mut self) {
        match self {
            Raw::Virtio(r) => {
                r.ack_interrupt();
            }
            Raw::E1000(n) => {
                n.ack_interrupt();
            }
        }
    }
    /// # Safety
    /// `buf` stays valid and untouched until its token comes back (`receive_complete`).
    unsafe fn receive_begin(&mut self, buf: &mut [u8]) -> Result<u16, ()> {
        match self {
            // SAFETY: the caller's promise is virtio-drivers'.
            Raw::Virtio(r) => unsafe { r.receive_begin(buf) }.map_err(|_| ()),
            Raw::E1000(n) => n.receive_begin(phys(buf)?, buf.len()).map_err(|_| ()),
        }
    }
    fn poll_receive(&self) -> Option<u16> {
        match self {
            Raw::Virtio(r) => r.poll_receive(),
            Raw::E1000(n) => n.poll_receive(),
        }
    }
    /// (header length, frame length) of received frame `t` in `buf`.
    ///
    /// # Safety
    /// `buf` is the buffer given with token `t`.
    unsafe fn receive_complete(&mut self, t: u16, buf: &mut [u8]) -> Result<(usize, usize), ()> {
        match self {
            // SAFETY: the caller's promise.
            Raw::Virtio(r) => unsafe { r.receive_complete(t, buf) }.map_err(|_| ()),
            Raw::E1000(n) => n.receive_complete(t).map(|len| (0, len)).map_err(|_| ()),
        }
    }
    fn poll_transmit(&mut self) -> Option<u16> {
        match self {
            Raw::Virtio(r) => r.poll_transmit(),
            Raw::E1000(n) => n.poll_transmit(),
        }
    }
    /// # Safety
    /// `buf` is the buffer given with token `t`.
    unsafe fn transmit_complete(&mut self, t: u16, buf: &[u8]) -> Result<(), ()> {
        match self {
            // SAFETY: the caller's promise.
            Raw::Virtio(r) => unsafe { r.transmit_complete(t, buf) }.map(|_| ()).map_err(|_| ()),
            Raw::E1000(n) => n.transmit_complete(t).map_err(|_| ()),
        }
    }
    /// The bytes before the frame in a transmit buffer (virtio-net's header).
    fn fill_buffer_header(&self, buf: &mut [u8]) -> Result<usize, ()> {
        match self {
            Raw::Virtio(r) => r.fill_buffer_header(buf).map_err(|_| ()),
            Raw::E1000(_) => Ok(0),
        }
    }
    /// # Safety
    /// `buf` stays valid and untouched until its token comes back (`transmit_complete`).
    unsafe fn transmit_begin(&mut self, buf: &[u8]) -> Result<u16, ()> {
        match self {
            // SAFETY: the caller's promise is virtio-drivers'.
            Raw::Virtio(r) => unsafe { r.transmit_begin(buf) }.map_err(|_| ()),
            Raw::E1000(n) => n.transmit_begin(phys(buf)?, buf.len()).map_err(|_| ()),
        }
    }
}

/// `QUEUE` buffers of `BUF` bytes in one run of DMA memory.
struct Bufs {
    base: u64,
}

impl Bufs {
    fn new() -> Option<Bufs> {
        let (va, _) = virtio_hal::dma_buffer((QUEUE * BUF / 4096) as u64)?;
        Some(Bufs { base: va })
    }

    fn get(&self, i: usize) -> &'static mut [u8] {
        assert!(i < QUEUE);
        // SAFETY: the run is QUEUE * BUF bytes of DMA memory mapped here for the server's
        // life and used only through these buffers; each index is handed out to one user
        // at a time (the device, or the stack during one token), as the free lists and
        // token tables below keep it.
        unsafe { core::slice::from_raw_parts_mut((self.base + (i * BUF) as u64) as *mut u8, BUF) }
    }
}

#[derive(Default, Clone, Copy)]
pub struct Counters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Frames the stack wanted to send with every transmit buffer on the device.
    pub tx_dropped: u64,
    /// Clock ticks spent summing sent frames' checksums, and handing frames to the
    /// device (`PROFILE`: both inside the stack's run).
    pub checksum_ticks: u64,
    pub tx_device_ticks: u64,
}

pub struct Nic {
    raw: Raw,
    rx: Bufs,
    /// Receive buffer on the device for each descriptor token.
    rx_of_token: [usize; QUEUE],
    /// Received frames not yet given to the stack: (buffer, header length, frame length).
    ready: VecDeque<(usize, usize, usize)>,
    /// Receive buffers the stack has read, to give back to the device.
    used: Vec<usize>,
    tx: Bufs,
    tx_free: Vec<usize>,
    tx_of_token: [Option<usize>; QUEUE],
    pub counters: Counters,
}

impl Nic {
    pub fn new(raw: Raw) -> Result<Nic, &'static str> {
        let rx = Bufs::new().ok_or("no DMA memory for receive buffers")?;
        let tx = Bufs::new().ok_or("no DMA memory for transmit buffers")?;
        let mut n = Nic {
            raw,
            rx,
            rx_of_token: [0; QUEUE],
            ready: VecDeque::new(),
            used: (0..QUEUE).collect(),
            tx,
            tx_free: (0..QUEUE).collect(),
            tx_of_token: [None; QUEUE],
            counters: Counters::default(),
        };
        n.refill();
        if n.used.len() == QUEUE {
            return Err("the device took no receive buffers");
        }
        Ok(n)
    }

    pub fn mac(&self) -> [u8; 6] {
        self.raw.mac_address()
    }

    pub fn kind(&self) -> &'static str {
        self.raw.kind()
    }

    /// Every interrupt cause on MSI-X entry `entry` (an 82574; virtio-net's MSI-X is not
    /// used).
    pub fn use_msix(&mut self, entry: u8) {
        if let Raw::E1000(n) = &mut self.raw {
            n.use_msix(entry);
        }
    }

    pub fn enable_interrupts(&mut self) {
        self.raw.enable_interrupts();
    }

    /// Whether the link is up (virtio-net's always is, as far as net knows).
    pub fn link_up(&self) -> bool {
        match &self.raw {
            Raw::Virtio(_) => true,
            Raw::E1000(n) => n.link_up(),
        }
    }

    pub fn ack_interrupt(&mut self) {
        self.raw.ack_interrupt();
        if let Raw::E1000(n) = &mut self.raw {
            match n.take_link_change() {
                Some(true) => rt::println!("net: e1000e: link up"),
                Some(false) => {
                    rt::println!("net: e1000e: link down (a cable out, or the peer off): frames wait for it")
                }
                None => {}
            }
        }
    }

    /// Give read receive buffers back to the device.
    pub fn refill(&mut self) {
        while let Some(i) = self.used.pop() {
            let buf = self.rx.get(i);
            // SAFETY: the buffer is DMA memory that lives as long as the server and is
            // not touched again until the device returns it (`poll_rx`).
            match unsafe { self.raw.receive_begin(buf) } {
                Ok(t) if (t as usize) < QUEUE => self.rx_of_token[t as usize] = i,
                _ => {
                    self.used.push(i);
                    break;
                }
            }
        }
    }

    /// Take the frames the device has written.
    pub fn poll_rx(&mut self) {
        while let Some(t) = self.raw.poll_receive() {
            let i = self.rx_of_token[t as usize % QUEUE];
            let buf = self.rx.get(i);
            // SAFETY: `buf` is the buffer given with this token (recorded at refill).
            match unsafe { self.raw.receive_complete(t, buf) } {
                Ok((hdr, len)) if hdr + len <= BUF => {
                    self.counters.rx_packets += 1;
                    self.counters.rx_bytes += len as u64;
                    self.ready.push_back((i, hdr, len));
                }
                _ => self.used.push(i),
            }
        }
    }

    pub fn has_rx(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Drop received frames `keep` says no to (before the stack sees them).
    pub fn retain_rx(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        let (rx, used) = (&self.rx, &mut self.used);
        self.ready.retain(|&(i, hdr, len)| {
            let k = keep(&rx.get(i)[hdr..hdr + len]);
            if !k {
                used.push(i);
            }
            k
        });
    }

    /// Take back transmit buffers the device has sent.
    fn reclaim(raw: &mut Raw, tx: &Bufs, free: &mut Vec<usize>, of_token: &mut [Option<usize>; QUEUE]) {
        while let Some(t) = raw.poll_transmit() {
            let Some(i) = of_token.get_mut(t as usize).and_then(|s| s.take()) else { break };
            // SAFETY: `i` is the buffer given with this token.
            let _ = unsafe { raw.transmit_complete(t, tx.get(i)) };
            free.push(i);
        }
    }
}

pub struct Rx<'a> {
    buf: &'a mut [u8],
    used: &'a mut Vec<usize>,
    i: usize,
}

impl RxToken for Rx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        let r = f(self.buf);
        self.used.push(self.i);
        r
    }
}

pub struct Tx<'a> {
    raw: &'a mut Raw,
    tx: &'a Bufs,
    free: &'a mut Vec<usize>,
    of_token: &'a mut [Option<usize>; QUEUE],
    counters: &'a mut Counters,
}

impl TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let t0 = rt::sys::rdtsc();
        Nic::reclaim(self.raw, self.tx, self.free, self.of_token);
        self.counters.tx_device_ticks += rt::sys::rdtsc().wrapping_sub(t0);
        let Some(i) = self.free.pop() else {
            // Every buffer is on the device: the frame is dropped (TCP sends it again).
            self.counters.tx_dropped += 1;
            let mut scratch = [0u8; MTU];
            return f(&mut scratch[..len.min(MTU)]);
        };
        let buf = self.tx.get(i);
        let hdr = self.raw.fill_buffer_header(buf).unwrap_or(0);
        let len = len.min(BUF - hdr);
        let r = f(&mut buf[hdr..hdr + len]);
        // TCP's checksum: smoltcp leaves it to us (`capabilities`), summed 8 bytes at a time.
        let frame = &mut buf[hdr..hdr + len];
        let t1 = rt::sys::rdtsc();
        if len > 14 && frame[12..14] == [0x08, 0x00] {
            inet::fill_tcp_ipv4(&mut frame[14..]);
        }
        let t2 = rt::sys::rdtsc();
        self.counters.checksum_ticks += t2.wrapping_sub(t1);
        // SAFETY: the buffer stays untouched until the device gives its token back
        // (`reclaim`).
        let sent = unsafe { self.raw.transmit_begin(&buf[..hdr + len]) };
        self.counters.tx_device_ticks += rt::sys::rdtsc().wrapping_sub(t2);
        match sent {
            Ok(t) if (t as usize) < QUEUE => {
                self.of_token[t as usize] = Some(i);
                self.counters.tx_packets += 1;
                self.counters.tx_bytes += len as u64;
            }
            _ => {
                self.free.push(i);
                self.counters.tx_dropped += 1;
            }
        }
        r
    }
}

impl Device for Nic {
    type RxToken<'a> = Rx<'a>;
    type TxToken<'a> = Tx<'a>;

    fn receive(&mut self, _: Instant) -> Option<(Rx<'_>, Tx<'_>)> {
        let (i, hdr, len) = self.ready.pop_front()?;
        let buf = &mut self.rx.get(i)[hdr..hdr + len];
        let rx = Rx { buf, used: &mut self.used, i };
        let tx = Tx {
            raw: &mut self.raw,
            tx: &self.tx,
            free: &mut self.tx_free,
            of_token: &mut self.tx_of_token,
            counters: &mut self.counters,
        };
        Some((rx, tx))
    }

    fn transmit(&mut self, _: Instant) -> Option<Tx<'_>> {
        Nic::reclaim(&mut self.raw, &self.tx, &mut self.tx_free, &mut self.tx_of_token);
        if self.tx_free.is_empty() {
            return None;
        }
        Some(Tx {
            raw: &mut self.raw,
            tx: &self.tx,
            free: &mut self.tx_free,
            of_token: &mut self.tx_of_token,
            counters: &mut self.counters,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ethernet;
        c.max_transmission_unit = MTU;
        c.max_burst_size = Some(QUEUE / 2);
        // Received segments are checked by smoltcp; sent ones get their checksum in
        // `Tx::consume` (crates/inet sums 8 bytes at a time, smoltcp 2).
        c.checksum.tcp = smoltcp::phy::Checksum::Rx;
        c
    }
}
