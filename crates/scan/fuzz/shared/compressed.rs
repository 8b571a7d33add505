//! The body of the decompressor targets: the input, after a format's magic
//! bytes, goes through a file session so it is recognised and unpacked
//! (recursively), with a tight limit on unpacked bytes.

use std::sync::{Arc, OnceLock};

use scan::{Database, Limits, Scanner};

/// Scans `MAGIC ++ data`, fed in odd-sized pieces.
pub fn scan_with_magic(magic: &[u8], data: &[u8]) {
    static SCANNER: OnceLock<Scanner> = OnceLock::new();
    let s = SCANNER.get_or_init(|| {
        let limits = Limits { max_unpacked_bytes: 16 << 20, ..Limits::default() };
        Scanner::new(Arc::new(Database::builtin()), limits)
    });
    let mut session = s.file_session();
    session.feed(magic);
    for chunk in data.chunks(61) {
        session.feed(chunk);
    }
    let _ = session.finish();
}
