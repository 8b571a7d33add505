//! Content-Transfer-Encoding undone while a body streams by, in pieces of
//! any size: the body's encoding named, and its streaming decoder
//! (transfer_decode.rs) picked.

use crate::transfer_decode::{Base64Decoder, QpDecoder};

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
        match name {
            Some(n) if n.eq_ignore_ascii_case("base64") => TransferEncoding::Base64,
            Some(n) if n.eq_ignore_ascii_case("quoted-printable") => {
                TransferEncoding::QuotedPrintable
            }
            _ => TransferEncoding::Identity,
        }
    }
}

/// The decoder of one body.
#[derive(Debug, Clone)]
pub enum ContentDecoder {
    Identity,
    Base64(Base64Decoder),
    QuotedPrintable(QpDecoder),
}

impl ContentDecoder {
    pub fn new(encoding: TransferEncoding) -> ContentDecoder {
        match encoding {
            TransferEncoding::Identity => ContentDecoder::Identity,
            TransferEncoding::Base64 => ContentDecoder::Base64(Base64Decoder::new()),
            TransferEncoding::QuotedPrintable => ContentDecoder::QuotedPrintable(QpDecoder::new()),
        }
    }

    /// Decodes the next piece of the body, appending to `out`.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        match self {
            ContentDecoder::Identity => out.extend_from_slice(input),
            ContentDecoder::Base64(d) => d.decode(input, out),
            ContentDecoder::QuotedPrintable(d) => d.decode(input, out),
        }
    }

    /// The end of the body: what was held back is given out.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        match self {
            ContentDecoder::Identity => {}
            ContentDecoder::Base64(d) => d.finish(out),
            ContentDecoder::QuotedPrintable(d) => d.finish(out),
        }
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
    fn base64_skips_line_ends() {
        let got = decoded(
            TransferEncoding::Base64,
            b"SGVsbG8s\r\nIHdvcmxk\r\nIQ==\r\n",
            3,
        );
        assert_eq!(got, b"Hello, world!");
    }

    #[test]
    fn quoted_printable_joins_soft_breaks() {
        let input = b"caf=C3=A9 au =\r\nlait, x =\nend";
        for piece in 1..8 {
            assert_eq!(
                decoded(TransferEncoding::QuotedPrintable, input, piece),
                "café au lait, x end".as_bytes(),
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
