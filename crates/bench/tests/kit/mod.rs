//! Test kit for the bench workloads: starts a real `sluice serve` (or a
//! Dovecot from its own config file) on 127.0.0.1 with a temp directory,
//! creates the domain and users through the real command line, and runs
//! `bench` subcommands through the library, returning their JSON reports.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Parser;

pub const DOMAIN: &str = "example.org";
pub const PASSWORD: &str = "password";

/// Parses `args` as a `bench` command line and returns its JSON report.
pub fn bench(args: &[&str]) -> serde_json::Value {
    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: bench::Command,
    }
    let cli = Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("bad bench arguments {args:?}: {e}"));
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench::report(cli.cmd))
        .unwrap_or_else(|e| panic!("bench {args:?} failed: {e:#}"))
}

/// The `sluice` binary: `$SLUICE_BIN`, else the one cargo built next to
/// this test (`cargo test --workspace` builds it; tests run from
/// `<target>/<profile>/deps/`).
pub fn sluice_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SLUICE_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("<target>/<profile>/deps/test")
        .join("sluice")
}

/// A running Sluice with `users` accounts `user1@example.org` … .
pub struct Sluice {
    pub dir: tempfile::TempDir,
    child: Child,
    pub smtp: SocketAddr,
    pub pop3: SocketAddr,
    pub imap: SocketAddr,
}

impl Sluice {
    pub fn start(users: usize) -> Sluice {
        let bin = sluice_bin();
        assert!(
            bin.exists(),
            "no sluice binary at {} (build it, or set SLUICE_BIN)",
            bin.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("sluice.toml");
        std::fs::write(
            &config,
            format!(
                "hostname = \"mx.example.org\"\ndata_dir = {:?}\n[listen]\nsmtp = \"127.0.0.1:0\"\npop3 = \"127.0.0.1:0\"\nimap = \"127.0.0.1:0\"\n[outbound]\nenabled = false\n[auth_checks]\nspf = \"off\"\ndkim = \"off\"\ndmarc = \"off\"\n[log]\nlevel = \"info\"\n",
                dir.path().join("data")
            ),
        )
        .unwrap();
        let cli = |args: &[&str], stdin: &str| {
            let mut c = Command::new(&bin)
                .arg("--config")
                .arg(&config)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            c.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "sluice {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        // Accounts exist before the server starts: no wait for it to see them.
        cli(&["domain", "add", DOMAIN], "");
        for i in 1..=users {
            cli(
                &[
                    "user",
                    "add",
                    &format!("user{i}@{DOMAIN}"),
                    "--password-stdin",
                ],
                &format!("{PASSWORD}\n"),
            );
        }
        let mut child = Command::new(&bin)
            .args(["serve", "--config"])
            .arg(&config)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let (mut smtp, mut pop3, mut imap) = (None, None, None);
        let deadline = Instant::now() + Duration::from_secs(30);
        while smtp.is_none() || pop3.is_none() || imap.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).expect("sluice did not start");
            if !line.contains("listening") {
                continue;
            }
            let field = |name: &str| {
                let start = line.find(name).unwrap() + name.len();
                line[start..].split_whitespace().next().unwrap().to_string()
            };
            let addr: SocketAddr = field("addr=").parse().unwrap();
            match field("listener=").as_str() {
                "smtp" => smtp = Some(addr),
                "pop3" => pop3 = Some(addr),
                "imap" => imap = Some(addr),
                _ => {}
            }
        }
        Sluice {
            dir,
            child,
            smtp: smtp.unwrap(),
            pop3: pop3.unwrap(),
            imap: imap.unwrap(),
        }
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Dovecot (IMAP only) with accounts user1..userN@example.org, from the
/// shared test kit. `Some` always: a missing Dovecot fails the test there.
pub struct Dovecot;

impl Dovecot {
    #[allow(clippy::new_ret_no_self)]
    pub fn start(users: usize) -> Option<sluice_testkit::Dovecot> {
        let addresses: Vec<String> = (1..=users).map(|i| format!("user{i}@{DOMAIN}")).collect();
        let accounts: Vec<(&str, &str)> =
            addresses.iter().map(|a| (a.as_str(), PASSWORD)).collect();
        Some(sluice_testkit::Dovecot::start(&accounts))
    }
}

/// The number at `path` (`a.b.c`) of a JSON report.
pub fn at(v: &serde_json::Value, path: &str) -> f64 {
    let mut cur = v;
    for part in path.split('.') {
        cur = match part.parse::<usize>() {
            Ok(i) => &cur[i],
            Err(_) => &cur[part],
        };
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("{path} is not a number in {v:#}"))
}
