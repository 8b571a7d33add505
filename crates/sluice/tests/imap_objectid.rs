//! OBJECTID (RFC 8474) against a real `sluice serve` through Python's
//! imaplib: MAILBOXID after SELECT, CREATE and in STATUS, EMAILID and
//! THREADID in FETCH and SEARCH, and the ids equal to JMAP's.

use sluice_testkit as kit;

use kit::{python, Server, PASSWORD};

const SCRIPT: &str = r##"
import base64, imaplib, json, re, sys, urllib.request
imap_addr, http_addr, user, pw = sys.argv[1:5]
h, p = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
m.login(user, pw)
typ, dat = m.capability()
assert "OBJECTID" in dat[0].decode().upper().split(), dat
typ, dat = m.create("Other")
assert typ == "OK", (typ, dat)
assert re.search(rb"\[MAILBOXID \(M\d+\)\]", dat[0]), dat
msg = b"From: a@x.test\r\nSubject: hi\r\nMessage-ID: <r@x.test>\r\n\r\nroot\r\n"
reply = b"From: b@x.test\r\nSubject: Re: hi\r\nMessage-ID: <s@x.test>\r\nReferences: <r@x.test>\r\n\r\nreply\r\n"
for raw in (msg, reply):
    assert m.append("INBOX", None, None, raw)[0] == "OK"
typ, dat = m.select("INBOX")
assert typ == "OK"
mbid = m.untagged_responses.get("MAILBOXID")
assert mbid and re.fullmatch(rb"\(M\d+\)", mbid[0]), m.untagged_responses
inbox = mbid[0][1:-1].decode()
typ, dat = m._simple_command("STATUS", "INBOX", "(MESSAGES MAILBOXID)")
st = m._untagged_response(typ, dat, "STATUS")[1][0].decode()
assert re.search(r"MESSAGES 2 MAILBOXID \(%s\)" % inbox, st), st
typ, dat = m._simple_command("STATUS", "INBOX", "(MAILBOXID)")
st = m._untagged_response(typ, dat, "STATUS")[1][0].decode()
assert st.endswith("(MAILBOXID (%s))" % inbox), st
typ, dat = m.fetch("1:2", "(EMAILID THREADID)")
assert typ == "OK", dat
got = [re.search(rb"EMAILID \((\w+)\) THREADID \((\w+)\)", d).groups() for d in dat]
assert got[0][0] != got[1][0] and got[0][1] == got[1][1], got
assert b"UID" not in dat[0], dat
typ, dat = m.fetch("1", "(FLAGS EMAILID)")
assert typ == "OK" and b"FLAGS" in dat[0] and b"EMAILID" in dat[0], dat
typ, dat = m.search(None, "EMAILID", got[1][0].decode())
assert dat == [b"2"], dat
typ, dat = m.search(None, "THREADID", got[0][1].decode())
assert dat == [b"1 2"], dat
typ, dat = m.search(None, "EMAILID", "Enope")
assert dat == [b""], dat
for bad in ('SEARCH EMAILID', 'FETCH 1 (EMAILID', 'SEARCH THREADID "x"'):
    try:
        m.xatom(*bad.split(" ", 1))
        raise AssertionError("accepted: " + bad)
    except imaplib.IMAP4.error as e:
        pass
# COPY keeps the email id (RFC 8474 §5.1).
assert m.copy("1", "Other")[0] == "OK"
m.select("Other")
typ, dat = m.fetch("1", "(EMAILID)")
assert re.search(rb"EMAILID \((\w+)\)", dat[0]).group(1) == got[0][0], dat
# The same ids over JMAP.
auth = "Basic " + base64.b64encode(("%s:%s" % (user, pw)).encode()).decode()
req = urllib.request.Request("http://%s/jmap/session" % http_addr, headers={"Authorization": auth})
acct = json.loads(urllib.request.urlopen(req).read())["primaryAccounts"]["urn:ietf:params:jmap:mail"]
body = {"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/query", {"accountId": acct, "filter": {"inMailbox": inbox}}, "q"],
                        ["Email/get", {"accountId": acct, "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"},
                                       "properties": ["id", "threadId", "mailboxIds"]}, "g"]]}
req = urllib.request.Request("http://%s/jmap/api" % http_addr, data=json.dumps(body).encode(),
                             headers={"Authorization": auth, "Content-Type": "application/json"})
res = json.loads(urllib.request.urlopen(req).read())
assert res["methodResponses"][1][0] == "Email/get", res
emails = {e["id"]: e["threadId"] for e in res["methodResponses"][1][1]["list"]}
assert emails == {g[0].decode(): g[1].decode() for g in got}, (emails, got)
print("ok")
"##;

#[test]
fn object_ids_are_jmap_ids() {
    let server = Server::start();
    let user = server.add_user("objects");
    let out = python(
        SCRIPT,
        &[
            &server.imap.to_string(),
            &server.addr("http").to_string(),
            &user,
            PASSWORD,
        ],
    );
    assert_eq!(out.trim(), "ok", "{out}");
    server.assert_no_panic();
}
