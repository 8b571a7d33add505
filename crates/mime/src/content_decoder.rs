//! Content-Transfer-Encoding undone while a body streams by, in pieces of
//! any size, holding at most two bytes between pieces.
//!
//! Lenient as mail readers are: base64 skips what is not of its alphabet
//! (line ends, stray characters) and stops at its padding; quoted-printable
//! passes an `=` that is not followed by two hex digits or a line end as
//! it is.

/// How a body is encoded (RFC 2045 §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferEncoding {
    /// 7bit, 8bit, binary, or anything unknown: the bytes are the content.
    Identity,
    Base64,
    QuotedPrintable,
}

impl TransferEncoding {
    /// The encoding a `Content-Transfer-Encoding` value names (any case).
    pub fn named(name: Option<&str>) -> TransferEncoding {
        match name.map(str::to_ascii_lowercase).as_deref() {
            Some("base64") => TransferEncoding::Base64,
            Some("quoted-printable") => TransferEncoding::QuotedPrintable,
            _ => TransferEncoding::Identity,
        }
    }
}

/// The decoder of one body.
#[derive(Debug, Clone)]
pub struct ContentDecoder {
    encoding: TransferEncoding,
    /// Base64: the bits read and not yet a whole byte, and how many.
    bits: u32,
    nbits: u32,
    /// Base64: the padding came; the rest is not content.
    padded: bool,
    /// Quoted-printable: an `=` and what followed it, when the piece ended
    /// before it could be told what it is.
    held: Vec<u8>,
}

impl ContentDecoder {
    pub fn new(encoding: TransferEncoding) -> ContentDecoder {
        ContentDecoder {
            encoding,
            bits: 0,
            nbits: 0,
            padded: false,
            held: Vec::new(),
        }
    }

    /// Decodes the next piece of the body, appending to `out`.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        match self.encoding {
            TransferEncoding::Identity => out.extend_from_slice(input),
            TransferEncoding::Base64 => self.base64(input, out),
            TransferEncoding::QuotedPrintable => {
                if self.held.is_empty() {
                    self.quoted_printable(input, out);
                } else {
                    let mut joined = std::mem::take(&mut self.held);
                    joined.extend_from_slice(input);
                    self.quoted_printable(&joined, out);
                }
            }
        }
    }

    /// The end of the body: what was held back is content after all.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.held);
        self.bits = 0;
        self.nbits = 0;
    }

    fn base64(&mut self, input: &[u8], out: &mut Vec<u8>) {
        if self.padded {
            return;
        }
        for &b in input {
            let value = match b {
                b'A'..=b'Z' => b - b'A',
                b'a'..=b'z' => b - b'a' + 26,
                b'0'..=b'9' => b - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                b'=' => {
                    self.padded = true;
                    return;
                }
                _ => continue,
            };
            self.bits = (self.bits << 6) | u32::from(value);
            self.nbits += 6;
            if self.nbits >= 8 {
                self.nbits -= 8;
                out.push((self.bits >> self.nbits) as u8);
                self.bits &= (1 << self.nbits) - 1;
            }
        }
    }

    fn quoted_printable(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let mut rest = input;
        while let Some(i) = memchr::memchr(b'=', rest) {
            out.extend_from_slice(&rest[..i]);
            let after = &rest[i + 1..];
            let taken = match after {
                [a, b, ..] if hex(*a).is_some() && hex(*b).is_some() => {
                    out.push(hex(*a).unwrap_or(0) << 4 | hex(*b).unwrap_or(0));
                    3
                }
                // A soft line break joins the lines.
                [b'\r', b'\n', ..] => 3,
                [b'\n', ..] => 2,
                // Not enough to tell: wait for the next piece.
                [] | [b'\r'] => {
                    self.held = rest[i..].to_vec();
                    return;
                }
                [a] if hex(*a).is_some() => {
                    self.held = rest[i..].to_vec();
                    return;
                }
                _ => {
                    out.push(b'=');
                    1
                }
            };
            rest = &rest[i + taken..];
        }
        out.extend_from_slice(rest);
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decoded(encoding: TransferEncoding, input: &[u8], piece: usize) -> Vec<u8> {
        let mut d = ContentDecoder::new(encoding);
        let mut out = Vec::new();
        for p in input.chunks(piece.max(1)) {
            d.push(p, &mut out);
        }
        d.finish(&mut out);
        out
    }

    #[test]
    fn base64_skips_line_ends_and_stops_at_padding() {
        let got = decoded(
            TransferEncoding::Base64,
            b"SGVsbG8s\r\nIHdvcmxk\r\nIQ==\r\nignored",
            3,
        );
        assert_eq!(got, b"Hello, world!");
    }

    #[test]
    fn quoted_printable_joins_soft_breaks_and_keeps_stray_equals() {
        let input = b"caf=C3=A9 au =\r\nlait, a=b, x =\nend=";
        for piece in 1..8 {
            assert_eq!(
                decoded(TransferEncoding::QuotedPrintable, input, piece),
                "café au lait, a=b, x end=".as_bytes(),
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn encodings_are_named_in_any_case() {
        assert_eq!(
            TransferEncoding::named(Some("BASE64")),
            TransferEncoding::Base64
        );
        assert_eq!(
            TransferEncoding::named(Some("Quoted-Printable")),
            TransferEncoding::QuotedPrintable
        );
        assert_eq!(
            TransferEncoding::named(Some("8bit")),
            TransferEncoding::Identity
        );
        assert_eq!(TransferEncoding::named(None), TransferEncoding::Identity);
    }

    /// Quoted-printable as an encoder writes it: unsafe bytes as `=XX`,
    /// lines cut at 76 with soft breaks.
    fn qp_encode(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut line = 0;
        for &b in data {
            let piece = if b == b'\n' {
                out.extend_from_slice(b"\r\n");
                line = 0;
                continue;
            } else if (33..=126).contains(&b) && b != b'=' {
                vec![b]
            } else {
                format!("={b:02X}").into_bytes()
            };
            if line + piece.len() > 75 {
                out.extend_from_slice(b"=\r\n");
                line = 0;
            }
            line += piece.len();
            out.extend_from_slice(&piece);
        }
        out
    }

    fn b64_encode(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut lines = crate::Base64Lines::default();
        lines.push(data, &mut out);
        lines.finish(&mut out);
        out
    }

    proptest! {
        /// Whatever the pieces, the content comes back.
        #[test]
        fn decoding_in_pieces_gives_the_content_back(
            data in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'='), any::<u8>()], 0..400),
            piece in 1usize..40,
        ) {
            let no_cr: Vec<u8> = data.iter().copied().filter(|&b| b != b'\r').collect();
            prop_assert_eq!(
                decoded(TransferEncoding::QuotedPrintable, &qp_encode(&no_cr), piece),
                no_cr.iter().flat_map(|&b| if b == b'\n' { vec![b'\r', b'\n'] } else { vec![b] }).collect::<Vec<u8>>()
            );
            prop_assert_eq!(decoded(TransferEncoding::Base64, &b64_encode(&data), piece), data.clone());
            prop_assert_eq!(decoded(TransferEncoding::Identity, &data, piece), data);
        }
    }
}
