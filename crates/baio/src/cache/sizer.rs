//! How many frames the cache takes (`Sizer`): it grows into free memory while it
//! evicts, and gives blocks back when sigma0 refuses someone or its free memory runs
//! low, from sigma0's figures (`Memory`).

/// What sigma0 says of its frames (`sigma0_api::STATS`), for `Sizer`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// Free frames.
    pub free: u64,
    /// All frames.
    pub total: u64,
    /// Frames sigma0 keeps for page faults (it refuses requests that would take them).
    pub keep: u64,
    /// Frames sigma0 has refused so far (a counter: memory servers asked and got none).
    pub refused: u64,
}

/// What the cache should do with its frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resize {
    Stay,
    /// Take one more block of frames.
    Grow,
    /// Give back this many of its grown blocks (never the first).
    Shrink(u64),
}

/// When the cache grows into free memory and when it gives it back.
/// It grows by a block of frames when it had to evict since it last looked (the working
/// set does not fit) and sigma0 would still have its reserve and a margin (an eighth of
/// the frames, at least two blocks) free after it; it gives blocks back when sigma0
/// refused someone since it last looked (a memory server that needed frames: enough
/// blocks that sigma0 has what was refused and the margin again), or when free memory
/// fell below the reserve and half the margin (before anyone is refused). The first
/// block is never given back. Whether the cache's own and the block service's kernel
/// quota can map another block is the server's question (`room`).
#[derive(Debug, Clone)]
pub struct Sizer {
    /// Pages per block.
    pub block: u64,
    /// Blocks at most (the first included).
    pub max_blocks: u64,
    refused: Option<u64>,
    evictions: u64,
}

impl Sizer {
    pub fn new(block: u64, max_blocks: u64) -> Sizer {
        Sizer { block: block.max(1), max_blocks: max_blocks.max(1), refused: None, evictions: 0 }
    }

    /// Free frames the cache leaves to everyone else beyond sigma0's reserve.
    pub fn margin(&self, total: u64) -> u64 {
        (total / 8).max(2 * self.block)
    }

    /// Decide with sigma0's figures `m`, the cache's `blocks` (the first included) and
    /// its eviction counter.
    pub fn decide(&mut self, m: Memory, blocks: u64, evictions: u64) -> Resize {
        let refused = m.refused.saturating_sub(self.refused.unwrap_or(m.refused));
        self.refused = Some(m.refused);
        let evicted = evictions > self.evictions;
        self.evictions = evictions;
        let grown = blocks.saturating_sub(1);
        let margin = self.margin(m.total);
        let want = m.keep.saturating_add(margin);
        if grown > 0 && (refused > 0 || m.free < m.keep.saturating_add(margin / 2)) {
            let short = want.saturating_add(refused).saturating_sub(m.free);
            return Resize::Shrink(short.div_ceil(self.block).clamp(1, grown));
        }
        if refused == 0 && evicted && blocks < self.max_blocks && m.free >= want.saturating_add(self.block) {
            return Resize::Grow;
        }
        Resize::Stay
    }
}
