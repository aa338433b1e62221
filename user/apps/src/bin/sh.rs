//! The shell on the user-level console: a line editor (`lineedit`: editing anywhere in
//! the line, history, Tab completion of commands and paths, UTF-8), and commands that
//! ask root and the servers: help, ps, mem, kill, run, lspci, segs, ls, cat, put, rm,
//! net, ping, fetch, cue, graft, swap, interpose, update, echo, sleep, halt. Commands
//! are taken in any case; each says in words what was wrong and what to type. Ctrl-C
//! ends what a command waits for (`sleep`, `fetch`, `run`, `lspci`; `ping` waits 2 s
//! at most).
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use lineedit::{Editor, Event};
use net_api::client::Net;
use net_api::{Ip, Mac};
use rt::{console, env, print, println};

rt::entry!(main);

/// Each command: its name, what to type, what it does (`help`; `help NAME` shows the
/// entries of one name).
const COMMANDS: &[(&str, &str, &str)] = &[
    ("help", "help [CMD]", "the commands, or how to use CMD"),
    ("ps", "ps", "programs: id, state, priority, threads, pager, kernel pages, restarts,\nswitches (voluntary: blocked; involuntary: preempted)"),
    ("mem", "mem", "memory of sigma0 and of each memory server, per program"),
    ("kill", "kill ID|NAME", "end a program (by id, or the first of that name; see `ps`)"),
    ("run", "run NAME [ARGS] [&]", "start a program from the boot image (resources as the manifest says)\nand wait until it ends (Ctrl-C: stop waiting; with `&`: do not wait)"),
    ("lspci", "lspci", "list PCI devices"),
    ("segs", "segs", "the BAIO disk segments this shell may open (name, blocks, owner)"),
    ("ls", "ls [DIR]", "files in DIR (kind, size, name) on the `files` server"),
    ("cat", "cat FILE", "print FILE"),
    ("put", "put FILE TEXT", "write TEXT (and a newline) into FILE, made if missing"),
    ("rm", "rm PATH", "remove a file or an empty directory"),
    ("net", "net", "the network: address, gateway, packets and bytes, sockets open"),
    ("ping", "ping [ADDR]", "an ICMP echo to ADDR (default: the gateway, or 10.0.2.2)"),
    ("fetch", "fetch URL", "HTTP GET http://A.B.C.D[:PORT]/PATH: the answer's head, then the body"),
    ("cue", "cue", "Cue transfers net runs: program, socket, bytes sent, schedule, rate"),
    (
        "graft",
        "graft load PLACE FILE",
        "load the graft file FILE (from `files`, e.g. /grafts/…) at PLACE for this\nshell's principal (evict: the cache's eviction victim; reclaim: which of this\nshell's pages its memory server takes back; stream: blk's reads flagged STREAM;\ncue: Cue's bytes in net; ldisk: a segment as a logical disk)",
    ),
    ("graft", "graft list", "the grafts this principal loaded: calls, aborts, cycles"),
    ("graft", "graft replace ID FILE", "hot-swap graft ID for the graft in FILE (any technology, the same point),\nits state carried over"),
    ("graft", "graft unload ID", "unload graft ID"),
    ("graft", "graft state ID W…", "write words W… (decimal) into graft ID's state from its start\n(a hot list: the count, then device block numbers)"),
    ("graft", "graft stats ID", "one graft's calls, aborts, cycles and last abort"),
    ("swap", "swap list", "the swappable components of each server: implementation, swaps,\ninterposer (K42's object translation table)"),
    ("swap", "swap S.C IMPL", "hot-swap component C of server S (e.g. `swap cache.policy mru`;\n`auto`: the server chooses) while it runs"),
    ("interpose", "interpose S.C KIND", "wrap every call to S.C in an interposer: counter, trace, timer,\nor none (detach); `swap list` shows what it saw"),
    (
        "update",
        "update S PROG [ARGS]",
        "replace the running server S (files, cache) by program PROG from the boot\nimage, or from the files filesystem when PROG is a path (/…), while its\nclients keep calling (its state and its clients' capabilities move over)",
    ),
    ("echo", "echo TEXT", "print TEXT"),
    ("sleep", "sleep MS", "wait MS milliseconds (Ctrl-C ends it)"),
    ("halt", "halt", "power off"),
];

/// The usage lines of command `name` (`usage: …`, one per form).
fn usage(name: &str) {
    let mut first = true;
    for (n, u, _) in COMMANDS {
        if *n == name {
            println!("{}{}", if first { "usage: " } else { "       " }, u);
            first = false;
        }
    }
}

/// `help` (every command) or `help CMD` (its forms and what each does).
fn help(arg: &str) {
    let arg = arg.to_ascii_lowercase();
    if arg.is_empty() {
        println!("commands (any case; Tab completes a command or a path, ↑/↓ recall lines,\nCtrl-C ends a wait; `help CMD` for one):");
    } else if !COMMANDS.iter().any(|c| c.0 == arg) {
        println!("help: no command `{}` (`help` lists them)", arg);
        return;
    }
    for (n, u, what) in COMMANDS {
        if !arg.is_empty() && *n != arg {
            continue;
        }
        // The form in a column of its own (a line of its own when longer), what it does
        // beside it, wrapped to 80 columns.
        let mut out = String::new();
        let mut col = 0;
        if u.chars().count() + 2 > USAGE_COLUMN {
            println!("  {}", u);
        } else {
            out.push_str(u);
            col = u.chars().count();
        }
        for w in what.split_whitespace() {
            let wl = w.chars().count();
            if col > USAGE_COLUMN && col + 1 + wl > 78 {
                println!("  {}", out);
                out.clear();
                col = 0;
            }
            while col < USAGE_COLUMN {
                out.push(' ');
                col += 1;
            }
            if col > USAGE_COLUMN {
                out.push(' ');
                col += 1;
            }
            out.push_str(w);
            col += wl;
        }
        println!("  {}", out);
    }
}

/// Where `help` starts what a command does.
const USAGE_COLUMN: usize = 24;

/// Typed bytes not consumed yet (a read may bring more than one line, or bring them
/// while a command runs).
struct Input {
    pending: VecDeque<u8>,
}

/// At most this many typed bytes wait here to be taken; more typed ahead wait at the
/// console (which throttles the line when it holds 4 KiB): nothing typed is dropped.
const MAX_PENDING: usize = 16 * 1024;

impl Input {
    fn next(&mut self) -> Option<u8> {
        if self.pending.is_empty() {
            let mut b = [0u8; 64];
            let n = console::read(&mut b).ok()?;
            self.pending.extend(&b[..n]);
        }
        self.pending.pop_front()
    }

    /// Whether Ctrl-C was typed for the command running now: it is taken, with what
    /// was typed before it; what was typed after it stays for the next prompt. A Ctrl-C
    /// typed ahead after another whole line is that line's command's, not this one's.
    fn interrupted(&mut self) -> bool {
        let mut b = [0u8; 256];
        loop {
            let room = MAX_PENDING.saturating_sub(self.pending.len()).min(b.len());
            if room == 0 {
                break;
            }
            let Ok(n @ 1..) = console::poll(&mut b[..room]) else { break };
            self.pending.extend(&b[..n]);
            if n < room {
                break;
            }
        }
        match self.pending.iter().position(|&c| c == 0x03 || c == b'\r' || c == b'\n') {
            Some(i) if self.pending[i] == 0x03 => {
                self.pending.drain(..=i);
                true
            }
            _ => false,
        }
    }

    /// Wait `us` microseconds, or until Ctrl-C (then true).
    fn sleep(&mut self, us: u64) -> bool {
        let end = rt::sys::now_us().saturating_add(us);
        loop {
            if self.interrupted() {
                return true;
            }
            let now = rt::sys::now_us();
            if now >= end {
                return false;
            }
            rt::sys::sleep_us((end - now).min(20_000));
        }
    }
}

/// One line from the console, edited (None: the console is gone).
fn read_line(input: &mut Input, ed: &mut Editor, prompt: &str) -> Option<String> {
    let mut out = Vec::new();
    ed.start(prompt, &mut out);
    let _ = console::write(&out);
    loop {
        let b = input.next()?;
        out.clear();
        let ev = ed.feed(b, &mut out, &mut completions);
        let _ = console::write(&out);
        match ev {
            Some(Event::Line(l)) => return Some(l),
            Some(Event::Interrupt) => return Some(String::new()),
            None => {}
        }
    }
}

/// Tab: the candidates for the last word of `before` (the line up to the cursor): a
/// command's name for the first word (and after `help`), else a path on `files`.
fn completions(before: &str) -> Vec<String> {
    let words: Vec<&str> = before.split(' ').collect();
    let word = words.last().copied().unwrap_or("");
    let names = || COMMANDS.iter().map(|c| c.0);
    if words.len() == 1 {
        return lineedit::starting_with(&word.to_ascii_lowercase(), names())
            .into_iter()
            .map(|n| cased_like(word, n))
            .collect();
    }
    if words.len() == 2 && words[0].eq_ignore_ascii_case("help") {
        return lineedit::starting_with(word, names());
    }
    // A path: the directory part as typed, then names in it that begin with the rest.
    let (dir, prefix) = match word.rfind('/') {
        Some(i) => (&word[..=i], &word[i + 1..]),
        None => ("", word),
    };
    let srv = rt::alloc_slot();
    let listing =
        env::lookup("files", srv).and_then(|_| files_api::client::list(srv, if dir.is_empty() { "/" } else { dir }));
    rt::free_slot(srv);
    let Ok(listing) = listing else { return Vec::new() };
    listing
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ' ');
            let (kind, _size, name) = (f.next()?, f.next()?, f.next()?);
            name.starts_with(prefix).then(|| alloc::format!("{}{}{}", dir, name, if kind == "d" { "/" } else { "" }))
        })
        .collect()
}

/// `name` completed in the case the user began it in (`HE` → `HELP`).
fn cased_like(typed: &str, name: String) -> String {
    if !typed.is_empty()
        && typed.chars().all(|c| !c.is_ascii_lowercase())
        && typed.chars().any(|c| c.is_ascii_uppercase())
    {
        name.to_ascii_uppercase()
    } else {
        let mut s = String::from(typed);
        s.push_str(&name[typed.len().min(name.len())..]);
        s
    }
}

/// An error in words, for a person (when the command knows no better).
fn words(e: Error) -> &'static str {
    match e {
        Error::NotFound => "not found",
        Error::Exists => "it exists already",
        Error::NoRights => "this shell is not allowed to (its manifest entry does not grant it)",
        Error::NoMemory => "not enough memory",
        Error::NoSpace => "no room left",
        Error::Timeout => "no answer in time",
        Error::Reset => "the connection was refused or reset",
        Error::WouldBlock => "busy, try again",
        Error::Lost | Error::NoPartner | Error::InvalidCap => "the server went away (restarted?): try again",
        Error::TooLong => "too long",
        Error::Unsupported => "the server does not do that",
        Error::InvalidArg | Error::Malformed => "the server refused the request as malformed",
        Error::BadState => "the server cannot do that now",
        // Errors of the kernel's calls: the shell or a server went wrong inside.
        Error::NoSys => "the kernel does not know that call (a program built for another Scion?)",
        Error::WrongType => "a capability of the wrong kind was used (a fault inside Scion)",
        Error::BadAddress | Error::Misaligned | Error::CopyFault | Error::NoWindow => {
            "a message could not be copied (a fault inside Scion)"
        }
        Error::SlotInUse | Error::AlreadyMapped | Error::NotMapped => {
            "a capability slot or mapping was not as expected (a fault inside Scion)"
        }
        Error::Deadlock => "the call would have waited on itself",
    }
}

/// The pair of capability slots SPAWN fills (the thread, then the task), taken once and
/// emptied after each program: a slot pair per `run` ran the shell out of slots after
/// about 500.
static SPAWN_PAIR: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Start a program; with `wait`, until it has ended (root removes its task) or Ctrl-C.
fn spawn(input: &mut Input, cmd: &str, wait: bool) {
    use core::sync::atomic::Ordering;
    let slot = match SPAWN_PAIR.load(Ordering::Relaxed) {
        0 => {
            let s = rt::alloc_slot_pair();
            SPAWN_PAIR.store(s, Ordering::Relaxed);
            s
        }
        s => s,
    };
    spawn_in(input, cmd, wait, slot);
    // The shell keeps nothing of the program (it is named by its id from here on).
    let _ = rt::sys::cap_delete(slot);
    let _ = rt::sys::cap_delete(slot + 1);
}

fn spawn_in(input: &mut Input, cmd: &str, wait: bool, slot: u64) {
    // SPAWN fills `slot` (the thread) and `slot + 1` (the task).
    let task = slot + 1;
    let name = cmd.split(' ').next().unwrap_or(cmd);
    match rt::env::spawn(cmd, slot) {
        Ok(id) if !wait => println!("started {} as program {}", cmd, id),
        Ok(id) => {
            // (A program this shell may not control, or a server root started again,
            // gives no task capability: then there is nothing to wait for.)
            while rt::sys::cap_info(task).is_ok() {
                if input.sleep(10_000) {
                    println!("run: {} runs on as program {} (`kill {}` ends it)", name, id, id);
                    return;
                }
            }
        }
        Err(Error::NotFound) => {
            println!("run: there is no program `{}` in the boot image (`ps` shows those running)", name)
        }
        Err(Error::NoRights) => {
            println!("run: this shell may start `{}` only as the manifest says (no other arguments or pager)", name)
        }
        Err(Error::NoMemory) => {
            println!("run: `{}` may not start: not enough memory or programs left (root's log says which)", name)
        }
        Err(e) => println!("run: cannot start `{}`: {}", name, words(e)),
    }
}

fn main() -> i32 {
    if !console::available() {
        println!("sh: no console");
        return 1;
    }
    println!("Scion shell. Type `help` for the commands.");
    let mut input = Input { pending: VecDeque::new() };
    let mut ed = Editor::new();
    let mut net: Option<Net> = None;
    loop {
        let Some(line) = read_line(&mut input, &mut ed, "scion> ") else {
            println!("sh: the console is gone");
            return 1;
        };
        let line = line.trim();
        let (cmd, rest) = line.split_once(' ').unwrap_or((line, ""));
        let cmd = cmd.to_ascii_lowercase();
        let rest = rest.trim();
        match cmd.as_str() {
            "" => {}
            "help" => help(rest),
            "ps" => match env::ps() {
                Ok(t) => print!("{}", t),
                Err(e) => println!("ps: root did not answer: {}", words(e)),
            },
            "mem" => match env::meminfo() {
                Ok(t) => print!("{}", t),
                Err(e) => println!("mem: root did not answer: {}", words(e)),
            },
            "kill" => kill(rest),
            "run" => match rest.strip_suffix('&') {
                _ if rest.is_empty() || rest == "&" => usage("run"),
                Some(r) => spawn(&mut input, r.trim(), false),
                None => spawn(&mut input, rest, true),
            },
            "lspci" => spawn(&mut input, "lspci", true),
            "segs" => {
                let blk = rt::alloc_slot();
                match env::lookup("blk", blk).and_then(|_| blk_api::client::list(blk)) {
                    Ok(t) if t.is_empty() => println!("no segments"),
                    Ok(t) => print!("{}", t),
                    Err(Error::NotFound | Error::NoRights) => {
                        println!("segs: this shell may not ask the block service (`blk` is not in its manifest entry)")
                    }
                    Err(e) => println!("segs: the block service did not answer: {}", words(e)),
                }
                rt::free_slot(blk);
            }
            "ls" | "cat" | "put" | "rm" => files(&cmd, rest),
            "net" | "ping" | "fetch" | "cue" => network(&mut input, &mut net, &cmd, rest),
            "graft" => graft(rest),
            "swap" | "interpose" => reconfigure(&cmd, rest),
            "update" if rest.split_whitespace().count() < 2 => usage("update"),
            "update" => match env::update(rest) {
                Ok(()) => println!("updated {}", rest),
                Err((_, why)) if !why.is_empty() => println!("update: {}", why),
                Err((e, _)) => println!("update: {}", words(e)),
            },
            "echo" => println!("{}", rest),
            "sleep" => match rest.parse::<u64>() {
                Ok(ms) => {
                    let t0 = rt::sys::now_us();
                    if input.sleep(ms.saturating_mul(1000)) {
                        println!("sleep: interrupted after {} of {} ms", (rt::sys::now_us() - t0) / 1000, ms);
                    }
                }
                Err(_) => {
                    usage("sleep");
                    println!("(MS: a whole number of milliseconds, e.g. `sleep 500`)");
                }
            },
            "halt" => {
                println!("halting");
                if let Err(e) = env::halt() {
                    println!("halt: root refused: {}", words(e));
                }
            }
            other => println!("sh: unknown command `{}` (try `help`)", other),
        }
    }
}

/// `kill ID|NAME`.
fn kill(arg: &str) {
    if arg.is_empty() || arg.contains(' ') {
        return usage("kill");
    }
    let named = arg.parse::<u64>().is_err();
    let Some(id) = arg.parse::<u64>().ok().or_else(|| program_id(arg)) else {
        return println!("kill: no program called `{}` is running (`ps` lists them)", arg);
    };
    match env::kill(id) {
        Ok(()) => println!("killed {}", id),
        Err(Error::InvalidArg) => match program_name(id) {
            Some(n) if n.starts_with("mem") => {
                println!("kill: program {} is {}, a memory server: it pages the others and is not ended", id, n)
            }
            _ if named => println!("kill: `{}` has ended already", arg),
            _ => println!("kill: no program {} is running (`ps` lists them)", id),
        },
        Err(Error::NoRights) => {
            println!("kill: this shell may not end program {} (its manifest entry lacks `machine`)", id)
        }
        Err(e) => println!("kill: program {}: {}", id, words(e)),
    }
}

/// Why a file command failed, in words: asks `files` what `path` is.
fn file_error(srv: u64, cmd: &str, path: &str, e: Error) {
    use files_api::client as f;
    let what = f::stat(srv, path).map(|s| s.0);
    let parent = match path.trim_end_matches('/').rsplit_once('/') {
        Some(("", _)) => "/",
        Some((p, _)) => p,
        None => "/",
    };
    let bad_name = path.trim_matches('/').split('/').find(|n| !baiofs::valid_name(n));
    match (e, what) {
        (Error::InvalidArg, Ok(f::Kind::File)) if cmd == "ls" => {
            println!("ls: {} is a file (`cat {}` shows it)", path, path)
        }
        (Error::InvalidArg, Ok(f::Kind::Dir)) => println!("{}: {} is a directory (`ls {}` lists it)", cmd, path, path),
        (Error::InvalidArg, _) if bad_name.is_some() => println!(
            "{}: `{}` cannot be a name: names are 1 to {} bytes, without `/` or control characters, not `.` or `..`",
            cmd,
            bad_name.unwrap_or(""),
            baiofs::NAME_MAX
        ),
        (Error::InvalidArg, _) if f::stat(srv, parent).map(|s| s.0) == Ok(f::Kind::File) => {
            println!("{}: {} is a file, not a directory", cmd, parent)
        }
        (Error::NotFound, _) if f::stat(srv, parent).is_err() => {
            println!("{}: there is no directory {} (for {})", cmd, parent, path)
        }
        (Error::NotFound, _) => println!("{}: there is no {} (`ls {}` lists what is there)", cmd, path, parent),
        (Error::BadState, Ok(f::Kind::Dir)) if cmd == "rm" => {
            println!("rm: {} is not empty (remove what `ls {}` lists first)", path, path)
        }
        (Error::BadState, Ok(f::Kind::File)) if cmd == "rm" => {
            println!("rm: {} is open in a program; it can be removed once closed", path)
        }
        (Error::BadState, _) => {
            println!("{}: {}: the filesystem cannot read or trust that part of the disk (damaged?)", cmd, path)
        }
        (Error::NoSpace, _) => println!("{}: {}: no room left on the disk (or too many files open)", cmd, path),
        (e, _) => println!("{}: {}: {}", cmd, path, words(e)),
    }
}

/// The file commands, through the `files` server.
fn files(cmd: &str, arg: &str) {
    use files_api::client as f;
    // (Names may hold spaces: all of the argument is the path, but for `put`'s.)
    let (path, text) = if cmd == "put" { arg.split_once(' ').unwrap_or((arg, "")) } else { (arg, "") };
    match cmd {
        "cat" | "rm" if path.is_empty() => return usage(cmd),
        "put" if path.is_empty() || text.trim().is_empty() => return usage(cmd),
        _ => {}
    }
    let srv = rt::alloc_slot();
    if let Err(e) = env::lookup("files", srv) {
        rt::free_slot(srv);
        return match e {
            Error::NotFound | Error::NoRights => {
                println!("{}: this shell may not ask the files server (`files` is not in its manifest entry)", cmd)
            }
            e => println!("{}: the files server did not answer: {}", cmd, words(e)),
        };
    }
    let path = if path.is_empty() { "/" } else { path };
    let r = match cmd {
        "ls" => f::list(srv, path).map(|t| print!("{}", t)),
        "cat" => f::read_all(srv, path).map(|d| print!("{}", String::from_utf8_lossy(&d))),
        "put" => {
            // A new file each time (baiofs files do not shrink); never a directory.
            match f::stat(srv, path) {
                Ok((f::Kind::Dir, _)) => Err(Error::InvalidArg),
                _ => {
                    let _ = f::remove(srv, path);
                    f::open(srv, path, true).and_then(|(h, _)| {
                        let mut line = String::from(text);
                        line.push('\n');
                        let r = f::write(srv, h, 0, line.as_bytes()).and_then(|_| f::sync(srv));
                        let _ = f::close(srv, h);
                        r.map(|_| ())
                    })
                }
            }
        }
        _ => f::remove(srv, path),
    };
    if let Err(e) = r {
        file_error(srv, cmd, path, e);
    }
    rt::free_slot(srv);
}

/// Servers with swappable components (`swap_api`).
const SWAP_SERVERS: [&str; 2] = ["cache", "files"];

/// `swap list`, `swap S.C IMPL`, `interpose S.C KIND`.
fn reconfigure(cmd: &str, args: &str) {
    use swap_api::client as sw;
    let w: alloc::vec::Vec<&str> = args.split_whitespace().collect();
    let mut buf = alloc::vec![0u8; 4096];
    let list = |srv: u64, buf: &mut [u8]| -> Option<String> {
        sw::list(srv, buf).ok().map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    };
    if cmd == "swap" && w == ["list"] {
        for name in SWAP_SERVERS {
            let srv = rt::alloc_slot();
            match env::lookup(name, srv).ok().and_then(|_| list(srv, &mut buf)) {
                Some(t) => t.lines().for_each(|l| println!("{}.{}", name, l)),
                None => println!("swap: this shell cannot ask the `{}` server", name),
            }
            rt::free_slot(srv);
        }
        return;
    }
    let [target, what] = w[..] else { return usage(cmd) };
    let Some((server, component)) = target.split_once('.') else { return usage(cmd) };
    let srv = rt::alloc_slot();
    if env::lookup(server, srv).is_err() {
        rt::free_slot(srv);
        return println!(
            "{}: this shell cannot ask a server called `{}` (there are: {})",
            cmd,
            server,
            SWAP_SERVERS.join(", ")
        );
    }
    // The component's number is its line in the server's list; its implementations are
    // the third field.
    let text = list(srv, &mut buf).unwrap_or_default();
    let found = text.lines().enumerate().find(|(_, l)| l.split(' ').next() == Some(component));
    match found {
        None => println!("{}: `{}` has no component `{}`", cmd, server, component),
        Some((k, line)) if cmd == "swap" => {
            let impls = line.split(' ').nth(2).unwrap_or("");
            match impls.split(',').position(|i| i == what) {
                None => {
                    println!("swap: {}.{} has no implementation `{}` (there is: {})", server, component, what, impls)
                }
                Some(i) => match sw::swap(srv, k, i, &mut buf) {
                    Ok((format, cycles)) => println!(
                        "swapped {}.{} to {}: state moved in format {}, {} cycles",
                        server, component, what, format, cycles
                    ),
                    Err((e, 0)) => println!("swap: {}.{} was not swapped: {}", server, component, words(e)),
                    Err((_, n)) => println!(
                        "swap: {}.{} was not swapped: {}",
                        server,
                        component,
                        String::from_utf8_lossy(&buf[..n])
                    ),
                },
            }
        }
        Some((k, _)) => match swap_api::KINDS.iter().position(|x| *x == what) {
            None => println!("interpose: no interposer `{}` (there is: {})", what, swap_api::KINDS.join(", ")),
            Some(kind) => match sw::interpose(srv, k, kind as u64) {
                Ok(()) => println!("{}.{}: interposer {}", server, component, what),
                Err(e) => println!("interpose: {}.{}: {}", server, component, words(e)),
            },
        },
    }
    rt::free_slot(srv);
}

/// A graft server's capability, looked up by name.
fn graft_server(name: &str) -> Option<u64> {
    let srv = rt::alloc_slot();
    if env::lookup(name, srv).is_ok() {
        return Some(srv);
    }
    if name == rt::proto::PAGER {
        println!("graft: this shell may not ask its memory server (its manifest entry lists no `pager`)");
    } else {
        println!("graft: this shell may not ask `{}` (its manifest entry does not list it)", name);
    }
    rt::free_slot(srv);
    None
}

/// The graft commands (`graft_api`), at the server that hosts the point or owns the id.
fn graft(args: &str) {
    use graft::GraftFile;
    let w: alloc::vec::Vec<&str> = args.split_whitespace().collect();
    let id_server = |id: &str| -> Option<(u32, u64)> {
        let Some(id) = id.parse::<u32>().ok() else {
            println!("graft: give a graft id (see `graft list`)");
            return None;
        };
        let Some(name) = graft_api::server_of_id(id) else {
            println!("graft: no graft {} (see `graft list`)", id);
            return None;
        };
        // A server this shell may not ask holds no graft of its.
        let srv = rt::alloc_slot();
        if env::lookup(name, srv).is_err() {
            rt::free_slot(srv);
            println!("graft: no graft {} of this shell's (see `graft list`)", id);
            return None;
        }
        Some((id, srv))
    };
    let said = |r: Result<(), graft_api::Refusal>| {
        if let Err(r) = r {
            match (r.error, r.reason.is_empty()) {
                (Error::NotFound, true) => println!("graft: no such graft of this shell's (see `graft list`)"),
                (e, true) => println!("graft: {}", words(e)),
                (_, false) => println!("graft: {}", r.reason),
            }
        }
    };
    match w[..] {
        ["load", point, file] => {
            let Some((name, p)) = graft_api::place(point) else {
                println!("graft: no place `{}` to load a graft (there are: {})", point, graft_api::place_words());
                return;
            };
            let Some(srv) = graft_server(name) else { return };
            let files = rt::alloc_slot();
            let bytes = env::lookup("files", files).and_then(|_| files_api::client::read_all(files, file));
            rt::free_slot(files);
            match bytes {
                Err(e) => graft_file_error(file, e),
                Ok(b) => match GraftFile::parse(&b) {
                    Err(e) => println!("graft: {}: not a graft file: {}", file, e.what()),
                    Ok(g) if g.point != p => {
                        println!("graft: {} is a graft for point {}, not {}", file, g.point.name(), point)
                    }
                    Ok(g) => match graft_api::load(srv, &b) {
                        Ok(id) => println!("graft {}: {} ({}) loaded at {}", id, g.name, g.tech.name(), point),
                        Err(r) => said(Err(r)),
                    },
                },
            }
        }
        ["list"] => {
            println!("  ID OWNER POINT  TECH      CALLS  ABORTS       CYCLES NAME");
            for name in graft_api::ASKED {
                // Servers this shell may not reach have no grafts of its to show.
                let srv = rt::alloc_slot();
                if env::lookup(name, srv).is_err() {
                    rt::free_slot(srv);
                    continue;
                }
                match graft_api::list(srv) {
                    Ok(t) => {
                        for l in t.lines() {
                            let f: alloc::vec::Vec<&str> = l.split_whitespace().collect();
                            if let [id, owner, point, tech, calls, aborts, cycles, gname] = f[..] {
                                println!(
                                    "{:>4} {:>5} {:6} {:7} {:>7} {:>7} {:>12} {}",
                                    id, owner, point, tech, calls, aborts, cycles, gname
                                );
                            }
                        }
                    }
                    Err(r) => said(Err(r)),
                }
            }
        }
        ["replace", id, file] => {
            let Some((id, srv)) = id_server(id) else { return };
            let files = rt::alloc_slot();
            let bytes = env::lookup("files", files).and_then(|_| files_api::client::read_all(files, file));
            rt::free_slot(files);
            match bytes {
                Err(e) => graft_file_error(file, e),
                Ok(b) => match graft_api::replace(srv, id, &b) {
                    Ok(()) => println!("graft {} replaced by {} (its state kept)", id, file),
                    Err(r) => said(Err(r)),
                },
            }
        }
        ["unload", id] => {
            if let Some((id, srv)) = id_server(id) {
                match graft_api::unload(srv, id) {
                    Ok(()) => println!("graft {} unloaded", id),
                    Err(r) => said(Err(r)),
                }
            }
        }
        ["state", id, ref words @ ..] if !words.is_empty() => {
            let Some((id, srv)) = id_server(id) else { return };
            let mut bytes = alloc::vec::Vec::new();
            for x in words {
                match x.parse::<u64>() {
                    Ok(v) => bytes.extend_from_slice(&v.to_le_bytes()),
                    Err(_) => {
                        println!("graft: `{}` is not a number", x);
                        return;
                    }
                }
            }
            said(graft_api::set_state(srv, id, 0, &bytes));
        }
        ["stats", id] => {
            let Some((id, srv)) = id_server(id) else { return };
            match graft_api::stats(srv, id) {
                Ok(s) => {
                    let last = match s.last_abort {
                        0 => "none",
                        k => graft::engine::Abort::ALL.get(k as usize - 1).map_or("?", |a| a.what()),
                    };
                    println!(
                        "graft {}: {} calls, {} aborted, {} cycles, last abort: {}",
                        id, s.calls, s.aborts, s.cycles, last
                    );
                }
                Err(r) => said(Err(r)),
            }
        }
        _ => usage("graft"),
    }
}

/// A graft file that could not be read, in words.
fn graft_file_error(file: &str, e: Error) {
    match e {
        Error::NotFound => println!("graft: there is no file {} (`ls /grafts` lists the example grafts)", file),
        Error::InvalidArg => println!("graft: {} is a directory, or not a file's name (`ls {}`)", file, file),
        Error::NoRights => println!("graft: this shell may not ask the files server for {}", file),
        e => println!("graft: cannot read {}: {}", file, words(e)),
    }
}

/// The id of the first running program called `name` (from root's program list).
fn program_id(name: &str) -> Option<u64> {
    let ps = env::ps().ok()?;
    ps.lines().skip(1).find_map(|l| {
        let mut w = l.split_whitespace();
        let id = w.next()?.parse().ok()?;
        (w.next()? == name).then_some(id)
    })
}

/// The name of program `id` in root's program list.
fn program_name(id: u64) -> Option<String> {
    let ps = env::ps().ok()?;
    ps.lines().skip(1).find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next()?.parse::<u64>().ok()? == id).then(|| String::from(w.next().unwrap_or("")))
    })
}

/// The network commands, through the `net` server (attached once; again after it
/// restarted).
fn network(input: &mut Input, net: &mut Option<Net>, cmd: &str, arg: &str) {
    match cmd {
        "net" | "cue" if !arg.is_empty() => return usage(cmd),
        "fetch" if arg.is_empty() => return usage(cmd),
        _ => {}
    }
    if let Some(n) = net.as_ref() {
        if n.info().is_err() {
            // The server went away (restarted): attach to the new one.
            rt::free_slot(n.srv);
            *net = None;
        }
    }
    if net.is_none() {
        let srv = rt::alloc_slot();
        match env::lookup("net", srv).and_then(|_| Net::attach(srv)) {
            Ok(n) => *net = Some(n),
            Err(e) => {
                match e {
                    Error::NotFound | Error::NoRights => println!(
                        "{}: no network: this shell may not ask the `net` server (not in its manifest entry)",
                        cmd
                    ),
                    e => println!("{}: no network: the `net` server did not answer: {}", cmd, words(e)),
                }
                rt::free_slot(srv);
                return;
            }
        }
    }
    let n = net.as_ref().expect("attached");
    let r = match cmd {
        "net" => n.info().map(|i| {
            let gateway = if i.gateway == 0 { String::from("none") } else { alloc::format!("{}", Ip(i.gateway)) };
            println!(
                "address {}/{} ({}), gateway {}, MAC {}, link {}",
                Ip(i.ip),
                i.prefix,
                ["static", "DHCP", "none yet"][i.how.min(2) as usize],
                gateway,
                Mac(i.mac),
                if i.link_up { "up" } else { "down" }
            );
            println!(
                "in {} packets {} bytes, out {} packets {} bytes, {} sockets open",
                i.rx_packets, i.rx_bytes, i.tx_packets, i.tx_bytes, i.sockets
            );
        }),
        "ping" => {
            let target = if arg.is_empty() {
                n.info().ok().map(|i| i.gateway).filter(|g| *g != 0).unwrap_or(net_api::ipv4(10, 0, 2, 2))
            } else {
                match net_api::parse_ip(arg) {
                    Some(a) => a,
                    None => {
                        usage("ping");
                        println!("(ADDR: four numbers A.B.C.D, e.g. `ping 10.0.2.2`; Scion has no DNS client)");
                        return;
                    }
                }
            };
            match n.ping(target, 2_000_000) {
                Ok(us) => {
                    println!("ping {}: answer in {}.{:03} ms", Ip(target), us / 1000, us % 1000);
                    Ok(())
                }
                Err(Error::Timeout) => {
                    println!("ping {}: no answer within 2 s", Ip(target));
                    Ok(())
                }
                Err(e) => Err(e),
            }
        }
        "cue" => n.cue_list().map(|text| print_transfers(&text)),
        _ => fetch(input, n, arg),
    };
    if let Err(e) = r {
        println!("{}: {}", cmd, words(e));
    }
}

/// `cue`: net's transfers (CUE_LIST lines: id program socket sent total k t µs status).
fn print_transfers(text: &str) {
    if text.trim().is_empty() {
        println!("no Cue transfers");
        return;
    }
    println!("  ID PROG SOCKET       SENT      TOTAL       K     T ms   KiB/s");
    for l in text.lines() {
        let w: alloc::vec::Vec<u64> = l.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        let [id, prog, sock, sent, total, k, t, us, _status] = w[..] else { continue };
        let rate = sent * 1_000_000 / 1024 / us.max(1);
        let k = if k == net_api::MAX_K { alloc::string::String::from("fast") } else { alloc::format!("{}", k) };
        println!("{:4} {:4} {:6} {:10} {:10} {:>7} {:8} {:7}", id, prog, sock, sent, total, k, t, rate);
    }
}

/// How long `fetch` waits for a connection.
const CONNECT_US: u64 = 10_000_000;
/// `fetch` keeps the answer's head up to this, and this much of its body to print.
const MAX_HEAD: usize = 16 * 1024;
const SHOWN: usize = 8192;

/// HTTP GET of `url` (http://A.B.C.D[:PORT]/PATH): the answer's head, then the body
/// (text up to 8 KiB is printed, the rest counted). Ctrl-C ends it.
fn fetch(input: &mut Input, n: &Net, url: &str) -> Result<(), Error> {
    let Some(rest) = url.strip_prefix("http://") else {
        println!("fetch: give http://A.B.C.D[:PORT]/PATH (no names: Scion has no DNS client)");
        return Ok(());
    };
    let (hostport, path) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
    let (host, port) = match hostport.split_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().ok().filter(|p| *p != 0)),
        None => (hostport, Some(80)),
    };
    let (Some(ip), Some(port)) = (net_api::parse_ip(host), port) else {
        println!("fetch: bad address {:?} (give A.B.C.D or A.B.C.D:PORT, PORT 1 to 65535)", hostport);
        return Ok(());
    };
    let own = n.info().map(|i| i.ip).unwrap_or(0);
    if (own != 0 && ip == own) || ip >> 24 == 127 {
        println!("fetch: {} is Scion itself, and its net server does not connect to itself (no loopback); from the host, `curl http://localhost:8080/{}` asks Scion's web server", Ip(ip), path);
        return Ok(());
    }
    let h = n.connect_start(ip, port)?;
    let r = fetch_on(input, n, h, hostport, path);
    let _ = n.close(h);
    match r {
        Err(Error::Timeout) => {
            println!("fetch: {} did not answer within {} s", hostport, CONNECT_US / 1_000_000);
            Ok(())
        }
        Err(Error::Reset) => {
            println!("fetch: {} refused the connection, or reset it", hostport);
            Ok(())
        }
        r => r,
    }
}

fn fetch_on(input: &mut Input, n: &Net, h: u64, hostport: &str, path: &str) -> Result<(), Error> {
    use net_api::state;
    let t0 = rt::sys::now_us();
    loop {
        let st = n.state(h)?.0;
        if st == state::ESTABLISHED || st == state::CLOSE_WAIT {
            break;
        }
        if st != state::SYN_SENT && st != state::SYN_RECEIVED {
            return Err(Error::Reset);
        }
        if input.interrupted() {
            println!("fetch: interrupted while connecting to {}", hostport);
            return Ok(());
        }
        if rt::sys::now_us().saturating_sub(t0) > CONNECT_US {
            return Err(Error::Timeout);
        }
        n.wait(&[(h, net_api::READABLE | net_api::WRITABLE)], 50_000)?;
    }
    let req = alloc::format!(
        "GET /{} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nUser-Agent: scion-fetch\r\n\r\n",
        path,
        hostport
    );
    n.send_all(h, req.as_bytes())?;
    // The head (until a blank line), then the body: its first `SHOWN` bytes kept, the
    // rest counted.
    let mut head: Vec<u8> = Vec::new();
    let mut body: Vec<u8> = Vec::new();
    let mut in_body = false;
    let mut body_len: u64 = 0;
    let max = net_api::AREA_BYTES.min(16 * 1024);
    loop {
        match n.recv_area(h, 0, max) {
            Ok(0) => break,
            Ok(k) => {
                let mut got: &[u8] = n.area.bytes(0, k.min(max));
                if !in_body {
                    let take = got.len().min(MAX_HEAD + 4 - head.len().min(MAX_HEAD + 4));
                    let from = head.len().saturating_sub(3);
                    head.extend_from_slice(&got[..take]);
                    match head[from..].windows(4).position(|w| w == b"\r\n\r\n") {
                        Some(i) => {
                            let end = from + i + 4;
                            // What came after the head is the body's start.
                            let extra = head.len() - end;
                            got = &got[take - extra..];
                            head.truncate(end);
                            in_body = true;
                        }
                        None if head.len() > MAX_HEAD => {
                            println!("fetch: the answer's head is longer than {} bytes: not HTTP?", MAX_HEAD);
                            return Ok(());
                        }
                        None => got = &got[take..],
                    }
                }
                if in_body {
                    body_len += got.len() as u64;
                    let room = SHOWN.saturating_sub(body.len());
                    body.extend_from_slice(&got[..got.len().min(room)]);
                }
            }
            Err(Error::WouldBlock) => {
                if input.interrupted() {
                    println!("fetch: interrupted after {} bytes of body", body_len);
                    return Ok(());
                }
                n.wait(&[(h, net_api::READABLE)], 50_000)?;
            }
            Err(e) => return Err(e),
        }
    }
    if !in_body {
        // The connection ended within the head: show what came.
        body_len = 0;
    }
    print!("{}", String::from_utf8_lossy(&head).replace('\r', ""));
    print!("{}", String::from_utf8_lossy(&body));
    if !body.ends_with(b"\n") && body.len() as u64 == body_len {
        println!();
    }
    println!("fetch: {} bytes of body", body_len);
    Ok(())
}
