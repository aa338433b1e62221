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
//! `load`.
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

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt::Write;

use crate::engine::{self, Abort, Engine, Limits};
use crate::format::{GraftFile, Tech, MAX_FILE};
use crate::host::{GraftHeap, Host, Stopped};
use crate::point::Point;
use crate::LoadError;

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
/// The most memory a graft may hold in its server: its code as the engine keeps it,
/// the engine's own structures and its data (a Wasm memory, script values).
pub const HEAP_LIMIT: usize = 4 << 20;
/// The longest one call may run before the server stops it (and unloads the graft): wall
/// time, so well above what the slowest legitimate call takes on a loaded machine (rhai's
/// MD5 of 1 KiB: about 32 M instructions, a few hundred ms under TCG).
pub const CALL_MS: u64 = 2000;
/// The longest a load may take (validation, compilation).
pub const LOAD_MS: u64 = 5000;
/// Graft time a server spends on its eviction calls, or on one `TEST_RUN`, in one
/// turn (a request).
pub const TURN_MS: u64 = 50;

/// What the server counts for each graft.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub calls: u64,
    pub aborts: u64,
    /// Cycles spent in calls (the server's clock; rdtsc in Scion).
    pub cycles: u64,
    pub last_abort: Option<Abort>,
    /// Times it was hot-swapped for another graft (`Table::replace`).
    pub swaps: u64,
    /// Calls the server did not make: its turn's graft time was spent.
    pub skipped: u64,
}

pub struct Graft {
    pub id: u32,
    /// The principal whose data it acts on.
    pub owner: u32,
    /// The program that loaded it: the graft goes when that program ends.
    pub program: u64,
    pub point: Point,
    pub tech: Tech,
    pub name: String,
    /// The budget of one call, in the technology's units.
    pub budget: u64,
    pub stats: Stats,
    /// `None` once it was stopped half-way (then forgotten, never dropped).
    engine: Option<Box<dyn Engine>>,
    /// Its heap: after the engine, so that the engine is dropped first.
    heap: Box<dyn GraftHeap>,
    undo: Vec<u8>,
    /// The undo copy may differ from the state (written by its owner or by a call since
    /// it was taken): taken again before the next call. Clear, it equals the state.
    undo_stale: bool,
    /// Called directly (native code, or an engine that guards its own call), asked once.
    direct: bool,
    /// Its engine says whether a call wrote the state (`Engine::notes_writes`).
    notes: bool,
    /// Its engine's calls allocate (`Engine::allocates`): they run in its heap.
    allocates: bool,
    /// Compiled code's entry, called with nothing between (`Engine::direct`); gone with
    /// the engine, or once a call was stopped.
    entry: Option<engine::Direct>,
    failures: u32,
    broken: bool,
    /// `CALL_MS` in the host's clock.
    call_ticks: u64,
}

/// How the table calls a graft's engine: asked once, when it is loaded or swapped in.
struct Ways {
    direct: bool,
    notes: bool,
    allocates: bool,
    entry: Option<engine::Direct>,
}

impl Ways {
    fn of(f: &GraftFile<'_>, engine: &dyn Engine) -> Ways {
        let direct = f.tech == Tech::Native || engine.guards_itself();
        Ways {
            direct,
            notes: engine.notes_writes(),
            allocates: engine.allocates(),
            entry: if direct { engine.direct() } else { None },
        }
    }
}

/// The state of a graft whose engine is gone (stopped): nothing.
static NO_STATE: [u8; 0] = [];

impl Graft {
    pub fn new(
        id: u32,
        owner: u32,
        program: u64,
        f: &GraftFile<'_>,
        engine: Box<dyn Engine>,
        heap: Box<dyn GraftHeap>,
        call_ticks: u64,
    ) -> Graft {
        let Ways { direct, notes, allocates, entry } = Ways::of(f, &*engine);
        Graft {
            id,
            owner,
            program,
            point: f.point,
            tech: f.tech,
            name: String::from(f.name),
            budget: DEFAULT_BUDGET,
            stats: Stats::default(),
            engine: Some(engine),
            heap,
            undo: vec![0; f.state_len],
            undo_stale: true,
            direct,
            notes,
            allocates,
            entry,
            failures: 0,
            broken: false,
            call_ticks,
        }
    }

    /// Bytes its engine holds in the server.
    pub fn memory(&self) -> usize {
        self.heap.used()
    }

    /// The most its engine held at once.
    pub fn memory_peak(&self) -> usize {
        self.heap.peak()
    }

    /// The engine was stopped half-way: forget it (its heap with it) and unload.
    fn stopped(&mut self, why: Stopped) -> Abort {
        self.entry = None;
        core::mem::forget(self.engine.take());
        self.heap.reset();
        self.broken = true;
        let a = match why {
            Stopped::Time => Abort::Budget,
            Stopped::Panic => Abort::Trap,
        };
        self.stats.aborts += 1;
        self.stats.last_abort = Some(a);
        a
    }

    /// One call as a transaction, guarded by `host` (its heap, a deadline `CALL_MS`
    /// away). `Err`: the default policy answers this call. Native and signed grafts
    /// are code the system trusts (VINO's C in the kernel, and its Modula-3: no trap
    /// or budget stops them, only a refused answer or the watchdog, which unloads them),
    /// so they get no undo copy.
    pub fn call(&mut self, input: &[u8], host: &mut dyn Host) -> Result<u64, Abort> {
        let trusted = matches!(self.tech, Tech::Native | Tech::SignedRust);
        if let Some(d) = self.entry {
            return self.call_entry(d, input, host, trusted);
        }
        if !self.direct {
            return self.call_hosted(input, host, trusted);
        }
        if !trusted {
            return self.call_compiled(input, host);
        }
        // Native code and signed code (which guards itself, by the watchdog): called
        // directly; what it writes is not undone.
        let Some(engine) = self.engine.as_mut() else { return Err(Abort::Broken) };
        self.stats.calls += 1;
        let out = engine.call(input, self.budget);
        self.settle(input, out, host, true)
    }

    /// Before an untrusted call: the undo copy, unless it already holds the state
    /// (nothing wrote the state since it was taken).
    #[inline(always)]
    fn take_undo(&mut self, trusted: bool) {
        if !trusted && self.undo_stale {
            if let Some(e) = self.engine.as_mut() {
                self.undo.copy_from_slice(e.state());
            }
            self.undo_stale = false;
        }
    }

    /// An untrusted engine that guards its own call (SFI's image tells the watchdog
    /// itself): called directly, the undo copy kept if the call wrote nothing. A
    /// function of its own, as `call_hosted`, so that each path is compiled lean.
    #[inline(always)]
    fn call_compiled(&mut self, input: &[u8], host: &mut dyn Host) -> Result<u64, Abort> {
        self.take_undo(false);
        let Some(engine) = self.engine.as_mut() else { return Err(Abort::Broken) };
        self.stats.calls += 1;
        let (out, wrote) =
            if self.notes { engine.call_noting(input, self.budget) } else { (engine.call(input, self.budget), true) };
        // A call that may have written the state leaves the undo copy behind it.
        self.undo_stale |= wrote;
        self.settle(input, out, host, false)
    }

    /// Compiled code (signed Rust, SFI) through its entry, with no engine between: the
    /// entry guards itself and says whether it may have written the state (the undo copy
    /// is kept if not). A call the watchdog stopped is not undone by a reset: the graft is
    /// unloaded, its engine never called again.
    #[inline(always)]
    fn call_entry(
        &mut self,
        d: engine::Direct,
        input: &[u8],
        host: &mut dyn Host,
        trusted: bool,
    ) -> Result<u64, Abort> {
        self.take_undo(trusted);
        self.stats.calls += 1;
        if input.len() > d.max_input {
            return self.settle(input, Err(Abort::Memory), host, trusted);
        }
        let a = (d.entry)(input.len() as u64, input.as_ptr() as u64, d.arg, 0);
        self.undo_stale |= a.how != 0;
        let out = match a.how as u32 {
            0 => Ok(a.value),
            engine::TRAP_STOPPED => {
                // Left at its exit, which kept nothing of the call: the engine goes.
                self.entry = None;
                drop(self.engine.take());
                self.broken = true;
                self.stats.aborts += 1;
                self.stats.last_abort = Some(Abort::Budget);
                return Err(Abort::Budget);
            }
            code => Err(engine::abort_of(code)),
        };
        self.settle(input, out, host, trusted)
    }

    /// An engine run guarded by `host` (its heap, a deadline), the undo copy taken
    /// first for untrusted code.
    #[inline(always)]
    fn call_hosted(&mut self, input: &[u8], host: &mut dyn Host, trusted: bool) -> Result<u64, Abort> {
        self.take_undo(trusted);
        let Some(engine) = self.engine.as_mut() else { return Err(Abort::Broken) };
        self.stats.calls += 1;
        let budget = self.budget;
        // Engines that allocate nothing while they run (compiled code) need no arena.
        let heap = self.allocates.then_some(&*self.heap);
        let deadline = host.now().saturating_add(self.call_ticks);
        let mut out = Err(Abort::Broken);
        if let Err(why) = host.run(heap, Some(deadline), &mut || out = engine.call(input, budget)) {
            return Err(self.stopped(why));
        }
        // An engine run by the host (an interpreter: its calls may write the state) is
        // asked whether it wrote only if it notes its writes (wasmi running a module that
        // stores nothing); else the undo copy is taken again before its next call.
        if !self.notes || self.engine.as_ref().is_none_or(|e| e.wrote_state()) {
            self.undo_stale = true;
        }
        if heap.is_some() && self.heap.over() {
            out = Err(Abort::Memory);
        }
        self.settle(input, out, host, trusted)
    }

    /// A call's outcome: its answer if the point accepts it, else the call aborted — the
    /// engine reset and, for untrusted code, the state put back from the undo copy.
    #[inline(always)]
    fn settle(
        &mut self,
        input: &[u8],
        out: Result<u64, Abort>,
        host: &mut dyn Host,
        trusted: bool,
    ) -> Result<u64, Abort> {
        let r = match out {
            Ok(v) if self.point.accepts(input, v) => Ok(v),
            Ok(_) => Err(Abort::BadAnswer),
            Err(a) => Err(a),
        };
        match r {
            Ok(v) => {
                self.failures = 0;
                Ok(v)
            }
            Err(a) => {
                self.stats.aborts += 1;
                self.stats.last_abort = Some(a);
                self.failures += 1;
                let mut reset = Err(Abort::Broken);
                let deadline = host.now().saturating_add(self.call_ticks);
                let Some(engine) = self.engine.as_mut() else { return Err(a) };
                if let Err(why) = host.run(Some(&*self.heap), Some(deadline), &mut || reset = engine.reset()) {
                    self.stopped(why);
                    return Err(a);
                }
                self.heap.clear_over();
                match reset {
                    Ok(()) if self.heap.over() => self.broken = true,
                    Ok(()) if !trusted => {
                        if let Some(e) = self.engine.as_mut() {
                            e.state().copy_from_slice(&self.undo);
                            self.undo_stale = false;
                        }
                    }
                    Ok(()) => {}
                    Err(_) => self.broken = true,
                }
                Err(a)
            }
        }
    }

    /// Should the server unload it (too many failures in a row, or broken)?
    pub fn dead(&self) -> bool {
        self.broken || self.failures >= MAX_FAILURES
    }

    fn state_mut(&mut self) -> &mut [u8] {
        self.undo_stale = true;
        match self.engine.as_mut() {
            Some(e) => e.state(),
            None => &mut [],
        }
    }

    /// The owner writes part of the state (a hot list).
    pub fn write_state(&mut self, at: usize, bytes: &[u8]) -> Result<(), LoadError> {
        let s = self.state_mut();
        match at.checked_add(bytes.len()) {
            Some(end) if end <= s.len() => {
                s[at..end].copy_from_slice(bytes);
                Ok(())
            }
            _ => Err(LoadError::Limit("past the graft's state")),
        }
    }

    /// The whole state (a server keeps it somewhere: the logical disk's map on disk).
    pub fn state(&mut self) -> &[u8] {
        match self.engine.as_mut() {
            Some(e) => e.state(),
            None => &NO_STATE,
        }
    }

    /// Up to `out.len()` bytes of the state from `at` (none past its end).
    pub fn read_state(&mut self, at: usize, out: &mut [u8]) -> usize {
        let s = self.state_mut();
        let from = s.get(at..).unwrap_or(&[]);
        let n = out.len().min(from.len());
        out[..n].copy_from_slice(&from[..n]);
        n
    }
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
type Built = (Box<dyn Engine>, Box<dyn GraftHeap>);

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
    /// Grafts unloaded because they failed, since the server started.
    pub reaped: u64,
    host: Box<dyn Host>,
    /// Graft time spent in this turn (`new_turn`), in the host's clock.
    turn: u64,
    /// The host's watchdog is armed (grafts are loaded, or one is being loaded).
    armed: bool,
}

impl Table {
    /// A table for a server hosting `points`, its ids after `base` (a multiple of
    /// 1000: cache 1000, blk 2000, net 3000), its grafts run by `host`.
    pub fn new(points: &'static [Point], base: u32, host: Box<dyn Host>) -> Table {
        let limits = Limits { over: host.over_probe(), ..Limits::default() };
        Table {
            grafts: Vec::new(),
            staging: BTreeMap::new(),
            base,
            next: 0,
            points,
            limits,
            reaped: 0,
            host,
            turn: 0,
            armed: false,
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

    /// Build the engine for `f` in a heap of its own.
    fn build(&mut self, f: &GraftFile<'_>, extra: Extra<'_>) -> Result<Built, LoadError> {
        self.arm(true);
        let r = self.build_armed(f, extra);
        self.arm(false);
        r
    }

    fn build_armed(&mut self, f: &GraftFile<'_>, extra: Extra<'_>) -> Result<Built, LoadError> {
        let mut heap =
            self.host.heap(HEAP_LIMIT).ok_or(LoadError::Limit("the server has no heap left for another graft"))?;
        let limits = self.limits;
        let mut built = None;
        let deadline = self.host.now().saturating_add(LOAD_MS.saturating_mul(self.host.ticks_per_ms()));
        let r = self.host.run(Some(&*heap), Some(deadline), &mut || {
            built = Some(match extra(f) {
                Some(r) => r,
                None => engine::build(f, limits),
            })
        });
        if r.is_err() {
            core::mem::forget(built.take());
            heap.reset();
            return Err(LoadError::Refused(match r {
                Err(Stopped::Time) => "the engine took too long to load it",
                _ => "the engine failed on it",
            }));
        }
        let engine = built.unwrap_or(Err(LoadError::Refused("the engine failed on it")))?;
        if heap.over() {
            return Err(LoadError::Limit("the graft needs more memory than a graft may hold"));
        }
        Ok((engine, heap))
    }

    /// Part of a graft file, at byte `at` of `program`'s staging buffer.
    pub fn put(&mut self, program: u64, at: usize, bytes: &[u8]) -> Result<(), LoadError> {
        if at.checked_add(bytes.len()).is_none_or(|e| e > MAX_FILE) {
            return Err(LoadError::Limit("graft file bigger than its header, 256 KiB of code and a signature"));
        }
        if !self.staging.contains_key(&program) && self.staging.len() >= MAX_STAGING {
            return Err(LoadError::Limit("too many loads under way"));
        }
        let buf = self.staging.entry(program).or_default();
        if at > buf.len() {
            return Err(LoadError::Format("pieces must come in order"));
        }
        buf.truncate(at);
        buf.extend_from_slice(bytes);
        Ok(())
    }

    /// Load the file staged by `program` (exactly `len` bytes of it), for its
    /// principal `owner`. The staging buffer is emptied whatever happens.
    pub fn load(&mut self, owner: u32, program: u64, len: usize, extra: Extra<'_>) -> Result<u32, LoadError> {
        let buf = self.staging.remove(&program).unwrap_or_default();
        if buf.len() != len {
            return Err(LoadError::Format("the pieces sent do not add up to the length"));
        }
        let f = GraftFile::parse(&buf)?;
        if !self.points.contains(&f.point) {
            return Err(LoadError::Refused("this server has no such graft point"));
        }
        if self.grafts.len() >= MAX_GRAFTS {
            return Err(LoadError::Limit("the server holds as many grafts as it may"));
        }
        // The code is checked before the point's occupancy: a bad file hears why.
        let (engine, heap) = self.build(&f, extra)?;
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
        let call_ticks = CALL_MS.saturating_mul(self.host.ticks_per_ms());
        self.grafts.push(Graft::new(id, owner, program, &f, engine, heap, call_ticks));
        self.arm(false);
        Ok(id)
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
        let buf = self.staging.remove(&program).unwrap_or_default();
        if buf.len() != len {
            return Err(LoadError::Format("the pieces sent do not add up to the length"));
        }
        let f = GraftFile::parse(&buf)?;
        let k = self
            .grafts
            .iter()
            .position(|g| g.id == id && g.owner == owner)
            .ok_or(LoadError::Refused("no such graft of yours"))?;
        if self.grafts[k].point != f.point {
            return Err(LoadError::Refused("the new graft is for another point"));
        }
        let (mut engine, heap) = self.build(&f, extra)?;
        let g = &mut self.grafts[k];
        let state = g.state().to_vec();
        if g.engine.is_none() || engine.state().len() != state.len() {
            return Err(LoadError::Refused("the new graft lays its state out differently: the old one stays"));
        }
        engine.state().copy_from_slice(&state);
        // The old engine goes first, then its heap; its entry with it.
        let w = Ways::of(&f, &*engine);
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
    /// is unloaded here. At the eviction point, once this turn's graft time is spent
    /// the graft is not called (`None`).
    pub fn call(&mut self, point: Point, owner: u32, input: &[u8]) -> Option<u64> {
        let k = self.grafts.iter().position(|g| g.point == point && g.owner == owner)?;
        if point == Point::Evict && self.turn_spent() {
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
        let t = self.host.now().wrapping_sub(t0);
        g.stats.cycles += t;
        self.turn = self.turn.saturating_add(t);
        if g.dead() {
            self.grafts.remove(k);
            self.reaped += 1;
            self.arm(false);
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
            self.grafts.remove(k);
            self.reaped += 1;
            self.arm(false);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::counting::CountingHost;

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
        let other = GraftFile {
            point: Point::Evict,
            tech: Tech::Native,
            state_len: 16,
            name: "other",
            code: b"null",
            sig: &[],
        }
        .to_bytes();
        send(&mut t, &other);
        assert_eq!(t.replace(1, 1, 1, other.len(), &mut |_| None), Ok(()));
        let g = t.get(1, 1).unwrap();
        assert_eq!((g.name.as_str(), g.stats.swaps), ("other", 1));
        assert_eq!(g.state(), &[9; 16], "the state moved");
        let longer = GraftFile {
            point: Point::Evict,
            tech: Tech::Native,
            state_len: 24,
            name: "longer",
            code: b"null",
            sig: &[],
        }
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
        assert!(
            matches!(t2.replace(1, 1, id, l.len(), &mut |_| None), Err(LoadError::Refused(w)) if w.contains("point"))
        );
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
        let f =
            GraftFile { point: Point::Evict, tech: Tech::Upcall, state_len: 8, name: "probe", code: b"p", sig: &[] }
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
        let id = t
            .load(1, 1, f.len(), &mut |f| Some(Ok(Box::new(Compiled(vec![0; f.state_len])) as Box<dyn Engine>)))
            .unwrap();
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
        fn run(
            &mut self,
            heap: Option<&dyn GraftHeap>,
            deadline: Option<u64>,
            f: &mut dyn FnMut(),
        ) -> Result<(), Stopped> {
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
        let f =
            GraftFile { point: Point::Evict, tech: Tech::Native, state_len: 16, name: "n", code: b"null", sig: &[] }
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

    /// rhai's limits do not count map keys or values curried into function pointers:
    /// scripts that hold gigabytes that way are stopped by their heap (`Memory`), which
    /// never holds much more than its limit.
    #[test]
    fn scripts_are_bounded_by_their_heap() {
        let keys = "fn graft(input) { let k = \"\"; k.pad(16000, \"k\"); let o = #{}; for i in 0..250 { let m = #{}; for j in 0..250 { m[k + j] = j; } o[`${i}`] = m; } 0 }";
        let curry = "fn keep(a, b) { a } fn graft(input) { let s = \"\"; s.pad(16000, \"c\"); let fs = []; for i in 0..16000 { fs.push(Fn(\"keep\").curry(s + i)); } 0 }";
        crate::engine::warm_up();
        for src in [keys, curry] {
            let mut t = Table::new(&[Point::Evict], 0, host());
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
            assert!(g.memory() < HEAP_LIMIT, "what the script held is freed: {} bytes left", g.memory());
            assert!(
                g.memory_peak() < HEAP_LIMIT + HEAP_LIMIT / 8,
                "stopped at its limit: it held {} bytes",
                g.memory_peak()
            );
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
}
