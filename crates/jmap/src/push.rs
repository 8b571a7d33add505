//! Push over an event source (RFC 8620 §7.3): a `text/event-stream` of
//! StateChange objects (§7.1), woken by the store's change notices, the
//! ones IMAP IDLE waits on, and pings at the interval the client asked.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::auth::User;
use crate::error::problem;
use crate::{ids, Jmap};

/// Shortest and longest ping interval the server keeps to, in seconds.
const PING_RANGE: (u64, u64) = (1, 300);
/// How often the account is looked at even without a notice: changes made
/// by another process (the command line, on SQLite) wake nothing here.
const RECHECK: Duration = Duration::from_secs(30);

#[derive(Deserialize)]
pub(crate) struct EventQuery {
    types: Option<String>,
    closeafter: Option<String>,
    ping: Option<String>,
}

/// What the client asked of the stream (§7.3).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wanted {
    /// Type names, or `None` for all (`*`).
    types: Option<Vec<String>>,
    /// End the stream after the first StateChange.
    close_after_state: bool,
    /// Seconds between pings; 0 for none.
    ping: u64,
}

fn wanted(q: &EventQuery) -> Result<Wanted, String> {
    let types = match q.types.as_deref() {
        None | Some("*") => None,
        Some(list) => Some(
            list.split(',')
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect(),
        ),
    };
    let close_after_state = match q.closeafter.as_deref() {
        None | Some("no") => false,
        Some("state") => true,
        Some(other) => return Err(format!("closeafter must be state or no, not {other:?}")),
    };
    let ping = match q.ping.as_deref() {
        None => 0,
        Some(p) => p
            .parse::<u64>()
            .map_err(|_| format!("ping must be a number of seconds, not {p:?}"))?,
    };
    let ping = if ping == 0 {
        0
    } else {
        ping.clamp(PING_RANGE.0, PING_RANGE.1)
    };
    Ok(Wanted {
        types,
        close_after_state,
        ping,
    })
}

/// The states of the wanted types, of those the account has.
fn filtered(states: Map<String, Value>, wanted: &Wanted) -> Map<String, Value> {
    match &wanted.types {
        None => states,
        Some(types) => states
            .into_iter()
            .filter(|(k, _)| types.contains(k))
            .collect(),
    }
}

/// One event in the stream's wire form.
fn event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

pub(crate) async fn eventsource(
    State(jmap): State<Arc<Jmap>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Query(q): Query<EventQuery>,
    headers: HeaderMap,
) -> Response {
    let user = match jmap.authenticate(peer, &headers).await {
        Ok(u) => u,
        Err(refusal) => return refusal.into_response(),
    };
    let wanted = match wanted(&q) {
        Ok(w) => w,
        Err(why) => {
            return problem(
                StatusCode::BAD_REQUEST,
                json!({"type": "about:blank", "detail": why}),
            )
        }
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(8);
    let jmap2 = Arc::clone(&jmap);
    tokio::spawn(async move { stream(jmap2, user, wanted, tx).await });
    let body = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    }));
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// Feeds one event stream until the client goes, the server stops, or
/// (closeafter=state) the first StateChange is sent.
async fn stream(jmap: Arc<Jmap>, user: User, wanted: Wanted, tx: tokio::sync::mpsc::Sender<Bytes>) {
    let account = ids::account(user.account);
    let mut last = match jmap.type_states(&user).await {
        Ok(states) => filtered(states, &wanted),
        Err(e) => {
            tracing::warn!(error = %e, "JMAP event source: reading states failed");
            return;
        }
    };
    let mut ping = (wanted.ping > 0).then(|| {
        let every = Duration::from_secs(wanted.ping);
        tokio::time::interval_at(tokio::time::Instant::now() + every, every)
    });
    loop {
        let mut watches = match jmap.change_watches(&user).await {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "JMAP event source: watching failed");
                return;
            }
        };
        let changed = async {
            if watches.is_empty() {
                std::future::pending::<()>().await;
            }
            let waits = watches.iter_mut().map(|w| Box::pin(w.changed()));
            let _ = futures_util::future::select_all(waits).await;
        };
        tokio::select! {
            _ = jmap.ctx.shutdown.cancelled() => return,
            _ = tx.closed() => return,
            _ = async {
                match ping.as_mut() {
                    Some(p) => { p.tick().await; }
                    None => std::future::pending::<()>().await,
                }
            } => {
                if tx.send(event("ping", &json!({"interval": wanted.ping}))).await.is_err() {
                    return;
                }
                continue;
            }
            _ = changed => {}
            _ = tokio::time::sleep(RECHECK) => {}
        }
        let now = match jmap.type_states(&user).await {
            Ok(states) => filtered(states, &wanted),
            Err(e) => {
                tracing::warn!(error = %e, "JMAP event source: reading states failed");
                return;
            }
        };
        let changed: Map<String, Value> = now
            .iter()
            .filter(|(k, v)| last.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        last = now;
        if changed.is_empty() {
            continue;
        }
        let change = json!({"@type": "StateChange", "changed": {account.clone(): changed}});
        if tx.send(event("state", &change)).await.is_err() || wanted.close_after_state {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(types: Option<&str>, closeafter: Option<&str>, ping: Option<&str>) -> EventQuery {
        EventQuery {
            types: types.map(str::to_string),
            closeafter: closeafter.map(str::to_string),
            ping: ping.map(str::to_string),
        }
    }

    #[test]
    fn the_query_is_read_as_the_rfc_spells_it() {
        let w = wanted(&q(Some("Email,Mailbox"), Some("state"), Some("0"))).unwrap();
        assert_eq!(
            w.types,
            Some(vec!["Email".to_string(), "Mailbox".to_string()])
        );
        assert!(w.close_after_state);
        assert_eq!(w.ping, 0);
        let w = wanted(&q(Some("*"), Some("no"), Some("100000"))).unwrap();
        assert_eq!((w.types, w.close_after_state, w.ping), (None, false, 300));
        assert!(wanted(&q(None, Some("later"), None)).is_err());
        assert!(wanted(&q(None, None, Some("-1"))).is_err());
    }

    #[test]
    fn only_wanted_types_are_reported() {
        let states = json!({"Email": "1", "Mailbox": "2"})
            .as_object()
            .unwrap()
            .clone();
        let w = wanted(&q(Some("Email"), None, None)).unwrap();
        assert_eq!(Value::Object(filtered(states, &w)), json!({"Email": "1"}));
        assert_eq!(
            event("ping", &json!({"interval": 5})),
            Bytes::from("event: ping\ndata: {\"interval\":5}\n\n")
        );
    }
}
