//! JMAP over WebSocket (RFC 8887): the `jmap` subprotocol on
//! `/jmap/ws`, each text message a Request answered by a Response (or a
//! RequestError), and push of StateChange objects once the client sends
//! WebSocketPushEnable, woken by the store's change notices as the event
//! source is.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use crate::auth::User;
use crate::error::{problem, RequestError};
use crate::{ids, Jmap};

/// RFC 8887's capability.
pub const WEBSOCKET: &str = "urn:ietf:params:jmap:websocket";

/// How often the account is looked at without a notice, while push is on.
const RECHECK: Duration = Duration::from_secs(30);

pub(crate) async fn upgrade(
    State(jmap): State<Arc<Jmap>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let user = match jmap.authenticate(peer, &headers).await {
        Ok(u) => u,
        Err(refusal) => return refusal.into_response(),
    };
    // §4.2: the client asks for the "jmap" subprotocol.
    let offered = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim() == "jmap");
    if !offered {
        return problem(
            StatusCode::BAD_REQUEST,
            json!({"type": "about:blank", "detail": "the jmap subprotocol is required"}),
        );
    }
    let max = jmap.ctx.config.max_size_request;
    ws.protocols(["jmap"])
        .max_message_size(max)
        .on_upgrade(move |socket| session(jmap, user, socket))
}

/// What WebSocketPushEnable asked for.
struct Push {
    types: Option<Vec<String>>,
    last: Map<String, Value>,
}

async fn session(jmap: Arc<Jmap>, user: User, mut socket: WebSocket) {
    let mut push: Option<Push> = None;
    loop {
        let mut watches = if push.is_some() {
            jmap.change_watches(&user).await.unwrap_or_default()
        } else {
            Vec::new()
        };
        let changed = async {
            if watches.is_empty() {
                std::future::pending::<()>().await;
            }
            let waits = watches.iter_mut().map(|w| Box::pin(w.changed()));
            let _ = futures_util::future::select_all(waits).await;
        };
        let recheck = async {
            if push.is_some() {
                tokio::time::sleep(RECHECK).await
            } else {
                std::future::pending::<()>().await
            }
        };
        tokio::select! {
            _ = jmap.ctx.shutdown.cancelled() => {
                let _ = socket.send(Message::Close(None)).await;
                return;
            }
            message = socket.recv() => {
                let Some(Ok(message)) = message else { return };
                let reply = match message {
                    Message::Text(text) => handle(&jmap, &user, text.as_bytes(), &mut push).await,
                    Message::Binary(_) => Some(request_error(
                        None,
                        &RequestError::NotJson("JMAP messages are text".into()),
                    )),
                    Message::Close(_) => return,
                    Message::Ping(_) | Message::Pong(_) => None,
                };
                if let Some(reply) = reply {
                    if socket.send(Message::Text(reply.to_string().into())).await.is_err() {
                        return;
                    }
                }
                if let Some(p) = push.as_mut() {
                    if p.last.is_empty() {
                        // Just enabled: the states to report changes from.
                        p.last = states(&jmap, &user, p).await;
                    }
                }
                continue;
            }
            _ = changed => {}
            _ = recheck => {}
        }
        let Some(p) = push.as_mut() else { continue };
        let now = states(&jmap, &user, p).await;
        let diff: Map<String, Value> = now
            .iter()
            .filter(|(k, v)| p.last.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        p.last = now;
        if diff.is_empty() {
            continue;
        }
        let change = json!({
            "@type": "StateChange",
            "changed": {ids::account(user.account): diff},
        });
        if socket
            .send(Message::Text(change.to_string().into()))
            .await
            .is_err()
        {
            return;
        }
    }
}

async fn states(jmap: &Jmap, user: &User, p: &Push) -> Map<String, Value> {
    let all = jmap.type_states(user).await.unwrap_or_default();
    match &p.types {
        None => all,
        Some(t) => all.into_iter().filter(|(k, _)| t.contains(k)).collect(),
    }
}

fn request_error(id: Option<&Value>, e: &RequestError) -> Value {
    let mut v = e.to_json();
    v["@type"] = "RequestError".into();
    if let Some(id) = id {
        v["requestId"] = id.clone();
    }
    v
}

/// One client message: its answer, if it has one (§4.3).
async fn handle(jmap: &Jmap, user: &User, text: &[u8], push: &mut Option<Push>) -> Option<Value> {
    let value: Value = match serde_json::from_slice(text) {
        Ok(v) => v,
        Err(e) => return Some(request_error(None, &RequestError::NotJson(e.to_string()))),
    };
    let id = value.get("id").cloned();
    match value.get("@type").and_then(Value::as_str) {
        Some("Request") => {
            let Ok(_turn) = jmap.requests.try_acquire(user.account) else {
                return Some(request_error(
                    id.as_ref(),
                    &RequestError::Limit("maxConcurrentRequests"),
                ));
            };
            match jmap.api(user, text).await {
                Ok(mut response) => {
                    response["@type"] = "Response".into();
                    if let Some(id) = id {
                        response["requestId"] = id;
                    }
                    Some(response)
                }
                Err(e) => Some(request_error(id.as_ref(), &e)),
            }
        }
        Some("WebSocketPushEnable") => {
            let types = match value.get("dataTypes") {
                None | Some(Value::Null) => None,
                Some(Value::Array(t)) => Some(
                    t.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect(),
                ),
                Some(_) => {
                    return Some(request_error(
                        id.as_ref(),
                        &RequestError::NotRequest("dataTypes is a list or null".into()),
                    ))
                }
            };
            *push = Some(Push {
                types,
                last: Map::new(),
            });
            None
        }
        Some("WebSocketPushDisable") => {
            *push = None;
            None
        }
        _ => Some(request_error(
            id.as_ref(),
            &RequestError::NotRequest(
                "@type is Request, WebSocketPushEnable or WebSocketPushDisable".into(),
            ),
        )),
    }
}
