//! The index of literal anchors that finds where a body signature may match.
//!
//! Chosen by measurement (see the crate's report in `examples/`): anchors of four
//! bytes or more are found through their first four bytes (a 4-gram) in a two-hash
//! Bloom filter of 8 Mbit (1 MiB), backed by an exact hash map; anchors of three
//! bytes through a bitmap of every 3-gram (16 Mbit, 2 MiB, allocated only when
//! there are such anchors), anchors of two through a bitmap of every 2-gram (8 KiB),
//! each backed by a hash map too. With 10,000 random signatures an `aho-corasick`
//! automaton alone scanned about 65-75 MB/s, its 12 MiB of states missing the cache
//! on nearly every byte; even a few thousand short anchors in it held 200,000 logical
//! subsignatures to about 45 MB/s, where the bit tests cost a few loads per byte
//! whatever the number of signatures. The automaton remains for
//! [`crate::DatabaseBuilder::automaton_only`], for comparison.
//!
//! Both carry their state across fed chunks: the automaton its state id, the 4-gram
//! scan the position of the next gram (the three bytes before it stay in the
//! matcher's window), so an anchor split between two chunks is found without
//! rescanning anything.

use std::collections::HashMap;

use aho_corasick::nfa::contiguous::NFA;
use aho_corasick::MatchKind;

use crate::error::ScanError;

/// log2 of the number of bits in the 4-gram filter (1 MiB).
const GRAM_BITS: u32 = 23;

/// The two bit positions of a 4-gram in the filter (a Bloom filter with two hashes:
/// with 150,000 anchors about 0.1% of text positions reach the hash map).
#[inline]
pub(crate) fn gram_slots(gram: u32) -> (usize, usize) {
    (
        (gram.wrapping_mul(0x9e37_79b1) >> (32 - GRAM_BITS)) as usize,
        (gram
            .wrapping_mul(0x85eb_ca77)
            .rotate_left(13)
            .wrapping_mul(0xc2b2_ae3d)
            >> (32 - GRAM_BITS)) as usize,
    )
}

/// Whether the filter may hold `gram`.
#[inline]
pub(crate) fn gram_maybe(bits: &[u64], gram: u32) -> bool {
    let (a, b) = gram_slots(gram);
    bits[a >> 6] & (1 << (a & 63)) != 0 && bits[b >> 6] & (1 << (b & 63)) != 0
}

/// A hasher for 4-gram keys: one multiply instead of SipHash (the keys are not chosen
/// by the sender; the filter in front keeps lookups rare anyway).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GramHasher(u64);

impl std::hash::Hasher for GramHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Map from 4-gram to pattern indices.
pub(crate) type GramMap = HashMap<u32, Vec<u32>, std::hash::BuildHasherDefault<GramHasher>>;

/// Where the matcher looks for anchors.
#[derive(Debug)]
pub(crate) struct AnchorIndex {
    /// All anchors when the gram indexes are off (else none).
    pub automaton: Option<NFA>,
    /// Automaton pattern id → pattern index in the database.
    pub automaton_patterns: Vec<u32>,
    /// One bit per 4-gram slot that some anchor starts with.
    pub gram_bits: Vec<u64>,
    /// First four bytes of an anchor → pattern indices.
    pub grams: GramMap,
    /// One bit per 3-gram that a three-byte anchor is (empty when there are none).
    pub tri_bits: Vec<u64>,
    /// Three-byte anchor (little-endian in the low bytes) → pattern indices.
    pub tris: GramMap,
    /// One bit per 2-gram that a two-byte anchor is (empty when there are none).
    pub bi_bits: Vec<u64>,
    /// Two-byte anchor → pattern indices.
    pub bis: GramMap,
}

/// Whether bit `i` is set.
#[inline]
pub(crate) fn bit(bits: &[u64], i: u32) -> bool {
    bits[(i >> 6) as usize] & (1 << (i & 63)) != 0
}

impl AnchorIndex {
    /// Indexes `anchors` (pattern index = position in the slice).
    pub fn build(anchors: &[&[u8]], use_grams: bool) -> Result<Self, ScanError> {
        let mut short = Vec::new();
        let mut automaton_patterns = Vec::new();
        let mut gram_bits = Vec::new();
        let mut grams = GramMap::default();
        let (mut tri_bits, mut tris) = (Vec::new(), GramMap::default());
        let (mut bi_bits, mut bis) = (Vec::new(), GramMap::default());
        for (pid, a) in anchors.iter().enumerate() {
            if use_grams && a.len() == 3 {
                if tri_bits.is_empty() {
                    tri_bits = vec![0u64; 1 << (24 - 6)];
                }
                let g = u32::from_le_bytes([a[0], a[1], a[2], 0]);
                tri_bits[(g >> 6) as usize] |= 1 << (g & 63);
                tris.entry(g).or_default().push(pid as u32);
            } else if use_grams && a.len() == 2 {
                if bi_bits.is_empty() {
                    bi_bits = vec![0u64; 1 << (16 - 6)];
                }
                let g = u32::from(u16::from_le_bytes([a[0], a[1]]));
                bi_bits[(g >> 6) as usize] |= 1 << (g & 63);
                bis.entry(g).or_default().push(pid as u32);
            } else if use_grams && a.len() >= 4 {
                if gram_bits.is_empty() {
                    gram_bits = vec![0u64; 1 << (GRAM_BITS - 6)];
                }
                let g = u32::from_le_bytes([a[0], a[1], a[2], a[3]]);
                let (a, b) = gram_slots(g);
                gram_bits[a >> 6] |= 1 << (a & 63);
                gram_bits[b >> 6] |= 1 << (b & 63);
                grams.entry(g).or_default().push(pid as u32);
            } else {
                short.push(*a);
                automaton_patterns.push(pid as u32);
            }
        }
        let automaton = if short.is_empty() {
            None
        } else {
            Some(
                NFA::builder()
                    .match_kind(MatchKind::Standard)
                    .prefilter(false)
                    .build(&short)
                    .map_err(|e| ScanError::Build(e.to_string()))?,
            )
        };
        Ok(Self {
            automaton,
            automaton_patterns,
            gram_bits,
            grams,
            tri_bits,
            tris,
            bi_bits,
            bis,
        })
    }

    /// Whether any gram index (4-, 3- or 2-byte) holds an anchor.
    pub fn has_grams(&self) -> bool {
        !self.gram_bits.is_empty() || !self.tri_bits.is_empty() || !self.bi_bits.is_empty()
    }

    /// Heap bytes used (approximate for the hash map).
    pub fn memory(&self) -> usize {
        use aho_corasick::automaton::Automaton;
        self.automaton.as_ref().map_or(0, |a| a.memory_usage())
            + (self.gram_bits.len() + self.tri_bits.len() + self.bi_bits.len()) * 8
            + (self.grams.len() + self.tris.len() + self.bis.len()) * 48
    }
}
