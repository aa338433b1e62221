//! One loaded graft (`Graft`): its engine and the heap the engine lives in, its state
//! and the undo copy, and its calls as transactions — guarded by the host (heap,
//! deadline), the state put back when a call is aborted, the graft marked dead after
//! `MAX_FAILURES` aborted calls in a row or a call stopped half-way (its engine then
//! forgotten, never dropped). `Ways` is how the table calls an engine, asked once when
//! it is loaded or swapped in.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use super::{DEFAULT_BUDGET, MAX_FAILURES};
use crate::engine::{self, Abort, Engine};
use crate::format::{GraftFile, Tech};
use crate::host::{GraftHeap, Host, Stopped};
use crate::point::Point;
use crate::LoadError;

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
    pub(super) engine: Option<Box<dyn Engine>>,
    /// Its heap: after the engine, so that the engine is dropped first.
    pub(super) heap: Box<dyn GraftHeap>,
    undo: Vec<u8>,
    /// The undo copy may differ from the state (written by its owner or by a call since
    /// it was taken): taken again before the next call. Clear, it equals the state.
    pub(super) undo_stale: bool,
    /// Called directly (native code, or an engine that guards its own call), asked once.
    pub(super) direct: bool,
    /// Its engine says whether a call wrote the state (`Engine::notes_writes`).
    pub(super) notes: bool,
    /// Its engine's calls allocate (`Engine::allocates`): they run in its heap.
    pub(super) allocates: bool,
    /// Compiled code's entry, called with nothing between (`Engine::direct`); gone with
    /// the engine, or once a call was stopped.
    pub(super) entry: Option<engine::Direct>,
    pub(super) failures: u32,
    pub(super) broken: bool,
    /// The watchdog stopped a call of it (its owner gets a strike when it goes).
    pub(super) overran: bool,
    /// The longest one call may run, in the host's clock (`Table::call_ticks`).
    call_ticks: u64,
}

/// How the table calls a graft's engine: asked once, when it is loaded or swapped in.
pub(super) struct Ways {
    pub(super) direct: bool,
    pub(super) notes: bool,
    pub(super) allocates: bool,
    pub(super) entry: Option<engine::Direct>,
}

impl Ways {
    pub(super) fn of(f: &GraftFile<'_>, engine: &dyn Engine) -> Ways {
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
            overran: false,
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
        self.overran |= why == Stopped::Time;
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
                self.overran = true;
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
