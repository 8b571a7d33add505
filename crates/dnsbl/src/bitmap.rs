//! The /25 bitmap answer (seed section 7, "DNSBLv6"): pure encoding, no I/O.
//!
//! A botnet's hosts sit close together, so one answer that covers a whole
//! /25 caches far better than one answer per address. The server answers an
//! AAAA query for the /25 with a 128-bit bitmap of which of its 128 addresses
//! are listed.
//!
//! # Query name
//!
//! For the IPv4 address `x.y.z.w` the query is `0.z.y.x.ZONE` when `w < 128`
//! and `1.z.y.x.ZONE` otherwise: the first three octets in reverse order, as
//! in RFC 5782 names, behind one label that says which half of the /24 is
//! meant. The name has four labels, like a classic per-address name; the two
//! are told apart by the query type (AAAA here, A/TXT there).
//!
//! # Bit order
//!
//! Address number `i` of the /25 (`i = w & 127`, so `x.y.z.0` and
//! `x.y.z.128` are number 0) is bit `i` counted from the most significant
//! end of the 128-bit AAAA address: byte `i / 8` of the RDATA, mask
//! `0x80 >> (i % 8)`. Read left to right, the IPv6 address lists the /25 in
//! address order: `8000::` means only the first address is listed, `::1`
//! only the last.
//!
//! An all-zero bitmap is never sent: a /25 with nothing listed gets the same
//! negative answer (NXDOMAIN, or NODATA when the name exists for another
//! reason) as an unlisted classic name, so resolvers cache it negatively.

use std::net::{Ipv4Addr, Ipv6Addr};

/// A /25 block of IPv4 addresses: the unit one bitmap answer covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Block25(u32);

impl Block25 {
    /// The block that holds `ip`.
    pub fn of(ip: Ipv4Addr) -> Self {
        Block25(u32::from(ip) & !127)
    }

    /// The block's first address.
    pub fn base(self) -> Ipv4Addr {
        Ipv4Addr::from(self.0)
    }

    /// The block's first address as a number.
    pub fn base_u32(self) -> u32 {
        self.0
    }

    /// Which half of its /24 the block is: 0 for `.0-.127`, 1 for `.128-.255`.
    pub fn half(self) -> u8 {
        ((self.0 >> 7) & 1) as u8
    }

    /// Position of `ip` inside this block (0..=127), or `None` if it lies outside.
    pub fn offset_of(self, ip: Ipv4Addr) -> Option<u8> {
        let n = u32::from(ip);
        (n & !127 == self.0).then_some((n & 127) as u8)
    }

    /// The address at position `offset` (taken modulo 128).
    pub fn addr_at(self, offset: u8) -> Ipv4Addr {
        Ipv4Addr::from(self.0 | u32::from(offset & 127))
    }

    /// The labels of the query name below the zone, leftmost first:
    /// `[half, z, y, x]` for a block of `x.y.z.w`.
    pub fn labels(self) -> [u8; 4] {
        let [x, y, z, _] = self.0.to_be_bytes();
        [self.half(), z, y, x]
    }

    /// The block named by the labels `half.z.y.x` (leftmost first), if `half` is 0 or 1.
    pub fn from_labels(half: u8, z: u8, y: u8, x: u8) -> Option<Self> {
        if half > 1 {
            return None;
        }
        Some(Block25(
            u32::from_be_bytes([x, y, z, 0]) | (u32::from(half) << 7),
        ))
    }
}

/// Which of the 128 addresses of a [`Block25`] are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Bitmap(u128);

impl Bitmap {
    /// Nothing listed.
    pub const EMPTY: Bitmap = Bitmap(0);
    /// Everything listed.
    pub const FULL: Bitmap = Bitmap(u128::MAX);

    fn mask(offset: u8) -> u128 {
        1u128 << (127 - u32::from(offset & 127))
    }

    /// Whether the address at `offset` (0..=127) is listed.
    pub fn is_listed(self, offset: u8) -> bool {
        self.0 & Self::mask(offset) != 0
    }

    /// Marks the address at `offset` as listed.
    pub fn set(&mut self, offset: u8) {
        self.0 |= Self::mask(offset);
    }

    /// Marks the address at `offset` as not listed.
    pub fn clear(&mut self, offset: u8) {
        self.0 &= !Self::mask(offset);
    }

    /// True when no address is listed.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// How many addresses are listed.
    pub fn count(self) -> u32 {
        self.0.count_ones()
    }

    /// The AAAA address that carries this bitmap.
    pub fn to_ipv6(self) -> Ipv6Addr {
        Ipv6Addr::from(self.0)
    }

    /// The bitmap carried by an AAAA address.
    pub fn from_ipv6(addr: Ipv6Addr) -> Self {
        Bitmap(u128::from(addr))
    }

    /// The bitmap as a number, bit 127 being address 0.
    pub fn bits(self) -> u128 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_bit_round_trips_through_aaaa_in_both_halves() {
        for half in [0u32, 128] {
            for i in 0..128u32 {
                let ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(192, 0, 2, 0)) + half + i);
                let block = Block25::of(ip);
                let offset = block.offset_of(ip).unwrap();
                assert_eq!(u32::from(offset), i);
                let mut b = Bitmap::EMPTY;
                b.set(offset);
                let wire = b.to_ipv6().octets();
                // byte i/8, mask 0x80 >> (i % 8), nothing else
                for (n, byte) in wire.iter().enumerate() {
                    let want = if n as u32 == i / 8 {
                        0x80u8 >> (i % 8)
                    } else {
                        0
                    };
                    assert_eq!(*byte, want, "bit {i} byte {n}");
                }
                let back = Bitmap::from_ipv6(b.to_ipv6());
                assert_eq!(back.count(), 1);
                for j in 0..128u8 {
                    assert_eq!(back.is_listed(j), u32::from(j) == i);
                }
                assert_eq!(block.addr_at(offset), ip);
            }
        }
    }

    #[test]
    fn edges_of_the_24() {
        let cases = [(0u8, 0u8, 0u8), (127, 0, 127), (128, 1, 0), (255, 1, 127)];
        for (w, half, offset) in cases {
            let ip = Ipv4Addr::new(203, 0, 113, w);
            let block = Block25::of(ip);
            assert_eq!(block.half(), half, ".{w}");
            assert_eq!(block.offset_of(ip), Some(offset), ".{w}");
            assert_eq!(block.labels(), [half, 113, 0, 203], ".{w}");
            assert_eq!(Block25::from_labels(half, 113, 0, 203), Some(block));
        }
        assert_eq!(
            Block25::of(Ipv4Addr::new(203, 0, 113, 0)).base(),
            Ipv4Addr::new(203, 0, 113, 0)
        );
        assert_eq!(
            Block25::of(Ipv4Addr::new(203, 0, 113, 255)).base(),
            Ipv4Addr::new(203, 0, 113, 128)
        );
        // .127 and .128 are neighbours but live in different blocks
        let lo = Block25::of(Ipv4Addr::new(203, 0, 113, 127));
        let hi = Block25::of(Ipv4Addr::new(203, 0, 113, 128));
        assert_ne!(lo, hi);
        assert_eq!(lo.offset_of(Ipv4Addr::new(203, 0, 113, 128)), None);
        let mut b = Bitmap::EMPTY;
        b.set(0);
        assert_eq!(b.to_ipv6(), "8000::".parse::<Ipv6Addr>().unwrap());
        let mut b = Bitmap::EMPTY;
        b.set(127);
        assert_eq!(b.to_ipv6(), "::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(Block25::from_labels(2, 0, 0, 0), None);
        assert_eq!(Block25::of(Ipv4Addr::new(255, 255, 255, 255)).half(), 1);
    }

    proptest! {
        #[test]
        fn set_bits_survive_the_wire(offsets in proptest::collection::btree_set(0u8..128, 0..128)) {
            let mut b = Bitmap::EMPTY;
            for &o in &offsets { b.set(o); }
            let back = Bitmap::from_ipv6(b.to_ipv6());
            prop_assert_eq!(back.count() as usize, offsets.len());
            for o in 0..128u8 { prop_assert_eq!(back.is_listed(o), offsets.contains(&o)); }
        }

        #[test]
        fn labels_round_trip(n in any::<u32>()) {
            let ip = Ipv4Addr::from(n);
            let block = Block25::of(ip);
            let [h, z, y, x] = block.labels();
            prop_assert_eq!(Block25::from_labels(h, z, y, x), Some(block));
            prop_assert_eq!(block.addr_at(block.offset_of(ip).unwrap()), ip);
        }
    }
}
