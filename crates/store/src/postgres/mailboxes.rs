//! (PostgreSQL) The mailbox tree of an account: names, creation, deletion,
//! renaming, subscriptions; and the figures sessions read of a mailbox
//! (STATUS, \Recent, UID runs, keywords, quota). The rules are the SQLite
//! back end's (sqlite/mailboxes.rs), with the same name checks
//! (mailbox_names.rs).
//!
//! Several nodes may change one account's tree at once, so every change of
//! the tree first locks the account's row: changes of one account's tree
//! run one after another, as on SQLite's single writer, and the checks each
//! makes (the name is free, the parents exist, no children) still hold when
//! it writes. Names are compared in byte order (`COLLATE "C"` in the
//! schema), as SQLite compares them, whatever the database's locale.

use tokio_postgres::error::SqlState;
use tokio_postgres::{GenericClient, Row, Transaction};

use super::prepared::Prepared;
use super::PgStore;
use crate::error::{Result, StoreError};
use crate::keyword;
use crate::mailbox_names::{lookup_name, valid_new_name, valid_special_use, SEPARATOR};
use crate::model::{AccountId, MailboxId, MailboxInfo, MailboxStatus, Quota, Uid, FLAG_SEEN};

/// Columns read into a [`MailboxInfo`] by [`info_from_row`].
const INFO_COLUMNS: &str = "id, account_id, name, uid_validity, uid_next, highest_modseq,
     special_use, subscribed, n_messages, n_unseen";

fn info_from_row(r: &Row) -> Result<MailboxInfo> {
    Ok(MailboxInfo {
        id: r.try_get(0)?,
        account: r.try_get(1)?,
        name: r.try_get(2)?,
        uid_validity: narrow(r.try_get(3)?, "UIDVALIDITY")?,
        uid_next: narrow(r.try_get(4)?, "UIDNEXT")?,
        highest_modseq: r.try_get::<_, i64>(5)? as u64,
        special_use: r.try_get(6)?,
        subscribed: r.try_get(7)?,
        messages: narrow(r.try_get(8)?, "message count")?,
        unseen: narrow(r.try_get(9)?, "unseen count")?,
    })
}

/// A `bigint` the trait answers as a `u32` (UIDs, counts).
fn narrow(value: i64, what: &str) -> Result<u32> {
    u32::try_from(value).map_err(|_| StoreError::Corrupt(format!("{what} {value} out of range")))
}

fn mailbox_not_found(name: &str) -> StoreError {
    StoreError::NotFound(format!("mailbox {name}"))
}

/// A name taken under our feet is `Exists`, as a name found taken is.
fn exists_if_taken(name: &str) -> impl FnOnce(tokio_postgres::Error) -> StoreError + '_ {
    move |e| {
        if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
            StoreError::Exists(format!("mailbox {name}"))
        } else {
            e.into()
        }
    }
}

/// A mailbox by account and name.
fn find_sql() -> String {
    format!("SELECT {INFO_COLUMNS} FROM mailboxes WHERE account_id = $1 AND name = $2")
}

async fn find(
    c: &impl GenericClient,
    account: AccountId,
    name: &str,
) -> Result<Option<MailboxInfo>> {
    c.query_opt(&find_sql(), &[&account, &name])
        .await?
        .map(|r| info_from_row(&r))
        .transpose()
}

async fn must_find(c: &impl GenericClient, account: AccountId, name: &str) -> Result<MailboxInfo> {
    find(c, account, name)
        .await?
        .ok_or_else(|| mailbox_not_found(name))
}

/// Locks the account's row until the end of the transaction, so that
/// changes of its tree run one at a time (see the module's comment).
/// `NO KEY`: new mailboxes referencing the account are not held up.
async fn lock_tree(tx: &Transaction<'_>, account: AccountId) -> Result<()> {
    tx.execute(
        "SELECT 1 FROM accounts WHERE id = $1 FOR NO KEY UPDATE",
        &[&account],
    )
    .await?;
    Ok(())
}

/// A UIDVALIDITY the account never used: above every mailbox it has and
/// every one it ever created (RFC 3501 §2.3.1.1: a UIDVALIDITY+UID pair
/// never names two messages). The update's row lock orders concurrent
/// creations in one account.
pub(super) async fn fresh_uid_validity(tx: &Transaction<'_>, account: AccountId) -> Result<u32> {
    let row = tx
        .query_opt(
            "UPDATE accounts SET uid_validity_last = greatest($2, uid_validity_last + 1,
                 coalesce((SELECT max(uid_validity) FROM mailboxes WHERE account_id = $1), 0) + 1)
             WHERE id = $1 RETURNING uid_validity_last",
            &[&account, &crate::clock::now()],
        )
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("account {account}")))?;
    u32::try_from(row.try_get::<_, i64>(0)?)
        .map_err(|_| StoreError::Invalid("UIDVALIDITY space exhausted".into()))
}

async fn insert(
    tx: &Transaction<'_>,
    account: AccountId,
    name: &str,
    special_use: Option<&str>,
) -> Result<MailboxInfo> {
    let validity = i64::from(fresh_uid_validity(tx, account).await?);
    // CREATE does not subscribe (RFC 3501 §6.3.6 keeps the two apart),
    // unless the name kept a subscription from a mailbox deleted before.
    let resubscribed = tx
        .execute(
            "DELETE FROM lost_subscriptions WHERE account_id = $1 AND name = $2",
            &[&account, &name],
        )
        .await?
        > 0;
    // The id comes from an identity sequence: never reused (a session may
    // still hold a deleted mailbox's).
    let modseq = super::account_view::next_account_modseq(tx, account).await?;
    let row = tx
        .query_one(
            &format!(
                "INSERT INTO mailboxes (account_id, name, special_use, uid_validity, subscribed,
                                        highest_modseq, created_modseq, meta_modseq)
                 VALUES ($1, $2, $3, $4, $5, $6, $6, $6) RETURNING {INFO_COLUMNS}"
            ),
            &[
                &account,
                &name,
                &special_use,
                &validity,
                &resubscribed,
                &modseq,
            ],
        )
        .await
        .map_err(exists_if_taken(name))?;
    info_from_row(&row)
}

/// Creates the missing parents of `name` (`a` and `a/b` for `a/b/c`).
async fn create_parents(tx: &Transaction<'_>, account: AccountId, name: &str) -> Result<()> {
    for (i, _) in name.match_indices(SEPARATOR) {
        let parent = &name[..i];
        if find(tx, account, parent).await?.is_none() {
            insert(tx, account, parent, None).await?;
        }
    }
    Ok(())
}

/// Creates a mailbox (and its missing parents). `name` is already
/// [`valid_new_name`], and the tree is locked.
async fn create(
    tx: &Transaction<'_>,
    account: AccountId,
    name: &str,
    special_use: Option<&str>,
) -> Result<MailboxInfo> {
    if find(tx, account, name).await?.is_some() {
        return Err(StoreError::Exists(format!("mailbox {name}")));
    }
    create_parents(tx, account, name).await?;
    insert(tx, account, name, special_use).await
}

async fn has_children(c: &impl GenericClient, account: AccountId, name: &str) -> Result<bool> {
    // `name/` up to `name0` ('0' follows '/') is exactly the subtree, in
    // byte order, in the (account_id, name) index.
    Ok(c.query_one(
        "SELECT EXISTS (SELECT 1 FROM mailboxes WHERE account_id = $1
                        AND name >= $2::text || '/' AND name < $2::text || '0')",
        &[&account, &name],
    )
    .await?
    .try_get(0)?)
}

/// Deletes a mailbox and its messages; returns its id. The tree is locked.
async fn delete(tx: &Transaction<'_>, account: AccountId, name: &str) -> Result<MailboxId> {
    if name == "INBOX" {
        return Err(StoreError::Invalid("INBOX cannot be deleted".into()));
    }
    // Locked too: a delivery under way into it finishes first, and later
    // ones find it gone.
    let row = tx
        .query_opt(
            "SELECT id, subscribed FROM mailboxes WHERE account_id = $1 AND name = $2
             FOR UPDATE",
            &[&account, &name],
        )
        .await?
        .ok_or_else(|| mailbox_not_found(name))?;
    let (id, subscribed): (MailboxId, bool) = (row.try_get(0)?, row.try_get(1)?);
    if has_children(tx, account, name).await? {
        return Err(StoreError::Invalid(format!(
            "mailbox {name} has children; delete them first"
        )));
    }
    // Messages first, so the reference-count triggers see them go; the
    // tombstones go with the mailbox row (ON DELETE CASCADE): nobody can
    // select a mailbox that no longer exists.
    let blobs: Vec<i64> = tx
        .query(
            "SELECT DISTINCT blob_id FROM messages WHERE mailbox_id = $1",
            &[&id],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let modseq = super::account_view::next_account_modseq(tx, account).await?;
    tx.execute("DELETE FROM messages WHERE mailbox_id = $1", &[&id])
        .await?;
    tx.execute(
        "INSERT INTO mailboxes_gone (account_id, mailbox_id, created, modseq)
         SELECT account_id, id, created_modseq, $2 FROM mailboxes WHERE id = $1
         ON CONFLICT (account_id, mailbox_id) DO UPDATE SET modseq = excluded.modseq",
        &[&id, &modseq],
    )
    .await?;
    tx.execute("DELETE FROM mailboxes WHERE id = $1", &[&id])
        .await?;
    super::account_view::emails_left(tx, account, &blobs, modseq).await?;
    if subscribed {
        tx.execute(
            "INSERT INTO lost_subscriptions (account_id, name) VALUES ($1, $2)
             ON CONFLICT DO NOTHING",
            &[&account, &name],
        )
        .await?;
    }
    Ok(id)
}

/// Renames a mailbox and its children; returns the ids of the mailboxes
/// whose names or contents changed. `to` is already [`valid_new_name`],
/// and the tree is locked.
async fn rename(
    tx: &Transaction<'_>,
    account: AccountId,
    from: &str,
    to: &str,
) -> Result<Vec<MailboxId>> {
    let source = must_find(tx, account, from).await?;
    if to == "INBOX" || find(tx, account, to).await?.is_some() {
        return Err(StoreError::Exists(format!("mailbox {to}")));
    }
    if from == "INBOX" {
        // RFC 3501 §6.3.5: the messages move to a new mailbox, INBOX stays
        // (empty), and its children are not renamed.
        let target = create(tx, account, to, None).await?;
        move_all(tx, source.id, target.id).await?;
        return Ok(vec![source.id, target.id]);
    }
    if to.starts_with(from) && to[from.len()..].starts_with(SEPARATOR) {
        return Err(StoreError::Invalid(format!(
            "cannot rename {from} under itself"
        )));
    }
    if has_children(tx, account, to).await? {
        return Err(StoreError::Exists(format!("mailbox {to}/...")));
    }
    create_parents(tx, account, to).await?;
    // One statement for the mailbox and its subtree. Names keep their
    // suffix after `from`; substr counts characters, hence chars().
    let keep_from = from.chars().count() as i32 + 1;
    let modseq = super::account_view::next_account_modseq(tx, account).await?;
    let rows = tx
        .query(
            "UPDATE mailboxes SET name = $3::text || substr(name, $4::int), meta_modseq = $5
             WHERE account_id = $1
               AND (name = $2 OR (name >= $2::text || '/' AND name < $2::text || '0'))
             RETURNING id",
            &[&account, &from, &to, &keep_from, &modseq],
        )
        .await
        .map_err(exists_if_taken(to))?;
    rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
}

/// Moves every message of `from` into `to`, a mailbox just made: new UIDs
/// in UID order and one new modseq there; tombstones at one new modseq in
/// `from`. What the SQLite back end's copy-then-expunge leaves, done as
/// one UPDATE of the rows, so the blobs' reference counts never move.
async fn move_all(tx: &Transaction<'_>, from: MailboxId, to: MailboxId) -> Result<()> {
    // Takes the expunge's modseq, and the row lock that keeps deliveries,
    // flag changes and expunges out of `from` until the commit; an empty
    // mailbox is left as it is.
    let has_messages: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM messages WHERE mailbox_id = $1)",
            &[&from],
        )
        .await?
        .try_get(0)?;
    if !has_messages {
        return Ok(());
    }
    // The copy's modseq, then the expunge's, as the SQLite back end's
    // copy-then-expunge takes them (account_view.rs; the tree's lock is
    // the account's row, held already).
    let copied_at = super::account_view::next_modseq(tx, to)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("mailbox {to}")))?;
    let expunged_at = super::account_view::next_modseq(tx, from)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("mailbox {from}")))?;
    let row = tx
        .query_one(
            "WITH n AS (SELECT count(*) AS n FROM messages WHERE mailbox_id = $2)
             UPDATE mailboxes SET uid_next = uid_next + n.n
             FROM n WHERE id = $1 RETURNING uid_next - n.n",
            &[&to, &from],
        )
        .await?;
    let first: i64 = row.try_get(0)?;
    tx.execute(
        "WITH moved AS (
             UPDATE messages m SET mailbox_id = $2, uid = $3 + r.n - 1, modseq = $4
             FROM (SELECT uid, row_number() OVER (ORDER BY uid) AS n
                   FROM messages WHERE mailbox_id = $1) r
             WHERE m.mailbox_id = $1 AND m.uid = r.uid
             RETURNING r.uid AS old_uid, m.blob_id, m.size, m.flags, m.internal_date, m.keywords)
         INSERT INTO expunged (mailbox_id, uid, modseq, blob_id, size, flags, internal_date, keywords)
         SELECT $1, old_uid, $5, blob_id, size, flags, internal_date, keywords FROM moved
         ON CONFLICT (mailbox_id, uid) DO UPDATE SET modseq = excluded.modseq,
             blob_id = excluded.blob_id, size = excluded.size, flags = excluded.flags,
             internal_date = excluded.internal_date, keywords = excluded.keywords",
        &[&from, &to, &first, &copied_at, &expunged_at],
    )
    .await?;
    // The emails stay in the account, in another mailbox.
    tx.execute(
        "UPDATE emails SET changed = $2
         WHERE account_id = (SELECT account_id FROM mailboxes WHERE id = $1)
           AND blob_id IN (SELECT blob_id FROM messages WHERE mailbox_id = $1)",
        &[&to, &expunged_at],
    )
    .await?;
    Ok(())
}

impl PgStore {
    pub(super) async fn mailbox(
        &self,
        account: AccountId,
        name: &str,
    ) -> Result<Option<MailboxInfo>> {
        // RFC 3501 §5.1: INBOX is case-insensitive, other names are not.
        let name = lookup_name(name);
        self.conn()
            .await?
            .query_opt_prepared(&find_sql(), &[&account, &name])
            .await?
            .map(|r| info_from_row(&r))
            .transpose()
    }

    pub(super) async fn list_mailboxes(&self, account: AccountId) -> Result<Vec<MailboxInfo>> {
        self.conn()
            .await?
            .query_prepared(
                &format!(
                    "SELECT {INFO_COLUMNS} FROM mailboxes WHERE account_id = $1 ORDER BY name"
                ),
                &[&account],
            )
            .await?
            .iter()
            .map(info_from_row)
            .collect()
    }

    pub(super) async fn create_mailbox(
        &self,
        account: AccountId,
        name: &str,
        special_use: Option<&str>,
    ) -> Result<MailboxInfo> {
        let name = valid_new_name(name)?;
        let special_use = special_use.map(valid_special_use).transpose()?;
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        lock_tree(&tx, account).await?;
        let made = create(&tx, account, &name, special_use).await?;
        tx.commit().await?;
        Ok(made)
    }

    pub(super) async fn delete_mailbox(&self, account: AccountId, name: &str) -> Result<()> {
        let name = lookup_name(name);
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        lock_tree(&tx, account).await?;
        let gone = delete(&tx, account, &name).await?;
        tx.commit().await?;
        // Its watchers wake to find it gone (and end their sessions).
        self.notify([gone]);
        Ok(())
    }

    pub(super) async fn rename_mailbox(
        &self,
        account: AccountId,
        from: &str,
        to: &str,
    ) -> Result<()> {
        let from = lookup_name(from);
        let to = valid_new_name(to)?;
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        lock_tree(&tx, account).await?;
        let touched = rename(&tx, account, &from, &to).await?;
        tx.commit().await?;
        self.notify(touched);
        Ok(())
    }

    pub(super) async fn set_subscribed(
        &self,
        account: AccountId,
        name: &str,
        subscribed: bool,
    ) -> Result<()> {
        let name = lookup_name(name);
        let mut c = self.conn().await?;
        let c = c.transaction().await?;
        // JMAP's isSubscribed changes: the account's modseq, its row
        // locked before the mailbox's as everywhere (account_view.rs).
        let modseq = super::account_view::next_account_modseq(&c, account).await?;
        let n = c
            .execute(
                "UPDATE mailboxes SET subscribed = $3, meta_modseq = $4
                 WHERE account_id = $1 AND name = $2",
                &[&account, &name, &subscribed, &modseq],
            )
            .await?;
        // A subscription whose mailbox is gone can still be dropped.
        let lost = if subscribed {
            0
        } else {
            c.execute(
                "DELETE FROM lost_subscriptions WHERE account_id = $1 AND name = $2",
                &[&account, &name],
            )
            .await?
        };
        if n == 0 && lost == 0 {
            return Err(mailbox_not_found(&name));
        }
        c.commit().await?;
        Ok(())
    }

    pub(super) async fn lost_subscriptions(&self, account: AccountId) -> Result<Vec<String>> {
        self.conn()
            .await?
            .query(
                "SELECT name FROM lost_subscriptions WHERE account_id = $1 ORDER BY name",
                &[&account],
            )
            .await?
            .iter()
            .map(|r| Ok(r.try_get(0)?))
            .collect()
    }

    pub(super) async fn special_use_of(
        &self,
        mailboxes: &[MailboxId],
        special_use: &str,
    ) -> Result<Vec<MailboxId>> {
        // One statement for the whole list, answered in its order.
        self.conn()
            .await?
            .query(
                "SELECT coalesce(
                     (SELECT s.id FROM mailboxes m JOIN mailboxes s ON s.account_id = m.account_id
                      WHERE m.id = q.id AND s.special_use = $2 ORDER BY s.id LIMIT 1),
                     q.id)
                 FROM unnest($1::bigint[]) WITH ORDINALITY AS q(id, n) ORDER BY q.n",
                &[&mailboxes, &special_use],
            )
            .await?
            .iter()
            .map(|r| Ok(r.try_get(0)?))
            .collect()
    }

    pub(super) async fn mailbox_status(&self, mailbox: MailboxId) -> Result<MailboxStatus> {
        // One statement, one snapshot: the counts the triggers keep
        // (schema.rs), and the recent messages, a range at the end of the
        // mailbox's UIDs. That range is counted only when it starts inside
        // the mailbox: in one no session has selected since its mail came,
        // every message is recent, and counting them all would be
        // O(messages).
        let row = self
            .conn()
            .await?
            .query_opt_prepared(
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
                 FROM mailboxes x WHERE x.id = $1",
                &[&mailbox],
            )
            .await?
            .ok_or_else(|| mailbox_not_found(&mailbox.to_string()))?;
        Ok(MailboxStatus {
            messages: narrow(row.try_get(0)?, "message count")?,
            unseen: narrow(row.try_get(1)?, "unseen count")?,
            deleted: narrow(row.try_get(2)?, "deleted count")?,
            size: row.try_get::<_, i64>(3)? as u64,
            uid_next: narrow(row.try_get(4)?, "UIDNEXT")?,
            uid_validity: narrow(row.try_get(5)?, "UIDVALIDITY")?,
            highest_modseq: row.try_get::<_, i64>(6)? as u64,
            recent: narrow(row.try_get(7)?, "recent count")?,
            recent_from: narrow(row.try_get(8)?, "recent mark")?,
        })
    }

    pub(super) async fn quota(&self, account: AccountId) -> Result<Quota> {
        // The mailboxes' kept counts (schema.rs): one row each, however
        // many messages (APPEND asks this every time).
        let row = self
            .conn()
            .await?
            .query_opt_prepared(
                "SELECT a.quota_bytes, t.bytes, t.messages
                 FROM accounts a, LATERAL (
                     SELECT coalesce(sum(x.n_bytes), 0)::bigint AS bytes,
                            coalesce(sum(x.n_messages), 0)::bigint AS messages
                     FROM mailboxes x WHERE x.account_id = a.id) t
                 WHERE a.id = $1",
                &[&account],
            )
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("account {account}")))?;
        Ok(Quota {
            limit_bytes: row.try_get::<_, Option<i64>>(0)?.map(|n| n as u64),
            used_bytes: row.try_get::<_, i64>(1)? as u64,
            messages: row.try_get::<_, i64>(2)? as u64,
        })
    }

    pub(super) async fn mailbox_keywords(&self, mailbox: MailboxId) -> Result<Vec<String>> {
        // Each distinct set once, in the order of the first message that
        // has it, so "the first spelling met" is the lowest UID's.
        let rows = self
            .conn()
            .await?
            .query_prepared(
                "SELECT keywords FROM messages WHERE mailbox_id = $1 AND keywords != ''
                 GROUP BY keywords ORDER BY min(uid)",
                &[&mailbox],
            )
            .await?;
        let mut all: Vec<String> = Vec::new();
        for row in &rows {
            for k in keyword::split(row.try_get(0)?) {
                if !all.iter().any(|a| a.eq_ignore_ascii_case(k)) {
                    all.push(k.to_string());
                }
            }
        }
        all.sort_by_key(|k| k.to_ascii_lowercase());
        Ok(all)
    }

    pub(super) async fn uid_runs(&self, mailbox: MailboxId) -> Result<Vec<(Uid, u32)>> {
        // Gaps and islands: within a run, uid - rank is constant.
        self.conn()
            .await?
            .query_prepared(
                "SELECT min(uid), count(*) FROM (
                     SELECT uid, uid - row_number() OVER (ORDER BY uid) AS island
                     FROM messages WHERE mailbox_id = $1) AS runs
                 GROUP BY island ORDER BY 1",
                &[&mailbox],
            )
            .await?
            .iter()
            .map(|r| Ok((narrow(r.try_get(0)?, "UID")?, narrow(r.try_get(1)?, "run")?)))
            .collect()
    }

    pub(super) async fn first_unseen(&self, mailbox: MailboxId) -> Result<Option<Uid>> {
        let seen = FLAG_SEEN as i32;
        self.conn()
            .await?
            .query_one_prepared(
                "SELECT min(uid) FROM messages WHERE mailbox_id = $1 AND (flags & $2) = 0",
                &[&mailbox, &seen],
            )
            .await?
            .try_get::<_, Option<i64>>(0)?
            .map(|uid| narrow(uid, "UID"))
            .transpose()
    }

    pub(super) async fn claim_recent(&self, mailbox: MailboxId) -> Result<(Uid, Uid)> {
        // One statement: the row lock taken by `old` makes concurrent
        // claims (from any node) wait and then read the mark this one
        // moved, so exactly one claim gets each new UID. A delivery under
        // way holds the same lock, so nothing is claimed before it is
        // visible.
        let row = self
            .conn()
            .await?
            .query_opt_prepared(
                "WITH old AS (
                     SELECT id, recent_from, uid_next FROM mailboxes WHERE id = $1 FOR UPDATE),
                 claimed AS (
                     UPDATE mailboxes x SET recent_from = old.uid_next FROM old
                     WHERE x.id = old.id AND old.recent_from < old.uid_next)
                 SELECT recent_from, greatest(recent_from, uid_next) FROM old",
                &[&mailbox],
            )
            .await?
            .ok_or_else(|| mailbox_not_found(&mailbox.to_string()))?;
        Ok((
            narrow(row.try_get(0)?, "recent mark")?,
            narrow(row.try_get(1)?, "UIDNEXT")?,
        ))
    }
}
