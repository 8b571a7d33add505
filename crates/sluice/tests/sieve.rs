//! Sieve at delivery, end to end: scripts uploaded with `sluice sieve`,
//! mail sent with Python's smtplib, the result read back with imaplib
//! (which mailbox, which flags), and the answers the filters send
//! (vacation, rejection notices) found in the sender's own INBOX.

use sluice_testkit as kit;

use kit::{python, Server, PASSWORD};

/// Puts and activates a script for an account through the command line.
fn activate(server: &Server, address: &str, script: &str) {
    let file = server.dir.path().join(format!("{address}.sieve"));
    std::fs::write(&file, script).unwrap();
    server.cli_ok(&["sieve", "put", address, "main", file.to_str().unwrap()]);
    server.cli_ok(&["sieve", "activate", address, "main"]);
    // Delivery sees scripts through the directory snapshot, which the
    // server reloads when the serial moves: wait until it has.
    let serial = server.count("SELECT value FROM meta WHERE key = 'directory_serial'");
    let seen = kit::wait_until(std::time::Duration::from_secs(5), || {
        server.log().contains(&format!("serial={serial} "))
    });
    assert!(seen, "the server did not pick up the script");
}

/// Sends each `FROM|TO,TO|SUBJECT|EXTRA-HEADER` case; prints one line per
/// case: `ok` or the SMTP error code and text.
const SEND: &str = r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
for case in sys.argv[2:]:
    sender, rcpts, subject, extra = case.split("|")
    msg = "From: <%s>\r\nTo: <%s>\r\nSubject: %s\r\nMessage-ID: <%s@test>\r\n%s\r\nHello.\r\n" % (
        sender, rcpts.split(",")[0], subject, abs(hash(case)), extra + "\r\n" if extra else "")
    try:
        with smtplib.SMTP(h, int(p)) as s:
            s.sendmail(sender, rcpts.split(","), msg.encode())
        print("ok")
    except smtplib.SMTPDataError as e:
        print("%d %s" % (e.smtp_code, e.smtp_error.decode()))
"#;

/// Lists every mailbox of a user with each message's subject and flags:
/// `MAILBOX|SUBJECT|FLAGS` lines.
const LIST: &str = r#"
import imaplib, sys, re
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
m.login(sys.argv[2], sys.argv[3])
typ, boxes = m.list()
for line in boxes:
    name = line.decode().rsplit(' "/" ', 1)[1].strip('"')
    typ, data = m.select('"%s"' % name, readonly=True)
    n = int(data[0])
    if n == 0:
        continue
    typ, data = m.fetch("1:*", "(FLAGS BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
    for item in data:
        if not isinstance(item, tuple):
            continue
        flags = re.search(rb"FLAGS \(([^)]*)\)", item[0]).group(1).decode()
        flags = " ".join(f for f in flags.split() if f != "\\Recent")
        subject = item[1].decode().strip().split(":", 1)[1].strip()
        print("%s|%s|%s" % (name, subject, flags))
m.logout()
"#;

fn send(server: &Server, cases: &[&str]) -> Vec<String> {
    python(SEND, &[&[server.smtp.to_string().as_str()], cases].concat())
        .lines()
        .map(str::to_string)
        .collect()
}

fn mail_of(server: &Server, address: &str) -> Vec<String> {
    let mut lines: Vec<String> = python(LIST, &[&server.imap.to_string(), address, PASSWORD])
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

const SCRIPT: &str = r#"
require ["fileinto", "imap4flags", "reject", "vacation", "envelope",
         "subaddress", "mailbox", "variables"];
if header :contains "subject" "[list]" {
    fileinto :create :flags "\\Flagged" "Lists";
    stop;
}
if header :is "subject" "unwanted" {
    reject "No thanks.";
    stop;
}
if address :is "from" "noise@example.net" {
    discard;
    stop;
}
if envelope :detail "to" "work" {
    addflag "$Work";
}
if header :matches "subject" "away*" {
    vacation :days 1 :subject "Out of office" "I am away until Monday.";
}
if header :contains "subject" "pass on" {
    redirect "bob@example.org";
}
if header :contains "subject" "no such box" {
    fileinto "Nowhere";
}
"#;

#[test]
fn scripts_file_flag_discard_redirect_and_reject() {
    let server = Server::start();
    let ann = server.add_user("ann");
    let bob = server.add_user("bob");
    let carol = server.add_user("carol");
    activate(&server, &ann, SCRIPT);

    let replies = send(
        &server,
        &[
            &format!("{carol}|{ann}|news [list] 42|"),
            &format!("{carol}|ann+work@example.org|the budget|"),
            "noise@example.net|ann@example.org|buy now|",
            &format!("{carol}|{ann}|please pass on|"),
            &format!("{carol}|{ann}|no such box here|"),
            &format!("{carol}|{ann}|unwanted|"),
        ],
    );
    assert_eq!(replies[..5], ["ok", "ok", "ok", "ok", "ok"], "{replies:?}");
    // RFC 5429 §2.1: the only recipient rejected it: refused in SMTP.
    assert_eq!(replies[5], "550 5.7.1 No thanks.");

    let ann_mail = mail_of(&server, &ann);
    assert_eq!(
        ann_mail,
        [
            "INBOX|no such box here|",
            "INBOX|the budget|$Work",
            "Lists|news [list] 42|\\Flagged",
        ],
        "{ann_mail:?}"
    );
    // Redirected, not kept: the copy is bob's.
    assert_eq!(mail_of(&server, &bob), ["INBOX|please pass on|"]);
    let log = server.log();
    assert!(log.contains("verdict=discarded"), "{log}");
    assert!(log.contains("verdict=rejected-sieve"), "{log}");
}

#[test]
fn vacation_answers_once_per_sender_and_never_lists_or_bounces() {
    let server = Server::start();
    let ann = server.add_user("ann");
    let carol = server.add_user("carol");
    let dave = server.add_user("dave");
    activate(&server, &ann, SCRIPT);
    let replies = send(
        &server,
        &[
            &format!("{carol}|{ann}|away test 1|"),
            &format!("{carol}|{ann}|away test 2|"),
            &format!("{dave}|{ann}|away from a list|List-Id: <l.example.org>"),
            &format!("{dave}|{ann}|away in bulk|Precedence: bulk"),
            &format!("|{ann}|away bounce|"),
        ],
    );
    assert!(replies.iter().all(|r| r == "ok"), "{replies:?}");
    let carol_mail = mail_of(&server, &carol);
    assert_eq!(carol_mail, ["INBOX|Out of office|"], "{carol_mail:?}");
    assert!(mail_of(&server, &dave).is_empty());
    // Everything still reached ann.
    assert_eq!(mail_of(&server, &ann).len(), 5);
}

#[test]
fn a_rejection_among_several_recipients_is_a_notice_to_the_sender() {
    let server = Server::start();
    let ann = server.add_user("ann");
    let bob = server.add_user("bob");
    let carol = server.add_user("carol");
    activate(&server, &ann, SCRIPT);
    let replies = send(&server, &[&format!("{carol}|{ann},{bob}|unwanted|")]);
    assert_eq!(replies, ["ok"]);
    assert_eq!(mail_of(&server, &bob), ["INBOX|unwanted|"]);
    assert!(mail_of(&server, &ann).is_empty());
    assert_eq!(mail_of(&server, &carol), ["INBOX|Rejected: unwanted|"]);
}

#[test]
fn a_failing_script_never_loses_the_message() {
    let server = Server::start();
    let ann = server.add_user("ann");
    // More redirects than the limit allows: the run fails, the implicit
    // keep holds.
    activate(
        &server,
        &ann,
        "redirect \"a@example.net\"; redirect \"b@example.net\"; redirect \"c@example.net\";\n\
         redirect \"d@example.net\"; redirect \"e@example.net\"; redirect \"f@example.net\";\n",
    );
    let replies = send(&server, &[&format!("x@example.net|{ann}|loop|")]);
    assert_eq!(replies, ["ok"]);
    assert_eq!(mail_of(&server, &ann), ["INBOX|loop|"]);
    assert!(server.log().contains("sieve script failed"));
}

/// The extensions beyond filing and flags, each deciding a folder.
const EXTENSIONS_SCRIPT: &str = r#"
require ["fileinto", "body", "regex", "relational", "comparator-i;ascii-numeric",
         "variables", "include", "duplicate", "copy", "date", "index", "mailbox",
         "virustest"];
if duplicate {
    discard;
    stop;
}
if body :text :contains "invoice attached" {
    fileinto :create "Invoices";
    stop;
}
if header :regex "subject" "^ticket #([0-9]+)" {
    fileinto :create "Tickets/${1}";
    stop;
}
if header :count "ge" :comparator "i;ascii-numeric" "x-hop" "3" {
    fileinto :create "Hops";
    stop;
}
if date :value "lt" :originalzone "date" "year" "2000" {
    fileinto :create "Old";
    stop;
}
if header :contains "subject" "copy me" {
    redirect :copy "bob@example.org";
    # 1: scanned and clean (RFC 5235 §3.2).
    if virustest :value "eq" :comparator "i;ascii-numeric" "1" {
        addheader "X-Never" "seen";
    }
}
include :global "common";
"#;

const GLOBAL_SCRIPT: &str = r#"
require ["fileinto", "mailbox"];
if header :contains "subject" "site-wide" {
    fileinto :create "Global";
}
"#;

#[test]
fn extensions_decide_where_mail_goes() {
    let server = Server::start();
    let ann = server.add_user("ann");
    let bob = server.add_user("bob");
    let global = server.dir.path().join("common.sieve");
    std::fs::write(&global, GLOBAL_SCRIPT).unwrap();
    server.cli_ok(&[
        "sieve",
        "put",
        "--global",
        "common",
        global.to_str().unwrap(),
    ]);
    // `addheader` needs "editheader", which the script does not require:
    // it must not compile, and the error names the line.
    let file = server.dir.path().join("bad.sieve");
    std::fs::write(&file, EXTENSIONS_SCRIPT).unwrap();
    let out = server.cli(&["sieve", "put", &ann, "main", file.to_str().unwrap()], "");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let line = 1 + EXTENSIONS_SCRIPT
        .lines()
        .position(|l| l.contains("addheader"))
        .unwrap();
    assert!(err.contains(&format!("line {line}")), "{err}");
    let script = EXTENSIONS_SCRIPT.replace(
        "        addheader \"X-Never\" \"seen\";\n",
        "        fileinto :create \"Clean\";\n        stop;\n",
    );
    activate(&server, &ann, &script);

    let replies = send(
        &server,
        &[
            &format!("x@example.net|{ann}|ticket #42 broken|"),
            &format!("x@example.net|{ann}|three hops|X-Hop: a\r\nX-Hop: b\r\nX-Hop: c"),
            &format!("x@example.net|{ann}|from the past|Date: Fri, 1 Jan 1999 10:00:00 +0000"),
            &format!("x@example.net|{ann}|please copy me|"),
            &format!("x@example.net|{ann}|site-wide news|"),
        ],
    );
    assert!(replies.iter().all(|r| r == "ok"), "{replies:?}");
    // The same Message-ID twice: the second is a duplicate.
    let same = "x@example.net|ann@example.org|dup|";
    assert_eq!(send(&server, &[same, same]), ["ok", "ok"]);
    let invoice = r#"
import smtplib, sys
from email.message import EmailMessage
h, p = sys.argv[1].rsplit(":", 1)
m = EmailMessage()
m["From"], m["To"], m["Subject"] = "x@example.net", "ann@example.org", "monthly"
m.set_content("Hello,\n\nthe invoice attached is for November.\n", cte="base64")
with smtplib.SMTP(h, int(p)) as s:
    s.send_message(m)
"#;
    python(invoice, &[&server.smtp.to_string()]);

    let ann_mail = mail_of(&server, &ann);
    assert_eq!(
        ann_mail,
        [
            "Clean|please copy me|",
            "Global|site-wide news|",
            "Hops|three hops|",
            "INBOX|dup|",
            "Invoices|monthly|",
            "Old|from the past|",
            "Tickets/42|ticket #42 broken|",
        ],
        "{ann_mail:?}"
    );
    assert_eq!(mail_of(&server, &bob), ["INBOX|please copy me|"]);
}
