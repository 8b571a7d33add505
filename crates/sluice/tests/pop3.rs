//! POP3 against a real `sluice serve`, with Python's poplib.

use sluice_testkit as kit;

use std::time::Duration;

use kit::{python, wait_until, Server, PASSWORD};

/// Delivers `n` messages to `to` over SMTP (smtplib).
fn deliver(server: &Server, to: &str, n: usize) {
    python(
        r#"
import smtplib, sys
host, port = sys.argv[1].rsplit(":", 1)
with smtplib.SMTP(host, int(port)) as s:
    for i in range(int(sys.argv[3])):
        s.sendmail("a@remote.test", [sys.argv[2]], "Subject: message %d\r\n\r\nline one\r\n.starts with a dot\r\nline three\r\n" % (i + 1))
"#,
        &[&server.smtp.to_string(), to, &n.to_string()],
    );
}

/// Opens a poplib session logged in as sys.argv[2] (prefix for snippets).
const LOGIN: &str = r#"
import poplib, sys
host, port = sys.argv[1].rsplit(":", 1)
def login():
    p = poplib.POP3(host, int(port), timeout=30)
    p.user(sys.argv[2]); p.pass_(sys.argv[3])
    return p
"#;

fn pop(server: &Server, user: &str, script: &str) -> String {
    python(
        &format!("{LOGIN}\n{script}"),
        &[&server.pop3.to_string(), user, PASSWORD],
    )
}

#[test]
fn retrieve_and_delete_across_sessions() {
    let server = Server::start();
    let user = server.add_user("reader");
    deliver(&server, &user, 3);
    let out = pop(
        &server,
        &user,
        r#"
p = login()
print(p.stat())
resp, lines, octets = p.retr(2)
print(lines[-3:])
print(p.dele(1))
print(p.stat())
try:
    p.retr(1)
except poplib.error_proto as e:
    print(e)
p.quit()
p = login()
print(p.stat())
p.dele(1); p.rset()
p.quit()
p = login()
print(p.stat()[0])
print([l for l in p.retr(1)[1] if l.startswith(b"Subject")][0])
p.quit()
"#,
    );
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("(3, "), "{out}");
    assert_eq!(
        lines[1],
        "[b'line one', b'.starts with a dot', b'line three']"
    );
    assert_eq!(lines[2], "b'+OK Message 1 deleted'");
    assert!(lines[3].starts_with("(2, "));
    assert_eq!(lines[4], "b'-ERR Message is deleted'");
    assert!(
        lines[5].starts_with("(2, "),
        "deletion applied at QUIT: {out}"
    );
    assert_eq!(lines[6], "2", "RSET undid the mark");
    assert_eq!(lines[7], "b'Subject: message 2'");
    // The expunged message's blob is released, and swept from the store
    // in the background soon after.
    assert!(
        wait_until(Duration::from_secs(5), || server
            .count("SELECT count(*) FROM blobs")
            == 2),
        "the expunged message's blob was not swept"
    );
}

#[test]
fn a_second_session_on_the_same_maildrop_gets_in_use() {
    let server = Server::start();
    let user = server.add_user("busy");
    let out = pop(
        &server,
        &user,
        r#"
first = login()
second = poplib.POP3(host, int(port))
second.user(sys.argv[2])
try:
    second.pass_(sys.argv[3])
except poplib.error_proto as e:
    print(e)
first.quit()
second.user(sys.argv[2])
print(second.pass_(sys.argv[3]))
second.quit()
"#,
    );
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("b'-ERR [IN-USE]"), "{out}");
    assert!(lines[1].starts_with("b'+OK"), "{out}");
}

#[test]
fn capa_auth_plain_uidl_and_top() {
    let server = Server::start();
    let user = server.add_user("caps");
    deliver(&server, &user, 2);
    let out = python(
        r#"
import base64, poplib, sys
host, port = sys.argv[1].rsplit(":", 1)
p = poplib.POP3(host, int(port))
caps = p.capa()
print(sorted(k for k in caps))
token = base64.b64encode(b"\0" + sys.argv[2].encode() + b"\0" + sys.argv[3].encode()).decode()
print(p._shortcmd("AUTH PLAIN " + token)[:3])
uidl1 = p.uidl()[1]
print(p.top(1, 1)[1])
p.quit()
p = poplib.POP3(host, int(port))
p._putcmd("AUTH PLAIN")
print(p._getline()[0][:1])
print(p._shortcmd(token)[:3])
print(p.uidl()[1] == uidl1)
print(p.list(2))
p.quit()
"#,
        &[&server.pop3.to_string(), &user, PASSWORD],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "['AUTH-RESP-CODE', 'IMPLEMENTATION', 'PIPELINING', 'RESP-CODES', 'SASL', 'STLS', 'TOP', 'UIDL', 'USER']"
    );
    assert_eq!(lines[1], "b'+OK'");
    assert!(
        lines[2].ends_with("b'Subject: message 1', b'', b'line one']"),
        "{out}"
    );
    assert_eq!(lines[3], "b'+'");
    assert_eq!(lines[4], "b'+OK'");
    assert_eq!(lines[5], "True", "UIDs are stable across sessions");
    assert!(lines[6].starts_with("b'+OK 2 "));
}

#[test]
fn stls_and_implicit_tls() {
    let server = Server::start();
    let user = server.add_user("tls");
    deliver(&server, &user, 1);
    let out = python(
        r#"
import poplib, ssl, sys
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
host, port = sys.argv[1].rsplit(":", 1)
p = poplib.POP3(host, int(port))
print(p.stls(context=ctx)[:3])
print("STLS" in p.capa())
p.user(sys.argv[3]); p.pass_(sys.argv[4])
print(p.stat()[0])
p.quit()
host, port = sys.argv[2].rsplit(":", 1)
p = poplib.POP3_SSL(host, int(port), context=ctx)
p.user(sys.argv[3]); p.pass_(sys.argv[4])
print(p.stat()[0])
p.quit()
"#,
        &[
            &server.pop3.to_string(),
            &server.pop3s.to_string(),
            &user,
            PASSWORD,
        ],
    );
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        ["b'+OK'", "False", "1", "1"]
    );
}

#[test]
fn bad_credentials_are_throttled_and_end_the_session() {
    let server = Server::start();
    let user = server.add_user("guarded");
    let out = python(
        r#"
import poplib, sys, time
host, port = sys.argv[1].rsplit(":", 1)
p = poplib.POP3(host, int(port))
for attempt in range(3):
    p.user(sys.argv[2])
    started = time.monotonic()
    try:
        p.pass_("wrong")
    except poplib.error_proto as e:
        print(e, time.monotonic() - started >= 1.0)
try:
    p.noop()
    print("still open")
except (poplib.error_proto, EOFError, OSError) as e:
    print("closed")
"#,
        &[&server.pop3.to_string(), &user],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "b'-ERR [AUTH] Authentication failed' True");
    assert_eq!(lines[1], "b'-ERR [AUTH] Authentication failed' True");
    assert!(
        lines[2].starts_with("b'-ERR [AUTH] Authentication failed"),
        "{out}"
    );
    assert_eq!(lines[3], "closed");
}
