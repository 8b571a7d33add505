//! The webmail against a real `sluice serve`, driven by an independent
//! HTTP client (Python's http.client, tests/webmail/client.py), with mail
//! delivered over SMTP and checked over IMAP (imaplib).

use sluice_testkit as kit;

use kit::{python, Server, PASSWORD};

/// Python prelude: the client module and the addresses in sys.argv.
fn script(body: &str) -> String {
    format!(
        "import sys\nsys.path.insert(0, {:?})\nfrom client import Web\n{body}",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/webmail")
    )
}

/// Logs in, reads plain and HTML mail (remote content blocked until
/// allowed, with a loopback HTTP server counting requests), downloads an
/// attachment with an RFC 2231 name, searches, flags, moves to Trash (seen
/// over IMAP), is refused without the CSRF token, logs out.
#[test]
fn read_search_act_and_log_out() {
    let server = Server::start();
    let user = server.add_user("alice");
    let out = python(
        &script(
            r#"
import smtplib, imaplib, threading, http.server, base64, re
web_addr, smtp_addr, imap_addr, user, password = sys.argv[1:6]

hits = []
class Pixel(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        hits.append(self.path)
        self.send_response(200); self.send_header("Content-Type", "image/gif"); self.end_headers()
        self.wfile.write(b"GIF89a")
    def log_message(self, *a): pass
remote = http.server.HTTPServer(("127.0.0.1", 0), Pixel)
threading.Thread(target=remote.serve_forever, daemon=True).start()
pixel = "http://127.0.0.1:%d/track.gif" % remote.server_address[1]

attachment = base64.encodebytes(bytes(range(256)) * 40).decode()
mails = [
    "From: Bob <bob@remote.test>\r\nTo: %s\r\nSubject: quarterly zebra report\r\n\r\nThe zebra numbers <are> in.\r\n" % user,
    ("From: News <news@remote.test>\r\nTo: %s\r\nSubject: html letter\r\nMIME-Version: 1.0\r\n"
     "Content-Type: multipart/related; boundary=B\r\n\r\n--B\r\nContent-Type: text/html; charset=utf-8\r\n\r\n"
     "<p>Hello <b>reader</b></p><img src=\"%s\"><img src=\"cid:logo@x\"><script>parent.pwned=1</script>\r\n"
     "--B\r\nContent-Type: image/gif\r\nContent-ID: <logo@x>\r\nContent-Transfer-Encoding: base64\r\n\r\nR0lGODlh\r\n--B--\r\n") % (user, pixel),
    ("From: Carol <carol@remote.test>\r\nTo: %s\r\nSubject: the file\r\nMIME-Version: 1.0\r\n"
     "Content-Type: multipart/mixed; boundary=M\r\n\r\n--M\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n"
     "--M\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename*=UTF-8''r%%C3%%A9sum%%C3%%A9.bin\r\n"
     "Content-Transfer-Encoding: base64\r\n\r\n%s--M--\r\n") % (user, attachment),
]
host, port = smtp_addr.rsplit(":", 1)
with smtplib.SMTP(host, int(port)) as s:
    for m in mails:
        s.sendmail("x@remote.test", [user], m)

w = Web(web_addr)
# Not logged in: pages send to the login form.
status, h, _ = w.get("/")
assert status == 303 and h["location"] == "/login", (status, h)
h, text = w.page("/login")
assert "script-src 'self'" in h["content-security-policy"] and "frame-ancestors 'none'" in h["content-security-policy"], h
assert "<script>" not in text and "unsafe-inline" not in h["content-security-policy"]
status, _, body = w.login(user, "wrong")
assert status == 401 and b"Wrong address or password" in body, status
status, h, _ = w.login(user, password)
assert status == 303, status
assert "HttpOnly" in h["set-cookie"] and "SameSite=Strict" in h["set-cookie"], h["set-cookie"]
inbox = w.inbox()
# Pages are gzipped for clients that ask; the event stream never is.
import gzip
status, h, zipped = w.request("GET", inbox, headers={"Accept-Encoding": "gzip"})
assert status == 200 and h.get("content-encoding") == "gzip" and b"quarterly zebra report" in gzip.decompress(zipped), h
h, text = w.page(inbox)
for s in ["quarterly zebra report", "html letter", "the file", "Bob", "News", "Carol"]:
    assert s in text, s
assert text.count('class="unread"') == 3
assert "📎" in text
assert "INBOX" in text and "Trash" in text

uids = re.findall(r'href="%s/(\d+)"' % inbox, text)
by_subject = {}
for uid in uids:
    _, page = w.page("%s/%s" % (inbox, uid))
    subject = re.search(r"<h1>(.*?)</h1>", page).group(1)
    by_subject[subject] = (uid, page)

# Plain text, escaped.
_, plain = by_subject["quarterly zebra report"]
assert "The zebra numbers &lt;are&gt; in." in plain, plain

# HTML: in a sandboxed frame; the remote image is blocked until allowed.
uid, page = by_subject["html letter"]
assert "1 remote image(s) blocked" in page, page
frame_url = re.search(r'<iframe[^>]*src="([^"]+)"', page).group(1)
assert re.search(r'<iframe[^>]*sandbox="allow-popups allow-popups-to-escape-sandbox"', page)
status, h, frame = w.get(frame_url)
assert status == 200
assert "sandbox" in h["content-security-policy"] and "script-src" not in h["content-security-policy"], h
frame = frame.decode()
assert "<script" not in frame and "pwned" not in frame and pixel not in frame, frame
# The frame sends no cookie: its pictures come by signed link.
cid = re.search(r'src="(/inline/[^"]+)"', frame).group(1)
status, h, gif = w.get(cid)
assert status == 200 and gif == b"GIF89a" and h["content-type"] == "image/gif", (status, h, gif)
assert hits == [], hits
status, _, frame = w.get(frame_url + "?remote=1")
assert pixel.encode() in frame
# "Always for this sender" is a state change: it needs the token.
status, _, _ = w.request("POST", "%s/%s/trust" % (inbox, uid), {})
assert status == 403, status
status, _, _ = w.request("POST", "%s/%s/trust" % (inbox, uid), {"csrf": w.csrf})
assert status == 303, status
_, page = w.page("%s/%s" % (inbox, uid))
assert "blocked" not in page and "?remote=1" in page, page

# Attachment: streamed, decoded, with its RFC 2231 name.
uid, page = by_subject["the file"]
assert "résumé.bin" in page, page
part = re.search(r'href="(/mail/[^"]+/part/\d+)"', page).group(1)
status, h, data = w.get(part)
assert status == 200 and data == bytes(range(256)) * 40, (status, len(data))
assert h["content-disposition"] == "attachment; filename=\"r_sum_.bin\"; filename*=UTF-8''r%C3%A9sum%C3%A9.bin", h
status, h, src = w.get("%s/%s/source" % (inbox, uid))
assert status == 200 and src.startswith(b"Received:") or src.startswith(b"Return-Path:") or b"Subject: the file" in src[:2000]

# Search: full text and headers.
_, found = w.page(inbox + "?q=zebra")
assert "quarterly zebra report" in found and "html letter" not in found
_, found = w.page(inbox + "?q=carol")
assert "the file" in found and "zebra" not in found
_, found = w.page(inbox + "?q=nothingmatches")
assert "Nothing found." in found

# CSRF: a state-changing POST without the token is refused and changes nothing.
zebra = by_subject["quarterly zebra report"][0]
status, _, _ = w.request("POST", inbox + "/act", {"uid": zebra, "action": "trash"})
assert status == 403, status
status, _, _ = w.request("POST", inbox + "/act", {"uid": zebra, "action": "trash", "csrf": "forged"})
assert status == 403, status
status, _, _ = w.request("POST", inbox + "/act", {"uid": zebra, "action": "trash", "csrf": w.csrf},
                         headers={"Origin": "http://evil.test"})
assert status == 403, status
_, text = w.page(inbox)
assert "quarterly zebra report" in text

# Flag, mark unread, then delete (to Trash) as a selection.
status, _, _ = w.request("POST", inbox + "/act", [("uid", zebra), ("action", "flag"), ("csrf", w.csrf)])
assert status == 303
status, _, _ = w.request("POST", inbox + "/act", [("uid", zebra), ("action", "unread"), ("csrf", w.csrf)])
assert status == 303
_, text = w.page(inbox)
assert "★" in text and text.count('class="unread"') == 1, text
status, h, _ = w.request("POST", inbox + "/act", [("uid", zebra), ("uid", by_subject["the file"][0]), ("action", "trash"), ("csrf", w.csrf)])
assert status == 303 and h["location"].startswith(inbox), h
_, text = w.page(inbox)
assert "quarterly zebra report" not in text and "the file" not in text and "html letter" in text

host, port = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(host, int(port))
m.login(user, password)
typ, data = m.select("Trash")
assert data[0] == b"2", data
typ, data = m.uid("SEARCH", None, "FLAGGED")
assert len(data[0].split()) == 1, data
m.logout()

# Logout ends the session in the store.
cookie = w.cookie
status, h, _ = w.request("POST", "/logout", {"csrf": w.csrf})
assert status == 303 and "Max-Age=0" in h["set-cookie"], h
w.cookie = cookie
status, h, _ = w.get(inbox)
assert status == 303 and h["location"] == "/login", status
print("ok")
"#,
        ),
        &[
            &server.addr("http").to_string(),
            &server.smtp.to_string(),
            &server.imap.to_string(),
            &user,
            PASSWORD,
        ],
    );
    assert_eq!(out.trim(), "ok");
}

/// A session is kept in the store: it survives a restart. Over HTTPS the
/// cookie is `Secure` and `__Host-` prefixed.
#[test]
fn sessions_survive_a_restart_and_are_secure_on_tls() {
    let mut server = Server::start();
    let user = server.add_user("bob");
    let login = script(
        r#"
w = Web(sys.argv[1], tls=sys.argv[2] == "tls")
status, h, _ = w.login(sys.argv[3], sys.argv[4])
assert status == 303, status
print(h["set-cookie"])
"#,
    );
    let cookie = python(
        &login,
        &[&server.addr("https").to_string(), "tls", &user, PASSWORD],
    );
    assert!(cookie.starts_with("__Host-sluice_session="), "{cookie}");
    assert!(cookie.contains("; Secure"), "{cookie}");
    let cookie = python(
        &login,
        &[&server.addr("http").to_string(), "plain", &user, PASSWORD],
    );
    let cookie = cookie.split(';').next().unwrap().to_string();
    server.terminate();
    server.restart();
    let check = script(
        r#"
w = Web(sys.argv[1])
w.cookie = sys.argv[2]
h, text = w.page(w.inbox())
assert sys.argv[3] in text, text
print("ok")
"#,
    );
    let out = python(&check, &[&server.addr("http").to_string(), &cookie, &user]);
    assert_eq!(out.trim(), "ok");
}

/// Runs the Chromium driver (tests/browser/webmail.mjs) in `mode`.
fn browser(mode: &str, server: &Server, user: &str, friend: &str) -> String {
    kit::browser(
        "webmail.mjs",
        mode,
        server,
        user,
        &[("FRIEND", friend.as_ref())],
    )
}

/// More than 100 XSS vectors (tests/browser/xss-vectors.txt), each placed
/// in an HTML body, the subject, the sender's name and an attachment's
/// file name, delivered over SMTP and opened in Chromium: no script runs.
/// Every vector logs `XSS-EXEC` when it runs, and the driver first shows
/// that it sees such a log from a page and from a frame.
#[test]
fn xss_corpus_runs_no_script_in_chromium() {
    let server = Server::start();
    let user = server.add_user("xss");
    let out = python(
        r#"
import smtplib, sys
from email.message import EmailMessage
smtp_addr, user, corpus = sys.argv[1:4]
payload = "console.log(/XSS-EXEC/.source);document.title=/XSS-EXEC/.source"
vectors = [l.replace("{P}", payload) for l in open(corpus, encoding="utf-8").read().split("\n") if l.strip()]
host, port = smtp_addr.rsplit(":", 1)
with smtplib.SMTP(host, int(port)) as s:
    for i, v in enumerate(vectors):
        m = EmailMessage()
        m["From"] = '"%s" <attacker@remote.test>' % v.replace('"', "'")
        m["To"] = user
        m["Subject"] = "xss %d %s" % (i, v)
        m.set_content("<html><body><p>vector %d</p>%s</body></html>" % (i, v), subtype="html")
        m.add_attachment(b"x", maintype="application", subtype="octet-stream", filename=v[:200])
        s.send_message(m)
print(len(vectors))
"#,
        &[
            &server.smtp.to_string(),
            &user,
            concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser/xss-vectors.txt"),
        ],
    );
    let sent: usize = out.trim().parse().unwrap();
    assert!(sent >= 100, "{sent} vectors");
    let report = browser("xss", &server, &user, "");
    assert!(report.contains("\"executions\":0"), "{report}");
}

/// In Chromium: keyboard shortcuts (j, o, u, /, g i, #, r), remote images
/// fetched only once allowed (a loopback server counts requests), a new
/// SMTP delivery appearing without a reload, Trash, a reply with an
/// attachment (then found over IMAP in the recipient's INBOX and in Sent),
/// logout.
#[test]
fn keyboard_live_updates_remote_content_and_reply_in_chromium() {
    let server = Server::start();
    let user = server.add_user("ui");
    let friend = server.add_user("friend");
    let report = browser("ui", &server, &user, &friend);
    assert!(report.contains("\"remoteHits\":1"), "{report}");
    let out = python(
        r#"
import imaplib, email, email.policy, sys
imap_addr, user, friend, password = sys.argv[1:5]
def fetch(who, box):
    h, p = imap_addr.rsplit(":", 1)
    m = imaplib.IMAP4(h, int(p)); m.login(who, password); m.select(box)
    typ, data = m.uid("SEARCH", None, "SUBJECT", "\"Re: from a friend\"")
    out = []
    for uid in data[0].split():
        typ, d = m.uid("FETCH", uid, "(BODY.PEEK[])")
        out.append(email.message_from_bytes(d[0][1], policy=email.policy.default))
    m.logout()
    return out
got, sent = fetch(friend, "INBOX"), fetch(user, "Sent")
assert len(got) == 1 and len(sent) == 1, (len(got), len(sent))
r = got[0]
assert r["In-Reply-To"] == "<friend-1@example.org>", r["In-Reply-To"]
assert r.get_body(("plain",)).get_content().startswith("Here they are.")
files = [(p.get_filename(), p.get_content()) for p in r.iter_attachments()]
assert files == [("notes.txt", "the notes\n" * 5000)], [f[0] for f in files]
assert sent[0]["Message-ID"] == r["Message-ID"]
print("ok")
"#,
        &[&server.imap.to_string(), &user, &friend, PASSWORD],
    );
    assert_eq!(out.trim(), "ok");
}

/// Compose over the real upload path: refused without the CSRF token; a
/// remote recipient is queued for the outbound sender; a draft keeps its
/// Bcc; a reply with a 300 KB attachment and a forward-as-attachment reach
/// the local recipient (seen over IMAP) and Sent, without the Bcc.
#[test]
fn compose_reply_forward_and_drafts() {
    let server = Server::start();
    let alice = server.add_user("alice");
    let bob = server.add_user("bob");
    let out = python(
        &script(
            r#"
import smtplib, imaplib, email, email.policy, re
web_addr, smtp_addr, imap_addr, alice, bob, password = sys.argv[1:7]
host, port = smtp_addr.rsplit(":", 1)
with smtplib.SMTP(host, int(port)) as s:
    s.sendmail(bob, [alice], "From: Bob <%s>\r\nTo: %s\r\nSubject: lunch?\r\nMessage-ID: <lunch@example.org>\r\n\r\nShall we eat?\r\n" % (bob, alice))

def imap(user):
    h, p = imap_addr.rsplit(":", 1)
    m = imaplib.IMAP4(h, int(p)); m.login(user, password); return m
def messages(user, box):
    m = imap(user); m.select(box)
    typ, data = m.uid("SEARCH", None, "ALL")
    out = []
    for uid in data[0].split():
        typ, d = m.uid("FETCH", uid, "(BODY.PEEK[])")
        out.append(email.message_from_bytes(d[0][1], policy=email.policy.default))
    m.logout()
    return out

w = Web(web_addr)
assert w.login(alice, password)[0] == 303
inbox = w.inbox()
_, text = w.page(inbox)
uid = re.search(r'href="%s/(\d+)"' % inbox, text).group(1)
mailbox = inbox.rsplit("/", 1)[1]

# The reply form is filled in.
_, form = w.page("/compose?mode=reply&mailbox=%s&uid=%s" % (mailbox, uid))
assert 'value="Re: lunch?"' in form and "&gt; Shall we eat?" in form and "&lt;lunch@example.org&gt;" in form, form

# No token: refused, nothing stored.
status, _, _ = w.multipart("/compose", [("to", bob), ("subject", "x"), ("body", "x"), ("action", "send")])
assert status == 403, status
# A remote recipient: queued for the outbound sender, filed in Sent.
status, _, body = w.multipart("/compose", [("csrf", w.csrf), ("to", "someone@remote.test"), ("subject", "far"), ("body", "x"), ("action", "send")])
assert status == 303, (status, body[:500])
assert [m["Subject"] for m in messages(alice, "Sent")] == ["far"] and messages(alice, "Drafts") == []
# An unknown local recipient: the form again, saying why; nothing sent.
status, _, body = w.multipart("/compose", [("csrf", w.csrf), ("to", "nobody@example.org"), ("subject", "lost"), ("body", "x"), ("action", "send")])
assert status == 422 and b"does not exist" in body and b"Nothing was sent" in body, (status, body[:500])

# A draft keeps its Bcc.
status, h, _ = w.multipart("/compose", [("csrf", w.csrf), ("to", bob), ("bcc", "boss@example.org"), ("subject", "later"), ("body", "draft text"), ("action", "draft")])
assert status == 303, status
drafts = messages(alice, "Drafts")
assert len(drafts) == 1 and drafts[0]["Bcc"] == "boss@example.org" and drafts[0]["Subject"] == "later"

# A reply with an attachment, streamed.
blob = bytes(range(256)) * 1200
status, h, body = w.multipart("/compose",
    [("csrf", w.csrf), ("to", "Bob <%s>" % bob), ("cc", ""), ("bcc", alice), ("subject", "Re: lunch? – oui"), ("body", "Yes!\n> Shall we eat?"),
     ("in_reply_to", "<lunch@example.org>"), ("references", "<lunch@example.org>"), ("attach", ""), ("replied", "%s/%s" % (mailbox, uid)), ("action", "send")],
    [("files", "menu été.bin", "application/octet-stream", blob), ("files", "", "application/octet-stream", b"")])
assert status == 303 and "/mail/" in h["location"], (status, body[:500])
got = [m for m in messages(bob, "INBOX") if "oui" in m["Subject"]]
assert len(got) == 1, [m["Subject"] for m in messages(bob, "INBOX")]
reply = got[0]
assert reply["In-Reply-To"] == "<lunch@example.org>" and reply["Bcc"] is None and reply["Message-ID"], dict(reply)
assert reply["Subject"] == "Re: lunch? – oui"
parts = list(reply.iter_attachments())
assert len(parts) == 1 and parts[0].get_filename() == "menu été.bin" and parts[0].get_content() == blob, [p.get_filename() for p in parts]
assert reply.get_body(("plain",)).get_content().startswith("Yes!")
sent = [m for m in messages(alice, "Sent") if "oui" in m["Subject"]]
assert len(sent) == 1 and sent[0]["Message-ID"] == reply["Message-ID"] and sent[0]["Bcc"] is None
# Bcc to herself: a copy in her INBOX too; the original is marked answered.
assert any("oui" in m["Subject"] for m in messages(alice, "INBOX"))
m = imap(alice); m.select("INBOX")
typ, data = m.uid("SEARCH", None, "ANSWERED")
assert data[0].split() == [uid.encode()], data
m.logout()

# Forward as attachment: the original inside, byte for byte.
status, h, body = w.multipart("/compose", [("csrf", w.csrf), ("to", bob), ("subject", "Fwd: lunch?"), ("body", "see below"), ("attach", "%s/%s" % (mailbox, uid)), ("action", "send")])
assert status == 303, (status, body[:300])
fwd = [m for m in messages(bob, "INBOX") if m["Subject"] == "Fwd: lunch?"][0]
inner = [p for p in fwd.iter_parts() if p.get_content_type() == "message/rfc822"]
assert len(inner) == 1 and inner[0].get_content()["Message-ID"] == "<lunch@example.org>", fwd.as_string()[:800]

# The conversation of the original includes the reply in Sent.
_, page = w.page("%s/%s" % (inbox, uid))
conv = page.split("<h2>Conversation</h2>", 1)[1]
assert "Re: lunch? – oui" in conv and "Sent" in conv and "lunch?" in conv, conv
# Past correspondents are offered when composing.
_, form = w.page("/compose")
assert '<datalist id="correspondents"><option value="%s">' % bob in form, form

# Settings: refused without the token; then the display name goes into
# From and the page size into the list.
status, _, _ = w.request("POST", "/settings", {"display_name": "Al", "signature": "", "page_size": "1"})
assert status == 403, status
status, _, _ = w.request("POST", "/settings", {"csrf": w.csrf, "display_name": "Alice Liddell", "signature": "-- \nA.", "page_size": "1"})
assert status == 303, status
_, text = w.page(inbox)
assert text.count('<tr class') + text.count('<tr data-uid') == 1 and 'rel="next"' in text, text
_, form = w.page("/compose")
assert "-- \nA." in form, form
status, _, _ = w.multipart("/compose", [("csrf", w.csrf), ("to", bob), ("subject", "named"), ("body", "x"), ("action", "send")])
assert status == 303
named = [m for m in messages(bob, "INBOX") if m["Subject"] == "named"][0]
assert named["From"] == "Alice Liddell <%s>" % alice, named["From"]
print("ok")
"#,
        ),
        &[
            &server.addr("http").to_string(),
            &server.smtp.to_string(),
            &server.imap.to_string(),
            &alice,
            &bob,
            PASSWORD,
        ],
    );
    assert_eq!(out.trim(), "ok");
    // The remote recipient waits in the outbound queue, from Alice.
    let queue = server.cli_ok(&["queue", "list"]);
    assert!(
        queue.contains("someone@remote.test") && queue.contains(&alice),
        "{queue}"
    );
}

/// `sluice bench web` against the real webmail: every transaction runs,
/// none fails, and the mail it sends arrives.
#[test]
fn bench_web_runs_every_transaction() {
    let server = Server::start();
    for i in 1..=2 {
        server.add_user(&format!("user{i}"));
    }
    // Something to read from the start.
    python(
        r#"
import smtplib, sys
host, port = sys.argv[1].rsplit(":", 1)
with smtplib.SMTP(host, int(port)) as s:
    for u in ("user1@example.org", "user2@example.org"):
        s.sendmail("x@remote.test", [u], "Subject: hello\r\n\r\nfirst\r\n")
"#,
        &[&server.smtp.to_string()],
    );
    let out = std::process::Command::new(kit::sluice_bin())
        .args(["bench", "web", "--server"])
        .arg(server.addr("http").to_string())
        .args([
            "--users",
            "2",
            "--duration",
            "2",
            "--size-max",
            "4096",
            "--json",
        ])
        .args(["--password", PASSWORD])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = String::from_utf8(out.stdout).unwrap();
    let checked = python(
        r#"
import json, sys
r = json.loads(sys.argv[1])
steps = {s["name"]: s for s in r["steps"]}
assert sorted(steps) == sorted(["login_get", "login_post", "inbox", "read", "send"]), steps
for name, s in steps.items():
    assert s["latency"]["count"] > 0 and s["errors"] == 0, (name, s)
assert r["inbox_bytes"] > 0
print("ok")
"#,
        &[&report],
    );
    assert_eq!(checked.trim(), "ok", "{report}");
    assert!(server.count("SELECT count(*) FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id WHERE b.name = 'Sent'") > 0);
}

/// The webmail sends under the same checks as SMTP submission: a virus is
/// refused (422), and the hourly limit is counted together with SMTP
/// submission: past it the message is refused (429) and kept in Drafts,
/// and submission over SMTP is refused too.
#[test]
fn webmail_sends_under_the_submission_checks() {
    let server = Server::start_with("[submission]\nmax_messages_per_hour = 1\n");
    let alice = server.add_user("alice");
    let bob = server.add_user("bob");
    let out = python(
        &script(
            r#"
import imaplib, smtplib, ssl
web_addr, submission_addr, imap_addr, alice, bob, password = sys.argv[1:7]
w = Web(web_addr)
assert w.login(alice, password)[0] == 303
_, form = w.page("/compose")
# A virus: refused, kept in Drafts, not counted against the limit.
eicar = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
status, _, body = w.multipart("/compose", [("csrf", w.csrf), ("to", bob), ("subject", "virus"), ("body", "x"), ("action", "send")],
                              files=[("files", "eicar.com", "application/octet-stream", eicar)])
assert status == 422 and b"virus found" in body and b"kept in Drafts" in body, (status, body[:600])
status, _, body = w.multipart("/compose", [("csrf", w.csrf), ("to", bob), ("subject", "one"), ("body", "x"), ("action", "send")])
assert status == 303, (status, body[:300])
status, _, body = w.multipart("/compose", [("csrf", w.csrf), ("to", bob), ("subject", "two"), ("body", "x"), ("action", "send")])
assert status == 429 and b"hourly sending limit" in body, (status, body[:300])
h, p = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(alice, password)
m.select("Drafts")
typ, data = m.search(None, "ALL")
assert len(data[0].split()) == 2, data
m.logout()
m = imaplib.IMAP4(h, int(p)); m.login(bob, password); m.select("INBOX")
typ, data = m.search(None, "SUBJECT", "virus")
assert data == [b""], data
h, p = submission_addr.rsplit(":", 1)
s = smtplib.SMTP(h, int(p)); s.starttls(context=ssl._create_unverified_context()); s.login(alice, password)
try:
    s.sendmail(alice, [bob], "From: %s\r\nSubject: three\r\n\r\nx\r\n" % alice)
    print("smtp sent")
except smtplib.SMTPDataError as e:
    print("smtp", e.smtp_code)
except smtplib.SMTPRecipientsRefused as e:
    print("smtp", list(e.recipients.values())[0][0])
print("ok")
"#,
        ),
        &[
            &server.addr("http").to_string(),
            &server.addr("submission").to_string(),
            &server.imap.to_string(),
            &alice,
            &bob,
            PASSWORD,
        ],
    );
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        ["smtp", "451", "ok"],
        "{out}"
    );
}
