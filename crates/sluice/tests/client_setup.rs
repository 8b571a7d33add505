//! What a new administrator and a new mail client meet: `sluice domain
//! add` and `sluice user add` say what they made (and the DNS records a
//! domain needs), and the web listener answers the set-up requests mail
//! clients make (Thunderbird's autoconfig, Microsoft's autodiscover) and
//! the MTA-STS policy fetch senders make, each asked as the client asks
//! it, by Python's http.client, and read with an XML parser.

use sluice_testkit as kit;

use kit::{addr_arg, python, Server, DOMAIN, PASSWORD};

#[test]
fn domain_and_user_commands_say_what_they_made() {
    let server = Server::start();
    let out = server.cli_ok(&["domain", "add", "example.net"]);
    for expected in [
        "domain example.net added.",
        "example.net.",
        "IN MX    10 ",
        "\"v=spf1 mx ~all\"",
        "_dmarc.example.net.",
        "_smtp._tls.example.net.",
        "_mta-sts.example.net.",
        "autoconfig.example.net.",
        "_submission._tcp.example.net.",
        "_imap._tcp.example.net.",
        "`sluice dkim keygen example.net`",
    ] {
        assert!(out.contains(expected), "{expected}:\n{out}");
    }
    server.cli_ok(&["dkim", "keygen", "example.net", "--selector", "s1"]);
    let again = server.cli_ok(&["domain", "records", "example.net"]);
    assert!(
        again.contains("s1._domainkey.example.net. IN TXT"),
        "{again}"
    );
    assert!(!again.contains("dkim keygen"), "{again}");
    let unknown = server.cli(&["domain", "records", "nowhere.test"], "");
    assert!(!unknown.status.success());
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("nowhere.test is not a local domain"),
        "{unknown:?}"
    );

    let out = server.cli(
        &["user", "add", "carol@example.net", "--password-stdin"],
        "pw\n",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("account carol@example.net added."), "{text}");
    assert!(text.contains("STARTTLS"), "{text}");
    let out = server.cli(
        &["user", "passwd", "carol@example.net", "--password-stdin"],
        "pw2\n",
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("password of carol@example.net changed."));
}

#[test]
fn autoconfig_autodiscover_and_mta_sts_answer_as_clients_ask() {
    let server = Server::start();
    let alice = server.add_user("alice");
    let out = python(
        r#"
import http.client, sys
import xml.etree.ElementTree as ET
h, p = sys.argv[1].rsplit(":", 1)
alice = sys.argv[2]
def get(path, host, method="GET", body=None, headers={}):
    c = http.client.HTTPConnection(h, int(p), timeout=10)
    c.request(method, path, body=body, headers=dict(headers, Host=host))
    r = c.getresponse()
    return r.status, r.getheader("Content-Type"), r.read().decode()
# Thunderbird: the domain's well-known URL, with the address.
st, ct, text = get("/.well-known/autoconfig/mail/config-v1.1.xml?emailaddress=" + alice, "example.org")
print("autoconfig", st, ct)
root = ET.fromstring(text)
for s in root.iter("incomingServer"):
    print("in", s.get("type"), s.find("port").text, s.find("socketType").text, s.find("username").text, s.find("hostname").text)
for s in root.iter("outgoingServer"):
    print("out", s.get("type"), s.find("port").text, s.find("socketType").text)
# Thunderbird: the autoconfig host, without an address.
st, _, text = get("/mail/config-v1.1.xml", "autoconfig.example.org:8080")
print("autoconfig-host", st, ET.fromstring(text).find("emailProvider").get("id"))
print("autoconfig-foreign", get("/.well-known/autoconfig/mail/config-v1.1.xml?emailaddress=x@elsewhere.test", "elsewhere.test")[0])
# Outlook's POX autodiscover.
req = ('<?xml version="1.0" encoding="utf-8"?><Autodiscover xmlns="http://schemas.microsoft.com/exchange/autodiscover/outlook/requestschema/2006">'
       '<Request><EMailAddress>%s</EMailAddress><AcceptableResponseSchema>http://schemas.microsoft.com/exchange/autodiscover/outlook/responseschema/2006a</AcceptableResponseSchema></Request></Autodiscover>') % alice
st, ct, text = get("/autodiscover/autodiscover.xml", "autodiscover.example.org", "POST", req, {"Content-Type": "text/xml"})
print("autodiscover", st, ct)
ns = {"r": "http://schemas.microsoft.com/exchange/autodiscover/outlook/responseschema/2006a"}
for proto in ET.fromstring(text).iterfind(".//r:Protocol", ns):
    print("proto", proto.find("r:Type", ns).text, proto.find("r:Port", ns).text, proto.find("r:Encryption", ns).text, proto.find("r:LoginName", ns).text)
print("autodiscover-bad", get("/autodiscover/autodiscover.xml", "example.org", "POST", "<nothing/>")[0])
# A sender fetching the MTA-STS policy (RFC 8461 §3.3).
st, ct, text = get("/.well-known/mta-sts.txt", "mta-sts.example.org")
print("mta-sts", st, ct)
policy = dict(line.split(": ", 1) for line in text.strip().split("\r\n"))
print("policy", policy["version"], policy["mode"], policy["mx"], policy["max_age"])
print("mta-sts-foreign", get("/.well-known/mta-sts.txt", "mta-sts.elsewhere.test")[0])
"#,
        &[&addr_arg(server.addr("http")), &alice],
    );
    let imap = server.imap.port();
    let pop3 = server.pop3.port();
    let submission = server.addr("submission").port();
    let imaps = server.imaps.port();
    for expected in [
        "autoconfig 200 application/xml; charset=utf-8".to_string(),
        format!("in imap {imaps} SSL %EMAILADDRESS% mx.example.org"),
        format!("in imap {imap} STARTTLS %EMAILADDRESS% mx.example.org"),
        format!("in pop3 {pop3} STARTTLS"),
        format!("out smtp {submission} STARTTLS"),
        "autoconfig-host 200 example.org".to_string(),
        "autoconfig-foreign 404".to_string(),
        "autodiscover 200".to_string(),
        format!("proto IMAP {imaps} SSL {alice}"),
        format!("proto SMTP {submission} TLS {alice}"),
        "autodiscover-bad 400".to_string(),
        "mta-sts 200 text/plain".to_string(),
        "policy STSv1 testing mx.example.org 604800".to_string(),
        "mta-sts-foreign 404".to_string(),
    ] {
        assert!(out.contains(&expected), "{expected}:\n{out}");
    }
    // The answers name only what a client needs: never a password.
    assert!(!out.contains(PASSWORD));
    assert_eq!(DOMAIN, "example.org");
}

#[test]
fn neomutt_sends_with_the_readme_settings() {
    // The README's neomutt lines, with this server's ports and a password
    // so that it runs unattended; batch mode sends one message.
    let server = Server::start();
    let alice = server.add_user("alice");
    let bob = server.add_user("bob");
    let home = tempfile::tempdir().unwrap();
    let user = alice.replace('@', "%40");
    let rc = format!(
        "set folder = \"imap://{user}@127.0.0.1:{imap}/\"\n\
         set spoolfile = \"+INBOX\"\n\
         set smtp_url = \"smtp://{user}@127.0.0.1:{submission}/\"\n\
         set from = \"{alice}\"\n\
         set ssl_starttls = yes\n\
         set ssl_force_tls = yes\n\
         set ssl_ca_certificates_file = \"{ca}\"\n\
         set smtp_pass = \"{PASSWORD}\"\n\
         set imap_pass = \"{PASSWORD}\"\n\
         set record = \"\"\n",
        imap = server.imap.port(),
        submission = server.addr("submission").port(),
        ca = server.data_dir().join("tls/cert.pem").display(),
    );
    let rc_path = home.path().join("neomuttrc");
    std::fs::write(&rc_path, rc).unwrap();
    let mut child = std::process::Command::new(kit::require_program("neomutt", "neomutt"))
        .env("HOME", home.path())
        .env("TERM", "dumb")
        .args(["-n", "-F"])
        .arg(&rc_path)
        .args(["-s", "sent by neomutt", &bob])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run neomutt");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello from a real client\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "neomutt: {}{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
    let read = python(
        r#"
import imaplib, sys, time
h, p = sys.argv[1].rsplit(":", 1)
for _ in range(100):
    m = imaplib.IMAP4(h, int(p)); m.login(sys.argv[2], sys.argv[3]); m.select("INBOX")
    typ, data = m.search(None, "SUBJECT", '"sent by neomutt"')
    if data[0]:
        typ, msg = m.fetch(data[0].split()[0], "(BODY.PEEK[])")
        print("got", b"hello from a real client" in msg[0][1])
        break
    m.logout(); time.sleep(0.1)
"#,
        &[&addr_arg(server.imap), &bob, PASSWORD],
    );
    assert!(read.contains("got True"), "{read}\n{}", server.log());
    let line = server
        .log()
        .lines()
        .find(|l| l.contains("smtp transaction") && l.contains(&format!("account=\"{alice}\"")))
        .map(str::to_string);
    assert!(
        line.is_some_and(|l| l.contains("tls=true")),
        "{}",
        server.log()
    );
}
