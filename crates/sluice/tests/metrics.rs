//! The metrics listener: `/metrics` parsed with the Prometheus project's
//! own Python client (its OpenMetrics parser, as a scraper reads it),
//! counters that move when mail flows and logins fail, and the health
//! endpoints.

use sluice_testkit as kit;

use kit::{addr_arg, debian_python, python, Server, PASSWORD};

/// Scrapes `/metrics` at `argv[1]`, parses it and prints one line per
/// sample: `name{label=value,...} value`.
const SCRAPE: &str = r#"
import sys, urllib.request
from prometheus_client.openmetrics.parser import text_string_to_metric_families
reply = urllib.request.urlopen("http://%s/metrics" % sys.argv[1])
assert reply.headers["Content-Type"].startswith("application/openmetrics-text"), reply.headers
for family in text_string_to_metric_families(reply.read().decode()):
    for s in family.samples:
        labels = ",".join("%s=%s" % kv for kv in sorted(s.labels.items()))
        print("%s{%s} %s" % (s.name, labels, s.value))
"#;

fn scrape(server: &Server) -> String {
    debian_python(SCRAPE, &[&addr_arg(server.addr("metrics"))])
}

/// The value of the sample `name{labels}` (0 when absent).
fn value(samples: &str, sample: &str) -> f64 {
    samples
        .lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
        .map_or(0.0, |v| v.parse().unwrap())
}

#[test]
fn counters_move_when_mail_flows_and_logins_fail() {
    let server = Server::start();
    let user = server.add_user("counted");
    let before = scrape(&server);
    python(
        r#"
import imaplib, smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
for n in range(3):
    s = smtplib.SMTP(h, int(p))
    s.sendmail("a@sender.test", [sys.argv[2]], "Subject: %d\r\n\r\nbody\r\n" % n)
    s.quit()
s = smtplib.SMTP(h, int(p))
s.ehlo()
assert s.mail("a@sender.test")[0] == 250
assert s.rcpt("nobody@example.org")[0] == 550
s.quit()
h, p = sys.argv[3].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
try:
    m.login(sys.argv[2], "wrong")
except imaplib.IMAP4.error:
    pass
m.login(sys.argv[2], sys.argv[4])
m.select("INBOX")
m.fetch("1:*", "(FLAGS)")
m.logout()
import poplib
h, p = sys.argv[5].rsplit(":", 1)
pop = poplib.POP3(h, int(p))
pop.user(sys.argv[2]); pop.pass_(sys.argv[4])
pop.stat()
pop.quit()
"#,
        &[
            &addr_arg(server.smtp),
            &user,
            &addr_arg(server.imap),
            PASSWORD,
            &addr_arg(server.pop3),
        ],
    );
    let after = scrape(&server);
    let moved = |sample: &str| value(&after, sample) - value(&before, sample);
    assert_eq!(
        moved("sluice_smtp_transactions_total{verdict=accepted}"),
        3.0,
        "{after}"
    );
    assert!(moved("sluice_smtp_accepted_bytes_total{}") > 0.0, "{after}");
    assert!(
        moved("sluice_smtp_replies_total{class=2xx}") >= 12.0,
        "{after}"
    );
    assert_eq!(
        moved("sluice_smtp_replies_total{class=5xx}"),
        1.0,
        "{after}"
    );
    assert_eq!(moved("sluice_deliveries_total{kind=local}"), 3.0, "{after}");
    assert!(
        moved("sluice_connections_total{listener=smtp,outcome=accepted}") >= 3.0,
        "{after}"
    );
    assert_eq!(
        moved("sluice_auth_failures_total{reason=password}"),
        1.0,
        "{after}"
    );
    assert_eq!(
        moved("sluice_imap_commands_total{command=LOGIN}"),
        2.0,
        "{after}"
    );
    assert_eq!(
        moved("sluice_imap_commands_total{command=FETCH}"),
        1.0,
        "{after}"
    );
    assert_eq!(
        moved("sluice_pop3_commands_total{command=STAT}"),
        1.0,
        "{after}"
    );
    assert!(
        moved("sluice_store_commit_seconds_count{}") >= 3.0,
        "{after}"
    );
    // Three deliveries of a few hundred bytes write at least a page of log
    // each (4 KiB and a frame header).
    assert!(
        moved("sluice_store_wal_bytes_total{}") >= 3.0 * 4120.0,
        "{after}"
    );
    assert_eq!(value(&after, "sluice_queue_recipients{}"), 0.0, "{after}");
}

/// The sessions gauge follows IMAP and POP3 sessions through their
/// states while they are open, and drops when they close.
#[test]
fn sessions_gauge_follows_imap_and_pop3_states() {
    let server = Server::start();
    let user = server.add_user("sessions");
    let out = debian_python(
        r#"
import imaplib, poplib, sys, time, urllib.request
from prometheus_client.openmetrics.parser import text_string_to_metric_families
metrics, imap_addr, pop3_addr, user, password = sys.argv[1:6]
def sessions():
    text = urllib.request.urlopen("http://%s/metrics" % metrics).read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "sluice_sessions":
                out[(s.labels["protocol"], s.labels["state"])] = s.value
    return out
def expect(want):
    # The server moves the gauge as it reads the next command: wait for it.
    deadline = time.time() + 10
    while True:
        got = sessions()
        if all(got.get(k, 0) == v for k, v in want.items()):
            return
        assert time.time() < deadline, (want, got)
        time.sleep(0.05)
h, p = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
expect({("imap", "not_authenticated"): 1, ("imap", "authenticated"): 0, ("imap", "selected"): 0})
m.login(user, password)
expect({("imap", "not_authenticated"): 0, ("imap", "authenticated"): 1})
m.select("INBOX")
expect({("imap", "authenticated"): 0, ("imap", "selected"): 1})
h, p = pop3_addr.rsplit(":", 1)
pop = poplib.POP3(h, int(p))
expect({("pop3", "authorization"): 1, ("pop3", "transaction"): 0})
pop.user(user); pop.pass_(password)
expect({("pop3", "authorization"): 0, ("pop3", "transaction"): 1})
m.logout()
pop.quit()
expect({("imap", "not_authenticated"): 0, ("imap", "authenticated"): 0, ("imap", "selected"): 0,
        ("pop3", "authorization"): 0, ("pop3", "transaction"): 0})
print("ok")
"#,
        &[
            &addr_arg(server.addr("metrics")),
            &addr_arg(server.imap),
            &addr_arg(server.pop3),
            &user,
            PASSWORD,
        ],
    );
    assert_eq!(out.trim(), "ok");
}

#[test]
fn health_and_readiness_answer() {
    let server = Server::start();
    let out = python(
        r#"
import sys, urllib.request
for path in ("healthz", "readyz"):
    r = urllib.request.urlopen("http://%s/%s" % (sys.argv[1], path))
    print(path, r.status, r.read().decode().strip())
"#,
        &[&addr_arg(server.addr("metrics"))],
    );
    assert!(out.contains("healthz 200 ok"), "{out}");
    assert!(out.contains("readyz 200 ready"), "{out}");
}
