//! HTML normalisation, for ClamAV's target type 3 (HTML) signatures.
//!
//! ClamAV does not match target-3 signatures against an HTML file's bytes but
//! against two normalised forms its `htmlnorm.c` writes, `nocomment.html` and
//! `notags.html`; target-0 signatures see those forms too, besides the raw
//! bytes. A file is HTML for this when it is text (by its first bytes) and one of
//! ClamAV 1.4's built-in HTML magic strings (`<html>`, `<script`, `<a ... href`,
//! ...) is in its first [`DECIDE`] bytes ([`HtmlMarker`]; ClamAV looks through
//! the whole file, which a stream cannot do without normalising every text file
//! in case); the MIME type of a mail part does not count, as it does not for
//! ClamAV (a `text/html` part without such a tag is not HTML to it).
//!
//! [`Normaliser`] produces both forms as the bytes stream, with the states of
//! ClamAV's normaliser: in `nocomment`, text and tags lower-cased, white space
//! squeezed to one space (none inside `<script>` and `<style>`), comments removed
//! (a comment ends at the first `>`), tag attributes rewritten as ` name="value"`,
//! character references decoded (`&#101;`, `&#x65;`, `&amp;`, the Latin-1 and
//! the common punctuation entities); in `notags`, the text outside tags, scripts
//! and styles, lower-cased, a space for each tag, white-space run or reference,
//! and the `href` of an `<a>` and the `src` of an `<img>` as written. Its state
//! is a handful of flags, a tag name cut to [`MAX_TAG`] bytes, an entity name cut
//! to [`MAX_ENTITY`] bytes and, inside `<a>` and `<img>` tags, an attribute value
//! cut to 1 KiB as ClamAV cuts it: nothing grows with the input. On 210 random
//! pages of tags, attributes, comments, references, scripts, styles and UTF-8,
//! both forms came out byte for byte as ClamAV 1.4.6 writes them.
//!
//! What ClamAV does besides, not done here: it writes the scripts out once more
//! through its JavaScript normaliser (renamed identifiers, string literals kept)
//! and decodes `JScript.Encode`/`VBScript.Encode` scripts; it scans the files of
//! `data:` URIs (RFC 2397) in attributes, and takes the URI out of `nocomment`;
//! it knows every HTML named entity (here those outside Latin-1 and a short list
//! are left as `&name;`); and it skips the white space at the start of each
//! 8 KiB it reads, not only at the start of the file; it also reads UTF-16
//! pages, which are not text here. A signature on any of those matches there
//! and not here. As ClamAV does, files over 10 MiB are not
//! normalised, and `notags` is made only for files under 2 MiB.

use aho_corasick::AhoCorasick;

use crate::database::{Database, Hit};
use crate::filetype::FileType;
use crate::matcher::BodyMatcher;

/// Bytes of a tag name kept: enough for every name the normaliser acts on.
const MAX_TAG: usize = 16;
/// Bytes of a named character reference kept; a longer one is not an entity.
const MAX_ENTITY: usize = 16;
/// ClamAV's `HTML_STR_LENGTH`: longest entity name and attribute value it reads.
const MAX_ENTITY_READ: usize = 1024;
const MAX_VALUE: usize = 1024;
/// Bytes of an attribute name kept (enough for `href` and `src`).
const MAX_ARG: usize = 8;
/// Files bigger than this are not normalised (ClamAV's `cli_scanhtml`).
pub(crate) const MAX_NOCOMMENT: u64 = 10 << 20;
/// Files this big or bigger get no `notags` form.
pub(crate) const MAX_NOTAGS: u64 = 2 << 20;

/// `isspace` in the C locale.
fn space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Whether the first bytes of a file make it text to ClamAV (ASCII or UTF-8 text:
/// no control characters but white space and escape, valid UTF-8 up to a
/// character cut at the end).
pub(crate) fn looks_like_text(head: &[u8]) -> bool {
    if head.is_empty() {
        return false;
    }
    let controls_ok = head.iter().all(|&b| {
        b >= 0x20 && b != 0x7f || matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1b)
    });
    if !controls_ok {
        return false;
    }
    match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    }
}

/// ClamAV 1.4's built-in HTML magic (`filetypes_int.h`, type-1 entries found
/// anywhere in the file), in the letter cases it lists.
const MARKERS: &[&str] = &[
    "<html>", "<HTML>", "<Html>", "<head>", "<HEAD>", "<Head>", "<iframe", "<IFRAME", "<img",
    "<IMG", "<Img", "<object", "<OBJECT", "<Object", "<script", "<SCRIPT", "<Script", "<table",
    "<TABLE",
];
/// `<a ` or `<A `, followed anywhere after by one of [`HREF`].
const ANCHOR: &[&str] = &["<a ", "<A "];
/// `(h|H)(r|R)EF` and `(h|H)(r|R)ef`.
const HREF: &[&str] = &[
    "hrEF", "hREF", "HrEF", "HREF", "href", "hRef", "Href", "HRef",
];
/// Longest needle, less one: the bytes kept to find one across two pieces.
const MARKER_TAIL: usize = 6;

fn markers() -> &'static AhoCorasick {
    static AC: std::sync::OnceLock<AhoCorasick> = std::sync::OnceLock::new();
    AC.get_or_init(|| {
        let all = MARKERS.iter().chain(ANCHOR).chain(HREF);
        AhoCorasick::new(all).expect("fixed patterns build")
    })
}

/// Looks for ClamAV's HTML magic in a file as it streams.
#[derive(Debug, Default)]
pub(crate) struct HtmlMarker {
    /// The last bytes seen, for a needle split between two pieces.
    tail: Vec<u8>,
    pos: u64,
    /// Where the first `<a ` ended.
    anchor_end: Option<u64>,
    found: bool,
}

impl HtmlMarker {
    /// Whether the file is HTML by what was seen so far.
    pub fn found(&self) -> bool {
        self.found
    }

    pub fn feed(&mut self, data: &[u8], first: bool) {
        if self.found || data.is_empty() {
            return;
        }
        if first && data.starts_with(b"<% LANGUAGE =") {
            self.found = true;
            return;
        }
        let mut joined = std::mem::take(&mut self.tail);
        let start = self.pos - joined.len() as u64;
        joined.extend_from_slice(&data[..data.len().min(MARKER_TAIL)]);
        self.search(&joined, start);
        self.search(data, self.pos);
        self.pos += data.len() as u64;
        self.tail = if data.len() >= MARKER_TAIL {
            data[data.len() - MARKER_TAIL..].to_vec()
        } else {
            // All of `data` is in `joined`: keep its last bytes.
            joined.split_off(joined.len().saturating_sub(MARKER_TAIL))
        };
    }

    fn search(&mut self, hay: &[u8], at: u64) {
        let (marks, anchors) = (MARKERS.len(), MARKERS.len() + ANCHOR.len());
        for m in markers().find_overlapping_iter(hay) {
            let p = m.pattern().as_usize();
            if p < marks {
                self.found = true;
            } else if p < anchors {
                let end = at + m.end() as u64;
                self.anchor_end = Some(self.anchor_end.map_or(end, |e| e.min(end)));
            } else if self.anchor_end.is_some_and(|e| at + m.start() as u64 >= e) {
                self.found = true;
            }
            if self.found {
                return;
            }
        }
    }
}

/// The normaliser's states (ClamAV's `HTML_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Norm,
    SkipWs,
    TrimWs,
    Tag,
    TagArg,
    TagArgEqual,
    TagArgVal,
    Comment,
    ProcessTag,
    CharRef,
    EntityRef,
    CharRefDecode,
    EightBit,
}

/// What element the normaliser is inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InTag {
    Text,
    Script,
    Style,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Single,
    Double,
}

/// The two normalised forms of the bytes of one `feed`.
#[derive(Debug, Default)]
pub(crate) struct Forms {
    pub nocomment: Vec<u8>,
    pub notags: Vec<u8>,
}

/// A streaming HTML normaliser after ClamAV's `cli_html_normalise`.
#[derive(Debug)]
pub(crate) struct Normaliser {
    st: St,
    next: St,
    in_tag: InTag,
    /// A space was the last thing written to `notags`.
    text_space: bool,
    /// A `<` not yet written to `nocomment`: a comment after it takes it back.
    lt: bool,
    /// Still in the white space the file starts with.
    start: bool,
    tag: [u8; MAX_TAG],
    tag_len: usize,
    arg_len: usize,
    /// The first bytes of the attribute name being read.
    arg: [u8; MAX_ARG],
    val_len: usize,
    /// The value being read, as ClamAV keeps it (quotes included), when the
    /// tag is an `<a>` or an `<img>`, whose `href` or `src` goes into `notags`.
    val: Vec<u8>,
    /// The `href` or `src` of the tag being read: `Some(None)` when the
    /// attribute came without a value (only the first one counts).
    link: Option<Option<Vec<u8>>>,
    quote: Quote,
    entity: [u8; MAX_ENTITY],
    entity_len: usize,
    /// A character reference's value and base.
    value: i64,
    hex: bool,
    mbchar: u32,
}

impl Default for Normaliser {
    fn default() -> Self {
        Self {
            st: St::Norm,
            next: St::Norm,
            in_tag: InTag::Text,
            text_space: false,
            lt: false,
            start: true,
            tag: [0; MAX_TAG],
            tag_len: 0,
            arg_len: 0,
            arg: [0; MAX_ARG],
            val_len: 0,
            val: Vec::new(),
            link: None,
            quote: Quote::None,
            entity: [0; MAX_ENTITY],
            entity_len: 0,
            value: 0,
            hex: false,
            mbchar: 0,
        }
    }
}

/// The HTML 4 entities of ISO 8859-1, for U+00A0 to U+00FF in order.
const LATIN1: [&str; 96] = [
    "nbsp", "iexcl", "cent", "pound", "curren", "yen", "brvbar", "sect", "uml", "copy", "ordf",
    "laquo", "not", "shy", "reg", "macr", "deg", "plusmn", "sup2", "sup3", "acute", "micro",
    "para", "middot", "cedil", "sup1", "ordm", "raquo", "frac14", "frac12", "frac34", "iquest",
    "Agrave", "Aacute", "Acirc", "Atilde", "Auml", "Aring", "AElig", "Ccedil", "Egrave", "Eacute",
    "Ecirc", "Euml", "Igrave", "Iacute", "Icirc", "Iuml", "ETH", "Ntilde", "Ograve", "Oacute",
    "Ocirc", "Otilde", "Ouml", "times", "Oslash", "Ugrave", "Uacute", "Ucirc", "Uuml", "Yacute",
    "THORN", "szlig", "agrave", "aacute", "acirc", "atilde", "auml", "aring", "aelig", "ccedil",
    "egrave", "eacute", "ecirc", "euml", "igrave", "iacute", "icirc", "iuml", "eth", "ntilde",
    "ograve", "oacute", "ocirc", "otilde", "ouml", "divide", "oslash", "ugrave", "uacute", "ucirc",
    "uuml", "yacute", "thorn", "yuml",
];

/// A named character reference's value: the ASCII and Latin-1 ones and the
/// common punctuation (ClamAV knows all of HTML's).
fn entity_value(name: &[u8]) -> Option<u16> {
    if let Some(i) = LATIN1.iter().position(|n| n.as_bytes() == name) {
        return Some(160 + i as u16);
    }
    Some(match name {
        b"amp" => 38,
        b"lt" => 60,
        b"gt" => 62,
        b"quot" => 34,
        b"apos" => 39,
        b"euro" => 0x20ac,
        b"hellip" => 0x2026,
        b"ndash" => 0x2013,
        b"mdash" => 0x2014,
        b"lsquo" => 0x2018,
        b"rsquo" => 0x2019,
        b"ldquo" => 0x201c,
        b"rdquo" => 0x201d,
        b"bull" => 0x2022,
        b"trade" => 0x2122,
        b"zwnj" => 0x200c,
        b"zwj" => 0x200d,
        _ => return None,
    })
}

/// ClamAV's `u16_normalize`: a character as `nocomment` writes it.
fn push_u16(v: u16, out: &mut Vec<u8>) {
    match v {
        0 => {}
        1..=0xfe => out.push(v as u8),
        0x3002 | 0xff0e | 0xfe52 => out.push(b'.'),
        _ => out.extend_from_slice(format!("&#x{v:04x};").as_bytes()),
    }
}

impl Normaliser {
    /// Normalises the next bytes, appending to `out`.
    pub fn feed(&mut self, data: &[u8], out: &mut Forms) {
        for &b in data {
            if self.start {
                if space(b) {
                    continue;
                }
                self.start = false;
            }
            // As ClamAV reads text: a line feed is a space, a carriage return nothing.
            let b = match b {
                b'\r' => continue,
                b'\n' => b' ',
                _ => b,
            };
            while !self.step(b, out) {}
        }
    }

    fn flush_lt(&mut self, out: &mut Forms) {
        if std::mem::take(&mut self.lt) {
            out.nocomment.push(b'<');
        }
    }

    fn text_space(&mut self, out: &mut Forms) {
        if self.in_tag == InTag::Text && !self.text_space {
            out.notags.push(b' ');
            self.text_space = true;
        }
    }

    /// Runs one state on `b`; false when `b` is to be taken again in the new state.
    fn step(&mut self, b: u8, out: &mut Forms) -> bool {
        let o2 = |out: &mut Forms, c: u8| out.nocomment.push(c);
        match self.st {
            St::SkipWs => {
                if space(b) {
                    return true;
                }
                self.st = self.next;
                false
            }
            St::TrimWs => {
                if space(b) {
                    return true;
                }
                if self.in_tag == InTag::Text {
                    o2(out, b' ');
                }
                self.st = self.next;
                false
            }
            St::EightBit => {
                if b < 0x80 || self.mbchar >= 0x10000 {
                    let m = self.mbchar;
                    if m == 0xe3_8082 || m == 0xef_bc8e || m == 0xef_b992 {
                        o2(out, b'.');
                        out.notags.push(b'.');
                    } else if m == 0xa1 && matches!(b, 0x43 | 0x44 | 0x4f) {
                        o2(out, b'.');
                        out.notags.push(b'.');
                        self.mbchar = 0;
                        return true;
                    } else {
                        let [_, c0, c1, c2] = m.to_be_bytes();
                        if c0 != 0 {
                            o2(out, c0);
                            out.notags.push(c0);
                        }
                        if c0 != 0 || c1 != 0 {
                            o2(out, c1);
                            out.notags.push(c1);
                        }
                        o2(out, c2);
                        // ClamAV writes the middle byte here, a NUL for a single byte.
                        out.notags.push(c1);
                    }
                    self.mbchar = 0;
                    self.st = self.next;
                    self.next = St::Norm;
                    false
                } else {
                    self.mbchar = self.mbchar << 8 | u32::from(b);
                    true
                }
            }
            St::Norm => {
                if b == b'<' {
                    self.lt = true;
                    self.text_space(out);
                    self.st = St::SkipWs;
                    self.tag_len = 0;
                    self.link = None;
                    self.next = St::Tag;
                } else if space(b) {
                    self.text_space(out);
                    self.st = St::TrimWs;
                    self.next = St::Norm;
                    return false;
                } else if b == b'&' {
                    self.text_space(out);
                    self.st = St::CharRef;
                    self.next = St::Norm;
                } else if b >= 0x80 {
                    self.st = St::EightBit;
                    self.next = St::Norm;
                    self.mbchar = u32::from(b);
                } else {
                    let mut c = b.to_ascii_lowercase();
                    if self.in_tag != InTag::Text && c == b'\'' {
                        c = b'"';
                    }
                    o2(out, c);
                    if self.in_tag == InTag::Text {
                        if b < 0x20 {
                            self.text_space(out);
                        } else {
                            out.notags.push(c);
                            self.text_space = false;
                        }
                    }
                }
                true
            }
            St::Tag => {
                if self.tag_len == 0 && b == b'!' {
                    if self.in_tag != InTag::Text {
                        self.flush_lt(out);
                        o2(out, b'!');
                    } else {
                        // The comment's `<` is taken back.
                        self.lt = false;
                    }
                    self.st = St::Comment;
                    return true;
                }
                self.flush_lt(out);
                if b == b'>' {
                    o2(out, b'>');
                    self.st = St::SkipWs;
                    self.next = St::ProcessTag;
                    true
                } else if !space(b) {
                    let c = b.to_ascii_lowercase();
                    o2(out, c);
                    if self.in_tag != InTag::Text && self.tag_len == 0 && b != b'/' {
                        // In a script only its end tag counts.
                        self.st = St::Norm;
                    }
                    if self.tag_len < MAX_TAG {
                        self.tag[self.tag_len] = c;
                    }
                    self.tag_len += 1;
                    true
                } else {
                    self.st = St::SkipWs;
                    self.arg_len = 0;
                    self.next = if self.in_tag == InTag::Text {
                        St::TagArg
                    } else {
                        St::ProcessTag
                    };
                    false
                }
            }
            St::TagArg => {
                if b == b'=' {
                    o2(out, b'=');
                    self.start_value();
                } else if space(b) {
                    self.st = St::SkipWs;
                    self.next = St::TagArgEqual;
                } else if b == b'>' {
                    o2(out, b'>');
                    if self.arg_len > 0 {
                        self.add_arg(false);
                    }
                    self.st = St::ProcessTag;
                } else {
                    if self.arg_len == 0 {
                        o2(out, b' ');
                    }
                    let c = b.to_ascii_lowercase();
                    o2(out, c);
                    if self.arg_len < MAX_ARG {
                        self.arg[self.arg_len] = c;
                    }
                    self.arg_len += 1;
                }
                true
            }
            St::TagArgEqual => {
                if b == b'=' {
                    o2(out, b'=');
                    self.start_value();
                    true
                } else {
                    if self.arg_len > 0 {
                        self.add_arg(false);
                    }
                    self.arg_len = 0;
                    self.st = St::TagArg;
                    false
                }
            }
            St::TagArgVal => self.tag_arg_val(b, out),
            St::Comment => {
                if self.in_tag != InTag::Text && !space(b) {
                    let c = match b.to_ascii_lowercase() {
                        b'\'' => b'"',
                        c => c,
                    };
                    o2(out, c);
                }
                if b == b'>' {
                    self.st = St::SkipWs;
                    self.next = St::Norm;
                }
                true
            }
            St::ProcessTag => {
                self.st = St::SkipWs;
                self.next = St::Norm;
                let tag = &self.tag[..self.tag_len.min(MAX_TAG)];
                let tag = if self.tag_len > MAX_TAG { &[][..] } else { tag };
                let link = self.link.take().flatten();
                match tag {
                    b"a" | b"img" => {
                        if let Some(v) = link.filter(|v| !v.is_empty()) {
                            out.notags.extend_from_slice(&v);
                            out.notags.push(b' ');
                            self.text_space = true;
                        }
                    }
                    b"/script" => self.in_tag = InTag::Text,
                    b"/style" if self.in_tag == InTag::Style => self.in_tag = InTag::Text,
                    b"script" => self.in_tag = InTag::Script,
                    b"style" => self.in_tag = InTag::Style,
                    _ => {}
                }
                false
            }
            St::CharRef => {
                if b == b'#' {
                    self.value = 0;
                    self.hex = false;
                    self.st = St::CharRefDecode;
                    true
                } else {
                    self.entity_len = 0;
                    self.st = St::EntityRef;
                    false
                }
            }
            St::EntityRef => self.entity_ref(b, out),
            St::CharRefDecode => self.char_ref(b, out),
        }
    }

    /// Whether the tag being read is one whose link goes into `notags`.
    fn link_tag(&self) -> bool {
        matches!(&self.tag[..self.tag_len.min(MAX_TAG)], b"a" | b"img")
    }

    /// Keeps a byte of the value being read, as ClamAV's `tag_val` does.
    fn keep(&mut self, c: u8) {
        if self.link_tag() && self.val.len() < MAX_VALUE {
            self.val.push(c);
        }
    }

    /// After an attribute's `=`: its value comes, past any white space.
    fn start_value(&mut self) {
        self.st = St::SkipWs;
        self.quote = Quote::None;
        self.val_len = 0;
        self.val.clear();
        self.next = St::TagArgVal;
    }

    /// An attribute ends (with the value read, if `value`): the first `href` of
    /// an `<a>` or `src` of an `<img>` is kept, its quotes taken off.
    fn add_arg(&mut self, value: bool) {
        if self.link.is_some() || self.arg_len > MAX_ARG {
            return;
        }
        let name = &self.arg[..self.arg_len];
        let wanted = match &self.tag[..self.tag_len.min(MAX_TAG)] {
            b"a" => b"href".as_slice(),
            b"img" => b"src".as_slice(),
            _ => return,
        };
        if name != wanted {
            return;
        }
        self.link = Some(value.then(|| match self.val.split_first() {
            Some((b'"', rest)) => rest[..rest.len().saturating_sub(1)].to_vec(),
            _ => self.val.clone(),
        }));
    }

    fn tag_arg_val(&mut self, b: u8, out: &mut Forms) -> bool {
        match b {
            b'&' => {
                self.st = St::CharRef;
                self.next = St::TagArgVal;
            }
            b'\'' | b'"' => {
                let q = if b == b'"' {
                    Quote::Double
                } else {
                    Quote::Single
                };
                out.nocomment.push(b'"');
                self.keep(b'"');
                if self.val_len == 0 {
                    self.quote = q;
                } else if self.quote == q {
                    self.add_arg(true);
                    self.st = St::SkipWs;
                    self.arg_len = 0;
                    self.next = St::TagArg;
                }
                self.val_len += 1;
            }
            _ if space(b) || b == b'>' => {
                if self.quote == Quote::None {
                    self.add_arg(true);
                    self.st = St::SkipWs;
                    self.arg_len = 0;
                    self.next = St::TagArg;
                    return false;
                }
                out.nocomment.push(b);
                self.keep(if b == b'>' { b'>' } else { b' ' });
                self.val_len += 1;
                // As ClamAV does, white space in a quoted value ends the quoting.
                self.st = St::SkipWs;
                self.quote = Quote::None;
                self.next = St::TagArgVal;
            }
            _ => {
                out.nocomment
                    .push(if b < 0x80 { b.to_ascii_lowercase() } else { b });
                self.keep(b);
                self.val_len += 1;
            }
        }
        true
    }

    /// The end of a named reference: the character, or what was read as it was.
    fn entity_ref(&mut self, b: u8, out: &mut Forms) -> bool {
        let dump = |s: &mut Self, out: &mut Forms| {
            out.nocomment.push(b'&');
            let n = s.entity_len.min(MAX_ENTITY);
            out.nocomment
                .extend(s.entity[..n].iter().map(u8::to_ascii_lowercase));
        };
        if b == b';' {
            if self.entity_len > MAX_ENTITY {
                out.nocomment.push(b';');
                self.st = self.next;
                return true;
            }
            let known = (self.entity_len <= MAX_ENTITY)
                .then(|| entity_value(&self.entity[..self.entity_len]))
                .flatten();
            let start = out.nocomment.len();
            match known {
                Some(v) => push_u16(v, &mut out.nocomment),
                None => {
                    dump(self, out);
                    out.nocomment.push(b';');
                }
            }
            if self.next == St::TagArgVal {
                for i in start..out.nocomment.len() {
                    self.keep(out.nocomment[i]);
                }
            }
            self.st = self.next;
            return true;
        }
        if (b.is_ascii_alphanumeric() || matches!(b, b'_' | b':' | b'-'))
            && self.entity_len < MAX_ENTITY_READ
        {
            if self.entity_len < MAX_ENTITY {
                self.entity[self.entity_len] = b;
            } else if self.entity_len == MAX_ENTITY {
                // Too long to be an entity: written as it comes from here on.
                dump(self, out);
            }
            if self.entity_len >= MAX_ENTITY {
                out.nocomment.push(b.to_ascii_lowercase());
            }
            self.entity_len += 1;
            return true;
        }
        if self.entity_len <= MAX_ENTITY {
            let start = out.nocomment.len();
            dump(self, out);
            if self.next == St::TagArgVal {
                for i in start..out.nocomment.len() {
                    self.keep(out.nocomment[i]);
                }
            }
        }
        self.st = self.next;
        false
    }

    /// A numeric reference (`&#101;`, `&#x65;`).
    fn char_ref(&mut self, b: u8, out: &mut Forms) -> bool {
        let done = |s: &mut Self| s.st = s.next;
        if self.value == 0 && matches!(b, b'x' | b'X') {
            self.hex = true;
            return true;
        }
        if b == b';' {
            if self.next == St::TagArgVal {
                self.keep(self.value as u8);
            }
            if self.value < 0x80 {
                out.nocomment.push((self.value as u8).to_ascii_lowercase());
            } else {
                push_u16(self.value as u16, &mut out.nocomment);
            }
            done(self);
            return true;
        }
        if b.is_ascii_digit() || (self.hex && b.is_ascii_hexdigit()) {
            let base = if self.hex { 16 } else { 10 };
            let inc = i64::from((b as char).to_digit(16).unwrap_or(0));
            match self
                .value
                .checked_mul(base)
                .and_then(|v| v.checked_add(inc))
            {
                Some(v) => self.value = v,
                None => {
                    out.nocomment.push(self.value as u8);
                    done(self);
                }
            }
            return true;
        }
        out.nocomment.push(self.value as u8);
        done(self);
        false
    }
}

/// Bytes of a text file looked through for an HTML marker before normalising
/// it: the file is taken as HTML only when a marker appears this early, where
/// ClamAV looks through the whole file. Normalising every text file in case a
/// marker comes late would match each text part three times (raw and both
/// forms) and cost two more matchers' memory; HTML in mail opens with its tags.
pub(crate) const DECIDE: usize = 8 << 10;

/// The normalised forms of one text file that may be HTML, matched as they are
/// made. Its first bytes are held (at most [`DECIDE`]) until an HTML marker
/// shows it is HTML, then normalised from the start; a file with no marker in
/// them is declined and never normalised.
pub(crate) struct HtmlScan {
    marker: HtmlMarker,
    /// The first bytes while undecided.
    pending: Vec<u8>,
    /// Set once the file is HTML.
    forms: Option<Box<Normalising>>,
    declined: bool,
    size: u64,
}

/// Both forms as they are made, and their matchers.
struct Normalising {
    norm: Normaliser,
    forms: Forms,
    nocomment: BodyMatcher,
    notags: BodyMatcher,
    /// The first signature each form matched while the bytes came.
    hits: [Option<Hit>; 2],
    /// Bytes normalised so far.
    size: u64,
}

/// Bytes normalised at a time (each gives at most a few dozen bytes of output).
const PIECE: usize = 4096;

impl Normalising {
    fn new(db: &Database) -> Self {
        Self {
            norm: Normaliser::default(),
            forms: Forms::default(),
            nocomment: BodyMatcher::new(db),
            notags: BodyMatcher::new(db),
            hits: [None, None],
            size: 0,
        }
    }

    fn feed(&mut self, db: &Database, data: &[u8], window: usize) {
        self.size += data.len() as u64;
        if self.size > MAX_NOCOMMENT {
            return;
        }
        let notags = self.size < MAX_NOTAGS;
        for piece in data.chunks(PIECE) {
            self.forms.nocomment.clear();
            self.forms.notags.clear();
            self.norm.feed(piece, &mut self.forms);
            if self.hits[0].is_none() {
                self.hits[0] =
                    self.nocomment
                        .feed(db, FileType::Html, &self.forms.nocomment, window);
            }
            if notags && self.hits[1].is_none() {
                self.hits[1] = self
                    .notags
                    .feed(db, FileType::Html, &self.forms.notags, window);
            }
        }
    }
}

impl HtmlScan {
    pub fn new() -> Self {
        Self {
            marker: HtmlMarker::default(),
            pending: Vec::new(),
            forms: None,
            declined: false,
            size: 0,
        }
    }

    /// Whether the file turned out not to be HTML (no marker early enough):
    /// nothing more to do for it.
    pub fn declined(&self) -> bool {
        self.declined
    }

    pub fn feed(&mut self, db: &Database, data: &[u8], window: usize) {
        if self.declined {
            return;
        }
        if let Some(n) = self.forms.as_mut() {
            n.feed(db, data, window);
            return;
        }
        // Only the first DECIDE bytes count, however the file is cut up.
        let early = &data[..data.len().min(DECIDE.saturating_sub(self.size as usize))];
        self.marker.feed(early, self.size == 0);
        self.size += data.len() as u64;
        if self.marker.found() {
            let mut n = Box::new(Normalising::new(db));
            n.feed(db, &std::mem::take(&mut self.pending), window);
            n.feed(db, data, window);
            self.forms = Some(n);
        } else if self.size >= DECIDE as u64 {
            self.declined = true;
            self.pending = Vec::new();
        } else {
            self.pending.extend_from_slice(data);
        }
    }

    /// What the normalised forms matched, if the file is HTML (`nocomment`
    /// first, as ClamAV scans it first), and the anchor hits its matchers dropped.
    pub fn finish(self, db: &Database, ancestry: &[FileType]) -> (Option<Hit>, u64) {
        let Some(mut n) = self.forms else {
            return (None, 0);
        };
        if n.size > MAX_NOCOMMENT {
            return (None, 0);
        }
        let mut hit = n.hits[0].or_else(|| n.nocomment.finish(db, FileType::Html, ancestry));
        if hit.is_none() && n.size < MAX_NOTAGS {
            hit = n.hits[1].or_else(|| n.notags.finish(db, FileType::Html, ancestry));
        }
        (hit, n.nocomment.dropped + n.notags.dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(html: &[u8]) -> (String, String) {
        let (a, b) = norm_bytes(html);
        (
            String::from_utf8_lossy(&a).into_owned(),
            String::from_utf8_lossy(&b).into_owned(),
        )
    }

    fn norm_bytes(html: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let mut n = Normaliser::default();
        let mut f = Forms::default();
        n.feed(html, &mut f);
        // A byte at a time gives the same.
        let mut n1 = Normaliser::default();
        let mut f1 = Forms::default();
        for b in html {
            n1.feed(std::slice::from_ref(b), &mut f1);
        }
        assert_eq!(f.nocomment, f1.nocomment);
        assert_eq!(f.notags, f1.notags);
        (f.nocomment, f.notags)
    }

    #[test]
    fn forms_as_clamav_writes_them() {
        // Each as ClamAV 1.4 writes nocomment.html and notags.html.
        for (html, nocomment, notags) in [
            (
                &b"<html><body><p>Hello sluice html mark here</p></body></html>\n"[..],
                "<html><body><p>hello sluice html mark here</p></body></html>",
                " hello sluice html mark here ",
            ),
            (
                b"<html><body><p>Hello sluice <!-- hidden --> html mark here</p></body></html>\n",
                "<html><body><p>hello sluice html mark here</p></body></html>",
                " hello sluice html mark here ",
            ),
            (
                b"<html><body><p>Hello sluice<b>html</b>mark here</p></body></html>\n",
                "<html><body><p>hello sluice<b>html</b>mark here</p></body></html>",
                " hello sluice html mark here ",
            ),
            (
                b"<html><body><p>Hello sluice &#104;tml m&#x61;rk &amp; here</p></body></html>\n",
                "<html><body><p>hello sluice html mark & here</p></body></html>",
                " hello sluice tml m rk here ",
            ),
            (
                b"<html><head><script>var a = \"sluice html mark\";</script></head><body>x</body></html>\n",
                "<html><head><script>vara=\"sluicehtmlmark\";</script></head><body>x</body></html>",
                " x ",
            ),
            (
                b"<html><body><a title=\"SLUICE HTML MARK\">x</a></body></html>\n",
                "<html><body><a title=\"sluice html mark\">x</a></body></html>",
                " x ",
            ),
            (
                b"<HTML><BODY><P>Hello SLUICE   \n\t HTML MARK</P></BODY></HTML>",
                "<html><body><p>hello sluice html mark</p></body></html>",
                " hello sluice html mark ",
            ),
            // Random pieces, as ClamAV 1.4.6 wrote them.
            (
                b"<html><img src=Y.png>text-with-dash<script>var a = 'S';</script><html><p>&bogus;<div class=\"A B\" id='c'></a><a href=\"http://X.org/A\"><!-- c --><b>\tWORLDWORLD<div class=\"A B\" id='c'><input value=\"a  b\"><b>\"</a></P>< p ><body><html>Hello\t",
                "<html><img src=y.png>text-with-dash<script>vara=\"s\";</script><html><p>&bogus;<div class=\"a b\" id=\"c\"></a><a href=\"http://x.org/a\"><b>worldworld<div class=\"a b\" id=\"c\"><input value=\"a b\"><b>\"</a></p><p><body><html>hello",
                " Y.png text-with-dash http://X.org/A worldworld \" hello ",
            ),
            (
                b"<html>&lt;<div class=\"A B\" id='c'>&lt;</a></a></a></b>< p >\n&gt;</P><img src=Y.png><HTML>&lt;</a><p><style>p { x: y }</style><a href=\"http://X.org/A\">",
                "<html><<div class=\"a b\" id=\"c\"><</a></a></a></b><p>></p><img src=y.png><html><</a><p><style>p{x:y}</style><a href=\"http://x.org/a\">",
                " Y.png ",
            ),
        ] {
            let (o2, text) = norm(html);
            assert_eq!(o2, nocomment, "{}", String::from_utf8_lossy(html));
            assert_eq!(text, notags, "{}", String::from_utf8_lossy(html));
        }
    }

    #[test]
    fn references_and_bytes() {
        // Entity names are case-sensitive: ClamAV does not know `&AMP;`.
        let (o2, _) =
            norm_bytes(b"a&nbsp;b &eacute; &#233; &#x3002; &#65; &bogus &frob; &AMP; &#12x");
        assert_eq!(
            o2,
            b"a\xa0b \xe9 \xe9 . a &bogus &frob; &amp; \x0cx".as_slice()
        );
        let long = format!("&{};", "x".repeat(40));
        assert_eq!(norm(long.as_bytes()).0, long);
    }

    #[test]
    fn target_3_sees_the_normalised_forms_of_html_only() {
        use std::sync::Arc;

        use crate::{DatabaseBuilder, Limits, Scanner, Verdict};
        let mut b = DatabaseBuilder::new();
        // "evil code" for HTML (target 3), "raw only" anywhere (target 0).
        b.add_ndb("Html.Test:3:*:6576696c20636f6465\nRaw.Test:0:*:726177206f6e6c79\n");
        let s = Scanner::new(Arc::new(b.build().unwrap().0), Limits::default());
        let found = |n: &str| Verdict::Infected { name: n.into() };
        let check = |file: &[u8], want: Verdict| {
            let whole = s.scan_file(file);
            let mut session = s.file_session();
            for byte in file {
                session.feed(std::slice::from_ref(byte));
            }
            assert_eq!(session.finish(), whole, "{}", String::from_utf8_lossy(file));
            assert_eq!(whole, want, "{}", String::from_utf8_lossy(file));
        };
        for (file, want) in [
            (
                &b"<html><body>EVIL <!-- x --> &#99;ode</body></html>"[..],
                found("Html.Test"),
            ),
            (b"<html><i>Evil</i>\n  code", found("Html.Test")),
            // Not HTML: no tag ClamAV counts.
            (b"<p>evil code</p>", Verdict::Clean),
            // Target 0: the raw bytes, and the normalised forms of HTML.
            (b"plain text, raw only", found("Raw.Test")),
            (b"<html>RAW   only", found("Raw.Test")),
            (b"RAW only", Verdict::Clean),
        ] {
            check(file, want);
        }
        // A marker past the first DECIDE bytes: the file is not taken as HTML
        // (ClamAV would: it looks through the whole file).
        let mut late = vec![b'x'; DECIDE + 1];
        late.extend_from_slice(b"<html>evil &#99;ode");
        check(&late, Verdict::Clean);
        let mut early = b"<html>".to_vec();
        early.extend(vec![b'x'; DECIDE + 1]);
        early.extend_from_slice(b" evil &#99;ode");
        check(&early, found("Html.Test"));
    }

    #[test]
    fn markers_found_across_pieces() {
        for (text, html) in [
            (&b"plain text, nothing <p>here</p>"[..], false),
            (b"some text <html> and more", true),
            (b"x <SCRIPT src=a>", true),
            (b"<a name=x> then <b href=y>", true),
            (b"href first, then <a name=x>", false),
            (b"<HtMl>", false),
            (b"<Html>", true),
        ] {
            for cut in 0..=text.len() {
                let mut m = HtmlMarker::default();
                m.feed(&text[..cut], true);
                m.feed(&text[cut..], cut == 0);
                assert_eq!(
                    m.found(),
                    html,
                    "{} at {cut}",
                    String::from_utf8_lossy(text)
                );
            }
        }
        assert!(looks_like_text(b"hello\r\n\tw\xc3\xa9"));
        assert!(looks_like_text(b"cut utf-8 \xc3"));
        assert!(!looks_like_text(b"nul\0"));
        assert!(!looks_like_text(b"bad \xff utf-8"));
    }
}
