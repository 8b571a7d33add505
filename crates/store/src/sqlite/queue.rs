//! The outbound queue's SQL: one row per remote recipient, holding a
//! reference on the message's blob until the recipient is done.
//!
//! A sender claims due rows with a lease (`lease_until`): a row leased to a
//! delivery in flight is not handed out again, and a lease left behind by
//! a crash runs out, so the row is tried again (at most the deliveries in
//! flight at a crash are repeated). Outcomes are written durably before
//! anything else happens.

use rusqlite::{params, Connection};

use crate::error::{Result, StoreError};
use crate::model::{QueueOutcome, QueuedRecipient, RecipientDsn};

/// Columns read into a [`QueuedRecipient`] by [`recipient_from_row`].
const COLUMNS: &str = "q.id, q.blob_id, q.sender, q.recipient, q.attempts, q.next_attempt,
     q.last_error, q.created, b.size, q.warned, q.notify, q.orcpt, q.envid, q.ret_full,
     q.eight_bit";

fn recipient_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<QueuedRecipient> {
    Ok(QueuedRecipient {
        id: r.get(0)?,
        blob: r.get(1)?,
        sender: r.get(2)?,
        recipient: r.get(3)?,
        attempts: r.get(4)?,
        next_attempt: r.get(5)?,
        last_error: r.get(6)?,
        created: r.get(7)?,
        size: r.get::<_, i64>(8)? as u64,
        warned: r.get::<_, i64>(9)? != 0,
        dsn: RecipientDsn {
            notify: r.get(10)?,
            orcpt: r.get(11)?,
        },
        envid: r.get(12)?,
        ret_full: r.get::<_, i64>(13)? != 0,
        eight_bit: r.get::<_, i64>(14)? != 0,
    })
}

/// Every queued recipient, oldest first.
pub(crate) fn list(c: &Connection) -> Result<Vec<QueuedRecipient>> {
    Ok(c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM queue q JOIN blobs b ON b.id = q.blob_id ORDER BY q.id"
    ))?
    .query_map([], recipient_from_row)?
    .collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Leases up to `limit` due rows until `now + lease` and returns them,
/// the longest waiting first.
pub(crate) fn claim(
    c: &Connection,
    now: i64,
    lease: i64,
    limit: usize,
) -> Result<Vec<QueuedRecipient>> {
    let ids: Vec<i64> = c
        .prepare_cached(
            "UPDATE queue SET lease_until = ?1 + ?2
             WHERE id IN (SELECT id FROM queue WHERE next_attempt <= ?1 AND lease_until <= ?1
                          ORDER BY next_attempt, id LIMIT ?3)
             RETURNING id",
        )?
        .query_map(params![now, lease, limit as i64], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut stmt = c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM queue q JOIN blobs b ON b.id = q.blob_id WHERE q.id = ?1"
    ))?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.push(stmt.query_row([id], recipient_from_row)?);
    }
    out.sort_by_key(|r| (r.next_attempt, r.id));
    Ok(out)
}

/// Records the outcome of an attempt for one row. A delivered or failed
/// recipient leaves the queue (its reference on the blob goes with it);
/// a deferred one waits until `next_attempt`.
pub(crate) fn record(c: &Connection, id: i64, outcome: &QueueOutcome) -> Result<()> {
    let changed = match outcome {
        QueueOutcome::Delivered | QueueOutcome::Failed { .. } => c
            .prepare_cached("DELETE FROM queue WHERE id = ?1")?
            .execute([id])?,
        QueueOutcome::Released => c
            .prepare_cached("UPDATE queue SET lease_until = 0 WHERE id = ?1")?
            .execute([id])?,
        QueueOutcome::Deferred {
            next_attempt,
            reason,
        } => c
            .prepare_cached(
                "UPDATE queue SET attempts = attempts + 1, next_attempt = ?2, last_error = ?3,
                 lease_until = 0 WHERE id = ?1",
            )?
            .execute(params![id, next_attempt, reason])?,
    };
    if changed == 0 {
        // Removed meanwhile (`sluice queue remove`): nothing to record.
        tracing::debug!(id, "queue row gone before its outcome was recorded");
    }
    Ok(())
}

/// Queues `blob` from `sender` for each of `recipients`, due now.
pub(crate) fn enqueue(
    c: &Connection,
    blob: i64,
    sender: &str,
    recipients: &[String],
    now: i64,
) -> Result<()> {
    let live: bool = c
        .prepare_cached(
            "SELECT count(*) FROM blobs WHERE id = ?1 AND complete = 1 AND refcount > 0",
        )?
        .query_row([blob], |r| r.get::<_, i64>(0))
        .map(|n| n > 0)?;
    if !live {
        return Err(StoreError::NotFound(format!("message {blob}")));
    }
    let mut insert = c.prepare_cached(
        "INSERT INTO queue (blob_id, sender, recipient, next_attempt, created)
         VALUES (?1, ?2, ?3, ?4, ?4)",
    )?;
    for r in recipients {
        insert.execute(params![blob, sender, r, now])?;
    }
    Ok(())
}

/// Notes that the senders of these rows were warned of the delay.
pub(crate) fn mark_warned(c: &Connection, ids: &[i64]) -> Result<()> {
    let mut stmt = c.prepare_cached("UPDATE queue SET warned = 1 WHERE id = ?1")?;
    for id in ids {
        stmt.execute([id])?;
    }
    Ok(())
}

/// Makes rows due now (all of them for `None`); returns how many.
pub(crate) fn retry_now(c: &Connection, id: Option<i64>, now: i64) -> Result<usize> {
    Ok(match id {
        Some(id) => {
            let n = c
                .prepare_cached("UPDATE queue SET next_attempt = ?2 WHERE id = ?1")?
                .execute(params![id, now])?;
            if n == 0 {
                return Err(StoreError::NotFound(format!("queue entry {id}")));
            }
            n
        }
        None => c
            .prepare_cached("UPDATE queue SET next_attempt = ?1 WHERE next_attempt > ?1")?
            .execute([now])?,
    })
}

/// Removes one row without sending it.
pub(crate) fn remove(c: &Connection, id: i64) -> Result<()> {
    let n = c
        .prepare_cached("DELETE FROM queue WHERE id = ?1")?
        .execute([id])?;
    if n == 0 {
        return Err(StoreError::NotFound(format!("queue entry {id}")));
    }
    Ok(())
}
