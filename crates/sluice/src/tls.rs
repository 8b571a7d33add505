//! The server's TLS identity: the configured certificate, or a self-signed
//! one generated into the data directory at first start so STARTTLS works
//! out of the box.

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context as _};
use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

use crate::config::Config;

/// Paths of the certificate and key in use, generating them if needed.
fn identity(config: &Config) -> anyhow::Result<(PathBuf, PathBuf)> {
    if let (Some(cert), Some(key)) = (&config.tls.cert, &config.tls.key) {
        return Ok((cert.clone(), key.clone()));
    }
    let dir = config.data_dir.join("tls");
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    if cert.exists() && key.exists() {
        return Ok((cert, key));
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let generated = rcgen::generate_simple_self_signed(vec![config.hostname.clone()])
        .context("cannot generate a self-signed certificate")?;
    write_private(&key, generated.key_pair.serialize_pem().as_bytes())?;
    std::fs::write(&cert, generated.cert.pem())
        .with_context(|| format!("cannot write {}", cert.display()))?;
    tracing::info!(cert = %cert.display(), "generated a self-signed certificate");
    Ok((cert, key))
}

fn write_private(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(data)?;
    Ok(())
}

/// The certificate every TLS listener presents. It can be swapped while
/// they run (`SIGHUP` reads the files again): new handshakes get the new
/// one, sessions already open keep theirs.
#[derive(Debug)]
pub struct Identity {
    current: ArcSwap<CertifiedKey>,
    cert_path: PathBuf,
    key_path: PathBuf,
}

impl Identity {
    /// Reads the certificate and key files again; on an error the one in
    /// use stays.
    pub fn reload(&self) -> anyhow::Result<()> {
        let key = load(&self.cert_path, &self.key_path)?;
        self.current.store(Arc::new(key));
        Ok(())
    }
}

impl ResolvesServerCert for Identity {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// The certificate chain and key of two PEM files, checked to match.
fn load(cert_path: &Path, key_path: &Path) -> anyhow::Result<CertifiedKey> {
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
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| anyhow!("unusable key in {}: {e}", key_path.display()))?;
    let certified = CertifiedKey::new(certs, signing);
    certified
        .keys_match()
        .map_err(|e| anyhow!("certificate and key do not match: {e}"))?;
    Ok(certified)
}

/// Builds the TLS acceptor every listener shares, and the identity it
/// presents.
pub fn acceptor(config: &Config) -> anyhow::Result<(TlsAcceptor, Arc<Identity>)> {
    let (cert_path, key_path) = identity(config)?;
    let key = load(&cert_path, &key_path)?;
    let identity = Arc::new(Identity {
        current: ArcSwap::from_pointee(key),
        cert_path,
        key_path,
    });
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
    Ok((TlsAcceptor::from(Arc::new(server)), identity))
}
