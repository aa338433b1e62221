//! The preview-1 errno values (`wasi_snapshot_preview1`'s `errno` enum, as wasi-libc
//! numbers them) and the mapping from Scion's errors.

/// An errno: 0 is success.
pub type Errno = u16;

pub const SUCCESS: Errno = 0;
pub const TOOBIG: Errno = 1;
pub const ACCES: Errno = 2;
pub const AGAIN: Errno = 6;
pub const BADF: Errno = 8;
pub const BUSY: Errno = 10;
pub const CONNRESET: Errno = 15;
pub const EXIST: Errno = 20;
pub const FAULT: Errno = 21;
pub const FBIG: Errno = 22;
pub const ILSEQ: Errno = 25;
pub const INVAL: Errno = 28;
pub const IO: Errno = 29;
pub const ISDIR: Errno = 31;
pub const MFILE: Errno = 33;
pub const NAMETOOLONG: Errno = 37;
pub const NOENT: Errno = 44;
pub const NOMEM: Errno = 48;
pub const NOSPC: Errno = 51;
pub const NOSYS: Errno = 52;
pub const NOTCONN: Errno = 53;
pub const NOTDIR: Errno = 54;
pub const NOTEMPTY: Errno = 55;
pub const NOTSOCK: Errno = 57;
pub const NOTSUP: Errno = 58;
pub const OVERFLOW: Errno = 61;
pub const PERM: Errno = 63;
pub const PIPE: Errno = 64;
pub const SPIPE: Errno = 70;
pub const TIMEDOUT: Errno = 73;
pub const XDEV: Errno = 75;
pub const NOTCAPABLE: Errno = 76;

/// The errno a POSIX program expects for Scion's error `e` from a server.
///
/// The servers' words are used where they say what a program would be told: a name not
/// found is `ENOENT`, a name taken `EEXIST`, no room `ENOSPC`, a dead disk `EIO`, a
/// file in use or a directory not empty (`BadState`, which the runner refines with a
/// `stat` where it matters) `EBUSY`, a connection gone `ECONNRESET`. A server that is
/// not there (or restarted under the program: `Lost`) is `EIO`, as a device gone is.
pub fn from_error(e: abi::Error) -> Errno {
    use abi::Error as E;
    match e {
        E::NotFound => NOENT,
        E::Exists => EXIST,
        E::NoSpace => NOSPC,
        E::NoMemory => NOMEM,
        E::WouldBlock | E::Timeout => AGAIN,
        E::Reset => CONNRESET,
        E::BadState => BUSY,
        E::NoRights => ACCES,
        E::TooLong => NAMETOOLONG,
        E::InvalidArg | E::Malformed => INVAL,
        E::Unsupported | E::NoSys => NOSYS,
        E::BadAddress | E::CopyFault => FAULT,
        E::Io | E::Lost | E::NoPartner | E::InvalidCap | E::Moved => IO,
        E::WrongType | E::Misaligned | E::SlotInUse | E::AlreadyMapped | E::NotMapped | E::Deadlock | E::NoWindow => IO,
    }
}
