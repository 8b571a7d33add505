//! The built-in scanner's figures against ClamAV, in one run: load time and
//! resident memory of Sluice, `clamscan` and `clamd` on one realistically
//! shaped database, and their throughput on four mails.
//!
//! ```text
//! cargo run --release -p sluice-scan --example figures [-- [OUTDIR] [--reps N]]
//! ```
//!
//! Writes into OUTDIR (default `$TMPDIR/sluice-figures`, about 70 MB):
//! - `db/`: 300,000 `.hdb` MD5 signatures, 100,000 `.ndb` body signatures,
//!   50,000 `.ldb` logical ones of which 5,000 with a PCRE subsignature (from
//!   the `gen_ldb` example), 20,000 `.mdb` section hashes and 1,000 `.imp`
//!   import hashes; body signature lengths follow the spread of ClamAV's
//!   official `.ndb` (most 16 to 64 bytes, a tail to 512), a third with
//!   wildcards, gaps or alternatives;
//! - `samples/`: (a) a mail with a 10 MB attachment in base64, (b) a mail with
//!   a zip of 1,000 small files, (c) a mail with a 5 MB Word 97 document with a
//!   VBA project (built as the tests build OLE2 files), (d) an HTML mail with 500
//!   links.
//!
//! Then it measures, each figure the median of N runs (default 3):
//! - Sluice, in a child process of this example (so that its memory is the
//!   engine's alone): load time (reading the files and building the database),
//!   resident memory after the load, and each mail scanned in-process in
//!   64 KiB pieces as SMTP delivers it;
//! - `clamscan`: each mail timed on its own `clamscan --database DB` run,
//!   minus the median run on an empty file (the load), whose time is its load
//!   time and whose peak resident set its memory. So that the difference is
//!   well above the noise, one run scans copies of the mail (as many as make
//!   about 30 MB, at most 200), and the time is divided among them;
//! - every copy and every run's mail gets a header line of its own
//!   (`X-Figures-Copy: N`), as ClamAV skips content whose MD5 it has seen
//!   clean (clamd keeps that cache between scans);
//! - `clamd`: started with a temporary config (`DatabaseDirectory` the
//!   generated database, `LocalSocket` in OUTDIR, `Foreground yes`), load time
//!   from its start to its first `PONG`, resident memory then, and each mail
//!   sent by INSTREAM over the socket.
//!
//! Throughput is megabytes (10^6 bytes) of mail per second. Peers that are not
//! installed are left out of the table. Not run by CI (it takes minutes).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scan::{DatabaseBuilder, Limits, Scanner, Verdict};

#[path = "gen_ldb.rs"]
#[allow(dead_code)]
mod gen_ldb;

#[path = "../tests/support/base64_body.rs"]
mod base64_body;
use base64_body::b64;

#[path = "../tests/support/cfb.rs"]
#[allow(dead_code)]
mod cfb;

use gen_ldb::Rng;

/// The four mails: file name and what they are.
const SAMPLES: [(&str, &str); 4] = [
    ("a-base64.eml", "(a) 10 MB base64 attachment"),
    ("b-zip.eml", "(b) zip of 1,000 small files"),
    ("c-office.eml", "(c) 5 MB Word document with VBA"),
    ("d-html.eml", "(d) HTML mail, 500 links"),
];

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// A length in `lo..hi`, spread evenly on a log scale.
fn log_uniform(r: &mut Rng, lo: u64, hi: u64) -> u64 {
    let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
    let u = (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    ((a + (b - a) * u).exp() as u64).clamp(lo, hi - 1)
}

/// The length in bytes of a body signature, as spread in ClamAV's `.ndb`.
fn body_len(r: &mut Rng) -> usize {
    let (lo, hi) = match r.below(10) {
        0 => (8, 16),
        1..=3 => (16, 32),
        4..=6 => (32, 64),
        7 | 8 => (64, 128),
        _ => (128, 512),
    };
    lo + r.below(hi - lo)
}

fn ndb_line(r: &mut Rng, i: usize) -> String {
    let len = body_len(r);
    let mut lit = |n: usize| hex(&r.bytes(n.max(4)));
    let body = match i % 9 {
        0 => format!("{}??{}", lit(len / 2), lit(len / 2)),
        1 => format!("{}{{2-24}}{}", lit(len / 2), lit(len / 2)),
        2 => format!("{}*{}", lit(len / 2), lit(len / 2)),
        3 => format!("{}(aabb|ccdd|eeff){}", lit(len / 2), lit(len / 2)),
        _ => lit(len),
    };
    let target = match i % 20 {
        0..=10 => 0,
        11..=17 => 1,
        _ => 3,
    };
    let offset = if i.is_multiple_of(10) { "0" } else { "*" };
    format!("Bench.Ndb.{i}:{target}:{offset}:{body}\n")
}

/// Writes the database; returns its line counts by format.
fn write_db(db: &Path) -> Vec<(&'static str, usize)> {
    let mut r = Rng(0x05ee_df16);
    let write = |name: &str, text: String| std::fs::write(db.join(name), text).unwrap();
    let mut hdb = String::new();
    for i in 0..300_000 {
        let size = log_uniform(&mut r, 64, 20 << 20);
        hdb.push_str(&format!("{}:{size}:Bench.Hdb.{i}\n", hex(&r.bytes(16))));
    }
    write("bench.hdb", hdb);
    let ndb: String = (0..100_000).map(|i| ndb_line(&mut r, i)).collect();
    write("bench.ndb", ndb);
    let (ldb, _) = gen_ldb::generate(&mut r, 50_000, 5_000);
    write("bench.ldb", ldb);
    let mut mdb = String::new();
    for i in 0..20_000 {
        let size = log_uniform(&mut r, 1, 8192) * 512;
        mdb.push_str(&format!("{size}:{}:Bench.Mdb.{i}\n", hex(&r.bytes(16))));
    }
    write("bench.mdb", mdb);
    let mut imp = String::new();
    for i in 0..1_000 {
        let size = log_uniform(&mut r, 20, 8000);
        imp.push_str(&format!("{}:{size}:Bench.Imp.{i}\n", hex(&r.bytes(16))));
    }
    write("bench.imp", imp);
    vec![
        ("hdb", 300_000),
        ("ndb", 100_000),
        ("ldb", 50_000),
        ("mdb", 20_000),
        ("imp", 1_000),
    ]
}

fn mail(content_type: &str, name: &str, data: &[u8]) -> Vec<u8> {
    let mut m = format!(
        "From: a@example.org\r\nTo: b@example.org\r\nSubject: figures\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhi\r\n--b\r\n\
Content-Type: {content_type}; name=\"{name}\"\r\nContent-Transfer-Encoding: base64\r\n\
Content-Disposition: attachment; filename=\"{name}\"\r\n\r\n"
    )
    .into_bytes();
    m.extend_from_slice(&b64(data));
    m.extend_from_slice(b"--b--\r\n");
    m
}

/// Text-like bytes: words from a small vocabulary.
fn words(r: &mut Rng, len: usize) -> Vec<u8> {
    const W: [&[u8]; 12] = [
        b"the ",
        b"mail ",
        b"server ",
        b"scans ",
        b"every ",
        b"part ",
        b"of ",
        b"it ",
        b"quarterly ",
        b"report ",
        b"figures, ",
        b"attached.\r\n",
    ];
    let mut v = Vec::with_capacity(len + 16);
    while v.len() < len {
        v.extend_from_slice(W[r.below(W.len())]);
    }
    v.truncate(len);
    v
}

/// An attachment like real ones: text-like and random in 64 KiB stretches.
fn attachment(r: &mut Rng, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        let n = (64 << 10).min(len - v.len());
        if (v.len() >> 16) % 2 == 0 {
            v.extend_from_slice(&words(r, n));
        } else {
            v.extend_from_slice(&r.bytes(n));
        }
    }
    v
}

fn write_samples(dir: &Path) {
    let mut r = Rng(0xfa11);
    let a = mail(
        "application/octet-stream",
        "attachment.bin",
        &attachment(&mut r, 10 << 20),
    );
    let mut zw = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for i in 0..1_000 {
        let len = 500 + r.below(3_500);
        zw.start_file(format!("docs/file{i:04}.txt"), opts).unwrap();
        let body = if i % 4 == 0 {
            r.bytes(len)
        } else {
            words(&mut r, len)
        };
        zw.write_all(&body).unwrap();
    }
    let b = mail(
        "application/zip",
        "files.zip",
        &zw.finish().unwrap().into_inner(),
    );
    let module = |name: &str, lines: usize, r: &mut Rng| {
        let mut src = format!("Attribute VB_Name = \"{name}\"\r\nSub AutoOpen()\r\n").into_bytes();
        for k in 0..lines {
            src.extend_from_slice(format!("  x{k} = \"").as_bytes());
            src.extend_from_slice(&words(r, 40));
            src.extend_from_slice(b"\"\r\n");
        }
        src.extend_from_slice(b"End Sub\r\n");
        src
    };
    let (m1, m2) = (
        module("ThisDocument", 50, &mut r),
        module("Module1", 400, &mut r),
    );
    let doc = cfb::word_doc(
        &words(&mut r, 5 << 20),
        &[("ThisDocument", &m1), ("Module1", &m2)],
    );
    let c = mail("application/msword", "report.doc", &doc);
    let mut html = String::from("<html><head><title>Newsletter</title></head><body>\r\n");
    for i in 0..500 {
        html.push_str(&format!(
            "<p>Item {i}: <a href=\"https://www{}.example{}.com/news/{i}?ref=mail\">read more about item {i}</a> \
             and <b>more</b> text around it.</p>\r\n",
            i % 7,
            i % 50
        ));
    }
    html.push_str("</body></html>\r\n");
    let mut d = b"From: news@example.org\r\nTo: b@example.org\r\nSubject: newsletter\r\n\
MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n"
        .to_vec();
    d.extend_from_slice(html.as_bytes());
    for ((name, _), bytes) in SAMPLES.iter().zip([a, b, c, d]) {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

/// The mail with a header line of its own, so that no cache knows it.
fn variant(m: &[u8], k: usize) -> Vec<u8> {
    let mut v = format!("X-Figures-Copy: {k}\r\n").into_bytes();
    v.extend_from_slice(m);
    v
}

/// How many copies of a mail of `size` bytes one clamscan run scans.
fn copies(size: usize) -> usize {
    (30_000_000 / size.max(1)).clamp(1, 200)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A line of `/proc/PID/status`, in KiB.
fn status_kib(pid: &str, key: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The child's mode: load the database and scan the samples, printing
/// `load SECS`, `rss KIB` and `scan NAME SECS VERDICT` lines.
fn sluice_child(out: &Path, reps: usize) {
    let t = Instant::now();
    let mut b = DatabaseBuilder::new();
    b.add_dir(out.join("db")).unwrap();
    let (db, report) = b.build().unwrap();
    let load = t.elapsed().as_secs_f64();
    println!("load {load}");
    println!("rss {}", status_kib("self", "VmRSS:").unwrap_or(0));
    eprintln!("sluice: {report}");
    let scanner = Scanner::new(Arc::new(db), Limits::default());
    for (name, _) in SAMPLES {
        let m = std::fs::read(out.join("samples").join(name)).unwrap();
        let mut times = Vec::new();
        let mut verdict = Verdict::Clean;
        for rep in 0..reps {
            let m = variant(&m, rep);
            let t = Instant::now();
            let mut s = scanner.session();
            for c in m.chunks(64 << 10) {
                s.feed(c);
            }
            verdict = s.finish();
            times.push(t.elapsed().as_secs_f64());
        }
        println!("scan {name} {} {verdict:?}", median(times));
    }
}

/// One engine's figures: load seconds, resident KiB after load, and per
/// sample the scan seconds and verdict.
struct Figures {
    load: f64,
    rss_kib: u64,
    scans: Vec<(f64, String)>,
}

fn sluice(out: &Path, reps: usize) -> Figures {
    let exe = std::env::current_exe().unwrap();
    let o = Command::new(exe)
        .arg("--sluice-child")
        .arg(out)
        .arg(reps.to_string())
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(o.status.success(), "the Sluice child failed");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut f = Figures {
        load: 0.0,
        rss_kib: 0,
        scans: Vec::new(),
    };
    for l in text.lines() {
        let w: Vec<&str> = l.splitn(4, ' ').collect();
        match w.as_slice() {
            ["load", s] => f.load = s.parse().unwrap(),
            ["rss", k] => f.rss_kib = k.parse().unwrap(),
            ["scan", _, s, v] => f.scans.push((s.parse().unwrap(), v.to_string())),
            _ => {}
        }
    }
    f
}

/// Runs `clamscan` on `files`: wall seconds, peak resident KiB, and what it
/// said of the first.
fn clamscan_once(db: &Path, files: &[PathBuf]) -> Option<(f64, u64, String)> {
    let t = Instant::now();
    let mut child = Command::new("clamscan")
        .args(["--no-summary", "--database"])
        .arg(db)
        .args(files)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let pid = child.id().to_string();
    let mut peak = 0;
    let status = loop {
        if let Some(s) = child.try_wait().ok()? {
            break s;
        }
        peak = peak.max(status_kib(&pid, "VmHWM:").unwrap_or(0));
        std::thread::sleep(Duration::from_millis(5));
    };
    let secs = t.elapsed().as_secs_f64();
    let mut said = String::new();
    child.stdout.take()?.read_to_string(&mut said).ok()?;
    status.code()?;
    let said = said
        .lines()
        .next()
        .and_then(|l| l.rsplit_once(": "))
        .map_or(String::new(), |(_, v)| v.to_string());
    Some((secs, peak, said))
}

fn clamscan(out: &Path, reps: usize) -> Option<Figures> {
    let db = out.join("db");
    let empty = out.join("samples/empty");
    std::fs::write(&empty, b"").ok()?;
    let mut loads = Vec::new();
    let mut peaks = Vec::new();
    for _ in 0..reps {
        let (s, peak, _) = clamscan_once(&db, std::slice::from_ref(&empty))?;
        loads.push(s);
        peaks.push(peak as f64);
    }
    let load = median(loads);
    let copy_dir = out.join("copies");
    let mut scans = Vec::new();
    for (name, _) in SAMPLES {
        let m = std::fs::read(out.join("samples").join(name)).ok()?;
        let n = copies(m.len());
        std::fs::create_dir_all(&copy_dir).ok()?;
        let files: Vec<PathBuf> = (0..n)
            .map(|k| {
                let p = copy_dir.join(format!("{k}-{name}"));
                std::fs::write(&p, variant(&m, k)).map(|()| p)
            })
            .collect::<Result<_, _>>()
            .ok()?;
        let mut times = Vec::new();
        let mut said = String::new();
        for _ in 0..reps {
            let (s, _, v) = clamscan_once(&db, &files)?;
            times.push(s);
            said = v;
        }
        let _ = std::fs::remove_dir_all(&copy_dir);
        scans.push((((median(times) - load) / n as f64).max(1e-6), said));
    }
    Some(Figures {
        load,
        rss_kib: median(peaks) as u64,
        scans,
    })
}

/// Asks clamd for a `PONG`.
fn ping(sock: &Path) -> bool {
    let Ok(mut s) = UnixStream::connect(sock) else {
        return false;
    };
    let mut reply = Vec::new();
    s.write_all(b"zPING\0").is_ok()
        && s.read_to_end(&mut reply).is_ok()
        && reply.starts_with(b"PONG")
}

/// Stops the clamd this example started, whatever happens.
struct Clamd(Child);

impl Drop for Clamd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn clamd(out: &Path, reps: usize) -> Option<Figures> {
    let sock = out.join("clamd.sock");
    let _ = std::fs::remove_file(&sock);
    let conf = out.join("clamd.conf");
    std::fs::write(
        &conf,
        format!(
            "DatabaseDirectory {}\nLocalSocket {}\nForeground yes\nStreamMaxLength 64M\n\
             LogFile {}\nLogTime yes\n",
            out.join("db").display(),
            sock.display(),
            out.join("clamd.log").display()
        ),
    )
    .ok()?;
    let t = Instant::now();
    let child = Command::new("clamd")
        .arg(format!("--config-file={}", conf.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut d = Clamd(child);
    let pid = d.0.id().to_string();
    while !ping(&sock) {
        if d.0.try_wait().ok()?.is_some() || t.elapsed() > Duration::from_secs(600) {
            eprintln!(
                "clamd did not start: see {}",
                out.join("clamd.log").display()
            );
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let load = t.elapsed().as_secs_f64();
    let rss_kib = status_kib(&pid, "VmRSS:").unwrap_or(0);
    let client = scan::clamd::ClamdClient::new(
        scan::clamd::ClamdAddr::Unix(sock.clone()),
        Duration::from_secs(300),
    );
    let mut scans = Vec::new();
    for (name, _) in SAMPLES {
        let m = std::fs::read(out.join("samples").join(name)).ok()?;
        let mut times = Vec::new();
        let mut said = String::new();
        for rep in 0..reps {
            let m = variant(&m, rep);
            let t = Instant::now();
            said = match client.scan(&m) {
                Ok(v) => format!("{v:?}"),
                Err(e) => format!("error: {e}"),
            };
            times.push(t.elapsed().as_secs_f64());
        }
        scans.push((median(times), said));
    }
    drop(d);
    Some(Figures {
        load,
        rss_kib,
        scans,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--sluice-child") {
        sluice_child(Path::new(&args[1]), args[2].parse().unwrap());
        return;
    }
    let mut reps = 3;
    let mut out = std::env::temp_dir().join("sluice-figures");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--reps" => reps = it.next().and_then(|n| n.parse().ok()).expect("--reps N"),
            dir => out = PathBuf::from(dir),
        }
    }
    let db = out.join("db");
    let samples = out.join("samples");
    let _ = std::fs::remove_dir_all(&db);
    std::fs::create_dir_all(&db).unwrap();
    std::fs::create_dir_all(&samples).unwrap();
    let counts = write_db(&db);
    write_samples(&samples);
    let sizes: Vec<u64> = SAMPLES
        .iter()
        .map(|(n, _)| std::fs::metadata(samples.join(n)).unwrap().len())
        .collect();
    println!(
        "database in {}: {}",
        db.display(),
        counts
            .iter()
            .map(|(e, n)| format!("{n} .{e}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("medians of {reps} runs\n");
    let mut engines: Vec<(&str, Figures)> = vec![("Sluice", sluice(&out, reps))];
    match clamscan(&out, reps) {
        Some(f) => engines.push(("clamscan", f)),
        None => println!("clamscan: not installed, left out"),
    }
    match clamd(&out, reps) {
        Some(f) => engines.push(("clamd INSTREAM", f)),
        None => println!("clamd: not installed or did not start, left out"),
    }
    print!("| {:<50} |", "");
    for (name, _) in &engines {
        print!(" {name:>16} |");
    }
    println!();
    print!("|{}|", "-".repeat(52));
    for _ in &engines {
        print!("{}|", "-".repeat(18));
    }
    println!();
    print!("| {:<50} |", "load (s)");
    for (_, f) in &engines {
        print!(" {:>16.2} |", f.load);
    }
    println!();
    print!("| {:<50} |", "resident memory after load (MiB)");
    for (_, f) in &engines {
        print!(" {:>16.0} |", f.rss_kib as f64 / 1024.0);
    }
    println!();
    for (i, ((_, what), size)) in SAMPLES.iter().zip(&sizes).enumerate() {
        let label = format!("{what}, {:.2} MB (MB/s)", *size as f64 / 1e6);
        print!("| {label:<50} |");
        for (_, f) in &engines {
            print!(" {:>16.1} |", *size as f64 / f.scans[i].0 / 1e6);
        }
        println!();
    }
    println!();
    let sl = &engines[0].1;
    for (name, f) in &engines[1..] {
        let ratios: Vec<String> = sl
            .scans
            .iter()
            .zip(&f.scans)
            .map(|(s, p)| format!("{:.1}x", p.0 / s.0))
            .collect();
        println!(
            "Sluice vs {name}: throughput {} ; load {:.2}x faster ; memory {:.2}x less",
            ratios.join(" "),
            f.load / sl.load,
            f.rss_kib as f64 / sl.rss_kib.max(1) as f64
        );
    }
    println!("\nverdicts:");
    for (i, (n, _)) in SAMPLES.iter().enumerate() {
        let v: Vec<String> = engines
            .iter()
            .map(|(e, f)| format!("{e}: {}", f.scans[i].1))
            .collect();
        println!("  {n}: {}", v.join("; "));
    }
}
