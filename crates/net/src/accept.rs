//! The accept loop every listener runs: take connections until shutdown,
//! turn away clients over their connection limit, and start a tracked
//! session task for the others.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::limit::{ConnGuard, ConnLimiter, Refused};
use crate::Shutdown;

/// How a listener treats its connections.
pub struct Acceptor {
    /// Name for logs (`smtp`, `pop3s`...).
    pub name: &'static str,
    /// Connections per client address.
    pub limiter: Arc<ConnLimiter>,
    /// Sent to a client over its limit before closing (nothing on a TLS
    /// port, where the client expects a handshake).
    pub refusal: Option<&'static [u8]>,
    /// Sent, the same way, when the listener has all the connections it
    /// takes.
    pub busy: Option<&'static [u8]>,
    /// Stop signal and session tracker.
    pub shutdown: Shutdown,
}

impl Acceptor {
    /// Accepts on `listener` until shutdown, running `session` for each
    /// connection in a task the shutdown waits for. The session holds the
    /// guard of its connection slot for as long as it runs.
    pub async fn run<F, Fut>(&self, listener: TcpListener, session: F)
    where
        F: Fn(TcpStream, SocketAddr, ConnGuard) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = self.shutdown.token.cancelled() => break,
            };
            let (mut socket, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off briefly.
                    tracing::warn!(listener = self.name, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = socket.set_nodelay(true);
            let m = metrics::get();
            match self.limiter.try_acquire(peer.ip()) {
                Ok(guard) => {
                    m.connections
                        .get_or_create(&[("listener", self.name), ("outcome", "accepted")])
                        .inc();
                    let open = m
                        .connections_open
                        .get_or_create(&[("listener", self.name)])
                        .clone();
                    open.inc();
                    let running = session(socket, peer, guard);
                    self.shutdown.tracker.spawn(async move {
                        running.await;
                        open.dec();
                    });
                }
                Err(why) => {
                    m.connections
                        .get_or_create(&[("listener", self.name), ("outcome", "refused")])
                        .inc();
                    let text = if why == Refused::Full {
                        tracing::warn!(listener = self.name, client = %peer.ip(), "connection refused: the listener is at its connection limit");
                        self.busy
                    } else {
                        tracing::info!(listener = self.name, client = %peer.ip(), "connection refused: too many from this address");
                        self.refusal
                    };
                    if let Some(refusal) = text {
                        self.shutdown.tracker.spawn(async move {
                            let _ = socket.write_all(refusal).await;
                        });
                    }
                }
            }
        }
    }
}
