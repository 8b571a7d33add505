//! The text-part decoder: any input, cut at fuzzer-chosen points, gives
//! the same decoded text and the same marks as the input whole; every
//! text leaf it opens it ends, and decoding never makes more bytes than
//! came in. Never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mime_tree::{PartRewriter, TextMark};

fn decode(pieces: &[&[u8]]) -> (Vec<u8>, Vec<(usize, TextMark)>) {
    let mut r = PartRewriter::text_parts();
    let mut out = Vec::new();
    let mut marks = Vec::new();
    for p in pieces {
        r.push(p, &mut out);
        marks.extend(r.take_marks());
    }
    marks.extend(r.finish(&mut out));
    (out, marks)
}

fuzz_target!(|data: &[u8]| {
    // The first two bytes choose two cut points; the rest is the message.
    let [a, b, msg @ ..] = data else { return };
    let cut = |x: u8| usize::from(x) * msg.len() / 255;
    let (c1, c2) = (cut(*a).min(cut(*b)), cut(*a).max(cut(*b)));
    let whole = decode(&[msg]);
    assert_eq!(whole, decode(&[&msg[..c1], &msg[c1..c2], &msg[c2..]]));
    let (out, marks) = whole;
    assert!(out.len() <= msg.len());
    let mut open = false;
    let mut last = 0;
    for (at, mark) in marks {
        assert!(last <= at && at <= out.len());
        last = at;
        match mark {
            TextMark::Header { text, .. } => {
                assert!(!open);
                open = text.is_some();
            }
            TextMark::End => {
                assert!(open);
                open = false;
            }
        }
    }
    assert!(!open);
});
