//! TLS for the load generator's SMTP client: the certificate is checked
//! against a CA file (a test server's own certificate or its issuer) or,
//! without one, the web PKI roots; never accepted unchecked, so a run
//! measures the same handshake a real client makes.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use crate::error::{BenchError, Result};

/// A TLS client set-up: the connector and the name the server's
/// certificate must carry.
#[derive(Clone)]
pub struct Tls {
    pub(crate) connector: TlsConnector,
    pub(crate) name: ServerName<'static>,
}

impl Tls {
    /// Trust anchors from `ca` (PEM certificates), or the web PKI's roots
    /// without one; `name` is a DNS name or an IP address.
    pub fn new(ca: Option<&Path>, name: &str) -> Result<Tls> {
        let mut roots = RootCertStore::empty();
        match ca {
            Some(path) => {
                let pem = std::fs::read(path).map_err(|e| {
                    BenchError::Invalid(format!("cannot read {}: {e}", path.display()))
                })?;
                let certs = rustls_pemfile::certs(&mut pem.as_slice())
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| BenchError::Invalid(format!("{}: {e}", path.display())))?;
                if certs.is_empty() {
                    return Err(BenchError::Invalid(format!(
                        "{}: no PEM certificate",
                        path.display()
                    )));
                }
                for cert in certs {
                    roots
                        .add(cert)
                        .map_err(|e| BenchError::Invalid(format!("{}: {e}", path.display())))?;
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| BenchError::Invalid(format!("TLS: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::try_from(name.to_string())
            .map_err(|_| BenchError::Invalid(format!("{name}: not a server name")))?;
        Ok(Tls {
            connector: TlsConnector::from(Arc::new(config)),
            name,
        })
    }
}
