//! The `[auth_checks]` configuration section: checks of who may send for
//! a domain, on mail arriving from other servers (never on authenticated
//! submission: the account vouches for its mail).

use serde::Deserialize;

/// What to do with SPF results (RFC 7208).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpfMode {
    /// No `Received-SPF:` field (SPF is still evaluated when DMARC needs it).
    Off,
    /// Add `Received-SPF:`, refuse nothing.
    Mark,
    /// As `mark`, and refuse mail whose result is `fail`.
    Reject,
}

/// Whether DKIM signatures (RFC 6376) and ARC sets (RFC 8617) are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DkimMode {
    /// Not checked (unless DMARC needs them).
    Off,
    /// Checked and recorded in `Authentication-Results:`. A failed
    /// signature alone never refuses mail (RFC 6376 §6.3): DMARC decides.
    Mark,
}

/// What to do with DMARC results (RFC 7489).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DmarcMode {
    /// No DMARC lookups.
    Off,
    /// Recorded in `Authentication-Results:`, the policy not applied.
    Mark,
    /// The published policy applied to mail that fails: `p=reject` refused
    /// with `550 5.7.1` at the end of DATA, `p=quarantine` delivered to
    /// the recipients' Junk mailboxes.
    Enforce,
}

/// The `[auth_checks]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthChecksConfig {
    /// SPF: "off", "mark" (default) or "reject".
    pub spf: SpfMode,
    /// DKIM and ARC: "off" or "mark" (default).
    pub dkim: DkimMode,
    /// DMARC: "off", "mark" or "enforce" (default).
    pub dmarc: DmarcMode,
    /// The authserv-id of our `Authentication-Results:` fields (RFC 8601
    /// §2.5); default: the server's host name. Fields with this id in
    /// arriving mail are forgeries and are removed.
    pub authserv_id: Option<String>,
    /// Seal mail forwarded to remote alias targets with ARC (RFC 8617),
    /// with the DKIM key of the alias's domain (default true).
    pub arc_seal: bool,
}

impl Default for AuthChecksConfig {
    fn default() -> Self {
        AuthChecksConfig {
            spf: SpfMode::Mark,
            dkim: DkimMode::Mark,
            dmarc: DmarcMode::Enforce,
            authserv_id: None,
            arc_seal: true,
        }
    }
}

impl AuthChecksConfig {
    /// Whether SPF must be evaluated: for its own field or for DMARC.
    pub fn needs_spf(&self) -> bool {
        self.spf != SpfMode::Off || self.dmarc != DmarcMode::Off
    }

    /// Whether the message itself is checked (DKIM, ARC, DMARC), which
    /// means an `Authentication-Results:` field on every delivered message.
    pub fn checks_message(&self) -> bool {
        self.dkim != DkimMode::Off || self.dmarc != DmarcMode::Off
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_every_key() {
        let c: AuthChecksConfig = toml::from_str("").unwrap();
        assert_eq!(c, AuthChecksConfig::default());
        let c: AuthChecksConfig = toml::from_str(
            "spf = \"off\"\ndkim = \"off\"\ndmarc = \"mark\"\nauthserv_id = \"mx.example.org\"\n",
        )
        .unwrap();
        assert!(c.needs_spf() && c.checks_message());
        let off: AuthChecksConfig =
            toml::from_str("spf = \"off\"\ndkim = \"off\"\ndmarc = \"off\"\n").unwrap();
        assert!(!off.needs_spf() && !off.checks_message());
        let bad = toml::from_str::<AuthChecksConfig>("dmarc = \"strict\"\n").unwrap_err();
        assert!(bad.to_string().contains("unknown variant"), "{bad}");
    }
}
