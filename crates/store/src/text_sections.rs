//! The whole text of a long message, in sections, for the full-text index
//! of both back ends.
//!
//! A message's main index row holds what [`crate::index::index_message`]
//! takes from its first [`crate::INDEX_WINDOW`] bytes of header fields and
//! text. A message whose text goes on past that (`FtsText::long`) keeps
//! only its header text there; its body text is in rows of its own: the
//! whole of it, made as the message streams by in bounded memory, cut
//! into sections of [`SECTION`] bytes. Each section starts
//! with the last [`OVERLAP`] bytes of the one before, so a needle of up
//! to [`OVERLAP`] bytes that straddles two sections lies whole in the
//! second; a longer needle across a cut is not found.
//!
//! The text is what the main row's is: the header blocks of the MIME
//! parts (the message's own excepted: it is in the main row), then each
//! text leaf's content, its transfer encoding undone
//! ([`PartRewriter::text_parts`]), its charset made UTF-8 and HTML made
//! text, with the very decoders the main row's parser uses. They work a
//! line at a time here (HTML up to its last `>`), so what one line or tag
//! says is read whole. HTML's `<style>` and `<script>` blocks are left
//! out as there, unless one is cut in two by the reading: then the
//! second half reads as text.

use mail_parser::decoders::charsets::map::charset_decoder;
use mail_parser::decoders::charsets::DecoderFnc;
use mail_parser::decoders::html::html_to_text;
use mime_tree::{PartRewriter, TextLeaf, TextMark};

/// Bytes of text per section (the last one may be shorter).
pub(crate) const SECTION: usize = 128 * 1024;

/// Bytes each section repeats from the end of the one before.
pub(crate) const OVERLAP: usize = 4 * 1024;

/// Most sections of one message (8 GiB of text); the text past them is
/// not indexed.
pub(crate) const MAX_SECTIONS: u32 = 0xFFFF;

/// Longest run of content read without a line end before it is made
/// text anyway.
const LINE_LIMIT: usize = 64 * 1024;

/// Cuts a message, pushed in pieces of any size, into its text sections.
pub(crate) struct Sections {
    parts: PartRewriter,
    /// What `parts` gave for one piece.
    decoded: Vec<u8>,
    leaf: Option<LeafText>,
    /// The section being filled.
    text: String,
    /// How many bytes at the start of `text` the last section held too.
    carried: usize,
    made: u32,
}

impl Sections {
    pub(crate) fn new() -> Sections {
        Sections {
            parts: PartRewriter::text_parts(),
            decoded: Vec::new(),
            leaf: None,
            text: String::new(),
            carried: 0,
            made: 0,
        }
    }

    /// Reads the next piece of the message; full sections go to `ready`.
    pub(crate) fn push(&mut self, piece: &[u8], ready: &mut Vec<String>) {
        let mut decoded = std::mem::take(&mut self.decoded);
        decoded.clear();
        self.parts.push(piece, &mut decoded);
        let marks = self.parts.take_marks();
        self.read(&decoded, marks, ready);
        self.decoded = decoded;
    }

    /// The sections left once the message ended.
    pub(crate) fn finish(mut self, ready: &mut Vec<String>) {
        let mut decoded = std::mem::take(&mut self.decoded);
        decoded.clear();
        let parts = std::mem::replace(&mut self.parts, PartRewriter::text_parts());
        let marks = parts.finish(&mut decoded);
        self.read(&decoded, marks, ready);
        if let Some(leaf) = self.leaf.take() {
            let rest = leaf.finish();
            self.add(&rest, ready);
        }
        if self.text.len() > self.carried {
            self.emit(self.text.len(), ready);
        }
    }

    fn read(&mut self, decoded: &[u8], marks: Vec<(usize, TextMark)>, ready: &mut Vec<String>) {
        let mut from = 0;
        for (at, mark) in marks {
            self.content(&decoded[from..at], ready);
            from = at;
            match mark {
                TextMark::Header { block, top, text } => {
                    if !top {
                        self.add(&String::from_utf8_lossy(&block), ready);
                    }
                    self.leaf = text.map(LeafText::new);
                }
                TextMark::End => {
                    if let Some(leaf) = self.leaf.take() {
                        let rest = leaf.finish();
                        self.add(&rest, ready);
                        self.add("\n", ready);
                    }
                }
            }
        }
        self.content(&decoded[from..], ready);
    }

    fn content(&mut self, bytes: &[u8], ready: &mut Vec<String>) {
        if bytes.is_empty() {
            return;
        }
        if let Some(leaf) = &mut self.leaf {
            let text = leaf.push(bytes);
            self.add(&text, ready);
        }
    }

    fn add(&mut self, text: &str, ready: &mut Vec<String>) {
        if self.made >= MAX_SECTIONS {
            return;
        }
        self.text.push_str(text);
        while self.text.len() >= SECTION && self.made < MAX_SECTIONS {
            self.emit(floor_boundary(&self.text, SECTION), ready);
        }
    }

    /// Makes the first `cut` bytes of the text a section; the next one
    /// starts [`OVERLAP`] bytes before the cut.
    fn emit(&mut self, cut: usize, ready: &mut Vec<String>) {
        let keep = floor_boundary(&self.text, cut.saturating_sub(OVERLAP));
        ready.push(self.text[..cut].to_string());
        self.text.drain(..keep);
        self.carried = cut - keep;
        self.made += 1;
    }
}

/// The largest char boundary of `s` at or below `at`.
fn floor_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// One text leaf's decoded content made text.
struct LeafText {
    charset: Option<DecoderFnc>,
    html: bool,
    /// Content not yet made text: an unfinished line.
    bytes: Vec<u8>,
    /// HTML not yet made text: what follows its last `>` so far.
    html_held: String,
}

impl LeafText {
    fn new(leaf: TextLeaf) -> LeafText {
        LeafText {
            charset: leaf
                .charset
                .as_deref()
                .and_then(|c| charset_decoder(c.as_bytes())),
            html: leaf.subtype == "html",
            bytes: Vec::new(),
            html_held: String::new(),
        }
    }

    /// The text of the whole lines among what came so far.
    fn push(&mut self, bytes: &[u8]) -> String {
        self.bytes.extend_from_slice(bytes);
        let cut = match self.bytes.iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            None if self.bytes.len() > LINE_LIMIT => utf8_floor(&self.bytes),
            None => return String::new(),
        };
        let lines: Vec<u8> = self.bytes.drain(..cut).collect();
        let text = self.charset_text(&lines);
        self.made_text(text, false)
    }

    fn finish(mut self) -> String {
        let lines = std::mem::take(&mut self.bytes);
        let text = self.charset_text(&lines);
        self.made_text(text, true)
    }

    fn charset_text(&self, bytes: &[u8]) -> String {
        match self.charset {
            Some(decode) => decode(bytes),
            None => String::from_utf8_lossy(bytes).into_owned(),
        }
    }

    /// Plain text as it is; HTML up to its last `>` (all of it at the
    /// end, or when too much came without one) made text.
    fn made_text(&mut self, text: String, last: bool) -> String {
        if !self.html {
            return text;
        }
        self.html_held.push_str(&text);
        let cut = match self.html_held.rfind('>') {
            _ if last || self.html_held.len() > LINE_LIMIT => self.html_held.len(),
            Some(i) => i + 1,
            None => return String::new(),
        };
        let html: String = self.html_held.drain(..cut).collect();
        html_to_text(&html)
    }
}

/// Where to cut `bytes` so that a UTF-8 sequence at its end is not cut
/// in two (any other charset is cut where it is: a line this long is
/// rare).
fn utf8_floor(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for i in (len.saturating_sub(4)..len).rev() {
        let b = bytes[i];
        if b & 0xC0 != 0x80 {
            let need = match b {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF7 => 4,
                _ => 1,
            };
            return if i + need > len { i } else { len };
        }
    }
    len
}

/// The sections of a whole message (tests and small callers).
#[cfg(test)]
pub(crate) fn sections(message: &[u8], piece: usize) -> Vec<String> {
    let mut s = Sections::new();
    let mut ready = Vec::new();
    for p in message.chunks(piece.max(1)) {
        s.push(p, &mut ready);
    }
    s.finish(&mut ready);
    ready
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long_message(words: usize) -> (Vec<u8>, Vec<String>) {
        let words: Vec<String> = (0..words).map(|i| format!("w{i:07}")).collect();
        let mut message = b"Subject: long\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\
            Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
            .to_vec();
        for line in words.chunks(8) {
            message.extend_from_slice(line.join(" ").as_bytes());
            message.extend_from_slice(b" caf=C3=A9=\r\n\r\n");
        }
        message.extend_from_slice(
            b"--b\r\nContent-Type: application/pdf; name=tail.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0=\r\n--b--\r\n",
        );
        (message, words)
    }

    #[test]
    fn every_word_is_in_a_section_and_sections_overlap() {
        let (message, words) = long_message(100_000);
        let whole = sections(&message, message.len());
        assert!(whole.len() >= 7, "{} sections", whole.len());
        for piece in [1000, 128 * 1024 + 3] {
            assert_eq!(sections(&message, piece), whole, "pieces of {piece}");
        }
        for s in &whole[..whole.len() - 1] {
            assert_eq!(s.len(), floor_boundary(s, SECTION));
            assert!(s.len() > SECTION - 4);
        }
        for pair in whole.windows(2) {
            let from = floor_boundary(&pair[0], pair[0].len() - OVERLAP);
            assert!(
                pair[1].starts_with(&pair[0][from..]),
                "the next section repeats the end"
            );
        }
        for w in words.iter().step_by(997) {
            assert!(whole.iter().any(|s| s.contains(w.as_str())), "{w}");
        }
        let last = whole.last().unwrap();
        assert!(last.contains(&words[words.len() - 1]));
        assert!(last.contains("café"));
        // The attachment's header is body text; its content is not.
        assert!(last.contains("name=tail.pdf"), "{last}");
        assert!(!whole
            .iter()
            .any(|s| s.contains("JVBERi0") || s.contains("Subject: long")));
    }

    #[test]
    fn html_and_charsets_are_made_text() {
        let mut message = b"Content-Type: text/html; charset=iso-8859-1\r\n\r\n<html><head><style>p { color: red }</style></head><body>\r\n".to_vec();
        for i in 0..20_000 {
            message.extend_from_slice(b"<p class=\"c\">Gr\xfc\xdfe ");
            message.extend_from_slice(format!("{i}</p>\r\n").as_bytes());
        }
        message.extend_from_slice(b"<p>the &amp; end</p></body></html>\r\n");
        let all = sections(&message, 4096).concat();
        assert!(all.contains("Grüße 19999"), "charset decoded");
        assert!(all.contains("the & end"), "entities decoded");
        assert!(
            !all.contains("class=") && !all.contains("color"),
            "tags left out"
        );
    }

    #[test]
    fn a_line_without_end_is_cut_on_a_character() {
        let mut message = b"Content-Type: text/plain; charset=utf-8\r\n\r\n".to_vec();
        message.extend_from_slice("é".repeat(300_000).as_bytes());
        let segs = sections(&message, 333);
        assert!(segs.len() >= 4);
        assert!(segs.iter().all(|s| !s.contains('\u{FFFD}')));
        let chars: usize = segs.concat().chars().count();
        assert!(chars >= 300_000);
    }

    #[test]
    fn a_short_message_is_one_section() {
        let segs = sections(b"Subject: s\r\n\r\nhello there\r\n", 5);
        assert_eq!(segs, ["hello there\r\n\n"]);
    }
}
