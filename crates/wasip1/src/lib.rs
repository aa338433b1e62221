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

/// The FNV-1a hash of a module's bytes, fed in pieces ([`aot_name`]).
#[derive(Clone, Copy, Debug)]
pub struct ModuleHash(pub u64);

impl Default for ModuleHash {
    fn default() -> Self {
        ModuleHash(0xcbf2_9ce4_8422_2325)
    }
}

impl ModuleHash {
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The most bytes of a file's stem in [`aot_name`].
pub const AOT_STEM_MAX: usize = 24;

/// The boot image's name for the program compiled ahead of time from the module in file
/// `path` whose bytes hash to `hash`: the file's stem (its name less `.wasm`, at most
/// [`AOT_STEM_MAX`] bytes, cut at a character) and the hash in hex, as
/// `demo-0123456789abcdef`. The shell runs it for a file only when the file's bytes
/// are the very module it was compiled from; xtask names it so.
pub fn aot_name(path: &str, hash: ModuleHash) -> alloc::string::String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.strip_suffix(".wasm").unwrap_or(name);
    let mut end = stem.len().min(AOT_STEM_MAX);
    while !stem.is_char_boundary(end) {
        end -= 1;
    }
    alloc::format!("{}-{:016x}", &stem[..end], hash.0)
}
