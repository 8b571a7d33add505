//! Versioned schema migrations, tracked with `PRAGMA user_version`.
//!
//! Each entry of [`MIGRATIONS`] moves the schema one version up; a database
//! is brought to the newest version at open, in one transaction per step.

use rusqlite::Connection;

use crate::error::{Result, StoreError};

/// Migration `i` moves the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: directory, mailboxes, single-copy blobs with header and full-text
    // indexes, outbound queue.
    r#"
    CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) STRICT;
    INSERT INTO meta (key, value) VALUES ('directory_serial', 1);

    CREATE TABLE domains (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE
    ) STRICT;

    CREATE TABLE accounts (
        id INTEGER PRIMARY KEY,
        address TEXT NOT NULL UNIQUE,
        domain_id INTEGER NOT NULL REFERENCES domains(id),
        password_hash TEXT NOT NULL,
        created INTEGER NOT NULL
    ) STRICT;

    CREATE TABLE aliases (
        address TEXT NOT NULL,
        target TEXT NOT NULL,
        PRIMARY KEY (address, target)
    ) STRICT;

    CREATE TABLE mailboxes (
        id INTEGER PRIMARY KEY,
        account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        special_use TEXT,
        uid_validity INTEGER NOT NULL,
        uid_next INTEGER NOT NULL DEFAULT 1,
        highest_modseq INTEGER NOT NULL DEFAULT 1,
        subscribed INTEGER NOT NULL DEFAULT 1,
        UNIQUE (account_id, name)
    ) STRICT;

    -- One row per stored message text, shared by every mailbox entry that
    -- references it (single-copy storage). The header columns are filled
    -- at delivery so lists and header searches never read the chunks.
    CREATE TABLE blobs (
        id INTEGER PRIMARY KEY,
        size INTEGER NOT NULL DEFAULT 0,
        refcount INTEGER NOT NULL DEFAULT 0,
        complete INTEGER NOT NULL DEFAULT 0,
        created INTEGER NOT NULL,
        hdr_from TEXT NOT NULL DEFAULT '',
        hdr_to TEXT NOT NULL DEFAULT '',
        hdr_cc TEXT NOT NULL DEFAULT '',
        hdr_subject TEXT NOT NULL DEFAULT '',
        hdr_date INTEGER,
        hdr_message_id TEXT NOT NULL DEFAULT ''
    ) STRICT;
    CREATE INDEX blobs_incomplete ON blobs(complete) WHERE complete = 0;
    CREATE INDEX blobs_date ON blobs(hdr_date);
    CREATE INDEX blobs_message_id ON blobs(hdr_message_id);
    CREATE INDEX blobs_from ON blobs(hdr_from COLLATE NOCASE);
    CREATE INDEX blobs_subject ON blobs(hdr_subject COLLATE NOCASE);

    CREATE TABLE blob_chunks (
        blob_id INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (blob_id, seq)
    ) STRICT;

    CREATE TABLE messages (
        mailbox_id INTEGER NOT NULL REFERENCES mailboxes(id) ON DELETE CASCADE,
        uid INTEGER NOT NULL,
        blob_id INTEGER NOT NULL REFERENCES blobs(id),
        size INTEGER NOT NULL,
        flags INTEGER NOT NULL DEFAULT 0,
        keywords TEXT NOT NULL DEFAULT '',
        internal_date INTEGER NOT NULL,
        modseq INTEGER NOT NULL,
        PRIMARY KEY (mailbox_id, uid)
    ) STRICT, WITHOUT ROWID;
    CREATE INDEX messages_blob ON messages(blob_id);

    CREATE TABLE queue (
        id INTEGER PRIMARY KEY,
        blob_id INTEGER NOT NULL REFERENCES blobs(id),
        sender TEXT NOT NULL,
        recipient TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt INTEGER NOT NULL,
        last_error TEXT,
        created INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX queue_blob ON queue(blob_id);

    -- Text of subject, addresses and text parts; rowid = blobs.id. The
    -- table keeps no copy of the text (contentless), only the index.
    CREATE VIRTUAL TABLE fts USING fts5(
        subject, addresses, body,
        content = '', contentless_delete = 1,
        tokenize = 'unicode61 remove_diacritics 2'
    );

    -- Reference counts follow the rows that point at a blob, whatever
    -- deletes them (expunge, account removal through ON DELETE CASCADE).
    CREATE TRIGGER messages_ref AFTER INSERT ON messages BEGIN
        UPDATE blobs SET refcount = refcount + 1 WHERE id = NEW.blob_id;
    END;
    CREATE TRIGGER messages_unref AFTER DELETE ON messages BEGIN
        UPDATE blobs SET refcount = refcount - 1 WHERE id = OLD.blob_id;
    END;
    CREATE TRIGGER queue_ref AFTER INSERT ON queue BEGIN
        UPDATE blobs SET refcount = refcount + 1 WHERE id = NEW.blob_id;
    END;
    CREATE TRIGGER queue_unref AFTER DELETE ON queue BEGIN
        UPDATE blobs SET refcount = refcount - 1 WHERE id = OLD.blob_id;
    END;
    -- The last reference gone: the blob, its chunks and its index entry go.
    CREATE TRIGGER blobs_release AFTER UPDATE OF refcount ON blobs
    WHEN NEW.refcount <= 0 AND NEW.complete = 1 BEGIN
        DELETE FROM blob_chunks WHERE blob_id = NEW.id;
        DELETE FROM fts WHERE rowid = NEW.id;
        DELETE FROM blobs WHERE id = NEW.id;
    END;
    "#,
];

/// Newest schema version this build knows.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database to [`SCHEMA_VERSION`].
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    // Another process (the command line next to a running server) may
    // migrate at the same time: each step re-reads the version inside an
    // immediate (write-locked) transaction.
    loop {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let Some(sql) = MIGRATIONS.get(version as usize) else {
            break;
        };
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
        tracing::info!(version = version + 1, "store schema migrated");
    }
    Ok(())
}
