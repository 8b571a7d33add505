//! Delivery status notifications (RFC 3464): the report a sender gets
//! when its mail could not be delivered, is delayed, or (when it asked
//! with NOTIFY=SUCCESS, RFC 3461) was delivered or relayed to a server
//! that makes no reports. A `multipart/report` with a human part, a
//! `message/delivery-status` part and the original header (RFC 3462
//! `text/rfc822-headers`); the content goes back only when the sender
//! asked with RET=FULL, and only in a failure report.
//!
//! Reports go out with the null reverse-path (RFC 5321 §4.5.5) and are
//! never made for mail that itself had a null sender, so two servers
//! cannot bounce reports at each other.

use std::fmt::Write as _;

/// One recipient the report is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipient {
    /// The recipient address.
    pub recipient: String,
    /// ORCPT: the address as the sender first gave it, if it said.
    pub orcpt: Option<String>,
    /// Why: the remote reply or the local reason.
    pub reason: String,
}

/// What became of the recipients a report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Given up: they will not get the message.
    Failed,
    /// Still trying, until `until` (seconds since the Unix epoch).
    Delayed {
        /// When the last attempt will be made.
        until: i64,
    },
    /// Put in the recipients' mailboxes here.
    Delivered,
    /// Handed to a server that makes no reports (RFC 3461 §5.2.3).
    Relayed,
}

/// What the report says of the message and where it was.
#[derive(Debug, Clone)]
pub struct Report<'a> {
    /// Failed or delayed.
    pub action: Action,
    /// Our host name (Reporting-MTA, From).
    pub reporting_mta: &'a str,
    /// The original envelope sender, to whom the report goes.
    pub sender: &'a str,
    /// When the message was queued (seconds since the Unix epoch).
    pub arrival: i64,
    /// Now.
    pub now: i64,
    /// The recipients the report is about.
    pub recipients: &'a [Recipient],
    /// RFC 3461 ENVID of the message, if the sender gave one.
    pub envid: Option<&'a str>,
    /// The original message's header block (cut at a reasonable size), or
    /// the whole message when `full`.
    pub original: &'a [u8],
    /// `original` is the whole message (RET=FULL on a failure).
    pub full: bool,
    /// A token that makes the Message-ID and the boundary unique.
    pub unique: u64,
}

/// The RFC 3463 status code of a failure: the enhanced code in the reply
/// when it has one, else one that fits the reason.
pub fn status_of(reason: &str) -> String {
    for word in reason.split_whitespace() {
        let parts: Vec<&str> = word.trim_end_matches([',', ';', ':']).split('.').collect();
        if parts.len() == 3
            && matches!(parts[0], "4" | "5")
            && parts[1..]
                .iter()
                .all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()))
        {
            // A temporary code in a final report: the delivery failed for
            // good, so the class becomes permanent unless time ran out.
            if parts[0] == "4" && !reason.starts_with("gave up") {
                return format!("5.{}.{}", parts[1], parts[2]);
            }
            return parts.join(".");
        }
    }
    if reason.contains("null MX") {
        "5.1.10".into()
    } else if reason.contains("does not exist") {
        "5.1.2".into()
    } else if reason.starts_with("gave up") {
        "4.4.7".into()
    } else {
        "5.0.0".into()
    }
}

/// RFC 5322 date-time in UTC.
fn date(secs: i64) -> String {
    let t =
        time::OffsetDateTime::from_unix_timestamp(secs).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} +0000",
        DAYS[t.weekday().number_days_from_monday() as usize],
        t.day(),
        MONTHS[u8::from(t.month()) as usize - 1],
        t.year(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Keeps only what may go into a header or a status field: one line of
/// printable ASCII.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(900)
        .collect()
}

/// The whole report message, CRLF line ends.
pub fn build(r: &Report<'_>) -> Vec<u8> {
    let boundary = format!("=_report_{:016x}", r.unique);
    let (subject, human) = match r.action {
        Action::Failed => (
            "Undelivered Mail Returned to Sender",
            "Your message could not be delivered to the recipients below;\r\n\
             they will not receive it, and no further attempts will be made.\r\n"
                .to_string(),
        ),
        Action::Delayed { until } => (
            "Delayed Mail (still being retried)",
            format!(
                "Your message has not been delivered yet to the recipients below.\r\n\
                 It will be retried until {}; you need not send it again.\r\n",
                date(until)
            ),
        ),
        Action::Delivered => (
            "Successful Mail Delivery Report",
            "Your message was delivered to the recipients below.\r\n".to_string(),
        ),
        Action::Relayed => (
            "Successful Mail Delivery Report",
            "Your message was handed on to the recipients' mail servers, which\r\n\
             send no further reports.\r\n"
                .to_string(),
        ),
    };
    let mut m = String::new();
    let _ = write!(
        m,
        "From: Mail Delivery System <MAILER-DAEMON@{mta}>\r\n\
         To: <{to}>\r\n\
         Subject: {subject}\r\n\
         Date: {date}\r\n\
         Message-ID: <dsn.{unique:016x}@{mta}>\r\n\
         Auto-Submitted: auto-replied\r\n\
         MIME-Version: 1.0\r\n\
         Content-Type: multipart/report; report-type=delivery-status;\r\n\tboundary=\"{boundary}\"\r\n\
         \r\n\
         This is a delivery status notification (RFC 3464).\r\n\
         \r\n\
         --{boundary}\r\n\
         Content-Type: text/plain; charset=us-ascii\r\n\
         \r\n\
         This is the mail system at {mta}.\r\n\
         \r\n\
         {human}\
         \r\n",
        mta = r.reporting_mta,
        to = one_line(r.sender),
        date = date(r.now),
        unique = r.unique,
    );
    for f in r.recipients {
        let _ = write!(
            m,
            "<{}>: {}\r\n",
            one_line(&f.recipient),
            one_line(&f.reason)
        );
    }
    let _ = write!(
        m,
        "\r\n--{boundary}\r\n\
         Content-Type: message/delivery-status\r\n\
         \r\n\
         Reporting-MTA: dns; {mta}\r\n",
        mta = r.reporting_mta,
    );
    if let Some(envid) = r.envid {
        let _ = write!(m, "Original-Envelope-Id: {}\r\n", one_line(envid));
    }
    let _ = write!(m, "Arrival-Date: {}\r\n", date(r.arrival));
    for f in r.recipients {
        let (action, status) = match r.action {
            Action::Failed => ("failed", status_of(&f.reason)),
            // RFC 3464 §2.3.3: a delay has a 4.x.x status.
            Action::Delayed { .. } => ("delayed", {
                let s = status_of(&f.reason);
                format!("4{}", &s[1..])
            }),
            Action::Delivered => ("delivered", "2.0.0".to_string()),
            Action::Relayed => ("relayed", "2.0.0".to_string()),
        };
        m.push_str("\r\n");
        if let Some(orcpt) = &f.orcpt {
            let _ = write!(m, "Original-Recipient: rfc822; {}\r\n", one_line(orcpt));
        }
        let _ = write!(
            m,
            "Final-Recipient: rfc822; {rcpt}\r\n\
             Action: {action}\r\n\
             Status: {status}\r\n\
             Diagnostic-Code: {kind}; {reason}\r\n\
             Last-Attempt-Date: {now}\r\n",
            rcpt = one_line(&f.recipient),
            kind = if f
                .reason
                .as_bytes()
                .first()
                .is_some_and(|b| b.is_ascii_digit())
            {
                "smtp"
            } else {
                "x-sluice"
            },
            reason = one_line(&f.reason),
            now = date(r.now),
        );
        if let Action::Delayed { until } = r.action {
            let _ = write!(m, "Will-Retry-Until: {}\r\n", date(until));
        }
    }
    let _ = write!(
        m,
        "\r\n--{boundary}\r\n\
         Content-Type: {}\r\n\
         \r\n",
        if r.full {
            "message/rfc822"
        } else {
            "text/rfc822-headers"
        }
    );
    let mut out = m.into_bytes();
    out.extend_from_slice(r.original);
    if !r.original.ends_with(b"\n") {
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    out
}

/// RFC 3461 §4 xtext: printable ASCII but `+` and `=` as is, the rest as
/// `+HH`. For ENVID and ORCPT handed on to the next server.
pub fn xtext(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if (b'!'..=b'~').contains(&b) && b != b'+' && b != b'=' {
            out.push(b as char);
        } else {
            let _ = write!(out, "+{b:02X}");
        }
    }
    out
}

/// The NOTIFY value (RFC 3461 §4.1) of `store::NOTIFY_*` bits; `None` when
/// none was given.
pub fn notify_value(bits: u8) -> Option<String> {
    if bits == 0 {
        return None;
    }
    if bits & store::NOTIFY_NEVER != 0 {
        return Some("NEVER".into());
    }
    let words: Vec<&str> = [
        (store::NOTIFY_SUCCESS, "SUCCESS"),
        (store::NOTIFY_FAILURE, "FAILURE"),
        (store::NOTIFY_DELAY, "DELAY"),
    ]
    .iter()
    .filter(|(bit, _)| bits & bit != 0)
    .map(|(_, word)| *word)
    .collect();
    Some(words.join(","))
}

/// The header block at the start of `text` (up to and without the empty
/// line), or all of `text` when it has no end of header.
pub fn header_block(text: &[u8]) -> &[u8] {
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        if rest.starts_with(b"\r\n") || rest.starts_with(b"\n") {
            return &text[..i];
        }
        match rest.iter().position(|&b| b == b'\n') {
            Some(p) => i += p + 1,
            None => return text,
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_come_from_the_reply_or_the_reason() {
        assert_eq!(
            status_of("550 5.1.1 <x@y>: Recipient address rejected"),
            "5.1.1"
        );
        assert_eq!(status_of("550 no such user"), "5.0.0");
        assert_eq!(
            status_of("example.net does not accept mail (null MX, RFC 7505)"),
            "5.1.10"
        );
        assert_eq!(
            status_of("gave up after 5 days; last: 451 4.4.1 try later"),
            "4.4.1"
        );
        assert_eq!(
            status_of("gave up after 5 days; last: connection refused"),
            "4.4.7"
        );
        assert_eq!(status_of("domain x.test does not exist"), "5.1.2");
    }

    #[test]
    fn the_report_is_a_multipart_report_with_the_original_header() {
        let failed = [Recipient {
            recipient: "bob@remote.test".into(),
            orcpt: None,
            reason: "550 5.1.1 unknown user".into(),
        }];
        let report = Report {
            action: Action::Failed,
            reporting_mta: "mx.example.org",
            sender: "alice@origin.test",
            arrival: 0,
            now: 86400,
            recipients: &failed,
            envid: None,
            original: b"Subject: hello\r\nFrom: alice@origin.test\r\n",
            full: false,
            unique: 7,
        };
        let text = String::from_utf8(build(&report)).unwrap();
        assert!(text.contains("Content-Type: multipart/report; report-type=delivery-status;"));
        assert!(text.contains(
            "Final-Recipient: rfc822; bob@remote.test\r\nAction: failed\r\nStatus: 5.1.1\r\n"
        ));
        assert!(text.contains("Diagnostic-Code: smtp; 550 5.1.1 unknown user"));
        assert!(text.contains("Arrival-Date: Thu, 01 Jan 1970 00:00:00 +0000"));
        assert!(text.contains("Content-Type: text/rfc822-headers\r\n\r\nSubject: hello\r\n"));
        assert!(text.ends_with("--=_report_0000000000000007--\r\n"));
        // Every line ends in CRLF.
        assert!(!text.replace("\r\n", "").contains('\n'));
    }

    #[test]
    fn a_delay_report_says_delayed_with_a_temporary_status() {
        let failed = [Recipient {
            recipient: "bob@remote.test".into(),
            orcpt: None,
            reason: "451 4.3.0 try later".into(),
        }];
        let report = Report {
            action: Action::Delayed { until: 5 * 86400 },
            reporting_mta: "mx.example.org",
            sender: "alice@origin.test",
            arrival: 0,
            now: 14400,
            recipients: &failed,
            envid: None,
            original: b"Subject: hello\r\n",
            full: false,
            unique: 8,
        };
        let text = String::from_utf8(build(&report)).unwrap();
        assert!(text.contains("Subject: Delayed Mail (still being retried)"));
        assert!(
            text.contains("Action: delayed\r\nStatus: 4.3.0\r\n"),
            "{text}"
        );
        assert!(
            text.contains("Will-Retry-Until: Tue, 06 Jan 1970 00:00:00 +0000"),
            "{text}"
        );
    }

    #[test]
    fn a_success_report_carries_the_envelope_ids() {
        let relayed = [Recipient {
            recipient: "bob@remote.test".into(),
            orcpt: Some("Bob@Remote.test".into()),
            reason: "250 2.0.0 Ok: queued".into(),
        }];
        let report = Report {
            action: Action::Relayed,
            reporting_mta: "mx.example.org",
            sender: "alice@origin.test",
            arrival: 0,
            now: 60,
            recipients: &relayed,
            envid: Some("QQ314159"),
            original: b"Subject: hello\r\n",
            full: false,
            unique: 9,
        };
        let text = String::from_utf8(build(&report)).unwrap();
        assert!(
            text.contains("Subject: Successful Mail Delivery Report"),
            "{text}"
        );
        assert!(
            text.contains("Original-Envelope-Id: QQ314159\r\n"),
            "{text}"
        );
        assert!(text.contains(
            "Original-Recipient: rfc822; Bob@Remote.test\r\nFinal-Recipient: rfc822; bob@remote.test\r\nAction: relayed\r\nStatus: 2.0.0\r\n"
        ), "{text}");
    }

    #[test]
    fn xtext_and_notify_values() {
        assert_eq!(xtext("a+b=c d\u{e9}"), "a+2Bb+3Dc+20d+C3+A9");
        assert_eq!(xtext("QQ314159"), "QQ314159");
        assert_eq!(notify_value(0), None);
        assert_eq!(notify_value(store::NOTIFY_NEVER).as_deref(), Some("NEVER"));
        assert_eq!(
            notify_value(store::NOTIFY_SUCCESS | store::NOTIFY_DELAY).as_deref(),
            Some("SUCCESS,DELAY")
        );
    }

    #[test]
    fn the_header_block_stops_at_the_empty_line() {
        assert_eq!(
            header_block(b"A: 1\r\nB: 2\r\n\r\nbody"),
            b"A: 1\r\nB: 2\r\n"
        );
        assert_eq!(header_block(b"A: 1\r\n"), b"A: 1\r\n");
        assert_eq!(header_block(b"A: 1"), b"A: 1");
    }
}
