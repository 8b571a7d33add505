//! Hand-written messages, with every offset checked by slicing the input.

use super::*;
use crate::{Address, MISSING_DOMAIN};

/// Parses `raw` whole, and also one byte at a time and in pieces of 7,
/// which must give the same structure.
fn parse(raw: &[u8]) -> MessageStructure {
    let mut b = StructureBuilder::new();
    b.feed(raw);
    let whole = b.finish();
    let mut b = StructureBuilder::new();
    for byte in raw.chunks(1) {
        b.feed(byte);
    }
    assert_eq!(b.finish(), whole, "one byte at a time");
    let mut b = StructureBuilder::new();
    for piece in raw.chunks(7) {
        b.feed(piece);
    }
    assert_eq!(b.finish(), whole, "pieces of 7");
    check_offsets(raw, &whole.root);
    whole
}

/// Invariants every part must keep.
fn check_offsets(raw: &[u8], p: &Part) {
    assert_eq!(p.body_offset, p.header_offset + p.header_len);
    assert!(p.body_offset + p.body_len <= raw.len() as u64);
    let body = body(raw, p);
    let lfs = body.iter().filter(|&&b| b == b'\n').count() as u64;
    assert_eq!(
        p.body_lines,
        lfs,
        "lines of {:?}",
        String::from_utf8_lossy(body)
    );
    match &p.kind {
        PartKind::Leaf => {}
        PartKind::Multipart(children) => {
            for c in children {
                assert!(c.header_offset >= p.body_offset);
                assert!(c.body_offset + c.body_len <= p.body_offset + p.body_len);
                check_offsets(raw, c);
            }
        }
        PartKind::Message(m) => {
            assert_eq!(m.root.header_offset, p.body_offset);
            // The enclosed message fills the part's body, but for the line
            // end a boundary line took from its header (see `on_boundary`).
            let inner = m.root.header_len + m.root.body_len;
            assert!(inner <= p.body_len && p.body_len - inner <= 2);
            check_offsets(raw, &m.root);
        }
    }
}

fn body<'a>(raw: &'a [u8], p: &Part) -> &'a [u8] {
    &raw[p.body_offset as usize..][..p.body_len as usize]
}

fn header<'a>(raw: &'a [u8], p: &Part) -> &'a [u8] {
    &raw[p.header_offset as usize..][..p.header_len as usize]
}

fn children(p: &Part) -> &[Part] {
    match &p.kind {
        PartKind::Multipart(c) => c,
        other => panic!("not a multipart: {other:?}"),
    }
}

fn inner(p: &Part) -> &MessageStructure {
    match &p.kind {
        PartKind::Message(m) => m,
        other => panic!("not a message: {other:?}"),
    }
}

fn ty(p: &Part) -> (&str, &str) {
    (&p.media_type, &p.media_subtype)
}

fn param<'a>(p: &'a Part, name: &str) -> Option<&'a str> {
    p.params
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn simple_text() {
    let raw = b"From: Ann <ann@example.com>\r\nSubject: hi\r\nDate: Tue, 2 Jan 2024 10:00:00 +0100\r\nMessage-ID: <1@example.com>\r\n\r\nHello\r\nWorld\r\n";
    let m = parse(raw);
    let r = &m.root;
    assert_eq!(r.header_offset, 0);
    assert!(header(raw, r).ends_with(b">\r\n\r\n"));
    assert_eq!(body(raw, r), b"Hello\r\nWorld\r\n");
    assert_eq!(r.body_lines, 2);
    assert_eq!(ty(r), ("text", "plain"));
    assert_eq!(r.params, vec![("charset".into(), "us-ascii".into())]);
    assert_eq!(r.encoding, "7BIT");
    assert_eq!(r.kind, PartKind::Leaf);
    assert_eq!(m.envelope.subject.as_deref(), Some("hi"));
    assert_eq!(m.envelope.message_id.as_deref(), Some("<1@example.com>"));
    assert_eq!(m.envelope.from[0].host.as_deref(), Some("example.com"));
    assert_eq!(m.envelope.sender, m.envelope.from);
}

#[test]
fn last_line_without_line_end_is_not_counted() {
    // Dovecot 2.3 reports this body as 3 bytes, 1 line.
    let raw = b"Subject: x\r\n\r\na\r\nb";
    let r = parse(raw).root;
    assert_eq!(body(raw, &r), b"a\r\nb");
    assert_eq!(r.body_lines, 1);
}

const ALTERNATIVE: &[u8] = b"From: a@b\r\nContent-Type: multipart/alternative; boundary=\"XX\"\r\n\r\npreamble\r\n--XX\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nplain body\r\n--XX\r\nContent-Type: text/html\r\n\r\n<p>html</p>\r\n\r\n--XX--\r\nepilogue\r\n";

#[test]
fn multipart_alternative() {
    let raw = ALTERNATIVE;
    let r = parse(raw).root;
    assert_eq!(ty(&r), ("multipart", "alternative"));
    assert_eq!(param(&r, "boundary"), Some("XX"));
    assert!(body(raw, &r).starts_with(b"preamble\r\n--XX\r\n"));
    assert!(body(raw, &r).ends_with(b"--XX--\r\nepilogue\r\n"));
    let c = children(&r);
    assert_eq!(c.len(), 2);
    assert_eq!(
        header(raw, &c[0]),
        b"Content-Type: text/plain; charset=utf-8\r\n\r\n"
    );
    assert_eq!(body(raw, &c[0]), b"plain body");
    assert_eq!(c[0].body_lines, 0);
    assert_eq!(param(&c[0], "charset"), Some("utf-8"));
    assert_eq!(ty(&c[1]), ("text", "html"));
    // The body's own empty last line stays; only the CRLF before the
    // boundary line goes.
    assert_eq!(body(raw, &c[1]), b"<p>html</p>\r\n");
    assert_eq!(c[1].body_lines, 1);
    assert_eq!(param(&c[1], "charset"), Some("us-ascii"));
}

#[test]
fn multipart_mixed_with_attachment() {
    let raw = b"Content-Type: multipart/mixed;\r\n boundary=\"=_b1\"\r\nMIME-Version: 1.0\r\n\r\n--=_b1\r\n\r\nimplicit text\r\n--=_b1\r\nContent-Type: application/pdf; name=\"r.pdf\"\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment;\r\n filename=\"r.pdf\"; size=12\r\nContent-ID: <att1@x>\r\nContent-Description: the report\r\nContent-MD5: Q2hlY2sgSW50ZWdyaXR5IQ==\r\nContent-Language: en, de\r\nContent-Location: r.pdf\r\n\r\nJVBERi0xLjQK\r\nJVBERi0xLjQK\r\n--=_b1--\r\n";
    let r = parse(raw).root;
    let c = children(&r);
    assert_eq!(c.len(), 2);
    assert_eq!(header(raw, &c[0]), b"\r\n");
    assert_eq!(ty(&c[0]), ("text", "plain"));
    assert_eq!(body(raw, &c[0]), b"implicit text");
    let a = &c[1];
    assert_eq!(ty(a), ("application", "pdf"));
    assert_eq!(a.params, vec![("name".into(), "r.pdf".into())]);
    assert_eq!(a.encoding, "base64");
    assert_eq!(
        a.disposition,
        Some((
            "attachment".into(),
            vec![
                ("filename".into(), "r.pdf".into()),
                ("size".into(), "12".into())
            ]
        ))
    );
    assert_eq!(a.id.as_deref(), Some("<att1@x>"));
    assert_eq!(a.description.as_deref(), Some("the report"));
    assert_eq!(a.md5.as_deref(), Some("Q2hlY2sgSW50ZWdyaXR5IQ=="));
    assert_eq!(a.language, vec!["en".to_string(), "de".into()]);
    assert_eq!(a.location.as_deref(), Some("r.pdf"));
    assert_eq!(body(raw, a), b"JVBERi0xLjQK\r\nJVBERi0xLjQK");
    assert_eq!(a.body_lines, 1);
}

#[test]
fn nested_multipart_with_prefix_boundary() {
    // The inner boundary "abc" is a prefix of the outer "abcdef", and the
    // inner multipart has no close delimiter: the outer boundary line ends
    // it.
    let raw = b"Content-Type: multipart/mixed; boundary=abcdef\r\n\r\n--abcdef\r\nContent-Type: multipart/alternative; boundary=abc\r\n\r\n--abc\r\n\r\none\r\n--abc\r\nContent-Type: text/html\r\n\r\ntwo\r\n--abcdef\r\nContent-Type: image/png\r\n\r\nPNG\r\n--abcdef--";
    let r = parse(raw).root;
    let c = children(&r);
    assert_eq!(c.len(), 2);
    assert_eq!(ty(&c[0]), ("multipart", "alternative"));
    assert_eq!(
        body(raw, &c[0]),
        b"--abc\r\n\r\none\r\n--abc\r\nContent-Type: text/html\r\n\r\ntwo"
    );
    let alt = children(&c[0]);
    assert_eq!(alt.len(), 2);
    assert_eq!(body(raw, &alt[0]), b"one");
    assert_eq!(body(raw, &alt[1]), b"two");
    assert_eq!(ty(&c[1]), ("image", "png"));
    assert_eq!(body(raw, &c[1]), b"PNG");
}

#[test]
fn inner_close_then_epilogue_then_outer() {
    let raw = b"Content-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\nContent-Type: multipart/mixed; boundary=i\r\n\r\n--i\r\n\r\nx\r\n--i--\r\ninner epilogue\r\n--i\r\nnot a part\r\n--o\r\n\r\ny\r\n--o--\r\n";
    let r = parse(raw).root;
    let c = children(&r);
    assert_eq!(c.len(), 2);
    assert_eq!(children(&c[0]).len(), 1);
    assert!(body(raw, &c[0]).ends_with(b"--i--\r\ninner epilogue\r\n--i\r\nnot a part"));
    assert_eq!(body(raw, &c[1]), b"y");
}

const RFC822: &[u8] = b"From: outer@x\r\nSubject: fwd\r\nContent-Type: multipart/mixed; boundary=out\r\n\r\n--out\r\n\r\nsee attached\r\n--out\r\nContent-Type: message/rfc822\r\nContent-Disposition: attachment\r\n\r\nFrom: Inner <inner@y>\r\nTo: Undisclosed recipients:;\r\nSubject: original\r\nContent-Type: multipart/alternative; boundary=in\r\n\r\n--in\r\n\r\ninner text\r\n--in\r\nContent-Type: text/html\r\n\r\n<b>inner</b>\r\n--in--\r\n\r\n--out--\r\n";

#[test]
fn message_rfc822_with_its_own_multipart() {
    let raw = RFC822;
    let m = parse(raw);
    assert_eq!(m.envelope.subject.as_deref(), Some("fwd"));
    let c = children(&m.root);
    assert_eq!(c.len(), 2);
    let msg = &c[1];
    assert_eq!(ty(msg), ("message", "rfc822"));
    assert!(body(raw, msg).starts_with(b"From: Inner"));
    assert!(body(raw, msg).ends_with(b"--in--\r\n"));
    let nested = inner(msg);
    assert_eq!(nested.envelope.subject.as_deref(), Some("original"));
    assert_eq!(nested.envelope.from[0].name.as_deref(), Some("Inner"));
    assert_eq!(
        nested.envelope.to,
        vec![
            Address {
                mailbox: Some("Undisclosed recipients".into()),
                ..Address::default()
            },
            Address::default()
        ]
    );
    let root = &nested.root;
    assert!(header(raw, root).starts_with(b"From: Inner"));
    assert!(header(raw, root).ends_with(b"boundary=in\r\n\r\n"));
    let alt = children(root);
    assert_eq!(body(raw, &alt[0]), b"inner text");
    assert_eq!(body(raw, &alt[1]), b"<b>inner</b>");
    // Lines of the message/rfc822 part: its whole body.
    assert_eq!(msg.body_lines, 13);
}

#[test]
fn message_global_is_parsed_and_encoded_rfc822_is_a_leaf() {
    let raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: message/global\r\n\r\nSubject: g\r\n\r\nbody\r\n--b\r\nContent-Type: message/rfc822\r\nContent-Transfer-Encoding: BASE64\r\n\r\nU3ViamVjdDogeA0KDQp5\r\n--b--\r\n";
    let r = parse(raw).root;
    let c = children(&r);
    assert_eq!(inner(&c[0]).envelope.subject.as_deref(), Some("g"));
    assert_eq!(body(raw, &inner(&c[0]).root), b"body");
    assert_eq!(c[1].kind, PartKind::Leaf);
    assert_eq!(ty(&c[1]), ("message", "rfc822"));
}

#[test]
fn digest_children_default_to_message() {
    let raw = b"Content-Type: multipart/digest; boundary=d\r\n\r\n--d\r\n\r\nSubject: one\r\n\r\nfirst\r\n--d\r\nContent-Type: text/plain\r\n\r\nnot a message\r\n--d--\r\n";
    let r = parse(raw).root;
    let c = children(&r);
    assert_eq!(ty(&c[0]), ("message", "rfc822"));
    assert!(c[0].params.is_empty());
    let m = inner(&c[0]);
    assert_eq!(m.envelope.subject.as_deref(), Some("one"));
    assert_eq!(body(raw, &m.root), b"first");
    assert_eq!(ty(&c[1]), ("text", "plain"));
    assert_eq!(c[1].kind, PartKind::Leaf);
}

#[test]
fn missing_close_delimiter_ends_at_input_end() {
    let raw =
        b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\none\r\n--b\r\n\r\ntwo\r\n";
    let r = parse(raw).root;
    let c = children(&r);
    assert_eq!(c.len(), 2);
    assert_eq!(body(raw, &c[0]), b"one");
    assert_eq!(body(raw, &c[1]), b"two\r\n");
    assert_eq!(r.body_offset + r.body_len, raw.len() as u64);
}

#[test]
fn boundary_lines_with_trailing_whitespace() {
    let raw = b"Content-Type: multipart/mixed; boundary=\"b c\"\r\n\r\n--b c  \t\r\n\r\none\r\n--b c \r\n\r\ntwo\r\n--b c--\t \r\nepilogue";
    let r = parse(raw).root;
    let c = children(&r);
    assert_eq!(c.len(), 2);
    assert_eq!(body(raw, &c[0]), b"one");
    assert_eq!(body(raw, &c[1]), b"two");
    // RFC 2046 §5.1.1: only the start of the line is compared, so text
    // after the boundary does not matter; a leading space or a single dash
    // does.
    let raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\n -b\r\n --b\r\n-b\r\n--c\r\n--bx\r\n\r\ntwo\r\n--b--x\r\nepilogue\r\n--b\r\n";
    let r = parse(raw).root;
    let c = children(&r);
    assert_eq!(c.len(), 2);
    assert_eq!(body(raw, &c[0]), b" -b\r\n --b\r\n-b\r\n--c");
    assert_eq!(body(raw, &c[1]), b"two");
}

#[test]
fn longest_matching_boundary_wins() {
    // Outer "b", inner "bb": "--bb" is the inner boundary, "--b" the outer.
    let raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: multipart/mixed; boundary=bb\r\n\r\n--bb\r\n\r\nin\r\n--b\r\n\r\nout\r\n--b--\r\n";
    let r = parse(raw).root;
    let c = children(&r);
    assert_eq!(c.len(), 2);
    assert_eq!(body(raw, &children(&c[0])[0]), b"in");
    assert_eq!(body(raw, &c[1]), b"out");
    // The same boundary nested: the innermost takes it.
    let raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nin\r\n--b--\r\n--b\r\n\r\nout\r\n--b--\r\n";
    let r = parse(raw).root;
    let c = children(&r);
    assert_eq!(c.len(), 2);
    assert_eq!(body(raw, &children(&c[0])[0]), b"in");
    assert_eq!(body(raw, &c[1]), b"out");
}

#[test]
fn bare_lf() {
    let raw = b"Subject: lf\nContent-Type: multipart/mixed; boundary=b\n\npre\n--b\nContent-Type: text/plain\n\nline one\nline two\n\n--b\n\nsecond\n--b--\n";
    let m = parse(raw);
    assert_eq!(m.envelope.subject.as_deref(), Some("lf"));
    let c = children(&m.root);
    assert_eq!(header(raw, &c[0]), b"Content-Type: text/plain\n\n");
    assert_eq!(body(raw, &c[0]), b"line one\nline two\n");
    assert_eq!(c[0].body_lines, 2);
    assert_eq!(body(raw, &c[1]), b"second");
}

#[test]
fn mixed_line_ends() {
    let raw =
        b"Content-Type: multipart/mixed; boundary=b\r\n\n--b\n\r\nx\r\n\n--b\r\n\ny\r--b\n--b--";
    let r = parse(raw).root;
    let c = children(&r);
    assert_eq!(body(raw, &c[0]), b"x\r\n");
    assert_eq!(body(raw, &c[1]), b"y\r--b");
}

#[test]
fn no_body() {
    let raw = b"Subject: empty\r\n\r\n";
    let r = parse(raw).root;
    assert_eq!(r.header_len, raw.len() as u64);
    assert_eq!((r.body_len, r.body_lines), (0, 0));
}

#[test]
fn header_without_blank_line() {
    for raw in [
        &b"Subject: x\r\nFrom: y@z"[..],
        b"Subject: x\r\nFrom: y@z\r\n",
        b"",
        b"no colon at all",
    ] {
        let m = parse(raw);
        assert_eq!(m.root.header_len, raw.len() as u64);
        assert_eq!((m.root.body_offset, m.root.body_len), (raw.len() as u64, 0));
    }
    let m = parse(b"Subject: x\r\nFrom: y@z\r\n");
    assert_eq!(m.envelope.from[0].mailbox.as_deref(), Some("y"));
}

#[test]
fn message_starting_with_blank_line() {
    let raw = b"\r\nSubject: not a header\r\n";
    let m = parse(raw);
    assert_eq!(m.root.header_len, 2);
    assert_eq!(m.envelope, Envelope::default());
    assert_eq!(body(raw, &m.root), b"Subject: not a header\r\n");
}

#[test]
fn child_header_cut_by_boundary() {
    // A child whose header has no blank line: the header runs to the CRLF
    // before the boundary line, the body is empty. A child right after a
    // boundary line is empty: that line's CRLF is its own. A child whose
    // empty line is followed at once by a boundary line gives that CRLF to
    // the boundary. Dovecot 2.3 returns the same BODY[n.MIME] for all three.
    let raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/html\r\n--b\r\n--b\r\n\r\n--b\r\nX-A: 1\r\n\r\n--b--\r\n";
    let r = parse(raw).root;
    let c = children(&r);
    assert_eq!(c.len(), 4);
    assert_eq!(header(raw, &c[0]), b"Content-Type: text/html");
    assert_eq!(ty(&c[0]), ("text", "html"));
    assert_eq!(c[0].body_len, 0);
    assert_eq!(header(raw, &c[1]), b"");
    assert_eq!(c[1].body_len, 0);
    assert_eq!(header(raw, &c[2]), b"");
    assert_eq!(c[2].body_len, 0);
    assert_eq!(header(raw, &c[3]), b"X-A: 1\r\n");
    assert_eq!(c[3].body_len, 0);
}

#[test]
fn close_delimiter_keeps_its_line_end() {
    // `--i--` CRLF `--o`: the CRLF ends the close delimiter line, so it stays
    // in the inner multipart (and the message around it), as in Dovecot.
    let raw = b"Content-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\nContent-Type: message/rfc822\r\n\r\nSubject: s\r\nContent-Type: multipart/mixed; boundary=i\r\n\r\n--i\r\n\r\ndeep\r\n--i--\r\n--o--\r\n";
    let r = parse(raw).root;
    let msg = &children(&r)[0];
    assert!(body(raw, msg).ends_with(b"deep\r\n--i--\r\n"));
    let inner = &inner(msg).root;
    assert!(body(raw, inner).ends_with(b"--i--\r\n"));
    assert_eq!(body(raw, &children(inner)[0]), b"deep");
}

#[test]
fn multipart_without_children() {
    // No boundary parameter; a boundary never used; one that is too long.
    let long = format!(
        "Content-Type: multipart/mixed; boundary={}\r\n\r\n--{0}\r\n\r\nx\r\n",
        "b".repeat(MAX_BOUNDARY_LEN + 1)
    );
    for raw in [
        &b"Content-Type: multipart/mixed\r\n\r\n--\r\nbody\r\n"[..],
        b"Content-Type: multipart/mixed; boundary=b\r\n\r\njust a preamble\r\n",
        b"Content-Type: multipart/mixed; boundary=\"\"\r\n\r\n--\r\n\r\nx\r\n",
        long.as_bytes(),
    ] {
        let r = parse(raw).root;
        assert_eq!(r.kind, PartKind::Multipart(Vec::new()));
        assert_eq!(r.body_offset + r.body_len, raw.len() as u64);
    }
}

#[test]
fn boundary_at_input_end_without_line_end() {
    // It ends the child before it but, with no line end, starts no new one
    // (Dovecot does the same).
    let raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nx\r\n--b";
    let r = parse(raw).root;
    let c = children(&r);
    assert_eq!(c.len(), 1);
    assert_eq!(body(raw, &c[0]), b"x");
    let raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nx\r\n--b--  ";
    let c = parse(raw).root;
    assert_eq!(body(raw, &children(&c)[0]), b"x");
    assert_eq!(children(&c).len(), 1);
}

#[test]
fn long_lines_and_long_padding() {
    let mut raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\n".to_vec();
    raw.extend(std::iter::repeat_n(b'-', 100_000));
    raw.extend_from_slice(b"\r\n--b");
    raw.extend(std::iter::repeat_n(b' ', 10_000));
    raw.extend_from_slice(b"\r\n\r\nshort\r\n--b--");
    raw.extend(std::iter::repeat_n(b'\t', 1_000));
    let r = parse(&raw).root;
    let c = children(&r);
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].body_len, 100_000);
    assert_eq!(body(&raw, &c[1]), b"short");
}

#[test]
fn odd_addresses_in_envelope() {
    let raw = b"From: \"Doe, John\" <john(comment)@example.com>, root\r\nReply-To: list: a@b, <@r1,@r2:c@d>;\r\nTo: =?utf-8?B?w6k=?= <e@f>\r\nBcc: ,,\r\n\r\n";
    let e = parse(raw).envelope;
    assert_eq!(e.from.len(), 2);
    assert_eq!(e.from[0].name.as_deref(), Some("Doe, John"));
    assert_eq!(e.from[0].mailbox.as_deref(), Some("john"));
    assert_eq!(e.from[1].host.as_deref(), Some(MISSING_DOMAIN));
    assert_eq!(e.sender, e.from);
    assert_eq!(e.reply_to.len(), 4);
    assert_eq!(e.reply_to[2].adl.as_deref(), Some("@r1,@r2"));
    assert_eq!(e.reply_to[3], Address::default());
    assert_eq!(e.to[0].name.as_deref(), Some("=?utf-8?B?w6k=?="));
    assert!(e.bcc.is_empty());
}

#[test]
fn long_header_is_counted_not_kept() {
    let mut raw = b"Subject: s\r\nContent-Type: text/html\r\nX-Filler: ".to_vec();
    raw.extend(std::iter::repeat_n(b'a', MAX_HEADER_BYTES * 2));
    raw.extend_from_slice(b"\r\nContent-Type: image/png\r\n\r\nbody");
    let m = parse(&raw);
    assert_eq!(body(&raw, &m.root), b"body");
    assert_eq!(ty(&m.root), ("text", "html"));
    assert_eq!(m.envelope.subject.as_deref(), Some("s"));
}

#[test]
fn nesting_depth_is_bounded() {
    let mut raw = Vec::new();
    for d in 0..MAX_DEPTH + 10 {
        raw.extend_from_slice(
            format!("Content-Type: multipart/mixed; boundary=x{d}y\r\n\r\n--x{d}y\r\n").as_bytes(),
        );
    }
    raw.extend_from_slice(b"\r\nleaf\r\n");
    let mut b = StructureBuilder::new();
    b.feed(&raw);
    let m = b.finish();
    check_offsets(&raw, &m.root);
    let mut p = &m.root;
    let mut depth = 0;
    while let PartKind::Multipart(c) = &p.kind {
        if c.is_empty() {
            break;
        }
        p = &c[0];
        depth += 1;
    }
    assert_eq!(depth, MAX_DEPTH);
    assert_eq!(p.kind, PartKind::Multipart(Vec::new()));
}

#[test]
fn part_count_is_bounded() {
    let mut raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n".to_vec();
    for _ in 0..MAX_PARTS + 50 {
        raw.extend_from_slice(b"--b\r\n\r\nx\r\n");
    }
    raw.extend_from_slice(b"--b--\r\n");
    let mut b = StructureBuilder::new();
    b.feed(&raw);
    let m = b.finish();
    check_offsets(&raw, &m.root);
    assert_eq!(children(&m.root).len(), MAX_PARTS - 1);
    assert_eq!(m.root.body_offset + m.root.body_len, raw.len() as u64);
}

#[test]
fn content_type_first_wins_and_bad_one_defaults() {
    let r = parse(b"Content-Type: text/html\r\nContent-Type: image/gif\r\n\r\n").root;
    assert_eq!(ty(&r), ("text", "html"));
    let r = parse(b"Content-Type: garbage\r\n\r\n").root;
    assert_eq!(ty(&r), ("text", "plain"));
    assert_eq!(r.params, vec![("charset".into(), "us-ascii".into())]);
}

#[test]
fn boundary_right_after_a_header() {
    // The outer boundary line follows the inner multipart's header at once:
    // the header's empty line goes to the boundary, so the inner part has
    // no empty line and an empty body.
    let raw = b"Content-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\nContent-Type: multipart/mixed; boundary=m\r\n\r\n--m\r\nContent-Type: multipart/mixed; boundary=i\r\n\r\n--o--\r\n";
    let r = parse(raw).root;
    let m = &children(&r)[0];
    let i = &children(m)[0];
    assert_eq!(i.body_len, 0);
    assert!(header(raw, i).ends_with(b"boundary=i\r\n"));
    assert_eq!(&raw[i.body_offset as usize..], b"\r\n--o--\r\n");
    // The multipart around it keeps the line end (Dovecot: BODY[1] ends
    // with it).
    assert!(body(raw, m).ends_with(b"boundary=i\r\n\r\n"));
    // The same with a message/rfc822 part: the enclosed message starts (and
    // ends, empty) where the empty line was.
    let raw = b"Content-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\nContent-Type: message/rfc822\r\n\r\n--o--\r\n";
    // (Checked against Dovecot 2.3: same BODY[1], BODY[1.MIME], BODY[1.HEADER].)
    let r = parse(raw).root;
    let msg = &children(&r)[0];
    assert_eq!(header(raw, msg), b"Content-Type: message/rfc822\r\n");
    assert_eq!(msg.body_len, 0);
    assert_eq!(inner(msg).root.header_offset, msg.body_offset);
}

#[test]
fn message_whose_header_meets_the_boundary_keeps_its_line_ends() {
    // The enclosed message is all header: its header ends before the line
    // end the boundary takes, but the message/rfc822 part keeps it, as
    // Dovecot 2.3 returns BODY[1] = `Subject: s` CRLF CRLF and
    // BODY[1.HEADER] = `Subject: s` CRLF.
    let raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: message/rfc822\r\n\r\nSubject: s\r\n\r\n--b--\r\n";
    let r = parse(raw).root;
    let msg = &children(&r)[0];
    assert_eq!(body(raw, msg), b"Subject: s\r\n\r\n");
    assert_eq!(msg.body_lines, 2);
    assert_eq!(header(raw, &inner(msg).root), b"Subject: s\r\n");
    assert_eq!(inner(msg).root.body_len, 0);
    // Cut short without an empty line: BODY[1] = `Subject: s` CRLF,
    // BODY[1.HEADER] = `Subject: s`.
    let raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: message/rfc822\r\n\r\nSubject: s\r\n--b--\r\n";
    let r = parse(raw).root;
    let msg = &children(&r)[0];
    assert_eq!(body(raw, msg), b"Subject: s\r\n");
    assert_eq!(header(raw, &inner(msg).root), b"Subject: s");
}
