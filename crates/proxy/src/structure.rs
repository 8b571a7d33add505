//! The MIME structure of the text a POP3 client has been sent so far, so
//! that a message cut short at an infected part can still be closed
//! well-formed (RFC 2046 §5.1.1): the notice goes in as a new part of the
//! innermost open multipart, and every open multipart gets its closing
//! delimiter.
//!
//! The scanner has its own MIME parser, but it runs ahead of what was
//! sent (the proxy holds one line back until the next has been scanned),
//! so this tracks the sent text alone. It needs only the boundaries: a
//! line at a time, header fields other than Content-Type are skipped.

/// Longest Content-Type value kept (RFC 2046 caps a boundary at 70
/// characters; parameters before it are short in real mail).
const MAX_CONTENT_TYPE: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Header,
    Body,
}

/// Open multiparts of the text sent so far.
#[derive(Debug)]
pub(crate) struct Structure {
    /// Boundaries of the open multiparts, innermost last.
    open: Vec<Vec<u8>>,
    phase: Phase,
    /// The Content-Type value of the header being read.
    content_type: Vec<u8>,
    /// The header field being read is Content-Type (folded lines continue it).
    in_content_type: bool,
    /// The last text seen ended a line.
    at_line_start: bool,
    /// Nesting cap, as the scanner's.
    max_depth: usize,
}

impl Structure {
    /// A message about to start, with at most `max_depth` nested multiparts tracked.
    pub fn new(max_depth: usize) -> Structure {
        Structure {
            open: Vec::new(),
            phase: Phase::Header,
            content_type: Vec::new(),
            in_content_type: false,
            at_line_start: true,
            max_depth,
        }
    }

    /// Takes the next piece of sent (unstuffed) text: a whole line, or a
    /// piece of a long one.
    pub fn push(&mut self, piece: &[u8]) {
        let starts_line = self.at_line_start;
        self.at_line_start = piece.ends_with(b"\n");
        if !starts_line {
            if self.phase == Phase::Header && self.in_content_type {
                self.keep(piece);
            }
            return;
        }
        let line = trim_eol(piece);
        match self.phase {
            Phase::Header => {
                if line.is_empty() {
                    self.end_of_header();
                } else if line[0] == b' ' || line[0] == b'\t' {
                    if self.in_content_type {
                        self.keep(line);
                    }
                } else {
                    self.in_content_type =
                        line.len() > 13 && line[..13].eq_ignore_ascii_case(b"content-type:");
                    if self.in_content_type {
                        self.content_type.clear();
                        self.keep(&line[13..]);
                    }
                }
            }
            Phase::Body => {
                let Some(rest) = line.strip_prefix(b"--") else {
                    return;
                };
                // An outer boundary closes every part inside it.
                for i in (0..self.open.len()).rev() {
                    let Some(after) = rest.strip_prefix(self.open[i].as_slice()) else {
                        continue;
                    };
                    if after.starts_with(b"--") {
                        self.open.truncate(i);
                        self.phase = Phase::Body;
                        return;
                    }
                    if after.iter().all(|b| *b == b' ' || *b == b'\t') {
                        self.open.truncate(i + 1);
                        self.phase = Phase::Header;
                        self.content_type.clear();
                        self.in_content_type = false;
                        return;
                    }
                }
            }
        }
    }

    fn keep(&mut self, text: &[u8]) {
        let room = MAX_CONTENT_TYPE.saturating_sub(self.content_type.len());
        self.content_type
            .extend_from_slice(&text[..text.len().min(room)]);
    }

    fn end_of_header(&mut self) {
        let value = String::from_utf8_lossy(&self.content_type).to_string();
        self.content_type.clear();
        self.in_content_type = false;
        let mime_type = value
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if mime_type.starts_with("multipart/") && self.open.len() < self.max_depth {
            if let Some(b) = boundary(&value) {
                self.open.push(b.into_bytes());
                self.phase = Phase::Body;
                return;
            }
        }
        // A message/rfc822 part's body is a message: its header comes next.
        self.phase = if mime_type == "message/rfc822" {
            Phase::Header
        } else {
            Phase::Body
        };
    }

    /// The text that ends the message well-formed from here: a part with
    /// `notice` in the innermost open multipart and the closing delimiter
    /// of each open multipart. Without a multipart (a message of one part)
    /// the body just ends: no part can be added to it.
    pub fn close(&self, notice: &str) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.at_line_start {
            out.extend_from_slice(b"\r\n");
        }
        if self.phase == Phase::Header {
            // Cut inside a header: end it; the part's body is empty.
            out.extend_from_slice(b"\r\n");
        }
        let Some((inner, outer)) = self.open.split_last() else {
            if self.phase == Phase::Header {
                // The top-level header was cut: the notice is the body.
                out.extend_from_slice(notice.as_bytes());
            }
            return out;
        };
        out.extend_from_slice(b"\r\n--");
        out.extend_from_slice(inner);
        out.extend_from_slice(
            b"\r\nContent-Type: text/plain; charset=us-ascii\r\nContent-Transfer-Encoding: 7bit\r\nContent-Disposition: inline; filename=\"removed-by-sluice.txt\"\r\n\r\n",
        );
        out.extend_from_slice(notice.as_bytes());
        for b in std::iter::once(inner).chain(outer.iter().rev()) {
            out.extend_from_slice(b"\r\n--");
            out.extend_from_slice(b);
            out.extend_from_slice(b"--");
        }
        out.extend_from_slice(b"\r\n");
        out
    }
}

fn trim_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The `boundary` parameter of a Content-Type value (RFC 2045 §5.1), quoted
/// or not.
fn boundary(value: &str) -> Option<String> {
    for param in value.split(';').skip(1) {
        let Some((name, v)) = param.split_once('=') else {
            continue;
        };
        if !name.trim().eq_ignore_ascii_case("boundary") {
            continue;
        }
        let v = v.trim();
        let v = match v.strip_prefix('"') {
            Some(q) => q.split('"').next().unwrap_or(""),
            None => v.split_ascii_whitespace().next().unwrap_or(""),
        };
        return (!v.is_empty()).then(|| v.to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(text: &str) -> Structure {
        let mut s = Structure::new(32);
        for line in text.split_inclusive('\n') {
            s.push(line.as_bytes());
        }
        s
    }

    #[test]
    fn boundaries_quoted_or_not() {
        assert_eq!(
            boundary("multipart/mixed; boundary=\"a b\"").as_deref(),
            Some("a b")
        );
        assert_eq!(
            boundary("multipart/mixed;\tBoundary=xyz ; x=1").as_deref(),
            Some("xyz")
        );
        assert_eq!(boundary("multipart/mixed"), None);
    }

    #[test]
    fn nested_parts_are_closed_inside_out() {
        let s = feed(concat!(
            "Subject: t\r\nContent-Type: multipart/mixed;\r\n boundary=\"outer\"\r\n\r\n",
            "preamble\r\n--outer\r\nContent-Type: text/plain\r\n\r\nhello\r\n",
            "--outer\r\nContent-Type: multipart/alternative; boundary=inner\r\n\r\n",
            "--inner\r\nContent-Type: application/zip\r\nContent-Transfer-Encoding: base64\r\n\r\n",
            "UEsDBAoAAAAAAA\r\n",
        ));
        assert_eq!(s.open, vec![b"outer".to_vec(), b"inner".to_vec()]);
        let closing = String::from_utf8(s.close("removed\r\n")).unwrap();
        assert!(closing.starts_with("\r\n--inner\r\nContent-Type: text/plain"));
        assert!(
            closing.ends_with("removed\r\n\r\n--inner--\r\n--outer--\r\n"),
            "{closing}"
        );
    }

    #[test]
    fn closed_parts_leave_the_stack() {
        let s = feed(concat!(
            "Content-Type: multipart/mixed; boundary=o\r\n\r\n",
            "--o\r\nContent-Type: multipart/related; boundary=i\r\n\r\n--i\r\n\r\nx\r\n--i--\r\n",
            "--o\r\nContent-Type: message/rfc822\r\n\r\nContent-Type: multipart/mixed; boundary=m\r\n\r\n--m\r\n\r\nbody\r\n",
        ));
        assert_eq!(s.open, vec![b"o".to_vec(), b"m".to_vec()]);
        let s = feed("Content-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\n\r\nx\r\n--o--\r\nepilogue\r\n");
        assert!(s.open.is_empty());
    }

    #[test]
    fn a_cut_in_a_header_or_a_long_line_still_closes() {
        let mut s =
            feed("Content-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\nContent-Type: app");
        s.push(b"lication/zip\r\n");
        let c = String::from_utf8(s.close("n\r\n")).unwrap();
        assert!(c.starts_with("\r\n\r\n--o\r\n"), "{c:?}");
        let mut s = feed("Content-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\n\r\n");
        s.push(b"a long line without its end");
        let c = String::from_utf8(s.close("n\r\n")).unwrap();
        assert!(
            c.starts_with("\r\n\r\n--o\r\n") && c.ends_with("--o--\r\n"),
            "{c:?}"
        );
        // One part only: nothing can be added after the body.
        let s = feed("Content-Type: application/zip\r\n\r\nUEsDB\r\n");
        assert!(s.close("n\r\n").is_empty());
    }
}
