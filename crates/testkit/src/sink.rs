//! Postfix's `smtp-sink` on a loopback port: a remote SMTP server that
//! takes mail and writes each transaction to a file, or refuses chosen
//! commands with 4xx (`-r`) or 5xx (`-f`), for outbound tests.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `smtp-sink`; stopped when dropped.
pub struct SmtpSink {
    /// Where it listens.
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
    child: Child,
}

impl SmtpSink {
    /// Starts `smtp-sink` on a free port with extra options (`-r rcpt`,
    /// `-f data`...), dumping transactions into its own directory.
    pub fn start(options: &[&str]) -> SmtpSink {
        SmtpSink::start_on(crate::free_port(), options)
    }

    /// Like [`SmtpSink::start`] on a given port (to bring a destination
    /// back on the port it had).
    pub fn start_on(port: u16, options: &[&str]) -> SmtpSink {
        let program = crate::require_program("smtp-sink", "postfix");
        let dir = tempfile::tempdir().expect("temp dir");
        // The sink drops to `nobody` when started as root: it must be able
        // to write its dumps.
        let mut perms = std::fs::metadata(dir.path()).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o777);
        std::fs::set_permissions(dir.path(), perms).unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut cmd = Command::new(program);
        if is_root() {
            cmd.args(["-u", "nobody"]);
        }
        let template = format!("{}/msg.", dir.path().display());
        let child = cmd
            .args(["-d", &template, "-h", "sink.test"])
            .args(options)
            .arg(format!("127.0.0.1:{port}"))
            .arg("64")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start smtp-sink");
        assert!(
            crate::wait_until(Duration::from_secs(10), || crate::accepts(addr)),
            "smtp-sink did not listen on {addr}"
        );
        SmtpSink { addr, dir, child }
    }

    /// The transactions received so far, each as written by the sink
    /// (envelope lines, then the message). The sink creates a dump at MAIL
    /// and closes it after the final dot, so a dump it still holds open is
    /// a transaction in progress and is left out.
    pub fn messages(&self) -> Vec<String> {
        // `/proc` names the open dumps by their canonical paths.
        let dir = self.dir.path().canonicalize().expect("sink directory");
        let open = self.open_files();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.retain(|f| !open.contains(f));
        files.sort();
        files
            .iter()
            .filter_map(|f| std::fs::read(f).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect()
    }

    /// The files the sink process has open, from `/proc/PID/fd`.
    fn open_files(&self) -> Vec<PathBuf> {
        let fds = format!("/proc/{}/fd", self.child.id());
        std::fs::read_dir(fds)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter_map(|e| std::fs::read_link(e.path()).ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
