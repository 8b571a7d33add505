//! A real PostgreSQL server on loopback for tests (Debian's
//! `postgresql-15`): `initdb` into a temp directory, the postmaster run
//! directly as a child on a free port, no system service. Trust
//! authentication for the `sluice` role, on loopback only. Stopped when
//! dropped; [`Postgres::stop`] and [`Postgres::restart`] let failure tests
//! take it away mid-run and bring it back on the same port and data.
//! [`Postgres::start_with_tls`] turns `ssl` on, with a certificate made
//! at run time.

use std::fs::Permissions;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A running PostgreSQL; stopped when dropped.
pub struct Postgres {
    /// Its directory: `data/` (the cluster), `socket/`, `log`.
    pub dir: tempfile::TempDir,
    bin: PathBuf,
    child: Option<Child>,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    /// With TLS on: the CA (PEM) its certificate, for 127.0.0.1 and
    /// `localhost`, chains to.
    pub ca_file: Option<PathBuf>,
}

/// The role every test connects as (a superuser of its own cluster).
pub const PG_USER: &str = "sluice";

impl Postgres {
    /// Makes a new cluster and starts it. As root, the server runs as the
    /// `postgres` user (PostgreSQL refuses to run as root).
    pub fn start() -> Postgres {
        Postgres::start_as(false)
    }

    /// [`Postgres::start`] with `ssl = on` (clients choose; plain
    /// connections are still taken) and a server certificate signed by a
    /// CA made for it, in [`Postgres::ca_file`].
    pub fn start_with_tls() -> Postgres {
        Postgres::start_as(true)
    }

    fn start_as(tls: bool) -> Postgres {
        let bin = bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("sluice-pg.")
            .tempdir()
            .expect("temp dir");
        std::fs::create_dir(dir.path().join("socket")).expect("socket dir");
        let ca_file = tls.then(|| {
            let certs = dir.path().join("tls");
            std::fs::create_dir(&certs).expect("tls dir");
            crate::make_server_certificate(&certs);
            // PostgreSQL refuses a key others may read.
            std::fs::set_permissions(certs.join("key.pem"), Permissions::from_mode(0o600))
                .expect("chmod key");
            certs.join("ca.pem")
        });
        if is_root() {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(ok.success(), "chown postgres");
        }
        let out = as_server_user(&bin.join("initdb"))
            .arg("-D")
            .arg(dir.path().join("data"))
            .args(["-U", PG_USER, "--auth=trust", "-E", "UTF8"])
            .args(["--locale=C.UTF-8", "--no-sync", "--no-instructions"])
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut pg = Postgres {
            dir,
            bin,
            child: None,
            port: crate::free_port(),
            ca_file,
        };
        pg.restart();
        pg
    }

    /// A connection URL for database `db` (made by [`Postgres::create_database`]).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://{PG_USER}@127.0.0.1:{}/{db}", self.port)
    }

    /// Makes an empty database with a name of its own and returns its URL,
    /// so tests sharing one server never see each other's tables.
    pub fn create_database(&self) -> String {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let name = format!("t{}", SEQ.fetch_add(1, Ordering::SeqCst));
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        self.url(&name)
    }

    /// Runs `sql` in database `db` with `psql`, failing the test on error;
    /// what it printed (unaligned, tuples only).
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-U", PG_USER, "-d", db])
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-c")
            .arg(sql)
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql {sql:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Stops the server at once, as a crash would (SIGQUIT: no checkpoint;
    /// committed transactions survive in its log).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-QUIT", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same data and port (after
    /// [`Postgres::stop`]), and waits until it takes connections.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        let log = std::fs::File::create(self.dir.path().join("log")).expect("log file");
        let mut postgres = as_server_user(&self.bin.join("postgres"));
        if self.ca_file.is_some() {
            let certs = self.dir.path().join("tls");
            postgres
                .args(["-c", "ssl=on", "-c"])
                .arg(format!(
                    "ssl_cert_file={}",
                    certs.join("cert.pem").display()
                ))
                .arg("-c")
                .arg(format!("ssl_key_file={}", certs.join("key.pem").display()));
        }
        let child = postgres
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                self.dir.path().join("socket").display()
            ))
            // Durability as in production (fsync, synchronous_commit on):
            // tests of acknowledged mail must see what a real site sees.
            .args(["-c", "max_connections=200", "-c", "shared_buffers=32MB"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start postgres");
        self.child = Some(child);
        let ready = crate::wait_until(Duration::from_secs(30), || {
            Command::new(self.bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .status()
                .is_ok_and(|s| s.success())
        });
        assert!(
            ready,
            "postgres did not start: {}",
            std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
        );
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The newest PostgreSQL installed under /usr/lib/postgresql.
fn bin_dir() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!("PostgreSQL is not installed: apt-get install postgresql-15 (./test.sh installs it)")
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// `program`, run as the `postgres` user when we are root.
fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=postgres", "--regid=postgres", "--clear-groups"])
            .arg(program);
        c
    } else {
        Command::new(program)
    }
}
