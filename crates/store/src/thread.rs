//! Which conversation a message belongs to, from its own header alone, so
//! that every back end files it the same way at delivery and no message
//! ever moves to another thread afterwards (JMAP's `threadId`, RFC 8621
//! §3).
//!
//! A message's thread is named by its root: the first message id of
//! `References:` (RFC 5322 §3.6.4: the thread's start), else that of
//! `In-Reply-To:`, else its own `Message-ID:`. A reply that carries its
//! parents' `References:` so lands beside them. The key is the root's
//! SHA-256 cut to 63 bits and made negative, which no blob id (the key of
//! a message without any id) can be.

use sha2::{Digest, Sha256};

/// The thread key of a message whose top-level header block is `header`,
/// or `None` when it names no message id (its thread is then its own,
/// keyed by its blob id).
pub(crate) fn thread_root(header: &[u8]) -> Option<i64> {
    let mut references = None;
    let mut in_reply_to = None;
    let mut message_id = None;
    for (name, value) in fields(header) {
        let slot = if name.eq_ignore_ascii_case(b"references") {
            &mut references
        } else if name.eq_ignore_ascii_case(b"in-reply-to") {
            &mut in_reply_to
        } else if name.eq_ignore_ascii_case(b"message-id") {
            &mut message_id
        } else {
            continue;
        };
        if slot.is_none() {
            *slot = first_id(&value);
        }
    }
    let root = references.or(in_reply_to).or(message_id)?;
    let digest = Sha256::digest(root.as_bytes());
    let n = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    Some(-1 - (n >> 1) as i64)
}

/// The header fields of a block, unfolded: (name, value).
fn fields(header: &[u8]) -> Vec<(&[u8], Vec<u8>)> {
    let mut out: Vec<(&[u8], Vec<u8>)> = Vec::new();
    for line in header.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        if line[0] == b' ' || line[0] == b'\t' {
            if let Some((_, value)) = out.last_mut() {
                value.push(b' ');
                value.extend_from_slice(line);
            }
            continue;
        }
        if let Some(colon) = line.iter().position(|&b| b == b':') {
            out.push((&line[..colon], line[colon + 1..].to_vec()));
        }
    }
    out
}

/// The first `<id>` of a field value, without its angle brackets; an id
/// without them (some mailers) is the first word.
fn first_id(value: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(value);
    if let Some(start) = text.find('<') {
        let rest = &text[start + 1..];
        let end = rest.find('>')?;
        let id = rest[..end].trim();
        return (!id.is_empty()).then(|| id.to_string());
    }
    text.split_whitespace().next().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_share_their_roots_thread() {
        let first = thread_root(b"Message-ID: <a@x>\r\nSubject: hi\r\n\r\n").unwrap();
        let reply =
            thread_root(b"Message-ID: <b@x>\r\nIn-Reply-To: <a@x>\r\nReferences: <a@x>\r\n\r\n")
                .unwrap();
        let folded = thread_root(
            b"Message-ID: <c@x>\r\nReferences: <a@x>\r\n <b@x>\r\nIn-Reply-To: <b@x>\r\n\r\n",
        )
        .unwrap();
        let only_reply_to =
            thread_root(b"message-id: <d@x>\r\nin-reply-to: <a@x>\r\n\r\n").unwrap();
        assert_eq!(first, reply);
        assert_eq!(first, folded);
        assert_eq!(first, only_reply_to);
        assert!(first < 0);
        let other = thread_root(b"Message-ID: <z@x>\r\n\r\n").unwrap();
        assert_ne!(first, other);
        assert_eq!(thread_root(b"Subject: no ids\r\n\r\n"), None);
        assert_eq!(thread_root(b"Message-ID: <>\r\n\r\n"), None);
        // The body is not read.
        assert_eq!(
            thread_root(b"Subject: x\r\n\r\nMessage-ID: <a@x>\r\n"),
            None
        );
    }

    proptest::proptest! {
        #[test]
        fn any_header_is_read_without_panic(h in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = thread_root(&h);
        }
    }
}
