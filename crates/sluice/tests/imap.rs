//! IMAP against a real `sluice serve`: Python's imaplib and raw sockets for
//! every command and the protocol details, mbsync and fetchmail as real
//! clients, and concurrent sessions checking each other's view.

use sluice_testkit as kit;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use kit::{python, Server, PASSWORD};

/// What every client script starts with. sys.argv: imap address, user,
/// password, smtp address, imaps address, then the test's own arguments
/// (`ARGS`).
///
/// - `eq`/`ok` fail the script with both values;
/// - `login()` is an imaplib session;
/// - `run(m, NAME, *args)` runs one command through imaplib and returns
///   `(type, tagged data, {untagged type: [data, ...]})` for that command
///   only, in arrival order per type;
/// - `Raw` is a bare connection that returns every response line in order,
///   with literals joined in, for what imaplib hides;
/// - `message(...)` builds a message, `deliver(...)` sends messages over
///   SMTP in one connection.
const CLIENT: &str = r#"
import base64, datetime, hashlib, imaplib, random, re, smtplib, socket, ssl, sys, threading, time, traceback
imaplib.Commands.setdefault("ID", ("NONAUTH", "AUTH", "SELECTED"))
HOST, PORT = sys.argv[1].rsplit(":", 1)
PORT = int(PORT)
USER, PASS = sys.argv[2], sys.argv[3]
SMTP_HOST, SMTP_PORT = sys.argv[4].rsplit(":", 1)
IMAPS = int(sys.argv[5].rsplit(":", 1)[1])
ARGS = sys.argv[6:]
TLS = ssl.create_default_context()
TLS.check_hostname = False
TLS.verify_mode = ssl.CERT_NONE

def eq(got, want, what=""):
    if got != want:
        raise AssertionError("%s:\n  got  %r\n  want %r" % (what, got, want))

def ok(cond, what):
    if not cond:
        raise AssertionError(what)

def login():
    m = imaplib.IMAP4(HOST, PORT, timeout=30)
    m.login(USER, PASS)
    return m

def run(m, name, *args):
    m.untagged_responses.clear()
    typ, dat = m._simple_command(name, *args)
    untagged = {k: list(v) for k, v in m.untagged_responses.items()}
    m.untagged_responses.clear()
    return typ, dat, untagged

def status(m, box, items="(MESSAGES UIDNEXT UIDVALIDITY UNSEEN HIGHESTMODSEQ SIZE)"):
    typ, dat = m.status(box, items)
    eq(typ, "OK", "STATUS %s: %r" % (box, dat))
    inner = re.search(rb"\((.*)\)", dat[0]).group(1).split()
    return {inner[i].decode(): int(inner[i + 1]) for i in range(0, len(inner), 2)}

def flagset(data):
    """The flags of a FETCH response, without \\Recent (which is per
    session: recent_goes_to_exactly_one_session checks it)."""
    found = re.search(rb"FLAGS \(([^)]*)\)", data)
    ok(found, "no FLAGS in %r" % data)
    return set(found.group(1).decode().split()) - {"\\Recent"}

def message(subject, mid, body="Hello.\r\n", headers="", frm="Sender <sender@remote.test>",
            to=None, date="Mon, 01 Jan 2024 12:00:00 +0000"):
    head = "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: %s\r\n%s" % (
        frm, to or USER, subject, date, mid, headers)
    if isinstance(body, str):
        body = body.encode()
    return head.encode() + b"\r\n" + body

def deliver(messages):
    with smtplib.SMTP(SMTP_HOST, int(SMTP_PORT), timeout=30) as s:
        for msg in messages:
            s.sendmail("sender@remote.test", [USER], msg)

class Raw:
    def __init__(self, port=None):
        self.sock = socket.create_connection((HOST, port or PORT), timeout=30)
        self.file = self.sock.makefile("rb")
        self.n = 0
        self.greeting = self.read()

    def read(self):
        line = self.file.readline()
        if not line:
            raise EOFError("the server closed the connection")
        while True:
            lit = re.search(rb"\{(\d+)\}\r\n$", line)
            if not lit:
                return line.decode("latin-1").rstrip("\r\n")
            line += self.file.read(int(lit.group(1)))
            line += self.file.readline()

    def send(self, data):
        self.sock.sendall(data.encode("latin-1") if isinstance(data, str) else data)

    def tag(self):
        self.n += 1
        return "r%d" % self.n

    def finish(self, tag):
        untagged = []
        while True:
            line = self.read()
            if line.startswith(tag + " "):
                return untagged, line
            untagged.append(line)

    def cmd(self, text):
        tag = self.tag()
        self.send("%s %s\r\n" % (tag, text))
        return self.finish(tag)

    def login(self):
        u, t = self.cmd('LOGIN "%s" "%s"' % (USER, PASS))
        ok(t.split()[1] == "OK", t)
"#;

/// The last lines of the server's log, for failure messages (without
/// the frames of a backtrace).
fn log_tail(server: &Server) -> String {
    let log = server.log();
    let lines: Vec<&str> = log.lines().filter(|l| !l.starts_with(' ')).collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

fn client_args(server: &Server, user: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        server.imap.to_string(),
        user.to_string(),
        PASSWORD.to_string(),
        server.smtp.to_string(),
        server.imaps.to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// Runs `script` after [`CLIENT`] as `user`; returns what it printed. A
/// failing script fails the test with its output and the server's log.
fn client(server: &Server, user: &str, script: &str, extra: &[&str]) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(format!("{CLIENT}\n{script}"))
        .args(client_args(server, user, extra))
        .output()
        .expect("python3 must be installed");
    assert!(
        out.status.success(),
        "client script failed:\n{}\n{}\n--- server log ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        log_tail(server)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn capabilities_logins_starttls_and_imaps() {
    let server = Server::start();
    let user = server.add_user("caps");
    client(
        &server,
        &user,
        r#"
WANT = {"IMAP4REV1", "STARTTLS", "AUTH=PLAIN", "SASL-IR", "LITERAL+", "ENABLE", "ID", "IDLE",
        "NAMESPACE", "UNSELECT", "UIDPLUS", "MOVE", "CONDSTORE", "QUOTA", "QUOTA=RES-STORAGE",
        "STATUS=SIZE", "CHILDREN", "SPECIAL-USE", "ESEARCH"}

# Raw: the greeting, what is refused before login, SASL-IR, LOGOUT.
r = Raw()
ok(r.greeting.startswith("* OK [CAPABILITY "), r.greeting)
u, t = r.cmd("CAPABILITY")
ok(t.startswith("r1 OK"), t)
eq(len(u), 1, "one CAPABILITY response")
caps = {c.upper() for c in u[0].split()[2:]}
ok(WANT <= caps, "missing before login: %r" % (WANT - caps))
ok("LOGINDISABLED" not in caps, "LOGINDISABLED on loopback")
for cmd in ("SELECT INBOX", 'LIST "" *', "STATUS INBOX (MESSAGES)", "NAMESPACE", "FETCH 1 FLAGS"):
    u, t = r.cmd(cmd)
    eq(t.split()[1], "NO", "%s before login: %s" % (cmd, t))
u, t = r.cmd("FROBNICATE now")
eq(t.split()[1], "BAD", t)
u, t = r.cmd('ID ("name" "kit")')
ok(t.split()[1] == "OK" and len(u) == 1 and u[0].startswith('* ID ("name" "Sluice"'), (u, t))
token = base64.b64encode(b"\0" + USER.encode() + b"\0" + PASS.encode()).decode()
u, t = r.cmd("AUTHENTICATE PLAIN " + token)
ok(t.split()[1] == "OK", "SASL-IR login: %s" % t)
u, t = r.cmd("CAPABILITY")
caps = {c.upper() for c in u[0].split()[2:]}
ok(WANT - {"STARTTLS", "AUTH=PLAIN", "SASL-IR"} <= caps, "after login: %r" % caps)
for gone in ("STARTTLS", "AUTH=PLAIN", "SASL-IR"):
    ok(gone not in caps, "%s still offered after login" % gone)
u, t = r.cmd('LOGIN "%s" "%s"' % (USER, PASS))
eq(t.split()[1], "BAD", "LOGIN twice: %s" % t)
u, t = r.cmd("FETCH 1 FLAGS")
eq(t.split()[1], "NO", "FETCH without a mailbox: %s" % t)
u, t = r.cmd("LOGOUT")
ok(t.split()[1] == "OK" and u and u[0].startswith("* BYE"), (u, t))
eq(r.file.readline(), b"", "connection closed after LOGOUT")

# imaplib: one wrong password, then the right one on the same connection.
m = imaplib.IMAP4(HOST, PORT, timeout=30)
t0 = time.monotonic()
try:
    m.login(USER, "wrong password")
    raise AssertionError("a wrong password was accepted")
except imaplib.IMAP4.error as e:
    ok("[AUTHENTICATIONFAILED]" in str(e), str(e))
ok(time.monotonic() - t0 >= 0.5, "a failed login was answered at once")
typ, dat = m.login(USER, PASS)
ok(typ == "OK" and b"[CAPABILITY " in dat[0], (typ, dat))
eq(m.noop()[0], "OK", "NOOP")
typ, dat, u = run(m, "ID", '("name" "kit" "version" "1")')
ok(typ == "OK" and b'"name" "Sluice"' in u["ID"][0], u)
typ, dat, u = run(m, "ID", "NIL")
ok(typ == "OK" and "ID" in u, u)
eq(m.namespace(), ("OK", [b'(("" "/")) NIL NIL']), "NAMESPACE")
typ, dat, u = run(m, "ENABLE", "CONDSTORE")
eq(u.get("ENABLED"), [b"CONDSTORE"], "ENABLE CONDSTORE")
typ, dat = m.getquotaroot("INBOX")
eq(typ, "OK", "GETQUOTAROOT")
ok(dat[0] in ([b"INBOX"], [b'"INBOX"']), "QUOTAROOT without a limit: %r" % dat)
eq(dat[1], [None], "no QUOTA response without a limit")
typ, dat = m.getquotaroot("Nowhere")
eq(typ, "NO", "GETQUOTAROOT of a missing mailbox")
typ, dat = m.getquota('""')
eq(typ, "NO", "GETQUOTA without a limit")
typ, dat = m.setquota('""', "(STORAGE 100)")
ok(typ == "NO" and b"[NOPERM]" in dat[0], (typ, dat))
try:
    m.xatom("FROBNICATE")
    raise AssertionError("unknown command accepted")
except imaplib.IMAP4.error as e:
    ok("BAD" in str(e), str(e))
typ, dat = m.logout()
eq(typ, "BYE", "LOGOUT")

# AUTHENTICATE PLAIN without an initial response (continuation).
m = imaplib.IMAP4(HOST, PORT, timeout=30)
typ, dat = m.authenticate("PLAIN", lambda _: b"\0" + USER.encode() + b"\0" + PASS.encode())
ok(typ == "OK" and m.state == "AUTH", (typ, dat))
eq(m.select("INBOX")[0], "OK", "SELECT after AUTHENTICATE")
m.logout()
m = imaplib.IMAP4(HOST, PORT, timeout=30)
try:
    m.authenticate("PLAIN", lambda _: b"\0" + USER.encode() + b"\0nope")
    raise AssertionError("AUTHENTICATE with a wrong password accepted")
except imaplib.IMAP4.error as e:
    ok("AUTHENTICATIONFAILED" in str(e), str(e))
m.logout()

# STARTTLS on the imap port.
m = imaplib.IMAP4(HOST, PORT, timeout=30)
ok("STARTTLS" in m.capabilities, m.capabilities)
typ, dat = m.starttls(TLS)
eq(typ, "OK", "STARTTLS")
ok(m.sock.version().startswith("TLS"), m.sock.version())
ok("STARTTLS" not in m.capabilities and "AUTH=PLAIN" in m.capabilities, m.capabilities)
try:
    m._simple_command("STARTTLS")
    raise AssertionError("a second STARTTLS was accepted")
except imaplib.IMAP4.error as e:
    ok("BAD" in str(e), str(e))
m.login(USER, PASS)
eq(m.select("INBOX"), ("OK", [b"0"]), "SELECT over STARTTLS")
m.logout()

# Commands pipelined behind STARTTLS in plaintext are discarded, not run
# after the handshake (RFC 3501 6.2.1; the STARTTLS command injection).
r = Raw()
r.send('r1 STARTTLS\r\nr2 LOGIN "%s" "%s"\r\n' % (USER, PASS))
line = r.read()
ok(line.startswith("r1 OK"), line)
tls = TLS.wrap_socket(r.sock, server_hostname="localhost")
tls.sendall(b"r3 CAPABILITY\r\n")
reader = tls.makefile("rb")
answers = [reader.readline(), reader.readline()]
ok(answers[0].startswith(b"* CAPABILITY ") and b"AUTH=PLAIN" in answers[0], answers)
ok(answers[1].startswith(b"r3 OK"), "the injected LOGIN was run: %r" % answers)
tls.close()

# Implicit TLS on the imaps port.
m = imaplib.IMAP4_SSL(HOST, IMAPS, ssl_context=TLS, timeout=30)
ok("STARTTLS" not in m.capabilities and "AUTH=PLAIN" in m.capabilities, m.capabilities)
m.login(USER, PASS)
eq(status(m, "INBOX", "(MESSAGES)"), {"MESSAGES": 0}, "STATUS over imaps")
m.logout()
"#,
        &[],
    );
}

#[test]
fn mailboxes_create_delete_rename_subscribe_list_status() {
    let server = Server::start();
    let user = server.add_user("boxes");
    client(
        &server,
        &user,
        r#"
LIST_RE = re.compile(rb'^\((?P<attrs>[^)]*)\) (?:"(?P<delim>[^"]*)"|NIL) (?P<name>.*)$')

def names(ref='""', pat="*", cmd="list"):
    typ, dat = getattr(m, cmd)(ref, pat)
    eq(typ, "OK", "%s %s %s" % (cmd, ref, pat))
    out = {}
    for line in dat:
        if line is None:
            continue
        x = LIST_RE.match(line)
        ok(x, "bad %s line %r" % (cmd, line))
        name = x.group("name").decode()
        if name.startswith('"'):
            name = name[1:-1]
        eq(x.group("delim"), b"/", "delimiter")
        out[name] = {a.lower() for a in x.group("attrs").decode().split()}
    return out

m = login()
l = names()
eq(set(l), {"INBOX", "Sent", "Drafts", "Trash", "Junk", "Archive"}, "a new account's mailboxes")
for box, use in [("Sent", "\\sent"), ("Drafts", "\\drafts"), ("Trash", "\\trash"),
                 ("Junk", "\\junk"), ("Archive", "\\archive")]:
    ok(use in l[box], "%s lacks %s: %r" % (box, use, l[box]))
for box in l:
    ok("\\hasnochildren" in l[box], "%s: %r" % (box, l[box]))

# CREATE with implied parents.
eq(m.create("a/b/c")[0], "OK", "CREATE a/b/c")
l = names()
ok({"a", "a/b", "a/b/c"} <= set(l), l)
ok("\\haschildren" in l["a"] and "\\haschildren" in l["a/b"], l)
ok("\\hasnochildren" in l["a/b/c"], l)
typ, dat = m.create("a/b/c")
ok(typ == "NO" and b"[ALREADYEXISTS]" in dat[0], (typ, dat))
eq(m.create("INBOX")[0], "NO", "CREATE INBOX")
eq(m.create("trailing/")[0], "OK", "CREATE with a trailing delimiter")
ok("trailing" in names(), "trailing/ created as trailing")
eq(m.create('"My Folder"')[0], "OK", "CREATE with a space")
eq(m.create("Entw&APw-rfe")[0], "OK", "CREATE in modified UTF-7 (RFC 3501 5.1.3)")
ok({"My Folder", "Entw&APw-rfe"} <= set(names()), names())
eq(status(m, '"My Folder"', "(MESSAGES)"), {"MESSAGES": 0}, "STATUS of a quoted name")
eq(m.select("Entw&APw-rfe"), ("OK", [b"0"]), "SELECT of a modified UTF-7 name")
m.unselect()

# LIST patterns and references.
eq(set(names('""', "%")), {"INBOX", "Sent", "Drafts", "Trash", "Junk", "Archive", "a", "trailing",
                            "My Folder", "Entw&APw-rfe"}, "%")
eq(set(names('""', "a/*")), {"a/b", "a/b/c"}, "a/*")
eq(set(names('""', "a/%")), {"a/b"}, "a/%")
eq(set(names("a/", "%")), {"a/b"}, "reference a/")
eq(set(names('""', "inbox")), {"INBOX"}, "INBOX is case-insensitive")
eq(m.select("inbox"), ("OK", [b"0"]), "SELECT inbox")
eq(status(m, "Inbox", "(MESSAGES)"), {"MESSAGES": 0}, "STATUS Inbox")
m.unselect()
eq(set(names('""', "*c")), {"a/b/c"}, "*c")
eq(m.list('""', '""'), ("OK", [b'(\\Noselect) "/" ""']), "the root and delimiter")

# DELETE.
typ, dat = m.delete("INBOX")
eq(typ, "NO", "DELETE INBOX: %r" % dat)
typ, dat = m.delete("a")
eq(typ, "NO", "DELETE of a mailbox with children: %r" % dat)
typ, dat = m.delete("nope")
ok(typ == "NO" and b"[NONEXISTENT]" in dat[0], (typ, dat))
eq(m.delete("a/b/c")[0], "OK", "DELETE a/b/c")
l = names()
ok("a/b/c" not in l and "\\hasnochildren" in l["a/b"], l)
eq(m.delete("trailing")[0], "OK", "DELETE trailing")

# SUBSCRIBE, LSUB, UNSUBSCRIBE (whether CREATE subscribes is left open).
eq(m.unsubscribe("a")[0], "OK", "UNSUBSCRIBE a")
eq(m.subscribe("a/b")[0], "OK", "SUBSCRIBE a/b")
ls = names(cmd="lsub")
ok("a/b" in ls and "a" not in ls, ls)
eq(m.unsubscribe("a/b")[0], "OK", "UNSUBSCRIBE a/b")
ok("a/b" not in names(cmd="lsub"), "still subscribed")
eq(m.subscribe("a")[0], "OK", "SUBSCRIBE a")
ok("a" in names(cmd="lsub"), "not subscribed")

# RENAME: children follow, implied parents are created.
eq(m.rename("a", "x")[0], "OK", "RENAME a x")
l = names()
ok({"x", "x/b"} <= set(l) and not {"a", "a/b"} & set(l), l)
typ, dat = m.rename("x", "Sent")
ok(typ == "NO" and b"[ALREADYEXISTS]" in dat[0], (typ, dat))
typ, dat = m.rename("nope", "y")
ok(typ == "NO" and b"[NONEXISTENT]" in dat[0], (typ, dat))
typ, dat = m.rename("x", "x/b/y")
eq(typ, "NO", "RENAME of a mailbox under itself: %r" % dat)
ok({"x", "x/b"} <= set(names()) and "x/b/y" not in names(), names())
eq(m.rename("x/b", "p/q/r")[0], "OK", "RENAME into new parents")
l = names()
ok({"p", "p/q", "p/q/r"} <= set(l) and "x/b" not in l, l)
ok("\\hasnochildren" in l["x"], l)

# RENAME INBOX moves its messages to the new name and leaves INBOX empty.
one = message("one", "<one@kit.test>")
two = message("two", "<two@kit.test>", body="A longer body.\r\n" * 5)
eq(m.append("INBOX", "(\\Seen)", None, one)[0], "OK", "APPEND one")
eq(m.append("INBOX", None, None, two)[0], "OK", "APPEND two")
inbox_before = status(m, "INBOX", "(UIDVALIDITY UIDNEXT)")
eq(m.rename("INBOX", "Old")[0], "OK", "RENAME INBOX")
ok("INBOX" in names() and "Old" in names(), names())
eq(status(m, "INBOX", "(MESSAGES)"), {"MESSAGES": 0}, "INBOX after RENAME")
s = status(m, "Old")
eq(s["MESSAGES"], 2, "Old")
eq(s["UNSEEN"], 1, "Old UNSEEN")
eq(s["SIZE"], len(one) + len(two), "Old SIZE")
ok(s["UIDVALIDITY"] > 0 and s["HIGHESTMODSEQ"] > 0, s)
m.select("Old", readonly=True)
uids = [int(u) for u in m.uid("SEARCH", "ALL")[1][0].split()]
ok(s["UIDNEXT"] > max(uids), (s, uids))
typ, dat = m.fetch("1:*", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
subjects = sorted(d[1].strip() for d in dat if isinstance(d, tuple))
eq(subjects, [b"Subject: one", b"Subject: two"], "messages of the renamed INBOX")
m.close()
typ, dat = m.status("nope", "(MESSAGES)")
eq(typ, "NO", "STATUS of a missing mailbox")

# A name used again must not reuse UIDs under the same UIDVALIDITY
# (RFC 3501 2.3.1.1): after RENAME INBOX, DELETE and CREATE, RENAME away.
def no_reuse(before, box, what):
    after = status(m, box, "(UIDVALIDITY UIDNEXT)")
    ok(after["UIDVALIDITY"] != before["UIDVALIDITY"] or after["UIDNEXT"] >= before["UIDNEXT"],
       "%s: %r then %r" % (what, before, after))

no_reuse(inbox_before, "INBOX", "INBOX after RENAME INBOX")
eq(m.create("T")[0], "OK", "CREATE T")
m.append("T", None, None, one)
before = status(m, "T", "(UIDVALIDITY UIDNEXT)")
m.delete("T")
m.create("T")
no_reuse(before, "T", "T deleted and created again")
m.append("T", None, None, two)
before = status(m, "T", "(UIDVALIDITY UIDNEXT)")
eq(m.rename("T", "T2")[0], "OK", "RENAME T T2")
eq(status(m, "T2", "(MESSAGES)"), {"MESSAGES": 1}, "T2 after RENAME")
m.create("T")
no_reuse(before, "T", "T renamed away and created again")
m.logout()
"#,
        &[],
    );
}

#[test]
fn select_examine_append_expunge_close_unselect() {
    let server = Server::start();
    let user = server.add_user("select");
    client(
        &server,
        &user,
        r#"
m = login()
v = status(m, "INBOX")["UIDVALIDITY"]
msgs = [message("m%d" % i, "<m%d@kit.test>" % i) for i in range(5)]
typ, dat = m.append("INBOX", "(\\Seen $Label1)", '"05-Mar-2021 10:20:30 +0100"', msgs[0])
eq((typ, re.match(rb"\[APPENDUID (\d+) (\d+)\]", dat[0]).groups()), ("OK", (b"%d" % v, b"1")), dat)
for i in range(1, 5):
    typ, dat = m.append("INBOX", None, None, msgs[i])
    eq(re.match(rb"\[APPENDUID (\d+) (\d+)\]", dat[0]).groups(), (b"%d" % v, b"%d" % (i + 1)), dat)
typ, dat = m.append("Nowhere", None, None, msgs[0])
ok(typ == "NO" and b"[TRYCREATE]" in dat[0], (typ, dat))
try:
    m.append("INBOX", "(\\Recent)", None, msgs[0])
    raise AssertionError("APPEND with \\Recent accepted")
except imaplib.IMAP4.error as e:
    ok("BAD" in str(e), str(e))

# SELECT: the responses RFC 3501 §6.3.1 and RFC 7162 require.
typ, dat = m.select("INBOX")
eq((typ, dat), ("OK", [b"5"]), "SELECT")
u = m.untagged_responses
for f in ("\\Answered", "\\Flagged", "\\Deleted", "\\Seen", "\\Draft", "$Label1"):
    ok(f.encode() in u["FLAGS"][0], "FLAGS lacks %s: %r" % (f, u["FLAGS"]))
ok(b"\\*" in u["PERMANENTFLAGS"][0] and b"$Label1" in u["PERMANENTFLAGS"][0], u["PERMANENTFLAGS"])
eq(u["UIDVALIDITY"], [b"%d" % v], "UIDVALIDITY")
eq(u["UIDNEXT"], [b"6"], "UIDNEXT")
eq(u["UNSEEN"], [b"2"], "first unseen")
eq(u["RECENT"], [b"5"], "RECENT: this session took the new mail")
ok(int(u["HIGHESTMODSEQ"][0]) > 0, u)
ok("READ-WRITE" in u, u)

# APPEND's date and flags.
typ, dat = m.fetch("1", "(FLAGS INTERNALDATE)")
eq(flagset(dat[0]), {"\\Seen", "$Label1"}, "flags given to APPEND")
when = re.search(rb'INTERNALDATE "([^"]+)"', dat[0]).group(1).decode().strip()
eq(datetime.datetime.strptime(when, "%d-%b-%Y %H:%M:%S %z"),
   datetime.datetime(2021, 3, 5, 9, 20, 30, tzinfo=datetime.timezone.utc), "INTERNALDATE")
typ, dat = m.fetch("2", "(INTERNALDATE)")
when = re.search(rb'INTERNALDATE "([^"]+)"', dat[0]).group(1).decode().strip()
when = datetime.datetime.strptime(when, "%d-%b-%Y %H:%M:%S %z")
ok(abs((datetime.datetime.now(datetime.timezone.utc) - when).total_seconds()) < 300, when)
eq(m.check()[0], "OK", "CHECK")

# EXPUNGE: the numbers, applied in order, remove exactly 2 and 4.
m.store("2,4", "+FLAGS.SILENT", "(\\Deleted)")
m.untagged_responses.clear()
typ, dat = m.expunge()
eq(typ, "OK", "EXPUNGE")
model = [1, 2, 3, 4, 5]
for n in dat:
    model.pop(int(n) - 1)
eq(model, [1, 3, 5], "after EXPUNGE %r" % dat)
eq(m.uid("SEARCH", "ALL")[1], [b"1 3 5"], "UIDs left")

# UID EXPUNGE removes only the named \Deleted messages.
m.store("1:3", "+FLAGS.SILENT", "(\\Deleted)")
typ, dat, u = run(m, "UID", "EXPUNGE", "3")
eq((typ, u.get("EXPUNGE")), ("OK", [b"2"]), "UID EXPUNGE 3")
eq(m.uid("SEARCH", "ALL")[1], [b"1 5"], "UIDs left")

# UNSELECT leaves \Deleted messages alone.
eq(m.unselect()[0], "OK", "UNSELECT")
eq(status(m, "INBOX", "(MESSAGES)"), {"MESSAGES": 2}, "after UNSELECT")

# EXAMINE is read-only: no flag changes, no expunge, no implicit \Seen.
typ, dat = m.select("INBOX", readonly=True)
u = m.untagged_responses
ok(typ == "OK" and "READ-ONLY" in u, (typ, u))
eq(u["PERMANENTFLAGS"], [b"()"], "PERMANENTFLAGS in EXAMINE")
eq(m.store("1", "+FLAGS", "(\\Flagged)")[0], "NO", "STORE in EXAMINE")
eq(m.expunge()[0], "NO", "EXPUNGE in EXAMINE")
eq(m._simple_command("MOVE", "1", "Archive")[0], "NO", "MOVE in EXAMINE")
eq(m.copy("1", "Archive")[0], "OK", "COPY in EXAMINE")
eq(status(m, "Archive", "(MESSAGES)"), {"MESSAGES": 1}, "COPY from EXAMINE")
typ, dat = m.fetch("2", "(BODY[])")
eq(dat[0][1], msgs[4], "BODY[] in EXAMINE")
typ, dat = m.fetch("2", "(FLAGS)")
eq(flagset(dat[0]), {"\\Deleted"}, "no \\Seen from EXAMINE")
eq(m.close()[0], "OK", "CLOSE in EXAMINE")
eq(status(m, "INBOX", "(MESSAGES)"), {"MESSAGES": 2}, "CLOSE after EXAMINE expunges nothing")

# CLOSE expunges silently.
m.select("INBOX")
m.untagged_responses.clear()
eq(m.close()[0], "OK", "CLOSE")
ok("EXPUNGE" not in m.untagged_responses, m.untagged_responses)
eq(m.state, "AUTH", "state after CLOSE")
eq(status(m, "INBOX", "(MESSAGES UIDNEXT)"), {"MESSAGES": 0, "UIDNEXT": 6}, "after CLOSE")

# APPEND to the selected mailbox is announced before its tagged OK.
m.select("INBOX")
m.untagged_responses.clear()
eq(m.append("INBOX", None, None, msgs[0])[0], "OK", "APPEND")
eq(m.untagged_responses.get("EXISTS"), [b"1"], "EXISTS after APPEND to the selected mailbox")
# RFC 3501 6.4.8: in "100:*", "*" is the highest UID in use, so the
# range includes the last message even though 100 is beyond it.
eq(m.uid("FETCH", "100:*", "(FLAGS)"), ("OK", [b"1 (UID 6 FLAGS (\\Recent))"]), "UID FETCH 100:*")
eq(m.uid("SEARCH", "UID 100:*"), ("OK", [b"6"]), "UID SEARCH UID 100:*")
m.logout()

# A failed SELECT leaves no mailbox selected (RFC 3501 6.3.1).
r = Raw()
r.login()
u, t = r.cmd("SELECT INBOX")
ok(" OK [READ-WRITE]" in t, t)
u, t = r.cmd("SELECT Nowhere")
ok(t.split()[1] == "NO", t)
u, t = r.cmd("FETCH 1 (FLAGS)")
eq(t.split()[1], "NO", "FETCH after a failed SELECT: %s" % t)
u, t = r.cmd("CLOSE")
ok(t.split()[1] in ("NO", "BAD"), "CLOSE without a mailbox: %s" % t)
r.cmd("LOGOUT")
"#,
        &[],
    );
}

#[test]
fn fetch_items_sections_and_bodystructure() {
    let server = Server::start();
    let user = server.add_user("fetch");
    client(
        &server,
        &user,
        r#"
text_body = "Hello Bob,\r\nsee the attachment.\r\n"
att_body = base64.b64encode(bytes(range(48))).decode() + "\r\n"
inner_head = ("From: Carol <carol@example.net>\r\nTo: dave@example.org\r\nSubject: inner note\r\n"
              "Date: Tue, 2 Jan 2024 11:00:00 +0000\r\nMessage-ID: <inner@example.net>\r\n"
              "Content-Type: text/plain; charset=us-ascii\r\n")
inner_body = "Inner body line\r\n"
inner = inner_head + "\r\n" + inner_body
p1h = "Content-Type: text/plain; charset=utf-8\r\n"
p2h = ('Content-Type: application/octet-stream; name="data.bin"\r\nContent-Transfer-Encoding: base64\r\n'
       'Content-Disposition: attachment; filename="data.bin"\r\n')
p3h = "Content-Type: message/rfc822\r\n"
top_head = ("From: Alice Example <alice@example.com>\r\nTo: Bob <bob@example.org>\r\nCc: carol@example.net\r\n"
            "Subject: structure test\r\nDate: Mon, 1 Jan 2024 10:00:00 +0000\r\n"
            "In-Reply-To: <earlier@example.com>\r\nMessage-ID: <structure@example.com>\r\n"
            'MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="b1"\r\n')
body = ("--b1\r\n" + p1h + "\r\n" + text_body + "\r\n--b1\r\n" + p2h + "\r\n" + att_body +
        "\r\n--b1\r\n" + p3h + "\r\n" + inner + "\r\n--b1--\r\n")
msg = (top_head + "\r\n" + body).encode()
simple = [message("simple %d" % i, "<simple%d@kit.test>" % i, body="Line one\r\nLine two\r\n") for i in range(3)]
odd = (b'From: "Doe, John" <john@example.com>\r\nTo: undisclosed-recipients:;\r\n'
       b'Cc: Team: a@example.com, "B" <b@example.com>;\r\nSubject: He said "hi" \\o/\r\n'
       b'Date: Tue, 2 Jan 2024 11:00:00 +0000\r\nMessage-ID: <odd@kit.test>\r\n\r\nbody\r\n')

m = login()
eq(m.append("INBOX", None, '"01-Jan-2024 10:00:05 +0000"', msg)[0], "OK", "APPEND")
for s in simple + [odd]:
    m.append("INBOX", None, None, s)
m.select("INBOX")

def one(seq, items):
    typ, dat = m.fetch(seq, items)
    eq(typ, "OK", "FETCH %s %s" % (seq, items))
    text, lits = b"", []
    for d in dat:
        if isinstance(d, tuple):
            text += d[0]
            lits.append(d[1])
        else:
            text += d
    return text, lits

def flags(seq):
    return flagset(one(seq, "(FLAGS)")[0])

text, _ = one("1", "(FLAGS UID INTERNALDATE RFC822.SIZE)")
ok(re.fullmatch(rb'1 \(FLAGS \((\\Recent)?\) UID 1 INTERNALDATE "0?1-Jan-2024 10:00:05 \+0000" RFC822\.SIZE %d\)' % len(msg), text), text)
addr = lambda name, box, host: '((%s NIL "%s" "%s"))' % ('"%s"' % name if name else "NIL", box, host)
alice = addr("Alice Example", "alice", "example.com")
want_env = ('("Mon, 1 Jan 2024 10:00:00 +0000" "structure test" %s %s %s %s %s NIL "<earlier@example.com>" "<structure@example.com>")'
            % (alice, alice, alice, addr("Bob", "bob", "example.org"), addr(None, "carol", "example.net")))
text, _ = one("1", "(ENVELOPE)")
eq(text.decode(), "1 (ENVELOPE %s)" % want_env, "ENVELOPE")
# Quoted strings with escapes; groups as RFC 3501 7.4.2 writes them.
doe = addr("Doe, John", "john", "example.com")
text, _ = one("5", "(ENVELOPE BODYSTRUCTURE)")
eq(text.decode(), '5 (ENVELOPE ("Tue, 2 Jan 2024 11:00:00 +0000" "He said \\"hi\\" \\\\o/" %s %s %s '
                  '((NIL NIL "undisclosed-recipients" NIL)(NIL NIL NIL NIL)) '
                  '((NIL NIL "Team" NIL)(NIL NIL "a" "example.com")("B" NIL "b" "example.com")(NIL NIL NIL NIL)) '
                  'NIL NIL "<odd@kit.test>") BODYSTRUCTURE ("TEXT" "PLAIN" ("CHARSET" "us-ascii") NIL NIL "7BIT" 6 1 NIL NIL NIL NIL))'
                  % (doe, doe, doe), "ENVELOPE with quoting and groups")

carol = addr("Carol", "carol", "example.net")
inner_env = ('("Tue, 2 Jan 2024 11:00:00 +0000" "inner note" %s %s %s %s NIL NIL NIL "<inner@example.net>")'
             % (carol, carol, carol, addr(None, "dave", "example.org")))
want_bs = ('(("TEXT" "PLAIN" ("CHARSET" "utf-8") NIL NIL "7BIT" %d 2 NIL NIL NIL NIL)'
           '("APPLICATION" "OCTET-STREAM" ("NAME" "data.bin") NIL NIL "BASE64" %d NIL ("ATTACHMENT" ("FILENAME" "data.bin")) NIL NIL)'
           '("MESSAGE" "RFC822" NIL NIL NIL "7BIT" %d %s ("TEXT" "PLAIN" ("CHARSET" "us-ascii") NIL NIL "7BIT" %d 1 NIL NIL NIL NIL) %d NIL NIL NIL NIL)'
           ' "MIXED" ("BOUNDARY" "b1") NIL NIL NIL)'
           % (len(text_body), len(att_body), len(inner), inner_env, len(inner_body), inner.count("\n")))
text, _ = one("1", "(BODYSTRUCTURE)")
eq(text.decode().lower(), ("1 (BODYSTRUCTURE %s)" % want_bs).lower(), "BODYSTRUCTURE")
want_body = ('(("TEXT" "PLAIN" ("CHARSET" "utf-8") NIL NIL "7BIT" %d 2)'
             '("APPLICATION" "OCTET-STREAM" ("NAME" "data.bin") NIL NIL "BASE64" %d)'
             '("MESSAGE" "RFC822" NIL NIL NIL "7BIT" %d %s ("TEXT" "PLAIN" ("CHARSET" "us-ascii") NIL NIL "7BIT" %d 1) %d)'
             ' "MIXED")'
             % (len(text_body), len(att_body), len(inner), inner_env, len(inner_body), inner.count("\n")))
text, _ = one("1", "(BODY)")
eq(text.decode().lower(), ("1 (BODY %s)" % want_body).lower(), "BODY")

# Sections, all with PEEK: \Seen stays off.
sections = [
    ("BODY.PEEK[]", "BODY[]", msg),
    ("BODY.PEEK[HEADER]", "BODY[HEADER]", (top_head + "\r\n").encode()),
    ("BODY.PEEK[HEADER.FIELDS (SUBJECT FROM)]", "BODY[HEADER.FIELDS (SUBJECT FROM)]",
     b"From: Alice Example <alice@example.com>\r\nSubject: structure test\r\n\r\n"),
    ("BODY.PEEK[HEADER.FIELDS.NOT (SUBJECT FROM TO CC DATE MESSAGE-ID MIME-VERSION IN-REPLY-TO)]",
     "BODY[HEADER.FIELDS.NOT (SUBJECT FROM TO CC DATE MESSAGE-ID MIME-VERSION IN-REPLY-TO)]",
     b'Content-Type: multipart/mixed; boundary="b1"\r\n\r\n'),
    ("BODY.PEEK[TEXT]", "BODY[TEXT]", body.encode()),
    ("BODY.PEEK[1]", "BODY[1]", text_body.encode()),
    ("BODY.PEEK[1.MIME]", "BODY[1.MIME]", (p1h + "\r\n").encode()),
    ("BODY.PEEK[2]", "BODY[2]", att_body.encode()),
    ("BODY.PEEK[2.MIME]", "BODY[2.MIME]", (p2h + "\r\n").encode()),
    ("BODY.PEEK[3]", "BODY[3]", inner.encode()),
    ("BODY.PEEK[3.HEADER]", "BODY[3.HEADER]", (inner_head + "\r\n").encode()),
    ("BODY.PEEK[3.TEXT]", "BODY[3.TEXT]", inner_body.encode()),
    ("BODY.PEEK[3.HEADER.FIELDS (SUBJECT)]", "BODY[3.HEADER.FIELDS (SUBJECT)]", b"Subject: inner note\r\n\r\n"),
    ("BODY.PEEK[3.1]", "BODY[3.1]", inner_body.encode()),
    ("BODY.PEEK[]<0.10>", "BODY[]<0>", msg[:10]),
    ("BODY.PEEK[]<10.20>", "BODY[]<10>", msg[10:30]),
    ("BODY.PEEK[TEXT]<5.1000000>", "BODY[TEXT]<5>", body.encode()[5:]),
    ("BODY.PEEK[]<100000.10>", "BODY[]<100000>", b""),
    ("RFC822.HEADER", "RFC822.HEADER", (top_head + "\r\n").encode()),
]
for item, label, want in sections:
    text, lits = one("1", "(%s)" % item)
    ok(label.encode() + b" {" in text, "%s answered as %r" % (item, text))
    eq(lits, [want], item)
eq(flags("1"), set(), "flags after PEEK and RFC822.HEADER")

# Without PEEK, \Seen is set and the new FLAGS come with the data.
text, lits = one("1", "(BODY[TEXT])")
ok(flagset(text) == {"\\Seen"} and lits == [body.encode()], text)
eq(flags("1"), {"\\Seen"}, "after BODY[TEXT]")
text, lits = one("2", "(RFC822)")
ok(b"RFC822 {" in text and flagset(text) == {"\\Seen"} and lits == [simple[0]], (text, lits))
text, lits = one("3", "(RFC822.TEXT)")
ok(b"RFC822.TEXT {" in text and flagset(text) == {"\\Seen"} and lits == [b"Line one\r\nLine two\r\n"], (text, lits))
eq(flags("4"), set(), "message 4 untouched")

# A message without a body, and one with bare LF line ends, stored as sent.
r = Raw()
r.login()
for data in (b"Subject: headers only\r\n", b"Subject: lf only\nFrom: a@example.com\n\nline1\nline2\n"):
    u, t = r.cmd("APPEND INBOX {%d+}\r\n%s" % (len(data), data.decode()))
    ok(" OK " in t, t)
r.cmd("LOGOUT")
m.noop()
text, lits = one("6", "(RFC822.SIZE BODY.PEEK[HEADER] BODY.PEEK[TEXT] BODYSTRUCTURE)")
eq(lits, [b"Subject: headers only\r\n", b""], "header-only message")
ok(b"RFC822.SIZE 23 " in text and b'"7BIT" 0 0 ' in text, text)
text, lits = one("7", "(RFC822.SIZE BODY.PEEK[HEADER] BODY.PEEK[TEXT] BODYSTRUCTURE)")
eq(lits, [b"Subject: lf only\nFrom: a@example.com\n\n", b"line1\nline2\n"], "bare LF message")
ok(b"RFC822.SIZE 50 " in text and b'"7BIT" 12 2 ' in text, text)

# Macros and UID FETCH.
text, _ = one("4", "FAST")
ok(all(k in text for k in (b"FLAGS (", b"INTERNALDATE ", b"RFC822.SIZE %d" % len(simple[2]))), text)
text, _ = one("4", "ALL")
ok(b"ENVELOPE (" in text and b"RFC822.SIZE" in text, text)
text, _ = one("4", "FULL")
ok(b"ENVELOPE (" in text and b"BODY (" in text, text)
typ, dat = m.uid("FETCH", "2:3", "(FLAGS)")
eq(dat, [b"2 (UID 2 FLAGS (\\Seen \\Recent))", b"3 (UID 3 FLAGS (\\Seen \\Recent))"], "UID FETCH")
typ, dat = m.uid("FETCH", "99", "(FLAGS)")
eq((typ, dat), ("OK", [None]), "UID FETCH of a missing UID")
try:
    m.fetch("9", "(FLAGS)")
    raise AssertionError("FETCH of a missing message number accepted")
except imaplib.IMAP4.error as e:
    ok("BAD" in str(e), str(e))
m.logout()
"#,
        &[],
    );
}

#[test]
fn store_copy_move_and_condstore() {
    let server = Server::start();
    let user = server.add_user("store");
    client(
        &server,
        &user,
        r#"
m = login()
for i in range(4):
    m.append("INBOX", None, None, message("s%d" % i, "<s%d@kit.test>" % i))
m.select("INBOX")

# STORE without CONDSTORE.
typ, dat, u = run(m, "STORE", "1", "+FLAGS", "(\\Flagged $Label1)")
eq(typ, "OK", "STORE +FLAGS")
eq([flagset(x) for x in u["FETCH"]], [{"\\Flagged", "$Label1"}], "+FLAGS")
ok(b"$Label1" in u["FLAGS"][0], "the new keyword is announced: %r" % u.get("FLAGS"))
typ, dat, u = run(m, "STORE", "1", "-FLAGS", "(\\Flagged)")
eq([flagset(x) for x in u["FETCH"]], [{"$Label1"}], "-FLAGS")
typ, dat, u = run(m, "STORE", "1", "FLAGS", "(\\Answered \\Draft)")
eq([flagset(x) for x in u["FETCH"]], [{"\\Answered", "\\Draft"}], "FLAGS")
typ, dat, u = run(m, "STORE", "2", "+FLAGS.SILENT", "(\\Seen)")
ok(typ == "OK" and "FETCH" not in u, "STORE .SILENT answered with %r" % u)
typ, dat, u = run(m, "UID", "STORE", "2", "+FLAGS", "($label2)")
ok(re.fullmatch(rb"2 \(FLAGS \(.*\) UID 2\)|2 \(UID 2 FLAGS \(.*\)\)", u["FETCH"][0]), u["FETCH"])
eq(flagset(u["FETCH"][0]), {"\\Seen", "$label2"}, "UID STORE")
typ, dat, u = run(m, "STORE", "2:3", "+FLAGS", "(\\Flagged)")
eq(sorted(x.split()[0] for x in u["FETCH"]), [b"2", b"3"], "a range")
for bad in (("9", "+FLAGS", "(\\Seen)"), ("1", "+FLAGS", "(\\Recent)")):
    try:
        m.store(*bad)
        raise AssertionError("STORE %r accepted" % (bad,))
    except imaplib.IMAP4.error as e:
        ok("BAD" in str(e), str(e))
typ, dat = m.search(None, "KEYWORD $Label1")
eq(dat, [b""], "$Label1 was removed by FLAGS")
typ, dat = m.search(None, "KEYWORD $label2")
eq(dat, [b"2"], "SEARCH KEYWORD")
m.logout()

# CONDSTORE (RFC 7162).
m = login()
typ, dat, u = run(m, "ENABLE", "CONDSTORE")
eq(u.get("ENABLED"), [b"CONDSTORE"], "ENABLE")
m.select("INBOX")
h0 = int(m.untagged_responses["HIGHESTMODSEQ"][0])
typ, dat = m.fetch("1:*", "(MODSEQ)")
modseq = {int(x.split()[0]): int(re.search(rb"MODSEQ \((\d+)\)", x).group(1)) for x in dat}
eq(sorted(modseq), [1, 2, 3, 4], "FETCH MODSEQ")
ok(max(modseq.values()) == h0, (modseq, h0))
typ, dat = m.store("4", "+FLAGS", "(\\Seen)")
m4 = int(re.search(rb"MODSEQ \((\d+)\)", dat[0]).group(1))
ok(m4 > h0 and flagset(dat[0]) == {"\\Seen"}, (dat, h0))
typ, dat, u = run(m, "FETCH", "1:*", "(FLAGS)", "(CHANGEDSINCE %d)" % h0)
eq(len(u.get("FETCH", [])), 1, "CHANGEDSINCE: %r" % u)
ok(u["FETCH"][0].startswith(b"4 (") and b"MODSEQ (%d)" % m4 in u["FETCH"][0], u["FETCH"])
typ, dat, u = run(m, "STORE", "1,4", "(UNCHANGEDSINCE %d)" % h0, "+FLAGS", "(\\Deleted)")
ok(typ == "OK" and b"[MODIFIED 4]" in dat[0], (typ, dat))
eq([x.split()[0] for x in u["FETCH"]], [b"1"], "only message 1 was changed")
ok(b"MODSEQ (" in u["FETCH"][0] and "\\Deleted" in flagset(u["FETCH"][0]), u["FETCH"])
eq(flagset(m.fetch("4", "(FLAGS)")[1][0]), {"\\Seen"}, "message 4 kept its flags")
typ, dat, u = run(m, "UID", "STORE", "4", "(UNCHANGEDSINCE %d)" % m4, "-FLAGS", "(\\Seen)")
ok(typ == "OK" and b"MODIFIED" not in dat[0] and len(u["FETCH"]) == 1, (dat, u))
typ, dat, u = run(m, "STORE", "3", "+FLAGS.SILENT", "(\\Answered)")
ok(len(u["FETCH"]) == 1 and re.fullmatch(rb"3 \(MODSEQ \(\d+\)\)", u["FETCH"][0]), u)
last = int(re.search(rb"MODSEQ \((\d+)\)", u["FETCH"][0]).group(1))
typ, dat = m.search(None, "MODSEQ %d" % (m4 + 1))
ok(re.fullmatch(rb"1 3 4 \(MODSEQ %d\)" % last, dat[0]), dat)
eq(status(m, "INBOX", "(HIGHESTMODSEQ)"), {"HIGHESTMODSEQ": last}, "STATUS HIGHESTMODSEQ")
# Undo the \Deleted on 1 for the next part.
m.store("1", "-FLAGS.SILENT", "(\\Deleted)")
m.logout()
"#,
        &[],
    );

    // COPY and MOVE share the stored message: no new blob.
    let blobs = server.count("SELECT count(*) FROM blobs");
    assert_eq!(blobs, 4);
    client(
        &server,
        &user,
        r#"
def expand(s):
    out = []
    for part in s.split(b","):
        a, _, b = part.partition(b":")
        out += list(range(int(a), int(b or a) + 1))
    return out

m = login()
m.select("INBOX")
va = status(m, "Archive")["UIDVALIDITY"]
source_flags = [flagset(x) for x in m.fetch("1:2", "(FLAGS)")[1]]
typ, dat = m.copy("1:2", "Archive")
c = re.search(rb"\[COPYUID (\d+) ([\d:,]+) ([\d:,]+)\]", dat[0])
ok(typ == "OK" and c, (typ, dat))
eq((int(c.group(1)), expand(c.group(2)), expand(c.group(3))), (va, [1, 2], [1, 2]), "COPYUID")
typ, dat = m.copy("1", "Nowhere")
ok(typ == "NO" and b"[TRYCREATE]" in dat[0], (typ, dat))
typ, dat, u = run(m, "MOVE", "3", "Archive")
eq((typ, u.get("COPYUID"), u.get("EXPUNGE")), ("OK", [b"%d 3 3" % va], [b"3"]), "MOVE")
typ, dat, u = run(m, "UID", "MOVE", "4", "Archive")
eq((typ, u.get("COPYUID"), u.get("EXPUNGE")), ("OK", [b"%d 4 4" % va], [b"3"]), "UID MOVE")
typ, dat, u = run(m, "UID", "COPY", "1:2", "Archive")
c = re.search(rb"\[COPYUID (\d+) ([\d:,]+) ([\d:,]+)\]", dat[0])
eq((expand(c.group(2)), expand(c.group(3))), ([1, 2], [5, 6]), "UID COPY")
eq(status(m, "INBOX", "(MESSAGES)"), {"MESSAGES": 2}, "INBOX after MOVE")
eq(status(m, "Archive", "(MESSAGES)"), {"MESSAGES": 6}, "Archive")
m.select("Archive")
eq([flagset(x) for x in m.fetch("1:2", "(FLAGS)")[1]], source_flags, "COPY keeps flags")
typ, dat = m.fetch("1:*", "(BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])")
ids = [d[1].strip() for d in dat if isinstance(d, tuple)]
eq(ids, [b"Message-ID: <s%d@kit.test>" % i for i in (0, 1, 2, 3, 0, 1)], "Archive's messages")
m.logout()
"#,
        &[],
    );
    assert_eq!(server.count("SELECT count(*) FROM blobs"), blobs);
}

#[test]
fn search_keys_charsets_and_esearch() {
    let server = Server::start();
    let user = server.add_user("search");
    client(
        &server,
        &user,
        r#"
alice = "Alice Example <alice@example.com>"
multipart = ("MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=zz\r\n",
             "--zz\r\nContent-Type: text/plain\r\n\r\nhidden treasure\r\n--zz\r\n"
             "Content-Type: text/html\r\n\r\n<p>hidden treasure</p>\r\n--zz--\r\n")
M = [
    ("(\\Seen)", "01-Jan-2024 12:00:00 +0000",
     message("Quarterly report", "<q@kit.test>", frm=alice, to="Bob <bob@example.org>",
             date="Mon, 01 Jan 2024 12:00:00 +0000", body="The numbers are up.\r\n")),
    ("(\\Flagged)", "15-Feb-2024 12:00:00 +0000",
     message("Lunch plans", "<l@kit.test>", frm="carol@example.net", to="dave@example.org",
             date="Thu, 15 Feb 2024 12:00:00 +0000", body="Pizza at noon?\r\n", headers="X-Priority: 1\r\n")),
    ("($Label1)", "10-Mar-2024 12:00:00 +0000",
     message("=?UTF-8?B?R3LDvMOfZSBhdXMgS8O2bG4=?=", "<g@kit.test>", frm=alice, to="Bob <bob@example.org>",
             date="Sun, 10 Mar 2024 12:00:00 +0000", body="Straße und Brücke\r\n".encode(),
             headers="Cc: erin@example.org\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Transfer-Encoding: 8bit\r\n")),
    ("(\\Deleted \\Answered)", "20-Mar-2024 12:00:00 +0000",
     message("big attachment", "<b@kit.test>", frm="bob@example.org",
             date="Wed, 20 Mar 2024 12:00:00 +0000", body=("x" * 70 + "\r\n") * 300)),
    ("(\\Draft)", "25-Mar-2024 12:00:00 +0000",
     message("report draft", "<d@kit.test>", frm="dave@example.org",
             date="Mon, 25 Mar 2024 12:00:00 +0000", headers=multipart[0], body=multipart[1])),
]
m = login()
# A first message, expunged, so that UIDs (2..6) differ from message numbers (1..5).
m.append("INBOX", "(\\Deleted)", None, message("gone", "<gone@kit.test>"))
m.select("INBOX")
m.expunge()
for flags, date, msg in M:
    eq(m.append("INBOX", flags, '"%s"' % date, msg)[0], "OK", "APPEND")
m.noop()

checks = [
    ("ALL", [1, 2, 3, 4, 5]),
    ("FROM alice", [1, 3]),
    ('FROM "Alice Example"', [1, 3]),
    ("FROM example.net", [2]),
    ("TO bob", [1, 3]),
    ("CC erin", [3]),
    ("SUBJECT report", [1, 5]),
    ("SUBJECT REPORT", [1, 5]),
    ("TEXT pizza", [2]),
    ("TEXT carol", [2]),
    ("BODY pizza", [2]),
    ("BODY carol", []),
    ("BODY treasure", [5]),
    ("HEADER X-Priority 1", [2]),
    ('HEADER X-Priority ""', [2]),
    ("HEADER Message-ID <b@kit.test>", [4]),
    ("SINCE 1-Mar-2024", [3, 4, 5]),
    ("BEFORE 1-Mar-2024", [1, 2]),
    ("ON 15-Feb-2024", [2]),
    ("SENTSINCE 1-Mar-2024", [3, 4, 5]),
    ("SENTBEFORE 1-Feb-2024", [1]),
    ("SENTON 15-Feb-2024", [2]),
    ("LARGER 10000", [4]),
    ("SMALLER 10000", [1, 2, 3, 5]),
    ("SEEN", [1]),
    ("UNSEEN", [2, 3, 4, 5]),
    ("FLAGGED", [2]),
    ("UNFLAGGED", [1, 3, 4, 5]),
    ("DELETED", [4]),
    ("UNDELETED", [1, 2, 3, 5]),
    ("ANSWERED", [4]),
    ("UNANSWERED", [1, 2, 3, 5]),
    ("DRAFT", [5]),
    ("UNDRAFT", [1, 2, 3, 4]),
    ("KEYWORD $Label1", [3]),
    ("UNKEYWORD $Label1", [1, 2, 4, 5]),
    # This session took the five as recent when it caught up after APPEND.
    ("NEW", [2, 3, 4, 5]),
    ("RECENT", [1, 2, 3, 4, 5]),
    ("OLD", []),
    ("2:4", [2, 3, 4]),
    ("4:*", [4, 5]),
    ("UID 3:4", [2, 3]),
    ("UID 1,6:*", [5]),
    ("OR FROM carol SUBJECT big", [2, 4]),
    ("NOT FROM alice", [2, 4, 5]),
    ("FROM alice SEEN", [1]),
    ("OR (FROM carol) (SEEN FROM alice)", [1, 2]),
    ("NOT (OR FLAGGED DELETED)", [1, 3, 5]),
    ("1:* UNSEEN SMALLER 10000", [2, 3, 5]),
]
for q, want in checks:
    typ, dat = m.search(None, q)
    eq((typ, [int(x) for x in dat[0].split()]), ("OK", want), "SEARCH " + q)
typ, dat = m.uid("SEARCH", "FROM alice")
eq(dat, [b"2 4"], "UID SEARCH FROM alice")
typ, dat = m.uid("SEARCH", "UID 2:3")
eq(dat, [b"2 3"], "UID SEARCH UID 2:3")

# CHARSET: UTF-8 strings in literals, and an unknown charset.
m.literal = "Brücke".encode()
eq(m.search("UTF-8", "BODY"), ("OK", [b"3"]), "CHARSET UTF-8 BODY Brücke")
m.literal = "Köln".encode()
eq(m.search("UTF-8", "SUBJECT"), ("OK", [b"3"]), "CHARSET UTF-8 SUBJECT Köln (RFC 2047 encoded word)")
eq(m.search("UTF-8", "SUBJECT", "plans"), ("OK", [b"2"]), "CHARSET UTF-8 with ASCII")
eq(m.search("US-ASCII", "SUBJECT", "plans"), ("OK", [b"2"]), "CHARSET US-ASCII")
typ, dat = m.search("X-UNKNOWN", "ALL")
ok(typ == "NO" and b"[BADCHARSET" in dat[0], (typ, dat))
# A number past the end matches nothing, as in Dovecot.
eq(m.search(None, "9"), ("OK", [b""]), "SEARCH 9")
for bad in ("FROM", "FROBNICATE x"):
    try:
        m.search(None, bad)
        raise AssertionError("SEARCH %s accepted" % bad)
    except imaplib.IMAP4.error as e:
        ok("BAD" in str(e), str(e))

# Strings are found through RFC 2047 words, base64, quoted-printable and
# other charsets.
m.create("Encoded")
for msg in [
    b"Subject: =?ISO-8859-1?Q?K=F6ln_am_Rhein?=\r\nMIME-Version: 1.0\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n"
    + base64.encodebytes("Die Brücke über den Fluss\r\n".encode()).replace(b"\n", b"\r\n"),
    b"Subject: qp\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=iso-8859-1\r\n"
    b"Content-Transfer-Encoding: quoted-printable\r\n\r\nStra=DFe und Gr=FC=DFe\r\n",
]:
    m.append("Encoded", None, None, msg)
m.select("Encoded")
for key, text, want in [("SUBJECT", "Köln", [b"1"]), ("SUBJECT", "Rhein", [b"1"]), ("BODY", "Brücke", [b"1"]),
                        ("BODY", "Straße", [b"2"]), ("TEXT", "Grüße", [b"2"]), ("BODY", "RGllIEJy", [b""]),
                        # Substrings (RFC 3501 §6.4.4): inside words, across them,
                        # punctuation as written, diacritics folded.
                        ("BODY", "rück", [b"1"]), ("BODY", "CKE ÜBER D", [b"1"]), ("BODY", "brucke", [b"1"]),
                        ("TEXT", "ße und Grü", [b"2"]), ("TEXT", "n am Rh", [b"1"]), ("BODY", "Brücke,", [b""]),
                        ("BODY", "über Fluss", [b""])]:
    m.literal = text.encode()
    eq(m.search("UTF-8", key), ("OK", want), "SEARCH CHARSET UTF-8 %s %s" % (key, text))
m.select("INBOX")

# ESEARCH (RFC 4731).
def esearch(*args):
    typ, dat, u = run(m, *args)
    eq(typ, "OK", args)
    eq(len(u.get("ESEARCH", [])), 1, "one ESEARCH for %r: %r" % (args, u))
    line = u["ESEARCH"][0]
    tag = re.match(rb'\(TAG "([^"]+)"\)', line)
    ok(tag and tag.group(1).decode() == "%s%d" % (m.tagpre.decode(), m.tagnum - 1), "tag of %r" % line)
    words = line[tag.end():].split()
    uid = bool(words) and words[0] == b"UID"
    words = words[1:] if uid else words
    return uid, {words[i].decode(): words[i + 1].decode() for i in range(0, len(words), 2)}

eq(esearch("SEARCH", "RETURN (MIN MAX COUNT ALL)", "FROM", "alice"),
   (False, {"MIN": "1", "MAX": "3", "ALL": "1,3", "COUNT": "2"}), "ESEARCH FROM alice")
eq(esearch("UID", "SEARCH", "RETURN (COUNT MIN)", "ALL"), (True, {"MIN": "2", "COUNT": "5"}), "UID ESEARCH")
eq(esearch("SEARCH", "RETURN ()", "UNDELETED"), (False, {"ALL": "1:3,5"}), "RETURN ()")
eq(esearch("SEARCH", "RETURN (MIN MAX COUNT)", "SUBJECT", "nothing-matches"), (False, {"COUNT": "0"}), "empty")
m.logout()
"#,
        &[],
    );
}

/// Binary data APPENDed as a literal8 (RFC 3516) is stored with its parts
/// base64-encoded: BODY[...] answers ordinary literals without a NUL, and
/// BINARY[...] gives back the bytes sent. A NUL in an ordinary literal is
/// refused, and nothing is stored. A NUL that came by SMTP goes out in
/// BODY[...] as 0x80.
#[test]
fn binary_appends_come_back_encoded_in_body_and_whole_in_binary() {
    let server = Server::start();
    let user = server.add_user("binary");
    client(
        &server,
        &user,
        r#"
r = Raw()
r.login()
r.cmd("SELECT INBOX")

def append(data, announce):
    tag = r.tag()
    r.send("%s APPEND INBOX %s\r\n" % (tag, announce % len(data)))
    if not announce.endswith("+}"):
        line = r.read()
        ok(line.startswith("+"), line)
    r.send(data + b"\r\n")
    return r.finish(tag)

plain = b"From: a@example.org\r\nSubject: nul\r\n\r\nhello\x00world\r\nsecond line\r\n"
u, t = append(plain, "~{%d}")
ok(t.split()[1] == "OK", t)

attachment = bytes(range(256)) * 3 + b"\r\n--not-a-boundary\r\n\x00"
multipart = (b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"sep\"\r\n\r\n"
             b"--sep\r\nContent-Type: text/plain\r\n\r\nsee the attachment\r\n"
             b"--sep\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\n\r\n"
             + attachment + b"\r\n--sep--\r\n")
u, t = append(multipart, "~{%d+}")
ok(t.split()[1] == "OK", t)

# An ordinary literal cannot carry a NUL: refused, nothing stored.
u, t = append(b"Subject: raw\r\n\r\nnul\x00here\r\n", "{%d}")
ok(t.split()[1] == "BAD", t)
u, t = r.cmd("STATUS INBOX (MESSAGES)")
ok(any("MESSAGES 2" in x for x in u), u)

def fetched(seq, item):
    u, t = r.cmd("FETCH %d %s" % (seq, item))
    ok(t.split()[1] == "OK", t)
    return "\n".join(u)

# BODY[]: an ordinary literal, no NUL, the body base64 of what was sent.
whole = fetched(1, "BODY.PEEK[]")
ok("BODY[] {" in whole and "~{" not in whole and "\x00" not in whole, repr(whole))
ok("Content-Transfer-Encoding: base64" in whole and "MIME-Version: 1.0" in whole, whole)
encoded = whole.split("\r\n\r\n", 1)[1].rsplit(")", 1)[0]
eq(base64.b64decode(encoded), b"hello\x00world\r\nsecond line\r\n", "decoded body")
# BINARY[1]: the bytes sent, as a literal8.
binary = fetched(1, "BINARY.PEEK[1]")
ok("BINARY[1] ~{" in binary, repr(binary))
ok(binary.encode("latin-1").find(b"hello\x00world\r\nsecond line\r\n") > 0, repr(binary))

body2 = fetched(2, "BODY.PEEK[2]")
ok("\x00" not in body2 and "~{" not in body2, repr(body2))
structure = fetched(2, "BODYSTRUCTURE")
ok('"BASE64"' in structure.upper(), structure)
binary2 = fetched(2, "BINARY.PEEK[2]")
ok(("BINARY[2] ~{%d}" % len(attachment)) in binary2, repr(binary2[:80]))
ok(attachment in binary2.encode("latin-1"), "attachment bytes differ")
# The text part is base64 too (a literal8 may hold NULs anywhere); its
# decoded text is the same.
ok(base64.b64encode(b"see the attachment").decode() in fetched(2, "BODY.PEEK[1]"), "text part")
eq(fetched(2, "BINARY.PEEK[1]").count("see the attachment"), 1, "decoded text part")

# A NUL that came by SMTP is stored as it came; an ordinary literal shows
# it as 0x80 (same length), BINARY gives the NUL in a literal8.
deliver([b"From: a@example.org\r\nSubject: smtp nul\r\n\r\nvia\x00smtp\r\n"])
r.cmd("NOOP")
whole = fetched(3, "(RFC822.SIZE BODY.PEEK[])")
ok("\x00" not in whole and "via\x80smtp" in whole, repr(whole))
size = int(re.search(r"RFC822\.SIZE (\d+)", whole).group(1))
ok(("BODY[] {%d}" % size) in whole, whole)
ok("BINARY[1] ~{10}\r\nvia\x00smtp\r\n" in fetched(3, "BINARY.PEEK[1]"), "BINARY of the SMTP NUL")
r.cmd("LOGOUT")
print("done")
"#,
        &[],
    );
}

/// Mail in Chinese, Japanese and Thai, written without spaces between
/// words and sent in the charsets such mail still uses, is found by any
/// substring of its body and subject: each is decoded to Unicode and its
/// characters indexed one by one.
#[test]
fn search_finds_substrings_of_text_without_spaces_in_any_charset() {
    let server = Server::start();
    let user = server.add_user("cjk");
    let out = python(
        r#"
import base64, imaplib, smtplib, sys
smtp_addr, imap_addr, user, password = sys.argv[1:5]

def header_word(text, charset):
    return "=?%s?B?%s?=" % (charset, base64.b64encode(text.encode(charset)).decode())

def message(subject, body, charset, cte):
    raw = body.encode(charset)
    if cte == "base64":
        raw = base64.encodebytes(raw)
    head = ("From: sender@example.net\r\nTo: %s\r\nSubject: %s\r\nMIME-Version: 1.0\r\n"
            "Content-Type: text/plain; charset=%s\r\nContent-Transfer-Encoding: %s\r\n\r\n"
            % (user, header_word(subject, charset), charset, cte))
    return head.encode() + raw.replace(b"\n", b"\r\n").replace(b"\r\r\n", b"\r\n") + b"\r\n"

MAIL = [
    ("会議の議事録", "来週の会議は日本語のテキストで書きます。", "utf-8", "8bit"),
    ("東京出張の予定", "東京へ出張します。新幹線のきっぷを予約しました。", "iso-2022-jp", "7bit"),
    ("季度报告", "这是中文邮件的正文，关于季度报告。", "gb2312", "base64"),
    ("會議通知", "這是繁體中文郵件，請準時參加會議。", "big5", "base64"),
    ("ประชุมประจำสัปดาห์", "สวัสดีครับ ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ", "tis-620", "8bit"),
    ("รายงาน", "ขอบคุณมากครับ", "utf-8", "base64"),
]
host, port = smtp_addr.rsplit(":", 1)
with smtplib.SMTP(host, int(port)) as s:
    for mail in MAIL:
        s.sendmail("sender@example.net", [user], message(*mail))

host, port = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(host, int(port))
m.login(user, password)
m.select("INBOX")

def search(key, needle):
    m.literal = needle.encode("utf-8")
    typ, data = m.uid("SEARCH", "CHARSET", "UTF-8", key)
    assert typ == "OK", (typ, data)
    return sorted(int(u) for u in data[0].split())

WANT = [
    ("BODY", "日本語", [1]), ("BODY", "本語のテ", [1]), ("BODY", "会議", [1]),
    ("BODY", "新幹線", [2]), ("BODY", "出張", [2]), ("SUBJECT", "出張", [2]),
    ("BODY", "中文", [3, 4]), ("BODY", "邮件", [3]), ("BODY", "郵件", [4]),
    ("BODY", "會議", [4]), ("SUBJECT", "报告", [3]), ("SUBJECT", "通知", [4]),
    ("BODY", "ภาษาไทย", [5]), ("BODY", "เว้นวรรค", [5]), ("SUBJECT", "สัปดาห์", [5]),
    ("TEXT", "ประจำ", [5]), ("BODY", "ขอบคุณ", [6]), ("TEXT", "議事録", [1]),
    ("TEXT", "รายงาน", [6]),
    # The same characters in another order, or a Thai consonant without
    # its vowel mark, are no match.
    ("BODY", "語日本", []), ("BODY", "สวสด", []), ("SUBJECT", "議会", []),
]
for key, needle, want in WANT:
    got = search(key, needle)
    assert got == want, (key, needle, got, want)
print("searched", len(WANT))
"#,
        &[
            &server.smtp.to_string(),
            &server.imap.to_string(),
            &user,
            PASSWORD,
        ],
    );
    assert_eq!(out.trim(), "searched 22", "{}", log_tail(&server));
}

#[test]
fn idle_sees_delivery_flag_changes_and_expunges() {
    let server = Server::start();
    let user = server.add_user("idler");
    client(
        &server,
        &user,
        r#"
r = Raw()
r.login()
u, t = r.cmd("SELECT INBOX")
ok(" OK " in t, t)

def within_a_second(what):
    r.sock.settimeout(1.0)
    try:
        while True:
            line = r.read()
            if re.match(what, line):
                return line
            ok(re.fullmatch(r"\* \d+ RECENT", line) or line.startswith("* ") and " FETCH " in line,
               "unexpected while idling: %r" % line)
    except socket.timeout:
        raise AssertionError("no %r within 1 s" % what)
    finally:
        r.sock.settimeout(30)

r.send("i1 IDLE\r\n")
ok(r.read().startswith("+ "), "continuation for IDLE")
deliver([message("while idling", "<idle@kit.test>")])
within_a_second(r"\* 1 EXISTS$")
other = login()
other.select("INBOX")
other.store("1", "+FLAGS", "(\\Flagged)")
line = within_a_second(r"\* 1 FETCH ")
eq(flagset(line.encode()), {"\\Flagged"}, "flags pushed during IDLE")
other.store("1", "+FLAGS", "(\\Deleted)")
other.expunge()
within_a_second(r"\* 1 EXPUNGE$")
# DONE in two pieces with a change between them.
r.send("DO")
deliver([message("second", "<idle-2@kit.test>")])
within_a_second(r"\* 1 EXISTS$")
r.send("NE\r\n")
u, line = r.finish("i1")
ok(line.startswith("i1 OK") and all(re.fullmatch(r"\* \d+ RECENT", l) for l in u), (u, line))
u, t = r.cmd("NOOP")
ok(" OK " in t and not u, (u, t))

# IDLE with no mailbox selected, and a wrong end.
r.cmd("UNSELECT")
r.send("i2 IDLE\r\n")
ok(r.read().startswith("+ "), "continuation for IDLE")
r.send("DONE\r\n")
ok(r.read().startswith("i2 OK"), "IDLE in the authenticated state")
r.send("i3 IDLE\r\n")
ok(r.read().startswith("+ "), "continuation for IDLE")
r.send("STOP\r\n")
ok(r.read().startswith("i3 BAD"), "IDLE ended by something else than DONE")
u, t = r.cmd("NOOP")
ok(" OK " in t, t)
other.logout()
"#,
        &[],
    );
}

#[test]
fn literals_limits_toobig_and_long_commands() {
    let server = Server::start_with("[imap]\nmax_message_bytes = 1000\n");
    let user = server.add_user("limits");
    client(
        &server,
        &user,
        r#"
r = Raw()
# LITERAL+: no continuation requests.
tag = r.tag()
r.send("%s LOGIN {%d+}\r\n%s {%d+}\r\n%s\r\n" % (tag, len(USER), USER, len(PASS), PASS))
u, t = r.finish(tag)
ok(t.startswith(tag + " OK") and not [x for x in u if x.startswith("+")], (u, t))
# A synchronising literal gets one.
tag = r.tag()
r.send(tag + " SELECT {5}\r\n")
ok(r.read().startswith("+ "), "continuation for a synchronising literal")
r.send("INBOX\r\n")
u, t = r.finish(tag)
ok(t.startswith(tag + " OK"), t)

def fill(n):
    head = message("limit", "<limit-%d@kit.test>" % n, body="")
    return head + b"x" * (n - len(head) - 2) + b"\r\n"

# Too big, synchronising: refused before the data is sent.
tag = r.tag()
r.send(tag + " APPEND INBOX {1001}\r\n")
line = r.read()
ok(line.startswith(tag + " NO [TOOBIG]"), "expected NO [TOOBIG] and no continuation, got %r" % line)
u, t = r.cmd("NOOP")
ok(" OK " in t, t)
# Too big, non-synchronising: the data is read and dropped.
tag = r.tag()
r.send(tag.encode() + b" APPEND INBOX {2000+}\r\n" + b"x" * 2000 + b"\r\n")
u, t = r.finish(tag)
ok(t.startswith(tag + " NO [TOOBIG]"), t)
u, t = r.cmd("NOOP")
ok(" OK " in t, t)
# At the limit, both kinds.
msg = fill(1000)
tag = r.tag()
r.send(tag + " APPEND INBOX (\\Seen) {1000}\r\n")
ok(r.read().startswith("+ "), "continuation for a message within the limit")
r.send(msg + b"\r\n")
u, t = r.finish(tag)
ok(t.startswith(tag + " OK [APPENDUID "), t)
small = message("small", "<small@kit.test>")
tag = r.tag()
r.send(tag.encode() + b" APPEND INBOX {%d+}\r\n" % len(small) + small + b"\r\n")
u, t = r.finish(tag)
ok(t.startswith(tag + " OK [APPENDUID ") and not [x for x in u if x.startswith("+")], (u, t))
# A missing mailbox with LITERAL+: the data is drained, then TRYCREATE.
tag = r.tag()
r.send(tag.encode() + b" APPEND Nowhere {%d+}\r\n" % len(small) + small + b"\r\n")
u, t = r.finish(tag)
ok(t.startswith(tag + " NO [TRYCREATE]"), t)
# A command longer than max_command_bytes.
u, t = r.cmd("NOOP " + "x" * 70000)
eq(t.split()[:2], ["r%d" % r.n, "BAD"], "a command over max_command_bytes")
u, t = r.cmd("NOOP")
ok(" OK " in t, t)
# A literal that would make a command too long is refused, not invited.
tag = r.tag()
r.send(tag + " SEARCH TEXT {100000}\r\n")
line = r.read()
ok(line.startswith(tag + " NO") or line.startswith(tag + " BAD"), "expected a refusal, got %r" % line)
u, t = r.cmd("NOOP")
ok(" OK " in t, t)
# Literals in other commands, both kinds.
tag = r.tag()
r.send(tag + " SEARCH SUBJECT {5+}\r\nsmall\r\n")
u, t = r.finish(tag)
ok(t.startswith(tag + " OK") and "* SEARCH 2" in u, (u, t))
tag = r.tag()
r.send(tag + " FETCH 1 (BODY.PEEK[HEADER.FIELDS ({7}\r\n")
ok(r.read().startswith("+ "), "continuation inside FETCH")
r.send("SUBJECT)])\r\n")
u, t = r.finish(tag)
ok(t.startswith(tag + " OK") and "Subject: limit" in u[0], (u, t))
u, t = r.cmd("STATUS INBOX (MESSAGES)")
ok(u == ["* STATUS INBOX (MESSAGES 2)"], u)
# Pipelined commands, answered in order.
tags = [r.tag() for _ in range(4)]
r.send("%s NOOP\r\n%s UID SEARCH ALL\r\n%s FETCH 2 (UID)\r\n%s CHECK\r\n" % tuple(tags))
got = [r.finish(tag) for tag in tags]
ok([t.split()[1] for _, t in got] == ["OK"] * 4, got)
eq((got[1][0], got[2][0]), (["* SEARCH 1 2"], ["* 2 FETCH (UID 2)"]), "pipelined answers")
r.cmd("LOGOUT")
"#,
        &[],
    );
}

/// Samples the server's resident memory until stopped; `peak` holds the
/// highest value since it was last reset.
fn sample_rss(server: &Server, stop: &AtomicBool, peak: &AtomicU64) {
    while !stop.load(Ordering::Relaxed) {
        peak.fetch_max(server.rss_kb(), Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_fifty_megabyte_append_streams_and_reads_back_intact() {
    use std::io::{BufRead, BufReader, Write};
    let server = Server::start();
    let user = server.add_user("big");
    let script = format!(
        "{CLIENT}\n{}",
        r#"
m = login()
line = b"0123456789" * 7 + b"abcdef\r\n"
msg = message("fifty megabytes", "<big@kit.test>", body=b"") + line * (50_000_000 // len(line))
digest = hashlib.sha256(msg).hexdigest()
print("ready", flush=True)
sys.stdin.readline()
typ, dat = m.append("INBOX", None, None, msg)
ok(typ == "OK" and b"[APPENDUID " in dat[0], (typ, dat))
print("appended", len(msg), digest, flush=True)
sys.stdin.readline()
m.select("INBOX", readonly=True)
typ, dat = m.fetch("1", "(RFC822.SIZE BODY.PEEK[])")
ok(typ == "OK" and b"RFC822.SIZE %d" % len(msg) in dat[0][0], dat[0][0])
print("fetched", len(dat[0][1]), hashlib.sha256(dat[0][1]).hexdigest(), flush=True)
m.logout()
"#
    );
    let stop = AtomicBool::new(false);
    let peak = AtomicU64::new(0);
    let (baseline, appended, fetched, append_peak, fetch_peak) = std::thread::scope(|s| {
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(&script)
            .args(client_args(&server, &user, &[]))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 must be installed");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut stdin = child.stdin.take().unwrap();
        // The baseline is taken once the session is logged in (password
        // hashing has its own, passing, memory cost).
        let mut ready = String::new();
        stdout.read_line(&mut ready).unwrap();
        assert_eq!(ready.trim(), "ready", "{}", log_tail(&server));
        let baseline = server.rss_kb();
        s.spawn(|| sample_rss(&server, &stop, &peak));
        stdin.write_all(b"go\n").unwrap();
        let mut appended = String::new();
        stdout.read_line(&mut appended).unwrap();
        let append_peak = peak.swap(0, Ordering::Relaxed);
        stdin.write_all(b"go\n").unwrap();
        let mut fetched = String::new();
        stdout.read_line(&mut fetched).unwrap();
        let fetch_peak = peak.load(Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        let status = child.wait().unwrap();
        assert!(status.success(), "client failed\n{}", log_tail(&server));
        (baseline, appended, fetched, append_peak, fetch_peak)
    });
    let sent: Vec<&str> = appended.split_whitespace().collect();
    let got: Vec<&str> = fetched.split_whitespace().collect();
    assert_eq!(sent.first(), Some(&"appended"), "{appended}");
    assert_eq!(got.first(), Some(&"fetched"), "{fetched}");
    assert_eq!(sent[1..], got[1..], "size and SHA-256 read back");
    let append_mb = append_peak.saturating_sub(baseline) / 1024;
    let fetch_mb = fetch_peak.saturating_sub(baseline) / 1024;
    assert!(
        append_mb < 24,
        "server memory grew by {append_mb} MB during a 50 MB APPEND"
    );
    assert!(
        fetch_mb < 24,
        "server memory grew by {fetch_mb} MB during a 50 MB FETCH"
    );
    assert!(server.count("SELECT count(*) FROM blob_chunks") > 100);
}

/// Runs a client program with HOME set to `home`; fails the test with
/// its output and the server's log if it fails.
fn run_tool(server: &Server, home: &Path, program: &str, args: &[&str]) -> Output {
    let out = Command::new(program)
        .args(args)
        .env("HOME", home)
        .env("FETCHMAILHOME", home)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{program} must be installed (.ci/run does it): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}):\n{}\n{}\n--- server log ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        log_tail(server)
    );
    out
}

/// The messages of a Maildir folder (`cur` and `new`), sorted.
fn maildir_files(folder: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["cur", "new"]
        .iter()
        .flat_map(|sub| std::fs::read_dir(folder.join(sub)).unwrap())
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// Renames a Maildir message into `cur` with `flag` added to its info.
fn add_maildir_flag(file: &Path, flag: char) -> PathBuf {
    let name = file.file_name().unwrap().to_str().unwrap();
    let (base, flags) = name.split_once(":2,").unwrap_or((name, ""));
    let mut flags: Vec<char> = flags.chars().chain([flag]).collect();
    flags.sort_unstable();
    flags.dedup();
    let flags: String = flags.into_iter().collect();
    let to = file
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("cur")
        .join(format!("{base}:2,{flags}"));
    std::fs::rename(file, &to).unwrap();
    to
}

#[test]
fn mbsync_syncs_a_mailbox_down_and_changes_back_up() {
    let server = Server::start();
    let user = server.add_user("mbsync");
    client(
        &server,
        &user,
        r#"deliver([message("mbsync %d" % i, "<mbsync-%d@kit.test>" % i) for i in range(600)])"#,
        &[],
    );
    let home = tempfile::tempdir().unwrap();
    let mail = home.path().join("Mail");
    std::fs::create_dir(&mail).unwrap();
    let config = format!(
        "IMAPAccount sluice\nHost 127.0.0.1\nPort {port}\nUser {user}\nPass \"{PASSWORD}\"\n\
         SSLType None\nAuthMechs LOGIN\nTimeout 30\n\n\
         IMAPStore sluice-far\nAccount sluice\n\n\
         MaildirStore sluice-near\nPath {mail}/\nInbox {mail}/INBOX\nSubFolders Verbatim\n\n\
         Channel inbox\nFar :sluice-far:INBOX\nNear :sluice-near:INBOX\nCreate Near\n\
         Sync All\nExpunge Both\nSyncState *\n",
        port = server.imap.port(),
        mail = mail.display(),
    );
    let rc = home.path().join("mbsyncrc");
    std::fs::write(&rc, config).unwrap();
    let rc = rc.to_str().unwrap();
    let inbox = mail.join("INBOX");
    let sync = || run_tool(&server, home.path(), "mbsync", &["-c", rc, "-a"]);
    // The server's counters, every message's identity (one FETCH across
    // more than one batch of the server's), and the flags of a few.
    let check = r#"
m = login()
s = status(m, "INBOX", "(MESSAGES UIDNEXT HIGHESTMODSEQ)")
m.select("INBOX", readonly=True)
typ, dat = m.fetch("1:*", "(UID BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])")
ids = [(int(re.search(rb"UID (\d+)", d[0]).group(1)), d[1].strip()) for d in dat if isinstance(d, tuple)]
eq(len(ids), s["MESSAGES"], "messages fetched")
eq(sorted(ids), ids, "FETCH answers in order")
eq(len(set(i for _, i in ids)), len(ids), "distinct messages")
found = {}
for n in ARGS:
    typ, dat = m.search(None, "HEADER Message-ID <mbsync-%s@kit.test>" % n)
    hits = dat[0].split()
    found[n] = sorted(flagset(m.fetch(hits[0], "(FLAGS)")[1][0])) if len(hits) == 1 else len(hits) or "gone"
print(s, found)
"#;
    let server_state = || client(&server, &user, check, &["10", "11", "20", "30"]);

    sync();
    let files = maildir_files(&inbox);
    assert_eq!(files.len(), 600, "messages synced down");
    // A second sync has nothing to do: no change on either side.
    let before = server_state();
    sync();
    assert_eq!(server_state(), before, "the server changed");
    assert_eq!(maildir_files(&inbox), files, "the Maildir changed");
    let find = |files: &[PathBuf], n: u32| -> Option<PathBuf> {
        let id = format!("Message-ID: <mbsync-{n}@kit.test>");
        files
            .iter()
            .find(|f| std::fs::read_to_string(f).unwrap().contains(&id))
            .cloned()
    };
    let text = std::fs::read_to_string(find(&files, 7).unwrap()).unwrap();
    assert!(text.contains("Subject: mbsync 7") && text.contains("Hello."));

    // Read one, trash one, delete one; sync back up.
    add_maildir_flag(&find(&maildir_files(&inbox), 10).unwrap(), 'S');
    add_maildir_flag(&find(&maildir_files(&inbox), 20).unwrap(), 'T');
    std::fs::remove_file(find(&maildir_files(&inbox), 30).unwrap()).unwrap();
    sync();
    let files = maildir_files(&inbox);
    assert_eq!(files.len(), 598, "near side after syncing back");
    assert!(
        find(&files, 20).is_none(),
        "the trashed message was expunged"
    );

    let after = server_state();
    assert!(after.contains("'MESSAGES': 598"), "{after}");
    assert!(
        after.contains("{'10': ['\\\\Seen'], '11': [], '20': 'gone', '30': 'gone'}"),
        "{after}"
    );
    assert_eq!(server.count("SELECT count(*) FROM messages"), 598);

    // And again nothing to do.
    sync();
    assert_eq!(server_state(), after, "the server changed");
    assert_eq!(maildir_files(&inbox), files, "the Maildir changed");
}

/// Removes the `Received:` field fetchmail adds to each message's header
/// (it puts it under a `Return-Path:` it moves to the top).
fn without_fetchmail_trace(message: &[u8]) -> Vec<u8> {
    let header_end = message
        .windows(2)
        .position(|w| w == b"\n\n")
        .expect("a header");
    // Fields with their continuation lines.
    let mut fields: Vec<Vec<u8>> = Vec::new();
    for line in message[..header_end + 1].split_inclusive(|&b| b == b'\n') {
        match (line.first(), fields.last_mut()) {
            (Some(b' ' | b'\t'), Some(field)) => field.extend_from_slice(line),
            _ => fields.push(line.to_vec()),
        }
    }
    let before = fields.len();
    fields.retain(|f| !(f.starts_with(b"Received: ") && f.windows(10).any(|w| w == b"fetchmail-")));
    assert_eq!(fields.len() + 1, before, "no fetchmail trace field");
    let mut out = fields.concat();
    out.extend_from_slice(&message[header_end + 1..]);
    out
}

/// `text` with CRLF line ends made LF.
fn lf_only(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for (i, &b) in text.iter().enumerate() {
        if !(b == b'\r' && text.get(i + 1) == Some(&b'\n')) {
            out.push(b);
        }
    }
    out
}

#[test]
fn fetchmail_retrieves_over_starttls_and_deletes() {
    let server = Server::start();
    let user = server.add_user("fetchmail");
    let home = tempfile::tempdir().unwrap();
    let originals = home.path().join("originals");
    let delivered = home.path().join("delivered");
    std::fs::create_dir(&originals).unwrap();
    std::fs::create_dir(&delivered).unwrap();
    // Deliver awkward messages, and keep them as stored for comparison.
    client(
        &server,
        &user,
        r#"
att = base64.encodebytes(bytes(range(256)) * 8).replace(b"\n", b"\r\n")
deliver([
    message("dots", "<f1@kit.test>", body=".\r\n..two\r\n.three\r\nFrom the start\r\n"),
    message("utf-8", "<f2@kit.test>", body="Grüße aus Köln\r\n".encode(),
            headers="MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n"),
    message("attachment", "<f3@kit.test>",
            headers="MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=x\r\n",
            body=b"--x\r\nContent-Type: text/plain\r\n\r\nsee below\r\n--x\r\nContent-Type: application/octet-stream\r\n"
                 b"Content-Transfer-Encoding: base64\r\n\r\n" + att + b"--x--\r\n"),
    message("long line", "<f4@kit.test>", body="y" * 900 + "\r\n"),
    message("empty body", "<f5@kit.test>", body=""),
])
m = login()
m.select("INBOX", readonly=True)
typ, dat = m.fetch("1:*", "(BODY.PEEK[])")
bodies = [d[1] for d in dat if isinstance(d, tuple)]
eq(len(bodies), 5, "stored messages")
for i, b in enumerate(bodies):
    open("%s/%d" % (ARGS[0], i), "wb").write(b)
"#,
        &[originals.to_str().unwrap()],
    );

    let mda = home.path().join("deliver.sh");
    std::fs::write(
        &mda,
        format!(
            "#!/bin/sh\nexec cat > \"$(mktemp {}/msg.XXXXXX)\"\n",
            delivered.display()
        ),
    )
    .unwrap();
    // STARTTLS is required (sslproto), and the certificate is checked with
    // the server's self-signed one as the trust anchor and its host name.
    let rc = home.path().join("fetchmailrc");
    std::fs::write(
        &rc,
        format!(
            "set no syslog\nset no bouncemail\n\
             poll 127.0.0.1 service {port} protocol IMAP auth password timeout 30\n  \
             user \"{user}\" there with password \"{PASSWORD}\"\n  \
             sslproto \"tls1.2+\" sslcertck sslcertfile \"{cert}\" sslcommonname \"mx.example.org\"\n  \
             no rewrite\n  fetchall\n  mda \"{mda}\"\n",
            port = server.imap.port(),
            cert = server.data_dir().join("tls/cert.pem").display(),
            mda = mda.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&mda, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&rc, std::fs::Permissions::from_mode(0o600)).unwrap();
    let rc = rc.to_str().unwrap();
    // A lock file of its own: as root, fetchmail's default lock is one
    // for the whole machine, and another run of the suite may hold it.
    let pidfile = home.path().join("fetchmail.pid");
    let out = run_tool(
        &server,
        home.path(),
        "fetchmail",
        &[
            "-f",
            rc,
            "--pidfile",
            pidfile.to_str().unwrap(),
            "--nodetach",
            "-v",
        ],
    );
    let transcript =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        transcript.contains("STARTTLS"),
        "fetchmail did not use STARTTLS:\n{transcript}"
    );

    // Every message arrived once and intact (fetchmail adds a trace field
    // and hands the MDA LF line ends).
    let mut want: Vec<Vec<u8>> = std::fs::read_dir(&originals)
        .unwrap()
        .map(|e| lf_only(&std::fs::read(e.unwrap().path()).unwrap()))
        .collect();
    let mut got: Vec<Vec<u8>> = std::fs::read_dir(&delivered)
        .unwrap()
        .map(|e| {
            lf_only(&without_fetchmail_trace(
                &std::fs::read(e.unwrap().path()).unwrap(),
            ))
        })
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got.len(), 5, "{transcript}");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(
            String::from_utf8_lossy(g),
            String::from_utf8_lossy(w),
            "a message changed on its way"
        );
    }
    // Without --keep they are gone from the server.
    let left = client(
        &server,
        &user,
        r#"print(status(login(), "INBOX", "(MESSAGES)")["MESSAGES"])"#,
        &[],
    );
    assert_eq!(left.trim(), "0");
    assert_eq!(server.count("SELECT count(*) FROM messages"), 0);
}

#[test]
fn concurrent_sessions_keep_consistent_views() {
    let server = Server::start();
    let user = server.add_user("busy");
    let out = client(
        &server,
        &user,
        r#"
SESSIONS, SECONDS = 8, 4.0   # working sessions, plus one that only idles
errors = []
lock = threading.Lock()
identity = {}          # UID -> Message-ID, from every session and source
counts = {}

class Stop(Exception):
    pass

def note(uid, mid, where):
    with lock:
        old = identity.setdefault(uid, mid)
    if old != mid:
        errors.append("%s: UID %d named %s, then %s" % (where, uid, old, mid))

UNTAGGED = re.compile(r"\* (\d+) (EXISTS|EXPUNGE|FETCH|RECENT)(.*)", re.S)

class Session:
    """One connection and its model of the mailbox, kept from what the
    server said (RFC 3501 §7.4.1, §2.3.1)."""

    def __init__(self, name):
        self.name = name
        self.r = Raw()
        self.r.login()
        self.uids = []       # message n is self.uids[n - 1]; None until fetched
        self.flags = {}
        self.max_uid = 0     # highest UID this session has seen
        self.do("SELECT INBOX")
        self.fill()

    def fail(self, what):
        errors.append("%s: %s" % (self.name, what))
        raise Stop()

    def handle(self, untagged, tagged, text):
        for line in untagged:
            if line.startswith("* SEARCH"):
                # Arrivals announced after the last fill are not known by
                # UID yet: as many strays as unknowns, all above the rest.
                found = {int(x) for x in line.split()[2:]}
                stray = found - set(self.uids)
                if len(stray) > self.uids.count(None) or stray and min(stray) <= self.max_uid:
                    self.fail("UID SEARCH found %r outside the view" % sorted(stray))
            self.apply(line)
        kind = tagged.split()[1]
        with lock:
            counts[text.split()[0] + " " + kind] = counts.get(text.split()[0] + " " + kind, 0) + 1
        may_fail = text.split()[0] in ("COPY", "MOVE", "STORE") or text.startswith("UID STORE")
        if kind == "BAD" or kind == "NO" and not may_fail:
            self.fail("%s -> %s" % (text[:60], tagged))
        return tagged

    def do(self, text):
        self.kind = text.split()[0].upper()
        u, t = self.r.cmd(text)
        return self.handle(u, t, text)

    def apply(self, line):
        m = UNTAGGED.match(line)
        if not m:
            return
        n, what, rest = int(m.group(1)), m.group(2), m.group(3)
        if what == "EXISTS":
            if n < len(self.uids):
                self.fail("EXISTS went from %d down to %d" % (len(self.uids), n))
            self.uids.extend([None] * (n - len(self.uids)))
        elif what == "EXPUNGE":
            if self.kind in ("FETCH", "STORE", "SEARCH"):
                self.fail("EXPUNGE during %s" % self.kind)
            if not 1 <= n <= len(self.uids):
                self.fail("EXPUNGE %d with %d messages" % (n, len(self.uids)))
            self.flags.pop(self.uids.pop(n - 1), None)
        elif what == "FETCH":
            if not 1 <= n <= len(self.uids):
                self.fail("FETCH %d with %d messages" % (n, len(self.uids)))
            uid = self.uids[n - 1]
            u = re.search(r"\bUID (\d+)", rest)
            if u:
                if uid is not None and uid != int(u.group(1)):
                    self.fail("message %d was UID %d, now UID %s" % (n, uid, u.group(1)))
                uid = self.uids[n - 1] = int(u.group(1))
            f = re.search(r"\bFLAGS \(([^)]*)\)", rest)
            if f and uid is not None:
                self.flags[uid] = frozenset(f.group(1).split()) - {"\\Recent"}
            mid = re.search(r"Message-ID: *(<[^>]*>)", rest, re.I)
            if mid and uid is not None:
                note(uid, mid.group(1), self.name)

    def fill(self):
        """Learns the UIDs, flags and identities of new arrivals."""
        before = {u for u in self.uids if u is not None}
        missing = [i + 1 for i, u in enumerate(self.uids) if u is None]
        if missing:
            self.do("FETCH %d:%d (UID FLAGS BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])" % (missing[0], missing[-1]))
        known = [u for u in self.uids if u is not None]
        if any(a >= b for a, b in zip(known, known[1:])):
            self.fail("UIDs not ascending: %r" % known)
        new = [u for u in known if u not in before]
        if new and min(new) <= self.max_uid:
            self.fail("new arrival with UID %d, not above %d seen before" % (min(new), self.max_uid))
        if known:
            self.max_uid = max(self.max_uid, known[-1])

    def append(self, k):
        mid = "<%s-%d@kit.test>" % (self.name, k)
        msg = message("%s %d" % (self.name, k), mid)
        tag = self.r.tag()
        self.kind = "APPEND"
        self.r.send(b"%s APPEND INBOX {%d+}\r\n" % (tag.encode(), len(msg)) + msg + b"\r\n")
        t = self.handle(*self.r.finish(tag), "APPEND")
        a = re.search(r"\[APPENDUID \d+ (\d+)\]", t)
        if not a:
            self.fail("APPEND without APPENDUID: %s" % t)
        note(int(a.group(1)), mid, self.name)

    def work(self, seed, end):
        rng = random.Random(seed)
        k = 0
        while time.monotonic() < end:
            self.fill()
            n = len(self.uids)
            op = rng.random()
            seq = rng.randint(1, n) if n else 0
            if n == 0 or op < 0.12:
                k += 1
                self.append(k)
            elif op < 0.45:
                flag = rng.choice(["\\Seen", "\\Flagged", "\\Answered", "$Label1", "$Label2"])
                self.do("STORE %d %sFLAGS (%s)" % (seq, rng.choice("+-"), flag))
            elif op < 0.55:
                t = self.do("COPY %d INBOX" % seq)
                c = re.search(r"\[COPYUID \d+ (\d+) (\d+)\]", t)
                if c and int(c.group(1)) in identity:
                    note(int(c.group(2)), identity[int(c.group(1))], self.name + " COPYUID")
            elif op < 0.62:
                self.do("COPY %d Archive" % seq)
            elif op < 0.70:
                self.do("MOVE %d Archive" % seq)
            elif op < 0.80:
                self.do("STORE %d +FLAGS.SILENT (\\Deleted)" % seq)
                self.do("EXPUNGE")
            elif op < 0.88:
                uid = self.uids[seq - 1]
                if uid:
                    self.do("UID STORE %d +FLAGS (\\Deleted)" % uid)
                    self.do("UID EXPUNGE %d" % uid)
            elif op < 0.94:
                self.do("NOOP")
            else:
                self.do("UID SEARCH ALL")

def worker(s, seed, end):
    try:
        s.work(seed, end)
    except Stop:
        pass
    except Exception:
        errors.append("%s: %s" % (s.name, traceback.format_exc()))

def idler(s, end):
    """Keeps its model from what IDLE pushes, for the whole run."""
    try:
        tag = s.r.tag()
        s.kind = "IDLE"
        s.r.send("%s IDLE\r\n" % tag)
        line = s.r.read()
        if not line.startswith("+ "):
            s.fail("IDLE answered %r" % line)
        timer = threading.Timer(max(0.0, end - time.monotonic()), s.r.send, ["DONE\r\n"])
        timer.start()
        u, t = s.r.finish(tag)
        s.handle(u, t, "IDLE")
        timer.join()
        with lock:
            counts["IDLE pushes"] = len(u)
    except Stop:
        pass
    except Exception:
        errors.append("%s: %s" % (s.name, traceback.format_exc()))

def mail(end):
    try:
        k = 0
        with smtplib.SMTP(SMTP_HOST, int(SMTP_PORT), timeout=30) as s:
            while time.monotonic() < end:
                k += 1
                s.sendmail("sender@remote.test", [USER], message("smtp %d" % k, "<smtp-%d@kit.test>" % k))
                time.sleep(0.02)
        with lock:
            counts["SMTP"] = k
    except Exception:
        errors.append("smtp: %s" % traceback.format_exc())

deliver([message("seed %d" % i, "<seed-%d@kit.test>" % i) for i in range(20)])
sessions = [Session("s%d" % i) for i in range(SESSIONS)]
idling = Session("idle")
end = time.monotonic() + SECONDS
threads = [threading.Thread(target=worker, args=(s, i, end)) for i, s in enumerate(sessions)]
threads.append(threading.Thread(target=idler, args=(idling, end)))
threads.append(threading.Thread(target=mail, args=(end,)))
for t in threads:
    t.start()
for t in threads:
    t.join()
ok(not errors, "\n".join(errors))

# All quiet: every session catches up and must agree with a fresh one.
fresh = Raw()
fresh.login()
fresh.cmd("SELECT INBOX")
u, t = fresh.cmd("UID FETCH 1:* (UID FLAGS)")
truth = []
for line in u:
    if " FETCH " in line:
        truth.append((int(re.search(r"\bUID (\d+)", line).group(1)),
                      frozenset(re.search(r"\bFLAGS \(([^)]*)\)", line).group(1).split()) - {"\\Recent"}))
try:
    for s in sessions + [idling]:
        s.do("NOOP")
        s.fill()
        s.do("FETCH 1:* (UID FLAGS)")
        eq(s.uids, [uid for uid, _ in truth], "%s's messages" % s.name)
        for uid, flags in truth:
            eq(s.flags.get(uid), flags, "%s's flags of UID %d" % (s.name, uid))
except Stop:
    pass
ok(not errors, "\n".join(errors))
missing = [uid for uid, _ in truth if uid not in identity]
ok(not missing, "UIDs never identified: %r" % missing)
print(len(truth), "messages;", sorted(counts.items()))
"#,
        &[],
    );
    eprintln!("{out}");
    assert!(!server.log().contains("panicked"), "{}", log_tail(&server));
}

/// Helpers for IMAP4rev2 scripts: commands and responses in UTF-8, and
/// the data of a literal or literal8 in a FETCH line.
const REV2_HELPERS: &str = r#"
def u8(r, text):
    tag = r.tag()
    r.send(("%s %s\r\n" % (tag, text)).encode("utf-8"))
    u, t = r.finish(tag)
    fix = lambda l: l.encode("latin-1").decode("utf-8")
    return [fix(l) for l in u], fix(t)

def literal_after(line, label):
    at = line.index(label + " ")
    rest = line[at + len(label) + 1:]
    found = re.match(r"(~?)\{(\d+)\}\r\n", rest)
    ok(found, "no literal after %s in %r" % (label, line[:200]))
    start = found.end()
    return found.group(1) == "~", rest[start:start + int(found.group(2))].encode("latin-1")

def is_ok(t):
    return t.split()[1] == "OK"
"#;

#[test]
fn imap4rev2_utf8_names_esearch_and_list_extended() {
    let server = Server::start();
    let user = server.add_user("rev2");
    client(
        &server,
        &user,
        &format!(
            "{REV2_HELPERS}\n{}",
            r#"
m = login()
r = Raw()
r.login()
u, t = r.cmd("CAPABILITY")
caps = {c.upper() for c in u[0].split()[2:]}
want = {"IMAP4REV1", "IMAP4REV2", "BINARY", "SEARCHRES", "LIST-EXTENDED", "LIST-STATUS"}
ok(want <= caps, "missing: %r" % (want - caps))

# Before ENABLE: IMAP4rev1 behaviour.
u, t = r.cmd("SELECT INBOX")
ok("* 0 RECENT" in u, u)
u, t = r.cmd("SEARCH ALL")
eq(u, ["* SEARCH"], "rev1 SEARCH")

u, t = r.cmd("ENABLE IMAP4rev2")
ok(is_ok(t), t)
eq(u, ["* ENABLED IMAP4rev2"], "ENABLE")
u, t = r.cmd("ENABLE IMAP4rev2")
eq(u, ["* ENABLED"], "enabled once")

# UTF-8 names from the rev2 client are modified UTF-7 for rev1 clients.
u, t = u8(r, 'CREATE "Entwürfe/日本語"')
ok(is_ok(t), t)
typ, dat = m.list('""', "Entw*")
got = sorted(d.decode().split(' "/" ')[1] for d in dat)
eq(got, ["Entw&APw-rfe", "Entw&APw-rfe/&ZeVnLIqe-"], "rev1 LIST")
# ... and back.
eq(m.create("Caf&AOk-")[0], "OK", "rev1 CREATE")
u, t = u8(r, 'LIST "" "Caf*"')
eq(u, ['* LIST (\\HasNoChildren) "/" "Café"'], "rev2 LIST")
u, t = u8(r, 'LIST "" "Entwürfe/%"')
eq(u, ['* LIST (\\HasNoChildren) "/" "Entwürfe/日本語"'], "rev2 LIST with a UTF-8 pattern")
msg = message("accent", "<a@kit.test>")
tag = r.tag()
r.send(('%s APPEND "Café" {%d+}\r\n' % (tag, len(msg))).encode("utf-8") + msg + b"\r\n")
u, t = r.finish(tag)
ok(is_ok(t) and "[APPENDUID" in t, t)
u, t = u8(r, 'STATUS "Café" (MESSAGES UIDNEXT)')
eq(u, ['* STATUS "Café" (MESSAGES 1 UIDNEXT 2)'], "STATUS in UTF-8")
u, t = u8(r, 'STATUS "Café" (RECENT)')
eq(t.split()[1], "BAD", "STATUS RECENT in rev2")
u, t = u8(r, 'RENAME "Café" "Thé"')
ok(is_ok(t), t)
eq(status(m, "Th&AOk-", "(MESSAGES)"), {"MESSAGES": 1}, "renamed, seen by rev1")
u, t = u8(r, 'GETQUOTAROOT "Thé"')
ok(is_ok(t) and u[0] == '* QUOTAROOT "Thé"', (u, t))
# A stored name that is not modified UTF-7 is listed as it is, and found.
eq(m.create('"A&B"')[0], "OK", "rev1 CREATE of a sloppy name")
u, t = u8(r, 'LIST "" "A&*"')
eq(u, ['* LIST (\\HasNoChildren) "/" A&B'], "invalid modified UTF-7 listed")
u, t = u8(r, 'STATUS "A&B" (MESSAGES)')
ok(is_ok(t), t)

# SELECT: [CLOSED], the LIST line, no RECENT; ESEARCH only.
for i in range(3):
    m.append("INBOX", None, None, message("hello %d" % i, "<h%d@kit.test>" % i))
u, t = u8(r, 'SELECT "Thé"')
ok(u[0].startswith("* OK [CLOSED]"), u)
ok('* LIST () "/" "Thé"' in u, u)
ok(not any("RECENT" in l for l in u), u)
u, t = r.cmd("SELECT INBOX")
ok(u[0].startswith("* OK [CLOSED]") and "* 3 EXISTS" in u, u)
ok(not any("RECENT" in l for l in u), u)
u, t = r.cmd("SEARCH ALL")
eq(u, ['* ESEARCH (TAG "%s") ALL 1:3' % t.split()[0]], "SEARCH in rev2")
u, t = r.cmd("UID SEARCH SUBJECT nothing-matches")
eq(u, ['* ESEARCH (TAG "%s") UID' % t.split()[0]], "empty UID SEARCH in rev2")
u, t = r.cmd("SEARCH RETURN (COUNT) ALL")
eq(u, ['* ESEARCH (TAG "%s") COUNT 3' % t.split()[0]], "RETURN still works")
m.append("INBOX", None, None, message("late", "<late@kit.test>"))
u, t = r.cmd("NOOP")
eq(u, ["* 4 EXISTS"], "new mail without RECENT")
u, t = r.cmd("UNSELECT")
ok(u == [] and is_ok(t), (u, t))

# LIST-EXTENDED, from the rev2 client and from a rev1 one.
eq(m.create("Work/Projects")[0], "OK", "CREATE")
u, t = r.cmd('LIST (SUBSCRIBED) "" "Work*"')
eq(u, [], "CREATE does not subscribe")
eq(m.subscribe("Work/Projects")[0], "OK", "SUBSCRIBE")
eq(m.unsubscribe("Work")[0], "OK", "UNSUBSCRIBE")
u, t = r.cmd('LIST (SUBSCRIBED) "" "Work*"')
eq(u, ['* LIST (\\HasNoChildren \\Subscribed) "/" Work/Projects'], "SUBSCRIBED")
u, t = r.cmd('LIST (SUBSCRIBED RECURSIVEMATCH) "" "W%"')
eq(u, ['* LIST (\\HasChildren) "/" Work ("CHILDINFO" ("SUBSCRIBED"))'], "RECURSIVEMATCH")
u, t = r.cmd('LIST (RECURSIVEMATCH) "" "*"')
eq(t.split()[1], "BAD", "RECURSIVEMATCH alone")
u, t = r.cmd('LIST "" ("INBOX" "Work/*") RETURN (CHILDREN SPECIAL-USE STATUS (MESSAGES UNSEEN))')
ok(is_ok(t), t)
eq(u, ['* LIST (\\HasNoChildren) "/" INBOX', "* STATUS INBOX (MESSAGES 4 UNSEEN 4)",
       '* LIST (\\HasNoChildren) "/" Work/Projects', "* STATUS Work/Projects (MESSAGES 0 UNSEEN 0)"],
   "patterns, CHILDREN and STATUS")
u, t = r.cmd('LIST (SPECIAL-USE) "" "*" RETURN (SPECIAL-USE)')
got = {l.split()[-1]: l for l in u}
eq(set(got), {"Sent", "Drafts", "Trash", "Junk", "Archive"}, "SPECIAL-USE selection")
ok("\\Sent" in got["Sent"], got)
u, t = r.cmd('LIST "" "Work" RETURN (SUBSCRIBED)')
eq(u, ['* LIST (\\HasChildren) "/" Work'], "RETURN (SUBSCRIBED) of an unsubscribed mailbox")
u, t = u8(r, 'LIST () "" "Entw%" RETURN (STATUS (MESSAGES))')
eq(u, ['* LIST (\\HasChildren) "/" "Entwürfe"',
       '* STATUS "Entwürfe" (MESSAGES 0)'], "UTF-8 in LIST-STATUS")
u, t = r.cmd('LIST "" * RETURN (STATUS (RECENT))')
eq(t.split()[1], "BAD", "LIST-STATUS RECENT in rev2")
u, t = r.cmd('LIST "" * RETURN (FROBNICATE)')
eq(t.split()[1], "BAD", "unknown return option")
typ, dat, un = run(m, "LIST", "(SUBSCRIBED)", '""', '"Work*"')
eq(un.get("LIST"), [b'(\\HasNoChildren \\Subscribed) "/" Work/Projects'], "LIST-EXTENDED for rev1")
typ, dat, un = run(m, "LIST", '""', '"Work/*"', "RETURN", "(STATUS (MESSAGES))")
eq(un.get("STATUS"), [b"Work/Projects (MESSAGES 0)"], "LIST-STATUS for rev1")
u, t = u8(r, 'DELETE "Entwürfe"')
ok(t.split()[1] == "NO" and "[HASCHILDREN]" in t, t)
m.logout()
"#
        ),
        &[],
    );
}

#[test]
fn binary_fetch_append_literal8_and_searchres() {
    let server = Server::start();
    let user = server.add_user("binary");
    client(
        &server,
        &user,
        &format!(
            "{REV2_HELPERS}\n{}",
            r#"
small = bytes(range(256)) * 40
large = random.Random(7).randbytes(400 * 1024)
text = "Grüße, numbers: 1 = 2\r\n".encode("utf-8") * 3
qp = (b"Gr=C3=BC=C3=9Fe, numbers: 1 =3D 2\r\n" * 3)
def b64(data):
    return base64.encodebytes(data).replace(b"\n", b"\r\n")
body = (b"--b\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
        + qp + b"\r\n--b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n"
        + b64(small) + b"\r\n--b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n"
        + b64(large) + b"\r\n--b--\r\n")
msg = message("attachments", "<att@kit.test>", body=body,
              headers="MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n")
odd = message("odd", "<odd@kit.test>", body=b"begin 644 x\r\n`\r\nend\r\n",
              headers="MIME-Version: 1.0\r\nContent-Transfer-Encoding: x-uuencode\r\n")
m = login()
for x in (msg, odd):
    eq(m.append("INBOX", None, None, x)[0], "OK", "APPEND")
r = Raw()
r.login()
u, t = r.cmd("SELECT INBOX")

u, t = r.cmd("FETCH 1 (BINARY.SIZE[1] BINARY.SIZE[2] BINARY.SIZE[3])")
ok(is_ok(t), t)
sizes = dict(re.findall(r"BINARY\.SIZE\[(\d)\] (\d+)", u[0]))
eq(sizes, {"1": str(len(text)), "2": str(len(small)), "3": str(len(large))}, "BINARY.SIZE")
u, t = r.cmd("FETCH 1 BINARY.PEEK[2]")
eq(literal_after(u[0], "BINARY[2]"), (True, small), "BINARY[2]: literal8 with NUL")
u, t = r.cmd("FETCH 1 BINARY.PEEK[1]")
eq(literal_after(u[0], "BINARY[1]"), (False, text), "BINARY[1]: quoted-printable decoded")
u, t = r.cmd("FETCH 1 BINARY.PEEK[3]")
lit8, data = literal_after(u[0], "BINARY[3]")
eq((lit8, len(data), hashlib.sha256(data).hexdigest()),
   (0 in large, len(large), hashlib.sha256(large).hexdigest()), "BINARY[3]: large, streamed")
u, t = r.cmd("FETCH 1 BINARY.PEEK[2]<100.50>")
eq(literal_after(u[0], "BINARY[2]<100>"), (False, small[100:150]), "partial without NUL")
u, t = r.cmd("FETCH 1 BINARY.PEEK[2]<250.10>")
eq(literal_after(u[0], "BINARY[2]<250>"), (True, small[250:260]), "partial with NUL")
u, t = r.cmd("FETCH 1 BINARY.PEEK[3]<300000.5000>")
eq(literal_after(u[0], "BINARY[3]<300000>")[1], large[300000:305000], "large partial")
u, t = r.cmd("FETCH 1 BINARY.PEEK[]")
eq(literal_after(u[0], "BINARY[]")[1], msg, "BINARY[]: the whole message")
u, t = r.cmd("FETCH 2 BINARY.PEEK[1]")
ok(t.split()[1] == "NO" and "[UNKNOWN-CTE]" in t, t)
u, t = r.cmd("FETCH 2 BINARY.SIZE[1]")
ok(t.split()[1] == "NO" and "[UNKNOWN-CTE]" in t, t)
u, t = r.cmd("FETCH 1 FLAGS")
ok("\\Seen" not in u[0], "PEEK set \\Seen: %r" % u)
u, t = r.cmd("FETCH 1 BINARY[2]<0.1>")
ok("\\Seen" in u[0], "BINARY did not set \\Seen: %r" % u)

# APPEND with a literal8: stored base64-encoded (BODY[] has no NUL), and
# BINARY gives back the bytes sent.
raw = b"Subject: nul\r\n\r\nbefore\0after\r\n"
tag = r.tag()
r.send(("%s APPEND INBOX ~{%d}\r\n" % (tag, len(raw))).encode())
ok(r.read().startswith("+"), "continuation for literal8")
r.send(raw + b"\r\n")
u, t = r.finish(tag)
ok(is_ok(t), t)
u, t = r.cmd("NOOP")
u, t = r.cmd("FETCH 3 BINARY.PEEK[1]")
eq(literal_after(u[0], "BINARY[1]"), (True, b"before\0after\r\n"), "literal8 APPEND read back")
u, t = r.cmd("FETCH 3 BODY.PEEK[]")
lit8, data = literal_after(u[0], "BODY[]")
ok(not lit8 and b"\0" not in data and b"Content-Transfer-Encoding: base64" in data, repr(data))

# SEARCHRES: SAVE, then $ in FETCH, UID FETCH, SEARCH, STORE, COPY, MOVE.
for i in range(4):
    m.append("INBOX", None, None, message("saved %d" % i, "<s%d@kit.test>" % i))
u, t = r.cmd("NOOP")
u, t = r.cmd("SEARCH RETURN (SAVE) SUBJECT saved")
ok(is_ok(t) and u == [], "SAVE alone answers nothing: %r %r" % (u, t))
u, t = r.cmd("FETCH $ (UID)")
eq([re.match(r"\* (\d+) FETCH", l).group(1) for l in u], ["4", "5", "6", "7"], "FETCH $")
u, t = r.cmd("UID FETCH $ (FLAGS)")
eq(len(u), 4, "UID FETCH $")
u, t = r.cmd("SEARCH $ SUBJECT 2")
eq(u, ["* SEARCH 6"], "SEARCH $")
u, t = r.cmd("UID SEARCH UID $")
eq(u, ["* SEARCH 4 5 6 7"], "UID SEARCH UID $")
u, t = r.cmd("SEARCH RETURN (SAVE MIN MAX) SUBJECT saved")
eq(u, ['* ESEARCH (TAG "%s") MIN 4 MAX 7' % t.split()[0]], "SAVE with MIN MAX")
u, t = r.cmd("FETCH $ (UID)")
eq(len(u), 2, "only MIN and MAX saved: %r" % u)
u, t = r.cmd("SEARCH RETURN (SAVE) SUBJECT saved")
u, t = r.cmd("STORE $ +FLAGS.SILENT (\\Flagged)")
ok(is_ok(t), t)
u, t = r.cmd("SEARCH FLAGGED")
eq(u, ["* SEARCH 4 5 6 7"], "STORE $")
u, t = r.cmd("COPY $ Archive")
ok(is_ok(t) and "[COPYUID" in t, t)
u, t = r.cmd("STORE 5 +FLAGS.SILENT (\\Deleted)")
u, t = r.cmd("EXPUNGE")
eq(u, ["* 5 EXPUNGE"], "EXPUNGE")
u, t = r.cmd("FETCH $ (UID)")
eq([l.split()[1] for l in u], ["4", "5", "6"], "an expunged message leaves $")
u, t = r.cmd("UID MOVE $ Trash")
ok(is_ok(t), t)
eq(status(m, "Trash", "(MESSAGES)"), {"MESSAGES": 3}, "MOVE $")
u, t = r.cmd("FETCH $ (UID)")
ok(is_ok(t) and u == [], "every saved message is gone: %r" % u)
u, t = r.cmd("SEARCH RETURN (SAVE) SUBJECT attachments")
u, t = r.cmd("SELECT INBOX")
u, t = r.cmd("FETCH $ (UID)")
ok(is_ok(t) and u == [], "SELECT resets $: %r" % u)
u, t = r.cmd("SEARCH $")
eq(u, ["* SEARCH"], "SEARCH of an empty $")
m.logout()
"#
        ),
        &[],
    );
}

#[test]
fn quota_set_on_the_command_line_is_reported_and_enforced() {
    let server = Server::start();
    let user = server.add_user("quota");
    let out = server.cli(&["user", "quota", &user, "lots"], "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a size"));
    server.cli_ok(&["user", "quota", &user, "20K"]);
    client(
        &server,
        &user,
        r#"
m = login()
m.append("INBOX", None, None, message("first", "<q1@t>", body="x" * 8000 + "\r\n"))
typ, dat = m.getquotaroot("INBOX")
eq(typ, "OK", "GETQUOTAROOT")
ok(dat[0][0] in (b'INBOX ""', b'"INBOX" ""'), "QUOTAROOT names the root: %r" % dat)
ok(re.match(rb'"" \(STORAGE (8|9) 20\)', dat[1][0]), "QUOTA usage and limit in KiB: %r" % dat)
typ, dat = m.getquota('""')
eq(typ, "OK", "GETQUOTA")
# 8 KiB used of 20: a 16 KiB message would go over.
typ, dat = m.append("INBOX", None, None, message("second", "<q2@t>", body="y" * 16000 + "\r\n"))
eq(typ, "NO", "APPEND over quota")
ok(b"[OVERQUOTA]" in dat[0], "OVERQUOTA code: %r" % dat)
eq(status(m, "INBOX")["MESSAGES"], 1, "nothing was stored")
m.logout()
"#,
        &[],
    );
    server.cli_ok(&["user", "quota", &user, "none"]);
    client(
        &server,
        &user,
        r#"
m = login()
typ, dat = m.getquotaroot("INBOX")
eq(dat[1], [None], "no QUOTA once the limit is gone")
typ, dat = m.append("INBOX", None, None, message("second", "<q2@t>", body="y" * 16000 + "\r\n"))
eq(typ, "OK", "APPEND without a limit")
m.logout()
"#,
        &[],
    );
}

/// ENVELOPE takes a display name from the old `addr (Name)` comment form,
/// as Dovecot and clients do (RFC 3501 §7.4.2 address structure).
#[test]
fn envelope_names_come_from_a_trailing_comment() {
    let server = Server::start();
    let user = server.add_user("envelope");
    let out = python(
        r#"
import imaplib, smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p))
s.sendmail("user@example.net", [sys.argv[3]], "From: user@example.net (Real Name)\r\nTo: %s\r\nSubject: old style\r\n\r\nx\r\n" % sys.argv[3])
s.quit()
h, p = sys.argv[2].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(sys.argv[3], sys.argv[4]); m.select("INBOX")
typ, data = m.fetch("1", "(ENVELOPE)")
print(data[0].decode())
"#,
        &[
            &server.smtp.to_string(),
            &server.imap.to_string(),
            &user,
            PASSWORD,
        ],
    );
    assert!(
        out.contains(r#"(("Real Name" NIL "user" "example.net"))"#),
        "{out}"
    );
}

/// RFC 7162 and RFC 4731 details: the first CONDSTORE-enabling command
/// brings `OK [HIGHESTMODSEQ]`; the MODSEQ of a SEARCH or ESEARCH result
/// is the highest of the messages returned, not the mailbox's; and a
/// search for message numbers past the end answers OK with nothing; a
/// thousand flat keys are one search, not an SQL error.
#[test]
fn condstore_enabling_search_modseq_and_numbers_past_the_end() {
    let server = Server::start();
    let user = server.add_user("condstore");
    let out = client(
        &server,
        &user,
        r#"
deliver([message("m%d" % i, "<m%d@x>" % i) for i in range(1, 4)])
r = Raw(); r.login()
u, t = r.cmd("SELECT INBOX")
ok(t.split()[1] == "OK", t)
u, t = r.cmd("STORE 3 +FLAGS (\\Flagged)")
u, t = r.cmd("FETCH 1:3 (MODSEQ)")
ok(any("[HIGHESTMODSEQ " in l for l in u), "no HIGHESTMODSEQ on enabling: %r" % u)
mods = {int(re.search(r"^\* (\d+) FETCH", l).group(1)): int(re.search(r"MODSEQ \((\d+)\)", l).group(1)) for l in u if "FETCH" in l}
ok(mods[3] > mods[2] > mods[1], repr(mods))
u, t = r.cmd("FETCH 1 (MODSEQ)")
ok(not any("HIGHESTMODSEQ" in l for l in u), "HIGHESTMODSEQ again: %r" % u)
u, t = r.cmd("SEARCH MODSEQ 1 1:2")
eq(u, ["* SEARCH 1 2 (MODSEQ %d)" % mods[2]], "SEARCH MODSEQ")
u, t = r.cmd("SEARCH RETURN (ALL) MODSEQ 1 1:2")
eq(u, ['* ESEARCH (TAG "%s") ALL 1:2 MODSEQ %d' % (t.split()[0], mods[2])], "ESEARCH MODSEQ")
u, t = r.cmd("SEARCH RETURN () 1000")
eq((u, t.split()[1]), (['* ESEARCH (TAG "%s")' % t.split()[0]], "OK"), "past the end")
u, t = r.cmd("SEARCH 2:1000")
eq((u, t.split()[1]), (["* SEARCH 2 3"], "OK"), "a range past the end")
u, t = r.cmd("SEARCH " + " ".join(["UNDELETED"] * 1000))
eq((u, t.split()[1]), (["* SEARCH 1 2 3"], "OK"), "1,000 flat keys")
print("done")
"#,
        &[],
    );
    assert!(out.contains("done"), "{out}");
}

/// An address key matches a group's name (`To: Team: a@x, b@y;`), which is
/// part of the field's text (RFC 3501 §6.4.4).
#[test]
fn address_keys_match_group_names() {
    let server = Server::start();
    let user = server.add_user("groups");
    client(
        &server,
        &user,
        r#"
deliver([message("to a group", "<g1@x>", headers="Cc: Project Team: a@x.example, b@y.example;\r\n"),
         message("no group", "<g2@x>")])
m = login(); m.select("INBOX")
eq(m.search(None, "CC", '"project team"'), ("OK", [b"1"]), "CC group name")
eq(m.search(None, "CC", "b@y.example"), ("OK", [b"1"]), "CC group member")
"#,
        &[],
    );
}

/// SENTON compares the day the Date field names, whatever its zone, and
/// TEXT finds words of any header field, not only the indexed ones.
#[test]
fn sent_dates_as_written_and_text_in_any_header_field() {
    let server = Server::start();
    let user = server.add_user("sentdates");
    client(
        &server,
        &user,
        r#"
deliver([message("late evening", "<d1@x>", date="Mon, 01 Jan 2024 23:30:00 -0500", headers="X-Project: zanzibar\r\n"),
         message("early morning", "<d2@x>", date="Tue, 02 Jan 2024 01:00:00 +0900")])
m = login(); m.select("INBOX")
# In UTC the first is on 2 January and the second on 1 January.
eq(m.search(None, "SENTON", "1-Jan-2024"), ("OK", [b"1"]), "SENTON 1-Jan")
eq(m.search(None, "SENTON", "2-Jan-2024"), ("OK", [b"2"]), "SENTON 2-Jan")
eq(m.search(None, "SENTBEFORE", "2-Jan-2024"), ("OK", [b"1"]), "SENTBEFORE 2-Jan")
eq(m.search(None, "SENTSINCE", "2-Jan-2024"), ("OK", [b"2"]), "SENTSINCE 2-Jan")
eq(m.search(None, "TEXT", "zanzibar"), ("OK", [b"1"]), "TEXT in an X- field")
# The headers of MIME parts are body (RFC 3501 §6.4.4): an attachment's
# name is found by BODY and TEXT, as a client's "search in messages" wants.
from email.message import EmailMessage
e = EmailMessage(); e["Subject"] = "scans"; e["From"] = "a@remote.test"; e["To"] = USER
e.set_content("see the file")
e.add_attachment(b"%PDF-1.4 binary", maintype="application", subtype="pdf", filename="kestrel-survey.pdf")
deliver([e.as_bytes()])
m.noop()
eq(m.search(None, "BODY", "kestrel-survey"), ("OK", [b"3"]), "BODY finds an attachment's name")
eq(m.search(None, "TEXT", "application/pdf"), ("OK", [b"3"]), "TEXT finds a part's type")
eq(m.search(None, "BODY", "zanzibar"), ("OK", [b""]), "BODY leaves the top header out")
"#,
        &[],
    );
}

/// SEARCH reads the whole text of a long message, past the first 256 KiB
/// that the main index row holds, delivered by SMTP or appended.
#[test]
fn search_reads_the_whole_text_of_a_long_message() {
    let server = Server::start();
    let user = server.add_user("longtext");
    client(
        &server,
        &user,
        r#"
from email.message import EmailMessage
e = EmailMessage(); e["Subject"] = "long report"; e["From"] = "a@remote.test"; e["To"] = USER
lines = ["line %06d of the long report, caf\u00e9" % i for i in range(30000)]
lines.append("the closing osprey-marker sentence")
e.set_content("\n".join(lines))
raw = e.as_bytes()
ok(len(raw) > 1000000, "a long message: %d bytes" % len(raw))
deliver([raw])
m = login(); m.select("INBOX")
typ, _ = m.append("INBOX", None, None, raw)
eq(typ, "OK", "APPEND")
eq(m.search(None, "BODY", "osprey-marker"), ("OK", [b"1 2"]), "a word at the end")
eq(m.search(None, "BODY", "sprey-mark"), ("OK", [b"1 2"]), "a piece of it")
eq(m.search(None, "TEXT", '"closing osprey-marker"'), ("OK", [b"1 2"]), "a phrase at the end")
eq(m.search(None, "BODY", '"line 029999 of the long"'), ("OK", [b"1 2"]), "a phrase near the end")
eq(m.search(None, "BODY", "osprey-markers"), ("OK", [b""]), "nothing that is not there")
"#,
        &[],
    );
}

/// `\Recent` (RFC 3501 §2.3.2): exactly one session sees new mail as
/// recent; SELECT, EXAMINE and STATUS count it; RECENT, NEW and OLD search
/// by it.
#[test]
fn recent_goes_to_exactly_one_session() {
    let server = Server::start();
    let user = server.add_user("recent");
    client(
        &server,
        &user,
        r#"
deliver([message("one", "<r1@x>"), message("two", "<r2@x>")])
c = Raw(); c.login()
u, t = c.cmd("STATUS INBOX (RECENT)")
ok(any("RECENT 2" in l for l in u), "STATUS before anyone took them: %r" % u)
u, t = c.cmd("EXAMINE INBOX")
ok("* 2 RECENT" in u, "EXAMINE counts without taking: %r" % u)
u, t = c.cmd("CLOSE")
a = Raw(); a.login()
u, t = a.cmd("SELECT INBOX")
ok("* 2 RECENT" in u, "first SELECT takes them: %r" % u)
u, t = a.cmd("FETCH 1:2 (FLAGS)")
ok(all("\\Recent" in l for l in u if "FETCH" in l), repr(u))
u, t = a.cmd("STORE 1 +FLAGS (\\Seen)")
u, t = a.cmd("SEARCH NEW")
eq(u, ["* SEARCH 2"], "NEW = RECENT UNSEEN")
b = Raw(); b.login()
u, t = b.cmd("SELECT INBOX")
ok("* 0 RECENT" in u, "second SELECT sees none: %r" % u)
u, t = b.cmd("FETCH 1:2 (FLAGS)")
ok(not any("\\Recent" in l for l in u), repr(u))
u, t = b.cmd("SEARCH OLD")
eq(u, ["* SEARCH 1 2"], "OLD in the second session")
u, t = c.cmd("STATUS INBOX (RECENT)")
ok(any("RECENT 0" in l for l in u), "STATUS after: %r" % u)
# New mail while both are selected: whoever catches up first takes it.
deliver([message("three", "<r3@x>")])
time.sleep(0.3)
u, t = b.cmd("NOOP")
ok("* 3 EXISTS" in u and "* 1 RECENT" in u, "B takes the new one: %r" % u)
u, t = a.cmd("NOOP")
ok("* 3 EXISTS" in u and "* 2 RECENT" in u, "A keeps its two: %r" % u)
u, t = a.cmd("SEARCH RECENT")
eq(u, ["* SEARCH 1 2"], "A's recent")
u, t = b.cmd("SEARCH RECENT")
eq(u, ["* SEARCH 3"], "B's recent")
print("done")
"#,
        &[],
    );
}

/// Subscriptions apart from mailboxes (RFC 3501 §6.3.6, §6.3.9; RFC 5258):
/// CREATE does not subscribe; DELETE leaves the subscription, which LIST
/// (SUBSCRIBED) shows as `\NonExistent` and LSUB as `\Noselect`; LSUB `%`
/// names the unsubscribed parent of a subscribed child as `\Noselect`;
/// CHILDINFO is not sent for a parent whose subscribed child is listed.
#[test]
fn subscriptions_outlive_their_mailboxes() {
    let server = Server::start();
    let user = server.add_user("subs");
    client(
        &server,
        &user,
        r#"
r = Raw(); r.login()
for name in ("Old", "Team/Notes"):
    u, t = r.cmd('CREATE "%s"' % name)
    ok(t.split()[1] == "OK", t)
u, t = r.cmd('LSUB "" "Old"')
eq(u, [], "CREATE does not subscribe")
for name in ("Old", "Team/Notes"):
    u, t = r.cmd('SUBSCRIBE "%s"' % name)
    ok(t.split()[1] == "OK", t)
u, t = r.cmd('DELETE "Old"')
ok(t.split()[1] == "OK", t)
u, t = r.cmd('LIST (SUBSCRIBED) "" "Old"')
eq(u, ['* LIST (\\Subscribed \\NonExistent) "/" Old'], "DELETE keeps the subscription")
u, t = r.cmd('LSUB "" "Old"')
eq(u, ['* LSUB (\\Noselect) "/" Old'], "LSUB of a lost subscription")
u, t = r.cmd('LSUB "" "Te%"')
eq(u, ['* LSUB (\\Noselect) "/" Team'], "LSUB %: the unsubscribed parent")
u, t = r.cmd('LIST (SUBSCRIBED RECURSIVEMATCH) "" "Team*"')
eq(u, ['* LIST (\\HasNoChildren \\Subscribed) "/" Team/Notes'], "no CHILDINFO when the child is listed")
u, t = r.cmd('LIST (SUBSCRIBED RECURSIVEMATCH) "" "Team"')
eq(u, ['* LIST (\\HasChildren) "/" Team ("CHILDINFO" ("SUBSCRIBED"))'], "CHILDINFO for a hidden child")
u, t = r.cmd('UNSUBSCRIBE "Old"')
ok(t.split()[1] == "OK", t)
u, t = r.cmd('LSUB "" "Old"')
eq(u, [], "a lost subscription can be dropped")
u, t = r.cmd('SUBSCRIBE "Nowhere"')
eq(t.split()[1], "NO", "SUBSCRIBE to a name with no mailbox")
print("done")
"#,
        &[],
    );
}
