//! DKIM (RFC 6376), ARC (RFC 8617) and DMARC (RFC 7489) on mail arriving
//! from other servers, recorded with SPF's result in an
//! `Authentication-Results:` field (RFC 8601) on the stored message.
//!
//! Nothing holds the message: a [`Collector`] keeps the header block (up
//! to [`MAX_HEADER`]) and hashes the body as it streams by, once for each
//! body canonicalization the signatures ask for. At the end of DATA the
//! signatures are checked against those hashes (`mail-auth` takes the
//! header block with the hashes filled in), DMARC is evaluated, and the
//! field goes in front of the stored message as its lead
//! ([`store::Delivery::lead`]), since its content is known only now.
//!
//! Mail forwarded to remote alias targets is also sealed with ARC (RFC
//! 8617) in the name of the alias's domain, when it has a DKIM key: the
//! next hop then sees what we found, even though forwarding (SRS) breaks
//! SPF alignment. The seal needs the body hash of the message as a whole
//! (relaxed, SHA-256), which the collector adds for such mail.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use mail_auth::arc::ArcSealer;
use mail_auth::common::crypto::{HashAlgorithm, HashContext, HashImpl, Sha1, Sha256};
use mail_auth::common::headers::HeaderWriter;
use mail_auth::dkim::canonicalize::BodyHasher;
use mail_auth::dkim::Canonicalization;
use mail_auth::dmarc::verify::DmarcParameters;
use mail_auth::dmarc::Policy;
use mail_auth::{
    AuthenticatedMessage, AuthenticationResults, DkimResult, DmarcResult, MessageAuthenticator,
    SpfOutput, SpfResult,
};

/// Header fields an ARC-Message-Signature covers when present.
const SEALED_HEADERS: [&str; 11] = [
    "From",
    "To",
    "Cc",
    "Subject",
    "Date",
    "Message-ID",
    "Reply-To",
    "In-Reply-To",
    "References",
    "MIME-Version",
    "Content-Type",
];

/// A key that seals in a domain's name.
pub struct SealingKey {
    /// `d=`.
    pub domain: String,
    /// `s=`.
    pub selector: String,
    /// The private key (RSA or Ed25519, SHA-256).
    pub key: mail_auth::common::crypto::DkimKey,
}

/// Where ARC sealing keys come from (the store's DKIM keys).
#[async_trait::async_trait]
pub trait SealingKeys: Send + Sync {
    /// The key to seal with for mail forwarded by `domain` (or a parent),
    /// if it has one that signs.
    async fn sealing_key(&self, domain: &str) -> Option<SealingKey>;
}

use crate::auth_checks::{AuthChecksConfig, DmarcMode};
use crate::header_fix::{header_end, MAX_HEADER};

/// How long the DNS lookups of the DKIM, ARC and DMARC checks may take in
/// all; past it what is missing is a `temperror`.
const CHECK_TIME_LIMIT: Duration = Duration::from_secs(20);

/// One body hash in progress: the canonicalization, algorithm and length
/// limit (`l=`) a signature asks for.
struct BodyHash {
    canonicalization: Canonicalization,
    algorithm: HashAlgorithm,
    limit: u64,
    hasher: Hasher,
}

enum Hasher {
    Sha1(BodyHasher<<Sha1 as HashImpl>::Context>),
    Sha256(BodyHasher<<Sha256 as HashImpl>::Context>),
}

impl BodyHash {
    fn new(canonicalization: Canonicalization, algorithm: HashAlgorithm, limit: u64) -> Self {
        let hasher = match algorithm {
            HashAlgorithm::Sha1 => {
                Hasher::Sha1(BodyHasher::new(Sha1::hasher(), canonicalization, limit))
            }
            HashAlgorithm::Sha256 => {
                Hasher::Sha256(BodyHasher::new(Sha256::hasher(), canonicalization, limit))
            }
        };
        BodyHash {
            canonicalization,
            algorithm,
            limit,
            hasher,
        }
    }

    fn write(&mut self, data: &[u8]) {
        match &mut self.hasher {
            Hasher::Sha1(h) => h.write(data),
            Hasher::Sha256(h) => h.write(data),
        }
    }

    fn finish(self) -> (Canonicalization, HashAlgorithm, u64, Vec<u8>) {
        let digest = match self.hasher {
            Hasher::Sha1(h) => h.finish().0.complete().as_ref().to_vec(),
            Hasher::Sha256(h) => h.finish().0.complete().as_ref().to_vec(),
        };
        (self.canonicalization, self.algorithm, self.limit, digest)
    }
}

/// What the checks need of one message, gathered as it streams in.
pub(crate) struct Collector {
    /// The header block with the empty line that ends it, once complete.
    header: Vec<u8>,
    state: State,
    /// Also hash the body for an ARC seal.
    sealing: bool,
}

enum State {
    /// Still reading the header block.
    Header,
    /// Hashing the body.
    Body(Vec<BodyHash>),
    /// The header block is longer than [`MAX_HEADER`]: not checked.
    TooLong,
}

impl Default for Collector {
    fn default() -> Self {
        Collector {
            header: Vec::new(),
            state: State::Header,
            sealing: false,
        }
    }
}

impl Collector {
    /// A collector that also hashes what an ARC seal signs (forwarded
    /// mail).
    pub(crate) fn for_sealing() -> Collector {
        Collector {
            sealing: true,
            ..Collector::default()
        }
    }

    /// The body hashes to compute: those the signatures in `header` ask
    /// for, and the seal's.
    fn wanted(&self, header: &[u8]) -> Vec<BodyHash> {
        let mut keys: Vec<(Canonicalization, HashAlgorithm, u64)> =
            AuthenticatedMessage::parse(header)
                .map(|m| {
                    m.body_hashes
                        .iter()
                        .map(|&(c, a, l, _)| (c, a, l))
                        .collect()
                })
                .unwrap_or_default();
        let seal = (Canonicalization::Relaxed, HashAlgorithm::Sha256, 0);
        if self.sealing && !keys.contains(&seal) {
            keys.push(seal);
        }
        keys.into_iter()
            .map(|(c, a, l)| BodyHash::new(c, a, l))
            .collect()
    }

    /// Feeds the next piece of the message (with CRLF line ends, as the
    /// data stage makes them).
    pub(crate) fn feed(&mut self, piece: &[u8]) {
        match &mut self.state {
            State::Body(hashes) => hashes.iter_mut().for_each(|h| h.write(piece)),
            State::TooLong => {}
            State::Header => {
                let searched = self.header.len().saturating_sub(3);
                self.header.extend_from_slice(piece);
                if let Some(end) = header_end(&self.header, searched) {
                    let body_start = end + blank_line_len(&self.header[end..]);
                    let body = self.header.split_off(body_start);
                    self.start_body(&body);
                } else if self.header.len() > MAX_HEADER {
                    self.header = Vec::new();
                    self.state = State::TooLong;
                }
            }
        }
    }

    /// The header block is complete: one hasher per body hash the
    /// signatures ask for (mail-auth lists them when it parses the block).
    fn start_body(&mut self, first: &[u8]) {
        let mut hashes = self.wanted(&self.header);
        hashes.iter_mut().for_each(|h| h.write(first));
        self.state = State::Body(hashes);
    }

    /// The header block and the body hashes; `None` when the header was
    /// too long to check.
    fn finish(self) -> Option<Collected> {
        let hashes = match self.state {
            State::TooLong => return None,
            // All header, no body: the body is empty.
            State::Header => self.wanted(&self.header),
            State::Body(hashes) => hashes,
        };
        Some(Collected {
            header: self.header,
            hashes: hashes.into_iter().map(BodyHash::finish).collect(),
        })
    }
}

impl Collector {
    /// The header block and body hashes, comparable (fuzz targets, tests).
    #[allow(clippy::type_complexity)]
    pub(crate) fn finish_for_test(self) -> Option<(Vec<u8>, Vec<(u8, u64, u64, Vec<u8>)>)> {
        self.finish().map(|c| {
            let hashes = c
                .hashes
                .into_iter()
                .map(|(canon, algo, l, h)| (canon as u8, algo as u64, l, h))
                .collect();
            (c.header, hashes)
        })
    }
}

/// Length of the empty line at the start of `rest` (CRLF or a bare LF).
fn blank_line_len(rest: &[u8]) -> usize {
    if rest.starts_with(b"\r\n") {
        2
    } else {
        usize::from(rest.starts_with(b"\n"))
    }
}

struct Collected {
    header: Vec<u8>,
    hashes: Vec<(Canonicalization, HashAlgorithm, u64, Vec<u8>)>,
}

/// Who sent the message, as the session knows it.
pub(crate) struct Sender<'a> {
    pub ip: IpAddr,
    pub helo: &'a str,
    /// The envelope sender (empty for the null sender).
    pub mail_from: &'a str,
    /// The SPF result of the transaction, when SPF ran.
    pub spf: Option<&'a SpfOutput>,
    /// The local domain forwarding the message to remote alias targets,
    /// which seals it with ARC.
    pub forwarder: Option<&'a str>,
}

/// What the checks decided for one message.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The `Authentication-Results:` field, CRLF-terminated.
    pub field: String,
    /// DMARC says reject: refuse with this text.
    pub reject: Option<String>,
    /// DMARC says quarantine: deliver to Junk.
    pub quarantine: bool,
    /// `dkim=... dmarc=...` for the log.
    pub summary: String,
}

/// The DKIM, ARC and DMARC checker the SMTP sessions share.
pub struct MessageAuth {
    authenticator: Arc<MessageAuthenticator>,
    authserv_id: String,
    dmarc: DmarcMode,
    sealing: Option<Arc<dyn SealingKeys>>,
}

impl MessageAuth {
    /// A checker sharing `authenticator`; `None` when neither DKIM nor
    /// DMARC is on.
    pub fn new(
        authenticator: Arc<MessageAuthenticator>,
        config: &AuthChecksConfig,
        hostname: &str,
    ) -> Option<MessageAuth> {
        config.checks_message().then(|| MessageAuth {
            authenticator,
            authserv_id: config
                .authserv_id
                .clone()
                .unwrap_or_else(|| hostname.to_string()),
            dmarc: config.dmarc,
            sealing: None,
        })
    }

    /// Seals forwarded mail with ARC, with keys from `keys`.
    pub fn with_sealing(mut self, keys: Arc<dyn SealingKeys>) -> MessageAuth {
        self.sealing = Some(keys);
        self
    }

    /// Whether forwarded mail is sealed (its collector must hash for it).
    pub(crate) fn seals(&self) -> bool {
        self.sealing.is_some()
    }

    /// Our authserv-id: `Authentication-Results:` fields in arriving mail
    /// that carry it are forgeries.
    pub(crate) fn authserv_id(&self) -> &str {
        &self.authserv_id
    }

    /// Checks one message.
    pub(crate) async fn check(&self, collector: Collector, sender: Sender<'_>) -> Outcome {
        let Some(collected) = collector.finish() else {
            let field = AuthenticationResults::new(&self.authserv_id)
                .with_spf_of(&sender)
                .to_header();
            return Outcome {
                field: with_comment(field, "header too long to check"),
                reject: None,
                quarantine: false,
                summary: "dkim=none (header too long)".into(),
            };
        };
        let Some(mut message) = AuthenticatedMessage::parse(&collected.header) else {
            let field = AuthenticationResults::new(&self.authserv_id)
                .with_spf_of(&sender)
                .to_header();
            return Outcome {
                field,
                reject: None,
                quarantine: false,
                summary: "dkim=none (no header)".into(),
            };
        };
        for entry in &mut message.body_hashes {
            if let Some(found) = collected
                .hashes
                .iter()
                .find(|h| (h.0, h.1, h.2) == (entry.0, entry.1, entry.2))
            {
                entry.3 = found.3.clone();
            }
        }
        // The seal's hash, when the signatures did not ask for it.
        for found in &collected.hashes {
            if !message
                .body_hashes
                .iter()
                .any(|h| (h.0, h.1, h.2) == (found.0, found.1, found.2))
            {
                message.body_hashes.push(found.clone());
            }
        }
        let message = message;
        let dkim = tokio::time::timeout(CHECK_TIME_LIMIT, self.authenticator.verify_dkim(&message))
            .await
            .unwrap_or_default();
        let arc = tokio::time::timeout(CHECK_TIME_LIMIT, self.authenticator.verify_arc(&message))
            .await
            .unwrap_or_default();
        let header_from = message.from.first().cloned().unwrap_or_default();
        let mut results = AuthenticationResults::new(&self.authserv_id)
            .with_dkim_results(&dkim, &header_from)
            .with_spf_of(&sender);
        if !message.as_headers.is_empty() || !message.ams_headers.is_empty() {
            results = results.with_arc_result(&arc, sender.ip);
        }
        let dkim_summary = dkim
            .iter()
            .map(|d| result_name(d.result()))
            .collect::<Vec<_>>()
            .join(",");
        let mut outcome = Outcome {
            field: String::new(),
            reject: None,
            quarantine: false,
            summary: format!(
                "dkim={}",
                if dkim_summary.is_empty() {
                    "none"
                } else {
                    &dkim_summary
                }
            ),
        };
        if self.dmarc != DmarcMode::Off {
            let none = SpfOutput::new(String::new()).with_result(SpfResult::None);
            let mail_from_domain = match sender.mail_from.rsplit_once('@') {
                Some((_, domain)) => domain,
                None => sender.helo,
            };
            let dmarc = tokio::time::timeout(
                CHECK_TIME_LIMIT,
                self.authenticator.verify_dmarc(DmarcParameters {
                    message: &message,
                    dkim_output: &dkim,
                    dkim2_output: None,
                    rfc5321_mail_from_domain: mail_from_domain,
                    spf_output: sender.spf.unwrap_or(&none),
                }),
            )
            .await;
            match dmarc {
                Ok(dmarc) => {
                    results = results.with_dmarc_result(&dmarc);
                    let failed = matches!(dmarc.result(), DmarcResult::Fail(_));
                    outcome.summary.push_str(&format!(
                        " dmarc={} policy={:?}",
                        match dmarc.result() {
                            DmarcResult::Pass => "pass",
                            DmarcResult::Fail(_) => "fail",
                            DmarcResult::TempError(_) => "temperror",
                            DmarcResult::PermError(_) => "permerror",
                            DmarcResult::None => "none",
                        },
                        dmarc.policy()
                    ));
                    if failed && self.dmarc == DmarcMode::Enforce {
                        match dmarc.policy() {
                            Policy::Reject => {
                                outcome.reject = Some(format!(
                                    "Message refused: {} publishes a DMARC reject policy and this message fails it",
                                    dmarc.domain()
                                ))
                            }
                            Policy::Quarantine => outcome.quarantine = true,
                            Policy::None | Policy::Unspecified => {}
                        }
                    }
                }
                Err(_) => outcome.summary.push_str(" dmarc=timeout"),
            }
        }
        outcome.field = results.to_header();
        if dkim.is_empty() {
            outcome.field = with_first_result(&outcome.field, &self.authserv_id, "dkim=none");
        }
        if let Some(domain) = sender.forwarder {
            if let Some(seal) = self.seal(domain, &message, &results, &arc).await {
                outcome.field.insert_str(0, &seal);
                outcome.summary.push_str(" arc=sealed");
            }
        }
        outcome
    }

    /// The ARC set (RFC 8617 §4) sealing `message` as forwarded by
    /// `domain`; `None` when the domain has no key, or the chain that came
    /// in had already failed (§5.1.2: no seal on a failed chain).
    async fn seal(
        &self,
        domain: &str,
        message: &AuthenticatedMessage<'_>,
        results: &AuthenticationResults<'_>,
        arc: &mail_auth::ArcOutput<'_>,
    ) -> Option<String> {
        let keys = self.sealing.as_ref()?;
        if !arc.can_be_sealed() {
            return None;
        }
        let key = keys.sealing_key(domain).await?;
        let sealer = ArcSealer::from_key(key.key)
            .domain(key.domain.as_str())
            .selector(key.selector.as_str())
            .headers(SEALED_HEADERS);
        match sealer.seal(message, results, arc) {
            Ok(set) => Some(set.to_header()),
            Err(e) => {
                tracing::warn!(domain, error = %e, "ARC sealing failed; forwarded unsealed");
                None
            }
        }
    }
}

/// Adds the SPF part of the results, for the identity SPF checked.
trait WithSpf: Sized {
    fn with_spf_of(self, sender: &Sender<'_>) -> Self;
}

impl WithSpf for AuthenticationResults<'_> {
    fn with_spf_of(self, sender: &Sender<'_>) -> Self {
        match sender.spf {
            None => self,
            Some(spf) if sender.mail_from.is_empty() => {
                self.with_spf_ehlo_result(spf, sender.ip, sender.helo)
            }
            Some(spf) => {
                self.with_spf_mailfrom_result(spf, sender.ip, sender.mail_from, sender.helo)
            }
        }
    }
}

/// Puts `result` first in `field` (mail-auth writes nothing for a message
/// without signatures; RFC 8601 §2.7.1 has `dkim=none` say so).
fn with_first_result(field: &str, authserv_id: &str, result: &str) -> String {
    let head = format!("Authentication-Results: {authserv_id}");
    match field.strip_prefix(&head) {
        Some("; none\r\n") => format!("{head};\r\n\t{result}\r\n"),
        Some(rest) => format!("{head};\r\n\t{result}{rest}"),
        None => field.to_string(),
    }
}

/// Puts an RFC 8601 comment after the authserv-id of `field`.
fn with_comment(field: String, comment: &str) -> String {
    let body = field.trim_end_matches("\r\n");
    format!("{body} ({comment})\r\n")
}

fn result_name(result: &DkimResult) -> &'static str {
    match result {
        DkimResult::Pass => "pass",
        DkimResult::Neutral(_) => "neutral",
        DkimResult::Fail(_) => "fail",
        DkimResult::PermError(_) => "permerror",
        DkimResult::TempError(_) => "temperror",
        DkimResult::None => "none",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGNED: &[u8] = b"DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/simple; d=example.com; s=s1;\r\n h=from; bh=AAAA; b=AAAA\r\nFrom: a@example.com\r\n\r\nHello  world \r\n\r\n\r\n";

    fn collect(message: &[u8], cuts: &[usize]) -> Collected {
        let mut c = Collector::default();
        let mut at = 0;
        for &cut in cuts {
            let cut = cut.min(message.len()).max(at);
            c.feed(&message[at..cut]);
            at = cut;
        }
        c.feed(&message[at..]);
        c.finish().expect("short header")
    }

    #[test]
    fn a_missing_signature_is_recorded_as_none() {
        let id = "mx.example.org";
        assert_eq!(
            with_first_result(
                "Authentication-Results: mx.example.org; none\r\n",
                id,
                "dkim=none"
            ),
            "Authentication-Results: mx.example.org;\r\n\tdkim=none\r\n"
        );
        assert_eq!(
            with_first_result(
                "Authentication-Results: mx.example.org;\r\n\tspf=pass\r\n",
                id,
                "dkim=none"
            ),
            "Authentication-Results: mx.example.org;\r\n\tdkim=none;\r\n\tspf=pass\r\n"
        );
    }

    #[test]
    fn body_hashes_do_not_depend_on_how_the_message_is_cut() {
        let whole = collect(SIGNED, &[]);
        // mail-auth's own hash of the whole message.
        let parsed = AuthenticatedMessage::parse(SIGNED).unwrap();
        assert_eq!(whole.hashes.len(), 1);
        assert_eq!(whole.hashes[0].3, parsed.body_hashes[0].3);
        assert!(whole.header.ends_with(b"a@example.com\r\n\r\n"));
        for cuts in [
            vec![1],
            vec![120, 121, 122, 123],
            vec![140, 141],
            vec![5, 60, 150],
        ] {
            let cut = collect(SIGNED, &cuts);
            assert_eq!(cut.hashes, whole.hashes, "{cuts:?}");
            assert_eq!(cut.header, whole.header, "{cuts:?}");
        }
    }

    #[test]
    fn unsigned_mail_needs_no_hash_and_a_huge_header_is_skipped() {
        let plain = collect(b"From: a@example.com\r\n\r\nbody\r\n", &[3]);
        assert!(plain.hashes.is_empty());
        let mut huge = Collector::default();
        let field = format!("X-Filler: {}\r\n", "y".repeat(1000));
        for _ in 0..(MAX_HEADER / field.len() + 2) {
            huge.feed(field.as_bytes());
        }
        huge.feed(b"\r\nbody\r\n");
        assert!(huge.finish().is_none());
    }
}
