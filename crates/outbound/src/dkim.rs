//! DKIM signing of outgoing mail (RFC 6376; Ed25519 by RFC 8463).
//!
//! A message is signed when it leaves, not when it arrives: the store
//! keeps one copy of a message for its local and remote recipients, and a
//! signature header cannot be added to a blob that is already stored. The
//! signature goes in front of the stored message on the wire; the body
//! hash is computed while the message streams through the signer piece by
//! piece, so no message is ever held whole in memory. A retry signs again
//! (a fresh `t=`), which is what a verifier expects of a new attempt.
//!
//! Which mail is signed: a message whose `From:` domain (or a parent of
//! it) has a signing key, and whose envelope sender is empty (our own
//! reports) or in a local domain. Mail forwarded for an alias keeps its
//! original author's domain in `From:`, and its envelope sender is
//! rewritten by SRS or is foreign: it is not signed in our name.
//!
//! Keys live in the store (a backup holds them, every node of a site signs
//! alike); `sluice dkim` makes, imports, rotates and lists them. Each
//! domain signs with at most one key per algorithm, so a domain with an
//! RSA and an Ed25519 key signs twice, as RFC 8463 §4 suggests.

use std::sync::Arc;

use base64::Engine as _;
use mail_auth::common::crypto::{DkimKey as PrivateKey, Ed25519Key, RsaKey, Sha256};
use mail_auth::common::headers::HeaderWriter;
use mail_auth::dkim::{DkimSigner, Done};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivateKeyDer;
use store::{BlobId, DkimKey, Store};
use tokio::sync::Mutex;

/// RSA keys made by `sluice dkim keygen` (RFC 8301 asks for at least 1024
/// bits; 2048 is what receivers expect today and fits one TXT record).
pub const RSA_BITS: usize = 2048;

/// The `[dkim]` configuration section.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DkimConfig {
    /// Whether outgoing mail is signed with the domains' signing keys.
    pub sign: bool,
    /// Header fields signed when present (RFC 6376 §5.4.1). `From` is
    /// always signed.
    pub headers: Vec<String>,
}

impl Default for DkimConfig {
    fn default() -> Self {
        DkimConfig {
            sign: true,
            headers: [
                "From",
                "Reply-To",
                "Subject",
                "Date",
                "Message-ID",
                "To",
                "Cc",
                "MIME-Version",
                "Content-Type",
                "Content-Transfer-Encoding",
                "In-Reply-To",
                "References",
                "List-Id",
                "List-Unsubscribe",
                "List-Unsubscribe-Post",
                "Sender",
            ]
            .map(String::from)
            .to_vec(),
        }
    }
}

/// Errors of making or reading a key.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0}")]
    Invalid(String),
    #[error("signing failed: {0}")]
    Sign(String),
}

/// A signing key, ready.
struct LoadedKey {
    domain: String,
    signer: DkimSigner<PrivateKey, Done>,
}

/// The private key of a stored key, ready to sign (DKIM here, ARC seals
/// in the SMTP server).
pub fn load(key: &DkimKey) -> Result<PrivateKey, KeyError> {
    match key.algorithm.as_str() {
        "rsa-sha256" => rsa_from_der(&key.private_der).map(PrivateKey::Rsa),
        "ed25519-sha256" => Ed25519Key::from_pkcs8_maybe_unchecked_der(&key.private_der)
            .map(PrivateKey::Ed25519)
            .map_err(|e| KeyError::Invalid(format!("not an Ed25519 key: {e}"))),
        other => Err(KeyError::Invalid(format!("unknown algorithm {other}"))),
    }
}

/// An RSA key from PKCS#1 or PKCS#8 DER.
fn rsa_from_der(der: &[u8]) -> Result<RsaKey<Sha256>, KeyError> {
    RsaKey::<Sha256>::from_key_der(PrivateKeyDer::Pkcs1(der.to_vec().into()))
        .or_else(|_| RsaKey::<Sha256>::from_key_der(PrivateKeyDer::Pkcs8(der.to_vec().into())))
        .map_err(|e| KeyError::Invalid(format!("not an RSA key: {e}")))
}

/// Makes a new key for `domain` (not yet stored).
pub fn generate(
    domain: &str,
    selector: &str,
    algorithm: &str,
    now: i64,
) -> Result<DkimKey, KeyError> {
    let (algorithm, private_der, public) = match algorithm {
        "rsa" | "rsa-sha256" => {
            let pair = mail_auth::dkim::generate::DkimKeyPair::generate_rsa(RSA_BITS)
                .map_err(|e| KeyError::Invalid(e.to_string()))?;
            let (private, public) = pair.into_inner();
            ("rsa-sha256", private, spki_of_rsa(&public))
        }
        "ed25519" | "ed25519-sha256" => {
            let pair = mail_auth::dkim::generate::DkimKeyPair::generate_ed25519()
                .map_err(|e| KeyError::Invalid(e.to_string()))?;
            let (private, public) = pair.into_inner();
            ("ed25519-sha256", private, public)
        }
        other => {
            return Err(KeyError::Invalid(format!(
                "unknown algorithm {other:?} (rsa or ed25519)"
            )))
        }
    };
    Ok(new_key(
        domain,
        selector,
        algorithm,
        private_der,
        &public,
        now,
    ))
}

/// A key not yet signing, its public half as DNS publishes it.
fn new_key(
    domain: &str,
    selector: &str,
    algorithm: &str,
    private_der: Vec<u8>,
    public: &[u8],
    now: i64,
) -> DkimKey {
    DkimKey {
        domain: domain.to_string(),
        selector: selector.to_string(),
        algorithm: algorithm.to_string(),
        private_der,
        public_key: base64::engine::general_purpose::STANDARD.encode(public),
        created: now,
        signing: false,
    }
}

/// A key from a PEM file another signer (OpenDKIM, Rspamd) used, so a
/// domain moves to Sluice without publishing a new record: PKCS#1 or
/// PKCS#8 RSA, PKCS#8 Ed25519.
pub fn import(domain: &str, selector: &str, pem: &[u8], now: i64) -> Result<DkimKey, KeyError> {
    let der = PrivateKeyDer::from_pem_slice(pem)
        .map_err(|e| KeyError::Invalid(format!("no private key in the PEM text: {e}")))?;
    let (algorithm, private_der, public) = match &der {
        PrivateKeyDer::Pkcs1(k) => {
            let key = rsa_from_der(k.secret_pkcs1_der())?;
            let public = spki_of_rsa(&key.public_key());
            ("rsa-sha256", k.secret_pkcs1_der().to_vec(), public)
        }
        PrivateKeyDer::Pkcs8(k) => {
            let der = k.secret_pkcs8_der();
            if let Ok(key) = Ed25519Key::from_pkcs8_maybe_unchecked_der(der) {
                ("ed25519-sha256", der.to_vec(), key.public_key())
            } else {
                let key = rsa_from_der(der)?;
                ("rsa-sha256", der.to_vec(), spki_of_rsa(&key.public_key()))
            }
        }
        _ => {
            return Err(KeyError::Invalid(
                "only RSA and Ed25519 keys sign DKIM".into(),
            ))
        }
    };
    Ok(new_key(
        domain,
        selector,
        algorithm,
        private_der,
        &public,
        now,
    ))
}

/// The DNS TXT record that publishes a key, as a zone file line; long
/// values are split into strings of at most 255 bytes (RFC 7208 §3.3 and
/// RFC 6376 §3.6.2.2 join them back).
pub fn txt_record(key: &DkimKey) -> String {
    let k = if key.algorithm.starts_with("ed25519") {
        "ed25519"
    } else {
        "rsa"
    };
    let value = format!("v=DKIM1; k={k}; p={}", key.public_key);
    let strings: Vec<String> = value
        .as_bytes()
        .chunks(255)
        .map(|c| format!("\"{}\"", String::from_utf8_lossy(c)))
        .collect();
    format!(
        "{}._domainkey.{}. IN TXT ( {} )",
        key.selector,
        key.domain,
        strings.join(" ")
    )
}

/// Wraps a PKCS#1 RSAPublicKey in a SubjectPublicKeyInfo, the form
/// `openssl rsa -pubout` and OpenDKIM publish and every verifier reads.
fn spki_of_rsa(pkcs1: &[u8]) -> Vec<u8> {
    // AlgorithmIdentifier { rsaEncryption, NULL }
    const ALGORITHM: [u8; 15] = [
        0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00,
    ];
    let mut bits = vec![0x03];
    der_length(pkcs1.len() + 1, &mut bits);
    bits.push(0); // no unused bits
    bits.extend_from_slice(pkcs1);
    let mut out = vec![0x30];
    der_length(ALGORITHM.len() + bits.len(), &mut out);
    out.extend_from_slice(&ALGORITHM);
    out.extend_from_slice(&bits);
    out
}

fn der_length(len: usize, out: &mut Vec<u8>) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
}

/// The domain part of the first address in a `From:` value as the store
/// indexes it (`Name <addr>` items joined with `, `).
fn from_domain(from: &str) -> Option<String> {
    let address = match (from.find('<'), from.find('>')) {
        (Some(open), Some(close)) if open < close => &from[open + 1..close],
        _ => from.split(',').next()?.trim(),
    };
    let (_, domain) = address.rsplit_once('@')?;
    let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
    (!domain.is_empty()).then_some(domain)
}

/// The signer the queue manager uses.
pub struct Signer {
    store: Arc<dyn Store>,
    config: DkimConfig,
    /// Keys that sign, loaded at a directory serial (keys are directory
    /// edits, so `sluice dkim` changes reach a running server).
    keys: Mutex<(i64, Arc<Vec<LoadedKey>>)>,
}

impl Signer {
    pub fn new(store: Arc<dyn Store>, mut config: DkimConfig) -> Signer {
        if !config
            .headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("from"))
        {
            config.headers.insert(0, "From".into());
        }
        Signer {
            store,
            config,
            keys: Mutex::new((-1, Arc::new(Vec::new()))),
        }
    }

    async fn signing_keys(&self) -> store::Result<Arc<Vec<LoadedKey>>> {
        let serial = self.store.directory_serial().await?;
        let mut cached = self.keys.lock().await;
        if cached.0 != serial {
            let mut loaded = Vec::new();
            for key in self.store.dkim_keys().await? {
                if !key.signing {
                    continue;
                }
                match load(&key) {
                    Ok(k) => loaded.push(LoadedKey {
                        domain: key.domain.clone(),
                        signer: DkimSigner::from_key(k)
                            .domain(&key.domain)
                            .selector(&key.selector)
                            .headers(self.config.headers.iter().cloned()),
                    }),
                    Err(e) => {
                        tracing::warn!(domain = key.domain, selector = key.selector, error = %e, "DKIM key unusable")
                    }
                }
            }
            *cached = (serial, Arc::new(loaded));
        }
        Ok(Arc::clone(&cached.1))
    }

    /// The `DKIM-Signature` fields to put in front of a message, empty when
    /// it is not ours to sign.
    pub async fn sign(
        &self,
        blob: BlobId,
        sender: &str,
        local_domains: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Vec<u8>, KeyError> {
        if !self.config.sign {
            return Ok(Vec::new());
        }
        if let Some((local, sender_domain)) = sender.rsplit_once('@') {
            let srs = local.len() >= 5 && local[..5].eq_ignore_ascii_case("SRS0=")
                || local.len() >= 5 && local[..5].eq_ignore_ascii_case("SRS1=");
            if srs || !local_domains(&sender_domain.to_ascii_lowercase()) {
                return Ok(Vec::new());
            }
        }
        let keys = self
            .signing_keys()
            .await
            .map_err(|e| KeyError::Sign(e.to_string()))?;
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let Some(headers) = self
            .store
            .headers(blob)
            .await
            .map_err(|e| KeyError::Sign(e.to_string()))?
        else {
            return Ok(Vec::new());
        };
        let Some(author) = from_domain(&headers.from) else {
            return Ok(Vec::new());
        };
        // The From domain itself, else its closest parent with a key
        // (relaxed DMARC alignment accepts a parent's signature).
        let mut domain = author.as_str();
        let chosen: Vec<&LoadedKey> = loop {
            let found: Vec<&LoadedKey> = keys.iter().filter(|k| k.domain == domain).collect();
            if !found.is_empty() {
                break found;
            }
            match domain.split_once('.') {
                Some((_, parent)) if parent.contains('.') => domain = parent,
                _ => return Ok(Vec::new()),
            }
        };
        let mut streams: Vec<_> = chosen.iter().map(|k| k.signer.sign_streaming()).collect();
        let mut seq = 0;
        while let Some(piece) = crate::message::piece(&*self.store, blob, seq)
            .await
            .map_err(|e| KeyError::Sign(e.to_string()))?
        {
            for stream in &mut streams {
                stream.write(&piece);
            }
            seq += 1;
        }
        let mut fields = Vec::new();
        for stream in streams {
            let signature = stream.finish().map_err(|e| KeyError::Sign(e.to_string()))?;
            fields.extend_from_slice(signature.to_header().as_bytes());
        }
        Ok(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_author_domain_is_read_from_the_indexed_from() {
        assert_eq!(
            from_domain("Ann Example <ann@Mail.Example.ORG>").as_deref(),
            Some("mail.example.org")
        );
        assert_eq!(
            from_domain("ann@example.org").as_deref(),
            Some("example.org")
        );
        assert_eq!(
            from_domain("\"Doe, Jo\" <jo@a.example>, x@b.example").as_deref(),
            Some("a.example")
        );
        assert_eq!(from_domain("undisclosed"), None);
        assert_eq!(from_domain(""), None);
    }

    #[test]
    fn der_lengths_are_short_or_long_form() {
        let mut v = Vec::new();
        der_length(5, &mut v);
        der_length(0x80, &mut v);
        der_length(270, &mut v);
        assert_eq!(v, [5, 0x81, 0x80, 0x82, 0x01, 0x0e]);
    }

    #[test]
    fn keys_made_here_load_and_their_records_split_at_255() {
        let rsa = generate("example.org", "r1", "rsa", 0).unwrap();
        assert!(matches!(load(&rsa), Ok(PrivateKey::Rsa(_))));
        let record = txt_record(&rsa);
        assert!(record.starts_with("r1._domainkey.example.org. IN TXT ( \"v=DKIM1; k=rsa; p=MIIB"));
        assert!(record.split('"').all(|s| s.len() <= 255));
        let ed = generate("example.org", "e1", "ed25519", 0).unwrap();
        assert!(matches!(load(&ed), Ok(PrivateKey::Ed25519(_))));
        // 32 raw bytes, base64.
        assert_eq!(ed.public_key.len(), 44);
        assert!(generate("example.org", "x", "dsa", 0).is_err());
    }

    #[test]
    fn an_imported_key_publishes_the_same_record_as_when_made() {
        let rsa = generate("example.org", "r1", "rsa", 0).unwrap();
        let pem = format!(
            "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(&rsa.private_der)
        );
        let imported = import("example.org", "r1", pem.as_bytes(), 0).unwrap();
        assert_eq!(imported.public_key, rsa.public_key);
        assert_eq!(imported.algorithm, "rsa-sha256");
        let ed = generate("example.org", "e1", "ed25519", 0).unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(&ed.private_der)
        );
        let imported = import("example.org", "e1", pem.as_bytes(), 0).unwrap();
        assert_eq!(imported.public_key, ed.public_key);
        assert_eq!(imported.algorithm, "ed25519-sha256");
        assert!(import("example.org", "x", b"not a key", 0).is_err());
    }
}
