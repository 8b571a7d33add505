//! Push to the URLs of push subscriptions (RFC 8620 §7.2): the
//! PushVerification object POSTed when a subscription is made, then,
//! once the client has proved it received it, StateChange objects (§7.1)
//! POSTed whenever the account's states move.
//!
//! One task per account that has live subscriptions, in the process that
//! made them or found them at start. It wakes on the change notices the
//! event source and WebSocket push wait on (the mailboxes', which reach
//! every node on PostgreSQL, and the account's notice of changes made
//! here to identities, submissions and vacation), waits a moment so that
//! a burst of changes is one StateChange, and sends each verified
//! subscription the states of the types it asked for that moved. A push
//! that fails is tried again with a doubling wait, its changes merged
//! with any newer ones, until the subscription expires.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use serde_json::{json, Map, Value};
use store::AccountId;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::{ids, Context};

/// The kind the store keeps push subscriptions under, in the records of
/// the account whose credentials made them.
pub(crate) const KIND: &str = "PushSubscription";
/// The longest a subscription lives before the client renews it by
/// updating `expires`: a later or missing `expires` is cut to this.
pub(crate) const MAX_LIFETIME_SECS: i64 = 7 * 86_400;
/// How long after a change notice the states are read, so that the
/// notices of one burst (a message filed in several mailboxes, a flag
/// set on many) make one StateChange.
const COALESCE: Duration = Duration::from_millis(200);
/// The first wait before a failed push is tried again; each failure
/// doubles it, up to [`LAST_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest wait between two tries of a push.
const LAST_RETRY: Duration = Duration::from_secs(300);
/// How long one POST may take.
const POST_TIMEOUT: Duration = Duration::from_secs(15);
/// How often the states are read even without a notice: changes made by
/// another process on SQLite, or over ManageSieve, wake nothing here.
const RECHECK: Duration = Duration::from_secs(30);
/// How many times a PushVerification is tried.
const VERIFICATION_TRIES: u32 = 5;

type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// What push keeps across requests and listeners: the accounts whose
/// pusher runs, the account notices, and the HTTP client.
#[derive(Default)]
pub struct PushHub {
    /// Accounts whose pusher task runs in this process.
    running: Mutex<HashSet<AccountId>>,
    /// Per account, bumped by JMAP writes of what lives outside the
    /// mailboxes (records, vacation), in this process.
    notices: Mutex<HashMap<AccountId, watch::Sender<u64>>>,
    /// Made on first use.
    client: OnceLock<Option<HttpClient>>,
    /// Set once the subscriptions stored before start were looked for.
    resumed: OnceLock<()>,
}

impl PushHub {
    /// A receiver of the account's notice.
    pub(crate) fn watch(&self, account: AccountId) -> watch::Receiver<u64> {
        let mut notices = self.notices.lock().expect("push notices lock");
        notices.retain(|_, tx| tx.receiver_count() > 0);
        notices
            .entry(account)
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Tells the account's watchers that something outside its
    /// mailboxes changed (after the change is stored).
    pub(crate) fn notify(&self, account: AccountId) {
        let notices = self.notices.lock().expect("push notices lock");
        if let Some(tx) = notices.get(&account) {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    fn client(&self) -> Option<&HttpClient> {
        self.client
            .get_or_init(|| {
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let connector = match hyper_rustls::HttpsConnectorBuilder::new()
                    .with_provider_and_native_roots(provider)
                {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::error!(error = %e, "JMAP push: no trusted roots, push is off");
                        return None;
                    }
                };
                let connector = connector.https_or_http().enable_http1().build();
                Some(
                    Client::builder(hyper_util::rt::TokioExecutor::new())
                        .pool_idle_timeout(Duration::from_secs(60))
                        .build(connector),
                )
            })
            .as_ref()
    }
}

/// Whether `url` may be pushed to: `https` (RFC 8620 §7.2 wants the push
/// kept private in transit), or plain `http` to a loopback address only,
/// so that a receiver on the same machine (the tests') needs no
/// certificate while nothing crosses a network in clear text.
pub(crate) fn url_allowed(url: &str) -> Result<(), &'static str> {
    let Ok(uri) = url.parse::<hyper::Uri>() else {
        return Err("url is not a URL");
    };
    let host = uri.host().unwrap_or("");
    match uri.scheme_str() {
        Some("https") if !host.is_empty() => Ok(()),
        Some("http") => {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let loopback = host == "localhost"
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback());
            if loopback {
                Ok(())
            } else {
                Err("url must be https (plain http only to a loopback address)")
            }
        }
        _ => Err("url must be an https URL"),
    }
}

/// POSTs `body` to `url` (§7.2: JSON, with the RFC 8030 `TTL` header).
async fn post(hub: &PushHub, url: &str, body: &Value, ttl: i64) -> Result<(), String> {
    let client = hub.client().ok_or("no HTTP client")?;
    let request = hyper::Request::post(url)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header("TTL", ttl.max(0).to_string())
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let response = tokio::time::timeout(POST_TIMEOUT, client.request(request))
        .await
        .map_err(|_| "timed out".to_string())?
        .map_err(|e| e.to_string())?;
    if response.status().is_success() {
        Ok(())
    } else {
        Err(format!("answered {}", response.status()))
    }
}

/// Sends a new subscription its PushVerification (§7.2.2), tried a few
/// times with a doubling wait.
pub(crate) fn send_verification(ctx: &Arc<Context>, id: String, url: String, code: String) {
    let ctx = Arc::clone(ctx);
    tokio::spawn(async move {
        let body = json!({
            "@type": "PushVerification",
            "pushSubscriptionId": id,
            "verificationCode": code,
        });
        let mut wait = FIRST_RETRY;
        for attempt in 1..=VERIFICATION_TRIES {
            match post(&ctx.push, &url, &body, MAX_LIFETIME_SECS).await {
                Ok(()) => return,
                Err(e) => {
                    tracing::info!(subscription = %id, attempt, error = %e, "JMAP push verification failed")
                }
            }
            tokio::select! {
                _ = ctx.shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
            wait = (wait * 2).min(LAST_RETRY);
        }
    });
}

/// A subscription as the pusher sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Subscription {
    /// Its JMAP id.
    pub id: String,
    pub url: String,
    /// Type names, or `None` for all.
    pub types: Option<Vec<String>>,
    /// Seconds since the epoch.
    pub expires: i64,
    /// The client set the verification code the server sent.
    pub verified: bool,
}

/// Reads a stored subscription's body.
pub(crate) fn subscription(id: &str, body: &Map<String, Value>) -> Option<Subscription> {
    let code = body.get("_code").and_then(Value::as_str)?;
    Some(Subscription {
        id: format!("P{id}"),
        url: body.get("url")?.as_str()?.to_string(),
        types: body.get("types").and_then(Value::as_array).map(|t| {
            t.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        }),
        expires: crate::message::parse_date(body.get("expires")?.as_str()?)?,
        verified: body.get("verificationCode").and_then(Value::as_str) == Some(code),
    })
}

/// The account's subscriptions that have not expired.
async fn live(ctx: &Context, account: AccountId) -> Result<Vec<Subscription>, store::StoreError> {
    let now = crate::now();
    Ok(ctx
        .store
        .account_records(account, KIND)
        .await?
        .iter()
        .filter_map(|r| {
            let Ok(Value::Object(body)) = serde_json::from_str(r.body.as_deref()?) else {
                return None;
            };
            subscription(&r.id, &body)
        })
        .filter(|s| s.expires > now)
        .collect())
}

/// Starts the account's pusher unless one runs here.
pub(crate) fn ensure(ctx: &Arc<Context>, account: AccountId) {
    if !ctx
        .push
        .running
        .lock()
        .expect("push running lock")
        .insert(account)
    {
        return;
    }
    let ctx = Arc::clone(ctx);
    tokio::spawn(async move { run(ctx, account).await });
}

/// Once per process: starts the pushers of accounts that had live
/// subscriptions before the server started.
pub(crate) fn resume(ctx: &Arc<Context>) {
    if ctx.push.resumed.set(()).is_err() {
        return;
    }
    let ctx = Arc::clone(ctx);
    tokio::spawn(async move {
        let addresses = match ctx.store.list_accounts().await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "JMAP push: listing accounts failed");
                return;
            }
        };
        for address in addresses {
            let Some(account) = ctx.directory.get().account(&address).map(|a| a.id) else {
                continue;
            };
            if live(&ctx, account).await.is_ok_and(|l| !l.is_empty()) {
                ensure(&ctx, account);
            }
        }
    });
}

/// What one verified subscription has still to be told.
struct Pending {
    /// Type states not yet delivered.
    changed: Map<String, Value>,
    /// Not before this.
    at: Instant,
    /// The wait after the next failure.
    backoff: Duration,
}

/// The changes between two sets of states: what `now` holds differently.
fn diff(last: &Map<String, Value>, now: &Map<String, Value>) -> Map<String, Value> {
    now.iter()
        .filter(|(k, v)| last.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Of `changed`, what a subscription asked for.
fn wanted(changed: &Map<String, Value>, types: &Option<Vec<String>>) -> Map<String, Value> {
    changed
        .iter()
        .filter(|(k, _)| types.as_ref().is_none_or(|t| t.contains(k)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The account's pusher: runs while it has live subscriptions.
async fn run(ctx: Arc<Context>, account: AccountId) {
    let mut notice = ctx.push.watch(account);
    let mut last = crate::type_states(&ctx, account).await.unwrap_or_default();
    let mut pending: HashMap<String, Pending> = HashMap::new();
    loop {
        let subscriptions = match live(&ctx, account).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "JMAP push: reading subscriptions failed");
                Vec::new()
            }
        };
        if subscriptions.is_empty() {
            ctx.push
                .running
                .lock()
                .expect("push running lock")
                .remove(&account);
            // One made between the read and the removal started no task.
            let again = live(&ctx, account).await.is_ok_and(|l| !l.is_empty());
            if !again
                || !ctx
                    .push
                    .running
                    .lock()
                    .expect("push running lock")
                    .insert(account)
            {
                return;
            }
            continue;
        }
        pending.retain(|id, _| subscriptions.iter().any(|s| &s.id == id && s.verified));
        let mut watches = crate::change_watches(&ctx, account)
            .await
            .unwrap_or_default();
        let retry = pending
            .values()
            .filter(|p| !p.changed.is_empty())
            .map(|p| p.at)
            .min();
        let changed = async {
            if watches.is_empty() {
                std::future::pending::<()>().await;
            }
            let waits = watches.iter_mut().map(|w| Box::pin(w.changed()));
            let _ = futures_util::future::select_all(waits).await;
        };
        tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            _ = changed => tokio::time::sleep(COALESCE).await,
            _ = notice.changed() => tokio::time::sleep(COALESCE).await,
            _ = async {
                match retry {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending::<()>().await,
                }
            } => {}
            _ = tokio::time::sleep(RECHECK) => {}
        }
        // Verification may have come with the notice: read them again.
        let subscriptions = live(&ctx, account).await.unwrap_or(subscriptions);
        let now = match crate::type_states(&ctx, account).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "JMAP push: reading states failed");
                continue;
            }
        };
        let changed = diff(&last, &now);
        last = now;
        let clock = Instant::now();
        for s in subscriptions.iter().filter(|s| s.verified) {
            let news = wanted(&changed, &s.types);
            if news.is_empty() {
                continue;
            }
            let p = pending.entry(s.id.clone()).or_insert_with(|| Pending {
                changed: Map::new(),
                at: clock,
                backoff: FIRST_RETRY,
            });
            // Newer states replace those not yet delivered.
            p.changed.extend(news);
        }
        for s in subscriptions.iter().filter(|s| s.verified) {
            let Some(p) = pending.get_mut(&s.id) else {
                continue;
            };
            if p.changed.is_empty() || p.at > clock {
                continue;
            }
            let change = json!({
                "@type": "StateChange",
                "changed": {ids::account(account): Value::Object(p.changed.clone())},
            });
            match post(&ctx.push, &s.url, &change, s.expires - crate::now()).await {
                Ok(()) => {
                    p.changed.clear();
                    p.backoff = FIRST_RETRY;
                }
                Err(e) => {
                    tracing::info!(subscription = %s.id, error = %e, wait = ?p.backoff, "JMAP push failed; trying again later");
                    p.at = Instant::now() + p.backoff;
                    p.backoff = (p.backoff * 2).min(LAST_RETRY);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_must_be_https_or_loopback() {
        assert!(url_allowed("https://push.example.com/x?y=1").is_ok());
        assert!(url_allowed("http://127.0.0.1:8080/p").is_ok());
        assert!(url_allowed("http://[::1]:8080/p").is_ok());
        assert!(url_allowed("http://localhost/p").is_ok());
        assert!(url_allowed("http://push.example.com/p").is_err());
        assert!(url_allowed("http://10.0.0.1/p").is_err());
        assert!(url_allowed("ftp://push.example.com/p").is_err());
        assert!(url_allowed("not a url").is_err());
        assert!(url_allowed("https:///nohost").is_err());
    }

    #[test]
    fn stored_subscriptions_are_read_back() {
        let body = json!({
            "deviceClientId": "d", "url": "https://p.example/x", "keys": null,
            "verificationCode": null, "expires": "2030-01-01T00:00:00Z",
            "types": ["Email"], "_code": "abc",
        });
        let s = subscription("7", body.as_object().unwrap()).unwrap();
        assert_eq!(s.id, "P7");
        assert!(!s.verified);
        assert_eq!(s.types, Some(vec!["Email".to_string()]));
        let mut body = body.as_object().unwrap().clone();
        body.insert("verificationCode".into(), "abc".into());
        assert!(subscription("7", &body).unwrap().verified);
        body.insert("verificationCode".into(), "abd".into());
        assert!(!subscription("7", &body).unwrap().verified);
    }

    #[test]
    fn only_moved_and_wanted_types_are_pushed() {
        let last = json!({"Email": "1", "Mailbox": "1", "Identity": "0"});
        let now = json!({"Email": "2", "Mailbox": "2", "Identity": "0"});
        let d = diff(last.as_object().unwrap(), now.as_object().unwrap());
        assert_eq!(
            Value::Object(d.clone()),
            json!({"Email": "2", "Mailbox": "2"})
        );
        let w = wanted(&d, &Some(vec!["Email".into(), "Identity".into()]));
        assert_eq!(Value::Object(w), json!({"Email": "2"}));
        assert_eq!(wanted(&d, &None).len(), 2);
    }
}
