//! How fast `StructureBuilder` reads a large message, fed in 64 KiB pieces
//! as the store does: a multipart/mixed with a short text part and a 50 MB
//! base64 attachment (76-character lines), then a 10 MB message that is one
//! line.
//!
//! Run with `cargo run --release -p sluice-mime --example build_speed`.

use std::hint::black_box;
use std::time::Instant;

use mime_tree::StructureBuilder;

fn main() {
    let mut attachment = b"From: a@example.com\r\nContent-Type: multipart/mixed; boundary=\"=_b\"\r\n\r\n--=_b\r\n\r\nSee attached.\r\n--=_b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n".to_vec();
    let line = [
        b"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0".as_slice(),
        b"\r\n",
    ]
    .concat();
    while attachment.len() < 50 << 20 {
        attachment.extend_from_slice(&line);
    }
    attachment.extend_from_slice(b"--=_b--\r\n");

    let mut one_line = b"Subject: long\r\n\r\n".to_vec();
    one_line.resize(10 << 20, b'x');

    for (what, raw) in [
        ("50 MB multipart", &attachment),
        ("10 MB single line", &one_line),
    ] {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let start = Instant::now();
            let mut b = StructureBuilder::new();
            for piece in raw.chunks(64 << 10) {
                b.feed(piece);
            }
            black_box(b.finish());
            best = best.min(start.elapsed().as_secs_f64());
        }
        let mb = raw.len() as f64 / (1 << 20) as f64;
        println!("{what}: {:.1} ms, {:.0} MB/s", best * 1e3, mb / best);
    }
}
