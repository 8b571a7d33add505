//! Modified UTF-7 (RFC 3501 §5.1.3), the form IMAP4rev1 clients give
//! mailbox names in and the form they are stored in. IMAP4rev2 clients
//! use UTF-8 on the wire (RFC 9051 §5.1); the session converts with
//! [`encode`] and [`decode`] at the protocol edge.

use base64::alphabet::IMAP_MUTF7;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;

/// Modified BASE64: `,` for `/`, no padding, no stray bits.
const B64: GeneralPurpose = GeneralPurpose::new(
    &IMAP_MUTF7,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone),
);

/// Whether a character stands for itself in modified UTF-7.
fn direct(c: char) -> bool {
    (' '..='~').contains(&c)
}

/// A name in modified UTF-7: printable ASCII as itself (`&` as `&-`),
/// everything else as UTF-16 in modified BASE64 between `&` and `-`.
pub(crate) fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut units: Vec<u16> = Vec::new();
    let flush = |units: &mut Vec<u16>, out: &mut String| {
        if units.is_empty() {
            return;
        }
        let bytes: Vec<u8> = units.iter().flat_map(|u| u.to_be_bytes()).collect();
        out.push('&');
        out.push_str(&B64.encode(bytes));
        out.push('-');
        units.clear();
    };
    for c in name.chars() {
        if direct(c) {
            flush(&mut units, &mut out);
            if c == '&' {
                out.push_str("&-");
            } else {
                out.push(c);
            }
        } else {
            let mut buf = [0u16; 2];
            units.extend_from_slice(c.encode_utf16(&mut buf));
        }
    }
    flush(&mut units, &mut out);
    out
}

/// The name a modified UTF-7 string stands for, or `None` when it is not
/// valid modified UTF-7: a byte outside printable ASCII, an unterminated
/// or malformed shift, printable ASCII or a broken surrogate inside a
/// shift, or two shifts in a row (RFC 3501 §5.1.3 requires one). Every
/// valid string is the [`encode`]ing of what it decodes to.
pub(crate) fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut after_shift = false;
    while i < bytes.len() {
        let b = bytes[i];
        if b != b'&' {
            if !direct(char::from(b)) {
                return None;
            }
            out.push(char::from(b));
            after_shift = false;
            i += 1;
            continue;
        }
        let end = i + 1 + bytes[i + 1..].iter().position(|&c| c == b'-')?;
        if end == i + 1 {
            out.push('&');
            after_shift = false;
        } else {
            if after_shift {
                return None;
            }
            let raw = B64.decode(&bytes[i + 1..end]).ok()?;
            if raw.len() % 2 != 0 {
                return None;
            }
            let units: Vec<u16> = raw
                .chunks_exact(2)
                .map(|p| u16::from_be_bytes([p[0], p[1]]))
                .collect();
            let s = String::from_utf16(&units).ok()?;
            if s.chars().any(direct) {
                return None;
            }
            out.push_str(&s);
            after_shift = true;
        }
        i = end + 1;
    }
    Some(out)
}

/// Whether a name is the same in both forms (ASCII without `&`), so no
/// conversion or lookup is needed.
pub(crate) fn is_plain(name: &str) -> bool {
    name.chars().all(|c| direct(c) && c != '&')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc_examples() {
        // RFC 3501 §5.1.3.
        assert_eq!(
            encode("~peter/mail/台北/日本語"),
            "~peter/mail/&U,BTFw-/&ZeVnLIqe-"
        );
        assert_eq!(
            decode("~peter/mail/&U,BTFw-/&ZeVnLIqe-").as_deref(),
            Some("~peter/mail/台北/日本語")
        );
        assert_eq!(encode("Entwürfe"), "Entw&APw-rfe");
        assert_eq!(encode("A&B"), "A&-B");
        assert_eq!(decode("A&-B").as_deref(), Some("A&B"));
        assert_eq!(encode("😀"), "&2D3eAA-");
        assert_eq!(decode("&2D3eAA-").as_deref(), Some("😀"));
    }

    #[test]
    fn invalid_forms() {
        for bad in [
            "&U,BTFw-&ZeVnLIqe-", // two shifts in a row
            "&Jjo!",              // unterminated
            "A&B",                // `&` not escaped
            "&AGE-",              // "a" inside a shift
            "&2D0-",              // lone surrogate
            "&AO-",               // odd byte count / stray bits
            "caf\u{e9}",          // 8-bit
            "a\tb",               // control character
        ] {
            assert_eq!(decode(bad), None, "{bad}");
        }
        assert!(is_plain("INBOX/Sent Items"));
        assert!(!is_plain("A&B") && !is_plain("Café"));
    }

    proptest! {
        /// Any name survives the round trip, and its form is printable ASCII.
        #[test]
        fn round_trip(name in "\\PC{0,40}") {
            let wire = encode(&name);
            prop_assert!(wire.bytes().all(|b| (0x20..0x7f).contains(&b)));
            prop_assert_eq!(decode(&wire), Some(name));
        }

        /// Valid modified UTF-7 has one spelling: decoding then encoding
        /// gives the input back; anything else is refused, never mangled.
        #[test]
        fn canonical(text in "[ -~]{0,30}") {
            if let Some(name) = decode(&text) {
                prop_assert_eq!(encode(&name), text);
            }
        }

        #[test]
        fn shifts_decode_canonically(name in "[a-z&]{0,5}[\u{80}-\u{10ffff}]{0,6}[a-z&]{0,5}") {
            let wire = encode(&name);
            prop_assert_eq!(decode(&wire), Some(name.clone()));
            prop_assert_eq!(encode(&decode(&wire).unwrap()), wire);
        }
    }
}
