//! The line the shell reads: typed bytes kept until taken (`Input`, which also sees a
//! Ctrl-C typed for the command running and sleeps until one), one edited line at a
//! time (`read_line`, through `lineedit`), and Tab's candidates (`completions`: a
//! command's name, or a path on `files`).

use crate::help::COMMANDS;
use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use lineedit::{Editor, Event};
use rt::{console, env};

/// Typed bytes not consumed yet (a read may bring more than one line, or bring them
/// while a command runs).
pub(crate) struct Input {
    pub(crate) pending: VecDeque<u8>,
}

/// At most this many typed bytes wait here to be taken; more typed ahead wait at the
/// console (which throttles the line when it holds 4 KiB): nothing typed is dropped.
const MAX_PENDING: usize = 16 * 1024;

impl Input {
    fn next(&mut self) -> Option<u8> {
        if self.pending.is_empty() {
            let mut b = [0u8; 64];
            let n = console::read(&mut b).ok()?;
            self.pending.extend(&b[..n]);
        }
        self.pending.pop_front()
    }

    /// Whether Ctrl-C was typed for the command running now: it is taken, with what
    /// was typed before it; what was typed after it stays for the next prompt. A Ctrl-C
    /// typed ahead after another whole line is that line's command's, not this one's.
    pub(crate) fn interrupted(&mut self) -> bool {
        let mut b = [0u8; 256];
        loop {
            let room = MAX_PENDING.saturating_sub(self.pending.len()).min(b.len());
            if room == 0 {
                break;
            }
            let Ok(n @ 1..) = console::poll(&mut b[..room]) else { break };
            self.pending.extend(&b[..n]);
            if n < room {
                break;
            }
        }
        match self.pending.iter().position(|&c| c == 0x03 || c == b'\r' || c == b'\n') {
            Some(i) if self.pending[i] == 0x03 => {
                self.pending.drain(..=i);
                true
            }
            _ => false,
        }
    }

    /// Wait `us` microseconds, or until Ctrl-C (then true).
    pub(crate) fn sleep(&mut self, us: u64) -> bool {
        let end = rt::sys::now_us().saturating_add(us);
        loop {
            if self.interrupted() {
                return true;
            }
            let now = rt::sys::now_us();
            if now >= end {
                return false;
            }
            rt::sys::sleep_us((end - now).min(20_000));
        }
    }
}

/// One line from the console, edited (None: the console is gone).
pub(crate) fn read_line(input: &mut Input, ed: &mut Editor, prompt: &str) -> Option<String> {
    let mut out = Vec::new();
    ed.start(prompt, &mut out);
    let _ = console::write(&out);
    loop {
        let b = input.next()?;
        out.clear();
        let ev = ed.feed(b, &mut out, &mut completions);
        let _ = console::write(&out);
        match ev {
            Some(Event::Line(l)) => return Some(l),
            Some(Event::Interrupt) => return Some(String::new()),
            None => {}
        }
    }
}

/// Tab: the candidates for the last word of `before` (the line up to the cursor): a
/// command's name for the first word (and after `help`), else a path on `files`.
fn completions(before: &str) -> Vec<String> {
    let words: Vec<&str> = before.split(' ').collect();
    let word = words.last().copied().unwrap_or("");
    let names = || COMMANDS.iter().map(|c| c.0);
    if words.len() == 1 {
        return lineedit::starting_with(&word.to_ascii_lowercase(), names())
            .into_iter()
            .map(|n| cased_like(word, n))
            .collect();
    }
    if words.len() == 2 && words[0].eq_ignore_ascii_case("help") {
        return lineedit::starting_with(word, names());
    }
    // A path: the directory part as typed, then names in it that begin with the rest.
    let (dir, prefix) = match word.rfind('/') {
        Some(i) => (&word[..=i], &word[i + 1..]),
        None => ("", word),
    };
    let srv = rt::alloc_slot();
    let listing =
        env::lookup("files", srv).and_then(|_| files_api::client::list(srv, if dir.is_empty() { "/" } else { dir }));
    rt::free_slot(srv);
    let Ok(listing) = listing else { return Vec::new() };
    listing
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ' ');
            let (kind, _size, name) = (f.next()?, f.next()?, f.next()?);
            name.starts_with(prefix).then(|| alloc::format!("{}{}{}", dir, name, if kind == "d" { "/" } else { "" }))
        })
        .collect()
}

/// `name` completed in the case the user began it in (`HE` → `HELP`).
fn cased_like(typed: &str, name: String) -> String {
    if !typed.is_empty()
        && typed.chars().all(|c| !c.is_ascii_lowercase())
        && typed.chars().any(|c| c.is_ascii_uppercase())
    {
        name.to_ascii_uppercase()
    } else {
        let mut s = String::from(typed);
        s.push_str(&name[typed.len().min(name.len())..]);
        s
    }
}
