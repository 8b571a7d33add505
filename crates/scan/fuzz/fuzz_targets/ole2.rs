//! The OLE2 compound file parse and VBA macro extraction, through a file session:
//! the input gets the OLE2 magic and a valid byte order and sector size written
//! over its header so the parse goes past them, and the verdict must not depend on
//! how the bytes are split.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use scan::{Database, Limits, Scanner};

fuzz_target!(|data: &[u8]| {
    static SCANNER: OnceLock<Scanner> = OnceLock::new();
    let s = SCANNER.get_or_init(|| {
        let limits = Limits {
            alert_macros: true,
            max_ole2_size: 1 << 20,
            ..Limits::default()
        };
        Scanner::new(Arc::new(Database::builtin()), limits)
    });
    let mut file = data.to_vec();
    if file.len() < 512 {
        file.resize(512, 0);
    }
    file[..8].copy_from_slice(&[0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);
    file[28..34].copy_from_slice(&[0xfe, 0xff, 9, 0, 6, 0]);
    let whole = s.scan_file(&file);
    let mut session = s.file_session();
    for chunk in file.chunks(61) {
        session.feed(chunk);
    }
    assert_eq!(session.finish(), whole, "a split changed the verdict");
});
