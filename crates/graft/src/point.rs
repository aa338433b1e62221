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
    /// segment's blocks. Answer: the physical block, below the segment's blocks.
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

    /// The most input bytes the point hands a graft in one call (an engine reserves
    /// this much of its sandbox for it).
    pub fn max_input(self) -> usize {
        match self {
            Point::Evict => 8 * MAX_CANDIDATES,
            Point::Stream => 1024,
            Point::Ldisk => 16,
        }
    }

    /// Is `answer` one the point can act on, for this input?
    pub fn accepts(self, input: &[u8], answer: u64) -> bool {
        match self {
            Point::Evict => answer < (input.len() / 8) as u64,
            Point::Stream => answer == 0,
            Point::Ldisk => input.len() >= 16 && answer < u64::from_le_bytes(input[8..16].try_into().unwrap_or([0; 8])),
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
        let mut l = [0u8; 16];
        l[8] = 10;
        assert!(Point::Ldisk.accepts(&l, 9));
        assert!(!Point::Ldisk.accepts(&l, 10), "a block outside the segment");
        assert!(!Point::Ldisk.accepts(&l[..8], 0));
        assert!(Point::Stream.accepts(&[1, 2], 0) && !Point::Stream.accepts(&[], 1));
        for p in Point::ALL {
            assert_eq!(Point::from_name(p.name()), Some(p));
            assert_eq!(Point::from_u8(p as u8), Some(p));
        }
    }
}
