//! Root's records of programs, by id. An id (a program's badge on root's endpoint,
//! minus one) is given once and never again, so a capability or a message that names
//! an ended program can never be taken for a later one. A record is kept while its
//! program runs and, after it ends, only if it is a memory server's or an update under
//! way names it (`Root::forget`): what root keeps follows the programs alive, not every
//! program ever started — a shell that runs a million commands leaves root as it found
//! it.

use super::Prog;
use alloc::collections::BTreeMap;
use core::ops::{Index, IndexMut};

/// Ids fit the 32 bits a badge gives them (`rt::server::Badge`), as `badge_of(id)`, and
/// so do their numbers at sigma0 (`s0_client(id)`, below its own, `u32::MAX`).
const MAX_ID: usize = u32::MAX as usize - 3;

pub(crate) struct Progs {
    recs: BTreeMap<usize, Prog>,
    next: usize,
}

impl Progs {
    pub(crate) const fn new() -> Progs {
        Progs { recs: BTreeMap::new(), next: 0 }
    }

    /// The id the next program recorded gets; None once ids are used up.
    pub(crate) fn next_id(&self) -> Option<usize> {
        (self.next <= MAX_ID).then_some(self.next)
    }

    /// Ids given so far.
    pub(crate) fn started(&self) -> usize {
        self.next
    }

    /// Records kept.
    pub(crate) fn len(&self) -> usize {
        self.recs.len()
    }

    /// Record a program under `next_id()` (which the caller checked); returns its id.
    pub(crate) fn push(&mut self, p: Prog) -> usize {
        let id = self.next;
        self.recs.insert(id, p);
        self.next += 1;
        id
    }

    pub(crate) fn get(&self, id: usize) -> Option<&Prog> {
        self.recs.get(&id)
    }

    pub(crate) fn get_mut(&mut self, id: usize) -> Option<&mut Prog> {
        self.recs.get_mut(&id)
    }

    /// A record whose program still runs.
    pub(crate) fn live(&self, id: usize) -> Option<&Prog> {
        self.recs.get(&id).filter(|p| !p.done)
    }

    pub(crate) fn remove(&mut self, id: usize) -> Option<Prog> {
        self.recs.remove(&id)
    }

    /// The records kept, oldest first.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (usize, &Prog)> {
        self.recs.iter().map(|(&i, p)| (i, p))
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut Prog)> {
        self.recs.iter_mut().map(|(&i, p)| (i, p))
    }
}

/// A record root knows it keeps (its own program's, or one a kept record refers to).
impl Index<usize> for Progs {
    type Output = Prog;
    fn index(&self, id: usize) -> &Prog {
        &self.recs[&id]
    }
}

impl IndexMut<usize> for Progs {
    fn index_mut(&mut self, id: usize) -> &mut Prog {
        self.recs.get_mut(&id).expect("a record root keeps")
    }
}
