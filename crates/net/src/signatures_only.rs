//! A TLS client verifier that checks the handshake's signatures but not
//! the certificate's issuer or names: the session is encrypted to
//! whoever holds the certificate's key. For a peer with a self-signed
//! certificate on a private network, where the operator chose it (the
//! proxy's `upstream_verify = false`, the store's `tls = "require"`).

use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{DigitallySignedStruct, SignatureScheme};

/// See the module comment.
#[derive(Debug)]
pub struct SignaturesOnly(Arc<rustls::crypto::CryptoProvider>);

impl SignaturesOnly {
    /// Checks signatures with the algorithms of `provider`.
    pub fn new(provider: Arc<rustls::crypto::CryptoProvider>) -> SignaturesOnly {
        SignaturesOnly(provider)
    }
}

impl ServerCertVerifier for SignaturesOnly {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
