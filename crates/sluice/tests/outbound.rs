//! Outbound delivery against real peers on loopback: Postfix's
//! `smtp-sink` as the remote server (taking mail, or refusing with 4xx or
//! 5xx on demand) and `nsd` as the DNS. Mail is queued the way Sluice
//! queues it today: an alias with a remote target, fed over SMTP.

use sluice_testkit as kit;

use std::time::Duration;

use kit::{addr_arg, python, wait_until, Dns, Server, SmtpSink, Zone};

/// A server whose mail for `routes` goes where they say, retrying after
/// one second, with the queue's DNS from `dns`.
fn server(
    routes: &[(&str, std::net::SocketAddr)],
    dns: std::net::SocketAddr,
    mx_port: u16,
) -> Server {
    let routes: String = routes
        .iter()
        .map(|(d, a)| format!("\"{d}\" = \"{a}\"\n"))
        .collect();
    Server::start_with(&format!(
        "[dns]\nresolver = \"{dns}\"\n\
         [outbound]\nmx_port = {mx_port}\nretry_schedule = [1]\nconnect_timeout = 5\ncommand_timeout = 10\n\
         [outbound.routes]\n{routes}\
         [outbound.tls]\nmta_sts = false\ndane = \"off\"\n"
    ))
}

/// Sends a message to `rcpt` over SMTP; its subject is `subject`.
fn send(server: &Server, rcpt: &str, subject: &str) {
    send_from(server, "someone@origin.test", rcpt, subject);
}

/// [`send`] with an envelope sender (`""` for the null sender).
fn send_from(server: &Server, sender: &str, rcpt: &str, subject: &str) {
    python(
        r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p))
s.sendmail(sys.argv[4], [sys.argv[2]],
    "From: someone@origin.test\r\nTo: %s\r\nSubject: %s\r\n\r\n.a line starting with a dot\r\nbody\r\n" % (sys.argv[2], sys.argv[3]))
s.quit()
"#,
        &[&addr_arg(server.smtp), rcpt, subject, sender],
    );
}

fn queue_list(server: &Server) -> String {
    server.cli_ok(&["queue", "list"])
}

fn no_dns() -> Dns {
    Dns::start(vec![Zone::new("unused.test", &[])])
}

#[test]
fn a_forwarded_message_is_delivered_through_a_static_route() {
    let sink = SmtpSink::start(&[]);
    let dns = no_dns();
    let server = server(&[("remote.test", sink.addr)], dns.addr, 25);
    server.cli_ok(&["alias", "add", "fwd@example.org", "friend@remote.test"]);
    assert!(wait_until(Duration::from_secs(5), || server
        .rcpt_accepted("fwd@example.org")));
    send(&server, "fwd@example.org", "routed hello");
    assert!(
        wait_until(Duration::from_secs(20), || sink
            .messages()
            .iter()
            .any(|m| m.contains("routed hello"))),
        "not delivered:\n{}\n{}",
        queue_list(&server),
        server.log()
    );
    let m = sink
        .messages()
        .into_iter()
        .find(|m| m.contains("routed hello"))
        .unwrap();
    // Dot-stuffed on the wire and unstuffed by the sink: the line is intact.
    assert!(m.contains("\n.a line starting with a dot"), "{m}");
    assert!(
        wait_until(Duration::from_secs(5), || queue_list(&server)
            .contains("the queue is empty")),
        "{}",
        queue_list(&server)
    );
    assert!(
        server.log().contains("outbound transaction"),
        "{}",
        server.log()
    );
}

#[test]
fn a_temporary_failure_is_retried_until_the_destination_takes_it() {
    let refusing = SmtpSink::start(&["-r", "rcpt"]);
    let port = refusing.addr.port();
    let dns = no_dns();
    let server = server(&[("later.test", refusing.addr)], dns.addr, 25);
    server.cli_ok(&["alias", "add", "later@example.org", "someone@later.test"]);
    assert!(wait_until(Duration::from_secs(5), || server
        .rcpt_accepted("later@example.org")));
    send(&server, "later@example.org", "try again");
    // Deferred with the 4xx reply, tried again on the schedule.
    assert!(
        wait_until(Duration::from_secs(20), || {
            let list = queue_list(&server);
            list.contains("attempts 2") && list.contains("45")
        }),
        "{}\n{}",
        queue_list(&server),
        server.log()
    );
    let id = queue_list(&server).split('\t').next().unwrap().to_string();
    let shown = server.cli_ok(&["queue", "show", &id]);
    assert!(shown.contains("subject: try again"), "{shown}");
    assert!(shown.contains("last error: 45"), "{shown}");
    assert!(refusing.messages().is_empty());
    // The destination comes back on the same port and takes it.
    drop(refusing);
    let sink = SmtpSink::start_on(port, &[]);
    assert!(
        wait_until(Duration::from_secs(20), || sink
            .messages()
            .iter()
            .any(|m| m.contains("try again"))),
        "{}\n{}",
        queue_list(&server),
        server.log()
    );
    assert!(wait_until(Duration::from_secs(5), || queue_list(&server)
        .contains("the queue is empty")));
    assert_eq!(sink.messages().len(), 1, "delivered once");
}

#[test]
fn a_permanent_failure_is_not_retried_and_the_sender_gets_one_report() {
    let refusing = SmtpSink::start(&["-f", "rcpt"]);
    let dns = no_dns();
    let server = server(&[("never.test", refusing.addr)], dns.addr, 25);
    let alice = server.add_user("alice");
    server.cli_ok(&["alias", "add", "never@example.org", "someone@never.test"]);
    assert!(wait_until(Duration::from_secs(5), || server
        .rcpt_accepted("never@example.org")));
    send_from(&server, &alice, "never@example.org", "no such user");
    assert!(
        wait_until(Duration::from_secs(20), || server
            .log()
            .contains("delivery status notification sent")),
        "{}",
        server.log()
    );
    assert!(queue_list(&server).contains("the queue is empty"));
    // The report, in the sender's INBOX, read with an independent parser.
    let report = python(
        r#"
import email, email.policy, imaplib, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(sys.argv[2], sys.argv[3]); m.select("INBOX")
typ, data = m.fetch("1:*", "(BODY.PEEK[])")
msgs = [email.message_from_bytes(d[1], policy=email.policy.default) for d in data if isinstance(d, tuple)]
assert len(msgs) == 1, len(msgs)
r = msgs[0]
assert r.get_content_type() == "multipart/report", r.get_content_type()
assert r.get_param("report-type") == "delivery-status"
parts = list(r.iter_parts())
status = parts[1]
assert status.get_content_type() == "message/delivery-status"
fields = {}
for block in status.get_payload():
    for k, v in block.items():
        fields.setdefault(k, str(v))
print(fields["Final-Recipient"], "|", fields["Action"], "|", fields["Status"], "|", parts[2].get_content_type())
print(parts[2].as_string())
"#,
        &[&addr_arg(server.imap), &alice, kit::PASSWORD],
    );
    assert!(
        report.contains("rfc822; someone@never.test | failed | 5."),
        "{report}"
    );
    assert!(report.contains("text/rfc822-headers"), "{report}");
    assert!(report.contains("Subject: no such user"), "{report}");
    // A message with the null sender that fails is not reported.
    send_from(&server, "", "never@example.org", "a bounce itself");
    assert!(wait_until(Duration::from_secs(20), || {
        server
            .log()
            .matches("outbound delivery failed for good")
            .count()
            == 2
    }));
    // Several retry periods later, still one attempt each and one report.
    std::thread::sleep(Duration::from_secs(3));
    let log = server.log();
    assert_eq!(
        log.matches("outbound delivery failed for good").count(),
        2,
        "{log}"
    );
    assert_eq!(log.matches("outbound transaction").count(), 2, "{log}");
    assert_eq!(
        log.matches("delivery status notification sent").count(),
        1,
        "{log}"
    );
}

#[test]
fn mx_records_are_followed_a_null_mx_fails_at_once_and_a_dead_destination_delays_nobody() {
    let sink = SmtpSink::start(&[]);
    let dead_port = kit::free_port();
    let dns = Dns::start(vec![
        Zone::new(
            "mx.test",
            &["@ IN MX 10 mail.mx.test.", "mail IN A 127.0.0.1"],
        ),
        Zone::new("nullmx.test", &["@ IN MX 0 ."]),
    ]);
    let dead: std::net::SocketAddr = format!("127.0.0.1:{dead_port}").parse().unwrap();
    // MX hosts are reached on the sink's port; dead.test is routed to a
    // port nobody listens on.
    let server = server(&[("dead.test", dead)], dns.addr, sink.addr.port());
    server.cli_ok(&["alias", "add", "viamx@example.org", "bob@mx.test"]);
    server.cli_ok(&["alias", "add", "nowhere@example.org", "bob@nullmx.test"]);
    server.cli_ok(&["alias", "add", "dead@example.org", "bob@dead.test"]);
    assert!(wait_until(Duration::from_secs(5), || server
        .rcpt_accepted("dead@example.org")));
    send(&server, "dead@example.org", "to the dead");
    send(&server, "viamx@example.org", "through the mx");
    send(&server, "nowhere@example.org", "to a null mx");
    assert!(
        wait_until(Duration::from_secs(20), || sink
            .messages()
            .iter()
            .any(|m| m.contains("through the mx"))),
        "{}\n{}",
        queue_list(&server),
        server.log()
    );
    assert!(
        wait_until(Duration::from_secs(10), || server.log().contains("null MX")),
        "{}",
        server.log()
    );
    let list = queue_list(&server);
    assert!(list.contains("bob@dead.test"), "the dead one waits: {list}");
    assert!(!list.contains("nullmx"), "{list}");
    assert!(!list.contains("bob@mx.test"), "{list}");
}

/// kill -9 in the middle of sending a burst of 1,000 queued messages: after
/// a restart every one arrives, and at most those in flight (one per
/// connection) twice.
#[test]
fn a_crash_in_the_middle_of_a_burst_loses_nothing() {
    // The destination comes up only once all 1,000 are queued, so that
    // the burst is still going when the kill comes.
    let port = kit::free_port();
    let dns = no_dns();
    let mut server = server(
        &[("burst.test", format!("127.0.0.1:{port}").parse().unwrap())],
        dns.addr,
        25,
    );
    server.cli_ok(&["alias", "add", "burst@example.org", "all@burst.test"]);
    assert!(wait_until(Duration::from_secs(5), || server
        .rcpt_accepted("burst@example.org")));
    python(
        r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p))
for i in range(1000):
    s.sendmail("someone@origin.test", ["burst@example.org"], "Subject: burst %d\r\n\r\nbody %d\r\n" % (i, i))
s.quit()
"#,
        &[&addr_arg(server.smtp)],
    );
    let sink = SmtpSink::start_on(port, &[]);
    let subjects = |sink: &SmtpSink| -> Vec<String> {
        sink.messages()
            .iter()
            .filter_map(|m| {
                m.lines()
                    .find(|l| l.starts_with("Subject: burst "))
                    .map(str::to_string)
            })
            .collect()
    };
    assert!(
        wait_until(Duration::from_secs(60), || subjects(&sink).len() >= 100),
        "{}",
        server.log()
    );
    server.kill9();
    let at_kill = subjects(&sink).len();
    assert!(at_kill < 1000, "the burst was over before the kill");
    server.restart();
    assert!(
        wait_until(Duration::from_secs(120), || {
            let mut s = subjects(&sink);
            s.sort();
            s.dedup();
            s.len() == 1000
        }),
        "{} of 1000 after the restart\n{}",
        subjects(&sink).len(),
        server.log()
    );
    // At most the messages in flight at the kill come twice: one per
    // connection open to the destination (destination_concurrency, 10).
    let total = subjects(&sink).len();
    assert!(total <= 1010, "{} duplicates", total - 1000);
    assert!(wait_until(Duration::from_secs(10), || queue_list(&server)
        .contains("the queue is empty")));
}

/// Mail still waiting after `delay_warning` brings its sender one
/// "delayed" report, however many attempts follow.
#[test]
fn a_long_delay_is_reported_once() {
    let refusing = SmtpSink::start(&["-r", "rcpt"]);
    let dns = no_dns();
    let server = Server::start_with(&format!(
        "[dns]\nresolver = \"{}\"\n\
         [outbound]\nretry_schedule = [1]\ndelay_warning = 2\n\
         [outbound.routes]\n\"slow.test\" = \"{}\"\n\
         [outbound.tls]\nmta_sts = false\ndane = \"off\"\n",
        dns.addr, refusing.addr
    ));
    let dora = server.add_user("dora");
    server.cli_ok(&["alias", "add", "slow@example.org", "someone@slow.test"]);
    assert!(wait_until(Duration::from_secs(5), || server
        .rcpt_accepted("slow@example.org")));
    send_from(&server, &dora, "slow@example.org", "patience");
    assert!(
        wait_until(Duration::from_secs(20), || server
            .log()
            .contains("delivery status notification sent")),
        "{}",
        server.log()
    );
    // More attempts, no second warning.
    assert!(wait_until(Duration::from_secs(20), || {
        queue_list(&server).contains("attempts 5")
    }));
    assert_eq!(
        server
            .log()
            .matches("delivery status notification sent")
            .count(),
        1
    );
    let report = python(
        r#"
import email, email.policy, imaplib, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(sys.argv[2], sys.argv[3]); m.select("INBOX")
typ, data = m.fetch("1:*", "(BODY.PEEK[])")
msgs = [email.message_from_bytes(d[1], policy=email.policy.default) for d in data if isinstance(d, tuple)]
r = msgs[0]
status = list(r.iter_parts())[1]
fields = {}
for block in status.get_payload():
    for k, v in block.items():
        fields.setdefault(k, str(v))
print(len(msgs), r["Subject"], "|", fields["Action"], "|", fields["Status"], "|", "Will-Retry-Until" in fields)
"#,
        &[&addr_arg(server.imap), &dora, kit::PASSWORD],
    );
    assert!(
        report.contains("1 Delayed Mail (still being retried) | delayed | 4.")
            && report.contains("| True"),
        "{report}"
    );
}

/// Forwarded mail goes out from an SRS address of ours; a bounce to that
/// address comes back to the original sender; a forged one is refused.
#[test]
fn forwarded_mail_is_sent_with_srs_and_its_bounces_find_the_sender() {
    let sink = SmtpSink::start(&[]);
    let refusing = SmtpSink::start(&["-f", "rcpt"]);
    let dns = no_dns();
    let server = server(
        &[
            ("remote.test", sink.addr),
            ("origin.test", sink.addr),
            ("hard.test", refusing.addr),
        ],
        dns.addr,
        25,
    );
    server.cli_ok(&["alias", "add", "fwd@example.org", "friend@remote.test"]);
    assert!(wait_until(Duration::from_secs(5), || server
        .rcpt_accepted("fwd@example.org")));
    send(&server, "fwd@example.org", "forward me");
    assert!(wait_until(Duration::from_secs(20), || sink
        .messages()
        .iter()
        .any(|m| m.contains("forward me"))));
    let m = sink
        .messages()
        .into_iter()
        .find(|m| m.contains("forward me"))
        .unwrap();
    let srs = m
        .split(['<', '>'])
        .find(|part| part.starts_with("SRS0="))
        .unwrap_or_else(|| panic!("no SRS sender in:\n{m}"))
        .to_string();
    assert!(
        srs.ends_with("=origin.test=someone@mx.example.org"),
        "{srs}"
    );
    // A bounce to it reaches the original sender, through the queue.
    let replies = python(
        r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p)); s.ehlo()
s.mail("")
good = s.rcpt(sys.argv[2])[0]
forged = s.rcpt(sys.argv[2].replace("someone", "mallory"))[0]
s.data("Subject: bounce for someone\r\n\r\nyour mail bounced\r\n")
s.quit()
print(good, forged)
"#,
        &[&addr_arg(server.smtp), &srs],
    );
    assert_eq!(replies.trim(), "250 550");
    assert!(
        wait_until(Duration::from_secs(20), || sink.messages().iter().any(
            |m| { m.contains("bounce for someone") && m.contains("someone@origin.test") }
        )),
        "{}",
        server.log()
    );
    // Our own report about forwarded mail that failed goes to the real
    // sender too, not to the SRS address it went out from.
    server.cli_ok(&["alias", "add", "fwd2@example.org", "nobody@hard.test"]);
    assert!(wait_until(Duration::from_secs(5), || server
        .rcpt_accepted("fwd2@example.org")));
    send(&server, "fwd2@example.org", "doomed");
    assert!(
        wait_until(Duration::from_secs(20), || sink.messages().iter().any(
            |m| {
                m.contains("Undelivered Mail Returned to Sender")
                    && m.contains("someone@origin.test")
                    && m.contains("Subject: doomed")
            }
        )),
        "{}\n{}",
        queue_list(&server),
        server.log()
    );
}

/// The envelope goes pipelined (RFC 2920) to a peer that offers it — here
/// another Sluice, which refuses an unknown recipient at RCPT: the known
/// one gets the message, the unknown one fails for good, in one
/// transaction.
#[test]
fn a_pipelined_envelope_with_one_refused_recipient() {
    let peer = Server::start();
    peer.cli_ok(&["domain", "add", "remote.test"]);
    let friend = "friend@remote.test";
    let out = peer.cli(&["user", "add", friend, "--password-stdin"], "pw\n");
    assert!(out.status.success());
    let dns = no_dns();
    let server = server(&[("remote.test", peer.smtp)], dns.addr, 25);
    server.cli_ok(&[
        "alias",
        "add",
        "team@example.org",
        friend,
        "nobody@remote.test",
    ]);
    assert!(wait_until(Duration::from_secs(5), || server
        .rcpt_accepted("team@example.org")));
    assert!(wait_until(Duration::from_secs(5), || peer.rcpt_accepted(friend)));
    send(&server, "team@example.org", "pipelined hello");
    assert!(
        wait_until(Duration::from_secs(20), || peer.count(
            "SELECT count(*) FROM messages m JOIN mailboxes x ON x.id = m.mailbox_id
             JOIN accounts a ON a.id = x.account_id WHERE a.address = 'friend@remote.test'"
        ) == 1),
        "not delivered:\n{}\n{}",
        queue_list(&server),
        server.log()
    );
    // The refused one is not retried: no row for it stays queued (its
    // report to the sender may wait for origin.test, which has no route).
    assert!(
        wait_until(Duration::from_secs(10), || !queue_list(&server)
            .contains("nobody@remote.test")),
        "{}",
        queue_list(&server)
    );
    assert!(server.log().contains("550"), "{}", server.log());
}

/// A backlog to one healthy destination is sent over several connections
/// at once, never more than `destination_concurrency`.
#[test]
fn a_backlog_to_one_destination_goes_out_in_parallel_within_its_limit() {
    let sink = SmtpSink::start(&[]);
    let dns = no_dns();
    let routes = format!("\"remote.test\" = \"{}\"\n", sink.addr);
    let server = Server::start_with(&format!(
        "[dns]\nresolver = \"{}\"\n\
         [outbound]\nenabled = false\nretry_schedule = [1]\ninitial_destination_concurrency = 2\ndestination_concurrency = 4\n\
         [outbound.routes]\n{routes}\
         [outbound.tls]\nmta_sts = false\ndane = \"off\"\n",
        dns.addr
    ));
    server.cli_ok(&["alias", "add", "fwd@example.org", "friend@remote.test"]);
    assert!(wait_until(Duration::from_secs(5), || server
        .rcpt_accepted("fwd@example.org")));
    // Queued while the sender is off, then sent at once after a restart.
    python(
        r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p))
for i in range(120):
    s.sendmail("someone@origin.test", ["fwd@example.org"], "Subject: burst %d\r\n\r\nx\r\n" % i)
s.quit()
"#,
        &[&addr_arg(server.smtp)],
    );
    let mut server = server;
    let config = std::fs::read_to_string(server.config_path()).unwrap();
    std::fs::write(
        server.config_path(),
        config.replace(
            "enabled = false\nretry_schedule",
            "enabled = true\nretry_schedule",
        ),
    )
    .unwrap();
    server.terminate();
    server.restart();
    assert!(
        wait_until(Duration::from_secs(30), || sink.messages().len() >= 120),
        "{} of 120 delivered\n{}",
        sink.messages().len(),
        queue_list(&server)
    );
    let parallel: Vec<usize> = server
        .log()
        .lines()
        .filter(|l| l.contains("outbound transaction"))
        .filter_map(|l| l.split("parallel=").nth(1))
        .filter_map(|v| v.split_whitespace().next()?.parse().ok())
        .collect();
    let most = parallel.iter().copied().max().unwrap_or(0);
    assert!(
        (2..=4).contains(&most),
        "parallel connections: {parallel:?}"
    );
}

/// Sends one message per `RCPT|SUBJECT|RCPT-OPTIONS` argument from
/// `sender` with MAIL options RET=FULL and ENVID=QQ314159; prints the
/// reply of each (`sent SUBJECT CODE`).
const SEND_WITH_DSN: &str = r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
sender = sys.argv[2]
for case in sys.argv[3:]:
    rcpt, subject, options = case.split("|")
    s = smtplib.SMTP(h, int(p))
    s.ehlo()
    assert s.has_extn("dsn"), s.esmtp_features
    try:
        s.sendmail(sender, [rcpt], "From: %s\r\nTo: %s\r\nSubject: %s\r\n\r\nbody\r\n" % (sender, rcpt, subject),
                   mail_options=["RET=FULL", "ENVID=QQ314159"], rcpt_options=options.split())
        print("sent", subject, 250)
    except smtplib.SMTPRecipientsRefused as e:
        print("sent", subject, list(e.recipients.values())[0][0])
    s.quit()
"#;

/// The reports in the INBOX of `user`: one line each, `SUBJECT-OF-ORIGINAL
/// | ACTION | ORIGINAL-ENVELOPE-ID | ORIGINAL-RECIPIENT`.
const READ_REPORTS: &str = r#"
import email, email.policy, imaplib, re, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(sys.argv[2], sys.argv[3]); m.select("INBOX")
typ, data = m.fetch("1:*", "(BODY.PEEK[])")
for d in data:
    if not isinstance(d, tuple):
        continue
    r = email.message_from_bytes(d[1], policy=email.policy.default)
    if r.get_content_type() != "multipart/report":
        continue
    parts = list(r.iter_parts())
    blocks = parts[1].get_payload()
    per_message, per_rcpt = blocks[0], blocks[1]
    original = parts[2].as_string()
    subject = re.search(r"Subject: (.*)", original).group(1).strip()
    print(subject, "|", per_rcpt["Action"], "|", per_message.get("Original-Envelope-Id"),
          "|", per_rcpt.get("Original-Recipient"), "|", parts[2].get_content_type())
"#;

#[test]
fn dsn_requests_are_handed_on_or_answered_as_asked() {
    let taking = SmtpSink::start(&[]);
    let silent = SmtpSink::start(&["-N"]);
    let refusing = SmtpSink::start(&["-f", "rcpt"]);
    let dns = no_dns();
    let server = server(
        &[
            ("dsn.test", taking.addr),
            ("nodsn.test", silent.addr),
            ("never.test", refusing.addr),
        ],
        dns.addr,
        25,
    );
    let alice = server.add_user("alice");
    let bob = server.add_user("bob");
    for (alias, target) in [
        ("fwd@example.org", "someone@dsn.test"),
        ("quiet@example.org", "someone@nodsn.test"),
        ("never@example.org", "someone@never.test"),
    ] {
        server.cli_ok(&["alias", "add", alias, target]);
        assert!(wait_until(Duration::from_secs(5), || server.rcpt_accepted(alias)));
    }
    let sent = python(
        SEND_WITH_DSN,
        &[
            &addr_arg(server.smtp),
            &alice,
            "fwd@example.org|handed on|NOTIFY=SUCCESS,FAILURE",
            "quiet@example.org|relayed|NOTIFY=SUCCESS ORCPT=rfc822;Quiet@Example.org",
            &format!("{bob}|delivered|NOTIFY=SUCCESS"),
            "never@example.org|refused quietly|NOTIFY=NEVER",
            "never@example.org|refused loudly|NOTIFY=FAILURE",
            &format!("{bob}|contradiction|NOTIFY=NEVER,SUCCESS"),
        ],
    );
    assert!(sent.contains("sent contradiction 501"), "{sent}");
    assert_eq!(sent.matches(" 250").count(), 5, "{sent}");

    // The server that takes DSN gets the requests and makes the reports.
    // (The sink writes a message as it comes: wait until it is whole.)
    assert!(wait_until(Duration::from_secs(20), || taking
        .messages()
        .first()
        .is_some_and(|m| m.contains("Subject: handed on"))));
    let handed = &taking.messages()[0];
    assert!(handed.contains("RET=FULL ENVID=QQ314159"), "{handed}");
    assert!(
        handed.contains("NOTIFY=SUCCESS,FAILURE ORCPT=rfc822;fwd@example.org"),
        "{handed}"
    );

    // Three reports for alice: relayed, delivered, one failure.
    let reports = || {
        python(
            READ_REPORTS,
            &[&addr_arg(server.imap), &alice, kit::PASSWORD],
        )
    };
    assert!(
        wait_until(Duration::from_secs(30), || reports().lines().count() >= 3),
        "{}\n{}",
        reports(),
        server.log()
    );
    std::thread::sleep(Duration::from_secs(2));
    let reports = reports();
    assert_eq!(reports.lines().count(), 3, "{reports}");
    assert!(
        reports.contains(
            "relayed | relayed | QQ314159 | rfc822; Quiet@Example.org | text/rfc822-headers"
        ),
        "{reports}"
    );
    assert!(
        reports.contains("delivered | delivered | QQ314159 | None | text/rfc822-headers"),
        "{reports}"
    );
    // RET=FULL: the failure report carries the message.
    assert!(
        reports.contains(
            "refused loudly | failed | QQ314159 | rfc822; never@example.org | message/rfc822"
        ),
        "{reports}"
    );
    assert!(
        !reports.contains("handed on") && !reports.contains("quietly"),
        "{reports}"
    );
}

#[test]
fn eight_bit_mail_is_not_sent_to_a_server_without_8bitmime() {
    // -8: the sink does not announce 8BITMIME.
    let seven = SmtpSink::start(&["-8"]);
    let dns = no_dns();
    let server = server(&[("seven.test", seven.addr)], dns.addr, 25);
    server.cli_ok(&["alias", "add", "old@example.org", "someone@seven.test"]);
    assert!(wait_until(Duration::from_secs(5), || server
        .rcpt_accepted("old@example.org")));
    python(
        r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p))
s.sendmail("someone@origin.test", ["old@example.org"], b"Subject: ascii\r\n\r\nplain\r\n")
s.sendmail("someone@origin.test", ["old@example.org"],
    "Subject: eight\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\ncaf\u00e9\r\n".encode())
s.quit()
"#,
        &[&addr_arg(server.smtp)],
    );
    assert!(
        wait_until(Duration::from_secs(20), || server
            .log()
            .contains("5.6.3 it has 8-bit content")),
        "{}",
        server.log()
    );
    assert!(wait_until(Duration::from_secs(10), || seven
        .messages()
        .iter()
        .any(|m| m.contains("Subject: ascii"))));
    assert!(
        !seven
            .messages()
            .iter()
            .any(|m| m.contains("Subject: eight")),
        "{:?}",
        seven.messages()
    );
}
