//! Identity and EmailSubmission (RFC 8621 §6, §7) in raw JSON: sending
//! through the outbound queue to a remote MX (Postfix's `smtp-sink`),
//! where the message arrives DKIM-signed (checked by dkimpy against the
//! key in `nsd`), and to a local account.

use std::process::Command;
use std::time::Duration;

use super::raw_script;
use sluice_testkit as kit;

use kit::{
    outbound_config, venv_python, wait_until, Dns, Server, SmtpSink, Zone, DOMAIN, PASSWORD,
};

/// Prelude for these tests: `ok(name, args)` and `call(name, args)` with
/// the submission capability; sys.argv[4] is the account's id.
const CALLS: &str = r##"
SUB = "urn:ietf:params:jmap:submission"
s, h, body = raw("GET", "/jmap/session")
session = json.loads(body)
A = session["primaryAccounts"][MAIL]
def call(name, args, using=(CORE, MAIL, SUB)):
    args = dict(args); args.setdefault("accountId", A)
    return api([[name, args, "c"]], using=using)["methodResponses"]
def ok(name, args):
    r = call(name, args)
    assert r[0][0] == name, r
    return r[0][1]
"##;

fn script(body: &str) -> String {
    raw_script(&format!("{CALLS}\n{body}"))
}

/// Identities for the account's own address and its alias, one more
/// created for an alias, none for an address it may not use
/// (forbiddenFrom), and /changes with intermediate states.
#[test]
fn identities_follow_the_addresses_the_account_may_send_as() {
    let server = Server::start();
    let user = server.add_user("alice");
    server.cli_ok(&["alias", "add", &format!("sales@{DOMAIN}"), &user]);
    server.cli_ok(&["alias", "add", &format!("help@{DOMAIN}"), &user]);
    assert!(wait_until(Duration::from_secs(10), || server
        .rcpt_accepted(&format!("help@{DOMAIN}"))));
    let out = venv_python(
        &script(
            r##"
sess = session["capabilities"][SUB]
eq(session["accounts"][A]["accountCapabilities"][SUB]["maxDelayedSend"], 0, "no delayed sending")
g = ok("Identity/get", {"ids": None})
emails = sorted(i["email"] for i in g["list"])
eq(emails, sorted([user, "sales@example.org", "help@example.org"]), "one identity per address")
assert all(i["mayDelete"] for i in g["list"]), g
s0 = g["state"]
eq(ok("Identity/get", {"ids": None})["state"], s0, "made once")
mine = [i for i in g["list"] if i["email"] == user][0]

r = ok("Identity/set", {"create": {
    "a": {"name": "Sales desk", "email": "sales@example.org", "replyTo": [{"name": None, "email": "help@example.org"}]},
    "tag": {"email": "alice+lists@example.org"},
    "x": {"email": "boss@example.org"},
    "far": {"email": "someone@remote.test"},
    "bad": {"email": user, "mayDelete": False}}})
assert set(r["created"]) == {"a", "tag"}, r
eq(r["notCreated"]["x"]["type"], "forbiddenFrom", "an address of another")
eq(r["notCreated"]["far"]["type"], "forbiddenFrom", "a remote address")
eq(r["notCreated"]["bad"]["type"], "invalidProperties", "server-set property")
sales, tag = r["created"]["a"]["id"], r["created"]["tag"]["id"]
r = ok("Identity/set", {"update": {mine["id"]: {"name": "Alice", "textSignature": "-- \nA"},
                                   sales: {"email": "help@example.org"}}})
assert mine["id"] in r["updated"], r
eq(r["notUpdated"][sales]["type"], "invalidProperties", "email is immutable")
got = ok("Identity/get", {"ids": [mine["id"], "Inothing"]})
eq((got["list"][0]["name"], got["list"][0]["textSignature"]), ("Alice", "-- \nA"), "updated")
eq(got["notFound"], ["Inothing"], "notFound")

ch = ok("Identity/changes", {"sinceState": s0})
eq(sorted(ch["created"]), sorted([sales, tag]), "created")
eq(ch["updated"], [mine["id"]], "updated")
eq(ch["hasMoreChanges"], False, "all")
# maxChanges: the oldest first, with a state in between.
c1 = ok("Identity/changes", {"sinceState": s0, "maxChanges": 1})
eq((len(c1["created"]) + len(c1["updated"]), c1["hasMoreChanges"]), (1, True), "one change")
assert c1["newState"] not in (s0, ch["newState"]), c1
c2 = ok("Identity/changes", {"sinceState": c1["newState"], "maxChanges": 10})
eq(c2["hasMoreChanges"], False, "the rest")
eq(c2["newState"], ch["newState"], "the same end")
eq(sorted(c1["created"] + c2["created"] + c1["updated"] + c2["updated"]),
   sorted(ch["created"] + ch["updated"]), "nothing lost between the two")

r = ok("Identity/set", {"destroy": [sales, "Inothing"]})
eq(r["destroyed"], [sales], "destroyed")
eq(r["notDestroyed"]["Inothing"]["type"], "notFound", "unknown")
eq(ok("Identity/changes", {"sinceState": r["oldState"]})["destroyed"], [sales], "destroyed in changes")
eq(call("Identity/changes", {"sinceState": "999"})[0][1]["type"], "cannotCalculateChanges", "future state")
# Without the capability, the methods are unknown.
eq(call("Identity/get", {}, using=(CORE, MAIL))[0][1]["type"], "unknownMethod", "capability needed")
print("ok")
"##,
        ),
        &[&server.addr("http").to_string(), &user, PASSWORD],
        &[],
    );
    assert_eq!(out.trim(), "ok", "{}", server.log());
}

/// Verifies every DKIM-Signature of `message` with dkimpy, the keys from
/// `dns`: one `SELECTOR pass|fail` line each.
fn dkim_verify(message: &str, dns: &Dns) -> Vec<String> {
    const VERIFY: &str = r#"
import re, sys
import dkim, dns.resolver
port = int(sys.argv[1])
message = sys.stdin.buffer.read()
message = re.sub(rb"\A(X-(Client-Addr|Client-Proto|Helo-Args|Mail-Args|Rcpt-Args):[^\n]*\n)+", b"", message)
message = re.sub(rb"\r?\n", b"\r\n", message)
r = dns.resolver.Resolver(configure=False)
r.nameservers = ["127.0.0.1"]
r.port = port
def txt(name, timeout=5):
    name = name.decode() if isinstance(name, bytes) else name
    for rr in r.resolve(name, "TXT"):
        return b"".join(rr.strings)
d = dkim.DKIM(message)
signatures = re.findall(rb"(?ims)^DKIM-Signature:(.*?)\r\n(?=[^ \t])", message)
for i, sig in enumerate(signatures):
    selector = re.search(rb"\bs=\s*([^;\s]+)", sig).group(1).decode()
    try:
        ok = d.verify(idx=i, dnsfunc=txt)
    except dkim.ValidationError:
        ok = False
    print(selector, "pass" if ok else "fail")
"#;
    let mut child = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(VERIFY)
        .arg(dns.addr.port().to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("/usr/bin/python3 with python3-dkim (test.sh installs it)");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), message.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "dkimpy failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// A draft sent with EmailSubmission/set: to a remote MX through the
/// queue, DKIM-signed, and to a local account; on success it moves from
/// Drafts to Sent without `$draft`. The submission checks refuse another
/// sender, and a sent message cannot be canceled.
#[test]
fn email_submission_sends_through_the_queue_signed_and_files_the_draft() {
    let sink = SmtpSink::start(&[]);
    let mut dns = Dns::start(vec![Zone::new(DOMAIN, &[])]);
    let server = Server::start_with(&outbound_config(dns.addr, &[("remote.test", sink.addr)]));
    let user = server.add_user("alice");
    let bob = server.add_user("bob");
    server.cli_ok(&["dkim", "keygen", DOMAIN, "--selector", "j1"]);
    let record = server.cli_ok(&["dkim", "record", DOMAIN, "j1"]);
    dns.set_zone(Zone::new(DOMAIN, &[record.trim()]));
    let out = venv_python(
        &script(
            r##"
import imaplib
bob, imap_addr = sys.argv[4:6]
boxes = ok("Mailbox/get", {"ids": None})["list"]
roles = {m["role"]: m["id"] for m in boxes}
drafts, sent = roles["drafts"], roles["sent"]
ident = [i for i in ok("Identity/get", {"ids": None})["list"] if i["email"] == user][0]["id"]
sub_state = ok("EmailSubmission/get", {"ids": []})["state"]

def draft(frm, to, subject):
    r = ok("Email/set", {"create": {"d": {
        "mailboxIds": {drafts: True}, "keywords": {"$draft": True, "$seen": True},
        "from": [{"name": "Alice", "email": frm}], "to": [{"email": a} for a in to],
        "subject": subject,
        "bodyStructure": {"partId": "t", "type": "text/plain"},
        "bodyValues": {"t": {"value": "A body with  double  spaces\r\n"}}}}})
    assert "d" in r["created"], r
    return r["created"]["d"]["id"]

# Sent to a remote and a local recipient, the draft moved to Sent.
e1 = draft(user, ["friend@remote.test", bob], "jmap sent")
r = call("EmailSubmission/set", {
    "create": {"s": {"identityId": ident, "emailId": e1}},
    "onSuccessUpdateEmail": {"#s": {"mailboxIds/" + drafts: None, "mailboxIds/" + sent: True, "keywords/$draft": None}}})
eq([x[0] for x in r], ["EmailSubmission/set", "Email/set"], "the implicit Email/set follows")
created = r[0][1]["created"]["s"]
sid = created["id"]
eq(created["undoStatus"], "final", "the queue sends at once")
q0 = ok("EmailSubmission/query", {})
eq(q0["ids"], [sid], "one submission")
eq(q0["canCalculateChanges"], True, "queryChanges is answered")
assert e1 in r[1][1]["updated"], r
e = ok("Email/get", {"ids": [e1], "properties": ["mailboxIds", "keywords"]})["list"][0]
eq(e["mailboxIds"], {sent: True}, "moved to Sent")
eq(e["keywords"], {"$seen": True}, "no longer a draft")

g = ok("EmailSubmission/get", {"ids": [sid, "Snothing"]})
s = g["list"][0]
eq((s["identityId"], s["emailId"], s["undoStatus"]), (ident, e1, "final"), "the submission")
eq(s["envelope"]["mailFrom"]["email"], user, "envelope from the header")
eq(sorted(a["email"] for a in s["envelope"]["rcptTo"]), sorted(["friend@remote.test", bob]), "recipients from To")
eq(s["deliveryStatus"][bob]["delivered"], "yes", "local delivery")
eq(s["deliveryStatus"]["friend@remote.test"]["delivered"], "queued", "queued for the remote MX")
eq(g["notFound"], ["Snothing"], "notFound")

# Too late to cancel.
r = ok("EmailSubmission/set", {"update": {sid: {"undoStatus": "canceled"}}})
eq(r["notUpdated"][sid]["type"], "cannotUnsend", "cancel after sending")

# The local recipient has it, unread.
ih, ip = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(ih, int(ip)); m.login(bob, password); m.select("INBOX")
typ, dat = m.search(None, "UNSEEN", "SUBJECT", '"jmap sent"')
eq(len(dat[0].split()), 1, "in bob's INBOX, unseen")
m.logout()

# An explicit envelope; the email destroyed on success.
e2 = draft(user, ["nobody@remote.test"], "explicit envelope")
r = call("EmailSubmission/set", {
    "create": {"s": {"identityId": ident, "emailId": e2, "envelope": {
        "mailFrom": {"email": user}, "rcptTo": [{"email": "other@remote.test"}]}}},
    "onSuccessDestroyEmail": ["#s"]})
assert "s" in r[0][1]["created"], r
eq(r[1][1]["destroyed"], [e2], "destroyed on success")

# The submission checks.
e3 = draft("boss@example.org", ["friend@remote.test"], "not mine")
e4 = draft(user, ["nobody@example.org"], "unknown local")
r = ok("EmailSubmission/set", {"create": {
    "from": {"identityId": ident, "emailId": e3},
    "mailfrom": {"identityId": ident, "emailId": e4, "envelope": {
        "mailFrom": {"email": "boss@example.org"}, "rcptTo": [{"email": "friend@remote.test"}]}},
    "unknown": {"identityId": ident, "emailId": e4},
    "params": {"identityId": ident, "emailId": e4, "envelope": {
        "mailFrom": {"email": user, "parameters": {"SIZE": "10"}}, "rcptTo": [{"email": "friend@remote.test"}]}},
    "noident": {"identityId": "Inothing", "emailId": e4},
    "noemail": {"identityId": ident, "emailId": "E999999"}}})
nc = r["notCreated"]
eq(nc["from"]["type"], "forbiddenFrom", "From of another account")
eq(nc["mailfrom"]["type"], "forbiddenMailFrom", "envelope sender of another")
eq(nc["unknown"]["type"], "invalidRecipients", "an unknown local recipient")
eq(nc["unknown"]["invalidRecipients"], ["nobody@example.org"], "named")
eq(nc["params"]["type"], "invalidProperties", "SMTP parameters")
eq(nc["noident"]["type"], "invalidProperties", "unknown identity")
eq(nc["noemail"]["type"], "invalidEmail", "unknown email")

q = ok("EmailSubmission/query", {"filter": {"emailIds": [e1]}, "calculateTotal": True})
eq((q["ids"], q["total"]), ([sid], 1), "query by email")
q = ok("EmailSubmission/query", {"sort": [{"property": "sentAt", "isAscending": False}]})
eq(len(q["ids"]), 2, "two sent")
ch = ok("EmailSubmission/changes", {"sinceState": sub_state})
eq(len(ch["created"]), 2, "two created")
q = ok("EmailSubmission/query", {})
s2 = [i for i in q["ids"] if i != sid][0]
qc = ok("EmailSubmission/queryChanges", {"sinceQueryState": q0["queryState"]})
eq(qc["oldQueryState"], q0["queryState"], "from the state asked")
eq(qc["newQueryState"], q["queryState"], "to the query's state")
eq(qc["added"], [{"id": s2, "index": 1}], "the second submission, after the first")
eq(qc["removed"], [s2], "only it changed")
qc = ok("EmailSubmission/queryChanges", {"sinceQueryState": q0["queryState"], "filter": {"emailIds": [e1]}})
eq(qc["added"], [], "the filter leaves it out")
eq(call("EmailSubmission/queryChanges", {"sinceQueryState": "bogus"})[0][1]["type"], "cannotCalculateChanges", "a state never given")
eq(call("EmailSubmission/queryChanges", {"sinceQueryState": q0["queryState"], "maxChanges": 1})[0][1]["type"], "tooManyChanges", "maxChanges")
eq(call("EmailSubmission/queryChanges", {})[0][1]["type"], "invalidArguments", "sinceQueryState is required")
r = ok("EmailSubmission/set", {"destroy": [sid]})
eq(r["destroyed"], [sid], "a submission may be forgotten")
qc = ok("EmailSubmission/queryChanges", {"sinceQueryState": q["queryState"]})
eq((qc["removed"], qc["added"]), ([sid], []), "destroyed: removed")
print("ok")
"##,
        ),
        &[
            &server.addr("http").to_string(),
            &user,
            PASSWORD,
            &bob,
            &server.addr("imap").to_string(),
        ],
        &[],
    );
    assert_eq!(out.trim(), "ok", "{}", server.log());
    assert!(
        wait_until(Duration::from_secs(20), || {
            sink.messages().len() >= 2
                && server
                    .cli_ok(&["queue", "list"])
                    .contains("the queue is empty")
        }),
        "{} messages reached the sink; queue:\n{}",
        sink.messages().len(),
        server.cli_ok(&["queue", "list"])
    );
    let messages = sink.messages();
    let first = messages
        .iter()
        .find(|m| m.contains("Subject: jmap sent"))
        .expect("the first submission reached the MX");
    assert_eq!(dkim_verify(first, &dns), ["j1 pass"], "{first}");
    let _second = messages
        .iter()
        .find(|m| m.contains("Subject: explicit envelope"))
        .expect("the second submission reached the MX");
    assert!(!messages.iter().any(|m| m.contains("not mine")));
}
