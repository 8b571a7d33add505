//! Releasing blobs off the expunge path.
//!
//! When the last entry or queue row pointing at a blob goes, the triggers
//! only count its references down to 0: the expunge that did it commits
//! without touching the chunks or the full-text index, and the session is
//! answered. This thread finds released blobs through the `blobs_released`
//! partial index and deletes them (chunks, parsed structure and header,
//! blob row; then the full-text row) in batches, each a housekeeping job of the writer
//! thread, so it never competes for the write lock and deliveries queued
//! meanwhile go first.
//! A batch needs no fsync: after a crash the blobs are still released, and
//! the sweep at the next start takes them.
//!
//! The full-text rows live in the index file (fts_file.rs): they go in a
//! job of the index's writer once the batch that deleted their blobs has
//! committed. A crash in between leaves rows for blobs that no longer
//! exist; they match no mailbox entry (blob ids are never used twice) and
//! the index's recovery at the next open deletes them.
//!
//! A released blob is still read while an open view may show its expunged
//! message (its tombstone names it and a pin covers the tombstone's
//! modseq, see pins.rs): the sweep leaves such blobs for a later round.
//! Otherwise nothing reads a released blob: entries, queue rows and kept
//! tombstones are the only ways to one.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::fts_batch::FtsBatch;
use super::writer::Writer;
use crate::error::Result;
use crate::model::BlobId;
use crate::ViewPins;

/// Released blobs looked at per batch beyond the ones swept, so blobs that
/// views still need do not hide the others behind them.
const LOOK_AHEAD: usize = 4 * BATCH;

/// How often the thread looks for released blobs when nobody woke it.
const INTERVAL: Duration = Duration::from_millis(500);

/// Blobs released per writer job: small enough that a delivery queued
/// behind a batch waits milliseconds, not the whole sweep.
pub(crate) const BATCH: usize = 256;

/// The released blobs, oldest first. `blobs_released` holds exactly these
/// rows, so the sweep never scans the table.
const FIND: &str = "SELECT id FROM blobs WHERE refcount <= 0 AND complete = 1 ORDER BY id LIMIT ?1";

#[derive(Default)]
struct State {
    wake: bool,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    cond: Condvar,
    /// Held by the thread for each batch and its full-text deletes, and
    /// by `sweep_now` for its whole run: a sweep that returns has seen
    /// every batch before it through, index rows included.
    turn: tokio::sync::Mutex<()>,
}

/// The sweeper thread, and what `sweep_now` sweeps with; stops when
/// dropped.
pub(crate) struct Sweeper {
    shared: Arc<Shared>,
    writer: Writer,
    pins: Arc<ViewPins>,
    fts: FtsBatch,
}

impl Sweeper {
    /// Starts sweeping the database at `path` through `writer`. The first
    /// sweep runs at once: blobs released by a previous run that stopped
    /// before sweeping them go first.
    pub(crate) fn start(
        path: &Path,
        writer: Writer,
        pins: Arc<ViewPins>,
        fts: FtsBatch,
    ) -> Result<Sweeper> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_secs(10))?;
        let shared = Arc::new(Shared::default());
        let (s, w, p, f) = (
            Arc::clone(&shared),
            writer.clone(),
            Arc::clone(&pins),
            fts.clone(),
        );
        std::thread::Builder::new()
            .name("store-sweep".into())
            .spawn(move || run(&conn, &w, &s, &p, &f))
            .expect("spawn store sweep thread");
        Ok(Sweeper {
            shared,
            writer,
            pins,
            fts,
        })
    }

    /// Sweeps until nothing released is left, in turn with the thread;
    /// returns how many blobs went.
    pub(crate) async fn sweep_all(&self) -> Result<usize> {
        let _turn = self.shared.turn.lock().await;
        let mut total = 0;
        loop {
            let pins = Arc::clone(&self.pins);
            let swept = self
                .writer
                .sweep(move |c| sweep_batch(c, BATCH, &pins))
                .await?;
            let n = swept.len();
            self.fts.forget(swept).await?;
            total += n;
            if n < BATCH {
                return Ok(total);
            }
        }
    }

    /// Asks for a sweep now, after a change that may have released blobs.
    pub(crate) fn wake(&self) {
        self.shared.state.lock().expect("sweep lock").wake = true;
        self.shared.cond.notify_one();
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.shared.state.lock().expect("sweep lock").stop = true;
        self.shared.cond.notify_one();
    }
}

fn run(conn: &Connection, writer: &Writer, shared: &Shared, pins: &Arc<ViewPins>, fts: &FtsBatch) {
    loop {
        match anything_released(conn) {
            Ok(true) => sweep_blocking(writer, shared, pins, fts),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "looking for released blobs failed"),
        }
        let state = shared.state.lock().expect("sweep lock");
        let (mut state, _) = shared
            .cond
            .wait_timeout_while(state, INTERVAL, |s| !s.wake && !s.stop)
            .expect("sweep lock");
        if state.stop {
            return;
        }
        state.wake = false;
    }
}

/// A cheap look on the thread's own read connection, so an idle store
/// costs the writer nothing.
fn anything_released(conn: &Connection) -> Result<bool> {
    Ok(conn.prepare_cached(FIND)?.exists([1])?)
}

/// Sweeps batch after batch until one comes back short or the store stops.
fn sweep_blocking(writer: &Writer, shared: &Shared, pins: &Arc<ViewPins>, fts: &FtsBatch) {
    loop {
        if shared.state.lock().expect("sweep lock").stop {
            return;
        }
        let pins = Arc::clone(pins);
        let _turn = shared.turn.blocking_lock();
        match writer.sweep_blocking(move |c| sweep_batch(c, BATCH, &pins)) {
            Ok(swept) => {
                let n = swept.len();
                if let Err(e) = fts.forget_blocking(swept) {
                    // Rows of blobs gone match nothing; the next open
                    // deletes them.
                    tracing::warn!(error = %e, "deleting full-text rows of swept blobs failed");
                }
                if n < BATCH {
                    return;
                }
            }
            Err(e) => {
                // Left for the next round; nothing is lost by waiting.
                tracing::warn!(error = %e, "sweeping released blobs failed");
                return;
            }
        }
    }
}

/// Deletes up to `limit` released blobs and returns them; runs in the
/// writer thread. The blobs are found inside the job, so a reference made
/// since an earlier look cannot be lost: the delete re-checks the count
/// anyway. Their full-text rows are the caller's to delete, after commit.
pub(crate) fn sweep_batch(c: &Connection, limit: usize, pins: &ViewPins) -> Result<Vec<BlobId>> {
    let ids = c
        .prepare_cached(FIND)?
        .query_map([(limit + LOOK_AHEAD) as i64], |r| r.get::<_, i64>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut swept = Vec::new();
    let mut kept = 0;
    for id in ids {
        if swept.len() == limit {
            break;
        }
        if needed_by_a_view(c, id, pins)? {
            kept += 1;
            continue;
        }
        let gone = c
            .prepare_cached("DELETE FROM blobs WHERE id = ?1 AND refcount <= 0 AND complete = 1")?
            .execute([id])?;
        if gone == 0 {
            continue;
        }
        c.prepare_cached("DELETE FROM blob_chunks WHERE blob_id = ?1")?
            .execute([id])?;
        c.prepare_cached("DELETE FROM blob_parsed WHERE blob_id = ?1")?
            .execute([id])?;
        swept.push(id);
    }
    if kept > 0 {
        tracing::debug!(kept, "released blobs kept for open views");
    }
    Ok(swept)
}

/// Whether an open view may still show a message whose blob is `blob`.
fn needed_by_a_view(c: &Connection, blob: i64, pins: &ViewPins) -> Result<bool> {
    let mut stmt =
        c.prepare_cached("SELECT mailbox_id, modseq FROM expunged WHERE blob_id = ?1")?;
    let mut rows = stmt.query([blob])?;
    while let Some(row) = rows.next()? {
        if pins.needed(row.get(0)?, row.get::<_, i64>(1)? as u64) {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_blobs_are_found_through_the_partial_index() {
        let mut c = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&mut c).unwrap();
        let plan: Vec<String> = c
            .prepare(&format!("EXPLAIN QUERY PLAN {FIND}"))
            .unwrap()
            .query_map([BATCH as i64], |r| r.get(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(
            plan.iter().any(|step| step.contains("blobs_released")),
            "{plan:?}"
        );
    }
}
