//! Per-account protocol records (JMAP Identity, EmailSubmission, ...).

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Result, StoreError};
use crate::model::{AccountId, AccountRecord};

pub(super) fn records(
    c: &Connection,
    account: AccountId,
    kind: &str,
) -> Result<Vec<AccountRecord>> {
    let mut stmt = c.prepare_cached(
        "SELECT id, changed, body FROM account_records WHERE account_id = ?1 AND kind = ?2",
    )?;
    let rows = stmt.query_map(params![account, kind], |r| {
        Ok(AccountRecord {
            id: r.get(0)?,
            changed: r.get::<_, i64>(1)? as u64,
            body: r.get(2)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub(super) fn put(
    c: &Connection,
    account: AccountId,
    kind: &str,
    id: Option<&str>,
    body: Option<&str>,
) -> Result<(String, u64)> {
    let exists: bool = c.query_row(
        "SELECT EXISTS (SELECT 1 FROM accounts WHERE id = ?1)",
        [account],
        |r| r.get(0),
    )?;
    if !exists {
        return Err(StoreError::NotFound(format!("account {account}")));
    }
    let last: Option<i64> = c
        .prepare_cached(
            "SELECT max(changed) FROM account_records WHERE account_id = ?1 AND kind = ?2",
        )?
        .query_row(params![account, kind], |r| r.get(0))
        .optional()?
        .flatten();
    let changed = last.unwrap_or(0) + 1;
    let id = id.map_or_else(|| changed.to_string(), str::to_string);
    c.prepare_cached(
        "INSERT INTO account_records (account_id, kind, id, changed, body)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (account_id, kind, id) DO UPDATE SET changed = ?4, body = ?5",
    )?
    .execute(params![account, kind, id, changed, body])?;
    Ok((id, changed as u64))
}

/// Drops a removed account's records.
pub(super) fn forget_account(c: &Connection, account: AccountId) -> Result<()> {
    c.execute(
        "DELETE FROM account_records WHERE account_id = ?1",
        [account],
    )?;
    Ok(())
}
