//! Per-account protocol records (JMAP Identity, EmailSubmission, ...) on
//! PostgreSQL.

use super::PgStore;
use crate::error::{Result, StoreError};
use crate::model::{AccountId, AccountRecord};

impl PgStore {
    pub(super) async fn account_records(
        &self,
        account: AccountId,
        kind: &str,
    ) -> Result<Vec<AccountRecord>> {
        let c = self.conn().await?;
        let rows = c
            .query(
                "SELECT id, changed, body FROM account_records
                 WHERE account_id = $1 AND kind = $2",
                &[&account, &kind],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| AccountRecord {
                id: r.get(0),
                changed: r.get::<_, i64>(1) as u64,
                body: r.get(2),
            })
            .collect())
    }

    pub(super) async fn put_account_record(
        &self,
        account: AccountId,
        kind: &str,
        id: Option<&str>,
        body: Option<&str>,
    ) -> Result<(String, u64)> {
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        // The account row is locked: writers of one account's records take
        // their change numbers one after the other, and a removal of the
        // account cannot leave records behind it.
        let exists = tx
            .query_opt(
                "SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE",
                &[&account],
            )
            .await?
            .is_some();
        if !exists {
            return Err(StoreError::NotFound(format!("account {account}")));
        }
        let last: Option<i64> = tx
            .query_one(
                "SELECT max(changed) FROM account_records WHERE account_id = $1 AND kind = $2",
                &[&account, &kind],
            )
            .await?
            .get(0);
        let changed = last.unwrap_or(0) + 1;
        let id = id.map_or_else(|| changed.to_string(), str::to_string);
        tx.execute(
            "INSERT INTO account_records (account_id, kind, id, changed, body)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (account_id, kind, id) DO UPDATE
                 SET changed = excluded.changed, body = excluded.body",
            &[&account, &kind, &id, &changed, &body],
        )
        .await?;
        tx.commit().await?;
        Ok((id, changed as u64))
    }
}
