//! The mapping database of memory: for every physical frame, the tree of who received
//! it from whom (a forest: a frame may have several holders the kernel gave it to).
//!
//! Each frame's tree is an array of 16-byte cells: cell 0 is the tree's header, the
//! others are nodes or free. A node's cell number (its *slot*) is kept in the
//! page-table entry of the mapping the node stands for (`pagetable::with_slot`), so the
//! kernel finds a node from its mapping at once — no search, however many mappings the
//! frame has. Nodes are linked (parent, first child, siblings), so adding a child,
//! granting a node and taking a leaf away are a few stores; a demap walks exactly the
//! subtree it changes.
//!
//! Bounds (a hostile program may push every count): a frame has at most `MAX_NODES`
//! mappings (the slot must fit in the page-table entry's free bits), and a chain of
//! mappings is at most `MAX_DEPTH` deep (`derives_from` walks up it); past either,
//! `map` answers `Full`. So the work of any operation on one frame's tree is bounded
//! (a demap of a whole tree visits at most `MAX_NODES` nodes).
//!
//! Memory. A table of 4 bytes per frame of RAM says where each tree is. A tree of up
//! to 3 nodes (a page mapped into a memory server and on into a program: sigma0's root,
//! the server's node, the program's) is a block of 4 cells (64 bytes) from a pool of
//! such blocks: no allocation per tree once the pool has grown, and a free block is
//! taken again at once. A larger tree is an array of its own whose capacity doubles —
//! at most 32n bytes for n nodes — and shrinks when three quarters of it are free,
//! to a block of the pool again at 3 nodes or fewer: its nodes move to low slots
//! (`Change::Moved` tells the caller the new slot for the mapping's page table), so a
//! tree that once had thousands of mappings does not keep their memory. Every node
//! but a root (which the kernel made) is charged 48 bytes to the task it is mapped into
//! (`abi::kquota::NODES_PER_PAGE`): a block of 64 bytes holds at least one charged
//! node (the kernel keeps the rest: 16 bytes a frame, with the table's 4), a larger
//! array at least a quarter of its cells less one. A tree whose last mapping derived
//! from a root goes (leaving the lone root) is dropped: the root's holder still maps
//! the frame, and is a root again when it passes it on.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// A node's slot in its frame's tree (1 ..= `MAX_NODES`; 0 names no node).
pub type Slot = u16;

/// The most mappings one frame may have (slots fit in 13 bits of a page-table entry).
pub const MAX_NODES: usize = (1 << 13) - 1;
/// The longest chain of mappings of one frame (a root is at depth 0).
pub const MAX_DEPTH: u8 = 64;

/// What a demap did to one node (for the caller to update page tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Removed,
    Reduced(u8),
    /// The node lives on in another slot (its tree was made smaller).
    Moved(Slot),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbError {
    /// The node named is not in the tree (or names another mapping).
    NotHeld,
    /// The frame has `MAX_NODES` mappings already, or the chain would pass `MAX_DEPTH`.
    Full,
    /// No kernel memory for the tree.
    NoMemory,
}

/// A node as the caller sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    pub space: u16,
    /// The page address (page-aligned).
    pub addr: u64,
    pub rights: u8,
    pub depth: u8,
}

/// One cell: a node, a free cell or the header.
///
/// Node: `a` = page number (bits 0..36) | rights (36..39) | depth (40..48) | space
/// (48..64); `b` = parent | first child << 16 | next sibling << 32 | previous sibling
/// << 48 (0: none). Free: `a` = `FREE`, `b` = the next free slot. Header: `a` = 0,
/// `b` = live nodes | first free << 16 | first root << 32.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cell {
    a: u64,
    b: u64,
}

const FREE: u64 = u64::MAX;
const PAGE_BITS: u64 = (1 << 36) - 1;

impl Cell {
    fn node(n: Node) -> Cell {
        Cell {
            a: (n.addr >> 12) & PAGE_BITS
                | (n.rights as u64 & 7) << 36
                | (n.depth as u64) << 40
                | (n.space as u64) << 48,
            b: 0,
        }
    }
    fn view(&self) -> Node {
        Node {
            space: (self.a >> 48) as u16,
            addr: (self.a & PAGE_BITS) << 12,
            rights: ((self.a >> 36) & 7) as u8,
            depth: (self.a >> 40) as u8,
        }
    }
    fn link(&self, i: u32) -> Slot {
        (self.b >> (16 * i)) as Slot
    }
    fn set_link(&mut self, i: u32, s: Slot) {
        self.b = (self.b & !(0xffff << (16 * i))) | (s as u64) << (16 * i);
    }
    fn set_rights(&mut self, r: u8) {
        self.a = (self.a & !(7 << 36)) | (r as u64 & 7) << 36;
    }
    fn set_place(&mut self, space: u16, addr: u64) {
        self.a = (self.a & !(PAGE_BITS | 0xffff << 48)) | (addr >> 12) & PAGE_BITS | (space as u64) << 48;
    }
}

// Link fields of a node.
const PARENT: u32 = 0;
const CHILD: u32 = 1;
const NEXT: u32 = 2;
const PREV: u32 = 3;
// Header fields.
const LIVE: u32 = 0;
const FREE_HEAD: u32 = 1;
const ROOTS: u32 = 2;

/// Cells of a pool block (a tree of up to 3 nodes).
const SMALL: usize = 4;
/// Pool blocks per chunk (64 KiB).
const CHUNK: usize = 1024;
/// The table's mark of a tree kept in `big` (else the value is a pool block, plus 1).
const BIG: u32 = 1 << 31;

/// Empty cells `from .. cells.len()`, chained in order, after the cells before.
fn chain_free(cells: &mut [Cell], from: usize) {
    let len = cells.len();
    for (k, c) in cells.iter_mut().enumerate().skip(from) {
        *c = Cell { a: FREE, b: if k + 1 < len { (k + 1) as u64 } else { 0 } };
    }
}

/// One frame's tree.
struct Tree<'a>(&'a mut [Cell]);

impl Tree<'_> {
    fn live(&self) -> usize {
        self.0[0].link(LIVE) as usize
    }
    fn is_node(&self, s: Slot) -> bool {
        s != 0 && (s as usize) < self.0.len() && self.0[s as usize].a != FREE
    }
    fn get(&self, s: Slot, i: u32) -> Slot {
        self.0[s as usize].link(i)
    }
    fn set(&mut self, s: Slot, i: u32, v: Slot) {
        self.0[s as usize].set_link(i, v);
    }

    /// A free slot holding `n` unlinked; None when every cell is taken.
    fn alloc(&mut self, n: Node) -> Option<Slot> {
        let s = self.get(0, FREE_HEAD);
        if s == 0 {
            return None;
        }
        let next = self.0[s as usize].b as Slot;
        self.set(0, FREE_HEAD, next);
        self.0[s as usize] = Cell::node(n);
        let live = self.live() as Slot + 1;
        self.set(0, LIVE, live);
        Some(s)
    }

    fn free(&mut self, s: Slot) {
        let head = self.get(0, FREE_HEAD);
        self.0[s as usize] = Cell { a: FREE, b: head as u64 };
        self.set(0, FREE_HEAD, s);
        let live = self.live() as Slot - 1;
        self.set(0, LIVE, live);
    }

    /// Put `s` first among the children of `parent` (0: among the roots).
    fn link_under(&mut self, s: Slot, parent: Slot) {
        let (owner, field) = if parent == 0 { (0, ROOTS) } else { (parent, CHILD) };
        let first = self.get(owner, field);
        self.set(s, PARENT, parent);
        self.set(s, NEXT, first);
        self.set(s, PREV, 0);
        if first != 0 {
            self.set(first, PREV, s);
        }
        self.set(owner, field, s);
    }

    /// Take `s` out of its parent's list of children (its own children stay with it).
    fn unlink(&mut self, s: Slot) {
        let (p, next, prev) = (self.get(s, PARENT), self.get(s, NEXT), self.get(s, PREV));
        if prev != 0 {
            self.set(prev, NEXT, next);
        } else if p != 0 {
            self.set(p, CHILD, next);
        } else {
            self.set(0, ROOTS, next);
        }
        if next != 0 {
            self.set(next, PREV, prev);
        }
    }

    /// Remove `top` and everything below it, leaves first, telling `f` of each.
    fn remove_subtree(&mut self, top: Slot, f: &mut impl FnMut(u16, u64, Change)) -> usize {
        self.unlink(top);
        let mut n = 0;
        let mut cur = top;
        loop {
            while self.get(cur, CHILD) != 0 {
                cur = self.get(cur, CHILD);
            }
            let node = self.0[cur as usize].view();
            f(node.space, node.addr, Change::Removed);
            n += 1;
            if cur == top {
                self.free(cur);
                return n;
            }
            // A leaf, first among its parent's children.
            let p = self.get(cur, PARENT);
            let next = self.get(cur, NEXT);
            self.set(p, CHILD, next);
            if next != 0 {
                self.set(next, PREV, 0);
            }
            self.free(cur);
            cur = p;
        }
    }

    /// The node after `s` in a pre-order walk of `top`'s subtree that does not enter
    /// `s`'s children (0: the walk is over).
    fn skip(&self, mut s: Slot, top: Slot) -> Slot {
        while s != top {
            let next = self.get(s, NEXT);
            if next != 0 {
                return next;
            }
            s = self.get(s, PARENT);
        }
        0
    }

    /// Just one root with no children left: nothing derives from anything.
    fn is_lone_root(&self) -> bool {
        let r = self.get(0, ROOTS);
        self.live() == 1 && r != 0 && self.get(r, CHILD) == 0
    }

    /// Its nodes copied into `out` (`out.len()` cells, room for all), in slots
    /// 1, 2, … in the order of the cells; `f` hears of each node whose slot changes.
    /// False (nothing done) when there is no memory to do it.
    fn compact_into(&self, out: &mut [Cell], f: &mut impl FnMut(u16, u64, Change)) -> bool {
        let mut new_of: Vec<Slot> = Vec::new();
        if new_of.try_reserve_exact(self.0.len()).is_err() {
            return false;
        }
        new_of.resize(self.0.len(), 0);
        let mut k: Slot = 0;
        for s in 1..self.0.len() as Slot {
            if self.is_node(s) {
                k += 1;
                new_of[s as usize] = k;
            }
        }
        let map = |s: Slot| new_of[s as usize];
        out[0] = Cell::default();
        for (old, &new) in new_of.iter().enumerate().filter(|(_, &n)| n != 0) {
            let (old, new) = (old as Slot, new);
            let c = self.0[old as usize];
            let mut n = Cell { a: c.a, b: 0 };
            for i in [PARENT, CHILD, NEXT, PREV] {
                n.set_link(i, map(c.link(i)));
            }
            out[new as usize] = n;
            if old != new {
                let v = c.view();
                f(v.space, v.addr, Change::Moved(new));
            }
        }
        out[0].set_link(LIVE, k);
        out[0].set_link(ROOTS, map(self.get(0, ROOTS)));
        chain_free(out, k as usize + 1);
        out[0].set_link(FREE_HEAD, if (k as usize + 1) < out.len() { k + 1 } else { 0 });
        true
    }
}

/// Blocks of 4 cells, in chunks; a free block's header cell chains it to the next free.
struct Pool {
    chunks: Vec<Box<[[Cell; SMALL]]>>,
    /// The first free block, plus 1 (0: none).
    free: u32,
}

impl Pool {
    fn block(&mut self, i: u32) -> &mut [Cell; SMALL] {
        &mut self.chunks[i as usize / CHUNK][i as usize % CHUNK]
    }
    fn block_ref(&self, i: u32) -> &[Cell; SMALL] {
        &self.chunks[i as usize / CHUNK][i as usize % CHUNK]
    }

    /// A block, growing the pool by a chunk when none is free.
    fn take(&mut self) -> Result<u32, DbError> {
        if self.free == 0 {
            let base = self.chunks.len() * CHUNK;
            if base + CHUNK >= BIG as usize {
                return Err(DbError::NoMemory);
            }
            self.chunks.try_reserve(1).map_err(|_| DbError::NoMemory)?;
            let mut v: Vec<[Cell; SMALL]> = Vec::new();
            v.try_reserve_exact(CHUNK).map_err(|_| DbError::NoMemory)?;
            for k in 0..CHUNK {
                let next = if k + 1 < CHUNK { (base + k + 2) as u64 } else { 0 };
                v.push([Cell { a: FREE, b: next }, Cell::default(), Cell::default(), Cell::default()]);
            }
            self.chunks.push(v.into_boxed_slice());
            self.free = base as u32 + 1;
        }
        let i = self.free - 1;
        self.free = self.block(i)[0].b as u32;
        Ok(i)
    }

    fn give(&mut self, i: u32) {
        let next = self.free;
        self.block(i)[0] = Cell { a: FREE, b: next as u64 };
        self.free = i + 1;
    }
}

pub struct FrameDb {
    /// Where the tree of each frame of RAM is (by frame number): 0 none, `BIG` in
    /// `big`, else its pool block plus 1.
    table: Vec<u32>,
    pool: Pool,
    /// Trees of more than 3 nodes, and every tree of a frame past the table (device
    /// memory), by frame number.
    big: BTreeMap<u64, Box<[Cell]>>,
}

impl FrameDb {
    /// A database with no table (every tree in the map) until `new` replaces it.
    pub const fn empty() -> FrameDb {
        FrameDb { table: Vec::new(), pool: Pool { chunks: Vec::new(), free: 0 }, big: BTreeMap::new() }
    }

    /// A database with a table for frames `0 .. frames` (physical addresses below
    /// `frames * 4096`; 4 bytes a frame); the trees of others go in a map. None when
    /// there is no memory for the table.
    pub fn new(frames: usize) -> Option<FrameDb> {
        let mut table = Vec::new();
        table.try_reserve_exact(frames).ok()?;
        table.resize(frames, 0);
        Some(FrameDb { table, ..FrameDb::empty() })
    }

    fn cells_mut(&mut self, frame: u64) -> Option<&mut [Cell]> {
        let f = frame >> 12;
        match self.table.get(f as usize).copied() {
            Some(0) => None,
            Some(BIG) | None => self.big.get_mut(&f).map(|b| &mut b[..]),
            Some(i) => Some(&mut self.pool.block(i - 1)[..]),
        }
    }

    fn tree(&mut self, frame: u64) -> Option<Tree<'_>> {
        self.cells_mut(frame).map(Tree)
    }

    fn cells(&self, frame: u64) -> Option<&[Cell]> {
        let f = frame >> 12;
        match self.table.get(f as usize).copied() {
            Some(0) => None,
            Some(BIG) | None => self.big.get(&f).map(|b| &b[..]),
            Some(i) => Some(&self.pool.block_ref(i - 1)[..]),
        }
    }

    /// Forget `frame`'s tree (its memory goes back).
    fn drop_tree(&mut self, frame: u64) {
        let f = frame >> 12;
        match self.table.get(f as usize).copied() {
            Some(0) => {}
            Some(BIG) => {
                self.big.remove(&f);
                self.table[f as usize] = 0;
            }
            None => {
                self.big.remove(&f);
            }
            Some(i) => {
                self.pool.give(i - 1);
                self.table[f as usize] = 0;
            }
        }
    }

    /// After nodes went: drop a tree with nothing derived left (a lone root, or none),
    /// and make one that is three quarters free smaller, its nodes moving to low slots
    /// (`f` hears `Moved`).
    fn tidy(&mut self, frame: u64, f: &mut impl FnMut(u16, u64, Change)) {
        let Some(t) = self.tree(frame) else { return };
        if t.live() == 0 || t.is_lone_root() {
            self.drop_tree(frame);
            return;
        }
        let (live, len) = (t.live(), t.0.len());
        let fr = frame >> 12;
        let in_table = (fr as usize) < self.table.len();
        if len > SMALL && live < SMALL && in_table {
            // Back into a pool block.
            let mut out = [Cell::default(); SMALL];
            if !self.tree(frame).is_some_and(|t| t.compact_into(&mut out, f)) {
                return;
            }
            let Ok(i) = self.pool.take() else { return };
            *self.pool.block(i) = out;
            self.big.remove(&fr);
            self.table[fr as usize] = i + 1;
        } else if len > 2 * SMALL && live * 4 < len - 1 {
            let cap = ((len - 1) / 2).max(SMALL);
            let mut v: Vec<Cell> = Vec::new();
            if v.try_reserve_exact(cap + 1).is_err() {
                return;
            }
            v.resize(cap + 1, Cell::default());
            if self.tree(frame).is_some_and(|t| t.compact_into(&mut v, f)) {
                self.big.insert(fr, v.into_boxed_slice());
            }
        }
    }

    /// A new node in `frame`'s tree (growing it when it is full), unlinked.
    fn alloc_node(&mut self, frame: u64, n: Node) -> Result<Slot, DbError> {
        if let Some(s) = self.tree(frame).ok_or(DbError::NotHeld)?.alloc(n) {
            return Ok(s);
        }
        let old = self.cells(frame).map_or(0, |c| c.len());
        if old > MAX_NODES {
            return Err(DbError::Full);
        }
        let len = (1 + (old - 1) * 2).min(1 + MAX_NODES);
        let mut v: Vec<Cell> = Vec::new();
        v.try_reserve_exact(len).map_err(|_| DbError::NoMemory)?;
        v.extend_from_slice(self.cells(frame).unwrap_or(&[]));
        v.resize(len, Cell::default());
        chain_free(&mut v, old);
        v[0].set_link(FREE_HEAD, old as Slot);
        let fr = frame >> 12;
        if let Some(&i) = self.table.get(fr as usize) {
            if i != BIG {
                self.pool.give(i - 1);
                self.table[fr as usize] = BIG;
            }
        }
        self.big.insert(fr, v.into_boxed_slice());
        self.tree(frame).and_then(|mut t| t.alloc(n)).ok_or(DbError::NoMemory)
    }

    /// The node in `slot` of `frame`'s tree.
    pub fn node(&self, frame: u64, slot: Slot) -> Option<Node> {
        let c = self.cells(frame)?;
        let s = slot as usize;
        (slot != 0 && s < c.len() && c[s].a != FREE).then(|| c[s].view())
    }

    /// `slot` if it holds the node of (space, addr) in `frame`'s tree (the slot a page
    /// table keeps may be stale: its tree was dropped or made anew).
    pub fn find(&self, frame: u64, slot: Slot, space: u16, addr: u64) -> Option<Slot> {
        let n = self.node(frame, slot)?;
        (n.space == space && n.addr == addr & !0xfff).then_some(slot)
    }

    /// Nodes in `frame`'s tree.
    pub fn len_of(&self, frame: u64) -> usize {
        self.cells(frame).map_or(0, |c| c[0].link(LIVE) as usize)
    }

    /// Cells `frame`'s tree takes (its memory is 16 bytes a cell).
    pub fn cells_of(&self, frame: u64) -> usize {
        self.cells(frame).map_or(0, |c| c.len())
    }

    /// Frames with a tree.
    pub fn trees(&self) -> usize {
        self.table.iter().filter(|&&t| t != 0 && t != BIG).count() + self.big.len()
    }

    /// Every node of `frame`'s tree, in pre-order (for tests and checks).
    pub fn walk(&self, frame: u64) -> Vec<(Slot, Node, Slot)> {
        let mut out = Vec::new();
        let Some(c) = self.cells(frame) else { return out };
        let mut s = c[0].link(ROOTS);
        while s != 0 {
            let n = c[s as usize];
            out.push((s, n.view(), n.link(PARENT)));
            s = if n.link(CHILD) != 0 {
                n.link(CHILD)
            } else {
                // Next sibling, or a parent's next sibling.
                let mut t = s;
                loop {
                    let x = c[t as usize];
                    if x.link(NEXT) != 0 {
                        break x.link(NEXT);
                    }
                    t = x.link(PARENT);
                    if t == 0 {
                        break 0;
                    }
                }
            };
        }
        out
    }

    /// Make (space, addr) a root holder of `frame` (the kernel gave it the frame): its slot.
    pub fn add_root(&mut self, frame: u64, space: u16, addr: u64, rights: u8) -> Result<Slot, DbError> {
        let f = frame >> 12;
        if self.cells(frame).is_none() {
            let mut cells = [Cell::default(); SMALL];
            chain_free(&mut cells, 1);
            cells[0].set_link(FREE_HEAD, 1);
            match self.table.get(f as usize) {
                Some(_) => {
                    let i = self.pool.take()?;
                    *self.pool.block(i) = cells;
                    self.table[f as usize] = i + 1;
                }
                None => {
                    let mut v: Vec<Cell> = Vec::new();
                    v.try_reserve_exact(SMALL).map_err(|_| DbError::NoMemory)?;
                    v.extend_from_slice(&cells);
                    self.big.insert(f, v.into_boxed_slice());
                }
            }
        }
        let s = self.alloc_node(frame, Node { space, addr: addr & !0xfff, rights, depth: 0 })?;
        if let Some(mut t) = self.tree(frame) {
            t.link_under(s, 0);
        }
        Ok(s)
    }

    /// (to_space, to_addr) receives `frame` from the node in `from` with `rights & its
    /// rights` (the caller made sure the destination holds no node of this frame):
    /// the new node's slot and rights.
    pub fn map(
        &mut self,
        frame: u64,
        from: Slot,
        to_space: u16,
        to_addr: u64,
        rights: u8,
    ) -> Result<(Slot, u8), DbError> {
        let t = self.tree(frame).ok_or(DbError::NotHeld)?;
        if !t.is_node(from) {
            return Err(DbError::NotHeld);
        }
        let parent = t.0[from as usize].view();
        if parent.depth >= MAX_DEPTH {
            return Err(DbError::Full);
        }
        let rights = rights & parent.rights;
        let s =
            self.alloc_node(frame, Node { space: to_space, addr: to_addr & !0xfff, rights, depth: parent.depth + 1 })?;
        if let Some(mut t) = self.tree(frame) {
            t.link_under(s, from);
        }
        Ok((s, rights))
    }

    /// The node in `slot` moves to (to_space, to_addr): same slot, rights and children.
    pub fn grant(&mut self, frame: u64, slot: Slot, to_space: u16, to_addr: u64) -> Result<u8, DbError> {
        let t = self.tree(frame).ok_or(DbError::NotHeld)?;
        if !t.is_node(slot) {
            return Err(DbError::NotHeld);
        }
        let c = &mut t.0[slot as usize];
        c.set_place(to_space, to_addr & !0xfff);
        Ok(c.view().rights)
    }

    /// Whether `node` is `anc` or derived from it (at most `MAX_DEPTH` steps up).
    pub fn derives_from(&self, frame: u64, node: Slot, anc: Slot) -> bool {
        let Some(c) = self.cells(frame) else { return false };
        let ok = |s: Slot| s != 0 && (s as usize) < c.len() && c[s as usize].a != FREE;
        if !ok(node) || !ok(anc) {
            return false;
        }
        let mut s = node;
        while s != 0 {
            if s == anc {
                return true;
            }
            s = c[s as usize].link(PARENT);
        }
        false
    }

    /// Take `remove` rights from everything derived from the node in `at` (and from it
    /// when `include_self`); a node left without rights goes with its subtree. `f` is
    /// told of each change (a subtree that goes: leaves first; then the nodes that
    /// moved, if the tree was made smaller). Returns the nodes visited (the work done:
    /// at most twice `MAX_NODES`).
    pub fn demap(
        &mut self,
        frame: u64,
        at: Slot,
        remove: u8,
        include_self: bool,
        mut f: impl FnMut(u16, u64, Change),
    ) -> Result<usize, DbError> {
        let mut t = self.tree(frame).ok_or(DbError::NotHeld)?;
        if !t.is_node(at) {
            return Err(DbError::NotHeld);
        }
        let mut work = 0;
        let mut cur = if include_self { at } else { t.get(at, CHILD) };
        while cur != 0 {
            work += 1;
            let c = t.0[cur as usize];
            let n = c.view();
            let left = n.rights & !remove;
            if left == 0 {
                // It goes, with everything below it; the walk goes on after it.
                let next = if cur == at { 0 } else { t.skip(cur, at) };
                work += t.remove_subtree(cur, &mut f) - 1;
                cur = next;
                continue;
            }
            if left != n.rights {
                f(n.space, n.addr, Change::Reduced(left));
                t.0[cur as usize].set_rights(left);
            }
            cur = if c.link(CHILD) != 0 { c.link(CHILD) } else { t.skip(cur, at) };
        }
        let before = self.cells_of(frame);
        self.tidy(frame, &mut f);
        if self.cells_of(frame) != before {
            work += before;
        }
        Ok(work)
    }

    /// Remove the node in `slot` and everything derived from it.
    pub fn remove(&mut self, frame: u64, slot: Slot, f: impl FnMut(u16, u64, Change)) -> Result<usize, DbError> {
        self.demap(frame, slot, u8::MAX, true, f)
    }
}

#[cfg(test)]
mod tests;
