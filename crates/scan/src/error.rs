//! The crate's error type. Scanning itself never fails (bad input is a verdict or a
//! counter); errors come from loading signature databases.

/// An error loading or building a signature database.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// A database file or directory could not be read.
    #[error("reading {0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// A `.cvd`/`.cld` container is damaged.
    #[error("signature container {0}: {1}")]
    Container(String, String),
    /// The anchor automaton could not be built (too many or too long patterns).
    #[error("building the signature automaton: {0}")]
    Build(String),
}
