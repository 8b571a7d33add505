//! Copying a whole SQLite store into an empty PostgreSQL database
//! (`sluice migrate`). Every row keeps its ids, so IMAP clients see the
//! same UIDVALIDITY, UIDs, flags and modseqs and do not resync.
//!
//! All or nothing: the copy is one PostgreSQL transaction, and a database
//! that already holds a domain, an account or a blob is refused. Memory
//! stays bounded: rows stream out of SQLite and go in batches of a few
//! megabytes. Reference counts and mailbox figures are not copied but
//! counted again by the triggers as the rows arrive; the full-text rows are
//! made from each blob's text, as delivery makes them. Leftovers of an
//! interrupted delivery (incomplete blobs) are not copied.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use tokio_postgres::types::ToSql;
use tokio_postgres::Transaction;

use super::{PgOptions, PgStore};
use crate::error::{Result, StoreError};

/// How a column is read from SQLite and written to PostgreSQL.
#[derive(Clone, Copy)]
enum Ty {
    Int,
    Int4,
    Bool,
    Real,
    Text,
    Bytes,
}

use Ty::*;

/// A table copied as it is: its name, its columns, and which rows.
struct Table {
    name: &'static str,
    columns: &'static [(&'static str, Ty)],
    filter: &'static str,
}

const COMPLETE_BLOB: &str = "WHERE blob_id IN (SELECT id FROM blobs WHERE complete = 1)";

/// In an order the foreign keys accept. `blobs.refcount` and the mailbox
/// figures are left out: the triggers count them as messages arrive.
const TABLES: &[Table] = &[
    Table {
        name: "domains",
        columns: &[("id", Int), ("name", Text)],
        filter: "",
    },
    Table {
        name: "accounts",
        columns: &[
            ("id", Int),
            ("address", Text),
            ("domain_id", Int),
            ("password_hash", Text),
            ("created", Int),
            ("quota_bytes", Int),
            ("uid_validity_last", Int),
            ("spam_threshold", Real),
            ("modseq", Int),
        ],
        filter: "",
    },
    Table {
        name: "aliases",
        columns: &[("address", Text), ("target", Text)],
        filter: "",
    },
    Table {
        name: "mailboxes",
        columns: &[
            ("id", Int),
            ("account_id", Int),
            ("name", Text),
            ("special_use", Text),
            ("uid_validity", Int),
            ("uid_next", Int),
            ("highest_modseq", Int),
            ("subscribed", Bool),
            ("recent_from", Int),
            ("created_modseq", Int),
            ("meta_modseq", Int),
        ],
        filter: "",
    },
    Table {
        name: "mailboxes_gone",
        columns: &[
            ("account_id", Int),
            ("mailbox_id", Int),
            ("created", Int),
            ("modseq", Int),
        ],
        filter: "",
    },
    Table {
        name: "lost_subscriptions",
        columns: &[("account_id", Int), ("name", Text)],
        filter: "",
    },
    Table {
        name: "zstd_dictionaries",
        columns: &[("id", Int), ("dict", Bytes), ("created", Int)],
        filter: "",
    },
    Table {
        name: "blobs",
        columns: &[
            ("id", Int),
            ("size", Int),
            ("complete", Bool),
            ("created", Int),
            ("hdr_from", Text),
            ("hdr_to", Text),
            ("hdr_cc", Text),
            ("hdr_subject", Text),
            ("hdr_date", Int),
            ("hdr_day", Int),
            ("hdr_message_id", Text),
            ("piece_size", Int),
        ],
        filter: "WHERE complete = 1",
    },
    Table {
        name: "blob_chunks",
        columns: &[
            ("blob_id", Int),
            ("seq", Int4),
            ("data", Bytes),
            ("codec", Int4),
        ],
        filter: COMPLETE_BLOB,
    },
    Table {
        name: "blob_parsed",
        columns: &[
            ("blob_id", Int),
            ("structure", Bytes),
            ("header", Bytes),
            ("header_codec", Int4),
        ],
        filter: COMPLETE_BLOB,
    },
    Table {
        name: "messages",
        columns: &[
            ("mailbox_id", Int),
            ("uid", Int),
            ("blob_id", Int),
            ("size", Int),
            ("flags", Int4),
            ("keywords", Text),
            ("internal_date", Int),
            ("modseq", Int),
        ],
        filter: "",
    },
    Table {
        name: "emails",
        columns: &[
            ("account_id", Int),
            ("blob_id", Int),
            ("thread_id", Int),
            ("created", Int),
            ("changed", Int),
        ],
        filter: "",
    },
    Table {
        name: "emails_gone",
        columns: &[
            ("account_id", Int),
            ("modseq", Int),
            ("blob_id", Int),
            ("thread_id", Int),
            ("created", Int),
        ],
        filter: "",
    },
    Table {
        name: "expunged",
        columns: &[
            ("mailbox_id", Int),
            ("uid", Int),
            ("modseq", Int),
            ("blob_id", Int),
            ("size", Int),
            ("flags", Int4),
            ("internal_date", Int),
            ("keywords", Text),
        ],
        filter: "",
    },
    Table {
        // Leases of the old server mean nothing here.
        name: "queue",
        columns: &[
            ("id", Int),
            ("blob_id", Int),
            ("sender", Text),
            ("recipient", Text),
            ("attempts", Int4),
            ("next_attempt", Int),
            ("last_error", Text),
            ("created", Int),
            ("warned", Bool),
            ("notify", Int4),
            ("orcpt", Text),
            ("envid", Text),
            ("ret_full", Bool),
            ("eight_bit", Bool),
        ],
        filter: "",
    },
    Table {
        name: "web_sessions",
        columns: &[
            ("id_hash", Text),
            ("account_id", Int),
            ("csrf", Text),
            ("created", Int),
            ("expires", Int),
        ],
        filter: "",
    },
    Table {
        name: "web_settings",
        columns: &[
            ("account_id", Int),
            ("display_name", Text),
            ("signature", Text),
            ("page_size", Int4),
            ("remote_ok", Text),
        ],
        filter: "",
    },
    Table {
        name: "account_records",
        columns: &[
            ("account_id", Int),
            ("kind", Text),
            ("id", Text),
            ("changed", Int),
            ("body", Text),
        ],
        filter: "",
    },
    Table {
        name: "dkim_keys",
        columns: &[
            ("domain", Text),
            ("selector", Text),
            ("algorithm", Text),
            ("private_der", Bytes),
            ("public_key", Text),
            ("created", Int),
            ("signing", Bool),
        ],
        filter: "",
    },
    Table {
        name: "sieve_scripts",
        columns: &[
            ("account_id", Int),
            ("name", Text),
            ("source", Text),
            ("active", Bool),
            ("updated", Int),
        ],
        filter: "",
    },
    Table {
        name: "sieve_memory",
        columns: &[("account_id", Int), ("key", Text), ("expires", Int)],
        filter: "",
    },
    Table {
        name: "spam_tokens",
        columns: &[
            ("account_id", Int),
            ("token", Text),
            ("spam", Int),
            ("ham", Int),
            ("seen", Int),
        ],
        filter: "",
    },
    Table {
        name: "spam_totals",
        columns: &[("account_id", Int), ("spam", Int), ("ham", Int)],
        filter: "",
    },
    Table {
        name: "spam_trained",
        columns: &[("account_id", Int), ("blob_id", Int), ("spam", Bool)],
        filter: "",
    },
    Table {
        name: "spam_training",
        columns: &[
            ("id", Int),
            ("account_id", Int),
            ("blob_id", Int),
            ("spam", Bool),
        ],
        filter: "",
    },
];

/// Tables whose ids come from a sequence, set past the copied ids.
const SEQUENCED: &[&str] = &[
    "domains",
    "accounts",
    "mailboxes",
    "zstd_dictionaries",
    "blobs",
    "queue",
    "spam_training",
];

/// A batch goes when it holds this many rows or bytes.
const BATCH_ROWS: usize = 500;
const BATCH_BYTES: usize = 4 * 1024 * 1024;

/// What was copied: rows per table, in the order copied.
#[derive(Debug, Default)]
pub struct CopyStats {
    pub tables: Vec<(&'static str, u64)>,
}

impl CopyStats {
    /// Rows copied into `table`.
    pub fn rows(&self, table: &str) -> u64 {
        self.tables
            .iter()
            .find(|(t, _)| *t == table)
            .map_or(0, |(_, n)| *n)
    }
}

type Value = Box<dyn ToSql + Sync + Send>;

impl PgStore {
    /// Copies the SQLite store in `dir` into the empty database of
    /// `options`; `progress` hears each table's name and row count as it
    /// is done. The server must not run on `dir` meanwhile.
    pub async fn copy_from_sqlite(
        dir: &Path,
        options: PgOptions,
        mut progress: impl FnMut(&str, u64),
    ) -> Result<CopyStats> {
        let path = dir.join("sluice.db");
        if !path.exists() {
            return Err(StoreError::NotFound(format!(
                "a store in {}",
                dir.display()
            )));
        }
        let sqlite = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        crate::sqlite::load_dictionaries(&sqlite)?;
        let store = PgStore::connect(options).await?;
        let mut conn = store.conn().await?;
        let tx = conn.transaction().await?;
        refuse_unless_empty(&tx).await?;
        let mut stats = CopyStats::default();
        for table in TABLES {
            let n = copy_table(&sqlite, &tx, table).await?;
            progress(table.name, n);
            stats.tables.push((table.name, n));
        }
        let n = copy_text(&sqlite, &tx).await?;
        progress("blob_text", n);
        stats.tables.push(("blob_text", n));
        // Blobs the SQLite store had released but not yet swept go here.
        tx.execute(
            "UPDATE blobs SET released = extract(epoch FROM now())::bigint
             WHERE refcount <= 0 AND released IS NULL",
            &[],
        )
        .await?;
        for table in SEQUENCED {
            tx.execute(
                &format!(
                    "SELECT setval(pg_get_serial_sequence('{table}', 'id'), max(id)) \
                     FROM {table} HAVING max(id) IS NOT NULL"
                ),
                &[],
            )
            .await?;
        }
        let serial: i64 = sqlite.query_row(
            "SELECT value FROM meta WHERE key = 'directory_serial'",
            [],
            |r| r.get(0),
        )?;
        // One more than the copy's: every node reloads what it serves.
        tx.execute(
            "UPDATE meta SET value = $1 WHERE key = 'directory_serial'",
            &[&(serial + 1)],
        )
        .await?;
        tx.commit().await?;
        Ok(stats)
    }
}

async fn refuse_unless_empty(tx: &Transaction<'_>) -> Result<()> {
    let row = tx
        .query_one(
            "SELECT (SELECT count(*) FROM domains) + (SELECT count(*) FROM accounts) \
             + (SELECT count(*) FROM blobs)",
            &[],
        )
        .await?;
    if row.get::<_, i64>(0) > 0 {
        return Err(StoreError::Exists(
            "a store in this PostgreSQL database (the copy goes only into an empty one)".into(),
        ));
    }
    Ok(())
}

/// Copies one table's rows in batches; how many.
async fn copy_table(sqlite: &Connection, tx: &Transaction<'_>, table: &Table) -> Result<u64> {
    let names: Vec<&str> = table.columns.iter().map(|(c, _)| *c).collect();
    let mut stmt = sqlite.prepare(&format!(
        "SELECT {} FROM {} {}",
        names.join(", "),
        table.name,
        table.filter
    ))?;
    let mut rows = stmt.query([])?;
    let mut batch = Batch::new(table.name, &names);
    let mut copied = 0;
    while let Some(row) = rows.next()? {
        let mut values = Vec::with_capacity(table.columns.len());
        for (i, (_, ty)) in table.columns.iter().enumerate() {
            values.push(read(row, i, *ty)?);
        }
        batch.push(values, row_bytes(row, table.columns.len()));
        copied += 1;
        if batch.full() {
            batch.send(tx).await?;
        }
    }
    batch.send(tx).await?;
    Ok(copied)
}

/// The full-text rows of every copied blob, made as delivery makes them.
async fn copy_text(sqlite: &Connection, tx: &Transaction<'_>) -> Result<u64> {
    let mut ids = sqlite.prepare("SELECT id FROM blobs WHERE complete = 1 ORDER BY id")?;
    let mut rows = ids.query([])?;
    let mut batch = Batch::new(
        "blob_text",
        &["blob_id", "part", "subject", "addresses", "body"],
    );
    let mut copied = 0;
    // Blobs whose sections the nodes make (sections.rs): ids only.
    let mut long: Vec<i64> = Vec::new();
    while let Some(row) = rows.next()? {
        let blob: i64 = row.get(0)?;
        let text = crate::sqlite::fts_batch::text_from_chunks(sqlite, blob)?;
        let super::message::FoldedText {
            subject,
            addresses,
            body,
            long: is_long,
        } = super::message::FoldedText::of(&text);
        if is_long {
            long.push(blob);
        }
        let bytes = subject.len() + addresses.len() + body.len();
        batch.push(
            vec![
                Box::new(blob),
                Box::new(0i32),
                Box::new(subject),
                Box::new(addresses),
                Box::new(body),
            ],
            bytes,
        );
        copied += 1;
        if batch.full() {
            batch.send(tx).await?;
        }
    }
    batch.send(tx).await?;
    tx.execute(
        "INSERT INTO blob_text_pending (blob_id) SELECT unnest($1::bigint[])",
        &[&long],
    )
    .await?;
    Ok(copied)
}

/// Rows waiting to go in one multi-row INSERT.
struct Batch {
    head: String,
    width: usize,
    rows: Vec<Vec<Value>>,
    bytes: usize,
}

impl Batch {
    fn new(table: &str, columns: &[&str]) -> Batch {
        Batch {
            head: format!("INSERT INTO {table} ({}) VALUES ", columns.join(", ")),
            width: columns.len(),
            rows: Vec::new(),
            bytes: 0,
        }
    }

    fn push(&mut self, row: Vec<Value>, bytes: usize) {
        self.rows.push(row);
        self.bytes += bytes;
    }

    fn full(&self) -> bool {
        self.rows.len() >= BATCH_ROWS || self.bytes >= BATCH_BYTES
    }

    async fn send(&mut self, tx: &Transaction<'_>) -> Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let mut sql = self.head.clone();
        for r in 0..self.rows.len() {
            sql.push_str(if r == 0 { "(" } else { ", (" });
            for c in 0..self.width {
                if c > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&format!("${}", r * self.width + c + 1));
            }
            sql.push(')');
        }
        let params: Vec<&(dyn ToSql + Sync)> = self
            .rows
            .iter()
            .flatten()
            .map(|v| v.as_ref() as &(dyn ToSql + Sync))
            .collect();
        tx.execute(&sql, &params).await?;
        self.rows.clear();
        self.bytes = 0;
        Ok(())
    }
}

/// Column `i` of `row` as PostgreSQL wants it; NULL stays NULL.
fn read(row: &rusqlite::Row, i: usize, ty: Ty) -> Result<Value> {
    let out_of_range = |v: i64| StoreError::Corrupt(format!("{v} does not fit a 32-bit column"));
    Ok(match ty {
        Int => Box::new(row.get::<_, Option<i64>>(i)?),
        Int4 => Box::new(
            row.get::<_, Option<i64>>(i)?
                .map(|v| i32::try_from(v).map_err(|_| out_of_range(v)))
                .transpose()?,
        ),
        Bool => Box::new(row.get::<_, Option<i64>>(i)?.map(|v| v != 0)),
        Real => Box::new(row.get::<_, Option<f64>>(i)?.map(|v| v as f32)),
        Text => Box::new(row.get::<_, Option<String>>(i)?),
        Bytes => Box::new(row.get::<_, Option<Vec<u8>>>(i)?),
    })
}

/// About how many bytes a row holds, for the batch limit.
fn row_bytes(row: &rusqlite::Row, columns: usize) -> usize {
    (0..columns)
        .map(|i| match row.get_ref(i) {
            Ok(rusqlite::types::ValueRef::Blob(b)) => b.len(),
            Ok(rusqlite::types::ValueRef::Text(t)) => t.len(),
            _ => 8,
        })
        .sum()
}
