//! SASL PLAIN responses as a POP3 client sends them after `AUTH PLAIN`:
//! no panic, and what is read encodes back to the same credentials.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pop3::fuzzing::plain_response(data));
