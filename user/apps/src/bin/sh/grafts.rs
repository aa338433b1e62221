//! The graft commands (`graft load|list|replace|unload|state|stats`, `graft_api`), each
//! at the server that hosts the graft point or owns the graft id, and a graft file that
//! could not be read, in words.

use crate::help::usage;
use crate::words;
use abi::Error;
use rt::{env, println};

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
pub(crate) fn graft(args: &str) {
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
