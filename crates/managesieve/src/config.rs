//! The `[managesieve]` section of the configuration.

use serde::Deserialize;

/// Limits and timeouts of the ManageSieve server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ManageSieveConfig {
    /// Largest script, in bytes; a bigger upload gets
    /// `NO (QUOTA/MAXSIZE)` (RFC 5804 §1.3).
    pub max_script_size: u64,
    /// Scripts per account; one more gets `NO (QUOTA/MAXSCRIPTS)`.
    pub max_scripts: usize,
    /// Seconds from connecting to a successful login; past it the session
    /// is closed, however busy it keeps itself.
    pub login_timeout_secs: u64,
    /// Seconds of inactivity after login before the session is closed.
    pub idle_timeout_secs: u64,
    /// Concurrent connections from one client address.
    pub max_connections_per_ip: usize,
    /// Concurrent connections in all; past it new ones get
    /// `BYE (TRYLATER)`.
    pub max_connections: usize,
    /// Failed logins in one session before it is closed.
    pub max_auth_failures: u32,
    /// Seconds before a failed login is answered; doubled for each recent
    /// failure from the same address or for the same account.
    pub auth_failure_delay_secs: u64,
    /// Accept passwords over unencrypted connections from non-loopback
    /// clients. Off: such clients must use STARTTLS first.
    pub allow_plaintext_auth: bool,
}

impl Default for ManageSieveConfig {
    fn default() -> Self {
        ManageSieveConfig {
            max_script_size: 65536,
            max_scripts: 32,
            login_timeout_secs: 60,
            idle_timeout_secs: 600,
            max_connections_per_ip: 10,
            max_connections: 1000,
            max_auth_failures: 3,
            auth_failure_delay_secs: 1,
            allow_plaintext_auth: false,
        }
    }
}
