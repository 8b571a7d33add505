//! Sluice's JMAP server: RFC 8620 (Core) and RFC 8621 (Mail) over the
//! store, mounted on the web listener's HTTP stack beside the webmail,
//! as IMAP is a server over the same [`store::Store`].
//!
//! **The model.** An Email is a stored message of the account: the blob
//! its mailbox entries share (single-copy storage), so one Email is in
//! several mailboxes when IMAP COPY, a Sieve `fileinto :copy` or JMAP's
//! `mailboxIds` put it there, and its id (`E<blob id>`) never changes
//! while it moves: moving it is a copy (a new entry of the same blob)
//! and an expunge. Per-entry IMAP flags become the Email's keywords
//! (their union; setting keywords sets them on every entry). A Thread is
//! the store's filing of the message when it first came to the account,
//! by the root message id of its header. One state for Mailbox, Email
//! and Thread: the account's modification sequence, which every change
//! takes whatever protocol made it (the mailboxes' HIGHESTMODSEQs are
//! its numbers), so a flag set over IMAP is in Email/changes and a
//! keyword set over JMAP is a FETCH FLAGS change for IMAP sessions.
//!
//! - [`request`] reads request objects and [`reference`] resolves result
//!   references; neither does I/O.
//! - [`http`] is the URL space, [`auth`] the Basic login through the
//!   store's [`store::Authenticator`] (the throttle every protocol
//!   shares), [`session`] the session resource, [`api`] the method-call
//!   loop, [`blob`] uploads and downloads (streamed through the store in
//!   pieces), [`push`] the event source, [`ws`] JMAP over WebSocket,
//!   `pusher` the StateChange objects POSTed to push subscriptions.
//! - `methods` holds the methods, one module per data type; `message`
//!   reads an Email's header forms and body parts from the stored
//!   structure and byte ranges of the blob.
#![forbid(unsafe_code)]

pub mod api;
pub mod auth;
mod blob;
mod config;
pub mod error;
mod http;
pub mod ids;
mod limiter;
mod message;
mod methods;
pub mod push;
mod pusher;
pub mod reference;
pub mod request;
pub mod session;
pub mod ws;

use std::sync::Arc;

use serde_json::{json, Map, Value};

pub use config::JmapConfig;
pub use error::JmapError;
pub use pusher::PushHub;

/// RFC 8620's capability.
pub const CORE: &str = "urn:ietf:params:jmap:core";
/// RFC 8621's capability.
pub const MAIL: &str = "urn:ietf:params:jmap:mail";
/// RFC 8621's submission capability (§1.3.2): Identity and
/// EmailSubmission.
pub const SUBMISSION: &str = "urn:ietf:params:jmap:submission";
/// RFC 8621's vacation capability (§1.3.3).
pub const VACATION: &str = "urn:ietf:params:jmap:vacationresponse";
/// RFC 9425's capability.
pub const QUOTA: &str = "urn:ietf:params:jmap:quota";

/// A capability: its URI, its object in the session's `capabilities`,
/// and its object in each account's `accountCapabilities`.
type Capability = (&'static str, fn() -> Value, fn(&Jmap) -> Value);

/// The capabilities served, Core first. Only what is served in full is
/// here: a method of a capability not listed is `unknownMethod`.
pub(crate) const CAPABILITIES: &[Capability] = &[
    (CORE, || Value::Null, |_| json!({})),
    (MAIL, || json!({}), mail_account_capability),
    (QUOTA, || json!({}), |_| json!({})),
    // The queue sends at once: no delayed sending, no SMTP extensions.
    (
        SUBMISSION,
        || json!({}),
        |_| json!({"maxDelayedSend": 0, "submissionExtensions": {}}),
    ),
    (VACATION, || json!({}), |_| json!({})),
];

/// RFC 8621 §1.3.1: what an account of this server allows.
fn mail_account_capability(jmap: &Jmap) -> Value {
    json!({
        "maxMailboxesPerEmail": null,
        "maxMailboxDepth": null,
        "maxSizeMailboxName": 1000,
        "maxSizeAttachmentsPerEmail": jmap.ctx.config.max_size_upload,
        "emailQuerySortOptions": [
            "receivedAt", "size", "from", "to", "subject", "sentAt",
            "hasKeyword", "allInThreadHaveKeyword", "someInThreadHaveKeyword"
        ],
        "mayCreateTopLevelMailbox": true,
    })
}

/// What JMAP needs from the rest of the server.
pub struct Context {
    /// The mail store, shared with IMAP, POP3 and the webmail.
    pub store: Arc<dyn store::Store>,
    /// The one place passwords are checked.
    pub auth: Arc<store::Authenticator>,
    /// Settings from `[jmap]`.
    pub config: JmapConfig,
    /// The server's name, for URLs when a client sends no `Host`.
    pub hostname: String,
    /// Ends event streams when the server stops.
    pub shutdown: net::CancellationToken,
    /// Local domains, accounts and aliases: who may send as which
    /// address, and where a recipient's mail goes.
    pub directory: Arc<store::DirectoryWatch>,
    /// The content scan submitted mail passes (the one SMTP submission
    /// and the webmail apply), if scanning is on.
    pub scan: Option<ScanStored>,
    /// The hourly sending limits SMTP submission and the webmail count
    /// against, if any.
    pub send_limit: Option<SendLimit>,
    /// Push subscriptions' senders and the account notices of changes
    /// the mailboxes' do not carry, shared by every listener.
    pub push: PushHub,
}

/// Scans a stored blob: `Ok(None)` clean, `Ok(Some(why))` refused,
/// `Err` when it could not be scanned.
pub type ScanStored = Arc<
    dyn Fn(
            store::BlobId,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Option<String>, String>> + Send>,
        > + Send
        + Sync,
>;

/// Takes one message to `n` recipients from the account's hourly
/// allowance; `false` when it is spent.
pub type SendLimit = Arc<dyn Fn(store::AccountId, u32) -> bool + Send + Sync>;

/// The server: its context and what it keeps between requests.
pub(crate) struct Jmap {
    pub ctx: Arc<Context>,
    /// Served over TLS (else only loopback clients are let in).
    pub secure: bool,
    /// `maxConcurrentRequests`, per account.
    pub requests: limiter::Limiter,
    /// `maxConcurrentUpload`, per account.
    pub uploads: limiter::Limiter,
}

/// The JMAP routes for one listener, ready to merge beside the
/// webmail's; `secure` when the listener speaks TLS. Handlers extract
/// the client's address as `ConnectInfo<SocketAddr>`.
pub fn router(ctx: Arc<Context>, secure: bool) -> axum::Router {
    let jmap = Jmap {
        requests: limiter::Limiter::new(ctx.config.max_concurrent_requests),
        uploads: limiter::Limiter::new(ctx.config.max_concurrent_upload),
        ctx,
        secure,
    };
    pusher::resume(&jmap.ctx);
    http::router(Arc::new(jmap))
}

impl Jmap {
    /// The state of each data type the account has (§7.1 TypeState),
    /// for push.
    pub(crate) async fn type_states(
        &self,
        user: &auth::User,
    ) -> Result<Map<String, Value>, JmapError> {
        type_states(&self.ctx, user.account).await
    }

    /// Receivers that change when something in the account may have.
    pub(crate) async fn change_watches(
        &self,
        user: &auth::User,
    ) -> Result<Vec<tokio::sync::watch::Receiver<u64>>, JmapError> {
        change_watches(&self.ctx, user.account).await
    }
}

/// The state of each data type the account has (§7.1 TypeState): one for
/// Mailbox, Email and Thread (methods/state.rs), and those of the types
/// kept apart from the mailboxes.
pub(crate) async fn type_states(
    ctx: &Context,
    account: store::AccountId,
) -> Result<Map<String, Value>, JmapError> {
    let state = methods::state::state(ctx.store.account_modseq(account).await?);
    let mut states: Map<String, Value> = ["Mailbox", "Email", "Thread"]
        .iter()
        .map(|t| (t.to_string(), Value::from(state.clone())))
        .collect();
    for kind in ["Identity", "EmailSubmission"] {
        let records = ctx.store.account_records(account, kind).await?;
        let state = records.iter().map(|r| r.changed).max().unwrap_or(0);
        states.insert(kind.into(), methods::state::state(state).into());
    }
    states.insert(
        "VacationResponse".into(),
        methods::vacation::state_of(ctx.store.as_ref(), account)
            .await?
            .into(),
    );
    Ok(states)
}

/// Receivers that change when something in the account may have: the
/// change notices of each of its mailboxes, and the account's notice of
/// changes made here to what is not in a mailbox (identities,
/// submissions, vacation).
pub(crate) async fn change_watches(
    ctx: &Context,
    account: store::AccountId,
) -> Result<Vec<tokio::sync::watch::Receiver<u64>>, JmapError> {
    let mut watches: Vec<_> = ctx
        .store
        .list_mailboxes(account)
        .await?
        .iter()
        .map(|m| ctx.store.watch_mailbox(m.id))
        .collect();
    watches.push(ctx.push.watch(account));
    Ok(watches)
}

/// Seconds since the Unix epoch.
pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
