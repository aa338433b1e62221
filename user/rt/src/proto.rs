//! The protocol between programs and root (message labels and their words), declared
//! with `protocol!`; the console's (`console`), and root's messages to a server being
//! updated (`update`).

crate::protocol! {
    /// Root's requests (from programs through `PARENT`), decoded.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Request<'a> in crate::labels::ROOT;
    client client;
    requests {
        /// (call to `PARENT`) MR1 = exit code. Root destroys the task; no reply.
        EXIT = 1, fn exit(code) => Exit { code: u64 };
        /// (call to `PARENT`, string = "name args") MR1 = slot in the caller's capability
        /// space for a SEND capability to the new program's first thread; the slot after it
        /// receives a CONTROL capability for the new task. The new program gets a SEND
        /// capability to the caller's first thread in its `PEER` slot, badged with the new
        /// program's id. Reply: MR1 = 0 or an error code, MR2 = the new program's id.
        SPAWN = 2, fn spawn(slot; text cmdline) -> [id]
            => Spawn { cmdline: &'a str, slot: u64 } = Request::Spawn { cmdline: cmdline.trim(), slot };
        /// (call to `PARENT`, from a memory server) Map the boot image, a piece at a time (one
        /// message carries at most `abi::ipc::MAX_ITEM_PAGES`): MR1 = offset, a multiple of
        /// `BOOTFS_PIECE`. The reply carries a read-only map item of the piece at
        /// `abi::layout::BOOTFS_VADDR + offset`; MR1 = the image's length.
        GET_BOOTFS = 3, fn get_bootfs(offset) via super::answer_as_is => GetBootfs { offset: u64 };
        /// (call to `PARENT`) string = a server's name, MR1 = slot: a SEND capability to it
        /// lands there, if the caller's manifest entry lists the name in `caps`.
        LOOKUP = 4, fn lookup(slot; text name) -> [] => Lookup { name: &'a str, slot: u64 };
        /// (call to `PARENT`) MR1 = first port, MR2 = log2 ports: an I/O item, if the manifest
        /// grants every port of it. The caller opens an I/O window first.
        GET_IO = 5, fn get_io(first, log2) -> [] => GetIo { first: u64, log2: u64 };
        /// (call to `PARENT`) MR1 = line, MR2 = slot: an IRQ capability, if the manifest grants it.
        GET_IRQ = 6, fn get_irq(line, slot) -> [] => GetIrq { line: u64, slot: u64 };
        /// (call to `PARENT`) Reply string: the programs, one line each.
        PS = 7, fn ps() => Ps;
        /// (call to `PARENT`) Reply string: memory of sigma0 and of each memory server.
        MEMINFO = 8, fn meminfo() => Meminfo;
        /// (call to `PARENT`) MR1 = program id: end it.
        KILL = 9, fn kill(id) -> [] => Kill { id: u64 };
        /// (call to `PARENT`) Power off (the machine exits with status 0).
        HALT = 10, fn halt() -> [] => Halt;
        /// (call to `PARENT`) Reply MR2 = root's free capability slots, MR3 = programs it
        /// keeps a record of, MR4 = programs it has started (ids given).
        SLOTS = 11, fn slots() -> [free_slots, programs, started]
            => /// Root's free capability slots (for the test that root does not leak them).
            Slots;
        /// (call to `PARENT`, needs `machine` in the caller's entry) string = "NAME PROGRAM
        /// [ARGS]": live update. Root names the new program to the running NAME
        /// (`update::BEGIN`; a server that does not take part answers otherwise and nothing
        /// starts), then starts PROGRAM (from the boot image) with NAME's manifest entry, its
        /// arguments followed by `update` and ARGS, and with `PEER` = the running server; the
        /// new program takes the old one's state from it (the server's
        /// `swap_api::UPDATE_STATE`) and says `UPDATE_DONE`. Accepted: root moves the old
        /// server's endpoint to the new one (`THREAD_CONTROL SUCCEED`: the clients'
        /// capabilities keep working) and ends the old one. Refused, or the new program ended
        /// first: the old one carries on (`swap_api::UPDATE_ABORT`). The answer comes when it
        /// is over: ok, or `BadState` with the reason as the string; `NotFound` (no such
        /// server), `InvalidArg` (no such program), `NoRights`, `Exists` (an update under way).
        UPDATE = 12, fn update(; text text)
            => /// Replace a running server by a new program: "NAME PROGRAM [ARGS]".
            Update { text: &'a str } = Request::Update { text: text.trim() };
        /// (call to `PARENT`, from the new program of an `UPDATE`) MR1 = 1: state taken,
        /// serving from now on (root answers once the endpoint is moved, granting the
        /// capabilities the old server handed over: open a capability window); 0: refused
        /// (end then).
        UPDATE_DONE = 13, fn update_done(ok) -> []
            => /// (from the new program of an `UPDATE`) it took the old one's state (or refused it).
            UpdateDone { ok: bool } = Request::UpdateDone { ok: ok == 1 };
        /// (call to `PARENT`) MR1 = PCI class (class << 16 | subclass << 8 | interface),
        /// MR2 = which of that class (0 = the first), MR3 = slot: a capability for that one
        /// function (`cap::PCI_DEVICE`), if the manifest's `pci` grants the class. Reply MR2
        /// = its routing id (bus << 8 | device << 3 | function), MR3 = the IOAPIC line its
        /// INTx pin is routed to (`pci::NO_LINE`: none known). `NotFound`: no such one.
        GET_PCI = 14, fn get_pci(class, index, slot) -> [id, line] => GetPci { class: u64, index: u64, slot: u64 };
    }
}

/// How `GET_BOOTFS`'s stub calls: its answer's MR1 is the image's length, not an error
/// code, so the answer is taken as it came.
fn answer_as_is(srv: u64, m: &mut crate::ipc::Msg) -> Result<(), abi::Error> {
    crate::ipc::call(srv, m, crate::ipc::FOREVER)
}

/// The bytes of one `GET_BOOTFS` piece.
pub const BOOTFS_PIECE: u64 = abi::ipc::MAX_ITEM_PAGES * abi::layout::PAGE_SIZE;
/// The name `LOOKUP` answers with the memory server that pages the caller, whichever it
/// is (for its usage and its reclaim graft), when the manifest lists it in `caps`.
pub const PAGER: &str = "pager";

/// (call to `abi::cap::PAGER`, the caller's memory server; the protocol is `mem_api`'s,
/// here because `rt::heap` speaks it) MR1 = pages, MR2 = where (the region of its own
/// memory they are for, or 0): set that many more pages aside for the caller, so that
/// touching them never fails. Refused whole with `NoMemory` when
/// they do not fit in its page limit beside the pages it holds and has set aside, or
/// when there is no memory for them; else the reply's MR2 = the pages set aside by this
/// call, at most `RESERVE_STEP` (ask again for the rest: `reserve`).
pub const RESERVE: u64 = 0x66;
const _: () = assert!(crate::labels::all_in(crate::labels::MEM, &[RESERVE]));
/// The most pages one `RESERVE` sets aside (a memory server's work per request stays
/// bounded: 64 requests to sigma0 at most).
pub const RESERVE_STEP: u64 = 1 << 14;

/// `RESERVE` `pages` pages for the region at `at` (0: none) at the memory server in
/// `pager`, in as many requests as it takes. (`Err(InvalidCap)`: the slot holds no
/// capability — a program paged by sigma0.)
pub fn reserve(pager: u64, pages: u64, at: u64) -> Result<(), abi::Error> {
    let mut left = pages;
    while left > 0 {
        let done = pages - left;
        let here = if at == 0 { 0 } else { at + done * abi::layout::PAGE_SIZE };
        let mut m = crate::ipc::Msg::new(RESERVE, &[left, here]);
        // To the memory server's thread on this CPU if its endpoints are known (never
        // asked for here: the heap may be growing).
        crate::server::request_known_route(pager, &mut m)?;
        let got = m.word(2);
        if got == 0 || got > left {
            return Err(abi::Error::BadState);
        }
        left -= got;
    }
    Ok(())
}

/// (call to `abi::cap::PAGER`) MR1 = where (page-aligned), MR2 = pages: the caller gives
/// back that range of its own memory — the pages it holds there are unmapped (every
/// mapping of them revoked) and return to the memory server's pool, and as many of its
/// pages set aside (`RESERVE`) as the range has pages it did not hold end with them, at
/// most all it has set aside. What was there reads as zeros if touched again (a new
/// page, within its limit). At most `RESERVE_STEP` pages a call (`release` asks again).
/// Reply MR2 = pages it held there and gave back, MR3 = pages set aside that ended.
/// `InvalidArg` for a range that is not page-aligned or not the program's to map.
/// (`rt::heap` gives a graft's arena back so.)
pub const RELEASE: u64 = 0x67;
const _: () = assert!(crate::labels::all_in(crate::labels::MEM, &[RELEASE]));

/// `RELEASE` `pages` pages at `at` at the memory server in `pager`, in as many requests
/// as it takes.
pub fn release(pager: u64, at: u64, pages: u64) -> Result<(), abi::Error> {
    let mut done = 0;
    while done < pages {
        let n = (pages - done).min(RESERVE_STEP);
        let mut m = crate::ipc::Msg::new(RELEASE, &[at + done * abi::layout::PAGE_SIZE, n]);
        crate::server::request(pager, &mut m)?;
        done += n;
    }
    Ok(())
}

/// The console server's protocol (in `rt` because `print!` speaks it).
pub mod console {
    crate::protocol! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Request<'a> in crate::labels::CONSOLE;
        client client;
        requests {
            /// String = bytes to write. Reply MR1 = 0.
            WRITE = 0x70, fn write(; bytes bytes) -> [] => Write(&'a [u8]);
            /// MR1 = most bytes wanted. Reply (when at least one byte was typed): MR1 = 0,
            /// string = the bytes.
            READ = 0x71, fn read(max) => Read { max: u64 } = Request::Read { max: max.max(1) };
            /// MR1 = most bytes wanted. Reply at once: MR1 = 0, string = the bytes typed and
            /// not read yet (none, if nothing was typed). A program busy with something else
            /// looks with it for Ctrl-C.
            POLL = 0x72, fn poll(max) => Poll { max: u64 };
        }
    }
}

/// Root's messages to a server being updated (badge 0): the server's half is in
/// `swap_api` (`UPDATE_STATE`, from the new program).
pub mod update {
    /// MR1 = the program id of the new program that will ask for the state.
    pub const BEGIN: u64 = 0xf3;
    /// The update failed: carry on serving (capabilities root took with `COMMIT` come
    /// back as an item).
    pub const ABORT: u64 = 0xf5;
    /// The new program took the state: grant root the capabilities it names.
    pub const COMMIT: u64 = 0xf6;
    const _: () = assert!(crate::labels::all_in(crate::labels::SWAP, &[BEGIN, ABORT, COMMIT]));
}
