//! Where programs map things: one table of the virtual regions Scion's programs use,
//! so that two libraries linked into one program never pick the same place. Each
//! region is 1 TiB apart; the kernel's own places (UTCBs, stacks, the boot image,
//! sigma0's physical window) are in `abi::layout`.

/// `rt::heap`: the demand-paged heap.
pub const HEAP: u64 = 0x0000_2000_0000_0000;
/// `rt::loader`: where root maps a program's pages while it loads it.
pub const LOADER_SCRATCH: u64 = 0x0000_3000_0000_0000;
/// Free for a program's own use (tests map, fault and probe here).
pub const SCRATCH: u64 = 0x0000_5000_0000_0000;
pub const SCRATCH2: u64 = 0x0000_5100_0000_0000;
/// bench_kernel's measurement regions.
pub const BENCH: [u64; 4] =
    [0x0000_5200_0000_0000, 0x0000_5300_0000_0000, 0x0000_5400_0000_0000, 0x0000_5500_0000_0000];
/// `virtio-hal`: device registers (`MMIO + (physical - MMIO_START)`) and DMA memory.
pub const MMIO: u64 = 0x0000_5800_0000_0000;
pub const DMA: u64 = 0x0000_5900_0000_0000;
/// `blk`: the shared areas of open segments, one after another.
pub const BLK_AREAS: u64 = 0x0000_5a00_0000_0000;
/// A BAIO client's shared area of an open segment (`blk_api::open`).
pub const SEGMENT_AREA: u64 = 0x0000_5b00_0000_0000;
/// `cache`: its frames; `blk` maps the same frames at `CACHE_IN_BLK`.
pub const CACHE_FRAMES: u64 = 0x0000_5c00_0000_0000;
pub const CACHE_IN_BLK: u64 = 0x0000_5d00_0000_0000;
/// `net`: its clients' shared areas, one after another; a client maps its own at
/// `NET_AREA` (`net_api::client::Net::attach`).
pub const NET_AREAS: u64 = 0x0000_5e00_0000_0000;
pub const NET_AREA: u64 = 0x0000_5f00_0000_0000;
/// A pager's pool of frames (mem, user-level pagers).
pub const POOL: u64 = 0x0000_6000_0000_0000;
/// `net`: the read-only areas of the blocks it sends for Cue transfers, 2 MiB apart.
pub const NET_CUE: u64 = 0x0000_6100_0000_0000;
/// Servers with graft points: the code of signed grafts (`graft-host`).
pub const GRAFT_CODE: u64 = 0x0000_6200_0000_0000;
/// Root: the memory an old server hands over in a live update, until the new server
/// takes it; log2 of its bytes (4 MiB, the most one IPC item carries).
pub const UPDATE_RELAY: u64 = 0x0000_6300_0000_0000;
pub const UPDATE_RELAY_LOG2: u64 = 22;
/// `rt::heap`: arenas, heaps of their own for untrusted code (a graft's engine).
pub const ARENAS: u64 = 0x0000_6400_0000_0000;
/// `net`: its TCP sockets' buffers, frames from sigma0 mapped a chunk at a time.
pub const NET_BUFFERS: u64 = 0x0000_6500_0000_0000;
/// `rt::thread`: the UTCBs of threads a program creates, one page apart.
pub const THREAD_UTCBS: u64 = 0x0000_7f00_0000_0000;
