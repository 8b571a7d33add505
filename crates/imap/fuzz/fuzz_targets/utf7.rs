//! Mailbox names in modified UTF-7: decoding never panics and round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        imap::fuzzing::utf7(text);
    }
});
