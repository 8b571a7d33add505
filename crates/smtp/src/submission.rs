//! Message submission (RFC 6409) on the `submission` (587, STARTTLS) and
//! `submissions` (465, implicit TLS, RFC 8314) listeners: the same session
//! as port 25, with SMTP AUTH (RFC 4954: PLAIN and LOGIN) required before
//! MAIL, relaying to any domain once authenticated, the envelope sender
//! and `From:` limited to the account's own addresses, and per-account
//! rate limits.
//!
//! SCRAM-SHA-256 is not offered: it needs a salted PBKDF2 key stored per
//! account, and the store keeps only an argon2id hash; PLAIN and LOGIN
//! run only over TLS (or without it where `allow_plaintext_auth` says).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use store::{AccountEntry, Authenticator, Directory, Resolution};

/// Which sender addresses an authenticated account may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SenderCheck {
    /// Envelope sender and every `From:` address must be the account's.
    #[default]
    Strict,
    /// Only the envelope sender is checked.
    Envelope,
    /// No check.
    Off,
}

/// The `[submission]` configuration section.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SubmissionConfig {
    /// Accept AUTH PLAIN/LOGIN without TLS (otherwise only after
    /// STARTTLS or on the implicit-TLS listener).
    pub allow_plaintext_auth: bool,
    /// What an account may send as.
    pub sender_check: SenderCheck,
    /// Messages one account may submit per hour.
    pub max_messages_per_hour: u32,
    /// Recipients one account may name per hour, all messages together.
    pub max_recipients_per_hour: u32,
}

impl Default for SubmissionConfig {
    fn default() -> Self {
        SubmissionConfig {
            allow_plaintext_auth: false,
            sender_check: SenderCheck::Strict,
            max_messages_per_hour: 500,
            max_recipients_per_hour: 2000,
        }
    }
}

/// What a submission listener adds to the SMTP context.
pub struct Submission {
    /// The login check shared with the other protocols.
    pub auth: Arc<Authenticator>,
    /// Settings.
    pub config: SubmissionConfig,
    /// Per-account counts for the rate limits.
    pub rates: RateLimits,
}

impl Submission {
    /// Submission with these settings and login check.
    pub fn new(auth: Arc<Authenticator>, config: SubmissionConfig) -> Submission {
        Submission {
            auth,
            config,
            rates: RateLimits::default(),
        }
    }
}

/// Sliding one-hour windows of messages and recipients per account.
#[derive(Default)]
pub struct RateLimits {
    windows: Mutex<HashMap<store::AccountId, VecDeque<(Instant, u32)>>>,
}

/// The window the limits count over.
const WINDOW: Duration = Duration::from_secs(3600);

impl RateLimits {
    /// Counts one message with `recipients` recipients for `account` if
    /// that stays within the limits; false (nothing counted) otherwise.
    pub fn take(
        &self,
        account: store::AccountId,
        recipients: u32,
        max_messages: u32,
        max_recipients: u32,
        now: Instant,
    ) -> bool {
        let mut map = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let window = map.entry(account).or_default();
        while window
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) >= WINDOW)
        {
            window.pop_front();
        }
        let messages = window.len() as u32;
        let rcpts: u32 = window.iter().map(|(_, n)| n).sum();
        if messages + 1 > max_messages || rcpts + recipients > max_recipients {
            return false;
        }
        window.push_back((now, recipients));
        true
    }
}

/// Whether `account` may use `address` as a sender: its own address, a
/// `+tag` form of it, or an alias that delivers to it.
pub fn may_send_as(directory: &Directory, account: &AccountEntry, address: &str) -> bool {
    match directory.resolve(address) {
        Resolution::Deliver { mailboxes, .. } => mailboxes.contains(&account.inbox),
        _ => false,
    }
}

/// Decodes an AUTH PLAIN response (RFC 4616), as every protocol does
/// ([`store::decode_plain`]).
pub fn decode_plain(response: &str) -> Option<(String, String)> {
    store::decode_plain(response).ok()
}

/// Decodes one base64 line of AUTH LOGIN.
pub fn decode_line(line: &str) -> Option<String> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(line.trim())
        .ok()?;
    String::from_utf8(raw).ok()
}

/// Base64 of a server challenge.
pub fn encode(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_responses_are_decoded() {
        let b = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
        assert_eq!(
            decode_plain(&b(b"\0bob@example.org\0secret")),
            Some(("bob@example.org".into(), "secret".into()))
        );
        assert_eq!(
            decode_plain(&b(b"bob@example.org\0bob@example.org\0pw")),
            Some(("bob@example.org".into(), "pw".into()))
        );
        assert_eq!(
            decode_plain(&b(b"eve@x\0bob@x\0pw")),
            None,
            "acting as another"
        );
        assert_eq!(decode_plain(&b(b"\0\0pw")), None);
        assert_eq!(decode_plain(&b(b"no nul at all")), None);
        assert_eq!(decode_plain("***"), None);
        assert_eq!(decode_line(&encode("hello")).as_deref(), Some("hello"));
    }

    #[test]
    fn rate_limits_hold_over_a_sliding_hour() {
        let r = RateLimits::default();
        let t0 = Instant::now();
        assert!(r.take(1, 3, 2, 5, t0));
        assert!(!r.take(1, 3, 2, 5, t0), "6 recipients > 5");
        assert!(r.take(1, 2, 2, 5, t0));
        assert!(!r.take(1, 1, 2, 5, t0), "3 messages > 2");
        assert!(r.take(2, 1, 2, 5, t0), "another account has its own");
        assert!(r.take(1, 1, 2, 5, t0 + WINDOW), "an hour later");
    }

    proptest! {
        #[test]
        fn sasl_decoding_never_panics(s in "\\PC{0,64}") {
            let _ = decode_plain(&s);
            let _ = decode_line(&s);
        }
    }
}
