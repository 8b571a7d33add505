//! `sluice serve` on PostgreSQL (`[store] backend = "postgres"`), against
//! a real PostgreSQL 15 on loopback, with Python's mail libraries as the
//! clients: one node serving SMTP, IMAP and POP3; two nodes sharing the
//! mailboxes; the database going away and coming back.

use sluice_testkit as kit;

use std::time::Duration;

use kit::{imap_login, python, Dns, Postgres, Server, StandInMx, Zone, PASSWORD};

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

/// `script` after Python that logs in with imaplib as `m` (argv: IMAP
/// address, user, password, then the script's own).
fn logged_in(script: &str) -> String {
    format!(
        r#"import hashlib, imaplib, re, sys
host, port = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(host, int(port))
m.login(sys.argv[2], sys.argv[3])
{script}"#
    )
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
        &logged_in(
            r#"
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
        ),
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
        // Nothing polls, so any wake-up is the notice from A; the bound
        // only catches a lost one.
        assert!(
            latency < Duration::from_secs(30),
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
        &logged_in(
            r#"
m.select("INBOX")
m.uid("STORE", "2", "+FLAGS", "(\\Flagged)")
m.logout()
"#,
        ),
        &[&b.imap.to_string(), &user, PASSWORD],
    );
    let out = python(
        &logged_in(
            r#"
m.select("INBOX")
print(m.uid("SEARCH", None, "FLAGGED")[1][0].decode())
m.logout()
"#,
        ),
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

/// Two sessions on node B while node A expunges: B's IDLE session is told
/// at once, B's other session not during FETCH, STORE or SEARCH (which
/// still answer for the message, RFC 3501 §7.4.1) but at its next NOOP.
const EXPUNGE_ON_B: &str = r#"
import imaplib, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
user, password, a_host, a_port = sys.argv[2], sys.argv[3], *sys.argv[4].rsplit(":", 1)
# Session 2 on B, selected before the expunge.
plain = imaplib.IMAP4(host, int(port))
plain.login(user, password)
plain.select("INBOX")
# Session 1 on B, in IDLE.
s = socket.create_connection((host, int(port)), timeout=30)
f = s.makefile("rb")
def line():
    l = f.readline().decode()
    if not l: raise SystemExit("closed")
    return l
def cmd(tag, text):
    s.sendall(("%s %s\r\n" % (tag, text)).encode())
    while not line().startswith(tag + " "):
        pass
line()
cmd("a", "LOGIN %s \"%s\"" % (user, password))
cmd("b", "SELECT INBOX")
s.sendall(b"c IDLE\r\n")
assert line().startswith("+")
# Node A expunges the first message.
a = imaplib.IMAP4(a_host, int(a_port))
a.login(user, password)
a.select("INBOX")
a.uid("STORE", "1", "+FLAGS", "(\\Deleted)")
a.expunge()
a.logout()
# The IDLE session on B hears of it (the untagged FLAGS change may come
# first).
while True:
    l = line()
    if l.strip() == "* 1 EXPUNGE":
        print("idle", flush=True)
        break
s.sendall(b"DONE\r\n")
# The other session: FETCH, STORE and SEARCH send no EXPUNGE, and the
# expunged message's content is still there for it.
typ, data = plain.fetch("1:*", "(UID BODY.PEEK[])")
bodies = [d[1] for d in data if isinstance(d, tuple)]
print("fetch", typ, len(bodies), all(b"Subject: m" in b for b in bodies),
      repr(plain.untagged_responses.get("EXPUNGE")), flush=True)
typ, _ = plain.store("2", "+FLAGS", "(\\Seen)")
typ2, found = plain.search(None, "ALL")
print("search", typ2, repr(plain.untagged_responses.get("EXPUNGE")), flush=True)
typ, _ = plain.noop()
print("noop", repr(plain.untagged_responses.get("EXPUNGE")), flush=True)
plain.logout()
"#;

#[test]
fn an_expunge_on_one_node_reaches_the_other_at_the_points_imap_allows() {
    let pg = Postgres::start();
    let url = pg.create_database();
    let a = Server::start_with(&on_postgres(&url));
    let b = Server::start_joining(&on_postgres(&url));
    let user = a.add_user("ria");
    assert!(kit::wait_until(Duration::from_secs(5), || b.rcpt_accepted(&user)));
    for i in 1..=3 {
        assert_eq!(send(a.smtp, &user, &format!("m{i}"), "x"), "250");
    }
    let out = python(
        EXPUNGE_ON_B,
        &[&b.imap.to_string(), &user, PASSWORD, &a.imap.to_string()],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "idle", "{out}");
    // Three messages with their content, no EXPUNGE yet.
    assert_eq!(lines[1], "fetch OK 3 True None", "{out}");
    assert_eq!(lines[2], "search OK None", "{out}");
    assert_eq!(lines[3], "noop [b'1']", "{out}");
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
        &logged_in(
            r#"
m.select("INBOX")
for uid in m.uid("SEARCH", None, "ALL")[1][0].split():
    print(m.uid("FETCH", uid, "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")[1][0][1].decode().strip())
m.logout()
"#,
        ),
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
        &logged_in(
            r#"
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
        ),
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
        &logged_in(
            r#"
m.create("Projects/Zebra")
m.select("INBOX")
m.uid("STORE", "2,5", "+FLAGS", "(\\Seen $Label1)")
m.uid("STORE", "3", "+FLAGS", "(\\Deleted)")
m.expunge()
m.uid("MOVE", "7:8", "Projects/Zebra")
m.logout()
"#,
        ),
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
        &logged_in(
            r#"
m.select("INBOX")
print(m.uid("SEARCH", None, "SUBJECT", '"ote 1"')[1][0].decode())
"#,
        ),
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

/// Clients that deliver distinct messages to `rcpt` over SMTP, one
/// connection each, until the server goes away. Each message is named
/// `k<client>-<n>` (its subject and Message-ID) and has a body of its
/// own, from one line to about 100 KB so that some transactions are long;
/// one line per message: `ok`, `refused` or `unacknowledged` (the
/// connection broke before the reply), its name and its body's SHA-256.
const LOAD: &str = r#"
import hashlib, smtplib, sys, threading
host, port = sys.argv[1].rsplit(":", 1)
rcpt, clients = sys.argv[2], int(sys.argv[3])
lock = threading.Lock()
def say(*words):
    with lock:
        print(*words, flush=True)
def body(name, n):
    lines = (n * 37 % 40) ** 2 + 1
    return "".join("%s line %d of %d: the quick brown fox\r\n" % (name, i, lines) for i in range(lines))
def client(c):
    s = None
    for n in range(5000):
        name = "k%d-%d" % (c, n)
        text = body(name, n)
        digest = hashlib.sha256(text.encode()).hexdigest()
        msg = ("From: a@remote.test\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%s@load.test>\r\n\r\n%s"
               % (rcpt, name, name, text))
        try:
            if s is None:
                s = smtplib.SMTP(host, int(port), timeout=120)
            s.sendmail("a@remote.test", [rcpt], msg)
        except (smtplib.SMTPResponseException, smtplib.SMTPRecipientsRefused) as e:
            say("refused", name, digest)
            try:
                s.quit()
            except Exception:
                pass
            s = None
            continue
        except (OSError, smtplib.SMTPException):
            say("unacknowledged", name, digest)
            return
        say("ok", name, digest)
threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
"#;

/// What the mailbox `user` has on `imap`: STATUS MESSAGES, the EXISTS of
/// SELECT, and each message's name (its Message-ID's local part) with its
/// body's SHA-256, as `(status, exists, messages)`.
fn inbox_digests(imap: std::net::SocketAddr, user: &str) -> (usize, usize, Vec<(String, String)>) {
    let out = python(
        &logged_in(
            r#"
status = m.status("INBOX", "(MESSAGES)")[1][0].decode()
print("status", re.search(r"MESSAGES (\d+)", status).group(1))
print("exists", m.select("INBOX", readonly=True)[1][0].decode())
typ, data = m.uid("FETCH", "1:*", "(BODY.PEEK[])")
for item in data:
    if isinstance(item, tuple):
        head, _, text = item[1].partition(b"\r\n\r\n")
        found = re.search(rb"(?im)^message-id:\s*<([^@>]*)@", head)
        name = found.group(1).decode() if found else "-"
        print("msg", name, hashlib.sha256(text).hexdigest())
m.logout()
"#,
        ),
        &[&imap.to_string(), user, PASSWORD],
    );
    let mut status = None;
    let mut exists = None;
    let mut messages = Vec::new();
    for line in out.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["status", n] => status = n.parse().ok(),
            ["exists", n] => exists = n.parse().ok(),
            ["msg", name, digest] => messages.push((name.to_string(), digest.to_string())),
            _ => panic!("unexpected line {line:?} in\n{out}"),
        }
    }
    (status.expect(&out), exists.expect(&out), messages)
}

/// Rows where the mailbox figures the triggers keep differ from the
/// messages, or a stored message points at a blob that is not whole.
const INCONSISTENCIES: &str = "
SELECT (SELECT count(*) FROM mailboxes mb
        WHERE mb.n_messages <> (SELECT count(*) FROM messages m WHERE m.mailbox_id = mb.id)
           OR mb.n_bytes <> (SELECT coalesce(sum(m.size), 0) FROM messages m
                             WHERE m.mailbox_id = mb.id))
     + (SELECT count(*) FROM messages m JOIN blobs b ON b.id = m.blob_id
        WHERE NOT b.complete OR b.refcount < 1)";

/// kill -9 of node A while several clients deliver to it: every message
/// A acknowledged is on node B once and whole, no other message is there
/// in part, the figures agree with the messages, and both nodes go on.
#[test]
fn kill_nine_of_a_node_mid_delivery_loses_nothing_it_acknowledged() {
    use std::collections::HashMap;
    use std::io::BufRead;
    let pg = Postgres::start();
    let url = pg.create_database();
    let db = url.rsplit('/').next().unwrap().to_string();
    let mut a = Server::start_with(&on_postgres(&url));
    let b = Server::start_joining(&on_postgres(&url));
    let user = a.add_user("kim");
    assert!(kit::wait_until(Duration::from_secs(30), || b.rcpt_accepted(&user)));

    let mut load = kit::python_spawn(LOAD, &[&a.smtp.to_string(), &user, "6"]);
    let lines = std::io::BufReader::new(load.stdout.take().unwrap()).lines();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Outcome and body digest of every message a client tried.
    let mut tried: HashMap<String, (String, String)> = HashMap::new();
    let mut note = |line: String| {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [outcome, name, digest] = words[..] else {
            panic!("unexpected line {line:?}");
        };
        tried.insert(name.to_string(), (outcome.to_string(), digest.to_string()));
        outcome == "ok"
    };
    // The kill comes once 40 deliveries were acknowledged, with the six
    // clients still sending.
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    let mut acknowledged = 0;
    while acknowledged < 40 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("{acknowledged} acknowledged by now:\n{}", a.log()));
        acknowledged += usize::from(note(line));
    }
    a.kill9();
    // The clients stop at their first broken connection.
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                note(line);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(e) => panic!("the clients did not stop: {e}"),
        }
    }
    assert!(load.wait().unwrap().success());
    let outcome_count = |wanted: &str| tried.values().filter(|(o, _)| o == wanted).count();
    let acked = outcome_count("ok");
    let cut = outcome_count("unacknowledged");
    eprintln!(
        "{acked} acknowledged, {cut} cut off by the kill, {} refused",
        outcome_count("refused")
    );
    assert_eq!(cut, 6, "each client's last message was cut off");

    // Node B has each acknowledged message once and whole; of the cut off
    // ones, at most whole ones.
    let (status, exists, messages) = inbox_digests(b.imap, &user);
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (name, digest) in &messages {
        *seen.entry(name.as_str()).or_default() += 1;
        let (outcome, sent) = tried
            .get(name)
            .unwrap_or_else(|| panic!("a message nobody sent: {name}"));
        assert_ne!(outcome, "refused", "{name} was refused yet stored");
        assert_eq!(digest, sent, "{name} ({outcome}) is not as it was sent");
    }
    for (name, count) in &seen {
        assert_eq!(*count, 1, "{name} is stored {count} times");
    }
    for (name, (outcome, _)) in &tried {
        if outcome == "ok" {
            assert!(
                seen.contains_key(name.as_str()),
                "{name} was acknowledged and is lost"
            );
        }
    }
    assert_eq!(status, messages.len(), "STATUS MESSAGES against FETCH");
    assert_eq!(exists, messages.len(), "EXISTS against FETCH");
    assert_eq!(pg.psql(&db, INCONSISTENCIES), "0");

    // Node B takes new mail.
    assert_eq!(send(b.smtp, &user, "after the kill", "on b"), "250");
    let (status, _, after) = inbox_digests(b.imap, &user);
    assert_eq!(
        (status, after.len()),
        (messages.len() + 1, messages.len() + 1)
    );

    // Node A starts again on the same database and serves the same store.
    a.restart();
    assert_eq!(send(a.smtp, &user, "after the restart", "on a"), "250");
    let on_b = imap_listing(b.imap, &user);
    assert_eq!(imap_listing(a.imap, &user), on_b);
    assert_eq!(
        on_b.lines().filter(|l| l.starts_with("  ")).count(),
        messages.len() + 2,
        "{on_b}"
    );
    assert_eq!(pg.psql(&db, INCONSISTENCIES), "0");
}

/// kill -9 of node A while it holds the outbound leases of several
/// messages, each sent up to the end of data to an MX that never answers
/// it: once the leases run out node B sends every message, and each
/// arrives exactly once.
#[test]
fn a_dead_nodes_outbound_leases_run_out_and_another_node_sends_each_message_once() {
    const MESSAGES: usize = 4;
    // Long enough that A still holds every lease when the kill comes, even
    // on a loaded machine; short enough for a test.
    const LEASE_SECS: u64 = 20;
    let pg = Postgres::start();
    let url = pg.create_database();
    let db = url.rsplit('/').next().unwrap().to_string();
    let mx = StandInMx::start();
    let dns = Dns::start(vec![Zone::new(
        "remote.test",
        &["@ IN MX 10 mail.remote.test.", "mail IN A 127.0.0.1"],
    )]);
    // The nodes reach the MX host on ports of their own, so the stand-in
    // knows which node is talking: A gets the port that never answers the
    // end of data, B the one that takes mail. A window of one connection
    // per message puts every message in flight on A at once.
    let node = |mx_port: u16| {
        format!(
            "{}[dns]\nresolver = \"{}\"\n\
             [outbound]\nmx_port = {mx_port}\nretry_schedule = [1]\n\
             connect_timeout = 10\ncommand_timeout = 300\nlease_secs = {LEASE_SECS}\n\
             initial_destination_concurrency = {MESSAGES}\ndestination_concurrency = {MESSAGES}\n\
             [outbound.tls]\nmta_sts = false\ndane = \"off\"\n",
            on_postgres(&url),
            dns.addr
        )
    };
    let mut a = Server::start_with(&node(mx.stalling.port()));
    let b = Server::start_joining(&node(mx.answering.port()));
    let alice = a.add_user("alice");

    let out = python(
        r#"
import smtplib, ssl, sys
host, port = sys.argv[1].rsplit(":", 1)
user, password, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
s = smtplib.SMTP(host, int(port), timeout=60)
s.starttls(context=ssl._create_unverified_context())
s.login(user, password)
for i in range(n):
    s.sendmail(user, ["friend@remote.test"],
        "From: %s\r\nTo: friend@remote.test\r\nSubject: leased %d\r\nMessage-ID: <leased-%d@example.org>\r\n\r\nmessage %d\r\n"
        % (user, i, i, i))
    print("250")
s.quit()
"#,
        &[
            &a.addr("submission").to_string(),
            &alice,
            PASSWORD,
            &MESSAGES.to_string(),
        ],
    );
    assert_eq!(out.lines().count(), MESSAGES, "{out}");
    let ids: Vec<String> = (0..MESSAGES)
        .map(|i| format!("<leased-{i}@example.org>"))
        .collect();

    // A has leased every message: the stand-in holds each one's data,
    // unanswered, on A's port, and the queue rows are leased.
    assert!(
        kit::wait_until(Duration::from_secs(60), || mx.held().len() == MESSAGES),
        "held on A's port: {:?}\n{}",
        mx.held(),
        a.log()
    );
    let mut held = mx.held();
    held.sort();
    assert_eq!(held, ids);
    let leased = format!(
        "SELECT count(*) FROM queue WHERE lease_until > {}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    );
    assert_eq!(pg.psql(&db, &leased), MESSAGES.to_string());
    assert_eq!(
        mx.connections().1,
        0,
        "B sent before A died: the leases were too short for this machine"
    );

    a.kill9();
    // A's connections went with it: none of them got an answer.
    assert!(
        kit::wait_until(Duration::from_secs(30), || mx.hung_up() == MESSAGES),
        "{} of A's connections closed",
        mx.hung_up()
    );
    assert!(mx.delivered().is_empty());

    // B sends each message once the leases run out.
    let sent_by_b = || {
        mx.delivered().len() == MESSAGES
            && b.cli_ok(&["queue", "list"]).contains("the queue is empty")
    };
    assert!(
        kit::wait_until(Duration::from_secs(LEASE_SECS + 120), sent_by_b),
        "delivered through B: {:?}\n{}\n{}",
        mx.delivered(),
        b.cli_ok(&["queue", "list"]),
        b.log()
    );
    let delivered = mx.delivered();
    for id in &ids {
        assert_eq!(delivered.get(id), Some(&1), "{id}: {delivered:?}");
    }
    assert_eq!(delivered.len(), MESSAGES, "{delivered:?}");
    assert_eq!(pg.psql(&db, "SELECT count(*) FROM queue"), "0");
    // Nothing more reached A's port since the kill.
    assert_eq!(mx.connections().0, MESSAGES);
}

#[test]
fn failed_logins_on_one_node_throttle_the_account_on_the_other() {
    use std::io::{BufRead, Write};
    let pg = Postgres::start();
    let url = pg.create_database();
    let db = url.rsplit('/').next().unwrap().to_string();
    // A first failure's delay beyond the longest wait (30 s): after one
    // failure the account's next turn is too far off, and the next
    // attempt is refused at once.
    let config = format!(
        "{}[imap]\nmax_auth_failures = 1000\nauth_failure_delay_secs = 40\n\
         [pop3]\nauth_failure_delay_secs = 40\n",
        on_postgres(&url)
    );
    let a = Server::start_with(&config);
    let b = Server::start_joining(&config);
    let victim = a.add_user("victim");
    assert!(kit::wait_until(Duration::from_secs(5), || b.rcpt_accepted(&victim)));
    // The victim's own client logged in on B before the attack.
    assert_eq!(imap_login(b.imap, &victim, PASSWORD), "OK");

    // A wrong password on node A. Its answer comes only after the
    // failure's delay; the failure is counted before, in the database.
    let mut guess = std::net::TcpStream::connect(a.imap).unwrap();
    let mut greeting = String::new();
    std::io::BufReader::new(guess.try_clone().unwrap())
        .read_line(&mut greeting)
        .unwrap();
    assert!(greeting.starts_with("* OK"), "{greeting}");
    write!(guess, "a LOGIN {victim} \"wrong guess\"\r\n").unwrap();
    let counted = format!(
        "SELECT failures FROM auth_penalties WHERE key = 'account {}'",
        victim.to_lowercase()
    );
    assert!(
        kit::wait_until(Duration::from_secs(10), || pg.psql(&db, &counted) == "1"),
        "the failure on A was not counted: {}",
        a.log()
    );

    // Node B never saw a failure, yet refuses the next guesses at once,
    // over IMAP and POP3 alike, without checking them.
    let refused = imap_login(b.imap, &victim, "second guess");
    assert!(
        refused.contains("UNAVAILABLE") && refused.contains("Too many failed logins"),
        "{refused}"
    );
    let out = python(
        r#"
import poplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = poplib.POP3(h, int(p), timeout=30)
s.user(sys.argv[2])
try:
    s.pass_("third guess"); print("OK")
except poplib.error_proto as e:
    print(e.args[0].decode())
"#,
        &[&b.pop3.to_string(), &victim],
    );
    assert!(out.starts_with("-ERR [SYS/TEMP]"), "{out}");
    assert!(
        b.log()
            .contains("login throttled: too many recent failures"),
        "{}",
        b.log()
    );
    assert_eq!(pg.psql(&db, &counted), "1", "a refused guess was counted");
    // The victim's own client, whose password last succeeded on B, still
    // gets in there.
    assert_eq!(imap_login(b.imap, &victim, PASSWORD), "OK");
    drop(guess);
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
