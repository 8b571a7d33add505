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
    /// Who the server runs as after binding its ports.
    pub server: crate::privileges::ServerConfig,
    /// Where the database and generated files live.
    pub data_dir: PathBuf,
    /// Listeners; a key left out is a listener that is off.
    pub listen: Listen,
    /// Certificate and key; without them a self-signed pair is generated.
    pub tls: TlsConfig,
    /// Certificates from an ACME CA (Let's Encrypt), renewed in place.
    pub acme: AcmeConfig,
    /// Store tuning.
    pub store: StoreConfig,
    /// SMTP limits.
    pub smtp: smtp::SmtpConfig,
    /// POP3 limits.
    pub pop3: pop3::Pop3Config,
    /// IMAP limits.
    pub imap: imap::ImapConfig,
    /// ManageSieve limits.
    pub managesieve: managesieve::ManageSieveConfig,
    /// Content scanning of incoming mail.
    pub scan: ScanConfig,
    /// DNS blocklists checked in the SMTP gate.
    pub dnsbl: DnsblConfig,
    /// Webmail sessions and display limits.
    pub web: web::WebConfig,
    /// JMAP on the http/https listeners: its limits.
    pub jmap: jmap::JmapConfig,
    /// Message submission: AUTH, sender checks, rate limits.
    pub submission: smtp::SubmissionConfig,
    /// Sending mail to other servers: routes, retries, TLS policy.
    pub outbound: sluice_outbound::OutboundConfig,
    /// DKIM signing of what local domains send.
    pub dkim: sluice_outbound::DkimConfig,
    /// Checks of who may send for a domain (SPF), on incoming mail.
    pub auth_checks: smtp::AuthChecksConfig,
    /// Sieve scripts run at delivery.
    pub sieve: smtp::FilterConfig,
    /// The spam classifier.
    pub spam: smtp::SpamConfig,
    /// The DNS servers used for outbound mail (MX, TLSA, MTA-STS).
    pub dns: DnsConfig,
    /// Logging.
    pub log: LogConfig,
    /// Stream-scanning proxies in front of other servers (`[[proxy]]`).
    pub proxy: Vec<proxy::ProxyConfig>,
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

impl Config {
    /// Where clients reach each mail service: the host name and the port
    /// of the first address of each listener that is on.
    pub fn mail_services(&self) -> web::MailServices {
        let port = |a: &Addresses| a.list().first().map(SocketAddr::port);
        let l = &self.listen;
        web::MailServices {
            hostname: self.hostname.clone(),
            imap: port(&l.imap),
            imaps: port(&l.imaps),
            pop3: port(&l.pop3),
            pop3s: port(&l.pop3s),
            submission: port(&l.submission),
            submissions: port(&l.submissions),
        }
    }
}

/// `[dns]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct DnsConfig {
    /// Name servers to ask (`"127.0.0.1:53"` or a list); without it, the
    /// system's `/etc/resolv.conf`.
    pub resolver: Addresses,
}

/// `[listen]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Listen {
    /// SMTP for incoming mail (production: port 25).
    pub smtp: Addresses,
    /// Message submission with STARTTLS (587).
    pub submission: Addresses,
    /// Message submission over implicit TLS (465, RFC 8314).
    pub submissions: Addresses,
    /// IMAP with STARTTLS (143).
    pub imap: Addresses,
    /// IMAP over implicit TLS (993).
    pub imaps: Addresses,
    /// POP3 with STLS (110).
    pub pop3: Addresses,
    /// POP3 over implicit TLS (995).
    pub pop3s: Addresses,
    /// ManageSieve with STARTTLS (4190, RFC 5804).
    pub managesieve: Addresses,
    /// Webmail over plain HTTP (trial: 127.0.0.1:8080).
    pub http: Addresses,
    /// Webmail over HTTPS with the server's certificate (443).
    pub https: Addresses,
    /// Prometheus metrics (`/metrics`), `/healthz` and `/readyz` over
    /// plain HTTP, for a private address (off unless given).
    pub metrics: Addresses,
    /// ACME http-01 challenge answers (`/.well-known/acme-challenge/`)
    /// over plain HTTP; the CA asks on port 80.
    pub acme_http: Addresses,
}

/// `[acme]`: certificates from an ACME CA (RFC 8555).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AcmeConfig {
    /// Get and renew the certificate from the CA at all.
    pub enabled: bool,
    /// The CA's directory URL.
    pub directory: String,
    /// Addresses the CA may write to about the account (`admin@example.org`).
    pub contact: Vec<String>,
    /// Names the certificate is for; empty means `[hostname]`.
    pub domains: Vec<String>,
    /// A PEM root certificate that the CA's HTTPS is checked against
    /// instead of the system's roots (test CAs such as Pebble).
    pub ca_file: Option<PathBuf>,
    /// How the CA checks that we hold the names.
    pub challenge: AcmeChallenge,
    /// Renew when fewer than this many days are left.
    pub renew_before_days: u32,
}

/// The ACME challenge answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum AcmeChallenge {
    /// RFC 8737: a TLS handshake on port 443 (the `https` listener).
    #[default]
    #[serde(rename = "tls-alpn-01")]
    TlsAlpn01,
    /// RFC 8555 §8.3: an HTTP request on port 80 (the `acme_http` listener).
    #[serde(rename = "http-01")]
    Http01,
}

/// Let's Encrypt's production directory.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

impl Default for AcmeConfig {
    fn default() -> Self {
        AcmeConfig {
            enabled: false,
            directory: LETS_ENCRYPT.into(),
            contact: Vec::new(),
            domains: Vec::new(),
            ca_file: None,
            challenge: AcmeChallenge::TlsAlpn01,
            renew_before_days: 30,
        }
    }
}

impl AcmeConfig {
    /// The names to certify: `domains`, or the host name.
    pub fn names(&self, hostname: &str) -> Vec<String> {
        if self.domains.is_empty() {
            vec![hostname.to_string()]
        } else {
            self.domains.clone()
        }
    }
}

/// `[tls]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// PEM certificate chain.
    pub cert: Option<PathBuf>,
    /// PEM private key.
    pub key: Option<PathBuf>,
    /// Oldest TLS version the listeners take: "1.2" (default) or "1.3".
    /// TLS 1.0 and 1.1 are never offered.
    pub min_version: TlsVersion,
}

/// A TLS protocol version the listeners may be held to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum TlsVersion {
    /// TLS 1.2 and 1.3.
    #[default]
    #[serde(rename = "1.2")]
    Tls12,
    /// TLS 1.3 only.
    #[serde(rename = "1.3")]
    Tls13,
}

/// `[store]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// Share one fsync among concurrent deliveries.
    pub group_commit: bool,
    /// Read connections to the database.
    pub readers: usize,
    /// MiB the write-ahead log may grow to before it is checkpointed and
    /// cut back to nothing.
    pub wal_limit_mb: u64,
    /// MiB that must stay free on the data directory's disk for new mail
    /// to be taken: under it SMTP answers `452 4.3.1` at RCPT and IMAP
    /// APPEND a `NO`, before any data is sent; 0 leaves only the write
    /// errors themselves to say the disk is full.
    pub min_free_mb: u64,
    /// Where mail is kept: `sqlite` (a database in the data directory, the
    /// default) or `postgres` (a PostgreSQL database several nodes share).
    pub backend: StoreBackend,
    /// The PostgreSQL database, `postgres://USER@HOST:PORT/DBNAME`.
    pub url: Option<String>,
    /// A file whose first line is the PostgreSQL password. The variable
    /// `SLUICE_STORE_PASSWORD` is read when this is not set, so the
    /// password never has to be written in the configuration.
    pub password_file: Option<PathBuf>,
    /// Connections each node keeps open to PostgreSQL.
    pub pool_size: usize,
    /// On PostgreSQL, seconds a message's text is kept after its last
    /// reference goes: a session on another node may still show it.
    pub release_grace_secs: u64,
    /// TLS to PostgreSQL (libpq's `sslmode` names): `disable`, `require`
    /// (encrypted, the certificate not checked) or `verify-full` (the
    /// certificate chains to `ca_file` and names the URL's host). Unset:
    /// the URL's `sslmode=`, else `disable`.
    pub tls: Option<StoreTls>,
    /// The CA certificates (PEM) `tls = "verify-full"` trusts; unset, the
    /// Mozilla roots built in.
    pub ca_file: Option<PathBuf>,
}

/// `store.tls` (and `sluice migrate --tls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum StoreTls {
    Disable,
    Require,
    VerifyFull,
}

impl From<StoreTls> for store::PgTls {
    fn from(t: StoreTls) -> store::PgTls {
        match t {
            StoreTls::Disable => store::PgTls::Disable,
            StoreTls::Require => store::PgTls::Require,
            StoreTls::VerifyFull => store::PgTls::VerifyFull,
        }
    }
}

/// `store.backend`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreBackend {
    #[default]
    Sqlite,
    Postgres,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            group_commit: true,
            readers: 4,
            wal_limit_mb: 64,
            min_free_mb: 64,
            backend: StoreBackend::Sqlite,
            url: None,
            password_file: None,
            pool_size: 16,
            release_grace_secs: 600,
            tls: None,
            ca_file: None,
        }
    }
}

/// `[scan]`: the built-in streaming scanner in the SMTP data stage.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScanConfig {
    /// Scan incoming mail at all.
    pub enabled: bool,
    /// `builtin` (Sluice's streaming scanner) or `clamd` (each decoded
    /// part streamed to a running clamd).
    pub engine: ScanEngine,
    /// Where clamd listens, for `engine = "clamd"`: `host:port` or the
    /// path of its Unix socket.
    pub clamd: String,
    /// Seconds to wait on clamd for any one read or write.
    pub clamd_timeout_secs: u64,
    /// Directories of ClamAV signature files (`.ndb`, `.ldb`, `.hdb`, `.hsb`,
    /// `.mdb`, `.msb`, `.cdb`, `.ftm`, `.ign2`, `.fp`, `.sfp`, `.cvd`, `.cld`);
    /// the EICAR test signature is always loaded.
    pub databases: Vec<PathBuf>,
    /// What to do when a signature matches.
    pub on_infected: smtp::Action,
    /// What to do when a limit (nesting, size, ratio, entries, parts) stops
    /// the scan before the end.
    pub on_limit: smtp::Action,
    /// What to do with encrypted archive entries, which cannot be scanned.
    pub on_encrypted: smtp::Action,
    /// Deepest archive nesting scanned.
    pub max_depth: usize,
    /// Decompressed bytes per message, all archives together.
    pub max_unpacked_bytes: u64,
    /// Largest expansion ratio of one compressed stream (zip bombs).
    pub max_ratio: u64,
    /// Archive entries per message.
    pub max_entries: u64,
    /// MIME parts per message.
    pub max_parts: u64,
    /// Deepest MIME nesting.
    pub max_mime_depth: usize,
    /// Bytes of each file that PCRE and byte-compare subsignatures of
    /// logical signatures (`.ldb`) can see.
    pub max_regex_window: usize,
    /// Largest OLE2 file (Office 97-2003 document, `vbaProject.bin`) taken
    /// apart into its streams and macros; it is held in memory while it
    /// arrives, as its sectors can lie anywhere. Past it, `on_limit`.
    pub max_ole2_size: usize,
    /// Largest 7z or cab archive unpacked; it is held in memory while it
    /// arrives, as neither can be unpacked as it streams. Past it, `on_limit`.
    pub max_held_archive_size: usize,
    /// Report documents with VBA macros as
    /// `Heuristics.OLE2.ContainsMacros.VBA`, as clamd's `AlertOLE2Macros`.
    pub alert_macros: bool,
    /// Load the PUA signature files (`.ndu`, `.ldu`, `.hdu`, `.hsu`) too,
    /// as clamd's `DetectPUA`; off by default, as there.
    pub pua: bool,
}

impl Default for ScanConfig {
    fn default() -> Self {
        let limits = scan::Limits::default();
        ScanConfig {
            enabled: true,
            engine: ScanEngine::Builtin,
            clamd: "/run/clamav/clamd.ctl".into(),
            clamd_timeout_secs: 60,
            databases: Vec::new(),
            on_infected: smtp::Action::Reject,
            on_limit: smtp::Action::Reject,
            on_encrypted: smtp::Action::Reject,
            max_depth: limits.max_depth,
            max_unpacked_bytes: limits.max_unpacked_bytes,
            max_ratio: limits.max_ratio,
            max_entries: limits.max_entries,
            max_parts: limits.max_parts,
            max_mime_depth: limits.max_mime_depth,
            max_regex_window: limits.max_regex_window,
            max_ole2_size: limits.max_ole2_size,
            max_held_archive_size: limits.max_held_archive_size,
            alert_macros: limits.alert_macros,
            pua: false,
        }
    }
}

/// The scanning engine.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ScanEngine {
    /// Sluice's own.
    #[default]
    Builtin,
    /// A running clamd.
    Clamd,
}

impl ScanConfig {
    /// The clamd address as the client takes it.
    pub fn clamd_addr(&self) -> scan::clamd::ClamdAddr {
        if self.clamd.starts_with('/') {
            scan::clamd::ClamdAddr::Unix(PathBuf::from(&self.clamd))
        } else {
            scan::clamd::ClamdAddr::Tcp(self.clamd.clone())
        }
    }

    /// The signatures of `databases` (and the built-in EICAR one), loaded
    /// and logged.
    pub fn load_database(&self) -> anyhow::Result<scan::Database> {
        let start = std::time::Instant::now();
        let mut builder = scan::DatabaseBuilder::new();
        builder.pua(self.pua);
        for dir in &self.databases {
            builder
                .add_dir(dir)
                .with_context(|| format!("key `scan.databases`: {}", dir.display()))?;
        }
        let (db, report) = builder.build().context("key `scan.databases`")?;
        let loaded = crate::load_stats::Loaded {
            db,
            report,
            elapsed: start.elapsed(),
            memory: crate::load_stats::memory(),
        };
        let memory = loaded.memory.unwrap_or(crate::load_stats::Memory {
            rss_kib: 0,
            peak_kib: 0,
        });
        tracing::info!(
            body = loaded.db.body_signatures(),
            logical = loaded.db.logical_signatures(),
            hashes = loaded.db.hash_signatures(),
            load_ms = loaded.elapsed.as_millis() as u64,
            rss_kib = memory.rss_kib,
            peak_rss_kib = memory.peak_kib,
            report = %loaded.report,
            "scan signatures loaded: {}",
            loaded.cost()
        );
        Ok(loaded.db)
    }

    /// The scanner's limits from this section.
    pub fn limits(&self) -> scan::Limits {
        scan::Limits {
            max_depth: self.max_depth,
            max_unpacked_bytes: self.max_unpacked_bytes,
            max_ratio: self.max_ratio,
            max_entries: self.max_entries,
            max_parts: self.max_parts,
            max_mime_depth: self.max_mime_depth,
            max_regex_window: self.max_regex_window,
            max_ole2_size: self.max_ole2_size,
            max_held_archive_size: self.max_held_archive_size,
            alert_macros: self.alert_macros,
            encrypted: match self.on_encrypted {
                smtp::Action::Reject => scan::EncryptedPolicy::Reject,
                smtp::Action::Accept => scan::EncryptedPolicy::Allow,
            },
            ..scan::Limits::default()
        }
    }
}

/// `[dnsbl]`: blocklists checked when a client connects.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DnsblConfig {
    /// The DNS server to ask (a resolver, or a `sluice dnsbl serve`).
    pub resolver: Option<SocketAddr>,
    /// Zones to check; none means no DNSBL checks.
    pub zones: Vec<ZoneConfig>,
    /// A client whose summed zone weights reach this is refused.
    pub threshold: f64,
    /// Milliseconds all lookups of one client may take together; past it
    /// the connection proceeds as if not listed.
    pub budget_ms: u64,
    /// Longest time an answer is cached, whatever its TTL.
    pub ttl_cap_secs: u64,
    /// Refuse listed clients at connect (554 greeting) rather than at
    /// their first recipient.
    pub reject_at_connect: bool,
    /// Client addresses or ranges never checked (`192.0.2.0/24`).
    pub allow: Vec<String>,
}

impl Default for DnsblConfig {
    fn default() -> Self {
        DnsblConfig {
            resolver: None,
            zones: Vec::new(),
            threshold: 1.0,
            budget_ms: 2000,
            ttl_cap_secs: 3600,
            reject_at_connect: false,
            allow: Vec::new(),
        }
    }
}

/// One `[[dnsbl.zones]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneConfig {
    /// The zone, e.g. `zen.example.org`.
    pub name: String,
    /// What a listing adds to the score.
    #[serde(default = "one")]
    pub weight: f64,
    /// `classic` (RFC 5782, one query per address) or `bitmap` (one AAAA
    /// query per /25; only for servers that implement it, such as
    /// `sluice dnsbl serve`).
    #[serde(default)]
    pub mode: ZoneMode,
}

fn one() -> f64 {
    1.0
}

/// How a zone is queried.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ZoneMode {
    /// One A (and TXT) query per address.
    #[default]
    Classic,
    /// One AAAA query per /25.
    Bitmap,
}

impl DnsblConfig {
    /// The allow list, parsed.
    pub fn allow_list(&self) -> anyhow::Result<Vec<smtp::IpNet>> {
        self.allow
            .iter()
            .map(|a| {
                a.parse()
                    .map_err(|e| anyhow::anyhow!("key `dnsbl.allow`: {e}"))
            })
            .collect()
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
            server: crate::privileges::ServerConfig::default(),
            data_dir: PathBuf::from("./sluice-data"),
            listen: Listen {
                smtp: Addresses::One("127.0.0.1:2525".parse().expect("literal")),
                pop3: Addresses::One("127.0.0.1:1110".parse().expect("literal")),
                imap: Addresses::One("127.0.0.1:1143".parse().expect("literal")),
                submission: Addresses::One("127.0.0.1:2587".parse().expect("literal")),
                managesieve: Addresses::One("127.0.0.1:4190".parse().expect("literal")),
                http: Addresses::One("127.0.0.1:8080".parse().expect("literal")),
                ..Listen::default()
            },
            tls: TlsConfig::default(),
            acme: AcmeConfig::default(),
            store: StoreConfig::default(),
            smtp: smtp::SmtpConfig::default(),
            pop3: pop3::Pop3Config::default(),
            imap: imap::ImapConfig::default(),
            managesieve: managesieve::ManageSieveConfig::default(),
            scan: ScanConfig::default(),
            dnsbl: DnsblConfig::default(),
            web: web::WebConfig::default(),
            jmap: jmap::JmapConfig::default(),
            submission: smtp::SubmissionConfig::default(),
            outbound: sluice_outbound::OutboundConfig::default(),
            dkim: sluice_outbound::DkimConfig::default(),
            auth_checks: smtp::AuthChecksConfig::default(),
            sieve: smtp::FilterConfig::default(),
            spam: smtp::SpamConfig::default(),
            dns: DnsConfig::default(),
            log: LogConfig::default(),
            proxy: Vec::new(),
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
    c.outbound.validate().map_err(anyhow::Error::msg)?;
    if c.hostname.is_empty() || c.hostname.contains(char::is_whitespace) {
        bail!("key `hostname`: must be a host name, got {:?}", c.hostname);
    }
    if c.imap.max_command_bytes < 1024 {
        bail!("key `imap.max_command_bytes`: must be at least 1024");
    }
    if c.imap.idle_timeout_secs < 30 * 60 {
        bail!("key `imap.idle_timeout_secs`: must be at least 1800 (RFC 3501 §5.4)");
    }
    if c.managesieve.max_script_size == 0 || c.managesieve.max_script_size > 16 << 20 {
        bail!("key `managesieve.max_script_size`: must be between 1 and 16777216 bytes");
    }
    if c.managesieve.max_scripts == 0 {
        bail!("key `managesieve.max_scripts`: must be at least 1");
    }
    let j = &c.jmap;
    for (key, value) in [
        ("max_size_upload", j.max_size_upload as usize),
        ("max_concurrent_upload", j.max_concurrent_upload),
        ("max_size_request", j.max_size_request),
        ("max_concurrent_requests", j.max_concurrent_requests),
        ("max_calls_in_request", j.max_calls_in_request),
        ("max_objects_in_get", j.max_objects_in_get),
        ("max_objects_in_set", j.max_objects_in_set),
    ] {
        if value == 0 {
            bail!("key `jmap.{key}`: must be at least 1");
        }
    }
    if j.upload_lifetime_secs < 3600 {
        bail!("key `jmap.upload_lifetime_secs`: must be at least 3600 (RFC 8620 §6.1)");
    }
    if c.tls.cert.is_some() != c.tls.key.is_some() {
        bail!("key `tls`: set both `cert` and `key`, or neither");
    }
    validate_acme(c)?;
    for entry in &c.proxy {
        entry.validate()?;
    }
    if c.smtp.max_line_length < 512 {
        bail!("key `smtp.max_line_length`: must be at least 512 (RFC 5321 §4.5.3.1.4)");
    }
    if c.smtp.max_recipients == 0 {
        bail!("key `smtp.max_recipients`: must be at least 1");
    }
    if c.store.wal_limit_mb == 0 {
        bail!("key `store.wal_limit_mb`: must be at least 1");
    }
    if c.store.readers == 0 {
        bail!("key `store.readers`: must be at least 1");
    }
    if c.store.backend == StoreBackend::Postgres && c.store.url.is_none() {
        bail!("key `store.url`: needed when `store.backend` is \"postgres\"");
    }
    if c.store.pool_size == 0 {
        bail!("key `store.pool_size`: must be at least 1");
    }
    if !c.dnsbl.zones.is_empty() && c.dnsbl.resolver.is_none() {
        bail!("key `dnsbl.resolver`: needed when `dnsbl.zones` are set");
    }
    for z in &c.dnsbl.zones {
        if z.name.is_empty()
            || z.name.contains(char::is_whitespace)
            || !z.weight.is_finite()
            || z.weight <= 0.0
        {
            bail!(
                "key `dnsbl.zones`: zone {:?} needs a DNS name and a positive weight",
                z.name
            );
        }
    }
    if !c.dnsbl.threshold.is_finite() || c.dnsbl.threshold <= 0.0 {
        bail!("key `dnsbl.threshold`: must be positive");
    }
    c.dnsbl.allow_list()?;
    tracing_subscriber::EnvFilter::try_new(&c.log.level)
        .map_err(|e| anyhow::anyhow!("key `log.level`: {e}"))?;
    Ok(())
}

fn validate_acme(c: &Config) -> anyhow::Result<()> {
    let a = &c.acme;
    if !a.enabled {
        return Ok(());
    }
    if c.tls.cert.is_some() {
        bail!("key `acme.enabled`: the certificate comes either from ACME or from `tls.cert`, not both");
    }
    if !a.directory.starts_with("https://") {
        bail!(
            "key `acme.directory`: must be an https:// URL, got {:?}",
            a.directory
        );
    }
    for name in a.names(&c.hostname) {
        if name.is_empty()
            || name.contains(char::is_whitespace)
            || name.starts_with('*')
            || name.parse::<std::net::IpAddr>().is_ok()
        {
            bail!("key `acme.domains`: {name:?} is not a host name (no wildcards or addresses)");
        }
    }
    for contact in &a.contact {
        if !contact.contains('@') || contact.contains(char::is_whitespace) {
            bail!("key `acme.contact`: {contact:?} is not an email address");
        }
    }
    if a.renew_before_days == 0 {
        bail!("key `acme.renew_before_days`: must be at least 1");
    }
    match a.challenge {
        AcmeChallenge::TlsAlpn01 if c.listen.https.list().is_empty() => bail!(
            "key `acme.challenge`: tls-alpn-01 is answered on the `listen.https` listener (port 443), which is off"
        ),
        AcmeChallenge::Http01 if c.listen.acme_http.list().is_empty() => bail!(
            "key `acme.challenge`: http-01 is answered on the `listen.acme_http` listener (port 80), which is off"
        ),
        _ => Ok(()),
    }
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
    fn the_postgres_back_end_needs_its_url() {
        let e = parse("[store]\nbackend = \"postgres\"\n").unwrap_err();
        assert!(format!("{e:#}").contains("store.url"), "{e:#}");
        let c = parse("[store]\nbackend = \"postgres\"\nurl = \"postgres://u@db/mail\"\n").unwrap();
        assert_eq!(c.store.backend, StoreBackend::Postgres);
        let e = parse("[store]\nbackend = \"mysql\"\n").unwrap_err();
        assert!(format!("{e:#}").contains("backend"), "{e:#}");
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
    fn proxy_entries_parse_and_are_checked() {
        let c = parse(
            "[[proxy]]\nprotocol = \"smtp\"\nlisten = \"127.0.0.1:2526\"\nupstream = \"127.0.0.1:25\"\n\
             [[proxy]]\nprotocol = \"pop3\"\nlisten = \"127.0.0.1:1111\"\nupstream = \"mail.example.org:995\"\nupstream_tls = \"implicit\"\n",
        )
        .unwrap();
        assert_eq!(c.proxy.len(), 2);
        assert_eq!(c.proxy[1].upstream_tls, proxy::UpstreamTls::Implicit);
        let e = parse("[[proxy]]\nprotocol = \"pop3\"\nlisten = \"127.0.0.1:1\"\nupstream = \"h:1\"\nclient_address = \"xclient\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("proxy.client_address"), "{e}");
        let e =
            parse("[[proxy]]\nprotocol = \"imap\"\nlisten = \"127.0.0.1:1\"\nupstream = \"h:1\"\n")
                .unwrap_err()
                .to_string();
        assert!(e.contains("proxy"), "{e}");
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
        let e = parse("[web]\nsession_hours = \"long\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("web.session_hours"), "{e}");
        let e = parse("[imap]\nidle_timeout_secs = 60\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("imap.idle_timeout_secs"), "{e}");
    }

    #[test]
    fn acme_defaults_and_checks() {
        let c = parse("hostname = \"mx.example.org\"\n").unwrap();
        assert!(!c.acme.enabled);
        assert_eq!(c.acme.directory, LETS_ENCRYPT);
        assert_eq!(c.acme.names(&c.hostname), vec!["mx.example.org"]);
        assert_eq!(c.acme.renew_before_days, 30);
        let e = parse("[acme]\nenabled = true\n").unwrap_err().to_string();
        assert!(e.contains("listen.https"), "{e}");
        let e = parse(
            "[listen]\nhttps = \"127.0.0.1:0\"\n[acme]\nenabled = true\nchallenge = \"http-01\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("listen.acme_http"), "{e}");
        let e = parse("[acme]\nchallenge = \"dns-01\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("acme.challenge"), "{e}");
        let e = parse("[listen]\nhttps = \"127.0.0.1:0\"\n[acme]\nenabled = true\ndomains = [\"*.example.org\"]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("acme.domains"), "{e}");
        parse("[listen]\nacme_http = \"127.0.0.1:0\"\n[acme]\nenabled = true\nchallenge = \"http-01\"\ncontact = [\"admin@example.org\"]\n").unwrap();
    }
}
