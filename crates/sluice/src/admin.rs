//! `sluice domain|user|alias ...`: directory edits straight in the store.
//! A running server on the same data sees them within its directory poll
//! interval.

use std::io::{BufRead, IsTerminal};
use std::sync::Arc;

use anyhow::bail;
use clap::Subcommand;
use store::Store;

use crate::store_backend::{OpenStore, Role};

use crate::config::Config;

#[derive(Subcommand)]
pub enum DomainAction {
    /// Add a local domain, and print the DNS records it needs.
    Add { name: String },
    /// Print the DNS records a local domain needs (MX, SPF, DKIM, DMARC,
    /// MTA-STS, TLS-RPT, client set-up).
    Records { name: String },
    /// List local domains.
    List,
    /// Remove a local domain (it must have no accounts).
    Remove { name: String },
}

#[derive(Subcommand)]
pub enum UserAction {
    /// Add an account; its domain must exist.
    Add {
        address: String,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
    /// List accounts.
    List,
    /// Remove an account and its mail.
    Remove { address: String },
    /// Change an account's password.
    Passwd {
        address: String,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Set an account's storage limit: a size such as `500M`, `2G`,
    /// `1048576`, or `none` for unlimited. IMAP reports it (QUOTA) and
    /// APPEND past it is refused with [OVERQUOTA].
    Quota { address: String, limit: String },
}

#[derive(Subcommand)]
pub enum AliasAction {
    /// Deliver mail for ADDRESS to each TARGET (local or remote).
    Add {
        address: String,
        #[arg(required = true)]
        targets: Vec<String>,
    },
    /// List aliases.
    List,
    /// Remove an alias, or only one of its targets.
    Remove {
        address: String,
        target: Option<String>,
    },
}

/// The store, opened for a command-line tool.
pub(crate) async fn open(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    Ok(OpenStore::open(config, Role::Tool).await?.shared())
}

fn read_password(from_stdin: bool) -> anyhow::Result<String> {
    let password = if from_stdin {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        line.trim_end_matches(['\r', '\n']).to_string()
    } else if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password("Password: ")?;
        let again = rpassword::prompt_password("Again: ")?;
        if first != again {
            bail!("the passwords differ");
        }
        first
    } else {
        bail!("no terminal to ask for a password: use --password-stdin");
    };
    if password.is_empty() {
        bail!("the password is empty");
    }
    Ok(password)
}

pub async fn domain(config: &Config, action: DomainAction) -> anyhow::Result<()> {
    let store = open(config).await?;
    match action {
        DomainAction::Add { name } => {
            store.add_domain(&name).await?;
            println!("domain {} added.", name.to_ascii_lowercase());
            println!("Publish these DNS records in its zone (`sluice domain records {name}` prints them again):\n");
            print_records(config, &*store, &name).await?;
        }
        DomainAction::Records { name } => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            if !store.list_domains().await?.contains(&name) {
                bail!("{name} is not a local domain (sluice domain add {name})");
            }
            print_records(config, &*store, &name).await?;
        }
        DomainAction::Remove { name } => {
            store.remove_domain(&name).await?;
            println!("domain {} removed.", name.to_ascii_lowercase());
        }
        DomainAction::List => {
            let mut out = std::io::stdout().lock();
            for d in store.list_domains().await? {
                if !write_line(&mut out, &d) {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// The domain's DNS records, with its DKIM keys' records or how to make one.
async fn print_records(config: &Config, store: &dyn Store, domain: &str) -> anyhow::Result<()> {
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    print!(
        "{}",
        crate::domain_records::render(&crate::domain_records::for_domain(config, &domain))
    );
    let keys: Vec<store::DkimKey> = store
        .dkim_keys()
        .await?
        .into_iter()
        .filter(|k| k.domain == domain)
        .collect();
    println!("; DKIM (RFC 6376): the public keys mail from the domain is signed with");
    if keys.is_empty() {
        println!("; none yet: `sluice dkim keygen {domain}` makes one and prints its record");
    }
    for key in &keys {
        println!("{}", sluice_outbound::dkim::txt_record(key));
    }
    Ok(())
}

pub async fn user(config: &Config, action: UserAction) -> anyhow::Result<()> {
    match action {
        UserAction::Add {
            address,
            password_stdin,
        } => {
            let password = read_password(password_stdin)?;
            open(config).await?.add_account(&address, &password).await?;
            let services = config.mail_services();
            println!("account {} added.", address.to_ascii_lowercase());
            println!(
                "It logs in as {} at {} (IMAP {}, submission {}); mail clients that fetch autoconfig find the settings themselves.",
                address.to_ascii_lowercase(),
                services.hostname,
                port_text(services.imaps, services.imap),
                port_text(services.submissions, services.submission),
            );
        }
        UserAction::Passwd {
            address,
            password_stdin,
        } => {
            let password = read_password(password_stdin)?;
            open(config)
                .await?
                .set_password(&address, &password)
                .await?;
            println!("password of {} changed.", address.to_ascii_lowercase());
        }
        UserAction::Remove { address } => {
            open(config).await?.remove_account(&address).await?;
            println!(
                "account {} removed, with its mail.",
                address.to_ascii_lowercase()
            );
        }
        UserAction::Quota { address, limit } => {
            let limit = store::parse_quota_limit(&limit)?;
            open(config).await?.set_quota(&address, limit).await?;
        }
        UserAction::List => {
            let mut out = std::io::stdout().lock();
            for a in open(config).await?.list_accounts().await? {
                if !write_line(&mut out, &a) {
                    break;
                }
            }
        }
    }
    Ok(())
}

pub async fn alias(config: &Config, action: AliasAction) -> anyhow::Result<()> {
    let store = open(config).await?;
    match action {
        AliasAction::Add { address, targets } => store.add_alias(&address, &targets).await?,
        AliasAction::Remove { address, target } => {
            store.remove_alias(&address, target.as_deref()).await?
        }
        AliasAction::List => {
            let mut out = std::io::stdout().lock();
            for a in store.list_aliases().await? {
                if !write_line(
                    &mut out,
                    &format!("{} -> {}", a.address, a.targets.join(", ")),
                ) {
                    break;
                }
            }
        }
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum QueueAction {
    /// List queued recipients: id, age, attempts, next try, last error.
    List,
    /// Show one queued recipient and its message's headers.
    Show { id: i64 },
    /// Try one queued recipient now.
    Retry { id: i64 },
    /// Try every queued recipient now.
    Flush,
    /// Remove a queued recipient without sending it (no bounce is sent).
    Remove { id: i64 },
}

/// `993 (TLS)`, `143 (STARTTLS)`, both, or `off`.
fn port_text(implicit: Option<u16>, starttls: Option<u16>) -> String {
    match (implicit, starttls) {
        (Some(i), Some(s)) => format!("{i} with TLS or {s} with STARTTLS"),
        (Some(i), None) => format!("{i} with TLS"),
        (None, Some(s)) => format!("{s} with STARTTLS"),
        (None, None) => "off".to_string(),
    }
}

pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Seconds as `3d4h`, `5m`, `12s`.
fn span(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{}h", s / 86400, s % 86400 / 3600),
    }
}

/// `sluice queue ...`: the outbound queue of the store, also while a
/// server runs (it notices within a second).
pub async fn queue(config: &Config, action: QueueAction) -> anyhow::Result<()> {
    let store = open(config).await?;
    let now = unix_now();
    match action {
        QueueAction::List => {
            let rows = store.queued().await?;
            let mut out = std::io::stdout().lock();
            for r in &rows {
                let next = if r.next_attempt <= now {
                    "now".to_string()
                } else {
                    format!("in {}", span(r.next_attempt - now))
                };
                let line = format!(
                    "{}\t{}\t{}\t{} bytes\tage {}\tattempts {}\tnext {}\t{}",
                    r.id,
                    if r.sender.is_empty() { "<>" } else { &r.sender },
                    r.recipient,
                    r.size,
                    span(now - r.created),
                    r.attempts,
                    next,
                    r.last_error.as_deref().unwrap_or("")
                );
                if !write_line(&mut out, &line) {
                    return Ok(());
                }
            }
            if rows.is_empty() {
                write_line(&mut out, "the queue is empty");
            }
        }
        QueueAction::Show { id } => {
            let rows = store.queued().await?;
            let Some(r) = rows.iter().find(|r| r.id == id) else {
                bail!("no queue entry {id}");
            };
            println!("id: {}", r.id);
            println!("sender: <{}>", r.sender);
            println!("recipient: <{}>", r.recipient);
            println!("size: {}", r.size);
            println!("age: {}", span(now - r.created));
            println!("attempts: {}", r.attempts);
            println!("next attempt: in {}", span(r.next_attempt - now));
            println!("last error: {}", r.last_error.as_deref().unwrap_or("-"));
            if let Some(h) = store.headers(r.blob).await? {
                println!("from: {}", h.from);
                println!("to: {}", h.to);
                println!("subject: {}", h.subject);
                println!("message-id: {}", h.message_id);
            }
        }
        QueueAction::Retry { id } => {
            store.retry_queue(Some(id), now).await?;
            println!("queue entry {id} is due now");
        }
        QueueAction::Flush => {
            let n = store.retry_queue(None, now).await?;
            println!("{n} queue entries are due now");
        }
        QueueAction::Remove { id } => {
            store.remove_queued(id).await?;
            println!("queue entry {id} removed");
        }
    }
    Ok(())
}

/// `sluice stats`: where the data directory's bytes go.
pub fn stats(config: &Config) -> anyhow::Result<()> {
    let db = config.data_dir.join("sluice.db");
    if !db.exists() {
        bail!("no store in {}", config.data_dir.display());
    }
    let s = store::disk_stats(&db)?;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let mut out = std::io::stdout().lock();
    let per = |b: u64| {
        if s.blobs == 0 {
            0.0
        } else {
            b as f64 / s.blobs as f64
        }
    };
    let lines = [
        format!(
            "database      {:>10.1} MiB  ({:.0} bytes per message)",
            mib(s.database_bytes),
            per(s.database_bytes)
        ),
        format!("write-ahead   {:>10.1} MiB", mib(s.wal_bytes)),
        format!(
            "text index    {:>10.1} MiB  ({:.0} bytes per message; its write-ahead {:.1} MiB)",
            mib(s.index_bytes),
            per(s.index_bytes),
            mib(s.index_wal_bytes)
        ),
        format!(
            "messages      {:>10}      ({} mailbox entries)",
            s.blobs, s.entries
        ),
        format!(
            "mail          {:>10.1} MiB  (database / mail: {:.2})",
            mib(s.mail_bytes),
            if s.mail_bytes == 0 {
                0.0
            } else {
                s.database_bytes as f64 / s.mail_bytes as f64
            }
        ),
        "tables and indexes:".to_string(),
    ];
    for line in lines {
        if !write_line(&mut out, &line) {
            return Ok(());
        }
    }
    for (name, bytes) in &s.objects {
        if !write_line(&mut out, &format!("  {name:<32} {:>10.1} MiB", mib(*bytes))) {
            return Ok(());
        }
    }
    Ok(())
}

/// Writes a line; false when the reader went away (`| head`), which is
/// not an error.
pub(crate) fn write_line(out: &mut impl std::io::Write, line: &str) -> bool {
    writeln!(out, "{line}").is_ok()
}
