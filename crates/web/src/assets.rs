//! The stylesheet and the script, compiled in and served under a name that
//! carries a hash of their content, so browsers may keep them a year.

use std::sync::LazyLock;

use sha2::{Digest, Sha256};

/// One static file.
pub(crate) struct Asset {
    /// `/static/app.<hash>.css`
    pub path: String,
    pub content_type: &'static str,
    pub body: &'static str,
}

fn asset(stem: &str, ext: &str, content_type: &'static str, body: &'static str) -> Asset {
    let hash = hex::encode(&Sha256::digest(body.as_bytes())[..8]);
    Asset {
        path: format!("/static/{stem}.{hash}.{ext}"),
        content_type,
        body,
    }
}

/// The stylesheet of every page (light and dark, phone-sized screens).
pub(crate) static CSS: LazyLock<Asset> = LazyLock::new(|| {
    asset(
        "app",
        "css",
        "text/css; charset=utf-8",
        include_str!("../assets/app.css"),
    )
});
/// Keyboard shortcuts and live updates; pages work without it.
pub(crate) static JS: LazyLock<Asset> = LazyLock::new(|| {
    asset(
        "app",
        "js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/app.js"),
    )
});

/// The compose form's script (dropped attachments uploaded with progress,
/// address suggestions), loaded by that page only; the form works without.
pub(crate) static COMPOSE_JS: LazyLock<Asset> = LazyLock::new(|| {
    asset(
        "compose",
        "js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/compose.js"),
    )
});

/// The style of the sandboxed frame a message's HTML is shown in: mail is
/// written for a white page, so it gets one, also in dark mode.
pub(crate) const FRAME_STYLE: &str =
    "html{color-scheme:light}body{background:#fff;color:#000;margin:8px;font:14px/1.4 sans-serif;overflow-wrap:anywhere}img{max-width:100%;height:auto}";
