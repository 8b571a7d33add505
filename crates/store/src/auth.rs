//! Checking logins: argon2 verification, a cache of recent successes, and a
//! per-client penalty that slows password guessing.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::directory::AccountEntry;
use crate::password::verify_password;
use crate::watch::DirectoryWatch;

/// Failures older than this no longer count against a client.
const PENALTY_WINDOW: Duration = Duration::from_secs(15 * 60);
/// Longest delay before a failed login is answered.
const MAX_PENALTY: Duration = Duration::from_secs(16);
/// Clients tracked at most; the oldest are forgotten past this.
const MAX_TRACKED: usize = 100_000;

/// Why a login failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    /// Unknown user or wrong password (never told apart, to the client).
    #[error("authentication failed")]
    BadCredentials,
}

/// Verifies logins for every protocol server.
pub struct Authenticator {
    directory: Arc<DirectoryWatch>,
    base_delay: Duration,
    failures: Mutex<HashMap<IpAddr, (u32, Instant)>>,
    /// address → (stored hash, keyed digest of the password that matched).
    /// argon2 costs tens of milliseconds by design; a client that logs in
    /// again and again with the right password (POP3 pollers) pays it once.
    verified: Mutex<HashMap<String, (String, [u8; 32])>>,
    secret: [u8; 32],
    dummy_hash: String,
}

impl Authenticator {
    /// A failed login is answered after `base_delay`, doubled for every
    /// other recent failure from the same client address.
    pub fn new(directory: Arc<DirectoryWatch>, base_delay: Duration) -> Authenticator {
        Authenticator {
            directory,
            base_delay,
            failures: Mutex::new(HashMap::new()),
            verified: Mutex::new(HashMap::new()),
            secret: rand::random(),
            dummy_hash: crate::password::hash_password("not a real password")
                .expect("hashing a constant works"),
        }
    }

    fn digest(&self, password: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.secret);
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
            self.verified
                .lock()
                .expect("auth cache lock")
                .get(&a.address)
                .is_some_and(|(hash, d)| *hash == a.password_hash && *d == digest)
        });
        let ok = if cached {
            true
        } else {
            // Unknown users are checked against a dummy hash so both
            // failures take the same time.
            let hash = account
                .as_ref()
                .map_or(self.dummy_hash.clone(), |a| a.password_hash.clone());
            let password = password.to_string();
            let known = account.is_some();
            tokio::task::spawn_blocking(move || verify_password(&password, &hash) && known)
                .await
                .unwrap_or(false)
        };
        match account {
            Some(account) if ok => {
                self.failures.lock().expect("auth lock").remove(&ip);
                self.verified.lock().expect("auth cache lock").insert(
                    account.address.clone(),
                    (account.password_hash.clone(), digest),
                );
                Ok(account)
            }
            _ => {
                let delay = self.record_failure(ip);
                tokio::time::sleep(delay).await;
                Err(AuthFailure::BadCredentials)
            }
        }
    }

    /// Counts a failure and returns how long to wait before answering it.
    fn record_failure(&self, ip: IpAddr) -> Duration {
        let now = Instant::now();
        let mut failures = self.failures.lock().expect("auth lock");
        if failures.len() >= MAX_TRACKED {
            failures.retain(|_, (_, at)| now.duration_since(*at) < PENALTY_WINDOW);
        }
        let entry = failures.entry(ip).or_insert((0, now));
        if now.duration_since(entry.1) >= PENALTY_WINDOW {
            entry.0 = 0;
        }
        entry.0 += 1;
        entry.1 = now;
        let doublings = entry.0.saturating_sub(1).min(8);
        (self.base_delay * 2u32.pow(doublings)).min(MAX_PENALTY.max(self.base_delay))
    }
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
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let delays: Vec<u64> = (0..8).map(|_| a.record_failure(ip).as_secs()).collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 16, 16, 16, 16]);
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        assert_eq!(a.record_failure(other), Duration::from_secs(1));
    }
}
