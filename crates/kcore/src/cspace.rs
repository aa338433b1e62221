//! Capability spaces: a fixed number of slots per task, each empty or holding a
//! capability (an object reference, rights, a badge). Generic over the object
//! reference so that the kernel decides what objects are; this module decides
//! the rules: slots are checked, rights only shrink when copied, a badge is set
//! once (minting) and never changed.

use abi::Error;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

/// Counts every change, in any space, that takes a capability out of a slot or
/// reduces one (`delete`, `set_rights`, `purge`); filling an empty slot changes no
/// capability that was looked up, so it is not counted. What was looked up while the
/// count stood still is still there: the kernel's IPC fastpath keeps a thread's last
/// looked-up capability with the count it was looked up at, as a TLB keeps a
/// translation (`reductions`).
static REDUCTIONS: AtomicU64 = AtomicU64::new(1);

/// The count of capability removals and reductions so far (never 0).
#[inline(always)]
pub fn reductions() -> u64 {
    REDUCTIONS.load(Ordering::Relaxed)
}

fn reduced() {
    REDUCTIONS.fetch_add(1, Ordering::Relaxed);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cap<O: Copy> {
    pub obj: O,
    pub rights: u64,
    pub badge: u64,
}

pub struct CSpace<O: Copy> {
    slots: Vec<Option<Cap<O>>>,
}

impl<O: Copy> CSpace<O> {
    /// A space with `n` empty slots. Returns `None` if the allocation fails.
    pub fn try_new(n: usize) -> Option<Self> {
        let mut slots = Vec::new();
        slots.try_reserve_exact(n).ok()?;
        slots.resize(n, None);
        Some(CSpace { slots })
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn index(&self, slot: u64) -> Result<usize, Error> {
        if slot < self.slots.len() as u64 {
            Ok(slot as usize)
        } else {
            Err(Error::InvalidCap)
        }
    }

    pub fn get(&self, slot: u64) -> Result<Cap<O>, Error> {
        self.slots[self.index(slot)?].ok_or(Error::InvalidCap)
    }

    /// Put `cap` into an empty slot.
    pub fn insert(&mut self, slot: u64, cap: Cap<O>) -> Result<(), Error> {
        let i = self.index(slot)?;
        if self.slots[i].is_some() {
            return Err(Error::SlotInUse);
        }
        self.slots[i] = Some(cap);
        Ok(())
    }

    /// Empty a slot, returning what it held.
    pub fn delete(&mut self, slot: u64) -> Result<Cap<O>, Error> {
        let i = self.index(slot)?;
        let c = self.slots[i].take().ok_or(Error::InvalidCap)?;
        reduced();
        Ok(c)
    }

    /// Derive a capability from `src`: rights are `src.rights & mask`; a nonzero
    /// `badge` may only be given to an unbadged capability.
    pub fn derive(src: Cap<O>, mask: u64, badge: u64) -> Result<Cap<O>, Error> {
        let mut c = src;
        c.rights &= mask;
        if badge != 0 {
            if src.badge != 0 {
                return Err(Error::InvalidArg);
            }
            c.badge = badge;
        }
        Ok(c)
    }

    /// Copy within this space with reduced rights (and optionally a new badge).
    pub fn copy(&mut self, src: u64, dst: u64, mask: u64, badge: u64) -> Result<(), Error> {
        let c = Self::derive(self.get(src)?, mask, badge)?;
        let d = self.index(dst)?;
        if self.slots[d].is_some() {
            return Err(Error::SlotInUse);
        }
        self.slots[d] = Some(c);
        Ok(())
    }

    /// Change the rights of an occupied slot (used by revocation).
    pub fn set_rights(&mut self, slot: u64, rights: u64) {
        if let Some(Some(c)) = self.slots.get_mut(slot as usize) {
            c.rights = rights;
            reduced();
        }
    }

    /// Remove every capability for which `pred` holds (used when an object dies,
    /// so that no stale reference stays behind).
    pub fn purge(&mut self, mut pred: impl FnMut(&Cap<O>) -> bool) -> usize {
        let mut n = 0;
        for s in self.slots.iter_mut() {
            if s.as_ref().is_some_and(&mut pred) {
                *s = None;
                n += 1;
            }
        }
        if n > 0 {
            reduced();
        }
        n
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, Cap<O>)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.map(|c| (i as u64, c)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Obj(u32);

    fn cap(o: u32, rights: u64) -> Cap<Obj> {
        Cap { obj: Obj(o), rights, badge: 0 }
    }

    #[test]
    fn slots_are_checked() {
        let mut cs = CSpace::<Obj>::try_new(8).unwrap();
        assert_eq!(cs.get(0), Err(Error::InvalidCap));
        assert_eq!(cs.get(8), Err(Error::InvalidCap));
        assert_eq!(cs.get(u64::MAX), Err(Error::InvalidCap));
        cs.insert(3, cap(1, 3)).unwrap();
        assert_eq!(cs.insert(3, cap(2, 3)), Err(Error::SlotInUse));
        assert_eq!(cs.insert(9, cap(2, 3)), Err(Error::InvalidCap));
        assert_eq!(cs.get(3).unwrap().obj, Obj(1));
        assert_eq!(cs.delete(3).unwrap().obj, Obj(1));
        assert_eq!(cs.delete(3), Err(Error::InvalidCap));
    }

    #[test]
    fn rights_only_shrink_and_badge_once() {
        let mut cs = CSpace::<Obj>::try_new(8).unwrap();
        cs.insert(1, cap(7, 0b01)).unwrap();
        cs.copy(1, 2, u64::MAX, 0).unwrap();
        assert_eq!(cs.get(2).unwrap().rights, 0b01, "mask cannot add rights");
        cs.copy(1, 3, 0, 42).unwrap();
        let c = cs.get(3).unwrap();
        assert_eq!((c.rights, c.badge), (0, 42));
        assert_eq!(cs.copy(3, 4, u64::MAX, 43), Err(Error::InvalidArg), "badge is set once");
        cs.copy(3, 4, u64::MAX, 0).unwrap();
        assert_eq!(cs.get(4).unwrap().badge, 42, "copies keep the badge");
        assert_eq!(cs.copy(1, 4, 1, 0), Err(Error::SlotInUse));
        assert_eq!(cs.copy(5, 6, 1, 0), Err(Error::InvalidCap));
    }

    #[test]
    fn purge_removes_matching() {
        let mut cs = CSpace::<Obj>::try_new(8).unwrap();
        cs.insert(1, cap(7, 1)).unwrap();
        cs.insert(2, cap(8, 1)).unwrap();
        cs.insert(3, cap(7, 1)).unwrap();
        assert_eq!(cs.purge(|c| c.obj == Obj(7)), 2);
        assert_eq!(cs.iter().count(), 1);
    }

    /// Every way a looked-up capability can go away or lose rights advances the count
    /// (other tests may advance it too, so only "advanced" is checked).
    #[test]
    fn removals_and_reductions_are_counted() {
        let mut cs = CSpace::<Obj>::try_new(8).unwrap();
        cs.insert(1, cap(7, 3)).unwrap();
        cs.insert(2, cap(8, 3)).unwrap();
        cs.insert(3, cap(9, 3)).unwrap();
        type Step<'a> = &'a mut dyn FnMut(&mut CSpace<Obj>);
        let steps: [Step; 3] = [
            &mut |cs| {
                cs.delete(1).unwrap();
            },
            &mut |cs| cs.set_rights(2, 1),
            &mut |cs| {
                assert_eq!(cs.purge(|c| c.obj == Obj(9)), 1);
            },
        ];
        for step in steps {
            let before = reductions();
            step(&mut cs);
            assert!(reductions() > before);
        }
        assert_ne!(reductions(), 0);
    }
}
