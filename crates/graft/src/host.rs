//! What a server gives the grafts it hosts, so that no graft can take it down: a clock,
//! a heap of its own for each graft (everything its engine allocates is charged to it,
//! and forgotten at once if the engine must be stopped half-way), and a guarded run
//! that stops a call past its time or a panic inside the engine. `graft_host::Host` is
//! the servers' (rt's arenas, watchdog and panic handler); `Direct` runs everything
//! plainly, for the host's tools and tests.

use alloc::boxed::Box;

/// A heap of its own for one graft, whose limit refuses an allocation past it. Dropping
/// it gives it back, whole.
pub trait GraftHeap {
    /// Bytes its graft holds now.
    fn used(&self) -> usize;
    /// The most it held at once.
    fn peak(&self) -> usize;
    /// Did the graft go past its limit since the last `clear_over`?
    fn over(&self) -> bool;
    fn clear_over(&self);
    /// Forget everything in it and give its memory back: its engine was stopped half-way
    /// and is forgotten (never dropped).
    fn reset(&mut self);
    /// Run `f` with this thread's allocations in it.
    fn enter(&self, f: &mut dyn FnMut());
}

/// Why the host stopped a call before it returned: the engine may be half-way
/// through anything and is never used again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Past its time.
    Time,
    /// The engine panicked.
    Panic,
}

pub trait Host {
    /// The clock (rdtsc in Scion).
    fn now(&self) -> u64;
    /// Clock ticks per millisecond.
    fn ticks_per_ms(&self) -> u64;
    /// A heap for a new graft, charged up to `limit` bytes; `None` when the server has
    /// none left.
    fn heap(&mut self, limit: usize) -> Option<Box<dyn GraftHeap>>;
    /// Run `f` with its allocations in `heap` (`None`: it allocates nothing), stopped
    /// when the clock passes `deadline` (`None`: no deadline) or when it panics.
    fn run(&mut self, heap: Option<&dyn GraftHeap>, deadline: Option<u64>, f: &mut dyn FnMut()) -> Result<(), Stopped>;
    /// Is the heap the current call runs in over its limit? An engine that cannot be
    /// stopped from outside asks this at each step (a script's progress callback).
    fn over_probe(&self) -> fn() -> bool;
    /// Grafts are loaded (or being loaded) here (`true`), or none any more (`false`):
    /// the watchdog need only watch while there are.
    fn armed(&mut self, _on: bool) {}
    /// The key signed code must be signed with here, if the table is to check
    /// signatures itself, in slices (`prep`); `None`: the engine checks them (`Extra`).
    fn key(&self) -> Option<[u8; 32]> {
        None
    }
    /// The most memory one graft may hold here (its arena's limit). The table takes
    /// it between `MIN_HEAP_LIMIT` and `HEAP_LIMIT`: a server may hold its
    /// grafts to less than the default (a small machine, a test that must fill an arena
    /// many times over), never to more.
    fn heap_limit(&self) -> usize {
        HEAP_LIMIT
    }
}

/// The most memory a graft may hold in its server: its code as the engine keeps it,
/// the engine's own structures and its data (a Wasm memory, script values).
pub const HEAP_LIMIT: usize = 4 << 20;
/// The least a server may hold each graft's memory to (`Host::heap_limit`): room for
/// an engine, a script's compiled code, a small verification.
pub const MIN_HEAP_LIMIT: usize = 256 << 10;

/// A host that isolates nothing: one heap for all, no deadline, a panic is a panic.
/// Its clock is the one it is given.
pub struct Direct {
    pub clock: fn() -> u64,
}

struct Shared;

impl GraftHeap for Shared {
    fn used(&self) -> usize {
        0
    }
    fn peak(&self) -> usize {
        0
    }
    fn over(&self) -> bool {
        false
    }
    fn clear_over(&self) {}
    fn reset(&mut self) {}
    fn enter(&self, f: &mut dyn FnMut()) {
        f()
    }
}

impl Host for Direct {
    fn now(&self) -> u64 {
        (self.clock)()
    }

    fn ticks_per_ms(&self) -> u64 {
        1_000_000
    }

    fn heap(&mut self, _limit: usize) -> Option<Box<dyn GraftHeap>> {
        Some(Box::new(Shared))
    }

    fn run(
        &mut self,
        _heap: Option<&dyn GraftHeap>,
        _deadline: Option<u64>,
        f: &mut dyn FnMut(),
    ) -> Result<(), Stopped> {
        f();
        Ok(())
    }

    fn over_probe(&self) -> fn() -> bool {
        || false
    }
}

/// A host for tests and tools on a machine with `std`: each graft's allocations are
/// counted against its limit (`testalloc`; the program declares `testalloc::Counting`
/// its global allocator), and a panic inside a call is caught (`Stopped::Panic`). It
/// cannot stop a call that runs too long: deadlines are the servers' watchdog's.
#[cfg(any(test, feature = "std"))]
pub mod counting {
    extern crate std;

    use super::{GraftHeap, Host, Stopped};
    use alloc::boxed::Box;
    use testalloc::Scope;

    pub struct CountedHeap(Scope);

    impl GraftHeap for CountedHeap {
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
            // The blocks stay with the system (a test leaks them); the count starts again.
            self.0.reset()
        }
        fn enter(&self, f: &mut dyn FnMut()) {
            self.0.within(f)
        }
    }

    /// The counting host; its clock is the one it is given.
    pub struct CountingHost {
        pub clock: fn() -> u64,
    }

    impl Host for CountingHost {
        fn now(&self) -> u64 {
            (self.clock)()
        }

        fn ticks_per_ms(&self) -> u64 {
            1_000_000
        }

        fn heap(&mut self, limit: usize) -> Option<Box<dyn GraftHeap>> {
            Some(Box::new(CountedHeap(Scope::new(limit)?)))
        }

        fn run(
            &mut self,
            heap: Option<&dyn GraftHeap>,
            _deadline: Option<u64>,
            f: &mut dyn FnMut(),
        ) -> Result<(), Stopped> {
            let mut r = Ok(());
            let mut guarded =
                || r = std::panic::catch_unwind(core::panic::AssertUnwindSafe(&mut *f)).map_err(|_| Stopped::Panic);
            match heap {
                Some(h) => h.enter(&mut guarded),
                None => guarded(),
            }
            r
        }

        fn over_probe(&self) -> fn() -> bool {
            testalloc::current_over
        }
    }
}
