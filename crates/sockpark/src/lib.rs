//! smoltcp's sockets, the idle ones parked outside its `SocketSet`.
//!
//! smoltcp's `Interface::poll` walks every socket of the set it is given on each run
//! (egress: each socket is asked whether it has a segment to send; `poll_at`: each is
//! asked for its next timer), and a frame is matched against the sockets one by one.
//! With a thousand keep-alive connections open and one busy, a run cost a thousand
//! sockets' questions: the cost of a request grew with the connections idle beside it
//! (`net`'s breakdown: 1.35M instructions a request beside 1,000 idle connections,
//! 115k alone).
//!
//! `Sockets` keeps the set for the sockets that may have something to do ("awake"),
//! and parks the others in a slab of its own, where no run sees them. Handles are
//! stable (`Handle`, not smoltcp's, which would change as a socket moves). A socket
//! wakes — moves back into the set — when its owner touches it (`get_mut`) or when a
//! frame comes for it (`wake`: the owner finds the socket from the frame's flow before
//! the stack runs); `park` moves back out those the owner says are quiet and that
//! nothing touched for a while. Reading a socket (`get`) does not wake it.
//!
//! Which sockets may be parked is the owner's decision (`park`'s `quiet`): one parked
//! must have nothing to send, no timer running, and a flow the owner will recognise in
//! a frame (else smoltcp, finding no socket, resets the peer).
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use smoltcp::iface::{SocketHandle, SocketSet};
use smoltcp::socket::{AnySocket, Socket};

/// A socket's handle, stable while it moves between the set and the parked slab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Handle(u32);

// A parked socket lives in its slot itself: parking and waking move it, with no
// allocation each time (a slot is as large as a socket, free or awake).
#[allow(clippy::large_enum_variant)]
enum Slot {
    Free,
    /// In the set, at `at` in `awake`, last touched at `touched` (µs); `owes`: it has
    /// received something it may not have acknowledged yet (`owe`, `paid`).
    Awake {
        h: SocketHandle,
        at: u32,
        touched: u64,
        owes: bool,
    },
    /// Outside the set; its own timer (µs) is due at the second (`NO_TIMER`: none).
    Parked(Socket<'static>, u64),
}

/// A parked socket's timer when it has none.
pub const NO_TIMER: u64 = u64::MAX;

/// The sockets: the awake ones in smoltcp's set, the parked ones outside it.
pub struct Sockets {
    set: SocketSet<'static>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// The awake sockets' handles (for `park`'s walk: the awake, not all), and each
    /// one's by smoltcp's handle.
    awake: Vec<u32>,
    back: BTreeMap<SocketHandle, u32>,
    /// (due, slot) of the parked sockets with a timer, in order.
    timers: alloc::collections::BTreeSet<(u64, u32)>,
    /// A set for one socket at a time: `park_timed` asks a socket's timer through it.
    scratch: SocketSet<'static>,
    /// `park_timed`'s list of the sockets to park.
    go: Vec<(u32, SocketHandle)>,
    /// The time of the last touch (µs), as the owner gives it (`touch_time`).
    now_us: u64,
    /// The most sockets the set has held at once since it was made: the length of its
    /// storage (smoltcp's set fills its first free place, and grows only when full),
    /// which each of its walks goes through, free places included (`compact`).
    peak: usize,
}

impl Default for Sockets {
    fn default() -> Self {
        Self::new()
    }
}

impl Sockets {
    pub fn new() -> Self {
        Sockets {
            set: SocketSet::new(Vec::new()),
            slots: Vec::new(),
            free: Vec::new(),
            awake: Vec::new(),
            back: BTreeMap::new(),
            timers: alloc::collections::BTreeSet::new(),
            scratch: SocketSet::new(Vec::new()),
            go: Vec::new(),
            now_us: 0,
            peak: 0,
        }
    }

    /// The time touches are stamped with from now on (µs).
    pub fn touch_time(&mut self, now_us: u64) {
        self.now_us = now_us;
    }

    /// The set of the awake sockets, for the stack's run (`Interface::poll`, `poll_at`).
    pub fn set(&mut self) -> &mut SocketSet<'static> {
        &mut self.set
    }

    /// Sockets in all, and awake.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn awake(&self) -> usize {
        self.awake.len()
    }

    /// Add a socket (awake).
    pub fn add<T: AnySocket<'static>>(&mut self, s: T) -> Handle {
        let h = self.set.add(s);
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::Free);
                (self.slots.len() - 1) as u32
            }
        };
        self.slots[i as usize] = Slot::Awake { h, at: self.awake.len() as u32, touched: self.now_us, owes: false };
        self.awake.push(i);
        self.back.insert(h, i);
        self.peak = self.peak.max(self.awake.len());
        Handle(i)
    }

    /// The socket (awake or parked). Panics on a handle not in use or of another type,
    /// as smoltcp's `SocketSet::get` does: the owner's tables are wrong then.
    pub fn get<T: AnySocket<'static>>(&self, h: Handle) -> &T {
        match &self.slots[h.0 as usize] {
            Slot::Awake { h, .. } => self.set.get(*h),
            Slot::Parked(s, _) => T::downcast(s).expect("a socket of another type"),
            Slot::Free => panic!("a socket handle not in use"),
        }
    }

    /// The socket, woken (the owner is about to change it).
    pub fn get_mut<T: AnySocket<'static>>(&mut self, h: Handle) -> &mut T {
        let sh = self.wake(h);
        self.set.get_mut(sh)
    }

    /// Wake socket `h` (a frame comes for it, or its owner touches it): into the set.
    /// Its smoltcp handle.
    pub fn wake(&mut self, h: Handle) -> SocketHandle {
        let i = h.0 as usize;
        match core::mem::replace(&mut self.slots[i], Slot::Free) {
            Slot::Awake { h, at, owes, .. } => {
                self.slots[i] = Slot::Awake { h, at, touched: self.now_us, owes };
                h
            }
            Slot::Parked(s, due) => {
                if due != NO_TIMER {
                    self.timers.remove(&(due, i as u32));
                }
                let sh = add_any(&mut self.set, s);
                self.slots[i] = Slot::Awake { h: sh, at: self.awake.len() as u32, touched: self.now_us, owes: false };
                self.awake.push(i as u32);
                self.back.insert(sh, i as u32);
                self.peak = self.peak.max(self.awake.len());
                sh
            }
            Slot::Free => panic!("a socket handle not in use"),
        }
    }

    /// Socket `h` (awake) has received something it may not have acknowledged yet (a
    /// segment with data, SYN or FIN: smoltcp delays its ACK): `park` keeps it awake
    /// for `idle_us` after its last touch unless `paid` first.
    pub fn owe(&mut self, h: Handle) {
        if let Some(Slot::Awake { owes, .. }) = self.slots.get_mut(h.0 as usize) {
            *owes = true;
        }
    }

    /// Socket `h` has sent since (its segment carries the ACK): it may park once quiet.
    pub fn paid(&mut self, h: Handle) {
        if let Some(Slot::Awake { owes, .. }) = self.slots.get_mut(h.0 as usize) {
            *owes = false;
        }
    }

    /// Is socket `h` parked?
    pub fn parked(&self, h: Handle) -> bool {
        matches!(self.slots.get(h.0 as usize), Some(Slot::Parked(..)))
    }

    /// Remove socket `h`.
    pub fn remove(&mut self, h: Handle) -> Socket<'static> {
        let i = h.0 as usize;
        let s = match core::mem::replace(&mut self.slots[i], Slot::Free) {
            Slot::Awake { h, at, .. } => {
                self.unlist(at);
                self.back.remove(&h);
                self.set.remove(h)
            }
            Slot::Parked(s, due) => {
                if due != NO_TIMER {
                    self.timers.remove(&(due, i as u32));
                }
                s
            }
            Slot::Free => panic!("a socket handle not in use"),
        };
        self.free.push(i as u32);
        s
    }

    /// Every socket, awake and parked.
    pub fn iter(&self) -> impl Iterator<Item = (Handle, &Socket<'static>)> + '_ {
        let awake = self.set.iter().filter_map(|(sh, s)| Some((Handle(*self.back.get(&sh)?), s)));
        let parked = self.slots.iter().enumerate().filter_map(|(i, s)| match s {
            Slot::Parked(s, _) => Some((Handle(i as u32), s)),
            _ => None,
        });
        awake.chain(parked)
    }

    /// Park the awake sockets that `quiet` says have nothing to do and that owe no
    /// acknowledgement (`owe`), or that nothing touched for `idle_us` before `now_us`:
    /// a walk of the awake ones. How many. (`park_timed` with no timer for any.)
    pub fn park(&mut self, now_us: u64, idle_us: u64, quiet: impl FnMut(Handle, &Socket<'static>) -> bool) -> usize {
        self.park_timed(now_us, idle_us, quiet, |_| Some(NO_TIMER))
    }

    /// `park`, for sockets that may have a timer running: `timer` is given a set holding
    /// only the socket, and says when its timer is due (µs; `NO_TIMER`: none), or None
    /// if it has something to do now (it stays awake). A parked socket whose timer is
    /// due wakes at `wake_due` — so a connection with bytes in flight (its
    /// retransmission timer running) or a delayed acknowledgement may park too, and
    /// a run of the stack walks only what frames, requests and due timers touched.
    pub fn park_timed(
        &mut self,
        now_us: u64,
        idle_us: u64,
        mut quiet: impl FnMut(Handle, &Socket<'static>) -> bool,
        mut timer: impl FnMut(&SocketSet<'static>) -> Option<u64>,
    ) -> usize {
        // (A list kept between calls: a run of the stack allocates nothing here.)
        let mut go = core::mem::take(&mut self.go);
        go.clear();
        for (sh, s) in self.set.iter() {
            let Some(&i) = self.back.get(&sh) else { continue };
            let Slot::Awake { touched, owes, .. } = self.slots[i as usize] else { continue };
            if (!owes || now_us.saturating_sub(touched) >= idle_us) && quiet(Handle(i), s) {
                go.push((i, sh));
            }
        }
        let mut parked = 0;
        for &(i, sh) in &go {
            let s = self.set.remove(sh);
            self.back.remove(&sh);
            let one = add_any(&mut self.scratch, s);
            let due = timer(&self.scratch);
            let s = self.scratch.remove(one);
            match due {
                Some(due) => {
                    if let Slot::Awake { at, .. } = self.slots[i as usize] {
                        self.unlist(at);
                    }
                    if due != NO_TIMER {
                        self.timers.insert((due, i));
                    }
                    self.slots[i as usize] = Slot::Parked(s, due);
                    parked += 1;
                }
                None => {
                    // Back into the set (under a new handle of smoltcp's).
                    let nh = add_any(&mut self.set, s);
                    if let Slot::Awake { h, .. } = &mut self.slots[i as usize] {
                        *h = nh;
                    }
                    self.back.insert(nh, i);
                }
            }
        }
        self.go = go;
        self.compact();
        parked
    }

    /// Wake the parked sockets whose timer is due at `now_us`: how many.
    pub fn wake_due(&mut self, now_us: u64) -> usize {
        let mut n = 0;
        while let Some(&(due, i)) = self.timers.first() {
            if due > now_us {
                break;
            }
            self.wake(Handle(i));
            n += 1;
        }
        n
    }

    /// When the first parked socket's timer is due (µs), if any has one.
    pub fn next_due(&self) -> Option<u64> {
        self.timers.first().map(|(due, _)| *due)
    }

    /// Each awake socket.
    pub fn awake_handles(&self) -> impl Iterator<Item = Handle> + '_ {
        self.awake.iter().map(|i| Handle(*i))
    }

    /// Move the awake sockets into a new set once the old one's storage is mostly free
    /// places (a burst of a thousand connections, then parked): its walks go through
    /// every place. O(awake), when the free places pass twice the awake and 64.
    fn compact(&mut self) {
        if self.peak <= 2 * self.awake.len() + 64 {
            return;
        }
        let mut set = SocketSet::new(Vec::new());
        for &i in &self.awake {
            if let Slot::Awake { h, .. } = &mut self.slots[i as usize] {
                let sh = add_any(&mut set, self.set.remove(*h));
                *h = sh;
            }
        }
        self.set = set;
        self.back = self
            .awake
            .iter()
            .filter_map(|&i| match self.slots[i as usize] {
                Slot::Awake { h, .. } => Some((h, i)),
                _ => None,
            })
            .collect();
        self.peak = self.awake.len();
    }

    /// Take place `at` out of `awake` (the last one moves there).
    fn unlist(&mut self, at: u32) {
        let at = at as usize;
        self.awake.swap_remove(at);
        if let Some(&moved) = self.awake.get(at) {
            if let Slot::Awake { at: a, .. } = &mut self.slots[moved as usize] {
                *a = at as u32;
            }
        }
    }
}

/// Add a socket of whatever type to the set (the set takes a typed one).
fn add_any(set: &mut SocketSet<'static>, s: Socket<'static>) -> SocketHandle {
    match s {
        Socket::Tcp(t) => set.add(t),
        Socket::Udp(u) => set.add(u),
        Socket::Icmp(i) => set.add(i),
        Socket::Dhcpv4(d) => set.add(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use smoltcp::socket::tcp;

    fn tcp_socket() -> tcp::Socket<'static> {
        tcp::Socket::new(tcp::SocketBuffer::new(vec![0; 64]), tcp::SocketBuffer::new(vec![0; 64]))
    }

    #[test]
    fn handles_stay_while_sockets_move() {
        let mut s = Sockets::new();
        let a = s.add(tcp_socket());
        let b = s.add(tcp_socket());
        s.get_mut::<tcp::Socket>(a).set_hop_limit(Some(7));
        s.owe(a);
        s.owe(b);
        s.touch_time(1_000);
        s.get_mut::<tcp::Socket>(b);
        assert_eq!(s.park(1_500, 1_000, |_, _| true), 1, "a, untouched since 0, parks; b was touched at 1000");
        assert!(s.parked(a) && !s.parked(b));
        assert_eq!(s.set().iter().count(), 1, "the stack's runs see only b");
        assert_eq!(s.get::<tcp::Socket>(a).hop_limit(), Some(7), "a parked socket is read where it is");
        assert!(s.parked(a), "reading does not wake it");
        s.get_mut::<tcp::Socket>(a).set_hop_limit(Some(9));
        assert!(!s.parked(a), "changing it wakes it");
        assert_eq!(s.get::<tcp::Socket>(a).hop_limit(), Some(9));
        assert_eq!(s.set().iter().count(), 2);
    }

    #[test]
    fn a_parked_socket_wakes_when_its_timer_is_due() {
        let mut s = Sockets::new();
        let hs: Vec<Handle> = (0..4).map(|_| s.add(tcp_socket())).collect();
        s.get_mut::<tcp::Socket>(hs[1]).set_hop_limit(Some(11));
        // The timer asked through a set holding the socket alone: 0 at 500, 1 at 300 (it
        // is found by what it holds), 2 none, 3 something to do now (it stays awake).
        let mut asked = 0;
        let parked = s.park_timed(
            10,
            100,
            |_, _| true,
            |one| {
                asked += 1;
                assert_eq!(one.iter().count(), 1, "one socket at a time");
                let (_, sock) = one.iter().next().unwrap();
                let Socket::Tcp(t) = sock else { return Some(NO_TIMER) };
                match t.hop_limit() {
                    Some(11) => Some(300),
                    Some(12) => Some(NO_TIMER),
                    Some(13) => None,
                    _ => Some(500),
                }
            },
        );
        assert_eq!(asked, 4);
        assert_eq!(parked, 4, "all four park (2 and 3 have no hop limit of their own yet)");
        s.get_mut::<tcp::Socket>(hs[2]).set_hop_limit(Some(12));
        s.get_mut::<tcp::Socket>(hs[3]).set_hop_limit(Some(13));
        assert_eq!(s.awake(), 2, "changing them woke them");
        assert_eq!(
            s.park_timed(
                20,
                100,
                |_, _| true,
                |one| {
                    let Some((_, Socket::Tcp(t))) = one.iter().next() else { return Some(NO_TIMER) };
                    match t.hop_limit() {
                        Some(12) => Some(NO_TIMER),
                        Some(13) => None,
                        _ => Some(500),
                    }
                }
            ),
            1,
            "2 parks with no timer; 3 stays awake"
        );
        assert!(!s.parked(hs[3]) && s.parked(hs[2]));
        assert_eq!(s.get::<tcp::Socket>(hs[3]).hop_limit(), Some(13), "one kept awake is still itself");
        assert_eq!(s.next_due(), Some(300));
        assert_eq!(s.wake_due(299), 0);
        assert_eq!(s.wake_due(300), 1, "1's timer");
        assert!(!s.parked(hs[1]) && s.parked(hs[0]));
        assert_eq!(s.next_due(), Some(500));
        s.wake(hs[0]);
        assert_eq!(s.next_due(), None, "woken otherwise, its timer is forgotten");
        assert_eq!(s.wake_due(u64::MAX - 1), 0, "2 has none");
        assert!(s.parked(hs[2]));
    }

    #[test]
    fn one_that_owes_an_ack_waits_unless_paid() {
        let mut s = Sockets::new();
        let a = s.add(tcp_socket());
        let b = s.add(tcp_socket());
        s.owe(a);
        s.owe(b);
        s.paid(b);
        assert_eq!(s.park(10, 100, |_, _| true), 1, "b paid: it parks at once");
        assert!(s.parked(b) && !s.parked(a));
        assert_eq!(s.park(100, 100, |_, _| true), 1, "a parks once idle long enough");
        s.wake(a);
        assert_eq!(s.park(100, 100, |_, _| true), 1, "woken, it owes nothing until told");
    }

    #[test]
    fn only_the_quiet_and_untouched_park() {
        let mut s = Sockets::new();
        let hs: Vec<Handle> = (0..10).map(|_| s.add(tcp_socket())).collect();
        for h in &hs {
            s.owe(*h);
        }
        assert_eq!(s.park(10, 100, |_, _| true), 0, "touched too lately");
        assert_eq!(s.park(100, 100, |h, _| h != hs[3]), 9, "the owner keeps 3 awake");
        assert_eq!(s.awake(), 1);
        assert!(!s.parked(hs[3]));
        s.touch_time(200);
        s.wake(hs[5]);
        s.owe(hs[5]);
        assert_eq!(s.awake(), 2);
        assert_eq!(s.set().iter().count(), 2);
        assert_eq!(s.park(250, 100, |_, _| true), 1, "3 parks; 5 was woken at 200");
        assert_eq!(s.iter().count(), 10, "every socket is still there");
    }

    #[test]
    fn removed_places_are_reused_and_the_walk_is_of_the_awake() {
        let mut s = Sockets::new();
        let hs: Vec<Handle> = (0..1000).map(|_| s.add(tcp_socket())).collect();
        s.park(1, 1, |_, _| true);
        assert_eq!(s.awake(), 0);
        let mut looked = 0;
        s.park(10, 1, |_, _| {
            looked += 1;
            true
        });
        assert_eq!(looked, 0, "parked sockets are not walked");
        s.remove(hs[10]);
        s.wake(hs[11]);
        s.remove(hs[11]);
        let again = s.add(tcp_socket());
        assert!(again == hs[10] || again == hs[11]);
        assert_eq!(s.len(), 999);
        assert_eq!(s.awake(), 1);
    }

    #[test]
    fn a_set_left_mostly_free_is_made_anew() {
        let mut s = Sockets::new();
        let hs: Vec<Handle> = (0..500).map(|_| s.add(tcp_socket())).collect();
        for h in &hs[..5] {
            s.get_mut::<tcp::Socket>(*h).set_hop_limit(Some(3));
            s.owe(*h);
        }
        s.touch_time(10);
        for h in &hs[..5] {
            s.wake(*h);
        }
        assert_eq!(s.park(10, 5, |_, _| true), 495);
        assert_eq!(s.peak, 5, "the set was made anew with the five awake");
        for h in &hs[..5] {
            assert_eq!(s.get::<tcp::Socket>(*h).hop_limit(), Some(3), "each found by its handle");
        }
        assert_eq!(s.set().iter().count(), 5);
        assert_eq!(s.iter().count(), 500);
    }
}
