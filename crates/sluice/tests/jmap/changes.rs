//! `/changes` with `maxChanges` (RFC 8620 §5.2): many changes made over
//! IMAP (Python's imaplib: APPEND, STORE, COPY, EXPUNGE, CREATE, DELETE),
//! one at a time, then walked with maxChanges 1, 2 and 3 through the
//! intermediate states until `hasMoreChanges` is false; each page holds at
//! most maxChanges ids, no id comes twice, and the pages together say what
//! one unbounded call says, for Email, Mailbox and Thread alike.

use super::raw_script;
use sluice_testkit as kit;

use kit::{venv_python, Server, PASSWORD};

#[test]
fn max_changes_walks_intermediate_states_to_the_same_answer() {
    let server = Server::start();
    let user = server.add_user("alice");
    let out = venv_python(
        &raw_script(
            r##"
import imaplib
imap_addr = sys.argv[4]
ih, ip = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(ih, int(ip)); m.login(user, password)

def msg(i):
    return ("From: bob@example.net\r\nTo: %s\r\nSubject: note %d\r\nMessage-ID: <n%d@example.net>\r\n\r\nbody %d\r\n" % (user, i, i, i)).encode()

def append(box, i):
    typ, _ = m.append(box, None, None, msg(i)); assert typ == "OK"

def expunge_one(uid):
    m.uid("STORE", str(uid), "+FLAGS.SILENT", "(\\Deleted)")
    m.uid("EXPUNGE", str(uid))

# Before the state: three messages, and a mailbox that goes later.
for i in range(3):
    append("INBOX", i)
assert m.create("Old")[0] == "OK"
def account():
    s, h, body = raw("GET", "/jmap/session")
    return json.loads(body)["primaryAccounts"][MAIL]
acc = account()
def call(method, args):
    args = dict(args, accountId=acc)
    r = api([[method, args, "0"]], (CORE, MAIL))["methodResponses"][0]
    assert r[0] == method, r
    return r[1]
state0 = call("Email/get", {"ids": []})["state"]

# After it, one change at a time: new messages, flags, a copy into a new
# mailbox, messages gone (one there before, one come and gone), the old
# mailbox deleted.
m.select("INBOX")
for i in range(3, 10):
    append("INBOX", i)
for uid in (1, 4, 6):
    m.uid("STORE", str(uid), "+FLAGS.SILENT", "(\\Flagged)")
assert m.create("Work")[0] == "OK"
m.uid("COPY", "2", "Work")
m.uid("COPY", "5", "Work")
expunge_one(3)
expunge_one(7)
m.uid("STORE", "5", "+FLAGS.SILENT", "(\\Seen)")
assert m.delete("Old")[0] == "OK"
append("INBOX", 10)
m.logout()

for kind in ("Email", "Mailbox", "Thread"):
    full = call(kind + "/changes", {"sinceState": state0})
    assert not full["hasMoreChanges"], full
    total = len(full["created"]) + len(full["updated"]) + len(full["destroyed"])
    assert total >= 3, (kind, full)
    for max_changes in (1, 2, 3):
        since, pages = state0, 0
        got = {"created": [], "updated": [], "destroyed": []}
        while True:
            r = call(kind + "/changes", {"sinceState": since, "maxChanges": max_changes})
            eq(r["oldState"], since, "oldState")
            n = len(r["created"]) + len(r["updated"]) + len(r["destroyed"])
            assert 0 < n <= max_changes, (kind, max_changes, r)
            for k in got:
                got[k] += r[k]
            pages += 1
            assert pages <= total, (kind, max_changes, "no end", r)
            since = r["newState"]
            if not r["hasMoreChanges"]:
                break
        eq(since, full["newState"], "%s final state (max %d)" % (kind, max_changes))
        every = got["created"] + got["updated"] + got["destroyed"]
        assert len(every) == len(set(every)), (kind, max_changes, "an id twice", got)
        for k in got:
            eq(sorted(got[k]), sorted(full[k]), "%s %s (max %d)" % (kind, k, max_changes))
        assert max_changes > 1 or pages == total, (kind, pages, total)
    # An intermediate state from another account's walk, or a made-up one.
    for bad in ["1.2", "999999.1", "x.1"]:
        r = api([[kind + "/changes", {"accountId": acc, "sinceState": bad}, "0"]], (CORE, MAIL))
        eq(r["methodResponses"][0][1]["type"], "cannotCalculateChanges", bad)
print("ok")
"##,
        ),
        &[
            &server.addr("http").to_string(),
            &user,
            PASSWORD,
            &server.imap.to_string(),
        ],
        &[],
    );
    assert_eq!(out.trim(), "ok");
}
