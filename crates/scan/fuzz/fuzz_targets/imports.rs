//! The PE import hash behind `.imp`, through a file session: a PE32 image with
//! an import table (several DLLs, names and ordinals) has its bytes from the
//! data directories on overwritten by the input (directories, section table,
//! import descriptors, thunks and names all mutated), a wildcard-size `.imp`
//! signature makes every import table hashed, and the verdict must not depend
//! on how the bytes are split.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use scan::{DatabaseBuilder, Limits, Scanner};

#[path = "../../tests/support/pe.rs"]
#[allow(dead_code)]
mod pe;

use pe::{Func, Options};

/// Where the PE32 optional header's data directories start in the template.
const DIRS: usize = 0x98 + 96;

fuzz_target!(|data: &[u8]| {
    static SETUP: OnceLock<(Scanner, Vec<u8>)> = OnceLock::new();
    let (s, template) = SETUP.get_or_init(|| {
        let mut b = DatabaseBuilder::new();
        // The MD5 of "kernel32.exitprocess", any size.
        b.add_file(
            "fuzz.imp",
            b"f9ade0aa18f660a34a4fa23392e21838:*:Fuzz.Imp.Any\n",
        )
        .expect("the fuzz database loads");
        let (db, _) = b.build().expect("the fuzz database builds");
        let template = pe::pe_with_imports(
            &[
                ("kernel32.dll", &[Func::Name("ExitProcess"), Func::Name("Sleep")]),
                ("ws2_32.dll", &[Func::Ordinal(1), Func::Ordinal(999)]),
                ("oleaut32.dll", &[Func::Ordinal(2), Func::Name("VariantInit")]),
            ],
            Options::default(),
        );
        (Scanner::new(Arc::new(db), Limits::default()), template)
    });
    let mut file = template.clone();
    let end = DIRS + data.len();
    if end > file.len() {
        file.resize(end, 0);
    }
    file[DIRS..end].copy_from_slice(data);
    let whole = s.scan_file(&file);
    let mut session = s.file_session();
    for chunk in file.chunks(61) {
        session.feed(chunk);
    }
    assert_eq!(session.finish(), whole, "a split changed the verdict");
});
