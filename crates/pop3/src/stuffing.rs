//! Multi-line responses (RFC 1939 §3): lines starting with `.` get one
//! more, and the response ends with `.` on a line of its own. Messages are
//! sent piece by piece, so the line-start state carries across pieces.

/// Byte-stuffs message pieces for a multi-line response.
#[derive(Debug)]
pub(crate) struct Stuffer {
    at_line_start: bool,
    last: Option<u8>,
}

impl Default for Stuffer {
    fn default() -> Self {
        Stuffer {
            at_line_start: true,
            last: None,
        }
    }
}

impl Stuffer {
    /// Appends `piece`, stuffed, to `out`.
    pub fn push(&mut self, piece: &[u8], out: &mut Vec<u8>) {
        for line in piece.split_inclusive(|&b| b == b'\n') {
            if self.at_line_start && line.first() == Some(&b'.') {
                out.push(b'.');
            }
            out.extend_from_slice(line);
            self.at_line_start = line.last() == Some(&b'\n');
        }
        if let Some(&b) = piece.last() {
            self.last = Some(b);
        }
    }

    /// Appends the terminator, with a CRLF first if the message did not
    /// end with one.
    pub fn finish(self, out: &mut Vec<u8>) {
        if !self.at_line_start {
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b".\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn stuffs_leading_dots_and_terminates() {
        let mut s = Stuffer::default();
        let mut out = Vec::new();
        s.push(b".a\r\nb.\r\n.", &mut out);
        s.push(b"\r\n", &mut out);
        s.finish(&mut out);
        assert_eq!(out, b"..a\r\nb.\r\n..\r\n.\r\n");
    }

    proptest! {
        #[test]
        fn any_split_stuffs_the_same(data in proptest::collection::vec(prop_oneof![Just(b'.'), Just(b'\r'), Just(b'\n'), Just(b'x')], 0..200), cut in 0usize..200) {
            let cut = cut.min(data.len());
            let mut whole = Vec::new();
            let mut s = Stuffer::default();
            s.push(&data, &mut whole);
            s.finish(&mut whole);
            let mut split = Vec::new();
            let mut s = Stuffer::default();
            s.push(&data[..cut], &mut split);
            s.push(&data[cut..], &mut split);
            s.finish(&mut split);
            prop_assert_eq!(whole, split);
        }
    }
}
