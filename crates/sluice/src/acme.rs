//! Certificates from an ACME CA (RFC 8555), such as Let's Encrypt.
//!
//! A background task keeps `<data>/acme/cert.pem` and `key.pem` valid for
//! the configured names: it orders a certificate when there is none, when
//! the names changed, or when fewer than `renew_before_days` are left;
//! proves the names with tls-alpn-01 (RFC 8737, answered by every
//! listener's certificate resolver on the `https` listener) or http-01
//! (RFC 8555 §8.3, answered on the `acme_http` listener); and swaps the new
//! certificate into the shared [`Identity`], so every TLS listener presents
//! it from the next handshake on, without a restart. A failure is logged
//! with its reason and tried again later, backing off; the certificate in
//! use stays meanwhile. The account key lives in `<data>/acme/account.json`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, ChallengeType, Identifier, NewAccount,
    NewOrder, Order, OrderStatus, RetryPolicy,
};
use net::Shutdown;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;
use serde::{Deserialize, Serialize};

use crate::config::{AcmeChallenge, AcmeConfig, Config};
use crate::tls::{certified, leaf_info, write_private, CertInfo, Identity};

/// The longest the task sleeps before looking at the certificate again
/// (clocks jump; machines sleep).
const MAX_SLEEP: Duration = Duration::from_secs(3600);
/// The first wait after a failure; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(60);
const MAX_BACKOFF: Duration = Duration::from_secs(6 * 3600);
/// How long validation and issuance may take at the CA.
const CA_PATIENCE: Duration = Duration::from_secs(120);

/// The issued certificate chain and its key in `data_dir`.
pub fn files(data_dir: &Path) -> (PathBuf, PathBuf) {
    let dir = data_dir.join("acme");
    (dir.join("cert.pem"), dir.join("key.pem"))
}

/// http-01 answers: key authorizations by token, while an order is open.
#[derive(Debug, Default)]
pub struct HttpTokens(Mutex<HashMap<String, String>>);

impl HttpTokens {
    fn insert(&self, token: &str, key_authorization: &str) {
        self.0
            .lock()
            .expect("not poisoned")
            .insert(token.to_string(), key_authorization.to_string());
    }

    fn get(&self, token: &str) -> Option<String> {
        self.0.lock().expect("not poisoned").get(token).cloned()
    }

    fn clear(&self) {
        self.0.lock().expect("not poisoned").clear();
    }
}

/// Serves `/.well-known/acme-challenge/TOKEN` on the `acme_http` listener
/// until shutdown (RFC 8555 §8.3); everything else is 404.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    tokens: Arc<HttpTokens>,
    shutdown: Shutdown,
) {
    let app = Router::new()
        .route("/.well-known/acme-challenge/{token}", get(answer))
        .with_state(tokens);
    let stop = shutdown.token.clone();
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await
    {
        tracing::error!(error = %e, "acme_http listener stopped");
    }
}

async fn answer(
    State(tokens): State<Arc<HttpTokens>>,
    UrlPath(token): UrlPath<String>,
) -> impl IntoResponse {
    let found = tokens.get(&token);
    tracing::info!(answered = found.is_some(), "ACME http-01 validation");
    match found {
        Some(key_authorization) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/octet-stream")],
            key_authorization,
        ),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain")],
            "no such challenge\n".to_string(),
        ),
    }
}

/// The account as kept on disk, with the directory it belongs to.
#[derive(Serialize, Deserialize)]
struct StoredAccount {
    directory: String,
    credentials: AccountCredentials,
}

/// Keeps the ACME certificate valid; see the module documentation.
pub struct Manager {
    config: AcmeConfig,
    names: Vec<String>,
    dir: PathBuf,
    /// The certificate and key files.
    paths: (PathBuf, PathBuf),
    identity: Arc<Identity>,
    tokens: Arc<HttpTokens>,
}

impl Manager {
    /// A manager for `config`'s `[acme]` section, presenting through
    /// `identity` and answering http-01 through `tokens`.
    pub fn new(config: &Config, identity: Arc<Identity>, tokens: Arc<HttpTokens>) -> Manager {
        Manager {
            config: config.acme.clone(),
            names: config.acme.names(&config.hostname),
            dir: config.data_dir.join("acme"),
            paths: files(&config.data_dir),
            identity,
            tokens,
        }
    }

    /// Runs for the life of the server.
    pub async fn run(self) {
        tracing::info!(
            directory = %self.config.directory,
            names = %self.names.join(","),
            challenge = ?self.config.challenge,
            "ACME certificates on"
        );
        let mut failures = 0u32;
        loop {
            let wait = self.until_due();
            if !wait.is_zero() {
                tokio::time::sleep(wait.min(MAX_SLEEP)).await;
                continue;
            }
            match self.issue().await {
                Ok(info) => {
                    failures = 0;
                    tracing::info!(
                        names = %info.names.join(","),
                        serial = %info.serial,
                        sha256 = %info.fingerprint,
                        expires = %info.expires(),
                        "ACME certificate installed"
                    );
                }
                Err(e) => {
                    failures += 1;
                    let delay = backoff(failures);
                    tracing::error!(
                        error = %format!("{e:#}"),
                        retry_in_secs = delay.as_secs(),
                        "ACME certificate not issued; the certificate in use stays"
                    );
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// How long until the stored certificate is due; zero when there is
    /// none, it lacks a configured name, or it is due.
    fn until_due(&self) -> Duration {
        let Some(info) = stored_info(&self.paths.0) else {
            return Duration::ZERO;
        };
        if !self.names.iter().all(|n| info.covers(n)) {
            tracing::info!(have = %info.names.join(","), want = %self.names.join(","), "ACME: the names changed");
            return Duration::ZERO;
        }
        let due = due_at(&info, self.config.renew_before_days);
        Duration::from_secs(u64::try_from(due - crate::tls::unix_now()).unwrap_or(0))
    }

    /// Orders, validates and installs a certificate.
    async fn issue(&self) -> anyhow::Result<CertInfo> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        let account = self.account().await?;
        let identifiers: Vec<Identifier> = self
            .names
            .iter()
            .map(|n| Identifier::Dns(n.clone()))
            .collect();
        let mut order = account
            .new_order(&NewOrder::new(&identifiers))
            .await
            .context("the CA refused the order")?;
        let outcome = self.validate_and_finalize(&mut order).await;
        // Challenge answers are only for the order's life.
        self.identity.clear_challenges();
        self.tokens.clear();
        let (chain_pem, key) = outcome?;

        let chain = rustls_pemfile::certs(&mut chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .context("the CA's certificate chain is not PEM")?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let certified = certified(chain, &key_der)?;
        let info = leaf_info(&certified)?;
        if let Some(missing) = self.names.iter().find(|n| !info.covers(n)) {
            bail!("the issued certificate does not name {missing}");
        }
        let (cert_path, key_path) = self.paths.clone();
        write_private(&key_path, key.serialize_pem().as_bytes())?;
        write_private(&cert_path, chain_pem.as_bytes())?;
        self.identity.install(certified, cert_path, key_path);
        Ok(info)
    }

    /// Answers each pending authorization's challenge, waits for the CA to
    /// validate, and finalizes with a fresh key; the chain (PEM) and key.
    async fn validate_and_finalize(
        &self,
        order: &mut Order,
    ) -> anyhow::Result<(String, rcgen::KeyPair)> {
        let kind = match self.config.challenge {
            AcmeChallenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
            AcmeChallenge::Http01 => ChallengeType::Http01,
        };
        let mut authorizations = order.authorizations();
        while let Some(authz) = authorizations.next().await {
            let mut authz = authz.context("cannot read an authorization")?;
            let name = authz.identifier().to_string();
            match authz.status {
                AuthorizationStatus::Valid => continue,
                AuthorizationStatus::Pending => {}
                other => bail!("the authorization for {name} is {other:?}"),
            }
            let mut challenge = authz
                .challenge(kind.clone())
                .ok_or_else(|| anyhow!("the CA offers no {kind:?} challenge for {name}"))?;
            let key_authorization = challenge.key_authorization();
            match kind {
                ChallengeType::TlsAlpn01 => self.identity.set_challenge(
                    &name,
                    alpn_certificate(&name, key_authorization.digest().as_ref())?,
                ),
                _ => self
                    .tokens
                    .insert(&challenge.token, key_authorization.as_str()),
            }
            challenge
                .set_ready()
                .await
                .with_context(|| format!("the CA refused the challenge for {name}"))?;
        }
        let patience = RetryPolicy::new().timeout(CA_PATIENCE);
        let status = order
            .poll_ready(&patience)
            .await
            .context("waiting for the CA to validate")?;
        if status != OrderStatus::Ready {
            bail!(
                "the CA did not validate the names ({status:?}): {}",
                failures(order).await
            );
        }
        let key = rcgen::KeyPair::generate().context("cannot make a key")?;
        let mut params =
            rcgen::CertificateParams::new(self.names.clone()).context("key `acme.domains`")?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        let csr = params
            .serialize_request(&key)
            .context("cannot make the signing request")?;
        order
            .finalize_csr(csr.der())
            .await
            .context("the CA refused to finalize the order")?;
        let chain = order
            .poll_certificate(&patience)
            .await
            .context("waiting for the certificate")?;
        Ok((chain, key))
    }

    /// The account at the configured directory: the stored one, or a new
    /// one (agreeing to the CA's terms of service) stored for next time.
    async fn account(&self) -> anyhow::Result<Account> {
        let builder = || match &self.config.ca_file {
            Some(file) => Account::builder_with_root(file)
                .with_context(|| format!("key `acme.ca_file`: {}", file.display())),
            None => Account::builder().context("cannot read the system's root certificates"),
        };
        let path = self.dir.join("account.json");
        match std::fs::read(&path) {
            Ok(bytes) => {
                let stored: StoredAccount = serde_json::from_slice(&bytes)
                    .with_context(|| format!("{} is damaged", path.display()))?;
                if stored.directory == self.config.directory {
                    return builder()?
                        .from_credentials(stored.credentials)
                        .await
                        .with_context(|| {
                            format!(
                                "key `acme.directory`: {} unreachable",
                                self.config.directory
                            )
                        });
                }
                tracing::info!(directory = %self.config.directory, "ACME directory changed: a new account");
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
        let contact: Vec<String> = self
            .config
            .contact
            .iter()
            .map(|c| format!("mailto:{c}"))
            .collect();
        let contact: Vec<&str> = contact.iter().map(String::as_str).collect();
        let (account, credentials) = builder()?
            .create(
                &NewAccount {
                    contact: &contact,
                    terms_of_service_agreed: true,
                    only_return_existing: false,
                },
                self.config.directory.clone(),
                None,
            )
            .await
            .with_context(|| {
                format!(
                    "key `acme.directory`: cannot create an account at {}",
                    self.config.directory
                )
            })?;
        let stored = StoredAccount {
            directory: self.config.directory.clone(),
            credentials,
        };
        write_private(&path, &serde_json::to_vec_pretty(&stored)?)?;
        tracing::info!(account = %account.id(), "ACME account created");
        Ok(account)
    }
}

/// What the CA said about the challenges of a failed order.
async fn failures(order: &mut Order) -> String {
    let mut said = Vec::new();
    let mut authorizations = order.authorizations();
    while let Some(Ok(mut authz)) = authorizations.next().await {
        // The states read before validation are stale.
        let Ok(state) = authz.refresh().await else {
            continue;
        };
        let name = state.identifier().to_string();
        for c in &state.challenges {
            if let Some(problem) = &c.error {
                said.push(format!("{name}: {problem}"));
            }
        }
    }
    if said.is_empty() {
        "no reason given".into()
    } else {
        said.join("; ")
    }
}

/// The tls-alpn-01 answer for `name` (RFC 8737 §3): a self-signed
/// certificate naming it, with the critical acmeIdentifier extension
/// holding the SHA-256 of the key authorization.
fn alpn_certificate(name: &str, digest: &[u8]) -> anyhow::Result<CertifiedKey> {
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()])
        .with_context(|| format!("{name:?} cannot be a certificate name"))?;
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest)];
    let key = rcgen::KeyPair::generate().context("cannot make a key")?;
    let cert = params
        .self_signed(&key)
        .context("cannot make the challenge certificate")?;
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    // Not through `certified`: its check that certificate and key match
    // parses the certificate, which refuses the critical extension.
    let signing = rustls::crypto::ring::sign::any_supported_type(&key_der)
        .map_err(|e| anyhow!("unusable key: {e}"))?;
    Ok(CertifiedKey::new(vec![cert.der().clone()], signing))
}

/// The stored certificate's leaf, if there is one that parses.
fn stored_info(cert: &Path) -> Option<CertInfo> {
    let pem = std::fs::read(cert).ok()?;
    let der = rustls_pemfile::certs(&mut pem.as_slice()).next()?.ok()?;
    CertInfo::parse(der.as_ref()).ok()
}

/// When a certificate is due for renewal, in Unix seconds: when fewer
/// than `renew_before_days` are left. A CA whose certificates live no
/// longer than that (short-lived profiles) would make that at once, so
/// they are renewed with a third of their life left instead.
fn due_at(info: &CertInfo, renew_before_days: u32) -> i64 {
    let lifetime = (info.not_after - info.not_before).max(0);
    let before = i64::from(renew_before_days) * 86_400;
    let before = if before < lifetime {
        before
    } else {
        lifetime / 3
    };
    info.not_after - before
}

/// The wait after `failures` failures in a row.
fn backoff(failures: u32) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(16);
    (FIRST_BACKOFF * factor).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(not_before: i64, not_after: i64) -> CertInfo {
        CertInfo {
            common_name: None,
            names: vec!["mx.example.org".into()],
            not_before,
            not_after,
            serial: String::new(),
            fingerprint: String::new(),
        }
    }

    #[test]
    fn due_before_expiry() {
        let day = 86_400;
        // 90-day certificate, renewed with 30 days left.
        assert_eq!(due_at(&info(0, 90 * day), 30), 60 * day);
        // A 6-day certificate is renewed with 2 days left, not at once.
        assert_eq!(due_at(&info(0, 6 * day), 30), 4 * day);
        // Just longer than the window: due right after the window opens.
        assert_eq!(due_at(&info(0, 30 * day + 20), 30), 20);
    }

    #[test]
    fn backoff_doubles_up_to_a_limit() {
        assert_eq!(backoff(1), FIRST_BACKOFF);
        assert_eq!(backoff(2), FIRST_BACKOFF * 2);
        assert_eq!(backoff(40), MAX_BACKOFF);
    }

    #[test]
    fn the_challenge_certificate_carries_the_acme_identifier() {
        let digest = [7u8; 32];
        let key = alpn_certificate("mx.example.org", &digest).unwrap();
        let der = key.cert[0].as_ref();
        let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
        // id-pe-acmeIdentifier, RFC 8737 §6.1.
        let ext = cert
            .extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == "1.3.6.1.5.5.7.1.31")
            .expect("acmeIdentifier");
        assert!(ext.critical);
        // An OCTET STRING of the 32-byte digest.
        assert_eq!(&ext.value[..2], &[0x04, 32]);
        assert_eq!(&ext.value[2..], &digest);
        let info = CertInfo::parse(der).unwrap();
        assert!(info.covers("mx.example.org"));
    }
}
