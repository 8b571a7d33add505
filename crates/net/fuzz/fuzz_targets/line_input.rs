//! Lines read from a connection through the bounded input buffer: the
//! same lines (or `TooLong` refusals) however the bytes arrive, never a
//! line longer than the buffer.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| net::fuzzing::line_input(data));
