//! The editor against a small terminal: what it shows after the bytes it sent.
extern crate std;

use super::*;
use alloc::format;
use alloc::string::ToString;
use alloc::vec;

/// A terminal of the VT100 basics the editor uses: printable characters overwrite,
/// `\n` goes to the next line's start (as the console sends it, CR LF), `\r`, BS,
/// `ESC [ n C/D`, `ESC [ K`, the bell (ignored). Anything else is a test failure.
struct Screen {
    rows: Vec<Vec<char>>,
    col: usize,
}

impl Screen {
    fn new() -> Self {
        Screen { rows: vec![Vec::new()], col: 0 }
    }

    fn show(&mut self, bytes: &[u8]) {
        let s = core::str::from_utf8(bytes).expect("the editor sends UTF-8");
        let mut it = s.chars().peekable();
        while let Some(c) = it.next() {
            match c {
                '\n' => {
                    self.rows.push(Vec::new());
                    self.col = 0;
                }
                '\r' => self.col = 0,
                '\x07' => {}
                '\x08' => self.col = self.col.saturating_sub(1),
                '\x1b' => {
                    assert_eq!(it.next(), Some('['), "only CSI sequences");
                    let mut n = String::new();
                    let fin = loop {
                        let c = it.next().expect("a whole sequence");
                        if c.is_ascii_digit() {
                            n.push(c);
                        } else {
                            break c;
                        }
                    };
                    let n: usize = n.parse().unwrap_or(1);
                    let row = self.rows.last_mut().unwrap();
                    match fin {
                        'C' => self.col += n,
                        'D' => self.col = self.col.checked_sub(n).expect("the cursor stays on the line"),
                        'K' => row.truncate(self.col),
                        _ => panic!("unexpected sequence {fin}"),
                    }
                }
                c => {
                    assert!(c >= ' ', "control character {:?} sent", c);
                    let row = self.rows.last_mut().unwrap();
                    while row.len() < self.col {
                        row.push(' ');
                    }
                    if self.col < row.len() {
                        row[self.col] = c;
                    } else {
                        row.push(c);
                    }
                    self.col += 1;
                }
            }
        }
    }

    fn last(&self) -> String {
        self.rows.last().unwrap().iter().collect()
    }

    fn row(&self, back: usize) -> String {
        self.rows[self.rows.len() - 1 - back].iter().collect()
    }
}

const COMMANDS: [&str; 6] = ["cat", "cue", "echo", "help", "halt", "ls"];

fn completer(before: &str) -> Vec<String> {
    let word = before.rsplit(' ').next().unwrap_or("");
    if !before.contains(' ') {
        return starting_with(word, COMMANDS);
    }
    starting_with(word, ["/docs/", "/README.md", "/grafts/", "/grafts/evict.graft"])
}

struct Term {
    ed: Editor,
    screen: Screen,
    events: Vec<Event>,
}

impl Term {
    fn new() -> Self {
        let mut t = Term { ed: Editor::new(), screen: Screen::new(), events: Vec::new() };
        t.prompt();
        t
    }

    fn prompt(&mut self) {
        let mut out = Vec::new();
        self.ed.start("scion> ", &mut out);
        self.screen.show(&out);
    }

    /// Type `bytes`; after each Enter or Ctrl-C, a new prompt (as the shell does).
    fn typed(&mut self, bytes: &[u8]) -> &mut Self {
        for &b in bytes {
            let mut out = Vec::new();
            let ev = self.ed.feed(b, &mut out, &mut completer);
            self.screen.show(&out);
            if let Some(e) = ev {
                self.events.push(e);
                self.prompt();
            }
        }
        self
    }

    fn lines(&self) -> Vec<String> {
        self.events.iter().filter_map(|e| if let Event::Line(l) = e { Some(l.clone()) } else { None }).collect()
    }

    /// The line on the screen and where its cursor is, against the editor's.
    fn check(&self, shown: &str) {
        assert_eq!(self.screen.last(), shown);
        let (line, cursor) = self.ed.line();
        assert_eq!(format_line(&line), shown);
        assert_eq!(self.screen.col, "scion> ".len() + cursor, "cursor on screen and in the line agree");
    }
}

fn format_line(l: &str) -> String {
    let mut s = String::from("scion> ");
    s.push_str(l);
    s
}

#[test]
fn plain_line() {
    let mut t = Term::new();
    t.typed(b"ls /docs\r");
    assert_eq!(t.lines(), ["ls /docs"]);
    assert_eq!(t.screen.row(1), "scion> ls /docs");
}

#[test]
fn utf8_is_kept_whole() {
    let mut t = Term::new();
    t.typed("echo héllo wörld ✓ 𝄞".as_bytes());
    t.check("scion> echo héllo wörld ✓ 𝄞");
    t.typed(b"\r");
    assert_eq!(t.lines(), ["echo héllo wörld ✓ 𝄞"]);
}

#[test]
fn backspace_takes_one_character_of_several_bytes() {
    let mut t = Term::new();
    t.typed("echo wö\x7f\x7fa".as_bytes());
    t.check("scion> echo a");
}

#[test]
fn bytes_that_are_not_utf8_are_dropped() {
    let mut t = Term::new();
    // A lone continuation byte, a lead byte cut short, an overlong form, a surrogate,
    // a value past U+10FFFF, bytes that never begin UTF-8.
    t.typed(b"a\x80b\xc3c\xc0\xafd\xed\xa0\x80e\xf4\x90\x80\x80f\xff\xfeg\r");
    assert_eq!(t.lines(), ["abcdefg"]);
}

#[test]
fn arrows_edit_mid_line() {
    let mut t = Term::new();
    t.typed(b"echo hllo");
    t.typed(b"\x1b[D\x1b[D\x1b[D");
    t.check("scion> echo hllo");
    assert_eq!(t.ed.line().1, 6);
    t.typed("é".as_bytes());
    t.check("scion> echo héllo");
    t.typed(b"\x1b[C\x1b[C\x1b[C\x1b[C\x1b[C!");
    t.check("scion> echo héllo!");
    t.typed(b"\r");
    assert_eq!(t.lines(), ["echo héllo!"]);
}

#[test]
fn home_and_end_in_every_form() {
    for home in [&b"\x1b[H"[..], b"\x1b[1~", b"\x1b[7~", b"\x1bOH", b"\x01"] {
        for end in [&b"\x1b[F"[..], b"\x1b[4~", b"\x1b[8~", b"\x1bOF", b"\x05"] {
            let mut t = Term::new();
            t.typed(b"cho ");
            t.typed(home).typed(b"e");
            t.check("scion> echo ");
            t.typed(end).typed(b"x");
            t.check("scion> echo x");
            t.typed(b"\r");
            assert_eq!(t.lines(), ["echo x"], "home {:?} end {:?}", home, end);
        }
    }
}

#[test]
fn delete_removes_under_the_cursor_and_inserts_no_tilde() {
    let mut t = Term::new();
    t.typed(b"echo abXc\x1b[D\x1b[D\x1b[3~");
    t.check("scion> echo abc");
    t.typed(b"\x04");
    t.check("scion> echo ab");
    // At the end, Delete does nothing.
    t.typed(b"\x1b[3~\x04\r");
    assert_eq!(t.lines(), ["echo ab"]);
}

#[test]
fn ctrl_arrows_move_by_word_and_insert_nothing() {
    let mut t = Term::new();
    t.typed(b"echo one two three");
    t.typed(b"\x1b[1;5D\x1b[1;5D");
    t.check("scion> echo one two three");
    assert_eq!(t.ed.line().1, 9);
    t.typed(b"\x1b[1;5C");
    assert_eq!(t.ed.line().1, 12);
    t.typed(b"\x1bb\x1bb\x1bf");
    assert_eq!(t.ed.line().1, 8);
    // Keys the editor does not know: function keys, Page Up, Insert, Alt-x.
    t.typed(b"\x1bOP\x1b[15~\x1b[5~\x1b[2~\x1bx\x1b[1;2P");
    t.check("scion> echo one two three");
    t.typed(b"\r");
    assert_eq!(t.lines(), ["echo one two three"]);
}

#[test]
fn kill_keys() {
    let mut t = Term::new();
    t.typed(b"echo one two");
    t.typed(b"\x17");
    t.check("scion> echo one ");
    t.typed(b"\x1b[D\x1b[D\x0b");
    t.check("scion> echo on");
    t.typed(b"\x1b[D\x15");
    t.check("scion> n");
    t.typed(b"\r");
    assert_eq!(t.lines(), ["n"]);
}

#[test]
fn history_up_and_down() {
    let mut t = Term::new();
    t.typed(b"echo one\recho two\r\r");
    t.typed(b"draft");
    t.typed(b"\x1b[A");
    t.check("scion> echo two");
    t.typed(b"\x1b[A");
    t.check("scion> echo one");
    // Past the oldest: stays.
    t.typed(b"\x1b[A\x10");
    t.check("scion> echo one");
    t.typed(b"\x1b[B");
    t.check("scion> echo two");
    // Past the newest: the line typed before.
    t.typed(b"\x1b[B");
    t.check("scion> draft");
    t.typed(b"\x1b[B");
    t.check("scion> draft");
    // A recalled line is edited like any other.
    t.typed(b"\x15\x1bOA\x1b[D\x1b[D\x1b[DTWO\x1b[3~\x1b[3~\x1b[3~\r");
    assert_eq!(t.lines(), ["echo one", "echo two", "", "echo TWO"]);
    assert_eq!(t.ed.history().collect::<Vec<_>>(), ["echo one", "echo two", "echo TWO"]);
}

#[test]
fn history_keeps_the_newest_and_no_repeats() {
    let mut t = Term::new();
    for i in 0..MAX_HISTORY + 10 {
        t.typed(format!("echo {i}\r").as_bytes());
        t.typed(format!("echo {i}\r").as_bytes());
    }
    let h: Vec<&str> = t.ed.history().collect();
    assert_eq!(h.len(), MAX_HISTORY);
    assert_eq!(h[0], "echo 10");
    assert_eq!(h[MAX_HISTORY - 1], format!("echo {}", MAX_HISTORY + 9));
}

#[test]
fn tab_completes_a_command_and_a_path() {
    let mut t = Term::new();
    t.typed(b"ec\t");
    t.check("scion> echo ");
    t.typed(b"\x15ca\tREADME\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D/R\t");
    t.check("scion> cat /README.md README");
    t.typed(b"\x0b\r");
    assert_eq!(t.lines(), ["cat /README.md "]);
    // A directory: no space after it, so that the path goes on.
    t.typed(b"ls /d\t");
    t.check("scion> ls /docs/");
    // The common part of several, then the list.
    t.typed(b"\x15ls /g\t");
    t.check("scion> ls /grafts/");
    t.typed(b"\t");
    t.check("scion> ls /grafts/");
    assert_eq!(t.screen.row(1), "/grafts/  /grafts/evict.graft");
    t.typed(b"e\t");
    t.check("scion> ls /grafts/evict.graft ");
    // Nothing to complete: the line stays.
    t.typed(b"\x15zz\t");
    t.check("scion> zz");
    t.typed(b"\x15h\t");
    t.check("scion> h");
    assert_eq!(t.screen.row(1), "halt  help");
}

#[test]
fn ctrl_c_drops_the_line() {
    let mut t = Term::new();
    t.typed(b"echo half\x03echo whole\r");
    assert_eq!(t.events, [Event::Interrupt, Event::Line("echo whole".to_string())]);
    assert_eq!(t.screen.row(2), "scion> echo half^C");
}

#[test]
fn cr_lf_is_one_enter() {
    let mut t = Term::new();
    t.typed(b"a\r\nb\n\nc\r\r");
    assert_eq!(t.lines(), ["a", "b", "", "c", ""]);
}

#[test]
fn escape_then_enter_still_ends_the_line() {
    let mut t = Term::new();
    t.typed(b"ls\x1b[\r");
    t.typed(b"ls\x1b\r");
    t.typed(b"ls\x1bO\r");
    assert_eq!(t.lines(), ["ls", "ls", "ls"]);
}

#[test]
fn a_line_has_at_most_max_line_characters() {
    let mut t = Term::new();
    let long = "é".repeat(MAX_LINE + 50);
    t.typed(long.as_bytes());
    assert_eq!(t.ed.line().0.chars().count(), MAX_LINE);
    // Completion past the end adds nothing either.
    t.typed(b"\t\r");
    assert_eq!(t.lines()[0].chars().count(), MAX_LINE);
}

#[test]
fn long_and_odd_escape_sequences_are_dropped() {
    let mut t = Term::new();
    let mut seq = b"\x1b[".to_vec();
    seq.extend(core::iter::repeat_n(b'9', 10_000));
    seq.extend_from_slice(b";99999999999999;5;7C");
    t.typed(b"ab").typed(&seq);
    // ESC [ R (a cursor report without numbers), ESC [ ; ~, ESC [ ? 25 h.
    t.typed(b"\x1b[R\x1b[;~\x1b[?25h\x1b[0~\x1b[99999999999999999999~");
    t.check("scion> ab");
    t.typed(b"c\r");
    assert_eq!(t.lines(), ["abc"]);
}

#[test]
fn a_million_random_bytes_never_panic() {
    let mut ed = Editor::new();
    let mut out = Vec::new();
    ed.start("> ", &mut out);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut lines = 0;
    for _ in 0..1_000_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Mostly the bytes that matter: ESC, [, digits, ;, finals, UTF-8 leads, keys.
        let pick = b"\x1b[O;0123~ABCDHF\x7f\x08\x01\x05\x0b\x15\x17\x09\x03\r\nxy\xc3\xa9\xe2\x9c\x93\xf0";
        let b = if x & 1 == 0 { pick[(x >> 8) as usize % pick.len()] } else { (x >> 16) as u8 };
        out.clear();
        if let Some(Event::Line(l)) = ed.feed(b, &mut out, &mut completer) {
            assert!(l.chars().count() <= MAX_LINE);
            lines += 1;
        }
        let (l, c) = ed.line();
        assert!(c <= l.chars().count());
        assert!(core::str::from_utf8(&out).is_ok());
    }
    assert!(lines > 0);
    assert!(ed.history().count() <= MAX_HISTORY);
}
