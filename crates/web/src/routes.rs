//! The URL space and the handlers behind it.
//!
//! `/login`, `/logout`; `/mail/{mailbox}` (a page, `?page=`, `?q=` to
//! search; `POST .../view` lists messages or conversations, see
//! [`crate::conversations`]); `/mail/{mailbox}/{uid}` (read; `?remote=1` shows remote
//! images), `/frame` (the sanitised HTML, for the sandboxed frame),
//! `/part/{n}` (an attachment), `/cid/{id}` (an inline image), `/source`;
//! `/inline/...` (an inline image by signed link, for the frame: see
//! [`crate::inline`]);
//! `POST /mail/{mailbox}/act` (flags, moves, Spam, delete, on a
//! selection; see [`crate::actions`]); `POST .../trust` (always show
//! remote content from the sender); `POST .../unsubscribe` (leave the
//! message's list, see [`crate::unsubscribe_action`]); `/events/{mailbox}` (Server-Sent
//! Events); `/search` (all folders, see [`crate::search`]); `/folders`
//! (see [`crate::folders`]); `/settings`,
//! `/settings/filters/...` (the Filters pages, see [`crate::filters`]);
//! `/admin/...` (for `[web] admins`, see [`crate::admin`]); `/static/...`;
//! the set-up documents mail clients fetch (see [`crate::autoconfig`]);
//! the local domains' MTA-STS policy (see [`crate::mta_sts`]).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, DefaultBodyLimit, Form, Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use store::{
    AuthFailure, FlagChange, MailboxId, MailboxInfo, MessageData, SearchKey, Uid, WebSession,
    FLAG_FLAGGED, FLAG_SEEN,
};

use crate::assets::{CSS, JS};
use crate::error::WebError;
use crate::inline::{InlinePart, Signer};
use crate::listener::PeerAddr;
use crate::pages::{self, Attachment, BodyView, Chrome, Folder, ListView, MessageView, Row};
use crate::read::{self, Decoder};
use crate::sanitize::{sanitize_html, sanitize_html_with};
use crate::session::{self, User};
use crate::Context;

/// Largest form accepted (login, actions on a selection).
const MAX_FORM: usize = 64 * 1024;
/// The policy of every app page: nothing inline, nothing from elsewhere,
/// never framed by another site.
const APP_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
    frame-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Shared by the handlers.
pub(crate) struct App {
    pub ctx: Arc<Context>,
    /// Served over TLS: cookies get `Secure` and the `__Host-` prefix.
    pub secure: bool,
    /// Signs the links of inline parts shown in the message frame.
    pub signer: Signer,
}

type Shared = State<Arc<App>>;

/// Seconds since the Unix epoch.
pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

pub(crate) fn router(ctx: Arc<Context>, secure: bool) -> Router {
    let app_upload_limit = ctx.config.max_upload_bytes;
    let app = Arc::new(App {
        ctx,
        secure,
        signer: Signer::new(),
    });
    Router::new()
        .route("/", get(home))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/mail/{mailbox}", get(list))
        .route("/mail/{mailbox}/act", post(crate::actions::act))
        .route("/mail/{mailbox}/view", post(crate::conversations::set_view))
        .route("/mail/{mailbox}/{uid}", get(read_message))
        .route("/mail/{mailbox}/{uid}/frame", get(frame))
        .route("/mail/{mailbox}/{uid}/part/{n}", get(part))
        .route("/mail/{mailbox}/{uid}/cid/{id}", get(cid))
        .route("/mail/{mailbox}/{uid}/source", get(source))
        .route(
            "/inline/{account}/{mailbox}/{uid}/{part}/{expires}/{sig}",
            get(inline_part),
        )
        .route("/mail/{mailbox}/{uid}/trust", post(trust))
        .route(
            "/mail/{mailbox}/{uid}/unsubscribe",
            post(crate::unsubscribe_action::unsubscribe),
        )
        .route("/events/{mailbox}", get(events))
        .route("/search", get(crate::search::results))
        .route(
            "/folders",
            get(crate::folders::page).post(crate::folders::act),
        )
        .route(
            "/settings",
            get(crate::settings::page).post(crate::settings::save),
        )
        .route("/settings/tokens", post(crate::settings::tokens))
        .route(
            "/settings/filters",
            get(crate::filters::rules_page).post(crate::filters::rules_save),
        )
        .route(
            "/settings/signatures",
            get(crate::identities::page).post(crate::identities::save),
        )
        .route("/settings/filters/spam", post(crate::filters::spam_save))
        .route(
            "/settings/filters/scripts",
            get(crate::filters::scripts_page).post(crate::filters::scripts_act),
        )
        .route(
            "/settings/filters/script",
            get(crate::filters::script_page)
                .post(crate::filters::script_save)
                .layer(DefaultBodyLimit::max(crate::filters::MAX_SCRIPT_FORM)),
        )
        .route(
            "/compose",
            get(crate::compose::form)
                .post(crate::compose::submit)
                .layer(DefaultBodyLimit::max(app_upload_limit)),
        )
        .route("/compose/addresses", get(crate::correspondents::suggest))
        .route("/admin", get(crate::admin::overview))
        .route(
            "/admin/domains",
            get(crate::admin::domains).post(crate::admin::domains_act),
        )
        .route(
            "/admin/users",
            get(crate::admin::users).post(crate::admin::users_act),
        )
        .route(
            "/admin/aliases",
            get(crate::admin::aliases).post(crate::admin::aliases_act),
        )
        .route(
            "/admin/queue",
            get(crate::admin::queue).post(crate::admin::queue_act),
        )
        .route("/admin/dkim", get(crate::admin::dkim))
        .route("/admin/logs", get(crate::admin::logs))
        .route("/static/{file}", get(asset))
        .merge(crate::autoconfig::routes())
        .route("/.well-known/mta-sts.txt", get(crate::mta_sts::serve))
        .layer(DefaultBodyLimit::max(MAX_FORM))
        .layer(middleware::from_fn(security_headers))
        // gzip for clients that ask: pages, styles, scripts, the source.
        // Not event streams or images (the default predicate), nor
        // downloads: attachments are mostly compressed already, and a
        // file's bytes go out as stored.
        .layer(
            tower_http::compression::CompressionLayer::new().compress_when(
                tower_http::compression::Predicate::and(
                    tower_http::compression::predicate::DefaultPredicate::new(),
                    |_: StatusCode,
                     _: axum::http::Version,
                     h: &HeaderMap,
                     _: &axum::http::Extensions| {
                        !h.contains_key(header::CONTENT_DISPOSITION)
                    },
                ),
            ),
        )
        .with_state(app)
}

/// Headers every answer carries; handlers that serve message content set
/// a stricter policy of their own, which is kept.
async fn security_headers(req: axum::extract::Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(APP_CSP));
    h.entry(header::X_FRAME_OPTIONS)
        .or_insert(HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    res
}

async fn asset(Path(file): Path<String>) -> Response {
    let path = format!("/static/{file}");
    for a in [&*CSS, &*JS, &*crate::assets::COMPOSE_JS] {
        if a.path == path {
            return (
                [
                    (header::CONTENT_TYPE, a.content_type),
                    (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
                ],
                a.body,
            )
                .into_response();
        }
    }
    StatusCode::NOT_FOUND.into_response()
}

// ---- login ----------------------------------------------------------------

async fn login_page() -> Html<String> {
    pages::login(None, "")
}

#[derive(Deserialize)]
struct LoginForm {
    address: String,
    password: String,
}

async fn login(
    State(app): Shared,
    ConnectInfo(PeerAddr(peer)): ConnectInfo<PeerAddr>,
    headers: HeaderMap,
    Form(f): Form<LoginForm>,
) -> Result<Response, WebError> {
    // A login form posted from another site would log the victim into the
    // attacker's account (login CSRF).
    session::check_same_origin(&headers)?;
    let account = match app.ctx.auth.login(peer.ip(), &f.address, &f.password).await {
        Ok(a) => a,
        Err(AuthFailure::BadCredentials) => {
            tracing::info!(%peer, address = %f.address, "webmail login failed");
            return Ok((
                StatusCode::UNAUTHORIZED,
                pages::login(Some("Wrong address or password."), &f.address),
            )
                .into_response());
        }
        Err(AuthFailure::Throttled) => {
            return Ok((
                StatusCode::TOO_MANY_REQUESTS,
                pages::login(
                    Some("Too many failed logins; try again in a minute."),
                    &f.address,
                ),
            )
                .into_response());
        }
        Err(AuthFailure::Unavailable) => {
            return Ok((
                StatusCode::SERVICE_UNAVAILABLE,
                pages::login(
                    Some("Logging in is not possible right now; try again soon."),
                    &f.address,
                ),
            )
                .into_response());
        }
    };
    let token = session::new_token();
    let lifetime = app.ctx.config.session_hours * 3600;
    let created = now();
    app.ctx
        .store
        .create_web_session(&WebSession {
            id_hash: session::hash_token(&token),
            account: account.id,
            address: account.address.clone(),
            csrf: session::new_token(),
            created,
            expires: created + lifetime as i64,
        })
        .await?;
    tracing::info!(%peer, address = %account.address, "webmail login");
    Ok((
        [(
            header::SET_COOKIE,
            session::set_cookie(app.secure, &token, lifetime),
        )],
        Redirect::to("/"),
    )
        .into_response())
}

#[derive(Deserialize)]
struct CsrfForm {
    csrf: Option<String>,
}

async fn logout(
    State(app): Shared,
    user: User,
    headers: HeaderMap,
    Form(f): Form<CsrfForm>,
) -> Result<Response, WebError> {
    session::check_same_origin(&headers)?;
    user.check_csrf(f.csrf.as_deref())?;
    app.ctx.store.delete_web_session(&user.id_hash).await?;
    Ok((
        [(header::SET_COOKIE, session::clear_cookie(app.secure))],
        Redirect::to("/login"),
    )
        .into_response())
}

// ---- folders and lists ----------------------------------------------------

/// Special-use folders first, in the order people look for them.
fn role_rank(info: &MailboxInfo) -> (u8, &'static str) {
    if info.name == "INBOX" {
        return (0, "inbox");
    }
    match info
        .special_use
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("\\drafts") => (1, "drafts"),
        Some("\\sent") => (2, "sent"),
        Some("\\archive") => (3, "archive"),
        Some("\\junk") => (4, "junk"),
        Some("\\trash") => (5, "trash"),
        Some(_) => (6, "special"),
        None => (7, ""),
    }
}

pub(crate) async fn mailboxes(app: &App, user: &User) -> Result<Vec<MailboxInfo>, WebError> {
    let mut all = app.ctx.store.list_mailboxes(user.account).await?;
    all.sort_by(|a, b| {
        role_rank(a)
            .0
            .cmp(&role_rank(b).0)
            .then(a.name.cmp(&b.name))
    });
    Ok(all)
}

/// The folder list beside every page; the unread counts come with the
/// mailboxes (kept counts), so it costs no read of its own.
pub(crate) fn folder_list(boxes: &[MailboxInfo]) -> Vec<Folder> {
    boxes
        .iter()
        .map(|b| Folder {
            id: b.id,
            name: b.name.clone(),
            unseen: b.unseen,
            role: role_rank(b).1,
        })
        .collect()
}

pub(crate) fn owned(boxes: &[MailboxInfo], id: MailboxId) -> Result<&MailboxInfo, WebError> {
    boxes.iter().find(|b| b.id == id).ok_or(WebError::NotFound)
}

async fn home(State(app): Shared, user: User) -> Result<Redirect, WebError> {
    let inbox = app
        .ctx
        .store
        .mailbox(user.account, "INBOX")
        .await?
        .ok_or(WebError::NotFound)?;
    Ok(Redirect::to(&format!("/mail/{}", inbox.id)))
}

#[derive(Deserialize)]
struct ListQuery {
    page: Option<usize>,
    q: Option<String>,
}

/// The search behind the box: words in the full-text index (subject,
/// addresses, body), or a substring of the sender or subject.
fn search_key(q: &str) -> SearchKey {
    SearchKey::Or(
        Box::new(SearchKey::Text(q.to_string())),
        Box::new(SearchKey::Or(
            Box::new(SearchKey::From(q.to_string())),
            Box::new(SearchKey::Subject(q.to_string())),
        )),
    )
}

pub(crate) fn display_date(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .ok()
        .and_then(|d| {
            d.format(time::macros::format_description!(
                "[year]-[month]-[day] [hour]:[minute]"
            ))
            .ok()
        })
        .unwrap_or_default()
}

/// The display name of the first address of a `Name <addr>, ...` column.
pub(crate) fn sender_name(from: &str) -> String {
    let first = from.split(", ").next().unwrap_or("");
    match first.split_once(" <") {
        Some((name, _)) if !name.trim().is_empty() => name.trim_matches('"').to_string(),
        _ => first.trim_matches(['<', '>']).to_string(),
    }
}

fn has_attachment(d: &MessageData) -> bool {
    read::leaves(&d.structure.root).iter().any(|l| l.attachment)
}

async fn list(
    State(app): Shared,
    user: User,
    Path(mailbox): Path<MailboxId>,
    Query(q): Query<ListQuery>,
) -> Result<Html<String>, WebError> {
    // Two reads side by side: each waits for a blocking thread.
    let (boxes, settings, conversations) = tokio::try_join!(
        mailboxes(&app, &user),
        async { Ok(app.ctx.store.web_settings(user.account).await?) },
        crate::conversations::threaded(&app, user.account),
    )?;
    let info = owned(&boxes, mailbox)?.clone();
    let query = q.q.unwrap_or_default().trim().to_string();
    // Read (with the mailboxes) before the list, so a change in between
    // is announced again.
    let modseq = info.highest_modseq;
    let per_page = settings.page_size.max(1) as usize;
    // Newest first; UID breaks ties (and orders mail of one second).
    let mut threads = None;
    let (data, total, page) = if conversations && query.is_empty() {
        let all = crate::conversations::threads(&app, user.account, mailbox).await?;
        let total = all.len();
        let page = q
            .page
            .unwrap_or(1)
            .clamp(1, total.div_ceil(per_page).max(1));
        threads = Some(
            all.into_iter()
                .skip((page - 1) * per_page)
                .take(per_page)
                .collect(),
        );
        (Vec::new(), total, page)
    } else if query.is_empty() {
        // The store reads just the page, in date order from its index.
        let total = info.messages as usize;
        let page = q
            .page
            .unwrap_or(1)
            .clamp(1, total.div_ceil(per_page).max(1));
        let data = app
            .ctx
            .store
            .list_newest(mailbox, (page - 1) * per_page, per_page)
            .await?;
        (data, total, page)
    } else {
        let mut entries = app.ctx.store.list_messages(mailbox).await?;
        let hits = app.ctx.store.search(mailbox, &search_key(&query)).await?;
        entries.retain(|e| hits.binary_search(&e.uid).is_ok());
        entries.sort_by_key(|e| std::cmp::Reverse((e.internal_date, e.uid)));
        let total = entries.len();
        let page = q
            .page
            .unwrap_or(1)
            .clamp(1, total.div_ceil(per_page).max(1));
        let shown: Vec<Uid> = entries
            .iter()
            .skip((page - 1) * per_page)
            .take(per_page)
            .map(|e| e.uid)
            .collect();
        let mut data = app.ctx.store.message_data(mailbox, &shown).await?;
        data.sort_by_key(|d| shown.iter().position(|u| *u == d.entry.uid));
        (data, total, page)
    };
    let pages = total.div_ceil(per_page);
    let rows = data
        .iter()
        .map(|d| Row {
            uid: d.entry.uid,
            from: sender_name(&d.headers.from),
            subject: d.headers.subject.clone(),
            date: display_date(d.entry.internal_date),
            size: d.entry.size,
            unread: d.entry.flags & FLAG_SEEN == 0,
            flagged: d.entry.flags & FLAG_FLAGGED != 0,
            attachment: has_attachment(d),
        })
        .collect();
    let folders = folder_list(&boxes);
    let chrome = Chrome {
        address: &user.address,
        admin: user.admin,
        csrf: &user.csrf,
        folders: &folders,
        current: Some(mailbox),
        view: "list",
        query: &query,
        since: Some(modseq),
    };
    Ok(pages::list(
        &chrome,
        &ListView {
            mailbox,
            name: info.name.clone(),
            rows,
            page,
            pages,
            total,
            query: query.clone(),
            role: role_rank(&info).1,
            unseen: info.unseen,
            conversations,
            threads,
        },
    ))
}

// ---- actions: see crate::actions ------------------------------------------

// ---- reading --------------------------------------------------------------

/// A message of the user's, with its leaves.
pub(crate) struct Opened {
    pub data: MessageData,
    pub leaves: Vec<read::Leaf>,
}

pub(crate) async fn open(
    app: &App,
    user: &User,
    mailbox: MailboxId,
    uid: Uid,
) -> Result<Opened, WebError> {
    let boxes = app.ctx.store.list_mailboxes(user.account).await?;
    owned(&boxes, mailbox)?;
    let data = app
        .ctx
        .store
        .message_data(mailbox, &[uid])
        .await?
        .pop()
        .ok_or(WebError::NotFound)?;
    let leaves = read::leaves(&data.structure.root);
    Ok(Opened { data, leaves })
}

/// The message's text for quoting: the plain part, or the HTML part
/// turned into text.
pub(crate) async fn text_of(app: &App, o: &Opened) -> Result<String, WebError> {
    let texts: Vec<&read::Leaf> = o
        .leaves
        .iter()
        .filter(|l| !l.attachment && l.part.media_type == "text")
        .collect();
    let leaf = texts
        .iter()
        .find(|l| l.part.media_subtype == "plain")
        .or_else(|| texts.first());
    match leaf {
        Some(l) => Ok(
            read::body_text(&*app.ctx.store, o.data.entry.blob, l, 256 * 1024, false)
                .await?
                .text,
        ),
        None => Ok(String::new()),
    }
}

/// One field of a raw header block, unfolded (empty if absent).
pub(crate) fn header_field(header: &[u8], name: &str) -> String {
    let text = String::from_utf8_lossy(header);
    let mut value: Option<String> = None;
    for line in text.split("\r\n").flat_map(|l| l.split('\n')) {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            if let Some(v) = value.as_mut() {
                v.push(' ');
                v.push_str(line.trim());
            }
            continue;
        }
        if value.is_some() {
            break;
        }
        if let Some((n, v)) = line.split_once(':') {
            if n.trim().eq_ignore_ascii_case(name) {
                value = Some(v.trim().to_string());
            }
        }
    }
    value.unwrap_or_default()
}

/// The leaf shown as the message's text: HTML if there is one, else plain.
fn body_leaf(leaves: &[read::Leaf]) -> Option<(&read::Leaf, bool)> {
    let texts = leaves
        .iter()
        .filter(|l| !l.attachment && l.part.media_type == "text");
    let mut plain = None;
    for l in texts {
        match l.part.media_subtype.as_str() {
            "html" => return Some((l, true)),
            "plain" if plain.is_none() => plain = Some((l, false)),
            _ => {}
        }
    }
    plain
}

fn sender_address(from: &str) -> String {
    let first = from.split(", ").next().unwrap_or("");
    let addr = match first.rsplit_once('<') {
        Some((_, a)) => a.trim_end_matches('>'),
        None => first,
    };
    store::normalize_address(addr).unwrap_or_default()
}

#[derive(Deserialize)]
struct ReadQuery {
    remote: Option<u8>,
    /// The list page the message was opened from (see [`crate::position`]).
    back: Option<String>,
}

async fn remote_allowed(app: &App, user: &User, from: &str, asked: bool) -> Result<bool, WebError> {
    if asked {
        return Ok(true);
    }
    let settings = app.ctx.store.web_settings(user.account).await?;
    Ok(settings.remote_ok.contains(&sender_address(from)))
}

async fn read_message(
    State(app): Shared,
    user: User,
    Path((mailbox, uid)): Path<(MailboxId, Uid)>,
    Query(q): Query<ReadQuery>,
) -> Result<Response, WebError> {
    let boxes = mailboxes(&app, &user).await?;
    let role = role_rank(owned(&boxes, mailbox)?).1;
    // A draft is opened to be worked on.
    if role == "drafts" {
        return Ok(
            Redirect::to(&format!("/compose?mode=draft&mailbox={mailbox}&uid={uid}"))
                .into_response(),
        );
    }
    let o = open(&app, &user, mailbox, uid).await?;
    let store = &*app.ctx.store;
    let blob = o.data.entry.blob;
    if o.data.entry.flags & FLAG_SEEN == 0 {
        store
            .update_flags(mailbox, &[uid], FlagChange::Add, FLAG_SEEN, &[], None)
            .await?;
    }
    let h = &o.data.headers;
    let remote_allowed = remote_allowed(&app, &user, &h.from, q.remote == Some(1)).await?;
    let base = format!("/mail/{mailbox}/{uid}");
    let mut blocked_remote = 0;
    let body = match body_leaf(&o.leaves) {
        None => BodyView::Empty,
        Some((leaf, false)) => {
            let b =
                read::body_text(store, blob, leaf, app.ctx.config.max_body_bytes, false).await?;
            BodyView::Text {
                text: b.text,
                truncated: b.truncated,
            }
        }
        Some((leaf, true)) => {
            let b = read::body_text(store, blob, leaf, app.ctx.config.max_body_bytes, true).await?;
            blocked_remote = sanitize_html(&b.text, false, "").blocked_remote;
            BodyView::Html {
                frame: format!(
                    "{base}/frame{}",
                    if remote_allowed { "?remote=1" } else { "" }
                ),
            }
        }
    };
    let mut attachments = Vec::new();
    for l in o.leaves.iter().filter(|l| l.attachment) {
        let name = read::file_name(store, blob, l)
            .await?
            .unwrap_or_else(|| format!("part-{}", l.number));
        attachments.push(Attachment {
            url: format!("{base}/part/{}", l.number),
            name,
            content_type: l.content_type(),
            size: l.part.body_len,
        });
    }
    let thread = crate::thread::conversation(&app, &boxes, mailbox, &o.data).await?;
    let folders = folder_list(&boxes);
    let chrome = Chrome {
        address: &user.address,
        admin: user.admin,
        csrf: &user.csrf,
        folders: &folders,
        current: Some(mailbox),
        view: "message",
        query: "",
        since: None,
    };
    Ok(pages::message(
        &chrome,
        &MessageView {
            mailbox,
            uid,
            subject: h.subject.clone(),
            from: h.from.clone(),
            from_address: sender_address(&h.from),
            to: h.to.clone(),
            cc: h.cc.clone(),
            date: h.date.map(display_date).unwrap_or_default(),
            flagged: o.data.entry.flags & FLAG_FLAGGED != 0,
            body,
            attachments,
            blocked_remote,
            remote_allowed,
            thread,
            role,
            spam: crate::actions::SpamVerdict::parse(&header_field(
                &o.data.header,
                "x-spam-status",
            )),
            unsubscribe: crate::unsubscribe::offer(&o.data.header, app.ctx.authserv_id.as_deref()),
            back: crate::position::back_to(mailbox, q.back.as_deref()),
            carried: q
                .back
                .as_deref()
                .and_then(|b| crate::position::list_page(mailbox, b))
                .map(str::to_string),
        },
    )
    .into_response())
}

/// The sanitised HTML of a message, for the sandboxed frame. Its policy
/// allows no script at all, styles only the frame's own, images only from
/// the message's parts (and remote ones once allowed), and framing only
/// by the app.
async fn frame(
    State(app): Shared,
    user: User,
    Path((mailbox, uid)): Path<(MailboxId, Uid)>,
    Query(q): Query<ReadQuery>,
) -> Result<Response, WebError> {
    let o = open(&app, &user, mailbox, uid).await?;
    let Some((leaf, true)) = body_leaf(&o.leaves) else {
        return Err(WebError::NotFound);
    };
    let allow = remote_allowed(&app, &user, &o.data.headers.from, q.remote == Some(1)).await?;
    let b = read::body_text(
        &*app.ctx.store,
        o.data.entry.blob,
        leaf,
        app.ctx.config.max_body_bytes,
        true,
    )
    .await?;
    // `cid:` pictures by signed link: the sandboxed frame sends no cookie.
    let expires = now() + crate::inline::LIFETIME_SECS;
    let by_cid: std::collections::HashMap<String, String> = o
        .leaves
        .iter()
        .filter_map(|l| {
            let id = l.content_id()?;
            let url = app.signer.url(&InlinePart {
                account: user.account,
                mailbox,
                uid,
                part: l.number,
                expires,
            });
            Some((id.to_string(), url))
        })
        .collect();
    let clean = sanitize_html_with(&b.text, allow, move |id| by_cid.get(id).cloned());
    let img = if allow {
        "'self' https: http:"
    } else {
        "'self'"
    };
    // Inline styles are the mail's own, filtered ([`crate::css`]); the
    // frame runs no script and fetches only what img-src allows.
    let csp = format!(
        "default-src 'none'; style-src 'unsafe-inline'; img-src {img}; font-src 'none'; form-action 'none'; \
         base-uri 'none'; frame-ancestors 'self'; sandbox allow-popups allow-popups-to-escape-sandbox"
    );
    Ok((
        [
            (header::CONTENT_SECURITY_POLICY, csp),
            (header::X_FRAME_OPTIONS, "SAMEORIGIN".to_string()),
        ],
        pages::frame(&clean.html),
    )
        .into_response())
}

/// RFC 6266 `Content-Disposition` with an ASCII fallback and the UTF-8
/// name in RFC 8187 (`filename*`) form.
pub(crate) fn content_disposition(kind: &str, name: &str) -> String {
    let fallback: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut encoded = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
            encoded.push(b as char);
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    format!("{kind}; filename=\"{fallback}\"; filename*=UTF-8''{encoded}")
}

async fn serve_leaf(
    app: &App,
    blob: store::BlobId,
    leaf: &read::Leaf,
    inline: bool,
) -> Result<Response, WebError> {
    let store = &app.ctx.store;
    let name = read::file_name(&**store, blob, leaf)
        .await?
        .unwrap_or_else(|| format!("part-{}", leaf.number));
    let ctype = leaf.content_type();
    // Only images are shown inline (as `cid:` pictures in the frame);
    // everything else downloads, so an HTML or SVG attachment never runs
    // in the app's origin.
    let inline = inline && ctype.starts_with("image/") && ctype != "image/svg+xml";
    let body = Body::from_stream(read::stream_range(
        Arc::clone(store),
        blob,
        leaf.part.body_offset,
        leaf.part.body_len,
        Decoder::for_encoding(&leaf.part.encoding),
    ));
    Ok((
        [
            (header::CONTENT_TYPE, ctype),
            (
                header::CONTENT_DISPOSITION,
                content_disposition(if inline { "inline" } else { "attachment" }, &name),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; sandbox".to_string(),
            ),
            (header::CACHE_CONTROL, "private, max-age=3600".to_string()),
        ],
        body,
    )
        .into_response())
}

async fn part(
    State(app): Shared,
    user: User,
    Path((mailbox, uid, n)): Path<(MailboxId, Uid, usize)>,
) -> Result<Response, WebError> {
    let o = open(&app, &user, mailbox, uid).await?;
    let leaf = o
        .leaves
        .iter()
        .find(|l| l.number == n)
        .ok_or(WebError::NotFound)?;
    serve_leaf(&app, o.data.entry.blob, leaf, false).await
}

async fn cid(
    State(app): Shared,
    user: User,
    Path((mailbox, uid, id)): Path<(MailboxId, Uid, String)>,
) -> Result<Response, WebError> {
    let o = open(&app, &user, mailbox, uid).await?;
    let leaf = o
        .leaves
        .iter()
        .find(|l| l.content_id() == Some(id.as_str()))
        .ok_or(WebError::NotFound)?;
    let mut res = serve_leaf(&app, o.data.entry.blob, leaf, true).await?;
    // The frame that shows it is sandboxed and same-site.
    res.headers_mut().insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    Ok(res)
}

/// An inline part by signed link (see [`crate::inline`]): no session, the
/// signature stands for it. Refused when tampered with or expired.
async fn inline_part(
    State(app): Shared,
    Path((account, mailbox, uid, part, expires, sig)): Path<(
        store::AccountId,
        MailboxId,
        Uid,
        usize,
        i64,
        String,
    )>,
) -> Result<Response, WebError> {
    let p = InlinePart {
        account,
        mailbox,
        uid,
        part,
        expires,
    };
    if !app.signer.verify(&p, &sig, now()) {
        return Err(WebError::Forbidden("this picture's link is not valid"));
    }
    let boxes = app.ctx.store.list_mailboxes(account).await?;
    owned(&boxes, mailbox)?;
    let data = app
        .ctx
        .store
        .message_data(mailbox, &[uid])
        .await?
        .pop()
        .ok_or(WebError::NotFound)?;
    let leaves = read::leaves(&data.structure.root);
    let leaf = leaves
        .iter()
        .find(|l| l.number == part)
        .ok_or(WebError::NotFound)?;
    let mut res = serve_leaf(&app, data.entry.blob, leaf, true).await?;
    // Loaded by a sandboxed (opaque-origin) frame: same-origin would
    // refuse it; the link itself is the capability.
    res.headers_mut().insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("cross-origin"),
    );
    Ok(res)
}

async fn source(
    State(app): Shared,
    user: User,
    Path((mailbox, uid)): Path<(MailboxId, Uid)>,
) -> Result<Response, WebError> {
    let o = open(&app, &user, mailbox, uid).await?;
    let body = Body::from_stream(read::stream_range(
        Arc::clone(&app.ctx.store),
        o.data.entry.blob,
        0,
        o.data.entry.size,
        Decoder::Identity,
    ));
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; sandbox",
            ),
        ],
        body,
    )
        .into_response())
}

async fn trust(
    State(app): Shared,
    user: User,
    headers: HeaderMap,
    Path((mailbox, uid)): Path<(MailboxId, Uid)>,
    Form(f): Form<CsrfForm>,
) -> Result<Response, WebError> {
    session::check_same_origin(&headers)?;
    user.check_csrf(f.csrf.as_deref())?;
    let o = open(&app, &user, mailbox, uid).await?;
    let sender = sender_address(&o.data.headers.from);
    if !sender.is_empty() {
        let mut settings = app.ctx.store.web_settings(user.account).await?;
        if !settings.remote_ok.contains(&sender) {
            settings.remote_ok.push(sender);
            app.ctx
                .store
                .set_web_settings(user.account, &settings)
                .await?;
        }
    }
    Ok(Redirect::to(&format!("/mail/{mailbox}/{uid}")).into_response())
}

// ---- live updates -----------------------------------------------------------

/// How often a quiet event stream sends a comment, so proxies keep it.
const KEEPALIVE: Duration = Duration::from_secs(25);

#[derive(Deserialize)]
struct EventsQuery {
    /// The mailbox's HIGHESTMODSEQ when the page was made: a change after
    /// it and before the stream opened is announced at once.
    since: Option<u64>,
}

/// Server-Sent Events: `event: change` whenever the mailbox changes (the
/// same watch IDLE waits on).
async fn events(
    State(app): Shared,
    user: User,
    Path(mailbox): Path<MailboxId>,
    Query(q): Query<EventsQuery>,
) -> Result<Response, WebError> {
    let boxes = app.ctx.store.list_mailboxes(user.account).await?;
    owned(&boxes, mailbox)?;
    // Subscribe first, then look: nothing falls between the two.
    let watch = app.ctx.store.watch_mailbox(mailbox);
    let now = app.ctx.store.mailbox_status(mailbox).await?.highest_modseq;
    let missed = q.since.is_some_and(|s| now > s);
    let stop = app.ctx.shutdown.token.clone();
    let first: &'static [u8] = if missed {
        b"retry: 3000\n\nevent: change\ndata: \n\n"
    } else {
        b"retry: 3000\n\n"
    };
    let stream = futures_util::stream::unfold(
        (watch, stop, Some(first)),
        |(mut watch, stop, first)| async move {
            if let Some(first) = first {
                return Some((
                    Ok::<_, std::io::Error>(Bytes::from_static(first)),
                    (watch, stop, None),
                ));
            }
            let next: &'static [u8] = tokio::select! {
                _ = stop.cancelled() => return None,
                changed = watch.changed() => match changed {
                    Ok(()) => b"event: change\ndata: \n\n",
                    Err(_) => return None,
                },
                _ = tokio::time::sleep(KEEPALIVE) => b": keepalive\n\n",
            };
            Some((Ok(Bytes::from_static(next)), (watch, stop, None)))
        },
    );
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disposition_has_ascii_and_utf8_names() {
        let d = content_disposition("attachment", "résumé \"final\".pdf");
        assert_eq!(
            d,
            "attachment; filename=\"r_sum_ _final_.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22.pdf"
        );
    }

    #[test]
    fn senders_read_from_the_indexed_column() {
        assert_eq!(
            sender_name("Alice Example <alice@example.org>, bob@x"),
            "Alice Example"
        );
        assert_eq!(sender_name("bob@example.org"), "bob@example.org");
        assert_eq!(
            sender_address("Alice <Alice@Example.ORG>"),
            "alice@example.org"
        );
        assert_eq!(sender_address("nobody"), "");
    }
}
