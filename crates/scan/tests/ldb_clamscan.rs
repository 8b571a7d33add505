//! Logical signatures (`.ldb`) cross-checked with ClamAV itself: the same database
//! files, the same sample files, run through `clamscan` and through Sluice, must
//! give the same verdicts and names (clamscan appends `.UNOFFICIAL` to the names of
//! unsigned databases; it is stripped before comparing).
//!
//! Two parts: hand-written signatures for each feature of the format, and a
//! property test with a fixed seed that generates random logical signatures over
//! random subsignatures (hex with wildcards, gaps and alternatives; the `::i`,
//! `::w`, `::a`, `::f` modifiers; offsets; PCRE subsignatures; count forms and
//! nesting in the expression) and files that hold some of the subsignatures, run in
//! one batch through one clamscan process.
//!
//! Needs `clamscan` (Debian package `clamav`): with `CI` set the tests fail without
//! it; elsewhere they say why and pass.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use scan::{DatabaseBuilder, Limits, Scanner, Verdict};

/// The path of clamscan, or `None` (outside CI) when it is not installed.
fn clamscan_program() -> Option<PathBuf> {
    if sluice_testkit::under_ci() {
        return Some(sluice_testkit::require_program("clamscan", "clamav"));
    }
    let found = ["/usr/bin/clamscan", "/usr/local/bin/clamscan"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        eprintln!("clamscan is not installed (apt-get install clamav): cross-check skipped");
    }
    found
}

/// Runs clamscan with `--allmatch` over `files` with the database directory `db`:
/// file → every signature name it reported (`.UNOFFICIAL` stripped).
fn clamscan_all(prog: &Path, db: &Path, files: &[PathBuf]) -> BTreeMap<PathBuf, BTreeSet<String>> {
    let mut found: BTreeMap<PathBuf, BTreeSet<String>> =
        files.iter().map(|f| (f.clone(), BTreeSet::new())).collect();
    // Several runs of a few hundred files: command lines stay short.
    for batch in files.chunks(400) {
        let out = Command::new(prog)
            .args(["--no-summary", "--stdout", "--allmatch", "-d"])
            .arg(db)
            .args(batch)
            .output()
            .expect("clamscan runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.code() == Some(0) || out.status.code() == Some(1),
            "clamscan failed ({:?}): {}{}",
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr)
        );
        for line in text.lines() {
            if let Some((path, what)) = line.rsplit_once(": ") {
                if let Some(name) = what.strip_suffix(" FOUND") {
                    let name = name.trim_end_matches(".UNOFFICIAL").to_string();
                    found.entry(PathBuf::from(path)).or_default().insert(name);
                }
            }
        }
    }
    found
}

fn build(ldb: &str) -> (scan::Database, scan::LoadReport) {
    let mut b = DatabaseBuilder::new();
    b.add_file("test.ldb", ldb.as_bytes()).unwrap();
    b.build().unwrap()
}

fn scanner(ldb: &str) -> Scanner {
    let (db, report) = build(ldb);
    assert!(report.errors.is_empty(), "{report}: {:?}", report.errors);
    Scanner::new(Arc::new(db), Limits::default())
}

fn verdict(s: &Scanner, bytes: &[u8]) -> Option<String> {
    match s.scan_file(bytes) {
        Verdict::Infected { name } => Some(name),
        _ => None,
    }
}

/// Binary filler (no letters or digits, so `::f` boundaries hold by default) and
/// a binary first line, so that ClamAV treats every sample as binary data and
/// scans its raw bytes (text would be normalised first).
fn binary(parts: &[&[u8]]) -> Vec<u8> {
    let mut v = b"\x00\xff\x01\x02\x7f\x10\x00\x00".to_vec();
    for p in parts {
        v.extend_from_slice(p);
        v.extend_from_slice(b"\x00\x10\xfe.");
    }
    v.extend_from_slice(&[0u8; 16]);
    v
}

#[test]
fn hand_written_signatures_agree_with_clamscan() {
    let Some(prog) = clamscan_program() else {
        return;
    };
    let ldb = [
        // &, | and nesting.
        "Hand.And;Engine:51-255,Target:0;0&1;68616e64616e64;6f74686572",
        "Hand.Or;Engine:51-255,Target:0;(0|1)&2;6f72616c7431;6f72616c7432;6f726d757374",
        // Counts on a subsignature and on a block, distinct subsignatures.
        "Hand.Count;Engine:51-255,Target:0;0>2;636f756e746d65",
        "Hand.Block;Engine:51-255,Target:0;(0|1|2)>2,2;626c6b61;626c6b62;626c6b63",
        "Hand.Eq;Engine:51-255,Target:0;0=2&1;657175616c;6f7468657232",
        // Modifiers.
        "Hand.Nocase;Engine:51-255,Target:0;0;6e6f636173656d65::i",
        "Hand.Wide;Engine:51-255,Target:0;0;776964656d65::w",
        "Hand.WideAscii;Engine:51-255,Target:0;0&1;62617468::wa;62617468656e64",
        "Hand.Fullword;Engine:51-255,Target:0;0;66756c6c776f7264::f",
        // Offsets, wildcards, alternatives, gaps.
        "Hand.Offset;Engine:51-255,Target:0;0&1;8:6f666673;EOF-12:7461696c6d65",
        "Hand.Wild;Engine:51-255,Target:0;0;77696c64??2a{2-4}(6161|6262)656e64",
        // File size.
        "Hand.Size;Engine:51-255,Target:0,FileSize:50-70;0;73697a656d65",
        // PCRE: triggered, flags, offsets.
        "Hand.Pcre;Engine:81-255,Target:0;0&1;70637265;0/pcre[0-9]{3}x/",
        "Hand.PcreI;Engine:81-255,Target:0;0&1;7063726569;0/PCREI[a-c]+z/i",
        "Hand.PcreG;Engine:81-255,Target:0;0&1>2;70637265676c;0/glob[0-9]/g",
        "Hand.PcreAt;Engine:81-255,Target:0;0&1;706174;8:0/anch/",
        // Container: only inside a zip.
        "Hand.Zip;Engine:51-255,Target:0,Container:CL_TYPE_ZIP;0;696e7a6970",
    ]
    .join("\n")
        + "\n";
    let samples: Vec<(&str, Vec<u8>)> = vec![
        ("and", binary(&[b"handand", b"other"])),
        ("and-half", binary(&[b"handand"])),
        ("or", binary(&[b"oralt2", b"ormust"])),
        ("or-half", binary(&[b"oralt1"])),
        ("count3", binary(&[b"countme", b"countme", b"countme"])),
        ("count2", binary(&[b"countme", b"countme"])),
        ("block", binary(&[b"blka", b"blka", b"blkb"])),
        ("block-one", binary(&[b"blka", b"blka", b"blka"])),
        ("eq", binary(&[b"equal", b"equal", b"other2"])),
        ("eq-3", binary(&[b"equal", b"equal", b"equal", b"other2"])),
        ("nocase", binary(&[b"NoCaSeMe"])),
        ("wide", binary(&[b"w\0i\0d\0e\0m\0e\0"])),
        ("wide-ascii", binary(&[b"b\0a\0t\0h\0", b"bathend"])),
        ("wide-ascii-2", binary(&[b"bath", b"bathend"])),
        ("fullword", binary(&[b"fullword"])),
        ("fullword-not", binary(&[b"xfullwordy"])),
        ("offset", {
            let mut v = b"\x00\xff\x01\x02\x7f\x10\x00\x00offs".to_vec();
            v.extend_from_slice(b"\x00\x00\x00tailme\x00\x00\x00\x00\x00\x00");
            v
        }),
        ("wild", binary(&[b"wildQ*..bbend"])),
        ("size", binary(&[b"sizeme", &[b'.'; 20]])),
        ("size-big", binary(&[b"sizeme", &[b'.'; 40]])),
        ("pcre", binary(&[b"pcre", b"pcre123x"])),
        ("pcre-no", binary(&[b"pcre", b"pcre12x"])),
        ("pcrei", binary(&[b"pcrei", b"pcreiabcZ"])),
        ("pcreg", binary(&[b"pcregl", b"glob1", b"glob2", b"glob3"])),
        ("pcreg-2", binary(&[b"pcregl", b"glob1", b"glob2"])),
        ("pcre-at", {
            let mut v = b"\x00\xff\x01\x02\x7f\x10\x00\x00anch".to_vec();
            v.extend_from_slice(b"\x00pat\x00\x00");
            v
        }),
        ("pcre-at-no", binary(&[b"anch", b"pat"])),
        (
            "zip",
            support::zip(&[("a.bin", &binary(&[b"inzip"]))], true),
        ),
        ("notzip", binary(&[b"inzip"])),
    ];
    let dir = tempfile::tempdir().unwrap();
    let dbdir = dir.path().join("db");
    std::fs::create_dir(&dbdir).unwrap();
    std::fs::write(dbdir.join("hand.ldb"), &ldb).unwrap();
    let s = scanner(&ldb);
    let mut files = Vec::new();
    for (name, bytes) in &samples {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        files.push(p);
    }
    let theirs = clamscan_all(&prog, &dbdir, &files);
    let mut differ = Vec::new();
    for (p, (name, bytes)) in files.iter().zip(&samples) {
        let mine = verdict(&s, bytes);
        let clam = &theirs[p];
        println!("{name:<12} sluice={mine:?} clamscan={clam:?}");
        let agree = match &mine {
            Some(n) => clam.contains(n),
            None => clam.is_empty(),
        };
        if !agree {
            differ.push(name.to_string());
        }
    }
    assert!(differ.is_empty(), "verdicts differ on {differ:?}");
    // Each feature was exercised: most samples match something.
    assert!(theirs.values().filter(|v| !v.is_empty()).count() >= 19);
}
