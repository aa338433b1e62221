//! What root tells the shell: the programs running and those down (`ps`), and the
//! frames of the machine, every one in a row (`meminfo`, `memacct`).

use crate::supervise::Held;
use crate::{badge_of, s0_client, Root};
use alloc::string::String;
use core::fmt::Write;
use rt::sys;
use sigma0_api as s0;

/// How long a `MEMINFO` report is given again rather than made anew (µs): each one
/// costs sigma0 a walk of its owner table (a frame's word each: 130,000 of them on a
/// 512 MiB machine, 1.5 million on 6 GiB), and sigma0 also answers the page faults of
/// root and the memory servers — a program asking in a loop must not keep it busy.
pub(crate) const MEMINFO_FRESH_US: u64 = 100_000;

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

    /// `meminfo`, or the last report if it is younger than `MEMINFO_FRESH_US`.
    pub(crate) fn meminfo_now(&mut self) -> String {
        let now = sys::now_us();
        if self.meminfo_last.1.is_empty() || now.saturating_sub(self.meminfo_last.0) >= MEMINFO_FRESH_US {
            self.meminfo_last = (now, self.meminfo());
        }
        self.meminfo_last.1.clone()
    }

    /// Where every frame of the machine is (`memacct`): the kernel's counts, sigma0's
    /// holders, each memory server's pool, and root's records to name them.
    pub(crate) fn meminfo(&self) -> String {
        let mut i = memacct::Inputs {
            kernel: memacct::Kernel::from_words(sys::kernel_memory()),
            root_kpages: sys::kernel_info().quota_used,
            ..Default::default()
        };
        if let Ok([free, _, _, _, keep]) = s0::client::stats(self.sigma0) {
            (i.sigma0_free, i.sigma0_keep) = (free, keep);
        }
        // sigma0's holders, a page of them at a time (each answer names where the next
        // begins; bounded all the same).
        let mut from = 1;
        for _ in 0..4096 {
            let Ok(m) = s0::client::holders(self.sigma0, from) else { break };
            let w = m.words();
            i.sigma0_own = m.word(2);
            for t in w.get(3..).unwrap_or(&[]).chunks_exact(3) {
                i.holders.push(memacct::Holder { client: t[0], frames: t[1], lent: t[2] });
            }
            from = m.word(3);
            if from == 0 {
                break;
            }
        }
        for &mi in &self.mems {
            let Ok(m) = mem_api::client::stats(self.progs[mi].child.thread) else {
                continue;
            };
            let w = m.words();
            i.pools.push(memacct::Pool {
                client: s0_client(mi),
                pool: m.word(2),
                free: m.word(3),
                held: m.word(5),
                reserved: m.word(6),
                clients: w.get(6..).unwrap_or(&[]).chunks_exact(3).map(|c| (c[0], c[1])).collect(),
            });
        }
        // Root's quota holds its children's limits as well as its own objects.
        let mut children = 0u64;
        for (idx, p) in self.progs.iter() {
            let (_, limit, used) = if p.done { (0, 0, 0) } else { sys::task_info(p.child.task).unwrap_or((0, 0, 0)) };
            children = children.saturating_add(limit);
            i.progs.push(memacct::Prog {
                name: p.name.clone(),
                id: badge_of(idx),
                client: s0_client(idx),
                kpages: used,
                live: !p.done,
            });
        }
        i.root_kpages = i.root_kpages.saturating_sub(children);
        memacct::account(&i).render()
    }
}
