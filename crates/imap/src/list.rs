//! LIST and LSUB: name patterns (RFC 3501 §6.3.8) and mailbox attributes
//! (RFC 3348 CHILDREN, RFC 6154 SPECIAL-USE).

use imap_codec::imap_types::flag::FlagNameAttribute;
use store::MailboxInfo;

/// The hierarchy separator.
pub(crate) const DELIMITER: char = '/';

/// Whether `name` matches a LIST pattern: `*` matches anything, `%`
/// anything but the hierarchy separator. INBOX matches case-insensitively.
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some(('*', rest)) => (0..=n.len()).any(|i| go(rest, &n[i..])),
            Some(('%', rest)) => (0..=n.len())
                .take_while(|&i| i == 0 || n[i - 1] != DELIMITER)
                .any(|i| go(rest, &n[i..])),
            Some((c, rest)) => n.first() == Some(c) && go(rest, &n[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    if go(&p, &n) {
        return true;
    }
    // INBOX is case-insensitive (RFC 3501 §5.1), also in patterns.
    if name == "INBOX" || name.starts_with("INBOX/") {
        let upper: String = pattern
            .char_indices()
            .map(|(i, c)| if i < 5 { c.to_ascii_uppercase() } else { c })
            .collect();
        let p: Vec<char> = upper.chars().collect();
        return go(&p, &n);
    }
    false
}

/// The pattern a LIST reference and mailbox argument make together.
pub(crate) fn combine(reference: &str, pattern: &str) -> String {
    if reference.is_empty() || pattern.starts_with(DELIMITER) {
        pattern.to_string()
    } else if reference.ends_with(DELIMITER) {
        format!("{reference}{pattern}")
    } else {
        format!("{reference}{DELIMITER}{pattern}")
    }
}

fn attr(name: &str) -> Option<FlagNameAttribute<'static>> {
    // The attribute is an atom after the backslash.
    imap_codec::imap_types::core::Atom::try_from(name.to_string())
        .ok()
        .map(FlagNameAttribute::from)
}

/// Attributes of a mailbox among the account's mailboxes.
pub(crate) fn attributes(
    mailbox: &MailboxInfo,
    all: &[MailboxInfo],
) -> Vec<FlagNameAttribute<'static>> {
    let prefix = format!("{}{DELIMITER}", mailbox.name);
    let children = all.iter().any(|m| m.name.starts_with(&prefix));
    let mut out: Vec<FlagNameAttribute<'static>> = Vec::new();
    out.extend(attr(if children {
        "HasChildren"
    } else {
        "HasNoChildren"
    }));
    if let Some(special) = &mailbox.special_use {
        out.extend(attr(special.trim_start_matches('\\')));
    }
    out
}

/// Parents a name implies (`a/b/c` → `a`, `a/b`).
pub(crate) fn parents(name: &str) -> Vec<String> {
    name.match_indices(DELIMITER)
        .map(|(i, _)| name[..i].to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(matches("*", "a/b/c"));
        assert!(matches("%", "INBOX"));
        assert!(!matches("%", "a/b"));
        assert!(matches("a/%", "a/b"));
        assert!(!matches("a/%", "a/b/c"));
        assert!(matches("a/*", "a/b/c"));
        assert!(matches("inbox", "INBOX"));
        assert!(matches("Inbox/%", "INBOX/x"));
        assert!(!matches("sent", "Sent"));
        assert!(matches("S%t", "Sent"));
        assert!(matches("", "") && !matches("", "INBOX"));
    }

    #[test]
    fn references() {
        assert_eq!(combine("", "*"), "*");
        assert_eq!(combine("a", "*"), "a/*");
        assert_eq!(combine("a/", "%"), "a/%");
    }

    #[test]
    fn implied_parents() {
        assert_eq!(parents("a/b/c"), vec!["a", "a/b"]);
        assert!(parents("a").is_empty());
    }
}
