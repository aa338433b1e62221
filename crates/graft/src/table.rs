//! A server's loaded grafts. Each graft belongs to the principal that loaded it and
//! acts only on that principal's data (the server asks `active(point, owner)` with the
//! owner of the data at hand). A call is a transaction: the state is copied aside
//! first (the undo copy), and put back if the call is aborted — over budget, a trap,
//! memory out of bounds, or an answer the point refuses — so a failed call changes
//! nothing the graft or its owner can see; the server then uses its default policy
//! for that call. After `MAX_FAILURES` aborted calls in a row the graft is unloaded.
//!
//! Graft files arrive in pieces (`put`, each at most one IPC string) into a staging
//! buffer of the loader's own, bounded, and are parsed and checked as a whole by
//! `load`. A server loads with `start_load` (and `start_replace`): a file's check (`prep`:
//! an eBPF program's verification, which may follow a million instructions, a
//! WebAssembly module's validation, a signature) gets one slice of bounded work per
//! request of the loader's (`go_on`: the protocol's `MORE`), in the arena the graft
//! will have, the server answering others in between, each slice paid from the
//! loader's share; what is left of a load once its file is checked is small (`prep`);
//! so no load holds the server's thread for more than a slice and a little.
//!
//! No graft can take its server down (`host`): each has a heap of its own, which
//! everything its engine allocates is charged to (at most `HEAP_LIMIT`; a call past it
//! is aborted, `Abort::Memory`), and every load and call runs guarded — a call still
//! running after `CALL_MS`, or an engine that panics, is stopped where it is; such an
//! engine may be half-way through anything, so it is forgotten with its heap (never
//! dropped) and the graft unloaded at once; the call's effect is undone as any aborted
//! call's (the default policy answers it). And a server's time is bounded per request:
//! its eviction calls and a `TEST_RUN` stop after `TURN_MS` of graft time in one turn
//! (`new_turn`), the rest answered by the default policy (counted as `skipped`).
//!
//! Graft time is charged to the principal whose graft it is (`share`): a principal's
//! eviction calls and loads get at most a share of the server's time (past it, its
//! eviction calls are skipped and its loads refused with the time to wait), one call where
//! another client's request waits on it (an eviction) is stopped after `WAIT_CALL_MS`,
//! and a principal whose graft was unloaded for misbehaving may load nothing more at
//! that point for a back-off that doubles with each strike.
//!
//! One graft and its calls are `graft` (`Graft`, `Stats`); this file keeps the table:
//! its limits, loading and hot-swapping, who may call which graft, and the turn's time.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use crate::engine::{self, Engine, Limits};
use crate::format::{GraftFile, MAX_FILE};
use crate::host::{GraftHeap, Host, Stopped};
use crate::point::Point;
use crate::prep::{Prep, SLICE};
use crate::share::{Shares, Wait};
use crate::LoadError;

mod graft;
#[cfg(test)]
mod tests;

use graft::Ways;
pub use graft::{Graft, Stats};

/// Aborted calls in a row after which a graft is unloaded.
pub const MAX_FAILURES: u32 = 3;
/// Grafts one server holds at once.
pub const MAX_GRAFTS: usize = 32;
/// Ids of one server.
pub const IDS: u32 = 999;
/// Grafts one principal holds in one server (at bound points, where it may have several).
pub const MAX_PER_OWNER: usize = 8;
/// Loaders with a file half-sent at once.
pub const MAX_STAGING: usize = 8;
/// A graft's memory limits (in `host`, which servers implement: a server's own limit
/// is taken between them).
pub use crate::host::{HEAP_LIMIT, MIN_HEAP_LIMIT};
/// The longest one call may run before the server stops it (and unloads the graft): wall
/// time, so well above what the slowest legitimate call takes on a loaded machine (rhai's
/// MD5 of 1 KiB: about 32 M instructions, a few hundred ms under TCG).
pub const CALL_MS: u64 = 2000;
/// The longest one call may run where another client's request waits on it (the
/// cache's eviction, a memory server's reclaim in a page fault): the graft is stopped
/// (and unloaded) past it. Compiled code gets no more anywhere (`graft-host`'s watchdog):
/// it runs at the machine's speed.
pub const WAIT_CALL_MS: u64 = 100;
/// The longest a load may take (validation, compilation).
pub const LOAD_MS: u64 = 5000;
/// Graft time a server spends on its eviction calls, or on one `TEST_RUN`, in one
/// turn (a request).
pub const TURN_MS: u64 = 50;

/// Loads whose check is under way at once (each holds an arena).
pub const MAX_VERIFYING: usize = MAX_STAGING;

/// Where a load (or a hot-swap) stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Done: the graft's id.
    Loaded(u32),
    /// Its check goes on: ask again (`go_on`) after this many ms (0: at once; more
    /// when the loader's share of the server's time is spent).
    Verifying(u64),
}

/// A load whose check goes on in slices (`prep::SLICE` units each, one per request of
/// the loader's: the server answers others in between). The check lives in the arena
/// the graft will have, and goes before it.
struct Pending {
    owner: u32,
    program: u64,
    /// The graft a `REPLACE` swaps; `None` for a `LOAD`.
    replace: Option<u32>,
    prep: Box<dyn Prep>,
    heap: Box<dyn GraftHeap>,
    file: Vec<u8>,
    /// When its last slice ran (the table full, the one idle longest goes).
    last: u64,
}

/// What `build` made: the engine, or a check under way (in its arena).
enum Stage {
    Built(Built),
    Checking(Box<dyn Prep>, Box<dyn GraftHeap>),
}

/// What a `TEST_RUN` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestRun {
    /// The last call's answer (`None`: aborted).
    pub last: Option<u64>,
    /// Clock ticks of all the calls.
    pub cycles: u64,
    pub aborts: u64,
    /// Calls made (fewer than asked when the turn's time ran out or the graft was
    /// unloaded).
    pub calls: u64,
}

/// Budget of one call unless the owner sets another: fuel units (Wasm), operations
/// (script). eBPF needs none (its programs end within their length).
pub const DEFAULT_BUDGET: u64 = 1 << 20;
/// The most a budget may be set to.
pub const MAX_BUDGET: u64 = 1 << 24;

/// An engine and the heap it lives in.
/// A graft's engine and the heap it lives in, as a load builds them. Fields drop in
/// their order: the engine first, then its heap — a heap that goes first gives its
/// pages back, and the engine's drop would then read memory that is gone. Kept whole
/// until both move into a `Graft`, so that every refusal on the way drops them so.
struct Built {
    engine: Box<dyn Engine>,
    heap: Box<dyn GraftHeap>,
}

/// Builds engines the crate cannot build alone (an upcall's IPC, AOT code, a
/// signature check with the server's key); `None`: not supported here.
pub type Extra<'a> = &'a mut dyn FnMut(&GraftFile<'_>) -> Option<Result<Box<dyn Engine>, LoadError>>;

pub struct Table {
    grafts: Vec<Graft>,
    /// Files being sent, by the sending program.
    staging: BTreeMap<u64, Vec<u8>>,
    /// Ids are `base + 1 ..= base + IDS` (the shell tells servers apart by them),
    /// taken round robin, skipping those in use.
    base: u32,
    next: u32,
    /// The points this server hosts.
    points: &'static [Point],
    pub limits: Limits,
    /// The most memory one graft may hold here (`Host::heap_limit`, at most `HEAP_LIMIT`).
    heap_limit: usize,
    /// Grafts unloaded because they failed, since the server started.
    pub reaped: u64,
    host: Box<dyn Host>,
    /// Graft time spent in this turn (`new_turn`), in the host's clock.
    turn: u64,
    /// The host's watchdog is armed (grafts are loaded, or one is being loaded).
    armed: bool,
    /// Each principal's share of graft time, and the back-off of those whose grafts
    /// misbehaved.
    pub shares: Shares,
    /// Loads whose verification goes on.
    verifying: Vec<Pending>,
}

impl Table {
    /// A table for a server hosting `points`, its ids after `base` (a multiple of
    /// 1000: cache 1000, blk 2000, net 3000), its grafts run by `host`.
    pub fn new(points: &'static [Point], base: u32, host: Box<dyn Host>) -> Table {
        let heap_limit = host.heap_limit().clamp(MIN_HEAP_LIMIT, HEAP_LIMIT);
        // A WebAssembly memory (or a script's values) at most three quarters of the
        // arena: room for the engine beside it (1 MiB, the default, from 1.33 MiB up).
        let d = Limits::default();
        let limits = Limits { over: host.over_probe(), memory: d.memory.min(heap_limit - heap_limit / 4) };
        let shares = Shares::new(host.ticks_per_ms());
        Table {
            grafts: Vec::new(),
            staging: BTreeMap::new(),
            base,
            next: 0,
            points,
            limits,
            heap_limit,
            reaped: 0,
            host,
            turn: 0,
            armed: false,
            shares,
            verifying: Vec::new(),
        }
    }

    /// Arm the host's watchdog while grafts are loaded (or `loading`), disarm it after.
    fn arm(&mut self, loading: bool) {
        let want = loading || !self.grafts.is_empty();
        if want != self.armed {
            self.armed = want;
            self.host.armed(want);
        }
    }

    /// A new turn (a request the server takes up): its graft time starts at zero.
    pub fn new_turn(&mut self) {
        self.turn = 0;
    }

    /// Is this turn's graft time spent?
    fn turn_spent(&self) -> bool {
        self.turn >= TURN_MS.saturating_mul(self.host.ticks_per_ms())
    }

    /// Why `owner` must wait before it loads a graft at `point`, if it must.
    fn must_wait(&self, owner: u32, point: Point) -> Result<(), LoadError> {
        match self.shares.wait(owner, point, self.host.now()) {
            Some(Wait::Share(_)) => {
                Err(LoadError::Later("your grafts have used their share of this server's time: try again later"))
            }
            Some(Wait::Backoff(_)) => Err(LoadError::Later(
                "a graft of yours was unloaded here for misbehaving: loads at this point are refused for a while (longer each time)",
            )),
            None => Ok(()),
        }
    }

    /// May `owner` send a graft file at all now? Refused at its first piece when it
    /// must wait at every point this server has (its share spent, or a back-off), so
    /// that a loader in a reload loop costs one small request, not a whole file.
    pub fn may_send(&self, owner: u32) -> Result<(), LoadError> {
        let mut first = Ok(());
        for &p in self.points {
            match self.must_wait(owner, p) {
                Ok(()) => return Ok(()),
                Err(e) if first.is_ok() => first = Err(e),
                Err(_) => {}
            }
        }
        first
    }

    /// Build the engine for `f` in a heap of its own, for `owner`: refused while it
    /// must wait (its share spent, or a back-off at the point), and its time charged
    /// to it. The file's check (`prep`) gets at most `budget` units of work (`SLICE` a
    /// request): past them it goes on later.
    fn build(&mut self, owner: u32, f: &GraftFile<'_>, extra: Extra<'_>, budget: u64) -> Result<Stage, LoadError> {
        self.must_wait(owner, f.point)?;
        self.charged(owner, |t| t.stage(None, None, f, extra, budget))
    }

    /// `work`, its time charged to `owner`, the watchdog armed meanwhile.
    fn charged<R>(&mut self, owner: u32, work: impl FnOnce(&mut Table) -> R) -> R {
        let t0 = self.host.now();
        self.arm(true);
        let r = work(self);
        self.arm(false);
        let now = self.host.now();
        self.shares.charge(owner, now.wrapping_sub(t0), now);
        r
    }

    /// Run `work` guarded, its allocations in `heap`, for at most `LOAD_MS`. `keep` is
    /// what lives in the arena past the run (a check under way, an engine): if the run
    /// is stopped (past its time, or a panic), that may be half-made, so it is forgotten
    /// — never dropped — and the arena reset (its pages go back); the answer then says
    /// which of `why` (time, panic) stopped it.
    fn in_arena<T>(
        &mut self,
        heap: &mut Box<dyn GraftHeap>,
        keep: &mut Option<T>,
        why: (&'static str, &'static str),
        work: &mut dyn FnMut(&mut Option<T>),
    ) -> Result<(), LoadError> {
        let deadline = self.host.now().saturating_add(LOAD_MS.saturating_mul(self.host.ticks_per_ms()));
        match self.host.run(Some(&**heap), Some(deadline), &mut || work(keep)) {
            Ok(()) => Ok(()),
            Err(stop) => {
                core::mem::forget(keep.take());
                heap.reset();
                Err(LoadError::Refused(if stop == Stopped::Time { why.0 } else { why.1 }))
            }
        }
    }

    /// A slice of `f`'s check (`prep`; begun with `None`, in a new arena), in the arena
    /// the graft will have: then its engine, built there, once the check passed.
    fn stage(
        &mut self,
        prep: Option<Box<dyn Prep>>,
        heap: Option<Box<dyn GraftHeap>>,
        f: &GraftFile<'_>,
        extra: Extra<'_>,
        budget: u64,
    ) -> Result<Stage, LoadError> {
        let mut heap = match heap {
            Some(h) => h,
            None => self
                .host
                .heap(self.heap_limit)
                .ok_or(LoadError::Limit("the server has no heap left for another graft"))?,
        };
        let (fresh, key) = (prep.is_none(), self.host.key());
        let mut keep = prep;
        let mut out = None;
        let why = ("the check took too long on it", "the check failed on it (its memory?)");
        self.in_arena(&mut heap, &mut keep, why, &mut |keep| {
            if fresh {
                match crate::prep::of(f, key) {
                    Ok(Some(p)) => *keep = Some(p),
                    Ok(None) => {
                        out = Some(Ok(()));
                        return;
                    }
                    Err(e) => {
                        out = Some(Err(e));
                        return;
                    }
                }
            }
            out = keep.as_mut().and_then(|p| p.run(f, budget));
        })?;
        match (out, keep) {
            (None, Some(p)) => Ok(Stage::Checking(p, heap)),
            (None, None) => Err(LoadError::Refused("the check failed on it")),
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(())), p) => {
                if let Some(p) = &p {
                    p.vouch(f);
                }
                // The check's memory goes back to the arena before the engine is built there.
                drop(p);
                heap.clear_over();
                let b = self.build_armed(f, extra, heap);
                crate::vouch::vouch(None);
                b.map(Stage::Built)
            }
        }
    }

    /// The longest one call at `point` may run, in the host's clock.
    fn call_ticks(&self, point: Point) -> u64 {
        let ms = if point == Point::Evict { WAIT_CALL_MS } else { CALL_MS };
        ms.saturating_mul(self.host.ticks_per_ms())
    }

    /// A graft unloaded for failing: counted, and if the watchdog had to stop it, a
    /// strike for its owner at its point. (A graft aborted for its answers, a trap or
    /// its memory cost the server no more than its calls took, and its owner paid for
    /// those from its share; one that ran until it was stopped is what a reload loop
    /// would repeat.)
    fn reap(&mut self, k: usize) {
        let g = self.grafts.remove(k);
        self.reaped += 1;
        if g.overran {
            let now = self.host.now();
            self.shares.strike(g.owner, g.point, now);
        }
        self.arm(false);
    }

    /// The engine for `f` (checked, if it needs a check), built in `heap`.
    fn build_armed(
        &mut self,
        f: &GraftFile<'_>,
        extra: Extra<'_>,
        mut heap: Box<dyn GraftHeap>,
    ) -> Result<Built, LoadError> {
        let limits = self.limits;
        let mut built = None;
        let why = ("the engine took too long to load it", "the engine failed on it");
        self.in_arena(&mut heap, &mut built, why, &mut |b| {
            *b = Some(match extra(f) {
                Some(r) => r,
                None => engine::build(f, limits),
            })
        })?;
        let engine = built.unwrap_or(Err(LoadError::Refused("the engine failed on it")))?;
        if heap.over() {
            return Err(LoadError::Limit("the graft needs more memory than a graft may hold"));
        }
        Ok(Built { engine, heap })
    }

    /// Part of a graft file, at byte `at` of `program`'s staging buffer.
    pub fn put(&mut self, program: u64, at: usize, bytes: &[u8]) -> Result<(), LoadError> {
        if at.checked_add(bytes.len()).is_none_or(|e| e > MAX_FILE) {
            return Err(LoadError::Limit("graft file bigger than its header, 256 KiB of code and a signature"));
        }
        if !self.staging.contains_key(&program) && self.staging.len() >= MAX_STAGING {
            return Err(LoadError::Limit("too many loads under way"));
        }
        // A new file: a verification the program left under way is dropped.
        self.verifying.retain(|p| p.program != program);
        let buf = self.staging.entry(program).or_default();
        if at > buf.len() {
            return Err(LoadError::Format("pieces must come in order"));
        }
        buf.truncate(at);
        buf.extend_from_slice(bytes);
        Ok(())
    }

    /// Load the file staged by `program` (exactly `len` bytes of it), for its
    /// principal `owner`, in one go (its verification too). The staging buffer is
    /// emptied whatever happens.
    pub fn load(&mut self, owner: u32, program: u64, len: usize, extra: Extra<'_>) -> Result<u32, LoadError> {
        match self.start(owner, program, len, None, extra, u64::MAX)? {
            Progress::Loaded(id) => Ok(id),
            Progress::Verifying(_) => Err(LoadError::Refused("the check stopped half-way")),
        }
    }

    /// As `load`, as a server does it: the file's check (`prep`) gets one slice
    /// (`prep::SLICE` units of work) now, and one more each time the loader asks
    /// (`go_on`), the server serving others in between; each slice is charged to the
    /// loader's share of the server's time.
    pub fn start_load(
        &mut self,
        owner: u32,
        program: u64,
        len: usize,
        extra: Extra<'_>,
    ) -> Result<Progress, LoadError> {
        self.start(owner, program, len, None, extra, SLICE)
    }

    /// A staged file's load (`replace`: a hot-swap of that graft), its verification
    /// given `budget` units of work now.
    fn start(
        &mut self,
        owner: u32,
        program: u64,
        len: usize,
        replace: Option<u32>,
        extra: Extra<'_>,
        budget: u64,
    ) -> Result<Progress, LoadError> {
        let buf = self.staging.remove(&program).unwrap_or_default();
        if buf.len() != len {
            return Err(LoadError::Format("the pieces sent do not add up to the length"));
        }
        let f = GraftFile::parse(&buf)?;
        match replace {
            None => {
                if !self.points.contains(&f.point) {
                    return Err(LoadError::Refused("this server has no such graft point"));
                }
                if self.grafts.len() >= MAX_GRAFTS {
                    return Err(LoadError::Limit("the server holds as many grafts as it may"));
                }
            }
            Some(id) => {
                let g = self
                    .grafts
                    .iter()
                    .find(|g| g.id == id && g.owner == owner)
                    .ok_or(LoadError::Refused("no such graft of yours"))?;
                if g.point != f.point {
                    return Err(LoadError::Refused("the new graft is for another point"));
                }
            }
        }
        // The code is checked before the point's occupancy: a bad file hears why.
        match self.build(owner, &f, extra, budget)? {
            Stage::Built(b) => self.finish(owner, program, replace, &f, b),
            Stage::Checking(prep, heap) => {
                self.wait_verifying(Pending { owner, program, replace, prep, heap, file: buf, last: 0 });
                Ok(Progress::Verifying(0))
            }
        }
    }

    /// Keep `p` under way: the table full, the load idle longest is dropped (its loader
    /// hears so when it asks, and may send it again).
    fn wait_verifying(&mut self, mut p: Pending) {
        p.last = self.host.now();
        self.verifying.retain(|q| q.program != p.program);
        if self.verifying.len() >= MAX_VERIFYING {
            if let Some(k) = (0..self.verifying.len()).min_by_key(|&k| self.verifying[k].last) {
                self.verifying.remove(k);
            }
        }
        self.verifying.push(p);
        self.arm(false);
    }

    /// The next slice of the check `program` of `owner` has under way (a load or a
    /// hot-swap): while the loader's share of the server's time is spent, none,
    /// and the time to wait.
    pub fn go_on(&mut self, owner: u32, program: u64, extra: Extra<'_>) -> Result<Progress, LoadError> {
        let k = self
            .verifying
            .iter()
            .position(|p| p.program == program && p.owner == owner)
            .ok_or(LoadError::Refused("no verification of yours under way here (dropped: send the file again)"))?;
        let now = self.host.now();
        if !self.shares.may_run(owner, now) {
            let ms = match self.shares.wait(owner, Point::Evict, now) {
                Some(Wait::Share(ms)) => ms,
                _ => 1,
            };
            return Ok(Progress::Verifying(ms.max(1)));
        }
        let p = self.verifying.remove(k);
        self.arm(false);
        self.slice_of(p, extra)
    }

    fn slice_of(&mut self, p: Pending, extra: Extra<'_>) -> Result<Progress, LoadError> {
        let Pending { owner, program, replace, prep, heap, file, .. } = p;
        let f = GraftFile::parse(&file)?;
        match self.charged(owner, |t| t.stage(Some(prep), Some(heap), &f, extra, SLICE))? {
            Stage::Built(b) => self.finish(owner, program, replace, &f, b),
            Stage::Checking(prep, heap) => {
                self.wait_verifying(Pending { owner, program, replace, prep, heap, file, last: 0 });
                Ok(Progress::Verifying(0))
            }
        }
    }

    /// A built engine takes its place: a new graft, or `replace`'s new engine.
    fn finish(
        &mut self,
        owner: u32,
        program: u64,
        replace: Option<u32>,
        f: &GraftFile<'_>,
        built: Built,
    ) -> Result<Progress, LoadError> {
        if let Some(id) = replace {
            return self.swap_in(owner, id, f, built).map(|()| Progress::Loaded(id));
        }
        if self.grafts.len() >= MAX_GRAFTS {
            return Err(LoadError::Limit("the server holds as many grafts as it may"));
        }
        if self.grafts.iter().filter(|g| g.owner == owner).count() >= MAX_PER_OWNER {
            return Err(LoadError::Limit("you hold as many grafts here as one principal may"));
        }
        if !f.point.bound() && self.grafts.iter().any(|g| g.owner == owner && g.point == f.point) {
            return Err(LoadError::Busy);
        }
        // At most MAX_GRAFTS < IDS are in use: a free id is always found.
        let id = loop {
            self.next = self.next % IDS + 1;
            let id = self.base + self.next;
            if !self.grafts.iter().any(|g| g.id == id) {
                break id;
            }
        };
        let call_ticks = self.call_ticks(f.point);
        self.grafts.push(Graft::new(id, owner, program, f, built.engine, built.heap, call_ticks));
        self.arm(false);
        Ok(Progress::Loaded(id))
    }

    /// Unload `owner`'s graft `id`.
    /// Hot-swap `owner`'s graft `id` for the graft file `program` sent (`put`), of any
    /// technology, at the same point (K42's swap of a component, here between calls:
    /// a server makes one graft call at a time): the id, budget and counters stay, and
    /// the state moves to the new graft in the canonical format — its bytes, which the
    /// new graft must lay out alike (the same length). Refused — the file, the point, the
    /// state's layout —, the old graft stays as it was.
    pub fn replace(
        &mut self,
        owner: u32,
        program: u64,
        id: u32,
        len: usize,
        extra: Extra<'_>,
    ) -> Result<(), LoadError> {
        match self.start(owner, program, len, Some(id), extra, u64::MAX)? {
            Progress::Loaded(_) => Ok(()),
            Progress::Verifying(_) => Err(LoadError::Refused("the check stopped half-way")),
        }
    }

    /// As `replace`, as a server does it: the file's check in slices, as `start_load`'s (`go_on`); the old graft serves on until the new one is in.
    pub fn start_replace(
        &mut self,
        owner: u32,
        program: u64,
        id: u32,
        len: usize,
        extra: Extra<'_>,
    ) -> Result<Progress, LoadError> {
        self.start(owner, program, len, Some(id), extra, SLICE)
    }

    /// The new engine takes graft `id`'s place, with its state.
    fn swap_in(&mut self, owner: u32, id: u32, f: &GraftFile<'_>, built: Built) -> Result<(), LoadError> {
        let k = self
            .grafts
            .iter()
            .position(|g| g.id == id && g.owner == owner)
            .ok_or(LoadError::Refused("no such graft of yours"))?;
        if self.grafts[k].point != f.point {
            return Err(LoadError::Refused("the new graft is for another point"));
        }
        let Built { mut engine, heap } = built;
        let g = &mut self.grafts[k];
        let state = g.state().to_vec();
        if g.engine.is_none() || engine.state().len() != state.len() {
            // The new engine goes before its heap.
            drop(engine);
            drop(heap);
            return Err(LoadError::Refused("the new graft lays its state out differently: the old one stays"));
        }
        engine.state().copy_from_slice(&state);
        // The old engine goes first, then its heap; its entry with it.
        let w = Ways::of(f, &*engine);
        (g.direct, g.notes, g.allocates, g.entry) = (w.direct, w.notes, w.allocates, w.entry);
        g.engine = Some(engine);
        g.undo_stale = true;
        g.heap = heap;
        g.tech = f.tech;
        g.name = String::from(f.name);
        g.failures = 0;
        g.broken = false;
        g.stats.swaps += 1;
        Ok(())
    }

    pub fn unload(&mut self, owner: u32, id: u32) -> Result<(), LoadError> {
        let k = self
            .grafts
            .iter()
            .position(|g| g.id == id && g.owner == owner)
            .ok_or(LoadError::Refused("no such graft of yours"))?;
        self.grafts.remove(k);
        self.arm(false);
        Ok(())
    }

    /// Forget what a program that ended loaded or was sending.
    pub fn forget(&mut self, program: u64) {
        self.grafts.retain(|g| g.program != program);
        self.staging.remove(&program);
        self.verifying.retain(|p| p.program != program);
        self.arm(false);
    }

    pub fn get(&mut self, owner: u32, id: u32) -> Option<&mut Graft> {
        self.grafts.iter_mut().find(|g| g.id == id && g.owner == owner)
    }

    /// The graft of `owner` at `point`, if any: the one to call for the owner's data.
    pub fn active(&mut self, point: Point, owner: u32) -> Option<&mut Graft> {
        self.grafts.iter_mut().find(|g| g.point == point && g.owner == owner)
    }

    /// Call `owner`'s graft at `point`, if it has one: `None` when it has none or the
    /// call was aborted (the default policy answers). A graft that failed too often
    /// is unloaded here. At the eviction point, once this turn's graft time is spent,
    /// or the owner's share of the server's time, the graft is not called (`None`):
    /// the default policy answers. (At the other points a call is the owner's own I/O,
    /// which the graft is part of: it is always made, and charged.)
    pub fn call(&mut self, point: Point, owner: u32, input: &[u8]) -> Option<u64> {
        let k = self.grafts.iter().position(|g| g.point == point && g.owner == owner)?;
        if point == Point::Evict && (self.turn_spent() || !self.shares.may_run(owner, self.host.now())) {
            self.grafts[k].stats.skipped += 1;
            return None;
        }
        self.call_at(k, input)
    }

    /// Call `owner`'s graft `id` as its point would (a graft bound to one thing, as a
    /// logical disk to its segment): `None` when there is no such graft or the call was
    /// aborted. A graft that failed too often is unloaded here.
    pub fn call_id(&mut self, owner: u32, id: u32, input: &[u8]) -> Option<u64> {
        let k = self.grafts.iter().position(|g| g.id == id && g.owner == owner)?;
        self.call_at(k, input)
    }

    fn call_at(&mut self, k: usize, input: &[u8]) -> Option<u64> {
        let g = &mut self.grafts[k];
        let t0 = self.host.now();
        let r = g.call(input, &mut *self.host);
        let now = self.host.now();
        let t = now.wrapping_sub(t0);
        g.stats.cycles += t;
        let (owner, point, dead) = (g.owner, g.point, g.dead());
        self.turn = self.turn.saturating_add(t);
        // An eviction call runs inside another client's request: its owner pays.
        if point == Point::Evict {
            self.shares.charge(owner, t, now);
        }
        if dead {
            self.reap(k);
        }
        r.ok()
    }

    /// Run `owner`'s graft `id` up to `repeat` times on `input`, as its point would
    /// call it (Linux's `BPF_PROG_TEST_RUN`): (the last answer or `None` if that call
    /// was aborted, cycles of all the calls, aborted calls, calls made). Stops early
    /// when the graft is unloaded for failing, and when the turn's graft time is spent
    /// (`TURN_MS`: a request's work is bounded, and the server serves others between).
    /// `None` if there is no such graft.
    pub fn test_run(&mut self, owner: u32, id: u32, input: &[u8], repeat: u32) -> Option<TestRun> {
        let k = self.grafts.iter().position(|g| g.id == id && g.owner == owner)?;
        let (mut last, mut aborts, mut calls) = (None, 0, 0);
        let t0 = self.host.now();
        let limit = TURN_MS.saturating_mul(self.host.ticks_per_ms());
        for _ in 0..repeat {
            let g = &mut self.grafts[k];
            last = g.call(input, &mut *self.host).ok();
            aborts += last.is_none() as u64;
            calls += 1;
            if g.dead() || self.host.now().wrapping_sub(t0) >= limit {
                break;
            }
        }
        let cycles = self.host.now().wrapping_sub(t0);
        let g = &mut self.grafts[k];
        g.stats.cycles += cycles;
        if g.dead() {
            self.reap(k);
        }
        Some(TestRun { last, cycles, aborts, calls })
    }

    /// One line per graft (of `owner`, or all): id, owner, point, technology, calls,
    /// aborts, cycles, name.
    pub fn list(&self, owner: Option<u32>) -> String {
        let mut s = String::new();
        for g in self.grafts.iter().filter(|g| owner.is_none_or(|o| o == g.owner)) {
            let _ = writeln!(
                s,
                "{} {} {} {} {} {} {} {}",
                g.id,
                g.owner,
                g.point.name(),
                g.tech.name(),
                g.stats.calls,
                g.stats.aborts,
                g.stats.cycles,
                g.name
            );
        }
        s
    }

    pub fn len(&self) -> usize {
        self.grafts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.grafts.is_empty()
    }
}
