//! Grafts (the VINO seed): policy code a program loads into a running server at a
//! graft point, in one of several extension technologies, each safe in its own way.
//! This crate holds what every server hosting a graft point shares and the host can
//! test: the graft file format (`format`), the points and the answers they accept
//! (`point`), one engine per technology (`engine`, each behind a cargo feature so a
//! server links only those it allows), the call as a transaction with a budget and an
//! undo copy of the graft's state (`Graft::call`), and the table of loaded grafts a
//! server keeps, by owner (`table`); and the upcall's two messages (`upcall`).
#![no_std]
// Unsafe code in two places only: the calls into eBPF compiled by the JIT
// (`engine::bpf::jit`) and into WebAssembly compiled by wasm2c and clang (`sfi`), which
// allow it for themselves.
#![deny(unsafe_code)]

extern crate alloc;

pub mod engine;
pub mod format;
pub mod host;
pub mod point;
pub mod prep;
#[cfg(feature = "sfi")]
pub mod sfi;
pub mod share;
#[cfg(feature = "signed")]
pub mod signed;
pub mod table;
pub mod upcall;
pub mod vouch;

pub use engine::{Abort, Engine};
pub use format::{GraftFile, Tech};
pub use host::Host;
pub use point::Point;
pub use table::{Graft, Table};

/// Why a graft was not loaded (the server answers the loader with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadError {
    /// The file is not a well-formed graft file; says which part.
    Format(&'static str),
    /// The code was refused by the technology's checker (verifier, validator).
    Refused(&'static str),
    /// The technology is not one this server runs.
    Unsupported,
    /// A limit: too many grafts, a state or code too big, a staging area too big.
    Limit(&'static str),
    /// The point already has a graft from this owner (unload it first).
    Busy,
    /// Not now: the loader must wait (its share of the server's time is spent, or its
    /// grafts misbehaved at this point: a back-off); says which.
    Later(&'static str),
}

impl LoadError {
    pub fn what(&self) -> &'static str {
        match self {
            LoadError::Format(s) | LoadError::Refused(s) | LoadError::Limit(s) | LoadError::Later(s) => s,
            LoadError::Unsupported => "technology not supported here",
            LoadError::Busy => "the point has a graft of this owner already",
        }
    }
}

#[cfg(test)]
#[global_allocator]
static COUNTING: testalloc::Counting = testalloc::Counting;
