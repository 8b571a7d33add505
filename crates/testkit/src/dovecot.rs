//! A real Dovecot IMAP server on loopback for tests: its own config in a
//! temp directory, plain-text passwords from a passwd file, Maildir under
//! the temp directory owned by the `mail` user. IMAP, and POP3 when asked
//! for; no TLS (the clients are on loopback).

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
    /// Where its POP3 listener is, when started with [`Dovecot::start_with_pop3`].
    pub pop3: Option<SocketAddr>,
}

impl Dovecot {
    /// Starts Dovecot with these `(address, password)` accounts. Must run
    /// as root (mail belongs to the `mail` user).
    pub fn start(accounts: &[(&str, &str)]) -> Dovecot {
        Dovecot::launch(accounts, false)
    }

    /// Like [`Dovecot::start`], with a POP3 listener too (Debian's
    /// `dovecot-pop3d`).
    pub fn start_with_pop3(accounts: &[(&str, &str)]) -> Dovecot {
        crate::require_program("dovecot", "dovecot-pop3d");
        assert!(
            std::path::Path::new("/usr/lib/dovecot/pop3").exists(),
            "Dovecot's POP3 server is not installed: apt-get install dovecot-pop3d (./test.sh installs it)"
        );
        Dovecot::launch(accounts, true)
    }

    /// Puts `message` in the inbox of `address` as a new Maildir file, as
    /// a delivery agent would.
    pub fn deliver(&self, address: &str, message: &[u8]) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let user = self.dir.path().join("mail").join(address);
        for sub in ["cur", "new", "tmp"] {
            std::fs::create_dir_all(user.join(sub)).expect("maildir");
        }
        let name = format!(
            "{}.M{}P{}.testkit",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs(),
            SEQ.fetch_add(1, Ordering::SeqCst),
            std::process::id()
        );
        let tmp = user.join("tmp").join(&name);
        std::fs::write(&tmp, message).expect("write the message");
        std::fs::rename(&tmp, user.join("new").join(&name)).expect("move into new/");
        let ok = Command::new("chown")
            .arg("-R")
            .arg("mail:mail")
            .arg(&user)
            .status()
            .expect("chown");
        assert!(ok.success(), "chown mail: the test must run as root");
    }

    fn launch(accounts: &[(&str, &str)], with_pop3: bool) -> Dovecot {
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
        let pop3_port = with_pop3.then(crate::free_port);
        let protocols = if with_pop3 { "imap pop3" } else { "imap" };
        let mut conf = format!(
            "base_dir = {d}/run\nstate_dir = {d}/state\nlog_path = {d}/dovecot.log\nprotocols = {protocols}\nlisten = 127.0.0.1\nssl = no\ndisable_plaintext_auth = no\nauth_mechanisms = plain login\nmail_location = maildir:{d}/mail/%u\nmail_uid = mail\nmail_gid = mail\nfirst_valid_uid = 8\nfirst_valid_gid = 8\npassdb {{\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%u {d}/passwd\n}}\nuserdb {{\n  driver = static\n  args = home={d}/mail/%u\n}}\nservice imap-login {{\n  inet_listener imap {{\n    address = 127.0.0.1\n    port = {port}\n  }}\n  inet_listener imaps {{\n    port = 0\n  }}\n}}\n",
            d = d.display()
        );
        if let Some(p) = pop3_port {
            conf.push_str(&format!(
                "service pop3-login {{\n  inet_listener pop3 {{\n    address = 127.0.0.1\n    port = {p}\n  }}\n  inet_listener pop3s {{\n    port = 0\n  }}\n}}\npop3_uidl_format = %08Xu%08Xv\n"
            ));
        }
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
        let pop3 = pop3_port.map(|p| SocketAddr::from(([127, 0, 0, 1], p)));
        if let Some(addr) = pop3 {
            assert!(
                crate::wait_until(Duration::from_secs(20), || crate::accepts(addr)),
                "dovecot's POP3 listener did not start"
            );
        }
        Dovecot {
            dir,
            child,
            imap,
            pop3,
        }
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
