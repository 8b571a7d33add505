//! Unsubscribing from the reading page (RFC 2369 `List-Unsubscribe`,
//! RFC 8058 one-click, RFC 6068 `mailto:`), against a real `sluice serve`
//! that checks DKIM on arrival: list mail signed by dkimpy (keys from
//! openssl, published by nsd on loopback) is sent over SMTP, the webmail
//! is driven with plain http.client (tests/webmail/client.py), the lists'
//! servers are Python HTTPS receivers on loopback with a certificate of a
//! CA made in the test (trusted through `[web] unsubscribe_ca_file`), and
//! the unsubscribe mail goes to an `smtp-sink`.

use std::process::Command;
use std::time::Duration;

use sluice_testkit as kit;

use kit::{debian_python, outbound_config, wait_until, Dns, Server, SmtpSink, Zone, PASSWORD};

/// A 2048-bit RSA key in PEM (for dkimpy) and its public half in base64
/// DER (for the DNS record).
fn rsa_key(dir: &std::path::Path) -> (std::path::PathBuf, String) {
    let pem = dir.join("dkim.pem");
    let made = Command::new("openssl")
        .args(["genrsa", "-traditional", "-out"])
        .arg(&pem)
        .arg("2048")
        .output()
        .expect("openssl (test.sh installs it)");
    assert!(made.status.success(), "{made:?}");
    let public = Command::new("openssl")
        .args(["rsa", "-pubout", "-in"])
        .arg(&pem)
        .output()
        .unwrap();
    assert!(public.status.success(), "{public:?}");
    let b64: String = String::from_utf8(public.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    (pem, b64)
}

/// The lists' servers, the list mail and the webmail client, in one
/// script. Prints `CASE: ...` lines of what it saw; asserts as it goes.
const SCRIPT: &str = r#"
import http.server, json, re, smtplib, ssl, sys, threading, html
import dkim
sys.path.insert(0, sys.argv[1])
from client import Web
web_addr, smtp_addr, user, password, keyfile, cert, certkey = sys.argv[2:9]
key = open(keyfile, "rb").read()

seen = []
class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        seen.append({"path": self.path, "body": body.decode(), "headers": {k.lower(): v for k, v in self.headers.items()}})
        if self.path.startswith("/moved"):
            self.send_response(302)
            self.send_header("Location", "https://127.0.0.1:%d/landing" % ports[0])
        else:
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, certkey)
httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
ports = [httpd.server_address[1]]
threading.Thread(target=httpd.serve_forever, daemon=True).start()
base = "https://127.0.0.1:%d" % ports[0]

def send(subject, fields, signed):
    msg = ("From: News <news@news.test>\r\nTo: <%s>\r\nSubject: %s\r\nMessage-ID: <%s@news.test>\r\n%s\r\nThe news.\r\n"
           % (user, subject, subject, "".join(f + "\r\n" for f in fields))).encode()
    if signed is not None:
        msg = dkim.sign(msg, b"s1", b"news.test", key, canonicalize=(b"relaxed", b"relaxed"),
                        include_headers=[b"from", b"to", b"subject"] + signed) + msg
    h, p = smtp_addr.rsplit(":", 1)
    with smtplib.SMTP(h, int(p), local_hostname="client.test") as s:
        s.sendmail("news@news.test", [user], msg)

both = [b"list-unsubscribe", b"list-unsubscribe-post"]
one_click = "List-Unsubscribe-Post: List-Unsubscribe=One-Click"
send("oneclick", ["List-Unsubscribe: <mailto:leave@remote.test>, <%s/u/ann?id=7>" % base, one_click], both)
send("redirected", ["List-Unsubscribe: <%s/moved>" % base, one_click], both)
send("halfsigned", ["List-Unsubscribe: <%s/half>" % base, one_click], [b"list-unsubscribe"])
send("plainhttp", ["List-Unsubscribe: <http://127.0.0.1:%d/plain>" % ports[0], one_click], both)
send("bymail", ["List-Unsubscribe: <mailto:leave@remote.test?subject=unsubscribe%20me&body=please%20remove>"], None)
send("nolist", [], None)

w = Web(web_addr)
assert w.login(user, password)[0] == 303
inbox = w.inbox()
_, listing = w.page(inbox)
def message(subject):
    m = re.search(r'<a href="(/mail/\d+/\d+)[^"]*">%s</a>' % subject, listing)
    assert m, (subject, listing[:2000])
    return m.group(1)

def unsubscribe(subject, form):
    return w.request("POST", message(subject) + "/unsubscribe", form, headers={"Origin": "http://" + web_addr})

for subject in ("oneclick", "redirected", "bymail"):
    _, page = w.page(message(subject))
    assert 'action="%s/unsubscribe"' % message(subject) in page, (subject, page)
    # Without JavaScript the server asks first; nothing is sent yet.
    status, _, body = unsubscribe(subject, {"csrf": w.csrf})
    assert status == 200 and b'name="confirm" value="1"' in body, (subject, status, body[:800])
assert seen == [], seen
# A forged or missing token changes nothing.
status, _, _ = unsubscribe("oneclick", {"csrf": "forged", "confirm": "1"})
assert status == 403 and seen == [], (status, seen)

status, _, body = unsubscribe("oneclick", {"csrf": w.csrf, "confirm": "1"})
text = html.unescape(body.decode())
print("oneclick:", status, re.search(r'unsubscribe-result" role="(\w+)">([^<]*)', text).groups(), json.dumps(seen))
seen.clear()
status, _, body = unsubscribe("redirected", {"csrf": w.csrf, "confirm": "1"})
text = html.unescape(body.decode())
print("redirected:", status, re.search(r'unsubscribe-result" role="(\w+)">([^<]*)', text).groups(), json.dumps([s["path"] for s in seen]))
seen.clear()
status, _, body = unsubscribe("bymail", {"csrf": w.csrf, "confirm": "1"})
text = html.unescape(body.decode())
print("bymail:", status, re.search(r'unsubscribe-result" role="(\w+)">([^<]*)', text).groups())

# Not signed over both fields, or plain http: a link to the list's page,
# no button, and the server posts nothing.
for subject, url in (("halfsigned", base + "/half"), ("plainhttp", "http://127.0.0.1:%d/plain" % ports[0])):
    _, page = w.page(message(subject))
    assert "/unsubscribe\"" not in page, (subject, page)
    assert re.search(r'<a class="unsubscribe" href="%s"' % re.escape(url), page), (subject, page)
    status, _, _ = unsubscribe(subject, {"csrf": w.csrf, "confirm": "1"})
    print(subject + ":", status, len(seen))
_, page = w.page(message("nolist"))
print("nolist:", "unsubscribe" in page.lower())
"#;

/// A one-click POST is offered only for list mail whose DKIM signature
/// (checked on arrival) covers both `List-Unsubscribe` and
/// `List-Unsubscribe-Post` and that names an https URL. After a
/// confirmation (the server's page; a forged CSRF token is refused), the
/// list's HTTPS server gets `List-Unsubscribe=One-Click` as a form POST
/// with no cookie, and the page says it is done; a redirect is reported
/// as a failure and not followed. A message signed over one field only,
/// or with an http URL, gets a link and nothing is posted. A `mailto:`
/// URI is sent as a message from the account (to, subject and body as
/// the URI says) that reaches the remote server, with a copy in Sent.
#[test]
fn unsubscribe_one_click_and_by_mail() {
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = rsa_key(dir.path());
    kit::make_server_certificate(dir.path());
    let record: String = format!("v=DKIM1; k=rsa; p={public}")
        .as_bytes()
        .chunks(200)
        .map(|c| format!("\"{}\"", String::from_utf8_lossy(c)))
        .collect::<Vec<_>>()
        .join(" ");
    let dns = Dns::start(vec![
        Zone::new("news.test", &[&format!("s1._domainkey IN TXT {record}")]),
        Zone::new("test", &[]),
    ]);
    let sink = SmtpSink::start(&[]);
    let server = Server::start_with(&format!(
        "{}[auth_checks]\nspf = \"off\"\ndkim = \"mark\"\n[web]\nunsubscribe_ca_file = {:?}\n",
        outbound_config(dns.addr, &[("remote.test", sink.addr)]),
        dir.path().join("ca.pem")
    ));
    let user = server.add_user("ann");
    let out = debian_python(
        SCRIPT,
        &[
            concat!(env!("CARGO_MANIFEST_DIR"), "/tests/webmail"),
            &server.addr("http").to_string(),
            &server.smtp.to_string(),
            &user,
            PASSWORD,
            &key.to_string_lossy(),
            &dir.path().join("cert.pem").to_string_lossy(),
            &dir.path().join("key.pem").to_string_lossy(),
        ],
    );
    let line = |case: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{case}:")))
            .unwrap_or_else(|| panic!("no {case} in {out}"))
            .to_string()
    };
    // Python quotes the page's text with " when it holds a '.
    let one_click = line("oneclick");
    assert!(
        one_click.starts_with("oneclick: 200 ('status', \"Unsubscribed:"),
        "{one_click}"
    );
    assert!(
        one_click.contains("\"path\": \"/u/ann?id=7\""),
        "{one_click}"
    );
    assert!(
        one_click.contains("\"body\": \"List-Unsubscribe=One-Click\""),
        "{one_click}"
    );
    assert!(
        one_click.contains("\"content-type\": \"application/x-www-form-urlencoded\""),
        "{one_click}"
    );
    assert!(!one_click.to_lowercase().contains("cookie"), "{one_click}");
    let redirected = line("redirected");
    assert!(
        redirected.starts_with("redirected: 502 ('alert', \"Unsubscribing failed:"),
        "{redirected}"
    );
    assert!(
        redirected.contains("302") && redirected.contains("not followed"),
        "{redirected}"
    );
    assert!(
        redirected.ends_with("[\"/moved\"]"),
        "the redirect was followed: {redirected}"
    );
    assert_eq!(line("halfsigned"), "halfsigned: 400 0");
    assert_eq!(line("plainhttp"), "plainhttp: 400 0");
    assert_eq!(line("nolist"), "nolist: False");
    let by_mail = line("bymail");
    assert!(
        by_mail.starts_with(
            "bymail: 200 ('status', 'The unsubscribe message was sent to leave@remote.test"
        ),
        "{by_mail}"
    );
    assert!(
        wait_until(Duration::from_secs(20), || !sink.messages().is_empty()),
        "the unsubscribe mail never reached the sink"
    );
    let sent = sink.messages().join("\n");
    assert!(sent.contains("To: leave@remote.test"), "{sent}");
    assert!(sent.contains("Subject: unsubscribe me"), "{sent}");
    // The text, base64 as compose writes it: "please remove".
    assert!(sent.contains("cGxlYXNlIHJlbW92ZQ=="), "{sent}");
    assert!(
        sent.contains(&format!("From: {user}")) || sent.contains(&format!("<{user}>")),
        "{sent}"
    );
    assert_eq!(sink.messages().len(), 1, "one message only");
    server.assert_no_panic();
}
