//! Flexpage operations: map, grant and demap of memory pages, I/O ports and
//! capabilities, all recorded in the mapping databases (`kcore::mapdb`) so that a
//! demap reaches everything derived from a resource, in any space, at any depth.
//!
//! A holder that got a resource from the kernel directly (sigma0's memory and
//! ports, root's boot image, capabilities the kernel made) becomes a root of its
//! tree the first time it passes the resource on.

use crate::kernel::Kernel;
use crate::task::{self, Obj};
use abi::layout::PAGE_SIZE;
use abi::{mem as m, Error};
use kcore::cspace::{CSpace, Cap};
use kcore::framedb::{self, DbError, Slot};
use kcore::mapdb::Change;
use kcore::pagetable as pt;

/// Rights bits of a memory node (`abi::mem` READ/WRITE/EXEC).
fn mem_rights(pte: u64) -> u8 {
    task::pte_rights(pte) as u8
}

impl Kernel {
    // ------------------------------------------------------------------ memory

    /// The mapping-database node of (task, va), whose leaf is `e`: the slot the leaf
    /// keeps, if it is that mapping's (`framedb::find`).
    fn node_of(&self, task_id: u32, va: u64, e: u64) -> Option<Slot> {
        self.framedb.find(e & pt::ADDR, pt::slot(e), task_id as u16, va)
    }

    /// Map (or grant) `n` pages of `src` at `sva` to `dst` at `dva` with at most
    /// `rights`. `strict`: every source page must exist with those rights and every
    /// destination page must be free (the `MEM_MAP` call); otherwise missing source
    /// pages are skipped and existing destination mappings replaced (IPC map items,
    /// as in L4). A frame mapped `framedb::MAX_NODES` times already, or a chain of
    /// mappings `MAX_DEPTH` deep, is `NoMemory`, as a quota that cannot pay.
    #[allow(clippy::too_many_arguments)]
    pub fn map_mem(
        &mut self,
        src: u32,
        sva: u64,
        dst: u32,
        dva: u64,
        n: u64,
        rights: u64,
        grant: bool,
        strict: bool,
    ) -> Result<(), Error> {
        let spml4 = self.task(src).pml4;
        let dpml4 = self.task(dst).pml4;
        if src == dst && sva < dva + n * PAGE_SIZE && dva < sva + n * PAGE_SIZE {
            return Err(Error::InvalidArg);
        }
        for i in 0..n {
            match task::lookup(spml4, sva + i * PAGE_SIZE) {
                None if strict => return Err(Error::NotMapped),
                Some(e) if e & pt::UTCB != 0 => return Err(Error::InvalidArg),
                Some(e) if strict && rights & !task::pte_rights(e) != 0 => return Err(Error::NoRights),
                _ => {}
            }
            if let Some(e) = task::lookup(dpml4, dva + i * PAGE_SIZE) {
                if strict || e & pt::UTCB != 0 {
                    return Err(Error::AlreadyMapped);
                }
            }
        }
        let db_err = |e: DbError| match e {
            DbError::Full | DbError::NoMemory => Error::NoMemory,
            DbError::NotHeld => Error::InvalidArg,
        };
        for i in 0..n {
            let (s, d) = (sva + i * PAGE_SIZE, dva + i * PAGE_SIZE);
            let Some(e) = task::lookup(spml4, s) else { continue };
            let frame = e & pt::ADDR;
            let have = mem_rights(e);
            let r = (rights as u8) & have;
            if r & m::READ as u8 == 0 {
                continue;
            }
            if let Some(de) = task::lookup(dpml4, d) {
                // Sending a page back onto a mapping it was derived from (a cycle)
                // changes nothing: demapping the destination would take the source
                // with it.
                if de & pt::ADDR == frame {
                    if let (Some(a), Some(b)) = (self.node_of(src, s, e), self.node_of(dst, d, de)) {
                        if self.framedb.derives_from(frame, a, b) {
                            continue;
                        }
                    }
                }
                // The source is not below the destination (checked just above), so the
                // demap leaves it, and `e` is still what it holds (its node may be gone:
                // a root left alone is no node; it is made one again below).
                self.demap_mem(dst, d, m::RIGHTS_MASK, true);
                debug_assert_eq!(task::lookup(spml4, s).map(|x| x & !pt::SLOT_BITS), Some(e & !pt::SLOT_BITS));
            }
            let e = task::lookup(spml4, s).unwrap_or(e);
            let from = match self.node_of(src, s, e) {
                Some(x) => x,
                None => {
                    // A holder the kernel gave the frame to passes it on: a root.
                    let x = self.framedb.add_root(frame, src as u16, s, have).map_err(db_err)?;
                    self.task(src).set_slot(s, x);
                    x
                }
            };
            let flags =
                |rights: u8, slot: Slot| pt::with_slot(task::pte_flags(rights as u64) | (e & task::CACHE_BITS), slot);
            if grant {
                self.framedb.grant(frame, from, dst as u16, d).map_err(db_err)?;
                if let Err(err) = self.task(dst).map_frame(d, frame, flags(have, from)) {
                    // Undo the move in the database; the source keeps the page.
                    let _ = self.framedb.grant(frame, from, src as u16, s);
                    return Err(err);
                }
                let _ = self.task(src).unmap_page(s, false);
                if r != have {
                    self.demap_mem(dst, d, (have & !r) as u64, true);
                }
            } else {
                let (slot, got) = self.framedb.map(frame, from, dst as u16, d, r).map_err(db_err)?;
                if let Err(err) = self.task(dst).map_frame(d, frame, flags(got, slot)) {
                    let _ = self.framedb.remove(frame, slot, |_, _, _| {});
                    return Err(err);
                }
            }
        }
        Ok(())
    }

    /// Take `remove` rights from the mappings derived from (task, va), and from that
    /// mapping itself when `include_self`. Losing READ means losing the page. Returns
    /// the mappings it visited (the work done: at most `framedb::MAX_NODES`).
    pub fn demap_mem(&mut self, task_id: u32, va: u64, remove: u64, include_self: bool) -> usize {
        let pml4 = self.task(task_id).pml4;
        let Some(e) = task::lookup(pml4, va) else { return 0 };
        if e & pt::UTCB != 0 {
            return 0;
        }
        let remove = if remove & m::READ != 0 { m::RIGHTS_MASK } else { remove & m::RIGHTS_MASK } as u8;
        let frame = e & pt::ADDR;
        if let Some(slot) = self.node_of(task_id, va, e) {
            let Kernel { framedb, tasks, .. } = self;
            framedb
                .demap(frame, slot, remove, include_self, |sp, a, ch| {
                    if let Some(t) = tasks[sp as usize].as_mut() {
                        apply_mem(t, a, ch);
                    }
                })
                .unwrap_or(1)
        } else if include_self {
            let left = mem_rights(e) & !remove;
            let ch = if left & m::READ as u8 == 0 { framedb::Change::Removed } else { framedb::Change::Reduced(left) };
            apply_mem(self.task(task_id), va, ch);
            1
        } else {
            1
        }
    }

    // ------------------------------------------------------------------ I/O ports

    /// Pass port `port` from `src` to `dst`. `io_root` holds every port from boot.
    pub fn map_port(&mut self, src: u32, dst: u32, port: u16, grant: bool) -> Result<(), Error> {
        if !self.mapdb_io.contains(port, src, port as u64) {
            if src != self.io_root {
                return Ok(()); // not held: nothing to pass (as with missing pages)
            }
            let _ = self.mapdb_io.add_root(port, src, port as u64, 1);
        }
        if src == dst {
            return Ok(());
        }
        if self.mapdb_io.contains(port, dst, port as u64) {
            return Ok(());
        }
        let had_io = self.task(dst).io.is_some();
        self.task(dst).set_port(port, true)?;
        // Its threads load its bitmap from now on (once per task, not per port).
        if !had_io {
            for t in self.threads.iter_mut().flatten() {
                if t.task == dst {
                    t.task_io = true;
                }
            }
        }
        if grant {
            let _ = self.mapdb_io.grant(port, (src, port as u64), (dst, port as u64));
            let _ = self.task(src).set_port(port, false);
        } else {
            let _ = self.mapdb_io.map(port, (src, port as u64), (dst, port as u64), 1);
        }
        Ok(())
    }

    pub fn demap_port(&mut self, task_id: u32, port: u16, include_self: bool) {
        let Kernel { mapdb_io, tasks, .. } = self;
        let _ = mapdb_io.demap(port, (task_id, port as u64), 1, include_self, |sp, _, _| {
            if let Some(t) = tasks[sp as usize].as_mut() {
                let _ = t.set_port(port, false);
            }
        });
    }

    // ------------------------------------------------------------------ capabilities

    /// Put a capability the kernel made into a slot (a root of its tree).
    pub fn cap_install(&mut self, task_id: u32, slot: u64, cap: Cap<Obj>) -> Result<(), Error> {
        self.task(task_id).cspace.insert(slot, cap)?;
        let _ = self.mapdb_cap.add_root(cap.obj, task_id, slot, cap.rights as u8);
        Ok(())
    }

    /// Derive a capability: (src, src_slot) → (dst, dst_slot) with rights `& mask`, and
    /// a badge if the source has none. With `grant` the source loses it. With
    /// `replace`, an occupied destination is first emptied (IPC items, as L4 maps over).
    #[allow(clippy::too_many_arguments)]
    pub fn cap_derive(
        &mut self,
        src: u32,
        src_slot: u64,
        dst: u32,
        dst_slot: u64,
        mask: u64,
        badge: u64,
        grant: bool,
        replace: bool,
    ) -> Result<(), Error> {
        let c = self.task(src).cspace.get(src_slot)?;
        if matches!(c.obj, Obj::Reply(..)) && !grant {
            // The right to answer one call exists once: it may move, never be copied.
            return Err(Error::WrongType);
        }
        let derived = CSpace::derive(c, mask, badge)?;
        if dst_slot >= abi::cap::SLOTS {
            return Err(Error::InvalidCap);
        }
        if let Ok(old) = self.task(dst).cspace.get(dst_slot) {
            if !replace {
                return Err(Error::SlotInUse);
            }
            // Sent back onto the capability it derives from (or onto itself): nothing
            // to do; revoking the destination would take the source with it.
            if old.obj == c.obj && self.mapdb_cap.derives_from(c.obj, (src, src_slot), (dst, dst_slot)) {
                return Ok(());
            }
            if src == dst && src_slot == dst_slot {
                return Ok(());
            }
            // The source is not below the destination (checked just above), so the
            // revoke leaves it, and `c` is still what it holds.
            self.cap_revoke(dst, dst_slot, true);
            debug_assert_eq!(self.task(src).cspace.get(src_slot), Ok(c));
        }
        if !self.mapdb_cap.contains(c.obj, src, src_slot) {
            let _ = self.mapdb_cap.add_root(c.obj, src, src_slot, c.rights as u8);
        }
        self.task(dst).cspace.insert(dst_slot, derived)?;
        if grant {
            let _ = self.mapdb_cap.grant(c.obj, (src, src_slot), (dst, dst_slot));
            let _ = self.task(src).cspace.delete(src_slot);
            if derived.rights != c.rights {
                self.cap_reduce(dst, dst_slot, c.rights & !derived.rights, true);
            }
        } else {
            let _ = self.mapdb_cap.map(c.obj, (src, src_slot), (dst, dst_slot), derived.rights as u8);
        }
        Ok(())
    }

    /// Empty one slot; what was derived from it stays (re-parented).
    pub fn cap_delete(&mut self, task_id: u32, slot: u64) -> Result<(), Error> {
        let c = self.task(task_id).cspace.delete(slot)?;
        let _ = self.mapdb_cap.remove_node(c.obj, (task_id, slot));
        Ok(())
    }

    /// Remove every capability derived from (task, slot), and the slot itself when
    /// `include_self`.
    pub fn cap_revoke(&mut self, task_id: u32, slot: u64, include_self: bool) {
        self.cap_reduce(task_id, slot, u8::MAX as u64, include_self);
    }

    /// Take `remove` rights away from everything derived from (task, slot) (and from
    /// itself with `include_self`); capabilities left with no rights are removed.
    pub fn cap_reduce(&mut self, task_id: u32, slot: u64, remove: u64, include_self: bool) {
        let Ok(c) = self.task(task_id).cspace.get(slot) else { return };
        if !self.mapdb_cap.contains(c.obj, task_id, slot) {
            if include_self {
                let _ = self.task(task_id).cspace.delete(slot);
            }
            return;
        }
        let Kernel { mapdb_cap, tasks, .. } = self;
        // A capability with no rights can still name its object (CAP_INFO, receive
        // from); only a full revocation (all bits) removes it.
        let _ = mapdb_cap.demap(c.obj, (task_id, slot), remove as u8, include_self, |sp, a, ch| {
            if let Some(t) = tasks[sp as usize].as_mut() {
                match ch {
                    Change::Removed => {
                        let _ = t.cspace.delete(a);
                    }
                    Change::Reduced(r) => t.cspace.set_rights(a, r as u64),
                }
            }
        });
    }

    // ------------------------------------------------------------------ task death

    /// Take a task's memory away page by page, with whatever was derived from each
    /// page, until the TSC passes `budget_end` (after at least `STRIP_AT_LEAST` pages,
    /// so that every slice makes progress however slow the machine). True when none is
    /// left.
    pub fn strip_memory(&mut self, id: u32, budget_end: u64) -> bool {
        const STRIP_AT_LEAST: usize = 32;
        // From where the last slice stopped: from the start each time, every slice would
        // walk the emptied page tables again (quadratic: a program of 589,824 pages took
        // 100 s to end).
        let (mut at, mut done) = (self.task(id).strip_from, 0);
        while let Some((va, e)) = self.task(id).next_leaf_in(at, abi::layout::USER_END) {
            at = va + abi::layout::PAGE_SIZE;
            if e & pt::UTCB != 0 {
                continue;
            }
            let frame = e & pt::ADDR;
            if let Some(slot) = self.node_of(id, va, e) {
                let Kernel { framedb, tasks, .. } = self;
                done += framedb
                    .remove(frame, slot, |sp, a, ch| {
                        if let Some(t) = tasks[sp as usize].as_mut() {
                            apply_mem(t, a, ch);
                        }
                    })
                    .unwrap_or(1);
            } else {
                let _ = self.task(id).unmap_page(va, false);
                done += 1;
            }
            // (Checked after every page once the least is done: one page's tree may
            // be thousands of mappings.)
            if done >= STRIP_AT_LEAST && crate::arch::timer::rdtsc() > budget_end {
                self.task(id).strip_from = at;
                return false; // the next slice goes on (and may find nothing left)
            }
        }
        true
    }

    /// Before a task's tables go: revoke everything others derived from its pages,
    /// ports and capabilities, and drop its own database nodes.
    pub fn release_task_resources(&mut self, id: u32) {
        crate::arch::iommu::task_gone(id);
        // A cursor through the address space: no list of its pages is allocated, so
        // tearing down a task of any size needs no kernel memory.
        self.strip_memory(id, u64::MAX);
        if self.task(id).io.is_some() {
            for port in 0..=self.task(id).io_max {
                if self.mapdb_io.contains(port, id, port as u64) {
                    let Kernel { mapdb_io, tasks, .. } = self;
                    let _ = mapdb_io.remove(port, (id, port as u64), |sp, _, _| {
                        if sp != id {
                            if let Some(t) = tasks[sp as usize].as_mut() {
                                let _ = t.set_port(port, false);
                            }
                        }
                    });
                }
            }
        }
        let slots: alloc::vec::Vec<(u64, Obj)> = self.task(id).cspace.iter().map(|(s, c)| (s, c.obj)).collect();
        for (slot, obj) in slots {
            if self.mapdb_cap.contains(obj, id, slot) {
                let Kernel { mapdb_cap, tasks, .. } = self;
                let _ = mapdb_cap.remove(obj, (id, slot), |sp, a, _| {
                    if sp != id {
                        if let Some(t) = tasks[sp as usize].as_mut() {
                            let _ = t.cspace.delete(a);
                        }
                    }
                });
            }
        }
    }
}

fn apply_mem(t: &mut task::Task, va: u64, ch: framedb::Change) {
    match ch {
        framedb::Change::Removed => {
            let _ = t.unmap_page(va, false);
        }
        framedb::Change::Reduced(r) if r & m::READ as u8 == 0 => {
            let _ = t.unmap_page(va, false);
        }
        framedb::Change::Reduced(r) => t.protect_page(va, r as u64),
        // Its node lives on in another slot of its frame's tree.
        framedb::Change::Moved(slot) => t.set_slot(va, slot),
    }
}
