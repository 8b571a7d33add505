//! DNSBL in the SMTP gate: `sluice dnsbl serve` answers on loopback and a
//! `sluice serve` checks connecting clients against it (clients connect
//! from chosen 127.0.0.0/8 addresses).

use sluice_testkit as kit;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kit::{python, ChildLog, Server};

/// A `sluice dnsbl serve` process, stopped on drop.
struct DnsblServer {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for DnsblServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn dnsbl_server(list: &str) -> DnsblServer {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bl.zone");
    std::fs::write(&file, list).unwrap();
    let mut child = Command::new(kit::sluice_bin())
        .args(["dnsbl", "serve", "--listen", "127.0.0.1:0", "--zone"])
        .arg(format!("bl.test={}", file.display()))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = ChildLog::default();
    let listening = log.follow(child.stderr.take().unwrap(), |line| line.contains("addr="));
    let line = listening
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("the DNSBL server did not start:\n{}", log.text()));
    let at = line.find("addr=").unwrap();
    let addr = line[at + 5..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    DnsblServer {
        child,
        addr,
        _dir: dir,
    }
}

const LIST: &str =
    ":127.0.0.2:Listed in the test list, see http://bl.test/?$\n127.0.0.2\n127.0.0.66\n";

/// Connects from `source` and tries a normal and a postmaster recipient;
/// prints the greeting code and both RCPT replies.
const PROBE: &str = r#"
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), source_address=(sys.argv[2], 0))
f = s.makefile("rb")
def reply():
    while True:
        l = f.readline().decode()
        if not l:
            return "closed"
        if l[3] == " ":
            return l.strip()
greeting = reply()
print(greeting[:3])
if greeting.startswith("220"):
    s.sendall(("EHLO c\r\nMAIL FROM:<a@remote.test>\r\nRCPT TO:<%s>\r\nRCPT TO:<postmaster@example.org>\r\n" % sys.argv[3]).encode())
    reply(); reply()
    print(reply()); print(reply()[:9])
"#;

fn probe(server: &Server, source: &str, to: &str) -> Vec<String> {
    python(PROBE, &[&server.smtp.to_string(), source, to])
        .lines()
        .map(str::to_string)
        .collect()
}

fn config(dns: SocketAddr, mode: &str, extra: &str) -> String {
    format!(
        "[dnsbl]\nresolver = \"{dns}\"\nzones = [{{ name = \"bl.test\", mode = \"{mode}\" }}]\n{extra}"
    )
}

#[test]
fn listed_clients_are_refused_at_rcpt_with_the_reason_and_postmaster_stays_reachable() {
    let dns = dnsbl_server(LIST);
    for mode in ["bitmap", "classic"] {
        let server = Server::start_with(&config(dns.addr, mode, ""));
        let user = server.add_user("guarded");
        let listed = probe(&server, "127.0.0.2", &user);
        assert_eq!(listed[0], "220", "{mode}");
        assert!(
            listed[1].starts_with("554 5.7.1 Listed in the test list"),
            "{mode}: {listed:?}"
        );
        assert!(
            listed[1].contains("127.0.0.2"),
            "$ is the client address: {listed:?}"
        );
        assert_eq!(
            listed[2], "250 2.1.5",
            "{mode}: postmaster is always reachable"
        );
        let clean = probe(&server, "127.0.0.3", &user);
        assert_eq!(clean[1], "250 2.1.5 Recipient OK", "{mode}");
        assert!(
            server.log().contains("zones=bl.test"),
            "the listing is logged"
        );
        // The look-ups show in the metrics: the first for each client was
        // a query.
        let metrics = python(
            "import sys, urllib.request\nprint(urllib.request.urlopen('http://%s/metrics' % sys.argv[1]).read().decode())",
            &[&server.addr("metrics").to_string()],
        );
        assert!(
            metrics.contains("sluice_dnsbl_lookups_total{cache=\"miss\"}"),
            "{metrics}"
        );
    }
}

#[test]
fn reject_at_connect_and_the_allow_list() {
    let dns = dnsbl_server(LIST);
    let server = Server::start_with(&config(
        dns.addr,
        "bitmap",
        "reject_at_connect = true\nallow = [\"127.0.0.66/32\"]\n",
    ));
    let user = server.add_user("early");
    assert_eq!(probe(&server, "127.0.0.2", &user), ["554"]);
    // Listed too, but allowed: never checked.
    let allowed = probe(&server, "127.0.0.66", &user);
    assert_eq!(allowed[1], "250 2.1.5 Recipient OK");
}
