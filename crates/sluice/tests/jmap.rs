//! JMAP (RFC 8620, 8621) against a real `sluice serve`: Python's `jmapc`
//! from PyPI for the common flows (over HTTPS, trusting the server's
//! generated certificate), and raw JSON over HTTP with `urllib` for the
//! error cases and what `jmapc` does not cover.

use sluice_testkit as kit;

use kit::{venv_python, Server, PASSWORD};

/// Python prelude for raw requests: `raw(method, path, body, headers,
/// auth)` answers (status, headers, body bytes), `api(calls, using)` the
/// decoded response of one API request; sys.argv[1:4] are the http
/// address, the user and the password.
const RAW: &str = r##"
import sys, json, base64, urllib.request, urllib.error
http_addr, user, password = sys.argv[1:4]
BASE = "http://" + http_addr
CORE = "urn:ietf:params:jmap:core"
MAIL = "urn:ietf:params:jmap:mail"

def raw(method, path, body=None, headers=None, auth=(user, password)):
    h = dict(headers or {})
    if auth:
        h["Authorization"] = "Basic " + base64.b64encode(("%s:%s" % auth).encode()).decode()
    req = urllib.request.Request(BASE + path, data=body, headers=h, method=method)
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k): return None
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()

def api(calls, using=(CORE,), extra=None):
    body = {"using": list(using), "methodCalls": calls}
    body.update(extra or {})
    status, headers, data = raw("POST", "/jmap/api", json.dumps(body).encode(),
                                {"Content-Type": "application/json"})
    assert status == 200, (status, data)
    return json.loads(data)

def problem(body, expect_type, status=400):
    s, h, data = raw("POST", "/jmap/api", body, {"Content-Type": "application/json"})
    assert s == status, (s, data)
    assert h["content-type"] == "application/problem+json", h
    p = json.loads(data)
    assert p["type"] == "urn:ietf:params:jmap:error:" + expect_type, p
    assert p["status"] == status, p
    return p

def eq(a, b, what):
    assert a == b, "%s: %r != %r" % (what, a, b)
"##;

#[path = "jmap/changes.rs"]
mod changes;
#[path = "jmap/copy.rs"]
mod copy;
#[path = "jmap/push_subscription.rs"]
mod push_subscription;
#[path = "jmap/submission.rs"]
mod submission;
#[path = "jmap/tokens.rs"]
mod tokens;
#[path = "jmap/vacation.rs"]
mod vacation;

fn raw_script(body: &str) -> String {
    format!("{RAW}\n{body}")
}

/// The session through jmapc over HTTPS (the server's own certificate
/// trusted), Core/echo, and a blob uploaded by jmapc and read back.
#[test]
fn jmapc_reads_the_session_echoes_and_uploads() {
    let server = Server::start();
    let user = server.add_user("alice");
    let https = server.addr("https");
    let ca = server.data_dir().join("tls/cert.pem");
    let out = venv_python(
        r##"
import sys, os, tempfile, requests
from jmapc import Client
from jmapc.methods import CoreEcho
host, user, password = sys.argv[1:4]
c = Client.create_with_password(host, user, password)
s = c.jmap_session
assert s.username == user, s
core = s.capabilities.core
assert core.max_calls_in_request >= 16 and core.max_objects_in_get >= 100, core
assert s.api_url == "https://%s/jmap/api" % host, s.api_url
assert c.account_id.startswith("A"), c.account_id
r = c.request(CoreEcho(data={"hello": [1, "two", None]}))
assert r.data == {"hello": [1, "two", None]}, r
data = os.urandom(300000) + b"\r\nend"
with tempfile.NamedTemporaryFile(suffix=".bin") as f:
    f.write(data); f.flush()
    blob = c.upload_blob(f.name)
assert blob.size == len(data) and blob.id.startswith("B"), blob
url = s.download_url.format(accountId=c.account_id, blobId=blob.id, name="x.bin", type="application/x-test")
got = c.requests_session.get(url)
assert got.status_code == 200, got
assert got.content == data, (len(got.content), len(data))
assert got.headers["Content-Type"] == "application/x-test", got.headers
assert got.headers["Content-Disposition"].startswith("attachment"), got.headers
assert got.headers["X-Content-Type-Options"] == "nosniff", got.headers
assert "sandbox" in got.headers["Content-Security-Policy"], got.headers
print("ok")
"##,
        &[&format!("127.0.0.1:{}", https.port()), &user, PASSWORD],
        &[("REQUESTS_CA_BUNDLE", ca.to_str().unwrap())],
    );
    assert_eq!(out.trim(), "ok");
}

/// Request-level errors as RFC 7807 problem details (RFC 8620 §3.6.1),
/// method-level errors, result references, createdIds, the redirect and
/// the login.
#[test]
fn errors_references_and_limits_as_the_rfc_names_them() {
    let server = Server::start_with("[jmap]\nmax_calls_in_request = 4\nmax_size_request = 4000\n");
    let user = server.add_user("alice");
    let out = venv_python(
        &raw_script(
            r##"
# The well-known URL redirects to the session; no login is needed there.
s, h, _ = raw("GET", "/.well-known/jmap", auth=None)
eq(s, 307, "redirect"); eq(h["location"], "/jmap/session", "Location")
# Without or with wrong credentials: 401 with a Basic challenge.
s, h, _ = raw("GET", "/jmap/session", auth=None)
eq(s, 401, "no credentials"); assert h["www-authenticate"].startswith("Basic"), h
s, h, _ = raw("POST", "/jmap/api", b"{}", auth=(user, "wrong"))
eq(s, 401, "wrong password")
s, h, body = raw("GET", "/jmap/session")
eq(s, 200, "session")
session = json.loads(body)
eq(session["capabilities"][CORE]["maxCallsInRequest"], 4, "limit from the config")
account = session["primaryAccounts"][CORE]
assert account in session["accounts"], session

problem(b"\xff{", "notJSON")
problem(b"{not json", "notJSON")
problem(b"[1, 2]", "notRequest")
problem(json.dumps({"using": [CORE]}).encode(), "notRequest")
problem(json.dumps({"using": [CORE], "methodCalls": [["Core/echo", {}]]}).encode(), "notRequest")
p = problem(json.dumps({"using": ["urn:example:nothing"], "methodCalls": []}).encode(), "unknownCapability")
assert "urn:example:nothing" in p["detail"], p
p = problem(json.dumps({"using": [CORE], "methodCalls": [["Core/echo", {}, str(i)] for i in range(5)]}).encode(), "limit")
eq(p["limit"], "maxCallsInRequest", "limit name")
p = problem(json.dumps({"using": [CORE], "methodCalls": [["Core/echo", {"x": "y" * 5000}, "0"]]}).encode(), "limit")
eq(p["limit"], "maxSizeRequest", "limit name")

r = api([
    ["Core/echo", {"list": [{"id": "a", "n": [1, 2]}, {"id": "b", "n": [3]}]}, "c0"],
    ["Core/echo", {"#ids": {"resultOf": "c0", "name": "Core/echo", "path": "/list/*/id"},
                   "#n": {"resultOf": "c0", "name": "Core/echo", "path": "/list/*/n"}}, "c1"],
    ["Core/echo", {"#x": {"resultOf": "c9", "name": "Core/echo", "path": "/list"}}, "c2"],
    ["No/such", {}, "c3"],
], extra={"createdIds": {"k1": "E1"}})
responses = r["methodResponses"]
eq(responses[0][0], "Core/echo", "echo")
eq(responses[1][1], {"ids": ["a", "b"], "n": [1, 2, 3]}, "references resolved")
eq(responses[2][0], "error", "bad reference")
eq(responses[2][1]["type"], "invalidResultReference", "bad reference")
eq(responses[2][2], "c2", "call id kept")
eq(responses[3][1]["type"], "unknownMethod", "unknown method")
eq(r["createdIds"], {"k1": "E1"}, "createdIds echoed")
eq(r["sessionState"], session["state"], "sessionState")
assert "createdIds" not in api([["Core/echo", {}, "0"]]), "createdIds only when sent"
# A method whose capability is not in using is unknown.
r = api([["Core/echo", {}, "0"]], using=[])
eq(r["methodResponses"][0][1]["type"], "unknownMethod", "capability not used")

# Blobs: an upload read back; another account's blob and nonsense ids are
# not found.
s, h, body = raw("POST", "/jmap/upload/%s/" % account, b"hello blob", {"Content-Type": "text/plain"})
eq(s, 201, "upload")
blob = json.loads(body)
eq((blob["accountId"], blob["type"], blob["size"]), (account, "text/plain", 10), "upload answer")
s, h, body = raw("GET", "/jmap/download/%s/%s/n.txt" % (account, blob["blobId"]))
eq((s, body, h["content-type"]), (200, b"hello blob", "text/plain"), "download")
for path in ["/jmap/download/%s/B999999/x" % account, "/jmap/download/%s/nonsense/x" % account,
             "/jmap/download/A999/%s/x" % blob["blobId"], "/jmap/upload/A999/"]:
    s, h, body = raw("GET" if "download" in path else "POST", path, None if "download" in path else b"x")
    eq(s, 404, path)
print("ok")
"##,
        ),
        &[&server.addr("http").to_string(), &user, PASSWORD],
        &[],
    );
    assert_eq!(out.trim(), "ok");
    let other = server.add_user("bob");
    // Bob cannot read what Alice uploaded.
    let out = venv_python(
        &raw_script(
            r##"
s, h, body = raw("GET", "/jmap/session")
account = json.loads(body)["primaryAccounts"][CORE]
s, h, body = raw("POST", "/jmap/upload/%s/" % account, b"bob's", {"Content-Type": "text/plain"})
eq(s, 201, "upload")
print(json.loads(body)["blobId"])
"##,
        ),
        &[&server.addr("http").to_string(), &other, PASSWORD],
        &[],
    );
    let bob_blob = out.trim().to_string();
    let out = venv_python(
        &raw_script(
            r##"
s, h, body = raw("GET", "/jmap/session")
account = json.loads(body)["primaryAccounts"][CORE]
s, h, body = raw("GET", "/jmap/download/%s/%s/x" % (account, sys.argv[4]))
eq(s, 404, "another account's blob")
print("ok")
"##,
        ),
        &[&server.addr("http").to_string(), &user, PASSWORD, &bob_blob],
        &[],
    );
    assert_eq!(out.trim(), "ok");
}

/// Uploads past maxSizeUpload are refused with the limit named. (That
/// plain HTTP is refused to clients off loopback cannot be shown from
/// loopback: the crate's unit tests check it.)
#[test]
fn uploads_past_the_limit_are_refused() {
    let server = Server::start_with("[jmap]\nmax_size_upload = 1000\n");
    let user = server.add_user("alice");
    let out = venv_python(
        &raw_script(
            r##"
s, h, body = raw("GET", "/jmap/session")
account = json.loads(body)["primaryAccounts"][CORE]
s, h, body = raw("POST", "/jmap/upload/%s/" % account, b"x" * 5000, {"Content-Type": "text/plain"})
eq(s, 413, "too large")
p = json.loads(body)
eq((p["type"], p["limit"]), ("urn:ietf:params:jmap:error:limit", "maxSizeUpload"), "problem")
s, h, body = raw("POST", "/jmap/upload/%s/" % account, b"x" * 1000, {"Content-Type": "text/plain"})
eq(s, 201, "at the limit")
print("ok")
"##,
        ),
        &[&server.addr("http").to_string(), &user, PASSWORD],
        &[],
    );
    assert_eq!(out.trim(), "ok");
}

/// Mail delivered over SMTP, read with jmapc: the inbox found by role,
/// Email/query, Email/get with bodies, attachments and parsed headers,
/// threads; a keyword set over JMAP is a flag over IMAP, a flag set over
/// IMAP is in Email/changes; an attachment downloaded as its part's blob.
#[test]
fn jmapc_reads_mail_delivered_over_smtp_and_shares_flags_with_imap() {
    let server = Server::start();
    let user = server.add_user("alice");
    let https = server.addr("https");
    let ca = server.data_dir().join("tls/cert.pem");
    let out = venv_python(
        r##"
import sys, smtplib, imaplib, base64
from jmapc import Client, Ref, Comparator, EmailQueryFilterCondition, MailboxQueryFilterCondition
from jmapc.methods import (MailboxGet, MailboxQuery, EmailQuery, EmailGet, EmailSet,
                           EmailChanges, ThreadGet, MailboxChanges)
host, smtp_addr, imap_addr, user, password = sys.argv[1:6]
attachment = bytes(range(256)) * 8
mails = [
    "From: Bob <bob@remote.test>\r\nTo: %s\r\nSubject: zebra report\r\nMessage-ID: <first@remote.test>\r\n"
    "Date: Tue, 1 Jul 2003 10:52:37 +0200\r\nX-Colour: blue\r\n\r\nThe zebra numbers are in.\r\n" % user,
    ("From: Carol <carol@remote.test>\r\nTo: %s\r\nSubject: Re: zebra report\r\nMessage-ID: <second@remote.test>\r\n"
     "In-Reply-To: <first@remote.test>\r\nReferences: <first@remote.test>\r\nMIME-Version: 1.0\r\n"
     "Content-Type: multipart/mixed; boundary=M\r\n\r\n--M\r\nContent-Type: text/plain; charset=utf-8\r\n"
     "Content-Transfer-Encoding: quoted-printable\r\n\r\nGr=C3=BC=C3=9Fe, see the file\r\n"
     "--M\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=data.bin\r\n"
     "Content-Transfer-Encoding: base64\r\n\r\n%s--M--\r\n") % (user, base64.encodebytes(attachment).decode()),
]
h, p = smtp_addr.rsplit(":", 1)
with smtplib.SMTP(h, int(p)) as s:
    for m in mails:
        s.sendmail("x@remote.test", [user], m)

c = Client.create_with_password(host, user, password)
from jmapc.client import ClientError
def req(calls, **kw):
    try:
        return c.request(calls, raise_errors=True, **kw)
    except ClientError as e:
        raise AssertionError(repr(e.result))
assert "urn:ietf:params:jmap:mail" in c.jmap_session.capabilities.urns
r = req([
    MailboxQuery(filter=MailboxQueryFilterCondition(role="inbox")),
    EmailQuery(filter=EmailQueryFilterCondition(in_mailbox=Ref("/ids/0")),
               sort=[Comparator(property="receivedAt", is_ascending=True)]),
    EmailGet(ids=Ref("/ids"), fetch_all_body_values=True),
])
inbox = r[0].response.ids[0]
ids = r[1].response.ids
assert len(ids) == 2, ids
first, second = r[2].response.data
assert first.subject == "zebra report", first
assert first.mail_from[0].email == "bob@remote.test" and first.mail_from[0].name == "Bob", first.mail_from
assert first.message_id == ["first@remote.test"], first.message_id
assert second.in_reply_to == ["first@remote.test"], second.in_reply_to
assert first.thread_id == second.thread_id, (first.thread_id, second.thread_id)
assert first.mailbox_ids == {inbox: True}, first.mailbox_ids
assert not first.keywords, first.keywords
assert "zebra numbers" in first.preview, first.preview
assert second.has_attachment and not first.has_attachment
text_part = second.text_body[0]
assert second.body_values[text_part.part_id].value.startswith("Grüße, see the file"), second.body_values
att = second.attachments[0]
assert att.name == "data.bin" and att.type == "application/octet-stream", att
url = c.jmap_session.download_url.format(accountId=c.account_id, blobId=att.blob_id, name="data.bin", type="application/octet-stream")
got = c.requests_session.get(url)
assert got.status_code == 200 and got.content == attachment, (got.status_code, len(got.content))
t = req(ThreadGet(ids=[first.thread_id]), single_response=True)
assert t.data[0].email_ids == [first.id, second.id], t.data

state = req(EmailGet(ids=[]), single_response=True).state
mailbox_state = req(MailboxGet(ids=None), single_response=True).state
# A keyword set over JMAP is a flag over IMAP.
r = req(EmailSet(update={first.id: {"keywords/$seen": True, "keywords/$label1": True}}), single_response=True)
assert first.id in r.updated, r
ih, ip = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(ih, int(ip)); m.login(user, password); m.select("INBOX")
typ, dat = m.fetch("1", "(FLAGS)")
assert b"\\Seen" in dat[0] and b"$label1" in dat[0].lower(), dat
# A flag set over IMAP is in Email/changes.
typ, dat = m.store("2", "+FLAGS", "(\\Flagged)")
m.logout()
ch = req(EmailChanges(since_state=state), single_response=True)
assert sorted(ch.updated) == sorted([first.id, second.id]) and not ch.created and not ch.destroyed, ch
got = req(EmailGet(ids=[second.id], properties=["keywords"]), single_response=True)
assert got.data[0].keywords == {"$flagged": True}, got.data[0].keywords
mc = req(MailboxChanges(since_state=mailbox_state), single_response=True)
assert mc.updated == [inbox] and not mc.created and not mc.destroyed, mc
print("ok")
"##,
        &[
            &format!("127.0.0.1:{}", https.port()),
            &server.smtp.to_string(),
            &server.imap.to_string(),
            &user,
            PASSWORD,
        ],
        &[("REQUESTS_CA_BUNDLE", ca.to_str().unwrap())],
    );
    assert_eq!(out.trim(), "ok");
}

/// The Mail methods with raw JSON: mailboxes made, renamed and destroyed
/// (seen over IMAP); emails created from a body structure and imported
/// from an upload; moved with a mailboxIds patch (seen over IMAP);
/// queried with filters, sorts, anchors and collapsed threads; header
/// forms; /changes for each type; and the method errors the RFC names.
#[test]
fn mail_methods_in_raw_json_with_imap_watching() {
    let server = Server::start_with("[jmap]\nmax_objects_in_get = 50\n");
    let user = server.add_user("alice");
    let out = venv_python(
        &raw_script(
            r##"
import imaplib
imap_addr = sys.argv[4]
s, h, body = raw("GET", "/jmap/session")
session = json.loads(body)
A = session["primaryAccounts"][MAIL]
eq(session["accountCapabilities"] if "accountCapabilities" in session else None, None, "no stray keys")
assert "emailQuerySortOptions" in session["accounts"][A]["accountCapabilities"][MAIL]
def call(name, args, using=(CORE, MAIL)):
    args = dict(args); args.setdefault("accountId", A)
    r = api([[name, args, "c"]], using=using)
    return r["methodResponses"][0]
def ok(name, args):
    n, a, _ = call(name, args)
    assert n == name, (n, a)
    return a
def err(name, args):
    n, a, _ = call(name, args)
    eq(n, "error", name)
    return a["type"]

boxes = ok("Mailbox/get", {"ids": None})
roles = {m["role"]: m for m in boxes["list"]}
assert {"inbox", "sent", "drafts", "trash", "junk", "archive"} <= set(roles), roles
inbox = roles["inbox"]["id"]
eq(roles["inbox"]["myRights"]["mayDelete"], False, "INBOX rights")
state0 = boxes["state"]

# Mailboxes: create (with a child by creation id), rename, destroy.
r = ok("Mailbox/set", {"create": {"p": {"name": "Projects"}, "c": {"name": "Q1", "parentId": "#p", "isSubscribed": True}},
                       "update": {inbox: {"name": "Renamed"}}})
assert set(r["created"]) == {"p", "c"}, r
eq(r["notUpdated"][inbox]["type"], "forbidden", "INBOX keeps its name")
projects, q1 = r["created"]["p"]["id"], r["created"]["c"]["id"]
r = ok("Mailbox/set", {"update": {q1: {"name": "Q2"}}, "create": {"bad": {"name": "a/b"}}})
assert q1 in r["updated"], r
eq(r["notCreated"]["bad"]["type"], "invalidProperties", "separator in a name")
ih, ip = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(ih, int(ip)); m.login(user, password)
typ, dat = m.list()
names = [l.decode().rsplit(" ", 1)[-1].strip('"') for l in dat]
assert "Projects/Q2" in names and "Projects" in names, names
m.logout()
ch = ok("Mailbox/changes", {"sinceState": state0})
eq(sorted(ch["created"]), sorted([projects, q1]), "created mailboxes")
q = ok("Mailbox/query", {"filter": {"parentId": projects}, "calculateTotal": True})
eq((q["ids"], q["total"]), ([q1], 1), "Mailbox/query by parent")
q = ok("Mailbox/query", {"sortAsTree": True, "filter": {"hasAnyRole": False}})
eq(q["ids"], [projects, q1], "tree order")
eq(ok("Mailbox/get", {"ids": [q1], "properties": ["name", "parentId", "isSubscribed"]})["list"][0],
   {"id": q1, "name": "Q2", "parentId": projects, "isSubscribed": True}, "renamed child")
eq(err("Mailbox/set", {"destroy": [projects]}), None, "placeholder") if False else None
r = ok("Mailbox/set", {"destroy": [projects]})
eq(r["notDestroyed"][projects]["type"], "mailboxHasChild", "a parent")

# Emails: created from a body structure, imported from an upload.
state1 = ok("Email/get", {"ids": []})["state"]
r = ok("Email/set", {"create": {"e1": {
    "mailboxIds": {inbox: True}, "keywords": {"$seen": True, "$Work": True},
    "from": [{"name": "Al Ice", "email": user}], "to": [{"email": "bob@remote.test"}],
    "subject": "Grüße aus Zürich", "header:X-Colour:asText": "blue",
    "messageId": ["made@here"], "receivedAt": "2024-01-02T03:04:05Z",
    "bodyStructure": {"type": "multipart/alternative", "subParts": [
        {"partId": "t", "type": "text/plain"}, {"partId": "h", "type": "text/html"}]},
    "bodyValues": {"t": {"value": "plain words here"}, "h": {"value": "<p>html words</p>"}}}}})
assert "e1" in r["created"], r
e1 = r["created"]["e1"]["id"]
raw_mail = b"From: Bob <bob@remote.test>\r\nTo: " + user.encode() + b"\r\nSubject: Re: Gr\xc3\xbc\xc3\x9fe aus Z\xc3\xbcrich\r\nIn-Reply-To: <made@here>\r\nReferences: <made@here>\r\nMessage-ID: <reply@remote.test>\r\n\r\nanswered, with zebras\r\n"
s, h, body = raw("POST", "/jmap/upload/%s/" % A, raw_mail, {"Content-Type": "message/rfc822"})
eq(s, 201, "upload")
blob = json.loads(body)["blobId"]
r = ok("Email/import", {"emails": {"i": {"blobId": blob, "mailboxIds": {inbox: True}, "receivedAt": "2024-02-01T00:00:00Z"}},})
assert "i" in r["created"], r
e2 = r["created"]["i"]["id"]
eq(r["created"]["i"]["threadId"], ok("Email/get", {"ids": [e1], "properties": ["threadId"]})["list"][0]["threadId"], "the reply joins the thread")
r = ok("Email/import", {"emails": {"x": {"blobId": "B999999", "mailboxIds": {inbox: True}}}})
eq(r["notCreated"]["x"]["type"], "blobNotFound", "import of nothing")

g = ok("Email/get", {"ids": [e1, "E99999"], "properties": ["subject", "keywords", "receivedAt", "header:X-Colour:asText",
        "header:Subject", "from", "textBody", "htmlBody", "bodyValues", "preview", "sentAt"],
        "fetchTextBodyValues": True, "fetchHTMLBodyValues": True, "maxBodyValueBytes": 5})
eq(g["notFound"], ["E99999"], "notFound")
e = g["list"][0]
eq(e["subject"], "Grüße aus Zürich", "subject")
eq(e["keywords"], {"$seen": True, "$work": True}, "keywords")
eq(e["receivedAt"], "2024-01-02T03:04:05Z", "receivedAt")
eq(e["header:X-Colour:asText"], "blue", "header as text")
assert "=?" in e["header:Subject"], e["header:Subject"]
eq(e["from"], [{"name": "Al Ice", "email": user}], "from")
eq([p["type"] for p in e["textBody"]], ["text/plain"], "textBody")
eq([p["type"] for p in e["htmlBody"]], ["text/html"], "htmlBody")
tp = e["textBody"][0]["partId"]
eq(e["bodyValues"][tp], {"value": "plain", "isEncodingProblem": False, "isTruncated": True}, "truncated value")
eq(e["preview"], "plain words here", "preview")
# IMAP sees the keywords as flags.
m = imaplib.IMAP4(ih, int(ip)); m.login(user, password); m.select("INBOX")
typ, dat = m.search(None, "SEEN KEYWORD $work")
eq(dat, [b"1"], "created message over IMAP")

# Queries.
def qids(args):
    return ok("Email/query", args)["ids"]
eq(qids({"filter": {"inMailbox": inbox}, "sort": [{"property": "receivedAt", "isAscending": True}]}), [e1, e2], "by date")
eq(qids({"filter": {"text": "zebras"}}), [e2], "text")
eq(qids({"filter": {"from": "bob@remote"}}), [e2], "from")
eq(qids({"filter": {"hasKeyword": "$seen"}}), [e1], "hasKeyword")
eq(qids({"filter": {"operator": "NOT", "conditions": [{"hasKeyword": "$seen"}]}}), [e2], "NOT")
eq(qids({"filter": {"before": "2024-01-15T00:00:00Z"}}), [e1], "before")
eq(qids({"filter": {"after": "2024-01-15T00:00:00Z", "maxSize": 100000}}), [e2], "after")
eq(qids({"filter": {"header": ["X-Colour", "blue"]}}), [e1], "header")
eq(qids({"filter": {"someInThreadHaveKeyword": "$seen"}, "sort": [{"property": "receivedAt"}]}), [e1, e2], "thread keyword")
eq(qids({"collapseThreads": True}), [e2], "collapsed")
eq(qids({"sort": [{"property": "subject"}, {"property": "receivedAt", "isAscending": False}]}), [e2, e1], "base subject ties, then date")
r = ok("Email/query", {"anchor": e1, "anchorOffset": 0, "limit": 1, "calculateTotal": True, "sort": [{"property": "size", "isAscending": False}]})
eq((r["total"], len(r["ids"])), (2, 1), "anchor")
eq(err("Email/query", {"anchor": "E424242"}), "anchorNotFound", "anchor")
eq(err("Email/query", {"filter": {"colour": "red"}}), "unsupportedFilter", "filter")
eq(err("Email/query", {"sort": [{"property": "colour"}]}), "unsupportedSort", "sort")
eq(err("Email/query", {"position": "one"}), "invalidArguments", "position")

# Move with a patch; IMAP sees it; /changes for emails, mailboxes, threads.
state2 = ok("Email/get", {"ids": []})["state"]
archive = roles["archive"]["id"]
r = ok("Email/set", {"update": {e2: {"mailboxIds/" + inbox: None, "mailboxIds/" + archive: True}}})
assert e2 in r["updated"], r
r = ok("Email/set", {"update": {e2: {"mailboxIds": {}}}, "destroy": ["E77777"]})
eq(r["notUpdated"][e2]["type"], "invalidProperties", "no mailbox")
eq(r["notDestroyed"]["E77777"]["type"], "notFound", "destroy nothing")
eq(ok("Email/get", {"ids": [e2], "properties": ["mailboxIds"]})["list"][0]["mailboxIds"], {archive: True}, "moved")
m.select("Archive")
typ, dat = m.search(None, "ALL")
eq(dat, [b"1"], "moved, seen over IMAP")
m.select("INBOX")
typ, dat = m.search(None, "ALL")
eq(dat, [b"1"], "one left in INBOX")
ch = ok("Email/changes", {"sinceState": state2})
eq((ch["created"], ch["updated"], ch["destroyed"]), ([], [e2], []), "moved is updated")
mc = ok("Mailbox/changes", {"sinceState": state2})
eq((sorted(mc["updated"]), mc["updatedProperties"]), (sorted([inbox, archive]), ["totalEmails", "unreadEmails", "totalThreads", "unreadThreads"]), "counts only")
r = ok("Email/set", {"destroy": [e1]})
eq(r["destroyed"], [e1], "destroy")
ch = ok("Email/changes", {"sinceState": state2})
eq(ch["destroyed"], [e1], "destroyed")
tc = ok("Thread/changes", {"sinceState": state1})
eq((len(tc["created"]), tc["destroyed"]), (1, []), "the thread came, and stays")
t = ok("Thread/get", {"ids": tc["created"]})
eq(t["list"][0]["emailIds"], [e2], "one left in the thread")
# Expunged over IMAP: destroyed in JMAP.
state3 = ch["newState"]
m.select("Archive"); m.store("1", "+FLAGS", "(\\Deleted)"); m.expunge(); m.logout()
ch = ok("Email/changes", {"sinceState": state3})
eq(ch["destroyed"], [e2], "expunged over IMAP")

# Method errors.
eq(err("Email/get", {"accountId": "A999"}), "accountNotFound", "account")
eq(err("Email/get", {"ids": ["E1"] * 51}), "requestTooLarge", "maxObjectsInGet")
eq(err("Email/get", {"properties": ["nonsense"]}), "invalidArguments", "property")
eq(err("Email/get", {"ids": [], "colour": 1}), "invalidArguments", "unknown argument")
eq(err("Email/set", {"ifInState": "0"}), "stateMismatch", "ifInState")
eq(err("Email/changes", {"sinceState": "999999"}), "cannotCalculateChanges", "a future state")
eq(err("Email/changes", {}), "invalidArguments", "no sinceState")
eq(err("Mailbox/get", {"ids": "M1"}), "invalidArguments", "ids not a list")
eq(call("Email/get", {"ids": []}, using=(CORE,))[1]["type"], "unknownMethod", "mail not in using")
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

/// The event source (RFC 8620 §7.3): a StateChange as soon as mail is
/// delivered over SMTP (the change notices IMAP IDLE waits on), and pings.
#[test]
fn the_event_source_tells_of_new_mail() {
    let server = Server::start();
    let user = server.add_user("alice");
    let out = venv_python(
        &raw_script(
            r##"
import smtplib, threading, http.client
smtp_addr = sys.argv[4]
s, h, body = raw("GET", "/jmap/session")
A = json.loads(body)["primaryAccounts"][MAIL]
state = api([["Email/get", {"accountId": A, "ids": []}, "0"]], using=(CORE, MAIL))["methodResponses"][0][1]["state"]
host, port = http_addr.rsplit(":", 1)
conn = http.client.HTTPConnection(host, int(port), timeout=30)
conn.request("GET", "/jmap/eventsource?types=Email,Mailbox&closeafter=state&ping=1",
             headers={"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()})
resp = conn.getresponse()
eq(resp.status, 200, "event source")
eq(resp.getheader("Content-Type"), "text/event-stream", "type")
events = []
def read():
    name = None
    for line in resp:
        line = line.decode().rstrip("\n")
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[6:])))
            if name == "ping" and len([e for e in events if e[0] == "ping"]) == 1:
                sent.set()
reader = threading.Thread(target=read); sent = threading.Event()
reader.start()
# The first ping says the stream is up; then a delivery.
assert sent.wait(20), events
h2, p2 = smtp_addr.rsplit(":", 1)
with smtplib.SMTP(h2, int(p2)) as smtp:
    smtp.sendmail("x@remote.test", [user], "Subject: hi\r\n\r\nnew\r\n")
reader.join(30)
assert not reader.is_alive(), "closeafter=state ends the stream"
changes = [d for n, d in events if n == "state"]
eq(len(changes), 1, "one StateChange")
c = changes[0]
eq(c["@type"], "StateChange", "type")
assert set(c["changed"][A]) == {"Email", "Mailbox"}, c
assert c["changed"][A]["Email"] != state, c
eq([d for n, d in events if n == "ping"][0], {"interval": 1}, "ping")
print("ok")
"##,
        ),
        &[
            &server.addr("http").to_string(),
            &user,
            PASSWORD,
            &server.smtp.to_string(),
        ],
        &[],
    );
    assert_eq!(out.trim(), "ok");
}

/// JMAP over WebSocket (RFC 8887) with Python's websockets: the session
/// names the URL, requests are answered with their ids, bad ones get
/// RequestErrors, and push sends a StateChange when mail arrives.
#[test]
fn requests_and_push_over_a_websocket() {
    let server = Server::start();
    let user = server.add_user("alice");
    let out = venv_python(
        &raw_script(
            r##"
import asyncio, smtplib, websockets
smtp_addr = sys.argv[4]
s, h, body = raw("GET", "/jmap/session")
session = json.loads(body)
cap = session["capabilities"]["urn:ietf:params:jmap:websocket"]
eq(cap["url"], "ws://%s/jmap/ws" % http_addr, "url")
eq(cap["supportsPush"], True, "push")
A = session["primaryAccounts"][MAIL]
auth = {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()}
def deliver():
    h2, p2 = smtp_addr.rsplit(":", 1)
    with smtplib.SMTP(h2, int(p2)) as smtp:
        smtp.sendmail("x@remote.test", [user], "Subject: pushed\r\n\r\nnew\r\n")
async def main():
    async with websockets.connect(cap["url"], subprotocols=["jmap"], additional_headers=auth) as ws:
        eq(ws.subprotocol, "jmap", "subprotocol")
        await ws.send(json.dumps({"@type": "Request", "id": "r1", "using": [CORE, MAIL],
                                  "methodCalls": [["Core/echo", {"x": 1}, "0"], ["Mailbox/get", {"accountId": A, "ids": None}, "1"]]}))
        r = json.loads(await ws.recv())
        eq((r["@type"], r["requestId"]), ("Response", "r1"), "response")
        eq(r["methodResponses"][0][1], {"x": 1}, "echo")
        await ws.send("{not json")
        e = json.loads(await ws.recv())
        eq((e["@type"], e["type"]), ("RequestError", "urn:ietf:params:jmap:error:notJSON"), "bad JSON")
        await ws.send(json.dumps({"@type": "Request", "id": "r2", "using": ["urn:x"], "methodCalls": []}))
        e = json.loads(await ws.recv())
        eq((e["requestId"], e["type"]), ("r2", "urn:ietf:params:jmap:error:unknownCapability"), "capability")
        await ws.send(json.dumps({"@type": "WebSocketPushEnable", "dataTypes": ["Email"]}))
        # Something to wait behind: the push is on once this is answered.
        await ws.send(json.dumps({"@type": "Request", "id": "r3", "using": [CORE], "methodCalls": []}))
        eq(json.loads(await ws.recv())["requestId"], "r3", "in order")
        await asyncio.get_running_loop().run_in_executor(None, deliver)
        c = json.loads(await asyncio.wait_for(ws.recv(), 30))
        eq(c["@type"], "StateChange", "push")
        eq(list(c["changed"][A]), ["Email"], "only the types asked for")
    # Without the subprotocol the upgrade is refused.
    try:
        async with websockets.connect(cap["url"], additional_headers=auth):
            raise AssertionError("accepted without the jmap subprotocol")
    except websockets.exceptions.InvalidStatus as e:
        eq(e.response.status_code, 400, "no subprotocol")
asyncio.run(main())
print("ok")
"##,
        ),
        &[
            &server.addr("http").to_string(),
            &user,
            PASSWORD,
            &server.smtp.to_string(),
        ],
        &[],
    );
    assert_eq!(out.trim(), "ok");
}

/// SearchSnippet/get (RFC 8621 §5): the words of a search marked in the
/// subject and the text of the emails it found.
#[test]
fn search_snippets_mark_the_words_found() {
    let server = Server::start();
    let user = server.add_user("alice");
    let out = venv_python(
        &raw_script(
            r##"
import smtplib
smtp_addr = sys.argv[4]
h2, p2 = smtp_addr.rsplit(":", 1)
with smtplib.SMTP(h2, int(p2)) as smtp:
    smtp.sendmail("x@remote.test", [user], "Subject: The zebra <report>\r\n\r\n" + "filler words " * 40 + "then ZEBRAS & lions\r\n")
s, h, body = raw("GET", "/jmap/session")
A = json.loads(body)["primaryAccounts"][MAIL]
f = {"text": "zebra"}
r = api([["Email/query", {"accountId": A, "filter": f}, "q"],
         ["SearchSnippet/get", {"accountId": A, "filter": f, "#emailIds": {"resultOf": "q", "name": "Email/query", "path": "/ids"}}, "s"],
         ["SearchSnippet/get", {"accountId": A, "emailIds": ["E4242"]}, "n"]], using=(CORE, MAIL))
q, snip, none = [x[1] for x in r["methodResponses"]]
eq(len(q["ids"]), 1, "found")
sn = snip["list"][0]
eq(sn["emailId"], q["ids"][0], "emailId")
eq(sn["subject"], "The <mark>zebra</mark> &lt;report&gt;", "subject marked")
assert "<mark>ZEBRA</mark>S &amp; lions" in sn["preview"], sn["preview"]
assert len(sn["preview"].replace("<mark>", "").replace("</mark>", "")) <= 255 + 10, sn["preview"]
eq(none["notFound"], ["E4242"], "notFound")
print("ok")
"##,
        ),
        &[
            &server.addr("http").to_string(),
            &user,
            PASSWORD,
            &server.smtp.to_string(),
        ],
        &[],
    );
    assert_eq!(out.trim(), "ok");
}

/// Quotas (RFC 9425): the storage limit the command line sets, with its
/// use, and the state moving when either does.
#[test]
fn the_storage_quota_is_a_jmap_quota() {
    let server = Server::start();
    let user = server.add_user("alice");
    let run = |script: &str, extra: &[&str]| {
        let mut args = vec![
            server.addr("http").to_string(),
            user.clone(),
            PASSWORD.to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        venv_python(&raw_script(script), &args, &[])
    };
    let prelude = r##"
QUOTA = "urn:ietf:params:jmap:quota"
s, h, body = raw("GET", "/jmap/session")
session = json.loads(body)
A = session["primaryAccounts"][QUOTA]
def q(name, args):
    args = dict(args); args["accountId"] = A
    return api([[name, args, "0"]], using=(CORE, QUOTA))["methodResponses"][0]
"##;
    let state = run(
        &format!(
            "{prelude}\nr = q('Quota/get', {{'ids': None}})[1]\neq(r['list'], [], 'no limit, no quota')\nprint(r['state'])"
        ),
        &[],
    );
    server.cli_ok(&["user", "quota", &user, "1000000"]);
    let out = run(
        &format!(
            r##"{prelude}
import smtplib
h2, p2 = sys.argv[5].rsplit(":", 1)
before = sys.argv[4].strip()
c = q("Quota/changes", {{"sinceState": before}})[1]
eq((c["created"], c["updated"]), (["Qoctets"], []), "a limit set")
state = c["newState"]
with smtplib.SMTP(h2, int(p2)) as smtp:
    smtp.sendmail("x@remote.test", [user], "Subject: hi\r\n\r\n" + "x" * 5000 + "\r\n")
r = q("Quota/get", {{"ids": ["Qoctets", "Qnone"]}})[1]
quota = r["list"][0]
eq((quota["resourceType"], quota["scope"], quota["hardLimit"], quota["types"]), ("octets", "account", 1000000, ["Mail"]), "quota")
assert quota["used"] > 5000, quota
eq(r["notFound"], ["Qnone"], "notFound")
c = q("Quota/changes", {{"sinceState": state}})[1]
eq(c["updated"], ["Qoctets"], "used changed")
eq(q("Quota/query", {{"filter": {{"resourceType": "octets"}}}})[1]["ids"], ["Qoctets"], "query")
eq(q("Quota/query", {{"filter": {{"scope": "domain"}}}})[1]["ids"], [], "query")
eq(q("Quota/changes", {{"sinceState": "nonsense"}})[1]["type"], "cannotCalculateChanges", "bad state")
print("ok")
"##
        ),
        &[state.trim(), &server.smtp.to_string()],
    );
    assert_eq!(out.trim(), "ok");
}

/// Email/parse (RFC 8621 §4.9): an uploaded message, and a message
/// attached to a stored one, read without storing them; other bytes are
/// not parsable.
#[test]
fn messages_in_blobs_are_parsed_without_being_stored() {
    let server = Server::start();
    let user = server.add_user("alice");
    let out = venv_python(
        &raw_script(
            r##"
import smtplib
smtp_addr = sys.argv[4]
inner = "From: Dan <dan@remote.test>\r\nSubject: the inner one\r\nMessage-ID: <inner@remote.test>\r\n\r\ninside text\r\n"
outer = ("From: Eve <eve@remote.test>\r\nTo: %s\r\nSubject: forwarded\r\nMIME-Version: 1.0\r\n"
         "Content-Type: multipart/mixed; boundary=F\r\n\r\n--F\r\nContent-Type: text/plain\r\n\r\nsee below\r\n"
         "--F\r\nContent-Type: message/rfc822\r\n\r\n%s\r\n--F--\r\n") % (user, inner)
h2, p2 = smtp_addr.rsplit(":", 1)
with smtplib.SMTP(h2, int(p2)) as smtp:
    smtp.sendmail("x@remote.test", [user], outer)
s, h, body = raw("GET", "/jmap/session")
A = json.loads(body)["primaryAccounts"][MAIL]
def ok(name, args):
    args = dict(args); args["accountId"] = A
    r = api([[name, args, "0"]], using=(CORE, MAIL))["methodResponses"][0]
    eq(r[0], name, r)
    return r[1]
e = ok("Email/query", {})["ids"][0]
att = ok("Email/get", {"ids": [e], "properties": ["attachments", "blobId"]})["list"][0]
part = att["attachments"][0]
eq(part["type"], "message/rfc822", "attached message")
s, h, body = raw("POST", "/jmap/upload/%s/" % A, inner.encode(), {"Content-Type": "message/rfc822"})
uploaded = json.loads(body)["blobId"]
s, h, body = raw("POST", "/jmap/upload/%s/" % A, b"\x89PNG\r\n\x1a\n\x00\x00", {"Content-Type": "image/png"})
png = json.loads(body)["blobId"]
before = ok("Email/get", {"ids": []})["state"]
r = ok("Email/parse", {"blobIds": [uploaded, part["blobId"], png, "B999999", att["blobId"] + "_1"],
                       "fetchTextBodyValues": True})
for b in (uploaded, part["blobId"]):
    p = r["parsed"][b]
    eq((p["subject"], p["messageId"], p["from"][0]["email"]), ("the inner one", ["inner@remote.test"], "dan@remote.test"), b)
    eq((p.get("id"), p.get("mailboxIds"), p.get("threadId")), (None, None, None), "not stored")
    tp = p["textBody"][0]["partId"]
    assert p["bodyValues"][tp]["value"].startswith("inside text"), p["bodyValues"]
eq(sorted(r["notParsable"]), sorted([png, att["blobId"] + "_1"]), "not messages")
eq(r["notFound"], ["B999999"], "no such blob")
eq(ok("Email/get", {"ids": []})["state"], before, "nothing was stored")
print("ok")
"##,
        ),
        &[
            &server.addr("http").to_string(),
            &user,
            PASSWORD,
            &server.smtp.to_string(),
        ],
        &[],
    );
    assert_eq!(out.trim(), "ok");
}

/// Email/queryChanges (RFC 8620 §5.6): after mail arrives over SMTP, a
/// flag is set over IMAP and an email is destroyed, the changes applied
/// to the old results give the new ones; queries that hang on threads
/// cannot be followed.
#[test]
fn query_changes_bring_old_results_to_the_new() {
    let server = Server::start();
    let user = server.add_user("alice");
    let out = venv_python(
        &raw_script(
            r##"
import smtplib, imaplib
smtp_addr, imap_addr = sys.argv[4:6]
h2, p2 = smtp_addr.rsplit(":", 1)
def deliver(n):
    with smtplib.SMTP(h2, int(p2)) as smtp:
        for i in range(n):
            smtp.sendmail("x@remote.test", [user], "Subject: mail %d\r\n\r\nbody\r\n" % i)
deliver(4)
s, h, body = raw("GET", "/jmap/session")
A = json.loads(body)["primaryAccounts"][MAIL]
def ok(name, args):
    args = dict(args); args["accountId"] = A
    r = api([[name, args, "0"]], using=(CORE, MAIL))["methodResponses"][0]
    eq(r[0], name, r)
    return r[1]
def err(name, args):
    args = dict(args); args["accountId"] = A
    r = api([[name, args, "0"]], using=(CORE, MAIL))["methodResponses"][0]
    eq(r[0], "error", r)
    return r[1]["type"]
query = {"filter": {"notKeyword": "$flagged"}, "sort": [{"property": "receivedAt", "isAscending": False}]}
old = ok("Email/query", query)
assert old["canCalculateChanges"], old
eq(len(old["ids"]), 4, "four")
deliver(2)
ih, ip = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(ih, int(ip)); m.login(user, password); m.select("INBOX")
m.store("2", "+FLAGS", "(\\Flagged)"); m.logout()
ok("Email/set", {"destroy": [old["ids"][0]]})
ch = ok("Email/queryChanges", dict(query, sinceQueryState=old["queryState"], calculateTotal=True))
new = ok("Email/query", query)
eq(ch["newQueryState"], new["queryState"], "state")
ids = [i for i in old["ids"] if i not in ch["removed"]]
for a in sorted(ch["added"], key=lambda a: a["index"]):
    ids.insert(a["index"], a["id"])
eq(ids, new["ids"], "old results with the changes are the new")
eq(ch["total"], len(new["ids"]), "total")
eq(err("Email/queryChanges", dict(query, sinceQueryState=old["queryState"], maxChanges=1)), "tooManyChanges", "maxChanges")
eq(err("Email/queryChanges", {"sinceQueryState": old["queryState"], "collapseThreads": True}), "cannotCalculateChanges", "threads")
eq(err("Email/queryChanges", {"sinceQueryState": "x"}), "cannotCalculateChanges", "a stranger's state")
print("ok")
"##,
        ),
        &[
            &server.addr("http").to_string(),
            &user,
            PASSWORD,
            &server.smtp.to_string(),
            &server.imap.to_string(),
        ],
        &[],
    );
    assert_eq!(out.trim(), "ok");
}

/// Mailbox/queryChanges: mailboxes made over IMAP and JMAP, renamed and
/// deleted; the changes applied to the old results give the new ones.
#[test]
fn mailbox_query_changes_follow_imap_and_jmap() {
    let server = Server::start();
    let user = server.add_user("alice");
    let out = venv_python(
        &raw_script(
            r##"
import imaplib
imap_addr = sys.argv[4]
s, h, body = raw("GET", "/jmap/session")
A = json.loads(body)["primaryAccounts"][MAIL]
def ok(name, args):
    args = dict(args); args["accountId"] = A
    r = api([[name, args, "0"]], using=(CORE, MAIL))["methodResponses"][0]
    eq(r[0], name, r)
    return r[1]
query = {"filter": {"hasAnyRole": False}, "sort": [{"property": "name"}]}
made = ok("Mailbox/set", {"create": {"a": {"name": "Alpha"}, "c": {"name": "Charlie"}}})["created"]
old = ok("Mailbox/query", query)
assert old["canCalculateChanges"], old
eq(len(old["ids"]), 2, "two")
ih, ip = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(ih, int(ip)); m.login(user, password)
m.create("Bravo"); m.rename("Charlie", "Aaron"); m.logout()
ok("Mailbox/set", {"destroy": [made["a"]["id"]]})
ch = ok("Mailbox/queryChanges", dict(query, sinceQueryState=old["queryState"]))
new = ok("Mailbox/query", query)
ids = [i for i in old["ids"] if i not in ch["removed"]]
for a in sorted(ch["added"], key=lambda a: a["index"]):
    ids.insert(a["index"], a["id"])
eq(ids, new["ids"], "old results with the changes are the new")
eq(len(new["ids"]), 2, "Aaron and Bravo")
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
