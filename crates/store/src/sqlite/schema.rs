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
    // 2: what IMAP needs: the MIME structure and raw header block of each
    // blob, expunge tombstones for CONDSTORE/QRESYNC catch-up, quotas, and
    // a per-account UIDVALIDITY high-water mark.
    r#"
    -- mime_tree::MessageStructure::to_bytes() and the top-level header
    -- block (cut at INDEX_WINDOW), written at delivery. NULL for blobs
    -- delivered before this version: readers compute them from the chunks.
    ALTER TABLE blobs ADD COLUMN structure BLOB;
    ALTER TABLE blobs ADD COLUMN header BLOB;

    -- Storage limit in octets; NULL is unlimited.
    ALTER TABLE accounts ADD COLUMN quota_bytes INTEGER;
    -- Highest UIDVALIDITY ever given to a mailbox of the account, so a
    -- mailbox deleted and created again never reuses a UIDVALIDITY+UID pair
    -- (RFC 3501 §2.3.1.1).
    ALTER TABLE accounts ADD COLUMN uid_validity_last INTEGER NOT NULL DEFAULT 0;
    UPDATE accounts SET uid_validity_last =
        coalesce((SELECT max(uid_validity) FROM mailboxes WHERE account_id = accounts.id), 0);

    -- Mailbox ids are never reused: a session that still holds the id of
    -- a deleted mailbox must not find another mailbox under it.
    INSERT INTO meta (key, value)
        SELECT 'mailbox_id_last', coalesce(max(id), 0) FROM mailboxes;

    -- One row per expunged message: a session learns what other sessions
    -- expunged after the modseq it knows (RFC 7162 §3.2.10, QRESYNC).
    -- UIDs are never reused within a mailbox, so (mailbox, uid) is a key.
    CREATE TABLE expunged (
        mailbox_id INTEGER NOT NULL REFERENCES mailboxes(id) ON DELETE CASCADE,
        uid INTEGER NOT NULL,
        modseq INTEGER NOT NULL,
        PRIMARY KEY (mailbox_id, uid)
    ) STRICT, WITHOUT ROWID;
    CREATE INDEX expunged_modseq ON expunged(mailbox_id, modseq);

    -- changes_since: rows of a mailbox changed after a modseq.
    CREATE INDEX messages_modseq ON messages(mailbox_id, modseq);
    "#,
    // 3: a blob whose last reference goes is only counted down to 0; the
    // sweeper (sweep.rs) deletes its chunks, index entry and row later, so
    // an expunge no longer waits for them.
    r#"
    DROP TRIGGER blobs_release;
    -- Released blobs, for the sweeper to find without scanning.
    CREATE INDEX blobs_released ON blobs(id) WHERE refcount <= 0 AND complete = 1;
    "#,
    // 4: the MIME structure and header block move out of `blobs` into
    // their own table, so that header searches (which scan a mailbox's
    // `blobs` rows) and refcount updates touch narrow rows without
    // overflow pages.
    r#"
    -- One row per complete blob that has them, written by the delivery
    -- that completes it and deleted with the blob. Blobs delivered before
    -- version 2 have no row: readers compute both from the chunks.
    CREATE TABLE blob_parsed (
        blob_id INTEGER PRIMARY KEY,
        -- mime_tree::MessageStructure::to_bytes()
        structure BLOB NOT NULL,
        -- The top-level header block, cut at INDEX_WINDOW.
        header BLOB NOT NULL
    ) STRICT;
    INSERT INTO blob_parsed (blob_id, structure, header)
        SELECT id, structure, header FROM blobs
        WHERE structure IS NOT NULL AND header IS NOT NULL;
    ALTER TABLE blobs DROP COLUMN structure;
    ALTER TABLE blobs DROP COLUMN header;
    "#,
    // Webmail: sessions that survive a restart (only a hash of the cookie
    // is kept), and each account's webmail settings.
    r#"
    CREATE TABLE IF NOT EXISTS web_sessions (
        -- SHA-256 of the session cookie's value, hex.
        id_hash TEXT PRIMARY KEY,
        account_id INTEGER NOT NULL,
        -- The token every state-changing form carries.
        csrf TEXT NOT NULL,
        created INTEGER NOT NULL,
        expires INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX IF NOT EXISTS web_sessions_account ON web_sessions(account_id);
    CREATE TABLE IF NOT EXISTS web_settings (
        account_id INTEGER PRIMARY KEY,
        display_name TEXT NOT NULL DEFAULT '',
        signature TEXT NOT NULL DEFAULT '',
        page_size INTEGER NOT NULL DEFAULT 50,
        -- Senders whose remote content (images) is loaded without asking,
        -- one normalised address per line.
        remote_ok TEXT NOT NULL DEFAULT ''
    ) STRICT;
    "#,
    // Tombstones keep the expunged entry (blob, size, flags, date,
    // keywords): a session that still shows the message may FETCH it until
    // it has announced the EXPUNGE (RFC 2180 §4.1), and the sweeper keeps
    // such blobs (pins.rs). Older tombstones have none and are never read.
    r#"
    ALTER TABLE expunged ADD COLUMN blob_id INTEGER;
    ALTER TABLE expunged ADD COLUMN size INTEGER;
    ALTER TABLE expunged ADD COLUMN flags INTEGER;
    ALTER TABLE expunged ADD COLUMN internal_date INTEGER;
    ALTER TABLE expunged ADD COLUMN keywords TEXT;
    CREATE INDEX expunged_blob ON expunged(blob_id) WHERE blob_id IS NOT NULL;
    "#,
    // The outbound queue is sent: a lease per row in flight, and an index
    // for finding due rows.
    r#"
    ALTER TABLE queue ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX queue_due ON queue(next_attempt);
    -- The sender was told of the delay (one warning per recipient).
    ALTER TABLE queue ADD COLUMN warned INTEGER NOT NULL DEFAULT 0;
    "#,
    // SENTBEFORE/SENTON/SENTSINCE compare the Date: field's day as written
    // (RFC 3501 §6.4.4), not its UTC conversion. Older rows get the UTC
    // day, the best their stored date allows.
    r#"
    ALTER TABLE blobs ADD COLUMN hdr_day INTEGER;
    UPDATE blobs SET hdr_day = (hdr_date - ((hdr_date % 86400) + 86400) % 86400) / 86400
        WHERE hdr_date IS NOT NULL;
    CREATE INDEX blobs_day ON blobs(hdr_day);
    "#,
    // IMAP \Recent: UIDs from recent_from on have not been taken as recent
    // by a session yet. Existing mail is not recent.
    r#"
    ALTER TABLE mailboxes ADD COLUMN recent_from INTEGER NOT NULL DEFAULT 0;
    UPDATE mailboxes SET recent_from = uid_next;
    "#,
    // Subscriptions outlive their mailboxes (RFC 3501 §6.3.6: a server
    // must not drop one because the mailbox went): the names of deleted
    // mailboxes that were subscribed. A mailbox created again under such a
    // name is subscribed again.
    r#"
    CREATE TABLE lost_subscriptions (
        account_id INTEGER NOT NULL,
        name TEXT NOT NULL,
        PRIMARY KEY (account_id, name)
    ) STRICT;
    "#,
    // DKIM keys of the local domains (removing a domain removes its keys).
    r#"
    CREATE TABLE dkim_keys (
        domain TEXT NOT NULL,
        selector TEXT NOT NULL,
        -- 'rsa-sha256' or 'ed25519-sha256'
        algorithm TEXT NOT NULL,
        private_der BLOB NOT NULL,
        -- base64, as published in the p= tag
        public_key TEXT NOT NULL,
        created INTEGER NOT NULL,
        signing INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (domain, selector)
    ) STRICT;
    "#,
    // Delivery status notification requests (RFC 3461) of queued
    // recipients: NOTIFY bits (0: none given), ORCPT, and the message's
    // ENVID and RET=FULL.
    r#"
    ALTER TABLE queue ADD COLUMN notify INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE queue ADD COLUMN orcpt TEXT;
    ALTER TABLE queue ADD COLUMN envid TEXT;
    ALTER TABLE queue ADD COLUMN ret_full INTEGER NOT NULL DEFAULT 0;
    "#,
    // Whether a queued message has 8-bit content: a server without
    // 8BITMIME cannot take it (RFC 6152).
    r#"
    ALTER TABLE queue ADD COLUMN eight_bit INTEGER NOT NULL DEFAULT 0;
    "#,
    // Sieve scripts (RFC 5228), per account; account 0 holds the global
    // scripts `include :global` reaches (RFC 6609). At most one active
    // script per account (RFC 5804 §1.5). The memory keeps vacation
    // answers sent (RFC 5230 §4.2) and message ids seen by `duplicate`
    // (RFC 7352) until they expire.
    r#"
    CREATE TABLE sieve_scripts (
        account_id INTEGER NOT NULL,
        name TEXT NOT NULL,
        source TEXT NOT NULL,
        active INTEGER NOT NULL DEFAULT 0,
        updated INTEGER NOT NULL,
        PRIMARY KEY (account_id, name)
    ) STRICT;
    CREATE TABLE sieve_memory (
        account_id INTEGER NOT NULL,
        key TEXT NOT NULL,
        expires INTEGER NOT NULL,
        PRIMARY KEY (account_id, key)
    ) STRICT, WITHOUT ROWID;
    "#,
    // The spam classifier's models: token counts per account (account 0
    // is the global model), how many messages trained each class, what
    // each message was trained as (so moving it back and forth counts
    // once), and the moves into and out of Junk waiting to train.
    r#"
    CREATE TABLE spam_tokens (
        account_id INTEGER NOT NULL,
        token TEXT NOT NULL,
        spam INTEGER NOT NULL DEFAULT 0,
        ham INTEGER NOT NULL DEFAULT 0,
        seen INTEGER NOT NULL,
        PRIMARY KEY (account_id, token)
    ) STRICT, WITHOUT ROWID;
    CREATE TABLE spam_totals (
        account_id INTEGER PRIMARY KEY,
        spam INTEGER NOT NULL DEFAULT 0,
        ham INTEGER NOT NULL DEFAULT 0
    ) STRICT;
    CREATE TABLE spam_trained (
        account_id INTEGER NOT NULL,
        blob_id INTEGER NOT NULL,
        spam INTEGER NOT NULL,
        PRIMARY KEY (account_id, blob_id)
    ) STRICT, WITHOUT ROWID;
    CREATE TABLE spam_training (
        id INTEGER PRIMARY KEY,
        account_id INTEGER NOT NULL,
        blob_id INTEGER NOT NULL,
        spam INTEGER NOT NULL
    ) STRICT;
    -- Blob ids can be used again once freed: what was known of a freed
    -- blob goes with it.
    CREATE INDEX spam_trained_blob ON spam_trained (blob_id);
    CREATE TRIGGER spam_blob_gone AFTER DELETE ON blobs BEGIN
        DELETE FROM spam_trained WHERE blob_id = OLD.id;
        DELETE FROM spam_training WHERE blob_id = OLD.id;
    END;
    "#,
    // An account's own spam threshold (NULL: the site's `[spam]
    // threshold`); in the directory snapshot, so delivery reads no row.
    r#"
    ALTER TABLE accounts ADD COLUMN spam_threshold REAL;
    "#,
    // Indexes no query uses: searches on these fields are substring tests
    // (`sluice_contains`) that no index serves, and nothing looks a blob
    // up by Message-ID or date. Each cost every delivery a leaf page at a
    // random place in its tree, a WAL frame per message: about 4 bytes of
    // log per byte of mail between them. `blobs_day` stays: SENT*
    // searches go through it.
    r#"
    DROP INDEX blobs_date;
    DROP INDEX blobs_message_id;
    DROP INDEX blobs_from;
    DROP INDEX blobs_subject;
    "#,
    // Chunks are compressed when that saves space (chunk_codec.rs); each
    // names its codec, and the ones written before are raw (0).
    r#"
    ALTER TABLE blob_chunks ADD COLUMN codec INTEGER NOT NULL DEFAULT 0;
    "#,
    // The full-text index again, for text in scripts without spaces: its
    // rows now hold that text cut into characters (crate::segment), and
    // combining marks (Thai vowels and tone marks, Devanagari vowel signs)
    // are part of their word instead of cutting it; Latin accents are
    // still folded away by remove_diacritics. The table starts empty: the
    // store indexes every message again from its chunks when it opens, in
    // the background (fts_batch.rs), and text searches wait for that.
    r#"
    DROP TABLE fts;
    CREATE VIRTUAL TABLE fts USING fts5(
        subject, addresses, body,
        content = '', contentless_delete = 1,
        tokenize = "unicode61 remove_diacritics 2 categories 'L* N* Co M*'"
    );
    "#,
    // Each mailbox keeps its counts (messages, unseen, \Deleted, bytes),
    // kept right by triggers on every path that adds, removes, moves or
    // flags a message: STATUS, SELECT and the webmail's folder list read
    // one row instead of counting every message of the mailbox. (Flag bits:
    // \Seen 1, \Deleted 8, as model.rs.) And an index in date order, so
    // the webmail's newest-first page is read in place, not sorted.
    r#"
    ALTER TABLE mailboxes ADD COLUMN n_messages INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE mailboxes ADD COLUMN n_unseen INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE mailboxes ADD COLUMN n_deleted INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE mailboxes ADD COLUMN n_bytes INTEGER NOT NULL DEFAULT 0;
    UPDATE mailboxes SET
        n_messages = (SELECT count(*) FROM messages m WHERE m.mailbox_id = mailboxes.id),
        n_unseen = (SELECT count(*) FROM messages m WHERE m.mailbox_id = mailboxes.id AND (m.flags & 1) = 0),
        n_deleted = (SELECT count(*) FROM messages m WHERE m.mailbox_id = mailboxes.id AND (m.flags & 8) != 0),
        n_bytes = (SELECT coalesce(sum(m.size), 0) FROM messages m WHERE m.mailbox_id = mailboxes.id);
    CREATE TRIGGER messages_counted_in AFTER INSERT ON messages BEGIN
        UPDATE mailboxes SET n_messages = n_messages + 1,
            n_unseen = n_unseen + ((NEW.flags & 1) = 0),
            n_deleted = n_deleted + ((NEW.flags & 8) != 0),
            n_bytes = n_bytes + NEW.size
        WHERE id = NEW.mailbox_id;
    END;
    CREATE TRIGGER messages_counted_out AFTER DELETE ON messages BEGIN
        UPDATE mailboxes SET n_messages = n_messages - 1,
            n_unseen = n_unseen - ((OLD.flags & 1) = 0),
            n_deleted = n_deleted - ((OLD.flags & 8) != 0),
            n_bytes = n_bytes - OLD.size
        WHERE id = OLD.mailbox_id;
    END;
    CREATE TRIGGER messages_counted_again AFTER UPDATE OF mailbox_id, flags, size ON messages
    WHEN OLD.mailbox_id != NEW.mailbox_id OR (OLD.flags & 9) != (NEW.flags & 9) OR OLD.size != NEW.size
    BEGIN
        UPDATE mailboxes SET n_messages = n_messages - 1,
            n_unseen = n_unseen - ((OLD.flags & 1) = 0),
            n_deleted = n_deleted - ((OLD.flags & 8) != 0),
            n_bytes = n_bytes - OLD.size
        WHERE id = OLD.mailbox_id;
        UPDATE mailboxes SET n_messages = n_messages + 1,
            n_unseen = n_unseen + ((NEW.flags & 1) = 0),
            n_deleted = n_deleted + ((NEW.flags & 8) != 0),
            n_bytes = n_bytes + NEW.size
        WHERE id = NEW.mailbox_id;
    END;
    CREATE INDEX messages_date ON messages(mailbox_id, internal_date, uid);
    "#,
    // The full-text index moves to a file of its own (fts_file.rs). The
    // table here is dropped, not copied: a contentless FTS5 table keeps no
    // text to copy, and copying its shadow tables would depend on FTS5's
    // private layout. The store indexes every message again from its
    // chunks when it opens, in the background, as after a crash, and text
    // searches wait for that. From here on blob ids are never given twice
    // (the index keys its rows by blob id in a file a sweep cannot change
    // in the same transaction): `blob_id_last` is the highest ever given.
    // `store_id` tells an index file which store it belongs to.
    r#"
    DROP TABLE IF EXISTS fts;
    INSERT OR IGNORE INTO meta (key, value)
        VALUES ('blob_id_last', (SELECT coalesce(max(id), 0) FROM blobs));
    INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', random());
    CREATE TRIGGER IF NOT EXISTS blobs_id_last AFTER INSERT ON blobs BEGIN
        UPDATE meta SET value = NEW.id WHERE key = 'blob_id_last' AND value < NEW.id;
    END;
    "#,
    // SENT* searches test the day on the mailbox's blob rows, as FROM and
    // SUBJECT test theirs (search.rs), instead of looking it up in an
    // index by day: sent days fall anywhere in it, so every delivery
    // wrote a leaf page at a random place, about a quarter of the
    // database's write-ahead log (0.9 byte of log per byte of mail).
    r#"
    DROP INDEX IF EXISTS blobs_day;
    "#,
    // A blob's header block is kept packed as its chunks are, compressed
    // when that saves an eighth or more (chunk_codec.rs): about 600 bytes
    // of header fields per message shrink by a third. Each row names its
    // codec; the ones written before are raw (0).
    r#"
    ALTER TABLE blob_parsed ADD COLUMN header_codec INTEGER NOT NULL DEFAULT 0;
    "#,
    // No index of incomplete blobs: only the server's start looks for
    // them (SqliteStore::recover, one pass over the table), and every
    // delivery passed its blob through the index (inserted incomplete,
    // then completed), a page of log per transaction.
    r#"
    DROP INDEX IF EXISTS blobs_incomplete;
    "#,
    // New blobs are stored in smaller pieces (message.rs, PIECE_SIZE);
    // each blob says the size of its own, so blobs written before, in
    // pieces of CHUNK_SIZE, read as they are.
    r#"
    ALTER TABLE blobs ADD COLUMN piece_size INTEGER NOT NULL DEFAULT 131072;
    "#,
    // zstd dictionaries trained on the store's own mail (dictionary.rs),
    // by the id their frames carry; chunks packed with one say so (codec
    // 2). Never deleted while a chunk may name them.
    r#"
    CREATE TABLE zstd_dictionaries (
        id INTEGER PRIMARY KEY,
        dict BLOB NOT NULL,
        created INTEGER NOT NULL
    ) STRICT;
    "#,
    // Blob ids are still never given twice, but `blob_id_last` moves only
    // when a blob above it is deleted, not at every delivery (where it
    // cost a page of log per transaction, about 0.2 byte per byte of
    // mail): every id given is at or below the larger of the mark and the
    // highest id in the table, and a new blob takes the next one
    // (message.rs `new_blob`).
    r#"
    DROP TRIGGER IF EXISTS blobs_id_last;
    CREATE TRIGGER blobs_id_kept AFTER DELETE ON blobs BEGIN
        UPDATE meta SET value = OLD.id WHERE key = 'blob_id_last' AND value < OLD.id;
    END;
    "#,
    // JMAP uploads (RFC 8620 §6.1): a blob an account uploaded, holding a
    // reference of its own until it expires; expired ones are deleted by
    // the next upload, and their blobs swept like any released blob.
    r#"
    CREATE TABLE uploads (
        blob_id INTEGER PRIMARY KEY,
        account_id INTEGER NOT NULL,
        content_type TEXT NOT NULL,
        expires INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX uploads_account ON uploads(account_id);
    CREATE INDEX uploads_expires ON uploads(expires);
    CREATE TRIGGER uploads_ref AFTER INSERT ON uploads BEGIN
        UPDATE blobs SET refcount = refcount + 1 WHERE id = NEW.blob_id;
    END;
    CREATE TRIGGER uploads_unref AFTER DELETE ON uploads BEGIN
        UPDATE blobs SET refcount = refcount - 1 WHERE id = OLD.blob_id;
    END;
    "#,
    // One modification sequence per account (JMAP's state, RFC 8620 §5.1):
    // every change to an account's mailboxes and messages takes the
    // account's next modseq, which becomes the mailbox's HIGHESTMODSEQ
    // (still growing in each mailbox, as RFC 7162 asks). Mailboxes note
    // when they were created and last renamed or (un)subscribed, and
    // leave a row when deleted; `emails` is the account's view of its
    // messages (one row per blob it holds, with its thread and when it
    // came and last changed mailboxes), `emails_gone` the ones whose last
    // entry went. Existing mail counts as there from the start, each
    // message in a thread of its own.
    r#"
    ALTER TABLE accounts ADD COLUMN modseq INTEGER NOT NULL DEFAULT 0;
    UPDATE accounts SET modseq =
        coalesce((SELECT max(highest_modseq) FROM mailboxes WHERE account_id = accounts.id), 0);
    ALTER TABLE mailboxes ADD COLUMN created_modseq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE mailboxes ADD COLUMN meta_modseq INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE mailboxes_gone (
        account_id INTEGER NOT NULL,
        mailbox_id INTEGER NOT NULL,
        created INTEGER NOT NULL,
        modseq INTEGER NOT NULL,
        PRIMARY KEY (account_id, mailbox_id)
    ) STRICT, WITHOUT ROWID;
    CREATE TABLE emails (
        account_id INTEGER NOT NULL,
        blob_id INTEGER NOT NULL,
        thread_id INTEGER NOT NULL,
        created INTEGER NOT NULL,
        changed INTEGER NOT NULL,
        PRIMARY KEY (account_id, blob_id)
    ) STRICT, WITHOUT ROWID;
    CREATE INDEX emails_thread ON emails(account_id, thread_id);
    CREATE TABLE emails_gone (
        account_id INTEGER NOT NULL,
        modseq INTEGER NOT NULL,
        blob_id INTEGER NOT NULL,
        thread_id INTEGER NOT NULL,
        created INTEGER NOT NULL,
        PRIMARY KEY (account_id, modseq, blob_id)
    ) STRICT, WITHOUT ROWID;
    INSERT OR IGNORE INTO emails (account_id, blob_id, thread_id, created, changed)
        SELECT x.account_id, m.blob_id, m.blob_id, 0, 0
        FROM messages m JOIN mailboxes x ON x.id = m.mailbox_id;
    "#,
    // Records protocols keep per account (JMAP Identity, EmailSubmission):
    // a JSON body each, a tombstone (NULL body) once destroyed, and the
    // kind's change number at the last write.
    r#"
    CREATE TABLE account_records (
        account_id INTEGER NOT NULL,
        kind TEXT NOT NULL,
        id TEXT NOT NULL,
        changed INTEGER NOT NULL,
        body TEXT,
        PRIMARY KEY (account_id, kind, id)
    ) STRICT, WITHOUT ROWID;
    "#,
];

// The count triggers spell the flag bits out in SQL.
const _: () = assert!(crate::model::FLAG_SEEN == 1 && crate::model::FLAG_DELETED == 8);

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema version just before the migration whose text holds
    /// `marker`: a test starts there, whatever migrations come after.
    fn version_before(marker: &str) -> usize {
        MIGRATIONS
            .iter()
            .position(|sql| sql.contains(marker))
            .unwrap_or_else(|| panic!("no migration holds {marker}"))
    }

    #[test]
    fn version_one_data_is_carried_into_version_two() {
        let mut c = Connection::open_in_memory().unwrap();
        c.execute_batch(MIGRATIONS[0]).unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
        c.execute_batch(
            "INSERT INTO domains (id, name) VALUES (1, 'example.org');
             INSERT INTO accounts (id, address, domain_id, password_hash, created)
                 VALUES (1, 'a@example.org', 1, 'x', 0);
             INSERT INTO mailboxes (id, account_id, name, uid_validity) VALUES
                 (3, 1, 'INBOX', 1000), (7, 1, 'Sent', 1200);",
        )
        .unwrap();
        migrate(&mut c).unwrap();
        let version: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let (last_validity, quota): (i64, Option<i64>) = c
            .query_row(
                "SELECT uid_validity_last, quota_bytes FROM accounts WHERE id = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((last_validity, quota), (1200, None));
        let last_id: i64 = c
            .query_row(
                "SELECT value FROM meta WHERE key = 'mailbox_id_last'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(last_id, 7);
        // Tombstones go with their mailbox.
        c.execute_batch(
            "PRAGMA foreign_keys = ON;
             INSERT INTO expunged (mailbox_id, uid, modseq) VALUES (7, 1, 2);
             DELETE FROM mailboxes WHERE id = 7;",
        )
        .unwrap();
        let left: i64 = c
            .query_row("SELECT count(*) FROM expunged", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 0);
    }

    #[test]
    fn version_three_structures_and_headers_move_to_their_own_table() {
        let mut c = Connection::open_in_memory().unwrap();
        for sql in &MIGRATIONS[..3] {
            c.execute_batch(sql).unwrap();
        }
        c.pragma_update(None, "user_version", 3).unwrap();
        // Blob 1 has both, blob 2 predates version 2, blob 3 is still
        // being written.
        c.execute_batch(
            "INSERT INTO blobs (id, complete, created, hdr_date, structure, header)
                 VALUES (1, 1, 0, 86400, X'0102', CAST('Subject: a\r\n\r\n' AS BLOB)),
                        (2, 1, 0, NULL, NULL, NULL),
                        (3, 0, 0, NULL, NULL, NULL);",
        )
        .unwrap();
        migrate(&mut c).unwrap();
        let rows: Vec<(i64, Vec<u8>, Vec<u8>)> = c
            .prepare("SELECT blob_id, structure, header FROM blob_parsed ORDER BY blob_id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(rows, [(1, vec![1, 2], b"Subject: a\r\n\r\n".to_vec())]);
        let columns: Vec<String> = c
            .prepare("SELECT name FROM pragma_table_info('blobs')")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(
            !columns.iter().any(|n| n == "structure" || n == "header"),
            "{columns:?}"
        );
        let (blobs, dated): (i64, i64) = c
            .query_row("SELECT count(*), count(hdr_date) FROM blobs", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((blobs, dated), (3, 1));
    }

    #[test]
    fn no_index_of_incomplete_blobs_is_kept() {
        let mut c = Connection::open_in_memory().unwrap();
        migrate(&mut c).unwrap();
        let indexes: Vec<String> = c
            .prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'blobs'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(indexes, ["blobs_released"]);
    }

    #[test]
    fn header_blocks_written_before_packing_read_as_raw() {
        let mut c = Connection::open_in_memory().unwrap();
        let before = version_before("header_codec");
        for sql in &MIGRATIONS[..before] {
            c.execute_batch(sql).unwrap();
        }
        c.pragma_update(None, "user_version", before as i64)
            .unwrap();
        c.execute_batch(
            "INSERT INTO blob_parsed (blob_id, structure, header)
                 VALUES (1, X'01', CAST('Subject: a\r\n\r\n' AS BLOB));",
        )
        .unwrap();
        migrate(&mut c).unwrap();
        let (codec, header): (i64, Vec<u8>) = c
            .query_row(
                "SELECT header_codec, header FROM blob_parsed WHERE blob_id = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(codec, crate::chunk_codec::RAW);
        assert_eq!(header, b"Subject: a\r\n\r\n");
    }

    #[test]
    fn the_index_by_sent_day_is_dropped_and_the_days_kept() {
        let mut c = Connection::open_in_memory().unwrap();
        let before = version_before("DROP INDEX IF EXISTS blobs_day");
        for sql in &MIGRATIONS[..before] {
            c.execute_batch(sql).unwrap();
        }
        c.pragma_update(None, "user_version", before as i64)
            .unwrap();
        c.execute_batch(
            "INSERT INTO blobs (id, complete, created, hdr_date, hdr_day) VALUES (1, 1, 0, 864000, 10);",
        )
        .unwrap();
        let index = |c: &Connection| -> i64 {
            c.query_row(
                "SELECT count(*) FROM sqlite_schema WHERE name = 'blobs_day'",
                [],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!(index(&c), 1);
        migrate(&mut c).unwrap();
        assert_eq!(index(&c), 0);
        let day: i64 = c
            .query_row("SELECT hdr_day FROM blobs WHERE id = 1", [], |r| r.get(0))
            .unwrap();
        assert_eq!(day, 10);
    }

    #[test]
    fn from_version_three_the_last_reference_only_counts_down() {
        let mut c = Connection::open_in_memory().unwrap();
        migrate(&mut c).unwrap();
        c.execute_batch(
            "INSERT INTO domains (id, name) VALUES (1, 'example.org');
             INSERT INTO accounts (id, address, domain_id, password_hash, created)
                 VALUES (1, 'a@example.org', 1, 'x', 0);
             INSERT INTO mailboxes (id, account_id, name, uid_validity) VALUES (1, 1, 'INBOX', 1);
             INSERT INTO blobs (id, complete, created) VALUES (5, 1, 0);
             INSERT INTO blob_chunks (blob_id, seq, data) VALUES (5, 0, X'00');
             INSERT INTO messages (mailbox_id, uid, blob_id, size, internal_date, modseq)
                 VALUES (1, 1, 5, 1, 0, 1);
             DELETE FROM messages;",
        )
        .unwrap();
        let (refcount, chunks): (i64, i64) = c
            .query_row(
                "SELECT refcount, (SELECT count(*) FROM blob_chunks) FROM blobs WHERE id = 5",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((refcount, chunks), (0, 1), "left for the sweeper");
    }
}
