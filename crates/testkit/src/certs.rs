//! Certificates for the TLS peers tests run, made at run time with
//! `openssl`: nothing secret or expiring is kept in the tree.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::require_program;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new(require_program("openssl", "openssl"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Makes in `dir` a CA (`ca.pem`, `ca.key`) and a server certificate it
/// signs for `localhost` and 127.0.0.1 (`cert.pem`, `key.pem`), for the
/// peers a test runs with TLS (Pebble's HTTPS, PostgreSQL); a test that
/// needs a CA the server does not chain to makes a second set.
pub fn make_server_certificate(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    // Each CA a name of its own: a client trusting another CA then finds
    // no issuer at all, as with a real foreign CA, rather than one of the
    // same name whose signature does not match.
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let subject = format!(
        "/CN=sluice test ca {} {}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    );
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-days",
        "2",
        "-subj",
        &subject,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    openssl(dir, &ca);
    let mut csr = vec!["req"];
    csr.extend(ec);
    csr.extend([
        "-subj",
        "/CN=localhost",
        "-keyout",
        "key.pem",
        "-out",
        "csr.pem",
    ]);
    openssl(dir, &csr);
    std::fs::write(
        dir.join("ext.cnf"),
        "basicConstraints=critical,CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "csr.pem",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "cert.pem",
        ],
    );
}

/// The SHA-256 of the SubjectPublicKeyInfo of the PEM certificate `cert`,
/// in hex: the data of a `3 1 1` (DANE-EE, SPKI, SHA-256) TLSA record
/// that pins it.
pub fn spki_sha256_hex(cert: &Path) -> String {
    let run = |args: &[&str], input: &[u8]| -> Vec<u8> {
        use std::io::Write as _;
        let mut child = Command::new(require_program("openssl", "openssl"))
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run openssl");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input)
            .expect("write to openssl");
        let out = child.wait_with_output().expect("openssl output");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let pem = std::fs::read(cert).expect("certificate file");
    let public_key = run(&["x509", "-noout", "-pubkey"], &pem);
    let spki = run(&["pkey", "-pubin", "-outform", "DER"], &public_key);
    let digest = run(&["dgst", "-sha256", "-r"], &spki);
    String::from_utf8_lossy(&digest)
        .split_whitespace()
        .next()
        .expect("a digest")
        .to_string()
}
