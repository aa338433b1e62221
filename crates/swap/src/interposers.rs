//! The interposers a person can attach from the shell (K42 Table 1's): one that counts
//! calls, one that traces them, one that times them; and `Shared`, one of them over
//! many slots.

use crate::Interposer;
use alloc::boxed::Box;
use alloc::rc::Rc;
use core::cell::RefCell;
use core::fmt::Write;

/// Methods an interposer keeps figures for (an interface's first `METHODS`).
pub const METHODS: usize = 16;

/// Counts calls per method.
#[derive(Default)]
pub struct Counter {
    pub calls: [u64; METHODS],
}

impl Interposer for Counter {
    #[inline]
    fn precall(&mut self, method: u32) {
        if let Some(c) = self.calls.get_mut(method as usize) {
            *c += 1;
        }
    }
    #[inline]
    fn postcall(&mut self, _: u32) {}
    fn report(&self, names: &[&str], out: &mut dyn Write) {
        let _ = write!(out, "counter:");
        for (n, c) in names.iter().zip(self.calls) {
            let _ = write!(out, " {n}={c}");
        }
    }
}

/// One traced event: a method entered or left, at a time on the server's clock.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Event {
    pub method: u32,
    pub enter: bool,
    pub at: u64,
}

/// Keeps the last `TRACE` events in a ring (K42's trace buffer), numbered from the start.
pub struct Trace {
    ring: [Event; TRACE],
    /// Events so far.
    pub events: u64,
    clock: fn() -> u64,
}

pub const TRACE: usize = 64;

impl Trace {
    pub fn new(clock: fn() -> u64) -> Trace {
        Trace { ring: [Event::default(); TRACE], events: 0, clock }
    }
    fn log(&mut self, method: u32, enter: bool) {
        self.ring[self.events as usize % TRACE] = Event { method, enter, at: (self.clock)() };
        self.events += 1;
    }
    /// The last `n` events (at most `TRACE`), oldest first.
    pub fn last(&self, n: usize) -> impl Iterator<Item = Event> + '_ {
        let n = n.min(TRACE).min(self.events as usize) as u64;
        (self.events - n..self.events).map(|k| self.ring[k as usize % TRACE])
    }
}

impl Interposer for Trace {
    #[inline]
    fn precall(&mut self, method: u32) {
        self.log(method, true);
    }
    #[inline]
    fn postcall(&mut self, method: u32) {
        self.log(method, false);
    }
    fn report(&self, names: &[&str], out: &mut dyn Write) {
        let _ = write!(out, "trace: {} events, last:", self.events);
        for e in self.last(6) {
            let name = names.get(e.method as usize).copied().unwrap_or("?");
            let _ = write!(out, " {}{}@{}", if e.enter { '>' } else { '<' }, name, e.at);
        }
    }
}

/// Times calls per method (the server's clock, e.g. the TSC): calls and total time.
pub struct Timer {
    pub calls: [u64; METHODS],
    pub total: [u64; METHODS],
    started: u64,
    clock: fn() -> u64,
}

impl Timer {
    pub fn new(clock: fn() -> u64) -> Timer {
        Timer { calls: [0; METHODS], total: [0; METHODS], started: 0, clock }
    }
}

impl Interposer for Timer {
    #[inline]
    fn precall(&mut self, _: u32) {
        self.started = (self.clock)();
    }
    #[inline]
    fn postcall(&mut self, method: u32) {
        let t = (self.clock)().wrapping_sub(self.started);
        let k = method as usize;
        if k < METHODS {
            self.calls[k] += 1;
            self.total[k] += t;
        }
    }
    fn report(&self, names: &[&str], out: &mut dyn Write) {
        let _ = write!(out, "timer:");
        for ((n, c), t) in names.iter().zip(self.calls).zip(self.total) {
            let _ = write!(out, " {n}={c}x{}", t.checked_div(c).unwrap_or(0));
        }
    }
}

/// One interposer for many slots (a component with a slot per object, such as `files`'
/// sessions, one per open file): each slot gets a handle (`Shared::clone`), every call
/// through any of them reaches the one interposer, and it reports for them all. A
/// server runs one request at a time, so two handles are never inside it at once; were
/// they, the second call would pass uncounted rather than wait.
#[derive(Clone)]
pub struct Shared(Rc<RefCell<Box<dyn Interposer>>>);

impl Shared {
    pub fn new(i: Box<dyn Interposer>) -> Shared {
        Shared(Rc::new(RefCell::new(i)))
    }
}

impl Interposer for Shared {
    #[inline]
    fn precall(&mut self, method: u32) {
        if let Ok(mut i) = self.0.try_borrow_mut() {
            i.precall(method);
        }
    }
    #[inline]
    fn postcall(&mut self, method: u32) {
        if let Ok(mut i) = self.0.try_borrow_mut() {
            i.postcall(method);
        }
    }
    fn report(&self, names: &[&str], out: &mut dyn Write) {
        if let Ok(i) = self.0.try_borrow() {
            i.report(names, out);
        }
    }
}
