//! The upcall technology (VINO's C in a user-level server): the graft's code runs in a
//! program of the owner's, and each call is one IPC call from the server with the
//! graft point to a thread of that program. Isolation is the address space; the budget
//! is a timeout on the call (a server that does not answer in time is over budget);
//! the graft's state stays in its own program, so the undo copy has nothing to undo
//! there. The server side is an `Engine` built from the capability `LOAD` brought; the
//! graft side is `serve`.

use abi::fpage::Fpage;
use abi::Error;
use graft::engine::{Abort, Engine};
use graft::Point;
use rt::ipc::{self, Msg};

/// Server → graft program: MR1 = point, MR2 = input bytes, the input as the string (or,
/// from older servers, as words after MR2: `MAX_WORDS` of them at most). Reply MR1 = 0,
/// MR2 = the answer.
pub const UPCALL: u64 = 0xef;
pub const MAX_WORDS: usize = 32;
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
        // The input goes as the message's string and the rest in registers, so the call
        // and its answer take the kernel's fastpath (a string of up to 4 KiB, no items, no
        // timeouts). The budget (µs here, at most MAX_TIMEOUT_US) is kept by the server's
        // watchdog, which leaves the call past it (the kernel ends the IPC).
        let us = budget.clamp(1, MAX_TIMEOUT_US);
        let ticks = us.saturating_mul(tsc_per_ms()) / 1000;
        ipc::set_send_string(input);
        let mut m = Msg::new(UPCALL, &[self.point as u64, input.len() as u64]).with_string();
        // Nothing but words comes back: no receive buffer, no windows (a graft program
        // must not drop a capability or a mapping into the server).
        ipc::set_recv_buffer(&mut []);
        ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
        match rt::guard::run_for(ticks, || ipc::call(self.thread, &mut m, ipc::FOREVER)) {
            Ok(Ok(_)) if m.word(1) == 0 && m.words().len() >= 2 => Ok(m.word(2)),
            Ok(Ok(_)) => Err(Abort::Trap),
            Ok(Err(_)) => Err(Abort::Broken),
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

/// The graft side: answer upcalls on this thread forever with `f(point, input)`.
pub fn serve(f: fn(Point, &[u8]) -> u64) -> ! {
    let mut buf = alloc::vec![0u8; graft::Point::Stream.max_input()];
    let mut m = Msg::empty();
    let mut replying = false;
    loop {
        ipc::set_recv_buffer(&mut buf);
        let r = if replying { ipc::reply_wait(ipc::RECV_ANY, &mut m, ipc::FOREVER) } else { ipc::recv(ipc::RECV_ANY, &mut m, ipc::FOREVER) };
        if r.is_err() {
            replying = false;
            continue;
        }
        let w = m.words();
        let answer = match (m.label(), w.len() >= 2) {
            (UPCALL, true) => {
                let (point, len) = (Point::from_u8(w[0] as u8), w[1] as usize);
                let mut input = [0u8; 8 * MAX_WORDS];
                let bytes: &[u8] = if m.tag().has_string() {
                    &buf[..ipc::received_string_len().min(buf.len())]
                } else {
                    let n = len.min(8 * MAX_WORDS).min(8 * (w.len() - 2));
                    for (k, x) in w[2..].iter().enumerate().take(n.div_ceil(8)) {
                        input[8 * k..8 * k + 8].copy_from_slice(&x.to_le_bytes());
                    }
                    &input[..n]
                };
                point.map(|p| Msg::new(0, &[0, f(p, bytes)]))
            }
            _ => None,
        };
        m = answer.unwrap_or_else(|| Msg::new(0, &[Error::Malformed as u64]));
        replying = true;
    }
}

/// The capability a graft `LOAD` brings: an upcall graft's thread. A server with graft
/// points opens its receive window for capabilities at `window()`, shows every message
/// it receives to `arrived`, builds upcall engines with `engine`, and calls `done` after
/// each graft request (a capability the request did not use is freed).
pub struct Inbox {
    cap_in: u64,
    received: Option<u64>,
}

impl Default for Inbox {
    fn default() -> Inbox {
        Inbox::new()
    }
}

impl Inbox {
    pub fn new() -> Inbox {
        Inbox { cap_in: rt::alloc_slot(), received: None }
    }

    /// The receive window for capabilities.
    pub fn window(&self) -> Fpage {
        Fpage::caps(self.cap_in, 0, 7)
    }

    /// After a message arrived: if a capability came with it, the next one lands in a
    /// fresh slot. A `LOAD`'s is kept for `engine`; any other's slot is returned for
    /// the server to take or free.
    pub fn arrived(&mut self, m: &Msg) -> Option<u64> {
        if m.items() == 0 || m.tag().is_fault() {
            return None;
        }
        let got = core::mem::replace(&mut self.cap_in, rt::alloc_slot());
        if m.label() == crate::LOAD {
            if let Some(old) = self.received.replace(got) {
                rt::free_slot(old);
            }
            return None;
        }
        Some(got)
    }

    /// The engine for an upcall graft (`None` for other technologies).
    pub fn engine(&mut self, f: &graft::GraftFile<'_>) -> Option<Result<alloc::boxed::Box<dyn Engine>, graft::LoadError>> {
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
