//! Message keywords (RFC 3501 §2.3.2 flag-keyword): which strings are
//! keywords, and how a set of them changes.
//!
//! A message's keywords are stored as one space-separated string in
//! `messages.keywords`, each keyword spelled as first written. Keywords
//! compare case-insensitively; as IMAP atoms they are ASCII, so ASCII case
//! folding is the whole rule.

use crate::error::{Result, StoreError};
use crate::model::FlagChange;

/// Whether `k` can be a keyword: a non-empty IMAP atom (RFC 3501 §9,
/// `atom`), which also keeps the space-separated storage unambiguous.
pub(crate) fn is_keyword(k: &str) -> bool {
    !k.is_empty()
        && k.bytes().all(|b| {
            b.is_ascii_graphic()
                && !matches!(b, b'(' | b')' | b'{' | b'%' | b'*' | b'"' | b'\\' | b']')
        })
}

/// Checks keywords given by a client and drops case-insensitive repeats,
/// keeping the first spelling.
pub(crate) fn normalize(keywords: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::with_capacity(keywords.len());
    for k in keywords {
        if !is_keyword(k) {
            return Err(StoreError::Invalid(format!("not a valid keyword: {k:?}")));
        }
        if !out.iter().any(|o| o.eq_ignore_ascii_case(k)) {
            out.push(k.clone());
        }
    }
    Ok(out)
}

/// The keywords of a stored keyword string.
pub(crate) fn split(stored: &str) -> impl Iterator<Item = &str> {
    stored.split(' ').filter(|k| !k.is_empty())
}

/// Whether a stored keyword string holds `k` (case-insensitive).
pub(crate) fn contains(stored: &str, k: &str) -> bool {
    split(stored).any(|s| s.eq_ignore_ascii_case(k))
}

/// How [`merge`] is told the change in SQL (`sluice_keywords(old, op, list)`).
pub(crate) fn op_code(change: FlagChange) -> i64 {
    match change {
        FlagChange::Add => 0,
        FlagChange::Remove => 1,
        FlagChange::Replace => 2,
    }
}

/// Applies a change to a stored keyword string. `list` is space-separated,
/// already [`normalize`]d. Keywords a message already has keep their
/// spelling and place, so a change that changes nothing returns `old`
/// unchanged, byte for byte: that is how an UPDATE sees "no change".
pub(crate) fn merge(old: &str, op: i64, list: &str) -> String {
    let mut out: Vec<&str> = match op {
        // Remove, and Replace: keep what is in both, in the old order.
        1 => split(old).filter(|k| !contains(list, k)).collect(),
        2 => split(old).filter(|k| contains(list, k)).collect(),
        _ => split(old).collect(),
    };
    if op != 1 {
        for k in split(list) {
            if !out.iter().any(|o| o.eq_ignore_ascii_case(k)) {
                out.push(k);
            }
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoms_only() {
        assert!(is_keyword("$Forwarded"));
        assert!(is_keyword("NonJunk"));
        for bad in ["", "a b", "\\Seen", "x(", "é", "a\r", "quote\"d", "a]"] {
            assert!(!is_keyword(bad), "{bad:?}");
        }
        assert!(normalize(&["ok".into(), "not ok".into()]).is_err());
        assert_eq!(
            normalize(&["Work".into(), "WORK".into(), "home".into()]).unwrap(),
            ["Work", "home"]
        );
    }

    #[test]
    fn merge_keeps_first_spelling_and_order() {
        assert_eq!(merge("", 0, "a B"), "a B");
        assert_eq!(merge("Work", 0, "work Home"), "Work Home");
        assert_eq!(merge("Work Home", 1, "WORK"), "Home");
        assert_eq!(merge("Work Home", 1, "other"), "Work Home");
        // Replace with the same set in another order and case: no change.
        assert_eq!(merge("Work Home", 2, "home work"), "Work Home");
        assert_eq!(merge("Work Home", 2, "home x"), "Home x");
        assert_eq!(merge("Work Home", 2, ""), "");
    }
}
