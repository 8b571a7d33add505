//! Leaf parts of a message rewritten while it streams by, for two uses:
//!
//! - **Binary content made storable** ([`PartRewriter::binary_to_base64`]):
//!   a client APPENDs binary data (NULs included) with a `literal8`
//!   (RFC 3516). An IMAP literal may not carry a NUL (RFC 3501 §4.3), and
//!   RFC 3516 §4.3 lets the server change the content-transfer-encoding of
//!   what it stores, as Dovecot does. So every leaf part that is not
//!   already base64 or quoted-printable (7bit, 8bit, binary, or none) is
//!   stored base64-encoded, with its `Content-Transfer-Encoding` field
//!   replaced (and `MIME-Version` added to a message without one). The
//!   decoded content is unchanged: `BINARY[...]` returns the bytes sent.
//! - **Text only** ([`PartRewriter::text_only`]): the bodies of leaf parts
//!   that are not text (attachments, images) are left out, so what indexes
//!   a message (its header fields and text) keeps only what it reads, not
//!   megabytes of base64 it would throw away.
//! - **Text parts decoded** ([`PartRewriter::text_parts`]): only the
//!   content of text leaves comes out, its transfer encoding undone, with
//!   a mark ([`TextMark`]) where each entity's header block was and where
//!   each text leaf ends: what indexes a message of any size reads, in
//!   bounded memory.
//!
//! Otherwise, multipart and message/rfc822 wrappers, header blocks,
//! preambles, epilogues and delimiter lines pass as they are. Memory is
//! bounded by one header block ([`MAX_HEADER`]) and one delimiter line,
//! whatever the size of the message.

use crate::base64_lines::Base64Lines;
use crate::content_decoder::{ContentDecoder, TransferEncoding};
use crate::header::{content_type, fields, transfer_encoding};

/// Longest header block taken apart; a longer one passes unchanged and its
/// body with it.
pub const MAX_HEADER: usize = 64 * 1024;

/// Longest line still looked at as a possible delimiter line (a boundary
/// is at most 70 characters, RFC 2046 §5.1.1, then optional padding).
const MAX_DELIMITER_LINE: usize = 1000;

/// Nested multiparts followed; deeper ones pass as the content of their part.
const MAX_DEPTH: usize = 64;

/// What the bytes being read belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A header block, collected whole.
    Header,
    /// A body, and what becomes of it.
    Body(Action),
}

/// What becomes of a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Pass,
    Base64,
    Drop,
    /// The transfer encoding undone ([`PartRewriter::text_parts`]).
    Decode,
}

/// What the rewriter is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    BinaryToBase64,
    TextOnly,
    TextParts,
}

/// What [`PartRewriter::text_parts`] marks in its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextMark {
    /// The header block of an entity: the message (`top`), a part, or an
    /// attached message. When `text`, the entity is a text leaf whose
    /// decoded content follows, up to the next [`TextMark::End`].
    Header {
        block: Vec<u8>,
        top: bool,
        text: Option<TextLeaf>,
    },
    /// The end of a text leaf's content.
    End,
}

/// What a reader needs to make text of a text leaf's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextLeaf {
    /// The subtype, lower-case (`plain`, `html`, ...).
    pub subtype: String,
    /// The `charset` parameter, as written.
    pub charset: Option<String>,
}

/// The streaming rewriter: [`PartRewriter::push`] the message in pieces of
/// any size, then [`PartRewriter::finish`].
#[derive(Debug)]
pub struct PartRewriter {
    purpose: Purpose,
    mode: Mode,
    /// The entity being read is the message itself (not a part).
    top: bool,
    /// Boundaries of the open multiparts, innermost last.
    boundaries: Vec<Vec<u8>>,
    /// The header block being collected.
    header: Vec<u8>,
    /// The start of the current body line, while it may still be a
    /// delimiter line.
    line: Vec<u8>,
    /// The current body line is known not to be a delimiter line: its
    /// bytes go straight on.
    line_decided: bool,
    /// The previous body line's end, held back: before a delimiter line it
    /// belongs to the delimiter, not to the body (RFC 2046 §5.1.1).
    held_eol: Vec<u8>,
    base64: Base64Lines,
    decoder: ContentDecoder,
    /// Marks of [`Purpose::TextParts`] since they were last taken, each
    /// with the length `out` had when it was made.
    marks: Vec<(usize, TextMark)>,
}

impl PartRewriter {
    /// Leaf parts not in base64 or quoted-printable become base64.
    pub fn binary_to_base64() -> PartRewriter {
        PartRewriter::new(Purpose::BinaryToBase64)
    }

    /// The bodies of leaf parts that are not text are left out.
    pub fn text_only() -> PartRewriter {
        PartRewriter::new(Purpose::TextOnly)
    }

    /// Only the decoded content of text leaves comes out, with marks
    /// ([`PartRewriter::take_marks`]).
    pub fn text_parts() -> PartRewriter {
        PartRewriter::new(Purpose::TextParts)
    }

    /// The marks made since the last call, in order, each with the length
    /// the output had when it was made: what came out after it up to the
    /// next mark belongs to it.
    pub fn take_marks(&mut self) -> Vec<(usize, TextMark)> {
        std::mem::take(&mut self.marks)
    }

    fn new(purpose: Purpose) -> PartRewriter {
        PartRewriter {
            purpose,
            mode: Mode::Header,
            top: true,
            boundaries: Vec::new(),
            header: Vec::new(),
            line: Vec::new(),
            line_decided: false,
            held_eol: Vec::new(),
            base64: Base64Lines::default(),
            decoder: ContentDecoder::new(TransferEncoding::Identity),
            marks: Vec::new(),
        }
    }

    /// Converts the next piece of the message, appending to `out`.
    pub fn push(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        while !input.is_empty() {
            let (taken, line_ended) = match memchr::memchr(b'\n', input) {
                Some(i) => (&input[..=i], true),
                None => (input, false),
            };
            input = &input[taken.len()..];
            match self.mode {
                Mode::Header => self.header_bytes(taken, line_ended, out),
                Mode::Body(_) => self.body_bytes(taken, line_ended, out),
            }
        }
    }

    /// Converts what is left at the end of the message; returns the marks
    /// not yet taken ([`PartRewriter::take_marks`]).
    pub fn finish(mut self, out: &mut Vec<u8>) -> Vec<(usize, TextMark)> {
        if matches!(self.mode, Mode::Body(_)) && !self.line_decided {
            // A last delimiter line without a line end.
            if let Some((depth, close)) = self.delimiter(&self.line) {
                let line = std::mem::take(&mut self.line);
                self.on_delimiter(depth, close, &line, out);
            }
        }
        match self.mode {
            // A header block without a body (or without its empty line).
            Mode::Header if self.purpose == Purpose::TextParts => {}
            Mode::Header => out.extend_from_slice(&self.header),
            Mode::Body(action) => {
                let held = std::mem::take(&mut self.held_eol);
                let line = std::mem::take(&mut self.line);
                self.body_content(&held, out);
                self.body_content(&line, out);
                if action == Action::Base64 {
                    // The message's last line end was part of the content.
                    self.base64.finish(out);
                    out.extend_from_slice(b"\r\n");
                }
                self.end_body(out);
            }
        }
        self.marks
    }

    /// The end of a body: a decoded one gives what it held back, and its
    /// end mark.
    fn end_body(&mut self, out: &mut Vec<u8>) {
        if self.mode == Mode::Body(Action::Decode) {
            self.decoder.finish(out);
            self.marks.push((out.len(), TextMark::End));
        }
    }

    /// A header block goes out as it is, or, for [`Purpose::TextParts`],
    /// as a mark.
    fn header_out(&mut self, header: &[u8], top: bool, text: Option<TextLeaf>, out: &mut Vec<u8>) {
        if self.purpose == Purpose::TextParts {
            let mark = TextMark::Header {
                block: header.to_vec(),
                top,
                text,
            };
            self.marks.push((out.len(), mark));
        } else {
            out.extend_from_slice(header);
        }
    }

    /// What becomes of a body that is not a leaf's content (a preamble,
    /// an epilogue, what a header too large to take apart hides).
    fn wrapper_action(&self) -> Action {
        if self.purpose == Purpose::TextParts {
            Action::Drop
        } else {
            Action::Pass
        }
    }

    fn header_bytes(&mut self, bytes: &[u8], line_ended: bool, out: &mut Vec<u8>) {
        let line_start = self.header.len() - self.header_tail_len();
        self.header.extend_from_slice(bytes);
        if !line_ended {
            if self.header.len() > MAX_HEADER {
                self.give_up_header(out);
            }
            return;
        }
        let line = &self.header[line_start..];
        let text = strip_eol(line);
        if !self.top {
            if let Some((depth, close)) = self.delimiter(text) {
                // A part with no body at all: its header ends here.
                let line = line.to_vec();
                self.header.truncate(line_start);
                let header = std::mem::take(&mut self.header);
                self.header_out(&header, false, None, out);
                self.on_delimiter(depth, close, &line, out);
                return;
            }
        }
        if text.is_empty() {
            let header = std::mem::take(&mut self.header);
            self.end_of_header(&header, out);
        } else if self.header.len() > MAX_HEADER {
            self.give_up_header(out);
        }
    }

    /// Length of the unfinished last line of the header being collected.
    fn header_tail_len(&self) -> usize {
        match self.header.iter().rposition(|&b| b == b'\n') {
            Some(i) => self.header.len() - i - 1,
            None => self.header.len(),
        }
    }

    /// A header block too large to take apart: it passes unchanged, and so
    /// does its body.
    fn give_up_header(&mut self, out: &mut Vec<u8>) {
        let tail = self.header_tail_len();
        let done = self.header.len() - tail;
        if self.purpose != Purpose::TextParts {
            out.extend_from_slice(&self.header[..done]);
        }
        let rest = self.header.split_off(done);
        self.header.clear();
        self.enter_body(self.wrapper_action());
        self.body_bytes(&rest, false, out);
    }

    fn end_of_header(&mut self, header: &[u8], out: &mut Vec<u8>) {
        let mut ctype = None;
        let mut cte = None;
        let mut has_mime_version = false;
        for f in fields(header) {
            if f.is("Content-Type") {
                ctype = content_type(f.raw);
            } else if f.is("Content-Transfer-Encoding") {
                cte = transfer_encoding(f.raw).map(|c| c.to_ascii_lowercase());
            } else if f.is("MIME-Version") {
                has_mime_version = true;
            }
        }
        let boundary = ctype.as_ref().and_then(|(ty, _, params)| {
            (ty == "multipart")
                .then(|| {
                    params
                        .iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case("boundary"))
                })
                .flatten()
                .map(|(_, v)| v.as_bytes().to_vec())
                .filter(|b| !b.is_empty())
        });
        let encoded = matches!(cte.as_deref(), Some("base64" | "quoted-printable"));
        let nested = matches!(&ctype, Some((ty, sub, _)) if ty == "message"
            && (sub == "rfc822" || sub == "global"));
        let text = ctype.as_ref().is_none_or(|(ty, _, _)| ty == "text");
        let deep = self.boundaries.len() >= MAX_DEPTH;
        let message = std::mem::replace(&mut self.top, false);
        if let (Some(b), false) = (boundary, deep) {
            self.header_out(header, message, None, out);
            self.boundaries.push(b);
            self.enter_body(self.wrapper_action());
        } else if nested && !encoded && !deep {
            // The enclosed message's own header follows.
            self.header_out(header, message, None, out);
            self.mode = Mode::Header;
        } else if deep {
            self.header_out(header, message, None, out);
            self.enter_body(self.wrapper_action());
        } else {
            let action = match self.purpose {
                Purpose::BinaryToBase64 if encoded => Action::Pass,
                Purpose::BinaryToBase64 => Action::Base64,
                Purpose::TextOnly if text => Action::Pass,
                Purpose::TextParts if text => Action::Decode,
                Purpose::TextOnly | Purpose::TextParts => Action::Drop,
            };
            if action == Action::Base64 {
                write_header_as_base64(header, !has_mime_version && message, out);
            } else {
                let leaf = (action == Action::Decode).then(|| {
                    let (subtype, params) = match ctype {
                        Some((_, sub, params)) => (sub, params),
                        None => ("plain".to_string(), Vec::new()),
                    };
                    TextLeaf {
                        subtype,
                        charset: params
                            .into_iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case("charset"))
                            .map(|(_, v)| v),
                    }
                });
                self.header_out(header, message, leaf, out);
            }
            self.enter_body(action);
            if action == Action::Decode {
                self.decoder = ContentDecoder::new(TransferEncoding::named(cte.as_deref()));
            }
        }
    }

    fn enter_body(&mut self, action: Action) {
        self.mode = Mode::Body(action);
        self.line.clear();
        self.line_decided = false;
        self.held_eol.clear();
        self.base64 = Base64Lines::default();
    }

    fn body_bytes(&mut self, bytes: &[u8], line_ended: bool, out: &mut Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        self.line.extend_from_slice(bytes);
        if !self.line_decided {
            let text = if line_ended {
                split_eol(&self.line).0
            } else {
                &self.line
            };
            match self.line_kind(text, line_ended) {
                LineKind::Undecided => return,
                LineKind::Delimiter(depth, close) => {
                    let line = std::mem::take(&mut self.line);
                    self.on_delimiter(depth, close, &line, out);
                    return;
                }
                LineKind::Content => {
                    let held = std::mem::take(&mut self.held_eol);
                    self.body_content(&held, out);
                    self.line_decided = true;
                }
            }
        }
        // The line's content goes on; its end is held back, and so is a CR
        // that may be the start of it.
        let line = std::mem::take(&mut self.line);
        if line_ended {
            let (text, eol) = split_eol(&line);
            self.body_content(text, out);
            self.held_eol = eol.to_vec();
            self.line_decided = false;
        } else if let Some(text) = line.strip_suffix(b"\r") {
            self.body_content(text, out);
            self.line = b"\r".to_vec();
        } else {
            self.body_content(&line, out);
        }
    }

    fn body_content(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        match self.mode {
            Mode::Body(Action::Base64) => self.base64.push(bytes, out),
            Mode::Body(Action::Drop) => {}
            Mode::Body(Action::Decode) => self.decoder.push(bytes, out),
            _ => out.extend_from_slice(bytes),
        }
    }

    /// Whether the body line `line` (without its end; `complete` when the
    /// end has come) is a delimiter line, content, or cannot be told yet.
    fn line_kind(&self, line: &[u8], complete: bool) -> LineKind {
        if self.boundaries.is_empty() || line.first().is_some_and(|&b| b != b'-') {
            return LineKind::Content;
        }
        if complete {
            return match self.delimiter(line) {
                Some((depth, close)) => LineKind::Delimiter(depth, close),
                None => LineKind::Content,
            };
        }
        if line.len() > MAX_DELIMITER_LINE {
            return LineKind::Content;
        }
        // Still possibly `--boundary`, `--` and padding: wait for the end.
        let possible = self.boundaries.iter().any(|b| {
            let (start, rest) = line.split_at(line.len().min(2 + b.len()));
            let mut want = b"--".to_vec();
            want.extend_from_slice(b);
            want.starts_with(start)
                && rest
                    .iter()
                    .all(|&c| matches!(c, b'-' | b' ' | b'\t' | b'\r'))
        });
        if possible {
            LineKind::Undecided
        } else {
            LineKind::Content
        }
    }

    /// Which open multipart `line` (without its end) delimits, innermost
    /// first, and whether it closes it.
    fn delimiter(&self, line: &[u8]) -> Option<(usize, bool)> {
        let rest = line.strip_prefix(b"--")?;
        self.boundaries
            .iter()
            .enumerate()
            .rev()
            .find_map(|(depth, b)| {
                let after = rest.strip_prefix(b.as_slice())?;
                let (close, pad) = match after.strip_prefix(b"--") {
                    Some(pad) => (true, pad),
                    None => (false, after),
                };
                pad.iter()
                    .all(|&c| c == b' ' || c == b'\t')
                    .then_some((depth, close))
            })
    }

    fn on_delimiter(&mut self, depth: usize, close: bool, line: &[u8], out: &mut Vec<u8>) {
        if self.mode == Mode::Body(Action::Base64) {
            self.base64.finish(out);
        }
        self.end_body(out);
        if self.purpose != Purpose::TextParts {
            out.extend_from_slice(&self.held_eol);
            out.extend_from_slice(line);
        }
        // Inner multiparts left open end with their enclosing part.
        self.boundaries.truncate(depth + 1);
        if close {
            self.boundaries.pop();
            self.enter_body(Action::Pass);
        } else {
            self.mode = Mode::Header;
            self.held_eol.clear();
            self.line.clear();
        }
    }
}

enum LineKind {
    Undecided,
    Delimiter(usize, bool),
    Content,
}

/// The header block with its `Content-Transfer-Encoding` fields dropped
/// and `base64` named instead, before the empty line.
fn write_header_as_base64(header: &[u8], add_mime_version: bool, out: &mut Vec<u8>) {
    let mut rest = header;
    let mut dropping = false;
    while !rest.is_empty() {
        let end = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
        let line = &rest[..end];
        rest = &rest[end..];
        let text = strip_eol(line);
        if text.is_empty() {
            break;
        }
        let continuation = matches!(text.first(), Some(b' ' | b'\t'));
        if !continuation {
            dropping = field_name(text).eq_ignore_ascii_case(b"Content-Transfer-Encoding");
        }
        if !dropping {
            out.extend_from_slice(line);
            if !line.ends_with(b"\n") {
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    if add_mime_version {
        out.extend_from_slice(b"MIME-Version: 1.0\r\n");
    }
    out.extend_from_slice(b"Content-Transfer-Encoding: base64\r\n\r\n");
}

fn field_name(line: &[u8]) -> &[u8] {
    let colon = line.iter().position(|&b| b == b':').unwrap_or(line.len());
    let name = &line[..colon];
    let end = name
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(0, |i| i + 1);
    &name[..end]
}

fn strip_eol(line: &[u8]) -> &[u8] {
    split_eol(line).0
}

/// A line and its end (`\r\n`, `\n`, or none).
fn split_eol(line: &[u8]) -> (&[u8], &[u8]) {
    let n = if line.ends_with(b"\r\n") {
        2
    } else if line.ends_with(b"\n") {
        1
    } else {
        0
    };
    line.split_at(line.len() - n)
}

/// A whole message with its binary parts made base64
/// ([`PartRewriter::binary_to_base64`]).
pub fn encode_binary_parts(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() * 4 / 3 + 256);
    let mut rewriter = PartRewriter::binary_to_base64();
    rewriter.push(message, &mut out);
    rewriter.finish(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mail_parser::{MessageParser, PartType};
    use proptest::prelude::*;

    /// The conversion with the message cut into pieces of `size` bytes.
    fn in_pieces(message: &[u8], size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rewriter = PartRewriter::binary_to_base64();
        for piece in message.chunks(size.max(1)) {
            rewriter.push(piece, &mut out);
        }
        rewriter.finish(&mut out);
        out
    }

    /// Every leaf's decoded content, in order.
    fn contents(message: &[u8]) -> Vec<Vec<u8>> {
        let parsed = MessageParser::default().parse(message).expect("parses");
        parsed
            .parts
            .iter()
            .filter_map(|p| match &p.body {
                PartType::Text(t) | PartType::Html(t) => Some(t.as_bytes().to_vec()),
                PartType::Binary(b) | PartType::InlineBinary(b) => Some(b.to_vec()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_single_part_message_with_nuls_becomes_base64() {
        let message = b"From: a@example.org\r\nSubject: nul\r\n\r\nhello\0world\r\n";
        let out = encode_binary_parts(message);
        assert_eq!(
            out,
            b"From: a@example.org\r\nSubject: nul\r\nMIME-Version: 1.0\r\n\
              Content-Transfer-Encoding: base64\r\n\r\naGVsbG8Ad29ybGQNCg==\r\n"
        );
        assert!(!out.contains(&0));
    }

    #[test]
    fn binary_parts_are_encoded_and_the_rest_passes() {
        let message = b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n\
            preamble\r\n--b\r\nContent-Type: text/plain\r\n\r\nalready text\r\n\
            --b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\n\
             \r\n\0\x01\x02\r\n--b\r\nContent-Transfer-Encoding: base64\r\n\r\nAAEC\r\n--b--\r\nepilogue\r\n";
        let out = encode_binary_parts(message);
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\npreamble\r\n--b\r\n"), "{text}");
        assert!(text.contains("Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\nAAEC\r\n--b\r\n"), "{text}");
        assert!(!text.contains("binary"), "{text}");
        // The part that was base64 already is left alone; the epilogue too.
        assert!(
            text.ends_with(
                "\r\n--b\r\nContent-Transfer-Encoding: base64\r\n\r\nAAEC\r\n--b--\r\nepilogue\r\n"
            ),
            "{text}"
        );
        assert_eq!(
            contents(&out),
            contents(message)[..2]
                .iter()
                .cloned()
                .chain([vec![0, 1, 2]])
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_folded_transfer_encoding_field_goes_whole() {
        let message =
            b"Subject: x\r\nContent-Transfer-Encoding:\r\n  8bit\r\nX-After: y\r\n\r\n\xff\0";
        let out = encode_binary_parts(message);
        assert_eq!(
            out,
            b"Subject: x\r\nX-After: y\r\nMIME-Version: 1.0\r\nContent-Transfer-Encoding: base64\r\n\r\n/wA=\r\n"
        );
    }

    #[test]
    fn message_rfc822_parts_are_entered() {
        let message = b"Content-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\n\
            Content-Type: message/rfc822\r\n\r\nSubject: inner\r\n\r\nin\0ner\r\n--o--";
        let out = encode_binary_parts(message);
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("Content-Type: message/rfc822\r\n\r\nSubject: inner\r\nContent-Transfer-Encoding: base64\r\n\r\naW4AbmVy\r\n--o--"), "{text}");
    }

    fn text_only(message: &[u8], size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rewriter = PartRewriter::text_only();
        for piece in message.chunks(size.max(1)) {
            rewriter.push(piece, &mut out);
        }
        rewriter.finish(&mut out);
        out
    }

    fn texts(message: &[u8]) -> Vec<String> {
        let parsed = MessageParser::default().parse(message).expect("parses");
        (0..parsed.text_body_count())
            .filter_map(|i| parsed.body_text(i).map(|t| t.into_owned()))
            .collect()
    }

    #[test]
    fn text_only_keeps_headers_and_text_and_drops_attachments() {
        let attachment = "QUFBQUFB\r\n".repeat(10_000);
        let message = format!(
            "From: a@example.org\r\nSubject: report\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n\
             --b\r\nContent-Type: application/zip; name=r.zip\r\nContent-Transfer-Encoding: base64\r\n\r\n\
             {attachment}--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nthe text after it\r\n\
             --b\r\nContent-Type: text/html\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n<p>and=20html</p>\r\n--b--\r\n"
        );
        let out = text_only(message.as_bytes(), 4096);
        assert!(out.len() < 1024, "{}", String::from_utf8_lossy(&out));
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.starts_with("From: a@example.org\r\nSubject: report\r\n"),
            "{text}"
        );
        assert!(text.contains("Content-Type: application/zip; name=r.zip\r\nContent-Transfer-Encoding: base64\r\n\r\n\r\n--b\r\n"), "{text}");
        assert_eq!(texts(&out), texts(message.as_bytes()));
        assert_eq!(text_only(message.as_bytes(), 7), out);
    }

    /// Text leaves with their decoded content.
    type Leaves = Vec<(TextLeaf, Vec<u8>)>;

    /// The text leaves [`PartRewriter::text_parts`] gives, with their
    /// decoded content, and every header block it marked.
    fn text_parts(message: &[u8], size: usize) -> (Leaves, Vec<Vec<u8>>) {
        let mut rewriter = PartRewriter::text_parts();
        let mut out = Vec::new();
        let mut marks = Vec::new();
        for piece in message.chunks(size.max(1)) {
            let start = out.len();
            rewriter.push(piece, &mut out);
            marks.extend(
                rewriter
                    .take_marks()
                    .into_iter()
                    .map(|(at, m)| (start.max(at), m)),
            );
        }
        let start = out.len();
        let last = rewriter.finish(&mut out);
        marks.extend(last.into_iter().map(|(at, m)| (start.max(at), m)));
        let mut leaves = Vec::new();
        let mut headers = Vec::new();
        let mut open: Option<(TextLeaf, usize)> = None;
        for (at, mark) in marks {
            match mark {
                TextMark::Header { block, text, .. } => {
                    assert!(open.is_none(), "a header inside a text leaf");
                    headers.push(block);
                    open = text.map(|t| (t, at));
                }
                TextMark::End => {
                    let (leaf, from) = open.take().expect("an end after a text leaf");
                    leaves.push((leaf, out[from..at].to_vec()));
                }
            }
        }
        assert!(open.is_none(), "a text leaf without its end");
        (leaves, headers)
    }

    #[test]
    fn text_parts_come_decoded_with_their_headers_marked() {
        let attachment = "QUFBQUFB\r\n".repeat(1_000);
        let message = format!(
            "From: a@example.org\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n\
             preamble\r\n--b\r\nContent-Type: application/zip; name=r.zip\r\nContent-Transfer-Encoding: base64\r\n\r\n\
             {attachment}--b\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\ncaf=E9 au =\r\nlait\r\n\
             --b\r\nContent-Type: text/html\r\nContent-Transfer-Encoding: base64\r\n\r\nPHA+aHRtbDwvcD4=\r\n\
             --b\r\nContent-Type: message/rfc822\r\n\r\nSubject: inner\r\n\r\ninner text\r\n--b--\r\nepilogue\r\n"
        );
        for size in [1, 7, 4096, message.len()] {
            let (leaves, headers) = text_parts(message.as_bytes(), size);
            let got: Vec<(&str, Option<&str>, &[u8])> = leaves
                .iter()
                .map(|(l, c)| (l.subtype.as_str(), l.charset.as_deref(), c.as_slice()))
                .collect();
            assert_eq!(
                got,
                [
                    ("plain", Some("iso-8859-1"), b"caf\xe9 au lait".as_slice()),
                    ("html", None, b"<p>html</p>"),
                    ("plain", None, b"inner text"),
                ],
                "pieces of {size}"
            );
            assert_eq!(headers.len(), 6, "pieces of {size}");
            assert!(headers[1].starts_with(b"Content-Type: application/zip; name=r.zip"));
            assert_eq!(headers[5], b"Subject: inner\r\n\r\n");
        }
    }

    #[test]
    fn a_single_part_message_is_one_text_leaf() {
        let (leaves, headers) = text_parts(b"Subject: s\r\n\r\nline one\r\nline two\r\n", 3);
        assert_eq!(leaves.len(), 1);
        assert_eq!(leaves[0].1, b"line one\r\nline two\r\n");
        assert_eq!(headers, [b"Subject: s\r\n\r\n".to_vec()]);
    }

    fn part() -> impl Strategy<Value = (String, Vec<u8>)> {
        let cte = prop_oneof![
            Just(String::new()),
            Just("Content-Transfer-Encoding: binary\r\n".to_string()),
            Just("Content-Transfer-Encoding: 8bit\r\n".to_string()),
        ];
        // Bodies of any bytes, with CRs, LFs, dashes and boundary-like text.
        let byte = prop_oneof![any::<u8>(), Just(0u8), Just(b'\r'), Just(b'\n'), Just(b'-'),];
        (cte, proptest::collection::vec(byte, 0..300))
    }

    proptest! {
        /// Whatever the parts hold and however the message is cut, the
        /// output has no NUL, is the same for any cut, and decodes to the
        /// bytes that were sent.
        #[test]
        fn parts_decode_to_what_was_sent(
            parts in proptest::collection::vec(part(), 1..5),
            piece in 1usize..64,
        ) {
            let mut message = b"Content-Type: multipart/mixed; boundary=\"=_sep\"\r\n\r\n".to_vec();
            for (cte, body) in &parts {
                // A body never holds its delimiter: that is the sender's
                // promise (RFC 2046 5.1.1); keep it.
                let body: Vec<u8> = body.iter().map(|&b| if b == b'=' { b'+' } else { b }).collect();
                message.extend_from_slice(b"--=_sep\r\nContent-Type: application/octet-stream\r\n");
                message.extend_from_slice(cte.as_bytes());
                message.extend_from_slice(b"\r\n");
                message.extend_from_slice(&body);
                message.extend_from_slice(b"\r\n");
            }
            message.extend_from_slice(b"--=_sep--\r\n");
            let whole = encode_binary_parts(&message);
            prop_assert!(!whole.contains(&0));
            prop_assert_eq!(&in_pieces(&message, piece), &whole);
            let decoded = contents(&whole);
            prop_assert_eq!(decoded.len(), parts.len());
            for ((_, body), got) in parts.iter().zip(&decoded) {
                let body: Vec<u8> = body.iter().map(|&b| if b == b'=' { b'+' } else { b }).collect();
                prop_assert_eq!(got, &body);
            }
        }

        /// Leaving the non-text parts out changes no text a parser finds,
        /// however the message is cut.
        #[test]
        fn text_only_keeps_every_text(
            parts in proptest::collection::vec((any::<bool>(), part()), 1..5),
            piece in 1usize..64,
        ) {
            let mut message = b"Subject: s\r\nContent-Type: multipart/mixed; boundary=\"=_sep\"\r\n\r\n".to_vec();
            for (is_text, (cte, body)) in &parts {
                let body: Vec<u8> = body.iter().map(|&b| if b == b'=' { b'+' } else { b }).collect();
                message.extend_from_slice(if *is_text {
                    b"--=_sep\r\nContent-Type: text/plain; charset=utf-8\r\n".as_slice()
                } else {
                    b"--=_sep\r\nContent-Type: image/png\r\n".as_slice()
                });
                message.extend_from_slice(cte.as_bytes());
                message.extend_from_slice(b"\r\n");
                message.extend_from_slice(&body);
                message.extend_from_slice(b"\r\n");
            }
            message.extend_from_slice(b"--=_sep--\r\n");
            let out = text_only(&message, piece);
            prop_assert_eq!(&out, &text_only(&message, message.len()));
            prop_assert_eq!(texts(&out), texts(&message));
            // Decoded, the text leaves hold what a parser finds in them.
            let (leaves, _) = text_parts(&message, piece);
            let decoded: Vec<String> = leaves
                .iter()
                .map(|(_, c)| String::from_utf8_lossy(c).into_owned())
                .collect();
            let parsed = MessageParser::default().parse(&message).expect("parses");
            let want: Vec<String> = parsed
                .parts
                .iter()
                .filter_map(|p| match &p.body {
                    PartType::Text(t) => Some(t.to_string()),
                    _ => None,
                })
                .collect();
            prop_assert_eq!(decoded, want);
        }
    }
}
