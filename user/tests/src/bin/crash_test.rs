//! `crash_test BOOT SEED`: the storage stack under power cuts. It makes, writes
//! (direct and buffered) and deletes BAIO segments and creates, writes and removes
//! files through `files`, forever, with a line on the serial port before each
//! operation (`CRASH n <op>`: what and, for writes, the FNV-1a of the bytes and of each
//! 512-byte sector) and one when it is acknowledged (`CRASH n ok`, or `CRASH n failed
//! ERR`); every sixth operation is a `sync` (files' `SYNC` and each segment's). The host
//! kills the machine at a random moment on a disk whose write cache the cut loses
//! (xtask's `cachedisk`), checks that it holds every operation acknowledged before the
//! last sync and, of the later ones, each as before or as after (a block's sectors each
//! old or new), and boots the next round on the same disk (xtask's `crash` check).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use blk_api as p;
use blk_api::client as baio;
use core::fmt::Write as _;
use files_api::client as f;
use rt::{env, println};

use tests::Rng;

rt::entry!(main);

const AREA: u64 = rt::layout::SEGMENT_AREA;
const MAX_SEGMENTS: usize = 6;
const MAX_FILES: usize = 40;

fn main() -> i32 {
    let mut args = rt::args().split(' ').skip(1);
    let boot: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let mut rng =
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ boot.wrapping_add(1).wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
    let (blk, files) = (rt::alloc_slot(), rt::alloc_slot());
    if env::lookup("blk", blk).is_err() || env::lookup("files", files).is_err() {
        println!("CRASH cannot find blk and files");
        return 1;
    }
    let _ = f::mkdir(files, "/crash");
    // What earlier boots left: segments named k…, files in /crash (size 0: not written).
    let mut segs: Vec<(String, u64)> = baio::list(blk)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut w = l.split(' ');
            let (name, len) = (w.next()?, w.next()?.parse().ok()?);
            name.starts_with('k').then(|| (String::from(name), len))
        })
        .collect();
    let mut fl: Vec<(String, bool)> = f::list(files, "/crash")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut w = l.split(' ');
            let (_, size, name) = (w.next()?, w.next()?.parse::<u64>().ok()?, w.next()?);
            Some((format!("/crash/{name}"), size > 0))
        })
        .collect();
    println!("CRASH start boot {} with {} segments and {} files", boot, segs.len(), fl.len());
    let mut made = 0u64;
    for n in 1u64.. {
        let pick = rng.below(10);
        let r = match pick {
            _ if n % 6 == 0 => {
                println!("CRASH {n} sync");
                f::sync(files).and_then(|_| {
                    segs.iter().try_for_each(|(name, _)| {
                        let s = baio::open(blk, name, 3, AREA)?;
                        let r = s.sync();
                        let _ = s.close();
                        r
                    })
                })
            }
            0 | 1 if segs.len() < MAX_SEGMENTS => {
                made += 1;
                let (name, len) = (format!("k{boot}x{made}"), 8 + rng.below(57));
                println!("CRASH {n} create {name} {len}");
                let r = baio::create(blk, &name, len, 0);
                if r.is_ok() {
                    segs.push((name, len));
                }
                r
            }
            0..=2 if !segs.is_empty() => {
                let (name, _) = segs.remove(rng.below(segs.len() as u64) as usize);
                println!("CRASH {n} delete {name}");
                baio::delete(blk, &name)
            }
            3..=5 if !segs.is_empty() => {
                let (name, len) = segs[rng.below(segs.len() as u64) as usize].clone();
                let block = rng.below(len);
                match baio::open(blk, &name, 3, AREA) {
                    Ok(s) => {
                        for b in s.data(0)[..4096].iter_mut() {
                            *b = rng.next() as u8;
                        }
                        let buffered = rng.below(2) == 1;
                        let kind = if buffered { p::WRITE_OP | p::BUFFERED } else { p::WRITE_OP };
                        let mut sectors = String::new();
                        for (i, c) in s.data(0)[..4096].chunks(512).enumerate() {
                            let _ = write!(sectors, "{}{:x}", if i > 0 { "," } else { "" }, ::baio::checksum(c));
                        }
                        println!(
                            "CRASH {n} write {name} {block} {:x} {} {sectors}",
                            ::baio::checksum(&s.data(0)[..4096]),
                            if buffered { "buffered" } else { "direct" }
                        );
                        let r = s.batch(&[(kind, block, 1)]).and_then(|_| {
                            if s.wait(0) == p::DONE {
                                Ok(())
                            } else {
                                Err(abi::Error::BadState)
                            }
                        });
                        let _ = s.close();
                        r
                    }
                    Err(e) => {
                        println!("CRASH {n} open {name}");
                        Err(e)
                    }
                }
            }
            6 | 7 if fl.len() < MAX_FILES => {
                let path = format!("/crash/f{boot}x{n}");
                println!("CRASH {n} fcreate {path}");
                let r = f::open(files, &path, true).and_then(|(h, _)| f::close(files, h));
                if r.is_ok() {
                    fl.push((path, false));
                }
                r
            }
            6..=8 if !fl.is_empty() => {
                let (path, _) = fl.remove(rng.below(fl.len() as u64) as usize);
                println!("CRASH {n} fremove {path}");
                f::remove(files, &path)
            }
            _ => match fl.iter().position(|(_, w)| !w) {
                Some(i) => {
                    let len = 1 + rng.below(12 * 1024) as usize;
                    let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                    let path = fl[i].0.clone();
                    fl[i].1 = true;
                    println!("CRASH {n} fwrite {path} {len} {:x}", ::baio::checksum(&data));
                    // Acknowledged once CLOSE answers Ok (WRITE's Ok alone may be a
                    // write kept back).
                    f::open(files, &path, false).and_then(|(h, _)| {
                        let r = f::write(files, h, 0, &data).map(|_| ());
                        let closed = f::close(files, h);
                        r.and(closed)
                    })
                }
                None => {
                    println!("CRASH {n} nothing");
                    Ok(())
                }
            },
        };
        match r {
            Ok(()) => println!("CRASH {n} ok"),
            Err(e) => println!("CRASH {n} failed {}", e.name()),
        }
    }
    0
}
