//! The model of a disk that caches writes, for the host tests that cut the power
//! (here, in `baiofs`, and for the logical disk's map).
//!
//! A device with a volatile write cache keeps no order among the writes it has not
//! flushed: a power cut may keep any subset of them, and a later write of a block may
//! be lost while an earlier write of another survives ([`BlockDev::flush`] is the only
//! barrier). A [`Recorder`] runs the code under test on an image in memory and records
//! every write, every flush and every point where the code acknowledged an operation;
//! [`crashes`] then hands out every state a cut could leave: for each run of writes
//! between two flushes, the image durable at its first flush with any subset of those
//! writes applied in order (every subset for up to `EVERY` writes; beyond, every prefix
//! and `SAMPLES` random subsets). A state reached mid-run is one of these (the writes
//! after the cut are simply not kept), so these are all of them.
//!
//! What a test asks of each state: that it mounts, checks clean once mounted, and holds
//! a consistent state in which every operation acknowledged before the last completed
//! flush happened ([`Crash::durable`] of them) and no operation not yet begun did.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use crate::{BlockDev, Error, MemDev, BLOCK};

/// Up to this many writes between two flushes, a cut's every subset is tried.
pub const EVERY: usize = 10;
/// Beyond, this many random subsets (and every prefix).
pub const SAMPLES: usize = 300;

/// What the device saw.
#[derive(Clone)]
pub enum Event {
    Write(u64, Box<[u8; BLOCK]>),
    Flush,
    /// The code under test acknowledged an operation (`Recorder::ack`).
    Ack,
}

/// A device in memory that records what is done to it (reads see every write).
pub struct Recorder {
    pub dev: MemDev,
    pub events: Vec<Event>,
}

impl Recorder {
    pub fn new(image: Vec<u8>) -> Recorder {
        Recorder { dev: MemDev(image), events: Vec::new() }
    }

    /// The operation under way was acknowledged to its caller.
    pub fn ack(&mut self) {
        self.events.push(Event::Ack);
    }

    pub fn writes(&self) -> usize {
        self.events.iter().filter(|e| matches!(e, Event::Write(..))).count()
    }

    pub fn flushes(&self) -> usize {
        self.events.iter().filter(|e| matches!(e, Event::Flush)).count()
    }

    /// Events from now on only (what came before is taken as durable).
    pub fn mark(&mut self) -> usize {
        self.events.len()
    }
}

impl BlockDev for Recorder {
    fn blocks(&self) -> u64 {
        self.dev.blocks()
    }
    fn read(&mut self, b: u64, buf: &mut [u8; BLOCK]) -> Result<(), Error> {
        self.dev.read(b, buf)
    }
    fn write(&mut self, b: u64, buf: &[u8; BLOCK]) -> Result<(), Error> {
        self.dev.write(b, buf)?;
        self.events.push(Event::Write(b, Box::new(*buf)));
        Ok(())
    }
    fn flush(&mut self) -> Result<(), Error> {
        self.events.push(Event::Flush);
        Ok(())
    }
}

/// The image a cut left: `base`, then the writes durable before it, then the subset of
/// the unflushed ones the cut kept, then whatever is written to it afterwards (a mount
/// finishing an update). Cheap to make: nothing of `base` is copied.
pub struct Overlay<'a> {
    base: &'a [u8],
    durable: &'a BTreeMap<u64, Box<[u8; BLOCK]>>,
    own: BTreeMap<u64, Box<[u8; BLOCK]>>,
}

impl Overlay<'_> {
    /// The whole image (for tests that look at it as bytes).
    pub fn image(&self) -> Vec<u8> {
        let mut v = self.base.to_vec();
        for (b, d) in self.durable.iter().chain(self.own.iter()) {
            let at = *b as usize * BLOCK;
            v[at..at + BLOCK].copy_from_slice(&d[..]);
        }
        v
    }
}

impl BlockDev for Overlay<'_> {
    fn blocks(&self) -> u64 {
        (self.base.len() / BLOCK) as u64
    }
    fn read(&mut self, b: u64, buf: &mut [u8; BLOCK]) -> Result<(), Error> {
        if let Some(d) = self.own.get(&b).or_else(|| self.durable.get(&b)) {
            buf.copy_from_slice(&d[..]);
            return Ok(());
        }
        let at = b as usize * BLOCK;
        buf.copy_from_slice(self.base.get(at..at + BLOCK).ok_or(Error::Io)?);
        Ok(())
    }
    fn write(&mut self, b: u64, buf: &[u8; BLOCK]) -> Result<(), Error> {
        if b >= self.blocks() {
            return Err(Error::Io);
        }
        self.own.insert(b, Box::new(*buf));
        Ok(())
    }
}

/// One state a power cut may leave.
pub struct Crash<'a> {
    pub dev: Overlay<'a>,
    /// Operations acknowledged before the last flush that completed: they must be there.
    pub durable: usize,
    /// Operations acknowledged by the time of the cut (at most: the cut may come
    /// anywhere in the run of writes, up to the next flush).
    pub acked: usize,
    /// Which run of writes between flushes (0: the first), and which writes of it
    /// were kept, for messages.
    pub run: usize,
    pub kept: Vec<usize>,
    pub of: usize,
    /// A disk that tears: the last kept write reached only its first this many
    /// sectors of 512 bytes (`torn_crashes`).
    pub torn: Option<usize>,
}

impl core::fmt::Debug for Crash<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "cut in run {} keeping writes {:?} of {} ({} operations durable, {} acknowledged)",
            self.run, self.kept, self.of, self.durable, self.acked
        )?;
        match self.torn {
            Some(s) => write!(f, ", the last torn after {s} sectors"),
            None => Ok(()),
        }
    }
}

/// Every state a cut during `events` (recorded on a device that held `base` when the
/// recording began) may leave; `check` looks at each. `seed` chooses the random subsets.
pub fn crashes(base: &[u8], events: &[Event], seed: u64, check: impl FnMut(Crash<'_>)) {
    cuts(base, events, seed, false, check)
}

/// Sectors a disk writes whole: a block's write cut by a power loss may have reached
/// any prefix of them.
pub const SECTOR: usize = 512;

/// As [`crashes`], on a disk that also tears a write at a power cut: besides each
/// subset, the subset whose last write reached only its first 1, 4 or 7 sectors.
pub fn torn_crashes(base: &[u8], events: &[Event], seed: u64, check: impl FnMut(Crash<'_>)) {
    cuts(base, events, seed, true, check)
}

fn cuts(base: &[u8], events: &[Event], seed: u64, tear: bool, mut check: impl FnMut(Crash<'_>)) {
    let mut durable: BTreeMap<u64, Box<[u8; BLOCK]>> = BTreeMap::new();
    let mut x = seed | 1;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut acks, mut acks_at_flush) = (0, 0);
    let mut pending: Vec<(u64, &[u8; BLOCK])> = Vec::new();
    let mut run = 0;
    let mut i = 0;
    loop {
        // Gather the run: writes (and acknowledgements) up to the next flush or the end.
        pending.clear();
        let mut acked = acks;
        while i < events.len() {
            match &events[i] {
                Event::Write(b, d) => pending.push((*b, d)),
                Event::Ack => acked += 1,
                Event::Flush => break,
            }
            i += 1;
        }
        let n = pending.len();
        let mut subsets: Vec<Vec<usize>> = Vec::new();
        if n <= EVERY {
            for mask in 0u32..1 << n {
                subsets.push((0..n).filter(|k| mask & (1 << k) != 0).collect());
            }
        } else {
            for p in 0..=n {
                subsets.push((0..p).collect());
            }
            for _ in 0..SAMPLES {
                let r = rand();
                let keep_one_in = 1 + r % 4;
                subsets.push((0..n).filter(|_| rand() % (keep_one_in + 1) != 0).collect());
            }
        }
        for kept in subsets {
            let mut dev = Overlay { base, durable: &durable, own: BTreeMap::new() };
            for &k in &kept {
                dev.own.insert(pending[k].0, Box::new(*pending[k].1));
            }
            let last = kept.last().copied();
            check(Crash { dev, durable: acks_at_flush, acked, run, kept: kept.clone(), of: n, torn: None });
            let Some(last) = last.filter(|_| tear) else { continue };
            for sectors in [1, BLOCK / SECTOR / 2, BLOCK / SECTOR - 1] {
                let mut dev = Overlay { base, durable: &durable, own: BTreeMap::new() };
                for &k in &kept[..kept.len() - 1] {
                    dev.own.insert(pending[k].0, Box::new(*pending[k].1));
                }
                let (b, new) = pending[last];
                let mut old = Box::new([0u8; BLOCK]);
                if dev.read(b, &mut old).is_err() {
                    continue;
                }
                old[..sectors * SECTOR].copy_from_slice(&new[..sectors * SECTOR]);
                dev.own.insert(b, old);
                let torn = Some(sectors);
                check(Crash { dev, durable: acks_at_flush, acked, run, kept: kept.clone(), of: n, torn });
            }
        }
        for (b, d) in &pending {
            durable.insert(*b, Box::new(**d));
        }
        acks = acked;
        if i >= events.len() {
            break;
        }
        // The flush completed.
        acks_at_flush = acks;
        i += 1;
        run += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn a_cut_keeps_any_subset_of_the_unflushed_writes_and_every_flushed_one() {
        let mut r = Recorder::new(vec![0u8; 4 * BLOCK]);
        r.write(0, &[1; BLOCK]).unwrap();
        r.write(1, &[1; BLOCK]).unwrap();
        r.flush().unwrap();
        r.ack();
        r.write(2, &[2; BLOCK]).unwrap();
        r.write(0, &[3; BLOCK]).unwrap();
        let base = vec![0u8; 4 * BLOCK];
        let mut states = Vec::new();
        crashes(&base, &r.events, 1, |mut c| {
            let mut b = [0u8; BLOCK];
            let v: Vec<u8> = (0..4)
                .map(|k| {
                    c.dev.read(k, &mut b).unwrap();
                    b[0]
                })
                .collect();
            states.push((c.run, c.durable, c.acked, v));
        });
        assert_eq!(states.len(), 4 + 4, "two runs of two writes: four subsets each");
        assert!(states.contains(&(0, 0, 0, vec![0, 1, 0, 0])), "the second write without the first");
        // The acknowledgement came after the flush: that operation was durable when
        // acknowledged, but none was acknowledged before the flush.
        assert!(states.contains(&(1, 0, 1, vec![1, 1, 0, 0])), "after the flush: nothing of the second run");
        assert!(
            states.contains(&(1, 0, 1, vec![3, 1, 0, 0])),
            "the later write of block 0 without the earlier of block 2"
        );
        assert!(states.contains(&(1, 0, 1, vec![3, 1, 2, 0])));
        assert!(!states.iter().any(|s| s.0 == 1 && s.3[1] == 0), "a flushed write is never lost");
    }

    #[test]
    fn a_torn_cut_keeps_a_prefix_of_the_last_kept_write_over_what_was_there() {
        let mut r = Recorder::new(vec![0u8; 2 * BLOCK]);
        r.write(0, &[1; BLOCK]).unwrap();
        r.flush().unwrap();
        r.write(0, &[2; BLOCK]).unwrap();
        let base = vec![0u8; 2 * BLOCK];
        let mut seen = Vec::new();
        torn_crashes(&base, &r.events, 1, |mut c| {
            let mut b = [0u8; BLOCK];
            c.dev.read(0, &mut b).unwrap();
            let (was, now) = if c.run == 0 { (0, 1) } else { (1, 2) };
            let new = b.iter().take_while(|x| **x == now).count();
            assert!(new % SECTOR == 0 && b[new..].iter().all(|x| *x == was), "{c:?}: {b:?}");
            seen.push((c.run, c.torn, new));
        });
        assert!(seen.contains(&(1, Some(4), 4 * SECTOR)), "{seen:?}");
        assert!(seen.contains(&(1, None, BLOCK)));
        assert!(seen.contains(&(0, Some(1), SECTOR)), "{seen:?}");
    }
}
