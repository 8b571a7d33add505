//! SORT (RFC 5256, RFC 5957 DISPLAY), ESORT (RFC 5267), THREAD (RFC 5256
//! ORDEREDSUBJECT and REFERENCES, and REFS) and ESEARCH's MODSEQ with MIN
//! or MAX (RFC 7162 §3.1.10) against a real `sluice serve`, and the same
//! script against Dovecot, comparing the answers.

use sluice_testkit as kit;

use kit::{python, Dovecot, Server, PASSWORD};

/// The shared script. sys.argv: pairs of (imap address, user, password)
/// per server, Sluice's first; `ONLY_SLUICE` when no Dovecot runs.
///
/// `session(addr, user, pw)` appends the same messages (fixed internal
/// dates) to an empty INBOX and returns a function that runs one raw
/// command and gives `(untagged lines, tagged status word)`.
const SCRIPT: &str = r#"
import re, socket, sys

def eq(got, want, what=""):
    if got != want:
        raise AssertionError("%s:\n  got  %r\n  want %r" % (what, got, want))

class Raw:
    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.file = self.sock.makefile("rb")
        self.n = 0
        self.read()

    def read(self):
        line = self.file.readline()
        if not line:
            raise EOFError("closed")
        return line.decode("utf-8", "replace").rstrip("\r\n")

    def cmd(self, text, literal=None):
        self.n += 1
        tag = "t%d" % self.n
        if literal is None:
            self.sock.sendall(("%s %s\r\n" % (tag, text)).encode())
        else:
            self.sock.sendall(("%s %s {%d}\r\n" % (tag, text, len(literal))).encode())
            line = self.read()
            if not line.startswith("+"):
                raise AssertionError("no continuation: %r" % line)
            self.sock.sendall(literal + b"\r\n")
        untagged = []
        while True:
            line = self.read()
            if line.startswith(tag + " "):
                return untagged, line.split()[1]
            untagged.append(line)

def message(i, frm, to, subject, date, extra, body):
    head = "From: %s\r\nTo: %s\r\n" % (frm, to)
    if subject is not None:
        head += "Subject: %s\r\n" % subject
    if date is not None:
        head += "Date: %s\r\n" % date
    head += "Message-ID: <m%d@x.test>\r\n%s" % (i, extra)
    return (head + "\r\n" + body).encode()

MESSAGES = [
    # (From, To, Subject, Date, extra header, body, internal date)
    ('"Zed Alpha" <bob@x.test>', "carol@x.test", "Hello world",
     "Tue, 02 Jan 2024 10:00:00 +0000", "", "one\r\n", "05-Jan-2024 10:00:00 +0000"),
    ("alice@x.test", '"Bob" <zoe@x.test>', "Re: Hello world",
     "Tue, 02 Jan 2024 12:00:00 +0000", "References: <m1@x.test>\r\nIn-Reply-To: <m1@x.test>\r\n",
     "two two two\r\n", "03-Jan-2024 10:00:00 +0000"),
    ('"Carl" <carl@x.test>', "amy@x.test", "[list] Re: hello WORLD",
     "Mon, 01 Jan 2024 09:00:00 -0500", "References: <m1@x.test>\r\n <m2@x.test>\r\n",
     "three\r\n" * 9, "04-Jan-2024 10:00:00 +0000"),
    ("=?UTF-8?Q?=C3=89mile?= <emile@x.test>", "Yves <yves@x.test>", "=?UTF-8?Q?Fwd:_Caf=C3=A9?=",
     "Wed, 03 Jan 2024 08:00:00 +0000", "Cc: dan@x.test\r\n", "four\r\n" * 3,
     "01-Jan-2024 10:00:00 +0000"),
    ("dave@x.test", "bea@x.test", "Caf\xc3\xa9 (fwd)".encode("latin-1").decode("utf-8"), None,
     "In-Reply-To: <missing@x.test>\r\n", "five\r\n" * 20, "02-Jan-2024 11:00:00 +0000"),
    ('"Amy" <amy@x.test>', "zoe@x.test", "Unrelated",
     "Mon, 01 Jan 2024 08:00:00 +0000", "In-Reply-To: <missing@x.test>\r\nCc: Bea <bea@x.test>\r\n",
     "six\r\n" * 5, "06-Jan-2024 10:00:00 +0000"),
    ("amy@x.test", "ann@x.test", "Re: Unrelated",
     "Fri, 05 Jan 2024 08:00:00 +0000", "", "seven\r\n" * 2, "07-Jan-2024 10:00:00 +0000"),
    ("Amy <amy@x.test>", "carol@x.test", None,
     "Thu, 04 Jan 2024 08:00:00 +0000", "Cc: carl@x.test\r\n", "eight\r\n" * 7,
     "08-Jan-2024 10:00:00 +0000"),
]

def session(addr, user, pw):
    r = Raw(addr)
    u, t = r.cmd('LOGIN "%s" "%s"' % (user, pw))
    eq(t, "OK", "login %s" % addr)
    for i, (frm, to, subj, date, extra, body, internal) in enumerate(MESSAGES, 1):
        u, t = r.cmd('APPEND INBOX () "%s"' % internal,
                     message(i, frm, to, subj, date, extra, body))
        eq(t, "OK", "APPEND %d" % i)
    u, t = r.cmd("SELECT INBOX")
    eq(t, "OK", "SELECT")
    return r

# What both servers must answer alike, word for word (the untagged
# SORT/THREAD/ESEARCH lines and the tagged status).
SAME = [
    "SORT (ARRIVAL) UTF-8 ALL",
    "SORT (REVERSE ARRIVAL) UTF-8 ALL",
    "SORT (DATE) UTF-8 ALL",
    "SORT (REVERSE DATE) UTF-8 ALL",
    "SORT (FROM) UTF-8 ALL",
    "SORT (TO) UTF-8 ALL",
    "SORT (CC) UTF-8 ALL",
    "SORT (SIZE) UTF-8 ALL",
    "SORT (REVERSE SIZE) UTF-8 ALL",
    "SORT (SUBJECT) UTF-8 ALL",
    "SORT (SUBJECT DATE) US-ASCII ALL",
    "SORT (REVERSE SUBJECT REVERSE DATE) UTF-8 ALL",
    "SORT (DISPLAYFROM) UTF-8 ALL",
    "SORT (DISPLAYTO) UTF-8 ALL",
    "UID SORT (SUBJECT ARRIVAL) UTF-8 ALL",
    "SORT (DATE) UTF-8 FROM amy",
    "SORT (SUBJECT) UTF-8 2:5",
    "SORT RETURN (MIN MAX COUNT) (DATE) UTF-8 ALL",
    "SORT RETURN (ALL) (REVERSE SIZE) UTF-8 ALL",
    "UID SORT RETURN () (SUBJECT) UTF-8 ALL",
    "SORT RETURN (COUNT) (DATE) UTF-8 FROM nobody",
    "THREAD ORDEREDSUBJECT UTF-8 ALL",
    "UID THREAD ORDEREDSUBJECT UTF-8 ALL",
    "THREAD REFERENCES UTF-8 ALL",
    "UID THREAD REFERENCES UTF-8 ALL",
    "THREAD REFS UTF-8 ALL",
    "THREAD REFERENCES UTF-8 FROM amy",
    "THREAD ORDEREDSUBJECT UTF-8 FROM nobody",
    "SORT (DATE) X-NO-SUCH-CHARSET ALL",
    "SORT DATE UTF-8 ALL",
    "SORT () UTF-8 ALL",
    "SORT (DATE) UTF-8",
    "SORT (NONSENSE) UTF-8 ALL",
    "THREAD REFERENCES UTF-8",
    "SORT RETURN (FROB) (DATE) UTF-8 ALL",
]

def answer(r, cmd):
    u, t = r.cmd(cmd)
    if t != "OK":
        return (t,)
    # Dovecot ends an empty THREAD response with a space; RFC 5256 §5 has
    # none.
    return ([l.rstrip() for l in u if re.match(r"\* (SORT|THREAD|ESEARCH)\b", l)], t)

servers = [session(sys.argv[i], sys.argv[i + 1], sys.argv[i + 2]) for i in range(1, len(sys.argv), 3)]
results = [{cmd: answer(r, cmd) for cmd in SAME} for r in servers]
sluice = results[0]

# Sluice's answers, as RFC 5256 §3 and §4 work them out.
eq(sluice["SORT (ARRIVAL) UTF-8 ALL"], (["* SORT 4 5 2 3 1 6 7 8"], "OK"), "ARRIVAL")
eq(sluice["SORT (DATE) UTF-8 ALL"], (["* SORT 6 3 1 5 2 4 8 7"], "OK"), "DATE (no Date: is the internal date)")
eq(sluice["SORT (SUBJECT) UTF-8 ALL"], (["* SORT 8 4 5 1 2 3 6 7"], "OK"), "SUBJECT")
eq(sluice["SORT (FROM) UTF-8 ALL"], (["* SORT 2 6 7 8 1 3 5 4"], "OK"), "FROM local parts")
eq(sluice["SORT (TO) UTF-8 ALL"], (["* SORT 3 7 5 1 8 4 2 6"], "OK"), "TO")
eq(sluice["SORT (CC) UTF-8 ALL"], (["* SORT 1 2 3 5 7 6 8 4"], "OK"), "CC, none first")
eq(sluice["SORT (DISPLAYFROM) UTF-8 ALL"], (["* SORT 2 6 8 7 3 5 1 4"], "OK"), "DISPLAYFROM")
eq(sluice["SORT RETURN (MIN MAX COUNT) (DATE) UTF-8 ALL"],
   (['* ESEARCH (TAG "t%d") MIN 6 MAX 7 COUNT 8' % (SAME.index("SORT RETURN (MIN MAX COUNT) (DATE) UTF-8 ALL") + 11)], "OK"), "ESORT")
eq(sluice["THREAD ORDEREDSUBJECT UTF-8 ALL"], (["* THREAD (6 7)(3 (1)(2))(5 4)(8)"], "OK"), "ORDEREDSUBJECT")
eq(sluice["THREAD REFERENCES UTF-8 ALL"], (["* THREAD ((6)(5)(7))(1 2 3)(4)(8)"], "OK"), "REFERENCES")
for bad in ("SORT DATE UTF-8 ALL", "SORT () UTF-8 ALL", "SORT (DATE) UTF-8", "SORT (NONSENSE) UTF-8 ALL",
            "THREAD REFERENCES UTF-8", "SORT RETURN (FROB) (DATE) UTF-8 ALL"):
    eq(sluice[bad], ("BAD",), bad)
eq(sluice["SORT (DATE) X-NO-SUCH-CHARSET ALL"], ("NO",), "unknown charset")

# The tags differ by nothing: both servers got the same commands in order.
# Dovecot compares with i;unicode-casemap ("Émile" as "EMILE"), where
# RFC 5256 §3 and RFC 5957 §3 ask for i;ascii-casemap: that one answer
# differs (checked above).
UNICODE_CASEMAP = {"SORT (DISPLAYFROM) UTF-8 ALL"}
for other in results[1:]:
    diff = [(cmd, sluice[cmd], other[cmd]) for cmd in SAME
            if sluice[cmd] != other[cmd] and cmd not in UNICODE_CASEMAP]
    if diff:
        raise AssertionError("Sluice and Dovecot differ:\n" + "\n".join(
            "  %s\n    sluice  %r\n    dovecot %r" % d for d in diff))

# RFC 7162 §3.1.10 / RFC 4731 §3.2: with MIN or MAX alone, MODSEQ is the
# highest mod-sequence of the messages returned.
for r in servers:
    u, t = r.cmd("ENABLE CONDSTORE")
    u, t = r.cmd("STORE 8 +FLAGS (\\Flagged)")
    eq(t, "OK", "STORE")
    u, t = r.cmd("FETCH 1:* (MODSEQ)")
    modseq = {int(m.group(1)): int(m.group(2)) for m in
              (re.match(r"\* (\d+) FETCH \(.*MODSEQ \((\d+)\)", l) for l in u) if m}
    eq(sorted(modseq), list(range(1, 9)), "MODSEQ of every message")
    ok_top = max(modseq.values())
    assert modseq[8] == ok_top and modseq[1] < ok_top, modseq
    def esearch(cmd):
        u, t = r.cmd(cmd)
        eq(t, "OK", cmd)
        line = [l for l in u if l.startswith("* ESEARCH") or l.startswith("* SORT")]
        eq(len(line), 1, cmd)
        return re.sub(r'\(TAG "[^"]*"\) ', "", line[0])
    eq(esearch("SEARCH RETURN (MIN) MODSEQ 1"), "* ESEARCH MIN 1 MODSEQ %d" % modseq[1], "MIN alone")
    eq(esearch("SEARCH RETURN (MAX) MODSEQ 1"), "* ESEARCH MAX 8 MODSEQ %d" % modseq[8], "MAX alone")
    eq(esearch("SEARCH RETURN (MIN) 1:4 MODSEQ 1"), "* ESEARCH MIN 1 MODSEQ %d" % modseq[1], "MIN of some")
    eq(esearch("SEARCH RETURN (MIN MAX) 1:4 MODSEQ 1"),
       "* ESEARCH MIN 1 MAX 4 MODSEQ %d" % max(modseq[1], modseq[4]), "MIN MAX")
    eq(esearch("SEARCH RETURN (MIN COUNT) 1:4 MODSEQ 1"),
       "* ESEARCH MIN 1 COUNT 4 MODSEQ %d" % max(modseq[n] for n in range(1, 5)), "MIN COUNT")
    eq(esearch("UID SEARCH RETURN (MIN) MODSEQ 1")[:len("* ESEARCH UID MIN")], "* ESEARCH UID MIN", "UID form")
    eq(esearch("SORT RETURN (MIN) (DATE) UTF-8 MODSEQ 1"),
       "* ESEARCH MIN 6 MODSEQ %d" % modseq[6], "ESORT MIN alone")
    eq(esearch("SORT RETURN (MAX COUNT) (DATE) UTF-8 1:4 MODSEQ 1"),
       "* ESEARCH MAX 4 COUNT 4 MODSEQ %d" % max(modseq[n] for n in range(1, 5)), "ESORT MAX COUNT")
    # RFC 5182: `$` in SORT and THREAD.
    u, t = r.cmd("SEARCH RETURN (SAVE) FROM amy")
    eq(t, "OK", "SAVE")
    eq(esearch("SORT (REVERSE DATE) UTF-8 $"), "* SORT 7 8 6", "SORT of $")
    u, t = r.cmd("UID THREAD REFERENCES UTF-8 $")
    eq((t, [l.rstrip() for l in u if l.startswith("* THREAD")]), ("OK", ["* THREAD (6 7)(8)"]), "THREAD of $")
    eq(esearch("SORT (DATE) UTF-8 MODSEQ 1"),
       "* SORT 6 3 1 5 2 4 8 7 (MODSEQ %d)" % ok_top, "SORT with MODSEQ")
print("ok")
"#;

fn start_sluice() -> (Server, String) {
    let server = Server::start();
    let user = server.add_user("sorter");
    (server, user)
}

#[test]
fn sort_thread_and_esort_answer_as_dovecot_does() {
    let (server, user) = start_sluice();
    let dovecot = Dovecot::start(&[("sorter@example.org", "secret")]);
    let sluice_addr = server.imap.to_string();
    let dovecot_addr = dovecot.imap.to_string();
    let out = python(
        SCRIPT,
        &[
            &sluice_addr,
            &user,
            PASSWORD,
            &dovecot_addr,
            "sorter@example.org",
            "secret",
        ],
    );
    assert_eq!(out.trim(), "ok", "{out}");
    server.assert_no_panic();
}

#[test]
fn sort_capabilities_are_offered() {
    let (server, user) = start_sluice();
    let out = python(
        r#"
import imaplib, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
m.login(sys.argv[2], sys.argv[3])
typ, dat = m.capability()
caps = set(dat[0].decode().upper().split())
want = {"SORT", "SORT=DISPLAY", "ESORT", "THREAD=ORDEREDSUBJECT", "THREAD=REFERENCES", "THREAD=REFS"}
assert want <= caps, want - caps
m.select("INBOX")
# imaplib's own helpers: an empty mailbox sorts and threads to nothing.
typ, dat = m.sort("(DATE)", "UTF-8", "ALL")
assert typ == "OK" and dat in ([None], [b""]), (typ, dat)
typ, dat = m.thread("REFERENCES", "UTF-8", "ALL")
assert typ == "OK" and dat in ([None], [b""]), (typ, dat)
typ, dat = m.uid("SORT", "(REVERSE ARRIVAL)", "UTF-8", "ALL")
assert typ == "OK", (typ, dat)
try:
    m.thread("NOSUCH", "UTF-8", "ALL")
    raise AssertionError("an unknown algorithm was accepted")
except imaplib.IMAP4.error as e:
    assert "BAD" in str(e) or "algorithm" in str(e), str(e)
print("ok")
"#,
        &[&server.imap.to_string(), &user, PASSWORD],
    );
    assert_eq!(out.trim(), "ok", "{out}");
    server.assert_no_panic();
}
