//! DKIM, DMARC and `Authentication-Results:` on mail arriving from other
//! servers. The senders' keys, SPF and DMARC policies are published by
//! `nsd` on loopback; messages are signed by an independent signer
//! (dkimpy, Debian's python3-dkim) with keys `openssl` makes, and sent
//! with Python's smtplib. What is stored is read back over IMAP and its
//! signatures checked again by dkimpy: the field we put in front of a
//! stored message must leave the message as the sender signed it, small or
//! spread over several chunks.

use sluice_testkit as kit;

use std::process::Command;

use kit::{debian_python, outbound_config, Dns, Server, Zone, PASSWORD};

/// A 2048-bit RSA key in PEM (for dkimpy) and its public half in base64
/// DER (for the DNS record), made by openssl.
fn rsa_key(dir: &std::path::Path) -> (std::path::PathBuf, String) {
    let pem = dir.join("dkim.pem");
    let made = Command::new("openssl")
        .args(["genrsa", "-traditional", "-out"])
        .arg(&pem)
        .arg("2048")
        .output()
        .expect("openssl (test.sh installs it)");
    assert!(made.status.success(), "{made:?}");
    // The PEM public key is the base64 of the DER the record wants.
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

/// A TXT record value in quoted strings of at most 200 characters.
fn txt(value: &str) -> String {
    value
        .as_bytes()
        .chunks(200)
        .map(|c| format!("\"{}\"", String::from_utf8_lossy(c)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn dns(public_key: &str) -> Dns {
    let key_record = format!(
        "s1._domainkey IN TXT {}",
        txt(&format!("v=DKIM1; k=rsa; p={public_key}"))
    );
    Dns::start(vec![
        // SPF fails for everything: only DKIM can pass DMARC here.
        Zone::new(
            "signed.test",
            &[
                "@ IN TXT \"v=spf1 -all\"",
                "_dmarc IN TXT \"v=DMARC1; p=reject\"",
                &key_record,
            ],
        ),
        Zone::new(
            "reject.test",
            &[
                "@ IN TXT \"v=spf1 -all\"",
                "_dmarc IN TXT \"v=DMARC1; p=reject\"",
            ],
        ),
        Zone::new(
            "quar.test",
            &[
                "@ IN TXT \"v=spf1 -all\"",
                "_dmarc IN TXT \"v=DMARC1; p=quarantine\"",
            ],
        ),
        // SPF passes and aligns: DMARC passes without a signature.
        Zone::new(
            "spfok.test",
            &[
                "@ IN TXT \"v=spf1 ip4:127.0.0.1 -all\"",
                "_dmarc IN TXT \"v=DMARC1; p=reject\"",
            ],
        ),
        Zone::new("nodmarc.test", &["@ IN A 192.0.2.1"]),
        // SPF results without a DMARC policy.
        Zone::new("soft.test", &["@ IN TXT \"v=spf1 ~all\""]),
        Zone::new("spffail.test", &["@ IN TXT \"v=spf1 -all\""]),
        // The parent: DMARC's tree walk asks `_dmarc.test` too, which must
        // be an answer (no such name), not a refusal.
        Zone::new("test", &[]),
    ])
}

/// Sends one message per `NAME:SENDER:HOW` argument. HOW is `plain`,
/// `sign` (dkimpy signs it), `big` (signed, 300 KB), `tamper` (signed,
/// then its body changed) or `forged` (carries an Authentication-Results
/// field in our name). Prints `sent NAME CODE [TEXT]`.
const SEND: &str = r#"
import smtplib, sys, dkim
smtp, user, keyfile = sys.argv[1:4]
key = open(keyfile, "rb").read()
h, p = smtp.rsplit(":", 1)
for case in sys.argv[4:]:
    name, sender, how = case.split(":")
    body = "Hello from %s.\r\n" % name
    if how == "big":
        body = ("x" * 998 + "\r\n") * 300
    msg = ("From: <%s>\r\nTo: <%s>\r\nSubject: %s\r\nMessage-ID: <%s@test>\r\n\r\n%s"
           % (sender, user, name, name, body)).encode()
    if how == "forged":
        msg = b"Authentication-Results: mx.example.org; dkim=pass header.d=signed.test; dmarc=pass\r\n" + msg
    if how in ("sign", "big", "tamper"):
        domain = sender.split("@")[1].encode()
        msg = dkim.sign(msg, b"s1", domain, key, canonicalize=(b"relaxed", b"relaxed"),
                        include_headers=[b"from", b"to", b"subject", b"message-id"]) + msg
    if how == "tamper":
        msg = msg.replace(b"Hello from", b"Hullo from")
    s = smtplib.SMTP(h, int(p), local_hostname="client.test")
    try:
        s.sendmail(sender, [user], msg)
        print("sent", name, 250)
    except smtplib.SMTPDataError as e:
        print("sent", name, e.smtp_code, e.smtp_error.decode())
    s.quit()
"#;

/// Prints every stored message of INBOX and Junk: `stored BOX SUBJECT
/// FIRST-FIELD-NAME SIZE received-spf=COUNT | RESULTS || RESULTS`, and for signed ones `dkimpy
/// SUBJECT True|False` (the stored message verified again).
const READ: &str = r#"
import imaplib, re, sys
import dkim, dns.resolver
imap, user, password, dns_port = sys.argv[1:5]
r = dns.resolver.Resolver(configure=False)
r.nameservers = ["127.0.0.1"]
r.port = int(dns_port)
def txt(name, timeout=5):
    name = name.decode() if isinstance(name, bytes) else name
    for rr in r.resolve(name, "TXT"):
        return b"".join(rr.strings)
h, p = imap.rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
m.login(user, password)
for box in ("INBOX", "Junk"):
    m.select(box, readonly=True)
    typ, data = m.search(None, "ALL")
    for n in data[0].split():
        typ, d = m.fetch(n, "(BODY.PEEK[])")
        raw = d[0][1]
        subject = re.search(rb"(?m)^Subject: (\S+)", raw).group(1).decode()
        header = raw.split(b"\r\n\r\n", 1)[0] + b"\r\n"
        fields = re.findall(rb"(?ims)^Authentication-Results:(.*?)\r\n(?=[^ \t]|\Z)", header)
        unfolded = [re.sub(rb"\r\n[ \t]+", b" ", f).decode().strip() for f in fields]
        first = raw.split(b":", 1)[0].decode()
        received_spf = len(re.findall(rb"(?im)^Received-SPF:", header))
        print("stored", box, subject, first, len(raw), "received-spf=%d" % received_spf,
              "|", " || ".join(unfolded))
        if b"DKIM-Signature" in raw:
            print("dkimpy", subject, dkim.verify(raw, dnsfunc=txt))
"#;

struct Setup {
    _keys: tempfile::TempDir,
    key: std::path::PathBuf,
    dns: Dns,
}

fn setup() -> Setup {
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = rsa_key(keys.path());
    Setup {
        dns: dns(&public),
        _keys: keys,
        key,
    }
}

fn send(server: &Server, setup: &Setup, user: &str, cases: &[&str]) -> String {
    let mut args = vec![
        server.smtp.to_string(),
        user.to_string(),
        setup.key.to_string_lossy().into_owned(),
    ];
    args.extend(cases.iter().map(|c| c.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    debian_python(SEND, &args)
}

fn read(server: &Server, setup: &Setup, user: &str) -> String {
    debian_python(
        READ,
        &[
            &server.imap.to_string(),
            user,
            PASSWORD,
            &setup.dns.addr.port().to_string(),
        ],
    )
}

/// The `stored` line of the message with this subject.
fn stored<'a>(out: &'a str, subject: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with("stored") && l.split(' ').nth(2) == Some(subject))
        .unwrap_or_else(|| panic!("{subject} not stored:\n{out}"))
}

#[test]
fn results_are_recorded_and_dmarc_policies_applied() {
    let setup = setup();
    let server = Server::start_with(&format!(
        "[dns]\nresolver = \"{}\"\n[auth_checks]\nspf = \"mark\"\ndkim = \"mark\"\ndmarc = \"enforce\"\n",
        setup.dns.addr
    ));
    let user = server.add_user("auth");
    let sent = send(
        &server,
        &setup,
        &user,
        &[
            "signed:a@signed.test:sign",
            "big:b@signed.test:big",
            "tampered:c@signed.test:tamper",
            "rejected:d@reject.test:plain",
            "quarantined:e@quar.test:plain",
            "spfaligned:f@spfok.test:plain",
            "forged:g@nodmarc.test:forged",
        ],
    );
    let log = server.log();
    for name in ["signed", "big", "quarantined", "spfaligned", "forged"] {
        assert!(sent.contains(&format!("sent {name} 250")), "{sent}\n{log}");
    }
    // A failed signature of a p=reject domain, and no signature at all.
    for name in ["tampered", "rejected"] {
        assert!(
            sent.contains(&format!("sent {name} 550 5.7.1 Message refused")),
            "{sent}"
        );
    }
    let out = read(&server, &setup, &user);

    // The field comes first, and the stored message still verifies.
    for name in ["signed", "big"] {
        let line = stored(&out, name);
        assert!(
            line.starts_with(&format!("stored INBOX {name} Authentication-Results ")),
            "{line}"
        );
        assert!(line.contains("| mx.example.org;"), "{line}");
        assert!(
            line.contains("dkim=pass header.i=@signed.test header.s=s1"),
            "{line}"
        );
        assert!(line.contains("received-spf=1"), "{line}");
        assert!(line.contains("spf=fail"), "{line}");
        assert!(line.contains("dmarc=pass"), "{line}");
        assert!(out.contains(&format!("dkimpy {name} True")), "{out}");
    }
    let big_size: usize = stored(&out, "big")
        .split(' ')
        .nth(4)
        .unwrap()
        .parse()
        .unwrap();
    assert!(big_size > 300_000, "{out}");

    let line = stored(&out, "quarantined");
    assert!(line.starts_with("stored Junk quarantined"), "{line}");
    assert!(line.contains("dmarc=fail"), "{line}");
    assert!(line.contains("header.from=quar.test"), "{line}");

    let line = stored(&out, "spfaligned");
    assert!(line.starts_with("stored INBOX"), "{line}");
    assert!(line.contains("dkim=none"), "{line}");
    assert!(line.contains("spf=pass"), "{line}");
    assert!(line.contains("dmarc=pass"), "{line}");

    // The forged field claiming our name is gone; ours says what is true.
    let line = stored(&out, "forged");
    let fields = line.split_once(" | ").unwrap().1;
    assert!(!fields.contains(" || "), "two fields: {line}");
    assert!(!fields.contains("header.d=signed.test"), "{line}");
    assert!(fields.contains("dmarc=none"), "{line}");

    // Refused mail left nothing behind; the log says why.
    assert!(
        !out.contains("tampered") && !out.contains("rejected"),
        "{out}"
    );
    assert!(server.log().contains("rejected-dmarc"), "{}", server.log());
    assert!(server.log().contains("quarantined"), "{}", server.log());
}

#[test]
fn mark_mode_records_but_applies_no_policy() {
    let setup = setup();
    let server = Server::start_with(&format!(
        "[dns]\nresolver = \"{}\"\n[auth_checks]\nspf = \"off\"\ndmarc = \"mark\"\n",
        setup.dns.addr
    ));
    let user = server.add_user("marked");
    let sent = send(
        &server,
        &setup,
        &user,
        &[
            "rejected:d@reject.test:plain",
            "quarantined:e@quar.test:plain",
            "tampered:c@signed.test:tamper",
        ],
    );
    for name in ["rejected", "quarantined", "tampered"] {
        assert!(sent.contains(&format!("sent {name} 250")), "{sent}");
    }
    let out = read(&server, &setup, &user);
    for name in ["rejected", "quarantined", "tampered"] {
        let line = stored(&out, name);
        assert!(line.starts_with(&format!("stored INBOX {name}")), "{line}");
        assert!(line.contains("dmarc=fail"), "{line}");
        // SPF is evaluated for DMARC and recorded with it, but with
        // spf = "off" there is no Received-SPF field.
        assert!(line.contains("spf=fail"), "{line}");
        assert!(line.contains("received-spf=0"), "{line}");
    }
    // The changed body fails its signature.
    let line = stored(&out, "tampered");
    assert!(
        line.contains("dkim=neutral (body hash did not verify)"),
        "{line}"
    );
    assert!(out.contains("dkimpy tampered False"), "{out}");
}

/// Checks the ARC chain and the DKIM signature of the message in the file
/// `argv[1]` (as `smtp-sink` wrote it), asking `nsd` on port `argv[2]`.
/// Prints `arc CV` and `dkim True|False`.
const ARC_VERIFY: &str = r#"
import re, sys
import dkim, dns.resolver
message = open(sys.argv[1], "rb").read()
message = re.sub(rb"\A(X-(Client-Addr|Client-Proto|Helo-Args|Mail-Args|Rcpt-Args):[^\n]*\n)+", b"", message)
message = re.sub(rb"\r?\n", b"\r\n", message)
r = dns.resolver.Resolver(configure=False)
r.nameservers = ["127.0.0.1"]
r.port = int(sys.argv[2])
def txt(name, timeout=5):
    name = name.decode() if isinstance(name, bytes) else name
    for rr in r.resolve(name, "TXT"):
        return b"".join(rr.strings)
cv, results, reason = dkim.arc_verify(message, dnsfunc=txt)
print("arc", cv.decode(), reason)
print("dkim", dkim.verify(message, dnsfunc=txt))
"#;

#[test]
fn forwarded_mail_is_sealed_with_arc_by_the_alias_domain() {
    let mut setup = setup();
    let sink = kit::SmtpSink::start(&[]);
    let server = Server::start_with(&format!(
        "{}[auth_checks]\ndkim = \"mark\"\n",
        outbound_config(setup.dns.addr, &[("far.test", sink.addr)])
    ));
    let user = server.add_user("local");
    server.cli_ok(&["dkim", "keygen", "example.org", "--selector", "arc1"]);
    let record = server.cli_ok(&["dkim", "record", "example.org", "arc1"]);
    setup
        .dns
        .set_zone(Zone::new("example.org", &[record.trim()]));
    server.cli_ok(&["alias", "add", "fwd@example.org", "someone@far.test"]);
    assert!(kit::wait_until(std::time::Duration::from_secs(5), || {
        server.rcpt_accepted("fwd@example.org")
    }));
    let sent = send(
        &server,
        &setup,
        "fwd@example.org",
        &["sealed:a@signed.test:sign"],
    );
    assert!(sent.contains("sent sealed 250"), "{sent}\n{}", server.log());
    // The sink has written a message whole once the queue is empty.
    assert!(
        kit::wait_until(std::time::Duration::from_secs(20), || {
            !sink.messages().is_empty()
                && server
                    .cli_ok(&["queue", "list"])
                    .contains("the queue is empty")
        }),
        "{}",
        server.log()
    );
    let forwarded = sink.messages().remove(0);
    assert!(
        forwarded.contains("ARC-Seal: i=1; a=rsa-sha256;"),
        "{forwarded}"
    );
    assert!(forwarded.contains("d=example.org"), "{forwarded}");
    let file = setup._keys.path().join("forwarded.eml");
    std::fs::write(&file, &forwarded).unwrap();
    let verdict = debian_python(
        ARC_VERIFY,
        &[&file.to_string_lossy(), &setup.dns.addr.port().to_string()],
    );
    assert!(verdict.contains("arc pass"), "{verdict}\n{forwarded}");
    assert!(verdict.contains("dkim True"), "{verdict}");
    // Mail delivered here only is not sealed.
    send(&server, &setup, &user, &["kept:a@signed.test:sign"]);
    let out = read(&server, &setup, &user);
    assert!(stored(&out, "kept").contains("dkim=pass"), "{out}");
    assert!(!out.contains("ARC"), "{out}");
}

/// Postfix as the sending site's MTA: messages go to it and it relays them
/// to Sluice, whose results must be right for each SPF outcome, DKIM and
/// DMARC.
#[test]
fn results_are_right_for_mail_relayed_by_postfix() {
    let setup = setup();
    let server = Server::start_with(&format!(
        "[dns]\nresolver = \"{}\"\n[auth_checks]\nspf = \"mark\"\n",
        setup.dns.addr
    ));
    let user = server.add_user("frompostfix");
    let postfix = kit::PostfixMx::relaying_to("mta.sender.test", server.smtp);
    // The same sender as before, pointed at Postfix instead of Sluice.
    let mut args = vec![
        format!("127.0.0.1:{}", postfix.addr.port()),
        user.clone(),
        setup.key.to_string_lossy().into_owned(),
    ];
    for case in [
        "pass:f@spfok.test:plain",
        "signed:a@signed.test:sign",
        "softfail:s@soft.test:plain",
        "fail:x@spffail.test:plain",
        "none:g@nodmarc.test:plain",
    ] {
        args.push(case.to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let sent = debian_python(SEND, &args);
    assert_eq!(sent.matches(" 250").count(), 5, "{sent}");
    let out = || read(&server, &setup, &user);
    assert!(
        kit::wait_until(std::time::Duration::from_secs(30), || out()
            .lines()
            .filter(|l| l.starts_with("stored"))
            .count()
            == 5),
        "{}\n--- postfix:\n{}\n--- sluice:\n{}",
        out(),
        postfix.log(),
        server.log()
    );
    let out = out();
    for (name, want) in [
        (
            "pass",
            &[
                "spf=pass",
                "smtp.mailfrom=f@spfok.test",
                "dkim=none",
                "dmarc=pass",
            ][..],
        ),
        (
            "signed",
            &["spf=fail", "dkim=pass header.i=@signed.test", "dmarc=pass"][..],
        ),
        ("softfail", &["spf=softfail", "dmarc=none"][..]),
        ("fail", &["spf=fail", "dmarc=none"][..]),
        ("none", &["spf=none", "dmarc=none"][..]),
    ] {
        let line = stored(&out, name);
        for w in want {
            assert!(line.contains(w), "{name}: no {w} in {line}");
        }
    }
    // The message Postfix relayed still verifies after our field.
    assert!(out.contains("dkimpy signed True"), "{out}");
}
