//! The trace fields a receiving server adds (RFC 5321 §4.4) and queue ids.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};

use time::format_description::well_known::Rfc2822;
use time::OffsetDateTime;

/// A short id naming one accepted message in logs and replies, unique per
/// server process and roughly time-ordered.
pub(crate) fn queue_id() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:010X}{:04X}", millis & 0xFF_FFFF_FFFF, n & 0xFFFF)
}

/// What the trace fields say about one transaction.
pub(crate) struct Trace<'a> {
    pub helo: &'a str,
    pub ip: IpAddr,
    pub hostname: &'a str,
    pub esmtp: bool,
    pub tls: bool,
    pub utf8: bool,
    pub queue_id: &'a str,
    pub sender: &'a str,
    /// Named in the `for` clause only when there is exactly one, so the
    /// stored copy shared by many recipients does not disclose them.
    pub single_recipient: Option<&'a str>,
}

fn sanitize(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control() && *c != '(' && *c != ')')
        .take(255)
        .collect()
}

impl Trace<'_> {
    /// `Return-Path:` and `Received:` lines, CRLF-terminated.
    pub fn header(&self) -> String {
        // RFC 3848 / RFC 6531 protocol names.
        let proto = match (self.utf8, self.esmtp, self.tls) {
            (true, _, true) => "UTF8SMTPS",
            (true, _, false) => "UTF8SMTP",
            (false, true, true) => "ESMTPS",
            (false, true, false) => "ESMTP",
            (false, false, true) => "SMTPS",
            (false, false, false) => "SMTP",
        };
        let ip = match self.ip {
            IpAddr::V4(v4) => format!("[{v4}]"),
            IpAddr::V6(v6) => format!("[IPv6:{v6}]"),
        };
        let date = OffsetDateTime::now_utc()
            .format(&Rfc2822)
            .unwrap_or_default();
        let rcpt = self
            .single_recipient
            .map(|r| format!("\r\n\tfor <{}>", sanitize(r)))
            .unwrap_or_default();
        format!(
            "Return-Path: <{}>\r\nReceived: from {} ({})\r\n\tby {} (Sluice) with {} id {}{};\r\n\t{}\r\n",
            sanitize(self.sender),
            sanitize(self.helo),
            ip,
            self.hostname,
            proto,
            self.queue_id,
            rcpt,
            date
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_fields_name_client_protocol_and_id() {
        let t = Trace {
            helo: "client.example",
            ip: "192.0.2.1".parse().unwrap(),
            hostname: "mx.example.org",
            esmtp: true,
            tls: true,
            utf8: false,
            queue_id: "ABC",
            sender: "a@b.example",
            single_recipient: Some("x@example.org"),
        };
        let h = t.header();
        assert!(h.starts_with("Return-Path: <a@b.example>\r\nReceived: from client.example ([192.0.2.1])\r\n\tby mx.example.org (Sluice) with ESMTPS id ABC\r\n\tfor <x@example.org>;\r\n\t"), "{h}");
        assert!(h.ends_with("\r\n"));
        assert_eq!(h.matches("\r\n").count(), 5);
    }

    #[test]
    fn queue_ids_differ() {
        assert_ne!(queue_id(), queue_id());
    }
}
