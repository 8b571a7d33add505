//! DANE for SMTP (RFC 7672, RFC 6698, RFC 7671): which TLSA records are
//! usable and whether a server's certificate chain matches them. No I/O.

use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use sha2::{Digest, Sha256, Sha512};

/// One TLSA record (RFC 6698 §2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tlsa {
    /// Certificate usage: 0 PKIX-TA, 1 PKIX-EE, 2 DANE-TA, 3 DANE-EE.
    pub usage: u8,
    /// Selector: 0 the whole certificate, 1 its SubjectPublicKeyInfo.
    pub selector: u8,
    /// Matching type: 0 exact, 1 SHA-256, 2 SHA-512.
    pub matching: u8,
    /// The association data.
    pub data: Vec<u8>,
}

/// DANE-TA(2), per RFC 7218.
pub const DANE_TA: u8 = 2;
/// DANE-EE(3), per RFC 7218.
pub const DANE_EE: u8 = 3;

impl Tlsa {
    /// Whether SMTP may use this record: DANE-TA or DANE-EE with a known
    /// selector and matching type. PKIX-TA(0) and PKIX-EE(1) are not used
    /// for SMTP (RFC 7672 §3.1.3), nor are unknown parameters (RFC 7671 §4).
    pub fn usable(&self) -> bool {
        matches!(self.usage, DANE_TA | DANE_EE)
            && self.selector <= 1
            && match self.matching {
                0 => !self.data.is_empty(),
                1 => self.data.len() == 32,
                2 => self.data.len() == 64,
                _ => false,
            }
    }

    /// Whether this record's association data matches `cert` (DER).
    pub fn matches(&self, cert: &CertificateDer<'_>) -> bool {
        let selected: Vec<u8> = match self.selector {
            0 => cert.as_ref().to_vec(),
            1 => match webpki::EndEntityCert::try_from(cert) {
                Ok(parsed) => parsed.subject_public_key_info().as_ref().to_vec(),
                Err(_) => return false,
            },
            _ => return false,
        };
        match self.matching {
            0 => selected == self.data,
            1 => Sha256::digest(&selected).as_slice() == self.data.as_slice(),
            2 => Sha512::digest(&selected).as_slice() == self.data.as_slice(),
            _ => false,
        }
    }
}

impl std::fmt::Display for Tlsa {
    /// Presentation form: `3 1 1 0123abcd...`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {} {}",
            self.usage,
            self.selector,
            self.matching,
            hex::encode(&self.data)
        )
    }
}

/// Why a chain did not satisfy the TLSA set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DaneError {
    /// No usable record matched the leaf or a certificate of the chain.
    #[error("no TLSA record matches the certificate chain")]
    NoMatch,
    /// A DANE-TA record matched a chain certificate but the leaf does not
    /// chain to it or has expired.
    #[error("certificate does not chain to the DANE-TA trust anchor: {0}")]
    Chain(String),
    /// The chain verifies but the leaf names none of the reference identifiers.
    #[error("certificate is not valid for {0}")]
    Name(String),
}

/// Checks a presented chain against a TLSA set (RFC 7672 §3.1, §3.2):
///
/// - DANE-EE(3): the leaf matches; neither its names nor its validity
///   dates are checked (RFC 7672 §3.1.1).
/// - DANE-TA(2): a certificate of the chain matches and becomes the trust
///   anchor; the leaf must chain to it, be within its dates, and name one
///   of `reference_names` (the MX host, and the destination domain,
///   RFC 7672 §3.2.3). The trust anchor must be among the certificates
///   the server sends (RFC 7671 §5.2.2); a bare public key that matches
///   no sent certificate cannot anchor the chain here.
pub fn verify_chain(
    records: &[Tlsa],
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    reference_names: &[String],
    now: UnixTime,
) -> Result<(), DaneError> {
    let usable = || records.iter().filter(|r| r.usable());
    if usable().any(|r| r.usage == DANE_EE && r.matches(end_entity)) {
        return Ok(());
    }
    let mut last = DaneError::NoMatch;
    for (i, ta) in intermediates.iter().enumerate() {
        if !usable().any(|r| r.usage == DANE_TA && r.matches(ta)) {
            continue;
        }
        match chain_to(ta, &intermediates[..i], end_entity, reference_names, now) {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn chain_to(
    ta: &CertificateDer<'_>,
    below: &[CertificateDer<'_>],
    end_entity: &CertificateDer<'_>,
    reference_names: &[String],
    now: UnixTime,
) -> Result<(), DaneError> {
    let anchor =
        webpki::anchor_from_trusted_cert(ta).map_err(|e| DaneError::Chain(e.to_string()))?;
    let leaf =
        webpki::EndEntityCert::try_from(end_entity).map_err(|e| DaneError::Chain(e.to_string()))?;
    leaf.verify_for_usage(
        webpki::ALL_VERIFICATION_ALGS,
        &[anchor],
        below,
        now,
        webpki::KeyUsage::server_auth(),
        None,
        None,
    )
    .map_err(|e| DaneError::Chain(e.to_string()))?;
    for name in reference_names {
        if let Ok(server_name) = ServerName::try_from(name.as_str()) {
            if leaf.verify_is_valid_for_subject_name(&server_name).is_ok() {
                return Ok(());
            }
        }
    }
    Err(DaneError::Name(reference_names.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Pki {
        ca_der: CertificateDer<'static>,
        ca_spki: Vec<u8>,
        leaf_der: CertificateDer<'static>,
        leaf_spki: Vec<u8>,
    }

    fn pki(leaf_name: &str) -> Pki {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "Test TA");
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec![leaf_name.to_string()]).unwrap();
        let leaf_cert = leaf.signed_by(&leaf_key, &ca_cert, &ca_key).unwrap();
        Pki {
            ca_der: ca_cert.der().clone(),
            ca_spki: ca_key.public_key_der(),
            leaf_der: leaf_cert.der().clone(),
            leaf_spki: leaf_key.public_key_der(),
        }
    }

    fn rec(usage: u8, selector: u8, matching: u8, selected: &[u8]) -> Tlsa {
        let data = match matching {
            0 => selected.to_vec(),
            1 => Sha256::digest(selected).to_vec(),
            _ => Sha512::digest(selected).to_vec(),
        };
        Tlsa {
            usage,
            selector,
            matching,
            data,
        }
    }

    fn names() -> Vec<String> {
        vec!["mx.example.net".into(), "example.net".into()]
    }

    #[test]
    fn dane_ee_matches_every_selector_and_matching_type() {
        let p = pki("whatever.invalid");
        for matching in 0..=2 {
            for (selector, selected) in [(0, p.leaf_der.as_ref()), (1, p.leaf_spki.as_slice())] {
                let r = rec(DANE_EE, selector, matching, selected);
                assert!(r.usable());
                assert!(
                    r.matches(&p.leaf_der),
                    "selector {selector} matching {matching}"
                );
                // DANE-EE ignores names: the leaf is for another host.
                assert_eq!(
                    verify_chain(&[r], &p.leaf_der, &[], &names(), UnixTime::now()),
                    Ok(())
                );
            }
        }
    }

    #[test]
    fn dane_ta_requires_the_chain_and_the_name() {
        let good = pki("mx.example.net");
        let ta = rec(DANE_TA, 1, 1, &good.ca_spki);
        let chain = [good.ca_der.clone()];
        assert_eq!(
            verify_chain(
                std::slice::from_ref(&ta),
                &good.leaf_der,
                &chain,
                &names(),
                UnixTime::now()
            ),
            Ok(())
        );
        // The TA must be in the chain the server sent.
        assert_eq!(
            verify_chain(
                std::slice::from_ref(&ta),
                &good.leaf_der,
                &[],
                &names(),
                UnixTime::now()
            ),
            Err(DaneError::NoMatch)
        );
        // A DANE-TA leaf for another name fails.
        let other = pki("mail.example.org");
        let ta_other = rec(DANE_TA, 0, 2, other.ca_der.as_ref());
        let r = verify_chain(
            &[ta_other],
            &other.leaf_der,
            std::slice::from_ref(&other.ca_der),
            &names(),
            UnixTime::now(),
        );
        assert!(matches!(r, Err(DaneError::Name(_))), "{r:?}");
        // A leaf of another CA does not chain to this TA.
        let r = verify_chain(
            &[ta],
            &other.leaf_der,
            std::slice::from_ref(&good.ca_der),
            &names(),
            UnixTime::now(),
        );
        assert!(matches!(r, Err(DaneError::Chain(_))), "{r:?}");
    }

    #[test]
    fn mismatch_and_unusable_records() {
        let p = pki("mx.example.net");
        let q = pki("mx.example.net");
        let wrong = rec(DANE_EE, 1, 1, &q.leaf_spki);
        assert_eq!(
            verify_chain(&[wrong], &p.leaf_der, &[], &names(), UnixTime::now()),
            Err(DaneError::NoMatch)
        );
        // PKIX-EE matching the leaf is ignored for SMTP.
        let pkix = rec(1, 1, 1, &p.leaf_spki);
        assert!(!pkix.usable());
        assert_eq!(
            verify_chain(&[pkix], &p.leaf_der, &[], &names(), UnixTime::now()),
            Err(DaneError::NoMatch)
        );
        // A SHA-256 record with the wrong length is unusable.
        let short = Tlsa {
            usage: DANE_EE,
            selector: 1,
            matching: 1,
            data: vec![0; 31],
        };
        assert!(!short.usable());
        let unknown = Tlsa {
            usage: DANE_EE,
            selector: 2,
            matching: 1,
            data: vec![0; 32],
        };
        assert!(!unknown.usable());
    }

    #[test]
    fn spki_is_the_whole_subject_public_key_info() {
        let p = pki("mx.example.net");
        let parsed = webpki::EndEntityCert::try_from(&p.leaf_der).unwrap();
        assert_eq!(
            parsed.subject_public_key_info().as_ref(),
            p.leaf_spki.as_slice()
        );
    }
}
