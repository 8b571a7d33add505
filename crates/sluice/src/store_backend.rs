//! The store `[store]` asks for: SQLite in the data directory (the
//! embedded default), or a PostgreSQL database that several nodes share.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use store::{PgOptions, PgStore, PgTls, SqliteOptions, SqliteStore, Store};

use crate::config::{Config, StoreBackend, StoreTls};

/// An open store, with what only its back end has.
pub(crate) enum OpenStore {
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

/// Who opens the store: the server, or a command-line tool that runs
/// beside it.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Role {
    Server,
    Tool,
}

impl OpenStore {
    pub(crate) async fn open(config: &Config, role: Role) -> anyhow::Result<OpenStore> {
        match config.store.backend {
            StoreBackend::Sqlite => Ok(OpenStore::Sqlite(open_sqlite(config, role)?)),
            StoreBackend::Postgres => {
                let options = pg_options(config, role)?;
                let url = options.url.clone();
                let store = PgStore::connect(options)
                    .await
                    .with_context(|| format!("cannot open the store at {}", redacted(&url)))?;
                Ok(OpenStore::Postgres(store))
            }
        }
    }

    /// The store behind the trait, for everything that does not care
    /// which back end it is.
    pub(crate) fn shared(&self) -> Arc<dyn Store> {
        match self {
            OpenStore::Sqlite(s) => Arc::new(s.clone()),
            OpenStore::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// Drops what an interrupted run left half-written; how many
    /// messages. On PostgreSQL the blob sweeper does this as it goes:
    /// other nodes may be writing, so nothing incomplete is young enough
    /// to be called a leftover at start.
    pub(crate) async fn recover(&self) -> anyhow::Result<usize> {
        match self {
            OpenStore::Sqlite(s) => Ok(s.recover().await?),
            OpenStore::Postgres(_) => Ok(0),
        }
    }

    /// What the store does when the server stops: SQLite cuts its log
    /// back and reports its writer's totals.
    pub(crate) async fn stop(&self) {
        let OpenStore::Sqlite(sqlite) = self else {
            tracing::info!("stopped");
            return;
        };
        match sqlite.truncate_wal().await {
            Ok(true) => {}
            Ok(false) => tracing::warn!("the write-ahead log could not be truncated at stop: busy"),
            Err(e) => {
                tracing::warn!(error = %e, "the write-ahead log could not be truncated at stop")
            }
        }
        let w = sqlite.writer_stats();
        tracing::info!(
            jobs = w.jobs,
            transactions = w.transactions,
            durable_commits = w.durable_commits,
            "stopped"
        );
    }
}

/// Refuses a command that works on the SQLite files (backup, restore,
/// stats) when the store is in PostgreSQL, saying what to use instead.
pub(crate) fn only_on_sqlite(config: &Config) -> anyhow::Result<()> {
    if config.store.backend == StoreBackend::Postgres {
        anyhow::bail!(
            "this command works on the SQLite store in the data directory; the store is in \
             PostgreSQL (`store.backend`): back it up with pg_dump or pg_basebackup, and see \
             its size with PostgreSQL's own views"
        );
    }
    Ok(())
}

fn open_sqlite(config: &Config, role: Role) -> anyhow::Result<SqliteStore> {
    let options = match role {
        Role::Server => SqliteOptions {
            group_commit: config.store.group_commit,
            readers: config.store.readers,
            wal_limit: config.store.wal_limit_mb * 1024 * 1024,
            train_dictionary: true,
        },
        Role::Tool => SqliteOptions {
            group_commit: false,
            readers: 1,
            // The server trains the store's dictionary: training holds
            // about 15 MB for a moment, and `sluice import` keeps its
            // memory that of a small import whatever it reads. An import
            // packs with the dictionary the store has when it starts.
            train_dictionary: false,
            ..SqliteOptions::default()
        },
    };
    SqliteStore::open(&config.data_dir, options)
        .with_context(|| format!("cannot open the store in {}", config.data_dir.display()))
}

/// The PostgreSQL settings of `[store]`; the password from
/// `password_file`, else from `SLUICE_STORE_PASSWORD`, else from the URL.
/// A tool gets a small pool and none of a server's background work.
fn pg_options(config: &Config, role: Role) -> anyhow::Result<PgOptions> {
    let url = config
        .store
        .url
        .as_deref()
        .context("key `store.url`: needed when `store.backend` is \"postgres\"")?;
    let mut options = PgOptions::new(url);
    options.tls = pg_tls(config)?;
    options.ca_file = config.store.ca_file.clone();
    options.tool = role == Role::Tool;
    options.password = match &config.store.password_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("key `store.password_file`: {}", path.display()))?;
            Some(text.lines().next().unwrap_or_default().to_string())
        }
        None => std::env::var("SLUICE_STORE_PASSWORD").ok(),
    };
    options.pool_size = match role {
        Role::Server => config.store.pool_size,
        Role::Tool => 2,
    };
    options.wait = Duration::from_secs(5);
    options.release_grace = Duration::from_secs(config.store.release_grace_secs);
    Ok(options)
}

/// The TLS mode of `store.tls` and the URL's `sslmode=`, which must agree
/// when both are given; checks that `ca_file` is of use and readable.
fn pg_tls(config: &Config) -> anyhow::Result<PgTls> {
    let url = config.store.url.as_deref().unwrap_or_default();
    let (_, in_url) = PgTls::split_url(url).map_err(|e| anyhow::anyhow!("key `store.url`: {e}"))?;
    let tls = match (config.store.tls.map(PgTls::from), in_url) {
        (Some(key), Some(url)) if key != url => anyhow::bail!(
            "key `store.tls`: \"{}\" contradicts sslmode={} in `store.url`",
            key.name(),
            url.name()
        ),
        (key, url) => key.or(url).unwrap_or_default(),
    };
    if let Some(path) = &config.store.ca_file {
        if tls != PgTls::VerifyFull {
            anyhow::bail!(
                "key `store.ca_file`: only `tls = \"verify-full\"` checks the server's \
                 certificate (the TLS mode is \"{}\")",
                tls.name()
            );
        }
        std::fs::metadata(path)
            .with_context(|| format!("key `store.ca_file`: {}", path.display()))?;
    }
    Ok(tls)
}

/// `sluice migrate`.
#[derive(clap::Args, Debug)]
pub struct MigrateArgs {
    /// The data directory whose SQLite store is copied (default: the
    /// configuration's `data_dir`).
    #[arg(long)]
    from: Option<PathBuf>,
    /// The PostgreSQL database to copy into, `postgres://USER@HOST:PORT/DBNAME`;
    /// it must hold no store yet.
    #[arg(long)]
    to: String,
    /// A file whose first line is the database password (else
    /// `SLUICE_STORE_PASSWORD`, else the URL's).
    #[arg(long)]
    password_file: Option<PathBuf>,
    /// TLS to the database: disable, require or verify-full (default:
    /// `[store] tls`, else the URL's `sslmode=`, else disable).
    #[arg(long, value_enum)]
    tls: Option<StoreTls>,
    /// The CA certificates (PEM) verify-full trusts (default: `[store]
    /// ca_file`, else the Mozilla roots).
    #[arg(long)]
    ca_file: Option<PathBuf>,
}

/// Copies the SQLite store into PostgreSQL, all or nothing, then says what
/// to put in `[store]`.
pub(crate) async fn migrate(config: &Config, args: MigrateArgs) -> anyhow::Result<()> {
    let from = args.from.clone().unwrap_or_else(|| config.data_dir.clone());
    let mut source = config.clone();
    source.data_dir = from.clone();
    // The server's own lock: a copy of a store being written is not one.
    let _lock = crate::serve::lock_data_dir(&source)
        .context("stop the server before migrating its store")?;
    let mut target = config.clone();
    target.store.url = Some(args.to.clone());
    target.store.password_file = args.password_file.clone();
    if args.tls.is_some() {
        target.store.tls = args.tls;
    }
    if args.ca_file.is_some() {
        target.store.ca_file = args.ca_file.clone();
    }
    let options = pg_options(&target, Role::Tool)?;
    let started = std::time::Instant::now();
    let stats = PgStore::copy_from_sqlite(&from, options, |table, rows| {
        eprintln!("{table}: {rows} rows");
    })
    .await
    .with_context(|| format!("cannot copy {} to {}", from.display(), redacted(&args.to)))?;
    eprintln!(
        "copied {} messages in {} mailboxes in {:.1} s; now set in [store]: backend = \"postgres\", url = \"{}\"",
        stats.rows("messages"),
        stats.rows("mailboxes"),
        started.elapsed().as_secs_f64(),
        redacted(&args.to)
    );
    Ok(())
}

/// `url` without a password, for messages.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn passwords_are_left_out_of_messages() {
        assert_eq!(
            redacted("postgres://mail:s3cret@db.example:5432/sluice"),
            "postgres://mail:***@db.example:5432/sluice"
        );
        assert_eq!(
            redacted("postgres://mail@db/sluice"),
            "postgres://mail@db/sluice"
        );
        assert_eq!(redacted("host=db user=mail"), "host=db user=mail");
    }
}
