//! TLS results per destination domain: what the last delivery attempt
//! got (kind of policy, TLS version and cipher, verified or not, failure),
//! the counts a TLS-RPT report needs, kept in memory with a bounded
//! number of domains, and logged so that a downgrade stands out.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Mutex;

use super::cache::unix_now;
use super::tlsrpt::{self, FailureType, PolicyCounts, ReportPolicy, Reporter};
use super::{DaneStatus, MxTls};

/// The TLS outcome of one delivery attempt to one MX.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOutcome {
    /// The policy applied: "dane", "mta-sts" or "opportunistic".
    pub kind: &'static str,
    /// What DANE made of the MX (why it applied or not).
    pub dane: DaneStatus,
    /// The policy as a TLS-RPT report names it.
    pub policy: ReportPolicy,
    /// The negotiated TLS version (`TLSv1_3`), `None` for clear text or a
    /// failed handshake.
    pub version: Option<String>,
    /// The negotiated cipher suite.
    pub cipher: Option<String>,
    /// Whether the certificate was verified (DANE or web PKI).
    pub verified: bool,
    /// What went wrong: handshake failure, certificate not verified,
    /// STARTTLS not offered, MX not allowed by the policy.
    pub failure: Option<String>,
    /// The TLS-RPT result type of the failure (RFC 8460 §4.3).
    pub result_type: Option<FailureType>,
    /// The MX address connected to, when known.
    pub receiving_ip: Option<IpAddr>,
}

impl TlsOutcome {
    fn new(mx: &MxTls) -> TlsOutcome {
        TlsOutcome {
            kind: mx.kind,
            dane: mx.dane,
            policy: mx.report_policy.clone(),
            version: None,
            cipher: None,
            verified: false,
            failure: None,
            result_type: None,
            receiving_ip: None,
        }
    }

    /// A completed handshake made with `mx.client_config`: version and
    /// cipher from the connection, verification from the verifier's notes
    /// (an unverified certificate under MTA-STS `testing` is a failure to
    /// report; under opportunistic TLS it is not).
    pub fn from_handshake(mx: &MxTls, conn: &rustls::ClientConnection) -> TlsOutcome {
        let mut o = TlsOutcome::new(mx);
        o.version = conn.protocol_version().map(|v| format!("{v:?}"));
        o.cipher = conn
            .negotiated_cipher_suite()
            .map(|c| format!("{:?}", c.suite()));
        o.verified = mx.verification.verified() == Some(true);
        if mx.kind != "opportunistic" {
            o.failure = mx.verification.failure().or(mx.policy_failure.clone());
            o.result_type = mx.verification.failure_type().or(mx.policy_failure_type);
        } else {
            o.failure = mx.verification.failure();
        }
        o
    }

    /// A handshake with `mx.client_config` that failed with `error`.
    pub fn handshake_failed(mx: &MxTls, error: impl std::fmt::Display) -> TlsOutcome {
        let mut o = TlsOutcome::new(mx);
        o.failure = Some(
            mx.verification
                .failure()
                .unwrap_or_else(|| error.to_string()),
        );
        o.result_type = Some(
            mx.verification
                .failure_type()
                .unwrap_or(FailureType::ValidationFailure),
        );
        o
    }

    /// The MX did not offer STARTTLS (the message went in clear text if
    /// TLS was not `required`, or was deferred).
    pub fn no_starttls(mx: &MxTls) -> TlsOutcome {
        let mut o = TlsOutcome::new(mx);
        o.failure = Some("STARTTLS not offered".into());
        o.result_type = Some(FailureType::StarttlsNotSupported);
        o
    }

    /// The MX was not used because the policy refused it
    /// (`mx.allowed == false`: not listed by MTA-STS, bogus DNSSEC).
    pub fn refused(mx: &MxTls) -> TlsOutcome {
        let mut o = TlsOutcome::new(mx);
        o.failure = Some(
            mx.policy_failure
                .clone()
                .unwrap_or_else(|| "refused by the policy".into()),
        );
        o.result_type = Some(
            mx.policy_failure_type
                .unwrap_or(FailureType::ValidationFailure),
        );
        o
    }

    /// The same outcome with the MX address connected to.
    pub fn with_ip(mut self, ip: IpAddr) -> TlsOutcome {
        self.receiving_ip = Some(ip);
        self
    }

    /// Rank for downgrade detection: verified TLS > TLS > nothing.
    fn level(&self) -> u8 {
        match (self.version.is_some(), self.verified) {
            (true, true) => 2,
            (true, false) => 1,
            _ => 0,
        }
    }
}

/// What is known about one destination domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainTls {
    /// The MX of the last attempt.
    pub mx_host: String,
    /// The last attempt's outcome.
    pub last: TlsOutcome,
    /// When it was recorded, Unix seconds.
    pub at: u64,
    /// Whether any attempt so far got verified TLS.
    pub ever_verified: bool,
    /// Attempts with verified TLS.
    pub verified_count: u64,
    /// Attempts with TLS whose certificate was not verified.
    pub unverified_count: u64,
    /// Attempts with a failure noted.
    pub failure_count: u64,
    /// Since when the TLS-RPT counts run, Unix seconds.
    pub report_start: u64,
    /// TLS-RPT counts per policy since `report_start`.
    pub report: BTreeMap<ReportPolicy, PolicyCounts>,
}

/// The most policies counted per domain in one report period.
const POLICIES_PER_DOMAIN: usize = 8;

/// The bounded table of results.
#[derive(Debug)]
pub struct TlsResults {
    limit: usize,
    map: Mutex<HashMap<String, DomainTls>>,
}

impl TlsResults {
    /// A table holding at most `limit` domains (the least recently
    /// updated is dropped first).
    pub fn new(limit: usize) -> TlsResults {
        TlsResults {
            limit: limit.max(1),
            map: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, DomainTls>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records an outcome, logs it, and warns if the domain had verified
    /// TLS before and now gets less. Returns whether it was a downgrade.
    pub fn record(&self, domain: &str, mx_host: &str, outcome: TlsOutcome) -> bool {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        let now = unix_now();
        let mut map = self.lock();
        if map.len() >= self.limit && !map.contains_key(&domain) {
            if let Some(oldest) = map.iter().min_by_key(|(_, d)| d.at).map(|(k, _)| k.clone()) {
                map.remove(&oldest);
            }
        }
        let entry = map.entry(domain.clone()).or_insert_with(|| DomainTls {
            mx_host: mx_host.to_string(),
            last: outcome.clone(),
            at: now,
            ever_verified: false,
            verified_count: 0,
            unverified_count: 0,
            failure_count: 0,
            report_start: now,
            report: BTreeMap::new(),
        });
        let downgrade = entry.ever_verified && outcome.level() < 2;
        match outcome.level() {
            2 => entry.verified_count += 1,
            1 => entry.unverified_count += 1,
            _ => {}
        }
        if outcome.failure.is_some() {
            entry.failure_count += 1;
        }
        if entry.report.len() < POLICIES_PER_DOMAIN || entry.report.contains_key(&outcome.policy) {
            entry.report.entry(outcome.policy.clone()).or_default().add(
                mx_host,
                outcome.result_type.map(|t| (t, outcome.receiving_ip)),
            );
        }
        entry.ever_verified |= outcome.level() == 2;
        entry.mx_host = mx_host.to_string();
        entry.at = now;
        let o = &outcome;
        if downgrade {
            tracing::warn!(
                domain, mx = mx_host, kind = o.kind, dane = %o.dane, tls = ?o.version, verified = o.verified,
                failure = ?o.failure, "TLS downgrade: this domain had verified TLS before"
            );
        } else {
            tracing::info!(
                domain, mx = mx_host, kind = o.kind, dane = %o.dane, tls = ?o.version, cipher = ?o.cipher,
                verified = o.verified, failure = ?o.failure, "outbound TLS"
            );
        }
        entry.last = outcome;
        downgrade
    }

    /// What is known about `domain`.
    pub fn get(&self, domain: &str) -> Option<DomainTls> {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        self.lock().get(&domain).cloned()
    }

    /// Every domain's results, sorted by domain (for `sluice queue`).
    pub fn all(&self) -> Vec<(String, DomainTls)> {
        let mut v: Vec<_> = self
            .lock()
            .iter()
            .map(|(k, d)| (k.clone(), d.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// The TLS-RPT JSON report (RFC 8460 §4) of `domain` for the period
    /// since the last one, and a new period started; `None` when nothing
    /// was recorded for it.
    pub fn take_report(
        &self,
        domain: &str,
        reporter: &Reporter,
        report_id: &str,
    ) -> Option<String> {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        let now = unix_now();
        let mut map = self.lock();
        let entry = map.get_mut(&domain)?;
        if entry.report.is_empty() {
            return None;
        }
        let json = tlsrpt::report_json(
            reporter,
            report_id,
            &domain,
            entry.report_start,
            now,
            &entry.report,
        );
        entry.report.clear();
        entry.report_start = now;
        Some(json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sts() -> ReportPolicy {
        ReportPolicy {
            policy_type: "sts",
            policy_string: vec!["version: STSv1".into(), "mode: testing".into()],
        }
    }

    fn tls(verified: bool) -> TlsOutcome {
        TlsOutcome {
            kind: "mta-sts",
            dane: DaneStatus::Insecure,
            policy: sts(),
            version: Some("TLSv1_3".into()),
            cipher: Some("TLS13_AES_256_GCM_SHA384".into()),
            verified,
            failure: (!verified).then(|| "unknown issuer".to_string()),
            result_type: (!verified).then_some(FailureType::CertificateNotTrusted),
            receiving_ip: Some(IpAddr::from([127, 0, 0, 1])),
        }
    }

    fn no_tls() -> TlsOutcome {
        TlsOutcome {
            kind: "opportunistic",
            dane: DaneStatus::Inactive,
            policy: ReportPolicy {
                policy_type: "no-policy-found",
                policy_string: vec![],
            },
            version: None,
            cipher: None,
            verified: false,
            failure: Some("STARTTLS not offered".into()),
            result_type: Some(FailureType::StarttlsNotSupported),
            receiving_ip: None,
        }
    }

    #[test]
    fn a_downgrade_is_seen_and_counts_are_kept() {
        let r = TlsResults::new(10);
        assert!(!r.record("Example.NET.", "mx.example.net", tls(false)));
        assert!(!r.record("example.net", "mx.example.net", tls(true)));
        assert!(r.record("example.net", "mx.example.net", tls(false)));
        assert!(r.record("example.net", "mx2.example.net", no_tls()));
        let d = r.get("example.net").unwrap();
        assert_eq!(
            (d.verified_count, d.unverified_count, d.failure_count),
            (1, 2, 3)
        );
        assert!(d.ever_verified);
        assert_eq!(d.mx_host, "mx2.example.net");
        assert_eq!(d.last.failure.as_deref(), Some("STARTTLS not offered"));
        let counts = &d.report[&sts()];
        assert_eq!((counts.successful, counts.failed), (1, 2));
    }

    #[test]
    fn a_report_covers_the_period_and_starts_a_new_one() {
        let r = TlsResults::new(10);
        let who = Reporter {
            organization: "Sluice \"test\"".into(),
            contact: "postmaster@example.com".into(),
        };
        assert_eq!(r.take_report("example.net", &who, "1"), None);
        r.record("example.net", "mx.example.net", tls(true));
        r.record("example.net", "mx.example.net", tls(false));
        let json = r.take_report("example.net", &who, "1").unwrap();
        assert!(
            json.starts_with("{\"organization-name\":\"Sluice \\\"test\\\"\""),
            "{json}"
        );
        assert!(
            json.contains("\"total-successful-session-count\":1,\"total-failure-session-count\":1"),
            "{json}"
        );
        assert!(
            json.contains("\"result-type\":\"certificate-not-trusted\""),
            "{json}"
        );
        assert!(json.contains("\"receiving-ip\":\"127.0.0.1\""), "{json}");
        assert_eq!(
            r.take_report("example.net", &who, "2"),
            None,
            "counts start again"
        );
    }

    #[test]
    fn bounded() {
        let r = TlsResults::new(3);
        for i in 0..10 {
            r.record(&format!("d{i}.example"), "mx", tls(true));
        }
        assert_eq!(r.all().len(), 3);
    }
}
