//! The POP3 proxy's MIME tracker over any message, in any pieces: it
//! follows the structure and closes it without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| proxy::fuzzing::message_structure(data));
