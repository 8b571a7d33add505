//! Messages the filters send on their own: vacation answers (RFC 5230)
//! and the notices of `reject` (RFC 5429 §2.1: an MDN, RFC 8098). Both go
//! out with the null reverse-path and `Auto-Submitted:` (RFC 3834), so no
//! other responder answers them back.

use base64::Engine as _;
use time::format_description::well_known::Rfc2822;
use time::OffsetDateTime;

/// The fields of the original message an answer refers to.
#[derive(Debug, Default, Clone)]
pub(crate) struct Original {
    /// `Message-ID:` as written, with its angle brackets.
    pub message_id: Option<String>,
    /// `References:` as written.
    pub references: Option<String>,
    /// `Subject:`, decoded.
    pub subject: Option<String>,
    /// The header block, for the MDN's third part.
    pub header: Vec<u8>,
}

impl Original {
    /// Reads the fields from the head of the message (the header block
    /// and perhaps some body).
    pub fn from_head(head: &[u8]) -> Original {
        let end = memchr::memmem::find(head, b"\r\n\r\n").map_or(head.len(), |i| i + 2);
        let header = head[..end].to_vec();
        let parsed = mail_parser::MessageParser::default().parse_headers(&header);
        let field = |name: &str| -> Option<String> {
            let raw = raw_field(&header, name)?;
            Some(raw.trim().to_string())
        };
        Original {
            message_id: field("Message-ID"),
            references: field("References"),
            subject: parsed
                .as_ref()
                .and_then(|m| m.subject().map(str::to_string)),
            header,
        }
    }
}

/// A header field's unfolded raw value (first occurrence).
fn raw_field(header: &[u8], name: &str) -> Option<String> {
    let text = String::from_utf8_lossy(header);
    let mut value: Option<String> = None;
    for line in text.split("\r\n") {
        if let Some(v) = value.as_mut() {
            if line.starts_with([' ', '\t']) {
                v.push_str(line);
                continue;
            }
            break;
        }
        if let Some((n, v)) = line.split_once(':') {
            if n.eq_ignore_ascii_case(name) {
                value = Some(v.to_string());
            }
        }
    }
    value
}

/// What a vacation action asks for (RFC 5230 §4).
pub(crate) struct Vacation<'a> {
    /// Whom the answer is from: `:from`, or the recipient.
    pub from: &'a str,
    /// The envelope sender of the original: whom it goes to.
    pub to: &'a str,
    /// `:subject`, or "Auto: " and the original's.
    pub subject: &'a str,
    /// The text, or with `:mime` a MIME entity (its own header and body).
    pub reason: &'a str,
    /// `:mime` was given.
    pub mime: bool,
}

/// A vacation answer (RFC 5230 §5): a reply to the original, marked
/// `Auto-Submitted: auto-replied`.
pub(crate) fn vacation(v: &Vacation, original: &Original, hostname: &str) -> Vec<u8> {
    let mut out = common_fields(v.from, v.to, v.subject, hostname);
    // RFC 5230 §5.8: In-Reply-To and References as for a reply.
    if let Some(id) = &original.message_id {
        out.push_str(&format!("In-Reply-To: {id}\r\n"));
        let refs = match &original.references {
            Some(r) => format!("{r} {id}"),
            None => id.clone(),
        };
        out.push_str(&format!("References: {refs}\r\n"));
    }
    out.push_str("Auto-Submitted: auto-replied (vacation)\r\n");
    out.push_str("MIME-Version: 1.0\r\n");
    let mut bytes = out.into_bytes();
    if v.mime {
        // The reason is an entity with its own Content-* fields.
        bytes.extend_from_slice(&crlf(v.reason));
    } else {
        bytes.extend_from_slice(&text_part(v.reason));
    }
    bytes
}

/// The notice `reject` sends (RFC 5429 §2.1.1): an MDN (RFC 8098 §3) with
/// the reason, the disposition and the original header.
pub(crate) fn rejection(
    recipient: &str,
    sender: &str,
    reason: &str,
    original: &Original,
    hostname: &str,
) -> Vec<u8> {
    let boundary = format!("=_reject_{:016x}", rand::random::<u64>());
    let subject = format!(
        "Rejected: {}",
        original.subject.as_deref().unwrap_or("your message")
    );
    let mut out = common_fields(recipient, sender, &subject, hostname);
    out.push_str("Auto-Submitted: auto-replied (rejected)\r\n");
    out.push_str("MIME-Version: 1.0\r\n");
    out.push_str(&format!(
        "Content-Type: multipart/report; report-type=disposition-notification;\r\n\tboundary=\"{boundary}\"\r\n\r\n"
    ));
    out.push_str(&format!("--{boundary}\r\n"));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&text_part(&format!(
        "Your message to <{recipient}> was rejected by the recipient's filter:\r\n\r\n{reason}\r\n"
    )));
    let mut tail =
        format!("\r\n--{boundary}\r\nContent-Type: message/disposition-notification\r\n\r\n");
    tail.push_str(&format!("Reporting-UA: {hostname}; Sluice\r\n"));
    tail.push_str(&format!("Final-Recipient: rfc822; {recipient}\r\n"));
    if let Some(id) = &original.message_id {
        tail.push_str(&format!("Original-Message-ID: {id}\r\n"));
    }
    tail.push_str("Disposition: automatic-action/MDN-sent-automatically; deleted\r\n");
    tail.push_str(&format!(
        "\r\n--{boundary}\r\nContent-Type: text/rfc822-headers\r\n\r\n"
    ));
    bytes.extend_from_slice(tail.as_bytes());
    bytes.extend_from_slice(&original.header);
    bytes.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    bytes
}

fn common_fields(from: &str, to: &str, subject: &str, hostname: &str) -> String {
    let date = OffsetDateTime::now_utc()
        .format(&Rfc2822)
        .unwrap_or_default();
    let id = format!(
        "{:016x}{:08x}",
        rand::random::<u64>(),
        rand::random::<u32>()
    );
    format!(
        "From: <{from}>\r\nTo: <{to}>\r\nSubject: {}\r\nDate: {date}\r\nMessage-ID: <{id}@{hostname}>\r\n",
        encode_word(subject)
    )
}

/// A header text in an RFC 2047 encoded word when it is not plain ASCII
/// (and never with a bare CR or LF).
fn encode_word(text: &str) -> String {
    let clean: String = text.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    if clean.is_ascii() {
        return clean;
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    // Encoded words are at most 75 characters: cut the text on character
    // boundaries into pieces of at most 45 bytes (60 in base64).
    let mut words = Vec::new();
    let mut piece = String::new();
    for c in clean.chars() {
        if piece.len() + c.len_utf8() > 45 {
            words.push(format!("=?utf-8?b?{}?=", b64.encode(&piece)));
            piece.clear();
        }
        piece.push(c);
    }
    if !piece.is_empty() {
        words.push(format!("=?utf-8?b?{}?=", b64.encode(&piece)));
    }
    words.join("\r\n ")
}

/// A text/plain body: as it is when ASCII, base64 otherwise.
fn text_part(text: &str) -> Vec<u8> {
    let body = crlf(text);
    if body.is_ascii() {
        let mut out = b"Content-Type: text/plain; charset=us-ascii\r\n\r\n".to_vec();
        out.extend_from_slice(&body);
        return out;
    }
    let mut out =
        b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n"
            .to_vec();
    let encoded = base64::engine::general_purpose::STANDARD.encode(&body);
    for line in encoded.as_bytes().chunks(76) {
        out.extend_from_slice(line);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Text with every line ending made CRLF, ending with one.
fn crlf(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 16);
    for line in text.lines() {
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &[u8] = b"From: Bob <bob@example.net>\r\nSubject: =?utf-8?q?caf=C3=A9?=\r\n\
Message-ID: <m1@example.net>\r\nReferences: <m0@example.net>\r\n\r\nbody\r\n";

    #[test]
    fn vacation_replies_to_the_original() {
        let original = Original::from_head(HEAD);
        assert_eq!(original.subject.as_deref(), Some("café"));
        let v = Vacation {
            from: "ann@example.org",
            to: "bob@example.net",
            subject: "Auto: café",
            reason: "Away until Monday.\nBack soon.",
            mime: false,
        };
        let text = String::from_utf8(vacation(&v, &original, "mx.example.org")).unwrap();
        assert!(text.contains("In-Reply-To: <m1@example.net>\r\n"), "{text}");
        assert!(text.contains("References: <m0@example.net> <m1@example.net>\r\n"));
        assert!(text.contains("Auto-Submitted: auto-replied"));
        assert!(text.contains("Subject: =?utf-8?b?"));
        assert!(
            text.ends_with("Away until Monday.\r\nBack soon.\r\n"),
            "{text}"
        );
        let parsed = mail_parser::MessageParser::default()
            .parse(text.as_bytes())
            .unwrap();
        assert_eq!(parsed.subject(), Some("Auto: café"));
    }

    #[test]
    fn rejection_is_a_disposition_report() {
        let original = Original::from_head(HEAD);
        let text = String::from_utf8(rejection(
            "ann@example.org",
            "bob@example.net",
            "I don't want it",
            &original,
            "mx.example.org",
        ))
        .unwrap();
        let parsed = mail_parser::MessageParser::default()
            .parse(text.as_bytes())
            .unwrap();
        assert_eq!(parsed.parts.len(), 4, "{text}");
        assert!(text.contains("Disposition: automatic-action/MDN-sent-automatically; deleted"));
        assert!(text.contains("I don't want it"));
        assert!(text.contains("Original-Message-ID: <m1@example.net>"));
    }

    #[test]
    fn long_subjects_are_cut_into_short_encoded_words() {
        let word = encode_word(&"é".repeat(60));
        assert!(word.split("\r\n ").all(|w| w.len() <= 75), "{word}");
    }
}
