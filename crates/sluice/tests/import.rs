//! `sluice import` and `sluice export` against a running server: an mbox
//! and a Maildir++ tree come in with their flags, dates and folders (read
//! back with Python's imaplib), a second run adds nothing, a large message
//! and a 2 GiB mbox stream through in little memory, and what `export` writes is read by
//! Python's own `mailbox` module.

use sluice_testkit as kit;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use kit::{path_arg, python, Server, PASSWORD};

const MBOX: &str = "From alice@example.net Mon Jan  1 10:00:00 2024
From: alice@example.net
Subject: first
Status: RO
X-Status: AF

Hello.

From bob@example.net Tue Jan  2 11:30:00 2024
From: bob@example.net
Subject: second

>From the start, a quoted line.
>>From stays quoted once.
A line.

From carol@example.net Wed Jan  3 12:00:00 2024
From: carol@example.net
Subject: third

Last one, with no empty line at the end.
";

/// Each message of a mailbox as `flags|internaldate|subject|body`.
const READ: &str = r#"
import imaplib, re, sys
imap, user, password, box = sys.argv[1:5]
h, p = imap.rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(user, password)
typ, _ = m.select('"%s"' % box, readonly=True)
assert typ == "OK", typ
typ, data = m.fetch("1:*", "(FLAGS INTERNALDATE BODY.PEEK[])")
for item in data:
    if not isinstance(item, tuple):
        continue
    meta, raw = item
    flags = " ".join(sorted(f for f in re.search(rb"FLAGS \(([^)]*)\)", meta).group(1).decode().split() if f != "\\Recent"))
    date = re.search(rb'INTERNALDATE "([^"]+)"', meta).group(1).decode()
    subject = re.search(rb"Subject: (.*?)\r\n", raw).group(1).decode()
    body = raw.split(b"\r\n\r\n", 1)[1]
    assert b"\n" not in raw.replace(b"\r\n", b""), "bare LF in %r" % raw
    print("%s|%s|%s|%r" % (flags, date, subject, body))
"#;

fn read(server: &Server, user: &str, mailbox: &str) -> Vec<String> {
    python(READ, &[&server.imap.to_string(), user, PASSWORD, mailbox])
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn an_mbox_comes_in_with_flags_dates_and_quoting_and_only_once() {
    let server = Server::start();
    let user = server.add_user("mbox");
    let dir = tempfile::tempdir().unwrap();
    let mbox = dir.path().join("inbox.mbox");
    std::fs::write(&mbox, MBOX).unwrap();
    server.cli_ok(&["import", &user, "mbox", &path_arg(&mbox)]);
    let got = read(&server, &user, "INBOX");
    assert_eq!(
        got,
        [
            r"\Answered \Flagged \Seen| 1-Jan-2024 10:00:00 +0000|first|b'Hello.\r\n'",
            r"|02-Jan-2024 11:30:00 +0000|second|b'From the start, a quoted line.\r\n>From stays quoted once.\r\nA line.\r\n'",
            r"|03-Jan-2024 12:00:00 +0000|third|b'Last one, with no empty line at the end.\r\n'",
        ]
        .iter()
        .map(|l| l.replace("| 1-Jan", "|01-Jan"))
        .collect::<Vec<_>>(),
        "{got:?}"
    );
    // Run again: nothing new. Into another mailbox: a fresh import.
    server.cli_ok(&["import", &user, "mbox", &path_arg(&mbox)]);
    assert_eq!(read(&server, &user, "INBOX").len(), 3);
    server.cli_ok(&[
        "import",
        &user,
        "mbox",
        &path_arg(&mbox),
        "--mailbox",
        "Archive/2024",
    ]);
    assert_eq!(read(&server, &user, "Archive/2024").len(), 3);
    // Not an mbox, not an account: clear errors, nothing stored.
    let bad = dir.path().join("bad.mbox");
    std::fs::write(&bad, "Subject: no From line\n\nx\n").unwrap();
    let out = server.cli(&["import", &user, "mbox", &path_arg(&bad)], "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an mbox"));
    let out = server.cli(
        &["import", "nobody@example.org", "mbox", &path_arg(&mbox)],
        "",
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no account"));
    assert_eq!(read(&server, &user, "INBOX").len(), 3);
}

fn maildir_file(dir: &Path, name: &str, subject: &str, mtime: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("From: x@example.net\nSubject: {subject}\n\nbody of {subject}\n"),
    )
    .unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(UNIX_EPOCH + Duration::from_secs(mtime))
        .unwrap();
}

#[test]
fn a_maildir_tree_comes_in_folder_by_folder_and_exports_read_back() {
    let server = Server::start();
    let user = server.add_user("maildir");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("Maildir");
    maildir_file(
        &root.join("cur"),
        "1704103200.M1P1.host:2,FS",
        "seen and flagged",
        1_704_103_200,
    );
    maildir_file(
        &root.join("new"),
        "1704189600.M2P1.host",
        "new one",
        1_704_189_600,
    );
    for sub in ["new", "tmp"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    maildir_file(
        &root.join(".Sent/cur"),
        "1704276000.M3P1.host:2,S",
        "sent",
        1_704_276_000,
    );
    maildir_file(
        &root.join(".Lists.rust/cur"),
        "1704362400.M4P1.host:2,RS",
        "list mail",
        1_704_362_400,
    );
    server.cli_ok(&["import", &user, "maildir", &path_arg(&root)]);
    assert_eq!(
        read(&server, &user, "INBOX"),
        [
            r"\Flagged \Seen|01-Jan-2024 10:00:00 +0000|seen and flagged|b'body of seen and flagged\r\n'",
            r"|02-Jan-2024 10:00:00 +0000|new one|b'body of new one\r\n'",
        ]
    );
    assert_eq!(read(&server, &user, "Sent").len(), 1);
    assert_eq!(
        read(&server, &user, "Lists/rust"),
        [r"\Answered \Seen|04-Jan-2024 10:00:00 +0000|list mail|b'body of list mail\r\n'"]
    );
    server.cli_ok(&["import", &user, "maildir", &path_arg(&root)]);
    assert_eq!(
        read(&server, &user, "INBOX").len(),
        2,
        "a second run adds nothing"
    );

    // Export, read back by Python's mailbox module.
    let out_mbox = dir.path().join("export.mbox");
    let out_maildir = dir.path().join("export-maildir");
    server.cli_ok(&["export", &user, "mbox", &path_arg(&out_mbox)]);
    server.cli_ok(&["export", &user, "maildir", &path_arg(&out_maildir)]);
    let out = python(
        r#"
import mailbox, sys
box = mailbox.mbox(sys.argv[1])
for m in box:
    print("mbox", m["Subject"], "".join(sorted(m.get_flags())))
md = mailbox.Maildir(sys.argv[2], create=False)
for m in sorted(md, key=lambda m: m["Subject"]):
    print("maildir", m["Subject"], m.get_flags())
print("folders", sorted(md.list_folders()))
"#,
        &[&path_arg(&out_mbox), &path_arg(&out_maildir)],
    );
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "mbox seen and flagged FOR",
            "mbox new one O",
            "maildir new one ",
            "maildir seen and flagged FS",
            "folders ['Archive', 'Drafts', 'Junk', 'Lists', 'Lists.rust', 'Sent', 'Trash']",
        ]
    );
}

#[test]
fn a_large_message_streams_through_in_little_memory() {
    let server = Server::start();
    let user = server.add_user("big");
    let dir = tempfile::tempdir().unwrap();
    let mbox = dir.path().join("big.mbox");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&mbox).unwrap());
    writeln!(
        f,
        "From big@example.net Mon Jan  1 10:00:00 2024\nSubject: big\n"
    )
    .unwrap();
    let line = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvw\n";
    for _ in 0..(64 * 1024 * 1024 / line.len()) {
        f.write_all(line.as_bytes()).unwrap();
    }
    f.flush().unwrap();
    drop(f);
    let (peak_kb, baseline_kb) = import_peaks_kb(&server, &user, &mbox);
    // 64 MiB went through; the importer's memory is what it is for a
    // small message, give or take buffers and SQLite's page cache.
    assert!(
        peak_kb < baseline_kb + 24 * 1024,
        "peak RSS {peak_kb} KiB, {baseline_kb} KiB for a small message"
    );
    assert_eq!(server.count("SELECT count(*) FROM messages"), 2);
    assert!(server.count("SELECT max(size) FROM blobs") > 64 * 1024 * 1024);
}

#[test]
fn a_two_gigabyte_mbox_imports_with_flat_memory() {
    // 2,048 messages of 1 MiB: 2 GiB through the importer, whose memory
    // must stay that of a small import plus buffers (the operations issue
    // asks for growth under 64 MB). Lines differ from message to message so
    // that no two blobs are the same single copy.
    let server = Server::start();
    let user = server.add_user("huge");
    let dir = tempfile::tempdir().unwrap();
    let mbox = dir.path().join("huge.mbox");
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&mbox).unwrap());
    let messages = 2048;
    let mut line = [b'q'; 1000];
    line[999] = b'\n';
    for i in 0..messages {
        write!(
            f,
            "From huge@example.net Mon Jan  1 10:00:00 2024\nSubject: part {i}\nMessage-ID: <{i}@example.net>\n\n"
        )
        .unwrap();
        line[..8].copy_from_slice(format!("{i:08}").as_bytes());
        for _ in 0..(1024 * 1024usize).div_ceil(line.len()) {
            f.write_all(&line).unwrap();
        }
        f.write_all(b"\n").unwrap();
    }
    f.flush().unwrap();
    drop(f);
    assert!(std::fs::metadata(&mbox).unwrap().len() > 2 << 30);
    let (peak_kb, baseline_kb) = import_peaks_kb(&server, &user, &mbox);
    assert!(
        peak_kb < baseline_kb + 64 * 1000,
        "peak RSS {peak_kb} KiB, {baseline_kb} KiB for a small message"
    );
    assert_eq!(server.count("SELECT count(*) FROM messages"), messages + 1);
    assert_eq!(
        server.count("SELECT count(DISTINCT blob_id) FROM messages"),
        messages + 1
    );
}

/// The peak resident memory of importing `mbox`, and of importing a
/// one-message mbox first (the baseline), in KiB.
fn import_peaks_kb(server: &Server, user: &str, mbox: &Path) -> (u64, u64) {
    let small = mbox.with_file_name("small.mbox");
    std::fs::write(
        &small,
        "From a@example.net Mon Jan  1 10:00:00 2024\nSubject: small\n\nx\n",
    )
    .unwrap();
    let baseline_kb = import_peak_kb(server, user, &small);
    (import_peak_kb(server, user, mbox), baseline_kb)
}

/// Runs `sluice import USER mbox PATH`; returns the peak resident memory
/// it reports (getrusage) in its last line.
fn import_peak_kb(server: &Server, user: &str, mbox: &Path) -> u64 {
    let out = server.cli(&["import", user, "mbox", &path_arg(mbox)], "");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    text.lines()
        .last()
        .and_then(|l| l.split("peak memory ").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no peak memory in {text}"))
}

/// Fills Dovecot (argv[1]) for argv[2]/argv[3]: INBOX with three
/// messages (flags, a keyword, set dates), and "Archive.2025" with two,
/// one of 300 KB.
const FILL_DOVECOT: &str = r#"
import imaplib, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(sys.argv[2], sys.argv[3])
m.create("Archive.2025")
def add(box, flags, date, subject, body):
    msg = ("From: a@origin.test\r\nSubject: %s\r\n\r\n%s" % (subject, body)).encode()
    typ, _ = m.append(box, flags, date, msg)
    assert typ == "OK", typ
add("INBOX", "(\\Seen)", '"01-Feb-2024 08:00:00 +0100"', "one", "first\r\n")
add("INBOX", "(\\Flagged $Label1)", '"02-Feb-2024 09:30:00 +0000"', "two", "second\r\n")
add("INBOX", "()", '"03-Feb-2024 10:45:00 -0500"', "three", "third\r\n")
add("Archive.2025", "(\\Seen \\Answered)", '"04-Mar-2025 12:00:00 +0000"', "old", "archived\r\n")
add("Archive.2025", "(\\Seen)", '"05-Mar-2025 12:00:00 +0000"', "big", ("y" * 998 + "\r\n") * 300)
m.logout()
"#;

/// Each message of mailbox argv[4] at argv[1] as `flags|epoch|sha256`.
const DIGEST: &str = r#"
import datetime, hashlib, imaplib, re, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(sys.argv[2], sys.argv[3])
typ, _ = m.select('"%s"' % sys.argv[4], readonly=True)
assert typ == "OK", typ
typ, data = m.fetch("1:*", "(FLAGS INTERNALDATE BODY.PEEK[])")
for item in data:
    if not isinstance(item, tuple):
        continue
    meta, raw = item
    flags = " ".join(sorted(f for f in re.search(rb"FLAGS \(([^)]*)\)", meta).group(1).decode().split() if f != "\\Recent"))
    date = re.search(rb'INTERNALDATE "([^"]+)"', meta).group(1).decode()
    epoch = int(datetime.datetime.strptime(date.strip(), "%d-%b-%Y %H:%M:%S %z").timestamp())
    print("%s|%d|%s" % (flags, epoch, hashlib.sha256(raw).hexdigest()))
"#;

#[test]
fn an_account_moves_off_dovecot_over_imap_with_flags_and_dates() {
    let dovecot = kit::Dovecot::start(&[("alice@example.org", "secret")]);
    let dovecot_addr = dovecot.imap.to_string();
    python(
        FILL_DOVECOT,
        &[&dovecot_addr, "alice@example.org", "secret"],
    );
    let server = Server::start();
    let user = server.add_user("moved");
    let secret = server.dir.path().join("imap-password");
    std::fs::write(&secret, "secret\n").unwrap();
    let url = format!("imap://alice%40example.org@{dovecot_addr}");
    let import = || {
        server.cli(
            &[
                "import",
                &user,
                "imap",
                &url,
                "--password-file",
                &path_arg(&secret),
            ],
            "",
        )
    };
    let out = import();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("imported 5 messages"));
    let digest = |addr: &str, user: &str, password: &str, mailbox: &str| {
        python(DIGEST, &[addr, user, password, mailbox])
    };
    for (theirs, ours) in [("INBOX", "INBOX"), ("Archive.2025", "Archive/2025")] {
        let there = digest(&dovecot_addr, "alice@example.org", "secret", theirs);
        let here = digest(&server.imap.to_string(), &user, PASSWORD, ours);
        assert_eq!(here, there, "{ours}");
        assert!(!here.is_empty());
    }
    // Again: everything was delivered, nothing comes twice.
    let again = import();
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("resuming: 5 messages already imported"),
        "{stderr}"
    );
    let inbox = digest(&server.imap.to_string(), &user, PASSWORD, "INBOX");
    assert_eq!(inbox.lines().count(), 3, "{inbox}");
    // A wrong password is said so, and nothing is imported.
    std::fs::write(&secret, "wrong\n").unwrap();
    let refused = import();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("refused the login"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}
