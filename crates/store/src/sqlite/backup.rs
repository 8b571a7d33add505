//! Online backup and restore of the SQLite store.
//!
//! Every message, flag, UID, account and queue row lives in the one
//! database file, so a backup is a copy of it. The full-text index file
//! beside it is derived from it (fts_file.rs): a backup leaves it out, a
//! restore removes it, and the store builds it again when it opens. `VACUUM INTO` makes that
//! copy from a single read transaction: a consistent snapshot taken while
//! the server keeps receiving (writers are not blocked under WAL), and
//! compacted on the way (free pages are not copied). A restore puts such a
//! copy in place of the data directory's database while no server runs.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::schema::SCHEMA_VERSION;
use crate::error::{Result, StoreError};

/// File name of the database in a data directory.
pub(crate) const DB_FILE: &str = "sluice.db";

/// What a backup or restore copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupStats {
    /// Mailbox entries (messages as mailboxes list them).
    pub messages: i64,
    /// Stored message bodies (one per message however many mailboxes hold it).
    pub blobs: i64,
    /// Accounts.
    pub accounts: i64,
    /// Size of the snapshot file, in bytes.
    pub bytes: u64,
}

fn io_error(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes a consistent snapshot of the store whose database is `db` to a
/// new file `dest` (which must not exist), while servers may be reading
/// and writing the store.
pub fn backup_database(db: &Path, dest: &Path) -> Result<BackupStats> {
    if dest.exists() {
        return Err(StoreError::Exists(dest.display().to_string()));
    }
    if !db.exists() {
        return Err(StoreError::NotFound(format!(
            "the database {}",
            db.display()
        )));
    }
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    // The server may hold the write lock for a group commit; wait for it.
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    // The schema may call Sluice's SQL functions.
    super::functions::register(&conn)?;
    let dest_str = dest
        .to_str()
        .ok_or_else(|| StoreError::Invalid(format!("not a UTF-8 path: {}", dest.display())))?;
    conn.execute("VACUUM INTO ?1", [dest_str])?;
    sync_file(dest)?;
    check_snapshot(dest)
}

/// Replaces the database of the data directory `dir` with the snapshot
/// `src` (made by [`backup_database`]). The caller holds the data
/// directory's lock: no server may run on it. The snapshot is checked
/// first (a Sluice database, a schema this build knows, intact); the old
/// database is replaced only once the new one is complete on disk, so a
/// failed restore leaves it as it was.
pub fn restore_database(src: &Path, dir: &Path) -> Result<BackupStats> {
    let stats = check_snapshot(src)?;
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    let target = dir.join(DB_FILE);
    let partial = dir.join(format!("{DB_FILE}.restoring"));
    std::fs::copy(src, &partial).map_err(|e| io_error(&partial, e))?;
    sync_file(&partial)?;
    // The old database's WAL and shared-memory index belong to it: left
    // beside the new file they would be replayed into it.
    for suffix in ["-wal", "-shm"] {
        let stale = PathBuf::from(format!("{}{suffix}", target.display()));
        match std::fs::remove_file(&stale) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&stale, e)),
        }
    }
    // The full-text index belongs to the database replaced; the store
    // builds it again from the restored one when it opens (fts_file.rs).
    let index = super::fts_file::index_path(&target);
    for suffix in ["", "-wal", "-shm"] {
        let stale = PathBuf::from(format!("{}{suffix}", index.display()));
        match std::fs::remove_file(&stale) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&stale, e)),
        }
    }
    std::fs::rename(&partial, &target).map_err(|e| io_error(&target, e))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(stats)
}

/// Opens a snapshot read-only and checks that it is a whole Sluice
/// database this build can open; returns what it holds.
fn check_snapshot(path: &Path) -> Result<BackupStats> {
    let bytes = std::fs::metadata(path)
        .map_err(|e| io_error(path, e))?
        .len();
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let not_ours = |why: String| {
        StoreError::Invalid(format!("{} is not a Sluice backup: {why}", path.display()))
    };
    let check: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| not_ours(e.to_string()))?;
    if check != "ok" {
        return Err(not_ours(format!("damaged ({check})")));
    }
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version == 0 {
        return Err(not_ours("no Sluice schema".into()));
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    let count = |table: &str| -> Result<i64> {
        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .map_err(|e| not_ours(e.to_string()))
    };
    Ok(BackupStats {
        messages: count("messages")?,
        blobs: count("blobs")?,
        accounts: count("accounts")?,
        bytes,
    })
}

fn sync_file(path: &Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| io_error(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_a_database_is_refused_and_nothing_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let bogus = dir.path().join("bogus.db");
        std::fs::write(
            &bogus,
            b"this is not a database at all, not even close......",
        )
        .unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join(DB_FILE), b"old").unwrap();
        let err = restore_database(&bogus, &data).unwrap_err().to_string();
        assert!(err.contains("is not a Sluice backup"), "{err}");
        assert_eq!(std::fs::read(data.join(DB_FILE)).unwrap(), b"old");
    }

    #[test]
    fn an_empty_sqlite_database_is_not_a_sluice_backup() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("other.db");
        Connection::open(&other)
            .unwrap()
            .execute("CREATE TABLE t (x)", [])
            .unwrap();
        let err = check_snapshot(&other).unwrap_err().to_string();
        assert!(err.contains("no Sluice schema"), "{err}");
    }

    #[test]
    fn backup_refuses_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("exists.db");
        std::fs::write(&dest, b"x").unwrap();
        let err = backup_database(&dir.path().join("none.db"), &dest).unwrap_err();
        assert!(matches!(err, StoreError::Exists(_)), "{err}");
    }
}
