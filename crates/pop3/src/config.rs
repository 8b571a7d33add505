//! The `[pop3]` section of the configuration.

use serde::Deserialize;

/// Limits and timeouts of the POP3 server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Pop3Config {
    /// Concurrent connections from one client address.
    pub max_connections_per_ip: usize,
    /// Concurrent connections in all (pop3 and pop3s together); past it
    /// new ones get `-ERR [SYS/TEMP]`.
    pub max_connections: usize,
    /// Seconds of inactivity before the session is closed (RFC 1939 §3:
    /// at least 10 minutes). A session that has not logged in by then is
    /// closed too, however busy it kept itself.
    pub idle_timeout_secs: u64,
    /// Failed logins in one session before it is closed.
    pub max_auth_failures: u32,
    /// Seconds before a failed login is answered; doubled for each recent
    /// failure from the same address.
    pub auth_failure_delay_secs: u64,
    /// Accept passwords over unencrypted connections from non-loopback
    /// clients. Off: such clients must use STLS or the pop3s port first.
    pub allow_plaintext_auth: bool,
}

impl Default for Pop3Config {
    fn default() -> Self {
        Pop3Config {
            max_connections_per_ip: 20,
            max_connections: 5000,
            idle_timeout_secs: 600,
            max_auth_failures: 3,
            auth_failure_delay_secs: 1,
            allow_plaintext_auth: false,
        }
    }
}
