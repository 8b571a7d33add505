//! Sluice's webmail: server-rendered pages over the store, in the same
//! process as IMAP (no IMAP round trip). Pages work without JavaScript; one
//! small script adds keyboard shortcuts and live updates.
//!
//! Security in one place: sessions live in the store ([`session`]), every
//! state-changing request carries the session's CSRF token, every page has
//! a strict Content-Security-Policy with no inline script, and message HTML
//! is sanitised ([`sanitize`]) and shown only inside a sandboxed frame
//! served from its own route with its own policy.
#![forbid(unsafe_code)]

mod action_pages;
mod actions;
mod admin;
mod admin_pages;
mod assets;
mod autoconfig;
mod compose;
mod config;
mod conversations;
mod correspondents;
mod css;
mod error;
mod filters;
mod folders;
mod identities;
mod inline;
mod listener;
mod log_ring;
mod mta_sts;
mod one_click;
mod outgoing;
mod pages;
mod position;
mod read;
mod routes;
pub mod rules;
mod sanitize;
mod search;
mod session;
mod settings;
mod thread;
mod unsubscribe;
mod unsubscribe_action;

use std::sync::Arc;

pub use autoconfig::MailServices;
pub use config::WebConfig;
pub use css::{
    filter_declarations as filter_css_declarations, filter_stylesheet as filter_css_stylesheet,
    Filtered as FilteredCss,
};
pub use error::WebError;
pub use log_ring::{LineWriter, LogRing};
pub use mta_sts::{policy as mta_sts_policy, policy_id as mta_sts_policy_id, MtaStsMode};
pub use one_click::OneClick;
pub use sanitize::{sanitize_html, sanitize_html_with, Sanitized};

/// What the webmail needs from the rest of the server.
pub struct Context {
    /// The mail store, shared with IMAP and POP3.
    pub store: Arc<dyn store::Store>,
    /// Domains, accounts and aliases, kept current.
    pub directory: Arc<store::DirectoryWatch>,
    /// The one place passwords are checked.
    pub auth: Arc<store::Authenticator>,
    /// Settings from `[web]`.
    pub config: WebConfig,
    /// Stops accepting and ends live-update streams.
    pub shutdown: net::Shutdown,
    /// The hourly sending limit shared with message submission: counts a
    /// message with this many recipients for the account if that stays
    /// within the limit, else false. `None`: no limit.
    pub send_limit: Option<SendLimit>,
    /// The content scan of mail sent from the webmail (the one submission
    /// and incoming mail get): `Ok(Some(why))` refuses a stored message.
    /// `None`: no scanning.
    pub scan: Option<ScanStored>,
    /// Recent lines of the server's log, for the admin page. `None`: not
    /// kept.
    pub logs: Option<Arc<LogRing>>,
    /// Where clients reach IMAP, POP3 and submission, for the set-up
    /// documents clients fetch (autoconfig, autodiscover).
    pub services: MailServices,
    /// The authserv-id of the `Authentication-Results:` field put on
    /// incoming mail, when it is checked: only that field is trusted, for
    /// the DKIM signature a one-click unsubscribe needs. `None`: not
    /// checked.
    pub authserv_id: Option<String>,
    /// Sends one-click unsubscribe POSTs (RFC 8058).
    pub one_click: OneClick,
}

/// See [`Context::scan`].
pub type ScanStored = std::sync::Arc<
    dyn Fn(
            store::BlobId,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Option<String>, String>> + Send>,
        > + Send
        + Sync,
>;

/// See [`Context::send_limit`].
pub type SendLimit = std::sync::Arc<dyn Fn(store::AccountId, u32) -> bool + Send + Sync>;

/// Serves the webmail on `listener`, over TLS when `tls` is given, until
/// the shutdown token is cancelled.
pub async fn serve(
    listener: tokio::net::TcpListener,
    ctx: Arc<Context>,
    tls: Option<net::TlsAcceptor>,
) {
    serve_with(listener, ctx, tls, axum::Router::new()).await
}

/// [`serve`], with `mounted` routes (another protocol on the same HTTP
/// stack, such as JMAP) merged beside the webmail's; their handlers may
/// extract the client's address as `ConnectInfo<SocketAddr>`.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    ctx: Arc<Context>,
    tls: Option<net::TlsAcceptor>,
    mounted: axum::Router,
) {
    let secure = tls.is_some();
    let mounted = mounted.layer(axum::middleware::from_fn(peer_for_mounted));
    let app = routes::router(Arc::clone(&ctx), secure)
        .merge(mounted)
        .into_make_service_with_connect_info::<listener::PeerAddr>();
    let stop = ctx.shutdown.token.clone();
    let result = match tls {
        None => {
            axum::serve(listener::PlainListener(listener), app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        }
        Some(tls) => {
            let tls_listener = listener::TlsListener::new(listener, tls, ctx.shutdown.clone());
            axum::serve(tls_listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        }
    };
    if let Err(e) = result {
        tracing::error!(error = %e, "webmail listener stopped");
    }
}

/// Gives mounted routes the client's address as axum's own
/// `ConnectInfo<SocketAddr>`, so they need not know this crate's type.
async fn peer_for_mounted(
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::extract::ConnectInfo;
    if let Some(ConnectInfo(listener::PeerAddr(addr))) = req
        .extensions()
        .get::<ConnectInfo<listener::PeerAddr>>()
        .copied()
    {
        req.extensions_mut().insert(ConnectInfo(addr));
    }
    next.run(req).await
}
