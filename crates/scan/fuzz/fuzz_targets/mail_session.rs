//! The whole pipeline on a mail: parsing, decoding, unpacking, matching.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use scan::{Database, Limits, Scanner};

fuzz_target!(|data: &[u8]| {
    static SCANNER: OnceLock<Scanner> = OnceLock::new();
    let s = SCANNER.get_or_init(|| Scanner::new(Arc::new(Database::builtin()), Limits::default()));
    let mut session = s.session();
    for chunk in data.chunks(97) {
        session.feed(chunk);
    }
    let _ = session.finish();
});
