//! A memory server's protocol (root registers the programs it pages; their page faults
//! arrive as kernel fault messages badged with the client's pager badge).
#![no_std]
#![forbid(unsafe_code)]

use abi::Error;
use rt::server::{Args, Decode};

/// MR1 = client badge (the pager badge its threads' faults carry), MR2 = limit in
/// pages; string = "program args" (the program's file in the boot image first).
pub const REGISTER: u64 = 0x60;
/// MR1 = client badge: the program is gone; its pages return to the pool.
pub const UNREGISTER: u64 = 0x61;
/// Reply: MR1 = 0, MR2 = pool pages, MR3 = free pool pages, MR4 = clients, then
/// (badge, pages, limit) for each client.
pub const STATS: u64 = 0x62;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    Register { client: u64, limit: u64, cmdline: &'a str },
    Unregister { client: u64 },
    Stats,
}

impl<'a> Decode<'a> for Request<'a> {
    fn decode(a: &Args<'a>) -> Result<Self, Error> {
        Ok(match a.msg.label() {
            REGISTER => {
                let [client, limit] = a.words()?;
                Request::Register { client, limit, cmdline: a.text()? }
            }
            UNREGISTER => {
                let [client] = a.words()?;
                Request::Unregister { client }
            }
            STATS => Request::Stats,
            _ => return Err(Error::Unsupported),
        })
    }
}

/// Client stubs (root's side).
pub mod client {
    use abi::Error;
    use rt::ipc::{self, Msg};

    /// Register a program: `client` is the pager badge its faults carry.
    pub fn register(srv: u64, client: u64, limit: u64, cmdline: &str) -> Result<(), Error> {
        ipc::set_send_string(cmdline.as_bytes());
        rt::server::request(srv, &mut Msg::new(super::REGISTER, &[client, limit]).with_string())
    }

    /// The program registered as `client` is gone: its pages return to the pool.
    pub fn unregister(srv: u64, client: u64) -> Result<(), Error> {
        rt::server::request(srv, &mut Msg::new(super::UNREGISTER, &[client]))
    }
}
