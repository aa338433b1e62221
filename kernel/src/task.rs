//! Tasks: an address space (page tables), a capability space, a memory quota.
//!
//! User memory is never touched through user virtual addresses: every access
//! walks the task's page table, checks the user/write bits, and copies through
//! the direct map. A bad pointer is therefore an error code, never a kernel fault.

use crate::mem::{self, phys_to_virt, KernelPhys};
use abi::layout::{is_user_range, PAGE_SIZE};
use abi::{mem as m, Error};
use core::sync::atomic::{AtomicU64, Ordering};
use kcore::cspace::CSpace;
use kcore::pagetable::{self as pt, PhysMem};
pub use kcore::quota::{Objects, Quota};

/// A reference to a kernel object: table index plus generation. A stale generation
/// means the object is gone; capabilities holding it are dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjRef {
    pub id: u32,
    pub gen: u32,
}

/// What a capability names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Obj {
    Thread(ObjRef),
    Task(ObjRef),
    Machine,
    /// An interrupt line.
    Irq(u8),
    /// The right to make IRQ capabilities.
    IrqControl,
    /// One PCI function (its routing id): its configuration space, BARs, and
    /// message-signalled interrupts.
    PciDevice(u16),
    /// The right to answer one call of this thread (one shot): the thread, and which of
    /// its saved calls (`Tcb::saved_calls` when it was saved).
    Reply(ObjRef, u32),
}

/// Pages charged for a capability space.
pub const CSPACE_PAGES: u64 = abi::kquota::CSPACE_PAGES;

pub struct Task {
    pub pml4: u64,
    pub cspace: CSpace<Obj>,
    pub quota: Quota,
    pub parent: Option<ObjRef>,
    pub nthreads: u32,
    /// I/O permission bitmap (bit set = no access), made on the first port received.
    pub io: Option<alloc::boxed::Box<[u8; IO_BITMAP_BYTES]>>,
    /// Highest port this task was ever given (bounds the bitmap copy on a switch).
    pub io_max: u16,
    /// Its destruction is under way (`Kernel::teardown_slice`).
    pub dying: bool,
    /// Where the next slice of its teardown goes on taking its memory away (nothing
    /// is mapped into a dying task, so none lies below).
    pub strip_from: u64,
    /// Pages mapped in it through `map_frame` (each has a mapping-database node, or
    /// will when it is passed on), charged to `quota`.
    pub nodes: Objects,
    /// Times its threads gave up the processor: [voluntary (blocked: waiting for a
    /// message, a reply, a timeout), involuntary (preempted while ready to run)].
    pub switches: [u64; 2],
    /// Its own id once it mapped frames for a device's DMA (`arch::iommu`): a page it
    /// loses leaves the device's domain too.
    pub dma: Option<u32>,
}

pub const IO_BITMAP_BYTES: usize = 8192;
/// Quota pages charged for an I/O bitmap.
pub const IO_BITMAP_PAGES: u64 = abi::kquota::IO_BITMAP_PAGES;
const _: () = assert!(IO_BITMAP_BYTES as u64 <= IO_BITMAP_PAGES * PAGE_SIZE);

/// Cache-control bits of a leaf (device memory is mapped uncached, and stays so
/// wherever it is mapped on).
pub const CACHE_BITS: u64 = (1 << 3) | (1 << 4);

/// Leaf flags for user rights.
pub fn pte_flags(rights: u64) -> u64 {
    let mut f = pt::U;
    if rights & m::WRITE != 0 {
        f |= pt::W;
    }
    if rights & m::EXEC == 0 && crate::arch::boot::nx_enabled() {
        f |= pt::NX;
    }
    f
}

/// Rights a leaf entry grants.
pub fn pte_rights(pte: u64) -> u64 {
    let mut r = m::READ;
    if pte & pt::W != 0 {
        r |= m::WRITE;
    }
    if pte & pt::NX == 0 {
        r |= m::EXEC;
    }
    r
}

/// Page-table walker that never allocates (lookups and copies).
struct Walk;
impl PhysMem for Walk {
    fn table(&mut self, phys: u64) -> &mut [u64; 512] {
        // SAFETY: page-table frames lie in the direct map and are only written by the
        // kernel, which is single-threaded (see `kcell`).
        unsafe { &mut *(phys_to_virt(phys) as *mut [u64; 512]) }
    }
    fn alloc_table(&mut self) -> Option<u64> {
        None
    }
    fn free_table(&mut self, _: u64) {}
}

pub fn lookup(pml4: u64, va: u64) -> Option<u64> {
    pt::lookup(&mut Walk, pml4, va & !(PAGE_SIZE - 1))
}

/// Physical address behind a user virtual address, checking access.
pub fn user_phys(pml4: u64, va: u64, write: bool) -> Result<u64, Error> {
    let e = lookup(pml4, va).ok_or(Error::BadAddress)?;
    if e & pt::U == 0 || (write && e & pt::W == 0) {
        return Err(Error::BadAddress);
    }
    Ok((e & pt::ADDR) + (va & (PAGE_SIZE - 1)))
}

/// Check that `[va, va+len)` is user memory mapped with the needed access.
pub fn check_user(pml4: u64, va: u64, len: u64, write: bool) -> Result<(), Error> {
    if len == 0 {
        return Ok(());
    }
    if !is_user_range(va, len) {
        return Err(Error::BadAddress);
    }
    let mut page = va & !(PAGE_SIZE - 1);
    while page < va + len {
        user_phys(pml4, page, write)?;
        page += PAGE_SIZE;
    }
    Ok(())
}

pub fn copy_from_user(pml4: u64, va: u64, out: &mut [u8]) -> Result<(), Error> {
    check_user(pml4, va, out.len() as u64, false)?;
    let mut done = 0;
    while done < out.len() {
        let at = va + done as u64;
        let n = ((PAGE_SIZE - (at % PAGE_SIZE)) as usize).min(out.len() - done);
        let p = user_phys(pml4, at, false)?;
        // SAFETY: `p..p+n` lies within one mapped user frame in the direct map.
        unsafe { core::ptr::copy_nonoverlapping(phys_to_virt(p), out[done..].as_mut_ptr(), n) };
        done += n;
    }
    Ok(())
}

pub fn copy_to_user(pml4: u64, va: u64, data: &[u8]) -> Result<(), Error> {
    check_user(pml4, va, data.len() as u64, true)?;
    let mut done = 0;
    while done < data.len() {
        let at = va + done as u64;
        let n = ((PAGE_SIZE - (at % PAGE_SIZE)) as usize).min(data.len() - done);
        let p = user_phys(pml4, at, true)?;
        // SAFETY: `p..p+n` lies within one writable user frame in the direct map.
        unsafe { core::ptr::copy_nonoverlapping(data[done..].as_ptr(), phys_to_virt(p), n) };
        done += n;
    }
    Ok(())
}

/// Pages a string of up to `MAX_STRING` bytes can touch.
pub const STRING_PAGES: usize = kcore::usercopy::pages_for(abi::ipc::MAX_STRING);

/// A user range on at most `P` pages resolved to its frames: one page-table walk per
/// page, which is also the access check. A copy between two resolved ranges walks no
/// page table again (`copy_range`).
#[derive(Clone, Copy)]
pub struct UserRange<const P: usize> {
    va: u64,
    len: u64,
    frames: [u64; P],
}

impl<const P: usize> UserRange<P> {
    /// Resolve `[va, va+len)` in `pml4`, every page mapped for user mode (and writable
    /// with `write`); `BadAddress` otherwise, or when it touches more than `P` pages.
    #[inline]
    pub fn resolve(pml4: u64, va: u64, len: u64, write: bool) -> Result<Self, Error> {
        if len != 0 && !is_user_range(va, len) {
            return Err(Error::BadAddress);
        }
        let mut r = UserRange { va, len, frames: [0; P] };
        if len != 0 {
            let need = pt::P | pt::U | if write { pt::W } else { 0 };
            pt::frames(&mut Walk, pml4, va, len, need, &mut r.frames).ok_or(Error::BadAddress)?;
        }
        Ok(r)
    }
}

/// Counts every change that takes a user mapping away or reduces its rights, in any
/// address space (bumped where the TLBs are told: `flush_page`, `destroy_space`): a
/// translation kept from before a change is not used after it (`CachedRange`).
static MAP_EPOCH: AtomicU64 = AtomicU64::new(0);

fn mappings_reduced() {
    // (Under the kernel lock, as every page-table change; the fastpath without the lock
    // reads it only while no CPU holds the lock.)
    MAP_EPOCH.store(MAP_EPOCH.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// A thread's last two resolved IPC buffers of one kind — its send strings (read:
/// `CachedRange<false>`) or its receive buffers (written: `CachedRange<true>`) — as a
/// TLB keeps translations: an IPC loop names the same buffer every time (or two in
/// turn, double-buffered), and its pages are walked again only when a mapping somewhere
/// was reduced since (`MAP_EPOCH`). At most two pages each (the fastpath's strings).
/// The last one resolved comes first (a miss moves the first to second place, dropping
/// the second): a loop over one buffer finds it at the first compare, whatever buffers
/// were used before.
#[derive(Clone, Copy)]
pub struct CachedRange<const WRITE: bool> {
    kept: [Kept; 2],
}

#[derive(Clone, Copy)]
pub struct Kept {
    /// The range resolved (for the access of its `CachedRange`).
    pub range: UserRange<2>,
    /// `MAP_EPOCH` when resolved.
    epoch: u64,
    /// `epoch` when the range lies within one page, else `u64::MAX`, which no epoch
    /// reaches: what `kept_one_page` compares, so that it finds only such ranges.
    one_epoch: u64,
    /// When the range lies within one page: where it starts in the direct map (the copy
    /// needs no piece arithmetic); else 0.
    pub one_page: u64,
}

impl Kept {
    /// No epoch matches `u64::MAX` (it would take 2^64 unmaps).
    const NONE: Kept =
        Kept { range: UserRange { va: 0, len: 0, frames: [0; 2] }, epoch: u64::MAX, one_epoch: u64::MAX, one_page: 0 };

    #[inline(always)]
    fn is(&self, va: u64, len: u64, epoch: u64) -> bool {
        (self.range.va ^ va) | (self.range.len ^ len) | (self.epoch ^ epoch) == 0
    }

    /// `is`, and the range lies within one page (`one_page` is its address).
    #[inline(always)]
    fn is_one_page(&self, va: u64, len: u64, epoch: u64) -> bool {
        (self.range.va ^ va) | (self.range.len ^ len) | (self.one_epoch ^ epoch) == 0
    }
}

impl<const WRITE: bool> CachedRange<WRITE> {
    /// Nothing kept.
    pub const EMPTY: CachedRange<WRITE> = CachedRange { kept: [Kept::NONE; 2] };

    /// `[va, va+len)` of the space `pml4` (this thread's, which never changes) resolved
    /// as `UserRange::resolve` does (for writing with `WRITE`) — kept from an earlier
    /// call if that named the same range and no mapping was reduced since.
    #[inline(always)]
    pub fn resolve(&mut self, pml4: u64, va: u64, len: u64) -> Option<&Kept> {
        let epoch = MAP_EPOCH.load(Ordering::Relaxed);
        if self.kept[0].is(va, len, epoch) {
            return Some(&self.kept[0]);
        }
        if self.kept[1].is(va, len, epoch) {
            return Some(&self.kept[1]);
        }
        self.miss(pml4, va, len, epoch)
    }

    /// The kept translation of `[va, va+len)` if there is one (no walk) and the range
    /// lies within one page: where it starts in the direct map (never 0).
    #[inline(always)]
    pub fn kept_one_page(&self, va: u64, len: u64) -> Option<u64> {
        let epoch = MAP_EPOCH.load(Ordering::Relaxed);
        if self.kept[0].is_one_page(va, len, epoch) {
            return Some(self.kept[0].one_page);
        }
        if self.kept[1].is_one_page(va, len, epoch) {
            return Some(self.kept[1].one_page);
        }
        None
    }

    /// Resolve and keep, first (the first entry moves to second place).
    #[inline(never)]
    fn miss(&mut self, pml4: u64, va: u64, len: u64, epoch: u64) -> Option<&Kept> {
        let range = UserRange::resolve(pml4, va, len, WRITE).ok()?;
        let off = va & (PAGE_SIZE - 1);
        let one_page = match range.frames.first() {
            Some(&f) if len != 0 && off + len <= PAGE_SIZE => phys_to_virt(f + off) as u64,
            _ => 0,
        };
        self.kept[1] = self.kept[0];
        let one_epoch = if one_page != 0 { epoch } else { u64::MAX };
        self.kept[0] = Kept { range, epoch, one_epoch, one_page };
        Some(&self.kept[0])
    }
}

/// Copy `src` into `dst` (as long as the shorter), piece by piece within single frames
/// of each (possibly the same space: overlap is allowed). The pieces end at the nearer
/// page end of either side (`kcore::usercopy::pieces` is the arithmetic, host-tested).
#[inline]
pub fn copy_range<const P: usize, const Q: usize>(src: &UserRange<P>, dst: &UserRange<Q>) {
    let len = src.len.min(dst.len);
    let (so, d_o) = (src.va & (PAGE_SIZE - 1), dst.va & (PAGE_SIZE - 1));
    if so.max(d_o) + len <= PAGE_SIZE {
        // One piece, on each side's first page (the usual short string).
        let (Some(&sf), Some(&df)) = (src.frames.first(), dst.frames.first()) else { return };
        // SAFETY: as below, one piece.
        unsafe { copy_bytes(phys_to_virt(df + d_o), phys_to_virt(sf + so), len) };
        return;
    }
    for p in kcore::usercopy::pieces(src.va, dst.va, src.len.min(dst.len)) {
        let (Some(&sf), Some(&df)) = (src.frames.get(p.src_page), dst.frames.get(p.dst_page)) else { return };
        // SAFETY: both pieces lie within single user frames resolved (and checked for
        // the access) by `UserRange::resolve` in this kernel entry, or kept since with
        // no mapping reduced, in the direct map.
        unsafe { copy_bytes(phys_to_virt(df + p.dst_off), phys_to_virt(sf + p.src_off), p.len) };
    }
}

/// Copy `n` bytes from `src` to `dst`: `rep movsq` for the words, `rep movsb` for the
/// rest (at most 7). Not `memmove`, whose alignment prologue and direction checks cost
/// a piece more than the copy of a short string; overlapping ranges (a task copying
/// within its own memory) go to `core::ptr::copy`, which copies them correctly.
/// (Under `-icount` each `rep` iteration counts as an instruction: 64 for 512 bytes.)
///
/// # Safety
/// `src..src+n` readable, `dst..dst+n` writable kernel memory.
#[inline(always)]
pub unsafe fn copy_bytes(dst: *mut u8, src: *const u8, n: u64) {
    if (dst as u64).wrapping_sub(src as u64) < n {
        // SAFETY: as the caller promises; `copy` allows overlap.
        unsafe { core::ptr::copy(src, dst, n as usize) };
        return;
    }
    // SAFETY: the caller's ranges, which do not overlap forwards (checked above).
    unsafe { copy_forward(dst, src, n) }
}

/// `copy_bytes` for ranges known not to overlap forwards (`dst - src >= n`, wrapping).
///
/// # Safety
/// As for `copy_bytes`, and `(dst as u64).wrapping_sub(src as u64) >= n`.
#[inline(always)]
pub unsafe fn copy_forward(dst: *mut u8, src: *const u8, n: u64) {
    // SAFETY: the caller's ranges, which do not overlap forwards: a forward copy reads
    // every byte before it is written. The direction flag is clear (Rust's inline
    // assembly may assume it; the kernel's entries clear it).
    unsafe {
        core::arch::asm!(
            "rep movsq",
            "mov ecx, {rest:e}",
            "rep movsb",
            rest = in(reg) n & 7,
            inout("rcx") n / 8 => _,
            inout("rsi") src => _,
            inout("rdi") dst => _,
            options(nostack, preserves_flags),
        );
    }
}

impl Task {
    pub fn new(quota_limit: u64, parent: Option<ObjRef>) -> Result<Task, Error> {
        let mut quota = Quota { limit: quota_limit, used: 0 };
        if !quota.charge(abi::kquota::TASK_PAGES + CSPACE_PAGES) {
            return Err(Error::NoMemory);
        }
        let cspace = CSpace::try_new(abi::cap::SLOTS as usize).ok_or(Error::NoMemory)?;
        let pml4 = mem::alloc_frame().ok_or(Error::NoMemory)?;
        // Share the kernel half.
        let kernel = crate::arch::boot::boot_pml4_phys();
        // SAFETY: both are page-table frames in the direct map; the new one is ours.
        unsafe {
            let src = phys_to_virt(kernel) as *const u64;
            let dst = phys_to_virt(pml4) as *mut u64;
            for i in pt::KERNEL_PML4_FIRST..512 {
                dst.add(i).write(src.add(i).read());
            }
        }
        Ok(Task {
            pml4,
            cspace,
            quota,
            parent,
            nthreads: 0,
            io: None,
            io_max: 0,
            dying: false,
            strip_from: 0,
            nodes: Objects::default(),
            switches: [0; 2],
            dma: None,
        })
    }

    /// Map `frame` at `va` (one more reference to the frame; new page tables and the
    /// mapping's database node are charged to the quota). A frame whose reference count
    /// is full, or a quota that cannot pay, is `NoMemory`.
    pub fn map_frame(&mut self, va: u64, frame: u64, flags: u64) -> Result<(), Error> {
        let r = pt::map(&mut KernelPhys { quota: &mut self.quota }, self.pml4, va, frame | flags);
        match r {
            Ok(()) => {
                if flags & pt::UTCB != 0 {
                    return Ok(());
                }
                if !self.nodes.add(&mut self.quota) {
                    pt::unmap(&mut Walk, self.pml4, va);
                    mappings_reduced();
                    return Err(Error::NoMemory);
                }
                if !mem::frame_ref(frame) {
                    self.nodes.remove(&mut self.quota);
                    pt::unmap(&mut Walk, self.pml4, va);
                    mappings_reduced();
                    return Err(Error::NoMemory);
                }
                Ok(())
            }
            Err(e) => Err(match e {
                pt::MapError::NoMemory => Error::NoMemory,
                pt::MapError::AlreadyMapped => Error::AlreadyMapped,
                pt::MapError::NotUser => Error::BadAddress,
            }),
        }
    }

    /// Remove the mapping at `va`, dropping the frame reference. UTCB pages are
    /// removed only when `allow_utcb` (thread destruction).
    pub fn unmap_page(&mut self, va: u64, allow_utcb: bool) -> Result<u64, Error> {
        let e = lookup(self.pml4, va).ok_or(Error::NotMapped)?;
        if e & pt::UTCB != 0 && !allow_utcb {
            return Err(Error::InvalidArg);
        }
        pt::unmap(&mut Walk, self.pml4, va).ok_or(Error::NotMapped)?;
        if e & pt::UTCB == 0 {
            mem::frame_unref(e & pt::ADDR);
            self.nodes.remove(&mut self.quota);
        }
        flush_page(self.pml4, va);
        if let Some(id) = self.dma {
            crate::arch::iommu::revoke(id, e & pt::ADDR);
        }
        Ok(e)
    }

    /// Allow (or forbid) one port.
    pub fn set_port(&mut self, port: u16, allow: bool) -> Result<(), Error> {
        if self.io.is_none() {
            if !allow {
                return Ok(());
            }
            if !self.quota.charge(IO_BITMAP_PAGES) {
                return Err(Error::NoMemory);
            }
            let mut v = alloc::vec::Vec::new();
            if v.try_reserve_exact(IO_BITMAP_BYTES).is_err() {
                self.quota.uncharge(IO_BITMAP_PAGES);
                return Err(Error::NoMemory);
            }
            v.resize(IO_BITMAP_BYTES, 0xffu8);
            let b: alloc::boxed::Box<[u8]> = v.into_boxed_slice();
            self.io = Some(b.try_into().expect("bitmap size"));
        }
        let map = self.io.as_mut().expect("bitmap");
        let (byte, bit) = (port as usize / 8, port % 8);
        if allow {
            map[byte] &= !(1 << bit);
            self.io_max = self.io_max.max(port);
        } else {
            map[byte] |= 1 << bit;
        }
        Ok(())
    }

    /// Change the rights of a mapped page (not a UTCB).
    pub fn protect_page(&mut self, va: u64, rights: u64) {
        // A page no longer writable here is no longer writable by its device either.
        if let (Some(id), Some(e)) = (self.dma, lookup(self.pml4, va)) {
            if rights & abi::mem::WRITE == 0 {
                crate::arch::iommu::revoke(id, e & pt::ADDR);
            }
        }
        let flags = pte_flags(rights);
        pt::update(&mut Walk, self.pml4, va, |e| (e & (pt::ADDR | pt::UTCB | CACHE_BITS | pt::SLOT_BITS)) | flags);
        flush_page(self.pml4, va);
    }

    /// Keep mapping-database slot `slot` in the leaf of `va` (software bits: the MMU
    /// sees no change, so no TLB is told).
    pub fn set_slot(&mut self, va: u64, slot: u16) {
        pt::update(&mut Walk, self.pml4, va, |e| pt::with_slot(e, slot));
    }

    /// The first mapped page in `[lo, hi)` and its entry.
    pub fn next_leaf_in(&self, lo: u64, hi: u64) -> Option<(u64, u64)> {
        pt::next_leaf_in(&mut Walk, self.pml4, lo, hi)
    }

    /// Whether a UTCB lies in `[lo, hi)`.
    pub fn has_utcb_in(&self, lo: u64, hi: u64) -> bool {
        let mut found = false;
        pt::for_each_leaf_in(&mut Walk, self.pml4, lo, hi, |_, e| found |= e & pt::UTCB != 0);
        found
    }

    /// Free every user mapping and page table, and the PML4 itself.
    pub fn destroy_space(&mut self) {
        let pml4 = self.pml4;
        if crate::arch::cpu::current_cr3() == pml4 {
            crate::arch::cpu::load_cr3(crate::arch::boot::boot_pml4_phys());
        }
        crate::klock::mark_freed(pml4);
        mappings_reduced();
        pt::destroy_user(&mut KernelPhys { quota: &mut self.quota }, pml4, |_, e| {
            if e & pt::UTCB == 0 {
                mem::frame_unref(e & pt::ADDR);
            } else {
                mem::free_frame(e & pt::ADDR);
            }
        });
        mem::free_frame(pml4);
    }
}

/// Invalidate the TLB entry for `va` if `pml4` is the loaded address space.
pub fn flush_page(pml4: u64, va: u64) {
    crate::klock::mark_stale(pml4);
    mappings_reduced();
    if crate::arch::cpu::current_cr3() == pml4 {
        x86_64::instructions::tlb::flush(x86_64::VirtAddr::new(va));
    }
}
