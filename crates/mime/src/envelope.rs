//! The RFC 3501 §7.4.2 ENVELOPE of a message header block.

use crate::address::parse_address_list;
use crate::header::fields;
use crate::{Address, Envelope};

/// Reads the ENVELOPE fields of a header block. The first occurrence of a
/// field wins. Strings are unfolded and trimmed, otherwise raw.
pub(crate) fn envelope(block: &[u8]) -> Envelope {
    let mut e = Envelope::default();
    let mut seen = [false; 6];
    let mut lists: [Option<Vec<Address>>; 6] = Default::default();
    const LISTS: [&str; 6] = ["From", "Sender", "Reply-To", "To", "Cc", "Bcc"];
    for f in fields(block) {
        if f.is("Date") {
            e.date.get_or_insert_with(|| f.text());
        } else if f.is("Subject") {
            e.subject.get_or_insert_with(|| f.text());
        } else if f.is("In-Reply-To") {
            e.in_reply_to.get_or_insert_with(|| f.text());
        } else if f.is("Message-ID") {
            e.message_id.get_or_insert_with(|| f.text());
        } else if let Some(n) = LISTS.iter().position(|name| f.is(name)) {
            if !seen[n] {
                seen[n] = true;
                lists[n] = Some(parse_address_list(&f.unfolded()));
            }
        }
    }
    let [from, sender, reply_to, to, cc, bcc] = lists.map(Option::unwrap_or_default);
    // RFC 3501 §7.4.2: a Sender or Reply-To that is absent or empty is
    // reported as the From value.
    e.sender = if sender.is_empty() {
        from.clone()
    } else {
        sender
    };
    e.reply_to = if reply_to.is_empty() {
        from.clone()
    } else {
        reply_to
    };
    e.from = from;
    e.to = to;
    e.cc = cc;
    e.bcc = bcc;
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_defaults() {
        let e = envelope(
            b"Date: Mon, 1 Jan 2024 00:00:00 +0000\r\nSubject: =?utf-8?q?hi?=\r\n there\r\nFrom: A <a@x>\r\nSender:\r\nTo: b@y, c@z\r\nCc: Team:;\r\nMessage-ID: <1@x>\r\nMessage-ID: <2@x>\r\nIn-Reply-To: <0@x>\r\nfrom: other@x\r\n\r\nTo: body@x\r\n",
        );
        assert_eq!(e.date.as_deref(), Some("Mon, 1 Jan 2024 00:00:00 +0000"));
        assert_eq!(e.subject.as_deref(), Some("=?utf-8?q?hi?= there"));
        assert_eq!(e.from.len(), 1);
        assert_eq!(e.from[0].name.as_deref(), Some("A"));
        assert_eq!(e.sender, e.from);
        assert_eq!(e.reply_to, e.from);
        assert_eq!(e.to.len(), 2);
        assert_eq!(e.cc.len(), 2);
        assert!(e.bcc.is_empty());
        assert_eq!(e.message_id.as_deref(), Some("<1@x>"));
        assert_eq!(e.in_reply_to.as_deref(), Some("<0@x>"));
    }

    #[test]
    fn empty_header() {
        assert_eq!(envelope(b""), Envelope::default());
    }
}
