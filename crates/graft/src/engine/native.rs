//! Native grafts: Rust compiled into the server (`graft-examples`), the trusted baseline that
//! every other technology is measured against (VINO: unsafe C linked into the
//! kernel). The file's code is the built-in's name; loading picks it.

use alloc::vec;
use alloc::vec::Vec;

use super::{Abort, Engine};
use crate::format::GraftFile;
use crate::point::Point;
use crate::LoadError;

type Entry = fn(&[u8], &mut [u8]) -> u64;

/// The built-ins: (name, the point it serves, the function).
pub const BUILTINS: [(&str, Point, Entry); 4] = [
    ("null", Point::Evict, graft_examples::null),
    ("hotlist", Point::Evict, graft_examples::hotlist),
    ("md5", Point::Stream, graft_examples::md5),
    ("ldisk", Point::Ldisk, graft_examples::ldisk),
];

pub struct Native {
    f: Entry,
    state: Vec<u8>,
}

impl Native {
    pub fn load(f: &GraftFile<'_>) -> Result<Native, LoadError> {
        let name = core::str::from_utf8(f.code).map_err(|_| LoadError::Refused("not a built-in's name"))?;
        let (_, point, entry) =
            BUILTINS.iter().find(|b| b.0 == name).ok_or(LoadError::Refused("no such built-in graft"))?;
        if *point != f.point && name != "null" {
            return Err(LoadError::Refused("the built-in serves another point"));
        }
        Ok(Native { f: *entry, state: vec![0; f.state_len] })
    }
}

impl Engine for Native {
    fn state(&mut self) -> &mut [u8] {
        &mut self.state
    }

    fn call(&mut self, input: &[u8], _budget: u64) -> Result<u64, Abort> {
        Ok((self.f)(input, &mut self.state))
    }

    fn reset(&mut self) -> Result<(), Abort> {
        Ok(())
    }

    fn allocates(&self) -> bool {
        false
    }
}
