//! The tar reader, through a file session: the first block gets the ustar magic so
//! that the input is recognised as tar.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use scan::{Database, Limits, Scanner};

fuzz_target!(|data: &[u8]| {
    static SCANNER: OnceLock<Scanner> = OnceLock::new();
    let s = SCANNER.get_or_init(|| Scanner::new(Arc::new(Database::builtin()), Limits::default()));
    let mut input = data.to_vec();
    if input.len() < 512 {
        input.resize(512, 0);
    }
    input[257..262].copy_from_slice(b"ustar");
    let mut session = s.file_session();
    for chunk in input.chunks(200) {
        session.feed(chunk);
    }
    let _ = session.finish();
});
