//! The power-cut check: `crash_test` works on a disk — segments created,
//! written (direct and buffered) and deleted through `blk`, files created, written and
//! removed through `files` — saying on the serial port what it starts and what is
//! acknowledged. The host kills QEMU (SIGKILL: no shutdown, nothing flushed by the
//! guest) at a random operation and a random moment in it, then checks the disk image:
//! it must mount (an interrupted update may be left for the mount to finish), with
//! no problem for `fsck`, and hold every acknowledged operation; the one operation
//! under way may have happened or not. The next boot goes on on the same disk.
//! `SCION_CRASH_KILLS` sets the number of kills (20).

use super::scenarios::{make_disk, Result1, Scenario};
use crate::qemu::{self, Options};
use crate::{make_image, out_dir, Artifacts};
use baio::{MemDev, Volume, BLOCK};
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Create(String, u64),
    Delete(String),
    Write(String, u64, u64),
    FCreate(String),
    FRemove(String),
    FWrite(String, u64, u64),
    Other,
}

fn parse(op: &str) -> Op {
    let w: Vec<&str> = op.split(' ').collect();
    let num = |i: usize| w.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    let hex = |i: usize| w.get(i).and_then(|s| u64::from_str_radix(s, 16).ok()).unwrap_or(0);
    let s = |i: usize| w.get(i).unwrap_or(&"").to_string();
    match w[0] {
        "create" => Op::Create(s(1), num(2)),
        "delete" => Op::Delete(s(1)),
        "write" => Op::Write(s(1), num(2), hex(3)),
        "fcreate" => Op::FCreate(s(1)),
        "fremove" => Op::FRemove(s(1)),
        "fwrite" => Op::FWrite(s(1), num(2), hex(3)),
        _ => Op::Other,
    }
}

/// What the disk must hold: segments (length, block → hash of its bytes) and files
/// (written: length and hash).
#[derive(Default)]
struct Model {
    segs: BTreeMap<String, (u64, BTreeMap<u64, u64>)>,
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
            Op::Other => {}
        }
    }
}

/// The operations of one boot's log: (acknowledged in order, the one under way). Only
/// whole lines count: the kill can cut the last one short ("CRASH 51 o"), and the
/// program was still printing it, so what it says has not happened yet.
fn operations(log: &str) -> (Vec<Op>, Option<Op>) {
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
    (done, last)
}

/// Check the image against the model (the operation under way may go either way; the
/// model follows what the disk shows for it). Returns a summary.
fn verify(img: &[u8], m: &mut Model, under_way: Option<&Op>) -> Result<String, String> {
    let e = Volume::examine(&mut MemDev(img.to_vec()));
    if !e.problems.is_empty() {
        return Err(format!("the disk does not mount: {:?}", e.problems));
    }
    let mut dev = MemDev(img.to_vec());
    let v = Volume::mount(&mut dev).map_err(|e| format!("mount: {e:?}"))?;
    let block_hash = |start: u64, written: u64, b: u64| -> u64 {
        if b >= written {
            baio::checksum(&[0u8; BLOCK])
        } else {
            let at = (start + b) as usize * BLOCK;
            baio::checksum(&dev.0[at..at + BLOCK])
        }
    };
    let present: BTreeMap<String, (u64, u64, u64)> = v
        .list()
        .filter(|i| i.name.starts_with('k'))
        .map(|i| (i.name.clone(), (i.start, i.length, i.written)))
        .collect();
    for name in m.segs.keys().cloned().collect::<Vec<_>>() {
        if !present.contains_key(&name) {
            if under_way == Some(&Op::Delete(name.clone())) {
                m.segs.remove(&name);
                continue;
            }
            return Err(format!("acknowledged segment {name} is gone"));
        }
    }
    let mut blocks = 0;
    for (name, (start, len, written)) in &present {
        let Some(seg) = m.segs.get_mut(name) else {
            if under_way == Some(&Op::Create(name.clone(), *len)) {
                m.segs.insert(name.clone(), (*len, BTreeMap::new()));
                continue;
            }
            return Err(format!("segment {name} was never acknowledged (under way: {under_way:?})"));
        };
        if seg.0 != *len {
            return Err(format!("segment {name} has {len} blocks, {} were acknowledged", seg.0));
        }
        if let Some(Op::Write(n, b, h)) = under_way {
            if n == name && block_hash(*start, *written, *b) == *h {
                seg.1.insert(*b, *h);
            }
        }
        for (b, h) in &seg.1 {
            if block_hash(*start, *written, *b) != *h {
                return Err(format!("segment {name}, block {b}: not the acknowledged write"));
            }
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
    for p in m.files.keys().cloned().collect::<Vec<_>>() {
        if !listed.contains_key(&p) {
            if under_way == Some(&Op::FRemove(p.clone())) {
                m.files.remove(&p);
                continue;
            }
            return Err(format!("acknowledged file {p} is gone"));
        }
    }
    for (p, size) in &listed {
        let Some(f) = m.files.get(p).cloned() else {
            if under_way == Some(&Op::FCreate(p.clone())) {
                m.files.insert(p.clone(), None);
                continue;
            }
            return Err(format!("file {p} was never acknowledged (under way: {under_way:?})"));
        };
        if let Some(Op::FWrite(q, l, h)) = under_way {
            if q == p && *size == *l && content(&mut fs, p, *l) == *h {
                m.files.insert(p.clone(), Some((*l, *h)));
                continue;
            }
        }
        match f {
            None if *size == 0 => {}
            None => return Err(format!("file {p} has {size} bytes; none were acknowledged")),
            Some((l, h)) => {
                if *size != l || content(&mut fs, p, l) != h {
                    return Err(format!("file {p}: not the acknowledged {l} bytes"));
                }
            }
        }
    }
    Ok(format!(
        "{} segments ({blocks} written blocks) and {} files as acknowledged; {} interrupted updates for the mount",
        present.len(),
        listed.len(),
        e.unfinished.len() + fe.unfinished.len()
    ))
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
    let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut model = Model::default();
    let mut res = Vec::new();
    let log_path = logs.join("crash.log");
    let mut all_logs = String::new();
    for boot in 1..=kills {
        let sc = load(boot)?;
        let img = make_image(a, &sc.manifest, &sc.name)?;
        let opts = Options::new(qemu::accel(), false, String::new(), Some(disk.clone()));
        let (op, delay) = (2 + next() % 30, next() % 120);
        let marker = format!("CRASH {op} ");
        let mut wait = |_: &qemu::Typer| std::thread::sleep(Duration::from_millis(delay));
        let out = qemu::run_at(&a.kernel, &img, &opts, Duration::from_secs(120), None, Some((&marker, &mut wait)))?;
        all_logs.push_str(&format!("===== boot {boot}: killed at operation {op} + {delay} ms\n{}\n", out.log));
        let name = format!("crash/kill {boot} (operation {op} + {delay} ms)");
        let started = out.log.contains(&format!("CRASH start boot {boot} "));
        let detail = if out.timed_out || out.status.is_some() || !started {
            Err(format!(
                "the machine did not get to operation {op} (status {:?}, timed out: {})",
                out.status, out.timed_out
            ))
        } else if boot > 1 && !out.log.contains("blk: mounted") {
            Err("blk did not mount the disk the last kill left".into())
        } else {
            let (done, under_way) = operations(&out.log);
            for o in &done {
                model.apply(o);
            }
            let img = std::fs::read(&disk).map_err(|e| e.to_string())?;
            verify(&img, &mut model, under_way.as_ref()).map(|s| format!("{} acknowledged operations; {s}", done.len()))
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
    fn a_line_cut_by_the_kill_does_not_count() {
        // The kill cut "ok" short: the delete is still the operation under way (it may
        // have happened or not), not forgotten.
        let log = "CRASH 50 fcreate /crash/f10x50\nCRASH 50 ok\nCRASH 51 delete k10x13\nCRASH 51 o";
        let (done, under_way) = operations(log);
        assert_eq!(done, vec![parse("fcreate /crash/f10x50")]);
        assert_eq!(under_way, Some(Op::Delete("k10x13".into())));
        // A cut start line: that operation was never sent.
        let (done, under_way) = operations("CRASH 50 ok\nCRASH 51 dele");
        assert!(done.is_empty());
        assert_eq!(under_way, None);
    }
}
