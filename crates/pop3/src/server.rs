//! The POP3 listeners: `pop3` (plain, with STLS) and `pop3s` (implicit TLS,
//! RFC 8314).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use net::{Acceptor, ConnLimiter, Shutdown, TlsAcceptor};
use store::{Authenticator, Store};
use tokio::net::TcpListener;
use tracing::Instrument;

use crate::config::Pop3Config;
use crate::lock::MailboxLocks;
use crate::session::Session;

/// What every POP3 session shares.
pub struct Context {
    /// Our host name, in the greeting.
    pub hostname: String,
    /// Limits and timeouts.
    pub config: Pop3Config,
    /// The mail.
    pub store: Arc<dyn Store>,
    /// Login checks and penalties.
    pub auth: Arc<Authenticator>,
    /// TLS for STLS and pop3s.
    pub tls: Option<TlsAcceptor>,
    /// One session per maildrop.
    pub locks: Arc<MailboxLocks>,
    /// Connections per client address.
    pub limiter: Arc<ConnLimiter>,
    /// Stop signal and session tracker.
    pub shutdown: Shutdown,
}

/// Accepts POP3 connections until shutdown; with `implicit_tls` every
/// connection starts with a TLS handshake (port 995).
pub async fn serve(listener: TcpListener, ctx: Arc<Context>, implicit_tls: bool) {
    let acceptor = Acceptor {
        name: if implicit_tls { "pop3s" } else { "pop3" },
        limiter: Arc::clone(&ctx.limiter),
        refusal: (!implicit_tls)
            .then_some(&b"-ERR [SYS/TEMP] Too many connections from your address\r\n"[..]),
        busy: (!implicit_tls)
            .then_some(&b"-ERR [SYS/TEMP] Too many connections, try later\r\n"[..]),
        shutdown: ctx.shutdown.clone(),
    };
    acceptor
        .run(listener, |socket, peer, guard| {
            let ctx = Arc::clone(&ctx);
            let span = tracing::info_span!("pop3", client = %peer);
            async move {
                let _guard = guard;
                let tls = if implicit_tls { ctx.tls.as_ref() } else { None };
                if implicit_tls && tls.is_none() {
                    return;
                }
                let timeout = Duration::from_secs(ctx.config.idle_timeout_secs.min(60));
                if let Some(stream) = net::open_stream(socket, tls, timeout).await {
                    Session::new(&ctx, stream, peer, implicit_tls).run().await;
                }
            }
            .instrument(span)
        })
        .await;
}

/// Whether a client may send a password over this connection.
pub(crate) fn plaintext_ok(config: &Pop3Config, peer: SocketAddr, tls: bool) -> bool {
    tls || config.allow_plaintext_auth || peer.ip().is_loopback()
}
