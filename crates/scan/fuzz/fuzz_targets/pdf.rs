//! The PDF stream reader, through a file session: the input gets the PDF magic
//! written before it so it is read as a PDF, and the verdict must not depend on
//! how the bytes are split.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use scan::{Database, Limits, Scanner};

fuzz_target!(|data: &[u8]| {
    static SCANNER: OnceLock<Scanner> = OnceLock::new();
    let s = SCANNER.get_or_init(|| {
        let limits = Limits {
            max_unpacked_bytes: 16 << 20,
            ..Limits::default()
        };
        Scanner::new(Arc::new(Database::builtin()), limits)
    });
    let mut file = b"%PDF-1.7\n".to_vec();
    file.extend_from_slice(data);
    let whole = s.scan_file(&file);
    let mut session = s.file_session();
    for chunk in file.chunks(7) {
        session.feed(chunk);
    }
    assert_eq!(session.finish(), whole, "a split changed the verdict");
});
