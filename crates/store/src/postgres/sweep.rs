//! Releasing blobs off the expunge path, as the SQLite back end does
//! (sqlite/sweep.rs), on a database several nodes share.
//!
//! When the last entry or queue row pointing at a blob goes, the triggers
//! only count its references down to 0 and note the time (`released`).
//! A task of each node finds released blobs through the `blobs_released`
//! partial index and deletes them in batches; their pieces, parsed rows
//! and full-text rows go with them (`ON DELETE CASCADE`). Rows are claimed
//! with `FOR UPDATE SKIP LOCKED`, so nodes sweeping together share the work
//! instead of waiting on each other.
//!
//! A released blob is still read while an open view may show its expunged
//! message. This node's views are known (its pins against the `expunged`
//! tombstones, as in SQLite); another node's are not, so a released blob
//! is kept for [`PgOptions::release_grace`](super::PgOptions) (10 minutes
//! by default) after its release: a session that saw the expunge announced
//! late, or fetches a message it listed just before, still reads it then.
//! Past that a client of another node that still asks gets nothing, as it
//! would for a message expunged long ago.
//!
//! Failed-login rows that no longer count (penalties.rs) go too, every
//! few rounds.
//!
//! Blobs never completed (a node that died mid-message) are deleted once
//! older than [`LEFTOVER_AGE`]. The SQLite back end deletes them all at
//! start, while it holds the data directory alone; here another node may
//! be writing one right now, so only age tells a leftover.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{Inner, PgStore};
use crate::error::Result;
use crate::model::BlobId;

/// How often each node looks for released blobs. Nothing wakes it sooner
/// (expunges may come from any node), and a released blob waits out its
/// grace period anyway.
const INTERVAL: Duration = Duration::from_secs(5);

/// Every how many rounds the failed-login rows that no longer count are
/// deleted (about once a minute): they change nothing while they stay,
/// so only the table's size is at stake.
const PENALTY_ROUNDS: u32 = 12;

/// Blobs deleted per transaction: small enough that the locks it holds
/// are short.
const BATCH: usize = 256;

/// Released blobs looked at per batch beyond the ones swept, so blobs that
/// views still need do not hide the others behind them.
const LOOK_AHEAD: usize = 4 * BATCH;

/// Age in seconds after which a blob still incomplete is a leftover: a
/// day, far beyond the longest a client may take to send one message.
pub(super) const LEFTOVER_AGE: i64 = 24 * 60 * 60;

/// Released blobs past their grace period, oldest first, locked for this
/// transaction; ones another node is sweeping are skipped. Only a release
/// the triggers noted counts: a blob being put together by hand, with its
/// references still to come (`sluice migrate`, tests), is no leftover.
const FIND: &str = "SELECT id FROM blobs
    WHERE refcount <= 0 AND complete
      AND released <= extract(epoch FROM now())::bigint - $1
    ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED";

/// Starts this node's sweeper. It holds the store only while it sweeps,
/// so it ends once the last handle of the store is dropped.
pub(super) fn start(store: &PgStore) {
    let inner = Arc::downgrade(&store.inner);
    let wake = Arc::clone(&store.inner.sweep_wake);
    tokio::spawn(run(inner, wake));
}

/// Wakes this node's sweeper after a change, when released blobs go at
/// once (no grace period: one node, as on SQLite); with a grace period a
/// release cannot be swept sooner than the rounds come anyway.
pub(super) fn changed(inner: &Inner) {
    if inner.release_grace.is_zero() {
        inner.sweep_wake.notify_one();
    }
}

async fn run(inner: Weak<Inner>, wake: Arc<tokio::sync::Notify>) {
    let mut round: u32 = 0;
    loop {
        // The first round at once: blobs released while no node ran go
        // first.
        {
            let Some(inner) = inner.upgrade() else { return };
            let store = PgStore { inner };
            if let Err(e) = store.sweep_now().await {
                // Left for the next round; nothing is lost by waiting.
                tracing::warn!(error = %e, "sweeping released blobs failed");
            }
            if round.is_multiple_of(PENALTY_ROUNDS) {
                let now = store.penalties().now();
                if let Err(e) = store.forget_old_penalties(now).await {
                    tracing::warn!(error = %e, "forgetting old failed logins failed");
                }
            }
            round = round.wrapping_add(1);
        }
        tokio::select! {
            _ = tokio::time::sleep(INTERVAL) => {}
            _ = wake.notified() => {}
        }
    }
}

impl PgStore {
    /// Deletes every blob released (its last entry or queue row gone)
    /// longer ago than the grace period and not needed by a view of this
    /// node; returns how many this call deleted. Leftovers of messages
    /// never completed go too (not counted). The background task does the
    /// same every few seconds; this is for callers that need the tables
    /// settled now.
    pub async fn sweep_now(&self) -> Result<usize> {
        // Rows are locked with SKIP LOCKED, so that nodes never wait on
        // each other; on one node, two sweeps would skip each other's
        // rows and the first to finish would return with blobs still
        // there.
        let _turn = self.inner.sweeping.lock().await;
        let mut total = 0;
        loop {
            let n = self.sweep_batch(BATCH).await?;
            total += n;
            if n < BATCH {
                break;
            }
        }
        let leftovers = self.sweep_leftovers().await?;
        if leftovers > 0 {
            tracing::info!(leftovers, "removed blobs never completed");
        }
        Ok(total)
    }

    /// Deletes up to `limit` released blobs in one transaction.
    async fn sweep_batch(&self, limit: usize) -> Result<usize> {
        let grace = i64::try_from(self.inner.release_grace.as_secs()).unwrap_or(i64::MAX);
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let found: Vec<BlobId> = tx
            .query(FIND, &[&grace, &((limit + LOOK_AHEAD) as i64)])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if found.is_empty() {
            return Ok(0);
        }
        let needed = self.needed_by_a_view(&tx, &found).await?;
        let doomed: Vec<BlobId> = found
            .into_iter()
            .filter(|id| !needed.contains(id))
            .take(limit)
            .collect();
        if !needed.is_empty() {
            tracing::debug!(kept = needed.len(), "released blobs kept for open views");
        }
        // The count is checked again: the rows are locked, but a check
        // costs nothing and keeps the delete right on its own.
        let gone = tx
            .execute(
                "DELETE FROM blobs WHERE id = ANY($1) AND refcount <= 0 AND complete",
                &[&doomed],
            )
            .await?;
        tx.commit().await?;
        Ok(gone as usize)
    }

    /// Which of `blobs` a view of this node may still show: an expunged
    /// message's tombstone names the blob and a pin covers its modseq.
    async fn needed_by_a_view(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        blobs: &[BlobId],
    ) -> Result<Vec<BlobId>> {
        let rows = tx
            .query(
                "SELECT blob_id, mailbox_id, modseq FROM expunged WHERE blob_id = ANY($1)",
                &[&blobs],
            )
            .await?;
        let mut needed: Vec<BlobId> = rows
            .iter()
            .filter(|r| self.inner.pins.needed(r.get(1), r.get::<_, i64>(2) as u64))
            .map(|r| r.get(0))
            .collect();
        needed.sort_unstable();
        needed.dedup();
        Ok(needed)
    }

    /// Deletes blobs left incomplete for longer than [`LEFTOVER_AGE`],
    /// a batch at a time.
    async fn sweep_leftovers(&self) -> Result<usize> {
        let cutoff = crate::clock::now() - LEFTOVER_AGE;
        let c = self.conn().await?;
        let mut total = 0;
        loop {
            let gone = c
                .execute(
                    "DELETE FROM blobs WHERE id IN (
                         SELECT id FROM blobs WHERE NOT complete AND created < $1
                         ORDER BY created LIMIT $2 FOR UPDATE SKIP LOCKED)",
                    &[&cutoff, &(BATCH as i64)],
                )
                .await? as usize;
            total += gone;
            if gone < BATCH {
                return Ok(total);
            }
        }
    }
}
