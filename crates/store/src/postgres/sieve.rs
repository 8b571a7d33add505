//! Sieve scripts and the filter's memory, as in the SQLite back end
//! (sqlite/sieve.rs): scripts are text the servers compiled, global
//! scripts live under account 0, and a change to scripts bumps the
//! directory serial so every node's delivery sees the new active script.
//!
//! Names are listed in byte order (`COLLATE "C"`), as SQLite's binary
//! collation lists them, whatever the database's own collation.

use tokio_postgres::error::SqlState;
use tokio_postgres::Transaction;

use super::PgStore;
use crate::clock::now;
use crate::error::{Result, StoreError};
use crate::model::{AccountId, ScriptOwner, SieveScriptInfo};
use crate::names::valid_script_name;
use crate::owner::script_owner_id;

/// Whether the script is active, `None` if there is no such script; its
/// row stays locked until the transaction ends, so what is decided on the
/// answer cannot be raced.
async fn script_active(
    tx: &Transaction<'_>,
    account: AccountId,
    name: &str,
) -> Result<Option<bool>> {
    let row = tx
        .query_opt(
            "SELECT active FROM sieve_scripts WHERE account_id = $1 AND name = $2 FOR UPDATE",
            &[&account, &name],
        )
        .await?;
    Ok(row.map(|r| r.try_get(0)).transpose()?)
}

/// The names of an account's scripts, their rows locked in name order
/// until the transaction ends: two activations at once take turns rather
/// than lock the rows in different orders and deadlock.
async fn lock_scripts(tx: &Transaction<'_>, account: AccountId) -> Result<Vec<String>> {
    let rows = tx
        .query(
            "SELECT name FROM sieve_scripts WHERE account_id = $1 ORDER BY name FOR UPDATE",
            &[&account],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?)
}

fn not_found(name: &str) -> StoreError {
    StoreError::NotFound(format!("script {name:?}"))
}

fn taken(name: &str) -> StoreError {
    StoreError::Exists(format!("script {name:?}"))
}

impl PgStore {
    pub(super) async fn sieve_scripts(&self, owner: ScriptOwner) -> Result<Vec<SieveScriptInfo>> {
        let c = self.conn().await?;
        let rows = c
            .query(
                "SELECT name, active, octet_length(source) FROM sieve_scripts
                 WHERE account_id = $1 ORDER BY name COLLATE \"C\"",
                &[&script_owner_id(owner)],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(SieveScriptInfo {
                    name: r.try_get(0)?,
                    active: r.try_get(1)?,
                    size: r.try_get::<_, i32>(2)? as u64,
                })
            })
            .collect()
    }

    pub(super) async fn sieve_script(
        &self,
        owner: ScriptOwner,
        name: &str,
    ) -> Result<Option<String>> {
        let c = self.conn().await?;
        let row = c
            .query_opt(
                "SELECT source FROM sieve_scripts WHERE account_id = $1 AND name = $2",
                &[&script_owner_id(owner), &name],
            )
            .await?;
        Ok(row.map(|r| r.try_get(0)).transpose()?)
    }

    pub(super) async fn put_sieve_script(
        &self,
        owner: ScriptOwner,
        name: &str,
        source: &str,
    ) -> Result<()> {
        valid_script_name(name)?;
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        tx.execute(
            "INSERT INTO sieve_scripts (account_id, name, source, updated) VALUES ($1, $2, $3, $4)
             ON CONFLICT (account_id, name) DO UPDATE SET source = $3, updated = $4",
            &[&script_owner_id(owner), &name, &source, &now()],
        )
        .await?;
        super::directory::bump_serial(&tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// RFC 5804 §2.8: activating one deactivates the others; `None`
    /// deactivates all.
    pub(super) async fn activate_sieve_script(
        &self,
        account: AccountId,
        name: Option<&str>,
    ) -> Result<()> {
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let names = lock_scripts(&tx, account).await?;
        if let Some(name) = name {
            if !names.iter().any(|known| known == name) {
                return Err(not_found(name));
            }
        }
        tx.execute(
            "UPDATE sieve_scripts SET active = coalesce(name = $2, false) WHERE account_id = $1",
            &[&account, &name],
        )
        .await?;
        super::directory::bump_serial(&tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// RFC 5804 §2.10: the active script cannot be deleted.
    pub(super) async fn delete_sieve_script(&self, owner: ScriptOwner, name: &str) -> Result<()> {
        let account = script_owner_id(owner);
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        match script_active(&tx, account, name).await? {
            None => return Err(not_found(name)),
            Some(true) => {
                return Err(StoreError::InUse(format!(
                    "script {name:?} is active (deactivate it first)"
                )))
            }
            Some(false) => {}
        }
        tx.execute(
            "DELETE FROM sieve_scripts WHERE account_id = $1 AND name = $2",
            &[&account, &name],
        )
        .await?;
        super::directory::bump_serial(&tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// RFC 5804 §2.11.1: the new name must be free; an active script stays
    /// active under it.
    pub(super) async fn rename_sieve_script(
        &self,
        owner: ScriptOwner,
        from: &str,
        to: &str,
    ) -> Result<()> {
        valid_script_name(to)?;
        let account = script_owner_id(owner);
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        if script_active(&tx, account, to).await?.is_some() {
            return Err(taken(to));
        }
        let renamed = tx
            .execute(
                "UPDATE sieve_scripts SET name = $3 WHERE account_id = $1 AND name = $2",
                &[&account, &from, &to],
            )
            .await;
        match renamed {
            // Another node stored `to` since the check above.
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => return Err(taken(to)),
            Err(e) => return Err(e.into()),
            Ok(0) => return Err(not_found(from)),
            Ok(_) => {}
        }
        super::directory::bump_serial(&tx).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn sieve_memory_holds(&self, account: AccountId, key: &str) -> Result<bool> {
        let c = self.conn().await?;
        let row = c
            .query_opt(
                "SELECT 1 FROM sieve_memory WHERE account_id = $1 AND key = $2 AND expires > $3",
                &[&account, &key, &now()],
            )
            .await?;
        Ok(row.is_some())
    }

    /// Remembers keys until their expiry (a key remembered again keeps
    /// the later one); the account's expired entries go.
    pub(super) async fn remember_in_sieve_memory(
        &self,
        account: AccountId,
        keys: Vec<(String, i64)>,
    ) -> Result<()> {
        let (names, expiries): (Vec<String>, Vec<i64>) = keys.into_iter().unzip();
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        tx.execute(
            "DELETE FROM sieve_memory WHERE account_id = $1 AND expires <= $2",
            &[&account, &now()],
        )
        .await?;
        // One statement for the batch; a key given twice is folded first,
        // since one INSERT may not update the same row twice, and rows go
        // in key order so concurrent batches lock them in the same order.
        tx.execute(
            "INSERT INTO sieve_memory (account_id, key, expires)
             SELECT $1::bigint, k.key, max(k.expires)
             FROM unnest($2::text[], $3::bigint[]) AS k (key, expires)
             GROUP BY k.key ORDER BY k.key
             ON CONFLICT (account_id, key)
             DO UPDATE SET expires = greatest(sieve_memory.expires, excluded.expires)",
            &[&account, &names, &expiries],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
