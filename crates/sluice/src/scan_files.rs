//! `sluice scan [--db DIR]... [--stats] FILE... | -`: the scan pipeline on files,
//! with clamscan-like output (`path: Name FOUND`) and exit status (0 clean,
//! 1 found, 2 error); `--stats` also prints what the databases loaded.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::load_stats::Loaded;

/// Arguments of `sluice scan`.
#[derive(Args)]
pub struct ScanArgs {
    /// Directory of ClamAV signature files (.ndb, .ldb, .hdb, .hsb, .mdb, .msb,
    /// .cdb, .ftm, .ign2, .fp, .sfp, .cvd, .cld);
    /// may be repeated. EICAR is always detected.
    #[arg(long = "db")]
    databases: Vec<PathBuf>,
    /// Print what the databases loaded: signatures per format, refused lines
    /// by reason, formats not supported, load time and resident memory. With
    /// no files, only that.
    #[arg(long)]
    stats: bool,
    /// Files to scan; `-` reads standard input. A file that looks like a
    /// mail message is parsed as MIME, anything else is scanned as a file.
    #[arg(required_unless_present = "stats")]
    files: Vec<PathBuf>,
}

/// What one input turned out to be.
enum Outcome {
    Clean,
    Found,
    Error,
}

/// Reading pieces of this size keeps memory flat whatever the file size.
const PIECE: usize = 64 * 1024;

/// Runs the command; returns the process exit status.
pub fn run(args: ScanArgs, limits: scan::Limits) -> u8 {
    let loaded = match Loaded::measure(|| scan::Database::load_dirs(&args.databases)) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("sluice scan: cannot load signatures: {e}");
            return 2;
        }
    };
    if args.stats {
        println!("----------- DATABASE -----------");
        print!("{}", loaded.report.table());
        println!("Load: {}", loaded.cost());
        if args.files.is_empty() {
            return 0;
        }
    } else {
        eprintln!("{}", loaded.report);
    }
    let scanner = scan::Scanner::new(Arc::new(loaded.db), limits);
    let (mut found, mut errors) = (0, 0);
    for path in &args.files {
        match scan_one(&scanner, path) {
            Outcome::Clean => {}
            Outcome::Found => found += 1,
            Outcome::Error => errors += 1,
        }
    }
    println!("\n----------- SCAN SUMMARY -----------");
    println!("Scanned files: {}", args.files.len() - errors);
    println!("Infected files: {found}");
    if errors > 0 {
        println!("Total errors: {errors}");
    }
    match (errors, found) {
        (0, 0) => 0,
        (0, _) => 1,
        _ => 2,
    }
}

fn scan_one(scanner: &scan::Scanner, path: &PathBuf) -> Outcome {
    let name = path.display().to_string();
    let mut input: Box<dyn Read> = if name == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        match std::fs::File::open(path) {
            Ok(f) => Box::new(f),
            Err(e) => {
                println!("{name}: {e} ERROR");
                return Outcome::Error;
            }
        }
    };
    let mut buf = vec![0; PIECE];
    let mut session: Option<scan::Session> = None;
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                println!("{name}: {e} ERROR");
                return Outcome::Error;
            }
        };
        let s = session.get_or_insert_with(|| {
            if scan::filetype::looks_like_mail(&buf[..n]) {
                scanner.session()
            } else {
                scanner.file_session()
            }
        });
        s.feed(&buf[..n]);
    }
    let verdict = session.unwrap_or_else(|| scanner.file_session()).finish();
    // Names for what is not a signature follow ClamAV's heuristics names.
    let found = match verdict {
        scan::Verdict::Clean => None,
        scan::Verdict::Infected { name } => Some(name),
        scan::Verdict::LimitExceeded(kind) => {
            Some(format!("Heuristics.Limits.Exceeded.{}", kind.as_str()))
        }
        scan::Verdict::Encrypted => Some("Heuristics.Encrypted.Archive".to_string()),
    };
    match found {
        Some(sig) => {
            println!("{name}: {sig} FOUND");
            Outcome::Found
        }
        None => {
            println!("{name}: OK");
            Outcome::Clean
        }
    }
}
