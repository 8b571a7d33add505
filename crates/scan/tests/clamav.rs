//! Cross-check with ClamAV itself: the same custom database (`.ndb` with EICAR and a
//! test signature, `.hdb`), the same generated files, the same verdicts.
//!
//! Needs `clamscan` (Debian package `clamav`); the `clamav-testfiles` package adds a
//! second corpus. Without `clamscan` the tests print why and pass.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use scan::{DatabaseBuilder, Limits, Scanner, Verdict};
use support::*;

/// clamscan must be installed (`./test.sh` installs it): the cross-check
/// fails rather than passing without having compared anything.
fn have_clamscan() -> bool {
    sluice_testkit::require_program("clamscan", "clamav");
    true
}

/// Runs clamscan over `files` with database `db`: file → signature name or None.
fn clamscan(db: &Path, files: &[PathBuf]) -> BTreeMap<PathBuf, Option<String>> {
    let out = Command::new("clamscan")
        .arg("--no-summary")
        .arg("--stdout")
        .arg("-d")
        .arg(db)
        .args(files)
        .output()
        .expect("clamscan runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut found = BTreeMap::new();
    for line in text.lines() {
        if let Some((path, what)) = line.rsplit_once(": ") {
            let verdict = what
                .strip_suffix(" FOUND")
                .map(|n| n.trim_end_matches(".UNOFFICIAL").to_string());
            if what == "OK" || verdict.is_some() {
                found.insert(PathBuf::from(path), verdict);
            }
        }
    }
    found
}

fn ours(s: &Scanner, path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).unwrap();
    let name = path.to_string_lossy();
    let mail = name.ends_with(".eml") || name.contains(".mbox") || name.ends_with(".mail");
    let v = if mail {
        s.scan_mail(&bytes)
    } else {
        s.scan_file(&bytes)
    };
    match v {
        Verdict::Infected { name } => Some(name),
        _ => None,
    }
}

#[test]
fn same_verdicts_as_clamscan_on_generated_corpus() {
    if !have_clamscan() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dbdir = dir.path().join("db");
    std::fs::create_dir(&dbdir).unwrap();
    let ndb = format!("{}{}", eicar_ndb(), NDB);
    std::fs::write(dbdir.join("sluice.ndb"), &ndb).unwrap();
    std::fs::write(dbdir.join("sluice.hdb"), hdb_line()).unwrap();
    let (db, report) = scan::Database::load_dir(&dbdir).unwrap();
    assert_eq!(report.refused(), 0);
    let s = Scanner::new(Arc::new(db), Limits::default());

    let files: Vec<PathBuf> = corpus()
        .into_iter()
        .map(|(name, bytes, _)| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        })
        .collect();
    let theirs = clamscan(&dbdir, &files);
    let mut differ = Vec::new();
    for f in &files {
        let mine = ours(&s, f);
        let clam = theirs.get(f).cloned().flatten();
        println!(
            "{:<28} sluice={:<22} clamscan={:?}",
            f.file_name().unwrap().to_string_lossy(),
            format!("{mine:?}"),
            clam
        );
        if mine != clam {
            differ.push(f.clone());
        }
    }
    assert!(differ.is_empty(), "verdicts differ on {differ:?}");
}

#[test]
fn clamav_testfiles_with_the_clam_exe_hash() {
    let dir = Path::new("/usr/share/clamav-testfiles");
    assert!(
        dir.join("clam.exe").exists(),
        "/usr/share/clamav-testfiles is missing: apt-get install clamav-testfiles (./test.sh installs it)"
    );
    // The MD5 of clam.exe flags every test file whose format a scanner can open.
    let mut b = DatabaseBuilder::new();
    b.add_hashes("aa15bcf478d165efd2065190eb473bcb:544:ClamAV-Test-File\n");
    let s = Scanner::new(Arc::new(b.build().unwrap().0), Limits::default());
    // Formats this pipeline reads: it must find clam.exe inside every one of these.
    let must = [
        "clam.exe",
        "clam.zip",
        "clam.tar.gz",
        "clam.exe.bz2",
        "clam.bz2.zip",
        "clam.exe.mbox.base64",
        "clam.exe.mbox.uu",
        "clam.mail",
        "clam.ole.doc",
        "clam.ppt",
    ];
    // Not read (counted as unsupported or not recognised): implode-compressed zip
    // (clam.impl.zip), 7z, arj, cab, cpio, rar-like installers, PDF streams,
    // RTF, TNEF, binhex, SZDD, CHM, SIS and packed executables.
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    let mut missed = Vec::new();
    for p in &entries {
        let hit = ours(&s, p);
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        println!("{name:<28} {}", hit.as_deref().unwrap_or("-"));
        if must.contains(&name.as_str()) && hit.is_none() {
            missed.push(name);
        }
    }
    assert!(missed.is_empty(), "not found in {missed:?}");
}

/// Kills the clamd this test started when the test ends, pass or fail.
struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn clamd_instream_client_against_real_clamd() {
    use scan::clamd::{ClamdAddr, ClamdClient};
    use std::time::{Duration, Instant};
    sluice_testkit::require_program("clamd", "clamav-daemon");
    let dir = tempfile::tempdir().unwrap();
    let dbdir = dir.path().join("db");
    std::fs::create_dir(&dbdir).unwrap();
    std::fs::write(dbdir.join("sluice.ndb"), format!("{}{}", eicar_ndb(), NDB)).unwrap();
    let sock = dir.path().join("clamd.sock");
    let conf = dir.path().join("clamd.conf");
    std::fs::write(
        &conf,
        format!(
            "Foreground yes\nLocalSocket {}\nDatabaseDirectory {}\nLogFile {}\nPidFile {}\nTemporaryDirectory {}\n",
            sock.display(),
            dbdir.display(),
            dir.path().join("clamd.log").display(),
            dir.path().join("clamd.pid").display(),
            dir.path().display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("clamd.out")).unwrap();
    let child = Command::new("clamd")
        .arg("-c")
        .arg(&conf)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("clamd starts");
    let _daemon = Daemon(child);
    // Wait for the socket to accept, with a deadline.
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(
            Instant::now() < deadline,
            "clamd did not open {sock:?} within 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let client = ClamdClient::new(ClamdAddr::Unix(sock), Duration::from_secs(30));
    let v = client.scan(scan::EICAR).unwrap();
    assert_eq!(
        v,
        Verdict::Infected {
            name: format!("{}.UNOFFICIAL", scan::EICAR_NAME)
        }
    );
    let mut stream = client.instream().unwrap();
    for b in NDB_PAYLOAD.chunks(5) {
        stream.feed(b).unwrap();
    }
    assert_eq!(
        stream.finish().unwrap(),
        Verdict::Infected {
            name: format!("{NDB_NAME}.UNOFFICIAL")
        }
    );
    assert_eq!(client.scan(b"nothing here").unwrap(), Verdict::Clean);
}
