//! The library's errors (`Error`) and the system error code each one is answered with
//! (`Error::code`, what the files server sends back).

use alloc::string::String;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    Io,
    /// Mount refused: the text names the inconsistency.
    Corrupt(String),
    NotFound,
    Exists,
    NotDir,
    IsDir,
    NotEmpty,
    BadName,
    NoSpace,
    NoInode,
    /// The file would need more than `EXTENTS` runs of blocks.
    TooFragmented,
}

impl Error {
    /// The system's error code for this (what the files server answers): a failing
    /// disk is `Io`, never a usage error such as `BadState`.
    pub fn code(&self) -> abi::Error {
        match self {
            Error::NotFound => abi::Error::NotFound,
            Error::Exists => abi::Error::Exists,
            Error::NotDir | Error::IsDir | Error::BadName => abi::Error::InvalidArg,
            Error::NotEmpty => abi::Error::BadState,
            Error::NoSpace | Error::NoInode | Error::TooFragmented => abi::Error::NoSpace,
            // The disk failed, or gave back bytes that fail their checksums (a mount
            // checked everything: damage found later is the device's).
            Error::Io | Error::Corrupt(_) => abi::Error::Io,
        }
    }
}

impl From<baio::Error> for Error {
    fn from(_: baio::Error) -> Error {
        Error::Io
    }
}
