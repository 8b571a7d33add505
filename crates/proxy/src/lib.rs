//! The stream-scanning proxy: Sluice's scanner in front of another mail
//! server (Postfix, Dovecot, anything that speaks SMTP or POP3).
//!
//! [SMTP](smtp): commands and replies pass through; the message goes to
//! the upstream as it arrives while the same bytes feed the scanner, and
//! only the end of data waits for the verdict, so an infected message is
//! never accepted upstream. [POP3](pop3): RETR and TOP answers are scanned
//! as they stream to the client; an infected part is cut where it was
//! found and the message is closed well-formed with a notice.
//!
//! Each connection holds a few fixed buffers and one scan session: memory
//! does not depend on message size, and each side waits for the other
//! (back-pressure), so a slow peer slows the transfer rather than growing
//! a buffer.
#![forbid(unsafe_code)]

mod config;
#[doc(hidden)]
pub mod fuzzing;
mod pool;
mod pop3;
mod proxy_v2;
mod smtp;
mod structure;
mod transparent;
mod upstream;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use config::{ClientAddress, ClientTls, ConfigError, Protocol, ProxyConfig, UpstreamTls};
use net::{Acceptor, ConnLimiter, Shutdown, TlsAcceptor};
use tokio::net::TcpListener;
pub use upstream::connector;

/// What the proxy does with a scan verdict.
pub struct ContentCheck {
    /// The engine: the built-in scanner with the signatures and the limits
    /// of `[scan]`, or clamd (SMTP entries only: it answers for a part once
    /// the part has ended).
    pub engine: scan::Engine,
    /// Refuse (SMTP) or cut (POP3) when a limit stopped the scan early.
    pub reject_limit: bool,
    /// Likewise for encrypted archive entries (only reported when the
    /// scanner's encrypted policy is to reject).
    pub reject_encrypted: bool,
}

impl ContentCheck {
    /// Starts scanning one message.
    pub(crate) fn start(&self) -> Scan {
        Scan(self.engine.session())
    }

    /// How deep MIME parts nest before the scan stops looking.
    pub(crate) fn max_mime_depth(&self) -> usize {
        match &self.engine {
            scan::Engine::Builtin(scanner) => scanner.limits().max_mime_depth,
            scan::Engine::Clamd(_) => scan::Limits::default().max_mime_depth,
        }
    }

    /// Why the message must not go through, or `None` when it may.
    pub fn refusal(&self, verdict: &scan::Verdict) -> Option<String> {
        match verdict {
            scan::Verdict::Clean => None,
            scan::Verdict::Infected { name } => Some(format!("virus found ({name})")),
            scan::Verdict::LimitExceeded(kind) => self
                .reject_limit
                .then(|| format!("content could not be scanned ({})", kind.as_str())),
            scan::Verdict::Encrypted => self
                .reject_encrypted
                .then(|| "encrypted archive cannot be scanned".to_string()),
        }
    }
}

/// One message's scan in progress. clamd is written to with blocking I/O:
/// `block_in_place` keeps the worker's other tasks running meanwhile (the
/// proxy runs on the multi-threaded runtime).
pub(crate) struct Scan(scan::EngineSession);

impl Scan {
    pub(crate) fn feed(&mut self, piece: &[u8]) {
        if self.0.blocks() {
            tokio::task::block_in_place(|| self.0.feed(piece))
        } else {
            self.0.feed(piece)
        }
    }

    pub(crate) fn infected(&self) -> Option<&str> {
        self.0.infected()
    }

    /// The verdict, or why there is none (clamd failing).
    pub(crate) fn finish(self) -> Result<scan::Verdict, String> {
        let session = self.0;
        if session.blocks() {
            tokio::task::block_in_place(|| session.finish())
        } else {
            session.finish()
        }
        .map_err(|e| e.to_string())
    }
}

/// Everything one proxy listener needs.
pub struct Context {
    /// The `[[proxy]]` entry.
    pub config: ProxyConfig,
    /// Our host name, in the replies the proxy writes itself.
    pub hostname: String,
    /// The server's certificate, for STARTTLS/STLS or implicit TLS with
    /// clients; `None` turns client TLS off.
    pub tls: Option<TlsAcceptor>,
    /// TLS towards the upstream (from [`connector`]); `None` when the
    /// entry's `upstream_tls` is `none`.
    pub upstream_tls: Option<tokio_rustls::TlsConnector>,
    /// The scan; `None` passes mail through unscanned (`[scan] enabled = false`).
    pub scan: Option<Arc<ContentCheck>>,
    /// Connections per client address and in all.
    pub limiter: Arc<ConnLimiter>,
    /// Stop signal and session tracker.
    pub shutdown: Shutdown,
}

impl Context {
    /// The limiter a proxy entry asks for.
    pub fn limiter_for(config: &ProxyConfig) -> Arc<ConnLimiter> {
        ConnLimiter::with_total(config.max_connections_per_ip, config.max_connections)
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.config.timeout_secs)
    }

    /// The client-side TLS acceptor for a mode, if configured.
    fn client_tls(&self, mode: ClientTls) -> Option<&TlsAcceptor> {
        (self.config.tls == mode)
            .then_some(self.tls.as_ref())
            .flatten()
    }
}

/// Runs one proxy listener until shutdown.
pub async fn serve(listener: TcpListener, ctx: Arc<Context>) {
    let (name, refusal, busy): (&'static str, &'static [u8], &'static [u8]) =
        match ctx.config.protocol {
            Protocol::Smtp => (
                "proxy-smtp",
                b"421 4.7.0 Too many connections from your address\r\n",
                b"421 4.3.2 Too many connections, try again later\r\n",
            ),
            Protocol::Pop3 => (
                "proxy-pop3",
                b"-ERR [SYS/TEMP] Too many connections from your address\r\n",
                b"-ERR [SYS/TEMP] Too many connections, try again later\r\n",
            ),
        };
    let pool = ctx.config.reuses_upstream().then(|| {
        let pool = Arc::new(pool::Pool::default());
        tokio::spawn(close_idle_upstreams(
            Arc::clone(&pool),
            ctx.shutdown.clone(),
        ));
        pool
    });
    let implicit = ctx.config.tls == ClientTls::Implicit;
    let acceptor = Acceptor {
        name,
        limiter: Arc::clone(&ctx.limiter),
        refusal: (!implicit).then_some(refusal),
        busy: (!implicit).then_some(busy),
        shutdown: ctx.shutdown.clone(),
    };
    acceptor
        .run(listener, |socket, peer: SocketAddr, guard| {
            let ctx = Arc::clone(&ctx);
            let pool = pool.clone();
            async move {
                let _guard = guard;
                let span = tracing::info_span!("proxy", listener = name, client = %peer);
                let _ = tracing::Instrument::instrument(
                    async {
                        match ctx.config.protocol {
                            Protocol::Smtp => {
                                smtp::session(&ctx, pool.as_deref(), socket, peer).await
                            }
                            Protocol::Pop3 => pop3::session(&ctx, socket, peer).await,
                        }
                    },
                    span,
                )
                .await;
            }
        })
        .await;
}

/// Closes kept upstream connections once they have waited long enough,
/// and all of them when the proxy stops.
async fn close_idle_upstreams(pool: Arc<pool::Pool>, shutdown: Shutdown) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => pool.close_expired(),
            _ = shutdown.token.cancelled() => break,
        }
    }
    pool.close_all();
}
