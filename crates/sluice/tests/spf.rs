//! SPF on incoming mail, with `nsd` on loopback publishing the senders'
//! policies and Python's smtplib sending from 127.0.0.1: each result is
//! written in a `Received-SPF:` field, and with `spf = "reject"` a fail
//! is refused at DATA while the rest is taken.

use sluice_testkit as kit;

use kit::{python, Dns, Server, Zone, PASSWORD};

fn dns() -> Dns {
    Dns::start(vec![
        Zone::new("pass.test", &["@ IN TXT \"v=spf1 ip4:127.0.0.1 -all\""]),
        Zone::new("fail.test", &["@ IN TXT \"v=spf1 ip4:192.0.2.1 -all\""]),
        Zone::new("soft.test", &["@ IN TXT \"v=spf1 ~all\""]),
        Zone::new("none.test", &["@ IN A 192.0.2.9"]),
    ])
}

/// Sends one message from each sender; prints each reply code, then the
/// `Received-SPF:` field of each stored message, in order.
const SEND_AND_READ: &str = r#"
import imaplib, smtplib, sys
smtp, imap, user, password = sys.argv[1:5]
senders = sys.argv[5:]
h, p = smtp.rsplit(":", 1)
for sender in senders:
    s = smtplib.SMTP(h, int(p), local_hostname="client.pass.test")
    try:
        s.sendmail(sender, [user], "From: %s\r\nSubject: from %s\r\n\r\nx\r\n" % (sender, sender))
        print("sent", sender, 250)
    except smtplib.SMTPDataError as e:
        print("sent", sender, e.smtp_code, e.smtp_error.decode())
    s.quit()
h, p = imap.rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(user, password); m.select("INBOX")
typ, data = m.search(None, "ALL")
for n in data[0].split():
    typ, d = m.fetch(n, "(BODY.PEEK[HEADER.FIELDS (Received-SPF Subject)])")
    fields = d[0][1].decode().replace("\r\n\t", " ").replace("\r\n ", " ")
    print("stored", " | ".join(l for l in fields.splitlines() if l))
"#;

fn run(server: &Server, user: &str, senders: &[&str]) -> String {
    let mut args = vec![
        server.smtp.to_string(),
        server.imap.to_string(),
        user.to_string(),
        PASSWORD.to_string(),
    ];
    args.extend(senders.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    python(SEND_AND_READ, &args)
}

#[test]
fn every_result_is_recorded_in_received_spf() {
    let dns = dns();
    let server = Server::start_with(&format!(
        "[dns]\nresolver = \"{}\"\n[auth_checks]\nspf = \"mark\"\n",
        dns.addr
    ));
    let user = server.add_user("spf");
    let out = run(
        &server,
        &user,
        &["a@pass.test", "b@fail.test", "c@soft.test", "d@none.test"],
    );
    let stored: Vec<&str> = out.lines().filter(|l| l.starts_with("stored")).collect();
    assert_eq!(stored.len(), 4, "{out}\n{}", server.log());
    for (line, (result, subject)) in stored.iter().zip([
        ("pass", "a@pass.test"),
        ("fail", "b@fail.test"),
        ("softfail", "c@soft.test"),
        ("none", "d@none.test"),
    ]) {
        assert!(line.contains(&format!("Received-SPF: {result} ")), "{line}");
        assert!(line.contains(&format!("from {subject}")), "{line}");
        assert!(line.contains("client-ip=127.0.0.1"), "{line}");
    }
}

#[test]
fn reject_mode_refuses_a_fail_and_takes_the_rest() {
    let dns = dns();
    let server = Server::start_with(&format!(
        "[dns]\nresolver = \"{}\"\n[auth_checks]\nspf = \"reject\"\n",
        dns.addr
    ));
    let user = server.add_user("strict");
    let out = run(
        &server,
        &user,
        &["a@pass.test", "b@fail.test", "c@soft.test"],
    );
    assert!(out.contains("sent a@pass.test 250"), "{out}");
    assert!(out.contains("sent b@fail.test 550 5.7.23"), "{out}");
    assert!(out.contains("sent c@soft.test 250"), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("stored")).count(),
        2,
        "{out}"
    );
}
