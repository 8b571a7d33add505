//! DKIM signing of outgoing mail, checked by an independent verifier:
//! `dkimpy` (Debian's python3-dkim) reading the keys from `nsd` on
//! loopback, in the records `sluice dkim keygen` printed. Mail submitted
//! by an account and sent to an `smtp-sink` carries one signature per
//! algorithm, both verify, a changed body fails them, a rotated key takes
//! over, and mail forwarded for an alias is not signed in our name.

use sluice_testkit as kit;

use std::process::Command;
use std::time::Duration;

use kit::{
    addr_arg, outbound_config, python, wait_until, Dns, Server, SmtpSink, Zone, DOMAIN, PASSWORD,
};

/// Verifies every DKIM-Signature of `message` with dkimpy, asking `dns`
/// for the keys. One line per signature: `SELECTOR pass|fail`.
const VERIFY: &str = r#"
import re, sys
import dkim, dns.resolver
port = int(sys.argv[1])
message = sys.stdin.buffer.read()
# smtp-sink writes the envelope first (X-Client-Addr: ... X-Rcpt-Args:),
# and LF line ends.
message = re.sub(rb"\A(X-(Client-Addr|Client-Proto|Helo-Args|Mail-Args|Rcpt-Args):[^\n]*\n)+", b"", message)
message = re.sub(rb"\r?\n", b"\r\n", message)
r = dns.resolver.Resolver(configure=False)
r.nameservers = ["127.0.0.1"]
r.port = port
def txt(name, timeout=5):
    name = name.decode() if isinstance(name, bytes) else name
    for rr in r.resolve(name, "TXT"):
        return b"".join(rr.strings)
    return None
d = dkim.DKIM(message)
signatures = re.findall(rb"(?ims)^DKIM-Signature:(.*?)\r\n(?=[^ \t])", message)
for i, sig in enumerate(signatures):
    selector = re.search(rb"\bs=\s*([^;\s]+)", sig).group(1).decode()
    try:
        ok = d.verify(idx=i, dnsfunc=txt)
    except dkim.ValidationError:  # a body hash mismatch is raised
        ok = False
    print(selector, "pass" if ok else "fail")
"#;

fn verify(message: &str, dns: &Dns) -> Vec<String> {
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
    let mut lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines.sort();
    lines
}

/// Submits a message from `from` to `rcpt` over 587 with STARTTLS.
fn submit(server: &Server, from: &str, rcpt: &str, subject: &str) {
    python(
        r#"
import smtplib, ssl, sys
addr, user, password, rcpt, subject = sys.argv[1:6]
h, p = addr.rsplit(":", 1)
s = smtplib.SMTP(h, int(p)); s.ehlo(); s.starttls(context=ssl._create_unverified_context()); s.ehlo()
s.login(user, password)
s.sendmail(user, [rcpt], ("From: Alice <%s>\r\nTo: %s\r\nSubject: %s\r\n\r\n"
    "A body with  double  spaces \r\nand trailing blank lines\r\n\r\n\r\n") % (user, rcpt, subject))
s.quit()
"#,
        &[
            &addr_arg(server.addr("submission")),
            from,
            PASSWORD,
            rcpt,
            subject,
        ],
    );
}

/// The zone-file record of a key, from `sluice dkim record`.
fn record(server: &Server, selector: &str) -> String {
    server
        .cli_ok(&["dkim", "record", DOMAIN, selector])
        .trim()
        .to_string()
}

/// The sink's messages once `n` arrived and the queue is empty (the sink
/// has written a message whole once Sluice records its delivery).
fn wait_for(server: &Server, sink: &SmtpSink, n: usize) -> Vec<String> {
    assert!(
        wait_until(Duration::from_secs(20), || {
            sink.messages().len() >= n
                && server
                    .cli_ok(&["queue", "list"])
                    .contains("the queue is empty")
        }),
        "{} of {n} messages reached the sink; queue:\n{}",
        sink.messages().len(),
        server.cli_ok(&["queue", "list"])
    );
    sink.messages()
}

#[test]
fn outgoing_mail_is_signed_with_each_algorithm_and_verifies_independently() {
    let sink = SmtpSink::start(&[]);
    let mut dns = Dns::start(vec![Zone::new(DOMAIN, &[])]);
    let server = Server::start_with(&outbound_config(dns.addr, &[("remote.test", sink.addr)]));
    let alice = server.add_user("alice");

    // A domain that is not local gets no key.
    let out = server.cli(&["dkim", "keygen", "elsewhere.test"], "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("elsewhere.test"));

    let printed = server.cli_ok(&["dkim", "keygen", DOMAIN, "--selector", "r1"]);
    assert!(
        printed.starts_with("r1._domainkey.example.org. IN TXT"),
        "{printed}"
    );
    server.cli_ok(&[
        "dkim",
        "keygen",
        DOMAIN,
        "--selector",
        "e1",
        "--algorithm",
        "ed25519",
    ]);
    assert_eq!(printed.trim(), record(&server, "r1"));
    dns.set_zone(Zone::new(
        DOMAIN,
        &[&record(&server, "r1"), &record(&server, "e1")],
    ));

    submit(&server, &alice, "friend@remote.test", "signed twice");
    let first = wait_for(&server, &sink, 1).remove(0);
    assert_eq!(
        verify(&first, &dns),
        ["e1 pass", "r1 pass"],
        "message:\n{first}\nlog:\n{}",
        server.log()
    );
    // Return-Path belongs to final delivery (RFC 5321 §4.4): not sent on.
    assert!(!first.contains("Return-Path:"), "{first}");
    // A changed body breaks both.
    let tampered = first.replace("double  spaces", "other  words");
    assert_eq!(verify(&tampered, &dns), ["e1 fail", "r1 fail"]);

    // Rotation: a second RSA key is published first, then takes over.
    server.cli_ok(&["dkim", "keygen", DOMAIN, "--selector", "r2"]);
    let list = server.cli_ok(&["dkim", "list"]);
    assert!(
        list.contains("example.org\tr1\trsa-sha256\tsigning"),
        "{list}"
    );
    assert!(
        list.contains("example.org\tr2\trsa-sha256\tpublished"),
        "{list}"
    );
    dns.set_zone(Zone::new(
        DOMAIN,
        &[
            &record(&server, "r1"),
            &record(&server, "r2"),
            &record(&server, "e1"),
        ],
    ));
    server.cli_ok(&["dkim", "activate", DOMAIN, "r2"]);
    submit(&server, &alice, "friend@remote.test", "after rotation");
    let second = wait_for(&server, &sink, 2)
        .into_iter()
        .find(|m| m.contains("after rotation"))
        .unwrap();
    assert_eq!(verify(&second, &dns), ["e1 pass", "r2 pass"]);

    // Forwarded for an alias, mail that claims to be from the domain is
    // not signed: its envelope sender is not ours.
    server.cli_ok(&["alias", "add", &format!("fwd@{DOMAIN}"), "far@remote.test"]);
    assert!(wait_until(Duration::from_secs(10), || server
        .rcpt_accepted(&format!("fwd@{DOMAIN}"))));
    python(
        r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p))
s.sendmail("someone@origin.test", [sys.argv[2]],
    "From: boss@example.org\r\nTo: %s\r\nSubject: forwarded\r\n\r\nbody\r\n" % sys.argv[2])
s.quit()
"#,
        &[&addr_arg(server.smtp), &format!("fwd@{DOMAIN}")],
    );
    let forwarded = wait_for(&server, &sink, 3)
        .into_iter()
        .find(|m| m.contains("Subject: forwarded"))
        .unwrap();
    assert!(
        !forwarded.to_ascii_lowercase().contains("dkim-signature"),
        "{forwarded}"
    );

    // Removing the last keys stops signing.
    for s in ["r1", "r2", "e1"] {
        server.cli_ok(&["dkim", "remove", DOMAIN, s]);
    }
    submit(&server, &alice, "friend@remote.test", "unsigned now");
    let third = wait_for(&server, &sink, 4)
        .into_iter()
        .find(|m| m.contains("unsigned now"))
        .unwrap();
    assert!(!third.to_ascii_lowercase().contains("dkim-signature"));
}
