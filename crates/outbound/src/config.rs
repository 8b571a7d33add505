//! The `[outbound]` configuration section.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::tls_policy::TlsPolicyConfig;

/// Settings of outbound delivery; every key has a default.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutboundConfig {
    /// Whether `sluice serve` sends queued mail.
    pub enabled: bool,
    /// The port MX hosts are reached on (25; other values are for tests).
    pub mx_port: u16,
    /// Static routes: all mail for a domain goes to this address instead
    /// of the domain's MX hosts, e.g. `"example.net" = "192.0.2.7:25"`.
    pub routes: HashMap<String, SocketAddr>,
    /// Seconds to wait after each failed attempt, in order; the last one
    /// repeats. Default: 1m, 5m, 15m, 30m, 1h, 2h, 4h, 8h.
    pub retry_schedule: Vec<u64>,
    /// Seconds after which a message that could not be delivered is given
    /// up (default 5 days).
    pub max_age: u64,
    /// Seconds after which the sender of mail still waiting is told so,
    /// once (RFC 3464 "delayed"); 0 for never. Default 4 hours.
    pub delay_warning: u64,
    /// Connections to other servers at most, all destinations together.
    pub max_connections: usize,
    /// Connections one destination gets at first (Postfix's
    /// `initial_destination_concurrency`).
    pub initial_destination_concurrency: usize,
    /// Connections one destination gets at most: one more after each run
    /// that reached it, halved after one that could not.
    pub destination_concurrency: usize,
    /// Seconds to wait for the TCP connection.
    pub connect_timeout: u64,
    /// Seconds to wait for each reply (RFC 5321 §4.5.3.2 says 5 minutes;
    /// the end of data gets twice this).
    pub command_timeout: u64,
    /// Seconds a recipient stays leased to the node that claimed it for an
    /// attempt (default 15 minutes). The lease is what stops two nodes
    /// sending the same message at once; after a crash it is also how
    /// long the mail waits before another node (on PostgreSQL) takes it
    /// over. It should outlast one delivery run, or a slow run's mail can
    /// be sent a second time by another node.
    pub lease_secs: u64,
    /// TLS policy: MTA-STS, DANE.
    pub tls: TlsPolicyConfig,
    /// A relay (smarthost) all mail goes through, for sites that may not
    /// send to port 25 themselves.
    pub relay: RelayConfig,
}

/// How the connection to the relay is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RelayTls {
    /// STARTTLS, required, certificate checked (port 587).
    Starttls,
    /// TLS from the first byte, certificate checked (port 465, RFC 8314).
    Implicit,
    /// Clear text allowed (a relay on a trusted network); never with a
    /// login.
    None,
}

/// The `[outbound.relay]` section: a relay every message goes through
/// (static routes still win), with AUTH when it asks for a login.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RelayConfig {
    /// Host name of the relay, which its certificate must carry; empty
    /// (default): no relay, mail goes to each domain's MX hosts.
    pub host: String,
    /// Its port (default 587).
    pub port: u16,
    /// "starttls" (default), "implicit" or "none".
    pub tls: RelayTls,
    /// The account to log in with (AUTH PLAIN, or LOGIN when only that is
    /// offered); none: no login.
    pub username: Option<String>,
    /// File whose first line is the password, so that the configuration
    /// holds no secret.
    pub password_file: Option<PathBuf>,
    /// PEM file of CA certificates trusted for the relay's certificate in
    /// addition to the web PKI roots (a private CA).
    pub ca_file: Option<PathBuf>,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            host: String::new(),
            port: 587,
            tls: RelayTls::Starttls,
            username: None,
            password_file: None,
            ca_file: None,
        }
    }
}

impl RelayConfig {
    /// Whether a relay is configured.
    pub fn enabled(&self) -> bool {
        !self.host.is_empty()
    }

    /// Reads the password; `None` without a login.
    pub fn password(&self) -> Result<Option<String>, String> {
        let Some(path) = &self.password_file else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("outbound.relay.password_file {}: {e}", path.display()))?;
        let password = text.lines().next().unwrap_or_default().to_string();
        if password.is_empty() {
            return Err(format!(
                "outbound.relay.password_file {}: the first line is empty",
                path.display()
            ));
        }
        Ok(Some(password))
    }
}

impl Default for OutboundConfig {
    fn default() -> Self {
        OutboundConfig {
            enabled: true,
            mx_port: 25,
            routes: HashMap::new(),
            retry_schedule: vec![60, 300, 900, 1800, 3600, 7200, 14400, 28800],
            max_age: 5 * 24 * 3600,
            delay_warning: 4 * 3600,
            max_connections: 20,
            initial_destination_concurrency: 2,
            destination_concurrency: 10,
            connect_timeout: 30,
            command_timeout: 300,
            lease_secs: 15 * 60,
            tls: TlsPolicyConfig::default(),
            relay: RelayConfig::default(),
        }
    }
}

impl OutboundConfig {
    /// Seconds to wait after the `attempts`-th failed attempt (1-based).
    pub fn retry_delay(&self, attempts: u32) -> u64 {
        let i = (attempts.max(1) as usize - 1).min(self.retry_schedule.len().saturating_sub(1));
        self.retry_schedule.get(i).copied().unwrap_or(3600)
    }

    /// Checks the values a parser cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.retry_schedule.is_empty() || self.retry_schedule.contains(&0) {
            return Err("outbound.retry_schedule needs at least one delay, none of them 0".into());
        }
        if self.lease_secs == 0 {
            return Err("outbound.lease_secs must be at least 1".into());
        }
        if self.max_connections == 0 {
            return Err("outbound.max_connections must be at least 1".into());
        }
        if self.destination_concurrency == 0 || self.initial_destination_concurrency == 0 {
            return Err(
                "outbound.destination_concurrency and initial_destination_concurrency must be at least 1"
                    .into(),
            );
        }
        let relay = &self.relay;
        if relay.username.is_some() != relay.password_file.is_some() {
            return Err("outbound.relay: username and password_file go together".into());
        }
        if relay.username.is_some() && !relay.enabled() {
            return Err("outbound.relay: a username needs a host".into());
        }
        if relay.username.is_some() && relay.tls == RelayTls::None {
            return Err(
                "outbound.relay: a password is never sent in clear text; use tls = \"starttls\" or \"implicit\""
                    .into(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_repeats_its_last_delay() {
        let c = OutboundConfig::default();
        assert_eq!(c.retry_delay(1), 60);
        assert_eq!(c.retry_delay(2), 300);
        assert_eq!(c.retry_delay(8), 28800);
        assert_eq!(c.retry_delay(30), 28800);
        assert!(c.validate().is_ok());
        let bad = OutboundConfig {
            retry_schedule: vec![],
            ..OutboundConfig::default()
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn a_lease_lasts_fifteen_minutes_unless_set_and_never_zero() {
        let parse = |text: &str| -> OutboundConfig { toml::from_str(text).unwrap() };
        assert_eq!(parse("").lease_secs, 900);
        let short = parse("lease_secs = 5\n");
        assert_eq!(short.lease_secs, 5);
        assert!(short.validate().is_ok());
        let zero = parse("lease_secs = 0\n").validate().unwrap_err();
        assert!(zero.contains("outbound.lease_secs"), "{zero}");
    }

    #[test]
    fn a_relay_login_needs_tls_and_both_halves() {
        let with = |relay: &str| -> Result<(), String> {
            let c: OutboundConfig =
                toml::from_str(&format!("[relay]\n{relay}")).map_err(|e| e.to_string())?;
            c.validate()
        };
        assert!(with("host = \"smtp.example.net\"\n").is_ok());
        assert!(with("host = \"r\"\nusername = \"u\"\npassword_file = \"/p\"\n").is_ok());
        assert!(with("host = \"r\"\nusername = \"u\"\n").is_err());
        assert!(with("username = \"u\"\npassword_file = \"/p\"\n").is_err());
        let clear =
            with("host = \"r\"\ntls = \"none\"\nusername = \"u\"\npassword_file = \"/p\"\n");
        assert!(clear.unwrap_err().contains("clear text"));
        assert!(with("host = \"r\"\ntls = \"sometimes\"\n").is_err());
    }
}
