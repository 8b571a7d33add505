//! The folders page (`/folders`): create, rename, delete, subscribe and
//! unsubscribe (RFC 3501 §6.3.3–§6.3.7 semantics, through the same store
//! calls IMAP uses). Special-use folders and INBOX are kept as they are.

use std::sync::Arc;

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use store::StoreError;

use crate::action_pages::{self, Confirm, FolderRow};
use crate::error::WebError;
use crate::pages::{urlencode, Chrome};
use crate::routes::{folder_list, mailboxes, App};
use crate::session::{self, User};

#[derive(Deserialize)]
pub(crate) struct FoldersQuery {
    /// What was just done, shown once.
    done: Option<String>,
}

async fn render(
    app: &App,
    user: &User,
    notice: Option<&str>,
    error: Option<&str>,
) -> Result<Html<String>, WebError> {
    let boxes = mailboxes(app, user).await?;
    let rows: Vec<FolderRow> = boxes
        .iter()
        .map(|b| FolderRow {
            name: b.name.clone(),
            messages: b.messages,
            unseen: b.unseen,
            subscribed: b.subscribed,
            special: b.name == "INBOX" || b.special_use.is_some(),
        })
        .collect();
    let folders = folder_list(&boxes);
    let chrome = Chrome {
        address: &user.address,
        admin: user.admin,
        csrf: &user.csrf,
        folders: &folders,
        current: None,
        view: "folders",
        query: "",
        since: None,
    };
    Ok(action_pages::folders(&chrome, &rows, notice, error))
}

/// `GET /folders`.
pub(crate) async fn page(
    State(app): State<Arc<App>>,
    user: User,
    Query(q): Query<FoldersQuery>,
) -> Result<Html<String>, WebError> {
    let notice = q.done.as_deref().map(|d| match d {
        "create" => "Folder created.",
        "rename" => "Folder renamed.",
        "delete" => "Folder deleted.",
        "subscribe" => "Subscribed.",
        "unsubscribe" => "Unsubscribed.",
        _ => "Done.",
    });
    render(&app, &user, notice, None).await
}

#[derive(Deserialize)]
pub(crate) struct FolderForm {
    csrf: Option<String>,
    op: String,
    name: String,
    to: Option<String>,
    confirm: Option<String>,
}

/// `POST /folders`: one change, then back to the page; a change the store
/// refuses shows the page again with why.
pub(crate) async fn act(
    State(app): State<Arc<App>>,
    user: User,
    headers: HeaderMap,
    Form(f): Form<FolderForm>,
) -> Result<Response, WebError> {
    session::check_same_origin(&headers)?;
    user.check_csrf(f.csrf.as_deref())?;
    let store = &app.ctx.store;
    let name = f.name.trim();
    let boxes = mailboxes(&app, &user).await?;
    let existing = boxes.iter().find(|b| b.name == name);
    let protected = existing.is_some_and(|b| b.name == "INBOX" || b.special_use.is_some());
    let result = match f.op.as_str() {
        "create" => store
            .create_mailbox(user.account, name, None)
            .await
            .map(drop),
        "rename" | "delete" if protected => {
            return refuse(&app, &user, "INBOX and the special folders are kept.").await
        }
        "rename" => {
            let to = f.to.as_deref().unwrap_or("").trim();
            if to == name {
                return Ok(Redirect::to("/folders").into_response());
            }
            store.rename_mailbox(user.account, name, to).await
        }
        "delete" => {
            if f.confirm.as_deref() != Some("1") {
                let folders = folder_list(&boxes);
                let chrome = Chrome {
                    address: &user.address,
                    admin: user.admin,
                    csrf: &user.csrf,
                    folders: &folders,
                    current: None,
                    view: "confirm",
                    query: "",
                    since: None,
                };
                let count = existing.map_or(0, |b| b.messages);
                return Ok(action_pages::confirm(
                    &chrome,
                    &Confirm {
                        title: "Delete folder",
                        question: format!(
                            "Delete the folder {name} and its {count} messages for good?"
                        ),
                        action: "/folders".into(),
                        fields: vec![
                            ("csrf".into(), user.csrf.clone()),
                            ("op".into(), "delete".into()),
                            ("name".into(), name.to_string()),
                        ],
                        button: "Delete folder",
                        cancel: "/folders".into(),
                    },
                )
                .into_response());
            }
            store.delete_mailbox(user.account, name).await
        }
        "subscribe" => store.set_subscribed(user.account, name, true).await,
        "unsubscribe" => store.set_subscribed(user.account, name, false).await,
        _ => return Err(WebError::BadRequest("unknown folder operation".into())),
    };
    match result {
        Ok(()) => Ok(Redirect::to(&format!("/folders?done={}", urlencode(&f.op))).into_response()),
        Err(StoreError::Exists(_)) => refuse(&app, &user, "A folder of that name exists.").await,
        Err(StoreError::NotFound(_)) => refuse(&app, &user, "There is no such folder.").await,
        Err(StoreError::Invalid(why)) => {
            refuse(&app, &user, &format!("That cannot be done: {why}.")).await
        }
        Err(e) => Err(e.into()),
    }
}

async fn refuse(app: &App, user: &User, why: &str) -> Result<Response, WebError> {
    Ok((
        StatusCode::UNPROCESSABLE_ENTITY,
        render(app, user, None, Some(why)).await?,
    )
        .into_response())
}
