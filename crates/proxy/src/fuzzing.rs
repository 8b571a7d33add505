//! Entry points for the fuzz targets in `fuzz/`; not an API.

use crate::structure::Structure;

/// A message cut by the POP3 proxy: its lines go to the MIME tracker as
/// the session hands them over (whole, long ones in pieces of at most
/// `data[0]` + 1 bytes), then the tracker writes the text that closes the
/// message. Neither may panic, whatever the message.
pub fn message_structure(data: &[u8]) {
    let Some((&piece, text)) = data.split_first() else {
        return;
    };
    let piece = usize::from(piece) + 1;
    let mut structure = Structure::new(8);
    for line in text.split_inclusive(|&b| b == b'\n') {
        for part in line.chunks(piece) {
            structure.push(part);
        }
    }
    let _ = structure.close("a part was removed");
}
