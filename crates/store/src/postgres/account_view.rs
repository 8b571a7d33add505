//! (PostgreSQL) The account-wide view of mailboxes and messages, as the
//! SQLite back end keeps it (sqlite/account_view.rs): one modification
//! sequence per account, the account's emails with their threads, and
//! what left. The entry paths call these in their change's transaction.
//!
//! Taking the account's modseq locks the account's row until the commit,
//! so changes of one account are numbered in commit order (a reader that
//! sees modseq N sees every change numbered below it). Every path takes
//! the account rows (in id order) before any mailbox row, which keeps the
//! lock order the same everywhere.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use tokio_postgres::Transaction;

use super::PgStore;
use crate::error::{Result, StoreError};
use crate::index::IndexedHeaders;
use crate::keyword;
use crate::model::{
    AccountChanges, AccountEmail, AccountId, BlobId, MailboxId, MailboxModseqs, MessageEntry, Uid,
};

/// Locks the accounts of these mailboxes, in id order.
pub(super) async fn lock_accounts_of(tx: &Transaction<'_>, mailboxes: &[MailboxId]) -> Result<()> {
    tx.query(
        "SELECT id FROM accounts WHERE id IN (SELECT account_id FROM mailboxes WHERE id = ANY($1))
         ORDER BY id FOR NO KEY UPDATE",
        &[&mailboxes],
    )
    .await?;
    Ok(())
}

/// Takes the next modseq of `mailbox`'s account and makes it the
/// mailbox's HIGHESTMODSEQ; `None` for a mailbox that does not exist.
pub(super) async fn next_modseq(tx: &Transaction<'_>, mailbox: MailboxId) -> Result<Option<i64>> {
    let Some(row) = tx
        .query_opt(
            "UPDATE accounts SET modseq = modseq + 1
             WHERE id = (SELECT account_id FROM mailboxes WHERE id = $1) RETURNING modseq",
            &[&mailbox],
        )
        .await?
    else {
        return Ok(None);
    };
    let modseq: i64 = row.try_get(0)?;
    tx.execute(
        "UPDATE mailboxes SET highest_modseq = $2 WHERE id = $1",
        &[&mailbox, &modseq],
    )
    .await?;
    Ok(Some(modseq))
}

/// Takes the account's next modseq (a change to its mailbox tree).
pub(super) async fn next_account_modseq(tx: &Transaction<'_>, account: AccountId) -> Result<i64> {
    Ok(tx
        .query_opt(
            "UPDATE accounts SET modseq = modseq + 1 WHERE id = $1 RETURNING modseq",
            &[&account],
        )
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("account {account}")))?
        .try_get(0)?)
}

/// A message arrived in `mailbox` at `modseq`.
pub(super) async fn email_arrived(
    c: &impl GenericClient,
    mailbox: MailboxId,
    blob: BlobId,
    thread: i64,
    modseq: i64,
) -> Result<()> {
    c.execute(
        "INSERT INTO emails (account_id, blob_id, thread_id, created, changed)
         SELECT account_id, $2, $3, $4, $4 FROM mailboxes WHERE id = $1
         ON CONFLICT (account_id, blob_id) DO UPDATE SET changed = excluded.changed",
        &[&mailbox, &blob, &thread, &modseq],
    )
    .await?;
    Ok(())
}

/// Messages `uids` of `from` were copied into `to` at `modseq`.
pub(super) async fn emails_copied(
    tx: &Transaction<'_>,
    from: MailboxId,
    uids: &[i64],
    to: MailboxId,
    modseq: i64,
) -> Result<()> {
    tx.execute(
        "INSERT INTO emails (account_id, blob_id, thread_id, created, changed)
         SELECT DISTINCT ON (m.blob_id) t.account_id, m.blob_id,
                coalesce((SELECT e.thread_id FROM emails e
                          WHERE e.account_id = f.account_id AND e.blob_id = m.blob_id), m.blob_id),
                $4::bigint, $4::bigint
         FROM messages m JOIN mailboxes f ON f.id = m.mailbox_id JOIN mailboxes t ON t.id = $2
         WHERE m.mailbox_id = $1 AND m.uid = ANY($3)
         ON CONFLICT (account_id, blob_id) DO UPDATE SET changed = excluded.changed",
        &[&from, &to, &uids, &modseq],
    )
    .await?;
    Ok(())
}

/// Entries of these blobs left `account`'s mailboxes at `modseq` (see the
/// SQLite back end's `emails_left`).
pub(super) async fn emails_left(
    tx: &Transaction<'_>,
    account: AccountId,
    blobs: &[BlobId],
    modseq: i64,
) -> Result<()> {
    if blobs.is_empty() {
        return Ok(());
    }
    tx.execute(
        "WITH gone AS (
             DELETE FROM emails e WHERE e.account_id = $1 AND e.blob_id = ANY($2)
               AND NOT EXISTS (SELECT 1 FROM messages m JOIN mailboxes x ON x.id = m.mailbox_id
                               WHERE m.blob_id = e.blob_id AND x.account_id = e.account_id)
             RETURNING e.blob_id, e.thread_id, e.created)
         INSERT INTO emails_gone (account_id, modseq, blob_id, thread_id, created)
         SELECT $1, $3, blob_id, thread_id, created FROM gone
         ON CONFLICT DO NOTHING",
        &[&account, &blobs, &modseq],
    )
    .await?;
    tx.execute(
        "UPDATE emails SET changed = $3 WHERE account_id = $1 AND blob_id = ANY($2)",
        &[&account, &blobs, &modseq],
    )
    .await?;
    Ok(())
}

/// The account of a mailbox.
pub(super) async fn account_of(
    c: &impl GenericClient,
    mailbox: MailboxId,
) -> Result<Option<AccountId>> {
    Ok(c.query_opt(
        "SELECT account_id FROM mailboxes WHERE id = $1",
        &[&mailbox],
    )
    .await?
    .map(|r| r.get(0)))
}

impl PgStore {
    pub(super) async fn account_modseq(&self, account: AccountId) -> Result<u64> {
        let c = self.conn().await?;
        account_modseq(&c, account).await
    }

    pub(super) async fn account_changes(
        &self,
        account: AccountId,
        since: u64,
    ) -> Result<AccountChanges> {
        let mut c = self.conn().await?;
        let tx = super::entries::snapshot(&mut c).await?;
        let since = i64::try_from(since).unwrap_or(i64::MAX);
        let modseq = account_modseq(&tx, account).await?;
        let pairs = |rows: Vec<tokio_postgres::Row>| -> Vec<(i64, u64)> {
            rows.iter()
                .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1) as u64))
                .collect()
        };
        let emails = pairs(
            tx.query(
                "SELECT blob_id, created FROM emails WHERE account_id = $1 AND changed > $2
                 UNION
                 SELECT e.blob_id, e.created FROM mailboxes x
                 JOIN messages m ON m.mailbox_id = x.id AND m.modseq > $2
                 JOIN emails e ON e.account_id = x.account_id AND e.blob_id = m.blob_id
                 WHERE x.account_id = $1
                 ORDER BY 1",
                &[&account, &since],
            )
            .await?,
        );
        let emails_gone = pairs(
            tx.query(
                "SELECT blob_id, max(created) FROM emails_gone
                 WHERE account_id = $1 AND modseq > $2 GROUP BY blob_id ORDER BY 1",
                &[&account, &since],
            )
            .await?,
        );
        let threads = tx
            .query(
                "SELECT t, EXISTS (SELECT 1 FROM emails WHERE account_id = $1 AND thread_id = t
                                   AND created <= $2)
                        OR EXISTS (SELECT 1 FROM emails_gone WHERE account_id = $1 AND thread_id = t
                                   AND modseq > $2 AND created <= $2),
                        EXISTS (SELECT 1 FROM emails WHERE account_id = $1 AND thread_id = t)
                 FROM (SELECT thread_id AS t FROM emails WHERE account_id = $1 AND created > $2
                       UNION SELECT thread_id FROM emails_gone
                       WHERE account_id = $1 AND modseq > $2) c
                 ORDER BY 1",
                &[&account, &since],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        let mailboxes = tx
            .query(
                "SELECT id, created_modseq, meta_modseq, highest_modseq FROM mailboxes
                 WHERE account_id = $1 ORDER BY id",
                &[&account],
            )
            .await?
            .iter()
            .map(|r| MailboxModseqs {
                id: r.get(0),
                created: r.get::<_, i64>(1) as u64,
                meta: r.get::<_, i64>(2) as u64,
                contents: r.get::<_, i64>(3) as u64,
            })
            .collect();
        let mailboxes_gone = pairs(
            tx.query(
                "SELECT mailbox_id, created FROM mailboxes_gone
                 WHERE account_id = $1 AND modseq > $2 ORDER BY 1",
                &[&account, &since],
            )
            .await?,
        );
        // The last change of each: where a list cut short by maxChanges
        // ends.
        let email_modseqs = pairs(
            tx.query(
                "SELECT blob_id, max(at) FROM (
             SELECT blob_id, changed AS at FROM emails WHERE account_id = $1 AND changed > $2
             UNION ALL
             SELECT m.blob_id, m.modseq FROM mailboxes x
             JOIN messages m ON m.mailbox_id = x.id AND m.modseq > $2
             WHERE x.account_id = $1
             UNION ALL
             SELECT blob_id, modseq FROM emails_gone WHERE account_id = $1 AND modseq > $2
         ) c GROUP BY blob_id ORDER BY 1",
                &[&account, &since],
            )
            .await?,
        );
        let thread_modseqs = pairs(
            tx.query(
                "SELECT t, max(at) FROM (
             SELECT thread_id AS t, created AS at FROM emails WHERE account_id = $1 AND created > $2
             UNION ALL
             SELECT thread_id, modseq FROM emails_gone WHERE account_id = $1 AND modseq > $2
         ) c GROUP BY t ORDER BY 1",
                &[&account, &since],
            )
            .await?,
        );
        let mailboxes_gone_at = pairs(
            tx.query(
                "SELECT mailbox_id, max(modseq) FROM mailboxes_gone WHERE account_id = $1 AND modseq > $2
         GROUP BY mailbox_id ORDER BY 1",
                &[&account, &since],
            )
            .await?,
        );
        tx.commit().await?;
        Ok(AccountChanges {
            modseq,
            emails,
            emails_gone,
            threads,
            mailboxes,
            mailboxes_gone,
            email_modseqs,
            thread_modseqs,
            mailboxes_gone_at,
        })
    }

    pub(super) async fn account_emails(
        &self,
        account: AccountId,
        blobs: Option<&[BlobId]>,
    ) -> Result<Vec<AccountEmail>> {
        let c = self.conn().await?;
        let rows = c
            .query(
                "SELECT m.uid, m.blob_id, m.size, m.flags, m.internal_date, m.modseq, m.keywords,
                        m.mailbox_id, e.thread_id,
                        b.hdr_from, b.hdr_to, b.hdr_cc, b.hdr_subject, b.hdr_date, b.hdr_message_id
                 FROM mailboxes x JOIN messages m ON m.mailbox_id = x.id
                 JOIN emails e ON e.account_id = x.account_id AND e.blob_id = m.blob_id
                 JOIN blobs b ON b.id = m.blob_id
                 WHERE x.account_id = $1 AND ($2::bigint[] IS NULL OR m.blob_id = ANY($2))",
                &[&account, &blobs.map(<[BlobId]>::to_vec)],
            )
            .await?;
        let mut by_blob: HashMap<BlobId, AccountEmail> = HashMap::new();
        for r in &rows {
            let entry = MessageEntry {
                uid: r.get::<_, i64>(0) as Uid,
                blob: r.get(1),
                size: r.get::<_, i64>(2) as u64,
                flags: r.get::<_, i32>(3) as u32,
                internal_date: r.get(4),
                modseq: r.get::<_, i64>(5) as u64,
                keywords: keyword::split(r.get(6)).map(str::to_string).collect(),
            };
            let mailbox: MailboxId = r.get(7);
            let thread: i64 = r.get(8);
            by_blob
                .entry(entry.blob)
                .or_insert_with(|| AccountEmail {
                    blob: entry.blob,
                    thread,
                    entries: Vec::new(),
                    headers: IndexedHeaders {
                        from: r.get(9),
                        to: r.get(10),
                        cc: r.get(11),
                        subject: r.get(12),
                        date: r.get(13),
                        message_id: r.get(14),
                    },
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

    pub(super) async fn thread_emails(
        &self,
        account: AccountId,
        threads: &[i64],
    ) -> Result<Vec<(i64, Vec<BlobId>)>> {
        let c = self.conn().await?;
        let rows = c
            .query(
                "SELECT e.thread_id, e.blob_id FROM emails e
                 JOIN messages m ON m.blob_id = e.blob_id
                 JOIN mailboxes x ON x.id = m.mailbox_id AND x.account_id = e.account_id
                 WHERE e.account_id = $1 AND e.thread_id = ANY($2)
                 GROUP BY e.thread_id, e.blob_id
                 ORDER BY e.thread_id, min(m.internal_date), e.blob_id",
                &[&account, &threads],
            )
            .await?;
        let mut by_thread: HashMap<i64, Vec<BlobId>> = HashMap::new();
        for r in &rows {
            by_thread.entry(r.get(0)).or_default().push(r.get(1));
        }
        Ok(threads
            .iter()
            .filter_map(|t| by_thread.remove(t).map(|b| (*t, b)))
            .collect())
    }
}

async fn account_modseq(c: &impl GenericClient, account: AccountId) -> Result<u64> {
    Ok(
        c.query_opt("SELECT modseq FROM accounts WHERE id = $1", &[&account])
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("account {account}")))?
            .get::<_, i64>(0) as u64,
    )
}
