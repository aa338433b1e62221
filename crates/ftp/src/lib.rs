//! The FTP control connection (RFC 959, with EPSV and SIZE from RFC 2428 and 3659) as
//! Scion's `ftpd` speaks it: commands parsed from lines, paths resolved against the
//! session's directory, and the replies whose wording clients parse (PASV, EPSV, PWD,
//! LIST), and REST for resumed downloads. Only what an anonymous, read-only,
//! passive-mode server needs; the rest is refused with its code. Kept apart from the program so that the host tests it.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Longest command line taken (RFC 959 leaves it open; paths are short here).
pub const MAX_LINE: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    User(&'a str),
    Pass,
    Pwd,
    Cwd(&'a str),
    Cdup,
    Type(&'a str),
    Size(&'a str),
    Pasv,
    Epsv,
    Retr(&'a str),
    /// REST: where the next RETR starts (RFC 3659 §5, stream mode); None: not a number.
    Rest(Option<u64>),
    /// ABOR: stop the transfer in progress.
    Abor,
    /// LIST or NLST (names only), of the argument or the current directory.
    List {
        path: &'a str,
        names_only: bool,
    },
    Syst,
    Feat,
    Noop,
    Quit,
    /// Known and refused (active mode, uploads, …), or unknown: 502.
    Other(String),
    /// An empty line or one that is not text: 500.
    Bad,
}

/// One line (without its CR LF) as a command.
pub fn parse(line: &[u8]) -> Command<'_> {
    let Ok(line) = core::str::from_utf8(line) else { return Command::Bad };
    let line = line.trim_end_matches(['\r', '\n']);
    let (verb, arg) = match line.split_once(' ') {
        Some((v, a)) => (v, a.trim()),
        None => (line, ""),
    };
    if verb.is_empty() || verb.len() > 4 || !verb.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Command::Bad;
    }
    let mut up = [0u8; 4];
    for (u, b) in up.iter_mut().zip(verb.bytes()) {
        *u = b.to_ascii_uppercase();
    }
    let verb = core::str::from_utf8(&up[..verb.len()]).unwrap_or("");
    // LIST's options (`-a`, `-l`), which some clients send, are not paths.
    let list_arg = if arg.starts_with('-') { arg.split_once(' ').map_or("", |(_, p)| p.trim()) } else { arg };
    match verb {
        "USER" => Command::User(arg),
        "PASS" => Command::Pass,
        "PWD" | "XPWD" => Command::Pwd,
        "CWD" | "XCWD" => Command::Cwd(arg),
        "CDUP" | "XCUP" => Command::Cdup,
        "TYPE" => Command::Type(arg),
        "SIZE" => Command::Size(arg),
        "PASV" => Command::Pasv,
        "EPSV" => Command::Epsv,
        "RETR" => Command::Retr(arg),
        "REST" => Command::Rest(if !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_digit()) {
            arg.parse().ok()
        } else {
            None
        }),
        "ABOR" => Command::Abor,
        "LIST" => Command::List { path: list_arg, names_only: false },
        "NLST" => Command::List { path: list_arg, names_only: true },
        "SYST" => Command::Syst,
        "FEAT" => Command::Feat,
        "NOOP" => Command::Noop,
        "QUIT" => Command::Quit,
        v => Command::Other(String::from(v)),
    }
}

/// `arg` against directory `cwd` (absolute, normalised): an absolute, normalised path,
/// or None when it climbs above the root or holds a NUL.
pub fn resolve(cwd: &str, arg: &str) -> Option<String> {
    if arg.contains('\0') {
        return None;
    }
    let start = if arg.starts_with('/') { "" } else { cwd };
    pathnorm::normalise(start.split('/').chain(arg.split('/')))
}

/// The parent of an absolute, normalised directory (the root is its own).
pub fn parent(dir: &str) -> String {
    match dir.rfind('/') {
        Some(0) | None => String::from("/"),
        Some(i) => String::from(&dir[..i]),
    }
}

/// 257 names the directory in quotes, doubling quotes inside it (RFC 959).
pub fn pwd_reply(dir: &str) -> String {
    format!("257 \"{}\" is the current directory\r\n", dir.replace('"', "\"\""))
}

/// 227 (the address and port, as six numbers).
pub fn pasv_reply(ip: u32, port: u16) -> String {
    let [a, b, c, d] = ip.to_be_bytes();
    format!("227 Entering Passive Mode ({},{},{},{},{},{})\r\n", a, b, c, d, port >> 8, port & 0xff)
}

/// 229 (the port only: the client uses the control connection's address).
pub fn epsv_reply(port: u16) -> String {
    format!("229 Entering Extended Passive Mode (|||{}|)\r\n", port)
}

/// One line of a LIST, in the form `ls -l` prints and clients parse.
pub fn list_line(dir: bool, size: u64, name: &str) -> String {
    format!("{} 1 ftp ftp {:>12} Jan 01 00:00 {}\r\n", if dir { "drwxr-xr-x" } else { "-rw-r--r--" }, size, name)
}

/// Where a data port on the guest side is reached from the client's side (they differ
/// behind a NAT's forwarded ports): pairs "guest:announced" separated by commas.
pub fn parse_ports(s: &str) -> Option<Vec<(u16, u16)>> {
    let v: Option<Vec<(u16, u16)>> = s
        .split(',')
        .map(|p| {
            let (g, h) = p.split_once(':')?;
            Some((g.parse().ok().filter(|g| *g != 0)?, h.parse().ok().filter(|h| *h != 0)?))
        })
        .collect();
    v.filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands() {
        assert_eq!(parse(b"USER anonymous\r\n"), Command::User("anonymous"));
        assert_eq!(parse(b"retr  /a b.bin"), Command::Retr("/a b.bin"), "arguments keep inner spaces");
        assert_eq!(parse(b"LIST -la /sub"), Command::List { path: "/sub", names_only: false });
        assert_eq!(parse(b"LIST -l"), Command::List { path: "", names_only: false });
        assert_eq!(parse(b"NLST"), Command::List { path: "", names_only: true });
        assert_eq!(parse(b"PORT 1,2,3,4,5,6"), Command::Other("PORT".into()));
        assert_eq!(parse(b"STOR x"), Command::Other("STOR".into()));
        assert_eq!(parse(b""), Command::Bad);
        assert_eq!(parse(b"RETRIEVE x"), Command::Bad, "verbs are at most four letters");
        assert_eq!(parse(b"R3TR x"), Command::Bad);
        assert_eq!(parse(&[0xff, 0xfe]), Command::Bad, "not text");
        assert_eq!(parse(b"xpwd"), Command::Pwd);
        assert_eq!(parse(b"REST 1000"), Command::Rest(Some(1000)));
        assert_eq!(parse(b"rest 0"), Command::Rest(Some(0)));
        assert_eq!(parse(b"REST -5"), Command::Rest(None));
        assert_eq!(parse(b"REST"), Command::Rest(None));
        assert_eq!(parse(b"REST 99999999999999999999999"), Command::Rest(None), "past u64");
        assert_eq!(parse(b"ABOR"), Command::Abor);
    }

    #[test]
    fn paths() {
        assert_eq!(resolve("/", "a.bin").as_deref(), Some("/a.bin"));
        assert_eq!(resolve("/sub", "inner.txt").as_deref(), Some("/sub/inner.txt"));
        assert_eq!(resolve("/sub", "/top").as_deref(), Some("/top"));
        assert_eq!(resolve("/sub", "..").as_deref(), Some("/"));
        assert_eq!(resolve("/sub", "./x/../y").as_deref(), Some("/sub/y"));
        assert_eq!(resolve("/", ".."), None, "no climbing above the root");
        assert_eq!(resolve("/sub", "../../etc"), None);
        assert_eq!(resolve("/", "a\0b"), None);
        assert_eq!(resolve("/", "").as_deref(), Some("/"));
        assert_eq!(parent("/sub/deeper"), "/sub");
        assert_eq!(parent("/sub"), "/");
        assert_eq!(parent("/"), "/");
    }

    #[test]
    fn replies() {
        assert_eq!(pasv_reply(0x7f00_0001, 2122), "227 Entering Passive Mode (127,0,0,1,8,74)\r\n");
        assert_eq!(epsv_reply(40001), "229 Entering Extended Passive Mode (|||40001|)\r\n");
        assert_eq!(pwd_reply("/a\"b"), "257 \"/a\"\"b\" is the current directory\r\n");
        assert!(list_line(false, 16777216, "16m.bin").starts_with("-rw-r--r-- 1 ftp ftp     16777216 "));
        assert_eq!(parse_ports("2122:40001,2123:40002"), Some(alloc::vec![(2122, 40001), (2123, 40002)]));
        assert_eq!(parse_ports("2122"), None);
        assert_eq!(parse_ports("0:1"), None);
        assert_eq!(parse_ports(""), None);
    }
}
