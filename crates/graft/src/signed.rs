//! Signed safe Rust (VINO's Modula-3: code a trusted compiler vouches for). A graft is a
//! crate with `forbid(unsafe_code)` and no dependency but `graft-examples`, compiled for
//! `x86_64-unknown-none` on the host by `cargo xtask build` into one position-
//! independent blob (code and read-only data, no writable data, no relocations) that
//! cannot panic — it is linked with no panic handler to reach, so a graft with a path to
//! a panic does not link — and signed with the build's ed25519 key. A server checks the
//! signature against the key it was built with before it maps the code executable; the
//! signature covers the header (point, technology, state, name) and the code, so no
//! part of a signed graft can be swapped for another's.
//!
//! The code field (u32s little-endian): the entry's offset in the image, the number of
//! relocations, each relocation's offset (a u64 of the image to which the server adds
//! the address it loads the image at: R_X86_64_RELATIVE, the addend already in place),
//! then the image, loaded at an address that is a multiple of 4096. The entry is
//! `extern "C" fn(input, input_len, state, state_len) -> u64`. What the
//! signature vouches for is memory safety; termination is trusted, as for native grafts
//! (the blob runs on the server's thread with no budget).

use alloc::vec::Vec;
use ed25519_compact::{KeyPair, PublicKey, Seed, Signature};

use crate::format::{GraftFile, Tech};
use crate::LoadError;

pub const KEY_LEN: usize = 32;
pub const SIG_LEN: usize = 64;

/// What is signed: the file as it would be with no signature.
pub fn message(f: &GraftFile<'_>) -> Vec<u8> {
    GraftFile { sig: &[], ..*f }.to_bytes()
}

/// The public key of the signing key made from `seed`.
pub fn public_key(seed: &[u8; 32]) -> [u8; KEY_LEN] {
    *KeyPair::from_seed(Seed::new(*seed)).pk
}

/// The signature of `f` (its `sig` ignored) with the key made from `seed`.
pub fn sign(f: &GraftFile<'_>, seed: &[u8; 32]) -> [u8; SIG_LEN] {
    *KeyPair::from_seed(Seed::new(*seed)).sk.sign(message(f), None)
}

/// A signed graft's code, checked: every offset inside the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code<'a> {
    pub entry: usize,
    pub relocs: Vec<usize>,
    pub image: &'a [u8],
}

/// Is `f` a signed graft whose signature `key` made? Then its code.
pub fn verify<'a>(f: &GraftFile<'a>, key: &[u8; KEY_LEN]) -> Result<Code<'a>, LoadError> {
    if f.tech != Tech::SignedRust {
        return Err(LoadError::Unsupported);
    }
    check_signature(f, key)?;
    parse(f.code)
}

/// Did `key` sign `f` (any technology whose code the server must trust as it stands:
/// signed Rust, and WebAssembly compiled ahead of time, whose machine code no verifier
/// checks — the build's compiler vouches for it, and the signature says it made it)?
/// (A file whose signature the table has just checked in slices, `Check`, with this
/// key — `crate::vouch` — is not checked again.)
pub fn check_signature(f: &GraftFile<'_>, key: &[u8; KEY_LEN]) -> Result<(), LoadError> {
    if vouched(f, key) {
        return Ok(());
    }
    let mut c = Check::new(f, key)?;
    loop {
        if let Some(r) = c.run(u64::MAX) {
            return r;
        }
    }
}

/// The vouch's words for `f` checked with `key`: the code's place and length, the
/// signature's place and length, the key.
fn vouch_with(f: &GraftFile<'_>, key: &[u8; KEY_LEN]) -> [usize; 6] {
    let k = crate::vouch::key_words(key);
    [f.sig.as_ptr() as usize, f.sig.len(), k[0], k[1], k[2], k[3]]
}

fn vouched(f: &GraftFile<'_>, key: &[u8; KEY_LEN]) -> bool {
    crate::vouch::vouched(crate::vouch::Kind::Signed, f.code, &vouch_with(f, key))
}

/// Vouch for `f`'s signature, checked with `key` (`None`: for nothing).
pub fn vouch(f: Option<(&GraftFile<'_>, &[u8; KEY_LEN])>) {
    match f {
        Some((f, key)) => crate::vouch::vouch(Some((crate::vouch::Kind::Signed, f.code, &vouch_with(f, key)))),
        None => crate::vouch::vouch(None),
    }
}

/// Bytes of the message hashed in one unit of a check's work (`Check::run`): about as
/// long as a unit of the eBPF verifier's (SHA-512 takes some ten cycles a byte).
const UNIT_BYTES: usize = 32;

/// A signature check under way, in slices (the server answers others between them): the
/// message (the file without its signature: up to 256 KiB) hashed a piece at a time,
/// then the one curve equation checked.
pub struct Check {
    state: ed25519_compact::VerifyingState,
    msg: Vec<u8>,
    at: usize,
}

impl Check {
    /// Refused at once when the signature is not 64 bytes or cannot be one (its
    /// scalar not canonical, its point not on the curve).
    pub fn new(f: &GraftFile<'_>, key: &[u8; KEY_LEN]) -> Result<Check, LoadError> {
        let bad = LoadError::Refused("bad signature: not signed with this system's key");
        let sig: [u8; SIG_LEN] =
            f.sig.try_into().map_err(|_| LoadError::Refused("no signature, or not one of 64 bytes"))?;
        let state = PublicKey::new(*key).verify_incremental(&Signature::new(sig)).map_err(|_| bad)?;
        Ok(Check { state, msg: message(f), at: 0 })
    }

    /// Go on for about `budget` units of work: `None` while there is more to hash, else
    /// whether the signature holds.
    pub fn run(&mut self, budget: u64) -> Option<Result<(), LoadError>> {
        let n = (budget.max(1).min((usize::MAX / UNIT_BYTES) as u64) as usize) * UNIT_BYTES;
        let end = self.at.saturating_add(n).min(self.msg.len());
        self.state.absorb(&self.msg[self.at..end]);
        self.at = end;
        if end < self.msg.len() {
            return None;
        }
        Some(self.state.verify().map_err(|_| LoadError::Refused("bad signature: not signed with this system's key")))
    }
}

fn u32_at(b: &[u8], k: usize) -> Option<usize> {
    b.get(4 * k..4 * k + 4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as usize)
}

/// The code field's parts, every offset checked against the image.
pub fn parse(code: &[u8]) -> Result<Code<'_>, LoadError> {
    let bad = LoadError::Format;
    let (entry, n) =
        (u32_at(code, 0).ok_or(bad("no entry offset"))?, u32_at(code, 1).ok_or(bad("no relocation count"))?);
    let head = n
        .checked_add(2)
        .and_then(|k| k.checked_mul(4))
        .filter(|h| *h <= code.len())
        .ok_or(bad("more relocations than the code holds"))?;
    let image = &code[head..];
    if entry >= image.len() {
        return Err(bad("the entry lies past the image"));
    }
    let relocs: Vec<usize> = (0..n).filter_map(|k| u32_at(code, 2 + k)).collect();
    if relocs.iter().any(|r| !r.is_multiple_of(8) || r + 8 > image.len()) {
        return Err(bad("a relocation outside the image"));
    }
    Ok(Code { entry, relocs, image })
}

/// The code field for an image, its entry and its relocations.
pub fn code(entry: usize, relocs: &[usize], image: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + 4 * relocs.len() + image.len());
    for w in [entry, relocs.len()].iter().chain(relocs) {
        v.extend_from_slice(&(*w as u32).to_le_bytes());
    }
    v.extend_from_slice(image);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Point;

    const SEED: [u8; 32] = [7; 32];

    fn signed(code: &[u8]) -> Vec<u8> {
        let f = GraftFile { point: Point::Evict, tech: Tech::SignedRust, state_len: 8, name: "g", code, sig: &[] };
        let sig = sign(&f, &SEED);
        GraftFile { sig: &sig, ..f }.to_bytes()
    }

    #[test]
    fn a_signature_covers_header_and_code() {
        let key = public_key(&SEED);
        let bytes = signed(&code(1, &[], &[0x90, 0xc3]));
        let f = GraftFile::parse(&bytes).unwrap();
        assert_eq!(verify(&f, &key), Ok(Code { entry: 1, relocs: Vec::new(), image: &[0x90u8, 0xc3][..] }));
        assert!(verify(&f, &public_key(&[8; 32])).is_err(), "another key");
        // Any byte of the header's fields or of the code changed: refused.
        for at in [8usize, 12, 24, 64, 65, 68, 72, 73] {
            let mut b = bytes.clone();
            b[at] ^= 1;
            if let Ok(g) = GraftFile::parse(&b) {
                assert!(verify(&g, &key).is_err(), "byte {at} changed");
            }
        }
        let mut b = bytes.clone();
        let n = b.len();
        b[n - 1] ^= 1;
        assert!(
            matches!(verify(&GraftFile::parse(&b).unwrap(), &key), Err(LoadError::Refused(_))),
            "a changed signature"
        );
        // The signature must be there and whole.
        let f = GraftFile::parse(&bytes).unwrap();
        assert!(verify(&GraftFile { sig: &f.sig[..63], ..f }, &key).is_err());
        assert!(verify(&GraftFile { sig: &[], ..f }, &key).is_err());
    }

    #[test]
    fn every_offset_must_lie_in_the_image() {
        let key = public_key(&SEED);
        let img = [0u8; 24];
        for (entry, relocs, ok) in [
            (0usize, &[][..], true),
            (23, &[0, 16][..], true),
            (24, &[][..], false),
            (u32::MAX as usize, &[][..], false),
            (0, &[17][..], false),
            (0, &[4][..], false),
            (0, &[24][..], false),
        ] {
            let bytes = signed(&code(entry, relocs, &img));
            assert_eq!(
                verify(&GraftFile::parse(&bytes).unwrap(), &key).is_ok(),
                ok,
                "entry {entry}, relocations {relocs:?}"
            );
        }
        assert!(parse(&[1, 2]).is_err(), "no room for the entry offset");
        let mut c = code(0, &[], &img);
        c[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&c).is_err(), "a relocation count past the code");
    }
}
