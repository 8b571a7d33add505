//! Message HTML made safe to show: ammonia's allow-list (no script, no
//! event handlers, no `style`, no forms, no frames), links only to
//! `http`, `https` and `mailto`, `cid:` references turned into links to the
//! message's own parts, and remote content (images and other fetched
//! resources) dropped unless the user allowed it. The result is still only
//! ever shown in a sandboxed frame with its own CSP: this is the first of
//! two walls, not the only one.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Attributes that make the browser fetch something by themselves.
const FETCHING: &[&str] = &["src", "srcset", "background", "poster", "lowsrc", "dynsrc"];
/// Schemes a link may have.
const LINK_SCHEMES: &[&str] = &["http", "https", "mailto"];

/// The outcome of [`sanitize_html`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sanitized {
    /// HTML safe to put in the sandboxed frame.
    pub html: String,
    /// Remote resources left out (0 when remote content was allowed).
    pub blocked_remote: usize,
}

fn scheme(value: &str) -> Option<String> {
    let v = value.trim_start();
    if v.starts_with("//") {
        return Some("//".into());
    }
    let colon = v.find(':')?;
    let s = &v[..colon];
    (!s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)))
    .then(|| s.to_ascii_lowercase())
}

/// Percent-encodes a Content-ID for a URL path segment.
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Sanitises message HTML. `cid_base` is the URL prefix under which the
/// message's parts are served by Content-ID (`cid:x` becomes
/// `{cid_base}x`); with `allow_remote` false, every `http(s)` resource is
/// dropped and counted.
pub fn sanitize_html(html: &str, allow_remote: bool, cid_base: &str) -> Sanitized {
    let blocked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&blocked);
    let cid_base = cid_base.to_string();
    let mut builder = ammonia::Builder::default();
    builder
        .link_rel(Some("noopener noreferrer"))
        .set_tag_attribute_value("a", "target", "_blank")
        .add_tag_attributes("img", &["src", "alt", "width", "height", "title"])
        .add_tag_attributes("td", &["bgcolor", "align", "valign", "width"])
        .add_tag_attributes(
            "table",
            &[
                "bgcolor",
                "align",
                "width",
                "border",
                "cellpadding",
                "cellspacing",
            ],
        )
        .add_tag_attributes("font", &["color", "size", "face"])
        .add_tags(&["font", "center"])
        // `cid` passes the scheme check only to be rewritten by the filter.
        .url_schemes(["http", "https", "mailto", "cid"].into_iter().collect())
        .attribute_filter(move |_element, attribute, value| {
            let s = scheme(value);
            if FETCHING.contains(&attribute) {
                return match s.as_deref() {
                    Some("cid") => {
                        let id = value.trim_start()[4..].trim();
                        let id = id.trim_start_matches('<').trim_end_matches('>');
                        Some(Cow::Owned(format!("{cid_base}{}", encode_segment(id))))
                    }
                    Some("http" | "https" | "//") if allow_remote => Some(Cow::Borrowed(value)),
                    Some("http" | "https" | "//") => {
                        counter.fetch_add(1, Ordering::Relaxed);
                        None
                    }
                    // data:, javascript:, relative paths into our own site...
                    _ => None,
                };
            }
            if attribute == "href" {
                return match s.as_deref() {
                    Some(sc) if LINK_SCHEMES.contains(&sc) => Some(Cow::Borrowed(value)),
                    _ => None,
                };
            }
            Some(Cow::Borrowed(value))
        });
    let html = builder.clean(html).to_string();
    Sanitized {
        html,
        blocked_remote: blocked.load(Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(html: &str) -> String {
        sanitize_html(html, false, "/cid/").html
    }

    #[test]
    fn scripts_and_handlers_go() {
        for v in [
            "<script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            "<svg onload=alert(1)>",
            "<body onload=alert(1)>",
            "<iframe src=javascript:alert(1)>",
            "<a href=\"javascript:alert(1)\">x</a>",
            "<a href=\" JaVaScRiPt:alert(1)\">x</a>",
            "<a href=\"data:text/html,<script>alert(1)</script>\">x</a>",
            "<object data=x></object><embed src=x>",
            "<style>body{background:url(javascript:alert(1))}</style>",
            "<div style=\"background:expression(alert(1))\">x</div>",
            "<form action=x><input name=a></form>",
            "<math><mi xlink:href=javascript:alert(1)>x</mi></math>",
            "<scr<script>ipt>alert(1)</script>",
            "<meta http-equiv=refresh content=\"0;url=javascript:alert(1)\">",
            "<base href=javascript:alert(1)//>",
        ] {
            let out = clean(v).to_ascii_lowercase();
            for bad in [
                "<script",
                "onerror",
                "onload",
                "javascript:",
                "<iframe",
                "<object",
                "<embed",
                "<style",
                "expression(",
                "<form",
                "<meta",
                "<base",
                "data:",
            ] {
                assert!(!out.contains(bad), "{v:?} gave {out:?}");
            }
        }
    }

    #[test]
    fn links_keep_safe_schemes_and_open_outside() {
        let out = clean("<a href=\"https://example.org/\">x</a><a href=\"/settings\">y</a>");
        assert!(out.contains("href=\"https://example.org/\""), "{out}");
        assert!(out.contains("target=\"_blank\""), "{out}");
        assert!(out.contains("rel=\"noopener noreferrer\""), "{out}");
        assert!(
            !out.contains("/settings"),
            "relative links into the app go: {out}"
        );
    }

    #[test]
    fn remote_images_are_blocked_and_counted_until_allowed() {
        let html =
            "<img src=\"http://127.0.0.1:9/a.png\"><img src=\"//tracker.example/p.gif\"><p>hi</p>";
        let s = sanitize_html(html, false, "/cid/");
        assert_eq!(s.blocked_remote, 2);
        assert!(
            !s.html.contains("127.0.0.1") && !s.html.contains("tracker"),
            "{}",
            s.html
        );
        let s = sanitize_html(html, true, "/cid/");
        assert_eq!(s.blocked_remote, 0);
        assert!(s.html.contains("http://127.0.0.1:9/a.png"), "{}", s.html);
    }

    #[test]
    fn cid_images_point_at_the_message_parts() {
        let s = sanitize_html("<img src=\"cid:logo 1@example.org\">", false, "/m/3/7/cid/");
        assert!(
            s.html.contains("src=\"/m/3/7/cid/logo%201@example.org\""),
            "{}",
            s.html
        );
        assert_eq!(s.blocked_remote, 0);
    }

    #[test]
    fn data_and_relative_image_sources_go() {
        let out =
            clean("<img src=\"data:image/svg+xml,<svg onload=alert(1)>\"><img src=\"/logout\">");
        assert!(!out.contains("data:") && !out.contains("/logout"), "{out}");
    }

    proptest::proptest! {
        #[test]
        fn no_input_yields_script(s in ".{0,200}") {
            let wrapped = format!("<div>{s}<img src=x onerror=1><script>x</script></div>");
            let out = clean(&wrapped).to_ascii_lowercase();
            proptest::prop_assert!(!out.contains("<script"));
            proptest::prop_assert!(!out.contains("onerror"));
        }
    }
}
