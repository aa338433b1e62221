//! The file commands (`ls`, `cat`, `put`, `rm`, `mkdir`, `mv`, `sync`) through the
//! `files` server, and why one failed, in words (`file_error` asks `files` what the path
//! is). What changes the disk is on it when the command answers: `put` writes beside
//! the file, FSYNCs and RENAMEs over it; `rm` and `mkdir` SYNC; `mv` is a RENAME.

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
        (Error::BadState, _) => println!("{}: {}: not now (open in a program, or a directory not empty)", cmd, path),
        (Error::Io, _) => println!(
            "{}: {}: the disk failed (an I/O error, or bytes that fail their checksums): it may not have been done",
            cmd, path
        ),
        (Error::NoSpace, _) => println!("{}: {}: no room left on the disk (or too many files open)", cmd, path),
        (e, _) => println!("{}: {}: {}", cmd, path, words(e)),
    }
}

/// `put`: a new file each time (baiofs files do not shrink), written beside `path`
/// (`.NAME.put` in its directory), FSYNCed, then RENAMEd over it: after a power cut the
/// file is the old one or the new one, never missing nor part-written.
fn put(srv: u64, path: &str, text: &str) -> Result<(), Error> {
    use files_api::client as f;
    let (dir, name) = path.trim_end_matches('/').rsplit_once('/').unwrap_or(("", path));
    if !baiofs::valid_name(name) {
        return Err(Error::InvalidArg);
    }
    let mut tmp = alloc::format!("{dir}/.{name}.put");
    if !baiofs::valid_name(&tmp[dir.len() + 1..]) {
        // A name too long for the two bytes more: a shorter one beside it.
        tmp = alloc::format!("{dir}/.put");
    }
    let _ = f::remove(srv, &tmp);
    let (h, _) = f::open(srv, &tmp, true)?;
    let mut line = String::from(text);
    line.push('\n');
    let r = f::write(srv, h, 0, line.as_bytes()).and_then(|_| f::fsync(srv, h));
    let c = f::close(srv, h);
    let r = r.and(c).and_then(|_| f::rename(srv, &tmp, path));
    if r.is_err() {
        let _ = f::remove(srv, &tmp);
    }
    r
}

/// The file commands, through the `files` server.
pub(crate) fn files(cmd: &str, arg: &str) {
    use files_api::client as f;
    // (Names may hold spaces: all of the argument is the path, but for `put`'s.)
    let (path, text) = if matches!(cmd, "put" | "mv") { arg.split_once(' ').unwrap_or((arg, "")) } else { (arg, "") };
    match cmd {
        "cat" | "rm" | "mkdir" if path.is_empty() => return usage(cmd),
        "put" | "mv" if path.is_empty() || text.trim().is_empty() => return usage(cmd),
        "sync" if !path.is_empty() => return usage(cmd),
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
        "put" => match f::stat(srv, path) {
            // Never over a directory.
            Ok((f::Kind::Dir, _)) => Err(Error::InvalidArg),
            _ => put(srv, path, text),
        },
        "mkdir" => f::mkdir(srv, path).and_then(|_| f::sync(srv)),
        "mv" => match f::rename(srv, path, text.trim()) {
            Err(Error::BadState) => {
                println!("mv: {} is open in a program, or a directory that is not empty", text.trim());
                Ok(())
            }
            Err(Error::InvalidArg) if f::stat(srv, path).is_ok() => {
                println!(
                    "mv: {} cannot become {}: a directory into itself, a file over a directory or the reverse, or a bad name",
                    path,
                    text.trim()
                );
                Ok(())
            }
            r => r,
        },
        "sync" => f::sync(srv).map(|_| println!("sync: every write the files server answered is on the disk")),
        _ => f::remove(srv, path).and_then(|_| f::sync(srv)),
    };
    if let Err(e) = r {
        file_error(srv, cmd, path, e);
    }
    rt::free_slot(srv);
}
