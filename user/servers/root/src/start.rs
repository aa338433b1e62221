//! Starting programs: a manifest entry loaded from the boot image or read from the files
//! filesystem (`read_program`), paged by its memory server, given the capabilities its
//! entry names and root as its fault handler (`adopt`), and recorded (`record`); the
//! memory servers themselves, paged by sigma0 and handed the boot image (`start_mem`);
//! and the kernel quotas of the memory servers and of the `lent` servers, which follow
//! the machine's frames (`mem_quota`, `size_lent`).

use crate::{badge_of, s0_client, with_tmp, Prog, Root, MEM_SERVERS};
use abi::fpage::Fpage;
use abi::{cap, mem, rights, Error};
use alloc::format;
use alloc::rc::Rc;
use alloc::string::ToString;
use alloc::vec::Vec;
use manifest::restart::Deaths;
use manifest::Program;
use rt::ipc::{self, Msg};
use rt::loader::{self, Child};
use rt::server::Badge;
use rt::{println, proto, sys};
use sigma0_api as s0;

/// Kernel pages a memory server gets beyond those of the pages it may map
/// (`mem_quota`): the upper page tables of its graft arenas (64 regions of their own).
const MEM_KERNEL_EXTRA: u64 = 96;

/// Who asked for a program (SPAWN): its index, the slot pair for its capabilities, and
/// whether it gets control of the new task.
#[derive(Clone, Copy)]
pub(crate) struct Requester {
    pub(crate) idx: usize,
    pub(crate) slot: u64,
    pub(crate) control: bool,
}

impl Root<'_> {
    /// Start a program from a manifest entry. `requester`: the program that asked
    /// (SPAWN), which gets capabilities to it and gives it one back (PEER).
    /// A program whose file is a path (starting with `/`) is read from the files
    /// filesystem (`read_program`), unless its `image` is given (a restart), and its
    /// image sent to its memory server.
    pub(crate) fn start(
        &mut self,
        entry: Program,
        requester: Option<Requester>,
        image: Option<Rc<[u8]>>,
    ) -> Result<usize, Error> {
        let read: Option<Rc<[u8]>> = match image {
            _ if !entry.file.starts_with('/') => None,
            Some(i) => Some(i),
            None => Some(
                self.read_program(&entry.file)
                    .inspect_err(|e| {
                        println!("[root] cannot read `{}` from the files filesystem: {:?}", entry.file, e)
                    })?
                    .into(),
            ),
        };
        let data: &[u8] = match &read {
            Some(r) => r,
            None => match self.fs.find(&entry.file) {
                Some(file) => file.data,
                None => {
                    println!("[root] no program `{}` in the boot image", entry.file);
                    return Err(Error::InvalidArg);
                }
            },
        };
        let pager = MEM_SERVERS.iter().position(|m| *m == entry.pager).ok_or_else(|| {
            println!("[root] {}: no memory server `{}`", entry.name, entry.pager);
            Error::InvalidArg
        })?;
        let idx = self.progs.next_id().ok_or(Error::NoMemory)?;
        let mem_idx = self.mems[pager];
        let mem_slot = self.progs[mem_idx].child.thread;
        let cmdline = entry.cmdline();
        let child = loader::spawn_paged(data, &cmdline, entry.kpages, entry.priority as u64, mem_slot, badge_of(idx))
            .map_err(|e| {
            println!("[root] cannot load `{}`: {:?}", entry.name, e);
            match e {
                loader::LoadError::Sys(e) => e,
                _ => Error::InvalidArg,
            }
        })?;
        let sent = if entry.file.starts_with('/') {
            mem_api::client::image(mem_slot, badge_of(idx), data, ipc::timeouts(1_000_000, 5_000_000))
        } else {
            Ok(())
        };
        let flags = if entry.caps.iter().any(|c| c == proto::PAGER) { mem_api::MAY_GRAFT } else { 0 };
        // Its own memory server, for its requests about its own memory (`cap::PAGER`:
        // `rt::heap` reserves pages there before it grows).
        let pager_cap = with_tmp(|tmp| {
            sys::cap_copy(mem_slot, tmp, rights::SEND, self.badge_for(&entry, idx).0)
                .and_then(|_| sys::cap_give(child.task, tmp, cap::PAGER, rights::SEND))
        });
        if let Err(e) = pager_cap.and(sent).and_then(|_| {
            mem_api::client::register(mem_slot, badge_of(idx), entry.pages, entry.resident, flags, &cmdline)
        }) {
            child.discard();
            return Err(e);
        }
        if let Err(e) = self.adopt(&child, &entry, requester) {
            let _ = mem_api::client::unregister(mem_slot, badge_of(idx), 0);
            child.discard();
            return Err(e);
        }
        // Kept for a restart: a program the manifest restarts, or an update's new one.
        let keep = entry.file.starts_with('/') && (entry.restart || self.peer_of_next.is_some());
        let i = self.record(child, entry, Some(mem_idx));
        self.progs[i].spawner = requester.map(|r| r.idx);
        if keep {
            self.progs[i].image = read;
        }
        Ok(i)
    }

    /// A memory server's kernel quota: the page tables and mapping nodes of every page it
    /// may map — each of sigma0's frames at most once (its pool, its heap, graft code)
    /// and the boot image — as `manifest::kpages_for` derives them for any program, and
    /// `MEM_KERNEL_EXTRA`. So no client's demand can exhaust it: the server maps nothing
    /// else. (Fixed at 256 pages before, it paid for about 15,000 frames, 60 MiB, whatever
    /// the RAM: past that a client within its limit was killed, then the server itself.)
    /// The cost is this much of root's quota set aside for each of the two servers:
    /// about 1.4% of the frames (of the eighth of RAM the kernel keeps).
    pub(crate) fn mem_quota(&self) -> u64 {
        manifest::kpages_for(self.frames() + (self.fs_len as u64).div_ceil(abi::layout::PAGE_SIZE)) + MEM_KERNEL_EXTRA
    }

    /// The machine's frames, as sigma0 counts them.
    pub(crate) fn frames(&self) -> u64 {
        s0::client::stats(self.sigma0).map_or(0, |[_, all, ..]| all)
    }

    /// Give the manifest's `lent` servers (the cache and blk, which map frames lent from
    /// all of RAM) the kernel quota for the machine's frames, from what root can spare
    /// after every program its manifest names (`manifest::lent_kpages`): the cache's
    /// reach follows the RAM. Before the first of them starts; a restart keeps it.
    pub(crate) fn size_lent(&mut self) {
        let lent = self.manifest.iter().filter(|p| p.lent).count() as u64;
        if lent == 0 {
            return;
        }
        let (_, limit, used) = sys::task_info(cap::SELF_TASK).unwrap_or((0, 0, 0));
        // Every entry's quota stays: those started now, and those started later by
        // name (the shell's commands).
        let all: u64 = self.manifest.iter().map(|p| p.kpages).sum();
        let add = manifest::lent_kpages(self.frames(), limit.saturating_sub(used).saturating_sub(all), lent);
        for p in self.manifest.iter_mut().filter(|p| p.lent) {
            p.kpages = p.kpages.saturating_add(add);
            println!("[root] {}: {} kernel pages ({} for the frames it may map)", p.name, p.kpages, add);
        }
    }

    /// Start a memory server, paged by sigma0, and hand it the boot image.
    pub(crate) fn start_mem(&mut self, name: &str) -> Result<usize, Error> {
        let file = self.fs.find("mem").ok_or(Error::InvalidArg)?;
        // Its manifest entry, if any, gives it arguments (`graft_heap=KIB`), nothing else.
        let args = match self.manifest.iter().find(|p| p.name == name) {
            Some(p) if !p.args.is_empty() => format!("{name} {}", p.args),
            _ => name.to_string(),
        };
        let entry = Program { args, priority: 150, ..Program::new("mem") };
        let quota = self.mem_quota();
        let child = loader::load_granted(file.data, &entry.cmdline(), quota, entry.priority as u64)
            .map_err(|_| Error::InvalidArg)?;
        let badge = s0_client(self.progs.next_id().ok_or(Error::NoMemory)?);
        // Its page faults go to sigma0; its own requests to sigma0 carry its badge.
        let given = sys::thread_set_pager(child.thread, cap::SIGMA0_SLOT, badge).and_then(|_| {
            with_tmp(|tmp| {
                sys::cap_copy(cap::SIGMA0_SLOT, tmp, rights::SEND, badge)
                    .and_then(|_| sys::cap_give(child.task, tmp, cap::SIGMA0_SLOT, rights::SEND))
            })
        });
        if let Err(e) = given.and_then(|_| self.adopt(&child, &entry, None)) {
            child.discard();
            return Err(e);
        }
        let thread = child.thread;
        let i = self.record(child, entry, None);
        self.progs[i].name = name.to_string();
        // It asks for the boot image first, piece by piece; answer before anything
        // else needs it.
        let len = self.fs_len as u64;
        let mut offset = 0;
        while offset < len {
            let mut m = Msg::empty();
            ipc::recv(thread, &mut m, ipc::FOREVER)?;
            if m.label() != proto::GET_BOOTFS || m.word(1) != offset {
                return Err(Error::InvalidArg);
            }
            let piece = (len - offset).min(proto::BOOTFS_PIECE);
            let log2 = 64 - (piece.next_power_of_two() - 1).leading_zeros() as u64;
            let at = abi::layout::BOOTFS_VADDR + offset;
            let mut r = Msg::new(0, &[len]);
            r.push_item(Fpage::mem(at, log2.max(12), mem::READ), at);
            ipc::reply(&r)?;
            offset += proto::BOOTFS_PIECE;
        }
        Ok(i)
    }

    /// Give a loaded child (to become program `progs.next_id()`) its capabilities, make
    /// root its fault handler, start it.
    pub(crate) fn adopt(&mut self, child: &Child, entry: &Program, requester: Option<Requester>) -> Result<(), Error> {
        let idx = self.progs.next_id().ok_or(Error::NoMemory)?;
        let badge = badge_of(idx);
        with_tmp(|tmp| {
            sys::cap_copy(cap::SELF_THREAD, tmp, rights::SEND, badge)
                .and_then(|_| sys::cap_give(child.task, tmp, cap::PARENT, rights::SEND))
        })?;
        sys::thread_set_fault_handler(child.thread, cap::SELF_THREAD, Badge::fault(badge as u32).0)?;
        if let Some(old) = self.peer_of_next {
            let b = Badge::client(entry.principal as u64, badge as u32).map_or(badge, |b| b.0);
            let srv = self.progs[old].child.thread;
            with_tmp(|tmp| {
                sys::cap_copy(srv, tmp, rights::SEND, b)
                    .and_then(|_| sys::cap_give(child.task, tmp, cap::PEER, rights::SEND))
            })?;
        }
        if let Some(Requester { idx: r, slot: dst, control }) = requester {
            let req = &self.progs[r].child;
            with_tmp(|tmp| {
                sys::cap_copy(req.thread, tmp, rights::SEND, badge)
                    .and_then(|_| sys::cap_give(child.task, tmp, cap::PEER, rights::SEND))
            })?;
            sys::cap_give(req.task, child.thread, dst, rights::SEND)?;
            // Without control, a task capability with no rights: the spawner sees the
            // program end (the capability goes with the task) and nothing more.
            sys::cap_give(req.task, child.task, dst + 1, if control { rights::CONTROL } else { 0 })?;
        }
        // The console, for programs whose entry names it, is there from the start.
        if entry.caps.iter().any(|c| c == "console") {
            if let Some(c) = self.find("console") {
                let con = self.progs[c].child.thread;
                let _ = with_tmp(|tmp| {
                    sys::cap_copy(con, tmp, rights::SEND, badge)
                        .and_then(|_| sys::cap_give(child.task, tmp, cap::CONSOLE, rights::SEND))
                });
            }
        }
        // Its CPU, before it runs (a CPU that is not running leaves it on the boot CPU).
        if entry.cpu != 0 {
            if let Err(e) = sys::thread_set_cpu(child.thread, entry.cpu as u64) {
                println!("[root] {}: no CPU {} ({:?}): it runs on CPU 0", entry.name, entry.cpu, e);
            }
        }
        child.start()
    }

    /// Keep the record of a started program; returns its index.
    pub(crate) fn record(&mut self, child: Child, entry: Program, pager: Option<usize>) -> usize {
        self.progs.push(Prog {
            name: entry.name.clone(),
            entry,
            child,
            done: false,
            pager,
            restarts: 0,
            deaths: Deaths::default(),
            started_us: sys::now_us(),
            image: None,
            uses: Vec::new(),
            spawner: None,
            successor_of: None,
        })
    }

    /// A program's file from the files filesystem, through the running `files` server
    /// (bounded: `mem_api::MAX_IMAGE` bytes, and each call in time — a stuck server
    /// must not stop root).
    pub(crate) fn read_program(&self, path: &str) -> Result<Vec<u8>, Error> {
        let srv = self.progs[self.find("files").ok_or(Error::NotFound)?].child.thread;
        let t = ipc::timeouts(1_000_000, 5_000_000);
        let call = |m: &mut Msg| ipc::call(srv, m, t).and_then(|_| abi::check(m.word(1)));
        ipc::set_send_string(path.as_bytes());
        let mut m = Msg::new(files_api::OPEN, &[0]).with_string();
        call(&mut m)?;
        let (h, size) = (m.word(2), m.word(3));
        let read = || {
            if size > mem_api::MAX_IMAGE {
                return Err(Error::TooLong);
            }
            let mut out = alloc::vec![0u8; size as usize];
            let mut off = 0;
            while off < out.len() {
                let len = (out.len() - off).min(files_api::MAX_IO as usize);
                ipc::set_recv_buffer(&mut out[off..off + len]);
                let mut m = Msg::new(files_api::READ, &[h, off as u64, len as u64]);
                call(&mut m)?;
                let n = if m.tag().has_string() { ipc::received_string_len().min(len) } else { 0 };
                if n == 0 {
                    break;
                }
                off += n;
            }
            out.truncate(off);
            Ok(out)
        };
        let r = read();
        let _ = call(&mut Msg::new(files_api::CLOSE, &[h]));
        r
    }
}
