//! Content scanning: `sluice scan` on files, and the SMTP data stage
//! refusing infected mail before the 250, with Python building the mail
//! (base64 attachments, zip archives) independently of our code.

use sluice_testkit as kit;

use std::process::Command;

use kit::{python, Server};

/// The EICAR test file (split so this source is not itself a test file).
const EICAR: &str = concat!(
    r"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-",
    "ANTIVIRUS-TEST-FILE!$H+H*"
);

fn sluice(args: &[&str]) -> (i32, String) {
    let out = Command::new(kit::sluice_bin()).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn scan_command_reports_like_clamscan() {
    let dir = tempfile::tempdir().unwrap();
    let eicar = dir.path().join("eicar.com");
    std::fs::write(&eicar, EICAR).unwrap();
    let clean = dir.path().join("clean.txt");
    std::fs::write(&clean, "nothing to see here\n").unwrap();
    // A custom body signature in ClamAV's .ndb format, hidden in a gzip file.
    let db = dir.path().join("db");
    std::fs::create_dir(&db).unwrap();
    std::fs::write(
        db.join("test.ndb"),
        "Test.Custom-1:0:*:736c7569636554657374{2-4}4d61726b6572\n",
    )
    .unwrap();
    let gz = dir.path().join("marked.gz");
    python(
        "import gzip, sys; open(sys.argv[1], 'wb').write(gzip.compress(b'prefix sluiceTest--Marker suffix'))",
        &[gz.to_str().unwrap()],
    );

    let (code, out) = sluice(&["scan", eicar.to_str().unwrap(), clean.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("{}: Eicar-Signature FOUND", eicar.display())),
        "{out}"
    );
    assert!(out.contains(&format!("{}: OK", clean.display())), "{out}");
    assert!(out.contains("Infected files: 1"), "{out}");

    let (code, out) = sluice(&["scan", "--db", db.to_str().unwrap(), gz.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Test.Custom-1 FOUND"), "{out}");
    let (code, _) = sluice(&["scan", gz.to_str().unwrap()]);
    assert_eq!(code, 0, "without the database the marker is not a virus");

    let (code, out) = sluice(&["scan", "/nonexistent/file"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("ERROR"), "{out}");
}

/// Sends a mail with an attachment built by Python's email package and
/// prints the final reply code; `kind` is `plain`, `eicar` or `zipped`.
const SEND_ATTACHMENT: &str = r#"
import io, smtplib, sys, zipfile
from email.message import EmailMessage
host, port = sys.argv[1].rsplit(":", 1)
kind, eicar = sys.argv[3], sys.argv[4].encode()
msg = EmailMessage()
msg["From"] = "a@remote.test"; msg["To"] = sys.argv[2]; msg["Subject"] = "attachment " + kind
msg.set_content("see attached")
if kind == "eicar":
    msg.add_attachment(eicar, maintype="application", subtype="octet-stream", filename="eicar.com")
elif kind == "zipped":
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        inner = io.BytesIO()
        with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED) as zz:
            zz.writestr("eicar.com", eicar)
        z.writestr("inner.zip", inner.getvalue())
    msg.add_attachment(buf.getvalue(), maintype="application", subtype="zip", filename="files.zip")
else:
    msg.add_attachment(b"harmless bytes" * 100, maintype="application", subtype="octet-stream", filename="data.bin")
with smtplib.SMTP(host, int(port)) as s:
    try:
        s.send_message(msg)
        print("250")
    except smtplib.SMTPDataError as e:
        print(e.smtp_code, e.smtp_error.decode())
"#;

fn send(server: &Server, to: &str, kind: &str) -> String {
    python(
        SEND_ATTACHMENT,
        &[&server.smtp.to_string(), to, kind, EICAR],
    )
    .trim()
    .to_string()
}

#[test]
fn infected_mail_is_refused_before_the_250_and_not_stored() {
    let server = Server::start();
    let user = server.add_user("scanned");
    assert_eq!(send(&server, &user, "plain"), "250");
    let reply = send(&server, &user, "eicar");
    assert!(
        reply.starts_with("554 5.7.1") && reply.contains("Eicar-Signature"),
        "{reply}"
    );
    let reply = send(&server, &user, "zipped");
    assert!(
        reply.starts_with("554 5.7.1") && reply.contains("Eicar-Signature"),
        "{reply}"
    );
    assert_eq!(server.count("SELECT count(*) FROM messages"), 1);
    assert_eq!(server.count("SELECT count(*) FROM blobs"), 1);
    assert_eq!(server.count("SELECT count(*) FROM blob_chunks"), 1);
    let log = server.log();
    let line = log
        .lines()
        .find(|l| l.contains("verdict=rejected-content"))
        .expect("a log line for the refused message");
    assert!(line.contains("scan=infected: Eicar-Signature"), "{line}");
}

#[test]
fn the_action_per_verdict_is_configurable() {
    let server = Server::start_with("[scan]\non_infected = \"accept\"\n");
    let user = server.add_user("tolerant");
    assert_eq!(send(&server, &user, "eicar"), "250");
    assert!(server.log().contains("scan=infected: Eicar-Signature"));
    let off = Server::start_with("[scan]\nenabled = false\n");
    let user = off.add_user("unscanned");
    assert_eq!(send(&off, &user, "eicar"), "250");
}

#[test]
fn logical_and_pua_signatures_load_from_the_configured_databases() {
    // A PUA body signature (.ndu) and a logical signature (.ldb) on the
    // words of the "plain" attachment (decoded from base64): PUA files load
    // only with `pua = true`, as clamd's DetectPUA.
    let db = tempfile::tempdir().unwrap();
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    std::fs::write(
        db.path().join("local.ndu"),
        format!("PUA.Test.Plain-1:0:*:{}\n", hex("harmless bytes")),
    )
    .unwrap();
    let config = |pua: bool| {
        format!(
            "[scan]\ndatabases = [\"{}\"]\npua = {pua}\n",
            db.path().display()
        )
    };
    let off = Server::start_with(&config(false));
    let user = off.add_user("nopua");
    assert_eq!(send(&off, &user, "plain"), "250");
    let on = Server::start_with(&config(true));
    let user = on.add_user("pua");
    let reply = send(&on, &user, "plain");
    assert!(
        reply.starts_with("554 5.7.1") && reply.contains("PUA.Test.Plain-1"),
        "{reply}"
    );

    std::fs::remove_file(db.path().join("local.ndu")).unwrap();
    std::fs::write(
        db.path().join("local.ldb"),
        format!(
            "Test.Logical.Plain-1;Engine:51-255,Target:0;0&1;{};{}\n",
            hex("harmless"),
            hex("bytes")
        ),
    )
    .unwrap();
    let ldb = Server::start_with(&config(false));
    let user = ldb.add_user("logical");
    let reply = send(&ldb, &user, "plain");
    assert!(
        reply.starts_with("554 5.7.1") && reply.contains("Test.Logical.Plain-1"),
        "{reply}"
    );
    assert!(ldb.log().contains("scan signatures loaded"));
}

/// Sends a mail with the file at a path attached (base64, built by
/// Python's email package) and prints the final reply code and text.
const SEND_FILE: &str = r#"
import smtplib, sys
from email.message import EmailMessage
addr, to, path, subtype = sys.argv[1:5]
host, port = addr.rsplit(":", 1)
msg = EmailMessage()
msg["From"] = "sender@remote.test"
msg["To"] = to
msg["Subject"] = "the document"
msg.set_content("see the attached document")
with open(path, "rb") as f:
    msg.add_attachment(f.read(), maintype="application", subtype=subtype, filename=path.rsplit("/", 1)[-1])
with smtplib.SMTP(host, int(port)) as s:
    try:
        s.send_message(msg)
        print("250")
    except smtplib.SMTPDataError as e:
        print(e.smtp_code, e.smtp_error.decode())
"#;

/// Sends the file at `path` to `to` as an attachment of type
/// `application/<subtype>`; the server's reply to the end of data.
fn send_file(server: &Server, to: &str, path: &std::path::Path, subtype: &str) -> String {
    python(
        SEND_FILE,
        &[
            &server.smtp.to_string(),
            to,
            path.to_str().unwrap(),
            subtype,
        ],
    )
}

/// RAR is recognised, not unpacked: by default (`on_limit = "reject"`) it is
/// refused as content that could not be scanned, and with `accept` it goes
/// through.
#[test]
fn rar_attachments_follow_the_limit_policy() {
    let dir = tempfile::tempdir().unwrap();
    let rar = dir.path().join("archive.rar");
    let mut bytes = b"Rar!\x1a\x07\x01\x00".to_vec();
    bytes.extend_from_slice(&[0x33; 300]);
    std::fs::write(&rar, bytes).unwrap();
    let server = Server::start();
    let user = server.add_user("rar");
    let reply = send_file(&server, &user, &rar, "vnd.rar");
    assert!(
        reply.starts_with("554 5.7.1") && reply.contains("unsupported-archive"),
        "{reply}"
    );
    assert_eq!(server.count("SELECT count(*) FROM messages"), 0);
    let lenient = Server::start_with("[scan]\non_limit = \"accept\"\n");
    let user = lenient.add_user("rar");
    assert_eq!(send_file(&lenient, &user, &rar, "vnd.rar").trim(), "250");
}

#[test]
fn sevenz_and_cab_attachments_carrying_eicar_are_refused_over_smtp() {
    // Archives made by Debian's 7zip (7zz) and gcab, which ./test.sh
    // installs: EICAR compressed together with some text, so that only
    // unpacking the archive finds it.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("eicar.com"), EICAR).unwrap();
    std::fs::write(
        dir.path().join("readme.txt"),
        "nothing to see here\n".repeat(50),
    )
    .unwrap();
    let run = |prog: std::path::PathBuf, args: &[&str]| {
        let out = Command::new(&prog)
            .current_dir(dir.path())
            .args(args)
            .args(["readme.txt", "eicar.com"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{prog:?}: {out:?}");
    };
    run(
        kit::require_program("7zz", "7zip"),
        &["a", "-bd", "-m0=lzma2", "eicar.7z"],
    );
    run(
        kit::require_program("gcab", "gcab"),
        &["-c", "-z", "eicar.cab"],
    );
    let server = Server::start();
    let user = server.add_user("archives");
    for (file, subtype) in [
        ("eicar.7z", "x-7z-compressed"),
        ("eicar.cab", "vnd.ms-cab-compressed"),
    ] {
        let path = dir.path().join(file);
        let reply = send_file(&server, &user, &path, subtype);
        assert!(
            reply.starts_with("554 5.7.1") && reply.contains("Eicar-Signature"),
            "{file}: {reply}"
        );
    }
    assert_eq!(server.count("SELECT count(*) FROM messages"), 0);
}

#[test]
fn office_documents_carrying_a_signature_are_refused_over_smtp() {
    // ClamAV's own test documents (Debian's clamav-testfiles, which
    // ./test.sh installs): a Word and a PowerPoint 97-2003 file, each with
    // ClamAV's clam.exe test program inside an OLE2 stream, found by its
    // MD5 as clamscan finds it.
    let files = std::path::Path::new("/usr/share/clamav-testfiles");
    assert!(
        files.join("clam.ole.doc").exists(),
        "/usr/share/clamav-testfiles is missing: apt-get install clamav-testfiles (./test.sh installs it)"
    );
    let db = tempfile::tempdir().unwrap();
    std::fs::write(
        db.path().join("local.hdb"),
        "aa15bcf478d165efd2065190eb473bcb:544:ClamAV-Test-File\n",
    )
    .unwrap();
    let server = Server::start_with(&format!(
        "[scan]\ndatabases = [\"{}\"]\n",
        db.path().display()
    ));
    let user = server.add_user("office");
    for (file, subtype) in [
        ("clam.ole.doc", "msword"),
        ("clam.ppt", "vnd.ms-powerpoint"),
    ] {
        let path = files.join(file);
        let reply = send_file(&server, &user, &path, subtype);
        assert!(
            reply.starts_with("554 5.7.1") && reply.contains("ClamAV-Test-File"),
            "{file}: {reply}"
        );
    }
    assert_eq!(server.count("SELECT count(*) FROM messages"), 0);
}

/// Writes a PDF with one FlateDecode stream holding the given text (Python's
/// zlib, independent of our inflater) to a path.
const WRITE_PDF: &str = r#"
import sys, zlib
path, text = sys.argv[1:3]
data = zlib.compress(text.encode())
pdf = b"%%PDF-1.4\n1 0 obj\n<< /Type /EmbeddedFile /Filter /FlateDecode /Length %d >>\nstream\n" % len(data)
pdf += data + b"\nendstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"
with open(path, "wb") as f:
    f.write(pdf)
"#;

#[test]
fn a_pdf_carrying_eicar_in_a_compressed_stream_is_refused_over_smtp() {
    let server = Server::start();
    let user = server.add_user("pdf");
    let dir = tempfile::tempdir().unwrap();
    for (name, text, infected) in [
        ("clean.pdf", "just a harmless document", false),
        ("eicar.pdf", EICAR, true),
    ] {
        let path = dir.path().join(name);
        python(WRITE_PDF, &[path.to_str().unwrap(), text]);
        let bytes = std::fs::read(&path).unwrap();
        // Compressed: the attachment's bytes do not carry the test file as such.
        assert!(!bytes.windows(EICAR.len()).any(|w| w == EICAR.as_bytes()));
        let reply = send_file(&server, &user, &path, "pdf");
        let reply = reply.trim();
        if infected {
            assert!(
                reply.starts_with("554 5.7.1") && reply.contains("Eicar-Signature"),
                "{name}: {reply}"
            );
        } else {
            assert_eq!(reply, "250", "{name}");
        }
    }
    assert_eq!(server.count("SELECT count(*) FROM messages"), 1);
}

#[test]
fn the_clamd_engine_scans_each_decoded_part() {
    let clamd = kit::Clamd::start();
    let server = Server::start_with(&clamd.scan_config());
    let user = server.add_user("clamd");
    assert_eq!(send(&server, &user, "plain"), "250");
    let reply = send(&server, &user, "eicar");
    assert!(
        reply.starts_with("554 5.7.1") && reply.contains(kit::CLAMD_EICAR_NAME),
        "{reply}"
    );
    // clamd gone: mail is deferred, not delivered unscanned.
    drop(clamd);
    let reply = send(&server, &user, "plain");
    assert!(reply.starts_with("451 4.3.0"), "{reply}");
    assert_eq!(server.count("SELECT count(*) FROM messages"), 1);
}

/// `sluice scan --stats` on a database made here: counts per format, refused
/// lines by reason, lines read but not used, unsupported formats, load time and
/// memory.
#[test]
fn scan_stats_reports_what_the_database_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    std::fs::create_dir(&db).unwrap();
    let files: [(&str, &str); 7] = [
        (
            "test.ndb",
            "Stats.Ndb-1:0:*:73746174736f6e65\nStats.Ndb-2:0:*:73746174737477\nBad:0:EP+0:41424344\n",
        ),
        (
            "test.ldb",
            "Stats.Ldb-1;Engine:51-255,Target:0;0&1;7374617473;6c6462\n",
        ),
        (
            "test.hdb",
            "44d88612fea8a8f36de82e1278abb02f:68:Stats.Hdb-1\n",
        ),
        (
            "test.cdb",
            "Stats.Cdb-1:CL_TYPE_ZIP:*:\\.scr$:*:*:*:*:*:*\nStats.Cdb-2:CL_TYPE_RAR:*:x:*:*:*:*:*:*\n",
        ),
        (
            "test.ftm",
            "0:0:1f8b:GZip:CL_TYPE_ANY:CL_TYPE_GZ\n0:0:46726f6d3a20:Mail:CL_TYPE_ANY:CL_TYPE_MAIL\n",
        ),
        ("test.pdb", "R:example\\.com\nH:example.org\nH:example.net\n"),
        // Authenticode certificate rules: a format this engine does not read.
        ("test.crb", "x\n# comment\ny\n"),
    ];
    for (name, text) in files {
        std::fs::write(db.join(name), text).unwrap();
    }
    let (code, out) = sluice(&["scan", "--stats", "--db", db.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let has = |line: &str| {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") == line),
            "no line `{line}` in:\n{out}"
        )
    };
    has("Files read: 6");
    has(".ndb 2");
    has(".ldb 1");
    has(".hdb 1");
    has(".cdb 1");
    has(".ftm 1");
    has(".pdb 3");
    has("Lines refused: 1");
    has("1 ndb: offset type not supported (EP, Sx, SL, SE need executable parsing)");
    has("1 cdb: a container type whose entries this engine does not walk");
    has("1 ftm: a file type this engine does not distinguish");
    has(".crb 1 file(s) 2 signature(s)");
    let load = out
        .lines()
        .find(|l| l.starts_with("Load: load time "))
        .unwrap_or_else(|| panic!("no load line in:\n{out}"));
    assert!(
        load.contains("resident memory after load") && load.contains("MiB (peak "),
        "{load}"
    );

    // With files too, the table comes first and the scan runs as usual.
    let eicar = dir.path().join("eicar.com");
    std::fs::write(&eicar, EICAR).unwrap();
    let (code, out) = sluice(&[
        "scan",
        "--stats",
        "--db",
        db.to_str().unwrap(),
        eicar.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Files read: 6"), "{out}");
    assert!(out.contains("Eicar-Signature FOUND"), "{out}");
}
