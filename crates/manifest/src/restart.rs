//! The supervisor's rule for programs marked `restart` (root applies it; the rule is
//! here, as a pure function of the times of a program's deaths and of what root knows
//! of its dependencies, to be tested on the host).
//!
//! - **Counted deaths.** A death the program brought on itself — a fault, an exit (a
//!   server's fail-stop exit included), a start that failed — counts. A `KILL` does not:
//!   it is someone's decision about the program, not a failure of it, and its restart
//!   comes at once (a person's `kill` is how a server is restarted by hand).
//! - **Dependencies** (Erlang/OTP's `rest_for_one`, systemd's `BindsTo`). A program's
//!   dependencies are the servers in its `caps` that the manifest restarts
//!   ([`dependencies`]): a server it can reach, whose death it can see. When a program
//!   ends while one of them is down, or within `blame_us` after one of them died during
//!   its own life ([`blamed_on_dependency`]), the end is the dependency's doing, not
//!   its own: it is not counted, and the program starts again at once if every
//!   dependency runs, else as soon as they all do ([`Verdict::AwaitDeps`]; at the
//!   latest after `retry_us`, so that nothing waits for ever). So a `net` that restarts
//!   ten times in 30 s no longer leaves `httpd` down for good.
//! - **Back-off.** The first counted death within `interval_us` is restarted at once;
//!   each further one waits twice as long as the one before, from `first_delay_us` up to
//!   `max_delay_us`.
//! - **Budget.** The `burst`-th counted death within `interval_us` leaves the program
//!   down (Erlang's supervisor intensity, systemd's `StartLimitBurst`): root reports it
//!   on the console and in `ps`, and tries it again after `retry_us` (the manifest's
//!   `retry_after`, 5 minutes unless it says: Kubernetes' longest crash-loop back-off) —
//!   a server that failed for a while (a device, a dependency that was left down) comes
//!   back by itself; one that still fails is left down again after that one try, as its
//!   deaths within the interval are still counted. A manual start (`run NAME`) starts
//!   it at once with the count cleared.
//!
//! Why dependencies are derived from `caps` rather than listed: `caps` is what the
//! program may look up, so it names every server whose death the program can see; a
//! second list would be one more thing to keep true, and a server missing from it
//! would bring back the bug. What the derivation cannot see (a capability handed on by
//! another program) stays counted, as before.
//!
//! `POLICY`'s figures: a program that always dies is left down after 10 deaths, about
//! 7 s of back-off plus its ten starts (well within 30 s, also on a loaded machine).
//! The `restart` scenario kills blk, files and the cache 20 times within a minute;
//! those kills are not counted (and blk now serves on when its cache goes, attaching to
//! the new one; had it ended, the cache being one of its dependencies, that end would
//! not be counted either).
//! `blame_us`: 10 s, well above the time a dependent takes to see its server gone (httpd
//! and ftpd wait on net at most 1 s at a time), and short enough that a program's own
//! failure long after a dependency's restart counts.

use crate::Program;

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
    /// How long after a dependency's death a program's end is laid at its door.
    pub blame_us: u64,
    /// How long a program left down waits before it is tried again (and the longest a
    /// program waits for its dependencies).
    pub retry_us: u64,
}

/// The most deaths a `Deaths` record holds.
pub const MAX_BURST: usize = 32;

/// Root's rule: 10 counted deaths within 30 s leave a program down, to be tried again
/// after 5 minutes; restarts wait 0, 50 ms, 100 ms, … up to 2 s; a dependency's death is
/// blamed for a dependent's end within 10 s.
pub const POLICY: Policy = Policy {
    burst: 10,
    interval_us: 30_000_000,
    first_delay_us: 50_000,
    max_delay_us: 2_000_000,
    blame_us: 10_000_000,
    retry_us: crate::DEFAULT_RETRY_AFTER_S * 1_000_000,
};

impl Policy {
    /// Root's rule for a program whose entry says to retry after `retry_after_s` seconds
    /// left down (`Program::retry_after`).
    pub fn with_retry(retry_after_s: u64) -> Policy {
        Policy { retry_us: retry_after_s.saturating_mul(1_000_000), ..POLICY }
    }
}

/// What to do with a program that died.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Start it again after this many microseconds (0: at once).
    Restart { after_us: u64 },
    /// A dependency's death ended it (not counted), and a dependency is down: start it
    /// once every dependency runs again, or after `at_most_us` whatever they do.
    AwaitDeps { at_most_us: u64 },
    /// Its budget is spent: `deaths` counted deaths within the interval. Leave it down,
    /// and try it again after `retry_us`.
    LeaveDown { deaths: usize, retry_us: u64 },
}

/// What root knows of one of a dead program's dependencies when it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dep {
    /// An instance of it runs.
    pub up: bool,
    /// When it last ended (killed or not), if it did.
    pub died_us: Option<u64>,
}

/// How a program marked `restart` ended, and what root knows around it.
#[derive(Clone, Copy, Debug)]
pub struct End<'a> {
    pub now_us: u64,
    /// When the instance that ended was started.
    pub started_us: u64,
    /// Ended by a `KILL` (someone's decision).
    pub killed: bool,
    /// Its dependencies ([`dependencies`]), in any order.
    pub deps: &'a [Dep],
}

/// The servers program `p` depends on: those in its `caps` that `all` (the manifest)
/// restarts, itself excluded, each once.
pub fn dependencies<'a>(p: &'a Program, all: &'a [Program]) -> impl Iterator<Item = &'a str> + 'a {
    p.caps.iter().enumerate().filter_map(move |(i, c)| {
        let fresh = !p.caps[..i].contains(c);
        (fresh && *c != p.name && all.iter().any(|q| q.name == *c && q.restart)).then_some(c.as_str())
    })
}

/// Whether a program's end was its dependencies' doing: one of them is down, or one
/// ended during the program's life (at or after `started_us`) at most `blame_us` ago.
pub fn blamed_on_dependency(e: &End, p: &Policy) -> bool {
    e.deps
        .iter()
        .any(|d| !d.up || d.died_us.is_some_and(|t| t >= e.started_us && t <= e.now_us && e.now_us - t <= p.blame_us))
}

/// Whether a program held for its dependencies may start: every one of them runs.
pub fn deps_up(deps: &[Dep]) -> bool {
    deps.iter().all(|d| d.up)
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

    /// A program ended: what to do (`ended` by a `KILL`, by its dependencies' doing, or
    /// by its own, which alone is counted).
    pub fn ended(&mut self, e: &End, p: &Policy) -> Verdict {
        if e.killed {
            return Verdict::Restart { after_us: 0 };
        }
        if blamed_on_dependency(e, p) {
            return if deps_up(e.deps) {
                Verdict::Restart { after_us: 0 }
            } else {
                Verdict::AwaitDeps { at_most_us: p.retry_us }
            };
        }
        self.died(e.now_us, true, p)
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
            return Verdict::LeaveDown { deaths: self.len, retry_us: p.retry_us };
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
        assert_eq!(d.died(t, true, &POLICY), Verdict::LeaveDown { deaths: 10, retry_us: POLICY.retry_us });
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
        assert_eq!(v[9], Verdict::LeaveDown { deaths: 10, retry_us: POLICY.retry_us });
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
        let p = Policy { burst: 0, interval_us: u64::MAX, first_delay_us: u64::MAX, max_delay_us: u64::MAX, ..POLICY };
        assert_eq!(Deaths::default().died(0, true, &p), Verdict::LeaveDown { deaths: 1, retry_us: p.retry_us });
        let p = Policy { burst: 1_000_000, ..p };
        let mut d = Deaths::default();
        for i in 0..100u64 {
            let v = d.died(i, true, &p);
            if i + 1 < MAX_BURST as u64 {
                assert!(matches!(v, Verdict::Restart { .. }));
            } else {
                assert_eq!(v, Verdict::LeaveDown { deaths: MAX_BURST, retry_us: p.retry_us });
            }
        }
        assert_eq!(delay(64, &p), u64::MAX);
        assert_eq!(delay(usize::MAX, &POLICY), POLICY.max_delay_us);
    }

    #[test]
    fn the_restart_scenario_stays_within_the_budget() {
        // restart_test: 20 kills, one every 100–500 ms after the last restart. Were blk's
        // own ends counted (it ended by itself after a kill of the cache, once), even 9
        // kills of the cache in a row would leave it up.
        let mut d = Deaths::default();
        let mut t = 0;
        for _ in 0..9 {
            let Verdict::Restart { after_us } = d.died(t, true, &POLICY) else { panic!("blk left down") };
            t += after_us + 100_000;
        }
    }

    fn entry(name: &str, caps: &[&str], restart: bool) -> Program {
        let mut p = Program::new(name);
        p.caps = caps.iter().map(|c| alloc::string::String::from(*c)).collect();
        p.restart = restart;
        p
    }

    /// A `net` that restarts (killed, or crashing by itself) and an `httpd` that ends
    /// each time it does, as root sees them: each of httpd's ends comes `lag` after
    /// net's, and httpd is started again when the verdict says.
    struct Pair {
        httpd: Deaths,
        httpd_started: u64,
        net_died: Option<u64>,
        net_up: bool,
    }

    impl Pair {
        fn new() -> Pair {
            Pair { httpd: Deaths::default(), httpd_started: 0, net_died: None, net_up: true }
        }
        fn httpd_ends(&mut self, now: u64) -> Verdict {
            let deps = [Dep { up: self.net_up, died_us: self.net_died }];
            self.httpd.ended(&End { now_us: now, started_us: self.httpd_started, killed: false, deps: &deps }, &POLICY)
        }
    }

    #[test]
    fn a_dependent_ended_by_its_servers_restarts_is_not_counted() {
        // The report: net killed 11 times, 3 s apart; httpd ends after each (its WAIT_MANY
        // on net fails) 100 ms later. Before, the tenth such end left httpd down for good.
        let mut x = Pair::new();
        for k in 0..11u64 {
            let t = 1_000_000 + k * 3 * S;
            x.net_died = Some(t);
            x.net_up = true; // a KILL is restarted at once
            let v = x.httpd_ends(t + 100_000);
            assert_eq!(v, Verdict::Restart { after_us: 0 }, "kill {k}");
            x.httpd_started = t + 100_000;
        }
        assert_eq!(x.httpd.count(), 0, "none of httpd's ends was counted");
        // The same ends counted (the rule before): left down at the tenth.
        let mut old = Deaths::default();
        let v: alloc::vec::Vec<_> = (0..11).map(|k| old.died(1_000_000 + k * 3 * S + 100_000, true, &POLICY)).collect();
        assert!(matches!(v[9], Verdict::LeaveDown { deaths: 10, .. }), "{v:?}");
    }

    #[test]
    fn a_dependent_waits_for_a_dependency_that_is_down_and_starts_with_it() {
        // net crashes by itself 10 times within 30 s: left down, tried again after
        // `retry_us`. httpd, ended by each crash, is never counted; while net is down it
        // waits for it rather than start into a missing server.
        let mut net = Deaths::default();
        let mut x = Pair::new();
        let mut t = S;
        loop {
            let v = net.died(t, true, &POLICY);
            x.net_died = Some(t);
            x.net_up = matches!(v, Verdict::Restart { after_us: 0 });
            let h = x.httpd_ends(t + 50_000);
            match v {
                Verdict::Restart { after_us } => {
                    if after_us == 0 {
                        assert_eq!(h, Verdict::Restart { after_us: 0 });
                    } else {
                        assert_eq!(h, Verdict::AwaitDeps { at_most_us: POLICY.retry_us }, "net in back-off");
                    }
                    t += after_us + 200_000;
                    x.httpd_started = t;
                }
                Verdict::LeaveDown { deaths, retry_us } => {
                    assert_eq!((deaths, retry_us), (10, POLICY.retry_us));
                    assert_eq!(h, Verdict::AwaitDeps { at_most_us: POLICY.retry_us }, "net left down");
                    break;
                }
                v => panic!("{v:?}"),
            }
        }
        assert_eq!(x.httpd.count(), 0);
        assert!(!deps_up(&[Dep { up: false, died_us: Some(t) }, Dep { up: true, died_us: None }]));
        assert!(deps_up(&[Dep { up: true, died_us: Some(t) }, Dep { up: true, died_us: None }]));
        assert!(deps_up(&[]), "no dependencies: nothing to wait for");
        // net comes back after its retry; an httpd started while it was down, whose
        // wait for net ran out, ends then: not its fault either.
        x.httpd_started = t + 60_000_000;
        assert_eq!(x.httpd_ends(t + 90_000_000), Verdict::AwaitDeps { at_most_us: POLICY.retry_us });
    }

    #[test]
    fn a_dependents_own_failures_still_count() {
        let mut x = Pair::new();
        // net died before this instance of httpd started: httpd's end is its own.
        x.net_died = Some(5 * S);
        x.httpd_started = 6 * S;
        assert_eq!(x.httpd_ends(7 * S), Verdict::Restart { after_us: 0 });
        assert_eq!(x.httpd.count(), 1);
        // Long (past `blame_us`) after net's death during its life: its own too.
        x.httpd_started = 0;
        x.net_died = Some(S);
        assert_eq!(x.httpd_ends(S + POLICY.blame_us + 1), Verdict::Restart { after_us: 50_000 });
        assert_eq!(x.httpd.count(), 2);
        // Within it: net's.
        assert_eq!(x.httpd_ends(S + POLICY.blame_us), Verdict::Restart { after_us: 0 });
        assert_eq!(x.httpd.count(), 2);
        // A program that always dies on its own is left down as before, whatever its
        // dependencies did long ago.
        let mut x = Pair::new();
        x.net_died = Some(0);
        let mut t = POLICY.blame_us + 1;
        let mut last = None;
        for _ in 0..10 {
            x.httpd_started = t;
            let v = x.httpd_ends(t + 1000);
            if let Verdict::Restart { after_us } = v {
                t += after_us + 2000;
            }
            last = Some(v);
        }
        assert_eq!(last, Some(Verdict::LeaveDown { deaths: 10, retry_us: POLICY.retry_us }));
        // A KILL is restarted at once, dependencies down or not.
        let deps = [Dep { up: false, died_us: None }];
        let e = End { now_us: 0, started_us: 0, killed: true, deps: &deps };
        assert_eq!(Deaths::default().ended(&e, &POLICY), Verdict::Restart { after_us: 0 });
    }

    #[test]
    fn left_down_is_tried_again_after_the_entrys_retry() {
        let p = Policy::with_retry(20);
        assert_eq!(p.retry_us, 20 * S);
        assert_eq!(Policy::with_retry(u64::MAX).retry_us, u64::MAX, "no overflow");
        let mut d = Deaths::default();
        let mut t = 0;
        let left = loop {
            match d.died(t, true, &p) {
                Verdict::Restart { after_us } => t += after_us + 10_000,
                v => break v,
            }
        };
        assert_eq!(left, Verdict::LeaveDown { deaths: 10, retry_us: 20 * S });
        // Tried again 20 s later and dying at once: its deaths of the last 30 s still
        // count, so it is left down again after that one try (not ten more).
        t += 20 * S;
        assert!(matches!(d.died(t, true, &p), Verdict::LeaveDown { .. }));
        // Tried again once the interval has passed and dying: a first death again.
        t += 30 * S + 1;
        assert_eq!(d.died(t, true, &p), Verdict::Restart { after_us: 0 });
    }

    #[test]
    fn dependencies_are_the_restarted_servers_in_caps() {
        let all = [
            entry("net", &["sigma0", "blk"], true),
            entry("files", &["blk"], true),
            entry("blk", &["sigma0", "cache"], true),
            entry("cache", &["sigma0"], true),
            entry("echo", &[], false),
            entry("httpd", &["net", "files", "net", "echo", "nosuch", "httpd", "machine"], true),
        ];
        let deps = |n: &str| {
            let p = all.iter().find(|p| p.name == n).unwrap();
            dependencies(p, &all).collect::<alloc::vec::Vec<_>>()
        };
        assert_eq!(
            deps("httpd"),
            ["net", "files"],
            "each once; not echo (never restarted), itself or names of no program"
        );
        assert_eq!(deps("blk"), ["cache"]);
        assert_eq!(deps("cache"), [] as [&str; 0]);
        // A server that ends when its own server goes (blk ended so when the cache
        // went) is not counted.
        let mut blk = Deaths::default();
        for k in 0..20 {
            let deps = [Dep { up: true, died_us: Some(k * S) }];
            let e = End { now_us: k * S + 10_000, started_us: k * S - k.min(1) * S / 2, killed: false, deps: &deps };
            assert_eq!(blk.ended(&e, &POLICY), Verdict::Restart { after_us: 0 });
        }
        assert_eq!(blk.count(), 0);
    }

    #[test]
    fn hostile_clocks_never_blame_the_future() {
        // A dependency "died" after now, or a start after now: no panic; a death in the
        // future is not taken as the cause.
        let deps = [Dep { up: true, died_us: Some(u64::MAX) }];
        let e = End { now_us: 5, started_us: 0, killed: false, deps: &deps };
        assert!(!blamed_on_dependency(&e, &POLICY));
        let deps = [Dep { up: true, died_us: Some(3) }];
        let e = End { now_us: 5, started_us: u64::MAX, killed: false, deps: &deps };
        assert!(!blamed_on_dependency(&e, &POLICY));
        let e = End { now_us: u64::MAX, started_us: 0, killed: false, deps: &[Dep { up: true, died_us: Some(0) }] };
        assert!(!blamed_on_dependency(&e, &POLICY));
        let e = End { now_us: 0, started_us: 0, killed: false, deps: &[Dep { up: true, died_us: Some(0) }] };
        assert!(blamed_on_dependency(&e, &POLICY));
    }
}
