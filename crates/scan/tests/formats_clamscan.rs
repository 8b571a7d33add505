//! The database formats besides `.ldb` (`.ftm` file-type magic, `.cdb` container
//! metadata, `.mdb`/`.imp` PE hashes, the `.pdb`/`.wdb`/`.gdb` phishing lists), each loaded into Sluice and into `clamscan`
//! from the same directory and run over the same files: verdicts and names must
//! agree (clamscan appends `.UNOFFICIAL` to the names of unsigned databases; it is
//! stripped before comparing).
//!
//! Needs `clamscan` (Debian package `clamav`): with `CI` set the tests fail without
//! it; elsewhere they say why and pass.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use scan::{Database, Limits, Scanner, Verdict};
use support::clamscan::{clamscan_all, clamscan_program};
use support::{hex, md5_hex};

/// Writes the database files and the samples into a temporary directory, scans the
/// samples with Sluice and with clamscan, and checks that both give `expected`
/// (sample name → signature name, or `None` for clean). Samples are byte
/// slices or owned vectors.
fn agree<B: AsRef<[u8]>>(db_files: &[(&str, &[u8])], samples: &[(&str, B, Option<&str>)]) {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    std::fs::create_dir(&db_dir).unwrap();
    for (name, bytes) in db_files {
        std::fs::write(db_dir.join(name), bytes).unwrap();
    }
    let (db, report) = Database::load_dir(&db_dir).unwrap();
    assert!(report.errors.is_empty(), "{report}");
    let scanner = Scanner::new(Arc::new(db), Limits::default());
    let mut paths: Vec<PathBuf> = Vec::new();
    for (name, bytes, expected) in samples {
        let bytes = bytes.as_ref();
        // A mail is scanned as a message, anything else as a file, as `sluice scan` does.
        let verdict = if scan::filetype::looks_like_mail(bytes) {
            scanner.scan_mail(bytes)
        } else {
            scanner.scan_file(bytes)
        };
        let mine = match verdict {
            Verdict::Infected { name } => Some(name),
            _ => None,
        };
        assert_eq!(mine.as_deref(), *expected, "Sluice on {name}");
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        paths.push(p);
    }
    let Some(prog) = clamscan_program() else {
        return;
    };
    let found = clamscan_all(&prog, &db_dir, &paths);
    for ((name, _, expected), p) in samples.iter().zip(&paths) {
        let theirs: BTreeSet<String> = found.get(Path::new(p)).cloned().unwrap_or_default();
        let expected: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
        assert_eq!(theirs, expected, "clamscan on {name}");
    }
}

/// Runs clamscan with the database in `db_dir` over `paths` and checks it
/// finds what Sluice found in each (`mine`: a label and Sluice's verdict,
/// in the order of `paths`), listing every file where they differ.
fn agree_with_clamscan<W: std::fmt::Display>(
    db_dir: &Path,
    mine: &[(W, Option<String>)],
    paths: &[PathBuf],
) {
    let Some(prog) = clamscan_program() else {
        return;
    };
    let found = clamscan_all(&prog, db_dir, paths);
    let mut differ = Vec::new();
    for ((what, v), p) in mine.iter().zip(paths) {
        let theirs: BTreeSet<String> = found.get(p).cloned().unwrap_or_default();
        let ours: BTreeSet<String> = v.iter().cloned().collect();
        if theirs != ours {
            differ.push(format!("{what}: Sluice {ours:?}, clamscan {theirs:?}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{} differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

/// Scans `mail` with `scanner` and writes it to `dir/file` for clamscan:
/// the name Sluice found, if any, and the file's path.
fn scanned_mail(
    scanner: &Scanner,
    dir: &Path,
    file: &str,
    mail: &[u8],
) -> (Option<String>, PathBuf) {
    let v = match scanner.scan_mail(mail) {
        Verdict::Infected { name } => Some(name),
        _ => None,
    };
    let p = dir.join(file);
    std::fs::write(&p, mail).unwrap();
    (v, p)
}

/// Binary filler, so that ClamAV scans the raw bytes (text would be normalised).
fn binary(prefix: &[u8], body: &[u8]) -> Vec<u8> {
    let mut v = prefix.to_vec();
    v.extend_from_slice(b"\x00\xff\x01\x02\x7f\x10\x00\x00");
    v.extend_from_slice(body);
    v.extend_from_slice(&[0u8; 600]);
    v
}

#[test]
fn ftm_magic_gives_the_type_target_typed_signatures_need() {
    // Files starting `SLPDF` are PDFs by this magic; the signature is for PDFs only
    // (target type 10), so it finds its bytes in such a file and nowhere else.
    let ftm = b"0:0:534c504446:Sluice test PDF:CL_TYPE_ANY:CL_TYPE_PDF\n";
    let ndb = b"Sluice.Test.FtmPdf:10:*:66746d7061796c6f6164\n";
    let payload = b"ftmpayload";
    agree(
        &[("test.ftm", ftm), ("test.ndb", ndb)],
        &[
            (
                "typed",
                &binary(b"SLPDF", payload),
                Some("Sluice.Test.FtmPdf"),
            ),
            ("untyped", &binary(b"NOPDF", payload), None),
        ],
    );
}

#[test]
fn cdb_container_metadata_agrees_with_clamscan() {
    let pad = |n: usize| vec![b'.'; n];
    let whole = support::zip(&[("whole.txt", b"the container size decides")], false);
    let cdb = format!(
        "Sluice.Test.CdbName:CL_TYPE_ZIP:*:evil[0-9]+\\.exe$:*:*:*:*:*:*\n\
         Sluice.Test.CdbSize:CL_TYPE_ZIP:*:^sized:*:20-30:*:*:*:*\n\
         Sluice.Test.CdbPos:*:*:^pos:*:*:*:3:*:*\n\
         Sluice.Test.CdbEnc:CL_TYPE_ZIP:*:^locked:*:*:1:*:*:*\n\
         Sluice.Test.CdbWhole:CL_TYPE_ZIP:{}:^whole:*:*:*:*:*:*\n\
         Sluice.Test.CdbStream:CL_TYPE_ZIP:*:^streamed:*:100:0:*:*:*\n\
         # other containers are valid, not used\n\
         Sluice.Test.CdbRar:CL_TYPE_RAR:*:evil:*:*:*:*:*:*\n",
        whole.len()
    );
    let samples: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        (
            "name.zip",
            support::zip(
                &[("docs/readme.txt", b"hello"), ("evil42.exe", b"MZ")],
                true,
            ),
            Some("Sluice.Test.CdbName"),
        ),
        (
            "name-clean.zip",
            support::zip(&[("evil42.exe.txt", b"MZ")], true),
            None,
        ),
        (
            "size.zip",
            support::zip(&[("sized.bin", &pad(25))], false),
            Some("Sluice.Test.CdbSize"),
        ),
        (
            "size-clean.zip",
            support::zip(&[("sized.bin", &pad(40))], false),
            None,
        ),
        (
            "pos.zip",
            support::zip(&[("a", b"a"), ("b", b"b"), ("pos.txt", b"p")], false),
            Some("Sluice.Test.CdbPos"),
        ),
        (
            "pos-clean.zip",
            support::zip(&[("pos.txt", b"p"), ("a", b"a"), ("b", b"b")], false),
            None,
        ),
        (
            "enc.zip",
            support::zip_streamed(&[("locked.doc", b"secret")], true),
            Some("Sluice.Test.CdbEnc"),
        ),
        (
            "enc-clean.zip",
            support::zip_streamed(&[("locked.doc", b"secret")], false),
            None,
        ),
        ("whole.zip", whole.clone(), Some("Sluice.Test.CdbWhole")),
        (
            "whole-clean.zip",
            support::zip(&[("whole.txt", b"the container size decides!")], false),
            None,
        ),
        (
            "stream.zip",
            support::zip_streamed(&[("streamed.bin", &pad(100))], false),
            Some("Sluice.Test.CdbStream"),
        ),
        (
            "stream-clean.zip",
            support::zip_streamed(&[("streamed.bin", &pad(101))], false),
            None,
        ),
    ];
    agree(&[("test.cdb", cdb.as_bytes())], &samples);
}

/// A PE32 image: 0x200 bytes of headers, then one section of `size` bytes of
/// `fill` at 0x200 (file alignment 0x200, entry point in the section).
fn pe_image(size: u32, fill: u8) -> Vec<u8> {
    let mut f = vec![0u8; 0x200];
    f[..2].copy_from_slice(b"MZ");
    f[0x3c..0x40].copy_from_slice(&0x80u32.to_le_bytes());
    f[0x80..0x84].copy_from_slice(b"PE\0\0");
    f[0x84..0x86].copy_from_slice(&0x14cu16.to_le_bytes());
    f[0x86..0x88].copy_from_slice(&1u16.to_le_bytes());
    f[0x94..0x96].copy_from_slice(&224u16.to_le_bytes());
    f[0x96..0x98].copy_from_slice(&0x0102u16.to_le_bytes());
    let o = 0x98;
    f[o..o + 2].copy_from_slice(&0x10bu16.to_le_bytes());
    f[o + 16..o + 20].copy_from_slice(&0x1000u32.to_le_bytes());
    f[o + 28..o + 32].copy_from_slice(&0x40_0000u32.to_le_bytes());
    f[o + 32..o + 36].copy_from_slice(&0x1000u32.to_le_bytes());
    f[o + 36..o + 40].copy_from_slice(&0x200u32.to_le_bytes());
    f[o + 40..o + 42].copy_from_slice(&4u16.to_le_bytes());
    f[o + 48..o + 50].copy_from_slice(&4u16.to_le_bytes());
    f[o + 56..o + 60].copy_from_slice(&0x2000u32.to_le_bytes());
    f[o + 60..o + 64].copy_from_slice(&0x200u32.to_le_bytes());
    f[o + 68..o + 70].copy_from_slice(&2u16.to_le_bytes());
    f[o + 92..o + 96].copy_from_slice(&16u32.to_le_bytes());
    let s = o + 224;
    f[s..s + 5].copy_from_slice(b".text");
    f[s + 8..s + 12].copy_from_slice(&size.to_le_bytes());
    f[s + 12..s + 16].copy_from_slice(&0x1000u32.to_le_bytes());
    f[s + 16..s + 20].copy_from_slice(&size.to_le_bytes());
    f[s + 20..s + 24].copy_from_slice(&0x200u32.to_le_bytes());
    f[s + 36..s + 40].copy_from_slice(&0x6000_0020u32.to_le_bytes());
    f.resize(0x200 + size as usize, fill);
    f
}

#[test]
fn mdb_section_hashes_agree_with_clamscan() {
    let section = vec![0xccu8; 0x400];
    let mdb = format!(
        "1024:{}:Sluice.Test.Mdb\n*:{}:Sluice.Test.MdbAnySize:73\n",
        md5_hex(&section),
        md5_hex(&[0x90u8; 0x600])
    );
    let cut = {
        // The section runs past the end of the file: ClamAV hashes what is there.
        let mut f = pe_image(0x600, 0x90);
        f.truncate(0x200 + 0x500);
        f
    };
    let cut_mdb = format!(
        "{}:{}:Sluice.Test.MdbCut\n",
        0x500,
        md5_hex(&[0x90u8; 0x500])
    );
    agree(
        &[
            ("test.mdb", mdb.as_bytes()),
            ("cut.mdb", cut_mdb.as_bytes()),
        ],
        &[
            (
                "sect.exe",
                &pe_image(0x400, 0xcc)[..],
                Some("Sluice.Test.Mdb"),
            ),
            ("other.exe", &pe_image(0x400, 0xcd), None),
            (
                "any.exe",
                &pe_image(0x600, 0x90),
                Some("Sluice.Test.MdbAnySize"),
            ),
            ("cut.exe", &cut, Some("Sluice.Test.MdbCut")),
            // Not a PE without its signature: no sections to hash.
            ("notpe.bin", &pe_image(0x400, 0xcc)[2..], None),
        ],
    );
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(data))
}

/// `.imp` import table hashes: PE32 and PE32+ images importing from several DLLs
/// by name and by ordinal (Winsock and OLE Automation ordinals, which ClamAV
/// names, and others, which it numbers), with and without import lookup tables
/// (PE32+ ones are not matched: clamscan does not get to their imports);
/// each image's `.imp` line is worked out from ClamAV's description of the hash
/// by [`support::pe::import_string`], not by the scanner.
#[test]
fn imp_import_hashes_agree_with_clamscan() {
    use support::pe::{import_string, pe_with_imports, Func, Options};
    let kernel: &[Func] = &[
        Func::Name("CreateFileA"),
        Func::Name("ExitProcess"),
        Func::Name("GetProcAddress"),
    ];
    let sock: &[Func] = &[
        Func::Ordinal(1),
        Func::Ordinal(3),
        Func::Ordinal(23),
        Func::Ordinal(115),
        Func::Ordinal(999),
    ];
    let mixed: &[(&str, &[Func])] = &[
        ("KERNEL32.dll", kernel),
        ("WS2_32.dll", sock),
        ("OLEAUT32.DLL", &[Func::Ordinal(2), Func::Ordinal(6)]),
        (
            "advapi32.dll",
            &[Func::Ordinal(7), Func::Name("RegOpenKeyA")],
        ),
        ("user32.dll", &[Func::Name("MessageBoxA")]),
        ("my.ctl.ocx", &[Func::Name("Run")]),
        ("two.dots.dll", &[Func::Name("F")]),
        ("noext", &[Func::Name("X_y.z")]),
    ];
    // ClamAV does not check DLL names (only function names).
    let small: &[(&str, &[Func])] = &[
        ("wsock32.dll", sock),
        ("kernel32.dll", kernel),
        ("Odd Name-1.DLL", &[Func::Name("F")]),
    ];
    let other: &[(&str, &[Func])] = &[("kernel32.dll", &kernel[..2])];
    let line = |imports: &[(&str, &[Func])], name: &str| {
        let s = import_string(imports);
        format!("{}:{}:{name}\n", md5_hex(s.as_bytes()), s.len())
    };
    let mut imp = String::new();
    let mut samples: Vec<(&str, Vec<u8>, Option<&str>)> = Vec::new();
    for (plus, lookup_table, file, name) in [
        (false, true, "pe32.exe", "Sluice.Test.Imp32"),
        // clamscan 1.4 stops scanning a PE32+ file before its imports: no match.
        (true, true, "pe64.exe", "Sluice.Test.Imp64"),
        (false, false, "iat32.exe", "Sluice.Test.ImpIat32"),
        (true, false, "iat64.exe", "Sluice.Test.ImpIat64"),
    ] {
        let o = Options {
            plus,
            lookup_table,
            ..Options::default()
        };
        // The same imports hash alike in every form: each form gets its own
        // signature on its own copy, told apart by a first DLL of its own.
        let own: Vec<(&str, &[Func])> = std::iter::once((file, kernel))
            .chain(mixed.iter().copied())
            .collect();
        imp.push_str(&line(&own, name));
        samples.push((file, pe_with_imports(&own, o), (!plus).then_some(name)));
    }
    // A wildcard size, a SHA-256 hash, a wrong size.
    let s = import_string(small);
    imp.push_str(&format!("{}:*:Sluice.Test.ImpAny\n", md5_hex(s.as_bytes())));
    let s = import_string(other);
    imp.push_str(&format!(
        "{}:{}:Sluice.Test.ImpSha256\n",
        sha256_hex(s.as_bytes()),
        s.len()
    ));
    let wrong: &[(&str, &[Func])] = &[("user32.dll", &[Func::Name("MessageBoxW")])];
    let s = import_string(wrong);
    imp.push_str(&format!(
        "{}:{}:Sluice.Test.ImpWrongSize\n",
        md5_hex(s.as_bytes()),
        s.len() + 1
    ));
    // A directory whose size leaves out the null descriptor loses its last DLL:
    // the signature on the first DLL alone matches.
    let cut: &[(&str, &[Func])] = &[("shell32.dll", &[Func::Name("ShellExecuteA")])];
    imp.push_str(&line(cut, "Sluice.Test.ImpCut"));
    let no_null = Options {
        count_null: false,
        ..Options::default()
    };
    samples.extend([
        (
            "any.exe",
            pe_with_imports(small, Options::default()),
            Some("Sluice.Test.ImpAny"),
        ),
        (
            "sha256.exe",
            pe_with_imports(other, Options::default()),
            Some("Sluice.Test.ImpSha256"),
        ),
        (
            "wrong.exe",
            pe_with_imports(wrong, Options::default()),
            None,
        ),
        (
            "cut.exe",
            pe_with_imports(&[cut[0], ("kernel32.dll", kernel)], no_null),
            Some("Sluice.Test.ImpCut"),
        ),
        // A function name ClamAV refuses leaves the table unhashed.
        (
            "badname.exe",
            pe_with_imports(
                &[
                    ("wsock32.dll", sock),
                    ("kernel32.dll", &[Func::Name("Bad-Name")]),
                ],
                Options::default(),
            ),
            None,
        ),
    ]);
    let mail = support::mail_with("pe32.exe", &samples[0].1, "base64");
    samples.push(("pe32.eml", mail, Some("Sluice.Test.Imp32")));
    let (db, report) = {
        let mut b = scan::DatabaseBuilder::new();
        b.add_file("test.imp", imp.as_bytes()).unwrap();
        b.build().unwrap()
    };
    assert_eq!(report.import_hash_signatures, 8, "{report}");
    assert!(report.unsupported_files.is_empty(), "{report}");
    assert_eq!(db.hash_signatures(), 0);
    agree(&[("test.imp", imp.as_bytes())], &samples);
}

/// ClamAV's own PE test files (Debian's `clamav-testfiles`): `sigtool --mdb`
/// gives their section hashes, which Sluice must find from the streamed bytes.
/// Debian's `clamav-testfiles` directory. It must be there under CI
/// (`./test.sh` installs it); elsewhere a test without it is skipped, saying so.
fn clamav_testfiles() -> Option<&'static Path> {
    let dir = Path::new("/usr/share/clamav-testfiles");
    if dir.exists() {
        return Some(dir);
    }
    assert!(
        !sluice_testkit::under_ci(),
        "clamav-testfiles is not installed (apt-get install clamav-testfiles)"
    );
    eprintln!("clamav-testfiles is not installed: skipped");
    None
}

#[test]
fn mdb_from_sigtool_on_clamav_testfiles() {
    let Some(dir) = clamav_testfiles() else {
        return;
    };
    let sigtool = sluice_testkit::require_program("sigtool", "clamav");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "exe") {
            continue;
        }
        let out = std::process::Command::new(&sigtool)
            .arg("--mdb")
            .arg(&path)
            .output()
            .unwrap();
        // sigtool reports each section as `Section{N}: SIZE:MD5` on its debug output.
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        let sections: Vec<String> = text
            .lines()
            .filter_map(|l| {
                let rest = l.split_once("Section{")?.1.split_once("}: ")?.1.trim();
                let (size, md5) = rest.split_once(':')?;
                let ok = size.bytes().all(|b| b.is_ascii_digit())
                    && md5.len() == 32
                    && md5.bytes().all(|b| b.is_ascii_hexdigit());
                ok.then(|| rest.to_string())
            })
            .collect();
        let Some(last) = sections.last() else {
            continue;
        };
        let mdb = format!("{last}:Sluice.Test.Sigtool\n");
        let mut b = scan::DatabaseBuilder::new();
        b.add_file("sigtool.mdb", mdb.as_bytes()).unwrap();
        let (db, report) = b.build().unwrap();
        assert_eq!(report.section_hash_signatures, 1, "{report}");
        let scanner = Scanner::new(Arc::new(db), Limits::default());
        let bytes = std::fs::read(&path).unwrap();
        let mut s = scanner.file_session();
        for c in bytes.chunks(333) {
            s.feed(c);
        }
        assert_eq!(
            s.finish(),
            Verdict::Infected {
                name: "Sluice.Test.Sigtool".into()
            },
            "{} section {last}",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} PE test files had sections");
}

/// A `.cvd` whose body does not have the header's MD5 is refused, with an error
/// naming the file; clamscan refuses it too.
/// ClamAV's own PE test files: `clamscan --debug` prints the import hash
/// (`IMP: md5:size`) of each PE file it scans, the outer file and those it
/// finds embedded or unpacks. Sluice, which hashes the outer file only, must
/// find one of them from the streamed bytes (an empty table's, size 0, through
/// a wildcard size, as ClamAV matches it).
#[test]
fn imp_from_clamscan_debug_on_clamav_testfiles() {
    let Some(dir) = clamav_testfiles() else {
        return;
    };
    let Some(prog) = clamscan_program() else {
        return;
    };
    // The import table is hashed only while some `.imp` signature is loaded.
    let db_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        db_dir.path().join("none.imp"),
        format!("{}:1:Sluice.Test.None\n", "0".repeat(32)),
    )
    .unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "exe") {
            continue;
        }
        let out = std::process::Command::new(&prog)
            .arg("--debug")
            .arg("--database")
            .arg(db_dir.path())
            .arg(&path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        let hashes: BTreeSet<(&str, &str)> = text
            .lines()
            .filter_map(|l| l.split_once("IMP: ")?.1.trim().split_once(':'))
            .collect();
        if hashes.is_empty() {
            continue;
        }
        let imp: String = hashes
            .iter()
            .map(|(md5, size)| {
                let any = if *size == "0" { "*" } else { size };
                format!("{md5}:{any}:Imp.{md5}.{size}\n")
            })
            .collect();
        let mut b = scan::DatabaseBuilder::new();
        b.add_file("clamscan.imp", imp.as_bytes()).unwrap();
        let (db, report) = b.build().unwrap();
        assert_eq!(report.import_hash_signatures, hashes.len(), "{report}");
        let scanner = Scanner::new(Arc::new(db), Limits::default());
        let bytes = std::fs::read(&path).unwrap();
        let mut s = scanner.file_session();
        for c in bytes.chunks(333) {
            s.feed(c);
        }
        let v = s.finish();
        assert!(
            matches!(&v, Verdict::Infected { name } if name.starts_with("Imp.")),
            "{}: {v:?}, clamscan's hashes {hashes:?}",
            path.display()
        );
        checked += 1;
    }
    assert!(
        checked >= 3,
        "only {checked} PE test files had an import hash"
    );
}

#[test]
fn tampered_cvd_is_refused_by_both() {
    let mut tar_bytes = Vec::new();
    {
        let mut t = tar::Builder::new(&mut tar_bytes);
        let data = support::eicar_ndb();
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        t.append_data(&mut h, "test.ndb", data.as_bytes()).unwrap();
        t.finish().unwrap();
    }
    let body = support::gzip(&tar_bytes);
    let mut cvd = format!(
        "ClamAV-VDB:27 Nov 2026 00-00 +0000:1:1:90:{}:x:test:1",
        "0".repeat(32)
    )
    .into_bytes();
    cvd.resize(512, b' ');
    cvd.extend_from_slice(&body);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tampered.cvd"), &cvd).unwrap();
    let err = Database::load_dir(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("tampered.cvd: refused: body MD5"),
        "the error names the file and the check: {err}"
    );
    let Some(prog) = clamscan_program() else {
        return;
    };
    let out = std::process::Command::new(prog)
        .args(["--no-summary", "-d"])
        .arg(dir.path())
        .arg(dir.path().join("tampered.cvd"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "clamscan refuses the database too"
    );
}

/// `.cdb` signatures for the `CL_TYPE_MAIL` container: attachment names and
/// sizes, as clamscan checks each attachment of a message.
#[test]
fn cdb_mail_attachments_agree_with_clamscan() {
    let cdb = "Sluice.Test.CdbMailName:CL_TYPE_MAIL:*:invoice[0-9]*\\.scr$:*:*:*:*:*:*\n\
               Sluice.Test.CdbMailSize:CL_TYPE_MAIL:*:^report\\.pdf$:*:10-20:*:*:*:*\n";
    let named = support::mail_with("invoice2026.scr", b"not really a screensaver\n", "base64");
    let other = support::mail_with("invoice2026.txt", b"not really a screensaver\n", "base64");
    let sized = support::mail_with("report.pdf", b"fifteen bytes!\n", "base64");
    let big = support::mail_with("report.pdf", b"more than twenty bytes here\n", "base64");
    agree(
        &[("mail.cdb", cdb.as_bytes())],
        &[
            ("named.eml", &named, Some("Sluice.Test.CdbMailName")),
            ("other.eml", &other, None),
            ("sized.eml", &sized, Some("Sluice.Test.CdbMailSize")),
            ("big.eml", &big, None),
        ],
    );
}

/// A mail whose whole body is one part of `content_type` in `encoding` holding
/// `body`.
fn single_part(content_type: &str, encoding: &str, body: &[u8]) -> Vec<u8> {
    let mut m = format!(
        "From: bank@example.org\r\nTo: rcpt@example.org\r\nSubject: your account\r\n\
MIME-Version: 1.0\r\nContent-Type: {content_type}\r\nContent-Transfer-Encoding: {encoding}\r\n\r\n"
    )
    .into_bytes();
    m.extend_from_slice(body);
    m.extend_from_slice(b"\r\n");
    m
}

/// An HTML mail around `links`.
fn html_mail(links: &str) -> Vec<u8> {
    single_part(
        "text/html; charset=us-ascii",
        "7bit",
        format!("<html><body><p>Dear customer,</p>\r\n{links}\r\n</body></html>").as_bytes(),
    )
}

/// A multipart/mixed mail with a short text part, then a part of `headers`
/// holding `body` as it is.
fn mixed_mail(headers: &str, body: &[u8]) -> Vec<u8> {
    let mut m = format!(
        "From: bank@example.org\r\nTo: rcpt@example.org\r\nSubject: your account\r\n\
MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n\
--b1\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\naGVsbG8K\r\n\
--b1\r\n{headers}\r\n\r\n"
    )
    .into_bytes();
    m.extend_from_slice(body);
    m.extend_from_slice(b"\r\n--b1--\r\n");
    m
}

#[test]
fn phishing_lists_agree_with_clamscan() {
    const SPOOF: Option<&str> = Some("Heuristics.Phishing.Email.SpoofedDomain");
    const SSL: Option<&str> = Some("Heuristics.Phishing.Email.SSL-Spoof");
    let pdb = b"# protected domains\n\
H:paypal.com\n\
H:ebay.com:0-20\n\
R:.+\\.evil\\.org([/?].*)?:.+\\.bank\\.com([/?].*)?\n";
    let wdb = b"M:www.paypal.co.uk:www.paypal.com\n\
X:.+\\.paypal-mail\\.net([/?].*)?:.+\\.paypal\\.com([/?].*)?:17-\n";
    let sha = |s: &str| -> String {
        use sha2::Digest;
        sha2::Sha256::digest(s.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let gdb = format!(
        "S:P:0badf00d\nS:W:{allowed}\nS:F:{allowed}\nS2:F:{}\nS1:F:{}\nS:F:{}\n",
        sha("phish.example.com/"),
        sha("blocked.example.org/bad/"),
        sha("malware.example.net/dl/x.exe"),
        allowed = sha("allowed.example.org/"),
    );
    let spoof = r#"<a href="http://evil.example.net/login">www.paypal.com</a>"#;
    let b64_short_lines = {
        use base64::Engine;
        let text = base64::engine::general_purpose::STANDARD.encode(html_mail(spoof));
        let mut out = Vec::new();
        for line in text.as_bytes().chunks(12) {
            out.extend_from_slice(line);
            out.extend_from_slice(b"\r\n");
        }
        out
    };
    let big = format!("{}{spoof}", "<p>filler text</p>\r\n".repeat(6000));
    let samples: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        ("spoofed.eml", html_mail(spoof), SPOOF),
        (
            "subdomain.eml",
            html_mail(r#"<a href="http://evil.example.net/">secure.paypal.com</a>"#),
            SPOOF,
        ),
        (
            "spaced.eml",
            html_mail(r#"<a href="http://evil.example.net/">secure paypal.com</a>"#),
            SPOOF,
        ),
        (
            "tags-in-text.eml",
            html_mail(r#"<A HREF="http://evil.example.net/">www.pay<b>pal</b>.com</A>"#),
            SPOOF,
        ),
        (
            "other-domain.eml",
            html_mail(r#"<a href="http://evil.example.net/">www.notpaypal.com</a>"#),
            None,
        ),
        (
            "same-domain.eml",
            html_mail(r#"<a href="http://cgi.paypal.com/x">www.paypal.com</a>"#),
            None,
        ),
        (
            "no-mismatch.eml",
            html_mail(r#"<a href="http://www.paypal.com/login">www.paypal.com</a> <a href="http://evil.example.net/">click here</a>"#),
            None,
        ),
        (
            "allowed-host-pair.eml",
            html_mail(r#"<a href="http://www.paypal.co.uk/">www.paypal.com</a>"#),
            None,
        ),
        (
            "not-allowed-host-pair.eml",
            html_mail(r#"<a href="http://www.paypal.de/">www.paypal.com</a>"#),
            SPOOF,
        ),
        (
            "allowed-regex.eml",
            html_mail(r#"<a href="http://news.paypal-mail.net/">www.paypal.com</a>"#),
            None,
        ),
        (
            "regex-pair.eml",
            html_mail(r#"<a href="http://login.evil.org/">www.bank.com</a>"#),
            SPOOF,
        ),
        (
            "regex-pair-clean.eml",
            html_mail(r#"<a href="http://login.good.org/">www.bank.com</a>"#),
            None,
        ),
        (
            "other-level.eml",
            html_mail(r#"<a href="http://evil.example.net/">www.ebay.com</a>"#),
            None,
        ),
        (
            "cloaked-null.eml",
            html_mail(r#"<a href="http://evil%00.example.net/">www.paypal.com</a>"#),
            Some("Heuristics.Phishing.Email.Cloaked.Null"),
        ),
        (
            "cloaked-null-user.eml",
            html_mail(r#"<a href="http://www.paypal.com%00@evil.example.net/">www.paypal.com</a>"#),
            Some("Heuristics.Phishing.Email.Cloaked.Null"),
        ),
        (
            "ssl.eml",
            html_mail(r#"<a href="http://www.paypal.com/">https://www.paypal.com</a>"#),
            SSL,
        ),
        (
            "entity-href.eml",
            html_mail(r#"<a href="http&#58;//evil&#x2e;example.net/">www.paypal.com</a>"#),
            SPOOF,
        ),
        (
            "entity-text.eml",
            html_mail(r#"<a href="http://evil.example.net/">www.pay&#112;al.com</a>"#),
            None,
        ),
        (
            "title.eml",
            html_mail(r#"<a href="http://evil.example.net/" title="www.paypal.com">sign in</a>"#),
            SPOOF,
        ),
        (
            "image.eml",
            html_mail(r#"<a href="http://evil.example.net/"><img src="http://www.paypal.com/logo.gif"></a>"#),
            SPOOF,
        ),
        (
            "form.eml",
            html_mail(r#"<form action="http://evil.example.net/"><a href="http://www.paypal.com/">x</a></form>"#),
            SPOOF,
        ),
        // With Safe Browsing hashes loaded, a real URL without `:` is not checked.
        (
            "no-scheme.eml",
            html_mail(r#"<a href="evil.example.net">www.paypal.com</a>"#),
            None,
        ),
        (
            "hash-phishing.eml",
            html_mail(r#"<a href="http://www.phish.example.com/login.html">sign in</a>"#),
            Some("Heuristics.Safebrowsing.Suspected-phishing_safebrowsing.clamav.net"),
        ),
        (
            "hash-blocked.eml",
            html_mail(r#"<a href="http://Blocked.Example.ORG/bad/page?x=1">here</a>"#),
            Some("Heuristics.Phishing.URL.Blocked"),
        ),
        (
            "hash-malware.eml",
            html_mail(r#"<a href="http://user@malware.example.net/dl/%78.exe">x.exe</a>"#),
            Some("Heuristics.Safebrowsing.Suspected-malware_safebrowsing.clamav.net"),
        ),
        (
            "hash-dot-segments.eml",
            html_mail(r#"<a href="http://a.b.malware.example.net/./dl/y/../x.exe?q=1">x</a>"#),
            Some("Heuristics.Safebrowsing.Suspected-malware_safebrowsing.clamav.net"),
        ),
        // ClamAV escapes `#` again before it looks for the anchor: the path differs.
        (
            "hash-anchor.eml",
            html_mail(r#"<a href="http://malware.example.net/dl/x.exe#top">x.exe</a>"#),
            None,
        ),
        // A part with no tag giving a URL has its text URLs looked up (not
        // `https:` ones, as ClamAV matches them).
        (
            "hash-text-url.eml",
            single_part("text/plain", "7bit", b"Please visit http://www.phish.example.com/login.html today."),
            Some("Heuristics.Safebrowsing.Suspected-phishing_safebrowsing.clamav.net"),
        ),
        (
            "hash-text-url-html.eml",
            html_mail("<p>Please visit http://www.phish.example.com/login.html\r\ntoday.</p>"),
            Some("Heuristics.Safebrowsing.Suspected-phishing_safebrowsing.clamav.net"),
        ),
        // Found in the text, but an upper-case scheme is no URL to the check.
        (
            "hash-text-url-upper.eml",
            html_mail("<p>Please visit HTTP://www.phish.example.com/login.html\r\ntoday.</p>"),
            None,
        ),
        (
            "hash-text-url-https.eml",
            single_part("text/plain", "7bit", b"Please visit https://www.phish.example.com/login.html today."),
            None,
        ),
        (
            "hash-text-url-with-tag.eml",
            html_mail(r#"<img src="logo.gif"> Please visit http://www.phish.example.com/login.html today."#),
            None,
        ),
        (
            "hash-allowed.eml",
            html_mail(r#"<a href="http://allowed.example.org/">allowed.example.org</a>"#),
            None,
        ),
        (
            "base64-short-lines.eml",
            single_part("text/html", "base64", &b64_short_lines),
            SPOOF,
        ),
        (
            "qp-split-tag.eml",
            single_part("text/html", "quoted-printable", &support::qp(html_mail(spoof).as_slice())),
            SPOOF,
        ),
        ("plain-text.eml", single_part("text/plain", "7bit", spoof.as_bytes()), SPOOF),
        (
            "mixed-html.eml",
            mixed_mail("Content-Type: text/html", spoof.as_bytes()),
            SPOOF,
        ),
        (
            "mixed-plain.eml",
            mixed_mail("Content-Type: text/plain", spoof.as_bytes()),
            None,
        ),
        (
            "mixed-plain-qp.eml",
            mixed_mail(
                "Content-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable",
                spoof.as_bytes(),
            ),
            SPOOF,
        ),
        (
            "octet-stream.eml",
            mixed_mail("Content-Type: application/octet-stream", spoof.as_bytes()),
            None,
        ),
        (
            "html-attachment.eml",
            mixed_mail(
                "Content-Type: text/html; name=\"page.html\"\r\nContent-Disposition: attachment; filename=\"page.html\"",
                spoof.as_bytes(),
            ),
            None,
        ),
        ("too-big.eml", html_mail(&big), None),
    ];
    let samples: Vec<(&str, &[u8], Option<&str>)> = samples
        .iter()
        .map(|(n, m, e)| (*n, m.as_slice(), *e))
        .collect();
    agree(
        &[
            ("test.pdb", pdb),
            ("test.wdb", wdb),
            ("test.gdb", gdb.as_bytes()),
        ],
        &samples,
    );
}

/// Links built from pieces that exercise each step of ClamAV's check (schemes,
/// user names, numeric hosts, escapes, case, spaces, punctuation, subdomains,
/// country domains, entity-encoded hrefs), one a mail: Sluice and clamscan must
/// give the same verdict on every one.
#[test]
fn phishing_link_variants_agree_with_clamscan() {
    let reals = [
        "http://evil.example.net/login",
        "https://evil.example.net",
        "evil.example.net",
        "HTTP://evil.example.net/",
        "http://www.paypal.com@evil.example.net/",
        "http://10.1.2.3/x",
        "http://www.paypal.com/",
        "https://www.paypal.com/x?y",
        "http://www.paypal.co.uk/",
        "http://news.paypal-mail.net/",
        "http://login.evil.org/",
        "http://evil%2eexample.net/",
        "http://evil.example.net/%00",
        "mailto:someone@evil.example.net",
        "http:/ /evil.example.net",
        " http://evil.example.net ",
        "http&#58;//evil.example.net/",
        "http://evil.example.net\\path",
        "javascript:void(0)",
        "http://evil.example.net:8080/",
        "ftp://evil.example.net/",
        "http://www.bank.com/",
        "http://192.168.0.1.evil.example.net/",
        "http://evil.co.uk/",
        "//evil.example.net/",
        "http:evil.example.net",
        "http://evil .example.net/",
        "https://www.paypal.com.evil.example.net/",
        "http://WWW.PAYPAL.COM/",
        "http://paypal.com/",
        "http://evil.example.net/?u=www.paypal.com",
        "http://x.y.z.evil.example.net/a/b",
        "http://x.www.paypal.co.uk/",
        "http://paypal.co.uk/",
    ];
    let shown = [
        "www.paypal.com",
        "WWW.PAYPAL.COM",
        "http://www.paypal.com",
        "https://www.paypal.com/",
        "https://secure.paypal.com/login",
        "secure paypal.com",
        "www . paypal . com",
        "paypal.com",
        "notpaypal.com",
        "www.paypal.com.evil.example.net",
        "www.paypal.com/login?x",
        "(www.paypal.com)",
        "&lt;www.paypal.com&gt;",
        "me@paypal.com",
        "www.paypal%2ecom",
        "click here for www.paypal.com",
        "www.bank.com",
        "www.ebay.com",
        "10.1.2.3",
        "www.paypal.co.uk",
        "http://evil.example.net/login",
        "Visit paypal.com now",
        "www.paypal.com.",
        "ftp://www.paypal.com",
        "mailto:help@paypal.com",
        "https://www.paypal.com@evil.example.net",
        "www.paypal.com:443",
        "HTTPS://WWW.PAYPAL.COM",
        "ado.net paypal.com",
        "http://",
        "www.paypal.comx",
        "http://1.2.3.4/",
        "x.www.paypal.com",
    ];
    let pdb = b"H:paypal.com\nR:.+\\.evil\\.org([/?].*)?:.+\\.bank\\.com([/?].*)?\n";
    let wdb = b"M:www.paypal.co.uk:www.paypal.com\n\
X:.+\\.paypal-mail\\.net([/?].*)?:.+\\.paypal\\.com([/?].*)?:17-\n";
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    std::fs::create_dir(&db_dir).unwrap();
    std::fs::write(db_dir.join("v.pdb"), pdb).unwrap();
    std::fs::write(db_dir.join("v.wdb"), wdb).unwrap();
    let (db, report) = Database::load_dir(&db_dir).unwrap();
    assert!(report.errors.is_empty(), "{report}");
    let scanner = Scanner::new(Arc::new(db), Limits::default());
    let mut mine = Vec::new();
    let mut paths = Vec::new();
    for (i, r) in reals.iter().enumerate() {
        for (j, d) in shown.iter().enumerate() {
            let mail = html_mail(&format!(r#"<a href="{r}">{d}</a>"#));
            let (v, p) = scanned_mail(&scanner, dir.path(), &format!("v{i}-{j}.eml"), &mail);
            mine.push((format!("{r} | {d}"), v));
            paths.push(p);
        }
    }
    agree_with_clamscan(&db_dir, &mine, &paths);
}

/// The same links in the HTML forms ClamAV's HTML scanner reads (quoting, case,
/// titles, images, forms, frames, nesting, comments, character references, line
/// breaks): Sluice's link extractor must find the pairs clamscan finds.
#[test]
fn phishing_html_forms_agree_with_clamscan() {
    let templates = [
        r#"<a href="{R}">{D}</a>"#,
        r#"<a href='{R}'>{D}</a>"#,
        r#"<a href={R}>{D}</a>"#,
        r#"<A HREF="{R}">{D}</A>"#,
        r#"<a class="x" href="{R}" target=_blank>{D}</a>"#,
        r#"<a href="{R}"><span>{D}</span></a>"#,
        "<a href=\"{R}\">\r\n  {D}\r\n</a>",
        r#"<a href="{R}" title="{D}">click</a>"#,
        r#"<a href="{R}"><img src="{D}"></a>"#,
        r#"<form action="{R}"><a href="{D}">x</a></form>"#,
        r#"<form action="{R}"><img src="{D}"></form>"#,
        r#"<a href="{R}"><iframe src="{D}"></iframe></a>"#,
        r#"<!-- <a href="{R}">{D}</a> -->"#,
        r#"<a href="{R}">{D}"#,
        r#"<a href="{R}">x<a href="{R}">{D}</a>"#,
        r#"<a href="{R}">{D}</a >"#,
        r#"<a href = "{R}" >{D}</a>"#,
        "<a\r\nhref=\"{R}\">{D}</a>",
        r#"<a href="{E}">{D}</a>"#,
        r#"<a href="{R}">{D}&nbsp;</a>"#,
        r#"<a href="{R}" href="http://other.example.org/">{D}</a>"#,
        r#"<a name="top">{D}</a><a href="{R}">here</a>"#,
        r#"<a href="">{D}</a>"#,
        r#"<p><a href="{R}">{D}</a></p><p><a href="http://ok.example.org/">ok.example.org</a></p>"#,
        r#"<a href="{R}"/>{D}</a>"#,
        "<a href=\"{R}\"\r\n>{D}</A\r\n>",
        "<a\thref=\"{R}\"\t>{D}</a>",
        r#"<a href="{R}">{D}<!-- note --></a>"#,
        r#"<a href=" {R} ">{D}</a>"#,
        r#"<a href="{X}">{D}</a>"#,
        r#"<script>var a = '<a href="{R}">{D}</a>';</script>"#,
        r#"<style>p {}</style><a href="{R}">{D}</a>"#,
        "<a href=\"{R}\">{U}</a>",
    ];
    let pairs = [
        ("http://evil.example.net/", "www.paypal.com"),
        ("http://www.paypal.com/", "https://www.paypal.com"),
        ("http://evil.example.net/", "http://www.ebay.com/"),
    ];
    let pdb = b"H:paypal.com\n";
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    std::fs::create_dir(&db_dir).unwrap();
    std::fs::write(db_dir.join("v.pdb"), pdb).unwrap();
    let (db, _) = Database::load_dir(&db_dir).unwrap();
    let scanner = Scanner::new(Arc::new(db), Limits::default());
    let mut mine = Vec::new();
    let mut paths = Vec::new();
    for (i, t) in templates.iter().enumerate() {
        for (j, (r, d)) in pairs.iter().enumerate() {
            let e: String = r.bytes().map(|b| format!("&#{b};")).collect();
            let x: String = r.bytes().map(|b| format!("&#X{b:X};")).collect();
            // The dots of the displayed host as ideographic full stops.
            let u = d.replace('.', "\u{3002}");
            let html = t
                .replace("{R}", r)
                .replace("{D}", d)
                .replace("{E}", &e)
                .replace("{X}", &x)
                .replace("{U}", &u);
            let mail = html_mail(&html);
            let (v, p) = scanned_mail(&scanner, dir.path(), &format!("h{i}-{j}.eml"), &mail);
            mine.push((html, v));
            paths.push(p);
        }
    }
    agree_with_clamscan(&db_dir, &mine, &paths);
}

/// The same phishing link in the mail structures ClamAV treats differently
/// (which text parts it reads, their encodings, names, nesting, size): Sluice
/// must check the parts clamscan checks.
#[test]
fn phishing_mail_structures_agree_with_clamscan() {
    let link = r#"<a href="http://evil.example.net/">www.paypal.com</a>"#;
    let head =
        "From: bank@example.org\r\nTo: rcpt@example.org\r\nSubject: s\r\nMIME-Version: 1.0\r\n";
    let part = |headers: &str, body: &str| format!("{headers}\r\n\r\n{body}\r\n");
    let multi = |kind: &str, parts: &[String]| {
        let mut m =
            format!("Content-Type: multipart/{kind}; boundary=\"zz{kind}\"\r\n\r\npreamble\r\n");
        for p in parts {
            m.push_str(&format!("--zz{kind}\r\n{p}"));
        }
        m.push_str(&format!("--zz{kind}--\r\n"));
        m
    };
    let b64 = |s: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
    };
    let html = part("Content-Type: text/html", link);
    let filler = |n: usize| "x".repeat(n);
    // ClamAV counts a text part as lines of at most 1000 bytes, each with one
    // line end: 100-byte lines bring the part to the 100 KiB limit, or one byte
    // past it; one long line of the same bytes counts 103 line ends.
    let at_limit = |extra: usize| {
        let mut body = format!("{link}\r\n");
        let mut size = link.len() + 1;
        while size + 100 <= 100 * 1024 {
            body.push_str(&filler(99));
            body.push_str("\r\n");
            size += 100;
        }
        body.push_str(&filler(100 * 1024 - size - 1 + extra));
        part("Content-Type: text/html", &body)
    };
    let one_line = |len: usize| {
        part(
            "Content-Type: text/html",
            &format!("{link}{}", filler(len - link.len())),
        )
    };
    let structures: Vec<(&str, String)> = vec![
        ("html", html.clone()),
        ("html-upper", part("Content-Type: TEXT/HTML; charset=UTF-8", link)),
        ("html-b64", part("Content-Type: text/html\r\nContent-Transfer-Encoding: base64", &b64(link))),
        ("plain", part("Content-Type: text/plain", link)),
        ("plain-b64", part("Content-Type: text/plain\r\nContent-Transfer-Encoding: base64", &b64(link))),
        ("no-type", format!("\r\n{link}\r\n")),
        ("enriched", part("Content-Type: text/enriched", link)),
        ("calendar", part("Content-Type: text/calendar", link)),
        ("octet", part("Content-Type: application/octet-stream", link)),
        ("html-named", part("Content-Type: text/html; name=\"a.html\"", link)),
        ("html-inline-named", part("Content-Type: text/html\r\nContent-Disposition: inline; filename=\"a.html\"", link)),
        ("plain-named", part("Content-Type: text/plain\r\nContent-Disposition: attachment; filename=\"a.txt\"", link)),
        ("mixed-html", multi("mixed", std::slice::from_ref(&html))),
        ("mixed-plain", multi("mixed", &[part("Content-Type: text/plain", link)])),
        ("mixed-plain-b64", multi("mixed", &[part("Content-Type: text/plain\r\nContent-Transfer-Encoding: base64", &b64(link))])),
        ("mixed-no-type", multi("mixed", &[format!("\r\n{link}\r\n")])),
        ("mixed-enriched", multi("mixed", &[part("Content-Type: text/enriched", link)])),
        ("mixed-html-named", multi("mixed", &[part("Content-Type: text/html; name=\"a.html\"", link)])),
        ("mixed-html-inline-named", multi("mixed", &[part("Content-Type: text/html\r\nContent-Disposition: inline; filename=\"a.html\"", link)])),
        ("alternative", multi("alternative", &[part("Content-Type: text/plain", "hello"), html.clone()])),
        ("nested", multi("mixed", &[multi("alternative", &[part("Content-Type: text/plain", "hello"), html.clone()]), part("Content-Type: application/pdf", "%PDF-1.4")])),
        ("related", multi("related", &[html.clone(), part("Content-Type: image/gif", "GIF89a")])),
        ("rfc822", multi("mixed", &[part("Content-Type: text/plain", "see attached"), format!("Content-Type: message/rfc822\r\n\r\nSubject: inner\r\nContent-Type: text/html\r\n\r\n{link}\r\n")])),
        ("at-limit", at_limit(0)),
        ("over-limit", at_limit(1)),
        ("mixed-at-limit", multi("mixed", &[at_limit(0)])),
        ("mixed-over-limit", multi("mixed", &[at_limit(1)])),
        ("one-line-at-limit", one_line(102_297)),
        ("one-line-over-limit", one_line(102_298)),
        ("mixed-html-attachment", multi("mixed", &[part("Content-Type: text/html\r\nContent-Disposition: attachment; filename=\"a.html\"", link)])),
        ("mixed-html-name-star", multi("mixed", &[part("Content-Type: text/html; name*=us-ascii''a.html", link)])),
        ("rfc822-then-html", multi("mixed", &["Content-Type: message/rfc822\r\n\r\nSubject: inner\r\n\r\nhello\r\n".to_string(), html.clone()])),
    ];
    let pdb = b"H:paypal.com\n";
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    std::fs::create_dir(&db_dir).unwrap();
    std::fs::write(db_dir.join("v.pdb"), pdb).unwrap();
    let (db, _) = Database::load_dir(&db_dir).unwrap();
    let scanner = Scanner::new(Arc::new(db), Limits::default());
    let mut mine = Vec::new();
    let mut paths = Vec::new();
    for (name, body) in &structures {
        let mail = format!("{head}{body}").into_bytes();
        let (v, p) = scanned_mail(&scanner, dir.path(), &format!("{name}.eml"), &mail);
        mine.push((name, v));
        paths.push(p);
    }
    agree_with_clamscan(&db_dir, &mine, &paths);
}

/// `.pdb` regular expression lines as ClamAV reads them: searched anywhere in
/// `real:displayed/` (not anchored, whatever the documentation says), and tried
/// only where their literal end occurs, so a `^` in that end never matches.
#[test]
fn phishing_regex_lines_agree_with_clamscan() {
    const SPOOF: Option<&str> = Some("Heuristics.Phishing.Email.SpoofedDomain");
    let mail = html_mail(r#"<a href="http://evil.biz/">www.store.com</a>"#);
    for (line, expected) in [
        (r"R:(evil)\.biz:www\.store\.com", SPOOF),
        (r"R:http://(evil)\.biz:www\.store\.com", SPOOF),
        (r"R:^h(t)tp://evil\.biz:www\.store\.com", None),
        (r"R:^http://(evil)\.biz:www\.store\.com", None),
        (r"R:.+\.biz:www\.store\.com", SPOOF),
        (r"R:^.+\.biz:www\.store\.com", SPOOF),
        (r"R:evil\.biz:www\.(store|shop)\.com", SPOOF),
        (r"R:evil\.biz:www\.store\.com([/?].*)?", SPOOF),
        (r"R:(.+\.)?evil\.biz:www\.store\.com", SPOOF),
        (r"R:evil\.biz:store\.com", None),
        (r"R:x{2}\.biz:www\.store\.com", None),
        (r"R:.+\.biz:www\.store\.com$", None),
    ] {
        let pdb = format!("{line}\n");
        agree(
            &[("r.pdb", pdb.as_bytes())],
            &[("regex.eml", &mail, expected)],
        );
    }
    // `.wdb` `Y` lines are read as `X` lines by the ClamAV 1.4 clamscan: one over
    // the real URL alone allows nothing.
    for (line, expected) in [
        (r"Y:evil\.biz", SPOOF),
        (r"Y:.+\.biz:www\.store\.com", None),
    ] {
        let wdb = format!("{line}\n");
        agree(
            &[("r.pdb", b"H:store.com\n"), ("y.wdb", wdb.as_bytes())],
            &[("y.eml", &mail, expected)],
        );
    }
}

/// A phishing finding is a heuristic: clamscan (without `--allmatch`) reports a
/// signature found anywhere in the same mail instead, and so does Sluice.
#[test]
fn phishing_is_reported_after_signatures() {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    std::fs::create_dir(&db_dir).unwrap();
    std::fs::write(db_dir.join("t.pdb"), b"H:paypal.com\n").unwrap();
    let hex: String = b"sluice-phish-marker"
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(
        db_dir.join("t.ndb"),
        format!("Sluice.Test.Marker:0:*:{hex}\n"),
    )
    .unwrap();
    let (db, _) = Database::load_dir(&db_dir).unwrap();
    let scanner = Scanner::new(Arc::new(db), Limits::default());
    let link = r#"<a href="http://evil.example.net/">www.paypal.com</a>"#;
    let both = mixed_mail(
        "Content-Type: application/octet-stream",
        format!("{link}\r\nsluice-phish-marker").as_bytes(),
    );
    let phish_first = [
        b"From: a@example.org\r\nSubject: s\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/html\r\n\r\n"
            .as_slice(),
        link.as_bytes(),
        b"\r\n--b\r\nContent-Type: application/octet-stream\r\n\r\nsluice-phish-marker\r\n--b--\r\n",
    ]
    .concat();
    let only_phish = html_mail(link);
    let samples: [(&str, &[u8], &str); 3] = [
        ("both.eml", &both, "Sluice.Test.Marker"),
        ("phish-first.eml", &phish_first, "Sluice.Test.Marker"),
        (
            "only-phish.eml",
            &only_phish,
            "Heuristics.Phishing.Email.SpoofedDomain",
        ),
    ];
    for (name, mail, expected) in samples {
        assert_eq!(
            scanner.scan_mail(mail),
            Verdict::Infected {
                name: expected.into()
            },
            "Sluice on {name}"
        );
        std::fs::write(dir.path().join(name), mail).unwrap();
    }
    let Some(prog) = clamscan_program() else {
        return;
    };
    for (name, _, expected) in samples {
        let out = std::process::Command::new(&prog)
            .args(["--no-summary", "--stdout", "-d"])
            .arg(&db_dir)
            .arg(dir.path().join(name))
            .output()
            .expect("clamscan runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let found: Vec<&str> = text
            .lines()
            .filter_map(|l| l.rsplit_once(": ")?.1.strip_suffix(" FOUND"))
            .map(|n| n.trim_end_matches(".UNOFFICIAL"))
            .collect();
        assert_eq!(found, [expected], "clamscan on {name}");
    }
}

const STREAM_MARK: &[u8] = b"Sluice-Stream-Mark";
const MACRO_MARK: &[u8] = b"Sluice-Macro-Mark";
/// Matched in macro code as ClamAV normalises it: lower case.
const CODE_MARK: &[u8] = b"sluice-code-mark";

/// A VBA module's source with `line` in it.
fn module(line: &[u8]) -> Vec<u8> {
    [
        b"Attribute VB_Name = \"Module1\"\r\nSub AutoOpen()\r\n  MsgBox \"".as_slice(),
        line,
        b"\"\r\nEnd Sub\r\n",
    ]
    .concat()
}

/// A `.docm`-shaped zip around a `vbaProject.bin`.
fn docm(vba_project: &[u8]) -> Vec<u8> {
    support::zip(
        &[
            ("[Content_Types].xml", b"<Types/>"),
            ("word/document.xml", b"<w:document/>"),
            ("word/vbaProject.bin", vba_project),
        ],
        true,
    )
}

/// OLE2 documents: a signature matches inside a stream (in the mini stream or
/// in regular sectors) and inside a VBA module's decompressed source, in a
/// `.doc` and in the `vbaProject.bin` of a `.docm`, for clamscan as for Sluice.
#[test]
fn ole2_streams_and_macros_agree_with_clamscan() {
    use support::cfb;
    let ndb = format!(
        "Sluice.Test.Ole2Stream:0:*:{}\nSluice.Test.Macro:0:*:{}\n\
         Sluice.Test.Code:0:*:{}\nSluice.Test.Utf8:0:*:{}\n{}",
        hex(STREAM_MARK),
        hex(MACRO_MARK),
        hex(CODE_MARK),
        hex("Café €uro".as_bytes()),
        support::eicar_ndb()
    );
    let mut big = vec![b'.'; 6000];
    big.extend_from_slice(STREAM_MARK);
    let marked = module(MACRO_MARK);
    let plain = module(b"hello");
    let eicar_macro = module(scan::EICAR);
    // A long module: several compressed chunks, the mark in the last.
    let mut long = b"' filler\r\n".repeat(900);
    long.extend_from_slice(&marked);
    let samples: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        (
            "stream-eicar.doc",
            cfb::word_doc(scan::EICAR, &[]),
            Some(scan::EICAR_NAME),
        ),
        (
            "stream-big.doc",
            cfb::word_doc(&big, &[]),
            Some("Sluice.Test.Ole2Stream"),
        ),
        (
            "macro.doc",
            cfb::word_doc(b"hello", &[("Module1", &marked)]),
            Some("Sluice.Test.Macro"),
        ),
        (
            "macro-second.doc",
            cfb::word_doc(b"hello", &[("Module1", &plain), ("Module2", &long)]),
            Some("Sluice.Test.Macro"),
        ),
        (
            "macro-eicar.doc",
            cfb::word_doc(b"hello", &[("Module1", &eicar_macro)]),
            Some(scan::EICAR_NAME),
        ),
        (
            "macro-clean.doc",
            cfb::word_doc(b"hello", &[("Module1", &plain)]),
            None,
        ),
        // Outside a string the code is lower-cased: the mixed-case mark is
        // gone, the lower-case one (written in capitals, with a tab) is found.
        (
            "macro-comment.doc",
            cfb::word_doc(
                b"hello",
                &[("Module1", b"Sub X()\r\n' Sluice-Macro-Mark\r\nEnd Sub\r\n")],
            ),
            None,
        ),
        (
            "macro-code.doc",
            cfb::word_doc(
                b"hello",
                &[("Module1", b"Sub X()\r\n\tSLUICE-CODE-MARK\r\nEnd Sub\r\n")],
            ),
            Some("Sluice.Test.Code"),
        ),
        ("clean.doc", cfb::word_doc(b"hello", &[]), None),
        (
            // Source in the project's code page (1252) is matched in UTF-8.
            "macro-1252.doc",
            cfb::word_doc(b"hello", &[("Module1", &module(b"Caf\xe9 \x80uro"))]),
            Some("Sluice.Test.Utf8"),
        ),
        (
            // Excel's layout: _VBA_PROJECT_CUR/VBA.
            "macro.xls",
            {
                let (vba, project) = cfb::vba_project(&[("Module1", &marked)]);
                cfb::cfb(&[
                    cfb::Node::Stream("Workbook", b"book".to_vec()),
                    cfb::Node::Storage("_VBA_PROJECT_CUR", vec![project, vba]),
                ])
            },
            Some("Sluice.Test.Macro"),
        ),
        (
            "vbaProject.bin",
            cfb::vba_project_bin(&[("Module1", &marked)]),
            Some("Sluice.Test.Macro"),
        ),
        (
            "macro.docm",
            docm(&cfb::vba_project_bin(&[("Module1", &marked)])),
            Some("Sluice.Test.Macro"),
        ),
        (
            "clean.docm",
            docm(&cfb::vba_project_bin(&[("Module1", &plain)])),
            None,
        ),
    ];
    agree(&[("test.ndb", ndb.as_bytes())], &samples);
}

/// `.hdb` hashes of a whole OLE2 file (held whole for parsing, so hashed at
/// its end, and only when some signature has its size) and of its streams
/// (sized in advance, so hashed only then too), in the regular and the mini
/// stream; a stream one byte shorter is clean.
#[test]
fn ole2_hash_signatures_agree_with_clamscan() {
    use support::cfb;
    let big: Vec<u8> = (0..9000u32).map(|i| (i * 7 % 251) as u8).collect();
    let small = b"a stream short enough for the mini stream".to_vec();
    let whole = cfb::word_doc(b"the whole file is hashed", &[]);
    let hdb = format!(
        "{}:{}:Sluice.Test.Ole2Whole\n{}:{}:Sluice.Test.BigStream\n{}:{}:Sluice.Test.SmallStream\n",
        md5_hex(&whole),
        whole.len(),
        md5_hex(&big),
        big.len(),
        md5_hex(&small),
        small.len()
    );
    let samples = vec![
        ("whole.doc", whole.clone(), Some("Sluice.Test.Ole2Whole")),
        (
            "big-stream.doc",
            cfb::word_doc(&big, &[]),
            Some("Sluice.Test.BigStream"),
        ),
        (
            "small-stream.doc",
            cfb::word_doc(&small, &[]),
            Some("Sluice.Test.SmallStream"),
        ),
        ("shorter.doc", cfb::word_doc(&big[..8999], &[]), None),
    ];
    agree(&[("test.hdb", hdb.as_bytes())], &samples);
}

/// `--alert-macros=yes` and [`Limits::alert_macros`]: a document with VBA
/// macros is `Heuristics.OLE2.ContainsMacros.VBA` when no signature matched, and a
/// signature in it is reported instead.
#[test]
fn ole2_macro_alert_agrees_with_clamscan() {
    use support::cfb;
    const MACROS: &str = "Heuristics.OLE2.ContainsMacros.VBA";
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    std::fs::create_dir(&db_dir).unwrap();
    let ndb = format!("Sluice.Test.Macro:0:*:{}\n", hex(MACRO_MARK));
    std::fs::write(db_dir.join("t.ndb"), &ndb).unwrap();
    let (db, _) = Database::load_dir(&db_dir).unwrap();
    let limits = Limits {
        alert_macros: true,
        ..Limits::default()
    };
    let scanner = Scanner::new(Arc::new(db), limits);
    let plain = module(b"hello");
    let samples: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        (
            "macro.doc",
            cfb::word_doc(b"hello", &[("Module1", &plain)]),
            Some(MACROS),
        ),
        (
            "marked.doc",
            cfb::word_doc(b"hello", &[("Module1", &module(MACRO_MARK))]),
            Some("Sluice.Test.Macro"),
        ),
        (
            "macro.docm",
            docm(&cfb::vba_project_bin(&[("Module1", &plain)])),
            Some(MACROS),
        ),
        ("clean.doc", cfb::word_doc(b"hello", &[]), None),
    ];
    for (name, bytes, expected) in &samples {
        let found = match scanner.scan_file(bytes) {
            Verdict::Infected { name } => Some(name),
            _ => None,
        };
        assert_eq!(found.as_deref(), *expected, "Sluice on {name}");
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    // Off by default.
    let off = Scanner::new(Arc::clone(scanner.database()), Limits::default());
    assert_eq!(off.scan_file(&samples[0].1), Verdict::Clean);
    let Some(prog) = clamscan_program() else {
        return;
    };
    for (name, _, expected) in &samples {
        let out = std::process::Command::new(&prog)
            .args(["--no-summary", "--stdout", "--alert-macros=yes", "-d"])
            .arg(&db_dir)
            .arg(dir.path().join(name))
            .output()
            .expect("clamscan runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let found: Vec<&str> = text
            .lines()
            .filter_map(|l| l.rsplit_once(": ")?.1.strip_suffix(" FOUND"))
            .map(|n| n.trim_end_matches(".UNOFFICIAL"))
            .collect();
        assert_eq!(
            found,
            expected.iter().copied().collect::<Vec<_>>(),
            "clamscan on {name}"
        );
    }
}

/// `.ndb` target type 2 (OLE2) matches the OLE2 file itself, a `vbaProject.bin`
/// in a zip too, and not a macro's source or other files.
#[test]
fn ole2_target_type_agrees_with_clamscan() {
    use support::cfb;
    let utf16 = |s: &str| -> Vec<u8> { s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect() };
    let ndb = format!(
        "Sluice.Test.Ole2Dir:2:*:{}\nSluice.Test.Ole2Macro:2:*:{}\n",
        hex(&utf16("_VBA_PROJECT")),
        hex(MACRO_MARK)
    );
    let marked = module(MACRO_MARK);
    let bin = cfb::vba_project_bin(&[("Module1", &marked)]);
    let mut not_ole2 = b"plain file ".to_vec();
    not_ole2.extend_from_slice(&utf16("_VBA_PROJECT"));
    agree(
        &[("t2.ndb", ndb.as_bytes())],
        &[
            ("vbaProject.bin", &bin, Some("Sluice.Test.Ole2Dir")),
            ("t2.docm", &docm(&bin), Some("Sluice.Test.Ole2Dir")),
            ("clean.doc", &cfb::word_doc(b"hello", &[]), None),
            ("not-ole2.bin", &binary(b"", &not_ole2), None),
        ],
    );
}

/// ClamAV's own Office test files (Debian's `clamav-testfiles`): `clam.exe`
/// inside them is found by its body and by its hash, as clamscan finds it.
#[test]
fn ole2_clamav_testfiles() {
    let Some(dir) = clamav_testfiles() else {
        return;
    };
    let exe = std::fs::read(dir.join("clam.exe")).unwrap();
    for (sig, db) in [
        (
            "Clam.Exe.Body",
            (
                "c.ndb",
                format!("Clam.Exe.Body:0:*:{}\n", hex(&exe[200..240])),
            ),
        ),
        (
            "Clam.Exe.Hash",
            (
                "c.hdb",
                format!("{}:{}:Clam.Exe.Hash\n", md5_hex(&exe), exe.len()),
            ),
        ),
    ] {
        let mut b = scan::DatabaseBuilder::new();
        b.add_file(db.0, db.1.as_bytes()).unwrap();
        let scanner = Scanner::new(Arc::new(b.build().unwrap().0), Limits::default());
        for name in ["clam.ole.doc", "clam.ppt"] {
            let bytes = std::fs::read(dir.join(name)).unwrap();
            let mut s = scanner.file_session();
            for c in bytes.chunks(1000) {
                s.feed(c);
            }
            let (v, stats) = s.finish_with_stats();
            assert_eq!(
                v,
                Verdict::Infected { name: sig.into() },
                "{name} {stats:?}"
            );
        }
    }
}

/// The EICAR file with spaces after it: long and compressible enough that
/// deflate codes it rather than storing it, so that its bytes are not in the
/// PDF as they are.
fn eicar_padded() -> Vec<u8> {
    [scan::EICAR, &[b' '; 300][..]].concat()
}

/// Checks that no sample carries the EICAR string as it is (a match then
/// comes from decoding, not from the PDF's own bytes).
fn eicar_hidden<B: AsRef<[u8]>>(samples: &[(&str, B, Option<&str>)]) {
    for (name, bytes, _) in samples {
        let bytes = bytes.as_ref();
        assert!(
            !bytes.windows(20).any(|w| w == &scan::EICAR[..20]),
            "{name} carries EICAR as it is"
        );
    }
}

fn zlib(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A minimal PDF with one object per (dictionary entries, stream data).
fn pdf(objects: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    for (n, (dict, data)) in objects.iter().enumerate() {
        out.extend_from_slice(
            format!(
                "{} 0 obj\n<< {dict} /Length {} >>\nstream\n",
                n + 1,
                data.len()
            )
            .as_bytes(),
        );
        out.extend_from_slice(data);
        out.extend_from_slice(b"\nendstream\nendobj\n");
    }
    out.extend_from_slice(b"trailer\n<< /Root 1 0 R >>\n%%EOF\n");
    out
}

#[test]
fn pdf_streams_agree_with_clamscan() {
    const STREAM_MARK: &[u8] = b"sluice pdf stream mark";
    const PDF_MARK: &[u8] = b"sluice pdf only mark";
    // Target 0 anywhere; target 10 in PDF files only (the document, not its
    // decoded streams).
    let ndb = format!(
        "Sluice.Test.PdfStream:0:*:{}\nSluice.Test.PdfOnly:10:*:{}\n{}",
        hex(STREAM_MARK),
        hex(PDF_MARK),
        support::eicar_ndb()
    );
    let filler = b"filler text, filler text, filler text. ".repeat(10);
    let marked = [&filler[..], STREAM_MARK].concat();
    let only = [&filler[..], PDF_MARK].concat();
    let e = eicar_padded();
    let zipped = support::zip(&[("eicar.com", &e)], true);
    let hex_eicar = format!("{}>", hex(scan::EICAR));
    let eicar = Some(scan::EICAR_NAME);
    let samples: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        (
            "flate-eicar.pdf",
            pdf(&[("/Filter /FlateDecode", &zlib(&e))]),
            eicar,
        ),
        (
            "flate-zip.pdf",
            pdf(&[("/Type /EmbeddedFile /Filter /FlateDecode", &zlib(&zipped))]),
            eicar,
        ),
        (
            "flate-array.pdf",
            pdf(&[
                ("", b"q 1 0 0 1 0 0 cm Q"),
                ("/Filter [/FlateDecode]", &zlib(&e)),
            ]),
            eicar,
        ),
        ("flate-short.pdf", pdf(&[("/Filter /Fl", &zlib(&e))]), eicar),
        (
            "hex-eicar.pdf",
            pdf(&[("/Filter /ASCIIHexDecode", hex_eicar.as_bytes())]),
            eicar,
        ),
        (
            "flate-mark.pdf",
            pdf(&[("/Filter /FlateDecode", &zlib(&marked))]),
            Some("Sluice.Test.PdfStream"),
        ),
        (
            "plain-mark.pdf",
            pdf(&[("", &marked)]),
            Some("Sluice.Test.PdfStream"),
        ),
        (
            "pdf-only-raw.pdf",
            pdf(&[("", &only)]),
            Some("Sluice.Test.PdfOnly"),
        ),
        (
            "pdf-only-flate.pdf",
            pdf(&[("/Filter /FlateDecode", &zlib(&only))]),
            None,
        ),
        (
            "clean.pdf",
            pdf(&[("/Filter /FlateDecode", &zlib(&filler)), ("", b"BT ET")]),
            None,
        ),
    ];
    eicar_hidden(&samples);
    agree(&[("test.ndb", ndb.as_bytes())], &samples);
}

/// ASCII85 (PDF 1.7 §7.4.3), with its `~>` end.
fn ascii85(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in data.chunks(4) {
        let mut g = [0u8; 4];
        g[..c.len()].copy_from_slice(c);
        let mut v = u32::from_be_bytes(g);
        let mut d = [0u8; 5];
        for k in (0..5).rev() {
            d[k] = (v % 85) as u8 + b'!';
            v /= 85;
        }
        out.extend_from_slice(&d[..c.len() + 1]);
    }
    out.extend_from_slice(b"~>");
    out
}

#[test]
fn pdf_stream_forms_agree_with_clamscan() {
    let z = zlib(&eicar_padded());
    let obj = |dict: &str, data: &[u8], eol: &[u8], before_end: &[u8]| {
        let mut o = format!("1 0 obj\n<< {dict} >>\nstream").into_bytes();
        o.extend_from_slice(eol);
        o.extend_from_slice(data);
        o.extend_from_slice(before_end);
        o.extend_from_slice(b"endstream\nendobj\n");
        o
    };
    let doc = |body: &[u8]| {
        let mut d = b"%PDF-1.4\n".to_vec();
        d.extend_from_slice(body);
        d.extend_from_slice(b"trailer\n<< /Root 1 0 R >>\n%%EOF\n");
        d
    };
    let hex_z: String = z.iter().map(|b| format!("{b:02x}")).collect();
    let mut truncated = b"%PDF-1.4\n1 0 obj\n<< /Filter /FlateDecode >>\nstream\n".to_vec();
    truncated.extend_from_slice(&z);
    let mut two = obj("/Filter /FlateDecode", &zlib(b"hello"), b"\n", b"\n");
    two.extend_from_slice(&obj("/Filter /FlateDecode", &z, b"\n", b"\n"));
    let eicar = Some(scan::EICAR_NAME);
    let samples: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        (
            "a85.pdf",
            doc(&obj(
                "/Filter /ASCII85Decode",
                &ascii85(scan::EICAR),
                b"\n",
                b"\n",
            )),
            eicar,
        ),
        (
            "chain.pdf",
            doc(&obj(
                "/Filter [/AHx /Fl]",
                format!("{hex_z}>").as_bytes(),
                b"\n",
                b"\n",
            )),
            eicar,
        ),
        (
            "crlf.pdf",
            doc(&obj("/Filter /FlateDecode", &z, b"\r\n", b"\r\n")),
            eicar,
        ),
        (
            "no-eol-before-end.pdf",
            doc(&obj("/Filter /FlateDecode", &z, b"\n", b"")),
            eicar,
        ),
        (
            "wrong-length.pdf",
            doc(&obj("/Filter /FlateDecode /Length 5", &z, b"\n", b"\n")),
            eicar,
        ),
        (
            "indirect-length.pdf",
            doc(&obj("/Length 2 0 R /Filter /FlateDecode", &z, b"\n", b"\n")),
            eicar,
        ),
        // (A name with `#xx` escapes, `/Fl#61teDecode`, is decoded by both, but
        // ClamAV also reports `Heuristics.PDF.ObfuscatedNameObject` for it, even
        // in an otherwise clean PDF; Sluice has no PDF heuristics.)
        ("truncated.pdf", truncated, eicar),
        ("second-stream.pdf", doc(&two), eicar),
        // Neither decodes a raw deflate stream (no zlib header) or LZW.
        (
            "raw-deflate.pdf",
            doc(&obj(
                "/Filter /FlateDecode",
                &z[2..z.len() - 4],
                b"\n",
                b"\n",
            )),
            None,
        ),
        (
            "lzw.pdf",
            doc(&obj("/Filter /LZWDecode", &z, b"\n", b"\n")),
            None,
        ),
    ];
    eicar_hidden(&samples);
    agree(&[("test.ndb", support::eicar_ndb().as_bytes())], &samples);
}

/// ClamAV's own test PDF carries its test program in a compressed stream.
#[test]
fn pdf_clamav_testfile() {
    let Some(dir) = clamav_testfiles() else {
        return;
    };
    let exe = std::fs::read(dir.join("clam.exe")).unwrap();
    let pdf = std::fs::read(dir.join("clam.pdf")).unwrap();
    let ndb = format!("Clam.Exe.Body:0:*:{}\n", hex(&exe[200..240]));
    agree(
        &[("c.ndb", ndb.as_bytes())],
        &[("clam.pdf", &pdf, Some("Clam.Exe.Body"))],
    );
}

#[test]
fn html_normalisation_agrees_with_clamscan() {
    // Target 3 sees the normalised forms only (lower-cased: the upper-case
    // signature never matches); target 0 sees them and the raw bytes.
    let mark = b"sluice html mark";
    let ldb = format!(
        "Sluice.Test.HtmlLdb;Engine:51-255,Target:3;0&1;{};{}\n",
        hex(b"ldb first half"),
        hex(b"second half")
    );
    let ndb = format!(
        "Sluice.Test.Html3:3:*:{}\nSluice.Test.Html0:0:*:{}\nSluice.Test.Upper3:3:*:{}\n",
        hex(mark),
        hex(b"raw zero mark"),
        hex(b"SLUICE UPPER MARK")
    );
    let page = |body: &str| format!("<html><body>{body}</body></html>\n").into_bytes();
    let h3 = Some("Sluice.Test.Html3");
    let samples: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        ("plain.html", page("<p>Hello sluice html mark here</p>"), h3),
        ("upper.html", page("<P>Hello SLUICE HTML MARK here</P>"), h3),
        (
            "entities.html",
            page("<p>Hello sluice &#104;tml m&#x61;rk &amp; here</p>"),
            h3,
        ),
        (
            "comment.html",
            page("<p>Hello sluice <!-- hidden --> html mark</p>"),
            h3,
        ),
        ("tags.html", page("<p>Hello sluice<b>html</b>mark</p>"), h3),
        (
            "spaces.html",
            page("<p>Hello sluice   \r\n\t html    mark</p>"),
            h3,
        ),
        (
            "attribute.html",
            page("<a title=\"SLUICE HTML MARK\">x</a>"),
            h3,
        ),
        ("upper-sig.html", page("<p>SLUICE UPPER MARK</p>"), None),
        (
            "ldb.html",
            page("<p>LDB first half, then the <i>second</i> half</p>"),
            Some("Sluice.Test.HtmlLdb"),
        ),
        (
            "target0.html",
            page("<p>Hello RAW zero mark</p>"),
            Some("Sluice.Test.Html0"),
        ),
        // No HTML magic: not normalised (a <p> is not enough for ClamAV).
        (
            "not-html.txt",
            b"Hello <p>sluice</p> html mark\n".to_vec(),
            None,
        ),
        // (ClamAV lower-cases any text file for target 0, HTML or not: "Hello RAW
        // zero mark" in a .txt matches it there, not here. Not HTML's doing.)
        // The MIME type does not make a part HTML, its content does.
        (
            "html-part.eml",
            single_part("text/html", "7bit", b"Hello <b>sluice</b> html mark"),
            None,
        ),
        (
            "plain-part.eml",
            single_part(
                "text/plain",
                "7bit",
                b"<html><body>Hello <b>sluice</b> html mark</body></html>",
            ),
            h3,
        ),
    ];
    agree(
        &[("test.ndb", ndb.as_bytes()), ("test.ldb", ldb.as_bytes())],
        &samples,
    );

    // Known difference: ClamAV also scans a page's scripts through its
    // JavaScript normaliser, which keeps their string literals as they are;
    // here a script is only in `nocomment`, without its white space.
    let script = page("<script>var a = \"sluice html mark\";</script>x");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("test.ndb"), &ndb).unwrap();
    let (db, _) = Database::load_dir(dir.path()).unwrap();
    let scanner = Scanner::new(Arc::new(db), Limits::default());
    assert_eq!(scanner.scan_file(&script), Verdict::Clean);
    if let Some(prog) = clamscan_program() {
        let p = dir.path().join("script.html");
        std::fs::write(&p, &script).unwrap();
        let found = clamscan_all(&prog, dir.path(), std::slice::from_ref(&p));
        assert!(found[&p].contains("Sluice.Test.Html3"), "{found:?}");
    }
}

/// Runs `tool` (`7zz` from Debian's `7zip`, or `gcab`) in a fresh directory
/// holding `files` to make the archive `out` with `args`, and returns it. The
/// tool must be installed (`./test.sh` installs both): these tests fail
/// rather than skip without it.
fn archive_with(tool: &str, args: &[&str], out: &str, files: &[(&str, &[u8])]) -> Vec<u8> {
    let package = if tool == "7zz" { "7zip" } else { tool };
    let prog = sluice_testkit::require_program(tool, package);
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let mut cmd = std::process::Command::new(prog);
    cmd.current_dir(dir.path());
    if tool == "7zz" {
        cmd.args(["a", "-bd", "-y"]);
    }
    cmd.args(args).arg(out);
    cmd.args(files.iter().map(|(n, _)| n));
    let done = cmd.output().unwrap();
    assert!(
        done.status.success(),
        "{tool} {args:?}: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    std::fs::read(dir.path().join(out)).unwrap()
}

fn sevenz(args: &[&str], files: &[(&str, &[u8])]) -> Vec<u8> {
    archive_with("7zz", args, "a.7z", files)
}

fn cab(args: &[&str], files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut a = vec!["-c"];
    a.extend_from_slice(args);
    archive_with("gcab", &a, "a.cab", files)
}

const HELD_MARK: &[u8] = b"\xe8\x10\x00\x00\x00 sluice-held-archive-mark \xe8\x20\x00\x00\x00";

/// An executable-like file carrying `HELD_MARK`: what 7-Zip's BCJ filter is for.
fn exe_with_mark() -> Vec<u8> {
    let mut v = b"MZ\x90\x00\x03\x00\x00\x00".to_vec();
    for i in 0..4000u32 {
        // x86 calls, which BCJ rewrites, among other bytes.
        v.extend_from_slice(&[0xe8, (i % 251) as u8, (i % 13) as u8, 0, 0, (i % 7) as u8]);
    }
    v.extend_from_slice(HELD_MARK);
    v.extend_from_slice(&[0u8; 300]);
    v
}

#[test]
fn sevenz_and_cab_archives_agree_with_clamscan() {
    let ndb = format!(
        "Sluice.Test.Held:0:*:{}\n{}",
        hex(HELD_MARK),
        support::eicar_ndb()
    );
    let exe = exe_with_mark();
    let text = b"nothing to see here\n".repeat(50);
    let eicar = scan::EICAR;
    let both: &[(&str, &[u8])] = &[("readme.txt", &text), ("eicar.com", eicar)];
    let marked: &[(&str, &[u8])] = &[("readme.txt", &text), ("prog.exe", &exe)];
    let clean: &[(&str, &[u8])] = &[("readme.txt", &text)];
    let pad_text = b"more of the same\n".repeat(500);
    let zip_eicar = support::zip(&[("eicar.com", eicar)], true);
    let inner_7z = sevenz(&["-m0=lzma2"], &[("eicar.com", eicar)]);
    let samples: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        (
            "lzma.7z",
            sevenz(&["-m0=lzma"], both),
            Some(scan::EICAR_NAME),
        ),
        (
            "lzma2.7z",
            sevenz(&["-m0=lzma2"], both),
            Some(scan::EICAR_NAME),
        ),
        (
            "lzma2-mark.7z",
            sevenz(&["-m0=lzma2"], marked),
            Some("Sluice.Test.Held"),
        ),
        (
            "bcj.7z",
            sevenz(&["-m0=BCJ", "-m1=LZMA"], marked),
            Some("Sluice.Test.Held"),
        ),
        (
            "ppmd.7z",
            sevenz(&["-m0=PPMd"], both),
            Some(scan::EICAR_NAME),
        ),
        (
            "copy.7z",
            sevenz(&["-m0=Copy"], both),
            Some(scan::EICAR_NAME),
        ),
        (
            "solid.7z",
            sevenz(
                &["-ms=on"],
                &[("a.txt", &text), ("b.txt", &pad_text), ("c.com", eicar)],
            ),
            Some(scan::EICAR_NAME),
        ),
        ("clean.7z", sevenz(&[], clean), None),
        // Encrypted: nothing to match (Sluice's verdict is "encrypted").
        ("aes.7z", sevenz(&["-psecret"], both), None),
        (
            "aes-headers.7z",
            sevenz(&["-psecret", "-mhe=on"], both),
            None,
        ),
        (
            "zip-in.7z",
            sevenz(&[], &[("inner.zip", &zip_eicar)]),
            Some(scan::EICAR_NAME),
        ),
        (
            "7z-in.zip",
            support::zip(&[("inner.7z", &inner_7z)], true),
            Some(scan::EICAR_NAME),
        ),
        ("stored.cab", cab(&[], both), Some(scan::EICAR_NAME)),
        ("mszip.cab", cab(&["-z"], both), Some(scan::EICAR_NAME)),
        (
            "mszip-mark.cab",
            cab(&["-z"], marked),
            Some("Sluice.Test.Held"),
        ),
        ("clean.cab", cab(&["-z"], clean), None),
        (
            "cab-in.7z",
            sevenz(&[], &[("inner.cab", &cab(&["-z"], both))]),
            Some(scan::EICAR_NAME),
        ),
    ];
    agree(&[("test.ndb", ndb.as_bytes())], &samples);
}

#[test]
fn bzip2_and_deflate_in_7z_are_unpacked_where_clamscan_does_not() {
    // ClamAV's 7z reader (the LZMA SDK's) has neither decoder ("extraction
    // failed" in its debug output): it scans such an archive's bytes only.
    // Sluice unpacks both.
    let text = b"nothing to see here\n".repeat(50);
    let files: &[(&str, &[u8])] = &[("readme.txt", &text), ("eicar.com", scan::EICAR)];
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.ndb"), support::eicar_ndb()).unwrap();
    let scanner = Scanner::new(Arc::new(Database::builtin()), Limits::default());
    let mut paths = Vec::new();
    for method in ["-m0=BZip2", "-m0=Deflate"] {
        let a = sevenz(&[method], files);
        let name = scan::EICAR_NAME.to_string();
        assert_eq!(
            scanner.scan_file(&a),
            Verdict::Infected { name },
            "{method}"
        );
        let p = dir.path().join(format!("{method}.7z"));
        std::fs::write(&p, &a).unwrap();
        paths.push(p);
    }
    let Some(prog) = clamscan_program() else {
        return;
    };
    let found = clamscan_all(&prog, dir.path(), &paths);
    for p in &paths {
        assert_eq!(found[p], BTreeSet::new(), "clamscan unpacks {p:?} now");
    }
}

#[test]
fn encrypted_7z_entries_follow_the_encrypted_policy() {
    let both: &[(&str, &[u8])] = &[("a.txt", b"hello"), ("eicar.com", scan::EICAR)];
    for args in [&["-psecret"][..], &["-psecret", "-mhe=on"]] {
        let a = sevenz(args, both);
        let reject = Scanner::new(Arc::new(Database::builtin()), Limits::default());
        assert_eq!(reject.scan_file(&a), Verdict::Encrypted, "{args:?}");
        let allow = Scanner::new(
            Arc::new(Database::builtin()),
            Limits {
                encrypted: scan::EncryptedPolicy::Allow,
                ..Limits::default()
            },
        );
        assert_eq!(allow.scan_file(&a), Verdict::Clean, "{args:?}");
    }
}

#[test]
fn cdb_for_7z_and_cab_agrees_with_clamscan() {
    let cdb = "Sluice.Test.Cdb7zName:CL_TYPE_7Z:*:evil[0-9]+\\.exe$:*:*:*:*:*:*\n\
         Sluice.Test.Cdb7zSize:CL_TYPE_7Z:*:^sized:0:20-30:*:*:*:*\n\
         Sluice.Test.Cdb7zPos:CL_TYPE_7Z:*:^pos:*:*:*:2:*:*\n\
         Sluice.Test.Cdb7zEnc:CL_TYPE_7Z:*:^locked:*:*:1:*:*:*\n\
         Sluice.Test.CdbCabName:CL_TYPE_MSCAB:*:bad[0-9]+\\.dll$:*:*:*:*:*:*\n\
         Sluice.Test.CdbCabPos:CL_TYPE_MSCAB:*:^cabpos:0:*:0:2:*:*\n";
    let pad = |n: usize| vec![b'.'; n];
    let samples: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        (
            "name.7z",
            sevenz(&[], &[("readme.txt", b"hello"), ("evil42.exe", b"MZ")]),
            Some("Sluice.Test.Cdb7zName"),
        ),
        (
            "name-clean.7z",
            sevenz(&[], &[("evil42.exe.txt", b"MZ")]),
            None,
        ),
        (
            "size.7z",
            sevenz(&[], &[("sized.bin", &pad(25))]),
            Some("Sluice.Test.Cdb7zSize"),
        ),
        (
            "size-clean.7z",
            sevenz(&[], &[("sized.bin", &pad(40))]),
            None,
        ),
        (
            "pos.7z",
            sevenz(&[], &[("a", b"a"), ("b", b"b"), ("pos.txt", b"p")]),
            Some("Sluice.Test.Cdb7zPos"),
        ),
        (
            "pos-clean.7z",
            // 7-Zip orders the names: the only file is at position 0.
            sevenz(&[], &[("pos.txt", b"p")]),
            None,
        ),
        (
            "enc.7z",
            sevenz(&["-psecret"], &[("locked.doc", b"secret")]),
            Some("Sluice.Test.Cdb7zEnc"),
        ),
        (
            "enc-clean.7z",
            sevenz(&[], &[("locked.doc", b"secret")]),
            None,
        ),
        (
            "name.cab",
            cab(&["-z"], &[("readme.txt", b"hello"), ("bad7.dll", b"MZ")]),
            Some("Sluice.Test.CdbCabName"),
        ),
        (
            "pos.cab",
            cab(&[], &[("a", b"a"), ("b", b"b"), ("cabpos.txt", b"p")]),
            Some("Sluice.Test.CdbCabPos"),
        ),
        (
            "pos-clean.cab",
            cab(&[], &[("a", b"a"), ("cabpos.txt", b"p"), ("b", b"b")]),
            None,
        ),
    ];
    agree(&[("test.cdb", cdb.as_bytes())], &samples);
}

#[test]
fn sevenz_bomb_stops_at_the_limit() {
    // 200 MB of zeros: a few tens of KB of LZMA2.
    let zeros = vec![0u8; 200 << 20];
    let bomb = sevenz(&["-m0=lzma2"], &[("zeros.bin", &zeros)]);
    drop(zeros);
    assert!(bomb.len() < 1 << 20, "{}", bomb.len());
    let scanner = Scanner::new(Arc::new(Database::builtin()), Limits::default());
    let mut s = scanner.file_session();
    s.feed(&bomb);
    let (v, stats) = s.finish_with_stats();
    assert_eq!(
        v,
        Verdict::LimitExceeded(scan::LimitKind::Ratio),
        "{stats:?}"
    );
    // Stopped a piece after the ratio was crossed, not after decoding it all.
    let bound = (bomb.len() as u64) * Limits::default().max_ratio + 64 * 1024;
    assert!(stats.unpacked_bytes <= bound, "{stats:?}");
}

#[test]
fn oversized_7z_and_cab_give_the_held_archive_limit() {
    let noise = support::noise(64 * 1024, 7);
    let limits = Limits {
        max_held_archive_size: 16 * 1024,
        ..Limits::default()
    };
    let scanner = Scanner::new(Arc::new(Database::builtin()), limits);
    for a in [
        sevenz(&["-m0=Copy"], &[("noise.bin", &noise)]),
        cab(&[], &[("noise.bin", &noise)]),
    ] {
        assert_eq!(
            scanner.scan_file(&a),
            Verdict::LimitExceeded(scan::LimitKind::HeldArchiveSize)
        );
    }
}

#[test]
fn a_7z_asking_for_a_huge_dictionary_gives_the_held_archive_limit() {
    // A plain header (-mhc=off) whose LZMA coder's dictionary is rewritten to
    // 1 GiB, the CRCs fixed: not decoded, and not let through as clean.
    let text = b"nothing to see here\n".repeat(50);
    let mut a = sevenz(&["-m0=lzma", "-mhc=off"], &[("readme.txt", &text)]);
    let coder = a
        .windows(4)
        .rposition(|w| w == [0x03, 0x01, 0x01, 0x05])
        .expect("an LZMA coder with 5 property bytes");
    a[coder + 5..coder + 9].copy_from_slice(&(1u32 << 30).to_le_bytes());
    let header_at = 32 + u64::from_le_bytes(a[12..20].try_into().unwrap()) as usize;
    let header_crc = crc32fast::hash(&a[header_at..]);
    a[28..32].copy_from_slice(&header_crc.to_le_bytes());
    let start_crc = crc32fast::hash(&a[12..32]);
    a[8..12].copy_from_slice(&start_crc.to_le_bytes());
    let scanner = Scanner::new(Arc::new(Database::builtin()), Limits::default());
    assert_eq!(
        scanner.scan_file(&a),
        Verdict::LimitExceeded(scan::LimitKind::HeldArchiveSize)
    );
}

#[test]
fn sevenz_and_cab_clamav_testfiles() {
    // ClamAV's own test archives, each holding its clam.exe test program,
    // found by its MD5 as clamscan finds it.
    let Some(dir) = clamav_testfiles() else {
        return;
    };
    let db = tempfile::tempdir().unwrap();
    let hdb = "aa15bcf478d165efd2065190eb473bcb:544:ClamAV-Test-File\n";
    std::fs::write(db.path().join("t.hdb"), hdb).unwrap();
    let (loaded, _) = Database::load_dir(db.path()).unwrap();
    let scanner = Scanner::new(Arc::new(loaded), Limits::default());
    let mut mine = Vec::new();
    let mut paths = Vec::new();
    for name in ["clam.7z", "clam.cab"] {
        let p = dir.join(name);
        let v = match scanner.scan_file(&std::fs::read(&p).unwrap()) {
            Verdict::Infected { name } => Some(name),
            _ => None,
        };
        assert_eq!(v.as_deref(), Some("ClamAV-Test-File"), "{name}");
        mine.push((name, v));
        paths.push(p);
    }
    agree_with_clamscan(db.path(), &mine, &paths);
}
