//! VacationResponse (RFC 8621 §8) on the account's Sieve vacation: set
//! over JMAP, seen by ManageSieve (`sieve-connect`), answering mail
//! delivered over SMTP; another active script keeps it from turning on.

use std::process::{Command, Output, Stdio};

use super::raw_script;
use sluice_testkit as kit;

use kit::{venv_python, Server, PASSWORD};

/// Runs `sieve-connect` as `user` with `args`.
fn sieve_connect(server: &Server, user: &str, args: &[&str]) -> String {
    let addr = server.addr("managesieve");
    let mut child = Command::new("sieve-connect")
        .args(["--nosrv", "--notlsverify", "--passwordfd", "0"])
        .args(["-s", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .args(["-u", user])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sieve-connect must be installed (test.sh installs it)");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{PASSWORD}\n").as_bytes())
        .unwrap();
    let out: Output = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "sieve-connect {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const PRELUDE: &str = r##"
VAC = "urn:ietf:params:jmap:vacationresponse"
s, h, body = raw("GET", "/jmap/session")
session = json.loads(body)
A = session["primaryAccounts"][MAIL]
def call(name, args):
    args = dict(args); args.setdefault("accountId", A)
    return api([[name, args, "c"]], using=(CORE, VAC))["methodResponses"][0]
def ok(name, args):
    n, a, _ = call(name, args)
    assert n == name, (n, a)
    return a
"##;

fn script(body: &str) -> String {
    raw_script(&format!("{PRELUDE}\n{body}"))
}

#[test]
fn vacation_response_is_the_sieve_vacation() {
    let server = Server::start();
    let user = server.add_user("alice");
    let carol = server.add_user("carol");
    let http = server.addr("http").to_string();
    let out = venv_python(
        &script(
            r##"
g = ok("VacationResponse/get", {"ids": None})
eq(g["list"], [{"id": "singleton", "isEnabled": False, "fromDate": None, "toDate": None,
                "subject": None, "textBody": None, "htmlBody": None}], "off at first")
s0 = g["state"]
r = ok("VacationResponse/set", {"update": {"singleton": {"isEnabled": True, "subject": "Away",
                                                          "textBody": "Back on Monday."}}})
assert "singleton" in r["updated"], r
assert r["newState"] != s0, r
r = ok("VacationResponse/set", {"update": {"singleton": {"fromDate": "2030-01-01T00:00:00Z"}, "other": {}},
                                "create": {"x": {}}, "destroy": ["singleton"]})
eq(r["notUpdated"]["singleton"]["type"], "invalidProperties", "dates are not offered")
eq(r["notUpdated"]["other"]["type"], "notFound", "one object")
eq(r["notCreated"]["x"]["type"], "singleton", "no creation")
eq(r["notDestroyed"]["singleton"]["type"], "singleton", "no destruction")
eq(call("VacationResponse/set", {"ifInState": s0})[1]["type"], "stateMismatch", "ifInState")
g = ok("VacationResponse/get", {"ids": ["singleton", "x"], "properties": ["isEnabled", "subject", "textBody"]})
eq(g["list"], [{"id": "singleton", "isEnabled": True, "subject": "Away", "textBody": "Back on Monday."}], "on")
eq(g["notFound"], ["x"], "notFound")
print("ok")
"##,
        ),
        &[&http, &user, PASSWORD],
        &[],
    );
    assert_eq!(out.trim(), "ok", "{}", server.log());

    // ManageSieve sees the same script, active.
    let list = sieve_connect(&server, &user, &["--list"]);
    assert!(
        list.lines()
            .any(|l| l.contains("webmail") && l.contains("ACTIVE")),
        "{list}"
    );
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("webmail.sieve");
    let local = local.to_string_lossy().into_owned();
    sieve_connect(
        &server,
        &user,
        &[
            "--download",
            "--remotesieve",
            "webmail",
            "--localsieve",
            &local,
        ],
    );
    let source = std::fs::read_to_string(&local).unwrap();
    assert!(
        source.contains("vacation :days 7 :subject \"Away\" \"Back on Monday.\";"),
        "{source}"
    );

    // Mail to the account is answered, once, in the sender's INBOX.
    let out = venv_python(
        r##"
import sys, smtplib, imaplib, time
smtp_addr, imap_addr, user, carol, password = sys.argv[1:6]
h, p = smtp_addr.rsplit(":", 1)
s = smtplib.SMTP(h, int(p))
s.sendmail(carol, [user], "From: %s\r\nTo: %s\r\nSubject: are you there\r\nMessage-ID: <q1@example.org>\r\n\r\nhello\r\n" % (carol, user))
s.quit()
ih, ip = imap_addr.rsplit(":", 1)
deadline = time.monotonic() + 20
while True:
    m = imaplib.IMAP4(ih, int(ip)); m.login(carol, password); m.select("INBOX")
    typ, dat = m.search(None, "SUBJECT", '"Away"')
    found = dat[0].split()
    if found:
        typ, msg = m.fetch(found[0], "(BODY[TEXT])")
        assert b"Back on Monday." in msg[0][1], msg
        m.logout()
        break
    m.logout()
    assert time.monotonic() < deadline, "no vacation answer"
    time.sleep(0.2)
print("ok")
"##,
        &[
            &server.smtp.to_string(),
            &server.addr("imap").to_string(),
            &user,
            &carol,
            PASSWORD,
        ],
        &[],
    );
    assert_eq!(out.trim(), "ok", "{}", server.log());

    // Another script made active over ManageSieve: the answer is off, and
    // JMAP does not turn it on over that script.
    let other = dir.path().join("other.sieve");
    std::fs::write(&other, "keep;\r\n").unwrap();
    let other = other.to_string_lossy().into_owned();
    sieve_connect(
        &server,
        &user,
        &["--upload", "--localsieve", &other, "--remotesieve", "mine"],
    );
    sieve_connect(&server, &user, &["--activate", "--remotesieve", "mine"]);
    let out = venv_python(
        &script(
            r##"
eq(ok("VacationResponse/get", {})["list"][0]["isEnabled"], False, "another script runs")
r = ok("VacationResponse/set", {"update": {"singleton": {"isEnabled": True}}})
eq(r["notUpdated"]["singleton"]["type"], "forbidden", "not over another script")
r = ok("VacationResponse/set", {"update": {"singleton": {"isEnabled": False}}})
assert "singleton" in r["updated"], r
print("ok")
"##,
        ),
        &[&http, &user, PASSWORD],
        &[],
    );
    assert_eq!(out.trim(), "ok", "{}", server.log());
}
