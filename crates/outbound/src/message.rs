//! A stored message as it leaves: read piece by piece from the store,
//! without the `Return-Path:` field local delivery put on top. That field
//! belongs to final delivery (RFC 5321 §4.4: a message sent on "SHOULD
//! NOT" carry one), and the receiving side adds its own.

use store::{BlobId, Store};

/// Piece `seq` of a message as it is sent (and signed); `None` past the
/// end.
pub async fn piece(store: &dyn Store, blob: BlobId, seq: u32) -> store::Result<Option<Vec<u8>>> {
    let mut piece = store.read_chunk(blob, seq).await?;
    if seq == 0 {
        if let Some(p) = piece.as_mut() {
            strip_return_path(p);
        }
    }
    Ok(piece)
}

/// Removes a `Return-Path:` field at the very start of a message,
/// continuation lines included. The stored header starts in the first
/// piece (pieces are far larger than a Return-Path field).
fn strip_return_path(text: &mut Vec<u8>) {
    const NAME: &[u8] = b"return-path:";
    if text.len() < NAME.len() || !text[..NAME.len()].eq_ignore_ascii_case(NAME) {
        return;
    }
    let mut end = 0;
    loop {
        match memchr::memchr(b'\n', &text[end..]) {
            Some(i) => end += i + 1,
            None => return, // the field does not end in this piece: leave it
        }
        match text.get(end) {
            Some(b' ' | b'\t') => continue,
            Some(_) => break,
            None => return,
        }
    }
    text.drain(..end);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stripped(text: &str) -> String {
        let mut v = text.as_bytes().to_vec();
        strip_return_path(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn only_a_leading_return_path_goes() {
        assert_eq!(
            stripped("Return-Path: <a@b.example>\r\nReceived: x\r\n\r\nbody"),
            "Received: x\r\n\r\nbody"
        );
        assert_eq!(
            stripped("return-path:\r\n <a@b.example>\r\nFrom: a\r\n"),
            "From: a\r\n"
        );
        let kept = "From: a\r\nReturn-Path: <a@b.example>\r\n\r\n";
        assert_eq!(stripped(kept), kept);
        let cut = "Return-Path: <a@b.exa";
        assert_eq!(stripped(cut), cut);
    }
}
