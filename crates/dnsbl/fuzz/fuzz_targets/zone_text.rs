//! List files in rbldnsd's ip4set format: read without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dnsbl::fuzzing::zone_text(data));
