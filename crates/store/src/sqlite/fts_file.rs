//! The full-text index in a database file of its own, `fts.db` beside
//! `sluice.db`, with its own writer thread and its own write-ahead log.
//!
//! Why a file of its own: FTS5 tokenizes inside the insert and rewrites
//! and merges its segments as rows go in. In the main database all of that
//! went through the one writer thread, where deliveries queue, and through
//! the one log, whose checkpoints and truncations deliveries wait for:
//! about half the log written per byte of mail was index pages. Here the
//! index has its own writer ([`Writer`], thread `store-fts-writer`), its
//! own log bounded the same way as the main one (checkpoint.rs, the same
//! `store.wal_limit_mb`), and its commits are never synced for a delivery.
//!
//! How the two files stay consistent: the main database is the truth, and
//! this file is an index derived from it that can be rebuilt from the
//! stored chunks at any time.
//!
//! - Rows are keyed by blob id, and blob ids are never used twice
//!   (message.rs `new_blob`): a row left behind for a blob
//!   that is gone matches no mailbox entry, so it costs space, never a
//!   wrong answer.
//! - A row is written only for a blob complete in the main database, which
//!   the index job looks up (on a read connection of its own, in a short
//!   read transaction: a read held through a whole index transaction kept
//!   the main log from being cut). A sweep deletes the rows of its blobs in
//!   an index job queued after its own commit: a job that looked before
//!   that commit was already running, so the deleting job comes after it;
//!   a job that looked after it no longer sees the blob.
//! - At open, in the background, complete blobs without a row (rows still
//!   waiting in memory at a kill, or a new file) are indexed again from
//!   their chunks and rows of blobs gone (a kill between a sweep and its
//!   index job) are deleted; text searches wait for that (fts_batch.rs).
//! - The file names the store it indexes (`store_id`). A file from another
//!   store, or from a later state of this one (a restored backup: rows
//!   above any blob id it has given), is emptied and built again; so is
//!   one whose rows hold another version of the text ([`TEXT_VERSION`]).
//!
//! A backup therefore copies only the main database, and a restore
//! removes this file: the store builds it again when it opens.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use super::terms;
use crate::error::Result;
use crate::index::TEXT_VERSION;
use crate::model::BlobId;

/// File name of the full-text index in a data directory.
pub(crate) const INDEX_FILE: &str = "fts.db";

/// Name under which a connection to the main database attaches the index.
pub(crate) const INDEX_SCHEMA: &str = "fts_index";

/// The index's tokenizer, as an FTS5 `tokenize` option. The scratch
/// tables that cut new words (terms.rs) and needles (text_match.rs) into
/// the index's terms must use the very same.
macro_rules! index_tokenizer {
    () => {
        r#"tokenize = "unicode61 remove_diacritics 2 categories 'L* N* Co M*'""#
    };
}
pub(crate) use index_tokenizer;

/// The index table: subject, addresses and header, body text; rowid is
/// the blob id. The sections of a long message's whole text
/// (text_sections.rs) are rows of their own, with body text alone, whose
/// rowid is [`section_rowid`]: negative, so no blob id is ever one.
/// Contentless: it keeps no copy of the text.
const CREATE_FTS: &str = concat!(
    "CREATE VIRTUAL TABLE IF NOT EXISTS main.fts USING fts5(
        subject, addresses, body,
        content = '', contentless_delete = 1, ",
    index_tokenizer!(),
    r#"
    );
    CREATE TABLE IF NOT EXISTS main.index_meta (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    ) STRICT;
"#
);

/// Bits of a section's rowid that number it within its message.
const SECTION_BITS: u32 = 16;

/// The rowid of section `n` (from 1) of `blob`'s text.
pub(crate) fn section_rowid(blob: BlobId, n: u32) -> i64 {
    -((blob << SECTION_BITS) | i64::from(n))
}

/// The lowest and highest rowids of `blob`'s sections.
pub(crate) fn section_rowids(blob: BlobId) -> (i64, i64) {
    (
        section_rowid(blob, crate::text_sections::MAX_SECTIONS),
        section_rowid(blob, 1),
    )
}

/// SQL for the blob of an index row whose rowid is `rowid`: a section's
/// rowid names its blob too (the shift is [`SECTION_BITS`]; a test holds
/// them together).
macro_rules! blob_of_row {
    () => {
        "iif(rowid < 0, (-rowid) >> 16, rowid)"
    };
}
pub(crate) use blob_of_row;

/// How FTS5 merges the index's segments, set on the table (FTS5 keeps it
/// in `fts_config`).
///
/// FTS5 writes a segment per transaction (and per `hashsize` of pending
/// text within one) and merges segments as it goes: by default, within
/// the very transaction that inserts rows, and when sixteen segments pile
/// up on one level (`crisismerge`) all of them at once. A single index
/// job could so write 30 MB and more to the log, which the writer can
/// only cut between transactions: the index's log reached 96 MB against
/// its 64 MiB bound. So FTS5 merges nothing on its own (`automerge` 0);
/// the index's thread merges between jobs, a bounded number of pages per
/// job (fts_batch.rs). Merging a level once it holds eight segments
/// (`usermerge`), not four, rewrites each row fewer times: the index's
/// log went from 2.3 to 1.9 bytes per byte of mail, at the cost of a few
/// more segments for a search to read. A 16 MiB `hashsize` makes a job's
/// rows one segment, not one per MiB of text.
const MERGE_CONFIG: [(&str, i64); 4] = [
    ("automerge", 0),
    ("usermerge", 8),
    ("crisismerge", 16),
    ("hashsize", 16 * 1024 * 1024),
];

/// Sets [`MERGE_CONFIG`] on the index table of `conn`.
pub(crate) fn configure(conn: &Connection) -> Result<()> {
    for (name, value) in MERGE_CONFIG {
        conn.execute(
            "INSERT INTO fts (fts, rank) VALUES (?1, ?2)",
            rusqlite::params![name, value],
        )?;
    }
    Ok(())
}

/// Creates the index's tables in the main schema of `conn`, if missing.
pub(crate) fn create_tables(conn: &Connection) -> Result<()> {
    conn.execute_batch(CREATE_FTS)?;
    terms::create(conn)
}

/// The index file of the store whose database is `db`.
pub(crate) fn index_path(db: &Path) -> PathBuf {
    db.with_file_name(INDEX_FILE)
}

/// Opens (creating if needed) the index file of the database `db` for the
/// index's writer: in WAL mode, its log cut back to `wal_limit` bytes.
/// `main` is a connection to the migrated database. An index that belongs
/// to another store or state is emptied first.
pub(crate) fn open_writer(db: &Path, main: &Connection, wal_limit: u64) -> Result<Connection> {
    let conn = Connection::open(index_path(db))?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // A derived index needs no sync of its own (see the module comment).
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    conn.pragma_update(None, "journal_size_limit", wal_limit as i64)?;
    // Immediate: another process opening the store at the same time
    // waits here instead of failing to upgrade its read to a write. The
    // database is read once the lock is held: rows another process
    // indexed before are then all at or below the highest blob id given.
    let tx = rusqlite::Transaction::new_unchecked(&conn, TransactionBehavior::Immediate)?;
    create_tables(&tx)?;
    let store_id: i64 =
        main.query_row("SELECT value FROM meta WHERE key = 'store_id'", [], |r| {
            r.get(0)
        })?;
    let last_blob = super::message::highest_blob_id(main)?;
    let indexed_for: Option<i64> = tx
        .query_row(
            "SELECT value FROM index_meta WHERE key = 'store_id'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    let highest_row: i64 =
        tx.query_row("SELECT coalesce(max(id), 0) FROM fts_docsize", [], |r| {
            r.get(0)
        })?;
    let text_version: i64 = tx
        .query_row(
            "SELECT value FROM index_meta WHERE key = 'text_version'",
            [],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(1);
    let foreign = indexed_for.is_some_and(|id| id != store_id) || highest_row > last_blob;
    if foreign || (text_version != TEXT_VERSION && highest_row > 0) {
        if foreign {
            tracing::info!(
                highest_row,
                last_blob,
                "the full-text index belongs to another store or state; building it again"
            );
        } else {
            tracing::info!(
                from = text_version,
                to = TEXT_VERSION,
                "the full-text index holds another version of the text; building it again"
            );
        }
        tx.execute_batch("DROP TABLE fts;")?;
        tx.execute_batch(terms::DROP_TERMS)?;
        create_tables(&tx)?;
    }
    tx.execute(
        "INSERT OR REPLACE INTO index_meta (key, value) VALUES ('store_id', ?1), ('text_version', ?2)",
        [store_id, TEXT_VERSION],
    )?;
    configure(&tx)?;
    tx.commit()?;
    Ok(conn)
}

/// Attaches the index file of the database `db` to `conn` (a connection to
/// `db`) as [`INDEX_SCHEMA`]; it opens read-only when `conn` is.
pub(crate) fn attach(conn: &Connection, db: &Path) -> Result<()> {
    let path = index_path(db);
    conn.execute(
        &format!("ATTACH DATABASE ?1 AS {INDEX_SCHEMA}"),
        [path.to_string_lossy()],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sql_finds_the_blob_of_every_row() {
        let c = Connection::open_in_memory().unwrap();
        let blob_of = |rowid: i64| -> i64 {
            c.query_row(
                concat!("SELECT ", blob_of_row!(), " FROM (SELECT ?1 AS rowid)"),
                [rowid],
                |r| r.get(0),
            )
            .unwrap()
        };
        for blob in [1, 7, 1 << 40] {
            assert_eq!(blob_of(blob), blob);
            for n in [1, 2, crate::text_sections::MAX_SECTIONS] {
                assert_eq!(blob_of(section_rowid(blob, n)), blob);
            }
            let (low, high) = section_rowids(blob);
            assert!(low < high && high < 0);
        }
    }
}
