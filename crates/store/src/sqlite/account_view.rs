//! The account-wide view of mailboxes and messages (schema: `modseq` of
//! `accounts`, `emails`, `emails_gone`, `mailboxes_gone`): one
//! modification sequence per account, which every change takes the next
//! number of, and the account's emails (one per blob it holds) with their
//! threads, so that JMAP's /changes can say what changed since a state.
//! The entry paths (entries.rs, message.rs, mailboxes.rs) call these in
//! the transaction of their change.

use std::collections::HashMap;
use std::rc::Rc;

use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension};

use super::entries::{entry_from_row, uid_list, ENTRY_COLUMNS};
use crate::error::{Result, StoreError};
use crate::index::IndexedHeaders;
use crate::model::{
    AccountChanges, AccountEmail, AccountId, BlobId, MailboxId, MailboxModseqs, Uid,
};

fn ids(list: &[i64]) -> Rc<Vec<Value>> {
    Rc::new(list.iter().map(|&n| Value::Integer(n)).collect())
}

/// Takes the next modseq of `mailbox`'s account and makes it the
/// mailbox's HIGHESTMODSEQ; `NotFound` for a mailbox that does not exist.
pub(crate) fn next_modseq(c: &Connection, mailbox: MailboxId) -> Result<i64> {
    let modseq: i64 = c
        .prepare_cached(
            "UPDATE accounts SET modseq = modseq + 1
             WHERE id = (SELECT account_id FROM mailboxes WHERE id = ?1) RETURNING modseq",
        )?
        .query_row([mailbox], |r| r.get(0))
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("mailbox {mailbox}")))?;
    c.prepare_cached("UPDATE mailboxes SET highest_modseq = ?2 WHERE id = ?1")?
        .execute(params![mailbox, modseq])?;
    Ok(modseq)
}

/// The modseq the next change of `mailbox`'s account would take, without
/// taking it (a flag change that may change nothing).
pub(crate) fn peek_modseq(c: &Connection, mailbox: MailboxId) -> Result<i64> {
    c.prepare_cached(
        "SELECT a.modseq + 1 FROM accounts a JOIN mailboxes x ON x.account_id = a.id WHERE x.id = ?1",
    )?
    .query_row([mailbox], |r| r.get(0))
    .optional()?
    .ok_or_else(|| StoreError::NotFound(format!("mailbox {mailbox}")))
}

/// Takes a modseq [`peek_modseq`] gave, for a change that did change.
pub(crate) fn take_modseq(c: &Connection, mailbox: MailboxId, modseq: i64) -> Result<()> {
    c.prepare_cached(
        "UPDATE accounts SET modseq = ?2 WHERE id = (SELECT account_id FROM mailboxes WHERE id = ?1)",
    )?
    .execute(params![mailbox, modseq])?;
    c.prepare_cached("UPDATE mailboxes SET highest_modseq = ?2 WHERE id = ?1")?
        .execute(params![mailbox, modseq])?;
    Ok(())
}

/// Takes the account's next modseq (a change to its mailbox tree).
pub(crate) fn next_account_modseq(c: &Connection, account: AccountId) -> Result<i64> {
    c.prepare_cached("UPDATE accounts SET modseq = modseq + 1 WHERE id = ?1 RETURNING modseq")?
        .query_row([account], |r| r.get(0))
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("account {account}")))
}

/// A message arrived in `mailbox` at `modseq`: its account holds the
/// email now (filed in `thread` if it is new to the account).
pub(crate) fn email_arrived(
    c: &Connection,
    mailbox: MailboxId,
    blob: BlobId,
    thread: i64,
    modseq: i64,
) -> Result<()> {
    c.prepare_cached(
        "INSERT INTO emails (account_id, blob_id, thread_id, created, changed)
         SELECT account_id, ?2, ?3, ?4, ?4 FROM mailboxes WHERE id = ?1
         ON CONFLICT (account_id, blob_id) DO UPDATE SET changed = excluded.changed",
    )?
    .execute(params![mailbox, blob, thread, modseq])?;
    Ok(())
}

/// Messages `uids` of `from` were copied into `to` at `modseq`: `to`'s
/// account holds their emails, in the threads they have in `from`'s.
pub(crate) fn emails_copied(
    c: &Connection,
    from: MailboxId,
    uids: &[Uid],
    to: MailboxId,
    modseq: i64,
) -> Result<()> {
    c.prepare_cached(
        "INSERT INTO emails (account_id, blob_id, thread_id, created, changed)
         SELECT t.account_id, m.blob_id,
                coalesce((SELECT e.thread_id FROM emails e
                          WHERE e.account_id = f.account_id AND e.blob_id = m.blob_id), m.blob_id),
                ?4, ?4
         FROM messages m JOIN mailboxes f ON f.id = m.mailbox_id JOIN mailboxes t ON t.id = ?2
         WHERE m.mailbox_id = ?1 AND m.uid IN rarray(?3)
         ON CONFLICT (account_id, blob_id) DO UPDATE SET changed = excluded.changed",
    )?
    .execute(params![from, to, uid_list(uids), modseq])?;
    Ok(())
}

/// Entries of these blobs left `account`'s mailboxes at `modseq`: an
/// email with none left is gone from the account, one with some left has
/// changed mailboxes.
pub(crate) fn emails_left(
    c: &Connection,
    account: AccountId,
    blobs: &[BlobId],
    modseq: i64,
) -> Result<()> {
    if blobs.is_empty() {
        return Ok(());
    }
    let list = ids(blobs);
    let remaining = "EXISTS (SELECT 1 FROM messages m JOIN mailboxes x ON x.id = m.mailbox_id
                     WHERE m.blob_id = emails.blob_id AND x.account_id = emails.account_id)";
    c.prepare_cached(&format!(
        "INSERT OR REPLACE INTO emails_gone (account_id, modseq, blob_id, thread_id, created)
         SELECT account_id, ?3, blob_id, thread_id, created FROM emails
         WHERE account_id = ?1 AND blob_id IN rarray(?2) AND NOT {remaining}"
    ))?
    .execute(params![account, Rc::clone(&list), modseq])?;
    c.prepare_cached(&format!(
        "DELETE FROM emails WHERE account_id = ?1 AND blob_id IN rarray(?2) AND NOT {remaining}"
    ))?
    .execute(params![account, Rc::clone(&list)])?;
    c.prepare_cached(
        "UPDATE emails SET changed = ?3 WHERE account_id = ?1 AND blob_id IN rarray(?2)",
    )?
    .execute(params![account, list, modseq])?;
    Ok(())
}

/// The account of a mailbox.
pub(crate) fn account_of(c: &Connection, mailbox: MailboxId) -> Result<Option<AccountId>> {
    Ok(
        c.prepare_cached("SELECT account_id FROM mailboxes WHERE id = ?1")?
            .query_row([mailbox], |r| r.get(0))
            .optional()?,
    )
}

/// Forgets the view of an account being removed.
pub(crate) fn forget_account(c: &Connection, account: AccountId) -> Result<()> {
    for table in ["emails", "emails_gone", "mailboxes_gone"] {
        c.execute(
            &format!("DELETE FROM {table} WHERE account_id = ?1"),
            [account],
        )?;
    }
    Ok(())
}

pub(crate) fn account_modseq(c: &Connection, account: AccountId) -> Result<u64> {
    c.prepare_cached("SELECT modseq FROM accounts WHERE id = ?1")?
        .query_row([account], |r| r.get::<_, i64>(0))
        .optional()?
        .map(|m| m as u64)
        .ok_or_else(|| StoreError::NotFound(format!("account {account}")))
}

/// See [`crate::Store::account_changes`].
pub(crate) fn account_changes(
    c: &Connection,
    account: AccountId,
    since: u64,
) -> Result<AccountChanges> {
    let tx = c.unchecked_transaction()?;
    let since = super::entries::sql_modseq(since);
    let modseq = account_modseq(&tx, account)?;
    let pairs = |sql: &str| -> Result<Vec<(i64, u64)>> {
        Ok(tx
            .prepare_cached(sql)?
            .query_map(params![account, since], |r| {
                Ok((r.get(0)?, r.get::<_, i64>(1)? as u64))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?)
    };
    let emails = pairs(
        "SELECT blob_id, created FROM emails WHERE account_id = ?1 AND changed > ?2
         UNION
         SELECT e.blob_id, e.created FROM mailboxes x
         JOIN messages m ON m.mailbox_id = x.id AND m.modseq > ?2
         JOIN emails e ON e.account_id = x.account_id AND e.blob_id = m.blob_id
         WHERE x.account_id = ?1
         ORDER BY 1",
    )?;
    let emails_gone = pairs(
        "SELECT blob_id, max(created) FROM emails_gone WHERE account_id = ?1 AND modseq > ?2
         GROUP BY blob_id ORDER BY 1",
    )?;
    let threads: Vec<i64> = tx
        .prepare_cached(
            "SELECT thread_id FROM emails WHERE account_id = ?1 AND created > ?2
             UNION SELECT thread_id FROM emails_gone WHERE account_id = ?1 AND modseq > ?2
             ORDER BY 1",
        )?
        .query_map(params![account, since], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut thread_rows = Vec::with_capacity(threads.len());
    {
        let mut then = tx.prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM emails WHERE account_id = ?1 AND thread_id = ?2 AND created <= ?3)
                 OR EXISTS (SELECT 1 FROM emails_gone WHERE account_id = ?1 AND thread_id = ?2
                            AND modseq > ?3 AND created <= ?3),
                    EXISTS (SELECT 1 FROM emails WHERE account_id = ?1 AND thread_id = ?2)",
        )?;
        for t in threads {
            let (was, is): (bool, bool) =
                then.query_row(params![account, t, since], |r| Ok((r.get(0)?, r.get(1)?)))?;
            thread_rows.push((t, was, is));
        }
    }
    let mailboxes = tx
        .prepare_cached(
            "SELECT id, created_modseq, meta_modseq, highest_modseq FROM mailboxes
             WHERE account_id = ?1 ORDER BY id",
        )?
        .query_map([account], |r| {
            Ok(MailboxModseqs {
                id: r.get(0)?,
                created: r.get::<_, i64>(1)? as u64,
                meta: r.get::<_, i64>(2)? as u64,
                contents: r.get::<_, i64>(3)? as u64,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mailboxes_gone = pairs(
        "SELECT mailbox_id, created FROM mailboxes_gone WHERE account_id = ?1 AND modseq > ?2
         ORDER BY 1",
    )?;
    // The last change of each: where a list cut short by maxChanges ends.
    let email_modseqs = pairs(
        "SELECT blob_id, max(at) FROM (
             SELECT blob_id, changed AS at FROM emails WHERE account_id = ?1 AND changed > ?2
             UNION ALL
             SELECT m.blob_id, m.modseq FROM mailboxes x
             JOIN messages m ON m.mailbox_id = x.id AND m.modseq > ?2
             WHERE x.account_id = ?1
             UNION ALL
             SELECT blob_id, modseq FROM emails_gone WHERE account_id = ?1 AND modseq > ?2
         ) c GROUP BY blob_id ORDER BY 1",
    )?;
    let thread_modseqs = pairs(
        "SELECT t, max(at) FROM (
             SELECT thread_id AS t, created AS at FROM emails WHERE account_id = ?1 AND created > ?2
             UNION ALL
             SELECT thread_id, modseq FROM emails_gone WHERE account_id = ?1 AND modseq > ?2
         ) c GROUP BY t ORDER BY 1",
    )?;
    let mailboxes_gone_at = pairs(
        "SELECT mailbox_id, max(modseq) FROM mailboxes_gone WHERE account_id = ?1 AND modseq > ?2
         GROUP BY mailbox_id ORDER BY 1",
    )?;
    Ok(AccountChanges {
        modseq,
        emails,
        emails_gone,
        threads: thread_rows,
        mailboxes,
        mailboxes_gone,
        email_modseqs,
        thread_modseqs,
        mailboxes_gone_at,
    })
}

/// See [`crate::Store::account_emails`].
pub(crate) fn account_emails(
    c: &Connection,
    account: AccountId,
    blobs: Option<&[BlobId]>,
) -> Result<Vec<AccountEmail>> {
    let columns = ENTRY_COLUMNS
        .split(", ")
        .map(|col| format!("m.{col}"))
        .collect::<Vec<_>>()
        .join(", ");
    let filter = if blobs.is_some() {
        "AND m.blob_id IN rarray(?2)"
    } else {
        "AND ?2 IS NULL"
    };
    let sql = format!(
        "SELECT {columns}, m.mailbox_id, e.thread_id,
                b.hdr_from, b.hdr_to, b.hdr_cc, b.hdr_subject, b.hdr_date, b.hdr_message_id
         FROM mailboxes x JOIN messages m ON m.mailbox_id = x.id
         JOIN emails e ON e.account_id = x.account_id AND e.blob_id = m.blob_id
         JOIN blobs b ON b.id = m.blob_id
         WHERE x.account_id = ?1 {filter}"
    );
    let list: Option<Rc<Vec<Value>>> = blobs.map(ids);
    let mut stmt = c.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![account, list], |r| {
        Ok((
            entry_from_row(r)?,
            r.get::<_, MailboxId>(7)?,
            r.get::<_, i64>(8)?,
            IndexedHeaders {
                from: r.get(9)?,
                to: r.get(10)?,
                cc: r.get(11)?,
                subject: r.get(12)?,
                date: r.get(13)?,
                message_id: r.get(14)?,
            },
        ))
    })?;
    let mut by_blob: HashMap<BlobId, AccountEmail> = HashMap::new();
    for row in rows {
        let (entry, mailbox, thread, headers) = row?;
        by_blob
            .entry(entry.blob)
            .or_insert_with(|| AccountEmail {
                blob: entry.blob,
                thread,
                entries: Vec::new(),
                headers,
            })
            .entries
            .push((mailbox, entry));
    }
    let mut out: Vec<AccountEmail> = by_blob.into_values().collect();
    for e in &mut out {
        e.entries.sort_by_key(|(m, entry)| (*m, entry.uid));
    }
    out.sort_by_key(|e| e.blob);
    Ok(out)
}

/// See [`crate::Store::thread_emails`].
pub(crate) fn thread_emails(
    c: &Connection,
    account: AccountId,
    threads: &[i64],
) -> Result<Vec<(i64, Vec<BlobId>)>> {
    let mut stmt = c.prepare_cached(
        "SELECT e.blob_id FROM emails e
         JOIN messages m ON m.blob_id = e.blob_id
         JOIN mailboxes x ON x.id = m.mailbox_id AND x.account_id = e.account_id
         WHERE e.account_id = ?1 AND e.thread_id = ?2
         GROUP BY e.blob_id ORDER BY min(m.internal_date), e.blob_id",
    )?;
    let mut out = Vec::new();
    for &t in threads {
        let blobs = stmt
            .query_map(params![account, t], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<BlobId>>>()?;
        if !blobs.is_empty() {
            out.push((t, blobs));
        }
    }
    Ok(out)
}
