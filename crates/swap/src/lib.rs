//! Online reconfiguration (the K42 seed): components behind an object translation
//! table, so that a running server can swap one for another while requests use it,
//! with no request lost, run twice, or run on a component that is gone.
//!
//! - **Generations** (`Generations`, K42 §4): every request a server handles is a
//!   short-lived unit of work with a start and an end. Requests are counted in one of
//!   two generations; new ones join the current one, and the current generation moves
//!   on only when the other one has emptied. Two moves after a `mark`, every request
//!   that was running at the mark has ended: a quiescent point, found without blocking
//!   anyone.
//! - **Hot-swap** (`Slot`, K42 Fig. 3): a mediator takes a component through three
//!   phases. *Forward*: calls go on to the old component, and those that start now are
//!   tracked, until the generations say every untracked call has ended. *Block*: new
//!   calls wait (the server parks them: a saved reply) while the tracked ones finish;
//!   a recursive call — one made inside a call the component is already serving — goes
//!   through, or it would wait for itself. *Transfer*: no call is inside the component;
//!   its state moves to the new one in the best format both know (`negotiate`), the
//!   table entry points at the new one, and the waiting calls go on to it. A block
//!   phase that lasts past its deadline, or a new component that refuses the state,
//!   ends the swap with the old component still in place (`Outcome::Aborted`); the
//!   caller may try again.
//! - **Interposition** is a property of the table entry too: a wrapper around every call
//!   (`Interposer`), attached and detached while calls run.
//!
//! The server keeps the clock and the parking; this crate decides. It is `no_std` and
//! tested on the host against a model with random interleavings of calls, swaps,
//! timeouts and refusals.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

/// The two generations of requests.
#[derive(Debug, Default)]
pub struct Generations {
    current: usize,
    active: [u64; 2],
    /// Moves of the current generation so far.
    moves: u64,
}

/// A request's membership in a generation (give it back to `end`).
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub struct Gen(usize);

/// A point after which every request running at its `mark` has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Epoch(u64);

impl Generations {
    pub fn new() -> Generations {
        Generations::default()
    }

    /// A request starts.
    pub fn begin(&mut self) -> Gen {
        self.active[self.current] += 1;
        Gen(self.current)
    }

    /// A request ends.
    pub fn end(&mut self, g: Gen) {
        self.active[g.0] = self.active[g.0].saturating_sub(1);
        self.advance();
    }

    /// Move the current generation on while the other one is empty (at most twice:
    /// two moves are all a mark needs).
    fn advance(&mut self) {
        for _ in 0..2 {
            let other = 1 - self.current;
            if self.active[other] != 0 {
                return;
            }
            self.current = other;
            self.moves += 1;
        }
    }

    /// Ask for a quiescent point: every request running now has ended once `passed`.
    pub fn mark(&mut self) -> Epoch {
        let e = Epoch(self.moves + 2);
        self.advance();
        e
    }

    pub fn passed(&self, e: Epoch) -> bool {
        self.moves >= e.0
    }

    /// Requests running now.
    pub fn running(&self) -> u64 {
        self.active[0] + self.active[1]
    }
}

/// State-transfer formats, one bit each (K42: up to 64 per family of components; every
/// family understands one canonical format).
pub type Formats = u64;

/// The best format both sides know: the highest common bit.
pub fn negotiate(from: Formats, to: Formats) -> Option<u32> {
    let common = from & to;
    (common != 0).then(|| 63 - common.leading_zeros())
}

/// A component that can be swapped: it says which formats it can hand its state over
/// in and take it in, and does both.
pub trait Component {
    fn formats(&self) -> Formats;
    /// The component's state in `format` (one of `formats`).
    fn export(&mut self, format: u32) -> Option<Vec<u8>>;
    /// Take the state another component exported in `format`; false: refused (the
    /// swap is abandoned and the old component stays).
    fn import(&mut self, format: u32, state: &[u8]) -> bool;
}

/// A wrapper around every call to a component (K42's interposer: PRECALL/POSTCALL).
pub trait Interposer {
    fn precall(&mut self, method: u32);
    fn postcall(&mut self, method: u32);
}

/// Where a swap stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Normal,
    /// Calls go on; those begun now are tracked, until the mark has passed.
    Forward { mark: Epoch, deadline: u64 },
    /// New calls wait while the tracked ones end.
    Block { deadline: u64 },
}

/// What `step` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Still under way.
    Pending,
    /// The new component is in place (state moved in `format`); the calls in `released`
    /// go on, to it.
    Swapped { format: u32, released: Vec<u64> },
    /// The old component stays (deadline passed, no common format, state refused); the
    /// calls in `released` go on, to it.
    Aborted { why: &'static str, released: Vec<u64> },
}

/// A call admitted to a component: give it back to `end`.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub struct Call {
    gen: Gen,
    /// Begun during a forward phase (the mediator tracked it).
    pub tracked: bool,
    /// Which instance it runs on (the slot's count of swaps when it began).
    instance: u64,
    method: u32,
    /// The interposer that saw its PRECALL (the slot's count of attaches then).
    wrapped: Option<u64>,
}

impl Call {
    pub fn instance(&self) -> u64 {
        self.instance
    }
}

/// One entry of the object translation table: a component, the swap under way, the
/// interposer attached.
pub struct Slot<T: ?Sized + Component> {
    component: Box<T>,
    next: Option<Box<T>>,
    phase: Phase,
    /// Calls running on the component now: in the block phase, the tracked ones and
    /// recursive ones let through (the untracked ones ended before it began).
    inside: u64,
    /// Calls that wait for the swap (the server's ids for them).
    waiting: VecDeque<u64>,
    instance: u64,
    interposer: Option<Box<dyn Interposer>>,
    /// Attaches and detaches of interposers so far.
    attaches: u64,
    /// Swaps done, and abandoned.
    pub swaps: u64,
    pub aborts: u64,
}

impl<T: ?Sized + Component> Slot<T> {
    pub fn new(component: Box<T>) -> Slot<T> {
        Slot { component, next: None, phase: Phase::Normal, inside: 0, waiting: VecDeque::new(), instance: 0, interposer: None, attaches: 0, swaps: 0, aborts: 0 }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Which instance calls go to now (the count of swaps).
    pub fn instance(&self) -> u64 {
        self.instance
    }

    /// A call (the server's id `id`, method `method`) wants the component. `recursive`:
    /// it is made inside a call the component is serving. `None`: it must wait — park
    /// it; `step` names it when it may go on (call `begin` again then).
    pub fn begin(&mut self, gens: &mut Generations, id: u64, method: u32, recursive: bool) -> Option<Call> {
        let tracked = match self.phase {
            Phase::Normal => false,
            Phase::Forward { .. } => true,
            Phase::Block { .. } if recursive => false,
            Phase::Block { .. } => {
                self.waiting.push_back(id);
                return None;
            }
        };
        self.inside += 1;
        let wrapped = self.interposer.as_mut().map(|i| i.precall(method)).map(|_| self.attaches);
        Some(Call { gen: gens.begin(), tracked, instance: self.instance, method, wrapped })
    }

    /// The component, for a call admitted by `begin`.
    pub fn get(&mut self, _call: &Call) -> &mut T {
        &mut self.component
    }

    /// A call ends.
    pub fn end(&mut self, gens: &mut Generations, call: Call) {
        if let (Some(i), Some(a)) = (self.interposer.as_mut(), call.wrapped) {
            if a == self.attaches {
                i.postcall(call.method);
            }
        }
        self.inside -= 1;
        gens.end(call.gen);
    }

    /// Start swapping to `next`; the swap must be over by `deadline` (the server's
    /// clock), or it is abandoned. False if a swap is under way already.
    pub fn swap(&mut self, gens: &mut Generations, next: Box<T>, deadline: u64) -> bool {
        if self.phase != Phase::Normal {
            return false;
        }
        self.next = Some(next);
        self.phase = Phase::Forward { mark: gens.mark(), deadline };
        true
    }

    /// Move the swap on as far as it can go now (`now` on the server's clock).
    pub fn step(&mut self, gens: &Generations, now: u64) -> Outcome {
        loop {
            match self.phase {
                Phase::Normal => return Outcome::Pending,
                Phase::Forward { deadline, .. } | Phase::Block { deadline } if now > deadline => return self.abort("the component did not become quiescent in time"),
                Phase::Forward { mark, deadline } => {
                    if !gens.passed(mark) {
                        return Outcome::Pending;
                    }
                    self.phase = Phase::Block { deadline };
                }
                Phase::Block { .. } => {
                    if self.inside > 0 {
                        return Outcome::Pending;
                    }
                    return self.transfer();
                }
            }
        }
    }

    fn transfer(&mut self) -> Outcome {
        let Some(mut next) = self.next.take() else { return self.abort("no new component") };
        let Some(format) = negotiate(self.component.formats(), next.formats()) else {
            return self.abort("no state format both components know");
        };
        let Some(state) = self.component.export(format) else { return self.abort("the old component gave no state") };
        if !next.import(format, &state) {
            return self.abort("the new component refused the state");
        }
        self.component = next;
        self.instance += 1;
        self.swaps += 1;
        self.phase = Phase::Normal;
        Outcome::Swapped { format, released: self.waiting.drain(..).collect() }
    }

    fn abort(&mut self, why: &'static str) -> Outcome {
        self.next = None;
        self.phase = Phase::Normal;
        self.aborts += 1;
        Outcome::Aborted { why, released: self.waiting.drain(..).collect() }
    }

    /// Wrap every call from now on (replacing any wrapper; `None` detaches). An
    /// interposer sees PRECALL and POSTCALL of exactly the calls begun while it is
    /// attached that also end while it is: calls under way at an attach or detach are
    /// not half-wrapped.
    pub fn interpose(&mut self, i: Option<Box<dyn Interposer>>) -> Option<Box<dyn Interposer>> {
        self.attaches += 1;
        core::mem::replace(&mut self.interposer, i)
    }
}

#[cfg(test)]
mod tests;
