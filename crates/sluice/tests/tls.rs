//! The listeners' TLS, seen by Python's `ssl`: a renewed certificate is
//! taken without a restart (the files are replaced, `SIGHUP` is sent, and
//! the next STARTTLS (SMTP) and implicit TLS (IMAPS) handshakes present
//! the new one; a broken file is refused and the certificate in use
//! stays), `[tls] min_version` holds clients to TLS 1.3, the generated
//! certificate names the host and its fingerprint is logged, sessions
//! upgraded with STARTTLS (IMAP, POP3, ManageSieve) are logged as TLS,
//! and clients sending an IP address as SNI cause no warnings.

use sluice_testkit as kit;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kit::{addr_arg, python, signal, wait_until, Server};

/// Writes a fresh self-signed certificate and key for mx.example.org.
fn make_certificate(dir: &Path) {
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=mx.example.org",
            "-keyout",
        ])
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .output()
        .expect("openssl (test.sh installs it)");
    assert!(out.status.success(), "{out:?}");
}

/// SHA-256 of the certificate in `dir`, as the handshakes will show it.
fn fingerprint(dir: &Path) -> String {
    python(
        "import hashlib, ssl, sys\nder = ssl.PEM_cert_to_DER_cert(open(sys.argv[1]).read())\nprint(hashlib.sha256(der).hexdigest())",
        &[&dir.join("cert.pem").to_string_lossy()],
    )
    .trim()
    .to_string()
}

/// The certificates the server presents now: `smtp FP` and `imaps FP`.
fn presented(server: &Server) -> String {
    python(
        r#"
import hashlib, imaplib, smtplib, ssl, sys
ctx = ssl._create_unverified_context()
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p)); s.starttls(context=ctx)
print("smtp", hashlib.sha256(s.sock.getpeercert(binary_form=True)).hexdigest())
s.quit()
h, p = sys.argv[2].rsplit(":", 1)
m = imaplib.IMAP4_SSL(h, int(p), ssl_context=ctx)
print("imaps", hashlib.sha256(m.sock.getpeercert(binary_form=True)).hexdigest())
m.logout()
"#,
        &[&addr_arg(server.smtp), &addr_arg(server.imaps)],
    )
}

#[test]
fn sighup_takes_a_renewed_certificate_without_a_restart() {
    let certs = tempfile::tempdir().unwrap();
    make_certificate(certs.path());
    let first = fingerprint(certs.path());
    let server = Server::start_with(&format!(
        "[tls]\ncert = {:?}\nkey = {:?}\n",
        certs.path().join("cert.pem"),
        certs.path().join("key.pem")
    ));
    let before = presented(&server);
    assert!(before.contains(&format!("smtp {first}")), "{before}");
    assert!(before.contains(&format!("imaps {first}")), "{before}");

    make_certificate(certs.path());
    let second = fingerprint(certs.path());
    assert_ne!(first, second);
    signal(server.pid(), "HUP");
    assert!(
        wait_until(Duration::from_secs(5), || server
            .log()
            .contains("certificate reloaded")),
        "{}",
        server.log()
    );
    let after = presented(&server);
    assert!(after.contains(&format!("smtp {second}")), "{after}");
    assert!(after.contains(&format!("imaps {second}")), "{after}");

    // A broken file is refused; the certificate in use stays.
    std::fs::write(certs.path().join("cert.pem"), "not a certificate\n").unwrap();
    signal(server.pid(), "HUP");
    assert!(
        wait_until(Duration::from_secs(5), || server
            .log()
            .contains("certificate not reloaded")),
        "{}",
        server.log()
    );
    let kept = presented(&server);
    assert!(kept.contains(&format!("smtp {second}")), "{kept}");
}

/// The TLS version an IMAPS handshake gets with the client held to at
/// most `argv[2]` ("1.2" or "1.3"), or `refused`.
const VERSION: &str = r#"
import imaplib, ssl, sys
ctx = ssl._create_unverified_context()
ctx.maximum_version = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}[sys.argv[2]]
h, p = sys.argv[1].rsplit(":", 1)
try:
    m = imaplib.IMAP4_SSL(h, int(p), ssl_context=ctx)
    print(m.sock.version())
    m.logout()
except (ssl.SSLError, ConnectionError):
    print("refused")
"#;

#[test]
fn the_oldest_tls_version_is_configurable() {
    let default = Server::start();
    let imaps = addr_arg(default.imaps);
    assert_eq!(python(VERSION, &[&imaps, "1.2"]).trim(), "TLSv1.2");
    assert_eq!(python(VERSION, &[&imaps, "1.3"]).trim(), "TLSv1.3");
    let strict = Server::start_with("[tls]\nmin_version = \"1.3\"\n");
    let imaps = addr_arg(strict.imaps);
    assert_eq!(python(VERSION, &[&imaps, "1.2"]).trim(), "refused");
    assert_eq!(python(VERSION, &[&imaps, "1.3"]).trim(), "TLSv1.3");
}

/// The certificate IMAPS presents, as Python's `ssl` decodes it: the
/// subject's CN, each subjectAltName, validity in days, whether it began
/// before now, and the SHA-256 fingerprint, one per line.
const DECODE: &str = r#"
import hashlib, imaplib, ssl, sys, time
ctx = ssl._create_unverified_context()
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4_SSL(h, int(p), ssl_context=ctx)
der = m.sock.getpeercert(binary_form=True)
m.logout()
open(sys.argv[2], "wb").write(ssl.DER_cert_to_PEM_cert(der).encode())
cert = ssl._ssl._test_decode_cert(sys.argv[2])
print("cn", dict(x[0] for x in cert["subject"])["commonName"])
for kind, value in cert["subjectAltName"]:
    print("san", kind, value)
start = ssl.cert_time_to_seconds(cert["notBefore"])
end = ssl.cert_time_to_seconds(cert["notAfter"])
print("days", round((end - start) / 86400))
print("started_a_day_ago", abs(time.time() - 86400 - start) < 600)
print("sha256", ":".join("%02X" % b for b in hashlib.sha256(der).digest()))
"#;

#[test]
fn the_generated_certificate_names_the_host_and_is_logged() {
    let server = Server::start();
    let out = python(
        DECODE,
        &[
            &addr_arg(server.imaps),
            &server.dir.path().join("served.pem").to_string_lossy(),
        ],
    );
    assert!(out.contains("cn mx.example.org\n"), "{out}");
    assert!(out.contains("san DNS mx.example.org\n"), "{out}");
    assert!(out.contains("san DNS localhost\n"), "{out}");
    assert!(out.contains("san IP Address 127.0.0.1\n"), "{out}");
    assert!(out.contains("san IP Address 0:0:0:0:0:0:0:1\n"), "{out}");
    // From a day ago, for a year.
    assert!(out.contains("days 366\n"), "{out}");
    assert!(out.contains("started_a_day_ago True\n"), "{out}");
    let fingerprint = out.lines().find_map(|l| l.strip_prefix("sha256 ")).unwrap();
    let log = server.log();
    let line = log
        .lines()
        .find(|l| l.contains("certificate") && l.contains("sha256="))
        .unwrap_or_else(|| panic!("no fingerprint in the log:\n{log}"));
    assert!(
        line.contains(&format!("sha256={fingerprint}")),
        "{line}\n{out}"
    );
}

#[test]
fn starttls_shows_in_the_session_log() {
    let server = Server::start();
    let user = server.add_user("alice");
    python(
        r#"
import imaplib, poplib, ssl, sys
ctx = ssl._create_unverified_context()
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
m.starttls(ssl_context=ctx)
m.login(sys.argv[3], sys.argv[4])
m.logout()
h, p = sys.argv[2].rsplit(":", 1)
c = poplib.POP3(h, int(p))
c.stls(context=ctx)
c.user(sys.argv[3]); c.pass_(sys.argv[4])
c.quit()
# ManageSieve (RFC 5804 §2.2), which Python has no client for.
import base64, socket
h, p = sys.argv[5].rsplit(":", 1)
sock = socket.create_connection((h, int(p)), timeout=10)
f = sock.makefile("rb")
def until_ok():
    while True:
        line = f.readline()
        if not line or line.startswith((b"OK", b"NO", b"BYE")):
            return line
until_ok()
sock.sendall(b"STARTTLS\r\n")
assert until_ok().startswith(b"OK")
tls = ctx.wrap_socket(sock)
f = tls.makefile("rb")
until_ok()  # capabilities again
plain = base64.b64encode(b"\0" + sys.argv[3].encode() + b"\0" + sys.argv[4].encode()).decode()
tls.sendall(('AUTHENTICATE "PLAIN" "%s"\r\n' % plain).encode())
assert until_ok().startswith(b"OK")
tls.sendall(b"LOGOUT\r\n")
until_ok()
"#,
        &[
            &addr_arg(server.imap),
            &addr_arg(server.pop3),
            &user,
            kit::PASSWORD,
            &addr_arg(server.addr("managesieve")),
        ],
    );
    let line = |what: &str| {
        let mut found = None;
        wait_until(Duration::from_secs(5), || {
            found = server
                .log()
                .lines()
                .find(|l| l.contains(what))
                .map(str::to_string);
            found.is_some()
        });
        found.unwrap_or_else(|| panic!("no {what:?} line:\n{}", server.log()))
    };
    // The TLS state once, as it is when the line is written.
    for what in [
        "imap login",
        "imap logout",
        "pop3 login",
        "managesieve login",
    ] {
        let l = line(what);
        assert_eq!(l.matches("tls=").count(), 1, "{l}");
        assert!(l.contains("tls=true"), "{l}");
    }
}

#[test]
fn sni_with_an_ip_address_is_not_a_warning() {
    let server = Server::start();
    for _ in 0..3 {
        let out = Command::new("openssl")
            .args(["s_client", "-connect"])
            .arg(addr_arg(server.imaps))
            .args(["-servername", "127.0.0.1"])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("openssl (test.sh installs it)");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Server certificate"), "{text}");
    }
    let log = server.log();
    // (Other warnings, such as running as root in a container, are not
    // this test's business.)
    assert!(
        !log.lines().any(|l| l.contains("WARN") && l.contains("SNI")),
        "SNI warnings in the log:\n{log}"
    );
}
