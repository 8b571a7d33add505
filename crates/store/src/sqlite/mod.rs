//! The SQLite back end: one database file in the data directory, in WAL
//! mode, with one writer thread ([`writer`]) and a pool of readers
//! ([`pool`]).

mod checkpoint;
mod message;
mod pool;
mod schema;
mod writer;

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};

use crate::directory::{normalize_address, AccountEntry, Directory};
use crate::error::{Result, StoreError};
use crate::index::IndexedHeaders;
use crate::model::{
    AccountId, AliasEntry, BlobId, FlagChange, MailboxId, MailboxInfo, MessageEntry,
    QueuedRecipient, Uid,
};
use crate::password::hash_password;
use crate::{MessageWriter, Store};

use pool::ReadPool;
use writer::Writer;
pub use writer::WriterStats;

/// Mailboxes every new account gets, with their RFC 6154 special use.
const DEFAULT_MAILBOXES: &[(&str, Option<&str>)] = &[
    ("INBOX", None),
    ("Sent", Some("\\Sent")),
    ("Drafts", Some("\\Drafts")),
    ("Trash", Some("\\Trash")),
    ("Junk", Some("\\Junk")),
    ("Archive", Some("\\Archive")),
];

/// Tuning of the SQLite back end.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// Fold concurrent changes into one transaction and one fsync.
    pub group_commit: bool,
    /// Read connections in the pool.
    pub readers: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            group_commit: true,
            readers: 4,
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
    path: PathBuf,
    _checkpointer: checkpoint::Checkpointer,
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn open_connection(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    rusqlite::vtab::array::load_module(&conn)?;
    Ok(conn)
}

fn bump_serial(conn: &Connection) -> Result<()> {
    conn.execute(
        "UPDATE meta SET value = value + 1 WHERE key = 'directory_serial'",
        [],
    )?;
    Ok(())
}

fn valid_domain(name: &str) -> Result<String> {
    let name = name.trim().trim_end_matches('.').to_lowercase();
    let ok = !name.is_empty()
        && name.len() <= 253
        && !name.starts_with('.')
        && !name.contains("..")
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '.' || c == '_');
    if ok {
        Ok(name)
    } else {
        Err(StoreError::Invalid(format!(
            "not a valid domain name: {name:?}"
        )))
    }
}

fn valid_address(address: &str) -> Result<String> {
    let normal = normalize_address(address)
        .filter(|a| {
            !a.chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == '<' || c == '>')
        })
        .ok_or_else(|| StoreError::Invalid(format!("not a valid address: {address:?}")))?;
    let (_, domain) = normal.rsplit_once('@').expect("normalised");
    valid_domain(domain)?;
    Ok(normal)
}

impl SqliteStore {
    /// Opens (creating if needed) the store in `dir`, migrating its schema.
    pub fn open(dir: &Path, options: SqliteOptions) -> Result<SqliteStore> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            path: dir.display().to_string(),
            source,
        })?;
        let path = dir.join("sluice.db");
        let mut conn = open_connection(&path)?;
        schema::migrate(&mut conn)?;
        // Checkpoints happen in their own thread, not inside a commit.
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        // A WAL file left larger than this after a checkpoint is cut back.
        conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
        let checkpointer = checkpoint::Checkpointer::start(&path)?;
        let readers = ReadPool::open(&path, options.readers.max(1))?;
        let writer = Writer::start(conn, options.group_commit);
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                writer,
                readers,
                path,
                _checkpointer: checkpointer,
            }),
        })
    }

    /// How many changes and transactions the writer has committed.
    pub fn writer_stats(&self) -> WriterStats {
        self.inner.writer.stats()
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Removes blobs left half-written by a crash. Only the server calls
    /// this, at start, while it holds the data directory's lock: no other
    /// process can be writing a message then.
    pub async fn recover(&self) -> Result<usize> {
        self.inner
            .writer
            .exec(true, |c| {
                c.execute(
                    "DELETE FROM blob_chunks WHERE blob_id IN (SELECT id FROM blobs WHERE complete = 0)",
                    [],
                )?;
                Ok(c.execute("DELETE FROM blobs WHERE complete = 0", [])?)
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
                    "SELECT a.id, a.address, m.id, a.password_hash FROM accounts a
                     JOIN mailboxes m ON m.account_id = a.id AND m.name = 'INBOX'",
                )?
                .query_map([], |r| {
                    Ok(AccountEntry {
                        id: r.get(0)?,
                        address: r.get(1)?,
                        inbox: r.get(2)?,
                        password_hash: r.get(3)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let aliases = c
                .prepare("SELECT address, target FROM aliases")?
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(Directory::new(serial, domains, accounts, aliases))
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
                .query_row("SELECT id FROM domains WHERE name = ?1", [&domain], |r| r.get(0))
                .optional()?;
            let domain_id =
                domain_id.ok_or_else(|| StoreError::NotFound(format!("domain {domain} (add it first)")))?;
            let n = c.execute(
                "INSERT OR IGNORE INTO accounts (address, domain_id, password_hash, created)
                 VALUES (?1, ?2, ?3, ?4)",
                params![address, domain_id, hash, now()],
            )?;
            if n == 0 {
                return Err(StoreError::Exists(format!("account {address}")));
            }
            let id = c.last_insert_rowid();
            let validity = now() as u32;
            for (name, special) in DEFAULT_MAILBOXES {
                c.execute(
                    "INSERT INTO mailboxes (account_id, name, special_use, uid_validity) VALUES (?1, ?2, ?3, ?4)",
                    params![id, name, special, validity],
                )?;
            }
            bump_serial(c)?;
            Ok(id)
        })
        .await
    }

    async fn remove_account(&self, address: &str) -> Result<()> {
        let address = valid_address(address)?;
        self.write(move |c| {
            let id: Option<i64> = c
                .query_row("SELECT id FROM accounts WHERE address = ?1", [&address], |r| r.get(0))
                .optional()?;
            let id = id.ok_or_else(|| StoreError::NotFound(format!("account {address}")))?;
            // Explicit deletes (rather than relying on ON DELETE CASCADE) so
            // the reference-count triggers see every message row go.
            c.execute(
                "DELETE FROM messages WHERE mailbox_id IN (SELECT id FROM mailboxes WHERE account_id = ?1)",
                [id],
            )?;
            c.execute("DELETE FROM mailboxes WHERE account_id = ?1", [id])?;
            c.execute("DELETE FROM accounts WHERE id = ?1", [id])?;
            bump_serial(c)
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
        Box::new(message::SqliteMessageWriter::new(Arc::clone(&self.inner)))
    }

    async fn mailbox(&self, account: AccountId, name: &str) -> Result<Option<MailboxInfo>> {
        // RFC 3501 §5.1: INBOX is case-insensitive, other names are not.
        let name = if name.eq_ignore_ascii_case("INBOX") {
            "INBOX".to_string()
        } else {
            name.to_string()
        };
        self.read(move |c| {
            Ok(c.query_row(
                "SELECT id, account_id, name, uid_validity, uid_next, highest_modseq
                 FROM mailboxes WHERE account_id = ?1 AND name = ?2",
                params![account, name],
                |r| {
                    Ok(MailboxInfo {
                        id: r.get(0)?,
                        account: r.get(1)?,
                        name: r.get(2)?,
                        uid_validity: r.get(3)?,
                        uid_next: r.get(4)?,
                        highest_modseq: r.get::<_, i64>(5)? as u64,
                        special_use: None,
                        subscribed: true,
                    })
                },
            )
            .optional()?)
        })
        .await
    }

    async fn list_messages(&self, mailbox: MailboxId) -> Result<Vec<MessageEntry>> {
        self.read(move |c| {
            Ok(c.prepare_cached(
                "SELECT uid, blob_id, size, flags, internal_date, modseq
                 FROM messages WHERE mailbox_id = ?1 ORDER BY uid",
            )?
            .query_map([mailbox], entry_from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }

    async fn read_chunk(&self, blob: BlobId, seq: u32) -> Result<Option<Vec<u8>>> {
        self.read(move |c| {
            Ok(
                c.prepare_cached("SELECT data FROM blob_chunks WHERE blob_id = ?1 AND seq = ?2")?
                    .query_row(params![blob, seq], |r| r.get(0))
                    .optional()?,
            )
        })
        .await
    }

    async fn headers(&self, blob: BlobId) -> Result<Option<IndexedHeaders>> {
        self.read(move |c| {
            Ok(c.query_row(
                "SELECT hdr_from, hdr_to, hdr_cc, hdr_subject, hdr_date, hdr_message_id
                 FROM blobs WHERE id = ?1",
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
        let list = uid_list(uids);
        self.write(move |c| {
            // One statement for the whole set (rarray is SQLite's carray).
            c.execute(
                "DELETE FROM messages WHERE mailbox_id = ?1 AND uid IN rarray(?2)",
                params![mailbox, Rc::new(list)],
            )?;
            c.execute(
                "UPDATE mailboxes SET highest_modseq = highest_modseq + 1 WHERE id = ?1",
                [mailbox],
            )?;
            Ok(())
        })
        .await
    }

    async fn queued(&self) -> Result<Vec<QueuedRecipient>> {
        self.read(|c| {
            Ok(
                c.prepare(
                    "SELECT id, blob_id, sender, recipient, attempts FROM queue ORDER BY id",
                )?
                .query_map([], |r| {
                    Ok(QueuedRecipient {
                        id: r.get(0)?,
                        blob: r.get(1)?,
                        sender: r.get(2)?,
                        recipient: r.get(3)?,
                        attempts: r.get(4)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?,
            )
        })
        .await
    }

    async fn update_flags(
        &self,
        mailbox: MailboxId,
        uids: &[Uid],
        change: FlagChange,
        flags: u32,
        _keywords: &[String],
        _unchanged_since: Option<u64>,
    ) -> Result<Vec<MessageEntry>> {
        let list = uid_list(uids);
        let expr = match change {
            FlagChange::Add => "flags | ?2",
            FlagChange::Remove => "flags & ~?2",
            FlagChange::Replace => "?2",
        };
        self.write(move |c| {
            let modseq: i64 = c.query_row(
                "UPDATE mailboxes SET highest_modseq = highest_modseq + 1 WHERE id = ?1 RETURNING highest_modseq",
                [mailbox],
                |r| r.get(0),
            )?;
            let sql = format!(
                "UPDATE messages SET flags = {expr}, modseq = ?3
                 WHERE mailbox_id = ?1 AND uid IN rarray(?4) AND flags != {expr}
                 RETURNING uid, blob_id, size, flags, internal_date, modseq"
            );
            let mut changed = c
                .prepare(&sql)?
                .query_map(params![mailbox, flags, modseq, Rc::new(list)], entry_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            changed.sort_by_key(|m| m.uid);
            Ok(changed)
        })
        .await
    }

    async fn copy_messages(
        &self,
        from: MailboxId,
        uids: &[Uid],
        to: MailboxId,
    ) -> Result<Vec<(Uid, Uid)>> {
        let list = uid_list(uids);
        self.write(move |c| {
            let list = Rc::new(list);
            let sources: Vec<Uid> = c
                .prepare("SELECT uid FROM messages WHERE mailbox_id = ?1 AND uid IN rarray(?2) ORDER BY uid")?
                .query_map(params![from, Rc::clone(&list)], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            if sources.is_empty() {
                return Ok(Vec::new());
            }
            let n = sources.len() as i64;
            let (first, modseq): (u32, i64) = c.query_row(
                "UPDATE mailboxes SET uid_next = uid_next + ?2, highest_modseq = highest_modseq + 1
                 WHERE id = ?1 RETURNING uid_next - ?2, highest_modseq",
                params![to, n],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            // One statement for the whole set; the new UIDs follow the
            // source UID order. The reference-count trigger does the rest.
            c.execute(
                "INSERT INTO messages (mailbox_id, uid, blob_id, size, flags, keywords, internal_date, modseq)
                 SELECT ?1, ?2 + row_number() OVER (ORDER BY uid) - 1, blob_id, size, flags, keywords, internal_date, ?3
                 FROM messages WHERE mailbox_id = ?4 AND uid IN rarray(?5)",
                params![to, first, modseq, from, list],
            )?;
            Ok(sources.into_iter().zip(first..).collect())
        })
        .await
    }

    async fn expunge_deleted(&self, mailbox: MailboxId, _uids: Option<&[Uid]>) -> Result<Vec<Uid>> {
        self.write(move |c| {
            let mut uids = c
                .prepare(
                    "DELETE FROM messages WHERE mailbox_id = ?1 AND flags & ?2 != 0 RETURNING uid",
                )?
                .query_map(params![mailbox, crate::model::FLAG_DELETED], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<Uid>>>()?;
            if !uids.is_empty() {
                c.execute(
                    "UPDATE mailboxes SET highest_modseq = highest_modseq + 1 WHERE id = ?1",
                    [mailbox],
                )?;
            }
            uids.sort_unstable();
            Ok(uids)
        })
        .await
    }

    async fn move_messages(&self, _from: MailboxId, _uids: &[Uid], _to: MailboxId) -> Result<Vec<(Uid, Uid)>> {
        Err(StoreError::Invalid("not built".into()))
    }
    async fn list_mailboxes(&self, _account: AccountId) -> Result<Vec<MailboxInfo>> {
        Err(StoreError::Invalid("not built".into()))
    }
    async fn create_mailbox(&self, _account: AccountId, _name: &str, _special_use: Option<&str>) -> Result<MailboxInfo> {
        Err(StoreError::Invalid("not built".into()))
    }
    async fn delete_mailbox(&self, _account: AccountId, _name: &str) -> Result<()> {
        Err(StoreError::Invalid("not built".into()))
    }
    async fn rename_mailbox(&self, _account: AccountId, _from: &str, _to: &str) -> Result<()> {
        Err(StoreError::Invalid("not built".into()))
    }
    async fn set_subscribed(&self, _account: AccountId, _name: &str, _subscribed: bool) -> Result<()> {
        Err(StoreError::Invalid("not built".into()))
    }
    async fn mailbox_status(&self, _mailbox: MailboxId) -> Result<crate::MailboxStatus> {
        Err(StoreError::Invalid("not built".into()))
    }
    async fn changes_since(&self, _mailbox: MailboxId, _modseq: u64) -> Result<crate::Changes> {
        Err(StoreError::Invalid("not built".into()))
    }
    async fn message_data(&self, _mailbox: MailboxId, _uids: &[Uid]) -> Result<Vec<crate::MessageData>> {
        Err(StoreError::Invalid("not built".into()))
    }
    async fn search(&self, _mailbox: MailboxId, _key: &crate::SearchKey) -> Result<Vec<Uid>> {
        Err(StoreError::Invalid("not built".into()))
    }
    async fn quota(&self, _account: AccountId) -> Result<crate::Quota> {
        Err(StoreError::Invalid("not built".into()))
    }
    async fn set_quota(&self, _address: &str, _limit_bytes: Option<u64>) -> Result<()> {
        Err(StoreError::Invalid("not built".into()))
    }
    fn watch_mailbox(&self, _mailbox: MailboxId) -> tokio::sync::watch::Receiver<u64> {
        tokio::sync::watch::channel(0).1
    }
}

/// UIDs as an `rarray` parameter (SQLite's carray).
fn uid_list(uids: &[Uid]) -> Vec<rusqlite::types::Value> {
    uids.iter()
        .map(|u| rusqlite::types::Value::Integer(i64::from(*u)))
        .collect()
}

fn entry_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<MessageEntry> {
    Ok(MessageEntry {
        uid: r.get(0)?,
        blob: r.get(1)?,
        size: r.get::<_, i64>(2)? as u64,
        flags: r.get(3)?,
        internal_date: r.get(4)?,
        modseq: r.get::<_, i64>(5)? as u64,
        keywords: Vec::new(),
    })
}
