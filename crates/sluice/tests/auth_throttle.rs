//! Login throttling against a real server: parallel guessing from one
//! address is held to the schedule, not multiplied by the connections; a
//! success at one's own account does not reset it; failures over IMAP
//! count for POP3 too; the victim's own client (its password cached)
//! still gets in; and many logins at once do not make argon2 eat memory.

use sluice_testkit as kit;

use kit::{python, Server, PASSWORD};

/// `n` IMAP connections each trying wrong passwords for `secs` seconds;
/// prints how many answers checked the password (AUTHENTICATIONFAILED)
/// and how many were refused without checking (UNAVAILABLE).
const GUESS: &str = r#"
import imaplib, sys, threading, time
addr, user, n, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
h, p = addr.rsplit(":", 1)
counts = {"checked": 0, "refused": 0, "other": 0}
lock = threading.Lock()
def guess():
    end = time.time() + secs
    while time.time() < end:
        try:
            m = imaplib.IMAP4(h, int(p))
        except OSError:
            continue
        try:
            while time.time() < end:
                try:
                    m.login(user, "guess%f" % time.time())
                    kind = "other"
                except imaplib.IMAP4.error as e:
                    text = str(e)
                    kind = "checked" if "AUTHENTICATIONFAILED" in text else "refused" if "UNAVAILABLE" in text else "other"
                with lock:
                    counts[kind] += 1
        except Exception:
            pass
        try:
            m.shutdown()
        except Exception:
            pass
threads = [threading.Thread(target=guess) for _ in range(n)]
for t in threads: t.start()
for t in threads: t.join()
print(counts["checked"], counts["refused"], counts["other"])
"#;

fn guess(server: &Server, user: &str, connections: usize, secs: u32) -> (u32, u32) {
    let out = python(
        GUESS,
        &[
            &server.imap.to_string(),
            user,
            &connections.to_string(),
            &secs.to_string(),
        ],
    );
    let n: Vec<u32> = out.split_whitespace().map(|w| w.parse().unwrap()).collect();
    (n[0], n[1])
}

fn login(server: &Server, user: &str, password: &str) -> String {
    kit::imap_login(server.imap, user, password)
}

#[test]
fn parallel_guessing_is_held_to_one_schedule_across_protocols() {
    let server = Server::start_with(
        "[imap]\nmax_connections_per_ip = 500\nmax_auth_failures = 1000\nauth_failure_delay_secs = 1\n\
         [pop3]\nauth_failure_delay_secs = 1\n",
    );
    let victim = server.add_user("victim");
    let attacker = server.add_user("attacker");
    // The victim's own client logged in before the attack.
    assert_eq!(login(&server, &victim, PASSWORD), "OK");

    let (checked, refused) = guess(&server, &victim, 20, 5);
    // Without throttling 20 connections check ~2 guesses/s each. Held to
    // one schedule: the first burst (one per connection), then turns 1, 2,
    // 4, 8, 16 s apart; later turns are refused at once.
    assert!(checked <= 20 + 5, "{checked} guesses checked");
    assert!(refused > 0, "nothing refused ({checked} checked)");

    // Logging into one's own account does not reset the address: three
    // more guesses at once get turns 16 s apart, so the last is refused;
    // and a POP3 guess meanwhile is refused too (failures over IMAP
    // count for POP3).
    assert_eq!(login(&server, &attacker, PASSWORD), "OK");
    let out = python(
        r#"
import imaplib, poplib, sys, threading, time
imap, pop, user = sys.argv[1:4]
answers = []
def imap_guess():
    h, p = imap.rsplit(":", 1)
    m = imaplib.IMAP4(h, int(p))
    try:
        m.login(user, "guess"); answers.append("OK")
    except imaplib.IMAP4.error as e:
        answers.append("UNAVAILABLE" if "UNAVAILABLE" in str(e) else "FAILED")
threads = [threading.Thread(target=imap_guess) for _ in range(3)]
for t in threads: t.start()
time.sleep(1)
h, p = pop.rsplit(":", 1)
s = poplib.POP3(h, int(p))
s.user(user)
try:
    s.pass_("guess"); print("pop OK")
except poplib.error_proto as e:
    print("pop", e)
for t in threads: t.join()
print("imap", " ".join(sorted(answers)))
"#,
        &[&server.imap.to_string(), &server.pop3.to_string(), &victim],
    );
    assert!(out.contains("pop b'-ERR [SYS/TEMP]"), "{out}");
    assert!(
        out.contains("imap FAILED FAILED UNAVAILABLE")
            || out.contains("imap FAILED UNAVAILABLE UNAVAILABLE"),
        "{out}"
    );
    // The victim's own client, whose password last succeeded, still gets in.
    assert_eq!(login(&server, &victim, PASSWORD), "OK");
}

#[test]
fn many_logins_at_once_do_not_grow_memory_with_them() {
    let server = Server::start_with(
        "[imap]\nmax_connections_per_ip = 1000\nmax_auth_failures = 1000\nauth_failure_delay_secs = 0\n",
    );
    let users: Vec<String> = (0..4).map(|i| server.add_user(&format!("u{i}"))).collect();
    let before = server.rss_kb();
    // 200 logins at once, each for its own (unknown) account so none is
    // held back: every one runs argon2 (19 MiB each).
    python(
        r#"
import imaplib, sys, threading
h, p = sys.argv[1].rsplit(":", 1)
def one(i):
    m = imaplib.IMAP4(h, int(p))
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
