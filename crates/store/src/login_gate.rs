//! What holds one client address to one guess at a time on this node,
//! however many connections it opens (auth.rs uses it):
//!
//! - **One lane per address.** An attempt whose password must be checked
//!   (not the cached one) goes through its address's lane: one check at a
//!   time, the others waiting behind it. Without it, fifty connections
//!   opened at once from a clean address would have fifty passwords
//!   checked before the first failure was counted.
//! - **A failure counts for the attempts behind it.** When the attempt in
//!   the lane fails, each attempt waiting behind it counts as a failure
//!   too: they are guesses of the same client, and counting them makes
//!   fifty connections wait as long as fifty sequential guesses would.
//! - **No queueing for a failing address.** An attempt from an address
//!   with recent failures, while another of its attempts is in the lane,
//!   is refused at once (and counted as a failure: hammering lengthens the
//!   penalty rather than buying turns). A user's own clients, logging in
//!   with the right password on several connections, wait in the lane
//!   instead and find the first one's success in the cache.
//! - **One check at a time per account, too.** After its address's lane,
//!   an attempt waits in the lane of the account it names, so fifty
//!   addresses starting together against one account do not have fifty
//!   passwords checked before the account's first failure counts.
//! - **Fewer connections for a failing address.** An address with
//!   [`LIMITED_AFTER`] recent failures may keep only
//!   [`LIMITED_CONNECTIONS`] connections per listener
//!   ([`LoginGate::limited`], asked by the accept loops).
//!
//! This is this node's own knowledge: the turns themselves are in the
//! penalty book, which several nodes share (penalties.rs), so a client
//! spreading over nodes still waits its turns there.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::penalties::{PenaltyKey, MAX_WAIT, PENALTY_WINDOW};

/// Recent failures after which an address's connections are limited.
pub const LIMITED_AFTER: u32 = 3;
/// Connections per listener an address past [`LIMITED_AFTER`] may keep.
pub const LIMITED_CONNECTIONS: usize = 3;
/// Addresses with failures this node remembers at most; past this, the
/// ones whose failures no longer count are forgotten.
const MAX_TRACKED: usize = 100_000;

/// One address's lane: the lock a check holds, and how many attempts are
/// in it (holding or waiting).
struct Lane {
    lock: Arc<tokio::sync::Mutex<()>>,
    users: usize,
}

/// What this node knows of an address's recent failures.
#[derive(Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

impl Failures {
    fn counts(&self) -> bool {
        self.last.elapsed() < PENALTY_WINDOW
    }
}

/// The lanes and the failing addresses; see the module documentation.
#[derive(Default)]
pub struct LoginGate {
    lanes: Mutex<HashMap<PenaltyKey, Lane>>,
    failing: Mutex<HashMap<PenaltyKey, Failures>>,
    /// Accounts said to be under attack, and when: once per window.
    alerted: Mutex<HashMap<PenaltyKey, Instant>>,
    /// Clients whose refusals were last logged, when, and how many since.
    refusals: Mutex<HashMap<PenaltyKey, (Instant, u64)>>,
}

/// How often a refused client is named in the log at most: a firewall
/// feeding on the log sees it every minute it goes on, and the log does
/// not grow by a line per refused guess.
pub const REFUSAL_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// An attempt's place in its address's lane; leaving it (dropping) lets
/// the next attempt in.
pub(crate) struct InLane<'a> {
    gate: &'a LoginGate,
    key: PenaltyKey,
    _held: tokio::sync::OwnedMutexGuard<()>,
}

impl Drop for InLane<'_> {
    fn drop(&mut self) {
        self.gate.leave(&self.key);
    }
}

/// Why an attempt did not get into the lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Crowded;

impl LoginGate {
    /// Takes the attempt into `key`'s lane, waiting for the attempts ahead
    /// (refused after [`MAX_WAIT`]); refused at once when the address is
    /// failing and an attempt of it is in the lane already.
    pub(crate) async fn enter(&self, key: &PenaltyKey) -> Result<InLane<'_>, Crowded> {
        self.enter_lane(key, self.recent_failures(key) > 0).await
    }

    /// Takes the attempt into `key`'s lane (an account's: one check at a
    /// time for it, whatever the addresses), waiting for the attempts
    /// ahead, refused only after [`MAX_WAIT`]: an account's lane never
    /// turns its owner away for the guessers' failures.
    pub(crate) async fn queue(&self, key: &PenaltyKey) -> Result<InLane<'_>, Crowded> {
        self.enter_lane(key, false).await
    }

    async fn enter_lane(
        &self,
        key: &PenaltyKey,
        refuse_beside: bool,
    ) -> Result<InLane<'_>, Crowded> {
        let failing = refuse_beside;
        let lock = {
            let mut lanes = self.lanes.lock().expect("login lanes lock");
            let lane = lanes.entry(key.clone()).or_insert_with(|| Lane {
                lock: Arc::default(),
                users: 0,
            });
            if failing && lane.users > 0 {
                return Err(Crowded);
            }
            lane.users += 1;
            Arc::clone(&lane.lock)
        };
        // Entered before waiting, so the lane is left (and forgotten when
        // empty) even if this future is dropped while it waits.
        let leave_if_dropped = Leave { gate: self, key };
        // The attempts ahead each wait their turn: past the longest turn
        // an attempt is refused rather than held on to.
        let held = tokio::time::timeout(MAX_WAIT, lock.lock_owned())
            .await
            .map_err(|_| Crowded)?;
        std::mem::forget(leave_if_dropped);
        Ok(InLane {
            gate: self,
            key: key.clone(),
            _held: held,
        })
    }

    fn leave(&self, key: &PenaltyKey) {
        let mut lanes = self.lanes.lock().expect("login lanes lock");
        if let Some(lane) = lanes.get_mut(key) {
            lane.users -= 1;
            if lane.users == 0 {
                lanes.remove(key);
            }
        }
    }

    /// Attempts of `key` waiting in its lane behind the one in it.
    pub(crate) fn waiting(&self, key: &PenaltyKey) -> u32 {
        self.lanes
            .lock()
            .expect("login lanes lock")
            .get(key)
            .map_or(0, |l| {
                u32::try_from(l.users.saturating_sub(1)).unwrap_or(u32::MAX)
            })
    }

    /// Notes that `key` failed `n` times (a wrong password, and the
    /// attempts that waited behind it; or a crowded attempt).
    pub(crate) fn failed(&self, key: &PenaltyKey, n: u32) {
        let mut failing = self.failing.lock().expect("failing clients lock");
        if failing.len() >= MAX_TRACKED {
            failing.retain(|_, f| f.counts());
        }
        let f = failing.entry(key.clone()).or_insert(Failures {
            count: 0,
            last: Instant::now(),
        });
        if !f.counts() {
            f.count = 0;
        }
        f.count = f.count.saturating_add(n);
        f.last = Instant::now();
    }

    /// The failures of `key` this node saw within the penalty window.
    pub(crate) fn recent_failures(&self, key: &PenaltyKey) -> u32 {
        self.failing
            .lock()
            .expect("failing clients lock")
            .get(key)
            .filter(|f| f.counts())
            .map_or(0, |f| f.count)
    }

    /// Whether this is the first sign of an attack on `account` within the
    /// penalty window (so it is logged and counted once per episode).
    pub(crate) fn first_alert(&self, account: &PenaltyKey) -> bool {
        let mut alerted = self.alerted.lock().expect("alerted accounts lock");
        if alerted.len() >= MAX_TRACKED {
            alerted.retain(|_, at| at.elapsed() < PENALTY_WINDOW);
        }
        match alerted.get(account) {
            Some(at) if at.elapsed() < PENALTY_WINDOW => false,
            _ => {
                alerted.insert(account.clone(), Instant::now());
                true
            }
        }
    }

    /// Counts a refused attempt of `client`; the refusals to report when
    /// a log line is due (the first, then at most one line per
    /// [`REFUSAL_LOG_INTERVAL`]).
    pub(crate) fn refused(&self, client: &PenaltyKey) -> Option<u64> {
        let mut refusals = self.refusals.lock().expect("refusals lock");
        if refusals.len() >= MAX_TRACKED {
            refusals.retain(|_, (at, _)| at.elapsed() < REFUSAL_LOG_INTERVAL);
        }
        let (at, since) = refusals
            .entry(client.clone())
            .or_insert((Instant::now() - REFUSAL_LOG_INTERVAL, 0));
        *since += 1;
        if at.elapsed() >= REFUSAL_LOG_INTERVAL {
            *at = Instant::now();
            Some(std::mem::take(since))
        } else {
            None
        }
    }

    /// Whether a client at `ip` failed often enough lately to be held to
    /// [`LIMITED_CONNECTIONS`] per listener.
    pub fn limited(&self, ip: IpAddr) -> bool {
        self.recent_failures(&PenaltyKey::client(ip)) >= LIMITED_AFTER
    }
}

/// Leaves the lane when an attempt is dropped while it waits in it.
struct Leave<'a> {
    gate: &'a LoginGate,
    key: &'a PenaltyKey,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.gate.leave(self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key(ip: &str) -> PenaltyKey {
        PenaltyKey::client(ip.parse().unwrap())
    }

    #[tokio::test]
    async fn a_clean_address_queues_a_failing_one_is_turned_away() {
        let gate = LoginGate::default();
        let a = key("10.0.0.1");
        let first = gate.enter(&a).await.unwrap();
        // A clean address's second attempt waits for the first.
        let waiting = tokio::time::timeout(Duration::from_millis(50), gate.enter(&a)).await;
        assert!(waiting.is_err(), "it went in beside the first");
        drop(first);
        let second = gate.enter(&a).await.unwrap();
        assert_eq!(gate.waiting(&a), 0);
        // Once the address has failed, an attempt beside another is
        // refused at once.
        gate.failed(&a, 1);
        assert_eq!(gate.enter(&a).await.err(), Some(Crowded));
        drop(second);
        // Alone in its lane, it goes in.
        let third = gate.enter(&a).await.unwrap();
        // Another address has a lane of its own.
        assert!(gate.enter(&key("10.0.0.2")).await.is_ok());
        drop(third);
        assert!(gate.lanes.lock().unwrap().is_empty(), "lanes are forgotten");
    }

    #[tokio::test]
    async fn an_attempt_dropped_while_waiting_leaves_the_lane() {
        let gate = LoginGate::default();
        let a = key("10.0.0.1");
        let first = gate.enter(&a).await.unwrap();
        let _ = tokio::time::timeout(Duration::from_millis(20), gate.enter(&a)).await;
        assert_eq!(gate.lanes.lock().unwrap()[&a].users, 1);
        drop(first);
        assert!(gate.lanes.lock().unwrap().is_empty());
    }

    #[test]
    fn alerts_and_refusal_lines_are_rationed() {
        let gate = LoginGate::default();
        let account = PenaltyKey::account("a@example.org");
        assert!(gate.first_alert(&account));
        assert!(!gate.first_alert(&account));
        assert!(gate.first_alert(&PenaltyKey::account("b@example.org")));
        let client = key("10.0.0.1");
        assert_eq!(gate.refused(&client), Some(1));
        assert_eq!(gate.refused(&client), None);
        assert_eq!(gate.refused(&client), None);
        assert_eq!(gate.refused(&key("10.0.0.2")), Some(1));
    }

    #[test]
    fn connections_are_limited_after_a_few_failures() {
        let gate = LoginGate::default();
        let ip: IpAddr = "2001:db8::1".parse().unwrap();
        for _ in 0..LIMITED_AFTER - 1 {
            gate.failed(&PenaltyKey::client(ip), 1);
        }
        assert!(!gate.limited(ip));
        gate.failed(&PenaltyKey::client(ip), 1);
        assert!(gate.limited(ip));
        // The /64 counts together.
        assert!(gate.limited("2001:db8::99".parse().unwrap()));
        assert!(!gate.limited("2001:db8:0:1::1".parse().unwrap()));
    }
}
