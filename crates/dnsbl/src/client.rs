//! The DNSBL client: several zones, weights and a threshold, one time
//! budget, and a cache that serves a whole /25 from one bitmap answer.
//!
//! # How a check runs
//!
//! [`Client::check`] looks the address up in every zone at once and waits
//! at most [`ClientConfig::budget`] for all of them together; a zone that has
//! not answered by then is reported in [`Outcome::timed_out`] and counted,
//! and the check returns with what it has (a mail server proceeds rather than
//! stall). The query itself keeps running in the background and fills the
//! cache for the next connection.
//!
//! - [`Mode::Classic`]: an A query for the RFC 5782 name (reversed IPv4
//!   octets, reversed IPv6 nibbles); any A in 127.0.0.0/8 except
//!   127.255.255.0/24 (the range lists such as Spamhaus use for "query
//!   refused" codes) means listed, and then a TXT query for the same name
//!   gives the reason.
//! - [`Mode::Bitmap`]: an AAAA query for the address's /25
//!   ([`crate::bitmap`]); the bit of the address decides. A listed address
//!   is reported with the code 127.0.0.2, and its reason comes from a TXT
//!   query for the classic per-address name (which the bitmap server
//!   answers too), so the reason text is exact per address. IPv6 addresses
//!   fall back to classic lookups in a bitmap zone.
//!
//! Reason lookups can be switched off per zone ([`Zone::reasons`]); they
//! only happen for listed addresses and share the cache.
//!
//! # Cache
//!
//! Answers are kept for their TTL, at most [`ClientConfig::ttl_cap`].
//! Negative answers (NXDOMAIN, or NOERROR without the record) are kept for
//! the SOA's negative TTL (RFC 2308 §5: the smaller of the SOA record's TTL
//! and its MINIMUM), or [`ClientConfig::negative_ttl`] when the reply has no
//! SOA. Failures are not cached. Concurrent lookups of one key share one
//! query. The cache holds at most [`ClientConfig::max_entries`] keys.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use tokio::time::{timeout_at, Instant};
use tracing::debug;

use crate::bitmap::{Bitmap, Block25};
use crate::cache::{Cache, Failure, Probe};
use crate::clock::Clock;
use crate::error::Error;
use crate::exchange::{ask, Exchange};
use crate::qname::{bitmap_name, classic_name, zone_name};

/// How a zone is queried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One A query per address (RFC 5782).
    Classic,
    /// One AAAA query per /25, answered with a bitmap (seed section 7).
    /// Only for servers that implement it (Sluice's): a classic server
    /// answers the AAAA query with NXDOMAIN or NODATA, which reads as
    /// "nothing listed".
    Bitmap,
}

/// A blocklist zone to check.
#[derive(Debug, Clone, PartialEq)]
pub struct Zone {
    /// The zone's DNS name, e.g. `bl.example.org`.
    pub name: String,
    /// What a listing adds to the score.
    pub weight: f64,
    /// Classic per-address or /25 bitmap queries.
    pub mode: Mode,
    /// Whether to fetch the TXT reason of a listed address.
    pub reasons: bool,
}

impl Zone {
    /// A classic zone, with reasons.
    pub fn classic(name: impl Into<String>, weight: f64) -> Zone {
        Zone {
            name: name.into(),
            weight,
            mode: Mode::Classic,
            reasons: true,
        }
    }

    /// A bitmap zone, with reasons.
    pub fn bitmap(name: impl Into<String>, weight: f64) -> Zone {
        Zone {
            mode: Mode::Bitmap,
            ..Zone::classic(name, weight)
        }
    }

    /// The same zone with reason lookups switched on or off.
    pub fn with_reasons(self, reasons: bool) -> Zone {
        Zone { reasons, ..self }
    }
}

/// How a [`Client`] is set up.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The DNS server to ask (a recursive resolver, or the DNSBL server itself).
    pub resolver: SocketAddr,
    /// The zones to check.
    pub zones: Vec<Zone>,
    /// An address whose score reaches this is listed.
    pub threshold: f64,
    /// Time allowed for one whole check, all zones together.
    pub budget: Duration,
    /// Answers are cached for their TTL, but never longer than this.
    pub ttl_cap: Duration,
    /// How long a negative answer without an SOA is cached.
    pub negative_ttl: Duration,
    /// Most keys the cache holds.
    pub max_entries: usize,
    /// How long to wait for a reply before sending the question again.
    pub attempt_timeout: Duration,
    /// How many times a question is sent over UDP before giving up.
    pub attempts: u32,
    /// Set the RD bit (needed when `resolver` is a recursive resolver).
    pub recursion_desired: bool,
    /// The clock cache expiry follows.
    pub clock: Clock,
}

impl ClientConfig {
    /// A configuration with defaults: threshold 1, budget 2 s, TTLs capped
    /// at one hour, negative TTL 5 minutes, 100,000 cache keys, attempts of
    /// 700 ms, three of them.
    pub fn new(resolver: SocketAddr, zones: Vec<Zone>) -> Self {
        ClientConfig {
            resolver,
            zones,
            threshold: 1.0,
            budget: Duration::from_secs(2),
            ttl_cap: Duration::from_secs(3600),
            negative_ttl: Duration::from_secs(300),
            max_entries: 100_000,
            attempt_timeout: Duration::from_millis(700),
            attempts: 3,
            recursion_desired: true,
            clock: Clock::system(),
        }
    }
}

/// One zone that lists the address.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The zone's name as configured.
    pub zone: String,
    /// The zone's weight.
    pub weight: f64,
    /// The A values returned (127.0.0.2 for a bitmap listing).
    pub codes: Vec<Ipv4Addr>,
    /// The TXT reason, if fetched and present; control characters are
    /// replaced by spaces and the text is cut to 400 bytes, so it can be
    /// quoted in an SMTP reply as it is.
    pub reason: Option<String>,
}

/// The verdict of one check.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The address checked (IPv4-mapped IPv6 addresses are checked as IPv4).
    pub ip: IpAddr,
    /// Sum of the weights of the zones that list the address.
    pub score: f64,
    /// Whether `score` reached the threshold.
    pub listed: bool,
    /// Zones that list the address.
    pub hits: Vec<Hit>,
    /// Zones that did not answer within the budget.
    pub timed_out: Vec<String>,
    /// Zones that answered with an error (SERVFAIL, REFUSED, ...).
    pub failed: Vec<String>,
}

impl Outcome {
    /// Whether any zone timed out.
    pub fn any_timed_out(&self) -> bool {
        !self.timed_out.is_empty()
    }

    /// The reason to quote in a rejection: the TXT of the heaviest hit that has one.
    pub fn reason(&self) -> Option<&str> {
        self.hits
            .iter()
            .filter(|h| h.reason.is_some())
            .max_by(|a, b| a.weight.total_cmp(&b.weight))
            .and_then(|h| h.reason.as_deref())
    }
}

/// A check running in the background (see [`Client::spawn_check`]).
#[derive(Debug)]
pub struct PendingCheck {
    ip: IpAddr,
    zones: Vec<String>,
    handle: tokio::task::JoinHandle<Outcome>,
}

impl PendingCheck {
    /// Waits for the check (never longer than the budget, plus scheduling).
    pub async fn outcome(mut self) -> Outcome {
        match (&mut self.handle).await {
            Ok(outcome) => outcome,
            // the task panicked or was cancelled: report every zone as failed
            Err(_) => Outcome {
                ip: self.ip,
                score: 0.0,
                listed: false,
                hits: Vec::new(),
                timed_out: Vec::new(),
                failed: std::mem::take(&mut self.zones),
            },
        }
    }
}

impl Drop for PendingCheck {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// A snapshot of the client's counters (see [`Client::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Calls to [`Client::check`].
    pub checks: u64,
    /// Checks whose score reached the threshold.
    pub listed: u64,
    /// Cache lookups (one per zone per check, plus reason lookups).
    pub lookups: u64,
    /// Lookups answered from the cache.
    pub cache_hits: u64,
    /// Lookups that joined a query already in flight.
    pub merged: u64,
    /// Lookups that had to send a query.
    pub cache_misses: u64,
    /// DNS messages sent (retransmissions and TCP retries included).
    pub queries_sent: u64,
    /// Zone lookups that missed the budget or got no reply.
    pub timeouts: u64,
    /// Zone lookups that got an error reply.
    pub errors: u64,
}

impl ClientStats {
    /// Share of lookups that needed no query of their own.
    pub fn hit_ratio(&self) -> f64 {
        if self.lookups == 0 {
            return 0.0;
        }
        (self.cache_hits + self.merged) as f64 / self.lookups as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_safe_to_quote() {
        assert_eq!(clean_reason("spam\r\n250 OK\tx"), "spam  250 OK x");
        let long = "é".repeat(300);
        let cut = clean_reason(&long);
        assert!(cut.len() <= MAX_REASON && cut.chars().all(|c| c == 'é'));
        assert_eq!(
            clean_reason("Listed: see https://bl.test/?192.0.2.1"),
            "Listed: see https://bl.test/?192.0.2.1"
        );
    }
}

#[derive(Default)]
struct Counters {
    checks: AtomicU64,
    listed: AtomicU64,
    lookups: AtomicU64,
    hits: AtomicU64,
    merged: AtomicU64,
    misses: AtomicU64,
    sent: AtomicU64,
    timeouts: AtomicU64,
    errors: AtomicU64,
}

/// What is asked of a zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Question {
    A(IpAddr),
    Txt(IpAddr),
    Bitmap(Block25),
}

/// A cached answer.
#[derive(Debug, Clone)]
enum Answer {
    Codes(Arc<[Ipv4Addr]>),
    Text(Arc<[String]>),
    Bits(Bitmap),
}

type Key = (u16, Question);

struct ZoneEntry {
    zone: Zone,
    apex: Name,
}

struct Inner {
    zones: Vec<ZoneEntry>,
    threshold: f64,
    budget: Duration,
    ttl_cap: Duration,
    negative_ttl: Duration,
    exchange: Exchange,
    clock: Clock,
    cache: Mutex<Cache<Key, Answer>>,
    counters: Counters,
}

/// A DNSBL client. Cheap to clone; clones share the cache and counters.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("resolver", &self.inner.exchange.resolver)
            .field(
                "zones",
                &self.inner.zones.iter().map(|z| &z.zone).collect::<Vec<_>>(),
            )
            .field("threshold", &self.inner.threshold)
            .field("stats", &self.stats())
            .finish()
    }
}

enum ZoneResult {
    Listed(Hit),
    Clean,
    Failed(Failure),
}

/// Longest reason kept, in bytes: it ends up in an SMTP reply line.
const MAX_REASON: usize = 400;

/// Makes a TXT reason safe to quote in an SMTP reply: control characters
/// (CR and LF above all, which would let a list inject protocol lines)
/// become spaces, and the text is cut to [`MAX_REASON`] bytes.
fn clean_reason(text: &str) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if out.len() > MAX_REASON {
        let mut end = MAX_REASON;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
    }
    out
}

fn is_listing(a: &Ipv4Addr) -> bool {
    let o = a.octets();
    o[0] == 127 && !(o[1] == 255 && o[2] == 255)
}

impl Client {
    /// Checks the configuration and builds a client.
    pub fn new(config: ClientConfig) -> Result<Client, Error> {
        if config.zones.len() > usize::from(u16::MAX) {
            return Err(Error::Config {
                key: "zones",
                reason: "too many zones".into(),
            });
        }
        let mut zones = Vec::new();
        for zone in config.zones {
            if !zone.weight.is_finite() {
                return Err(Error::Config {
                    key: "weight",
                    reason: format!("zone {} has weight {}", zone.name, zone.weight),
                });
            }
            let apex = zone_name(&zone.name)?;
            zones.push(ZoneEntry { zone, apex });
        }
        if !config.threshold.is_finite() {
            return Err(Error::Config {
                key: "threshold",
                reason: "must be a finite number".into(),
            });
        }
        if config.budget.is_zero() || config.attempt_timeout.is_zero() || config.attempts == 0 {
            return Err(Error::Config {
                key: "budget",
                reason: "budget, attempt_timeout and attempts must be above zero".into(),
            });
        }
        Ok(Client {
            inner: Arc::new(Inner {
                zones,
                threshold: config.threshold,
                budget: config.budget,
                ttl_cap: config.ttl_cap,
                negative_ttl: config.negative_ttl,
                exchange: Exchange {
                    resolver: config.resolver,
                    attempt_timeout: config.attempt_timeout,
                    attempts: config.attempts,
                    recursion_desired: config.recursion_desired,
                },
                clock: config.clock,
                cache: Mutex::new(Cache::new(config.max_entries)),
                counters: Counters::default(),
            }),
        })
    }

    /// Checks `ip` against every zone, in parallel, within the budget.
    pub async fn check(&self, ip: IpAddr) -> Outcome {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let inner = &self.inner;
        inner.counters.checks.fetch_add(1, Relaxed);
        let deadline = Instant::now() + inner.budget;
        let results =
            join_all((0..inner.zones.len()).map(|i| inner.check_zone(i as u16, ip, deadline)))
                .await;
        let mut outcome = Outcome {
            ip,
            score: 0.0,
            listed: false,
            hits: Vec::new(),
            timed_out: Vec::new(),
            failed: Vec::new(),
        };
        for (entry, result) in inner.zones.iter().zip(results) {
            match result {
                ZoneResult::Listed(hit) => {
                    outcome.score += hit.weight;
                    outcome.hits.push(hit);
                }
                ZoneResult::Clean => {}
                ZoneResult::Failed(Failure::Timeout) => {
                    inner.counters.timeouts.fetch_add(1, Relaxed);
                    outcome.timed_out.push(entry.zone.name.clone());
                }
                ZoneResult::Failed(Failure::Error) => {
                    inner.counters.errors.fetch_add(1, Relaxed);
                    outcome.failed.push(entry.zone.name.clone());
                }
            }
        }
        outcome.listed = !outcome.hits.is_empty() && outcome.score >= inner.threshold;
        if outcome.listed {
            inner.counters.listed.fetch_add(1, Relaxed);
        }
        debug!(%ip, score = outcome.score, listed = outcome.listed, hits = outcome.hits.len(), timed_out = outcome.timed_out.len(), "dnsbl check");
        outcome
    }

    /// Starts a check on its own task and returns at once: an SMTP gate
    /// calls this when it accepts a connection and awaits
    /// [`PendingCheck::outcome`] before it accepts the first RCPT, so the
    /// lookups run while the greeting and EHLO go back and forth. Dropping
    /// the handle abandons the check (answers still reach the cache).
    pub fn spawn_check(&self, ip: IpAddr) -> PendingCheck {
        let client = self.clone();
        PendingCheck {
            ip,
            zones: self
                .inner
                .zones
                .iter()
                .map(|z| z.zone.name.clone())
                .collect(),
            handle: tokio::spawn(async move { client.check(ip).await }),
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> ClientStats {
        let c = &self.inner.counters;
        ClientStats {
            checks: c.checks.load(Relaxed),
            listed: c.listed.load(Relaxed),
            lookups: c.lookups.load(Relaxed),
            cache_hits: c.hits.load(Relaxed),
            merged: c.merged.load(Relaxed),
            cache_misses: c.misses.load(Relaxed),
            queries_sent: c.sent.load(Relaxed),
            timeouts: c.timeouts.load(Relaxed),
            errors: c.errors.load(Relaxed),
        }
    }

    /// Number of keys in the cache (answers and queries in flight).
    pub fn cache_len(&self) -> usize {
        self.inner.cache.lock().map_or(0, |c| c.len())
    }
}

impl Inner {
    async fn check_zone(self: &Arc<Self>, zi: u16, ip: IpAddr, deadline: Instant) -> ZoneResult {
        let entry = &self.zones[usize::from(zi)];
        let lookup = |q| timeout_at(deadline, self.lookup(zi, q));
        let codes: Vec<Ipv4Addr> = match (entry.zone.mode, ip) {
            (Mode::Bitmap, IpAddr::V4(v4)) => {
                let block = Block25::of(v4);
                match lookup(Question::Bitmap(block)).await {
                    Ok(Ok(Answer::Bits(bits))) => {
                        let offset = block.offset_of(v4).unwrap_or_default();
                        if bits.is_listed(offset) {
                            vec![crate::ip4set::DEFAULT_A]
                        } else {
                            Vec::new()
                        }
                    }
                    Ok(Ok(_)) => Vec::new(),
                    Ok(Err(f)) => return ZoneResult::Failed(f),
                    Err(_) => return ZoneResult::Failed(Failure::Timeout),
                }
            }
            _ => match lookup(Question::A(ip)).await {
                Ok(Ok(Answer::Codes(codes))) => codes.iter().copied().filter(is_listing).collect(),
                Ok(Ok(_)) => Vec::new(),
                Ok(Err(f)) => return ZoneResult::Failed(f),
                Err(_) => return ZoneResult::Failed(Failure::Timeout),
            },
        };
        if codes.is_empty() {
            return ZoneResult::Clean;
        }
        // the listing stands even if its reason does not arrive in time
        let reason = if entry.zone.reasons {
            match lookup(Question::Txt(ip)).await {
                Ok(Ok(Answer::Text(t))) if !t.is_empty() => Some(clean_reason(&t.join(" "))),
                _ => None,
            }
        } else {
            None
        };
        ZoneResult::Listed(Hit {
            zone: entry.zone.name.clone(),
            weight: entry.zone.weight,
            codes,
            reason,
        })
    }

    async fn lookup(self: &Arc<Self>, zi: u16, q: Question) -> Result<Answer, Failure> {
        self.counters.lookups.fetch_add(1, Relaxed);
        let key = (zi, q);
        let probe = match self.cache.lock() {
            Ok(mut cache) => cache.probe(&key, self.clock.now()),
            Err(_) => return Err(Failure::Error),
        };
        let mut rx = match probe {
            Probe::Hit(answer) => {
                self.counters.hits.fetch_add(1, Relaxed);
                metrics::inc(&metrics::get().dnsbl_lookups, "cache", "hit");
                return Ok(answer);
            }
            Probe::Join(rx) => {
                self.counters.merged.fetch_add(1, Relaxed);
                metrics::inc(&metrics::get().dnsbl_lookups, "cache", "merged");
                rx
            }
            Probe::Lead(tx, rx) => {
                self.counters.misses.fetch_add(1, Relaxed);
                metrics::inc(&metrics::get().dnsbl_lookups, "cache", "miss");
                // The query runs on its own task: a check that gives up at
                // its budget does not cancel it, and the answer still
                // reaches the cache and the other waiters.
                let inner = self.clone();
                tokio::spawn(async move {
                    let result = inner.fetch(zi, q).await;
                    let keep = match &result {
                        Ok((answer, ttl)) if !ttl.is_zero() => {
                            Some((answer.clone(), inner.clock.now() + *ttl))
                        }
                        _ => None,
                    };
                    if let Ok(mut cache) = inner.cache.lock() {
                        cache.finish(key, keep);
                    }
                    let _ = tx.send(Some(result.map(|(a, _)| a)));
                });
                rx
            }
        };
        let result = match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone().unwrap_or(Err(Failure::Error)),
            Err(_) => Err(Failure::Error),
        };
        result
    }

    async fn fetch(&self, zi: u16, q: Question) -> Result<(Answer, Duration), Failure> {
        let apex = &self.zones[usize::from(zi)].apex;
        let (name, qtype) = match q {
            Question::A(ip) => (classic_name(ip, apex), RecordType::A),
            Question::Txt(ip) => (classic_name(ip, apex), RecordType::TXT),
            Question::Bitmap(block) => (bitmap_name(block, apex), RecordType::AAAA),
        };
        let reply = ask(&self.exchange, &name, qtype, &self.counters.sent).await?;
        let positive = match reply.response_code() {
            ResponseCode::NoError => true,
            ResponseCode::NXDomain => false,
            _ => return Err(Failure::Error),
        };
        let records: Vec<_> = if positive {
            reply
                .answers()
                .iter()
                .filter(|r| r.record_type() == qtype)
                .collect()
        } else {
            Vec::new()
        };
        let ttl = if records.is_empty() {
            self.negative_ttl(&reply)
        } else {
            Duration::from_secs(u64::from(
                records.iter().map(|r| r.ttl()).min().unwrap_or(0),
            ))
        }
        .min(self.ttl_cap);
        let answer = match q {
            Question::A(_) => Answer::Codes(
                records
                    .iter()
                    .filter_map(|r| match r.data() {
                        RData::A(a) => Some(a.0),
                        _ => None,
                    })
                    .collect(),
            ),
            Question::Txt(_) => Answer::Text(
                records
                    .iter()
                    .filter_map(|r| match r.data() {
                        RData::TXT(t) => Some(
                            t.txt_data()
                                .iter()
                                .map(|s| String::from_utf8_lossy(s))
                                .collect::<String>(),
                        ),
                        _ => None,
                    })
                    .collect(),
            ),
            Question::Bitmap(_) => Answer::Bits(
                records
                    .iter()
                    .filter_map(|r| match r.data() {
                        RData::AAAA(a) => Some(Bitmap::from_ipv6(a.0)),
                        _ => None,
                    })
                    // several AAAA records: an address listed in any is listed
                    .fold(Bitmap::EMPTY, |acc, b| {
                        Bitmap::from_ipv6((acc.bits() | b.bits()).into())
                    }),
            ),
        };
        Ok((answer, ttl))
    }

    fn negative_ttl(&self, reply: &Message) -> Duration {
        reply
            .name_servers()
            .iter()
            .find_map(|r| match r.data() {
                // RFC 2308 §5
                RData::SOA(soa) => Some(Duration::from_secs(u64::from(r.ttl().min(soa.minimum())))),
                _ => None,
            })
            .unwrap_or(self.negative_ttl)
    }
}
