//! Mailbox names as both back ends store them, and the mailboxes every
//! account starts with.
//!
//! Names are stored as given, with `/` as the hierarchy separator. `INBOX`
//! is the one case-insensitive name (RFC 3501 §5.1), so a first component
//! spelled `inbox` in any case is stored and looked up as `INBOX`.

use crate::error::{Result, StoreError};

/// The hierarchy separator.
pub(crate) const SEPARATOR: char = '/';

/// Longest mailbox name accepted, in bytes.
const MAX_NAME: usize = 1000;

/// RFC 6154 and RFC 8457 special uses, as they are stored.
const SPECIAL_USES: &[&str] = &[
    "\\All",
    "\\Archive",
    "\\Drafts",
    "\\Flagged",
    "\\Important",
    "\\Junk",
    "\\Sent",
    "\\Trash",
];

/// Mailboxes every new account gets, with their RFC 6154 special use.
pub(crate) const DEFAULT_MAILBOXES: &[(&str, Option<&str>)] = &[
    ("INBOX", None),
    ("Sent", Some("\\Sent")),
    ("Drafts", Some("\\Drafts")),
    ("Trash", Some("\\Trash")),
    ("Junk", Some("\\Junk")),
    ("Archive", Some("\\Archive")),
];

/// A name as looked up: the INBOX component in its stored spelling.
pub(crate) fn lookup_name(name: &str) -> String {
    let (first, rest) = match name.split_once(SEPARATOR) {
        Some((first, rest)) => (first, Some(rest)),
        None => (name, None),
    };
    if first.eq_ignore_ascii_case("INBOX") {
        match rest {
            Some(rest) => format!("INBOX{SEPARATOR}{rest}"),
            None => "INBOX".to_string(),
        }
    } else {
        name.to_string()
    }
}

/// Checks a name for a new mailbox and returns it as it will be stored.
pub(crate) fn valid_new_name(name: &str) -> Result<String> {
    let bad = |why: &str| Err(StoreError::Invalid(format!("mailbox name {name:?}: {why}")));
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > MAX_NAME {
        return bad("too long");
    }
    if name.chars().any(char::is_control) {
        return bad("control characters are not allowed");
    }
    if name.starts_with(SEPARATOR) || name.ends_with(SEPARATOR) || name.contains("//") {
        return bad("empty hierarchy level");
    }
    Ok(lookup_name(name))
}

/// A special use in its stored spelling.
pub(crate) fn valid_special_use(use_: &str) -> Result<&'static str> {
    SPECIAL_USES
        .iter()
        .find(|s| s.eq_ignore_ascii_case(use_))
        .copied()
        .ok_or_else(|| StoreError::Invalid(format!("unknown special use {use_:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(lookup_name("inbox"), "INBOX");
        assert_eq!(lookup_name("Inbox/Sub"), "INBOX/Sub");
        assert_eq!(lookup_name("Inboxes"), "Inboxes");
        assert_eq!(valid_new_name("a/b").unwrap(), "a/b");
        assert_eq!(valid_new_name("Zürich").unwrap(), "Zürich");
        for bad in ["", "/a", "a/", "a//b", "a\rb", "a\nb", "a\0b", "/"] {
            assert!(
                matches!(valid_new_name(bad), Err(StoreError::Invalid(_))),
                "{bad:?}"
            );
        }
        assert!(valid_new_name(&"x".repeat(MAX_NAME + 1)).is_err());
        assert_eq!(valid_special_use("\\sent").unwrap(), "\\Sent");
        assert!(valid_special_use("\\Bogus").is_err());
    }
}
