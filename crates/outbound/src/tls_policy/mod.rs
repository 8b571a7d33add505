//! The TLS policy of outbound delivery: what each destination demands
//! and the rustls configuration that enforces it for each MX.
//!
//! - **Opportunistic** (the default): STARTTLS when offered, any
//!   certificate accepted (noted as unverified), clear text when STARTTLS
//!   is not offered.
//! - **MTA-STS** (RFC 8461): a domain publishing `_mta-sts` TXT and a
//!   policy over HTTPS. `enforce`: only matching MX hosts, certificate
//!   valid for the MX name, else defer. `testing`: deliver anyway and
//!   record the failure.
//! - **DANE** (RFC 7672): TLSA records at `_25._tcp.MX`, used only when
//!   the MX and TLSA answers are DNSSEC-secure. Takes precedence over
//!   MTA-STS (RFC 8461 §2); TLS is then required and must match. Where
//!   DNSSEC cannot be validated at all (a resolver without it), every
//!   answer is insecure and DANE applies to no host; only an answer that
//!   fails validation with a resolver that validates (bogus) keeps mail
//!   back ([`dnssec`]).
//!
//! The TLS outcome of each attempt is given back through
//! [`TlsPolicies::record`], kept per domain ([`results::TlsResults`]) and
//! logged; a domain that had verified TLS and gets less is a `warn`.

pub mod cache;
pub mod config;
pub mod dane;
pub mod dnssec;
pub mod https;
pub mod results;
pub mod sts;
pub mod tlsrpt;
mod verifier;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::dnssec::TrustAnchors;
use hickory_resolver::proto::rr::RData;
use hickory_resolver::TokioResolver;
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::RootCertStore;

pub use cache::{CachedPolicy, PolicyCache};
pub use config::{DaneMode, TlsPolicyConfig};
pub use dane::Tlsa;
pub use dnssec::DaneStatus;
pub use results::{DomainTls, TlsOutcome, TlsResults};
pub use sts::{StsMode, StsPolicy};
pub use tlsrpt::{FailureType, ReportPolicy, Reporter};
pub use verifier::Verification;

use dnssec::{Anchors, TlsaAnswer, Validation};
use verifier::{Check, PolicyVerifier};

/// Why the TLS policy machinery could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsPolicyError {
    /// The extra CA file could not be read or holds no certificate.
    #[error("MTA-STS CA file {path}: {reason}")]
    CaFile {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The DNSSEC trust anchor file could not be read.
    #[error("DNSSEC trust anchor {path}: {reason}")]
    TrustAnchor {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The resolver could not be built.
    #[error("DNS resolver: {0}")]
    Resolver(String),
}

/// What a destination domain demands, from MTA-STS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainPolicy {
    /// The destination domain, lower case, no trailing dot.
    pub domain: String,
    /// The MTA-STS policy in force (`enforce` or `testing`), if any.
    pub sts: Option<StsPolicy>,
    /// Why no policy could be had when one seemed published (for logs).
    pub sts_error: Option<String>,
}

/// How to do TLS with one MX: contract 7.
#[derive(Debug, Clone)]
pub struct MxTls {
    /// Whether the MX may be used at all (MTA-STS enforce: host must
    /// match a pattern).
    pub allowed: bool,
    /// STARTTLS required (MTA-STS enforce or DANE usable): no clear-text
    /// fallback, defer instead.
    pub required: bool,
    /// The rustls client config to use for STARTTLS with this MX.
    /// Connect with the MX host name as the `ServerName` (MTA-STS checks
    /// the certificate against it, RFC 8461 §4.2); one config per attempt,
    /// since [`MxTls::verification`] notes what its handshake found.
    pub client_config: Arc<rustls::ClientConfig>,
    /// For logs: "dane", "mta-sts", "opportunistic".
    pub kind: &'static str,
    /// What DANE made of this MX: why it applies or not.
    pub dane: DaneStatus,
    /// What the certificate check found during the handshake made with
    /// `client_config` (feed it to [`TlsOutcome::from_handshake`]).
    pub verification: Verification,
    /// A policy failure known before connecting (MX not in an MTA-STS
    /// policy, bogus TLSA answer), to record even when delivery goes on.
    pub policy_failure: Option<String>,
    /// The TLS-RPT result type of `policy_failure`.
    pub policy_failure_type: Option<FailureType>,
    /// The usable TLSA records when `kind` is "dane".
    pub tlsa: Vec<Tlsa>,
    /// The policy as a TLS-RPT report names it.
    pub report_policy: ReportPolicy,
}

/// The outbound TLS policies: DNS, MTA-STS fetching and cache, DANE, and
/// the per-domain TLS results.
#[derive(Debug)]
pub struct TlsPolicies {
    resolver: TokioResolver,
    dane_resolver: TokioResolver,
    /// Whether DNSSEC validates through `dane_resolver` here.
    validation: Validation,
    config: TlsPolicyConfig,
    provider: Arc<CryptoProvider>,
    webpki: Arc<WebPkiServerVerifier>,
    /// Checks the relay's certificate (web PKI roots plus its CA file).
    relay_webpki: Arc<WebPkiServerVerifier>,
    https: Arc<rustls::ClientConfig>,
    cache: PolicyCache,
    results: TlsResults,
    fetching: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// The web PKI roots, and the CA certificates of `ca_file` if given.
fn roots_with(ca_file: Option<&Path>) -> Result<RootCertStore, TlsPolicyError> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let Some(path) = ca_file else {
        return Ok(roots);
    };
    let ca_err = |reason: String| TlsPolicyError::CaFile {
        path: path.display().to_string(),
        reason,
    };
    let pem = std::fs::read(path).map_err(|e| ca_err(e.to_string()))?;
    let mut n = 0;
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        let cert = cert.map_err(|e| ca_err(e.to_string()))?;
        roots.add(cert).map_err(|e| ca_err(e.to_string()))?;
        n += 1;
    }
    if n == 0 {
        return Err(ca_err("no certificate in it".into()));
    }
    Ok(roots)
}

fn verifier(
    roots: &Arc<RootCertStore>,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, TlsPolicyError> {
    WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
        .build()
        .map_err(|e| TlsPolicyError::CaFile {
            path: "(roots)".into(),
            reason: e.to_string(),
        })
}

/// A plain (non-validating) resolver asking `nameservers` (contract 6),
/// or the system's `/etc/resolv.conf` when the list is empty.
pub fn resolver(nameservers: &[SocketAddr]) -> Result<TokioResolver, TlsPolicyError> {
    build_resolver(nameservers, None)
}

/// A resolver that validates DNSSEC itself, from the root keys or the
/// configured `dnssec_trust_anchor` file: the one DANE needs.
pub fn validating_resolver(
    nameservers: &[SocketAddr],
    config: &TlsPolicyConfig,
) -> Result<TokioResolver, TlsPolicyError> {
    let anchors = match &config.dnssec_trust_anchor {
        Some(path) => TrustAnchors::from_file(path).map_err(|e| TlsPolicyError::TrustAnchor {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?,
        None => TrustAnchors::default(),
    };
    build_resolver(nameservers, Some(anchors))
}

fn build_resolver(
    nameservers: &[SocketAddr],
    anchors: Option<TrustAnchors>,
) -> Result<TokioResolver, TlsPolicyError> {
    let err = |e: hickory_resolver::net::NetError| TlsPolicyError::Resolver(e.to_string());
    let mut builder = if nameservers.is_empty() {
        TokioResolver::builder_tokio().map_err(err)?
    } else {
        let servers = nameservers
            .iter()
            .map(|addr| {
                let mut ns = NameServerConfig::udp_and_tcp(addr.ip());
                for c in &mut ns.connections {
                    c.port = addr.port();
                }
                ns
            })
            .collect();
        TokioResolver::builder_with_config(
            ResolverConfig::from_name_servers(servers),
            TokioRuntimeProvider::default(),
        )
    };
    if let Some(anchors) = anchors {
        builder.options_mut().validate = true;
        builder = builder.with_trust_anchor(Arc::new(anchors));
    }
    builder.build().map_err(err)
}

impl TlsPolicies {
    /// Contract 7. `resolver` serves MTA-STS look-ups and, unless
    /// [`TlsPolicies::with_dane_resolver`] gives another, TLSA look-ups:
    /// DANE is used only for answers it proved secure, so a resolver that
    /// does not validate means no DANE. Panics only if the CA file of
    /// `config` is unusable: check it first with [`TlsPolicies::build`].
    pub fn new(resolver: TokioResolver, config: TlsPolicyConfig) -> TlsPolicies {
        match Self::build(resolver, config) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        }
    }

    /// Like [`TlsPolicies::new`], returning an error for an unusable CA file.
    pub fn build(
        resolver: TokioResolver,
        config: TlsPolicyConfig,
    ) -> Result<TlsPolicies, TlsPolicyError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = Arc::new(roots_with(config.mta_sts_ca_file.as_deref())?);
        let webpki = verifier(&roots, &provider)?;
        let anchors = match &config.dnssec_trust_anchor {
            None => Anchors::root(),
            Some(path) => Anchors::from_file_text(&std::fs::read_to_string(path).map_err(|e| {
                TlsPolicyError::TrustAnchor {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                }
            })?),
        };
        let https = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsPolicyError::Resolver(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(TlsPolicies {
            dane_resolver: resolver.clone(),
            validation: Validation::new(anchors),
            resolver,
            cache: PolicyCache::new(config.policy_cache_dir.clone(), config.results_limit),
            results: TlsResults::new(config.results_limit),
            fetching: std::sync::Mutex::new(HashMap::new()),
            config,
            provider,
            relay_webpki: webpki.clone(),
            webpki,
            https: Arc::new(https),
        })
    }

    /// Trusts the CAs in `ca_file` (PEM) for the relay's certificate, in
    /// addition to the web PKI roots.
    pub fn with_relay_ca(mut self, ca_file: &Path) -> Result<TlsPolicies, TlsPolicyError> {
        let roots = Arc::new(roots_with(Some(ca_file))?);
        self.relay_webpki = verifier(&roots, &self.provider)?;
        Ok(self)
    }

    /// TLS with the relay (smarthost): required, and its certificate must
    /// be valid for its host name.
    pub fn relay(&self) -> MxTls {
        self.mx_tls_with(
            self.relay_webpki.clone(),
            Check::WebPki { enforce: true },
            "relay",
            true,
            true,
            None,
        )
    }

    /// Uses `resolver` (see [`validating_resolver`]) for the DNSSEC-checked
    /// look-ups of DANE.
    pub fn with_dane_resolver(mut self, resolver: TokioResolver) -> TlsPolicies {
        self.dane_resolver = resolver;
        self
    }

    /// Both resolvers from the nameserver list of `[dns] resolver`: the
    /// usual way to build the policies in `sluice serve`.
    pub fn from_nameservers(
        nameservers: &[SocketAddr],
        config: TlsPolicyConfig,
    ) -> Result<TlsPolicies, TlsPolicyError> {
        let dane = match config.dane {
            DaneMode::Validate => Some(validating_resolver(nameservers, &config)?),
            DaneMode::Off => None,
        };
        let policies = Self::build(resolver(nameservers)?, config)?;
        Ok(match dane {
            Some(r) => policies.with_dane_resolver(r),
            None => policies,
        })
    }

    /// Whether DANE can work here: the SOA of each trust anchor's zone
    /// (the root, or the names in `dnssec_trust_anchor`) must come back
    /// DNSSEC-secure through the DANE resolver. A resolver that strips
    /// DNSSEC records fails it; then DANE is inactive (see [`dnssec`]).
    /// Ok when DANE is off.
    pub async fn dnssec_self_check(&self) -> Result<(), String> {
        if self.config.dane == DaneMode::Off {
            return Ok(());
        }
        dnssec::self_check(&self.dane_resolver, self.validation.anchors()).await
    }

    /// Whether DANE is applied now: on, and DNSSEC validates through the
    /// resolver (checked on first use, logged once, checked again from
    /// time to time while it does not). `sluice serve` calls it at start
    /// so the log says at once which it is.
    pub async fn dane_active(&self) -> bool {
        self.config.dane != DaneMode::Off && self.validation.active(&self.dane_resolver).await
    }

    /// The per-domain TLS results.
    pub fn results(&self) -> &TlsResults {
        &self.results
    }

    /// What the domain demands: MTA-STS (enforce/testing/none, allowed MX
    /// patterns), looked up and cached (RFC 8461 §3, §5.1).
    pub async fn for_domain(&self, domain: &str) -> DomainPolicy {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        let mut policy = DomainPolicy {
            domain: domain.clone(),
            sts: None,
            sts_error: None,
        };
        if !self.config.mta_sts {
            return policy;
        }
        let now = cache::unix_now();
        let cached = self.cache.get(&domain).await.filter(|c| c.fresh(now));
        let id = match self.sts_id(&domain).await {
            Ok(Some(id)) => id,
            // No record: a still fresh cached policy stays in force
            // (RFC 8461 §5.1); else no policy.
            Ok(None) => {
                policy.sts = cached.map(|c| c.policy).filter(|p| p.mode != StsMode::None);
                return policy;
            }
            Err(e) => {
                policy.sts_error = Some(e);
                policy.sts = cached.map(|c| c.policy).filter(|p| p.mode != StsMode::None);
                return policy;
            }
        };
        let current = match cached {
            Some(c) if c.id == id => Some(c.policy),
            stale => {
                // One fetch per domain at a time: deliveries that ask
                // meanwhile wait for it and then find it in the cache.
                let gate = self.fetch_gate(&domain);
                let turn = gate.lock().await;
                let outcome = match self.cache.get(&domain).await {
                    Some(c) if c.id == id && c.fresh(cache::unix_now()) => Ok(c.policy),
                    _ => match self.fetch(&domain).await {
                        Ok(fetched) => {
                            let cached = CachedPolicy {
                                id,
                                fetched: now,
                                policy: fetched.clone(),
                            };
                            self.cache.put(&domain, cached).await;
                            Ok(fetched)
                        }
                        Err(e) => Err(e),
                    },
                };
                drop(turn);
                self.release_fetch_gate(&domain, &gate);
                match outcome {
                    Ok(p) => Some(p),
                    Err(e) => {
                        tracing::warn!(domain, error = %e, "MTA-STS: policy fetch failed");
                        policy.sts_error = Some(e);
                        stale.map(|c| c.policy)
                    }
                }
            }
        };
        policy.sts = current.filter(|p| p.mode != StsMode::None);
        policy
    }

    /// The lock that serialises policy fetches for `domain`. Entries live
    /// only while someone uses them (see `release_fetch_gate`).
    fn fetch_gate(&self, domain: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.lock_fetching()
            .entry(domain.to_string())
            .or_default()
            .clone()
    }

    /// Drops the domain's entry when it is still `gate` and nobody else
    /// holds it (the map + this caller), so the map keeps only gates in use.
    fn release_fetch_gate(&self, domain: &str, gate: &Arc<tokio::sync::Mutex<()>>) {
        let mut map = self.lock_fetching();
        if map
            .get(domain)
            .is_some_and(|g| Arc::ptr_eq(g, gate) && Arc::strong_count(g) == 2)
        {
            map.remove(domain);
        }
    }

    fn lock_fetching(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, Arc<tokio::sync::Mutex<()>>>> {
        self.fetching.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The `id` of the domain's `_mta-sts` TXT record; `None` when there
    /// is none (or several, RFC 8461 §3.1).
    async fn sts_id(&self, domain: &str) -> Result<Option<String>, String> {
        let name = format!("_mta-sts.{domain}.");
        let lookup = match self.resolver.txt_lookup(name.as_str()).await {
            Ok(l) => l,
            Err(e) if e.is_no_records_found() || e.is_nx_domain() => return Ok(None),
            Err(e) => return Err(format!("TXT {name}: {e}")),
        };
        let texts: Vec<String> = lookup
            .answers()
            .iter()
            .filter_map(|r| match &r.data {
                RData::TXT(txt) => Some(
                    txt.txt_data
                        .iter()
                        .map(|s| String::from_utf8_lossy(s).into_owned())
                        .collect(),
                ),
                _ => None,
            })
            .collect();
        match sts::pick_txt(texts.iter().map(String::as_str)) {
            Some(record) => sts::parse_txt(record).map(Some).map_err(|e| e.to_string()),
            None => Ok(None),
        }
    }

    async fn fetch(&self, domain: &str) -> Result<StsPolicy, String> {
        let host = format!("mta-sts.{domain}.");
        let ips = self
            .resolver
            .lookup_ip(host.as_str())
            .await
            .map_err(|e| format!("{host}: {e}"))?;
        let addrs: Vec<SocketAddr> = ips
            .iter()
            .map(|ip| SocketAddr::new(ip, self.config.mta_sts_port))
            .collect();
        let body = https::fetch_policy(self.https.clone(), domain, &addrs)
            .await
            .map_err(|e| format!("https://mta-sts.{domain}/.well-known/mta-sts.txt: {e}"))?;
        sts::parse_policy(&body).map_err(|e| e.to_string())
    }

    /// Opportunistic TLS without looking anything up: for a next hop the
    /// configuration names (a static route), which no published policy
    /// covers.
    pub fn opportunistic(&self) -> MxTls {
        self.mx_tls(
            Check::WebPki { enforce: false },
            "opportunistic",
            true,
            false,
            None,
        )
    }

    /// For one MX host about to be tried: DANE TLSA records if published
    /// and DNSSEC-secure, else the domain's MTA-STS policy, else
    /// opportunistic TLS; and the rustls client config that enforces it.
    pub async fn for_mx(&self, policy: &DomainPolicy, mx_host: &str) -> MxTls {
        let mx_host = mx_host.trim_end_matches('.').to_ascii_lowercase();
        let status = if self.config.dane == DaneMode::Off {
            DaneStatus::Off
        } else if !self.validation.active(&self.dane_resolver).await {
            DaneStatus::Inactive
        } else {
            let anchors = self.validation.anchors();
            let answer =
                dnssec::tlsa_answer(&self.dane_resolver, anchors, &policy.domain, &mx_host).await;
            match answer {
                TlsaAnswer::Secure(records) if !records.is_empty() => {
                    let check = Check::Dane {
                        records: records.clone(),
                        reference_names: vec![mx_host.clone(), policy.domain.clone()],
                    };
                    let mut mx = self.mx_tls(check, "dane", true, true, None);
                    mx.dane = DaneStatus::Secure;
                    mx.report_policy = ReportPolicy {
                        policy_type: "tlsa",
                        policy_string: records.iter().map(Tlsa::to_string).collect(),
                    };
                    mx.tlsa = records;
                    return mx;
                }
                // RFC 7672 §2.2: a secure TLSA RRset with no usable record
                // still says the server does TLS: required, not
                // authenticated.
                TlsaAnswer::Secure(_) => {
                    let check = Check::WebPki { enforce: false };
                    let mut mx = self.mx_tls(check, "dane", true, true, None);
                    mx.dane = DaneStatus::SecureUnusable;
                    mx.report_policy.policy_type = "tlsa";
                    return mx;
                }
                TlsaAnswer::Insecure => DaneStatus::Insecure,
                TlsaAnswer::Bogus(why) => {
                    return self.dane_refused(policy, &mx_host, DaneStatus::Bogus, why)
                }
                TlsaAnswer::Failed(why) => {
                    return self.dane_refused(policy, &mx_host, DaneStatus::Failed, why)
                }
            }
        };
        let Some(sts) = &policy.sts else {
            let mut mx = self.mx_tls(
                Check::WebPki { enforce: false },
                "opportunistic",
                true,
                false,
                None,
            );
            mx.dane = status;
            return mx;
        };
        let listed = sts.mx_matches(&mx_host);
        let failure = (!listed).then(|| {
            (
                FailureType::ValidationFailure,
                format!(
                    "MX {mx_host} not in the MTA-STS policy ({})",
                    sts.mode.as_str()
                ),
            )
        });
        let enforce = sts.mode == StsMode::Enforce;
        let allowed = listed || !enforce;
        let mut mx = self.mx_tls(
            Check::WebPki { enforce },
            "mta-sts",
            allowed,
            enforce,
            failure,
        );
        mx.dane = status;
        mx.report_policy = ReportPolicy {
            policy_type: "sts",
            policy_string: sts.to_text().lines().map(str::to_string).collect(),
        };
        mx
    }

    /// RFC 7672 §2.1.1, §2.2: an MX or TLSA answer that fails validation,
    /// or cannot be had, makes the MX unusable: the caller tries the next
    /// one or defers.
    fn dane_refused(
        &self,
        policy: &DomainPolicy,
        mx_host: &str,
        status: DaneStatus,
        why: String,
    ) -> MxTls {
        tracing::warn!(domain = %policy.domain, mx = %mx_host, kind = %status, error = %why, "DANE: the MX is not used");
        let check = Check::WebPki { enforce: true };
        let failure = Some((FailureType::DnssecInvalid, why));
        let mut mx = self.mx_tls(check, "dane", false, true, failure);
        mx.dane = status;
        mx.report_policy.policy_type = "tlsa";
        mx
    }

    fn mx_tls(
        &self,
        check: Check,
        kind: &'static str,
        allowed: bool,
        required: bool,
        policy_failure: Option<(FailureType, String)>,
    ) -> MxTls {
        self.mx_tls_with(
            self.webpki.clone(),
            check,
            kind,
            allowed,
            required,
            policy_failure,
        )
    }

    fn mx_tls_with(
        &self,
        webpki: Arc<WebPkiServerVerifier>,
        check: Check,
        kind: &'static str,
        allowed: bool,
        required: bool,
        policy_failure: Option<(FailureType, String)>,
    ) -> MxTls {
        let verification = Verification::default();
        let verifier = Arc::new(PolicyVerifier {
            check,
            webpki,
            signatures: net::SignaturesOnly::new(self.provider.clone()),
            found: verification.clone(),
        });
        let config = rustls::ClientConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .expect("the ring provider supports the default TLS versions")
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        MxTls {
            allowed,
            required,
            client_config: Arc::new(config),
            kind,
            dane: DaneStatus::Off,
            verification,
            policy_failure_type: policy_failure.as_ref().map(|(t, _)| *t),
            policy_failure: policy_failure.map(|(_, why)| why),
            tlsa: Vec::new(),
            report_policy: ReportPolicy {
                policy_type: "no-policy-found",
                policy_string: Vec::new(),
            },
        }
    }

    /// Records the TLS outcome of a delivery attempt (kept per domain,
    /// logged; a downgrade from verified TLS is a warning).
    pub fn record(&self, domain: &str, mx_host: &str, outcome: TlsOutcome) {
        self.results.record(domain, mx_host, outcome);
    }

    /// Where the domain wants TLS-RPT reports (RFC 8460 §3): the `rua`
    /// URIs of its `_smtp._tls` TXT record; empty when it publishes none.
    pub async fn tlsrpt_destinations(&self, domain: &str) -> Vec<String> {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        let name = format!("_smtp._tls.{domain}.");
        let Ok(lookup) = self.resolver.txt_lookup(name.as_str()).await else {
            return Vec::new();
        };
        let records: Vec<String> = lookup
            .answers()
            .iter()
            .filter_map(|r| match &r.data {
                RData::TXT(txt) => Some(
                    txt.txt_data
                        .iter()
                        .map(|s| String::from_utf8_lossy(s).into_owned())
                        .collect::<String>(),
                ),
                _ => None,
            })
            .filter(|t| t.starts_with("v=TLSRPTv1"))
            .collect();
        // Several records: none is used (RFC 8460 §3).
        match records.as_slice() {
            [one] => tlsrpt::parse_txt(one).unwrap_or_default(),
            _ => Vec::new(),
        }
    }
}
