extern crate std;

use super::*;
use std::sync::Arc;
use std::thread;

fn relax() {
    std::thread::yield_now();
}

/// What `n` rounds of open, read, write, close on one file come to.
fn expect(n: u64, len: u64) -> [u64; 6] {
    [n, n, n, n, n * len, n * len]
}

fn round(f: &Fcm, cpu: usize, ino: u32, len: u64) {
    f.call(cpu, ino, Op::Open);
    f.call(cpu, ino, Op::Read(len));
    f.call(cpu, ino, Op::Write(len));
    f.call(cpu, ino, Op::Close);
}

#[test]
fn both_components_count_alike_and_replicated_combines_on_demand() {
    for kind in [Kind::Single, Kind::Replicated] {
        let f = Fcm::new(4, relax);
        f.swap(kind);
        for cpu in 0..4 {
            for _ in 0..10 {
                round(&f, cpu, 7, 100);
            }
        }
        f.call(2, 7, Op::Open);
        let s = f.state(0, 7).unwrap();
        assert_eq!(s.counts(), [41, 40, 40, 40, 4000, 4000], "{kind:?}");
        assert_eq!(s.open_now(), 1);
        // Replicated keeps a share on every CPU that called; single one entry.
        assert_eq!(f.files(0), (1, if kind == Kind::Single { 1 } else { 4 }));
        f.forget(1, 7);
        assert_eq!(f.state(0, 7), None);
        assert_eq!(f.files(0), (0, 0));
    }
}

#[test]
fn a_swap_moves_the_state_both_ways() {
    let f = Fcm::new(2, relax);
    round(&f, 0, 1, 10);
    round(&f, 1, 2, 20);
    assert!(f.swap(Kind::Replicated));
    assert!(!f.swap(Kind::Replicated), "in place already");
    assert_eq!(f.kind(), Kind::Replicated);
    round(&f, 1, 1, 10);
    assert_eq!(f.state(0, 1).unwrap().counts(), expect(2, 10));
    assert!(f.swap(Kind::Single));
    assert_eq!(f.state(1, 1).unwrap().counts(), expect(2, 10));
    assert_eq!(f.state(1, 2).unwrap().counts(), expect(1, 20));
    assert_eq!(f.swaps(), 2);
    // Nothing left behind in the component swapped out.
    assert_eq!(f.replicated.files(), 0);
}

/// The concurrent model: threads (one per CPU) call on shared and private files while
/// another swaps back and forth; at the end every call is counted exactly once.
#[test]
fn swaps_under_calls_on_every_cpu_lose_and_double_nothing() {
    const CPUS: usize = 4;
    const ROUNDS: u64 = 20_000;
    let f = Arc::new(Fcm::new(CPUS, relax));
    let done = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (f, done) = (f.clone(), done.clone());
        thread::spawn(move || {
            let mut n = 0u64;
            while !done.load(Ordering::Relaxed) {
                let to = if n.is_multiple_of(2) { Kind::Replicated } else { Kind::Single };
                assert!(f.swap(to));
                n += 1;
                // A combine while calls run sees a count no higher than the calls made.
                if let Some(s) = f.state(CPUS - 1, 0) {
                    assert!(s.opens <= ROUNDS * CPUS as u64);
                }
            }
            n
        })
    };
    let callers: Vec<_> = (0..CPUS)
        .map(|cpu| {
            let f = f.clone();
            thread::spawn(move || {
                for i in 0..ROUNDS {
                    round(&f, cpu, 0, 3);
                    round(&f, cpu, 100 + cpu as u32, i % 5);
                }
            })
        })
        .collect();
    for c in callers {
        c.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps >= 2, "the swapper swapped while calls ran ({swaps})");
    assert_eq!(f.state(0, 0).unwrap().counts(), expect(ROUNDS * CPUS as u64, 3));
    let per: u64 = (0..ROUNDS).map(|i| i % 5).sum();
    for cpu in 0..CPUS {
        let s = f.state(0, 100 + cpu as u32).unwrap();
        assert_eq!(s.counts(), [ROUNDS, ROUNDS, ROUNDS, ROUNDS, per, per]);
    }
    assert_eq!(f.swaps(), swaps);
}

/// `Single` shares one lock: a call from CPU 1 waits while CPU 0 holds it, and is
/// counted as contended (what `auto` sees); `Replicated` gives each CPU its own, so
/// CPU 1's call goes through while CPU 0's representative is held.
#[test]
fn single_contends_and_replicated_does_not() {
    // Single: CPU 0 holds the lock; CPU 1's call can end only once it is let go.
    let f = Arc::new(Fcm::new(2, relax));
    let held = f.single.map.lock();
    let t = {
        let f = f.clone();
        thread::spawn(move || f.call(1, 0, Op::Read(1)))
    };
    while f.single.contended() == 0 {
        thread::yield_now();
    }
    assert!(!t.is_finished());
    drop(held);
    t.join().unwrap();
    assert_eq!(f.state(0, 0).unwrap().reads, 1);
    // Replicated: CPU 0's representative held, CPU 1's call ends regardless.
    let f = Arc::new(Fcm::new(2, relax));
    f.swap(Kind::Replicated);
    let held = f.replicated.reps[0].0.lock();
    let t = {
        let f = f.clone();
        thread::spawn(move || f.call(1, 0, Op::Read(1)))
    };
    t.join().unwrap();
    assert_eq!(f.replicated.contended(), 0);
    drop(held);
    assert_eq!(f.state(0, 0).unwrap().reads, 1);
}

#[test]
fn the_policy_swaps_on_sharing_and_back_on_one_cpu_or_combines() {
    let p = Policy { window: 100 };
    let w = |calls, shared, combines, top_cpu| Window { calls, shared, combines, top_cpu };
    assert_eq!(p.decide(Kind::Single, &w(99, 99, 0, 50)), None, "not a full window");
    assert_eq!(p.decide(Kind::Single, &w(100, 25, 0, 50)), Some(Kind::Replicated));
    assert_eq!(p.decide(Kind::Single, &w(100, 24, 0, 50)), None);
    assert_eq!(p.decide(Kind::Replicated, &w(100, 50, 0, 50)), None);
    // One CPU makes nearly every call: single.
    assert_eq!(p.decide(Kind::Replicated, &w(160, 0, 0, 150)), Some(Kind::Single));
    // Combines an eighth of the calls (Postmark: files made, asked about, removed).
    assert_eq!(p.decide(Kind::Replicated, &w(160, 80, 20, 80)), Some(Kind::Single));
    assert_eq!(p.decide(Kind::Single, &w(160, 80, 20, 80)), None);
}

#[test]
fn auto_swaps_to_replicated_when_cpus_share_files_and_back_when_one_calls() {
    let mut f = Fcm::new(2, relax);
    f.policy = Policy { window: 64 };
    f.auto.store(true, Ordering::Relaxed);
    // Two CPUs take turns on one file: every call finds it last touched elsewhere.
    let mut swapped = None;
    for i in 0..64 {
        f.call(i % 2, 5, Op::Read(1));
        swapped = swapped.or(f.auto_step());
    }
    let (from, to, w) = swapped.expect("auto swapped");
    assert_eq!((from, to), (Kind::Single, Kind::Replicated));
    assert!(w.shared * 4 >= w.calls);
    assert_eq!(f.kind(), Kind::Replicated);
    // Now one CPU alone.
    for _ in 0..64 {
        f.call(0, 5, Op::Read(1));
    }
    assert_eq!(f.auto_step().map(|s| s.1), Some(Kind::Single));
    assert_eq!(f.state(0, 5).unwrap().reads, 128);
    // Off: nothing swaps.
    f.auto.store(false, Ordering::Relaxed);
    for i in 0..64 {
        f.call(i % 2, 5, Op::Read(1));
    }
    assert_eq!(f.auto_step(), None);
}

/// The quiescent point, step by step: a call inside the replicated component (its
/// CPU's representative held) keeps a swap from taking the state — the other
/// representatives are not touched until the call has ended — and the call is counted
/// once, in the component swapped in.
#[test]
fn a_swap_waits_for_the_call_inside_the_component() {
    let f = Arc::new(Fcm::new(2, relax));
    f.swap(Kind::Replicated);
    f.call(0, 9, Op::Read(1));
    let held = f.replicated.reps[1].0.lock();
    let caller = {
        let f = f.clone();
        thread::spawn(move || f.call(1, 9, Op::Read(1)))
    };
    while f.inflight[1].0.load(Ordering::SeqCst) == 0 {
        thread::yield_now();
    }
    let swapper = {
        let f = f.clone();
        thread::spawn(move || f.swap(Kind::Single))
    };
    while !f.hold.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    // Give the swapper time to run ahead if it would (it must not).
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(f.replicated.reps[0].0.lock().len(), 1, "the state moved with a call inside");
        assert!(!swapper.is_finished());
    }
    // A new call now is held until the swap has ended.
    let late = {
        let f = f.clone();
        thread::spawn(move || f.call(0, 9, Op::Read(1)))
    };
    drop(held);
    caller.join().unwrap();
    assert!(swapper.join().unwrap());
    late.join().unwrap();
    assert_eq!(f.kind(), Kind::Single);
    assert_eq!(f.state(0, 9).unwrap().reads, 3);
    assert_eq!(f.replicated.entries(), 0);
}
