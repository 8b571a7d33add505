//! The spam classifier's models, as in the SQLite back end
//! (sqlite/spam.rs): token counts per account (account 0 is the global
//! model), message totals per class, what each message was trained as,
//! and the training queue the moves into and out of Junk fill.
//!
//! Where SQLite loops over a message's tokens, one statement takes them
//! all as an array: a round trip per token would cost more than the
//! delivery over a network. Training locks the model's totals row first,
//! so trainings of one model on several nodes take turns rather than
//! deadlock on each other's token rows.

use std::collections::HashMap;

use tokio_postgres::Transaction;

use super::directory::bump_serial;
use super::PgStore;
use crate::clock::now;
use crate::error::{Result, StoreError};
use crate::model::{AccountId, BlobId, SpamModel, SpamTraining};
use crate::names::valid_address;
use crate::owner::spam_owner_id;

/// The counts column of a class.
fn column(spam: bool) -> &'static str {
    if spam {
        "spam"
    } else {
        "ham"
    }
}

/// Takes the model's totals row (creating it at zero) for the rest of
/// the transaction: training of one model is one writer at a time.
async fn lock_model_for_training(tx: &Transaction<'_>, owner: AccountId) -> Result<()> {
    tx.execute(
        "INSERT INTO spam_totals (account_id) VALUES ($1)
         ON CONFLICT (account_id) DO UPDATE SET spam = spam_totals.spam",
        &[&owner],
    )
    .await?;
    Ok(())
}

/// What this model learnt the message as, if it learnt it.
async fn trained_as(
    tx: &Transaction<'_>,
    owner: AccountId,
    blob: Option<BlobId>,
) -> Result<Option<bool>> {
    let Some(blob) = blob else {
        return Ok(None);
    };
    let row = tx
        .query_opt(
            "SELECT spam FROM spam_trained WHERE account_id = $1 AND blob_id = $2",
            &[&owner, &blob],
        )
        .await?;
    Ok(row.map(|r| r.try_get(0)).transpose()?)
}

/// Counts a message in a class: its total and each of its tokens (a
/// token given twice counts twice, as in SQLite), all seen now.
async fn learn(
    tx: &Transaction<'_>,
    owner: AccountId,
    tokens: &[String],
    spam: bool,
    now: i64,
) -> Result<()> {
    let column = column(spam);
    tx.execute(
        &format!("UPDATE spam_totals SET {column} = {column} + 1 WHERE account_id = $1"),
        &[&owner],
    )
    .await?;
    // Grouped, since one INSERT may not update the same row twice; in
    // token order, so concurrent writers lock rows in the same order.
    tx.execute(
        &format!(
            "INSERT INTO spam_tokens (account_id, token, {column}, seen)
             SELECT $1::bigint, t.token, count(*), $3::bigint FROM unnest($2::text[]) AS t (token)
             GROUP BY t.token ORDER BY t.token
             ON CONFLICT (account_id, token)
             DO UPDATE SET {column} = spam_tokens.{column} + excluded.{column}, seen = $3"
        ),
        &[&owner, &tokens, &now],
    )
    .await?;
    Ok(())
}

/// Uncounts a message from a class (never below 0); tokens left with no
/// counts in either class go.
async fn unlearn(
    tx: &Transaction<'_>,
    owner: AccountId,
    tokens: &[String],
    spam: bool,
    now: i64,
) -> Result<()> {
    let column = column(spam);
    tx.execute(
        &format!(
            "UPDATE spam_totals SET {column} = greatest(0, {column} - 1) WHERE account_id = $1"
        ),
        &[&owner],
    )
    .await?;
    tx.execute(
        &format!(
            "UPDATE spam_tokens s SET {column} = greatest(0, s.{column} - t.n), seen = $3
             FROM (SELECT u.token, count(*) AS n FROM unnest($2::text[]) AS u (token)
                   GROUP BY u.token) AS t
             WHERE s.account_id = $1 AND s.token = t.token"
        ),
        &[&owner, &tokens, &now],
    )
    .await?;
    tx.execute(
        "DELETE FROM spam_tokens WHERE account_id = $1 AND spam = 0 AND ham = 0",
        &[&owner],
    )
    .await?;
    Ok(())
}

/// A model's message totals: (spam, ham).
async fn totals(c: &tokio_postgres::Client, owner: AccountId) -> Result<(u32, u32)> {
    let row = c
        .query_opt(
            "SELECT spam, ham FROM spam_totals WHERE account_id = $1",
            &[&owner],
        )
        .await?;
    match row {
        Some(r) => Ok((
            r.try_get::<_, i64>(0)? as u32,
            r.try_get::<_, i64>(1)? as u32,
        )),
        None => Ok((0, 0)),
    }
}

impl PgStore {
    pub(super) async fn set_spam_threshold(
        &self,
        address: &str,
        threshold: Option<f32>,
    ) -> Result<()> {
        let address = valid_address(address)?;
        if threshold.is_some_and(|t| !t.is_finite()) {
            return Err(StoreError::Invalid("a spam threshold is a number".into()));
        }
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let n = tx
            .execute(
                "UPDATE accounts SET spam_threshold = $2 WHERE address = $1",
                &[&address, &threshold],
            )
            .await?;
        if n == 0 {
            return Err(StoreError::NotFound(format!("account {address}")));
        }
        bump_serial(&tx).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn spam_training_batch(&self, limit: usize) -> Result<Vec<SpamTraining>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let c = self.conn().await?;
        let rows = c
            .query(
                "SELECT id, account_id, blob_id, spam FROM spam_training ORDER BY id LIMIT $1",
                &[&limit],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(SpamTraining {
                    id: r.try_get(0)?,
                    account: r.try_get(1)?,
                    blob: r.try_get(2)?,
                    spam: r.try_get(3)?,
                })
            })
            .collect()
    }

    /// Trains a model with one message's tokens as `spam` or ham. With a
    /// blob, what the message was trained as before is undone first, and a
    /// message already trained as this class counts nothing (it moved back
    /// and forth). `done` removes a queued training item either way.
    pub(super) async fn train_spam(
        &self,
        account: Option<AccountId>,
        blob: Option<BlobId>,
        tokens: Vec<String>,
        spam: bool,
        done: Option<i64>,
    ) -> Result<bool> {
        let owner = spam_owner_id(account);
        let now = now();
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        if let Some(id) = done {
            tx.execute("DELETE FROM spam_training WHERE id = $1", &[&id])
                .await?;
        }
        lock_model_for_training(&tx, owner).await?;
        let before = trained_as(&tx, owner, blob).await?;
        if before == Some(spam) {
            tx.commit().await?;
            return Ok(false);
        }
        if let Some(was_spam) = before {
            unlearn(&tx, owner, &tokens, was_spam, now).await?;
        }
        learn(&tx, owner, &tokens, spam, now).await?;
        if let Some(blob) = blob {
            tx.execute(
                "INSERT INTO spam_trained (account_id, blob_id, spam) VALUES ($1, $2, $3)
                 ON CONFLICT (account_id, blob_id) DO UPDATE SET spam = $3",
                &[&owner, &blob, &spam],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    pub(super) async fn drop_spam_training(&self, id: i64) -> Result<()> {
        let c = self.conn().await?;
        c.execute("DELETE FROM spam_training WHERE id = $1", &[&id])
            .await?;
        Ok(())
    }

    pub(super) async fn spam_model(
        &self,
        account: Option<AccountId>,
        tokens: Vec<String>,
    ) -> Result<SpamModel> {
        let owner = spam_owner_id(account);
        let c = self.conn().await?;
        let (spam_messages, ham_messages) = totals(&c, owner).await?;
        let mut counts = HashMap::new();
        if (spam_messages > 0 || ham_messages > 0) && !tokens.is_empty() {
            let rows = c
                .query(
                    "SELECT token, spam, ham FROM spam_tokens
                     WHERE account_id = $1 AND token = ANY($2)",
                    &[&owner, &tokens],
                )
                .await?;
            for r in rows {
                let found = (
                    r.try_get::<_, i64>(1)? as u32,
                    r.try_get::<_, i64>(2)? as u32,
                );
                counts.insert(r.try_get(0)?, found);
            }
        }
        Ok(SpamModel {
            spam_messages,
            ham_messages,
            counts,
        })
    }

    pub(super) async fn spam_token_count(&self, account: Option<AccountId>) -> Result<u64> {
        let c = self.conn().await?;
        let row = c
            .query_one(
                "SELECT count(*) FROM spam_tokens WHERE account_id = $1",
                &[&spam_owner_id(account)],
            )
            .await?;
        Ok(row.try_get::<_, i64>(0)? as u64)
    }

    /// In token order (byte order, as SQLite's primary key gives them).
    pub(super) async fn spam_token_rows(
        &self,
        account: Option<AccountId>,
    ) -> Result<Vec<(String, u32, u32, i64)>> {
        let c = self.conn().await?;
        let rows = c
            .query(
                "SELECT token, spam, ham, seen FROM spam_tokens WHERE account_id = $1
                 ORDER BY token COLLATE \"C\"",
                &[&spam_owner_id(account)],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get(0)?,
                    r.try_get::<_, i64>(1)? as u32,
                    r.try_get::<_, i64>(2)? as u32,
                    r.try_get(3)?,
                ))
            })
            .collect()
    }

    pub(super) async fn forget_spam_tokens(
        &self,
        account: Option<AccountId>,
        tokens: Vec<String>,
    ) -> Result<()> {
        let owner = spam_owner_id(account);
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        // Waits for a training of this model to finish, rather than
        // deleting its token rows under it.
        tx.execute(
            "SELECT 1 FROM spam_totals WHERE account_id = $1 FOR UPDATE",
            &[&owner],
        )
        .await?;
        tx.execute(
            "DELETE FROM spam_tokens WHERE account_id = $1 AND token = ANY($2)",
            &[&owner, &tokens],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
