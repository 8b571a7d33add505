//! Entry points for the fuzz targets in `fuzz/`; not an API. Each runs one
//! byte path of the data stage over arbitrary input and panics when a
//! property fails, which the fuzzer reports.

use crate::header_fix::{fix_header, Fixes};
use crate::message_auth::Collector;
use net::DotUnstuffer;

/// Cuts `data` at two places taken from its first bytes; returns the
/// pieces of the rest.
fn pieces(data: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let (a, b, rest) = match data {
        [a, b, rest @ ..] => (*a as usize, *b as usize, rest),
        _ => (0, 0, data),
    };
    let n = rest.len();
    let (mut x, mut y) = ((a * n) / 255, (b * n) / 255);
    if x > y {
        std::mem::swap(&mut x, &mut y);
    }
    (vec![&rest[..x], &rest[x..y], &rest[y..]], rest)
}

/// DATA bytes: however they arrive, the same message comes out, with
/// CRLF line ends only.
pub fn dot_unstuffing(data: &[u8]) {
    let (parts, whole) = pieces(data);
    let run = |parts: &[&[u8]]| {
        let mut u = DotUnstuffer::default();
        let mut out = Vec::new();
        let mut pending = Vec::new();
        for part in parts {
            pending.extend_from_slice(part);
            let (used, done) = u.feed(&pending, &mut out);
            pending.drain(..used);
            if done {
                return (out, true);
            }
        }
        (out, false)
    };
    let (cut, cut_done) = run(&parts);
    let (one, one_done) = run(&[whole]);
    assert_eq!(cut_done, one_done);
    if one_done {
        assert_eq!(cut, one);
        for (i, &b) in one.iter().enumerate() {
            match b {
                b'\r' => assert_eq!(one.get(i + 1), Some(&b'\n')),
                b'\n' => assert!(i > 0 && one[i - 1] == b'\r'),
                _ => {}
            }
        }
    }
}

/// A message as the data stage stores it: the header fixes never panic,
/// and what the DKIM checks collect does not depend on how it arrived.
pub fn arriving_message(data: &[u8]) {
    let (parts, whole) = pieces(data);
    let _ = fix_header(
        whole,
        &Fixes::Arriving {
            authserv_id: Some("mx.example.org".into()),
            spam_fields: true,
        },
    );
    let _ = fix_header(
        whole,
        &Fixes::Submission {
            hostname: "mx.example.org".into(),
        },
    );
    let mut cut = Collector::default();
    parts.iter().for_each(|p| cut.feed(p));
    let mut one = Collector::default();
    one.feed(whole);
    assert_eq!(cut.finish_for_test(), one.finish_for_test());
}
