//! The outbound queue on PostgreSQL: one row per remote recipient, holding
//! a reference on the message's blob until the recipient is done, as in
//! the SQLite back end (sqlite/queue.rs).
//!
//! Several nodes may send from one queue. A sender claims due rows with a
//! lease (`lease_until`), locking them with `FOR UPDATE SKIP LOCKED` while
//! it sets the lease, so two nodes claiming at once never get the same
//! row, and neither waits for the other; a lease left behind by a crash
//! runs out and the row is tried again.
//!
//! `release_queue_leases` ends no lease here: a node starting up cannot
//! tell the leases of its own earlier run from those of a node sending
//! right now, and ending those would send their mail twice. A crashed
//! run's leases run out by themselves.

use tokio_postgres::Row;

use super::PgStore;
use crate::error::{Result, StoreError};
use crate::model::{BlobId, QueueOutcome, QueuedRecipient, RecipientDsn};

/// Columns read into a [`QueuedRecipient`] by [`recipient_from_row`], of
/// `queue q` joined with `blobs b`.
const COLUMNS: &str = "q.id, q.blob_id, q.sender, q.recipient, q.attempts, q.next_attempt,
     q.last_error, q.created, b.size, q.warned, q.notify, q.orcpt, q.envid, q.ret_full,
     q.eight_bit";

fn recipient_from_row(r: &Row) -> Result<QueuedRecipient> {
    let id: i64 = r.try_get(0)?;
    let corrupt = |what: &str| StoreError::Corrupt(format!("queue entry {id}: {what}"));
    Ok(QueuedRecipient {
        id,
        blob: r.try_get(1)?,
        sender: r.try_get(2)?,
        recipient: r.try_get(3)?,
        attempts: u32::try_from(r.try_get::<_, i32>(4)?).map_err(|_| corrupt("attempts"))?,
        next_attempt: r.try_get(5)?,
        last_error: r.try_get(6)?,
        created: r.try_get(7)?,
        size: u64::try_from(r.try_get::<_, i64>(8)?).map_err(|_| corrupt("size"))?,
        warned: r.try_get(9)?,
        dsn: RecipientDsn {
            notify: u8::try_from(r.try_get::<_, i32>(10)?).map_err(|_| corrupt("notify"))?,
            orcpt: r.try_get(11)?,
        },
        envid: r.try_get(12)?,
        ret_full: r.try_get(13)?,
        eight_bit: r.try_get(14)?,
    })
}

impl PgStore {
    pub(super) async fn queued(&self) -> Result<Vec<QueuedRecipient>> {
        let c = self.conn().await?;
        let rows = c
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM queue q JOIN blobs b ON b.id = q.blob_id ORDER BY q.id"
                ),
                &[],
            )
            .await?;
        rows.iter().map(recipient_from_row).collect()
    }

    pub(super) async fn queue_summary(&self) -> Result<(u64, Option<i64>)> {
        let c = self.conn().await?;
        let row = c
            .query_one("SELECT count(*), min(created) FROM queue", &[])
            .await?;
        let count: i64 = row.try_get(0)?;
        Ok((count.unsigned_abs(), row.try_get(1)?))
    }

    /// Leases up to `limit` due rows until `now + lease_secs` and returns
    /// them, the longest waiting first. Rows another node is claiming at
    /// this moment are skipped, not waited for.
    pub(super) async fn claim_queue(
        &self,
        now: i64,
        lease_secs: i64,
        limit: usize,
    ) -> Result<Vec<QueuedRecipient>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let until = now.saturating_add(lease_secs);
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let ids: Vec<i64> = tx
            .query(
                "SELECT id FROM queue WHERE next_attempt <= $1 AND lease_until <= $1
                 ORDER BY next_attempt, id LIMIT $2 FOR UPDATE SKIP LOCKED",
                &[&now, &limit],
            )
            .await?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<std::result::Result<_, _>>()?;
        if ids.is_empty() {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        let rows = tx
            .query(
                &format!(
                    "UPDATE queue q SET lease_until = $2 FROM blobs b
                     WHERE q.id = ANY($1) AND b.id = q.blob_id RETURNING {COLUMNS}"
                ),
                &[&ids, &until],
            )
            .await?;
        tx.commit().await?;
        let mut out = rows
            .iter()
            .map(recipient_from_row)
            .collect::<Result<Vec<_>>>()?;
        out.sort_by_key(|r| (r.next_attempt, r.id));
        Ok(out)
    }

    /// Queues `blob` for each recipient, due now. The blob's row is locked
    /// first, so it cannot be released between the check that it is live
    /// and the rows' references on it.
    pub(super) async fn queue_message(
        &self,
        blob: BlobId,
        sender: &str,
        recipients: &[String],
    ) -> Result<()> {
        let now = crate::clock::now();
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let live = tx
            .query_opt(
                "SELECT 1 FROM blobs WHERE id = $1 AND complete AND refcount > 0 FOR UPDATE",
                &[&blob],
            )
            .await?
            .is_some();
        if !live {
            return Err(StoreError::NotFound(format!("message {blob}")));
        }
        let insert = tx
            .prepare(
                "INSERT INTO queue (blob_id, sender, recipient, next_attempt, created)
                 VALUES ($1, $2, $3, $4, $4)",
            )
            .await?;
        for recipient in recipients {
            tx.execute(&insert, &[&blob, &sender, recipient, &now])
                .await?;
        }
        tx.commit().await?;
        self.inner.queue_signal.notify_one();
        Ok(())
    }

    pub(super) async fn mark_queue_warned(&self, ids: Vec<i64>) -> Result<()> {
        let c = self.conn().await?;
        c.execute("UPDATE queue SET warned = true WHERE id = ANY($1)", &[&ids])
            .await?;
        Ok(())
    }

    /// Ends no lease (see the module comment): always 0.
    pub(super) async fn release_queue_leases(&self) -> Result<usize> {
        Ok(0)
    }

    /// Records each outcome, all in one transaction. A delivered or failed
    /// recipient leaves the queue (its reference on the blob goes with
    /// it); a deferred one waits until its `next_attempt`; a released one
    /// keeps its schedule. A row removed meanwhile is skipped.
    pub(super) async fn record_queue_outcomes(
        &self,
        outcomes: Vec<(i64, QueueOutcome)>,
    ) -> Result<()> {
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        for (id, outcome) in &outcomes {
            let changed = match outcome {
                QueueOutcome::Delivered | QueueOutcome::Failed { .. } => {
                    tx.execute("DELETE FROM queue WHERE id = $1", &[id]).await?
                }
                QueueOutcome::Released => {
                    tx.execute("UPDATE queue SET lease_until = 0 WHERE id = $1", &[id])
                        .await?
                }
                QueueOutcome::Deferred {
                    next_attempt,
                    reason,
                } => {
                    tx.execute(
                        "UPDATE queue SET attempts = attempts + 1, next_attempt = $2,
                         last_error = $3, lease_until = 0 WHERE id = $1",
                        &[id, next_attempt, reason],
                    )
                    .await?
                }
            };
            if changed == 0 {
                // Removed meanwhile (`sluice queue remove`): nothing to record.
                tracing::debug!(id, "queue row gone before its outcome was recorded");
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Makes one row (every row not yet due, for `None`) due at `now`.
    pub(super) async fn retry_queue(&self, id: Option<i64>, now: i64) -> Result<usize> {
        let c = self.conn().await?;
        let n = match id {
            Some(id) => {
                let n = c
                    .execute(
                        "UPDATE queue SET next_attempt = $2 WHERE id = $1",
                        &[&id, &now],
                    )
                    .await?;
                if n == 0 {
                    return Err(StoreError::NotFound(format!("queue entry {id}")));
                }
                n
            }
            None => {
                c.execute(
                    "UPDATE queue SET next_attempt = $1 WHERE next_attempt > $1",
                    &[&now],
                )
                .await?
            }
        };
        self.inner.queue_signal.notify_one();
        Ok(count(n))
    }

    pub(super) async fn remove_queued(&self, id: i64) -> Result<()> {
        let c = self.conn().await?;
        let n = c.execute("DELETE FROM queue WHERE id = $1", &[&id]).await?;
        if n == 0 {
            return Err(StoreError::NotFound(format!("queue entry {id}")));
        }
        Ok(())
    }
}

/// A row count as the trait reports it.
fn count(rows: u64) -> usize {
    usize::try_from(rows).unwrap_or(usize::MAX)
}
