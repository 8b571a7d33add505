//! The `[outbound.tls]` configuration section.

use std::path::PathBuf;

/// How DANE TLSA records are trusted (`[outbound.tls] dane`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DaneMode {
    /// Sluice validates DNSSEC itself (from the root key, or the
    /// `dnssec_trust_anchor` file) and uses TLSA records only when the MX
    /// and TLSA answers are proven secure. Needs no trust in the resolver
    /// or the path to it, at the cost of the extra DNSKEY/DS queries.
    /// Through a resolver that does not pass DNSSEC along, nothing is
    /// secure and DANE is inactive (see [`crate::tls_policy::dnssec`]).
    #[default]
    Validate,
    /// No DANE: TLSA records are not looked up.
    Off,
}

/// Settings of the outbound TLS policy. Meant to be nested as
/// `[outbound.tls]`; every key has a default.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsPolicyConfig {
    /// Whether MTA-STS policies (RFC 8461) are looked up and applied.
    pub mta_sts: bool,
    /// PEM file of extra CA certificates trusted when fetching MTA-STS
    /// policies and checking MX certificates under MTA-STS, in addition
    /// to the built-in web PKI roots. Default: none.
    pub mta_sts_ca_file: Option<PathBuf>,
    /// The port policy hosts are fetched from. RFC 8461 §3.3 says 443;
    /// changing it is only useful for tests.
    pub mta_sts_port: u16,
    /// DANE mode: `validate` (default) or `off`.
    pub dane: DaneMode,
    /// DNSKEY records (zone-file lines) used as DNSSEC trust anchors
    /// instead of the built-in root keys. Default: the root keys.
    pub dnssec_trust_anchor: Option<PathBuf>,
    /// Directory where fetched MTA-STS policies are kept across restarts.
    /// Default: none (memory only); see [`TlsPolicyConfig::with_data_dir`].
    pub policy_cache_dir: Option<PathBuf>,
    /// How many destination domains' TLS results are kept in memory.
    pub results_limit: usize,
}

impl Default for TlsPolicyConfig {
    fn default() -> Self {
        TlsPolicyConfig {
            mta_sts: true,
            mta_sts_ca_file: None,
            mta_sts_port: 443,
            dane: DaneMode::Validate,
            dnssec_trust_anchor: None,
            policy_cache_dir: None,
            results_limit: 10_000,
        }
    }
}

impl TlsPolicyConfig {
    /// Keeps MTA-STS policies under `DATA/mta-sts` unless a directory was
    /// configured: what `sluice serve` does with its data directory.
    pub fn with_data_dir(mut self, data: &std::path::Path) -> TlsPolicyConfig {
        if self.policy_cache_dir.is_none() {
            self.policy_cache_dir = Some(data.join("mta-sts"));
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outbound {
        #[serde(default)]
        tls: TlsPolicyConfig,
    }

    #[derive(serde::Deserialize)]
    struct File {
        outbound: Outbound,
    }

    #[test]
    fn nests_as_outbound_tls_with_defaults() {
        let f: File = toml::from_str("[outbound]\n").unwrap();
        assert_eq!(f.outbound.tls, TlsPolicyConfig::default());
        let f: File = toml::from_str(
            "[outbound.tls]\ndane = \"off\"\nmta_sts_ca_file = \"/tmp/ca.pem\"\nresults_limit = 5\n",
        )
        .unwrap();
        assert_eq!(f.outbound.tls.dane, DaneMode::Off);
        assert_eq!(f.outbound.tls.results_limit, 5);
        assert!(f.outbound.tls.mta_sts);
        assert!(toml::from_str::<File>("[outbound.tls]\ndane = \"trust-everything\"\n").is_err());
        assert!(toml::from_str::<File>("[outbound.tls]\nbogus = 1\n").is_err());
        let c = TlsPolicyConfig::default().with_data_dir(std::path::Path::new("/d"));
        assert_eq!(
            c.policy_cache_dir.as_deref(),
            Some(std::path::Path::new("/d/mta-sts"))
        );
    }
}
