//! The mailbox tree of an account: creation, deletion, renaming.
//!
//! Names follow the store's rules (mailbox_names.rs). A mailbox's parents
//! always exist: creating or renaming to `a/b/c` creates `a` and `a/b` if
//! needed (RFC 3501 §6.3.3), and a mailbox with children cannot be
//! deleted.

use rusqlite::{params, Connection, OptionalExtension};

use super::entries;
use crate::error::{Result, StoreError};
use crate::mailbox_names::SEPARATOR;
use crate::model::{AccountId, MailboxId, MailboxInfo};

/// Columns read into a [`MailboxInfo`] by [`info_from_row`].
pub(crate) const INFO_COLUMNS: &str =
    "id, account_id, name, uid_validity, uid_next, highest_modseq, special_use, subscribed,
     n_messages, n_unseen";

pub(crate) fn info_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<MailboxInfo> {
    Ok(MailboxInfo {
        id: r.get(0)?,
        account: r.get(1)?,
        name: r.get(2)?,
        uid_validity: r.get(3)?,
        uid_next: r.get(4)?,
        highest_modseq: r.get::<_, i64>(5)? as u64,
        special_use: r.get(6)?,
        subscribed: r.get(7)?,
        messages: r.get(8)?,
        unseen: r.get(9)?,
    })
}

pub(crate) fn find(c: &Connection, account: AccountId, name: &str) -> Result<Option<MailboxInfo>> {
    Ok(c.prepare_cached(&format!(
        "SELECT {INFO_COLUMNS} FROM mailboxes WHERE account_id = ?1 AND name = ?2"
    ))?
    .query_row(params![account, name], info_from_row)
    .optional()?)
}

fn must_find(c: &Connection, account: AccountId, name: &str) -> Result<MailboxInfo> {
    find(c, account, name)?.ok_or_else(|| StoreError::NotFound(format!("mailbox {name}")))
}

/// The mailboxes of an account, in name order.
pub(crate) fn list(c: &Connection, account: AccountId) -> Result<Vec<MailboxInfo>> {
    Ok(c.prepare_cached(&format!(
        "SELECT {INFO_COLUMNS} FROM mailboxes WHERE account_id = ?1 ORDER BY name"
    ))?
    .query_map([account], info_from_row)?
    .collect::<rusqlite::Result<Vec<_>>>()?)
}

/// A UIDVALIDITY the account never used: above every mailbox it has and
/// every one it ever created (RFC 3501 §2.3.1.1: a UIDVALIDITY+UID pair
/// never names two messages).
fn fresh_uid_validity(c: &Connection, account: AccountId) -> Result<u32> {
    let v: Option<i64> = c
        .query_row(
            "UPDATE accounts SET uid_validity_last = max(?2, uid_validity_last + 1,
                 coalesce((SELECT max(uid_validity) FROM mailboxes WHERE account_id = ?1), 0) + 1)
             WHERE id = ?1 RETURNING uid_validity_last",
            params![account, crate::clock::now()],
            |r| r.get(0),
        )
        .optional()?;
    let v = v.ok_or_else(|| StoreError::NotFound(format!("account {account}")))?;
    u32::try_from(v).map_err(|_| StoreError::Invalid("UIDVALIDITY space exhausted".into()))
}

fn insert(
    c: &Connection,
    account: AccountId,
    name: &str,
    special_use: Option<&str>,
) -> Result<MailboxInfo> {
    let validity = fresh_uid_validity(c, account)?;
    // Ids are never reused (a session may still hold a deleted one's).
    let id: i64 = c.query_row(
        "UPDATE meta SET value = max(value, (SELECT coalesce(max(id), 0) FROM mailboxes)) + 1
         WHERE key = 'mailbox_id_last' RETURNING value",
        [],
        |r| r.get(0),
    )?;
    // CREATE does not subscribe (RFC 3501 §6.3.6 keeps the two apart),
    // unless the name kept a subscription from a mailbox deleted before.
    let resubscribed = c.execute(
        "DELETE FROM lost_subscriptions WHERE account_id = ?1 AND name = ?2",
        params![account, name],
    )? > 0;
    let modseq = super::account_view::next_account_modseq(c, account)?;
    Ok(c.query_row(
        &format!(
            "INSERT INTO mailboxes (id, account_id, name, special_use, uid_validity, subscribed,
                                    highest_modseq, created_modseq, meta_modseq)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?7) RETURNING {INFO_COLUMNS}"
        ),
        params![
            id,
            account,
            name,
            special_use,
            validity,
            resubscribed,
            modseq
        ],
        info_from_row,
    )?)
}

/// Creates the missing parents of `name` (`a` and `a/b` for `a/b/c`).
fn create_parents(c: &Connection, account: AccountId, name: &str) -> Result<()> {
    for (i, _) in name.match_indices(SEPARATOR) {
        let parent = &name[..i];
        if find(c, account, parent)?.is_none() {
            insert(c, account, parent, None)?;
        }
    }
    Ok(())
}

/// Creates a mailbox (and its missing parents). `name` is already
/// [`valid_new_name`].
pub(crate) fn create(
    c: &Connection,
    account: AccountId,
    name: &str,
    special_use: Option<&str>,
) -> Result<MailboxInfo> {
    if find(c, account, name)?.is_some() {
        return Err(StoreError::Exists(format!("mailbox {name}")));
    }
    create_parents(c, account, name)?;
    insert(c, account, name, special_use)
}

fn has_children(c: &Connection, account: AccountId, name: &str) -> Result<bool> {
    // `name/` up to `name0` ('0' follows '/') is exactly the subtree, in
    // the (account_id, name) index.
    Ok(c.query_row(
        "SELECT EXISTS (SELECT 1 FROM mailboxes WHERE account_id = ?1
                        AND name >= ?2 || '/' AND name < ?2 || '0')",
        params![account, name],
        |r| r.get(0),
    )?)
}

/// Deletes a mailbox and its messages; returns its id.
pub(crate) fn delete(c: &Connection, account: AccountId, name: &str) -> Result<MailboxId> {
    if name == "INBOX" {
        return Err(StoreError::Invalid("INBOX cannot be deleted".into()));
    }
    let mailbox = must_find(c, account, name)?;
    if has_children(c, account, name)? {
        return Err(StoreError::Invalid(format!(
            "mailbox {name} has children; delete them first"
        )));
    }
    // Messages first, so the reference-count triggers see them go; the
    // tombstones go with the mailbox row (ON DELETE CASCADE): nobody can
    // select a mailbox that no longer exists.
    let blobs: Vec<i64> = c
        .prepare("SELECT DISTINCT blob_id FROM messages WHERE mailbox_id = ?1")?
        .query_map([mailbox.id], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let modseq = super::account_view::next_account_modseq(c, account)?;
    c.execute("DELETE FROM messages WHERE mailbox_id = ?1", [mailbox.id])?;
    c.execute(
        "INSERT OR REPLACE INTO mailboxes_gone (account_id, mailbox_id, created, modseq)
         SELECT account_id, id, created_modseq, ?2 FROM mailboxes WHERE id = ?1",
        params![mailbox.id, modseq],
    )?;
    c.execute("DELETE FROM mailboxes WHERE id = ?1", [mailbox.id])?;
    super::account_view::emails_left(c, account, &blobs, modseq)?;
    if mailbox.subscribed {
        c.execute(
            "INSERT OR IGNORE INTO lost_subscriptions (account_id, name) VALUES (?1, ?2)",
            params![account, name],
        )?;
    }
    Ok(mailbox.id)
}

/// Renames a mailbox and its children; returns the ids of the mailboxes
/// whose names or contents changed. `to` is already [`valid_new_name`].
pub(crate) fn rename(
    c: &Connection,
    account: AccountId,
    from: &str,
    to: &str,
) -> Result<Vec<MailboxId>> {
    let source = must_find(c, account, from)?;
    if to == "INBOX" || find(c, account, to)?.is_some() {
        return Err(StoreError::Exists(format!("mailbox {to}")));
    }
    if from == "INBOX" {
        // RFC 3501 §6.3.5: the messages move to a new mailbox, INBOX stays
        // (empty), and its children are not renamed.
        let target = create(c, account, to, None)?;
        let uids: Vec<u32> = c
            .prepare("SELECT uid FROM messages WHERE mailbox_id = ?1")?
            .query_map([source.id], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        entries::move_rows(c, source.id, &uids, target.id)?;
        return Ok(vec![source.id, target.id]);
    }
    if to.starts_with(from) && to[from.len()..].starts_with(SEPARATOR) {
        return Err(StoreError::Invalid(format!(
            "cannot rename {from} under itself"
        )));
    }
    if has_children(c, account, to)? {
        return Err(StoreError::Exists(format!("mailbox {to}/...")));
    }
    create_parents(c, account, to)?;
    // One statement for the mailbox and its subtree. Names keep their
    // suffix after `from`; substr counts characters, hence chars().
    let keep_from = from.chars().count() as i64 + 1;
    let modseq = super::account_view::next_account_modseq(c, account)?;
    let ids = c
        .prepare(
            "UPDATE mailboxes SET name = ?3 || substr(name, ?4), meta_modseq = ?5
             WHERE account_id = ?1 AND (name = ?2 OR (name >= ?2 || '/' AND name < ?2 || '0'))
             RETURNING id",
        )?
        .query_map(params![account, from, to, keep_from, modseq], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<MailboxId>>>()?;
    Ok(ids)
}
