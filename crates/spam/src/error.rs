//! The crate's error type.

/// What can go wrong in this crate: only reading values that come from
/// outside (the computing functions cannot fail).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An authentication result keyword that RFC 8601 does not define for
    /// SPF, DKIM or DMARC.
    #[error("unknown authentication result {0:?}")]
    UnknownAuthResult(String),
}
