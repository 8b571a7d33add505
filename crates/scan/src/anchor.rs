//! The index of literal anchors that finds where a body signature may match.
//!
//! Chosen by measurement (see the crate's report in `examples/`): anchors of four
//! bytes or more are found through their first four bytes (a 4-gram) in a blocked
//! Bloom filter of 8 Mbit (1 MiB, three bits in one word per gram: [`gram_block`]),
//! backed by an exact hash map; anchors of three
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

/// Where a 4-gram lies in the filter: a word and three bits in it (a blocked
/// Bloom filter: one load per text position, and the three bits tested at once,
/// so there is no second, unpredictable branch as with bits in two words). All
/// from one multiply: the word from the top bits, and the three bits from the
/// middle ones (the low bits of a product depend on the low bits of the gram
/// alone) through a table of 1,024 masks, which costs a load from the L1 cache
/// where computing them costs a dozen instructions on every byte. With 450,000
/// anchors a word has about 16% of its bits set, so about 0.5% of text
/// positions reach the hash map.
#[inline(always)]
fn gram_block(gram: u32) -> (usize, u64) {
    let h = u64::from(gram).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let word = (h >> (64 - (GRAM_BITS - 6))) as usize;
    (word, GRAM_MASKS[(h >> 24) as usize % GRAM_MASKS.len()])
}

/// Three distinct bits per entry, chosen by a fixed pseudo-random sequence.
static GRAM_MASKS: [u64; 1024] = gram_masks();

const fn gram_masks() -> [u64; 1024] {
    let mut masks = [0u64; 1024];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut i = 0;
    while i < masks.len() {
        let mut mask = 0u64;
        while mask.count_ones() < 3 {
            // xorshift64
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            mask |= 1 << (state >> 58);
        }
        masks[i] = mask;
        i += 1;
    }
    masks
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
    /// The blocked Bloom filter of the 4-grams anchors start with ([`gram_block`]).
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

/// Words in the 4-gram filter, the 3-gram and the 2-gram bitmaps.
const GRAM_WORDS: usize = 1 << (GRAM_BITS - 6);
const TRI_WORDS: usize = 1 << (24 - 6);
const BI_WORDS: usize = 1 << (16 - 6);

/// Whether bit `i` is set, in a bitmap whose size the compiler knows (so the
/// test needs no bounds check).
#[inline(always)]
fn test<const N: usize>(bits: &[u64; N], i: usize) -> bool {
    bits[(i >> 6) % N] & (1 << (i & 63)) != 0
}

/// The gram indexes as fixed-size arrays, for [`AnchorIndex::scan_grams`]'s loop.
struct Bitmaps<'a> {
    four: &'a [u64; GRAM_WORDS],
    tri: &'a [u64; TRI_WORDS],
    bi: &'a [u64; BI_WORDS],
}

impl AnchorIndex {
    /// Calls `found(i, patterns)` for every position `i` of `text` but its last
    /// three where an anchor in a gram index starts: 4-grams first, then 3- and
    /// 2-grams, in position order. The matcher spends most of its time here, on
    /// every byte of every file, so the loop is specialised for the indexes the
    /// database has and tests bits without bounds checks.
    pub fn scan_grams(&self, text: &[u8], found: impl FnMut(usize, &[u32])) {
        // Stand-ins for the bitmaps a database lacks (zeros, never touched:
        // they cost no memory).
        static EMPTY_GRAM: [u64; GRAM_WORDS] = [0; GRAM_WORDS];
        static EMPTY_TRIS: [u64; TRI_WORDS] = [0; TRI_WORDS];
        static EMPTY_BI: [u64; BI_WORDS] = [0; BI_WORDS];
        let maps = Bitmaps {
            four: self.gram_bits.as_slice().try_into().unwrap_or(&EMPTY_GRAM),
            tri: self.tri_bits.as_slice().try_into().unwrap_or(&EMPTY_TRIS),
            bi: self.bi_bits.as_slice().try_into().unwrap_or(&EMPTY_BI),
        };
        match (!self.tri_bits.is_empty(), !self.bi_bits.is_empty()) {
            (false, false) => self.scan::<false, false>(&maps, text, found),
            (true, false) => self.scan::<true, false>(&maps, text, found),
            (false, true) => self.scan::<false, true>(&maps, text, found),
            (true, true) => self.scan::<true, true>(&maps, text, found),
        }
    }

    /// The loop: the bit tests alone, the positions that pass any of them
    /// noted in a small array, and the hash maps looked up for those in
    /// batches ([`Self::resolve`]), so that no call in the loop makes the
    /// compiler keep its pointers on the stack.
    #[inline(always)]
    fn scan<const TRI: bool, const BI: bool>(
        &self,
        maps: &Bitmaps<'_>,
        text: &[u8],
        mut found: impl FnMut(usize, &[u32]),
    ) {
        let mut passed = [0usize; 128];
        let mut n = 0;
        for (i, w) in text.windows(4).enumerate() {
            let g = u32::from_le_bytes(w.try_into().expect("a window of four"));
            let (word, mask) = gram_block(g);
            let four = maps.four[word % GRAM_WORDS] & mask == mask;
            let tri = TRI && test(maps.tri, (g & 0x00ff_ffff) as usize);
            let bi = BI && test(maps.bi, (g & 0xffff) as usize);
            if four | tri | bi {
                passed[n % passed.len()] = i;
                n += 1;
                if n == passed.len() {
                    self.resolve::<TRI, BI>(maps, text, &passed, &mut found);
                    n = 0;
                }
            }
        }
        self.resolve::<TRI, BI>(maps, text, &passed[..n], &mut found);
    }

    /// Looks up the anchors at positions of `text` that passed a bit test.
    #[inline(never)]
    fn resolve<const TRI: bool, const BI: bool>(
        &self,
        maps: &Bitmaps<'_>,
        text: &[u8],
        passed: &[usize],
        found: &mut impl FnMut(usize, &[u32]),
    ) {
        for &i in passed {
            let g = u32::from_le_bytes(text[i..i + 4].try_into().expect("four bytes"));
            let (word, mask) = gram_block(g);
            if maps.four[word % GRAM_WORDS] & mask == mask {
                if let Some(pids) = self.grams.get(&g) {
                    found(i, pids);
                }
            }
            let g3 = g & 0x00ff_ffff;
            if TRI && test(maps.tri, g3 as usize) {
                if let Some(pids) = self.tris.get(&g3) {
                    found(i, pids);
                }
            }
            let g2 = g & 0xffff;
            if BI && test(maps.bi, g2 as usize) {
                if let Some(pids) = self.bis.get(&g2) {
                    found(i, pids);
                }
            }
        }
    }

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
                let (word, mask) = gram_block(g);
                gram_bits[word] |= mask;
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every (position, pattern) where an anchor's gram starts, found the slow way.
    fn naive(anchors: &[Vec<u8>], text: &[u8]) -> Vec<(usize, u32)> {
        let mut out = Vec::new();
        for i in 0..text.len().saturating_sub(3) {
            for (pid, a) in anchors.iter().enumerate() {
                let n = a.len().min(4);
                if text[i..i + n] == a[..n] {
                    out.push((i, pid as u32));
                }
            }
        }
        out.sort_unstable();
        out
    }

    fn found(index: &AnchorIndex, text: &[u8]) -> Vec<(usize, u32)> {
        let mut out = Vec::new();
        index.scan_grams(text, |i, pids| out.extend(pids.iter().map(|&p| (i, p))));
        out.sort_unstable();
        out
    }

    proptest! {
        /// The filters let through every position an anchor starts at, and the
        /// batching of passed positions loses none (a four-letter alphabet
        /// makes hundreds of them per text).
        #[test]
        fn scan_grams_finds_what_a_naive_search_finds(
            anchors in proptest::collection::vec(
                proptest::collection::vec(b'a'..=b'd', 2..7), 1..40),
            text in proptest::collection::vec(b'a'..=b'd', 0..2000),
        ) {
            let refs: Vec<&[u8]> = anchors.iter().map(Vec::as_slice).collect();
            let index = AnchorIndex::build(&refs, true).unwrap();
            prop_assert_eq!(found(&index, &text), naive(&anchors, &text));
        }
    }

    #[test]
    fn each_gram_index_alone() {
        for anchors in [
            vec![b"abcdef".to_vec()],
            vec![b"abc".to_vec()],
            vec![b"ab".to_vec()],
        ] {
            let refs: Vec<&[u8]> = anchors.iter().map(Vec::as_slice).collect();
            let index = AnchorIndex::build(&refs, true).unwrap();
            let text = b"xxabcdefxxabcdxxab-";
            assert_eq!(found(&index, text), naive(&anchors, text), "{anchors:?}");
            assert!(!found(&index, text).is_empty());
        }
    }

    #[test]
    fn masks_have_three_bits() {
        assert!(GRAM_MASKS.iter().all(|m| m.count_ones() == 3));
    }
}
