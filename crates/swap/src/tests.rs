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
    /// Format 0: the count as bytes; any other: the count itself, moved.
    fn export(&mut self, format: u32) -> Option<State> {
        if format == 0 {
            Some(State::Bytes(self.count.to_le_bytes().to_vec()))
        } else {
            Some(State::Object(Box::new(self.count)))
        }
    }
    fn import(&mut self, format: u32, state: State) -> bool {
        if self.refuse {
            return false;
        }
        let count = if format == 0 {
            let Some(Ok(b)) = state.bytes().map(<[u8; 8]>::try_from) else { return false };
            u64::from_le_bytes(b)
        } else {
            let Some(c) = state.object::<u64>() else { return false };
            *c
        };
        self.count = count;
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
    let old = s.begin(&mut g, 1, false).unwrap();
    assert!(s.swap(&mut g, counter(0b110), 100));
    assert!(!s.swap(&mut g, counter(1), 100), "one swap at a time");
    let tracked = s.begin(&mut g, 2, false).unwrap();
    assert_eq!(s.step(&g, 1), Outcome::Pending);
    assert!(matches!(s.phase(), Phase::Forward { .. }));
    s.get(&old).0.count += 1;
    s.end(&mut g, old);
    assert_eq!(s.step(&g, 2), Outcome::Pending);
    assert!(matches!(s.phase(), Phase::Block { .. }), "the untracked call ended");
    assert_eq!(s.begin(&mut g, 3, false), None, "a new call waits");
    let rec = s.begin(&mut g, 4, true).expect("a recursive call goes through");
    s.get(&rec).0.count += 1;
    s.end(&mut g, rec);
    s.get(&tracked).0.count += 1;
    s.end(&mut g, tracked);
    match s.step(&g, 3) {
        Outcome::Swapped { format, released } => {
            assert_eq!(format, 1);
            assert_eq!(released, vec![3]);
        }
        o => panic!("{o:?}"),
    }
    let c = s.begin(&mut g, 3, false).unwrap();
    assert_eq!(c.instance(), 1);
    assert_eq!(s.get(&c).0.count, 3, "the state moved");
    s.end(&mut g, c);
}

#[test]
fn a_refused_state_or_a_late_quiescence_keeps_the_old_component() {
    let mut g = Generations::new();
    let mut s: Slot<Counter> = Slot::new(counter(1));
    let stuck = s.begin(&mut g, 0, false).unwrap();
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

crate::interface! {
    /// A test interface: two methods.
    trait Adder via AdderVia, methods AdderMethod {
        fn add(&mut self, n: u64) -> u64;
        fn reset(&mut self);
    }
}

impl Adder for Counter {
    fn add(&mut self, n: u64) -> u64 {
        self.count += n;
        self.count
    }
    fn reset(&mut self) {
        self.count = 0;
    }
}

/// Call `f` on the slot's component through its interposer, if one is attached.
fn through(s: &mut Slot<dyn Adder>, c: &Call, f: impl FnOnce(&mut dyn Adder) -> u64) -> u64 {
    AdderVia::call(s, c, f)
}

#[test]
fn interposers_wrap_every_method_from_attach_to_detach() {
    let mut g = Generations::new();
    let mut s: Slot<dyn Adder> = Slot::new(counter(1));
    let c = s.begin(&mut g, 1, false).unwrap();
    assert_eq!(through(&mut s, &c, |a| a.add(2)), 2);
    assert!(s.interpose(Some(Box::new(interposers::Counter::default()))).is_none());
    assert_eq!(through(&mut s, &c, |a| a.add(3)), 5, "the wrapper passes arguments and results");
    through(&mut s, &c, |a| {
        a.reset();
        0
    });
    through(&mut s, &c, |a| a.add(1));
    let mut out = alloc::string::String::new();
    s.interposer().unwrap().report(AdderMethod::NAMES, &mut out);
    assert_eq!(out, "counter: add=2 reset=1");
    assert!(s.interpose(None).is_some());
    assert_eq!(through(&mut s, &c, |a| a.add(1)), 2, "detached: called directly");
    s.end(&mut g, c);
    assert_eq!(AdderMethod::NAMES, &["add", "reset"]);
}

/// One counter over two slots: calls through either are counted once, in one report;
/// detached from one slot, that slot's calls pass uncounted.
#[test]
fn a_shared_interposer_counts_every_slot() {
    let mut g = Generations::new();
    let sh = interposers::Shared::new(Box::new(interposers::Counter::default()));
    let (mut a, mut b): (Slot<dyn Adder>, Slot<dyn Adder>) = (Slot::new(counter(1)), Slot::new(counter(1)));
    a.interpose(Some(Box::new(sh.clone())));
    b.interpose(Some(Box::new(sh.clone())));
    for (s, n) in [(&mut a, 3), (&mut b, 2)] {
        let c = s.begin(&mut g, 1, false).unwrap();
        for _ in 0..n {
            through(s, &c, |x| x.add(1));
        }
        s.end(&mut g, c);
    }
    b.interpose(None);
    let c = b.begin(&mut g, 1, false).unwrap();
    through(&mut b, &c, |x| x.add(1));
    b.end(&mut g, c);
    let mut out = alloc::string::String::new();
    sh.report(AdderMethod::NAMES, &mut out);
    assert_eq!(out, "counter: add=5 reset=0");
}

#[test]
fn trace_and_timer_interposers() {
    use core::sync::atomic::{AtomicU64, Ordering};
    use interposers::{Timer, Trace};
    static NOW: AtomicU64 = AtomicU64::new(0);
    fn clock() -> u64 {
        NOW.fetch_add(10, Ordering::Relaxed) + 10
    }
    let mut t = Trace::new(clock);
    for k in 0..100 {
        t.precall(k % 2);
        t.postcall(k % 2);
    }
    assert_eq!(t.events, 200);
    let last: Vec<_> = t.last(3).collect();
    assert_eq!(last.len(), 3);
    assert!(last[2].at > last[0].at && !last[2].enter && last[2].method == 1, "{last:?}");
    let mut tm = Timer::new(clock);
    tm.precall(0);
    tm.postcall(0);
    tm.precall(1);
    tm.postcall(1);
    assert_eq!((tm.calls[0], tm.total[0], tm.calls[1]), (1, 10, 1));
    let mut out = alloc::string::String::new();
    tm.report(&["a", "b"], &mut out);
    assert_eq!(out, "timer: a=1x10 b=1x10");
}

#[test]
fn a_moved_state_object_and_a_byte_state_both_transfer() {
    let mut g = Generations::new();
    let mut s: Slot<dyn Adder> = Slot::new(counter(0b11));
    let c = s.begin(&mut g, 1, false).unwrap();
    through(&mut s, &c, |a| a.add(7));
    s.end(&mut g, c);
    assert!(s.swap(&mut g, counter(0b11), 10));
    assert!(matches!(s.step(&g, 0), Outcome::Swapped { format: 1, .. }), "moved");
    assert!(s.swap(&mut g, counter(0b01), 10));
    assert!(matches!(s.step(&g, 0), Outcome::Swapped { format: 0, .. }), "as bytes");
    let c = s.begin(&mut g, 2, false).unwrap();
    assert_eq!(through(&mut s, &c, |a| a.add(0)), 7);
    s.end(&mut g, c);
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
                    match s.begin(&mut g, next_id, recursive) {
                        Some(c) => running.push((next_id, c)),
                        None => parked.push(next_id),
                    }
                }
                4..=6 if !running.is_empty() => {
                    let (_, c) = running.swap_remove(r.below(running.len() as u64) as usize);
                    assert_eq!(
                        c.instance(),
                        s.instance(),
                        "seed {seed}: a call ran on a component that was swapped out"
                    );
                    s.get(&c).0.count += 1;
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
                        let c = s.begin(&mut g, id, false).expect("a released call is admitted");
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
                s.get(&c).0.count += 1;
                served += 1;
                s.end(&mut g, c);
            }
            now += 1000;
            let ids = released(s.step(&g, now), &mut parked);
            for id in ids {
                running.push((id, s.begin(&mut g, id, false).unwrap()));
            }
            if running.is_empty() && parked.is_empty() && s.phase() == Phase::Normal {
                break;
            }
        }
        let c = s.begin(&mut g, u64::MAX, false).unwrap();
        let (swaps, aborts) = (s.swaps, s.aborts);
        assert_eq!(s.get(&c).0.count, served, "seed {seed}: {swaps} swaps, {aborts} abandoned");
        s.end(&mut g, c);
        assert_eq!(g.running(), 0);
        let _ = swapped;
    }
}

/// Requests in flight on several CPUs at once (std threads, one per CPU, each with its
/// CPU's generations behind its own lock; the work of a request done outside it) while
/// another thread marks every CPU and waits: when `CpuMark` says passed, every request
/// that was running on any CPU at its CPU's mark has ended.
#[test]
fn quiescence_waits_for_every_cpu() {
    extern crate std;
    use alloc::collections::BTreeSet;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    const CPUS: usize = 4;
    struct Cpu {
        gens: Generations,
        running: BTreeSet<u64>,
    }
    let cpus: Arc<Vec<Mutex<Cpu>>> =
        Arc::new((0..CPUS).map(|_| Mutex::new(Cpu { gens: Generations::new(), running: BTreeSet::new() })).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..CPUS)
        .map(|c| {
            let (cpus, stop, next, done) = (cpus.clone(), stop.clone(), next.clone(), done.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let id = next.fetch_add(1, Ordering::Relaxed);
                    let g = {
                        let mut cpu = cpus[c].lock().unwrap();
                        cpu.running.insert(id);
                        cpu.gens.begin()
                    };
                    // The request's work, outside the CPU's lock (sometimes long).
                    for _ in 0..(id % 7) {
                        std::thread::yield_now();
                    }
                    let mut cpu = cpus[c].lock().unwrap();
                    cpu.running.remove(&id);
                    cpu.gens.end(g);
                    done.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut rounds = 0;
    // Enough rounds, while the workers run (each mark with requests in flight).
    while rounds < 300 || done.load(Ordering::Relaxed) < 2000 {
        let mut mark = CpuMark::new(CPUS);
        // What ran on each CPU at its mark.
        let mut at_mark = BTreeSet::new();
        for (c, cpu) in cpus.iter().enumerate() {
            let mut cpu = cpu.lock().unwrap();
            at_mark.extend(cpu.running.iter().copied());
            let Cpu { gens, .. } = &mut *cpu;
            mark.mark(c, gens);
        }
        let mut spins = 0u64;
        while !mark.passed() {
            for (c, cpu) in cpus.iter().enumerate() {
                let cpu = cpu.lock().unwrap();
                mark.check(c, &cpu.gens);
            }
            spins += 1;
            assert!(spins < 10_000_000, "a mark never passed");
            std::thread::yield_now();
        }
        // Passed: none of the requests running at the marks runs still.
        for cpu in cpus.iter() {
            let cpu = cpu.lock().unwrap();
            assert!(cpu.running.is_disjoint(&at_mark), "a request running at the mark is still running");
        }
        rounds += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let served: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(served > 0);
}

/// A mark over CPUs passes only when every CPU's has: one CPU with a request still
/// running holds it back, however many others are idle.
#[test]
fn one_busy_cpu_holds_the_mark() {
    let mut gens: Vec<Generations> = (0..3).map(|_| Generations::new()).collect();
    let busy = gens[1].begin();
    let mut mark = CpuMark::new(3);
    for (c, g) in gens.iter_mut().enumerate() {
        mark.mark(c, g);
    }
    for (c, g) in gens.iter().enumerate() {
        mark.check(c, g);
    }
    assert!(!mark.passed(), "CPU 1's request still runs");
    // Requests that start after the mark (on any CPU) do not hold it.
    let late = gens[2].begin();
    gens[1].end(busy);
    for (c, g) in gens.iter().enumerate() {
        mark.check(c, g);
    }
    assert!(mark.passed());
    gens[2].end(late);
    // A CPU never marked never passes.
    let mut half = CpuMark::new(2);
    half.mark(0, &mut gens[0]);
    half.check(0, &gens[0]);
    assert!(!half.passed());
}
