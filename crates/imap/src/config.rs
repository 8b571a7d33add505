//! The `[imap]` section of the configuration.

use serde::Deserialize;

/// Limits and timeouts of the IMAP server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ImapConfig {
    /// Concurrent connections from one client address.
    pub max_connections_per_ip: usize,
    /// Concurrent connections in all (imap and imaps together); past it
    /// new ones get `* BYE [UNAVAILABLE]`.
    pub max_connections: usize,
    /// Seconds a logged-in session may stay silent (RFC 3501 §5.4: the
    /// autologout timer is at least 30 minutes; IDLE restarts it).
    pub idle_timeout_secs: u64,
    /// Seconds from connecting a session has to log in, in all: sending a
    /// byte now and then does not stretch it.
    pub login_timeout_secs: u64,
    /// Longest command, literals included, except an APPEND's message,
    /// which is streamed into the store.
    pub max_command_bytes: usize,
    /// Largest message APPEND accepts; a larger literal is refused with
    /// `[TOOBIG]` before the client sends it.
    pub max_message_bytes: u64,
    /// Failed logins in one session before it is closed.
    pub max_auth_failures: u32,
    /// Seconds before a failed login is answered; doubled for each recent
    /// failure from the same address.
    pub auth_failure_delay_secs: u64,
    /// Accept passwords over unencrypted connections from non-loopback
    /// clients. Off: such clients see LOGINDISABLED until STARTTLS.
    pub allow_plaintext_auth: bool,
}

impl Default for ImapConfig {
    fn default() -> Self {
        ImapConfig {
            max_connections_per_ip: 50,
            max_connections: 10000,
            idle_timeout_secs: 30 * 60,
            login_timeout_secs: 60,
            max_command_bytes: 64 * 1024,
            max_message_bytes: 64 * 1024 * 1024,
            max_auth_failures: 3,
            auth_failure_delay_secs: 1,
            allow_plaintext_auth: false,
        }
    }
}
