//! The addresses the account sends as, each with a signature: the same
//! Identity records JMAP keeps (RFC 8621 §6, `textSignature` and
//! `htmlSignature`) in the store's per-account records, so a signature
//! set here shows in JMAP's Identity/get and the other way round. The
//! page `/settings/signatures` sets them; compose offers each identity
//! as a From and puts its signature below the text, after the `-- `
//! separator line (RFC 3676 §4.3).

use std::sync::Arc;

use axum::extract::{Form, State};
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::html;
use serde_json::{Map, Value};

use crate::error::WebError;
use crate::pages;
use crate::routes::{self, App};
use crate::session::{self, User};

/// The body's field JMAP keeps the change number of a record's creation
/// in (its order); kept as it is when the webmail rewrites the record.
const CREATED: &str = "_created";
/// Longest signature kept, in characters.
const MAX_SIGNATURE: usize = 4000;

/// One identity, as the webmail uses it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Identity {
    /// The record's id in the store.
    pub id: String,
    /// The address it sends as.
    pub email: String,
    /// Its display name ("" for the account's display name).
    pub name: String,
    /// Its plain text signature.
    pub text_signature: String,
    /// The record's object as stored, written back with changes only.
    object: Map<String, Value>,
    /// The change number it was created at (its order).
    created: u64,
}

/// Whether the account may send as `address`: an address that delivers
/// to the account's INBOX (its own, a `+tag` of it, an alias), the rule
/// SMTP submission and JMAP apply.
pub(crate) fn may_send_as(app: &App, user: &User, address: &str) -> bool {
    let directory = app.ctx.directory.get();
    let Some(entry) = directory.account(&user.address) else {
        return false;
    };
    match directory.resolve(address) {
        store::Resolution::Deliver { mailboxes, .. } => mailboxes.contains(&entry.inbox),
        _ => false,
    }
}

/// The account's identities, oldest first, after making those of its
/// addresses that never had one (as JMAP does on first use: the display
/// name and the webmail's signature). Only those the account may still
/// send as are answered.
pub(crate) async fn load(app: &App, user: &User) -> Result<Vec<Identity>, WebError> {
    let store = &*app.ctx.store;
    let mut records = store
        .account_records(user.account, store::IDENTITY_KIND)
        .await?;
    let addresses = {
        let directory = app.ctx.directory.get();
        directory
            .account(&user.address)
            .map(|e| directory.addresses_of(e))
            .unwrap_or_default()
    };
    let missing: Vec<&String> = addresses
        .iter()
        .filter(|a| {
            let id = store::identity_record_id(a);
            !records.iter().any(|r| r.id == id)
        })
        .collect();
    if !missing.is_empty() {
        let settings = store.web_settings(user.account).await?;
        for address in missing {
            let body = serde_json::json!({
                "name": settings.display_name,
                "email": address,
                "replyTo": null,
                "bcc": null,
                "textSignature": settings.signature,
                "htmlSignature": "",
            });
            store
                .put_account_record(
                    user.account,
                    store::IDENTITY_KIND,
                    Some(&store::identity_record_id(address)),
                    Some(&body.to_string()),
                )
                .await?;
        }
        records = store
            .account_records(user.account, store::IDENTITY_KIND)
            .await?;
    }
    let text = |o: &Map<String, Value>, k: &str| {
        o.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut out: Vec<Identity> = records
        .into_iter()
        .filter_map(|r| {
            let Ok(Value::Object(object)) = serde_json::from_str(r.body.as_deref()?) else {
                return None;
            };
            Some(Identity {
                id: r.id,
                email: text(&object, "email"),
                name: text(&object, "name"),
                text_signature: text(&object, "textSignature"),
                created: object
                    .get(CREATED)
                    .and_then(Value::as_u64)
                    .unwrap_or(r.changed),
                object,
            })
        })
        .filter(|i| may_send_as(app, user, &i.email))
        .collect();
    // The account's own address first, then in the order they were made.
    let me = user.address.to_ascii_lowercase();
    out.sort_by_key(|i| (i.email.to_ascii_lowercase() != me, i.created));
    Ok(out)
}

/// The text below a message for `signature`: the `-- ` line (RFC 3676
/// §4.3) and the signature, or nothing.
pub(crate) fn signature_block(signature: &str) -> String {
    let s = signature.replace("\r\n", "\n");
    let s = s.trim_end();
    if s.is_empty() {
        String::new()
    } else {
        format!("\n\n-- \n{s}")
    }
}

/// Sets an identity's plain text signature, keeping the rest of the
/// record (and its order) as JMAP wrote it. The HTML signature is
/// cleared when the text one changes, so that the two never disagree.
async fn set_signature(app: &App, user: &User, i: &Identity, text: &str) -> Result<(), WebError> {
    let mut body = i.object.clone();
    body.insert(CREATED.into(), i.created.into());
    let old = body.insert("textSignature".into(), text.into());
    if old.as_ref().and_then(Value::as_str) != Some(text) {
        body.insert("htmlSignature".into(), "".into());
    }
    app.ctx
        .store
        .put_account_record(
            user.account,
            store::IDENTITY_KIND,
            Some(&i.id),
            Some(&Value::Object(body).to_string()),
        )
        .await?;
    Ok(())
}

/// Sets the plain text signature of the identity of `address`, if the
/// account has one (the Settings form's single signature is the one of
/// the account's own address).
pub(crate) async fn set_signature_of(
    app: &App,
    user: &User,
    address: &str,
    text: &str,
) -> Result<(), WebError> {
    for i in load(app, user).await? {
        if i.email.eq_ignore_ascii_case(address) && i.text_signature != text {
            set_signature(app, user, &i, text).await?;
        }
    }
    Ok(())
}

/// `GET /settings/signatures`: a signature per sending address.
pub(crate) async fn page(
    State(app): State<Arc<App>>,
    user: User,
) -> Result<Html<String>, WebError> {
    let identities = load(&app, &user).await?;
    let boxes = routes::mailboxes(&app, &user).await?;
    let folders = routes::folder_list(&boxes);
    let chrome = pages::Chrome {
        address: &user.address,
        admin: user.admin,
        csrf: &user.csrf,
        folders: &folders,
        current: None,
        view: "settings",
        query: "",
        since: None,
    };
    Ok(pages::page(
        &chrome,
        "Signatures – Sluice",
        html! {
            h1 { "Signatures" }
            p.muted { "Put below what you write from each address, after a “-- ” line." }
            form.compose method="post" action="/settings/signatures" {
                input type="hidden" name="csrf" value=(user.csrf);
                @for i in &identities {
                    label {
                        "Signature for " (i.email)
                        textarea name={"sig-" (i.id)} rows="4" { (i.text_signature) }
                    }
                }
                div.actions { button { "Save" } }
            }
            p { a href="/settings" { "Back to Settings" } }
        },
    ))
}

/// `POST /settings/signatures`.
pub(crate) async fn save(
    State(app): State<Arc<App>>,
    user: User,
    headers: HeaderMap,
    Form(fields): Form<Vec<(String, String)>>,
) -> Result<Response, WebError> {
    session::check_same_origin(&headers)?;
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    user.check_csrf(field("csrf"))?;
    for i in load(&app, &user).await? {
        let Some(text) = field(&format!("sig-{}", i.id)) else {
            continue;
        };
        if text.chars().count() > MAX_SIGNATURE {
            return Err(WebError::BadRequest(format!(
                "the signature for {} is longer than {MAX_SIGNATURE} characters",
                i.email
            )));
        }
        let text = text.replace("\r\n", "\n");
        if text != i.text_signature {
            set_signature(&app, &user, &i, &text).await?;
        }
    }
    Ok(Redirect::to("/settings/signatures").into_response())
}

/// The compose form's From: a choice when the account has more than one
/// identity, each option carrying its signature block for the script to
/// swap; nothing otherwise (the account's own address is used).
pub(crate) fn from_field(from: &str, identities: &[(String, String)]) -> maud::Markup {
    html! {
        @if identities.len() > 1 {
            label for="from" { "From" }
            select #from name="from" {
                @for (email, signature) in identities {
                    option value=(email) data-signature=(signature) selected[email.eq_ignore_ascii_case(from)] { (email) }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_goes_after_the_separator_line() {
        assert_eq!(signature_block(""), "");
        assert_eq!(signature_block("  \r\n"), "");
        assert_eq!(signature_block("Ann\r\nSales\r\n"), "\n\n-- \nAnn\nSales");
    }
}
