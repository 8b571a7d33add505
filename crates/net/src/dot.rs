//! Dot-stuffing (RFC 5321 §4.5.2, RFC 1939 §3), the line-end rules that
//! go with it, done a piece at a time: text lines whose first character is
//! a dot get one more, and the text ends with a line holding only a dot.
//! Shared by the SMTP server (DATA in), the SMTP client (DATA out) and the
//! proxy, which does both on one stream.

/// Makes bare CR and bare LF into CRLF in text that arrives in pieces
/// (BDAT here; `sluice import` for mbox and Maildir files).
#[derive(Debug, Clone, Default)]
pub struct LineEnds {
    /// The last byte seen was a CR.
    after_cr: bool,
}

impl LineEnds {
    /// Appends `input` to `out` with its line ends made CRLF.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &b in input {
            match b {
                b'\n' if !self.after_cr => out.extend_from_slice(b"\r\n"),
                b'\n' => out.push(b'\n'),
                _ => {
                    if self.after_cr {
                        out.push(b'\n');
                    }
                    out.push(b);
                }
            }
            self.after_cr = b == b'\r';
        }
    }

    /// The end of the text: a CR left last gets its LF.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if std::mem::take(&mut self.after_cr) {
            out.push(b'\n');
        }
    }
}

/// Where the unstuffer is within the current line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the start of a line (after CRLF, or at the start of the data).
    LineStart,
    /// Inside a line.
    Middle,
    /// Just after a CR inside a line.
    Cr,
    /// A dot at the start of a line, not yet written.
    Dot,
    /// Dot then CR at the start of a line.
    DotCr,
}

/// Turns the DATA stream into the message: leading dots are removed and
/// the stream ends at `CRLF . CRLF`. Only CRLF starts a line: a bare LF
/// followed by `.` is message text, never the end of data, which keeps the
/// SMTP smuggling trick (`LF . LF` seen differently by two servers) out.
///
/// Bare line ends are stored as CRLF: a lone LF, and a CR not followed by
/// LF, each become CRLF (RFC 5321 §2.3.8 allows no other line end). So
/// mail Sluice forwards later carries no bare CR or LF for the next server
/// to read as a line end; what the sender meant as text lines stays lines.
/// Postfix 3.9 offers the same as `smtpd_forbid_bare_newline = normalize`;
/// refusing such mail instead would bounce what old scripts still send.
#[derive(Debug, Clone)]
pub struct DotUnstuffer {
    state: State,
}

impl Default for DotUnstuffer {
    fn default() -> Self {
        DotUnstuffer {
            state: State::LineStart,
        }
    }
}

impl DotUnstuffer {
    /// Feeds DATA bytes, appending message bytes to `out`. Returns how many
    /// input bytes were used and whether the end-of-data marker was seen
    /// (bytes after it are left unused: they are the next command).
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> (usize, bool) {
        let mut i = 0;
        while i < input.len() {
            match self.state {
                State::Middle => {
                    // Copy up to the next CR or LF in one go.
                    match memchr::memchr2(b'\r', b'\n', &input[i..]) {
                        Some(p) => {
                            out.extend_from_slice(&input[i..i + p]);
                            if input[i + p] == b'\r' {
                                out.push(b'\r');
                                self.state = State::Cr;
                            } else {
                                // A bare LF: stored as CRLF, but it does not
                                // start a line (see above).
                                out.extend_from_slice(b"\r\n");
                            }
                            i += p + 1;
                        }
                        None => {
                            out.extend_from_slice(&input[i..]);
                            i = input.len();
                        }
                    }
                    continue;
                }
                State::LineStart => match input[i] {
                    b'.' => self.state = State::Dot,
                    b'\r' => {
                        out.push(b'\r');
                        self.state = State::Cr;
                    }
                    _ => {
                        self.state = State::Middle;
                        continue; // Middle takes it, bare LF included
                    }
                },
                State::Cr => {
                    if input[i] == b'\n' {
                        out.push(b'\n');
                        self.state = State::LineStart;
                    } else {
                        // The CR was bare: it ends its line as CRLF, and
                        // this byte is text again.
                        out.push(b'\n');
                        self.state = State::Middle;
                        continue;
                    }
                }
                State::Dot => match input[i] {
                    b'\r' => self.state = State::DotCr,
                    _ => {
                        // The dot was stuffing; this byte is text.
                        self.state = State::Middle;
                        continue;
                    }
                },
                State::DotCr => {
                    if input[i] == b'\n' {
                        self.state = State::LineStart;
                        return (i + 1, true);
                    }
                    out.push(b'\r');
                    self.state = State::Cr;
                    continue; // look at this byte again, after the CR
                }
            }
            i += 1;
        }
        (i, false)
    }
}

/// Dot-stuffing for DATA (RFC 5321 §4.5.2), a piece at a time: a `.` at
/// the start of a line is doubled; the end makes sure the text ends with
/// CRLF and adds the final `.` line.
#[derive(Debug, Clone)]
pub struct DotStuffer {
    at_line_start: bool,
    last: u8,
}

impl Default for DotStuffer {
    fn default() -> Self {
        DotStuffer {
            at_line_start: true,
            last: b'\n',
        }
    }
}

impl DotStuffer {
    /// Appends `input`, stuffed, to `out`. Only line starts matter, so it
    /// looks at the byte after each LF (found with memchr) rather than at
    /// every byte: this runs on every byte the proxy forwards.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let Some(&last) = input.last() else {
            return;
        };
        out.reserve(input.len() + 2);
        if self.at_line_start && input[0] == b'.' {
            out.push(b'.');
        }
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', input) {
            if input.get(nl + 1) == Some(&b'.') {
                out.extend_from_slice(&input[start..=nl]);
                out.push(b'.');
                start = nl + 1;
            }
        }
        out.extend_from_slice(&input[start..]);
        self.at_line_start = last == b'\n';
        self.last = last;
    }

    /// Appends the end of data to `out`.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if self.last != b'\n' {
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b".\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(data: &[u8], pieces: &[usize]) -> (Vec<u8>, usize) {
        let mut u = DotUnstuffer::default();
        let mut out = Vec::new();
        let mut pos = 0;
        let mut k = 0;
        while pos < data.len() {
            let n = pieces
                .get(k)
                .copied()
                .unwrap_or(3)
                .max(1)
                .min(data.len() - pos);
            k += 1;
            let (used, done) = u.feed(&data[pos..pos + n], &mut out);
            pos += used;
            if done {
                return (out, pos);
            }
        }
        panic!("no end of data in {:?}", String::from_utf8_lossy(data));
    }

    /// What a client does: double every leading dot, end with CRLF.CRLF.
    fn stuff(message: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for line in message.split_inclusive(|&b| b == b'\n') {
            if line.starts_with(b".") {
                out.push(b'.');
            }
            out.extend_from_slice(line);
        }
        out.extend_from_slice(b".\r\n");
        out
    }

    fn stuff_pieces(pieces: &[&[u8]]) -> Vec<u8> {
        let mut s = DotStuffer::default();
        let mut out = Vec::new();
        for p in pieces {
            s.push(p, &mut out);
        }
        s.finish(&mut out);
        out
    }

    #[test]
    fn dots_at_line_starts_are_doubled_and_the_end_is_added() {
        assert_eq!(
            stuff_pieces(&[b".a\r\nb.\r\n.\r\n"]),
            b"..a\r\nb.\r\n..\r\n.\r\n"
        );
        assert_eq!(stuff_pieces(&[b"no newline"]), b"no newline\r\n.\r\n");
        assert_eq!(stuff_pieces(&[b"x\r\n", b".y\r\n"]), b"x\r\n..y\r\n.\r\n");
        assert_eq!(stuff_pieces(&[]), b".\r\n");
    }

    #[test]
    fn removes_stuffing_and_stops_at_the_marker() {
        let (msg, used) = run(b"a\r\n..b\r\n.\r\nQUIT\r\n", &[100]);
        assert_eq!(msg, b"a\r\n.b\r\n");
        assert_eq!(used, 11);
    }

    #[test]
    fn empty_message() {
        assert_eq!(run(b".\r\n", &[1]).0, b"");
    }

    #[test]
    fn bare_lf_dot_is_not_the_end_and_is_stored_as_crlf() {
        let (msg, _) = run(b"a\n.\nb\r\n.\r\n", &[100]);
        assert_eq!(msg, b"a\r\n.\r\nb\r\n");
    }

    #[test]
    fn dot_cr_without_lf_is_text_with_a_crlf() {
        let (msg, _) = run(b".\rx\r\n.\r\n", &[1]);
        assert_eq!(msg, b"\r\nx\r\n");
    }

    #[test]
    fn smuggling_sequences_are_stored_as_plain_lines() {
        for (data, stored) in [
            (
                &b"a\r\n.\nMAIL FROM:<x>\r\n.\r\n"[..],
                &b"a\r\n\r\nMAIL FROM:<x>\r\n"[..],
            ),
            (b"a\n.\r\nb\r\n.\r\n", b"a\r\n.\r\nb\r\n"),
            (b"a\r.\rb\r\n.\r\n", b"a\r\n.\r\nb\r\n"),
            (b"a\r\r\n\n\r\n.\r\n", b"a\r\n\r\n\r\n\r\n"),
        ] {
            for pieces in [&[100][..], &[1]] {
                let (msg, used) = run(data, pieces);
                assert_eq!(
                    String::from_utf8_lossy(&msg),
                    String::from_utf8_lossy(stored),
                    "{:?}",
                    String::from_utf8_lossy(data)
                );
                assert_eq!(used, data.len());
            }
        }
    }

    /// True if every CR and LF in `text` is part of a CRLF.
    fn only_crlf(text: &[u8]) -> bool {
        text.iter().enumerate().all(|(i, &b)| match b {
            b'\r' => text.get(i + 1) == Some(&b'\n'),
            b'\n' => i > 0 && text[i - 1] == b'\r',
            _ => true,
        })
    }

    #[test]
    fn bdat_line_ends_are_made_crlf_across_pieces() {
        let mut l = LineEnds::default();
        let mut out = Vec::new();
        for piece in [&b"a\r"[..], b"\nb\n", b"c\r", b"d\r"] {
            l.push(piece, &mut out);
        }
        l.finish(&mut out);
        assert_eq!(out, b"a\r\nb\r\nc\r\nd\r\n");
    }

    proptest! {
        #[test]
        fn whatever_comes_only_crlf_is_stored(
            data in proptest::collection::vec(prop_oneof![Just(b'\r'), Just(b'\n'), Just(b'.'), Just(b'a')], 0..40),
            pieces in proptest::collection::vec(1usize..9, 0..64),
        ) {
            let mut data = data;
            data.extend_from_slice(b"\r\n.\r\n");
            let (got, _) = run(&data, &pieces);
            prop_assert!(only_crlf(&got), "{:?} -> {:?}", data, got);
            let whole = run(&data, &[data.len()]).0;
            prop_assert_eq!(got, whole);
        }

        #[test]
        fn any_split_gives_the_original_message(
            lines in proptest::collection::vec("[.a-z]{0,12}", 0..12),
            pieces in proptest::collection::vec(1usize..9, 0..64),
        ) {
            let message: Vec<u8> = lines.iter().flat_map(|l| format!("{l}\r\n").into_bytes()).collect();
            let data = stuff(&message);
            let mut with_tail = data.clone();
            with_tail.extend_from_slice(b"RSET\r\n");
            let (got, used) = run(&with_tail, &pieces);
            prop_assert_eq!(got, message);
            prop_assert_eq!(used, data.len());
        }
    }

    proptest! {
        /// However the message is cut into pieces, the stuffed bytes are
        /// the same, and unstuffing them gives the message back.
        #[test]
        fn stuffing_does_not_depend_on_the_pieces(
            text in proptest::collection::vec(prop_oneof![Just(b'.'), Just(b'\r'), Just(b'\n'), Just(b'a')], 0..200),
            cuts in proptest::collection::vec(0usize..200, 0..6),
        ) {
            let whole = stuff_pieces(&[&text]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(text.len())).collect();
            cuts.sort_unstable();
            let mut pieces: Vec<&[u8]> = Vec::new();
            let mut at = 0;
            for c in cuts {
                pieces.push(&text[at..c]);
                at = c;
            }
            pieces.push(&text[at..]);
            prop_assert_eq!(&stuff_pieces(&pieces), &whole);
            // Unstuff: drop the final ".\r\n", then a dot at a line start.
            let body = &whole[..whole.len() - 3];
            let mut back = Vec::new();
            let mut line_start = true;
            let mut i = 0;
            while i < body.len() {
                if line_start && body[i] == b'.' {
                    i += 1;
                }
                if i < body.len() {
                    back.push(body[i]);
                    line_start = body[i] == b'\n';
                }
                i += 1;
            }
            let mut expect = text.clone();
            if expect.last().is_some_and(|&b| b != b'\n') {
                expect.extend_from_slice(b"\r\n");
            }
            prop_assert_eq!(back, expect);
        }
    }
}
