//! Content-Transfer-Encoding decoding for BINARY (RFC 3516, RFC 9051
//! §6.4.5): base64 and quoted-printable (RFC 2045 §6.7, §6.8) undone
//! piece by piece, so a part is decoded as it is read from the store,
//! whatever the chunk boundaries, without holding it whole.

/// How a part's body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// 7bit, 8bit, binary: the body is its own content.
    Identity,
    Base64,
    QuotedPrintable,
}

impl Encoding {
    /// The encoding a `Content-Transfer-Encoding` value names; `None` for
    /// one Sluice cannot undo (RFC 3516 §4.3: `[UNKNOWN-CTE]`).
    pub(crate) fn from_name(name: &str) -> Option<Encoding> {
        let name = name.trim();
        if name.is_empty()
            || ["7bit", "8bit", "binary"]
                .iter()
                .any(|n| n.eq_ignore_ascii_case(name))
        {
            Some(Encoding::Identity)
        } else if name.eq_ignore_ascii_case("base64") {
            Some(Encoding::Base64)
        } else if name.eq_ignore_ascii_case("quoted-printable") {
            Some(Encoding::QuotedPrintable)
        } else {
            None
        }
    }
}

/// White space held back on a quoted-printable line: beyond this it cannot
/// be transport padding (lines are at most 998 bytes), so it is let
/// through rather than buffered without bound.
const MAX_HELD: usize = 1024;

/// What a quoted-printable decoder holds back until the next byte says
/// what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    Nothing,
    /// White space: padding if a line break follows.
    Space,
    /// White space and CR: padding and a line break if LF follows.
    SpaceCr,
    /// `=`: an escape or a soft line break.
    Eq,
    /// `=` and one hex digit.
    EqHex,
    /// `=` and white space: a soft line break with padding, perhaps.
    EqSpace,
    /// `=`, perhaps white space, and CR.
    EqCr,
}

/// A decoder fed the encoded body piece by piece.
#[derive(Debug)]
pub(crate) struct Decoder {
    encoding: Encoding,
    /// base64: sextets of the quantum being read and how many.
    quantum: u32,
    sextets: u8,
    /// base64: `=` seen; the rest is padding.
    ended: bool,
    /// quoted-printable: what is held back, and its bytes as written.
    held: Held,
    pending: Vec<u8>,
}

fn sextet(b: u8) -> Option<u32> {
    Some(u32::from(match b {
        b'A'..=b'Z' => b - b'A',
        b'a'..=b'z' => b - b'a' + 26,
        b'0'..=b'9' => b - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    }))
}

fn hex(b: u8) -> Option<u8> {
    char::from(b).to_digit(16).map(|d| d as u8)
}

impl Decoder {
    pub(crate) fn new(encoding: Encoding) -> Decoder {
        Decoder {
            encoding,
            quantum: 0,
            sextets: 0,
            ended: false,
            held: Held::Nothing,
            pending: Vec::new(),
        }
    }

    /// Decodes `input`, appending to `out`; what cannot be decoded yet is
    /// kept for the next piece.
    pub(crate) fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        match self.encoding {
            Encoding::Identity => out.extend_from_slice(input),
            Encoding::Base64 => self.base64(input, out),
            Encoding::QuotedPrintable => {
                for &b in input {
                    self.qp(b, out);
                }
            }
        }
    }

    /// Ends the input: what was held back is resolved.
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) {
        match self.encoding {
            Encoding::Identity => {}
            // A quantum cut short without padding still gives its whole
            // bytes (RFC 2045 §6.8 asks decoders to be lenient).
            Encoding::Base64 => self.flush_quantum(out),
            Encoding::QuotedPrintable => {
                match self.held {
                    // Padding at the end, or a final soft line break
                    // (`=` at the end: the text ends without a line end).
                    Held::Nothing | Held::Space | Held::Eq | Held::EqSpace | Held::EqCr => {}
                    Held::SpaceCr => out.push(b'\r'),
                    Held::EqHex => out.extend_from_slice(&self.pending),
                }
                self.held = Held::Nothing;
                self.pending.clear();
            }
        }
    }

    fn flush_quantum(&mut self, out: &mut Vec<u8>) {
        let n = self.sextets;
        if n >= 2 {
            let q = self.quantum << (6 * (4 - u32::from(n)));
            let bytes = [(q >> 16) as u8, (q >> 8) as u8, q as u8];
            out.extend_from_slice(&bytes[..usize::from(n - 1)]);
        }
        self.quantum = 0;
        self.sextets = 0;
    }

    fn base64(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &b in input {
            if self.ended {
                break;
            }
            if b == b'=' {
                self.flush_quantum(out);
                self.ended = true;
                break;
            }
            // RFC 2045 §6.8: characters outside the alphabet (line
            // breaks, white space) are ignored.
            let Some(v) = sextet(b) else { continue };
            self.quantum = (self.quantum << 6) | v;
            self.sextets += 1;
            if self.sextets == 4 {
                let q = self.quantum;
                out.extend_from_slice(&[(q >> 16) as u8, (q >> 8) as u8, q as u8]);
                self.quantum = 0;
                self.sextets = 0;
            }
        }
    }

    /// Gives up what is held as written, then reads `b` afresh.
    fn release(&mut self, b: u8, out: &mut Vec<u8>) {
        out.append(&mut self.pending);
        self.held = Held::Nothing;
        self.qp(b, out);
    }

    fn hold(&mut self, b: u8, held: Held) {
        self.pending.push(b);
        self.held = held;
    }

    fn qp(&mut self, b: u8, out: &mut Vec<u8>) {
        let space = b == b' ' || b == b'\t';
        match self.held {
            Held::Nothing => match b {
                b'=' => self.hold(b, Held::Eq),
                b'\r' => self.hold(b, Held::SpaceCr),
                _ if space => self.hold(b, Held::Space),
                _ => out.push(b),
            },
            Held::Space | Held::EqSpace if space => {
                if self.pending.len() >= MAX_HELD {
                    out.append(&mut self.pending);
                    self.held = Held::Nothing;
                    self.qp(b, out);
                } else {
                    self.pending.push(b);
                }
            }
            // RFC 2045 §6.7 rule 3: white space at the end of a line is
            // transport padding, dropped.
            Held::Space => match b {
                b'\r' => self.hold(b, Held::SpaceCr),
                b'\n' => {
                    self.pending.clear();
                    self.held = Held::Nothing;
                    out.push(b'\n');
                }
                _ => self.release(b, out),
            },
            Held::SpaceCr => {
                if b == b'\n' {
                    self.pending.clear();
                    self.held = Held::Nothing;
                    out.extend_from_slice(b"\r\n");
                } else {
                    self.release(b, out);
                }
            }
            Held::Eq => match b {
                b'\n' => {
                    self.pending.clear();
                    self.held = Held::Nothing;
                }
                b'\r' => self.hold(b, Held::EqCr),
                _ if space => self.hold(b, Held::EqSpace),
                _ if hex(b).is_some() => self.hold(b, Held::EqHex),
                _ => self.release(b, out),
            },
            Held::EqHex => match (self.pending.get(1).copied().and_then(hex), hex(b)) {
                (Some(h), Some(l)) => {
                    self.pending.clear();
                    self.held = Held::Nothing;
                    out.push((h << 4) | l);
                }
                // Not an escape: kept as written (RFC 2045 §6.7 note 1).
                _ => self.release(b, out),
            },
            Held::EqSpace => match b {
                b'\r' => self.hold(b, Held::EqCr),
                b'\n' => {
                    self.pending.clear();
                    self.held = Held::Nothing;
                }
                _ => self.release(b, out),
            },
            Held::EqCr => {
                if b == b'\n' {
                    // Soft line break: nothing comes out.
                    self.pending.clear();
                    self.held = Held::Nothing;
                } else {
                    self.release(b, out);
                }
            }
        }
    }
}

/// Decodes a whole body.
#[cfg(test)]
pub(crate) fn decode_all(encoding: Encoding, input: &[u8]) -> Vec<u8> {
    let mut d = Decoder::new(encoding);
    let mut out = Vec::new();
    d.push(input, &mut out);
    d.finish(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use proptest::prelude::*;

    /// Decodes `input` fed in pieces cut at `cuts`.
    fn decode_split(encoding: Encoding, input: &[u8], cuts: &[usize]) -> Vec<u8> {
        let mut d = Decoder::new(encoding);
        let mut out = Vec::new();
        let mut rest = input;
        for &c in cuts {
            let (now, later) = rest.split_at(c.min(rest.len()));
            d.push(now, &mut out);
            rest = later;
        }
        d.push(rest, &mut out);
        d.finish(&mut out);
        out
    }

    /// Quoted-printable as a mail program writes it: unsafe bytes, `=`
    /// and line-end white space escaped, lines soft-broken at 76.
    fn qp_encode(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut line = 0;
        for (i, &b) in data.iter().enumerate() {
            let next = data.get(i + 1).copied();
            let hard_break = b == b'\r' && next == Some(b'\n');
            let line_end = hard_break || (b == b'\n' && i > 0 && data[i - 1] == b'\r');
            let inner_space = (b == b' ' || b == b'\t') && !matches!(next, None | Some(b'\r'));
            let safe = (33..=126).contains(&b) && b != b'=';
            let piece: Vec<u8> = if line_end || inner_space || safe {
                vec![b]
            } else {
                format!("={b:02X}").into_bytes()
            };
            if piece != b"\n" && piece != b"\r" && line + piece.len() > 75 {
                out.extend_from_slice(b"=\r\n");
                line = 0;
            }
            line = if piece == b"\n" {
                0
            } else {
                line + piece.len()
            };
            out.extend_from_slice(&piece);
        }
        out
    }

    #[test]
    fn names() {
        assert_eq!(Encoding::from_name("BASE64"), Some(Encoding::Base64));
        assert_eq!(
            Encoding::from_name("Quoted-Printable"),
            Some(Encoding::QuotedPrintable)
        );
        assert_eq!(Encoding::from_name("8bit"), Some(Encoding::Identity));
        assert_eq!(Encoding::from_name("x-uuencode"), None);
    }

    #[test]
    fn quoted_printable() {
        let qp = Encoding::QuotedPrintable;
        assert_eq!(
            decode_all(qp, b"Stra=DFe und Gr=FC=DFe\r\n"),
            b"Stra\xdfe und Gr\xfc\xdfe\r\n"
        );
        assert_eq!(decode_all(qp, b"soft=\r\nbreak=\nhere"), b"softbreakhere");
        assert_eq!(
            decode_all(qp, b"pad   \r\nnext \t\nend  "),
            b"pad\r\nnext\nend"
        );
        assert_eq!(decode_all(qp, b"soft with pad=  \r\nx"), b"soft with padx");
        assert_eq!(decode_all(qp, b"a=3d=3Db"), b"a==b");
        assert_eq!(decode_all(qp, b"bad =ZZ and =4"), b"bad =ZZ and =4");
        assert_eq!(
            decode_all(qp, b"ends with soft break="),
            b"ends with soft break"
        );
        assert_eq!(decode_all(qp, b"nul =00 byte"), b"nul \0 byte");
        assert_eq!(decode_all(qp, b"a \r b"), b"a \r b");
    }

    #[test]
    fn base64() {
        let b = Encoding::Base64;
        assert_eq!(decode_all(b, b"aGVsbG8g\r\nd29ybGQ=\r\n"), b"hello world");
        assert_eq!(decode_all(b, b"aGVsbG8"), b"hello");
        assert_eq!(decode_all(b, b"AA==\r\nignored"), b"\0");
        assert_eq!(decode_all(b, b"  A A\tE=  "), b"\0\x01");
    }

    #[test]
    fn long_white_space_is_bounded() {
        let mut input = vec![b' '; 5000];
        input.push(b'x');
        let mut d = Decoder::new(Encoding::QuotedPrintable);
        let mut out = Vec::new();
        d.push(&input[..4000], &mut out);
        assert!(d.pending.len() <= MAX_HELD);
        d.push(&input[4000..], &mut out);
        d.finish(&mut out);
        assert_eq!(out, input);
    }

    proptest! {
        /// base64 as mail programs write it (76-column lines) decodes to
        /// the original, however the input is cut.
        #[test]
        fn base64_in_pieces(
            data in proptest::collection::vec(any::<u8>(), 0..600),
            cuts in proptest::collection::vec(0usize..80, 0..30),
        ) {
            let text = base64::engine::general_purpose::STANDARD.encode(&data);
            let mut wrapped = Vec::new();
            for line in text.as_bytes().chunks(76) {
                wrapped.extend_from_slice(line);
                wrapped.extend_from_slice(b"\r\n");
            }
            prop_assert_eq!(decode_split(Encoding::Base64, &wrapped, &cuts), data);
        }

        /// Quoted-printable decodes to the original, however it is cut.
        #[test]
        fn quoted_printable_in_pieces(
            data in proptest::collection::vec(
                prop_oneof![any::<u8>(), Just(b' '), Just(b'='), Just(b'\r'), Just(b'\n'), 32u8..127],
                0..600,
            ),
            cuts in proptest::collection::vec(0usize..40, 0..40),
        ) {
            let encoded = qp_encode(&data);
            prop_assert_eq!(decode_split(Encoding::QuotedPrintable, &encoded, &cuts), data);
        }

        /// Any input, however cut, decodes as it does whole, without panic.
        #[test]
        fn cutting_never_changes_the_result(
            input in proptest::collection::vec(
                prop_oneof![any::<u8>(), Just(b' '), Just(b'='), Just(b'\r'), Just(b'\n'), Just(b'A')],
                0..300,
            ),
            cuts in proptest::collection::vec(0usize..20, 0..40),
        ) {
            for e in [Encoding::Base64, Encoding::QuotedPrintable, Encoding::Identity] {
                prop_assert_eq!(decode_split(e, &input, &cuts), decode_all(e, &input));
            }
        }
    }
}
