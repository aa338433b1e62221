//! WASI preview 1 (`wasi_snapshot_preview1`) for Scion: what the runner needs that does
//! not depend on the engine or on Scion's servers, so that it is tested on the host.
//!
//! - [`errno`]: the ABI's error numbers and the mapping from Scion's one numbering
//!   ([`abi::Error`]) to the errno a POSIX program expects.
//! - [`mem`]: the program's linear memory as the calls see it: every pointer and length
//!   checked (an access outside is `EFAULT`, never a read of the runner's own memory).
//! - [`path`]: confinement: a path is resolved below the directory its descriptor names,
//!   never above it (`..`, absolute paths, NUL bytes and overlong names refused).
//! - [`host`]: what the runner asks of Scion (`files`, the console, clocks, randomness,
//!   sockets), as a trait.
//! - [`ctx`]: the descriptor table and every preview-1 call, over a [`mem::Mem`] and a
//!   [`host::Host`]; the engine only moves arguments.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod ctx;
pub mod errno;
pub mod host;
pub mod mem;
pub mod path;

#[cfg(test)]
mod tests;

/// The import module every preview-1 program names.
pub const MODULE: &str = "wasi_snapshot_preview1";
