//! `help`: the table of commands (each form, what to type, what it does), which `help`
//! prints wrapped to 80 columns, `usage` prints the forms of one command from, and Tab
//! completes command names from.

use alloc::string::String;
use rt::println;

/// Each command: its name, what to type, what it does (`help`; `help NAME` shows the
/// entries of one name).
pub(crate) const COMMANDS: &[(&str, &str, &str)] = &[
    ("help", "help [CMD]", "the commands, or how to use CMD"),
    ("ps", "ps", "programs: id, state, priority, threads, pager, kernel pages, restarts,\nswitches (voluntary: blocked; involuntary: preempted)"),
    ("mem", "mem", "where every frame is: kernel, sigma0, each program, the pools; sums to the machine"),
    ("kill", "kill ID|NAME", "end a program (by id, or the first of that name; see `ps`)"),
    ("run", "run NAME [ARGS] [&]", "start a program from the boot image (resources as the manifest says)\nand wait until it ends (Ctrl-C: stop waiting; with `&`: do not wait)"),
    ("lspci", "lspci", "list PCI devices"),
    ("segs", "segs", "the BAIO disk segments this shell may open (name, blocks, owner)"),
    ("ls", "ls [DIR]", "files in DIR (kind, size, name) on the `files` server"),
    ("cat", "cat FILE", "print FILE"),
    ("put", "put FILE TEXT", "write TEXT (and a newline) into FILE, made if missing; on the disk when\nit answers (written beside, FSYNCed, renamed over FILE: old or new after a\npower cut)"),
    ("rm", "rm PATH", "remove a file or an empty directory (on the disk when it answers)"),
    ("mkdir", "mkdir DIR", "make directory DIR (on the disk when it answers)"),
    ("mv", "mv FROM TO", "rename FROM to TO, in its directory or another, replacing a file or an\nempty directory TO (FROM without spaces; on the disk when it answers, old or\nnew after a power cut)"),
    ("sync", "sync", "put every file write the files server answered on the disk (SYNC)"),
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
pub(crate) fn usage(name: &str) {
    let mut first = true;
    for (n, u, _) in COMMANDS {
        if *n == name {
            println!("{}{}", if first { "usage: " } else { "       " }, u);
            first = false;
        }
    }
}

/// `help` (every command) or `help CMD` (its forms and what each does).
pub(crate) fn help(arg: &str) {
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
