//! IMAP under concurrent change: a message a session still shows must stay
//! fetchable with its real content until that session has announced its
//! EXPUNGE (RFC 3501 §7.4.1, RFC 2180 §4.1), however busy others are
//! appending and expunging.

use sluice_testkit as kit;

use kit::{addr_arg, python, Server, PASSWORD};

#[test]
fn fetch_never_answers_an_empty_body_while_others_expunge() {
    let server = Server::start();
    let user = server.add_user("busy");
    let out = python(
        r#"
import imaplib, random, sys, threading, time
h, p = sys.argv[1].rsplit(":", 1)
user, password = sys.argv[2], sys.argv[3]

def message(n):
    return ("From: a@remote.test\r\nTo: %s\r\nSubject: m%d\r\nMIME-Version: 1.0\r\n"
            "Content-Type: multipart/mixed; boundary=b\r\n\r\n"
            "--b\r\nContent-Type: text/plain\r\n\r\n%s\r\n"
            "--b\r\nContent-Type: text/plain\r\n\r\nsecond part %d\r\n--b--\r\n"
            % (user, n, ("part one of %d " % n) * 60, n)).encode()

def session():
    m = imaplib.IMAP4(h, int(p)); m.login(user, password)
    typ, data = m.select("INBOX")
    if typ != "OK":
        raise RuntimeError("SELECT refused: %r %r" % (typ, data))
    return m

m = session()
for n in range(40):
    typ, data = m.append("INBOX", None, None, message(n))
    assert typ == "OK", (typ, data)
m.logout()

stop = time.time() + 6
stats = {"items": 0, "empty": 0, "no": 0, "errors": []}
lock = threading.Lock()

def churn(seed):
    try:
        churn_on(seed)
    except Exception as e:
        with lock: stats["errors"].append("churn: %r" % e)

def churn_on(seed):
    rng = random.Random(seed)
    m = session()
    n = 1000 * seed
    while time.time() < stop:
        n += 1
        typ, data = m.append("INBOX", None, None, message(n))
        if typ != "OK":
            raise RuntimeError("APPEND refused: %r %r" % (typ, data))
        typ, data = m.uid("SEARCH", None, "ALL")
        uids = data[0].split()
        if len(uids) > 30:
            victims = rng.sample(uids, 3)
            m.uid("STORE", b",".join(victims), "+FLAGS.SILENT", "(\\Deleted)")
            m.expunge()
    m.logout()

def fetcher(item):
    try:
        m = session()
    except Exception as e:
        with lock: stats["errors"].append(repr(e))
        return
    while time.time() < stop:
        m.noop()
        try:
            typ, data = m.fetch("1:*", "(%s)" % item)
        except Exception as e:
            with lock: stats["errors"].append(repr(e))
            continue
        with lock:
            if typ != "OK":
                stats["no"] += 1
            for d in data:
                if isinstance(d, tuple):
                    stats["items"] += 1
                    if len(d[1]) == 0:
                        stats["empty"] += 1
                elif d and d != b")" and (b'""' in d or b" NIL" in d):
                    stats["items"] += 1
                    stats["empty"] += 1
    m.logout()

threads = [threading.Thread(target=churn, args=(s,)) for s in (1, 2)]
threads += [threading.Thread(target=fetcher, args=(i,)) for i in ("BODY.PEEK[]", "BODY.PEEK[TEXT]", "BODY.PEEK[1]")]
for t in threads: t.start()
for t in threads: t.join()
print(stats["items"], stats["empty"], stats["no"], len(stats["errors"]), stats["errors"][:3])
"#,
        &[&addr_arg(server.imap), &user, PASSWORD],
    );
    let mut fields = out.split_whitespace();
    let mut next = || fields.next().unwrap().parse::<usize>().unwrap();
    let (items, empty, no, errors) = (next(), next(), next(), next());
    // What the server complained of, for a failure's message.
    let log = server.log();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("panicked"))
        .collect();
    assert!(
        items > 1000,
        "too little load to tell: {out}\n{warnings:#?}"
    );
    assert_eq!(
        empty, 0,
        "empty bodies for stored messages: {out}\n{warnings:#?}"
    );
    assert_eq!(
        no, 0,
        "FETCH refused while the messages were in view: {out}\n{warnings:#?}"
    );
    assert_eq!(errors, 0, "{out}\n{warnings:#?}");
}

/// Python that opens two raw IMAP sessions, `a` and `b`, logged in (argv:
/// server, user, password) with INBOX selected; `cmd(s, line)` sends a
/// tagged command and returns everything up to its tagged answer.
const TWO_SESSIONS: &str = r#"
import socket, sys
h, p = sys.argv[1].rsplit(":", 1)
def conn():
    s = socket.create_connection((h, int(p))); s.settimeout(10); s.recv(4096); return s
def cmd(s, line):
    s.sendall(line.encode() + b"\r\n")
    out = b""
    tag = line.split()[0].encode()
    while not any(l.startswith(tag + b" ") for l in out.split(b"\r\n")):
        out += s.recv(65536)
    return out.decode()
a = conn(); cmd(a, "a1 LOGIN \"%s\" \"%s\"" % (sys.argv[2], sys.argv[3])); cmd(a, "a2 SELECT INBOX")
b = conn(); cmd(b, "b1 LOGIN \"%s\" \"%s\"" % (sys.argv[2], sys.argv[3])); cmd(b, "b2 SELECT INBOX")
"#;

/// A keyword another session set is named in an untagged FLAGS (and
/// PERMANENTFLAGS) before any FETCH shows it (RFC 3501 §7.2.6), and the
/// change reaches the other session.
#[test]
fn keywords_set_elsewhere_are_announced_before_they_are_used() {
    let server = Server::start();
    let user = server.add_user("flags");
    kit::swaks(&[
        "--server",
        &addr_arg(server.smtp),
        "--to",
        &user,
        "--from",
        "a@remote.test",
    ]);
    let out = python(
        &format!(
            "{TWO_SESSIONS}{}",
            r#"cmd(b, "b3 STORE 1 +FLAGS (Important)")
for i, command in enumerate(["FETCH 1 (FLAGS)", "STORE 1 +FLAGS (\\Seen)", "NOOP"]):
    out = cmd(a, "a%d %s" % (i + 3, command))
    lines = out.split("\r\n")
    uses = [n for n, l in enumerate(lines) if "FETCH" in l and "Important" in l]
    names = [n for n, l in enumerate(lines) if l.startswith("* FLAGS") and "Important" in l]
    perm = [n for n, l in enumerate(lines) if "PERMANENTFLAGS" in l and "Important" in l]
    print(command.split()[0], bool(uses), bool(names) and bool(perm) and min(names) < min(uses) if uses else "-")
"#
        ),
        &[&addr_arg(server.imap), &user, PASSWORD],
    );
    // The first command shows the keyword, after naming it; later ones
    // need not name it again.
    assert!(out.contains("FETCH True True"), "{out}");
}

/// A message another session expunged, still in this session's view,
/// answers a FETCH of its flags, UID and size as it was (RFC 2180
/// §4.1.1), with no EXPUNGE until a command that may send one.
#[test]
fn flags_of_a_message_expunged_elsewhere_are_answered_until_announced() {
    let server = Server::start();
    let user = server.add_user("gone");
    for _ in 0..2 {
        kit::swaks(&[
            "--server",
            &addr_arg(server.smtp),
            "--to",
            &user,
            "--from",
            "a@remote.test",
        ]);
    }
    let out = python(
        &format!(
            "{TWO_SESSIONS}{}",
            r#"cmd(b, "b3 STORE 1 +FLAGS.SILENT (\\Deleted $Gone)")
cmd(b, "b4 EXPUNGE")
print(repr(cmd(a, "a3 FETCH 1:2 (UID FLAGS RFC822.SIZE)")))
print(repr(cmd(a, "a4 NOOP")))
"#
        ),
        &[&addr_arg(server.imap), &user, PASSWORD],
    );
    let mut lines = out.lines();
    let fetch = lines.next().unwrap();
    let noop = lines.next().unwrap();
    assert!(
        fetch.contains("* 1 FETCH (UID 1 FLAGS (")
            && fetch.contains("\\\\Deleted")
            && fetch.contains("RFC822.SIZE"),
        "{out}"
    );
    assert!(fetch.contains("* 2 FETCH (UID 2"), "{out}");
    assert!(fetch.contains("a3 OK"), "{out}");
    assert!(!fetch.contains("EXPUNGE"), "{out}");
    assert!(noop.contains("* 1 EXPUNGE"), "{out}");
}
