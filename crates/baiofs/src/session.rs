//! File sessions (K42 Fig. 6): the object a server keeps for an open file, swappable
//! while the file is in use. `Exclusive` serves one client: it keeps the client's
//! appending writes in a run of up to `RUN` bytes and writes them as one (fewer block
//! and inode writes for small appends); reads and anything else see the run written
//! first. `Shared` serves several: every write goes through at once, so each client
//! sees the others' bytes. A server swaps a file's session to `Shared` when a second
//! client opens it and back when one is left; the state moved is the run not written
//! yet (canonical format: offset, then the bytes), which `Shared` writes through
//! before anything else.

use crate::{Dev, Error, Fs};
use alloc::boxed::Box;
use alloc::vec::Vec;
use swap::{Component, Formats, State};

/// What a session does its I/O through (a filesystem; a test's model).
pub trait FileIo {
    fn read_at(&mut self, ino: u32, off: u64, buf: &mut [u8]) -> Result<usize, Error>;
    fn write_at(&mut self, ino: u32, off: u64, data: &[u8]) -> Result<usize, Error>;
}

impl<D: Dev> FileIo for Fs<D> {
    fn read_at(&mut self, ino: u32, off: u64, buf: &mut [u8]) -> Result<usize, Error> {
        self.read_ino(ino, off, buf)
    }
    fn write_at(&mut self, ino: u32, off: u64, data: &[u8]) -> Result<usize, Error> {
        self.write_ino(ino, off, data)
    }
}

swap::interface! {
    /// An open file's session.
    pub trait Session via SessionVia, methods SessionMethod {
        fn read(&mut self, io: &mut dyn FileIo, ino: u32, off: u64, buf: &mut [u8]) -> Result<usize, Error>;
        fn write(&mut self, io: &mut dyn FileIo, ino: u32, off: u64, data: &[u8]) -> Result<usize, Error>;
        /// Write what is kept back (before the file is closed, listed, synced, sent).
        fn flush(&mut self, io: &mut dyn FileIo, ino: u32) -> Result<(), Error>;
    }
}

/// Bytes an exclusive session keeps back at most.
pub const RUN: usize = 16 * 1024;
/// State formats: bit 0, the run not written yet (offset, bytes).
const FORMATS: Formats = 1;

/// A run of bytes not written yet: where, and what.
type Run = Option<(u64, Vec<u8>)>;

fn export_run(run: &mut Run) -> State {
    let mut v = Vec::new();
    if let Some((off, bytes)) = run.take() {
        v.extend_from_slice(&off.to_le_bytes());
        v.extend_from_slice(&bytes);
    }
    State::Bytes(v)
}

fn import_run(state: State) -> Option<Run> {
    let b = state.bytes()?;
    match b.len() {
        0 => Some(None),
        n if n > 8 && n - 8 <= RUN => Some(Some((u64::from_le_bytes(b[..8].try_into().ok()?), b[8..].to_vec()))),
        _ => None,
    }
}

fn write_run(run: &mut Run, io: &mut dyn FileIo, ino: u32) -> Result<(), Error> {
    if let Some((off, bytes)) = run.take() {
        io.write_at(ino, off, &bytes)?;
    }
    Ok(())
}

/// One client: appends kept back in a run.
#[derive(Default)]
pub struct Exclusive {
    run: Run,
}

/// Several clients: everything written through.
#[derive(Default)]
pub struct Shared {
    /// A run an exclusive session handed over, written at the first call.
    pending: Run,
}

macro_rules! session_component {
    ($t:ident, $f:ident) => {
        impl Component for $t {
            fn formats(&self) -> Formats {
                FORMATS
            }
            fn export(&mut self, _: u32) -> Option<State> {
                Some(export_run(&mut self.$f))
            }
            fn import(&mut self, _: u32, state: State) -> bool {
                match import_run(state) {
                    Some(r) => {
                        self.$f = r;
                        true
                    }
                    None => false,
                }
            }
        }
    };
}
session_component!(Exclusive, run);
session_component!(Shared, pending);

impl Session for Exclusive {
    fn read(&mut self, io: &mut dyn FileIo, ino: u32, off: u64, buf: &mut [u8]) -> Result<usize, Error> {
        write_run(&mut self.run, io, ino)?;
        io.read_at(ino, off, buf)
    }

    fn write(&mut self, io: &mut dyn FileIo, ino: u32, off: u64, data: &[u8]) -> Result<usize, Error> {
        if let Some((at, bytes)) = &mut self.run {
            if *at + bytes.len() as u64 == off && bytes.len() + data.len() <= RUN {
                bytes.extend_from_slice(data);
                return Ok(data.len());
            }
        }
        write_run(&mut self.run, io, ino)?;
        if data.len() < RUN {
            self.run = Some((off, data.to_vec()));
            return Ok(data.len());
        }
        io.write_at(ino, off, data)
    }

    fn flush(&mut self, io: &mut dyn FileIo, ino: u32) -> Result<(), Error> {
        write_run(&mut self.run, io, ino)
    }
}

impl Session for Shared {
    fn read(&mut self, io: &mut dyn FileIo, ino: u32, off: u64, buf: &mut [u8]) -> Result<usize, Error> {
        write_run(&mut self.pending, io, ino)?;
        io.read_at(ino, off, buf)
    }

    fn write(&mut self, io: &mut dyn FileIo, ino: u32, off: u64, data: &[u8]) -> Result<usize, Error> {
        write_run(&mut self.pending, io, ino)?;
        io.write_at(ino, off, data)
    }

    fn flush(&mut self, io: &mut dyn FileIo, ino: u32) -> Result<(), Error> {
        write_run(&mut self.pending, io, ino)
    }
}

/// A new session of either kind.
pub fn new(shared: bool) -> Box<dyn Session> {
    if shared {
        Box::new(Shared::default())
    } else {
        Box::new(Exclusive::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeMap;

    /// Files as byte vectors, counting the writes that reach them.
    #[derive(Default)]
    struct Model {
        files: BTreeMap<u32, Vec<u8>>,
        writes: u64,
    }

    impl FileIo for Model {
        fn read_at(&mut self, ino: u32, off: u64, buf: &mut [u8]) -> Result<usize, Error> {
            let f = self.files.entry(ino).or_default();
            let n = f.len().saturating_sub(off as usize).min(buf.len());
            buf[..n].copy_from_slice(&f[off as usize..off as usize + n]);
            Ok(n)
        }
        fn write_at(&mut self, ino: u32, off: u64, data: &[u8]) -> Result<usize, Error> {
            self.writes += 1;
            let f = self.files.entry(ino).or_default();
            if f.len() < off as usize + data.len() {
                f.resize(off as usize + data.len(), 0);
            }
            f[off as usize..off as usize + data.len()].copy_from_slice(data);
            Ok(data.len())
        }
    }

    #[test]
    fn exclusive_coalesces_appends_and_shared_writes_through() {
        for (shared, writes) in [(false, 1), (true, 8)] {
            let (mut m, mut s) = (Model::default(), new(shared));
            for k in 0..8u64 {
                assert_eq!(s.write(&mut m, 1, 512 * k, &[k as u8; 512]), Ok(512));
            }
            let mut b = [0u8; 4096];
            assert_eq!(s.read(&mut m, 1, 0, &mut b), Ok(4096), "reads see every write");
            assert!(b.chunks(512).enumerate().all(|(k, c)| c.iter().all(|x| *x == k as u8)));
            assert_eq!(m.writes, writes, "shared {shared}");
        }
    }

    #[test]
    fn a_swap_to_shared_moves_the_run_and_writes_it_first() {
        let mut m = Model::default();
        let mut g = swap::Generations::new();
        let mut slot: swap::Slot<dyn Session> = swap::Slot::new(new(false));
        let c = slot.begin(&mut g, 1, false).unwrap();
        SessionVia::call(&mut slot, &c, |s| s.write(&mut m, 3, 0, b"kept back")).unwrap();
        slot.end(&mut g, c);
        assert_eq!(m.writes, 0);
        assert!(slot.swap(&mut g, new(true), 10));
        assert!(matches!(slot.step(&g, 0), swap::Outcome::Swapped { format: 0, .. }));
        let c = slot.begin(&mut g, 2, false).unwrap();
        let mut b = [0u8; 9];
        assert_eq!(SessionVia::call(&mut slot, &c, |s| s.read(&mut m, 3, 0, &mut b)), Ok(9));
        assert_eq!(&b, b"kept back", "the shared session wrote the run it was handed first");
        slot.end(&mut g, c);
        // A state past the run's limit or cut short is refused.
        assert!(!Shared::default().import(0, State::Bytes(alloc::vec![0; 8 + RUN + 1])));
        assert!(!Shared::default().import(0, State::Bytes(alloc::vec![0; 5])));
    }

    /// A disk that is full.
    struct Full;

    impl FileIo for Full {
        fn read_at(&mut self, _: u32, _: u64, _: &mut [u8]) -> Result<usize, Error> {
            Ok(0)
        }
        fn write_at(&mut self, _: u32, _: u64, _: &[u8]) -> Result<usize, Error> {
            Err(Error::NoSpace)
        }
    }

    #[test]
    fn an_error_writing_what_was_kept_back_comes_at_the_flush() {
        let mut s = new(false);
        assert_eq!(s.write(&mut Full, 1, 0, b"kept"), Ok(4), "kept back: nothing written yet");
        assert_eq!(s.flush(&mut Full, 1), Err(Error::NoSpace), "the flush says the bytes did not reach the disk");
        let mut sh = new(true);
        assert_eq!(sh.write(&mut Full, 1, 0, b"through"), Err(Error::NoSpace), "shared: at once");
    }
}
