//! Signature database text: any `.ndb`/`.hdb` text loads or is refused, never panics,
//! and the result scans its own input.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use scan::{DatabaseBuilder, Limits, Scanner};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut b = DatabaseBuilder::new();
    b.add_ndb(&text);
    b.add_hashes(&text);
    if let Ok((db, _)) = b.build() {
        let _ = Scanner::new(Arc::new(db), Limits::default()).scan_file(data);
    }
});
