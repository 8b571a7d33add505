//! DATA bytes from the network: however they are cut into reads, the same
//! message comes out of the dot-unstuffer, with CRLF line ends only.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| smtp::fuzzing::dot_unstuffing(data));
