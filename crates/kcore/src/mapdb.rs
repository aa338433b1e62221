//! The mapping database: for every resource (a physical frame, an I/O port, a kernel
//! object), the tree of who received it from whom, kept as a pre-order list with
//! depths (as Fiasco's mapdb does). A node's subtree is the run of following nodes
//! that are deeper than it, so a recursive demap is one linear scan and a grant is
//! an in-place rename.
//!
//! Nodes are named by (space, address): for memory the virtual page address, for
//! I/O ports the port, for capabilities the slot. Rights are a small bit set; a
//! child never has rights its parent lacks.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node<S> {
    pub space: S,
    pub addr: u64,
    pub depth: u32,
    pub rights: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapDbError {
    /// The destination already holds this resource.
    AlreadyThere,
    /// The source does not hold the resource (and may not become a root).
    NotHeld,
    /// The grant would move a node into its own subtree.
    Cycle,
}

/// What a demap did to one node (for the caller to update page tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Removed,
    Reduced(u8),
}

pub struct MapDb<R: Ord + Copy, S: Eq + Copy> {
    trees: BTreeMap<R, Vec<Node<S>>>,
}

impl<R: Ord + Copy, S: Eq + Copy> Default for MapDb<R, S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: Ord + Copy, S: Eq + Copy> MapDb<R, S> {
    pub const fn new() -> Self {
        MapDb { trees: BTreeMap::new() }
    }

    fn pos(&self, r: R, space: S, addr: u64) -> Option<usize> {
        self.trees.get(&r)?.iter().position(|n| n.space == space && n.addr == addr)
    }

    pub fn contains(&self, r: R, space: S, addr: u64) -> bool {
        self.pos(r, space, addr).is_some()
    }

    pub fn rights(&self, r: R, space: S, addr: u64) -> Option<u8> {
        let i = self.pos(r, space, addr)?;
        Some(self.trees[&r][i].rights)
    }

    /// Whether `node` is `anc` or derived from it (in its subtree). False when either
    /// does not hold `r`.
    pub fn derives_from(&self, r: R, node: (S, u64), anc: (S, u64)) -> bool {
        let Some(i) = self.pos(r, anc.0, anc.1) else { return false };
        let t = &self.trees[&r];
        let is = |n: &Node<S>| n.space == node.0 && n.addr == node.1;
        // One pass over `anc` and its subtree (usually nothing: a leaf).
        is(&t[i]) || t[i + 1..].iter().take_while(|n| n.depth > t[i].depth).any(is)
    }

    /// Nodes of one resource, in pre-order.
    pub fn tree(&self, r: R) -> &[Node<S>] {
        self.trees.get(&r).map_or(&[], |v| v.as_slice())
    }

    /// Number of nodes over all resources.
    pub fn len(&self) -> usize {
        self.trees.values().map(|v| v.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.trees.is_empty()
    }

    /// Make (space, addr) a root holder of `r` (the kernel's initial hand-out).
    pub fn add_root(&mut self, r: R, space: S, addr: u64, rights: u8) -> Result<(), MapDbError> {
        if self.contains(r, space, addr) {
            return Err(MapDbError::AlreadyThere);
        }
        self.trees.entry(r).or_default().push(Node { space, addr, depth: 0, rights });
        Ok(())
    }

    /// `to` receives `r` from `from` with `rights & from's rights`; returns those rights.
    pub fn map(&mut self, r: R, from: (S, u64), to: (S, u64), rights: u8) -> Result<u8, MapDbError> {
        if self.contains(r, to.0, to.1) {
            return Err(MapDbError::AlreadyThere);
        }
        let i = self.pos(r, from.0, from.1).ok_or(MapDbError::NotHeld)?;
        let t = self.trees.get_mut(&r).expect("tree of a held resource");
        let parent = t[i];
        let rights = rights & parent.rights;
        t.insert(i + 1, Node { space: to.0, addr: to.1, depth: parent.depth + 1, rights });
        Ok(rights)
    }

    /// `to` takes the place of `from` (same rights, same children); `from` loses it.
    pub fn grant(&mut self, r: R, from: (S, u64), to: (S, u64)) -> Result<u8, MapDbError> {
        if from == to {
            return self.rights(r, from.0, from.1).ok_or(MapDbError::NotHeld);
        }
        if self.contains(r, to.0, to.1) {
            return Err(MapDbError::AlreadyThere);
        }
        let i = self.pos(r, from.0, from.1).ok_or(MapDbError::NotHeld)?;
        let t = self.trees.get_mut(&r).expect("tree of a held resource");
        t[i].space = to.0;
        t[i].addr = to.1;
        Ok(t[i].rights)
    }

    /// Take `remove` rights away from everything derived from `at` (and from `at`
    /// itself when `include_self`). A node left with no rights is removed together
    /// with its whole subtree. `f` is told of each change, parents before children.
    pub fn demap(
        &mut self,
        r: R,
        at: (S, u64),
        remove: u8,
        include_self: bool,
        mut f: impl FnMut(S, u64, Change),
    ) -> Result<(), MapDbError> {
        let i = self.pos(r, at.0, at.1).ok_or(MapDbError::NotHeld)?;
        let t = self.trees.get_mut(&r).expect("tree of a held resource");
        let depth = t[i].depth;
        let mut end = i + 1;
        while end < t.len() && t[end].depth > depth {
            end += 1;
        }
        let start = if include_self { i } else { i + 1 };
        // Walk the range; when a node loses all rights, its subtree goes too.
        let mut keep: Vec<Node<S>> = Vec::new();
        let mut cut_depth: Option<u32> = None;
        for n in &t[start..end] {
            if let Some(d) = cut_depth {
                if n.depth > d {
                    f(n.space, n.addr, Change::Removed);
                    continue;
                }
                cut_depth = None;
            }
            let left = n.rights & !remove;
            if left == 0 {
                f(n.space, n.addr, Change::Removed);
                cut_depth = Some(n.depth);
            } else {
                if left != n.rights {
                    f(n.space, n.addr, Change::Reduced(left));
                }
                keep.push(Node { rights: left, ..*n });
            }
        }
        t.splice(start..end, keep);
        // A removed node's surviving siblings keep their depths; a kept child of a
        // reduced node is still deeper than it, so the pre-order shape holds.
        if t.is_empty() {
            self.trees.remove(&r);
        }
        Ok(())
    }

    /// Remove only (space, addr); what was derived from it now hangs below its parent
    /// (or becomes a root). Used when a holder drops its own copy without revoking.
    pub fn remove_node(&mut self, r: R, at: (S, u64)) -> Result<(), MapDbError> {
        let i = self.pos(r, at.0, at.1).ok_or(MapDbError::NotHeld)?;
        let t = self.trees.get_mut(&r).expect("tree of a held resource");
        let depth = t[i].depth;
        let mut j = i + 1;
        while j < t.len() && t[j].depth > depth {
            t[j].depth -= 1;
            j += 1;
        }
        t.remove(i);
        if t.is_empty() {
            self.trees.remove(&r);
        }
        Ok(())
    }

    /// Remove (space, addr) and everything derived from it.
    pub fn remove(&mut self, r: R, at: (S, u64), f: impl FnMut(S, u64, Change)) -> Result<(), MapDbError> {
        self.demap(r, at, u8::MAX, true, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};
    use std::vec;

    type Db = MapDb<u32, u8>;

    #[test]
    fn map_grant_demap_chain() {
        let mut db = Db::new();
        db.add_root(7, 0, 0x1000, 7).unwrap();
        assert_eq!(db.map(7, (0, 0x1000), (1, 0x2000), 3), Ok(3));
        assert_eq!(db.map(7, (1, 0x2000), (2, 0x3000), 7), Ok(3), "rights never grow");
        assert_eq!(db.map(7, (1, 0x2000), (2, 0x3000), 1), Err(MapDbError::AlreadyThere));
        assert_eq!(db.map(7, (9, 0), (3, 0), 1), Err(MapDbError::NotHeld));
        // Grant B's page to D: D takes B's place, C stays below it.
        assert_eq!(db.grant(7, (1, 0x2000), (3, 0x4000)), Ok(3));
        assert!(!db.contains(7, 1, 0x2000));
        let mut seen = vec![];
        db.demap(7, (0, 0x1000), 2, false, |s, a, c| seen.push((s, a, c))).unwrap();
        assert_eq!(seen, [(3, 0x4000, Change::Reduced(1)), (2, 0x3000, Change::Reduced(1))]);
        assert_eq!(db.rights(7, 0, 0x1000), Some(7), "own access stays");
        seen.clear();
        db.demap(7, (0, 0x1000), 7, false, |s, a, c| seen.push((s, a, c))).unwrap();
        assert_eq!(seen, [(3, 0x4000, Change::Removed), (2, 0x3000, Change::Removed)]);
        assert_eq!(db.tree(7).len(), 1);
        db.remove(7, (0, 0x1000), |_, _, _| {}).unwrap();
        assert!(db.is_empty());
    }

    #[test]
    fn remove_node_reparents() {
        let mut db = Db::new();
        db.add_root(1, 0, 0, 7).unwrap();
        db.map(1, (0, 0), (1, 0), 7).unwrap();
        db.map(1, (1, 0), (2, 0), 3).unwrap();
        db.map(1, (2, 0), (3, 0), 1).unwrap();
        db.remove_node(1, (1, 0)).unwrap();
        let t: Vec<(u8, u32)> = db.tree(1).iter().map(|n| (n.space, n.depth)).collect();
        assert_eq!(t, [(0, 0), (2, 1), (3, 2)]);
        let mut gone = vec![];
        db.demap(1, (0, 0), 7, false, |s, _, _| gone.push(s)).unwrap();
        assert_eq!(gone, [2, 3], "re-parented nodes are still revoked by the root");
    }

    #[test]
    fn cycles_are_seen() {
        let mut db = Db::new();
        db.add_root(1, 0, 0, 7).unwrap();
        db.map(1, (0, 0), (1, 0), 7).unwrap();
        db.map(1, (1, 0), (2, 0), 7).unwrap();
        db.map(1, (0, 0), (3, 0), 7).unwrap();
        assert!(db.derives_from(1, (2, 0), (1, 0)), "C got it from B");
        assert!(db.derives_from(1, (2, 0), (0, 0)), "and so from the root");
        assert!(db.derives_from(1, (1, 0), (1, 0)), "a node derives from itself");
        assert!(!db.derives_from(1, (1, 0), (2, 0)), "B does not derive from C");
        assert!(!db.derives_from(1, (3, 0), (1, 0)), "a sibling's subtree is not B's");
        assert!(!db.derives_from(1, (2, 0), (3, 0)));
        assert!(!db.derives_from(1, (9, 0), (0, 0)), "a non-holder derives from nothing");
        assert!(!db.derives_from(2, (2, 0), (0, 0)), "another resource");
    }

    /// The model: explicit parent pointers.
    #[derive(Clone, Copy, Debug)]
    struct M {
        rights: u8,
        parent: Option<(u8, u64)>,
    }

    fn subtree(model: &HashMap<(u8, u64), M>, at: (u8, u64)) -> Vec<(u8, u64)> {
        let mut out = vec![];
        let mut stack = vec![at];
        while let Some(n) = stack.pop() {
            for (k, v) in model.iter() {
                if v.parent == Some(n) {
                    out.push(*k);
                    stack.push(*k);
                }
            }
        }
        out
    }

    #[test]
    fn random_sequences_against_model() {
        for seed in 1..=100u64 {
            let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut rnd = |n: u64| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s % n
            };
            let mut db = Db::new();
            // One resource per test run; roots held by space 0.
            let r = 1u32;
            let mut model: HashMap<(u8, u64), M> = HashMap::new();
            for a in 0..3u64 {
                db.add_root(r, 0, a, 7).unwrap();
                model.insert((0, a), M { rights: 7, parent: None });
            }
            for _ in 0..1000 {
                let holders: Vec<(u8, u64)> = model.keys().copied().collect();
                let to = (1 + rnd(5) as u8, rnd(4));
                match rnd(5) {
                    // An IPC map item onto a holder (as the kernel's map_mem does it):
                    // a page sent back onto a mapping it derives from changes nothing;
                    // any other holder is demapped first, then receives it.
                    4 if !holders.is_empty() => {
                        let from = holders[rnd(holders.len() as u64) as usize];
                        let onto = holders[rnd(holders.len() as u64) as usize];
                        let mut cur = Some(from);
                        let mut cycle = false;
                        while let Some(n) = cur {
                            cycle |= n == onto;
                            cur = model[&n].parent;
                        }
                        assert_eq!(
                            db.derives_from(r, from, onto),
                            cycle,
                            "seed {seed}: derives_from agrees with the parent chain"
                        );
                        if !cycle {
                            let mut dead: HashSet<(u8, u64)> = subtree(&model, onto).into_iter().collect();
                            dead.insert(onto);
                            let mut removed = HashSet::new();
                            db.remove(r, onto, |sp, a, _| {
                                removed.insert((sp, a));
                            })
                            .unwrap();
                            assert_eq!(removed, dead);
                            assert!(!dead.contains(&from), "the source survives the demap of its destination");
                            for d in &dead {
                                model.remove(d);
                            }
                            let want = rnd(8) as u8;
                            let rights = want & model[&from].rights;
                            assert_eq!(db.map(r, from, onto, want), Ok(rights));
                            model.insert(onto, M { rights, parent: Some(from) });
                        }
                    }
                    0 | 1 if !holders.is_empty() => {
                        let from = holders[rnd(holders.len() as u64) as usize];
                        let want = rnd(8) as u8;
                        let got = db.map(r, from, to, want);
                        if model.contains_key(&to) {
                            assert_eq!(got, Err(MapDbError::AlreadyThere));
                        } else {
                            let rights = want & model[&from].rights;
                            assert_eq!(got, Ok(rights));
                            model.insert(to, M { rights, parent: Some(from) });
                        }
                    }
                    2 if !holders.is_empty() => {
                        let from = holders[rnd(holders.len() as u64) as usize];
                        let got = db.grant(r, from, to);
                        if from == to {
                            assert!(got.is_ok());
                        } else if model.contains_key(&to) {
                            assert_eq!(got, Err(MapDbError::AlreadyThere));
                        } else {
                            assert!(got.is_ok());
                            let m = model.remove(&from).unwrap();
                            model.insert(to, m);
                            for v in model.values_mut() {
                                if v.parent == Some(from) {
                                    v.parent = Some(to);
                                }
                            }
                        }
                    }
                    _ if !holders.is_empty() => {
                        let at = holders[rnd(holders.len() as u64) as usize];
                        let remove = rnd(8) as u8 | if rnd(2) == 0 { 7 } else { 0 };
                        let include_self = rnd(2) == 0;
                        let mut removed = HashSet::new();
                        db.demap(r, at, remove, include_self, |sp, a, c| {
                            if c == Change::Removed {
                                removed.insert((sp, a));
                            }
                        })
                        .unwrap();
                        // Model: reduce rights over the range; remove what reaches zero
                        // together with its descendants.
                        let mut range = subtree(&model, at);
                        if include_self {
                            range.push(at);
                        }
                        let mut dead: HashSet<(u8, u64)> = HashSet::new();
                        for n in &range {
                            let m = model.get_mut(n).unwrap();
                            m.rights &= !remove;
                            if m.rights == 0 {
                                dead.insert(*n);
                            }
                        }
                        for d in dead.clone() {
                            for x in subtree(&model, d) {
                                dead.insert(x);
                            }
                        }
                        for d in &dead {
                            model.remove(d);
                        }
                        assert_eq!(removed, dead, "demap removed exactly the derived mappings");
                    }
                    _ => {}
                }
                // The database and the model agree on who holds what with which rights.
                let got: HashSet<(u8, u64, u8)> = db.tree(r).iter().map(|n| (n.space, n.addr, n.rights)).collect();
                let want: HashSet<(u8, u64, u8)> = model.iter().map(|(k, v)| (k.0, k.1, v.rights)).collect();
                assert_eq!(got, want, "seed {seed}");
                // Nobody holds what it could not have received: every chain ends at a
                // root of space 0, and rights only shrink along it.
                for (k, v) in &model {
                    let mut cur = *k;
                    let mut rights = v.rights;
                    let mut steps = 0;
                    while let Some(p) = model[&cur].parent {
                        let pr = model.get(&p).expect("parent of a live node is live").rights;
                        assert_eq!(rights & !pr, 0, "rights grew along a chain");
                        rights = pr;
                        cur = p;
                        steps += 1;
                        assert!(steps < 10_000);
                    }
                    assert!(cur.1 < 3 || model[&cur].parent.is_none());
                }
                // Roots come only from add_root: map and grant never create one.
                let roots = model.values().filter(|m| m.parent.is_none()).count();
                assert!(roots <= 3);
                assert_eq!(db.tree(r).iter().filter(|n| n.depth == 0).count(), roots);
                // Pre-order shape: depth rises by at most one.
                let t = db.tree(r);
                for w in t.windows(2) {
                    assert!(w[1].depth <= w[0].depth + 1);
                }
                assert!(t.first().is_none_or(|n| n.depth == 0));
            }
        }
    }
}
