use super::*;
use proptest::prelude::*;

fn parse_chunks(msg: &[u8], sizes: &[usize]) -> Vec<MimeEvent> {
    let mut p = MimeParser::new(MimeLimits::default());
    let mut c = EventCollector::default();
    let mut rest = msg;
    let mut i = 0;
    while !rest.is_empty() {
        let n = if sizes.is_empty() {
            rest.len()
        } else {
            sizes[i % sizes.len()].clamp(1, rest.len())
        };
        let (a, b) = rest.split_at(n);
        p.feed(a, &mut c);
        rest = b;
        i += 1;
    }
    p.finish(&mut c);
    c.events
}

fn parse(msg: &[u8]) -> Vec<MimeEvent> {
    parse_chunks(msg, &[])
}

fn starts(events: &[MimeEvent]) -> Vec<PartInfo> {
    events
        .iter()
        .filter_map(|e| match e {
            MimeEvent::PartStart(p) => Some(p.clone()),
            _ => None,
        })
        .collect()
}

fn bodies(events: &[MimeEvent]) -> Vec<Vec<u8>> {
    events
        .iter()
        .filter_map(|e| match e {
            MimeEvent::Body(b) => Some(b.clone()),
            _ => None,
        })
        .collect()
}

const MULTI: &[u8] = b"From: a@example.org\r\n\
Subject: hi\r\n\
Content-Type: multipart/mixed;\r\n boundary=\"XYZ\"\r\n\
\r\n\
preamble\r\n\
--XYZ\r\n\
Content-Type: text/plain\r\n\
\r\n\
hello\r\n\
--XYZ\r\n\
Content-Type: application/octet-stream; name=\"a.bin\"\r\n\
Content-Transfer-Encoding: base64\r\n\
Content-Disposition: attachment; filename=\"x.exe\"\r\n\
\r\n\
aGVsbG8g\r\nd29ybGQ=\r\n\
--XYZ--\r\n\
epilogue\r\n";

#[test]
fn multipart_structure() {
    let ev = parse(MULTI);
    let s = starts(&ev);
    assert_eq!(s.len(), 3);
    assert_eq!(s[0].kind, PartKind::Multipart);
    assert_eq!(s[1].content_type, "text/plain");
    assert_eq!(s[1].depth, 1);
    assert_eq!(s[2].encoding, Encoding::Base64);
    assert_eq!(s[2].filename.as_deref(), Some("x.exe"));
    assert_eq!(
        bodies(&ev),
        vec![b"hello".to_vec(), b"hello world".to_vec()]
    );
    assert_eq!(ev.last(), Some(&MimeEvent::PartEnd));
    assert!(ev.contains(&MimeEvent::Header {
        name: b"Content-Type".to_vec(),
        value: b"multipart/mixed; boundary=\"XYZ\"".to_vec()
    }));
}

#[test]
fn one_byte_at_a_time() {
    assert_eq!(parse_chunks(MULTI, &[1]), parse(MULTI));
}

#[test]
fn missing_close_and_outer_boundary_closes_inner() {
    let msg = b"Content-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\n\
Content-Type: multipart/alternative; boundary=i\r\n\r\n--i\r\n\r\ninner\r\n--o\r\n\r\nsecond\r\n";
    let ev = parse(msg);
    // With no closing delimiter the last line end stays in the body.
    assert_eq!(bodies(&ev), vec![b"inner".to_vec(), b"second\r\n".to_vec()]);
    let opens = ev
        .iter()
        .filter(|e| matches!(e, MimeEvent::PartStart(_)))
        .count();
    let closes = ev
        .iter()
        .filter(|e| matches!(e, MimeEvent::PartEnd))
        .count();
    assert_eq!(opens, closes);
}

#[test]
fn rfc822_and_digest() {
    let msg = b"Content-Type: multipart/digest; boundary=d\r\n\r\n--d\r\n\r\nSubject: inner\r\n\r\nbody\r\n--d--\r\n";
    let s = starts(&parse(msg));
    assert_eq!(s[1].kind, PartKind::Message);
    assert_eq!(s[2].depth, 2);
    assert_eq!(s[2].content_type, "text/plain");
}

#[test]
fn uuencode_inside_text() {
    let msg =
        b"Subject: uu\r\n\r\nsee attached\r\nbegin 644 cat.txt\r\n#0V%T\r\n`\r\nend\r\nbye\r\n";
    let ev = parse(msg);
    let s = starts(&ev);
    assert_eq!(s[1].kind, PartKind::Uuencoded);
    assert_eq!(s[1].filename.as_deref(), Some("cat.txt"));
    assert_eq!(
        bodies(&ev),
        vec![
            b"see attached\r\n".to_vec(),
            b"Cat".to_vec(),
            b"bye\r\n".to_vec()
        ]
    );
}

#[test]
fn huge_header_is_bounded() {
    let mut msg = b"X-Big: ".to_vec();
    msg.extend(std::iter::repeat_n(b'a', 200_000));
    msg.extend_from_slice(b"\r\nSubject: s\r\n\r\nbody");
    let mut p = MimeParser::new(MimeLimits::default());
    let mut c = EventCollector::default();
    p.feed(&msg, &mut c);
    p.finish(&mut c);
    assert!(p.dropped_header_bytes() > 100_000);
    assert_eq!(bodies(&c.events), vec![b"body".to_vec()]);
}

#[test]
fn depth_is_capped() {
    let mut msg = Vec::new();
    for i in 0..50 {
        msg.extend_from_slice(
            format!("Content-Type: multipart/mixed; boundary=b{i}\r\n\r\n--b{i}\r\n").as_bytes(),
        );
    }
    msg.extend_from_slice(b"\r\ndeep\r\n");
    let mut p = MimeParser::new(MimeLimits {
        max_depth: 8,
        ..MimeLimits::default()
    });
    let mut c = EventCollector::default();
    p.feed(&msg, &mut c);
    p.finish(&mut c);
    assert!(p.depth_capped());
    assert!(starts(&c.events).iter().all(|s| s.depth <= 8));
}

#[test]
fn no_header_at_all() {
    let ev = parse(b"just text\r\n");
    assert_eq!(bodies(&ev), vec![b"just text\r\n".to_vec()]);
}

/// A random MIME tree for the round-trip property.
#[derive(Debug, Clone, PartialEq)]
enum Tree {
    Leaf { enc: u8, body: Vec<u8> },
    Multi(Vec<Tree>),
    Message(Box<Tree>),
}

fn tree() -> impl Strategy<Value = Tree> {
    let text = proptest::collection::vec(
        prop_oneof![Just(b'a'), Just(b'z'), Just(b' '), Just(b'-'), Just(b'=')],
        0..60,
    );
    let leaf = (0u8..3, text, proptest::collection::vec(any::<u8>(), 0..80)).prop_map(
        |(enc, text, bin)| {
            if enc == 0 {
                // identity bodies are text lines
                let mut b = text;
                if b.first() == Some(&b'-') {
                    b[0] = b'x';
                }
                Tree::Leaf { enc, body: b }
            } else {
                Tree::Leaf { enc, body: bin }
            }
        },
    );
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 1..4).prop_map(Tree::Multi),
            inner.prop_map(|t| Tree::Message(Box::new(t))),
        ]
    })
}

fn qp_encode(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, b) in data.iter().enumerate() {
        if i > 0 && i % 25 == 0 {
            out.extend_from_slice(b"=\r\n");
        }
        if b.is_ascii_alphanumeric() {
            out.push(*b);
        } else {
            out.extend_from_slice(format!("={b:02X}").as_bytes());
        }
    }
    out
}

fn serialise(t: &Tree, counter: &mut usize, out: &mut Vec<u8>) {
    match t {
        Tree::Leaf { enc, body } => {
            match enc {
                0 => out.extend_from_slice(b"Content-Type: text/plain\r\n\r\n"),
                1 => out.extend_from_slice(b"Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n"),
                _ => out.extend_from_slice(b"Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"),
            }
            match enc {
                0 => out.extend_from_slice(body),
                1 => {
                    use base64::Engine;
                    let enc = base64::engine::general_purpose::STANDARD.encode(body);
                    for line in enc.as_bytes().chunks(76) {
                        out.extend_from_slice(line);
                        out.extend_from_slice(b"\r\n");
                    }
                }
                _ => out.extend_from_slice(&qp_encode(body)),
            }
        }
        Tree::Multi(children) => {
            *counter += 1;
            let b = format!("=_b{counter}_");
            out.extend_from_slice(
                format!(
                    "Content-Type: multipart/mixed; boundary=\"{b}\"\r\n\r\nthis is a preamble\r\n"
                )
                .as_bytes(),
            );
            for c in children {
                out.extend_from_slice(format!("--{b}\r\n").as_bytes());
                serialise(c, counter, out);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(format!("--{b}--\r\n").as_bytes());
        }
        Tree::Message(inner) => {
            out.extend_from_slice(b"Content-Type: message/rfc822\r\n\r\nSubject: inner\r\n");
            serialise(inner, counter, out);
        }
    }
}

/// Rebuilds the tree from events.
fn rebuild(events: &[MimeEvent]) -> Tree {
    fn node(ev: &[MimeEvent], i: &mut usize) -> Tree {
        while !matches!(ev[*i], MimeEvent::PartStart(_)) {
            *i += 1;
        }
        let MimeEvent::PartStart(p) = &ev[*i] else {
            unreachable!()
        };
        *i += 1;
        let t = match p.kind {
            PartKind::Multipart => {
                let mut kids = Vec::new();
                loop {
                    match &ev[*i] {
                        MimeEvent::PartEnd => break,
                        MimeEvent::PartStart(_) => kids.push(node(ev, i)),
                        _ => *i += 1,
                    }
                }
                Tree::Multi(kids)
            }
            PartKind::Message => {
                let inner = node(ev, i);
                while !matches!(ev[*i], MimeEvent::PartEnd) {
                    *i += 1;
                }
                Tree::Message(Box::new(inner))
            }
            _ => {
                let mut body = Vec::new();
                while let MimeEvent::Body(b) = &ev[*i] {
                    body.extend_from_slice(b);
                    *i += 1;
                }
                let enc = match p.encoding {
                    Encoding::Base64 => 1,
                    Encoding::QuotedPrintable => 2,
                    _ => 0,
                };
                Tree::Leaf { enc, body }
            }
        };
        assert_eq!(ev[*i], MimeEvent::PartEnd);
        *i += 1;
        t
    }
    let mut i = 0;
    node(events, &mut i)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn any_chunking_same_events(t in tree(), sizes in proptest::collection::vec(1usize..40, 1..8)) {
        let mut msg = b"From: x@example.org\r\n".to_vec();
        serialise(&t, &mut 0, &mut msg);
        prop_assert_eq!(parse_chunks(&msg, &sizes), parse(&msg));
    }

    #[test]
    fn trees_round_trip(t in tree()) {
        let mut msg = Vec::new();
        serialise(&t, &mut 0, &mut msg);
        prop_assert_eq!(rebuild(&parse(&msg)), t);
    }

    #[test]
    fn garbage_any_chunking(data in proptest::collection::vec(prop_oneof![
        Just(b'\n'), Just(b'\r'), Just(b'-'), Just(b':'), Just(b' '), Just(b'a'), Just(b'='), any::<u8>()], 0..600),
        sizes in proptest::collection::vec(1usize..30, 1..6)) {
        let mut msg = b"Content-Type: multipart/mixed; boundary=a\r\n\r\n--a\r\n".to_vec();
        msg.extend_from_slice(&data);
        prop_assert_eq!(parse_chunks(&msg, &sizes), parse(&msg));
    }
}
