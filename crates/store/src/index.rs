//! What is computed from a message once, at delivery: the indexed header
//! fields and the text that goes into the full-text index.

use mail_parser::{Address, MessageParser};

/// Header fields kept as indexed columns, so listing a mailbox and
/// searching headers never opens a message body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexedHeaders {
    /// `From:` as `Name <addr>` items joined with `, `.
    pub from: String,
    /// `To:`, same form.
    pub to: String,
    /// `Cc:`, same form.
    pub cc: String,
    /// Decoded `Subject:`.
    pub subject: String,
    /// `Date:` in seconds since the epoch, if it parsed.
    pub date: Option<i64>,
    /// `Message-ID:` without angle brackets.
    pub message_id: String,
}

/// Everything the indexes take from one message.
#[derive(Debug, Default)]
pub(crate) struct MessageIndex {
    pub headers: IndexedHeaders,
    /// Decoded text of the text parts (HTML turned to text).
    pub body_text: String,
    /// The message's text goes on past what `body_text` holds: the window
    /// was full, or its text longer than [`MAX_INDEXED_TEXT`]
    /// (text_sections.rs indexes the rest).
    pub text_cut: bool,
    /// The day of the `Date:` field as written, in its own time zone (days
    /// since 1970-01-01): what SENTBEFORE/SENTON/SENTSINCE compare
    /// (RFC 3501 §6.4.4 disregards time and zone).
    pub sent_day: Option<i64>,
}

/// What the full-text rows of both back ends hold, as a version: rows of
/// another are made again. 1: the text parts, subject, addresses and top
/// header block; 2: the MIME parts' header blocks too ([`index_message`]);
/// 3: the whole text of long messages in more rows (text_sections.rs).
pub(crate) const TEXT_VERSION: i64 = 3;

/// Largest amount of decoded body text put into the full-text index.
const MAX_INDEXED_TEXT: usize = crate::INDEX_WINDOW;

fn one_address(a: &mail_parser::Addr<'_>) -> String {
    match (a.name(), a.address()) {
        (Some(n), Some(e)) => format!("{n} <{e}>"),
        (None, Some(e)) => e.to_string(),
        (Some(n), None) => n.to_string(),
        (None, None) => String::new(),
    }
}

fn address_list(list: &[mail_parser::Addr<'_>]) -> String {
    list.iter()
        .map(one_address)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Addresses as `Name <addr>` items joined with `, `; a group keeps its
/// name (`Team: a <x>, b;`), so a search for the group name finds it
/// (RFC 3501 §6.4.4 matches the field's text).
fn addresses(addr: Option<&Address<'_>>) -> String {
    match addr {
        None => String::new(),
        Some(Address::List(list)) => address_list(list),
        Some(Address::Group(groups)) => groups
            .iter()
            .map(|g| match &g.name {
                Some(name) => format!("{name}: {};", address_list(&g.addresses)),
                None => address_list(&g.addresses),
            })
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Parses the start of a message (up to [`crate::INDEX_WINDOW`] bytes) and
/// returns what the indexes need. Malformed mail yields what could be read.
pub(crate) fn index_message(raw: &[u8]) -> MessageIndex {
    index(raw, true)
}

/// [`index_message`] for the window of a message whose text runs past
/// it: no body text, which its sections hold whole (text_sections.rs).
pub(crate) fn index_long_message(raw: &[u8]) -> MessageIndex {
    index(raw, false)
}

fn index(raw: &[u8], with_text: bool) -> MessageIndex {
    let Some(msg) = MessageParser::default().parse(raw) else {
        return MessageIndex {
            text_cut: !with_text,
            ..MessageIndex::default()
        };
    };
    let headers = IndexedHeaders {
        from: addresses(msg.from()),
        to: addresses(msg.to()),
        cc: addresses(msg.cc()),
        subject: msg.subject().unwrap_or_default().to_string(),
        date: msg.date().map(|d| d.to_timestamp()),
        message_id: msg.message_id().unwrap_or_default().to_string(),
    };
    let (body_text, text_cut) = if with_text {
        body_text(&msg)
    } else {
        (String::new(), true)
    };
    let sent_day = msg
        .date()
        .map(|d| days_from_civil(d.year as i64, d.month as i64, d.day as i64));
    MessageIndex {
        headers,
        body_text,
        text_cut,
        sent_day,
    }
}

/// The body text of `msg`, up to [`MAX_INDEXED_TEXT`], and whether it was
/// cut there.
fn body_text(msg: &mail_parser::Message<'_>) -> (String, bool) {
    // RFC 3501 §6.4.4: BODY and TEXT search the body, and the headers of
    // its MIME parts are body too: an attachment's name or type is found
    // (as Dovecot finds it). They come first, so long text cannot crowd
    // them out.
    let mut body_text = String::new();
    part_headers(msg, true, &mut body_text);
    for i in 0..msg.text_body_count() {
        if let Some(text) = msg.body_text(i) {
            if body_text.len() + text.len() > MAX_INDEXED_TEXT {
                let room = MAX_INDEXED_TEXT.saturating_sub(body_text.len());
                let mut cut = room.min(text.len());
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                body_text.push_str(&text[..cut]);
                return (body_text, true);
            }
            body_text.push_str(&text);
            body_text.push('\n');
        }
    }
    (body_text, false)
}

/// Most bytes of MIME part headers put into the body text.
const MAX_PART_HEADERS: usize = 16 * 1024;

/// Appends the header block of each MIME part of `msg` to `out` (the
/// message's own header too unless `skip_top`), those of attached
/// messages included, up to [`MAX_PART_HEADERS`] in all.
fn part_headers(msg: &mail_parser::Message<'_>, skip_top: bool, out: &mut String) {
    let raw = msg.raw_message.as_ref();
    for (i, part) in msg.parts.iter().enumerate() {
        if i > 0 || !skip_top {
            let block = raw
                .get(part.offset_header as usize..part.offset_body as usize)
                .unwrap_or_default();
            let room = MAX_PART_HEADERS.saturating_sub(out.len());
            if block.len() > room {
                return;
            }
            out.push_str(&String::from_utf8_lossy(block));
        }
        if let mail_parser::PartType::Message(inner) = &part.body {
            part_headers(inner, false, out);
        }
    }
}

/// Days from 1970-01-01 to a calendar date (proleptic Gregorian; H.
/// Hinnant's algorithm), negative before 1970.
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The top-level header block at the start of a message: everything up to
/// and including the first empty line (CRLF or bare LF line ends), or all
/// of `head` when it holds no empty line.
pub(crate) fn header_block(head: &[u8]) -> &[u8] {
    let mut start = 0;
    while let Some(nl) = head[start..].iter().position(|&b| b == b'\n') {
        let end = start + nl + 1;
        if matches!(&head[start..end], b"\n" | b"\r\n") {
            return &head[..end];
        }
        start = end;
    }
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_block_ends_at_the_first_empty_line() {
        assert_eq!(
            header_block(b"A: 1\r\nB: 2\r\n\r\nbody\r\n\r\n"),
            b"A: 1\r\nB: 2\r\n\r\n"
        );
        assert_eq!(header_block(b"A: 1\nB: 2\n\nbody\n"), b"A: 1\nB: 2\n\n");
        assert_eq!(header_block(b"\r\nbody"), b"\r\n");
        assert_eq!(header_block(b"A: 1\r\nB: 2"), b"A: 1\r\nB: 2");
        assert_eq!(header_block(b""), b"");
    }

    #[test]
    fn indexes_headers_and_text_parts() {
        let raw = b"From: Alice <alice@example.org>\r\n\
To: bob@example.org, Carol <carol@example.org>\r\n\
Subject: =?utf-8?q?caf=C3=A9?= plans\r\n\
Date: Tue, 1 Jul 2025 10:00:00 +0000\r\n\
Message-ID: <abc@example.org>\r\n\
Content-Type: multipart/alternative; boundary=b\r\n\
\r\n--b\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nhello =\r\nworld\r\n\
--b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\nAAAA\r\n--b--\r\n";
        let idx = index_message(raw);
        assert_eq!(idx.headers.from, "Alice <alice@example.org>");
        assert_eq!(idx.headers.to, "bob@example.org, Carol <carol@example.org>");
        assert_eq!(idx.headers.subject, "café plans");
        assert_eq!(idx.headers.date, Some(1751364000));
        assert_eq!(idx.headers.message_id, "abc@example.org");
        assert!(idx.body_text.contains("hello world"), "{:?}", idx.body_text);
        // The parts' headers are body text; the message's own are not.
        assert!(
            idx.body_text
                .contains("Content-Type: application/octet-stream"),
            "{:?}",
            idx.body_text
        );
        assert!(!idx.body_text.contains("Message-ID"), "{:?}", idx.body_text);
    }

    #[test]
    fn headers_of_attached_messages_and_their_parts_are_body_text() {
        let raw = b"Subject: outer\r\nContent-Type: multipart/mixed; boundary=o\r\n\r\n\
--o\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n\
--o\r\nContent-Type: message/rfc822\r\n\r\nSubject: inner-subject\r\n\
Content-Type: multipart/mixed; boundary=i\r\n\r\n\
--i\r\nContent-Type: text/plain\r\n\r\ninner text\r\n\
--i\r\nContent-Type: application/pdf; name=\"report-q3.pdf\"\r\n\
Content-Transfer-Encoding: base64\r\n\r\nAAAA\r\n--i--\r\n--o--\r\n";
        let text = index_message(raw).body_text;
        for wanted in [
            "Content-Type: message/rfc822",
            "inner-subject",
            "report-q3.pdf",
            "see attached",
        ] {
            assert!(text.contains(wanted), "{wanted} not in {text:?}");
        }
        assert!(!text.contains("outer"), "{text:?}");
    }

    #[test]
    fn civil_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
    }

    #[test]
    fn the_sent_day_is_the_date_as_written() {
        // 23:30 at UTC-5 is the next day in UTC; the day written counts.
        let idx = index_message(b"Date: Mon, 01 Jan 2024 23:30:00 -0500\r\n\r\nx");
        assert_eq!(idx.sent_day, Some(days_from_civil(2024, 1, 1)));
        assert_eq!(
            idx.headers.date,
            Some(days_from_civil(2024, 1, 2) * 86_400 + 4 * 3600 + 1800)
        );
    }

    #[test]
    fn groups_keep_their_names() {
        let idx = index_message(
            b"To: Team: a@x.example, Bob <b@y.example>;, c@z.example\r\nCc: undisclosed-recipients:;\r\n\r\nx",
        );
        assert_eq!(
            idx.headers.to,
            "Team: a@x.example, Bob <b@y.example>;, c@z.example"
        );
        assert_eq!(idx.headers.cc, "undisclosed-recipients: ;");
    }

    #[test]
    fn garbage_gives_empty_index() {
        let idx = index_message(b"\x00\x01\x02");
        assert_eq!(idx.headers.subject, "");
    }
}
