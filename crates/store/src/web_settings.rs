//! Webmail settings as both back ends accept them.

use crate::error::{Result, StoreError};
use crate::model::WebSettings;

/// Largest page size a user may choose.
pub(crate) const MAX_PAGE_SIZE: u32 = 500;

/// Settings as they may be stored: a page size in bounds, and no line
/// break in a sender address (the list is stored one per line).
/// `Invalid` otherwise.
pub(crate) fn check_settings(s: &WebSettings) -> Result<()> {
    if s.page_size == 0 || s.page_size > MAX_PAGE_SIZE {
        return Err(StoreError::Invalid(format!(
            "page size must be between 1 and {MAX_PAGE_SIZE}"
        )));
    }
    if s.remote_ok.iter().any(|a| a.contains(['\n', '\r'])) {
        return Err(StoreError::Invalid(
            "sender address with a line break".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_line_breaks() {
        let ok = |page_size: u32, remote_ok: &[&str]| {
            check_settings(&WebSettings {
                page_size,
                remote_ok: remote_ok.iter().map(|s| s.to_string()).collect(),
                ..WebSettings::default()
            })
            .is_ok()
        };
        assert!(ok(1, &[]));
        assert!(ok(MAX_PAGE_SIZE, &["ann@example.org"]));
        assert!(!ok(0, &[]));
        assert!(!ok(MAX_PAGE_SIZE + 1, &[]));
        assert!(!ok(50, &["ann@example.org\nbob@example.org"]));
        assert!(!ok(50, &["ann@example.org\r"]));
    }
}
