//! Physical memory: the boot memory map (PVH's, or the UEFI loader's boot information:
//! `crates/bootinfo`), the frame allocator, frame
//! reference counts for shared user pages, the kernel heap, and the direct map
//! (all RAM, up to 64 GiB, at `DIRECT_MAP`).

use crate::arch::serial::kprintln;
use crate::kcell::KCell;
use abi::layout::PAGE_SIZE;
use kcore::frames::FrameBitmap;
use kcore::quota::Quota;

pub use crate::arch::boot::phys_to_virt;

static FRAMES: KCell<Option<FrameBitmap<'static>>> = KCell::new(None);
/// Where the frames are (`abi::KERNEL_INFO_MEMORY`): each count moved where a frame is
/// taken from the allocator or given back to it.
static COUNTS: KCell<Frames> = KCell::new(Frames { ram: 0, boot: 0, heap: 0, sigma0: 0, objects: 0 });

/// The kernel's frame counts (the free ones are the allocator's own count).
#[derive(Clone, Copy)]
pub struct Frames {
    /// Frames of RAM below the direct map's end (the machine).
    pub ram: u64,
    /// Of them kept at boot: the first MiB, the kernel, the boot structures and image,
    /// the frame tables.
    pub boot: u64,
    /// The kernel heap's pages and the tables that map them.
    pub heap: u64,
    /// Given to sigma0 (`alloc_frame_raw`).
    pub sigma0: u64,
    /// Taken for kernel objects outside the heap (`alloc_frame`, `alloc_contiguous`) and
    /// not given back.
    pub objects: u64,
}

/// Where the frames are now, and how many are free.
pub fn frame_counts() -> (Frames, u64) {
    (*COUNTS.get(), free_frames())
}
/// Mappings of each frame of RAM (device memory is never freed, so it is not counted).
static REFCOUNT: KCell<&'static mut [u16]> = KCell::new(&mut []);

#[global_allocator]
static HEAP: KernelHeap = KernelHeap;
static HEAP_INNER: KCell<linked_list_allocator::Heap> = KCell::new(linked_list_allocator::Heap::empty());

struct KernelHeap;

// SAFETY: the heap is only used from kernel code, which runs on one CPU with interrupts
// disabled (see `kcell`), so allocations never interleave.
unsafe impl core::alloc::GlobalAlloc for KernelHeap {
    unsafe fn alloc(&self, layout: core::alloc::Layout) -> *mut u8 {
        if let Ok(p) = HEAP_INNER.get().allocate_first_fit(layout) {
            return p.as_ptr();
        }
        // Full: grow it (from the frames the kernel keeps) and try once more.
        let want = (layout.size() as u64 + layout.align() as u64).next_multiple_of(PAGE_SIZE).max(HEAP_CHUNK);
        if grow_heap(want) == 0 {
            return core::ptr::null_mut();
        }
        HEAP_INNER.get().allocate_first_fit(layout).map_or(core::ptr::null_mut(), |p| p.as_ptr())
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: core::alloc::Layout) {
        if let Some(p) = core::ptr::NonNull::new(ptr) {
            // SAFETY: `ptr` came from `alloc` with the same layout (GlobalAlloc contract).
            unsafe { HEAP_INNER.get().deallocate(p, layout) };
        }
    }
}

static TRAMPOLINE_FREE: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Whether the application processors' start page (`smp::TRAMPOLINE`, in the first MiB,
/// which the allocator never hands out) holds none of the boot structures.
pub fn trampoline_free() -> bool {
    TRAMPOLINE_FREE.load(core::sync::atomic::Ordering::Relaxed)
}

/// What the boot information told us.
pub struct BootInfo {
    pub bootfs_phys: u64,
    pub bootfs_len: u64,
    /// Physical address of the ACPI RSDP (0: none given).
    pub rsdp_phys: u64,
    /// The kernel command line (`-append`, or the ESP's `\scion\cmdline`), at most 256 bytes.
    pub cmdline: [u8; 256],
    pub cmdline_len: usize,
    /// The firmware's framebuffer (UEFI only).
    pub framebuffer: Option<bootinfo::Framebuffer>,
}

/// What the boot structure says, whichever kind it is.
struct Boot {
    /// RAM (the first 64 regions).
    ram: [(u64, u64); 64],
    nram: usize,
    /// The structures the boot path left in memory (kept from the allocator).
    structures: Ranges,
    bootfs: (u64, u64),
    rsdp: u64,
    cmdline: [u8; 256],
    cmdline_len: usize,
    framebuffer: Option<bootinfo::Framebuffer>,
    how: &'static str,
}

impl Boot {
    fn new(how: &'static str) -> Boot {
        Boot {
            ram: [(0, 0); 64],
            nram: 0,
            structures: Ranges { r: [(0, 0); 16], n: 0 },
            bootfs: (0, 0),
            rsdp: 0,
            cmdline: [0; 256],
            cmdline_len: 0,
            framebuffer: None,
            how,
        }
    }

    fn add_ram(&mut self, addr: u64, len: u64) {
        if len > 0 && self.nram < self.ram.len() {
            self.ram[self.nram] = (addr, addr.saturating_add(len));
            self.nram += 1;
        }
    }
}

/// Read QEMU's PVH start info.
fn pvh(start_info_phys: u64) -> Boot {
    let si: HvmStartInfo = read_phys(start_info_phys);
    assert!(si.version >= 1 && si.memmap_entries > 0, "PVH start info has no memory map");
    let mut b = Boot::new("PVH");
    for i in 0..si.memmap_entries as u64 {
        let e: HvmMemmapEntry = read_phys(si.memmap_paddr + i * 24);
        if e.kind == 1 {
            b.add_ram(e.addr, e.size);
        }
    }
    b.structures.keep(start_info_phys, core::mem::size_of::<HvmStartInfo>() as u64);
    b.structures.keep(si.memmap_paddr, si.memmap_entries as u64 * 24);
    if si.nr_modules > 0 {
        b.structures.keep(si.modlist_paddr, si.nr_modules as u64 * 32);
        for i in 0..(si.nr_modules as u64).min(8) {
            let m: HvmModlistEntry = read_phys(si.modlist_paddr + i * 32);
            b.structures.keep(m.paddr, m.size);
            if i == 0 {
                b.bootfs = (m.paddr, m.size);
            }
        }
    }
    if si.cmdline_paddr != 0 {
        while b.cmdline_len < b.cmdline.len() {
            let c: u8 = read_phys(si.cmdline_paddr + b.cmdline_len as u64);
            if c == 0 {
                break;
            }
            b.cmdline[b.cmdline_len] = c;
            b.cmdline_len += 1;
        }
    }
    b.rsdp = si.rsdp_paddr;
    b
}

/// Read the UEFI loader's boot information (`crates/bootinfo`: every length checked).
fn uefi(phys: u64) -> Boot {
    let head: [u8; bootinfo::HEADER_LEN] = read_phys(phys);
    let len = match bootinfo::block_len(&head) {
        Ok(l) if phys.saturating_add(l as u64) <= crate::arch::boot::direct_map_end() => l,
        r => panic!("the loader's boot information is unreadable: {:?}", r.map(|_| "beyond the direct map")),
    };
    // SAFETY: `len` bytes at `phys`, inside the direct map (checked), written by the
    // loader and read-only from here on (kept from the allocator below).
    let block = unsafe { core::slice::from_raw_parts(phys_to_virt(phys), len) };
    let info = bootinfo::parse(block).unwrap_or_else(|e| panic!("the loader's boot information is damaged: {:?}", e));
    let mut b = Boot::new("UEFI");
    for r in info.regions().filter(|r| r.kind == bootinfo::RAM) {
        b.add_ram(r.addr, r.len);
    }
    b.structures.keep(phys, len as u64);
    b.bootfs = (info.bootfs_addr, info.bootfs_len);
    b.structures.keep(info.bootfs_addr, info.bootfs_len);
    b.rsdp = info.rsdp;
    b.cmdline_len = info.cmdline.len().min(b.cmdline.len());
    b.cmdline[..b.cmdline_len].copy_from_slice(&info.cmdline[..b.cmdline_len]);
    b.framebuffer = info.framebuffer;
    b
}

#[repr(C)]
struct HvmStartInfo {
    magic: u32,
    version: u32,
    flags: u32,
    nr_modules: u32,
    modlist_paddr: u64,
    cmdline_paddr: u64,
    rsdp_paddr: u64,
    memmap_paddr: u64,
    memmap_entries: u32,
    reserved: u32,
}

#[repr(C)]
struct HvmModlistEntry {
    paddr: u64,
    size: u64,
    cmdline_paddr: u64,
    reserved: u64,
}

#[repr(C)]
struct HvmMemmapEntry {
    addr: u64,
    size: u64,
    kind: u32,
    reserved: u32,
}

const HVM_START_MAGIC: u32 = 0x336e_c578;

extern "C" {
    static __kernel_phys_start: u8;
    static __kernel_phys_end: u8;
}

/// Physical ranges (start, end) kept from the allocator at boot.
struct Ranges {
    r: [(u64, u64); 16],
    n: usize,
}

impl Ranges {
    fn keep(&mut self, a: u64, len: u64) {
        assert!(self.n < self.r.len(), "too many boot ranges to keep");
        self.r[self.n] = (a, a.saturating_add(len));
        self.n += 1;
    }
    fn all(&self) -> &[(u64, u64)] {
        &self.r[..self.n]
    }
}

/// Read a boot structure from physical memory.
fn read_phys<T>(p: u64) -> T {
    assert!(
        p + core::mem::size_of::<T>() as u64 <= crate::arch::boot::direct_map_end(),
        "boot structure beyond the direct map"
    );
    // SAFETY: the address is within the direct map (checked) and the structures QEMU
    // passes are plain old data; read_unaligned tolerates any alignment.
    unsafe { core::ptr::read_unaligned(phys_to_virt(p) as *const T) }
}

pub fn init(start_info_phys: u64) -> BootInfo {
    let head: [u8; 8] = read_phys(start_info_phys);
    let boot = if u32::from_le_bytes([head[0], head[1], head[2], head[3]]) == HVM_START_MAGIC {
        pvh(start_info_phys)
    } else if bootinfo::is_bootinfo(&head) {
        uefi(start_info_phys)
    } else {
        panic!("booted by neither PVH nor Scion's UEFI loader (no start information at {:#x})", start_info_phys)
    };

    // RAM, the direct map extended over all of it (up to `DIRECT_MAP_MAX`), and what
    // stays beyond.
    let ram = &boot.ram[..boot.nram];
    let ram_end = ram.iter().map(|r| r.1).max().unwrap_or(0);
    let top = ram_end.min(crate::arch::boot::extend_direct_map(ram_end));
    let beyond: u64 = ram.iter().map(|&(a, b)| b.saturating_sub(a.max(top))).sum();
    if beyond > 0 {
        kprintln!("[mem] {} MiB of RAM above {} GiB is not used (the direct map ends there)", beyond >> 20, top >> 30);
    }
    if top + FIRMWARE_SLACK < MIN_RAM {
        too_small(top, "Scion");
    }

    // What must not be touched: the first MiB (real-mode structures, PVH start info),
    // the kernel image, and the boot structures (start info or boot information, memory
    // map, module list, the boot image).
    // Linker symbols: only their addresses are used.
    let (ks, ke) = (core::ptr::addr_of!(__kernel_phys_start) as u64, core::ptr::addr_of!(__kernel_phys_end) as u64);
    let mut reserved = Ranges { r: [(0, 0); 16], n: 0 };
    reserved.keep(0, 1 << 20);
    reserved.keep(ks, ke - ks);
    for &(a, b) in boot.structures.all() {
        reserved.keep(a, b - a);
    }
    let bootfs = boot.bootfs;

    // The page application processors start in lies in the first MiB; nothing QEMU
    // put there for us may be in it (the boot image is read after they start).
    let t = crate::arch::smp::TRAMPOLINE;
    let clash = reserved.all()[1..].iter().any(|&(a, b)| a < t + PAGE_SIZE && t < b);
    TRAMPOLINE_FREE.store(!clash, core::sync::atomic::Ordering::Relaxed);

    // The frame bitmap and the reference counts, sized by the RAM present and placed
    // in RAM found free in the map.
    let frames = top / PAGE_SIZE;
    let words = FrameBitmap::words_for(frames);
    let tables = (words as u64 * 8 + frames * 2).next_multiple_of(PAGE_SIZE);
    let Some(at) = kcore::frames::place(ram, reserved.all(), tables, top) else { too_small(top, "the frame tables") };
    reserved.keep(at, tables);
    // SAFETY: [at, at + tables) is RAM below the direct map's end, overlapping nothing
    // reserved above (so no boot structure and no kernel data), and it is reserved in
    // the allocator below so that nothing else ever uses it. The two slices do not
    // overlap: the counts start after the bitmap's words.
    let (bits, counts) = unsafe {
        (
            core::slice::from_raw_parts_mut(phys_to_virt(at) as *mut u64, words),
            core::slice::from_raw_parts_mut(phys_to_virt(at + words as u64 * 8) as *mut u16, frames as usize),
        )
    };
    counts.fill(0);
    *REFCOUNT.get() = counts;
    let fb = FRAMES.get().insert(FrameBitmap::new(bits, frames));
    for &(a, b) in ram {
        let first = a.div_ceil(PAGE_SIZE);
        let last = b.min(top) / PAGE_SIZE;
        if last > first {
            fb.free_range(first, last - first);
        }
    }
    for &(a, b) in reserved.all() {
        let first = a / PAGE_SIZE;
        let last = b.div_ceil(PAGE_SIZE);
        fb.reserve_range(first, last.saturating_sub(first));
    }
    // The machine: every frame of RAM the allocator was given; those it holds as used
    // now are the ones kept at boot.
    let ram_frames: u64 =
        ram.iter().map(|&(a, b)| (b.min(top) / PAGE_SIZE).saturating_sub(a.div_ceil(PAGE_SIZE))).sum();
    *COUNTS.get() = Frames { ram: ram_frames, boot: ram_frames - fb.free_count(), heap: 0, sigma0: 0, objects: 0 };

    // Kernel heap: an eighth of RAM, at most 32 MiB, to begin with, in address space of
    // its own (a PML4 entry every address space shares); it grows as it fills, from the
    // frames the kernel keeps (`grow_heap`).
    let heap_frames = (fb.free_count() / 8).min((32 << 20) / PAGE_SIZE);
    let Some(pdpt) = fb.alloc() else { too_small(top, "the kernel heap") };
    COUNTS.get().heap += 1;
    zero_frame(pdpt * PAGE_SIZE);
    crate::arch::boot::install_kernel_pdpt(HEAP_PML4, pdpt * PAGE_SIZE);
    if map_heap_pages(fb, heap_frames) != heap_frames {
        too_small(top, "the kernel heap");
    }
    // SAFETY: `heap_frames` pages at HEAP_BASE were just mapped, read-write, to frames
    // taken from the allocator for this alone.
    unsafe { HEAP_INNER.get().init(HEAP_BASE as *mut u8, (heap_frames * PAGE_SIZE) as usize) };

    kprintln!(
        "[mem] booted by {}: RAM {} MiB (up to {:#x}), {} frames free, heap {} KiB, boot image {} KiB at {:#x}",
        boot.how,
        ram.iter().map(|&(a, b)| b.min(top).saturating_sub(a)).sum::<u64>() >> 20,
        top,
        fb.free_count(),
        heap_bytes() >> 10,
        bootfs.1 >> 10,
        bootfs.0
    );
    BootInfo {
        bootfs_phys: bootfs.0,
        bootfs_len: bootfs.1,
        rsdp_phys: boot.rsdp,
        cmdline: boot.cmdline,
        cmdline_len: boot.cmdline_len,
        framebuffer: boot.framebuffer,
    }
}

/// The least RAM (`-m`) Scion runs its shell in: the `small_memory` test scenario
/// boots `cargo xtask run`'s system at exactly this. 64 MiB since the memory servers set
/// aside each program's image and stack when it is registered (a program is never
/// killed by a fault on its own image) and sigma0 keeps frames for their heaps: at 48
/// MiB the shell's heap was refused its first growth.
pub const MIN_RAM: u64 = 64 << 20;
/// Firmware keeps a little at the top of RAM, so a machine of `MIN_RAM` shows less.
const FIRMWARE_SLACK: u64 = 2 << 20;

/// Stop the machine with a clear word instead of a panic when memory is too small.
fn too_small(top: u64, what: &str) -> ! {
    kprintln!(
        "[mem] not enough memory for {}: Scion needs at least {} MiB of RAM (-m {}M), this machine has {} MiB",
        what,
        MIN_RAM >> 20,
        MIN_RAM >> 20,
        top >> 20
    );
    crate::arch::cpu::machine_exit(2)
}

/// Where the kernel heap lies: PML4 entry `HEAP_PML4` (512 GiB of address space, kernel
/// only, shared by every address space as the direct map is), mapped page by page from
/// its start as the heap grows.
const HEAP_PML4: usize = 257;
const HEAP_BASE: u64 = 0xffff_8000_0000_0000 | ((HEAP_PML4 as u64) << 39);
/// The heap grows by at least this much at a time.
const HEAP_CHUNK: u64 = 1 << 20;
/// Bytes of heap mapped so far (from HEAP_BASE).
static HEAP_MAPPED: KCell<u64> = KCell::new(0);

/// The kernel heap's size now, in bytes.
pub fn heap_bytes() -> u64 {
    *HEAP_MAPPED.get()
}

/// Map `pages` more pages at the heap's end (frames from `fb`, and the tables below the
/// heap's PDPT as they are needed): how many it mapped (fewer when frames ran out).
fn map_heap_pages(fb: &mut FrameBitmap<'static>, pages: u64) -> u64 {
    let pml4 = phys_to_virt(crate::arch::boot::boot_pml4_phys()) as *const u64;
    // SAFETY: entry HEAP_PML4 of the boot PML4, installed by `init`.
    let pdpt = unsafe { pml4.add(HEAP_PML4).read() } & kcore::pagetable::ADDR;
    let nx = if crate::arch::boot::nx_enabled() { kcore::pagetable::NX } else { 0 };
    let mut done = 0;
    while done < pages {
        let va = HEAP_BASE + *HEAP_MAPPED.get();
        // The table at each level below the PDPT, made when missing.
        let mut table = pdpt;
        let mut ok = true;
        for level in [2u32, 1] {
            let i = ((va >> (12 + 9 * level)) & 0x1ff) as usize;
            let t = phys_to_virt(table) as *mut u64;
            // SAFETY: `t` is a page table of the heap's (the PDPT or one made below),
            // in the direct map; only the kernel writes it, holding the lock.
            let e = unsafe { t.add(i).read() };
            if e & kcore::pagetable::P != 0 {
                table = e & kcore::pagetable::ADDR;
                continue;
            }
            let Some(f) = fb.alloc() else {
                ok = false;
                break;
            };
            COUNTS.get().heap += 1;
            zero_frame(f * PAGE_SIZE);
            // SAFETY: as above; a new table, present and writable, kernel only.
            unsafe { t.add(i).write((f * PAGE_SIZE) | 0x3) };
            table = f * PAGE_SIZE;
        }
        let Some(f) = ok.then(|| fb.alloc()).flatten() else { break };
        COUNTS.get().heap += 1;
        let t = phys_to_virt(table) as *mut u64;
        // SAFETY: the last-level table for `va`, whose entry is empty (the heap only
        // grows); the frame was just taken from the allocator for the heap alone.
        unsafe { t.add(((va >> 12) & 0x1ff) as usize).write((f * PAGE_SIZE) | 0x3 | nx) };
        *HEAP_MAPPED.get() += PAGE_SIZE;
        done += 1;
    }
    done
}

/// Grow the kernel heap by `bytes` (whole pages) or as much of it as there are frames
/// for: the bytes added. Frames given to the heap stay there; what it holds is charged
/// to the tasks whose objects they are (`kcore::quota`), from quotas that together
/// come to no more than the frames the kernel keeps.
fn grow_heap(bytes: u64) -> u64 {
    crate::klock::settle();
    let before = heap_bytes();
    let pages = map_heap_pages(frames(), bytes / PAGE_SIZE);
    if pages == 0 {
        return 0;
    }
    // SAFETY: the pages just mapped directly follow the heap's top and are used by
    // nothing else.
    unsafe { HEAP_INNER.get().extend((pages * PAGE_SIZE) as usize) };
    let after = heap_bytes();
    if before >> 26 != after >> 26 {
        kprintln!("[mem] kernel heap {} MiB", after >> 20);
    }
    pages * PAGE_SIZE
}

fn frames() -> &'static mut FrameBitmap<'static> {
    FRAMES.get().as_mut().expect("frame allocator initialised")
}

/// Frames below the top of RAM (what the frame tables cover).
pub fn frame_count() -> u64 {
    REFCOUNT.get().len() as u64
}

pub fn free_frames() -> u64 {
    frames().free_count()
}

/// A zeroed frame (physical address).
pub fn alloc_frame() -> Option<u64> {
    crate::klock::settle();
    let f = frames().alloc()? * PAGE_SIZE;
    COUNTS.get().objects += 1;
    zero_frame(f);
    Some(f)
}

pub fn zero_frame(f: u64) {
    // SAFETY: `f` is a frame below the direct-map limit owned by the caller.
    unsafe { core::ptr::write_bytes(phys_to_virt(f), 0, PAGE_SIZE as usize) };
}

pub fn free_frame(f: u64) {
    let fb = frames();
    if f / PAGE_SIZE < fb.total() && fb.is_used(f / PAGE_SIZE) {
        // Every frame given back is a kernel object's: sigma0's frames stay mapped in
        // sigma0 (never unreferenced to nothing), the heap's stay in the heap.
        COUNTS.get().objects = COUNTS.get().objects.saturating_sub(1);
    }
    fb.free(f / PAGE_SIZE);
}

/// A frame with whatever it holds (for handing memory to sigma0, which owns its
/// contents from then on).
pub fn alloc_frame_raw() -> Option<u64> {
    crate::klock::settle();
    let f = frames().alloc()? * PAGE_SIZE;
    COUNTS.get().sigma0 += 1;
    Some(f)
}

/// `n` contiguous frames (kernel stacks).
pub fn alloc_contiguous(n: u64) -> Option<u64> {
    crate::klock::settle();
    let f = frames().alloc_contiguous(n, 1)? * PAGE_SIZE;
    COUNTS.get().objects += n;
    Some(f)
}

pub fn free_contiguous(f: u64, n: u64) {
    for i in 0..n {
        free_frame(f + i * PAGE_SIZE);
    }
}

/// Count one more mapping of a user frame; `false` (and nothing counted) when the
/// frame already has as many mappings as a count can hold.
#[must_use]
pub fn frame_ref(f: u64) -> bool {
    let Some(rc) = REFCOUNT.get().get_mut((f / PAGE_SIZE) as usize) else { return true };
    match rc.checked_add(1) {
        Some(n) => {
            *rc = n;
            true
        }
        None => false,
    }
}

/// Count one mapping less; free the frame when none is left.
pub fn frame_unref(f: u64) {
    let Some(rc) = REFCOUNT.get().get_mut((f / PAGE_SIZE) as usize) else { return };
    debug_assert!(*rc > 0);
    *rc = rc.saturating_sub(1);
    if *rc == 0 {
        free_frame(f);
    }
}

/// Page-table access for `kcore::pagetable`, charging new tables to a quota.
pub struct KernelPhys<'a> {
    pub quota: &'a mut Quota,
}

impl kcore::pagetable::PhysMem for KernelPhys<'_> {
    fn table(&mut self, phys: u64) -> &mut [u64; 512] {
        // SAFETY: page-table frames are owned by the address space being walked and lie
        // within the direct map; the kernel is the only writer (see `kcell`).
        unsafe { &mut *(phys_to_virt(phys) as *mut [u64; 512]) }
    }
    fn alloc_table(&mut self) -> Option<u64> {
        if !self.quota.charge(1) {
            return None;
        }
        let f = alloc_frame();
        if f.is_none() {
            self.quota.uncharge(1);
        }
        f
    }
    fn free_table(&mut self, phys: u64) {
        free_frame(phys);
        self.quota.uncharge(1);
    }
}
