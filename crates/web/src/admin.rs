//! The admin pages: the common directory tasks of the `sluice` command line
//! in the browser, for the accounts named in `[web] admins`.
//!
//! `GET /admin` (metrics at a glance), `GET|POST /admin/domains` (add),
//! `GET|POST /admin/users` (add, password, quota), `GET|POST
//! /admin/aliases` (add, remove), `GET|POST /admin/queue` (retry, remove),
//! `GET /admin/dkim` (the TXT records to publish), `GET /admin/logs`
//! (recent log lines, `?filter=` for one transaction or connection).
//!
//! Every change goes through the same store calls as the command line, so
//! the store's checks (address syntax, unknown domain, duplicates) apply
//! alike; a refused change re-shows the page with the reason and changes
//! nothing. The same rules as the mail pages hold: session cookie, CSRF
//! token and same-origin check on every POST, everything escaped.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;
use store::StoreError;

use crate::admin_pages::{self, Section, UserRow};
use crate::error::WebError;
use crate::routes::App;
use crate::session::{self, User};

/// A logged-in user named in `[web] admins`; anyone else gets 403.
pub(crate) struct Admin(pub User);

impl FromRequestParts<Arc<App>> for Admin {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Admin, Response> {
        let user = User::from_request_parts(parts, app).await?;
        if !user.admin {
            return Err(WebError::Forbidden("this page is for administrators").into_response());
        }
        Ok(Admin(user))
    }
}

type Fields = Vec<(String, String)>;

fn field<'a>(fields: &'a Fields, name: &str) -> &'a str {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

/// Checks a POST (same origin, CSRF token) before anything else is read.
fn check_post(user: &User, headers: &HeaderMap, fields: &Fields) -> Result<(), WebError> {
    session::check_same_origin(headers)?;
    user.check_csrf(
        fields
            .iter()
            .find(|(k, _)| k == "csrf")
            .map(|(_, v)| v.as_str()),
    )
}

/// The outcome of a change: done (back to the page), or refused with a
/// reason shown on the page.
enum Outcome {
    Done,
    Refused(StatusCode, String),
}

/// Store errors that are the input's fault become a reason on the page;
/// the rest are server errors.
fn refused(e: StoreError) -> Result<Outcome, WebError> {
    let status = match &e {
        StoreError::Invalid(_) => StatusCode::BAD_REQUEST,
        StoreError::NotFound(_) => StatusCode::NOT_FOUND,
        StoreError::Exists(_) | StoreError::InUse(_) => StatusCode::CONFLICT,
        _ => return Err(WebError::Store(e)),
    };
    Ok(Outcome::Refused(status, e.to_string()))
}

fn outcome(result: Result<(), StoreError>) -> Result<Outcome, WebError> {
    match result {
        Ok(()) => Ok(Outcome::Done),
        Err(e) => refused(e),
    }
}

/// After a change: the directory snapshot is reloaded so logins and
/// deliveries see it at once, then the page is shown again (or with the
/// reason it was refused).
async fn finish(
    app: &App,
    admin: &User,
    section: Section,
    action: &str,
    result: Outcome,
) -> Result<Response, WebError> {
    match result {
        Outcome::Done => {
            app.ctx.directory.refresh(&*app.ctx.store).await?;
            tracing::info!(admin = %admin.address, page = section.path(), action, "admin change");
            Ok(Redirect::to(section.path()).into_response())
        }
        Outcome::Refused(status, why) => {
            let page = render(app, admin, section, Some(&why)).await?;
            Ok((status, page).into_response())
        }
    }
}

async fn render(
    app: &App,
    admin: &User,
    section: Section,
    notice: Option<&str>,
) -> Result<Html<String>, WebError> {
    let store = &*app.ctx.store;
    let content = match section {
        Section::Overview => admin_pages::overview(&metrics::get().at_a_glance()),
        Section::Domains => admin_pages::domains(&admin.csrf, &store.list_domains().await?),
        Section::Users => {
            let directory = app.ctx.directory.get();
            let mut rows = Vec::new();
            for address in store.list_accounts().await? {
                let quota = match directory.account(&address) {
                    Some(a) => Some(store.quota(a.id).await?),
                    None => None,
                };
                rows.push(UserRow { address, quota });
            }
            admin_pages::users(&admin.csrf, &rows)
        }
        Section::Aliases => admin_pages::aliases(&admin.csrf, &store.list_aliases().await?),
        Section::Queue => admin_pages::queue(&admin.csrf, &store.queued().await?),
        Section::Dkim => {
            let records: Vec<(store::DkimKey, String)> = store
                .dkim_keys()
                .await?
                .into_iter()
                .map(|k| {
                    let txt = sluice_outbound::dkim::txt_record(&k);
                    (k, txt)
                })
                .collect();
            admin_pages::dkim(&records)
        }
        Section::Logs => log_view(app, ""),
    };
    Ok(admin_pages::layout(admin, section, notice, content))
}

/// `GET /admin`.
pub(crate) async fn overview(
    State(app): State<Arc<App>>,
    Admin(user): Admin,
) -> Result<Html<String>, WebError> {
    render(&app, &user, Section::Overview, None).await
}

/// `GET /admin/domains`.
pub(crate) async fn domains(
    State(app): State<Arc<App>>,
    Admin(user): Admin,
) -> Result<Html<String>, WebError> {
    render(&app, &user, Section::Domains, None).await
}

/// `POST /admin/domains`: `action=add`, `name`.
pub(crate) async fn domains_act(
    State(app): State<Arc<App>>,
    Admin(user): Admin,
    headers: HeaderMap,
    Form(f): Form<Fields>,
) -> Result<Response, WebError> {
    check_post(&user, &headers, &f)?;
    let action = field(&f, "action");
    let result = match action {
        "add" => outcome(app.ctx.store.add_domain(field(&f, "name").trim()).await)?,
        _ => return Err(WebError::BadRequest("unknown action".into())),
    };
    finish(&app, &user, Section::Domains, action, result).await
}

/// `GET /admin/users`.
pub(crate) async fn users(
    State(app): State<Arc<App>>,
    Admin(user): Admin,
) -> Result<Html<String>, WebError> {
    render(&app, &user, Section::Users, None).await
}

/// `POST /admin/users`: `action=add|password` with `address` and
/// `password`, `action=quota` with `address` and `limit` (`500M`, `none`).
pub(crate) async fn users_act(
    State(app): State<Arc<App>>,
    Admin(user): Admin,
    headers: HeaderMap,
    Form(f): Form<Fields>,
) -> Result<Response, WebError> {
    check_post(&user, &headers, &f)?;
    let store = &app.ctx.store;
    let action = field(&f, "action");
    let address = field(&f, "address").trim();
    let password = field(&f, "password");
    let result = match action {
        "add" | "password" if password.is_empty() => {
            Outcome::Refused(StatusCode::BAD_REQUEST, "the password is empty".to_string())
        }
        "add" => outcome(store.add_account(address, password).await.map(|_| ()))?,
        "password" => outcome(store.set_password(address, password).await)?,
        "quota" => match store::parse_quota_limit(field(&f, "limit")) {
            Ok(limit) => outcome(store.set_quota(address, limit).await)?,
            Err(e) => refused(e)?,
        },
        _ => return Err(WebError::BadRequest("unknown action".into())),
    };
    finish(&app, &user, Section::Users, action, result).await
}

/// `GET /admin/aliases`.
pub(crate) async fn aliases(
    State(app): State<Arc<App>>,
    Admin(user): Admin,
) -> Result<Html<String>, WebError> {
    render(&app, &user, Section::Aliases, None).await
}

/// `POST /admin/aliases`: `action=add` with `address` and `targets`
/// (separated by commas or spaces), `action=remove` with `address` and
/// an optional `target` (without: the whole alias).
pub(crate) async fn aliases_act(
    State(app): State<Arc<App>>,
    Admin(user): Admin,
    headers: HeaderMap,
    Form(f): Form<Fields>,
) -> Result<Response, WebError> {
    check_post(&user, &headers, &f)?;
    let store = &app.ctx.store;
    let action = field(&f, "action");
    let address = field(&f, "address").trim();
    let result = match action {
        "add" => {
            let targets: Vec<String> = field(&f, "targets")
                .split([',', ' ', '\n', '\r', '\t'])
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect();
            if targets.is_empty() {
                Outcome::Refused(
                    StatusCode::BAD_REQUEST,
                    "name at least one target".to_string(),
                )
            } else {
                outcome(store.add_alias(address, &targets).await)?
            }
        }
        "remove" => {
            let target = Some(field(&f, "target").trim()).filter(|t| !t.is_empty());
            outcome(store.remove_alias(address, target).await)?
        }
        _ => return Err(WebError::BadRequest("unknown action".into())),
    };
    finish(&app, &user, Section::Aliases, action, result).await
}

/// `GET /admin/queue`.
pub(crate) async fn queue(
    State(app): State<Arc<App>>,
    Admin(user): Admin,
) -> Result<Html<String>, WebError> {
    render(&app, &user, Section::Queue, None).await
}

/// `POST /admin/queue`: `action=retry|remove` with a queue row's `id`.
pub(crate) async fn queue_act(
    State(app): State<Arc<App>>,
    Admin(user): Admin,
    headers: HeaderMap,
    Form(f): Form<Fields>,
) -> Result<Response, WebError> {
    check_post(&user, &headers, &f)?;
    let store = &app.ctx.store;
    let action = field(&f, "action");
    let id: i64 = field(&f, "id")
        .trim()
        .parse()
        .map_err(|_| WebError::BadRequest("not a queue id".into()))?;
    let result = match action {
        "retry" => match store.retry_queue(Some(id), crate::routes::now()).await {
            Ok(_) => Outcome::Done,
            Err(e) => refused(e)?,
        },
        "remove" => outcome(store.remove_queued(id).await)?,
        _ => return Err(WebError::BadRequest("unknown action".into())),
    };
    finish(&app, &user, Section::Queue, action, result).await
}

/// Log lines shown at most.
const MAX_LOG_LINES: usize = 500;

#[derive(Deserialize)]
pub(crate) struct LogQuery {
    filter: Option<String>,
}

/// `GET /admin/logs?filter=`.
pub(crate) async fn logs(
    State(app): State<Arc<App>>,
    Admin(user): Admin,
    Query(q): Query<LogQuery>,
) -> Html<String> {
    let filter = q.filter.unwrap_or_default();
    let content = log_view(&app, filter.trim());
    admin_pages::layout(&user, Section::Logs, None, content)
}

fn log_view(app: &App, filter: &str) -> maud::Markup {
    let lines = app
        .ctx
        .logs
        .as_ref()
        .map(|ring| ring.matching(filter, MAX_LOG_LINES));
    admin_pages::logs(filter, lines.as_deref())
}

/// `GET /admin/dkim`.
pub(crate) async fn dkim(
    State(app): State<Arc<App>>,
    Admin(user): Admin,
) -> Result<Html<String>, WebError> {
    render(&app, &user, Section::Dkim, None).await
}
