//! The protocol between programs and root (message labels and their words).
//!
//! - `EXIT` (call to `PARENT`): MR1 = exit code. Root destroys the task; no reply.
//! - `SPAWN` (call to `PARENT`, string = "name args"): MR1 = slot in the caller's
//!   capability space for a SEND capability to the new program's first thread; the
//!   slot after it receives a CONTROL capability for the new task. The new program
//!   gets a SEND capability to the caller's first thread in its `PEER` slot, badged
//!   with the new program's id. Reply: MR1 = 0 or an error code, MR2 = the new
//!   program's id.

pub const EXIT: u64 = 1;
pub const SPAWN: u64 = 2;
/// (call to `PARENT`, from a memory server) Map the boot image: the reply carries a
/// read-only map item of it at `abi::layout::BOOTFS_VADDR`; MR1 = its length.
pub const GET_BOOTFS: u64 = 3;
/// (call to `PARENT`) string = a server's name, MR1 = slot: a SEND capability to it
/// lands there, if the caller's manifest entry lists the name in `caps`.
pub const LOOKUP: u64 = 4;
/// (call to `PARENT`) MR1 = first port, MR2 = log2 ports: an I/O item, if the manifest
/// grants every port of it. The caller opens an I/O window first.
pub const GET_IO: u64 = 5;
/// (call to `PARENT`) MR1 = line, MR2 = slot: an IRQ capability, if the manifest grants it.
pub const GET_IRQ: u64 = 6;
/// (call to `PARENT`) Reply string: the programs, one line each.
pub const PS: u64 = 7;
/// (call to `PARENT`) Reply string: memory of sigma0 and of each memory server.
pub const MEMINFO: u64 = 8;
/// (call to `PARENT`) MR1 = program id: end it.
pub const KILL: u64 = 9;
/// (call to `PARENT`) Power off (the machine exits with status 0).
pub const HALT: u64 = 10;

/// sigma0's protocol. Requests carry the client's badge (given by root); replies carry
/// MR1 = 0 or an error code, then a typed item where memory or ports are handed out.
pub mod sigma0 {
    /// MR1 = log2 of the number of pages (0..=10), MR2 = hot spot. Reply: MR2 = physical
    /// address of the first page (the run is physically contiguous: usable for DMA).
    pub const ALLOC: u64 = 0x50;
    /// MR1 = physical address, MR2 = log2 pages, MR3 = hot spot: these very frames, if
    /// free or already this client's (idempotent).
    pub const PHYS: u64 = 0x51;
    /// MR1 = physical address in the device window, MR2 = log2 pages, MR3 = hot spot.
    pub const MMIO: u64 = 0x52;
    /// MR1 = first port, MR2 = log2 ports: an I/O item.
    pub const IO: u64 = 0x53;
    /// MR1 = physical address, MR2 = log2 pages: give frames back (every mapping of
    /// them is revoked).
    pub const FREE: u64 = 0x54;
    /// Reply: MR2 = free frames, MR3 = all frames, MR4 = clients.
    pub const STATS: u64 = 0x55;
    /// (root only) MR1 = a client's badge: take back everything it holds.
    pub const RECLAIM: u64 = 0x56;
}

/// The console server's protocol.
pub mod console {
    /// String = bytes to write. Reply MR1 = 0.
    pub const WRITE: u64 = 0x70;
    /// MR1 = most bytes wanted. Reply (when at least one byte was typed): MR1 = 0,
    /// string = the bytes.
    pub const READ: u64 = 0x71;
}

/// The block service (BAIO): disk segments with owners and rights. Calls to the
/// service itself carry the caller's principal in the badge root minted (bits 63..32);
/// calls through a segment capability carry the open segment in theirs.
pub mod blk {
    /// string = name, MR1 = length in blocks, MR2 = rights for others (READ 1, WRITE 2).
    pub const CREATE: u64 = 0x80;
    /// string = name, MR1 = rights wanted. Opens a capability window first: the reply
    /// maps a SEND capability for the segment (its badge names it) and the shared area
    /// (`AREA_PAGES` pages of DMA memory: the control page, then data). Reply MR2 = blocks.
    pub const OPEN: u64 = 0x81;
    /// string = name. Reply: MR2 = length, MR3 = owner, MR4 = owner's rights, MR5 = others'.
    pub const STAT: u64 = 0x82;
    /// Reply string: the segments the caller may open, one "name blocks owner" a line.
    pub const LIST: u64 = 0x83;
    /// string = name (owner only).
    pub const DELETE: u64 = 0x84;
    /// Through a segment capability: MR1 = flags (`WAIT_ALL`), MR2 = n ≤ `MAX_REG_OPS`,
    /// then `OP_WORDS` words per operation (see `op`). Reply at once (or, with
    /// `WAIT_ALL`, once all of them completed): MR2 = operations taken.
    pub const BATCH: u64 = 0x85;
    /// Through a segment capability: give it back (the capability is revoked).
    pub const CLOSE: u64 = 0x86;
    /// Through a segment capability: returns once every write before it is on the disk.
    pub const SYNC: u64 = 0x87;
    /// Through a segment capability: the doorbell of the submission ring. MR1 = flags:
    /// the service takes every entry from `SQ_HEAD` to `SQ_TAIL`. Reply as for `BATCH`.
    pub const SUBMIT: u64 = 0x88;
    /// `baio_mount`: the device as mounted. Reply MR2 = blocks, MR3 = free blocks,
    /// MR4 = segments, MR5 = block size; `BadState` if the device was refused.
    pub const MOUNT: u64 = 0x8a;
    /// Through a segment capability: MR1 = n. Reply (MR2 = completed) once the
    /// segment's completion counter has reached n: sleep instead of polling.
    pub const WAIT: u64 = 0x89;

    /// An operation, four words: `[kind | flags, first block, blocks | status << 32,
    /// offset]`. Blocks are numbered from 0 in the segment; `offset` (bytes, a multiple
    /// of 4096, at least `DATA`) places the data in the shared area; `status` names the
    /// status word the operation completes into.
    pub const OP_WORDS: usize = 4;
    pub const READ_OP: u64 = 0;
    pub const WRITE_OP: u64 = 1;
    /// Operation flag: through the shared `cache` server instead of straight to the area.
    pub const BUFFERED: u64 = 1 << 8;
    /// Batch flag: reply only when every operation of this batch has completed.
    pub const WAIT_ALL: u64 = 1;
    /// Operations in one `BATCH` message (the ring takes up to `SQ_ENTRIES`).
    pub const MAX_REG_OPS: usize = 15;
    /// Most blocks in one operation.
    pub const MAX_OP_BLOCKS: u64 = 32;

    /// The shared area: 2 MiB, of which page 0 is the control page and the rest data.
    pub const AREA_LOG2: u64 = 9;
    pub const AREA_PAGES: u64 = 1 << AREA_LOG2;
    pub const AREA_BYTES: u64 = AREA_PAGES * 4096;
    pub const DATA: u64 = 4096;
    /// Control page: the client advances `SQ_TAIL`, the service `SQ_HEAD` and
    /// `COMPLETED` (operations completed since the open).
    pub const SQ_TAIL: u64 = 0;
    pub const SQ_HEAD: u64 = 8;
    pub const COMPLETED: u64 = 16;
    /// The submission ring: `SQ_ENTRIES` operations of `OP_WORDS` words.
    pub const SQ: u64 = 64;
    pub const SQ_ENTRIES: u64 = 64;
    /// Status words: 0 pending, `DONE`, or `FAILED | error`.
    pub const STATUS: u64 = 2176;
    pub const STATUS_WORDS: u64 = 240;

    pub const DONE: u64 = 1;
    pub const FAILED: u64 = 1 << 63;
    /// Status errors (with FAILED): the operation names blocks outside the segment,
    /// needs a right the capability lacks, is malformed, or the device failed.
    pub const E_RANGE: u64 = 1;
    pub const E_RIGHTS: u64 = 2;
    pub const E_BAD: u64 = 3;
    pub const E_IO: u64 = 4;

    /// One operation's words.
    pub fn op(kind: u64, first: u64, blocks: u64, status: u64, offset: u64) -> [u64; OP_WORDS] {
        [kind, first, blocks | (status << 32), offset]
    }
}

/// The shared block cache's protocol (`cache` server; its client is the block service,
/// which alone moves data; the cache decides what stays).
pub mod cache {
    /// Opens a memory window first: the reply maps the cache's frames (read-write);
    /// MR2 = their physical address (contiguous: for DMA), MR3 = slots (blocks).
    pub const ATTACH: u64 = 0x90;
    /// MR1 = first block, MR2 = n ≤ 8: reply MR2.. = per block `slot | state << 32`,
    /// state `HIT` (the data is in the slot), `FILL` (the slot is the caller's to fill,
    /// then `FILLED`), `BUSY` (being filled after an earlier `FILL`).
    pub const LOOKUP: u64 = 0x91;
    /// MR1 = block, MR2 = 1 if the slot now holds it, 0 if the fill failed.
    pub const FILLED: u64 = 0x92;
    /// MR1 = first block, MR2 = n: forget these blocks (written behind the cache).
    pub const INVALIDATE: u64 = 0x93;
    /// Reply: MR2 = hits, MR3 = misses, MR4 = resident, MR5 = slots, MR6 = evictions.
    pub const STATS: u64 = 0x94;
    pub const HIT: u64 = 0;
    pub const FILL: u64 = 1;
    pub const BUSY: u64 = 2;
    pub const MAX_LOOKUP: u64 = 8;
}

/// (root → a server a program held a capability to, through root's unbadged capability)
/// MR1 = the program's badge: it is gone, drop what it held.
pub const GONE: u64 = 0x40;

/// A memory server's protocol (root registers programs it pages).
pub mod mem {
    /// MR1 = client badge (the pager badge its threads' faults carry), MR2 = limit in
    /// pages; string = "program args" (the program's file in the boot image first).
    pub const REGISTER: u64 = 0x60;
    /// MR1 = client badge: the program is gone; its pages return to the pool.
    pub const UNREGISTER: u64 = 0x61;
    /// Reply: MR1 = 0, MR2 = pool pages, MR3 = free pool pages, MR4 = clients, then
    /// (badge, pages, limit) for each client.
    pub const STATS: u64 = 0x62;
}

/// Badges root gives: the program id, plus this bit on fault messages.
pub const FAULT_BADGE: u64 = 1 << 32;

/// The `files` compatibility server: a baiofs filesystem in one BAIO segment, served by
/// path over IPC to programs that do not link a filesystem themselves. Replies carry
/// MR1 = 0 or an error: `NoPartner` (no such file), `SlotInUse` (exists), `InvalidArg`
/// (bad name or path, a directory where a file is wanted, or the reverse), `BadState`
/// (directory not empty), `NoMemory` (no space), `InvalidCap` (unknown handle).
pub mod files {
    /// string = path, MR1 = flags (`CREATE`). Reply MR2 = handle, MR3 = size.
    pub const OPEN: u64 = 0xa0;
    /// MR1 = handle, MR2 = offset, MR3 = most bytes (≤ `MAX_IO`). Reply string = data.
    pub const READ: u64 = 0xa1;
    /// MR1 = handle, MR2 = offset, string = data (≤ `MAX_IO`). Reply MR2 = bytes written.
    pub const WRITE: u64 = 0xa2;
    /// MR1 = handle.
    pub const CLOSE: u64 = 0xa3;
    /// string = directory. Reply string: one "d|f size name" line per entry.
    pub const LIST: u64 = 0xa4;
    /// string = path (a file, or an empty directory).
    pub const REMOVE: u64 = 0xa5;
    /// string = path.
    pub const MKDIR: u64 = 0xa6;
    /// string = path. Reply MR2 = 1 file / 2 directory, MR3 = size.
    pub const STAT: u64 = 0xa7;
    /// Make everything written so far durable.
    pub const SYNC: u64 = 0xa8;
    pub const CREATE: u64 = 1;
    pub const MAX_IO: u64 = 16 * 1024;
}
