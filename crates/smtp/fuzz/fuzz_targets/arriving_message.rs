//! A message as it streams into the store: the header fixes of submission
//! and of arriving mail never panic, and the header block and DKIM body
//! hashes collected do not depend on how the message was cut.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| smtp::fuzzing::arriving_message(data));
