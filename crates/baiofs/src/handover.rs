//! What a server of a baiofs filesystem (`files`) hands its successor in a live update,
//! in format 0: magic, the next handle, the counts, then per handle
//! (handle, client, inode) and per ticket (client, inode, its place in the server's
//! block of ticket slots, the view's id at blk), little-endian. It comes from another
//! program, so `decode` checks every count, bound and repetition.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

const MAGIC: &[u8; 8] = b"SCFILES0";

/// A ticket: (client program, inode, place in the ticket block, view id).
pub type Ticket = (u32, u32, u64, u64);

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Handover {
    pub next: u64,
    /// handle → (client program, inode)
    pub handles: BTreeMap<u64, (u32, u32)>,
    pub tickets: Vec<Ticket>,
}

impl Handover {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(24 + 16 * self.handles.len() + 24 * self.tickets.len());
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&self.next.to_le_bytes());
        v.extend_from_slice(&(self.handles.len() as u32).to_le_bytes());
        v.extend_from_slice(&(self.tickets.len() as u32).to_le_bytes());
        for (h, (c, i)) in &self.handles {
            v.extend_from_slice(&h.to_le_bytes());
            v.extend_from_slice(&c.to_le_bytes());
            v.extend_from_slice(&i.to_le_bytes());
        }
        for (c, i, place, id) in &self.tickets {
            v.extend_from_slice(&c.to_le_bytes());
            v.extend_from_slice(&i.to_le_bytes());
            v.extend_from_slice(&place.to_le_bytes());
            v.extend_from_slice(&id.to_le_bytes());
        }
        v
    }

    /// The state read back, at most `max_handles` handles and `places` tickets (each
    /// place below `places`, none twice), or why it is refused.
    pub fn decode(b: &[u8], max_handles: usize, places: u64) -> Result<Handover, &'static str> {
        let word = |at: usize, n: usize| -> Result<u64, &'static str> {
            let s = b.get(at..at + n).ok_or("the state is cut short")?;
            let mut w = [0u8; 8];
            w[..n].copy_from_slice(s);
            Ok(u64::from_le_bytes(w))
        };
        if b.get(..8) != Some(&MAGIC[..]) {
            return Err("not a files state");
        }
        let (next, nh, nt) = (word(8, 8)?, word(16, 4)? as usize, word(20, 4)? as usize);
        if nh > max_handles || nt as u64 > places || b.len() != 24 + 16 * nh + 24 * nt {
            return Err("the state's counts do not fit");
        }
        let mut handles = BTreeMap::new();
        for k in 0..nh {
            let at = 24 + 16 * k;
            let h = word(at, 8)?;
            if h >= next || handles.insert(h, (word(at + 8, 4)? as u32, word(at + 12, 4)? as u32)).is_some() {
                return Err("a handle repeats or is not below the next");
            }
        }
        let mut tickets: Vec<Ticket> = Vec::with_capacity(nt);
        for k in 0..nt {
            let at = 24 + 16 * nh + 24 * k;
            let place = word(at + 8, 8)?;
            if place >= places || tickets.iter().any(|t| t.2 == place) {
                return Err("a ticket's place repeats or is out of the block");
            }
            tickets.push((word(at, 4)? as u32, word(at + 4, 4)? as u32, place, word(at + 16, 8)?));
        }
        Ok(Handover { next, handles, tickets })
    }
}

/// The handles a server of open files hands out name the instance that made them: the
/// high 32 bits are its epoch, chosen at start (from the time: a restarted server's
/// differs from the one before), the low 32 a count. A handle the server does not have
/// open is then either one an ended instance made — what that instance held for it is
/// lost (`abi::Error::Lost`: for `files`, writes no `SYNC` or `CLOSE` had answered) —
/// or one that never was, or was closed (`InvalidCap`). A successor in a live update
/// goes on with its predecessor's count and epoch (`resume`): the handles carry over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handles {
    next: u64,
}

impl Handles {
    /// A new instance's handles; `seed` (the time) chooses the epoch.
    pub fn new(seed: u64) -> Handles {
        let epoch = (seed as u32 & 0x7fff_ffff).max(1);
        Handles { next: (epoch as u64) << 32 | 1 }
    }

    /// Going on from a predecessor's next handle.
    pub fn resume(next: u64) -> Handles {
        Handles { next }
    }

    pub fn next(&self) -> u64 {
        self.next
    }

    /// A new handle, or None once this instance has handed out 2^32 - 1 of them.
    pub fn mint(&mut self) -> Option<u64> {
        if self.next as u32 == u32::MAX {
            return None;
        }
        let h = self.next;
        self.next += 1;
        Some(h)
    }

    /// Whether `h`, not open here, was made by an instance of the server that ended.
    pub fn lost(&self, h: u64) -> bool {
        h >> 32 != 0 && h >> 32 != self.next >> 32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restarted_servers_handles_tell_the_old_ones_apart() {
        let mut old = Handles::new(0x1234_5678_9abc);
        let a = old.mint().unwrap();
        let b = old.mint().unwrap();
        assert!(b > a && a >> 32 != 0);
        assert!(!old.lost(a) && !old.lost(b + 5), "its own (open, closed or not yet made): never lost");
        let new = Handles::new(0x1234_5679_0000);
        assert!(new.lost(a) && new.lost(b), "the old instance's handles, at the new one");
        assert!(!new.lost(7) && !new.lost(0), "a handle no instance made");
        // A live update's successor goes on: the old handles are its own.
        let mut succ = Handles::resume(old.next());
        assert!(!succ.lost(a));
        assert_eq!(succ.mint(), Some(b + 1));
        // The count ends before it reaches the epoch's bits.
        let mut h = Handles::resume(5 << 32 | 0xffff_fffe);
        assert_eq!(h.mint(), Some(5 << 32 | 0xffff_fffe));
        assert_eq!(h.mint(), None);
        assert_eq!(h.mint(), None);
        assert_eq!(Handles::new(0).next() >> 32, 1, "the epoch is never 0");
    }

    fn sample() -> Handover {
        let mut handles = BTreeMap::new();
        handles.insert(3, (7, 11));
        handles.insert(9, (8, 12));
        Handover { next: 10, handles, tickets: alloc::vec![(7, 11, 5, 0xabc), (8, 12, 0, 0xdef)] }
    }

    #[test]
    fn a_state_reads_back_as_written() {
        let s = sample();
        assert_eq!(Handover::decode(&s.encode(), 16, 64), Ok(s));
        assert_eq!(Handover::decode(&Handover::default().encode(), 0, 0), Ok(Handover::default()));
    }

    /// Every hostile variation is refused with a reason, never a panic.
    #[test]
    fn hostile_states_are_refused() {
        let good = sample().encode();
        let refused = |b: &[u8]| Handover::decode(b, 16, 64).err();
        assert_eq!(refused(&good[..good.len() - 1]), Some("the state's counts do not fit"), "cut short");
        assert_eq!(refused(&good[..20]), Some("the state is cut short"));
        assert_eq!(refused(b"SCFILES1........................"), Some("not a files state"));
        assert_eq!(
            Handover::decode(&good, 1, 64).err(),
            Some("the state's counts do not fit"),
            "more handles than allowed"
        );
        assert_eq!(Handover::decode(&good, 16, 5).err(), Some("a ticket's place repeats or is out of the block"));
        let mut big = good.clone();
        big[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            refused(&big),
            Some("the state's counts do not fit"),
            "a count near 2^32 neither overflows nor allocates"
        );
        let mut s = sample();
        s.next = 9;
        assert_eq!(refused(&s.encode()), Some("a handle repeats or is not below the next"));
        let mut s = sample();
        s.tickets[1].2 = 5;
        assert_eq!(refused(&s.encode()), Some("a ticket's place repeats or is out of the block"));
        // A handle written twice.
        let mut twice = good.clone();
        twice[40..48].copy_from_slice(&3u64.to_le_bytes());
        assert_eq!(refused(&twice), Some("a handle repeats or is not below the next"));
        // Random bytes after a good head: refused or read, never a panic.
        let mut x = 77u64;
        for _ in 0..2000 {
            let mut b = good.clone();
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let at = (x >> 33) as usize % b.len();
            b[at] ^= (x >> 20) as u8 | 1;
            let _ = Handover::decode(&b, 16, 64);
        }
    }
}
