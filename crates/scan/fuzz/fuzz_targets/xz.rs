//! The xz decompressor, through a file session: the input gets the xz magic so
//! that it is recognised and unpacked (recursively) with tight limits.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use scan::{Database, Limits, Scanner};

const MAGIC: &[u8] = &[0xfd, b'7', b'z', b'X', b'Z', 0];

fuzz_target!(|data: &[u8]| {
    static SCANNER: OnceLock<Scanner> = OnceLock::new();
    let s = SCANNER.get_or_init(|| {
        let limits = Limits { max_unpacked_bytes: 16 << 20, ..Limits::default() };
        Scanner::new(Arc::new(Database::builtin()), limits)
    });
    let mut session = s.file_session();
    session.feed(MAGIC);
    for chunk in data.chunks(61) {
        session.feed(chunk);
    }
    let _ = session.finish();
});
