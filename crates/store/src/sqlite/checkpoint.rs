//! WAL checkpoints off the commit path, and a WAL that stays bounded.
//!
//! By default SQLite checkpoints inside the commit that pushes the WAL past
//! 1,000 pages: that commit, and every delivery waiting behind it in the
//! writer, pays for copying the log into the database and syncing it. Here
//! the copying happens in a thread of its own, on its own connection, in
//! PASSIVE mode, which never blocks the writer or readers.
//!
//! PASSIVE alone does not bound the log. It copies frames back into the
//! database, but the WAL file is only rewound (and cut to
//! `journal_size_limit`) when a writer starts a transaction after a
//! complete checkpoint *and* no reader still reads through the log. Under
//! sustained delivery with IMAP readers there is always a reader somewhere
//! in the log, so the writer appends forever: the WAL reached gigabytes.
//!
//! Nor does a TRUNCATE checkpoint from that thread: it needs the write
//! lock, and SQLite's busy handler is a sleep-and-retry loop with no queue.
//! The writer thread takes the lock again the moment it commits, so under
//! sustained load the checkpoint thread almost never found it free: with
//! a 64 MiB limit the log still reached 620 MB (with 8 KiB pages) while 21,282 messages
//! streamed in. So the writer cuts the log itself ([`Truncation`]), between
//! two of its transactions, once its own commits have pushed the log past
//! the limit: it holds no lock then, no other writer exists, and the
//! frames are mostly copied already by the PASSIVE thread. It waits a
//! moment for readers to move to the newest snapshot (every new read
//! transaction does, and reads are short); if an old reader holds on past
//! that moment, it gives up and tries again a little later rather than
//! keep deliveries waiting.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::error::Result;

/// How often the WAL is checkpointed.
const INTERVAL: Duration = Duration::from_millis(500);

/// How often while the writer waits to cut the log.
const HURRIED: Duration = Duration::from_millis(5);

/// How long a TRUNCATE checkpoint waits for readers before it gives up
/// for this round; deliveries wait behind it.
const TRUNCATE_WAIT: Duration = Duration::from_millis(100);

/// How long after a TRUNCATE checkpoint gave up the writer tries again.
/// Most give-ups are a PASSIVE round of the checkpoint thread holding the
/// checkpoint lock, for which SQLite does not wait: soon is right.
const RETRY: Duration = Duration::from_millis(250);

/// The writer connection's usual wait for a lock (see `open_connection`).
const WRITER_BUSY: Duration = Duration::from_secs(10);

/// Frames left uncopied when the writer cuts the log: what it copies
/// itself while deliveries wait (4 MiB of 4 KiB pages).
const LAG_FRAMES: u64 = 1024;

/// Longest the writer waits for the checkpoint thread to catch up before
/// it cuts the log anyway: the bound holds even when copying cannot keep
/// up with delivery.
const CATCH_UP: Duration = Duration::from_secs(2);

/// What the checkpoint thread and the writer tell each other.
#[derive(Default)]
pub(crate) struct Progress {
    /// Set by the writer when the log is over the limit: the thread then
    /// copies without pausing, so little is left when the writer cuts.
    hurry: AtomicBool,
    /// Frames of the log the thread's last round had copied.
    backfilled: AtomicU64,
    /// The disk's free-space state: a checkpoint that finds no room says
    /// so there (once), not in a line per round.
    pub(crate) space: Arc<crate::DiskSpace>,
}

/// Stops the checkpoint thread when dropped.
pub(crate) struct Checkpointer {
    stop: Arc<AtomicBool>,
    pub(crate) progress: Arc<Progress>,
}

impl Checkpointer {
    /// Starts copying the log of the database at `path` into it.
    pub(crate) fn start(path: &Path, space: Arc<crate::DiskSpace>) -> Result<Checkpointer> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(TRUNCATE_WAIT)?;
        let stop = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(Progress {
            space,
            ..Progress::default()
        });
        let (flag, p) = (Arc::clone(&stop), Arc::clone(&progress));
        let path = path.to_path_buf();
        std::thread::Builder::new()
            .name("store-checkpoint".into())
            .spawn(move || {
                // A checkpoint that fails (the database cannot grow on a
                // full disk) leaves the log as it was, whole: nothing is
                // lost, the next one copies it. Said once per episode:
                // `failing` is a failure other than a full disk, logged.
                let mut failing = false;
                while !flag.load(Ordering::Relaxed) {
                    let pause = if p.hurry.load(Ordering::Relaxed) {
                        HURRIED
                    } else {
                        INTERVAL
                    };
                    std::thread::sleep(pause);
                    match passive(&conn) {
                        Ok(copied) => {
                            p.backfilled.store(copied, Ordering::Relaxed);
                            if std::mem::take(&mut failing) {
                                tracing::info!(path = %path.display(), "WAL checkpoints work again");
                            }
                        }
                        // A full disk: its state says so, once (space.rs).
                        Err(e) if p.space.note_failure(&e, "a WAL checkpoint") => {
                            tracing::debug!(error = %e, "WAL checkpoint failed: disk full")
                        }
                        Err(e) if !failing => {
                            failing = true;
                            tracing::warn!(
                                path = %path.display(),
                                error = %e,
                                "WAL checkpoint failed; the log is kept whole and copied later"
                            );
                        }
                        Err(e) => tracing::debug!(error = %e, "WAL checkpoint failed again"),
                    }
                }
            })
            .expect("spawn store checkpoint thread");
        Ok(Checkpointer { stop, progress })
    }
}

/// The writer's side of the bound: a TRUNCATE checkpoint on the writer's
/// own connection, between transactions, once the log is over half the
/// limit (a quarter for the index's writer, below).
///
/// Why half: the log goes on growing while the checkpoint thread catches
/// up (up to [`CATCH_UP`]) and by whole transactions. Started at the
/// limit itself, cutting let the log reach 85 MB (the database's, under
/// load) and 96 MB (the index's) against a 64 MiB limit; the other half
/// is the room for that.
///
/// The index's writer is a background one: no delivery waits behind it, and
/// each of its transactions writes megabytes (a batch of messages' words, a
/// merge step), so the log grew by whole jobs while the writer waited for
/// the checkpoint thread, and passed the limit (89 MB against 64 MiB while
/// 21,282 messages streamed in). It cuts the log from a quarter of the
/// limit, at once after the commit that passed it, copying the rest itself.
pub(crate) struct Truncation {
    /// Frames in the log from which the writer cuts it.
    cut_from: u64,
    /// How long the writer waits for the checkpoint thread to catch up
    /// ([`CATCH_UP`], or nothing for a background writer).
    catch_up: Duration,
    next_try: Instant,
    progress: Arc<Progress>,
    /// Since when the log is over the limit.
    over_since: Option<Instant>,
    /// The last try failed (a full disk): the next failures are not
    /// logged again until one succeeds.
    failing: bool,
}

impl Truncation {
    /// Keeps the log under `limit_frames` frames, with the checkpoint
    /// thread's `progress`; `background` for the index's writer.
    pub(crate) fn new(limit_frames: u64, progress: Arc<Progress>, background: bool) -> Truncation {
        let (share, catch_up) = if background {
            (4, Duration::ZERO)
        } else {
            (2, CATCH_UP)
        };
        Truncation {
            cut_from: (limit_frames / share).max(1),
            catch_up,
            next_try: Instant::now(),
            progress,
            over_since: None,
            failing: false,
        }
    }

    /// How long an idle writer may wait for a job before it tries to cut
    /// the log again; `None` while the log is short of where it is cut.
    pub(crate) fn retry_in(&self) -> Option<Duration> {
        self.over_since
            .map(|_| HURRIED.max(Duration::from_millis(50)))
    }

    /// Called by the writer after a commit that left `frames` frames in
    /// the log, outside any transaction; true when it cut the log. It
    /// waits (up to [`CATCH_UP`]) until the checkpoint thread, hurried,
    /// has copied all but [`LAG_FRAMES`], so deliveries wait behind a
    /// short copy, not behind the whole log.
    pub(crate) fn after_commit(&mut self, conn: &Connection, frames: u64) -> bool {
        if frames <= self.cut_from {
            return false;
        }
        let over_since = *self.over_since.get_or_insert_with(|| {
            self.progress.hurry.store(true, Ordering::Relaxed);
            Instant::now()
        });
        let behind = frames.saturating_sub(self.progress.backfilled.load(Ordering::Relaxed));
        if Instant::now() < self.next_try
            || (behind > LAG_FRAMES && over_since.elapsed() < self.catch_up)
        {
            return false;
        }
        let started = Instant::now();
        let _ = conn.busy_timeout(TRUNCATE_WAIT);
        let outcome = checkpoint(conn, "TRUNCATE");
        let _ = conn.busy_timeout(WRITER_BUSY);
        let ms = started.elapsed().as_secs_f64() * 1e3;
        match outcome {
            Ok(true) => {
                tracing::debug!(frames, behind, ms, "WAL truncated");
                if std::mem::take(&mut self.failing) {
                    tracing::info!("WAL truncation works again");
                }
                self.over_since = None;
                self.progress.hurry.store(false, Ordering::Relaxed);
                self.progress.backfilled.store(0, Ordering::Relaxed);
                true
            }
            Ok(false) => {
                tracing::debug!(frames, ms, "WAL truncation postponed: a reader holds on");
                self.next_try = Instant::now() + RETRY;
                false
            }
            Err(e) => {
                if self.progress.space.note_failure(&e, "a WAL truncation")
                    || std::mem::replace(&mut self.failing, true)
                {
                    tracing::debug!(error = %e, frames, "WAL truncation failed");
                } else {
                    tracing::warn!(
                        error = %e,
                        frames,
                        "WAL truncation failed; the log is kept whole and cut later"
                    );
                }
                self.next_try = Instant::now() + RETRY;
                false
            }
        }
    }
}

/// The WAL file of the database at `path`.
pub(crate) fn wal_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    name.into()
}

/// Runs a PASSIVE checkpoint; returns how many frames of the log are
/// copied into the database now.
fn passive(conn: &Connection) -> Result<u64> {
    let copied: i64 = conn.query_row("PRAGMA main.wal_checkpoint(PASSIVE)", [], |r| r.get(2))?;
    Ok(copied.max(0) as u64)
}

/// Runs a checkpoint in `mode` of the connection's main database (not of
/// the databases it attached); true when it completed (not busy).
pub(crate) fn checkpoint(conn: &Connection, mode: &str) -> Result<bool> {
    let busy: i64 = conn.query_row(&format!("PRAGMA main.wal_checkpoint({mode})"), [], |r| {
        r.get(0)
    })?;
    Ok(busy == 0)
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database in WAL mode that never checkpoints by itself.
    fn wal_db(dir: &Path) -> Connection {
        let conn = Connection::open(dir.join("t.db")).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        conn.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        conn
    }

    /// Commits about `pages` pages of rows; the frames now in the log.
    fn write(conn: &Connection, dir: &Path, pages: usize) -> u64 {
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
             INSERT INTO t SELECT zeroblob(3900) FROM n",
            [pages as i64],
        )
        .unwrap();
        let size = std::fs::metadata(wal_path(&dir.join("t.db")))
            .unwrap()
            .len();
        size / (4096 + 24)
    }

    #[test]
    fn a_background_writer_cuts_its_log_at_once_a_delivery_writer_waits() {
        let dir = tempfile::tempdir().unwrap();
        let conn = wal_db(dir.path());
        let limit = 8000;
        // Past a quarter of the limit, with nothing copied by a checkpoint
        // thread: the index's writer cuts the log there and then.
        let frames = write(&conn, dir.path(), 2500);
        assert!(frames > limit / 4 && frames < limit / 2, "{frames}");
        let mut background = Truncation::new(limit, Arc::new(Progress::default()), true);
        assert!(background.after_commit(&conn, frames));
        assert_eq!(
            std::fs::metadata(wal_path(&dir.path().join("t.db")))
                .unwrap()
                .len(),
            0
        );
        // The delivery writer leaves a log under half the limit alone, and
        // over it first gives the checkpoint thread time to catch up.
        let mut delivery = Truncation::new(limit, Arc::new(Progress::default()), false);
        assert!(!delivery.after_commit(&conn, frames));
        let frames = write(&conn, dir.path(), 4500);
        assert!(frames > limit / 2, "{frames}");
        assert!(!delivery.after_commit(&conn, frames));
        assert!(delivery.retry_in().is_some(), "it tries again soon");
    }
}
