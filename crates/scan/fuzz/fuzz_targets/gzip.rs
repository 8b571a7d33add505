//! The gzip decompressor, through a file session: the input gets the gzip magic so
//! that it is recognised and unpacked (recursively) with tight limits.
#![no_main]

#[path = "../shared/compressed.rs"]
mod compressed;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| compressed::scan_with_magic(&[0x1f, 0x8b, 0x08], data));
