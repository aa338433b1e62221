//! The FTP control connection (RFC 959, with EPSV and SIZE from RFC 2428 and 3659) as
//! Scion's `ftpd` speaks it: commands parsed from lines, paths resolved against the
//! session's directory, and the replies whose wording clients parse (PASV, EPSV, PWD,
//! LIST), and REST for resumed downloads. Only what an anonymous, read-only,
//! passive-mode server needs; the rest is refused with its code. Kept apart from the
//! program so that the host tests it, with ftpd's decisions on its sessions
//! ([`limits`]: who gets a session when the table is full, when an idle session or a
//! stalled transfer is given up).
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod limits;

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
    /// EPSV and what its argument asks (RFC 2428 §3).
    Epsv(Epsv),
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

/// What an EPSV asks for (RFC 2428 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Epsv {
    /// A passive port (no argument, or network protocol 1, IPv4).
    Port,
    /// `EPSV ALL`: from now on only EPSV sets up data connections (200).
    All,
    /// Another network protocol (2, IPv6, which this server does not speak): 522.
    Protocol,
    /// Neither a number nor ALL: 501.
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
        "EPSV" => Command::Epsv(match arg {
            "" | "1" => Epsv::Port,
            a if a.eq_ignore_ascii_case("ALL") => Epsv::All,
            a if !a.is_empty() && a.len() <= 5 && a.bytes().all(|b| b.is_ascii_digit()) => Epsv::Protocol,
            _ => Epsv::Bad,
        }),
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

/// Whether a restart point set by REST survives `cmd`: RFC 3659 §5 wants REST
/// immediately before the transfer it restarts, so any other command clears it (RETR
/// uses it, and STOR and APPE would; another REST replaces it).
pub fn keeps_rest(cmd: &Command) -> bool {
    matches!(cmd, Command::Rest(_) | Command::Retr(_)) || matches!(cmd, Command::Other(v) if v == "STOR" || v == "APPE")
}

/// Whether `cmd` sets up a data connection by another way than EPSV (refused after
/// `EPSV ALL`, RFC 2428 §4).
pub fn not_after_epsv_all(cmd: &Command) -> bool {
    matches!(cmd, Command::Pasv)
        || matches!(cmd, Command::Other(v) if v == "PORT" || v == "EPRT" || v == "LPRT" || v == "LPSV")
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

/// The most passive data ports one server listens on.
pub const MAX_DATA_PORTS: usize = 4096;

/// Where a data port on the guest side is reached from the client's side (they differ
/// behind a NAT's forwarded ports), separated by commas: `G:A` (port G, announced as
/// A), `G1-G2` (a range, announced as they are) or `G1-G2:A1` (a range, announced from
/// A1 on). None when an item is malformed, a port is 0, a range runs backwards or past
/// 65535, a guest port comes twice, or there are more than `MAX_DATA_PORTS`.
pub fn parse_ports(s: &str) -> Option<Vec<(u16, u16)>> {
    let mut v: Vec<(u16, u16)> = Vec::new();
    for item in s.split(',') {
        let (g, a) = match item.split_once(':') {
            Some((g, a)) => (g, Some(a)),
            None => (item, None),
        };
        let port = |p: &str| p.parse::<u16>().ok().filter(|p| *p != 0);
        let (g0, g1) = match g.split_once('-') {
            Some((x, y)) => (port(x)?, port(y)?),
            None if a.is_some() => (port(g)?, port(g)?),
            None => return None,
        };
        if g1 < g0 || (g1 - g0) as usize >= MAX_DATA_PORTS {
            return None;
        }
        let a0 = match a {
            Some(a) => port(a)?,
            None => g0,
        };
        a0.checked_add(g1 - g0)?;
        for k in 0..=(g1 - g0) {
            if v.len() == MAX_DATA_PORTS || v.iter().any(|(g, _)| *g == g0 + k) {
                return None;
            }
            v.push((g0 + k, a0 + k));
        }
    }
    Some(v).filter(|v| !v.is_empty())
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
        assert_eq!(parse_ports("2122-2124"), Some(alloc::vec![(2122, 2122), (2123, 2123), (2124, 2124)]));
        assert_eq!(parse_ports("2122-2123:3001,9:9"), Some(alloc::vec![(2122, 3001), (2123, 3002), (9, 9)]));
        assert_eq!(parse_ports("2124-2122"), None, "backwards");
        assert_eq!(parse_ports("65535-65535:65535"), Some(alloc::vec![(65535, 65535)]));
        assert_eq!(parse_ports("100-101:65535"), None, "announced past 65535");
        assert_eq!(parse_ports("2122-2123,2123:5"), None, "a port twice");
        assert_eq!(parse_ports("1-65535"), None, "more than MAX_DATA_PORTS");
        assert_eq!(parse_ports("2122-"), None);
        assert_eq!(parse_ports("2122-2123:"), None);
        assert_eq!(parse_ports("a-b"), None);
    }

    #[test]
    fn epsv() {
        assert_eq!(parse(b"EPSV"), Command::Epsv(Epsv::Port));
        assert_eq!(parse(b"EPSV 1"), Command::Epsv(Epsv::Port));
        assert_eq!(parse(b"EPSV ALL"), Command::Epsv(Epsv::All), "RFC 2428: answered 200, not 229");
        assert_eq!(parse(b"epsv all"), Command::Epsv(Epsv::All));
        assert_eq!(parse(b"EPSV 2"), Command::Epsv(Epsv::Protocol));
        assert_eq!(parse(b"EPSV x"), Command::Epsv(Epsv::Bad));
        assert_eq!(parse(b"EPSV 1234567"), Command::Epsv(Epsv::Bad));
        assert!(not_after_epsv_all(&parse(b"PASV")));
        assert!(not_after_epsv_all(&parse(b"PORT 1,2,3,4,5,6")));
        assert!(not_after_epsv_all(&parse(b"EPRT |1|1.2.3.4|5|")));
        assert!(!not_after_epsv_all(&parse(b"EPSV")));
        assert!(!not_after_epsv_all(&parse(b"RETR x")));
    }

    #[test]
    fn rest_is_cleared_by_any_other_command() {
        for keeps in ["RETR a", "REST 5", "REST x", "STOR a", "APPE a"] {
            assert!(keeps_rest(&parse(keeps.as_bytes())), "{keeps}");
        }
        for clears in
            ["NOOP", "EPSV", "PASV", "TYPE I", "SIZE a", "LIST", "CWD /", "PWD", "USER x", "ABOR", "PORT 1", ""]
        {
            assert!(!keeps_rest(&parse(clears.as_bytes())), "{clears:?}");
        }
    }
}
