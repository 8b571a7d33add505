//! The SQLite back end: one database file in the data directory, in WAL
//! mode, with one writer thread ([`writer`]), a pool of readers ([`pool`])
//! and two background threads: WAL checkpoints ([`checkpoint`]) and the
//! release of blobs nothing references any more ([`sweep`]). The
//! full-text index is a second file, derived from the first, with a writer
//! and checkpoints of its own ([`fts_file`]).

mod account_view;
mod backup;
mod checkpoint;
mod dictionaries;
mod dkim;
mod entries;
pub(crate) mod fts_batch;
mod fts_file;
pub(crate) mod functions;
mod mailboxes;
pub(crate) mod message;
mod pool;
mod queue;
mod records;
mod schema;
mod search;
mod sieve;
mod spam;
mod stats;
mod sweep;
mod terms;
pub(crate) mod text_match;
mod web;
mod writer;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};

use crate::directory::{AccountEntry, Directory};
use crate::error::{Result, StoreError};
use crate::index::IndexedHeaders;
use crate::keyword;
use crate::mailbox_names::{lookup_name, valid_new_name, valid_special_use, DEFAULT_MAILBOXES};
use crate::model::{
    AccountId, AliasEntry, BlobId, Changes, DkimKey, FlagChange, MailboxId, MailboxInfo,
    MailboxStatus, MessageData, MessageEntry, QueueOutcome, QueuedRecipient, Quota, ScriptOwner,
    SearchKey, SieveScriptInfo, SpamModel, SpamTraining, Uid,
};
use crate::names::{valid_address, valid_domain};
use crate::password::hash_password;
use crate::{MessageWriter, Store, CHUNK_SIZE};

// The message writers (message.rs here, and PostgreSQL's) still reach the
// clock by this path.
pub(crate) use crate::clock::now;
use crate::notify::Watchers;
pub use backup::{backup_database, restore_database, BackupStats};
pub use dictionaries::load_dictionaries;
use entries::{entry_from_row, Which, ENTRY_COLUMNS};
use pool::ReadPool;
pub use stats::{disk_stats, DiskStats};
use writer::Writer;
pub use writer::WriterStats;

/// Tuning of the SQLite back end.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// Fold concurrent changes into one transaction and one fsync.
    pub group_commit: bool,
    /// Read connections in the pool.
    pub readers: usize,
    /// Bytes the write-ahead log may grow to before it is checkpointed
    /// and truncated (checkpoint.rs).
    pub wal_limit: u64,
    /// Train the store's zstd dictionary once it is large enough
    /// (dictionaries.rs). Either way, chunks are packed with the newest
    /// dictionary the store had when it opened.
    pub train_dictionary: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            group_commit: true,
            readers: 4,
            wal_limit: 64 * 1024 * 1024,
            train_dictionary: true,
        }
    }
}

/// The embedded store: `sluice.db` in the data directory.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    writer: Writer,
    readers: Arc<ReadPool>,
    watchers: Watchers,
    pins: Arc<crate::ViewPins>,
    queue_signal: Arc<tokio::sync::Notify>,
    path: PathBuf,
    sweeper: sweep::Sweeper,
    fts: fts_batch::FtsBatchGuard,
    /// The full-text index file's writer.
    index_writer: Writer,
    _checkpointer: checkpoint::Checkpointer,
    _index_checkpointer: checkpoint::Checkpointer,
    /// The zstd dictionary new chunks are packed with.
    dictionaries: dictionaries::Dictionaries,
    /// The free space of the data directory's disk.
    space: Arc<crate::DiskSpace>,
}

/// Opens a connection to the database with the store's settings. Its pages
/// stay SQLite's 4 KiB. Smaller ones were measured: a delivery's commit logs
/// the last page of a dozen B-trees whole, so 1 KiB pages cut the log per
/// byte of mail from 3.4 to 1.5 (5.5 to 1.9 on 4 KB mail) at the same
/// delivery rate; but IMAP sessions paid 15-35% on every command (SELECT,
/// FETCH, SEARCH FROM; 2,282 against 1,751 commands/s on the long-session
/// mix), and reading pages through a memory map (`mmap_size`) won back the
/// cold header fetch while it made a cold text search six times slower.
/// Reads are what users wait for; the log is not.
fn open_connection(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    rusqlite::vtab::array::load_module(&conn)?;
    functions::register(&conn)?;
    Ok(conn)
}

fn bump_serial(conn: &Connection) -> Result<()> {
    conn.execute(
        "UPDATE meta SET value = value + 1 WHERE key = 'directory_serial'",
        [],
    )?;
    Ok(())
}

impl SqliteStore {
    /// Opens (creating if needed) the store in `dir`, migrating its schema.
    pub fn open(dir: &Path, options: SqliteOptions) -> Result<SqliteStore> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            path: dir.display().to_string(),
            source,
        })?;
        let path = dir.join(backup::DB_FILE);
        let mut conn = open_connection(&path)?;
        schema::migrate(&mut conn)?;
        // Checkpoints happen in their own thread, not inside a commit.
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        // When the writer starts the log over (a checkpoint completed and no
        // reader is in it), a file larger than the limit is cut back to it:
        // the log's frames are bounded by the writer (checkpoint.rs), and
        // this bounds the file they leave behind.
        conn.pragma_update(None, "journal_size_limit", options.wal_limit as i64)?;
        let dictionaries = dictionaries::Dictionaries::load(&conn, options.train_dictionary)?;
        let space = Arc::new(crate::DiskSpace::new(Some(dir.to_path_buf())));
        let checkpointer = checkpoint::Checkpointer::start(&path, Arc::clone(&space))?;
        // The index file, created if needed, before readers attach it.
        let index_conn = fts_file::open_writer(&path, &conn, options.wal_limit)?;
        let index_path = fts_file::index_path(&path);
        let index_checkpointer = checkpoint::Checkpointer::start(&index_path, Arc::clone(&space))?;
        let readers = ReadPool::open(&path, options.readers.max(1))?;
        let writer = Writer::start(
            conn,
            "store-writer",
            options.group_commit,
            (options.wal_limit, Arc::clone(&checkpointer.progress), false),
            |bytes| {
                metrics::get().store_wal_bytes.inc_by(bytes);
            },
        );
        let index_writer = Writer::start(
            index_conn,
            "store-fts-writer",
            true,
            (
                options.wal_limit,
                Arc::clone(&index_checkpointer.progress),
                true,
            ),
            |bytes| {
                metrics::get().store_index_wal_bytes.inc_by(bytes);
            },
        );
        // Sweeps at once whatever a previous run released and left.
        let pins = Arc::new(crate::ViewPins::default());
        let fts = fts_batch::FtsBatch::start(&path, index_writer.clone(), options.wal_limit)?;
        let sweeper = sweep::Sweeper::start(&path, writer.clone(), Arc::clone(&pins), fts.clone())?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                writer,
                readers,
                watchers: Watchers::default(),
                pins,
                queue_signal: Arc::default(),
                path,
                sweeper,
                fts: fts_batch::FtsBatchGuard(fts),
                index_writer,
                _checkpointer: checkpointer,
                _index_checkpointer: index_checkpointer,
                dictionaries,
                space,
            }),
        })
    }

    /// How many changes and transactions the writer has committed.
    pub fn writer_stats(&self) -> WriterStats {
        self.inner.writer.stats()
    }

    /// What the full-text index file's writer has committed: its
    /// `wal_bytes` are the index's log writes (its jobs are all
    /// housekeeping, so `jobs` and `transactions` stay 0).
    pub fn index_writer_stats(&self) -> WriterStats {
        self.inner.index_writer.stats()
    }

    /// Deletes every blob released so far (its last entry or queue row
    /// gone) and returns how many this call deleted. A background thread
    /// does the same on its own shortly after each expunge; this is for
    /// callers that need the space back, or the tables settled, now.
    pub async fn sweep_now(&self) -> Result<usize> {
        self.inner.sweeper.sweep_all().await
    }

    /// Copies the whole WAL of the database and of the full-text index
    /// into their files and cuts both logs to nothing: what a server does
    /// at a clean stop, once its sessions are done. Waits up to 10 s for
    /// readers and the writers; true when both completed.
    pub async fn truncate_wal(&self) -> Result<bool> {
        // Full-text rows still waiting would otherwise start a new log
        // when the store closes.
        self.inner.fts.flush().await?;
        let paths = [self.inner.path.clone(), self.index_path()];
        tokio::task::spawn_blocking(move || {
            let mut all = true;
            for path in paths {
                all &= truncate_file_wal(&path)?;
            }
            Ok(all)
        })
        .await
        .map_err(|_| StoreError::Closed)?
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Path of the full-text index file beside it.
    pub fn index_path(&self) -> PathBuf {
        fts_file::index_path(&self.inner.path)
    }

    /// Removes blobs left half-written by a crash. Only the server calls
    /// this, at start, while it holds the data directory's lock: no other
    /// process can be writing a message then.
    pub async fn recover(&self) -> Result<usize> {
        self.inner
            .writer
            .exec(true, |c| {
                // One pass over the blobs (no index finds the incomplete
                // ones: keeping one cost every delivery a page of log),
                // then each one's rows by key.
                let ids = c
                    .prepare("SELECT id FROM blobs WHERE complete = 0")?
                    .query_map([], |r| r.get::<_, BlobId>(0))?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                for &id in &ids {
                    c.execute("DELETE FROM blob_chunks WHERE blob_id = ?1", [id])?;
                    c.execute("DELETE FROM blob_parsed WHERE blob_id = ?1", [id])?;
                    c.execute("DELETE FROM blobs WHERE id = ?1", [id])?;
                }
                Ok(ids.len())
            })
            .await
    }

    async fn read<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        self.inner.readers.read(f).await
    }

    async fn write<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        self.inner.writer.exec(true, f).await
    }

    /// Like `write`, for changes to mailboxes: `f` returns its answer and
    /// the mailboxes it touched, whose watchers hear of it once the commit
    /// is durable.
    async fn write_notify<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<(R, Vec<MailboxId>)> + Send + 'static,
    {
        let (answer, touched) = self.inner.writer.exec(true, f).await?;
        self.inner.watchers.notify(touched);
        Ok(answer)
    }

    /// Like `write_notify`, for changes that delete entries and so may
    /// release blobs: once they are committed the sweeper is told to look.
    async fn write_release<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<(R, Vec<MailboxId>)> + Send + 'static,
    {
        let answer = self.write_notify(f).await?;
        self.inner.sweeper.wake();
        Ok(answer)
    }
}

/// Checkpoints the WAL of the database file `path` and cuts it to nothing,
/// waiting up to 10 s; true when it completed.
fn truncate_file_wal(path: &Path) -> Result<bool> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    // SQLite answers busy at once, without waiting, while the checkpoint
    // thread runs a PASSIVE round: try again until the deadline.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let done = checkpoint::checkpoint(&conn, "TRUNCATE")?;
        if done || std::time::Instant::now() > deadline {
            return Ok(done);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The mailboxes a change touched: none when it changed no rows.
fn touched_if<T>(rows: &[T], mailboxes: &[MailboxId]) -> Vec<MailboxId> {
    if rows.is_empty() {
        Vec::new()
    } else {
        mailboxes.to_vec()
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn load_directory(&self) -> Result<Directory> {
        self.read(|c| {
            let serial: i64 = c.query_row(
                "SELECT value FROM meta WHERE key = 'directory_serial'",
                [],
                |r| r.get(0),
            )?;
            let domains = c
                .prepare("SELECT name FROM domains")?
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let accounts = c
                .prepare(
                    "SELECT a.id, a.address, m.id, a.password_hash, a.spam_threshold FROM accounts a
                     JOIN mailboxes m ON m.account_id = a.id AND m.name = 'INBOX'",
                )?
                .query_map([], |r| {
                    Ok(AccountEntry {
                        id: r.get(0)?,
                        address: r.get(1)?,
                        inbox: r.get(2)?,
                        password_hash: r.get(3)?,
                        spam_threshold: r.get::<_, Option<f64>>(4)?.map(|t| t as f32),
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let aliases = c
                .prepare("SELECT address, target FROM aliases")?
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let scripts = sieve::for_directory(c)?;
            Ok(Directory::new(serial, domains, accounts, aliases).with_sieve(scripts))
        })
        .await
    }

    async fn directory_serial(&self) -> Result<i64> {
        self.read(|c| {
            Ok(c.query_row(
                "SELECT value FROM meta WHERE key = 'directory_serial'",
                [],
                |r| r.get(0),
            )?)
        })
        .await
    }

    async fn add_domain(&self, name: &str) -> Result<()> {
        let name = valid_domain(name)?;
        self.write(move |c| {
            let n = c.execute("INSERT OR IGNORE INTO domains (name) VALUES (?1)", [&name])?;
            if n == 0 {
                return Err(StoreError::Exists(format!("domain {name}")));
            }
            bump_serial(c)
        })
        .await
    }

    async fn remove_domain(&self, name: &str) -> Result<()> {
        let name = valid_domain(name)?;
        self.write(move |c| {
            let id: Option<i64> = c
                .query_row("SELECT id FROM domains WHERE name = ?1", [&name], |r| {
                    r.get(0)
                })
                .optional()?;
            let id = id.ok_or_else(|| StoreError::NotFound(format!("domain {name}")))?;
            let accounts: i64 = c.query_row(
                "SELECT count(*) FROM accounts WHERE domain_id = ?1",
                [id],
                |r| r.get(0),
            )?;
            if accounts > 0 {
                return Err(StoreError::Invalid(format!(
                    "domain {name} still has {accounts} account(s); remove them first"
                )));
            }
            c.execute("DELETE FROM domains WHERE id = ?1", [id])?;
            c.execute("DELETE FROM dkim_keys WHERE domain = ?1", [&name])?;
            bump_serial(c)
        })
        .await
    }

    async fn list_domains(&self) -> Result<Vec<String>> {
        self.read(|c| {
            Ok(c.prepare("SELECT name FROM domains ORDER BY name")?
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<String>>>()?)
        })
        .await
    }

    async fn add_account(&self, address: &str, password: &str) -> Result<AccountId> {
        let address = valid_address(address)?;
        let password = password.to_string();
        // argon2 is deliberately slow: hash outside the writer thread.
        let hash = tokio::task::spawn_blocking(move || hash_password(&password))
            .await
            .map_err(|_| StoreError::Closed)??;
        self.write(move |c| {
            let domain = address.rsplit_once('@').expect("normalised").1.to_string();
            let domain_id: Option<i64> = c
                .query_row("SELECT id FROM domains WHERE name = ?1", [&domain], |r| {
                    r.get(0)
                })
                .optional()?;
            let domain_id = domain_id
                .ok_or_else(|| StoreError::NotFound(format!("domain {domain} (add it first)")))?;
            let n = c.execute(
                "INSERT OR IGNORE INTO accounts (address, domain_id, password_hash, created)
                 VALUES (?1, ?2, ?3, ?4)",
                params![address, domain_id, hash, now()],
            )?;
            if n == 0 {
                return Err(StoreError::Exists(format!("account {address}")));
            }
            let id = c.last_insert_rowid();
            for (name, special) in DEFAULT_MAILBOXES {
                mailboxes::create(c, id, name, *special)?;
            }
            // The mailboxes every account starts with are subscribed, so
            // clients that show only subscribed ones show them.
            c.execute(
                "UPDATE mailboxes SET subscribed = 1 WHERE account_id = ?1",
                [id],
            )?;
            bump_serial(c)?;
            Ok(id)
        })
        .await
    }

    async fn remove_account(&self, address: &str) -> Result<()> {
        let address = valid_address(address)?;
        self.write_release(move |c| {
            let id: Option<i64> = c
                .query_row("SELECT id FROM accounts WHERE address = ?1", [&address], |r| r.get(0))
                .optional()?;
            let id = id.ok_or_else(|| StoreError::NotFound(format!("account {address}")))?;
            let gone = c
                .prepare("SELECT id FROM mailboxes WHERE account_id = ?1")?
                .query_map([id], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<MailboxId>>>()?;
            // Explicit deletes (rather than relying on ON DELETE CASCADE) so
            // the reference-count triggers see every message row go.
            c.execute(
                "DELETE FROM messages WHERE mailbox_id IN (SELECT id FROM mailboxes WHERE account_id = ?1)",
                [id],
            )?;
            c.execute("DELETE FROM mailboxes WHERE account_id = ?1", [id])?;
            c.execute("DELETE FROM lost_subscriptions WHERE account_id = ?1", [id])?;
            c.execute("DELETE FROM sieve_scripts WHERE account_id = ?1", [id])?;
            c.execute("DELETE FROM sieve_memory WHERE account_id = ?1", [id])?;
            c.execute("DELETE FROM uploads WHERE account_id = ?1", [id])?;
            account_view::forget_account(c, id)?;
            // What the classifier learnt of this account goes too: an
            // account added later may be given the same id.
            for table in ["spam_tokens", "spam_totals", "spam_trained", "spam_training"] {
                c.execute(&format!("DELETE FROM {table} WHERE account_id = ?1"), [id])?;
            }
            c.execute("DELETE FROM accounts WHERE id = ?1", [id])?;
            web::forget_account(c, id)?;
            records::forget_account(c, id)?;
            bump_serial(c)?;
            Ok(((), gone))
        })
        .await
    }

    async fn set_password(&self, address: &str, password: &str) -> Result<()> {
        let address = valid_address(address)?;
        let password = password.to_string();
        let hash = tokio::task::spawn_blocking(move || hash_password(&password))
            .await
            .map_err(|_| StoreError::Closed)??;
        self.write(move |c| {
            let n = c.execute(
                "UPDATE accounts SET password_hash = ?1 WHERE address = ?2",
                params![hash, address],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(format!("account {address}")));
            }
            bump_serial(c)
        })
        .await
    }

    async fn list_accounts(&self) -> Result<Vec<String>> {
        self.read(|c| {
            Ok(c.prepare("SELECT address FROM accounts ORDER BY address")?
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<String>>>()?)
        })
        .await
    }

    async fn add_alias(&self, address: &str, targets: &[String]) -> Result<()> {
        let address = valid_address(address)?;
        let targets = targets
            .iter()
            .map(|t| valid_address(t))
            .collect::<Result<Vec<_>>>()?;
        if targets.is_empty() {
            return Err(StoreError::Invalid(
                "an alias needs at least one target".into(),
            ));
        }
        self.write(move |c| {
            let domain = address.rsplit_once('@').expect("normalised").1;
            let local: Option<i64> = c
                .query_row("SELECT id FROM domains WHERE name = ?1", [domain], |r| {
                    r.get(0)
                })
                .optional()?;
            if local.is_none() {
                return Err(StoreError::NotFound(format!(
                    "domain {domain} (add it first)"
                )));
            }
            for t in &targets {
                c.execute(
                    "INSERT OR IGNORE INTO aliases (address, target) VALUES (?1, ?2)",
                    params![address, t],
                )?;
            }
            bump_serial(c)
        })
        .await
    }

    async fn remove_alias(&self, address: &str, target: Option<&str>) -> Result<()> {
        let address = valid_address(address)?;
        let target = target.map(valid_address).transpose()?;
        self.write(move |c| {
            let n = match &target {
                Some(t) => c.execute(
                    "DELETE FROM aliases WHERE address = ?1 AND target = ?2",
                    params![address, t],
                )?,
                None => c.execute("DELETE FROM aliases WHERE address = ?1", [&address])?,
            };
            if n == 0 {
                return Err(StoreError::NotFound(format!("alias {address}")));
            }
            bump_serial(c)
        })
        .await
    }

    async fn sieve_scripts(&self, owner: ScriptOwner) -> Result<Vec<SieveScriptInfo>> {
        self.read(move |c| sieve::list(c, owner)).await
    }

    async fn sieve_script(&self, owner: ScriptOwner, name: &str) -> Result<Option<String>> {
        let name = name.to_string();
        self.read(move |c| sieve::get(c, owner, &name)).await
    }

    async fn put_sieve_script(&self, owner: ScriptOwner, name: &str, source: &str) -> Result<()> {
        let (name, source) = (name.to_string(), source.to_string());
        self.write(move |c| {
            sieve::put(c, owner, &name, &source, now())?;
            bump_serial(c)
        })
        .await
    }

    async fn activate_sieve_script(&self, account: AccountId, name: Option<&str>) -> Result<()> {
        let name = name.map(str::to_string);
        self.write(move |c| {
            sieve::activate(c, account, name.as_deref())?;
            bump_serial(c)
        })
        .await
    }

    async fn delete_sieve_script(&self, owner: ScriptOwner, name: &str) -> Result<()> {
        let name = name.to_string();
        self.write(move |c| {
            sieve::delete(c, owner, &name)?;
            bump_serial(c)
        })
        .await
    }

    async fn rename_sieve_script(&self, owner: ScriptOwner, from: &str, to: &str) -> Result<()> {
        let (from, to) = (from.to_string(), to.to_string());
        self.write(move |c| {
            sieve::rename(c, owner, &from, &to)?;
            bump_serial(c)
        })
        .await
    }

    async fn sieve_memory_holds(&self, account: AccountId, key: &str) -> Result<bool> {
        let key = key.to_string();
        self.read(move |c| sieve::seen(c, account, &key, now()))
            .await
    }

    async fn remember_in_sieve_memory(
        &self,
        account: AccountId,
        keys: Vec<(String, i64)>,
    ) -> Result<()> {
        self.write(move |c| sieve::remember(c, account, &keys, now()))
            .await
    }

    async fn set_spam_threshold(&self, address: &str, threshold: Option<f32>) -> Result<()> {
        let address = valid_address(address)?;
        if threshold.is_some_and(|t| !t.is_finite()) {
            return Err(StoreError::Invalid("a spam threshold is a number".into()));
        }
        self.write(move |c| {
            let n = c.execute(
                "UPDATE accounts SET spam_threshold = ?2 WHERE address = ?1",
                params![address, threshold.map(f64::from)],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(format!("account {address}")));
            }
            bump_serial(c)
        })
        .await
    }

    async fn spam_training_batch(&self, limit: usize) -> Result<Vec<SpamTraining>> {
        self.read(move |c| spam::training_batch(c, limit)).await
    }

    async fn train_spam(
        &self,
        account: Option<AccountId>,
        blob: Option<BlobId>,
        tokens: Vec<String>,
        spam: bool,
        done: Option<i64>,
    ) -> Result<bool> {
        self.write(move |c| spam::train(c, account, blob, &tokens, spam, done, now()))
            .await
    }

    async fn drop_spam_training(&self, id: i64) -> Result<()> {
        self.write(move |c| {
            c.execute("DELETE FROM spam_training WHERE id = ?1", [id])?;
            Ok(())
        })
        .await
    }

    async fn spam_model(
        &self,
        account: Option<AccountId>,
        tokens: Vec<String>,
    ) -> Result<SpamModel> {
        self.read(move |c| spam::model(c, account, &tokens)).await
    }

    async fn spam_token_count(&self, account: Option<AccountId>) -> Result<u64> {
        self.read(move |c| spam::token_count(c, account)).await
    }

    async fn spam_token_rows(
        &self,
        account: Option<AccountId>,
    ) -> Result<Vec<(String, u32, u32, i64)>> {
        self.read(move |c| spam::token_rows(c, account)).await
    }

    async fn forget_spam_tokens(
        &self,
        account: Option<AccountId>,
        tokens: Vec<String>,
    ) -> Result<()> {
        self.write(move |c| spam::forget_tokens(c, account, &tokens))
            .await
    }

    async fn dkim_keys(&self) -> Result<Vec<DkimKey>> {
        self.read(dkim::list).await
    }

    async fn add_dkim_key(&self, key: DkimKey) -> Result<()> {
        let mut key = key;
        key.domain = valid_domain(&key.domain)?;
        self.write(move |c| {
            dkim::add(c, &key)?;
            bump_serial(c)
        })
        .await
    }

    async fn set_dkim_signing(&self, domain: &str, selector: &str, signing: bool) -> Result<()> {
        let domain = valid_domain(domain)?;
        let selector = selector.to_string();
        self.write(move |c| {
            dkim::set_signing(c, &domain, &selector, signing)?;
            bump_serial(c)
        })
        .await
    }

    async fn remove_dkim_key(&self, domain: &str, selector: &str) -> Result<()> {
        let domain = valid_domain(domain)?;
        let selector = selector.to_string();
        self.write(move |c| {
            dkim::remove(c, &domain, &selector)?;
            bump_serial(c)
        })
        .await
    }

    async fn list_aliases(&self) -> Result<Vec<AliasEntry>> {
        let rows = self
            .read(|c| {
                Ok(
                    c.prepare("SELECT address, target FROM aliases ORDER BY address, target")?
                        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
                        .collect::<rusqlite::Result<Vec<_>>>()?,
                )
            })
            .await?;
        let mut out: Vec<AliasEntry> = Vec::new();
        for (address, target) in rows {
            match out.last_mut() {
                Some(last) if last.address == address => last.targets.push(target),
                _ => out.push(AliasEntry {
                    address,
                    targets: vec![target],
                }),
            }
        }
        Ok(out)
    }

    fn message_writer(&self) -> Box<dyn MessageWriter> {
        Box::new(crate::space::Watched {
            inner: Box::new(message::SqliteMessageWriter::new(Arc::clone(&self.inner))),
            space: Arc::clone(&self.inner.space),
        })
    }

    fn space(&self) -> &crate::DiskSpace {
        &self.inner.space
    }

    async fn mailbox(&self, account: AccountId, name: &str) -> Result<Option<MailboxInfo>> {
        // RFC 3501 §5.1: INBOX is case-insensitive, other names are not.
        let name = lookup_name(name);
        self.read(move |c| mailboxes::find(c, account, &name)).await
    }

    async fn list_messages(&self, mailbox: MailboxId) -> Result<Vec<MessageEntry>> {
        self.read(move |c| {
            Ok(c.prepare_cached(&format!(
                "SELECT {ENTRY_COLUMNS} FROM messages WHERE mailbox_id = ?1 ORDER BY uid"
            ))?
            .query_map([mailbox], entry_from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }

    async fn list_newest(
        &self,
        mailbox: MailboxId,
        skip: usize,
        take: usize,
    ) -> Result<Vec<MessageData>> {
        // One read for the page and what it shows, in one snapshot.
        self.read(move |c| {
            let uids = c
                .prepare_cached(
                    "SELECT uid FROM messages INDEXED BY messages_date
                     WHERE mailbox_id = ?1 ORDER BY internal_date DESC, uid DESC LIMIT ?2 OFFSET ?3",
                )?
                .query_map(params![mailbox, take as i64, skip as i64], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<Uid>>>()?;
            let mut data = entries::message_data(c, mailbox, &uids)?;
            // message_data answers in UID order; the page is in date order.
            let rank: HashMap<Uid, usize> = uids.iter().enumerate().map(|(i, u)| (*u, i)).collect();
            data.sort_by_key(|d| rank.get(&d.entry.uid).copied());
            Ok(data)
        })
        .await
    }

    async fn read_chunk(&self, blob: BlobId, seq: u32) -> Result<Option<Vec<u8>>> {
        // A released blob stays readable until it is swept: a session may
        // still show the message (pins.rs).
        self.read(move |c| read_chunk(c, blob, seq)).await
    }

    async fn headers(&self, blob: BlobId) -> Result<Option<IndexedHeaders>> {
        self.read(move |c| {
            Ok(c.query_row(
                "SELECT hdr_from, hdr_to, hdr_cc, hdr_subject, hdr_date, hdr_message_id
                 FROM blobs WHERE id = ?1 AND complete = 1",
                [blob],
                |r| {
                    Ok(IndexedHeaders {
                        from: r.get(0)?,
                        to: r.get(1)?,
                        cc: r.get(2)?,
                        subject: r.get(3)?,
                        date: r.get(4)?,
                        message_id: r.get(5)?,
                    })
                },
            )
            .optional()?)
        })
        .await
    }

    async fn expunge(&self, mailbox: MailboxId, uids: &[Uid]) -> Result<()> {
        if uids.is_empty() {
            return Ok(());
        }
        let uids = uids.to_vec();
        self.write_release(move |c| {
            let gone = entries::expunge_where(c, mailbox, Which::Uids(&uids))?;
            Ok(((), touched_if(&gone, &[mailbox])))
        })
        .await
    }

    async fn queued(&self) -> Result<Vec<QueuedRecipient>> {
        self.read(queue::list).await
    }

    async fn queue_summary(&self) -> Result<(u64, Option<i64>)> {
        self.read(|c| {
            Ok(
                c.query_row("SELECT count(*), min(created) FROM queue", [], |r| {
                    Ok((r.get::<_, i64>(0)? as u64, r.get(1)?))
                })?,
            )
        })
        .await
    }

    async fn claim_queue(
        &self,
        now: i64,
        lease_secs: i64,
        limit: usize,
    ) -> Result<Vec<QueuedRecipient>> {
        // Not durable: a lease lost in a crash only means an earlier retry.
        self.inner
            .writer
            .exec(false, move |c| queue::claim(c, now, lease_secs, limit))
            .await
    }

    async fn queue_message(&self, blob: BlobId, sender: &str, recipients: &[String]) -> Result<()> {
        let sender = sender.to_string();
        let recipients = recipients.to_vec();
        self.write(move |c| queue::enqueue(c, blob, &sender, &recipients, now()))
            .await?;
        self.inner.queue_signal.notify_one();
        Ok(())
    }

    async fn mark_queue_warned(&self, ids: Vec<i64>) -> Result<()> {
        self.write(move |c| queue::mark_warned(c, &ids)).await
    }

    async fn release_queue_leases(&self) -> Result<usize> {
        self.write(|c| {
            Ok(
                c.prepare_cached("UPDATE queue SET lease_until = 0 WHERE lease_until > 0")?
                    .execute([])?,
            )
        })
        .await
    }

    async fn record_queue_outcomes(&self, outcomes: Vec<(i64, QueueOutcome)>) -> Result<()> {
        self.write(move |c| {
            for (id, outcome) in &outcomes {
                queue::record(c, *id, outcome)?;
            }
            Ok(())
        })
        .await?;
        self.inner.sweeper.wake();
        Ok(())
    }

    async fn retry_queue(&self, id: Option<i64>, now: i64) -> Result<usize> {
        let n = self.write(move |c| queue::retry_now(c, id, now)).await?;
        self.inner.queue_signal.notify_one();
        Ok(n)
    }

    async fn remove_queued(&self, id: i64) -> Result<()> {
        self.write(move |c| queue::remove(c, id)).await?;
        self.inner.sweeper.wake();
        Ok(())
    }

    fn queue_signal(&self) -> Arc<tokio::sync::Notify> {
        Arc::clone(&self.inner.queue_signal)
    }

    async fn update_flags(
        &self,
        mailbox: MailboxId,
        uids: &[Uid],
        change: FlagChange,
        flags: u32,
        keywords: &[String],
        unchanged_since: Option<u64>,
    ) -> Result<Vec<MessageEntry>> {
        if uids.is_empty() {
            return Ok(Vec::new());
        }
        let keywords = keyword::normalize(keywords)?;
        let uids = uids.to_vec();
        self.write_notify(move |c| {
            let changed = entries::update_flags(
                c,
                mailbox,
                &uids,
                change,
                flags,
                &keywords,
                unchanged_since,
            )?;
            let touched = touched_if(&changed, &[mailbox]);
            Ok((changed, touched))
        })
        .await
    }

    async fn copy_messages(
        &self,
        from: MailboxId,
        uids: &[Uid],
        to: MailboxId,
    ) -> Result<Vec<(Uid, Uid)>> {
        let uids = uids.to_vec();
        self.write_notify(move |c| {
            let map = entries::copy_rows(c, from, &uids, to)?;
            spam::note_moves(c, from, to, &map)?;
            let touched = touched_if(&map, &[to]);
            Ok((map, touched))
        })
        .await
    }

    async fn expunge_deleted(&self, mailbox: MailboxId, uids: Option<&[Uid]>) -> Result<Vec<Uid>> {
        let uids = uids.map(<[Uid]>::to_vec);
        self.write_release(move |c| {
            let gone = entries::expunge_where(c, mailbox, Which::Deleted(uids.as_deref()))?;
            let touched = touched_if(&gone, &[mailbox]);
            Ok((gone, touched))
        })
        .await
    }

    async fn move_messages(
        &self,
        from: MailboxId,
        uids: &[Uid],
        to: MailboxId,
    ) -> Result<Vec<(Uid, Uid)>> {
        let uids = uids.to_vec();
        self.write_release(move |c| {
            let map = entries::move_rows(c, from, &uids, to)?;
            spam::note_moves(c, from, to, &map)?;
            let touched = touched_if(&map, &[from, to]);
            Ok((map, touched))
        })
        .await
    }

    async fn list_mailboxes(&self, account: AccountId) -> Result<Vec<MailboxInfo>> {
        self.read(move |c| mailboxes::list(c, account)).await
    }

    async fn create_mailbox(
        &self,
        account: AccountId,
        name: &str,
        special_use: Option<&str>,
    ) -> Result<MailboxInfo> {
        let name = valid_new_name(name)?;
        let special_use = special_use.map(valid_special_use).transpose()?;
        self.write(move |c| mailboxes::create(c, account, &name, special_use))
            .await
    }

    async fn delete_mailbox(&self, account: AccountId, name: &str) -> Result<()> {
        let name = lookup_name(name);
        self.write_release(move |c| {
            let id = mailboxes::delete(c, account, &name)?;
            Ok(((), vec![id]))
        })
        .await
    }

    async fn rename_mailbox(&self, account: AccountId, from: &str, to: &str) -> Result<()> {
        let from = lookup_name(from);
        let to = valid_new_name(to)?;
        self.write_notify(move |c| Ok(((), mailboxes::rename(c, account, &from, &to)?)))
            .await
    }

    async fn set_subscribed(&self, account: AccountId, name: &str, subscribed: bool) -> Result<()> {
        let name = lookup_name(name);
        self.write(move |c| {
            let n = c.execute(
                "UPDATE mailboxes SET subscribed = ?3 WHERE account_id = ?1 AND name = ?2",
                params![account, name, subscribed],
            )?;
            if n > 0 {
                // JMAP's isSubscribed changed (RFC 8621 §2).
                let modseq = account_view::next_account_modseq(c, account)?;
                c.execute(
                    "UPDATE mailboxes SET meta_modseq = ?3 WHERE account_id = ?1 AND name = ?2",
                    params![account, name, modseq],
                )?;
            }
            // A subscription whose mailbox is gone can still be dropped.
            let lost = if subscribed {
                0
            } else {
                c.execute(
                    "DELETE FROM lost_subscriptions WHERE account_id = ?1 AND name = ?2",
                    params![account, name],
                )?
            };
            if n == 0 && lost == 0 {
                return Err(StoreError::NotFound(format!("mailbox {name}")));
            }
            Ok(())
        })
        .await
    }

    async fn lost_subscriptions(&self, account: AccountId) -> Result<Vec<String>> {
        self.read(move |c| {
            Ok(c.prepare_cached(
                "SELECT name FROM lost_subscriptions WHERE account_id = ?1 ORDER BY name",
            )?
            .query_map([account], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<String>>>()?)
        })
        .await
    }

    async fn special_use_of(
        &self,
        mailboxes: &[MailboxId],
        special_use: &str,
    ) -> Result<Vec<MailboxId>> {
        let mailboxes = mailboxes.to_vec();
        let special_use = special_use.to_string();
        self.read(move |c| {
            let mut find = c.prepare_cached(
                "SELECT s.id FROM mailboxes m JOIN mailboxes s ON s.account_id = m.account_id
                 WHERE m.id = ?1 AND s.special_use = ?2 ORDER BY s.id LIMIT 1",
            )?;
            mailboxes
                .iter()
                .map(|&m| {
                    Ok(find
                        .query_row(params![m, special_use], |r| r.get(0))
                        .optional()?
                        .unwrap_or(m))
                })
                .collect()
        })
        .await
    }

    async fn mailbox_status(&self, mailbox: MailboxId) -> Result<MailboxStatus> {
        self.read(move |c| {
            // One statement, one snapshot: the counts the triggers keep
            // (schema.rs), and the recent messages, a range at the end of
            // the mailbox's UIDs. That range is counted only when it starts
            // inside the mailbox: in one no session has selected since its
            // mail came, every message is recent, and counting them all
            // made this O(messages).
            c.query_row(
                "SELECT x.n_messages, x.n_unseen, x.n_deleted, x.n_bytes,
                        x.uid_next, x.uid_validity, x.highest_modseq,
                        CASE
                          WHEN x.recent_from >= x.uid_next THEN 0
                          WHEN x.recent_from <= coalesce(
                                 (SELECT min(m.uid) FROM messages m WHERE m.mailbox_id = x.id), 0)
                            THEN x.n_messages
                          ELSE (SELECT count(*) FROM messages m
                                WHERE m.mailbox_id = x.id AND m.uid >= x.recent_from)
                        END,
                        x.recent_from
                 FROM mailboxes x WHERE x.id = ?1",
                [mailbox],
                |r| {
                    Ok(MailboxStatus {
                        messages: r.get(0)?,
                        unseen: r.get(1)?,
                        deleted: r.get(2)?,
                        size: r.get::<_, i64>(3)? as u64,
                        uid_next: r.get(4)?,
                        uid_validity: r.get(5)?,
                        highest_modseq: r.get::<_, i64>(6)? as u64,
                        recent: r.get(7)?,
                        recent_from: r.get(8)?,
                    })
                },
            )
            .optional()?
            .ok_or_else(|| StoreError::NotFound(format!("mailbox {mailbox}")))
        })
        .await
    }

    async fn claim_recent(&self, mailbox: MailboxId) -> Result<(Uid, Uid)> {
        // Not durable: after a crash, messages are recent once more.
        self.inner
            .writer
            .exec(false, move |c| {
                let (from, next): (Uid, Uid) = c
                    .query_row(
                        "SELECT recent_from, uid_next FROM mailboxes WHERE id = ?1",
                        [mailbox],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()?
                    .ok_or_else(|| StoreError::NotFound(format!("mailbox {mailbox}")))?;
                if from < next {
                    c.prepare_cached("UPDATE mailboxes SET recent_from = ?2 WHERE id = ?1")?
                        .execute(params![mailbox, next])?;
                }
                Ok((from, next.max(from)))
            })
            .await
    }

    async fn changes_since(&self, mailbox: MailboxId, modseq: u64) -> Result<Changes> {
        self.read(move |c| entries::changes_since(c, mailbox, modseq))
            .await
    }

    async fn message_data(&self, mailbox: MailboxId, uids: &[Uid]) -> Result<Vec<MessageData>> {
        if uids.is_empty() {
            return Ok(Vec::new());
        }
        let uids = uids.to_vec();
        self.read(move |c| entries::message_data(c, mailbox, &uids))
            .await
    }

    async fn search(&self, mailbox: MailboxId, key: &SearchKey) -> Result<Vec<Uid>> {
        if search::reads_text(key) {
            // Rows of mail delivered just now may still wait for the index.
            self.inner.fts.flush().await?;
        }
        let key = key.clone();
        self.read(move |c| {
            let texts = text_match::resolve(c, mailbox, &key)?;
            let query = search::compile(mailbox, &key, &texts)?;
            Ok(c.prepare(&query.sql)?
                .query_map(rusqlite::params_from_iter(query.params.iter()), |r| {
                    r.get(0)
                })?
                .collect::<rusqlite::Result<Vec<Uid>>>()?)
        })
        .await
    }

    async fn quota(&self, account: AccountId) -> Result<Quota> {
        self.read(move |c| {
            c.query_row(
                // The mailboxes' kept counts (schema.rs): one row each,
                // however many messages (APPEND asks this every time).
                "SELECT a.quota_bytes,
                        (SELECT coalesce(sum(x.n_bytes), 0) FROM mailboxes x WHERE x.account_id = a.id),
                        (SELECT coalesce(sum(x.n_messages), 0) FROM mailboxes x WHERE x.account_id = a.id)
                 FROM accounts a WHERE a.id = ?1",
                [account],
                |r| {
                    Ok(Quota {
                        limit_bytes: r.get::<_, Option<i64>>(0)?.map(|n| n as u64),
                        used_bytes: r.get::<_, i64>(1)? as u64,
                        messages: r.get::<_, i64>(2)? as u64,
                    })
                },
            )
            .optional()?
            .ok_or_else(|| StoreError::NotFound(format!("account {account}")))
        })
        .await
    }

    async fn set_quota(&self, address: &str, limit_bytes: Option<u64>) -> Result<()> {
        let address = valid_address(address)?;
        let limit = limit_bytes
            .map(i64::try_from)
            .transpose()
            .map_err(|_| StoreError::Invalid("quota too large".into()))?;
        self.write(move |c| {
            let n = c.execute(
                "UPDATE accounts SET quota_bytes = ?2 WHERE address = ?1",
                params![address, limit],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(format!("account {address}")));
            }
            Ok(())
        })
        .await
    }

    async fn uid_runs(&self, mailbox: MailboxId) -> Result<Vec<(Uid, u32)>> {
        self.read(move |c| {
            // Gaps and islands: within a run, uid - rank is constant.
            Ok(c.prepare_cached(
                "SELECT min(uid), count(*) FROM (
                     SELECT uid, uid - row_number() OVER (ORDER BY uid) AS island
                     FROM messages WHERE mailbox_id = ?1)
                 GROUP BY island ORDER BY 1",
            )?
            .query_map([mailbox], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }

    async fn first_unseen(&self, mailbox: MailboxId) -> Result<Option<Uid>> {
        self.read(move |c| {
            Ok(c.prepare_cached(
                "SELECT min(uid) FROM messages WHERE mailbox_id = ?1 AND flags & ?2 = 0",
            )?
            .query_row(params![mailbox, crate::model::FLAG_SEEN], |r| r.get(0))?)
        })
        .await
    }

    async fn mailbox_keywords(&self, mailbox: MailboxId) -> Result<Vec<String>> {
        let sets = self
            .read(move |c| {
                Ok(c.prepare_cached(
                    "SELECT DISTINCT keywords FROM messages WHERE mailbox_id = ?1 AND keywords != ''",
                )?
                .query_map([mailbox], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?)
            })
            .await?;
        let mut all: Vec<String> = Vec::new();
        for set in &sets {
            for k in keyword::split(set) {
                if !all.iter().any(|a| a.eq_ignore_ascii_case(k)) {
                    all.push(k.to_string());
                }
            }
        }
        all.sort_by_key(|k| k.to_ascii_lowercase());
        Ok(all)
    }

    fn watch_mailbox(&self, mailbox: MailboxId) -> tokio::sync::watch::Receiver<u64> {
        self.inner.watchers.subscribe(mailbox)
    }

    fn pin_view(&self, mailbox: MailboxId, modseq: u64) -> crate::ViewPin {
        self.inner.pins.pin(mailbox, modseq)
    }

    async fn account_blob(
        &self,
        account: AccountId,
        blob: BlobId,
    ) -> Result<Option<crate::AccountBlob>> {
        self.read(move |c| {
            let upload = c
                .prepare_cached(
                    "SELECT b.size, u.content_type FROM uploads u JOIN blobs b ON b.id = u.blob_id
                     WHERE u.blob_id = ?1 AND u.account_id = ?2 AND u.expires > ?3 AND b.complete = 1",
                )?
                .query_row(params![blob, account, now()], |r| {
                    Ok(crate::AccountBlob {
                        size: r.get::<_, i64>(0)? as u64,
                        content_type: Some(r.get(1)?),
                    })
                })
                .optional()?;
            if upload.is_some() {
                return Ok(upload);
            }
            Ok(c.prepare_cached(
                "SELECT m.size FROM messages m JOIN mailboxes x ON x.id = m.mailbox_id
                 WHERE m.blob_id = ?1 AND x.account_id = ?2 LIMIT 1",
            )?
            .query_row(params![blob, account], |r| {
                Ok(crate::AccountBlob {
                    size: r.get::<_, i64>(0)? as u64,
                    content_type: None,
                })
            })
            .optional()?)
        })
        .await
    }

    async fn account_modseq(&self, account: AccountId) -> Result<u64> {
        self.read(move |c| account_view::account_modseq(c, account))
            .await
    }

    async fn account_changes(
        &self,
        account: AccountId,
        modseq: u64,
    ) -> Result<crate::AccountChanges> {
        self.read(move |c| account_view::account_changes(c, account, modseq))
            .await
    }

    async fn account_emails(
        &self,
        account: AccountId,
        blobs: Option<&[BlobId]>,
    ) -> Result<Vec<crate::AccountEmail>> {
        let blobs = blobs.map(<[BlobId]>::to_vec);
        self.read(move |c| account_view::account_emails(c, account, blobs.as_deref()))
            .await
    }

    async fn blob_structure(
        &self,
        blob: BlobId,
    ) -> Result<Option<(mime_tree::MessageStructure, Vec<u8>)>> {
        self.read(move |c| entries::blob_structure(c, blob)).await
    }

    async fn thread_emails(
        &self,
        account: AccountId,
        threads: &[i64],
    ) -> Result<Vec<(i64, Vec<BlobId>)>> {
        let threads = threads.to_vec();
        self.read(move |c| account_view::thread_emails(c, account, &threads))
            .await
    }

    async fn create_web_session(&self, session: &crate::WebSession) -> Result<()> {
        let session = session.clone();
        self.write(move |c| web::create_session(c, &session)).await
    }

    async fn web_session(&self, id_hash: &str, now: i64) -> Result<Option<crate::WebSession>> {
        let id_hash = id_hash.to_string();
        self.read(move |c| web::session(c, &id_hash, now)).await
    }

    async fn delete_web_session(&self, id_hash: &str) -> Result<()> {
        let id_hash = id_hash.to_string();
        self.write(move |c| web::delete_session(c, &id_hash)).await
    }

    async fn web_settings(&self, account: AccountId) -> Result<crate::WebSettings> {
        self.read(move |c| web::settings(c, account)).await
    }

    async fn set_web_settings(
        &self,
        account: AccountId,
        settings: &crate::WebSettings,
    ) -> Result<()> {
        let settings = settings.clone();
        self.write(move |c| web::set_settings(c, account, &settings))
            .await
    }

    async fn account_records(
        &self,
        account: AccountId,
        kind: &str,
    ) -> Result<Vec<crate::AccountRecord>> {
        let kind = kind.to_string();
        self.read(move |c| records::records(c, account, &kind))
            .await
    }

    async fn put_account_record(
        &self,
        account: AccountId,
        kind: &str,
        id: Option<&str>,
        body: Option<&str>,
    ) -> Result<(String, u64)> {
        let (kind, id, body) = (
            kind.to_string(),
            id.map(str::to_string),
            body.map(str::to_string),
        );
        self.write(move |c| records::put(c, account, &kind, id.as_deref(), body.as_deref()))
            .await
    }
}

/// Chunk `seq` of a blob as readers see it: [`CHUNK_SIZE`] bytes each but
/// the last, whatever the size of the pieces it is stored in (the blob's
/// `piece_size`: [`crate::intake::PIECE_SIZE`] now, [`CHUNK_SIZE`] for blobs
/// written before). A blob with a lead (a piece numbered
/// [`crate::intake::LEAD_SEQ`], written after the others) is read as if the
/// lead had been written first.
fn read_chunk(c: &Connection, blob: BlobId, seq: u32) -> Result<Option<Vec<u8>>> {
    let piece_size: usize = c
        .prepare_cached("SELECT piece_size FROM blobs WHERE id = ?1")?
        .query_row([blob], |r| r.get::<_, i64>(0))
        .optional()?
        .map_or(CHUNK_SIZE, |n| (n as usize).clamp(1, CHUNK_SIZE));
    let mut get =
        c.prepare_cached("SELECT codec, data FROM blob_chunks WHERE blob_id = ?1 AND seq = ?2")?;
    let mut piece = |n: i64| -> Result<Option<Vec<u8>>> {
        get.query_row(params![blob, n], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?
            .map(|(codec, data)| crate::chunk_codec::unpack_owned(codec, data, blob))
            .transpose()
    };
    let lead = piece(crate::intake::LEAD_SEQ)?.unwrap_or_default();
    // The chunk is bytes [start, start + CHUNK_SIZE) of the lead followed
    // by the pieces.
    let start = seq as usize * CHUNK_SIZE;
    let mut out = Vec::new();
    if start < lead.len() {
        out.extend_from_slice(&lead[start..lead.len().min(start + CHUNK_SIZE)]);
    }
    let from = start.max(lead.len()) - lead.len();
    let (mut n, mut skip) = (from / piece_size, from % piece_size);
    while out.len() < CHUNK_SIZE {
        let Some(p) = piece(n as i64)? else { break };
        let want = CHUNK_SIZE - out.len();
        out.extend_from_slice(
            p.get(skip..)
                .map_or(&[][..], |rest| &rest[..want.min(rest.len())]),
        );
        if p.len() < piece_size {
            break; // the last piece
        }
        n += 1;
        skip = 0;
    }
    Ok((!out.is_empty()).then_some(out))
}
