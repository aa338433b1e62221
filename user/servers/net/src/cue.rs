//! Cue transfers: the server sends a file's blocks to a TCP socket for a program
//! (the Cue paper's `Cue(file, socket)`), the program touching none of the bytes.
//!
//! A transfer holds a read-only BAIO view of the blocks (a capability the block
//! service delegated, mapped here by `ATTACH`: as much of its area as the transfer
//! needs, `layout`). It reads ahead into that area in chunks of `CHUNK_BLOCKS` — up to
//! `MAX_SLOTS` of them pending or filled at once, one batched BAIO read each, DMA'd by
//! the disk straight into the area — and sends from the area into the socket's TCP
//! buffer: the one copy a byte makes on its way out of here. Its schedule (k, t) makes a slice of k blocks, then t ms of rest; the server
//! gives transfers turns, one slice each (`Net::cue_run`).
//!
//! The server's part is here too: the CUE requests (`Net::cue`, `cue_state`, ...), one
//! method each, and the transfers' turns in its loop.

extern crate alloc;

use crate::{ok, Net, Reply};
use abi::Error;
use blk_api::{self as b, client::View};
use core::fmt::Write as _;
use net_api as p;
use rt::{env, ipc, server};
use smoltcp::socket::tcp;
use sockpark::Handle as SocketHandle;

pub const BLOCK: u64 = 4096;
/// Blocks read by one operation, and operations ahead of the sender (at most: the
/// control page and seven chunks fit in 1 MiB of the area, 256 pages to map).
pub const CHUNK_BLOCKS: u64 = b::MAX_OP_BLOCKS;
pub const MAX_SLOTS: u64 = 7;
const CHUNK_BYTES: u64 = CHUNK_BLOCKS * BLOCK;

/// How a transfer of the view's bytes `first .. end` uses the area: (its first chunk,
/// chunk slots, log2 of the bytes of the area to map). Chunk c goes to slot
/// (c − first chunk) mod slots; a transfer of a few chunks maps only what they fill
/// (a small file: a few pages), a long one the control page and `MAX_SLOTS` chunks.
pub fn layout(first: u64, end: u64) -> (u64, u64, u64) {
    let (c0, last) = (first / CHUNK_BYTES, (end - 1) / CHUNK_BYTES);
    let chunks = last - c0 + 1;
    let slots = chunks.min(MAX_SLOTS);
    let tail = if chunks == slots { end.div_ceil(BLOCK) * BLOCK - last * CHUNK_BYTES } else { CHUNK_BYTES };
    let need = b::DATA + (slots - 1) * CHUNK_BYTES + tail;
    (c0, slots, (need.next_power_of_two().trailing_zeros() as u64).max(12))
}

pub struct Transfer {
    pub id: u64,
    /// The program that started it, and its socket (its handle, and smoltcp's).
    pub client: u64,
    pub socket: u64,
    pub sh: SocketHandle,
    /// The blocks (None once released) and the window of this server's address space
    /// its area is mapped in (None once the server has taken it back).
    pub view: Option<View>,
    pub window: Option<usize>,
    /// Bytes `first .. end` of the view go out; `pos` is the next one.
    pub first: u64,
    pub pos: u64,
    pub end: u64,
    /// The next chunk (`CHUNK_BYTES` of the view) to read; the first chunk and the
    /// chunk slots of the area (`layout`).
    issued: u64,
    c0: u64,
    slots: u64,
    pub k: u64,
    pub t_ms: u64,
    pub flags: u64,
    pub status: u64,
    /// Where the client wants [status, bytes sent] kept in its area (`p::NO_STATUS`).
    pub status_off: u64,
    /// Bytes left of the current slice; resting until this time (µs) after one.
    credit: u64,
    pub rest_until: u64,
    pub started_us: u64,
    pub ended_us: u64,
    /// Every byte is taken by TCP; waiting for the peer to acknowledge them.
    draining: bool,
    /// The last turn found the next bytes still on their way from the disk.
    pub waiting_disk: bool,
    /// The principal it is charged to (the client's: `MAX_TRANSFERS_PER_PRINCIPAL`).
    pub principal: u32,
    /// `CUE_STREAM`: the client's principal (whose stream graft sees the bytes sent),
    /// the bytes taken by TCP not yet handed to it, and whether it saw all so far.
    stream: Option<u32>,
    sbuf: alloc::vec::Vec<u8>,
    pub stream_ok: bool,
}

/// Bytes of one call of a stream graft.
const PIECE: usize = 1024;

/// What a turn did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    Idle,
    Moved,
    Ended,
}

impl Transfer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: u64,
        client: u64,
        socket: u64,
        sh: SocketHandle,
        view: View,
        window: usize,
        first: u64,
        end: u64,
        k: u64,
        t_ms: u64,
        flags: u64,
        status_off: u64,
        now_us: u64,
        principal: u32,
    ) -> Transfer {
        Transfer {
            id,
            client,
            socket,
            sh,
            view: Some(view),
            window: Some(window),
            first,
            pos: first,
            end,
            issued: first / CHUNK_BYTES,
            c0: layout(first, end).0,
            slots: layout(first, end).1,
            k,
            t_ms,
            flags,
            status: p::CUE_RUNNING,
            status_off,
            credit: 0,
            rest_until: 0,
            started_us: now_us,
            ended_us: 0,
            draining: false,
            waiting_disk: false,
            stream: (flags & p::CUE_STREAM != 0).then_some(principal),
            principal,
            sbuf: alloc::vec::Vec::new(),
            stream_ok: true,
        }
    }

    /// Hand the bytes just sent to the stream graft: whole 1 KiB pieces (64-byte
    /// multiples) as they gather; at the end, the whole blocks left and then the tail
    /// (fewer than 64 bytes, maybe none), which ends the stream.
    fn feed(&mut self, grafts: &mut graft::Table, sent: &[u8], last: bool) {
        let Some(owner) = self.stream else { return };
        if !self.stream_ok {
            return;
        }
        self.sbuf.extend_from_slice(sent);
        let mut call = |t: &mut Transfer, from: usize, n: usize| {
            t.stream_ok &= grafts.call(graft::Point::Stream, owner, &t.sbuf[from..from + n]).is_some();
        };
        let mut off = 0;
        while self.stream_ok && self.sbuf.len() - off >= PIECE {
            call(self, off, PIECE);
            off += PIECE;
        }
        if last && self.stream_ok {
            let left = self.sbuf.len() - off;
            let whole = left / 64 * 64;
            if whole > 0 {
                call(self, off, whole);
                off += whole;
            }
            if self.stream_ok {
                call(self, off, left - whole);
                off += left - whole;
            }
        }
        self.sbuf.drain(..off);
    }

    pub fn running(&self) -> bool {
        self.status == p::CUE_RUNNING
    }

    pub fn sent(&self) -> u64 {
        self.pos - self.first
    }

    pub fn elapsed_us(&self, now_us: u64) -> u64 {
        if self.running() { now_us } else { self.ended_us }.saturating_sub(self.started_us)
    }

    /// A new schedule, from the next slice on.
    pub fn set(&mut self, k: u64, t_ms: u64) {
        self.k = k;
        self.t_ms = t_ms;
        self.credit = self.credit.min(k * BLOCK);
        self.rest_until = 0;
    }

    /// Start reads for the chunks the sender will need next (up to `slots` ahead).
    pub fn read_ahead(&mut self) -> Result<(), abi::Error> {
        let Some(v) = &self.view else { return Ok(()) };
        let last = (self.end - 1) / CHUNK_BYTES;
        let until = (self.pos / CHUNK_BYTES + self.slots).min(last + 1);
        let end_block = self.end.div_ceil(BLOCK).min(v.blocks);
        let mut ops: heapless_ops::Ops = heapless_ops::Ops::new();
        let flags = if self.flags & p::CUE_BUFFERED != 0 { b::BUFFERED } else { 0 };
        while self.issued < until {
            let c = self.issued;
            let first = c * CHUNK_BLOCKS;
            let blocks = (end_block - first).min(CHUNK_BLOCKS);
            let slot = (c - self.c0) % self.slots;
            ops.push(b::op(b::READ_OP | flags, first, blocks, slot, b::DATA + slot * CHUNK_BYTES));
            self.issued += 1;
        }
        if ops.is_empty() {
            return Ok(());
        }
        v.batch_ops(ops.as_slice(), 0)
    }

    /// The bytes from `pos` that are in the area now (empty: the read is pending), or
    /// the read's failure. A function of the fields it reads, so that a caller may
    /// change the others while it holds the bytes.
    fn ready(view: &Option<View>, pos: u64, c0: u64, slots: u64, end: u64) -> Result<&[u8], u64> {
        let Some(v) = view else { return Ok(&[]) };
        let c = pos / CHUNK_BYTES;
        let slot = (c - c0) % slots;
        match v.status(slot) {
            0 => Ok(&[]),
            b::DONE => {
                let within = pos - c * CHUNK_BYTES;
                let n = ((c + 1) * CHUNK_BYTES).min(end) - pos;
                Ok(v.bytes(b::DATA + slot * CHUNK_BYTES + within, n))
            }
            s => Err(s),
        }
    }

    /// One turn: send up to what is left of the slice (a new slice if none is), as far
    /// as the socket takes bytes and reads have brought them in.
    pub fn turn(&mut self, sock: &mut tcp::Socket<'_>, grafts: &mut graft::Table, now_us: u64) -> Turn {
        if !self.running() {
            return Turn::Idle;
        }
        if sock.state() == tcp::State::Closed || (!sock.may_send() && !self.draining) {
            return self.fail(abi::Error::Reset, now_us);
        }
        if self.draining {
            return if sock.send_queue() == 0 { self.finish(p::CUE_DONE, now_us) } else { Turn::Idle };
        }
        if now_us < self.rest_until || sock.send_queue() == sock.send_capacity() {
            // Resting, or no room: nothing to do (and the area is not touched).
            return Turn::Idle;
        }
        // The area is touched only while the capability lives: whoever delegated the
        // blocks may take them back (a file removed) at any time, and then the block
        // service takes the area away soon after (blk's PARK_US).
        if self.view.as_ref().is_none_or(|v| rt::sys::cap_info(v.cap).is_err()) {
            return self.fail(abi::Error::InvalidCap, now_us);
        }
        self.waiting_disk = false;
        if self.credit == 0 {
            self.credit = self.k * BLOCK;
        }
        let mut moved = false;
        loop {
            let data = match Self::ready(&self.view, self.pos, self.c0, self.slots, self.end) {
                Ok(d) => d,
                Err(s) => {
                    let e = if s & b::FAILED != 0 && s & !b::FAILED == b::E_IO {
                        abi::Error::BadState
                    } else {
                        abi::Error::InvalidCap
                    };
                    return self.fail(e, now_us);
                }
            };
            if data.is_empty() {
                self.waiting_disk = true;
                break;
            }
            let n = (data.len() as u64).min(self.credit) as usize;
            if n == 0 {
                break;
            }
            let taken = match sock.send_slice(&data[..n]) {
                Ok(t) => t as u64,
                Err(_) => return self.fail(abi::Error::Reset, now_us),
            };
            if taken == 0 {
                break;
            }
            moved = true;
            let chunk = self.pos / CHUNK_BYTES;
            let last = self.pos + taken == self.end;
            if self.stream.is_some() {
                // The bytes are copied out first: the area is the block service's.
                let sent = data[..taken as usize].to_vec();
                self.feed(grafts, &sent, last);
            }
            self.pos += taken;
            self.credit -= taken;
            if self.pos == self.end {
                self.draining = true;
                if self.flags & p::CUE_SHUTDOWN != 0 {
                    sock.close();
                }
                break;
            }
            if self.pos / CHUNK_BYTES != chunk && self.read_ahead().is_err() {
                // The blocks were taken back (the file was removed) or the block
                // service is gone.
                return self.fail(abi::Error::InvalidCap, now_us);
            }
            if self.credit == 0 {
                if self.t_ms > 0 {
                    self.rest_until = now_us + self.t_ms * 1000;
                }
                break;
            }
        }
        if moved {
            Turn::Moved
        } else {
            Turn::Idle
        }
    }

    fn fail(&mut self, e: abi::Error, now_us: u64) -> Turn {
        self.finish(p::CUE_FAILED | e as u64, now_us)
    }

    /// End with `status` and give the blocks back.
    pub fn finish(&mut self, status: u64, now_us: u64) -> Turn {
        // A stream graft that missed bytes (aborted, or the transfer did not end well)
        // has no result to give.
        let incomplete = self.stream.is_some() && (!self.stream_ok || status != p::CUE_DONE);
        self.status = status | if incomplete { p::CUE_STREAM_ABORTED } else { 0 };
        self.ended_us = now_us;
        if let Some(v) = self.view.take() {
            // Closing (through the holder's capability) unmaps the area here at once; a
            // view already revoked (the file removed) answers InvalidCap, which changes
            // nothing.
            let _ = v.close();
        }
        Turn::Ended
    }
}

/// A fixed-size list of read operations (at most `MAX_SLOTS`), so that reading ahead
/// allocates nothing.
mod heapless_ops {
    use super::MAX_SLOTS;
    use blk_api::OP_WORDS;

    pub struct Ops {
        ops: [[u64; OP_WORDS]; MAX_SLOTS as usize],
        n: usize,
    }

    impl Ops {
        pub fn new() -> Ops {
            Ops { ops: [[0; OP_WORDS]; MAX_SLOTS as usize], n: 0 }
        }
        pub fn push(&mut self, o: [u64; OP_WORDS]) {
            self.ops[self.n] = o;
            self.n += 1;
        }
        pub fn is_empty(&self) -> bool {
            self.n == 0
        }
        pub fn as_slice(&self) -> &[[u64; OP_WORDS]] {
            &self.ops[..self.n]
        }
    }
}

// The server's part: the requests, and the transfers' turns in its loop.

impl Net {
    /// CUE: start a transfer (see `net_api::CUE`) of the blocks of the ticket that came
    /// with the request to socket `handle`; its id.
    #[allow(clippy::too_many_arguments)]
    pub fn cue(
        &mut self,
        id: u64,
        handle: u64,
        first: u64,
        len: u64,
        k: u64,
        t_ms: u64,
        flags: u64,
        size: u64,
        status_off: u64,
    ) -> Reply {
        let ticket = self.received.take().ok_or(Error::Malformed)?;
        let r = self.start(id, ticket, handle, first, len, k, t_ms, flags, size, status_off);
        // The transfer works through the holder's capability ATTACH gave it.
        rt::free_slot(ticket);
        ok(&[r?])
    }

    /// CUE_STATE: transfer `tid`'s state; an ended one is forgotten once told.
    pub fn cue_state(&mut self, id: u64, tid: u64) -> Reply {
        let i = self.transfer_of(id, tid)?;
        let t = &self.transfers[i];
        let r = [t.status, t.sent(), t.end - t.first, t.k, t.t_ms, t.elapsed_us(rt::sys::now_us())];
        if !t.running() {
            self.transfers.remove(i);
            self.client(id)?.watch.remove(&(crate::sockets::TRANSFER, tid));
        }
        ok(&r)
    }

    /// CUE_SET: transfer `tid`'s new schedule.
    pub fn cue_set(&mut self, id: u64, tid: u64, k: u64, t_ms: u64) -> Reply {
        let i = self.transfer_of(id, tid)?;
        self.transfers[i].set(k, t_ms);
        ok(&[])
    }

    /// CUE_CANCEL: end transfer `tid` and forget it.
    pub fn cue_cancel(&mut self, id: u64, tid: u64) -> Reply {
        let i = self.transfer_of(id, tid)?;
        self.cue_end(i, p::CUE_CANCELLED);
        self.transfers.remove(i);
        self.client(id)?.watch.remove(&(crate::sockets::TRANSFER, tid));
        ok(&[])
    }

    /// CUE_LIST: the running transfers, a line each, as the reply's string.
    pub fn cue_list(&mut self) -> Reply {
        let now_us = rt::sys::now_us();
        self.cue_text.clear();
        for t in self.transfers.iter().filter(|t| t.running()) {
            let _ = writeln!(
                self.cue_text,
                "{} {} {} {} {} {} {} {} {}",
                t.id,
                t.client,
                t.socket,
                t.sent(),
                t.end - t.first,
                t.k,
                t.t_ms,
                t.elapsed_us(now_us),
                t.status
            );
        }
        ipc::set_send_string(self.cue_text.as_bytes());
        Ok(Some(server::ok_msg(&[]).with_string()))
    }

    /// Does a transfer run on client `id`'s socket `handle`?
    pub fn cueing(&self, id: u64, handle: u64) -> bool {
        self.transfers.iter().any(|t| t.client == id && t.socket == handle && t.running())
    }

    /// Client `id`'s transfer `tid` (its index), or `InvalidCap`.
    fn transfer_of(&self, id: u64, tid: u64) -> Result<usize, Error> {
        self.transfers.iter().position(|t| t.client == id && t.id == tid).ok_or(Error::InvalidCap)
    }

    /// Does the capability in `slot` name the block service? A client's "ticket" must,
    /// before this server calls through it (anything else could keep it waiting).
    fn is_blk(&mut self, slot: u64) -> bool {
        let Ok(theirs) = rt::sys::cap_object(slot) else { return false };
        if rt::sys::cap_object(self.blk) == Ok(theirs) {
            return true;
        }
        // The block service may have been started again since we looked it up.
        let _ = rt::sys::cap_delete(self.blk);
        env::lookup("blk", self.blk).is_ok() && rt::sys::cap_object(self.blk) == Ok(theirs)
    }

    /// Start a Cue transfer (see `net_api::CUE`) of the blocks in `ticket`.
    #[allow(clippy::too_many_arguments)]
    fn start(
        &mut self,
        id: u64,
        ticket: u64,
        handle: u64,
        first: u64,
        len: u64,
        k: u64,
        t_ms: u64,
        flags: u64,
        size: u64,
        status_off: u64,
    ) -> Result<u64, Error> {
        let sh = self.tcp_of(id, handle)?;
        if self.cueing(id, handle) {
            return Err(Error::BadState);
        }
        let area = self.client(id)?.area;
        if status_off != p::NO_STATUS
            && (!status_off.is_multiple_of(8) || status_off.checked_add(16).is_none_or(|e| e > area.len()))
        {
            return Err(Error::InvalidArg);
        }
        let len = if len == 0 { size.saturating_sub(first) } else { len };
        if len == 0 || first.checked_add(len).is_none_or(|e| e > size) {
            return Err(Error::InvalidArg);
        }
        let s = self.sockets.get::<tcp::Socket>(sh);
        if s.state() == tcp::State::Closed || !s.may_send() {
            return Err(Error::Reset);
        }
        let Some(window) = self.cue_windows.iter().position(|w| !w) else { return Err(Error::NoSpace) };
        if self.transfers.iter().filter(|t| t.client == id && t.running()).count() >= p::MAX_TRANSFERS_PER_CLIENT {
            return Err(Error::NoSpace);
        }
        // Charged to the principal too (every program of one principal together).
        let principal = self.caller_principal;
        if self.transfers.iter().filter(|t| t.principal == principal && t.running()).count()
            >= p::MAX_TRANSFERS_PER_PRINCIPAL
        {
            return Err(Error::NoSpace);
        }
        if !self.is_blk(ticket) {
            return Err(Error::InvalidCap);
        }
        let va = rt::layout::NET_CUE + window as u64 * blk_api::AREA_BYTES;
        let (_, _, log2) = layout(first, first + len);
        // Attached for the client who asked: the view and its area are charged to the
        // client's principal at blk (a program without one cannot have a view attached).
        let view = blk_api::client::attach(self.blk, ticket, va, log2, self.caller_principal).map_err(|e| {
            if e == Error::NoMemory {
                Error::NoSpace
            } else {
                e
            }
        })?;
        if size > view.bytes {
            let _ = view.close();
            return Err(Error::InvalidArg);
        }
        let tid = self.next_transfer;
        self.next_transfer += 1;
        let mut t = Transfer::new(
            tid,
            id,
            handle,
            sh,
            view,
            window,
            first,
            first + len,
            k,
            t_ms,
            flags,
            status_off,
            rt::sys::now_us(),
            principal,
        );
        if t.read_ahead().is_err() {
            if let Some(v) = t.view.take() {
                let _ = v.close();
            }
            return Err(Error::BadState);
        }
        self.cue_windows[window] = true;
        // An ended transfer is kept until its client asks about it (CUE_STATE), closes
        // its socket, or starts the next one on that socket (then it is forgotten): at
        // most one a socket, so they cannot pile up, and one a client waits on is never
        // taken from under it. (A cap of 64 a client did that: httpd, going through a
        // hundred connections before it asked, found transfers it waited on gone, and
        // WAIT_MANY answered InvalidCap.)
        self.transfers.retain(|t| t.client != id || t.socket != handle);
        self.transfers.push(t);
        self.cue_status(self.transfers.len() - 1);
        Ok(tid)
    }

    /// Keep transfer `i`'s status words in its client's area.
    fn cue_status(&self, i: usize) {
        let t = &self.transfers[i];
        if t.status_off == p::NO_STATUS {
            return;
        }
        if let Some(c) = self.clients.get(&t.client) {
            c.area.write(t.status_off + 8, t.sent());
            c.area.write(t.status_off, t.status);
        }
    }

    /// End transfer `i` with `status` (if it runs) and free what it holds.
    pub fn cue_end(&mut self, i: usize, status: u64) {
        let t = &mut self.transfers[i];
        if t.running() {
            t.finish(status, rt::sys::now_us());
        }
        if let Some(w) = t.window.take() {
            self.cue_windows[w] = false;
        }
        let (client, tid) = (t.client, t.id);
        self.mark(client, (crate::sockets::TRANSFER, tid));
        self.cue_status(i);
    }

    /// Cancel and forget the transfers on client `id`'s socket `handle` (it is
    /// closing: the client has let go of them too).
    pub fn cue_cancel_socket(&mut self, id: u64, handle: u64) {
        while let Some(i) = self.transfers.iter().position(|t| t.client == id && t.socket == handle) {
            self.cue_end(i, p::CUE_CANCELLED);
            let t = self.transfers.remove(i);
            if let Some(c) = self.clients.get_mut(&id) {
                c.watch.remove(&(crate::sockets::TRANSFER, t.id));
            }
        }
    }

    /// One round of turns, one slice each, starting with a different transfer each
    /// round. Did any move bytes (or end)?
    pub fn cue_run(&mut self) -> bool {
        let n = self.transfers.len();
        if n == 0 {
            return false;
        }
        let now_us = rt::sys::now_us();
        let mut any = false;
        for k in 0..n {
            let i = (self.rr + k) % n;
            if !self.transfers[i].running() {
                continue;
            }
            let sh = self.transfers[i].sh;
            let turn = self.transfers[i].turn(self.sockets.get_mut::<tcp::Socket>(sh), &mut self.grafts, now_us);
            match turn {
                Turn::Idle => {}
                Turn::Moved => {
                    any = true;
                    self.cue_status(i);
                }
                Turn::Ended => {
                    any = true;
                    self.cue_end(i, 0);
                }
            }
        }
        self.rr = (self.rr + 1) % n;
        any
    }
}
