//! DMA confined by the IOMMU (Intel VT-d): every remapping unit (DRHD) the ACPI DMAR
//! table names on segment 0, each programmed with a root table of its own, for the
//! devices in its scope (the ones it lists, or for an include-all unit every device no
//! other unit lists: `pcie::vtd::unit_of`). A device the kernel handed to a driver by
//! capability (`PCI_CREATE`) gets a domain of its own whose second-level tables map
//! only the frames its driver mapped for DMA (`PCI_DMA_MAP`: the driver's own pages,
//! at their physical addresses, so drivers keep naming buffers by physical address);
//! a frame leaves the domain when the driver unmaps it for DMA, when it loses the page
//! (unmap, revocation by its pager or sigma0, its death: `Task::unmap_page` tells this
//! module), and the IOTLB is invalidated before the call returns, so before the frame
//! can be handed out again. Every other device passes through untranslated (its
//! driver, if any, is trusted with DMA). A device that reaches outside its domain
//! is refused by the unit; the fault interrupt (`VEC_IOMMU`) prints each fault record.
//! The tables' layout and the DMAR's parsing are `pcie::vtd`'s (host-tested).

use crate::arch::boot::phys_to_virt;
use crate::arch::serial::kprintln;
use crate::kcell::KCell;
use alloc::vec::Vec;
use pcie::vtd::{self, reg};

/// The vector of the unit's fault event interrupt.
pub const VEC_IOMMU: u8 = 0x4f;
/// Devices with a domain of their own at most.
const DOMAINS: usize = 16;
/// Table pages one domain may use (512 map 2 MiB; 64 tables: over 100 MiB of DMA).
const DOMAIN_TABLES: u32 = 64;

struct Domain {
    bdf: u16,
    /// The top-level table.
    root: u64,
    tables: u32,
    /// The task whose pages it maps (the driver that mapped first), or none.
    owner: Option<u32>,
}

struct Unit {
    regs: u64,
    cap: u64,
    ecap: u64,
    levels: u8,
    /// The root table, and each bus's own context table (0: the bus points at the shared
    /// one, every function passing through).
    root: u64,
    ctx: [u64; 256],
    domains: [Option<Domain>; DOMAINS],
    faults: u64,
    /// The invalidation queue (0: invalidations through the registers) and its tail,
    /// the frame its wait descriptors write their status to, and the last status.
    queue: u64,
    qtail: usize,
    status: u64,
    seq: u32,
}

/// A remapping unit of the DMAR table, and its state if the kernel programs it.
struct Entry {
    base: u64,
    segment: u16,
    include_all: bool,
    scopes: Vec<vtd::Scope>,
    unit: Option<Unit>,
}

/// The DMAR table's units, in its order.
static UNITS: KCell<Vec<Entry>> = KCell::new(Vec::new());

/// A bridge's secondary and subordinate bus (None: no function there, or no bridge).
fn bridge_buses(b: pcie::Bdf) -> Option<(u8, u8)> {
    use pcie::Config;
    let f = super::pci::Func(b);
    if !f.present() || (f.read32(0x0c) >> 16) & 0x7f != 1 {
        return None;
    }
    let v = f.read32(0x18);
    Some(((v >> 8) as u8, (v >> 16) as u8))
}

/// The table's entry for the unit that remaps device `bdf`, if one does.
fn entry_of(bdf: u16) -> Option<&'static mut Entry> {
    let es = UNITS.get();
    let units = es.iter().map(|e| (e.segment, e.include_all, e.scopes.as_slice()));
    let i = vtd::unit_of(units, 0, pcie::Bdf::from_id(bdf), &bridge_buses)?;
    es.get_mut(i)
}

/// The programmed unit that remaps device `bdf`, if one does.
fn unit_of(bdf: u16) -> Option<&'static mut Unit> {
    entry_of(bdf)?.unit.as_mut()
}

/// Every programmed unit.
fn units() -> impl Iterator<Item = &'static mut Unit> {
    UNITS.get().iter_mut().filter_map(|e| e.unit.as_mut())
}

impl Unit {
    fn r32(&self, off: usize) -> u32 {
        // SAFETY: the unit's registers, in the direct map's uncached top GiB (checked at
        // init), read by the kernel alone.
        unsafe { core::ptr::read_volatile(phys_to_virt(self.regs + off as u64) as *const u32) }
    }
    fn w32(&self, off: usize, v: u32) {
        // SAFETY: as in r32.
        unsafe { core::ptr::write_volatile(phys_to_virt(self.regs + off as u64) as *mut u32, v) }
    }
    fn r64(&self, off: usize) -> u64 {
        self.r32(off) as u64 | (self.r32(off + 4) as u64) << 32
    }
    fn w64(&self, off: usize, v: u64) {
        self.w32(off, v as u32);
        self.w32(off + 4, (v >> 32) as u32);
    }

    /// A global command, waited for (its status bit set or cleared as asked).
    fn command(&self, bit: u32, on: bool) {
        let keep = self.r32(reg::GSTS) & vtd::GSTS_ONE_SHOT;
        self.w32(reg::GCMD, if on { keep | bit } else { keep & !bit });
        for _ in 0..1_000_000 {
            if (self.r32(reg::GSTS) & bit != 0) == on || bit == vtd::GCMD_SRTP && !on {
                return;
            }
            core::hint::spin_loop();
        }
        kprintln!("[iommu] the unit did not take command {:#x}", bit);
    }

    /// Post descriptors to the invalidation queue and wait until the unit has done
    /// them (a wait descriptor writing a new status value behind them).
    fn queued(&mut self, descs: &[[u64; 2]]) {
        self.seq = self.seq.wrapping_add(1).max(1);
        let status = phys_to_virt(self.status) as *mut u32;
        // SAFETY: the status frame is the kernel's; the unit writes it only through the
        // wait descriptor below.
        unsafe { core::ptr::write_volatile(status, 0) };
        let wait = vtd::inv::wait(self.status, self.seq);
        for d in descs.iter().chain(core::iter::once(&wait)) {
            let p = phys_to_virt(self.queue + 16 * self.qtail as u64) as *mut u64;
            // SAFETY: the queue is a kernel frame of QUEUE_ENTRIES 16-byte descriptors;
            // the unit reads only those between its head and the tail written below.
            unsafe {
                core::ptr::write_volatile(p, d[0]);
                core::ptr::write_volatile(p.add(1), d[1]);
            }
            self.qtail = (self.qtail + 1) % vtd::QUEUE_ENTRIES;
        }
        self.w64(reg::IQT, (self.qtail as u64) << 4);
        for _ in 0..1_000_000 {
            // SAFETY: as above.
            if unsafe { core::ptr::read_volatile(status) } == self.seq {
                return;
            }
            if self.r32(reg::FSTS) & vtd::FSTS_IQE != 0 {
                kprintln!("[iommu] the unit at {:#x} refused an invalidation descriptor", self.regs);
                self.w32(reg::FSTS, vtd::FSTS_IQE);
                return;
            }
            core::hint::spin_loop();
        }
        kprintln!("[iommu] queued invalidation at {:#x} did not finish", self.regs);
    }

    fn invalidate_context(&mut self) {
        if self.queue != 0 {
            return self.queued(&[vtd::inv::CONTEXT_GLOBAL]);
        }
        self.w64(reg::CCMD, vtd::CCMD_ICC_GLOBAL);
        for _ in 0..1_000_000 {
            if self.r64(reg::CCMD) >> 63 == 0 {
                return;
            }
            core::hint::spin_loop();
        }
        kprintln!("[iommu] context-cache invalidation did not finish");
    }

    /// Drop every cached translation (before a frame taken out may be used again).
    fn invalidate_iotlb(&mut self) {
        if self.queue != 0 {
            return self.queued(&[vtd::inv::IOTLB_GLOBAL]);
        }
        let at = vtd::iotlb_invalidate_offset(self.ecap);
        self.w64(at, vtd::IOTLB_IVT_GLOBAL);
        for _ in 0..1_000_000 {
            if self.r64(at) >> 63 == 0 {
                return;
            }
            core::hint::spin_loop();
        }
        kprintln!("[iommu] IOTLB invalidation did not finish");
    }

    /// Set function `bdf`'s context entry; its bus gets a context table of its own
    /// first (a copy of the shared one). Err: no memory for it.
    fn set_context(&mut self, bdf: u16, e: [u64; 2]) -> Result<(), abi::Error> {
        let bus = (bdf >> 8) as usize;
        if self.ctx[bus] == 0 {
            let t = crate::mem::alloc_frame().ok_or(abi::Error::NoMemory)?;
            fill_passthrough(t, self.levels);
            self.ctx[bus] = t;
            let r = vtd::root_entry(t);
            // SAFETY: the root table is a kernel frame of 256 16-byte entries; the unit
            // rereads it after the invalidation below.
            unsafe { core::ptr::write_volatile((phys_to_virt(self.root) as *mut u64).add(2 * bus), r[0]) };
        }
        let p = phys_to_virt(self.ctx[bus] + 16 * (bdf as u64 & 0xff)) as *mut u64;
        // SAFETY: the bus's context table is a kernel frame of 256 16-byte entries; the
        // unit reads it only after the invalidation below.
        unsafe {
            core::ptr::write_volatile(p, 0);
            core::ptr::write_volatile(p.add(1), e[1]);
            core::ptr::write_volatile(p, e[0]);
        }
        self.invalidate_context();
        self.invalidate_iotlb();
        Ok(())
    }
}

/// Every function of a (new, zeroed) context table passing through, in domain 1.
fn fill_passthrough(table: u64, levels: u8) {
    let e = vtd::context_passthrough(levels, 1);
    for devfn in 0..256u64 {
        let p = phys_to_virt(table + 16 * devfn) as *mut u64;
        // SAFETY: a kernel frame of 256 16-byte entries, not yet seen by the unit.
        unsafe {
            core::ptr::write_volatile(p.add(1), e[1]);
            core::ptr::write_volatile(p, e[0]);
        }
    }
}

/// Kernel frames as translation tables.
struct KernelTables;

impl vtd::Tables for KernelTables {
    fn alloc(&mut self) -> Option<u64> {
        crate::mem::alloc_frame()
    }
    fn read(&self, table: u64, i: usize) -> u64 {
        // SAFETY: `table` is a kernel frame holding a translation table (512 entries).
        unsafe { core::ptr::read_volatile((phys_to_virt(table) as *const u64).add(i % 512)) }
    }
    fn write(&mut self, table: u64, i: usize, v: u64) {
        // SAFETY: as in read.
        unsafe { core::ptr::write_volatile((phys_to_virt(table) as *mut u64).add(i % 512), v) }
    }
}

/// Find and turn on every remapping unit of segment 0 (translation on, every device
/// passing through until it is given to a driver). Whether any is on.
pub fn init(rsdp_phys: u64) -> bool {
    let found = super::acpi::dmar(rsdp_phys, |b| {
        let us = vtd::units(b)?;
        let us = us.map(|u| (u.base, u.segment, u.include_all, u.scopes().collect::<Vec<_>>())).collect::<Vec<_>>();
        Some((us, vtd::dmar_intr_remap(b)))
    });
    let Some(Some((found, intr_remap))) = found else { return false };
    let n = found.len();
    for (base, segment, include_all, scopes) in found {
        let unit = if segment != 0 {
            kprintln!(
                "[iommu] VT-d unit at {:#x} serves PCI segment {}, which Scion does not use: not programmed",
                base,
                segment
            );
            None
        } else {
            bring_up(base, include_all, scopes.len())
        };
        UNITS.get().push(Entry { base, segment, include_all, scopes, unit });
    }
    if n > 1 {
        kprintln!("[iommu] {} remapping units: each confines the devices in its scope", n);
    }
    if units().next().is_none() {
        return false;
    }
    remap_interrupts(intr_remap);
    true
}

/// Interrupt remapping: one table (handle = interrupt number) shared by every unit,
/// each entry naming the one requester that may use it.
struct Remap {
    table: u64,
    /// The IOAPIC's requester id (from its DMAR device scope).
    ioapic: u16,
}

static REMAP: KCell<Option<Remap>> = KCell::new(None);

/// Whether interrupts are remapped (MSI, MSI-X and IOAPIC entries in remappable format).
pub fn remapping() -> bool {
    REMAP.get().is_some()
}

/// The IOAPIC's requester id, for its entries (0 without remapping).
pub fn ioapic_source() -> u16 {
    REMAP.get().as_ref().map_or(0, |r| r.ioapic)
}

/// Set remapping table entry `handle` and drop every unit's cached copy of it.
pub fn set_irte(handle: u16, e: vtd::Irte) {
    let Some(r) = REMAP.get().as_ref() else { return };
    if handle as usize >= vtd::IRT_ENTRIES {
        return;
    }
    let [lo, hi] = e.encode();
    let p = phys_to_virt(r.table + 16 * handle as u64) as *mut u64;
    // SAFETY: the remapping table is a kernel frame of IRT_ENTRIES 16-byte entries; the
    // present bit is in the low word, written last, and the units drop their cached copy
    // below before the kernel relies on the new one.
    unsafe {
        core::ptr::write_volatile(p.add(1), hi);
        core::ptr::write_volatile(p, lo);
    }
    for u in units() {
        u.queued(&[vtd::inv::IEC_GLOBAL]);
    }
}

/// Turn interrupt remapping on if the platform says it has it (the DMAR's flag), every
/// unit of the table is programmed and offers it with queued invalidation, and the
/// IOAPIC is in a unit's scope; else say why messages stay in compatibility format.
fn remap_interrupts(flag: bool) {
    let es = UNITS.get();
    let ioapic = es.iter().flat_map(|e| e.scopes.iter()).find(|s| s.kind == vtd::SCOPE_IOAPIC);
    let why = if !flag {
        Some("the DMAR table does not offer it")
    } else if es.iter().any(|e| e.unit.as_ref().is_none_or(|u| !vtd::interrupt_remapping(u.ecap))) {
        Some("a remapping unit is unused or lacks it (or queued invalidation)")
    } else if ioapic.is_none() {
        Some("no unit's scope holds the IOAPIC")
    } else {
        None
    };
    if let Some(why) = why {
        kprintln!(
            "[iommu] no interrupt remapping ({}): MSI and IOAPIC messages in compatibility format, a driver that rewrites its device's MSI-X table can reach any vector",
            why
        );
        return;
    }
    let ioapic = ioapic.and_then(|s| s.device(&|_| None)).map_or(0, |b| b.id());
    let Some(table) = crate::mem::alloc_frame() else { return };
    let mut frames = Vec::new();
    for _ in 0..2 * es.len() {
        match crate::mem::alloc_frame() {
            Some(f) => frames.push(f),
            None => return,
        }
    }
    for u in units() {
        let (queue, status) = (frames.pop().expect("counted"), frames.pop().expect("counted"));
        // Queued invalidation first (the entry cache has no register), then the table,
        // its cache dropped, then remapping on; compatibility format stays blocked.
        u.w64(reg::IQT, 0);
        u.w64(reg::IQA, vtd::iqa(queue));
        u.command(vtd::GCMD_QIE, true);
        (u.queue, u.qtail, u.status) = (queue, 0, status);
        u.w64(reg::IRTA, vtd::irta(table));
        u.command(vtd::GCMD_SIRTP, true);
        u.queued(&[vtd::inv::IEC_GLOBAL]);
        u.command(vtd::GCMD_IRE, true);
    }
    // The IOAPIC's entries are rewritten next (`irqchip::remap_ioapic`, by the boot);
    // every line is masked until then.
    *REMAP.get() = Some(Remap { table, ioapic });
    let b = pcie::Bdf::from_id(ioapic);
    kprintln!(
        "[iommu] interrupt remapping on: MSI, MSI-X and IOAPIC messages through {} table entries, each taken only from its device (the IOAPIC is {:02x}:{:02x}.{}); compatibility-format messages not allowed (CFI clear)",
        vtd::IRT_ENTRIES,
        b.bus,
        b.dev,
        b.func
    );
}

/// Program one unit: its root table, every bus passing through, faults to this CPU,
/// translation on. None (said) if it cannot be used.
fn bring_up(regs: u64, include_all: bool, scopes: usize) -> Option<Unit> {
    if !(0xC000_0000..0x1_0000_0000).contains(&regs) {
        kprintln!(
            "[iommu] VT-d unit at {:#x} outside the uncached window: not used, the devices in its scope are trusted with DMA",
            regs
        );
        return None;
    }
    let probe = Unit {
        regs,
        cap: 0,
        ecap: 0,
        levels: 0,
        root: 0,
        ctx: [0; 256],
        domains: Default::default(),
        faults: 0,
        queue: 0,
        qtail: 0,
        status: 0,
        seq: 0,
    };
    let (cap, ecap) = (probe.r64(reg::CAP), probe.r64(reg::ECAP));
    let Some(levels) = vtd::levels(cap) else {
        kprintln!("[iommu] VT-d unit at {:#x} offers no 39- or 48-bit tables: not used, the devices in its scope are trusted with DMA", regs);
        return None;
    };
    if !vtd::passthrough(ecap) {
        kprintln!(
            "[iommu] VT-d unit at {:#x} (ecap {:#x}) cannot pass other devices through: not used, the devices in its scope are trusted with DMA",
            regs,
            ecap
        );
        return None;
    }
    let (Some(root), Some(shared)) = (crate::mem::alloc_frame(), crate::mem::alloc_frame()) else { return None };
    let mut unit = Unit { cap, ecap, levels, root, ..probe };
    // Every function of every bus passes through (domain 1) until a driver is given it:
    // one shared context table, a bus's own made when one of its functions is confined.
    fill_passthrough(shared, levels);
    let r = vtd::root_entry(shared);
    for bus in 0..256 {
        // SAFETY: the root table, a zeroed kernel frame of 256 16-byte entries, not yet
        // seen by the unit.
        unsafe { core::ptr::write_volatile((phys_to_virt(root) as *mut u64).add(2 * bus), r[0]) };
    }
    unit.w64(reg::RTADDR, root);
    unit.command(vtd::GCMD_SRTP, true);
    unit.invalidate_context();
    unit.invalidate_iotlb();
    // Faults interrupt the boot CPU (this one: its APIC id is not recorded yet).
    let (addr, data) = pcie::message(super::lapic::id(), VEC_IOMMU);
    unit.w32(reg::FEDATA, data);
    unit.w32(reg::FEADDR, addr as u32);
    unit.w32(reg::FEUADDR, 0);
    unit.w32(reg::FECTL, 0);
    unit.command(vtd::GCMD_TE, true);
    kprintln!(
        "[iommu] VT-d at {:#x}: translation on ({}-level tables) for {}; a device given to a driver by capability reaches only the frames its driver maps for DMA, the others pass through",
        regs,
        levels,
        if include_all { "every device no other unit lists" } else { "the devices it lists" }
    );
    if !include_all && scopes == 0 {
        kprintln!("[iommu] VT-d at {:#x} lists no device", regs);
    }
    Some(unit)
}

/// Whether device `bdf`'s DMA is confined (a programmed unit remaps it).
pub fn confines(bdf: u16) -> bool {
    unit_of(bdf).is_some()
}

fn domain_of(u: &Unit, bdf: u16) -> Option<usize> {
    u.domains.iter().position(|d| d.as_ref().is_some_and(|d| d.bdf == bdf))
}

fn clear(u: &mut Unit, i: usize) {
    let levels = u.levels;
    let Some(d) = u.domains[i].as_mut() else { return };
    let mut below = alloc::vec::Vec::new();
    vtd::tables_below(&KernelTables, d.root, levels, &mut |t| below.push(t));
    crate::mem::zero_frame(d.root);
    d.tables = 1;
    d.owner = None;
    u.invalidate_iotlb();
    for t in below {
        crate::mem::free_frame(t);
    }
}

/// Give device `bdf` a domain of its own, empty (a device just handed to a driver can
/// reach nothing until its driver maps frames). Err: no domain left or no memory.
pub fn confine(bdf: u16) -> Result<(), abi::Error> {
    if UNITS.get().is_empty() {
        return Ok(());
    }
    let Some(u) = unit_of(bdf) else {
        let b = pcie::Bdf::from_id(bdf);
        let why = match entry_of(bdf) {
            Some(e) => alloc::format!("its unit at {:#x} is not used", e.base),
            None => "no remapping unit's scope holds it".into(),
        };
        kprintln!("[iommu] {:02x}:{:02x}.{}: {}; its driver is trusted with DMA", b.bus, b.dev, b.func, why);
        return Ok(());
    };
    if let Some(i) = domain_of(u, bdf) {
        clear(u, i);
        return Ok(());
    }
    let i = u.domains.iter().position(|d| d.is_none()).ok_or(abi::Error::NoMemory)?;
    let root = crate::mem::alloc_frame().ok_or(abi::Error::NoMemory)?;
    // Domain ids: 1 is pass-through; device domains from 2.
    if let Err(e) = u.set_context(bdf, vtd::context_entry(root, u.levels, i as u16 + 2)) {
        crate::mem::free_frame(root);
        return Err(e);
    }
    u.domains[i] = Some(Domain { bdf, root, tables: 1, owner: None });
    Ok(())
}

/// Map frame `pa` (of task `task`, writable or not) into `bdf`'s domain at `pa`.
/// Ok(false) without an IOMMU (nothing to do: the driver is trusted).
pub fn map(bdf: u16, task: u32, pa: u64, writable: bool) -> Result<bool, abi::Error> {
    let Some(u) = unit_of(bdf) else { return Ok(false) };
    let i = domain_of(u, bdf).ok_or(abi::Error::BadState)?;
    let levels = u.levels;
    let d = u.domains[i].as_mut().expect("found");
    if d.owner.is_some_and(|o| o != task) {
        return Err(abi::Error::NoRights);
    }
    if d.tables + levels as u32 > DOMAIN_TABLES {
        return Err(abi::Error::NoMemory);
    }
    let mut t = Counted(&mut d.tables);
    let rights = vtd::READ | if writable { vtd::WRITE } else { 0 };
    vtd::map(&mut t, d.root, levels, pa, pa, rights).map_err(|e| match e {
        vtd::MapError::BadAddress => abi::Error::InvalidArg,
        vtd::MapError::NoMemory => abi::Error::NoMemory,
    })?;
    d.owner = Some(task);
    Ok(true)
}

/// Tables that count what they allocate.
struct Counted<'a>(&'a mut u32);

impl vtd::Tables for Counted<'_> {
    fn alloc(&mut self) -> Option<u64> {
        *self.0 += 1;
        KernelTables.alloc()
    }
    fn read(&self, table: u64, i: usize) -> u64 {
        KernelTables.read(table, i)
    }
    fn write(&mut self, table: u64, i: usize, v: u64) {
        KernelTables.write(table, i, v)
    }
}

/// Take frame `pa` out of `bdf`'s domain (the driver unmaps it for DMA).
pub fn unmap(bdf: u16, pa: u64) -> Result<(), abi::Error> {
    let Some(u) = unit_of(bdf) else { return Ok(()) };
    let i = domain_of(u, bdf).ok_or(abi::Error::BadState)?;
    let (root, levels) = (u.domains[i].as_ref().expect("found").root, u.levels);
    if vtd::unmap(&mut KernelTables, root, levels, pa).is_some() {
        u.invalidate_iotlb();
    }
    Ok(())
}

/// Task `task` no longer maps frame `pa`: out of every domain it maps into.
pub fn revoke(task: u32, pa: u64) {
    for u in units() {
        let levels = u.levels;
        let mut any = false;
        for d in u.domains.iter().flatten().filter(|d| d.owner == Some(task)) {
            any |= vtd::unmap(&mut KernelTables, d.root, levels, pa).is_some();
        }
        if any {
            u.invalidate_iotlb();
        }
    }
}

/// Task `task` is gone: the domains it mapped into are emptied.
pub fn task_gone(task: u32) {
    for u in units() {
        for i in 0..DOMAINS {
            if u.domains[i].as_ref().is_some_and(|d| d.owner == Some(task)) {
                clear(u, i);
            }
        }
    }
}

/// The fault interrupt (every unit signals it): print and clear every fault record.
pub fn fault_interrupt() {
    for u in units() {
        u.take_faults();
    }
}

impl Unit {
    fn take_faults(&mut self) {
        let u = self;
        let (first, n) = vtd::fault_records(u.cap);
        for k in 0..n {
            let at = first + 16 * k;
            let (lo, hi) = (u.r64(at), u.r64(at + 8));
            if let Some(f) = vtd::Fault::decode(lo, hi) {
                u.faults += 1;
                let b = pcie::Bdf::from_id(f.source);
                if f.is_interrupt() {
                    kprintln!(
                        "[iommu] interrupt fault: device {:02x}:{:02x}.{} sent a message through remapping entry {} (reason {:#x}): blocked",
                        b.bus,
                        b.dev,
                        b.func,
                        f.entry(),
                        f.reason
                    );
                    u.w32(at + 12, 1 << 31);
                    continue;
                }
                kprintln!(
                    "[iommu] DMA fault: device {:02x}:{:02x}.{} {} {:#x}, outside what its driver mapped (reason {:#x}): refused",
                    b.bus,
                    b.dev,
                    b.func,
                    if f.write { "wrote" } else { "read" },
                    f.page,
                    f.reason
                );
                // The fault bit is cleared by writing it.
                u.w32(at + 12, 1 << 31);
            }
        }
        // Primary fault overflow and pending bits.
        u.w32(reg::FSTS, u.r32(reg::FSTS) & 0x7f);
    }
}
