//! The crate's error type.

use std::time::Duration;

/// What can go wrong while driving a server.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The network failed (connect, read, write).
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The server did not answer within the protocol timeout.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The server closed the connection.
    #[error("connection closed by server")]
    Closed,
    /// The server sent something that is not valid for the protocol.
    #[error("protocol: {0}")]
    Protocol(String),
    /// The server answered a command with a failure reply.
    #[error("{command} refused: {reply}")]
    Refused {
        /// The command (first word) that was refused.
        command: String,
        /// The server's reply line.
        reply: String,
    },
    /// A command-line value could not be parsed.
    #[error("invalid value: {0}")]
    Invalid(String),
}

/// Short for results with [`BenchError`].
pub type Result<T> = std::result::Result<T, BenchError>;
