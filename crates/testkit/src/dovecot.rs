//! A real Dovecot IMAP server on loopback for tests: its own config in a
//! temp directory, plain-text passwords from a passwd file, Maildir under
//! the temp directory owned by the `mail` user. IMAP only, no TLS (the
//! clients are on loopback).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running Dovecot; stopped when dropped.
pub struct Dovecot {
    /// Its directory (config, mail, log).
    pub dir: tempfile::TempDir,
    child: Child,
    /// Where its IMAP listener is.
    pub imap: SocketAddr,
}

impl Dovecot {
    /// Starts Dovecot with these `(address, password)` accounts. Must run
    /// as root (mail belongs to the `mail` user).
    pub fn start(accounts: &[(&str, &str)]) -> Dovecot {
        let program = crate::require_program("dovecot", "dovecot-imapd");
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path();
        let mail = d.join("mail");
        std::fs::create_dir_all(&mail).expect("mail dir");
        let ok = Command::new("chown")
            .arg("mail:mail")
            .arg(&mail)
            .status()
            .expect("chown");
        assert!(ok.success(), "chown mail: the test must run as root");
        // Dovecot's processes must reach the directory.
        let ok = Command::new("chmod")
            .arg("755")
            .arg(d)
            .status()
            .expect("chmod");
        assert!(ok.success());
        let passwd: String = accounts
            .iter()
            .map(|(address, password)| format!("{address}:{{PLAIN}}{password}\n"))
            .collect();
        std::fs::write(d.join("passwd"), passwd).expect("passwd");
        let port = crate::free_port();
        let conf = format!(
            "base_dir = {d}/run\nstate_dir = {d}/state\nlog_path = {d}/dovecot.log\nprotocols = imap\nlisten = 127.0.0.1\nssl = no\ndisable_plaintext_auth = no\nauth_mechanisms = plain login\nmail_location = maildir:{d}/mail/%u\nmail_uid = mail\nmail_gid = mail\nfirst_valid_uid = 8\nfirst_valid_gid = 8\npassdb {{\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%u {d}/passwd\n}}\nuserdb {{\n  driver = static\n  args = home={d}/mail/%u\n}}\nservice imap-login {{\n  inet_listener imap {{\n    address = 127.0.0.1\n    port = {port}\n  }}\n  inet_listener imaps {{\n    port = 0\n  }}\n}}\n",
            d = d.display()
        );
        std::fs::write(d.join("dovecot.conf"), conf).expect("dovecot.conf");
        let child = Command::new(program)
            .arg("-F")
            .arg("-c")
            .arg(d.join("dovecot.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dovecot");
        let imap: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(s) = std::net::TcpStream::connect(imap) {
                let mut line = String::new();
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = BufReader::new(s).read_line(&mut line);
                if line.starts_with("* OK") {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "dovecot did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Dovecot { dir, child, imap }
    }
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        // SIGTERM lets the master stop its children.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}
