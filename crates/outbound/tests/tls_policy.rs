//! The TLS policy at work against real servers on loopback: DNS from nsd
//! (signed for DANE), MTA-STS policies from an HTTPS server (Python's
//! `http.server` with `ssl`), and MX hosts with STARTTLS: Postfix
//! (`sluice_testkit::PostfixMx`), and a small tokio-rustls SMTP responder
//! where a test needs a certificate chain Postfix is not given. Each test
//! does the STARTTLS handshake with the `client_config` the policy gives,
//! as the outbound SMTP client does.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use sha2::{Digest, Sha256};
use sluice_outbound::tls_policy::{
    validating_resolver, DaneMode, DaneStatus, FailureType, MxTls, Reporter, StsMode, TlsOutcome,
    TlsPolicies, TlsPolicyConfig,
};
use sluice_testkit::{free_port, require_program, wait_until, Dns, PostfixMx, Zone};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// A test CA and certificates it signs.
struct Ca {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

/// A certificate with its key, DER and PEM.
struct Leaf {
    der: CertificateDer<'static>,
    key_der: Vec<u8>,
    cert_pem: String,
    key_pem: String,
    spki: Vec<u8>,
}

impl Ca {
    fn new() -> Ca {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Sluice test CA");
        let cert = params.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    fn pem(&self) -> String {
        self.cert.pem()
    }

    fn issue(&self, name: &str) -> Leaf {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .signed_by(&key, &self.cert, &self.key)
            .unwrap();
        leaf(cert, key)
    }
}

/// A self-signed certificate: what a misconfigured (or hijacked) MX shows.
fn self_signed(name: &str) -> Leaf {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![name.to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    leaf(cert, key)
}

fn leaf(cert: rcgen::Certificate, key: rcgen::KeyPair) -> Leaf {
    Leaf {
        der: cert.der().clone(),
        key_der: key.serialize_der(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        spki: key.public_key_der(),
    }
}

/// An HTTPS server serving `.well-known/mta-sts.txt` from a directory:
/// Python's `http.server` wrapped in `ssl`, on 127.0.0.1.
struct PolicyServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl PolicyServer {
    fn start(cert: &Leaf, policy: &str) -> PolicyServer {
        let python = require_program("python3", "python3");
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("www/.well-known")).unwrap();
        std::fs::write(dir.path().join("www/.well-known/mta-sts.txt"), policy).unwrap();
        std::fs::write(dir.path().join("cert.pem"), &cert.cert_pem).unwrap();
        std::fs::write(dir.path().join("key.pem"), &cert.key_pem).unwrap();
        let script = "import http.server, ssl, sys, os\n\
            os.chdir(sys.argv[1] + '/www')\n\
            srv = http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[2])), http.server.SimpleHTTPRequestHandler)\n\
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
            ctx.load_cert_chain(sys.argv[1] + '/cert.pem', sys.argv[1] + '/key.pem')\n\
            srv.socket = ctx.wrap_socket(srv.socket, server_side=True)\n\
            srv.serve_forever()\n";
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("http.log")).unwrap();
        let child = Command::new(python)
            .args(["-c", script])
            .arg(dir.path())
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start python3");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        assert!(
            wait_until(Duration::from_secs(10), || sluice_testkit::accepts(addr)),
            "HTTPS server did not start"
        );
        PolicyServer { child, port, dir }
    }

    fn set_policy(&self, policy: &str) {
        std::fs::write(self.dir.path().join("www/.well-known/mta-sts.txt"), policy).unwrap();
    }

    fn requests(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("http.log"))
            .unwrap_or_default()
            .matches("GET /.well-known/mta-sts.txt")
            .count()
    }
}

impl Drop for PolicyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An MX on 127.0.0.1: greets, answers EHLO with STARTTLS, starts TLS
/// with `cert` (and `chain` after it), then answers EHLO and QUIT.
async fn start_mx(cert: &Leaf, chain: Vec<CertificateDer<'static>>) -> SocketAddr {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut certs = vec![cert.der.clone()];
    certs.extend(chain);
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_der.clone()));
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let mut tcp = BufReader::new(tcp);
                tcp.get_mut().write_all(b"220 mx ESMTP\r\n").await?;
                let mut line = String::new();
                loop {
                    line.clear();
                    if tcp.read_line(&mut line).await? == 0 {
                        return Ok::<_, std::io::Error>(());
                    }
                    let verb = line.trim().to_ascii_uppercase();
                    if verb.starts_with("EHLO") {
                        tcp.get_mut()
                            .write_all(b"250-mx\r\n250 STARTTLS\r\n")
                            .await?;
                    } else if verb == "STARTTLS" {
                        tcp.get_mut().write_all(b"220 2.0.0 go ahead\r\n").await?;
                        break;
                    } else {
                        tcp.get_mut().write_all(b"221 bye\r\n").await?;
                        return Ok(());
                    }
                }
                let tls = acceptor.accept(tcp.into_inner()).await?;
                let mut tls = BufReader::new(tls);
                loop {
                    line.clear();
                    if tls.read_line(&mut line).await? == 0 {
                        return Ok(());
                    }
                    if line.to_ascii_uppercase().starts_with("EHLO") {
                        tls.get_mut().write_all(b"250 mx\r\n").await?;
                    } else {
                        tls.get_mut().write_all(b"221 bye\r\n").await?;
                        return Ok(());
                    }
                }
            });
        }
    });
    addr
}

/// What the caller of the policy does with an MX: EHLO, STARTTLS, the
/// handshake with `mx.client_config` for `mx_host`, EHLO again. Returns
/// the outcome to record, or the handshake error.
async fn starttls(addr: SocketAddr, mx_host: &str, mx: &MxTls) -> Result<TlsOutcome, String> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut tcp = BufReader::new(tcp);
    let mut line = String::new();
    tcp.read_line(&mut line).await.unwrap();
    assert!(line.starts_with("220"), "{line}");
    tcp.get_mut()
        .write_all(b"EHLO sluice.test\r\n")
        .await
        .unwrap();
    let mut starttls = false;
    loop {
        line.clear();
        tcp.read_line(&mut line).await.unwrap();
        starttls |= line[4..].trim().eq_ignore_ascii_case("STARTTLS");
        if line.as_bytes().get(3) == Some(&b' ') {
            break;
        }
    }
    assert!(starttls);
    tcp.get_mut().write_all(b"STARTTLS\r\n").await.unwrap();
    line.clear();
    tcp.read_line(&mut line).await.unwrap();
    assert!(line.starts_with("220"), "{line}");
    let name = ServerName::try_from(mx_host.to_string()).unwrap();
    let connector = tokio_rustls::TlsConnector::from(mx.client_config.clone());
    match connector.connect(name, tcp.into_inner()).await {
        Ok(tls) => {
            let outcome = TlsOutcome::from_handshake(mx, tls.get_ref().1);
            let mut tls = BufReader::new(tls);
            tls.get_mut()
                .write_all(b"EHLO sluice.test\r\n")
                .await
                .unwrap();
            loop {
                line.clear();
                tls.read_line(&mut line).await.unwrap();
                assert!(line.starts_with("250"), "{line}");
                if line.as_bytes().get(3) == Some(&b' ') {
                    break;
                }
            }
            tls.get_mut().write_all(b"QUIT\r\n").await.unwrap();
            Ok(outcome)
        }
        Err(e) => Err(e.to_string()),
    }
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn policy(mode: &str, mx: &str) -> String {
    format!("version: STSv1\r\nmode: {mode}\r\nmx: {mx}\r\nmax_age: 86400\r\n")
}

struct StsSetup {
    _dns: Dns,
    https: PolicyServer,
    ca: Ca,
    dir: tempfile::TempDir,
    config: TlsPolicyConfig,
    nameservers: Vec<SocketAddr>,
}

/// DNS for example.net (enforce) and example.org (testing), one HTTPS
/// server answering for both policy hosts (its certificate names both).
fn sts_setup() -> StsSetup {
    let dns = Dns::start(vec![
        Zone::new(
            "example.net",
            &[
                "@ MX 10 mx",
                "mx A 127.0.0.1",
                "_mta-sts TXT \"v=STSv1; id=20261124a;\"",
                "mta-sts A 127.0.0.1",
                "_smtp._tls TXT \"v=TLSRPTv1; rua=mailto:tlsrpt@example.net,https://tlsrpt.example.net/v1\"",
            ],
        ),
        Zone::new(
            "example.org",
            &[
                "@ MX 10 mx",
                "mx A 127.0.0.1",
                "_mta-sts TXT \"v=STSv1; id=1;\"",
                "mta-sts A 127.0.0.1",
            ],
        ),
    ]);
    let ca = Ca::new();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![
        "mta-sts.example.net".to_string(),
        "mta-sts.example.org".to_string(),
    ])
    .unwrap()
    .signed_by(&key, &ca.cert, &ca.key)
    .unwrap();
    let https = PolicyServer::start(&leaf(cert, key), &policy("enforce", "mx.example.net"));
    let dir = tempfile::tempdir().unwrap();
    let config = TlsPolicyConfig {
        mta_sts_ca_file: Some(write(dir.path(), "ca.pem", &ca.pem())),
        mta_sts_port: https.port,
        dane: DaneMode::Off,
        policy_cache_dir: Some(dir.path().join("mta-sts")),
        ..TlsPolicyConfig::default()
    };
    StsSetup {
        nameservers: vec![dns.addr],
        _dns: dns,
        https,
        ca,
        dir,
        config,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mta_sts_enforce_requires_a_valid_certificate_and_a_listed_mx() {
    let s = sts_setup();
    let policies = TlsPolicies::from_nameservers(&s.nameservers, s.config.clone()).unwrap();
    let domain = policies.for_domain("Example.NET").await;
    let sts = domain.sts.clone().expect("an MTA-STS policy");
    assert_eq!(
        policies.tlsrpt_destinations("example.net").await,
        vec!["mailto:tlsrpt@example.net", "https://tlsrpt.example.net/v1"]
    );
    assert!(policies.tlsrpt_destinations("example.org").await.is_empty());
    assert_eq!(sts.mode, StsMode::Enforce);
    assert_eq!(sts.mx, vec!["mx.example.net"]);

    // An MX outside the policy is not used.
    let other_mx = policies.for_mx(&domain, "mx.example.com").await;
    assert!(!other_mx.allowed);
    assert!(other_mx
        .policy_failure
        .as_ref()
        .unwrap()
        .contains("not in the MTA-STS policy"));

    // A certificate from a trusted CA for the MX name: TLS, verified.
    let good = start_mx(&s.ca.issue("mx.example.net"), vec![]).await;
    let mx = policies.for_mx(&domain, "mx.example.net.").await;
    assert!(mx.allowed && mx.required);
    assert_eq!(mx.kind, "mta-sts");
    let outcome = starttls(good, "mx.example.net", &mx)
        .await
        .expect("handshake");
    assert!(outcome.verified, "{outcome:?}");
    assert!(outcome.version.is_some() && outcome.cipher.is_some());
    policies.record("example.net", "mx.example.net", outcome);

    // A self-signed one: the handshake fails; the caller defers.
    let bad = start_mx(&self_signed("mx.example.net"), vec![]).await;
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    let err = starttls(bad, "mx.example.net", &mx).await.unwrap_err();
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    assert!(mx.verification.failure().is_some());
    let failed = TlsOutcome::handshake_failed(&mx, err).with_ip(bad.ip());
    assert_eq!(failed.result_type, Some(FailureType::CertificateNotTrusted));
    policies.record("example.net", "mx.example.net", failed);

    // A trusted certificate for another name fails too.
    let wrong_name = start_mx(&s.ca.issue("mail.example.org"), vec![]).await;
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    let err = starttls(wrong_name, "mx.example.net", &mx)
        .await
        .unwrap_err();
    let failed = TlsOutcome::handshake_failed(&mx, err);
    assert_eq!(
        failed.result_type,
        Some(FailureType::CertificateHostMismatch)
    );
    policies.record("example.net", "mx.example.net", failed);

    // The refused MX is recorded too.
    policies.record(
        "example.net",
        "mx.example.com",
        TlsOutcome::refused(&other_mx),
    );

    let seen = policies.results().get("example.net").unwrap();
    assert!(seen.ever_verified);
    assert_eq!((seen.verified_count, seen.failure_count), (1, 3));
    assert!(!seen.last.verified);

    // The TLS-RPT report of the period, read by Python's json module.
    let who = Reporter {
        organization: "Sluice test".into(),
        contact: "postmaster@example.com".into(),
    };
    let json = policies
        .results()
        .take_report("example.net", &who, "2026-11-24-example.net")
        .unwrap();
    let check = r#"
import json, sys
r = json.load(sys.stdin)
assert r["organization-name"] == "Sluice test" and r["report-id"] == "2026-11-24-example.net"
assert r["date-range"]["start-datetime"].endswith("Z")
[p] = r["policies"]
assert p["policy"]["policy-type"] == "sts", p
assert "mode: enforce" in p["policy"]["policy-string"], p
assert p["policy"]["policy-domain"] == "example.net"
assert sorted(p["policy"]["mx-host"]) == ["mx.example.com", "mx.example.net"], p
assert p["summary"] == {"total-successful-session-count": 1, "total-failure-session-count": 3}, p
kinds = sorted((d["result-type"], d["failed-session-count"]) for d in p["failure-details"])
assert kinds == [("certificate-host-mismatch", 1), ("certificate-not-trusted", 1), ("validation-failure", 1)], kinds
assert any(d.get("receiving-ip") == "127.0.0.1" for d in p["failure-details"])
print("ok")
"#;
    let mut child = Command::new(require_program("python3", "python3"))
        .args(["-c", check])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), json.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{json}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mta_sts_testing_delivers_and_records_the_failure() {
    let s = sts_setup();
    s.https.set_policy(&policy("testing", "*.example.org"));
    let policies = TlsPolicies::from_nameservers(&s.nameservers, s.config.clone()).unwrap();
    let domain = policies.for_domain("example.org").await;
    assert_eq!(domain.sts.as_ref().unwrap().mode, StsMode::Testing);
    let bad = start_mx(&self_signed("mx.example.org"), vec![]).await;
    let mx = policies.for_mx(&domain, "mx.example.org").await;
    assert!(mx.allowed && !mx.required);
    let outcome = starttls(bad, "mx.example.org", &mx)
        .await
        .expect("testing mode delivers");
    assert!(!outcome.verified);
    assert!(outcome.failure.is_some(), "{outcome:?}");
    policies.record("example.org", "mx.example.org", outcome);
    let seen = policies.results().get("example.org").unwrap();
    assert_eq!(seen.failure_count, 1);
    // An MX outside the patterns may still be used, with the failure noted.
    let outside = policies.for_mx(&domain, "mx.example.com").await;
    assert!(outside.allowed && outside.policy_failure.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_policy_means_opportunistic_tls_with_any_certificate() {
    let dns = Dns::start(vec![Zone::new(
        "example.com",
        &["@ MX 10 mx", "mx A 127.0.0.1"],
    )]);
    let config = TlsPolicyConfig {
        dane: DaneMode::Off,
        ..TlsPolicyConfig::default()
    };
    let policies = TlsPolicies::from_nameservers(&[dns.addr], config).unwrap();
    let domain = policies.for_domain("example.com").await;
    assert_eq!(domain.sts, None);
    assert_eq!(domain.sts_error, None);
    let mx = policies.for_mx(&domain, "mx.example.com").await;
    assert!(mx.allowed && !mx.required);
    assert_eq!(mx.kind, "opportunistic");
    let addr = start_mx(&self_signed("whatever.invalid"), vec![]).await;
    let outcome = starttls(addr, "mx.example.com", &mx)
        .await
        .expect("any certificate");
    assert!(!outcome.verified && outcome.version.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_cache_survives_a_restart_and_a_failed_refresh() {
    let s = sts_setup();
    let first = TlsPolicies::from_nameservers(&s.nameservers, s.config.clone()).unwrap();
    // Many deliveries asking at once: one fetch.
    let first = Arc::new(first);
    let asks: Vec<_> = (0..8)
        .map(|_| {
            let p = first.clone();
            tokio::spawn(async move { p.for_domain("example.net").await })
        })
        .collect();
    for ask in asks {
        assert!(ask.await.unwrap().sts.is_some());
    }
    // (The server logs a request just after answering it.)
    assert!(wait_until(Duration::from_secs(5), || s.https.requests() >= 1));
    assert_eq!(s.https.requests(), 1);
    // Same id: served from the cache, no fetch.
    assert!(first.for_domain("example.net").await.sts.is_some());
    assert_eq!(s.https.requests(), 1);
    drop(first);

    // A restart with the policy server gone: the cached policy holds.
    let StsSetup {
        _dns: mut dns,
        https,
        config,
        nameservers,
        dir,
        ..
    } = s;
    drop(https);
    let again = TlsPolicies::from_nameservers(&nameservers, config.clone()).unwrap();
    let domain = again.for_domain("example.net").await;
    assert_eq!(domain.sts.unwrap().mode, StsMode::Enforce);
    assert!(domain.sts_error.is_none(), "same id: no fetch needed");

    // A new id with the server down: refresh fails, the cached policy holds.
    dns.set_zone(Zone::new(
        "example.net",
        &[
            "@ MX 10 mx",
            "mx A 127.0.0.1",
            "_mta-sts TXT \"v=STSv1; id=20261124b;\"",
            "mta-sts A 127.0.0.1",
        ],
    ));
    // (A new instance: the resolver of the first one caches the old TXT.)
    let again = TlsPolicies::from_nameservers(&nameservers, config).unwrap();
    let domain = again.for_domain("example.net").await;
    assert!(domain.sts_error.is_some());
    assert_eq!(domain.sts.unwrap().mode, StsMode::Enforce);
    assert!(dir.path().join("mta-sts/example.net.policy").exists());
}

/// A signed zone for DANE, with `tlsa` as the MX's TLSA record.
fn dane_dns(tlsa: &str) -> Dns {
    Dns::start_signed(vec![Zone::new(
        "example.net",
        &[
            "@ MX 10 mx",
            "mx A 127.0.0.1",
            &format!("_25._tcp.mx TLSA {tlsa}"),
        ],
    )])
}

fn dane_policies(dns: &Dns) -> TlsPolicies {
    let config = TlsPolicyConfig {
        dane: DaneMode::Validate,
        mta_sts: false,
        dnssec_trust_anchor: Some(dns.trust_anchor_file()),
        ..TlsPolicyConfig::default()
    };
    let validating = validating_resolver(&[dns.addr], &config).unwrap();
    TlsPolicies::from_nameservers(&[dns.addr], config)
        .unwrap()
        .with_dane_resolver(validating)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dane_ee_match_passes_and_mismatch_fails() {
    let cert = self_signed("not-the-mx-name.invalid");
    let dns = dane_dns(&format!(
        "3 1 1 {}",
        hex::encode(Sha256::digest(&cert.spki))
    ));
    let policies = dane_policies(&dns);
    assert_eq!(policies.dnssec_self_check().await, Ok(()));
    let domain = policies.for_domain("example.net").await;
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    assert_eq!(mx.kind, "dane", "{:?}", mx.policy_failure);
    assert_eq!(mx.dane, DaneStatus::Secure);
    assert!(mx.allowed && mx.required);
    assert_eq!(mx.tlsa.len(), 1);

    let addr = start_mx(&cert, vec![]).await;
    let outcome = starttls(addr, "mx.example.net", &mx)
        .await
        .expect("DANE-EE match");
    assert!(outcome.verified, "{outcome:?}");

    let other = start_mx(&self_signed("mx.example.net"), vec![]).await;
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    let err = starttls(other, "mx.example.net", &mx).await.unwrap_err();
    assert!(
        mx.verification
            .failure()
            .unwrap()
            .contains("no TLSA record matches"),
        "{err}"
    );
    let failed = TlsOutcome::handshake_failed(&mx, err);
    assert_eq!(failed.result_type, Some(FailureType::TlsaInvalid));
    assert_eq!(failed.policy.policy_type, "tlsa");
    assert!(failed.policy.policy_string[0].starts_with("3 1 1 "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dane_ta_checks_the_chain_and_the_name() {
    let ca = Ca::new();
    let dns = dane_dns(&format!(
        "2 0 1 {}",
        hex::encode(Sha256::digest(ca.cert.der().as_ref()))
    ));
    let policies = dane_policies(&dns);
    let domain = policies.for_domain("example.net").await;
    let ta = ca.cert.der().clone();
    let good = start_mx(&ca.issue("mx.example.net"), vec![ta.clone()]).await;
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    assert_eq!(mx.kind, "dane");
    starttls(good, "mx.example.net", &mx)
        .await
        .expect("DANE-TA chain");

    let wrong_name = start_mx(&ca.issue("mail.example.org"), vec![ta]).await;
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    assert!(starttls(wrong_name, "mx.example.net", &mx).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_tlsa_answer_is_bogus_and_the_mx_unusable() {
    // The zone validates (its SOA and keys), but its TLSA record was
    // rewritten after signing: bogus, as if forged on the way, so the MX
    // is not used at all (RFC 7672 §2.1.1) rather than reached without DANE.
    let signed = hex::encode([0x11u8; 32]);
    let forged = hex::encode([0x22u8; 32]);
    let dns = Dns::start_signed(vec![Zone::new(
        "example.net",
        &[
            "@ MX 10 mx",
            "mx A 127.0.0.1",
            &format!("_25._tcp.mx TLSA 3 1 1 {signed}"),
        ],
    )
    .forged(&signed, &forged)]);
    let policies = dane_policies(&dns);
    assert!(policies.dane_active().await);
    let domain = policies.for_domain("example.net").await;
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    assert_eq!(mx.kind, "dane");
    assert_eq!(mx.dane, DaneStatus::Bogus);
    assert!(!mx.allowed && mx.required);
    let why = mx.policy_failure.clone().unwrap();
    assert!(
        why.contains("TLSA _25._tcp.mx.example.net.") && why.contains("DNSSEC"),
        "{why}"
    );
    assert_eq!(
        TlsOutcome::refused(&mx).result_type,
        Some(FailureType::DnssecInvalid)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_zone_without_tlsa_gets_opportunistic_tls() {
    // The denial of the TLSA record is itself signed: no DANE, no failure.
    let dns = Dns::start_signed(vec![Zone::new(
        "example.net",
        &["@ MX 10 mx", "mx A 127.0.0.1"],
    )]);
    let policies = dane_policies(&dns);
    let domain = policies.for_domain("example.net").await;
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    assert_eq!(mx.kind, "opportunistic", "{:?}", mx.policy_failure);
    assert_eq!(mx.dane, DaneStatus::Insecure);
    assert!(mx.allowed && !mx.required);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secure_tlsa_set_without_usable_records_requires_unauthenticated_tls() {
    // PKIX-EE is not for SMTP (RFC 7672 §3.1.3): the record is secure but
    // unusable, so TLS is required and any certificate will do (§2.2).
    let dns = dane_dns(&format!("1 1 1 {}", hex::encode([0u8; 32])));
    let policies = dane_policies(&dns);
    let domain = policies.for_domain("example.net").await;
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    assert_eq!(mx.dane, DaneStatus::SecureUnusable);
    assert!(mx.allowed && mx.required);
    let addr = start_mx(&self_signed("other.invalid"), vec![]).await;
    let outcome = starttls(addr, "mx.example.net", &mx)
        .await
        .expect("unauthenticated TLS");
    assert!(!outcome.verified);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_outside_the_trust_anchors_are_insecure() {
    let dns = Dns::start_signed(vec![
        Zone::new("example.net", &[]),
        Zone::new(
            "example.org",
            &[
                "@ MX 10 mx",
                "mx A 127.0.0.1",
                &format!("_25._tcp.mx TLSA 3 1 1 {}", hex::encode([0u8; 32])),
            ],
        ),
    ]);
    // Only example.net's key is an anchor.
    let anchors = dns.trust_anchor_file();
    let text = std::fs::read_to_string(&anchors).unwrap();
    let net: String = text
        .lines()
        .filter(|l| l.starts_with("example.net."))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&anchors, net).unwrap();
    let config = TlsPolicyConfig {
        mta_sts: false,
        dnssec_trust_anchor: Some(anchors),
        ..TlsPolicyConfig::default()
    };
    let policies = TlsPolicies::from_nameservers(&[dns.addr], config).unwrap();
    assert!(policies.dane_active().await);
    let domain = policies.for_domain("example.org").await;
    let mx = policies.for_mx(&domain, "mx.example.org").await;
    assert_eq!(mx.dane, DaneStatus::Insecure);
    assert_eq!(mx.kind, "opportunistic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dane_off_ignores_tlsa_records() {
    let dns = dane_dns(&format!("3 1 1 {}", hex::encode([0u8; 32])));
    let config = TlsPolicyConfig {
        dane: DaneMode::Off,
        mta_sts: false,
        dnssec_trust_anchor: Some(dns.trust_anchor_file()),
        ..TlsPolicyConfig::default()
    };
    let policies = TlsPolicies::from_nameservers(&[dns.addr], config).unwrap();
    let domain = policies.for_domain("example.net").await;
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    assert_eq!(mx.kind, "opportunistic");
    let addr = start_mx(&self_signed("mx.example.net"), vec![]).await;
    starttls(addr, "mx.example.net", &mx)
        .await
        .expect("no DANE: any certificate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dane_takes_precedence_over_mta_sts() {
    // The domain publishes both; the MX shows a self-signed certificate
    // that MTA-STS alone would refuse but its TLSA record pins.
    let ca = Ca::new();
    let https_cert = ca.issue("mta-sts.example.net");
    let https = PolicyServer::start(&https_cert, &policy("enforce", "mx.example.net"));
    let cert = self_signed("mx.example.net");
    let tlsa = format!(
        "_25._tcp.mx TLSA 3 1 1 {}",
        hex::encode(Sha256::digest(&cert.spki))
    );
    let dns = Dns::start_signed(vec![Zone::new(
        "example.net",
        &[
            "@ MX 10 mx",
            "mx A 127.0.0.1",
            &tlsa,
            "_mta-sts TXT \"v=STSv1; id=1;\"",
            "mta-sts A 127.0.0.1",
        ],
    )]);
    let dir = tempfile::tempdir().unwrap();
    let config = TlsPolicyConfig {
        mta_sts_ca_file: Some(write(dir.path(), "ca.pem", &ca.pem())),
        mta_sts_port: https.port,
        dnssec_trust_anchor: Some(dns.trust_anchor_file()),
        ..TlsPolicyConfig::default()
    };
    let policies = TlsPolicies::from_nameservers(&[dns.addr], config).unwrap();
    let domain = policies.for_domain("example.net").await;
    assert_eq!(domain.sts.as_ref().unwrap().mode, StsMode::Enforce);
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    assert_eq!(mx.kind, "dane");
    assert!(mx.allowed && mx.required);
    let addr = start_mx(&cert, vec![]).await;
    let outcome = starttls(addr, "mx.example.net", &mx)
        .await
        .expect("DANE match");
    assert!(outcome.verified);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_host_with_an_untrusted_certificate_gives_no_policy() {
    let s = sts_setup();
    // The CA file is not given: the policy server's certificate is not trusted.
    let config = TlsPolicyConfig {
        mta_sts_ca_file: None,
        ..s.config.clone()
    };
    let policies = TlsPolicies::from_nameservers(&s.nameservers, config).unwrap();
    let domain = policies.for_domain("example.net").await;
    assert_eq!(domain.sts, None);
    let why = domain.sts_error.clone().unwrap();
    assert!(why.contains("certificate"), "{why}");
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    assert_eq!(mx.kind, "opportunistic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postfix_as_the_mx_under_mta_sts_enforce() {
    let s = sts_setup();
    let policies = TlsPolicies::from_nameservers(&s.nameservers, s.config.clone()).unwrap();
    let domain = policies.for_domain("example.net").await;
    assert_eq!(domain.sts.as_ref().unwrap().mode, StsMode::Enforce);

    let cert = s.ca.issue("mx.example.net");
    let good = PostfixMx::start("mx.example.net", &cert.cert_pem, &cert.key_pem);
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    let outcome = starttls(good.addr, "mx.example.net", &mx)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", good.log()));
    assert!(outcome.verified, "{outcome:?}");
    assert!(
        wait_until(Duration::from_secs(10), || good
            .log()
            .contains("TLS connection established from")),
        "{}",
        good.log()
    );

    let bad_cert = self_signed("mx.example.net");
    let bad = PostfixMx::start("mx.example.net", &bad_cert.cert_pem, &bad_cert.key_pem);
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    let err = starttls(bad.addr, "mx.example.net", &mx).await.unwrap_err();
    let failed = TlsOutcome::handshake_failed(&mx, err);
    assert_eq!(failed.result_type, Some(FailureType::CertificateNotTrusted));
}

#[tokio::test]
async fn unusable_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = TlsPolicyConfig {
        mta_sts_ca_file: Some(dir.path().join("nope.pem")),
        ..TlsPolicyConfig::default()
    };
    let e = TlsPolicies::from_nameservers(&["127.0.0.1:53".parse().unwrap()], missing)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("MTA-STS CA file ") && e.contains("nope.pem"),
        "{e}"
    );
    let empty = TlsPolicyConfig {
        mta_sts_ca_file: Some(write(dir.path(), "empty.pem", "not a certificate\n")),
        ..TlsPolicyConfig::default()
    };
    let e = TlsPolicies::from_nameservers(&["127.0.0.1:53".parse().unwrap()], empty)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no certificate"), "{e}");
    let anchor = TlsPolicyConfig {
        dnssec_trust_anchor: Some(write(
            dir.path(),
            "anchor.key",
            "example.net. IN DNSKEY garbage\n",
        )),
        ..TlsPolicyConfig::default()
    };
    let e = validating_resolver(&["127.0.0.1:53".parse().unwrap()], &anchor)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("DNSSEC trust anchor ") && e.contains("anchor.key"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_domain_under_a_signed_parent_gets_no_dane() {
    // The common case on the internet: the parent is signed and proves
    // the child has no DS, so the child's answers are insecure and its
    // TLSA record (which would not match) is not used.
    let dns = Dns::start_signed(vec![
        Zone::new(
            "net",
            &[
                "example.net. NS ns.example.net.",
                "ns.example.net. A 127.0.0.1",
            ],
        ),
        Zone::new(
            "example.net",
            &[
                "@ MX 10 mx",
                "mx A 127.0.0.1",
                &format!("_25._tcp.mx TLSA 3 1 1 {}", hex::encode([0u8; 32])),
            ],
        )
        .unsigned(),
    ]);
    let config = TlsPolicyConfig {
        mta_sts: false,
        dnssec_trust_anchor: Some(dns.trust_anchor_file()),
        ..TlsPolicyConfig::default()
    };
    let policies = TlsPolicies::from_nameservers(&[dns.addr], config).unwrap();
    let domain = policies.for_domain("example.net").await;
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    assert_eq!(mx.kind, "opportunistic", "{:?}", mx.policy_failure);
    assert_eq!(mx.dane, DaneStatus::Insecure);
    assert!(mx.allowed && !mx.required);
    let addr = start_mx(&self_signed("mx.example.net"), vec![]).await;
    starttls(addr, "mx.example.net", &mx)
        .await
        .expect("opportunistic TLS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_without_dnssec_leaves_dane_inactive() {
    // The anchor says example.net is signed; this server serves it unsigned,
    // as a resolver that strips DNSSEC records would. Nothing can be
    // proven secure here, so DANE applies to no host: the MX gets
    // opportunistic TLS, and its TLSA record (which would not match) is
    // not used.
    let signed = Dns::start_signed(vec![Zone::new("example.net", &[])]);
    let unsigned = Dns::start(vec![Zone::new(
        "example.net",
        &[
            "@ MX 10 mx",
            "mx A 127.0.0.1",
            &format!("_25._tcp.mx TLSA 3 1 1 {}", hex::encode([0u8; 32])),
        ],
    )]);
    let config = TlsPolicyConfig {
        mta_sts: false,
        dnssec_trust_anchor: Some(signed.trust_anchor_file()),
        ..TlsPolicyConfig::default()
    };
    let policies = TlsPolicies::from_nameservers(&[unsigned.addr], config.clone()).unwrap();
    let e = policies.dnssec_self_check().await.unwrap_err();
    assert!(e.starts_with("SOA example.net.:"), "{e}");
    assert!(e.len() < 200, "a line, not a dump: {e}");
    assert!(!policies.dane_active().await);
    let domain = policies.for_domain("example.net").await;
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    assert_eq!(mx.kind, "opportunistic", "{:?}", mx.policy_failure);
    assert_eq!(mx.dane, DaneStatus::Inactive);
    assert!(mx.allowed && !mx.required);
    let addr = start_mx(&self_signed("mx.example.net"), vec![]).await;
    starttls(addr, "mx.example.net", &mx)
        .await
        .expect("opportunistic TLS");

    // A resolver that signs answers with keys other than the anchors'
    // cannot be told apart from one that strips them: inactive too.
    let stranger = Dns::start_signed(vec![Zone::new(
        "example.net",
        &["@ MX 10 mx", "mx A 127.0.0.1"],
    )]);
    let policies = TlsPolicies::from_nameservers(&[stranger.addr], config.clone()).unwrap();
    assert!(!policies.dane_active().await);

    let off = TlsPolicyConfig {
        dane: DaneMode::Off,
        ..config
    };
    let policies = TlsPolicies::from_nameservers(&[unsigned.addr], off).unwrap();
    assert_eq!(policies.dnssec_self_check().await, Ok(()));
    assert!(!policies.dane_active().await);
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    assert_eq!(mx.dane, DaneStatus::Off);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_configuration_on_an_unsigned_resolver_sends_mail() {
    // What a new user meets: root trust anchor, dane = "validate", and a
    // resolver that answers MX and A records without DNSSEC.
    let dns = Dns::start(vec![Zone::new(
        "example.net",
        &["@ MX 10 mx", "mx A 127.0.0.1"],
    )]);
    let config = TlsPolicyConfig {
        mta_sts: false,
        ..TlsPolicyConfig::default()
    };
    assert_eq!(config.dane, DaneMode::Validate);
    let policies = TlsPolicies::from_nameservers(&[dns.addr], config).unwrap();
    let domain = policies.for_domain("example.net").await;
    let mx = policies.for_mx(&domain, "mx.example.net").await;
    assert_eq!(mx.kind, "opportunistic", "{:?}", mx.policy_failure);
    assert_eq!(mx.dane, DaneStatus::Inactive);
    assert!(mx.allowed);
}
