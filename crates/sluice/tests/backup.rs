//! `sluice backup` and `sluice restore` against a real server: a snapshot
//! taken while SMTP delivery goes on holds every message acknowledged
//! before it started, with its flags, UIDs and UIDVALIDITY; a restore
//! refuses to run under a server, to overwrite mail without `--force`,
//! and to take a file that is not a snapshot (leaving the store as it was).

use sluice_testkit as kit;

use std::time::Duration;

use kit::{addr_arg, path_arg, python, python_spawn, wait_until, Server, PASSWORD};

/// What a restore must bring back of an INBOX.
#[derive(Debug, PartialEq)]
struct Inbox {
    uidvalidity: String,
    /// UIDs of the flagged messages.
    flagged: String,
    subjects: Vec<String>,
}

/// The INBOX of `user` as IMAP shows it.
fn inbox_state(server: &Server, user: &str) -> Inbox {
    let out = python(
        r#"
import imaplib, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(sys.argv[2], sys.argv[3])
typ, data = m.select("INBOX")
uidvalidity = m.response("UIDVALIDITY")[1][0].decode()
typ, data = m.uid("FETCH", "1:*", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
subjects = [item[1].decode().split(":", 1)[1].strip() for item in data if isinstance(item, tuple)]
typ, data = m.uid("SEARCH", None, "FLAGGED")
flagged = [int(u) for u in data[0].split()]
print("uidvalidity", uidvalidity)
print("flagged", " ".join(map(str, flagged)))
for subject in sorted(subjects):
    print("subject", subject)
"#,
        &[&addr_arg(server.imap), user, PASSWORD],
    );
    let mut inbox = Inbox {
        uidvalidity: String::new(),
        flagged: String::new(),
        subjects: Vec::new(),
    };
    for line in out.lines() {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            "uidvalidity" => inbox.uidvalidity = value.to_string(),
            "flagged" => inbox.flagged = value.to_string(),
            _ => inbox.subjects.push(value.to_string()),
        }
    }
    inbox
}

#[test]
fn backup_during_delivery_restores_every_acknowledged_message() {
    let mut server = Server::start();
    let user = server.add_user("keeper");
    python(
        r#"
import imaplib, smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p))
for i in range(20):
    s.sendmail("a@remote.test", [sys.argv[3]], "Subject: before %d\r\n\r\nbody %d\r\n" % (i, i))
s.quit()
h, p = sys.argv[2].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(sys.argv[3], sys.argv[4]); m.select("INBOX")
m.uid("STORE", "3,7", "+FLAGS", "(\\Flagged)")
"#,
        &[
            &addr_arg(server.smtp),
            &addr_arg(server.imap),
            &user,
            PASSWORD,
        ],
    );

    // Delivery goes on during the backup: each acknowledged number is
    // appended to a file as soon as the 250 came.
    let acked = server.dir.path().join("acked.txt");
    let mut sender = python_spawn(
        r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p))
out = open(sys.argv[3], "a")
i = 0
while True:
    s.sendmail("a@remote.test", [sys.argv[2]], "Subject: during %d\r\n\r\n%s\r\n" % (i, "x" * 2000))
    out.write("%d\n" % i); out.flush()
    i += 1
"#,
        &[&addr_arg(server.smtp), &user, &path_arg(&acked)],
    );
    let acked_count = || {
        std::fs::read_to_string(&acked)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    assert!(
        wait_until(Duration::from_secs(30), || acked_count() >= 20),
        "the sender made no progress"
    );
    let before_backup = acked_count();
    let backup_dir = server.dir.path().join("backup");
    let out = server.cli_ok(&["backup", &path_arg(&backup_dir)]);
    assert!(out.contains("backup: "), "{out}");
    // More mail arrives after the snapshot was taken.
    let after_backup = acked_count();
    assert!(
        wait_until(Duration::from_secs(30), || acked_count()
            >= after_backup + 5),
        "delivery stalled after the backup"
    );
    sender.kill().unwrap();
    sender.wait().unwrap();
    let original = inbox_state(&server, &user);

    // A second backup into the same directory is refused.
    let again = server.cli(&["backup", &path_arg(&backup_dir)], "");
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds a backup"));

    // Restoring under a running server is refused.
    let busy = server.cli(&["restore", "--force", &path_arg(&backup_dir)], "");
    assert!(!busy.status.success());
    let err = String::from_utf8_lossy(&busy.stderr);
    assert!(err.contains("stop the server"), "{err}");

    assert!(server.terminate().success());
    // Over a store that holds mail, only with --force.
    let refused = server.cli(&["restore", &path_arg(&backup_dir)], "");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--force"));
    let out = server.cli_ok(&["restore", "--force", &path_arg(&backup_dir)]);
    assert!(out.contains("restored: "), "{out}");
    // The full-text index belonged to the database replaced: the store
    // builds it again from the restored one.
    assert!(!server.data_dir().join("fts.db").exists());

    server.restart();
    let restored = inbox_state(&server, &user);
    let found = python(
        r#"
import imaplib, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(sys.argv[2], sys.argv[3]); m.select("INBOX")
typ, data = m.search(None, "TEXT", "during")
print(len(data[0].split()))
"#,
        &[&addr_arg(server.imap), &user, PASSWORD],
    );
    let during = restored
        .subjects
        .iter()
        .filter(|s| s.starts_with("during"))
        .count();
    assert_eq!(
        found.trim(),
        during.to_string(),
        "SEARCH TEXT after restore"
    );
    assert_eq!(restored.uidvalidity, original.uidvalidity);
    assert_eq!(original.flagged, "3 7");
    assert_eq!(restored.flagged, "3 7");
    let subjects = restored.subjects;
    for i in 0..20 {
        assert!(subjects.contains(&format!("before {i}")), "before {i} lost");
    }
    for i in 0..before_backup {
        assert!(
            subjects.contains(&format!("during {i}")),
            "during {i}, acknowledged before the backup started, is not in it"
        );
    }
    // The snapshot is a point in time: the mail that came after it is not.
    assert!(!subjects.contains(&format!("during {}", after_backup + 4)));
}

#[test]
fn backup_to_stdout_restores_and_a_bad_snapshot_changes_nothing() {
    let mut server = Server::start();
    let user = server.add_user("piped");
    python(
        r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p))
for i in range(5):
    s.sendmail("a@remote.test", [sys.argv[2]], "Subject: kept %d\r\n\r\nbody\r\n" % i)
s.quit()
"#,
        &[&addr_arg(server.smtp), &user],
    );
    let out = server.cli(&["backup", "-"], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.starts_with(b"SQLite format 3\0"));
    let snapshot = server.dir.path().join("snapshot.db");
    std::fs::write(&snapshot, &out.stdout).unwrap();
    let before = inbox_state(&server, &user);
    assert!(server.terminate().success());

    // Not a snapshot: refused with a clear error, the store untouched.
    let bogus = server.dir.path().join("bogus.db");
    std::fs::write(&bogus, "not a database ".repeat(100)).unwrap();
    let bad = server.cli(&["restore", "--force", &path_arg(&bogus)], "");
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("is not a Sluice backup"), "{err}");
    server.restart();
    assert_eq!(inbox_state(&server, &user), before);
    assert!(server.terminate().success());

    // The piped snapshot, restored from its file.
    server.cli_ok(&["restore", "--force", &path_arg(&snapshot)]);
    server.restart();
    assert_eq!(inbox_state(&server, &user), before);
}
