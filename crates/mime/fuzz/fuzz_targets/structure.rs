//! The structure builder: any input, cut at fuzzer-chosen points, gives the
//! same structure as the input whole, with offsets inside the input, and
//! the structure survives its stored form. Never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mime_tree::{MessageStructure, Part, PartKind, StructureBuilder};

fn build(pieces: &[&[u8]]) -> MessageStructure {
    let mut b = StructureBuilder::new();
    for p in pieces {
        b.feed(p);
    }
    b.finish()
}

fn check(p: &Part, start: u64, end: u64) {
    assert_eq!(p.body_offset, p.header_offset + p.header_len);
    assert!(start <= p.header_offset && p.body_offset + p.body_len <= end);
    let (s, e) = (p.body_offset, p.body_offset + p.body_len);
    match &p.kind {
        PartKind::Leaf => {}
        PartKind::Multipart(children) => children.iter().for_each(|c| check(c, s, e)),
        PartKind::Message(m) => check(&m.root, s, e),
    }
}

fuzz_target!(|data: &[u8]| {
    // The first two bytes choose two cut points; the rest is the message.
    let [a, b, msg @ ..] = data else { return };
    let cut = |x: u8| usize::from(x) * msg.len() / 255;
    let (c1, c2) = (cut(*a).min(cut(*b)), cut(*a).max(cut(*b)));
    let whole = build(&[msg]);
    check(&whole.root, 0, msg.len() as u64);
    assert_eq!(whole, build(&[&msg[..c1], &msg[c1..c2], &msg[c2..]]));
    if msg.len() <= 512 {
        let bytes: Vec<&[u8]> = msg.chunks(1).collect();
        assert_eq!(whole, build(&bytes));
    }
    assert_eq!(MessageStructure::from_bytes(&whole.to_bytes()).ok(), Some(whole));
});
