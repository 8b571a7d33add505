//! `[web]` settings.

use serde::Deserialize;

/// `[web]`: the webmail.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfig {
    /// How long a login lasts, in hours.
    pub session_hours: u64,
    /// Seconds before a failed login is answered (doubled for each recent
    /// failure from the same address, as for IMAP and POP3).
    pub auth_failure_delay_secs: u64,
    /// Decoded text of one message body shown at most, in bytes; longer
    /// bodies are cut with a note (the source view shows everything).
    pub max_body_bytes: usize,
    /// Largest compose upload (text and attachments together), in bytes.
    /// Uploads are streamed into the store, never held in memory.
    pub max_upload_bytes: usize,
    /// Accounts that may use the admin pages (`/admin`): the common
    /// directory tasks of the `sluice` command line, in the browser.
    /// Empty (the default): nobody.
    pub admins: Vec<String>,
    /// Log lines kept in memory for the admin page's log view (0: none).
    pub admin_log_lines: usize,
    /// The MTA-STS policy served for `mta-sts.DOMAIN` (RFC 8461).
    pub mta_sts_mode: crate::MtaStsMode,
    /// CA certificates (PEM) trusted besides the web PKI for one-click
    /// unsubscribe POSTs (RFC 8058): a site's own CA. `None`: the web PKI
    /// alone.
    pub unsubscribe_ca_file: Option<std::path::PathBuf>,
}

impl WebConfig {
    /// Whether `address` is one of [`WebConfig::admins`] (case does not
    /// matter, as for logins).
    pub fn is_admin(&self, address: &str) -> bool {
        self.admins.iter().any(|a| a.eq_ignore_ascii_case(address))
    }
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            session_hours: 168,
            auth_failure_delay_secs: 1,
            max_body_bytes: 2 * 1024 * 1024,
            max_upload_bytes: 25 * 1024 * 1024,
            admins: Vec::new(),
            admin_log_lines: 5000,
            mta_sts_mode: crate::MtaStsMode::Testing,
            unsubscribe_ca_file: None,
        }
    }
}
