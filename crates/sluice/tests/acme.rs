//! Certificates from a real ACME CA: Pebble on loopback, resolving
//! `mx.example.org` through the test's nsd to 127.0.0.1 and validating
//! Sluice's challenge answers for real. The certificate it issues is then
//! seen by Python's `ssl` through SMTP STARTTLS and IMAPS, checked against
//! Pebble's issuing root; it is renewed on the running server (Pebble's
//! certificates are made to fall due seconds after issuance) and the new
//! one is served without a restart; a CA that cannot be reached leaves the
//! self-signed certificate in place and the server working.

use sluice_testkit as kit;

use std::time::Duration;

use kit::{addr_arg, free_port, python, wait_until, Dns, Pebble, PebbleOptions, Server, Zone};

const NAME: &str = "mx.example.org";

/// Certificates valid 30 days and 25 seconds: with the default
/// `renew_before_days = 30`, each falls due 25 seconds after it is issued,
/// so the running server renews on its own schedule, no test hook needed.
const VALIDITY: u64 = 30 * 86_400 + 25;

fn dns() -> Dns {
    Dns::start(vec![Zone::new("example.org", &["mx A 127.0.0.1"])])
}

fn acme_config(pebble: &Pebble, challenge: &str) -> String {
    format!(
        "[acme]\nenabled = true\ndirectory = {:?}\nca_file = {:?}\ncontact = [\"postmaster@example.org\"]\nchallenge = {challenge:?}\n",
        pebble.directory, pebble.ca_file
    )
}

/// The SHA-256 fingerprints of the certificates installed so far, in
/// order, as the server logs them.
fn installed(server: &Server) -> Vec<String> {
    server
        .log()
        .lines()
        .filter(|l| l.contains("ACME certificate installed"))
        .filter_map(|l| {
            let start = l.find("sha256=")? + "sha256=".len();
            l[start..].split_whitespace().next().map(str::to_string)
        })
        .collect()
}

/// Connects over SMTP STARTTLS and IMAPS trusting only `argv[1]` (Pebble's
/// root) and checking the certificate against `argv[2]`; prints
/// `PROTOCOL FINGERPRINT ISSUER` for each.
const SERVED: &str = r#"
import hashlib, imaplib, smtplib, socket, ssl, sys
root, name, smtp_addr, imaps_addr = sys.argv[1:5]
ctx = ssl.create_default_context(cafile=root)
def fp(der):
    return ":".join("%02X" % b for b in hashlib.sha256(der).digest())
def issuer(cert):
    return dict(x[0] for x in cert["issuer"])["commonName"].replace(" ", "_")
h, p = smtp_addr.rsplit(":", 1)
s = smtplib.SMTP(h, int(p), timeout=10)
s._host = name  # the name STARTTLS checks the certificate against
s.starttls(context=ctx)
print("smtp", fp(s.sock.getpeercert(binary_form=True)), issuer(s.sock.getpeercert()))
s.quit()
h, p = imaps_addr.rsplit(":", 1)
class Imaps(imaplib.IMAP4_SSL):
    def _create_socket(self, timeout):
        sock = socket.create_connection((h, int(p)), timeout)
        return self.ssl_context.wrap_socket(sock, server_hostname=name)
m = Imaps(name, int(p), ssl_context=ctx, timeout=10)
print("imaps", fp(m.sock.getpeercert(binary_form=True)), issuer(m.sock.getpeercert()))
m.logout()
"#;

/// What SMTP STARTTLS and IMAPS present now: (protocol, fingerprint,
/// issuer) for each, verified against Pebble's root.
fn served(server: &Server, pebble: &Pebble) -> Vec<(String, String, String)> {
    let root = pebble.issuing_root();
    python(
        SERVED,
        &[
            &root.to_string_lossy(),
            NAME,
            &addr_arg(server.smtp),
            &addr_arg(server.imaps),
        ],
    )
    .lines()
    .map(|l| {
        let mut f = l.split_whitespace().map(str::to_string);
        (
            f.next().unwrap(),
            f.next().unwrap(),
            f.next().unwrap_or_default(),
        )
    })
    .collect()
}

fn wait_installed(server: &Server, pebble: &Pebble, count: usize) -> Vec<String> {
    assert!(
        wait_until(Duration::from_secs(120), || installed(server).len()
            >= count),
        "no certificate #{count}:\n{}\n--- pebble ---\n{}",
        server.log(),
        pebble.log()
    );
    installed(server)
}

#[test]
fn tls_alpn_01_issues_and_renews_without_a_restart() {
    let dns = dns();
    let tls_port = free_port();
    let pebble = Pebble::start(PebbleOptions {
        dns: dns.addr,
        http_port: free_port(),
        tls_port,
        validity_secs: VALIDITY,
    });
    let https = format!("127.0.0.1:{tls_port}");
    let mut server = Server::start_listening(
        &acme_config(&pebble, "tls-alpn-01"),
        &[("https", https.as_str())],
    );
    let pid = server.pid();

    let first = wait_installed(&server, &pebble, 1)[0].clone();
    assert!(
        server.log().contains("ACME tls-alpn-01 validation")
            && server.log().contains("answered=true"),
        "{}",
        server.log()
    );
    let now = served(&server, &pebble);
    assert_eq!(now.len(), 2, "{now:?}");
    let all = installed(&server);
    for (protocol, fingerprint, issuer) in &now {
        assert!(
            all.contains(fingerprint),
            "{protocol}: {fingerprint} not in {all:?}"
        );
        assert!(
            issuer.starts_with("Pebble"),
            "{protocol}: issued by {issuer}"
        );
    }

    // Renewal: the next certificate, on the same process.
    let second = wait_installed(&server, &pebble, 2)[1].clone();
    assert_ne!(first, second);
    let now = served(&server, &pebble);
    let all = installed(&server);
    for (protocol, fingerprint, _) in &now {
        assert_ne!(
            fingerprint, &first,
            "{protocol} still serves the first certificate"
        );
        assert!(
            all[1..].contains(fingerprint),
            "{protocol}: {fingerprint} not in {all:?}"
        );
    }
    assert_eq!(server.pid(), pid);
    assert_eq!(server.log().matches("sluice started").count(), 1);
    // Kept private on disk.
    use std::os::unix::fs::PermissionsExt;
    for file in ["cert.pem", "key.pem", "account.json"] {
        let path = server.data_dir().join("acme").join(file);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", path.display());
    }

    // A restart starts with the stored certificate, not a self-signed one.
    server.terminate();
    server.restart();
    let restarted = served(&server, &pebble);
    let all = installed(&server);
    for (protocol, fingerprint, _) in &restarted {
        assert!(
            all.contains(fingerprint),
            "{protocol}: {fingerprint} not in {all:?}"
        );
    }
}

#[test]
fn http_01_issues_a_certificate() {
    let dns = dns();
    let http_port = free_port();
    let pebble = Pebble::start(PebbleOptions {
        dns: dns.addr,
        http_port,
        tls_port: free_port(),
        // Not due again within the test.
        validity_secs: 90 * 86_400,
    });
    let acme_http = format!("127.0.0.1:{http_port}");
    let server = Server::start_listening(
        &acme_config(&pebble, "http-01"),
        &[("acme_http", acme_http.as_str())],
    );
    wait_installed(&server, &pebble, 1);
    assert!(
        server.log().contains("ACME http-01 validation") && server.log().contains("answered=true"),
        "{}",
        server.log()
    );
    let all = installed(&server);
    for (protocol, fingerprint, issuer) in served(&server, &pebble) {
        assert!(
            all.contains(&fingerprint),
            "{protocol}: {fingerprint} not in {all:?}"
        );
        assert!(
            issuer.starts_with("Pebble"),
            "{protocol}: issued by {issuer}"
        );
    }
}

#[test]
fn an_unreachable_ca_leaves_the_server_working() {
    let directory = format!("https://127.0.0.1:{}/dir", free_port());
    let server = Server::start_with(&format!(
        "[acme]\nenabled = true\ndirectory = {directory:?}\n"
    ));
    assert!(
        wait_until(Duration::from_secs(30), || server
            .log()
            .contains("ACME certificate not issued")),
        "{}",
        server.log()
    );
    let log = server.log();
    let line = log
        .lines()
        .find(|l| l.contains("ACME certificate not issued"))
        .unwrap();
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains(&directory), "{line}");
    assert!(line.contains("retry_in_secs="), "{line}");
    // The self-signed certificate still serves, and mail still flows.
    let subject = python(
        r#"
import imaplib, ssl, sys
ctx = ssl._create_unverified_context()
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4_SSL(h, int(p), ssl_context=ctx)
der = m.sock.getpeercert(binary_form=True)
m.logout()
open(sys.argv[2], "wb").write(ssl.DER_cert_to_PEM_cert(der).encode())
print(dict(x[0] for x in ssl._ssl._test_decode_cert(sys.argv[2])["subject"])["commonName"])
"#,
        &[
            &addr_arg(server.imaps),
            &server.dir.path().join("served.pem").to_string_lossy(),
        ],
    );
    assert_eq!(subject.trim(), NAME);
    let user = server.add_user("alice");
    assert!(server.rcpt_accepted(&user));
}
