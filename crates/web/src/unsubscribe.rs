//! What a message offers for leaving its list: `List-Unsubscribe`
//! (RFC 2369 §3.2), the one-click POST of RFC 8058, or a `mailto:` URI
//! (RFC 6068) to send a message to. No I/O: the fields come from the
//! stored header block.
//!
//! RFC 8058 §4 wants a one-click POST only when a valid DKIM signature
//! covers both `List-Unsubscribe` and `List-Unsubscribe-Post`: without
//! that, anyone could make the server POST to a URL of their choosing in
//! a list's name. The store keeps our own `Authentication-Results:` field
//! in front of each incoming message (fields that claim our authserv-id
//! are removed on arrival), so a `dkim=pass` there is matched to the
//! `DKIM-Signature:` field it names (`header.d`/`header.i`, `header.s`,
//! `header.b`) and that signature's `h=` must list both fields.

use crate::routes::header_field;

/// What the reading page offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Offer {
    /// POST `List-Unsubscribe=One-Click` to this https URL (RFC 8058 §3.1).
    OneClick(String),
    /// Send this message (RFC 6068).
    Mail(Mailto),
    /// A page to open, never POSTed to.
    Link(String),
}

/// A `mailto:` URI taken apart (RFC 6068 §2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mailto {
    pub to: Vec<String>,
    pub subject: String,
    pub body: String,
}

/// The URIs of a `List-Unsubscribe` value, in the sender's order of
/// preference: each in angle brackets, separated by commas (RFC 2369 §2).
fn uris(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find('<') {
        let Some(len) = rest[start..].find('>') else {
            break;
        };
        // RFC 2369 §2: white space within the brackets is ignored.
        let uri: String = rest[start + 1..start + len]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if !uri.is_empty() && uri.len() < 2048 {
            out.push(uri);
        }
        rest = &rest[start + len + 1..];
    }
    out
}

/// Percent-decoded text (RFC 3986 §2.1); `None` if it is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A `mailto:` URI with one or more addresses, `subject` and `body`; other
/// header fields are ignored (RFC 6068 §3 lets a client leave out what it
/// considers unsafe).
pub(crate) fn parse_mailto(uri: &str) -> Option<Mailto> {
    let rest = uri
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("mailto:"))
        .map(|_| &uri[7..])?;
    let (to, query) = rest.split_once('?').unwrap_or((rest, ""));
    let addresses = |list: &str| crate::compose::parse_addresses(&percent_decode(list)?).ok();
    let mut m = Mailto {
        to: addresses(to)?,
        subject: String::new(),
        body: String::new(),
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name.to_ascii_lowercase().as_str() {
            "to" => m.to.extend(addresses(value)?),
            "subject" => m.subject = percent_decode(value)?,
            "body" => m.body = percent_decode(value)?,
            _ => {}
        }
    }
    // A subject is one line: no field can be added through it.
    if m.subject.contains(['\r', '\n']) {
        return None;
    }
    (!m.to.is_empty()).then_some(m)
}

/// The tags of a `DKIM-Signature:` value (RFC 6376 §3.2), names lower
/// case, white space removed from values.
fn tags(value: &str) -> Vec<(String, String)> {
    value
        .split(';')
        .filter_map(|t| {
            let (n, v) = t.split_once('=')?;
            let v: String = v.chars().filter(|c| !c.is_whitespace()).collect();
            Some((n.trim().to_ascii_lowercase(), v))
        })
        .collect()
}

/// Every field `name` of a header block, unfolded.
fn fields(header: &[u8], name: &str) -> Vec<String> {
    let text = String::from_utf8_lossy(header);
    let mut out: Vec<String> = Vec::new();
    let mut inside = false;
    for line in text.split("\r\n").flat_map(|l| l.split('\n')) {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            if inside {
                if let Some(v) = out.last_mut() {
                    v.push(' ');
                    v.push_str(line.trim());
                }
            }
            continue;
        }
        inside = false;
        if let Some((n, v)) = line.split_once(':') {
            if n.trim().eq_ignore_ascii_case(name) {
                out.push(v.trim().to_string());
                inside = true;
            }
        }
    }
    out
}

/// The `dkim=pass` results of our `Authentication-Results:` fields, each
/// as its properties (`header.d`, `header.i`, `header.s`, `header.b`).
fn dkim_passes(header: &[u8], authserv_id: &str) -> Vec<Vec<(String, String)>> {
    let mut out = Vec::new();
    for field in fields(header, "authentication-results") {
        let mut parts = field.split(';');
        let id = parts
            .next()
            .and_then(|p| p.split_whitespace().next())
            .unwrap_or("");
        if !id.eq_ignore_ascii_case(authserv_id) {
            continue;
        }
        for result in parts {
            let mut words = result.split_whitespace();
            if !words
                .next()
                .is_some_and(|w| w.eq_ignore_ascii_case("dkim=pass"))
            {
                continue;
            }
            let props = words
                .filter_map(|w| {
                    let (n, v) = w.split_once('=')?;
                    Some((n.to_ascii_lowercase(), v.trim_matches('"').to_string()))
                })
                .collect();
            out.push(props);
        }
    }
    out
}

/// Whether a DKIM signature that passed our check covers both unsubscribe
/// fields (RFC 8058 §4).
pub(crate) fn signed_by_dkim(header: &[u8], authserv_id: &str) -> bool {
    let signatures: Vec<Vec<(String, String)>> = fields(header, "dkim-signature")
        .iter()
        .map(|v| tags(v))
        .collect();
    let tag = |t: &[(String, String)], name: &str| {
        t.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    dkim_passes(header, authserv_id).iter().any(|pass| {
        let prop = |name: &str| {
            pass.iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        signatures.iter().any(|sig| {
            let same_signer = match (prop("header.i"), prop("header.d")) {
                (Some(i), _) => tag(sig, "i").eq_ignore_ascii_case(i),
                (None, Some(d)) => tag(sig, "d").eq_ignore_ascii_case(d),
                (None, None) => false,
            };
            let same_selector = prop("header.s").is_none_or(|s| tag(sig, "s") == s);
            let same_value = prop("header.b").is_none_or(|b| tag(sig, "b").starts_with(b));
            let covered = tag(sig, "h")
                .split(':')
                .map(str::to_ascii_lowercase)
                .collect::<Vec<_>>();
            same_signer
                && same_selector
                && same_value
                && ["list-unsubscribe", "list-unsubscribe-post"]
                    .iter()
                    .all(|f| covered.iter().any(|c| c == f))
        })
    })
}

/// What the message with this header block offers, if anything.
/// `authserv_id`: ours, when incoming mail is checked (else no one-click).
pub(crate) fn offer(header: &[u8], authserv_id: Option<&str>) -> Option<Offer> {
    let uris = uris(&header_field(header, "list-unsubscribe"));
    let https = uris.iter().find(|u| {
        u.get(..8)
            .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
    });
    let one_click =
        header_field(header, "list-unsubscribe-post").trim() == "List-Unsubscribe=One-Click";
    if let (Some(url), true, Some(id)) = (https, one_click, authserv_id) {
        if signed_by_dkim(header, id) {
            return Some(Offer::OneClick(url.clone()));
        }
    }
    if let Some(m) = uris.iter().find_map(|u| parse_mailto(u)) {
        return Some(Offer::Mail(m));
    }
    uris.iter()
        .find(|u| {
            let l = u.to_ascii_lowercase();
            l.starts_with("https://") || l.starts_with("http://")
        })
        .map(|u| Offer::Link(u.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGNED: &str = "Authentication-Results: mx.example.org;\r\n\tdkim=pass header.d=news.test header.s=s1 header.b=AbCdEfGh;\r\n\tspf=pass smtp.mailfrom=news.test\r\n\
        DKIM-Signature: v=1; a=rsa-sha256; d=news.test; s=s1;\r\n\th=from:subject:list-unsubscribe:List-Unsubscribe-Post;\r\n\tbh=x; b=AbCdEf\r\n Gh123=\r\n\
        List-Unsubscribe: <mailto:leave@news.test?subject=bye>,\r\n <https://news.test/u/1>\r\n\
        List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n\r\n";

    #[test]
    fn one_click_needs_both_fields_signed_and_our_pass() {
        let h = SIGNED.as_bytes();
        assert_eq!(
            offer(h, Some("mx.example.org")),
            Some(Offer::OneClick("https://news.test/u/1".into()))
        );
        // Not our check, or no check: the mailto instead.
        let mail = Offer::Mail(Mailto {
            to: vec!["leave@news.test".into()],
            subject: "bye".into(),
            body: String::new(),
        });
        assert_eq!(offer(h, Some("other.example")), Some(mail.clone()));
        assert_eq!(offer(h, None), Some(mail.clone()));
        // The signature does not cover List-Unsubscribe-Post.
        let partly = SIGNED.replace(":List-Unsubscribe-Post", "");
        assert_eq!(
            offer(partly.as_bytes(), Some("mx.example.org")),
            Some(mail.clone())
        );
        // Another signature than the one that passed.
        let other = SIGNED.replace("header.b=AbCdEfGh", "header.b=Zzzzzzzz");
        assert_eq!(
            offer(other.as_bytes(), Some("mx.example.org")),
            Some(mail.clone())
        );
        let failed = SIGNED.replace("dkim=pass", "dkim=fail");
        assert_eq!(offer(failed.as_bytes(), Some("mx.example.org")), Some(mail));
        // http: is never POSTed to, only linked.
        let plain = "List-Unsubscribe: <http://news.test/u/1>\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n\r\n";
        assert_eq!(
            offer(plain.as_bytes(), Some("mx.example.org")),
            Some(Offer::Link("http://news.test/u/1".into()))
        );
        assert_eq!(offer(b"Subject: hi\r\n\r\n", None), None);
    }

    #[test]
    fn mailto_uris_are_read_as_rfc_6068_says() {
        assert_eq!(
            parse_mailto(
                "mailto:a@x.test,B@Y.test?subject=Leave%20me&body=unsubscribe%0D%0Anow&cc=c@z.test"
            ),
            Some(Mailto {
                to: vec!["a@x.test".into(), "B@Y.test".into()],
                subject: "Leave me".into(),
                body: "unsubscribe\r\nnow".into(),
            })
        );
        assert_eq!(
            parse_mailto("MAILTO:?to=list%2Bleave@x.test").map(|m| m.to),
            Some(vec!["list+leave@x.test".into()])
        );
        assert_eq!(parse_mailto("mailto:a@x.test?subject=a%0ABcc:%20b@y"), None);
        assert_eq!(parse_mailto("mailto:not an address"), None);
        assert_eq!(parse_mailto("mailto:"), None);
        assert_eq!(parse_mailto("mailto:a@x.test?subject=%ZZ"), None);
        assert_eq!(parse_mailto("https://x.test"), None);
    }

    #[test]
    fn uris_in_brackets() {
        assert_eq!(
            uris("<mailto:a@x.test>, (comment) <https://x.test/a b>"),
            ["mailto:a@x.test", "https://x.test/ab"]
        );
    }
}
