//! The ids clients see for the store's rows, the same in every protocol
//! so a client can mix them: JMAP ids (RFC 8620 §1.2: 1 to 255 characters
//! of the URL-safe base64 alphabet) and IMAP object ids (RFC 8474 §4:
//! MAILBOXID, EMAILID, THREADID, 1 to 255 of `ALPHA / DIGIT / "_" / "-"`,
//! which these ids also are). Each kind has its own leading letter,
//! so an id of one kind never parses as another, and none is all digits
//! (which §1.2 advises against).
//!
//! - account `A<account row id>`
//! - mailbox `M<mailbox row id>` (mailbox ids are never given twice)
//! - email `E<blob id>`: an Email is the one stored message text an
//!   account's mailbox entries share, so a copy or a move keeps its id
//!   (RFC 8474 §5.1)
//! - thread `T<thread key, hex>`
//! - blob `B<blob id>` for a whole stored blob (a message, an upload),
//!   `B<blob id>_<n>_<n>...` for one MIME part of a message, by the
//!   part's path (RFC 3501 §6.4.5 section numbers, `.` written `_`)

use crate::{AccountId, BlobId, MailboxId};

/// An account's id.
pub fn account(id: AccountId) -> String {
    format!("A{id}")
}

/// A mailbox's id.
pub fn mailbox(id: MailboxId) -> String {
    format!("M{id}")
}

/// An email's id.
pub fn email(blob: BlobId) -> String {
    format!("E{blob}")
}

/// A thread's id.
pub fn thread(key: i64) -> String {
    format!("T{:x}", key as u64)
}

/// A whole blob's id.
pub fn blob(blob: BlobId) -> String {
    format!("B{blob}")
}

/// The blob id of one MIME part of a message (`section`: "1.2").
pub fn part_blob(blob: BlobId, section: &str) -> String {
    format!("B{blob}_{}", section.replace('.', "_"))
}

fn number(s: &str, prefix: char) -> Option<i64> {
    let digits = s.strip_prefix(prefix)?;
    // Digits only, no sign or leading zero: each row has one spelling.
    if digits.is_empty()
        || digits.len() > 18
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse().ok()
}

/// The account row id of an account id.
pub fn parse_account(s: &str) -> Option<AccountId> {
    number(s, 'A')
}

/// The mailbox row id of a mailbox id.
pub fn parse_mailbox(s: &str) -> Option<MailboxId> {
    number(s, 'M')
}

/// The blob id of an email id.
pub fn parse_email(s: &str) -> Option<BlobId> {
    number(s, 'E')
}

/// The thread key of a thread id.
pub fn parse_thread(s: &str) -> Option<i64> {
    let hex = s.strip_prefix('T')?;
    if hex.is_empty()
        || hex.len() > 16
        || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        || (hex.len() > 1 && hex.starts_with('0'))
    {
        return None;
    }
    u64::from_str_radix(hex, 16).ok().map(|k| k as i64)
}

/// A blob id: the stored blob, and the MIME part's section ("1.2") when
/// it names one.
pub fn parse_blob(s: &str) -> Option<(BlobId, Option<String>)> {
    let (whole, part) = match s.split_once('_') {
        Some((whole, part)) => (whole, Some(part)),
        None => (s, None),
    };
    let blob = number(whole, 'B')?;
    let section = match part {
        None => None,
        Some(p) => {
            let numbers: Vec<&str> = p.split('_').collect();
            if numbers.iter().any(|n| {
                n.is_empty()
                    || n.len() > 9
                    || !n.bytes().all(|b| b.is_ascii_digit())
                    || n.starts_with('0')
            }) {
                return None;
            }
            Some(numbers.join("."))
        }
    };
    Some((blob, section))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_kinds_stay_apart() {
        assert_eq!(parse_account(&account(7)), Some(7));
        assert_eq!(parse_mailbox(&mailbox(12)), Some(12));
        assert_eq!(parse_email(&email(99)), Some(99));
        assert_eq!(parse_thread(&thread(-5)), Some(-5));
        assert_eq!(parse_thread(&thread(0x1f)), Some(0x1f));
        assert_eq!(parse_blob(&blob(3)), Some((3, None)));
        assert_eq!(
            parse_blob(&part_blob(3, "1.2")),
            Some((3, Some("1.2".into())))
        );
        assert_eq!(parse_email(&mailbox(1)), None);
        for bad in ["", "E", "E01", "E-1", "E1x", "e1", "E99999999999999999999"] {
            assert_eq!(parse_email(bad), None, "{bad}");
        }
        for bad in ["B1_", "B1_0", "B1__2", "B1_a", "B_1"] {
            assert_eq!(parse_blob(bad), None, "{bad}");
        }
        assert_eq!(parse_thread("T0"), Some(0));
        assert_eq!(parse_thread("T00"), None);
        assert_eq!(parse_thread("TFF"), None);
    }
}
