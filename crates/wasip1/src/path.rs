//! Confinement: a path a program names is resolved below the directory its descriptor
//! stands for, and nothing above that directory is reachable — as WASI's capability
//! model (and wasmtime's cap-std) requires.
//!
//! Scion's filesystems have no symbolic links, so the resolution is lexical and exact:
//! `.` and empty segments go, `..` takes one segment back and is refused
//! (`ENOTCAPABLE`) when it would climb above the descriptor's directory — even when it
//! comes back down (`../d/x` from `d`), as cap-std refuses it. An absolute path is
//! refused the same way (wasi-libc resolves a program's absolute paths against its
//! preopened directories before they reach the runner). A NUL byte is `EILSEQ`; a
//! segment longer than the filesystem's names, or a path longer than [`PATH_MAX`], is
//! `ENAMETOOLONG`.

use crate::errno::{Errno, ILSEQ, NAMETOOLONG, NOTCAPABLE};
use alloc::string::String;

/// The longest path a program may pass, in bytes (POSIX's `PATH_MAX`).
pub const PATH_MAX: usize = 4096;

/// A path resolved below a directory.
#[derive(Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The Scion path: the directory's, then the program's segments.
    pub path: String,
    /// The program's path ended with `/` (or was `.`-like): it must name a directory.
    pub dir_only: bool,
    /// The path names the directory itself (`.`, `a/..`).
    pub is_base: bool,
}

/// Resolve `rel` below the Scion directory `base` (absolute, normalised: `/` or
/// `/a/b`). `name_max` is the filesystem's longest name.
pub fn resolve(base: &str, rel: &str, name_max: usize) -> Result<Resolved, Errno> {
    if rel.len() > PATH_MAX {
        return Err(NAMETOOLONG);
    }
    if rel.contains('\0') {
        return Err(ILSEQ);
    }
    if rel.starts_with('/') {
        return Err(NOTCAPABLE);
    }
    let mut depth = 0usize;
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => depth = depth.checked_sub(1).ok_or(NOTCAPABLE)?,
            s if s.len() > name_max => return Err(NAMETOOLONG),
            _ => depth += 1,
        }
    }
    let inner = pathnorm::normalise(rel.split('/')).ok_or(NOTCAPABLE)?;
    let path = match (base, inner.as_str()) {
        (b, "/") => String::from(b),
        ("/", i) => String::from(i),
        (b, i) => {
            let mut p = String::from(b);
            p.push_str(i);
            p
        }
    };
    let last = rel.rsplit('/').next().unwrap_or("");
    Ok(Resolved { dir_only: rel.ends_with('/') || last == "." || last == "..", is_base: inner == "/", path })
}

/// The last segment of Scion path `p` (its name in its directory).
pub fn name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or("")
}
