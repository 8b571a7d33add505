//! The settings page (display name, signature, page size, senders whose
//! remote content is shown, the account's JMAP bearer tokens) and the
//! address suggestions of the compose
//! form, taken from the user's past correspondents.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{Form, State};
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Redirect, Response};
use store::{MailboxId, Store, Uid};

use crate::error::WebError;
use crate::pages::{self, Chrome};
use crate::routes::{self, App};
use crate::session::{self, User};

/// Messages looked at per mailbox for address suggestions (the newest).
const RECENT: usize = 500;
/// Suggestions offered at most.
const MAX_SUGGESTIONS: usize = 300;

/// `GET /settings`.
pub(crate) async fn page(
    State(app): State<Arc<App>>,
    user: User,
) -> Result<Html<String>, WebError> {
    render(&app, &user, None).await
}

/// The settings page, with a token just created shown once.
async fn render(
    app: &App,
    user: &User,
    created: Option<(&str, &str)>,
) -> Result<Html<String>, WebError> {
    let settings = app.ctx.store.web_settings(user.account).await?;
    let tokens = store::api_tokens(&*app.ctx.store, user.account).await?;
    let boxes = routes::mailboxes(app, user).await?;
    let folders = routes::folder_list(&boxes);
    let chrome = Chrome {
        address: &user.address,
        admin: user.admin,
        csrf: &user.csrf,
        folders: &folders,
        current: None,
        view: "settings",
        query: "",
        since: None,
    };
    Ok(pages::settings(&chrome, &settings, &tokens, created))
}

/// `POST /settings/tokens`: `name` creates a token, shown in the answer
/// once (only its hash is kept); `revoke` revokes the token of that id.
pub(crate) async fn tokens(
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
    let store = &*app.ctx.store;
    if let Some(id) = field("revoke") {
        if !store::revoke_api_token(store, user.account, id).await? {
            return Err(WebError::NotFound);
        }
        return Ok(Redirect::to("/settings#tokens").into_response());
    }
    let name = field("name").unwrap_or("");
    let (token, _) = match store::create_api_token(store, user.account, name).await {
        Ok(made) => made,
        Err(store::StoreError::Invalid(why)) => return Err(WebError::BadRequest(why)),
        Err(e) => return Err(e.into()),
    };
    let name = name.trim();
    Ok(render(&app, &user, Some((name, &token)))
        .await?
        .into_response())
}

/// `POST /settings`.
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
    let mut settings = app.ctx.store.web_settings(user.account).await?;
    settings.display_name = field("display_name")
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    // Signatures are set per identity (/settings/signatures); one posted
    // here is the own address's, and seeds identities made later.
    if let Some(signature) = field("signature") {
        settings.signature = signature.chars().take(4000).collect();
        crate::identities::set_signature_of(&app, &user, &user.address, &settings.signature)
            .await?;
    }
    settings.page_size = field("page_size")
        .and_then(|p| p.trim().parse().ok())
        .filter(|n| (1..=500).contains(n))
        .ok_or_else(|| {
            WebError::BadRequest("the page size must be a number from 1 to 500".into())
        })?;
    let forget: Vec<&str> = fields
        .iter()
        .filter(|(k, _)| k == "forget")
        .map(|(_, v)| v.as_str())
        .collect();
    settings.remote_ok.retain(|s| !forget.contains(&s.as_str()));
    app.ctx
        .store
        .set_web_settings(user.account, &settings)
        .await?;
    Ok(Redirect::to("/settings").into_response())
}

/// The addresses in a `Name <addr>, ...` column.
fn addresses(column: &str) -> impl Iterator<Item = String> + '_ {
    column.split(", ").filter_map(|item| {
        let addr = match item.rsplit_once('<') {
            Some((_, a)) => a.trim_end_matches('>'),
            None => item,
        };
        store::normalize_address(addr)
    })
}

async fn newest(store: &dyn Store, mailbox: MailboxId) -> Result<Vec<Uid>, WebError> {
    let mut uids: Vec<Uid> = store
        .list_messages(mailbox)
        .await?
        .into_iter()
        .map(|e| e.uid)
        .collect();
    let keep = uids.len().saturating_sub(RECENT);
    Ok(uids.split_off(keep))
}

/// Past correspondents: who the user wrote to (Sent: To, Cc) and who
/// wrote to the user (INBOX: From), from the indexed header columns.
pub(crate) async fn correspondents(app: &App, user: &User) -> Result<Vec<String>, WebError> {
    let store = &*app.ctx.store;
    let boxes = store.list_mailboxes(user.account).await?;
    let mut seen = BTreeSet::new();
    let me = user.address.to_ascii_lowercase();
    for b in &boxes {
        let sent = b
            .special_use
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("\\Sent"));
        if !sent && b.name != "INBOX" {
            continue;
        }
        let uids = newest(store, b.id).await?;
        for d in store.message_data(b.id, &uids).await? {
            let cols = if sent {
                vec![d.headers.to, d.headers.cc]
            } else {
                vec![d.headers.from]
            };
            for c in &cols {
                seen.extend(addresses(c).filter(|a| *a != me));
            }
        }
    }
    Ok(seen.into_iter().take(MAX_SUGGESTIONS).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_come_out_of_columns() {
        let got: Vec<String> =
            addresses("Bob <Bob@Example.org>, carol@example.net, Nobody").collect();
        assert_eq!(got, ["bob@example.org", "carol@example.net"]);
    }
}
