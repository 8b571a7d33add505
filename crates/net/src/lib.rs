//! Connection plumbing the protocol servers (SMTP, POP3, IMAP) share: a
//! bounded input buffer that reads lines, a stream that can switch to TLS
//! in the middle of a session, per-client connection limits and shutdown.
#![forbid(unsafe_code)]

mod accept;
mod dot;
pub mod fuzzing;
mod input;
mod limit;
mod signatures_only;
mod stream;

pub use accept::Acceptor;
pub use dot::{DotStuffer, DotUnstuffer, LineEnds};
pub use input::{Input, LineError};
pub use limit::{ConnGuard, ConnLimiter, HeldAddresses, Refused};
pub use signatures_only::SignaturesOnly;
pub use stream::{open_stream, send, send_buffered, start_tls, Io, Stream};
pub use tokio_rustls::TlsAcceptor;
pub use tokio_util::sync::CancellationToken;
pub use tokio_util::task::TaskTracker;

/// What every server needs to stop gracefully: a signal to stop accepting
/// and idle sessions, and a tracker to wait for sessions still working.
#[derive(Clone, Default)]
pub struct Shutdown {
    /// Cancelled when the server should stop.
    pub token: CancellationToken,
    /// Every session task is spawned on this, so shutdown can wait for them.
    pub tracker: TaskTracker,
}

impl Shutdown {
    /// Waits for the sessions still open, up to `grace`, once no new one
    /// can start; logs how many were left.
    pub async fn drain(&self, grace: std::time::Duration) {
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                sessions = self.tracker.len(),
                "sessions still open after the grace period"
            );
        }
    }
}
