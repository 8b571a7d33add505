//! The webmail's Filters pages against a real `sluice serve`: rules and
//! raw Sieve scripts edited with an independent HTTP client (Python's
//! http.client, tests/webmail/client.py), then mail sent with smtplib and
//! its mailbox and flags read back with imaplib.

use sluice_testkit as kit;

use std::time::Duration;

use kit::{python, Server, PASSWORD};

/// Python prelude: the client module, the addresses in sys.argv, and
/// helpers that read the pages.
fn script(body: &str) -> String {
    format!(
        "import sys, re, html\nsys.path.insert(0, {:?})\nfrom client import Web\n{HELPERS}\n{body}",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/webmail")
    )
}

const HELPERS: &str = r#"
def scripts(w):
    """The script list: [(name, active)]."""
    _, text = w.page("/settings/filters/scripts")
    return [(html.unescape(n), 'class="active"' in row)
            for n, row in re.findall(r'<tr data-script="([^"]*)">(.*?)</tr>', text, re.S)]

def source(w, name):
    """A script's text as its editor shows it."""
    _, text = w.page("/settings/filters/script?name=" + name)
    return html.unescape(re.search(r"<textarea[^>]*>\n(.*?)</textarea>", text, re.S).group(1))

def rules(w):
    """The rule page: (its text, the rules in words, the revision)."""
    _, text = w.page("/settings/filters")
    found = [html.unescape(r) for r in re.findall(r'<span class="rule">(.*?)</span>', text)]
    rev = re.search(r'name="rev" value="([^"]+)"', text).group(1)
    return text, found, rev

def post_rules(w, form, expect=303):
    text, _, rev = rules(w)
    status, h, body = w.request("POST", "/settings/filters", dict(form, csrf=w.csrf, rev=rev))
    assert status == expect, (form, status, body[:2000])
    return body.decode()
"#;

/// The web part: scripts made and refused in the raw editor, rules added,
/// edited, reordered and deleted, the vacation answer, the active script
/// switched from the user's own to the rules.
const EDIT: &str = r##"
web_addr, user, password = sys.argv[1:4]
w = Web(web_addr)
status, _, _ = w.login(user, password)
assert status == 303, status
_, text = w.page("/settings")
assert 'href="/settings/filters"' in text, text

# A script of the user's own, made active.
mine = 'require ["fileinto"];\r\nif header :contains "subject" "zzz" {\r\n    fileinto "INBOX";\r\n}\r\n'
w.page("/settings/filters/script")
status, h, body = w.request("POST", "/settings/filters/script",
    {"csrf": w.csrf, "new": "1", "name": "mine", "source": mine, "op": "save_activate"})
assert status == 303 and h["location"] == "/settings/filters/script?name=mine&saved=1", (status, h, body)
assert scripts(w) == [("mine", True)], scripts(w)
assert source(w, "mine") == mine

# A broken script is shown again with where it is wrong, and not stored.
broken = 'require ["fileinto"];\r\nif header :contains "subject" {\r\n    keep;\r\n}\r\n'
status, _, body = w.request("POST", "/settings/filters/script",
    {"csrf": w.csrf, "name": "mine", "source": broken, "op": "save"})
text = body.decode()
assert status == 422, (status, text)
assert re.search(r"line \d+, column \d+", text), text
assert html.unescape(re.search(r"<textarea[^>]*>\n(.*?)</textarea>", text, re.S).group(1)) == broken
assert source(w, "mine") == mine
status, _, body = w.request("POST", "/settings/filters/script",
    {"csrf": w.csrf, "new": "1", "name": "other", "source": "fileinto \"x\";", "op": "save"})
assert status == 422 and re.search(r"line 1, column \d+", body.decode()), (status, body)
assert scripts(w) == [("mine", True)], scripts(w)
# A new script may not take an existing name; a script over 64 KiB is refused.
status, _, body = w.request("POST", "/settings/filters/script",
    {"csrf": w.csrf, "new": "1", "name": "mine", "source": "keep;", "op": "save"})
assert status == 422 and "exists already" in body.decode(), (status, body)
status, _, body = w.request("POST", "/settings/filters/script",
    {"csrf": w.csrf, "new": "1", "name": "big", "source": "#" * 70000 + "\r\nkeep;", "op": "save"})
assert status == 422 and "64 KiB" in body.decode(), (status, body[:500])
assert source(w, "mine") == mine

# Without the session's token nothing changes.
for form in [{"name": "mine", "source": "keep;", "op": "save"},
             {"name": "mine", "source": "keep;", "op": "save", "csrf": "forged"}]:
    status, _, _ = w.request("POST", "/settings/filters/script", form)
    assert status == 403, status
status, _, _ = w.request("POST", "/settings/filters/scripts", {"name": "mine", "op": "deactivate"})
assert status == 403, status
status, _, _ = w.request("POST", "/settings/filters", {"op": "add", "field": "subject", "test": "is",
    "value": "x", "action": "discard"})
assert status == 403, status
assert source(w, "mine") == mine and scripts(w) == [("mine", True)]

# The rule page says the user's script is the active one; a rule saved
# without asking to switch leaves it so.
text, found, _ = rules(w)
assert found == [] and "“mine”, so these rules are not used" in text, text
post_rules(w, {"op": "add", "field": "subject", "test": "contains", "value": "[list]",
               "action": "move", "folder": "INBOX", "new_folder": "Lists", "create": "1"})
assert scripts(w) == [("mine", True), ("webmail", False)], scripts(w)
post_rules(w, {"op": "add", "field": "from", "test": "is", "value": "boss@example.net",
               "action": "flag", "activate": "1"})
assert scripts(w) == [("mine", False), ("webmail", True)], scripts(w)
text, found, _ = rules(w)
assert "so these rules are not used" not in text
assert found == ["If Subject contains “[list]”: move to “Lists” (created if missing)",
                 "If From is “boss@example.net”: flag"], found

# A third rule: added, edited, moved up, refused with a stale form, deleted.
post_rules(w, {"op": "add", "field": "header", "header": "X-Test", "test": "is",
               "value": 'say "hi" \\o/', "action": "discard"})
sieve = source(w, "webmail")
assert 'if header :is :comparator "i;ascii-casemap" "X-Test" "say \\"hi\\" \\\\o/" {' in sieve, sieve
_, text = w.page("/settings/filters?edit=2")
assert 'name="op" value="update"' in text and 'value="X-Test"' in text, text
post_rules(w, {"op": "update", "index": "2", "field": "header", "header": "X-Test", "test": "is",
               "value": "other", "action": "reject", "reject_text": "Not\r\nwanted"})
post_rules(w, {"op": "up", "index": "2"})
_, found, old_rev = rules(w)
assert found == ["If Subject contains “[list]”: move to “Lists” (created if missing)",
                 "If header X-Test is “other”: reject with “Not wanted”",
                 "If From is “boss@example.net”: flag"], found
post_rules(w, {"op": "add", "field": "subject", "test": "is", "value": "", "action": "discard"}, expect=422)
status, _, body = w.request("POST", "/settings/filters",
    {"op": "delete", "index": "0", "csrf": w.csrf, "rev": "0000000000000000"})
assert status == 409 and "changed elsewhere" in body.decode(), status
post_rules(w, {"op": "delete", "index": "1"})
_, found, _ = rules(w)
assert found == ["If Subject contains “[list]”: move to “Lists” (created if missing)",
                 "If From is “boss@example.net”: flag"], found

# The vacation answer: on, refused with a bad number, off again.
post_rules(w, {"op": "vacation", "vacation_enabled": "1", "vacation_subject": "Away",
               "vacation_text": "Back on Monday.", "vacation_days": "2"})
assert 'vacation :days 2 :subject "Away" "Back on Monday.";' in source(w, "webmail")
body = post_rules(w, {"op": "vacation", "vacation_enabled": "1", "vacation_text": "x",
                      "vacation_days": "0"}, expect=422)
assert "from 1 to 365" in body, body
post_rules(w, {"op": "vacation", "vacation_subject": "Away", "vacation_text": "Back on Monday.",
               "vacation_days": "2"})
sieve = source(w, "webmail")
assert sieve.startswith("# sluice-rules v1\r\n") and "\r\nvacation" not in sieve, sieve
assert 'require ["fileinto", "mailbox", "imap4flags"];' in sieve, sieve
_, text = w.page("/settings/filters")
assert 'name="vacation_text" rows="5">Back on Monday.</textarea>' in text, text

# The active script cannot be deleted; the others can.
status, _, body = w.request("POST", "/settings/filters/scripts", {"csrf": w.csrf, "op": "delete", "name": "webmail"})
assert status == 409 and "is the active script" in body.decode(), status
status, _, _ = w.request("POST", "/settings/filters/scripts", {"csrf": w.csrf, "op": "delete", "name": "mine"})
assert status == 303, status
assert scripts(w) == [("webmail", True)], scripts(w)

# The account's own spam threshold: a number is kept, nonsense and a
# missing token are refused.
status, _, _ = w.request("POST", "/settings/filters/spam", {"csrf": w.csrf, "threshold": "lots"})
assert status == 400, status
status, _, _ = w.request("POST", "/settings/filters/spam", {"csrf": "forged", "threshold": "1"})
assert status == 403, status
status, _, _ = w.request("POST", "/settings/filters/spam", {"csrf": w.csrf, "threshold": "7.5"})
assert status == 303, status
print("ok")
"##;

/// Sends three messages; prints `ok`.
const SEND: &str = r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
user = sys.argv[2]
with smtplib.SMTP(h, int(p)) as s:
    for sender, subject in [("Carol <carol@example.net>", "[list] weekly digest"),
                            ("The Boss <boss@example.net>", "quarterly numbers"),
                            ("Carol <carol@example.net>", "hello there")]:
        msg = "From: %s\r\nTo: <%s>\r\nSubject: %s\r\n\r\nHello.\r\n" % (sender, user, subject)
        s.sendmail("bounces@example.net", [user], msg.encode())
print("ok")
"#;

/// Every message of a user: `MAILBOX|SUBJECT|FLAGS` lines (without `\Recent`).
const LIST: &str = r#"
import imaplib, sys, re
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
m.login(sys.argv[2], sys.argv[3])
typ, boxes = m.list()
for line in boxes:
    name = line.decode().rsplit(' "/" ', 1)[1].strip('"')
    typ, data = m.select('"%s"' % name, readonly=True)
    if int(data[0]) == 0:
        continue
    typ, data = m.fetch("1:*", "(FLAGS BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
    for item in data:
        if not isinstance(item, tuple):
            continue
        # \Recent says only which session saw the message first.
        flags = " ".join(f for f in re.search(rb"FLAGS \(([^)]*)\)", item[0]).group(1).decode().split()
                         if f != "\\Recent")
        subject = item[1].decode().strip().split(":", 1)[1].strip()
        print("%s|%s|%s" % (name, subject, flags))
m.logout()
"#;

#[test]
fn rules_written_in_the_webmail_file_and_flag_delivered_mail() {
    let server = Server::start();
    let user = server.add_user("ann");
    let out = python(
        &script(EDIT),
        &[&server.addr("http").to_string(), &user, PASSWORD],
    );
    assert_eq!(out.trim(), "ok");
    let threshold = server.cli_ok(&["spam", "threshold", &user]);
    assert_eq!(threshold.trim(), "7.5 (the account's own)");

    // Delivery sees scripts through the directory snapshot, which the
    // server reloads when the serial moves: wait until it has.
    let serial = server.count("SELECT value FROM meta WHERE key = 'directory_serial'");
    assert!(
        kit::wait_until(Duration::from_secs(10), || {
            server.log().contains(&format!("serial={serial} "))
        }),
        "the server did not pick up the rules"
    );

    let out = python(SEND, &[&server.smtp.to_string(), &user]);
    assert_eq!(out.trim(), "ok");
    let mut mail: Vec<String> = python(LIST, &[&server.imap.to_string(), &user, PASSWORD])
        .lines()
        .map(str::to_string)
        .collect();
    mail.sort();
    assert_eq!(
        mail,
        [
            "INBOX|hello there|",
            "INBOX|quarterly numbers|\\Flagged",
            "Lists|[list] weekly digest|",
        ],
        "{mail:?}"
    );
}
