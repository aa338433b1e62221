//! A disk whose flushes fail (scenario `dead_disk`): what needs stable storage answers
//! `Io`, from blk and from files, and what does not (reads, usage errors) is as ever.
#![no_std]
#![no_main]

use abi::Error;
use blk_api::client as baio;
use files_api::client as f;
use rt::env;
use tests::Checks;

rt::entry!(main);

fn main() -> i32 {
    let mut c = Checks::new();
    let (blk, srv) = (rt::alloc_slot(), rt::alloc_slot());
    c.eq(env::lookup("blk", blk), Ok(()), "find blk");
    c.eq(env::lookup("files", srv), Ok(()), "find the files server");
    c.eq(
        f::read_all(srv, "/disk/hello.txt").as_deref(),
        Ok(&b"hello scion\n"[..]),
        "reads still work: a file mkimage put there",
    );
    c.eq(f::mkdir(srv, "/d"), Err(Error::Io), "files MKDIR (a create flushes its inode first): Io");
    // (Only now: QEMU skips a flush with nothing written since the last one.)
    c.eq(f::sync(srv), Err(Error::Io), "files SYNC after a write: the disk's flush failed: Io");
    c.eq(f::open(srv, "/f", true).map(|_| ()), Err(Error::Io), "files OPEN with CREATE: Io");
    c.eq(f::remove(srv, "/disk"), Err(Error::BadState), "a usage error is still BadState (a directory not empty)");
    c.eq(f::stat(srv, "/nope").map(|_| ()), Err(Error::NotFound), "and a missing name NotFound");
    let (h, _) = f::open(srv, "/disk/hello.txt", false).unwrap_or((0, 0));
    c.eq(f::fsync(srv, h), Err(Error::Io), "files FSYNC of a handle: Io");
    c.eq(f::close(srv, h), Ok(()), "close it");
    c.eq(baio::create(blk, "dead", 8, 0), Err(Error::Io), "blk CREATE (its table is flushed): Io");
    c.eq(
        f::read_all(srv, "/disk/hello.txt").as_deref(),
        Ok(&b"hello scion\n"[..]),
        "the files server goes on serving reads",
    );
    c.finish("dead_disk_test")
}
