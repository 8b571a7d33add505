//! Login throttling against a real server, attacked as an attacker
//! would: many parallel connections from one address, over IMAP, POP3
//! and SMTP submission at once, guess no faster than one sequential
//! client; many addresses against one account guess no faster than the
//! account's schedule; the account's owner, whose password is known,
//! gets in throughout; failures over IMAP count for POP3; and many logins
//! at once do not make argon2 eat memory. The clients are Python's
//! imaplib, poplib and smtplib, each bound to its own loopback source
//! address where the test needs several.

use sluice_testkit as kit;

use kit::{python, python_spawn, Server, PASSWORD};

/// Guesses wrong passwords for `user` until `secs` pass: `per_address`
/// connections from each of the given source addresses, each protocol
/// in turn (`imap`, `pop3`, `submission`), reconnecting when the server
/// closes or refuses. Prints the answers that checked the password
/// (`checked`), those refused without checking (`refused`), connections
/// refused or dropped (`connect`), and anything else (`other`).
const ATTACK: &str = r#"
import imaplib, poplib, smtplib, socket, ssl, sys, threading, time
imap, pop, sub, user, secs, per_address = sys.argv[1:7]
sources = sys.argv[7].split(",")
protocols = sys.argv[8].split(",")
secs, per_address = float(secs), int(per_address)
ctx = ssl._create_unverified_context()
counts = {"checked": 0, "refused": 0, "connect": 0, "other": 0}
lock = threading.Lock()
def count(kind):
    with lock:
        counts[kind] += 1
def hp(a):
    h, p = a.rsplit(":", 1)
    return h, int(p)
class Imap(imaplib.IMAP4):
    def __init__(self, src):
        self.src = src
        super().__init__(*hp(imap), timeout=60)
    def _create_socket(self, timeout):
        return socket.create_connection((self.host, self.port), timeout, source_address=(self.src, 0))
class Pop(poplib.POP3):
    def __init__(self, src):
        self.src = src
        super().__init__(*hp(pop), timeout=60)
    def _create_socket(self, timeout):
        return socket.create_connection((self.host, self.port), timeout, source_address=(self.src, 0))
def imap_session(src, end):
    m = Imap(src)
    while time.time() < end:
        try:
            m.login(user, "guess%f" % time.time()); count("other")
        except imaplib.IMAP4.abort:
            raise
        except imaplib.IMAP4.error as e:
            count("checked" if "AUTHENTICATIONFAILED" in str(e) else "refused" if "UNAVAILABLE" in str(e) else "other")
def pop_session(src, end):
    c = Pop(src)
    while time.time() < end:
        c.user(user)
        try:
            c.pass_("guess%f" % time.time()); count("other")
        except poplib.error_proto as e:
            t = str(e)
            if "[AUTH]" in t: count("checked")
            elif "[SYS/TEMP]" in t: count("refused")
            else: raise
def submission_session(src, end):
    s = smtplib.SMTP(*hp(sub), timeout=60, source_address=(src, 0))
    s.starttls(context=ctx); s.ehlo()
    while time.time() < end:
        try:
            s.login(user, "guess%f" % time.time()); count("other")
        except smtplib.SMTPAuthenticationError as e:
            count("checked" if e.smtp_code == 535 else "refused" if e.smtp_code == 454 else "other")
sessions = {"imap": imap_session, "pop3": pop_session, "submission": submission_session}
def guess(src, protocol):
    end = time.time() + secs
    while time.time() < end:
        try:
            sessions[protocol](src, end)
        except Exception:
            count("connect")
            time.sleep(0.05)
threads = [threading.Thread(target=guess, args=(src, protocols[(i * per_address + j) % len(protocols)]))
           for i, src in enumerate(sources) for j in range(per_address)]
for t in threads: t.start()
for t in threads: t.join()
print(counts["checked"], counts["refused"], counts["connect"], counts["other"])
"#;

/// The counts [`ATTACK`] printed: checked, refused, connect, other.
fn attack(
    server: &Server,
    user: &str,
    secs: u32,
    sources: &[String],
    per_address: usize,
    protocols: &str,
) -> [u32; 4] {
    let out = python(
        ATTACK,
        &[
            &server.imap.to_string(),
            &server.pop3.to_string(),
            &server.addr("submission").to_string(),
            user,
            &secs.to_string(),
            &per_address.to_string(),
            &sources.join(","),
            protocols,
        ],
    );
    let n: Vec<u32> = out.split_whitespace().map(|w| w.parse().unwrap()).collect();
    [n[0], n[1], n[2], n[3]]
}

/// Loopback source addresses other than 127.0.0.1, one per attacker.
fn sources(n: usize, base: u8) -> Vec<String> {
    (0..n)
        .map(|i| format!("127.{base}.{}.{}", i / 200, 2 + i % 200))
        .collect()
}

fn login(server: &Server, user: &str, password: &str) -> String {
    kit::imap_login(server.imap, user, password)
}

/// Logs in as `user` from `source` `n` times, one after the other, while
/// an attack runs, with the right password; prints how many succeeded
/// and the slowest login's seconds.
const OWNER: &str = r#"
import imaplib, socket, sys, time
h, p = sys.argv[1].rsplit(":", 1)
user, password, src, n, pause = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6])
class Imap(imaplib.IMAP4):
    def _create_socket(self, timeout):
        return socket.create_connection((self.host, self.port), timeout, source_address=(src, 0))
ok, took = 0, []
for i in range(n):
    time.sleep(pause)
    m = Imap(h, int(p), timeout=60)
    t = time.time()
    try:
        m.login(user, password); ok += 1
    except imaplib.IMAP4.error as e:
        print("refused", e, file=sys.stderr)
    took.append(time.time() - t)
    m.logout()
took.sort()
print(ok, took[-1], took[len(took) // 2])
"#;

#[test]
fn parallel_connections_from_one_address_guess_no_faster_than_one_client() {
    // The default limits: 50 IMAP and 20 POP3 connections per address,
    // 1 s doubling to 16 s.
    let server = Server::start();
    let victim = server.add_user("victim");
    let owner_source = "127.0.9.9";
    // The victim's own client logged in before the attack.
    let before = python(
        OWNER,
        &[
            &server.imap.to_string(),
            &victim,
            PASSWORD,
            owner_source,
            "1",
            "0",
        ],
    );
    assert!(before.starts_with("1 "), "{before}");
    let owner = python_spawn(
        OWNER,
        &[
            &server.imap.to_string(),
            &victim,
            PASSWORD,
            owner_source,
            "25",
            "1",
        ],
    );
    // Fifty connections from one address, IMAP, POP3 and submission
    // together, for 30 s.
    let [checked, refused, _, other] = attack(
        &server,
        &victim,
        30,
        &sources(1, 1),
        50,
        "imap,pop3,submission",
    );
    // One sequential client would have had 5 guesses checked (at 0, 1, 3,
    // 7, 15 s); fifty connections count as fifty guesses and wait as long:
    // at most one guess in ten seconds.
    assert!(
        checked <= 3,
        "{checked} guesses checked in 30 s ({refused} refused)"
    );
    assert!(
        checked >= 1 && refused > 0,
        "{checked} checked, {refused} refused"
    );
    assert_eq!(other, 0);
    // The owner, whose password the server knows, got in every time,
    // never made to wait a turn (a turn is at least 1 s).
    let out = owner.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(
        fields.first(),
        Some(&"25"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let slowest: f64 = fields[1].parse().unwrap();
    assert!(slowest < 1.0, "the owner waited {slowest} s for a login");
    eprintln!(
        "owner's logins during the attack: median {} s, slowest {slowest} s",
        fields[2]
    );
    // The attacker's address was held to a few connections once it had
    // failed, and said so in the log an operator feeds to a firewall.
    assert!(server
        .log()
        .contains("connection refused: too many from this address"));
}

#[test]
fn many_addresses_against_one_account_guess_no_faster_than_the_account() {
    let server = Server::start_with("[imap]\nmax_auth_failures = 1000\n");
    let victim = server.add_user("victim");
    let owner_source = "127.0.9.9";
    let before = python(
        OWNER,
        &[
            &server.imap.to_string(),
            &victim,
            PASSWORD,
            owner_source,
            "1",
            "0",
        ],
    );
    assert!(before.starts_with("1 "), "{before}");
    let owner = python_spawn(
        OWNER,
        &[
            &server.imap.to_string(),
            &victim,
            PASSWORD,
            owner_source,
            "25",
            "1",
        ],
    );
    // Fifty addresses, two connections each, IMAP and POP3, for 30 s.
    let [checked, refused, _, other] =
        attack(&server, &victim, 30, &sources(50, 2), 2, "imap,pop3");
    assert!(
        checked <= 30,
        "{checked} guesses at the account in 30 s ({refused} refused)"
    );
    assert!(checked >= 1, "{checked} checked, {refused} refused");
    assert_eq!(other, 0);
    let out = owner.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(
        fields.first(),
        Some(&"25"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let slowest: f64 = fields[1].parse().unwrap();
    assert!(slowest < 1.0, "the owner waited {slowest} s for a login");
    eprintln!(
        "owner's logins during the attack: median {} s, slowest {slowest} s",
        fields[2]
    );
    // The attack is logged once and counted.
    let log = server.log();
    assert_eq!(log.matches("account under attack").count(), 1, "{log}");
    let metrics = kit::python(
        "import sys, urllib.request; print(urllib.request.urlopen('http://%s/metrics' % sys.argv[1]).read().decode())",
        &[&server.addr("metrics").to_string()],
    );
    assert!(
        metrics.contains("sluice_auth_accounts_attacked_total 1"),
        "{metrics}"
    );
}

#[test]
fn failures_over_one_protocol_hold_back_the_others() {
    let server = Server::start_with("[imap]\nmax_auth_failures = 1000\n");
    let victim = server.add_user("victim");
    let attacker = server.add_user("attacker");
    // Three wrong IMAP passwords, one after the other: the address fails.
    let out = python(
        r#"
import imaplib, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
for i in range(3):
    try:
        m.login(sys.argv[2], "guess%d" % i)
    except imaplib.IMAP4.error as e:
        print("imap", "FAILED" if "AUTHENTICATIONFAILED" in str(e) else e)
"#,
        &[&server.imap.to_string(), &victim],
    );
    assert_eq!(out.matches("imap FAILED").count(), 3, "{out}");
    // Logging into one's own account does not reset the address, and a
    // POP3 guess right after waits its turn (16 s is too far: refused).
    assert_eq!(login(&server, &attacker, PASSWORD), "OK");
    let out = python(
        r#"
import poplib, sys, time
h, p = sys.argv[1].rsplit(":", 1)
s = poplib.POP3(h, int(p))
s.user(sys.argv[2])
t = time.time()
try:
    s.pass_("guess"); print("pop OK")
except poplib.error_proto as e:
    print("pop", e, round(time.time() - t))
"#,
        &[&server.pop3.to_string(), &victim],
    );
    assert!(
        out.contains("pop b'-ERR [SYS/TEMP]") || out.contains("pop b'-ERR [AUTH]"),
        "{out}"
    );
    // Failures counted against the address held it to a few connections.
    let held = python(
        r#"
import socket, sys
h, p = sys.argv[1].rsplit(":", 1)
socks, greetings = [], []
for i in range(6):
    s = socket.create_connection((h, int(p)), timeout=10)
    socks.append(s)
    greetings.append(s.recv(200).decode().split()[1])
print(" ".join(greetings))
"#,
        &[&server.imap.to_string()],
    );
    assert_eq!(held.trim(), "OK OK OK BYE BYE BYE", "{held}");
    // The owner, who had not logged in before, from a clean address:
    // the account's turn comes, and the right password gets in.
    let fresh = python(
        OWNER,
        &[
            &server.imap.to_string(),
            &victim,
            PASSWORD,
            "127.0.9.9",
            "1",
            "0",
        ],
    );
    assert!(fresh.starts_with("1 "), "{fresh}");
}

#[test]
fn many_logins_at_once_do_not_grow_memory_with_them() {
    let server = Server::start_with(
        "[imap]\nmax_connections_per_ip = 1000\nmax_auth_failures = 1000\nauth_failure_delay_secs = 0\n",
    );
    let users: Vec<String> = (0..4).map(|i| server.add_user(&format!("u{i}"))).collect();
    let before = server.rss_kb();
    // 200 logins at once, each for its own (unknown) account from its
    // own address so none is held back: every one runs argon2 (19 MiB
    // each).
    python(
        r#"
import imaplib, socket, sys, threading
h, p = sys.argv[1].rsplit(":", 1)
class Imap(imaplib.IMAP4):
    def __init__(self, src):
        self.src = src
        super().__init__(h, int(p))
    def _create_socket(self, timeout):
        return socket.create_connection((self.host, self.port), timeout, source_address=(self.src, 0))
def one(i):
    m = Imap("127.0.%d.%d" % (3 + i // 200, 2 + i % 200))
    try:
        m.login("nobody%d@example.org" % i, "x")
    except imaplib.IMAP4.error:
        pass
threads = [threading.Thread(target=one, args=(i,)) for i in range(200)]
for t in threads: t.start()
for t in threads: t.join()
"#,
        &[&server.imap.to_string()],
    );
    let peak = server.peak_rss_kb();
    assert!(
        peak.saturating_sub(before) < 150 * 1024,
        "peak RSS grew by {} MiB during 200 logins",
        peak.saturating_sub(before) / 1024
    );
    assert!(users.iter().all(|u| login(&server, u, PASSWORD) == "OK"));
}
