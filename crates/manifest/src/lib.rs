//! Root's manifest, a small TOML subset packed into the boot image as `manifest`:
//!
//! ```toml
//! # The user-level console driver.
//! [[program]]
//! name = "console"          # how others find it (and its file, unless `file` says)
//! priority = 150
//! pages = 512               # user memory limit (its memory server enforces it)
//! resident = 128            # resident limit: past it, clean pages are taken back
//! pager = "mem0"            # which memory server pages it
//! io = ["0x3f8-0x3ff"]      # I/O port ranges it may have
//! irq = [4]                 # interrupt lines it may attach to
//! pci = ["01:08:02"]        # PCI classes it may hold a device capability for (NVMe)
//! caps = ["sigma0"]         # servers it may look up by name
//! restart = true            # root restarts it when it dies (`restart`: back-off, budget)
//! retry_after = 300         # seconds a program left down waits before it is tried again
//! clients = true            # root tells it (`GONE`) when a program that looked it up ends
//! ```
//!
//! Other keys: `principal` (who it runs as, for ownership of disk segments), `cpu`
//! (the CPU its first thread runs on, default 0; a driver's interrupt line follows it),
//! `file`, `args`, `kpages`, `start` (start at boot; default true), `test` (root
//! reports `TEST name PASS|FAIL` when it exits). Programs get nothing the manifest does
//! not give them. Errors name the line. An entry named after a memory server root starts
//! itself (`mem0`, `mem1`; `file = "mem"`, `start = false`) only gives that server its
//! `args` (`graft_heap=KIB`): root starts no program for it, and none may SPAWN it.
//!
//! **Memory.** `pages` (default `DEFAULT_PAGES`, 8192: 32 MiB) is the most user memory
//! the program's memory server gives it; past it the server refuses (`NoMemory` to a
//! reservation or a heap that would grow, `mem_api::RESERVE`). `kpages` is its kernel
//! memory: page tables, threads, capabilities and one mapping-database node per page
//! mapped into it. Unless the entry gives it, it is derived from `pages` by
//! [`kpages_for`] — enough for the page tables and nodes of every page the limit allows,
//! plus `KPAGES_BASE` for the task, a few threads and the pages others map in (shared
//! areas) — so a program inside its page limit never runs out of kernel memory first
//! (default: `kpages_for(8192)` = 179). An entry that gives `kpages` gets what it says.
//! `lent = true` marks a server that maps frames lent from all of RAM (the shared cache
//! and blk, which maps the cache's blocks for DMA): root adds to its `kpages` what
//! mapping the machine's frames costs, from its own spare quota ([`lent_kpages`]), so
//! the cache's reach grows with the RAM instead of a constant in a manifest.
//!
//! **Spawning.** `spawns` (default `DEFAULT_SPAWNS`, 8) is the most programs the
//! program may have running that it started with SPAWN, with those they started, and so
//! on (all count against each program above them); each has at most the spawner's
//! `pages` and `kpages`. Root answers `NoMemory` past either.
#![forbid(unsafe_code)]
#![no_std]

extern crate alloc;

pub mod restart;

use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// Seconds a program marked `restart` that was left down (its restart budget spent)
/// waits before root tries it again, unless its entry says (`retry_after`).
pub const DEFAULT_RETRY_AFTER_S: u64 = 300;
/// The longest `retry_after` an entry may give (a day).
pub const MAX_RETRY_AFTER_S: u64 = 86_400;

/// A program's page limit unless its entry says (32 MiB).
pub const DEFAULT_PAGES: u64 = 8192;
/// The most programs a program may have running that it (or they) started with SPAWN,
/// unless its entry says.
pub const DEFAULT_SPAWNS: u64 = 8;
/// Kernel pages every program gets beyond those of its page limit: its task (top page
/// table, capability space: 11), four threads (20), the upper page tables of ten separate
/// regions of its address space (30), an I/O bitmap (2) — and room, in what is left,
/// for mapping nodes of pages others map in.
pub const KPAGES_BASE: u64 = 64;

/// The kernel quota (pages) that covers `pages` pages of user memory: one mapping node
/// each (`abi::kquota::NODES_PER_PAGE` to a quota page), the page tables that map them
/// (one per 512 pages, and the levels above), and `KPAGES_BASE`. The one derivation:
/// root uses it for a manifest entry without `kpages` and for the memory servers (whose
/// pages are all of sigma0's frames and the boot image).
pub fn kpages_for(pages: u64) -> u64 {
    use abi::kquota::{NODES_PER_PAGE, PAGES_PER_TABLE as T};
    let nodes = pages.div_ceil(NODES_PER_PAGE);
    let tables = pages.div_ceil(T) + pages.div_ceil(T * T) + pages.div_ceil(T * T * T);
    KPAGES_BASE.saturating_add(nodes).saturating_add(tables)
}

/// The kernel pages root adds to each of `lent` entries (`lent = true`) on a machine of
/// `frames` frames, when `spare` of its own quota is left after the quota of every
/// program its manifest names: the mapping nodes and page tables of every frame once
/// (`kpages_for(frames)` less its base), but at most half the spare shared among them —
/// the other half stays for what programs SPAWN later. On a small machine that can be
/// nothing: the cache then grows only as far as its manifest's `kpages` pays.
pub fn lent_kpages(frames: u64, spare: u64, lent: u64) -> u64 {
    if lent == 0 {
        return 0;
    }
    (kpages_for(frames) - KPAGES_BASE).min(spare / 2 / lent)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub name: String,
    pub file: String,
    pub args: String,
    pub priority: u8,
    pub pages: u64,
    /// Resident pages past which its memory server takes clean pages back (0: none).
    pub resident: u64,
    /// Kernel memory (page tables, threads, capabilities, mapping nodes) it may use, in
    /// pages: as the entry says, else `kpages_for(pages)`.
    pub kpages: u64,
    pub pager: String,
    /// Inclusive port ranges.
    pub io: Vec<(u16, u16)>,
    pub irq: Vec<u8>,
    /// PCI classes (class << 16 | subclass << 8 | interface) of the functions it may
    /// have a device capability for (`pci = ["01:08:02"]`: NVMe).
    pub pci: Vec<u32>,
    pub caps: Vec<String>,
    pub restart: bool,
    /// Seconds it waits, left down after its restart budget, before root tries it again
    /// (`restart::Policy::retry_us`).
    pub retry_after: u64,
    /// It keeps state for its clients: root tells it when one of them ends.
    pub clients: bool,
    pub start: bool,
    pub test: bool,
    /// The principal the program runs as (owners of disk segments); 0 = none.
    pub principal: u32,
    /// The CPU its first thread runs on (root moves it there before it starts).
    pub cpu: u8,
    /// The most programs it may have running that it started with SPAWN (with theirs).
    pub spawns: u64,
    /// It maps frames lent from all of RAM (the shared cache's blocks, which blk maps
    /// too): root adds to its `kpages` what mapping the machine's frames costs
    /// ([`lent_kpages`]).
    pub lent: bool,
}

impl Program {
    pub fn new(name: &str) -> Program {
        Program {
            name: name.to_string(),
            file: name.to_string(),
            args: String::new(),
            priority: 100,
            pages: DEFAULT_PAGES,
            resident: 0,
            kpages: kpages_for(DEFAULT_PAGES),
            pager: "mem0".to_string(),
            io: Vec::new(),
            irq: Vec::new(),
            pci: Vec::new(),
            caps: Vec::new(),
            restart: false,
            retry_after: DEFAULT_RETRY_AFTER_S,
            clients: false,
            start: true,
            test: false,
            principal: 0,
            cpu: 0,
            spawns: DEFAULT_SPAWNS,
            lent: false,
        }
    }

    /// The command line the program starts with.
    pub fn cmdline(&self) -> String {
        if self.args.is_empty() {
            self.file.clone()
        } else {
            alloc::format!("{} {}", self.file, self.args)
        }
    }

    pub fn allows_port(&self, port: u16) -> bool {
        self.io.iter().any(|(a, b)| (*a..=*b).contains(&port))
    }

    /// Whether everything this entry grants, `other` has too: its ports, interrupt
    /// lines and servers, its principal (or none), a priority no higher. Root gives a
    /// program control of a task it spawned only when the new program's entry is
    /// within the spawner's; control of a task is all of its authority.
    pub fn within(&self, other: &Program) -> bool {
        self.io.iter().all(|&(a, b)| (a..=b).all(|p| other.allows_port(p)))
            && self.irq.iter().all(|l| other.irq.contains(l))
            && self.pci.iter().all(|c| other.pci.contains(c))
            && self.caps.iter().all(|c| other.caps.contains(c))
            && (self.principal == 0 || self.principal == other.principal)
            && self.priority <= other.priority
    }
}

/// A PCI class "CC:SS:II" (hex class, subclass, interface) as class << 16 | subclass
/// << 8 | interface.
pub fn pci_class(s: &str) -> Option<u32> {
    let mut parts = s.split(':');
    let mut v = 0u32;
    for _ in 0..3 {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        v = v << 8 | u8::from_str_radix(p, 16).ok()? as u32;
    }
    parts.next().is_none().then_some(v)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub line: usize,
    pub msg: String,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "manifest line {}: {}", self.line, self.msg)
    }
}

#[derive(Debug, PartialEq)]
enum Value {
    Str(String),
    Int(u64),
    Bool(bool),
    List(Vec<Value>),
}

fn int(s: &str) -> Option<u64> {
    let s = s.trim().replace('_', "");
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn value(s: &str) -> Result<Value, String> {
    let s = s.trim();
    if let Some(inner) = s.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or("a list must end with ]")?;
        let mut items = Vec::new();
        for part in split_list(inner) {
            let part = part.trim();
            if !part.is_empty() {
                items.push(value(part)?);
            }
        }
        return Ok(Value::List(items));
    }
    if let Some(inner) = s.strip_prefix('"') {
        let inner = inner.strip_suffix('"').ok_or("a string must end with \"")?;
        if inner.contains('"') {
            return Err("quotes inside strings are not supported".into());
        }
        return Ok(Value::Str(inner.to_string()));
    }
    match s {
        "true" => return Ok(Value::Bool(true)),
        "false" => return Ok(Value::Bool(false)),
        _ => {}
    }
    int(s).map(Value::Int).ok_or_else(|| alloc::format!("cannot read the value `{}`", s))
}

/// Split on commas outside quotes.
fn split_list(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, ch) in s.char_indices() {
        match ch {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    for (i, ch) in line.char_indices() {
        match ch {
            '"' => quoted = !quoted,
            '#' if !quoted => return &line[..i],
            _ => {}
        }
    }
    line
}

fn port_range(v: &Value) -> Result<(u16, u16), String> {
    let Value::Str(s) = v else { return Err("an I/O range is a string like \"0x3f8-0x3ff\"".into()) };
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let (a, b) = (int(a).ok_or("bad port")?, int(b).ok_or("bad port")?);
    if a > b || b > 0xffff {
        return Err(alloc::format!("bad port range {}", s));
    }
    Ok((a as u16, b as u16))
}

pub fn parse(text: &str) -> Result<Vec<Program>, Error> {
    let mut out: Vec<Program> = Vec::new();
    // Whether each entry gave `kpages` (else it is derived from its `pages` at the end).
    let mut kpages_given: Vec<bool> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        let err = |msg: String| Error { line, msg };
        let l = strip_comment(raw).trim();
        if l.is_empty() {
            continue;
        }
        if l == "[[program]]" {
            out.push(Program::new(""));
            kpages_given.push(false);
            continue;
        }
        if l.starts_with('[') {
            return Err(err(alloc::format!("unknown table `{}` (only [[program]])", l)));
        }
        let (key, val) = l.split_once('=').ok_or_else(|| err("expected `key = value`".into()))?;
        let key = key.trim();
        let v = value(val).map_err(err)?;
        let p = out.last_mut().ok_or_else(|| err("a key before the first [[program]]".into()))?;
        let wrong = |what: &str| err(alloc::format!("`{}` must be {}", key, what));
        match (key, v) {
            ("name", Value::Str(s)) => {
                if p.file.is_empty() || p.file == p.name {
                    p.file = s.clone();
                }
                p.name = s;
            }
            ("file", Value::Str(s)) => p.file = s,
            ("args", Value::Str(s)) => p.args = s,
            ("pager", Value::Str(s)) => p.pager = s,
            ("priority", Value::Int(i)) if i <= 255 => p.priority = i as u8,
            ("priority", _) => return Err(wrong("a number up to 255")),
            ("pages", Value::Int(i)) => p.pages = i,
            ("kpages", Value::Int(i)) => {
                p.kpages = i;
                if let Some(g) = kpages_given.last_mut() {
                    *g = true;
                }
            }
            ("resident", Value::Int(i)) => p.resident = i,
            ("spawns", Value::Int(i)) => p.spawns = i,
            ("retry_after", Value::Int(i)) if (1..=MAX_RETRY_AFTER_S).contains(&i) => p.retry_after = i,
            ("retry_after", _) => {
                return Err(wrong(&alloc::format!("a number of seconds from 1 to {}", MAX_RETRY_AFTER_S)))
            }
            ("principal", Value::Int(i)) if i <= u32::MAX as u64 => p.principal = i as u32,
            ("principal", _) => return Err(wrong("a 32-bit number")),
            ("cpu", Value::Int(i)) if i < 8 => p.cpu = i as u8,
            ("cpu", _) => return Err(wrong("a CPU number below 8")),
            ("restart", Value::Bool(b)) => p.restart = b,
            ("clients", Value::Bool(b)) => p.clients = b,
            ("start", Value::Bool(b)) => p.start = b,
            ("test", Value::Bool(b)) => p.test = b,
            ("lent", Value::Bool(b)) => p.lent = b,
            ("io", Value::List(items)) => {
                for it in &items {
                    p.io.push(port_range(it).map_err(err)?);
                }
            }
            ("irq", Value::List(items)) => {
                for it in items {
                    match it {
                        Value::Int(i) if i < 24 => p.irq.push(i as u8),
                        _ => return Err(wrong("a list of interrupt lines below 24")),
                    }
                }
            }
            ("pci", Value::List(items)) => {
                for it in items {
                    match it {
                        Value::Str(s) => {
                            p.pci.push(pci_class(&s).ok_or_else(|| wrong("a list of PCI classes \"CC:SS:II\""))?)
                        }
                        _ => return Err(wrong("a list of PCI classes \"CC:SS:II\"")),
                    }
                }
            }
            ("caps", Value::List(items)) => {
                for it in items {
                    match it {
                        Value::Str(s) => p.caps.push(s),
                        _ => return Err(wrong("a list of names")),
                    }
                }
            }
            ("name" | "file" | "args" | "pager", _) => return Err(wrong("a string")),
            ("pages" | "kpages" | "resident" | "spawns", _) => return Err(wrong("a number")),
            ("restart" | "clients" | "start" | "test" | "lent", _) => return Err(wrong("true or false")),
            ("io" | "irq" | "pci" | "caps", _) => return Err(wrong("a list")),
            _ => return Err(err(alloc::format!("unknown key `{}`", key))),
        }
    }
    for (p, given) in out.iter_mut().zip(kpages_given) {
        if !given {
            p.kpages = kpages_for(p.pages);
        }
    }
    for (i, p) in out.iter().enumerate() {
        if p.name.is_empty() {
            return Err(Error { line: 0, msg: alloc::format!("program {} has no name", i + 1) });
        }
        if out[..i].iter().any(|q| q.name == p.name) {
            return Err(Error { line: 0, msg: alloc::format!("two programs are named `{}`", p.name) });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
# comment
[[program]]
name = "console"
priority = 150
pages = 0x200
resident = 64
io = ["0x3f8-0x3ff", "0x80"]
irq = [4]
caps = ["sigma0"]   # trailing comment
restart = true
clients = true

[[program]]
name = "sh"
args = "-v # not a comment"
caps = ["console", "echo"]
start = false
"#;

    #[test]
    fn within_compares_every_grant() {
        let mut sh = Program::new("sh");
        sh.caps = ["console".to_string(), "files".to_string()].into();
        sh.io = [(0x3f8, 0x3ff)].into();
        sh.principal = 1;
        let mut hello = Program::new("hello");
        hello.caps = ["console".to_string()].into();
        assert!(hello.within(&sh), "fewer servers");
        assert!(Program::new("x").within(&sh), "nothing at all");
        assert!(!sh.within(&hello));
        let mut p = hello.clone();
        p.io = [(0x3f8, 0x3ff)].into();
        assert!(p.within(&sh), "the same ports");
        p.io = [(0x3f8, 0x400)].into();
        assert!(!p.within(&sh), "one port more");
        let mut p = hello.clone();
        p.irq = [4].into();
        assert!(!p.within(&sh), "an interrupt line");
        let mut p = hello.clone();
        p.caps.push("sigma0".to_string());
        assert!(!p.within(&sh), "a server more");
        let mut p = hello.clone();
        p.principal = 1;
        assert!(p.within(&sh), "the same principal");
        p.principal = 2;
        assert!(!p.within(&sh), "another principal");
        let mut p = hello.clone();
        p.priority = sh.priority + 1;
        assert!(!p.within(&sh), "a higher priority");
    }

    #[test]
    fn sample() {
        let m = parse(SAMPLE).unwrap();
        assert_eq!(m.len(), 2);
        let c = &m[0];
        assert_eq!(
            (c.name.as_str(), c.file.as_str(), c.priority, c.pages, c.resident),
            ("console", "console", 150, 512, 64)
        );
        assert_eq!(m[1].resident, 0, "no resident limit unless given");
        assert_eq!(m[1].spawns, DEFAULT_SPAWNS);
        assert_eq!(m[1].retry_after, DEFAULT_RETRY_AFTER_S);
        assert_eq!(parse("[[program]]\nname = \"d\"\nretry_after = 20").unwrap()[0].retry_after, 20);
        for bad in ["0", "86401", "\"5\"", "true"] {
            let e = parse(&alloc::format!("[[program]]\nname = \"d\"\nretry_after = {bad}")).unwrap_err();
            assert!(e.line == 3 && e.msg.contains("seconds"), "{bad}: {e}");
        }
        assert_eq!(parse("[[program]]\nname = \"d\"\nspawns = 0").unwrap()[0].spawns, 0);
        assert!(parse("[[program]]\nname = \"d\"\nspawns = \"x\"").is_err());
        assert_eq!(c.io, [(0x3f8, 0x3ff), (0x80, 0x80)]);
        assert!(c.allows_port(0x3fd) && !c.allows_port(0x400));
        assert_eq!(c.irq, [4]);
        assert!(c.restart && c.clients && c.start && !c.test);
        let s = &m[1];
        assert!(!s.clients);
        assert_eq!(s.args, "-v # not a comment");
        assert_eq!(s.cmdline(), "sh -v # not a comment");
        assert_eq!(s.caps, ["console", "echo"]);
        assert!(!s.start);
        assert_eq!(s.pager, "mem0");
        assert_eq!((c.cpu, s.cpu), (0, 0), "the boot CPU unless given");
        assert_eq!(parse("[[program]]\nname = \"d\"\ncpu = 1").unwrap()[0].cpu, 1);
    }

    #[test]
    fn kernel_quota_covers_the_page_limit() {
        use abi::kquota::{NODES_PER_PAGE, PAGES_PER_TABLE};
        // The default entry: its quota pays for a node and a page-table share of every
        // page its limit allows (before, 128 pages ran out at about 7,300 mapped pages
        // of a 16,384-page limit).
        let p = Program::new("x");
        assert_eq!(p.kpages, kpages_for(p.pages));
        assert!(
            (p.kpages - KPAGES_BASE) * NODES_PER_PAGE >= p.pages + p.pages.div_ceil(PAGES_PER_TABLE) * NODES_PER_PAGE,
            "nodes and tables of {} pages in {} kpages",
            p.pages,
            p.kpages
        );
        for pages in [0, 1, 85, 86, 512, 513, 8192, 98_816, 1 << 20, 1 << 30] {
            let k = kpages_for(pages);
            assert!(
                k - KPAGES_BASE >= pages.div_ceil(NODES_PER_PAGE) + pages.div_ceil(PAGES_PER_TABLE),
                "{} pages: {} kpages",
                pages,
                k
            );
        }
        assert!(kpages_for(u64::MAX) > u64::MAX / NODES_PER_PAGE, "no overflow");
        // An entry's `pages` without `kpages` derives it; given, it is what it says.
        let m = parse("[[program]]\nname = \"a\"\npages = 100000\n[[program]]\nname = \"b\"\npages = 100000\nkpages = 50\n[[program]]\nname = \"c\"\nkpages = 7\npages = 4").unwrap();
        assert_eq!(m[0].kpages, kpages_for(100_000));
        assert!(m[0].kpages > 1000);
        assert_eq!((m[1].kpages, m[2].kpages), (50, 7), "kpages as given, in either order");
        assert_eq!(parse("[[program]]\nname = \"d\"").unwrap()[0].kpages, kpages_for(DEFAULT_PAGES));
    }

    #[test]
    fn lent_servers_get_the_quota_of_the_machines_frames_within_half_the_spare() {
        use abi::kquota::{NODES_PER_PAGE, PAGES_PER_TABLE};
        let m = parse("[[program]]\nname = \"cache\"\nlent = true\n[[program]]\nname = \"x\"").unwrap();
        assert!(m[0].lent && !m[1].lent);
        assert!(parse("[[program]]\nname = \"c\"\nlent = 1").is_err(), "lent is true or false");
        // 2 GiB: every frame's node and page tables, when root can spare them.
        let frames = 524_288;
        let k = lent_kpages(frames, 1 << 20, 2);
        assert!(
            k * NODES_PER_PAGE >= frames + frames.div_ceil(PAGES_PER_TABLE) * NODES_PER_PAGE,
            "{k} kpages for {frames} frames"
        );
        assert_eq!(k, kpages_for(frames) - KPAGES_BASE);
        // Half of what root can spare, shared: the rest stays for SPAWN.
        assert_eq!(lent_kpages(frames, 4000, 2), 1000);
        assert_eq!(lent_kpages(frames, 0, 2), 0, "a small machine: nothing to add");
        assert_eq!(lent_kpages(frames, 4000, 0), 0);
        assert_eq!(lent_kpages(u64::MAX, u64::MAX, 1), kpages_for(u64::MAX) - KPAGES_BASE, "no overflow");
    }

    #[test]
    fn pci_classes() {
        let ps = parse("[[program]]\nname = \"blk\"\npci = [\"01:08:02\", \"02:00:00\"]").unwrap();
        assert_eq!(ps[0].pci, [0x010802, 0x020000]);
        assert_eq!(pci_class("01:08"), None);
        assert_eq!(pci_class("01:08:02:00"), None);
        assert_eq!(pci_class("1:08:02"), None);
        assert_eq!(pci_class("zz:08:02"), None);
        assert_eq!(parse("[[program]]\nname = \"a\"\npci = [\"nvme\"]").unwrap_err().line, 3);
        assert_eq!(parse("[[program]]\nname = \"a\"\npci = [1]").unwrap_err().line, 3);
        // A spawned program's PCI classes must be within its spawner's.
        let mut a = Program::new("a");
        let mut b = Program::new("b");
        a.pci = [0x010802].into();
        assert!(!a.within(&b));
        b.pci = [0x010802, 0x020000].into();
        assert!(a.within(&b));
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(parse("name = \"x\"").unwrap_err().line, 1);
        assert_eq!(parse("[[program]]\nname = \"a\"\nbogus = 1").unwrap_err().line, 3);
        assert_eq!(parse("[[program]]\nname = \"a\"\npriority = 300").unwrap_err().line, 3);
        assert_eq!(parse("[[program]]\nname = \"a\"\nio = [\"0x400-0x300\"]").unwrap_err().line, 3);
        assert_eq!(parse("[[program]]\nname = \"a\"\nirq = [30]").unwrap_err().line, 3);
        assert_eq!(parse("[[program]]\nname = \"a\"\ncpu = 8").unwrap_err().line, 3);
        assert_eq!(parse("[[program]]\nname = \"a\"\ncaps = [\"x\"").unwrap_err().line, 3);
        assert_eq!(parse("[[server]]").unwrap_err().line, 1);
        assert!(parse("[[program]]\nname = \"a\"\n[[program]]\nname = \"a\"")
            .unwrap_err()
            .msg
            .contains("two programs"));
        assert!(parse("[[program]]\npriority = 3").unwrap_err().msg.contains("no name"));
    }

    #[test]
    fn never_panics_on_garbage() {
        let mut s = 1u64;
        let alphabet = b"[]=\"#,-x0a1 \nprogram";
        for _ in 0..5000 {
            let mut t = alloc::vec::Vec::new();
            for _ in 0..40 {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                t.push(alphabet[(s % alphabet.len() as u64) as usize]);
            }
            let _ = parse(core::str::from_utf8(&t).unwrap());
        }
    }
}
