//! PushSubscription (RFC 8620 §7.2) against a receiver the test runs on
//! loopback (Python's http.server): the PushVerification on creation,
//! nothing pushed before the client proves it got it, then StateChange
//! objects after SMTP deliveries, a failed push tried again, and the
//! changes of identities and vacation pushed like those of mail.

use super::raw_script;
use sluice_testkit as kit;

use kit::{venv_python, Server, PASSWORD};

const SCRIPT: &str = r##"
import threading, queue, http.server, smtplib, time
smtp_addr = sys.argv[4]
VAC = "urn:ietf:params:jmap:vacationresponse"
SUB = "urn:ietf:params:jmap:submission"
posts = {"/push/phone": queue.Queue(), "/push/tablet": queue.Queue()}
fail = {"n": 0}
class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(n))
        ok = True
        if body.get("@type") == "StateChange" and fail["n"] > 0:
            fail["n"] -= 1
            ok = False
        posts[self.path].put({"body": body, "ttl": self.headers.get("TTL"),
                   "type": self.headers.get("Content-Type"), "path": self.path, "ok": ok})
        self.send_response(201 if ok else 500)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
threading.Thread(target=receiver.serve_forever, daemon=True).start()
URL = "http://127.0.0.1:%d/push/phone" % receiver.server_address[1]
OTHER = "http://127.0.0.1:%d/push/tablet" % receiver.server_address[1]

s, h, body = raw("GET", "/jmap/session")
A = json.loads(body)["primaryAccounts"][MAIL]
def call(name, args):
    return api([[name, args, "c"]], using=(CORE, MAIL, VAC, SUB))["methodResponses"][0]
def ok(name, args):
    n, a, _ = call(name, args)
    assert n == name, (n, a)
    return a
def next_post(path="/push/phone"):
    return posts[path].get(timeout=90)

def deliver(subject):
    before = ok("Email/query", {"accountId": A, "calculateTotal": True})["total"]
    host, port = smtp_addr.rsplit(":", 1)
    c = smtplib.SMTP(host, int(port))
    c.sendmail("carol@example.net", [user], "From: carol@example.net\r\nTo: %s\r\nSubject: %s\r\n\r\nhello\r\n" % (user, subject))
    c.quit()
    deadline = time.monotonic() + 30
    while ok("Email/query", {"accountId": A, "calculateTotal": True})["total"] == before:
        assert time.monotonic() < deadline, "not delivered"
        time.sleep(0.1)

# The account's identity is made on first use: before any subscription.
ident = ok("Identity/get", {"accountId": A})

# What is refused, with the RFC's error types.
r = ok("PushSubscription/set", {"create": {
    "keys": {"deviceClientId": "d", "url": URL, "keys": {"p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA", "auth": "tBHItJI5svbpez7KI4CCXg"}},
    "clear": {"deviceClientId": "d", "url": "http://push.example.com/x"},
    "code": {"deviceClientId": "d", "url": URL, "verificationCode": "mine"},
    "nodevice": {"url": URL}}})
for cid, prop in [("keys", "keys"), ("clear", "url"), ("code", "verificationCode"), ("nodevice", "deviceClientId")]:
    eq(r["notCreated"][cid]["type"], "invalidProperties", cid)
    eq(r["notCreated"][cid]["properties"], [prop], cid)
assert "RFC 8291" in r["notCreated"]["keys"]["description"], r
eq(r["created"], {}, "nothing made")
assert "accountId" not in r and "newState" not in r, r
eq(call("PushSubscription/set", {"accountId": A, "create": {}})[1]["type"], "invalidArguments", "no accountId")
eq(call("PushSubscription/set", {"ifInState": "1", "create": {}})[1]["type"], "invalidArguments", "no ifInState")
eq(call("PushSubscription/get", {"properties": ["id", "url"]})[1]["type"], "forbidden", "url is never shown")
eq(call("PushSubscription/get", {"properties": ["keys"]})[1]["type"], "forbidden", "keys are never shown")

# Creation: the verification is POSTed to the url. The tablet's
# subscription is never verified: it must get nothing else.
far = "2100-01-01T00:00:00Z"
r = ok("PushSubscription/set", {"create": {"s": {"deviceClientId": "phone", "url": URL,
                                                 "types": ["Email", "Mailbox"], "expires": far},
                                           "t": {"deviceClientId": "tablet", "url": OTHER}}})
sid = r["created"]["s"]["id"]
tid = r["created"]["t"]["id"]
eq(next_post("/push/tablet")["body"]["pushSubscriptionId"], tid, "the tablet's verification")
expires = r["created"]["s"]["expires"]
assert expires < far, "expires is cut to the server's longest lifetime: %r" % expires
p = next_post()
v = p["body"]
eq(v["@type"], "PushVerification", "verification first")
eq(v["pushSubscriptionId"], sid, "names the subscription")
eq(sorted(v), ["@type", "pushSubscriptionId", "verificationCode"], "fields")
eq(p["path"], "/push/phone", "to the url")
assert p["type"].startswith("application/json"), p
assert int(p["ttl"]) > 0, p
g = ok("PushSubscription/get", {"ids": [sid]})
eq(g["list"], [{"id": sid, "deviceClientId": "phone", "verificationCode": None,
                "expires": expires, "types": ["Email", "Mailbox"]}], "url and keys are not shown")
assert "state" not in g and "accountId" not in g, g
eq(ok("PushSubscription/get", {"ids": [sid, "P999999"]})["notFound"], ["P999999"], "notFound")

# Mail before verification is not pushed.
deliver("before")
r = ok("PushSubscription/set", {"update": {sid: {"verificationCode": "wrong"}}})
eq(r["notUpdated"][sid]["type"], "invalidProperties", "wrong code")
eq(r["notUpdated"][sid]["properties"], ["verificationCode"], "wrong code")
r = ok("PushSubscription/set", {"update": {sid: {"url": URL + "x"}, "P999999": {"types": None}}})
eq(r["notUpdated"][sid]["type"], "invalidProperties", "url is immutable")
eq(r["notUpdated"]["P999999"]["type"], "notFound", "no such subscription")
r = ok("PushSubscription/set", {"update": {sid: {"verificationCode": v["verificationCode"]}}})
assert sid in r["updated"], r

# Mail after it is, with the types asked for only. (The first delivery
# may come in the first push too, if the server read the states only
# once the subscription was verified.)
deliver("after")
state = ok("Email/get", {"accountId": A, "ids": []})["state"]
while True:
    p = next_post()
    change = p["body"]
    eq(change["@type"], "StateChange", "a state change")
    eq(p["ok"], True, "answered")
    assert set(change["changed"][A]) <= {"Email", "Mailbox"}, change
    if change["changed"][A].get("Email") == state:
        break

# A failing receiver is tried again.
fail["n"] = 1
deliver("retried")
first = next_post()
eq(first["ok"], False, "the receiver failed it")
again = next_post()
eq(again["ok"], True, "tried again")
state = ok("Email/get", {"accountId": A, "ids": []})["state"]
eq(again["body"]["changed"][A]["Email"], state, "the retry carries the state")

# Identity and VacationResponse changes are pushed like mail's.
r = ok("PushSubscription/set", {"update": {sid: {"types": ["Identity", "VacationResponse"]}}})
assert sid in r["updated"], r
r = ok("Identity/set", {"accountId": A, "update": {ident["list"][0]["id"]: {"name": "Alice"}}})
p = next_post()
eq(p["body"]["changed"][A], {"Identity": r["newState"]}, "identity change")
r = ok("VacationResponse/set", {"accountId": A, "update": {"singleton": {"isEnabled": True, "textBody": "away"}}})
p = next_post()
eq(p["body"]["changed"][A], {"VacationResponse": r["newState"]}, "vacation change")

# The event source tells of them too.
import http.client
host, port = http_addr.rsplit(":", 1)
conn = http.client.HTTPConnection(host, int(port), timeout=30)
conn.request("GET", "/jmap/eventsource?types=Identity,VacationResponse&closeafter=state&ping=1",
             headers={"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()})
resp = conn.getresponse()
eq(resp.status, 200, "event source")
events = []
up = threading.Event()
def read():
    name = None
    for line in resp:
        line = line.decode().rstrip("\n")
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[6:])))
            if name == "ping":
                up.set()
reader = threading.Thread(target=read)
reader.start()
assert up.wait(20), events
r = ok("Identity/set", {"accountId": A, "update": {ident["list"][0]["id"]: {"name": "Alice B"}}})
reader.join(30)
assert not reader.is_alive(), "closeafter=state ends the stream"
eq([d["changed"][A] for n, d in events if n == "state"], [{"Identity": r["newState"]}], "event source")
eq(next_post()["body"]["changed"][A], {"Identity": r["newState"]}, "pushed too")

# Every change so far was pushed before the last one; none reached the
# subscription that was never verified.
assert posts["/push/tablet"].empty(), posts["/push/tablet"].get()

# Destroyed, they are gone.
r = ok("PushSubscription/set", {"destroy": [sid, tid, "P999999"]})
eq(sorted(r["destroyed"]), sorted([sid, tid]), "destroyed")
eq(r["notDestroyed"]["P999999"]["type"], "notFound", "no such subscription")
eq(ok("PushSubscription/get", {})["list"], [], "none left")
print("ok")
"##;

#[test]
fn push_subscriptions_are_verified_then_pushed_state_changes() {
    let server = Server::start();
    let user = server.add_user("alice");
    let out = venv_python(
        &raw_script(&format!("user = sys.argv[2]\n{SCRIPT}")),
        &[
            &server.addr("http").to_string(),
            &user,
            PASSWORD,
            &server.smtp.to_string(),
        ],
        &[],
    );
    assert_eq!(
        out.trim().lines().last(),
        Some("ok"),
        "{out}\n{}",
        server.log()
    );
    server.assert_no_panic();
}
