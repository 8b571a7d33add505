//! Checking logins: argon2 verification, a cache of recent successes, and
//! throttling that holds against parallel guessing.
//!
//! Failures count against the client's address (an IPv6 client by its
//! /64, which one host usually has whole) and against the account tried,
//! in one penalty book every protocol shares (POP3, IMAP, submission,
//! webmail hold [`Authenticator`]s made with [`Authenticator::sharing`]);
//! on a store several nodes share, the book is in the database and every
//! node counts in it (penalties.rs). Once either key has failures, each
//! further attempt takes the next free slot of its schedule *before* the
//! password is checked, so twenty connections from one address guess no
//! faster than one; an attempt whose slot is too far ahead is refused at
//! once ([`AuthFailure::Throttled`]), with a log line an operator can
//! feed to a firewall. Within a node, an address has one password check
//! at a time, and a failing address's attempt beside another is refused
//! and counted, however many connections it opens (login_gate.rs). A
//! success clears the account's count, never the
//! address's: logging into one's own account does not buy more guesses
//! at another. A login with the exact password that last succeeded for an
//! account on this node (the cache) is not held back, so a user's own
//! clients keep working while the account is under attack. An account
//! whose failures pass [`ACCOUNT_ALERT`] in the penalty window is logged
//! once and counted (`sluice_auth_accounts_attacked_total`).
//!
//! argon2id costs 19 MiB and tens of milliseconds per check; at most one
//! check per core runs at once, the rest wait their turn, so memory stays
//! flat however many logins arrive together.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::directory::AccountEntry;
use crate::login_gate::LoginGate;
use crate::model::AccountId;
use crate::password::verify_password;
use crate::penalties::{MemoryPenalties, PenaltyBook, PenaltyKey, Schedule, Turn};
use crate::watch::DirectoryWatch;

/// Failed logins for one account, from any addresses, within the penalty
/// window, at which it is logged and counted as under attack (once per
/// episode). Its attempts are slowed from the first failure on; this only
/// says that someone is guessing.
pub const ACCOUNT_ALERT: u32 = 10;

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
    /// The shared penalty book cannot be reached (the database is down):
    /// try again later (the password was not checked).
    #[error("login temporarily unavailable")]
    Unavailable,
}

/// State every protocol's authenticator shares.
struct Shared {
    book: Arc<dyn PenaltyBook>,
    /// address → (stored hash, keyed digest of the password that matched).
    /// argon2 costs tens of milliseconds by design; a client that logs in
    /// again and again with the right password (POP3 pollers) pays it once.
    verified: Mutex<HashMap<String, (String, [u8; 32])>>,
    /// Password checks running at once.
    hashing: Semaphore,
    /// One check at a time per client address on this node.
    gate: Arc<LoginGate>,
    secret: [u8; 32],
    dummy_hash: String,
}

/// Verifies logins for a protocol server.
pub struct Authenticator {
    directory: Arc<DirectoryWatch>,
    schedule: Schedule,
    shared: Arc<Shared>,
}

impl Authenticator {
    /// A failed login is answered after `base_delay`, doubled for every
    /// other recent failure from the same client (at most 16 s), and the
    /// client's or account's next attempt waits as long. Failures are
    /// counted in this process's memory.
    pub fn new(directory: Arc<DirectoryWatch>, base_delay: Duration) -> Authenticator {
        Authenticator::with_book(directory, base_delay, None)
    }

    /// [`Authenticator::new`], counting failures in `book` when there is
    /// one (a store's shared book, [`crate::Store::penalty_book`]), in
    /// memory otherwise.
    pub fn with_book(
        directory: Arc<DirectoryWatch>,
        base_delay: Duration,
        book: Option<Arc<dyn PenaltyBook>>,
    ) -> Authenticator {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Authenticator {
            directory,
            schedule: Schedule::new(base_delay),
            shared: Arc::new(Shared {
                book: book.unwrap_or_else(|| Arc::new(MemoryPenalties::default())),
                verified: Mutex::new(HashMap::new()),
                hashing: Semaphore::new(cores),
                gate: Arc::default(),
                secret: rand::random(),
                dummy_hash: crate::password::hash_password("not a real password")
                    .expect("hashing a constant works"),
            }),
        }
    }

    /// An authenticator with its own base delay that shares `other`'s
    /// penalty book, cache and hashing limit.
    pub fn sharing(other: &Authenticator, base_delay: Duration) -> Authenticator {
        Authenticator {
            directory: Arc::clone(&other.directory),
            schedule: Schedule::new(base_delay),
            shared: Arc::clone(&other.shared),
        }
    }

    /// The node's lanes and failing addresses, shared by every protocol:
    /// accept loops ask it which addresses to hold to fewer connections.
    pub fn gate(&self) -> Arc<LoginGate> {
        Arc::clone(&self.shared.gate)
    }

    /// Whether `password` is the one that last succeeded for `account` on
    /// this node.
    fn cached(&self, account: Option<&AccountEntry>, digest: &[u8; 32]) -> bool {
        account.is_some_and(|a| {
            self.shared
                .verified
                .lock()
                .expect("auth cache lock")
                .get(&a.address)
                .is_some_and(|(hash, d)| *hash == a.password_hash && d == digest)
        })
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
        let client_key = PenaltyKey::client(ip);
        let account_key = PenaltyKey::account(address);
        let keys = [client_key.clone(), account_key.clone()];
        let book = &self.shared.book;
        // A success with a password checked now clears the account's
        // failures (its owner mistyped, then got it right), unless it is
        // under attack: then the count stands, or the owner's every login
        // would give the guessers fresh turns. A success from the cache
        // proves nothing new and clears nothing. A shared book is asked
        // only when the account had failures, so a login nobody penalised
        // costs one round trip (the turn), and a login from the cache none.
        let mut clear_account = false;
        let mut lane = None;
        let ok = if self.cached(account.as_ref(), &digest) {
            true
        } else {
            let gate = &self.shared.gate;
            let client_lane = match gate.enter(&client_key).await {
                Ok(entered) => entered,
                Err(_) => return Err(self.crowded(ip, address, &client_key).await),
            };
            let Ok(account_lane) = gate.queue(&account_key).await else {
                self.attacked(
                    &account_key,
                    "attempts for it from many addresses wait in line",
                );
                return Err(self.throttled(ip, address, &client_key, "throttled"));
            };
            lane = Some((client_lane, account_lane));
            // The attempt ahead in the lane may have been this password's
            // own success (a client opening several connections at once).
            if self.cached(account.as_ref(), &digest) {
                return account.ok_or(AuthFailure::BadCredentials);
            }
            let penalised = self.take_turn(ip, address, &keys).await?;
            clear_account = penalised.contains(&account_key);
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
                if clear_account && !self.under_attack(&account_key).await {
                    if let Err(e) = book.clear(&account_key).await {
                        // The password was right: refusing the login now
                        // would protect nothing. The count ages out.
                        tracing::warn!(error = %e, user = %address, "clearing an account's failed logins failed");
                    }
                }
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
                let behind = self.shared.gate.waiting(&client_key);
                self.shared.gate.failed(&client_key, 1 + behind);
                let delay = self.record_failure(&keys, behind).await;
                // The next attempt in the lane takes its turn now; this
                // one's answer waits out the delay.
                drop(lane);
                tokio::time::sleep(delay).await;
                Err(AuthFailure::BadCredentials)
            }
        }
    }

    /// Checks a bearer token for a client at `ip`, through the same lanes,
    /// turns and failure counts as a password ([`Authenticator::login`]):
    /// `check` answers the account the token stands for, `None` when it
    /// stands for none (unknown, revoked, malformed). A token names no
    /// account before it is checked, so its failures count against the
    /// client only.
    pub async fn token_login<F, Fut>(
        &self,
        ip: IpAddr,
        check: F,
    ) -> Result<AccountEntry, AuthFailure>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = crate::Result<Option<AccountId>>>,
    {
        let client_key = PenaltyKey::client(ip);
        let gate = &self.shared.gate;
        let lane = match gate.enter(&client_key).await {
            Ok(entered) => entered,
            Err(_) => return Err(self.crowded(ip, "(token)", &client_key).await),
        };
        // A token attempt has no account to take a turn for.
        self.take_turn(ip, "(token)", std::slice::from_ref(&client_key))
            .await?;
        let account = match check().await {
            Ok(found) => found.and_then(|id| self.directory.get().account_by_id(id).cloned()),
            Err(e) => {
                tracing::warn!(client = %ip, error = %e, "a bearer token could not be checked");
                return Err(AuthFailure::Unavailable);
            }
        };
        if let Some(account) = account {
            return Ok(account);
        }
        metrics::inc(&metrics::get().auth_failures, "reason", "token");
        let behind = gate.waiting(&client_key);
        gate.failed(&client_key, 1 + behind);
        let delay = self
            .record_failure(std::slice::from_ref(&client_key), behind)
            .await;
        drop(lane);
        tokio::time::sleep(delay).await;
        Err(AuthFailure::BadCredentials)
    }

    /// Whether `account` has [`ACCOUNT_ALERT`] failures or more now (an
    /// unreadable book counts as yes: the count then ages out).
    async fn under_attack(&self, account: &PenaltyKey) -> bool {
        let book = &self.shared.book;
        book.recent_failures(account, book.now())
            .await
            .map_or(true, |n| n >= ACCOUNT_ALERT)
    }

    /// An attempt from a failing address beside another of its attempts:
    /// counted as a failure of the address (not of the account it names:
    /// the password was not tried) and refused at once.
    async fn crowded(&self, ip: IpAddr, address: &str, client_key: &PenaltyKey) -> AuthFailure {
        self.shared.gate.failed(client_key, 1);
        let book = &self.shared.book;
        if let Err(e) = book
            .record_failure(std::slice::from_ref(client_key), book.now(), &self.schedule)
            .await
        {
            tracing::warn!(client = %ip, error = %e, "a refused login could not be counted");
        }
        tracing::debug!(client = %ip, user = %address, "login refused: another attempt from this address is being checked");
        self.throttled(ip, address, client_key, "parallel")
    }

    /// A refused attempt: counted, and logged in a fixed format an
    /// operator can feed to a firewall, at most once a minute per client
    /// (with how many were refused since).
    fn throttled(
        &self,
        ip: IpAddr,
        address: &str,
        client_key: &PenaltyKey,
        reason: &'static str,
    ) -> AuthFailure {
        metrics::inc(&metrics::get().auth_failures, "reason", reason);
        if let Some(refused) = self.shared.gate.refused(client_key) {
            tracing::warn!(client = %ip, user = %address, refused, "login throttled: too many recent failures");
        }
        AuthFailure::Throttled
    }

    /// Says once per penalty window that `account` is under attack.
    fn attacked(&self, account: &PenaltyKey, why: &str) {
        if !self.shared.gate.first_alert(account) {
            return;
        }
        let PenaltyKey::Account(user) = account else {
            return;
        };
        // A fixed format an operator can alert on.
        tracing::warn!(user = %user, reason = why, window_minutes = crate::penalties::PENALTY_WINDOW.as_secs() / 60, "account under attack: its logins are slowed; its owner's known password still works");
        metrics::get().auth_accounts_attacked.inc();
    }

    /// Waits for the attempt's turn; the keys that had failures. Refused
    /// when the turn is too far away, and when the book cannot be read.
    async fn take_turn(
        &self,
        ip: IpAddr,
        address: &str,
        keys: &[PenaltyKey],
    ) -> Result<Vec<PenaltyKey>, AuthFailure> {
        let book = &self.shared.book;
        match book.take_turn(keys, book.now(), &self.schedule).await {
            Ok(Turn::Granted { wait, penalised }) => {
                if wait > 0 {
                    tokio::time::sleep(Duration::from_millis(wait as u64)).await;
                }
                Ok(penalised)
            }
            Ok(Turn::Refused) => {
                if let Some(account) = keys.get(1) {
                    if book
                        .recent_failures(account, book.now())
                        .await
                        .is_ok_and(|n| n > 0)
                    {
                        self.attacked(account, "its next turn is too far off");
                    }
                }
                Err(self.throttled(ip, address, &keys[0], "throttled"))
            }
            Err(e) => {
                // Without the book a guess would go unthrottled on every
                // node at once, and checking passwords through a database
                // outage would only add argon2 to the load: refuse with a
                // temporary failure (every protocol has one, and clients
                // retry), without the "throttled" line, as the client did
                // nothing wrong.
                tracing::warn!(client = %ip, user = %address, error = %e, "login refused: failed logins cannot be counted");
                metrics::inc(&metrics::get().auth_failures, "reason", "unavailable");
                Err(AuthFailure::Unavailable)
            }
        }
    }

    /// Counts a failure against each key, and `behind` more against the
    /// client (its attempts that waited behind this one); how long to wait
    /// before answering it (the client's delay).
    async fn record_failure(&self, keys: &[PenaltyKey], behind: u32) -> Duration {
        let book = &self.shared.book;
        let now = book.now();
        let recorded = match book.record_failure(keys, now, &self.schedule).await {
            Ok(mut counts) if behind > 0 => {
                match keys.iter().position(|k| matches!(k, PenaltyKey::Client(_))) {
                    Some(i) => book
                        .record_failures(&keys[i], behind, now, &self.schedule)
                        .await
                        .map(|n| {
                            counts[i] = n;
                            counts
                        }),
                    None => Ok(counts),
                }
            }
            other => other,
        };
        let longest = match recorded {
            Ok(counts) => {
                for (key, &n) in keys.iter().zip(&counts) {
                    if matches!(key, PenaltyKey::Account(_)) && n >= ACCOUNT_ALERT {
                        self.attacked(
                            key,
                            "failed logins from any addresses passed the alert count",
                        );
                    }
                }
                keys.iter()
                    .zip(counts)
                    .filter(|(key, _)| matches!(key, PenaltyKey::Client(_)))
                    .map(|(_, n)| self.schedule.delay(n))
                    .max()
                    .unwrap_or(0)
            }
            Err(e) => {
                // The answer is the same (the password was wrong); it
                // comes as late as a persistent guesser's would.
                tracing::warn!(error = %e, "a failed login could not be counted");
                self.schedule.delay(u32::MAX)
            }
        };
        Duration::from_millis(longest.max(0) as u64)
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

    #[tokio::test]
    async fn penalty_doubles_per_failure_and_is_capped() {
        let a = auth(Duration::from_secs(1));
        let ip = [PenaltyKey::client("10.0.0.1".parse().unwrap())];
        let mut delays = Vec::new();
        for _ in 0..8 {
            delays.push(a.record_failure(&ip, 0).await.as_secs());
        }
        assert_eq!(delays, vec![1, 2, 4, 8, 16, 16, 16, 16]);
        let other = [PenaltyKey::client("10.0.0.2".parse().unwrap())];
        assert_eq!(a.record_failure(&other, 0).await, Duration::from_secs(1));
    }

    #[tokio::test]
    async fn parallel_attempts_of_a_failing_client_take_turns_then_are_refused() {
        let a = auth(Duration::from_secs(4));
        let book = &a.shared.book;
        let now = book.now();
        let ip = PenaltyKey::client("10.0.0.1".parse().unwrap());
        let account = PenaltyKey::account("a@example.org");
        let keys = [ip.clone(), account.clone()];
        let turn = |keys: &[PenaltyKey]| {
            let keys = keys.to_vec();
            async move { book.take_turn(&keys, now, &a.schedule).await.unwrap() }
        };
        // No failures yet: nobody waits.
        assert_eq!(
            turn(&keys).await,
            Turn::Granted {
                wait: 0,
                penalised: vec![]
            }
        );
        book.record_failure(&keys, now, &a.schedule).await.unwrap();
        // Twenty attempts at once each get a later turn, 4 s apart
        // (the delay after one failure), until the turns are too far off.
        let mut turns = Vec::new();
        for _ in 0..20 {
            turns.push(turn(&keys).await);
        }
        let granted: Vec<i64> = turns
            .iter()
            .filter_map(|t| match t {
                Turn::Granted { wait, .. } => Some(wait / 1000),
                Turn::Refused => None,
            })
            .collect();
        assert_eq!(granted, [4, 8, 12, 16, 20, 24, 28]);
        assert!(turns[7..].iter().all(|t| *t == Turn::Refused));
        // Another client trying the same account waits for it too.
        let other = PenaltyKey::client("10.9.9.9".parse().unwrap());
        assert_eq!(turn(&[other.clone(), account]).await, Turn::Refused);
        // A fresh client and account are not held back.
        let fresh = PenaltyKey::account("b@example.org");
        assert_eq!(
            turn(&[other, fresh]).await,
            Turn::Granted {
                wait: 0,
                penalised: vec![]
            }
        );
    }

    #[tokio::test]
    async fn success_clears_the_account_not_the_client() {
        let a = auth(Duration::ZERO);
        let shared = Authenticator::sharing(&a, Duration::ZERO);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        assert!(a.login(ip, "a@example.org", "wrong").await.is_err());
        assert!(shared.login(ip, "a@example.org", "right").await.is_ok());
        let book = &a.shared.book;
        let now = book.now();
        let account = PenaltyKey::account("a@example.org");
        assert_eq!(book.recent_failures(&account, now).await.unwrap(), 0);
        let client = PenaltyKey::client(ip);
        assert_eq!(book.recent_failures(&client, now).await.unwrap(), 1);
    }

    #[tokio::test]
    async fn an_account_under_attack_keeps_its_count_through_its_owners_logins() {
        let a = auth(Duration::ZERO);
        let owner: IpAddr = "10.0.0.1".parse().unwrap();
        assert!(a.login(owner, "a@example.org", "right").await.is_ok());
        for i in 0..ACCOUNT_ALERT {
            let guesser = IpAddr::from([10, 1, 0, i as u8]);
            assert!(a.login(guesser, "a@example.org", "wrong").await.is_err());
        }
        let book = &a.shared.book;
        let account = PenaltyKey::account("a@example.org");
        // The owner's known password gets in, from the cache, and clears
        // nothing.
        assert!(a.login(owner, "a@example.org", "right").await.is_ok());
        assert_eq!(
            book.recent_failures(&account, book.now()).await.unwrap(),
            ACCOUNT_ALERT
        );
        // Nor does a fresh check of the right password while under attack.
        a.shared.verified.lock().unwrap().clear();
        assert!(a.login(owner, "a@example.org", "right").await.is_ok());
        assert_eq!(
            book.recent_failures(&account, book.now()).await.unwrap(),
            ACCOUNT_ALERT
        );
    }
}
