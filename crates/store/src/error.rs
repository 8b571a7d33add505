//! The store's error type.

/// What can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database engine failed.
    #[error("database: {0}")]
    Database(#[from] rusqlite::Error),
    /// PostgreSQL answered with an error.
    #[error("database: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// The database cannot be reached now (PostgreSQL down, the pool
    /// exhausted); the caller should answer with a temporary failure.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The disk is full (or the free space is under the reserve kept for
    /// the store): nothing was stored. The caller answers with a temporary
    /// "insufficient storage" failure (SMTP `452 4.3.1`, RFC 3463 §3.4 and
    /// RFC 5321 §4.2.2) and the same request may succeed once space
    /// returns. Engine errors that mean the same are found by
    /// [`StoreError::is_full`].
    #[error("no space left: {0}")]
    Full(String),
    /// Opening or creating files under the data directory failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory involved.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A named domain, account, alias or mailbox does not exist.
    #[error("{0} does not exist")]
    NotFound(String),
    /// The thing to create already exists.
    #[error("{0} already exists")]
    Exists(String),
    /// The thing is in use and cannot go (the active Sieve script).
    #[error("{0}")]
    InUse(String),
    /// The input is not acceptable (bad address, empty password, ...).
    #[error("{0}")]
    Invalid(String),
    /// Something stored cannot be read back (a damaged or foreign value).
    #[error("stored data unreadable: {0}")]
    Corrupt(String),
    /// The database was written by a newer Sluice.
    #[error("database schema version {found} is newer than this Sluice supports ({supported})")]
    SchemaTooNew {
        /// Version found in the file.
        found: i64,
        /// Newest version this build knows.
        supported: i64,
    },
    /// The store's writer thread is gone (the store is shutting down).
    #[error("store is closed")]
    Closed,
    /// A store operation panicked; that one operation failed, the store
    /// goes on serving the others.
    #[error("internal error: {0}")]
    Bug(String),
}

/// Result with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

impl StoreError {
    /// The error for an operation `what` that panicked with `payload`;
    /// the panic is logged, since its message otherwise only reaches
    /// stderr.
    pub(crate) fn from_panic(what: &str, payload: Box<dyn std::any::Any + Send>) -> StoreError {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        tracing::error!(operation = what, panic = %message, "store operation panicked");
        StoreError::Bug(format!("{what} panicked: {message}"))
    }

    /// Whether nothing was stored for lack of space: [`StoreError::Full`],
    /// SQLite's `SQLITE_FULL` (and a shared-memory file that cannot grow),
    /// PostgreSQL's `53100 disk_full`, or `ENOSPC`/`EDQUOT` from a file.
    pub fn is_full(&self) -> bool {
        fn no_space(e: &std::io::Error) -> bool {
            matches!(
                e.raw_os_error(),
                Some(libc_codes::ENOSPC | libc_codes::EDQUOT)
            )
        }
        match self {
            StoreError::Full(_) => true,
            StoreError::Database(rusqlite::Error::SqliteFailure(e, _)) => {
                e.code == rusqlite::ErrorCode::DiskFull
                    || e.extended_code == rusqlite::ffi::SQLITE_IOERR_SHMSIZE
            }
            StoreError::Postgres(e) => {
                e.code() == Some(&tokio_postgres::error::SqlState::DISK_FULL)
                    || std::error::Error::source(e)
                        .and_then(|s| s.downcast_ref::<std::io::Error>())
                        .is_some_and(no_space)
            }
            StoreError::Io { source, .. } => no_space(source),
            _ => false,
        }
    }

    /// Whether the database could not be reached (rather than refusing the
    /// request): the caller answers with a temporary failure and the same
    /// request may succeed once the database is back.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Unavailable(_) => true,
            StoreError::Postgres(e) => {
                e.is_closed()
                    || e.code().is_some_and(|c| {
                        // Class 08: connection exception; 57P0x: the
                        // server is shutting down or starting up.
                        c.code().starts_with("08") || c.code().starts_with("57P0")
                    })
                    || std::error::Error::source(e)
                        .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
            }
            _ => false,
        }
    }
}

/// The `errno` values of a full disk and a full quota, as Linux numbers
/// them (nix names them, but only as `Errno` values).
mod libc_codes {
    pub(super) const ENOSPC: i32 = nix::errno::Errno::ENOSPC as i32;
    pub(super) const EDQUOT: i32 = nix::errno::Errno::EDQUOT as i32;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_errors_of_a_full_disk_are_full() {
        let sqlite = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            None,
        );
        assert!(StoreError::from(sqlite).is_full());
        let io = StoreError::Io {
            path: "x".into(),
            source: std::io::Error::from_raw_os_error(libc_codes::ENOSPC),
        };
        assert!(io.is_full());
        let busy = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            None,
        );
        assert!(!StoreError::from(busy).is_full());
        assert!(!StoreError::NotFound("x".into()).is_full());
    }
}
