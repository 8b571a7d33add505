//! SASL PLAIN responses after `AUTHENTICATE "PLAIN"`: no panic, and what
//! is read encodes back to the same credentials.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| managesieve::fuzzing::plain_response(data));
