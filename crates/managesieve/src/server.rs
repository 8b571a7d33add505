//! The ManageSieve listener (RFC 5804 §1.8: port 4190, STARTTLS; there
//! is no implicit-TLS port).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use net::{Acceptor, ConnLimiter, Shutdown, TlsAcceptor};
use store::{Authenticator, Store};
use tokio::net::TcpListener;
use tracing::Instrument;

use crate::config::ManageSieveConfig;
use crate::session::Session;

/// Checks a script's source: `Err` carries the message the client sees
/// (for a compile error, its line and column).
pub type Check = Arc<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// The Sieve language the server accepts: handed in so the protocol does
/// not depend on the interpreter.
#[derive(Clone)]
pub struct Language {
    /// Compiles a script and throws the result away.
    pub check: Check,
    /// The extensions the interpreter supports (the SIEVE capability).
    pub extensions: Vec<String>,
    /// Most `redirect` actions one script may take (the MAXREDIRECTS
    /// capability), if the interpreter says.
    pub max_redirects: Option<u32>,
}

/// What every ManageSieve session shares.
pub struct Context {
    /// Our host name, in the greeting.
    pub hostname: String,
    /// Limits and timeouts.
    pub config: ManageSieveConfig,
    /// Where the scripts live.
    pub store: Arc<dyn Store>,
    /// Login checks and penalties, shared with the other protocols.
    pub auth: Arc<Authenticator>,
    /// TLS for STARTTLS.
    pub tls: Option<TlsAcceptor>,
    /// Connections per client address and in all.
    pub limiter: Arc<ConnLimiter>,
    /// Stop signal and session tracker.
    pub shutdown: Shutdown,
    /// The compiler scripts go through before they are stored.
    pub language: Language,
}

/// Accepts ManageSieve connections until shutdown.
pub async fn serve(listener: TcpListener, ctx: Arc<Context>) {
    let acceptor = Acceptor {
        name: "managesieve",
        limiter: Arc::clone(&ctx.limiter),
        refusal: Some(&b"BYE (TRYLATER) \"Too many connections from your address\"\r\n"[..]),
        busy: Some(&b"BYE (TRYLATER) \"Too many connections, try later\"\r\n"[..]),
        shutdown: ctx.shutdown.clone(),
    };
    acceptor
        .run(listener, |socket, peer, guard| {
            let ctx = Arc::clone(&ctx);
            let span = tracing::info_span!("managesieve", client = %peer);
            async move {
                let _guard = guard;
                let timeout = Duration::from_secs(60);
                if let Some(stream) = net::open_stream(socket, None, timeout).await {
                    Session::new(&ctx, stream, peer).run().await;
                }
            }
            .instrument(span)
        })
        .await;
}

/// Whether a client may send a password over this connection (the same
/// rule as POP3 and IMAP).
pub(crate) fn plaintext_ok(config: &ManageSieveConfig, peer: SocketAddr, tls: bool) -> bool {
    tls || config.allow_plaintext_auth || peer.ip().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_need_tls_unless_loopback_or_allowed() {
        let mut config = ManageSieveConfig::default();
        let remote: SocketAddr = "192.0.2.7:50000".parse().unwrap();
        let local: SocketAddr = "[::1]:50000".parse().unwrap();
        assert!(!plaintext_ok(&config, remote, false));
        assert!(plaintext_ok(&config, remote, true));
        assert!(plaintext_ok(&config, local, false));
        config.allow_plaintext_auth = true;
        assert!(plaintext_ok(&config, remote, false));
    }
}
