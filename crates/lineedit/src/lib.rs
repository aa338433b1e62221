//! The shell's line editor, kept apart from the console so that the host tests it: typed
//! bytes go in one at a time, what to send to the terminal comes out, and a finished
//! line (or Ctrl-C) is an [`Event`].
//!
//! It edits anywhere in the line (←/→, Home/End, Ctrl-A/E/B/F, Ctrl-←/→ by word,
//! Backspace, Delete, Ctrl-D/K/U/W), recalls history (↑/↓, Ctrl-P/N), completes the
//! word before the cursor through a caller's function (Tab), and is UTF-8 throughout:
//! a character typed as several bytes is one character of the line; bytes that are not
//! UTF-8 are dropped. Escape sequences are parsed whole (CSI `ESC [ params final` and
//! SS3 `ESC O final`, as xterm, the Linux console and VT100s send them), so that a key
//! the editor does not know inserts nothing.
//!
//! It needs nothing from the terminal but the VT100 basics: it never asks the terminal
//! where the cursor is (a serial line or a pipe may not answer), and it moves the cursor
//! relative to where it is (`ESC [ n D`/`C`) and erases to the end of the line
//! (`ESC [ K`). It takes one column per character and a line that fits the terminal's
//! width; wider characters or longer lines are still edited right, only drawn askew.
//!
//! Hostile input is bounded: a line holds at most [`MAX_LINE`] characters, the history
//! [`MAX_HISTORY`] lines, an escape sequence [`MAX_ESC`] bytes (longer ones are
//! dropped whole), and no byte sequence panics.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;

/// The longest line, in characters; keys that would make it longer ring the bell.
pub const MAX_LINE: usize = 1024;
/// Lines kept for ↑/↓ (the oldest goes first).
pub const MAX_HISTORY: usize = 100;
/// The longest escape sequence taken; a longer one is dropped whole.
pub const MAX_ESC: usize = 32;
/// Tab lists at most this many candidates.
pub const MAX_LISTED: usize = 60;

/// What a typed byte finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Enter: the line (also put into the history when not empty).
    Line(String),
    /// Ctrl-C: the line is dropped.
    Interrupt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Esc {
    None,
    /// After ESC.
    Start,
    /// After `ESC [`: up to two numeric parameters, the index of the one being read, and
    /// the bytes seen.
    Csi {
        p: [u32; 2],
        i: usize,
        len: usize,
    },
    /// After `ESC O`.
    Ss3,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Left,
    Right,
    WordLeft,
    WordRight,
    Home,
    End,
    Up,
    Down,
    Delete,
}

/// One line being edited, and the history.
pub struct Editor {
    prompt: String,
    line: Vec<char>,
    /// The cursor, in characters from the line's start.
    cursor: usize,
    history: VecDeque<String>,
    /// While ↑/↓ browse: the history entry shown, and the line typed before browsing.
    browse: Option<usize>,
    draft: Vec<char>,
    esc: Esc,
    /// A UTF-8 character arriving: its bytes so far and how many it has in all.
    utf8: [u8; 4],
    utf8_have: usize,
    utf8_need: usize,
    /// The last byte was CR (a following LF is the same Enter).
    after_cr: bool,
}

impl Default for Editor {
    fn default() -> Self {
        Self::new()
    }
}

fn push_char(out: &mut Vec<u8>, c: char) {
    let mut b = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
}

fn push_chars(out: &mut Vec<u8>, cs: &[char]) {
    for &c in cs {
        push_char(out, c);
    }
}

/// Cursor `n` columns left.
fn back(out: &mut Vec<u8>, n: usize) {
    if n > 0 {
        let mut s = String::new();
        let _ = write!(s, "\x1b[{}D", n);
        out.extend_from_slice(s.as_bytes());
    }
}

/// Cursor `n` columns right.
fn forward(out: &mut Vec<u8>, n: usize) {
    if n > 0 {
        let mut s = String::new();
        let _ = write!(s, "\x1b[{}C", n);
        out.extend_from_slice(s.as_bytes());
    }
}

const ERASE_TO_END: &[u8] = b"\x1b[K";
const BELL: u8 = 0x07;

impl Editor {
    pub fn new() -> Self {
        Editor {
            prompt: String::new(),
            line: Vec::new(),
            cursor: 0,
            history: VecDeque::new(),
            browse: None,
            draft: Vec::new(),
            esc: Esc::None,
            utf8: [0; 4],
            utf8_have: 0,
            utf8_need: 0,
            after_cr: false,
        }
    }

    /// Begin a new line: an empty one after `prompt` (sent to `out`).
    pub fn start(&mut self, prompt: &str, out: &mut Vec<u8>) {
        self.prompt = String::from(prompt);
        self.line.clear();
        self.cursor = 0;
        self.browse = None;
        out.extend_from_slice(prompt.as_bytes());
    }

    /// The line as typed so far, and the cursor (in characters).
    pub fn line(&self) -> (String, usize) {
        (self.line.iter().collect(), self.cursor)
    }

    /// The history, oldest first.
    pub fn history(&self) -> impl Iterator<Item = &str> {
        self.history.iter().map(String::as_str)
    }

    /// Take one typed byte; what the terminal should show goes to `out` (`\n` is a new
    /// line: the console sends CR LF). `complete` is asked on Tab with the text before
    /// the cursor and answers the candidates for its last word (whole words: those
    /// that do not begin with that word are ignored; a directory ends with `/`).
    pub fn feed(&mut self, b: u8, out: &mut Vec<u8>, complete: &mut dyn FnMut(&str) -> Vec<String>) -> Option<Event> {
        if core::mem::take(&mut self.after_cr) && b == b'\n' && self.esc == Esc::None {
            return None;
        }
        match self.esc {
            Esc::None => {}
            Esc::Start => {
                self.esc = match b {
                    b'[' => Esc::Csi { p: [0; 2], i: 0, len: 0 },
                    b'O' => Esc::Ss3,
                    // Alt-b / Alt-f: a word left / right (as readline).
                    b'b' => return self.key_none(Key::WordLeft, out),
                    b'f' => return self.key_none(Key::WordRight, out),
                    0x1b => Esc::Start,
                    // Alt and another key, or a sequence this editor does not know:
                    // nothing is inserted.
                    0x20..=0x7e => Esc::None,
                    // ESC then a control key: the ESC alone, then the key.
                    _ => {
                        self.esc = Esc::None;
                        return self.ground(b, out, complete);
                    }
                };
                return None;
            }
            Esc::Ss3 => {
                self.esc = Esc::None;
                let key = match b {
                    b'A' => Key::Up,
                    b'B' => Key::Down,
                    b'C' => Key::Right,
                    b'D' => Key::Left,
                    b'H' => Key::Home,
                    b'F' => Key::End,
                    0x20..=0x7e => return None,
                    _ => return self.ground(b, out, complete),
                };
                return self.key_none(key, out);
            }
            Esc::Csi { mut p, mut i, len } => {
                if len >= MAX_ESC {
                    // Too long to be a key: drop it, up to its final byte.
                    if (0x40..=0x7e).contains(&b) {
                        self.esc = Esc::None;
                    } else if b < 0x20 {
                        self.esc = Esc::None;
                        return self.ground(b, out, complete);
                    }
                    return None;
                }
                match b {
                    b'0'..=b'9' => {
                        if let Some(v) = p.get_mut(i) {
                            *v = v.saturating_mul(10).saturating_add((b - b'0') as u32).min(99_999);
                        }
                    }
                    b';' => i = (i + 1).min(p.len()),
                    // Intermediate and private-marker bytes: part of the sequence.
                    0x20..=0x2f | 0x3a | 0x3c..=0x3f => {}
                    0x40..=0x7e => {
                        self.esc = Esc::None;
                        return self.csi(b, p, out);
                    }
                    // A control byte inside a sequence: the sequence is dropped and
                    // the byte taken as typed.
                    _ => {
                        self.esc = Esc::None;
                        return self.ground(b, out, complete);
                    }
                }
                self.esc = Esc::Csi { p, i, len: len + 1 };
                return None;
            }
        }
        self.ground(b, out, complete)
    }

    fn key_none(&mut self, k: Key, out: &mut Vec<u8>) -> Option<Event> {
        self.esc = Esc::None;
        self.key(k, out);
        None
    }

    /// A finished CSI sequence: `ESC [ p0 ; p1 final`.
    fn csi(&mut self, fin: u8, p: [u32; 2], out: &mut Vec<u8>) -> Option<Event> {
        // A modifier (p1 = 1 + bits: 2 shift, 3 alt, 5 ctrl, …): with ctrl or alt the
        // arrows move by word.
        let by_word = matches!(p[1], 3..=8);
        let key = match fin {
            b'A' => Key::Up,
            b'B' => Key::Down,
            b'C' if by_word => Key::WordRight,
            b'D' if by_word => Key::WordLeft,
            b'C' => Key::Right,
            b'D' => Key::Left,
            b'H' => Key::Home,
            b'F' => Key::End,
            b'~' => match p[0] {
                1 | 7 => Key::Home,
                4 | 8 => Key::End,
                3 => Key::Delete,
                // Insert, Page Up/Down, function keys: nothing.
                _ => return None,
            },
            _ => return None,
        };
        self.key(key, out);
        None
    }

    fn key(&mut self, k: Key, out: &mut Vec<u8>) {
        match k {
            Key::Left if self.cursor > 0 => {
                self.cursor -= 1;
                back(out, 1);
            }
            Key::Right if self.cursor < self.line.len() => {
                self.cursor += 1;
                forward(out, 1);
            }
            Key::WordLeft => {
                let to = self.word_left();
                back(out, self.cursor - to);
                self.cursor = to;
            }
            Key::WordRight => {
                let mut to = self.cursor;
                while to < self.line.len() && self.line[to] == ' ' {
                    to += 1;
                }
                while to < self.line.len() && self.line[to] != ' ' {
                    to += 1;
                }
                forward(out, to - self.cursor);
                self.cursor = to;
            }
            Key::Home => {
                back(out, self.cursor);
                self.cursor = 0;
            }
            Key::End => {
                forward(out, self.line.len() - self.cursor);
                self.cursor = self.line.len();
            }
            Key::Up => self.history_up(out),
            Key::Down => self.history_down(out),
            Key::Delete if self.cursor < self.line.len() => {
                self.line.remove(self.cursor);
                self.redraw_tail(out);
            }
            _ => {}
        }
    }

    /// Where a word left of the cursor begins.
    fn word_left(&self) -> usize {
        let mut to = self.cursor;
        while to > 0 && self.line[to - 1] == ' ' {
            to -= 1;
        }
        while to > 0 && self.line[to - 1] != ' ' {
            to -= 1;
        }
        to
    }

    /// Redraw from the cursor to the end of the line (the line changed there), erase
    /// what is left of the old one, and put the cursor back.
    fn redraw_tail(&self, out: &mut Vec<u8>) {
        let tail = &self.line[self.cursor..];
        push_chars(out, tail);
        out.extend_from_slice(ERASE_TO_END);
        back(out, tail.len());
    }

    /// Show `new` in place of the line, the cursor at its end.
    fn replace_line(&mut self, new: Vec<char>, out: &mut Vec<u8>) {
        back(out, self.cursor);
        self.line = new;
        self.cursor = self.line.len();
        push_chars(out, &self.line);
        out.extend_from_slice(ERASE_TO_END);
    }

    fn history_up(&mut self, out: &mut Vec<u8>) {
        let at = match self.browse {
            None if self.history.is_empty() => return,
            None => {
                self.draft = self.line.clone();
                self.history.len() - 1
            }
            Some(0) => return,
            Some(i) => i - 1,
        };
        self.browse = Some(at);
        let new = self.history[at].chars().collect();
        self.replace_line(new, out);
    }

    fn history_down(&mut self, out: &mut Vec<u8>) {
        let Some(i) = self.browse else { return };
        let new = if i + 1 < self.history.len() {
            self.browse = Some(i + 1);
            self.history[i + 1].chars().collect()
        } else {
            self.browse = None;
            core::mem::take(&mut self.draft)
        };
        self.replace_line(new, out);
    }

    /// Insert `cs` at the cursor (as many as fit).
    fn insert(&mut self, cs: &[char], out: &mut Vec<u8>) {
        let room = MAX_LINE.saturating_sub(self.line.len());
        if cs.len() > room {
            out.push(BELL);
        }
        let cs = &cs[..cs.len().min(room)];
        if cs.is_empty() {
            return;
        }
        let at = self.cursor;
        self.line.splice(at..at, cs.iter().copied());
        self.cursor += cs.len();
        push_chars(out, cs);
        let tail = &self.line[self.cursor..];
        push_chars(out, tail);
        back(out, tail.len());
    }

    /// Remove the characters `from .. self.cursor` (left of the cursor).
    fn remove_left(&mut self, from: usize, out: &mut Vec<u8>) {
        if from >= self.cursor {
            return;
        }
        back(out, self.cursor - from);
        self.line.drain(from..self.cursor);
        self.cursor = from;
        self.redraw_tail(out);
    }

    fn ground(&mut self, b: u8, out: &mut Vec<u8>, complete: &mut dyn FnMut(&str) -> Vec<String>) -> Option<Event> {
        if self.utf8_need > 0 {
            if b & 0xc0 == 0x80 {
                self.utf8[self.utf8_have] = b;
                self.utf8_have += 1;
                if self.utf8_have == self.utf8_need {
                    self.utf8_need = 0;
                    // Overlong forms, surrogates and values past U+10FFFF fail here.
                    if let Some(c) =
                        core::str::from_utf8(&self.utf8[..self.utf8_have]).ok().and_then(|s| s.chars().next())
                    {
                        self.insert(&[c], out);
                    }
                }
                return None;
            }
            // Not a continuation byte: the partial character is dropped.
            self.utf8_need = 0;
        }
        match b {
            0x1b => self.esc = Esc::Start,
            b'\r' | b'\n' => {
                self.after_cr = b == b'\r';
                out.push(b'\n');
                let line: String = self.line.iter().collect();
                self.line.clear();
                self.cursor = 0;
                self.browse = None;
                if !line.trim().is_empty() && self.history.back() != Some(&line) {
                    if self.history.len() >= MAX_HISTORY {
                        self.history.pop_front();
                    }
                    self.history.push_back(line.clone());
                }
                return Some(Event::Line(line));
            }
            0x03 => {
                out.extend_from_slice(b"^C\n");
                self.line.clear();
                self.cursor = 0;
                self.browse = None;
                return Some(Event::Interrupt);
            }
            0x7f | 0x08 => self.remove_left(self.cursor.saturating_sub(1), out),
            0x01 => self.key(Key::Home, out),
            0x05 => self.key(Key::End, out),
            0x02 => self.key(Key::Left, out),
            0x06 => self.key(Key::Right, out),
            0x04 => self.key(Key::Delete, out),
            0x10 => self.key(Key::Up, out),
            0x0e => self.key(Key::Down, out),
            0x0b => {
                self.line.truncate(self.cursor);
                out.extend_from_slice(ERASE_TO_END);
            }
            0x15 => self.remove_left(0, out),
            0x17 => self.remove_left(self.word_left(), out),
            0x09 => self.complete(out, complete),
            0x20..=0x7e => self.insert(&[b as char], out),
            0xc2..=0xf4 => {
                self.utf8[0] = b;
                self.utf8_have = 1;
                self.utf8_need = match b {
                    0xc2..=0xdf => 2,
                    0xe0..=0xef => 3,
                    _ => 4,
                };
            }
            // Other control bytes, and bytes that cannot begin UTF-8: nothing.
            _ => {}
        }
        None
    }

    /// Tab: complete the word before the cursor.
    fn complete(&mut self, out: &mut Vec<u8>, complete: &mut dyn FnMut(&str) -> Vec<String>) {
        let start = self.line[..self.cursor].iter().rposition(|&c| c == ' ').map_or(0, |i| i + 1);
        let word: String = self.line[start..self.cursor].iter().collect();
        let before: String = self.line[..self.cursor].iter().collect();
        let mut cands: Vec<String> =
            complete(&before).into_iter().filter(|c| c.starts_with(word.as_str()) && !c.is_empty()).collect();
        cands.sort();
        cands.dedup();
        let Some(first) = cands.first() else {
            out.push(BELL);
            return;
        };
        // The longest prefix the candidates share (in characters).
        let mut common: Vec<char> = first.chars().collect();
        for c in &cands[1..] {
            let n = common.iter().zip(c.chars()).take_while(|(a, b)| **a == *b).count();
            common.truncate(n);
        }
        let wlen = word.chars().count();
        let mut add: Vec<char> = common[wlen.min(common.len())..].to_vec();
        if cands.len() == 1 && !first.ends_with('/') {
            add.push(' ');
        }
        if !add.is_empty() {
            self.insert(&add, out);
            return;
        }
        if cands.len() == 1 {
            return;
        }
        // Nothing to add: show the candidates, then the line again.
        out.push(b'\n');
        for (k, c) in cands.iter().take(MAX_LISTED).enumerate() {
            if k > 0 {
                out.extend_from_slice(b"  ");
            }
            out.extend_from_slice(c.as_bytes());
        }
        if cands.len() > MAX_LISTED {
            let mut s = String::new();
            let _ = write!(s, "  (and {} more)", cands.len() - MAX_LISTED);
            out.extend_from_slice(s.as_bytes());
        }
        out.push(b'\n');
        out.extend_from_slice(self.prompt.as_bytes());
        push_chars(out, &self.line);
        back(out, self.line.len() - self.cursor);
    }
}

/// The candidates among `names` for a word: those that begin with it.
pub fn starting_with<'a>(word: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    names.into_iter().filter(|n| n.starts_with(word)).map(String::from).collect()
}

#[cfg(test)]
mod tests;
