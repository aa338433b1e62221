//! One normaliser for every path a client hands a server (httpd's request targets,
//! ftpd's arguments): security code, so it is written once. The segments of a path,
//! taken in order, become an absolute path with no empty, `.` or `..` segments; a `..`
//! that would climb above the root makes the whole path refused, never clamped to the
//! root (a client asking for `/../etc` gets an error, not `/etc`). Decoding (percent
//! escapes, NUL checks) is the protocol's and comes first.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;

/// The absolute, normalised path that `segments` name from the root, or None when a
/// `..` climbs above the root. No segments (or only empty and `.` ones) name the root,
/// `/`.
pub fn normalise<'a>(segments: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for seg in segments {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    let mut out = String::new();
    for p in &parts {
        out.push('/');
        out.push_str(p);
    }
    if out.is_empty() {
        out.push('/');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(p: &str) -> Option<String> {
        normalise(p.split('/'))
    }

    #[test]
    fn dots_and_empty_segments_go() {
        assert_eq!(of("/a/./b//c/").as_deref(), Some("/a/b/c"));
        assert_eq!(of("/a/b/../c").as_deref(), Some("/a/c"));
        assert_eq!(of("").as_deref(), Some("/"));
        assert_eq!(of("/").as_deref(), Some("/"));
        assert_eq!(of("/a/..").as_deref(), Some("/"));
        assert_eq!(of("a/b").as_deref(), Some("/a/b"), "relative segments start at the root");
    }

    #[test]
    fn climbing_above_the_root_is_refused_not_clamped() {
        assert_eq!(of("/.."), None);
        assert_eq!(of("/a/../.."), None);
        assert_eq!(of("/../etc/passwd"), None);
        assert_eq!(of("/a/../../a"), None, "refused even when it would come back down");
        assert_eq!(of("...").as_deref(), Some("/..."), "three dots are a name");
    }
}
