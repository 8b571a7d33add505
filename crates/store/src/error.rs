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
