//! The upcall technology (VINO's C in a user-level server): the graft's code runs in a
//! program of the owner's, and each call is one IPC call from the server with the
//! graft point to a thread of that program. Isolation is the address space; the budget
//! is a timeout on the call (a server that does not answer in time is over budget);
//! the graft's state stays in its own program, so the undo copy has nothing to undo
//! there. The server side is an `Engine` built from the capability `LOAD` brought; the
//! graft side is `serve`; the two messages are `graft::upcall`'s.

use abi::fpage::Fpage;
use abi::Error;
use graft::engine::{Abort, Engine};
use graft::upcall as wire;
use graft::Point;
use rt::ipc::{self, Msg};

/// The call's label (the messages are `graft::upcall`'s).
pub const UPCALL: u64 = wire::UPCALL;
/// The longest a call may take (µs), whatever the budget says.
pub const MAX_TIMEOUT_US: u64 = 100_000;

/// The kernel's clock rate, asked once.
fn tsc_per_ms() -> u64 {
    use core::sync::atomic::{AtomicU64, Ordering};
    static PER_MS: AtomicU64 = AtomicU64::new(0);
    let mut v = PER_MS.load(Ordering::Relaxed);
    if v == 0 {
        v = rt::sys::kernel_info().tsc_per_ms.max(1);
        PER_MS.store(v, Ordering::Relaxed);
    }
    v
}

pub struct Upcall {
    thread: u64,
    point: Point,
    /// No state in the server: the program keeps its own.
    state: [u8; 0],
}

impl Upcall {
    /// An upcall graft calling the thread whose capability is in slot `thread` (the
    /// engine owns the slot and frees it when dropped).
    pub fn new(thread: u64, point: Point) -> Upcall {
        Upcall { thread, point, state: [] }
    }
}

impl Drop for Upcall {
    fn drop(&mut self) {
        rt::free_slot(self.thread);
    }
}

impl Engine for Upcall {
    fn state(&mut self) -> &mut [u8] {
        &mut self.state
    }

    fn call(&mut self, input: &[u8], budget: u64) -> Result<u64, Abort> {
        // One register-only call with the input as its string (no 64-word message on
        // either side; a string of up to 4 KiB, no items, no timeouts: the kernel's
        // fastpath both ways). The budget (µs here, at most MAX_TIMEOUT_US) is kept by
        // the server's watchdog, which leaves the call past it (the kernel ends the IPC).
        let us = budget.clamp(1, MAX_TIMEOUT_US);
        let ticks = us.saturating_mul(tsc_per_ms()) / 1000;
        // Nothing but a word comes back: no receive buffer (`call_regs_string` offers
        // none), no windows (a graft program must not drop a capability or a mapping
        // into the server).
        ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
        let (thread, point) = (self.thread, self.point as u64);
        match rt::guard::run_for(ticks, || ipc::call_regs_string(thread, wire::call_tag(), point, input, &mut [])) {
            Ok((0, tag, w1, _)) => wire::answer(tag, w1),
            Ok(_) => Err(Abort::Broken),
            Err(_) => Err(Abort::Budget),
        }
    }

    fn allocates(&self) -> bool {
        false
    }

    fn guards_itself(&self) -> bool {
        true
    }

    fn reset(&mut self) -> Result<(), Abort> {
        // A graft program that is gone cannot be called again.
        rt::sys::cap_info(self.thread).map(|_| ()).map_err(|_| Abort::Broken)
    }
}

/// The graft side: answer upcalls on this thread forever with `f(point, input)`, each
/// answer sent with the wait for the next call (register-only, the input landing in a
/// buffer of this thread's). A message that is not an upcall is refused.
pub fn serve(f: fn(Point, &[u8]) -> u64) -> ! {
    let mut buf = alloc::vec![0u8; Point::Stream.max_input()];
    let mut reply: Option<(u64, u64)> = None;
    loop {
        let (e, _, tag, w1, len) = match reply {
            Some((t, w)) => ipc::reply_regs_wait_string(t, w, &mut buf),
            None => ipc::recv_regs_string(&mut buf),
        };
        if e != 0 {
            // The caller is gone (stopped past its time): wait for the next call.
            reply = None;
            continue;
        }
        let n = if wire::has_string(tag) { len.min(buf.len()) } else { 0 };
        reply = Some(match wire::request(tag, w1) {
            Some(p) => (wire::answer_tag(), f(p, &buf[..n])),
            None => (wire::refused_tag(), Error::Malformed as u64),
        });
    }
}

/// The capability a graft `LOAD` brings: an upcall graft's thread. A server with graft
/// points opens its receive window for capabilities at `window()`, shows every message
/// it receives to `arrived`, builds upcall engines with `engine`, and calls `done` after
/// each graft request (a capability the request did not use is freed). When the server
/// has no capability slot left, no window is open (a sender's capability is refused,
/// `NoWindow`) until one is free again: the server goes on.
pub struct Inbox {
    cap_in: Option<u64>,
    received: Option<u64>,
}

impl Default for Inbox {
    fn default() -> Inbox {
        Inbox::new()
    }
}

impl Inbox {
    pub fn new() -> Inbox {
        Inbox { cap_in: rt::try_alloc_slot(), received: None }
    }

    /// The receive window for capabilities (none while no slot is free).
    pub fn window(&self) -> Fpage {
        self.cap_in.map_or(Fpage(0), |slot| Fpage::caps(slot, 0, abi::rights::ALL))
    }

    /// After a message arrived: if a capability came with it, the next one lands in a
    /// fresh slot. A `LOAD`'s is kept for `engine`; any other's slot is returned for
    /// the server to take or free.
    pub fn arrived(&mut self, m: &Msg) -> Option<u64> {
        if m.items() == 0 || m.tag().is_fault() {
            if self.cap_in.is_none() {
                self.cap_in = rt::try_alloc_slot();
            }
            return None;
        }
        let got = core::mem::replace(&mut self.cap_in, rt::try_alloc_slot())?;
        if m.label() == crate::LOAD {
            if let Some(old) = self.received.replace(got) {
                rt::free_slot(old);
            }
            return None;
        }
        Some(got)
    }

    /// The engine for an upcall graft (`None` for other technologies).
    pub fn engine(
        &mut self,
        f: &graft::GraftFile<'_>,
    ) -> Option<Result<alloc::boxed::Box<dyn Engine>, graft::LoadError>> {
        (f.tech == graft::Tech::Upcall).then(|| match self.received.take() {
            Some(slot) => Ok(alloc::boxed::Box::new(Upcall::new(slot, f.point)) as alloc::boxed::Box<dyn Engine>),
            None => Err(graft::LoadError::Refused("an upcall graft comes with its thread's capability")),
        })
    }

    /// After a graft request: a capability it brought and did not use goes.
    pub fn done(&mut self) {
        if let Some(slot) = self.received.take() {
            rt::free_slot(slot);
        }
    }
}
