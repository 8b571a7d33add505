//! The names the store keeps, checked the same way by both back ends
//! before they are written: domain names and account or alias addresses
//! for the directory, DKIM selectors, Sieve script names.

use crate::directory::normalize_address;
use crate::error::{Result, StoreError};

/// A local domain's name as stored: trimmed, without a trailing dot,
/// lowercased. `Invalid` for an empty name, one over 253 bytes (the
/// longest a dotted name can be, RFC 1035 §2.3.4), one with an empty
/// label, or characters other than letters, digits, `-`, `_` and `.`
/// (letters of any script: internationalised names are kept as written,
/// not as A-labels).
pub(crate) fn valid_domain(name: &str) -> Result<String> {
    let name = name.trim().trim_end_matches('.').to_lowercase();
    let ok = !name.is_empty()
        && name.len() <= 253
        && !name.starts_with('.')
        && !name.contains("..")
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '.' || c == '_');
    if ok {
        Ok(name)
    } else {
        Err(StoreError::Invalid(format!(
            "not a valid domain name: {name:?}"
        )))
    }
}

/// An account or alias address as stored: normalised
/// ([`normalize_address`]), with no white space, control characters or
/// angle brackets, and a domain [`valid_domain`] accepts. `Invalid`
/// otherwise.
pub(crate) fn valid_address(address: &str) -> Result<String> {
    let normal = normalize_address(address)
        .filter(|a| {
            !a.chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == '<' || c == '>')
        })
        .ok_or_else(|| StoreError::Invalid(format!("not a valid address: {address:?}")))?;
    let (_, domain) = normal.rsplit_once('@').expect("normalised");
    valid_domain(domain)?;
    Ok(normal)
}

/// A DKIM selector: one or more dot-separated labels (RFC 6376 §3.1) of
/// ASCII letters, digits, `-` and `_`, none starting or ending with `-`,
/// at most 63 bytes in all. `Invalid` otherwise.
pub(crate) fn valid_selector(selector: &str) -> Result<()> {
    let ok = !selector.is_empty()
        && selector.len() <= 63
        && selector.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "not a valid DKIM selector: {selector:?}"
        )))
    }
}

/// RFC 5804 §1.6: a script name is UTF-8 without control characters
/// (and without the line and paragraph separators). We also bound it.
pub(crate) fn valid_script_name(name: &str) -> Result<()> {
    let bad = |c: char| c.is_control() || c == '\u{2028}' || c == '\u{2029}';
    if name.is_empty() || name.len() > 512 || name.chars().any(bad) {
        return Err(StoreError::Invalid(format!(
            "not a valid script name: {name:?}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains() {
        assert_eq!(valid_domain(" Example.ORG. ").unwrap(), "example.org");
        assert_eq!(valid_domain("bücher.example").unwrap(), "bücher.example");
        for bad in ["", ".", ".a", "a..b", "a b", "a/b", &"a".repeat(254)] {
            assert!(
                matches!(valid_domain(bad), Err(StoreError::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn addresses() {
        assert_eq!(
            valid_address("Ann@Example.ORG.").unwrap(),
            "ann@example.org"
        );
        for bad in [
            "ann",
            "@example.org",
            "ann@",
            "a b@example.org",
            "<ann@example.org>",
            "ann@a..b",
        ] {
            assert!(
                matches!(valid_address(bad), Err(StoreError::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn selectors() {
        for good in ["s1", "2026-11", "mail.example_sel", "a.b.c"] {
            assert!(valid_selector(good).is_ok(), "{good:?}");
        }
        for bad in ["", "a..b", "-a", "a-", ".a", "a b", "é", &"a".repeat(64)] {
            assert!(
                matches!(valid_selector(bad), Err(StoreError::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn script_names() {
        assert!(valid_script_name("vacation rules ✉").is_ok());
        for bad in [
            "",
            "a\nb",
            "a\u{0}b",
            "a\u{2028}b",
            "a\u{2029}b",
            &"a".repeat(513),
        ] {
            assert!(
                matches!(valid_script_name(bad), Err(StoreError::Invalid(_))),
                "{bad:?}"
            );
        }
    }
}
