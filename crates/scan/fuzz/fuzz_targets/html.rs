//! The HTML normaliser, through a file session: the input gets an HTML tag
//! written before it so the file is HTML, the database has target-type-3
//! signatures, and the verdict must not depend on how the bytes are split.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use scan::{DatabaseBuilder, Limits, Scanner};

fuzz_target!(|data: &[u8]| {
    static SCANNER: OnceLock<Scanner> = OnceLock::new();
    let s = SCANNER.get_or_init(|| {
        let mut b = DatabaseBuilder::new();
        // "eicar" and "<script>x" in the normalised forms.
        b.add_ndb("Fuzz.Html.Text:3:*:6569636172\nFuzz.Html.Script:3:*:3c7363726970743e78\n");
        Scanner::new(Arc::new(b.build().expect("fixed signatures").0), Limits::default())
    });
    let mut file = b"<html>".to_vec();
    file.extend_from_slice(data);
    let whole = s.scan_file(&file);
    let mut session = s.file_session();
    for chunk in file.chunks(5) {
        session.feed(chunk);
    }
    assert_eq!(session.finish(), whole, "a split changed the verdict");
});
