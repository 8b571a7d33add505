//! The configuration file (TOML). Every key is documented with its default
//! in `sluice.example.toml` at the top of the repository.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use serde::Deserialize;

/// The whole configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Our host name: in greetings, `Received:` fields, the TLS certificate.
    pub hostname: String,
    /// Where the database and generated files live.
    pub data_dir: PathBuf,
    /// Listeners; a key left out is a listener that is off.
    pub listen: Listen,
    /// Certificate and key; without them a self-signed pair is generated.
    pub tls: TlsConfig,
    /// Store tuning.
    pub store: StoreConfig,
    /// SMTP limits.
    pub smtp: smtp::SmtpConfig,
    /// POP3 limits.
    pub pop3: pop3::Pop3Config,
    /// Logging.
    pub log: LogConfig,
}

/// One address or a list of them.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(untagged)]
pub enum Addresses {
    /// `key = "127.0.0.1:25"`
    One(SocketAddr),
    /// `key = ["127.0.0.1:25", "[::1]:25"]`
    Many(Vec<SocketAddr>),
    /// Not configured.
    #[default]
    #[serde(skip)]
    Off,
}

impl Addresses {
    /// The addresses, empty when off.
    pub fn list(&self) -> Vec<SocketAddr> {
        match self {
            Addresses::One(a) => vec![*a],
            Addresses::Many(v) => v.clone(),
            Addresses::Off => vec![],
        }
    }
}

/// `[listen]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Listen {
    /// SMTP for incoming mail (production: port 25).
    pub smtp: Addresses,
    /// Message submission (587).
    pub submission: Addresses,
    /// IMAP with STARTTLS (143).
    pub imap: Addresses,
    /// IMAP over implicit TLS (993).
    pub imaps: Addresses,
    /// POP3 with STLS (110).
    pub pop3: Addresses,
    /// POP3 over implicit TLS (995).
    pub pop3s: Addresses,
    /// Webmail (443 behind TLS).
    pub http: Addresses,
}

/// `[tls]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// PEM certificate chain.
    pub cert: Option<PathBuf>,
    /// PEM private key.
    pub key: Option<PathBuf>,
}

/// `[store]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// Share one fsync among concurrent deliveries.
    pub group_commit: bool,
    /// Read connections to the database.
    pub readers: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            group_commit: true,
            readers: 4,
        }
    }
}

/// `[log]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A tracing filter: `info`, `debug`, `smtp=debug,info`...
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
        }
    }
}

impl Default for Config {
    /// The local trial setup: everything on 127.0.0.1, high ports.
    fn default() -> Self {
        Config {
            hostname: "localhost".into(),
            data_dir: PathBuf::from("./sluice-data"),
            listen: Listen {
                smtp: Addresses::One("127.0.0.1:2525".parse().expect("literal")),
                pop3: Addresses::One("127.0.0.1:1110".parse().expect("literal")),
                ..Listen::default()
            },
            tls: TlsConfig::default(),
            store: StoreConfig::default(),
            smtp: smtp::SmtpConfig::default(),
            pop3: pop3::Pop3Config::default(),
            log: LogConfig::default(),
        }
    }
}

/// Parses a configuration text. Errors name the offending key.
pub fn parse(text: &str) -> anyhow::Result<Config> {
    // A file without a [listen] table keeps the default listeners; with
    // one, exactly the keys it has are on.
    let has_listen = text
        .parse::<toml::Table>()
        .map(|t| t.contains_key("listen"))
        .unwrap_or(false);
    let de = toml::Deserializer::new(text);
    let mut config: Config = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = inner.message().to_string();
        if path.is_empty() || path == "." {
            anyhow::anyhow!("{message}")
        } else {
            anyhow::anyhow!("key `{path}`: {message}")
        }
    })?;
    if !has_listen {
        config.listen = Config::default().listen;
    }
    validate(&config)?;
    Ok(config)
}

fn validate(c: &Config) -> anyhow::Result<()> {
    if c.hostname.is_empty() || c.hostname.contains(char::is_whitespace) {
        bail!("key `hostname`: must be a host name, got {:?}", c.hostname);
    }
    for (key, addrs) in [
        ("submission", &c.listen.submission),
        ("imap", &c.listen.imap),
        ("imaps", &c.listen.imaps),
        ("http", &c.listen.http),
    ] {
        if !addrs.list().is_empty() {
            bail!(
                "key `listen.{key}`: this listener is not available in this version of Sluice yet"
            );
        }
    }
    if c.tls.cert.is_some() != c.tls.key.is_some() {
        bail!("key `tls`: set both `cert` and `key`, or neither");
    }
    if c.smtp.max_line_length < 512 {
        bail!("key `smtp.max_line_length`: must be at least 512 (RFC 5321 §4.5.3.1.4)");
    }
    if c.smtp.max_recipients == 0 {
        bail!("key `smtp.max_recipients`: must be at least 1");
    }
    if c.store.readers == 0 {
        bail!("key `store.readers`: must be at least 1");
    }
    tracing_subscriber::EnvFilter::try_new(&c.log.level)
        .map_err(|e| anyhow::anyhow!("key `log.level`: {e}"))?;
    Ok(())
}

/// Loads the configuration: the file if given, else the defaults; then
/// `--data` overrides `data_dir`.
pub fn load(file: Option<&Path>, data: Option<&Path>) -> anyhow::Result<Config> {
    let mut config = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read config {}", path.display()))?;
            parse(&text).with_context(|| format!("config {}", path.display()))?
        }
        None => Config::default(),
    };
    if let Some(d) = data {
        config.data_dir = d.to_path_buf();
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_config_parses() {
        let text = include_str!("../../../sluice.example.toml");
        let c = parse(text).unwrap();
        assert_eq!(c.listen.smtp.list().len(), 1);
    }

    #[test]
    fn one_or_many_addresses() {
        let c =
            parse("[listen]\nsmtp = \"127.0.0.1:25\"\npop3 = [\"127.0.0.1:110\", \"[::1]:110\"]\n")
                .unwrap();
        assert_eq!(c.listen.smtp.list().len(), 1);
        assert_eq!(c.listen.pop3.list().len(), 2);
        assert!(c.listen.pop3s.list().is_empty());
    }

    #[test]
    fn no_listen_table_keeps_defaults() {
        let c = parse("hostname = \"mx.example.org\"\n").unwrap();
        assert_eq!(
            c.listen.smtp.list(),
            vec!["127.0.0.1:2525".parse().unwrap()]
        );
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let e = parse("[smtp]\nmax_recipientz = 5\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_recipientz"), "{e}");
        let e = parse("[listen]\nsmtp = \"not an address\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("listen.smtp"), "{e}");
        let e = parse("[smtp]\nmax_message_size = \"big\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("smtp.max_message_size"), "{e}");
        let e = parse("[log]\nlevel = \"[[\"\n").unwrap_err().to_string();
        assert!(e.contains("log.level"), "{e}");
        let e = parse("[listen]\nimap = \"127.0.0.1:143\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("listen.imap"), "{e}");
    }
}
