//! Logical signature (`.ldb`) text: any text loads or is refused, never panics, and
//! the database built from it scans the input itself in any split.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use scan::{DatabaseBuilder, Limits, Scanner};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut b = DatabaseBuilder::new();
    b.add_ldb(&text);
    if let Ok((db, _)) = b.build() {
        let scanner = Scanner::new(Arc::new(db), Limits::default());
        let whole = scanner.scan_file(data);
        let mut s = scanner.file_session();
        let (a, rest) = data.split_at(data.len() / 3);
        s.feed(a);
        s.feed(rest);
        assert_eq!(s.finish(), whole, "a split changed the verdict");
    }
});
