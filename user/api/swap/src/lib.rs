//! The reconfiguration protocol (K42's online reconfiguration, Scion's form): the same
//! requests at every server whose components sit in `swap::Slot`s (its object
//! translation table) — `cache` for its replacement policy; more as they come. The
//! shell's `swap list`, `swap SERVER.COMPONENT IMPL` and `interpose SERVER.COMPONENT
//! KIND` speak it.
//!
//! Reconfiguring a component changes it for every client, so only programs of the
//! system's principals (0 and 1: servers, the shell) may swap or interpose; anyone
//! holding the server's capability may list.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use abi::Error;
use alloc::boxed::Box;
use alloc::string::String;
use rt::ipc::{self, Msg};
use rt::server::{Answer, Badge};
use swap::interposers::{Counter, Timer, Trace};
use swap::Interposer;

pub const NONE: u64 = 0;
pub const COUNTER: u64 = 1;
pub const TRACE: u64 = 2;
pub const TIMER: u64 = 3;
pub const KINDS: [&str; 4] = ["none", "counter", "trace", "timer"];

rt::protocol! {
    /// A live update's requests to the old server.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Update in rt::labels::SWAP;
    client update {
        use rt::ipc::{self, Msg};

        /// (the new program of a live update) Ask the old server (`PEER`) for its state in
        /// one of `formats`: its answer (MR2 = the format, then the server's own words) and
        /// the length of the state, received into `buf`.
        pub fn take_state(formats: u64, buf: &mut [u8]) -> Result<(Msg, usize), abi::Error> {
            ipc::set_recv_buffer(buf);
            let m = state(abi::cap::PEER, formats)?;
            let n = if m.tag().has_string() { ipc::received_string_len().min(buf.len()) } else { 0 };
            Ok((m, n))
        }
    };
    requests {
        /// Live update of a whole server (root's `proto::UPDATE`), the server's half:
        /// (from root) MR1 = the program id of the new program that will ask for the state.
        UPDATE_BEGIN = rt::proto::update::BEGIN, fn begin(successor)
            => /// (root) The program that will take the state.
            Begin { successor: u64 };
        /// (from that program) MR1 = the state formats it reads (a mask). The server makes what
        /// it has durable, answers MR2 = the format (the highest common bit), string = its state
        /// in it, and capability items the state names; from then on it receives only from root
        /// until the update ends. `BadState` (no common format), `NoRights` (not the program
        /// root named).
        UPDATE_STATE = 0xf4, fn state(formats)
            => /// (the successor) The formats it reads.
            State { formats: u64 };
        /// (from root) The update failed: carry on serving.
        UPDATE_ABORT = rt::proto::update::ABORT, fn abort()
            => /// (root) The update failed.
            Abort;
        /// (from root, after the new program took the state) Grant root what the state names
        /// and the new program cannot have from the state itself (at most one item of
        /// capabilities, one of memory): root moves the endpoint, ends this server and grants
        /// them to the new program. Memory must be a run of frames this server has from sigma0,
        /// answered with MR2 = its physical address: root makes them the new program's there
        /// (`sigma0_api::MOVE`), or they would be taken back — and every mapping of them
        /// revoked, its clients' too — when this server ends.
        UPDATE_COMMIT = rt::proto::update::COMMIT, fn commit()
            => /// (root) The successor took the state: grant root what it names.
            Commit;
    }
}

pub fn is_update_label(l: u64) -> bool {
    matches!(l, UPDATE_BEGIN | UPDATE_STATE | UPDATE_ABORT | UPDATE_COMMIT)
}

/// The old server's side of a live update, the part every server shares: who may take
/// the state, whether it was taken (then the server hears only root), and who may ask
/// what.
#[derive(Debug, Default)]
pub struct Handing {
    successor: Option<u32>,
    passive: bool,
}

/// What the server does with an update request `Handing` let through.
// Returned once per update request and matched at once: boxing the answer would cost an
// allocation for nothing.
#[allow(clippy::large_enum_variant)]
pub enum Step {
    /// Answer this (the request was wrong, or needed nothing of the server).
    Answer(Answer),
    /// Hand the state to the successor in `format`, then call `Handing::handed`.
    State { format: u32 },
    /// Answer root with the items the state names.
    Commit,
    /// The update failed: carry on serving (what root took comes back as items).
    Aborted,
}

impl Handing {
    /// The state went to the successor: hear only root until the update ends.
    pub fn passive(&self) -> bool {
        self.passive
    }

    pub fn handed(&mut self) {
        self.passive = true;
    }

    /// Check `u` from `from`; the server reads formats `formats`.
    pub fn step(&mut self, from: Badge, u: Update, formats: swap::Formats) -> Step {
        match u {
            Update::Begin { successor } if from.is_root() && !self.passive && successor <= u32::MAX as u64 => {
                self.successor = Some(successor as u32);
                Step::Answer(Answer::ok(&[]))
            }
            Update::Abort if from.is_root() => {
                *self = Handing::default();
                Step::Aborted
            }
            Update::Commit if from.is_root() && self.passive => Step::Commit,
            Update::State { formats: theirs } if self.successor == Some(from.program()) && !self.passive => {
                match swap::negotiate(formats, theirs) {
                    Some(format) => Step::State { format },
                    None => {
                        ipc::set_send_string(b"no state format both programs know");
                        Step::Answer(Answer::Reply(Msg::new(0, &[Error::BadState as u64]).with_string()))
                    }
                }
            }
            _ => Step::Answer(Answer::err(Error::NoRights)),
        }
    }
}

pub fn is_swap_label(l: u64) -> bool {
    (LIST..=INTERPOSE).contains(&l)
}

rt::protocol! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Request in rt::labels::SWAP;
    client client {
        use super::*;

        /// The server's components, one line each.
        pub fn list(srv: u64, buf: &mut [u8]) -> Result<usize, Error> {
            ipc::set_recv_buffer(buf);
            list_raw(srv)?;
            Ok(ipc::received_string_len().min(buf.len()))
        }

        /// Swap: (format, the mediator's cycles); `BadState` with the reason in `why`. (Not
        /// `swap_raw`: the reason is read from the answer, which a stub's error drops.)
        pub fn swap(srv: u64, component: usize, imp: usize, why: &mut [u8]) -> Result<(u64, u64), (Error, usize)> {
            ipc::set_recv_buffer(why);
            let mut m = Msg::new(SWAP, &[component as u64, imp as u64]);
            match rt::server::request(srv, &mut m) {
                Ok(()) => Ok((m.word(2), m.word(3))),
                Err(e) => Err((e, if m.tag().has_string() { ipc::received_string_len().min(why.len()) } else { 0 })),
            }
        }

        pub fn interpose(srv: u64, component: usize, kind: u64) -> Result<(), Error> {
            interpose_raw(srv, component as u64, kind)
        }

        /// (the new program of a live update) Ask the old server (`PEER`) for its state in
        /// one of `formats`: its answer (MR2 = the format, then the server's own words) and
        /// the length of the state, received into `buf`.
        pub fn take_state(formats: u64, buf: &mut [u8]) -> Result<(Msg, usize), Error> {
            super::update::take_state(formats, buf)
        }

        /// Was this program started as the new program of a live update (`update` among
        /// its arguments)?
        pub fn updating() -> bool {
            rt::args().split(' ').any(|w| w == "update")
        }

        /// (the new program of a live update) It cannot take over: root lets the old
        /// server carry on. Returns `code`, for `main` to return.
        pub fn refuse_update(updating: bool, code: i32) -> i32 {
            if updating {
                let _ = rt::env::update_done(false, [abi::fpage::Fpage(0); 3]);
            }
            code
        }
    };
    requests {
        /// Reply string: one line per component, in table order (its number is the line's):
        /// "NAME IMPL IMPL1,IMPL2,… swaps=N aborts=N INTERPOSER", INTERPOSER `-` or its report.
        LIST = 0xf0, fn list_raw() => List;
        /// MR1 = component, MR2 = implementation (its place in the list's line). The swap runs
        /// to its end before the reply: MR2 = the state format used, MR3 = cycles the mediator
        /// took (forward, block and transfer), or `BadState` with the reason as the string
        /// (the old component stays).
        SWAP = 0xf1, fn swap_raw(component, imp) -> [format, cycles]
            => Swap { component: usize, imp: usize }
            = Request::Swap { component: saturated(component), imp: saturated(imp) };
        /// MR1 = component, MR2 = `NONE`, `COUNTER`, `TRACE` or `TIMER`: attach (replacing any)
        /// or detach an interposer.
        INTERPOSE = 0xf2, fn interpose_raw(component, kind) -> []
            => Interpose { component: usize, kind: u64 }
            = Request::Interpose { kind: interposer_kind(kind)?, component: saturated(component) };
    }
}

/// A word as a `usize` (the largest if it does not fit).
fn saturated(w: u64) -> usize {
    w.min(usize::MAX as u64) as usize
}

/// An interposer kind (`NONE` ..= `TIMER`), else `InvalidArg`.
fn interposer_kind(kind: u64) -> Result<u64, Error> {
    if kind > TIMER {
        Err(Error::InvalidArg)
    } else {
        Ok(kind)
    }
}

/// A server's table of swappable components, as the protocol sees it.
pub trait Components {
    /// How many there are.
    fn count(&self) -> usize;
    /// Component `k`'s line (without the newline).
    fn describe(&self, k: usize, out: &mut String);
    /// Swap component `k` to implementation `imp` and run the swap to its end: the
    /// format the state moved in, or why the old one stays. `InvalidArg` for an
    /// implementation it does not have.
    fn swap(&mut self, k: usize, imp: usize) -> Result<u32, Result<&'static str, Error>>;
    /// Attach `i` to component `k` (None: detach); `Unsupported` for a component that
    /// takes no interposer.
    fn interpose(&mut self, k: usize, i: Option<Box<dyn Interposer>>) -> Result<(), Error>;
}

/// Answer one request of the protocol; `text` keeps the reply's string until the kernel
/// has copied it, `clock` is the server's (the TSC).
pub fn serve(c: &mut dyn Components, from: Badge, req: Request, text: &mut String, clock: fn() -> u64) -> Answer {
    if !matches!(req, Request::List) && from.principal() > 1 {
        return Answer::err(Error::NoRights);
    }
    match req {
        Request::List => {
            text.clear();
            for k in 0..c.count() {
                c.describe(k, text);
                text.push('\n');
            }
            ipc::set_send_string(text.as_bytes());
            Answer::Reply(rt::server::ok_msg(&[]).with_string())
        }
        Request::Swap { component, .. } | Request::Interpose { component, .. } if component >= c.count() => {
            Answer::err(Error::NotFound)
        }
        Request::Swap { component, imp } => {
            let t = clock();
            match c.swap(component, imp) {
                Ok(format) => Answer::ok(&[format as u64, clock().wrapping_sub(t)]),
                Err(Err(e)) => Answer::err(e),
                Err(Ok(why)) => {
                    text.clear();
                    text.push_str(why);
                    ipc::set_send_string(text.as_bytes());
                    Answer::Reply(Msg::new(0, &[Error::BadState as u64]).with_string())
                }
            }
        }
        Request::Interpose { component, kind } => {
            let i: Option<Box<dyn Interposer>> = match kind {
                COUNTER => Some(Box::new(Counter::default())),
                TRACE => Some(Box::new(Trace::new(clock))),
                TIMER => Some(Box::new(Timer::new(clock))),
                _ => None,
            };
            Answer::result(c.interpose(component, i))
        }
    }
}

/// The common part of a component's line: swaps, aborts, the interposer's report.
pub fn describe_slot<T: ?Sized + swap::Component>(s: &swap::Slot<T>, methods: &[&str], out: &mut String) {
    use core::fmt::Write;
    let _ = write!(out, "swaps={} aborts={} ", s.swaps, s.aborts);
    match s.interposer() {
        Some(i) => i.report(methods, out),
        None => out.push('-'),
    }
}
