//! Push-based streaming MIME parser (RFC 5322, RFC 2045-2049).
//!
//! The parser is fed a message in chunks of any size, down to one byte at a time, and
//! reports what it finds to a [`MimeSink`]: header fields, the start of each part (with
//! its content type, transfer encoding and file name), the part's decoded body, and the
//! end of each part. Feeding the same message in any chunking gives the same events
//! (body bytes may arrive split differently; concatenated they are equal).
//!
//! Memory is bounded whatever the input: a line buffer of [`MAX_LINE`] bytes (longer
//! lines are passed on in pieces), at most [`MimeLimits::max_header_bytes`] of header
//! text kept per part, and at most [`MimeLimits::max_depth`] nested entities.
//! Malformed mail is parsed the way a tolerant client would show it: a missing closing
//! boundary ends at the end of input, an outer boundary closes every part inside it,
//! broken encodings decode as far as they go.

use mime_tree::{uu_begin, uudecode_line, Base64Decoder, QpDecoder};

/// Longest line handled as a unit. Longer lines reach the body decoder in pieces of
/// this size; they cannot be boundary lines (RFC 2046 §5.1.1 caps a boundary at 70
/// characters) and their header text counts against the header budget.
pub const MAX_LINE: usize = 2048;

/// Decoded body bytes gathered before they are handed to the sink.
const OUT_FLUSH: usize = 16 * 1024;

/// Bounds that keep the parser's memory independent of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MimeLimits {
    /// Header bytes kept per part; the rest of that part's header is dropped (counted in
    /// [`MimeParser::dropped_header_bytes`]).
    pub max_header_bytes: usize,
    /// Deepest nesting of multiparts and message/rfc822 parts; a deeper container is
    /// parsed as an opaque leaf and [`MimeParser::depth_capped`] is set.
    pub max_depth: usize,
}

impl Default for MimeLimits {
    fn default() -> Self {
        Self {
            max_header_bytes: 64 * 1024,
            max_depth: 32,
        }
    }
}

/// Content-Transfer-Encoding of a part (RFC 2045 §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// 7bit, 8bit, binary, absent or unknown: the body is passed on as it is.
    Identity,
    /// base64 (RFC 2045 §6.8).
    Base64,
    /// quoted-printable (RFC 2045 §6.7).
    QuotedPrintable,
    /// uuencode: `Content-Transfer-Encoding: x-uuencode`, or a `begin`/`end` block
    /// found inside a text part.
    Uuencode,
}

impl Encoding {
    fn from_header(value: &[u8]) -> Self {
        let v = value.trim_ascii().to_ascii_lowercase();
        match v.as_slice() {
            b"base64" => Encoding::Base64,
            b"quoted-printable" => Encoding::QuotedPrintable,
            b"x-uuencode" | b"uuencode" | b"x-uue" => Encoding::Uuencode,
            _ => Encoding::Identity,
        }
    }
}

/// What kind of entity a part is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartKind {
    /// A part with a body of its own (body events follow).
    Leaf,
    /// A multipart/* container: its children follow as nested parts.
    Multipart,
    /// A message/rfc822 part: one nested message follows.
    Message,
    /// A uuencoded file found inside a text part (body events carry the decoded file).
    Uuencoded,
}

/// Description of a part, given when the part starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartInfo {
    /// Nesting depth: 0 for the message itself.
    pub depth: usize,
    /// What the part is.
    pub kind: PartKind,
    /// `type/subtype`, lower-cased (`text/plain` when absent).
    pub content_type: String,
    /// Transfer encoding, already undone in the body events.
    pub encoding: Encoding,
    /// File name from Content-Disposition `filename` or Content-Type `name`.
    pub filename: Option<String>,
}

/// Receiver of parser events. Every method has an empty default.
pub trait MimeSink {
    /// A header field of the part about to start (name and unfolded value).
    fn header(&mut self, _name: &[u8], _value: &[u8]) {}
    /// A part starts; its header fields were reported just before.
    fn part_start(&mut self, _part: &PartInfo) {}
    /// Decoded body bytes of the innermost open leaf part.
    fn body(&mut self, _data: &[u8]) {}
    /// The innermost open part ends.
    fn part_end(&mut self) {}
}

/// One parser event, owned (see [`EventCollector`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MimeEvent {
    /// A header field.
    Header {
        /// Field name as written.
        name: Vec<u8>,
        /// Unfolded, trimmed value.
        value: Vec<u8>,
    },
    /// A part starts.
    PartStart(PartInfo),
    /// Decoded body bytes (adjacent body events are merged).
    Body(Vec<u8>),
    /// A part ends.
    PartEnd,
}

/// A sink that records events, merging adjacent body chunks: for tests, fuzzing and
/// tools that want the whole structure.
#[derive(Debug, Default, Clone)]
pub struct EventCollector {
    /// The events so far.
    pub events: Vec<MimeEvent>,
}

impl MimeSink for EventCollector {
    fn header(&mut self, name: &[u8], value: &[u8]) {
        self.events.push(MimeEvent::Header {
            name: name.to_vec(),
            value: value.to_vec(),
        });
    }
    fn part_start(&mut self, part: &PartInfo) {
        self.events.push(MimeEvent::PartStart(part.clone()));
    }
    fn body(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if let Some(MimeEvent::Body(b)) = self.events.last_mut() {
            b.extend_from_slice(data);
        } else {
            self.events.push(MimeEvent::Body(data.to_vec()));
        }
    }
    fn part_end(&mut self) {
        self.events.push(MimeEvent::PartEnd);
    }
}

#[derive(Debug)]
enum Decoder {
    Identity,
    Base64(Base64Decoder),
    Qp(QpDecoder),
    /// Whole-part uuencode: `begin` seen yet, `end` seen yet.
    Uu {
        begun: bool,
        ended: bool,
    },
}

#[derive(Debug)]
struct Leaf {
    decoder: Decoder,
    /// A uuencoded block found in the text is open (a pseudo part was started).
    uu_open: bool,
}

#[derive(Debug)]
enum Entity {
    Leaf(Leaf),
    Multipart {
        boundary: Vec<u8>,
        closed: bool,
        digest: bool,
    },
    Message,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Headers,
    Body,
}

/// Header fields of the part being read, kept within the header budget.
#[derive(Debug, Default)]
struct HeaderAcc {
    field: Vec<u8>,
    kept: usize,
    content_type: Option<Vec<u8>>,
    encoding: Option<Vec<u8>>,
    disposition: Option<Vec<u8>>,
    /// The parent is multipart/digest: the default type is message/rfc822 (RFC 2046 §5.1.5).
    digest_child: bool,
    /// No line of this header has been seen yet.
    first_line: bool,
}

/// The streaming MIME parser. See the module documentation.
#[derive(Debug)]
pub struct MimeParser {
    limits: MimeLimits,
    stack: Vec<Entity>,
    phase: Phase,
    line: Vec<u8>,
    /// The current line already had a piece processed (it was longer than MAX_LINE).
    mid_line: bool,
    hdr: HeaderAcc,
    pending_eol: &'static [u8],
    out: Vec<u8>,
    depth_capped: bool,
    dropped_header_bytes: u64,
    finished: bool,
}

impl MimeParser {
    /// A parser at the start of a message.
    pub fn new(limits: MimeLimits) -> Self {
        Self {
            limits,
            stack: Vec::new(),
            phase: Phase::Headers,
            line: Vec::with_capacity(256),
            mid_line: false,
            hdr: HeaderAcc {
                first_line: true,
                ..HeaderAcc::default()
            },
            pending_eol: b"",
            out: Vec::new(),
            depth_capped: false,
            dropped_header_bytes: 0,
            finished: false,
        }
    }

    /// True when some container was nested deeper than [`MimeLimits::max_depth`].
    pub fn depth_capped(&self) -> bool {
        self.depth_capped
    }

    /// Header bytes dropped because a part's header exceeded its budget.
    pub fn dropped_header_bytes(&self) -> u64 {
        self.dropped_header_bytes
    }

    /// Feeds the next chunk of the message.
    pub fn feed<S: MimeSink + ?Sized>(&mut self, mut data: &[u8], sink: &mut S) {
        if self.finished {
            return;
        }
        while !data.is_empty() {
            if self.line.is_empty() {
                // Fast path: a whole short line straight from the input, no copy.
                if let Some(i) = memchr::memchr(b'\n', data) {
                    if i < MAX_LINE {
                        let (piece, rest) = data.split_at(i + 1);
                        self.piece(piece, true, sink);
                        data = rest;
                        continue;
                    }
                }
            }
            let room = MAX_LINE - self.line.len();
            let window = &data[..data.len().min(room)];
            match memchr::memchr(b'\n', window) {
                Some(i) => {
                    self.line.extend_from_slice(&window[..=i]);
                    data = &data[i + 1..];
                    let line = std::mem::take(&mut self.line);
                    self.piece(&line, true, sink);
                    self.line = line;
                    self.line.clear();
                }
                None => {
                    self.line.extend_from_slice(window);
                    data = &data[window.len()..];
                    if self.line.len() == MAX_LINE {
                        let line = std::mem::take(&mut self.line);
                        self.piece(&line, false, sink);
                        self.line = line;
                        self.line.clear();
                    }
                }
            }
        }
        self.flush(sink);
    }

    /// Ends the message: closes every open part.
    pub fn finish<S: MimeSink + ?Sized>(&mut self, sink: &mut S) {
        if self.finished {
            return;
        }
        if !self.line.is_empty() || self.mid_line {
            let line = std::mem::take(&mut self.line);
            self.piece(&line, true, sink);
        }
        if self.phase == Phase::Headers {
            self.end_headers(sink);
        }
        // The last line end of the outermost body belongs to it (there is no delimiter).
        let eol = std::mem::take(&mut self.pending_eol);
        if let Some(Entity::Leaf(leaf)) = self.stack.last_mut() {
            if !leaf.uu_open {
                decode_into(&mut leaf.decoder, eol, &mut self.out);
            }
        }
        while !self.stack.is_empty() {
            self.pop(sink);
        }
        self.finished = true;
    }

    fn flush<S: MimeSink + ?Sized>(&mut self, sink: &mut S) {
        if !self.out.is_empty() {
            sink.body(&self.out);
            self.out.clear();
        }
    }

    /// Handles one piece of a line: a whole line (`complete`, with its line end if it
    /// had one) or a MAX_LINE-sized piece of a longer line.
    fn piece<S: MimeSink + ?Sized>(&mut self, raw: &[u8], complete: bool, sink: &mut S) {
        let line_start = !self.mid_line;
        self.mid_line = !complete;
        let (content, eol): (&[u8], &'static [u8]) = if !complete {
            (raw, b"")
        } else if let Some(c) = raw.strip_suffix(b"\r\n") {
            (c, b"\r\n")
        } else if let Some(c) = raw.strip_suffix(b"\n") {
            (c, b"\n")
        } else {
            (raw, b"")
        };
        let whole = line_start && complete;

        if whole && content.starts_with(b"--") {
            if let Some((idx, close)) = self.match_boundary(content) {
                if self.phase == Phase::Headers {
                    self.end_headers(sink);
                }
                self.boundary(idx, close, sink);
                return;
            }
        }
        match self.phase {
            Phase::Headers => self.header_piece(content, line_start, whole, eol, sink),
            Phase::Body => self.body_piece(content, eol, whole, sink),
        }
    }

    fn header_piece<S: MimeSink + ?Sized>(
        &mut self,
        content: &[u8],
        line_start: bool,
        whole: bool,
        eol: &'static [u8],
        sink: &mut S,
    ) {
        if !line_start {
            // The rest of an over-long header line.
            self.keep_header(content);
            return;
        }
        let first = std::mem::replace(&mut self.hdr.first_line, false);
        if content.is_empty() && whole {
            self.end_headers(sink);
            return;
        }
        if matches!(content.first(), Some(b' ' | b'\t')) && !self.hdr.field.is_empty() {
            // RFC 5322 §2.2.3: unfolding removes the CRLF, keeps the blank.
            self.keep_header(content);
            return;
        }
        let colon = content.iter().position(|&b| b == b':');
        let is_field = matches!(colon, Some(c) if c > 0
            && content[..c].iter().all(|&b| b.is_ascii_graphic() || b == b' ' || b == b'\t'));
        if is_field {
            self.end_field(sink);
            self.keep_header(content);
        } else if first && self.stack.is_empty() && content.starts_with(b"From ") {
            // An mbox separator line before the header: not part of the message.
        } else {
            // Not a header line: the header ended without its blank line.
            self.end_headers(sink);
            self.body_piece(content, eol, whole, sink);
        }
    }

    fn keep_header(&mut self, content: &[u8]) {
        let room = self.limits.max_header_bytes.saturating_sub(self.hdr.kept);
        let take = content.len().min(room);
        self.hdr.field.extend_from_slice(&content[..take]);
        self.hdr.kept += take;
        self.dropped_header_bytes += (content.len() - take) as u64;
    }

    fn end_field<S: MimeSink + ?Sized>(&mut self, sink: &mut S) {
        if self.hdr.field.is_empty() {
            return;
        }
        let field = std::mem::take(&mut self.hdr.field);
        if let Some(c) = field.iter().position(|&b| b == b':') {
            let name = field[..c].trim_ascii();
            let value = field[c + 1..].trim_ascii();
            sink.header(name, value);
            if name.eq_ignore_ascii_case(b"content-type") {
                self.hdr.content_type = Some(value.to_vec());
            } else if name.eq_ignore_ascii_case(b"content-transfer-encoding") {
                self.hdr.encoding = Some(value.to_vec());
            } else if name.eq_ignore_ascii_case(b"content-disposition") {
                self.hdr.disposition = Some(value.to_vec());
            }
        }
        self.hdr.field = field;
        self.hdr.field.clear();
    }

    fn end_headers<S: MimeSink + ?Sized>(&mut self, sink: &mut S) {
        self.end_field(sink);
        let hdr = std::mem::replace(
            &mut self.hdr,
            HeaderAcc {
                first_line: true,
                ..HeaderAcc::default()
            },
        );
        let (mut content_type, params) = match &hdr.content_type {
            Some(v) => parse_content_type(v),
            None => (String::new(), Vec::new()),
        };
        if !content_type.contains('/') {
            content_type = if hdr.digest_child {
                "message/rfc822".into()
            } else {
                "text/plain".into()
            };
        }
        let mut encoding = hdr
            .encoding
            .as_deref()
            .map_or(Encoding::Identity, Encoding::from_header);
        let disp_params = hdr
            .disposition
            .as_deref()
            .map(|d| parse_content_type(d).1)
            .unwrap_or_default();
        let filename = param(&disp_params, "filename").or_else(|| param(&params, "name"));
        let depth = self.stack.len();
        let room = depth < self.limits.max_depth;
        let boundary = param(&params, "boundary").filter(|b| !b.is_empty());
        let (kind, entity) = if content_type.starts_with("multipart/") && boundary.is_some() {
            if room {
                let entity = Entity::Multipart {
                    boundary: boundary.unwrap_or_default().into_bytes(),
                    closed: false,
                    digest: content_type == "multipart/digest",
                };
                (PartKind::Multipart, entity)
            } else {
                self.depth_capped = true;
                (PartKind::Leaf, leaf_entity(encoding))
            }
        } else if (content_type == "message/rfc822" || content_type == "message/global")
            && encoding == Encoding::Identity
        {
            if room {
                (PartKind::Message, Entity::Message)
            } else {
                self.depth_capped = true;
                (PartKind::Leaf, leaf_entity(encoding))
            }
        } else {
            (PartKind::Leaf, leaf_entity(encoding))
        };
        if kind != PartKind::Leaf {
            encoding = Encoding::Identity;
        }
        self.flush(sink);
        sink.part_start(&PartInfo {
            depth,
            kind,
            content_type,
            encoding,
            filename,
        });
        self.stack.push(entity);
        self.pending_eol = b"";
        if kind == PartKind::Message {
            self.phase = Phase::Headers;
        } else {
            self.phase = Phase::Body;
        }
    }

    fn body_piece<S: MimeSink + ?Sized>(
        &mut self,
        content: &[u8],
        eol: &'static [u8],
        whole: bool,
        sink: &mut S,
    ) {
        let depth = self.stack.len();
        let Some(Entity::Leaf(leaf)) = self.stack.last_mut() else {
            return; // preamble or epilogue of a multipart
        };
        match &mut leaf.decoder {
            Decoder::Uu { begun, ended } => {
                if !whole || *ended {
                    return;
                }
                if !*begun {
                    *begun = uu_begin(content).is_some();
                } else if content.trim_ascii() == b"end" {
                    *ended = true;
                } else {
                    uudecode_line(content, &mut self.out);
                }
                return;
            }
            Decoder::Identity if leaf.uu_open => {
                if whole {
                    if content.trim_ascii() == b"end" {
                        leaf.uu_open = false;
                        self.flush(sink);
                        sink.part_end();
                    } else {
                        uudecode_line(content, &mut self.out);
                    }
                }
                self.pending_eol = b"";
                return;
            }
            Decoder::Identity if whole => {
                if let Some(name) = uu_begin(content) {
                    let filename = Some(String::from_utf8_lossy(name).into_owned());
                    let eol = std::mem::take(&mut self.pending_eol);
                    self.out.extend_from_slice(eol);
                    leaf.uu_open = true;
                    self.flush(sink);
                    sink.part_start(&PartInfo {
                        depth,
                        kind: PartKind::Uuencoded,
                        content_type: "application/octet-stream".into(),
                        encoding: Encoding::Uuencode,
                        filename,
                    });
                    return;
                }
            }
            _ => {}
        }
        let prev = std::mem::replace(&mut self.pending_eol, eol);
        decode_into(&mut leaf.decoder, prev, &mut self.out);
        decode_into(&mut leaf.decoder, content, &mut self.out);
        if self.out.len() >= OUT_FLUSH {
            self.flush(sink);
        }
    }

    /// Finds the open multipart whose boundary `line` is, innermost first.
    fn match_boundary(&self, line: &[u8]) -> Option<(usize, bool)> {
        let rest = &line[2..];
        for (i, e) in self.stack.iter().enumerate().rev() {
            if let Entity::Multipart {
                boundary,
                closed: false,
                ..
            } = e
            {
                if let Some(after) = rest.strip_prefix(boundary.as_slice()) {
                    if let Some(tail) = after.strip_prefix(b"--") {
                        let _ = tail; // RFC 2046 §5.1.1: anything after the close delimiter is epilogue.
                        return Some((i, true));
                    }
                    if after.iter().all(|&b| b == b' ' || b == b'\t') {
                        return Some((i, false));
                    }
                }
            }
        }
        None
    }

    /// A delimiter line of the multipart at stack index `idx`.
    fn boundary<S: MimeSink + ?Sized>(&mut self, idx: usize, close: bool, sink: &mut S) {
        // RFC 2046 §5.1.1: the line end before a delimiter belongs to the delimiter.
        self.pending_eol = b"";
        while self.stack.len() > idx + 1 {
            self.pop(sink);
        }
        if let Some(Entity::Multipart { closed, digest, .. }) = self.stack.last_mut() {
            if close {
                *closed = true;
                self.phase = Phase::Body;
            } else {
                self.hdr.digest_child = *digest;
                self.hdr.first_line = false;
                self.phase = Phase::Headers;
            }
        }
    }

    fn pop<S: MimeSink + ?Sized>(&mut self, sink: &mut S) {
        if let Some(Entity::Leaf(mut leaf)) = self.stack.pop() {
            match &mut leaf.decoder {
                Decoder::Base64(d) => d.finish(&mut self.out),
                Decoder::Qp(d) => d.finish(&mut self.out),
                _ => {}
            }
            if leaf.uu_open {
                self.flush(sink);
                sink.part_end();
            }
        }
        self.flush(sink);
        sink.part_end();
    }
}

fn leaf_entity(encoding: Encoding) -> Entity {
    let decoder = match encoding {
        Encoding::Identity => Decoder::Identity,
        Encoding::Base64 => Decoder::Base64(Base64Decoder::new()),
        Encoding::QuotedPrintable => Decoder::Qp(QpDecoder::new()),
        Encoding::Uuencode => Decoder::Uu {
            begun: false,
            ended: false,
        },
    };
    Entity::Leaf(Leaf {
        decoder,
        uu_open: false,
    })
}

fn decode_into(decoder: &mut Decoder, data: &[u8], out: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    match decoder {
        Decoder::Identity => out.extend_from_slice(data),
        Decoder::Base64(d) => d.decode(data, out),
        Decoder::Qp(d) => d.decode(data, out),
        Decoder::Uu { .. } => {}
    }
}

/// Splits a Content-Type (or Content-Disposition) value into its lower-cased value
/// and its parameters (RFC 2045 §5.1), with RFC 2231 `name*=charset''value` decoded.
fn parse_content_type(value: &[u8]) -> (String, Vec<(String, String)>) {
    let text = String::from_utf8_lossy(value);
    let mut parts = split_params(&text).into_iter();
    let head = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let mut params = Vec::new();
    for p in parts {
        let Some((k, v)) = p.split_once('=') else {
            continue;
        };
        let mut key = k.trim().to_ascii_lowercase();
        let mut val = v.trim().to_string();
        if val.len() >= 2 && val.starts_with('"') && val.ends_with('"') {
            val = unquote(&val[1..val.len() - 1]);
        }
        if let Some(base) = key.strip_suffix("*0*").or_else(|| key.strip_suffix('*')) {
            // RFC 2231 §4: charset'language'percent-encoded
            let base = base.to_string();
            if let Some(enc) = val.splitn(3, '\'').nth(2) {
                val = percent_decode(enc);
            }
            key = base;
        } else if let Some(base) = key.strip_suffix("*0") {
            key = base.to_string();
        }
        params.push((key, val));
    }
    (head, params)
}

fn split_params(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            cur.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' if quoted => {
                cur.push(c);
                escaped = true;
            }
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            ';' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn unquote(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut esc = false;
    for c in s.chars() {
        if esc || c != '\\' {
            out.push(c);
            esc = false;
        } else {
            esc = true;
        }
    }
    out
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn param(params: &[(String, String)], key: &str) -> Option<String> {
    params
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
}

#[cfg(test)]
mod tests;
