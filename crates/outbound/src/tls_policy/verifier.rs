//! The rustls certificate verifier used for STARTTLS with an MX: one type
//! that applies the destination's policy (DANE, MTA-STS enforce/testing,
//! opportunistic) and notes what it found for the TLS results.

use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};

use super::dane::{self, Tlsa};
use super::tlsrpt::FailureType;

/// What the certificate check must achieve.
#[derive(Debug, Clone)]
pub(crate) enum Check {
    /// DANE: the chain must match the TLSA set; else the handshake fails.
    Dane {
        records: Vec<Tlsa>,
        reference_names: Vec<String>,
    },
    /// Web PKI for the MX name; a failure fails the handshake when
    /// `enforce`, and is only noted otherwise (MTA-STS testing,
    /// opportunistic TLS).
    WebPki { enforce: bool },
}

/// What the verifier found during one handshake: shared with the
/// caller through [`super::MxTls::verification`].
#[derive(Debug, Clone, Default)]
pub struct Verification(Arc<Mutex<Option<Found>>>);

type Found = Result<(), (FailureType, String)>;

impl Verification {
    /// Whether the certificate was verified; `None` before a handshake
    /// reached the certificate check.
    pub fn verified(&self) -> Option<bool> {
        self.lock().as_ref().map(|r| r.is_ok())
    }

    /// Why the certificate did not verify, if it did not.
    pub fn failure(&self) -> Option<String> {
        self.lock()
            .as_ref()
            .and_then(|r| r.as_ref().err().map(|(_, why)| why.clone()))
    }

    /// The TLS-RPT result type of the failure, if the certificate did not verify.
    pub fn failure_type(&self) -> Option<FailureType> {
        self.lock()
            .as_ref()
            .and_then(|r| r.as_ref().err().map(|(kind, _)| *kind))
    }

    fn set(&self, result: Found) {
        *self.lock() = Some(result);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Found>> {
        // The slot holds plain data: a poisoned lock still holds a valid value.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Debug)]
pub(crate) struct PolicyVerifier {
    pub(crate) check: Check,
    pub(crate) webpki: Arc<WebPkiServerVerifier>,
    /// The handshake's signatures, checked whatever the policy: they
    /// prove the server holds the key it presented.
    pub(crate) signatures: net::SignaturesOnly,
    pub(crate) found: Verification,
}

impl ServerCertVerifier for PolicyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match &self.check {
            Check::Dane {
                records,
                reference_names,
            } => {
                match dane::verify_chain(records, end_entity, intermediates, reference_names, now) {
                    Ok(()) => {
                        self.found.set(Ok(()));
                        Ok(ServerCertVerified::assertion())
                    }
                    Err(e) => {
                        self.found
                            .set(Err((FailureType::TlsaInvalid, format!("DANE: {e}"))));
                        Err(rustls::Error::InvalidCertificate(
                            CertificateError::ApplicationVerificationFailure,
                        ))
                    }
                }
            }
            Check::WebPki { enforce } => {
                match self.webpki.verify_server_cert(
                    end_entity,
                    intermediates,
                    server_name,
                    ocsp_response,
                    now,
                ) {
                    Ok(v) => {
                        self.found.set(Ok(()));
                        Ok(v)
                    }
                    Err(e) => {
                        self.found.set(Err((
                            FailureType::from_certificate_error(&e),
                            e.to_string(),
                        )));
                        if *enforce {
                            Err(e)
                        } else {
                            Ok(ServerCertVerified::assertion())
                        }
                    }
                }
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signatures.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signatures.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.signatures.supported_verify_schemes()
    }
}
