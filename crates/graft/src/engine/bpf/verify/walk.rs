//! The path search: every path followed from the entry, pruned where a state is inside
//! one already followed to its end, in slices of bounded work (`Verifier::run`).

use super::*;

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// A place (a jump target) reached on a path, and the paths from there still under way.
/// Its state (`None`: let go, to keep the verifier's memory small) becomes one followed
/// to the end once they have all ended.
pub(super) struct Node {
    parent: Option<usize>,
    pc: usize,
    state: Option<Packed>,
    pending: u32,
}

/// The path search (see the module's comment), with what it knows of the program: it
/// owns everything, so that it can stop after a slice of work and go on later.
pub(super) struct Explorer {
    pub(super) insns: Vec<Insn>,
    /// Places worth a look back (Linux's prune points): jump targets (1), loops' heads,
    /// the targets of jumps back (2).
    pub(super) target: Vec<u8>,
    pub(super) live: Vec<u16>,
    pub(super) rel: Vec<u16>,
    pub(super) succs: Vec<([usize; 2], usize)>,
    pub(super) mem_len: usize,
    pub(super) limits: Limits,
    nodes: Vec<Option<Node>>,
    free: Vec<usize>,
    /// States followed to the end, by place (newest last).
    done: BTreeMap<usize, Vec<Packed>>,
    /// Paths to follow: where, in what state, under which node. A path stopped at the
    /// end of a slice waits on top, to go on first.
    work: Vec<(usize, Packed, usize)>,
    /// Bytes of the states held (in `nodes`, `done` and `work`).
    held: usize,
    pub(super) stats: Work,
    /// The instruction the search is at (a refusal is about it).
    pub(super) at: usize,
    started: bool,
    /// The path stopped at the end of the last slice (on top of the work): its
    /// instructions since its last node, so that it goes on exactly as it would have.
    paused_since: usize,
}

impl Explorer {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        insns: Vec<Insn>,
        target: Vec<u8>,
        live: Vec<u16>,
        rel: Vec<u16>,
        succs: Vec<([usize; 2], usize)>,
        mem_len: usize,
        limits: Limits,
    ) -> Explorer {
        // What it knows of the program is held too (most of its memory for a long one).
        let n = insns.len();
        let fixed = n * (core::mem::size_of::<Insn>() + 1 + 2 + 2 + core::mem::size_of::<([usize; 2], usize)>());
        Explorer {
            insns,
            target,
            live,
            rel,
            succs,
            mem_len,
            limits,
            nodes: Vec::new(),
            free: Vec::new(),
            done: BTreeMap::new(),
            work: Vec::new(),
            held: fixed,
            stats: Work::default(),
            at: 0,
            started: false,
            paused_since: 0,
        }
    }

    /// Account `bytes` more held, refusing past the limit.
    pub(super) fn hold(&mut self, bytes: usize) -> Result<(), LoadError> {
        self.held += bytes;
        let total = self.held + self.nodes.len() * core::mem::size_of::<Option<Node>>();
        self.stats.peak_bytes = self.stats.peak_bytes.max(total);
        if total > self.limits.bytes {
            return Err(refuse("eBPF: more states to keep than the verifier may hold (too complex)"));
        }
        Ok(())
    }

    pub(super) fn new_node(&mut self, nd: Node) -> Result<usize, LoadError> {
        let cost = nd.state.as_ref().map_or(0, Packed::cost);
        let k = match self.free.pop() {
            Some(k) => {
                self.nodes[k] = Some(nd);
                k
            }
            None => {
                self.nodes.push(Some(nd));
                self.nodes.len() - 1
            }
        };
        self.hold(cost)?;
        Ok(k)
    }

    /// A path under `node` ended (at an exit, or pruned): nodes whose paths have all
    /// ended keep their state as one followed to the end.
    pub(super) fn finish(&mut self, mut node: usize) {
        loop {
            let Some(nd) = self.nodes[node].as_mut() else { return };
            nd.pending -= 1;
            if nd.pending > 0 {
                return;
            }
            let nd = self.nodes[node].take().expect("just seen");
            self.free.push(node);
            if let Some(state) = nd.state {
                // Kept for pruning while they take at most half the verifier's memory.
                if self.held > self.limits.bytes / 2 {
                    self.held -= state.cost();
                    match nd.parent {
                        Some(p) => {
                            node = p;
                            continue;
                        }
                        None => return,
                    }
                }
                let at_pc = self.done.entry(nd.pc).or_default();
                if at_pc.len() >= MAX_DONE_AT {
                    self.held -= at_pc.remove(0).cost();
                }
                at_pc.push(state);
            }
            match nd.parent {
                Some(p) => node = p,
                None => return,
            }
        }
    }

    /// A path at place `pc` in state `st` under `node`, `since` instructions after its
    /// last node: `None` if it is pruned (it ended), else the node it goes on under.
    pub(super) fn place(
        &mut self,
        pc: usize,
        st: &State,
        node: usize,
        since: usize,
    ) -> Result<Option<(usize, bool)>, LoadError> {
        let (live, rel) = (self.live[pc], self.rel[pc]);
        if let Some(ds) = self.done.get(&pc) {
            self.stats.compared += ds.len();
            if ds.iter().any(|d| d.holds(st, live, rel)) {
                self.finish(node);
                return Ok(None);
            }
        }
        // Back at a loop's head no narrower than before: it may never end. The newest
        // earlier visit of this place on the path (`prev`), and whether there is an
        // older one (then `prev` is a round of a loop after its first).
        let (mut prev, mut older) = (None, false);
        let mut up = Some(node);
        for _ in 0..LOOP_LOOKBACK {
            let Some(k) = up else { break };
            let Some(a) = self.nodes[k].as_ref() else { break };
            if a.pc == pc {
                if let Some(s) = &a.state {
                    self.stats.compared += 1;
                    if s.holds(st, live, rel) {
                        return Err(refuse("eBPF: a loop the verifier cannot prove ends"));
                    }
                    if prev.is_none() {
                        prev = Some(k);
                    } else {
                        older = true;
                    }
                }
            }
            up = a.parent;
        }
        if !(self.target[pc] == 2 || since >= NODE_EVERY) {
            return Ok(Some((node, false)));
        }
        // A loop's rounds after its first keep no state but the newest when nothing
        // else waits under them (a counted loop: each round's state is its own, and no
        // path waits to come back to it), so a loop of a million rounds holds two. A
        // round with another way waiting keeps its state: that way may come back to it.
        if let (Some(p), true) = (prev, older) {
            let mut k = node;
            let alone = loop {
                let nd = self.nodes[k].as_ref().expect("on the path");
                match nd.parent {
                    _ if nd.pending != 1 => break false,
                    Some(q) if k != p => k = q,
                    _ => break true,
                }
            };
            let mut k = node;
            if alone {
                loop {
                    let nd = self.nodes[k].as_mut().expect("on the path");
                    if let Some(s) = nd.state.take() {
                        self.held -= s.cost();
                    }
                    match nd.parent {
                        Some(q) if k != p => k = q,
                        _ => break,
                    }
                }
            }
        }
        // Nodes with no state and no other path under them are only links: the new node
        // takes the place of those just above it.
        let mut parent = Some(node);
        while let Some(k) = parent {
            let nd = self.nodes[k].as_ref().expect("on the path");
            if nd.state.is_some() || nd.pending != 1 {
                break;
            }
            parent = nd.parent;
            self.nodes[k] = None;
            self.free.push(k);
        }
        let node = self.new_node(Node { parent, pc, state: Some(st.pack()), pending: 1 })?;
        Ok(Some((node, true)))
    }

    /// Follow the paths from the entry for about `budget` units of work (an instruction
    /// followed, a state compared): `Ok(true)` once every path has ended, `Ok(false)`
    /// when the slice is spent (call again to go on).
    pub(super) fn run(&mut self, budget: u64) -> Result<bool, LoadError> {
        // The entry's node is the place of its first instruction already.
        let mut first = !self.started;
        if !self.started {
            self.started = true;
            let entry = State::entry().pack();
            let root = self.new_node(Node { parent: None, pc: 0, state: Some(entry.clone()), pending: 1 })?;
            self.hold(entry.cost())?;
            self.work.push((0, entry, root));
        }
        let units = |w: &Work| w.processed as u64 + w.compared as u64;
        let start = units(&self.stats);
        while let Some((pc0, packed, node0)) = self.work.pop() {
            self.held -= packed.cost();
            let (mut pc, mut st, mut node) = (pc0, packed.unpack(), node0);
            let mut since = core::mem::take(&mut self.paused_since);
            loop {
                self.at = pc;
                if units(&self.stats) - start >= budget {
                    // Before its place is looked at: going on from the top of the work
                    // is going on from here.
                    let packed = st.pack();
                    let cost = packed.cost();
                    self.work.push((pc, packed, node));
                    self.hold(cost)?;
                    self.paused_since = since;
                    return Ok(false);
                }
                if self.target[pc] != 0 && !first {
                    match self.place(pc, &st, node, since)? {
                        None => break,
                        Some((k, made)) => {
                            node = k;
                            if made {
                                since = 0;
                            }
                        }
                    }
                }
                first = false;
                since += 1;
                self.stats.processed += 1;
                if self.stats.processed > self.limits.processed {
                    return Err(too_complex());
                }
                let x = self.insns[pc];
                let (s, _) = self.succs[pc];
                if x.op == EXIT {
                    step(&x, &mut st, self.mem_len)?;
                    self.finish(node);
                    break;
                }
                if !(x.is_jump() && x.op != JA) {
                    step(&x, &mut st, self.mem_len)?;
                    pc = s[0];
                    continue;
                }
                match branch(&x, st)? {
                    (Some(t), Some(f)) => {
                        // The way further on is followed now, the other later: a loop's
                        // exit before its next round (the work waiting stays short), the
                        // far side of a diamond before its near one (which is then
                        // pruned where they meet).
                        let ((pc1, st1), (pc2, st2)) =
                            if s[0] > s[1] { ((s[0], t), (s[1], f)) } else { ((s[1], f), (s[0], t)) };
                        if let Some(nd) = self.nodes[node].as_mut() {
                            nd.pending += 1;
                        }
                        let packed = st2.pack();
                        let cost = packed.cost();
                        self.work.push((pc2, packed, node));
                        self.hold(cost)?;
                        if self.work.len() > MAX_PENDING {
                            return Err(refuse("eBPF: more paths waiting than the verifier follows (too complex)"));
                        }
                        pc = pc1;
                        st = st1;
                    }
                    (Some(t), None) => {
                        pc = s[0];
                        st = t;
                    }
                    (None, Some(f)) => {
                        pc = s[1];
                        st = f;
                    }
                    (None, None) => {
                        self.finish(node);
                        break;
                    }
                }
            }
        }
        Ok(true)
    }
}
