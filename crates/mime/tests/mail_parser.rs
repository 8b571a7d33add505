//! Cross-check against mail-parser: part offsets must agree where both
//! parsers mean the same thing.

use mail_parser::{Message, MessageParser, PartType};
use mime_tree::{MessageStructure, Part, PartKind, StructureBuilder};

fn ours(raw: &[u8]) -> MessageStructure {
    let mut b = StructureBuilder::new();
    b.feed(raw);
    b.finish()
}

/// Differences as (path, ours, theirs) with offsets (header, body, end).
fn compare(path: &str, p: &Part, m: &Message, id: usize, diffs: &mut Vec<String>) {
    let Some(q) = m.parts.get(id) else {
        diffs.push(format!("{path}: missing in mail-parser"));
        return;
    };
    let a = (p.header_offset, p.body_offset, p.body_offset + p.body_len);
    let b = (
        u64::from(q.offset_header),
        u64::from(q.offset_body),
        u64::from(q.offset_end),
    );
    if a != b {
        diffs.push(format!("{path}: ours {a:?} mail-parser {b:?}"));
    }
    match (&p.kind, &q.body) {
        (PartKind::Multipart(children), PartType::Multipart(ids)) => {
            if children.len() != ids.len() {
                diffs.push(format!(
                    "{path}: {} children, mail-parser {}",
                    children.len(),
                    ids.len()
                ));
            }
            for (n, (c, &cid)) in children.iter().zip(ids).enumerate() {
                compare(&format!("{path}.{}", n + 1), c, m, cid as usize, diffs);
            }
        }
        (PartKind::Message(inner), PartType::Message(mm)) => {
            compare(&format!("{path}.msg"), &inner.root, mm, 0, diffs)
        }
        (
            PartKind::Leaf,
            PartType::Text(_) | PartType::Html(_) | PartType::Binary(_) | PartType::InlineBinary(_),
        ) => {}
        (k, _) => diffs.push(format!("{path}: kinds differ, ours {k:?}")),
    }
}

fn diffs(raw: &[u8]) -> Vec<String> {
    let theirs = MessageParser::default()
        .parse(raw)
        .expect("mail-parser parses it");
    let mut d = Vec::new();
    compare("root", &ours(raw).root, &theirs, 0, &mut d);
    d
}

/// Messages on which both parsers agree exactly.
const AGREE: &[&[u8]] = &[
    b"Subject: x\r\n\r\nhello\r\n",
    b"Subject: x\r\n\r\nno final line end",
    b"From: a@b\r\nContent-Type: multipart/alternative; boundary=\"XX\"\r\n\r\npreamble\r\n--XX\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nplain body\r\n--XX\r\nContent-Type: text/html\r\n\r\n<p>html</p>\r\n\r\n--XX--\r\nepilogue\r\n",
    b"Content-Type: multipart/mixed; boundary=\"=_b1\"\r\n\r\n--=_b1\r\n\r\nimplicit text\r\n--=_b1\r\nContent-Type: application/pdf; name=\"r.pdf\"\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename=\"r.pdf\"\r\n\r\nJVBERi0xLjQK\r\nJVBERi0xLjQK\r\n--=_b1--\r\n",
    b"Content-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\nContent-Type: multipart/alternative; boundary=i\r\n\r\n--i\r\n\r\none\r\n--i\r\nContent-Type: text/html\r\n\r\ntwo\r\n--i--\r\n\r\n--o\r\nContent-Type: image/png\r\nContent-Transfer-Encoding: base64\r\n\r\nUE5H\r\n--o--\r\n",
    b"From: outer@x\r\nSubject: fwd\r\nContent-Type: multipart/mixed; boundary=out\r\n\r\n--out\r\n\r\nsee attached\r\n--out\r\nContent-Type: message/rfc822\r\nContent-Disposition: attachment\r\n\r\nFrom: Inner <inner@y>\r\nSubject: original\r\nContent-Type: multipart/alternative; boundary=in\r\n\r\n--in\r\n\r\ninner text\r\n--in\r\nContent-Type: text/html\r\n\r\n<b>inner</b>\r\n--in--\r\n\r\n--out--\r\n",
    b"Content-Type: multipart/digest; boundary=d\r\n\r\n--d\r\n\r\nSubject: one\r\n\r\nfirst\r\n--d\r\n\r\nSubject: two\r\n\r\nsecond\r\n--d--\r\n",
    b"Subject: lf\nContent-Type: multipart/mixed; boundary=b\n\npre\n--b\nContent-Type: text/plain\n\nline one\nline two\n\n--b\n\nsecond\n--b--\n",
    b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\none\r\n--b\r\n\r\ntwo\r\n--b--",
    // Missing close delimiter: the last child runs to the end.
    b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\none\r\n--b\r\n\r\ntwo\r\n",
    // Whitespace or text after the boundary on a boundary line.
    b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b  \r\n\r\none\r\n--b \t\r\n\r\ntwo\r\n--b--  \r\n",
    // A header with no blank line: all header, no body.
    b"Subject: x\r\nFrom: y@z\r\n",
];

#[test]
fn offsets_agree() {
    for raw in AGREE {
        let d = diffs(raw);
        assert!(d.is_empty(), "{}\n{d:#?}", String::from_utf8_lossy(raw));
    }
}

/// Messages where the two differ on purpose. Each entry: the message, why,
/// and mail-parser's differences from ours as `compare` reports them.
const DIFFER: &[(&[u8], &str, &[&str])] = &[
    (
        b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\n--b--\r\n",
        "a boundary line right after a child's empty line: the CRLF before a boundary \
         line is the boundary's (RFC 2046), so the child has an empty header and no \
         body, as in Dovecot; mail-parser keeps the CRLF as the child's header",
        &["root.1: ours (50, 50, 50) mail-parser (50, 52, 52)"],
    ),
    (
        b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\none\r\n--b garbage\r\n\r\ntwo\r\n--b--\r\n",
        "text after the boundary on a boundary line: both take the line as a boundary \
         line (RFC 2046 only compares its start), but mail-parser starts the next \
         header inside the line; we start it after the line, as the rest of a \
         boundary line belongs to no part",
        &["root.2: ours (70, 72, 75) mail-parser (61, 72, 75)"],
    ),
    (
        b"Content-Type: multipart/mixed; boundary=abcdef\r\n\r\n--abcdef\r\nContent-Type: multipart/alternative; boundary=abc\r\n\r\n--abc\r\n\r\none\r\n--abc\r\n\r\ntwo\r\n--abcdef\r\n\r\nPNG\r\n--abcdef--\r\n",
        "the inner boundary is a prefix of the outer one: mail-parser takes the outer \
         boundary line for the inner boundary; we take the longest boundary that \
         matches, as Dovecot does, so the outer multipart keeps its second child",
        &["root: 2 children, mail-parser 1", "root.1: ours (60, 113, 139) mail-parser (60, 113, 170)", "root.1: 2 children, mail-parser 3"],
    ),
    (
        b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/html\r\n--b\r\n\r\nx\r\n--b--\r\n",
        "a child header with no blank line before the next boundary line: we end the \
         header (and the child) there, as Dovecot does; mail-parser reads the boundary \
         line as a header line and merges the two children",
        &["root: 2 children, mail-parser 1", "root.1: ours (50, 73, 73) mail-parser (50, 82, 83)"],
    ),
    (
        b"Content-Type: multipart/mixed; boundary=b\r\n\r\njust a preamble\r\n",
        "a multipart with no boundary line: we keep it a multipart with no children \
         (BODYSTRUCTURE needs the multipart form); mail-parser makes it a text leaf",
        &["root: kinds differ, ours Multipart([])"],
    ),
    (
        b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: message/rfc822\r\nContent-Transfer-Encoding: base64\r\n\r\nU3ViamVjdDogeA0KDQp5\r\n--b--\r\n",
        "an encoded message/rfc822: mail-parser decodes and parses it, but offsets into \
         decoded bytes are useless for section fetches, so we keep it a leaf",
        &["root.1: kinds differ, ours Leaf"],
    ),
];

#[test]
fn known_differences() {
    for (raw, why, expected) in DIFFER {
        assert_eq!(diffs(raw), *expected, "{why}");
    }
}
