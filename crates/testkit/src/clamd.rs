//! A real clamd (Debian's `clamav-daemon`) started for one test from its
//! own config and a database of one hash signature, on a Unix socket in a
//! temp directory; stopped when dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The name clamd gives the EICAR test file with this database.
pub const CLAMD_EICAR_NAME: &str = "Test.EICAR-Hash";

/// A running clamd.
pub struct Clamd {
    child: Child,
    /// Where it listens.
    pub socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Clamd {
    /// Starts clamd and waits until it answers on its socket.
    pub fn start() -> Clamd {
        crate::require_program("clamd", "clamav-daemon");
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("db");
        std::fs::create_dir(&db).expect("database dir");
        // MD5 and size of the EICAR file, under a name of our own.
        std::fs::write(
            db.join("test.hdb"),
            format!("44d88612fea8a8f36de82e1278abb02f:68:{CLAMD_EICAR_NAME}\n"),
        )
        .expect("test.hdb");
        let socket = dir.path().join("clamd.sock");
        let conf = dir.path().join("clamd.conf");
        std::fs::write(
            &conf,
            format!(
                "Foreground yes\nLocalSocket {}\nDatabaseDirectory {}\nLogFile {}\nTemporaryDirectory {}\n",
                socket.display(),
                db.display(),
                dir.path().join("clamd.log").display(),
                dir.path().display()
            ),
        )
        .expect("clamd.conf");
        let child = Command::new("clamd")
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start clamd");
        let clamd = Clamd {
            child,
            socket,
            _dir: dir,
        };
        assert!(
            crate::wait_until(Duration::from_secs(60), || {
                std::os::unix::net::UnixStream::connect(&clamd.socket).is_ok()
            }),
            "clamd did not start"
        );
        clamd
    }

    /// The `[scan]` section that makes Sluice scan with this clamd.
    pub fn scan_config(&self) -> String {
        format!(
            "[scan]\nengine = \"clamd\"\nclamd = \"{}\"\n",
            self.socket.display()
        )
    }
}

impl Drop for Clamd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
