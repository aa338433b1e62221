//! The `files` compatibility server: one baiofs filesystem (a library filesystem in a
//! BAIO segment, `crates/baiofs`) served by path over IPC, so that ordinary programs
//! can open, read, write, close, list and remove files without linking a filesystem.
//! As an application of BAIO it makes its own caching choices: a library cache of
//! `cache=N` blocks (default 256) and read-ahead — opening a file prefetches its first
//! blocks, and each read prefetches the next ones — through asynchronous BAIO reads.
//! Arguments: `segment=NAME` (default `files`), `cache=N`.
//!
//! **Live update** (root's `UPDATE`): a running `files` hands itself over to a
//! new program while its clients keep calling. Root names the successor
//! (`UPDATE_BEGIN`); the successor, started with `update` among its arguments and the
//! old server as its `PEER`, asks for the state (`UPDATE_STATE` with the formats it
//! reads); the old server makes everything durable (`sync`), answers with its open
//! handles and tickets in the best common format, and from then on hears only root —
//! its clients' requests wait in its queue. The successor mounts the filesystem, takes
//! the state or refuses it, and tells root (`UPDATE_DONE`). Root asks the old server for
//! its capabilities (`COMMIT`: the tickets, kept in one aligned block of slots, granted
//! to root — granted, not copied, so the capabilities its clients derived from them
//! live on when the old server ends), moves the old server's endpoint to the successor
//! (the queued requests and every client's capability with it), ends the old one and
//! grants the tickets on to the successor in its answer. Refused or dead, root tells the
//! old one to carry on (`UPDATE_ABORT`, with the tickets back if it had them).
//! `formats=MASK` sets the formats a successor reads (default 1: format 0).
//!
//! **Sessions** (K42 Fig. 6): each open file has a session object (`baiofs::session`)
//! in a `swap::Slot`: exclusive while one client has it open (small appends kept back
//! and written as one), swapped to shared (every write through at once) when a second
//! client opens it, and back when one is left — component `sessions` of the
//! reconfiguration protocol (`swap files.sessions shared` fixes them shared; `auto`,
//! the default, adapts; `interpose files.sessions counter` puts one interposer on every
//! session, open now or later). What an exclusive session keeps back is written before
//! anything else looks at the file (close, stat, list, sync, tickets, an update).
//!
//! **Per-file state** (K42 Fig. 5's FCM, crate `fcm`): what files knows of each file —
//! handles open on it, reads and writes through them — is component `fcm`: `single`
//! (one map under one lock, the default) or `replicated` (a representative per CPU,
//! combined when `STAT` asks), swapped live (`swap files.fcm replicated|single`), or
//! `auto`, which swaps on cross-CPU sharing and says so in the log. `STAT` answers it.
//! (With `cpus=all` every request still runs under files' one state lock, so the
//! replicated component saves lines moving between caches, not waiting: docs/user.md.)
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

extern crate alloc;

use abi::Error;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use baiofs::handover::{Handles, Handover};
use baiofs::session::{self, Session, SessionVia};
use baiofs::{Fs, Kind};
use core::fmt::Write as _;
use files_api::{Request, MAX_IO};
use rt::ipc;
use rt::server::{self, Answer, Badge, Server};
use rt::{env, println};
use segdev::SegDev;
use swap::{Generations, Outcome, Slot};

rt::entry!(main);

/// Bytes read ahead of a reader.
const READ_AHEAD: u64 = 64 * 1024;

fn fs_err(e: baiofs::Error) -> Error {
    e.code()
}

fn arg<'a>(key: &str) -> Option<&'a str> {
    rt::args().split(' ').find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

struct Files {
    fs: Fs<SegDev>,
    /// handle → (client program, inode)
    handles: BTreeMap<u64, (u32, u32)>,
    /// The handles this instance hands out (they carry its epoch: `Handles`).
    next: Handles,
    /// Reply strings live here until the kernel has copied them.
    out: Vec<u8>,
    text: String,
    /// Tickets handed out (Cue): (client program, inode, slot of our copy, the view's
    /// id at blk), oldest first. Our copy tells whether the view is still open. The
    /// copies lie in `ticket_slots`, a block of `2^TICKETS_LOG2` aligned slots (a live
    /// update grants the block as one item).
    tickets: Vec<(u32, u32, u64, u64)>,
    ticket_slots: u64,
    /// Each client program's principal (from the badge of its requests): whose share
    /// its handles and tickets count against. (A successor of a live update learns them
    /// again as clients call: until then their handles and tickets count only in all.)
    principals: BTreeMap<u32, u32>,
    /// A live update: who may take the state, and whether it has.
    hand: swap_api::Handing,
    /// The state handed over (it must live until the kernel has copied it).
    state: Vec<u8>,
    /// Each open file's session, and whether it is the shared kind.
    sessions: BTreeMap<u32, (Slot<dyn Session>, bool)>,
    gens: Generations,
    /// Files whose session may keep bytes back (written through an exclusive one since
    /// its last flush): what `flush_all` visits.
    dirty: alloc::collections::BTreeSet<u32>,
    /// Sessions fixed shared (`swap files.sessions shared`), else adapting (`auto`).
    all_shared: bool,
    /// Sessions swapped so far, and swaps abandoned.
    session_swaps: u64,
    session_aborts: u64,
    /// The interposer on every session (`interpose files.sessions KIND`): one, shared by
    /// the slots of all open files and of files opened later.
    interposer: Option<swap::interposers::Shared>,
    /// Busy ticks in requests so far (`PROFILE`).
    busy: u64,
    /// Component `fcm`: each file's open handles, reads and writes (crate `fcm`).
    fcm: fcm::Fcm,
}

/// The implementations of component `fcm` (the first two are `fcm::Kind`s).
const FCM_IMPLS: [&str; 3] = ["single", "replicated", "auto"];

/// The CPU this request runs on (a hint: `rt::sys::cpu`).
fn here() -> usize {
    rt::sys::cpu() as usize
}

/// The implementations of component `sessions`.
const SESSION_IMPLS: [&str; 2] = ["auto", "shared"];

/// State formats `files` writes and reads (bit 0: `baiofs::handover`'s layout).
const FORMATS: u64 = 1;
/// The slots of the tickets: `MAX_ALL_TICKETS`.
const TICKETS_LOG2: u32 = 6;
const _: () = assert!(1 << TICKETS_LOG2 >= files_api::MAX_ALL_TICKETS);

impl Files {
    /// Take ticket `i` back (blk `REVOKE` through our segment: every copy of it goes, and
    /// the area its holder mapped soon after).
    fn revoke(&mut self, i: usize) {
        let (_, _, slot, id) = self.tickets.remove(i);
        let _ = self.fs.dev.seg.revoke(id);
        let _ = rt::sys::cap_delete(slot);
    }

    /// Revoke the tickets `which` picks.
    fn revoke_where(&mut self, which: impl Fn(u32, u32) -> bool) {
        let mut i = 0;
        while i < self.tickets.len() {
            let (c, ino, _, _) = self.tickets[i];
            if which(c, ino) {
                self.revoke(i);
            } else {
                i += 1;
            }
        }
    }

    /// Tickets held by programs of `principal`.
    fn tickets_of(&self, principal: u32) -> usize {
        self.tickets.iter().filter(|t| self.principals.get(&t.0) == Some(&principal)).count()
    }

    /// Handles held by programs of `principal`.
    fn handles_of(&self, principal: u32) -> usize {
        self.handles.values().filter(|(c, _)| self.principals.get(c) == Some(&principal)).count()
    }

    /// `TICKET` for program `client` of `principal`: a view of the file's blocks that
    /// the block service charges to `principal` (we are its agent), never to us.
    fn ticket(&mut self, client: u32, principal: u32, handle: u64) -> Answer {
        let Some(ino) = self.mine(client, handle) else { return Answer::err(self.unknown(handle)) };
        if principal == 0 {
            return Answer::err(Error::NoRights);
        }
        // Tickets `net` closed (the transfer ended) are gone from our slots too.
        self.forget_closed_tickets();
        let (size, runs) = match self.fs.extents_of(ino) {
            Ok(e) => e,
            Err(e) => return Answer::err(fs_err(e)),
        };
        if runs.is_empty() {
            return Answer::err(Error::BadState);
        }
        // Past a limit, the program's own oldest ticket goes, or its principal's: never
        // another principal's.
        let own = self.tickets.iter().position(|t| t.0 == client);
        if let Some(i) = own.filter(|_| self.tickets.iter().filter(|t| t.0 == client).count() >= files_api::MAX_TICKETS)
        {
            self.revoke(i);
        }
        if self.tickets_of(principal) >= files_api::PRINCIPAL_TICKETS {
            let own = self.tickets.iter().position(|t| t.0 == client);
            if let Some(i) =
                own.or_else(|| self.tickets.iter().position(|t| self.principals.get(&t.0) == Some(&principal)))
            {
                self.revoke(i);
            }
        }
        if self.tickets.len() >= files_api::MAX_ALL_TICKETS {
            return Answer::err(Error::NoSpace);
        }
        let Some(slot) = (self.ticket_slots..self.ticket_slots + (1 << TICKETS_LOG2))
            .find(|s| !self.tickets.iter().any(|t| t.2 == *s))
        else {
            return Answer::err(Error::NoSpace);
        };
        match self.fs.dev.seg.delegate_for(baio::READ, &runs, size, principal, slot) {
            Ok((blocks, id)) => {
                self.tickets.push((client, ino, slot, id));
                let mut r = server::ok_msg(&[size, blocks]);
                r.push_item(abi::fpage::Fpage::caps(slot, 0, abi::rights::SEND), 0);
                Answer::Reply(r)
            }
            Err(e) => {
                let _ = rt::sys::cap_delete(slot);
                Answer::err(e)
            }
        }
    }

    fn mine(&self, client: u32, h: u64) -> Option<u32> {
        self.handles.get(&h).filter(|(c, _)| *c == client).map(|(_, i)| *i)
    }

    /// What a call on a handle that is not the caller's open one hears: `Lost` for a
    /// handle an ended instance of this server made (its writes no SYNC or CLOSE had
    /// answered are gone with that instance), else `InvalidCap`.
    fn unknown(&self, h: u64) -> Error {
        if !self.handles.contains_key(&h) && self.next.lost(h) {
            Error::Lost
        } else {
            Error::InvalidCap
        }
    }
}

fn done(r: Result<(), baiofs::Error>) -> Answer {
    Answer::result(r.map_err(fs_err))
}

impl Files {
    /// Give file `ino` the session its clients call for: none once no handle is left
    /// (what it kept back written), shared while several clients have it open (or
    /// sessions are fixed shared), else exclusive — swapping the one it has.
    fn settle(&mut self, ino: u32) {
        let mut clients: Vec<u32> = self.handles.values().filter(|(_, i)| *i == ino).map(|(c, _)| *c).collect();
        clients.sort_unstable();
        clients.dedup();
        if clients.is_empty() {
            // (Close wrote it already and told its client of an error.)
            let _ = self.flush(ino);
            self.sessions.remove(&ino);
            return;
        }
        let want = self.all_shared || clients.len() > 1;
        match self.sessions.get_mut(&ino) {
            None => {
                let mut slot = Slot::new(session::new(want));
                if let Some(i) = &self.interposer {
                    slot.interpose(Some(alloc::boxed::Box::new(i.clone())));
                }
                self.sessions.insert(ino, (slot, want));
            }
            Some((slot, shared)) if *shared != want => {
                // One request at a time: the session is quiescent now, so the swap ends
                // at once (the run it kept back moves to the new one).
                if slot.swap(&mut self.gens, session::new(want), u64::MAX) {
                    match slot.step(&self.gens, 0) {
                        Outcome::Swapped { .. } => {
                            *shared = want;
                            self.session_swaps += 1;
                        }
                        _ => self.session_aborts += 1,
                    }
                }
            }
            Some(_) => {}
        }
    }

    /// Write what file `ino`'s session keeps back.
    fn flush(&mut self, ino: u32) -> Result<(), baiofs::Error> {
        if !self.dirty.remove(&ino) {
            return Ok(());
        }
        let Some((slot, _)) = self.sessions.get_mut(&ino) else { return Ok(()) };
        let Some(c) = slot.begin(&mut self.gens, 0, false) else { return Err(baiofs::Error::Io) };
        let r = SessionVia::call(slot, &c, |s| s.flush(&mut self.fs, ino));
        slot.end(&mut self.gens, c);
        r
    }

    /// Write what every session keeps back (before the filesystem is looked at whole);
    /// the first error.
    fn flush_all(&mut self) -> Result<(), baiofs::Error> {
        let inos: Vec<u32> = self.dirty.iter().copied().collect();
        let mut r = Ok(());
        for ino in inos {
            let f = self.flush(ino);
            if r.is_ok() {
                r = f;
            }
        }
        r
    }

    /// Tickets `net` closed (the transfer ended) are gone from our slots too.
    fn forget_closed_tickets(&mut self) {
        self.tickets.retain(|t| {
            rt::sys::cap_info(t.2).is_ok() || {
                let _ = rt::sys::cap_delete(t.2);
                false
            }
        });
    }

    /// The live update's requests (see the module's head).
    fn update(&mut self, from: Badge, u: swap_api::Update) -> Answer {
        match self.hand.step(from, u, FORMATS) {
            swap_api::Step::Answer(a) => a,
            swap_api::Step::Aborted => {
                // The ticket block came back with it if root had taken it.
                println!("files: the update failed; serving on");
                Answer::ok(&[])
            }
            swap_api::Step::Commit => {
                let mut r = server::ok_msg(&[]);
                r.push_item(abi::fpage::Fpage::caps(self.ticket_slots, TICKETS_LOG2 as u64, abi::rights::ALL), 1);
                Answer::Reply(r)
            }
            swap_api::Step::State { format } => {
                if let Err(e) = self.flush_all().and_then(|_| self.fs.sync()) {
                    return Answer::err(fs_err(e));
                }
                self.forget_closed_tickets();
                let tickets =
                    self.tickets.iter().map(|&(c, i, slot, id)| (c, i, slot - self.ticket_slots, id)).collect();
                self.state = Handover { next: self.next.next(), handles: self.handles.clone(), tickets }.encode();
                ipc::set_send_string(&self.state);
                let r = server::ok_msg(&[format as u64, self.tickets.len() as u64]).with_string();
                self.hand.handed();
                println!(
                    "files: state handed to program {} ({} handles, {} tickets, {} bytes)",
                    from.program(),
                    self.handles.len(),
                    self.tickets.len(),
                    self.state.len()
                );
                Answer::Reply(r)
            }
        }
    }
}

impl Files {
    /// Read through file `ino`'s session into `out`.
    fn session_read(&mut self, ino: u32, off: u64, len: usize) -> Result<usize, baiofs::Error> {
        let (Files { fs, sessions, gens, out, .. }, len) = (self, len.min(MAX_IO as usize));
        let Some((slot, _)) = sessions.get_mut(&ino) else { return fs.read_ino(ino, off, &mut out[..len]) };
        let Some(c) = slot.begin(gens, 0, false) else { return Err(baiofs::Error::Io) };
        let r = SessionVia::call(slot, &c, |s| s.read(fs, ino, off, &mut out[..len]));
        slot.end(gens, c);
        r
    }

    /// Write through file `ino`'s session.
    fn session_write(&mut self, ino: u32, off: u64, data: &[u8]) -> Result<usize, baiofs::Error> {
        let Files { fs, sessions, gens, dirty, .. } = self;
        let Some((slot, shared)) = sessions.get_mut(&ino) else { return fs.write_ino(ino, off, data) };
        if !*shared {
            dirty.insert(ino);
        }
        let Some(c) = slot.begin(gens, 0, false) else { return Err(baiofs::Error::Io) };
        let r = SessionVia::call(slot, &c, |s| s.write(fs, ino, off, data));
        slot.end(gens, c);
        r
    }
}

impl swap_api::Components for Files {
    fn count(&self) -> usize {
        2
    }

    fn describe(&self, k: usize, out: &mut String) {
        if k == 1 {
            let (files, entries) = self.fcm.files(here());
            let now =
                if self.fcm.auto.load(core::sync::atomic::Ordering::Relaxed) { 2 } else { self.fcm.kind() as usize };
            let _ = write!(
                out,
                "fcm {} {} in={} files={} entries={} swaps={}",
                FCM_IMPLS[now],
                FCM_IMPLS.join(","),
                self.fcm.kind().name(),
                files,
                entries,
                self.fcm.swaps()
            );
            return;
        }
        let shared = self.sessions.values().filter(|s| s.1).count();
        let _ = write!(
            out,
            "sessions {} {} open={} shared={} swaps={} aborts={} ",
            SESSION_IMPLS[self.all_shared as usize],
            SESSION_IMPLS.join(","),
            self.sessions.len(),
            shared,
            self.session_swaps,
            self.session_aborts
        );
        match &self.interposer {
            Some(i) => swap::Interposer::report(i, baiofs::session::SessionMethod::NAMES, out),
            None => out.push('-'),
        }
    }

    fn swap(&mut self, k: usize, imp: usize) -> Result<u32, Result<&'static str, Error>> {
        if k == 1 {
            let to = match imp {
                0 => fcm::Kind::Single,
                1 => fcm::Kind::Replicated,
                2 => {
                    self.fcm.auto.store(true, core::sync::atomic::Ordering::Relaxed);
                    println!("files: fcm auto (in {})", self.fcm.kind().name());
                    return Ok(0);
                }
                _ => return Err(Err(Error::InvalidArg)),
            };
            self.fcm.auto.store(false, core::sync::atomic::Ordering::Relaxed);
            if self.fcm.swap(to) {
                println!("files: fcm swapped to {}", to.name());
            }
            return Ok(0);
        }
        if k != 0 || imp >= SESSION_IMPLS.len() {
            return Err(Err(Error::InvalidArg));
        }
        self.all_shared = imp == 1;
        let inos: Vec<u32> = self.sessions.keys().copied().collect();
        for ino in inos {
            self.settle(ino);
        }
        Ok(0)
    }

    /// One interposer for all sessions (a slot per open file): each slot gets a handle.
    fn interpose(&mut self, k: usize, i: Option<alloc::boxed::Box<dyn swap::Interposer>>) -> Result<(), Error> {
        if k != 0 {
            return Err(Error::Unsupported);
        }
        self.interposer = i.map(swap::interposers::Shared::new);
        for (slot, _) in self.sessions.values_mut() {
            slot.interpose(
                self.interposer.clone().map(|i| alloc::boxed::Box::new(i) as alloc::boxed::Box<dyn swap::Interposer>),
            );
        }
        Ok(())
    }
}

impl Server for Files {
    type Request<'a> = Request<'a>;

    /// Handing over, the ticket block is open for root to give back (`UPDATE_ABORT`).
    fn windows(&self) -> Option<[abi::fpage::Fpage; 3]> {
        self.hand.passive().then(|| {
            [
                abi::fpage::Fpage(0),
                abi::fpage::Fpage::caps(self.ticket_slots, TICKETS_LOG2 as u64, 0),
                abi::fpage::Fpage(0),
            ]
        })
    }

    fn receive_from(&self) -> u64 {
        if self.hand.passive() {
            abi::cap::PARENT
        } else {
            ipc::RECV_ANY
        }
    }

    fn gone(&mut self, client: Badge) {
        self.principals.remove(&client.program());
        let mut inos: Vec<u32> =
            self.handles.values().filter(|(c, _)| *c == client.program()).map(|(_, i)| *i).collect();
        for &ino in &inos {
            self.fcm.call(here(), ino, fcm::Op::Close);
        }
        inos.sort_unstable();
        inos.dedup();
        self.handles.retain(|_, (c, _)| *c != client.program());
        self.revoke_where(|c, _| c == client.program());
        for ino in inos {
            self.settle(ino);
        }
    }

    fn handle(&mut self, from: Badge, req: Request<'_>) -> Answer {
        let t = rt::sys::rdtsc();
        let a = self.serve(from, req);
        if let Some((was, to, w)) = self.fcm.auto_step() {
            println!(
                "files: fcm auto: {} -> {} ({} calls: {} shared, {} combines, {} from one CPU)",
                was.name(),
                to.name(),
                w.calls,
                w.shared,
                w.combines,
                w.top_cpu
            );
        }
        self.busy += rt::sys::rdtsc().wrapping_sub(t);
        a
    }
}

impl Files {
    /// A request (`Server::handle` counts its ticks).
    fn serve(&mut self, from: Badge, req: Request<'_>) -> Answer {
        match req {
            Request::Update(u) => return self.update(from, u),
            _ if self.hand.passive() => return Answer::err(Error::NoRights),
            _ => {}
        }
        let client = from.program();
        if client != 0 {
            self.principals.insert(client, from.principal());
        }
        if let Request::Swap(r) = req {
            let mut text = core::mem::take(&mut self.text);
            let a = swap_api::serve(self, from, r, &mut text, rt::sys::rdtsc);
            self.text = text;
            return a;
        }
        // Requests that look at the filesystem itself see what sessions keep back (an
        // error writing it is the answer to a sync; others go on).
        let flushed = if matches!(
            req,
            Request::Open { .. }
                | Request::List { .. }
                | Request::Remove { .. }
                | Request::Stat { .. }
                | Request::Fetch { .. }
                | Request::Sync
                | Request::Ticket { .. }
        ) {
            self.flush_all()
        } else {
            Ok(())
        };
        let principal_full =
            matches!(req, Request::Open { .. }) && self.handles_of(from.principal()) >= files_api::PRINCIPAL_HANDLES;
        let fs = &mut self.fs;
        match req {
            // (Before anything is created.)
            Request::Open { .. } if principal_full || self.handles.len() >= files_api::MAX_HANDLES => {
                Answer::err(Error::NoSpace)
            }
            Request::Open { path, create } => {
                let r = match fs.lookup(path) {
                    Err(baiofs::Error::NotFound) if create => fs.create(path, Kind::File),
                    r => r,
                };
                match r.and_then(|ino| fs.stat(path).map(|s| (ino, s))) {
                    Ok((_, (Kind::Dir, _))) => Answer::err(Error::InvalidArg),
                    Ok((ino, (_, size))) => {
                        let Some(h) = self.next.mint() else { return Answer::err(Error::NoSpace) };
                        let _ = fs.prefetch(path, 0, READ_AHEAD);
                        self.handles.insert(h, (client, ino));
                        self.settle(ino);
                        self.fcm.call(here(), ino, fcm::Op::Open);
                        Answer::ok(&[h, size])
                    }
                    Err(e) => Answer::err(fs_err(e)),
                }
            }
            Request::Read { handle, offset, len } => match self.mine(client, handle) {
                None => Answer::err(self.unknown(handle)),
                Some(ino) => match self.session_read(ino, offset, len as usize) {
                    Ok(n) => {
                        self.fcm.call(here(), ino, fcm::Op::Read(n as u64));
                        // Read ahead of this reader (asynchronous BAIO reads).
                        let _ = self.fs.prefetch_ino(ino, offset + n as u64, READ_AHEAD);
                        ipc::set_send_string(&self.out[..n]);
                        Answer::Reply(server::ok_msg(&[n as u64]).with_string())
                    }
                    Err(e) => Answer::err(fs_err(e)),
                },
            },
            Request::Write { handle, offset, data } => match self.mine(client, handle) {
                None => Answer::err(self.unknown(handle)),
                Some(ino) => match self.session_write(ino, offset, data) {
                    Ok(n) => {
                        self.fcm.call(here(), ino, fcm::Op::Write(n as u64));
                        Answer::ok(&[n as u64])
                    }
                    Err(e) => Answer::err(fs_err(e)),
                },
            },
            Request::Close { handle } => match self.mine(client, handle) {
                Some(ino) => {
                    // What the session kept back of this client's writes is written now;
                    // an error doing so is the close's answer (the handle goes anyway).
                    let r = self.flush(ino);
                    self.handles.remove(&handle);
                    self.settle(ino);
                    self.fcm.call(here(), ino, fcm::Op::Close);
                    done(r)
                }
                None => Answer::err(self.unknown(handle)),
            },
            Request::List { dir } => match fs.list(dir) {
                Ok(l) => {
                    self.text.clear();
                    for e in l {
                        let _ = writeln!(
                            self.text,
                            "{} {} {}",
                            if e.kind == Kind::Dir { 'd' } else { 'f' },
                            e.size,
                            e.name
                        );
                    }
                    ipc::set_send_string(self.text.as_bytes());
                    Answer::Reply(server::ok_msg(&[]).with_string())
                }
                Err(e) => Answer::err(fs_err(e)),
            },
            Request::Remove { path } => match fs.lookup(path) {
                Ok(ino) if self.handles.values().any(|(_, i)| *i == ino) => Answer::err(Error::BadState),
                Ok(ino) => {
                    // Its blocks are about to be free for others: no ticket reads them.
                    self.revoke_where(|_, i| i == ino);
                    let r = self.fs.remove(path).map(|_| ());
                    if r.is_ok() {
                        self.fcm.forget(here(), ino);
                    }
                    done(r)
                }
                Err(e) => Answer::err(fs_err(e)),
            },
            Request::Mkdir { path } => done(fs.create(path, Kind::Dir).map(|_| ())),
            Request::Stat { path } => match fs.find(path) {
                Ok((ino, k, size)) => {
                    let f = self.fcm.state(here(), ino).unwrap_or_default();
                    Answer::ok(&[
                        if k == Kind::Dir { files_api::Kind::Dir } else { files_api::Kind::File } as u64,
                        size,
                        f.open_now(),
                        f.reads,
                        f.writes,
                        f.bytes_read,
                        f.bytes_written,
                    ])
                }
                Err(e) => Answer::err(fs_err(e)),
            },
            Request::Sync => done(flushed.and_then(|_| fs.sync())),
            Request::Fsync { handle } => match self.mine(client, handle) {
                // This file's kept-back writes only, then the disk's flush.
                Some(ino) => done(self.flush(ino).and_then(|_| self.fs.sync_ino(ino))),
                None => Answer::err(self.unknown(handle)),
            },
            Request::Rename { from, to } => {
                let (src, old) = (fs.lookup(from).ok(), fs.lookup(to).ok());
                match old {
                    // A file open here is not replaced (as it is not removed).
                    Some(t) if src != Some(t) && self.handles.values().any(|(_, i)| *i == t) => {
                        Answer::err(Error::BadState)
                    }
                    _ => {
                        let r = self.fs.rename(from, to);
                        if let (Ok(()), Some(t)) = (&r, old) {
                            if src != Some(t) {
                                // The replaced file's blocks are free for others now (and no
                                // request ran between): no ticket reads them.
                                self.revoke_where(|_, i| i == t);
                                self.fcm.forget(here(), t);
                            }
                        }
                        done(r)
                    }
                }
            }
            Request::Truncate { handle, size } => match self.mine(client, handle) {
                // This file's kept-back writes first (they may lie past the new size).
                Some(ino) => {
                    let r = self.flush(ino).and_then(|_| self.fs.truncate_ino(ino, size));
                    // Its blocks past the size may be free for others now.
                    self.revoke_where(|_, i| i == ino);
                    done(r)
                }
                None => Answer::err(self.unknown(handle)),
            },
            Request::Ticket { handle } => self.ticket(client, from.principal(), handle),
            Request::Tickets => {
                self.forget_closed_tickets();
                let mine = self.tickets.iter().filter(|t| t.0 == client).count() as u64;
                Answer::ok(&[
                    mine,
                    self.tickets_of(from.principal()) as u64,
                    files_api::PRINCIPAL_TICKETS as u64,
                    self.tickets.len() as u64,
                ])
            }
            Request::Fetch { path, max } => match fs.find(path) {
                Ok((ino, k, size)) => {
                    let kind = if k == Kind::Dir { files_api::Kind::Dir } else { files_api::Kind::File } as u64;
                    if k == Kind::File && size > 0 && size <= max {
                        // Through the file's session if it is open (what it keeps back
                        // included); one read: `max` is at most `MAX_IO`.
                        match self.session_read(ino, 0, size as usize) {
                            Ok(n) => {
                                ipc::set_send_string(&self.out[..n]);
                                Answer::Reply(server::ok_msg(&[kind, size]).with_string())
                            }
                            Err(e) => Answer::err(fs_err(e)),
                        }
                    } else {
                        Answer::ok(&[kind, size])
                    }
                }
                Err(e) => Answer::err(fs_err(e)),
            },
            Request::Profile => Answer::ok(&[self.busy]),
            Request::Update(_) | Request::Swap(_) => unreachable!("answered above"),
        }
    }
}

fn main() -> i32 {
    let name = arg("segment").unwrap_or("files");
    let cache = arg("cache").and_then(|c| c.parse().ok()).unwrap_or(256);
    let updating = swap_api::client::updating();
    let blk = rt::alloc_slot();
    if env::lookup("blk", blk).is_err() {
        println!("files: the manifest must grant blk");
        return swap_api::client::refuse_update(updating, 1);
    }
    let seg = match blk_api::client::open(blk, name, 3, rt::layout::SEGMENT_AREA) {
        Ok(s) => s,
        Err(e) => {
            println!("files: cannot open segment `{}`: {:?}", name, e);
            if updating {
                return swap_api::client::refuse_update(true, 1);
            }
            server::refuse_all(Error::BadState);
        }
    };
    // A successor takes the state before it mounts: the old server makes the
    // filesystem durable first.
    let ticket_slots = rt::alloc_slot_block(TICKETS_LOG2);
    let state = if updating {
        match take_state(ticket_slots) {
            Ok(s) => Some(s),
            Err(why) => {
                println!("files: refusing the update: {}", why);
                return swap_api::client::refuse_update(true, 1);
            }
        }
    } else {
        None
    };
    let mut fs = match Fs::mount(SegDev::new(seg, blk)) {
        Ok(fs) => fs,
        Err(e) => {
            println!("files: refusing segment `{}`: {:?}", name, e);
            if updating {
                return swap_api::client::refuse_update(true, 1);
            }
            // A disk that fails is `Io`; a filesystem the mount refuses, `BadState`.
            server::refuse_all(if e == baiofs::Error::Io { Error::Io } else { Error::BadState });
        }
    };
    for f in &fs.finished {
        println!("files: an interrupted update, finished: {}", f);
    }
    fs.set_cache_blocks(cache);
    let n = fs.list("/").map(|l| l.len()).unwrap_or(0);
    println!("files: baiofs on segment `{}`: {} entries in /, {} blocks free", name, n, fs.free_blocks());
    let mut files = Files {
        fs,
        handles: BTreeMap::new(),
        next: Handles::new(rt::sys::rdtsc() >> 16),
        out: alloc::vec![0u8; MAX_IO as usize],
        text: String::new(),
        tickets: Vec::new(),
        ticket_slots,
        principals: BTreeMap::new(),
        hand: swap_api::Handing::default(),
        state: Vec::new(),
        sessions: BTreeMap::new(),
        gens: Generations::new(),
        dirty: alloc::collections::BTreeSet::new(),
        all_shared: false,
        session_swaps: 0,
        session_aborts: 0,
        interposer: None,
        busy: 0,
        fcm: fcm::Fcm::new(rt::sys::smp_info().cpus as usize, rt::sys::yield_now),
    };
    if let Some((handles, next, tickets)) = state {
        files.handles = handles;
        files.next = Handles::resume(next);
        files.tickets = tickets;
        let inos: Vec<u32> = files.handles.values().map(|(_, i)| *i).collect();
        for ino in inos {
            files.settle(ino);
        }
        // Root's answer grants the old server's ticket block into ours.
        if env::update_done(
            true,
            [abi::fpage::Fpage(0), abi::fpage::Fpage::caps(ticket_slots, TICKETS_LOG2 as u64, 0), abi::fpage::Fpage(0)],
        )
        .is_err()
        {
            println!("files: root did not complete the update");
            return 1;
        }
        println!(
            "files: serving in place of the old server ({} handles, {} tickets)",
            files.handles.len(),
            files.tickets.len()
        );
    }
    // `cpus=all`: a thread on every CPU (`rt::server::run_shared`), sharing the whole
    // state under one lock (docs/user.md, "Servers on every CPU"). Not by default:
    // files calls blk (one thread, on CPU 0) holding that lock, so a disk-bound request
    // from CPU 1 holds every CPU's clients across a cross-CPU call — per-CPU files served
    // a few dozen disk-bound chunks where one thread served thousands.
    if arg("cpus") == Some("all") {
        server::run_shared(files, MAX_IO as usize + 256)
    }
    let mut buf = alloc::vec![0u8; MAX_IO as usize + 256];
    server::run(&mut files, &mut buf)
}

/// The successor's half: ask the old server (`PEER`) for its state in a format this
/// program reads (`formats=MASK`, default `FORMATS`).
#[allow(clippy::type_complexity)]
fn take_state(ticket_slots: u64) -> Result<(BTreeMap<u64, (u32, u32)>, u64, Vec<(u32, u32, u64, u64)>), &'static str> {
    let formats = arg("formats").and_then(|f| f.parse().ok()).unwrap_or(FORMATS);
    let mut buf = alloc::vec![0u8; abi::ipc::MAX_STRING as usize];
    let Ok((m, n)) = swap_api::client::take_state(formats, &mut buf) else {
        return Err("the old server gave no state (no format both know, or it refused)");
    };
    if m.word(2) != 0 {
        return Err("the state came in a format this program does not read");
    }
    let h = Handover::decode(&buf[..n], files_api::MAX_HANDLES, 1 << TICKETS_LOG2)?;
    if h.tickets.len() as u64 != m.word(3) {
        return Err("the state's tickets do not match its count");
    }
    let tickets = h.tickets.into_iter().map(|(c, i, place, id)| (c, i, ticket_slots + place, id)).collect();
    Ok((h.handles, h.next, tickets))
}
