//! The MTA-STS policy of the local domains (RFC 8461 §3.3), served at
//! `https://mta-sts.DOMAIN/.well-known/mta-sts.txt`: senders that find
//! the domain's `_mta-sts` TXT record fetch it and then deliver only to
//! this host, over TLS with a certificate valid for it. Served only when
//! the request's host is `mta-sts.` and a local domain; the listener's
//! certificate must name that host (with ACME, add it to `[acme] domains`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::routes::App;

/// `[web] mta_sts_mode`: what the served policy asks of senders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MtaStsMode {
    /// Senders report failures (TLS-RPT) but deliver anyway: the safe
    /// start while the certificate and DNS settle.
    #[default]
    Testing,
    /// Senders deliver only over verified TLS to the listed MX.
    Enforce,
    /// Withdraws a policy: senders forget it.
    None,
    /// No policy is served (404).
    Off,
}

/// The policy text for an MX `hostname` (RFC 8461 §3.2), or `None` when
/// the mode is `off`.
pub fn policy(mode: MtaStsMode, hostname: &str) -> Option<String> {
    let mode = match mode {
        MtaStsMode::Testing => "testing",
        MtaStsMode::Enforce => "enforce",
        MtaStsMode::None => "none",
        MtaStsMode::Off => return None,
    };
    // A week: long enough to protect, short enough to change course.
    Some(format!(
        "version: STSv1\r\nmode: {mode}\r\nmx: {hostname}\r\nmax_age: 604800\r\n"
    ))
}

/// The `id` of the `_mta-sts` TXT record for a policy text: it changes
/// when the policy does (RFC 8461 §3.1), so senders fetch it again.
pub fn policy_id(policy: &str) -> String {
    // FNV-1a, 64 bits: stable across builds and platforms, and the id only
    // needs to differ between policies, not to resist anyone.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in policy.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

pub(crate) async fn serve(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
    let domain = host
        .trim_end_matches('.')
        .to_ascii_lowercase()
        .strip_prefix("mta-sts.")
        .map(str::to_string);
    let local = domain.is_some_and(|d| app.ctx.directory.get().is_local_domain(&d));
    match policy(app.ctx.config.mta_sts_mode, &app.ctx.services.hostname) {
        Some(text) if local => (
            [
                (header::CONTENT_TYPE, "text/plain"),
                (header::CACHE_CONTROL, "max-age=3600"),
            ],
            text,
        )
            .into_response(),
        _ => (StatusCode::NOT_FOUND, "no MTA-STS policy here\n").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_parses_as_rfc_8461_says() {
        let text = policy(MtaStsMode::Enforce, "mx.example.org").unwrap();
        assert_eq!(
            text,
            "version: STSv1\r\nmode: enforce\r\nmx: mx.example.org\r\nmax_age: 604800\r\n"
        );
        assert!(policy(MtaStsMode::Off, "mx.example.org").is_none());
        let testing = policy(MtaStsMode::Testing, "mx.example.org").unwrap();
        assert_ne!(policy_id(&text), policy_id(&testing));
        assert_eq!(policy_id(&text), policy_id(&text.clone()));
        assert!(policy_id(&text).chars().all(|c| c.is_ascii_alphanumeric()));
    }
}
