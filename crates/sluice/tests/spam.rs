//! The spam classifier end to end: a model trained with `sluice spam
//! train` scores mail sent with Python's smtplib (spam to Junk, the
//! breakdown in `X-Spam-Status:`), and moves into and out of Junk made
//! with imaplib train the user's own model.

use sluice_testkit as kit;

use std::time::Duration;

use kit::{python, wait_until, Server, PASSWORD};

const SPAM_WORDS: &[&str] = &[
    "viagra",
    "cheap",
    "pills",
    "winner",
    "lottery",
    "claim",
    "prize",
    "casino",
    "bonus",
    "discount",
    "pharmacy",
    "million",
    "urgent",
    "wire",
    "transfer",
    "bitcoin",
    "investment",
    "guaranteed",
    "unsubscribe",
    "offer",
];
const HAM_WORDS: &[&str] = &[
    "meeting",
    "agenda",
    "project",
    "report",
    "schedule",
    "review",
    "quarterly",
    "budget",
    "team",
    "lunch",
    "deadline",
    "draft",
    "minutes",
    "notes",
    "release",
    "planning",
    "design",
    "feedback",
    "invoice",
    "thanks",
];

/// A message of 30 words drawn from `words` (a fixed pseudo-random walk,
/// so every run trains the same model).
fn message(words: &[&str], seed: u64, subject: &str) -> String {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut body = Vec::new();
    for _ in 0..30 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        body.push(words[(x >> 33) as usize % words.len()]);
    }
    format!(
        "From: <sender{seed}@example.net>\r\nTo: <ann@example.org>\r\nSubject: {subject}\r\n\
Message-ID: <{seed}.{subject}@example.net>\r\n\r\n{}\r\n",
        body.join(" ")
    )
}

fn corpus(dir: &std::path::Path, words: &[&str], n: u64) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..n {
        std::fs::write(dir.join(format!("{i}.eml")), message(words, i, "x")).unwrap();
    }
}

/// Sends one raw message from argv[2] with smtplib.
const SEND: &str = r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
with smtplib.SMTP(h, int(p)) as s:
    s.sendmail("sender@example.net", ["ann@example.org"], sys.argv[2].encode())
"#;

/// Prints `MAILBOX|SUBJECT|X-SPAM-STATUS` for every message of the user.
const LIST: &str = r#"
import imaplib, sys, email
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
m.login(sys.argv[2], sys.argv[3])
for name in ("INBOX", "Junk"):
    typ, data = m.select(name, readonly=True)
    if int(data[0]) == 0:
        continue
    typ, data = m.fetch("1:*", "(BODY.PEEK[HEADER])")
    for item in data:
        if isinstance(item, tuple):
            msg = email.message_from_bytes(item[1])
            status = " ".join((msg["X-Spam-Status"] or "").split())
            fields = len(msg.get_all("X-Spam-Status") or [])
            print("%s|%s|%s|%d" % (name, msg["Subject"], status, fields))
m.logout()
"#;

/// Moves the message with this subject between two mailboxes.
const MOVE: &str = r#"
import imaplib, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
m.login(sys.argv[2], sys.argv[3])
m.select(sys.argv[5])
typ, data = m.uid("SEARCH", "SUBJECT", sys.argv[4])
uid = data[0].split()[0]
typ, _ = m.uid("MOVE", uid, sys.argv[6])
assert typ == "OK", typ
m.logout()
"#;

fn list(server: &Server, address: &str) -> Vec<String> {
    let mut lines: Vec<String> = python(LIST, &[&server.imap.to_string(), address, PASSWORD])
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

#[test]
fn a_trained_model_files_spam_to_junk_and_shows_why() {
    let server = Server::start();
    let ann = server.add_user("ann");
    let dir = server.dir.path();
    corpus(&dir.join("spam"), SPAM_WORDS, 60);
    corpus(&dir.join("ham"), HAM_WORDS, 60);
    let out = server.cli_ok(&[
        "spam",
        "train",
        "--spam",
        "--global",
        dir.join("spam").to_str().unwrap(),
    ]);
    assert!(out.contains("trained 60 messages as spam"), "{out}");
    server.cli_ok(&[
        "spam",
        "train",
        "--ham",
        "--global",
        dir.join("ham").to_str().unwrap(),
    ]);
    let stats = server.cli_ok(&["spam", "stats"]);
    assert!(stats.contains("in use: yes"), "{stats}");

    let smtp = server.smtp.to_string();
    // A sender's own score fields are dropped: only ours count.
    let forged = format!(
        "X-Spam-Status: No, score=-50\r\n{}",
        message(SPAM_WORDS, 1000, "spammy")
    );
    python(SEND, &[&smtp, &forged]);
    python(SEND, &[&smtp, &message(HAM_WORDS, 1000, "hammy")]);
    let mail = list(&server, &ann);
    assert_eq!(mail.len(), 2, "{mail:?}");
    check_scored(&mail);

    // Sieve's spamtest (RFC 5235) sees the same score: a script files
    // what scores 6 or more (5 points and up) itself.
    let script = dir.join("spamtest.sieve");
    std::fs::write(
        &script,
        "require [\"spamtest\", \"fileinto\", \"mailbox\", \"relational\", \"comparator-i;ascii-numeric\"];\n\
         if spamtest :value \"ge\" :comparator \"i;ascii-numeric\" \"6\" { fileinto :create \"Scored\"; }\n",
    )
    .unwrap();
    server.cli_ok(&["sieve", "put", &ann, "spamtest", script.to_str().unwrap()]);
    server.cli_ok(&["sieve", "activate", &ann, "spamtest"]);
    let serial = server.count("SELECT value FROM meta WHERE key = 'directory_serial'");
    assert!(wait_until(Duration::from_secs(5), || server
        .log()
        .contains(&format!("serial={serial} "))));
    python(SEND, &[&smtp, &message(SPAM_WORDS, 2000, "scored")]);
    python(SEND, &[&smtp, &message(HAM_WORDS, 2000, "unscored")]);
    let mail = python(LIST, &[&server.imap.to_string(), &ann, PASSWORD]);
    assert!(mail.contains("INBOX|unscored|No, score="), "{mail}");
    // An account's own threshold: at 50 points nothing here is spam.
    server.cli_ok(&["spam", "threshold", &ann, "50"]);
    let serial = server.count("SELECT value FROM meta WHERE key = 'directory_serial'");
    assert!(wait_until(Duration::from_secs(5), || server
        .log()
        .contains(&format!("serial={serial} "))));
    server.cli_ok(&["sieve", "deactivate", &ann]);
    let serial = server.count("SELECT value FROM meta WHERE key = 'directory_serial'");
    assert!(wait_until(Duration::from_secs(5), || server
        .log()
        .contains(&format!("serial={serial} "))));
    python(SEND, &[&smtp, &message(SPAM_WORDS, 3000, "tolerated")]);
    let mail = python(LIST, &[&server.imap.to_string(), &ann, PASSWORD]);
    assert!(mail.contains("INBOX|tolerated|No, score="), "{mail}");
    assert!(mail.contains("required=50.0"), "{mail}");
    let scored = python(
        r#"
import imaplib, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
m.login(sys.argv[2], sys.argv[3])
typ, data = m.select("Scored", readonly=True)
print(typ, int(data[0]) if typ == "OK" else 0)
"#,
        &[&server.imap.to_string(), &ann, PASSWORD],
    );
    assert_eq!(scored.trim(), "OK 1", "{mail}");
}

fn check_scored(mail: &[String]) {
    assert!(mail[0].starts_with("INBOX|hammy|No, score="), "{mail:?}");
    assert!(mail[0].contains("BAYES_00"), "{mail:?}");
    assert!(mail[1].starts_with("Junk|spammy|Yes, score="), "{mail:?}");
    assert!(mail[1].contains("BAYES_99"), "{mail:?}");
    assert!(mail.iter().all(|m| m.ends_with("|1")), "{mail:?}");
}

#[test]
fn moves_into_and_out_of_junk_train_the_users_model() {
    let server = Server::start();
    let ann = server.add_user("ann");
    python(
        SEND,
        &[&server.smtp.to_string(), &message(SPAM_WORDS, 7, "lottery")],
    );
    let imap = server.imap.to_string();
    let stats = || server.cli_ok(&["spam", "stats", &ann]);
    python(MOVE, &[&imap, &ann, PASSWORD, "lottery", "INBOX", "Junk"]);
    assert!(
        wait_until(Duration::from_secs(20), || stats()
            .contains("spam messages: 1\n")),
        "{}",
        stats()
    );
    // Moved back: not spam after all.
    python(MOVE, &[&imap, &ann, PASSWORD, "lottery", "Junk", "INBOX"]);
    assert!(
        wait_until(Duration::from_secs(20), || {
            let s = stats();
            s.contains("spam messages: 0\n") && s.contains("ham messages: 1\n")
        }),
        "{}",
        stats()
    );
    // The global model learnt the same.
    let global = server.cli_ok(&["spam", "stats"]);
    assert!(global.contains("ham messages: 1\n"), "{global}");
}
