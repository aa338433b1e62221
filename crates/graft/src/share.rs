//! Who pays for graft time: each principal's share of its server's time, and the
//! back-off of a principal whose grafts misbehave.
//!
//! A server runs its grafts on its one serving thread, so every graft call and every
//! load is time the server's other clients wait. Each principal therefore has a
//! **bucket** of graft time (a token bucket in the host's clock): it fills at
//! `1 / SHARE_DIV` of real time up to `BURST_MS`; the principal's eviction calls (made
//! inside other clients' requests) and its loads (verification, compilation) are paid
//! from it, and it may go into debt by one of them (a call is not cut at the bucket's
//! edge: the watchdog's limit bounds it). While a principal's bucket is empty its grafts
//! at the eviction point are not called (the default policy answers, counted as
//! `skipped`) and its loads are refused with the time to wait. Over any long run, one
//! principal's grafts take at most `1 / SHARE_DIV` of the server's time in those, plus
//! one burst. (A test run and a call at the stream or logical-disk points are the
//! principal's own request, bounded per request — `TURN_MS`, the watchdog — and served
//! in turn with everyone's: counted, not charged.)
//!
//! A principal whose graft had to be **stopped by the watchdog** (and so unloaded) gets
//! a strike at that point: it may load nothing there for a back-off that doubles with
//! each strike (`BACKOFF_MS` … `MAX_BACKOFF_MS`), as a supervisor's restart back-off
//! does; a strike is forgiven after `FORGIVE_MS` without a new one. So a spin loaded
//! again and again in a loop costs the server one stopped call per back-off, and those
//! back-offs grow: 0.5 s, 1 s, 2 s, … 30 s (past which one stopped call in 30 s is 0.3% of
//! the server, and a graft that is stopped now and then under load is not shut out
//! for long). (A graft aborted for its answers, a trap
//! or its memory is unloaded after a few calls that cost what they took, which its
//! owner's share paid.)
//!
//! Memory: an entry per principal that has spent time or was struck, at most
//! `MAX_ENTRIES` of each kind; past it the entry that matters least goes (a full
//! bucket, or the strike that ends first), so a million principals cost a bounded
//! table and never lift a back-off that is still running for someone else's sake
//! before its end.

use alloc::collections::BTreeMap;

use crate::point::Point;

/// A principal's grafts get at most this fraction (1/SHARE_DIV) of a server's time.
pub const SHARE_DIV: u64 = 2;
/// Graft time a principal may spend at once (the bucket's size).
pub const BURST_MS: u64 = 500;
/// The first back-off after a graft was unloaded for misbehaving; each strike doubles it.
pub const BACKOFF_MS: u64 = 500;
pub const MAX_BACKOFF_MS: u64 = 30_000;
/// A strike is forgiven after this long without a new one.
pub const FORGIVE_MS: u64 = 600_000;
/// Entries kept of each kind (buckets, strikes).
pub const MAX_ENTRIES: usize = 1024;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Ticks left (negative: in debt), as of `at`.
    left: i64,
    at: u64,
}

#[derive(Debug, Clone, Copy)]
struct Strikes {
    count: u32,
    /// When the last strike came, and when its back-off ends.
    last: u64,
    until: u64,
}

/// Why the principal must wait, and how long (ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Its grafts used up its share of the server's time.
    Share(u64),
    /// A graft of its was unloaded for misbehaving at this point.
    Backoff(u64),
}

pub struct Shares {
    buckets: BTreeMap<u32, Bucket>,
    strikes: BTreeMap<(u32, u8), Strikes>,
    ticks_per_ms: u64,
}

impl Shares {
    pub fn new(ticks_per_ms: u64) -> Shares {
        Shares { buckets: BTreeMap::new(), strikes: BTreeMap::new(), ticks_per_ms: ticks_per_ms.max(1) }
    }

    fn burst(&self) -> i64 {
        (BURST_MS.saturating_mul(self.ticks_per_ms)).min(i64::MAX as u64) as i64
    }

    /// `owner`'s bucket as of `now` (full if it has none).
    fn left(&self, owner: u32, now: u64) -> i64 {
        match self.buckets.get(&owner) {
            None => self.burst(),
            Some(b) => {
                let earned = (now.saturating_sub(b.at) / SHARE_DIV).min(i64::MAX as u64) as i64;
                b.left.saturating_add(earned).min(self.burst())
            }
        }
    }

    /// May `owner`'s grafts run now (its bucket is not empty)?
    pub fn may_run(&self, owner: u32, now: u64) -> bool {
        self.left(owner, now) > 0
    }

    /// Pay `ticks` of graft time (a call or a load that began before `now`) from
    /// `owner`'s bucket.
    pub fn charge(&mut self, owner: u32, ticks: u64, now: u64) {
        let left = self.left(owner, now).saturating_sub(ticks.min(i64::MAX as u64) as i64);
        if left >= self.burst() {
            self.buckets.remove(&owner);
            return;
        }
        if !self.buckets.contains_key(&owner) && self.buckets.len() >= MAX_ENTRIES {
            // The bucket closest to full goes: it would be full again soonest.
            let burst = self.burst();
            if let Some((&k, _)) = self.buckets.iter().max_by_key(|(&k, _)| self.left(k, now).min(burst)) {
                self.buckets.remove(&k);
            }
        }
        self.buckets.insert(owner, Bucket { left, at: now });
    }

    /// A graft of `owner` at `point` was unloaded for misbehaving: a strike, and a
    /// back-off on its loads there that doubles with each strike.
    pub fn strike(&mut self, owner: u32, point: Point, now: u64) {
        let key = (owner, point as u8);
        let forgive = FORGIVE_MS.saturating_mul(self.ticks_per_ms);
        let count = match self.strikes.get(&key) {
            // One strike forgiven per quiet `FORGIVE_MS`.
            Some(s) => {
                let quiet = (now.saturating_sub(s.last) / forgive).min(u32::MAX as u64) as u32;
                s.count.saturating_sub(quiet) + 1
            }
            None => 1,
        };
        let ms = BACKOFF_MS.saturating_mul(1u64 << (count - 1).min(20)).min(MAX_BACKOFF_MS);
        let until = now.saturating_add(ms.saturating_mul(self.ticks_per_ms));
        if !self.strikes.contains_key(&key) && self.strikes.len() >= MAX_ENTRIES {
            // Make room: strikes already forgiven first, else the back-off that ends first.
            let gone: alloc::vec::Vec<_> = self
                .strikes
                .iter()
                .filter(|(_, s)| now >= s.until && now.saturating_sub(s.last) >= forgive)
                .map(|(&k, _)| k)
                .collect();
            for k in gone {
                self.strikes.remove(&k);
            }
            if self.strikes.len() >= MAX_ENTRIES {
                if let Some((&k, _)) = self.strikes.iter().min_by_key(|(_, s)| s.until) {
                    self.strikes.remove(&k);
                }
            }
        }
        self.strikes.insert(key, Strikes { count, last: now, until });
    }

    /// Must `owner` wait before it loads a graft at `point` (or runs one by request)?
    pub fn wait(&self, owner: u32, point: Point, now: u64) -> Option<Wait> {
        if let Some(s) = self.strikes.get(&(owner, point as u8)) {
            if now < s.until {
                return Some(Wait::Backoff((s.until - now).div_ceil(self.ticks_per_ms)));
            }
        }
        let left = self.left(owner, now);
        if left <= 0 {
            // Earned back at 1/SHARE_DIV of real time.
            let ticks = (left.unsigned_abs() + 1).saturating_mul(SHARE_DIV);
            return Some(Wait::Share(ticks.div_ceil(self.ticks_per_ms)));
        }
        None
    }

    /// `owner`'s strikes at `point` (for the server's report).
    pub fn strikes(&self, owner: u32, point: Point) -> u32 {
        self.strikes.get(&(owner, point as u8)).map_or(0, |s| s.count)
    }

    /// Entries held (buckets, strikes).
    pub fn entries(&self) -> (usize, usize) {
        (self.buckets.len(), self.strikes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1000; // ticks per ms

    #[test]
    fn a_principal_gets_its_share_and_no_more() {
        let mut s = Shares::new(T);
        let mut now = 0;
        assert!(s.may_run(7, now));
        // A principal whose graft spins for 2 s at once is in debt.
        s.charge(7, 2000 * T, now);
        assert!(!s.may_run(7, now));
        // It earns time back at half of real time: 2 s less its full bucket's 500 ms is
        // paid in 3 s.
        now += 2_900 * T;
        assert!(!s.may_run(7, now));
        assert!(matches!(s.wait(7, Point::Evict, now), Some(Wait::Share(ms)) if ms > 0 && ms <= 100 * SHARE_DIV));
        now += 300 * T;
        assert!(s.may_run(7, now));
        // Another principal never paid for it.
        assert!(s.may_run(8, 0));
        assert_eq!(s.wait(8, Point::Evict, 0), None);
    }

    #[test]
    fn over_a_long_run_the_share_holds() {
        // A principal that calls whenever it may, 10 ms a call, for 100 s.
        let mut s = Shares::new(T);
        let (mut now, mut spent) = (0u64, 0u64);
        while now < 100_000 * T {
            if s.may_run(1, now) {
                s.charge(1, 10 * T, now + 10 * T);
                spent += 10 * T;
                now += 10 * T;
            } else {
                now += T;
            }
        }
        let most = now / SHARE_DIV + BURST_MS * T + 10 * T;
        assert!(spent <= most, "spent {spent} of {now}, at most {most}");
        assert!(spent >= now / SHARE_DIV - 10 * T, "spent {spent}: less than its share");
    }

    #[test]
    fn backoff_doubles_and_is_forgiven() {
        let mut s = Shares::new(T);
        let mut now = 0;
        let mut waits = alloc::vec::Vec::new();
        for _ in 0..12 {
            s.strike(3, Point::Evict, now);
            let Some(Wait::Backoff(ms)) = s.wait(3, Point::Evict, now) else { panic!("no back-off") };
            waits.push(ms);
            now += ms * T;
            assert_eq!(s.wait(3, Point::Evict, now), None, "the back-off ends when it says");
        }
        assert_eq!(&waits[..6], &[500, 1000, 2000, 4000, 8000, 16000]);
        assert_eq!(*waits.last().unwrap(), MAX_BACKOFF_MS);
        // Only that point: the principal loads elsewhere, and others load there.
        s.strike(3, Point::Evict, now);
        assert_eq!(s.wait(3, Point::Stream, now), None);
        assert_eq!(s.wait(4, Point::Evict, now), None);
        // Quiet for long enough, it starts again from the first back-off.
        let n = s.strikes(3, Point::Evict);
        now += FORGIVE_MS * T * n as u64;
        s.strike(3, Point::Evict, now);
        assert_eq!(s.wait(3, Point::Evict, now), Some(Wait::Backoff(BACKOFF_MS)));
    }

    #[test]
    fn many_principals_cost_a_bounded_table() {
        let mut s = Shares::new(T);
        // An old strike with a long back-off still running.
        for _ in 0..8 {
            s.strike(1, Point::Evict, 0);
        }
        for p in 2..20_002u32 {
            s.charge(p, 1000 * T, p as u64);
            if p % 4 == 0 {
                s.strike(p, Point::Evict, p as u64);
            }
        }
        let (b, k) = s.entries();
        assert!(b <= MAX_ENTRIES && k <= MAX_ENTRIES, "{b} buckets, {k} strikes");
        // The 5,000 short back-offs went before the long one.
        assert!(matches!(s.wait(1, Point::Evict, 20_002), Some(Wait::Backoff(_))));
    }

    #[test]
    fn a_full_bucket_is_not_kept() {
        let mut s = Shares::new(T);
        s.charge(5, T, 0);
        assert_eq!(s.entries().0, 1);
        s.charge(5, 0, 10_000 * T);
        assert_eq!(s.entries().0, 0);
    }
}
