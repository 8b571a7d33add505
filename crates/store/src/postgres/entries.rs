//! (PostgreSQL) Message entries of a mailbox as sets: flag changes,
//! copies, moves and expunges, each a fixed number of statements whatever
//! the number of messages (UID lists travel as arrays), and the reads IMAP
//! sessions catch up with. The answers are the SQLite back end's
//! (sqlite/entries.rs).
//!
//! Every change takes the mailbox's next modification sequence (RFC 7162
//! §3) for all the rows it touches; an expunge leaves a tombstone per
//! message with that modseq, so a session learns what others expunged.
//!
//! Several nodes may write one mailbox at once, so a change first takes
//! its modseq (or UIDs) with `UPDATE mailboxes ... RETURNING`: the row
//! lock orders writers of a mailbox, and taking it before any message row
//! keeps every writer's locks in one order. A change that turns out to
//! change nothing rolls back, so HIGHESTMODSEQ moves only when a message
//! changed, as in the SQLite back end.

use std::collections::HashMap;

use deadpool_postgres::{GenericClient, Transaction};
use mime_tree::{MessageStructure, StructureBuilder};
use tokio_postgres::types::ToSql;
use tokio_postgres::{IsolationLevel, Row};

use super::prepared::Prepared;
use super::{Conn, PgStore};
use crate::chunk_codec;
use crate::error::{Result, StoreError};
use crate::index::{header_block, IndexedHeaders};
use crate::keyword;
use crate::model::{
    BlobId, Changes, FlagChange, MailboxId, MessageData, MessageEntry, Uid, FLAG_DELETED,
};
use crate::spam_training::class_for_move;
use crate::INDEX_WINDOW;

/// Columns read into a [`MessageEntry`] by [`entry_from_row`].
const ENTRY_COLUMNS: &str = "uid, blob_id, size, flags, internal_date, modseq, keywords";

fn entry_from_row(r: &Row) -> MessageEntry {
    MessageEntry {
        uid: r.get::<_, i64>(0) as Uid,
        blob: r.get(1),
        size: r.get::<_, i64>(2) as u64,
        flags: r.get::<_, i32>(3) as u32,
        internal_date: r.get(4),
        modseq: r.get::<_, i64>(5) as u64,
        keywords: keyword::split(r.get(6)).map(str::to_string).collect(),
    }
}

/// UIDs as a `bigint[]` parameter.
fn uid_array(uids: &[Uid]) -> Vec<i64> {
    uids.iter().map(|u| i64::from(*u)).collect()
}

/// A modseq from a client, as the database holds it (at most `i64::MAX`).
fn sql_modseq(modseq: u64) -> i64 {
    i64::try_from(modseq).unwrap_or(i64::MAX)
}

/// A page size or offset for LIMIT/OFFSET, which PostgreSQL wants
/// non-negative: a size past `i64::MAX` is "all of them".
fn sql_count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn mailbox_not_found(mailbox: MailboxId) -> StoreError {
    StoreError::NotFound(format!("mailbox {mailbox}"))
}

/// Takes the mailbox's next modseq, locking its row until the end of the
/// transaction; `None` for a mailbox that does not exist.
async fn bump_modseq(tx: &Transaction<'_>, mailbox: MailboxId) -> Result<Option<i64>> {
    // The account's next modseq (account_view.rs): its row first, then
    // the mailbox's, the lock order of every path.
    super::account_view::next_modseq(tx, mailbox).await
}

/// A transaction that reads one snapshot: its statements agree with each
/// other, as the SQLite back end's reads do.
pub(super) async fn snapshot(c: &mut Conn) -> Result<Transaction<'_>> {
    Ok(c.build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?)
}

/// A message's flags after a change, as SQL in the SQLite back end
/// computes them (`flags | x`, `flags & ~x`, `x`).
fn changed_flags(old: u32, change: FlagChange, flags: u32) -> u32 {
    match change {
        FlagChange::Add => old | flags,
        FlagChange::Remove => old & !flags,
        FlagChange::Replace => flags,
    }
}

/// Changes flags and keywords; see [`crate::Store::update_flags`].
/// `keywords` is already [`keyword::normalize`]d. Returns the changed
/// entries in UID order; when there are none the caller rolls back, so
/// the modseq taken is not spent.
async fn update_flag_rows(
    tx: &Transaction<'_>,
    mailbox: MailboxId,
    uids: &[Uid],
    change: FlagChange,
    flags: u32,
    keywords: &[String],
    unchanged_since: Option<u64>,
) -> Result<Vec<MessageEntry>> {
    let modseq = bump_modseq(tx, mailbox)
        .await?
        .ok_or_else(|| mailbox_not_found(mailbox))?;
    let limit = unchanged_since.map_or(i64::MAX, sql_modseq);
    let rows = tx
        .query_prepared(
            &format!(
                "SELECT {ENTRY_COLUMNS} FROM messages
                 WHERE mailbox_id = $1 AND uid = ANY($2) AND modseq <= $3
                 ORDER BY uid FOR UPDATE"
            ),
            &[&mailbox, &uid_array(uids), &limit],
        )
        .await?;
    let op = keyword::op_code(change);
    let list = keywords.join(" ");
    // Only rows that really change are written (and get the new modseq).
    let mut changed = Vec::new();
    for row in &rows {
        let old_keywords: &str = row.get(6);
        let mut entry = entry_from_row(row);
        let new_flags = changed_flags(entry.flags, change, flags);
        let new_keywords = keyword::merge(old_keywords, op, &list);
        if new_flags == entry.flags && new_keywords == old_keywords {
            continue;
        }
        entry.flags = new_flags;
        entry.keywords = keyword::split(&new_keywords).map(str::to_string).collect();
        entry.modseq = modseq as u64;
        changed.push(entry);
    }
    if changed.is_empty() {
        return Ok(changed);
    }
    let uids: Vec<i64> = changed.iter().map(|e| i64::from(e.uid)).collect();
    // Flags are bit sets: stored as `integer`, read back as the same bits.
    let flags: Vec<i32> = changed.iter().map(|e| e.flags as i32).collect();
    let keywords: Vec<String> = changed.iter().map(|e| e.keywords.join(" ")).collect();
    tx.execute_prepared(
        "UPDATE messages m SET flags = c.flags, keywords = c.keywords, modseq = $2
         FROM unnest($3::bigint[], $4::integer[], $5::text[]) AS c(uid, flags, keywords)
         WHERE m.mailbox_id = $1 AND m.uid = c.uid",
        &[&mailbox, &modseq, &uids, &flags, &keywords],
    )
    .await?;
    Ok(changed)
}

/// Which entries an expunge takes.
enum Which<'a> {
    /// These UIDs.
    Uids(&'a [Uid]),
    /// Those flagged `\Deleted`, optionally only among these UIDs.
    Deleted(Option<&'a [Uid]>),
}

/// Deletes entries and leaves their tombstones, in one statement whatever
/// their number. Returns the expunged UIDs, ascending; none for a mailbox
/// that does not exist (the SQLite back end finds nothing to delete there
/// either).
async fn expunge_where(
    tx: &Transaction<'_>,
    mailbox: MailboxId,
    which: Which<'_>,
) -> Result<Vec<Uid>> {
    let Some(modseq) = bump_modseq(tx, mailbox).await? else {
        return Ok(Vec::new());
    };
    let (only_deleted, uids) = match which {
        Which::Uids(uids) => (false, Some(uids)),
        Which::Deleted(uids) => (true, uids),
    };
    let deleted = FLAG_DELETED as i32;
    let uids = uids.map(uid_array);
    // The tombstone keeps what a session that has not yet seen the
    // EXPUNGE may still FETCH; an older tombstone of the UID (a mailbox
    // renamed over) is replaced, as SQLite's INSERT OR REPLACE does.
    let rows = tx
        .query(
            "WITH gone AS (
                 DELETE FROM messages
                 WHERE mailbox_id = $1
                   AND ($3::bigint[] IS NULL OR uid = ANY($3))
                   AND (NOT $4 OR (flags & $5) != 0)
                 RETURNING uid, blob_id, size, flags, internal_date, keywords
             )
             INSERT INTO expunged
                 (mailbox_id, uid, modseq, blob_id, size, flags, internal_date, keywords)
             SELECT $1, uid, $2, blob_id, size, flags, internal_date, keywords FROM gone
             ON CONFLICT (mailbox_id, uid) DO UPDATE SET
                 modseq = excluded.modseq, blob_id = excluded.blob_id,
                 size = excluded.size, flags = excluded.flags,
                 internal_date = excluded.internal_date, keywords = excluded.keywords
             RETURNING uid, blob_id",
            &[&mailbox, &modseq, &uids, &only_deleted, &deleted],
        )
        .await?;
    let mut gone: Vec<Uid> = rows.iter().map(|r| r.get::<_, i64>(0) as Uid).collect();
    gone.sort_unstable();
    let mut blobs: Vec<i64> = rows.iter().map(|r| r.get::<_, i64>(1)).collect();
    blobs.sort_unstable();
    blobs.dedup();
    if let Some(account) = super::account_view::account_of(tx, mailbox).await? {
        super::account_view::emails_left(tx, account, &blobs, modseq).await?;
    }
    Ok(gone)
}

/// Copies entries (sharing their blobs) and returns `(old, new)` UIDs;
/// `NotFound` for a missing target only when there is something to copy,
/// as in the SQLite back end.
async fn copy_rows(
    tx: &Transaction<'_>,
    from: MailboxId,
    uids: &[Uid],
    to: MailboxId,
) -> Result<Vec<(Uid, Uid)>> {
    // One read of the sources: the UIDs given and what is copied agree.
    let sources = tx
        .query(
            &format!(
                "SELECT {ENTRY_COLUMNS} FROM messages WHERE mailbox_id = $1 AND uid = ANY($2)
                 ORDER BY uid"
            ),
            &[&from, &uid_array(uids)],
        )
        .await?;
    if sources.is_empty() {
        return Ok(Vec::new());
    }
    let n = sources.len() as i64;
    let modseq = bump_modseq(tx, to)
        .await?
        .ok_or_else(|| mailbox_not_found(to))?;
    let first: i64 = tx
        .query_opt(
            "UPDATE mailboxes SET uid_next = uid_next + $2 WHERE id = $1 RETURNING uid_next - $2",
            &[&to, &n],
        )
        .await?
        .map(|r| r.get(0))
        .ok_or_else(|| mailbox_not_found(to))?;
    let old: Vec<i64> = sources.iter().map(|r| r.get(0)).collect();
    let new: Vec<i64> = (first..first + n).collect();
    // The new UIDs follow the source UID order. The reference-count and
    // counter triggers do the rest.
    tx.execute(
        "INSERT INTO messages (mailbox_id, uid, blob_id, size, flags, keywords, internal_date, modseq)
         SELECT $1, c.new_uid, m.blob_id, m.size, m.flags, m.keywords, m.internal_date, $2
         FROM unnest($3::bigint[], $4::bigint[]) AS c(old_uid, new_uid)
         JOIN messages m ON m.mailbox_id = $5 AND m.uid = c.old_uid",
        &[&to, &modseq, &old, &new, &from],
    )
    .await?;
    super::account_view::emails_copied(tx, from, &old, to, modseq).await?;
    Ok(old
        .into_iter()
        .zip(new)
        .map(|(o, n)| (o as Uid, n as Uid))
        .collect())
}

/// Locks the rows of these mailboxes in id order, so that two moves in
/// opposite directions cannot each hold the one the other waits for.
async fn lock_mailboxes(tx: &Transaction<'_>, mailboxes: &[MailboxId]) -> Result<()> {
    // Their accounts first, as every path locks (account_view.rs).
    super::account_view::lock_accounts_of(tx, mailboxes).await?;
    tx.query(
        "SELECT id FROM mailboxes WHERE id = ANY($1) ORDER BY id FOR UPDATE",
        &[&mailboxes],
    )
    .await?;
    Ok(())
}

/// Queues spam training for messages copied or moved from `from` to `to`,
/// as the store's rule says (spam_training.rs).
async fn note_moves(
    tx: &Transaction<'_>,
    from: MailboxId,
    to: MailboxId,
    map: &[(Uid, Uid)],
) -> Result<()> {
    if map.is_empty() {
        return Ok(());
    }
    let from_use = special_use(tx, from).await?;
    let to_use = special_use(tx, to).await?;
    let Some(spam) = class_for_move(from_use.as_deref(), to_use.as_deref()) else {
        return Ok(());
    };
    let new: Vec<i64> = map.iter().map(|&(_, n)| i64::from(n)).collect();
    tx.execute(
        "INSERT INTO spam_training (account_id, blob_id, spam)
         SELECT mb.account_id, m.blob_id, $3 FROM messages m
         JOIN mailboxes mb ON mb.id = m.mailbox_id
         WHERE m.mailbox_id = $1 AND m.uid = ANY($2)
         ORDER BY m.uid",
        &[&to, &new, &spam],
    )
    .await?;
    Ok(())
}

async fn special_use(tx: &Transaction<'_>, mailbox: MailboxId) -> Result<Option<String>> {
    Ok(tx
        .query_opt(
            "SELECT special_use FROM mailboxes WHERE id = $1",
            &[&mailbox],
        )
        .await?
        .and_then(|r| r.get(0)))
}

/// FETCH data for a UID list: one query over messages and their blobs.
async fn read_message_data(
    c: &impl GenericClient,
    mailbox: MailboxId,
    uids: &[Uid],
) -> Result<Vec<MessageData>> {
    // Expunged messages come from their tombstones while their blob is
    // kept for a view that may still show them (pins.rs).
    let rows = c
        .query_prepared(
            "SELECT m.uid, m.blob_id, m.size, m.flags, m.internal_date, m.modseq, m.keywords,
                    b.hdr_from, b.hdr_to, b.hdr_cc, b.hdr_subject, b.hdr_date, b.hdr_message_id,
                    p.structure, p.header_codec, p.header
             FROM messages m JOIN blobs b ON b.id = m.blob_id
             LEFT JOIN blob_parsed p ON p.blob_id = m.blob_id
             WHERE m.mailbox_id = $1 AND m.uid = ANY($2)
             UNION ALL
             SELECT e.uid, e.blob_id, e.size, e.flags, e.internal_date, e.modseq, e.keywords,
                    b.hdr_from, b.hdr_to, b.hdr_cc, b.hdr_subject, b.hdr_date, b.hdr_message_id,
                    p.structure, p.header_codec, p.header
             FROM expunged e JOIN blobs b ON b.id = e.blob_id
             LEFT JOIN blob_parsed p ON p.blob_id = e.blob_id
             WHERE e.mailbox_id = $1 AND e.uid = ANY($2) AND b.complete
             ORDER BY 1",
            &[&mailbox, &uid_array(uids)],
        )
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        out.push(data_from_row(c, row).await?);
    }
    Ok(out)
}

async fn data_from_row(c: &impl GenericClient, r: &Row) -> Result<MessageData> {
    let entry = entry_from_row(r);
    let headers = IndexedHeaders {
        from: r.get(7),
        to: r.get(8),
        cc: r.get(9),
        subject: r.get(10),
        date: r.get(11),
        message_id: r.get(12),
    };
    let structure: Option<Vec<u8>> = r.get(13);
    let header: Option<Vec<u8>> = r.get(15);
    let (structure, header) = match (structure, header) {
        (Some(bytes), Some(header)) => {
            let structure = MessageStructure::from_bytes(&bytes).map_err(|_| {
                StoreError::Corrupt(format!("stored MIME structure of blob {}", entry.blob))
            })?;
            let codec = i64::from(r.get::<_, i32>(14));
            let header = match codec {
                chunk_codec::RAW => header,
                _ => chunk_codec::unpack_header(codec, &header, entry.blob)?.into_owned(),
            };
            (structure, header)
        }
        // Stored without its structure (as the SQLite back end's oldest
        // blobs are): work them out from the text now.
        _ => from_chunks(c, entry.blob).await?,
    };
    Ok(MessageData {
        entry,
        headers,
        structure,
        header,
    })
}

/// A stored blob's chunks in order, the lead's negative number first,
/// one query per chunk, so a big message is never read into memory whole.
pub(super) struct Chunks {
    blob: i64,
    next: i32,
}

impl Chunks {
    pub(super) fn of(blob: i64) -> Chunks {
        Chunks {
            blob,
            next: i32::MIN,
        }
    }

    /// The next chunk, unpacked; `None` after the last.
    pub(super) async fn next(&mut self, c: &impl GenericClient) -> Result<Option<Vec<u8>>> {
        let Some(row) = c
            .query_opt(
                "SELECT seq, codec, data FROM blob_chunks WHERE blob_id = $1 AND seq >= $2
                 ORDER BY seq LIMIT 1",
                &[&self.blob, &self.next],
            )
            .await?
        else {
            return Ok(None);
        };
        self.next = row.get::<_, i32>(0) + 1;
        let codec = i64::from(row.get::<_, i32>(1));
        chunk_codec::unpack_owned(codec, row.get(2), self.blob).map(Some)
    }
}

/// Structure and header block of a stored blob, from its chunks, one
/// chunk in memory at a time.
async fn from_chunks(c: &impl GenericClient, blob: i64) -> Result<(MessageStructure, Vec<u8>)> {
    let mut builder = StructureBuilder::new();
    let mut head = Vec::new();
    let mut chunks = Chunks::of(blob);
    while let Some(data) = chunks.next(c).await? {
        builder.feed(&data);
        if head.len() < INDEX_WINDOW && header_block(&head).len() == head.len() {
            let room = INDEX_WINDOW - head.len();
            head.extend_from_slice(&data[..room.min(data.len())]);
        }
    }
    let header = header_block(&head).to_vec();
    Ok((builder.finish(), header))
}

impl PgStore {
    pub(super) async fn blob_structure(
        &self,
        blob: BlobId,
    ) -> Result<Option<(MessageStructure, Vec<u8>)>> {
        let c = self.conn().await?;
        let row = c
            .query_opt(
                "SELECT p.structure, p.header_codec, p.header FROM blobs b
                 LEFT JOIN blob_parsed p ON p.blob_id = b.id WHERE b.id = $1 AND b.complete",
                &[&blob],
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let parsed: (Option<Vec<u8>>, Option<i32>, Option<Vec<u8>>) =
            (row.get(0), row.get(1), row.get(2));
        match parsed {
            (Some(bytes), Some(codec), Some(header)) => {
                let structure = MessageStructure::from_bytes(&bytes).map_err(|_| {
                    StoreError::Corrupt(format!("stored MIME structure of blob {blob}"))
                })?;
                let codec = i64::from(codec);
                let header = match codec {
                    chunk_codec::RAW => header,
                    _ => chunk_codec::unpack_header(codec, &header, blob)?.into_owned(),
                };
                Ok(Some((structure, header)))
            }
            _ => Ok(Some(from_chunks(&c, blob).await?)),
        }
    }

    pub(super) async fn list_messages(&self, mailbox: MailboxId) -> Result<Vec<MessageEntry>> {
        let c = self.conn().await?;
        let rows = c
            .query(
                &format!("SELECT {ENTRY_COLUMNS} FROM messages WHERE mailbox_id = $1 ORDER BY uid"),
                &[&mailbox],
            )
            .await?;
        Ok(rows.iter().map(entry_from_row).collect())
    }

    pub(super) async fn list_newest(
        &self,
        mailbox: MailboxId,
        skip: usize,
        take: usize,
    ) -> Result<Vec<MessageData>> {
        // One snapshot for the page and what it shows.
        let mut c = self.conn().await?;
        let tx = snapshot(&mut c).await?;
        let uids: Vec<Uid> = tx
            .query(
                "SELECT uid FROM messages WHERE mailbox_id = $1
                 ORDER BY internal_date DESC, uid DESC LIMIT $2 OFFSET $3",
                &[&mailbox, &sql_count(take), &sql_count(skip)],
            )
            .await?
            .iter()
            .map(|r| r.get::<_, i64>(0) as Uid)
            .collect();
        let mut data = read_message_data(&tx, mailbox, &uids).await?;
        tx.commit().await?;
        // message_data answers in UID order; the page is in date order.
        let rank: HashMap<Uid, usize> = uids.iter().enumerate().map(|(i, u)| (*u, i)).collect();
        data.sort_by_key(|d| rank.get(&d.entry.uid).copied());
        Ok(data)
    }

    pub(super) async fn expunge(&self, mailbox: MailboxId, uids: &[Uid]) -> Result<()> {
        if uids.is_empty() {
            return Ok(());
        }
        self.expunge_which(mailbox, Which::Uids(uids)).await?;
        Ok(())
    }

    pub(super) async fn update_flags(
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
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let changed = update_flag_rows(
            &tx,
            mailbox,
            uids,
            change,
            flags,
            &keywords,
            unchanged_since,
        )
        .await?;
        if changed.is_empty() {
            // HIGHESTMODSEQ moves only when a message changed.
            tx.rollback().await?;
            return Ok(changed);
        }
        tx.commit().await?;
        self.notify([mailbox]);
        Ok(changed)
    }

    pub(super) async fn copy_messages(
        &self,
        from: MailboxId,
        uids: &[Uid],
        to: MailboxId,
    ) -> Result<Vec<(Uid, Uid)>> {
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        // The source too: what is read is what is copied, with no expunge
        // in between.
        lock_mailboxes(&tx, &[from, to]).await?;
        let map = copy_rows(&tx, from, uids, to).await?;
        if map.is_empty() {
            tx.rollback().await?;
            return Ok(map);
        }
        note_moves(&tx, from, to, &map).await?;
        tx.commit().await?;
        self.notify([to]);
        Ok(map)
    }

    pub(super) async fn expunge_deleted(
        &self,
        mailbox: MailboxId,
        uids: Option<&[Uid]>,
    ) -> Result<Vec<Uid>> {
        self.expunge_which(mailbox, Which::Deleted(uids)).await
    }

    pub(super) async fn move_messages(
        &self,
        from: MailboxId,
        uids: &[Uid],
        to: MailboxId,
    ) -> Result<Vec<(Uid, Uid)>> {
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        lock_mailboxes(&tx, &[from, to]).await?;
        // Inserting before deleting keeps every blob referenced throughout.
        let map = copy_rows(&tx, from, uids, to).await?;
        if map.is_empty() {
            tx.rollback().await?;
            return Ok(map);
        }
        let moved: Vec<Uid> = map.iter().map(|&(old, _)| old).collect();
        expunge_where(&tx, from, Which::Uids(&moved)).await?;
        note_moves(&tx, from, to, &map).await?;
        tx.commit().await?;
        self.notify([from, to]);
        Ok(map)
    }

    /// Every IMAP command ends with this catch-up, so it is one round
    /// trip: the snapshot's BEGIN, its three reads and its COMMIT are
    /// pipelined (the server runs them in the order sent), on statements
    /// the connection prepared before.
    pub(super) async fn changes_since(&self, mailbox: MailboxId, modseq: u64) -> Result<Changes> {
        let c = self.conn().await?;
        let since = sql_modseq(modseq);
        let changed_sql = format!(
            "SELECT {ENTRY_COLUMNS} FROM messages WHERE mailbox_id = $1 AND modseq > $2
             ORDER BY uid"
        );
        let (head, changed, expunged) = tokio::try_join!(
            c.prepare_cached("SELECT uid_next, highest_modseq FROM mailboxes WHERE id = $1"),
            c.prepare_cached(&changed_sql),
            c.prepare_cached(
                "SELECT uid FROM expunged WHERE mailbox_id = $1 AND modseq > $2 ORDER BY uid"
            ),
        )?;
        let by_mailbox: [&(dyn ToSql + Sync); 1] = [&mailbox];
        let by_modseq: [&(dyn ToSql + Sync); 2] = [&mailbox, &since];
        let ((), head, changed, expunged, ()) = tokio::try_join!(
            c.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
            c.query_opt(&head, &by_mailbox),
            c.query(&changed, &by_modseq),
            c.query(&expunged, &by_modseq),
            c.batch_execute("COMMIT"),
        )?;
        let (uid_next, highest): (i64, i64) = head
            .map(|r| (r.get(0), r.get(1)))
            .ok_or_else(|| mailbox_not_found(mailbox))?;
        Ok(Changes {
            changed: changed.iter().map(entry_from_row).collect(),
            expunged: expunged.iter().map(|r| r.get::<_, i64>(0) as Uid).collect(),
            highest_modseq: highest as u64,
            uid_next: uid_next as Uid,
        })
    }

    pub(super) async fn message_data(
        &self,
        mailbox: MailboxId,
        uids: &[Uid],
    ) -> Result<Vec<MessageData>> {
        if uids.is_empty() {
            return Ok(Vec::new());
        }
        // One statement reads one snapshot: no transaction needed (the
        // rare blob without a stored structure is read from its chunks,
        // which never change).
        let c = self.conn().await?;
        read_message_data(&c, mailbox, uids).await
    }

    /// An expunge in a transaction of its own; the expunged UIDs.
    async fn expunge_which(&self, mailbox: MailboxId, which: Which<'_>) -> Result<Vec<Uid>> {
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let gone = expunge_where(&tx, mailbox, which).await?;
        if gone.is_empty() {
            // The modseq taken is not spent: nothing was expunged.
            tx.rollback().await?;
            return Ok(gone);
        }
        tx.commit().await?;
        self.notify([mailbox]);
        Ok(gone)
    }
}
