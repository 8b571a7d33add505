//! A MIME base64 body, shared by the tests and by the examples (which
//! include this file by its path).

/// `data` in base64 with 76-character lines (RFC 2045 §6.8).
pub fn b64(data: &[u8]) -> Vec<u8> {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(data);
    let mut out = Vec::with_capacity(text.len() * 78 / 76 + 2);
    for line in text.as_bytes().chunks(76) {
        out.extend_from_slice(line);
        out.extend_from_slice(b"\r\n");
    }
    out
}
