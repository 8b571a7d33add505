//! The URL space JMAP answers on the web listener (RFC 8620 §2.2, §3.1,
//! §6, §7.3): `/.well-known/jmap` (a redirect), `/jmap/session`,
//! `/jmap/api`, `/jmap/upload/{accountId}/`,
//! `/jmap/download/{accountId}/{blobId}/{name}`, `/jmap/eventsource`,
//! `/jmap/ws` (RFC 8887).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::json;
use std::net::SocketAddr;

use crate::error::{problem, RequestError};
use crate::Jmap;

type Shared = State<Arc<Jmap>>;

/// The routes, with their state.
pub(crate) fn router(jmap: Arc<Jmap>) -> Router {
    Router::new()
        .route("/.well-known/jmap", get(well_known))
        .route("/jmap/session", get(session))
        .route("/jmap/api", post(api))
        .route("/jmap/upload/{account}/", post(upload))
        .route("/jmap/download/{account}/{blob}/{name}", get(download))
        .route("/jmap/eventsource", get(crate::push::eventsource))
        .route("/jmap/ws", get(crate::ws::upgrade))
        .layer(axum::middleware::from_fn(no_store))
        .with_state(jmap)
}

/// JMAP answers are the user's own data: never kept by a shared cache
/// (downloads, which never change, say so themselves). They share the
/// webmail's origin, so nothing they carry may run there: a downloaded
/// part is never sniffed into another type, and whatever its type it is
/// shown (if a browser shows it at all) sandboxed, without script.
async fn no_store(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.entry(header::CACHE_CONTROL)
        .or_insert(header::HeaderValue::from_static("no-cache, no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static("default-src 'none'; sandbox; frame-ancestors 'none'"),
    );
    res
}

/// §2.2: the well-known URL leads to the session resource.
async fn well_known() -> Redirect {
    Redirect::temporary("/jmap/session")
}

async fn session(
    State(jmap): Shared,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let user = match jmap.authenticate(peer, &headers).await {
        Ok(u) => u,
        Err(refusal) => return refusal.into_response(),
    };
    let base = jmap.base_url(&headers);
    json_response(StatusCode::OK, jmap.session(&user, &base).to_string())
}

fn json_response(code: StatusCode, body: String) -> Response {
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn api(
    State(jmap): Shared,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let user = match jmap.authenticate(peer, &headers).await {
        Ok(u) => u,
        Err(refusal) => return refusal.into_response(),
    };
    let Ok(_turn) = jmap.requests.try_acquire(user.account) else {
        return RequestError::Limit("maxConcurrentRequests").into_response();
    };
    // The body is read up to maxSizeRequest and no further (§3.1).
    let max = jmap.ctx.config.max_size_request;
    let mut bytes = Vec::new();
    let mut stream = body.into_data_stream();
    while let Some(piece) = stream.next().await {
        let Ok(piece) = piece else {
            return problem(
                StatusCode::BAD_REQUEST,
                json!({"type": "about:blank", "detail": "the request was broken off"}),
            );
        };
        if bytes.len() + piece.len() > max {
            return RequestError::Limit("maxSizeRequest").into_response();
        }
        bytes.extend_from_slice(&piece);
    }
    match jmap.api(&user, &bytes).await {
        Ok(response) => json_response(StatusCode::OK, response.to_string()),
        Err(e) => e.into_response(),
    }
}

async fn upload(
    State(jmap): Shared,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(account): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let user = match jmap.authenticate(peer, &headers).await {
        Ok(u) => u,
        Err(refusal) => return refusal.into_response(),
    };
    jmap.upload(&user, &account, &headers, body).await
}

#[derive(Deserialize)]
struct DownloadQuery {
    accept: Option<String>,
}

async fn download(
    State(jmap): Shared,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path((account, blob, name)): Path<(String, String, String)>,
    Query(q): Query<DownloadQuery>,
    headers: HeaderMap,
) -> Response {
    let user = match jmap.authenticate(peer, &headers).await {
        Ok(u) => u,
        Err(refusal) => return refusal.into_response(),
    };
    jmap.download(&user, &account, &blob, &name, q.accept.as_deref())
        .await
}
