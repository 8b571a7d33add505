//! Checking logins: argon2 verification, a cache of recent successes, and
//! throttling that holds against parallel guessing.
//!
//! Failures count against the client's address (an IPv6 client by its
//! /64, which one host usually has whole) and against the account tried,
//! in one table every protocol shares (POP3, IMAP, submission, webmail
//! hold [`Authenticator`]s made with [`Authenticator::sharing`]). Once
//! either has failures, each further attempt takes the next free slot of
//! its schedule *before* the password is checked, so twenty connections
//! from one address guess no faster than one; an attempt whose slot is
//! too far ahead is refused at once ([`AuthFailure::Throttled`]), with a
//! log line an operator can feed to a firewall. A success clears the
//! account's count, never the address's: logging into one's own account
//! does not buy more guesses at another. A login with the exact password
//! that last succeeded for an account (the cache) is not held back, so a
//! user's own clients keep working while the account is under attack.
//!
//! argon2id costs 19 MiB and tens of milliseconds per check; at most one
//! check per core runs at once, the rest wait their turn, so memory stays
//! flat however many logins arrive together.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::directory::AccountEntry;
use crate::password::verify_password;
use crate::watch::DirectoryWatch;

/// Failures older than this no longer count.
const PENALTY_WINDOW: Duration = Duration::from_secs(15 * 60);
/// Longest wait between two attempts of a throttled client or account.
const MAX_PENALTY: Duration = Duration::from_secs(16);
/// An attempt whose turn is further away than this is refused at once.
const MAX_WAIT: Duration = Duration::from_secs(30);
/// Clients and accounts tracked at most; the oldest are forgotten past
/// this.
const MAX_TRACKED: usize = 100_000;

/// Why a login failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    /// Unknown user or wrong password (never told apart, to the client).
    #[error("authentication failed")]
    BadCredentials,
    /// Too many recent failures from this address or for this account:
    /// try again later (the password was not checked).
    #[error("too many failed logins; try again later")]
    Throttled,
}

/// What a throttled address or account may do next.
#[derive(Debug, Clone, Copy)]
struct Penalty {
    failures: u32,
    last_failure: Instant,
    /// The earliest moment the next attempt may be checked.
    next_slot: Instant,
}

/// Whom failures count against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Client(IpAddr),
    Account(String),
}

/// The client part of an address: IPv4 whole, IPv6 by its /64.
fn client_key(ip: IpAddr) -> Key {
    match ip {
        IpAddr::V4(_) => Key::Client(ip),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => Key::Client(IpAddr::V4(v4)),
            None => {
                let mut octets = v6.octets();
                octets[8..].fill(0);
                Key::Client(IpAddr::from(octets))
            }
        },
    }
}

/// State every protocol's authenticator shares.
struct Shared {
    penalties: Mutex<HashMap<Key, Penalty>>,
    /// address → (stored hash, keyed digest of the password that matched).
    /// argon2 costs tens of milliseconds by design; a client that logs in
    /// again and again with the right password (POP3 pollers) pays it once.
    verified: Mutex<HashMap<String, (String, [u8; 32])>>,
    /// Password checks running at once.
    hashing: Semaphore,
    secret: [u8; 32],
    dummy_hash: String,
}

/// Verifies logins for a protocol server.
pub struct Authenticator {
    directory: Arc<DirectoryWatch>,
    base_delay: Duration,
    shared: Arc<Shared>,
}

impl Authenticator {
    /// A failed login is answered after `base_delay`, doubled for every
    /// other recent failure from the same client (at most 16 s), and the
    /// client's or account's next attempt waits as long.
    pub fn new(directory: Arc<DirectoryWatch>, base_delay: Duration) -> Authenticator {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Authenticator {
            directory,
            base_delay,
            shared: Arc::new(Shared {
                penalties: Mutex::new(HashMap::new()),
                verified: Mutex::new(HashMap::new()),
                hashing: Semaphore::new(cores),
                secret: rand::random(),
                dummy_hash: crate::password::hash_password("not a real password")
                    .expect("hashing a constant works"),
            }),
        }
    }

    /// An authenticator with its own base delay that shares `other`'s
    /// failure counts, cache and hashing limit.
    pub fn sharing(other: &Authenticator, base_delay: Duration) -> Authenticator {
        Authenticator {
            directory: Arc::clone(&other.directory),
            base_delay,
            shared: Arc::clone(&other.shared),
        }
    }

    fn digest(&self, password: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.shared.secret);
        h.update(password.as_bytes());
        h.finalize().into()
    }

    /// Checks `address`/`password` for a client at `ip`.
    pub async fn login(
        &self,
        ip: IpAddr,
        address: &str,
        password: &str,
    ) -> Result<AccountEntry, AuthFailure> {
        let account = self.directory.get().account(address).cloned();
        let digest = self.digest(password);
        let cached = account.as_ref().is_some_and(|a| {
            self.shared
                .verified
                .lock()
                .expect("auth cache lock")
                .get(&a.address)
                .is_some_and(|(hash, d)| *hash == a.password_hash && *d == digest)
        });
        let account_key = Key::Account(address.trim().to_lowercase());
        let client = client_key(ip);
        let ok = if cached {
            true
        } else {
            let wait = self.take_slot(&[&client, &account_key]).map_err(|()| {
                // A fixed format an operator can feed to a firewall.
                tracing::warn!(client = %ip, user = %address, "login throttled: too many recent failures");
                metrics::inc(&metrics::get().auth_failures, "reason", "throttled");
                AuthFailure::Throttled
            })?;
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            // Unknown users are checked against a dummy hash so both
            // failures take the same time.
            let hash = account
                .as_ref()
                .map_or(self.shared.dummy_hash.clone(), |a| a.password_hash.clone());
            let password = password.to_string();
            let known = account.is_some();
            let Ok(_permit) = self.shared.hashing.acquire().await else {
                return Err(AuthFailure::BadCredentials);
            };
            tokio::task::spawn_blocking(move || verify_password(&password, &hash) && known)
                .await
                .unwrap_or(false)
        };
        match account {
            Some(account) if ok => {
                self.shared
                    .penalties
                    .lock()
                    .expect("auth lock")
                    .remove(&account_key);
                self.shared
                    .verified
                    .lock()
                    .expect("auth cache lock")
                    .insert(
                        account.address.clone(),
                        (account.password_hash.clone(), digest),
                    );
                Ok(account)
            }
            _ => {
                metrics::inc(&metrics::get().auth_failures, "reason", "password");
                let delay = self.record_failure(&[&client, &account_key]);
                tokio::time::sleep(delay).await;
                Err(AuthFailure::BadCredentials)
            }
        }
    }

    /// The delay after the `failures`-th recent failure.
    fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(8);
        (self.base_delay * 2u32.pow(doublings)).min(MAX_PENALTY.max(self.base_delay))
    }

    /// Reserves the next attempt's slot for each key that has recent
    /// failures; returns how long to wait for the latest of them, or
    /// `Err` when that is too far away (nothing is reserved then).
    fn take_slot(&self, keys: &[&Key]) -> Result<Duration, ()> {
        let now = Instant::now();
        let mut penalties = self.shared.penalties.lock().expect("auth lock");
        let mut start = now;
        for key in keys {
            if let Some(p) = penalties.get(*key) {
                if now.duration_since(p.last_failure) < PENALTY_WINDOW {
                    start = start.max(p.next_slot);
                }
            }
        }
        if start.duration_since(now) > MAX_WAIT {
            return Err(());
        }
        for key in keys {
            if let Some(p) = penalties.get_mut(*key) {
                if now.duration_since(p.last_failure) < PENALTY_WINDOW {
                    p.next_slot = start + self.delay(p.failures);
                }
            }
        }
        Ok(start.duration_since(now))
    }

    /// Counts a failure against each key and returns how long to wait
    /// before answering it.
    fn record_failure(&self, keys: &[&Key]) -> Duration {
        let now = Instant::now();
        let mut penalties = self.shared.penalties.lock().expect("auth lock");
        if penalties.len() >= MAX_TRACKED {
            penalties.retain(|_, p| now.duration_since(p.last_failure) < PENALTY_WINDOW);
        }
        let mut longest = Duration::ZERO;
        for key in keys {
            let p = penalties.entry((*key).clone()).or_insert(Penalty {
                failures: 0,
                last_failure: now,
                next_slot: now,
            });
            if now.duration_since(p.last_failure) >= PENALTY_WINDOW {
                p.failures = 0;
            }
            p.failures += 1;
            p.last_failure = now;
            let delay = self.delay(p.failures);
            p.next_slot = p.next_slot.max(now + delay);
            if matches!(key, Key::Client(_)) {
                longest = longest.max(delay);
            }
        }
        longest
    }
}

/// Why a SASL PLAIN response was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlainError {
    /// Not base64, not three NUL-separated parts, not UTF-8, or no user.
    Malformed,
    /// An authorization identity other than the user's own: acting for
    /// someone else is not offered.
    ForeignAuthorization,
}

/// Decodes a SASL PLAIN response (RFC 4616): base64 of `authzid NUL
/// authcid NUL password`, the authorization identity empty or the same
/// as the login. Every protocol's AUTH PLAIN reads it here.
pub fn decode_plain(response: &str) -> Result<(String, String), PlainError> {
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(response.trim().as_bytes())
        .map_err(|_| PlainError::Malformed)?;
    let mut parts = decoded.split(|&b| b == 0);
    let (Some(authz), Some(user), Some(pass), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(PlainError::Malformed);
    };
    let user = std::str::from_utf8(user).map_err(|_| PlainError::Malformed)?;
    let pass = std::str::from_utf8(pass).map_err(|_| PlainError::Malformed)?;
    if user.is_empty() {
        return Err(PlainError::Malformed);
    }
    if !authz.is_empty() && authz != user.as_bytes() {
        return Err(PlainError::ForeignAuthorization);
    }
    Ok((user.to_string(), pass.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::directory::Directory;

    fn auth(delay: Duration) -> Authenticator {
        let hash = crate::password::hash_password("right").unwrap();
        let dir = Directory::new(
            1,
            ["example.org".to_string()],
            [AccountEntry {
                id: 1,
                address: "a@example.org".into(),
                inbox: 1,
                password_hash: hash,
                spam_threshold: None,
            }],
            [],
        );
        Authenticator::new(DirectoryWatch::fixed(dir), delay)
    }

    #[tokio::test]
    async fn right_password_logs_in_wrong_one_does_not() {
        let a = auth(Duration::ZERO);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(a.login(ip, "A@example.org", "right").await.unwrap().id, 1);
        // Second time comes from the cache, and still checks the password.
        assert!(a.login(ip, "a@example.org", "right").await.is_ok());
        assert_eq!(
            a.login(ip, "a@example.org", "wrong").await.unwrap_err(),
            AuthFailure::BadCredentials
        );
        assert!(a.login(ip, "nobody@example.org", "right").await.is_err());
    }

    #[test]
    fn penalty_doubles_per_failure_and_is_capped() {
        let a = auth(Duration::from_secs(1));
        let ip = client_key("10.0.0.1".parse().unwrap());
        let delays: Vec<u64> = (0..8).map(|_| a.record_failure(&[&ip]).as_secs()).collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 16, 16, 16, 16]);
        let other = client_key("10.0.0.2".parse().unwrap());
        assert_eq!(a.record_failure(&[&other]), Duration::from_secs(1));
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        assert_eq!(
            client_key("2001:db8:1:2:aaaa::1".parse().unwrap()),
            client_key("2001:db8:1:2:bbbb::9".parse().unwrap())
        );
        assert_ne!(
            client_key("2001:db8:1:2::1".parse().unwrap()),
            client_key("2001:db8:1:3::1".parse().unwrap())
        );
        assert_eq!(
            client_key("::ffff:10.0.0.1".parse().unwrap()),
            client_key("10.0.0.1".parse().unwrap())
        );
    }

    #[test]
    fn parallel_attempts_of_a_failing_client_take_turns_then_are_refused() {
        let a = auth(Duration::from_secs(4));
        let ip = client_key("10.0.0.1".parse().unwrap());
        let account = Key::Account("a@example.org".into());
        // No failures yet: nobody waits.
        assert_eq!(a.take_slot(&[&ip, &account]), Ok(Duration::ZERO));
        a.record_failure(&[&ip, &account]);
        // Twenty attempts at once each get a later turn, 4 s apart
        // (the delay after one failure), until the turns are too far off.
        let waits: Vec<Result<Duration, ()>> =
            (0..20).map(|_| a.take_slot(&[&ip, &account])).collect();
        let granted: Vec<u64> = waits
            .iter()
            .filter_map(|w| w.ok())
            .map(|w| (w.as_millis() as u64 + 500) / 1000)
            .collect();
        assert_eq!(granted, [4, 8, 12, 16, 20, 24, 28]);
        assert!(waits[7..].iter().all(|w| w.is_err()));
        // Another client trying the same account waits for it too.
        let other = client_key("10.9.9.9".parse().unwrap());
        assert!(a.take_slot(&[&other, &account]).is_err());
        // A fresh client and account are not held back.
        let fresh = Key::Account("b@example.org".into());
        assert_eq!(a.take_slot(&[&other, &fresh]), Ok(Duration::ZERO));
    }

    #[tokio::test]
    async fn success_clears_the_account_not_the_client() {
        let a = auth(Duration::ZERO);
        let shared = Authenticator::sharing(&a, Duration::ZERO);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        assert!(a.login(ip, "a@example.org", "wrong").await.is_err());
        assert!(shared.login(ip, "a@example.org", "right").await.is_ok());
        let penalties = a.shared.penalties.lock().unwrap();
        assert!(!penalties.contains_key(&Key::Account("a@example.org".into())));
        assert_eq!(penalties.get(&client_key(ip)).unwrap().failures, 1);
    }
}
