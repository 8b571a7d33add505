//! The written form of a storage limit, as the command line and the admin
//! page take it: `500M`, `2G`, `1048576`, or `none`.

use crate::error::{Result, StoreError};

/// A size limit: bytes, with an optional K/M/G/T suffix (powers of 1024),
/// or `none` for unlimited (`Ok(None)`).
pub fn parse_quota_limit(text: &str) -> Result<Option<u64>> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let not_a_size = || {
        StoreError::Invalid(format!(
            "not a size: {text:?} (use bytes, or a K, M, G or T suffix, or none)"
        ))
    };
    let (digits, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_uppercase()),
        _ => (t, 'B'),
    };
    let shift = match unit {
        'B' => 0,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        'T' => 40,
        _ => return Err(not_a_size()),
    };
    let n: u64 = digits.parse().map_err(|_| not_a_size())?;
    n.checked_mul(1 << shift)
        .map(Some)
        .ok_or_else(|| StoreError::Invalid(format!("size too large: {text:?}")))
}

#[cfg(test)]
mod tests {
    use super::parse_quota_limit;

    #[test]
    fn limits() {
        assert_eq!(parse_quota_limit("none").unwrap(), None);
        assert_eq!(parse_quota_limit("1048576").unwrap(), Some(1 << 20));
        assert_eq!(parse_quota_limit("500M").unwrap(), Some(500 << 20));
        assert_eq!(parse_quota_limit("2g").unwrap(), Some(2 << 30));
        assert!(parse_quota_limit("").is_err());
        assert!(parse_quota_limit("12X").is_err());
        assert!(parse_quota_limit("-1").is_err());
        assert!(parse_quota_limit("99999999999T").is_err());
    }
}
