//! The block service's protocol (BAIO): disk segments with owners and rights. Calls to
//! the service itself carry the caller's principal in the badge root minted
//! (`rt::server::Badge`); calls through a segment capability carry the open segment in
//! a badge the service minted. `client` is the program side: create, open, stat, list
//! and delete segments, and batches of reads and writes through a segment capability —
//! in one message, or through the shared submission ring behind one doorbell — that
//! return at once and complete into status words in the shared area; sleeping until an
//! operation completes instead of polling.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use abi::Error;

pub use baio::ldisk::MAP_BLOCKS;
pub const MAX_EXTENTS: usize = 8;
pub const MAX_DELEGATED: usize = 256;
/// Principals this service expects at most to serve at once at their full share: the
/// capability slots it keeps for clients (its 1,024 less the first 16 and
/// `RESERVED_SLOTS` for its own work) are divided by it.
pub const EXPECTED_PRINCIPALS: u64 = 8;
/// Slots the service keeps for itself (its own capabilities, a capability arriving
/// with a request, upcall grafts' threads): no client's request takes them.
pub const RESERVED_SLOTS: u64 = 96;
/// Each principal's share of the service's capability slots: every slot the service
/// holds for it (an open segment's capability, a view's, a holder's, a sleeping
/// `WAIT`'s reply) counts; past it, `NoSpace`.
pub const PRINCIPAL_SLOTS: u64 = (abi::cap::SLOTS - abi::cap::FIRST_FREE - RESERVED_SLOTS) / EXPECTED_PRINCIPALS;
/// Shared areas (2 MiB of DMA memory each: an open segment or an attached view) one
/// principal may hold at once; past it, `NoMemory`.
pub const MAX_OPEN_PER_PRINCIPAL: u64 = 16;

/// An operation, four words: `[kind | flags, first block, blocks | status << 32,
/// offset]`. Blocks are numbered from 0 in the segment; `offset` (bytes, a multiple
/// of 4096, at least `DATA`) places the data in the shared area; `status` names the
/// status word the operation completes into.
pub const OP_WORDS: usize = 4;
pub const READ_OP: u64 = 0;
pub const WRITE_OP: u64 = 1;
/// Operation flag: through the shared `cache` server instead of straight to the area.
pub const BUFFERED: u64 = 1 << 8;
/// Flag of a read: once read, its bytes go through the reader's stream graft (loaded
/// here with `graft_api`, point `stream`), in pieces of at most 1 KiB, before the read
/// completes; the graft's result stays in its state (`graft_api::read_state`). A
/// read whose graft was missing or aborted completes `DONE | STREAM_ABORTED`.
pub const STREAM: u64 = 1 << 9;
/// Status bit beside `DONE`: the read's stream graft did not see all of it.
pub const STREAM_ABORTED: u64 = 1 << 62;
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
/// The segment's logical-disk graft refused or aborted on a block, or is gone (`LDISK`).
pub const E_GRAFT: u64 = 5;

/// One operation's words.
pub fn op(kind: u64, first: u64, blocks: u64, status: u64, offset: u64) -> [u64; OP_WORDS] {
    [kind, first, blocks | (status << 32), offset]
}

rt::protocol! {
    /// Requests to the service itself, and through a segment capability.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Request<'a> in rt::labels::BLK;
    client client via service {
    use crate as p;
    use abi::fpage::Fpage;
    use abi::Error;
    use alloc::string::String;
    use rt::ipc::{self, Msg};

    /// An open segment: its capability, the shared area mapped here, its length.
    pub struct Segment {
        pub cap: u64,
        pub area: u64,
        mem: rt::shared::Area,
        pub blocks: u64,
        /// The next submission-ring entry this side writes.
        tail: core::cell::Cell<u64>,
        /// What it was opened as (to open it again after a restart of the service).
        name: String,
        rights: u8,
    }

    /// The client-side convention of `batch` and `data`: slot i of the data area is
    /// `SLOT_BYTES` long and operation i of a simple batch uses slot i and status word i.
    pub const SLOT_BYTES: u64 = 16 * 1024;
    pub const SLOTS: u64 = (p::AREA_BYTES - p::DATA) / SLOT_BYTES;

    /// Requests to the service itself find a restarted block service again
    /// (`rt::env::request_reconnecting`); segments open before it must be opened again
    /// (`Segment::reopen`).
    fn service(srv: u64, m: &mut Msg) -> Result<(), Error> {
        rt::env::request_reconnecting("blk", srv, m)
    }

    fn named(label: u64, name: &str, words: &[u64]) -> Msg {
        ipc::set_send_string(name.as_bytes());
        Msg::new(label, words).with_string()
    }

    /// The device the service has mounted: (blocks, free blocks, segments, block size).
    pub fn mount(srv: u64) -> Result<(u64, u64, u64, u64), Error> {
        let [blocks, free, segments, block_size, ..] = mount_raw(srv)?;
        Ok((blocks, free, segments, block_size))
    }

    /// The device's cache flushes: (sent since the service started, whether it has a
    /// write cache to flush).
    pub fn flushes(srv: u64) -> Result<(u64, bool), Error> {
        let [.., flushes, write_cache] = mount_raw(srv)?;
        Ok((flushes, write_cache != 0))
    }

    /// A segment of `blocks` blocks owned by the caller's principal; others get `others`.
    pub fn create(srv: u64, name: &str, blocks: u64, others: u8) -> Result<(), Error> {
        create_raw(srv, blocks, others as u64, name)
    }

    /// Open with `rights` (READ 1, WRITE 2); the shared area lands at `area_va` (aligned
    /// to its 2 MiB, unused).
    pub fn open(srv: u64, name: &str, rights: u8, area_va: u64) -> Result<Segment, Error> {
        let cap = rt::alloc_slot();
        let windows = [
            Fpage::mem(area_va, 12 + p::AREA_LOG2, abi::mem::RIGHTS_MASK),
            Fpage::caps(cap, 0, abi::rights::ALL),
            Fpage(0),
        ];
        let mut m = named(p::OPEN, name, &[rights as u64]);
        if let Err(e) = rt::env::request_mapping_reconnecting("blk", srv, windows, &mut m) {
            rt::free_slot(cap);
            return Err(e);
        }
        let mem = mapped_area(area_va);
        Ok(Segment {
            cap,
            area: area_va,
            mem,
            blocks: m.word(2),
            tail: core::cell::Cell::new(0),
            name: String::from(name),
            rights,
        })
    }

    /// The shared area the service has just mapped at `va` (the one unsafe block of this
    /// crate).
    #[allow(unsafe_code)]
    fn mapped_area(va: u64) -> rt::shared::Area {
        // SAFETY: the service mapped `AREA_BYTES` of its DMA memory read-write at `va` by
        // the OPEN reply's map item (the window was exactly that range), and it stays
        // mapped until the segment is closed; nothing Rust-owned lives there.
        unsafe { rt::shared::Area::new(va, p::AREA_BYTES) }
    }

    /// (length, owner, owner's rights, others' rights)
    pub fn stat(srv: u64, name: &str) -> Result<(u64, u64, u64, u64), Error> {
        let [length, owner, owner_rights, others_rights, _] = stat_raw(srv, name)?;
        Ok((length, owner, owner_rights, others_rights))
    }

    /// The segment's first block on the device (what the cache's eviction grafts see).
    pub fn first_block(srv: u64, name: &str) -> Result<u64, Error> {
        Ok(stat_raw(srv, name)?[4])
    }

    pub fn list(srv: u64) -> Result<String, Error> {
        let mut buf = alloc::vec![0u8; 4096];
        ipc::set_recv_buffer(&mut buf);
        list_raw(srv)?;
        let n = ipc::received_string_len().min(buf.len());
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    /// A delegated capability (`Segment::delegate`) made usable here: its shared area is
    /// mapped read-only at `area_va` (aligned to 2 MiB, unused). Reads only; it writes
    /// nothing into the area (the service clears the status words of each batch).
    pub struct View {
        pub cap: u64,
        pub blocks: u64,
        /// Bytes readable through it (past them, reads give zeros).
        pub bytes: u64,
        mem: rt::shared::Area,
    }

    /// Map the first `2^log2` bytes of the shared area of the delegated capability in
    /// slot `ticket` at `area_va` (aligned to them, unused), asking the service in slot
    /// `srv`, for principal `payer` (0: the caller's own; see `ATTACH`). The view works
    /// through the holder's capability the reply brings (`View::cap`); the ticket is
    /// the caller's still.
    pub fn attach(srv: u64, ticket: u64, area_va: u64, log2: u64, payer: u32) -> Result<View, Error> {
        let cap = rt::alloc_slot();
        ipc::set_windows(
            Fpage::mem(area_va, log2.min(12 + p::AREA_LOG2), abi::mem::RIGHTS_MASK),
            Fpage::caps(cap, 0, abi::rights::ALL),
            Fpage(0),
        );
        let r = attach_raw(srv, log2, payer as u64, &[(Fpage::caps(ticket, 0, abi::rights::SEND), 0)]);
        ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
        let m = match r {
            Ok(m) => m,
            Err(e) => {
                rt::free_slot(cap);
                return Err(e);
            }
        };
        if m.items() != 2 {
            rt::free_slot(cap);
            return Err(Error::Malformed);
        }
        Ok(View { cap, blocks: m.word(2), bytes: m.word(3), mem: mapped_view(area_va, 1 << log2) })
    }

    /// The part of a view's area the service has just mapped at `va`.
    #[allow(unsafe_code)]
    fn mapped_view(va: u64, len: u64) -> rt::shared::Area {
        // SAFETY: the service mapped `len` bytes of its DMA memory read-only at `va` by
        // the ATTACH reply's map item (the window was exactly that range); the holder
        // only reads them (`View` writes nothing); they stay mapped until the view is
        // closed and a while after (blk's PARK_US); nothing Rust-owned lives there.
        unsafe { rt::shared::Area::new(va, len) }
    }

    impl View {
        /// Submit operations (`p::op` words; reads) in one message, at most `MAX_REG_OPS`.
        pub fn batch_ops(&self, ops: &[[u64; p::OP_WORDS]], flags: u64) -> Result<(), Error> {
            if ops.len() > p::MAX_REG_OPS {
                return Err(Error::TooLong);
            }
            batch_raw(self.cap, flags, ops.len() as u64, ops.as_flattened()).map(|_| ())
        }

        /// Status word `i`: 0 pending, `DONE`, or `FAILED | error`.
        pub fn status(&self, i: u64) -> u64 {
            self.mem.read(p::STATUS + 8 * i)
        }

        /// Operations completed since the attach.
        pub fn completed(&self) -> u64 {
            self.mem.read(p::COMPLETED)
        }

        /// The word at `offset` of the mapped area, read as it is now (a read in flight
        /// may be changing the data: each call reads the memory again).
        pub fn word(&self, offset: u64) -> u64 {
            self.mem.read(offset)
        }

        /// `len` bytes of the data at `offset`.
        pub fn bytes(&self, offset: u64, len: u64) -> &[u8] {
            assert!(offset >= p::DATA, "outside the data area");
            self.mem.bytes(offset, len)
        }

        /// Give it back; the service unmaps the area.
        pub fn close(self) -> Result<(), Error> {
            let r = close_raw(self.cap);
            rt::free_slot(self.cap);
            r
        }
    }

    impl Segment {
        /// Hand `extents` (pairs of first block, blocks) of this segment on with
        /// `rights`, readable up to `bytes` (0: all of the blocks): the new capability
        /// lands in slot `dst`; returns (its blocks, its id for `revoke`).
        pub fn delegate(&self, rights: u8, extents: &[(u64, u64)], bytes: u64, dst: u64) -> Result<(u64, u64), Error> {
            self.delegate_for(rights, extents, bytes, 0, dst)
        }

        /// `delegate` for principal `payer` (0: this capability's own), which pays for
        /// the view (see `DELEGATE`: only an agent may name another principal).
        pub fn delegate_for(
            &self,
            rights: u8,
            extents: &[(u64, u64)],
            bytes: u64,
            payer: u32,
            dst: u64,
        ) -> Result<(u64, u64), Error> {
            if extents.is_empty() || extents.len() > p::MAX_EXTENTS {
                return Err(Error::InvalidArg);
            }
            let mut w = [0u64; 2 * p::MAX_EXTENTS];
            for (pair, (f, n)) in w.chunks_exact_mut(2).zip(extents) {
                pair.copy_from_slice(&[*f, *n]);
            }
            ipc::set_windows(Fpage(0), Fpage::caps(dst, 0, abi::rights::ALL), Fpage(0));
            let r = delegate_raw(self.cap, rights as u64, extents.len() as u64, bytes, payer as u64, &w[..2 * extents.len()]);
            ipc::set_windows(Fpage(0), Fpage(0), Fpage(0));
            let m = r?;
            if m.items() != 1 {
                return Err(Error::Malformed);
            }
            Ok((m.word(2), m.word(3)))
        }

        /// Close view `id` delegated through this segment (see `REVOKE`).
        pub fn revoke(&self, id: u64) -> Result<(), Error> {
            revoke_raw(self.cap, id)
        }

        fn word(&self, off: u64) -> u64 {
            self.mem.read(off)
        }

        fn set_word(&self, off: u64, v: u64) {
            self.mem.write(off, v)
        }

        /// The shared area (control page and data).
        pub fn shared(&self) -> &rt::shared::Area {
            &self.mem
        }

        /// Submit operations (`p::op` words) in one message (at most `MAX_REG_OPS`);
        /// `flags` = `WAIT_ALL` returns only when all of them completed.
        pub fn batch_ops(&self, ops: &[[u64; p::OP_WORDS]], flags: u64) -> Result<(), Error> {
            if ops.len() > p::MAX_REG_OPS {
                return Err(Error::TooLong);
            }
            for o in ops {
                self.set_word(p::STATUS + 8 * (o[2] >> 32), 0);
            }
            batch_raw(self.cap, flags, ops.len() as u64, ops.as_flattened()).map(|_| ())
        }

        /// Submit operations through the shared ring: one doorbell IPC per `SQ_ENTRIES`.
        pub fn submit(&self, ops: &[[u64; p::OP_WORDS]], flags: u64) -> Result<(), Error> {
            for chunk in ops.chunks(p::SQ_ENTRIES as usize) {
                let mut t = self.tail.get();
                for o in chunk {
                    if o[2] >> 32 < p::STATUS_WORDS {
                        self.set_word(p::STATUS + 8 * (o[2] >> 32), 0);
                    }
                    let e = p::SQ + (t % p::SQ_ENTRIES) * 32;
                    for (k, v) in o.iter().enumerate() {
                        self.set_word(e + 8 * k as u64, *v);
                    }
                    t += 1;
                }
                let before = self.tail.replace(t);
                self.set_word(p::SQ_TAIL, t);
                if let Err(e) = submit_raw(self.cap, flags) {
                    // The service took none of them: withdraw them from the ring.
                    self.tail.set(before);
                    self.set_word(p::SQ_TAIL, before);
                    return Err(e);
                }
            }
            Ok(())
        }

        /// Submit up to `MAX_REG_OPS` operations (kind | flags, first block, blocks): the
        /// i-th uses slot i and status word i. Returns when they are accepted, not done.
        pub fn batch(&self, ops: &[(u64, u64, u64)]) -> Result<(), Error> {
            let w: alloc::vec::Vec<[u64; p::OP_WORDS]> = ops
                .iter()
                .enumerate()
                .map(|(i, (k, f, n))| p::op(*k, *f, *n, i as u64, p::DATA + i as u64 * SLOT_BYTES))
                .collect();
            self.batch_ops(&w, 0)
        }

        /// Status word `i`: 0 pending, `DONE`, or `FAILED | error`.
        pub fn status(&self, i: u64) -> u64 {
            self.word(p::STATUS + 8 * i)
        }

        /// Operations completed since the open.
        pub fn completed(&self) -> u64 {
            self.word(p::COMPLETED)
        }

        /// Sleep until the completion counter reaches `n`.
        pub fn wait_count(&self, n: u64) -> Result<u64, Error> {
            Ok(wait_raw(self.cap, n)?[0])
        }

        /// Wait (asleep in the service, not polling) for operation `i`; returns its status.
        pub fn wait(&self, i: u64) -> u64 {
            loop {
                // The counter is read before the status: the service writes the status first,
                // so if the status is still pending the counter will pass `c`.
                let c = self.completed();
                let s = self.status(i);
                if s != 0 {
                    return s;
                }
                if self.wait_count(c + 1).is_err() {
                    return p::FAILED | p::E_IO;
                }
            }
        }

        /// `len` bytes of the shared area's data at `offset`.
        #[allow(clippy::mut_from_ref)]
        pub fn bytes(&self, offset: u64, len: u64) -> &mut [u8] {
            assert!(offset >= p::DATA, "outside the data area");
            self.mem.bytes(offset, len)
        }

        /// Slot `i` of the data area (`SLOT_BYTES` long).
        #[allow(clippy::mut_from_ref)]
        pub fn data(&self, i: u64) -> &mut [u8] {
            self.bytes(p::DATA + i * SLOT_BYTES, SLOT_BYTES)
        }

        /// Return once every write before it is on the disk.
        pub fn sync(&self) -> Result<(), Error> {
            sync_raw(self.cap)
        }

        /// Make the segment a logical disk through the caller's graft `graft` at point
        /// `ldisk` (0: no longer): the blocks it maps onto (see `LDISK`).
        pub fn ldisk(&self, graft: u32) -> Result<u64, Error> {
            Ok(ldisk_raw(self.cap, graft as u64)?[0])
        }

        /// Open the segment again, at the same place, after the block service ended (a
        /// call on the segment failed with `rt::env::server_gone`, or a status word read
        /// 0 after the answer: the shared area vanished with the service). The restarted
        /// service is found through root; this waits up to 10 s for it. Operations not
        /// acknowledged before must be sent again; the shared area starts zeroed.
        pub fn reopen(&mut self, srv: u64) -> Result<(), Error> {
            let _ = rt::sys::cap_delete(self.cap);
            let mut last = Error::NoPartner;
            for _ in 0..1000 {
                match open(srv, &self.name, self.rights, self.area) {
                    Ok(fresh) => {
                        rt::free_slot(core::mem::replace(&mut self.cap, fresh.cap));
                        self.blocks = fresh.blocks;
                        self.tail.set(0);
                        return Ok(());
                    }
                    Err(e) => last = e,
                }
                rt::sys::sleep_us(10_000);
            }
            Err(last)
        }

        pub fn close(self) -> Result<(), Error> {
            let r = close_raw(self.cap);
            rt::free_slot(self.cap);
            r
        }
    }
    };
    requests {
        /// string = name, MR1 = length in blocks, MR2 = rights for others (READ 1, WRITE 2).
        CREATE = 0x80, fn create_raw(blocks, others; text name) -> [] => Create { name: &'a str, blocks: u64, others: u64 };
        /// string = name, MR1 = rights wanted. Opens a capability window first: the reply
        /// maps a SEND capability for the segment (its badge names it) and the shared area
        /// (`AREA_PAGES` pages of DMA memory: the control page, then data). Reply MR2 = blocks.
        OPEN = 0x81, fn open_raw(rights; text name) -> [blocks] => Open { name: &'a str, rights: u64 };
        /// string = name. Reply: MR2 = length, MR3 = owner, MR4 = owner's rights, MR5 = others',
        /// MR6 = its first block on the device (the block numbers the cache and its eviction
        /// grafts see);
        /// `NoRights` for a segment the caller has no rights to (LIST does not show it either).
        STAT = 0x82, fn stat_raw(; text name) -> [length, owner, owner_rights, others_rights, first_block] => Stat { name: &'a str };
        /// Reply string: the segments the caller may open, one "name blocks owner" a line.
        LIST = 0x83, fn list_raw() => List;
        /// string = name (owner only).
        DELETE = 0x84, fn delete(; text name) -> [] => Delete { name: &'a str };
        /// `baio_mount`: the device as mounted. Reply MR2 = blocks, MR3 = free blocks,
        /// MR4 = segments, MR5 = block size, MR6 = cache flushes sent to the device since the
        /// service started, MR7 = 1 if the device has a write cache to flush (0: it offers no
        /// flush, and its writes count as durable when done); `BadState` if the device was
        /// refused.
        MOUNT = 0x8a, fn mount_raw() -> [blocks, free, segments, block_size, flushes, write_cache] => Mount;
        /// Through a segment capability: MR1 = flags (`WAIT_ALL`), MR2 = n ≤ `MAX_REG_OPS`,
        /// then `OP_WORDS` words per operation (see `op`). Reply at once (or, with
        /// `WAIT_ALL`, once all of them completed): MR2 = operations taken.
        BATCH = 0x85, fn batch_raw(flags, n; rest ops) -> [taken] via rt::server::request
            => /// Through a segment: `ops` holds n × `OP_WORDS` words.
            Batch { flags: u64, ops: &'a [u64] } = Request::Batch { flags, ops: batch_ops(n, ops)? };
        /// Through a segment capability: the doorbell of the submission ring. MR1 = flags:
        /// the service takes every entry from `SQ_HEAD` to `SQ_TAIL`. Reply as for `BATCH`; a
        /// refused doorbell (a tail past the ring, a status index past the page) takes none of
        /// them, and `SQ_HEAD` stays where it was.
        SUBMIT = 0x88, fn submit_raw(flags) -> [taken] via rt::server::request => Submit { flags: u64 };
        /// Through a segment capability: MR1 = n. Reply (MR2 = completed) once the
        /// segment's completion counter has reached n: sleep instead of polling.
        WAIT = 0x89, fn wait_raw(n) -> [completed] via rt::server::request => Wait { n: u64 };
        /// Through a segment capability: returns once every write completed before it is on
        /// stable storage (the device's write cache flushed); `Io` if the device's flush
        /// failed. To the service itself, from root only (its own capability, as the machine
        /// stops: `halt`): the same for every write to any segment; `NoRights` from anyone
        /// else.
        SYNC = 0x87, fn sync_raw() -> [] via rt::server::request => Sync;
        /// Through a segment capability: give it back (the capability is revoked).
        CLOSE = 0x86, fn close_raw() -> [] via rt::server::request => Close;
        /// Through a segment capability (an opened one: a view is not handed on further): hand
        /// part of the segment on. MR1 = rights (a subset of the capability's), MR2 = n ≤
        /// `MAX_EXTENTS`, MR3 = bytes (0: all of the blocks; else reads through the view see
        /// zeros past this many bytes — a file's slack in its last block stays unseen, and
        /// never reaches memory the holder maps, not even while a read is under way), MR4 =
        /// the principal the view is for (0: the capability's own; another only from a
        /// capability an agent opened — `files` delegates a ticket for the client that asked
        /// for it), then n pairs (first block, blocks) of this capability's blocks. The view's
        /// capability slot here is charged to that principal (`PRINCIPAL_SLOTS`). Reply: a
        /// capability item (a new badged SEND capability, the "ticket", for the caller to pass
        /// on) and MR2 = its blocks, MR3 = its id (for `REVOKE`). Through it, block 0 is the
        /// first block of the first pair, and so on in order: the holder sees those blocks and
        /// no other (a file's extents, for `files` to let `net` send a file: Cue). It has no
        /// shared area until `ATTACH`; it is closed by `CLOSE` through it before that, through
        /// the holder's capability after, by `REVOKE` through the parent, with the parent, or
        /// when its holder ends. At most `MAX_DELEGATED` per segment capability. `NoRights`
        /// for more rights than the capability's or a principal the caller may not charge,
        /// `BadState` through a view, `NoSpace` past the principal's share of slots.
        DELEGATE = 0x8b, fn delegate_raw(rights, n, bytes, payer; rest extents) via rt::server::request
            => /// `extents` holds n pairs (first block, blocks).
            Delegate { rights: u64, bytes: u64, payer: u64, extents: &'a [u64] }
            = Request::Delegate { rights, bytes, payer, extents: extents_of(n, extents)? };
        /// To the service (not through the ticket), once per view: the ticket comes as a
        /// capability item (mapped; it is checked to be one of this service's views), MR1 =
        /// log2 of the bytes of the shared area to map (12 ..= `12 + AREA_LOG2`: the control
        /// page and as much data as the holder will use; operations must stay inside it),
        /// MR2 = the principal the view is attached for (0: the caller's; another only from an
        /// agent — `net` attaches for the client that asked for the Cue transfer). The caller
        /// is its holder from now on: the view, its area and both its capability slots are
        /// charged to that principal (its `MAX_OPEN_PER_PRINCIPAL` areas, its
        /// `PRINCIPAL_SLOTS`), and it closes when the holder ends. The reply's first item
        /// maps the area read-only (the holder sends `BATCH` messages and reads status words
        /// and data, and writes nothing); its second is the holder's own capability to the
        /// view, through which alone the view works from now on (other copies of the ticket
        /// answer `BadState`; `CLOSE` through it gives the area back at once). Reply MR2 = its
        /// blocks, MR3 = its bytes. `InvalidCap` without a ticket of this service, `BadState`
        /// if it is attached already, `InvalidArg` for a size out of range, `NoRights` for a
        /// principal the caller may not charge, `NoMemory` past the principal's areas,
        /// `NoSpace` past its slots. Until then every request through the ticket but `CLOSE`
        /// is `BadState`.
        ATTACH = 0x8c, fn attach_raw(log2, payer; items ticket) via rt::server::request
            => /// To the service, with the ticket as a capability item.
            Attach { log2: u64, payer: u64 };
        /// Through a segment capability that was opened (the delegator's; never through a
        /// view): MR1 = the id of a view delegated through it. The view is closed: its
        /// holder's capability goes at once, the area it mapped `PARK_US` later (the holder may
        /// be reading it; it checks its capability before it does). Views delegated from
        /// another opened handle the caller's program holds may be revoked too (a handle a
        /// program took over in a live update, when root said `SUCCEEDED`: those with views
        /// delegated from them stay open for the new program). `NoRights` through a view,
        /// `InvalidArg` for a view not delegated from the caller's handles. The holder closing
        /// its own view (`CLOSE` through it) gives the area back at once.
        REVOKE = 0x8d, fn revoke_raw(view) -> [] via rt::server::request => Revoke { view: u64 };
        /// To the service: what the caller's principal is charged for here. Reply MR2 =
        /// capability slots (segments open, views, holders' capabilities, sleeping waits),
        /// MR3 = its share of them (`PRINCIPAL_SLOTS`), MR4 = shared areas (open segments,
        /// attached views, and revoked views' areas not yet taken back), MR5 = its limit of
        /// them (`MAX_OPEN_PER_PRINCIPAL`), MR6 = views charged to it.
        USAGE = 0x8f, fn usage() -> [slots, slot_share, areas, area_limit, views] => Usage;
        /// Through a segment capability of its owner, with write rights, to the whole segment
        /// (not a view): MR1 = the id of the owner's graft at point `ldisk` (0: none). From
        /// now on the segment is a logical disk (VINO §3.3): each block read or written
        /// through any capability to it goes where the graft says among the segment's first
        /// `blocks - MAP_BLOCKS` blocks, and the graft's state — its map — is kept in the last
        /// `MAP_BLOCKS` (`baio::ldisk`): a block written is one commit (data, then map), so a
        /// power cut at any write leaves the map naming whole blocks. On attaching, a map
        /// already there (the newer whole copy) becomes the graft's state; with none, the
        /// whole segment is zeroed and the graft starts from zeros. Operations are direct
        /// (`BUFFERED` is ignored) and each block is one graft call; a block the graft refuses
        /// or aborts on fails the operation with `E_GRAFT`, as does every operation while the
        /// graft is gone (unloaded, or its program ended) until the owner attaches one again.
        /// MR1 = 0 detaches: blocks are read and written where they lie. The binding lasts
        /// while any capability to the segment is open. Reply MR2 = the blocks the graft maps
        /// onto. `NoRights` for another principal or without write rights, `BadState` for a
        /// view, `NotFound` for no such graft of the caller's at `ldisk`, `SlotInUse` if the
        /// graft is bound to another segment, `InvalidArg` if the graft refuses the segment (too big
        /// or too small for it) or it is bigger than 65,536 blocks (a logical disk's I/O is
        /// synchronous, and a new one is zeroed whole).
        LDISK = 0x8e, fn ldisk_raw(graft) -> [blocks] via rt::server::request => Ldisk { graft: u64 };
    }
    nested {
        /// To the service: the graft protocol (point `stream`).
        Graft(graft_api::Request<'a>) if graft_api::is_graft_label,
    }
}

/// A `BATCH`'s operations: n ≤ `MAX_REG_OPS` of them, all there; else `Malformed`.
fn batch_ops(n: u64, ops: &[u64]) -> Result<&[u64], Error> {
    if n > MAX_REG_OPS as u64 || (ops.len() as u64) < OP_WORDS as u64 * n {
        return Err(Error::Malformed);
    }
    Ok(&ops[..OP_WORDS * n as usize])
}

/// A `DELEGATE`'s extents: 1 ≤ n ≤ `MAX_EXTENTS` pairs, all there; else `Malformed`.
fn extents_of(n: u64, extents: &[u64]) -> Result<&[u64], Error> {
    if n == 0 || n > MAX_EXTENTS as u64 || (extents.len() as u64) < 2 * n {
        return Err(Error::Malformed);
    }
    Ok(&extents[..2 * n as usize])
}
