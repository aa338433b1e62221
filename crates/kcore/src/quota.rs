//! Kernel-memory quotas.
//!
//! Kernel memory a task may make the kernel use, in pages: page tables, thread stacks
//! and UTCBs, its capability space, an I/O bitmap, and the mapping-database nodes of
//! the pages mapped in it (small objects, charged a page per [`Objects::PER_PAGE`]). (User memory is not the kernel's: it
//! comes from sigma0 through pagers.) Children's limits are reserved from the parent's.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    pub limit: u64,
    pub used: u64,
}

impl Quota {
    /// Take `n` pages if they fit under the limit; `false` (and nothing taken) if not.
    pub fn charge(&mut self, n: u64) -> bool {
        match self.used.checked_add(n) {
            Some(u) if u <= self.limit => {
                self.used = u;
                true
            }
            _ => false,
        }
    }
    /// Give back `n` pages (never below zero).
    pub fn uncharge(&mut self, n: u64) {
        self.used = self.used.saturating_sub(n);
    }
}

/// Small kernel objects of one kind that a task holds (its pages' mapping-database
/// nodes), charged to its quota by the page: the page that holds the first of each run
/// of `per_page` objects is charged when that object comes and given back when it goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Objects {
    pub count: u64,
}

impl Objects {
    /// Mapping-database nodes per quota page (`abi::kquota::NODES_PER_PAGE`).
    pub const PER_PAGE: u64 = abi::kquota::NODES_PER_PAGE;

    fn pages(n: u64) -> u64 {
        n.div_ceil(Self::PER_PAGE)
    }

    /// One more object, if `q` can pay for it (`false`: nothing taken).
    pub fn add(&mut self, q: &mut Quota) -> bool {
        let more = Self::pages(self.count + 1) - Self::pages(self.count);
        if more > 0 && !q.charge(more) {
            return false;
        }
        self.count += 1;
        true
    }

    /// One object fewer (none left: nothing happens).
    pub fn remove(&mut self, q: &mut Quota) {
        if self.count == 0 {
            return;
        }
        q.uncharge(Self::pages(self.count) - Self::pages(self.count - 1));
        self.count -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::{Objects, Quota};

    #[test]
    fn objects_are_charged_by_the_page() {
        let mut q = Quota { limit: 2, used: 0 };
        let mut o = Objects::default();
        assert!(o.add(&mut q));
        assert_eq!(q.used, 1, "the first object takes a page");
        for _ in 1..Objects::PER_PAGE {
            assert!(o.add(&mut q));
        }
        assert_eq!(q.used, 1, "a page holds PER_PAGE of them");
        for _ in 0..Objects::PER_PAGE {
            assert!(o.add(&mut q));
        }
        assert_eq!(q.used, 2);
        assert!(!o.add(&mut q), "the third page is over the limit");
        assert_eq!((o.count, q.used), (2 * Objects::PER_PAGE, 2), "a refused add takes nothing");
        for _ in 0..2 * Objects::PER_PAGE {
            o.remove(&mut q);
        }
        assert_eq!((o.count, q.used), (0, 0), "every page comes back");
        o.remove(&mut q);
        assert_eq!((o.count, q.used), (0, 0));
    }

    #[test]
    fn charge_within_limit() {
        let mut q = Quota { limit: 3, used: 0 };
        assert!(q.charge(2));
        assert!(!q.charge(2), "over the limit");
        assert_eq!(q.used, 2, "a refused charge takes nothing");
        assert!(q.charge(1));
        q.uncharge(5);
        assert_eq!(q.used, 0);
        let mut big = Quota { limit: u64::MAX, used: u64::MAX - 1 };
        assert!(!big.charge(2), "overflow is refused");
        assert!(big.charge(1));
    }
}
