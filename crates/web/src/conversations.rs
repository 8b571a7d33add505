//! The list as conversations: one row per thread instead of one per
//! message, switched on and off per user (`POST /mail/{mailbox}/view`,
//! kept as an account record, so it follows the user to any browser).
//!
//! Threads are the ones the store files each message in when it first
//! comes to the account, the same JMAP's Thread/get answers
//! ([`store::Store::account_emails`]). A row shows the folder's messages
//! of one thread: how many, the newest date, unread if any is, the
//! subject and the senders; it opens the newest, whose page shows the
//! whole conversation ([`crate::thread`]).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Form, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use store::{AccountId, BlobId, MailboxId, Uid, FLAG_FLAGGED, FLAG_SEEN};

use crate::error::WebError;
use crate::routes::{display_date, mailboxes, owned, sender_name, App};
use crate::session::{self, User};

/// The record kind the choice is kept under, and its one id.
const KIND: &str = "WebListView";
const ID: &str = "view";
/// Senders named on a row at most.
const MAX_SENDERS: usize = 3;

/// One thread's row.
pub(crate) struct ThreadRow {
    /// The newest of its messages in the folder: the row opens it.
    pub uid: Uid,
    pub count: usize,
    /// The newest message's internal date, to sort by, and as shown.
    pub when: i64,
    pub date: String,
    pub unread: bool,
    pub flagged: bool,
    pub subject: String,
    /// Its senders' names, newest first.
    pub senders: String,
}

/// Whether the user lists conversations.
pub(crate) async fn threaded(app: &App, account: AccountId) -> Result<bool, WebError> {
    Ok(app
        .ctx
        .store
        .account_records(account, KIND)
        .await?
        .iter()
        .any(|r| r.id == ID && r.body.as_deref() == Some("threads")))
}

#[derive(Deserialize)]
pub(crate) struct ViewForm {
    csrf: Option<String>,
    view: String,
}

/// `POST /mail/{mailbox}/view`: `view=threads` or `view=messages`.
pub(crate) async fn set_view(
    State(app): State<Arc<App>>,
    user: User,
    headers: HeaderMap,
    Path(mailbox): Path<MailboxId>,
    Form(f): Form<ViewForm>,
) -> Result<Response, WebError> {
    session::check_same_origin(&headers)?;
    user.check_csrf(f.csrf.as_deref())?;
    if !matches!(f.view.as_str(), "threads" | "messages") {
        return Err(WebError::BadRequest("show threads or messages?".into()));
    }
    let boxes = mailboxes(&app, &user).await?;
    owned(&boxes, mailbox)?;
    app.ctx
        .store
        .put_account_record(user.account, KIND, Some(ID), Some(&f.view))
        .await?;
    Ok(Redirect::to(&format!("/mail/{mailbox}")).into_response())
}

/// The folder's threads, newest first.
pub(crate) async fn threads(
    app: &App,
    account: AccountId,
    mailbox: MailboxId,
) -> Result<Vec<ThreadRow>, WebError> {
    let store = &app.ctx.store;
    let entries = store.list_messages(mailbox).await?;
    let blobs: Vec<BlobId> = entries.iter().map(|e| e.blob).collect();
    let emails = store.account_emails(account, Some(&blobs)).await?;
    let by_blob: HashMap<BlobId, &store::AccountEmail> =
        emails.iter().map(|e| (e.blob, e)).collect();
    let mut threads: HashMap<i64, Vec<&store::MessageEntry>> = HashMap::new();
    for e in &entries {
        // A message the store keeps no thread for is one of its own.
        let thread = by_blob
            .get(&e.blob)
            .map_or(-(e.uid as i64) - 1, |m| m.thread);
        threads.entry(thread).or_default().push(e);
    }
    let mut rows: Vec<ThreadRow> = threads
        .into_values()
        .map(|mut messages| {
            messages.sort_by_key(|e| std::cmp::Reverse((e.internal_date, e.uid)));
            let newest = messages[0];
            let headers = |e: &store::MessageEntry| by_blob.get(&e.blob).map(|m| &m.headers);
            let mut senders: Vec<String> = Vec::new();
            for e in &messages {
                if let Some(h) = headers(e) {
                    let name = sender_name(&h.from);
                    if !name.is_empty() && !senders.contains(&name) {
                        senders.push(name);
                    }
                }
            }
            let more = senders.len() > MAX_SENDERS;
            senders.truncate(MAX_SENDERS);
            ThreadRow {
                uid: newest.uid,
                count: messages.len(),
                when: newest.internal_date,
                date: display_date(newest.internal_date),
                unread: messages.iter().any(|e| e.flags & FLAG_SEEN == 0),
                flagged: messages.iter().any(|e| e.flags & FLAG_FLAGGED != 0),
                subject: headers(newest)
                    .map(|h| h.subject.clone())
                    .unwrap_or_default(),
                senders: senders.join(", ") + if more { ", …" } else { "" },
            }
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse((r.when, r.uid)));
    Ok(rows)
}
