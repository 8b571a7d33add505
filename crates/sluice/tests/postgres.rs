//! `sluice serve` on PostgreSQL (`[store] backend = "postgres"`), against
//! a real PostgreSQL 15 on loopback, with Python's mail libraries as the
//! clients: one node serving SMTP, IMAP and POP3; two nodes sharing the
//! mailboxes; the database going away and coming back.

use sluice_testkit as kit;

use std::time::Duration;

use kit::{python, Postgres, Server, PASSWORD};

/// The `[store]` section of a node on `url`.
fn on_postgres(url: &str) -> String {
    format!("[store]\nbackend = \"postgres\"\nurl = \"{url}\"\n")
}

/// Sends one message with smtplib; the server's last reply (code, text).
fn send(smtp: std::net::SocketAddr, to: &str, subject: &str, body: &str) -> String {
    python(
        r#"
import smtplib, sys
host, port = sys.argv[1].rsplit(":", 1)
msg = "From: a@remote.test\r\nTo: %s\r\nSubject: %s\r\n\r\n%s\r\n" % (sys.argv[2], sys.argv[3], sys.argv[4])
with smtplib.SMTP(host, int(port)) as s:
    try:
        s.sendmail("a@remote.test", [sys.argv[2]], msg)
        print("250")
    except smtplib.SMTPResponseException as e:
        print(e.smtp_code, e.smtp_error.decode())
    except smtplib.SMTPRecipientsRefused as e:
        code, text = list(e.recipients.values())[0]
        print(code, text.decode())
"#,
        &[&smtp.to_string(), to, subject, body],
    )
    .trim()
    .to_string()
}

#[test]
fn one_node_on_postgres_receives_and_serves_mail_over_smtp_imap_and_pop3() {
    let pg = Postgres::start();
    let url = pg.create_database();
    let server = Server::start_with(&on_postgres(&url));
    let user = server.add_user("pat");
    assert_eq!(
        send(server.smtp, &user, "quarterly zebra", "the numbers are in"),
        "250"
    );
    assert_eq!(send(server.smtp, &user, "second", "nothing to see"), "250");

    let out = python(
        r#"
import imaplib, sys
host, port = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(host, int(port))
m.login(sys.argv[2], sys.argv[3])
print(m.select("INBOX")[1][0].decode())
# RFC 3501 substring search, inside a word.
print(m.uid("SEARCH", None, "TEXT", "ebra")[1][0].decode())
print(m.uid("SEARCH", None, "BODY", '"nothing to"')[1][0].decode())
typ, data = m.uid("FETCH", "1", "(BODY.PEEK[TEXT] FLAGS)")
print(data[0][1].decode().strip())
m.uid("STORE", "1", "+FLAGS", "(\\Seen $Important)")
typ, data = m.uid("FETCH", "1", "(FLAGS)")
print(data[0].decode())
m.logout()
"#,
        &[&server.imap.to_string(), &user, PASSWORD],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "2", "{out}");
    assert_eq!(lines[1], "1", "{out}");
    assert_eq!(lines[2], "2", "{out}");
    assert_eq!(lines[3], "the numbers are in", "{out}");
    assert!(
        lines[4].contains("\\Seen") && lines[4].contains("$Important"),
        "{out}"
    );

    let out = python(
        r#"
import poplib, sys
host, port = sys.argv[1].rsplit(":", 1)
p = poplib.POP3(host, int(port), timeout=30)
p.user(sys.argv[2]); p.pass_(sys.argv[3])
print(p.stat()[0])
resp, lines, octets = p.retr(2)
print(lines[-1].decode())
p.quit()
"#,
        &[&server.pop3.to_string(), &user, PASSWORD],
    );
    assert_eq!(out.lines().collect::<Vec<_>>(), ["2", "nothing to see"]);
    // Nothing of the store is in the data directory.
    assert!(!server.data_dir().join("sluice.db").exists());
}

/// An IMAP session on `imap` IDLE in INBOX that waits for `n` EXISTS
/// lines; prints, for each, the seconds since the line "ready" it prints
/// once idling.
const IDLE: &str = r#"
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=30)
f = s.makefile("rb")
def line():
    l = f.readline().decode()
    if not l: raise SystemExit("closed")
    return l
def cmd(tag, text):
    s.sendall(("%s %s\r\n" % (tag, text)).encode())
    while True:
        l = line()
        if l.startswith(tag + " "):
            return l
line()
cmd("a", "LOGIN %s \"%s\"" % (sys.argv[2], sys.argv[3]))
cmd("b", "SELECT INBOX")
s.sendall(b"c IDLE\r\n")
assert line().startswith("+")
print("ready", flush=True)
for i in range(int(sys.argv[4])):
    while True:
        l = line()
        if l.endswith("EXISTS\r\n"):
            print(l.strip(), flush=True)
            break
s.sendall(b"DONE\r\n")
"#;

#[test]
fn two_nodes_share_mailboxes_and_wake_each_others_idle_sessions() {
    use std::io::BufRead;
    let pg = Postgres::start();
    let url = pg.create_database();
    let a = Server::start_with(&on_postgres(&url));
    let b = Server::start_joining(&on_postgres(&url));
    let user = a.add_user("sam");
    // B sees the account A's command line made (its directory poll).
    assert!(kit::wait_until(Duration::from_secs(5), || b.rcpt_accepted(&user)));

    // Mail delivered over SMTP to node A wakes an IDLE on node B.
    let rounds = 20;
    let mut idle = kit::python_spawn(
        IDLE,
        &[&b.imap.to_string(), &user, PASSWORD, &rounds.to_string()],
    );
    let mut out = std::io::BufReader::new(idle.stdout.take().unwrap()).lines();
    assert_eq!(out.next().unwrap().unwrap(), "ready");
    let mut latencies = Vec::new();
    for i in 1..=rounds {
        let sent = std::time::Instant::now();
        assert_eq!(send(a.smtp, &user, &format!("m{i}"), "x"), "250");
        let seen = out.next().unwrap().unwrap();
        let latency = sent.elapsed();
        assert_eq!(seen, format!("* {i} EXISTS"));
        assert!(
            latency < Duration::from_secs(2),
            "IDLE on B woke {latency:?} after the delivery on A"
        );
        latencies.push(latency);
    }
    assert!(idle.wait().unwrap().success());
    // From smtplib's send to B's EXISTS, both nodes on this machine.
    latencies.sort();
    eprintln!(
        "IDLE across nodes, {rounds} deliveries: p50 {:?}, max {:?}",
        latencies[rounds / 2],
        latencies[rounds - 1]
    );

    // Flags set on B are seen by a session on A.
    python(
        r#"
import imaplib, sys
host, port = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(host, int(port))
m.login(sys.argv[2], sys.argv[3])
m.select("INBOX")
m.uid("STORE", "2", "+FLAGS", "(\\Flagged)")
m.logout()
"#,
        &[&b.imap.to_string(), &user, PASSWORD],
    );
    let out = python(
        r#"
import imaplib, sys
host, port = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(host, int(port))
m.login(sys.argv[2], sys.argv[3])
m.select("INBOX")
print(m.uid("SEARCH", None, "FLAGGED")[1][0].decode())
m.logout()
"#,
        &[&a.imap.to_string(), &user, PASSWORD],
    );
    assert_eq!(out.trim(), "2");

    // One POP3 session per maildrop, whichever node it is on.
    let out = python(
        r#"
import poplib, sys
def login(addr):
    host, port = addr.rsplit(":", 1)
    p = poplib.POP3(host, int(port), timeout=30)
    p.user(sys.argv[3])
    try:
        p.pass_(sys.argv[4])
    except poplib.error_proto as e:
        print(e.args[0].decode())
        return None
    print("in")
    return p
on_a = login(sys.argv[1])
on_b = login(sys.argv[2])
on_a.quit()
import time
for _ in range(50):
    on_b = login(sys.argv[2])
    if on_b: break
    time.sleep(0.1)
on_b.quit()
"#,
        &[&a.pop3.to_string(), &b.pop3.to_string(), &user, PASSWORD],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "in", "{out}");
    assert!(lines[1].starts_with("-ERR [IN-USE]"), "{out}");
    assert_eq!(*lines.last().unwrap(), "in", "{out}");
}

#[test]
fn the_database_going_away_gives_temporary_failures_and_service_resumes() {
    let mut pg = Postgres::start();
    let url = pg.create_database();
    let server = Server::start_with(&on_postgres(&url));
    let user = server.add_user("dee");
    assert_eq!(send(server.smtp, &user, "before", "1"), "250");

    pg.stop();
    let reply = send(server.smtp, &user, "during", "2");
    assert!(
        reply.starts_with("451") || reply.starts_with("421"),
        "{reply}"
    );
    let out = python(
        r#"
import imaplib, sys
host, port = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(host, int(port))
try:
    m.login(sys.argv[2], sys.argv[3])
    print(m.select("INBOX"))
except imaplib.IMAP4.error as e:
    print("error", e)
"#,
        &[&server.imap.to_string(), &user, PASSWORD],
    );
    assert!(out.contains("UNAVAILABLE"), "{out}");

    pg.restart();
    assert!(
        kit::wait_until(Duration::from_secs(15), || send(
            server.smtp,
            &user,
            "after",
            "3"
        ) == "250"),
        "service did not resume: {}",
        server.log()
    );
    let out = python(
        r#"
import imaplib, sys
host, port = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(host, int(port))
m.login(sys.argv[2], sys.argv[3])
m.select("INBOX")
for uid in m.uid("SEARCH", None, "ALL")[1][0].split():
    print(m.uid("FETCH", uid, "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")[1][0][1].decode().strip())
m.logout()
"#,
        &[&server.imap.to_string(), &user, PASSWORD],
    );
    let subjects: Vec<&str> = out.lines().collect();
    assert_eq!(subjects[0], "Subject: before", "{out}");
    assert!(
        !out.contains("during"),
        "a refused message was stored: {out}"
    );
    assert_eq!(*subjects.last().unwrap(), "Subject: after", "{out}");
}

/// Every mailbox of `user` over IMAP: name, UIDVALIDITY, and each
/// message's UID, flags and body digest, one line each.
fn imap_listing(imap: std::net::SocketAddr, user: &str) -> String {
    python(
        r#"
import hashlib, imaplib, sys
host, port = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(host, int(port))
m.login(sys.argv[2], sys.argv[3])
names = sorted(l.decode().rsplit(' "/" ', 1)[1].strip('"') for l in m.list()[1])
for name in names:
    m.select('"%s"' % name, readonly=True)
    validity = m.response("UIDVALIDITY")[1][0].decode()
    print(name, validity)
    typ, data = m.uid("FETCH", "1:*", "(UID FLAGS BODY.PEEK[])")
    for item in data:
        if isinstance(item, tuple):
            head = item[0].decode()
            print(" ", head.split("BODY")[0], hashlib.sha256(item[1]).hexdigest()[:16])
m.logout()
"#,
        &[&imap.to_string(), user, PASSWORD],
    )
}

#[test]
fn migrate_copies_a_sqlite_store_with_uids_flags_and_uidvalidity_kept() {
    let pg = Postgres::start();
    let url = pg.create_database();
    let mut old = Server::start();
    let user = old.add_user("max");
    for i in 0..12 {
        assert_eq!(
            send(
                old.smtp,
                &user,
                &format!("note {i}"),
                &"text ".repeat(i * 50)
            ),
            "250"
        );
    }
    python(
        r#"
import imaplib, sys
host, port = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(host, int(port))
m.login(sys.argv[2], sys.argv[3])
m.create("Projects/Zebra")
m.select("INBOX")
m.uid("STORE", "2,5", "+FLAGS", "(\\Seen $Label1)")
m.uid("STORE", "3", "+FLAGS", "(\\Deleted)")
m.expunge()
m.uid("MOVE", "7:8", "Projects/Zebra")
m.logout()
"#,
        &[&old.imap.to_string(), &user, PASSWORD],
    );
    let before = imap_listing(old.imap, &user);
    assert!(before.contains("Projects/Zebra"), "{before}");
    old.terminate();

    let out = old.cli(&["migrate", "--to", &url], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let new = Server::start_joining(&on_postgres(&url));
    let after = imap_listing(new.imap, &user);
    assert_eq!(after, before);
    // The copied text is searchable, inside words.
    let out = python(
        r#"
import imaplib, sys
host, port = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(host, int(port))
m.login(sys.argv[2], sys.argv[3])
m.select("INBOX")
print(m.uid("SEARCH", None, "SUBJECT", '"ote 1"')[1][0].decode())
"#,
        &[&new.imap.to_string(), &user, PASSWORD],
    );
    assert_eq!(out.trim(), "2 11 12");

    // A second copy into a database with a store is refused.
    let again = old.cli(&["migrate", "--to", &url], "");
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("empty"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

/// The `[store]` section of a node on `url` with TLS `mode`, trusting
/// `ca_file`.
fn on_postgres_tls(url: &str, mode: &str, ca_file: &std::path::Path) -> String {
    format!(
        "{}tls = \"{mode}\"\nca_file = \"{}\"\n",
        on_postgres(url),
        ca_file.display()
    )
}

/// `application_name ssl` of the sluice connections to database `db`.
fn encrypted(pg: &Postgres, db: &str) -> Vec<String> {
    pg.psql(
        db,
        "SELECT DISTINCT a.application_name || ' ' || s.ssl
         FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
         WHERE a.datname = current_database() AND a.application_name LIKE 'sluice%'
         ORDER BY 1",
    )
    .lines()
    .map(str::to_string)
    .collect()
}

#[test]
fn a_node_verifying_the_databases_certificate_serves_mail_end_to_end() {
    let pg = Postgres::start_with_tls();
    let url = pg.create_database();
    let db = url.rsplit('/').next().unwrap().to_string();
    let ca = pg.ca_file.clone().unwrap();
    let server = Server::start_with(&on_postgres_tls(&url, "verify-full", &ca));
    let user = server.add_user("tess");
    assert_eq!(send(server.smtp, &user, "sealed", "over tls"), "250");
    let out = python(
        r#"
import imaplib, poplib, sys
host, port = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(host, int(port))
m.login(sys.argv[3], sys.argv[4])
m.select("INBOX")
typ, data = m.uid("FETCH", "1", "(BODY.PEEK[TEXT])")
print(data[0][1].decode().strip())
m.logout()
host, port = sys.argv[2].rsplit(":", 1)
p = poplib.POP3(host, int(port), timeout=30)
p.user(sys.argv[3]); p.pass_(sys.argv[4])
print(p.retr(1)[1][-1].decode())
p.quit()
"#,
        &[
            &server.imap.to_string(),
            &server.pop3.to_string(),
            &user,
            PASSWORD,
        ],
    );
    assert_eq!(out.lines().collect::<Vec<_>>(), ["over tls", "over tls"]);
    // Every connection of the node is encrypted: the pool's, the
    // change-notice listener's and the POP3 maildrop lock's.
    let seen = encrypted(&pg, &db);
    for name in ["sluice", "sluice listen", "sluice maildrop"] {
        assert!(seen.contains(&format!("{name} true")), "{seen:?}");
    }
    assert!(!seen.iter().any(|s| s.ends_with(" false")), "{seen:?}");
}

#[test]
fn a_node_refuses_to_start_on_a_database_it_cannot_trust_or_encrypt_to() {
    let pg = Postgres::start_with_tls();
    let url = pg.create_database();
    let other = tempfile::tempdir().unwrap();
    kit::make_server_certificate(other.path());
    let why = Server::start_failing(&on_postgres_tls(
        &url,
        "verify-full",
        &other.path().join("ca.pem"),
    ));
    assert!(
        why.contains("invalid peer certificate: UnknownIssuer"),
        "{why}"
    );

    let plain = Postgres::start();
    let url = plain.create_database();
    let why = Server::start_failing(&format!("{}tls = \"require\"\n", on_postgres(&url)));
    assert!(why.contains("server does not support TLS"), "{why}");

    let why = Server::start_failing(&format!(
        "{}tls = \"disable\"\n",
        on_postgres(&format!("{url}?sslmode=require"))
    ));
    assert!(why.contains("key `store.tls`"), "{why}");
    assert!(why.contains("sslmode=require"), "{why}");
}

#[test]
fn migrate_copies_into_a_database_over_verified_tls() {
    let pg = Postgres::start_with_tls();
    let url = pg.create_database();
    let ca = pg.ca_file.clone().unwrap();
    let mut old = Server::start();
    let user = old.add_user("mia");
    assert_eq!(send(old.smtp, &user, "moved", "still here"), "250");
    let before = imap_listing(old.imap, &user);
    old.terminate();

    let target = format!("{url}?sslmode=verify-full");
    let ca_arg = ca.to_string_lossy();
    let out = old.cli(&["migrate", "--to", &target, "--ca-file", &ca_arg], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let new = Server::start_joining(&on_postgres_tls(&url, "verify-full", &ca));
    assert_eq!(imap_listing(new.imap, &user), before);
}
