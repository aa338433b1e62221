//! Where the machine's frames are: the accounting behind the shell's `mem` (root's
//! `MEMINFO`). Every frame of RAM is in exactly one row — the kernel's (kept at boot,
//! its heap, its objects, free), sigma0's (its owner table, free), each program's
//! (the pages its memory server gave it, the frames it took from sigma0 itself: DMA
//! buffers, the cache's blocks, lent ones counted apart), each memory server's pool
//! (free, set aside), and frames still held by programs that have ended (a leak) —
//! so the rows sum to the machine, and what they do not cover is shown as
//! `unaccounted` (0 unless a count is wrong somewhere).
//!
//! Root gathers the figures (`KERNEL_INFO_MEMORY`, sigma0's `STATS` and `HOLDERS`, each
//! memory server's `STATS`, its own records) into [`Inputs`]; [`account`] makes the
//! rows; [`Report::render`] the text, whose first line [`Summary::parse`] reads back
//! (for tests that check the sum and that nothing grows).
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

/// The kernel's side (`abi::KERNEL_INFO_MEMORY`), in frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Kernel {
    /// RAM the kernel manages: the machine.
    pub ram: u64,
    /// Kept at boot (first MiB, kernel and boot image, frame tables).
    pub boot: u64,
    /// The kernel heap.
    pub heap: u64,
    /// Given to sigma0 at boot.
    pub sigma0: u64,
    /// Kernel objects outside the heap (page tables, kernel stacks, UTCBs).
    pub objects: u64,
    /// Free in the kernel's allocator.
    pub free: u64,
}

impl Kernel {
    /// From the six words `KERNEL_INFO_MEMORY` answers, in their order.
    pub fn from_words(w: [u64; 6]) -> Kernel {
        Kernel { ram: w[0], boot: w[1], heap: w[2], sigma0: w[3], objects: w[4], free: w[5] }
    }
}

/// Frames one sigma0 client holds (`HOLDERS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    /// Its client number at sigma0 (root 1, a program its id plus 2).
    pub client: u64,
    pub frames: u64,
    /// Of them lent (`LEND`): given back when memory is wanted.
    pub lent: u64,
}

/// A memory server's pool (its `STATS`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pool {
    /// The memory server's client number at sigma0.
    pub client: u64,
    /// Frames taken from sigma0 for the pool.
    pub pool: u64,
    /// Of them free (some set aside).
    pub free: u64,
    /// Of the free ones, set aside for programs (`RESERVE`).
    pub reserved: u64,
    /// Pages all its clients hold.
    pub held: u64,
    /// (badge, pages) of the clients it listed (perhaps not all: `held` counts all).
    pub clients: Vec<(u64, u64)>,
}

/// A program root keeps a record of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prog {
    pub name: String,
    /// Its id (its badge at root and at its memory server).
    pub id: u64,
    /// Its client number at sigma0.
    pub client: u64,
    /// Kernel pages charged to its task (its quota: page tables, stacks, UTCBs,
    /// capability space, mapping nodes by the page) — part of the kernel's rows.
    pub kpages: u64,
    /// Still running (an ended program's record kept for a while holds nothing).
    pub live: bool,
}

/// Everything the accounting reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inputs {
    pub kernel: Kernel,
    /// sigma0's own frames (its owner table).
    pub sigma0_own: u64,
    /// sigma0's free frames.
    pub sigma0_free: u64,
    /// Of them kept for page faults (requests for frames are refused past them).
    pub sigma0_keep: u64,
    pub holders: Vec<Holder>,
    pub pools: Vec<Pool>,
    /// Root itself (sigma0 client 1) is not among them.
    pub progs: Vec<Prog>,
    /// Kernel pages charged to root.
    pub root_kpages: u64,
}

/// One program's line: its frames in each place.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Line {
    pub id: Option<u64>,
    pub name: String,
    /// Pages its memory server gave it.
    pub pages: u64,
    /// Frames it holds from sigma0 itself, not lent (a memory server: its own heap,
    /// code and stack, its pool apart).
    pub sigma0: u64,
    /// Frames lent to it.
    pub lent: u64,
    /// Kernel pages charged to it (in the kernel's rows, not summed here).
    pub kpages: u64,
}

/// The accounting: every row, and what they leave unaccounted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    pub kernel: Kernel,
    pub sigma0_own: u64,
    pub sigma0_free: u64,
    pub sigma0_keep: u64,
    pub lines: Vec<Line>,
    /// Each memory server's pool: (name, frames, free, set aside).
    pub pools: Vec<(String, u64, u64, u64)>,
    /// Pages of pool clients the servers did not list one by one.
    pub unlisted: u64,
    /// Frames held by programs that have ended: (what, frames).
    pub ended: Vec<(String, u64)>,
    pub summary: Summary,
}

/// The totals (the report's first line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    pub machine: u64,
    /// Frames held for something: programs, servers, the kernel's objects and heap,
    /// pages set aside.
    pub used: u64,
    /// Free in the kernel, in sigma0 and in the memory servers' pools (not set aside).
    pub free: u64,
    /// Lent (the cache's blocks: given back when memory is wanted).
    pub lent: u64,
    /// Held by programs that have ended (a leak).
    pub ended: u64,
    /// The machine less every row (negative: the rows count more than there is).
    pub unaccounted: i64,
}

const UNKNOWN: &str = "?";

/// Account for every frame.
pub fn account(i: &Inputs) -> Report {
    let k = i.kernel;
    let mut r = Report {
        kernel: k,
        sigma0_own: i.sigma0_own,
        sigma0_free: i.sigma0_free,
        sigma0_keep: i.sigma0_keep,
        ..Report::default()
    };
    let mut lines: Vec<Line> = Vec::new();
    let root_line = Line { id: None, name: String::from("root"), kpages: i.root_kpages, ..Line::default() };
    lines.push(root_line);
    for p in i.progs.iter().filter(|p| p.live) {
        lines.push(Line { id: Some(p.id), name: p.name.clone(), kpages: p.kpages, ..Line::default() });
    }
    let line_of_client = |lines: &[Line], client: u64| -> Option<usize> {
        if client == 1 {
            return Some(0);
        }
        let p = i.progs.iter().find(|p| p.live && p.client == client)?;
        lines.iter().position(|l| l.id == Some(p.id))
    };
    for h in &i.holders {
        let pool = i.pools.iter().find(|p| p.client == h.client);
        let taken = pool.map_or(0, |p| p.pool);
        match line_of_client(&lines, h.client) {
            Some(l) => {
                // Its pool's frames are counted in the pool's rows (free, set aside, its
                // clients' pages). A pool the server's frames do not cover leaves this
                // at 0 and shows as a negative unaccounted count.
                lines[l].sigma0 = lines[l].sigma0.saturating_add(h.frames.saturating_sub(h.lent).saturating_sub(taken));
                lines[l].lent = lines[l].lent.saturating_add(h.lent);
            }
            None => {
                let name = i.progs.iter().find(|p| p.client == h.client).map_or(UNKNOWN, |p| p.name.as_str());
                r.ended.push((alloc::format!("{} (sigma0 client {})", name, h.client), h.frames));
                // Its pool, if it was a memory server, is in these frames already.
            }
        }
    }
    for p in &i.pools {
        let name = i.progs.iter().find(|q| q.client == p.client).map_or(String::from(UNKNOWN), |q| q.name.clone());
        if line_of_client(&lines, p.client).is_none() {
            // An ended server's frames, its pool's among them, are counted with what
            // ended programs hold: its clients' pages are in them already.
            continue;
        }
        let mut listed = 0;
        for &(badge, pages) in &p.clients {
            listed = pages.saturating_add(listed);
            match i
                .progs
                .iter()
                .find(|q| q.live && q.id == badge)
                .and_then(|q| lines.iter().position(|l| l.id == Some(q.id)))
            {
                Some(l) => lines[l].pages = lines[l].pages.saturating_add(pages),
                None => {
                    let who = i.progs.iter().find(|q| q.id == badge).map_or(UNKNOWN, |q| q.name.as_str());
                    r.ended.push((alloc::format!("{} (id {}, pages at {})", who, badge, name), pages));
                }
            }
        }
        r.unlisted = r.unlisted.saturating_add(p.held.saturating_sub(listed));
        r.pools.push((name, p.pool, p.free, p.reserved));
    }
    r.lines = lines;
    let sum = |it: &mut dyn Iterator<Item = u64>| it.fold(0u64, u64::saturating_add);
    let pools_free = sum(&mut r.pools.iter().map(|p| p.2.saturating_sub(p.3)));
    let pools_aside = sum(&mut r.pools.iter().map(|p| p.3.min(p.2)));
    let lent = sum(&mut r.lines.iter().map(|l| l.lent));
    let ended = sum(&mut r.ended.iter().map(|e| e.1));
    let programs = sum(&mut r.lines.iter().map(|l| l.pages.saturating_add(l.sigma0)));
    let free = sum(&mut [k.free, i.sigma0_free, pools_free].into_iter());
    let used = sum(&mut [k.boot, k.heap, k.objects, i.sigma0_own, programs, r.unlisted, pools_aside].into_iter());
    let rows = used as i128 + free as i128 + lent as i128 + ended as i128;
    r.summary = Summary { machine: k.ram, used, free, lent, ended, unaccounted: clamp_i64(k.ram as i128 - rows) };
    r
}

fn clamp_i64(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

fn mib(frames: u64) -> u64 {
    frames >> 8
}

impl Summary {
    /// The first line of a report.
    pub fn line(&self) -> String {
        alloc::format!(
            "machine {} frames ({} MiB): used {}, free {}, lent {}, ended {}; unaccounted: {}",
            self.machine,
            mib(self.machine),
            self.used,
            self.free,
            self.lent,
            self.ended,
            self.unaccounted
        )
    }

    /// Read the first line of a report back (None: not one).
    pub fn parse(text: &str) -> Option<Summary> {
        let l = text.lines().next()?;
        let rest = l.strip_prefix("machine ")?;
        let (machine, rest) = rest.split_once(" frames (")?;
        let (_, rest) = rest.split_once(" MiB): used ")?;
        let (used, rest) = rest.split_once(", free ")?;
        let (free, rest) = rest.split_once(", lent ")?;
        let (lent, rest) = rest.split_once(", ended ")?;
        let (ended, rest) = rest.split_once("; unaccounted: ")?;
        Some(Summary {
            machine: machine.parse().ok()?,
            used: used.parse().ok()?,
            free: free.parse().ok()?,
            lent: lent.parse().ok()?,
            ended: ended.parse().ok()?,
            unaccounted: rest.trim().parse().ok()?,
        })
    }
}

/// A program's line in a report's text (the table `ID NAME PAGES SIGMA0 LENT KPAGES`):
/// [pages, sigma0, lent, kpages] of the first program of that name.
pub fn row_of(text: &str, name: &str) -> Option<[u64; 4]> {
    let mut rows = text.lines().skip_while(|l| !l.trim_start().starts_with("ID NAME")).skip(1);
    rows.find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() != 6 || w[1] != name {
            return None;
        }
        Some([w[2].parse().ok()?, w[3].parse().ok()?, w[4].parse().ok()?, w[5].parse().ok()?])
    })
}

/// The pages a program's memory server gave it, from a report's text.
pub fn pages_of(text: &str, name: &str) -> Option<u64> {
    row_of(text, name).map(|r| r[0])
}

impl Report {
    /// The text `mem` prints: the summary first (a reader that keeps only the head of
    /// a long report keeps the sums), then the kernel, sigma0, each program, the pools,
    /// and what ended programs hold.
    pub fn render(&self) -> String {
        let k = self.kernel;
        let mut s = self.summary.line();
        s.push('\n');
        let _ = writeln!(
            s,
            "kernel: {} kept at boot, heap {}, objects {} (page tables, stacks, UTCBs), free {}",
            k.boot, k.heap, k.objects, k.free
        );
        let _ = writeln!(
            s,
            "sigma0: {} free ({} of them kept for page faults), {} its own (the owner table)",
            self.sigma0_free, self.sigma0_keep, self.sigma0_own
        );
        let _ = writeln!(s, "  ID NAME          PAGES  SIGMA0    LENT  KPAGES");
        for l in &self.lines {
            let id = l.id.map_or(String::from("-"), |i| alloc::format!("{}", i));
            let _ = writeln!(s, "{:>4} {:12} {:>6} {:>7} {:>7} {:>7}", id, l.name, l.pages, l.sigma0, l.lent, l.kpages);
        }
        for (name, pool, free, aside) in &self.pools {
            let _ = writeln!(s, "{}: pool {} frames, {} free ({} set aside)", name, pool, free, aside);
        }
        if self.unlisted > 0 {
            let _ = writeln!(s, "pages of programs not listed one by one: {}", self.unlisted);
        }
        for (what, n) in &self.ended {
            let _ = writeln!(s, "ended, still held: {} {}", what, n);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    /// Root's numbering: record `idx` has id `idx + 1` (its badge at root and at its
    /// memory server) and sigma0 client `idx + 2`.
    fn prog(name: &str, idx: u64, live: bool) -> Prog {
        Prog { name: name.to_string(), id: idx + 1, client: idx + 2, kpages: 10, live }
    }

    /// A machine of 10,000 frames: kernel 500 boot + 300 heap + 200 objects + 1,000 free
    /// + 8,000 given to sigma0 = 10 own + 4,990 free + 3,000 held.
    fn machine() -> Inputs {
        Inputs {
            kernel: Kernel { ram: 10_000, boot: 500, heap: 300, sigma0: 8_000, objects: 200, free: 1_000 },
            sigma0_own: 10,
            sigma0_free: 4_990,
            sigma0_keep: 200,
            holders: vec![
                Holder { client: 1, frames: 100, lent: 0 },       // root
                Holder { client: 2, frames: 1_600, lent: 0 },     // mem0: 100 own + 1,500 pool
                Holder { client: 4, frames: 1_300, lent: 1_000 }, // cache: 300 + 1,000 lent
            ],
            pools: vec![Pool {
                client: 2,
                pool: 1_500,
                free: 700,
                reserved: 50,
                held: 800,
                clients: vec![(2, 300), (3, 500)],
            }],
            progs: vec![prog("mem0", 0, true), prog("sh", 1, true), prog("cache", 2, true)],
            root_kpages: 40,
        }
    }

    #[test]
    fn every_frame_in_one_row() {
        let r = account(&machine());
        assert_eq!(r.summary.unaccounted, 0, "{}", r.render());
        assert_eq!(r.summary.machine, 10_000);
        assert_eq!(r.summary.lent, 1_000);
        assert_eq!(r.summary.ended, 0);
        assert_eq!(r.summary.free, 1_000 + 4_990 + 650);
        assert_eq!(r.summary.used + r.summary.free + r.summary.lent + r.summary.ended, 10_000);
        let cache = r.lines.iter().find(|l| l.name == "cache").unwrap();
        assert_eq!((cache.pages, cache.sigma0, cache.lent), (500, 300, 1_000));
        let mem0 = r.lines.iter().find(|l| l.name == "mem0").unwrap();
        assert_eq!(mem0.sigma0, 100, "a memory server's own frames, its pool apart");
    }

    #[test]
    fn an_ended_programs_frames_show() {
        let mut m = machine();
        m.progs[2].live = false;
        let r = account(&m);
        assert_eq!(r.summary.unaccounted, 0, "{}", r.render());
        assert_eq!(r.summary.ended, 1_300 + 500, "its sigma0 frames and its pool pages");
        assert_eq!(r.summary.lent, 0);
        assert!(r.render().contains("ended, still held: cache"));
    }

    #[test]
    fn an_ended_memory_server_is_counted_once() {
        let mut m = machine();
        m.progs[0].live = false;
        let r = account(&m);
        assert_eq!(r.summary.unaccounted, 0, "{}", r.render());
        assert_eq!(r.summary.ended, 1_600, "its frames, its pool's pages among them");
        assert!(r.pools.is_empty());
        assert_eq!(pages_of(&r.render(), "sh"), Some(0));
    }

    #[test]
    fn a_frame_nobody_counts_is_unaccounted() {
        let mut m = machine();
        m.kernel.ram += 7;
        assert_eq!(account(&m).summary.unaccounted, 7);
        let mut m = machine();
        m.pools[0].free -= 3; // three pages neither free nor any client's
        assert_eq!(account(&m).summary.unaccounted, 3);
        let mut m = machine();
        m.holders[0].frames += 2; // counted twice somewhere
        assert_eq!(account(&m).summary.unaccounted, -2);
        let mut m = machine();
        m.pools[0].pool = 1_700; // a pool larger than its server holds
        m.pools[0].free = 900;
        let r = account(&m);
        assert_eq!(r.summary.unaccounted, -100, "{}", r.render());
    }

    #[test]
    fn clients_not_listed_are_counted() {
        let mut m = machine();
        m.pools[0].clients.truncate(1);
        let r = account(&m);
        assert_eq!(r.unlisted, 500);
        assert_eq!(r.summary.unaccounted, 0);
    }

    #[test]
    fn the_summary_reads_back() {
        let r = account(&machine());
        let text = r.render();
        assert_eq!(Summary::parse(&text), Some(r.summary));
        assert_eq!(pages_of(&text, "cache"), Some(500));
        assert_eq!(pages_of(&text, "sh"), Some(300));
        assert_eq!(pages_of(&text, "mem0"), Some(0));
        assert_eq!(pages_of(&text, "nobody"), None);
        assert_eq!(row_of(&text, "cache"), Some([500, 300, 1_000, 10]));
        assert_eq!(row_of(&text, "root"), Some([0, 100, 0, 40]));
        assert!(text.contains("mem0: pool 1500 frames, 700 free (50 set aside)"), "{text}");
        assert!(text.contains("sigma0: 4990 free (200 of them kept for page faults),"), "{text}");
        let mut m = machine();
        m.kernel.ram -= 9;
        let r = account(&m);
        assert_eq!(Summary::parse(&r.render()).map(|s| s.unaccounted), Some(-9));
        assert_eq!(Summary::parse("sigma0: 3 of 4"), None);
        assert_eq!(Summary::parse(""), None);
        assert_eq!(Summary::parse("machine x frames (1 MiB): used 1, free 1, lent 0, ended 0; unaccounted: 0"), None);
    }

    #[test]
    fn huge_counts_do_not_overflow() {
        let mut m = machine();
        m.kernel.ram = u64::MAX;
        m.holders.push(Holder { client: 99, frames: u64::MAX, lent: u64::MAX });
        m.pools[0].pool = u64::MAX;
        let r = account(&m);
        let _ = r.render();
    }
}
