//! The file commands (`ls`, `cat`, `put`, `rm`) through the `files` server, and why
//! one failed, in words (`file_error` asks `files` what the path is).

use crate::help::usage;
use crate::words;
use abi::Error;
use alloc::string::String;
use rt::{env, print, println};

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
pub(crate) fn files(cmd: &str, arg: &str) {
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
