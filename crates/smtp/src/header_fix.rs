//! Header fixes made while a message streams into the store. On message
//! submission (RFC 6409 §8): `Bcc:` removed, `Date:` and `Message-ID:`
//! added when missing. On mail arriving from other servers:
//! `Authentication-Results:` fields that claim to be ours removed (RFC 8601
//! §5), since only the field we add may be trusted. Only the header block
//! is held (up to [`MAX_HEADER`]); the body passes straight through. The
//! `From:` addresses are noted for the sender check.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use store::{Delivery, DeliveryReceipt, MessageWriter};
use time::format_description::well_known::Rfc2822;
use time::OffsetDateTime;

/// A header block longer than this is passed on unfixed (and its `From:`
/// unchecked is refused by the caller, see [`Seen::complete`]).
pub(crate) const MAX_HEADER: usize = 256 * 1024;

/// What the fixer saw of the header, for the session.
#[derive(Debug, Default, Clone)]
pub(crate) struct Seen {
    /// Addresses in `From:` fields.
    pub from: Vec<String>,
    /// The header block was read whole and fixed.
    pub complete: bool,
}

/// Which fixes a [`HeaderFix`] makes.
pub(crate) enum Fixes {
    /// Submission: `Bcc:` goes, `Date:` and `Message-ID:` (with this host
    /// name) come.
    Submission { hostname: String },
    /// Arriving mail: `Authentication-Results:` with our authserv-id go
    /// (when the checks run), and with `spam_fields` the spam score
    /// fields we add ourselves, so a sender cannot pass as scored.
    Arriving {
        authserv_id: Option<String>,
        spam_fields: bool,
    },
}

/// A [`MessageWriter`] that fixes the header on the way into `inner`.
pub(crate) struct HeaderFix {
    inner: Box<dyn MessageWriter>,
    head: Vec<u8>,
    /// The header was written out; the rest passes through.
    passing: bool,
    fixes: Fixes,
    seen: Arc<Mutex<Seen>>,
    size: u64,
}

impl HeaderFix {
    pub(crate) fn new(
        inner: Box<dyn MessageWriter>,
        fixes: Fixes,
    ) -> (HeaderFix, Arc<Mutex<Seen>>) {
        let seen = Arc::new(Mutex::new(Seen::default()));
        (
            HeaderFix {
                inner,
                head: Vec::new(),
                passing: false,
                fixes,
                seen: Arc::clone(&seen),
                size: 0,
            },
            seen,
        )
    }

    /// Writes the fixed header and whatever followed it.
    async fn flush_head(&mut self, end: Option<usize>) -> store::Result<()> {
        self.passing = true;
        let head = std::mem::take(&mut self.head);
        let Some(end) = end else {
            if head.len() > MAX_HEADER {
                // Unfixed: the caller refuses it when it must check From.
                return self.inner.write(&head).await;
            }
            // The message is all header.
            let (fixed, from) = fix(&head, &self.fixes);
            self.note(from);
            return self.inner.write(&fixed).await;
        };
        let (fixed, from) = fix(&head[..end], &self.fixes);
        self.note(from);
        self.inner.write(&fixed).await?;
        self.inner.write(&head[end..]).await
    }

    fn note(&self, from: Vec<String>) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.from = from;
        seen.complete = true;
    }
}

#[async_trait]
impl MessageWriter for HeaderFix {
    async fn write(&mut self, data: &[u8]) -> store::Result<()> {
        self.size += data.len() as u64;
        if self.passing {
            return self.inner.write(data).await;
        }
        let searched = self.head.len().saturating_sub(3);
        self.head.extend_from_slice(data);
        if let Some(end) = header_end(&self.head, searched) {
            return self.flush_head(Some(end)).await;
        }
        if self.head.len() > MAX_HEADER {
            return self.flush_head(None).await;
        }
        Ok(())
    }

    fn size(&self) -> u64 {
        self.size
    }

    async fn deliver(mut self: Box<Self>, delivery: Delivery) -> store::Result<DeliveryReceipt> {
        if !self.passing {
            self.flush_head(None).await?;
        }
        self.inner.deliver(delivery).await
    }

    async fn abort(self: Box<Self>) {
        self.inner.abort().await
    }
}

/// Where the header block of `text` ends: the index just past the line
/// end of its last field (the empty line follows). Looks from `from` on.
pub(crate) fn header_end(text: &[u8], from: usize) -> Option<usize> {
    if text.starts_with(b"\r\n") || text.starts_with(b"\n") {
        return Some(0);
    }
    let mut i = from;
    while i < text.len() {
        if text[i] == b'\n' {
            let rest = &text[i + 1..];
            if rest.starts_with(b"\r\n") || rest.starts_with(b"\n") {
                return Some(i + 1);
            }
        }
        i += 1;
    }
    None
}

/// The fixed header block and the `From:` addresses (for the fuzz
/// targets).
pub(crate) fn fix_header(head: &[u8], fixes: &Fixes) -> (Vec<u8>, Vec<String>) {
    fix(head, fixes)
}

/// The fixed header block and the `From:` addresses.
fn fix(head: &[u8], fixes: &Fixes) -> (Vec<u8>, Vec<String>) {
    let mut out = Vec::with_capacity(head.len() + 128);
    let mut from = Vec::new();
    let mut has_date = false;
    let mut has_id = false;
    for field in fields(head) {
        let name_end = field.iter().position(|&b| b == b':').unwrap_or(0);
        let name = String::from_utf8_lossy(&field[..name_end])
            .trim()
            .to_ascii_lowercase();
        let value = &field[(name_end + 1).min(field.len())..];
        match (name.as_str(), fixes) {
            // RFC 6409 §8.1.3... RFC 5322 §3.6.3: Bcc is for the envelope.
            ("bcc", Fixes::Submission { .. }) => continue,
            (
                "authentication-results",
                Fixes::Arriving {
                    authserv_id: Some(id),
                    ..
                },
            ) if authserv_id_of(value).eq_ignore_ascii_case(id) => continue,
            (
                "x-spam-score" | "x-spam-status",
                Fixes::Arriving {
                    spam_fields: true, ..
                },
            ) => continue,
            ("date", _) => has_date = true,
            ("message-id", _) => has_id = true,
            ("from", _) => from.extend(addresses(&String::from_utf8_lossy(value))),
            _ => {}
        }
        out.extend_from_slice(field);
    }
    let Fixes::Submission { hostname } = fixes else {
        return (out, from);
    };
    if !out.is_empty() && !out.ends_with(b"\n") {
        out.extend_from_slice(b"\r\n");
    }
    if !has_date {
        let now = OffsetDateTime::now_utc()
            .format(&Rfc2822)
            .unwrap_or_default();
        out.extend_from_slice(format!("Date: {now}\r\n").as_bytes());
    }
    if !has_id {
        let id = format!(
            "{:016x}{:08x}",
            rand::random::<u64>(),
            rand::random::<u32>()
        );
        out.extend_from_slice(format!("Message-ID: <{id}@{hostname}>\r\n").as_bytes());
    }
    (out, from)
}

/// The authserv-id an `Authentication-Results:` value starts with (RFC
/// 8601 §2.2): the first word, before any comment, version or `;`.
fn authserv_id_of(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    let mut rest = text.trim_start();
    // A comment may come first: "(...)".
    while let Some(after) = rest.strip_prefix('(') {
        rest = after.split_once(')').map_or("", |(_, r)| r).trim_start();
    }
    rest.split(|c: char| c == ';' || c == '(' || c.is_whitespace())
        .next()
        .unwrap_or_default()
        .trim_matches('"')
        .to_string()
}

/// The header fields of a block, each with its continuation lines.
fn fields(head: &[u8]) -> Vec<&[u8]> {
    let mut out: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < head.len() {
        let line_end = head[i..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(head.len(), |p| i + p + 1);
        let continues = line_end < head.len() && matches!(head[line_end], b' ' | b'\t');
        if !continues {
            out.push(&head[start..line_end]);
            start = line_end;
        }
        i = line_end;
    }
    out
}

/// The addresses in an address-list field value: `<a@b>` forms, else bare
/// `a@b` words.
fn addresses(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open..].find('>') else {
            break;
        };
        let a = rest[open + 1..open + close].trim();
        if a.contains('@') {
            out.push(a.to_string());
        }
        rest = &rest[open + close + 1..];
    }
    if out.is_empty() {
        for word in value.split(|c: char| c.is_whitespace() || c == ',') {
            let w = word.trim_matches(|c: char| c == '"' || c == '(' || c == ')');
            if w.contains('@') {
                out.push(w.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bcc_goes_and_date_and_message_id_are_added() {
        let head = b"From: Alice <alice@example.org>\r\nBcc: secret@x.org,\r\n\tother@y.org\r\nSubject: hi\r\n";
        let (out, from) = fix(head, &submission("mx.example.org"));
        let text = String::from_utf8(out).unwrap();
        assert!(
            !text.contains("secret") && !text.contains("other@y"),
            "{text}"
        );
        assert!(
            text.starts_with("From: Alice <alice@example.org>\r\nSubject: hi\r\nDate: "),
            "{text}"
        );
        assert!(
            text.contains("Message-ID: <") && text.ends_with("@mx.example.org>\r\n"),
            "{text}"
        );
        assert_eq!(from, ["alice@example.org"]);
    }

    fn submission(hostname: &str) -> Fixes {
        Fixes::Submission {
            hostname: hostname.into(),
        }
    }

    #[test]
    fn our_own_results_and_spam_fields_are_removed_from_arriving_mail() {
        let head = b"X-Spam-Status: No, score=-9\r\nAuthentication-Results: MX.example.org; dkim=pass\r\nX-Spam-Score: -9\r\nAuthentication-Results: (forged)\r\n mx.example.org 1; spf=pass\r\nAuthentication-Results: relay.example.net;\r\n\tdkim=pass header.d=example.net\r\nFrom: a@example.net\r\nBcc: kept@example.net\r\n";
        let fixes = Fixes::Arriving {
            authserv_id: Some("mx.example.org".into()),
            spam_fields: true,
        };
        let (out, from) = fix(head, &fixes);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Authentication-Results: relay.example.net;\r\n\tdkim=pass header.d=example.net\r\nFrom: a@example.net\r\nBcc: kept@example.net\r\n"
        );
        assert_eq!(from, ["a@example.net"]);
        assert_eq!(authserv_id_of(b" example.com; none"), "example.com");
        assert_eq!(authserv_id_of(b" (c) (d) example.com 1;"), "example.com");
    }

    #[test]
    fn present_fields_are_kept() {
        let head = b"Date: Mon, 1 Jan 2024 00:00:00 +0000\r\nMessage-ID: <a@b>\r\nFrom: bob@example.org\r\n";
        let (out, from) = fix(head, &submission("h"));
        assert_eq!(out, head);
        assert_eq!(from, ["bob@example.org"]);
    }

    #[test]
    fn the_end_of_the_header_is_found() {
        assert_eq!(header_end(b"A: 1\r\nB: 2\r\n\r\nbody", 0), Some(12));
        assert_eq!(header_end(b"\r\nbody", 0), Some(0));
        assert_eq!(header_end(b"A: 1\r\nB: 2\r\n", 0), None);
    }

    proptest! {
        /// However the header is cut, the same end is found: the search
        /// resumes three bytes before the new data.
        #[test]
        fn the_end_is_found_across_pieces(cut in 0usize..30) {
            let text = b"From: a@b\r\nSubject: x\r\n\r\nbody text";
            let cut = cut.min(text.len());
            let first = header_end(&text[..cut], 0);
            let found = first.or_else(|| header_end(text, cut.saturating_sub(3)));
            prop_assert_eq!(found, Some(23));
        }

        #[test]
        fn fixing_never_panics(head in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = fix(&head, &submission("h"));
            let _ = fix(&head, &Fixes::Arriving {
                    authserv_id: Some("h".into()),
                    spam_fields: true,
                });
        }
    }
}
