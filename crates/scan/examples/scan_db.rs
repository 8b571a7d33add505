//! Loads a signature database directory and scans files as single files (not as
//! mail), printing the load report, the load time and each verdict with its scan
//! rate: for measuring against `clamscan -d DIR FILE...` on the same database.
//!
//! ```text
//! cargo run --release --example scan_db -- DBDIR FILE...
//! ```

use std::sync::Arc;
use std::time::Instant;

use scan::{Database, Limits, Scanner};

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: scan_db DBDIR FILE...");
    let t = Instant::now();
    let (db, report) = Database::load_dir(&dir).expect("database loads");
    println!("loaded in {:.3} s: {report}", t.elapsed().as_secs_f64());
    for e in &report.errors {
        println!("  {e}");
    }
    let scanner = Scanner::new(Arc::new(db), Limits::default());
    for file in args {
        let bytes = std::fs::read(&file).expect("file reads");
        let t = Instant::now();
        let (verdict, stats) = {
            let mut s = scanner.file_session();
            s.feed(&bytes);
            s.finish_with_stats()
        };
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{file}: {verdict} ({:.1} MB/s, {} bytes, regex window truncated {})",
            bytes.len() as f64 / secs / 1e6,
            bytes.len(),
            stats.regex_window_truncated
        );
    }
}
