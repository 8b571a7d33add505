//! Disk use of the store, for `sluice stats`: the files, what each table
//! and index takes (SQLite's `dbstat`), and the mail they hold. The
//! full-text index file is counted apart from the database.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::checkpoint::wal_path;
use super::fts_file;
use crate::error::{Result, StoreError};

/// Where the bytes of a store go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Size of the database file.
    pub database_bytes: u64,
    /// Size of the write-ahead log.
    pub wal_bytes: u64,
    /// Size of the full-text index file (fts_file.rs).
    pub index_bytes: u64,
    /// Size of the full-text index's write-ahead log.
    pub index_wal_bytes: u64,
    /// Bytes per table or index of both files, largest first.
    pub objects: Vec<(String, u64)>,
    /// Stored messages (one per blob, however many mailboxes hold it).
    pub blobs: u64,
    /// Bytes of mail in them.
    pub mail_bytes: u64,
    /// Mailbox entries.
    pub entries: u64,
}

/// Reads the disk use of the database at `path`, next to a running server.
pub fn disk_stats(path: &Path) -> Result<DiskStats> {
    let io = |p: &Path, e: std::io::Error| StoreError::Io {
        path: p.display().to_string(),
        source: e,
    };
    let database_bytes = std::fs::metadata(path).map_err(|e| io(path, e))?.len();
    let wal = wal_path(path);
    let wal_bytes = std::fs::metadata(&wal).map_or(0, |m| m.len());
    let index = fts_file::index_path(path);
    let index_bytes = std::fs::metadata(&index).map_or(0, |m| m.len());
    let index_wal_bytes = std::fs::metadata(wal_path(&index)).map_or(0, |m| m.len());
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    let mut schemas = vec!["main"];
    if index.exists() {
        fts_file::attach(&conn, path)?;
        schemas.push(fts_file::INDEX_SCHEMA);
    }
    let mut objects = Vec::new();
    for schema in schemas {
        objects.extend(
            conn.prepare("SELECT name, sum(pgsize) FROM dbstat(?1) GROUP BY name")?
                .query_map([schema], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?,
        );
    }
    objects.sort_by_key(|o| std::cmp::Reverse(o.1));
    let (blobs, mail_bytes): (i64, i64) = conn.query_row(
        "SELECT count(*), coalesce(sum(size), 0) FROM blobs WHERE complete = 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let entries: i64 = conn.query_row("SELECT count(*) FROM messages", [], |r| r.get(0))?;
    Ok(DiskStats {
        database_bytes,
        wal_bytes,
        index_bytes,
        index_wal_bytes,
        objects,
        blobs: blobs as u64,
        mail_bytes: mail_bytes as u64,
        entries: entries as u64,
    })
}
