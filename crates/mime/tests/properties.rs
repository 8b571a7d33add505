//! Properties of the builder and the stored form: results do not depend on
//! how the input is cut, generated MIME trees come back with offsets that
//! cut out exactly the generated bodies, encoding round-trips, and nothing
//! panics on arbitrary bytes.

use mime_tree::{MessageStructure, Part, PartKind, StructureBuilder};
use proptest::prelude::*;

fn parse_in(raw: &[u8], cuts: &[usize]) -> MessageStructure {
    let mut b = StructureBuilder::new();
    let mut at = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (raw.len() + 1)).collect();
    cuts.sort_unstable();
    for c in cuts {
        b.feed(&raw[at..c]);
        at = c;
    }
    b.feed(&raw[at..]);
    b.finish()
}

fn parse(raw: &[u8]) -> MessageStructure {
    parse_in(raw, &[])
}

fn body<'a>(raw: &'a [u8], p: &Part) -> &'a [u8] {
    &raw[p.body_offset as usize..][..p.body_len as usize]
}

/// Offsets stay inside the input and inside the parent; lines follow the
/// documented count.
fn check_invariants(raw: &[u8], p: &Part, within: (u64, u64)) {
    assert_eq!(p.body_offset, p.header_offset + p.header_len);
    assert!(p.header_offset >= within.0);
    assert!(p.body_offset + p.body_len <= within.1);
    let b = body(raw, p);
    let lines = b.iter().filter(|&&c| c == b'\n').count() as u64;
    assert_eq!(p.body_lines, lines);
    let inside = (p.body_offset, p.body_offset + p.body_len);
    match &p.kind {
        PartKind::Leaf => {}
        PartKind::Multipart(children) => children
            .iter()
            .for_each(|c| check_invariants(raw, c, inside)),
        PartKind::Message(m) => check_invariants(raw, &m.root, inside),
    }
}

/// A generated MIME tree.
#[derive(Debug, Clone)]
enum Node {
    Leaf {
        body: Vec<u8>,
        typed: bool,
    },
    Multipart {
        boundary: String,
        /// multipart/digest, where a child without Content-Type is a
        /// message.
        digest: bool,
        /// Written after `--boundary` on boundary lines: RFC 2046 only
        /// compares the start of the line.
        padding: &'static str,
        preamble: Vec<u8>,
        epilogue: Option<Vec<u8>>,
        children: Vec<Node>,
    },
    Message {
        subject: String,
        inner: Box<Node>,
    },
}

/// Body bytes: letters, spaces, CR and LF in any order, but never `-`, so
/// no line can be a boundary line.
fn text() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(&b"ab z.\r\n\r\n"[..]), 0..40)
}

fn node() -> impl Strategy<Value = Node> {
    let leaf = (text(), any::<bool>()).prop_map(|(body, typed)| Node::Leaf { body, typed });
    leaf.prop_recursive(5, 40, 4, |inner| {
        prop_oneof![
            (
                // Few, short boundaries: inner ones repeat or prefix outer ones.
                prop::sample::select(vec!["b", "bb", "b1", "xyz", "b b"]),
                any::<bool>(),
                prop::sample::select(vec!["", "", "  ", "\t", " x"]),
                text(),
                prop::option::of(text()),
                prop::collection::vec(inner.clone(), 1..4)
            )
                .prop_map(|(b, digest, padding, preamble, epilogue, children)| {
                    Node::Multipart {
                        boundary: b.to_string(),
                        digest,
                        padding,
                        preamble,
                        epilogue,
                        children,
                    }
                }),
            ("[a-z]{0,8}", inner).prop_map(|(subject, inner)| Node::Message {
                subject,
                inner: Box::new(inner)
            }),
        ]
    })
}

/// Renders `n` as an entity (header, blank line, body) after `extra`
/// header lines; `in_digest` when its parent is a multipart/digest.
fn render(n: &Node, extra: &str, in_digest: bool, out: &mut Vec<u8>) {
    out.extend_from_slice(extra.as_bytes());
    match n {
        Node::Leaf { body, typed } => {
            if *typed {
                out.extend_from_slice(b"Content-Type: application/octet-stream\r\n");
            } else if in_digest {
                out.extend_from_slice(b"Content-Type: text/plain\r\n");
            }
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(body);
        }
        Node::Multipart {
            boundary,
            digest,
            padding,
            preamble,
            epilogue,
            children,
        } => {
            let sub = if *digest { "digest" } else { "mixed" };
            out.extend_from_slice(
                format!("Content-Type: multipart/{sub}; boundary=\"{boundary}\"\r\n\r\n")
                    .as_bytes(),
            );
            out.extend_from_slice(preamble);
            for (i, c) in children.iter().enumerate() {
                if i > 0 || !preamble.is_empty() {
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(format!("--{boundary}{padding}\r\n").as_bytes());
                render(c, "", *digest, out);
            }
            out.extend_from_slice(format!("\r\n--{boundary}--{padding}").as_bytes());
            if let Some(e) = epilogue {
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(e);
            }
        }
        Node::Message { subject, inner } => {
            if !in_digest {
                out.extend_from_slice(b"Content-Type: message/rfc822\r\n");
            }
            out.extend_from_slice(b"\r\n");
            render(inner, &format!("Subject: {subject}\r\n"), false, out);
        }
    }
}

/// The structure matches the tree: same shapes, leaf bodies cut out
/// exactly.
fn matches(raw: &[u8], n: &Node, p: &Part) {
    match (n, &p.kind) {
        (Node::Leaf { body: b, .. }, PartKind::Leaf) => assert_eq!(body(raw, p), &b[..]),
        (Node::Multipart { children, .. }, PartKind::Multipart(parts)) => {
            assert_eq!(children.len(), parts.len());
            for (c, q) in children.iter().zip(parts) {
                matches(raw, c, q);
            }
        }
        (Node::Message { subject, inner }, PartKind::Message(m)) => {
            assert_eq!(m.envelope.subject.as_deref(), Some(subject.as_str()));
            matches(raw, inner, &m.root);
        }
        (n, k) => panic!("{n:?} parsed as {k:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn generated_trees_come_back(tree in node(), cuts in prop::collection::vec(any::<usize>(), 0..6)) {
        let mut raw = Vec::new();
        render(&tree, "From: a@b\r\n", false, &mut raw);
        let m = parse(&raw);
        matches(&raw, &tree, &m.root);
        check_invariants(&raw, &m.root, (0, raw.len() as u64));
        prop_assert_eq!(&parse_in(&raw, &cuts), &m);
        prop_assert_eq!(MessageStructure::from_bytes(&m.to_bytes()).unwrap(), m);
    }

    #[test]
    fn generated_trees_byte_at_a_time(tree in node()) {
        let mut raw = Vec::new();
        render(&tree, "", false, &mut raw);
        let mut b = StructureBuilder::new();
        for byte in raw.chunks(1) {
            b.feed(byte);
        }
        prop_assert_eq!(b.finish(), parse(&raw));
    }

    #[test]
    fn arbitrary_bytes(raw in prop::collection::vec(any::<u8>(), 0..600), cuts in prop::collection::vec(any::<usize>(), 0..8)) {
        let m = parse(&raw);
        check_invariants(&raw, &m.root, (0, raw.len() as u64));
        prop_assert_eq!(&parse_in(&raw, &cuts), &m);
        prop_assert_eq!(MessageStructure::from_bytes(&m.to_bytes()).unwrap(), m);
    }

    /// Mail-shaped noise: MIME keywords, boundaries and line ends in any
    /// order, which random bytes almost never produce.
    #[test]
    fn mime_shaped_noise(pieces in prop::collection::vec(prop::sample::select(vec![
        "\r\n", "\n", "\r", " ", "--", "b", "bb", "--b", "--b--", "Content-Type: multipart/mixed; boundary=b",
        "Content-Type: multipart/digest; boundary=bb", "Content-Type: message/rfc822", "Content-Transfer-Encoding: base64",
        "Subject: x", "From: a@b", "To: g:;", ":", ";", "\"", "(", "x",
    ]), 0..120), cuts in prop::collection::vec(any::<usize>(), 0..8)) {
        let raw: Vec<u8> = pieces.concat().into_bytes();
        let m = parse(&raw);
        check_invariants(&raw, &m.root, (0, raw.len() as u64));
        prop_assert_eq!(&parse_in(&raw, &cuts), &m);
        let mut b = StructureBuilder::new();
        for byte in raw.chunks(1) {
            b.feed(byte);
        }
        prop_assert_eq!(&b.finish(), &m);
        prop_assert_eq!(MessageStructure::from_bytes(&m.to_bytes()).unwrap(), m);
    }

    /// Header fields put in front of a stored message move its structure
    /// as if the whole had been parsed.
    #[test]
    fn prepending_fields_shifts_the_structure(tree in node(), lead in prop::sample::select(vec![
        "", "Authentication-Results: mx.example.org; spf=pass\r\n",
        "Authentication-Results: mx.example.org;\r\n\tdkim=pass header.d=example.com;\r\n\tdmarc=pass\r\n",
    ])) {
        let mut raw = Vec::new();
        render(&tree, "From: a@b\r\n", false, &mut raw);
        let mut shifted = parse(&raw);
        shifted.prepend(lead.len() as u64);
        let mut whole = lead.as_bytes().to_vec();
        whole.extend_from_slice(&raw);
        prop_assert_eq!(shifted, parse(&whole));
    }

    #[test]
    fn decoding_garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = MessageStructure::from_bytes(&bytes);
    }

    /// Corrupting a valid encoding gives an error or some structure, never
    /// a panic.
    #[test]
    fn decoding_corrupted_never_panics(tree in node(), flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
        let mut raw = Vec::new();
        render(&tree, "", false, &mut raw);
        let mut bytes = parse(&raw).to_bytes();
        for (at, v) in flips {
            let n = bytes.len();
            bytes[at % n] = v;
        }
        let _ = MessageStructure::from_bytes(&bytes);
    }
}

#[test]
fn empty_slice_decodes_to_default() {
    assert_eq!(
        MessageStructure::from_bytes(&[]).unwrap(),
        MessageStructure::default()
    );
    assert!(MessageStructure::from_bytes(&[0]).is_err());
    assert_eq!(
        mime_tree::DecodeError.to_string(),
        "stored message structure is corrupt or of an unknown version"
    );
}
