//! RFC 5230 vacation: whether to answer at all (§4.5, §4.6, §5) and what
//! the answer is.

use sha2::{Digest, Sha256};

use crate::address;
use crate::message::Message;

/// RFC 5230 §4.1: the default period, 7 days.
pub(crate) const DEFAULT_DAYS: u64 = 7;

/// Everything the decision needs.
pub(crate) struct Request<'a> {
    pub message: &'a Message,
    /// The envelope sender ("" for the null sender).
    pub sender: &'a str,
    /// The user's own addresses: the context's, the envelope recipient,
    /// and the script's `:addresses`.
    pub own: Vec<String>,
}

/// Whether an answer may be sent; the reason when not (for tracing).
pub(crate) fn suppressed(r: &Request) -> Option<&'static str> {
    // RFC 5230 §5: never answer the null sender.
    if r.sender.is_empty() {
        return Some("null sender");
    }
    let local = r
        .sender
        .rsplit_once('@')
        .map_or(r.sender, |(l, _)| l)
        .to_ascii_lowercase();
    // RFC 5230 §4.6: mailing-list and daemon senders.
    if local == "mailer-daemon"
        || local == "listserv"
        || local == "majordomo"
        || local.starts_with("owner-")
        || local.ends_with("-request")
    {
        return Some("list or daemon sender");
    }
    let msg = r.message;
    // RFC 5230 §5: automated messages (RFC 3834) and lists (RFC 2369, 2919).
    if msg.values("auto-submitted").iter().any(|v| {
        !v.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .eq_ignore_ascii_case("no")
    }) {
        return Some("auto-submitted message");
    }
    if msg
        .names()
        .any(|n| n.len() > 5 && n[..5].eq_ignore_ascii_case("list-"))
    {
        return Some("mailing list message");
    }
    if msg.values("precedence").iter().any(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "bulk" | "list" | "junk"
        )
    }) {
        return Some("bulk message");
    }
    // RFC 5230 §4.6: never answer oneself.
    if r.own.iter().any(|a| a.eq_ignore_ascii_case(r.sender)) {
        return Some("sender is the user");
    }
    // RFC 5230 §4.5: answer only mail addressed to the user.
    let addressed = ["to", "cc", "bcc", "resent-to", "resent-cc"]
        .iter()
        .any(|h| {
            msg.raw_values(h).iter().any(|v| {
                address::parse_list(v)
                    .iter()
                    .any(|a| r.own.iter().any(|o| o.eq_ignore_ascii_case(a)))
            })
        });
    if !addressed {
        return Some("user not addressed");
    }
    None
}

/// RFC 5230 §4.2: without `:handle`, answers with the same arguments count
/// as the same answer; the handle is a digest of them.
pub(crate) fn default_handle(
    reason: &str,
    subject: Option<&str>,
    from: Option<&str>,
    mime: bool,
) -> String {
    let mut h = Sha256::new();
    h.update(reason.as_bytes());
    h.update([0]);
    h.update(subject.unwrap_or("<default-subject>").as_bytes());
    h.update([0]);
    h.update(from.unwrap_or("<default-from>").as_bytes());
    h.update([0]);
    h.update(if mime { b"mime" as &[u8] } else { b"no-mime" });
    hex::encode(&h.finalize()[..16])
}

/// RFC 5230 §4.3: "Auto: " and the original subject.
pub(crate) fn default_subject(message: &Message) -> String {
    let original = message.values("subject").first().copied().unwrap_or("");
    format!("Auto: {original}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(m: &'a Message, sender: &'a str) -> Request<'a> {
        Request {
            message: m,
            sender,
            own: vec!["me@ex.com".into()],
        }
    }

    #[test]
    fn decides() {
        let ok = Message::parse(b"To: Me <me@ex.com>\r\nSubject: hi\r\n\r\n");
        assert_eq!(suppressed(&req(&ok, "you@x.org")), None);
        assert!(suppressed(&req(&ok, "")).is_some());
        assert!(suppressed(&req(&ok, "MAILER-DAEMON@x.org")).is_some());
        assert!(suppressed(&req(&ok, "owner-list@x.org")).is_some());
        assert!(suppressed(&req(&ok, "list-request@x.org")).is_some());
        assert!(suppressed(&req(&ok, "me@ex.com")).is_some());
        let other = Message::parse(b"To: them@ex.com\r\n\r\n");
        assert!(suppressed(&req(&other, "you@x.org")).is_some());
        for h in [
            "List-Id: <l.x.org>",
            "Precedence: bulk",
            "Auto-Submitted: auto-replied",
        ] {
            let m = Message::parse(format!("To: me@ex.com\r\n{h}\r\n\r\n").as_bytes());
            assert!(suppressed(&req(&m, "you@x.org")).is_some(), "{h}");
        }
        let m = Message::parse(b"To: me@ex.com\r\nAuto-Submitted: no\r\n\r\n");
        assert_eq!(suppressed(&req(&m, "you@x.org")), None);
        assert_eq!(default_subject(&ok), "Auto: hi");
        assert_ne!(
            default_handle("a", None, None, false),
            default_handle("b", None, None, false)
        );
    }
}
