//! The server's TLS identity: the configured certificate, the one an ACME
//! CA issued (`acme.rs`), or a self-signed one generated into the data
//! directory so STARTTLS works out of the box.

use std::collections::HashMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context as _};
use arc_swap::ArcSwap;
use rustls::pki_types::CertificateDer;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use sha2::Digest as _;
use tokio_rustls::TlsAcceptor;

use crate::config::{AcmeChallenge, Config};

/// How long a generated certificate is valid.
const SELF_SIGNED_DAYS: i64 = 365;
/// A generated certificate with fewer days left is made again at start.
const SELF_SIGNED_RENEW_DAYS: i64 = 30;
/// RFC 8737 §6.2: the ALPN protocol of tls-alpn-01 validation.
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// The names a generated certificate carries: the host name, and what a
/// trial setup on this machine is reached by.
fn self_signed_names(hostname: &str) -> Vec<String> {
    let mut names = vec![hostname.to_string()];
    for extra in ["localhost", "127.0.0.1", "::1"] {
        if !names.iter().any(|n| n.eq_ignore_ascii_case(extra)) {
            names.push(extra.to_string());
        }
    }
    names
}

/// What a certificate says about itself, as far as the server cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    /// The subject's common name, if any.
    pub common_name: Option<String>,
    /// Subject alternative names: DNS names and IP addresses as text.
    pub names: Vec<String>,
    /// Start of validity, Unix seconds.
    pub not_before: i64,
    /// End of validity, Unix seconds.
    pub not_after: i64,
    /// The serial number, colon-hex.
    pub serial: String,
    /// SHA-256 of the DER, colon-hex (as mail clients and browsers show it).
    pub fingerprint: String,
}

impl CertInfo {
    /// Parses a DER certificate.
    pub fn parse(der: &[u8]) -> anyhow::Result<CertInfo> {
        use x509_parser::extensions::GeneralName;
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| anyhow!("not an X.509 certificate: {e}"))?;
        let common_name = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(str::to_string);
        let mut names = Vec::new();
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(n) => names.push(n.to_string()),
                    GeneralName::IPAddress(bytes) => {
                        if let Ok(v4) = <[u8; 4]>::try_from(*bytes) {
                            names.push(std::net::IpAddr::from(v4).to_string());
                        } else if let Ok(v6) = <[u8; 16]>::try_from(*bytes) {
                            names.push(std::net::IpAddr::from(v6).to_string());
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(CertInfo {
            common_name,
            names,
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
            serial: colon_hex(cert.raw_serial()),
            fingerprint: fingerprint(der),
        })
    }

    /// Whether the certificate names `name` (case-insensitive).
    pub fn covers(&self, name: &str) -> bool {
        self.names.iter().any(|n| n.eq_ignore_ascii_case(name))
    }

    /// Time left until it expires (zero when expired).
    pub fn remaining(&self) -> Duration {
        Duration::from_secs(u64::try_from(self.not_after - unix_now()).unwrap_or(0))
    }

    /// The end of validity in RFC 3339, for logs.
    pub fn expires(&self) -> String {
        time::OffsetDateTime::from_unix_timestamp(self.not_after)
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_else(|| self.not_after.to_string())
    }
}

/// Seconds since the Unix epoch now.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn colon_hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The SHA-256 fingerprint of a DER certificate, `AB:CD:...`.
pub fn fingerprint(der: &[u8]) -> String {
    colon_hex(&sha2::Sha256::digest(der))
}

/// The leaf of a certified key, described.
pub fn leaf_info(key: &CertifiedKey) -> anyhow::Result<CertInfo> {
    let leaf = key
        .cert
        .first()
        .ok_or_else(|| anyhow!("empty certificate chain"))?;
    CertInfo::parse(leaf.as_ref())
}

/// Whether the generated certificate at `cert` still fits `hostname`:
/// issued for it, and more than [`SELF_SIGNED_RENEW_DAYS`] left.
fn self_signed_fits(cert: &Path, hostname: &str) -> bool {
    let Ok(pem) = std::fs::read(cert) else {
        return false;
    };
    let Some(Ok(der)) = rustls_pemfile::certs(&mut pem.as_slice()).next() else {
        return false;
    };
    let Ok(info) = CertInfo::parse(der.as_ref()) else {
        return false;
    };
    info.common_name.as_deref() == Some(hostname)
        && self_signed_names(hostname).iter().all(|n| info.covers(n))
        && info.remaining() > Duration::from_secs(SELF_SIGNED_RENEW_DAYS as u64 * 86_400)
}

/// A self-signed certificate and key (PEM) for `hostname`: CN and
/// subjectAltName the host name, plus `localhost`, `127.0.0.1` and `::1`;
/// valid from a day ago (clocks differ) for [`SELF_SIGNED_DAYS`].
pub fn generate_self_signed(hostname: &str) -> anyhow::Result<(String, String)> {
    let mut params = rcgen::CertificateParams::new(self_signed_names(hostname))
        .with_context(|| format!("key `hostname`: {hostname:?} cannot be a certificate name"))?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, hostname);
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(SELF_SIGNED_DAYS);
    let key = rcgen::KeyPair::generate().context("cannot make a key")?;
    let cert = params
        .self_signed(&key)
        .context("cannot make a self-signed certificate")?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Paths of the generated certificate and key in `<data>/tls/`, made
/// again when missing, for another host name, or near expiry.
fn self_signed(config: &Config) -> anyhow::Result<(PathBuf, PathBuf)> {
    let dir = config.data_dir.join("tls");
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    if key.exists() && self_signed_fits(&cert, &config.hostname) {
        return Ok((cert, key));
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let (cert_pem, key_pem) = generate_self_signed(&config.hostname)?;
    write_private(&key, key_pem.as_bytes())?;
    std::fs::write(&cert, cert_pem).with_context(|| format!("cannot write {}", cert.display()))?;
    tracing::info!(cert = %cert.display(), hostname = %config.hostname, "generated a self-signed certificate");
    Ok((cert, key))
}

/// Writes a file only the server's user may read (keys, account data),
/// through a temporary file and a rename so a crash leaves the old one.
pub fn write_private(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.write_all(data)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The certificate every TLS listener presents. It can be swapped while
/// they run (`SIGHUP` reads the files again; ACME installs a renewed
/// one): new handshakes get the new one, sessions already open keep
/// theirs. It also answers ACME tls-alpn-01 challenges (RFC 8737).
#[derive(Debug)]
pub struct Identity {
    current: ArcSwap<CertifiedKey>,
    /// Certificate and key files that `SIGHUP` reads again.
    files: Mutex<(PathBuf, PathBuf)>,
    /// Challenge certificates by the name being validated.
    alpn_challenges: Mutex<HashMap<String, Arc<CertifiedKey>>>,
}

impl Identity {
    fn new(key: CertifiedKey, cert_path: PathBuf, key_path: PathBuf) -> Identity {
        Identity {
            current: ArcSwap::from_pointee(key),
            files: Mutex::new((cert_path, key_path)),
            alpn_challenges: Mutex::default(),
        }
    }

    /// Reads the certificate and key files again; on an error the one in
    /// use stays.
    pub fn reload(&self) -> anyhow::Result<CertInfo> {
        let (cert, key) = self.files.lock().expect("not poisoned").clone();
        let loaded = load(&cert, &key)?;
        let info = leaf_info(&loaded)?;
        self.current.store(Arc::new(loaded));
        Ok(info)
    }

    /// Presents `key` from now on, and reads it from these files at the
    /// next `SIGHUP`.
    pub fn install(&self, key: CertifiedKey, cert_path: PathBuf, key_path: PathBuf) {
        *self.files.lock().expect("not poisoned") = (cert_path, key_path);
        self.current.store(Arc::new(key));
    }

    /// Answers tls-alpn-01 handshakes for `name` with `key` until
    /// [`Identity::clear_challenges`].
    pub fn set_challenge(&self, name: &str, key: CertifiedKey) {
        self.alpn_challenges
            .lock()
            .expect("not poisoned")
            .insert(name.to_ascii_lowercase(), Arc::new(key));
    }

    /// Forgets every challenge certificate.
    pub fn clear_challenges(&self) {
        self.alpn_challenges.lock().expect("not poisoned").clear();
    }
}

impl ResolvesServerCert for Identity {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // RFC 8737 §3: a validation handshake offers only acme-tls/1 and
        // names the domain in SNI; it gets the challenge certificate or
        // nothing, never the real one.
        if let Some(mut protocols) = hello.alpn() {
            if protocols.any(|p| p == ACME_TLS_ALPN) {
                let name = hello.server_name()?.to_ascii_lowercase();
                let found = self
                    .alpn_challenges
                    .lock()
                    .expect("not poisoned")
                    .get(&name)
                    .cloned();
                tracing::info!(name = %name, answered = found.is_some(), "ACME tls-alpn-01 validation");
                return found;
            }
        }
        if hello.server_name().is_none() {
            // Clients that connect by IP address send it as SNI, which
            // TLS does not allow (RFC 6066 §3); harmless, so not a warning.
            tracing::debug!("no SNI host name: the default certificate");
        }
        Some(self.current.load_full())
    }
}

/// The certificate chain and key of two PEM files, checked to match.
pub fn load(cert_path: &Path, key_path: &Path) -> anyhow::Result<CertifiedKey> {
    let certs = rustls_pemfile::certs(&mut BufReader::new(
        std::fs::File::open(cert_path)
            .with_context(|| format!("cannot open {}", cert_path.display()))?,
    ))
    .collect::<Result<Vec<_>, _>>()
    .with_context(|| format!("bad certificate file {}", cert_path.display()))?;
    if certs.is_empty() {
        return Err(anyhow!("no certificate in {}", cert_path.display()));
    }
    let key = rustls_pemfile::private_key(&mut BufReader::new(
        std::fs::File::open(key_path)
            .with_context(|| format!("cannot open {}", key_path.display()))?,
    ))
    .with_context(|| format!("bad key file {}", key_path.display()))?
    .ok_or_else(|| anyhow!("no private key in {}", key_path.display()))?;
    certified(certs, &key)
        .map_err(|e| anyhow!("{} and {}: {e}", cert_path.display(), key_path.display()))
}

/// A chain and its private key as rustls presents them, checked to match.
pub fn certified(
    certs: Vec<CertificateDer<'static>>,
    key: &rustls::pki_types::PrivateKeyDer<'_>,
) -> anyhow::Result<CertifiedKey> {
    let signing = rustls::crypto::ring::sign::any_supported_type(key)
        .map_err(|e| anyhow!("unusable key: {e}"))?;
    let certified = CertifiedKey::new(certs, signing);
    certified
        .keys_match()
        .map_err(|e| anyhow!("certificate and key do not match: {e}"))?;
    Ok(certified)
}

/// The files the server starts with: the configured ones; else the
/// certificate ACME issued before, if any; else the generated one.
fn start_files(config: &Config) -> anyhow::Result<(PathBuf, PathBuf)> {
    if let (Some(cert), Some(key)) = (&config.tls.cert, &config.tls.key) {
        return Ok((cert.clone(), key.clone()));
    }
    if config.acme.enabled {
        let (cert, key) = crate::acme::files(&config.data_dir);
        if cert.exists() && key.exists() {
            match load(&cert, &key) {
                Ok(_) => return Ok((cert, key)),
                Err(e) => {
                    tracing::warn!(error = %e, "the ACME certificate cannot be used; a self-signed one serves until the next is issued")
                }
            }
        }
    }
    self_signed(config)
}

/// The acceptors the listeners share, and the identity they present.
pub struct Acceptors {
    /// Every listener but `https`.
    pub main: TlsAcceptor,
    /// The `https` listener: HTTP/1.1, and ACME tls-alpn-01 when on.
    pub https: TlsAcceptor,
    /// The certificate they present.
    pub identity: Arc<Identity>,
}

/// Builds the TLS acceptors every listener shares, and the identity they
/// present. Logs the certificate's fingerprint and expiry.
pub fn acceptors(config: &Config) -> anyhow::Result<Acceptors> {
    let (cert_path, key_path) = start_files(config)?;
    let key = load(&cert_path, &key_path)?;
    match leaf_info(&key) {
        Ok(info) => tracing::info!(
            cert = %cert_path.display(),
            subject = info.common_name.as_deref().unwrap_or(""),
            names = %info.names.join(","),
            sha256 = %info.fingerprint,
            expires = %info.expires(),
            "certificate"
        ),
        Err(e) => {
            tracing::warn!(cert = %cert_path.display(), error = %e, "certificate not understood")
        }
    }
    let identity = Arc::new(Identity::new(key, cert_path, key_path));
    let versions: &[&rustls::SupportedProtocolVersion] = match config.tls.min_version {
        crate::config::TlsVersion::Tls12 => rustls::DEFAULT_VERSIONS,
        crate::config::TlsVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(versions)?
    .with_no_client_auth()
    .with_cert_resolver(identity.clone());
    let mut https = server.clone();
    if config.acme.enabled && config.acme.challenge == AcmeChallenge::TlsAlpn01 {
        // A client offering ALPN must find one of ours: browsers offer
        // http/1.1 (the webmail speaks it), the CA's validator acme-tls/1.
        https.alpn_protocols = vec![b"http/1.1".to_vec(), ACME_TLS_ALPN.to_vec()];
    }
    Ok(Acceptors {
        main: TlsAcceptor::from(Arc::new(server)),
        https: TlsAcceptor::from(Arc::new(https)),
        identity,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn der(pem: &str) -> Vec<u8> {
        rustls_pemfile::certs(&mut pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
            .to_vec()
    }

    #[test]
    fn the_generated_certificate_names_the_host() {
        let (cert, _) = generate_self_signed("mx.example.org").unwrap();
        let info = CertInfo::parse(&der(&cert)).unwrap();
        assert_eq!(info.common_name.as_deref(), Some("mx.example.org"));
        for name in ["mx.example.org", "localhost", "127.0.0.1", "::1"] {
            assert!(info.covers(name), "{name} in {:?}", info.names);
        }
        let now = unix_now();
        let day = 86_400;
        assert!((info.not_before - (now - day)).abs() < 60, "{info:?}");
        assert!(
            (info.not_after - (now + SELF_SIGNED_DAYS * day)).abs() < 60,
            "{info:?}"
        );
        assert_eq!(info.fingerprint.len(), 32 * 3 - 1);
        assert!(info
            .fingerprint
            .split(':')
            .all(|b| b.len() == 2 && b.chars().all(|c| c.is_ascii_hexdigit())));
    }

    #[test]
    fn localhost_is_named_once() {
        let (cert, _) = generate_self_signed("localhost").unwrap();
        let info = CertInfo::parse(&der(&cert)).unwrap();
        assert_eq!(info.names, vec!["localhost", "127.0.0.1", "::1"]);
    }

    #[test]
    fn made_again_for_another_host_name_or_near_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            hostname: "mx.example.org".into(),
            data_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        let (cert, _) = self_signed(&config).unwrap();
        let first = std::fs::read(&cert).unwrap();
        // Kept while it fits.
        self_signed(&config).unwrap();
        assert_eq!(std::fs::read(&cert).unwrap(), first);
        // Another host name: made again for it.
        let renamed = Config {
            hostname: "mail.example.net".into(),
            ..config.clone()
        };
        self_signed(&renamed).unwrap();
        let second = std::fs::read(&cert).unwrap();
        assert_ne!(second, first);
        let info = CertInfo::parse(&der(std::str::from_utf8(&second).unwrap())).unwrap();
        assert_eq!(info.common_name.as_deref(), Some("mail.example.net"));
        // Near expiry (as rcgen's old default would never be, but an old
        // one made by hand may be): made again.
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(self_signed_names("mail.example.net")).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "mail.example.net");
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(300);
        params.not_after = now + time::Duration::days(10);
        std::fs::write(&cert, params.self_signed(&key).unwrap().pem()).unwrap();
        assert!(!self_signed_fits(&cert, "mail.example.net"));
        self_signed(&renamed).unwrap();
        let info = CertInfo::parse(&der(&std::fs::read_to_string(&cert).unwrap())).unwrap();
        assert!(info.remaining() > Duration::from_secs(300 * 86_400));
    }

    #[test]
    fn files_written_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key.pem");
        write_private(&path, b"secret").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"secret");
    }
}
