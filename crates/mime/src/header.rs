//! Header fields of one MIME entity: splitting a header block into unfolded
//! fields, and parsing the MIME fields BODYSTRUCTURE reports
//! (Content-Type with its parameters, Content-Disposition, Content-Language
//! and the plain-text ones).
//!
//! Everything here is lenient: malformed input yields defaults or partial
//! results, never a panic, and every loop consumes input on each turn.

use crate::Part;

/// MIME parameters: (lower-case name, value) in order.
pub(crate) type Params = Vec<(String, String)>;

/// One header field: its name and its raw value (everything after the
/// colon, folds and all, without the final line end).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field<'a> {
    pub name: &'a [u8],
    pub raw: &'a [u8],
}

impl Field<'_> {
    /// Whether the field is called `name` (ASCII case-insensitive, as
    /// RFC 5322 §1.2.2 says of field names).
    pub fn is(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name.as_bytes())
    }

    /// The value unfolded (RFC 5322 §2.2.3: a line break followed by
    /// whitespace is removed, the whitespace stays).
    pub fn unfolded(&self) -> Vec<u8> {
        self.raw
            .iter()
            .copied()
            .filter(|&b| b != b'\r' && b != b'\n')
            .collect()
    }

    /// The unfolded value as text, trimmed of surrounding whitespace. Bytes
    /// that are not UTF-8 become U+FFFD: the types hold `String`s.
    pub fn text(&self) -> String {
        lossy(trim(&self.unfolded()))
    }
}

/// The fields of a header block, in order. Lines that are neither a field
/// nor a continuation are skipped; an empty line ends the block.
pub(crate) fn fields(block: &[u8]) -> impl Iterator<Item = Field<'_>> {
    let mut rest = block;
    std::iter::from_fn(move || loop {
        if rest.is_empty() {
            return None;
        }
        // The field's first line, then every continuation line after it.
        let mut end = line_end(rest, 0);
        let first = strip_eol(&rest[..end]);
        if first.is_empty() {
            rest = &[];
            return None;
        }
        while end < rest.len() && matches!(rest[end], b' ' | b'\t') {
            end = line_end(rest, end);
        }
        let whole = strip_eol(&rest[..end]);
        rest = &rest[end..];
        if matches!(first[0], b' ' | b'\t') {
            // A continuation with no field before it: skip.
            continue;
        }
        let Some(colon) = memchr::memchr(b':', first) else {
            continue;
        };
        let name = trim(&first[..colon]);
        if name.is_empty() {
            continue;
        }
        return Some(Field {
            name,
            raw: &whole[colon + 1..],
        });
    })
}

/// Index just past the LF ending the line that starts at `from` (or the end).
fn line_end(s: &[u8], from: usize) -> usize {
    match memchr::memchr(b'\n', &s[from..]) {
        Some(i) => from + i + 1,
        None => s.len(),
    }
}

fn strip_eol(mut s: &[u8]) -> &[u8] {
    if let [head @ .., b'\n'] = s {
        s = head;
    }
    if let [head @ .., b'\r'] = s {
        s = head;
    }
    s
}

fn is_wsp(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// `s` without leading and trailing whitespace.
pub(crate) fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| !is_wsp(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|&b| !is_wsp(b)).map_or(start, |i| i + 1);
    &s[start..end]
}

pub(crate) fn lossy(s: &[u8]) -> String {
    String::from_utf8_lossy(s).into_owned()
}

/// `s` with RFC 5322 comments replaced by a space, outside quoted strings.
/// Structured MIME fields allow comments anywhere (RFC 2045 §5.1 gives
/// `charset=us-ascii (Plain text)` as an example). An unclosed comment runs
/// to the end.
pub(crate) fn strip_comments(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut depth = 0usize;
    let mut quoted = false;
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        if depth > 0 {
            match b {
                b'\\' => i += 1,
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push(b' ');
                    }
                }
                _ => {}
            }
        } else if quoted {
            out.push(b);
            match b {
                b'\\' if i + 1 < s.len() => {
                    i += 1;
                    out.push(s[i]);
                }
                b'"' => quoted = false,
                _ => {}
            }
        } else {
            match b {
                b'(' => depth = 1,
                b'"' => {
                    quoted = true;
                    out.push(b);
                }
                _ => out.push(b),
            }
        }
        i += 1;
    }
    out
}

/// RFC 2045 §5.1 tspecials, plus whitespace and controls: what ends a token.
fn ends_token(b: u8) -> bool {
    b <= b' '
        || b == 0x7f
        || matches!(
            b,
            b'(' | b')'
                | b'<'
                | b'>'
                | b'@'
                | b','
                | b';'
                | b':'
                | b'\\'
                | b'"'
                | b'/'
                | b'['
                | b']'
                | b'?'
                | b'='
        )
}

/// A cursor over a comment-free structured value.
struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && is_wsp(self.s[self.i]) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn token(&mut self) -> &'a [u8] {
        let start = self.i;
        while self.i < self.s.len() && !ends_token(self.s[self.i]) {
            self.i += 1;
        }
        &self.s[start..self.i]
    }

    /// The content of a quoted string starting at the opening quote, with
    /// backslash escapes undone. An unclosed string runs to the end.
    fn quoted(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.i += 1;
        while self.i < self.s.len() {
            let b = self.s[self.i];
            self.i += 1;
            match b {
                b'"' => break,
                b'\\' if self.i < self.s.len() => {
                    out.push(self.s[self.i]);
                    self.i += 1;
                }
                b'\r' | b'\n' => {}
                _ => out.push(b),
            }
        }
        out
    }

    /// Moves past the next `;` outside a quoted string (or to the end).
    /// Returns false at the end.
    fn next_param(&mut self) -> bool {
        while let Some(b) = self.peek() {
            match b {
                b';' => {
                    self.i += 1;
                    return true;
                }
                b'"' => {
                    self.quoted();
                }
                _ => self.i += 1,
            }
        }
        false
    }

    /// `*(";" attribute "=" value)` (RFC 2045 §5.1). Names are lower-cased;
    /// quoted values are unquoted; an unquoted value runs to the next `;`
    /// (real mail has unquoted spaces in file names). RFC 2231 `name*` and
    /// `name*0*` parameters are kept as written. The first of two
    /// parameters with the same name wins. Parameters without `=` are
    /// dropped.
    fn params(&mut self) -> Params {
        let mut out = Params::new();
        while self.next_param() {
            self.skip_ws();
            let name_start = self.i;
            while self.i < self.s.len() && !matches!(self.s[self.i], b'=' | b';' | b'"') {
                self.i += 1;
            }
            let name = trim(&self.s[name_start..self.i]);
            if self.peek() != Some(b'=') || name.is_empty() {
                continue;
            }
            self.i += 1;
            self.skip_ws();
            let value = if self.peek() == Some(b'"') {
                self.quoted()
            } else {
                let start = self.i;
                while self.i < self.s.len() && self.s[self.i] != b';' {
                    self.i += 1;
                }
                trim(&self.s[start..self.i]).to_vec()
            };
            let name = lossy(name).to_ascii_lowercase();
            if !out.iter().any(|(n, _)| *n == name) {
                out.push((name, lossy(&value)));
            }
        }
        out
    }
}

/// A parsed `Content-Type:` value: type and subtype lower-case, parameters.
/// `None` when the value has no `type/subtype`: RFC 2045 §5.2 says such a
/// field is treated as absent.
pub(crate) fn content_type(raw: &[u8]) -> Option<(String, String, Params)> {
    let value = strip_comments(raw);
    let mut c = Cursor { s: &value, i: 0 };
    c.skip_ws();
    let ty = c.token();
    c.skip_ws();
    if c.peek() != Some(b'/') {
        return None;
    }
    c.i += 1;
    c.skip_ws();
    let sub = c.token();
    if ty.is_empty() || sub.is_empty() {
        return None;
    }
    let (ty, sub) = (
        lossy(ty).to_ascii_lowercase(),
        lossy(sub).to_ascii_lowercase(),
    );
    Some((ty, sub, c.params()))
}

/// A parsed `Content-Disposition:` value (RFC 2183): the disposition type
/// as written and its parameters. `None` when there is no type.
pub(crate) fn disposition(raw: &[u8]) -> Option<(String, Params)> {
    let value = strip_comments(raw);
    let mut c = Cursor { s: &value, i: 0 };
    c.skip_ws();
    let ty = c.token();
    if ty.is_empty() {
        return None;
    }
    let ty = lossy(ty);
    Some((ty, c.params()))
}

/// `Content-Language:` (RFC 3282): the language tags, comments dropped.
pub(crate) fn languages(raw: &[u8]) -> Vec<String> {
    strip_comments(raw)
        .split(|&b| b == b',')
        .map(trim)
        .filter(|t| !t.is_empty())
        .map(lossy)
        .collect()
}

/// `Content-Transfer-Encoding:` (RFC 2045 §6.1): the mechanism as written,
/// comments dropped. `None` when empty.
pub(crate) fn transfer_encoding(raw: &[u8]) -> Option<String> {
    let value = strip_comments(raw);
    let word = trim(&value)
        .split(|&b| is_wsp(b))
        .next()
        .unwrap_or_default();
    (!word.is_empty()).then(|| lossy(word))
}

/// Fills `part`'s MIME fields from its header block. `digest_child` makes
/// message/rfc822 the default type (RFC 2046 §5.1.5); otherwise the default
/// is text/plain (RFC 2045 §5.2).
pub(crate) fn apply_mime_fields(part: &mut Part, block: &[u8], digest_child: bool) {
    let mut content_type_seen = false;
    let mut encoding = None;
    for f in fields(block) {
        if f.is("Content-Type") {
            if !content_type_seen {
                content_type_seen = true;
                if let Some((ty, sub, params)) = content_type(&f.unfolded()) {
                    part.media_type = ty;
                    part.media_subtype = sub;
                    part.params = params;
                }
            }
        } else if f.is("Content-Transfer-Encoding") {
            if encoding.is_none() {
                encoding = Some(transfer_encoding(&f.unfolded()));
            }
        } else if f.is("Content-ID") {
            part.id.get_or_insert_with(|| f.text());
        } else if f.is("Content-Description") {
            part.description.get_or_insert_with(|| f.text());
        } else if f.is("Content-MD5") {
            part.md5.get_or_insert_with(|| f.text());
        } else if f.is("Content-Disposition") {
            if part.disposition.is_none() {
                part.disposition = disposition(&f.unfolded());
            }
        } else if f.is("Content-Language") {
            if part.language.is_empty() {
                part.language = languages(&f.unfolded());
            }
        } else if f.is("Content-Location") {
            part.location.get_or_insert_with(|| f.text());
        }
    }
    if part.media_type.is_empty() {
        if digest_child {
            part.media_type = "message".into();
            part.media_subtype = "rfc822".into();
        } else {
            part.media_type = "text".into();
            part.media_subtype = "plain".into();
        }
    }
    // RFC 2046 §4.1.2: text without a charset parameter is US-ASCII. Dovecot
    // reports that default in BODYSTRUCTURE too, so clients see it the same.
    if part.media_type == "text" && !part.params.iter().any(|(n, _)| n == "charset") {
        part.params.push(("charset".into(), "us-ascii".into()));
    }
    part.encoding = encoding.flatten().unwrap_or_else(|| "7BIT".into());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(block: &[u8]) -> Vec<(String, String)> {
        fields(block)
            .map(|f| (lossy(f.name), lossy(&f.unfolded())))
            .collect()
    }

    #[test]
    fn fields_unfold_and_skip_garbage() {
        let block = b" stray continuation\r\nSubject: a\r\n  b\r\nno colon here\r\n  cont\r\nX-A : 1\r\n\r\nBody: no\r\n";
        assert_eq!(
            names(block),
            vec![
                ("Subject".into(), " a  b".into()),
                ("X-A".into(), " 1".into())
            ]
        );
    }

    #[test]
    fn fields_bare_lf_and_no_final_newline() {
        assert_eq!(
            names(b"A: 1\nB: 2\n\tmore"),
            vec![("A".into(), " 1".into()), ("B".into(), " 2\tmore".into())]
        );
    }

    #[test]
    fn content_type_params() {
        let (t, s, p) = content_type(
            b" Text/HTML ; Charset=\"utf-8\" (comment; x=y) ;name*0*=us-ascii''a%20b; format = flowed ;junk; q=\"a\\\"b\" tail",
        )
        .unwrap();
        assert_eq!((t.as_str(), s.as_str()), ("text", "html"));
        assert_eq!(
            p,
            vec![
                ("charset".into(), "utf-8".into()),
                ("name*0*".into(), "us-ascii''a%20b".into()),
                ("format".into(), "flowed".into()),
                ("q".into(), "a\"b".into()),
            ]
        );
    }

    #[test]
    fn content_type_rfc2045_example_and_garbage() {
        let (_, _, p) = content_type(b"text/plain; charset=us-ascii (Plain text)").unwrap();
        assert_eq!(p, vec![("charset".into(), "us-ascii".into())]);
        assert!(content_type(b"text").is_none());
        assert!(content_type(b"/plain").is_none());
        assert!(content_type(b"").is_none());
        let (_, _, p) = content_type(b"a/b; name=\"unclosed").unwrap();
        assert_eq!(p, vec![("name".into(), "unclosed".into())]);
        let (_, _, p) = content_type(b"a/b; name=my file.pdf; x=1").unwrap();
        assert_eq!(p[0], ("name".into(), "my file.pdf".into()));
    }

    #[test]
    fn disposition_language_encoding() {
        assert_eq!(
            disposition(b"attachment; filename=\"a;b.txt\""),
            Some((
                "attachment".into(),
                vec![("filename".into(), "a;b.txt".into())]
            ))
        );
        assert_eq!(disposition(b" ; x=1"), None);
        assert_eq!(
            languages(b"en-US, (old) fr ,,"),
            vec!["en-US".to_string(), "fr".into()]
        );
        assert_eq!(transfer_encoding(b" Base64 (yes)"), Some("Base64".into()));
        assert_eq!(transfer_encoding(b"  "), None);
    }

    #[test]
    fn mime_fields_defaults_and_first_wins() {
        let mut p = Part::default();
        apply_mime_fields(
            &mut p,
            b"Content-ID: <a@b>\r\nContent-ID: <c@d>\r\n\r\n",
            false,
        );
        assert_eq!(
            (p.media_type.as_str(), p.media_subtype.as_str()),
            ("text", "plain")
        );
        assert_eq!(p.params, vec![("charset".into(), "us-ascii".into())]);
        assert_eq!(p.encoding, "7BIT");
        assert_eq!(p.id.as_deref(), Some("<a@b>"));

        let mut p = Part::default();
        apply_mime_fields(&mut p, b"Content-Type: bogus\r\n", true);
        assert_eq!(
            (p.media_type.as_str(), p.media_subtype.as_str()),
            ("message", "rfc822")
        );
        assert!(p.params.is_empty());

        let mut p = Part::default();
        apply_mime_fields(
            &mut p,
            b"content-type: image/png; name=x.png\r\ncontent-type: text/plain\r\nContent-Transfer-Encoding: base64\r\nContent-Language: de\r\nContent-Location: http://x/\r\n  y\r\nContent-Description: A\r\n picture\r\nContent-MD5: abc=\r\n",
            false,
        );
        assert_eq!(
            (p.media_type.as_str(), p.media_subtype.as_str()),
            ("image", "png")
        );
        assert_eq!(p.params, vec![("name".into(), "x.png".into())]);
        assert_eq!(p.encoding, "base64");
        assert_eq!(p.language, vec!["de".to_string()]);
        assert_eq!(p.location.as_deref(), Some("http://x/  y"));
        assert_eq!(p.description.as_deref(), Some("A picture"));
        assert_eq!(p.md5.as_deref(), Some("abc="));
    }
}
