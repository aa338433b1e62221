//! `bench_k42`'s second client of `files` (K42 Figure 6 with sharing): on request it
//! opens a file and keeps it open, so the file has two clients and its session in
//! `files` is the shared kind; then it closes them all. Requests: `OPEN` (the path as
//! the string), `CLOSE_ALL`; answers carry the error, if any.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::vec::Vec;
use files_api::client as f;
use rt::server::{self, Answer, Args, Badge, Decode, Server};
use rt::{env, println};

rt::entry!(main);

pub const OPEN: u64 = 1;
pub const CLOSE_ALL: u64 = 2;

enum Request<'a> {
    Open(&'a str),
    CloseAll,
}

impl<'a> Decode<'a> for Request<'a> {
    fn decode(a: &Args<'a>) -> Result<Self, Error> {
        Ok(match a.msg.label() {
            OPEN => Request::Open(a.text()?),
            CLOSE_ALL => Request::CloseAll,
            _ => return Err(Error::Unsupported),
        })
    }
}

struct Peer {
    files: u64,
    open: Vec<u64>,
}

/// Files held open at most.
const MAX_OPEN: usize = 256;

impl Server for Peer {
    type Request<'a> = Request<'a>;

    fn handle(&mut self, _from: Badge, req: Request<'_>) -> Answer {
        match req {
            Request::Open(_) if self.open.len() >= MAX_OPEN => Answer::err(Error::NoMemory),
            Request::Open(path) => match f::open(self.files, path, false) {
                Ok((h, _)) => {
                    self.open.push(h);
                    Answer::ok(&[])
                }
                Err(e) => Answer::err(e),
            },
            Request::CloseAll => {
                let mut r = Ok(());
                for h in core::mem::take(&mut self.open) {
                    r = r.and(f::close(self.files, h));
                }
                Answer::result(r)
            }
        }
    }
}

fn main() -> i32 {
    let files = rt::alloc_slot();
    if env::lookup("files", files).is_err() {
        println!("bench_k42_peer: the manifest must grant files");
        return 1;
    }
    let mut buf = [0u8; 256];
    server::run(&mut Peer { files, open: Vec::new() }, &mut buf)
}
