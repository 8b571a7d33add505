//! A running `sluice serve` on 127.0.0.1 with a temp data dir and
//! listeners on port 0, driven through the real command line.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use crate::{sluice_bin, wait_until, ChildLog};

/// The mail domain every test server has.
pub const DOMAIN: &str = "example.org";
/// The password [`Server::add_user`] gives.
pub const PASSWORD: &str = "correct horse";

/// A running server and its data directory.
pub struct Server {
    pub dir: tempfile::TempDir,
    extra: String,
    /// `[listen]` keys set to fixed addresses, replacing the defaults.
    listen: Vec<(String, String)>,
    child: Option<Child>,
    log: ChildLog,
    pub smtp: SocketAddr,
    pub pop3: SocketAddr,
    pub pop3s: SocketAddr,
    pub imap: SocketAddr,
    pub imaps: SocketAddr,
    /// Every listener by its name in the log (`smtp`, `submission`,
    /// `http`, ...), for listeners without a field of their own.
    pub listeners: std::collections::HashMap<String, SocketAddr>,
    /// The server's store when it is in PostgreSQL ([`STORE_ENV`]): the
    /// server and the database's name.
    pub(crate) postgres: Option<(crate::Postgres, String)>,
}

/// Set to `postgres`, every server of the kit keeps its store in a
/// PostgreSQL server of its own rather than SQLite (unless the test gives
/// a `[store]` section itself): `./test.sh` runs the protocol suites a
/// second time this way, so both back ends answer the same clients.
pub const STORE_ENV: &str = "SLUICE_TEST_STORE";

impl Server {
    /// A server with the default settings and domain `example.org`.
    pub fn start() -> Server {
        Server::start_with("")
    }

    /// A server whose config gets `extra` appended (more sections).
    pub fn start_with(extra: &str) -> Server {
        Server::start_prepared(extra, |_| {})
    }

    /// [`Server::start_with`], after `prepare` has had the server's temp
    /// directory (the data directory is `data` in it).
    pub fn start_prepared(extra: &str, prepare: impl FnOnce(&Path)) -> Server {
        Server::start_full(extra, &[], prepare)
    }

    /// [`Server::start_with`], with these `[listen]` keys set to fixed
    /// addresses (`("https", "127.0.0.1:8443")`), added to or replacing
    /// the kit's listeners on port 0.
    pub fn start_listening(extra: &str, listen: &[(&str, &str)]) -> Server {
        Server::start_full(extra, listen, |_| {})
    }

    /// A server whose domain and `accounts` (address, password) are
    /// created through the command line before it starts, so it serves
    /// them from the first connection without waiting for it to see them.
    pub fn start_seeded(extra: &str, accounts: &[(&str, &str)]) -> Server {
        let mut server = Server::unstarted(extra, &[], |_| {});
        server.cli_ok(&["domain", "add", DOMAIN]);
        for (address, password) in accounts {
            server.add_account(address, password);
        }
        server.spawn();
        server
    }

    /// A server sharing a store that another one set up (a second node on
    /// one PostgreSQL database): nothing is added to the store.
    pub fn start_joining(extra: &str) -> Server {
        let mut server = Server::unstarted(extra, &[], |_| {});
        server.spawn();
        server
    }

    /// Runs `sluice serve` on a config with `extra`, which must make it
    /// exit with an error within 30 s (it is killed and the test fails if
    /// it serves instead); what it wrote to stderr.
    pub fn start_failing(extra: &str) -> String {
        let server = Server::unstarted(extra, &[], |_| {});
        let mut child = server.serve_command().spawn().expect("start sluice");
        let mut stderr = child.stderr.take().expect("stderr");
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        let mut status = None;
        let exited = wait_until(Duration::from_secs(30), || {
            status = child.try_wait().expect("wait for sluice");
            status.is_some()
        });
        if !exited {
            let _ = child.kill();
            let _ = child.wait();
        }
        let text = reader.join().expect("stderr reader");
        assert!(exited, "sluice kept running:\n{text}");
        assert!(
            !status.expect("exited").success(),
            "sluice exited successfully:\n{text}"
        );
        text
    }

    fn start_full(extra: &str, listen: &[(&str, &str)], prepare: impl FnOnce(&Path)) -> Server {
        let mut server = Server::unstarted(extra, listen, prepare);
        server.spawn();
        server.cli_ok(&["domain", "add", DOMAIN]);
        server
    }

    /// The server's directory and config, before `serve` runs.
    fn unstarted(extra: &str, listen: &[(&str, &str)], prepare: impl FnOnce(&Path)) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        prepare(dir.path());
        let unset: SocketAddr = "0.0.0.0:0".parse().unwrap();
        let mut extra = extra.to_string();
        let on_postgres = std::env::var(STORE_ENV).is_ok_and(|v| v == "postgres");
        let postgres = (on_postgres && !extra.contains("[store]")).then(|| {
            let pg = crate::Postgres::start();
            let url = pg.create_database();
            // Released blobs go at once, as on SQLite: one node, and
            // tests that watch them go.
            extra.push_str(&format!(
                "\n[store]\nbackend = \"postgres\"\nurl = \"{url}\"\nrelease_grace_secs = 0\n"
            ));
            let db = url.rsplit('/').next().expect("a database name").to_string();
            (pg, db)
        });
        let server = Server {
            dir,
            extra,
            listen: listen
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            child: None,
            log: ChildLog::default(),
            smtp: unset,
            pop3: unset,
            pop3s: unset,
            imap: unset,
            imaps: unset,
            listeners: Default::default(),
            postgres,
        };
        server.write_config();
        server
    }

    /// The config file `serve` and the command line read.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("sluice.toml")
    }

    /// The data directory (`data_dir` in the config).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn write_config(&self) {
        // Tests that send mail out configure [outbound] and [dns] with
        // their own stand-ins; the others keep it off, so nothing asks the
        // machine's DNS servers.
        let outbound = if self.extra.contains("[outbound") {
            ""
        } else {
            "[outbound]\nenabled = false\n"
        };
        // SPF, DKIM and DMARC ask DNS too: only tests with a DNS server of
        // their own turn them on.
        let outbound = if self.extra.contains("[auth_checks") {
            outbound.to_string()
        } else {
            format!("{outbound}[auth_checks]\nspf = \"off\"\ndkim = \"off\"\ndmarc = \"off\"\n")
        };
        let mut listen: Vec<(String, String)> = [
            "smtp",
            "pop3",
            "pop3s",
            "imap",
            "imaps",
            "managesieve",
            "http",
            "https",
            "submission",
            "submissions",
            "metrics",
        ]
        .iter()
        .map(|k| (k.to_string(), "127.0.0.1:0".to_string()))
        .collect();
        for (key, addr) in &self.listen {
            match listen.iter_mut().find(|(k, _)| k == key) {
                Some(entry) => entry.1 = addr.clone(),
                None => listen.push((key.clone(), addr.clone())),
            }
        }
        let listen: String = listen
            .iter()
            .map(|(k, v)| format!("{k} = \"{v}\"\n"))
            .collect();
        let text = format!(
            "hostname = \"mx.example.org\"\ndata_dir = {:?}\n[listen]\n{listen}[log]\nlevel = \"info\"\n{outbound}{}\n",
            self.data_dir(),
            self.extra
        );
        std::fs::write(self.config_path(), text).unwrap();
    }

    /// `sluice serve` on this server's config, with only stderr kept.
    fn serve_command(&self) -> Command {
        let mut command = Command::new(sluice_bin());
        command
            .args(["serve", "--config"])
            .arg(self.config_path())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }

    fn spawn(&mut self) {
        let mut child = self.serve_command().spawn().expect("start sluice");
        let started = self.log.follow(child.stderr.take().unwrap(), |line| {
            line.contains("listening") || line.contains("sluice started")
        });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = started
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("sluice did not start:\n{}", self.log()));
            if line.contains("sluice started") {
                break;
            }
            let field = |name: &str| {
                let start = line.find(name).unwrap() + name.len();
                line[start..].split_whitespace().next().unwrap().to_string()
            };
            let addr: SocketAddr = field("addr=").parse().unwrap();
            let name = field("listener=");
            match name.as_str() {
                "smtp" => self.smtp = addr,
                "pop3" => self.pop3 = addr,
                "pop3s" => self.pop3s = addr,
                "imap" => self.imap = addr,
                "imaps" => self.imaps = addr,
                _ => {}
            }
            self.listeners.insert(name, addr);
        }
    }

    /// The address of the listener named `name` in the log; panics if the
    /// server has no such listener.
    pub fn addr(&self, name: &str) -> SocketAddr {
        *self
            .listeners
            .get(name)
            .unwrap_or_else(|| panic!("no listener {name}: {:?}", self.listeners))
    }

    /// Everything the server logged so far.
    pub fn log(&self) -> String {
        self.log.text()
    }

    /// Fails the test if the server has logged a panic (a request
    /// handler that panicked: the client saw a cut or failed answer).
    pub fn assert_no_panic(&self) {
        let log = self.log();
        assert!(
            !log.contains("panicked"),
            "the server panicked:\n{}",
            log.lines()
                .filter(|l| l.contains("panicked"))
                .take(5)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    /// The running server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Runs `sluice ARGS` on this server's config, with `stdin` piped in.
    pub fn cli(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = Command::new(sluice_bin())
            .arg("--config")
            .arg(self.config_path())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// Runs a command that must succeed; returns its stdout.
    pub fn cli_ok(&self, args: &[&str]) -> String {
        let out = self.cli(args, "");
        assert!(
            out.status.success(),
            "sluice {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Adds `local@example.org` with [`PASSWORD`]; returns the address.
    pub fn add_user(&self, local: &str) -> String {
        let address = format!("{local}@{DOMAIN}");
        self.add_account(&address, PASSWORD);
        // The server picks up directory edits by polling; wait until it has.
        assert!(
            wait_until(Duration::from_secs(5), || self.rcpt_accepted(&address)),
            "server did not see the new user {address}"
        );
        address
    }

    /// `sluice user add` for `address` with `password`.
    fn add_account(&self, address: &str, password: &str) {
        let out = self.cli(
            &["user", "add", address, "--password-stdin"],
            &format!("{password}\n"),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Whether the SMTP server accepts `address` as a recipient now.
    pub fn rcpt_accepted(&self, address: &str) -> bool {
        use std::io::Read;
        let Ok(mut s) = std::net::TcpStream::connect(self.smtp) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let cmds = format!("HELO probe\r\nMAIL FROM:<>\r\nRCPT TO:<{address}>\r\nQUIT\r\n");
        if s.write_all(cmds.as_bytes()).is_err() {
            return false;
        }
        let mut replies = String::new();
        let _ = s.read_to_string(&mut replies);
        replies.lines().nth(3).is_some_and(|l| l.starts_with("250"))
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        signal(child.id(), "TERM");
        child.wait().unwrap()
    }

    /// Waits for the server to exit (after a signal sent elsewhere).
    pub fn wait_exit(&mut self) -> ExitStatus {
        self.child.take().expect("running").wait().unwrap()
    }

    /// Kills the server without warning (SIGKILL).
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Starts the server again on the same data (new ports).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop it first");
        self.spawn();
    }

    fn status_kb(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Resident memory now, in KiB.
    pub fn rss_kb(&self) -> u64 {
        self.status_kb("VmRSS:")
    }

    /// Peak resident memory so far, in KiB.
    pub fn peak_rss_kb(&self) -> u64 {
        self.status_kb("VmHWM:")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Sends signal `name` (`TERM`, `HUP`, ...) to process `pid` with kill(1).
pub fn signal(pid: u32, name: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(ok.success());
}
