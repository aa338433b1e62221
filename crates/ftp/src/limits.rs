//! ftpd's decisions on its sessions, apart from the program so that the host tests them:
//! who gets a session when the table is full or an address holds its share
//! ([`admit`]), and when a transfer has stalled ([`Pace`]).
//!
//! The design (docs/network.md, "ftpd"): the table's size comes from the memory net
//! gives ftpd; one address may hold `per_addr` sessions, less than the table so that
//! room stays for other addresses (behind a NAT, such as QEMU's user network, every
//! client is one address: then the oldest idle sessions of that address go first).
//! A session is *idle* when it runs no transfer, owes no reply and has sent no command
//! but NOOP for `SHED_GRACE_US`; the one idle longest is shed (421) to make room for a
//! newcomer. NOOP never counts as a command for idleness, so a client that sends NOOP
//! every 100 s is idle all along: it is shed first when others wait, and closed (421)
//! when its idle deadline passes even when nobody waits.

/// A session that has sent no command but NOOP for this long is closed (421).
pub const IDLE_US: u64 = 300_000_000;
/// A session is not shed for a newcomer until it has been idle this long (a client
/// that has just logged in and is about to ask for a file keeps its session).
pub const SHED_GRACE_US: u64 = 2_000_000;
/// A transfer must move `MIN_BYTES` in every `WINDOW_US` (else 426 and its data port
/// is free again): a client reading at 1 byte/s cannot hold a port for long.
pub const WINDOW_US: u64 = 20_000_000;
pub const MIN_BYTES: u64 = 16 * 1024;

/// What [`admit`] needs of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seat {
    /// The peer's address.
    pub peer: u64,
    /// Since when it has been idle (no transfer, no reply owed, no command but NOOP);
    /// None while it works.
    pub idle_since: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Room: a new session.
    Take,
    /// Shed session `i` (idle longest of those that may go) first, then take.
    Shed(usize),
    /// No room and nobody idle to shed: 421 to the newcomer.
    Refuse,
}

/// The sessions an address may hold in a table of `max`: all but a quarter (room for
/// other addresses), at least 1.
pub fn per_addr_default(max: usize) -> usize {
    (max - max / 4).max(1)
}

/// Whether a connection from `peer` gets a session, given the table `seats`, its size
/// `max`, the per-address limit `per_addr`, at time `now` (µs).
pub fn admit(seats: &[Seat], peer: u64, max: usize, per_addr: usize, now: u64) -> Admit {
    let mine = seats.iter().filter(|s| s.peer == peer).count();
    let idlest = |only_peer: bool| {
        seats
            .iter()
            .enumerate()
            .filter(|(_, s)| !only_peer || s.peer == peer)
            .filter_map(|(i, s)| Some((s.idle_since?, i)))
            .filter(|(since, _)| now.saturating_sub(*since) >= SHED_GRACE_US)
            .min()
            .map(|(_, i)| i)
    };
    if mine >= per_addr {
        return idlest(true).map_or(Admit::Refuse, Admit::Shed);
    }
    if seats.len() >= max {
        return idlest(false).map_or(Admit::Refuse, Admit::Shed);
    }
    Admit::Take
}

/// A transfer's progress over windows of `WINDOW_US`: it stalls when a window ends
/// with less than `MIN_BYTES` moved in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    start: u64,
    base: u64,
}

impl Pace {
    /// A transfer starting at `now` with `moved` bytes counted so far.
    pub fn new(now: u64, moved: u64) -> Pace {
        Pace { start: now, base: moved }
    }

    /// With `moved` bytes counted in all at `now`: true when the transfer has stalled.
    pub fn stalled(&mut self, now: u64, moved: u64) -> bool {
        if now.saturating_sub(self.start) < WINDOW_US {
            return false;
        }
        if moved.saturating_sub(self.base) < MIN_BYTES {
            return true;
        }
        *self = Pace::new(now, moved);
        false
    }

    /// When the current window ends (the loop's sleep is bounded by it).
    pub fn due(&self) -> u64 {
        self.start.saturating_add(WINDOW_US)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000;

    fn idle(peer: u64, since: u64) -> Seat {
        Seat { peer, idle_since: Some(since) }
    }
    fn busy(peer: u64) -> Seat {
        Seat { peer, idle_since: None }
    }

    #[test]
    fn room_is_taken() {
        assert_eq!(admit(&[], 1, 4, 3, 0), Admit::Take);
        assert_eq!(admit(&[busy(1), busy(2)], 1, 4, 3, 0), Admit::Take);
    }

    #[test]
    fn an_address_at_its_limit_sheds_its_own_idlest() {
        // Address 1 holds its 3; the newcomer from 1 sheds 1's session idle longest,
        // never another address's (whose session is idler still).
        let seats = [idle(2, 0), idle(1, 50 * S), idle(1, 10 * S), busy(1)];
        assert_eq!(admit(&seats, 1, 10, 3, 100 * S), Admit::Shed(2));
        // Busy or just idle: refused.
        let seats = [busy(1), idle(1, 99 * S), busy(1)];
        assert_eq!(admit(&seats, 1, 10, 3, 100 * S), Admit::Refuse);
        // Another address still gets in.
        assert_eq!(admit(&seats, 2, 10, 3, 100 * S), Admit::Take);
    }

    #[test]
    fn a_full_table_sheds_the_idlest_of_anyone() {
        let seats = [busy(1), idle(2, 40 * S), idle(3, 20 * S), busy(4)];
        assert_eq!(admit(&seats, 5, 4, 3, 100 * S), Admit::Shed(2));
        let seats = [busy(1), busy(2), busy(3), busy(4)];
        assert_eq!(admit(&seats, 5, 4, 3, 100 * S), Admit::Refuse);
    }

    #[test]
    fn one_address_leaves_room_for_others() {
        // 20 idle sessions from one address (a NAT) in a table of 24: the address holds
        // 18 at most, so a newcomer from it sheds its oldest, and the rest of the table
        // stays for other addresses.
        let max = 24;
        let per = per_addr_default(max);
        assert_eq!(per, 18);
        let mut seats: alloc::vec::Vec<Seat> = alloc::vec::Vec::new();
        for k in 0..20u64 {
            match admit(&seats, 7, max, per, 10 * S + k * S) {
                Admit::Take => seats.push(idle(7, k * S)),
                Admit::Shed(i) => {
                    seats.remove(i);
                    seats.push(idle(7, k * S));
                }
                Admit::Refuse => panic!("session {k} refused"),
            }
        }
        assert_eq!(seats.len(), per);
        assert!(seats.iter().all(|s| s.idle_since >= Some(2 * S)), "the two oldest went");
        assert_eq!(admit(&seats, 8, max, per, 100 * S), Admit::Take);
        assert_eq!(per_addr_default(1), 1);
        assert_eq!(per_addr_default(4), 3);
    }

    #[test]
    fn a_noop_every_100_s_does_not_hold_a_session() {
        // NOOP leaves `idle_since` alone: a table full of NOOP senders is shed for newcomers.
        let seats: alloc::vec::Vec<Seat> = (0..16).map(|k| idle(1, k * S)).collect();
        assert_eq!(admit(&seats, 1, 16, 16, 1000 * S), Admit::Shed(0));
        assert_eq!(admit(&seats, 2, 16, 16, 1000 * S), Admit::Shed(0));
    }

    #[test]
    fn a_slow_reader_stalls() {
        let mut p = Pace::new(0, 0);
        assert!(!p.stalled(WINDOW_US - 1, 0), "within the first window");
        assert!(!p.stalled(WINDOW_US, 64 * 1024), "the send buffer filled: a good window");
        assert_eq!(p.due(), 2 * WINDOW_US);
        // 1 byte a second from then on.
        assert!(!p.stalled(WINDOW_US + 10 * S, 64 * 1024 + 10));
        assert!(p.stalled(2 * WINDOW_US, 64 * 1024 + 20));
        // A steady 1 KiB/s passes.
        let mut p = Pace::new(0, 0);
        for w in 1..10 {
            assert!(!p.stalled(w * WINDOW_US, w * 20 * 1024), "window {w}");
        }
    }
}
