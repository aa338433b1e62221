use super::*;
use alloc::vec;

/// A component that counts the calls it served; its state is the count.
struct Counter {
    count: u64,
    formats: Formats,
    refuse: bool,
}

impl Component for Counter {
    fn formats(&self) -> Formats {
        self.formats
    }
    fn export(&mut self, format: u32) -> Option<Vec<u8>> {
        let mut v = self.count.to_le_bytes().to_vec();
        v.push(format as u8);
        Some(v)
    }
    fn import(&mut self, format: u32, state: &[u8]) -> bool {
        if self.refuse || state.len() != 9 || state[8] as u32 != format {
            return false;
        }
        self.count = u64::from_le_bytes(state[..8].try_into().unwrap());
        true
    }
}

fn counter(formats: Formats) -> Box<Counter> {
    Box::new(Counter { count: 0, formats, refuse: false })
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn two_generation_moves_after_a_mark_outlive_every_running_request() {
    let mut g = Generations::new();
    let a = g.begin();
    let b = g.begin();
    let m = g.mark();
    assert!(!g.passed(m));
    let c = g.begin(); // after the mark: need not end first
    g.end(a);
    assert!(!g.passed(m), "b still runs");
    g.end(b);
    assert!(g.passed(m), "everything running at the mark has ended; c may run on");
    g.end(c);
    // With nothing running, a mark passes at once.
    let m = g.mark();
    assert!(g.passed(m));
    assert_eq!(g.running(), 0);
}

#[test]
fn the_highest_common_format_wins() {
    assert_eq!(negotiate(0b1011, 0b0110), Some(1));
    assert_eq!(negotiate(1 << 63 | 1, 1 << 63), Some(63));
    assert_eq!(negotiate(0b01, 0b10), None);
}

/// A swap with calls in every phase: the untracked call holds the forward phase, a
/// tracked one the block phase, a new call waits and then goes to the new component,
/// a recursive one is let through.
#[test]
fn the_three_phases() {
    let mut g = Generations::new();
    let mut s: Slot<Counter> = Slot::new(counter(0b11));
    let old = s.begin(&mut g, 1, 0, false).unwrap();
    assert!(s.swap(&mut g, counter(0b110), 100));
    assert!(!s.swap(&mut g, counter(1), 100), "one swap at a time");
    let tracked = s.begin(&mut g, 2, 0, false).unwrap();
    assert_eq!(s.step(&g, 1), Outcome::Pending);
    assert!(matches!(s.phase(), Phase::Forward { .. }));
    s.get(&old).count += 1;
    s.end(&mut g, old);
    assert_eq!(s.step(&g, 2), Outcome::Pending);
    assert!(matches!(s.phase(), Phase::Block { .. }), "the untracked call ended");
    assert_eq!(s.begin(&mut g, 3, 0, false), None, "a new call waits");
    let rec = s.begin(&mut g, 4, 0, true).expect("a recursive call goes through");
    s.get(&rec).count += 1;
    s.end(&mut g, rec);
    s.get(&tracked).count += 1;
    s.end(&mut g, tracked);
    match s.step(&g, 3) {
        Outcome::Swapped { format, released } => {
            assert_eq!(format, 1);
            assert_eq!(released, vec![3]);
        }
        o => panic!("{o:?}"),
    }
    let c = s.begin(&mut g, 3, 0, false).unwrap();
    assert_eq!(c.instance(), 1);
    assert_eq!(s.get(&c).count, 3, "the state moved");
    s.end(&mut g, c);
}

#[test]
fn a_refused_state_or_a_late_quiescence_keeps_the_old_component() {
    let mut g = Generations::new();
    let mut s: Slot<Counter> = Slot::new(counter(1));
    let stuck = s.begin(&mut g, 0, 0, false).unwrap();
    assert!(s.swap(&mut g, counter(1), 100));
    assert_eq!(s.step(&g, 5), Outcome::Pending, "a call from before is still inside");
    assert!(matches!(s.step(&g, 101), Outcome::Aborted { why, .. } if why.contains("in time")));
    s.end(&mut g, stuck);
    let mut refusing = counter(1);
    refusing.refuse = true;
    assert!(s.swap(&mut g, refusing, 200));
    assert!(matches!(s.step(&g, 150), Outcome::Aborted { why, .. } if why.contains("refused")));
    assert!(s.swap(&mut g, counter(0b10), 300));
    assert!(matches!(s.step(&g, 250), Outcome::Aborted { why, .. } if why.contains("format")));
    assert_eq!((s.aborts, s.swaps, s.instance()), (3, 0, 0));
    assert!(s.swap(&mut g, counter(0b11), 400));
    assert!(matches!(s.step(&g, 350), Outcome::Swapped { format: 0, .. }));
}

#[test]
fn interposers_see_balanced_calls() {
    use core::cell::Cell;
    use alloc::rc::Rc;
    struct Count(Rc<Cell<(u32, u32)>>);
    impl Interposer for Count {
        fn precall(&mut self, _: u32) {
            let (a, b) = self.0.get();
            self.0.set((a + 1, b));
        }
        fn postcall(&mut self, _: u32) {
            let (a, b) = self.0.get();
            self.0.set((a, b + 1));
        }
    }
    let mut g = Generations::new();
    let mut s: Slot<Counter> = Slot::new(counter(1));
    let before = s.begin(&mut g, 1, 0, false).unwrap();
    let seen = Rc::new(Cell::new((0, 0)));
    assert!(s.interpose(Some(Box::new(Count(seen.clone())))).is_none());
    s.end(&mut g, before);
    assert_eq!(seen.get(), (0, 0), "a call begun before the attach is not half-wrapped");
    for k in 0..5 {
        let c = s.begin(&mut g, k, 0, false).unwrap();
        s.end(&mut g, c);
    }
    let open = s.begin(&mut g, 7, 0, false).unwrap();
    assert!(s.interpose(None).is_some());
    s.end(&mut g, open);
    assert_eq!(seen.get(), (6, 5), "six PRECALLs, the last call's POSTCALL fell after the detach");
}

/// The model: random interleavings of calls (some recursive), swaps (some refused, some
/// with no common format, some past their deadline), steps and time. Every call that
/// began ends exactly once, on the instance it began on, which is the slot's instance
/// while it runs (no call on a component that is gone); the count the component holds
/// at the end is the number of calls served (none lost, none counted twice); every
/// parked call is released.
#[test]
fn model_random_interleavings() {
    for seed in 1..=300u64 {
        let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut g = Generations::new();
        let mut s: Slot<Counter> = Slot::new(counter(0b1));
        let (mut running, mut parked): (Vec<(u64, Call)>, Vec<u64>) = (Vec::new(), Vec::new());
        let (mut next_id, mut served, mut now) = (0u64, 0u64, 0u64);
        let mut swapped = 0;
        let released = |o: Outcome, parked: &mut Vec<u64>| -> Vec<u64> {
            match o {
                Outcome::Pending => Vec::new(),
                Outcome::Swapped { released, .. } | Outcome::Aborted { released, .. } => {
                    for id in &released {
                        let k = parked.iter().position(|p| p == id).expect("released a call that was parked");
                        parked.swap_remove(k);
                    }
                    released
                }
            }
        };
        for _ in 0..400 {
            now += r.below(3);
            match r.below(10) {
                0..=3 => {
                    let recursive = !running.is_empty() && r.below(5) == 0;
                    next_id += 1;
                    match s.begin(&mut g, next_id, 0, recursive) {
                        Some(c) => running.push((next_id, c)),
                        None => parked.push(next_id),
                    }
                }
                4..=6 if !running.is_empty() => {
                    let (_, c) = running.swap_remove(r.below(running.len() as u64) as usize);
                    assert_eq!(c.instance(), s.instance(), "seed {seed}: a call ran on a component that was swapped out");
                    s.get(&c).count += 1;
                    served += 1;
                    s.end(&mut g, c);
                }
                7 => {
                    let mut n = counter([0b1, 0b11, 0b10][r.below(3) as usize]);
                    n.refuse = r.below(6) == 0;
                    s.swap(&mut g, n, now + 5 + r.below(40));
                }
                _ => {
                    for id in released(s.step(&g, now), &mut parked) {
                        let c = s.begin(&mut g, id, 0, false).expect("a released call is admitted");
                        running.push((id, c));
                    }
                }
            }
            for (_, c) in &running {
                assert_eq!(c.instance(), s.instance(), "seed {seed}: a running call's component is gone");
            }
            swapped = s.swaps;
        }
        // Drain: every call ends, the swap ends one way or the other, the parked go on.
        loop {
            for (_, c) in running.drain(..) {
                s.get(&c).count += 1;
                served += 1;
                s.end(&mut g, c);
            }
            now += 1000;
            let ids = released(s.step(&g, now), &mut parked);
            for id in ids {
                running.push((id, s.begin(&mut g, id, 0, false).unwrap()));
            }
            if running.is_empty() && parked.is_empty() && s.phase() == Phase::Normal {
                break;
            }
        }
        let c = s.begin(&mut g, u64::MAX, 0, false).unwrap();
        let (swaps, aborts) = (s.swaps, s.aborts);
        assert_eq!(s.get(&c).count, served, "seed {seed}: {swaps} swaps, {aborts} abandoned");
        s.end(&mut g, c);
        assert_eq!(g.running(), 0);
        let _ = swapped;
    }
}
