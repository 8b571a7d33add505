//! DNS packets from the network, answered by the DNSBL server over UDP
//! and TCP: no panic, and every answer is a response with the query's ID
//! within the UDP size limit.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dnsbl::fuzzing::query(data));
