//! A streaming PE header parse and section hasher, for ClamAV's `.mdb`/`.msb`
//! section hash signatures.
//!
//! The first bytes of the file are held until the DOS header, the PE file header,
//! the optional header and the section table are all in (at most [`MAX_HEADERS`]
//! bytes; a file whose headers go further is not hashed). From then on each
//! section's raw bytes are hashed as they stream by, every section with its own
//! digest, so sections in any order, overlapping, or pointing back into the
//! headers (replayed from the held bytes) need no more memory. What depends on the
//! file size (sections cut short or lying past the end, the entry point check) is
//! settled at the end, as ClamAV's `cli_peheader` settles it: section offsets and
//! sizes aligned to the file alignment, sections starting past the end dropped
//! (a file with only such a section is not a PE), the others cut at the end, and
//! the file refused when its entry point is in no section.

use crate::digests::{Digested, Digests};

/// Most header bytes held before the section table must have been seen.
pub const MAX_HEADERS: usize = 64 * 1024;

/// Most sections hashed in one file (the PE loader's own limit is 96).
pub const MAX_SECTIONS: usize = 96;

/// One section as the section table gives it, alignments applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Section {
    /// Virtual address, aligned down to the section alignment.
    pub rva: u32,
    /// Raw offset, aligned down to the file alignment.
    pub raw: u64,
    /// Raw size, aligned up to the file alignment (before cutting at the end).
    pub rsz: u64,
    /// The unaligned header fields the sign-bit check looks at.
    urva: u32,
    uvsz: u32,
    uraw: u32,
    ursz: u32,
}

/// What the headers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    pub sections: Vec<Section>,
    /// Entry point RVA.
    pub entry: u32,
    /// `SizeOfHeaders`, aligned up to the section alignment.
    pub header_size: u64,
    /// The import directory (data directory 1): RVA and size, zero when absent.
    pub imports: (u32, u32),
    /// A PE32+ (64-bit) image: its import thunks are 8 bytes.
    pub plus: bool,
}

/// The headers parsed so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Parse {
    /// This many bytes are needed to go on.
    Need(usize),
    /// Not a PE file, or not one ClamAV would parse.
    NotPe,
    Pe(Layout),
}

fn u16_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_le_bytes(
        b.get(at..at + 2)?.try_into().ok()?,
    )))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// `o` aligned down to `a` (unchanged with no alignment).
fn align_down(o: u64, a: u64) -> u64 {
    o.checked_div(a).map_or(o, |q| q * a)
}

/// `o` aligned up to `a` (unchanged with no alignment).
fn align_up(o: u64, a: u64) -> u64 {
    if a == 0 {
        o
    } else {
        o.div_ceil(a).saturating_mul(a)
    }
}

/// Parses the headers at the start of `head`, or says how many bytes are needed.
pub(crate) fn parse(head: &[u8]) -> Parse {
    let need = |n: usize| {
        if n > MAX_HEADERS {
            Parse::NotPe
        } else {
            Parse::Need(n)
        }
    };
    if head.len() < 64 {
        return need(64);
    }
    if !(head.starts_with(b"MZ") || head.starts_with(b"ZM")) {
        return Parse::NotPe;
    }
    let Some(pe) = u32_at(head, 0x3c).map(|v| v as usize) else {
        return Parse::NotPe;
    };
    if pe == 0 {
        return Parse::NotPe;
    }
    // File header: signature, machine, sections, ..., optional header size,
    // characteristics; then the optional header.
    let opt = pe.saturating_add(24);
    if head.len() < opt {
        return need(opt);
    }
    if head[pe..pe + 4] != *b"PE\0\0" {
        return Parse::NotPe;
    }
    let (Some(nsections), Some(opt_size), Some(chars)) = (
        u16_at(head, pe + 6),
        u16_at(head, pe + 20),
        u16_at(head, pe + 22),
    ) else {
        return Parse::NotPe;
    };
    let (nsections, opt_size) = (nsections as usize, opt_size as usize);
    if chars & 0x2000 == 0 && chars & 0x0002 == 0 {
        return Parse::NotPe; // neither a DLL nor an executable image
    }
    if nsections == 0 || opt_size < 96 {
        return Parse::NotPe;
    }
    let table = opt + opt_size;
    let end = table + nsections * 40;
    if head.len() < end {
        return need(end);
    }
    let o = &head[opt..table];
    let plus = u16_at(o, 0) == Some(0x20b);
    let fixed = if plus { 112 } else { 96 };
    if opt_size < fixed {
        return Parse::NotPe;
    }
    let field = |at: usize| u32_at(o, at).unwrap_or(0);
    let entry = field(16);
    let salign = u64::from(field(32));
    let mut falign = u64::from(field(36));
    let size_of_headers = u64::from(field(60));
    let dirs = field(fixed - 4).min(16) as usize;
    if opt_size < fixed + dirs * 8 {
        return Parse::NotPe;
    }
    // Data directories beyond the count given do not exist, as for the loader.
    let dir = |i: usize| {
        if i < dirs {
            (field(fixed + i * 8), field(fixed + i * 8 + 4))
        } else {
            (0, 0)
        }
    };
    let imports = dir(1);
    let raw_section = |i: usize| &head[table + i * 40..table + (i + 1) * 40];
    // A file alignment the sections do not follow, where 0x200 fits them: ClamAV
    // falls back to 0x200.
    if falign != 0x200
        && (0..nsections).any(|i| {
            let s = raw_section(i);
            let (ursz, uraw) = (u64::from(field_at(s, 16)), u64::from(field_at(s, 20)));
            falign != 0 && ursz != 0 && uraw % falign != 0 && uraw % 0x200 == 0
        })
    {
        falign = 0x200;
    }
    let sections = (0..nsections)
        .map(|i| {
            let s = raw_section(i);
            let (uvsz, urva) = (field_at(s, 8), field_at(s, 12));
            let (ursz, uraw) = (field_at(s, 16), field_at(s, 20));
            Section {
                rva: align_down(u64::from(urva), salign) as u32,
                raw: align_down(u64::from(uraw), falign),
                rsz: align_up(u64::from(ursz), falign),
                urva,
                uvsz,
                uraw,
                ursz,
            }
        })
        .collect();
    Parse::Pe(Layout {
        sections,
        entry,
        header_size: align_up(size_of_headers, salign),
        imports,
        plus,
    })
}

fn field_at(s: &[u8], at: usize) -> u32 {
    u32_at(s, at).unwrap_or(0)
}

impl Layout {
    /// The sections as they are in a file of `size` bytes, or `None` when ClamAV
    /// would not take the file for a PE: past-the-end sections dropped (with no
    /// other left, not a PE), the others cut at the end, values with the sign bit
    /// set refused, and the entry point in the headers or in a section.
    /// Each kept section comes with its index in the table.
    pub fn settle(&self, size: u64) -> Option<Vec<(usize, Section)>> {
        let mut kept: Vec<(usize, Section)> = Vec::with_capacity(self.sections.len());
        let mut left = self.sections.len();
        for (i, s) in self.sections.iter().enumerate() {
            let mut s = *s;
            if s.rsz != 0 {
                if s.raw >= size || u64::from(s.uraw) >= size {
                    if left == 1 {
                        return None;
                    }
                    left -= 1;
                    continue;
                }
                if s.raw + s.rsz > size {
                    s.rsz = size - s.raw;
                }
            }
            if s.urva >> 31 != 0
                || s.uvsz >> 31 != 0
                || (s.rsz != 0 && s.uraw >> 31 != 0)
                || s.ursz >> 31 != 0
            {
                return None;
            }
            kept.push((i, s));
        }
        let entry = u64::from(self.entry);
        let entry_ok = if entry < self.header_size {
            entry < size
        } else {
            kept.iter().rev().any(|(_, s)| {
                s.rsz != 0 && u64::from(s.rva) <= entry && s.rsz > entry - u64::from(s.rva)
            })
        };
        entry_ok.then_some(kept)
    }
}

/// A section's size in the file and its digests (those asked for).
pub(crate) type SectionHash = Digested;

enum State {
    Headers(Vec<u8>),
    Hashing {
        layout: Layout,
        digests: Vec<Digests>,
    },
    NotPe,
}

/// Which sections one digest kind needs: all of them, or those whose size in the
/// file can reach the smallest size a signature gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wanted {
    pub any_size: bool,
    pub min_size: u64,
}

impl Wanted {
    /// Whether a section of (aligned) raw size `rsz` may match: its size in the file
    /// is `rsz`, or less when the file ends inside it.
    fn section(self, rsz: u64) -> bool {
        self.any_size || self.min_size <= rsz
    }
}

/// Hashes the sections of one PE file as its bytes arrive.
pub(crate) struct PeHasher {
    state: State,
    /// Bytes seen.
    pos: u64,
    /// Which digests to compute: MD5, SHA-1, SHA-256 (`None`: none of that kind).
    kinds: [Option<Wanted>; 3],
}

impl PeHasher {
    pub fn new(kinds: [Option<Wanted>; 3]) -> Self {
        Self {
            state: State::Headers(Vec::new()),
            pos: 0,
            kinds,
        }
    }

    /// Takes the next bytes of the file.
    pub fn feed(&mut self, data: &[u8]) {
        let start = self.pos;
        self.pos += data.len() as u64;
        match &mut self.state {
            State::NotPe => {}
            State::Hashing { layout, digests } => update(layout, digests, start, data),
            State::Headers(head) => {
                head.extend_from_slice(data);
                self.settle_headers(false);
            }
        }
    }

    /// Leaves the header state once the headers are all in (or, at the end of the
    /// file, with whatever came).
    fn settle_headers(&mut self, at_end: bool) {
        let State::Headers(head) = &mut self.state else {
            return;
        };
        match parse(head) {
            Parse::Need(n) if n > head.len() && !at_end => {}
            Parse::Need(_) | Parse::NotPe => self.state = State::NotPe,
            Parse::Pe(layout) if layout.sections.len() > MAX_SECTIONS => self.state = State::NotPe,
            Parse::Pe(layout) => {
                let head = std::mem::take(head);
                let [m, s1, s2] = self
                    .kinds
                    .map(|k| move |rsz: u64| k.is_some_and(|w: Wanted| w.section(rsz)));
                // Only the digests some signature could match are computed.
                let mut digests: Vec<Digests> = layout
                    .sections
                    .iter()
                    .map(|s| Digests::new([m(s.rsz), s1(s.rsz), s2(s.rsz)]))
                    .collect();
                // The held bytes are the file from its start: sections that begin
                // there get them now.
                update(&layout, &mut digests, 0, &head);
                self.state = State::Hashing { layout, digests };
            }
        }
    }

    /// Ends the file: the digests of its sections as ClamAV sees them, or nothing
    /// when it is not a PE file ClamAV would parse.
    pub fn finish(mut self) -> Vec<SectionHash> {
        self.settle_headers(true);
        let State::Hashing { layout, digests } = self.state else {
            return Vec::new();
        };
        let Some(kept) = layout.settle(self.pos) else {
            return Vec::new();
        };
        let mut digests: Vec<Option<Digests>> = digests.into_iter().map(Some).collect();
        let mut out = Vec::new();
        for (i, s) in kept {
            let Some(d) = digests[i].take() else {
                continue;
            };
            if s.rsz == 0 {
                continue;
            }
            out.push(d.finish(s.rsz));
        }
        out
    }
}

/// Hashes the part of `data` (at file offset `start`) inside each section.
fn update(layout: &Layout, digests: &mut [Digests], start: u64, data: &[u8]) {
    let end = start + data.len() as u64;
    for (s, d) in layout.sections.iter().zip(digests) {
        let (from, to) = (s.raw.max(start), (s.raw + s.rsz).min(end));
        if from >= to {
            continue;
        }
        d.update(&data[(from - start) as usize..(to - start) as usize]);
    }
}

/// A small PE32 image for tests: sections `(raw offset, raw size, fill byte)`
/// after 0x200 bytes of headers (room for three), file and section alignment 0x200
/// and 0x1000.
#[cfg(test)]
pub(crate) fn test_image(sections: &[(u32, u32, u8)]) -> Vec<u8> {
    let mut f = vec![0u8; 0x200];
    f[..2].copy_from_slice(b"MZ");
    f[0x3c..0x40].copy_from_slice(&0x80u32.to_le_bytes());
    f[0x80..0x84].copy_from_slice(b"PE\0\0");
    f[0x84..0x86].copy_from_slice(&0x14cu16.to_le_bytes());
    f[0x86..0x88].copy_from_slice(&(sections.len() as u16).to_le_bytes());
    f[0x94..0x96].copy_from_slice(&224u16.to_le_bytes());
    f[0x96..0x98].copy_from_slice(&0x0102u16.to_le_bytes());
    let o = 0x98;
    f[o..o + 2].copy_from_slice(&0x10bu16.to_le_bytes());
    f[o + 16..o + 20].copy_from_slice(&0x1000u32.to_le_bytes()); // entry point
    f[o + 32..o + 36].copy_from_slice(&0x1000u32.to_le_bytes());
    f[o + 36..o + 40].copy_from_slice(&0x200u32.to_le_bytes());
    f[o + 56..o + 60].copy_from_slice(&0x10000u32.to_le_bytes()); // image size
    f[o + 60..o + 64].copy_from_slice(&0x200u32.to_le_bytes());
    f[o + 68..o + 70].copy_from_slice(&2u16.to_le_bytes());
    f[o + 92..o + 96].copy_from_slice(&16u32.to_le_bytes());
    let table = o + 224;
    let mut end = 0x200usize;
    for (i, &(raw, size, _)) in sections.iter().enumerate() {
        let s = table + i * 40;
        f[s..s + 5].copy_from_slice(b".sect");
        f[s + 8..s + 12].copy_from_slice(&0x1000u32.to_le_bytes());
        f[s + 12..s + 16].copy_from_slice(&(0x1000 * (i as u32 + 1)).to_le_bytes());
        f[s + 16..s + 20].copy_from_slice(&size.to_le_bytes());
        f[s + 20..s + 24].copy_from_slice(&raw.to_le_bytes());
        f[s + 36..s + 40].copy_from_slice(&0x6000_0020u32.to_le_bytes());
        end = end.max((raw + size) as usize);
    }
    f.resize(end, 0);
    for &(raw, size, fill) in sections {
        f[raw as usize..(raw + size) as usize].fill(fill);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use md5::Digest;
    use proptest::prelude::*;

    fn hashes(file: &[u8], chunk: usize) -> Vec<SectionHash> {
        let all = Some(Wanted {
            any_size: true,
            min_size: 0,
        });
        let mut h = PeHasher::new([all; 3]);
        for c in file.chunks(chunk.max(1)) {
            h.feed(c);
        }
        h.finish()
    }

    #[test]
    fn sections_hashed_as_they_stream() {
        let file = test_image(&[(0x200, 0x200, b'A'), (0x400, 0x400, b'B')]);
        let want: [u8; 16] = md5::Md5::digest(vec![b'B'; 0x400]).into();
        for chunk in [1, 7, 512, 100_000] {
            let got = hashes(&file, chunk);
            assert_eq!(got.len(), 2);
            assert_eq!(got[0].size, 0x200);
            assert_eq!(got[1].size, 0x400);
            assert_eq!(got[1].md5, Some(want));
        }
    }

    #[test]
    fn only_sections_that_may_match_are_hashed() {
        let file = test_image(&[(0x200, 0x200, b'A'), (0x400, 0x400, b'B')]);
        let big = Wanted {
            any_size: false,
            min_size: 0x300,
        };
        let mut h = PeHasher::new([Some(big), None, None]);
        h.feed(&file);
        let got = h.finish();
        assert_eq!(got[0].md5, None, "0x200 bytes can never be 0x300");
        assert!(got[1].md5.is_some());
        assert_eq!((got[0].sha1, got[1].sha256), (None, None));
    }

    #[test]
    fn cut_and_missing_sections() {
        let mut file = test_image(&[(0x200, 0x200, b'A'), (0x400, 0x400, b'B')]);
        file.truncate(0x500);
        let got = hashes(&file, 64);
        assert_eq!(got[1].size, 0x100, "cut at the end of the file");
        let want: [u8; 16] = md5::Md5::digest(vec![b'B'; 0x100]).into();
        assert_eq!(got[1].md5, Some(want));
        file.truncate(0x300);
        assert_eq!(
            hashes(&file, 64).len(),
            1,
            "a section past the end is dropped"
        );
    }

    #[test]
    fn not_pe() {
        assert!(hashes(b"MZ not really", 3).is_empty());
        let mut file = test_image(&[(0x200, 0x200, b'A')]);
        file[0x80] = b'X';
        assert!(hashes(&file, 64).is_empty());
        let mut file = test_image(&[(0x200, 0x200, b'A')]);
        file[0x96] = 0; // neither an executable nor a DLL
        assert!(hashes(&file, 64).is_empty());
        let mut file = test_image(&[(0x200, 0x200, b'A')]);
        file[0x98 + 16..0x98 + 20].copy_from_slice(&0x9000u32.to_le_bytes());
        assert!(hashes(&file, 64).is_empty(), "entry point in no section");
    }

    proptest! {
        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..2048), chunk in 1usize..300) {
            let _ = parse(&data);
            let _ = hashes(&data, chunk);
        }

        #[test]
        fn mutated_headers_never_panic_and_splits_agree(
            sections in proptest::collection::vec((1u32..6, 1u32..4, any::<u8>()), 1..4),
            flips in proptest::collection::vec((0usize..0x200, any::<u8>()), 0..8),
            chunk in 1usize..700,
        ) {
            let mut raw = 0x200;
            let layout: Vec<(u32, u32, u8)> = sections.iter().map(|&(_, size, fill)| {
                let s = (raw, size * 0x200, fill);
                raw += size * 0x200;
                s
            }).collect();
            let mut file = test_image(&layout);
            for (at, b) in flips {
                file[at] = b;
            }
            prop_assert_eq!(hashes(&file, chunk), hashes(&file, file.len()));
        }
    }
}
