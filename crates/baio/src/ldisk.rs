//! The logical-disk map of a segment (VINO §3.3's black-box graft point, kept by the
//! block service): a graft maps the segment's logical blocks onto its physical blocks,
//! and the block service keeps the graft's state — its map — in the segment's last
//! `MAP_BLOCKS` blocks, so the mapping outlives the program and the boot.
//!
//! **A power cut at any write leaves a whole map that names only whole blocks.** The
//! map is kept in two copies, each a numbered, checksummed block, written alternately;
//! the newer whole copy is the map (a torn or never-written copy fails its checksum).
//! A block written through the map is one commit: the data goes to the physical block
//! the graft chose — one free in the map as last committed — and then the map is
//! committed. A cut before the commit leaves the old map, which never named the new
//! block, so the old contents of the logical block are still where it says; a cut
//! after it leaves the new map and the new data. Freed blocks are reused only after
//! the commit that freed them.
//!
//! The map's bytes are the graft's business: the service hands them to the graft as
//! its state and checks every answer (a block inside the segment), so a hostile image
//! or graft can point a logical block only at another block of the same segment.

use alloc::vec::Vec;

use crate::{checksum, BlockDev, Error, BLOCK, GENERATION_LIMIT};

/// Blocks at a segment's end that hold the map's two copies.
pub const MAP_BLOCKS: u64 = 2;
pub const MAP_MAGIC: u64 = u64::from_le_bytes(*b"SCLDMAP1");
/// A copy: magic, number, state length, checksum (of number, length and state), state.
const HEADER: usize = 32;
/// The largest map (graft state) a copy holds.
pub const MAX_STATE: usize = BLOCK - HEADER;

/// A map copy in its block.
pub fn encode(seq: u64, state: &[u8]) -> Option<[u8; BLOCK]> {
    if state.len() > MAX_STATE {
        return None;
    }
    let mut b = [0u8; BLOCK];
    b[..8].copy_from_slice(&MAP_MAGIC.to_le_bytes());
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b[16..20].copy_from_slice(&(state.len() as u32).to_le_bytes());
    b[HEADER..HEADER + state.len()].copy_from_slice(state);
    let sum = sum_of(&b, state.len());
    b[24..32].copy_from_slice(&sum.to_le_bytes());
    Some(b)
}

fn sum_of(b: &[u8; BLOCK], len: usize) -> u64 {
    checksum(&b[8..20]) ^ checksum(&b[HEADER..HEADER + len]).rotate_left(1)
}

/// The copy in `b`, if it is whole and holds `state_len` bytes: (number, state).
pub fn decode(b: &[u8; BLOCK], state_len: usize) -> Option<(u64, &[u8])> {
    let w = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
    let len = u32::from_le_bytes(b[16..20].try_into().unwrap_or([0; 4])) as usize;
    let seq = w(8);
    if w(0) != MAP_MAGIC
        || len != state_len
        || len > MAX_STATE
        || seq == 0
        || seq >= GENERATION_LIMIT
        || w(24) != sum_of(b, len)
    {
        return None;
    }
    Some((seq, &b[HEADER..HEADER + len]))
}

/// A segment's map on the device: copy `k` is in block `first + k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapLog {
    first: u64,
    /// The number of the newest copy written (0: none yet).
    seq: u64,
}

impl MapLog {
    /// The map at blocks `first ..first + MAP_BLOCKS`: the newer whole copy's state, or
    /// `None` when neither copy is whole (a new map: the graft starts from zeros).
    pub fn open(dev: &mut impl BlockDev, first: u64, state_len: usize) -> Result<(MapLog, Option<Vec<u8>>), Error> {
        if state_len > MAX_STATE {
            return Err(Error::TooSmall);
        }
        let mut best: Option<(u64, Vec<u8>)> = None;
        let mut b = [0u8; BLOCK];
        for k in 0..MAP_BLOCKS {
            dev.read(first + k, &mut b)?;
            if let Some((seq, s)) = decode(&b, state_len) {
                if best.as_ref().is_none_or(|(n, _)| seq > *n) {
                    best = Some((seq, s.to_vec()));
                }
            }
        }
        Ok(match best {
            Some((seq, s)) => (MapLog { first, seq }, Some(s)),
            None => (MapLog { first, seq: 0 }, None),
        })
    }

    /// A new map at `first` (the blocks hold nothing of it yet).
    pub fn new(first: u64) -> MapLog {
        MapLog { first, seq: 0 }
    }

    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Commit `state` as the newest copy, over the older one.
    pub fn commit(&mut self, dev: &mut impl BlockDev, state: &[u8]) -> Result<(), Error> {
        let seq = self.seq + 1;
        if seq >= GENERATION_LIMIT {
            return Err(Error::NoSpace);
        }
        let b = encode(seq, state).ok_or(Error::TooSmall)?;
        dev.write(self.first + seq % MAP_BLOCKS, &b)?;
        self.seq = seq;
        Ok(())
    }

    /// One block written through the map: `data` to the segment's physical block
    /// `physical` (the graft's answer, already checked to lie below the map), a flush,
    /// then `state` — the map that names it — committed, and a flush again. `data_first`
    /// is the segment's first device block.
    ///
    /// The first flush puts the data on stable storage before the map that names it
    /// (else a disk that caches writes may keep the map and lose the data); the second
    /// makes the commit durable before the write is acknowledged and before any block
    /// it freed can be written again (else a cut may keep the new bytes in a block the
    /// old map, still the durable one, names).
    pub fn write_through(
        &mut self,
        dev: &mut impl BlockDev,
        data_first: u64,
        physical: u64,
        data: &[u8; BLOCK],
        state: &[u8],
    ) -> Result<(), Error> {
        if physical >= self.first.saturating_sub(data_first) {
            return Err(Error::NotFound);
        }
        dev.write(data_first + physical, data)?;
        dev.flush()?;
        self.commit(dev, state)?;
        dev.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemDev;
    use alloc::vec;

    const SEG: u64 = 40; // the segment's first block on the device
    const LEN: u64 = 20; // its blocks, the map's two among them
    const DATA: u64 = LEN - MAP_BLOCKS;

    fn block_of(logical: u64, version: u64) -> [u8; BLOCK] {
        let mut b = [0u8; BLOCK];
        for (i, x) in b.iter_mut().enumerate() {
            *x = (logical * 31 + version * 7 + i as u64 / 64) as u8;
        }
        b[..8].copy_from_slice(&(logical << 32 | version).to_le_bytes());
        b
    }

    fn read_logical(dev: &mut impl BlockDev, state: &mut [u8], logical: u64) -> [u8; BLOCK] {
        let mut input = [0u8; 24];
        input[..8].copy_from_slice(&logical.to_le_bytes());
        input[8..16].copy_from_slice(&DATA.to_le_bytes());
        let p = graft_examples::ldisk(&input, state);
        let mut b = [0u8; BLOCK];
        if p < DATA {
            dev.read(SEG + p, &mut b).unwrap();
        }
        b
    }

    /// Writes of the ldisk graft's: (logical, version), a small xorshift schedule.
    fn schedule(n: usize, seed: u64) -> Vec<(u64, u64)> {
        let mut x = seed | 1;
        (0..n)
            .map(|v| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 8, v as u64 + 1)
            })
            .collect()
    }

    /// Run the writes through the map on `dev`, each acknowledged when its
    /// `write_through` returns.
    fn run(dev: &mut crate::crash::Recorder, writes: &[(u64, u64)]) {
        let mut log = MapLog::new(SEG + DATA);
        let mut state = vec![0u8; graft_examples::LD_STATE];
        for &(l, v) in writes {
            let mut input = [0u8; 24];
            input[..8].copy_from_slice(&l.to_le_bytes());
            input[8..16].copy_from_slice(&DATA.to_le_bytes());
            input[16] = 1;
            let p = graft_examples::ldisk(&input, &mut state);
            assert!(p < DATA);
            log.write_through(dev, SEG, p, &block_of(l, v), &state).unwrap();
            dev.ack();
        }
    }

    /// A power cut at any moment of a run of writes, on a disk that caches writes (any
    /// subset of the writes since the last flush kept): the map read back is whole, it
    /// is the map of every write acknowledged by then (or of the one under way too), and
    /// every logical block holds its last write under that map — never another block's
    /// bytes, a freed block reused too early, or a torn mixture.
    #[test]
    fn a_cut_at_any_write_leaves_the_last_commit() {
        for seed in [1u64, 7, 99] {
            let writes = schedule(30, seed);
            let image = vec![0u8; (SEG + LEN + 4) as usize * BLOCK];
            let mut r = crate::crash::Recorder::new(image.clone());
            run(&mut r, &writes);
            assert_eq!(r.writes(), 2 * writes.len(), "one data write and one commit a block");
            let mut states = 0;
            crate::crash::crashes(&image, &r.events, seed, |mut c| {
                let (log, state) = MapLog::open(&mut c.dev, SEG + DATA, graft_examples::LD_STATE).unwrap();
                let mut state = state.unwrap_or_else(|| vec![0u8; graft_examples::LD_STATE]);
                let done = log.seq() as usize;
                assert!(done >= c.acked && done <= c.acked + 1, "seed {seed}, {c:?}: the map of {done} writes");
                for l in 0..8 {
                    let want =
                        writes[..done].iter().rev().find(|w| w.0 == l).map_or([0u8; BLOCK], |w| block_of(l, w.1));
                    assert!(read_logical(&mut c.dev, &mut state, l) == want, "seed {seed}, {c:?}: logical block {l}");
                }
                states += 1;
            });
            assert!(states >= 4 * writes.len(), "{states} states");
        }
    }

    /// A torn or damaged copy is passed over for the other; a copy of another length
    /// (another graft's map) is not taken; neither whole: a new map.
    #[test]
    fn torn_and_foreign_copies_are_refused() {
        let mut dev = MemDev(vec![0u8; 8 * BLOCK]);
        let mut log = MapLog::new(2);
        log.commit(&mut dev, &[1; 100]).unwrap();
        log.commit(&mut dev, &[2; 100]).unwrap();
        let (l, s) = MapLog::open(&mut dev, 2, 100).unwrap();
        assert_eq!((l.seq(), s), (2, Some(vec![2; 100])));
        // Copy 2 lies in block 2 + 0: tear it (its first sector, holding the state, old
        // bytes; only the bytes the copy holds count).
        dev.0[2 * BLOCK + 64..2 * BLOCK + 512].fill(0xee);
        let (l, s) = MapLog::open(&mut dev, 2, 100).unwrap();
        assert_eq!((l.seq(), s), (1, Some(vec![1; 100])), "the older whole copy");
        assert_eq!(MapLog::open(&mut dev, 2, 99).unwrap().1, None, "another length is not this map");
        dev.0[3 * BLOCK + 40] ^= 1;
        assert_eq!(MapLog::open(&mut dev, 2, 100).unwrap().1, None);
        // The next commit goes over the older copy and is the newest.
        let mut log = MapLog::new(2);
        log.commit(&mut dev, &[3; 100]).unwrap();
        assert_eq!(MapLog::open(&mut dev, 2, 100).unwrap().1, Some(vec![3; 100]));
    }

    /// A copy with the largest number there is, or a bad length, is refused (a hostile
    /// image cannot wrap the numbers or make the service read past a block).
    #[test]
    fn hostile_copies() {
        let mut b = encode(5, &[9; 10]).unwrap();
        assert_eq!(decode(&b, 10), Some((5, &[9u8; 10][..])));
        b[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode(&b, u32::MAX as usize), None);
        let big = encode(GENERATION_LIMIT, &[0; 4]).unwrap();
        assert_eq!(decode(&big, 4), None);
        assert!(encode(1, &vec![0; MAX_STATE + 1]).is_none());
        let mut dev = MemDev(vec![0u8; 4 * BLOCK]);
        assert!(MapLog::open(&mut dev, 0, MAX_STATE + 1).is_err());
        // A write the map does not cover (the map's own blocks) is refused.
        let mut log = MapLog::new(2);
        assert!(log.write_through(&mut dev, 0, 2, &[0; BLOCK], &[]).is_err());
        assert!(log.write_through(&mut dev, 0, 1, &[0; BLOCK], &[]).is_ok());
    }
}
