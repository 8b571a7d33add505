//! The generated corpus: EICAR and test signatures in every encoding and archive the
//! pipeline reads, fed whole, one byte at a time and split at every position; bombs
//! against every limit; encrypted zips.

mod support;

use std::sync::Arc;

use scan::{Database, DatabaseBuilder, EncryptedPolicy, LimitKind, Limits, Scanner, Verdict};
use support::*;

fn db() -> Arc<Database> {
    let mut b = DatabaseBuilder::new();
    b.add_ndb(NDB);
    b.add_hashes(&hdb_line());
    let (db, report) = b.build().unwrap();
    assert_eq!(report.refused(), 0, "{report:?}");
    Arc::new(db)
}

fn scanner(limits: Limits) -> Scanner {
    Scanner::new(db(), limits)
}

fn verdict_of(s: &Scanner, name: &str, bytes: &[u8], chunks: &[usize]) -> Verdict {
    let mut session = if name.ends_with(".eml") {
        s.session()
    } else {
        s.file_session()
    };
    let mut rest = bytes;
    let mut i = 0;
    while !rest.is_empty() {
        let n = if chunks.is_empty() {
            rest.len()
        } else {
            chunks[i % chunks.len()].min(rest.len())
        };
        session.feed(&rest[..n]);
        rest = &rest[n..];
        i += 1;
    }
    session.finish()
}

fn expected(e: Option<&str>) -> Verdict {
    match e {
        Some(n) => Verdict::Infected { name: n.into() },
        None => Verdict::Clean,
    }
}

#[test]
fn corpus_whole_and_in_odd_chunks() {
    let s = scanner(Limits::default());
    for (name, bytes, want) in corpus() {
        let want = expected(want);
        assert_eq!(verdict_of(&s, &name, &bytes, &[]), want, "{name} whole");
        assert_eq!(
            verdict_of(&s, &name, &bytes, &[7, 1, 4096, 13]),
            want,
            "{name} odd chunks"
        );
    }
}

#[test]
fn corpus_one_byte_at_a_time() {
    let s = scanner(Limits::default());
    for (name, bytes, want) in corpus() {
        assert_eq!(
            verdict_of(&s, &name, &bytes, &[1]),
            expected(want),
            "{name}"
        );
    }
}

#[test]
fn split_at_every_boundary() {
    let s = scanner(Limits::default());
    let fixtures = [
        (
            "b64-eicar.eml",
            mail_with("eicar.com", scan::EICAR, "base64"),
            scan::EICAR_NAME,
        ),
        (
            "qp-ndb.eml",
            mail_with("sig.txt", NDB_PAYLOAD, "quoted-printable"),
            NDB_NAME,
        ),
        (
            "uu-eicar.eml",
            uu_mail("e.com", scan::EICAR),
            scan::EICAR_NAME,
        ),
        (
            "zip-stream-hdb.eml",
            mail_with(
                "d.zip",
                &zip_streamed(&[("k.bin", HDB_FILE)], false),
                "base64",
            ),
            HDB_NAME,
        ),
        ("gz-ndb.bin", gzip(NDB_PAYLOAD), NDB_NAME),
        ("bz2-eicar.bin", bzip2(scan::EICAR), scan::EICAR_NAME),
        ("xz-ndb.bin", xz(NDB_PAYLOAD), NDB_NAME),
        ("tar-hdb.bin", tar(&[("k.bin", HDB_FILE)]), HDB_NAME),
    ];
    for (name, bytes, sig) in fixtures {
        for cut in 0..=bytes.len() {
            let mut session = if name.ends_with(".eml") {
                s.session()
            } else {
                s.file_session()
            };
            session.feed(&bytes[..cut]);
            session.feed(&bytes[cut..]);
            assert_eq!(
                session.finish(),
                Verdict::Infected { name: sig.into() },
                "{name} cut at {cut}"
            );
        }
    }
}

#[test]
fn target_type_signatures_need_their_file_type() {
    let mut b = DatabaseBuilder::new();
    b.add_ndb("Sluice.Test.PE:1:*:50452d4f4e4c59\n");
    let s = Scanner::new(Arc::new(b.build().unwrap().0), Limits::default());
    assert_eq!(
        s.scan_file(b"MZ....PE-ONLY...."),
        Verdict::Infected {
            name: "Sluice.Test.PE".into()
        }
    );
    assert_eq!(s.scan_file(b"text..PE-ONLY...."), Verdict::Clean);
}

#[test]
fn encrypted_zip_policy() {
    let z = zip_streamed(&[("secret.exe", b"whatever is inside")], true);
    let mail = mail_with("secret.zip", &z, "base64");
    let reject = scanner(Limits::default());
    assert_eq!(reject.scan_mail(&mail), Verdict::Encrypted);
    let allow = scanner(Limits {
        encrypted: EncryptedPolicy::Allow,
        ..Limits::default()
    });
    let mut s = allow.session();
    s.feed(&mail);
    let (v, stats) = s.finish_with_stats();
    assert_eq!(v, Verdict::Clean);
    assert_eq!(stats.encrypted_entries, 1);
    // A virus next to an encrypted entry is still found.
    let z = zip_streamed(&[("secret.exe", b"x"), ("eicar.com", scan::EICAR)], false);
    assert!(matches!(reject.scan_file(&z), Verdict::Infected { .. }));
}

#[test]
fn ratio_bomb() {
    let zeros = vec![0u8; 8 << 20];
    let s = scanner(Limits::default());
    assert_eq!(
        s.scan_file(&gzip(&zeros)),
        Verdict::LimitExceeded(LimitKind::Ratio)
    );
    assert_eq!(
        s.scan_mail(&mail_with(
            "z.zip",
            &zip(&[("zeros", &zeros)], true),
            "base64"
        )),
        Verdict::LimitExceeded(LimitKind::Ratio)
    );
}

#[test]
fn unpacked_bytes_limit() {
    let s = scanner(Limits {
        max_unpacked_bytes: 1 << 20,
        ..Limits::default()
    });
    let data = noise(2 << 20, 3);
    assert_eq!(
        s.scan_file(&gzip(&data)),
        Verdict::LimitExceeded(LimitKind::UnpackedBytes)
    );
    assert_eq!(
        s.scan_file(&xz(&data)),
        Verdict::LimitExceeded(LimitKind::UnpackedBytes)
    );
}

#[test]
fn nesting_depth_limit() {
    let s = scanner(Limits {
        max_depth: 3,
        ..Limits::default()
    });
    let mut data = b"innocent".to_vec();
    for _ in 0..3 {
        data = gzip(&data);
    }
    assert_eq!(s.scan_file(&data), Verdict::Clean);
    data = gzip(&data);
    assert_eq!(s.scan_file(&data), Verdict::LimitExceeded(LimitKind::Depth));
    // The classic: zips in zips.
    let mut z = zip(&[("eicar.com", scan::EICAR)], true);
    for i in 0..5 {
        let name = format!("level{i}.zip");
        z = zip(&[(name.as_str(), &z)], true);
    }
    assert_eq!(s.scan_file(&z), Verdict::LimitExceeded(LimitKind::Depth));
    assert!(matches!(
        scanner(Limits::default()).scan_file(&z),
        Verdict::Infected { .. }
    ));
}

#[test]
fn entries_and_parts_limits() {
    let s = scanner(Limits {
        max_entries: 10,
        max_parts: 10,
        ..Limits::default()
    });
    let names: Vec<String> = (0..20).map(|i| format!("f{i}.txt")).collect();
    let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"x"[..])).collect();
    assert_eq!(
        s.scan_file(&zip(&files, true)),
        Verdict::LimitExceeded(LimitKind::Entries)
    );
    assert_eq!(
        s.scan_file(&tar(&files)),
        Verdict::LimitExceeded(LimitKind::Entries)
    );
    let mut m = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n".to_vec();
    for _ in 0..20 {
        m.extend_from_slice(b"--b\r\n\r\npart\r\n");
    }
    m.extend_from_slice(b"--b--\r\n");
    assert_eq!(s.scan_mail(&m), Verdict::LimitExceeded(LimitKind::Parts));
}

#[test]
fn mime_depth_limit() {
    let s = scanner(Limits {
        max_mime_depth: 5,
        ..Limits::default()
    });
    let mut m = Vec::new();
    for i in 0..10 {
        m.extend_from_slice(
            format!("Content-Type: multipart/mixed; boundary=b{i}\r\n\r\n--b{i}\r\n").as_bytes(),
        );
    }
    m.extend_from_slice(b"\r\nhello\r\n");
    assert_eq!(
        s.scan_mail(&m),
        Verdict::LimitExceeded(LimitKind::MimeDepth)
    );
}

#[test]
fn infection_wins_over_limits() {
    let s = scanner(Limits {
        max_parts: 3,
        ..Limits::default()
    });
    let mut m = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\n".to_vec();
    m.extend_from_slice(scan::EICAR);
    m.extend_from_slice(b"\r\n");
    for _ in 0..5 {
        m.extend_from_slice(b"--b\r\n\r\npart\r\n");
    }
    assert!(matches!(s.scan_mail(&m), Verdict::Infected { .. }));
}

#[test]
fn truncated_and_corrupt_archives_do_not_panic() {
    let s = scanner(Limits::default());
    let z = zip(&[("eicar.com", scan::EICAR), ("b.txt", b"bbbb")], true);
    for cut in 0..z.len() {
        let _ = s.scan_file(&z[..cut]);
    }
    let g = gzip(&noise(5000, 1));
    for cut in 0..g.len() {
        let _ = s.scan_file(&g[..cut]);
    }
    let mut bad = g.clone();
    for i in (12..bad.len()).step_by(7) {
        bad[i] ^= 0x55;
    }
    let _ = s.scan_file(&bad);
}

#[test]
fn memory_does_not_follow_message_size() {
    // Indirect check without allocator hooks: a 20 MB base64 attachment streams
    // through in 64 KiB chunks; nothing in the session keeps it (the stats show it all
    // went by and the verdict is clean).
    let s = scanner(Limits::default());
    let mut session = s.session();
    session.feed(
        b"Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n",
    );
    let chunk = b64(&noise(48 * 1024, 9));
    for _ in 0..300 {
        session.feed(&chunk);
    }
    let (v, stats) = session.finish_with_stats();
    assert_eq!(v, Verdict::Clean);
    assert!(stats.input_bytes > 19_000_000);
}

/// A whole OLE2 file's `.hdb` hash is found whether the file is held whole
/// (hashed at its end) or grows past `max_ole2_size` (the held bytes are hashed
/// when the reader lets go of them, the rest as it streams), however it is fed.
#[test]
fn ole2_whole_file_hash_is_found_held_or_not() {
    let doc = cfb::word_doc(&noise(300_000, 7), &[]);
    let md5 = md5_hex(&doc);
    let mut b = scan::DatabaseBuilder::new();
    b.add_hashes(&format!("{md5}:{}:Sluice.Test.WholeDoc\n", doc.len()));
    let db = Arc::new(b.build().unwrap().0);
    let infected = Verdict::Infected {
        name: "Sluice.Test.WholeDoc".into(),
    };
    for max_ole2_size in [usize::MAX, 100_000, 1] {
        let s = Scanner::new(
            Arc::clone(&db),
            Limits {
                max_ole2_size,
                ..Limits::default()
            },
        );
        for chunks in [&[][..], &[1, 7, 4099][..], &[65_536][..], &[99_999, 2][..]] {
            assert_eq!(
                verdict_of(&s, "doc", &doc, chunks),
                infected,
                "max_ole2_size {max_ole2_size}, chunks {chunks:?}"
            );
        }
    }
    // One byte more and the size no longer fits: clean.
    let mut longer = doc.clone();
    longer.push(0);
    let s = Scanner::new(db, Limits::default());
    assert_eq!(s.scan_file(&longer), Verdict::Clean);
}

#[test]
fn ole2_size_limit_and_malformed_documents() {
    let doc = cfb::word_doc(
        &noise(300_000, 5),
        &[("Module1", b"Sub X()\r\nEnd Sub\r\n")],
    );
    // Too big to take apart: the limit, and the bytes are still matched whole.
    let small = scanner(Limits {
        max_ole2_size: 100_000,
        ..Limits::default()
    });
    assert_eq!(
        small.scan_file(&doc),
        Verdict::LimitExceeded(LimitKind::Ole2Size)
    );
    let mut with_eicar = doc.clone();
    with_eicar.extend_from_slice(scan::EICAR);
    assert_eq!(
        small.scan_file(&with_eicar),
        Verdict::Infected {
            name: scan::EICAR_NAME.into()
        }
    );
    let s = scanner(Limits::default());
    assert_eq!(s.scan_file(&doc), Verdict::Clean);
    // Cut short anywhere, or with its sector numbers garbled, a document is a
    // clean (malformed) outcome, never a panic.
    for cut in (0..doc.len()).step_by(4099) {
        let v = s.scan_file(&doc[..cut]);
        assert!(matches!(v, Verdict::Clean), "cut at {cut}: {v}");
    }
    let mut garbled = doc.clone();
    for at in (512..2048).step_by(4) {
        garbled[at..at + 4].copy_from_slice(&(at as u32 / 4).to_le_bytes());
    }
    let mut session = s.file_session();
    session.feed(&garbled);
    let (v, stats) = session.finish_with_stats();
    assert_eq!(v, Verdict::Clean);
    assert!(stats.malformed_archives > 0, "{stats:?}");
    // The macro alert is off by default, on when asked for.
    let alert = scanner(Limits {
        alert_macros: true,
        ..Limits::default()
    });
    assert_eq!(
        alert.scan_file(&doc),
        Verdict::Infected {
            name: "Heuristics.OLE2.ContainsMacros.VBA".into()
        }
    );
}
