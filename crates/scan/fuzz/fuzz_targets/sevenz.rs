//! The 7z reader (sevenz-rust2 behind the held-archive limits), through a file
//! session. The input is the archive's body: its last bytes (how many, the
//! first two bytes say) are the next header, and a valid signature header
//! with their CRC is put in front, so the header parse and the decoders are
//! reached rather than stopped at the CRC check. A second run feeds the raw
//! input after the bare magic.
#![no_main]

#[path = "../shared/compressed.rs"]
mod compressed;

use libfuzzer_sys::fuzz_target;

const MAGIC: &[u8] = b"7z\xbc\xaf\x27\x1c\x00\x04";

fuzz_target!(|data: &[u8]| {
    compressed::scan_with_magic(MAGIC, data);
    if data.len() < 3 {
        return;
    }
    let body = &data[2..];
    let header_len = usize::from(u16::from_le_bytes([data[0], data[1]])) % body.len() + 1;
    let header = &body[body.len() - header_len..];
    let mut start = Vec::with_capacity(20);
    start.extend_from_slice(&((body.len() - header_len) as u64).to_le_bytes());
    start.extend_from_slice(&(header_len as u64).to_le_bytes());
    start.extend_from_slice(&crc32fast::hash(header).to_le_bytes());
    let mut file = MAGIC.to_vec();
    file.extend_from_slice(&crc32fast::hash(&start).to_le_bytes());
    file.extend_from_slice(&start);
    compressed::scan_with_magic(&file, body);
});
