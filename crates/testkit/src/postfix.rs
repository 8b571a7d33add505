//! A real Postfix SMTP server on loopback for tests, in one of three roles:
//! an MX that offers STARTTLS with the certificate the test gives, accepts
//! mail for any recipient and discards it; a sending MTA that relays
//! whatever loopback clients give it to the server under test; or a final
//! destination that delivers every message into one Maildir. Its own
//! config and queue in a temp directory; the system's `/etc/postfix` is
//! left as it is.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A running Postfix (`postfix -c DIR start`), stopped when dropped.
pub struct PostfixMx {
    /// Where its SMTP server listens.
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
    program: PathBuf,
}

impl PostfixMx {
    /// Starts Postfix as the MX `hostname` on a free loopback port,
    /// offering STARTTLS with `cert_chain_pem` (leaf first) and `key_pem`.
    pub fn start(hostname: &str, cert_chain_pem: &str, key_pem: &str) -> PostfixMx {
        PostfixMx::launch(
            hostname,
            "relay_domains = static:ALL\n\
             relay_transport = discard\n\
             default_transport = discard\n\
             smtpd_tls_security_level = may\n\
             smtpd_tls_chain_files = {d}/key.pem, {d}/cert.pem\n\
             smtpd_tls_loglevel = 1\n",
            Some((cert_chain_pem, key_pem)),
        )
    }

    /// Starts Postfix as the MTA `hostname` on a free loopback port,
    /// relaying all mail from loopback clients to `next_hop` (the server
    /// under test) in clear text, as a sending site's MTA does.
    pub fn relaying_to(hostname: &str, next_hop: SocketAddr) -> PostfixMx {
        PostfixMx::launch(
            hostname,
            &format!(
                "relayhost = [{}]:{}\n\
                 smtp_tls_security_level = none\n\
                 smtp_helo_name = {hostname}\n",
                next_hop.ip(),
                next_hop.port()
            ),
            None,
        )
    }

    /// Starts Postfix as the final destination `hostname` on a free
    /// loopback port: every recipient's mail is delivered into one Maildir
    /// ([`PostfixMx::delivered`]). `extra` is appended to `main.cf` (for
    /// `smtpd_authorized_xclient_hosts` and the like).
    pub fn delivering(hostname: &str, extra: &str) -> PostfixMx {
        PostfixMx::launch(
            hostname,
            &format!(
                "virtual_mailbox_domains = static:ALL\n\
                 virtual_transport = virtual\n\
                 virtual_mailbox_base = {{d}}/mail\n\
                 virtual_mailbox_maps = static:box/\n\
                 virtual_minimum_uid = 8\n\
                 virtual_uid_maps = static:8\n\
                 virtual_gid_maps = static:8\n\
                 default_transport = error\n\
                 {extra}\n"
            ),
            None,
        )
    }

    /// The messages delivered so far (with [`PostfixMx::delivering`]), in
    /// the order of their file names.
    pub fn delivered(&self) -> Vec<Vec<u8>> {
        let dir = self.path("mail/box/new");
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files.iter().filter_map(|f| std::fs::read(f).ok()).collect()
    }

    /// Messages in Postfix's queue (incoming, active, deferred, hold,
    /// maildrop): what it accepted and has not delivered yet.
    pub fn queued(&self) -> usize {
        fn count(dir: &std::path::Path) -> usize {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return 0;
            };
            entries
                .filter_map(|e| e.ok())
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() {
                        count(&p)
                    } else {
                        1
                    }
                })
                .sum()
        }
        ["incoming", "active", "deferred", "hold", "maildrop"]
            .iter()
            .map(|q| count(&self.path("queue").join(q)))
            .sum()
    }

    /// Writes the config (the common part, then `role` with `{d}` standing
    /// for the directory) and starts Postfix.
    fn launch(hostname: &str, role: &str, identity: Option<(&str, &str)>) -> PostfixMx {
        let postfix = crate::require_program("postfix", "postfix");
        let dir = tempfile::tempdir().expect("temp dir");
        let port = crate::free_port();
        let mx = PostfixMx {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
            program: postfix.clone(),
        };
        let d = mx.dir.path();
        // Postfix's daemons drop to the `postfix` user: they must reach
        // their queue and data directories.
        set_mode(d, 0o755);
        for sub in ["queue", "data", "mail"] {
            std::fs::create_dir_all(d.join(sub)).expect("postfix dirs");
        }
        chown_postfix(&d.join("data"));
        // virtual(8) delivers as the `mail` user (uid 8).
        let out = Command::new("chown")
            .arg("mail:mail")
            .arg(d.join("mail"))
            .output()
            .expect("chown");
        assert!(
            out.status.success(),
            "chown mail: the test must run as root"
        );
        if let Some((cert_chain_pem, key_pem)) = identity {
            std::fs::write(d.join("cert.pem"), cert_chain_pem).expect("cert");
            std::fs::write(d.join("key.pem"), key_pem).expect("key");
            set_mode(&d.join("key.pem"), 0o600);
        }
        let main_cf = format!(
            "compatibility_level = 3.6\n\
             queue_directory = {d}/queue\n\
             data_directory = {d}/data\n\
             mail_owner = postfix\n\
             setgid_group = postdrop\n\
             inet_interfaces = 127.0.0.1\n\
             inet_protocols = ipv4\n\
             myhostname = {hostname}\n\
             mydestination =\n\
             mynetworks = 127.0.0.0/8\n\
             local_recipient_maps =\n\
             disable_dns_lookups = yes\n\
             smtpd_peername_lookup = no\n\
             smtpd_recipient_restrictions = permit\n\
             maillog_file = {d}/maillog\n\
             maillog_file_prefixes = {d}\n\
             biff = no\n\
             {role}",
            d = d.display(),
            role = role.replace("{d}", &d.display().to_string()),
        );
        std::fs::write(d.join("main.cf"), main_cf).expect("main.cf");
        // Debian's master.cf, with chroot off and smtpd on our port.
        let master =
            std::fs::read_to_string("/etc/postfix/master.cf").expect("/etc/postfix/master.cf");
        let mut out = String::new();
        for line in master.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if line.starts_with('#') || line.starts_with([' ', '\t']) || fields.len() < 8 {
                out.push_str(line);
            } else {
                let mut f: Vec<String> = fields.iter().map(|s| s.to_string()).collect();
                if f[0] == "smtp" && f[1] == "inet" {
                    f[0] = mx.addr.to_string();
                }
                f[4] = "n".into();
                out.push_str(&f.join(" "));
            }
            out.push('\n');
        }
        std::fs::write(d.join("master.cf"), out).expect("master.cf");
        let _ = Command::new(&postfix)
            .arg("-c")
            .arg(d)
            .arg("check")
            .output();
        let started = Command::new(&postfix)
            .arg("-c")
            .arg(d)
            .arg("start")
            .output()
            .expect("run postfix");
        assert!(
            started.status.success(),
            "postfix did not start: {}{}",
            String::from_utf8_lossy(&started.stdout),
            String::from_utf8_lossy(&started.stderr)
        );
        let addr = mx.addr;
        if !crate::wait_until(Duration::from_secs(20), || crate::accepts(addr)) {
            panic!("postfix does not listen on {addr}:\n{}", mx.log());
        }
        mx
    }

    /// Postfix's log (for a failing test's message, or to check what it saw).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path("maillog")).unwrap_or_default()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn set_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn chown_postfix(path: &std::path::Path) {
    let out = Command::new("chown")
        .arg("postfix")
        .arg(path)
        .output()
        .expect("chown");
    assert!(
        out.status.success(),
        "chown postfix: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Drop for PostfixMx {
    fn drop(&mut self) {
        let _ = Command::new(&self.program)
            .arg("-c")
            .arg(self.dir.path())
            .arg("stop")
            .output();
    }
}
