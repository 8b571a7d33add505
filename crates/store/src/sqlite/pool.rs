//! A small pool of read-only connections. WAL lets readers run beside the
//! writer; each read runs on a blocking thread so no runtime thread waits
//! on the disk. Each connection attaches the full-text index file too
//! (fts_file.rs), so a search reads both in one statement.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::{Connection, OpenFlags};
use tokio::sync::Semaphore;

use crate::error::{Result, StoreError};

pub(crate) struct ReadPool {
    idle: Mutex<Vec<Connection>>,
    permits: Semaphore,
}

impl ReadPool {
    pub(crate) fn open(path: &Path, size: usize) -> Result<Arc<ReadPool>> {
        let mut conns = Vec::with_capacity(size);
        for _ in 0..size {
            let conn = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?;
            conn.busy_timeout(std::time::Duration::from_secs(10))?;
            rusqlite::vtab::array::load_module(&conn)?;
            super::functions::register(&conn)?;
            super::fts_file::attach(&conn, path)?;
            conns.push(conn);
        }
        Ok(Arc::new(ReadPool {
            idle: Mutex::new(conns),
            permits: Semaphore::new(size),
        }))
    }

    /// Runs `f` on a pooled connection in a blocking thread.
    pub(crate) async fn read<R, F>(self: &Arc<Self>, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| StoreError::Closed)?;
        let pool = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let conn = pool
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop()
                .expect("a permit guarantees an idle connection");
            // A read that panics fails alone: its connection goes back to
            // the pool, or the next reader holding a permit would find
            // none idle.
            let result =
                std::panic::catch_unwind(AssertUnwindSafe(|| f(&conn))).unwrap_or_else(|payload| {
                    if !conn.is_autocommit() {
                        let _ = conn.execute_batch("ROLLBACK");
                    }
                    Err(StoreError::from_panic("read", payload))
                });
            pool.idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(conn);
            result
        })
        .await
        .map_err(|_| StoreError::Closed)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read that panics fails alone and gives its connection back: as
    /// many reads as the pool has connections still run at once after it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_that_panics_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (7)")
            .unwrap();
        // Each reader attaches the index file beside the database.
        Connection::open(dir.path().join("fts.db")).unwrap();
        let pool = ReadPool::open(&path, 2).unwrap();
        let failed = pool
            .read(|_| -> Result<()> { panic!("a bug in a read") })
            .await;
        assert!(matches!(failed, Err(StoreError::Bug(_))), "{failed:?}");
        let read = || {
            let pool = Arc::clone(&pool);
            async move {
                pool.read(|c| {
                    // Both reads hold a connection at the same moment.
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    Ok(c.query_row("SELECT x FROM t", [], |r| r.get::<_, i64>(0))?)
                })
                .await
            }
        };
        let (a, b) = tokio::join!(read(), read());
        assert_eq!((a.unwrap(), b.unwrap()), (7, 7));
    }
}
