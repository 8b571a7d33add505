//! Message HTML made safe to show: ammonia's allow-list (no script, no
//! event handlers, no forms, no frames), links only to `http`, `https` and
//! `mailto`, `cid:` references turned into links to the message's own
//! parts, and remote content (images and other fetched resources) dropped
//! unless the user allowed it. Styling stays: `style` attributes and
//! `<style>` elements pass through the CSS filter ([`crate::css`]), table
//! and font attributes are kept. The result is still only ever shown in a
//! sandboxed frame with its own CSP: this is the first of two walls, not
//! the only one.

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
    let cid_base = cid_base.to_string();
    sanitize_html_with(html, allow_remote, move |id| {
        Some(format!("{cid_base}{}", encode_segment(id)))
    })
}

/// [`sanitize_html`], with `cid_url` giving the URL of the part with a
/// Content-ID (`None`: no such part, the reference is dropped).
pub fn sanitize_html_with(
    html: &str,
    allow_remote: bool,
    cid_url: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
) -> Sanitized {
    let blocked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&blocked);
    let mut builder = ammonia::Builder::default();
    // `background` is filtered as a fetching attribute below and then
    // becomes CSS (see `backgrounds_to_style`).
    const TABLE_CELL: &[&str] = &[
        "bgcolor",
        "background",
        "align",
        "valign",
        "width",
        "height",
        "nowrap",
        "colspan",
        "rowspan",
    ];
    builder
        .link_rel(Some("noopener noreferrer"))
        .set_tag_attribute_value("a", "target", "_blank")
        // `class` and `id` for the mail's own style rules: the frame is a
        // document of its own, so they name nothing of the app's.
        .add_generic_attributes(&["style", "class", "id", "align", "dir"])
        .add_tag_attributes(
            "img",
            &[
                "src", "alt", "width", "height", "title", "border", "hspace", "vspace",
            ],
        )
        .add_tag_attributes("td", TABLE_CELL)
        .add_tag_attributes("th", TABLE_CELL)
        .add_tag_attributes("tr", &["bgcolor", "align", "valign", "height"])
        .add_tag_attributes(
            "table",
            &[
                "bgcolor",
                "background",
                "align",
                "width",
                "height",
                "border",
                "cellpadding",
                "cellspacing",
                "role",
            ],
        )
        .add_tag_attributes("font", &["color", "size", "face"])
        .add_tags(&["font", "center", "style"])
        // ammonia drops `<style>` with its content by default; it is kept
        // here and its content filtered below.
        .rm_clean_content_tags(&["style"])
        // `cid` passes the scheme check only to be rewritten by the filter.
        .url_schemes(["http", "https", "mailto", "cid"].into_iter().collect())
        .attribute_filter(move |_element, attribute, value| {
            let s = scheme(value);
            if FETCHING.contains(&attribute) {
                return match s.as_deref() {
                    Some("cid") => {
                        let id = value.trim_start()[4..].trim();
                        let id = id.trim_start_matches('<').trim_end_matches('>');
                        cid_url(id).map(Cow::Owned)
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
            if attribute == "style" {
                let f = crate::css::filter_declarations(value, allow_remote);
                counter.fetch_add(f.blocked_remote, Ordering::Relaxed);
                return (!f.css.is_empty()).then_some(Cow::Owned(f.css));
            }
            Some(Cow::Borrowed(value))
        });
    let html = backgrounds_to_style(&builder.clean(html).to_string());
    let mut sheet_blocked = 0;
    let html = filter_style_elements(&html, |css| {
        let f = crate::css::filter_stylesheet(css, allow_remote);
        sheet_blocked += f.blocked_remote;
        f.css
    });
    Sanitized {
        html,
        blocked_remote: blocked.load(Ordering::Relaxed) + sheet_blocked,
    }
}

/// The `background` attribute of a table or cell (HTML 4.01 §13.3.2, no
/// longer in HTML) as a CSS `background-image` in its `style`. Only
/// values the attribute filter kept are left by then: a `cid:` reference
/// made a link to the message's own part, or an `http(s)` URL when remote
/// content is allowed. Walks ammonia's output as
/// [`filter_style_elements`] does; attribute values there are
/// double-quoted with `&`, `"` and no-break spaces escaped.
fn backgrounds_to_style(html: &str) -> String {
    if !html.contains(" background=\"") {
        return html.to_string();
    }
    let unescape = |v: &str| {
        v.replace("&quot;", "\"")
            .replace("&nbsp;", "\u{a0}")
            .replace("&amp;", "&")
    };
    let escape = |v: &str| v.replace('&', "&amp;").replace('"', "&quot;");
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        out.push_str(&rest[..lt]);
        rest = &rest[lt..];
        let mut quoted = false;
        let Some(end) = rest.char_indices().find_map(|(i, c)| match c {
            '"' => {
                quoted = !quoted;
                None
            }
            '>' if !quoted => Some(i),
            _ => None,
        }) else {
            out.push_str(rest);
            return out;
        };
        let tag = &rest[..=end];
        rest = &rest[end + 1..];
        let name: String = tag[1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let table = ["td", "th", "table"]
            .iter()
            .any(|t| name.eq_ignore_ascii_case(t));
        if !table || !tag.contains(" background=\"") {
            out.push_str(tag);
            if name.eq_ignore_ascii_case("style") {
                // Raw text, to its end tag, as it is.
                let lower = rest.to_ascii_lowercase();
                let close = lower.find("</style>").unwrap_or(rest.len());
                out.push_str(&rest[..close]);
                rest = &rest[close..];
            }
            continue;
        }
        // ` name="value"` pairs after the tag name.
        let mut attrs: Vec<(&str, &str)> = Vec::new();
        let mut body = &tag[1 + name.len()..tag.len() - 1];
        while let Some(eq) = body.find("=\"") {
            let attr = body[..eq].trim();
            let after = &body[eq + 2..];
            let Some(q) = after.find('"') else { break };
            attrs.push((attr, &after[..q]));
            body = &after[q + 1..];
        }
        let url = attrs
            .iter()
            .find(|(a, _)| *a == "background")
            .map(|(_, v)| unescape(v));
        let mut style = attrs
            .iter()
            .find(|(a, _)| *a == "style")
            .map(|(_, v)| unescape(v))
            .unwrap_or_default();
        if let Some(url) = url {
            let mut css = String::from("background-image:url(");
            let _ = cssparser::serialize_string(&url, &mut css);
            css.push_str(");");
            if !style.is_empty() {
                style.push(' ');
            }
            style.push_str(&css);
        }
        out.push('<');
        out.push_str(&name);
        for (attr, value) in &attrs {
            if *attr != "background" && *attr != "style" {
                out.push_str(&format!(" {attr}=\"{value}\""));
            }
        }
        out.push_str(&format!(" style=\"{}\">", escape(&style)));
    }
    out.push_str(rest);
    out
}

/// Rewrites the content of every `<style>` element of ammonia's output
/// with `filter`. That output is html5ever's serialisation, regular enough
/// to walk without a parser: in text every `<` is escaped, so a `<` starts
/// a tag; attribute values are double-quoted with `"` escaped; comments
/// are gone; a `<style>`'s raw text runs to its `</style>`. Anything else
/// (which that serialiser never writes) ends the document there.
fn filter_style_elements(html: &str, mut filter: impl FnMut(&str) -> String) -> String {
    if !html.contains("<style") {
        return html.to_string();
    }
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        out.push_str(&rest[..lt]);
        rest = &rest[lt..];
        // The tag, to its `>` outside quotes.
        let mut quoted = false;
        let Some(end) = rest.char_indices().find_map(|(i, c)| match c {
            '"' => {
                quoted = !quoted;
                None
            }
            '>' if !quoted => Some(i),
            _ => None,
        }) else {
            return out;
        };
        let tag = &rest[..=end];
        out.push_str(tag);
        rest = &rest[end + 1..];
        let name: String = tag[1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if name.eq_ignore_ascii_case("style") {
            let lower = rest.to_ascii_lowercase();
            let Some(close) = lower.find("</style>") else {
                return out;
            };
            out.push_str(&filter(&rest[..close]));
            rest = &rest[close..];
        }
    }
    out.push_str(rest);
    out
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
                "url(",
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

    #[test]
    fn newsletter_styling_stays() {
        let out = clean(
            "<style>td.h{background-color:#0b57d0;color:#fff} @import url(x.css);</style>\
             <table bgcolor=\"#ffeeaa\" width=\"600\" cellpadding=\"4\" align=\"center\">\
             <tr><td class=\"h\" style=\"font-family:Georgia; color:#a00; position:fixed\">Hi</td></tr></table>",
        );
        assert!(
            out.contains("<style>td.h{background-color:#0b57d0; color:#fff;}</style>"),
            "{out}"
        );
        assert!(
            out.contains("bgcolor=\"#ffeeaa\"") && out.contains("cellpadding=\"4\""),
            "{out}"
        );
        assert!(
            out.contains("style=\"font-family:Georgia; color:#a00;\""),
            "{out}"
        );
        assert!(!out.contains("import") && !out.contains("fixed"), "{out}");
    }

    #[test]
    fn css_fetches_count_as_remote_content() {
        let html = "<div style=\"background:url(http://t.example/a.gif)\">x</div>\
                    <style>p{background-image:url('https://t.example/b.gif')}</style>";
        let s = sanitize_html(html, false, "/cid/");
        assert_eq!(s.blocked_remote, 2, "{}", s.html);
        assert!(!s.html.contains("t.example"), "{}", s.html);
        let s = sanitize_html(html, true, "/cid/");
        assert!(s.html.contains("https://t.example/b.gif"), "{}", s.html);
    }

    #[test]
    fn cell_backgrounds_become_css_only_when_allowed() {
        let html = "<table background=\"http://t.example/bg.png\"><tr>\
                    <td background=\"https://t.example/c.png?a=1&amp;b=2\" style=\"color:red\">x</td>\
                    <th background=\"cid:bg@example.org\" width=\"3\">y</th>\
                    <td background=\"javascript:alert(1)\">z</td>\
                    <td background=\"/logout\">w</td></tr></table>";
        let s = sanitize_html(html, false, "/m/3/7/cid/");
        assert_eq!(s.blocked_remote, 2, "{}", s.html);
        assert!(!s.html.contains("t.example"), "{}", s.html);
        assert!(!s.html.contains("background=") && !s.html.contains("javascript"));
        assert!(!s.html.contains("logout"), "{}", s.html);
        assert!(
            s.html.contains(
                "<th width=\"3\" style=\"background-image:url(&quot;/m/3/7/cid/bg@example.org&quot;);\">"
            ),
            "{}",
            s.html
        );
        assert!(
            s.html.contains("<td style=\"color:red;\">x</td>"),
            "{}",
            s.html
        );
        let s = sanitize_html(html, true, "/m/3/7/cid/");
        assert_eq!(s.blocked_remote, 0, "{}", s.html);
        assert!(
            s.html.contains(
                "<table style=\"background-image:url(&quot;http://t.example/bg.png&quot;);\">"
            ),
            "{}",
            s.html
        );
        assert!(
            s.html.contains(
                "<td style=\"color:red; background-image:url(&quot;https://t.example/c.png?a=1&amp;b=2&quot;);\">x</td>"
            ),
            "{}",
            s.html
        );
        assert!(!s.html.contains("background=") && !s.html.contains("javascript"));
        // Elements other than tables and cells keep no `background`.
        let s = sanitize_html(
            "<div background=\"http://t.example/d.png\">x</div>",
            true,
            "/cid/",
        );
        assert!(!s.html.contains("t.example"), "{}", s.html);
    }

    #[test]
    fn style_text_cannot_end_its_element() {
        for v in [
            "<style>p{content:'</style><script>alert(1)</script>'}</style>",
            "<style><!--</style><img src=x onerror=alert(1)>--></style>",
            "<img alt=\"<style>\" src=x><p style=\"x\">a</p><style>b{}</style>",
            "<style>a{}</stylex><script>alert(1)</script></style>",
        ] {
            let out = clean(v).to_ascii_lowercase();
            assert!(
                !out.contains("<script") && !out.contains("onerror"),
                "{v:?} gave {out:?}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn no_style_breaks_out(s in ".{0,200}") {
            let wrapped = format!("<style>{s}</style><p style=\"{s}\">x</p>");
            let out = clean(&wrapped).to_ascii_lowercase();
            proptest::prop_assert!(!out.contains("<script"));
            proptest::prop_assert!(!out.contains("url("));
        }

        #[test]
        fn no_input_yields_script(s in ".{0,200}") {
            let wrapped = format!("<div>{s}<img src=x onerror=1><script>x</script></div>");
            let out = clean(&wrapped).to_ascii_lowercase();
            proptest::prop_assert!(!out.contains("<script"));
            proptest::prop_assert!(!out.contains("onerror"));
        }
    }
}
