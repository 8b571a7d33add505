//! VBA macro projects ([MS-OVBA]): the run-length compression of the `dir` stream
//! and of the modules' source code, and the `dir` stream's records that give each
//! module's stream name and where its compressed source starts.

/// A chunk never decompresses to more than this (MS-OVBA §2.4.1.1.4).
const CHUNK: usize = 4096;

/// How decompression ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inflate {
    /// The whole container was read.
    Done,
    /// The container is malformed: what came before the fault is kept.
    Malformed,
    /// The output reached the cap: what came before it is kept.
    Capped,
}

/// Decompresses a CompressedContainer (MS-OVBA §2.4.1.3.1) into at most `cap`
/// bytes. Never reads out of bounds, never loops: every step consumes input.
pub(crate) fn decompress(input: &[u8], cap: usize) -> (Vec<u8>, Inflate) {
    let mut out = Vec::new();
    let status = decompress_into(input, cap, &mut out);
    (out, status)
}

fn decompress_into(input: &[u8], cap: usize, out: &mut Vec<u8>) -> Inflate {
    // §2.4.1.1.1: the container opens with the signature byte 0x01.
    if input.first() != Some(&1) {
        return Inflate::Malformed;
    }
    let mut pos = 1;
    while pos < input.len() {
        let Some(h) = input.get(pos..pos + 2) else {
            return Inflate::Malformed;
        };
        let header = u16::from_le_bytes([h[0], h[1]]);
        // §2.4.1.1.5: size - 3 in bits 0-11, signature 0b011 in bits 12-14,
        // compressed flag in bit 15.
        if (header >> 12) & 7 != 3 {
            return Inflate::Malformed;
        }
        let size = usize::from(header & 0x0fff) + 3;
        let end = (pos + size).min(input.len());
        pos += 2;
        let start = out.len();
        if header & 0x8000 == 0 {
            // §2.4.1.3.3: a raw chunk is 4096 literal bytes.
            let raw = &input[pos..(pos + CHUNK).min(input.len())];
            if out.len() + raw.len() > cap {
                out.extend_from_slice(&raw[..cap - out.len()]);
                return Inflate::Capped;
            }
            out.extend_from_slice(raw);
            if raw.len() < CHUNK {
                return Inflate::Malformed;
            }
            pos += CHUNK;
            continue;
        }
        while pos < end {
            let flags = input[pos];
            pos += 1;
            for bit in 0..8 {
                if pos >= end {
                    break;
                }
                if flags >> bit & 1 == 0 {
                    // §2.4.1.3.5: a literal token.
                    if out.len() >= cap {
                        return Inflate::Capped;
                    }
                    out.push(input[pos]);
                    pos += 1;
                    continue;
                }
                // §2.4.1.3.19.2: a copy token, its split of offset and length
                // set by how far into the chunk the output is.
                let Some(t) = input.get(pos..pos + 2) else {
                    return Inflate::Malformed;
                };
                pos += 2;
                let token = u16::from_le_bytes([t[0], t[1]]);
                let done = out.len() - start;
                let bits = (usize::BITS - done.saturating_sub(1).leading_zeros()).max(4);
                let length_mask = 0xffffu16 >> bits;
                let length = usize::from(token & length_mask) + 3;
                let offset = usize::from((token & !length_mask) >> (16 - bits)) + 1;
                if offset > done || done + length > CHUNK {
                    return Inflate::Malformed;
                }
                for _ in 0..length {
                    if out.len() >= cap {
                        return Inflate::Capped;
                    }
                    out.push(out[out.len() - offset]);
                }
            }
        }
        pos = end;
    }
    Inflate::Done
}

/// One module of a VBA project, as the `dir` stream describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Module {
    /// Name of the stream holding the module (MODULESTREAMNAME, from its
    /// Unicode form when there is one).
    pub stream: String,
    /// Where the compressed source starts in that stream (MODULEOFFSET).
    pub offset: u32,
}

/// The records of a decompressed `dir` stream (MS-OVBA §2.3.4.2): id and data,
/// in order, up to the terminator or the first that does not fit.
fn records(dir: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let head = dir.get(pos..pos + 6)?;
        let id = u16::from_le_bytes([head[0], head[1]]);
        // §2.3.4.2.1.11 PROJECTVERSION: the size field is a reserved 4, and the
        // record holds 6 bytes.
        let len = if id == 0x0009 {
            6
        } else {
            u32::from_le_bytes([head[2], head[3], head[4], head[5]]) as usize
        };
        let data = dir.get(pos + 6..(pos + 6).checked_add(len)?)?;
        pos += 6 + len;
        // The dir stream terminator.
        (id != 0x0010).then_some((id, data))
    })
}

/// The project's code page (PROJECTCODEPAGE, §2.3.4.2.1.4), which the modules'
/// source is in; ISO-8859-1 when the record is missing, as ClamAV takes it.
pub(crate) fn codepage(dir: &[u8]) -> u16 {
    records(dir)
        .find(|&(id, d)| id == 0x0003 && d.len() == 2)
        .map_or(28591, |(_, d)| u16::from_le_bytes([d[0], d[1]]))
}

/// The modules listed in a decompressed `dir` stream (MS-OVBA §2.3.4.2); a
/// module with no stream name is left out.
pub(crate) fn modules(dir: &[u8]) -> Vec<Module> {
    let mut out = Vec::new();
    let mut current: Option<(Option<String>, Option<String>, u32)> = None;
    let flush = |m: Option<(Option<String>, Option<String>, u32)>, out: &mut Vec<Module>| {
        if let Some((ansi, uni, offset)) = m {
            if let Some(stream) = uni.or(ansi) {
                out.push(Module { stream, offset });
            }
        }
    };
    for (id, data) in records(dir) {
        match id {
            // MODULENAME starts a module.
            0x0019 => flush(current.replace((None, None, 0)), &mut out),
            // MODULESTREAMNAME (MBCS) and its Unicode form.
            0x001a => {
                if let Some(m) = current.as_mut() {
                    m.0 = Some(data.iter().map(|&b| char::from(b)).collect());
                }
            }
            0x0032 => {
                if let Some(m) = current.as_mut() {
                    let units = data
                        .chunks_exact(2)
                        .map(|c| u16::from_le_bytes([c[0], c[1]]));
                    m.1 = Some(
                        char::decode_utf16(units)
                            .map(|c| c.unwrap_or('\u{fffd}'))
                            .collect(),
                    );
                }
            }
            // MODULEOFFSET.
            0x0031 if data.len() == 4 => {
                if let Some(m) = current.as_mut() {
                    m.2 = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
                }
            }
            // Module terminator.
            0x002b => flush(current.take(), &mut out),
            _ => {}
        }
    }
    flush(current, &mut out);
    out
}

/// Windows-1252's characters for bytes 0x80 to 0x9F (the rest is ISO-8859-1);
/// its five unassigned bytes are taken as the C1 controls they sit on.
const CP1252_HIGH: [u16; 32] = [
    0x20ac, 0x0081, 0x201a, 0x0192, 0x201e, 0x2026, 0x2020, 0x2021, 0x02c6, 0x2030, 0x0160, 0x2039,
    0x0152, 0x008d, 0x017d, 0x008f, 0x0090, 0x2018, 0x2019, 0x201c, 0x201d, 0x2022, 0x2013, 0x2014,
    0x02dc, 0x2122, 0x0161, 0x203a, 0x0153, 0x009d, 0x017e, 0x0178,
];

/// A module's source converted to UTF-8 from the project's code page, as
/// ClamAV converts it before matching: Windows-1252 and ISO-8859-1 are
/// converted; UTF-8 and other code pages are left as they are.
pub(crate) fn to_utf8(source: Vec<u8>, codepage: u16) -> Vec<u8> {
    if source.is_ascii() || !matches!(codepage, 1252 | 28591) {
        return source;
    }
    let mut out = String::with_capacity(source.len() + source.len() / 4);
    for &b in &source {
        let c = match b {
            0x80..=0x9f if codepage == 1252 => CP1252_HIGH[usize::from(b - 0x80)],
            _ => u16::from(b),
        };
        out.push(char::from_u32(u32::from(c)).unwrap_or('\u{fffd}'));
    }
    out.into_bytes()
}

/// Where the normaliser of a module's source stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Norm {
    Code,
    InString,
    /// A `_` after a space: a line continuation if the line ends here.
    Underscore,
    /// That `_` and a carriage return.
    UnderscoreCr,
    Space,
}

/// Normalises a module's source as ClamAV does before matching it: ASCII
/// letters lower-cased outside string literals, runs of spaces and tabs made
/// one space, and line continuations (` _` at the end of a line) joined.
/// Comments are normalised like code, as there.
pub(crate) fn normalize(source: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(source.len());
    let mut state = Norm::Code;
    for &b in source {
        match b {
            b'"' => {
                state = match state {
                    Norm::InString => Norm::Code,
                    Norm::UnderscoreCr => Norm::UnderscoreCr,
                    _ => Norm::InString,
                };
                out.push(b);
            }
            b'_' => {
                if state == Norm::Space {
                    state = Norm::Underscore;
                }
                out.push(b);
            }
            b'\r' => {
                if state == Norm::Underscore {
                    state = Norm::UnderscoreCr;
                }
                out.push(b);
            }
            b'\n' => match state {
                Norm::Underscore => {
                    out.pop();
                    state = Norm::Space;
                }
                Norm::UnderscoreCr => {
                    out.truncate(out.len().saturating_sub(2));
                    state = Norm::Space;
                }
                _ => out.push(b),
            },
            b' ' | b'\t' => {
                if state != Norm::Space {
                    out.push(b' ');
                }
                if matches!(state, Norm::Code | Norm::Underscore) {
                    state = Norm::Space;
                }
            }
            _ => {
                if matches!(state, Norm::Code | Norm::Underscore | Norm::Space) {
                    out.push(b.to_ascii_lowercase());
                    state = Norm::Code;
                } else {
                    out.push(b);
                }
            }
        }
    }
    out
}

/// Compresses `data` as a CompressedContainer with no copy tokens (MS-OVBA
/// §2.4.1.3.6 may always choose literals): whole 4096-byte chunks raw, the rest
/// in chunks of literal tokens of at most 3584 bytes (4034 compressed, under
/// the 4098-byte cap). For tests.
#[cfg(test)]
pub(crate) fn compress_literal(data: &[u8]) -> Vec<u8> {
    let mut out = vec![1u8];
    let whole = data.len() / CHUNK * CHUNK;
    for chunk in data[..whole].chunks(CHUNK) {
        out.extend_from_slice(&0x3fffu16.to_le_bytes());
        out.extend_from_slice(chunk);
    }
    for chunk in data[whole..].chunks(3584) {
        let size = chunk.len() + chunk.len().div_ceil(8) + 2;
        out.extend_from_slice(&(0xb000u16 | (size - 3) as u16).to_le_bytes());
        for group in chunk.chunks(8) {
            out.push(0);
            out.extend_from_slice(group);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    #[test]
    fn spec_example_no_compression() {
        // MS-OVBA §3.2.1.
        let c = hex("01 19 B0 00 61 62 63 64 65 66 67 68 00 69 6A 6B 6C 6D 6E 6F 70 00 71 72 73 74 75 76 2E");
        assert_eq!(
            decompress(&c, 1 << 20),
            (b"abcdefghijklmnopqrstuv.".to_vec(), Inflate::Done)
        );
    }

    #[test]
    fn spec_example_normal_compression() {
        // MS-OVBA §3.2.2.
        let c = hex(
            "01 2F B0 00 23 61 61 61 62 63 64 65 82 66 00 70 61 67 68 69 6A 01 38 08 61 6B 6C \
             00 30 6D 6E 6F 70 06 71 02 70 04 10 72 73 74 75 76 10 77 78 79 7A 00 3C",
        );
        assert_eq!(
            decompress(&c, 1 << 20),
            (
                b"#aaabcdefaaaaghijaaaaaklaaamnopqaaaaaaaaaaaarstuvwxyzaaa".to_vec(),
                Inflate::Done
            )
        );
    }

    #[test]
    fn copy_tokens_repeat_the_output() {
        // One literal, then a copy token with offset 1 and length 72 (4-bit
        // offset, 12-bit length at the start of a chunk).
        let c = hex("01 03 B0 02 61 45 00");
        assert_eq!(decompress(&c, 1 << 20), (vec![b'a'; 73], Inflate::Done));
        // The cap stops it.
        assert_eq!(decompress(&c, 10), (vec![b'a'; 10], Inflate::Capped));
    }

    #[test]
    fn malformed_containers() {
        assert_eq!(decompress(b"", 100).1, Inflate::Malformed);
        assert_eq!(decompress(&[2, 0, 0], 100).1, Inflate::Malformed);
        // Bad chunk signature bits.
        assert_eq!(
            decompress(&hex("01 03 00 00 61"), 100).1,
            Inflate::Malformed
        );
        // A copy token reaching before the chunk.
        assert_eq!(
            decompress(&hex("01 01 B0 01 10 00"), 100).1,
            Inflate::Malformed
        );
        // A raw chunk cut short keeps what is there.
        assert_eq!(
            decompress(&hex("01 FF 3F 61 62"), 100),
            (b"ab".to_vec(), Inflate::Malformed)
        );
    }

    #[test]
    fn literal_compression_round_trips() {
        let text: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        assert_eq!(
            decompress(&compress_literal(&text), 1 << 20),
            (text, Inflate::Done)
        );
    }

    #[test]
    fn dir_records_give_the_modules() {
        fn rec(d: &mut Vec<u8>, id: u16, data: &[u8]) {
            d.extend_from_slice(&id.to_le_bytes());
            d.extend_from_slice(&(data.len() as u32).to_le_bytes());
            d.extend_from_slice(data);
        }
        let mut fixed = Vec::new();
        let d = &mut fixed;
        rec(d, 0x0001, &1u32.to_le_bytes());
        // PROJECTVERSION: size field 4, then 6 bytes of data.
        d.extend_from_slice(&[9, 0, 4, 0, 0, 0, 1, 0, 0, 0, 2, 0]);
        rec(d, 0x000f, &1u16.to_le_bytes());
        rec(d, 0x0019, b"Module1");
        rec(d, 0x001a, b"Module1");
        rec(d, 0x0032, &[b'M', 0, b'1', 0]);
        rec(d, 0x0031, &1234u32.to_le_bytes());
        rec(d, 0x002b, &[]);
        rec(d, 0x0019, b"Two");
        rec(d, 0x001a, b"Two");
        rec(d, 0x0031, &7u32.to_le_bytes());
        rec(d, 0x002b, &[]);
        rec(d, 0x0010, &[]);
        assert_eq!(
            modules(&fixed),
            vec![
                Module {
                    stream: "M1".into(),
                    offset: 1234
                },
                Module {
                    stream: "Two".into(),
                    offset: 7
                }
            ]
        );
        // Cut anywhere, no panic and no more modules than there are.
        for cut in 0..fixed.len() {
            assert!(modules(&fixed[..cut]).len() <= 2);
        }
    }

    #[test]
    fn code_pages_convert_to_utf8() {
        assert_eq!(
            to_utf8(b"Caf\xe9 \x80uro".to_vec(), 1252),
            "Café €uro".as_bytes()
        );
        assert_eq!(to_utf8(b"\x80".to_vec(), 28591), "\u{80}".as_bytes());
        // Other code pages are left as they are.
        assert_eq!(to_utf8(b"\x82\xa0".to_vec(), 932), b"\x82\xa0");
    }

    #[test]
    fn normalisation_lowers_code_not_strings() {
        assert_eq!(
            normalize(b"Sub  AutoOpen()\r\n\tMsgBox \"Keep  THIS\" ' A Comment\r\n"),
            b"sub autoopen()\r\n msgbox \"Keep  THIS\" ' a comment\r\n"
        );
        // A line continuation is joined.
        assert_eq!(normalize(b"A = B _\r\n  + C\n"), b"a = b + c\n");
        assert_eq!(normalize(b"A _\nB"), b"a b");
    }

    proptest! {
        #[test]
        fn decompression_never_panics(data in proptest::collection::vec(any::<u8>(), 0..600), cap in 0usize..5000) {
            let mut input = vec![1u8];
            input.extend_from_slice(&data);
            let (out, _) = decompress(&input, cap);
            prop_assert!(out.len() <= cap);
        }

        #[test]
        fn literal_compression_round_trips_any(data in proptest::collection::vec(any::<u8>(), 0..9000)) {
            prop_assert_eq!(decompress(&compress_literal(&data), 1 << 20), (data, Inflate::Done));
        }

        #[test]
        fn normalisation_never_grows(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            prop_assert!(normalize(&data).len() <= data.len());
        }

        #[test]
        fn dir_parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = modules(&data);
        }
    }
}
