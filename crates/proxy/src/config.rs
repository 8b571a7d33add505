//! One `[[proxy]]` entry of the configuration file.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

/// The protocol a proxy entry speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// SMTP (RFC 5321): messages are scanned on their way to the upstream.
    Smtp,
    /// POP3 (RFC 1939): messages are scanned on their way to the client.
    Pop3,
}

/// TLS between clients and the proxy, with the server's certificate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientTls {
    /// Plain text only.
    None,
    /// Offered with STARTTLS (SMTP) or STLS (POP3); the proxy does the
    /// handshake itself, the upstream never sees the command.
    #[default]
    Starttls,
    /// A TLS handshake first (RFC 8314: ports 465 and 995).
    Implicit,
}

/// TLS between the proxy and the upstream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamTls {
    /// Plain text (an upstream on loopback or a private network).
    #[default]
    None,
    /// STARTTLS/STLS right after the greeting; a refusal fails the
    /// connection.
    Starttls,
    /// A TLS handshake first.
    Implicit,
}

/// How the upstream learns the real client's address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientAddress {
    /// It does not: it sees the proxy's address.
    #[default]
    None,
    /// Postfix's XCLIENT command (SMTP only; the upstream must list the
    /// proxy in `smtpd_authorized_xclient_hosts`).
    Xclient,
    /// The PROXY protocol version 2 header before anything else (Postfix
    /// `smtpd_upstream_proxy_protocol = haproxy`, Dovecot `haproxy = yes`).
    ProxyV2,
}

/// The `upstream` of a transparent entry.
pub const ORIGINAL_DESTINATION: &str = "original-destination";

/// One `[[proxy]]` entry: a listener and the server it forwards to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyConfig {
    /// `smtp` or `pop3`.
    pub protocol: Protocol,
    /// Where clients connect.
    pub listen: SocketAddr,
    /// The server behind the proxy, `host:port`; or
    /// [`ORIGINAL_DESTINATION`]: each connection goes where the client sent
    /// it before a firewall redirected it here (Linux only).
    pub upstream: String,
    /// TLS with clients: `none`, `starttls` (default) or `implicit`.
    #[serde(default)]
    pub tls: ClientTls,
    /// TLS with the upstream: `none` (default), `starttls` or `implicit`.
    #[serde(default)]
    pub upstream_tls: UpstreamTls,
    /// Check the upstream's certificate (default true).
    #[serde(default = "yes")]
    pub upstream_verify: bool,
    /// A PEM file of CA certificates the upstream's certificate is checked
    /// against, in place of the public roots.
    #[serde(default)]
    pub upstream_ca_file: Option<PathBuf>,
    /// The name the upstream's certificate must carry; default the host
    /// part of `upstream`.
    #[serde(default)]
    pub upstream_name: Option<String>,
    /// `none` (default), `xclient` or `proxy-v2`.
    #[serde(default)]
    pub client_address: ClientAddress,
    /// Simultaneous connections from one client address.
    #[serde(default = "per_ip")]
    pub max_connections_per_ip: usize,
    /// Simultaneous connections in all.
    #[serde(default = "total")]
    pub max_connections: usize,
    /// Seconds either side may stay silent when it is its turn.
    #[serde(default = "timeout")]
    pub timeout_secs: u64,
    /// Seconds to connect to the upstream (and finish its TLS handshake).
    #[serde(default = "connect_timeout")]
    pub connect_timeout_secs: u64,
    /// SMTP: keep an upstream connection open after a client session that
    /// ended cleanly, for the next client (default true; pool.rs says
    /// when one is kept). Never with `xclient`, `proxy-v2` or
    /// `original-destination`.
    #[serde(default = "yes")]
    pub upstream_reuse: bool,
}

fn yes() -> bool {
    true
}
fn per_ip() -> usize {
    20
}
fn total() -> usize {
    1000
}
fn timeout() -> u64 {
    300
}
fn connect_timeout() -> u64 {
    10
}

/// A `[[proxy]]` entry that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A key has a value that does not fit the others.
    #[error("key `proxy.{key}` ({listen}): {why}")]
    Invalid {
        /// The key.
        key: &'static str,
        /// The entry's listen address, to tell entries apart.
        listen: SocketAddr,
        /// What is wrong.
        why: String,
    },
}

impl ProxyConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key, why: &str| ConfigError::Invalid {
            key,
            listen: self.listen,
            why: why.to_string(),
        };
        if self.transparent() {
            if !cfg!(target_os = "linux") {
                return Err(bad(
                    "upstream",
                    "original-destination needs Linux (SO_ORIGINAL_DST)",
                ));
            }
        } else if self.upstream_host().is_none() {
            return Err(bad(
                "upstream",
                "expected host:port or \"original-destination\"",
            ));
        }
        if self.protocol == Protocol::Pop3 && self.client_address == ClientAddress::Xclient {
            return Err(bad(
                "client_address",
                "XCLIENT is an SMTP command; use proxy-v2 for POP3",
            ));
        }
        if self.timeout_secs == 0 || self.connect_timeout_secs == 0 {
            return Err(bad("timeout_secs", "timeouts must be at least one second"));
        }
        if self.max_connections_per_ip == 0 || self.max_connections == 0 {
            return Err(bad("max_connections", "limits must be at least 1"));
        }
        Ok(())
    }

    /// Whether client sessions may share upstream connections, one
    /// after another: SMTP only, and not when the connection speaks for
    /// one client (XCLIENT, the PROXY header) or goes where one client
    /// was going.
    pub fn reuses_upstream(&self) -> bool {
        self.upstream_reuse
            && self.protocol == Protocol::Smtp
            && self.client_address == ClientAddress::None
            && !self.transparent()
    }

    /// Whether connections go to their original destination (after a
    /// firewall redirect) instead of one configured upstream.
    pub fn transparent(&self) -> bool {
        self.upstream == ORIGINAL_DESTINATION
    }

    /// The host part of `upstream` (brackets of an IPv6 literal removed).
    pub fn upstream_host(&self) -> Option<&str> {
        let (host, port) = self.upstream.rsplit_once(':')?;
        port.parse::<u16>().ok()?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        (!host.is_empty()).then_some(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ProxyConfig, String> {
        let c: ProxyConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }

    #[test]
    fn defaults_and_names() {
        let c = parse(
            "protocol = \"smtp\"\nlisten = \"127.0.0.1:10025\"\nupstream = \"127.0.0.1:25\"\n",
        )
        .unwrap();
        assert_eq!(c.tls, ClientTls::Starttls);
        assert_eq!(c.upstream_tls, UpstreamTls::None);
        assert_eq!(c.client_address, ClientAddress::None);
        assert!(c.upstream_verify);
        assert!(c.reuses_upstream());
        assert_eq!(c.upstream_host(), Some("127.0.0.1"));
        let c = parse(
            "protocol = \"pop3\"\nlisten = \"127.0.0.1:1110\"\nupstream = \"[::1]:110\"\nclient_address = \"proxy-v2\"\nupstream_tls = \"implicit\"\n",
        )
        .unwrap();
        assert_eq!(c.upstream_host(), Some("::1"));
        assert_eq!(c.client_address, ClientAddress::ProxyV2);
        assert!(!c.reuses_upstream());
        assert!(!c.transparent());
        let c = parse(
            "protocol = \"smtp\"\nlisten = \"0.0.0.0:10025\"\nupstream = \"original-destination\"\n",
        )
        .unwrap();
        assert!(c.transparent());
        assert_eq!(c.upstream_host(), None);
    }

    #[test]
    fn bad_entries_name_the_key() {
        let e = parse("protocol = \"pop3\"\nlisten = \"127.0.0.1:1\"\nupstream = \"h:1\"\nclient_address = \"xclient\"\n").unwrap_err();
        assert!(e.contains("proxy.client_address"), "{e}");
        let e = parse("protocol = \"smtp\"\nlisten = \"127.0.0.1:1\"\nupstream = \"nohost\"\n")
            .unwrap_err();
        assert!(e.contains("proxy.upstream"), "{e}");
        let e = parse(
            "protocol = \"smtp\"\nlisten = \"127.0.0.1:1\"\nupstream = \"h:1\"\nmystery = 1\n",
        )
        .unwrap_err();
        assert!(e.contains("mystery"), "{e}");
    }
}
