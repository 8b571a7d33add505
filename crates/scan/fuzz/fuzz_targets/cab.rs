//! The cabinet reader (header, folders, files, stored/MSZIP/LZX blocks),
//! through a file session: the input gets the cabinet magic so that it is
//! recognised and unpacked (recursively) with tight limits.
#![no_main]

#[path = "../shared/compressed.rs"]
mod compressed;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| compressed::scan_with_magic(b"MSCF", data));
