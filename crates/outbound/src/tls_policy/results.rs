//! TLS results per destination domain: what the last delivery attempt
//! got (kind of policy, TLS version and cipher, verified or not, failure),
//! kept in memory with a bounded number of domains, and logged so that a
//! downgrade stands out.

use std::collections::HashMap;
use std::sync::Mutex;

use super::cache::unix_now;
use super::verifier::Verification;

/// The TLS outcome of one delivery attempt to one MX.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOutcome {
    /// The policy applied: "dane", "mta-sts" or "opportunistic".
    pub kind: &'static str,
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
}

impl TlsOutcome {
    /// The outcome of a completed handshake: version and cipher from the
    /// connection, verification from the verifier's notes.
    pub fn from_handshake(
        kind: &'static str,
        conn: &rustls::ClientConnection,
        verification: &Verification,
    ) -> TlsOutcome {
        TlsOutcome {
            kind,
            version: conn.protocol_version().map(|v| format!("{v:?}")),
            cipher: conn
                .negotiated_cipher_suite()
                .map(|c| format!("{:?}", c.suite())),
            verified: verification.verified() == Some(true),
            failure: verification.failure(),
        }
    }

    /// An attempt that ended without TLS: `reason` says why (handshake
    /// failed, STARTTLS not offered, MX not allowed).
    pub fn failed(kind: &'static str, reason: impl Into<String>) -> TlsOutcome {
        TlsOutcome {
            kind,
            version: None,
            cipher: None,
            verified: false,
            failure: Some(reason.into()),
        }
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
    /// Attempts with verified TLS, with unverified TLS, with failures.
    pub verified_count: u64,
    /// Attempts with TLS whose certificate was not verified.
    pub unverified_count: u64,
    /// Attempts with a failure noted.
    pub failure_count: u64,
}

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

    /// Records an outcome, logs it, and warns if the domain had verified
    /// TLS before and now gets less. Returns whether it was a downgrade.
    pub fn record(&self, domain: &str, mx_host: &str, outcome: TlsOutcome) -> bool {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= self.limit && !map.contains_key(&domain) {
            if let Some(oldest) = map.iter().min_by_key(|(_, d)| d.at).map(|(k, _)| k.clone()) {
                map.remove(&oldest);
            }
        }
        let entry = map.entry(domain.clone()).or_insert_with(|| DomainTls {
            mx_host: mx_host.to_string(),
            last: outcome.clone(),
            at: 0,
            ever_verified: false,
            verified_count: 0,
            unverified_count: 0,
            failure_count: 0,
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
        entry.ever_verified |= outcome.level() == 2;
        entry.mx_host = mx_host.to_string();
        entry.at = unix_now();
        let o = &outcome;
        if downgrade {
            tracing::warn!(
                domain, mx = mx_host, kind = o.kind, tls = ?o.version, verified = o.verified,
                failure = ?o.failure, "TLS downgrade: this domain had verified TLS before"
            );
        } else {
            tracing::info!(
                domain, mx = mx_host, kind = o.kind, tls = ?o.version, cipher = ?o.cipher,
                verified = o.verified, failure = ?o.failure, "outbound TLS"
            );
        }
        entry.last = outcome;
        downgrade
    }

    /// What is known about `domain`.
    pub fn get(&self, domain: &str) -> Option<DomainTls> {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&domain)
            .cloned()
    }

    /// Every domain's results, sorted by domain (for `sluice queue`).
    pub fn all(&self) -> Vec<(String, DomainTls)> {
        let mut v: Vec<_> = self
            .map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, d)| (k.clone(), d.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls(verified: bool) -> TlsOutcome {
        TlsOutcome {
            kind: "mta-sts",
            version: Some("TLSv1_3".into()),
            cipher: Some("TLS13_AES_256_GCM_SHA384".into()),
            verified,
            failure: (!verified).then(|| "unknown issuer".to_string()),
        }
    }

    #[test]
    fn a_downgrade_is_seen_and_counts_are_kept() {
        let r = TlsResults::new(10);
        assert!(!r.record("Example.NET.", "mx.example.net", tls(false)));
        assert!(!r.record("example.net", "mx.example.net", tls(true)));
        assert!(r.record("example.net", "mx.example.net", tls(false)));
        assert!(r.record(
            "example.net",
            "mx2.example.net",
            TlsOutcome::failed("opportunistic", "STARTTLS not offered")
        ));
        let d = r.get("example.net").unwrap();
        assert_eq!(
            (d.verified_count, d.unverified_count, d.failure_count),
            (1, 2, 3)
        );
        assert!(d.ever_verified);
        assert_eq!(d.mx_host, "mx2.example.net");
        assert_eq!(d.last.failure.as_deref(), Some("STARTTLS not offered"));
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
