//! The binary-part encoder: any input, cut at fuzzer-chosen points, gives
//! the same output as the input whole, and memory stays bounded (the output
//! of a piece never waits for more than a header block or a delimiter
//! line). Never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mime_tree::{encode_binary_parts, PartRewriter};

fuzz_target!(|data: &[u8]| {
    // The first two bytes choose two cut points; the rest is the message.
    let [a, b, msg @ ..] = data else { return };
    let cut = |x: u8| usize::from(x) * msg.len() / 255;
    let (c1, c2) = (cut(*a).min(cut(*b)), cut(*a).max(cut(*b)));
    let whole = encode_binary_parts(msg);
    let mut out = Vec::new();
    let mut encoder = PartRewriter::binary_to_base64();
    for piece in [&msg[..c1], &msg[c1..c2], &msg[c2..]] {
        encoder.push(piece, &mut out);
    }
    encoder.finish(&mut out);
    assert_eq!(whole, out);
    // Base64 grows content by 4/3 plus line ends; each part's header gains
    // a field or two, and a part needs a line at least.
    let lines = msg.iter().filter(|&&b| b == b'\n').count();
    assert!(whole.len() <= msg.len() * 3 / 2 + 64 * (1 + lines));
});
