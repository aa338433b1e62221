//! What root tells the shell: the programs running and those down (`ps`), and the
//! memory of sigma0 and of each memory server and its clients (`meminfo`).

use crate::supervise::Held;
use crate::{badge_of, Root};
use alloc::string::String;
use core::fmt::Write;
use rt::sys;
use sigma0_api as s0;

impl Root<'_> {
    pub(crate) fn ps(&self) -> String {
        let mut s =
            String::from("  ID NAME         STATE     PRIO THREADS PAGER  KPAGES  RESTARTS    VOLSW    INVSW\n");
        for (i, p) in self.progs.iter() {
            if p.done {
                continue;
            }
            let (st, prio) = sys::thread_read_state(p.child.thread).unwrap_or((99, 0));
            let state = match st {
                0 => "stopped",
                1 => "ready",
                2 => "sending",
                3 => "waiting",
                4 => "calling",
                5 => "sleeping",
                6 => "faulted",
                _ => "gone",
            };
            let (threads, _, kused) = sys::task_info(p.child.task).unwrap_or((0, 0, 0));
            let pager = match p.pager {
                Some(m) => self.progs[m].name.as_str(),
                None => "sigma0",
            };
            let (vol, inv) = sys::task_switches(p.child.task).unwrap_or((0, 0));
            let _ = writeln!(
                s,
                "{:4} {:12} {:9} {:4} {:7} {:6} {:6} {:9} {:8} {:8}",
                badge_of(i),
                p.name,
                state,
                prio,
                threads,
                pager,
                kused,
                p.restarts,
                vol,
                inv
            );
        }
        // Programs marked `restart` with no instance: waiting out their back-off
        // (`backoff`), held until the servers they use run (`awaiting`), or left down
        // after their budget (`down`) until their retry — each says what it waits for.
        let now = sys::now_us();
        for d in &self.down {
            let left = d.due.map_or(0, |t| t.saturating_sub(now).div_ceil(1_000_000));
            let (state, note) = match d.why {
                Held::Backoff => ("backoff", String::new()),
                Held::Deps => ("awaiting", alloc::format!("  until {} runs", self.dep_down(&d.entry).unwrap_or("?"))),
                Held::Down(_) => ("down", alloc::format!("  retry in {} s", left)),
            };
            let _ = writeln!(
                s,
                "{:>4} {:12} {:9} {:>4} {:>7} {:6} {:>6} {:9} {:>8} {:>8}{}",
                "-", d.entry.name, state, d.entry.priority, "-", d.entry.pager, "-", d.restarts, "-", "-", note
            );
        }
        s
    }

    pub(crate) fn meminfo(&self) -> String {
        let mut s = String::new();
        if let Ok([free, all, ..]) = s0::client::stats(self.sigma0) {
            let _ = writeln!(s, "sigma0: {} of {} frames free ({} MiB of {} MiB)", free, all, free >> 8, all >> 8);
        }
        for &mi in &self.mems {
            let Ok(m) = mem_api::client::stats(self.progs[mi].child.thread) else {
                continue;
            };
            let _ = writeln!(
                s,
                "{}: pool {} pages, {} free, {} clients",
                self.progs[mi].name,
                m.word(2),
                m.word(3),
                m.word(4)
            );
            let w = m.words();
            for c in w[4..].chunks(3) {
                if let [b, pages, limit] = c {
                    let name =
                        (*b as usize).checked_sub(1).and_then(|i| self.progs.get(i)).map_or("?", |p| p.name.as_str());
                    let _ = writeln!(s, "    {:4} {:12} {:6} pages of {}", b, name, pages, limit);
                }
            }
        }
        s
    }
}
