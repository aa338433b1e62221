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
    /// maps a SEND capability for the segment (its badge names it) and a shared buffer
    /// of `BUF_PAGES` pages (DMA memory: data and status words). Reply MR2 = blocks.
    pub const OPEN: u64 = 0x81;
    /// string = name. Reply: MR2 = length, MR3 = owner, MR4 = owner's rights, MR5 = others'.
    pub const STAT: u64 = 0x82;
    /// Reply string: the segments the caller may open, one "name blocks owner" a line.
    pub const LIST: u64 = 0x83;
    /// string = name (owner only).
    pub const DELETE: u64 = 0x84;
    /// Through a segment capability: MR1 = operations n (at most `MAX_OPS`), then per
    /// operation three words: kind | flags, first block (from 0 in the segment), blocks.
    /// Operation i moves its blocks to/from the shared buffer at `i * OP_BYTES` and
    /// writes its status to status word i (the buffer's last page): 0 = pending,
    /// `DONE` = done, else `FAILED | error`. The call returns at once.
    pub const BATCH: u64 = 0x85;
    /// Through a segment capability: give it back (the capability is revoked).
    pub const CLOSE: u64 = 0x86;
    /// Through a segment capability: returns once every write before it is on the disk.
    pub const SYNC: u64 = 0x87;

    pub const READ_OP: u64 = 0;
    pub const WRITE_OP: u64 = 1;
    /// Operation flag: through the shared cache instead of straight to the buffer.
    pub const BUFFERED: u64 = 1 << 8;
    pub const MAX_OPS: u64 = 8;
    /// Shared buffer: `MAX_OPS` slots of `OP_BYTES` for data, then one status page.
    pub const OP_BYTES: u64 = 4 * 4096;
    pub const BUF_PAGES: u64 = MAX_OPS * OP_BYTES / 4096 + 1;
    pub const DONE: u64 = 1;
    pub const FAILED: u64 = 1 << 63;
    /// Status errors (with FAILED): the operation names blocks outside the segment,
    /// needs a right the capability lacks, is malformed, or the device failed.
    pub const E_RANGE: u64 = 1;
    pub const E_RIGHTS: u64 = 2;
    pub const E_BAD: u64 = 3;
    pub const E_IO: u64 = 4;
}

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
