//! The session resource (RFC 8620 §2): what the server offers the user,
//! with the limits it enforces, and where the API, upload, download and
//! push endpoints are.

use std::hash::{Hash, Hasher};

use axum::http::HeaderMap;
use serde_json::{json, Map, Value};

use crate::auth::User;
use crate::{ids, Jmap, CAPABILITIES, CORE};

impl Jmap {
    /// `scheme://host` as the client reached us, for the absolute URLs of
    /// the session object (clients resolve nothing relative).
    pub(crate) fn base_url(&self, headers: &HeaderMap) -> String {
        let scheme = if self.secure { "https" } else { "http" };
        let host = headers
            .get(axum::http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .filter(|h| valid_host(h))
            .map_or_else(|| self.ctx.hostname.clone(), str::to_string);
        format!("{scheme}://{host}")
    }

    /// The session object for `user`.
    pub(crate) fn session(&self, user: &User, base: &str) -> Value {
        let mut session = self.session_core(user);
        let state = session_state(&session);
        let urls = [
            ("apiUrl", format!("{base}/jmap/api")),
            (
                "downloadUrl",
                format!("{base}/jmap/download/{{accountId}}/{{blobId}}/{{name}}?accept={{type}}"),
            ),
            ("uploadUrl", format!("{base}/jmap/upload/{{accountId}}/")),
            (
                "eventSourceUrl",
                format!(
                    "{base}/jmap/eventsource?types={{types}}&closeafter={{closeafter}}&ping={{ping}}"
                ),
            ),
        ];
        for (key, url) in urls {
            session[key] = url.into();
        }
        // RFC 8887 §4.1: where the WebSocket is, and that it pushes.
        let ws_base = base
            .replacen("https://", "wss://", 1)
            .replacen("http://", "ws://", 1);
        session["capabilities"][crate::ws::WEBSOCKET] = json!({
            "url": format!("{ws_base}/jmap/ws"),
            "supportsPush": true,
        });
        session["state"] = state.into();
        session
    }

    /// The session's state (`sessionState` of every API response).
    pub(crate) fn session_state_of(&self, user: &User) -> String {
        session_state(&self.session_core(user))
    }

    /// What the session object says, less its URLs (which follow the
    /// host the client used) and its state (which is made from this).
    fn session_core(&self, user: &User) -> Value {
        let c = &self.ctx.config;
        let mut capabilities = Map::new();
        capabilities.insert(
            CORE.into(),
            json!({
                "maxSizeUpload": c.max_size_upload,
                "maxConcurrentUpload": c.max_concurrent_upload,
                "maxSizeRequest": c.max_size_request,
                "maxConcurrentRequests": c.max_concurrent_requests,
                "maxCallsInRequest": c.max_calls_in_request,
                "maxObjectsInGet": c.max_objects_in_get,
                "maxObjectsInSet": c.max_objects_in_set,
                // The collations Email/query and Mailbox/query compare
                // with (RFC 4790 names).
                "collationAlgorithms": ["i;ascii-casemap", "i;unicode-casemap", "i;octet"],
            }),
        );
        let account = ids::account(user.account);
        let mut account_capabilities = Map::new();
        let mut primary = Map::new();
        for (uri, server, per_account) in CAPABILITIES {
            if *uri != CORE {
                capabilities.insert(uri.to_string(), server());
            }
            // Core too, as Fastmail does: clients (jmapc) take the core
            // primary account as the one to use.
            account_capabilities.insert(uri.to_string(), per_account(self));
            primary.insert(uri.to_string(), account.clone().into());
        }
        json!({
            "capabilities": capabilities,
            "accounts": {
                account.clone(): {
                    "name": user.address,
                    "isPersonal": true,
                    "isReadOnly": false,
                    "accountCapabilities": account_capabilities,
                }
            },
            "primaryAccounts": primary,
            "username": user.address,
        })
    }
}

/// The session's state: it changes when what the object says does (§2:
/// the client fetches the session again when a response's `sessionState`
/// differs).
fn session_state(session: &Value) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    session.to_string().hash(&mut h);
    format!("{:x}", h.finish())
}

/// A `Host` header worth echoing into URLs: a name or address and an
/// optional port, nothing that could break out of the URL.
fn valid_host(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 255
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_that_could_break_a_url_are_not_echoed() {
        assert!(valid_host("mail.example.org:8443"));
        assert!(valid_host("[::1]:80"));
        for bad in ["", "a/b", "a b", "x\"y", "h?x", "a@b"] {
            assert!(!valid_host(bad), "{bad}");
        }
    }

    #[test]
    fn the_state_follows_the_content() {
        let a = json!({"x": 1});
        let b = json!({"x": 2});
        assert_eq!(session_state(&a), session_state(&a.clone()));
        assert_ne!(session_state(&a), session_state(&b));
    }
}
