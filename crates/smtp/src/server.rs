//! The SMTP listener: accepts connections, applies per-client limits and
//! starts a gate session for each.

use std::sync::Arc;

use net::{Acceptor, ConnLimiter, Shutdown, TlsAcceptor};
use store::{DirectoryWatch, Store};
use tokio::net::TcpListener;
use tracing::Instrument;

use crate::blocklist::BlocklistPolicy;
use crate::config::SmtpConfig;
use crate::content::ContentPolicy;
use crate::gate::Session;
use crate::submission::Submission;

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
    pub content: Option<Arc<ContentPolicy>>,
    /// DNSBL checks in the gate, if on.
    pub blocklist: Option<BlocklistPolicy>,
    /// Stop signal and session tracker.
    pub shutdown: Shutdown,
    /// Set on the submission listeners: AUTH, relaying for accounts.
    pub submission: Option<Arc<Submission>>,
    /// Sender rewriting for forwarded mail, when on.
    pub srs: Option<Arc<crate::srs::Srs>>,
    /// SPF checks of incoming mail, when on (SPF's own field or DMARC).
    pub spf: Option<Arc<crate::spf::SpfCheck>>,
    /// DKIM, ARC and DMARC checks of incoming mail, when on.
    pub message_auth: Option<Arc<crate::message_auth::MessageAuth>>,
    /// Sends the reports of local deliveries senders asked for
    /// (NOTIFY=SUCCESS); the outbound queue makes and sends them.
    pub delivered: Option<DeliveredReport>,
    /// The recipients' Sieve scripts, run at delivery, when on.
    pub filters: Option<Arc<crate::filter::Filters>>,
}

/// Takes a [`store::DeliveryNotice`] and sends its report in the
/// background.
pub type DeliveredReport = Arc<dyn Fn(store::DeliveryNotice) + Send + Sync>;

/// Accepts connections on `listener` until shutdown.
pub async fn serve(listener: TcpListener, ctx: Arc<Context>) {
    let acceptor = Acceptor {
        name: "smtp",
        limiter: Arc::clone(&ctx.limiter),
        refusal: Some(b"421 4.7.0 Too many connections from your address, try later\r\n"),
        busy: Some(b"421 4.3.2 Too many connections, try later\r\n"),
        shutdown: ctx.shutdown.clone(),
    };
    acceptor
        .run(listener, |socket, peer, guard| {
            let ctx = Arc::clone(&ctx);
            async move {
                let _guard = guard;
                let span = tracing::info_span!("smtp", client = %peer);
                Session::new(&ctx, Box::new(socket), peer, false)
                    .run()
                    .instrument(span)
                    .await;
            }
        })
        .await;
}

/// Accepts message submission connections until shutdown: `submission`
/// (587, STARTTLS) or, with `implicit_tls`, `submissions` (465, RFC 8314).
/// `ctx.submission` must be set.
pub async fn serve_submission(listener: TcpListener, ctx: Arc<Context>, implicit_tls: bool) {
    let acceptor = Acceptor {
        name: if implicit_tls {
            "submissions"
        } else {
            "submission"
        },
        limiter: Arc::clone(&ctx.limiter),
        refusal: (!implicit_tls)
            .then_some(&b"421 4.7.0 Too many connections from your address, try later\r\n"[..]),
        busy: (!implicit_tls).then_some(&b"421 4.3.2 Too many connections, try later\r\n"[..]),
        shutdown: ctx.shutdown.clone(),
    };
    acceptor
        .run(listener, |socket, peer, guard| {
            let ctx = Arc::clone(&ctx);
            async move {
                let _guard = guard;
                let span = tracing::info_span!("submission", client = %peer);
                let tls = if implicit_tls { ctx.tls.as_ref() } else { None };
                if implicit_tls && tls.is_none() {
                    return;
                }
                let timeout =
                    std::time::Duration::from_secs(ctx.config.command_timeout_secs.min(60));
                if let Some(stream) = net::open_stream(socket, tls, timeout).await {
                    Session::new(&ctx, stream, peer, implicit_tls)
                        .run()
                        .instrument(span)
                        .await;
                }
            }
        })
        .await;
}
