//! Streaming extraction of links from HTML, for the phishing check
//! ([`crate::phish`]): the pairs of where a link goes and what it shows, as
//! ClamAV's HTML scanner extracts them.
//!
//! - `<a href=R>text</a>`: R and the text between the tags, other tags inside
//!   dropped (their text kept); an `<a href>` inside an open one closes it.
//! - `<a href=R title=T>`: R and T.
//! - `<img src=S>` (or `dynsrc`) and `<iframe src=S>` inside an `<a href=R>`: R and S.
//! - `<area href=H>` inside an `<a href=R>`: R and H.
//! - inside a `<form action=A>`: A and each `<a href>`, `<img src>`, `<iframe src>`
//!   or `<area href>`.
//!
//! A part with none of those tags has its text URLs (`http:` and `ftp:`, as ClamAV
//! finds them) read instead by [`TextUrls`]: they show nothing, so only the `.gdb`
//! URL hashes can find them.
//!
//! Attribute values have their character references decoded (`&#58;`, `&#x3a;`,
//! `&amp;`...); the text of a link is kept as written, as ClamAV keeps it. In both,
//! the multi-byte full stops become `.` ([`Wide`]). Nothing inside a `<script>`
//! element is read, nor inside a comment. The
//! input comes in chunks of any size: the extractor keeps a bounded state across
//! them (at most [`MAX_VALUE`] bytes of each attribute value and of link text, as
//! ClamAV cuts them too), so a link split anywhere gives the same pair.

use crate::phish::LinkKind;

/// Longest attribute value or link text kept, as ClamAV's HTML scanner (1024).
pub(crate) const MAX_VALUE: usize = 1024;

/// Longest tag or attribute name told apart; longer ones are none of those looked for.
const MAX_NAME: usize = 16;

/// Longest character reference decoded.
const MAX_ENTITY: usize = 16;

/// One link: where it goes and what it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Link {
    pub real: Vec<u8>,
    pub display: Vec<u8>,
    pub kind: LinkKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Text,
    /// After `<`, before the name (blanks skipped, as ClamAV does).
    TagOpen,
    TagName,
    /// Between attributes.
    Attrs,
    AttrName,
    /// After an attribute name, waiting for `=` or the next attribute.
    AfterName,
    /// After `=`, before the value.
    BeforeValue,
    /// In a value; the quote that ends it, or 0 for an unquoted value.
    Value(u8),
    /// In a character reference of a value (`&` seen).
    Entity(u8),
    /// In `<!-- ... -->`: the number of `-` just seen.
    Comment(u8),
    /// In a `<script>` element (no links are read there, as in ClamAV): the number
    /// of bytes of `</script` just seen.
    Script(u8),
}

/// Multi-byte characters of link text and attribute values, as ClamAV's HTML
/// scanner passes them on: the ideographic, full-width and small full stops
/// (U+3002, U+FF0E, U+FE52) become `.`, as does `0xA1` before `C`, `D` or `O`
/// (which is dropped); other bytes pass as they are. A character still open when
/// its text ends is dropped.
#[derive(Debug, Default)]
struct Wide(u32);

impl Wide {
    fn push(&mut self, b: u8, out: &mut Vec<u8>) {
        if self.0 != 0 && (b < 0x80 || self.0 >= 0x10000) {
            let mb = std::mem::take(&mut self.0);
            if matches!(mb, 0xE3_8082 | 0xEF_BC8E | 0xEF_B992)
                || (mb == 0xA1 && matches!(b, b'C' | b'D' | b'O'))
            {
                push_capped(out, b'.', MAX_VALUE);
                if mb == 0xA1 {
                    return;
                }
            } else {
                let [_, c0, c1, c2] = mb.to_be_bytes();
                if c0 != 0 {
                    push_capped(out, c0, MAX_VALUE);
                }
                if c0 != 0 || c1 != 0 {
                    push_capped(out, c1, MAX_VALUE);
                }
                push_capped(out, c2, MAX_VALUE);
            }
        }
        if b >= 0x80 {
            self.0 = self.0 << 8 | u32::from(b);
        } else {
            push_capped(out, b, MAX_VALUE);
        }
    }
}

/// Attributes of the tag being read that links are made of.
#[derive(Debug, Default)]
struct Attrs {
    href: Option<Vec<u8>>,
    title: Option<Vec<u8>>,
    src: Option<Vec<u8>>,
    dynsrc: Option<Vec<u8>>,
    action: Option<Vec<u8>>,
}

/// The streaming extractor; see the module documentation.
#[derive(Debug)]
pub(crate) struct LinkExtractor {
    state: State,
    name: Vec<u8>,
    closing: bool,
    attr: Vec<u8>,
    value: Vec<u8>,
    entity: Vec<u8>,
    attrs: Attrs,
    /// The `href` of the open `<a>`, and its text so far.
    open_a: Option<Vec<u8>>,
    text: Vec<u8>,
    /// Multi-byte character state of the link text and of the value being read.
    text_wide: Wide,
    value_wide: Wide,
    form_action: Option<Vec<u8>>,
    /// A tag gave a URL (ClamAV then reads no text URLs in the part).
    pub tag_urls: bool,
}

impl Default for LinkExtractor {
    fn default() -> Self {
        Self::new()
    }
}

fn push_capped(v: &mut Vec<u8>, b: u8, cap: usize) {
    if v.len() < cap {
        v.push(b);
    }
}

impl LinkExtractor {
    pub fn new() -> Self {
        Self {
            state: State::Text,
            name: Vec::new(),
            closing: false,
            attr: Vec::new(),
            value: Vec::new(),
            entity: Vec::new(),
            attrs: Attrs::default(),
            open_a: None,
            text: Vec::new(),
            text_wide: Wide::default(),
            value_wide: Wide::default(),
            form_action: None,
            tag_urls: false,
        }
    }

    /// Takes the next bytes of the HTML; each link found is passed to `out`.
    pub fn feed(&mut self, data: &[u8], out: &mut impl FnMut(Link)) {
        for &b in data {
            self.byte(b, out);
        }
    }

    /// Ends the HTML: a link still open ends with the text so far, as ClamAV
    /// closes it.
    pub fn finish(&mut self, out: &mut impl FnMut(Link)) {
        self.close_a(out);
        let tag_urls = self.tag_urls;
        *self = Self::new();
        self.tag_urls = tag_urls;
    }

    fn byte(&mut self, b: u8, out: &mut impl FnMut(Link)) {
        match self.state {
            State::Text => {
                if b == b'<' {
                    self.state = State::TagOpen;
                    self.name.clear();
                    self.closing = false;
                    self.attrs = Attrs::default();
                    self.text_wide = Wide::default();
                } else if self.open_a.is_some() {
                    let b = if b.is_ascii_whitespace() { b' ' } else { b };
                    self.text_wide.push(b, &mut self.text);
                }
            }
            State::TagOpen if b.is_ascii_whitespace() => {}
            State::TagOpen | State::TagName => {
                if b == b'>' {
                    self.end_tag(out);
                } else if b.is_ascii_whitespace() || (b == b'/' && !self.name.is_empty()) {
                    self.state = State::Attrs;
                } else {
                    if b == b'/' && self.name.is_empty() && !self.closing {
                        self.closing = true;
                    } else {
                        push_capped(&mut self.name, b.to_ascii_lowercase(), MAX_NAME + 1);
                    }
                    self.state = if self.name == b"!--" {
                        State::Comment(0)
                    } else {
                        State::TagName
                    };
                }
            }
            State::Script(n) => {
                const END: &[u8] = b"</script";
                let n = usize::from(n);
                self.state = if b.to_ascii_lowercase() == END[n] {
                    if n + 1 == END.len() {
                        self.name = b"script".to_vec();
                        self.closing = true;
                        self.attrs = Attrs::default();
                        State::TagName
                    } else {
                        State::Script(n as u8 + 1)
                    }
                } else {
                    State::Script(u8::from(b == b'<'))
                };
            }
            State::Comment(dashes) => {
                self.state = match b {
                    b'-' => State::Comment(dashes.saturating_add(1)),
                    b'>' if dashes >= 2 => State::Text,
                    _ => State::Comment(0),
                };
            }
            State::Attrs => {
                if b == b'>' {
                    self.end_tag(out);
                } else if !b.is_ascii_whitespace() && b != b'/' {
                    self.attr.clear();
                    self.attr.push(b.to_ascii_lowercase());
                    self.state = State::AttrName;
                }
            }
            State::AttrName => {
                if b == b'=' {
                    self.state = State::BeforeValue;
                } else if b == b'>' {
                    self.value.clear();
                    self.end_attr();
                    self.end_tag(out);
                } else if b.is_ascii_whitespace() {
                    self.state = State::AfterName;
                } else {
                    push_capped(&mut self.attr, b.to_ascii_lowercase(), MAX_NAME + 1);
                }
            }
            State::AfterName => {
                if b == b'=' {
                    self.state = State::BeforeValue;
                } else if !b.is_ascii_whitespace() {
                    self.value.clear();
                    self.end_attr();
                    self.state = State::Attrs;
                    self.byte(b, out);
                }
            }
            State::BeforeValue => {
                self.value.clear();
                self.value_wide = Wide::default();
                if b == b'"' || b == b'\'' {
                    self.state = State::Value(b);
                } else if b == b'>' {
                    self.end_attr();
                    self.end_tag(out);
                } else if !b.is_ascii_whitespace() {
                    self.state = State::Value(0);
                    self.byte(b, out);
                }
            }
            State::Value(quote) => {
                if (quote != 0 && b == quote) || (quote == 0 && b.is_ascii_whitespace()) {
                    self.end_attr();
                    self.state = State::Attrs;
                } else if quote == 0 && b == b'>' {
                    self.end_attr();
                    self.end_tag(out);
                } else if b == b'&' {
                    self.entity.clear();
                    self.state = State::Entity(quote);
                } else {
                    let b = if b.is_ascii_whitespace() { b' ' } else { b };
                    self.value_wide.push(b, &mut self.value);
                }
            }
            State::Entity(quote) => {
                let numeric = self.entity.first() == Some(&b'#');
                let takes = if self.entity.is_empty() {
                    b == b'#' || b.is_ascii_alphanumeric()
                } else if numeric {
                    b.is_ascii_hexdigit() || (self.entity.len() == 1 && (b == b'x' || b == b'X'))
                } else {
                    b.is_ascii_alphanumeric()
                };
                if takes && self.entity.len() < MAX_ENTITY {
                    self.entity.push(b);
                    return;
                }
                self.end_entity(b == b';');
                self.state = State::Value(quote);
                if b != b';' {
                    self.byte(b, out);
                }
            }
        }
    }

    /// Decodes the character reference just read into the value; `closed` when
    /// its `;` came.
    fn end_entity(&mut self, closed: bool) {
        let e = std::mem::take(&mut self.entity);
        let decoded: Option<Vec<u8>> = if let Some(num) = e.strip_prefix(b"#") {
            let (digits, radix) = match num.first() {
                Some(b'x' | b'X') => (&num[1..], 16),
                _ => (num, 10),
            };
            std::str::from_utf8(digits)
                .ok()
                .and_then(|d| u32::from_str_radix(d, radix).ok())
                .map(|v| vec![v as u8])
        } else if closed {
            match e.to_ascii_lowercase().as_slice() {
                b"amp" => Some(b"&".to_vec()),
                b"lt" => Some(b"<".to_vec()),
                b"gt" => Some(b">".to_vec()),
                b"quot" => Some(b"\"".to_vec()),
                b"apos" => Some(b"'".to_vec()),
                b"nbsp" => Some(b" ".to_vec()),
                _ => None,
            }
        } else {
            None
        };
        match decoded {
            Some(d) => {
                for b in d {
                    push_capped(&mut self.value, b, MAX_VALUE);
                }
            }
            None => {
                push_capped(&mut self.value, b'&', MAX_VALUE);
                for b in e {
                    push_capped(&mut self.value, b, MAX_VALUE);
                }
                if closed {
                    push_capped(&mut self.value, b';', MAX_VALUE);
                }
            }
        }
    }

    fn end_attr(&mut self) {
        let value = std::mem::take(&mut self.value);
        let slot = match self.attr.as_slice() {
            b"href" => &mut self.attrs.href,
            b"title" => &mut self.attrs.title,
            b"src" => &mut self.attrs.src,
            b"dynsrc" => &mut self.attrs.dynsrc,
            b"action" => &mut self.attrs.action,
            _ => return,
        };
        // The first of a repeated attribute counts.
        if slot.is_none() {
            *slot = Some(value);
        }
    }

    fn close_a(&mut self, out: &mut impl FnMut(Link)) {
        if let Some(real) = self.open_a.take() {
            out(Link {
                real,
                display: std::mem::take(&mut self.text),
                kind: LinkKind::Href,
            });
        }
    }

    fn end_tag(&mut self, out: &mut impl FnMut(Link)) {
        self.state = State::Text;
        let attrs = std::mem::take(&mut self.attrs);
        let non_empty = |v: Option<Vec<u8>>| v.filter(|v| !v.is_empty());
        match (self.closing, self.name.as_slice()) {
            (true, b"a") => self.close_a(out),
            (true, b"form") => self.form_action = None,
            (false, b"script") => self.state = State::Script(0),
            (false, b"a") => {
                let Some(href) = non_empty(attrs.href) else {
                    return;
                };
                self.tag_urls = true;
                self.close_a(out);
                if let Some(title) = attrs.title {
                    out(Link {
                        real: href.clone(),
                        display: title,
                        kind: LinkKind::Title,
                    });
                }
                if let Some(action) = &self.form_action {
                    out(Link {
                        real: action.clone(),
                        display: href.clone(),
                        kind: LinkKind::Other,
                    });
                }
                self.open_a = Some(href);
                self.text.clear();
            }
            (false, b"form") => {
                if let Some(action) = attrs.action {
                    self.form_action = Some(action);
                }
            }
            (false, b"img") => {
                if let Some(src) = non_empty(attrs.src) {
                    self.nested(src, LinkKind::Image, out);
                }
                if let Some(src) = non_empty(attrs.dynsrc) {
                    self.nested(src, LinkKind::Other, out);
                }
            }
            (false, b"iframe") => {
                if let Some(src) = non_empty(attrs.src) {
                    self.nested(src, LinkKind::Other, out);
                }
            }
            (false, b"area") => {
                if let Some(href) = non_empty(attrs.href) {
                    self.nested(href, LinkKind::Other, out);
                }
            }
            _ => {}
        }
    }

    /// A URL shown inside an open `<a>` or `<form>`.
    fn nested(&mut self, shown: Vec<u8>, kind: LinkKind, out: &mut impl FnMut(Link)) {
        self.tag_urls = true;
        if let Some(href) = &self.open_a {
            out(Link {
                real: href.clone(),
                display: shown.clone(),
                kind,
            });
        }
        if let Some(action) = &self.form_action {
            out(Link {
                real: action.clone(),
                display: shown,
                kind: LinkKind::Other,
            });
        }
    }
}

/// Longest text URL ClamAV reads.
const MAX_TEXT_URL: usize = 1023;

/// The URLs written in a part's text, found as ClamAV finds them when the part has
/// no tag with a URL: from `http:` or `ftp:` (any case; `https:` is not matched,
/// as in ClamAV) to the next blank, tab or line end, at most 1023 bytes, starting
/// more than 10 bytes before the end of the part. Carriage returns are not seen,
/// as ClamAV keeps a text part without them.
#[derive(Debug, Default)]
pub(crate) struct TextUrls {
    /// The last bytes (at most 7), until a URL can be told to start at the first.
    window: Vec<u8>,
    /// Offset of `window[0]`.
    window_at: u64,
    /// Offset of the next byte.
    pos: u64,
    /// The URL being read, and its offset.
    url: Option<(u64, Vec<u8>)>,
    /// The next byte is skipped (ClamAV resumes one byte after a URL).
    skip: bool,
}

impl TextUrls {
    /// Takes the next bytes; each URL found is passed to `out` with its offset.
    pub fn feed(&mut self, data: &[u8], out: &mut impl FnMut(u64, Vec<u8>)) {
        for &b in data.iter().filter(|&&b| b != b'\r') {
            let pos = self.pos;
            self.pos += 1;
            self.byte(b, pos, out);
        }
    }

    /// Bytes seen so far (carriage returns not counted).
    pub fn len(&self) -> u64 {
        self.pos
    }

    fn byte(&mut self, b: u8, pos: u64, out: &mut impl FnMut(u64, Vec<u8>)) {
        if let Some((start, url)) = self.url.as_mut() {
            if b == b' ' || b == b'\n' || b == b'\t' {
                let (start, url) = (*start, std::mem::take(url));
                self.url = None;
                out(start, url);
                return;
            }
            url.push(b);
            if url.len() >= MAX_TEXT_URL {
                let (start, url) = (*start, std::mem::take(url));
                self.url = None;
                self.skip = true;
                out(start, url);
            }
            return;
        }
        if std::mem::take(&mut self.skip) {
            return;
        }
        if self.window.is_empty() {
            self.window_at = pos;
        }
        self.window.push(b);
        if self.window.len() < 7 {
            return;
        }
        let w = &self.window;
        let low = [w[0] | 0x20, w[1] | 0x20, w[2] | 0x20, w[3] | 0x20];
        let starts = (low == *b"http" && (w[4] == b':' || (w[5] == b's' && w[6] == b':')))
            || low == *b"ftp:";
        if !starts {
            self.window.remove(0);
            self.window_at += 1;
            return;
        }
        let mut head = std::mem::take(&mut self.window);
        let tail = head.split_off(4);
        let at = self.window_at;
        self.url = Some((at, head));
        for (i, b) in tail.into_iter().enumerate() {
            self.byte(b, at + 4 + i as u64, out);
        }
    }

    /// Ends the part: a URL still being read ends there.
    pub fn finish(&mut self, out: &mut impl FnMut(u64, Vec<u8>)) {
        if let Some((start, url)) = self.url.take() {
            out(start, url);
        }
    }
}

/// Every link of an HTML text given in `chunks`, as (where it goes, what it shows)
/// pairs, the way the phishing check sees them: for tests, fuzzing and tools.
pub fn extract_links(chunks: &[&[u8]]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut links = Vec::new();
    let mut x = LinkExtractor::new();
    let mut out = |l: Link| links.push((l.real, l.display));
    for chunk in chunks {
        x.feed(chunk, &mut out);
    }
    x.finish(&mut out);
    links
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pairs(html: &str) -> Vec<(String, String)> {
        extract_links(&[html.as_bytes()])
            .into_iter()
            .map(|(r, d)| {
                (
                    String::from_utf8_lossy(&r).into_owned(),
                    String::from_utf8_lossy(&d).into_owned(),
                )
            })
            .collect()
    }

    fn p(r: &str, d: &str) -> (String, String) {
        (r.to_string(), d.to_string())
    }

    #[test]
    fn anchors_titles_images_and_forms() {
        assert_eq!(
            pairs(r#"<html><A HREF="http://x.example/">www.<b>pay</b>pal.com</a></html>"#),
            [p("http://x.example/", "www.paypal.com")]
        );
        assert_eq!(
            pairs("<a href=http://x.example/ title='www.ebay.com'>click\nhere</a>"),
            [
                p("http://x.example/", "www.ebay.com"),
                p("http://x.example/", "click here")
            ]
        );
        assert_eq!(
            pairs(r#"<a href="r1">one<a href="r2">two</a>"#),
            [p("r1", "one"), p("r2", "two")]
        );
        assert_eq!(
            pairs(r#"<a href="r"><img src="http://img.example/a.gif"></a>"#),
            [p("r", "http://img.example/a.gif"), p("r", "")]
        );
        assert_eq!(
            pairs(r#"<form action="act"><a href="h">t</a></form><a href="z">u</a>"#),
            [p("act", "h"), p("h", "t"), p("z", "u")]
        );
        // No href, an empty one, a comment: nothing; an unclosed link ends with
        // the text.
        assert_eq!(
            pairs(
                r#"<a name="x">a</a><a href="">b</a><!-- <a href="c">d</a> --><a href="e">f<br>g"#
            ),
            [p("e", "fg")]
        );
    }

    #[test]
    fn scripts_and_wide_full_stops() {
        assert_eq!(
            pairs("<script>a='<a href=\"x\">y</a>'</script><a href=\"r\u{3002}s\">w\u{3002}x\u{ff0e}y\u{fe52}z\u{3002}</a>"),
            [p("r.s", "w.x.y.z")]
        );
    }

    #[test]
    fn character_references_in_values_not_in_text() {
        assert_eq!(
            pairs(r#"<a href="http&#58;//x&#x2E;example/?a=1&amp;b=2&bogus;&x">w&#46;com</a>"#),
            [p("http://x.example/?a=1&b=2&bogus;&x", "w&#46;com")]
        );
    }

    #[test]
    fn state_is_bounded() {
        let long = "x".repeat(10 * MAX_VALUE);
        let html = format!(r#"<a href="{long}">{long}</a>"#);
        let l = extract_links(&[html.as_bytes()]);
        assert_eq!(l[0].0.len(), MAX_VALUE);
        assert_eq!(l[0].1.len(), MAX_VALUE);
    }

    fn text_urls(chunks: &[&[u8]]) -> Vec<(u64, String)> {
        let mut t = TextUrls::default();
        let mut v = Vec::new();
        let mut out = |at: u64, u: Vec<u8>| v.push((at, String::from_utf8_lossy(&u).into_owned()));
        for c in chunks {
            t.feed(c, &mut out);
        }
        t.finish(&mut out);
        v
    }

    #[test]
    fn text_urls_as_clamav_finds_them() {
        assert_eq!(
            text_urls(&[
                b"see HTTP://a.example/x\r\nor https://b.example/ or ftp://c.example/f\tend"
            ]),
            [
                (4, "HTTP://a.example/x".to_string()),
                (48, "ftp://c.example/f".to_string())
            ]
        );
        let long = format!("http://x/{}", "y".repeat(2000));
        let urls = text_urls(&[long.as_bytes()]);
        assert_eq!(urls[0].1.len(), MAX_TEXT_URL);
        let text = b"go http://a.example/ now, ftp://b.example/ too";
        let whole = text_urls(&[text]);
        for cut in 0..=text.len() {
            assert_eq!(text_urls(&[&text[..cut], &text[cut..]]), whole, "cut {cut}");
        }
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_links(
            cuts in proptest::collection::vec(0usize..400, 0..6),
            pick in 0usize..5,
        ) {
            let docs = [
                r#"<p>Hi</p><a href="http&#58;//evil.example.net/x" title="t">www.pay<b>pal</b>.com</a>"#,
                "<form action='http://a.example/'><A\nHREF=http://b.example/ >x &amp; y</A><img src=\"i\"></form>",
                "<!-- <a href=x>y</a> --><a href = 'q&#x2f;r' >link\r\ntext</a><a href=s>t",
                "<a href=\"u\"><iframe src=\"f\"></iframe>text</a><a href=v>w</a>",
                "<script>x='<a href=s>t</a>'</SCRIPT ><a href=\"h\u{3002}i\">w\u{3002}x\u{ff0e}y</a>",
            ];
            let html = docs[pick].as_bytes();
            let whole = extract_links(&[html]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (html.len() + 1)).collect();
            cuts.sort_unstable();
            let mut x = LinkExtractor::new();
            let mut got = Vec::new();
            let mut last = 0;
            for c in cuts.into_iter().chain([html.len()]) {
                x.feed(&html[last..c], &mut |l: Link| got.push((l.real, l.display)));
                last = c;
            }
            x.finish(&mut |l: Link| got.push((l.real, l.display)));
            prop_assert_eq!(got, whole);
        }

        #[test]
        fn random_html_splits_the_same(html in "[<>a-z =\"'&#;/!-]{0,120}", cut in 0usize..121) {
            let html = html.as_bytes();
            let cut = cut.min(html.len());
            let whole = extract_links(&[html]);
            let mut x = LinkExtractor::new();
            let mut got = Vec::new();
            x.feed(&html[..cut], &mut |l: Link| got.push((l.real, l.display)));
            x.feed(&html[cut..], &mut |l: Link| got.push((l.real, l.display)));
            x.finish(&mut |l: Link| got.push((l.real, l.display)));
            prop_assert_eq!(got, whole);
        }
    }
}
