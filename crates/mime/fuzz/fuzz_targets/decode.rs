//! The stored form: any bytes decode to a structure or an error, never a
//! panic, and a decoded structure survives being encoded again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mime_tree::MessageStructure;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = MessageStructure::from_bytes(data) {
        assert_eq!(MessageStructure::from_bytes(&m.to_bytes()).ok(), Some(m));
    }
});
