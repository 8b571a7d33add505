//! Message submission on 587 (STARTTLS) and 465 (implicit TLS) against a
//! real server, with Python's smtplib and swaks as the clients: AUTH only
//! after TLS, MAIL only after AUTH, the account's own addresses only, the
//! header fixed (Message-ID and Date added, Bcc removed), local
//! recipients delivered at once, remote ones sent through the queue to an
//! `smtp-sink`, EICAR refused, and the hourly limit.

use sluice_testkit as kit;

use std::time::Duration;

use kit::{addr_arg, outbound_config, python, wait_until, Dns, Server, SmtpSink, Zone, PASSWORD};

/// A server whose mail for `remote.test` goes to `sink`.
fn server(sink: &SmtpSink, dns: &Dns, extra: &str) -> Server {
    Server::start_with(&format!(
        "{}{extra}",
        outbound_config(dns.addr, &[("remote.test", sink.addr)])
    ))
}

/// Python helpers: `submit(port, user, message, sender, rcpts, tls)`
/// returns the reply code of the end of data or of the refused step.
const SUBMIT: &str = r#"
import smtplib, ssl, sys
ctx = ssl._create_unverified_context()
def session(addr, implicit):
    h, p = addr.rsplit(":", 1)
    if implicit:
        return smtplib.SMTP_SSL(h, int(p), context=ctx)
    s = smtplib.SMTP(h, int(p))
    s.ehlo()
    return s
def submit(addr, user, password, sender, rcpts, message, implicit=False, login=True):
    s = session(addr, implicit)
    if not implicit:
        s.starttls(context=ctx)
        s.ehlo()
    if login:
        s.login(user, password)
    try:
        s.sendmail(sender, rcpts, message)
        code = 250
    except smtplib.SMTPSenderRefused as e:
        code = e.smtp_code
    except smtplib.SMTPDataError as e:
        code = e.smtp_code
    except smtplib.SMTPRecipientsRefused as e:
        code = list(e.recipients.values())[0][0]
    s.quit()
    return code
"#;

#[test]
fn submission_needs_tls_and_auth_fixes_the_header_and_delivers_locally_and_remotely() {
    let sink = SmtpSink::start(&[]);
    let dns = Dns::start(vec![Zone::new("unused.test", &[])]);
    let server = server(&sink, &dns, "");
    let alice = server.add_user("alice");
    let bob = server.add_user("bob");
    let out = python(
        &format!(
            "{SUBMIT}\n{}",
            r#"
addr, alice, bob, password = sys.argv[1:5]
h, p = addr.rsplit(":", 1)
# Before STARTTLS: no AUTH offered, AUTH refused, MAIL refused.
s = smtplib.SMTP(h, int(p)); s.ehlo()
print("auth-before-tls", "auth" in s.esmtp_features)
code, _ = s.docmd("AUTH", "PLAIN AGFsaWNlAHg=")
print("auth-plain-text", code)
code, _ = s.docmd("MAIL", "FROM:<%s>" % alice)
print("mail-without-auth", code)
s.quit()
# Wrong password.
s = smtplib.SMTP(h, int(p)); s.starttls(context=ctx); s.ehlo()
try:
    s.login(alice, "wrong")
    print("bad-password", 235)
except smtplib.SMTPAuthenticationError as e:
    print("bad-password", e.smtp_code)
s.quit()
message = ("From: Alice <%s>\r\nTo: Bob <%s>, friend@remote.test\r\nBcc: hidden@remote.test\r\n"
           "Subject: submitted\r\n\r\nhello from submission\r\n") % (alice, bob)
print("good", submit(addr, alice, password, alice, [bob, "friend@remote.test", "hidden@remote.test"], message))
print("plus-tag", submit(addr, alice, password, alice.replace("@", "+lists@"), [bob], "From: %s\r\nSubject: tag\r\n\r\nx\r\n" % alice))
print("wrong-envelope", submit(addr, alice, password, bob, [bob], "From: %s\r\nSubject: x\r\n\r\nx\r\n" % bob))
print("wrong-from", submit(addr, alice, password, alice, [bob], "From: %s\r\nSubject: forged\r\n\r\nx\r\n" % bob))
"#
        ),
        &[&addr_arg(server.addr("submission")), &alice, &bob, PASSWORD],
    );
    for expected in [
        "auth-before-tls False",
        "auth-plain-text 538",
        "mail-without-auth 530",
        "bad-password 535",
        "good 250",
        "plus-tag 250",
        "wrong-envelope 553",
        "wrong-from 553",
    ] {
        assert!(
            out.contains(expected),
            "{expected}:\n{out}\n{}",
            server.log()
        );
    }
    // Bob's copy over IMAP: Message-ID and Date added, Bcc gone.
    let read = python(
        r#"
import email, email.policy, imaplib, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(sys.argv[2], sys.argv[3]); m.select("INBOX")
typ, data = m.search(None, "SUBJECT", "submitted")
typ, data = m.fetch(data[0].split()[0], "(BODY.PEEK[])")
msg = email.message_from_bytes(data[0][1], policy=email.policy.default)
print("message-id", bool(msg["Message-ID"]) and msg["Message-ID"].endswith("@mx.example.org>"))
print("date", bool(msg["Date"]))
print("bcc", msg["Bcc"])
print("hidden", b"hidden@remote.test" in data[0][1])
"#,
        &[&addr_arg(server.imap), &bob, PASSWORD],
    );
    for expected in ["message-id True", "date True", "bcc None", "hidden False"] {
        assert!(read.contains(expected), "{expected}:\n{read}");
    }
    // The remote recipients (the Bcc one too) get it through the queue,
    // without the Bcc field.
    assert!(
        wait_until(Duration::from_secs(20), || sink
            .messages()
            .iter()
            .any(|m| m.contains("hello from submission"))),
        "{}",
        server.log()
    );
    let sent = sink
        .messages()
        .into_iter()
        .find(|m| m.contains("hello from submission"))
        .unwrap();
    assert!(sent.contains("friend@remote.test"), "{sent}");
    assert!(!sent.contains("Bcc:"), "{sent}");
    // The transaction's log line names the account that sent it.
    let log = server.log();
    let line = log
        .lines()
        .find(|l| l.contains("smtp transaction") && l.contains(&format!("from={alice}")))
        .unwrap_or_else(|| panic!("no transaction line:\n{log}"));
    assert!(line.contains(&format!("account=\"{alice}\"")), "{line}");
    assert!(line.contains("tls=true"), "{line}");
}

#[test]
fn implicit_tls_auth_login_swaks_eicar_and_the_hourly_limit() {
    let sink = SmtpSink::start(&[]);
    let dns = Dns::start(vec![Zone::new("unused.test", &[])]);
    let server = server(&sink, &dns, "[submission]\nmax_messages_per_hour = 3\n");
    let carol = server.add_user("carol");
    // swaks with AUTH LOGIN over implicit TLS (465).
    let out = kit::swaks(&[
        "--server",
        &addr_arg(server.addr("submissions")),
        "--tls-on-connect",
        "--auth",
        "LOGIN",
        "--auth-user",
        &carol,
        "--auth-password",
        PASSWORD,
        "--from",
        &carol,
        "--to",
        &carol,
        "--header",
        &format!("From: {carol}"),
        "--header",
        "Subject: via swaks",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("235 2.7.0") && text.contains("250 2.0.0 OK queued"),
        "{text}"
    );
    let eicar = concat!(
        r"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-",
        "ANTIVIRUS-TEST-FILE!$H+H*"
    );
    let out = python(
        &format!(
            "{SUBMIT}\n{}",
            r#"
addr, carol, password, eicar = sys.argv[1:5]
msg = "From: %s\r\nSubject: %%s\r\n\r\n%%s\r\n" % carol
print("eicar", submit(addr, carol, password, carol, [carol], msg % ("virus", eicar), implicit=True))
print("second", submit(addr, carol, password, carol, [carol], msg % ("two", "x"), implicit=True))
print("third", submit(addr, carol, password, carol, [carol], msg % ("three", "x"), implicit=True))
print("fourth", submit(addr, carol, password, carol, [carol], msg % ("four", "x"), implicit=True))
"#
        ),
        &[
            &addr_arg(server.addr("submissions")),
            &carol,
            PASSWORD,
            eicar,
        ],
    );
    // swaks was the first message of the hour, EICAR the second (refused,
    // but counted), then one more fits and the fourth is over the limit.
    for expected in ["eicar 554", "second 250", "third 451", "fourth 451"] {
        assert!(
            out.contains(expected),
            "{expected}:\n{out}\n{}",
            server.log()
        );
    }
}
