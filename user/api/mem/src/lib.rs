//! A memory server's protocol (root registers the programs it pages; their page faults
//! arrive as kernel fault messages badged with the client's pager badge).
#![no_std]
#![forbid(unsafe_code)]

rt::protocol! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Request<'a> in rt::labels::MEM;
    client client via call {
        /// Each call goes to the memory server's thread on the caller's CPU
        /// (`rt::server::request_routed`).
        fn call(srv: u64, m: &mut rt::ipc::Msg) -> Result<(), abi::Error> {
            rt::server::request_routed(srv, m)
        }

        /// Send a program's image for `client` (root), before registering it by its path
        /// (in pieces of `IMAGE_PIECE`, each call waiting as `timeouts` says).
        pub fn image(srv: u64, client: u64, data: &[u8], timeouts: u64) -> Result<(), abi::Error> {
            let mut offset = 0;
            for piece in data.chunks(super::IMAGE_PIECE) {
                rt::ipc::set_send_string(piece);
                let mut m = rt::ipc::Msg::new(super::IMAGE, &[client, offset, data.len() as u64]).with_string();
                rt::ipc::call(srv, &mut m, timeouts)?;
                abi::check(m.word(1))?;
                offset += piece.len() as u64;
            }
            Ok(())
        }

        /// Set `pages` pages aside for the caller at its memory server `srv` (in as many
        /// requests as it takes), for the region at `at` (0: none): `NoMemory` past its limit
        /// or when memory runs out.
        pub fn reserve(srv: u64, pages: u64, at: u64) -> Result<(), abi::Error> {
            rt::proto::reserve(srv, pages, at)
        }

        /// The caller's memory, after setting its resident limit to `resident` (`u64::MAX`:
        /// unchanged).
        pub fn usage(srv: u64, resident: u64) -> Result<super::Usage, abi::Error> {
            let [pages, limit, resident_limit, taken_back, refaults, grafted, reserved] = usage_raw(srv, resident)?;
            Ok(super::Usage { pages, limit, resident_limit, taken_back, refaults, grafted, reserved })
        }

        /// Is the caller's page at `addr` resident?
        pub fn resident(srv: u64, addr: u64) -> Result<bool, abi::Error> {
            Ok(resident_raw(srv, addr)? == [1])
        }
    };
    requests {
        /// MR1 = client badge (the pager badge its threads' faults carry, and the program id
        /// on its own requests), MR2 = limit in pages, MR3 = resident limit in pages (0: none;
        /// see `RESIDENT`), MR4 = flags (`MAY_GRAFT`); string = "program args" (the program's
        /// file in the boot image first, or a path — starting with `/` — when root sent the
        /// program's image with `IMAGE` for this badge: a program from the files filesystem).
        REGISTER = 0x60, fn register(client, limit, resident, flags; text cmdline) -> []
            => Register { client: u64, limit: u64, resident: u64, flags: u64, cmdline: &'a str };
        /// MR1 = client badge, MR2 = 1 if its task is destroyed (else 0): the program is gone;
        /// its pages return to the pool. With its task destroyed, whatever was mapped from its
        /// pages went with it, and the server takes them back without revoking each (a program
        /// of a million pages would cost a million `UNMAP`s); otherwise each is revoked.
        UNREGISTER = 0x61, fn unregister(client, gone) -> []
            => Unregister { client: u64, gone: bool } = Request::Unregister { client, gone: gone == 1 };
        /// Reply: MR1 = 0, MR2 = pool pages (frames this server took from sigma0 for its
        /// clients), MR3 = free pool pages, MR4 = clients, MR5 = pages all clients hold,
        /// MR6 = free pages set aside for clients (`RESERVE`), then (badge, pages, limit)
        /// for the first `STATS_CLIENTS` clients by badge (MR5 counts them all).
        STATS = 0x62, fn stats() => Stats;
        /// A program's own memory (through its capability to its memory server: `abi::cap::PAGER`,
        /// or one looked up as `rt::proto::PAGER`). MR1 = a new resident limit in pages (`u64::MAX`: leave it; 0: none;
        /// else `MIN_RESIDENT` up to its limit, or `InvalidArg`). Its pages past the resident limit are taken back, one for each
        /// new page it faults in: a clean one — of its image's read-only segments, which the
        /// server fills again from the image on the next fault, so nothing is lost (written
        /// pages stay: there is no swap device) — chosen among its eight oldest by the
        /// program's eviction graft (point `evict`, loaded here with the graft protocol; the
        /// candidates are page addresses) or, without one, the oldest. Reply MR2 = pages held,
        /// MR3 = limit, MR4 = resident limit, MR5 = pages taken back, MR6 = faults on pages
        /// taken back before (refaults), MR7 = decisions the graft made, MR8 = pages set aside
        /// (`RESERVE`) and not yet faulted in.
        USAGE = 0x63, fn usage_raw(resident) -> [pages, limit, resident_limit, taken_back, refaults, grafted, reserved]
            => Usage { resident: u64 };
        /// A program's own memory: MR1 = an address. Reply MR2 = 1 if its page is resident
        /// (mapped by this server and not taken back), else 0 (`mincore`).
        RESIDENT = 0x64, fn resident_raw(addr) -> [resident] => Resident { addr: u64 };
        /// A program's own memory: set pages aside before touching them (`rt::proto::RESERVE`,
        /// which `rt::heap` asks before each step it grows). MR1 = pages, MR2 = the address of
        /// the region they are for (page-aligned; 0: none): the program's own anonymous memory,
        /// where the server may map a faulting page's successors with it (up to 16 pages a
        /// fault; a region over something else mapped there would replace it). Refused whole with
        /// `NoMemory` past the program's page limit (the pages it holds, those set aside and
        /// these together) or when there is no memory for them; else reply MR2 = pages set aside
        /// by this request, at most `rt::proto::RESERVE_STEP` (`client::reserve` asks again for
        /// the rest). A page set aside is always there when the program touches it; a page
        /// touched without one is given if the limit and memory allow, else the fault is
        /// declined and root ends the program. Reservations end with the program.
        RESERVE = rt::proto::RESERVE, fn reserve_raw(pages, at) -> [set_aside] => Reserve { pages: u64, at: u64 };
        /// A program's own memory: give a range of it back (`rt::proto::RELEASE`, which
        /// `rt::heap` asks when a graft's arena goes). MR1 = where (page-aligned), MR2 = pages
        /// (at most `rt::proto::RESERVE_STEP`): the pages it holds there are revoked and
        /// return to the pool, and as many of its pages set aside as the range has pages it
        /// did not hold end (at most all it has set aside); the range is no longer a region of
        /// its reservations. Reply MR2 = pages given back, MR3 = pages set aside that ended.
        /// `InvalidArg` for a range not page-aligned, too long, or not the program's to map.
        RELEASE = rt::proto::RELEASE, fn release_raw(at, pages) -> [freed, unreserved]
            => Release { at: u64, pages: u64 };
        /// (root) A program's ELF image, in pieces: MR1 = client badge, MR2 = offset, MR3 = the
        /// image's length (≤ `MAX_IMAGE`); string = its bytes at the offset. Offset 0 starts
        /// an image (replacing one not registered), the others follow in order; the next
        /// `REGISTER` of that badge takes it. `InvalidArg` for a piece out of order, `TooLong`.
        IMAGE = 0x65, fn image_raw(client, offset, len; bytes bytes) -> []
            => Image { client: u64, offset: u64, len: u64, bytes: &'a [u8] };
    }
    nested {
        /// The graft protocol (point `evict`: which of a program's pages to take back).
        Graft(graft_api::Request<'a>) if graft_api::is_graft_label,
    }
}

/// `REGISTER` flag: the program may load an eviction graft into the server (its
/// manifest entry lists "pager" in `caps`); without it graft requests are `NoRights`.
pub const MAY_GRAFT: u64 = 1;
/// The lowest resident limit: below it a program would fault on most pages it runs.
pub const MIN_RESIDENT: u64 = 32;

/// Clients a `STATS` answer lists one by one (MR7 up to MR63).
pub const STATS_CLIENTS: usize = 19;

/// The largest image `IMAGE` takes.
pub const MAX_IMAGE: u64 = 8 << 20;
/// The largest piece (what a memory server's receive buffer holds).
pub const IMAGE_PIECE: usize = 8 * 1024;

/// A program's memory as its server counts it (`USAGE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub pages: u64,
    pub limit: u64,
    pub resident_limit: u64,
    pub taken_back: u64,
    pub refaults: u64,
    pub grafted: u64,
    pub reserved: u64,
}
