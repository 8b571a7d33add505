//! Commands as a ManageSieve client sends them: no panic, literals asked
//! for only at the end, and what is read writes back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| managesieve::fuzzing::command(data));
