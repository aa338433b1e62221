//! The supervisor's rule for programs marked `restart` (root applies it; the rule is
//! here, as a pure function of the times of a program's deaths, to be tested on the
//! host).
//!
//! - **Counted deaths.** A death the program brought on itself — a fault, an exit (a
//!   server's fail-stop exit included), a start that failed — counts. A `KILL` does not:
//!   it is someone's decision about the program, not a failure of it, and its restart
//!   comes at once (a person's `kill` is how a server is restarted by hand).
//! - **Back-off.** The first counted death within `interval_us` is restarted at once;
//!   each further one waits twice as long as the one before, from `first_delay_us` up to
//!   `max_delay_us`.
//! - **Budget.** The `burst`-th counted death within `interval_us` leaves the program
//!   down (Erlang's supervisor intensity, systemd's `StartLimitBurst`): root reports it
//!   on the console and in `ps`, and a manual start (`run NAME`) starts it again with
//!   the count cleared.
//!
//! `POLICY`'s figures: a program that always dies is left down after 10 deaths, about
//! 7 s of back-off plus its ten starts (well within 30 s, also on a loaded machine).
//! The `restart` scenario kills blk, files and the cache 20 times within a minute;
//! those kills are not counted, and blk's own exits after each kill of the cache (it
//! fails stop when its cache goes) are 10 or more in 20 kills with odds under 1 in
//! 1,500 (each kill picks the cache with odds 1 in 6).

/// How a supervisor treats the deaths of one program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Counted deaths within `interval_us` that leave the program down (at most
    /// `MAX_BURST`).
    pub burst: usize,
    pub interval_us: u64,
    /// The wait before the second counted restart within the interval; it doubles with
    /// each one after.
    pub first_delay_us: u64,
    pub max_delay_us: u64,
}

/// The most deaths a `Deaths` record holds.
pub const MAX_BURST: usize = 32;

/// Root's rule: 10 counted deaths within 30 s leave a program down; restarts wait 0,
/// 50 ms, 100 ms, … up to 2 s.
pub const POLICY: Policy =
    Policy { burst: 10, interval_us: 30_000_000, first_delay_us: 50_000, max_delay_us: 2_000_000 };

/// What to do with a program that died.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Start it again after this many microseconds (0: at once).
    Restart { after_us: u64 },
    /// Its budget is spent: `deaths` counted deaths within the interval. Leave it down.
    LeaveDown { deaths: usize },
}

/// The times (µs on any clock that does not go back) of a program's counted deaths
/// within the last interval, oldest first. Carried from instance to instance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deaths {
    at: [u64; MAX_BURST],
    len: usize,
}

impl Deaths {
    /// Counted deaths within the interval ending at the last one recorded.
    pub fn count(&self) -> usize {
        self.len
    }

    /// The program died at `now_us`; `counted`: by its own doing (not a `KILL`).
    pub fn died(&mut self, now_us: u64, counted: bool, p: &Policy) -> Verdict {
        if !counted {
            return Verdict::Restart { after_us: 0 };
        }
        // Forget deaths older than the interval (and any "later" than now: a clock
        // that went back must not keep a program down).
        let keep = |t: &u64| *t <= now_us && now_us - *t < p.interval_us;
        let mut n = 0;
        for i in 0..self.len {
            if keep(&self.at[i]) {
                self.at[n] = self.at[i];
                n += 1;
            }
        }
        self.len = n;
        if self.len == MAX_BURST {
            self.at.copy_within(1.., 0);
            self.len -= 1;
        }
        self.at[self.len] = now_us;
        self.len += 1;
        let burst = p.burst.clamp(1, MAX_BURST);
        if self.len >= burst {
            return Verdict::LeaveDown { deaths: self.len };
        }
        Verdict::Restart { after_us: delay(self.len, p) }
    }
}

/// The wait before restarting after the `k`-th counted death (k ≥ 1) within the interval.
pub fn delay(k: usize, p: &Policy) -> u64 {
    if k <= 1 {
        return 0;
    }
    let shift = (k - 2).min(63) as u32;
    p.first_delay_us.saturating_mul(1u64 << shift).min(p.max_delay_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000;

    #[test]
    fn first_death_restarts_at_once_then_back_off_doubles_to_the_cap() {
        let mut d = Deaths::default();
        let mut t = 0;
        let mut waits = alloc::vec::Vec::new();
        for _ in 0..9 {
            match d.died(t, true, &POLICY) {
                Verdict::Restart { after_us } => {
                    waits.push(after_us);
                    t += after_us + 10_000;
                }
                v => panic!("left down too early: {v:?}"),
            }
        }
        assert_eq!(waits, [0, 50_000, 100_000, 200_000, 400_000, 800_000, 1_600_000, 2_000_000, 2_000_000]);
        assert_eq!(d.died(t, true, &POLICY), Verdict::LeaveDown { deaths: 10 });
        // Left down after the back-off and ten quick starts: within the interval.
        assert!(t < POLICY.interval_us / 2, "{t}");
    }

    #[test]
    fn kills_are_not_counted() {
        let mut d = Deaths::default();
        for i in 0..1000 {
            assert_eq!(d.died(i, false, &POLICY), Verdict::Restart { after_us: 0 });
        }
        assert_eq!(d.count(), 0);
        assert_eq!(d.died(1000, true, &POLICY), Verdict::Restart { after_us: 0 });
    }

    #[test]
    fn old_deaths_are_forgotten() {
        let mut d = Deaths::default();
        // Nine deaths, then a quiet interval: the tenth is a first death again.
        for i in 0..9 {
            assert!(matches!(d.died(i * S, true, &POLICY), Verdict::Restart { .. }));
        }
        assert_eq!(d.died(9 * S + POLICY.interval_us, true, &POLICY), Verdict::Restart { after_us: 0 });
        assert_eq!(d.count(), 1);
        // A death every 4 s never fills a 30 s window with 10.
        let mut d = Deaths::default();
        for i in 0..1000 {
            assert!(matches!(d.died(i * 4 * S, true, &POLICY), Verdict::Restart { .. }), "death {i}");
        }
        assert!(d.count() <= 8);
        // One every 3 s does: the tenth within 30 s (27 s after the first).
        let mut d = Deaths::default();
        let v: alloc::vec::Vec<_> = (0..10).map(|i| d.died(i * 3 * S, true, &POLICY)).collect();
        assert_eq!(v[9], Verdict::LeaveDown { deaths: 10 });
    }

    #[test]
    fn hostile_clocks_and_policies() {
        // A clock that goes back, or jumps to the end of time: no panic, no program
        // kept down by deaths "in the future".
        let mut d = Deaths::default();
        for t in [u64::MAX, 0, u64::MAX - 1, 5, u64::MAX, 0] {
            assert!(matches!(d.died(t, true, &POLICY), Verdict::Restart { .. }), "{t}");
        }
        // Policies out of range: a burst of 0 or past MAX_BURST, delays that overflow.
        let p = Policy { burst: 0, interval_us: u64::MAX, first_delay_us: u64::MAX, max_delay_us: u64::MAX };
        assert_eq!(Deaths::default().died(0, true, &p), Verdict::LeaveDown { deaths: 1 });
        let p = Policy { burst: 1_000_000, ..p };
        let mut d = Deaths::default();
        for i in 0..100u64 {
            let v = d.died(i, true, &p);
            if i + 1 < MAX_BURST as u64 {
                assert!(matches!(v, Verdict::Restart { .. }));
            } else {
                assert_eq!(v, Verdict::LeaveDown { deaths: MAX_BURST });
            }
        }
        assert_eq!(delay(64, &p), u64::MAX);
        assert_eq!(delay(usize::MAX, &POLICY), POLICY.max_delay_us);
    }

    #[test]
    fn the_restart_scenario_stays_within_the_budget() {
        // restart_test: 20 kills, one every 100–500 ms after the last restart; a sixth
        // of them kill the cache, after which blk ends by itself (counted). Even if every
        // one of 9 kills in a row picked the cache, blk stays up.
        let mut d = Deaths::default();
        let mut t = 0;
        for _ in 0..9 {
            let Verdict::Restart { after_us } = d.died(t, true, &POLICY) else { panic!("blk left down") };
            t += after_us + 100_000;
        }
    }
}
