//! The shared block cache (BAIO paper §3.4): one cache for every program's buffered
//! operations, so a block many programs read is cached once. The block service alone
//! moves data (it DMAs into the cache's frames, which this server maps to it); this
//! server decides what stays: it keeps the index and the replacement policy
//! (`baio::cache`, least recently used), which is the place a grafted policy goes.
//!
//! Its replacement decisions can be grafted (VINO §3.1): any program holding this
//! server's capability may load an eviction graft (`graft_api`, point `evict`) for
//! its principal's blocks; when the least recently used block is that principal's,
//! the graft picks the victim among the principal's least recently used blocks
//! (`baio::cache::Chooser`), in whichever technology it was written. A graft that
//! fails (over budget, a trap, a victim that is not a candidate) leaves the choice to
//! LRU for that call and is unloaded after three failures in a row.
//!
//! Its replacement policy is a swappable component (K42; `swap`, `swap_api`): it sits in
//! a `swap::Slot`, the server's object translation table, and is swapped between least
//! recently used (`lru`) and most recently used first (`mru`) while the cache runs, the
//! recency order moving to the new policy. With `auto` (argument `policy=auto`, as
//! `cargo xtask run` starts it; otherwise LRU until someone swaps) the server swaps it
//! itself: to MRU when its client's misses turn into a sequential stream (which LRU
//! would let flush every other block out), back to LRU when they stop
//! (`baio::cache::Sequential`). A person swaps it or interposes on it from the shell
//! (`swap cache.policy mru`, `interpose cache.policy counter`). The server handles one
//! request at a time, so it is quiescent between requests: the mediator's phases pass
//! at the end of the request that starts a swap.
//!
//! **Live update** (root's `UPDATE`, `update cache cache` in the shell): a new cache
//! program takes over while the block service keeps calling. The successor (started with
//! `update`, the old server its `PEER`) asks for the state (`UPDATE_STATE`): the index of
//! every slot in use — fills under way included, the block service finishes them with
//! the new server — the recency order, the counters, which policy runs and the bound
//! client (`baio::cache`'s format 0, checked as coming from another program). The old
//! server then hears only root; root takes the frames from it by grant (`COMMIT`) —
//! granted, so the block service's mapping of them, derived from the old server's,
//! lives on under the new one — moves the endpoint and grants the frames on. Loaded
//! eviction grafts do not move (their code and state live in this program): the old
//! server refuses the update while any are loaded.
//!
//! **It grows into free memory and gives it back** (docs/storage.md, "A cache
//! that grows"): beside its first block of frames it takes more blocks lent by
//! sigma0 (`LEND`) while it evicts and sigma0 keeps its reserve and a margin free, and
//! gives them back when sigma0's count of refused frames moves (a memory server needed
//! frames) or free memory runs low (`baio::cache::Sizer` decides). The block service maps
//! each new block (`MAP`) before its slots are handed out; a block given back leaves the
//! index at once, and its frames go back to sigma0 once no fill into it is under way and
//! the block service has been seen between operations (any request, or its `SYNC`).
//! Argument `blocks=N` bounds it to N blocks (1: it keeps its first block and never
//! grows, as scenarios that need evictions from a small cache ask).
//!
//! Its data path serves one client, the block service: the first program to `ATTACH`
//! is bound, and every other program's requests but `STATS` and grafts are refused
//! (`NoRights`) — the
//! frames hold every principal's blocks, so no one else may map them or steer what
//! they hold. When the bound program ends (root's `GONE`), its mapping of the frames
//! is revoked, the cache starts empty, and the next `ATTACH` binds again (a restarted
//! block service).
//!
//! Why one file of about 900 lines: the cache's logic (index, policies, sizing, streams,
//! handover) lives in `baio::cache` on the host; what is left is the server around it —
//! its state, the request dispatch, the block service's binding and the grafts — each
//! a few short functions that read best beside the one `Server` they serve. Split the
//! graft and swap requests out if it grows.
#![no_std]
#![no_main]
#![deny(unsafe_code)]

use abi::fpage::Fpage;
use abi::{mem, Error};
use alloc::string::String;
use baio::cache::tags::{self, Layout, Words};
use baio::cache::{
    Cache, Chooser, Lookup, Lru, Memory, Mru, Policy, PolicyMethod, PolicyVia, Resize, Sequential, Sizer,
};
use cache_api::{self as p, Request};
use graft::{Point, Table};
use rt::ipc::Msg;
use rt::println;
use rt::server::{self, Answer, Badge, Server};
use sigma0_api as s0;
use swap::{Generations, Outcome, Slot};
use swap_api::{Handing, Step};

extern crate alloc;

rt::entry!(main);

/// The graft points this server hosts.
const POINTS: [Point; 1] = [Point::Evict];
/// The cache's graft ids are 1001 ..= 1999.
const GRAFT_IDS: u32 = graft_api::CACHE_IDS;

const AREA: u64 = rt::layout::CACHE_FRAMES;
/// log2 of the pages of the cache's first block at most (1024 blocks: 4 MiB) and at
/// least (64 blocks: 256 KiB): the cache takes the largest block of frames sigma0 can
/// give between them (a small machine may not have 4 MiB left to give in one block). The
/// blocks it takes as it grows are of the same size.
const LOG2: u64 = 10;
const MIN_LOG2: u64 = 6;

/// Blocks of frames the cache holds at most (the first included): 4 GiB of 4 MiB blocks.
const MAX_BLOCKS: u64 = 1024;
/// Blocks looked up between two looks at sigma0's figures while requests keep coming
/// (64 lookups of two blocks); and the time between two looks while they do not, as
/// long as it holds grown blocks.
const LOOK_EVERY: u64 = 128;
const LOOK_US: u64 = 5_000;
/// Kernel-quota pages the cache keeps beyond what mapping another block costs.
const KQUOTA_SLACK: u64 = 16;

/// State formats this program reads and writes (`baio::cache`'s handover: format 0).
const FORMATS: swap::Formats = 1;

fn main() -> i32 {
    let updating = swap_api::client::updating();
    let s0slot = rt::alloc_slot();
    if rt::env::lookup("sigma0", s0slot).is_err() {
        println!("cache: the manifest must grant sigma0");
        return swap_api::client::refuse_update(updating, 1);
    }
    // `blocks=N`: hold at most N blocks of frames (1: never grow), else `MAX_BLOCKS`.
    let max_blocks = rt::args()
        .split(' ')
        .find_map(|a| a.strip_prefix("blocks=")?.parse::<u64>().ok())
        .unwrap_or(MAX_BLOCKS)
        .clamp(1, MAX_BLOCKS);
    let mut s = CacheServer {
        c: Cache::with_layout(layout(MIN_LOG2)),
        phys: 0,
        log2: MIN_LOG2,
        grown: alloc::vec::Vec::new(),
        waiting: None,
        retiring: None,
        sizer: Sizer::new(1 << MIN_LOG2, max_blocks),
        max_blocks,
        lookups: 0,
        looked: 0,
        taken: 0,
        given: 0,
        sigma0: s0slot,
        client: None,
        grafts: Table::new(&POINTS, GRAFT_IDS, graft_host::host()),
        text: String::new(),
        inbox: graft_api::upcall::Inbox::new(),
        gens: Generations::new(),
        policy: Slot::new(alloc::boxed::Box::new(Lru::default())),
        imp: LRU,
        auto: rt::args().split(' ').any(|a| a == "policy=auto"),
        seq: Sequential::default(),
        adapted: 0,
        pending: LRU,
        hand: Handing::default(),
        state: alloc::vec::Vec::new(),
    };
    if updating {
        // The frames come with the update: taken over, not allocated.
        if let Err(why) = s.take_state() {
            println!("cache: refusing the update: {}", why);
            return swap_api::client::refuse_update(true, 1);
        }
        if rt::env::update_done(true, [Fpage::mem(AREA, 12 + s.log2, 0), Fpage(0), Fpage(0)]).is_err() {
            println!("cache: root did not complete the update");
            return 1;
        }
        // The tags in the frames are the old server's; write them from the state taken.
        s.publish(true);
        let st = s.c.stats();
        println!(
            "cache: serving in place of the old server ({} blocks resident, policy {}, client {:?})",
            st.resident, IMPLS[s.imp], s.client
        );
    } else {
        let mut log2 = LOG2;
        let phys = loop {
            let mut m = Msg::new(s0::ALLOC, &[log2, AREA]);
            if rt::server::request_mapping(
                s0slot,
                [Fpage::mem(AREA, 12 + log2, abi::mem::RIGHTS_MASK), Fpage(0), Fpage(0)],
                &mut m,
            )
            .is_ok()
                && m.items() == 1
            {
                break m.word(2);
            }
            if log2 == MIN_LOG2 {
                println!("cache: no memory for {} blocks", 1 << MIN_LOG2);
                return 1;
            }
            log2 -= 1;
        };
        s.log2 = log2;
        s.c = Cache::with_layout(layout(log2));
        s.phys = phys;
        s.sizer = Sizer::new(1 << log2, s.max_blocks);
        println!("cache: {} blocks at {:#x}", s.c.slots(), s.phys);
    }
    let mut buf = [0u8; graft_api::RECV_BYTES];
    server::run(&mut s, &mut buf)
}

struct CacheServer {
    c: Cache,
    /// Physical address of the frames (contiguous).
    phys: u64,
    /// log2 of the frames' pages (`MIN_LOG2..=LOG2`): of each block.
    log2: u64,
    /// Blocks taken since (lent by sigma0), after the first: their physical addresses;
    /// block k (1, 2, ...) is at `AREA + k` blocks here and holds slots from `k` blocks on.
    grown: alloc::vec::Vec<u64>,
    /// A block taken that the client has not mapped yet (`MAP`): its physical address.
    /// Its slots are not handed out until it has; no other is taken meanwhile.
    waiting: Option<u64>,
    /// Blocks being given back: (how many blocks stay, whether the client has been seen
    /// between operations with no fill into them under way since they stopped being used).
    retiring: Option<(usize, bool)>,
    sizer: Sizer,
    /// The most blocks it may hold (argument `blocks=N`; `MAX_BLOCKS` by default).
    max_blocks: u64,
    /// Lookup calls served (`LOOKUP`, `LOOKUPS`), and blocks looked up (when to look at
    /// sigma0's figures again).
    lookups: u64,
    looked: u64,
    /// Blocks taken and given back so far.
    taken: u64,
    given: u64,
    /// Capability to sigma0 (the pages of signed grafts' code).
    sigma0: u64,
    /// The program bound by the first ATTACH (the block service).
    client: Option<u32>,
    grafts: Table,
    /// The last graft LIST reply (it must live until the kernel copies it).
    text: String,
    /// A capability a `LOAD` brings (an upcall graft's thread).
    inbox: graft_api::upcall::Inbox,
    /// Requests in flight, for the mediator's quiescence.
    gens: Generations,
    /// The replacement policy (the translation table's one entry).
    policy: Slot<dyn Policy>,
    /// Which policy it is (`IMPLS`).
    imp: usize,
    /// Swap by what `seq` sees.
    auto: bool,
    seq: Sequential,
    /// Swaps the server made itself.
    adapted: u64,
    /// The implementation a swap under way goes to.
    pending: usize,
    /// A live update: who may take the state, and whether it has.
    hand: Handing,
    /// The state handed over (it must live until the kernel has copied it).
    state: alloc::vec::Vec<u8>,
}

/// The policy's implementations, as `swap` names them; `auto` lets the server choose.
const IMPLS: [&str; 3] = ["lru", "mru", "auto"];
const LRU: usize = 0;
const MRU: usize = 1;
const AUTO: usize = 2;
/// A swap not done within this many cycles is abandoned (it never takes one request).
const SWAP_DEADLINE: u64 = 1 << 32;

impl CacheServer {
    /// Start swapping the policy to `imp`.
    fn start_swap(&mut self, imp: usize) -> bool {
        let next: alloc::boxed::Box<dyn Policy> =
            if imp == MRU { alloc::boxed::Box::new(Mru::default()) } else { alloc::boxed::Box::new(Lru::default()) };
        let ok = self.policy.swap(&mut self.gens, next, rdtsc() + SWAP_DEADLINE);
        if ok {
            self.pending = imp;
        }
        ok
    }

    /// The stream detector's verdict changed to `stream` (`Some`): with `auto`, swap to the
    /// policy it calls for.
    fn adapt(&mut self, stream: Option<bool>) {
        if let Some(stream) = stream {
            let want = if stream { MRU } else { LRU };
            if self.auto && want != self.imp && self.start_swap(want) {
                self.adapted += 1;
            }
        }
    }

    /// Move a swap under way on (between requests: it ends).
    fn step(&mut self) -> Outcome {
        let o = self.policy.step(&self.gens, rdtsc());
        if let Outcome::Swapped { .. } = o {
            self.imp = self.pending;
        }
        o
    }
}

impl swap_api::Components for CacheServer {
    fn count(&self) -> usize {
        1
    }

    fn describe(&self, _k: usize, out: &mut String) {
        use core::fmt::Write;
        let _ = write!(
            out,
            "policy {}{} {} adapted={} ",
            IMPLS[self.imp],
            if self.auto { "(auto)" } else { "" },
            IMPLS.join(","),
            self.adapted
        );
        swap_api::describe_slot(&self.policy, PolicyMethod::NAMES, out);
    }

    fn swap(&mut self, _k: usize, imp: usize) -> Result<u32, Result<&'static str, Error>> {
        let target = match imp {
            LRU | MRU => imp,
            AUTO => {
                if self.seq.stream {
                    MRU
                } else {
                    LRU
                }
            }
            _ => return Err(Err(Error::InvalidArg)),
        };
        self.auto = imp == AUTO;
        if !self.start_swap(target) {
            return Err(Ok("a swap is under way"));
        }
        match self.step() {
            Outcome::Swapped { format, .. } => Ok(format),
            Outcome::Aborted { why, .. } => Err(Ok(why)),
            Outcome::Pending => Err(Ok("under way: it ends after the requests in the server")),
        }
    }

    fn interpose(&mut self, _k: usize, i: Option<alloc::boxed::Box<dyn swap::Interposer>>) -> Result<(), Error> {
        self.policy.interpose(i);
        Ok(())
    }
}

fn rdtsc() -> u64 {
    rt::sys::rdtsc()
}

/// The eviction graft point: the owner's graft, if it has one, picks the victim.
struct Grafted<'a>(&'a mut Table);

impl Chooser for Grafted<'_> {
    fn wants(&mut self, owner: u32) -> bool {
        self.0.active(Point::Evict, owner).is_some()
    }

    fn choose(&mut self, owner: u32, blocks: &[u64]) -> Option<usize> {
        let mut input = [0u8; 8 * baio::cache::CANDIDATES];
        for (k, b) in blocks.iter().enumerate() {
            input[8 * k..8 * k + 8].copy_from_slice(&b.to_le_bytes());
        }
        self.0.call(Point::Evict, owner, &input[..8 * blocks.len()]).map(|v| v as usize)
    }
}

impl Server for CacheServer {
    type Request<'a> = Request<'a>;

    fn next_tick_us(&mut self) -> Option<u64> {
        (!self.grown.is_empty() || self.waiting.is_some()).then_some(LOOK_US)
    }

    /// No request came for a while: look at sigma0's figures (a memory server may be
    /// waiting for frames the cache holds).
    fn tick(&mut self) {
        if !self.hand.passive() {
            self.resize();
        }
    }

    fn windows(&self) -> Option<[Fpage; 3]> {
        if self.hand.passive() {
            // Handing over: the frames come back here if the update fails after root
            // took them.
            return Some([Fpage::mem(AREA, 12 + self.log2, 0), Fpage(0), Fpage(0)]);
        }
        Some([Fpage(0), self.inbox.window(), Fpage(0)])
    }

    fn receive_from(&self) -> u64 {
        if self.hand.passive() {
            abi::cap::PARENT
        } else {
            rt::ipc::RECV_ANY
        }
    }

    fn event(&mut self, _from: Badge, m: &Msg) -> Option<Answer> {
        // Only a graft LOAD may bring a capability (an upcall's thread); any other goes.
        if let Some(slot) = self.inbox.arrived(m) {
            rt::free_slot(slot);
        }
        None
    }

    fn gone(&mut self, who: Badge) {
        self.grafts.forget(who.program() as u64);
        if self.client == Some(who.program()) {
            println!("cache: client {} is gone: the frames are taken back, the cache starts empty", who.program());
            let _ = rt::sys::revoke(Fpage::mem(AREA, 12 + self.log2, 0));
            if let Some(call) = self.policy.begin(&mut self.gens, 0, false) {
                PolicyVia::call(&mut self.policy, &call, |p| self.c.clear(p));
                self.policy.end(&mut self.gens, call);
            }
            self.client = None;
            // Nobody copies from the grown blocks now: all go back at once, and the cache
            // starts again from its first block.
            self.retiring = None;
            self.give_back_from(1);
            if let Some(pa) = self.waiting.take() {
                self.free_block(pa);
            }
            self.c = Cache::with_layout(layout(self.log2));
            self.sizer = Sizer::new(1 << self.log2, self.max_blocks);
        }
    }

    fn handle(&mut self, from: Badge, req: Request) -> Answer {
        match req {
            Request::Update(u) => return self.update(from, u),
            _ if self.hand.passive() => return Answer::err(Error::NoRights),
            _ => {}
        }
        let me = from.program();
        if let Request::Graft(g) = req {
            let (inbox, sigma0) = (&mut self.inbox, self.sigma0);
            let a = graft_api::serve(&mut self.grafts, from.principal(), me as u64, g, &mut self.text, &mut |f| {
                graft_host::engine(f, sigma0).or_else(|| inbox.engine(f))
            });
            self.inbox.done();
            return a;
        }
        if let Request::Swap(r) = req {
            let mut text = core::mem::take(&mut self.text);
            let a = swap_api::serve(self, from, r, &mut text, rdtsc);
            self.text = text;
            return a;
        }
        match (req, self.client) {
            (Request::Stats, _) => {}
            (Request::Attach, None) if me != 0 => self.client = Some(me),
            // MAP comes within a lookup, before blk copies the hits it answered: not
            // between operations.
            (Request::Map { .. }, Some(c)) if c == me => {}
            (_, Some(c)) if c == me => self.client_between(),
            _ => return Answer::err(Error::NoRights),
        }
        if let Request::Map { take } = req {
            return self.map(take);
        }
        // The policy is called for this request: admitted to its slot (a swap cannot be
        // waiting here: it ends with the request that starts it).
        let Some(call) = self.policy.begin(&mut self.gens, 0, false) else { return Answer::err(Error::BadState) };
        let a = self.serve(req, &call);
        self.policy.end(&mut self.gens, call);
        // A new client (`ATTACH`) reads every tag: the frames held the last one's.
        self.publish(matches!(req, Request::Attach));
        if let Some((_, armed)) = &mut self.retiring {
            *armed = self.c.retiring_busy() == 0;
        }
        // The cadence counts blocks looked up, so that a `LOOKUPS` of many runs counts
        // as the `LOOKUP`s it stands for.
        let blocks = match req {
            Request::Lookup { n, .. } => n,
            Request::Lookups { runs, .. } => runs.iter().map(|&w| p::run_of(w).1).sum(),
            _ => 0,
        };
        if blocks > 0 {
            self.lookups += 1;
            let before = self.looked / LOOK_EVERY;
            self.looked += blocks;
            if self.looked / LOOK_EVERY != before {
                self.resize();
            }
        }
        if self.policy.phase() != swap::Phase::Normal {
            if let Outcome::Aborted { why, .. } = self.step() {
                println!("cache: swapping the policy failed: {}", why);
            }
        }
        a
    }
}

impl CacheServer {
    /// Look up `out.len()` blocks from `first` for `owner` (a `LOOKUP`'s run): per block
    /// `slot | state << 32`, `u64::MAX` for none. True if a block was being filled (the
    /// blocks after it are not looked up).
    fn lookup_run(&mut self, first: u64, n: u64, owner: u32, call: &swap::Call, out: &mut [u64]) -> bool {
        let mut found = [None; p::MAX_LOOKUP as usize];
        let c = &mut self.c;
        // The evictions of one lookup share one turn of graft time.
        self.grafts.new_turn();
        let mut chooser = Grafted(&mut self.grafts);
        PolicyVia::call(&mut self.policy, call, |policy| {
            c.lookup_run(first, owner, &mut chooser, policy, &mut found[..n as usize])
        });
        for (o, f) in out.iter_mut().zip(found) {
            *o = match f {
                Some(Lookup::Hit(s)) => s as u64 | p::HIT << 32,
                Some(Lookup::Fill(s)) => s as u64 | p::FILL << 32,
                Some(Lookup::Busy(s)) => s as u64 | p::BUSY << 32,
                Some(Lookup::Full) | None => u64::MAX,
            };
        }
        let stream = self.seq.run(first, n);
        self.adapt(stream);
        found.iter().any(|f| matches!(f, Some(Lookup::Busy(_))))
    }

    /// A request of the data path, with the policy admitted for `call`.
    fn serve(&mut self, req: Request, call: &swap::Call) -> Answer {
        // Hits the block service served without a call count now, in their order, before
        // anything this request may evict (`tags`).
        let (frames, l) = (self.frames(), layout(self.log2));
        if self.client.is_some() {
            let (c, seq) = (&mut self.c, &mut self.seq);
            let mut stream = None;
            PolicyVia::call(&mut self.policy, call, |policy| {
                tags::drain(&frames, &l, |e| {
                    let (first, n) = tags::entry_run(e);
                    for b in first..first.saturating_add(n.min(p::MAX_LOOKUP)) {
                        c.touch(b, policy);
                    }
                    // The stream detector sees the run as it would a lookup's.
                    stream = seq.run(first, n).or(stream);
                })
            });
            self.adapt(stream);
        }
        let c = &mut self.c;
        match req {
            Request::Attach => {
                // A new client starts with an empty ring (its tags: `publish` after this).
                tags::reset(&frames, &l);
                let mut r = server::ok_msg(&[self.phys, c.slots() as u64]);
                r.push_item(Fpage::mem(AREA, 12 + self.log2, mem::READ | mem::WRITE), 0);
                Answer::Reply(r)
            }
            Request::Lookup { first, n, owner } => {
                let mut w = [u64::MAX; p::MAX_LOOKUP as usize];
                self.lookup_run(first, n, owner, call, &mut w);
                let mut r = server::ok_msg(&w[..n as usize]);
                r.mr[2 + n as usize] = self.waiting_word();
                r.mr[0] = abi::ipc::Tag::new(0, 2 + n).0;
                Answer::Reply(r)
            }
            Request::Lookups { owner, runs } => {
                // Each run as a `LOOKUP` of its own, in order, until one meets a block
                // being filled (the caller asks again from it once the fill is over).
                let mut w = [0u64; 1 + p::MAX_RUN_BLOCKS as usize];
                let (mut looked, mut at) = (0, 1);
                for &run in runs {
                    let (first, n) = p::run_of(run);
                    let busy = self.lookup_run(first, n, owner, call, &mut w[at..at + n as usize]);
                    looked += 1;
                    at += n as usize;
                    if busy {
                        break;
                    }
                }
                w[0] = looked;
                let mut r = server::ok_msg(&w[..at]);
                r.mr[2 + at] = self.waiting_word();
                r.mr[0] = abi::ipc::Tag::new(0, 2 + at as u64).0;
                Answer::Reply(r)
            }
            Request::Sync => Answer::ok(&[self.waiting_word(), !self.grown.is_empty() as u64]),
            Request::Map { .. } => unreachable!("answered above"),
            Request::Filled { block, ok } => {
                if PolicyVia::call(&mut self.policy, call, |p| c.filled(block, ok, p)) {
                    Answer::ok(&[])
                } else {
                    Answer::err(Error::InvalidArg)
                }
            }
            Request::Invalidate { first, n } => {
                PolicyVia::call(&mut self.policy, call, |p| c.invalidate(first, n, p));
                Answer::ok(&[])
            }
            Request::Stats => {
                let s = c.stats();
                Answer::ok(&[
                    s.hits,
                    s.misses,
                    s.resident,
                    c.slots() as u64,
                    s.evictions,
                    s.grafted,
                    self.grafts.len() as u64,
                    self.grafts.reaped,
                    1 + self.grown.len() as u64,
                    self.taken,
                    self.given,
                    1 << self.log2,
                    self.lookups,
                ])
            }
            Request::Graft(_) | Request::Swap(_) | Request::Update(_) => unreachable!("answered above"),
        }
    }
}

/// Where the shared tags lie in blocks of 2^`log2` pages (`MIN_LOG2..=LOG2`: always a
/// layout).
fn layout(log2: u64) -> Layout {
    Layout::new(1 << log2).expect("blocks of MIN_LOG2..=LOG2 pages have a layout")
}

/// The frames this server holds and uses (its first block and the grown ones, mapped
/// read-write at `AREA` one after another), as words for the shared tags.
struct Frames(rt::shared::Area);

impl tags::Words for Frames {
    fn read(&self, at: u64) -> u64 {
        self.0.read(at)
    }
    fn write(&self, at: u64, v: u64) {
        self.0.write(at, v)
    }
}

impl CacheServer {
    /// Pages per block.
    fn block_pages(&self) -> u64 {
        1 << self.log2
    }

    /// The frames in use now: the first block and the grown ones (not one waiting to be
    /// mapped by the client, nor one given back).
    #[allow(unsafe_code)]
    fn frames(&self) -> Frames {
        let bytes = (1 + self.grown.len() as u64) << (self.log2 + 12);
        // SAFETY: the first block and each grown one are mapped read-write here at `AREA`
        // one after another (sigma0's `ALLOC` and `LEND` into these windows) until they
        // are given back, which pops them from `grown` first; the `Frames` lives only
        // for the call that made it, and the frames are no Rust object's memory.
        Frames(unsafe { rt::shared::Area::new(AREA, bytes) })
    }

    /// Write the tags changed since the last time, and the limit, where the client reads
    /// them (`tags`); `all`: every tag (the frames' tags are not this server's yet). Not
    /// while handing over: the frames may be the successor's already.
    fn publish(&mut self, all: bool) {
        if self.hand.passive() {
            return;
        }
        let (frames, l) = (self.frames(), layout(self.log2));
        let end = (1 + self.grown.len() as u32) << self.log2;
        let changed = self.c.take_tags();
        if all {
            for (s, t) in self.c.all_tags() {
                frames.write(l.tag_at(s), t);
            }
        } else {
            // A slot past the frames in use is in a block already given back.
            for (s, t) in changed.into_iter().filter(|c| c.0 < end) {
                frames.write(l.tag_at(s), t);
            }
        }
        // A retire's slots, cleared as a range (no memory is asked for while giving
        // memory back).
        for s in self.c.take_cleared().into_iter().flatten().filter(|s| *s < end) {
            frames.write(l.tag_at(s), 0);
        }
        frames.write(tags::LIMIT_AT, self.c.limit().min(end) as u64);
    }

    /// `LOOKUP`'s last word and `SYNC`'s: 1 + the first slot of the block waiting to be
    /// mapped, or 0.
    fn waiting_word(&self) -> u64 {
        match self.waiting {
            Some(_) => 1 + ((1 + self.grown.len() as u64) << self.log2),
            None => 0,
        }
    }

    /// The client sent a request: it is between operations (every copy it made from the
    /// slots it was given before is over). A retired block is given back when this is so
    /// with no fill into it under way since it stopped being used (`retiring`).
    fn client_between(&mut self) {
        let Some((stay, armed)) = self.retiring else { return };
        if armed && self.c.retiring_busy() == 0 && self.c.shrink() {
            self.retiring = None;
            self.give_back_from(stay);
        }
    }

    /// Stop using every block from `stay` on (the first always stays): their blocks
    /// leave the index now; the frames go back once the client is seen between
    /// operations (`client_between`).
    fn retire_to(&mut self, stay: usize) {
        let stay = stay.clamp(1, 1 + self.grown.len());
        if stay == 1 + self.grown.len() {
            return;
        }
        if let Some(pa) = self.waiting.take() {
            self.free_block(pa);
        }
        if let Some(call) = self.policy.begin(&mut self.gens, 0, false) {
            let to = (stay as u64) << self.log2;
            PolicyVia::call(&mut self.policy, &call, |p| self.c.retire(to as u32, p));
            self.policy.end(&mut self.gens, call);
            // The limit lowered and the tags cleared before any frame goes back.
            self.publish(false);
            self.retiring = Some((stay, self.c.retiring_busy() == 0));
        }
    }

    /// Give the blocks from `stay` on back to sigma0 (revoking every mapping of them).
    fn give_back_from(&mut self, stay: usize) {
        while self.grown.len() >= stay.max(1) {
            let pa = self.grown.pop().unwrap();
            self.free_block(pa);
        }
    }

    fn free_block(&mut self, pa: u64) {
        if s0::client::free(self.sigma0, pa, self.log2).is_err() {
            println!("cache: sigma0 did not take back the block at {:#x}", pa);
        }
        self.given += 1;
    }

    /// Whether this program's kernel quota can pay for mapping one more block.
    fn room(&self) -> bool {
        use abi::kquota::{NODES_PER_PAGE, PAGES_PER_TABLE};
        let pages = self.block_pages();
        let cost = pages.div_ceil(NODES_PER_PAGE) + pages.div_ceil(PAGES_PER_TABLE) + 2 + KQUOTA_SLACK;
        matches!(rt::sys::task_info(abi::cap::SELF_TASK), Ok((_, quota, used)) if quota.saturating_sub(used) >= cost)
    }

    /// Look at sigma0's figures: take another block, give some back, or neither.
    fn resize(&mut self) {
        if self.client.is_none() || self.retiring.is_some() {
            return;
        }
        let Ok([free, total, _, refused, keep]) = s0::client::stats(self.sigma0) else { return };
        let mem = Memory { free, total, keep, refused };
        let blocks = 1 + self.grown.len() as u64 + self.waiting.is_some() as u64;
        match self.sizer.decide(mem, blocks, self.c.stats().evictions) {
            Resize::Stay => {}
            Resize::Shrink(mut n) => {
                if let Some(pa) = self.waiting.take() {
                    self.free_block(pa);
                    n -= 1;
                }
                if n > 0 {
                    self.retire_to(1 + self.grown.len() - (n as usize).min(self.grown.len()));
                }
            }
            Resize::Grow if self.waiting.is_none() && self.room() => {
                let k = 1 + self.grown.len() as u64;
                let at = AREA + (k << (self.log2 + 12));
                let mut r = Msg::new(s0::LEND, &[self.log2, at]);
                if rt::server::request_mapping(
                    self.sigma0,
                    [Fpage::mem(at, 12 + self.log2, abi::mem::RIGHTS_MASK), Fpage(0), Fpage(0)],
                    &mut r,
                )
                .is_ok()
                    && r.items() == 1
                {
                    self.waiting = Some(r.word(2));
                    self.taken += 1;
                }
            }
            Resize::Grow => {}
        }
    }

    /// `MAP`: the client maps the waiting block (its slots are handed out from now on),
    /// or cannot (it goes back, and the cache grows no more).
    fn map(&mut self, take: bool) -> Answer {
        let Some(pa) = self.waiting.take() else { return Answer::err(Error::BadState) };
        if !take {
            self.free_block(pa);
            self.sizer.max_blocks = 1 + self.grown.len() as u64;
            return Answer::ok(&[]);
        }
        let k = 1 + self.grown.len() as u64;
        let first = k << self.log2;
        if !self.c.grow(1 << self.log2) {
            self.free_block(pa);
            return Answer::err(Error::BadState);
        }
        self.grown.push(pa);
        let mut r = server::ok_msg(&[first, 1 << self.log2, pa]);
        r.push_item(Fpage::mem(AREA + (k << (self.log2 + 12)), 12 + self.log2, mem::READ | mem::WRITE), 0);
        Answer::Reply(r)
    }
}

impl CacheServer {
    /// The live update's requests (see the module's head).
    fn update(&mut self, from: Badge, u: swap_api::Update) -> Answer {
        match self.hand.step(from, u, FORMATS) {
            Step::Answer(a) => a,
            Step::Aborted => {
                println!("cache: the update failed; serving on");
                Answer::ok(&[])
            }
            // The frames, granted: what the block service derived from them stays; their
            // physical address lets root make them the new program's at sigma0.
            Step::Commit => {
                let mut r = server::ok_msg(&[self.phys]);
                r.push_item(Fpage::mem(AREA, 12 + self.log2, mem::READ | mem::WRITE), abi::fpage::GRANT);
                Answer::Reply(r)
            }
            Step::State { format } => {
                let why = if !self.grafts.is_empty() {
                    "eviction grafts are loaded (they live in this program): unload them first"
                } else if !self.grown.is_empty() || self.waiting.is_some() {
                    // Only the first block moves with an update: the others go back to
                    // sigma0 first (nothing in them is dirty), then the update may be
                    // asked again.
                    if self.retiring.is_none() {
                        self.retire_to(1);
                    }
                    "the cache holds grown blocks: it is giving them back; ask again"
                } else if let Some(call) = self.policy.begin(&mut self.gens, 0, false) {
                    let order = self.policy.get(&call).0.export(baio::cache::CANONICAL);
                    self.policy.end(&mut self.gens, call);
                    match order.as_ref().and_then(|o| o.bytes()) {
                        Some(order) => {
                            self.state = self.c.encode(order);
                            ""
                        }
                        None => "the policy gave no canonical state",
                    }
                } else {
                    "a swap of the policy is under way"
                };
                if !why.is_empty() {
                    rt::ipc::set_send_string(why.as_bytes());
                    return Answer::Reply(Msg::new(0, &[Error::BadState as u64]).with_string());
                }
                rt::ipc::set_send_string(&self.state);
                let client = self.client.map_or(u64::MAX, u64::from);
                let r =
                    server::ok_msg(&[format as u64, client, self.phys, self.imp as u64, self.auto as u64, self.log2])
                        .with_string();
                self.hand.handed();
                println!(
                    "cache: state handed to program {} ({} blocks resident, {} bytes)",
                    from.program(),
                    self.c.stats().resident,
                    self.state.len()
                );
                Answer::Reply(r)
            }
        }
    }

    /// The successor's half: ask the old server (`PEER`) for its state.
    fn take_state(&mut self) -> Result<(), &'static str> {
        let mut buf = alloc::vec![0u8; abi::ipc::MAX_STRING as usize];
        let Ok((m, n)) = swap_api::client::take_state(FORMATS, &mut buf) else {
            return Err("the old server gave no state (no format both know, grafts loaded, or it refused)");
        };
        let (format, client, phys, imp, auto, log2) =
            (m.word(2), m.word(3), m.word(4), m.word(5), m.word(6), m.word(7));
        if format != 0
            || (client > u32::MAX as u64 && client != u64::MAX)
            || imp > MRU as u64
            || auto > 1
            || !(MIN_LOG2..=LOG2).contains(&log2)
        {
            return Err("the state's words are not this program's");
        }
        let (c, order) = Cache::decode(&buf[..n], 1 << log2, Some(layout(log2)))?;
        let mut p: alloc::boxed::Box<dyn Policy> = if imp == MRU as u64 {
            alloc::boxed::Box::new(Mru::default())
        } else {
            alloc::boxed::Box::new(Lru::default())
        };
        if !p.import(baio::cache::CANONICAL, swap::State::Bytes(order)) {
            return Err("the policy refused the recency order");
        }
        self.c = c;
        self.policy = Slot::new(p);
        self.imp = imp as usize;
        self.pending = self.imp;
        self.auto = auto == 1;
        self.client = (client != u64::MAX).then_some(client as u32);
        // The old server had it from sigma0; this one cannot ask (the frames are taken
        // over, not allocated) and passes it on to a block service that attaches again.
        self.phys = phys;
        self.log2 = log2;
        self.sizer = Sizer::new(1 << log2, self.max_blocks);
        Ok(())
    }
}
