//! The penalty book: where failed logins are counted, and the schedule
//! that turns those counts into waits (auth.rs uses it).
//!
//! Failures count against the client's address (an IPv6 client by its
//! /64) and against the account tried. Once a key has failures, each
//! further attempt takes the next free turn of its schedule before the
//! password is checked; a turn further away than [`MAX_WAIT`] is refused
//! without reserving anything.
//!
//! One process keeps the book in memory ([`MemoryPenalties`]). Several
//! nodes on one database keep it there ([`crate::Store::penalty_book`]),
//! so guesses spread over the nodes are held to one schedule, and an
//! account throttled on one node is throttled on all. Both books follow
//! the same rules, on times in milliseconds of the book's clock.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::error::Result;

/// Failures older than this no longer count.
pub const PENALTY_WINDOW: Duration = Duration::from_secs(15 * 60);
/// Longest wait between two attempts of a throttled client or account.
pub const MAX_PENALTY: Duration = Duration::from_secs(16);
/// An attempt whose turn is further away than this is refused at once.
pub const MAX_WAIT: Duration = Duration::from_secs(30);
/// Clients and accounts the memory book tracks at most; past this, the
/// ones whose failures no longer count are forgotten.
const MAX_TRACKED: usize = 100_000;

/// Doublings of the base delay at most (2^8 × 1 s is past [`MAX_PENALTY`]
/// already); the schedule has one delay per failure count up to one more.
const STEPS: usize = 9;

/// [`PENALTY_WINDOW`] in milliseconds.
pub(crate) const WINDOW_MS: i64 = PENALTY_WINDOW.as_millis() as i64;
/// [`MAX_WAIT`] in milliseconds.
pub(crate) const MAX_WAIT_MS: i64 = MAX_WAIT.as_millis() as i64;

/// Whom failures count against.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PenaltyKey {
    /// A client address: IPv4 whole, IPv6 by its /64.
    Client(IpAddr),
    /// An account address as tried (lower case, trimmed), known or not.
    Account(String),
}

impl PenaltyKey {
    /// The key of a client at `ip`: an IPv6 client by its /64, which one
    /// host usually has whole; an IPv4-mapped address as the IPv4 one.
    pub fn client(ip: IpAddr) -> PenaltyKey {
        match ip {
            IpAddr::V4(_) => PenaltyKey::Client(ip),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => PenaltyKey::Client(IpAddr::V4(v4)),
                None => {
                    let mut octets = v6.octets();
                    octets[8..].fill(0);
                    PenaltyKey::Client(IpAddr::from(octets))
                }
            },
        }
    }

    /// The key of the account a client names.
    pub fn account(address: &str) -> PenaltyKey {
        PenaltyKey::Account(address.trim().to_lowercase())
    }

    /// The key as a shared book stores it: the kind, a space, the value.
    pub fn to_text(&self) -> String {
        match self {
            PenaltyKey::Client(ip) => format!("client {ip}"),
            PenaltyKey::Account(address) => format!("account {address}"),
        }
    }
}

/// How long a key waits after its n-th recent failure: the base delay,
/// doubled for every failure before, at most [`MAX_PENALTY`] (or the base
/// delay, when that is longer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// Milliseconds after the 1st, 2nd, ... 9th and later failure.
    delays: [i64; STEPS],
}

impl Schedule {
    /// The schedule of a protocol whose first failure waits `base_delay`.
    pub fn new(base_delay: Duration) -> Schedule {
        let mut delays = [0; STEPS];
        for (doublings, d) in delays.iter_mut().enumerate() {
            let delay = (base_delay * 2u32.pow(doublings as u32)).min(MAX_PENALTY.max(base_delay));
            *d = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
        }
        Schedule { delays }
    }

    /// Milliseconds to wait after the `failures`-th recent failure.
    pub fn delay(&self, failures: u32) -> i64 {
        self.delays[(failures.clamp(1, STEPS as u32) - 1) as usize]
    }

    /// The delays after the 1st to the 9th failure (later ones as the
    /// 9th), for a book that computes turns where it stores them.
    pub fn delays(&self) -> &[i64] {
        &self.delays
    }
}

/// An attempt's place in its keys' schedules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turn {
    /// Check the password after `wait` milliseconds; `penalised` are the
    /// keys that had recent failures (their next turns were reserved).
    Granted {
        /// Milliseconds until the turn.
        wait: i64,
        /// Keys with recent failures, in no particular order.
        penalised: Vec<PenaltyKey>,
    },
    /// The turn is too far away: refuse without checking. Nothing was
    /// reserved.
    Refused,
}

/// Where failed logins are counted. Each call is one step every node
/// sees whole: concurrent attempts are ordered, never interleaved.
#[async_trait]
pub trait PenaltyBook: Send + Sync {
    /// The time now in the book's clock, in milliseconds.
    fn now(&self) -> i64;

    /// Whether the book is in this process: its calls cost no round trip
    /// and do not fail, so the caller need not spare them.
    fn local(&self) -> bool;

    /// Reserves the next turn of each key of `keys` that has recent
    /// failures, all at the latest of their turns; the attempt waits for
    /// it, or is refused when it is more than [`MAX_WAIT`] away.
    async fn take_turn(&self, keys: &[PenaltyKey], now: i64, schedule: &Schedule) -> Result<Turn>;

    /// Counts a failure against each key (a count older than
    /// [`PENALTY_WINDOW`] starts again) and pushes its next turn at least
    /// the schedule's delay past `now`; each key's recent failures, in
    /// the order of `keys`.
    async fn record_failure(
        &self,
        keys: &[PenaltyKey],
        now: i64,
        schedule: &Schedule,
    ) -> Result<Vec<u32>>;

    /// Counts `n` failures against `key` at once, as [`PenaltyBook::record_failure`]
    /// counts one: attempts that waited behind a failure of the same
    /// client are guesses of their own (login_gate.rs). Its recent failures.
    async fn record_failures(
        &self,
        key: &PenaltyKey,
        n: u32,
        now: i64,
        schedule: &Schedule,
    ) -> Result<u32>;

    /// Forgets the failures of `key` (an account after a success).
    async fn clear(&self, key: &PenaltyKey) -> Result<()>;

    /// How many failures count against `key` at `now`.
    async fn recent_failures(&self, key: &PenaltyKey, now: i64) -> Result<u32>;
}

/// A key's state.
#[derive(Debug, Clone, Copy)]
struct Penalty {
    failures: u32,
    last_failure: i64,
    /// The earliest moment the next attempt may be checked.
    next_slot: i64,
}

impl Penalty {
    fn counts(&self, now: i64) -> bool {
        now - self.last_failure < WINDOW_MS
    }
}

/// The book in this process's memory, on a monotonic clock: the default
/// for one node.
pub struct MemoryPenalties {
    started: Instant,
    table: Mutex<HashMap<PenaltyKey, Penalty>>,
}

impl Default for MemoryPenalties {
    fn default() -> Self {
        MemoryPenalties {
            started: Instant::now(),
            table: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait]
impl PenaltyBook for MemoryPenalties {
    fn now(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    fn local(&self) -> bool {
        true
    }

    async fn take_turn(&self, keys: &[PenaltyKey], now: i64, schedule: &Schedule) -> Result<Turn> {
        let mut table = self.table.lock().expect("penalty book lock");
        let mut start = now;
        let mut penalised = Vec::new();
        for key in keys {
            if let Some(p) = table.get(key).filter(|p| p.counts(now)) {
                start = start.max(p.next_slot);
                penalised.push(key.clone());
            }
        }
        if start - now > MAX_WAIT_MS {
            return Ok(Turn::Refused);
        }
        for key in &penalised {
            if let Some(p) = table.get_mut(key) {
                p.next_slot = start + schedule.delay(p.failures);
            }
        }
        Ok(Turn::Granted {
            wait: start - now,
            penalised,
        })
    }

    async fn record_failure(
        &self,
        keys: &[PenaltyKey],
        now: i64,
        schedule: &Schedule,
    ) -> Result<Vec<u32>> {
        Ok(keys
            .iter()
            .map(|key| self.add_failures(key, 1, now, schedule))
            .collect())
    }

    async fn record_failures(
        &self,
        key: &PenaltyKey,
        n: u32,
        now: i64,
        schedule: &Schedule,
    ) -> Result<u32> {
        Ok(self.add_failures(key, n, now, schedule))
    }

    async fn clear(&self, key: &PenaltyKey) -> Result<()> {
        self.table.lock().expect("penalty book lock").remove(key);
        Ok(())
    }

    async fn recent_failures(&self, key: &PenaltyKey, now: i64) -> Result<u32> {
        let table = self.table.lock().expect("penalty book lock");
        Ok(table
            .get(key)
            .filter(|p| p.counts(now))
            .map_or(0, |p| p.failures))
    }
}

impl MemoryPenalties {
    fn add_failures(&self, key: &PenaltyKey, n: u32, now: i64, schedule: &Schedule) -> u32 {
        let mut table = self.table.lock().expect("penalty book lock");
        if table.len() >= MAX_TRACKED {
            table.retain(|_, p| p.counts(now));
        }
        let p = table.entry(key.clone()).or_insert(Penalty {
            failures: 0,
            last_failure: now,
            next_slot: now,
        });
        if !p.counts(now) {
            p.failures = 0;
        }
        p.failures = p.failures.saturating_add(n);
        p.last_failure = now;
        p.next_slot = p.next_slot.max(now + schedule.delay(p.failures));
        p.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(ip: &str) -> PenaltyKey {
        PenaltyKey::client(ip.parse().unwrap())
    }

    #[test]
    fn the_schedule_doubles_and_is_capped() {
        let s = Schedule::new(Duration::from_secs(1));
        let delays: Vec<i64> = (1..=10).map(|n| s.delay(n) / 1000).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 16, 16, 16, 16, 16]);
        // A base delay past the cap is kept whole.
        let slow = Schedule::new(Duration::from_secs(20));
        assert_eq!(slow.delay(1), 20_000);
        assert_eq!(slow.delay(5), 20_000);
        assert_eq!(Schedule::new(Duration::ZERO).delay(3), 0);
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        assert_eq!(
            client("2001:db8:1:2:aaaa::1"),
            client("2001:db8:1:2:bbbb::9")
        );
        assert_ne!(client("2001:db8:1:2::1"), client("2001:db8:1:3::1"));
        assert_eq!(client("::ffff:10.0.0.1"), client("10.0.0.1"));
        assert_eq!(
            client("2001:db8:1:2:aaaa::1").to_text(),
            "client 2001:db8:1:2::"
        );
        assert_eq!(
            PenaltyKey::account(" A@Example.org ").to_text(),
            "account a@example.org"
        );
    }

    #[tokio::test]
    async fn failures_age_out_after_the_window() {
        let book = MemoryPenalties::default();
        let s = Schedule::new(Duration::from_secs(1));
        let ip = client("10.0.0.1");
        let keys = [ip.clone()];
        assert_eq!(book.record_failure(&keys, 0, &s).await.unwrap(), [1]);
        assert_eq!(book.record_failure(&keys, 10, &s).await.unwrap(), [2]);
        assert_eq!(book.recent_failures(&ip, WINDOW_MS).await.unwrap(), 2);
        assert_eq!(book.recent_failures(&ip, WINDOW_MS + 10).await.unwrap(), 0);
        // A stale count does not hold an attempt back, and starts again.
        assert_eq!(
            book.take_turn(&keys, WINDOW_MS + 10, &s).await.unwrap(),
            Turn::Granted {
                wait: 0,
                penalised: vec![]
            }
        );
        assert_eq!(
            book.record_failure(&keys, WINDOW_MS + 10, &s)
                .await
                .unwrap(),
            [1]
        );
        // Several at once count as many, and push the next turn as far.
        assert_eq!(
            book.record_failures(&ip, 4, WINDOW_MS + 20, &s)
                .await
                .unwrap(),
            5
        );
        assert_eq!(
            book.take_turn(&keys, WINDOW_MS + 20, &s).await.unwrap(),
            Turn::Granted {
                wait: 16_000,
                penalised: vec![ip.clone()]
            }
        );
    }
}
