//! Sending through a relay (smarthost) with a login: a second Sluice
//! plays the provider's submission server (AUTH over implicit TLS on its
//! `submissions` port, or after STARTTLS on `submission`), and Postfix's
//! `smtp-sink` the final destination behind it. The relay's certificate
//! must check out against the CA file given for it; a refused login
//! keeps the mail queued instead of bouncing it.

use sluice_testkit as kit;

use std::time::Duration;

use kit::{addr_arg, outbound_config, python, wait_until, Dns, Server, SmtpSink, Zone, PASSWORD};

/// The relay: takes mail from its accounts for anywhere and sends mail
/// for `far.test` to `sink`.
fn relay(sink: &SmtpSink, dns: &Dns) -> Server {
    relay_with(sink, dns, "")
}

/// [`relay`] with more configuration.
fn relay_with(sink: &SmtpSink, dns: &Dns, extra: &str) -> Server {
    let relay = Server::start_with(&format!(
        "{extra}[submission]\nsender_check = \"off\"\n{}",
        outbound_config(dns.addr, &[("far.test", sink.addr)])
    ));
    relay.add_user("relay");
    relay
}

/// A server sending everything through `relay` on `port` with `tls`,
/// logging in as relay@example.org with `password`; it trusts the relay's
/// certificate when `trust`.
fn sender(relay: &Server, dns: &Dns, port: u16, tls: &str, password: &str, trust: bool) -> Server {
    let secrets = tempfile::tempdir().unwrap();
    let password_file = secrets.path().join("relay-password");
    std::fs::write(&password_file, format!("{password}\n")).unwrap();
    let ca = if trust {
        format!("ca_file = {:?}\n", relay.data_dir().join("tls/cert.pem"))
    } else {
        String::new()
    };
    let server = Server::start_with(&format!(
        "[dns]\nresolver = \"{}\"\n\
         [outbound]\nretry_schedule = [1]\n\
         [outbound.tls]\nmta_sts = false\ndane = \"off\"\n\
         [outbound.relay]\nhost = \"mx.example.org\"\nport = {port}\ntls = \"{tls}\"\n\
         username = \"relay@example.org\"\npassword_file = {:?}\n{ca}",
        dns.addr, password_file
    ));
    // Read once at start: the file may go now.
    drop(secrets);
    server.cli_ok(&["alias", "add", "out@example.org", "someone@far.test"]);
    assert!(wait_until(Duration::from_secs(5), || server
        .rcpt_accepted("out@example.org")));
    server
}

fn send(server: &Server, subject: &str) {
    send_sized(server, subject, 0);
}

/// [`send`] with a body of `size` more bytes.
fn send_sized(server: &Server, subject: &str, size: usize) {
    python(
        r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
body = ("x" * 70 + "\r\n") * (int(sys.argv[3]) // 72)
s = smtplib.SMTP(h, int(p))
s.sendmail("someone@origin.test", ["out@example.org"],
    "From: someone@origin.test\r\nTo: out@example.org\r\nSubject: %s\r\n\r\nbody\r\n%s" % (sys.argv[2], body))
s.quit()
"#,
        &[&addr_arg(server.smtp), subject, &size.to_string()],
    );
}

fn dns() -> Dns {
    // The relay's name, which its certificate carries.
    Dns::start(vec![Zone::new("example.org", &["mx IN A 127.0.0.1"])])
}

#[test]
fn mail_goes_through_the_relay_with_a_login_over_tls() {
    let sink = SmtpSink::start(&[]);
    let dns = dns();
    let relay = relay(&sink, &dns);
    for (listener, tls) in [("submissions", "implicit"), ("submission", "starttls")] {
        let port = relay.addr(listener).port();
        let server = sender(&relay, &dns, port, tls, PASSWORD, true);
        let subject = format!("through {listener}");
        send(&server, &subject);
        assert!(
            wait_until(Duration::from_secs(20), || sink
                .messages()
                .iter()
                .any(|m| m.contains(&subject))),
            "{}\n--- relay:\n{}",
            server.log(),
            relay.log()
        );
        assert!(server
            .log()
            .contains("all outbound mail goes through the relay"));
        // Sluice offers CHUNKING: the message went in BDAT chunks.
        assert!(
            wait_until(Duration::from_secs(5), || server
                .log()
                .contains("data=\"bdat\"")),
            "{}",
            server.log()
        );
        assert!(wait_until(Duration::from_secs(5), || server
            .cli_ok(&["queue", "list"])
            .contains("the queue is empty")));
    }
    // The relay saw the logins.
    assert!(
        relay
            .log()
            .matches("authenticated account=relay@example.org")
            .count()
            >= 2,
        "{}",
        relay.log()
    );
}

#[test]
fn a_refused_login_keeps_the_mail_queued() {
    let sink = SmtpSink::start(&[]);
    let dns = dns();
    let relay = relay(&sink, &dns);
    let port = relay.addr("submission").port();
    let server = sender(&relay, &dns, port, "starttls", "not the password", true);
    send(&server, "wrong password");
    assert!(
        wait_until(Duration::from_secs(20), || server
            .log()
            .contains("the relay refused our login")),
        "{}",
        server.log()
    );
    let queue = server.cli_ok(&["queue", "list"]);
    assert!(queue.contains("someone@far.test"), "{queue}");
    assert!(sink.messages().is_empty());
    // No bounce for a configuration mistake.
    assert!(!server.log().contains("delivery status notification sent"));
}

#[test]
fn a_relay_whose_certificate_does_not_check_out_gets_nothing() {
    let sink = SmtpSink::start(&[]);
    let dns = dns();
    let relay = relay(&sink, &dns);
    // Self-signed, and not trusted here: no login, no mail, in either mode.
    for (listener, tls) in [("submissions", "implicit"), ("submission", "starttls")] {
        let port = relay.addr(listener).port();
        let server = sender(&relay, &dns, port, tls, PASSWORD, false);
        send(&server, "untrusted");
        assert!(
            wait_until(Duration::from_secs(20), || server
                .log()
                .contains("outbound delivery deferred")),
            "{}",
            server.log()
        );
        assert!(server.log().contains("certificate"), "{}", server.log());
        assert!(server
            .cli_ok(&["queue", "list"])
            .contains("someone@far.test"));
    }
    assert!(sink.messages().is_empty());
    assert!(
        !relay.log().contains("authenticated account="),
        "{}",
        relay.log()
    );
}

#[test]
fn a_message_over_the_relays_size_limit_fails_at_once() {
    let sink = SmtpSink::start(&[]);
    let dns = dns();
    let relay = relay_with(&sink, &dns, "[smtp]\nmax_message_size = 3000\n");
    let port = relay.addr("submission").port();
    let server = sender(&relay, &dns, port, "starttls", PASSWORD, true);
    send_sized(&server, "too big", 6000);
    assert!(
        wait_until(Duration::from_secs(20), || server
            .log()
            .contains("outbound delivery failed for good")),
        "{}",
        server.log()
    );
    let log = server.log();
    assert!(log.contains("5.3.4 it takes up to 3000 bytes"), "{log}");
    // Refused from the EHLO reply: no transaction was tried for it (the
    // report to its sender goes through the relay too).
    assert!(
        !log.lines()
            .any(|l| l.contains("outbound transaction") && l.contains("someone@far.test")),
        "{log}"
    );
    let queue = server.cli_ok(&["queue", "list"]);
    assert!(!queue.contains("someone@far.test"), "{queue}");
}
