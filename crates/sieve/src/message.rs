//! The message as Sieve sees it: header fields in order, unfolded and with
//! MIME encoded words decoded (RFC 5228 §2.7.2), and the body for `body`.

use mail_parser::parsers::MessageStream;
use mail_parser::{HeaderValue, MessageParser, PartType};

/// A message as Sieve sees it, parsed from raw RFC 5322 bytes (the header
/// block, plus as much of the body as the caller kept).
#[derive(Debug, Clone)]
pub struct Message {
    raw: Vec<u8>,
    size: u64,
    fields: Vec<Field>,
    body_start: usize,
}

#[derive(Debug, Clone)]
struct Field {
    name: String,
    /// Unfolded, as written.
    raw: String,
    /// Unfolded, encoded words decoded.
    decoded: String,
}

/// One leaf of the MIME tree as `body :content` sees it (RFC 5173 §5.2).
pub(crate) struct BodyPart {
    /// `type/subtype`, lowercased.
    pub content_type: String,
    /// The decoded content, as text.
    pub text: String,
}

impl Message {
    /// Parses `raw`: header fields up to the first empty line, then the body.
    pub fn parse(raw: &[u8]) -> Message {
        let mut fields = Vec::new();
        let mut at = 0;
        // An mbox "From " line is not a header field.
        if raw.starts_with(b"From ") {
            at = line_end(raw, 0);
        }
        let body_start;
        loop {
            if at >= raw.len() {
                body_start = raw.len();
                break;
            }
            let end = line_end(raw, at);
            let line = trim_eol(&raw[at..end]);
            if line.is_empty() {
                body_start = end;
                break;
            }
            // Gather continuation lines (RFC 5322 §2.2.3).
            let mut field_end = end;
            while field_end < raw.len() && matches!(raw[field_end], b' ' | b'\t') {
                field_end = line_end(raw, field_end);
            }
            if let Some(colon) = line.iter().position(|b| *b == b':') {
                let name = String::from_utf8_lossy(&line[..colon]).trim().to_string();
                if is_field_name(&name) {
                    let value = &raw[at + colon + 1..field_end];
                    fields.push(Field {
                        name,
                        raw: unfold(value),
                        decoded: decode(value),
                    });
                }
            }
            at = field_end;
        }
        Message {
            size: raw.len() as u64,
            raw: raw.to_vec(),
            fields,
            body_start,
        }
    }

    /// The real size when `raw` was cut short (the `size` test uses it).
    pub fn with_size(mut self, size: u64) -> Message {
        self.size = size;
        self
    }

    /// The message size in octets (RFC 5228 §5.9).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The decoded values of the fields named `name`, in order.
    pub(crate) fn values(&self, name: &str) -> Vec<&str> {
        self.fields
            .iter()
            .filter(|f| f.name.eq_ignore_ascii_case(name))
            .map(|f| f.decoded.as_str())
            .collect()
    }

    /// The raw (unfolded, undecoded) values of the fields named `name`.
    pub(crate) fn raw_values(&self, name: &str) -> Vec<&str> {
        self.fields
            .iter()
            .filter(|f| f.name.eq_ignore_ascii_case(name))
            .map(|f| f.raw.as_str())
            .collect()
    }

    /// Whether a field named `name` is present.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.fields
            .iter()
            .any(|f| f.name.eq_ignore_ascii_case(name))
    }

    /// The names of all fields, in order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|f| f.name.as_str())
    }

    /// The body undecoded (`body :raw`, RFC 5173 §5.1).
    pub(crate) fn raw_body(&self) -> String {
        String::from_utf8_lossy(&self.raw[self.body_start..]).into_owned()
    }

    /// The leaf parts with their decoded content (RFC 5173 §5.2). HTML is
    /// turned into text for `:text`.
    pub(crate) fn body_parts(&self) -> Vec<BodyPart> {
        let Some(msg) = MessageParser::default().parse(&self.raw) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for part in &msg.parts {
            let content_type = part
                .content_type()
                .map(|ct| match ct.subtype() {
                    Some(st) => format!("{}/{}", ct.ctype(), st),
                    None => ct.ctype().to_string(),
                })
                .unwrap_or_else(|| "text/plain".into())
                .to_ascii_lowercase();
            let text = match &part.body {
                PartType::Text(t) | PartType::Html(t) => t.to_string(),
                PartType::Binary(b) | PartType::InlineBinary(b) => {
                    String::from_utf8_lossy(b).into_owned()
                }
                PartType::Message(_) | PartType::Multipart(_) => continue,
            };
            out.push(BodyPart { content_type, text });
        }
        out
    }
}

use mail_parser::MimeHeaders;

/// RFC 5322 §3.6.8: printable ASCII except the colon.
pub(crate) fn is_field_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (33..=126).contains(&b) && b != b':')
}

fn line_end(raw: &[u8], from: usize) -> usize {
    match raw[from..].iter().position(|b| *b == b'\n') {
        Some(i) => from + i + 1,
        None => raw.len(),
    }
}

fn trim_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Unfolds a field value: line breaks removed, ends trimmed.
fn unfold(value: &[u8]) -> String {
    let s = String::from_utf8_lossy(value);
    let s: String = s.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    s.trim_matches(|c| c == ' ' || c == '\t').to_string()
}

/// Unfolds and decodes encoded words (RFC 2047) in a field value.
fn decode(value: &[u8]) -> String {
    let mut buf = value.to_vec();
    if !buf.ends_with(b"\n") {
        buf.extend_from_slice(b"\r\n");
    }
    match MessageStream::new(&buf).parse_unstructured() {
        HeaderValue::Text(t) => t.trim().to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let m = Message::parse(
            b"Subject: =?utf-8?q?caf=C3=A9?= time\r\nX-A: one\r\n  two\r\nx-a: three\r\n\r\nbody\r\n",
        );
        assert_eq!(m.values("subject"), ["caf\u{e9} time"]);
        assert_eq!(m.values("X-A"), ["one two", "three"]);
        assert_eq!(m.raw_values("x-a")[0], "one  two");
        assert!(m.has("SUBJECT"));
        assert!(!m.has("to"));
        assert_eq!(m.raw_body(), "body\r\n");
        assert_eq!(m.size(), 74);
        assert_eq!(m.with_size(1000).size(), 1000);
    }

    #[test]
    fn headers_only() {
        let m = Message::parse(b"To: a@b.c\n");
        assert_eq!(m.values("to"), ["a@b.c"]);
        assert_eq!(m.raw_body(), "");
    }
}
