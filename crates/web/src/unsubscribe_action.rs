//! `POST /mail/{mailbox}/{uid}/unsubscribe`: leaving a list the message
//! came from, as its `List-Unsubscribe` field offers (see
//! [`crate::unsubscribe`]). The user confirms first (a page without
//! JavaScript, a dialog with it); then the server makes the one-click
//! POST (RFC 8058) and says how the list's server answered, or sends the
//! `mailto:` message (RFC 6068) through the account's own sending path
//! (scanned, counted against the hourly limit, a copy in Sent).

use std::sync::Arc;

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::html;
use serde::Deserialize;
use store::{Delivery, MailboxId, Uid, FLAG_DRAFT, FLAG_SEEN};

use crate::action_pages::{self, Confirm};
use crate::compose::{self, Draft};
use crate::error::WebError;
use crate::pages::{page, Chrome};
use crate::routes::{folder_list, mailboxes, open, App};
use crate::session::{self, User};
use crate::unsubscribe::{offer, Mailto, Offer};

#[derive(Deserialize)]
pub(crate) struct UnsubscribeForm {
    csrf: Option<String>,
    confirm: Option<String>,
}

/// `POST /mail/{mailbox}/{uid}/unsubscribe`.
pub(crate) async fn unsubscribe(
    State(app): State<Arc<App>>,
    user: User,
    headers: HeaderMap,
    Path((mailbox, uid)): Path<(MailboxId, Uid)>,
    Form(f): Form<UnsubscribeForm>,
) -> Result<Response, WebError> {
    session::check_same_origin(&headers)?;
    user.check_csrf(f.csrf.as_deref())?;
    let o = open(&app, &user, mailbox, uid).await?;
    let what = match offer(&o.data.header, app.ctx.authserv_id.as_deref()) {
        Some(Offer::OneClick(url)) => Offer::OneClick(url),
        Some(Offer::Mail(m)) => Offer::Mail(m),
        // An http page is only linked: nothing is posted to it.
        _ => {
            return Err(WebError::BadRequest(
                "this message offers no way to unsubscribe from here".into(),
            ))
        }
    };
    let boxes = mailboxes(&app, &user).await?;
    let folders = folder_list(&boxes);
    let chrome = Chrome {
        address: &user.address,
        admin: user.admin,
        csrf: &user.csrf,
        folders: &folders,
        current: Some(mailbox),
        view: "confirm",
        query: "",
        since: None,
    };
    let message = format!("/mail/{mailbox}/{uid}");
    if f.confirm.as_deref() != Some("1") {
        let question = match &what {
            Offer::OneClick(url) => format!(
                "Unsubscribe {} from this list? Sluice will post the request to {url}.",
                user.address
            ),
            Offer::Mail(m) => format!(
                "Unsubscribe from this list? Sluice will send a message from {} to {}.",
                user.address,
                m.to.join(", ")
            ),
            Offer::Link(_) => String::new(),
        };
        return Ok(action_pages::confirm(
            &chrome,
            &Confirm {
                title: "Unsubscribe",
                question,
                action: format!("{message}/unsubscribe"),
                fields: vec![("csrf".into(), user.csrf.clone())],
                button: "Unsubscribe",
                cancel: message,
            },
        )
        .into_response());
    }
    let outcome = match &what {
        Offer::OneClick(url) => app
            .ctx
            .one_click
            .post(url)
            .await
            .map(|()| format!("Unsubscribed: the list's server took the request ({url}).")),
        Offer::Mail(m) => send(&app, &user, &boxes, m)
            .await?
            .map(|()| format!("The unsubscribe message was sent to {}.", m.to.join(", "))),
        Offer::Link(_) => Ok(String::new()),
    };
    tracing::info!(account = %user.address, ok = outcome.is_ok(), "webmail unsubscribe");
    let (status, text, role) = match &outcome {
        Ok(done) => (StatusCode::OK, done.clone(), "status"),
        Err(why) => (
            StatusCode::BAD_GATEWAY,
            format!("Unsubscribing failed: {why}."),
            "alert",
        ),
    };
    Ok((
        status,
        page(
            &chrome,
            "Unsubscribe – Sluice",
            html! {
                h1 { "Unsubscribe" }
                p.notice.unsubscribe-result role=(role) { (text) }
                p { a href=(message) { "Back to the message" } }
            },
        ),
    )
        .into_response())
}

/// Sends the `mailto:` message as the account: written into Drafts as
/// compose writes a message, then sent from there.
async fn send(
    app: &App,
    user: &User,
    boxes: &[store::MailboxInfo],
    m: &Mailto,
) -> Result<Result<(), String>, WebError> {
    let drafts = crate::actions::special(boxes, "\\Drafts")
        .ok_or_else(|| WebError::BadRequest("there is no Drafts folder".into()))?;
    let draft = Draft {
        to: m.to.join(", "),
        subject: if m.subject.is_empty() {
            "unsubscribe".into()
        } else {
            m.subject.clone()
        },
        body: m.body.clone(),
        ..Draft::default()
    };
    let settings = app.ctx.store.web_settings(user.account).await?;
    let domain = user
        .address
        .rsplit_once('@')
        .map_or("localhost", |(_, d)| d);
    let message_id = format!("{}@{domain}", session::new_token());
    let boundary = format!("=_{}", &session::new_token()[..24]);
    let mut text = compose::head(
        &draft,
        &settings.display_name,
        &user.address,
        &message_id,
        &boundary,
        false,
    )?;
    text.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let mut writer = app.ctx.store.message_writer();
    if let Err(e) = writer.write(&text).await {
        writer.abort().await;
        return Err(e.into());
    }
    let receipt = writer
        .deliver(Delivery {
            sender: user.address.clone(),
            mailboxes: vec![drafts],
            flags: FLAG_DRAFT | FLAG_SEEN,
            ..Default::default()
        })
        .await?;
    let uid = receipt
        .entries
        .first()
        .map(|e| e.1)
        .ok_or(WebError::NotFound)?;
    match crate::outgoing::send(&app.ctx, user, drafts, uid, &m.to).await {
        Ok(_) => Ok(Ok(())),
        // Not sent: the message stays in Drafts, and the page says why.
        Err(WebError::BadRequest(why) | WebError::TooMany(why) | WebError::Refused(why)) => {
            Ok(Err(why))
        }
        Err(e) => Err(e),
    }
}
