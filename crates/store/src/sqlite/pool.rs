//! A small pool of read-only connections. WAL lets readers run beside the
//! writer; each read runs on a blocking thread so no runtime thread waits
//! on the disk. Each connection attaches the full-text index file too
//! (fts_file.rs), so a search reads both in one statement.

use std::path::Path;
use std::sync::{Arc, Mutex};

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
                .expect("pool lock")
                .pop()
                .expect("a permit guarantees an idle connection");
            let result = f(&conn);
            pool.idle.lock().expect("pool lock").push(conn);
            result
        })
        .await
        .map_err(|_| StoreError::Closed)?
    }
}
