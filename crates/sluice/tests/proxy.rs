//! `sluice proxy` in front of real servers: Postfix as the upstream SMTP
//! server (delivering into a Maildir the test reads), Dovecot as the
//! upstream POP3 server; Python's smtplib, poplib and email package, and
//! swaks, as clients.

use sluice_testkit as kit;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kit::{free_port, python, swaks, wait_until, ChildLog, Dovecot, PostfixMx, SmtpSink};

/// A running `sluice proxy`.
struct Proxy {
    _dir: tempfile::TempDir,
    child: Child,
    log: ChildLog,
}

impl Proxy {
    /// Starts `sluice proxy` with these `[[proxy]]` entries (and `extra`
    /// config before them).
    fn start(extra: &str, entries: &str) -> Proxy {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("sluice.toml");
        std::fs::write(
            &config,
            format!(
                "hostname = \"proxy.example.org\"\ndata_dir = {:?}\n[log]\nlevel = \"info\"\n{extra}\n{entries}",
                dir.path().join("data")
            ),
        )
        .unwrap();
        let mut child = Command::new(kit::sluice_bin())
            .args(["proxy", "--config"])
            .arg(&config)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sluice proxy");
        let log = ChildLog::default();
        let started = log.follow(child.stderr.take().unwrap(), |line| {
            line.contains("sluice proxy started")
        });
        let proxy = Proxy {
            _dir: dir,
            child,
            log,
        };
        if started.recv_timeout(Duration::from_secs(30)).is_err() {
            panic!("sluice proxy did not start:\n{}", proxy.log());
        }
        proxy
    }

    fn log(&self) -> String {
        self.log.text()
    }

    fn wait_log(&self, text: &str) {
        assert!(
            wait_until(Duration::from_secs(20), || self.log().contains(text)),
            "no {text:?} in the proxy's log:\n{}",
            self.log()
        );
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn entry(protocol: &str, listen: SocketAddr, upstream: SocketAddr, more: &str) -> String {
    format!(
        "[[proxy]]\nprotocol = \"{protocol}\"\nlisten = \"{listen}\"\nupstream = \"{upstream}\"\n{more}\n"
    )
}

fn local(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Postfix as the upstream and a proxy in front of it.
fn smtp_pair(postfix_extra: &str, proxy_more: &str) -> (PostfixMx, Proxy, SocketAddr) {
    let postfix = PostfixMx::delivering("upstream.example.net", postfix_extra);
    let listen = local(free_port());
    let proxy = Proxy::start("", &entry("smtp", listen, postfix.addr, proxy_more));
    (postfix, proxy, listen)
}

/// Waits until Postfix has delivered `n` messages; returns them.
fn delivered(postfix: &PostfixMx, n: usize) -> Vec<Vec<u8>> {
    assert!(
        wait_until(Duration::from_secs(20), || postfix.delivered().len() >= n),
        "postfix delivered {} of {n}:\n{}",
        postfix.delivered().len(),
        postfix.log()
    );
    postfix.delivered()
}

/// Checks that `got` is `sent` with only Postfix's trace fields
/// (Return-Path, X-Original-To, Delivered-To, Received) put in front. Postfix's Maildir files have
/// Unix line ends: `sent` is compared with its CRLFs made LF.
fn same_but_trace(got: &[u8], sent: &[u8]) {
    let sent = &String::from_utf8_lossy(sent)
        .replace("\r\n", "\n")
        .into_bytes()[..];
    if !got.ends_with(sent) {
        // Where they part, counted from the end.
        let common = got
            .iter()
            .rev()
            .zip(sent.iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let window = |m: &[u8]| {
            let at = m.len() - common;
            String::from_utf8_lossy(&m[at.saturating_sub(200)..(at + 40).min(m.len())]).to_string()
        };
        panic!(
            "the delivered message is not the sent one ({} and {} bytes, {common} equal at the end):\n--- sent\n{}\n--- got\n{}",
            sent.len(),
            got.len(),
            window(sent),
            window(got)
        );
    }
    let prefix = String::from_utf8_lossy(&got[..got.len() - sent.len()]).to_string();
    for line in prefix.lines() {
        assert!(
            line.starts_with("Return-Path:")
                || line.starts_with("Delivered-To:")
                || line.starts_with("X-Original-To:")
                || line.starts_with("Received:")
                || line.starts_with([' ', '\t']),
            "unexpected field added upstream: {line:?}"
        );
    }
}

/// Python that builds the test messages: `clean(path)` and
/// `infected(path, eicar)` write one, with CRLF line ends.
const MESSAGES: &str = r#"
import io, sys, zipfile, email.policy
from email.message import EmailMessage

def base(subject):
    m = EmailMessage()
    m['From'] = 'sender@example.com'
    m['To'] = 'rcpt@example.net'
    m['Subject'] = subject
    m['Date'] = 'Wed, 25 Nov 2026 12:00:00 +0000'
    m['Message-ID'] = '<' + subject.replace(' ', '.') + '@example.com>'
    return m

def clean():
    m = base('clean message')
    m.set_content('Hello,\n.a line that starts with a dot\n..and two\n.\nthe end\n')
    m.add_attachment(bytes(range(256)) * 40, maintype='application', subtype='octet-stream', filename='data.bin')
    return m.as_bytes(policy=email.policy.SMTP)

def zipped(name, data):
    b = io.BytesIO()
    with zipfile.ZipFile(b, 'w', zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, data)
    return b.getvalue()

def infected(eicar):
    m = base('infected message')
    m.set_content('See the attachment.\n')
    inner = zipped('eicar.com', eicar.encode())
    outer = zipped('inner.zip', inner + bytes(range(256)) * 200)
    m.add_attachment(outer, maintype='application', subtype='zip', filename='outer.zip')
    m.add_attachment('This part comes after the attachment.\n', filename='after.txt')
    return m.as_bytes(policy=email.policy.SMTP)
"#;

/// Writes the clean and the infected message into files; returns them.
fn messages(dir: &std::path::Path) -> (Vec<u8>, Vec<u8>) {
    let clean = dir.join("clean.eml");
    let infected = dir.join("infected.eml");
    python(
        &format!(
            "{MESSAGES}\nopen(sys.argv[1], 'wb').write(clean())\nopen(sys.argv[2], 'wb').write(infected(sys.argv[3]))\n"
        ),
        &[
            clean.to_str().unwrap(),
            infected.to_str().unwrap(),
            std::str::from_utf8(scan::EICAR).unwrap(),
        ],
    );
    (
        std::fs::read(clean).unwrap(),
        std::fs::read(infected).unwrap(),
    )
}

/// Python: sends the files in argv[2:] through the SMTP server at argv[1]
/// in one session; prints one line per message: the code and the text.
const SEND: &str = r#"
import smtplib, sys
host, port = sys.argv[1].rsplit(':', 1)
s = smtplib.SMTP(host, int(port), timeout=30)
s.ehlo('client.example.com')
print('EHLO', ' '.join(sorted(k.upper() for k in s.esmtp_features)))
for path in sys.argv[2:]:
    data = open(path, 'rb').read()
    try:
        s.sendmail('sender@example.com', ['rcpt@example.net'], data)
        print('250 sent')
    except smtplib.SMTPDataError as e:
        print(e.smtp_code, e.smtp_error.decode())
s.quit()
"#;

#[test]
fn clean_mail_arrives_upstream_byte_for_byte_and_infected_mail_never_does() {
    let (postfix, proxy, listen) = smtp_pair("", "tls = \"starttls\"");
    let dir = tempfile::tempdir().unwrap();
    let (clean, infected) = messages(dir.path());
    let clean_path = dir.path().join("clean.eml");
    let infected_path = dir.path().join("infected.eml");
    // One session: clean, infected, clean again (the session goes on
    // after a refusal, on a fresh upstream connection).
    let out = python(
        SEND,
        &[
            &listen.to_string(),
            clean_path.to_str().unwrap(),
            infected_path.to_str().unwrap(),
            clean_path.to_str().unwrap(),
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    // The capabilities the proxy understands, and its own STARTTLS.
    let ehlo = lines[0];
    for kept in [
        "PIPELINING",
        "CHUNKING",
        "SIZE",
        "8BITMIME",
        "STARTTLS",
        "SMTPUTF8",
    ] {
        assert!(ehlo.contains(kept), "{ehlo}");
    }
    for dropped in ["VRFY", "ETRN", "XCLIENT", "XFORWARD"] {
        assert!(!ehlo.contains(dropped), "{ehlo}");
    }
    assert_eq!(lines[1], "250 sent", "{out}");
    assert!(
        lines[2].starts_with("554 5.7.1") && lines[2].contains(scan::EICAR_NAME),
        "{out}\n{}",
        proxy.log()
    );
    assert_eq!(lines[3], "250 sent", "{out}");
    let got = delivered(&postfix, 2);
    // Give Postfix time to deliver anything else it might have taken.
    std::thread::sleep(Duration::from_millis(500));
    let got_now = postfix.delivered();
    assert_eq!(got_now.len(), 2, "only the clean messages arrive");
    for g in &got {
        same_but_trace(g, &clean);
    }
    assert!(!infected.is_empty());
    assert_eq!(postfix.queued(), 0, "nothing waits in Postfix's queue");
    let plog = postfix.log();
    assert!(!plog.contains("infected message"), "{plog}");
    assert!(
        plog.contains("lost connection after DATA"),
        "postfix saw the transaction dropped:\n{plog}"
    );
    proxy.wait_log("message refused");
    proxy.wait_log("verdict=infected:");
}

/// Python: one raw session with pipelined commands and BDAT chunks,
/// printing every reply line it reads.
const PIPELINED: &str = r#"
import socket, sys
host, port = sys.argv[1].rsplit(':', 1)
message = open(sys.argv[2], 'rb').read()
bad = open(sys.argv[3], 'rb').read()
s = socket.create_connection((host, int(port)), timeout=30)
f = s.makefile('rb')
def reply():
    lines = []
    while True:
        line = f.readline().decode()
        lines.append(line.strip())
        if len(line) < 4 or line[3] != '-':
            return lines
print(reply()[-1])
s.sendall(b'EHLO client.example.com\r\n')
print(reply()[-1])
# DATA, with MAIL, RCPT and DATA in one packet.
s.sendall(b'MAIL FROM:<sender@example.com>\r\nRCPT TO:<a@example.net>\r\nRCPT TO:<b@example.net>\r\nDATA\r\n')
for _ in range(4):
    print(reply()[-1])
body = message.replace(b'\r\n.', b'\r\n..')
s.sendall(body + b'.\r\n')
print(reply()[-1])
# BDAT: everything in one go, the message in three chunks.
third = len(message) // 3
chunks = [message[:third], message[third:2 * third], message[2 * third:]]
out = b'MAIL FROM:<sender@example.com>\r\nRCPT TO:<c@example.net>\r\n'
for i, c in enumerate(chunks):
    last = b' LAST' if i == 2 else b''
    out += b'BDAT %d%s\r\n' % (len(c), last) + c
s.sendall(out)
for _ in range(5):
    print(reply()[-1])
# A message whose last chunk is empty: BDAT 0 LAST alone.
s.sendall(b'MAIL FROM:<sender@example.com>\r\nRCPT TO:<e@example.net>\r\nBDAT %d\r\n' % len(message) + message + b'BDAT 0 LAST\r\n')
for _ in range(4):
    print(reply()[-1])
# An infected message by BDAT is refused at LAST.
s.sendall(b'MAIL FROM:<sender@example.com>\r\nRCPT TO:<d@example.net>\r\nBDAT %d LAST\r\n' % len(bad) + bad)
for _ in range(3):
    print(reply()[-1])
s.sendall(b'QUIT\r\n')
print(reply()[-1])
"#;

#[test]
fn pipelining_and_bdat_pass_through() {
    let (postfix, proxy, listen) = smtp_pair("", "tls = \"none\"");
    let dir = tempfile::tempdir().unwrap();
    let (clean, _) = messages(dir.path());
    let out = python(
        PIPELINED,
        &[
            &listen.to_string(),
            dir.path().join("clean.eml").to_str().unwrap(),
            dir.path().join("infected.eml").to_str().unwrap(),
        ],
    );
    let codes: Vec<&str> = out.lines().map(|l| l.get(..3).unwrap_or(l)).collect();
    assert_eq!(
        codes,
        [
            "220", "250", "250", "250", "250", "354", "250", "250", "250", "250", "250", "250",
            "250", "250", "250", "250", "250", "250", "554", "221"
        ],
        "{out}\n{}",
        proxy.log()
    );
    // Two recipients by DATA, two messages by BDAT; the infected BDAT
    // message for d@ never arrives.
    let got = delivered(&postfix, 4);
    for g in &got {
        same_but_trace(g, &clean);
    }
    std::thread::sleep(Duration::from_millis(500));
    let got = postfix.delivered();
    assert_eq!(got.len(), 4);
    assert!(!got
        .iter()
        .any(|m| String::from_utf8_lossy(m).contains("d@example.net")));
    assert_eq!(postfix.queued(), 0);
}

#[test]
fn starttls_with_the_client() {
    let (postfix, proxy, listen) = smtp_pair("", "");
    let out = swaks(&[
        "--server",
        &listen.to_string(),
        "--tls",
        "--ehlo",
        "client.example.com",
        "--from",
        "sender@example.com",
        "--to",
        "rcpt@example.net",
        "--header",
        "Subject: over TLS",
        "--body",
        "sent with STARTTLS through the proxy",
    ]);
    let transcript = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{transcript}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        proxy.log()
    );
    assert!(transcript.contains("TLS started"), "{transcript}");
    let got = delivered(&postfix, 1);
    assert!(String::from_utf8_lossy(&got[0]).contains("sent with STARTTLS through the proxy"));
}

#[test]
fn xclient_gives_the_upstream_the_real_client() {
    let (postfix, proxy, listen) = smtp_pair(
        "smtpd_authorized_xclient_hosts = 127.0.0.1\n",
        "client_address = \"xclient\"",
    );
    // The clients connect from 127.0.0.2 and then 127.0.0.3; the proxy
    // from 127.0.0.1. Each gets an upstream connection of its own:
    // Postfix takes XCLIENT once per connection.
    let out = python(
        r#"
import smtplib, sys
host, port = sys.argv[1].rsplit(':', 1)
for client in ('127.0.0.2', '127.0.0.3'):
    s = smtplib.SMTP(host, int(port), timeout=30, source_address=(client, 0))
    s.sendmail('sender@example.com', ['rcpt@example.net'], b'Subject: x\r\n\r\nfrom ' + client.encode() + b'\r\n')
    s.quit()
print('ok')
"#,
        &[&listen.to_string()],
    );
    assert_eq!(out.trim(), "ok", "{}", proxy.log());
    let mut seen = Vec::new();
    for message in delivered(&postfix, 2) {
        let text = String::from_utf8_lossy(&message).to_string();
        let client = if text.contains("from 127.0.0.2") {
            "127.0.0.2"
        } else {
            "127.0.0.3"
        };
        assert!(text.contains(&format!("[{client}]")), "{text}");
        seen.push(client);
    }
    seen.sort();
    assert_eq!(seen, ["127.0.0.2", "127.0.0.3"]);
}

#[test]
fn sessions_one_after_another_share_an_upstream_connection() {
    let (postfix, proxy, listen) = smtp_pair("", "");
    let out = python(
        r#"
import smtplib, sys
host, port = sys.argv[1].rsplit(':', 1)
for n in range(3):
    s = smtplib.SMTP(host, int(port), timeout=30)
    s.sendmail('sender@example.com', ['rcpt@example.net'], b'Subject: %d\r\n\r\nbody\r\n' % n)
    code, text = s.quit()
    assert code == 221, (code, text)
print('ok')
"#,
        &[&listen.to_string()],
    );
    assert_eq!(out.trim(), "ok", "{}", proxy.log());
    assert_eq!(delivered(&postfix, 3).len(), 3);
    // Once it has waited long enough, the proxy ends the connection with
    // QUIT, and Postfix logs the three sessions' commands on it. Every
    // other connection did nothing (the kit's check that Postfix listens).
    let served = "ehlo=3 mail=3 rcpt=3 data=3 quit=1 commands=13";
    assert!(
        wait_until(Duration::from_secs(20), || postfix.log().contains(served)),
        "{}",
        postfix.log()
    );
    let log = postfix.log();
    let busy: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("]: disconnect from ") && !l.contains("commands=0/0"))
        .collect();
    assert_eq!(busy.len(), 1, "{log}");
    assert!(busy[0].contains(served), "{log}");
}

#[test]
fn an_unreachable_upstream_is_a_temporary_failure() {
    // Nothing listens on either upstream port.
    let dead = local(free_port());
    let smtp = local(free_port());
    let pop3 = local(free_port());
    let proxy = Proxy::start(
        "",
        &format!(
            "{}{}",
            entry(
                "smtp",
                smtp,
                dead,
                "tls = \"none\"\nconnect_timeout_secs = 2"
            ),
            entry(
                "pop3",
                pop3,
                dead,
                "tls = \"none\"\nconnect_timeout_secs = 2"
            )
        ),
    );
    let out = python(
        r#"
import socket, sys
for a in sys.argv[1:]:
    host, port = a.rsplit(':', 1)
    s = socket.create_connection((host, int(port)), timeout=30)
    print(s.makefile('rb').readline().decode().strip())
"#,
        &[&smtp.to_string(), &pop3.to_string()],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("421 4.3.0 "), "{out}");
    assert!(lines[1].starts_with("-ERR [SYS/TEMP] "), "{out}");
    proxy.wait_log("upstream unavailable");
}

#[test]
fn a_client_killed_mid_data_leaves_nothing_upstream() {
    let (postfix, proxy, listen) = smtp_pair("", "tls = \"none\"");
    let mut client = kit::python_spawn(
        r#"
import socket, sys
host, port = sys.argv[1].rsplit(':', 1)
s = socket.create_connection((host, int(port)), timeout=30)
f = s.makefile('rb')
f.readline()
s.sendall(b'HELO client.example.com\r\nMAIL FROM:<sender@example.com>\r\nRCPT TO:<rcpt@example.net>\r\nDATA\r\n')
for _ in range(4):
    f.readline()
s.sendall(b'Subject: half\r\n\r\n' + b'half a message\r\n' * 5000)
print('sent', flush=True)
sys.stdin.readline()
"#,
        &[&listen.to_string()],
    );
    let mut said = String::new();
    BufReader::new(client.stdout.as_mut().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert_eq!(said.trim(), "sent");
    // The client dies without finishing the message.
    client.kill().unwrap();
    client.wait().unwrap();
    proxy.wait_log("client gone during DATA");
    assert!(
        wait_until(Duration::from_secs(20), || postfix
            .log()
            .contains("lost connection after DATA")),
        "{}",
        postfix.log()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(postfix.delivered().is_empty());
    assert_eq!(postfix.queued(), 0);
}

#[test]
fn serve_starts_proxy_entries_too() {
    let sink = SmtpSink::start(&[]);
    let listen = local(free_port());
    let server = kit::Server::start_with(&entry("smtp", listen, sink.addr, "tls = \"none\""));
    let out = python(
        r#"
import smtplib, sys
host, port = sys.argv[1].rsplit(':', 1)
s = smtplib.SMTP(host, int(port), timeout=30)
s.sendmail('sender@example.com', ['rcpt@example.net'], b'Subject: via serve\r\n\r\nthrough the proxy of sluice serve\r\n')
s.quit()
print('ok')
"#,
        &[&listen.to_string()],
    );
    assert_eq!(out.trim(), "ok", "{}", server.log());
    assert!(
        wait_until(Duration::from_secs(10), || sink
            .messages()
            .iter()
            .any(|m| m.contains("through the proxy of sluice serve"))),
        "{:?}",
        sink.messages()
    );
}

/// Dovecot with a POP3 listener, a proxy in front, and the two test
/// messages in the account's inbox (clean first).
fn pop3_pair() -> (Dovecot, Proxy, SocketAddr, Vec<u8>, Vec<u8>) {
    let dovecot = Dovecot::start_with_pop3(&[("user@example.net", "secret")]);
    let dir = tempfile::tempdir().unwrap();
    let (clean, infected) = messages(dir.path());
    dovecot.deliver("user@example.net", &clean);
    std::thread::sleep(Duration::from_millis(20));
    dovecot.deliver("user@example.net", &infected);
    let listen = local(free_port());
    let proxy = Proxy::start(
        "",
        &entry("pop3", listen, dovecot.pop3.unwrap(), "tls = \"starttls\""),
    );
    (dovecot, proxy, listen, clean, infected)
}

/// Python: logs in at argv[1] (with STLS when argv[2] is "tls") and
/// prints, hex-encoded, the RETR of each message and the TOP 1 0 and
/// TOP 1 3 answers, one per line.
const FETCH: &str = r#"
import poplib, ssl, sys
host, port = sys.argv[1].rsplit(':', 1)
p = poplib.POP3(host, int(port), timeout=30)
if sys.argv[2] == 'tls':
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    p.stls(ctx)
p.user('user@example.net')
p.pass_('secret')
count, _ = p.stat()
def joined(lines):
    return b''.join(l + b'\r\n' for l in lines)
order = sorted(range(1, count + 1), key=lambda i: b'infected' in joined(p.top(i, 0)[1]))
for i in order:
    print(joined(p.retr(i)[1]).hex())
print(joined(p.top(order[0], 0)[1]).hex())
print(joined(p.top(order[0], 3)[1]).hex())
p.quit()
"#;

#[test]
fn pop3_clean_messages_and_top_arrive_as_the_upstream_has_them() {
    let (dovecot, proxy, listen, clean, _) = pop3_pair();
    let direct = python(FETCH, &[&dovecot.pop3.unwrap().to_string(), "plain"]);
    let proxied = python(FETCH, &[&listen.to_string(), "tls"]);
    let direct: Vec<&str> = direct.lines().collect();
    let proxied: Vec<&str> = proxied.lines().collect();
    assert_eq!(direct.len(), 4);
    // The clean message comes first: equal through the proxy.
    let first = hex(direct[0]);
    assert!(String::from_utf8_lossy(&first).contains("clean message"));
    assert_eq!(first, clean, "Dovecot's copy is the delivered file");
    assert_eq!(proxied[0], direct[0], "RETR of the clean message");
    assert_eq!(proxied[2], direct[2], "TOP n 0");
    assert_eq!(proxied[3], direct[3], "TOP n 3");
    proxy.wait_log("command=RETR");
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn pop3_infected_message_arrives_cut_and_well_formed() {
    let (dovecot, proxy, listen, _, infected) = pop3_pair();
    let direct = python(FETCH, &[&dovecot.pop3.unwrap().to_string(), "plain"]);
    let proxied = python(FETCH, &[&listen.to_string(), "plain"]);
    let whole = hex(direct.lines().nth(1).unwrap());
    assert_eq!(whole, infected);
    let cut = hex(proxied.lines().nth(1).unwrap());
    assert!(cut.len() < whole.len());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.eml");
    std::fs::write(&path, &cut).unwrap();
    // Python's email package reads it as a whole message: the text part,
    // the attachment cut short, then the notice; the part after the
    // attachment is gone.
    let report = python(
        r#"
import email, email.policy, sys
m = email.message_from_bytes(open(sys.argv[1], 'rb').read(), policy=email.policy.default)
print('multipart', m.is_multipart())
for part in m.walk():
    print('part', part.get_content_type(), part.get_filename(), [type(d).__name__ for d in part.defects])
notice = [p for p in m.walk() if p.get_filename() == 'removed-by-sluice.txt'][0]
print('notice', notice.get_content().replace('\r\n', ' ').replace('\n', ' '))
attachment = [p for p in m.walk() if p.get_filename() == 'outer.zip'][0]
print('attachment', len(attachment.get_payload()))
"#,
        &[path.to_str().unwrap()],
    );
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines[0], "multipart True", "{report}");
    assert_eq!(lines[1], "part multipart/mixed None []", "{report}");
    assert_eq!(lines[2], "part text/plain None []", "{report}");
    assert!(
        lines[3].starts_with("part application/zip outer.zip"),
        "{report}"
    );
    assert_eq!(
        lines[4], "part text/plain removed-by-sluice.txt []",
        "{report}"
    );
    assert!(
        lines[5].starts_with("notice ") && lines[5].contains(scan::EICAR_NAME),
        "{report}"
    );
    assert!(!report.contains("after.txt"), "{report}");
    // The attachment was cut: its encoded text is shorter than the original's.
    let whole_text = String::from_utf8_lossy(&whole).to_string();
    let start = whole_text.find("filename=\"outer.zip\"").unwrap();
    let original_len = whole_text[start..]
        .split("\r\n\r\n")
        .nth(1)
        .unwrap()
        .split("\r\n--")
        .next()
        .unwrap()
        .len();
    let got_len: usize = lines[6].trim_start_matches("attachment ").parse().unwrap();
    assert!(got_len < original_len, "{got_len} of {original_len}");
    proxy.wait_log("cut: virus found");
}

/// An infected attachment far longer than one read: the client gets the
/// message up to a point inside the attachment (its header and a part of
/// its text, never all of it), then the notice, well-formed.
#[test]
fn pop3_a_long_infected_attachment_arrives_cut_inside_it() {
    let dovecot = Dovecot::start_with_pop3(&[("user@example.net", "secret")]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.eml");
    python(
        &format!(
            "{MESSAGES}\n\
import random, zipfile\n\
b = io.BytesIO()\n\
z = zipfile.ZipFile(b, 'w', zipfile.ZIP_STORED)\n\
z.writestr('noise.bin', random.Random(7).randbytes(600000))\n\
z.writestr('eicar.com', sys.argv[2].encode())\n\
z.close()\n\
m = base('long infected message')\n\
m.set_content('See the attachment.\\n\\nA second paragraph.\\n')\n\
m.add_attachment(b.getvalue(), maintype='application', subtype='zip', filename='long.zip')\n\
m.add_attachment('This part comes after the attachment.\\n', filename='after.txt')\n\
open(sys.argv[1], 'wb').write(m.as_bytes(policy=email.policy.SMTP))\n"
        ),
        &[
            path.to_str().unwrap(),
            std::str::from_utf8(scan::EICAR).unwrap(),
        ],
    );
    dovecot.deliver("user@example.net", &std::fs::read(&path).unwrap());
    let listen = local(free_port());
    let proxy = Proxy::start("", &entry("pop3", listen, dovecot.pop3.unwrap(), ""));
    let report = python(
        r#"
import email, email.policy, poplib, sys
host, port = sys.argv[1].rsplit(':', 1)
p = poplib.POP3(host, int(port), timeout=30)
p.user('user@example.net')
p.pass_('secret')
cut = b''.join(l + b'\r\n' for l in p.retr(1)[1])
p.quit()
m = email.message_from_bytes(cut, policy=email.policy.default)
for part in m.walk():
    print('part', part.get_content_type(), part.get_filename(), [type(d).__name__ for d in part.defects])
body = [p for p in m.walk() if p.get_content_type() == 'text/plain' and not p.get_filename()][0]
print('text', ' '.join(body.get_content().split()))
attachment = [p for p in m.walk() if p.get_filename() == 'long.zip'][0]
print('attachment', len(attachment.get_payload()))
whole = email.message_from_bytes(open(sys.argv[2], 'rb').read(), policy=email.policy.default)
print('whole', len([p for p in whole.walk() if p.get_filename() == 'long.zip'][0].get_payload()))
"#,
        &[&listen.to_string(), path.to_str().unwrap()],
    );
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines[0], "part multipart/mixed None []", "{report}");
    assert_eq!(lines[1], "part text/plain None []", "{report}");
    assert!(
        lines[2].starts_with("part application/zip long.zip"),
        "{report}"
    );
    assert_eq!(
        lines[3], "part text/plain removed-by-sluice.txt []",
        "{report}"
    );
    assert_eq!(lines.len(), 7, "nothing after the notice: {report}");
    // The clean text part is whole, up to its last line.
    assert_eq!(
        lines[4], "text See the attachment. A second paragraph.",
        "{report}"
    );
    // Much of the attachment's text went through before the find (the
    // EICAR file comes last in the zip), never all of it.
    let sent: usize = lines[5].trim_start_matches("attachment ").parse().unwrap();
    let original: usize = lines[6].trim_start_matches("whole ").parse().unwrap();
    assert!(
        sent > 100_000 && sent < original,
        "{sent} of {original} bytes: {report}"
    );
    proxy.wait_log("cut: virus found");
}

#[test]
fn pop3_fetchmail_through_the_proxy() {
    let program = kit::require_program("fetchmail", "fetchmail");
    let (_dovecot, proxy, listen, clean, _) = pop3_pair();
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("fetched");
    let rc = dir.path().join("fetchmailrc");
    std::fs::write(
        &rc,
        format!(
            "poll 127.0.0.1 service {} protocol pop3 user \"user@example.net\" password \"secret\" sslproto '' keep mda \"/bin/sh -c 'cat >> {}'\"\n",
            listen.port(),
            out_file.display()
        ),
    )
    .unwrap();
    let mut perms = std::fs::metadata(&rc).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o600);
    std::fs::set_permissions(&rc, perms).unwrap();
    let started = Instant::now();
    let out = Command::new(program)
        // A lock file of its own (as root the default is machine-wide).
        .args(["-f", rc.to_str().unwrap(), "--nosyslog", "-v", "--pidfile"])
        .arg(dir.path().join("fetchmail.pid"))
        .env("HOME", dir.path())
        .output()
        .unwrap();
    let fetched = std::fs::read(&out_file).unwrap_or_default();
    let text = String::from_utf8_lossy(&fetched);
    assert!(
        text.contains("clean message") && text.contains("removed-by-sluice.txt"),
        "fetchmail ({:?}):\n{}\n{}\n{}",
        started.elapsed(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        proxy.log()
    );
    assert!(!text.contains("after the attachment"), "{text}");
    let _ = clean;
}

#[test]
fn proxy_protocol_gives_the_upstream_the_real_client() {
    let (postfix, proxy, listen) = smtp_pair(
        "smtpd_upstream_proxy_protocol = haproxy\n",
        "client_address = \"proxy-v2\"",
    );
    let out = python(
        r#"
import smtplib, sys
host, port = sys.argv[1].rsplit(':', 1)
s = smtplib.SMTP(host, int(port), timeout=30, source_address=('127.0.0.3', 0))
s.sendmail('sender@example.com', ['rcpt@example.net'], b'Subject: x\r\n\r\nby haproxy header\r\n')
s.quit()
print('ok')
"#,
        &[&listen.to_string()],
    );
    assert_eq!(out.trim(), "ok", "{}", proxy.log());
    let got = String::from_utf8_lossy(&delivered(&postfix, 1)[0]).to_string();
    assert!(got.contains("[127.0.0.3]"), "{got}");
}

/// A CA and a certificate it signed for `name`, as PEM: (CA, certificate, key).
fn ca_and_certificate(name: &str) -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec![name.to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    (ca.pem(), leaf.pem(), key.serialize_pem())
}

#[test]
fn starttls_to_the_upstream_is_verified_against_its_ca() {
    let (ca, cert, key) = ca_and_certificate("upstream.example.net");
    let postfix = PostfixMx::start("upstream.example.net", &cert, &key);
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let trusted = local(free_port());
    let untrusted = local(free_port());
    let tls =
        "tls = \"none\"\nupstream_tls = \"starttls\"\nupstream_name = \"upstream.example.net\"";
    let proxy = Proxy::start(
        "",
        &format!(
            "{}{}",
            entry(
                "smtp",
                trusted,
                postfix.addr,
                &format!("{tls}\nupstream_ca_file = {ca_file:?}")
            ),
            // Public roots only: Postfix's certificate is not trusted.
            entry("smtp", untrusted, postfix.addr, tls)
        ),
    );
    let out = python(
        r#"
import smtplib, socket, sys
host, port = sys.argv[1].rsplit(':', 1)
s = smtplib.SMTP(host, int(port), timeout=30)
s.sendmail('sender@example.com', ['rcpt@example.net'], b'Subject: x\r\n\r\nover TLS upstream\r\n')
s.quit()
host, port = sys.argv[2].rsplit(':', 1)
s = socket.create_connection((host, int(port)), timeout=30)
print(s.makefile('rb').readline().decode().strip())
"#,
        &[&trusted.to_string(), &untrusted.to_string()],
    );
    assert!(
        out.trim().starts_with("421 4.3.0"),
        "{out}\n{}",
        proxy.log()
    );
    assert!(
        wait_until(Duration::from_secs(20), || {
            let log = postfix.log();
            log.contains("TLS connection established from") && log.contains("status=sent")
        }),
        "{}",
        postfix.log()
    );
    proxy.wait_log("upstream unavailable");
}

/// The proxy's peak resident memory so far, in KiB.
fn peak_kb(proxy: &Proxy) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", proxy.child.id())).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_50_mb_message_goes_through_in_flat_memory() {
    let (postfix, proxy, listen) = smtp_pair(
        "message_size_limit = 100000000\nvirtual_mailbox_limit = 100000000\n",
        "tls = \"none\"",
    );
    // Warm up: one small message, so the baseline has a session's buffers.
    python(
        r#"
import smtplib, sys
host, port = sys.argv[1].rsplit(':', 1)
s = smtplib.SMTP(host, int(port), timeout=30)
s.sendmail('sender@example.com', ['rcpt@example.net'], b'Subject: small\r\n\r\nsmall\r\n')
s.quit()
"#,
        &[&listen.to_string()],
    );
    delivered(&postfix, 1);
    let before = peak_kb(&proxy);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.eml");
    let out = python(
        r#"
import os, smtplib, sys, email.policy
from email.message import EmailMessage
m = EmailMessage()
m['From'] = 'sender@example.com'
m['To'] = 'rcpt@example.net'
m['Subject'] = 'big'
m['Date'] = 'Wed, 25 Nov 2026 12:00:00 +0000'
m['Message-ID'] = '<big@example.com>'
m.set_content('A large attachment follows.\n')
m.add_attachment(os.urandom(37 * 1024 * 1024), maintype='application', subtype='octet-stream', filename='big.bin')
data = m.as_bytes(policy=email.policy.SMTP)
open(sys.argv[2], 'wb').write(data)
host, port = sys.argv[1].rsplit(':', 1)
s = smtplib.SMTP(host, int(port), timeout=120)
s.sendmail('sender@example.com', ['rcpt@example.net'], data)
s.quit()
print(len(data))
"#,
        &[&listen.to_string(), path.to_str().unwrap()],
    );
    let size: usize = out.trim().parse().unwrap();
    assert!(size > 50_000_000, "{size}");
    let got = delivered(&postfix, 2);
    let big = got
        .iter()
        .find(|m| m.len() > 50_000_000)
        .expect("the big message");
    same_but_trace(big, &std::fs::read(&path).unwrap());
    let after = peak_kb(&proxy);
    // The message is 50 MB; the proxy's peak grew by a small fraction of it.
    assert!(
        after - before < 8 * 1024,
        "peak resident memory grew from {before} KiB to {after} KiB for a {size}-byte message"
    );
    println!("peak resident memory {before} KiB before, {after} KiB after a {size}-byte message");
}

#[test]
fn implicit_tls_with_the_client() {
    let (postfix, proxy, listen) = smtp_pair("", "tls = \"implicit\"");
    let out = python(
        r#"
import smtplib, ssl, sys
host, port = sys.argv[1].rsplit(':', 1)
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
s = smtplib.SMTP_SSL(host, int(port), timeout=30, context=ctx)
code, caps = s.ehlo('client.example.com')
assert b'STARTTLS' not in caps, caps
s.sendmail('sender@example.com', ['rcpt@example.net'], b'Subject: tls\r\n\r\nover implicit TLS\r\n')
s.quit()
print('ok')
"#,
        &[&listen.to_string()],
    );
    assert_eq!(out.trim(), "ok", "{}", proxy.log());
    let got = String::from_utf8_lossy(&delivered(&postfix, 1)[0]).to_string();
    assert!(got.contains("over implicit TLS"), "{got}");
}

/// Sluice as the upstream: SMTP to its submissions port (implicit TLS)
/// with AUTH passed through challenge by challenge, POP3 to its pop3 port
/// with STLS; both verified against the CA that signed its certificate.
#[test]
fn auth_and_tls_upstreams_pass_through_to_sluice() {
    let (ca, cert, key) = ca_and_certificate("upstream.example.net");
    let files = tempfile::tempdir().unwrap();
    let (ca_file, cert_file, key_file) = (
        files.path().join("ca.pem"),
        files.path().join("cert.pem"),
        files.path().join("key.pem"),
    );
    std::fs::write(&ca_file, ca).unwrap();
    std::fs::write(&cert_file, cert).unwrap();
    std::fs::write(&key_file, key).unwrap();
    let server = kit::Server::start_with(&format!(
        "[tls]\ncert = {cert_file:?}\nkey = {key_file:?}\n"
    ));
    let alice = server.add_user("alice");
    let bob = server.add_user("bob");
    let (smtp, pop3) = (local(free_port()), local(free_port()));
    let verified =
        format!("upstream_name = \"upstream.example.net\"\nupstream_ca_file = {ca_file:?}");
    let proxy = Proxy::start(
        "",
        &format!(
            "{}{}",
            entry(
                "smtp",
                smtp,
                server.addr("submissions"),
                &format!("tls = \"starttls\"\nupstream_tls = \"implicit\"\n{verified}")
            ),
            entry(
                "pop3",
                pop3,
                server.pop3,
                &format!("tls = \"none\"\nupstream_tls = \"starttls\"\n{verified}")
            ),
        ),
    );
    let out = python(
        r#"
import poplib, smtplib, ssl, sys
smtp, pop3, alice, bob, password = sys.argv[1:6]
unverified = ssl._create_unverified_context()
host, port = smtp.rsplit(':', 1)
s = smtplib.SMTP(host, int(port), timeout=30)
s.starttls(context=unverified)
try:
    s.login(alice, 'wrong password')
except smtplib.SMTPAuthenticationError as e:
    print('wrong password', e.smtp_code)
s.login(alice, password)
s.sendmail(alice, [bob], b'From: ' + alice.encode() + b'\r\nSubject: through\r\n\r\nauthenticated and clean\r\n')
eicar = b'X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*'
try:
    s.sendmail(alice, [bob], b'From: ' + alice.encode() + b'\r\nSubject: bad\r\n\r\n' + eicar + b'\r\n')
    print('infected accepted')
except smtplib.SMTPDataError as e:
    print('infected refused', e.smtp_code)
# An authenticated upstream session cannot be replayed: the proxy ends
# the client's at its next command (smtplib's own RSET after the refusal).
try:
    code = s.noop()[0]
    print('after the refusal', 'ended' if code == 421 else code)
except smtplib.SMTPServerDisconnected:
    print('after the refusal ended')
host, port = pop3.rsplit(':', 1)
p = poplib.POP3(host, int(port), timeout=30)
p.user(bob)
p.pass_(password)
count, _ = p.stat()
print('messages', count)
print('body', b'authenticated and clean' in b'\r\n'.join(p.retr(1)[1]))
p.quit()
"#,
        &[
            &smtp.to_string(),
            &pop3.to_string(),
            &alice,
            &bob,
            kit::PASSWORD,
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "wrong password 535",
            "infected refused 554",
            "after the refusal ended",
            "messages 1",
            "body True",
        ],
        "{out}\n{}\n{}",
        proxy.log(),
        server.log()
    );
    proxy.wait_log("verdict=infected:");
}

/// `[scan] engine = "clamd"`: the SMTP proxy streams each decoded part to
/// clamd; with clamd gone, mail is deferred with 451, never passed on
/// unscanned. A POP3 entry refuses clamd at start: clamd answers for a
/// part only once the client would have it whole.
#[test]
fn the_smtp_proxy_scans_with_clamd_and_defers_mail_without_it() {
    let clamd = kit::Clamd::start();
    let postfix = PostfixMx::delivering("upstream.example.net", "");
    let listen = local(free_port());
    let proxy = Proxy::start(
        &clamd.scan_config(),
        &entry("smtp", listen, postfix.addr, "tls = \"none\""),
    );
    let dir = tempfile::tempdir().unwrap();
    messages(dir.path());
    let clean = dir.path().join("clean.eml");
    let infected = dir.path().join("infected.eml");
    let (clean, infected) = (clean.to_str().unwrap(), infected.to_str().unwrap());
    let out = python(SEND, &[&listen.to_string(), clean, infected]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[1], "250 sent", "{out}\n{}", proxy.log());
    assert!(
        lines[2].starts_with("554 5.7.1") && lines[2].contains(kit::CLAMD_EICAR_NAME),
        "{out}\n{}",
        proxy.log()
    );
    drop(clamd);
    let out = python(SEND, &[&listen.to_string(), clean]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[1].starts_with("451 4.3.0"), "{out}\n{}", proxy.log());
    proxy.wait_log("verdict=error:");
    delivered(&postfix, 1);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(postfix.delivered().len(), 1, "only the first clean message");

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sluice.toml");
    std::fs::write(
        &config,
        format!(
            "hostname = \"proxy.example.org\"\ndata_dir = {:?}\n[scan]\nengine = \"clamd\"\n{}",
            dir.path().join("data"),
            entry(
                "pop3",
                local(free_port()),
                local(free_port()),
                "tls = \"none\""
            )
        ),
    )
    .unwrap();
    let out = Command::new(kit::sluice_bin())
        .args(["proxy", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("a pop3 entry needs [scan] engine = \"builtin\""),
        "{err}"
    );
}

/// Runs `program args` and panics with its output if it fails.
fn run_ok(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("{program}: {e} (./test.sh installs iproute2, nftables and util-linux)")
        });
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Transparent interception: a firewall rule redirects the client's
/// connection to Postfix towards the proxy, which finds where it was going
/// with SO_ORIGINAL_DST and passes it on there, scanning it. The test runs
/// again inside a network namespace of its own (`unshare --net`, as root),
/// so the nftables rule touches nothing outside it.
#[test]
fn transparent_interception_sends_redirected_mail_where_it_was_going() {
    const INSIDE: &str = "SLUICE_TEST_IN_NETNS";
    let name = "transparent_interception_sends_redirected_mail_where_it_was_going";
    if std::env::var_os(INSIDE).is_none() {
        kit::require_program("unshare", "util-linux");
        let status = Command::new("unshare")
            .arg("--net")
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .env(INSIDE, "1")
            .status()
            .unwrap();
        assert!(
            status.success(),
            "the test inside its network namespace failed"
        );
        return;
    }
    run_ok("ip", &["link", "set", "lo", "up"]);
    let postfix = PostfixMx::delivering("upstream.example.net", "");
    let listen = local(free_port());
    let proxy = Proxy::start(
        "",
        &format!(
            "[[proxy]]\nprotocol = \"smtp\"\nlisten = \"{listen}\"\nupstream = \"original-destination\"\ntls = \"none\"\n"
        ),
    );
    // Clients on 127.0.0.2 going to Postfix's port are sent to the proxy;
    // the proxy's own connection, from 127.0.0.1, is not.
    let rules = format!(
        "table ip intercept {{\n chain out {{\n  type nat hook output priority -100;\n  ip saddr 127.0.0.2 tcp dport {} redirect to :{}\n }}\n}}\n",
        postfix.addr.port(),
        listen.port()
    );
    let dir = tempfile::tempdir().unwrap();
    let rules_file = dir.path().join("intercept.nft");
    std::fs::write(&rules_file, rules).unwrap();
    kit::require_program("nft", "nftables");
    run_ok("nft", &["-f", rules_file.to_str().unwrap()]);
    messages(dir.path());
    let out = python(
        r#"
import smtplib, socket, sys
host, port = sys.argv[1].rsplit(':', 1)
for path in sys.argv[2:4]:
    s = smtplib.SMTP(host, int(port), timeout=30, source_address=('127.0.0.2', 0))
    try:
        s.sendmail('sender@example.com', ['rcpt@example.net'], open(path, 'rb').read())
        print('250 sent')
    except smtplib.SMTPDataError as e:
        print(e.smtp_code, e.smtp_error.decode())
    s.quit()
# Straight to the proxy, not redirected: refused, not looped back to itself.
host, port = sys.argv[4].rsplit(':', 1)
s = socket.create_connection((host, int(port)), timeout=30)
print(s.makefile('rb').readline().decode().strip())
"#,
        &[
            &postfix.addr.to_string(),
            dir.path().join("clean.eml").to_str().unwrap(),
            dir.path().join("infected.eml").to_str().unwrap(),
            &listen.to_string(),
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "250 sent", "{out}\n{}", proxy.log());
    // Postfix does not scan: the refusal shows the proxy was in the way.
    assert!(
        lines[1].starts_with("554 5.7.1") && lines[1].contains(scan::EICAR_NAME),
        "{out}\n{}",
        proxy.log()
    );
    assert!(lines[2].starts_with("421 4.3.0"), "{out}");
    proxy.wait_log("only redirected connections");
    let got = delivered(&postfix, 1);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(postfix.delivered().len(), 1, "only the clean message");
    assert!(String::from_utf8_lossy(&got[0]).contains("clean message"));
}
