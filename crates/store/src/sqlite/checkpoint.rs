//! WAL checkpoints off the commit path.
//!
//! By default SQLite checkpoints inside the commit that pushes the WAL past
//! 1,000 pages: that commit, and every delivery waiting behind it in the
//! writer, pays for copying the log into the database and syncing it. Here
//! the writer never checkpoints; this thread does, on its own connection,
//! in PASSIVE mode, which never blocks the writer or readers.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;

use crate::error::Result;

/// How often the WAL is checkpointed.
const INTERVAL: Duration = Duration::from_millis(500);

/// Stops the checkpoint thread when dropped.
pub(crate) struct Checkpointer {
    stop: Arc<AtomicBool>,
}

impl Checkpointer {
    /// Starts checkpointing the database at `path`.
    pub(crate) fn start(path: &Path) -> Result<Checkpointer> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("store-checkpoint".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(INTERVAL);
                    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                    {
                        tracing::warn!(error = %e, "WAL checkpoint failed");
                    }
                }
            })
            .expect("spawn store checkpoint thread");
        Ok(Checkpointer { stop })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
