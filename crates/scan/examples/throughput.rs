//! Scan throughput and database load time, side by side with `clamscan` when it is
//! installed.
//!
//! ```text
//! cargo run --release --example throughput [NDB] [HDB] [MB] [--automaton-only]
//! ```
//!
//! Generates NDB random `.ndb` signatures (default 10,000: literals, `??`, `{n-m}`,
//! `*`, alternatives) and HDB random `.hdb` MD5 signatures (default 100,000) into a
//! database directory, a mail with an MB-megabyte (default 10) base64 attachment, and a
//! mail with the same attachment zipped; then times loading (reading the files and
//! building the index) and scanning. `--automaton-only` puts every anchor in the
//! Aho-Corasick automaton instead of the 4-gram index, for comparison.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use scan::{Limits, Scanner};

#[path = "../tests/support/base64_body.rs"]
mod base64_body;
use base64_body::b64;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn hex(&mut self, bytes: usize) -> String {
        (0..bytes)
            .map(|_| format!("{:02x}", self.next() as u8))
            .collect()
    }
}

fn ndb_line(r: &mut Rng, i: usize) -> String {
    let lit = |r: &mut Rng| {
        let n = 6 + r.below(20) as usize;
        r.hex(n)
    };
    let body = match i % 5 {
        0 | 1 => lit(r),
        2 => format!("{}????{}", lit(r), lit(r)),
        3 => format!("{}{{4-16}}{}", lit(r), lit(r)),
        _ => format!("{}*{}(aabb|ccdd){}", lit(r), lit(r), lit(r)),
    };
    format!("Bench.Ndb.{i}:0:*:{body}\n")
}

fn mail(name: &str, data: &[u8]) -> Vec<u8> {
    let mut m = format!(
        "From: a@example.org\r\nTo: b@example.org\r\nSubject: bench\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhi\r\n--b\r\n\
Content-Type: application/octet-stream; name=\"{name}\"\r\nContent-Transfer-Encoding: base64\r\n\r\n"
    )
    .into_bytes();
    m.extend_from_slice(&b64(data));
    m.extend_from_slice(b"--b--\r\n");
    m
}

/// An attachment like real ones: half text-like (compressible), half random.
fn attachment(r: &mut Rng, len: usize) -> Vec<u8> {
    let words: [&[u8]; 8] = [
        b"the ", b"mail ", b"server ", b"scans ", b"every ", b"part ", b"of ", b"it\n",
    ];
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        if (v.len() / 65536) % 2 == 0 {
            v.extend_from_slice(words[r.below(8) as usize]);
        } else {
            v.push(r.next() as u8);
        }
    }
    v.truncate(len);
    v
}

fn scan_timed(s: &Scanner, m: &[u8], runs: usize) -> (f64, scan::Verdict) {
    let mut best = f64::MAX;
    let mut verdict = scan::Verdict::Clean;
    for _ in 0..runs {
        let t = Instant::now();
        let mut session = s.session();
        for c in m.chunks(64 * 1024) {
            session.feed(c);
        }
        verdict = session.finish();
        best = best.min(t.elapsed().as_secs_f64());
    }
    (best, verdict)
}

fn clamscan_secs(db: &Path, file: &Path) -> Option<f64> {
    let t = Instant::now();
    let out = Command::new("clamscan")
        .args(["--no-summary", "-d"])
        .arg(db)
        .arg(file)
        .output()
        .ok()?;
    out.status.code()?;
    Some(t.elapsed().as_secs_f64())
}

/// Resident set size of this process, from /proc.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let automaton_only = std::env::args().any(|a| a == "--automaton-only");
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n_ndb = *args.first().unwrap_or(&10_000);
    let n_hdb = *args.get(1).unwrap_or(&100_000);
    let mb = *args.get(2).unwrap_or(&10);
    let dir = std::env::temp_dir().join("sluice-scan-bench");
    let dbdir = dir.join("db");
    std::fs::create_dir_all(&dbdir).unwrap();
    let mut r = Rng(0x5eed_1234_abcd_ef01);
    let mut ndb = std::fs::File::create(dbdir.join("bench.ndb")).unwrap();
    for i in 0..n_ndb {
        ndb.write_all(ndb_line(&mut r, i).as_bytes()).unwrap();
    }
    let mut hdb = std::fs::File::create(dbdir.join("bench.hdb")).unwrap();
    for i in 0..n_hdb {
        let size = 1 + r.below(20 << 20);
        writeln!(hdb, "{}:{size}:Bench.Hdb.{i}", r.hex(16)).unwrap();
    }
    drop((ndb, hdb));

    let t = Instant::now();
    let mut builder = scan::DatabaseBuilder::new();
    builder.automaton_only(automaton_only);
    for f in ["bench.ndb", "bench.hdb"] {
        builder
            .add_file(f, &std::fs::read(dbdir.join(f)).unwrap())
            .unwrap();
    }
    let (db, report) = builder.build().unwrap();
    let load = t.elapsed().as_secs_f64();
    println!(
        "load: {:.3} s for {} body + {} hash signatures ({} refused); anchor index {:.1} MiB",
        load,
        report.body_signatures,
        report.hash_signatures,
        report.refused(),
        db.anchor_index_bytes() as f64 / (1 << 20) as f64
    );
    let s = Scanner::new(Arc::new(db), Limits::default());

    let data = attachment(&mut r, mb << 20);
    let mut zw = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zw.start_file(
        "attachment.bin",
        zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated),
    )
    .unwrap();
    zw.write_all(&data).unwrap();
    let zipped = zw.finish().unwrap().into_inner();
    let plain_mail = mail("attachment.bin", &data);
    let zip_mail = mail("attachment.zip", &zipped);
    let pm = dir.join("b64-attachment.eml");
    let zm = dir.join("zip-attachment.eml");
    std::fs::write(&pm, &plain_mail).unwrap();
    std::fs::write(&zm, &zip_mail).unwrap();
    std::fs::write(dir.join("empty"), b"").unwrap();

    for (label, m, path) in [
        ("base64 attachment", &plain_mail, &pm),
        ("zipped attachment", &zip_mail, &zm),
    ] {
        let (secs, verdict) = scan_timed(&s, m, 3);
        let mbs = m.len() as f64 / secs / 1e6;
        print!(
            "{label}: mail {:.1} MB, sluice {:.3} s = {:.1} MB/s ({verdict:?})",
            m.len() as f64 / 1e6,
            secs,
            mbs
        );
        match (
            clamscan_secs(&dbdir, path),
            clamscan_secs(&dbdir, &dir.join("empty")),
        ) {
            (Some(total), Some(base)) => println!(
                "; clamscan {:.3} s total, {:.3} s without its db load = {:.1} MB/s",
                total,
                total - base,
                m.len() as f64 / (total - base).max(1e-3) / 1e6
            ),
            _ => println!("; clamscan not installed"),
        }
    }
    // Memory per session: 200 sessions stream the zipped mail at once, interleaved
    // 64 KiB at a time as 200 SMTP connections would.
    let n = 200;
    let rss0 = rss_kib();
    let mut sessions: Vec<_> = (0..n).map(|_| s.session()).collect();
    let mut peak = rss0;
    for chunk in zip_mail.chunks(64 * 1024) {
        for session in sessions.iter_mut() {
            session.feed(chunk);
        }
        peak = peak.max(rss_kib());
    }
    let verdicts: Vec<_> = sessions.into_iter().map(|s| s.finish()).collect();
    println!(
        "{n} concurrent sessions on the zipped mail: RSS {rss0} KiB before, peak {peak} KiB = {:.0} KiB per session ({} clean)",
        (peak - rss0) as f64 / n as f64,
        verdicts.iter().filter(|v| v.is_clean()).count()
    );
    if let Some(base) = clamscan_secs(&dbdir, &dir.join("empty")) {
        println!("clamscan load + empty scan: {base:.3} s");
    }
    println!("files in {}", dir.display());
}
