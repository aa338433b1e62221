//! The graft points: what a point hands a graft, and which answers it accepts. An
//! answer the point refuses aborts the call (the default policy answers instead).

/// A graft point (VINO's three kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Point {
    /// Prioritization: the cache's eviction victim. Input: up to `MAX_CANDIDATES`
    /// block numbers (8 bytes each, little-endian), the least recently used first.
    /// Answer: the index of the victim among them.
    Evict = 1,
    /// Stream: a filter over the bytes of a data path. Input: up to 1 KiB of data,
    /// whole 64-byte pieces but for the last call of a stream (shorter; empty ends it).
    /// Answer: 0 (the result is in the graft's state).
    Stream = 2,
    /// Black box: a logical disk. Input: word 0 = logical block, word 1 = the
    /// segment's blocks, word 2 = 1 for a write (0: a read). Answer: the physical
    /// block, below the segment's blocks; for a read of a block never written, the
    /// segment's blocks themselves (the server reads zeros).
    Ldisk = 3,
}

pub const MAX_CANDIDATES: usize = 8;

impl Point {
    pub const ALL: [Point; 3] = [Point::Evict, Point::Stream, Point::Ldisk];

    pub fn from_u8(v: u8) -> Option<Point> {
        Point::ALL.into_iter().find(|p| *p as u8 == v)
    }

    pub fn name(self) -> &'static str {
        match self {
            Point::Evict => "evict",
            Point::Stream => "stream",
            Point::Ldisk => "ldisk",
        }
    }

    pub fn from_name(s: &str) -> Option<Point> {
        Point::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Is a graft here bound to one thing (a logical disk to its segment) and called by
    /// its id, rather than called for whatever its owner does there? An owner may have
    /// several grafts at a bound point, one at any other.
    pub fn bound(self) -> bool {
        matches!(self, Point::Ldisk)
    }

    /// The most input bytes the point hands a graft in one call (an engine reserves
    /// this much of its sandbox for it).
    pub fn max_input(self) -> usize {
        match self {
            Point::Evict => 8 * MAX_CANDIDATES,
            Point::Stream => 1024,
            Point::Ldisk => 24,
        }
    }

    /// Is `answer` one the point can act on, for this input?
    pub fn accepts(self, input: &[u8], answer: u64) -> bool {
        match self {
            Point::Evict => answer < (input.len() / 8) as u64,
            Point::Stream => answer == 0,
            Point::Ldisk => {
                let w =
                    |k: usize| input.get(8 * k..8 * k + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
                match (w(1), w(2)) {
                    (Some(blocks), Some(0)) => answer <= blocks,
                    (Some(blocks), Some(_)) => answer < blocks,
                    _ => false,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_outside_the_input_are_refused() {
        let c = [0u8; 24];
        assert!(Point::Evict.accepts(&c, 2));
        assert!(!Point::Evict.accepts(&c, 3), "a victim that is not a candidate");
        assert!(!Point::Evict.accepts(&[], 0));
        let mut l = [0u8; 24];
        l[8] = 10;
        assert!(Point::Ldisk.accepts(&l, 9));
        assert!(Point::Ldisk.accepts(&l, 10), "a read of a block never written");
        assert!(!Point::Ldisk.accepts(&l, 11), "a block outside the segment");
        l[16] = 1;
        assert!(!Point::Ldisk.accepts(&l, 10), "a write outside the segment");
        assert!(Point::Ldisk.accepts(&l, 9));
        assert!(!Point::Ldisk.accepts(&l[..16], 0));
        assert!(Point::Stream.accepts(&[1, 2], 0) && !Point::Stream.accepts(&[], 1));
        for p in Point::ALL {
            assert_eq!(Point::from_name(p.name()), Some(p));
            assert_eq!(Point::from_u8(p as u8), Some(p));
        }
    }
}
