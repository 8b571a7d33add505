//! SMTP TLS Reporting (RFC 8460): the `_smtp._tls` TXT record, the
//! result types of failures, and the JSON aggregate report. No I/O.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Why a TLS-RPT record was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsRptParseError {
    /// Not `v=TLSRPTv1` first.
    #[error("TLS-RPT: the record does not start with v=TLSRPTv1")]
    Version,
    /// No `rua` field, or no usable URI in it.
    #[error("TLS-RPT: no rua")]
    NoRua,
}

/// Parses an `_smtp._tls.DOMAIN` TXT record (RFC 8460 §3):
/// `v=TLSRPTv1; rua=mailto:tlsrpt@example.net,https://r.example.net/v1`.
/// Returns the report URIs (`mailto:` and `https:` only; others are
/// ignored, RFC 8460 §3).
pub fn parse_txt(record: &str) -> Result<Vec<String>, TlsRptParseError> {
    let mut fields = record.split(';').map(|f| f.trim_matches([' ', '\t']));
    if fields.next() != Some("v=TLSRPTv1") {
        return Err(TlsRptParseError::Version);
    }
    for field in fields {
        let Some((key, value)) = field.split_once('=') else {
            continue;
        };
        if key.trim() == "rua" {
            let uris: Vec<String> = value
                .split(',')
                .map(|u| u.trim())
                .filter(|u| {
                    let lower = u.to_ascii_lowercase();
                    (lower.starts_with("mailto:") && u.len() > 7)
                        || (lower.starts_with("https://") && u.len() > 8)
                })
                .map(str::to_string)
                .collect();
            return if uris.is_empty() {
                Err(TlsRptParseError::NoRua)
            } else {
                Ok(uris)
            };
        }
    }
    Err(TlsRptParseError::NoRua)
}

/// The `result-type` of a failed session (RFC 8460 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FailureType {
    /// The MX did not offer STARTTLS.
    StarttlsNotSupported,
    /// The certificate does not name the MX.
    CertificateHostMismatch,
    /// The certificate has expired.
    CertificateExpired,
    /// The certificate does not chain to a trusted root.
    CertificateNotTrusted,
    /// Any other failure to establish or verify the session.
    ValidationFailure,
    /// The TLSA records could not be used or did not match.
    TlsaInvalid,
    /// The DNSSEC answers for MX or TLSA did not validate.
    DnssecInvalid,
    /// The MTA-STS policy could not be fetched.
    StsPolicyFetchError,
    /// The MTA-STS policy did not parse.
    StsPolicyInvalid,
    /// The MTA-STS policy host's certificate did not verify.
    StsWebpkiInvalid,
}

impl FailureType {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureType::StarttlsNotSupported => "starttls-not-supported",
            FailureType::CertificateHostMismatch => "certificate-host-mismatch",
            FailureType::CertificateExpired => "certificate-expired",
            FailureType::CertificateNotTrusted => "certificate-not-trusted",
            FailureType::ValidationFailure => "validation-failure",
            FailureType::TlsaInvalid => "tlsa-invalid",
            FailureType::DnssecInvalid => "dnssec-invalid",
            FailureType::StsPolicyFetchError => "sts-policy-fetch-error",
            FailureType::StsPolicyInvalid => "sts-policy-invalid",
            FailureType::StsWebpkiInvalid => "sts-webpki-invalid",
        }
    }

    /// The result type of a certificate the web PKI refused.
    pub fn from_certificate_error(e: &rustls::Error) -> FailureType {
        use rustls::CertificateError as C;
        match e {
            rustls::Error::InvalidCertificate(c) => match c {
                C::NotValidForName | C::NotValidForNameContext { .. } => {
                    FailureType::CertificateHostMismatch
                }
                C::Expired | C::ExpiredContext { .. } => FailureType::CertificateExpired,
                C::UnknownIssuer | C::BadSignature => FailureType::CertificateNotTrusted,
                _ => FailureType::ValidationFailure,
            },
            _ => FailureType::ValidationFailure,
        }
    }
}

/// The policy a session was made under, as a report names it (RFC 8460
/// §4.4 `policy`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReportPolicy {
    /// `sts`, `tlsa` or `no-policy-found`.
    pub policy_type: &'static str,
    /// The policy's lines (MTA-STS) or TLSA records in presentation form.
    pub policy_string: Vec<String>,
}

/// Counts for one policy of one domain over a report period.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyCounts {
    /// MX hosts seen under this policy.
    pub mx_hosts: std::collections::BTreeSet<String>,
    /// Sessions that established TLS as the policy demands.
    pub successful: u64,
    /// Sessions that failed.
    pub failed: u64,
    /// Failed sessions by (result type, receiving MX, receiving IP).
    pub failures: BTreeMap<(FailureType, String, String), u64>,
}

/// The most distinct failure details kept per policy (the rest are
/// counted in `failed` only), so a bad destination cannot grow memory.
pub const FAILURE_DETAILS_LIMIT: usize = 64;

impl PolicyCounts {
    /// Adds one session's outcome.
    pub fn add(&mut self, mx_host: &str, failure: Option<(FailureType, Option<std::net::IpAddr>)>) {
        if self.mx_hosts.len() < FAILURE_DETAILS_LIMIT {
            self.mx_hosts.insert(mx_host.to_string());
        }
        match failure {
            None => self.successful += 1,
            Some((kind, ip)) => {
                self.failed += 1;
                let key = (
                    kind,
                    mx_host.to_string(),
                    ip.map(|ip| ip.to_string()).unwrap_or_default(),
                );
                if let Some(n) = self.failures.get_mut(&key) {
                    *n += 1;
                } else if self.failures.len() < FAILURE_DETAILS_LIMIT {
                    self.failures.insert(key, 1);
                }
            }
        }
    }
}

/// Who sends the report (RFC 8460 §4.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reporter {
    /// `organization-name`.
    pub organization: String,
    /// `contact-info` (an address).
    pub contact: String,
}

/// Builds the JSON aggregate report (RFC 8460 §4.4) for `domain` over
/// `[start, end)` (Unix seconds), from the counts per policy.
pub fn report_json(
    reporter: &Reporter,
    report_id: &str,
    domain: &str,
    start: u64,
    end: u64,
    policies: &BTreeMap<ReportPolicy, PolicyCounts>,
) -> String {
    let mut j = String::from("{");
    let _ = write!(
        j,
        "\"organization-name\":{},\"date-range\":{{\"start-datetime\":{},\"end-datetime\":{}}},\"contact-info\":{},\"report-id\":{},\"policies\":[",
        quote(&reporter.organization),
        quote(&rfc3339(start)),
        quote(&rfc3339(end)),
        quote(&reporter.contact),
        quote(report_id)
    );
    for (i, (policy, counts)) in policies.iter().enumerate() {
        if i > 0 {
            j.push(',');
        }
        let strings: Vec<String> = policy.policy_string.iter().map(|s| quote(s)).collect();
        let mx: Vec<String> = counts.mx_hosts.iter().map(|s| quote(s)).collect();
        let _ = write!(
            j,
            "{{\"policy\":{{\"policy-type\":{},\"policy-string\":[{}],\"policy-domain\":{},\"mx-host\":[{}]}},\"summary\":{{\"total-successful-session-count\":{},\"total-failure-session-count\":{}}},\"failure-details\":[",
            quote(policy.policy_type),
            strings.join(","),
            quote(domain),
            mx.join(","),
            counts.successful,
            counts.failed
        );
        for (k, ((kind, mx_host, ip), n)) in counts.failures.iter().enumerate() {
            if k > 0 {
                j.push(',');
            }
            let _ = write!(
                j,
                "{{\"result-type\":{},\"receiving-mx-hostname\":{},",
                quote(kind.as_str()),
                quote(mx_host)
            );
            if !ip.is_empty() {
                let _ = write!(j, "\"receiving-ip\":{},", quote(ip));
            }
            let _ = write!(j, "\"failed-session-count\":{n}}}");
        }
        j.push_str("]}");
    }
    j.push_str("]}");
    j
}

/// A JSON string literal (RFC 8259 §7).
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `2026-11-24T00:00:00Z`.
fn rfc3339(unix: u64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(unix as i64)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn txt_record() {
        assert_eq!(
            parse_txt("v=TLSRPTv1; rua=mailto:reports@example.net,https://r.example.net/v1")
                .unwrap(),
            vec!["mailto:reports@example.net", "https://r.example.net/v1"]
        );
        assert_eq!(
            parse_txt("v=TLSRPTv1;rua=ftp://x,mailto:a@b").unwrap(),
            vec!["mailto:a@b"]
        );
        assert_eq!(
            parse_txt("v=TLSRPTv1; rua=ftp://x"),
            Err(TlsRptParseError::NoRua)
        );
        assert_eq!(parse_txt("v=TLSRPTv1;"), Err(TlsRptParseError::NoRua));
        assert_eq!(
            parse_txt("rua=mailto:a@b; v=TLSRPTv1"),
            Err(TlsRptParseError::Version)
        );
    }

    #[test]
    fn failure_details_are_bounded() {
        let mut c = PolicyCounts::default();
        for i in 0..1000 {
            c.add(
                &format!("mx{i}.example.net"),
                Some((FailureType::ValidationFailure, None)),
            );
        }
        c.add("mx.example.net", None);
        assert_eq!((c.successful, c.failed), (1, 1000));
        assert_eq!(c.failures.len(), FAILURE_DETAILS_LIMIT);
        assert_eq!(c.mx_hosts.len(), FAILURE_DETAILS_LIMIT);
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    }

    proptest! {
        #[test]
        fn txt_parser_never_panics(s in "\\PC*") {
            let _ = parse_txt(&s);
        }
    }
}
