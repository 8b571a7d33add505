//! Sieve scripts and the filter's memory. Scripts are text: the store
//! does not parse them (the servers compile them before they get here).
//! A change bumps the directory serial, so every delivering process sees
//! the new active script without a database read per message.

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Result, StoreError};
use crate::model::{AccountId, ScriptOwner, SieveScriptInfo};
use crate::names::valid_script_name;
use crate::owner::script_owner_id;

pub(super) fn list(c: &Connection, owner: ScriptOwner) -> Result<Vec<SieveScriptInfo>> {
    let scripts = c
        .prepare_cached(
            "SELECT name, active, length(CAST(source AS BLOB)) FROM sieve_scripts
             WHERE account_id = ?1 ORDER BY name",
        )?
        .query_map([script_owner_id(owner)], |r| {
            Ok(SieveScriptInfo {
                name: r.get(0)?,
                active: r.get::<_, i64>(1)? != 0,
                size: r.get::<_, i64>(2)? as u64,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(scripts)
}

pub(super) fn get(c: &Connection, owner: ScriptOwner, name: &str) -> Result<Option<String>> {
    Ok(c.query_row(
        "SELECT source FROM sieve_scripts WHERE account_id = ?1 AND name = ?2",
        params![script_owner_id(owner), name],
        |r| r.get(0),
    )
    .optional()?)
}

pub(super) fn put(
    c: &Connection,
    owner: ScriptOwner,
    name: &str,
    source: &str,
    now: i64,
) -> Result<()> {
    valid_script_name(name)?;
    c.execute(
        "INSERT INTO sieve_scripts (account_id, name, source, updated) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (account_id, name) DO UPDATE SET source = ?3, updated = ?4",
        params![script_owner_id(owner), name, source, now],
    )?;
    Ok(())
}

/// RFC 5804 §2.8: activating one deactivates the others; `None`
/// deactivates all.
pub(super) fn activate(c: &Connection, account: AccountId, name: Option<&str>) -> Result<()> {
    if let Some(name) = name {
        let known: Option<i64> = c
            .query_row(
                "SELECT 1 FROM sieve_scripts WHERE account_id = ?1 AND name = ?2",
                params![account, name],
                |r| r.get(0),
            )
            .optional()?;
        if known.is_none() {
            return Err(StoreError::NotFound(format!("script {name:?}")));
        }
    }
    c.execute(
        "UPDATE sieve_scripts SET active = (name IS ?2) WHERE account_id = ?1",
        params![account, name],
    )?;
    Ok(())
}

/// RFC 5804 §2.10: the active script cannot be deleted.
pub(super) fn delete(c: &Connection, owner: ScriptOwner, name: &str) -> Result<()> {
    let active: Option<i64> = c
        .query_row(
            "SELECT active FROM sieve_scripts WHERE account_id = ?1 AND name = ?2",
            params![script_owner_id(owner), name],
            |r| r.get(0),
        )
        .optional()?;
    match active {
        None => Err(StoreError::NotFound(format!("script {name:?}"))),
        Some(1) => Err(StoreError::InUse(format!(
            "script {name:?} is active (deactivate it first)"
        ))),
        Some(_) => {
            c.execute(
                "DELETE FROM sieve_scripts WHERE account_id = ?1 AND name = ?2",
                params![script_owner_id(owner), name],
            )?;
            Ok(())
        }
    }
}

/// RFC 5804 §2.11.1: the new name must be free; an active script stays
/// active under it.
pub(super) fn rename(c: &Connection, owner: ScriptOwner, from: &str, to: &str) -> Result<()> {
    valid_script_name(to)?;
    if get(c, owner, to)?.is_some() {
        return Err(StoreError::Exists(format!("script {to:?}")));
    }
    let n = c.execute(
        "UPDATE sieve_scripts SET name = ?3 WHERE account_id = ?1 AND name = ?2",
        params![script_owner_id(owner), from, to],
    )?;
    if n == 0 {
        return Err(StoreError::NotFound(format!("script {from:?}")));
    }
    Ok(())
}

/// Every account's active script and every global script, for the
/// directory snapshot.
pub(super) fn for_directory(c: &Connection) -> Result<Vec<(AccountId, String, String, bool)>> {
    let rows = c
        .prepare(
            "SELECT account_id, name, source, active FROM sieve_scripts
             WHERE active = 1 OR account_id = 0",
        )?
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get::<_, i64>(3)? != 0))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

pub(super) fn seen(c: &Connection, account: AccountId, key: &str, now: i64) -> Result<bool> {
    let found: Option<i64> = c
        .query_row(
            "SELECT 1 FROM sieve_memory WHERE account_id = ?1 AND key = ?2 AND expires > ?3",
            params![account, key, now],
            |r| r.get(0),
        )
        .optional()?;
    Ok(found.is_some())
}

/// Remembers keys until their expiry; expired entries of the account go.
pub(super) fn remember(
    c: &Connection,
    account: AccountId,
    keys: &[(String, i64)],
    now: i64,
) -> Result<()> {
    c.execute(
        "DELETE FROM sieve_memory WHERE account_id = ?1 AND expires <= ?2",
        params![account, now],
    )?;
    let mut insert = c.prepare_cached(
        "INSERT INTO sieve_memory (account_id, key, expires) VALUES (?1, ?2, ?3)
         ON CONFLICT (account_id, key) DO UPDATE SET expires = max(expires, ?3)",
    )?;
    for (key, expires) in keys {
        insert.execute(params![account, key, expires])?;
    }
    Ok(())
}
