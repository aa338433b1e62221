//! Files by path through the `files` server (a baiofs filesystem in a BAIO segment,
//! made on the host by `mkimage`), and baiofs as a library on a segment of our own:
//! format, write, remount, application-controlled prefetching and caching over BAIO.
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::vec::Vec;
use baiofs::{Fs, Kind, Policy};
use blk_api::client as baio;
use files_api::client as f;
use rt::env;
use segdev::SegDev;
use tests::{raw_request, Checks};

rt::entry!(main);

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|k| seed.wrapping_add((k % 253) as u8)).collect()
}

fn main() -> i32 {
    let mut c = Checks::new();
    let srv = rt::alloc_slot();
    c.eq(env::lookup("files", srv), Ok(()), "find the files server");
    // The server's first listing has nothing in it (an empty string answer).
    c.eq(f::mkdir(srv, "/empty"), Ok(()), "mkdir /empty");
    c.eq(f::list(srv, "/empty").as_deref(), Ok(""), "the first listing is empty");
    c.eq(f::remove(srv, "/empty"), Ok(()), "the server still answers after an empty listing");
    c.check(f::list(srv, "/").is_ok_and(|l| l.contains("d ") && l.contains(" disk")), "the image's directory is in /");
    c.eq(
        f::read_all(srv, "/disk/hello.txt").as_deref(),
        Ok(&b"hello scion\n"[..]),
        "a file mkimage put there reads back",
    );
    c.eq(f::mkdir(srv, "/t"), Ok(()), "mkdir");
    c.eq(f::mkdir(srv, "/t"), Err(Error::Exists), "mkdir twice");
    let data = pattern(40_000, 3);
    let h = f::open(srv, "/t/x", true);
    c.check(h.is_ok(), "create a file");
    let (h, size) = h.unwrap_or((0, 1));
    c.eq(size, 0, "empty");
    c.eq(f::write(srv, h, 0, &data), Ok(40_000), "write 40,000 bytes");
    let mut back = Vec::new();
    while back.len() < data.len() {
        match f::read(srv, h, back.len() as u64, 5000) {
            Ok(b) if !b.is_empty() => back.extend_from_slice(&b),
            _ => break,
        }
    }
    c.check(back == data, "read them back in pieces");
    c.eq(f::read(srv, h, 40_000, 100).map(|b| b.len()), Ok(0), "a read at the end is empty");
    c.eq(f::stat(srv, "/t/x"), Ok((f::Kind::File, 40_000)), "stat: a file of that size");
    c.eq(f::stat(srv, "/t"), Ok((f::Kind::Dir, 64)), "stat: a directory with one entry");
    // FETCH: kind, size and a small file's bytes in one call.
    let mut buf = alloc::vec![0u8; 16 * 1024];
    c.eq(f::fetch(srv, "/t/x", &mut buf), Ok((f::Kind::File, 40_000, 0)), "fetch: a file over the most gives no bytes");
    c.eq(f::fetch(srv, "/t", &mut buf), Ok((f::Kind::Dir, 64, 0)), "fetch: a directory, no bytes");
    c.eq(f::fetch(srv, "/t/none", &mut buf).err(), Some(Error::NotFound), "fetch: no such file");
    let small = f::open(srv, "/t/s", true).map(|(h, _)| h).unwrap_or(0);
    // Written through an open handle (kept back by its session): fetch sees them.
    c.eq(f::write(srv, small, 0, &data[..300]), Ok(300), "write a small file");
    c.eq(f::fetch(srv, "/t/s", &mut buf), Ok((f::Kind::File, 300, 300)), "fetch: a small file whole");
    c.check(buf[..300] == data[..300], "fetch: its bytes, as written");
    c.eq(f::fetch(srv, "/t/s", &mut buf[..299]), Ok((f::Kind::File, 300, 0)), "fetch: one byte more than asked: none");
    c.eq(f::close(srv, small), Ok(()), "close the small file");
    c.eq(f::remove(srv, "/t/s"), Ok(()), "remove it");
    c.eq(f::remove(srv, "/t/x"), Err(Error::BadState), "an open file cannot be removed");
    c.eq(f::remove(srv, "/t"), Err(Error::BadState), "nor a directory that is not empty");
    c.eq(f::close(srv, h), Ok(()), "close");
    c.eq(f::close(srv, h), Err(Error::InvalidCap), "a closed handle is gone");
    c.eq(f::read(srv, 9999, 0, 10).map(|b| b.len()), Err(Error::InvalidCap), "an unknown handle");
    c.eq(f::open(srv, "/missing", false).err(), Some(Error::NotFound), "no such file");
    c.eq(f::open(srv, "/t", false).err(), Some(Error::InvalidArg), "a directory is not opened as a file");
    c.eq(f::open(srv, "/no/such/dir/x", true).err(), Some(Error::NotFound), "no such directory");
    c.eq(f::mkdir(srv, "/bad/../name"), Err(Error::NotFound), "a path through a missing directory");
    c.eq(f::remove(srv, "/t/x"), Ok(()), "remove the file");
    c.eq(f::remove(srv, "/t"), Ok(()), "and the directory");
    c.eq(f::sync(srv), Ok(()), "sync");
    durability(&mut c, srv);
    hostile(&mut c, srv);

    library(&mut c);
    // Rewrite a file's first block last, then reopen it: the rewrite must be what reads
    // back (update_peer lost it once when it stopped right after such a rewrite).
    for n in [259u64, 260, 300] {
        let path = alloc::format!("/rw{n}");
        let mut k = 0;
        let (r, wrote) = tests::update_writer(
            srv,
            &path,
            b'r',
            || {
                k += 1;
                k > n
            },
            |_| {},
        );
        c.eq((r, wrote), (Ok(()), n), &alloc::format!("{path}: {n} chunks written and read back one by one"));
        c.check(
            tests::update_check(srv, &path, b'r', n),
            &alloc::format!("{path}: after close and reopen, every place holds its last chunk"),
        );
    }
    c.finish("files_test")
}

/// FSYNC of one handle and RENAME: an editor's atomic replace (write a temporary file,
/// fsync it, rename it over the old one), moves across directories, and the refusals.
fn durability(c: &mut Checks, srv: u64) {
    c.eq(f::mkdir(srv, "/r"), Ok(()), "mkdir /r");
    c.eq(f::mkdir(srv, "/r/sub"), Ok(()), "mkdir /r/sub");
    let (h, _) = f::open(srv, "/r/doc", true).unwrap_or((0, 0));
    c.eq(f::write(srv, h, 0, b"old text"), Ok(8), "write the old version");
    c.eq(f::close(srv, h), Ok(()), "close it");
    let (t, _) = f::open(srv, "/r/doc.tmp", true).unwrap_or((0, 0));
    c.eq(f::write(srv, t, 0, b"the new text"), Ok(12), "write the new version to a temporary file");
    c.eq(f::fsync(srv, t), Ok(()), "FSYNC the temporary file's handle");
    c.eq(f::fsync(srv, 9999), Err(Error::InvalidCap), "FSYNC of an unknown handle");
    c.eq(f::rename(srv, "/r/doc.tmp", "/r/doc"), Ok(()), "RENAME it over the old file (the temporary one is open)");
    c.eq(f::read(srv, t, 0, 100).as_deref(), Ok(&b"the new text"[..]), "the handle follows the file");
    c.eq(f::close(srv, t), Ok(()), "close it");
    c.eq(f::read_all(srv, "/r/doc").as_deref(), Ok(&b"the new text"[..]), "the name holds the new text");
    c.eq(f::stat(srv, "/r/doc.tmp").err(), Some(Error::NotFound), "the temporary name is gone");
    c.eq(f::rename(srv, "/r/doc", "/r/sub/moved"), Ok(()), "RENAME across directories");
    c.eq(f::read_all(srv, "/r/sub/moved").as_deref(), Ok(&b"the new text"[..]), "it reads there");
    let (o, _) = f::open(srv, "/r/open", true).unwrap_or((0, 0));
    c.eq(f::rename(srv, "/r/sub/moved", "/r/open"), Err(Error::BadState), "a file open here is not replaced");
    c.eq(f::close(srv, o), Ok(()), "close it");
    c.eq(f::rename(srv, "/r", "/r/sub/r"), Err(Error::InvalidArg), "a directory does not move into itself");
    c.eq(f::rename(srv, "/r/sub", "/r/open"), Err(Error::InvalidArg), "a directory over a file");
    c.eq(f::rename(srv, "/r/missing", "/r/x"), Err(Error::NotFound), "no such file");
    c.eq(f::rename(srv, "/r/sub", "/r2"), Ok(()), "a directory moves with what it holds");
    c.eq(f::read_all(srv, "/r2/moved").as_deref(), Ok(&b"the new text"[..]), "its file reads at the new path");
    c.eq(
        raw_request(srv, files_api::RENAME, &[], Some(b"/r/open")),
        Err(Error::Malformed),
        "RENAME without the NUL between two paths: Malformed",
    );
    for p in ["/r2/moved", "/r2", "/r/open", "/r"] {
        c.eq(f::remove(srv, p), Ok(()), &alloc::format!("remove {p}"));
    }
}

/// Requests no client stub sends: each gets its error, and the server goes on serving.
fn hostile(c: &mut Checks, srv: u64) {
    let (h, _) = f::open(srv, "/disk/hello.txt", false).unwrap_or((0, 0));
    c.eq(raw_request(srv, 0xee, &[1, 2, 3], None), Err(Error::Unsupported), "an unknown label: Unsupported");
    c.eq(
        raw_request(srv, files_api::READ, &[h], None),
        Err(Error::Malformed),
        "READ with one word of three: Malformed",
    );
    c.eq(raw_request(srv, files_api::OPEN, &[0], None), Err(Error::Malformed), "OPEN without a path string: Malformed");
    c.eq(
        raw_request(srv, files_api::OPEN, &[0], Some(&[0xff, 0xfe, b'/'])),
        Err(Error::Malformed),
        "a path that is not UTF-8: Malformed",
    );
    c.eq(
        raw_request(srv, files_api::FETCH, &[64], None),
        Err(Error::Malformed),
        "FETCH without a path string: Malformed",
    );
    c.eq(
        raw_request(srv, files_api::FETCH, &[], Some(b"/disk")),
        Err(Error::Malformed),
        "FETCH without its most: Malformed",
    );
    // Only root's own capability (badge 0) may say a client is gone.
    let me = rt::server::Badge::client(1, 0).map_or(0, |b| b.0);
    c.eq(raw_request(srv, rt::server::GONE, &[me], None), Err(Error::Unsupported), "GONE from a client is refused");
    c.eq(f::read(srv, h, 0, 5).as_deref(), Ok(&b"hello"[..]), "the handle opened before still reads");
    c.eq(f::close(srv, h), Ok(()), "and closes");
}

/// baiofs linked into this program, on segment `junk`.
fn library(c: &mut Checks) {
    let blk = rt::alloc_slot();
    c.eq(env::lookup("blk", blk), Ok(()), "find the block service");
    let Ok(seg) = baio::open(blk, "junk", 3, 0x0000_5c00_0000_0000) else {
        c.check(false, "open segment junk");
        return;
    };
    let fs = Fs::format(SegDev::new(seg, blk));
    c.check(fs.is_ok(), "format baiofs on our own segment");
    let Ok(mut fs) = fs else { return };
    let data = pattern(40 * 4096, 9);
    c.eq(fs.create("/big", Kind::File).map(|_| ()), Ok(()), "create a file");
    c.eq(fs.write("/big", 0, &data), Ok(data.len()), "write 40 blocks");
    c.eq(fs.sync(), Ok(()), "sync");
    // Mount again (nothing cached) and let the application steer.
    let fs2 = Fs::mount(fs.dev);
    c.check(fs2.is_ok(), "mount it again");
    let Ok(mut fs) = fs2 else { return };
    fs.set_cache_blocks(48);
    c.eq(fs.prefetch("/big", 0, data.len() as u64), Ok(()), "prefetch the whole file (asynchronous BAIO reads)");
    let mut back = alloc::vec![0u8; data.len()];
    c.eq(fs.read("/big", 0, &mut back), Ok(data.len()), "read it");
    c.check(back == data, "the data is right");
    c.check(fs.dev.prefetch_hits >= 40, "every block came from the prefetch");
    c.eq(fs.set_policy("/big", Policy::Keep), Ok(()), "keep it cached");
    let s = fs.cache_stats();
    c.eq(fs.read("/big", 0, &mut back), Ok(data.len()), "read it again");
    c.eq(fs.cache_stats().misses, s.misses, "from the library's cache only");
    c.eq(fs.set_policy("/big", Policy::NoCache), Ok(()), "now around the cache");
    c.eq(fs.read("/big", 0, &mut back), Ok(data.len()), "read it once more");
    c.check(back == data && fs.cache_stats().misses >= s.misses + 40, "straight from the disk, still right");
    let seg = fs.dev.seg;
    c.eq(seg.close(), Ok(()), "close the segment");
}
