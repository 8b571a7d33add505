//! A full disk, made for real: the data directory is a small tmpfs that
//! the test fills with a file of its own. While it is full SMTP and
//! submission answer `452 4.3.1` (at RCPT once the free space is under
//! `store.min_free_mb`, at the end of DATA when a write finds no room),
//! never `250` for mail that was not stored, and keep the connection;
//! IMAP APPEND gets a `NO` without `[SERVERBUG]`; FETCH, SEARCH and POP3
//! RETR keep working; the log says so once. When the file is deleted,
//! mail is taken again without a restart, and every acknowledged message
//! reads back over IMAP byte for byte, with its flags. A WAL checkpoint
//! that cannot grow the database on the full disk loses nothing: after
//! space returns `PRAGMA integrity_check` is ok and the messages are all
//! there, also after a restart.
//!
//! Mounting needs root (or CAP_SYS_ADMIN), as CI and `./test.sh` run; the
//! test fails saying so when it cannot mount. SQLite only: the store is
//! the data directory's database (the test gives its own `[store]`).

use sluice_testkit as kit;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kit::{addr_arg, path_arg, python, wait_until, Server, PASSWORD};

/// A tmpfs of `size` mounted on a directory, unmounted when dropped (also
/// when the test fails).
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    fn mount(path: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(path).unwrap();
        let out = Command::new(kit::require_program("mount", "mount"))
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(path)
            .output()
            .expect("mount runs");
        assert!(
            out.status.success(),
            "this test puts the data directory on a tmpfs of its own, which needs root \
             (or CAP_SYS_ADMIN) to mount: run it as root, as ./test.sh and CI do. mount said: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs {
            path: path.to_path_buf(),
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let umount = kit::require_program("umount", "mount");
        let done = Command::new(&umount)
            .arg(&self.path)
            .status()
            .is_ok_and(|s| s.success());
        if !done {
            // Something still holds it (a process of a failed test):
            // detach it now, the kernel frees it when that goes.
            let _ = Command::new(&umount).arg("-l").arg(&self.path).status();
        }
        if let Some(parent) = self.path.parent() {
            let _ = std::fs::remove_dir_all(parent);
        }
    }
}

/// A server whose data directory is a tmpfs of `size`. The server is
/// dropped (killed) before the file system is unmounted.
struct Fixture {
    server: Server,
    _disk: Tmpfs,
}

fn server_on_tmpfs(size: &str, store: &str) -> Fixture {
    let mut disk = None;
    let server = Server::start_prepared(store, |dir| {
        disk = Some(Tmpfs::mount(&dir.join("data"), size));
    });
    Fixture {
        server,
        _disk: disk.expect("mounted"),
    }
}

/// The phases of the test, each a run of Python's own clients; what was
/// acknowledged is kept in a state file between runs.
const CLIENT: &str = r#"
import base64, imaplib, json, os, poplib, random, smtplib, ssl, sqlite3, sys, time, urllib.request

def free(path):
    s = os.statvfs(path)
    return s.f_bavail * s.f_frsize

def load(state):
    try:
        with open(state) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"acked": []}

def save(state, data):
    with open(state, "w") as f:
        json.dump(data, f)

def message(tag, i, size=256 * 1024):
    rng = random.Random("%s-%d" % (tag, i))
    lines = []
    while sum(len(l) + 2 for l in lines) < size:
        lines.append(base64.b64encode(rng.randbytes(57)).decode())
    head = ("From: <sender@remote.test>\r\nTo: <%s>\r\nSubject: %s %d\r\n"
            "Message-ID: <%s.%d@remote.test>\r\n\r\n") % (user_arg, tag, i, tag, i)
    return (head + "\r\n".join(lines) + "\r\n").encode()

def reply_text(resp):
    return resp.decode(errors="replace") if isinstance(resp, bytes) else str(resp)

phase = sys.argv[1]
args = sys.argv[2:]

if phase == "fill":
    # Fills the disk under `path` with `filler` until at most `leave`
    # bytes are free (0: until the disk refuses).
    path, filler, leave = args[0], args[1], int(args[2])
    with open(filler, "ab", buffering=0) as f:
        block = b"\0" * (1 << 20)
        while True:
            room = free(path) - leave
            if leave > 0 and room <= 0:
                break
            try:
                f.write(block if leave == 0 or room >= len(block) else block[:max(4096, room)])
            except OSError:
                if block == b"\0" * 4096:
                    break
                block = b"\0" * 4096
    print(json.dumps({"free": free(path)}))

elif phase == "deliver":
    # Sends `count` messages over one connection (`submit`: over
    # submission, logged in); after the first refusal, three more, to see
    # they are refused too and the connection holds.
    state, addr, user_arg, count, tag, submit = args[0], args[1], args[2], int(args[3]), args[4], args[5] == "submit"
    data = load(state)
    h, p = addr.rsplit(":", 1)
    s = smtplib.SMTP(h, int(p), timeout=60)
    s.ehlo()
    if submit:
        s.starttls(context=ssl._create_unverified_context())
        s.ehlo()
        s.login(user_arg, args[6])
    acked, refused, after = 0, [], 0
    for i in range(count):
        if refused:
            after += 1
            if after > 3:
                break
        msg = message(tag, i)
        code, resp = s.mail("sender@remote.test" if not submit else user_arg)
        assert code == 250, (code, resp)
        code, resp = s.rcpt(user_arg)
        if code != 250:
            refused.append(["RCPT", code, reply_text(resp)])
            s.rset()
            continue
        code, resp = s.data(msg)
        if code == 250:
            if refused:
                refused.append(["DATA", code, reply_text(resp)])
            acked += 1
            data["acked"].append({"id": "<%s.%d@remote.test>" % (tag, i), "tag": tag, "i": i, "flags": []})
        else:
            refused.append(["DATA", code, reply_text(resp)])
            s.rset()
    code, _ = s.noop()
    s.quit()
    save(state, data)
    print(json.dumps({"acked": acked, "refused": refused, "noop": code}))

elif phase == "hold_and_deliver":
    # Holds a read transaction on the database so the checkpoint thread
    # cannot copy what is delivered next, delivers `count` messages, fills
    # the disk to the last byte, then lets the reader go: the next
    # checkpoint has to grow the database on a full disk.
    state, addr, user_arg, count, tag, db, path, filler = args[0], args[1], args[2], int(args[3]), args[4], args[5], args[6], args[7]
    data = load(state)
    reader = sqlite3.connect("file:%s?mode=ro" % db, uri=True, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM blobs").fetchone()
    h, p = addr.rsplit(":", 1)
    s = smtplib.SMTP(h, int(p), timeout=60)
    for i in range(count):
        s.sendmail("sender@remote.test", [user_arg], message(tag, i))
        data["acked"].append({"id": "<%s.%d@remote.test>" % (tag, i), "tag": tag, "i": i, "flags": []})
    s.quit()
    save(state, data)
    wal = os.path.getsize(db + "-wal")
    with open(filler, "ab", buffering=0) as f:
        for size in (1 << 20, 4096, 1):
            block = b"\0" * size
            try:
                while True:
                    f.write(block)
            except OSError:
                pass
    reader.execute("COMMIT")
    reader.close()
    print(json.dumps({"acked": count, "wal": wal, "free": free(path)}))

elif phase == "while_full":
    # Reading works, APPEND is refused with a clear NO, /metrics shows it.
    imap, pop, user_arg, password, metrics = args
    h, p = imap.rsplit(":", 1)
    m = imaplib.IMAP4(h, int(p))
    m.login(user_arg, password)
    typ, d = m.select("INBOX")
    assert typ == "OK", (typ, d)
    exists = int(d[0])
    typ, d = m.fetch("1:*", "(FLAGS BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])")
    assert typ == "OK", (typ, d)
    fetched = sum(1 for x in d if isinstance(x, tuple))
    typ, d = m.search(None, "ALL")
    assert typ == "OK", (typ, d)
    searched = len(d[0].split())
    typ, d = m.search(None, "SUBJECT", "fill")
    assert typ == "OK", (typ, d)
    try:
        typ, d = m.append("INBOX", None, None, message("append-full", 0, 64 * 1024))
    except imaplib.IMAP4.error as e:
        typ, d = "NO", [str(e).encode()]
    append = [typ, reply_text(d[0])]
    m.logout()
    h, p = pop.rsplit(":", 1)
    c = poplib.POP3(h, int(p))
    c.user(user_arg)
    c.pass_(password)
    count, _ = c.stat()
    resp, lines, _ = c.retr(1)
    retr = resp.decode()
    c.quit()
    text = urllib.request.urlopen("http://%s/metrics" % metrics).read().decode()
    gauge = [l for l in text.splitlines() if l.startswith("sluice_store_disk_full")]
    print(json.dumps({"exists": exists, "fetched": fetched, "searched": searched,
                      "append": append, "pop3": count, "retr": retr, "gauge": gauge}))

elif phase == "after":
    # Space is back: APPEND and flags work.
    state, imap, user_arg, password = args
    data = load(state)
    h, p = imap.rsplit(":", 1)
    m = imaplib.IMAP4(h, int(p))
    m.login(user_arg, password)
    m.select("INBOX")
    typ, d = m.append("INBOX", "(\\Flagged)", None, message("append", 0, 64 * 1024))
    assert typ == "OK", (typ, d)
    data["acked"].append({"id": "<append.0@remote.test>", "tag": "append", "i": 0, "size": 64 * 1024, "flags": ["\\Flagged"]})
    typ, d = m.search(None, "ALL")
    first = d[0].split()[0]
    typ, d = m.store(first, "+FLAGS", "(\\Answered)")
    assert typ == "OK", (typ, d)
    typ, d = m.fetch(first, "(BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])")
    mid = d[0][1].decode().split(":", 1)[1].strip()
    for a in data["acked"]:
        if a["id"] == mid:
            a["flags"].append("\\Answered")
    m.logout()
    save(state, data)
    print(json.dumps({"appended": 1}))

elif phase == "read":
    # Every acknowledged message, byte for byte, with its flags.
    state, imap, user_arg, password = args
    data = load(state)
    h, p = imap.rsplit(":", 1)
    m = imaplib.IMAP4(h, int(p))
    m.login(user_arg, password)
    typ, d = m.select("INBOX")
    byid = {}
    typ, d = m.fetch("1:*", "(FLAGS BODY.PEEK[])")
    for x in d:
        if not isinstance(x, tuple):
            continue
        flags = imaplib.ParseFlags(x[0])
        raw = x[1]
        mid = None
        for line in raw.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
            if line.lower().startswith(b"message-id:"):
                mid = line.split(b":", 1)[1].strip().decode()
        byid.setdefault(mid, []).append((raw, [f.decode() for f in flags]))
    m.logout()
    missing, duplicated, corrupt, wrong_flags = [], [], [], []
    for a in data["acked"]:
        got = byid.get(a["id"], [])
        if not got:
            missing.append(a["id"])
            continue
        if len(got) > 1:
            duplicated.append(a["id"])
        raw, flags = got[0]
        want = message(a["tag"], a["i"], a.get("size", 256 * 1024))
        if not raw.endswith(want):
            corrupt.append(a["id"])
        for f in a["flags"]:
            if f not in flags:
                wrong_flags.append([a["id"], f, flags])
    print(json.dumps({"acked": len(data["acked"]), "found": len(data["acked"]) - len(missing),
                      "missing": missing, "duplicated": duplicated, "corrupt": corrupt,
                      "wrong_flags": wrong_flags}))

elif phase == "integrity":
    for db in args:
        c = sqlite3.connect(db)
        result = c.execute("PRAGMA integrity_check").fetchall()
        assert result == [("ok",)], (db, result)
        c.close()
    print(json.dumps({"integrity": "ok"}))
"#;

fn run(phase: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec![phase];
    all.extend_from_slice(args);
    let out = python(CLIENT, &all);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Lines of the server's log that contain `what`.
fn count(log: &str, what: &str) -> usize {
    log.lines().filter(|l| l.contains(what)).count()
}

const FULL_LOG: &str = "disk full: new mail is refused";
const BACK_LOG: &str = "disk space is back";
const CHECKPOINT_FAILED: &str = "WAL checkpoint failed";
const TRUNCATION_FAILED: &str = "WAL truncation failed";

/// Checks what `read` said: every acknowledged message there once, byte
/// for byte, with its flags.
fn assert_all_there(read: &serde_json::Value, what: &str) {
    println!("{what}: {read}");
    assert!(read["acked"].as_u64().unwrap() > 0, "{read}");
    assert_eq!(read["found"], read["acked"], "{what}: missing {read}");
    for key in ["missing", "duplicated", "corrupt", "wrong_flags"] {
        assert!(
            read[key].as_array().unwrap().is_empty(),
            "{what}: {key}: {read}"
        );
    }
}

#[test]
fn under_the_reserve_smtp_and_submission_answer_452_at_rcpt_and_take_mail_again_when_space_returns()
{
    // A small log limit: the log of the default 64 MiB would fill this
    // disk by itself.
    let fx = server_on_tmpfs("128m", "[store]\nmin_free_mb = 8\nwal_limit_mb = 4\n");
    let server = &fx.server;
    let user = server.add_user("filled");
    let data = server.data_dir();
    let filler = data.join("filler");
    let state = server.dir.path().join("state.json");
    let (state_arg, smtp, imap) = (
        path_arg(&state),
        addr_arg(server.smtp),
        addr_arg(server.imap),
    );
    // 14 MiB left: a few messages fit before the 8 MiB reserve is reached.
    let filled = run(
        "fill",
        &[
            &path_arg(&data),
            &path_arg(&filler),
            &(14 << 20).to_string(),
        ],
    );
    println!("filled: {filled}");

    let before = run("deliver", &[&state_arg, &smtp, &user, "200", "fill", "mx"]);
    println!("delivered until refused: {before}");
    assert!(before["acked"].as_u64().unwrap() > 0, "{before}");
    let refused = before["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 4, "{before}");
    for r in refused {
        assert_eq!(r[0], "RCPT", "refused before the data is sent: {before}");
        assert_eq!(r[1], 452, "{before}");
        assert!(r[2].as_str().unwrap().starts_with("4.3.1"), "{before}");
    }
    assert_eq!(before["noop"], 250, "the connection holds: {before}");

    // Submission is refused the same way, at RCPT.
    let submitted = run(
        "deliver",
        &[
            &state_arg,
            &addr_arg(server.addr("submission")),
            &user,
            "1",
            "submit",
            "submit",
            PASSWORD,
        ],
    );
    println!("submission while full: {submitted}");
    assert_eq!(submitted["acked"], 0, "{submitted}");
    let r = &submitted["refused"][0];
    assert_eq!(
        (r[0].as_str(), r[1].as_u64()),
        (Some("RCPT"), Some(452)),
        "{submitted}"
    );

    let full = run(
        "while_full",
        &[
            &imap,
            &addr_arg(server.pop3),
            &user,
            PASSWORD,
            &addr_arg(server.addr("metrics")),
        ],
    );
    println!("while full: {full}");
    assert_eq!(full["fetched"], full["exists"], "{full}");
    assert_eq!(full["searched"], full["exists"], "{full}");
    assert_eq!(full["append"][0], "NO", "{full}");
    let append_text = full["append"][1].as_str().unwrap();
    assert!(
        append_text.contains("out of disk space") && !append_text.contains("SERVERBUG"),
        "{full}"
    );
    assert!(full["retr"].as_str().unwrap().starts_with("+OK"), "{full}");
    assert_eq!(full["gauge"][0], "sluice_store_disk_full 1", "{full}");

    std::fs::remove_file(&filler).unwrap();
    let after = run("deliver", &[&state_arg, &smtp, &user, "10", "after", "mx"]);
    println!("after space returned: {after}");
    assert_eq!(after["acked"], 10, "{after}");
    run("after", &[&state_arg, &imap, &user, PASSWORD]);
    assert_all_there(
        &run("read", &[&state_arg, &imap, &user, PASSWORD]),
        "read back",
    );

    let log = server.log();
    assert_eq!(count(&log, FULL_LOG), 1, "said once: {log}");
    assert_eq!(count(&log, BACK_LOG), 1, "said once: {log}");
    assert!(!log.contains("imap command failed"), "{log}");
    server.assert_no_panic();
}

#[test]
fn a_disk_that_fills_during_data_and_a_checkpoint_loses_nothing_acknowledged() {
    // No reserve: the writes themselves find the disk full. A 1 MiB log
    // limit keeps the writer cutting the log while mail comes in.
    let mut fx = server_on_tmpfs("64m", "[store]\nmin_free_mb = 0\nwal_limit_mb = 1\n");
    let user = fx.server.add_user("filled");
    let data = fx.server.data_dir();
    let filler = data.join("filler");
    let db = data.join("sluice.db");
    let state = fx.server.dir.path().join("state.json");
    let state_arg = path_arg(&state);

    // Acknowledged mail only in the log, then a disk with no byte left:
    // the checkpoint that copies it has to grow the database, and cannot.
    let held = run(
        "hold_and_deliver",
        &[
            &state_arg,
            &addr_arg(fx.server.smtp),
            &user,
            "8",
            "held",
            &path_arg(&db),
            &path_arg(&data),
            &path_arg(&filler),
        ],
    );
    println!("delivered into the log, then filled: {held}");
    assert!(
        wait_until(Duration::from_secs(20), || fx
            .server
            .log()
            .contains(FULL_LOG)),
        "a checkpoint ran on the full disk: {}",
        fx.server.log()
    );
    let log = fx.server.log();
    let found = log.lines().find(|l| l.contains(FULL_LOG)).unwrap();
    println!("{found}");
    assert!(
        found.contains("found_by=a WAL checkpoint") || found.contains("found_by=a WAL truncation"),
        "the checkpoint found the disk full first: {log}"
    );

    let full = run(
        "deliver",
        &[
            &state_arg,
            &addr_arg(fx.server.smtp),
            &user,
            "20",
            "full",
            "mx",
        ],
    );
    println!("delivered on the full disk: {full}");
    assert_eq!(full["acked"], 0, "{full}");
    let refused = full["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 4, "{full}");
    for r in refused {
        // No reserve, so RCPT is taken; the write at DATA finds no room.
        assert_eq!(
            (r[0].as_str(), r[1].as_u64()),
            (Some("DATA"), Some(452)),
            "{full}"
        );
        assert!(r[2].as_str().unwrap().starts_with("4.3.1"), "{full}");
    }
    assert_eq!(full["noop"], 250, "the connection holds: {full}");

    let reading = run(
        "while_full",
        &[
            &addr_arg(fx.server.imap),
            &addr_arg(fx.server.pop3),
            &user,
            PASSWORD,
            &addr_arg(fx.server.addr("metrics")),
        ],
    );
    println!("while full: {reading}");
    assert_eq!(reading["fetched"], reading["exists"], "{reading}");
    assert_eq!(reading["append"][0], "NO", "{reading}");
    assert!(
        !reading["append"][1].as_str().unwrap().contains("SERVERBUG"),
        "{reading}"
    );
    assert!(
        reading["retr"].as_str().unwrap().starts_with("+OK"),
        "{reading}"
    );

    std::fs::remove_file(&filler).unwrap();
    let after = run(
        "deliver",
        &[
            &state_arg,
            &addr_arg(fx.server.smtp),
            &user,
            "10",
            "after",
            "mx",
        ],
    );
    println!("after space returned: {after}");
    assert_eq!(after["acked"], 10, "{after}");
    let imap = addr_arg(fx.server.imap);
    run("after", &[&state_arg, &imap, &user, PASSWORD]);
    assert_all_there(
        &run("read", &[&state_arg, &imap, &user, PASSWORD]),
        "read back",
    );
    // Each kind of checkpoint that failed says so once, and once again
    // when it works.
    for (failed, again) in [
        (CHECKPOINT_FAILED, "WAL checkpoints work again"),
        (TRUNCATION_FAILED, "WAL truncation works again"),
    ] {
        if fx.server.log().contains(failed) {
            assert!(
                wait_until(Duration::from_secs(20), || fx.server.log().contains(again)),
                "{again}: {}",
                fx.server.log()
            );
        }
    }
    let log = fx.server.log();
    assert!(count(&log, CHECKPOINT_FAILED) <= 1, "said once: {log}");
    assert!(count(&log, TRUNCATION_FAILED) <= 1, "said once: {log}");
    assert_eq!(count(&log, FULL_LOG), 1, "said once: {log}");
    assert_eq!(count(&log, BACK_LOG), 1, "said once: {log}");
    fx.server.assert_no_panic();

    // Stopped, the files are whole; started again, nothing is missing.
    fx.server.terminate();
    println!(
        "{}",
        run(
            "integrity",
            &[&path_arg(&db), &path_arg(&data.join("fts.db"))]
        )
    );
    fx.server.restart();
    let imap = addr_arg(fx.server.imap);
    assert_all_there(
        &run("read", &[&state_arg, &imap, &user, PASSWORD]),
        "after a restart",
    );
}
