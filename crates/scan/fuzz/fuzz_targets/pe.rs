//! The streaming PE header parse and section hasher, through a file session: the
//! input gets the `MZ` magic so it is taken for a PE file, a wildcard-size section
//! hash signature makes every section hashed, and the verdict must not depend on
//! how the bytes are split.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use scan::{DatabaseBuilder, Limits, Scanner};

fuzz_target!(|data: &[u8]| {
    static SCANNER: OnceLock<Scanner> = OnceLock::new();
    let s = SCANNER.get_or_init(|| {
        let mut b = DatabaseBuilder::new();
        // The MD5 of 512 zero bytes, any section size; and a fixed-size one.
        b.add_file(
            "fuzz.mdb",
            b"*:bf619eac0cdf3f68d496ea9344137e8b:Fuzz.Sect.Any:73\n512:bf619eac0cdf3f68d496ea9344137e8b:Fuzz.Sect\n",
        )
        .expect("the fuzz database loads");
        let (db, _) = b.build().expect("the fuzz database builds");
        Scanner::new(Arc::new(db), Limits::default())
    });
    let mut file = b"MZ".to_vec();
    file.extend_from_slice(data);
    let whole = s.scan_file(&file);
    let mut session = s.file_session();
    for chunk in file.chunks(61) {
        session.feed(chunk);
    }
    assert_eq!(session.finish(), whole, "a split changed the verdict");
});
