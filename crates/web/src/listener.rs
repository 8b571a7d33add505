//! A listener that hands axum connections whose TLS handshake is done.
//! Handshakes run in their own tasks with a deadline, so a client that
//! stalls in the middle of one delays nobody else.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;

/// Longest a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Finished handshakes waiting for axum to take them.
const READY_QUEUE: usize = 64;

/// The client's address, as the login throttle wants it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeerAddr(pub SocketAddr);

impl<'a> axum::extract::connect_info::Connected<axum::serve::IncomingStream<'a, TlsListener>>
    for PeerAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'a, TlsListener>) -> PeerAddr {
        *stream.remote_addr()
    }
}

impl<'a> axum::extract::connect_info::Connected<axum::serve::IncomingStream<'a, PlainListener>>
    for PeerAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'a, PlainListener>) -> PeerAddr {
        *stream.remote_addr()
    }
}

/// Plain TCP connections.
pub(crate) struct PlainListener(pub TcpListener);

impl axum::serve::Listener for PlainListener {
    type Io = TcpStream;
    type Addr = PeerAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = axum::serve::Listener::accept(&mut self.0).await;
        (io, PeerAddr(addr))
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.0.local_addr().map(PeerAddr)
    }
}

/// TLS connections, ready for HTTP.
pub(crate) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub(crate) fn new(
        listener: TcpListener,
        tls: net::TlsAcceptor,
        shutdown: net::Shutdown,
    ) -> TlsListener {
        let local = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let (tx, ready) = mpsc::channel(READY_QUEUE);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = shutdown.token.cancelled() => return,
                    a = listener.accept() => a,
                };
                let (tcp, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of descriptors and the like: back off a little.
                        tracing::warn!(error = %e, "webmail accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let tls = tls.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send((stream, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        TlsListener { ready, local }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = PeerAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some((io, addr)) => (io, PeerAddr(addr)),
            // The accept task ended (shutdown): never hand out anything
            // more; graceful shutdown ends the serve loop.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(PeerAddr(self.local))
    }
}
