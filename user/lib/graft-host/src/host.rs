//! The servers' `graft::Host`: each graft's engine lives in an arena of its own
//! (`rt::heap::ArenaHeap`, charged up to the graft's limit), and every load and call
//! runs guarded (`rt::guard`): the watchdog stops a call past its deadline, the panic
//! handler leaves a call whose engine panicked, and the table then forgets the engine
//! with its arena. Together: no graft, and no engine's bug, takes the server down.

use alloc::boxed::Box;
use graft::host::{GraftHeap, Host, Stopped};
use rt::heap::ArenaHeap;

/// How often the watchdog looks at a call under way.
const WATCH_US: u64 = 20_000;

struct Arena(ArenaHeap);

impl GraftHeap for Arena {
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
        self.0.within(f)
    }
}

struct ServerHost {
    ticks_per_ms: u64,
    /// The server's argument `graft_heap=KIB`, in bytes (`graft::table::HEAP_LIMIT`
    /// without it; the table keeps it between its least and that).
    heap_limit: usize,
}

impl Host for ServerHost {
    fn now(&self) -> u64 {
        rt::sys::rdtsc()
    }

    fn ticks_per_ms(&self) -> u64 {
        self.ticks_per_ms
    }

    fn heap(&mut self, limit: usize) -> Option<Box<dyn GraftHeap>> {
        Some(Box::new(Arena(ArenaHeap::new(limit)?)))
    }

    fn run(&mut self, heap: Option<&dyn GraftHeap>, deadline: Option<u64>, f: &mut dyn FnMut()) -> Result<(), Stopped> {
        let mut r = Ok(());
        let mut guarded = || {
            r = rt::guard::run(deadline.unwrap_or(u64::MAX), &mut *f).map_err(|s| match s {
                rt::guard::Stop::Time => Stopped::Time,
                rt::guard::Stop::Panic => Stopped::Panic,
            })
        };
        // The arena is entered outside the guarded call: a call left half-way comes back
        // to `guard::run`, and the arena is left as usual.
        match heap {
            Some(h) => h.enter(&mut guarded),
            None => guarded(),
        }
        r
    }

    fn over_probe(&self) -> fn() -> bool {
        rt::heap::current_over
    }

    fn armed(&mut self, on: bool) {
        rt::guard::arm(on)
    }

    fn heap_limit(&self) -> usize {
        self.heap_limit
    }

    /// The build's key: the table checks a signature in slices, the engine then not again.
    fn key(&self) -> Option<[u8; 32]> {
        crate::key()
    }
}

/// The host for a server's graft table: the engines warmed up on the server's own heap
/// first (statics they fill once must not lie in a graft's arena), and the watchdog
/// started. A server's argument `graft_heap=KIB` holds each graft's memory to less
/// than `graft::table::HEAP_LIMIT` (`graft_arena_1000` fills arenas 24,000 times).
pub fn host() -> Box<dyn Host> {
    graft::engine::warm_up();
    rt::guard::watch(WATCH_US);
    let ticks_per_ms = rt::sys::kernel_info().tsc_per_ms.max(1);
    // Compiled code runs at the machine's speed: no legitimate call of it comes near
    // the limit of a call another client waits on, at any point.
    crate::CALL_TICKS
        .store(graft::table::WAIT_CALL_MS.saturating_mul(ticks_per_ms), core::sync::atomic::Ordering::Relaxed);
    let heap_limit = rt::args()
        .split(' ')
        .find_map(|a| a.strip_prefix("graft_heap=")?.parse::<usize>().ok())
        .map_or(graft::table::HEAP_LIMIT, |kib| kib.saturating_mul(1024));
    Box::new(ServerHost { ticks_per_ms, heap_limit })
}
