//! The power-cut check: `crash_test` works on a disk — segments created,
//! written (direct and buffered) and deleted through `blk`, files created, written and
//! removed through `files`, and every sixth operation a `sync` — saying on the serial
//! port what it starts and what is acknowledged. The disk is `cachedisk`'s, served over
//! NBD: it keeps every write since the last flush in a volatile cache. The host kills
//! QEMU (SIGKILL: no shutdown, nothing flushed by the guest) at a random operation and a
//! random moment in it; the cut keeps a random subset of the unflushed sector writes
//! (tearing 4 KiB writes at 512 bytes). Then it checks the disk image: it must mount (an
//! interrupted update may be left for the mount to finish), with no problem for `fsck`,
//! and hold every operation acknowledged before the last acknowledged `sync`; each later
//! one (and the one under way) may have happened or not — a segment or file as before
//! or as after it, a block's sectors each old or new, a file's bytes whole (ordered
//! data). The next boot goes on on the same disk, from what the cut left.
//! `SCION_CRASH_KILLS` sets the number of kills (20).

use super::scenarios::{make_disk, Result1, Scenario};
use crate::qemu::{self, Options};
use crate::{cachedisk, make_image, out_dir, Artifacts};
use baio::{MemDev, Volume, BLOCK};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

/// The FNV-1a of each 512-byte sector of a block.
type Sectors = [u64; BLOCK / cachedisk::SECTOR];

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Create(String, u64),
    Delete(String),
    Write(String, u64, Sectors),
    FCreate(String),
    FRemove(String),
    FWrite(String, u64, u64),
    Sync,
    Other,
}

fn parse(op: &str) -> Op {
    let w: Vec<&str> = op.split(' ').collect();
    let num = |i: usize| w.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    let hex = |i: usize| w.get(i).and_then(|s| u64::from_str_radix(s, 16).ok()).unwrap_or(0);
    let s = |i: usize| w.get(i).unwrap_or(&"").to_string();
    let sectors = |i: usize| -> Option<Sectors> {
        let v: Vec<u64> = w.get(i)?.split(',').map(|h| u64::from_str_radix(h, 16).ok()).collect::<Option<_>>()?;
        v.try_into().ok()
    };
    match w[0] {
        "create" => Op::Create(s(1), num(2)),
        "delete" => Op::Delete(s(1)),
        "write" => sectors(5).map_or(Op::Other, |x| Op::Write(s(1), num(2), x)),
        "fcreate" => Op::FCreate(s(1)),
        "fremove" => Op::FRemove(s(1)),
        "fwrite" => Op::FWrite(s(1), num(2), hex(3)),
        "sync" => Op::Sync,
        _ => Op::Other,
    }
}

/// A file: absent, present with no bytes written, or written (length, hash).
type FileState = Option<Option<(u64, u64)>>;

/// What the disk holds for sure (after the last sync): segments (length, block →
/// its sectors' hashes) and files.
#[derive(Default)]
struct Model {
    segs: BTreeMap<String, (u64, BTreeMap<u64, Sectors>)>,
    files: BTreeMap<String, Option<(u64, u64)>>,
}

impl Model {
    fn apply(&mut self, op: &Op) {
        match op {
            Op::Create(n, l) => {
                self.segs.insert(n.clone(), (*l, BTreeMap::new()));
            }
            Op::Delete(n) => {
                self.segs.remove(n);
            }
            Op::Write(n, b, h) => {
                if let Some(s) = self.segs.get_mut(n) {
                    s.1.insert(*b, *h);
                }
            }
            Op::FCreate(p) => {
                self.files.insert(p.clone(), None);
            }
            Op::FRemove(p) => {
                self.files.remove(p);
            }
            Op::FWrite(p, l, h) => {
                self.files.insert(p.clone(), Some((*l, *h)));
            }
            Op::Sync | Op::Other => {}
        }
    }
}

/// The operations of one boot's log: (those acknowledged up to the last acknowledged
/// `sync`, durable; those after it, acknowledged or under way, in order: each may have
/// happened or not). Only whole lines count: the kill can cut the last one short
/// ("CRASH 51 o"), and the program was still printing it, so what it says has not
/// happened yet.
fn operations(log: &str) -> (Vec<Op>, Vec<Op>) {
    let mut started: BTreeMap<u64, Op> = BTreeMap::new();
    let mut done = Vec::new();
    let mut last = None;
    for l in log.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
        let Some(rest) = l.trim().strip_prefix("CRASH ") else { continue };
        let Some((n, what)) = rest.split_once(' ') else { continue };
        let Ok(n) = n.parse::<u64>() else { continue };
        match what {
            "ok" => {
                if let Some(op) = started.remove(&n) {
                    done.push(op);
                }
                last = None;
            }
            w if w.starts_with("failed") => {
                started.remove(&n);
                last = None;
            }
            w => {
                let op = parse(w);
                started.insert(n, op.clone());
                last = Some(op);
            }
        }
    }
    let synced = done.iter().rposition(|o| *o == Op::Sync).map_or(0, |i| i + 1);
    let mut maybe = done.split_off(synced);
    maybe.extend(last);
    maybe.retain(|o| !matches!(o, Op::Sync | Op::Other));
    (done, maybe)
}

/// Check the image against the model and the operations that may have happened (each
/// thing on the disk as the model has it or as one of them left it), then make the model
/// what the disk shows. Returns a summary.
fn verify(img: &[u8], m: &mut Model, maybe: &[Op]) -> Result<String, String> {
    let e = Volume::examine(&mut MemDev(img.to_vec()));
    if !e.problems.is_empty() {
        return Err(format!("the disk does not mount: {:?}", e.problems));
    }
    let mut dev = MemDev(img.to_vec());
    let v = Volume::mount(&mut dev).map_err(|e| format!("mount: {e:?}"))?;
    let zero = baio::checksum(&[0u8; cachedisk::SECTOR]);
    let sectors_of = |start: u64, written: u64, b: u64| -> Sectors {
        let mut h = [zero; BLOCK / cachedisk::SECTOR];
        if b < written {
            let at = (start + b) as usize * BLOCK;
            for (i, c) in dev.0[at..at + BLOCK].chunks(cachedisk::SECTOR).enumerate() {
                h[i] = baio::checksum(c);
            }
        }
        h
    };
    let present: BTreeMap<String, (u64, u64, u64)> = v
        .list()
        .filter(|i| i.name.starts_with('k'))
        .map(|i| (i.name.clone(), (i.start, i.length, i.written)))
        .collect();
    // Segments: each as the model has it or as a later create or delete left it.
    let mut names: BTreeSet<String> = m.segs.keys().chain(present.keys()).cloned().collect();
    for op in maybe {
        if let Op::Create(n, _) | Op::Delete(n) = op {
            names.insert(n.clone());
        }
    }
    for name in &names {
        let mut allowed = vec![m.segs.get(name).map(|s| s.0)];
        for op in maybe {
            match op {
                Op::Create(n, l) if n == name => allowed.push(Some(*l)),
                Op::Delete(n) if n == name => allowed.push(None),
                _ => {}
            }
        }
        let got = present.get(name).map(|p| p.1);
        if !allowed.contains(&got) {
            return Err(match (m.segs.get(name), got) {
                (Some(_), None) => format!("segment {name}, created before the last sync, is gone"),
                (None, Some(_)) => format!("segment {name} was never made (may have: {maybe:?})"),
                _ => format!("segment {name} has {got:?} blocks, allowed {allowed:?}"),
            });
        }
        match got {
            None => {
                m.segs.remove(name);
            }
            Some(len) if m.segs.get(name).is_none_or(|s| s.0 != len) => {
                m.segs.insert(name.clone(), (len, BTreeMap::new()));
            }
            Some(_) => {}
        }
    }
    // Their blocks: each sector as the model has it (zeros if never written) or as a
    // later write left it.
    let mut blocks = 0;
    for (name, (start, _, written)) in &present {
        let seg = m.segs.get_mut(name).expect("checked above");
        let mut bs: BTreeSet<u64> = seg.1.keys().copied().collect();
        for op in maybe {
            if let Op::Write(n, b, _) = op {
                if n == name && *b < seg.0 {
                    bs.insert(*b);
                }
            }
        }
        for b in bs {
            let got = sectors_of(*start, *written, b);
            let had = seg.1.get(&b).copied().unwrap_or([zero; BLOCK / cachedisk::SECTOR]);
            for (i, g) in got.iter().enumerate() {
                let later =
                    maybe.iter().any(|op| matches!(op, Op::Write(n, c, h) if n == name && *c == b && h[i] == *g));
                if *g != had[i] && !later {
                    return Err(format!(
                        "segment {name}, block {b}, sector {i}: neither what the last sync made durable nor a later write"
                    ));
                }
            }
            seg.1.insert(b, got);
            blocks += 1;
        }
    }
    // The files filesystem.
    let fi = v.lookup("files").ok_or("the files segment is gone")?;
    let at = fi.start as usize * BLOCK;
    let fsdata = dev.0[at..at + fi.length as usize * BLOCK].to_vec();
    let fe = baiofs::Fs::examine(MemDev(fsdata.clone())).map_err(|e| format!("baiofs: {e:?}"))?;
    if !fe.problems.is_empty() {
        return Err(format!("the files filesystem does not mount: {:?}", fe.problems));
    }
    let mut fs = baiofs::Fs::mount(MemDev(fsdata)).map_err(|e| format!("baiofs mount: {e:?}"))?;
    let listed: BTreeMap<String, u64> =
        fs.list("/crash").unwrap_or_default().into_iter().map(|e| (format!("/crash/{}", e.name), e.size)).collect();
    let content = |fs: &mut baiofs::Fs<MemDev>, p: &str, len: u64| -> u64 {
        let mut b = vec![0u8; len as usize];
        let n = fs.read(p, 0, &mut b).unwrap_or(0);
        baio::checksum(&b[..n])
    };
    let mut paths: BTreeSet<String> = m.files.keys().chain(listed.keys()).cloned().collect();
    for op in maybe {
        if let Op::FCreate(p) | Op::FRemove(p) | Op::FWrite(p, ..) = op {
            paths.insert(p.clone());
        }
    }
    for p in &paths {
        let mut allowed: Vec<FileState> = vec![m.files.get(p).cloned()];
        for op in maybe {
            match op {
                Op::FCreate(q) if q == p => allowed.push(Some(None)),
                Op::FRemove(q) if q == p => allowed.push(None),
                Op::FWrite(q, l, h) if q == p => allowed.push(Some(Some((*l, *h)))),
                _ => {}
            }
        }
        let got: FileState = match listed.get(p) {
            None => None,
            Some(0) => Some(None),
            Some(&size) => Some(Some((size, content(&mut fs, p, size)))),
        };
        if !allowed.contains(&got) {
            return Err(match got {
                None => format!("file {p}, there at the last sync, is gone"),
                Some(None) if !m.files.contains_key(p) => {
                    format!("file {p} was never made (may have: {maybe:?})")
                }
                Some(None) => format!("file {p} is empty; it was written before the last sync"),
                Some(Some((l, _))) => {
                    format!("file {p} has {l} bytes that are neither those synced nor a later write's whole")
                }
            });
        }
        match got {
            None => m.files.remove(p),
            Some(f) => m.files.insert(p.clone(), f),
        };
    }
    Ok(format!(
        "{} segments ({blocks} written blocks) and {} files as synced or after; {} interrupted updates for the mount",
        present.len(),
        listed.len(),
        e.unfinished.len() + fe.unfinished.len()
    ))
}

/// The test's random numbers: xorshift64 from `seed` (made odd, so never stuck at 0).
pub(super) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut rng = seed | 1;
    move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    }
}

/// The disk's device on boot `boot` of a power-cut run.
pub(super) fn drive(boot: u64) -> &'static str {
    if boot.is_multiple_of(2) {
        "NVMe"
    } else {
        "virtio-blk"
    }
}

/// One boot of a power-cut run on `disk`: `sc`'s image, the disk behind a virtio-blk
/// device on odd boots and an NVMe controller on even ones (the flush ordering must hold
/// on both drivers), QEMU killed `at.1` ms after the text `at.0` appears (or at `limit`),
/// then the cut: what the disk's cache held and did not flush, in part. The boot's
/// outcome, the cut, and how many times the disk flushed.
pub(super) fn kill_boot(
    a: &Artifacts,
    sc: &Scenario,
    disk: &Path,
    boot: u64,
    at: (&str, u64),
    limit: Duration,
    next: &mut impl FnMut() -> u64,
) -> Result<(qemu::Outcome, cachedisk::Cut, u64), String> {
    let img = make_image(a, &sc.manifest, &sc.name)?;
    let served = cachedisk::serve(disk)?;
    let opts = Options {
        disk_nbd: Some(served.socket.clone()),
        disk_nvme: boot.is_multiple_of(2),
        ..Options::new(qemu::accel(), false, String::new(), Some(disk.to_path_buf()))
    };
    let delay = at.1;
    let mut wait = |_: &qemu::Typer| std::thread::sleep(Duration::from_millis(delay));
    let out = qemu::run_at(&a.kernel, &img, &opts, limit, None, Some((at.0, &mut wait)));
    let (cut, flushes) = served.end(disk, &mut *next)?;
    Ok((out?, cut, flushes))
}

/// Kill-and-check rounds on one disk; one result per kill.
pub fn run(a: &Artifacts, seed: u64) -> Result<(Vec<Result1>, String), String> {
    let kills: u64 = std::env::var("SCION_CRASH_KILLS").ok().and_then(|k| k.parse().ok()).unwrap_or(20);
    let logs = out_dir().join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let load = |boot: u64| {
        Scenario::load("crash", &[("BOOT", boot.to_string()), ("SEED", seed.to_string())])
            .map(|s| Scenario { name: format!("crash-{boot}"), ..s })
    };
    let disk = make_disk(&load(1)?)?.ok_or("the crash scenario has no disk")?;
    let mut next = xorshift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut model = Model::default();
    let mut res = Vec::new();
    let log_path = logs.join("crash.log");
    let mut all_logs = String::new();
    for boot in 1..=kills {
        let (op, delay) = (2 + next() % 30, next() % 120);
        let marker = format!("CRASH {op} ");
        let (out, cut, flushes) =
            kill_boot(a, &load(boot)?, &disk, boot, (&marker, delay), Duration::from_secs(120), &mut next)?;
        all_logs.push_str(&format!(
            "===== boot {boot} ({}): killed at operation {op} + {delay} ms; the disk flushed {flushes} times, and the cut lost {} of {} sectors written since the last flush (kept {} at an earlier write)\n{}\n",
            drive(boot),
            cut.lost,
            cut.unflushed,
            cut.older,
            out.log
        ));
        let name = format!("crash/kill {boot} ({}, operation {op} + {delay} ms)", drive(boot));
        let started = out.log.contains(&format!("CRASH start boot {boot} "));
        let detail = if out.timed_out || out.status.is_some() || !started {
            Err(format!(
                "the machine did not get to operation {op} (status {:?}, timed out: {})",
                out.status, out.timed_out
            ))
        } else if boot > 1 && !out.log.contains("blk: mounted") {
            Err("blk did not mount the disk the last kill left".into())
        } else {
            let (done, maybe) = operations(&out.log);
            for o in &done {
                model.apply(o);
            }
            let img = std::fs::read(&disk).map_err(|e| e.to_string())?;
            verify(&img, &mut model, &maybe).map(|s| {
                format!(
                    "{} operations synced, {} after; the cut lost {} of {} unflushed sectors; {s}",
                    done.len(),
                    maybe.len(),
                    cut.lost,
                    cut.unflushed
                )
            })
        };
        let ok = detail.is_ok();
        if ok {
            println!("    {name}: {}", detail.as_ref().unwrap());
        }
        res.push(Result1 { name, ok, detail: detail.err().unwrap_or_default() });
        if !ok {
            break;
        }
    }
    std::fs::write(&log_path, all_logs).map_err(|e| e.to_string())?;
    Ok((res, log_path.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_cut_by_the_kill_does_not_count_and_what_follows_the_last_sync_may_be_lost() {
        // The kill cut "ok" short: the delete is still the operation under way (it may
        // have happened or not), not forgotten.
        let log = "CRASH 49 sync\nCRASH 49 ok\nCRASH 50 fcreate /crash/f10x50\nCRASH 50 ok\nCRASH 51 delete k10x13\nCRASH 51 o";
        let (done, maybe) = operations(log);
        assert_eq!(done, vec![Op::Sync]);
        assert_eq!(maybe, vec![parse("fcreate /crash/f10x50"), Op::Delete("k10x13".into())]);
        // A cut start line: that operation was never sent.
        let (done, maybe) = operations("CRASH 50 ok\nCRASH 51 dele");
        assert!(done.is_empty() && maybe.is_empty());
        // A sync acknowledged: what came before it is durable; an unanswered one is not.
        let log =
            "CRASH 1 fcreate /a\nCRASH 1 ok\nCRASH 2 sync\nCRASH 2 ok\nCRASH 3 fremove /a\nCRASH 3 ok\nCRASH 4 sync\n";
        let (done, maybe) = operations(log);
        assert_eq!(done, vec![Op::FCreate("/a".into()), Op::Sync]);
        assert_eq!(maybe, vec![Op::FRemove("/a".into())]);
        let w = parse("write k1x2 5 abc direct 1,2,3,4,5,6,7,8");
        assert_eq!(w, Op::Write("k1x2".into(), 5, [1, 2, 3, 4, 5, 6, 7, 8]));
        assert_eq!(parse("write k1x2 5 abc direct 1,2"), Op::Other, "sectors missing");
    }
}
