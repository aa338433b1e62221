//! The Internet checksum (RFC 1071) for Scion's `net`: summed eight bytes at a time
//! (a one's-complement sum of 64-bit big-endian words folds to the same 16-bit sum as
//! one of 16-bit words), and TCP's checksum over IPv4 filled into a packet about to be
//! sent. smoltcp sums 16 bits at a time; `net` lets it leave TCP's transmit checksum
//! out and fills it here, the one pass over every byte a segment costs besides its
//! copy. Received packets are still checked by smoltcp.
#![no_std]
#![forbid(unsafe_code)]

/// The one's-complement sum of `data` as 16-bit big-endian words (an odd last byte
/// padded with a zero byte), folded to 16 bits, not complemented.
pub fn sum(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut add = |w: u64| {
        let (s, carry) = acc.overflowing_add(w);
        acc = s + carry as u64;
    };
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        add(u64::from_be_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut tail = [0u8; 8];
        tail[..rest.len()].copy_from_slice(rest);
        add(u64::from_be_bytes(tail));
    }
    fold(acc)
}

fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// One's-complement sum of two sums.
pub fn combine(a: u16, b: u16) -> u16 {
    fold(a as u64 + b as u64)
}

/// Fill in the TCP checksum of the IPv4 packet `p` (from its IP header on). False, and
/// nothing written, for anything but a whole, unfragmented IPv4 packet carrying TCP.
pub fn fill_tcp_ipv4(p: &mut [u8]) -> bool {
    if p.len() < 20 || p[0] >> 4 != 4 || p[9] != 6 {
        return false;
    }
    let ihl = (p[0] & 0x0f) as usize * 4;
    let total = u16::from_be_bytes([p[2], p[3]]) as usize;
    let fragment = u16::from_be_bytes([p[6], p[7]]) & 0x3fff != 0;
    if ihl < 20 || total < ihl + 20 || total > p.len() || fragment {
        return false;
    }
    let len = (total - ihl) as u16;
    let mut pseudo = [0u8; 12];
    pseudo[..8].copy_from_slice(&p[12..20]);
    pseudo[9] = 6;
    pseudo[10..12].copy_from_slice(&len.to_be_bytes());
    let seg = &mut p[ihl..total];
    seg[16] = 0;
    seg[17] = 0;
    let c = !combine(sum(&pseudo), sum(seg));
    seg[16..18].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// RFC 1071 as written: 16-bit words, end-around carry.
    fn reference(data: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        for w in data.chunks(2) {
            acc += u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]) as u32;
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn the_sum_is_rfc_1071s_for_every_length_and_content() {
        for n in 0..300 {
            for seed in 1..4 {
                let d = bytes(seed * 1000 + n as u64, n);
                assert_eq!(sum(&d), reference(&d), "length {n}, seed {seed}");
            }
        }
        let ones = [0xffu8; 1500];
        assert_eq!(sum(&ones), reference(&ones), "every carry");
        assert_eq!(sum(&[]), 0);
    }

    /// A TCP segment over IPv4 (10.0.2.15:80 → 10.0.2.2:40000, 1460 bytes of data).
    fn packet(data: &[u8]) -> Vec<u8> {
        let total = 20 + 20 + data.len();
        let mut p = Vec::new();
        p.extend_from_slice(&[
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            1,
            0x40,
            0,
            64,
            6,
            0,
            0,
            10,
            0,
            2,
            15,
            10,
            0,
            2,
            2,
        ]);
        p.extend_from_slice(&[0, 80, 0x9c, 0x40, 0, 0, 0, 1, 0, 0, 0, 2, 0x50, 0x18, 0xff, 0xff, 0xaa, 0xbb, 0, 0]);
        p.extend_from_slice(data);
        p
    }

    #[test]
    fn a_filled_segment_checks_as_a_receiver_checks_it() {
        for n in [0usize, 1, 7, 8, 9, 1459, 1460] {
            let mut p = packet(&bytes(n as u64 + 5, n));
            assert!(fill_tcp_ipv4(&mut p));
            // The receiver's check: the sum over pseudo-header and segment is all ones.
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&p[12..20]);
            pseudo.extend_from_slice(&[0, 6]);
            pseudo.extend_from_slice(&((p.len() - 20) as u16).to_be_bytes());
            assert_eq!(combine(reference(&pseudo), reference(&p[20..])), 0xffff, "length {n}");
        }
    }

    #[test]
    fn other_packets_are_left_alone() {
        let mut udp = packet(b"hello");
        udp[9] = 17;
        let before = udp.clone();
        assert!(!fill_tcp_ipv4(&mut udp));
        assert_eq!(udp, before);
        let mut frag = packet(b"hello");
        frag[6] = 0x20; // more fragments
        assert!(!fill_tcp_ipv4(&mut frag));
        let mut short = packet(b"hello");
        short[3] = 200; // says longer than it is
        assert!(!fill_tcp_ipv4(&mut short));
        assert!(!fill_tcp_ipv4(&mut [0x45, 0, 0]));
        let mut v6 = packet(b"x");
        v6[0] = 0x60;
        assert!(!fill_tcp_ipv4(&mut v6));
    }
}
