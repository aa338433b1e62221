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
//! - **Interposition** is a property of the table entry too: an `Interposer` attached to
//!   a `Slot` (and detached) while calls run sees PRECALL and POSTCALL around every method
//!   call, through a wrapper the `interface!` macro generates from the component's trait.
//! - **State transfer** goes in the best format both components know: bytes in a format
//!   any member of the family reads (the canonical one, bit 0), or the state object
//!   itself, moved, between components of one process that share its type (`State`).
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
use core::any::Any;

pub mod interposers;

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

/// A quiescent point across CPUs (K42's per-processor generation counts): a server
/// whose requests run on several CPUs at once, each CPU counting its own in its own
/// `Generations` (guarded by whatever guards that CPU's state: no count shared by the
/// CPUs on the request path), marks every CPU's generations and has its quiescent point
/// when every CPU's mark has passed — every request running anywhere at the mark has
/// ended. A CPU with nothing running passes at once. Host-tested with threads that
/// begin and end requests on their CPU while another marks and waits (`tests.rs`).
///
/// (Scion's servers on every CPU today step their whole state under one lock, so one
/// `Generations` inside it sees every CPU's requests begin and end: docs/user.md,
/// "Servers on every CPU". This is the count for a server whose requests run outside
/// one lock.)
#[derive(Debug, Default, Clone)]
pub struct CpuMark {
    /// Each CPU's epoch (None: not marked yet), and whether it has passed.
    epochs: Vec<Option<(Epoch, bool)>>,
}

impl CpuMark {
    /// A mark over `cpus` CPUs, none marked yet.
    pub fn new(cpus: usize) -> CpuMark {
        CpuMark { epochs: alloc::vec![None; cpus] }
    }

    /// Mark CPU `cpu`'s generations (the caller holds what guards them). A CPU out of
    /// range is ignored.
    pub fn mark(&mut self, cpu: usize, gens: &mut Generations) {
        if let Some(e) = self.epochs.get_mut(cpu) {
            let m = gens.mark();
            *e = Some((m, gens.passed(m)));
        }
    }

    /// Has CPU `cpu`'s mark passed (looking at its generations now)?
    pub fn check(&mut self, cpu: usize, gens: &Generations) -> bool {
        match self.epochs.get_mut(cpu) {
            Some(Some((e, done))) => {
                *done = *done || gens.passed(*e);
                *done
            }
            _ => false,
        }
    }

    /// Every CPU marked, and every mark passed: the quiescent point.
    pub fn passed(&self) -> bool {
        self.epochs.iter().all(|e| matches!(e, Some((_, true))))
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

/// A component's state on its way to the component that replaces it.
pub enum State {
    /// Encoded: any component that knows the format can read it (across programs too).
    Bytes(Vec<u8>),
    /// The state object itself, moved (formats whose two sides share a type in one
    /// program: no copy, whatever its size).
    Object(Box<dyn Any>),
}

impl State {
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            State::Bytes(b) => Some(b),
            State::Object(_) => None,
        }
    }
    /// The moved object, if it is a `T`.
    pub fn object<T: Any>(self) -> Option<Box<T>> {
        match self {
            State::Object(o) => o.downcast().ok(),
            State::Bytes(_) => None,
        }
    }
}

/// A component that can be swapped: it says which formats it can hand its state over
/// in and take it in, and does both.
pub trait Component {
    fn formats(&self) -> Formats;
    /// The component's state in `format` (one of `formats`); the component is not
    /// called again after it.
    fn export(&mut self, format: u32) -> Option<State>;
    /// Take the state another component exported in `format`; false: refused (the
    /// swap is abandoned and the old component stays).
    fn import(&mut self, format: u32, state: State) -> bool;
}

/// A wrapper around every method call to a component (K42's interposer: PRECALL and
/// POSTCALL); `method` numbers the methods of the component's interface in the order
/// `interface!` declared them.
pub trait Interposer {
    fn precall(&mut self, method: u32);
    fn postcall(&mut self, method: u32);
    /// What it has seen, for people (`swap list`).
    fn report(&self, _names: &[&str], _out: &mut dyn core::fmt::Write) {}
}

/// Declare a component interface: the trait (its supertrait `Component`), an enum of its
/// methods (`$methods::NAMES` for people), and `$via`, the interposing wrapper: it
/// implements the trait by calling the interposer's PRECALL, the component's method and
/// the interposer's POSTCALL for every method. Methods take `&mut self` and
/// plain arguments.
///
/// ```
/// swap::interface! {
///     pub trait Policy via PolicyVia, methods PolicyMethod {
///         fn touched(&mut self, s: u32);
///         fn first(&mut self) -> u32;
///     }
/// }
/// assert_eq!(PolicyMethod::NAMES, &["touched", "first"]);
/// ```
#[macro_export]
macro_rules! interface {
    ($(#[$attr:meta])* $vis:vis trait $name:ident via $via:ident, methods $methods:ident {
        $($(#[$fattr:meta])* fn $f:ident(&mut self $(, $a:ident : $t:ty)* $(,)?) $(-> $r:ty)?;)*
    }) => {
        $(#[$attr])*
        $vis trait $name: $crate::Component {
            $($(#[$fattr])* fn $f(&mut self $(, $a: $t)*) $(-> $r)?;)*
        }

        /// The methods of the interface, numbered as interposers see them.
        #[allow(non_camel_case_types, dead_code)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $methods {
            $($f,)*
        }

        impl $methods {
            pub const NAMES: &'static [&'static str] = &[$(stringify!($f)),*];
        }

        /// Calls through an interposer: PRECALL, the component's method, POSTCALL.
        $vis struct $via<'a> {
            pub inner: &'a mut dyn $name,
            pub interposer: &'a mut dyn $crate::Interposer,
        }

        impl $crate::Component for $via<'_> {
            fn formats(&self) -> $crate::Formats {
                self.inner.formats()
            }
            fn export(&mut self, format: u32) -> Option<$crate::State> {
                self.inner.export(format)
            }
            fn import(&mut self, format: u32, state: $crate::State) -> bool {
                self.inner.import(format, state)
            }
        }

        impl $via<'_> {
            /// Run `f` on the component of `slot` for `call`, through the slot's
            /// interposer if one is attached.
            #[inline]
            pub fn call<R>(slot: &mut $crate::Slot<dyn $name>, call: &$crate::Call, f: impl FnOnce(&mut dyn $name) -> R) -> R {
                match slot.get(call) {
                    (inner, Some(interposer)) => f(&mut $via { inner, interposer }),
                    (inner, None) => f(inner),
                }
            }
        }

        impl $name for $via<'_> {
            $(
                #[inline]
                fn $f(&mut self $(, $a: $t)*) $(-> $r)? {
                    self.interposer.precall($methods::$f as u32);
                    let r = self.inner.$f($($a),*);
                    self.interposer.postcall($methods::$f as u32);
                    r
                }
            )*
        }
    };
}

/// Where a swap stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Normal,
    /// Calls go on; those begun now are tracked, until the mark has passed.
    Forward {
        mark: Epoch,
        deadline: u64,
    },
    /// New calls wait while the tracked ones end.
    Block {
        deadline: u64,
    },
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
}

impl Call {
    pub fn instance(&self) -> u64 {
        self.instance
    }
}

/// One entry of the object translation table: a component, the swap under way, the
/// interposer attached. `T` is the component's interface (`dyn Trait`).
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
    /// Swaps done, and abandoned.
    pub swaps: u64,
    pub aborts: u64,
}

impl<T: ?Sized + Component> Slot<T> {
    pub fn new(component: Box<T>) -> Slot<T> {
        Slot {
            component,
            next: None,
            phase: Phase::Normal,
            inside: 0,
            waiting: VecDeque::new(),
            instance: 0,
            interposer: None,
            swaps: 0,
            aborts: 0,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Which instance calls go to now (the count of swaps).
    pub fn instance(&self) -> u64 {
        self.instance
    }

    /// A call (the server's id `id`: a request) wants the component. `recursive`: it is
    /// made inside a call the component is serving. `None`: it must wait — park it;
    /// `step` names it when it may go on (call `begin` again then).
    pub fn begin(&mut self, gens: &mut Generations, id: u64, recursive: bool) -> Option<Call> {
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
        Some(Call { gen: gens.begin(), tracked, instance: self.instance })
    }

    /// The component, for a call admitted by `begin` (the one indirection of the
    /// translation table), and the interposer to call it through if one is attached
    /// (with the `via` wrapper of its `interface!`).
    pub fn get(&mut self, _call: &Call) -> (&mut T, Option<&mut (dyn Interposer + 'static)>) {
        (&mut self.component, self.interposer.as_deref_mut())
    }

    /// The component, outside any call (what it reports of itself).
    pub fn peek(&self) -> &T {
        &self.component
    }

    /// The interposer attached, if any.
    pub fn interposer(&self) -> Option<&dyn Interposer> {
        self.interposer.as_deref()
    }

    /// A call ends.
    pub fn end(&mut self, gens: &mut Generations, call: Call) {
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
                Phase::Forward { deadline, .. } | Phase::Block { deadline } if now > deadline => {
                    return self.abort("the component did not become quiescent in time")
                }
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
        if !next.import(format, state) {
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

    /// Wrap every method call from now on (replacing any wrapper; `None` detaches).
    /// PRECALL and POSTCALL of one method call are made by one wrapper, so they always
    /// pair, whenever the attach or detach falls.
    pub fn interpose(&mut self, i: Option<Box<dyn Interposer>>) -> Option<Box<dyn Interposer>> {
        core::mem::replace(&mut self.interposer, i)
    }
}

#[cfg(test)]
mod tests;
