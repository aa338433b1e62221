//! An NVMe controller as a block service's disk: the `nvme` crate's driver with its
//! registers in BAR 0 (mapped from sigma0's device window) and its queues in DMA memory
//! from sigma0. Requests name the physical address of their buffer, which must lie in
//! DMA memory registered here (blk's shared areas, cache slots and bounce blocks all
//! do); blocking I/O (`BlockDev`, for the volume's metadata) goes through a bounce run
//! of its own.
//!
//! The controller comes from root as a device capability (`rt::pci::DeviceCap`, the
//! manifest's `pci = ["01:08:02"]`): one I/O queue pair per CPU, queue `q`'s
//! completions on MSI-X entry `q`, each a message-signalled interrupt the kernel
//! programmed (`msix_attach`); a request goes on the queue of the CPU its submitter
//! runs on (`set_cpu`). Without the capability (an older manifest: the bus through the
//! ports) or without MSI-X: one queue on INTx, the line the chipset routes the pin to,
//! level-triggered, falling when the completions are taken.

use crate::{dma_pages_for_driver, map_mmio, phys_of, Flushes, Mmio, Refused};
use abi::layout::PAGE_SIZE;
use alloc::vec::Vec;
use nvme::{Controller, Regs};

/// Pages of the blocking bounce run (a `write_zeros` chunk).
const BOUNCE_PAGES: usize = 16;
/// Polls a wait gives the controller (a register read or a completion look each).
const SPINS: u64 = 20_000_000;

struct SigmaDma;

impl nvme::Dma for SigmaDma {
    fn alloc(&mut self, pages: usize) -> Option<(u64, u64)> {
        dma_pages_for_driver(pages)
    }
}

impl Regs for Mmio {
    fn read32(&self, off: usize) -> u32 {
        Mmio::read32(self, off)
    }
    fn write32(&mut self, off: usize, v: u32) {
        Mmio::write32(self, off, v)
    }
}

pub struct NvmeDisk {
    ctl: Controller<Mmio>,
    /// Each queue's MSI-X interrupt: (IRQ capability slot, interrupt number).
    pub vectors: Vec<(u64, u64)>,
    /// The queue requests go on: the submitter's CPU's.
    queue: usize,
    /// Bad completions already said on the console.
    bad_said: u64,
    /// Requests the controller finished, not yet taken: (token, ok).
    finished: Vec<(u16, bool)>,
    bounce: (u64, u64),
}

/// An NVM Express controller: class 01 (storage), subclass 08, interface 02.
pub const CLASS: u32 = 0x01_08_02;

pub(crate) fn is_nvme(d: &rt::pci::Device) -> bool {
    (d.class, d.subclass, d.prog_if) == (1, 8, 2)
}

impl NvmeDisk {
    /// Bring up the controller at `d`: memory decoding and bus mastering on, INTx on,
    /// BAR 0 mapped, the `nvme` driver's bring-up.
    pub fn open(d: &rt::pci::Device) -> Result<NvmeDisk, &'static str> {
        let bar = crate::enable_device(d, 0).ok_or("the NVMe controller has no memory BAR 0")?;
        Self::bring_up(bar, 1)
    }

    /// Bring up the controller behind device capability `dev` with `queues` I/O queue
    /// pairs (one per CPU): memory decoding and bus mastering on, BAR 0 mapped, and
    /// first each queue's MSI-X entry bound to a message-signalled interrupt, the
    /// calling thread attached to it with badge `badge(number)` (a controller takes a
    /// queue's vector only once MSI-X is on). When the kernel refuses MSI-X (it says
    /// why on the console): one queue on INTx.
    pub fn open_cap(
        dev: rt::pci::DeviceCap,
        queues: u16,
        badge: &dyn Fn(u64) -> u64,
    ) -> Result<NvmeDisk, &'static str> {
        let (bar, size, io) = dev.bar(0).map_err(|_| "the NVMe controller's BAR 0 cannot be read")?;
        if io || size < 0x2000 || bar == 0 {
            return Err("the NVMe controller has no memory BAR 0 of 8 KiB or more");
        }
        dev.enable(true).map_err(|_| "the kernel refused to enable the NVMe controller")?;
        // Its DMA reaches the memory here, mapped for it as it is taken.
        crate::set_dma_device(dev.slot);
        let mut vectors = Vec::new();
        for q in 0..queues.max(1) {
            let v = dev.msix(q).and_then(|(slot, n)| match rt::sys::irq_attach(slot, badge(n)) {
                Ok(()) => Ok((slot, n)),
                Err(e) => {
                    rt::free_slot(slot);
                    Err(e)
                }
            });
            match v {
                Ok(v) => vectors.push(v),
                Err(e) => {
                    rt::println!("nvme: no MSI-X vector for queue {} ({:?})", q, e);
                    break;
                }
            }
        }
        let n = vectors.len().max(1) as u16;
        let mut d = Self::bring_up(bar, n)?;
        d.vectors = vectors;
        Ok(d)
    }

    fn bring_up(bar: u64, queues: u16) -> Result<NvmeDisk, &'static str> {
        // CAP first (its doorbell stride), then the doorbells of queues 0 and 1.
        let base = map_mmio(bar, 0x1000);
        let probe = Mmio::new(base, 0x1000);
        let stride = 4usize << ((probe.read64(0) >> 32) & 0xf);
        let len = 0x1000 + 2 * (queues as usize + 1) * stride;
        let base = map_mmio(bar, len);
        let ctl = Controller::with_queues(Mmio::new(base, len), &mut SigmaDma, SPINS, queues).map_err(|e| match e {
            nvme::Error::NotReady => "the NVMe controller did not become ready",
            nvme::Error::Fatal => "the NVMe controller reports a fatal status",
            nvme::Error::Unsupported(why) => why,
            nvme::Error::NoMemory => "no DMA memory for the NVMe queues",
            nvme::Error::NoNamespace => "the NVMe controller has no namespace 1",
            nvme::Error::Status(_) => "the NVMe controller failed an admin command of its bring-up",
            nvme::Error::Timeout => "the NVMe controller did not answer an admin command",
            _ => "the NVMe controller refused its bring-up",
        })?;
        let bounce = dma_pages_for_driver(BOUNCE_PAGES).ok_or("no DMA memory for the NVMe bounce run")?;
        let queue = rt::sys::thread_cpu(abi::cap::SELF_THREAD).unwrap_or(0) as usize % ctl.queues();
        Ok(NvmeDisk { ctl, bad_said: 0, vectors: Vec::new(), queue, finished: Vec::new(), bounce })
    }

    /// I/O queue pairs.
    pub fn queues(&self) -> usize {
        self.ctl.queues()
    }

    /// Commands completed on each queue.
    pub fn completed(&self) -> &[u64] {
        &self.ctl.completed
    }

    /// Requests go on the queue of CPU `cpu` from now on (the submitter moved).
    pub fn set_cpu(&mut self, cpu: u64) {
        self.queue = cpu as usize % self.ctl.queues();
    }

    pub fn identity(&self) -> nvme::Identity {
        self.ctl.id
    }

    /// Completions that named no command (a misbehaving controller), counted.
    pub fn bad_completions(&self) -> u64 {
        self.ctl.bad_completions
    }

    pub(crate) fn sectors(&self) -> u64 {
        self.ctl.id.blocks * self.ctl.id.block_size as u64 / 512
    }

    pub(crate) fn flushes(&self) -> Flushes {
        Flushes { offered: self.ctl.id.volatile_cache, sent: self.ctl.flushes }
    }

    fn lba(&self, sector: u64) -> u64 {
        sector * 512 / self.ctl.id.block_size as u64
    }

    pub fn submit(&mut self, write: bool, sector: u64, buf: &mut [u8]) -> Result<u16, Refused> {
        let va = buf.as_ptr() as u64;
        let pa = phys_of(va, buf.len() as u64).ok_or(Refused::Failed)?;
        if !(sector * 512).is_multiple_of(self.ctl.id.block_size as u64) {
            return Err(Refused::Failed);
        }
        match self.ctl.submit_on(self.queue, write, self.lba(sector), pa, buf.len()) {
            Ok(t) => Ok(t),
            Err(nvme::Error::Full) => Err(Refused::Full),
            Err(_) => Err(Refused::Failed),
        }
    }

    /// A request naming physical address `pa` as it is, whatever memory that is: a
    /// driver programming its device by hand (the hostile-DMA test; with an IOMMU the
    /// device reaches only what was mapped for it).
    pub fn submit_phys(&mut self, write: bool, sector: u64, pa: u64, len: usize) -> Result<u16, Refused> {
        match self.ctl.submit_on(self.queue, write, self.lba(sector), pa, len) {
            Ok(t) => Ok(t),
            Err(nvme::Error::Full) => Err(Refused::Full),
            Err(_) => Err(Refused::Failed),
        }
    }

    pub fn peek_used(&mut self) -> Option<u16> {
        if self.finished.is_empty() {
            while let Some((t, r)) = self.ctl.poll() {
                if let Err(e) = r {
                    rt::println!("nvme: request {} failed: {:?}", t, e);
                }
                self.finished.push((t, r.is_ok()));
            }
            // A controller that misbehaves is said, not obeyed.
            if self.ctl.bad_completions > self.bad_said {
                rt::println!(
                    "nvme: {} completion(s) naming no command of their queue: ignored",
                    self.ctl.bad_completions - self.bad_said
                );
                self.bad_said = self.ctl.bad_completions;
            }
        }
        self.finished.first().map(|f| f.0)
    }

    pub fn complete(&mut self, token: u16) -> bool {
        match self.finished.iter().position(|f| f.0 == token) {
            Some(i) => self.finished.remove(i).1,
            None => false,
        }
    }

    /// A blocking transfer of `bytes` through the bounce run.
    fn blocking(&mut self, write: bool, block: u64, bytes: usize) -> Result<(), baio::Error> {
        let lba = self.lba(block * 8);
        let mut spins = 0;
        let t = loop {
            match self.ctl.submit_on(self.queue, write, lba, self.bounce.1, bytes) {
                Ok(t) => break t,
                // Room is made by what is in flight finishing (kept for `peek_used`).
                Err(nvme::Error::Full) if spins < SPINS => {
                    spins += 1;
                    if let Some((t, r)) = self.ctl.poll() {
                        self.finished.push((t, r.is_ok()));
                    }
                }
                Err(_) => return Err(baio::Error::Io),
            }
        };
        self.ctl.wait(t).map_err(|_| baio::Error::Io)
    }

    pub(crate) fn read(&mut self, block: u64, buf: &mut [u8; baio::BLOCK]) -> Result<(), baio::Error> {
        self.blocking(false, block, baio::BLOCK)?;
        // SAFETY: the bounce run is ours, mapped, BOUNCE_PAGES pages ≥ one block.
        unsafe { core::ptr::copy_nonoverlapping(self.bounce.0 as *const u8, buf.as_mut_ptr(), baio::BLOCK) };
        Ok(())
    }

    pub(crate) fn write(&mut self, block: u64, buf: &[u8; baio::BLOCK]) -> Result<(), baio::Error> {
        // SAFETY: as in read.
        unsafe { core::ptr::copy_nonoverlapping(buf.as_ptr(), self.bounce.0 as *mut u8, baio::BLOCK) };
        self.blocking(true, block, baio::BLOCK)
    }

    pub(crate) fn flush(&mut self) -> Result<(), baio::Error> {
        let t = self.ctl.submit_flush_on(self.queue).map_err(|_| baio::Error::Io)?;
        self.ctl.wait(t).map_err(|_| baio::Error::Io)
    }

    pub(crate) fn write_zeros(&mut self, first: u64, n: u64) -> Result<(), baio::Error> {
        // SAFETY: as in read: the whole bounce run.
        unsafe { core::ptr::write_bytes(self.bounce.0 as *mut u8, 0, BOUNCE_PAGES * PAGE_SIZE as usize) };
        let chunk = (BOUNCE_PAGES * PAGE_SIZE as usize / baio::BLOCK) as u64;
        let mut b = first;
        while b < first + n {
            let k = (first + n - b).min(chunk);
            self.blocking(true, b, k as usize * baio::BLOCK)?;
            b += k;
        }
        Ok(())
    }
}
