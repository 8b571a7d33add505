//! What DNSSEC says about DANE for one MX (RFC 7672 §2.2), and whether
//! DNSSEC can be validated here at all.
//!
//! Two failures look alike on the wire and must not be confused:
//!
//! - **Cannot validate here** (DANE *inactive*): the resolver answers
//!   without DNSSEC records (a provider's resolver, a container's DNS, a
//!   stub that strips them), so no answer can be proven secure. Every
//!   answer is then insecure, DANE does not apply (RFC 7672 §2.2), and
//!   mail goes out under MTA-STS or opportunistic TLS, as Postfix's `dane`
//!   level does on a resolver that sets no AD bit.
//! - **Validated and wrong** (*bogus*): the resolver passes DNSSEC along
//!   (the trust anchors' zones validate) but one answer's signatures do
//!   not: forged or broken. The MX is not used (RFC 7672 §2.1.1), since
//!   otherwise an attacker could strip DANE by breaking the signatures.
//!
//! Which case holds is found by [`Validation`]: the SOA of each trust
//! anchor's zone must come back secure. Once that has worked in this
//! process it is taken to keep working, so a later failure is bogus, not
//! a reason to drop DANE: an attacker who strips signatures after start
//! gains nothing. While it does not work it is checked again every
//! [`RECHECK`], so a resolver that comes up later (or is fixed) brings
//! DANE back without a restart.

use std::time::{Duration, Instant};

use hickory_resolver::net::{DnsError, NetError};
use hickory_resolver::proto::dnssec::Proof;
use hickory_resolver::proto::rr::RData;
use hickory_resolver::TokioResolver;

use super::dane::Tlsa;

/// How long a failed validation check stands before it is tried again.
pub const RECHECK: Duration = Duration::from_secs(300);

/// What DANE made of one MX, as logs (`dane=`) and tests see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaneStatus {
    /// `[outbound.tls] dane = "off"`.
    Off,
    /// DNSSEC cannot be validated through this machine's resolver: no
    /// answer is provably secure, so DANE applies to no host.
    Inactive,
    /// The MX or TLSA answer is not provably secure (an unsigned zone, a
    /// name outside the trust anchors), or there is no TLSA record: DANE
    /// does not apply (RFC 7672 §2.2).
    Insecure,
    /// Secure TLSA records: TLS is required and must match them.
    Secure,
    /// A secure TLSA RRset none of whose records SMTP can use: TLS is
    /// required but not authenticated (RFC 7672 §2.2).
    SecureUnusable,
    /// An answer failed DNSSEC validation with a resolver that validates:
    /// the MX is not used.
    Bogus,
    /// The MX or TLSA look-up failed (timeout, SERVFAIL): the MX is not
    /// used now (RFC 7672 §2.1.1, §2.2), the delivery is retried.
    Failed,
}

impl DaneStatus {
    /// The word logs carry.
    pub fn as_str(self) -> &'static str {
        match self {
            DaneStatus::Off => "off",
            DaneStatus::Inactive => "inactive",
            DaneStatus::Insecure => "insecure",
            DaneStatus::Secure => "secure",
            DaneStatus::SecureUnusable => "secure-unusable",
            DaneStatus::Bogus => "bogus",
            DaneStatus::Failed => "failed",
        }
    }
}

impl std::fmt::Display for DaneStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What DNS says about one MX's TLSA records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TlsaAnswer {
    /// A secure TLSA RRset (from a secure MX answer); its usable records,
    /// perhaps none.
    Secure(Vec<Tlsa>),
    /// DANE does not apply.
    Insecure,
    /// Validation failed: why.
    Bogus(String),
    /// The look-up failed: why.
    Failed(String),
}

/// How a failed look-up reads, once classified.
enum LookupError {
    /// No such name or record (a denial, secure or not).
    Missing,
    /// The answer failed validation.
    Bogus(String),
    /// Anything else: why, in a few words.
    Failed(String),
}

fn classify(what: &str, e: &NetError) -> LookupError {
    match e {
        _ if e.is_no_records_found() || e.is_nx_domain() => LookupError::Missing,
        // A validating resolver's denial comes with its proof; only a
        // bogus one is a failure (RFC 7672 §2.2: a denial, secure or
        // not, means no TLSA records).
        NetError::Dns(DnsError::Nsec { proof, .. }) => match proof {
            Proof::Bogus => LookupError::Bogus(format!("{what}: DNSSEC bogus denial")),
            _ => LookupError::Missing,
        },
        NetError::Dns(DnsError::DnssecBogus) => {
            LookupError::Bogus(format!("{what}: DNSSEC validation failed"))
        }
        _ => LookupError::Failed(format!("{what}: {}", brief(e))),
    }
}

/// A DNS error in a few words: some of hickory's carry whole responses.
pub(crate) fn brief(e: &NetError) -> String {
    match e {
        NetError::Dns(DnsError::ResponseCode(code)) => format!("the server answered {code}"),
        NetError::Dns(DnsError::NoRecordsFound(no)) => {
            format!("no records ({})", no.response_code)
        }
        NetError::Dns(DnsError::Nsec { proof, .. }) => format!("no records ({proof} denial)"),
        NetError::Dns(DnsError::DnssecBogus) => "DNSSEC validation failed".to_string(),
        NetError::Timeout => "timed out".to_string(),
        other => {
            let text = other.to_string();
            let line = text.lines().next().unwrap_or_default();
            match line.char_indices().nth(160) {
                Some((cut, _)) => format!("{}...", &line[..cut]),
                None => line.to_string(),
            }
        }
    }
}

/// The zones DNSSEC answers are validated under: the root, or the names
/// of the records in the `dnssec_trust_anchor` file.
#[derive(Debug, Clone)]
pub(crate) struct Anchors {
    /// Lower case, with the trailing dot (`.` for the root).
    zones: Vec<String>,
}

impl Anchors {
    /// The root key alone.
    pub(crate) fn root() -> Anchors {
        Anchors {
            zones: vec![".".to_string()],
        }
    }

    /// The owner names of a trust anchor file's records (zone-file lines).
    pub(crate) fn from_file_text(text: &str) -> Anchors {
        let mut zones: Vec<String> = text
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| !n.starts_with(';') && !n.starts_with('$'))
            .map(|n| {
                let n = n.to_ascii_lowercase();
                if n.ends_with('.') {
                    n
                } else {
                    format!("{n}.")
                }
            })
            .collect();
        zones.sort();
        zones.dedup();
        Anchors { zones }
    }

    /// The anchors' zone names, for the validation check.
    pub(crate) fn zones(&self) -> &[String] {
        &self.zones
    }

    /// Whether `name` (no trailing dot needed) is at or under an anchor:
    /// only such names can be proven secure; any other is insecure
    /// (RFC 4035 §4.3: no trust anchor, nothing to validate against).
    pub(crate) fn cover(&self, name: &str) -> bool {
        let name = format!("{}.", name.trim_end_matches('.').to_ascii_lowercase());
        self.zones
            .iter()
            .any(|z| z == "." || name == *z || name.ends_with(&format!(".{z}")))
    }
}

/// Whether this process can validate DNSSEC through its resolver; see
/// the module's documentation.
#[derive(Debug)]
pub(crate) struct Validation {
    anchors: Anchors,
    state: tokio::sync::Mutex<State>,
}

#[derive(Debug)]
enum State {
    Unchecked,
    Works,
    Fails { checked: Instant },
}

impl Validation {
    pub(crate) fn new(anchors: Anchors) -> Validation {
        Validation {
            anchors,
            state: tokio::sync::Mutex::new(State::Unchecked),
        }
    }

    pub(crate) fn anchors(&self) -> &Anchors {
        &self.anchors
    }

    /// Whether DANE can be applied now. The first call checks (and says
    /// once in the log what it found); callers meanwhile wait for it.
    pub(crate) async fn active(&self, resolver: &TokioResolver) -> bool {
        let mut state = self.state.lock().await;
        match *state {
            State::Works => return true,
            State::Fails { checked } if checked.elapsed() < RECHECK => return false,
            _ => {}
        }
        let first = matches!(*state, State::Unchecked);
        match self_check(resolver, &self.anchors).await {
            Ok(()) => {
                if first {
                    tracing::info!(
                        "outbound DANE is active: DNSSEC validates through [dns] resolver"
                    );
                } else {
                    tracing::info!(
                        "outbound DANE is active from now on: DNSSEC validates through [dns] resolver"
                    );
                }
                *state = State::Works;
                true
            }
            Err(why) => {
                if first {
                    tracing::warn!(
                        reason = %why,
                        "outbound DANE is inactive: the [dns] resolver does not pass DNSSEC along, so no TLSA record can be proven secure and mail goes out under MTA-STS or opportunistic TLS; to use DANE set [dns] resolver to a validating resolver that returns DNSSEC records (for example a local unbound), or set [outbound.tls] dane = \"off\" to say it is not wanted"
                    );
                } else {
                    tracing::debug!(reason = %why, "outbound DANE is still inactive");
                }
                *state = State::Fails {
                    checked: Instant::now(),
                };
                false
            }
        }
    }
}

/// The SOA of each anchor's zone must come back DNSSEC-secure through
/// `resolver`; why not, in a line.
pub(crate) async fn self_check(resolver: &TokioResolver, anchors: &Anchors) -> Result<(), String> {
    for name in anchors.zones() {
        let lookup = resolver
            .soa_lookup(name.as_str())
            .await
            .map_err(|e| format!("SOA {name}: {}", brief(&e)))?;
        let secure = lookup
            .answers()
            .iter()
            .any(|r| matches!(r.data, RData::SOA(_)) && r.proof == Proof::Secure);
        if !secure {
            return Err(format!("SOA {name}: not proven secure"));
        }
    }
    Ok(())
}

/// The TLSA answer for `mx_host` of `domain` (RFC 7672 §2.2): used only
/// when the MX answer that named the host and the TLSA answer are both
/// secure. `resolver` validates DNSSEC.
pub(crate) async fn tlsa_answer(
    resolver: &TokioResolver,
    anchors: &Anchors,
    domain: &str,
    mx_host: &str,
) -> TlsaAnswer {
    // The MX host name must come from a secure MX answer (or be the
    // domain itself, with no MX), else DANE does not apply.
    if mx_host != domain {
        if !anchors.cover(domain) {
            return TlsaAnswer::Insecure;
        }
        let name = format!("{domain}.");
        let what = format!("MX {name}");
        let mx = match resolver.mx_lookup(name.as_str()).await {
            Ok(mx) => mx,
            Err(e) => {
                return match classify(&what, &e) {
                    LookupError::Missing => TlsaAnswer::Insecure,
                    LookupError::Bogus(why) => TlsaAnswer::Bogus(why),
                    LookupError::Failed(why) => TlsaAnswer::Failed(why),
                };
            }
        };
        let proof = mx
            .answers()
            .iter()
            .find(|r| {
                matches!(&r.data, RData::MX(m) if m.exchange.to_ascii().trim_end_matches('.').eq_ignore_ascii_case(mx_host))
            })
            .map(|r| r.proof);
        match proof {
            Some(Proof::Secure) => {}
            Some(Proof::Bogus) => return TlsaAnswer::Bogus(format!("{what}: DNSSEC bogus")),
            // Insecure, indeterminate, or the host is not among the answers.
            _ => return TlsaAnswer::Insecure,
        }
    }
    if !anchors.cover(mx_host) {
        return TlsaAnswer::Insecure;
    }
    let name = format!("_25._tcp.{mx_host}.");
    let what = format!("TLSA {name}");
    let lookup = match resolver.tlsa_lookup(name.as_str()).await {
        Ok(l) => l,
        Err(e) => {
            return match classify(&what, &e) {
                LookupError::Missing => TlsaAnswer::Insecure,
                LookupError::Bogus(why) => TlsaAnswer::Bogus(why),
                LookupError::Failed(why) => TlsaAnswer::Failed(why),
            };
        }
    };
    let mut records = Vec::new();
    let mut any = false;
    for r in lookup.answers() {
        let RData::TLSA(t) = &r.data else { continue };
        match r.proof {
            Proof::Secure => {}
            Proof::Bogus => return TlsaAnswer::Bogus(format!("{what}: DNSSEC bogus")),
            // An insecure TLSA RRset is ignored (RFC 7672 §2.2).
            _ => return TlsaAnswer::Insecure,
        }
        any = true;
        let t = Tlsa {
            usage: t.cert_usage.into(),
            selector: t.selector.into(),
            matching: t.matching.into(),
            data: t.cert_data.clone(),
        };
        if t.usable() {
            records.push(t);
        }
    }
    if any {
        TlsaAnswer::Secure(records)
    } else {
        TlsaAnswer::Insecure
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_cover_their_zones_only() {
        let root = Anchors::root();
        assert!(root.cover("mx.example.net"));
        assert!(root.cover("example.net."));
        let some = Anchors::from_file_text(
            "; a comment\nexample.NET. 3600 IN DNSKEY 257 3 13 AAAA\nexample.net. IN DNSKEY 256 3 13 BBBB\norg IN DNSKEY 257 3 13 CCCC\n",
        );
        assert_eq!(some.zones(), ["example.net.", "org."]);
        assert!(some.cover("example.net"));
        assert!(some.cover("MX.Example.Net."));
        assert!(some.cover("mail.example.org"));
        assert!(!some.cover("badexample.net"));
        assert!(!some.cover("example.com"));
        assert!(!some.cover("net"));
    }

    #[test]
    fn statuses_read_as_words() {
        let words: Vec<&str> = [
            DaneStatus::Off,
            DaneStatus::Inactive,
            DaneStatus::Insecure,
            DaneStatus::Secure,
            DaneStatus::SecureUnusable,
            DaneStatus::Bogus,
            DaneStatus::Failed,
        ]
        .iter()
        .map(|s| s.as_str())
        .collect();
        assert_eq!(
            words,
            [
                "off",
                "inactive",
                "insecure",
                "secure",
                "secure-unusable",
                "bogus",
                "failed"
            ]
        );
    }

    #[test]
    fn errors_read_briefly() {
        let e = NetError::Dns(DnsError::ResponseCode(
            hickory_resolver::proto::op::ResponseCode::Refused,
        ));
        assert_eq!(brief(&e), "the server answered Query Refused");
        assert_eq!(brief(&NetError::Timeout), "timed out");
        let long = NetError::Msg(format!("{}\nsecond line", "x".repeat(500)));
        let b = brief(&long);
        assert!(
            b.len() < 170 && b.ends_with("...") && !b.contains('\n'),
            "{b}"
        );
        assert!(matches!(
            classify("TLSA x", &NetError::Dns(DnsError::DnssecBogus)),
            LookupError::Bogus(w) if w == "TLSA x: DNSSEC validation failed"
        ));
        assert!(matches!(
            classify("TLSA x", &NetError::Timeout),
            LookupError::Failed(w) if w == "TLSA x: timed out"
        ));
    }
}
