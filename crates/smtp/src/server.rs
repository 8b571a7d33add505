//! The SMTP listener: accepts connections, applies per-client limits and
//! starts a gate session for each.

use std::net::SocketAddr;
use std::sync::Arc;

use net::{ConnLimiter, Shutdown, TlsAcceptor};
use store::{DirectoryWatch, Store};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tracing::Instrument;

use crate::blocklist::BlocklistPolicy;
use crate::config::SmtpConfig;
use crate::content::ContentPolicy;
use crate::gate::Session;

/// Everything an SMTP session needs from the server, shared by all.
pub struct Context {
    /// Our name in the greeting and in `Received:` fields.
    pub hostname: String,
    /// Limits and timeouts.
    pub config: SmtpConfig,
    /// Where messages go.
    pub store: Arc<dyn Store>,
    /// Local domains, accounts and aliases, kept current.
    pub directory: Arc<DirectoryWatch>,
    /// STARTTLS is offered when this is set.
    pub tls: Option<TlsAcceptor>,
    /// Connections per client address.
    pub limiter: Arc<ConnLimiter>,
    /// Content scanning in the data stage, if on.
    pub content: Option<ContentPolicy>,
    /// DNSBL checks in the gate, if on.
    pub blocklist: Option<BlocklistPolicy>,
    /// Stop signal and session tracker.
    pub shutdown: Shutdown,
}

/// Accepts connections on `listener` until shutdown.
pub async fn serve(listener: TcpListener, ctx: Arc<Context>) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = ctx.shutdown.token.cancelled() => break,
        };
        let (mut socket, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: back off briefly.
                tracing::warn!(error = %e, "smtp accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = socket.set_nodelay(true);
        let Some(guard) = ctx.limiter.try_acquire(peer.ip()) else {
            tracing::info!(client = %peer.ip(), "smtp connection refused: too many from this address");
            ctx.shutdown.tracker.spawn(async move {
                let _ = socket
                    .write_all(b"421 4.7.0 Too many connections from your address, try later\r\n")
                    .await;
            });
            continue;
        };
        let ctx = Arc::clone(&ctx);
        ctx.shutdown.tracker.clone().spawn(async move {
            let _guard = guard;
            session(socket, peer, ctx).await;
        });
    }
}

async fn session(socket: tokio::net::TcpStream, peer: SocketAddr, ctx: Arc<Context>) {
    let span = tracing::info_span!("smtp", client = %peer);
    Session::new(&ctx, Box::new(socket), peer)
        .run()
        .instrument(span)
        .await;
}
