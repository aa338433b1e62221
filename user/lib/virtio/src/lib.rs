//! What user-level device drivers need from Scion: PCI configuration through the
//! granted ports, device registers (BARs) mapped from sigma0's device window, and DMA
//! memory from sigma0 whose physical addresses sigma0 tells — for `virtio-drivers`
//! (its `Hal`) and for the `nvme` crate. Buffers a driver hands in (ordinary program
//! memory, physical address unknown) go through bounce buffers.
//!
//! A block service's disk ([`Disk`]) is a virtio-blk device or an NVMe controller
//! (`nvme.rs`), driven through one interface: requests started with a token, tokens
//! collected when done, and `baio::BlockDev` for blocking I/O.
#![no_std]

extern crate alloc;

mod e1000;
pub mod nvme;
pub use e1000::open_e1000e;
pub use nvme::NvmeDisk;

use abi::fpage::Fpage;
use abi::layout::{MMIO_START, PAGE_SIZE};
use alloc::vec::Vec;
use core::ptr::NonNull;
use rt::ipc::Msg;
use rt::sync::Lock;
use sigma0_api as s0;
use virtio_drivers::transport::pci::bus::{ConfigurationAccess, DeviceFunction};
use virtio_drivers::{BufferDirection, Hal, PhysAddr};

/// Where device registers are mapped: `MMIO_VA + (physical - MMIO_START)`.
const MMIO_VA: u64 = rt::layout::MMIO;
/// Where DMA memory is mapped, one run after another.
const DMA_VA: u64 = rt::layout::DMA;

struct State {
    /// Slot of the capability to sigma0 (0: not set up).
    sigma0: u64,
    dma_next: u64,
    /// Device pages mapped so far.
    mmio_pages: Vec<u64>,
    /// Bounce buffers in use: (physical, virtual, pages).
    bounces: Vec<(u64, u64, usize)>,
    /// Free bounce runs: (physical, virtual, pages).
    spare: Vec<(u64, u64, usize)>,
    /// DMA memory a server handed out itself (shared buffers): (virtual, physical,
    /// pages). Buffers inside these go to the device as they are: no bounce.
    direct: Vec<(u64, u64, u64)>,
    /// The device capability whose DMA reaches this memory (`set_dma_device`; 0: none,
    /// a device found on the bus, which reaches everything) and every run of DMA
    /// memory taken from sigma0: (virtual, pages).
    dma_dev: u64,
    runs: Vec<(u64, u64)>,
}

static STATE: Lock<State> = Lock::new(State {
    sigma0: 0,
    dma_next: DMA_VA,
    mmio_pages: Vec::new(),
    bounces: Vec::new(),
    spare: Vec::new(),
    direct: Vec::new(),
    dma_dev: 0,
    runs: Vec::new(),
});

/// Whether the kernel said the device's DMA is confined (by the IOMMU) to what was
/// mapped for it.
static CONFINED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Let the device reach `pages` pages at `va` (through its capability), in calls the
/// kernel takes; false when the kernel refused.
fn dma_map(dev: u64, va: u64, pages: u64) -> bool {
    let max = abi::mem::MAX_PAGES_PER_CALL;
    (0..pages.div_ceil(max)).all(|k| {
        let n = (pages - k * max).min(max);
        match rt::sys::pci_dma_map(dev, va + k * max * PAGE_SIZE, n) {
            Ok(c) => {
                CONFINED.store(c, core::sync::atomic::Ordering::Relaxed);
                true
            }
            Err(_) => false,
        }
    })
}

/// Whether the device's DMA is confined to the memory mapped for it (false: no IOMMU,
/// or nothing mapped yet).
pub fn dma_confined() -> bool {
    CONFINED.load(core::sync::atomic::Ordering::Relaxed)
}

/// From now on, DMA memory here is for device `dev` (a device capability): what is
/// already there and what comes later is mapped for its DMA.
pub fn set_dma_device(dev: u64) {
    let mut st = STATE.lock();
    st.dma_dev = dev;
    let mut all: Vec<(u64, u64)> = st.runs.clone();
    all.extend(st.direct.iter().map(|d| (d.0, d.2)));
    for (va, pages) in all {
        if !dma_map(dev, va, pages) {
            rt::println!("virtio-hal: the kernel refused DMA to {:#x} ({} pages)", va, pages);
        }
    }
}

/// Tell the HAL about DMA memory at `va` (physical `pa`, `pages` pages): buffers inside
/// it are handed to the device directly (zero copy).
/// Memory registered at `va` before is replaced (the cache's block of frames there was
/// given back, and another mapped in its place).
pub fn register_dma(va: u64, pa: u64, pages: u64) {
    let mut st = STATE.lock();
    st.direct.retain(|d| d.0 != va);
    st.direct.push((va, pa, pages));
    if st.dma_dev != 0 && !dma_map(st.dma_dev, va, pages) {
        rt::println!("virtio-hal: the kernel refused DMA to {:#x} ({} pages)", va, pages);
    }
}

/// Forget the memory registered for DMA (`register_dma`) at virtual addresses in
/// `from..to`: it is gone (a server whose frames were mapped there died).
pub fn forget_dma(from: u64, to: u64) {
    STATE.lock().direct.retain(|d| !(from..to).contains(&d.0));
}

/// `pages` pages of zeroed DMA memory for a server's own buffers, handed to the device
/// as they are (no bounce): (virtual, physical), or None when sigma0 has none.
pub fn dma_buffer(pages: u64) -> Option<(u64, u64)> {
    let mut st = STATE.lock();
    let (pa, va) = dma_pages(&mut st, pages as usize)?;
    st.direct.push((va, pa, pages.next_power_of_two()));
    Some((va, pa))
}

/// Use the sigma0 capability in `slot` for DMA memory and device registers.
pub fn init(sigma0: u64) {
    STATE.lock().sigma0 = sigma0;
}

fn ask(sigma0: u64, window: Fpage, m: &mut Msg) -> bool {
    rt::server::request_mapping(sigma0, [window, Fpage(0), Fpage(0)], m).is_ok() && m.items() == 1
}

/// `pages` physically contiguous, zeroed pages: (physical, virtual), or None.
fn dma_pages(st: &mut State, pages: usize) -> Option<(u64, u64)> {
    let log2 = (pages.max(1).next_power_of_two().trailing_zeros()) as u64;
    let size = PAGE_SIZE << log2;
    let va = st.dma_next.div_ceil(size) * size;
    let mut m = Msg::new(s0::ALLOC, &[log2, va]);
    if !ask(st.sigma0, Fpage::mem(va, 12 + log2, abi::mem::RIGHTS_MASK), &mut m) {
        return None;
    }
    st.dma_next = va + size;
    let pages = size / PAGE_SIZE;
    st.runs.push((va, pages));
    if st.dma_dev != 0 && !dma_map(st.dma_dev, va, pages) {
        return None;
    }
    Some((m.word(2), va))
}

pub struct ScionHal;

// SAFETY: DMA memory comes from sigma0, physically contiguous, zeroed, mapped only here
// and never reused while allocated; device registers are mapped once from the device
// window; bounce buffers are owned by the HAL between share and unshare.
unsafe impl Hal for ScionHal {
    fn dma_alloc(pages: usize, _: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        let mut st = STATE.lock();
        match dma_pages(&mut st, pages) {
            Some((pa, va)) => (pa, NonNull::new(va as *mut u8).unwrap()),
            None => (0, NonNull::dangling()),
        }
    }

    unsafe fn dma_dealloc(_: PhysAddr, _: NonNull<u8>, _: usize) -> i32 {
        // Kept: drivers free DMA memory only when the device goes away.
        0
    }

    unsafe fn mmio_phys_to_virt(paddr: PhysAddr, size: usize) -> NonNull<u8> {
        let mut st = STATE.lock();
        let first = paddr & !(PAGE_SIZE - 1);
        let mut page = first;
        while page < paddr + size as u64 {
            if !st.mmio_pages.contains(&page) {
                let va = MMIO_VA + (page - MMIO_START);
                let mut m = Msg::new(s0::MMIO, &[page, 0, va]);
                if ask(st.sigma0, Fpage::mem(va, 12, abi::mem::RIGHTS_MASK), &mut m) {
                    st.mmio_pages.push(page);
                }
            }
            page += PAGE_SIZE;
        }
        NonNull::new((MMIO_VA + (paddr - MMIO_START)) as *mut u8).unwrap()
    }

    unsafe fn share(buffer: NonNull<[u8]>, direction: BufferDirection) -> PhysAddr {
        let len = buffer.len();
        let pages = len.div_ceil(PAGE_SIZE as usize).max(1);
        let mut st = STATE.lock();
        let va = buffer.as_ptr() as *const u8 as u64;
        if let Some((dva, dpa, _)) =
            st.direct.iter().copied().find(|(v, _, n)| va >= *v && va + len as u64 <= v + n * PAGE_SIZE)
        {
            return dpa + (va - dva);
        }
        let run = match st.spare.iter().position(|r| r.2 >= pages) {
            Some(i) => st.spare.swap_remove(i),
            None => match dma_pages(&mut st, pages) {
                Some((pa, va)) => (pa, va, pages.next_power_of_two()),
                None => return 0,
            },
        };
        if direction != BufferDirection::DeviceToDriver {
            // SAFETY: the bounce run is mapped here, at least `len` bytes long; `buffer`
            // is valid for reads of `len` bytes (the driver's contract).
            unsafe { core::ptr::copy_nonoverlapping(buffer.as_ptr() as *const u8, run.1 as *mut u8, len) };
        }
        st.bounces.push(run);
        run.0
    }

    unsafe fn unshare(paddr: PhysAddr, buffer: NonNull<[u8]>, direction: BufferDirection) {
        let mut st = STATE.lock();
        let Some(i) = st.bounces.iter().position(|r| r.0 == paddr) else { return };
        let run = st.bounces.swap_remove(i);
        if direction != BufferDirection::DriverToDevice {
            // SAFETY: as in share, the other way; `buffer` is valid for writes.
            unsafe { core::ptr::copy_nonoverlapping(run.1 as *const u8, buffer.as_ptr() as *mut u8, buffer.len()) };
        }
        st.spare.push(run);
    }
}

/// A block device as a BAIO block device (4 KiB blocks): a virtio-blk device (512-byte
/// sectors) and its flushes, or an NVMe controller's namespace 1.
// One lives as long as its block service, in place: the size between the variants costs
// nothing, a box would cost an indirection on every request.
#[allow(clippy::large_enum_variant)]
pub enum Disk {
    Virtio(virtio_drivers::device::blk::VirtIOBlk<ScionHal, virtio_drivers::transport::pci::PciTransport>, Flushes),
    Nvme(NvmeDisk),
}

/// The device's cache flush (`VIRTIO_BLK_F_FLUSH`; NVMe's volatile write cache): whether
/// it has one (and the driver negotiated it), and how many `BlockDev::flush` sent. A
/// device that has none keeps no volatile write cache (its writes are durable when
/// completed), and a flush is then nothing. Neither driver uses forced-unit-access
/// writes, so every ordering point is a whole flush.
#[derive(Clone, Copy, Debug, Default)]
pub struct Flushes {
    pub offered: bool,
    pub sent: u64,
}

/// Why a request did not start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// No room on the device's queue now: start it when something finished.
    Full,
    /// It cannot be done (a bad request, a buffer the device cannot reach).
    Failed,
}

impl Disk {
    /// Its size in 512-byte sectors.
    pub fn sectors(&self) -> u64 {
        match self {
            Disk::Virtio(d, _) => d.capacity(),
            Disk::Nvme(n) => n.sectors(),
        }
    }

    pub fn flushes(&self) -> Flushes {
        match self {
            Disk::Virtio(_, f) => *f,
            Disk::Nvme(n) => n.flushes(),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Disk::Virtio(..) => "virtio-blk",
            Disk::Nvme(_) => "NVMe",
        }
    }

    pub fn enable_interrupts(&mut self) {
        if let Disk::Virtio(d, _) = self {
            d.enable_interrupts();
        }
    }

    /// After an interrupt: virtio's status read (NVMe's line falls when its completions
    /// are taken).
    pub fn ack_interrupt(&mut self) {
        if let Disk::Virtio(d, _) = self {
            d.ack_interrupt();
        }
    }

    /// Start a read or write of `buf` at 512-byte sector `sector`; its token.
    ///
    /// # Safety
    /// `buf`, `req` and `resp` stay valid, mapped and untouched until [`Disk::complete`]
    /// with the token (the device reads or writes them meanwhile).
    pub unsafe fn submit(
        &mut self,
        write: bool,
        sector: u64,
        buf: &mut [u8],
        req: &mut virtio_drivers::device::blk::BlkReq,
        resp: &mut virtio_drivers::device::blk::BlkResp,
    ) -> Result<u16, Refused> {
        match self {
            Disk::Virtio(d, _) => {
                // SAFETY: the caller's promise is the one virtio-drivers asks for.
                let r = unsafe {
                    if write {
                        d.write_blocks_nb(sector as usize, req, buf, resp)
                    } else {
                        d.read_blocks_nb(sector as usize, req, buf, resp)
                    }
                };
                r.map_err(|e| if e == virtio_drivers::Error::QueueFull { Refused::Full } else { Refused::Failed })
            }
            Disk::Nvme(n) => n.submit(write, sector, buf),
        }
    }

    /// The token of a finished request, if any.
    pub fn peek_used(&mut self) -> Option<u16> {
        match self {
            Disk::Virtio(d, _) => d.peek_used(),
            Disk::Nvme(n) => n.peek_used(),
        }
    }

    /// Take finished request `token` (with what went into `submit`); whether it
    /// succeeded.
    ///
    /// # Safety
    /// The same buffer, request and response `submit` had for `token`.
    pub unsafe fn complete(
        &mut self,
        token: u16,
        write: bool,
        buf: &mut [u8],
        req: &virtio_drivers::device::blk::BlkReq,
        resp: &mut virtio_drivers::device::blk::BlkResp,
    ) -> bool {
        match self {
            Disk::Virtio(d, _) => {
                // SAFETY: the caller's promise: the same request as submitted.
                let r = unsafe {
                    if write {
                        d.complete_write_blocks(token, req, buf, resp)
                    } else {
                        d.complete_read_blocks(token, req, buf, resp)
                    }
                };
                r.is_ok()
            }
            Disk::Nvme(n) => n.complete(token),
        }
    }
}

impl baio::BlockDev for Disk {
    fn blocks(&self) -> u64 {
        self.sectors() / 8
    }
    fn read(&mut self, block: u64, buf: &mut [u8; baio::BLOCK]) -> Result<(), baio::Error> {
        match self {
            Disk::Virtio(d, _) => d.read_blocks(block as usize * 8, buf).map_err(|_| baio::Error::Io),
            Disk::Nvme(n) => n.read(block, buf),
        }
    }
    fn write(&mut self, block: u64, buf: &[u8; baio::BLOCK]) -> Result<(), baio::Error> {
        match self {
            Disk::Virtio(d, _) => d.write_blocks(block as usize * 8, buf).map_err(|_| baio::Error::Io),
            Disk::Nvme(n) => n.write(block, buf),
        }
    }
    fn flush(&mut self) -> Result<(), baio::Error> {
        match self {
            Disk::Virtio(d, f) => {
                if !f.offered {
                    return Ok(());
                }
                f.sent += 1;
                d.flush().map_err(|_| baio::Error::Io)
            }
            Disk::Nvme(n) => n.flush(),
        }
    }
    fn write_zeros(&mut self, first: u64, n: u64) -> Result<(), baio::Error> {
        match self {
            Disk::Virtio(d, _) => {
                // 64 KiB a request rather than a block.
                const CHUNK: u64 = 16;
                let zeros = alloc::vec![0u8; CHUNK as usize * baio::BLOCK];
                let mut b = first;
                while b < first + n {
                    let k = (first + n - b).min(CHUNK);
                    d.write_blocks(b as usize * 8, &zeros[..k as usize * baio::BLOCK]).map_err(|_| baio::Error::Io)?;
                    b += k;
                }
                Ok(())
            }
            Disk::Nvme(d) => d.write_zeros(first, n),
        }
    }
}

/// Find the block device — the first virtio-blk device on the PCI bus, else the first
/// NVMe controller — and bring it up (the PCI ports and `init` must be done). Err says
/// what failed.
pub fn open_disk() -> Result<(rt::pci::Device, Disk), &'static str> {
    open_disk_with(&|n| n)
}

/// The same; an NVMe controller's MSI-X vectors are attached to the calling thread with
/// badge `badge(number)` (`NvmeDisk::vectors`).
pub fn open_disk_with(badge: &dyn Fn(u64) -> u64) -> Result<(rt::pci::Device, Disk), &'static str> {
    use virtio_drivers::transport::Transport;
    let (d, mut t) = match open_pci(&[0x1001, 0x1042], 0x01_00_00, "no virtio-blk device on the PCI bus") {
        Ok(x) => x,
        Err(why) => {
            // NVMe: a capability for the controller alone, from root, when the manifest
            // grants the class; else (an older manifest) found on the bus.
            if let Ok(dev) = rt::pci::DeviceCap::get(nvme::CLASS, 0) {
                let cpus = rt::sys::smp_info().cpus.clamp(1, 64) as u16;
                return Ok((dev.device(), Disk::Nvme(NvmeDisk::open_cap(dev, cpus, badge)?)));
            }
            return match rt::pci::devices().into_iter().find(nvme::is_nvme) {
                Some(d) => Ok((d, Disk::Nvme(NvmeDisk::open(&d)?))),
                None => Err(if why.starts_with("no ") { "no virtio-blk or NVMe device on the PCI bus" } else { why }),
            };
        }
    };
    // virtio-drivers negotiates VIRTIO_BLK_F_FLUSH (bit 9) whenever the device offers it.
    let offered = t.read_device_features() & (1 << 9) != 0;
    let blk =
        virtio_drivers::device::blk::VirtIOBlk::<ScionHal, _>::new(t).map_err(|_| "the virtio-blk driver failed")?;
    Ok((d, Disk::Virtio(blk, Flushes { offered, sent: 0 })))
}

/// The physical address of `len` bytes at `va` in DMA memory registered or handed out
/// here (`register_dma`, `dma_buffer`), if they are all in one such run.
pub fn phys_of(va: u64, len: u64) -> Option<u64> {
    let st = STATE.lock();
    st.direct.iter().find(|(v, _, n)| va >= *v && va + len <= v + n * PAGE_SIZE).map(|(v, p, _)| p + (va - v))
}

/// Map `len` bytes of device registers at physical `pa`; their address here.
pub fn map_mmio(pa: u64, len: usize) -> u64 {
    // SAFETY: mapping only (sigma0 maps the pages of its device window, or nothing).
    unsafe { <ScionHal as Hal>::mmio_phys_to_virt(pa, len).as_ptr() as u64 }
}

/// A device's registers (a BAR), mapped here.
pub struct Mmio {
    base: u64,
    len: usize,
}

impl Mmio {
    /// `len` bytes of registers mapped at `base` (by `map_mmio`).
    pub fn new(base: u64, len: usize) -> Mmio {
        Mmio { base, len }
    }

    pub fn read32(&self, off: usize) -> u32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len, "a register past the mapped BAR");
        // SAFETY: `base..base + len` is a BAR mapped from sigma0's device window
        // (`map_mmio`) and the 32-bit register lies inside it (checked above).
        unsafe { core::ptr::read_volatile((self.base + off as u64) as *const u32) }
    }

    pub fn write32(&mut self, off: usize, v: u32) {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len, "a register past the mapped BAR");
        // SAFETY: as in read32.
        unsafe { core::ptr::write_volatile((self.base + off as u64) as *mut u32, v) }
    }
}

/// Turn on a device's memory decoding and bus mastering (and its INTx); its BAR `i`.
pub fn enable_device(d: &rt::pci::Device, bar: u8) -> Option<u64> {
    let pa = d.mem_bar(bar).filter(|b| *b != 0)?;
    let cmd = rt::pci::read32(d.addr, 4) & 0xffff;
    rt::pci::write32(d.addr, 4, (cmd | 0b110) & !(1 << 10));
    Some(pa)
}

/// `pages` zeroed, physically contiguous pages of DMA memory kept for a driver's own
/// structures (queues): (virtual, physical).
pub fn dma_pages_for_driver(pages: usize) -> Option<(u64, u64)> {
    let mut st = STATE.lock();
    dma_pages(&mut st, pages).map(|(pa, va)| (va, pa))
}

/// The transport of the first virtio device with one of these device ids: held by
/// capability when the manifest grants its class (`class`: class << 16 | subclass << 8
/// | interface; virtio-blk 01:00:00, virtio-net 02:00:00), else found on the PCI bus
/// through the ports (an older manifest). Err says what failed.
pub fn open_pci(
    ids: &[u16],
    class: u32,
    what: &'static str,
) -> Result<(rt::pci::Device, virtio_drivers::transport::pci::PciTransport), &'static str> {
    use virtio_drivers::transport::pci::bus::PciRoot;
    use virtio_drivers::transport::pci::PciTransport;
    for i in 0..8 {
        let Ok(dev) = rt::pci::DeviceCap::get(class, i) else { break };
        let d = dev.device();
        if d.vendor != 0x1af4 || !ids.contains(&d.device) {
            let _ = rt::sys::cap_delete(dev.slot);
            rt::free_slot(dev.slot);
            continue;
        }
        // Memory decoding, bus mastering and INTx. Its DMA is not mapped through the
        // capability: QEMU's virtio devices bypass the IOMMU (no VIRTIO_F_ACCESS_PLATFORM).
        dev.enable(true).map_err(|_| "the kernel refused to enable the virtio device")?;
        let df = DeviceFunction { bus: d.addr.bus, device: d.addr.dev, function: d.addr.func };
        let mut root = PciRoot::new(CapCam { dev, sizing: 0 });
        let t = PciTransport::new::<ScionHal, _>(&mut root, df).map_err(|_| "the virtio PCI transport failed")?;
        return Ok((d, t));
    }
    let d = rt::pci::devices().into_iter().find(|d| d.vendor == 0x1af4 && ids.contains(&d.device)).ok_or(what)?;
    let mut root = PciRoot::new(PortCam);
    let df = DeviceFunction { bus: d.addr.bus, device: d.addr.dev, function: d.addr.func };
    let t = PciTransport::new::<ScionHal, _>(&mut root, df).map_err(|_| "the virtio PCI transport failed")?;
    Ok((d, t))
}

/// Say how a driver (`who`) holds its device `d`: alone by capability, with the
/// configuration ports refused; or the ports granted too (an older manifest).
pub fn say_ports(who: &str, d: &rt::pci::Device) {
    let a = d.addr;
    if rt::pci::ports() {
        rt::println!(
            "{}: the PCI configuration ports are granted too (an older manifest): the whole bus is reachable",
            who
        );
    } else {
        rt::println!(
            "{}: holds its device {:02x}:{:02x}.{} alone, by capability (the PCI configuration ports refused)",
            who,
            a.bus,
            a.dev,
            a.func
        );
    }
}

/// PCI configuration of the one function held by capability (`cap::PCI_DEVICE`): reads
/// as the kernel gives them, writes as it allows (the command register's decoding and
/// bus-master bits; never a BAR). virtio-drivers sizes BARs by writing all ones and
/// reading back: the kernel keeps the BARs, so the size it reports (`PCI_BAR`) is
/// answered here instead. Any other function reads as absent.
pub struct CapCam {
    dev: rt::pci::DeviceCap,
    /// BAR dwords (bit i: offset 0x10 + 4i) written all ones and not yet restored.
    sizing: u8,
}

impl CapCam {
    fn ours(&self, df: DeviceFunction) -> bool {
        let a = self.dev.addr;
        (df.bus, df.device, df.function) == (a.bus, a.dev, a.func)
    }

    /// What BAR dword `i` reads after all ones were written to it: the size mask.
    fn size_mask(&self, i: u8) -> u32 {
        let orig = |i: u8| self.dev.read32(0x10 + 4 * i as u16);
        // The high half of a 64-bit memory BAR.
        if i > 0 && orig(i - 1) & 0b111 == 0b100 {
            let size = self.dev.bar(i - 1).map_or(0, |b| b.1);
            return if size == 0 { 0 } else { ((!(size - 1)) >> 32) as u32 };
        }
        match self.dev.bar(i) {
            Ok((_, size, io)) if size != 0 => {
                // The address bits a BAR of that size decodes, then its type bits.
                let low = if io { 0b11 } else { 0xf };
                (!(size - 1) as u32) & !low | orig(i) & low
            }
            _ => 0,
        }
    }
}

impl ConfigurationAccess for CapCam {
    fn read_word(&self, df: DeviceFunction, off: u8) -> u32 {
        if !self.ours(df) {
            return !0;
        }
        if (0x10..0x28).contains(&off) && self.sizing & 1 << ((off - 0x10) / 4) != 0 {
            return self.size_mask((off - 0x10) / 4);
        }
        self.dev.read32(off as u16)
    }
    fn write_word(&mut self, df: DeviceFunction, off: u8, data: u32) {
        if !self.ours(df) {
            return;
        }
        if (0x10..0x28).contains(&off) {
            let bit = 1 << ((off - 0x10) / 4);
            self.sizing = if data == !0 { self.sizing | bit } else { self.sizing & !bit };
            return;
        }
        // What the kernel keeps is refused (`NoRights`) and stays as it was.
        let _ = self.dev.write32(off as u16, data);
    }
    unsafe fn unsafe_clone(&self) -> Self {
        CapCam { dev: self.dev, sizing: self.sizing }
    }
}

/// PCI configuration through the ports 0xCF8/0xCFC (granted by the manifest).
pub struct PortCam;

impl ConfigurationAccess for PortCam {
    fn read_word(&self, df: DeviceFunction, off: u8) -> u32 {
        rt::pci::read32(rt::pci::Addr { bus: df.bus, dev: df.device, func: df.function }, off)
    }
    fn write_word(&mut self, df: DeviceFunction, off: u8, data: u32) {
        rt::pci::write32(rt::pci::Addr { bus: df.bus, dev: df.device, func: df.function }, off, data)
    }
    unsafe fn unsafe_clone(&self) -> Self {
        PortCam
    }
}
