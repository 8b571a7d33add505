//! The write-ahead logs (the database's and the full-text index file's)
//! stay bounded while mail streams in through concurrent SMTP sessions and
//! IMAP readers keep reading, are cut to nothing at a clean stop, and a
//! kill -9 while checkpoints run loses no acknowledged message.

use sluice_testkit as kit;

use std::time::Duration;

use kit::{addr_arg, path_arg, python, python_spawn, wait_until, Server, PASSWORD};

const LOAD: &str = r#"
import imaplib, os, smtplib, sys, threading, time
smtp, imap, user, password, wals, count = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5].split("|"), int(sys.argv[6])
body = ("x" * 70 + "\r\n") * 56
done = threading.Event()
def sender(n):
    h, p = smtp.rsplit(":", 1)
    s = smtplib.SMTP(h, int(p))
    for i in range(n):
        s.sendmail("a@remote.test", [user], "Subject: load %d\r\n\r\n%s" % (i, body))
    s.quit()
def reader():
    h, p = imap.rsplit(":", 1)
    m = imaplib.IMAP4(h, int(p)); m.login(user, password)
    while not done.is_set():
        m.select("INBOX")
        m.fetch("1:*", "(FLAGS BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
        m.search(None, "SUBJECT", "load")
        m.search(None, "TEXT", "load")
    m.logout()
senders = [threading.Thread(target=sender, args=(count // 4,)) for _ in range(4)]
readers = [threading.Thread(target=reader) for _ in range(2)]
for t in senders + readers: t.start()
biggest = [0] * len(wals)
while any(t.is_alive() for t in senders):
    for i, wal in enumerate(wals):
        try:
            biggest[i] = max(biggest[i], os.path.getsize(wal))
        except FileNotFoundError:
            pass
    time.sleep(0.05)
done.set()
for t in readers: t.join()
print(" ".join(map(str, biggest)))
"#;

#[test]
fn the_wal_stays_bounded_under_load_and_is_cut_at_a_clean_stop() {
    let mut server = Server::start_with("[store]\nwal_limit_mb = 4\n");
    let user = server.add_user("loaded");
    let wals = [
        server.data_dir().join("sluice.db-wal"),
        server.data_dir().join("fts.db-wal"),
    ];
    let out = python(
        LOAD,
        &[
            &addr_arg(server.smtp),
            &addr_arg(server.imap),
            &user,
            PASSWORD,
            &format!("{}|{}", path_arg(&wals[0]), path_arg(&wals[1])),
            "2000",
        ],
    );
    let biggest: Vec<u64> = out.split_whitespace().map(|n| n.parse().unwrap()).collect();
    // 2,000 messages of 4 KB wrote about 90 MB of log before the bound; the
    // checker looks every 50 ms, and a log is cut between two commits, so
    // allow what arrives in between.
    for (wal, biggest) in wals.iter().zip(&biggest) {
        assert!(
            *biggest < 32 * 1024 * 1024,
            "{} reached {biggest} bytes with a 4 MiB limit",
            wal.display()
        );
    }
    let size = |wal: &std::path::Path| std::fs::metadata(wal).map_or(0, |m| m.len());
    for wal in &wals {
        assert!(
            wait_until(Duration::from_secs(10), || size(wal) <= 4 * 1024 * 1024),
            "{} stayed at {} bytes after the load",
            wal.display(),
            size(wal)
        );
    }
    let stats = server.cli_ok(&["stats"]);
    assert!(
        stats.contains("messages            2000")
            && stats.contains("blob_chunks")
            && stats.contains("text index")
            && stats.contains("fts_data"),
        "{stats}"
    );
    assert!(server.terminate().success());
    for wal in &wals {
        assert_eq!(size(wal), 0, "{} is cut at a clean stop", wal.display());
    }
    assert_eq!(
        server.index_count("SELECT count(*) FROM fts_docsize"),
        2000,
        "every message is indexed at a clean stop"
    );
    server.restart();
    assert_eq!(
        server.count("SELECT count(*) FROM messages"),
        2000,
        "every message is there"
    );
}

#[test]
fn a_kill_while_checkpoints_run_loses_no_acknowledged_message() {
    let mut server = Server::start_with("[store]\nwal_limit_mb = 1\n");
    let user = server.add_user("crashy");
    let acked = server.dir.path().join("acked.txt");
    let mut loader = python_spawn(
        r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p))
out = open(sys.argv[3], "a")
body = ("y" * 70 + "\r\n") * 56
for i in range(100000):
    s.sendmail("a@remote.test", [sys.argv[2]], "Subject: crash %d\r\n\r\n%s" % (i, body))
    out.write("%d\n" % i); out.flush()
"#,
        &[&addr_arg(server.smtp), &user, &path_arg(&acked)],
    );
    let count = || {
        std::fs::read_to_string(&acked)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    // Past several truncations of a 1 MiB log, and past the training of
    // the store's zstd dictionary (after 1,000 messages), so that mail
    // packed with it is in the log at the kill.
    assert!(wait_until(Duration::from_secs(120), || count() >= 1000));
    assert!(wait_until(Duration::from_secs(60), || server
        .count("SELECT count(*) FROM zstd_dictionaries")
        == 1));
    let trained_at = count();
    assert!(wait_until(Duration::from_secs(60), || count() >= trained_at + 200));
    server.kill9();
    let _ = loader.wait();
    let acknowledged = count() as i64;
    // Full-text rows are written in batches after delivery: the kill took
    // the waiting ones (usually some), and the store rebuilds them.
    let indexed = server.index_count("SELECT count(*) FROM fts_docsize");
    server.restart();
    let stored = server.count("SELECT count(*) FROM messages");
    assert!(
        stored >= acknowledged,
        "{acknowledged} acknowledged, {stored} stored"
    );
    let found = python(
        r#"
import imaplib, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(sys.argv[2], sys.argv[3]); m.select("INBOX")
typ, data = m.search(None, "TEXT", "crash")
print(len(data[0].split()))
"#,
        &[&addr_arg(server.imap), &user, PASSWORD],
    );
    assert_eq!(
        found.trim().parse::<i64>().unwrap(),
        stored,
        "SEARCH finds every stored message ({indexed} were indexed at the kill)"
    );
    // Every message reads back whole, packed with the dictionary or not.
    assert!(server.count("SELECT count(*) FROM blob_chunks WHERE codec = 2") > 0);
    let bad = python(
        r#"
import imaplib, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(sys.argv[2], sys.argv[3]); m.select("INBOX")
body = (b"y" * 70 + b"\r\n") * 56
typ, data = m.fetch("1:*", "(BODY.PEEK[TEXT])")
texts = [d[1] for d in data if isinstance(d, tuple)]
print(len(texts), sum(1 for t in texts if t != body))
"#,
        &[&addr_arg(server.imap), &user, PASSWORD],
    );
    assert_eq!(
        bad.trim(),
        format!("{stored} 0"),
        "messages read back, damaged"
    );
}
