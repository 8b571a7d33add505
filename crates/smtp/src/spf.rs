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
use mail_auth::{MessageAuthenticator, ReceivedSpf, SpfOutput, SpfResult};

use crate::auth_checks::{AuthChecksConfig, SpfMode};

/// How long an SPF evaluation may take in all (its DNS lookups included);
/// past it the result is `temperror`.
const SPF_TIME_LIMIT: Duration = Duration::from_secs(20);

/// The SPF checker the SMTP sessions share.
pub struct SpfCheck {
    authenticator: Arc<MessageAuthenticator>,
    mode: SpfMode,
}

/// The outcome for one transaction.
pub(crate) struct SpfVerdict {
    /// The `Received-SPF:` field, CRLF-terminated (`None` in mode "off",
    /// where SPF is evaluated for DMARC only).
    pub field: Option<String>,
    /// What DMARC and `Authentication-Results:` are made of.
    pub output: SpfOutput,
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
    /// A checker sharing `authenticator` (which asks the `[dns]` servers).
    /// `None` when neither SPF nor DMARC is on.
    pub fn new(
        authenticator: Arc<MessageAuthenticator>,
        config: &AuthChecksConfig,
    ) -> Option<SpfCheck> {
        config.needs_spf().then(|| SpfCheck {
            authenticator,
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
        let field = (self.mode != SpfMode::Off)
            .then(|| ReceivedSpf::new(&output, ip, helo, sender, hostname).to_header());
        SpfVerdict {
            refuse: self.mode == SpfMode::Reject && output.result() == SpfResult::Fail,
            result: name(output.result()),
            field,
            output,
        }
    }
}
