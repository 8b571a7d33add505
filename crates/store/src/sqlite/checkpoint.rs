//! WAL checkpoints off the commit path, and a WAL that stays bounded.
//!
//! By default SQLite checkpoints inside the commit that pushes the WAL past
//! 1,000 pages: that commit, and every delivery waiting behind it in the
//! writer, pays for copying the log into the database and syncing it. Here
//! the writer never checkpoints; this thread does, on its own connection,
//! in PASSIVE mode, which never blocks the writer or readers.
//!
//! PASSIVE alone does not bound the log. It copies frames back into the
//! database, but the WAL file is only rewound (and cut to
//! `journal_size_limit`) when a writer starts a transaction after a
//! complete checkpoint *and* no reader still reads through the log. Under
//! sustained delivery with IMAP readers there is always a reader somewhere
//! in the log, so the writer appends forever: the WAL reached gigabytes.
//! So once the file passes the limit, this thread runs a TRUNCATE
//! checkpoint: it takes the write lock (deliveries wait behind it for the
//! short time it takes, the frames being mostly copied already by PASSIVE),
//! waits a moment for readers to move to the newest snapshot, which every
//! new read transaction does, and cuts the file to zero. If readers hold
//! on past the moment, it gives up and tries again next round rather than
//! stall deliveries.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;

use crate::error::Result;

/// How often the WAL is checkpointed.
const INTERVAL: Duration = Duration::from_millis(500);

/// How long a TRUNCATE checkpoint waits for readers and the writer before
/// it gives up for this round.
const TRUNCATE_WAIT: Duration = Duration::from_millis(250);

/// Stops the checkpoint thread when dropped.
pub(crate) struct Checkpointer {
    stop: Arc<AtomicBool>,
}

impl Checkpointer {
    /// Starts checkpointing the database at `path`, truncating its WAL
    /// whenever it grows past `wal_limit` bytes.
    pub(crate) fn start(path: &Path, wal_limit: u64) -> Result<Checkpointer> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(TRUNCATE_WAIT)?;
        let wal = wal_path(path);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("store-checkpoint".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(INTERVAL);
                    if let Err(e) = checkpoint(&conn, "PASSIVE") {
                        tracing::warn!(error = %e, "WAL checkpoint failed");
                    }
                    let size = std::fs::metadata(&wal).map_or(0, |m| m.len());
                    if size > wal_limit {
                        match checkpoint(&conn, "TRUNCATE") {
                            Ok(true) => tracing::debug!(size, "WAL truncated"),
                            Ok(false) => tracing::debug!(size, "WAL truncation postponed: busy"),
                            Err(e) => tracing::debug!(error = %e, size, "WAL truncation postponed"),
                        }
                    }
                }
            })
            .expect("spawn store checkpoint thread");
        Ok(Checkpointer { stop })
    }
}

/// The WAL file of the database at `path`.
pub(crate) fn wal_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    name.into()
}

/// Runs a checkpoint in `mode`; true when it completed (not busy).
pub(crate) fn checkpoint(conn: &Connection, mode: &str) -> Result<bool> {
    let busy: i64 = conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| r.get(0))?;
    Ok(busy == 0)
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
