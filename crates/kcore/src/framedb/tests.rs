//! The frame mapping database's host tests: map, grant and demap chains, sparse frames and
//! limits, trees that shrink, and random sequences against a model.

use super::*;
use std::collections::{HashMap, HashSet};
use std::vec;

const F: u64 = 0x7000;

fn a(n: u64) -> u64 {
    n << 12
}

#[test]
fn map_grant_demap_chain() {
    let mut db = FrameDb::new(16).unwrap();
    let r = db.add_root(F, 0, a(1), 7).unwrap();
    let (b, rb) = db.map(F, r, 1, a(2), 3).unwrap();
    assert_eq!(rb, 3);
    let (c, rc) = db.map(F, b, 2, a(3), 7).unwrap();
    assert_eq!(rc, 3, "rights never grow");
    assert_eq!(db.find(F, c, 2, a(3)), Some(c));
    assert_eq!(db.find(F, c, 2, a(4)), None, "a slot kept for another mapping");
    assert_eq!(db.grant(F, b, 3, a(4)), Ok(3));
    assert_eq!(db.find(F, b, 1, a(2)), None, "the granter lost it");
    assert_eq!(db.find(F, b, 3, a(4)), Some(b), "same slot");
    let mut seen = vec![];
    db.demap(F, r, 2, false, |s, ad, ch| seen.push((s, ad, ch))).unwrap();
    assert_eq!(seen, [(3, a(4), Change::Reduced(1)), (2, a(3), Change::Reduced(1))]);
    assert_eq!(db.node(F, r).unwrap().rights, 7, "own access stays");
    seen.clear();
    db.demap(F, r, 7, false, |s, ad, ch| seen.push((s, ad, ch))).unwrap();
    assert_eq!(seen, [(2, a(3), Change::Removed), (3, a(4), Change::Removed)], "leaves first");
    assert_eq!(db.len_of(F), 0, "a lone root's tree is dropped");
    assert_eq!(db.trees(), 0);
}

#[test]
fn sparse_frames_and_limits() {
    let mut db = FrameDb::new(4).unwrap();
    let far = 0x1_0000_0000;
    let r = db.add_root(far, 0, a(1), 7).unwrap();
    let mut last = r;
    for d in 1..=MAX_DEPTH as u64 {
        last = db.map(far, last, 1, a(100 + d), 7).unwrap().0;
    }
    assert_eq!(db.node(far, last).unwrap().depth, MAX_DEPTH);
    assert_eq!(db.map(far, last, 1, a(999), 7), Err(DbError::Full), "no chain past MAX_DEPTH");
    assert!(db.derives_from(far, last, r));
    let mut gone = 0;
    let work = db.remove(far, r, |_, _, c| gone += (c == Change::Removed) as usize).unwrap();
    assert_eq!(gone, MAX_DEPTH as usize + 1);
    assert!(work >= gone && work <= 2 * (MAX_NODES + 1), "{work}");
    assert_eq!(db.trees(), 0);
    // As many mappings as a frame may have, then `Full`.
    let r = db.add_root(F, 0, a(1), 7).unwrap();
    for k in 1..MAX_NODES as u64 {
        db.map(F, r, 1, a(1000 + k), 5).unwrap();
    }
    assert_eq!(db.len_of(F), MAX_NODES);
    assert_eq!(db.map(F, r, 1, a(1), 5), Err(DbError::Full));
    let mut gone = 0;
    let work = db.demap(F, r, 7, false, |_, _, c| gone += (c == Change::Removed) as usize).unwrap();
    assert_eq!(gone, MAX_NODES - 1);
    assert!(work <= 2 * (MAX_NODES + 1), "the work of a whole tree is bounded: {work}");
    assert_eq!(db.trees(), 0);
}

#[test]
fn big_trees_shrink_and_nodes_move() {
    let mut db = FrameDb::new(16).unwrap();
    let r = db.add_root(F, 0, a(1), 7).unwrap();
    assert_eq!(db.cells_of(F), SMALL, "a pool block");
    let mut slots = vec![];
    for k in 0..3000u64 {
        slots.push((a(100 + k), db.map(F, r, 1, a(100 + k), 7).unwrap().0));
    }
    let big = db.cells_of(F);
    assert!(big > 3000 && big <= 2 * 3002, "capacity doubles: {big}");
    // Keep the last two mappings (the highest slots), take the rest away one by one.
    let mut moved = HashMap::new();
    for &(addr, slot) in &slots[..2998] {
        let slot = moved.get(&addr).copied().unwrap_or(slot);
        db.remove(F, slot, |sp, ad, c| {
            if let Change::Moved(to) = c {
                moved.insert(ad, to);
                assert_eq!(sp, 1);
            }
        })
        .unwrap();
    }
    assert_eq!(db.len_of(F), 3);
    assert_eq!(db.cells_of(F), SMALL, "back in a pool block");
    for &(addr, slot) in &slots[2998..] {
        let now = moved.get(&addr).copied().unwrap_or(slot);
        assert!(now < SMALL as Slot);
        assert_eq!(db.find(F, now, 1, addr), Some(now), "found where it moved");
        assert_eq!(db.find(F, slot, 1, addr), None, "not where it was");
    }
    assert!(db.derives_from(F, moved[&a(100 + 2999)], r) || db.derives_from(F, slots[2999].1, r));
    let mut n = 0;
    db.remove(F, r, |_, _, _| n += 1).unwrap();
    assert_eq!((n, db.trees()), (3, 0));
}

/// The model: explicit parent pointers, keyed by (space, addr).
#[derive(Clone, Copy, Debug)]
struct M {
    rights: u8,
    parent: Option<(u16, u64)>,
    slot: Slot,
}

fn subtree(model: &HashMap<(u16, u64), M>, at: (u16, u64)) -> Vec<(u16, u64)> {
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
    for seed in 1..=200u64 {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut rnd = |n: u64| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s % n
        };
        let mut db = FrameDb::new(8).unwrap();
        let fr = if seed % 2 == 0 { F } else { 0x9_0000_0000 };
        let mut model: HashMap<(u16, u64), M> = HashMap::new();
        for k in 0..3u64 {
            let slot = db.add_root(fr, 0, a(k), 7).unwrap();
            model.insert((0, a(k)), M { rights: 7, parent: None, slot });
        }
        for _ in 0..1000 {
            let holders: Vec<(u16, u64)> = model.keys().copied().collect();
            // Sometimes many destinations (trees grow past a pool block, and shrink).
            let to = (1 + rnd(5) as u16, a(rnd(if seed % 4 == 0 { 64 } else { 4 })));
            let pick = |r: u64| holders[r as usize % holders.len().max(1)];
            match rnd(6) {
                _ if holders.is_empty() => {
                    // Everything went: a holder the kernel gave the frame to passes
                    // it on again (a root is made only to pass it on).
                    let k = rnd(3);
                    let slot = db.add_root(fr, 0, a(k), 7).unwrap();
                    model.insert((0, a(k)), M { rights: 7, parent: None, slot });
                    let (c, r) = db.map(fr, slot, to.0, to.1, 7).unwrap();
                    model.insert(to, M { rights: r, parent: Some((0, a(k))), slot: c });
                }
                // A map item onto a holder (as the kernel's map_mem does it): a
                // page sent back onto a mapping it derives from changes nothing; any
                // other holder is demapped first, then receives it.
                5 => {
                    let from = pick(rnd(1 << 20));
                    let onto = pick(rnd(1 << 20));
                    let mut cur = Some(from);
                    let mut cycle = false;
                    while let Some(n) = cur {
                        cycle |= n == onto;
                        cur = model[&n].parent;
                    }
                    assert_eq!(db.derives_from(fr, model[&from].slot, model[&onto].slot), cycle, "seed {seed}");
                    if !cycle {
                        let mut dead: HashSet<(u16, u64)> = subtree(&model, onto).into_iter().collect();
                        dead.insert(onto);
                        let mut removed = HashSet::new();
                        let mut moved = vec![];
                        db.remove(fr, model[&onto].slot, |sp, ad, c| match c {
                            Change::Removed => assert!(removed.insert((sp, ad))),
                            Change::Moved(to) => moved.push(((sp, ad), to)),
                            Change::Reduced(_) => panic!("a removal reduces nothing"),
                        })
                        .unwrap();
                        assert_eq!(removed, dead);
                        assert!(!dead.contains(&from));
                        for d in &dead {
                            model.remove(d);
                        }
                        for (k, to) in moved {
                            model.get_mut(&k).expect("a node that moved lives").slot = to;
                        }
                        // Left a lone root: its tree went; it becomes a root again
                        // (as the kernel finds the source no longer a node).
                        if model.len() == 1 {
                            let m = model.get_mut(&from).unwrap();
                            assert!(m.parent.is_none() && db.find(fr, m.slot, from.0, from.1).is_none());
                            m.slot = db.add_root(fr, from.0, from.1, m.rights).unwrap();
                        }
                        let want = rnd(8) as u8;
                        let rights = want & model[&from].rights;
                        let (slot, got) = db.map(fr, model[&from].slot, onto.0, onto.1, want).unwrap();
                        assert_eq!(got, rights);
                        model.insert(onto, M { rights, parent: Some(from), slot });
                    }
                }
                0 | 1 => {
                    let from = pick(rnd(1 << 20));
                    if model.contains_key(&to) {
                        continue;
                    }
                    let want = rnd(8) as u8;
                    let rights = want & model[&from].rights;
                    let (slot, got) = db.map(fr, model[&from].slot, to.0, to.1, want).unwrap();
                    assert_eq!(got, rights);
                    model.insert(to, M { rights, parent: Some(from), slot });
                }
                2 => {
                    let from = pick(rnd(1 << 20));
                    if from == to || model.contains_key(&to) {
                        continue;
                    }
                    let m = model.remove(&from).unwrap();
                    assert_eq!(db.grant(fr, m.slot, to.0, to.1), Ok(m.rights));
                    model.insert(to, m);
                    for v in model.values_mut() {
                        if v.parent == Some(from) {
                            v.parent = Some(to);
                        }
                    }
                }
                _ => {
                    let at = pick(rnd(1 << 20));
                    let remove = rnd(8) as u8 | if rnd(2) == 0 { 7 } else { 0 };
                    let include_self = rnd(2) == 0;
                    let mut removed = HashSet::new();
                    let mut reduced = HashMap::new();
                    let mut moved = vec![];
                    db.demap(fr, model[&at].slot, remove, include_self, |sp, ad, c| match c {
                        Change::Removed => {
                            removed.insert((sp, ad));
                        }
                        Change::Reduced(r) => {
                            reduced.insert((sp, ad), r);
                        }
                        Change::Moved(to) => moved.push(((sp, ad), to)),
                    })
                    .unwrap();
                    let mut range = subtree(&model, at);
                    if include_self {
                        range.push(at);
                    }
                    let mut dead: HashSet<(u16, u64)> = HashSet::new();
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
                    assert_eq!(removed, dead, "seed {seed}: demap removed exactly the derived mappings");
                    for (k, r) in &reduced {
                        assert_eq!(model.get(k).map(|m| m.rights), Some(*r), "seed {seed}: reduced as the model");
                    }
                    for (k, to) in moved {
                        model.get_mut(&k).expect("a node that moved lives").slot = to;
                    }
                }
            }
            // A lone root is dropped: the model forgets that it was a node.
            if model.len() == 1 && model.values().all(|m| m.parent.is_none()) {
                model.clear();
            }
            // The database and the model agree on who holds what, with which
            // rights, below whom, in which slot.
            let got: HashSet<(u16, u64, u8, Slot)> =
                db.walk(fr).iter().map(|(sl, n, _)| (n.space, n.addr, n.rights, *sl)).collect();
            let want: HashSet<(u16, u64, u8, Slot)> = model.iter().map(|(k, v)| (k.0, k.1, v.rights, v.slot)).collect();
            assert_eq!(got, want, "seed {seed}");
            assert_eq!(db.len_of(fr), model.len());
            for (sl, n, parent) in db.walk(fr) {
                let m = model[&(n.space, n.addr)];
                assert_eq!(db.find(fr, sl, n.space, n.addr), Some(sl));
                match m.parent {
                    None => assert_eq!((parent, n.depth), (0, 0)),
                    Some(p) => {
                        assert_eq!(parent, model[&p].slot, "seed {seed}: parent");
                        assert_eq!(n.depth, db.node(fr, parent).unwrap().depth + 1);
                        assert_eq!(n.rights & !model[&p].rights, 0, "rights grew along a chain");
                    }
                }
            }
        }
    }
}
