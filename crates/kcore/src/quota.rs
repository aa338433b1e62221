//! Kernel-memory quotas.
//!
//! Kernel memory a task may make the kernel use, in pages: page tables, thread stacks
//! and UTCBs, its capability space, an I/O bitmap. (User memory is not the kernel's: it
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

#[cfg(test)]
mod tests {
    use super::Quota;

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
