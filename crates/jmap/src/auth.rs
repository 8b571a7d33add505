//! Who is asking: HTTP Basic credentials (RFC 7617), or a bearer token
//! (RFC 6750 §2.1) the account created in the webmail's Settings, checked
//! by the store's [`store::Authenticator`], the throttle every protocol
//! shares, and only over TLS or from a loopback client, so that a secret
//! never crosses a network in clear text.

use std::net::SocketAddr;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::json;
use store::{AccountId, AuthFailure, MailboxId};

use crate::error::problem;
use crate::Jmap;

/// The account a request acts for.
#[derive(Debug, Clone)]
pub struct User {
    /// Its row id.
    pub account: AccountId,
    /// Its address (the session's `username`).
    pub address: String,
    /// Its INBOX.
    pub inbox: MailboxId,
}

/// Why a request is not let in.
#[derive(Debug)]
pub enum Refusal {
    /// Plain HTTP from a client that is not on loopback.
    NeedsTls,
    /// No credentials, or wrong ones.
    Unauthorized,
    /// Too many failures lately: try later.
    Throttled,
    /// The check could not be made now.
    Unavailable,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (code, detail) = match self {
            Refusal::NeedsTls => (
                StatusCode::FORBIDDEN,
                "JMAP is served over TLS only (or to loopback clients)",
            ),
            Refusal::Unauthorized => (StatusCode::UNAUTHORIZED, "authentication required"),
            Refusal::Throttled => (
                StatusCode::TOO_MANY_REQUESTS,
                "too many failed logins; try again later",
            ),
            Refusal::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "logging in is not possible right now",
            ),
        };
        let mut res = problem(code, json!({"type": "about:blank", "detail": detail}));
        if code == StatusCode::UNAUTHORIZED {
            // RFC 7235 §4.1: a challenge per scheme accepted, in one
            // field (clients that keep one field see both).
            res.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static(
                    "Basic realm=\"JMAP\", charset=\"UTF-8\", Bearer realm=\"JMAP\"",
                ),
            );
        }
        res
    }
}

/// The user and password of an `Authorization: Basic` header.
pub fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// The token of an `Authorization: Bearer` header (RFC 6750 §2.1).
pub fn bearer_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then(|| token.to_string())
}

/// Whether a password may be taken from this client: over TLS, or from
/// loopback, where plain HTTP crosses no network.
fn password_may_travel(secure: bool, peer: SocketAddr) -> bool {
    secure || peer.ip().is_loopback()
}

impl Jmap {
    /// Checks a request's credentials.
    pub(crate) async fn authenticate(
        &self,
        peer: SocketAddr,
        headers: &HeaderMap,
    ) -> Result<User, Refusal> {
        if !password_may_travel(self.secure, peer) {
            return Err(Refusal::NeedsTls);
        }
        if let Some(token) = bearer_token(headers) {
            let store = &self.ctx.store;
            let checked = self
                .ctx
                .auth
                .token_login(peer.ip(), || store::check_api_token(&**store, &token))
                .await;
            return match checked {
                Ok(account) => Ok(User {
                    account: account.id,
                    address: account.address,
                    inbox: account.inbox,
                }),
                Err(AuthFailure::BadCredentials) => {
                    tracing::info!(%peer, "JMAP bearer token refused");
                    Err(Refusal::Unauthorized)
                }
                Err(AuthFailure::Throttled) => Err(Refusal::Throttled),
                Err(AuthFailure::Unavailable) => Err(Refusal::Unavailable),
            };
        }
        let (user, password) = basic_credentials(headers).ok_or(Refusal::Unauthorized)?;
        match self.ctx.auth.login(peer.ip(), &user, &password).await {
            Ok(account) => Ok(User {
                account: account.id,
                address: account.address,
                inbox: account.inbox,
            }),
            Err(AuthFailure::BadCredentials) => {
                tracing::info!(%peer, address = %user, "JMAP login failed");
                Err(Refusal::Unauthorized)
            }
            Err(AuthFailure::Throttled) => Err(Refusal::Throttled),
            Err(AuthFailure::Unavailable) => Err(Refusal::Unavailable),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_only_from_loopback() {
        let at = |a: &str| a.parse::<SocketAddr>().unwrap();
        assert!(password_may_travel(false, at("127.0.0.1:5")));
        assert!(password_may_travel(false, at("[::1]:5")));
        assert!(!password_may_travel(false, at("192.0.2.1:5")));
        assert!(password_may_travel(true, at("192.0.2.1:5")));
    }

    #[test]
    fn basic_credentials_are_read_from_the_header() {
        let mut h = HeaderMap::new();
        assert_eq!(basic_credentials(&h), None);
        // "alice@example.org:pass:word" in base64.
        let token = base64::engine::general_purpose::STANDARD.encode("alice@example.org:pass:word");
        h.insert(
            header::AUTHORIZATION,
            format!("Basic {token}").parse().unwrap(),
        );
        assert_eq!(
            basic_credentials(&h),
            Some(("alice@example.org".into(), "pass:word".into()))
        );
        for bad in ["Bearer abc", "Basic !!!", "Basic", "Basic bm9jb2xvbg=="] {
            h.insert(header::AUTHORIZATION, bad.parse().unwrap());
            assert_eq!(basic_credentials(&h), None, "{bad}");
        }
    }

    #[test]
    fn bearer_tokens_are_read_from_the_header() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "bearer  abc.def ".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("abc.def".into()));
        for bad in ["Basic abc", "Bearer", "Bearer  ", "Tokenabc"] {
            h.insert(header::AUTHORIZATION, bad.parse().unwrap());
            assert_eq!(bearer_token(&h), None, "{bad}");
        }
    }
}
