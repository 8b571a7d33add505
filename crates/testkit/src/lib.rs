//! Test support shared by Sluice's crates.
//!
//! [`Server`] is the real `sluice serve` on loopback with a temp data
//! dir, driven through its command line; [`python`], [`swaks`] and the
//! rest of `tools` are the independent clients tests talk to it with.
//! Tests talk to real servers on loopback only. This crate holds what
//! several crates' tests need to start and wait for such servers: a free
//! port, polling a condition with a deadline, and [`Dns`], a real
//! authoritative DNS server (`nsd` from Debian) serving zones the test
//! writes, so that MX, TXT, TLSA and the rest never come from the
//! system resolver or the internet; [`PostfixMx`], a real Postfix
//! as the MX that outbound mail is sent to; and [`Pebble`], a real ACME
//! CA that issues certificates after validating challenges; [`StandInMx`],
//! an MX that holds messages unanswered on one port and takes them on
//! another, to tell which node sent what.
#![forbid(unsafe_code)]

mod bin;
mod browser;
mod certs;
mod clamd;
mod dns;
mod dovecot;
mod log;
mod outbound;
mod pebble;
mod postfix;
mod postgres;
mod server;
mod sink;
mod stand_in_mx;
mod store;
mod tools;

pub use bin::sluice_bin;
pub use browser::browser;
pub use certs::{make_server_certificate, spki_sha256_hex};
pub use clamd::{Clamd, CLAMD_EICAR_NAME};
pub use dns::{Dns, Zone};
pub use dovecot::Dovecot;
pub use log::ChildLog;
pub use outbound::outbound_config;
pub use pebble::{Pebble, PebbleOptions};
pub use postfix::PostfixMx;
pub use postgres::{Postgres, PG_USER};
pub use server::{signal, Server, DOMAIN, PASSWORD, STORE_ENV};
pub use sink::SmtpSink;
pub use stand_in_mx::StandInMx;
pub use tools::{
    addr_arg, debian_python, imap_login, path_arg, python, python_spawn, swaks, venv_dir,
    venv_python,
};

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::time::{Duration, Instant};

/// A port on 127.0.0.1 free for both TCP and UDP right now. Another
/// process may take it before the caller binds it; servers that can bind
/// port 0 themselves should do that instead.
pub fn free_port() -> u16 {
    loop {
        let tcp = TcpListener::bind("127.0.0.1:0").expect("bind a TCP port on loopback");
        let port = tcp.local_addr().expect("local address").port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// How many times longer than asked [`wait_until`] waits:
/// `SLUICE_TEST_PATIENCE` (a whole number), 3 by default. A limit is a
/// bound on a failure, not an expectation: a condition that holds ends
/// the wait at once, so patience costs time only when a test fails, and a
/// busy machine (a CI host running two suites) gets room.
pub fn patience() -> u32 {
    std::env::var("SLUICE_TEST_PATIENCE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(3)
}

/// Polls `f` every 20 ms until it holds or `limit` (times [`patience`])
/// passes; whether it held.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit * patience();
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// Whether something accepts TCP connections at `addr`.
pub fn accepts(addr: SocketAddr) -> bool {
    std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// Whether the tests run under CI (`CI=true`): a peer tool that is
/// missing is then a failure, never a reason to skip.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The path of a peer program the tests need, or a panic that says which
/// Debian package provides it (`.ci/run` installs them all).
pub fn require_program(name: &str, package: &str) -> std::path::PathBuf {
    for dir in ["/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/bin"] {
        let p = std::path::Path::new(dir).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!("`{name}` is not installed: apt-get install {package} (./test.sh installs it)");
}
