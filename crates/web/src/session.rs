//! Logins as sessions: a random token in an `HttpOnly; SameSite=Strict`
//! cookie (`Secure` and `__Host-` prefixed on TLS), its SHA-256 in the
//! store, and a per-session CSRF token that every state-changing form
//! carries.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine as _;
use sha2::{Digest, Sha256};
use store::AccountId;

use crate::error::WebError;
use crate::routes::App;

/// Cookie name on plain HTTP.
const COOKIE: &str = "sluice_session";
/// Cookie name on TLS: the `__Host-` prefix makes the browser refuse it
/// unless it is `Secure`, host-only and for `/` (RFC 6265bis §4.1.3.2).
const COOKIE_TLS: &str = "__Host-sluice_session";

/// A logged-in user, taken from the session cookie.
#[derive(Debug, Clone)]
pub(crate) struct User {
    pub account: AccountId,
    pub address: String,
    pub csrf: String,
    pub id_hash: String,
    /// Named in `[web] admins`: may use the admin pages.
    pub admin: bool,
}

/// A fresh random token, URL-safe.
pub(crate) fn new_token() -> String {
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// What the store keeps of a session token.
pub(crate) fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

pub(crate) fn cookie_name(secure: bool) -> &'static str {
    if secure {
        COOKIE_TLS
    } else {
        COOKIE
    }
}

/// The `Set-Cookie` value that starts a session.
pub(crate) fn set_cookie(secure: bool, token: &str, max_age_secs: u64) -> String {
    let name = cookie_name(secure);
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_secs}{secure}")
}

/// The `Set-Cookie` value that ends one.
pub(crate) fn clear_cookie(secure: bool) -> String {
    set_cookie(secure, "", 0)
}

/// The session token sent by the browser, if any.
pub(crate) fn token_from(headers: &HeaderMap, secure: bool) -> Option<String> {
    let name = cookie_name(secure);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .filter(|v| !v.is_empty() && v.len() <= 128)
}

/// Compares without an early exit, so the time taken says nothing about
/// how much of a guessed token was right.
pub(crate) fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Refuses a state-changing request sent by another site: browsers name
/// the requesting origin (`Origin`, and `Sec-Fetch-Site`); a request that
/// names a different one is refused even with a valid token.
pub(crate) fn check_same_origin(headers: &HeaderMap) -> Result<(), WebError> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if !matches!(site, "same-origin" | "none") {
            return Err(WebError::Forbidden("request from another site"));
        }
    }
    if let (Some(origin), Some(host)) = (
        headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()),
        headers.get(header::HOST).and_then(|v| v.to_str().ok()),
    ) {
        let origin_host = origin.split_once("://").map(|(_, h)| h).unwrap_or(origin);
        if origin != "null" && origin_host != host {
            return Err(WebError::Forbidden("request from another site"));
        }
    }
    Ok(())
}

impl User {
    /// Checks the CSRF token of a form sent by this user.
    pub(crate) fn check_csrf(&self, sent: Option<&str>) -> Result<(), WebError> {
        match sent {
            Some(t) if same_token(t, &self.csrf) => Ok(()),
            _ => Err(WebError::Forbidden(
                "the form's security token is missing or stale; reload the page",
            )),
        }
    }
}

/// Not logged in: a page asks for a login, anything else is refused.
pub(crate) struct LoginRequired;

impl IntoResponse for LoginRequired {
    fn into_response(self) -> Response {
        Redirect::to("/login").into_response()
    }
}

impl FromRequestParts<Arc<App>> for User {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<User, Response> {
        let Some(token) = token_from(&parts.headers, app.secure) else {
            return Err(LoginRequired.into_response());
        };
        let id_hash = hash_token(&token);
        let now = crate::routes::now();
        match app.ctx.store.web_session(&id_hash, now).await {
            Ok(Some(s)) => Ok(User {
                account: s.account,
                admin: app.ctx.config.is_admin(&s.address),
                address: s.address,
                csrf: s.csrf,
                id_hash,
            }),
            Ok(None) => Err(LoginRequired.into_response()),
            Err(e) => Err(WebError::Store(e).into_response()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn tokens_are_random_and_hashed() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert_eq!(hash_token(&a).len(), 64);
        assert_ne!(hash_token(&a), a);
    }

    #[test]
    fn cookies_are_strict_and_secure_on_tls() {
        let c = set_cookie(true, "t", 60);
        assert!(c.starts_with("__Host-sluice_session=t;"), "{c}");
        for part in ["HttpOnly", "SameSite=Strict", "Secure", "Path=/"] {
            assert!(c.contains(part), "{c}");
        }
        assert!(!set_cookie(false, "t", 60).contains("Secure"));
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; sluice_session=tok; b=2"),
        );
        assert_eq!(token_from(&h, false).as_deref(), Some("tok"));
        assert_eq!(token_from(&h, true), None);
    }

    #[test]
    fn other_origins_are_refused() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("mail.example.org"));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://mail.example.org"),
        );
        assert!(check_same_origin(&h).is_ok());
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        assert!(check_same_origin(&h).is_err());
        h.remove(header::ORIGIN);
        h.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(check_same_origin(&h).is_err());
    }

    #[test]
    fn csrf_tokens_must_match() {
        let u = User {
            account: 1,
            address: "a@b".into(),
            csrf: "abc".into(),
            id_hash: String::new(),
            admin: false,
        };
        assert!(u.check_csrf(Some("abc")).is_ok());
        assert!(u.check_csrf(Some("abd")).is_err());
        assert!(u.check_csrf(None).is_err());
    }
}
