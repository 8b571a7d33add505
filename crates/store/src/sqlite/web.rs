//! Webmail sessions and settings.

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Result, StoreError};
use crate::model::{AccountId, WebSession, WebSettings};
use crate::web_settings::check_settings;

pub(super) fn create_session(c: &Connection, s: &WebSession) -> Result<()> {
    c.prepare_cached("DELETE FROM web_sessions WHERE expires <= ?1")?
        .execute([s.created])?;
    let n = c
        .prepare_cached(
            "INSERT OR IGNORE INTO web_sessions (id_hash, account_id, csrf, created, expires)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![s.id_hash, s.account, s.csrf, s.created, s.expires])?;
    if n == 0 {
        return Err(StoreError::Exists("web session".into()));
    }
    Ok(())
}

pub(super) fn session(c: &Connection, id_hash: &str, now: i64) -> Result<Option<WebSession>> {
    Ok(c.prepare_cached(
        "SELECT s.id_hash, s.account_id, s.csrf, s.created, s.expires, a.address
         FROM web_sessions s JOIN accounts a ON a.id = s.account_id
         WHERE s.id_hash = ?1 AND s.expires > ?2",
    )?
    .query_row(params![id_hash, now], |r| {
        Ok(WebSession {
            id_hash: r.get(0)?,
            account: r.get(1)?,
            csrf: r.get(2)?,
            created: r.get(3)?,
            expires: r.get(4)?,
            address: r.get(5)?,
        })
    })
    .optional()?)
}

pub(super) fn delete_session(c: &Connection, id_hash: &str) -> Result<()> {
    c.prepare_cached("DELETE FROM web_sessions WHERE id_hash = ?1")?
        .execute([id_hash])?;
    Ok(())
}

/// Drops what the webmail kept for a removed account.
pub(super) fn forget_account(c: &Connection, account: AccountId) -> Result<()> {
    c.execute("DELETE FROM web_sessions WHERE account_id = ?1", [account])?;
    c.execute("DELETE FROM web_settings WHERE account_id = ?1", [account])?;
    Ok(())
}

pub(super) fn settings(c: &Connection, account: AccountId) -> Result<WebSettings> {
    Ok(c.prepare_cached(
        "SELECT display_name, signature, page_size, remote_ok
         FROM web_settings WHERE account_id = ?1",
    )?
    .query_row([account], |r| {
        Ok(WebSettings {
            display_name: r.get(0)?,
            signature: r.get(1)?,
            page_size: r.get(2)?,
            remote_ok: r
                .get::<_, String>(3)?
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect(),
        })
    })
    .optional()?
    .unwrap_or_default())
}

pub(super) fn set_settings(c: &Connection, account: AccountId, s: &WebSettings) -> Result<()> {
    check_settings(s)?;
    let exists: bool = c.query_row(
        "SELECT EXISTS (SELECT 1 FROM accounts WHERE id = ?1)",
        [account],
        |r| r.get(0),
    )?;
    if !exists {
        return Err(StoreError::NotFound(format!("account {account}")));
    }
    c.prepare_cached(
        "INSERT INTO web_settings (account_id, display_name, signature, page_size, remote_ok)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (account_id) DO UPDATE SET display_name = ?2, signature = ?3,
             page_size = ?4, remote_ok = ?5",
    )?
    .execute(params![
        account,
        s.display_name,
        s.signature,
        s.page_size,
        s.remote_ok.join("\n")
    ])?;
    Ok(())
}
