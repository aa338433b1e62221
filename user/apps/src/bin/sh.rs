//! The shell on the user-level console: line editing (backspace, Ctrl-U to erase the
//! line, Ctrl-C to drop it, escape sequences ignored), and commands that ask root and
//! the servers: help, ps, mem, kill, run, lspci, segs, ls, cat, put, rm, net, ping, fetch,
//! cue, graft, echo, sleep, halt.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use alloc::collections::VecDeque;
use alloc::string::String;
use net_api::client::Net;
use net_api::{Ip, Mac};
use rt::{console, env, print, println};

rt::entry!(main);

const HELP: &str = "commands:
  help              this list
  ps                programs: id, state, priority, threads, pager, kernel pages, restarts,
                    switches (voluntary: blocked; involuntary: preempted)
  mem               memory of sigma0 and of each memory server, per program
  kill ID|NAME      end a program (by id, or the first of that name)
  run NAME [ARGS]   start a program from the boot image (resources as the manifest says)
  lspci             list PCI devices
  segs              the BAIO disk segments this shell may open (name, blocks, owner)
  ls [DIR]          files in DIR (kind, size, name) on the `files` server
  cat FILE          print FILE
  put FILE TEXT     write TEXT (and a newline) into FILE, made if missing
  rm PATH           remove a file or an empty directory
  net               the network: address, gateway, packets and bytes, sockets open
  ping [ADDR]       an ICMP echo to ADDR (default: the gateway, or 10.0.2.2)
  fetch URL         HTTP GET http://A.B.C.D[:PORT]/PATH: the answer's head, then the body
  cue               Cue transfers net runs: program, socket, bytes sent, schedule, rate
  graft load PLACE FILE   load the graft file FILE (from `files`, e.g. /grafts/…) at
                    PLACE for this shell's principal (evict: the cache's eviction
                    victim; reclaim: which of this shell's pages its memory server
                    takes back; stream: blk's reads flagged STREAM; cue: Cue's bytes
                    in net; ldisk: a segment as a logical disk)
  graft list        the grafts this principal loaded: calls, aborts, cycles
  graft replace ID FILE  hot-swap graft ID for the graft in FILE (any technology,
                    the same point), its state carried over
  graft unload ID   unload graft ID
  graft state ID W… write words W… (decimal) into graft ID's state from its start
                    (a hot list: the count, then device block numbers)
  graft stats ID    one graft's calls, aborts, cycles and last abort
  swap list         the swappable components of each server: implementation,
                    swaps, interposer (K42's object translation table)
  swap S.C IMPL     hot-swap component C of server S (e.g. `swap cache.policy mru`;
                    `auto`: the server chooses) while it runs
  interpose S.C K   wrap every call to S.C in an interposer: counter, trace, timer,
                    or none (detach); `swap list` shows what it saw
  update S PROG [ARGS]  replace the running server S (files, cache) by program PROG
                    from the boot image, or from the files filesystem when PROG is a
                    path (/…), while its clients keep calling (live update: its state
                    and its clients' capabilities move to the new program)
  echo TEXT         print TEXT
  sleep MS          wait MS milliseconds
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
    let mut net: Option<Net> = None;
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
            "kill" => match rest.trim().parse::<u64>().ok().or_else(|| program_id(rest.trim())) {
                Some(id) => match env::kill(id) {
                    Ok(()) => println!("killed {}", id),
                    Err(e) => println!("kill: {}: {:?}", id, e),
                },
                None => println!("kill: give a program id or name (see `ps`)"),
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
            "net" | "ping" | "fetch" | "cue" => network(&mut net, cmd, rest.trim()),
            "graft" => graft(rest.trim()),
            "swap" | "interpose" => reconfigure(cmd, rest.trim()),
            "update" => match env::update(rest.trim()) {
                Ok(()) => println!("updated {}", rest.trim()),
                Err((e, why)) => println!("update: {}{}{}", e.name(), if why.is_empty() { "" } else { ": " }, why),
            },
            "echo" => println!("{}", rest),
            "sleep" => match rest.trim().parse::<u64>() {
                Ok(ms) => rt::sys::sleep_us(ms.saturating_mul(1000)),
                Err(_) => println!("sleep: give milliseconds"),
            },
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

/// Servers with swappable components (`swap_api`).
const SWAP_SERVERS: [&str; 2] = ["cache", "files"];

/// `swap list`, `swap S.C IMPL`, `interpose S.C KIND`.
fn reconfigure(cmd: &str, args: &str) {
    use swap_api::client as sw;
    let w: alloc::vec::Vec<&str> = args.split_whitespace().collect();
    let mut buf = alloc::vec![0u8; 4096];
    let list = |srv: u64, buf: &mut [u8]| -> Option<String> { sw::list(srv, buf).ok().map(|n| String::from_utf8_lossy(&buf[..n]).into_owned()) };
    if cmd == "swap" && w == ["list"] {
        for name in SWAP_SERVERS {
            let srv = rt::alloc_slot();
            match env::lookup(name, srv).ok().and_then(|_| list(srv, &mut buf)) {
                Some(t) => t.lines().for_each(|l| println!("{}.{}", name, l)),
                None => println!("swap: no `{}` server to ask", name),
            }
            rt::free_slot(srv);
        }
        return;
    }
    let usage = "swap list | swap SERVER.COMPONENT IMPL | interpose SERVER.COMPONENT counter|trace|timer|none";
    let [target, what] = w[..] else { return println!("{}", usage) };
    let Some((server, component)) = target.split_once('.') else { return println!("{}", usage) };
    let srv = rt::alloc_slot();
    if env::lookup(server, srv).is_err() {
        rt::free_slot(srv);
        return println!("{}: no `{}` server to ask", cmd, server);
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
                None => println!("swap: {}.{} has no implementation `{}` (there is: {})", server, component, what, impls),
                Some(i) => match sw::swap(srv, k, i, &mut buf) {
                    Ok((format, cycles)) => println!("swapped {}.{} to {}: state moved in format {}, {} cycles", server, component, what, format, cycles),
                    Err((e, n)) => println!("swap: {}: {}", e.name(), String::from_utf8_lossy(&buf[..n])),
                },
            }
        }
        Some((k, _)) => match swap_api::KINDS.iter().position(|x| *x == what) {
            None => println!("interpose: no interposer `{}` (there is: {})", what, swap_api::KINDS.join(", ")),
            Some(kind) => match sw::interpose(srv, k, kind as u64) {
                Ok(()) => println!("{}.{}: interposer {}", server, component, what),
                Err(e) => println!("interpose: {}", e.name()),
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
    use abi::Error;
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
        graft_server(name).map(|s| (id, s))
    };
    let said = |r: Result<(), graft_api::Refusal>| {
        if let Err(r) = r {
            match (r.error, r.reason.is_empty()) {
                (Error::NotFound, true) => println!("graft: no such graft of this shell's (see `graft list`)"),
                (e, true) => println!("graft: {}", e.name()),
                (e, false) => println!("graft: {}: {}", e.name(), r.reason),
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
                Err(e) => println!("graft: {}: {}", file, e.name()),
                Ok(b) => match GraftFile::parse(&b) {
                    Err(e) => println!("graft: {}: not a graft file: {}", file, e.what()),
                    Ok(g) if g.point != p => println!("graft: {} is a graft for point {}, not {}", file, g.point.name(), point),
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
                                println!("{:>4} {:>5} {:6} {:7} {:>7} {:>7} {:>12} {}", id, owner, point, tech, calls, aborts, cycles, gname);
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
                Err(e) => println!("graft: {}: {}", file, e.name()),
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
                    println!("graft {}: {} calls, {} aborted, {} cycles, last abort: {}", id, s.calls, s.aborts, s.cycles, last);
                }
                Err(r) => said(Err(r)),
            }
        }
        _ => println!("graft: load PLACE FILE | list | replace ID FILE | unload ID | state ID WORD... | stats ID"),
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

/// The network commands, through the `net` server (attached once; again after it
/// restarted).
fn network(net: &mut Option<Net>, cmd: &str, arg: &str) {
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
                println!("{}: no network: {}", cmd, e.name());
                rt::free_slot(srv);
                return;
            }
        }
    }
    let n = net.as_ref().expect("attached");
    let r = match cmd {
        "net" => n.info().map(|i| {
            println!(
                "address {}/{} ({}), gateway {}, MAC {}, link {}",
                Ip(i.ip),
                i.prefix,
                ["static", "DHCP", "none yet"][i.how.min(2) as usize],
                Ip(i.gateway),
                Mac(i.mac),
                if i.link_up { "up" } else { "down" }
            );
            println!("in {} packets {} bytes, out {} packets {} bytes, {} sockets open", i.rx_packets, i.rx_bytes, i.tx_packets, i.tx_bytes, i.sockets);
        }),
        "ping" => {
            let target = if arg.is_empty() {
                n.info().ok().map(|i| i.gateway).filter(|g| *g != 0).unwrap_or(net_api::ipv4(10, 0, 2, 2))
            } else {
                match net_api::parse_ip(arg) {
                    Some(a) => a,
                    None => {
                        println!("ping: give an address A.B.C.D");
                        return;
                    }
                }
            };
            n.ping(target, 2_000_000).map(|us| println!("ping {}: answer in {}.{:03} ms", Ip(target), us / 1000, us % 1000))
        }
        "cue" => n.cue_list().map(|text| print_transfers(&text)),
        _ => fetch(n, arg),
    };
    if let Err(e) = r {
        println!("{}: {}", cmd, e.name());
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

/// HTTP GET of `url` (http://A.B.C.D[:PORT]/PATH): the answer's head, then the body
/// (text up to 8 KiB is printed, the rest counted).
fn fetch(n: &Net, url: &str) -> Result<(), abi::Error> {
    let Some(rest) = url.strip_prefix("http://") else {
        println!("fetch: give http://A.B.C.D[:PORT]/PATH (no names: Scion has no DNS client)");
        return Ok(());
    };
    let (hostport, path) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
    let (host, port) = match hostport.split_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().ok()),
        None => (hostport, Some(80)),
    };
    let (Some(ip), Some(port)) = (net_api::parse_ip(host), port) else {
        println!("fetch: bad address {:?}", hostport);
        return Ok(());
    };
    let h = n.connect(ip, port, 10_000_000)?;
    let req = alloc::format!("GET /{} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nUser-Agent: scion-fetch\r\n\r\n", path, hostport);
    let r = n.send_all(h, req.as_bytes()).and_then(|_| {
        let mut all = alloc::vec::Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match n.recv(h, &mut buf)? {
                0 => break,
                k => all.extend_from_slice(&buf[..k]),
            }
        }
        let split = all.windows(4).position(|w| w == b"\r\n\r\n").map_or(all.len(), |i| i + 4);
        print!("{}", String::from_utf8_lossy(&all[..split]).replace('\r', ""));
        let body = &all[split..];
        let shown = body.len().min(8192);
        print!("{}", String::from_utf8_lossy(&body[..shown]));
        if !body.ends_with(b"\n") && shown == body.len() {
            println!();
        }
        println!("fetch: {} bytes of body", body.len());
        Ok(())
    });
    let _ = n.close(h);
    r
}
