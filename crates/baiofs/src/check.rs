//! The look at a whole filesystem that a mount, `examine`, `check` and `repair` share
//! (`Fs::scan`): every inconsistency a mount refuses, with the fix `repair` makes for
//! it (`Fix`), and every trace of an interrupted update (unnamed inodes, a stale
//! bitmap, renames under way: `Pending`).

use super::layout::{decode_entry, decode_entry_flagged};
use super::{Dev, Fs, Inode, Kind, BLOCK, DIRENT, ROOT};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

/// How `repair` gets rid of one problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fix {
    ClearInode(u32),
    CutSize(u32, u64),
    /// Directory, entry index.
    ClearEntry(u32, u64),
    EmptyRoot,
}

/// A rename's new name found pending (written, not yet made final): the rename
/// committed when no other entry names its inode any more (the old name was cleared),
/// and is then finished (an entry of the same name it replaces cleared, the flag
/// cleared); else it is undone (the pending entry cleared).
#[derive(Clone, Debug)]
pub(crate) struct Pending {
    pub(crate) dir: u32,
    pub(crate) at: u64,
    pub(crate) ino: u32,
    pub(crate) kind: Kind,
    pub(crate) name: String,
    pub(crate) commit: bool,
    /// (Committed) the entry of the same name in `dir` that the rename replaces.
    pub(crate) replaced: Option<u64>,
}

#[derive(Default)]
pub(crate) struct Scan {
    pub(crate) problems: Vec<(String, Fix)>,
    pub(crate) unfinished: Vec<String>,
    pub(crate) orphans: Vec<u32>,
    /// Interrupted renames, to finish or undo (before the orphans are freed).
    pub(crate) renames: Vec<Pending>,
    /// Per block: used by metadata or a named inode.
    pub(crate) used: Vec<bool>,
}

impl<D: Dev> Fs<D> {
    /// Every inconsistency, and then every trace of an interrupted update, one
    /// sentence each (empty: consistent and clean).
    pub fn check(&mut self) -> Vec<String> {
        let s = self.scan();
        s.problems.into_iter().map(|p| p.0).chain(s.unfinished).collect()
    }

    /// Look at everything: what a mount must refuse (with the fix `repair` makes), and
    /// what an interrupted update left.
    pub(crate) fn scan(&mut self) -> Scan {
        let g = self.geo;
        let mut s = Scan { used: vec![false; g.blocks as usize], ..Scan::default() };
        let nodes = self.inodes.clone();
        if nodes[0].kind != 0 || nodes[0].damaged {
            s.problems.push(("inode 0 is in use".to_string(), Fix::ClearInode(0)));
        }
        if nodes[ROOT as usize].kind != Kind::Dir as u16 || nodes[ROOT as usize].damaged {
            s.problems.push(("the root inode is not a sound directory".to_string(), Fix::EmptyRoot));
            return s;
        }
        for (ino, n) in nodes.iter().enumerate().skip(1) {
            let ino32 = ino as u32;
            if n.damaged {
                let what = if n.kind == 0 { "a free inode that is not zeroed" } else { "checksum mismatch" };
                s.problems.push((format!("inode {ino}: {what}"), Fix::ClearInode(ino32)));
                continue;
            }
            if n.kind == 0 {
                continue;
            }
            if n.kind != Kind::File as u16 && n.kind != Kind::Dir as u16 {
                s.problems.push((format!("inode {ino} has unknown kind {}", n.kind), Fix::ClearInode(ino32)));
                continue;
            }
            if let Some((a, l)) = n
                .ext
                .iter()
                .map(|(a, l)| (*a as u64, *l as u64))
                .find(|(a, l)| *l > 0 && (*a < g.data_start || a + l > g.blocks))
            {
                s.problems.push((
                    format!("inode {ino}: extent {a}+{l} lies outside the data blocks"),
                    Fix::ClearInode(ino32),
                ));
                continue;
            }
            let cap = n.blocks() * BLOCK as u64;
            if n.size > cap {
                s.problems.push((
                    format!("inode {ino}: size {} is past its {} blocks", n.size, n.blocks()),
                    Fix::CutSize(ino32, cap),
                ));
            } else if n.kind == Kind::Dir as u16 && n.size % DIRENT as u64 != 0 {
                s.problems.push((
                    format!("directory {ino}: size {} is not a whole number of entries", n.size),
                    Fix::CutSize(ino32, n.size / DIRENT as u64 * DIRENT as u64),
                ));
            }
        }
        if !s.problems.is_empty() {
            return s;
        }
        s.renames = self.pending_renames(&nodes);
        let mut skip: Vec<(u32, u64)> = Vec::new();
        for r in &s.renames {
            let (d, i, name) = (r.dir, r.at, &r.name);
            if r.commit {
                s.unfinished.push(format!("directory {d}, entry {i}: an interrupted rename to `{name}`: finished"));
                skip.extend(r.replaced.map(|at| (d, at)));
            } else {
                s.unfinished.push(format!("directory {d}, entry {i}: an interrupted rename to `{name}`: undone"));
                skip.push((d, i));
            }
        }
        // Walk the tree: every entry sound and naming a live inode of its kind, once.
        let mut named = vec![false; nodes.len()];
        named[ROOT as usize] = true;
        let mut dirs = vec![ROOT];
        let mut owner: BTreeMap<u64, u32> = BTreeMap::new();
        while let Some(d) = dirs.pop() {
            for (a, l) in nodes[d as usize].ext {
                for b in a as u64..a as u64 + l as u64 {
                    if let Some(o) = owner.insert(b, d) {
                        s.problems
                            .push((format!("block {b} belongs to inodes {o} and {d}"), Fix::ClearInode(d.max(o))));
                    }
                }
            }
            let mut raw = vec![0u8; nodes[d as usize].size as usize];
            if self.file_read_meta(d, &mut raw).is_err() {
                s.problems.push((
                    format!("directory {d} cannot be read"),
                    if d == ROOT { Fix::EmptyRoot } else { Fix::ClearInode(d) },
                ));
                continue;
            }
            let mut names: Vec<String> = Vec::new();
            for (i, e) in raw.chunks(DIRENT).enumerate() {
                if skip.contains(&(d, i as u64)) {
                    continue;
                }
                let clear = Fix::ClearEntry(d, i as u64);
                let (ino, kind, name) = match decode_entry(e) {
                    Ok(None) => continue,
                    Ok(Some(x)) => x,
                    Err(why) => {
                        s.problems.push((format!("directory {d}, entry {i}: {why}"), clear));
                        continue;
                    }
                };
                if ino as u64 >= g.inodes || ino == ROOT {
                    s.problems.push((
                        format!("directory {d}: entry `{name}` names inode {ino}: out of range, or the root"),
                        clear,
                    ));
                } else if nodes[ino as usize].kind != kind as u16 {
                    s.problems
                        .push((format!("directory {d}: entry `{name}` disagrees with inode {ino} on its kind"), clear));
                } else if named[ino as usize] {
                    s.problems.push((format!("inode {ino} is named twice"), clear));
                } else if names.contains(&name) {
                    s.problems.push((format!("directory {d}: the name `{name}` is there twice"), clear));
                } else {
                    named[ino as usize] = true;
                    names.push(name);
                    if kind == Kind::Dir {
                        dirs.push(ino);
                    } else {
                        for (a, l) in nodes[ino as usize].ext {
                            for b in a as u64..a as u64 + l as u64 {
                                if let Some(o) = owner.insert(b, ino) {
                                    s.problems.push((
                                        format!("block {b} belongs to inodes {o} and {ino}"),
                                        Fix::ClearInode(ino.max(o)),
                                    ));
                                    break;
                                }
                            }
                        }
                    }
                }
            }
        }
        if s.problems.len() > 1 && s.problems.iter().any(|p| matches!(p.1, Fix::EmptyRoot)) {
            s.problems.retain(|p| matches!(p.1, Fix::EmptyRoot));
        }
        // What an interrupted update leaves: unnamed inodes, a stale bitmap.
        for (ino, n) in nodes.iter().enumerate() {
            if n.kind != 0 && !named[ino] {
                s.unfinished.push(format!("inode {ino} is in use but no directory names it: freed"));
                s.orphans.push(ino as u32);
            }
        }
        for b in 0..g.blocks {
            s.used[b as usize] = b < g.data_start || owner.contains_key(&b);
        }
        let stale = (0..g.blocks).filter(|b| self.bit(*b) != s.used[*b as usize]).count();
        if stale > 0 {
            s.unfinished.push(format!("the bitmap disagrees with the inodes on {stale} blocks: rebuilt"));
        }
        s
    }

    /// The pending entries (renames under way when the power went) in the tree, and
    /// whether each committed: its old name is gone when no entry that is not pending
    /// names its inode.
    fn pending_renames(&mut self, nodes: &[Inode]) -> Vec<Pending> {
        let mut out = Vec::new();
        let mut named = vec![false; nodes.len()];
        let mut seen = vec![false; nodes.len()];
        // Per directory: (index, inode, name, pending).
        let mut listing: BTreeMap<u32, Vec<(u64, u32, String, bool)>> = BTreeMap::new();
        let mut dirs = vec![ROOT];
        seen[ROOT as usize] = true;
        while let Some(d) = dirs.pop() {
            let mut raw = vec![0u8; nodes[d as usize].size as usize];
            if self.file_read_meta(d, &mut raw).is_err() {
                continue;
            }
            let l = listing.entry(d).or_default();
            for (i, e) in raw.chunks(DIRENT).enumerate() {
                let Ok(Some((ino, kind, name, pending))) = decode_entry_flagged(e) else { continue };
                if ino as usize >= nodes.len() || ino == ROOT {
                    continue;
                }
                if pending {
                    out.push(Pending {
                        dir: d,
                        at: i as u64,
                        ino,
                        kind,
                        name: name.clone(),
                        commit: false,
                        replaced: None,
                    });
                } else {
                    named[ino as usize] = true;
                }
                if kind == Kind::Dir && nodes[ino as usize].kind == Kind::Dir as u16 && !seen[ino as usize] {
                    seen[ino as usize] = true;
                    dirs.push(ino);
                }
                l.push((i as u64, ino, name, pending));
            }
        }
        for p in &mut out {
            p.commit = !named[p.ino as usize];
            if p.commit {
                p.replaced = listing[&p.dir].iter().find(|e| !e.3 && e.2 == p.name && e.1 != p.ino).map(|e| e.0);
            }
        }
        out
    }
}
