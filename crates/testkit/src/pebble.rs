//! A real ACME CA on loopback for tests: Pebble (Let's Encrypt's test
//! server, Debian's `pebble`), with its own HTTPS certificate made by
//! `openssl`, validating challenges on the ports the test chose and
//! resolving names through the test's DNS server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{accepts, free_port, require_program, wait_until};

/// How Pebble is started.
#[derive(Debug, Clone)]
pub struct PebbleOptions {
    /// The DNS server Pebble resolves the names to validate with.
    pub dns: SocketAddr,
    /// The port Pebble sends http-01 requests to.
    pub http_port: u16,
    /// The port Pebble makes tls-alpn-01 handshakes on.
    pub tls_port: u16,
    /// How long the certificates it issues are valid, in seconds.
    pub validity_secs: u64,
}

/// A running Pebble. Stopped when dropped.
pub struct Pebble {
    /// The ACME directory URL.
    pub directory: String,
    /// The management interface (`/roots/0`, `/intermediates/0`).
    pub management: SocketAddr,
    /// The root that Pebble's own HTTPS certificate chains to: the value
    /// for `[acme] ca_file`.
    pub ca_file: PathBuf,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Pebble {
    /// Starts Pebble and waits until its directory answers. Challenges
    /// are really validated (`PEBBLE_VA_ALWAYS_VALID=0`) without Pebble's
    /// random delays, nonces are never refused at random, and every order
    /// is validated afresh (no authorization reuse).
    pub fn start(options: PebbleOptions) -> Pebble {
        let program = require_program("pebble", "pebble");
        let dir = tempfile::tempdir().expect("temp dir");
        crate::certs::make_server_certificate(dir.path());
        let listen: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let management: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let config = format!(
            r#"{{"pebble": {{
  "listenAddress": "{listen}",
  "managementListenAddress": "{management}",
  "certificate": "{cert}",
  "privateKey": "{key}",
  "httpPort": {http},
  "tlsPort": {tls},
  "ocspResponderURL": "",
  "externalAccountBindingRequired": false,
  "certificateValidityPeriod": {validity}
}}}}
"#,
            cert = dir.path().join("cert.pem").display(),
            key = dir.path().join("key.pem").display(),
            http = options.http_port,
            tls = options.tls_port,
            validity = options.validity_secs,
        );
        let config_path = dir.path().join("pebble.json");
        std::fs::write(&config_path, config).unwrap();
        let log = std::fs::File::create(dir.path().join("pebble.log")).unwrap();
        let child = Command::new(program)
            .arg("-config")
            .arg(&config_path)
            .arg("-dnsserver")
            .arg(options.dns.to_string())
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_VA_ALWAYS_VALID", "0")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .env("PEBBLE_AUTHZREUSE", "0")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start pebble");
        let mut pebble = Pebble {
            directory: format!("https://{listen}/dir"),
            management,
            ca_file: dir.path().join("ca.pem"),
            dir,
            child: Some(child),
        };
        assert!(
            wait_until(Duration::from_secs(20), || accepts(listen)
                && accepts(management)),
            "pebble did not start:\n{}",
            pebble.log()
        );
        if let Some(Ok(Some(status))) = pebble.child.as_mut().map(|c| c.try_wait()) {
            panic!("pebble exited ({status}):\n{}", pebble.log());
        }
        pebble
    }

    /// What Pebble logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pebble.log")).unwrap_or_default()
    }

    /// The PEM root that Pebble's issued certificates chain to, fetched
    /// from its management interface (it is made afresh at every start);
    /// written to a file in Pebble's directory, whose path is returned.
    pub fn issuing_root(&self) -> PathBuf {
        let path = self.dir.path().join("issuing-root.pem");
        let out = Command::new("python3")
            .arg("-c")
            .arg(
                "import ssl, sys, urllib.request\n\
                 ctx = ssl.create_default_context(cafile=sys.argv[2])\n\
                 sys.stdout.write(urllib.request.urlopen(sys.argv[1], context=ctx).read().decode())",
            )
            .arg(format!("https://{}/roots/0", self.management))
            .arg(&self.ca_file)
            .output()
            .expect("python3 must be installed");
        assert!(
            out.status.success(),
            "cannot fetch Pebble's root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(&path, &out.stdout).unwrap();
        path
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
