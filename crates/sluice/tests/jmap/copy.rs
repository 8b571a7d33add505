//! Email/copy (RFC 8621 §4.7) and Blob/copy (RFC 8620 §6.3): within the
//! account the copy is the same Email filed in more mailboxes; no other
//! account may be copied from.

use super::raw_script;
use sluice_testkit as kit;

use kit::{venv_python, Server, PASSWORD};

#[test]
fn copies_stay_within_the_account() {
    let server = Server::start();
    let user = server.add_user("alice");
    let other = server.add_user("bob");
    let out = venv_python(
        &raw_script(
            r##"
s, h, body = raw("GET", "/jmap/session")
A = json.loads(body)["primaryAccounts"][MAIL]
s, h, body = raw("GET", "/jmap/session", auth=(sys.argv[4], password))
B = json.loads(body)["primaryAccounts"][MAIL]
assert A != B
def call(name, args):
    return api([[name, args, "c"]], using=(CORE, MAIL))["methodResponses"][0]
def ok(name, args):
    n, a, _ = call(name, args)
    assert n == name, (n, a)
    return a
roles = {m["role"]: m["id"] for m in ok("Mailbox/get", {"accountId": A, "ids": None})["list"]}
inbox, archive = roles["inbox"], roles["archive"]
r = ok("Email/set", {"accountId": A, "create": {"e": {"mailboxIds": {inbox: True},
    "from": [{"email": user}], "subject": "to copy",
    "bodyStructure": {"partId": "t", "type": "text/plain"}, "bodyValues": {"t": {"value": "x"}}}}})
e = r["created"]["e"]
r = ok("Email/copy", {"fromAccountId": A, "accountId": A, "create": {
    "c": {"id": e["id"], "mailboxIds": {archive: True}, "keywords": {"$flagged": True}},
    "gone": {"id": "E999999", "mailboxIds": {archive: True}},
    "nobox": {"id": e["id"], "mailboxIds": {"M999999": True}}}})
eq(r["created"]["c"]["id"], e["id"], "the same Email")
eq(r["created"]["c"]["blobId"], e["blobId"], "the same blob")
eq(r["notCreated"]["gone"]["type"], "notFound", "no such Email")
eq(r["notCreated"]["nobox"]["type"], "invalidProperties", "no such mailbox")
g = ok("Email/get", {"accountId": A, "ids": [e["id"]], "properties": ["mailboxIds", "keywords"]})["list"][0]
eq(g["mailboxIds"], {inbox: True, archive: True}, "in both")
eq(g["keywords"], {"$flagged": True}, "keywords set")
n, a, _ = call("Email/copy", {"fromAccountId": B, "accountId": A, "create": {"x": {"id": e["id"], "mailboxIds": {inbox: True}}}})
eq((n, a["type"]), ("error", "fromAccountNotFound"), "another account")
n, a, _ = call("Email/copy", {"fromAccountId": A, "accountId": A, "onSuccessDestroyOriginal": True, "create": {}})
eq(a["type"], "invalidArguments", "destroying the original would destroy the copy")

r = ok("Blob/copy", {"fromAccountId": A, "accountId": A, "blobIds": [e["blobId"], "B999999", "nonsense"]})
eq(r["copied"], {e["blobId"]: e["blobId"]}, "the blob is there")
eq(sorted(r["notCopied"]), ["B999999", "nonsense"], "not found")
eq(r["notCopied"]["B999999"]["type"], "blobNotFound", "type")
n, a, _ = call("Blob/copy", {"fromAccountId": B, "accountId": A, "blobIds": [e["blobId"]]})
eq(a["type"], "fromAccountNotFound", "another account's blobs")
n, a, _ = call("Blob/copy", {"fromAccountId": A, "accountId": B, "blobIds": [e["blobId"]]})
eq(a["type"], "accountNotFound", "into another account")
print("ok")
"##,
        ),
        &[&server.addr("http").to_string(), &user, PASSWORD, &other],
        &[],
    );
    assert_eq!(out.trim(), "ok", "{}", server.log());
}
