//! Bearer tokens: created in the webmail's Settings with Python's
//! `requests` (log in, read the form's CSRF token, post), used by `jmapc`
//! (`Client.create_with_api_token`), listed with their last use, revoked,
//! then refused with 401 and a `WWW-Authenticate` challenge; guessed
//! tokens are throttled like guessed passwords.

use sluice_testkit as kit;

use kit::{venv_python, Server, PASSWORD};

/// Python prelude: `web_session()` logs in to the webmail over HTTPS and
/// answers the `requests` session; `settings(s)` the Settings page and
/// its CSRF token; `create(s, name)` a new token's value.
const WEB: &str = r##"
import sys, re, html, json, requests
host, user, password = sys.argv[1:4]
BASE = "https://" + host

def web_session():
    s = requests.Session()
    r = s.post(BASE + "/login", data={"address": user, "password": password}, allow_redirects=False)
    assert r.status_code == 303, (r.status_code, r.text[:300])
    return s

def settings(s):
    r = s.get(BASE + "/settings")
    assert r.status_code == 200, r.status_code
    return r.text, re.search(r'name="csrf" value="([^"]+)"', r.text).group(1)

def create(s, name):
    _, csrf = settings(s)
    r = s.post(BASE + "/settings/tokens", data={"csrf": csrf, "name": name}, allow_redirects=False)
    assert r.status_code == 200, (r.status_code, r.text[:300])
    return html.unescape(re.search(r'<code id="token-value">([^<]+)</code>', r.text).group(1))

def rows(text):
    """The token table: [(name, last used, id)]."""
    return [(html.unescape(n), used, i) for n, used, i in re.findall(
        r'<td class="name">([^<]*)</td><td>[^<]*</td><td>([^<]*)</td><td><form[^>]*>'
        r'<input type="hidden" name="csrf" value="[^"]*"><input type="hidden" name="revoke" value="([^"]+)">',
        text)]

def bearer(token):
    return requests.get(BASE + "/jmap/session", headers={"Authorization": "Bearer " + token})
"##;

/// Create two tokens, use one with jmapc, see it listed as used, revoke
/// it: 401 with both challenges, while the other still works; a token
/// altered to name another account, or made up, is refused too.
#[test]
fn tokens_made_in_settings_log_jmapc_in_until_revoked() {
    let server = Server::start();
    let user = server.add_user("alice");
    let bob = server.add_user("bob");
    let ca = server.data_dir().join("tls/cert.pem");
    let out = venv_python(
        &format!(
            "{WEB}\n{}",
            r##"
from jmapc import Client
from jmapc.methods import CoreEcho, MailboxGet
bob = sys.argv[4]
s = web_session()
text, _ = settings(s)
assert "No tokens." in text, text
phone = create(s, "phone <1>")
laptop = create(s, "laptop")
assert phone != laptop and phone.startswith("sluice."), (phone, laptop)
text, _ = settings(s)
assert phone not in text and laptop not in text, "a token is shown once only"
listed = rows(text)
assert [n for n, _, _ in listed] == ["phone <1>", "laptop"], listed
assert all(used == "never" for _, used, _ in listed), listed

# jmapc with the token: the session is alice's, and her mailboxes answer.
c = Client.create_with_api_token(host, phone)
assert c.jmap_session.username == user, c.jmap_session.username
r = c.request(CoreEcho(data={"x": 1}))
assert r.data == {"x": 1}, r
boxes = c.request(MailboxGet(ids=None))
assert "INBOX" in [b.name for b in boxes.data], boxes
text, _ = settings(s)
used = {n: u for n, u, _ in rows(text)}
assert used["phone <1>"] != "never" and used["laptop"] == "never", used

# Another account's number in the token, or a made-up token: refused.
parts = phone.split(".")
assert requests.get(BASE + "/jmap/session", auth=(bob, password)).status_code == 200
other = ".".join([parts[0], str(int(parts[1]) + 1)] + parts[2:])
for bad in [other, "sluice.1.0000000000000000." + "0" * 64, "nonsense"]:
    r = bearer(bad)
    assert r.status_code == 401, (bad, r.status_code)

# Revoked: 401 with the challenges; the other token still works.
pid = [i for n, _, i in rows(text) if n == "phone <1>"][0]
_, csrf = settings(s)
r = s.post(BASE + "/settings/tokens", data={"csrf": csrf, "revoke": pid}, allow_redirects=False)
assert r.status_code == 303, r.status_code
r = bearer(phone)
assert r.status_code == 401, r.status_code
challenges = r.headers["WWW-Authenticate"]
assert "Bearer" in challenges and "Basic" in challenges, challenges
r = requests.post(BASE + "/jmap/api", headers={"Authorization": "Bearer " + phone},
                  json={"using": ["urn:ietf:params:jmap:core"], "methodCalls": [["Core/echo", {}, "0"]]})
assert r.status_code == 401, r.status_code
assert bearer(laptop).json()["username"] == user
assert [n for n, _, _ in rows(settings(s)[0])] == ["laptop"]
# Revoking twice, or without the form's token, is refused.
r = s.post(BASE + "/settings/tokens", data={"csrf": csrf, "revoke": pid}, allow_redirects=False)
assert r.status_code == 404, r.status_code
r = s.post(BASE + "/settings/tokens", data={"name": "x"}, allow_redirects=False)
assert r.status_code == 403, r.status_code
r = s.post(BASE + "/settings/tokens", data={"csrf": csrf, "name": "  "}, allow_redirects=False)
assert r.status_code == 400, r.status_code
print("ok")
"##
        ),
        &[
            &format!("127.0.0.1:{}", server.addr("https").port()),
            &user,
            PASSWORD,
            &bob,
        ],
        &[("REQUESTS_CA_BUNDLE", ca.to_str().unwrap())],
    );
    assert_eq!(out.trim(), "ok");
}

/// Guessed tokens count as failed logins: a burst of them from one
/// address is answered 429 past the first failures, and the log says the
/// client is throttled.
#[test]
fn guessed_tokens_are_throttled_like_passwords() {
    let server = Server::start();
    let user = server.add_user("alice");
    let ca = server.data_dir().join("tls/cert.pem");
    let out = venv_python(
        &format!(
            "{WEB}\n{}",
            r##"
from concurrent.futures import ThreadPoolExecutor
guess = lambda i: bearer("sluice.1.%016x.%s" % (i, "ab" * 32)).status_code
for i in range(3):
    assert guess(i) == 401
with ThreadPoolExecutor(8) as pool:
    codes = list(pool.map(guess, range(100, 108)))
assert set(codes) <= {401, 429}, codes
assert 429 in codes, codes
print("ok")
"##
        ),
        &[
            &format!("127.0.0.1:{}", server.addr("https").port()),
            &user,
            PASSWORD,
        ],
        &[("REQUESTS_CA_BUNDLE", ca.to_str().unwrap())],
    );
    assert_eq!(out.trim(), "ok");
    assert!(
        server
            .log()
            .contains("login throttled: too many recent failures"),
        "{}",
        server.log()
    );
}
