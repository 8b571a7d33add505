//! Streaming content-transfer decoders: base64, quoted-printable (RFC 2045 §6.7, §6.8)
//! and uuencode.
//!
//! Each decoder keeps only the few bytes of state that straddle a chunk boundary, so
//! feeding any chunking of the input gives the same output. All of them are tolerant:
//! real spam carries broken encodings, and a scanner must decode what a mail client
//! would still show rather than give up.

/// Marker for bytes outside the base64 alphabet.
const INVALID: u8 = 0xff;

/// The base64 alphabet (RFC 4648 §4) as a reverse lookup table.
const B64: [u8; 256] = {
    let mut t = [INVALID; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        t[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    // URL-safe variants decode too: some broken mailers use them.
    t[b'-' as usize] = 62;
    t[b'_' as usize] = 63;
    t
};

/// [`B64`] with each value already in its place in a quad's 24 bits, the
/// first table for the quad's first character and so on; a byte outside the
/// alphabet has the top bit set. A quad then decodes with four loads and three
/// ORs.
const B64_PLACED: [[u32; 256]; 4] = {
    let mut t = [[0u32; 256]; 4];
    let mut k = 0;
    while k < 4 {
        let mut i = 0;
        while i < 256 {
            t[k][i] = if B64[i] == INVALID {
                1 << 31
            } else {
                (B64[i] as u32) << (18 - 6 * k)
            };
            i += 1;
        }
        k += 1;
    }
    t
};

/// Streaming base64 decoder that skips whitespace and any byte outside the alphabet
/// (RFC 2045 §6.8: "all line breaks or other characters not found in Table 1 must be
/// ignored by decoding software").
#[derive(Debug, Default, Clone)]
pub struct Base64Decoder {
    acc: u32,
    n: u8,
}

impl Base64Decoder {
    /// A decoder at the start of an encoded body.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes `input`, appending the bytes it completes to `out`.
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) {
        out.reserve(input.len() / 4 * 3 + 3);
        let mut i = 0;
        while i < input.len() {
            // Fast path: whole quads of valid characters while no partial quad is
            // pending; it stops at a line break (or anything else) and takes up
            // again after it, as soon as a quad starts.
            if self.n == 0 && i + 4 <= input.len() {
                let quads = input[i..].chunks_exact(4);
                let start = out.len();
                out.resize(start + quads.len() * 3, 0);
                let mut end = start;
                for q in quads {
                    let v = B64_PLACED[0][q[0] as usize]
                        | B64_PLACED[1][q[1] as usize]
                        | B64_PLACED[2][q[2] as usize]
                        | B64_PLACED[3][q[3] as usize];
                    if v >> 31 != 0 {
                        break;
                    }
                    out[end..end + 3].copy_from_slice(&v.to_be_bytes()[1..]);
                    end += 3;
                    i += 4;
                }
                out.truncate(end);
            }
            let Some(&byte) = input.get(i) else {
                break;
            };
            i += 1;
            if byte == b'=' {
                self.flush_partial(out);
                continue;
            }
            let v = B64[byte as usize];
            if v == INVALID {
                continue;
            }
            self.acc = (self.acc << 6) | u32::from(v);
            self.n += 1;
            if self.n == 4 {
                let v = self.acc;
                out.extend_from_slice(&[(v >> 16) as u8, (v >> 8) as u8, v as u8]);
                self.acc = 0;
                self.n = 0;
            }
        }
    }

    /// Emits what a partial quad holds, as padding would (`=` or end of input).
    fn flush_partial(&mut self, out: &mut Vec<u8>) {
        match self.n {
            2 => out.push((self.acc >> 4) as u8),
            3 => {
                let v = self.acc >> 2;
                out.extend_from_slice(&[(v >> 8) as u8, v as u8]);
            }
            _ => {}
        }
        self.acc = 0;
        self.n = 0;
    }

    /// Ends the body: a truncated final quad still yields its whole bytes.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        self.flush_partial(out);
    }
}

/// State of the quoted-printable decoder between bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum QpState {
    #[default]
    Text,
    /// Saw `=`.
    Equals,
    /// Saw `=` and one hex digit, as written.
    Hex(u8),
    /// Saw `=` followed by whitespace: a soft line break with trailing blanks, or junk.
    EqualsBlank,
    /// Saw `=\r`.
    EqualsCr,
}

/// Longest run of trailing blanks held back while waiting to see whether a line ends.
const QP_MAX_PENDING_BLANKS: usize = 256;

/// Streaming quoted-printable decoder (RFC 2045 §6.7), tolerant of bad escapes (kept
/// literally) and of bare LF line ends.
#[derive(Debug, Default, Clone)]
pub struct QpDecoder {
    state: QpState,
    /// Blanks seen and not yet emitted: dropped if the line ends (rule 3), else emitted.
    blanks: Vec<u8>,
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'A'..=b'F' => Some(b - b'A' + 10),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

impl QpDecoder {
    /// A decoder at the start of an encoded body.
    pub fn new() -> Self {
        Self::default()
    }

    fn flush_blanks(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.blanks);
        self.blanks.clear();
    }

    /// Decodes `input`, appending decoded bytes to `out`.
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &b in input {
            match self.state {
                QpState::Text => match b {
                    b'=' => {
                        self.flush_blanks(out);
                        self.state = QpState::Equals;
                    }
                    b' ' | b'\t' => {
                        if self.blanks.len() >= QP_MAX_PENDING_BLANKS {
                            self.flush_blanks(out);
                        }
                        self.blanks.push(b);
                    }
                    b'\r' | b'\n' => {
                        // RFC 2045 §6.7 rule 3: trailing blanks on a line are dropped.
                        self.blanks.clear();
                        out.push(b);
                    }
                    _ => {
                        self.flush_blanks(out);
                        out.push(b);
                    }
                },
                QpState::Equals => match b {
                    b'\r' => self.state = QpState::EqualsCr,
                    b'\n' => self.state = QpState::Text,
                    b' ' | b'\t' => self.state = QpState::EqualsBlank,
                    _ if hex_val(b).is_some() => self.state = QpState::Hex(b),
                    _ => {
                        // Not an escape: the `=` as written, and `b` read
                        // afresh (it may start an escape itself).
                        out.push(b'=');
                        self.state = QpState::Text;
                        self.decode(&[b], out);
                    }
                },
                QpState::Hex(digit) => {
                    match (hex_val(digit), hex_val(b)) {
                        (Some(h), Some(l)) => out.push(h << 4 | l),
                        _ => {
                            // Keep a broken escape as it was written.
                            out.extend_from_slice(&[b'=', digit]);
                            self.state = QpState::Text;
                            self.decode(&[b], out);
                            continue;
                        }
                    }
                    self.state = QpState::Text;
                }
                QpState::EqualsBlank => match b {
                    b' ' | b'\t' => {}
                    b'\r' => self.state = QpState::EqualsCr,
                    b'\n' => self.state = QpState::Text,
                    _ => {
                        // `=` then blanks then text: not a soft break; keep the text.
                        self.state = QpState::Text;
                        self.decode(&[b], out);
                    }
                },
                QpState::EqualsCr => {
                    self.state = QpState::Text;
                    if b != b'\n' {
                        self.decode(&[b], out);
                    }
                }
            }
        }
    }

    /// Ends the body: blanks at the very end are trailing blanks and are dropped.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if let QpState::Hex(digit) = self.state {
            out.extend_from_slice(&[b'=', digit]);
        }
        self.blanks.clear();
        self.state = QpState::Text;
    }
}

/// Decodes one uuencoded line (without its line end), appending the bytes to `out`.
///
/// The first character gives the byte count; each following group of four characters
/// gives three bytes. Lines shorter than their count claims are decoded as far as they
/// go. Returns `false` for the zero-length line that precedes `end`.
pub fn uudecode_line(line: &[u8], out: &mut Vec<u8>) -> bool {
    let Some((&first, rest)) = line.split_first() else {
        return false;
    };
    let count = usize::from(first.wrapping_sub(b' ') & 0x3f);
    if count == 0 {
        return false;
    }
    let sextet = |c: u8| u32::from(c.wrapping_sub(b' ') & 0x3f);
    let mut produced = 0;
    for quad in rest.chunks(4) {
        let mut v = 0u32;
        for k in 0..4 {
            v = (v << 6) | quad.get(k).map_or(0, |&c| sextet(c));
        }
        for byte in [(v >> 16) as u8, (v >> 8) as u8, v as u8] {
            if produced < count {
                out.push(byte);
                produced += 1;
            }
        }
        if produced >= count {
            break;
        }
    }
    true
}

/// If `line` opens a uuencoded block (`begin MODE NAME`), returns the file name.
pub fn uu_begin(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(b"begin ")?;
    let sp = rest.iter().position(|&b| b == b' ')?;
    let (mode, name) = rest.split_at(sp);
    if !(3..=4).contains(&mode.len()) || !mode.iter().all(|b| (b'0'..=b'7').contains(b)) {
        return None;
    }
    Some(name[1..].trim_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use proptest::prelude::*;

    /// A reference encoder (the `base64` crate) for the property tests.
    fn encode_b64(data: &[u8]) -> Vec<u8> {
        base64::engine::general_purpose::STANDARD
            .encode(data)
            .into_bytes()
    }

    fn b64(input: &[u8]) -> Vec<u8> {
        let mut d = Base64Decoder::new();
        let mut out = Vec::new();
        d.decode(input, &mut out);
        d.finish(&mut out);
        out
    }

    fn qp(input: &[u8]) -> Vec<u8> {
        let mut d = QpDecoder::new();
        let mut out = Vec::new();
        d.decode(input, &mut out);
        d.finish(&mut out);
        out
    }

    #[test]
    fn base64_basic_and_garbage() {
        assert_eq!(b64(b"aGVsbG8="), b"hello");
        assert_eq!(b64(b"aGVs\r\nbG8=\r\n"), b"hello");
        assert_eq!(b64(b"a G\tV*s!bG8"), b"hello");
        assert_eq!(b64(b"aGVsbA=="), b"hell");
    }

    #[test]
    fn qp_rules() {
        assert_eq!(qp(b"a=3Db"), b"a=b");
        assert_eq!(qp(b"soft=\r\nbreak"), b"softbreak");
        assert_eq!(qp(b"soft=\nbreak"), b"softbreak");
        assert_eq!(qp(b"trail   \r\nx"), b"trail\r\nx");
        assert_eq!(qp(b"bad=ZZ"), b"bad=ZZ");
        assert_eq!(qp(b"bad=4"), b"bad=4");
        // Broken escapes stay as written, and what ends one is read
        // afresh.
        assert_eq!(qp(b"a=b, c=e"), b"a=b, c=e");
        assert_eq!(qp(b"==41=f=3D"), b"=A=f=");
        assert_eq!(qp(b"sp=  \r\nx"), b"spx");
        assert_eq!(qp(b"a b"), b"a b");
    }

    #[test]
    fn uu_lines() {
        let mut out = Vec::new();
        assert!(uudecode_line(b"#0V%T", &mut out));
        assert_eq!(out, b"Cat");
        assert!(!uudecode_line(b"`", &mut out));
        assert_eq!(uu_begin(b"begin 644 cat.txt"), Some(&b"cat.txt"[..]));
        assert_eq!(uu_begin(b"begin here"), None);
    }

    proptest! {
        #[test]
        fn base64_any_chunking(data in proptest::collection::vec(any::<u8>(), 0..300), cut in 0usize..400) {
            let enc = encode_b64(&data);
            let cut = cut.min(enc.len());
            let mut d = Base64Decoder::new();
            let mut out = Vec::new();
            d.decode(&enc[..cut], &mut out);
            d.decode(&enc[cut..], &mut out);
            d.finish(&mut out);
            prop_assert_eq!(out, data);
        }

        /// Wrapped at any line length (a multiple of four or not, so quads
        /// straddle line breaks), with blanks or junk between lines, cut
        /// anywhere: the fast path takes up again after every break.
        #[test]
        fn base64_wrapped_lines(
            data in proptest::collection::vec(any::<u8>(), 0..2000),
            width in 1usize..100,
            junk in proptest::sample::select(vec![&b"\r\n"[..], b"\n", b" \r\n", b"\r\n*"]),
            cuts in proptest::collection::vec(0usize..3000, 0..4),
        ) {
            let enc = encode_b64(&data);
            let mut wrapped = Vec::new();
            for line in enc.chunks(width) {
                wrapped.extend_from_slice(line);
                wrapped.extend_from_slice(junk);
            }
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(wrapped.len())).collect();
            cuts.sort_unstable();
            let mut d = Base64Decoder::new();
            let mut out = Vec::new();
            let mut from = 0;
            for c in cuts.into_iter().chain([wrapped.len()]) {
                d.decode(&wrapped[from..c], &mut out);
                from = c;
            }
            d.finish(&mut out);
            prop_assert_eq!(out, data);
        }

        #[test]
        fn qp_any_chunking(data in proptest::collection::vec(any::<u8>(), 0..300), cut in 0usize..1000) {
            // Encode everything as =XX with soft breaks: the decoder must undo it at any cut.
            let mut enc = Vec::new();
            for (i, b) in data.iter().enumerate() {
                if i > 0 && i % 20 == 0 { enc.extend_from_slice(b"=\r\n"); }
                enc.extend_from_slice(format!("={b:02X}").as_bytes());
            }
            let cut = cut.min(enc.len());
            let mut d = QpDecoder::new();
            let mut out = Vec::new();
            d.decode(&enc[..cut], &mut out);
            d.decode(&enc[cut..], &mut out);
            d.finish(&mut out);
            prop_assert_eq!(out, data);
        }
    }
}
