//! The shell on the user-level console: a line editor (`lineedit`: editing anywhere in
//! the line, history, Tab completion of commands and paths, UTF-8), and commands that
//! ask root and the servers: help, ps, mem, kill, run, lspci, segs, ls, cat, put, rm,
//! net, ping, fetch, cue, graft, swap, interpose, update, echo, sleep, halt. Commands
//! are taken in any case; each says in words what was wrong and what to type. Ctrl-C
//! ends what a command waits for (`sleep`, `fetch`, `run`, `lspci`; `ping` waits 2 s
//! at most).
//!
//! The commands live in modules by concern: `programs` (run, kill), `files`, `network`
//! (net, ping, fetch, cue), `grafts`, `swap` (swap, interpose); `line` reads and edits
//! the lines, `help` holds the table of commands. This file keeps the line loop
//! (`main`, which dispatches each line and runs the few one-line commands itself) and
//! the errors in words every command uses.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use abi::Error;
use alloc::collections::VecDeque;
use files::files;
use grafts::graft;
use help::{help, usage};
use line::{read_line, Input};
use lineedit::Editor;
use net_api::client::Net;
use network::network;
use programs::{kill, spawn};
use rt::{console, env, print, println};
use swap::reconfigure;

mod files;
mod grafts;
mod help;
mod line;
mod network;
mod programs;
mod swap;

rt::entry!(main);

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
        Error::Moved => "the server is being replaced: try again",
        Error::Io => "the disk failed (an I/O error): it may not have been done",
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
            "ls" | "cat" | "put" | "rm" | "mkdir" | "mv" | "sync" => files(&cmd, rest),
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
