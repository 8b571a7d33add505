//! The admin pages against a real `sluice serve`: driven by an independent
//! HTTP client (Python's http.client, tests/webmail/client.py) and by
//! Debian's Chromium (tests/browser/admin.mjs), with the changes checked
//! over IMAP (imaplib) and SMTP (smtplib) and against the command line.

use sluice_testkit as kit;

use kit::{addr_arg, python, Server, DOMAIN, PASSWORD};

/// The admin of every test here.
const ADMIN: &str = "postmaster";

fn start() -> (Server, String) {
    let server = Server::start_with(&format!(
        "[web]\nadmins = [\"{}@{DOMAIN}\"]\n",
        ADMIN.to_uppercase()
    ));
    let admin = server.add_user(ADMIN);
    (server, admin)
}

/// Python prelude: the client module, helpers, and the arguments in
/// sys.argv.
fn script(body: &str) -> String {
    format!(
        r#"import sys, re, html, time
sys.path.insert(0, {:?})
from client import Web
def form(w, path, **fields):
    fields.setdefault("csrf", w.csrf)
    return w.request("POST", path, fields)
{body}"#,
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/webmail")
    )
}

/// An admin adds a domain, a user, resets the password (IMAP login with
/// the new one), sets a quota (IMAP GETQUOTAROOT), adds an alias (mail to
/// it arrives), sees a queued recipient and retries and removes it, sees
/// the DKIM record `sluice dkim record` prints, the metrics and the log
/// lines of one transaction; bad input and a missing CSRF token change
/// nothing.
#[test]
fn admin_manages_domains_users_aliases_and_queue() {
    let (server, admin) = start();
    server.cli_ok(&["dkim", "keygen", DOMAIN, "--selector", "s1"]);
    let record = server.cli_ok(&["dkim", "record", DOMAIN, "s1"]);
    let out = python(
        &script(
            r#"
import imaplib, smtplib
web_addr, smtp_addr, imap_addr, admin, password, record = sys.argv[1:7]
smtp_host, smtp_port = smtp_addr.rsplit(":", 1)
imap_host, imap_port = imap_addr.rsplit(":", 1)

w = Web(web_addr)
status, _, _ = w.login(admin, password)
assert status == 303, status
_, inbox = w.page(w.inbox())
assert 'href="/admin"' in inbox, "the admin link is shown to admins"
_, page = w.page("/admin")
assert "Metrics at a glance" in page and "sluice_connections_open" in page, page

# Domains: add; a duplicate and a bad name are refused with the reason.
status, h, _ = form(w, "/admin/domains", action="add", name="second.test")
assert status == 303 and h["location"] == "/admin/domains", status
_, page = w.page("/admin/domains")
assert "<li>second.test</li>" in page, page
status, _, body = form(w, "/admin/domains", action="add", name="second.test")
assert status == 409 and b"already exists" in body, (status, body)
status, _, body = form(w, "/admin/domains", action="add", name="bad domain!")
assert status == 400 and b'role="alert"' in body, (status, body)
_, page = w.page("/admin/domains")
assert "bad domain" not in page

# Users: add, then refuse an invalid address, a duplicate, an unknown domain.
status, _, _ = form(w, "/admin/users", action="add", address="carol@second.test", password="first pw")
assert status == 303, status
_, before = w.page("/admin/users")
assert "carol@second.test" in before
for address, want in [("not an address", 400), ("carol@second.test", 409), ("dave@nowhere.test", 404)]:
    status, _, body = form(w, "/admin/users", action="add", address=address, password="x")
    assert status == want and b'role="alert"' in body, (address, status, body)
status, _, body = form(w, "/admin/users", action="add", address="erin@second.test", password="")
assert status == 400 and b"password is empty" in body, (status, body)
_, after = w.page("/admin/users")
assert after.count("<tr>") == before.count("<tr>"), "bad input changed nothing"
assert "erin@" not in after and "dave@" not in after

# Password reset: IMAP takes the new password, not the old one.
status, _, _ = form(w, "/admin/users", action="password", address="carol@second.test", password="second pw")
assert status == 303, status
m = imaplib.IMAP4(imap_host, int(imap_port))
try:
    m.login("carol@second.test", "first pw")
    raise SystemExit("old password still works")
except imaplib.IMAP4.error:
    pass
m.logout()
m = imaplib.IMAP4(imap_host, int(imap_port))
m.login("carol@second.test", "second pw")

# Quota: 5M, seen by IMAP in KiB.
status, _, _ = form(w, "/admin/users", action="quota", address="carol@second.test", limit="5M")
assert status == 303, status
status, _, body = form(w, "/admin/users", action="quota", address="carol@second.test", limit="lots")
assert status == 400 and b"not a size" in body, (status, body)
_, page = w.page("/admin/users")
assert '<td class="quota">5.0 MB</td>' in page, page
typ, data = m.getquotaroot("INBOX")
assert typ == "OK" and b"STORAGE 0 5120" in b" ".join(x for x in data[1] if x), data

# Alias: mail to it arrives in carol's INBOX.
status, _, _ = form(w, "/admin/aliases", action="add", address="info@second.test", targets="carol@second.test")
assert status == 303, status
_, page = w.page("/admin/aliases")
assert "info@second.test" in page and "carol@second.test" in page
status, _, body = form(w, "/admin/aliases", action="add", address="<oops>", targets="carol@second.test")
assert status in (400, 404) and b'role="alert"' in body, (status, body)
with smtplib.SMTP(smtp_host, int(smtp_port)) as s:
    s.sendmail("x@remote.test", ["info@second.test"], "Subject: via alias\r\n\r\nhello\r\n")
deadline = time.time() + 10
while True:
    m.select("INBOX")
    typ, data = m.search(None, "SUBJECT", '"via alias"')
    if data[0]:
        break
    assert time.time() < deadline, "alias mail did not arrive"
    time.sleep(0.1)
m.logout()

# Recent log lines: the transaction's line found by its recipient, then
# every line of its queue id; other lines are left out.
import urllib.parse
def log_lines(filter):
    _, page = w.page("/admin/logs?filter=" + urllib.parse.quote(filter))
    return html.unescape(re.search(r'<pre class="log">(.*?)</pre>', page, re.S).group(1))
lines = log_lines("info@second.test")
assert "smtp transaction" in lines, lines
qid = re.search(r"queue_id=(\S+)", lines).group(1)
lines = log_lines(qid)
assert "smtp transaction" in lines and "webmail login" not in lines, lines
assert "webmail login" in log_lines("")

# Queue: a remote alias target waits in the queue (outbound is off here).
status, _, _ = form(w, "/admin/aliases", action="add", address="away@second.test", targets="someone@remote.test")
assert status == 303, status
with smtplib.SMTP(smtp_host, int(smtp_port)) as s:
    s.sendmail("x@remote.test", ["away@second.test"], "Subject: onward\r\n\r\nhello\r\n")
_, page = w.page("/admin/queue")
assert "someone@remote.test" in page, page
qid = re.search(r'name="id" value="(\d+)"', page).group(1)
status, _, _ = form(w, "/admin/queue", action="retry", id=qid)
assert status == 303, status
status, _, _ = form(w, "/admin/queue", action="remove", id=qid)
assert status == 303, status
_, page = w.page("/admin/queue")
assert "The queue is empty." in page, page
status, _, _ = form(w, "/admin/queue", action="remove", id=qid)
assert status == 404, status
status, _, body = form(w, "/admin/queue", action="retry", id=qid)
assert status == 404 and b"does not exist" in body, (status, body)

# Alias removal.
status, _, _ = form(w, "/admin/aliases", action="remove", address="away@second.test")
assert status == 303, status
_, page = w.page("/admin/aliases")
assert "away@second.test" not in page

# DKIM: the record the command line prints.
_, page = w.page("/admin/dkim")
assert record.strip() in html.unescape(page), (record, page)

# Without the CSRF token, or from another site: refused, nothing changed.
status, _, _ = w.request("POST", "/admin/domains", {"action": "add", "name": "third.test"})
assert status == 403, status
status, _, _ = w.request("POST", "/admin/domains", {"action": "add", "name": "third.test", "csrf": "forged"})
assert status == 403, status
status, _, _ = w.request("POST", "/admin/domains", {"action": "add", "name": "third.test", "csrf": w.csrf},
                         headers={"Origin": "http://evil.test", "Host": web_addr})
assert status == 403, status
_, page = w.page("/admin/domains")
assert "third.test" not in page
print("ok")
"#,
        ),
        &[
            &addr_arg(server.addr("http")),
            &addr_arg(server.smtp),
            &addr_arg(server.imap),
            &admin,
            PASSWORD,
            &record,
        ],
    );
    assert_eq!(out.trim(), "ok");
    // The command line sees what the page did.
    assert!(server.cli_ok(&["domain", "list"]).contains("second.test"));
    assert!(!server.cli_ok(&["domain", "list"]).contains("third.test"));
    let users = server.cli_ok(&["user", "list"]);
    assert!(users.contains("carol@second.test") && !users.contains("erin@"));
    assert!(server
        .cli_ok(&["alias", "list"])
        .contains("info@second.test -> carol@second.test"));
}

/// A user who is not an admin gets 403 on every admin URL, GET or POST
/// (with a valid CSRF token), and no link to them; logged out, a login.
#[test]
fn non_admins_are_refused() {
    let (server, _admin) = start();
    let user = server.add_user("bob");
    let out = python(
        &script(
            r#"
web_addr, user, password = sys.argv[1:4]
pages = ["/admin", "/admin/domains", "/admin/users", "/admin/aliases", "/admin/queue", "/admin/dkim", "/admin/logs"]
w = Web(web_addr)
for p in pages:
    status, h, _ = w.get(p)
    assert status == 303 and h["location"] == "/login", (p, status)
status, _, _ = w.login(user, password)
assert status == 303, status
_, inbox = w.page(w.inbox())
assert "/admin" not in inbox, "no admin link for a non-admin"
for p in pages:
    status, _, body = w.get(p)
    assert status == 403 and b"for administrators" in body, (p, status)
    status, _, _ = form(w, p, action="add", name="evil.test", address="x@evil.test", password="x", targets="x@y.test", id="1")
    assert status in (403, 405), (p, status)
print("ok")
"#,
        ),
        &[&addr_arg(server.addr("http")), &user, PASSWORD],
    );
    assert_eq!(out.trim(), "ok");
    assert!(!server.cli_ok(&["domain", "list"]).contains("evil.test"));
}

/// The admin flows in Chromium, without JavaScript of the page's own:
/// log in, add a domain and a user, set a quota, add an alias, see the
/// queue, the DKIM record and filtered log lines (tests/browser/admin.mjs).
#[test]
fn admin_pages_in_chromium() {
    let (server, admin) = start();
    server.cli_ok(&["dkim", "keygen", DOMAIN, "--selector", "s1"]);
    sluice_testkit::browser("admin.mjs", "pages", &server, &admin, &[]);
    assert!(server.cli_ok(&["domain", "list"]).contains("browser.test"));
    assert!(server
        .cli_ok(&["user", "list"])
        .contains("zoe@browser.test"));
    assert!(server
        .cli_ok(&["alias", "list"])
        .contains("hello@browser.test -> zoe@browser.test"));
    // The new user's password works over IMAP.
    let out = python(
        r#"
import imaplib, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
m.login("zoe@browser.test", "zoe's pw")
typ, data = m.getquotaroot("INBOX")
assert b"STORAGE 0 1024" in b" ".join(x for x in data[1] if x), data
m.logout()
print("ok")
"#,
        &[&addr_arg(server.imap)],
    );
    assert_eq!(out.trim(), "ok");
}
