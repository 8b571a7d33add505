//! The IMAP listeners: `imap` (plain, with STARTTLS) and `imaps` (implicit
//! TLS, RFC 8314).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use net::{Acceptor, ConnLimiter, Shutdown, TlsAcceptor};
use store::{Authenticator, Store};
use tokio::net::TcpListener;
use tracing::Instrument;

use crate::config::ImapConfig;
use crate::session::Session;

/// What every IMAP session shares.
pub struct Context {
    /// Our host name, in the greeting.
    pub hostname: String,
    /// Limits and timeouts.
    pub config: ImapConfig,
    /// The mail.
    pub store: Arc<dyn Store>,
    /// Login checks and penalties.
    pub auth: Arc<Authenticator>,
    /// TLS for STARTTLS and imaps.
    pub tls: Option<TlsAcceptor>,
    /// Connections per client address.
    pub limiter: Arc<ConnLimiter>,
    /// Stop signal and session tracker.
    pub shutdown: Shutdown,
}

/// Accepts IMAP connections until shutdown; with `implicit_tls` every
/// connection starts with a TLS handshake (port 993).
pub async fn serve(listener: TcpListener, ctx: Arc<Context>, implicit_tls: bool) {
    let acceptor = Acceptor {
        name: if implicit_tls { "imaps" } else { "imap" },
        limiter: Arc::clone(&ctx.limiter),
        refusal: (!implicit_tls)
            .then_some(&b"* BYE [UNAVAILABLE] Too many connections from your address\r\n"[..]),
        busy: (!implicit_tls)
            .then_some(&b"* BYE [UNAVAILABLE] Too many connections, try later\r\n"[..]),
        shutdown: ctx.shutdown.clone(),
    };
    acceptor
        .run(listener, |socket, peer, guard| {
            let ctx = Arc::clone(&ctx);
            let span = tracing::info_span!("imap", client = %peer);
            async move {
                let _guard = guard;
                let tls = if implicit_tls { ctx.tls.as_ref() } else { None };
                if implicit_tls && tls.is_none() {
                    return;
                }
                let timeout = Duration::from_secs(ctx.config.login_timeout_secs);
                if let Some(stream) = net::open_stream(socket, tls, timeout).await {
                    Session::new(&ctx, stream, peer, implicit_tls).run().await;
                }
            }
            .instrument(span)
        })
        .await;
}

/// Whether a client may send a password over this connection.
pub(crate) fn plaintext_ok(config: &ImapConfig, peer: SocketAddr, tls: bool) -> bool {
    tls || config.allow_plaintext_auth || peer.ip().is_loopback()
}
