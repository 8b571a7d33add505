//! The MIME parser: any input, and the same input split at a fuzzer-chosen point,
//! must give the same events and never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scan::mime::{EventCollector, MimeLimits, MimeParser};

fn parse(chunks: &[&[u8]]) -> Vec<scan::mime::MimeEvent> {
    let mut p = MimeParser::new(MimeLimits { max_header_bytes: 4096, max_depth: 8 });
    let mut c = EventCollector::default();
    for ch in chunks {
        p.feed(ch, &mut c);
    }
    p.finish(&mut c);
    c.events
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, msg)) = data.split_first() else { return };
    let cut = usize::from(cut) * msg.len() / 256;
    let whole = parse(&[msg]);
    let (a, b) = msg.split_at(cut);
    assert_eq!(whole, parse(&[a, b]));
});
