//! A real Postfix SMTP server on loopback for tests, in one of two roles:
//! an MX that offers STARTTLS with the certificate the test gives, accepts
//! mail for any recipient and discards it; or a sending MTA that relays
//! whatever loopback clients give it to the server under test. Its own
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
        for sub in ["queue", "data"] {
            std::fs::create_dir_all(d.join(sub)).expect("postfix dirs");
        }
        chown_postfix(&d.join("data"));
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
