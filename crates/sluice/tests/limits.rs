//! Limits a hostile client cannot stretch: the IMAP login deadline and
//! the SMTP data rate hold however slowly bytes trickle in, and a listener
//! at its connection limit turns newcomers away with a clear answer.

use sluice_testkit as kit;

use kit::{python, Server};

/// Sends a byte every `gap` seconds until the server closes; prints the
/// seconds that took and the last line the server sent.
const TRICKLE: &str = r#"
import socket, sys, time
addr, gap, prelude = sys.argv[1], float(sys.argv[2]), sys.argv[3].encode().decode("unicode_escape").encode()
h, p = addr.rsplit(":", 1)
s = socket.create_connection((h, int(p)), timeout=60)
s.sendall(prelude)
start = time.time()
last = b""
s.settimeout(gap)
while time.time() - start < 60:
    try:
        data = s.recv(4096)
        if not data:
            break
        last = data.strip().split(b"\r\n")[-1]
    except socket.timeout:
        pass
    try:
        s.sendall(b"x")
    except OSError:
        break
print("%.1f %s" % (time.time() - start, last.decode()))
"#;

fn trickle(addr: std::net::SocketAddr, gap: f64, prelude: &str) -> (f64, String) {
    let out = python(TRICKLE, &[&addr.to_string(), &gap.to_string(), prelude]);
    let (secs, last) = out.trim().split_once(' ').unwrap_or((out.trim(), ""));
    (secs.parse().unwrap(), last.to_string())
}

#[test]
fn a_trickle_does_not_stretch_the_imap_login_deadline() {
    let server = Server::start_with("[imap]\nlogin_timeout_secs = 3\n");
    // A byte a second: each read is quick, the command never ends.
    let (secs, last) = trickle(server.imap, 1.0, "");
    assert!(secs < 8.0, "held for {secs} s");
    assert!(last.contains("BYE"), "{last}");
}

#[test]
fn a_trickle_inside_data_is_cut_at_the_minimum_rate() {
    let server = Server::start_with("[smtp]\ndata_timeout_secs = 2\nmin_data_rate = 100\n");
    let user = server.add_user("slow");
    let prelude = format!(
        "EHLO c\\r\\nMAIL FROM:<a@remote.test>\\r\\nRCPT TO:<{user}>\\r\\nDATA\\r\\nSubject: slow\\r\\n\\r\\n"
    );
    // 2 s plus a second per 100 bytes: a few bytes in, about 2 s.
    let (secs, last) = trickle(server.smtp, 0.5, &prelude);
    assert!(secs < 10.0, "held for {secs} s");
    assert!(last.starts_with("421"), "{last}");
    assert_eq!(server.count("SELECT count(*) FROM messages"), 0);
}

#[test]
fn a_full_listener_turns_newcomers_away_clearly() {
    let server = Server::start_with("[imap]\nmax_connections = 3\n[smtp]\nmax_connections = 2\n");
    let out = python(
        r#"
import socket, sys
def greet(addr, n):
    h, p = addr.rsplit(":", 1)
    held = []
    for _ in range(n):
        s = socket.create_connection((h, int(p)), timeout=10)
        held.append((s, s.makefile("rb").readline().decode().strip()))
    return held
imap = greet(sys.argv[1], 4)
smtp = greet(sys.argv[2], 3)
print(imap[2][1][:4], "|", imap[3][1])
print(smtp[1][1][:3], "|", smtp[2][1])
"#,
        &[&server.imap.to_string(), &server.smtp.to_string()],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0], "* OK | * BYE [UNAVAILABLE] Too many connections, try later",
        "{out}"
    );
    assert_eq!(
        lines[1], "220 | 421 4.3.2 Too many connections, try later",
        "{out}"
    );
}

#[test]
fn pop3_commands_before_login_do_not_keep_a_session_open() {
    let server = Server::start_with("[pop3]\nidle_timeout_secs = 3\n");
    let out = python(
        r#"
import socket, sys, time
h, p = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((h, int(p)), timeout=10)
f = s.makefile("rb")
f.readline()
start = time.time()
last = ""
while time.time() - start < 30:
    try:
        s.sendall(b"CAPA\r\n")
    except OSError:
        break
    # The capability list, up to its "." line.
    line = f.readline()
    while line and line.strip() != b".":
        last = line.decode().strip()
        line = f.readline()
    if not line:
        break
    time.sleep(1)
print("%.1f %s" % (time.time() - start, last))
"#,
        &[&server.pop3.to_string()],
    );
    let secs: f64 = out.split_whitespace().next().unwrap().parse().unwrap();
    assert!(secs < 8.0, "{out}");
}
