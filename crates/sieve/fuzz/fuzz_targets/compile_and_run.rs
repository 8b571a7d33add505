//! Sieve scripts as a user uploads them: compiled, and when they compile,
//! run on a fixed message with a host that says no to everything. Neither
//! step may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sieve::{Context, Envelope, Host, Limits, Location, Message, SpamVerdict};

const MESSAGE: &[u8] = b"From: Alice <alice@example.org>\r\n\
To: bob+box@example.com, \"Carol\" <carol@example.net>\r\n\
Cc: undisclosed-recipients:;\r\n\
Subject: =?utf-8?q?Caf=C3=A9?= [list] hello\r\n\
Date: Tue, 1 Jul 2003 10:52:37 +0200\r\n\
Received: from a by b; Wed, 6 Mar 2024 09:00:01 -0500\r\n\
Message-ID: <m1@example.org>\r\n\
List-Id: <l.example.org>\r\n\
MIME-Version: 1.0\r\n\
Content-Type: multipart/alternative; boundary=b\r\n\
\r\n\
--b\r\n\
Content-Type: text/plain\r\n\
\r\n\
plain text\r\n\
--b\r\n\
Content-Type: text/html\r\n\
\r\n\
<p>html</p>\r\n\
--b--\r\n";

struct No;

impl Host for No {
    fn mailbox_exists(&self, _name: &str) -> bool {
        false
    }
    fn script_source(&self, _location: Location, _name: &str) -> Option<String> {
        None
    }
    fn duplicate_seen(&self, _id: &str, _period_secs: u64) -> bool {
        false
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(script) = sieve::compile(source) else {
        return;
    };
    let message = Message::parse(MESSAGE);
    let envelope = Envelope {
        from: "alice@example.org".into(),
        to: "bob+box@example.com".into(),
        auth: None,
    };
    let addresses = ["bob@example.com".to_string()];
    let ctx = Context {
        message: &message,
        envelope: &envelope,
        addresses: &addresses,
        spam: Some(SpamVerdict {
            score: 5,
            percent: None,
        }),
        virus: Some(1),
        now: time::OffsetDateTime::UNIX_EPOCH,
    };
    let _ = sieve::run(&script, &ctx, &No, &Limits::default());
});
