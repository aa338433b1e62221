//! The stream detector (`Sequential`, K42 Fig. 7's trigger): which runs of blocks the
//! cache is asked for are sequential, and when the policy should swap to `Mru` and back.

/// Watches the runs of blocks the cache is asked for (each `LOOKUP`) for a sequential
/// stream (K42 Fig. 7's trigger): a run is sequential when it starts where one of the
/// last `STREAMS` runs ended (so interleaved streams count too). Of the last 32 runs,
/// `TO_MRU` sequential ones say "a stream": evict most recently used first; `TO_LRU` or
/// fewer say "no stream".
#[derive(Default)]
pub struct Sequential {
    ends: [u64; STREAMS],
    next: usize,
    /// The last 32 runs, one bit each (1 = sequential), the newest in bit 0.
    window: u32,
    seen: u32,
    pub stream: bool,
}

const STREAMS: usize = 4;
pub const TO_MRU: u32 = 28;
pub const TO_LRU: u32 = 16;

impl Sequential {
    /// A run of blocks `first..first + n` looked up; `Some(stream)` when the verdict
    /// changes.
    pub fn run(&mut self, first: u64, n: u64) -> Option<bool> {
        let seq = self.ends.contains(&first) && first != 0;
        self.ends[self.next] = first.saturating_add(n);
        self.next = (self.next + 1) % STREAMS;
        self.window = self.window << 1 | seq as u32;
        self.seen = (self.seen + 1).min(32);
        let ones = self.window.count_ones();
        let flip = self.seen == 32 && if self.stream { ones <= TO_LRU } else { ones >= TO_MRU };
        flip.then(|| {
            self.stream = !self.stream;
            self.stream
        })
    }
}
