//! The shell on the user-level console: line editing (backspace, Ctrl-U to erase the
//! line, Ctrl-C to drop it, escape sequences ignored), and commands that ask root and
//! the servers: help, ps, mem, kill, run, lspci, segs, ls, cat, put, rm, echo, halt.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use alloc::collections::VecDeque;
use alloc::string::String;
use rt::{console, env, print, println};

rt::entry!(main);

const HELP: &str = "commands:
  help              this list
  ps                programs: id, state, priority, threads, pager, kernel pages, restarts
  mem               memory of sigma0 and of each memory server, per program
  kill ID           end program ID
  run NAME [ARGS]   start a program from the boot image (resources as the manifest says)
  lspci             list PCI devices
  segs              the BAIO disk segments this shell may open (name, blocks, owner)
  ls [DIR]          files in DIR (kind, size, name) on the `files` server
  cat FILE          print FILE
  put FILE TEXT     write TEXT (and a newline) into FILE, made if missing
  rm PATH           remove a file or an empty directory
  echo TEXT         print TEXT
  halt              power off";

/// Typed bytes not consumed yet (a read may bring more than one line).
struct Input {
    pending: VecDeque<u8>,
}

impl Input {
    fn next(&mut self) -> Option<u8> {
        if self.pending.is_empty() {
            let mut b = [0u8; 64];
            let n = console::read(&mut b).ok()?;
            self.pending.extend(&b[..n]);
        }
        self.pending.pop_front()
    }
}

fn read_line(input: &mut Input) -> Option<String> {
    let mut line = String::new();
    let mut esc = 0;
    loop {
        {
            let c = input.next()?;
            if esc > 0 {
                // ESC [ X: skip the rest of the sequence (arrow keys and such).
                esc = if esc == 1 && c == b'[' { 2 } else { 0 };
                continue;
            }
            match c {
                b'\r' | b'\n' => {
                    print!("\n");
                    return Some(line);
                }
                0x7f | 0x08 if line.pop().is_some() => print!("\x08 \x08"),
                0x7f | 0x08 => {}
                0x15 => {
                    for _ in 0..line.len() {
                        print!("\x08 \x08");
                    }
                    line.clear();
                }
                0x03 => {
                    print!("^C\n");
                    return Some(String::new());
                }
                0x1b => esc = 1,
                0x20..=0x7e => {
                    line.push(c as char);
                    print!("{}", c as char);
                }
                _ => {}
            }
        }
    }
}

/// Start a program; with `wait`, until it has ended (root removes its task).
fn spawn(cmd: &str, wait: bool) {
    // SPAWN fills `slot` (the thread) and `slot + 1` (the task).
    let slot = rt::alloc_slot_pair();
    let task = slot + 1;
    match rt::env::spawn(cmd, slot) {
        Ok(id) if !wait => println!("started {} as program {}", cmd, id),
        Ok(_) => {
            for _ in 0..1000 {
                if rt::sys::cap_info(task).is_err() {
                    return;
                }
                rt::sys::sleep_us(10_000);
            }
            println!("{} is still running", cmd);
        }
        Err(e) => println!("run: cannot start `{}`: {:?}", cmd, e),
    }
}

fn main() -> i32 {
    if !console::available() {
        println!("sh: no console");
        return 1;
    }
    println!("Scion shell. Type `help` for the commands.");
    let mut input = Input { pending: VecDeque::new() };
    loop {
        print!("scion> ");
        let Some(line) = read_line(&mut input) else {
            println!("sh: the console is gone");
            return 1;
        };
        let line = line.trim();
        let (cmd, rest) = line.split_once(' ').unwrap_or((line, ""));
        match cmd {
            "" => {}
            "help" => println!("{}", HELP),
            "ps" => match env::ps() {
                Ok(t) => print!("{}", t),
                Err(e) => println!("ps: {:?}", e),
            },
            "mem" => match env::meminfo() {
                Ok(t) => print!("{}", t),
                Err(e) => println!("mem: {:?}", e),
            },
            "kill" => match rest.trim().parse::<u64>() {
                Ok(id) => match env::kill(id) {
                    Ok(()) => println!("killed {}", id),
                    Err(e) => println!("kill: {}: {:?}", id, e),
                },
                Err(_) => println!("kill: give a program id (see `ps`)"),
            },
            "run" if !rest.trim().is_empty() => spawn(rest.trim(), false),
            "run" => println!("run: give a program name"),
            "lspci" => spawn("lspci", true),
            "segs" => {
                let blk = rt::alloc_slot();
                match env::lookup("blk", blk).and_then(|_| blk_api::client::list(blk)) {
                    Ok(t) if t.is_empty() => println!("no segments"),
                    Ok(t) => print!("{}", t),
                    Err(e) => println!("segs: no block service: {:?}", e),
                }
                rt::free_slot(blk);
            }
            "ls" | "cat" | "put" | "rm" => files(cmd, rest.trim()),
            "echo" => println!("{}", rest),
            "halt" => {
                println!("halting");
                let _ = env::halt();
            }
            other => println!("sh: unknown command `{}` (try `help`)", other),
        }
    }
}

/// The file commands, through the `files` server.
fn files(cmd: &str, arg: &str) {
    use files_api::client as f;
    let srv = rt::alloc_slot();
    if env::lookup("files", srv).is_err() {
        println!("{}: no files server", cmd);
        return;
    }
    let r = match cmd {
        "ls" => f::list(srv, if arg.is_empty() { "/" } else { arg }).map(|t| print!("{}", t)),
        "cat" => f::read_all(srv, arg).map(|d| print!("{}", String::from_utf8_lossy(&d))),
        "put" => {
            let (path, text) = arg.split_once(' ').unwrap_or((arg, ""));
            // A new file each time (baiofs files do not shrink).
            let _ = f::remove(srv, path);
            f::open(srv, path, true).and_then(|(h, _)| {
                let mut line = String::from(text);
                line.push('\n');
                let r = f::write(srv, h, 0, line.as_bytes()).and_then(|_| f::sync(srv));
                let _ = f::close(srv, h);
                r.map(|_| ())
            })
        }
        _ => f::remove(srv, arg),
    };
    if let Err(e) = r {
        println!("{}: {}: {:?}", cmd, arg, e);
    }
    rt::free_slot(srv);
}
