//! The `[smtp]` section of the configuration.

use serde::Deserialize;

/// Limits and timeouts of the SMTP server. Every field has a default; the
/// example config lists them all.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SmtpConfig {
    /// Largest message accepted, in bytes (advertised with SIZE, RFC 1870).
    pub max_message_size: u64,
    /// Recipients per message; RFC 5321 §4.5.3.1.8 asks for at least 100.
    pub max_recipients: usize,
    /// Longest command line, in bytes, including CRLF (RFC 5321
    /// §4.5.3.1.4 sets 512; extensions make real commands longer).
    pub max_line_length: usize,
    /// Error replies after which the connection is closed.
    pub max_errors: u32,
    /// Commands allowed outside a mail transaction (NOOP, RSET, VRFY, HELP,
    /// EHLO...) before the connection is closed.
    pub max_junk_commands: u32,
    /// Concurrent connections from one client address.
    pub max_connections_per_ip: usize,
    /// Concurrent connections in all (each SMTP service counts its own:
    /// port 25, and submission on 587 and 465 together); past it new ones
    /// get `421 4.3.2`.
    pub max_connections: usize,
    /// Seconds to wait for a command (RFC 5321 §4.5.3.2.7: 5 minutes).
    pub command_timeout_secs: u64,
    /// Seconds to wait for each block of message data (§4.5.3.2.5: 3 min).
    pub data_timeout_secs: u64,
    /// Bytes per second a message transfer must average: DATA (and each
    /// BDAT chunk) may take `data_timeout_secs` plus one second per this
    /// many bytes received, so a trickling client cannot hold a connection
    /// for ever (Postfix's `smtpd_min_data_rate`). 0 turns it off.
    pub min_data_rate: u64,
    /// Rewrite the sender of mail forwarded to remote alias targets with
    /// SRS, and accept bounces to the rewritten addresses.
    pub srs: bool,
    /// The domain of rewritten addresses; default: the server's host name.
    /// Mail for it must reach this server.
    pub srs_domain: Option<String>,
}

impl Default for SmtpConfig {
    fn default() -> Self {
        SmtpConfig {
            max_message_size: 64 * 1024 * 1024,
            max_recipients: 100,
            max_line_length: 2048,
            max_errors: 20,
            max_junk_commands: 100,
            max_connections_per_ip: 50,
            max_connections: 5000,
            command_timeout_secs: 300,
            data_timeout_secs: 180,
            min_data_rate: 500,
            srs: true,
            srs_domain: None,
        }
    }
}
