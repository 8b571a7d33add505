//! The crate's error type.

use std::path::PathBuf;

/// What can go wrong when configuring a DNSBL client or starting a DNSBL server.
///
/// Lookups themselves never fail with this type: a zone that does not answer
/// in time or answers with an error is reported in the [`crate::Outcome`], so
/// that a mail server can proceed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A zone name is not a valid DNS name.
    #[error("invalid zone name {name:?}: {reason}")]
    ZoneName {
        /// The name as given.
        name: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A client or server setting is out of range.
    #[error("invalid setting {key}: {reason}")]
    Config {
        /// The setting's name.
        key: &'static str,
        /// Why it was rejected.
        reason: String,
    },
    /// A list file could not be read.
    #[error("cannot read list file {path}: {source}")]
    ListFile {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A listening socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Any other I/O error of the server.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}
