//! The streaming state machine: bytes in, [`MessageStructure`] out.
//!
//! The builder keeps a stack of open entities ("frames"): the message, and
//! for each open multipart its current child, for each message/rfc822 part
//! the enclosed message, and so on. Only the top frame can still be reading
//! its header. Bodies are never stored: a body's length comes from offsets
//! and its line count from a running count of LFs, so what is kept is the
//! header block being read (capped), the boundary stack, the first bytes of
//! the current line when it could be a boundary line, and the parsed parts.
//!
//! Everything is decided at line ends (LF), from the line's first bytes and
//! its length, so how the input is cut into pieces cannot change the result.

use crate::envelope::envelope;
use crate::header::apply_mime_fields;
use crate::{Envelope, MessageStructure, Part, PartKind};

/// Header bytes kept and parsed per entity. Longer header blocks still
/// count in full in `header_len`; the fields past the cap are ignored.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Header bytes parsed over the whole message. Entities whose header
/// starts after the budget is spent get the default fields. This bounds the
/// parsed structure's size, not just the working memory.
pub const MAX_TOTAL_HEADER_BYTES: usize = 4 * 1024 * 1024;

/// Containers (multipart or message) nested deeper than this are not
/// opened: their body is counted as one leaf.
pub const MAX_DEPTH: usize = 64;

/// Entities recorded per message. Past it no new container is opened and
/// a multipart's further boundary lines are ignored (the rest of its body
/// counts as epilogue).
pub const MAX_PARTS: usize = 10_000;

/// Longest boundary recognised. RFC 2046 §5.1.1 allows 70 characters; some
/// software writes more. A multipart whose boundary is longer (or empty) is
/// read as having no children.
pub const MAX_BOUNDARY_LEN: usize = 200;

/// Bytes of a line kept to recognise a boundary line: `--`, the boundary,
/// `--`. The rest of the line does not matter.
const WINDOW: usize = 2 + MAX_BOUNDARY_LEN + 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Header,
    Body,
}

#[derive(Debug)]
enum Content {
    Leaf,
    /// multipart/*: children closed so far; `digest` makes message/rfc822
    /// their default type.
    Multipart {
        children: Vec<Part>,
        digest: bool,
    },
    /// message/rfc822 or message/global: the enclosed message, once its
    /// frame (the next one up) has closed.
    Message(Option<Box<MessageStructure>>),
}

#[derive(Debug)]
struct Frame {
    part: Part,
    stage: Stage,
    content: Content,
    /// The entity is a message (top level or enclosed): its header also
    /// gives an envelope.
    is_message: bool,
    envelope: Envelope,
    /// Children default to message/rfc822 (the parent is multipart/digest).
    digest_child: bool,
    /// Containers above this entity.
    depth: usize,
    /// LFs before `part.body_offset`.
    lfs_before_body: u64,
}

impl Frame {
    fn new(offset: u64, is_message: bool, digest_child: bool, depth: usize) -> Frame {
        Frame {
            part: Part {
                header_offset: offset,
                ..Part::default()
            },
            stage: Stage::Header,
            content: Content::Leaf,
            is_message,
            envelope: Envelope::default(),
            digest_child,
            depth,
            lfs_before_body: 0,
        }
    }
}

/// An open multipart's boundary, innermost last.
#[derive(Debug)]
struct Boundary {
    /// Index of the multipart's frame.
    frame: usize,
    /// The boundary, without `--` and without trailing whitespace.
    text: Vec<u8>,
}

/// What the previous line was, which decides whose its line end is when a
/// boundary line follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PrevLine {
    /// A boundary line: its line end is its own.
    Boundary,
    /// The empty line that ended the header of the frame at this index.
    HeaderEnd(usize),
    /// Anything else (or none).
    Other,
}

/// Where an entity ends, and the LFs before that.
#[derive(Debug, Clone, Copy)]
struct End {
    pos: u64,
    lfs: u64,
}

/// Computes a [`MessageStructure`] from a message streamed in pieces.
///
/// Feed every byte of the raw message, in pieces of any size, then call
/// [`StructureBuilder::finish`]. The result does not depend on how the
/// message was cut. Memory stays bounded whatever the input: see
/// [`MAX_HEADER_BYTES`], [`MAX_TOTAL_HEADER_BYTES`], [`MAX_DEPTH`],
/// [`MAX_PARTS`] and [`MAX_BOUNDARY_LEN`].
#[derive(Debug)]
pub struct StructureBuilder {
    frames: Vec<Frame>,
    boundaries: Vec<Boundary>,
    /// The top frame's header bytes so far (up to `header_cap`).
    header: Vec<u8>,
    header_cap: usize,
    /// Header bytes still to be parsed over the message.
    header_budget: usize,
    parts: usize,
    result: Option<MessageStructure>,

    /// Bytes fed so far.
    pos: u64,
    /// LFs fed so far.
    lfs: u64,
    /// Position of the last LF.
    last_lf: Option<u64>,
    /// What the line that ended at `last_lf` was.
    prev_line: PrevLine,
    /// The last LF had a CR just before it.
    last_lf_after_cr: bool,
    /// The last byte fed.
    last_byte: u8,

    /// Where the current line starts and how long it is so far (LF not
    /// counted).
    line_start: u64,
    line_len: u64,
    /// The line's first byte, for spotting the empty line after a header.
    line_first: u8,
    /// The current line may still be a boundary line; its first bytes.
    candidate: bool,
    line: Vec<u8>,
}

impl Default for StructureBuilder {
    fn default() -> Self {
        StructureBuilder::new()
    }
}

impl StructureBuilder {
    /// A builder for a new message.
    pub fn new() -> Self {
        StructureBuilder {
            frames: vec![Frame::new(0, true, false, 0)],
            boundaries: Vec::new(),
            header: Vec::new(),
            header_cap: MAX_HEADER_BYTES,
            header_budget: MAX_TOTAL_HEADER_BYTES - MAX_HEADER_BYTES,
            parts: 1,
            result: None,
            pos: 0,
            lfs: 0,
            last_lf: None,
            prev_line: PrevLine::Other,
            last_lf_after_cr: false,
            last_byte: 0,
            line_start: 0,
            line_len: 0,
            line_first: 0,
            candidate: false,
            line: Vec::new(),
        }
    }

    /// Feeds the next bytes of the raw message.
    pub fn feed(&mut self, data: &[u8]) {
        let mut rest = data;
        while !rest.is_empty() {
            if self.boundaries.is_empty() && self.top_stage() == Some(Stage::Body) {
                // Nothing can change any more but the counts: a body with
                // no boundary to look for, to the end of the message.
                self.count_only(rest);
                return;
            }
            match memchr::memchr(b'\n', rest) {
                Some(i) => {
                    self.take(&rest[..=i], true);
                    rest = &rest[i + 1..];
                }
                None => {
                    self.take(rest, false);
                    return;
                }
            }
        }
    }

    /// The structure of everything fed so far.
    pub fn finish(mut self) -> MessageStructure {
        // A last line without an LF can still be a boundary line. It ends
        // what is inside its multipart but, having no line end, starts no
        // new child (as in Dovecot).
        if self.line_len > 0 {
            if let Some((k, _)) = self.boundary_line() {
                self.on_boundary(k, true, self.pos);
            }
        }
        let end = End {
            pos: self.pos,
            lfs: self.lfs,
        };
        while let Some(top) = self.frames.last() {
            if top.stage == Stage::Header {
                self.end_header(end.pos, end.lfs);
            } else {
                self.close_top(end);
            }
        }
        self.result.take().unwrap_or_default()
    }

    fn top_stage(&self) -> Option<Stage> {
        self.frames.last().map(|f| f.stage)
    }

    fn count_only(&mut self, data: &[u8]) {
        let n = data.iter().filter(|&&b| b == b'\n').count() as u64;
        if n > 0 {
            let last = memchr::memrchr(b'\n', data).unwrap_or(0);
            self.last_lf_after_cr = if last > 0 {
                data[last - 1] == b'\r'
            } else {
                self.last_byte == b'\r'
            };
            self.last_lf = Some(self.pos + last as u64);
            self.lfs += n;
            self.prev_line = PrevLine::Other;
        }
        self.pos += data.len() as u64;
        self.last_byte = data[data.len() - 1];
    }

    /// Takes a piece of one line: the line's end (with its LF) if `ends_line`.
    fn take(&mut self, seg: &[u8], ends_line: bool) {
        let content = if ends_line {
            &seg[..seg.len() - 1]
        } else {
            seg
        };
        if self.line_len == 0 {
            if let Some(&b) = content.first() {
                self.line_first = b;
            }
        }
        if self.candidate && !content.is_empty() {
            let room = WINDOW - self.line.len();
            let kept = room.min(content.len());
            self.line.extend_from_slice(&content[..kept]);
            let l = &self.line;
            if l[0] != b'-' || (l.len() > 1 && l[1] != b'-') {
                self.candidate = false;
            }
        }
        self.line_len += content.len() as u64;
        if self.top_stage() == Some(Stage::Header) {
            let room = self.header_cap.saturating_sub(self.header.len());
            self.header.extend_from_slice(&seg[..room.min(seg.len())]);
        }
        let cr_before_lf = match content.last() {
            Some(&b) => b == b'\r',
            None => self.last_byte == b'\r',
        };
        self.pos += seg.len() as u64;
        if let Some(&b) = seg.last() {
            self.last_byte = b;
        }
        if !ends_line {
            return;
        }
        // The line is complete. A boundary line is decided with the state
        // before its LF, as it gives back the line end before it.
        let blank = self.line_len == 0 || (self.line_len == 1 && self.line_first == b'\r');
        if let Some((k, close)) = self.boundary_line() {
            self.on_boundary(k, close, self.pos);
            self.count_lf(cr_before_lf);
            self.prev_line = PrevLine::Boundary;
        } else {
            self.count_lf(cr_before_lf);
            self.prev_line = PrevLine::Other;
            if blank && self.top_stage() == Some(Stage::Header) {
                self.prev_line = PrevLine::HeaderEnd(self.frames.len() - 1);
                self.end_header(self.pos, self.lfs);
            }
        }
        self.line_start = self.pos;
        self.line_len = 0;
        self.line.clear();
        self.candidate = !self.boundaries.is_empty();
    }

    fn count_lf(&mut self, cr_before: bool) {
        self.last_lf = Some(self.pos - 1);
        self.last_lf_after_cr = cr_before;
        self.lfs += 1;
    }

    /// Whether the current line is a boundary line, and of which boundary
    /// on the stack. RFC 2046 §5.1.1: the line must start with `--` and the
    /// boundary; what follows does not matter ("an exact match of the entire
    /// candidate line is not required"), except that `--` right after the
    /// boundary makes it the close delimiter. When several boundaries on the
    /// stack match, the longest wins, so an outer boundary line is not taken
    /// for an inner boundary that is a prefix of it; among equal ones the
    /// innermost wins (a nested multipart may reuse its parent's boundary).
    /// Dovecot chooses the same way.
    fn boundary_line(&self) -> Option<(usize, bool)> {
        if !self.candidate {
            return None;
        }
        let l = self.line.strip_prefix(b"--")?;
        let mut best: Option<(usize, &[u8])> = None;
        for (k, bd) in self.boundaries.iter().enumerate().rev() {
            if l.starts_with(&bd.text) && best.is_none_or(|(_, t)| t.len() < bd.text.len()) {
                best = Some((k, &bd.text));
            }
        }
        best.map(|(k, t)| (k, l[t.len()..].starts_with(b"--")))
    }

    /// The current line is a boundary line of boundary `k` (and its LF, if
    /// any, not counted yet): everything inside the boundary's multipart
    /// ends, and the next child, if any, starts at `next`.
    ///
    /// RFC 2046 §5.1.1: the line end before a boundary line belongs to the
    /// boundary, so what ends, ends before it. Where that line end sits
    /// decides the details, which follow Dovecot:
    /// - after another boundary line, whose line end is its own, nothing is
    ///   taken back, so `--x--` CRLF `--y` leaves the CRLF to `x`;
    /// - in a body, every entity inside the multipart ends before it;
    /// - in a header (one cut short by the boundary line, or the empty line
    ///   of a header followed at once by the boundary line), the entity of
    ///   that header ends before it, without the line end (and without an
    ///   empty line: its body is empty), while the entities around it keep
    ///   the line end and end at the boundary line. So a message/rfc822 part
    ///   whose message is `Subject: s` CRLF CRLF then the boundary line keeps
    ///   both CRLFs in its body, as Dovecot returns it for `BODY[n]`.
    fn on_boundary(&mut self, k: usize, close: bool, next: u64) {
        let start = self.line_start;
        let at_line = End {
            pos: start,
            lfs: self.lfs,
        };
        let owner = self.boundaries[k].frame;
        let Some(lf) = self
            .last_lf
            .filter(|&lf| lf + 1 == start && self.prev_line != PrevLine::Boundary)
        else {
            // After a boundary line, or on the very first line.
            self.close_inside(k, close, at_line, at_line, usize::MAX, next);
            return;
        };
        let before = End {
            pos: lf - u64::from(self.last_lf_after_cr),
            lfs: self.lfs - 1,
        };
        let top = self.frames.len() - 1;
        let header_of = match self.prev_line {
            PrevLine::HeaderEnd(f) if f > owner && f <= top => {
                // The empty line goes back from the header to the boundary;
                // the messages opened right after it start where it was.
                let frame = &mut self.frames[f];
                frame.part.header_len -= (start - before.pos).min(frame.part.header_len);
                frame.part.body_offset = before.pos;
                frame.lfs_before_body = before.lfs;
                for inner in &mut self.frames[f + 1..] {
                    inner.part.header_offset = before.pos;
                }
                f
            }
            // A header cut short by the boundary line.
            PrevLine::Other if self.frames[top].stage == Stage::Header && top > owner => top,
            // The line end is in a body (or in the owner's own header, which
            // no boundary line can cut): everything ends before it.
            _ => owner + 1,
        };
        self.close_inside(k, close, before, at_line, header_of, next);
    }

    /// Closes every frame inside the multipart that owns boundary `k`: those
    /// from index `split` up at `inner`, those below at `outer`. Then opens
    /// the multipart's next child at `next`, or, for a close delimiter,
    /// leaves it reading its epilogue.
    fn close_inside(
        &mut self,
        k: usize,
        close: bool,
        inner: End,
        outer: End,
        split: usize,
        next: u64,
    ) {
        let owner = self.boundaries[k].frame;
        while self.frames.len() > owner + 1 {
            let end = if self.frames.len() > split {
                inner
            } else {
                outer
            };
            if self.top_stage() == Some(Stage::Header) {
                let pos = end
                    .pos
                    .max(self.frames.last().map_or(0, |f| f.part.header_offset));
                self.end_header(pos, end.lfs);
            } else {
                self.close_top(end);
            }
        }
        self.boundaries.truncate(k + 1);
        if close || self.parts >= MAX_PARTS {
            // RFC 2046 §5.1.1: after the close delimiter comes the
            // epilogue, which is not a part; the boundary is done.
            self.boundaries.truncate(k);
            return;
        }
        let parent = &self.frames[owner];
        let digest = matches!(parent.content, Content::Multipart { digest: true, .. });
        let frame = Frame::new(next, false, digest, parent.depth + 1);
        self.push_frame(frame);
    }

    fn push_frame(&mut self, frame: Frame) {
        self.parts += 1;
        self.header.clear();
        self.header_cap = MAX_HEADER_BYTES.min(self.header_budget);
        self.header_budget -= self.header_cap;
        self.frames.push(frame);
    }

    /// The top frame's header ends at `pos` (`lfs` LFs before it): parse it
    /// and start its body, opening a container if it is one.
    fn end_header(&mut self, pos: u64, lfs: u64) {
        let idx = self.frames.len() - 1;
        let mut header = std::mem::take(&mut self.header);
        // Unused budget goes back.
        self.header_budget += self.header_cap - header.len().min(self.header_cap);
        let f = &mut self.frames[idx];
        f.part.header_len = pos - f.part.header_offset;
        f.part.body_offset = pos;
        f.lfs_before_body = lfs;
        f.stage = Stage::Body;
        header.truncate(usize::try_from(f.part.header_len).unwrap_or(usize::MAX));
        apply_mime_fields(&mut f.part, &header, f.digest_child);
        if f.is_message {
            f.envelope = envelope(&header);
        }
        let may_open = f.depth < MAX_DEPTH && self.parts < MAX_PARTS;
        match (f.part.media_type.as_str(), f.part.media_subtype.as_str()) {
            ("multipart", sub) => {
                let boundary = boundary(&f.part.params);
                f.content = Content::Multipart {
                    children: Vec::new(),
                    digest: sub == "digest",
                };
                if let Some(text) = boundary.filter(|_| may_open) {
                    self.boundaries.push(Boundary { frame: idx, text });
                }
            }
            ("message", "rfc822" | "global") if may_open && identity_encoding(&f.part.encoding) => {
                f.content = Content::Message(None);
                let depth = f.depth + 1;
                self.push_frame(Frame::new(pos, true, false, depth));
            }
            _ => {}
        }
        header.clear();
        self.header = header;
    }

    /// Closes the top frame (in its body) at `end` and hands its part to
    /// its parent.
    fn close_top(&mut self, end: End) {
        let Some(mut f) = self.frames.pop() else {
            return;
        };
        let idx = self.frames.len();
        if self.boundaries.last().is_some_and(|b| b.frame == idx) {
            self.boundaries.pop();
        }
        let p = &mut f.part;
        let end_pos = end.pos.max(p.body_offset);
        p.body_len = end_pos - p.body_offset;
        // Dovecot's count: the LFs in the body.
        p.body_lines = if p.body_len == 0 {
            0
        } else {
            end.lfs.saturating_sub(f.lfs_before_body)
        };
        p.kind = match f.content {
            Content::Leaf => PartKind::Leaf,
            Content::Multipart { children, .. } => PartKind::Multipart(children),
            Content::Message(inner) => PartKind::Message(inner.unwrap_or_default()),
        };
        let done = MessageStructure {
            envelope: f.envelope,
            root: f.part,
        };
        match self.frames.last_mut() {
            None => self.result = Some(done),
            Some(parent) => match &mut parent.content {
                Content::Multipart { children, .. } => children.push(done.root),
                Content::Message(inner) => *inner = Some(Box::new(done)),
                Content::Leaf => {}
            },
        }
    }
}

/// The usable `boundary` parameter: non-empty, not too long, trailing
/// whitespace dropped (RFC 2046 §5.1.1 forbids it there; boundary lines
/// often carry some, and only the boundary's start is compared).
fn boundary(params: &[(String, String)]) -> Option<Vec<u8>> {
    let (_, v) = params.iter().find(|(n, _)| n == "boundary")?;
    let v = v.trim_end_matches([' ', '\t']);
    (!v.is_empty() && v.len() <= MAX_BOUNDARY_LEN).then(|| v.as_bytes().to_vec())
}

/// A message/rfc822 body in base64 or quoted-printable cannot be parsed
/// without decoding (RFC 2046 §5.2.1 forbids it anyway): it is a leaf.
fn identity_encoding(encoding: &str) -> bool {
    ["7bit", "8bit", "binary"]
        .iter()
        .any(|e| encoding.eq_ignore_ascii_case(e))
}

#[cfg(test)]
mod tests;
