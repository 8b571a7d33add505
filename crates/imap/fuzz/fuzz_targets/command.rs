//! A client's command bytes through every step before the session acts on
//! them: no input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    imap::fuzzing::pre_decode(data);
});
