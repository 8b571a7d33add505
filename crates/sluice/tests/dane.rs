//! Outbound DANE (RFC 7672) end to end: a real `sluice serve` sends mail
//! to a real Postfix MX that offers STARTTLS, found through MX records
//! served by nsd, signed or not. What a delivery does depends only on
//! what DNSSEC proves: nothing (an unsigned resolver: opportunistic TLS),
//! a matching TLSA record (verified TLS), a wrong one (deferred), or a
//! forged answer in a zone that validates (deferred as bogus).

use sluice_testkit as kit;

use std::path::Path;
use std::time::Duration;

use kit::{addr_arg, python, wait_until, Dns, PostfixMx, Server, Zone};

/// The Postfix MX with a certificate of its own, and the `3 1 1` TLSA
/// data that pins it.
struct Mx {
    postfix: PostfixMx,
    tlsa: String,
    _certs: tempfile::TempDir,
}

fn mx() -> Mx {
    let certs = tempfile::tempdir().unwrap();
    kit::make_server_certificate(certs.path());
    let read = |name: &str| std::fs::read_to_string(certs.path().join(name)).unwrap();
    let postfix = PostfixMx::start("mx.example.net", &read("cert.pem"), &read("key.pem"));
    Mx {
        tlsa: kit::spki_sha256_hex(&certs.path().join("cert.pem")),
        postfix,
        _certs: certs,
    }
}

fn records(tlsa: &str) -> Vec<String> {
    let mut r = vec!["@ MX 10 mx".to_string(), "mx A 127.0.0.1".to_string()];
    if !tlsa.is_empty() {
        r.push(format!("_25._tcp.mx TLSA 3 1 1 {tlsa}"));
    }
    r
}

fn zone(tlsa: &str) -> Zone {
    let r = records(tlsa);
    Zone::new(
        "example.net",
        &r.iter().map(String::as_str).collect::<Vec<_>>(),
    )
}

/// A server whose mail for `fwd@example.org` goes to friend@example.net,
/// with DNS from `dns`, the MX's port, and `tls` as its `[outbound.tls]`
/// section (empty: the defaults, DANE validating from the root key).
fn server(dns: &Dns, mx: &Mx, tls: &str) -> Server {
    let server = Server::start_with(&format!(
        "[dns]\nresolver = \"{}\"\n\
         [outbound]\nmx_port = {}\nretry_schedule = [1]\nconnect_timeout = 5\ncommand_timeout = 10\n\
         {tls}",
        dns.addr,
        mx.postfix.addr.port()
    ));
    server.cli_ok(&["alias", "add", "fwd@example.org", "friend@example.net"]);
    assert!(wait_until(Duration::from_secs(5), || server
        .rcpt_accepted("fwd@example.org")));
    server
}

fn anchored(anchor: &Path) -> String {
    format!(
        "[outbound.tls]\nmta_sts = false\ndnssec_trust_anchor = \"{}\"\n",
        anchor.display()
    )
}

fn send(server: &Server, subject: &str) {
    python(
        r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p))
s.sendmail("someone@origin.test", ["fwd@example.org"],
    "From: someone@origin.test\r\nTo: fwd@example.org\r\nSubject: %s\r\n\r\nbody\r\n" % sys.argv[2])
s.quit()
"#,
        &[&addr_arg(server.smtp), subject],
    );
}

/// The first line of the server's log with all of `parts`.
fn line_with(server: &Server, parts: &[&str]) -> Option<String> {
    server
        .log()
        .lines()
        .find(|l| parts.iter().all(|p| l.contains(p)))
        .map(str::to_string)
}

fn delivered(server: &Server, mx: &Mx) -> String {
    let mut found = None;
    wait_until(Duration::from_secs(30), || {
        found = line_with(server, &["outbound transaction", "reply=\"250"]);
        found.is_some()
    });
    found.unwrap_or_else(|| {
        panic!(
            "not delivered:\n{}\n{}\n{}",
            server.cli_ok(&["queue", "list"]),
            server.log(),
            mx.postfix.log()
        )
    })
}

/// Waits for two failed attempts, then checks the message is still
/// queued and nothing reached the MX; the queue's listing.
fn deferred(server: &Server, mx: &Mx, why: &str) -> String {
    let mut listing = String::new();
    let attempts = |l: &str| {
        l.split('\t')
            .find_map(|f| f.strip_prefix("attempts "))
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0)
    };
    wait_until(Duration::from_secs(30), || {
        listing = server.cli_ok(&["queue", "list"]);
        attempts(&listing) >= 2 && listing.contains(why)
    });
    assert!(
        attempts(&listing) >= 2 && listing.contains(why),
        "expected a deferral for {why:?}:\n{listing}\n{}",
        server.log()
    );
    assert!(line_with(server, &["outbound transaction"]).is_none());
    assert!(
        !mx.postfix.log().contains("from=<"),
        "the MX took mail:\n{}",
        mx.postfix.log()
    );
    listing
}

#[test]
fn the_default_configuration_on_an_unsigned_resolver_delivers_over_opportunistic_tls() {
    // What a new user meets: no [outbound.tls] section (DANE validating
    // from the root key, MTA-STS on) and a resolver without DNSSEC.
    let mx = mx();
    let dns = Dns::start(vec![zone(&mx.tlsa)]);
    let server = server(&dns, &mx, "");
    send(&server, "hello over an ordinary resolver");
    delivered(&server, &mx);
    let tls = line_with(&server, &["outbound TLS", "mx.example.net"]).unwrap();
    assert!(
        tls.contains("kind=\"opportunistic\"") && tls.contains("dane=inactive"),
        "{tls}"
    );
    assert!(tls.contains("tls=Some(\"TLSv1_3\")"), "{tls}");
    let log = server.log();
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("outbound DANE is inactive"))
        .collect();
    assert_eq!(said.len(), 1, "said once:\n{log}");
    assert!(
        said[0].contains("[dns] resolver") && said[0].contains("dane = \"off\""),
        "names the keys to set: {}",
        said[0]
    );
    assert!(said[0].len() < 700, "a line, not a dump: {}", said[0]);
    assert!(
        !log.contains("refused by the dane policy") && !log.contains("DANE: the MX is not used"),
        "{log}"
    );
}

#[test]
fn a_matching_tlsa_record_in_a_signed_zone_delivers_verified() {
    let mx = mx();
    let dns = Dns::start_signed(vec![zone(&mx.tlsa)]);
    let server = server(&dns, &mx, &anchored(&dns.trust_anchor_file()));
    send(&server, "hello over DANE");
    delivered(&server, &mx);
    let tls = line_with(&server, &["outbound TLS", "mx.example.net"]).unwrap();
    assert!(
        tls.contains("kind=\"dane\"")
            && tls.contains("dane=secure")
            && tls.contains("verified=true"),
        "{tls}"
    );
    assert!(line_with(&server, &["outbound DANE is active"]).is_some());
    assert!(mx.postfix.log().contains("TLS connection established from"));
}

#[test]
fn a_wrong_tlsa_record_in_a_signed_zone_defers() {
    let mx = mx();
    let dns = Dns::start_signed(vec![zone(&hex32(0x5a))]);
    let server = server(&dns, &mx, &anchored(&dns.trust_anchor_file()));
    send(&server, "hello to a mismatched TLSA");
    let listing = deferred(&server, &mx, "no TLSA record matches");
    assert!(listing.contains("dane"), "{listing}");
}

#[test]
fn a_zone_with_broken_signatures_defers_as_bogus() {
    let mx = mx();
    // Signed with the MX's real TLSA record, which is then rewritten:
    // the zone's SOA and keys validate, the TLSA answer does not.
    let dns = Dns::start_signed(vec![zone(&mx.tlsa).forged(&mx.tlsa, &hex32(0x5a))]);
    let server = server(&dns, &mx, &anchored(&dns.trust_anchor_file()));
    send(&server, "hello through a forged answer");
    deferred(&server, &mx, "dane=bogus");
    let warn = line_with(&server, &["DANE: the MX is not used"]).unwrap();
    assert!(warn.contains("kind=bogus"), "{warn}");
}

#[test]
fn an_unsigned_zone_under_a_validating_setup_delivers_over_opportunistic_tls() {
    // DNSSEC works here (the anchors' zone validates), but the
    // destination's zone is not signed: its answers are insecure.
    let mx = mx();
    let dns = Dns::start_signed(vec![
        Zone::new("anchor.test", &[]),
        zone(&hex32(0x5a)).unsigned(),
    ]);
    let anchors = dns.trust_anchor_file();
    let server = server(&dns, &mx, &anchored(&anchors));
    send(&server, "hello to an unsigned zone");
    delivered(&server, &mx);
    let tls = line_with(&server, &["outbound TLS", "mx.example.net"]).unwrap();
    assert!(
        tls.contains("kind=\"opportunistic\"") && tls.contains("dane=insecure"),
        "{tls}"
    );
    assert!(line_with(&server, &["outbound DANE is active"]).is_some());
}

fn hex32(byte: u8) -> String {
    std::iter::repeat_n(format!("{byte:02x}"), 32).collect()
}
