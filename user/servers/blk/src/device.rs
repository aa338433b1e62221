//! The device: a user-level virtio-blk or NVMe driver's requests, waiting (sent in block order)
//! and in flight, completed when the device's interrupt arrives (or polled); the
//! bounce pool for the block a view's limit falls in.

use crate::area::copy_part;
use crate::{Blk, IRQ_BADGE};
use alloc::boxed::Box;
use alloc::vec::Vec;
use baio::BLOCK;
use rt::env;
use rt::println;
use rt::server::Badge;
use virtio_drivers::device::blk::{BlkReq, BlkResp};
use virtio_hal::{self as virtio, Disk};

/// Blocks of this service's own DMA memory for the block a view's byte limit falls in
/// (read here, and only its bytes up to the limit copied into the holder's area).
const BOUNCE_BLOCKS: u64 = 16;

/// A device request: waiting to go to the device, or on it.
pub(crate) struct Io {
    write: bool,
    sector: u64,
    buf: u64,
    len: usize,
    op: u64,
    /// It brings this block into the cache slot `buf` is (FILLED is told when it ends).
    fill: Option<u64>,
    /// A read that ends well is then copied: (to, bytes) — the first bytes of `buf` to
    /// a shared area (a cache slot's block, or a bounce block's first bytes up to a
    /// view's limit).
    copy: Option<(u64, u64)>,
    /// `buf` is a block of the bounce pool (back to it when the request ends).
    bounce: bool,
    req: Box<BlkReq>,
    resp: Box<BlkResp>,
}

/// The device's interrupts: an NVMe controller's MSI-X vectors (one per queue), else
/// its interrupt line as the chipset routes its pin (`rt::pci::interrupt_line`) if the
/// manifest grants it; none: poll. (interrupt number, IRQ capability) of each.
pub(crate) fn attach_irqs(dev: &rt::pci::Device, disk: &mut Disk) -> Vec<(u8, u64)> {
    if let Disk::Nvme(n) = disk {
        if !n.vectors.is_empty() {
            return n.vectors.iter().map(|&(s, l)| (l as u8, s)).collect();
        }
    }
    attach_irq(dev, disk).into_iter().collect()
}

fn attach_irq(dev: &rt::pci::Device, disk: &mut Disk) -> Option<(u8, u64)> {
    let line = rt::pci::interrupt_line(dev)?;
    let s = rt::alloc_slot();
    if env::irq(line as u64, s).is_err() || rt::sys::irq_attach(s, Badge::minted(IRQ_BADGE | line as u64).0).is_err() {
        println!("blk: interrupt line {} is not granted to us", line);
        rt::free_slot(s);
        return None;
    }
    disk.enable_interrupts();
    Some((line, s))
}

impl Blk {
    /// Send waiting requests to the device, lowest block first, while it has room.
    pub(crate) fn submit(&mut self) {
        self.waiting.make_contiguous().sort_by_key(|io| io.sector);
        while let Some(mut io) = self.waiting.pop_front() {
            // SAFETY: the buffer is DMA memory mapped here (a shared area or a cache
            // slot) and `req`/`resp` are boxed; all stay put until the completion.
            let r = unsafe {
                let buf = core::slice::from_raw_parts_mut(io.buf as *mut u8, io.len);
                self.disk.submit(io.write, io.sector, buf, &mut io.req, &mut io.resp)
            };
            match r {
                Ok(token) => self.in_flight.push((token, io)),
                Err(virtio::Refused::Full) => {
                    self.waiting.push_front(io);
                    break;
                }
                Err(_) => self.io_done(io, false),
            }
        }
    }

    /// Collect what the device has finished.
    pub(crate) fn complete(&mut self) {
        while let Some(token) = self.disk.peek_used() {
            let Some(i) = self.in_flight.iter().position(|(t, _)| *t == token) else { break };
            let (_, mut io) = self.in_flight.swap_remove(i);
            // SAFETY: the same request, buffer and response that went with this token.
            let ok = unsafe {
                let buf = core::slice::from_raw_parts_mut(io.buf as *mut u8, io.len);
                self.disk.complete(token, io.write, buf, &io.req, &mut io.resp)
            };
            self.io_done(io, ok);
        }
        self.submit();
    }

    pub(crate) fn io_done(&mut self, io: Io, mut ok: bool) {
        if let Some(block) = io.fill {
            self.cache_filled(block, ok);
        }
        if let (Some((to, n)), true) = (io.copy, ok) {
            copy_part(io.buf, to, n);
            // A fill never outlives the cache it went into (blk attaches to a new one
            // only when nothing is in flight): the one attached now.
            if io.fill.is_some() && !self.cache_alive(self.attached) {
                ok = false;
            }
        }
        if io.bounce {
            self.bounce.push(io.buf);
        }
        self.op_step(io.op, ok);
    }

    /// Finish everything in flight (before a blocking request shares the queue).
    pub(crate) fn drain(&mut self) {
        while !self.in_flight.is_empty() || !self.waiting.is_empty() {
            self.complete();
            core::hint::spin_loop();
        }
    }

    pub(crate) fn queue(&mut self, write: bool, block: u64, buf: u64, blocks: u64, op: u64) {
        self.queue_io(Io {
            write,
            sector: block * 8,
            buf,
            len: (blocks * BLOCK as u64) as usize,
            op,
            fill: None,
            copy: None,
            bounce: false,
            req: Box::default(),
            resp: Box::default(),
        });
    }

    /// A one-block read into `buf` (a cache slot filling `fill`, or a bounce block),
    /// whose first `n` bytes then go to `to`.
    pub(crate) fn queue_copy(&mut self, block: u64, buf: u64, op: u64, fill: Option<u64>, to: u64, n: u64) {
        let bounce = fill.is_none();
        self.queue_io(Io {
            write: false,
            sector: block * 8,
            buf,
            len: BLOCK,
            op,
            fill,
            copy: Some((to, n)),
            bounce,
            req: Box::default(),
            resp: Box::default(),
        });
    }

    pub(crate) fn queue_io(&mut self, io: Io) {
        self.ops.get_mut(&io.op).unwrap().remaining += 1;
        self.waiting.push_back(io);
    }

    /// A block of the bounce pool (made on first use): none free, what is in flight
    /// finishes first and gives them back. None if no DMA memory could be had.
    pub(crate) fn bounce_block(&mut self) -> Option<u64> {
        if self.bounce.is_empty() && !self.bounce_made {
            self.bounce_made = true;
            let (va, _) = virtio::dma_buffer(BOUNCE_BLOCKS)?;
            self.bounce.extend((0..BOUNCE_BLOCKS).map(|k| va + k * BLOCK as u64));
        }
        if self.bounce.is_empty() {
            self.drain();
        }
        self.bounce.pop()
    }
}
