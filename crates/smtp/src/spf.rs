//! SPF (RFC 7208) for mail arriving on port 25: whether the client may
//! send for the envelope sender's domain (or, for the null sender, for
//! its HELO name).
//!
//! The check runs once a transaction has a valid recipient, as the data
//! stage starts: the trust gate spends no DNS lookups on connections that
//! name nobody. Its result goes into a `Received-SPF:` field (RFC 7208
//! §9.1) on the stored message; with `spf = "reject"` a `fail` is refused
//! with `550 5.7.23` (RFC 7372) instead. Rejecting on SPF alone breaks
//! plain forwarding, which is why "mark" is the default (DMARC decides
//! better, with DKIM beside SPF). Authenticated submission is not
//! checked: the account vouches for its mail.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use mail_auth::common::headers::HeaderWriter;
use mail_auth::{MessageAuthenticator, ReceivedSpf, SpfResult};

/// How long an SPF evaluation may take in all (its DNS lookups included);
/// past it the result is `temperror`.
const SPF_TIME_LIMIT: Duration = Duration::from_secs(20);

/// What to do with SPF results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpfMode {
    /// No lookups.
    Off,
    /// Add `Received-SPF:`, refuse nothing.
    Mark,
    /// As `mark`, and refuse mail whose result is `fail`.
    Reject,
}

/// The `[auth_checks]` configuration section: checks of who may send for
/// a domain, on mail arriving from other servers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthChecksConfig {
    /// SPF: "off", "mark" (default) or "reject".
    pub spf: SpfMode,
}

impl Default for AuthChecksConfig {
    fn default() -> Self {
        AuthChecksConfig { spf: SpfMode::Mark }
    }
}

/// The SPF checker the SMTP sessions share.
pub struct SpfCheck {
    authenticator: Arc<MessageAuthenticator>,
    mode: SpfMode,
}

/// The outcome for one transaction.
pub(crate) struct SpfVerdict {
    /// The `Received-SPF:` field, CRLF-terminated.
    pub field: String,
    /// Refuse the transaction (mode "reject" and a `fail`).
    pub refuse: bool,
    /// `pass`, `fail`, ... for the log.
    pub result: &'static str,
}

fn name(result: SpfResult) -> &'static str {
    match result {
        SpfResult::Pass => "pass",
        SpfResult::Fail => "fail",
        SpfResult::SoftFail => "softfail",
        SpfResult::Neutral => "neutral",
        SpfResult::TempError => "temperror",
        SpfResult::PermError => "permerror",
        SpfResult::None => "none",
    }
}

impl SpfCheck {
    /// A checker asking `resolver` (the `[dns]` servers). `None` for mode
    /// "off".
    pub fn new(
        resolver: mail_auth::hickory_resolver::TokioResolver,
        config: &AuthChecksConfig,
    ) -> Option<SpfCheck> {
        (config.spf != SpfMode::Off).then(|| SpfCheck {
            authenticator: Arc::new(MessageAuthenticator(resolver)),
            mode: config.spf,
        })
    }

    /// Checks a transaction from `ip`, which said `helo`, for `sender`
    /// (empty for the null sender).
    pub(crate) async fn check(
        &self,
        ip: IpAddr,
        helo: &str,
        sender: &str,
        hostname: &str,
    ) -> SpfVerdict {
        let params = mail_auth::spf::verify::SpfParameters::verify(ip, helo, hostname, sender);
        let output =
            match tokio::time::timeout(SPF_TIME_LIMIT, self.authenticator.verify_spf(params)).await
            {
                Ok(output) => output,
                Err(_) => mail_auth::SpfOutput::new(
                    sender.rsplit_once('@').map_or(helo, |(_, d)| d).to_string(),
                )
                .with_result(SpfResult::TempError),
            };
        let field = ReceivedSpf::new(&output, ip, helo, sender, hostname).to_header();
        SpfVerdict {
            refuse: self.mode == SpfMode::Reject && output.result() == SpfResult::Fail,
            result: name(output.result()),
            field,
        }
    }
}
