//! The table's host tests: loads, staging, hot-swaps with their state, the undo copy,
//! and engines that panic, overrun their time or their heap (through the counting
//! host, `host::counting`).

use super::*;
use crate::engine::Abort;
use crate::format::Tech;
use crate::host::counting::CountingHost;
use alloc::vec;

fn host() -> Box<dyn Host> {
    Box::new(CountingHost { clock: || 0 })
}

fn native(state_len: usize) -> Table {
    let mut t = Table::new(&[Point::Evict], 0, host());
    let f = GraftFile { point: Point::Evict, tech: Tech::Native, state_len, name: "h", code: b"hotlist", sig: &[] }
        .to_bytes();
    t.put(1, 0, &f).unwrap();
    t.load(1, 1, f.len(), &mut |_| None).unwrap();
    t
}

/// A hostile READ or STATE offset (past the state, or at the end of the address
/// space) is an answer, never a panic in the server.
#[test]
fn state_offsets_past_the_end_are_refused() {
    let mut t = native(16);
    let g = t.get(1, 1).unwrap();
    let mut out = [0u8; 64];
    assert_eq!(g.read_state(100_000, &mut out), 0);
    assert_eq!(g.read_state(16, &mut out), 0);
    assert_eq!(g.read_state(8, &mut out), 8);
    assert!(g.write_state(usize::MAX, &[1]).is_err());
    assert!(g.write_state(15, &[1, 2]).is_err());
    assert!(g.write_state(14, &[1, 2]).is_ok());
}

/// One graft per owner at a point where the owner's graft is called for its data;
/// several at a bound point (each bound to its own segment), up to the owner's limit.
#[test]
fn one_graft_per_point_unless_bound() {
    let mut t = Table::new(&[Point::Evict, Point::Ldisk], 0, host());
    let file = |point, code: &'static [u8]| {
        GraftFile { point, tech: Tech::Native, state_len: graft_examples::LD_STATE, name: "n", code, sig: &[] }
            .to_bytes()
    };
    let load = |t: &mut Table, owner: u32, f: &[u8]| {
        t.put(owner as u64, 0, f).unwrap();
        t.load(owner, owner as u64, f.len(), &mut |_| None)
    };
    let e = file(Point::Evict, b"null");
    assert!(load(&mut t, 1, &e).is_ok());
    assert_eq!(load(&mut t, 1, &e), Err(LoadError::Busy));
    assert!(load(&mut t, 2, &e).is_ok(), "another principal's");
    let l = file(Point::Ldisk, b"ldisk");
    let ids: Vec<u32> = (0..MAX_PER_OWNER - 1).map(|_| load(&mut t, 1, &l).unwrap()).collect();
    assert!(matches!(load(&mut t, 1, &l), Err(LoadError::Limit(_))), "one principal cannot fill the server");
    assert!(load(&mut t, 3, &l).is_ok());
    // A bound graft is called by id, and only for its owner.
    let mut input = [0u8; 24];
    input[8] = 10;
    assert_eq!(t.call_id(1, ids[0], &input), Some(10), "a read of a block never written");
    assert_eq!(t.call_id(2, ids[0], &input), None, "not another principal's");
}

/// Pieces out of order, past 256 KiB, or a length that does not match are refused.
#[test]
fn staging_is_bounded() {
    let mut t = Table::new(&[Point::Evict], 0, host());
    assert!(t.put(1, 10, &[0]).is_err(), "a gap");
    assert!(t.put(1, MAX_FILE, &[0]).is_err(), "past the largest file");
    assert!(t.put(1, usize::MAX, &[0]).is_err());
    t.put(1, 0, &[0; 10]).unwrap();
    assert!(t.load(1, 1, 11, &mut |_| None).is_err());
    for p in 2..2 + MAX_STAGING as u64 - 1 {
        t.put(p, 0, &[0]).unwrap();
    }
    t.put(100, 0, &[0]).unwrap();
    assert!(t.put(101, 0, &[0]).is_err(), "too many loads under way");
    t.forget(100);
    assert!(t.put(101, 0, &[0]).is_ok(), "a program's staging goes with it");
}

/// A graft hot-swapped for another keeps its id and its state; a new graft for
/// another point, or with its state laid out otherwise, is refused and the old one
/// stays.
#[test]
fn replace_keeps_the_id_and_moves_the_state() {
    let mut t = native(16);
    t.get(1, 1).unwrap().write_state(0, &[9; 16]).unwrap();
    let send = |t: &mut Table, f: &[u8]| t.put(1, 0, f).unwrap();
    let other =
        GraftFile { point: Point::Evict, tech: Tech::Native, state_len: 16, name: "other", code: b"null", sig: &[] }
            .to_bytes();
    send(&mut t, &other);
    assert_eq!(t.replace(1, 1, 1, other.len(), &mut |_| None), Ok(()));
    let g = t.get(1, 1).unwrap();
    assert_eq!((g.name.as_str(), g.stats.swaps), ("other", 1));
    assert_eq!(g.state(), &[9; 16], "the state moved");
    let longer =
        GraftFile { point: Point::Evict, tech: Tech::Native, state_len: 24, name: "longer", code: b"null", sig: &[] }
            .to_bytes();
    send(&mut t, &longer);
    assert!(
        matches!(t.replace(1, 1, 1, longer.len(), &mut |_| None), Err(LoadError::Refused(w)) if w.contains("state"))
    );
    let mut t2 = Table::new(&[Point::Evict, Point::Ldisk], 0, host());
    let e = GraftFile {
        point: Point::Evict,
        tech: Tech::Native,
        state_len: graft_examples::LD_STATE,
        name: "e",
        code: b"null",
        sig: &[],
    }
    .to_bytes();
    t2.put(1, 0, &e).unwrap();
    let id = t2.load(1, 1, e.len(), &mut |_| None).unwrap();
    let l = GraftFile {
        point: Point::Ldisk,
        tech: Tech::Native,
        state_len: graft_examples::LD_STATE,
        name: "l",
        code: b"ldisk",
        sig: &[],
    }
    .to_bytes();
    t2.put(1, 0, &l).unwrap();
    assert!(matches!(t2.replace(1, 1, id, l.len(), &mut |_| None), Err(LoadError::Refused(w)) if w.contains("point")));
    assert_eq!(
        t.replace(2, 1, 1, 5, &mut |_| None).err().map(|e| e.what()),
        Some("the pieces sent do not add up to the length")
    );
    assert_eq!(t.get(1, 1).unwrap().name, "other", "refusals leave the graft as it was");
}

/// A test engine: its call does what it is told.
struct Probe {
    state: Vec<u8>,
    act: fn(&mut Vec<u8>) -> Result<u64, Abort>,
}

impl Engine for Probe {
    fn state(&mut self) -> &mut [u8] {
        &mut self.state
    }
    fn call(&mut self, _input: &[u8], _budget: u64) -> Result<u64, Abort> {
        (self.act)(&mut self.state)
    }
    fn reset(&mut self) -> Result<(), Abort> {
        self.state = vec![0; 8];
        Ok(())
    }
}

fn load_probe(t: &mut Table, owner: u32, act: fn(&mut Vec<u8>) -> Result<u64, Abort>) -> u32 {
    let f = GraftFile { point: Point::Evict, tech: Tech::Upcall, state_len: 8, name: "probe", code: b"p", sig: &[] }
        .to_bytes();
    t.put(owner as u64, 0, &f).unwrap();
    t.load(owner, owner as u64, f.len(), &mut |f| {
        Some(Ok(Box::new(Probe { state: vec![0; f.state_len], act }) as Box<dyn Engine>))
    })
    .unwrap()
}

/// A compiled engine (one that guards its own call) is untrusted like any: a call it
/// answers wrongly after scribbling on its state leaves the state as it was.
#[test]
fn a_self_guarding_engine_is_undone_too() {
    struct Compiled(Vec<u8>);
    impl Engine for Compiled {
        fn state(&mut self) -> &mut [u8] {
            &mut self.0
        }
        fn call(&mut self, _input: &[u8], _budget: u64) -> Result<u64, Abort> {
            self.0.fill(0xee);
            Ok(99)
        }
        fn reset(&mut self) -> Result<(), Abort> {
            Ok(())
        }
        fn allocates(&self) -> bool {
            false
        }
        fn guards_itself(&self) -> bool {
            true
        }
    }
    let mut t = Table::new(&[Point::Evict], 0, host());
    let f = GraftFile { point: Point::Evict, tech: Tech::WasmAot, state_len: 8, name: "c", code: b"c", sig: &[] }
        .to_bytes();
    t.put(1, 0, &f).unwrap();
    let id =
        t.load(1, 1, f.len(), &mut |f| Some(Ok(Box::new(Compiled(vec![0; f.state_len])) as Box<dyn Engine>))).unwrap();
    t.get(1, id).unwrap().write_state(0, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    assert_eq!(t.call(Point::Evict, 1, &[0; 8]), None, "99 is no candidate");
    assert_eq!(t.get(1, id).unwrap().state(), &[1, 2, 3, 4, 5, 6, 7, 8], "the liar's scribbles are undone");
}

/// An engine the table calls through its entry (`Engine::direct`: compiled code),
/// here a mock whose entry answers as its argument says. Its traps are aborts of their
/// kind, undone; a call the watchdog stopped unloads the graft and drops its engine at
/// once; and a graft swapped for another is called through the new engine alone,
/// whatever either's way of being called (the old entry is the old engine's code).
#[test]
fn an_entry_is_called_while_its_engine_lives_and_no_longer() {
    use crate::engine::{Answer, Direct, TRAP_OOB, TRAP_STOPPED, WROTE};
    use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    /// arg: the answer, or 100 + a trap's code; an input of 24 bytes: the call writes.
    extern "C" fn entry(len: u64, _input: u64, arg: u64, _: u64) -> Answer {
        match arg {
            100.. => Answer { value: 0, how: arg - 100 },
            v => Answer { value: v, how: if len == 24 { WROTE } else { 0 } },
        }
    }
    struct Compiled(Vec<u8>, u64);
    impl Engine for Compiled {
        fn state(&mut self) -> &mut [u8] {
            &mut self.0
        }
        fn call(&mut self, _input: &[u8], _budget: u64) -> Result<u64, Abort> {
            unreachable!("called through its entry")
        }
        fn reset(&mut self) -> Result<(), Abort> {
            Ok(())
        }
        fn guards_itself(&self) -> bool {
            true
        }
        fn direct(&self) -> Option<Direct> {
            Some(Direct { entry, arg: self.1, max_input: 64 })
        }
    }
    impl Drop for Compiled {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Relaxed);
        }
    }
    let f = GraftFile { point: Point::Evict, tech: Tech::WasmAot, state_len: 8, name: "c", code: b"c", sig: &[] }
        .to_bytes();
    let mut t = Table::new(&[Point::Evict], 0, host());
    let load = |t: &mut Table, owner: u32, arg: u64| {
        t.put(owner as u64, 0, &f).unwrap();
        t.load(owner, owner as u64, f.len(), &mut |f| {
            Some(Ok(Box::new(Compiled(vec![0; f.state_len], arg)) as Box<dyn Engine>))
        })
        .unwrap()
    };
    let id = load(&mut t, 1, 1);
    assert_eq!(t.call(Point::Evict, 1, &[0; 16]), Some(1));
    assert_eq!(t.call(Point::Evict, 1, &[0; 72]), None, "longer than its entry takes");
    assert_eq!(t.get(1, id).unwrap().stats.last_abort, Some(Abort::Memory));
    // Swapped for another compiled engine: its entry answers.
    t.put(1, 0, &f).unwrap();
    t.replace(1, 1, id, f.len(), &mut |f| Some(Ok(Box::new(Compiled(vec![0; f.state_len], 0)) as Box<dyn Engine>)))
        .unwrap();
    assert_eq!(DROPS.load(Relaxed), 1, "the old engine is gone");
    assert_eq!(t.call(Point::Evict, 1, &[0; 16]), Some(0), "the new engine's entry");
    // Swapped for one called through `call`: its answer, not the old entry's.
    t.put(1, 0, &f).unwrap();
    t.replace(1, 1, id, f.len(), &mut |f| {
        Some(Ok(Box::new(Probe { state: vec![0; f.state_len], act: |_| Ok(1) }) as Box<dyn Engine>))
    })
    .unwrap();
    assert_eq!(t.call(Point::Evict, 1, &[0; 16]), Some(1), "the probe's answer");
    // A trap is its kind's abort, its state undone.
    let id = load(&mut t, 2, 100 + TRAP_OOB as u64);
    t.get(2, id).unwrap().write_state(0, &[3; 8]).unwrap();
    assert_eq!(t.call(Point::Evict, 2, &[1; 24]), None);
    let g = t.get(2, id).unwrap();
    assert_eq!((g.stats.last_abort, g.state()), (Some(Abort::Memory), &[3u8; 8][..]));
    // Stopped by the watchdog: unloaded at once, its engine dropped.
    let drops = DROPS.load(Relaxed);
    load(&mut t, 3, 100 + TRAP_STOPPED as u64);
    assert_eq!(t.call(Point::Evict, 3, &[0; 16]), None);
    assert_eq!(DROPS.load(Relaxed), drops + 1, "the stopped engine is dropped");
    assert_eq!(t.active(Point::Evict, 3).map(|g| g.id), None, "and its graft unloaded");
}

/// The undo copy is taken only when it may differ from the state: a call that says
/// it wrote nothing keeps the copy (no copy before the next call), while the owner's
/// writes and a call that wrote make it taken again — so an aborted call still puts
/// back exactly the state from before it.
#[test]
fn the_undo_copy_is_taken_again_only_after_a_write() {
    use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    static READS: AtomicUsize = AtomicUsize::new(0);
    /// Input byte 0: 0 answers 0 writing nothing, 1 writes its input's byte 1 into
    /// the state and answers 0, 2 scribbles and answers what the point refuses.
    struct Compiled(Vec<u8>, bool);
    impl Engine for Compiled {
        fn state(&mut self) -> &mut [u8] {
            READS.fetch_add(1, Relaxed);
            &mut self.0
        }
        fn call(&mut self, input: &[u8], _budget: u64) -> Result<u64, Abort> {
            self.1 = input[0] != 0;
            match input[0] {
                0 => Ok(0),
                1 => {
                    self.0.fill(input[1]);
                    Ok(0)
                }
                _ => {
                    self.0.fill(0xee);
                    Ok(99)
                }
            }
        }
        fn reset(&mut self) -> Result<(), Abort> {
            Ok(())
        }
        fn guards_itself(&self) -> bool {
            true
        }
        fn wrote_state(&self) -> bool {
            self.1
        }
        fn notes_writes(&self) -> bool {
            true
        }
    }
    let mut t = Table::new(&[Point::Evict], 0, host());
    let f = GraftFile { point: Point::Evict, tech: Tech::WasmAot, state_len: 8, name: "c", code: b"c", sig: &[] }
        .to_bytes();
    t.put(1, 0, &f).unwrap();
    let id = t
        .load(1, 1, f.len(), &mut |f| Some(Ok(Box::new(Compiled(vec![0; f.state_len], false)) as Box<dyn Engine>)))
        .unwrap();
    let state = |t: &mut Table| t.get(1, id).unwrap().state().to_vec();
    t.get(1, id).unwrap().write_state(0, &[1; 8]).unwrap();
    assert_eq!(t.call(Point::Evict, 1, &[0; 8]), Some(0));
    let reads = READS.load(Relaxed);
    for _ in 0..3 {
        assert_eq!(t.call(Point::Evict, 1, &[0; 8]), Some(0));
    }
    assert_eq!(READS.load(Relaxed), reads, "calls that wrote nothing take no undo copy");
    // The owner writes: the next aborted call puts back the owner's bytes.
    t.get(1, id).unwrap().write_state(0, &[2; 8]).unwrap();
    assert_eq!(t.call(Point::Evict, 1, &[0; 8]), Some(0));
    assert_eq!(t.call(Point::Evict, 1, &[2; 8]), None, "refused");
    assert_eq!(state(&mut t), [2; 8], "the owner's write is what is put back");
    // A call writes: the next aborted call puts back what that call left.
    assert_eq!(t.call(Point::Evict, 1, &[1, 5, 0, 0, 0, 0, 0, 0]), Some(0));
    assert_eq!(t.call(Point::Evict, 1, &[2; 8]), None, "refused");
    assert_eq!(state(&mut t), [5; 8], "the successful call's write is what is put back");
    assert_eq!(t.call(Point::Evict, 1, &[2; 8]), None, "refused again, after a restore");
    assert_eq!(state(&mut t), [5; 8]);
}

/// An engine that panics is left where it panicked, forgotten with its heap, and
/// its graft unloaded; the server (here: the test) and other grafts go on.
#[test]
fn a_panicking_engine_is_forgotten_and_its_graft_unloaded() {
    let mut t = native(16);
    let id = load_probe(&mut t, 2, |_| panic!("a bug in an engine"));
    assert_eq!(t.call(Point::Evict, 2, &[0; 8]), None);
    assert!(t.get(2, id).is_none(), "unloaded at once");
    assert_eq!(t.reaped, 1);
    assert_eq!(t.call(Point::Evict, 1, &[0; 8]), Some(0), "the other principal's graft answers");
}

/// A host that stops every call (as the watchdog stops one past its time).
struct Stopper;
impl Host for Stopper {
    fn now(&self) -> u64 {
        0
    }
    fn ticks_per_ms(&self) -> u64 {
        1
    }
    fn heap(&mut self, limit: usize) -> Option<Box<dyn GraftHeap>> {
        CountingHost { clock: || 0 }.heap(limit)
    }
    fn run(&mut self, heap: Option<&dyn GraftHeap>, deadline: Option<u64>, f: &mut dyn FnMut()) -> Result<(), Stopped> {
        match deadline {
            // A load's deadline is far; a call's is stopped.
            Some(d) if d < LOAD_MS => Err(Stopped::Time),
            _ => CountingHost { clock: || 0 }.run(heap, deadline, f),
        }
    }
    fn over_probe(&self) -> fn() -> bool {
        || false
    }
}

#[test]
fn a_call_stopped_past_its_time_unloads_the_graft() {
    let mut t = Table::new(&[Point::Evict], 0, Box::new(Stopper));
    let id = load_probe(&mut t, 2, |_| Ok(0));
    assert_eq!(t.call(Point::Evict, 2, &[0; 8]), None);
    assert!(t.get(2, id).is_none());
    assert_eq!(t.reaped, 1);
}

/// A principal whose graft had to be stopped may load nothing more at that point
/// for a back-off (a spin loaded again and again costs one stopped call per
/// back-off); other principals load there as before, and the principal elsewhere.
#[test]
fn a_stopped_grafts_owner_backs_off() {
    let mut t = Table::new(&[Point::Evict, Point::Stream], 0, Box::new(Stopper));
    load_probe(&mut t, 2, |_| Ok(0));
    assert_eq!(t.call(Point::Evict, 2, &[0; 8]), None, "stopped");
    let f = GraftFile { point: Point::Evict, tech: Tech::Native, state_len: 16, name: "n", code: b"null", sig: &[] }
        .to_bytes();
    t.put(2, 0, &f).unwrap();
    let r = t.load(2, 2, f.len(), &mut |_| None);
    assert!(matches!(r, Err(LoadError::Later(why)) if why.contains("misbehaving")), "{r:?}");
    assert!(t.may_send(2).is_ok(), "it may still send a file for the other point");
    t.put(3, 0, &f).unwrap();
    assert!(t.load(3, 3, f.len(), &mut |_| None).is_ok(), "another principal loads there");
    let s = GraftFile { point: Point::Stream, ..GraftFile::parse(&f).unwrap() }.to_bytes();
    t.put(2, 0, &s).unwrap();
    assert!(t.load(2, 2, s.len(), &mut |_| None).is_ok(), "the principal loads at another point");
    // A server with that point alone refuses even the file's first piece.
    let mut t = Table::new(&[Point::Evict], 0, Box::new(Stopper));
    load_probe(&mut t, 2, |_| Ok(0));
    assert_eq!(t.call(Point::Evict, 2, &[0; 8]), None, "stopped");
    assert!(matches!(t.may_send(2), Err(LoadError::Later(_))));
    assert!(t.may_send(3).is_ok());
    // A graft aborted for its answers is no strike: its calls were paid for.
    let mut t = native(16);
    load_probe(&mut t, 4, |_| Err(Abort::Trap));
    for _ in 0..MAX_FAILURES {
        assert_eq!(t.call(Point::Evict, 4, &[0; 8]), None);
    }
    assert_eq!(t.reaped, 1);
    assert_eq!(t.shares.strikes(4, Point::Evict), 0);
    t.put(4, 0, &f).unwrap();
    assert!(t.load(4, 4, f.len(), &mut |_| None).is_ok());
}

/// Each call's time is paid from its owner's share: past it, the owner's eviction
/// calls are skipped (the default policy answers) and its loads refused, while another
/// principal's graft is called as before; the share comes back with time.
#[test]
fn a_principals_grafts_get_their_share_and_no_more() {
    use core::sync::atomic::{AtomicU64, Ordering};
    static NOW: AtomicU64 = AtomicU64::new(0);
    // Each look at the clock is 10 ms later.
    let mut t = Table::new(
        &[Point::Evict],
        0,
        Box::new(CountingHost { clock: || NOW.fetch_add(10_000_000, Ordering::Relaxed) }),
    );
    // Owner 1's graft takes 40 ms a call, owner 2's nothing.
    load_probe(&mut t, 1, |_| {
        NOW.fetch_add(40_000_000, Ordering::Relaxed);
        Ok(0)
    });
    load_probe(&mut t, 2, |_| Ok(0));
    let mut answered = 0;
    for _ in 0..100 {
        t.new_turn();
        answered += t.call(Point::Evict, 1, &[0; 8]).is_some() as u32;
    }
    // A call is charged about 60 ms (its 40 and the looks between) of the 80 that pass;
    // the burst is 500 ms and the owner earns back half of the time that passes: the
    // burst's calls, then about one call in three rounds.
    assert!((20..=60).contains(&answered), "{answered} of 100 calls made");
    assert!(t.get(1, 1).unwrap().stats.skipped > 0);
    t.new_turn();
    assert!(t.call(Point::Evict, 2, &[0; 8]).is_some(), "the other principal's graft is called");
    while t.shares.may_run(1, NOW.load(Ordering::Relaxed)) {
        t.new_turn();
        let _ = t.call(Point::Evict, 1, &[0; 8]);
    }
    let f = GraftFile { point: Point::Evict, tech: Tech::Native, state_len: 16, name: "n", code: b"null", sig: &[] }
        .to_bytes();
    t.put(1, 0, &f).unwrap();
    let r = t.load(1, 1, f.len(), &mut |_| None);
    assert!(matches!(r, Err(LoadError::Later(why)) if why.contains("share")), "{r:?}");
    let r = t.test_run(1, 1, &[0; 8], 100).unwrap();
    assert!(r.calls > 0, "a test run is the principal's own request: served in its turn, not charged");
    NOW.fetch_add(10_000_000_000, Ordering::Relaxed);
    t.new_turn();
    assert!(t.call(Point::Evict, 1, &[0; 8]).is_some(), "its share comes back with time");
}

/// A load refused after its engine was built (the point taken, a state laid out
/// otherwise) drops the engine before its heap: a heap that goes first gives its pages
/// back, and the engine's drop would read memory that is gone (rhai's did, and the cache
/// died of the fault).
#[test]
fn a_refused_load_drops_its_engine_before_its_heap() {
    use core::sync::atomic::{AtomicU32, Ordering};
    // Heaps alive.
    static HEAPS: AtomicU32 = AtomicU32::new(0);
    struct Heap(Box<dyn GraftHeap>);
    impl Drop for Heap {
        fn drop(&mut self) {
            HEAPS.fetch_sub(1, Ordering::SeqCst);
        }
    }
    impl GraftHeap for Heap {
        fn used(&self) -> usize {
            self.0.used()
        }
        fn peak(&self) -> usize {
            self.0.peak()
        }
        fn over(&self) -> bool {
            self.0.over()
        }
        fn clear_over(&self) {
            self.0.clear_over()
        }
        fn reset(&mut self) {
            self.0.reset()
        }
        fn enter(&self, f: &mut dyn FnMut()) {
            self.0.enter(f)
        }
    }
    struct Counting(CountingHost);
    impl Host for Counting {
        fn now(&self) -> u64 {
            self.0.now()
        }
        fn ticks_per_ms(&self) -> u64 {
            self.0.ticks_per_ms()
        }
        fn heap(&mut self, limit: usize) -> Option<Box<dyn GraftHeap>> {
            HEAPS.fetch_add(1, Ordering::SeqCst);
            Some(Box::new(Heap(self.0.heap(limit)?)))
        }
        fn run(&mut self, heap: Option<&dyn GraftHeap>, d: Option<u64>, f: &mut dyn FnMut()) -> Result<(), Stopped> {
            self.0.run(heap, d, f)
        }
        fn over_probe(&self) -> fn() -> bool {
            self.0.over_probe()
        }
    }
    // An engine that checks, as it goes, that its heap is still there.
    struct Watch(Vec<u8>, u32);
    impl Drop for Watch {
        fn drop(&mut self) {
            assert_eq!(HEAPS.load(Ordering::SeqCst), self.1, "the engine's heap went before the engine");
        }
    }
    impl Engine for Watch {
        fn state(&mut self) -> &mut [u8] {
            &mut self.0
        }
        fn call(&mut self, _: &[u8], _: u64) -> Result<u64, Abort> {
            Ok(0)
        }
        fn reset(&mut self) -> Result<(), Abort> {
            Ok(())
        }
    }
    let mut t = Table::new(&[Point::Evict], 0, Box::new(Counting(CountingHost { clock: || 0 })));
    let load = |t: &mut Table, state_len: usize| {
        let f = GraftFile { point: Point::Evict, tech: Tech::Upcall, state_len, name: "w", code: b"w", sig: &[] }
            .to_bytes();
        t.put(1, 0, &f).unwrap();
        t.load(1, 1, f.len(), &mut |f| {
            Some(Ok(Box::new(Watch(vec![0; f.state_len], HEAPS.load(Ordering::SeqCst))) as Box<dyn Engine>))
        })
    };
    let id = load(&mut t, 8).unwrap();
    assert_eq!(load(&mut t, 8), Err(LoadError::Busy), "the point is taken: the new engine goes, then its heap");
    let f = GraftFile { point: Point::Evict, tech: Tech::Upcall, state_len: 16, name: "w", code: b"w", sig: &[] }
        .to_bytes();
    t.put(1, 0, &f).unwrap();
    let r = t.replace(1, 1, id, f.len(), &mut |f| {
        Some(Ok(Box::new(Watch(vec![0; f.state_len], HEAPS.load(Ordering::SeqCst))) as Box<dyn Engine>))
    });
    assert!(matches!(r, Err(LoadError::Refused(_))), "a state laid out otherwise: refused, dropped in order");
    assert!(t.unload(1, id).is_ok());
    assert_eq!(HEAPS.load(Ordering::SeqCst), 0);
}

/// What an engine holds is charged to its graft's heap: past the limit the call is
/// aborted (`Memory`), whatever the engine's own counters say.
#[test]
fn a_graft_over_its_heap_is_aborted() {
    let mut t = native(16);
    let id = load_probe(&mut t, 2, |s| {
        s.resize(HEAP_LIMIT + 1, 1);
        Ok(0)
    });
    assert_eq!(t.call(Point::Evict, 2, &[0; 8]), None);
    let g = t.get(2, id).expect("one abort does not unload it");
    assert_eq!(g.stats.last_abort, Some(Abort::Memory));
}

/// Eviction calls stop when the turn's graft time is spent (the default policy
/// answers, the graft is not called: `skipped`), and start again with a new turn;
/// a TEST_RUN stops there too and says how many calls it made.
#[test]
fn a_turns_graft_time_is_bounded() {
    use core::sync::atomic::{AtomicU64, Ordering};
    static NOW: AtomicU64 = AtomicU64::new(0);
    // Each look at the clock is a millisecond later.
    let mut t = Table::new(
        &[Point::Evict],
        0,
        Box::new(CountingHost { clock: || NOW.fetch_add(1_000_000, Ordering::Relaxed) }),
    );
    let f = GraftFile { point: Point::Evict, tech: Tech::Native, state_len: 16, name: "n", code: b"null", sig: &[] }
        .to_bytes();
    t.put(1, 0, &f).unwrap();
    let id = t.load(1, 1, f.len(), &mut |_| None).unwrap();
    t.new_turn();
    let answered = (0..100).filter(|_| t.call(Point::Evict, 1, &[0; 8]).is_some()).count();
    assert!(answered > 10 && answered < 60, "{answered} calls in a turn of {TURN_MS} ms at 1 ms each");
    assert_eq!(t.get(1, id).unwrap().stats.skipped as usize, 100 - answered);
    t.new_turn();
    assert!(t.call(Point::Evict, 1, &[0; 8]).is_some(), "a new turn calls it again");
    let r = t.test_run(1, id, &[0; 8], 100_000).unwrap();
    assert!(r.calls < 100, "TEST_RUN stopped after its turn: {} calls", r.calls);
}

/// A counting host whose grafts may hold `LOW` bytes (`Host::heap_limit`).
struct LowHost(CountingHost);
const LOW: usize = 1536 << 10;

impl Host for LowHost {
    fn now(&self) -> u64 {
        self.0.now()
    }
    fn ticks_per_ms(&self) -> u64 {
        self.0.ticks_per_ms()
    }
    fn heap(&mut self, limit: usize) -> Option<Box<dyn GraftHeap>> {
        self.0.heap(limit)
    }
    fn run(&mut self, heap: Option<&dyn GraftHeap>, deadline: Option<u64>, f: &mut dyn FnMut()) -> Result<(), Stopped> {
        self.0.run(heap, deadline, f)
    }
    fn over_probe(&self) -> fn() -> bool {
        self.0.over_probe()
    }
    fn heap_limit(&self) -> usize {
        LOW
    }
}

/// rhai's limits do not count map keys or values curried into function pointers:
/// scripts that hold gigabytes that way are stopped by their heap (`Memory`), which
/// never holds much more than its limit — the default, or the lower one a server set
/// (`Host::heap_limit`: the script then stops there, not at the default).
#[test]
fn scripts_are_bounded_by_their_heap() {
    let keys = "fn graft(input) { let k = \"\"; k.pad(16000, \"k\"); let o = #{}; for i in 0..250 { let m = #{}; for j in 0..250 { m[k + j] = j; } o[`${i}`] = m; } 0 }";
    let curry = "fn keep(a, b) { a } fn graft(input) { let s = \"\"; s.pad(16000, \"c\"); let fs = []; for i in 0..16000 { fs.push(Fn(\"keep\").curry(s + i)); } 0 }";
    crate::engine::warm_up();
    for (src, limit) in [(keys, HEAP_LIMIT), (curry, HEAP_LIMIT), (keys, LOW), (curry, LOW)] {
        let host: Box<dyn Host> = if limit == LOW { Box::new(LowHost(CountingHost { clock: || 0 })) } else { host() };
        let mut t = Table::new(&[Point::Evict], 0, host);
        let f = GraftFile {
            point: Point::Evict,
            tech: Tech::Script,
            state_len: 8,
            name: "s",
            code: src.as_bytes(),
            sig: &[],
        }
        .to_bytes();
        t.put(1, 0, &f).unwrap();
        let id = t.load(1, 1, f.len(), &mut |_| None).unwrap();
        t.get(1, id).unwrap().budget = MAX_BUDGET;
        assert_eq!(t.call(Point::Evict, 1, &[0; 8]), None);
        let g = t.get(1, id).unwrap();
        assert_eq!(g.stats.last_abort, Some(Abort::Memory), "{src}");
        assert!(g.memory() < limit, "what the script held is freed: {} bytes left", g.memory());
        assert!(g.memory_peak() < limit + limit / 8, "stopped at its limit {limit}: it held {} bytes", g.memory_peak());
    }
}

/// A server's limit is taken between `MIN_HEAP_LIMIT` and `HEAP_LIMIT`.
#[test]
fn a_servers_heap_limit_is_clamped() {
    struct Asks(usize);
    impl Host for Asks {
        fn now(&self) -> u64 {
            0
        }
        fn ticks_per_ms(&self) -> u64 {
            1
        }
        fn heap(&mut self, _: usize) -> Option<Box<dyn GraftHeap>> {
            None
        }
        fn run(&mut self, _: Option<&dyn GraftHeap>, _: Option<u64>, f: &mut dyn FnMut()) -> Result<(), Stopped> {
            f();
            Ok(())
        }
        fn over_probe(&self) -> fn() -> bool {
            || false
        }
        fn heap_limit(&self) -> usize {
            self.0
        }
    }
    for (asked, got) in [(0, MIN_HEAP_LIMIT), (LOW, LOW), (usize::MAX, HEAP_LIMIT)] {
        assert_eq!(Table::new(&[Point::Evict], 0, Box::new(Asks(asked))).heap_limit, got);
    }
}

/// Loading and unloading a graft leaves its heap empty: nothing an engine made
/// outlives it (a static filled from a graft's heap would dangle once the heap is
/// forgotten; `engine::warm_up` fills them from the server's own first).
#[test]
fn an_unloaded_graft_leaves_nothing_in_its_heap() {
    crate::engine::warm_up();
    let srcs: [(Tech, &[u8]); 2] = [
        (
            Tech::Script,
            b"fn graft(input) { let b = blob(4); b[1] = 2; let m = #{x: 1}; m.x + b[1] + input.len() - 11 }",
        ),
        (Tech::Ebpf, &[0xb7, 0, 0, 0, 0, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0]),
    ];
    for (tech, code) in srcs {
        let mut t = Table::new(&[Point::Evict], 0, host());
        let f = GraftFile { point: Point::Evict, tech, state_len: 8, name: "s", code, sig: &[] }.to_bytes();
        t.put(1, 0, &f).unwrap();
        let id = t.load(1, 1, f.len(), &mut |_| None).unwrap();
        assert!(t.call(Point::Evict, 1, &[0; 8]).is_some(), "{tech:?}");
        assert!(t.get(1, id).unwrap().memory() > 0, "{tech:?}: its engine lives in its heap");
        let Graft { engine, heap, .. } = t.grafts.remove(0);
        drop(engine);
        assert_eq!(heap.used(), 0, "{tech:?}: nothing outlives the engine");
    }
}

/// An eBPF program whose verification takes many slices (a counted loop of 330,000
/// rounds: a million instructions followed) is loaded slice by slice: each request of
/// the loader's does at most one (`Verifying` until the last, then the id), the server
/// is free in between, and the loader's slices are paid from its share: once it is
/// spent, it is told how long to wait and nothing is done meanwhile. A new file from
/// the same program, or its end, drops the verification under way.
#[test]
fn a_long_verification_goes_on_a_slice_a_request() {
    use crate::engine::bpf::verify;
    let ins = |op: u8, dst: u8, off: i16, imm: i32| {
        let mut b = [0u8; 8];
        b[0] = op;
        b[1] = dst;
        b[2..4].copy_from_slice(&off.to_le_bytes());
        b[4..8].copy_from_slice(&imm.to_le_bytes());
        b
    };
    let code: Vec<u8> = [
        ins(0xb7, 0, 0, 0),
        ins(0xb7, 2, 0, 0),
        ins(0x07, 0, 0, 3),
        ins(0x07, 2, 0, 1),
        ins(0xa5, 2, -3, 330_000),
        // The eviction point's answer: the first block.
        ins(0xb7, 0, 0, 0),
        ins(0x95, 0, 0, 0),
    ]
    .concat();
    let f = GraftFile { point: Point::Evict, tech: Tech::Ebpf, state_len: 0, name: "count", code: &code, sig: &[] }
        .to_bytes();
    static NOW: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
    use core::sync::atomic::Ordering;
    let mut t = Table::new(&[Point::Evict], 0, Box::new(CountingHost { clock: || NOW.load(Ordering::Relaxed) }));
    t.put(1, 0, &f).unwrap();
    assert_eq!(t.start_load(7, 1, f.len(), &mut |_| None), Ok(Progress::Verifying(0)));
    // Another program of the same principal has nothing under way.
    assert!(matches!(t.go_on(7, 2, &mut |_| None), Err(LoadError::Refused(_))));
    let mut slices = 1u64;
    let id = loop {
        match t.go_on(7, 1, &mut |_| None).unwrap() {
            Progress::Loaded(id) => break id,
            Progress::Verifying(0) => slices += 1,
            Progress::Verifying(ms) => panic!("told to wait {ms} ms with a full share"),
        }
        assert!(slices < 100_000, "{slices} slices");
    };
    let least = (3 * 330_000) / (verify::SLICE + 64);
    assert!(slices > least, "{slices} slices: each did at most one's work");
    assert_eq!(t.test_run(7, id, &[0u8; 8], 1).map(|r| (r.last, r.calls)), Some((Some(0), 1)));
    // A principal whose share of the server's time is spent is told how long to wait,
    // and its verification does not move meanwhile.
    let mut t = Table::new(&[Point::Evict], 0, host());
    t.put(1, 0, &f).unwrap();
    assert_eq!(t.start_load(7, 1, f.len(), &mut |_| None), Ok(Progress::Verifying(0)));
    t.shares.charge(7, 2_000 * t.host.ticks_per_ms(), 0);
    for _ in 0..100 {
        assert!(matches!(t.go_on(7, 1, &mut |_| None), Ok(Progress::Verifying(ms)) if ms > 1000));
    }
    t.shares.charge(7, 0, 10_000 * t.host.ticks_per_ms());
    assert_eq!(t.go_on(7, 1, &mut |_| None), Ok(Progress::Verifying(0)), "on again once it is earned back");
    // A new file from the program drops the verification under way; so does its end.
    t.put(1, 0, &f[..8]).unwrap();
    assert!(matches!(t.go_on(7, 1, &mut |_| None), Err(LoadError::Refused(_))));
    t.put(3, 0, &f).unwrap();
    assert_eq!(t.start_load(8, 3, f.len(), &mut |_| None), Ok(Progress::Verifying(0)));
    t.forget(3);
    assert!(matches!(t.go_on(8, 3, &mut |_| None), Err(LoadError::Refused(_))));
    // In one go (`load`, the host's way) it is the same program.
    let mut t = Table::new(&[Point::Evict], 0, host());
    t.put(1, 0, &f).unwrap();
    assert!(t.load(7, 1, f.len(), &mut |_| None).is_ok());
}

/// A WebAssembly module: exports its memory, `graft_input` and `graft_state` (answering
/// 0 and 2048, of `query` bytes of body each at least) and `graft_run`, whose body is
/// `ops` `n` times and answers 0.
fn wasm_module(ops: &[u8], n: usize, query: usize, start: bool) -> Vec<u8> {
    fn leb(mut v: usize, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }
    fn section(id: u8, body: &[u8], out: &mut Vec<u8>) {
        out.push(id);
        leb(body.len(), out);
        out.extend_from_slice(body);
    }
    fn body(code: &[u8], out: &mut Vec<u8>) {
        leb(code.len(), out);
        out.extend_from_slice(code);
    }
    let mut m = b"\0asm\x01\0\0\0".to_vec();
    section(1, &[3, 0x60, 0, 1, 0x7f, 0x60, 1, 0x7f, 1, 0x7e, 0x60, 0, 0], &mut m);
    section(3, &[4, 0, 0, 1, 2], &mut m);
    section(5, &[1, 0, 1], &mut m);
    let mut ex = vec![4];
    for (name, kind, idx) in [("memory", 2u8, 0u8), ("graft_input", 0, 0), ("graft_state", 0, 1), ("graft_run", 0, 2)] {
        ex.push(name.len() as u8);
        ex.extend_from_slice(name.as_bytes());
        ex.extend_from_slice(&[kind, idx]);
    }
    section(7, &ex, &mut m);
    if start {
        section(8, &[3], &mut m);
    }
    let mut code = vec![4];
    // A query: nops to `query` bytes, then its constant.
    let q = |at: &[u8]| [&[0u8][..], &vec![0x01; query.saturating_sub(at.len() + 2)], at, &[0x0b]].concat();
    body(&q(&[0x41, 0]), &mut code);
    body(&q(&[0x41, 0x80, 0x10]), &mut code);
    let mut run = vec![0u8];
    for _ in 0..n {
        run.extend_from_slice(ops);
    }
    run.extend_from_slice(&[0x42, 0, 0x0b]);
    body(&run, &mut code);
    body(&[0, 0x0b], &mut code);
    section(10, &code, &mut m);
    m
}

/// Load `f` as a server does, a slice a request: the slices it took.
fn sliced(t: &mut Table, owner: u32, f: &[u8], extra: Extra<'_>) -> (Result<u32, LoadError>, u64) {
    t.put(owner as u64, 0, f).unwrap();
    let mut slices = 1;
    let mut p = t.start_load(owner, owner as u64, f.len(), extra);
    loop {
        match p {
            Ok(Progress::Loaded(id)) => return (Ok(id), slices),
            Err(e) => return (Err(e), slices),
            Ok(Progress::Verifying(0)) => slices += 1,
            Ok(Progress::Verifying(ms)) => panic!("told to wait {ms} ms with a full share"),
        }
        p = t.go_on(owner, owner as u64, extra);
    }
}

/// Every technology's check is done in slices: a WebAssembly module of 256 KiB is
/// validated a few operators at a time, a signed file's signature hashed a piece at a
/// time, and neither is checked again in one go when its engine is built (the table
/// vouches for the bytes it checked); what the check refuses is refused whole.
#[test]
fn every_technologys_check_goes_in_slices() {
    // i32.const 1, i32.const 2, i32.add, drop: four operators in six bytes.
    let ops = [0x41, 1, 0x41, 2, 0x6a, 0x1a];
    let m = wasm_module(&ops, 250_000 / 6, 0, false);
    let f = GraftFile { point: Point::Evict, tech: Tech::Wasmi, state_len: 8, name: "w", code: &m, sig: &[] };
    let mut t = Table::new(&[Point::Evict], 0, host());
    let (id, slices) = sliced(&mut t, 1, &f.to_bytes(), &mut |_| None);
    let id = id.unwrap();
    // 4 × 41,666 operators, `SLICE` a slice.
    assert!(slices > 4 * 41_666 / SLICE - 2, "{slices} slices");
    // It runs (this body, past its budget: translated and run, fuel for both).
    assert_eq!(t.test_run(1, id, &[0u8; 16], 1).map(|r| (r.calls, r.aborts)), Some((1, 1)));
    let small = wasm_module(&ops, 100, 0, false);
    let f = GraftFile { code: &small, ..f };
    let (id, _) = sliced(&mut t, 3, &f.to_bytes(), &mut |_| None);
    assert_eq!(t.test_run(3, id.unwrap(), &[0u8; 16], 1).map(|r| r.last), Some(Some(0)), "and it runs");
    // Refused, in slices: an invalid body (an add of nothing), a start function, a query
    // too long to call at load.
    for (m, why) in [
        (wasm_module(&[0x6a], 1, 0, false), "not a valid"),
        (wasm_module(&ops, 10, 0, true), "start function"),
        (wasm_module(&ops, 10, 300, false), "graft_input or graft_state"),
    ] {
        let f = GraftFile { code: &m, ..f };
        let (r, _) = sliced(&mut t, 2, &f.to_bytes(), &mut |_| None);
        assert!(matches!(r, Err(LoadError::Refused(w)) if w.contains(why)), "{why}: {r:?}");
    }

    // A signed graft, with a server's key: its signature is hashed in slices, and the
    // engine's own check (`extra`'s) is vouched for.
    struct Keyed(CountingHost);
    impl Host for Keyed {
        fn now(&self) -> u64 {
            self.0.now()
        }
        fn ticks_per_ms(&self) -> u64 {
            self.0.ticks_per_ms()
        }
        fn heap(&mut self, limit: usize) -> Option<Box<dyn GraftHeap>> {
            self.0.heap(limit)
        }
        fn run(&mut self, heap: Option<&dyn GraftHeap>, d: Option<u64>, f: &mut dyn FnMut()) -> Result<(), Stopped> {
            self.0.run(heap, d, f)
        }
        fn over_probe(&self) -> fn() -> bool {
            self.0.over_probe()
        }
        fn key(&self) -> Option<[u8; 32]> {
            Some(crate::signed::public_key(&[7; 32]))
        }
    }
    let key = crate::signed::public_key(&[7; 32]);
    let mut t = Table::new(&[Point::Evict], 0, Box::new(Keyed(CountingHost { clock: || 0 })));
    let image = vec![0xc3u8; 200_000];
    let code = crate::signed::code(0, &[], &image);
    let f = GraftFile { point: Point::Evict, tech: Tech::SignedRust, state_len: 8, name: "s", code: &code, sig: &[] };
    let sig = crate::signed::sign(&f, &[7; 32]);
    let good = GraftFile { sig: &sig, ..f }.to_bytes();
    let checked = core::cell::Cell::new(0);
    let mut extra = |f: &GraftFile<'_>| -> Option<Result<Box<dyn Engine>, LoadError>> {
        // The engine's own check: vouched for with the server's key, not with another.
        assert!(crate::signed::check_signature(f, &key).is_ok());
        assert!(crate::signed::check_signature(f, &crate::signed::public_key(&[8; 32])).is_err());
        checked.set(checked.get() + 1);
        Some(Ok(Box::new(crate::engine::native::Native::load(&GraftFile { code: b"null", ..*f }).unwrap())))
    };
    let (r, slices) = sliced(&mut t, 1, &good, &mut extra);
    assert!(r.is_ok(), "{r:?}");
    assert!(slices >= 200_000 / (32 * SLICE as usize) as u64, "{slices} slices");
    assert_eq!(checked.get(), 1);
    // A signature by another key, or of other bytes: refused after the hashing, the
    // engine never built.
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 100] ^= 1;
    let (r, slices) = sliced(&mut t, 2, &bad, &mut extra);
    assert!(matches!(r, Err(LoadError::Refused(w)) if w.contains("signature")), "{r:?}");
    assert!(slices > 1);
    assert_eq!(checked.get(), 1);
    // Nothing vouched for once the load is over.
    assert!(crate::signed::check_signature(&GraftFile::parse(&bad).unwrap(), &key).is_err());
}

/// A script longer than `MAX_SOURCE` is refused before rhai compiles it: its compile
/// cannot be cut in slices, so its length is what bounds it.
#[test]
fn a_long_script_is_refused_before_its_compile() {
    let mut src = String::from("fn graft(input) { let x = 0;\n");
    while src.len() < crate::engine::script::MAX_SOURCE {
        src.push_str("x = x + 1;\n");
    }
    src.push_str("x }\n");
    let f =
        GraftFile { point: Point::Evict, tech: Tech::Script, state_len: 8, name: "r", code: src.as_bytes(), sig: &[] };
    let mut t = Table::new(&[Point::Evict], 0, host());
    let (r, _) = sliced(&mut t, 1, &f.to_bytes(), &mut |_| None);
    assert!(matches!(r, Err(LoadError::Limit(w)) if w.contains("4 KiB")), "{r:?}");
}

/// The sliced validation takes exactly the modules wasmi's own would (a module it passes
/// wasmi then takes unchecked): random changes to valid modules, each judged by both —
/// none that wasmi refuses passes, and one wasmi takes is refused only for a graft's own
/// rules (a start function, a long query or section, many data segments).
#[test]
fn the_sliced_validation_agrees_with_wasmi() {
    let mut x = 0x9e3779b97f4a7c15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // local.get 0 (of graft_run's i32), i32.const 5, i32.add, drop; a block; a memory load
    // and store; a call of the empty function.
    let ops = [0x20, 0, 0x41, 5, 0x6a, 0x1a, 0x02, 0x40, 0x0b, 0x41, 0, 0x28, 2, 0, 0x41, 0, 0x36, 2, 0, 0x1a];
    let bases =
        [wasm_module(&ops[..6], 3, 0, false), wasm_module(&ops, 2, 0, false), wasm_module(&[0x10, 3], 2, 0, false)];
    let engine = {
        let mut c = wasmi::Config::default();
        c.consume_fuel(true);
        wasmi::Engine::new(&c)
    };
    let (mut agree, mut both_ok) = (0, 0);
    for round in 0..20_000 {
        let mut m = bases[round % bases.len()].clone();
        for _ in 0..1 + rnd() % 3 {
            let at = 8 + (rnd() as usize) % (m.len() - 8);
            m[at] = rnd() as u8;
        }
        let mut v = crate::engine::wasm::Validate::new();
        let ours = v.run(&m, u64::MAX).unwrap_or(Err(LoadError::Refused("more")));
        let theirs = wasmi::Module::new(&engine, &m).is_ok();
        match ours {
            Ok(()) => assert!(theirs, "round {round}: passed a module wasmi refuses: {m:?}"),
            Err(LoadError::Refused(w)) if theirs => assert!(
                ["start function", "graft_input", "section larger", "data segments"].iter().any(|r| w.contains(r)),
                "round {round}: refused a module wasmi takes ({w}): {m:?}"
            ),
            Err(_) => {}
        }
        agree += 1;
        both_ok += theirs as u32;
    }
    assert!(both_ok > 500, "{both_ok} of {agree} still valid: the changes tested little");
}
