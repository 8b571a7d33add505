//! SMTP receiving against a real `sluice serve`, with Python's smtplib,
//! raw sockets for the protocol details, and swaks.

use sluice_testkit as kit;

use std::time::Duration;

use kit::{python, python_spawn, swaks, wait_until, Server, PASSWORD};

/// smtplib sending one message; prints the refused recipients as JSON.
const SEND: &str = r#"
import json, smtplib, sys
host, port = sys.argv[1].rsplit(":", 1)
rcpts = sys.argv[2].split(",")
msg = "From: sender@remote.test\r\nTo: team\r\nSubject: " + sys.argv[3] + "\r\n\r\nBody of " + sys.argv[3] + "\r\n"
with smtplib.SMTP(host, int(port)) as s:
    print(json.dumps(s.sendmail("sender@remote.test", rcpts, msg)))
"#;

fn send(server: &Server, rcpts: &[String], subject: &str) -> String {
    python(SEND, &[&server.smtp.to_string(), &rcpts.join(","), subject])
}

/// A raw SMTP connection for protocol details: `s` is the socket, `f` its
/// reader, `reply()` returns the last line of the next reply (or
/// "closed"), `reply_lines()` all its lines. The greeting is read already.
const RAW: &str = r#"
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)))
s.settimeout(30)
f = s.makefile("rb")
def reply_lines():
    lines = []
    while True:
        l = f.readline().decode()
        if not l:
            return lines + ["closed"]
        lines.append(l.strip())
        if l[3] == " ":
            return lines
def reply():
    return reply_lines()[-1]
assert reply().startswith("220")
"#;

/// Runs `script` after [`RAW`] against the server's SMTP port, with
/// `args` as sys.argv[2:]; returns the lines it printed.
fn raw(server: &Server, script: &str, args: &[&str]) -> Vec<String> {
    let code = format!("{RAW}\n{script}");
    let mut argv = vec![server.smtp.to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    python(&code, &argv).lines().map(str::to_string).collect()
}

#[test]
fn one_and_fifteen_recipients_share_one_blob_each() {
    let server = Server::start();
    let users: Vec<String> = (0..15)
        .map(|i| server.add_user(&format!("user{i}")))
        .collect();
    assert_eq!(send(&server, &users[..1], "single").trim(), "{}");
    assert_eq!(send(&server, &users, "fifteen").trim(), "{}");
    assert_eq!(server.count("SELECT count(*) FROM blobs"), 2);
    assert_eq!(server.count("SELECT count(*) FROM messages"), 16);
    assert_eq!(
        server.count("SELECT refcount FROM blobs WHERE hdr_subject = 'fifteen'"),
        15
    );
    assert_eq!(
        server.count("SELECT count(DISTINCT m.mailbox_id) FROM messages m JOIN blobs b ON b.id = m.blob_id WHERE b.hdr_subject = 'fifteen'"),
        15
    );
    // One line per transaction, with what an operator greps for.
    let log = server.log();
    let line = log
        .lines()
        .find(|l| l.contains("smtp transaction") && l.contains("user14@"))
        .unwrap();
    for field in [
        "client=127.0.0.1",
        "from=sender@remote.test",
        "size=",
        "verdict=accepted",
        "queue_id=",
    ] {
        assert!(line.contains(field), "{field} missing in {line}");
    }
}

#[test]
fn unknown_recipients_and_relaying_are_refused_and_nothing_is_stored() {
    let server = Server::start();
    server.add_user("alice");
    let out = python(
        r#"
import smtplib, sys
host, port = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(host, int(port))
s.ehlo("client.test")
s.mail("x@remote.test")
print(s.rcpt("nobody@example.org"))
print(s.rcpt("someone@elsewhere.test"))
print(s.docmd("DATA"))
print(s.rcpt("postmaster@example.org"))
s.quit()
"#,
        &[&server.smtp.to_string()],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("(550, b'5.1.1"), "{out}");
    assert!(lines[1].starts_with("(550, b'5.7.1"), "{out}");
    assert!(lines[2].starts_with("(554, b'5.5.1"), "{out}");
    assert!(
        lines[3].starts_with("(250, b'2.1.5"),
        "postmaster is always accepted: {out}"
    );
    assert_eq!(server.count("SELECT count(*) FROM blobs"), 0);
}

#[test]
fn pipelined_commands_get_their_replies_in_order() {
    let server = Server::start();
    let user = server.add_user("pipe");
    let out = raw(
        &server,
        r#"
s.sendall(("EHLO c.test\r\nMAIL FROM:<a@remote.test>\r\nRCPT TO:<%s>\r\nRCPT TO:<ghost@example.org>\r\nDATA\r\n" % sys.argv[2]).encode())
assert "250-PIPELINING" in reply_lines()
for _ in range(4):
    print(reply()[:3])
s.sendall(b"Subject: piped\r\n\r\n..leading dot\r\n.\r\nNOOP\r\nQUIT\r\n")
for _ in range(3):
    print(reply()[:3])
"#,
        &[&user],
    );
    assert_eq!(out, ["250", "250", "550", "354", "250", "250", "221"]);
    let text = String::from_utf8(server.stored_text("true")).unwrap();
    assert!(
        text.ends_with("Subject: piped\r\n\r\n.leading dot\r\n"),
        "{text:?}"
    );
}

#[test]
fn bdat_chunks_are_stored_byte_for_byte() {
    let server = Server::start();
    let user = server.add_user("chunky");
    let out = raw(
        &server,
        r#"
s.sendall(b"EHLO c.test\r\n")
assert "250-CHUNKING" in reply_lines()
part1 = b"Subject: chunked\r\n\r\n.not stuffed\r\n"
part2 = b"second part\r\n"
s.sendall(b"MAIL FROM:<a@remote.test>\r\nRCPT TO:<" + sys.argv[2].encode() + b">\r\n")
print(reply()); print(reply())
s.sendall(b"BDAT %d\r\n" % len(part1) + part1 + b"BDAT %d LAST\r\n" % len(part2) + part2)
print(reply()); print(reply())
s.sendall(b"BDAT 5 LAST\r\nhello")
print(reply())
s.sendall(b"QUIT\r\n"); print(reply())
"#,
        &[&user],
    );
    let codes: Vec<&str> = out.iter().map(|l| &l[..3]).collect();
    assert_eq!(codes, ["250", "250", "250", "250", "503", "221"], "{out:?}");
    let data = server.stored_text("true");
    assert!(data.ends_with(b"Subject: chunked\r\n\r\n.not stuffed\r\nsecond part\r\n"));
}

#[test]
fn starttls_then_delivery_without_auth() {
    let server = Server::start();
    let user = server.add_user("secure");
    let out = python(
        r#"
import smtplib, ssl, sys
host, port = sys.argv[1].rsplit(":", 1)
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
with smtplib.SMTP(host, int(port)) as s:
    s.ehlo()
    assert s.has_extn("starttls")
    print(s.starttls(context=ctx)[0])
    s.ehlo()
    assert not s.has_extn("starttls")
    print(s.sendmail("a@remote.test", [sys.argv[2]], "Subject: over tls\r\n\r\nsecret\r\n"))
"#,
        &[&server.smtp.to_string(), &user],
    );
    assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["220", "{}"]);
    // swaks, an independent client, the same way.
    let out = swaks(&[
        "--server",
        &server.smtp.to_string(),
        "--tls",
        "--to",
        &user,
        "--from",
        "b@remote.test",
        "--header",
        "Subject: swaks tls",
        "--body",
        "hello from swaks",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8(server.stored_text("b.hdr_subject = 'swaks tls'")).unwrap();
    assert!(text.contains("with ESMTPS id"), "{text}");
    assert_eq!(server.count("SELECT count(*) FROM messages"), 2);
}

#[test]
fn swaks_plain_delivery_to_an_alias_and_plus_address() {
    let server = Server::start();
    let alice = server.add_user("alice");
    let bob = server.add_user("bob");
    server.cli_ok(&[
        "alias",
        "add",
        "team@example.org",
        &alice,
        &bob,
        "far@remote.test",
    ]);
    assert!(wait_until(Duration::from_secs(2), || {
        swaks(&[
            "--server",
            &server.smtp.to_string(),
            "--to",
            "TEAM@Example.org",
            "--quit-after",
            "RCPT",
        ])
        .status
        .success()
    }));
    for to in ["team@example.org", "Alice+news@EXAMPLE.ORG"] {
        let out = swaks(&[
            "--server",
            &server.smtp.to_string(),
            "--to",
            to,
            "--from",
            "x@remote.test",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // team: alice + bob + one remote (queued); plus-address: alice.
    assert_eq!(server.count("SELECT count(*) FROM blobs"), 2);
    assert_eq!(server.count("SELECT count(*) FROM messages"), 3);
    assert_eq!(
        server.count("SELECT count(*) FROM queue WHERE recipient = 'far@remote.test'"),
        1
    );
}

#[test]
fn oversize_messages_are_refused_and_nothing_is_stored() {
    let server = Server::start_with("[smtp]\nmax_message_size = 100000\n");
    let user = server.add_user("small");
    // smtplib announces SIZE=..., refused before any data is sent.
    let out = python(
        r#"
import smtplib, sys
host, port = sys.argv[1].rsplit(":", 1)
big = "Subject: big\r\n\r\n" + ("x" * 998 + "\r\n") * 300
with smtplib.SMTP(host, int(port)) as s:
    try:
        s.sendmail("a@remote.test", [sys.argv[2]], big)
    except smtplib.SMTPSenderRefused as e:
        print(e.smtp_code, e.smtp_error.decode()[:5])
"#,
        &[&server.smtp.to_string(), &user],
    );
    assert_eq!(out.trim(), "552 5.3.4");
    // A client that does not announce it is refused at the end of DATA, or
    // of the last BDAT chunk.
    let out = raw(
        &server,
        r#"
big = b"Subject: big\r\n\r\n" + (b"x" * 998 + b"\r\n") * 300
s.sendall(b"EHLO c\r\nMAIL FROM:<a@remote.test>\r\nRCPT TO:<" + sys.argv[2].encode() + b">\r\nDATA\r\n")
for _ in range(4): reply()
s.sendall(big + b".\r\n")
print(reply()[:9])
s.sendall(b"MAIL FROM:<a@remote.test>\r\nRCPT TO:<" + sys.argv[2].encode() + b">\r\nBDAT 150000 LAST\r\n" + b"y" * 150000)
reply(); reply()
print(reply()[:9])
"#,
        &[&user],
    );
    assert_eq!(out, ["552 5.3.4", "552 5.3.4"]);
    // The pieces already written are dropped by the store's writer right
    // after the refusal, not before it.
    assert!(wait_until(Duration::from_secs(5), || {
        server.count("SELECT count(*) FROM blobs") == 0
            && server.count("SELECT count(*) FROM blob_chunks") == 0
    }));
    assert!(server.log().contains("verdict=too-big"));
}

#[test]
fn a_fifty_megabyte_message_goes_through_with_flat_memory() {
    let server = Server::start();
    let user = server.add_user("big");
    // Log in once first: checking the password (argon2id, 19 MiB by
    // design) is not what this test measures, and later logins are cached.
    python(
        r#"
import poplib, sys
host, port = sys.argv[1].rsplit(":", 1)
p = poplib.POP3(host, int(port))
p.user(sys.argv[2]); p.pass_(sys.argv[3])
p.quit()
"#,
        &[&server.pop3.to_string(), &user, PASSWORD],
    );
    let before = server.peak_rss_kb();
    let out = raw(
        &server,
        r#"
import hashlib
s.sendall(b"EHLO c\r\nMAIL FROM:<a@remote.test> SIZE=50000000\r\nRCPT TO:<" + sys.argv[2].encode() + b">\r\nDATA\r\n")
for _ in range(4): reply()
h = hashlib.sha256()
head = b"Subject: fifty megabytes\r\n\r\n"
s.sendall(head); h.update(head)
line = b"0123456789" * 99 + b"abcdef\r\n"
block = line * 1000
for _ in range(50):
    s.sendall(block); h.update(block)
s.sendall(b".\r\n")
print(reply()[:3])
print(h.hexdigest())
"#,
        &[&user],
    );
    assert_eq!(out[0], "250");
    let sent_digest = out[1].clone();
    let growth_mb = (server.peak_rss_kb().saturating_sub(before)) / 1024;
    // The message is 50 MB; the server's peak grew by a small fraction.
    assert!(
        growth_mb < 24,
        "peak memory grew by {growth_mb} MB for a 50 MB message"
    );
    assert!(server.count("SELECT count(*) FROM blob_chunks") > 100);

    // Read it back over POP3, also piece by piece, and compare.
    let out = python(
        r#"
import hashlib, poplib, sys
host, port = sys.argv[1].rsplit(":", 1)
p = poplib.POP3(host, int(port))
p.user(sys.argv[2]); p.pass_(sys.argv[3])
resp, lines, octets = p.retr(1)
body = b"\r\n".join(lines) + b"\r\n"
start = body.index(b"Subject: fifty")
print(hashlib.sha256(body[start:]).hexdigest())
p.quit()
"#,
        &[&server.pop3.to_string(), &user, PASSWORD],
    );
    assert_eq!(out.trim(), sent_digest);
    let growth_mb = (server.peak_rss_kb().saturating_sub(before)) / 1024;
    assert!(
        growth_mb < 24,
        "peak memory grew by {growth_mb} MB after RETR of 50 MB"
    );
}

#[test]
fn kill_nine_right_after_250_loses_nothing() {
    let mut server = Server::start();
    let user = server.add_user("durable");
    let out = python(
        r#"
import os, signal, smtplib, sys
host, port = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(host, int(port))
for i in range(20):
    s.sendmail("a@remote.test", [sys.argv[2]], "Subject: durable %d\r\n\r\nkeep me\r\n" % i)
# The 250 of the last message is in: kill the server at once.
os.kill(int(sys.argv[3]), signal.SIGKILL)
print("sent")
"#,
        &[&server.smtp.to_string(), &user, &server.pid().to_string()],
    );
    assert_eq!(out.trim(), "sent");
    server.kill9();
    server.restart();
    let out = python(
        r#"
import poplib, sys
host, port = sys.argv[1].rsplit(":", 1)
p = poplib.POP3(host, int(port))
p.user(sys.argv[2]); p.pass_(sys.argv[3])
print(p.stat()[0])
p.quit()
"#,
        &[&server.pop3.to_string(), &user, PASSWORD],
    );
    assert_eq!(out.trim(), "20");
}

#[test]
fn users_added_by_the_cli_are_live_within_two_seconds() {
    let server = Server::start();
    let probe = |to: &str| {
        swaks(&[
            "--server",
            &server.smtp.to_string(),
            "--to",
            to,
            "--quit-after",
            "RCPT",
        ])
        .status
        .success()
    };
    assert!(!probe("late@example.org"));
    server.add_user("late");
    assert!(wait_until(Duration::from_secs(2), || probe(
        "late@example.org"
    )));
    server.cli_ok(&["user", "remove", "late@example.org"]);
    assert!(wait_until(Duration::from_secs(2), || !probe(
        "late@example.org"
    )));
    assert!(server.cli_ok(&["user", "list"]).trim().is_empty());
    // Bad input to the command line: a clear error and a failing status.
    let out = server.cli(
        &["user", "add", "x@unknown.test", "--password-stdin"],
        "pw\n",
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown.test"));
}

/// Listings end quietly when their reader goes away (`| head`).
#[test]
fn a_listing_into_a_closed_pipe_ends_quietly() {
    let server = Server::start();
    // One listing line longer than a pipe holds (64 KiB).
    let targets: Vec<String> = (0..5000).map(|i| format!("x{i}@remote.test")).collect();
    let mut args = vec!["alias", "add", "list@example.org"];
    args.extend(targets.iter().map(String::as_str));
    server.cli_ok(&args);
    for listing in ["alias list", "domain list", "user list", "queue list"] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{} --config {} {listing} | head -c 1 >/dev/null",
                kit::sluice_bin().display(),
                server.config_path().display()
            ))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{listing}: {stderr}"
        );
    }
}

#[test]
fn limits_have_clear_replies() {
    let server = Server::start_with(
        "[smtp]\nmax_recipients = 3\nmax_line_length = 512\nmax_errors = 4\nmax_connections_per_ip = 2\ncommand_timeout_secs = 2\n",
    );
    for u in ["a", "b", "c", "d"] {
        server.add_user(u);
    }
    let out = raw(
        &server,
        r#"
s.sendall(b"EHLO c\r\nMAIL FROM:<x@remote.test>\r\n"); reply(); reply()
for u in "abcd":
    s.sendall(("RCPT TO:<%s@example.org>\r\n" % u).encode())
    print(reply()[:9])
s.sendall(b"NOOP " + b"x" * 600 + b"\r\n"); print(reply()[:9])
s.sendall(b"BOGUS\r\n"); print(reply()[:9])
s.sendall(b"BOGUS\r\n"); print(reply()[:9]); print(reply()[:9])
"#,
        &[],
    );
    assert_eq!(
        out,
        [
            "250 2.1.5",
            "250 2.1.5",
            "250 2.1.5",
            "452 4.5.3",
            "500 5.5.2",
            "500 5.5.2",
            "500 5.5.2",
            "421 4.7.0"
        ],
    );
    // A third connection from the same address is turned away; an idle
    // one is closed after the command timeout.
    let out = raw(
        &server,
        r#"
s.sendall(b"EHLO c\r\n"); reply()
t = socket.create_connection((host, int(port)))
u = socket.create_connection((host, int(port)))
print(u.makefile("rb").readline().decode()[:9])
print(reply()[:9])
"#,
        &[],
    );
    assert_eq!(out, ["421 4.7.0", "421 4.4.2"]);
}

#[test]
fn commands_without_a_transaction_are_limited() {
    let server = Server::start_with("[smtp]\nmax_junk_commands = 3\n");
    let out = raw(
        &server,
        r#"
s.sendall(b"EHLO c\r\n"); print(reply()[:3])
for _ in range(3):
    s.sendall(b"NOOP\r\n"); print(reply()[:9])
print(reply())
"#,
        &[],
    );
    assert_eq!(
        out,
        ["250", "250 2.0.0", "250 2.0.0", "421 4.7.0", "closed"]
    );
}

#[test]
fn sigterm_lets_a_transaction_in_flight_finish_and_exits_zero() {
    let mut server = Server::start();
    let user = server.add_user("inflight");
    let pid = server.pid().to_string();
    let out = python(
        r#"
import os, signal, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
def conn():
    s = socket.create_connection((host, int(port)))
    s.settimeout(20)
    return s, s.makefile("rb")
def reply(f):
    while True:
        l = f.readline().decode()
        if not l:
            return "closed"
        if l[3] == " ":
            return l.strip()
busy, bf = conn(); reply(bf)
idle, idf = conn(); reply(idf)
idle.sendall(b"EHLO c\r\n"); reply(idf)
busy.sendall(b"EHLO c\r\nMAIL FROM:<a@remote.test>\r\nRCPT TO:<" + sys.argv[2].encode() + b">\r\nDATA\r\n")
for _ in range(4): reply(bf)
busy.sendall(b"Subject: in flight\r\n\r\nfirst half\r\n")
os.kill(int(sys.argv[3]), signal.SIGTERM)
print(reply(idf)[:9])
busy.sendall(b"second half\r\n.\r\n")
print(reply(bf)[:3])
"#,
        &[&server.smtp.to_string(), &user, &pid],
    );
    assert_eq!(out.lines().collect::<Vec<_>>(), ["421 4.3.2", "250"]);
    let status = server.wait_exit();
    assert!(status.success(), "exit status {status:?}");
    assert_eq!(server.count("SELECT count(*) FROM messages"), 1);
}

#[test]
fn pre_trust_connections_hold_little_memory() {
    let server = Server::start_with("[smtp]\nmax_connections_per_ip = 5000\n");
    let before = server.rss_kb();
    const N: u64 = 400;
    let mut client = python_spawn(
        r#"
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
conns = []
for i in range(int(sys.argv[2])):
    s = socket.create_connection((host, int(port)))
    s.sendall(b"EHLO c\r\nMAIL FROM:<a@remote.test>\r\nRCPT TO:<nobody@example.org>\r\n")
    conns.append((s, s.makefile("rb")))
for s, f in conns:
    while not f.readline().startswith(b"550"):
        pass
print("ready", flush=True)
sys.stdin.readline()
"#,
        &[&server.smtp.to_string(), &N.to_string()],
    );
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(client.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    let per_conn_kb = server.rss_kb().saturating_sub(before) / N;
    drop(client.stdin.take());
    client.wait().unwrap();
    // A gate session is a task and a 2 KiB line buffer: no message
    // buffer, no store writer. Allow for allocator slack.
    assert!(
        per_conn_kb < 32,
        "{per_conn_kb} KiB per pre-trust connection"
    );
    assert_eq!(server.count("SELECT count(*) FROM blobs"), 0);
}

/// `RCPT TO:<Postmaster>` without a domain is accepted (RFC 5321 §4.5.1),
/// and a declared SIZE over the limit is refused however large it is
/// (RFC 1870 §6), not wrapped around into a small number.
#[test]
fn bare_postmaster_and_an_absurd_size() {
    let server = Server::start();
    server.add_user("admin");
    let out = python(
        r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p)); s.ehlo()
print(s.docmd("MAIL", "FROM:<a@b.test> SIZE=100000000000000000000000")[0])
print(s.docmd("MAIL", "FROM:<a@b.test>")[0])
print(s.docmd("RCPT", "TO:<Postmaster>")[0])
s.quit()
"#,
        &[&server.smtp.to_string()],
    );
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        ["552", "250", "250"],
        "{out}"
    );
}

/// Bare LF and bare CR in DATA and in BDAT chunks are stored as CRLF, so
/// nothing Sluice later hands on carries a line end another server could
/// read differently (SMTP smuggling); `LF . LF` and `CR . CR` end nothing.
#[test]
fn bare_line_ends_are_stored_as_crlf() {
    let server = Server::start();
    let user = server.add_user("lines");
    let out = python(
        r#"
import imaplib, socket, sys
addr, imap, user, password = sys.argv[1:5]
h, p = addr.rsplit(":", 1)
s = socket.create_connection((h, int(p)))
f = s.makefile("rb")
def reply():
    while True:
        line = f.readline()
        if line[3:4] != b"-":
            return line[:3].decode()
reply()
s.sendall(b"EHLO c\r\n"); reply()
s.sendall(b"MAIL FROM:<a@remote.test>\r\n"); reply()
s.sendall(b"RCPT TO:<%s>\r\n" % user.encode()); reply()
s.sendall(b"DATA\r\n"); print("data", reply())
s.sendall(b"Subject: one\r\n\r\nunix\nline\n.\nMAIL FROM:<x@y>\nold\rmac\r.\rend\r\n.\r\n")
print("end", reply())
s.sendall(b"MAIL FROM:<a@remote.test>\r\n"); reply()
s.sendall(b"RCPT TO:<%s>\r\n" % user.encode()); reply()
s.sendall(b"BDAT 20\r\nSubject: two\n\nsplit\r"); print("bdat", reply())
s.sendall(b"BDAT 9 LAST\r\n\nbare\nCR\r"); print("last", reply())
s.sendall(b"QUIT\r\n"); reply()
h, p = imap.rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
m.login(user, password)
m.select("INBOX")
for n in (1, 2):
    typ, data = m.fetch(str(n), "(BODY.PEEK[])")
    raw = data[0][1]
    body = raw[raw.index(b"Subject:"):]
    print(repr(body))
m.logout()
"#,
        &[
            &server.smtp.to_string(),
            &server.imap.to_string(),
            &user,
            kit::PASSWORD,
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        &lines[..4],
        ["data 354", "end 250", "bdat 250", "last 250"],
        "{out}"
    );
    assert_eq!(
        lines[4],
        r"b'Subject: one\r\n\r\nunix\r\nline\r\n.\r\nMAIL FROM:<x@y>\r\nold\r\nmac\r\n.\r\nend\r\n'",
        "{out}"
    );
    assert_eq!(
        lines[5], r"b'Subject: two\r\n\r\nsplit\r\nbare\r\nCR\r\n'",
        "{out}"
    );
}
