//! Message entries of a mailbox as sets: flag changes, copies, moves and
//! expunges, each a fixed number of statements whatever the number of
//! messages (`rarray` carries the UID lists), and the reads IMAP sessions
//! catch up with.
//!
//! Every change takes the mailbox's next modification sequence (RFC 7162
//! §3) for all the rows it touches; an expunge leaves a tombstone per
//! message with that modseq, so a session learns what others expunged.

use std::rc::Rc;

use mime_tree::{MessageStructure, StructureBuilder};
use rusqlite::types::{ToSql, Value};
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use crate::chunk_codec;
use crate::error::{Result, StoreError};
use crate::index::{header_block, IndexedHeaders};
use crate::keyword;
use crate::model::{Changes, FlagChange, MailboxId, MessageData, MessageEntry, Uid, FLAG_DELETED};
use crate::INDEX_WINDOW;

/// Columns read into a [`MessageEntry`] by [`entry_from_row`].
pub(crate) const ENTRY_COLUMNS: &str = "uid, blob_id, size, flags, internal_date, modseq, keywords";

pub(crate) fn entry_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<MessageEntry> {
    Ok(MessageEntry {
        uid: r.get(0)?,
        blob: r.get(1)?,
        size: r.get::<_, i64>(2)? as u64,
        flags: r.get(3)?,
        internal_date: r.get(4)?,
        modseq: r.get::<_, i64>(5)? as u64,
        keywords: keyword::split(r.get_ref(6)?.as_str()?)
            .map(str::to_string)
            .collect(),
    })
}

/// UIDs as an `rarray` parameter (SQLite's carray).
pub(crate) fn uid_list(uids: &[Uid]) -> Rc<Vec<Value>> {
    Rc::new(uids.iter().map(|u| Value::Integer(i64::from(*u))).collect())
}

/// A modseq from a client, as SQLite stores it (at most `i64::MAX`).
pub(crate) fn sql_modseq(modseq: u64) -> i64 {
    i64::try_from(modseq).unwrap_or(i64::MAX)
}

fn not_found(mailbox: MailboxId) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |e| match e {
        rusqlite::Error::QueryReturnedNoRows => StoreError::NotFound(format!("mailbox {mailbox}")),
        e => e.into(),
    }
}

/// Takes the mailbox's next modseq: its account's next
/// (account_view.rs).
fn bump_modseq(c: &Connection, mailbox: MailboxId) -> Result<i64> {
    super::account_view::next_modseq(c, mailbox)
}

/// Changes flags and keywords; see [`crate::Store::update_flags`].
/// `keywords` is already [`keyword::normalize`]d.
pub(crate) fn update_flags(
    c: &Connection,
    mailbox: MailboxId,
    uids: &[Uid],
    change: FlagChange,
    flags: u32,
    keywords: &[String],
    unchanged_since: Option<u64>,
) -> Result<Vec<MessageEntry>> {
    let modseq = super::account_view::peek_modseq(c, mailbox)?;
    let expr = match change {
        FlagChange::Add => "flags | ?2",
        FlagChange::Remove => "flags & ~?2",
        FlagChange::Replace => "?2",
    };
    // Only rows that really change are touched (and get the new modseq);
    // WHERE and SET both see the old row.
    let sql = format!(
        "UPDATE messages SET flags = {expr}, keywords = sluice_keywords(keywords, ?5, ?6), modseq = ?3
         WHERE mailbox_id = ?1 AND uid IN rarray(?4) AND modseq <= ?7
           AND (flags != {expr} OR keywords != sluice_keywords(keywords, ?5, ?6))
         RETURNING {ENTRY_COLUMNS}"
    );
    let mut changed = c
        .prepare_cached(&sql)?
        .query_map(
            params![
                mailbox,
                flags,
                modseq,
                uid_list(uids),
                keyword::op_code(change),
                keywords.join(" "),
                unchanged_since.map_or(i64::MAX, sql_modseq),
            ],
            entry_from_row,
        )?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    if !changed.is_empty() {
        // HIGHESTMODSEQ (and the account's) moves only when a message
        // changed.
        super::account_view::take_modseq(c, mailbox, modseq)?;
    }
    changed.sort_by_key(|m| m.uid);
    Ok(changed)
}

/// Copies entries (sharing their blobs) and returns `(old, new)` UIDs.
pub(crate) fn copy_rows(
    c: &Connection,
    from: MailboxId,
    uids: &[Uid],
    to: MailboxId,
) -> Result<Vec<(Uid, Uid)>> {
    let list = uid_list(uids);
    let sources: Vec<Uid> = c
        .prepare_cached(
            "SELECT uid FROM messages WHERE mailbox_id = ?1 AND uid IN rarray(?2) ORDER BY uid",
        )?
        .query_map(params![from, Rc::clone(&list)], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    if sources.is_empty() {
        return Ok(Vec::new());
    }
    let n = sources.len() as i64;
    let modseq = bump_modseq(c, to)?;
    let first: u32 = c
        .prepare_cached(
            "UPDATE mailboxes SET uid_next = uid_next + ?2 WHERE id = ?1 RETURNING uid_next - ?2",
        )?
        .query_row(params![to, n], |r| r.get(0))
        .map_err(not_found(to))?;
    // One statement for the whole set; the new UIDs follow the source UID
    // order. The reference-count trigger does the rest.
    c.prepare_cached(
        "INSERT INTO messages (mailbox_id, uid, blob_id, size, flags, keywords, internal_date, modseq)
         SELECT ?1, ?2 + row_number() OVER (ORDER BY uid) - 1, blob_id, size, flags, keywords, internal_date, ?3
         FROM messages WHERE mailbox_id = ?4 AND uid IN rarray(?5)",
    )?
    .execute(params![to, first, modseq, from, list])?;
    super::account_view::emails_copied(c, from, &sources, to, modseq)?;
    Ok(sources.into_iter().zip(first..).collect())
}

/// Moves entries: copies, then expunges the originals (RFC 6851).
/// Inserting before deleting keeps every blob referenced throughout.
pub(crate) fn move_rows(
    c: &Connection,
    from: MailboxId,
    uids: &[Uid],
    to: MailboxId,
) -> Result<Vec<(Uid, Uid)>> {
    let map = copy_rows(c, from, uids, to)?;
    if !map.is_empty() {
        let moved: Vec<Uid> = map.iter().map(|&(old, _)| old).collect();
        expunge_where(c, from, Which::Uids(&moved))?;
    }
    Ok(map)
}

/// Which entries an expunge takes.
pub(crate) enum Which<'a> {
    /// These UIDs.
    Uids(&'a [Uid]),
    /// Those flagged `\Deleted`, optionally only among these UIDs.
    Deleted(Option<&'a [Uid]>),
}

/// Deletes entries and leaves their tombstones: one DELETE and one INSERT
/// whatever their number. Returns the expunged UIDs, ascending.
pub(crate) fn expunge_where(
    c: &Connection,
    mailbox: MailboxId,
    which: Which<'_>,
) -> Result<Vec<Uid>> {
    let deleted = i64::from(FLAG_DELETED);
    let (sql, args): (&str, Vec<Box<dyn ToSql>>) = match which {
        Which::Uids(uids) => (
            "DELETE FROM messages WHERE mailbox_id = ?1 AND uid IN rarray(?2)
             RETURNING uid, blob_id, size, flags, internal_date, modseq, keywords",
            vec![Box::new(mailbox), Box::new(uid_list(uids))],
        ),
        Which::Deleted(None) => (
            "DELETE FROM messages WHERE mailbox_id = ?1 AND (flags & ?2) != 0
             RETURNING uid, blob_id, size, flags, internal_date, modseq, keywords",
            vec![Box::new(mailbox), Box::new(deleted)],
        ),
        Which::Deleted(Some(uids)) => (
            "DELETE FROM messages WHERE mailbox_id = ?1 AND (flags & ?2) != 0
             AND uid IN rarray(?3)
             RETURNING uid, blob_id, size, flags, internal_date, modseq, keywords",
            vec![
                Box::new(mailbox),
                Box::new(deleted),
                Box::new(uid_list(uids)),
            ],
        ),
    };
    let mut gone = c
        .prepare_cached(sql)?
        .query_map(params_from_iter(args.iter()), entry_from_row)?
        .collect::<rusqlite::Result<Vec<MessageEntry>>>()?;
    if gone.is_empty() {
        return Ok(Vec::new());
    }
    gone.sort_unstable_by_key(|e| e.uid);
    let modseq = bump_modseq(c, mailbox)?;
    let mut insert = c.prepare_cached(
        "INSERT OR REPLACE INTO expunged
         (mailbox_id, uid, modseq, blob_id, size, flags, internal_date, keywords)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for e in &gone {
        insert.execute(params![
            mailbox,
            e.uid,
            modseq,
            e.blob,
            e.size as i64,
            e.flags,
            e.internal_date,
            e.keywords.join(" ")
        ])?;
    }
    if let Some(account) = super::account_view::account_of(c, mailbox)? {
        let mut blobs: Vec<i64> = gone.iter().map(|e| e.blob).collect();
        blobs.sort_unstable();
        blobs.dedup();
        super::account_view::emails_left(c, account, &blobs, modseq)?;
    }
    Ok(gone.into_iter().map(|e| e.uid).collect())
}

/// What changed after `since`, read in one transaction so the figures
/// agree with each other.
pub(crate) fn changes_since(c: &Connection, mailbox: MailboxId, since: u64) -> Result<Changes> {
    let tx = c.unchecked_transaction()?;
    let since = sql_modseq(since);
    let (uid_next, highest): (Uid, i64) = tx
        .query_row(
            "SELECT uid_next, highest_modseq FROM mailboxes WHERE id = ?1",
            [mailbox],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(not_found(mailbox))?;
    let changed = tx
        .prepare_cached(&format!(
            "SELECT {ENTRY_COLUMNS} FROM messages WHERE mailbox_id = ?1 AND modseq > ?2 ORDER BY uid"
        ))?
        .query_map(params![mailbox, since], entry_from_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let expunged = tx
        .prepare_cached(
            "SELECT uid FROM expunged WHERE mailbox_id = ?1 AND modseq > ?2 ORDER BY uid",
        )?
        .query_map(params![mailbox, since], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<Uid>>>()?;
    Ok(Changes {
        changed,
        expunged,
        highest_modseq: highest as u64,
        uid_next,
    })
}

/// FETCH data for a UID list: one query over messages and their blobs.
pub(crate) fn message_data(
    c: &Connection,
    mailbox: MailboxId,
    uids: &[Uid],
) -> Result<Vec<MessageData>> {
    type Row = (
        MessageEntry,
        IndexedHeaders,
        Option<Vec<u8>>,
        Option<(i64, Vec<u8>)>,
    );
    let rows = c
        // Expunged messages come from their tombstones while their blob
        // is kept for a view that may still show them (pins.rs).
        .prepare_cached(
            "SELECT m.uid, m.blob_id, m.size, m.flags, m.internal_date, m.modseq, m.keywords,
                    b.hdr_from, b.hdr_to, b.hdr_cc, b.hdr_subject, b.hdr_date, b.hdr_message_id,
                    p.structure, p.header_codec, p.header
             FROM messages m JOIN blobs b ON b.id = m.blob_id
             LEFT JOIN blob_parsed p ON p.blob_id = m.blob_id
             WHERE m.mailbox_id = ?1 AND m.uid IN rarray(?2)
             UNION ALL
             SELECT e.uid, e.blob_id, e.size, e.flags, e.internal_date, e.modseq, e.keywords,
                    b.hdr_from, b.hdr_to, b.hdr_cc, b.hdr_subject, b.hdr_date, b.hdr_message_id,
                    p.structure, p.header_codec, p.header
             FROM expunged e JOIN blobs b ON b.id = e.blob_id
             LEFT JOIN blob_parsed p ON p.blob_id = e.blob_id
             WHERE e.mailbox_id = ?1 AND e.uid IN rarray(?2) AND b.complete = 1
             ORDER BY 1",
        )?
        .query_map(
            params![mailbox, uid_list(uids)],
            |r| -> rusqlite::Result<Row> {
                Ok((
                    entry_from_row(r)?,
                    IndexedHeaders {
                        from: r.get(7)?,
                        to: r.get(8)?,
                        cc: r.get(9)?,
                        subject: r.get(10)?,
                        date: r.get(11)?,
                        message_id: r.get(12)?,
                    },
                    r.get(13)?,
                    match r.get::<_, Option<Vec<u8>>>(15)? {
                        Some(header) => Some((r.get(14)?, header)),
                        None => None,
                    },
                ))
            },
        )?
        .collect::<rusqlite::Result<Vec<Row>>>()?;
    rows.into_iter()
        .map(|(entry, headers, structure, header)| {
            let (structure, header) = match (structure, header) {
                (Some(bytes), Some((codec, header))) => {
                    let structure = MessageStructure::from_bytes(&bytes).map_err(|_| {
                        StoreError::Corrupt(format!("stored MIME structure of blob {}", entry.blob))
                    })?;
                    let header = match codec {
                        chunk_codec::RAW => header,
                        _ => chunk_codec::unpack_header(codec, &header, entry.blob)?.into_owned(),
                    };
                    (structure, header)
                }
                // Delivered before the store kept structures: work them
                // out from the text now.
                _ => from_chunks(c, entry.blob)?,
            };
            Ok(MessageData {
                entry,
                headers,
                structure,
                header,
            })
        })
        .collect()
}

/// Structure and header block of a complete blob: its parsed row, or
/// from its chunks when it has none.
pub(crate) fn blob_structure(
    c: &Connection,
    blob: i64,
) -> Result<Option<(MessageStructure, Vec<u8>)>> {
    /// The parsed row's structure, header codec and header, if any.
    type Parsed = (Option<Vec<u8>>, Option<i64>, Option<Vec<u8>>);
    let row: Option<Parsed> = c
        .prepare_cached(
            "SELECT p.structure, p.header_codec, p.header FROM blobs b
             LEFT JOIN blob_parsed p ON p.blob_id = b.id WHERE b.id = ?1 AND b.complete = 1",
        )?
        .query_row([blob], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    match row {
        None => Ok(None),
        Some((Some(bytes), Some(codec), Some(header))) => {
            let structure = MessageStructure::from_bytes(&bytes).map_err(|_| {
                StoreError::Corrupt(format!("stored MIME structure of blob {blob}"))
            })?;
            let header = match codec {
                chunk_codec::RAW => header,
                _ => chunk_codec::unpack_header(codec, &header, blob)?.into_owned(),
            };
            Ok(Some((structure, header)))
        }
        Some(_) => Ok(Some(from_chunks(c, blob)?)),
    }
}

/// Structure and header block of a stored blob, from its chunks, one
/// chunk in memory at a time.
fn from_chunks(c: &Connection, blob: i64) -> Result<(MessageStructure, Vec<u8>)> {
    let mut builder = StructureBuilder::new();
    let mut head = Vec::new();
    each_chunk(c, blob, |data| {
        builder.feed(data);
        if head.len() < INDEX_WINDOW && header_block(&head).len() == head.len() {
            let room = INDEX_WINDOW - head.len();
            head.extend_from_slice(&data[..room.min(data.len())]);
        }
        Ok(true)
    })?;
    let header = header_block(&head).to_vec();
    Ok((builder.finish(), header))
}

/// Hands a stored blob's chunks, unpacked, to `each` in order (the lead,
/// numbered before the others, first), one in memory at a time, until it
/// answers false.
pub(crate) fn each_chunk(
    c: &Connection,
    blob: i64,
    mut each: impl FnMut(&[u8]) -> Result<bool>,
) -> Result<()> {
    let mut stmt =
        c.prepare_cached("SELECT codec, data FROM blob_chunks WHERE blob_id = ?1 ORDER BY seq")?;
    let mut rows = stmt.query([blob])?;
    while let Some(row) = rows.next()? {
        let data = row
            .get_ref(1)?
            .as_blob()
            .map_err(|_| StoreError::Corrupt(format!("a chunk of blob {blob}")))?;
        if !each(&crate::chunk_codec::unpack(row.get(0)?, data, blob)?)? {
            break;
        }
    }
    Ok(())
}
