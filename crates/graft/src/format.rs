//! The graft file: a 64-byte header that names the graft point, the technology, the
//! bytes of state the graft keeps and its name, then the code (a Wasm module, eBPF
//! instructions, script source, a built-in's name, …), then a signature when the
//! technology needs one. Every field is checked before anything else looks at the
//! code: the file comes from a program, and a program may be hostile.

use crate::point::Point;
use crate::LoadError;

pub const MAGIC: [u8; 8] = *b"SCGRAFT1";
pub const HEADER: usize = 64;
/// The most code a graft may have (eBPF's 32,767 instructions fit, 262,136 bytes).
pub const MAX_CODE: usize = 256 * 1024;
/// The longest signature (ed25519's is 64 bytes).
pub const MAX_SIG: usize = 64;
/// The biggest graft file a server takes: header, the most code, a signature.
pub const MAX_FILE: usize = HEADER + MAX_CODE + MAX_SIG;
/// The most state a graft may keep.
pub const MAX_STATE: usize = 64 * 1024;
pub const NAME_LEN: usize = 32;

/// The extension technologies (the VINO paper's, in today's form).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Tech {
    /// Rust compiled into the server: the trusted baseline (VINO: unsafe C in the kernel).
    Native = 1,
    /// A graft server called by IPC on every call (VINO: C in a user-level server).
    Upcall = 2,
    /// WebAssembly compiled ahead of time on the host, to C by wasm2c and to machine
    /// code by clang, and signed (VINO: SFI; `sfi`).
    WasmAot = 3,
    /// Safe Rust compiled on the host and signed (VINO: Modula-3).
    SignedRust = 4,
    /// WebAssembly interpreted by `wasmi` (VINO: Java byte code).
    Wasmi = 5,
    /// eBPF interpreted by `rbpf` (VINO: Java byte code).
    Ebpf = 6,
    /// Script source interpreted by `rhai` (VINO: Tcl).
    Script = 7,
}

impl Tech {
    /// Every technology, the one list (file names, the shell, the tests and the benchmark
    /// iterate it), in the VINO tables' order: compiled and trusted, compiled and
    /// checked, interpreted, then the upcall.
    pub const ALL: [Tech; 7] =
        [Tech::Native, Tech::SignedRust, Tech::WasmAot, Tech::Wasmi, Tech::Ebpf, Tech::Script, Tech::Upcall];

    /// Whether a graft of this technology is a file a program loads: all but the upcall,
    /// a thread of the loader's own that the server calls by IPC.
    pub fn is_file(self) -> bool {
        self != Tech::Upcall
    }

    pub fn from_u8(v: u8) -> Option<Tech> {
        Tech::ALL.into_iter().find(|t| *t as u8 == v)
    }

    /// The name used in graft file names, the shell and the benchmark's figures.
    pub fn name(self) -> &'static str {
        match self {
            Tech::Native => "native",
            Tech::Upcall => "upcall",
            Tech::WasmAot => "wasmaot",
            Tech::SignedRust => "signed",
            Tech::Wasmi => "wasmi",
            Tech::Ebpf => "ebpf",
            Tech::Script => "rhai",
        }
    }

    pub fn from_name(s: &str) -> Option<Tech> {
        Tech::ALL.into_iter().find(|t| t.name() == s)
    }
}

/// A parsed graft file, borrowing the bytes it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraftFile<'a> {
    pub point: Point,
    pub tech: Tech,
    pub state_len: usize,
    pub name: &'a str,
    pub code: &'a [u8],
    pub sig: &'a [u8],
}

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
}

impl<'a> GraftFile<'a> {
    pub fn parse(b: &'a [u8]) -> Result<GraftFile<'a>, LoadError> {
        let f = LoadError::Format;
        if b.len() < HEADER {
            return Err(f("shorter than the header"));
        }
        if b.len() > MAX_FILE {
            return Err(LoadError::Limit("graft file bigger than its header, 256 KiB of code and a signature"));
        }
        if b[..8] != MAGIC {
            return Err(f("bad magic (not a graft file)"));
        }
        let point = Point::from_u8(b[8]).ok_or(f("unknown graft point"))?;
        let tech = Tech::from_u8(b[9]).ok_or(f("unknown technology"))?;
        if b[10] != 0 || b[11] != 0 || b[56..64].iter().any(|x| *x != 0) {
            return Err(f("reserved header bytes are not zero"));
        }
        let (state_len, code_len, sig_len) = (u32_at(b, 12), u32_at(b, 16), u32_at(b, 20));
        if state_len > MAX_STATE {
            return Err(LoadError::Limit("state bigger than 64 KiB"));
        }
        if code_len == 0 {
            return Err(f("no code"));
        }
        if code_len > MAX_CODE {
            return Err(LoadError::Limit("graft code bigger than 256 KiB"));
        }
        if sig_len > MAX_SIG {
            return Err(f("a signature longer than any technology's"));
        }
        // Lengths are at most 2^32 each: the sum cannot overflow a u64-sized usize.
        if HEADER + code_len + sig_len != b.len() {
            return Err(f("the lengths do not add up to the file's size"));
        }
        let raw = &b[24..24 + NAME_LEN];
        let end = raw.iter().position(|c| *c == 0).unwrap_or(NAME_LEN);
        if end == 0 || raw[end..].iter().any(|c| *c != 0) {
            return Err(f("bad name"));
        }
        let name = core::str::from_utf8(&raw[..end]).map_err(|_| f("bad name"))?;
        if !name.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c)) {
            return Err(f("bad name"));
        }
        let code = &b[HEADER..HEADER + code_len];
        let sig = &b[HEADER + code_len..];
        Ok(GraftFile { point, tech, state_len, name, code, sig })
    }

    /// The file's bytes (what xtask writes and tests build).
    pub fn to_bytes(&self) -> alloc::vec::Vec<u8> {
        let mut v = alloc::vec::Vec::with_capacity(HEADER + self.code.len() + self.sig.len());
        v.extend_from_slice(&MAGIC);
        v.push(self.point as u8);
        v.push(self.tech as u8);
        v.extend_from_slice(&[0, 0]);
        for n in [self.state_len, self.code.len(), self.sig.len()] {
            v.extend_from_slice(&(n as u32).to_le_bytes());
        }
        let mut name = [0u8; NAME_LEN];
        let n = self.name.len().min(NAME_LEN);
        name[..n].copy_from_slice(&self.name.as_bytes()[..n]);
        v.extend_from_slice(&name);
        v.extend_from_slice(&[0; 8]);
        v.extend_from_slice(self.code);
        v.extend_from_slice(self.sig);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> alloc::vec::Vec<u8> {
        GraftFile {
            point: Point::Evict,
            tech: Tech::Script,
            state_len: 136,
            name: "hot-list",
            code: b"fn graft(i) { 0 }",
            sig: &[],
        }
        .to_bytes()
    }

    #[test]
    fn round_trip() {
        let b = sample();
        let g = GraftFile::parse(&b).unwrap();
        assert_eq!(
            (g.point, g.tech, g.state_len, g.name, g.code),
            (Point::Evict, Tech::Script, 136, "hot-list", &b"fn graft(i) { 0 }"[..])
        );
        for t in Tech::ALL {
            assert_eq!(Tech::from_name(t.name()), Some(t));
        }
    }

    #[test]
    fn every_damaged_header_is_refused() {
        let good = sample();
        let cases: [(usize, u8); 9] =
            [(0, b'X'), (8, 0), (8, 99), (9, 0), (9, 42), (10, 1), (24, 0), (25, b'/'), (60, 1)];
        for (at, v) in cases {
            let mut b = good.clone();
            b[at] = v;
            assert!(matches!(GraftFile::parse(&b), Err(LoadError::Format(_))), "byte {at} = {v}");
        }
        for cut in [0, 10, HEADER - 1, good.len() - 1] {
            assert!(GraftFile::parse(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = good.clone();
        long.push(0);
        assert!(GraftFile::parse(&long).is_err());
        let mut huge = good.clone();
        huge[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(GraftFile::parse(&huge).is_err(), "a code length past the file");
        let mut st = good.clone();
        st[12..16].copy_from_slice(&(MAX_STATE as u32 + 1).to_le_bytes());
        assert_eq!(GraftFile::parse(&st), Err(LoadError::Limit("state bigger than 64 KiB")));
    }

    /// The longest eBPF program (32,767 instructions, 262,136 bytes of code) fits in a
    /// graft file; a byte more of code does not.
    #[test]
    fn the_longest_programs_fit() {
        let code = alloc::vec![0u8; 32767 * 8];
        let f = GraftFile { point: Point::Evict, tech: Tech::Ebpf, state_len: 8, name: "long", code: &code, sig: &[] }
            .to_bytes();
        assert!(GraftFile::parse(&f).is_ok());
        let code = alloc::vec![0u8; MAX_CODE + 1];
        let f = GraftFile { point: Point::Evict, tech: Tech::Ebpf, state_len: 8, name: "long", code: &code, sig: &[] }
            .to_bytes();
        assert_eq!(GraftFile::parse(&f), Err(LoadError::Limit("graft code bigger than 256 KiB")));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x = 0x9e3779b97f4a7c15u64;
        let good = sample();
        for _ in 0..20000 {
            let mut b = good.clone();
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x as usize) % b.len();
                b[at] = (x >> 32) as u8;
            }
            let _ = GraftFile::parse(&b);
        }
    }
}
