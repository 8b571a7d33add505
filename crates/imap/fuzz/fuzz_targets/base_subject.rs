//! Subjects as messages carry them, through the RFC 5256 §2.1 base
//! subject: no input may panic, and the result is its own base subject.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    imap::fuzzing::base_subject(&String::from_utf8_lossy(data));
});
