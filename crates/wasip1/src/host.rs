//! What the runner asks of the system, as a trait: on Scion it is `files`, the console,
//! the clocks, the CPU's random numbers and `net`; in the host tests, a model.
//!
//! Paths are Scion paths, absolute and already confined ([`crate::path`]). Errors are
//! Scion's ([`abi::Error`]); [`crate::ctx`] turns them into errnos.

use abi::Error;
use alloc::string::String;
use alloc::vec::Vec;

/// What a name is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
}

/// A directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub kind: Kind,
    pub size: u64,
}

/// An open file's handle at the files server.
pub type Handle = u64;

/// A connection's (or listening socket's) id at the network server.
pub type Sock = u64;

pub trait Host {
    /// The filesystem's longest name in bytes.
    fn name_max(&self) -> usize;

    /// Write to the console (fd 1 or 2).
    fn console_write(&mut self, data: &[u8]);
    /// Read from the console into `buf`; 0 is the end of input.
    fn console_read(&mut self, buf: &mut [u8]) -> Result<usize, Error>;

    /// Nanoseconds since 1970 (the RTC's second, the TSC's fraction).
    fn realtime_ns(&self) -> u64;
    /// Nanoseconds since boot.
    fn monotonic_ns(&self) -> u64;
    /// Sleep `ns` nanoseconds.
    fn sleep_ns(&mut self, ns: u64);
    /// Fill `buf` with random bytes.
    fn random(&mut self, buf: &mut [u8]);

    fn stat(&mut self, path: &str) -> Result<(Kind, u64), Error>;
    /// Open file `path`, creating it (empty) if `create`: (handle, size).
    fn open(&mut self, path: &str, create: bool) -> Result<(Handle, u64), Error>;
    fn close(&mut self, h: Handle);
    fn read(&mut self, h: Handle, off: u64, buf: &mut [u8]) -> Result<usize, Error>;
    fn write(&mut self, h: Handle, off: u64, data: &[u8]) -> Result<usize, Error>;
    /// Make file `path`'s size `size` (shorter: the rest is gone; longer: zeros).
    fn truncate(&mut self, path: &str, h: Handle, size: u64) -> Result<(), Error>;
    /// Make open file `h`'s bytes durable.
    fn fsync(&mut self, h: Handle) -> Result<(), Error>;
    fn list(&mut self, dir: &str) -> Result<Vec<Entry>, Error>;
    fn mkdir(&mut self, path: &str) -> Result<(), Error>;
    /// Remove a file or an empty directory.
    fn remove(&mut self, path: &str) -> Result<(), Error>;
    fn rename(&mut self, from: &str, to: &str) -> Result<(), Error>;

    /// Accept a connection on listening socket `s`; without `wait`, `WouldBlock` when
    /// none is pending.
    fn accept(&mut self, s: Sock, wait: bool) -> Result<Sock, Error>;
    /// Receive into `buf`; 0 is the peer's end. Without `wait`, `WouldBlock` when
    /// nothing has come.
    fn recv(&mut self, s: Sock, buf: &mut [u8], wait: bool) -> Result<usize, Error>;
    /// Send some of `data` (waiting for room unless `!wait`): how much was taken.
    fn send(&mut self, s: Sock, data: &[u8], wait: bool) -> Result<usize, Error>;
    /// Shut down `how` (1 read, 2 write, 3 both).
    fn shutdown(&mut self, s: Sock, how: u8) -> Result<(), Error>;
    fn sock_close(&mut self, s: Sock);
    /// Wait until socket `s` is readable (or its peer gone), at most `ns` nanoseconds
    /// (`u64::MAX`: no limit): whether it is.
    fn wait_readable(&mut self, s: Sock, ns: u64) -> bool;
}
