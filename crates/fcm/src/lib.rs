//! The per-file state of `files` as K42's File Cache Manager (FCM): what the server
//! knows of each file it serves — the handles open on it and the reads and writes made
//! through them — as one of two components behind one entry, swapped live:
//!
//! - **`Single`**: one structure (a map from inode to `FileState`) under one lock,
//!   shared by every CPU. Least memory per file, and a question about a file is one
//!   look; but every call from every CPU takes the same lock and writes the same lines.
//! - **`Replicated`**: K42's clustered object — a representative per CPU, each a map of
//!   its own under a lock of its own on its own cache line. A call touches only its
//!   CPU's representative; the file's state is the sum of the representatives',
//!   combined only when asked (`state`), and forgetting a file visits every one.
//!
//! **The swap** (`Fcm::swap`) goes as K42's hot-swap: new calls are held (they wait at
//! the entry), the calls inside the old component drain — each CPU counts its own calls
//! in flight, and the quiescent point is when every CPU's count has been seen at zero
//! after the hold began — then the old component's state moves to the new one in the
//! canonical format (a map inode → `FileState`: the combine of every representative)
//! and the held calls go on to the new one. No call is lost or counted twice (the
//! threaded tests check it). (`swap::CpuMark` is that quiescent point over per-CPU
//! `Generations`; it needs each CPU's count under a guard of its own, a lock taken twice
//! per call. An atomic count per CPU and a hold flag give the same point for a
//! component whose calls are short and never block.)
//!
//! **`Policy`** (`auto`): the stream detector's analog. Over each window of calls it
//! counts the calls that found the file's state last touched by another CPU (its lines
//! would move between caches in `Single`) and the calls that found the lock held; when
//! those are a quarter of the window with more than one CPU calling, it asks for
//! `Replicated`. It asks for `Single` back when one CPU makes nearly every call, or
//! when combines (`state`, and `forget`, which visits every representative) are an
//! eighth of the calls: the Postmark case, many short-lived files asked about whole.
#![no_std]

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

#[cfg(test)]
mod tests;

/// What the FCM knows of one file (in `Replicated`, each representative's share; the
/// file's is their sum).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct FileState {
    pub opens: u64,
    pub closes: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// The CPU that touched this entry last, plus one (0: none yet): `Policy`'s signal.
    last_cpu: u64,
}

impl FileState {
    /// Handles open on the file now.
    pub fn open_now(&self) -> u64 {
        self.opens.saturating_sub(self.closes)
    }

    /// The counts (without `Policy`'s last CPU).
    pub fn counts(&self) -> [u64; 6] {
        [self.opens, self.closes, self.reads, self.writes, self.bytes_read, self.bytes_written]
    }

    fn add(&mut self, o: &FileState) {
        self.opens += o.opens;
        self.closes += o.closes;
        self.reads += o.reads;
        self.writes += o.writes;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
    }
}

/// One call on a file's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Open,
    Close,
    Read(u64),
    Write(u64),
}

impl Op {
    fn apply(self, s: &mut FileState) {
        match self {
            Op::Open => s.opens += 1,
            Op::Close => s.closes += 1,
            Op::Read(n) => {
                s.reads += 1;
                s.bytes_read += n;
            }
            Op::Write(n) => {
                s.writes += 1;
                s.bytes_written += n;
            }
        }
    }
}

/// A spin lock that counts the acquisitions that found it held.
pub struct Lock<T> {
    held: AtomicBool,
    contended: AtomicU64,
    v: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `Guard`, and one `Guard` exists at a time
// (`held`, taken with acquire and released with release ordering), so `T: Send` suffices.
unsafe impl<T: Send> Sync for Lock<T> {}

pub struct Guard<'a, T>(&'a Lock<T>);

impl<T> Lock<T> {
    pub const fn new(v: T) -> Lock<T> {
        Lock { held: AtomicBool::new(false), contended: AtomicU64::new(0), v: UnsafeCell::new(v) }
    }

    pub fn lock(&self) -> Guard<'_, T> {
        if self.held.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.contended.fetch_add(1, Ordering::Relaxed);
            while self.held.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
                core::hint::spin_loop();
            }
        }
        Guard(self)
    }

    /// Acquisitions so far that found the lock held.
    pub fn contended(&self) -> u64 {
        self.contended.load(Ordering::Relaxed)
    }
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock: no other reference to the value exists.
        unsafe { &*self.0.v.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock, and `&mut self` makes this the only
        // reference through it.
        unsafe { &mut *self.0.v.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.0.held.store(false, Ordering::Release);
    }
}

/// Each representative on a line (and the next) of its own.
#[repr(align(128))]
struct Padded<T>(T);

type Map = BTreeMap<u32, FileState>;

/// Which component.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Single = 0,
    Replicated = 1,
}

impl Kind {
    pub const NAMES: [&'static str; 2] = ["single", "replicated"];
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// The two components' common interface.
pub trait Component: Sync {
    fn call(&self, cpu: usize, ino: u32, op: Op) -> bool;
    fn state(&self, ino: u32) -> Option<FileState>;
    fn forget(&self, ino: u32);
    /// Hand the whole state over (canonical: the combine of every file), leaving none.
    fn export(&self) -> Map;
    fn import(&self, m: Map);
    fn files(&self) -> usize;
    fn contended(&self) -> u64;
    /// Bytes of maps' entries held (the memory the paper's Postmark figure weighs).
    fn entries(&self) -> usize;
}

/// One map under one lock.
pub struct Single {
    map: Lock<Map>,
}

impl Single {
    pub fn new() -> Single {
        Single { map: Lock::new(Map::new()) }
    }
}

impl Default for Single {
    fn default() -> Self {
        Self::new()
    }
}

impl Component for Single {
    /// The call; whether the entry was last touched by another CPU.
    fn call(&self, cpu: usize, ino: u32, op: Op) -> bool {
        let mut m = self.map.lock();
        let s = m.entry(ino).or_default();
        let remote = s.last_cpu != 0 && s.last_cpu != cpu as u64 + 1;
        s.last_cpu = cpu as u64 + 1;
        op.apply(s);
        remote
    }
    fn state(&self, ino: u32) -> Option<FileState> {
        self.map.lock().get(&ino).copied()
    }
    fn forget(&self, ino: u32) {
        self.map.lock().remove(&ino);
    }
    fn export(&self) -> Map {
        core::mem::take(&mut *self.map.lock())
    }
    fn import(&self, m: Map) {
        let mut g = self.map.lock();
        for (ino, s) in m {
            g.entry(ino).or_default().add(&s);
        }
    }
    fn files(&self) -> usize {
        self.map.lock().len()
    }
    fn contended(&self) -> u64 {
        self.map.contended()
    }
    fn entries(&self) -> usize {
        self.files()
    }
}

/// A representative per CPU.
pub struct Replicated {
    reps: Vec<Padded<Lock<Map>>>,
}

impl Replicated {
    pub fn new(cpus: usize) -> Replicated {
        Replicated { reps: (0..cpus.max(1)).map(|_| Padded(Lock::new(Map::new()))).collect() }
    }

    fn rep(&self, cpu: usize) -> &Lock<Map> {
        &self.reps[cpu % self.reps.len()].0
    }
}

impl Component for Replicated {
    fn call(&self, cpu: usize, ino: u32, op: Op) -> bool {
        let mut m = self.rep(cpu).lock();
        op.apply(m.entry(ino).or_default());
        false
    }
    /// The combine: the sum of every representative's share.
    fn state(&self, ino: u32) -> Option<FileState> {
        let mut sum: Option<FileState> = None;
        for r in &self.reps {
            if let Some(s) = r.0.lock().get(&ino) {
                sum.get_or_insert_with(FileState::default).add(s);
            }
        }
        sum
    }
    fn forget(&self, ino: u32) {
        for r in &self.reps {
            r.0.lock().remove(&ino);
        }
    }
    fn export(&self) -> Map {
        let mut all = Map::new();
        for r in &self.reps {
            for (ino, s) in core::mem::take(&mut *r.0.lock()) {
                all.entry(ino).or_default().add(&s);
            }
        }
        all
    }
    /// Each file's whole state goes to representative 0 (a sum: where a share lies
    /// does not matter).
    fn import(&self, m: Map) {
        let mut g = self.reps[0].0.lock();
        for (ino, s) in m {
            g.entry(ino).or_default().add(&s);
        }
    }
    fn files(&self) -> usize {
        let mut inos = alloc::collections::BTreeSet::new();
        for r in &self.reps {
            inos.extend(r.0.lock().keys().copied());
        }
        inos.len()
    }
    fn contended(&self) -> u64 {
        self.reps.iter().map(|r| r.0.contended()).sum()
    }
    fn entries(&self) -> usize {
        self.reps.iter().map(|r| r.0.lock().len()).sum()
    }
}

/// A window's counts, and what `Policy` makes of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub calls: u64,
    /// Calls that found the state last touched by another CPU, or the lock held.
    pub shared: u64,
    /// Combines (`state`, `forget`).
    pub combines: u64,
    /// Calls made by the CPU that made the most.
    pub top_cpu: u64,
}

/// `auto`: swap on sharing (see the crate's head).
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    pub window: u64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { window: 512 }
    }
}

impl Policy {
    /// The component a full window asks for, if not `now`.
    pub fn decide(&self, now: Kind, w: &Window) -> Option<Kind> {
        if w.calls < self.window {
            return None;
        }
        let want = if w.combines * 8 >= w.calls || w.top_cpu * 16 >= w.calls * 15 {
            Kind::Single
        } else if w.shared * 4 >= w.calls {
            Kind::Replicated
        } else {
            now
        };
        (want != now).then_some(want)
    }
}

/// Most CPUs an `Fcm` counts calls for.
pub const MAX_CPUS: usize = 16;

/// The entry: the component in place, the swap, and `auto`'s counts.
pub struct Fcm {
    single: Single,
    replicated: Replicated,
    /// The component calls go to (`Kind as usize`).
    now: AtomicUsize,
    /// A swap holds new calls.
    hold: AtomicBool,
    /// Calls in flight on each CPU.
    inflight: [Padded<AtomicU64>; MAX_CPUS],
    /// One swap at a time.
    swapping: Lock<()>,
    /// Swaps done.
    swaps: AtomicU64,
    /// `auto`'s window: per-CPU calls and sharing, combines.
    calls: [Padded<AtomicU64>; MAX_CPUS],
    shared: AtomicU64,
    combines: AtomicU64,
    contended_at_window: AtomicU64,
    pub auto: AtomicBool,
    pub policy: Policy,
    relax: fn(),
}

impl Fcm {
    /// An entry over `cpus` CPUs with `Single` in place; `relax` is what a held call
    /// does while it waits (spin, or yield the CPU).
    pub fn new(cpus: usize, relax: fn()) -> Fcm {
        Fcm {
            single: Single::new(),
            replicated: Replicated::new(cpus.clamp(1, MAX_CPUS)),
            now: AtomicUsize::new(Kind::Single as usize),
            hold: AtomicBool::new(false),
            inflight: [const { Padded(AtomicU64::new(0)) }; MAX_CPUS],
            swapping: Lock::new(()),
            swaps: AtomicU64::new(0),
            calls: [const { Padded(AtomicU64::new(0)) }; MAX_CPUS],
            shared: AtomicU64::new(0),
            combines: AtomicU64::new(0),
            contended_at_window: AtomicU64::new(0),
            auto: AtomicBool::new(false),
            policy: Policy::default(),
            relax,
        }
    }

    pub fn kind(&self) -> Kind {
        if self.now.load(Ordering::Acquire) == 0 {
            Kind::Single
        } else {
            Kind::Replicated
        }
    }

    pub fn swaps(&self) -> u64 {
        self.swaps.load(Ordering::Relaxed)
    }

    fn component(&self, k: usize) -> &dyn Component {
        if k == 0 {
            &self.single
        } else {
            &self.replicated
        }
    }

    /// Run `f` on the component in place, counted in flight on `cpu` (held while a swap
    /// runs).
    fn enter<R>(&self, cpu: usize, f: impl FnOnce(&dyn Component) -> R) -> R {
        let c = &self.inflight[cpu % MAX_CPUS].0;
        loop {
            // (SeqCst on both sides: either the swap sees this count, or this call sees
            // the hold.)
            c.fetch_add(1, Ordering::SeqCst);
            if !self.hold.load(Ordering::SeqCst) {
                break;
            }
            c.fetch_sub(1, Ordering::SeqCst);
            while self.hold.load(Ordering::SeqCst) {
                (self.relax)();
            }
        }
        let r = f(self.component(self.now.load(Ordering::SeqCst)));
        c.fetch_sub(1, Ordering::Release);
        r
    }

    /// A call on file `ino` from `cpu`.
    pub fn call(&self, cpu: usize, ino: u32, op: Op) {
        let remote = self.enter(cpu, |c| c.call(cpu, ino, op));
        self.calls[cpu % MAX_CPUS].0.fetch_add(1, Ordering::Relaxed);
        if remote {
            self.shared.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// File `ino`'s state (in `Replicated`, the combine).
    pub fn state(&self, cpu: usize, ino: u32) -> Option<FileState> {
        self.combines.fetch_add(1, Ordering::Relaxed);
        self.enter(cpu, |c| c.state(ino))
    }

    /// The file is gone: forget its state.
    pub fn forget(&self, cpu: usize, ino: u32) {
        self.combines.fetch_add(1, Ordering::Relaxed);
        self.enter(cpu, |c| c.forget(ino))
    }

    /// Files with state, and map entries held.
    pub fn files(&self, cpu: usize) -> (usize, usize) {
        self.enter(cpu, |c| (c.files(), c.entries()))
    }

    /// Swap to `to` while calls go on: hold new calls, wait until every CPU's count of
    /// calls in flight has been seen at zero, move the state, let the calls go on to the
    /// new component. False if `to` is in place already.
    pub fn swap(&self, to: Kind) -> bool {
        let _one = self.swapping.lock();
        let from = self.now.load(Ordering::SeqCst);
        if from == to as usize {
            return false;
        }
        self.hold.store(true, Ordering::SeqCst);
        // The quiescent point: each CPU's calls in flight have drained (none enter now).
        for c in &self.inflight {
            while c.0.load(Ordering::SeqCst) != 0 {
                (self.relax)();
            }
        }
        let state = self.component(from).export();
        self.component(to as usize).import(state);
        self.now.store(to as usize, Ordering::SeqCst);
        self.swaps.fetch_add(1, Ordering::Relaxed);
        self.hold.store(false, Ordering::SeqCst);
        true
    }

    /// `auto`: if a full window has passed, what it says (and a new window begins); the
    /// swap is made here. Some((from, to, window)) when it swapped.
    pub fn auto_step(&self) -> Option<(Kind, Kind, Window)> {
        if !self.auto.load(Ordering::Relaxed) {
            return None;
        }
        let per: Vec<u64> = self.calls.iter().map(|c| c.0.load(Ordering::Relaxed)).collect();
        let calls: u64 = per.iter().sum();
        if calls < self.policy.window {
            return None;
        }
        let contended = self.single.contended() + self.replicated.contended();
        let w = Window {
            calls,
            shared: self.shared.load(Ordering::Relaxed)
                + contended.saturating_sub(self.contended_at_window.load(Ordering::Relaxed)),
            combines: self.combines.load(Ordering::Relaxed),
            top_cpu: per.iter().copied().max().unwrap_or(0),
        };
        for c in &self.calls {
            c.0.store(0, Ordering::Relaxed);
        }
        self.shared.store(0, Ordering::Relaxed);
        self.combines.store(0, Ordering::Relaxed);
        self.contended_at_window.store(contended, Ordering::Relaxed);
        let now = self.kind();
        let to = self.policy.decide(now, &w)?;
        self.swap(to).then_some((now, to, w))
    }
}
